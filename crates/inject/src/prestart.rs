//! (Request, Inventory) → a container that is being created: the prestart hook's applier.
//!
//! Called by the prestart hook, after runc has set up the container's mounts and before
//! pivot_root. In this (host) process: open the container's rootfs through its init's root
//! (`/proc/<pid>/root`, which walks the container's mount namespace: volumes included) and
//! probe the image's library layout there, plan once with it, clone every source of that plan
//! as a detached read-only mount (open_tree), allow the device nodes in the container's device
//! cgroup, open the container's mount namespace and the host ldconfig. Then, in this process
//! when it has one thread (the static front; it comes back to its own namespace, root and
//! working directory, checked, before it logs anything), else in a forked child
//! (single-threaded, so setns works even if NVML started threads in the parent): enter the
//! container's mount namespace and give each Plan field to its `container/` primitive: mounts
//! onto gate-resolved fds (move_mount: no path is walked twice), symlinks, the `/proc` mask,
//! forward compatibility, the ld cache, the application profile. Everything mounted lives in
//! the container's mount namespace only: a failure leaves nothing on the host.
//! [`apply_here`] does the same in this process's own mount namespace (nvidia-container-cli).

use nvct_container::rootfs::{HostMounts, Rootfs, RootfsError, Target};
use nvct_container::{self as container, cgroup, edits, ldconfig, ldso_conf};
use nvct_formats::log::Steps;
use nvct_formats::root::DriverRoot;
use nvct_host::discover::{self, DiscoverError, Files, Nvml};
use nvct_model::{Arch, FileKind, Inventory};
use nvct_plan::request::Request;
use nvct_plan::{self as plan, Plan, PlanError};
use nvct_sys as sys;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("cannot prepare a mount of {path}: {source}")]
    Source { path: PathBuf, source: io::Error },
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Cgroup(#[from] nvct_container::cgroup::CgroupError),
    #[error(transparent)]
    Ldconfig(#[from] nvct_container::ldconfig::LdconfigError),
    #[error(transparent)]
    Rootfs(#[from] RootfsError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("cannot start a child process: {0}")]
    Fork(io::Error),
    #[error("in the container's mount namespace: {0}")]
    Child(String),
    #[error(
        "the hook state's pid {pid} is not a container being created ({why}); is \
             nvidia-container-runtime-hook registered at another stage than prestart (e.g. \
             createContainer in a hooks.d file)? Register it as a prestart hook"
    )]
    NotAContainer { pid: u32, why: &'static str },
}

/// What apply needs besides the plan.
pub struct ContainerTarget {
    /// The container's init process (from the hook state).
    pub pid: u32,
    /// The container's id (the hook state's): only a systemd scope named after it is asked to
    /// keep the device rules (`container::cgroup::systemd`).
    pub id: String,
    /// The container's rootfs as a host path.
    pub rootfs: PathBuf,
    /// The host ldconfig binary.
    pub ldconfig: PathBuf,
    /// Skip the device cgroup (config `no-cgroups`).
    pub no_cgroups: bool,
    /// config.json's `linux.resources.devices`: when it allows the plan's rules already, the
    /// runtime applied them before this hook ([`cgroup::spec_allows`]) and they are not
    /// written again.
    pub device_rules: Vec<oci_spec::runtime::LinuxDeviceCgroup>,
    /// Whose library layout the image is probed for (the host's).
    pub arch: Arch,
    /// Write the ld cache natively where that gives what ldconfig would (`ld_cache.rs`).
    pub native_ldcache: bool,
    /// Destinations of config.json's own mounts (for the ld cache's injected libraries,
    /// [`edits::injected_libraries`]).
    pub mounts: Vec<PathBuf>,
}

/// What apply did, for the log.
#[derive(Debug)]
pub struct Applied {
    /// The plan applied (made for the image's layout).
    pub plan: Plan,
    /// How the ld cache was made, if it was.
    pub ld_cache: Option<String>,
    /// What was done otherwise than asked (the device cgroup skipped when rootless).
    pub notes: Vec<String>,
    /// The step timings (`Steps::line`) in the container's mount namespace, for the debug log
    /// (docs/PERFORMANCE.md's breakdown).
    pub ns_steps: String,
    /// Whether a forked child did the work in the container's mount namespace (this process
    /// had more than one thread), not this process.
    pub forked: bool,
    /// Whether the device cgroup was left as the runtime made it because config.json's own
    /// device list allowed the plan's rules (never with `no-cgroups`, which skips it anyway).
    pub rules_in_spec: bool,
    /// That systemd keeps the rules across a daemon-reload, and how long `systemctl` took
    /// (`container::cgroup::systemd`), for the debug log; why it could not is a note.
    pub systemd: Option<String>,
}

/// Whether this process is rootless: not root, or root of a user namespace (its
/// `/proc/self/uid_map`, `uid_map`, is not the initial namespace's identity map of all ids).
pub fn is_rootless(euid: u32, uid_map: &str) -> bool {
    let initial = uid_map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
    euid != 0 || !initial
}

/// A device-cgroup refusal a rootless hook goes on after, as with `no-cgroups = true`: the
/// *query* refused (cgroup v2: `BPF_PROG_QUERY`; cgroup v1: opening `devices.allow`). A
/// rootless runtime cannot have attached a device program or written a devices list either,
/// so the container's device access is the nodes' own permissions, which the refused change
/// would not have widened. A refusal after the query found a program (someone privileged put
/// it there) still refuses the container: that program would deny the GPUs.
fn skip_when_rootless(e: cgroup::CgroupError, rootless: bool) -> Result<String, ApplyError> {
    let query = |op: &str| op.starts_with("BPF_PROG_QUERY") || op == "open";
    match e {
        cgroup::CgroupError::Denied { path, op, source } if rootless && query(&op) => Ok(format!(
            "rootless: {op} on {} was refused ({source}); going on without the device cgroup, \
             as with nvidia-container-cli.no-cgroups = true (a rootless runtime cannot restrict \
             devices there either)",
            path.display()
        )),
        e => Err(e.into()),
    }
}

/// A source cloned as a detached mount, keyed by its host path.
struct Prepared {
    mount: OwnedFd,
    host_path: PathBuf,
}

/// The prestart hook's discovery: what `req` can use ([`plan::needs`]), with the procfs files
/// of the GPUs it selects only (the /proc mask shows no other); its plan is the full
/// discovery's (`tests/suite/fakehost.rs`).
pub fn discover(root: &DriverRoot, req: &Request, nvml: Nvml) -> Result<Inventory, DiscoverError> {
    let mut inv = discover::read(root, nvml, Files::For(plan::needs(req)))?;
    let bus_ids = plan::selected_bus_ids(req, &inv);
    discover::read_proc_gpus(root, &mut inv, &bus_ids);
    Ok(inv)
}

/// Refuses a state whose pid is not the init of a container this runtime is creating: pid 1
/// (a hook run inside the container's pid namespace, where `/proc` still shows the host's
/// init), a process sharing our own mount namespace (the host, or the hook's), or one that
/// does not see `rootfs` at the same path as we do. Call before anything else is read.
pub fn check_pid(pid: u32, rootfs: &Path) -> Result<(), ApplyError> {
    let refuse = |why| Err(ApplyError::NotAContainer { pid, why });
    if pid == 1 {
        return refuse("pid 1 is the init of the hook's own pid namespace");
    }
    let inode = |path: PathBuf| -> Result<(u64, u64), ApplyError> {
        let fd = open(&path, libc::O_RDONLY)?;
        let st = sys::fstat(fd.as_fd()).map_err(|source| ApplyError::Open { path, source })?;
        Ok((st.st_dev, st.st_ino))
    };
    if inode(format!("/proc/{pid}/ns/mnt").into())? == inode("/proc/self/ns/mnt".into())? {
        return refuse("it shares the hook's own mount namespace");
    }
    let theirs =
        Path::new(&format!("/proc/{pid}/root")).join(rootfs.strip_prefix("/").unwrap_or(rootfs));
    match (std::fs::metadata(&theirs), std::fs::metadata(rootfs)) {
        (Ok(a), Ok(b)) if (a.dev(), a.ino()) == (b.dev(), b.ino()) => Ok(()),
        _ => refuse("it does not see the bundle's rootfs"),
    }
}

/// Plans `req` on `inv` once, for the image's layout, and applies the plan. The rootfs is
/// opened and its layout probed from here, through the container's init's root
/// (`/proc/<pid>/root`, which walks the container's mount namespace: its volumes included);
/// the mounts and edits are then made in that namespace. Returns the plan and what to log: the
/// optional files skipped (on a volume), how the ld cache was made, and the cgroup notes.
pub fn apply(
    req: &Request,
    inv: &Inventory,
    target: &ContainerTarget,
) -> Result<Applied, ApplyError> {
    // The runtime's mount table, opened here, before the child enters the container's.
    let host = HostMounts::of_this_namespace()?;
    // Through the container's init's root: right even when the runtime itself runs chrooted
    // (the rootfs path is in its view; check_pid saw the same directory there).
    let through_init = Path::new(&format!("/proc/{}/root", target.pid))
        .join(target.rootfs.strip_prefix("/").unwrap_or(&target.rootfs));
    let root = Rootfs::open(&through_init, host)?;
    let layout = container::probe_layout(&root, target.arch);
    let plan = plan::plan(req, inv, &layout)?;
    let prepared = prepare(&plan)?;
    let ns_path = PathBuf::from(format!("/proc/{}/ns/mnt", target.pid));
    let ns = open(&ns_path, libc::O_RDONLY)?;
    let ldconfig = if plan.ldcache_dirs.is_empty() {
        None
    } else {
        Some(ldconfig::open_host(&target.ldconfig)?)
    };
    let mut notes = Vec::new();
    let mut systemd = None;
    let rules_in_spec =
        !target.no_cgroups && cgroup::spec_allows(&target.device_rules, &plan.cgroup_rules);
    // The rules in place (written here, or by the runtime from config.json's list): systemd
    // is asked to keep them whatever put them there. runc hands systemd only the rules whose
    // `/dev/char/M:m` link exists, and a driver made with mknod has none, so a daemon-reload
    // would take the shim's (legacy mode) rules away as well as ours.
    let mut in_place = rules_in_spec;
    if !target.no_cgroups && !rules_in_spec {
        match cgroup::allow_devices(target.pid, &plan.cgroup_rules) {
            Ok(()) => in_place = true,
            Err(e) => {
                let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
                let euid = sys::euid();
                notes.push(skip_when_rootless(e, is_rootless(euid, &uid_map))?);
            }
        }
    }
    if in_place {
        match cgroup::keep_with_systemd(target.pid, &target.id, &plan.cgroup_rules) {
            Some(Ok(line)) => systemd = Some(line),
            Some(Err(why)) => notes.push(why),
            None => {}
        }
    }

    // The work in the container's mount namespace, with its step timings' line.
    let work = || {
        let mut steps = Steps::start();
        let result = in_container(
            &plan,
            target,
            &root,
            &prepared,
            &ns,
            ldconfig.as_ref(),
            &mut steps,
        );
        (result, steps.line())
    };
    // One thread (the static front, or no NVML loaded): the work is done in this process,
    // which enters the container's mount namespace and comes back (no fork, no child's exit).
    if sys::single_threaded() {
        let home = Home::open()?;
        let (result, ns_steps) = work();
        home.back();
        return Ok(Applied {
            plan,
            ld_cache: result.map_err(ApplyError::Child)?,
            notes,
            ns_steps,
            forked: false,
            rules_in_spec,
            systemd,
        });
    }
    // The child (`in_container`) takes no lock another thread may hold: it logs nothing, its
    // one message goes through the pipe `in_child` gives it.
    let (code, msg) = sys::in_child(|out| {
        let (result, ns_steps) = work();
        // One message through the pipe: on success the step timings' line, then the ld cache
        // line; the error otherwise.
        let (code, msg) = match result {
            Ok(note) => (0, format!("{ns_steps}\n{}", note.unwrap_or_default())),
            Err(msg) => (1, msg),
        };
        let _ = out.write_all(msg.as_bytes());
        code
    })
    .map_err(ApplyError::Fork)?;
    let msg = String::from_utf8_lossy(&msg).into_owned();
    match code {
        0 => {
            let (ns_steps, note) = msg.split_once('\n').unwrap_or((&msg, ""));
            Ok(Applied {
                plan,
                ld_cache: (!note.is_empty()).then(|| note.to_string()),
                notes,
                ns_steps: ns_steps.to_string(),
                forked: true,
                rules_in_spec,
                systemd,
            })
        }
        _ if !msg.is_empty() => Err(ApplyError::Child(msg)),
        c => Err(ApplyError::Child(format!("child exited with status {c}"))),
    }
}

/// Every source of `plan` (device nodes, then files) cloned as a detached mount with its
/// flags: read-only, nosuid, and noexec for nodes, nodev for files.
fn prepare(plan: &Plan) -> Result<Vec<Prepared>, ApplyError> {
    let mut prepared = Vec::new();
    let node_flags = (
        sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
        sys::MOUNT_ATTR_NODEV,
    );
    let file_flags = (
        sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        0,
    );
    let sources = plan
        .device_nodes
        .iter()
        .map(|n| (&n.host_path, node_flags))
        .chain(plan.mounts.iter().map(|m| (&m.host_path, file_flags)));
    for (host_path, (set, clear)) in sources {
        let mount =
            sys::clone_mount(host_path, set, clear).map_err(|source| ApplyError::Source {
                path: host_path.clone(),
                source,
            })?;
        prepared.push(Prepared {
            mount,
            host_path: host_path.clone(),
        });
    }
    Ok(prepared)
}

/// Where [`apply_here`] applies a plan: a rootfs in this process's own mount namespace.
pub struct HereTarget {
    /// The container's rootfs, as this process sees it (before pivot_root).
    pub rootfs: PathBuf,
    /// The host ldconfig binary.
    pub ldconfig: PathBuf,
    /// The process whose device cgroup gets the plan's rules; `None`: no device cgroup.
    pub cgroup_pid: Option<u32>,
    /// Whose library layout the image is probed for (the host's).
    pub arch: Arch,
    /// Write the ld cache natively where that gives what ldconfig would.
    pub native_ldcache: bool,
    /// The device nodes are not mounted.
    pub no_devbind: bool,
}

/// Plans `req` on `inv` once, for the layout of a rootfs in this process's own mount
/// namespace, and applies the plan there, for a caller that runs inside the container's
/// namespaces before pivot_root (`nvidia-container-cli configure` without `--pid`): the same
/// sources, gate and edits as [`apply`], without entering another namespace. The host mounts
/// a target must not be on are this namespace's outside the rootfs.
pub fn apply_here(
    req: &Request,
    inv: &Inventory,
    target: &HereTarget,
) -> Result<Applied, ApplyError> {
    let mut steps = Steps::start();
    let host = HostMounts::of_this_namespace_outside(&target.rootfs)?;
    let root = Rootfs::open(&target.rootfs, host)?;
    steps.mark("rootfs");
    let layout = container::probe_layout(&root, target.arch);
    let mut plan = plan::plan(req, inv, &layout)?;
    if target.no_devbind {
        plan.device_nodes.clear();
    }
    steps.mark("layout-and-plan");
    let prepared = prepare(&plan)?;
    let ldconfig = if plan.ldcache_dirs.is_empty() {
        None
    } else {
        Some(ldconfig::open_host(&target.ldconfig)?)
    };
    let mut notes = Vec::new();
    if let Some(pid) = target.cgroup_pid {
        if let Err(e) = cgroup::allow_devices(pid, &plan.cgroup_rules) {
            let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
            notes.push(skip_when_rootless(e, is_rootless(sys::euid(), &uid_map))?);
        }
    }
    let here = Here {
        native_ldcache: target.native_ldcache,
        mounts: &[],
        reuse_nodes: true,
    };
    let ld_cache = fill(
        &plan,
        &root,
        &here,
        &prepared,
        ldconfig.as_ref(),
        &mut steps,
    )
    .map_err(ApplyError::Child)?;
    Ok(Applied {
        plan,
        ld_cache,
        notes,
        ns_steps: steps.line(),
        forked: false,
        rules_in_spec: false,
        systemd: None,
    })
}

/// Where this process stands before it enters the container's mount namespace itself: its
/// own mount namespace, root and working directory, to come back to.
struct Home {
    ns: OwnedFd,
    root: OwnedFd,
    cwd: OwnedFd,
}

impl Home {
    fn open() -> Result<Home, ApplyError> {
        let dir = |path: &str| {
            sys::openat(
                sys::cwd(),
                Path::new(path),
                libc::O_PATH | libc::O_DIRECTORY,
                0,
            )
            .map_err(|source| ApplyError::Open {
                path: PathBuf::from(path),
                source,
            })
        };
        Ok(Home {
            ns: open(Path::new("/proc/self/ns/mnt"), libc::O_RDONLY)?,
            root: dir("/")?,
            cwd: dir(".")?,
        })
    }

    /// Back into the mount namespace, root and working directory of [`Home::open`], checked
    /// (the namespace and the root by inode). A process that cannot come back ends here,
    /// with a message on stderr: after this, paths (the log's, the config's) are walked as
    /// the runtime sees them, and none may be walked in the container's view.
    fn back(self) {
        if let Err(e) = self.try_back() {
            let _ = writeln!(
                io::stderr(),
                "nvidia-container-runtime-hook: cannot return to the runtime's mount namespace \
                 after the container's ({e}); stopping here"
            );
            sys::exit_now(1);
        }
    }

    fn try_back(&self) -> io::Result<()> {
        sys::setns(self.ns.as_fd(), libc::CLONE_NEWNS)?;
        sys::fchdir(self.root.as_fd())?;
        sys::chroot_cwd()?;
        sys::fchdir(self.cwd.as_fd())?;
        let same = |path: &str, fd: &OwnedFd| -> io::Result<bool> {
            let (now, want) = (std::fs::metadata(path)?, sys::fstat(fd.as_fd())?);
            Ok((now.dev(), now.ino()) == (want.st_dev, want.st_ino))
        };
        if !same("/proc/self/ns/mnt", &self.ns)? || !same("/", &self.root)? {
            return Err(io::Error::other(
                "the namespace or the root is not the one left",
            ));
        }
        Ok(())
    }
}

fn open(path: &Path, flags: i32) -> Result<OwnedFd, ApplyError> {
    std::fs::OpenOptions::new()
        .read(flags & libc::O_ACCMODE == libc::O_RDONLY)
        .write(flags & libc::O_ACCMODE == libc::O_WRONLY)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|source| ApplyError::Open {
            path: path.to_path_buf(),
            source,
        })
}

