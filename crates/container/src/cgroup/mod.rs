//! The container's device cgroup: allow the GPU device nodes the prestart hook injects, on
//! cgroup v1 (`devices.allow`) and cgroup v2 (the runtime's BPF device program, extended).
//!
//! Owns: [`allow_devices`] and [`CgroupError`]; reading `/proc/<pid>/cgroup` and
//! `/proc/self/mountinfo` and dispatching to `v1.rs` or `v2.rs`. Must not: mount anything, touch
//! the container's rootfs, or widen access beyond read+write on the listed character devices
//! (no mknod, no block devices). Files: `locate.rs` PURE (which hierarchy, which directory),
//! `given.rs` PURE (whether config.json's own device list already allows the rules),
//! `v1.rs` (devices.allow), `v2.rs` (which programs to replace and how, through the bpf(2)
//! wrappers in `sys/bpf.rs`), `insn.rs` PURE (eBPF encoding, our prefix), `systemd.rs` (the
//! same rules kept by systemd for a container that is a systemd scope), `dbus.rs` (the one
//! D-Bus call to systemd that does it without a `systemctl` process).

pub mod dbus;
mod given;
pub mod insn;
mod locate;
pub mod systemd;
mod v1;
pub mod v2;

pub use given::spec_allows;
pub use locate::{locate, Hierarchy, LocateError};

use nvct_model::CgroupRule;
use std::io;
use std::path::{Path, PathBuf};

/// What to do when the hook may not change the device cgroup.
pub const WAYS_OUT: &str = "either set `nvidia-container-cli.no-cgroups = true` in \
    /etc/nvidia-container-runtime/config.toml (the container's spec must then allow the \
    devices itself), or use CDI, where the devices are in the container's spec from the start: \
    podman `--device nvidia.com/gpu=N` (after `nvidia-ctk cdi generate --output \
    /var/run/cdi/nvidia.yaml`), or for docker and containerd the runtime \
    `nvidia-container-runtime` with `mode = \"cdi\"` or `mode = \"jit-cdi\"`";

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{cgroup_file}: {source}")]
    Locate {
        cgroup_file: PathBuf,
        source: LocateError,
    },
    #[error("cgroup v1: cannot {op} {path}: {source}")]
    V1 {
        path: PathBuf,
        op: String,
        source: io::Error,
    },
    #[error("cgroup v2: cannot open {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("cgroup v2: {path} is not on a cgroup2 file system (statfs type {fs_type:#x})")]
    NotCgroup2 { path: PathBuf, fs_type: i64 },
    #[error(
        "{path}: {op} was refused ({source}): changing a container's device cgroup needs \
         CAP_SYS_ADMIN (cgroup v2: and CAP_BPF) over that cgroup, which a rootless or \
         unprivileged runtime does not have; {ways_out}",
        ways_out = WAYS_OUT
    )]
    Denied {
        path: PathBuf,
        op: String,
        source: io::Error,
    },
    #[error("cgroup v2: {path}: {op}: {source}")]
    Bpf {
        path: PathBuf,
        op: String,
        source: io::Error,
    },
    #[error(
        "cgroup v2: {path}: device program {id} ({name:?}) cannot be extended: {why}; {ways_out}",
        ways_out = WAYS_OUT
    )]
    Unsupported {
        path: PathBuf,
        id: u32,
        name: String,
        why: String,
    },
    #[error(
        "cgroup v2: {path}: the kernel refused our extension of device program {id}: {source}; \
         please report this with the verifier log:\n{log}"
    )]
    Verifier {
        path: PathBuf,
        id: u32,
        source: io::Error,
        log: String,
    },
}

/// Allows read+write on each `c MAJ:MIN` in `rules` in the device cgroup of process `pid`.
///
/// cgroup v1: one `c MAJ:MIN rw` per rule into its `devices.allow`. cgroup v2: every device
/// program attached to the process's cgroup is atomically replaced by our prefix (allow these
/// nodes) followed by that program's own instructions, unchanged; a cgroup with no device
/// program restricts nothing and is left alone. No rules: nothing is read or changed.
pub fn allow_devices(pid: u32, rules: &[CgroupRule]) -> Result<(), CgroupError> {
    if rules.is_empty() {
        return Ok(());
    }
    let cgroup_file = PathBuf::from(format!("/proc/{pid}/cgroup"));
    let text = read(&cgroup_file)?;
    let mountinfo = read(Path::new("/proc/self/mountinfo"))?;
    match locate(&text, &mountinfo).map_err(|source| CgroupError::Locate {
        cgroup_file,
        source,
    })? {
        Hierarchy::V1(dir) => v1::allow(&dir, rules),
        Hierarchy::V2(dir) => v2::allow(&dir, rules),
    }
}

/// After [`allow_devices`]: asks systemd to keep the rules when the container (`id`, its init
/// `pid`) is a systemd scope of its own ([`systemd::keep_rules`]); a line for the log, if there
/// is anything to say (`Ok`: done, `Err`: not, a warning).
pub fn keep_with_systemd(
    pid: u32,
    id: &str,
    rules: &[CgroupRule],
) -> Option<Result<String, String>> {
    // Off the hot path where systemd is not the init: one stat, no read.
    if rules.is_empty() || !systemd::booted() {
        return None;
    }
    let text = nvct_sys::procfs::read(Path::new(&format!("/proc/{pid}/cgroup"))).ok()?;
    systemd::keep_rules(&text, id, rules)
}

fn read(path: &Path) -> Result<String, CgroupError> {
    nvct_sys::procfs::read(path).map_err(|source| CgroupError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn is_denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_names_both_ways_out_and_the_path() {
        let e = CgroupError::Denied {
            path: PathBuf::from("/sys/fs/cgroup/user.slice/c1"),
            op: "BPF_PROG_QUERY".into(),
            source: io::Error::from_raw_os_error(libc::EPERM),
        };
        let m = e.to_string();
        assert!(m.contains("/sys/fs/cgroup/user.slice/c1"), "{m}");
        assert!(m.contains("nvidia-container-cli.no-cgroups = true"), "{m}");
        assert!(
            m.contains("/etc/nvidia-container-runtime/config.toml"),
            "{m}"
        );
        assert!(
            m.contains("mode = \"cdi\"") && m.contains("mode = \"jit-cdi\""),
            "{m}"
        );
        assert!(m.contains("podman `--device nvidia.com/gpu=N`"), "{m}");
    }

    #[test]
    fn no_rules_reads_nothing() {
        // pid 0 has no /proc entry: reading it would fail.
        assert!(allow_devices(0, &[]).is_ok());
    }
}
