//! `nvidia-ctk doctor`: the GPU node checklist, one [`Check`] per item (`ok` / `warn` / `fail`,
//! the evidence, the exact fix). Reads the same config (driver root, device root, proc root,
//! ldconfig, low-level runtimes) and goes through the same discovery, parsers and device rules as
//! the hook and the shim, so what it says is what a container start will meet. Reads only; the
//! engines' config texts and the Kubernetes node are gathered by the caller (a file, or
//! `containerd config dump`).
//!
//! One cause gives one failure: a check names the checks it needs, and when one of them failed
//! (or was itself skipped) it is not run but reported as `skip` ("skipped: needs driver"), so a
//! missing driver root is one `fail` line, not a fail per GPU check with fixes that write into
//! directories that do not exist.
//!
//! This module holds the entry points ([`run`], [`summary`], [`exit_code`]), the report types
//! and the gating between checks, and lists the checks in order in [`run`]; each group of checks
//! lives in its own file: `config` (the toolkit's config, ldconfig, the low-level runtime),
//! `driver` (driver, NVML, persistence, libraries), `devices` (device root, device nodes,
//! `/dev/char` links), `cgroup` (cgroup, systemd cgroups), `engines` (one check per engine),
//! `cdi` (the CDI spec files) and `kubernetes` (the node's labels and allocatable GPUs).

mod cdi;
mod cgroup;
mod config;
mod devices;
mod driver;
mod engines;
mod kubernetes;

use cdi::{cdi_checks, stale_check};
use cgroup::{cgroup_check, keeps_device_rules, systemd_trap_check};
use config::{config_check, ldconfig_check, runtime_check};
use devices::{char_links_check, control_nodes_check, device_root_check, gpu_nodes_check};
use driver::{driver_check, libraries_check, nvml_check, persistence_check};
use engines::engine_check;
pub use engines::EngineInput;
use kubernetes::{allocatable_check, labels_check};
pub use kubernetes::{parse_node, Node};
use nvct_formats::config::Config;
use nvct_formats::ldcache;
use nvct_host::discover;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Not run: a check it needs failed (see [`Check::needs`]).
    Skip,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Skip => "skip",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    /// What was seen.
    pub detail: String,
    /// The exact fix ("" when ok).
    pub fix: String,
    /// For a skipped check: the failed checks it needs (empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
}

fn check(name: &str, status: Status, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        status,
        detail: detail.into(),
        fix: fix.into(),
        needs: Vec::new(),
    }
}

fn ok(name: &str, detail: impl Into<String>) -> Check {
    check(name, Status::Ok, detail, "")
}

/// The checks run so far, which gate the ones that need them.
#[derive(Default)]
struct Report(Vec<Check>);

impl Report {
    fn push(&mut self, c: Check) {
        self.0.push(c);
    }

