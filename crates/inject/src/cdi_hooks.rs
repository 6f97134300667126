//! The hooks a CDI spec references (`nvidia-cdi-hook <name>`, the same as `nvidia-ctk hook
//! <name>`): `create-symlinks`, `update-ldcache`, `disable-device-node-modification`,
//! `enable-cuda-compat`, and `keep-device-rules` (a `createRuntime` hook: systemd, on the
//! host; [`keep_device_rules`]). Each is the deserialisation of one `Plan` field (written by
//! `cdi/generate.rs`) followed by the same `container/` primitive the prestart hook calls.
//! Both binaries only parse flags and call the functions here.
//!
//! Flow: [`Container::from_state`] reads the OCI state (stdin) → bundle → config.json →
//! rootfs path, on the host; host-side inputs (the ldconfig fd, the host's
//! `/proc/driver/nvidia`) are opened next; [`Container::enter`] then joins the container's mount
//! namespace if needed and opens the rootfs through the one gate (`rootfs.rs`). Every write
//! into the container is relative to a directory fd that gate resolved.
//!
//! Namespaces: runc runs `createContainer` hooks from the container's init, already in the
//! container's mount namespace, before pivot_root, with the state's pid taken from the
//! *container's* pid namespace (1) while `/proc` is still the host's: `/proc/1/ns/mnt` there
//! is the host's init, so it must not be entered. `prestart`/`createRuntime` hooks run in the
//! host's namespaces with the host pid. crun (`do_hooks` in `src/libcrun/container.c`) runs
//! `createContainer` hooks from the container's init as well, after its mounts and before
//! pivot_root, but with `"pid": 0`. Rule: when the state has no pid (0) or its pid is our
//! parent we are a child of the container's init (createContainer) and stay put; otherwise we
//! enter `/proc/<pid>/ns/mnt` if its inode differs from ours.
//!
//! Must not: execute anything from the container, mount anything from the image, or follow a
//! container symlink to the host.

use nvct_container::edits::{self, Edits};
use nvct_container::ldconfig::{self, LdconfigError};
use nvct_container::rootfs::{HostMounts, Rootfs, RootfsError};
use nvct_formats::log::Steps;
use nvct_formats::oci::{self, HookState, OciError};
use nvct_formats::root::DriverRoot;
use nvct_host::devices;
use nvct_host::discover;
use nvct_model::ProcMask;
use nvct_plan as plan;
use nvct_sys as sys;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error(transparent)]
    Rootfs(#[from] RootfsError),
    #[error(transparent)]
    Ldconfig(#[from] LdconfigError),
    #[error("container {id}: {source}")]
    Edit {
        id: String,
        source: edits::ApplyError,
    },
    #[error("cannot enter the container's mount namespace {path}: {source}")]
    Namespace { path: PathBuf, source: io::Error },
}

/// The container a hook was called for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub state: HookState,
    /// The rootfs as a host path (from config.json's `root.path`).
    pub rootfs: PathBuf,
    /// Minors of the `/dev/nvidiaN` GPU nodes config.json gives the container.
    pub gpu_minors: Vec<u32>,
    /// Minors of the `/dev/nvidia-caps/nvidia-capN` nodes config.json gives the container
    /// (its MIG devices' access caps, the MIG config and monitor caps).
    pub cap_minors: Vec<u32>,
    /// Destinations of config.json's mounts (the libraries a spec mounted among them).
    pub mounts: Vec<PathBuf>,
}

