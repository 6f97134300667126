//! PURE: which device cgroup a process is in and where its directory is, from the text of
//! `/proc/<pid>/cgroup` and `/proc/self/mountinfo`.
//!
//! Owns: parsing `/proc/<pid>/cgroup` and the v1/v2 decision (mountinfo lines come from
//! `container/mountinfo.rs`). Must
//! not: read files or make syscalls (the caller passes the text), or accept a cgroup path that
//! is not plain (`..`, `.`, relative), since it is joined onto a host mount point.

use crate::mountinfo::MountEntry;
use std::path::{Component, Path, PathBuf};

/// The directory that controls the process's device access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v1: the process's directory in the `devices` hierarchy (holds `devices.allow`).
    V1(PathBuf),
    /// cgroup v2: the process's directory in the unified hierarchy (device programs attach
    /// here).
    V2(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocateError {
    #[error(
        "cgroup path {0:?} is not a plain absolute path (a `..` means the process is outside \
         this cgroup namespace: run the hook in the host's cgroup namespace)"
    )]
    BadPath(String),
    #[error(
        "the process is in cgroup v1 devices cgroup {0:?}, but /proc/self/mountinfo has no \
         cgroup v1 mount with the devices controller that contains it: mount the devices \
         hierarchy in the hook's mount namespace"
    )]
    V1NotMounted(String),
    #[error(
        "the process is in cgroup v2 cgroup {0:?}, but /proc/self/mountinfo has no cgroup2 \
         mount that contains it: mount cgroup2 (usually at /sys/fs/cgroup) in the hook's \
         mount namespace"
    )]
    V2NotMounted(String),
    #[error(
        "no cgroup v1 `devices` line and no cgroup v2 `0::` line: the kernel has no device \
         cgroup for this process"
    )]
    NoController,
}

/// Decides v1 or v2 and returns the directory. v1 when the process has a `devices` line and a
/// v1 hierarchy with that controller is mounted; a process in the v1 root devices cgroup (`/`,
/// which restricts nothing) with no v1 mount is treated as v2 when it has a `0::` line.
pub fn locate(proc_cgroup: &str, mountinfo: &str) -> Result<Hierarchy, LocateError> {
    let mut v1 = None;
    let mut v2 = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "devices") {
            v1.get_or_insert(path);
        } else if id == "0" && controllers.is_empty() {
            v2.get_or_insert(path);
        }
    }
    let mounts = crate::mountinfo::parse(mountinfo);
    if let Some(path) = v1 {
        let cg = plain(path)?;
        let v1_devices = |m: &MountEntry| {
            m.fstype == "cgroup" && m.super_opts.split(',').any(|o| o == "devices")
        };
        if let Some(dir) = find(&mounts, v1_devices, cg) {
            return Ok(Hierarchy::V1(dir));
        }
        if cg != Path::new("/") || v2.is_none() {
            return Err(LocateError::V1NotMounted(path.to_string()));
        }
    }
    let path = v2.ok_or(LocateError::NoController)?;
    let cg = plain(path)?;
    find(&mounts, |m| m.fstype == "cgroup2", cg)
        .map(Hierarchy::V2)
        .ok_or_else(|| LocateError::V2NotMounted(path.to_string()))
}

/// `path` as an absolute path of normal components only.
fn plain(path: &str) -> Result<&Path, LocateError> {
    let p = Path::new(path);
    let mut components = p.components();
    let rooted = components.next() == Some(Component::RootDir);
    // `Path::components` drops `.` in the middle; refuse it in the text as well.
    let dot = path.split('/').any(|c| c == "." || c == "..");
    if !rooted || dot || !components.all(|c| matches!(c, Component::Normal(_))) {
        return Err(LocateError::BadPath(path.to_string()));
    }
    Ok(p)
}

