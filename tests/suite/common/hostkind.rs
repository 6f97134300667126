//! The kind of GPU node the container tests run on, from `NVCT_TEST_HOST` (scripts/test.sh runs
//! every test on `v1`, and the tests whose outcome depends on the kind, each area's
//! `each_host_kind!` list, once more per other kind):
//! - `v1` (the default): this machine as it is, cgroup v1 (hybrid) and Debian's ldconfig;
//! - `v2`: the runtime (runc, or containerd and what it starts) runs in a private mount
//!   namespace with `cgroup2` on `/sys/fs/cgroup`, so runc creates the container's cgroup on
//!   the unified hierarchy and attaches its eBPF device program, as on Ubuntu 22.04+, Debian 12,
//!   RHEL 9 and managed Kubernetes nodes;
//! - `ubuntu`: `v2`, and `/usr/sbin` is a copy in which `ldconfig` is a `#!/bin/sh` wrapper of
//!   `ldconfig.real`, as Ubuntu ships it (the stock `@/sbin/ldconfig` then names the script).
//!
//! [`command`] builds the `Command` that starts a runtime on that kind of host; everything the
//! runtime runs (our hooks, the shim, ldconfig) sees that host.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    V1,
    V2,
    Ubuntu,
}

pub fn kind() -> HostKind {
    match std::env::var("NVCT_TEST_HOST").as_deref() {
        Err(_) | Ok("") | Ok("v1") => HostKind::V1,
        Ok("v2") => HostKind::V2,
        Ok("ubuntu") => HostKind::Ubuntu,
        Ok(other) => panic!("NVCT_TEST_HOST={other:?}: expected v1, v2 or ubuntu"),
    }
}

/// A copy of /usr/sbin with Ubuntu's ldconfig wrapper, made once per test process.
fn ubuntu_sbin() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("nvct-ubuntu-sbin-")
            .tempdir()
            .unwrap()
            .keep();
        let status = Command::new("cp")
            .arg("-a")
            .arg("/usr/sbin/.")
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "copy /usr/sbin");
        std::fs::rename(dir.join("ldconfig"), dir.join("ldconfig.real")).unwrap();
        std::fs::write(
            dir.join("ldconfig"),
            "#!/bin/sh\n# Ubuntu's wrapper\nexec /sbin/ldconfig.real \"$@\"\n",
        )
        .unwrap();
        std::fs::set_permissions(
            dir.join("ldconfig"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        dir
    })
}

/// `program` started on this test run's kind of host.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let setup = match kind() {
        HostKind::V1 => return Command::new(program),
        HostKind::V2 => {
            "umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup".to_string()
        }
        HostKind::Ubuntu => {
            format!(
                "umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup && mount --bind {} /usr/sbin",
                ubuntu_sbin().display()
            )
        }
    };
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "--", "sh", "-c"])
        .arg(format!("{setup} && exec \"$0\" \"$@\""))
        .arg(program);
    cmd
}

/// Shell that prints the container's `/proc/self/cgroup` between markers, for
/// [`assert_device_cgroup`].
pub const SHOW_CGROUP: &str = "echo CGROUP; cat /proc/self/cgroup; echo END-CGROUP";

/// Asserts that the container ran on this kind of host's device cgroup: on cgroup v1 its
/// `devices` line names the container's own cgroup; on v2 the `0::` line does while the v1
/// `devices` line is the (unrestricted) root, so the device filter the test saw at work is
/// the v2 eBPF program.
pub fn assert_device_cgroup(stdout: &str, context: &str) {
    let text = stdout
        .split("CGROUP\n")
        .nth(1)
        .and_then(|t| t.split("END-CGROUP").next())
        .unwrap_or_default();
    let line = |prefix: &str| {
        text.lines().find_map(|l| {
            l.split_once(':')
                .and_then(|(_, rest)| rest.strip_prefix(prefix))
                .map(String::from)
        })
    };
    let unified = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_default();
    let devices = line("devices:").unwrap_or_default();
    match kind() {
        HostKind::V1 => assert!(
            devices.len() > 1,
            "cgroup v1: the container has no devices cgroup of its own: {text}\n{context}"
        ),
        HostKind::V2 | HostKind::Ubuntu => {
            assert!(
                unified.len() > 1,
                "cgroup v2: the container has no unified cgroup of its own: {text}\n{context}"
            );
            assert!(
                devices.is_empty() || devices == "/",
                "cgroup v2 run, but a v1 devices cgroup was used: {text}\n{context}"
            );
        }
    }
}
