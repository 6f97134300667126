//! Device access through cgroups: the checks `cgroup` (v1's devices.allow or v2's eBPF device
//! programs are reachable) and `systemd cgroups` (containers keep their GPUs across
//! `systemctl daemon-reload` under the systemd cgroup driver).

use super::{check, ok, Check, Status};
use nvct_cdi as cdi;
use nvct_container::cgroup::{self, Hierarchy};
use nvct_formats::config::{Config, Mode};
use std::path::PathBuf;

/// The check, and whether the host is on cgroup v2.
pub(super) fn cgroup_check(config: &Config) -> (Check, bool) {
    let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let located = read("/proc/self/cgroup").and_then(|c| {
        let m = read("/proc/self/mountinfo")?;
        cgroup::locate(&c, &m).map_err(|e| e.to_string())
    });
    let hierarchy = match located {
        Ok(h) => h,
        Err(e) if config.cli.no_cgroups => {
            return (ok("cgroup", format!("no-cgroups is set; {e}")), false);
        }
        Err(e) => {
            return (
                check("cgroup", Status::Fail, e, cgroup::WAYS_OUT.to_string()),
                false,
            )
        }
    };
    let v2 = matches!(hierarchy, Hierarchy::V2(_));
    if config.cli.no_cgroups {
        return (
            ok(
                "cgroup",
                format!(
                    "{}; no-cgroups is set: the engine must allow the devices itself",
                    version_of(&hierarchy)
                ),
            ),
            v2,
        );
    }
    let c = match &hierarchy {
        Hierarchy::V1(dir) => {
            let allow = dir.join("devices.allow");
            if allow.exists() {
                ok("cgroup", format!("cgroup v1: the hook writes device rules to devices.allow (devices hierarchy at {})", dir.display()))
            } else {
                check(
                    "cgroup",
                    Status::Fail,
                    format!("cgroup v1, but {} is missing", allow.display()),
                    cgroup::WAYS_OUT,
                )
            }
        }
        Hierarchy::V2(dir) => match cgroup::v2::can_query(dir) {
            Ok(()) => ok(
                "cgroup",
                format!("cgroup v2: the hook extends the container's eBPF device program ({} answers BPF_PROG_QUERY)", dir.display()),
            ),
            Err(e) => check(
                "cgroup",
                Status::Fail,
                format!("cgroup v2, but the device programs of {} cannot be read: {e}", dir.display()),
                "run as root with CAP_SYS_ADMIN and CAP_BPF (the hook needs them on this host)",
            ),
        },
    };
    (c, v2)
}

fn version_of(h: &Hierarchy) -> &'static str {
    match h {
        Hierarchy::V1(_) => "cgroup v1",
        Hierarchy::V2(_) => "cgroup v2",
    }
}

/// Whether a spec's containers keep their device rules across a daemon-reload without the
/// `/dev/char` links: it carries the `createRuntime` hook `keep-device-rules`.
pub(super) fn keeps_device_rules(spec: &cdi::Spec) -> bool {
    let name = nvct_container::edits::HookKind::KeepDeviceRules.name();
    spec.container_edits
        .hooks
        .iter()
        .any(|h| h.hook_name == "createRuntime" && h.args.iter().any(|a| a == name))
}

