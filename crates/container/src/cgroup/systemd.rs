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
//! Only the container's own unit is asked: a scope whose name carries the container's id
//! ([`own_unit`]), as every engine's systemd driver names it (`docker-<id>.scope`,
//! `cri-containerd-<id>.scope`, `crio-<id>.scope`, `libpod-<id>.scope`). A container can sit in
//! a scope that is not its own (podman `--cgroups=disabled` run from a login shell stays in the
//! caller's `session-N.scope`; a cgroupfs `cgroupsPath` may end in any `….scope`, even
//! `init.scope`), and `DeviceAllow=` added to a unit with `DevicePolicy=auto` and no rules
//! closes it to systemd's static list plus the GPU: every process of that session would lose
//! its disks, fuse, kvm, tun. Such a scope is skipped, and the log says so.
//!
//! The whole request is bounded ([`dbus::TIMEOUT`], one deadline): the D-Bus exchange, then
//! `systemctl` only when D-Bus failed otherwise than by that deadline, killed when it runs
//! past it. A container's start never waits longer on systemd.
//!
//! Owns: which unit a container is ([`unit_of`], [`own_unit`], PURE), the `systemctl` arguments
//! ([`set_property_args`], PURE), and asking systemd ([`keep_rules`]). Runs only where systemd is
//! the init (`/run/systemd/system` exists, as `sd_booted()` checks) and the container's cgroup
//! is its own scope; anything else (cgroupfs driver, no systemd, another unit's scope, a failed
//! call) leaves the rules as the hook wrote them and says why in the log line: never a refused
//! start.

use super::dbus;
use nvct_model::CgroupRule;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The systemd unit whose cgroup `/proc/<pid>/cgroup` (its text) names, if it is a scope: the
/// last component of the v2 path (`0::/...`), else of the v1 `devices` or `name=systemd` path.
pub fn unit_of(proc_cgroup: &str) -> Option<String> {
    // The v2 path first, wherever its line is; then the v1 ones, in order.
    let (mut v2_paths, mut v1_paths) = (Vec::new(), Vec::new());
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2_paths.push(path);
        } else if controllers
            .split(',')
            .any(|c| c == "devices" || c == "name=systemd")
        {
            v1_paths.push(path);
        }
    }
    v2_paths.into_iter().chain(v1_paths).find_map(|p| {
        let name = p.rsplit('/').next()?;
        let stem = name.strip_suffix(".scope")?;
        let valid = !stem.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:@\\".contains(&b));
        valid.then(|| name.to_string())
    })
}

/// The container's own unit: the scope [`unit_of`] names, when its name (without `.scope`)
/// ends with `-<id>`, the container's id from the hook state. `Ok(None)`: not a scope (nothing
/// to ask); `Err`: a scope that is not the container's (the log line says which, and why it is
/// left alone).
pub fn own_unit(proc_cgroup: &str, id: &str) -> Result<Option<String>, String> {
    let Some(unit) = unit_of(proc_cgroup) else {
        return Ok(None);
    };
    let stem = unit.strip_suffix(".scope").unwrap_or(&unit);
    let ours = !id.is_empty()
        && stem
            .strip_suffix(id)
            .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('-'));
    if ours {
        Ok(Some(unit))
    } else {
        Err(format!(
            "systemd: the container's cgroup is in {unit}, which is not the container's own \
             scope (its name does not end with \"-{id}.scope\"): its device rules are left to \
             the unit's owner (adding DeviceAllow= there would close that unit to the GPU); a \
             `systemctl daemon-reload` may take this container's GPUs away"
        ))
    }
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