impl Container {
    /// Reads the OCI state from `input` (stdin) and the bundle's config.json.
    pub fn from_state(input: impl Read) -> Result<Container, HookError> {
        let state = HookState::read(input)?;
        let spec = match (oci::load_spec(&state.bundle), &state.root) {
            (Ok(spec), _) => spec,
            // crun `--userns=nomap` runs the hooks where the bundle's config.json cannot be
            // read; its state names the rootfs (upstream does the same since 7df27d08). No
            // device or mount list then: the `/proc` mask shows no GPU's own files.
            (Err(OciError::SpecRead { .. }), Some(root)) => {
                let rootfs = root.clone();
                return Ok(Container {
                    state,
                    rootfs,
                    gpu_minors: vec![],
                    cap_minors: vec![],
                    mounts: vec![],
                });
            }
            (Err(e), _) => return Err(e.into()),
        };
        let rootfs = oci::rootfs_path(&spec, &state.bundle)?;
        let devices = oci::devices(&spec);
        let numbered = |prefix: &'static [u8]| {
            devices
                .iter()
                .filter(move |(path, _)| {
                    path.as_os_str()
                        .as_bytes()
                        .strip_prefix(prefix)
                        .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
                })
                .map(|(_, minor)| *minor)
                .collect::<Vec<u32>>()
        };
        let gpu_minors = numbered(b"/dev/nvidia");
        let cap_minors = numbered(b"/dev/nvidia-caps/nvidia-cap");
        let mounts = oci::mounts(&spec).into_iter().map(|(_, d)| d).collect();
        Ok(Container {
            state,
            rootfs,
            gpu_minors,
            cap_minors,
            mounts,
        })
    }

    /// Joins the container's mount namespace when we are not in it yet (see the module doc),
    /// then opens the rootfs. Call after every host-side input has been opened.
    /// The creation rule's reference ([`HostMounts`]) is the runtime's mount table: ours,
    /// read before we enter; or, when the runtime started us inside the container's mount
    /// namespace already (createContainer, before pivot_root), that namespace's table less
    /// the mounts at or below the rootfs, which the runtime made for the container. Never the
    /// host init's (`/proc/1/mountinfo`): a runtime in a mount namespace of its own has
    /// filesystems that table does not list.
    pub fn enter(&self, steps: &mut Steps) -> Result<Rootfs, HookError> {
        // Already in the container's mount namespace: runc's createContainer (our parent is
        // the container's init) and crun's createContainer/startContainer (no pid: crun runs
        // those hooks from the container's init).
        let theirs = self
            .state
            .pid
            .filter(|&pid| std::os::unix::process::parent_id() != pid);
        let Some(pid) = theirs else {
            // The mount table as the runtime left it (see [`HostMounts::of_this_namespace_outside`]),
            // the rootfs as mountinfo shows it (symlinks in the bundle's path resolved).
            let rootfs =
                std::fs::canonicalize(&self.rootfs).map_err(|source| RootfsError::Open {
                    path: self.rootfs.clone(),
                    source,
                })?;
            let host = HostMounts::of_this_namespace_outside(&rootfs)?;
            steps.mark("host-mounts");
            let root = Rootfs::open(&self.rootfs, host)?;
            steps.mark("rootfs");
            return Ok(root);
        };
        let host = HostMounts::of_this_namespace()?;
        steps.mark("host-mounts");
        {
            let path = PathBuf::from(format!("/proc/{pid}/ns/mnt"));
            let err = |source| HookError::Namespace {
                path: path.clone(),
                source,
            };
            let theirs = OwnedFd::from(std::fs::File::open(&path).map_err(err)?);
            let ours = OwnedFd::from(std::fs::File::open("/proc/self/ns/mnt").map_err(err)?);
            let (a, b) = (
                sys::fstat(theirs.as_fd()).map_err(err)?,
                sys::fstat(ours.as_fd()).map_err(err)?,
            );
            if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
                sys::setns(theirs.as_fd(), libc::CLONE_NEWNS).map_err(err)?;
            }
        }
        steps.mark("setns");
        let root = Rootfs::open(&self.rootfs, host)?;
        steps.mark("rootfs");
        Ok(root)
    }
}

/// `keep-device-rules`, a `createRuntime` hook of our specs: asks systemd to keep the rules of
/// the container's NVIDIA device nodes (config.json's `linux.devices` under `/dev/nvidia`,
/// where `linux.resources.devices` allows them) across `systemctl daemon-reload`. The runtime
/// has put the rules in place, but it hands systemd a rule only as a `/dev/char/M:m` link that
/// exists, and a driver made with mknod has none: at the next reload systemd would take the
/// GPUs away (upstream's "Failed to initialize NVML: Unknown Error"). `createRuntime` runs in
/// the runtime's namespaces with the container's host pid, after the runtime made its cgroup
/// (runc, crun). Nothing is asked for a rootless runtime (no device cgroup of its own to
/// keep), where systemd is not the init, or for a cgroup that is not the container's own
/// scope ([`cgroup::systemd::own_unit`]). Returns the line for the log: `None` when there was
/// nothing to do, `Some(Err)` when systemd did not keep them (never an error of the
/// container: it starts either way).
pub fn keep_device_rules(state: impl Read) -> Result<Option<Result<String, String>>, HookError> {
    let state = HookState::read(state)?;
    let Some(pid) = state.pid.filter(|&p| p > 1) else {
        return Ok(None);
    };
    if !nvct_container::cgroup::systemd::booted() {
        return Ok(None);
    }
    let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    if crate::prestart::is_rootless(sys::euid(), &uid_map) {
        return Ok(None);
    }
    let spec = oci::load_spec(&state.bundle)?;
    let rules = oci::char_device_rules(&spec, "/dev/nvidia");
    if !nvct_container::cgroup::spec_allows(&oci::device_rules(&spec), &rules) {
        return Ok(None);
    }
    Ok(nvct_container::cgroup::keep_with_systemd(
        pid, &state.id, &rules,
    ))
}