/// Runs in the container's mount namespace (a forked child, or this process when it has one
/// thread), marking its steps in `steps`. Returns a message on failure.
fn in_container(
    plan: &Plan,
    target: &ContainerTarget,
    root: &Rootfs,
    prepared: &[Prepared],
    ns: &OwnedFd,
    ldconfig: Option<&OwnedFd>,
    steps: &mut Steps,
) -> Result<Option<String>, String> {
    sys::setns(ns.as_fd(), libc::CLONE_NEWNS)
        .map_err(|e| format!("setns into /proc/{}/ns/mnt: {e}", target.pid))?;
    steps.mark("setns");
    let here = Here {
        native_ldcache: target.native_ldcache,
        mounts: &target.mounts,
        reuse_nodes: false,
    };
    fill(plan, root, &here, prepared, ldconfig, steps)
}

/// What [`fill`] needs of the container besides its rootfs.
struct Here<'a> {
    native_ldcache: bool,
    mounts: &'a [PathBuf],
    /// A device node the container has already is used as it is (the CLI's standalone mode).
    reuse_nodes: bool,
}

/// The work on the container's opened rootfs, in its mount namespace: mount each prepared
/// source onto its gate-resolved target, then the edits (symlinks, the /proc mask, forward
/// compatibility, the ld cache, the application profile). Returns a message on failure.
fn fill(
    plan: &Plan,
    root: &Rootfs,
    target: &Here,
    prepared: &[Prepared],
    ldconfig: Option<&OwnedFd>,
    steps: &mut Steps,
) -> Result<Option<String>, String> {
    let targets = plan
        .device_nodes
        .iter()
        .map(|n| (&n.host_path, &n.path, false))
        .chain(
            plan.mounts
                .iter()
                .map(|m| (&m.host_path, &m.container_path, m.kind == FileKind::Ipc)),
        );
    let mut notes = Vec::new();
    for (host_path, container_path, optional) in targets {
        let p = prepared
            .iter()
            .find(|p| &p.host_path == host_path)
            .ok_or_else(|| format!("{} was not prepared on the host", host_path.display()))?;
        // A device node the container has already (its /dev a bind of the host's, as enroot
        // makes it): the same node is not mounted again, and nothing is created there.
        if target.reuse_nodes && is_same_device(root, container_path, &p.mount) {
            continue;
        }
        let kind = if is_dir_mount(&p.mount) {
            Target::Dir
        } else {
            Target::File
        };
        let fd = match root.mount_target(container_path, kind) {
            Ok(fd) => fd,
            // An optional file (a daemon's socket, the MPS pipe dir) whose place is on a
            // volume (a pod's emptyDir at /run): the container works without it.
            Err(e @ RootfsError::HostVolume { .. }) if optional => {
                notes.push(format!(
                    "skipped the optional {}: {e}",
                    container_path.display()
                ));
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        sys::move_mount(p.mount.as_fd(), fd.as_fd())
            .map_err(|e| format!("mount onto {}: {e}", container_path.display()))?;
    }
    steps.mark("mounts");
    let ldcache = ldconfig.map(|fd| edits::LdWork {
        ldconfig: fd.as_fd(),
        folders: &plan.ldcache_dirs,
        libs: edits::injected_libraries(
            plan.mounts
                .iter()
                .filter(|m| matches!(m.kind, FileKind::Library | FileKind::Library32))
                .map(|m| m.container_path.as_path())
                .chain(target.mounts.iter().map(PathBuf::as_path)),
            &plan.ldcache_dirs,
        ),
        native: target.native_ldcache,
    });
    let work = edits::Work {
        symlinks: &plan.symlinks,
        proc_mask: plan.proc_mask.as_ref(),
        cuda_compat: plan
            .cuda_compat
            .as_deref()
            .map(|v| (v, Path::new(ldso_conf::CUDA_COMPAT_DIR))),
        ldcache,
        app_profile: plan.app_profile,
    };
    let made = edits::apply(root, &work, steps).map_err(|e| e.to_string())?;
    notes.extend(made.ld_cache);
    notes.extend(made.app_profile);
    Ok((!notes.is_empty()).then(|| notes.join("; ")))
}

/// Whether `container_path` in `root` (resolved by the gate, the last component not followed)
/// is already the character device `source` is.
fn is_same_device(root: &Rootfs, container_path: &Path, source: &OwnedFd) -> bool {
    let is_char = |st: &libc::stat| st.st_mode & libc::S_IFMT == libc::S_IFCHR;
    let Ok(src) = sys::fstat(source.as_fd()) else {
        return false;
    };
    if !is_char(&src) {
        return false;
    }
    match root.resolve(container_path, libc::O_PATH | libc::O_NOFOLLOW) {
        Ok(fd) => sys::fstat(fd.as_fd()).is_ok_and(|st| is_char(&st) && st.st_rdev == src.st_rdev),
        Err(_) => false,
    }
}

fn is_dir_mount(fd: &OwnedFd) -> bool {
    sys::fstat(fd.as_fd()).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-process path's way back: a forked (so single-threaded) child enters another
    /// mount namespace (an `unshare -m` process's), then [`Home`] takes it back to its own
    /// namespace, root and working directory. Needs root, as the suite.
    #[test]
    fn home_comes_back_from_another_mount_namespace() {
        let mut other = std::process::Command::new("unshare")
            .args(["-m", "sleep", "30"])
            .spawn()
            .expect("unshare (util-linux) starts");
        let ns_of = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        let own = ns_of("self").expect("own mount namespace");
        let theirs = format!("/proc/{}/ns/mnt", other.id());
        let mut tries = 0;
        while ns_of(&other.id().to_string()).is_none_or(|ns| ns == own) {
            tries += 1;
            assert!(
                tries < 500,
                "unshare -m made no mount namespace (run as root)"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The child only allocates, makes syscalls and says its outcome as its exit code.
        let (code, _) = sys::in_child(|_| {
            let code = (|| {
                std::env::set_current_dir("/tmp").map_err(|_| 2)?;
                let ns = open(Path::new(&theirs), libc::O_RDONLY).map_err(|_| 3)?;
                let home = Home::open().map_err(|_| 4)?;
                sys::setns(ns.as_fd(), libc::CLONE_NEWNS).map_err(|_| 5)?;
                if ns_of("self").as_ref() == Some(&own) {
                    return Err(6);
                }
                home.try_back().map_err(|_| 7)?;
                if ns_of("self").as_ref() != Some(&own) {
                    return Err(8);
                }
                if std::env::current_dir().ok().as_deref() != Some(Path::new("/tmp")) {
                    return Err(9);
                }
                Ok(())
            })();
            code.err().unwrap_or(0)
        })
        .unwrap();
        let _ = other.kill();
        let _ = other.wait();
        // 5: setns refused, 6: it did not move, 7/8: no way back, 9: the cwd not restored.
        assert_eq!(
            code, 0,
            "the child's step that failed (see the codes above)"
        );
    }

    #[test]
    fn rootless_cases() {
        let full = "         0          0 4294967295\n";
        // (case, euid, uid_map, rootless)
        let cases = [
            ("root on the host", 0, full, false),
            ("an ordinary user", 1000, full, true),
            (
                "root of a user namespace",
                0,
                "0 1000 1\n1 100000 65536\n",
                true,
            ),
            ("no uid_map readable", 0, "", true),
        ];
        for (name, euid, map, want) in cases {
            assert_eq!(is_rootless(euid, map), want, "case {name}");
        }
    }

    #[test]
    fn only_a_rootless_refusal_is_skipped() {
        let denied = || cgroup::CgroupError::Denied {
            path: PathBuf::from("/sys/fs/cgroup/user.slice/c1"),
            op: "BPF_PROG_QUERY (device programs)".into(),
            source: io::Error::from_raw_os_error(libc::EPERM),
        };
        let note = skip_when_rootless(denied(), true).unwrap();
        assert!(
            note.contains("BPF_PROG_QUERY") && note.contains("no-cgroups = true"),
            "{note}"
        );
        let e = skip_when_rootless(denied(), false).unwrap_err().to_string();
        assert!(e.contains("was refused"), "root keeps the refusal: {e}");
        let load = cgroup::CgroupError::Denied {
            path: PathBuf::from("/sys/fs/cgroup/user.slice/c1"),
            op: "BPF_PROG_LOAD".into(),
            source: io::Error::from_raw_os_error(libc::EPERM),
        };
        assert!(
            skip_when_rootless(load, true).is_err(),
            "a program is attached: still refused"
        );
        let other = cgroup::CgroupError::Read {
            path: PathBuf::from("/proc/9/cgroup"),
            source: io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert!(skip_when_rootless(other, true).is_err(), "not a refusal");
    }
}