/// Asks systemd to keep `rules` in the container's own scope (see the module doc).
/// `proc_cgroup` is the text of `/proc/<pid>/cgroup`, `id` the container's id (the hook
/// state's). Returns a line for the log: `Ok` what was done (debug), `Err` why it was not (a
/// warning: a daemon-reload would take the GPUs away); `None` when there is nothing to keep (no
/// rules, systemd not the init, not a scope).
pub fn keep_rules(
    proc_cgroup: &str,
    id: &str,
    rules: &[CgroupRule],
) -> Option<Result<String, String>> {
    if rules.is_empty() || !booted() {
        return None;
    }
    let unit = match own_unit(proc_cgroup, id) {
        Ok(unit) => unit?,
        Err(why) => return Some(Err(why)),
    };
    let started = Instant::now();
    let deadline = started + dbus::TIMEOUT;
    let ms = |t: Instant| format!("{:.1} ms", t.elapsed().as_secs_f64() * 1000.0);
    let socket = Path::new(dbus::PRIVATE_SOCKET);
    let via_dbus = dbus::set_device_allow(socket, nvct_sys::euid(), &unit, rules, deadline);
    let dbus_error = match via_dbus {
        Ok(()) => {
            return Some(Ok(format!(
                "systemd: {unit} keeps the {} GPU device rule(s) across a daemon-reload (DeviceAllow=, runtime; over D-Bus in {})",
                rules.len(),
                ms(started)
            )))
        }
        // A systemd that did not answer in time would not answer systemctl either.
        Err(e @ dbus::DbusError::TimedOut(_)) => {
            return Some(Err(format!(
                "systemd: could not keep the device rules of {unit}: {e} after {}; systemctl \
                 is not tried (the start waits at most {} s on systemd); a `systemctl \
                 daemon-reload` takes the GPUs away from this container",
                ms(started),
                dbus::TIMEOUT.as_secs()
            )))
        }
        Err(e) => e,
    };
    let Some(systemctl) = SYSTEMCTL.iter().map(Path::new).find(|p| p.is_file()) else {
        return Some(Err(format!(
            "systemd: no systemctl to keep the device rules of {unit} across a daemon-reload (D-Bus: {dbus_error})"
        )));
    };
    let mut cmd = Command::new(systemctl);
    cmd.args(set_property_args(&unit, rules))
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null());
    let out = run_until(cmd, deadline);
    // The call is on the container's start path: its time goes in the log line.
    let took = ms(started);
    Some(match out {
        Ok(o) if o.status.success() => Ok(format!(
            "systemd: {unit} keeps the {} GPU device rule(s) across a daemon-reload (DeviceAllow=, runtime; systemctl, {took} in all, after D-Bus: {dbus_error})",
            rules.len()
        )),
        Ok(o) => Err(format!(
            "systemd: could not keep the device rules of {unit} (D-Bus: {dbus_error}; systemctl: {}: {}, {took} in all); a `systemctl daemon-reload` takes the GPUs away from this container",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "systemd: could not keep the device rules of {unit} (D-Bus: {dbus_error}; {}: {e}, {took} in all); a `systemctl daemon-reload` takes the GPUs away from this container",
            systemctl.display()
        )),
    })
}

/// Runs `cmd` to its end, or kills it at `deadline` (an error saying so). Its output is read
/// after it exits: `systemctl set-property` writes a line or two, well within a pipe.
fn run_until(mut cmd: Command, deadline: Instant) -> std::io::Result<std::process::Output> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    loop {
        if child.try_wait()?.is_some() {
            return child.wait_with_output();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "killed at the deadline of the request to systemd",
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
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
            (
                "hybrid: the v2 path wins over an earlier v1 line",
                "12:devices:/a-1.scope\n0::/b-2.scope\n",
                Some("b-2.scope"),
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
    fn own_unit_cases() {
        let id = "4f1c9e";
        let cases: &[(&str, &str, Result<Option<&str>, ()>)] = &[
            (
                "docker",
                "0::/system.slice/docker-4f1c9e.scope\n",
                Ok(Some("docker-4f1c9e.scope")),
            ),
            (
                "containerd's CRI",
                "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-4f1c9e.scope\n",
                Ok(Some("cri-containerd-4f1c9e.scope")),
            ),
            (
                "CRI-O",
                "0::/kubepods.slice/crio-4f1c9e.scope\n",
                Ok(Some("crio-4f1c9e.scope")),
            ),
            (
                "podman",
                "0::/machine.slice/libpod-4f1c9e.scope\n",
                Ok(Some("libpod-4f1c9e.scope")),
            ),
            ("not a scope: cgroupfs", "0::/nvct/4f1c9e\n", Ok(None)),
            (
                "a login session's scope",
                "0::/user.slice/user-0.slice/session-3.scope\n",
                Err(()),
            ),
            ("init.scope", "0::/init.scope\n", Err(())),
            (
                "another container's scope",
                "0::/system.slice/docker-77aa.scope\n",
                Err(()),
            ),
            (
                "the id only as a prefix",
                "0::/system.slice/docker-4f1c9e0.scope\n",
                Err(()),
            ),
            (
                "the id with no prefix",
                "0::/system.slice/4f1c9e.scope\n",
                Err(()),
            ),
            (
                "the id after no dash",
                "0::/system.slice/x4f1c9e.scope\n",
                Err(()),
            ),
            (
                "a dash and the id only",
                "0::/system.slice/-4f1c9e.scope\n",
                Err(()),
            ),
        ];
        for (name, text, want) in cases {
            let got = own_unit(text, id);
            match (want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(g.as_deref(), *w, "case {name}"),
                (Err(()), Err(why)) => assert!(
                    why.contains("not the container's own"),
                    "case {name}: {why}"
                ),
                _ => panic!("case {name}: {got:?}"),
            }
        }
        assert!(
            own_unit("0::/system.slice/docker-.scope\n", "").is_err(),
            "an empty id"
        );
    }

    #[test]
    fn a_command_past_the_deadline_is_killed() {
        let mut cmd = Command::new("sleep");
        cmd.arg("5");
        let started = Instant::now();
        let got = run_until(cmd, started + Duration::from_millis(100));
        assert!(
            matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::TimedOut),
            "{got:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let out = run_until(cmd, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
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
