//! The hooks a CDI spec references (`nvidia-cdi-hook <name>`, the same as `nvidia-ctk hook
//! <name>`): `create-symlinks`, `update-ldcache`, `disable-device-node-modification`,
//! `enable-cuda-compat` (whose work is [`ldso_conf::enable_cuda_compat`], shared with the
//! prestart hook). Both binaries only parse flags and call the functions here.
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
//! host's namespaces with the host pid. Rule: when the state's pid is our parent we are a
//! child of the container's init (createContainer) and stay put; otherwise we enter
//! `/proc/<pid>/ns/mnt` if its inode differs from ours.
//!
//! Must not: execute anything from the container, mount anything from the image, or follow a
//! container symlink to the host.

use crate::apply;
use crate::devices;
use crate::ldconfig::{self, LdconfigError};
use crate::ldso_conf::{self, LdsoConfError};
use crate::oci::{self, HookState, OciError};
use crate::rootfs::{Rootfs, RootfsError};
use crate::sys;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The host ldconfig used when `--ldconfig-path` is not given.
pub const DEFAULT_LDCONFIG: &str = "/sbin/ldconfig";

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error(transparent)]
    Rootfs(#[from] RootfsError),
    #[error(transparent)]
    Ldconfig(#[from] LdconfigError),
    #[error("--link {0:?} is not TARGET::LINK with an absolute, clean LINK (e.g. libcuda.so.1::/usr/lib64/libcuda.so)")]
    BadLink(String),
    #[error("cannot create the symlink {link} -> {target} in the container: {source}")]
    Symlink { link: PathBuf, target: PathBuf, source: io::Error },
    #[error("{link} already exists in the container and is {what}, not a symlink to {target}; refusing to replace it")]
    LinkExists { link: PathBuf, target: PathBuf, what: String },
    #[error("--folder {0:?} is not an absolute, clean path without newlines")]
    BadFolder(PathBuf),
    #[error(transparent)]
    Conf(#[from] LdsoConfError),
    #[error("cannot enter the container's mount namespace {path}: {source}")]
    Namespace { path: PathBuf, source: io::Error },
    #[error("cannot read the host's {path}: {source}")]
    HostProc { path: PathBuf, source: io::Error },
    #[error("cannot mask /proc/driver/nvidia in the container: {0}")]
    Mask(String),
}

/// The container a hook was called for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub state: HookState,
    /// The rootfs as a host path (from config.json's `root.path`).
    pub rootfs: PathBuf,
}

impl Container {
    /// Reads the OCI state from `input` (stdin) and the bundle's config.json.
    pub fn from_state(input: impl Read) -> Result<Container, HookError> {
        let state = HookState::read(input)?;
        let spec = oci::load_spec(&state.bundle)?;
        let rootfs = oci::rootfs_path(&spec, &state.bundle)?;
        Ok(Container { state, rootfs })
    }

    /// Joins the container's mount namespace when we are not in it yet (see the module doc),
    /// then opens the rootfs. Call after every host-side input has been opened.
    pub fn enter(&self) -> Result<Rootfs, HookError> {
        if std::os::unix::process::parent_id() != self.state.pid {
            let path = PathBuf::from(format!("/proc/{}/ns/mnt", self.state.pid));
            let err = |source| HookError::Namespace { path: path.clone(), source };
            let theirs = OwnedFd::from(std::fs::File::open(&path).map_err(err)?);
            let ours = OwnedFd::from(std::fs::File::open("/proc/self/ns/mnt").map_err(err)?);
            let (a, b) = (sys::fstat(theirs.as_fd()).map_err(err)?, sys::fstat(ours.as_fd()).map_err(err)?);
            if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
                sys::setns(theirs.as_fd(), libc::CLONE_NEWNS).map_err(err)?;
            }
        }
        Ok(Rootfs::open(&self.rootfs)?)
    }
}

/// One `--link TARGET::LINK`: the symlink LINK (a container path) with contents TARGET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub target: PathBuf,
    pub link: PathBuf,
}

impl Link {
    pub fn parse(arg: &str) -> Result<Link, HookError> {
        let bad = || HookError::BadLink(arg.to_string());
        let (target, link) = arg.split_once("::").ok_or_else(bad)?;
        let link = Path::new(link);
        if target.is_empty() || target.contains('\0') || !is_clean_absolute(link) || link.parent().is_none() {
            return Err(bad());
        }
        Ok(Link { target: target.into(), link: link.to_path_buf() })
    }
}

/// `/a/b`, no `.`/`..`, no trailing `/`, no NUL or newline.
fn is_clean_absolute(p: &Path) -> bool {
    let bytes = p.as_os_str().as_bytes();
    let mut comps = p.components();
    bytes.len() > 1
        && !bytes.ends_with(b"/")
        && !bytes.contains(&b'\0')
        && !bytes.contains(&b'\n')
        && !bytes.split(|b| *b == b'/').any(|c| c == b"." || c == b"..")
        && comps.next() == Some(Component::RootDir)
        && comps.all(|c| matches!(c, Component::Normal(_)))
}