/// Makes `e` in the container of the OCI state read from `state`: host inputs first (the
/// host ldconfig, the `/proc` mask from the host's procfs), then the container is entered
/// once and [`edits::apply`] makes every edit in the one order.
pub fn run(e: &Edits, state: impl Read, steps: &mut Steps) -> Result<edits::Notes, HookError> {
    let ldconfig = e
        .ldcache
        .as_ref()
        .map(|l| ldconfig::open_host(edits::ldconfig_path(l)))
        .transpose()?;
    steps.mark("args");
    let c = Container::from_state(state)?;
    steps.mark("state");
    // Nothing to mask (no driver files on this host): nothing to do for this edit.
    let mask = e
        .mask
        .as_ref()
        .and_then(|proc_root| masked_proc_driver(proc_root, &c));
    if e.mask.is_some() {
        steps.mark("mask-rediscovery");
    }
    let symlinks = e.links.as_deref().unwrap_or_default();
    if e.links.is_none()
        && mask.is_none()
        && e.cuda_compat.is_none()
        && e.ldcache.is_none()
        && !e.app_profile
    {
        return Ok(edits::Notes::default());
    }
    let root = c.enter(steps)?;
    let ldcache = match (&ldconfig, &e.ldcache) {
        (Some(fd), Some(l)) => Some(edits::LdWork {
            ldconfig: fd.as_fd(),
            folders: &l.folders,
            libs: edits::injected_libraries(c.mounts.iter().map(PathBuf::as_path), &l.folders),
            native: l.native,
        }),
        _ => None,
    };
    let work = edits::Work {
        symlinks,
        proc_mask: mask.as_ref(),
        cuda_compat: e
            .cuda_compat
            .as_ref()
            .map(|cc| (cc.host_driver_version.as_str(), cc.dir.as_path())),
        ldcache,
        app_profile: e.app_profile,
    };
    edits::apply(&root, &work, steps).map_err(|source| HookError::Edit {
        id: c.state.id.clone(),
        source,
    })
}

/// The plan's `proc_mask` for this container, computed on the host as the planner does
/// ([`plan::proc_mask`]): the host's `driver/nvidia` files under `proc_root`, the GPUs whose
/// `/dev/nvidiaN` config.json gives the container, and the capabilities whose
/// `/dev/nvidia-caps/nvidia-capN` it gives (named through `driver/nvidia-caps/mig-minors`: the
/// access files of its MIG devices). `None` when the host has no `driver/nvidia/version` (no
/// driver loaded), as the planner's inventory has no proc files then.
pub fn masked_proc_driver(proc_root: &Path, container: &Container) -> Option<ProcMask> {
    let root = DriverRoot::new(
        PathBuf::from("/"),
        PathBuf::from("/"),
        proc_root.to_path_buf(),
    );
    let gpus = devices::gpus_from_proc(&root).unwrap_or_default();
    let caps: Vec<String> = if container.cap_minors.is_empty() {
        Vec::new()
    } else {
        devices::read_proc_file(&root.proc_path("driver/nvidia-caps/mig-minors"))
            .map(|t| devices::parse_mig_minors(&t))
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, minor)| container.cap_minors.contains(minor))
            .map(|(name, _)| name)
            .collect()
    };
    // Only the container's GPUs' `gpus/<bus id>/` files are read: the mask holds no others.
    let theirs: Vec<_> = gpus
        .into_iter()
        .filter(|g| container.gpu_minors.contains(&g.minor))
        .collect();
    let pd = discover::read_proc_driver(&root, &theirs, &caps)?;
    let bus_ids: Vec<&str> = theirs.iter().map(|g| g.bus_id.as_str()).collect();
    Some(plan::proc_mask(&pd, &bus_ids, &caps))
}
