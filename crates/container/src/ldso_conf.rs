//! Entries in a container's `/etc/ld.so.conf.d`, written through the rootfs gate: the folder
//! list of the CDI hook `update-ldcache`, and CUDA forward compatibility (the CDI hook
//! `enable-cuda-compat` and the prestart hook both call [`enable_cuda_compat`]).
//!
//! Forward compatibility only ever writes a conf file naming the image's
//! `/usr/local/cuda/compat`, so the next ldconfig (ours, run isolated) puts those libraries
//! first; nothing from the image is mounted or followed to the host. Must not: write through a
//! symlink or into anything but a regular file, or walk a path outside [`Rootfs`].

use crate::rootfs::{Rootfs, RootfsError};
use nvct_sys as sys;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

/// Where CUDA images keep their forward-compatibility driver libraries.
pub const CUDA_COMPAT_DIR: &str = "/usr/local/cuda/compat";
/// The name prefix of the conf file [`enable_cuda_compat`] writes (`00-compat-<hash>.conf`);
/// the native ld cache writer looks for it (`ld_cache.rs`).
pub const COMPAT_CONF_PREFIX: &str = "00-compat";
const LDSO_CONF: &str = "/etc/ld.so.conf";
const LDSO_CONF_D: &str = "/etc/ld.so.conf.d";

#[derive(Debug, thiserror::Error)]
pub enum LdsoConfError {
    #[error(transparent)]
    Rootfs(#[from] RootfsError),
    #[error("cannot write {path} in the container: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("{path} in the container is {what}; refusing to write through it")]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("host driver version {0:?} is not a driver version like 550.54.15")]
    BadVersion(String),
    #[error("CUDA compat directory {0:?} is not an absolute, clean container path")]
    BadCompatDir(PathBuf),
    #[error("cannot list {path} in the container: {source}")]
    List { path: PathBuf, source: io::Error },
}

/// `/etc/ld.so.conf` with `include /etc/ld.so.conf.d/*.conf`, created only if nothing is there
/// (an image's own file, or link, is left alone).
pub fn ensure_ldso_conf(root: &Rootfs) -> Result<(), LdsoConfError> {
    let dir = root.mkdir_all(Path::new("/etc"))?;
    let err = |source| LdsoConfError::Write {
        path: LDSO_CONF.into(),
        source,
    };
    match sys::openat(
        dir.as_fd(),
        Path::new("ld.so.conf"),
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        0o644,
    ) {
        Ok(fd) => std::fs::File::from(fd)
            .write_all(format!("include {LDSO_CONF_D}/*.conf\n").as_bytes())
            .map_err(err),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(()),
        Err(e) => Err(err(e)),
    }
}

/// Writes `/etc/ld.so.conf.d/<prefix>-<hash of text>.conf` through the gate: the directory
/// is resolved (created) in the rootfs, a new temp file is created in it (`O_EXCL`, no
/// symlink followed) and written, then renamed over the name. Nothing that was at the name is
/// ever opened or written through: an image's symlink, hardlink (to a host file), FIFO or
/// device there is replaced as a directory entry, and a directory there is refused.
pub fn write_conf(root: &Rootfs, prefix: &str, text: &str) -> Result<PathBuf, LdsoConfError> {
    let name = format!("{prefix}-{:08x}.conf", fnv1a(text.as_bytes()));
    let path = Path::new(LDSO_CONF_D).join(&name);
    match root.replace_file(Path::new(LDSO_CONF_D), &name, text.as_bytes(), 0o644) {
        Ok(()) => Ok(path),
        Err(RootfsError::BadTarget { path: p, what }) if p == path => {
            Err(LdsoConfError::NotRegular { path, what })
        }
        Err(RootfsError::Io { path: p, source }) if p == path => {
            Err(LdsoConfError::Write { path, source })
        }
        Err(e) => Err(e.into()),
    }
}

/// 32-bit FNV-1a: a stable, short name for a conf file from its contents.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// The major number of a driver version (`550.54.15` → 550).
fn driver_major(version: &str) -> Option<u32> {
    let major = version.split('.').next()?;
    (!major.is_empty() && major.bytes().all(|b| b.is_ascii_digit()))
        .then(|| major.parse().ok())
        .flatten()
}

/// `enable-cuda-compat`: if the image has exactly one regular file `libcuda.so.<major>.<…>`
/// in `/usr/local/cuda/compat` and its major is newer than the host driver's (upstream's
/// rule), writes `/etc/ld.so.conf.d/00-compat-<hash>.conf` naming that directory, so the next
/// ldconfig puts the compat libraries first. Nothing is mounted. Returns the conf file written.
pub fn enable_cuda_compat(
    root: &Rootfs,
    host_driver_version: &str,
    compat_dir: &Path,
) -> Result<Option<PathBuf>, LdsoConfError> {
    if !crate::rootfs::is_clean_absolute(compat_dir) {
        return Err(LdsoConfError::BadCompatDir(compat_dir.to_path_buf()));
    }
    if host_driver_version.is_empty() {
        return Ok(None);
    }
    let host = driver_major(host_driver_version)
        .ok_or_else(|| LdsoConfError::BadVersion(host_driver_version.into()))?;
    let dir = match root.resolve(compat_dir, libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(RootfsError::Io { source, .. })
            if matches!(source.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    // Only `libcuda.so.*` names are kept, a few: a real compat dir has one such file, and
    // more than one gives no compat conf anyway.
    let libcuda = |n: &[u8]| n.starts_with(b"libcuda.so.");
    let names = sys::list_dir(dir.as_fd(), libcuda, MAX_COMPAT_NAMES).map_err(|source| {
        LdsoConfError::List {
            path: compat_dir.to_path_buf(),
            source,
        }
    })?;
    let compat: Vec<u32> = names
        .iter()
        .filter_map(|n| compat_major(n).filter(|_| is_regular(dir.as_fd(), n)))
        .collect();
    match compat.as_slice() {
        [major] if *major > host => {
            let text = format!("{}\n", compat_dir.display());
            Ok(Some(write_conf(root, COMPAT_CONF_PREFIX, &text)?))
        }
        _ => Ok(None),
    }
}

/// The most `libcuda.so.*` names read from an image's compat dir.
const MAX_COMPAT_NAMES: usize = 64;

/// `libcuda.so.560.35.03` → 560 (upstream globs `libcuda.so.*.*`).
fn compat_major(name: &OsStr) -> Option<u32> {
    let version = name.to_str()?.strip_prefix("libcuda.so.")?;
    version
        .contains('.')
        .then(|| driver_major(version))
        .flatten()
}

fn is_regular(dir: BorrowedFd, name: &OsStr) -> bool {
    sys::openat(dir, Path::new(name), libc::O_PATH | libc::O_NOFOLLOW, 0)
        .and_then(|fd| sys::fstat(fd.as_fd()))
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compat_major_cases() {
        let cases: &[(&str, Option<u32>)] = &[
            ("libcuda.so.560.35.03", Some(560)),
            ("libcuda.so.1", None),
            ("libcuda.so.560", None),
            ("libcuda.so.x.1", None),
            ("libcudart.so.12.4", None),
            ("libnvidia-ptxjitcompiler.so.560.35.03", None),
        ];
        for (name, want) in cases {
            assert_eq!(compat_major(OsStr::new(name)), *want, "case {name}");
        }
        assert_eq!(driver_major("550.54.15"), Some(550));
        assert_eq!(driver_major("abc"), None);
        assert_eq!(driver_major(""), None);
    }
}
