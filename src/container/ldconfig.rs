//! The host ldconfig, run safely against a container rootfs: the one runner shared by the
//! prestart hook (`apply.rs`) and the CDI `update-ldcache` hook (`cdi_hooks.rs`).
//!
//! The binary is opened on the host ([`open_host`]) before anything touches the container and
//! is executed from that fd (execveat), so nothing from the image is ever run. It runs in a
//! clone3 child with new mount/pid/ipc/uts/net namespaces, chrooted into the rootfs, with the
//! container's /proc and /sys detached and an empty environment: `ldconfig` follows symlinks
//! inside the rootfs, which the image controls, so the rootfs must *be* its `/`
//! (`ldconfig -r ROOT` from the host would follow them on the host).
//!
//! Must not: look the binary up by a path after entering the container, or inherit any
//! environment.

use crate::container::ldso_conf::{self, LdsoConfError};
use crate::container::rootfs::{is_clean_absolute, Rootfs, RootfsError};
use crate::sys;
use std::ffi::CString;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LdconfigError {
    #[error("the ldconfig path {path} is not absolute: the host ldconfig must be named by an absolute host path")]
    NotAbsolute { path: PathBuf },
    #[error("cannot open the host ldconfig {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("ld cache directory {path:?} is not an absolute, clean path without newlines")]
    BadDir { path: PathBuf },
    #[error(transparent)]
    Conf(#[from] LdsoConfError),
    #[error("cannot prepare /etc in the container: {0}")]
    Etc(#[from] RootfsError),
    #[error("ldconfig for {rootfs}: cannot start a child in new namespaces (clone3): {source}")]
    Clone { rootfs: PathBuf, source: io::Error },
    #[error("ldconfig for {rootfs}: cannot wait for the child: {source}")]
    Wait { rootfs: PathBuf, source: io::Error },
    #[error("the host ldconfig failed for {rootfs} (exit status {code}); its stderr above says why")]
    Failed { rootfs: PathBuf, code: i32 },
}

/// Opens the host ldconfig binary. `path` must be absolute (a host path, never resolved in
/// a container).
pub fn open_host(path: &Path) -> Result<OwnedFd, LdconfigError> {
    if !path.is_absolute() {
        return Err(LdconfigError::NotAbsolute { path: path.to_path_buf() });
    }
    std::fs::File::open(path)
        .map(OwnedFd::from)
        .map_err(|source| LdconfigError::Open { path: path.to_path_buf(), source })
}

/// The plan's `ldcache_dirs`, for the prestart hook and `update-ldcache` alike: lists `dirs` in
/// `/etc/ld.so.conf.d/00-nvcr-<hash>.conf` (so they stay in the cache when the container runs
/// ldconfig itself; skipped when the image's `/etc/ld.so.conf.d` cannot be written safely),
/// makes sure `/etc/ld.so.conf` includes that directory when the image has
/// none, then runs the host ldconfig isolated ([`run_isolated`]).
pub fn refresh(root: &Rootfs, ldconfig: BorrowedFd, dirs: &[PathBuf]) -> Result<(), LdconfigError> {
    if let Some(bad) = dirs.iter().find(|d| !is_clean_absolute(d)) {
        return Err(LdconfigError::BadDir { path: bad.clone() });
    }
    if !dirs.is_empty() {
        let text: String = dirs.iter().map(|d| format!("{}\n", d.display())).collect();
        match ldso_conf::write_conf(root, "00-nvcr", &text) {
            // The image's ld.so.conf.d is a link out of the rootfs or not a directory: it is
            // not written through, and the cache still gets `dirs` from ldconfig's arguments.
            Err(LdsoConfError::Rootfs(RootfsError::BadTarget { .. })) => {}
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
    }
    ldso_conf::ensure_ldso_conf(root)?;
    run_isolated(root, ldconfig, dirs)
}

/// Runs `ldconfig DIR...` from the fd `ldconfig` (see [`open_host`]) with the rootfs as `/`.
/// Must be called from inside the container's mount namespace (its /proc and /sys are the
/// mounts detached in the child).
pub fn run_isolated(root: &Rootfs, ldconfig: BorrowedFd, dirs: &[PathBuf]) -> Result<(), LdconfigError> {
    root.mkdir_all(Path::new("/etc"))?;
    let mut argv = vec![CString::from(c"ldconfig")];
    for d in dirs {
        argv.push(CString::new(d.as_os_str().as_bytes()).map_err(|_| LdconfigError::BadDir { path: d.clone() })?);
    }
    let rootfs = root.host_path().to_path_buf();
    let flags = (libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS | libc::CLONE_NEWNET) as u64;
    if !sys::single_threaded() {
        let source = io::Error::other("the calling process has more than one thread");
        return Err(LdconfigError::Clone { rootfs, source });
    }
    // SAFETY: single-threaded (checked above); the child only makes syscalls, prints one line
    // and execs or `exit_now`s.
    let pid = unsafe { sys::fork_into_new_namespaces(flags) }.map_err(|source| LdconfigError::Clone { rootfs: rootfs.clone(), source })?;
    if pid == 0 {
        let err = (|| -> io::Result<io::Error> {
            sys::make_mounts_private()?;
            sys::chroot_fd(root.fd())?;
            // The container's /proc and /sys are not ldconfig's business; detached, they
            // cannot be reached through any path the image controls.
            let _ = sys::detach(c"/proc");
            let _ = sys::detach(c"/sys");
            Ok(sys::exec_fd(ldconfig, &argv, &[]))
        })();
        let e = match err {
            Ok(e) | Err(e) => e,
        };
        eprintln!("nvct: cannot run the host ldconfig in {}: {e}", rootfs.display());
        sys::exit_now(127);
    }
    match sys::wait(pid) {
        Ok(0) => Ok(()),
        Ok(code) => Err(LdconfigError::Failed { rootfs, code }),
        Err(source) => Err(LdconfigError::Wait { rootfs, source }),
    }
}