/// `create-symlinks`: each LINK's parent is resolved (and created) inside the rootfs, and the
/// link made with symlinkat relative to that directory fd. An identical existing link is fine;
/// anything else at LINK is an error naming it.
pub fn create_symlinks(root: &Rootfs, links: &[Link]) -> Result<(), HookError> {
    for l in links {
        let parent = l.link.parent().ok_or_else(|| HookError::BadLink(l.link.display().to_string()))?;
        let name = Path::new(l.link.file_name().ok_or_else(|| HookError::BadLink(l.link.display().to_string()))?);
        let dir = root.mkdir_all(parent)?;
        match sys::symlinkat(&l.target, dir.as_fd(), name) {
            Ok(()) => continue,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(source) => return Err(HookError::Symlink { link: l.link.clone(), target: l.target.clone(), source }),
        }
        let what = match sys::readlinkat(dir.as_fd(), name) {
            Ok(existing) if existing == l.target => continue,
            Ok(existing) => format!("a symlink to {}", existing.display()),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => "not a symlink".to_string(),
            Err(source) => return Err(HookError::Symlink { link: l.link.clone(), target: l.target.clone(), source }),
        };
        return Err(HookError::LinkExists { link: l.link.clone(), target: l.target.clone(), what });
    }
    Ok(())
}

/// `update-ldcache`: lists `folders` in `/etc/ld.so.conf.d/00-nvcr-<hash>.conf` (so they stay in
/// the cache when the container runs ldconfig itself), makes sure `/etc/ld.so.conf` includes
/// that directory when the image has none, then runs the host `ldconfig` (an fd opened on the
/// host, see [`ldconfig::open_host`]) isolated in the rootfs.
pub fn update_ldcache(root: &Rootfs, ldconfig: BorrowedFd, folders: &[PathBuf]) -> Result<(), HookError> {
    if let Some(bad) = folders.iter().find(|f| !is_clean_absolute(f)) {
        return Err(HookError::BadFolder(bad.clone()));
    }
    if !folders.is_empty() {
        let text: String = folders.iter().map(|f| format!("{}\n", f.display())).collect();
        ldso_conf::write_conf(root, "00-nvcr", &text)?;
    }
    ldso_conf::ensure_ldso_conf(root)?;
    ldconfig::run_isolated(root, ldconfig, folders)?;
    Ok(())
}

/// The host's `/proc/driver/nvidia` (under `proc_root`) as the files the container should see,
/// with `ModifyDeviceFiles: 0` in `params`. `None` when the host's params already say 0
/// (upstream does nothing then), and `None` when the host has no `params` file at all (no
/// NVIDIA driver loaded, or a simulated host whose procfs copy is elsewhere): upstream's hook
/// treats a missing file as nothing to do, and a spec written for such a host must not make
/// every container fail. Read on the host, before entering the container.
pub fn masked_proc_driver(proc_root: &Path) -> Result<Option<Vec<(PathBuf, String)>>, HookError> {
    let base = proc_root.join("driver/nvidia");
    let params_path = base.join("params");
    match std::fs::symlink_metadata(&params_path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    let params = devices::read_proc_file(&params_path)
        .map_err(|e| HookError::HostProc { path: params_path.clone(), source: io::Error::other(e.to_string()) })?;
    let modify = devices::params_without_device_modification(&params);
    if modify == params {
        return Ok(None);
    }
    let mut files = Vec::new();
    collect_proc_files(&base, Path::new(""), 0, &mut files);
    files.retain(|(p, _)| p != Path::new("params"));
    files.push(("params".into(), modify));
    files.sort();
    Ok(Some(files))
}

/// Readable regular files under `dir` (a procfs copy of a few dozen small files), bounded in
/// depth and count; unreadable entries are skipped.
fn collect_proc_files(base: &Path, rel: &Path, depth: usize, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(base.join(rel)) else { return };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if out.len() >= 4096 {
            return;
        }
        let Ok(ft) = e.file_type() else { continue };
        let rel = rel.join(e.file_name());
        if ft.is_dir() && depth < 6 {
            collect_proc_files(base, &rel, depth + 1, out);
        } else if ft.is_file() {
            if let Ok(text) = devices::read_proc_file(&e.path()) {
                out.push((rel, text));
            }
        }
    }
}

/// `disable-device-node-modification`: the container's `/proc/driver/nvidia` becomes a
/// read-only tmpfs with `files` (from [`masked_proc_driver`]), the same mask the prestart
/// hook mounts.
pub fn disable_device_node_modification(root: &Rootfs, files: &[(PathBuf, String)]) -> Result<(), HookError> {
    apply::mask_proc_driver(root, files).map_err(HookError::Mask)
}

/// Removes the dynamic loader's variables from this process's environment: a hook is started
/// by the runtime, sometimes with the container's environment.
pub fn scrub_own_env() {
    for (k, _) in std::env::vars_os() {
        if k.as_bytes().starts_with(b"LD_") || k == "GCONV_PATH" {
            std::env::remove_var(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_cases() {
        let cases: &[(&str, &str, Option<(&str, &str)>)] = &[
            ("relative target", "libcuda.so.1::/usr/lib64/libcuda.so", Some(("libcuda.so.1", "/usr/lib64/libcuda.so"))),
            ("absolute target", "/usr/lib/x::/usr/lib/y", Some(("/usr/lib/x", "/usr/lib/y"))),
            ("target with ::", "a::b::/c", None),
            ("no separator", "/usr/lib/x", None),
            ("relative link", "x::usr/lib/y", None),
            ("dotdot link", "x::/usr/../etc/y", None),
            ("dot link", "x::/usr/lib/.", None),
            ("trailing slash", "x::/usr/lib/", None),
            ("root link", "x::/", None),
            ("empty target", "::/usr/lib/y", None),
        ];
        for (name, arg, want) in cases {
            let got = Link::parse(arg).ok();
            let want = want.map(|(t, l)| Link { target: t.into(), link: l.into() });
            assert_eq!(got, want, "case {name}");
        }
    }
}