/// Whether the containers keep their GPUs across `systemctl daemon-reload` under the systemd
/// cgroup driver. runc hands systemd a rule only as a `/dev/char/MAJ:MIN` link that exists,
/// so with links missing it is our hooks that keep the rules: the prestart hook asks systemd
/// for whatever is in place (docker --gpus, hooks.d, the shim's legacy mode), jit-cdi's edits
/// carry `keep-device-rules` on a systemd node, and so do the specs `cdi generate` writes
/// there. Only `unkept_specs` (nvidia.com specs without that hook: written elsewhere, by an
/// older toolkit or by upstream's) still lose their GPUs.
pub(super) fn systemd_trap_check(
    systemd_engines: &[&str],
    missing_links: &[String],
    config: &Config,
    unkept_specs: &[PathBuf],
) -> Check {
    let name = "systemd cgroups";
    if systemd_engines.is_empty() {
        return ok(name, "no engine here uses the systemd cgroup driver");
    }
    let engines = systemd_engines.join(", ");
    let hook = "the prestart hook asks systemd to keep the device rules of a container's own scope (DeviceAllow= at runtime, as `systemctl set-property --runtime` sets it), whatever put them in place (docker --gpus, the OCI hook, the nvidia runtime's legacy mode); its debug log says so, or why it could not";
    if !missing_links.is_empty() && !unkept_specs.is_empty() {
        let specs = unkept_specs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>();
        return check(
            name,
            Status::Fail,
            format!(
                "{engines} use the systemd cgroup driver, {} /dev/char links are missing, and the CDI spec(s) {} have no keep-device-rules hook: at the next `systemctl daemon-reload` systemd rewrites those containers' device rules without the GPUs (\"Failed to initialize NVML: Unknown Error\")",
                missing_links.len(),
                specs.join(", ")
            ),
            format!(
                "regenerate each on this node (`nvidia-ctk cdi generate --output={}` adds the hook where systemd is the init), or `nvidia-ctk system create-dev-char-symlinks --create-all`",
                specs[0]
            ),
        );
    }
    let links = if missing_links.is_empty() {
        "/dev/char links present".to_string()
    } else {
        format!(
            "{} /dev/char links missing, which our hooks make up for: the CDI specs carry keep-device-rules",
            missing_links.len()
        )
    };
    let shim = match config.runtime.mode {
        Mode::Legacy | Mode::Auto => {
            "the nvidia runtime puts the device rules in each container's spec"
        }
        _ => "the nvidia runtime puts the devices in each container's spec",
    };
    ok(
        name,
        format!(
            "{engines} use the systemd cgroup driver; {links}; {shim} (mode {:?}); {hook}",
            config.runtime.mode
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_trap_cases() {
        let mode = |m: Mode| {
            let mut c = Config::default();
            c.runtime.mode = m;
            c
        };
        let links = vec!["/dev/char/195:0".to_string()];
        let old_spec = vec![PathBuf::from("/etc/cdi/old.yaml")];
        // (case, engines, missing links, mode, specs without keep-device-rules, status, what the
        // detail must say)
        type Case<'a> = (
            &'a str,
            &'a [&'a str],
            &'a [String],
            Mode,
            &'a [PathBuf],
            Status,
            &'a [&'a str],
        );
        let cases: &[Case] = &[
            (
                "no engine on systemd",
                &[],
                &[],
                Mode::Legacy,
                &[],
                Status::Ok,
                &["no engine"],
            ),
            (
                "links missing, every spec keeps its rules: our hooks make up for them",
                &["docker"],
                &links,
                Mode::Legacy,
                &[],
                Status::Ok,
                &[
                    "docker",
                    "1 /dev/char links missing",
                    "keep-device-rules",
                    "whatever put them in place",
                ],
            ),
            (
                "links missing and a spec without keep-device-rules: the trap, naming the spec",
                &["containerd"],
                &links,
                Mode::Cdi,
                &old_spec,
                Status::Fail,
                &[
                    "1 /dev/char links are missing",
                    "/etc/cdi/old.yaml",
                    "daemon-reload",
                ],
            ),
            (
                "links present: a spec without the hook is kept by runc's own rules",
                &["docker", "containerd"],
                &[],
                Mode::Legacy,
                &old_spec,
                Status::Ok,
                &[
                    "docker, containerd",
                    "/dev/char links present",
                    "device rules in each container's spec",
                    "DeviceAllow= at runtime",
                ],
            ),
            (
                "cdi, links present",
                &["crio"],
                &[],
                Mode::Cdi,
                &[],
                Status::Ok,
                &["devices in each container's spec (mode Cdi)"],
            ),
        ];
        for (name, engines, missing, m, unkept, status, says) in cases {
            let c = systemd_trap_check(engines, missing, &mode(*m), unkept);
            assert_eq!(c.status, *status, "case {name}: {c:?}");
            for want in *says {
                assert!(
                    c.detail.contains(want),
                    "case {name}: {want:?} in {:?}",
                    c.detail
                );
            }
            if c.status == Status::Fail {
                assert!(
                    c.fix.contains("cdi generate --output=/etc/cdi/old.yaml"),
                    "case {name}: {c:?}"
                );
            }
        }
    }
}
