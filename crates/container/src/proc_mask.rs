//! The `/proc/driver/nvidia` mask: a read-only tmpfs holding the files of a
//! [`nvct_model::ProcMask`] (params with `ModifyDeviceFiles: 0`, registry, version, and the
//! `gpus/<bus id>/` files of the container's GPUs only) mounted over the container's
//! `/proc/driver/nvidia`. The prestart hook and `disable-device-node-modification` both call
//! [`mount`]. Must run in the container's mount namespace; never mounts anything from the image.

use super::rootfs::{Rootfs, RootfsError};
use nvct_model::ProcMask;
use nvct_sys as sys;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// Mounts the mask over the container's `/proc/driver/nvidia`. Without a driver in this kernel
/// (a simulated host) that directory does not exist in procfs and cannot be created; then the
/// tmpfs goes over `/proc/driver` and holds `nvidia/`.
pub fn mount(root: &Rootfs, mask: &ProcMask) -> Result<(), String> {
    let (target, base) = match root.resolve(
        Path::new("/proc/driver/nvidia"),
        libc::O_PATH | libc::O_DIRECTORY,
    ) {
        Ok(fd) => (fd, PathBuf::new()),
        Err(RootfsError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => {
            let fd = root
                .resolve(Path::new("/proc/driver"), libc::O_PATH | libc::O_DIRECTORY)
                .map_err(|e| e.to_string())?;
            (fd, PathBuf::from("nvidia"))
        }
        Err(e) => return Err(e.to_string()),
    };
    root.check_not_shared(&target, Path::new("/proc/driver"))
        .map_err(|e| e.to_string())?;
    if sys::fstatfs_type(target.as_fd()).map_err(|e| format!("statfs /proc/driver: {e}"))?
        != PROC_SUPER_MAGIC
    {
        return Err("the container's /proc/driver is not on procfs; refusing to mask it".into());
    }
    let tmpfs = sys::new_tmpfs(&[(c"mode", c"0555"), (c"size", c"1m")])
        .map_err(|e| format!("tmpfs for /proc/driver/nvidia: {e}"))?;
    for (rel, text) in &mask.files {
        let path = base.join(rel);
        let mut dir = sys::openat(
            tmpfs.as_fd(),
            Path::new("."),
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )
        .map_err(|e| e.to_string())?;
        if let Some(parent) = path.parent() {
            for c in parent.components() {
                let name = Path::new(c.as_os_str());
                match sys::mkdirat(dir.as_fd(), name, 0o555) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => return Err(format!("tmpfs mkdir {}: {e}", name.display())),
                }
                dir = sys::openat(
                    dir.as_fd(),
                    name,
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    0,
                )
                .map_err(|e| e.to_string())?;
            }
        }
        let name = Path::new(path.file_name().unwrap_or_default());
        let fd = sys::openat(
            dir.as_fd(),
            name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            0o444,
        )
        .map_err(|e| format!("tmpfs file {}: {e}", path.display()))?;
        std::fs::File::from(fd)
            .write_all(text.as_bytes())
            .map_err(|e| format!("tmpfs file {}: {e}", path.display()))?;
    }
    sys::set_mount_attr(
        tmpfs.as_fd(),
        sys::MOUNT_ATTR_RDONLY
            | sys::MOUNT_ATTR_NOSUID
            | sys::MOUNT_ATTR_NODEV
            | sys::MOUNT_ATTR_NOEXEC,
        0,
    )
    .map_err(|e| format!("read-only /proc/driver/nvidia: {e}"))?;
    sys::move_mount(tmpfs.as_fd(), target.as_fd())
        .map_err(|e| format!("mask /proc/driver/nvidia: {e}"))
}
