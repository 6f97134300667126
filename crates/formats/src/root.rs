//! Where the driver lives on the host: [`DriverRoot`] holds the driver root (`/`, or
//! `/run/nvidia/driver` with a containerised driver), the device root and the procfs root.
//! Host ↔ container path arithmetic only; nothing here touches the filesystem, and nothing
//! here may be used for paths inside a *container* rootfs (that is `rootfs.rs`'s job).

use nvct_model::Arch;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverRoot {
    /// Where driver libraries, binaries, firmware and `etc/ld.so.cache` are found.
    pub root: PathBuf,
    /// Where `dev/nvidia*` are found.
    pub dev_root: PathBuf,
    /// Where `driver/nvidia/...` and `devices` are read (normally `/proc`).
    pub proc_root: PathBuf,
    /// Whose libraries are taken (the host's; another only in tests of other layouts).
    pub arch: Arch,
}

impl DriverRoot {
    pub fn new(
        root: impl Into<PathBuf>,
        dev_root: impl Into<PathBuf>,
        proc_root: impl Into<PathBuf>,
    ) -> Self {
        DriverRoot {
            root: root.into(),
            dev_root: dev_root.into(),
            proc_root: proc_root.into(),
            arch: Arch::host(),
        }
    }

    /// The host path of a path as seen from inside the driver root (`/usr/bin/nvidia-smi`).
    pub fn host_path(&self, path: impl AsRef<Path>) -> PathBuf {
        under(&self.root, path.as_ref())
    }

    /// The host path of a device node path (`/dev/nvidia0`).
    pub fn dev_path(&self, path: impl AsRef<Path>) -> PathBuf {
        under(&self.dev_root, path.as_ref())
    }

    /// The host path of a procfs-relative path (`driver/nvidia/version`).
    pub fn proc_path(&self, path: impl AsRef<Path>) -> PathBuf {
        under(&self.proc_root, path.as_ref())
    }

    /// The host path of a sysfs path (`bus/pci/devices/0000:18:00.0/drm`). sysfs is read
    /// beside the procfs root, at `<proc root>/../sys`: `/sys` for the default `/proc` (and
    /// `/host/sys` for `/host/proc`); upstream has no option for it and always reads `/sys`.
    pub fn sys_path(&self, path: impl AsRef<Path>) -> PathBuf {
        let sys = self
            .proc_root
            .parent()
            .unwrap_or(Path::new("/"))
            .join("sys");
        under(&sys, path.as_ref())
    }

    /// Inverse of [`host_path`](Self::host_path): `/run/nvidia/driver/usr/bin/x` → `/usr/bin/x`.
    pub fn driver_path(&self, host: &Path) -> Option<PathBuf> {
        host.strip_prefix(&self.root)
            .ok()
            .map(|rest| Path::new("/").join(rest))
    }
}

/// `base` + `path` with `path`'s root, `.` and `..` components dropped: the result never
/// leaves `base` lexically.
fn under(base: &Path, path: &Path) -> PathBuf {
    let mut out = base.to_path_buf();
    for c in path.components() {
        if let Component::Normal(n) = c {
            out.push(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_cases() {
        let r = DriverRoot::new("/run/nvidia/driver", "/", "/proc");
        let cases = [
            (
                r.host_path("/usr/lib/libcuda.so.1"),
                "/run/nvidia/driver/usr/lib/libcuda.so.1",
            ),
            (
                r.host_path("usr/bin/nvidia-smi"),
                "/run/nvidia/driver/usr/bin/nvidia-smi",
            ),
            (
                r.host_path("/../../etc/shadow"),
                "/run/nvidia/driver/etc/shadow",
            ),
            (r.dev_path("/dev/nvidia0"), "/dev/nvidia0"),
            (
                r.proc_path("driver/nvidia/version"),
                "/proc/driver/nvidia/version",
            ),
            (
                r.sys_path("bus/pci/devices/0000:18:00.0/drm"),
                "/sys/bus/pci/devices/0000:18:00.0/drm",
            ),
            (
                DriverRoot::new("/", "/", "/host/proc").sys_path("/../bus/pci"),
                "/host/sys/bus/pci",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, Path::new(want));
        }
        assert_eq!(
            r.driver_path(Path::new("/run/nvidia/driver/usr/bin/x")),
            Some(PathBuf::from("/usr/bin/x"))
        );
        assert_eq!(r.driver_path(Path::new("/usr/bin/x")), None);
    }
}