    /// The failed checks among `needs`, by name; a skipped one stands for the failures it
    /// waited on. Empty when `needs` all passed (or were not run at all: a check shown only
    /// when it fails, such as `inventory`).
    fn blocked(&self, needs: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in self.0.iter().filter(|c| needs.contains(&c.name.as_str())) {
            let causes = match c.status {
                Status::Fail => vec![c.name.clone()],
                Status::Skip => c.needs.clone(),
                _ => Vec::new(),
            };
            for n in causes {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// `check()` unless a check in `needs` failed; then `name`, skipped.
    fn gated(&mut self, name: &str, needs: &[&str], check: impl FnOnce() -> Check) {
        let c = self.skip_or(name, needs).unwrap_or_else(check);
        self.push(c);
    }

    /// `Some(skipped)` when a check in `needs` failed.
    fn skip_or(&self, name: &str, needs: &[&str]) -> Option<Check> {
        let blocked = self.blocked(needs);
        (!blocked.is_empty()).then(|| skipped(name, blocked))
    }
}

/// A check that was not run because the checks `needs` failed.
fn skipped(name: &str, needs: Vec<String>) -> Check {
    Check {
        name: name.into(),
        status: Status::Skip,
        detail: format!("skipped: needs {}", needs.join(", ")),
        fix: String::new(),
        needs,
    }
}

/// What GPU checks need: a driver, and the inventory read from it.
const NEEDS_DRIVER: &[&str] = &["driver", "inventory"];
/// What device node checks need: the driver, and a device root with a `dev/`.
const NEEDS_NODES: &[&str] = &["driver", "inventory", "device root"];

/// The closing line: how many checks failed and warned, and the check to fix first (the first
/// failure, else the first warning): a failure blocks the checks after it, so its fix may
/// clear them too.
pub fn summary(checks: &[Check]) -> String {
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let (fails, warns) = (count(Status::Fail), count(Status::Warn));
    let first = checks
        .iter()
        .find(|c| c.status == Status::Fail)
        .or_else(|| checks.iter().find(|c| c.status == Status::Warn));
    match first {
        None => format!("all {} checks ok", checks.len()),
        Some(c) => format!(
            "{}, {}: fix \"{}\" first",
            plural(fails, "failure", "failures"),
            plural(warns, "warning", "warnings"),
            c.name
        ),
    }
}

/// 0 when every check is ok, 1 with warnings, 2 with a failure (a skipped check adds nothing:
/// the failure it needs is counted).
pub fn exit_code(checks: &[Check]) -> u8 {
    match checks.iter().map(|c| c.status).max() {
        Some(Status::Fail) => 2,
        Some(Status::Warn) => 1,
        _ => 0,
    }
}

pub use nvct_engines::Engine;

/// Everything the checks need beyond what they read through the config's roots.
pub struct Inputs<'a> {
    pub config: &'a Config,
    pub config_path: &'a Path,
    /// Warnings from loading the config (unknown keys).
    pub config_warnings: &'a [String],
    /// The engines found installed or configured on this node.
    pub engines: Vec<EngineInput>,
    /// Where CDI specs are looked for.
    pub cdi_dirs: Vec<PathBuf>,
    /// The Kubernetes node (`kubectl get node NAME -o json`), with the file it came from.
    pub node: Option<(PathBuf, Node)>,
    /// A program name looked up as the shim does (`PATH`): the low-level runtime check.
    pub which: &'a dyn Fn(&str) -> Option<PathBuf>,
    /// Whether a kubelet runs here (`/var/lib/kubelet`, or `--node-labels` given): only then do
    /// pods reach containerd, so only then is its missing `nvidia` runtime a failure (docker's
    /// package pulls containerd in on a docker-only node).
    pub kubelet: bool,
}

/// Runs every check, in checklist order; a check whose prerequisites failed is skipped.
pub fn run(inputs: &Inputs<'_>) -> Vec<Check> {
    let config = inputs.config;
    let root = config.driver();
    let mut r = Report::default();
    r.push(config_check(inputs));
    r.push(driver_check(&root, inputs.config_path));
    if let Some(c) = device_root_check(&root, inputs.config_path) {
        r.push(c);
    }
    let cache_path = root.host_path("/etc/ld.so.cache");
    let cache = ldcache::read(&cache_path);
    r.gated("nvml", &["driver"], || {
        nvml_check(&root, cache.as_deref().unwrap_or_default())
    });
    // Without a driver the GPU checks have nothing to look at (they are skipped); the node's
    // own set-up (ldconfig, cgroup, runtimes, engines, CDI files) is still checked.
    let inv = if r.blocked(&["driver"]).is_empty() {
        match discover::discover(&root) {
            Ok(inv) => Some(inv),
            Err(e) => {
                r.push(check(
                    "inventory",
                    Status::Fail,
                    e.to_string(),
                    "the GPU checks need the driver's GPUs: check `nvidia-smi` and `dmesg | grep -i nvrm`",
                ));
                None
            }
        }
    } else {
        None
    };
    // The GPU checks run only with an inventory, which exists exactly when their gates pass.
    let inv_ref = || {
        inv.as_ref()
            .expect("gated: the inventory exists when its checks pass")
    };
    r.gated("gpu device nodes", NEEDS_NODES, || {
        gpu_nodes_check(&root, inv_ref())
    });
    r.gated("control device nodes", NEEDS_NODES, || {
        control_nodes_check(&root, inv_ref())
    });
    r.gated("persistence mode", &["driver", "inventory", "nvml"], || {
        persistence_check(inv_ref())
    });
    r.gated("libraries", NEEDS_DRIVER, || {
        libraries_check(inv_ref(), &cache_path, cache.as_deref().ok())
    });
    // An ldconfig of the driver root's own (the GPU Operator's driver container) is there only
    // when the driver root is: one cause, one failure.
    let driver_root = Path::new(&config.cli.root);
    let in_driver_root = !config.cli.root.is_empty()
        && driver_root != Path::new("/")
        && config.host_ldconfig().starts_with(driver_root);
    let ldconfig_needs: &[&str] = if in_driver_root { &["driver"] } else { &[] };
    r.gated("ldconfig", ldconfig_needs, || {
        ldconfig_check(config, inputs.config_path)
    });
    let cgroup = cgroup_check(config);
    let v2 = cgroup.1;
    r.push(cgroup.0);
    r.push(runtime_check(config, inputs.config_path, inputs.which));
    let mut systemd_engines = Vec::new();
    let mut nvidia_default = false;
    let mut engine_names = Vec::new();
    for e in &inputs.engines {
        let (c, facts) = engine_check(e, v2, inputs.kubelet);
        if facts.systemd {
            systemd_engines.push(e.engine.name());
        }
        nvidia_default |= facts.nvidia_default;
        engine_names.push(c.name.clone());
        r.push(c);
    }
    let nodes_blocked = r.blocked(NEEDS_NODES);
    let links = nodes_blocked
        .is_empty()
        .then(|| char_links_check(&root, inv_ref()));
    let cdi = cdi_checks(&inputs.cdi_dirs, config);
    // The nvidia.com specs whose containers nothing keeps across a daemon-reload without the
    // links: those without our createRuntime hook `keep-device-rules`.
    let unkept: Vec<PathBuf> = cdi
        .nvidia
        .iter()
        .filter(|(_, spec)| !keeps_device_rules(spec))
        .map(|(path, _)| path.clone())
        .collect();
    // Without the links' answer the systemd trap is still ruled out when no engine uses systemd.
    let (trap, links) = match links {
        Some((links, missing)) => (
            systemd_trap_check(&systemd_engines, &missing, config, &unkept),
            links,
        ),
        None if systemd_engines.is_empty() => (
            systemd_trap_check(&[], &[], config, &[]),
            skipped("/dev/char links", nodes_blocked),
        ),
        None => (
            skipped("systemd cgroups", nodes_blocked.clone()),
            skipped("/dev/char links", nodes_blocked),
        ),
    };
    r.push(trap);
    r.push(links);
    for c in cdi.files {
        r.push(c);
    }
    // Whether a spec is stale is a question about this host's GPUs, nodes and files.
    for (path, spec) in &cdi.nvidia {
        r.gated("cdi specs", NEEDS_NODES, || {
            stale_check(path, spec, inv_ref())
        });
    }
    let node = inputs.node.as_ref();
    r.gated("node labels", NEEDS_DRIVER, || {
        labels_check(inv_ref(), node)
    });
    if let Some((file, node)) = node {
        // The device plugin needs what a GPU container needs: a driver, NVML, a runtime.
        let mut needs = vec!["driver", "nvml", "low-level runtime"];
        needs.extend(engine_names.iter().map(String::as_str));
        r.gated("node allocatable", &needs, || {
            allocatable_check(file, node, nvidia_default)
        });
    }
    r.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_cases() {
        let c = |s| check("x", s, "", "");
        let cases = [
            ("none", vec![], 0),
            ("all ok", vec![c(Status::Ok), c(Status::Ok)], 0),
            ("a warning", vec![c(Status::Ok), c(Status::Warn)], 1),
            (
                "a failure",
                vec![c(Status::Warn), c(Status::Fail), c(Status::Ok)],
                2,
            ),
        ];
        for (name, checks, want) in cases {
            assert_eq!(exit_code(&checks), want, "{name}");
        }
    }

    #[test]
    fn summary_cases() {
        let c = |name: &str, s| check(name, s, "d", "f");
        let cases: &[(&str, Vec<Check>, &str)] = &[
            (
                "all ok",
                vec![c("a", Status::Ok), c("b", Status::Ok)],
                "all 2 checks ok",
            ),
            (
                "a failure after a warning: the failure first",
                vec![
                    c("a", Status::Warn),
                    c("b", Status::Fail),
                    c("c", Status::Ok),
                ],
                "1 failure, 1 warning: fix \"b\" first",
            ),
            (
                "warnings only",
                vec![c("a", Status::Warn), c("b", Status::Warn)],
                "0 failures, 2 warnings: fix \"a\" first",
            ),
        ];
        for (name, checks, want) in cases {
            assert_eq!(summary(checks), *want, "case {name}");
        }
    }

    #[test]
    fn a_failed_check_skips_its_dependants_transitively() {
        let mut r = Report::default();
        r.push(check("driver", Status::Fail, "gone", "fix"));
        r.push(check("cgroup", Status::Warn, "", "fix"));
        r.gated("nvml", &["driver"], || panic!("nvml ran without a driver"));
        r.gated("persistence mode", &["nvml", "cgroup"], || {
            panic!("ran after a skipped check")
        });
        r.gated("ldconfig", &["cgroup", "inventory"], || {
            ok("ldconfig", "fine")
        });
        let got: Vec<(&str, Status, &str, Vec<String>)> =
            r.0.iter()
                .map(|c| {
                    (
                        c.name.as_str(),
                        c.status,
                        c.detail.as_str(),
                        c.needs.clone(),
                    )
                })
                .collect();
        let driver = vec!["driver".to_string()];
        assert_eq!(
            got[2..],
            [
                (
                    "nvml",
                    Status::Skip,
                    "skipped: needs driver",
                    driver.clone()
                ),
                (
                    "persistence mode",
                    Status::Skip,
                    "skipped: needs driver",
                    driver
                ),
                ("ldconfig", Status::Ok, "fine", vec![]),
            ]
        );
        // A skip adds nothing to the exit code: the failure it waited on is counted.
        assert_eq!(exit_code(&r.0[2..]), 0);
        assert_eq!(exit_code(&r.0), 2);
    }
}