/// The first mount of the right kind whose root contains `cg`, joined with the rest of `cg`.
fn find(mounts: &[MountEntry], kind: impl Fn(&MountEntry) -> bool, cg: &Path) -> Option<PathBuf> {
    mounts.iter().filter(|m| kind(m)).find_map(|m| {
        let rel = cg.strip_prefix(&m.root).ok()?;
        Some(if rel.as_os_str().is_empty() {
            m.mount_point.clone()
        } else {
            m.mount_point.join(rel)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_CGROUP: &str = "12:devices:/docker/abc\n11:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/system.slice/docker-abc.scope\n";
    const HYBRID_MOUNTS: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:28 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
36 31 0:32 / /sys/fs/cgroup/devices rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,devices
37 31 0:33 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,memory
";
    const V2_CGROUP: &str = "0::/system.slice/docker-abc.scope\n";
    const V2_MOUNTS: &str = "\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    fn v1(p: &str) -> Result<Hierarchy, LocateError> {
        Ok(Hierarchy::V1(PathBuf::from(p)))
    }
    fn v2(p: &str) -> Result<Hierarchy, LocateError> {
        Ok(Hierarchy::V2(PathBuf::from(p)))
    }

    #[test]
    fn cases() {
        let nested_root =
            "40 31 0:32 /docker/abc /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n";
        let spaced = "40 31 0:28 / /run/my\\040cgroup rw - cgroup2 none rw\n";
        #[rustfmt::skip]
        let cases: &[(&str, &str, &str, Result<Hierarchy, LocateError>)] = &[
            ("hybrid layout: v1 devices wins", HYBRID_CGROUP, HYBRID_MOUNTS, v1("/sys/fs/cgroup/devices/docker/abc")),
            ("pure v2", V2_CGROUP, V2_MOUNTS, v2("/sys/fs/cgroup/system.slice/docker-abc.scope")),
            ("v2 root cgroup", "0::/\n", V2_MOUNTS, v2("/sys/fs/cgroup")),
            ("v1 with a nested mount root, same cgroup", "5:devices:/docker/abc\n", nested_root, v1("/sys/fs/cgroup/devices")),
            ("v1 with a nested mount root, a child", "5:devices:/docker/abc/x\n", nested_root, v1("/sys/fs/cgroup/devices/x")),
            ("v1 outside the nested mount root", "5:devices:/docker/abcd\n", nested_root,
                Err(LocateError::V1NotMounted("/docker/abcd".into()))),
            ("v1 devices controller co-mounted", "4:devices,memory:/k\n", "1 0 0:5 / /cg rw - cgroup cgroup rw,memory,devices\n", v1("/cg/k")),
            ("v1 root devices cgroup, v1 unmounted: v2 decides", "5:devices:/\n0::/t1\n", V2_MOUNTS, v2("/sys/fs/cgroup/t1")),
            ("v1 non-root devices cgroup, v1 unmounted", "5:devices:/docker/abc\n0::/t1\n", V2_MOUNTS,
                Err(LocateError::V1NotMounted("/docker/abc".into()))),
            ("'..' in a v2 path refused", "0::/../../other\n", V2_MOUNTS, Err(LocateError::BadPath("/../../other".into()))),
            ("'..' in a v1 path refused", "5:devices:/docker/../etc\n", HYBRID_MOUNTS, Err(LocateError::BadPath("/docker/../etc".into()))),
            ("'.' refused", "0::/a/./b\n", V2_MOUNTS, Err(LocateError::BadPath("/a/./b".into()))),
            ("relative path refused", "0::a\n", V2_MOUNTS, Err(LocateError::BadPath("a".into()))),
            ("missing controller", "11:memory:/docker/abc\n1:name=systemd:/x\n", HYBRID_MOUNTS, Err(LocateError::NoController)),
            ("empty file", "", V2_MOUNTS, Err(LocateError::NoController)),
            ("v2 line, no cgroup2 mount", V2_CGROUP, "31 25 0:27 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n",
                Err(LocateError::V2NotMounted("/system.slice/docker-abc.scope".into()))),
            ("named hierarchy called devices is not the controller", "1:name=devices:/x\n0::/y\n", V2_MOUNTS, v2("/sys/fs/cgroup/y")),
            ("escaped mount point", "0::/k\n", spaced, v2("/run/my cgroup/k")),
            ("colon in a cgroup path", "0::/a:b\n", V2_MOUNTS, v2("/sys/fs/cgroup/a:b")),
        ];
        for (name, cgroup, mountinfo, want) in cases {
            assert_eq!(&locate(cgroup, mountinfo), want, "{name}");
        }
    }
}
