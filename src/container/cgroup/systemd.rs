//! systemd keeps the GPU device rules of a container it manages across `systemctl
//! daemon-reload`. Under the systemd cgroup driver (docker, containerd and podman on systemd
//! nodes) the container's cgroup is a systemd scope (`docker-<id>.scope`,
//! `cri-containerd-<id>.scope`, `libpod-<id>.scope`) whose device policy systemd owns: on every
//! `daemon-reload` it writes the scope's `DeviceAllow=` list back into the device cgroup (v1
//! `devices.allow`/`deny`, v2 its own BPF program), and the rules the prestart hook added are
//! gone, so the container loses its GPUs. Upstream has the same trap. Here the hook also asks
//! systemd to keep them: what `systemctl set-property --runtime <scope> DeviceAllow=/dev/char/M:m
//! rw` does for each rule (systemd parses `/dev/char/MAJ:MIN` itself, no link needed), as one
//! D-Bus call on systemd's private socket (`dbus.rs`: no process on the container's start
//! path), and through `systemctl` itself when that call fails.
//!
//! Owns: which unit a container is ([`unit_of`], PURE), the `systemctl` arguments
//! ([`set_property_args`], PURE), and asking systemd ([`keep_rules`]). Runs only where systemd is
//! the init (`/run/systemd/system` exists, as `sd_booted()` checks) and the container's cgroup
//! is a scope; anything else (cgroupfs driver, no systemd, a failed call) leaves the rules as
//! the hook wrote them and says why in the log line: never a refused start.

use super::dbus;
use crate::model::CgroupRule;
use std::path::Path;
use std::process::{Command, Stdio};

/// The systemd unit whose cgroup `/proc/<pid>/cgroup` (its text) names, if it is a scope: the
/// last component of the v2 path (`0::/...`), else of the v1 `devices` or `name=systemd` path.
pub fn unit_of(proc_cgroup: &str) -> Option<String> {
    let mut paths = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let v2 = id == "0" && controllers.is_empty();
        let v1 = controllers
            .split(',')
            .any(|c| c == "devices" || c == "name=systemd");
        if v2 || v1 {
            paths.push(path);
        }
    }
    paths.into_iter().find_map(|p| {
        let name = p.rsplit('/').next()?;
        let stem = name.strip_suffix(".scope")?;
        let valid = !stem.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:@\\".contains(&b));
        valid.then(|| name.to_string())
    })
}

/// `systemctl set-property --runtime -- UNIT DeviceAllow=/dev/char/M:m rw ...`, one property
/// per rule (DeviceAllow= appends), in the rules' order.
pub fn set_property_args(unit: &str, rules: &[CgroupRule]) -> Vec<String> {
    let mut args = vec![
        "set-property".to_string(),
        "--runtime".to_string(),
        "--".to_string(),
        unit.to_string(),
    ];
    args.extend(
        rules
            .iter()
            .map(|r| format!("DeviceAllow=/dev/char/{}:{} rw", r.major, r.minor)),
    );
    args
}

/// Whether systemd is the init (`sd_booted()`'s test).
pub fn booted() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// Where systemd's `systemctl` is on a host.
const SYSTEMCTL: [&str; 2] = ["/usr/bin/systemctl", "/bin/systemctl"];

/// Asks systemd to keep `rules` in the container's scope (see the module doc). `proc_cgroup` is
/// the text of `/proc/<pid>/cgroup`. Returns a line for the log: `Ok` what was done (debug),
/// `Err` why it was not (a warning: a daemon-reload would take the GPUs away); `None` when
/// there is nothing to keep (no rules, systemd not the init, not a scope).
pub fn keep_rules(proc_cgroup: &str, rules: &[CgroupRule]) -> Option<Result<String, String>> {
    if rules.is_empty() || !booted() {
        return None;
    }
    let unit = unit_of(proc_cgroup)?;
    let started = std::time::Instant::now();
    let ms = |t: std::time::Instant| format!("{:.1} ms", t.elapsed().as_secs_f64() * 1000.0);
    let socket = Path::new(dbus::PRIVATE_SOCKET);
    let via_dbus = dbus::set_device_allow(socket, crate::sys::euid(), &unit, rules);
    let dbus_error = match via_dbus {
        Ok(()) => {
            return Some(Ok(format!(
                "systemd: {unit} keeps the {} GPU device rule(s) across a daemon-reload (DeviceAllow=, runtime; over D-Bus in {})",
                rules.len(),
                ms(started)
            )))
        }
        Err(e) => e,
    };
    let Some(systemctl) = SYSTEMCTL.iter().map(Path::new).find(|p| p.is_file()) else {
        return Some(Err(format!(
            "systemd: no systemctl to keep the device rules of {unit} across a daemon-reload (D-Bus: {dbus_error})"
        )));
    };
    let started = std::time::Instant::now();
    let out = Command::new(systemctl)
        .args(set_property_args(&unit, rules))
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .output();
    // The call is on the container's start path: its time goes in the log line.
    let took = ms(started);
    Some(match out {
        Ok(o) if o.status.success() => Ok(format!(
            "systemd: {unit} keeps the {} GPU device rule(s) across a daemon-reload (DeviceAllow=, runtime; systemctl took {took} after D-Bus: {dbus_error})",
            rules.len()
        )),
        Ok(o) => Err(format!(
            "systemd: could not keep the device rules of {unit} (D-Bus: {dbus_error}; systemctl: {}: {}, after {took}); a `systemctl daemon-reload` takes the GPUs away from this container",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "systemd: could not keep the device rules of {unit} (D-Bus: {dbus_error}; cannot run {}: {e}); a `systemctl daemon-reload` takes the GPUs away from this container",
            systemctl.display()
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_cases() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            (
                "docker, systemd driver, v2",
                "0::/system.slice/docker-4f1c.scope\n",
                Some("docker-4f1c.scope"),
            ),
            (
                "kubelet pod under containerd, v2",
                "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice/cri-containerd-ab12.scope\n",
                Some("cri-containerd-ab12.scope"),
            ),
            (
                "podman, hybrid v1 with name=systemd",
                "12:devices:/machine.slice/libpod-99.scope\n1:name=systemd:/machine.slice/libpod-99.scope\n0::/\n",
                Some("libpod-99.scope"),
            ),
            ("cgroupfs driver, v1", "12:devices:/docker/4f1c\n0::/\n", None),
            ("cgroupfs driver, v2", "0::/nvct-test-1\n", None),
            ("a service, not a scope", "0::/system.slice/containerd.service\n", None),
            ("an empty scope name", "0::/system.slice/.scope\n", None),
            ("odd bytes", "0::/system.slice/a b.scope\n", None),
            ("garbage", "not a cgroup file", None),
        ];
        for (name, text, want) in cases {
            assert_eq!(unit_of(text).as_deref(), *want, "case {name}");
        }
    }

    #[test]
    fn args_name_each_rule_by_its_dev_char_path() {
        let rules = [
            CgroupRule {
                major: 195,
                minor: 0,
            },
            CgroupRule {
                major: 508,
                minor: 1,
            },
        ];
        assert_eq!(
            set_property_args("docker-1.scope", &rules),
            [
                "set-property",
                "--runtime",
                "--",
                "docker-1.scope",
                "DeviceAllow=/dev/char/195:0 rw",
                "DeviceAllow=/dev/char/508:1 rw"
            ]
        );
    }
}
