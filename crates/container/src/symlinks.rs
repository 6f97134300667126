//! Symlinks in the container ([`nvct_model::Symlink`], e.g. `libcuda.so -> libcuda.so.1`):
//! each link's parent is resolved (and created) through the rootfs gate and the link made with
//! symlinkat relative to that directory fd. An identical existing link is fine; an existing
//! symlink to something else, or a file, is replaced (a new link renamed over it in the same
//! directory fd, as upstream replaces it: an image's `libcuda.so` pointing at a CUDA stub must
//! not fail the start); a directory at the link's path is an error naming it.
//! Called by the prestart hook and `create-symlinks`.

use super::rootfs::{Rootfs, RootfsError};
use nvct_model::Symlink;
use nvct_sys as sys;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SymlinkError {
    #[error("symlink {0}: not an absolute path with a file name")]
    BadLink(PathBuf),
    #[error(transparent)]
    Rootfs(#[from] RootfsError),
    #[error("cannot create the symlink {link} -> {target} in the container: {source}")]
    Create {
        link: PathBuf,
        target: PathBuf,
        source: io::Error,
    },
    #[error("{link} already exists in the container and is {what}, not a symlink to {target}; refusing to replace it")]
    Exists {
        link: PathBuf,
        target: PathBuf,
        what: String,
    },
}

pub fn create(root: &Rootfs, links: &[Symlink]) -> Result<(), SymlinkError> {
    // The directory last resolved (and checked): links come in runs of one directory (a
    // library's, /dev/dri/by-path), each made relative to the same fd.
    let mut last: Option<(&Path, std::os::fd::OwnedFd)> = None;
    for l in links {
        let (Some(parent), Some(name)) = (l.link.parent(), l.link.file_name()) else {
            return Err(SymlinkError::BadLink(l.link.clone()));
        };
        let name = Path::new(name);
        let fd = match last.take() {
            Some((p, fd)) if p == parent => fd,
            _ => root.mkdir_all(parent)?,
        };
        let dir = &last.insert((parent, fd)).1;
        let err = |source| SymlinkError::Create {
            link: l.link.clone(),
            target: l.target.clone(),
            source,
        };
        match sys::symlinkat(&l.target, dir.as_fd(), name) {
            Ok(()) => continue,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(source) => return Err(err(source)),
        }
        match sys::readlinkat(dir.as_fd(), name) {
            Ok(existing) if existing == l.target => continue,
            // A link to something else, or a file of the image: replaced as a directory entry
            // (a new link renamed over it in the same directory fd; rename never follows the
            // old entry), as upstream's hook replaces it.
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(source) => return Err(err(source)),
        }
        let tmp = PathBuf::from(format!(".{}.nvct-{}", name.display(), std::process::id()));
        let _ = sys::unlinkat(dir.as_fd(), &tmp);
        sys::symlinkat(&l.target, dir.as_fd(), &tmp).map_err(err)?;
        if let Err(source) = sys::renameat(dir.as_fd(), &tmp, name) {
            let _ = sys::unlinkat(dir.as_fd(), &tmp);
            return Err(match source.raw_os_error() {
                Some(libc::EISDIR) | Some(libc::ENOTEMPTY) | Some(libc::EEXIST) => {
                    SymlinkError::Exists {
                        link: l.link.clone(),
                        target: l.target.clone(),
                        what: "a directory".into(),
                    }
                }
                _ => err(source),
            });
        }
    }
    Ok(())
}
