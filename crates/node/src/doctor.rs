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

use crate::system;
use nvct_cdi::{self as cdi, list};
use nvct_container::cgroup::{self, Hierarchy};
use nvct_engines::{self as runtime_config, Source};
use nvct_formats::config::{Config, Mode};
use nvct_formats::ldcache;
use nvct_formats::root::DriverRoot;
use nvct_host::{devices, discover, driver, labels, nvml};
use nvct_inject::shim;
use nvct_model::{Capability, FileKind, Inventory};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// NVML initialisation slower than this is worth a warning (no persistence daemon).
const SLOW_NVML_MS: u128 = 1000;

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

/// One engine's effective config as the caller found it.
#[derive(Debug, Clone)]
pub struct EngineInput {
    pub engine: Engine,
    /// The file the config came from (for messages and the fix's `--config`).
    pub path: PathBuf,
    /// How the text was read (`the file`, `containerd config dump`).
    pub via: String,
    /// The text; `None` when there is no config file.
    pub text: Option<String>,
    /// Drop-ins the engine reads over the file, in the order it applies them (CRI-O's
    /// `crio.conf.d`; containerd's `imports` when it was not dumped by containerd itself):
    /// (path, text). What `nvidia-ctk runtime configure` writes by default.
    pub drop_ins: Vec<(PathBuf, String)>,
    /// containerd: the config file and the files it imports, as read from disk, in the order
    /// containerd loads them (even when `text` is containerd's own dump): what a drop-in
    /// shadows is judged from them. Empty for the other engines.
    pub layers: Vec<(PathBuf, String)>,
    /// containerd: its release (`containerd --version`), which decides how imports merge;
    /// `None` when unknown (the rule before 2.0 is taken).
    pub release: Option<runtime_config::containerd::Release>,
}

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

fn config_check(inputs: &Inputs<'_>) -> Check {
    let path = inputs.config_path.display();
    let exists = inputs.config_path.exists();
    let state = if exists { "" } else { " (not there: defaults)" };
    if inputs.config_warnings.is_empty() {
        return ok("config", format!("{path}{state}"));
    }
    check(
        "config",
        Status::Warn,
        format!("{path}: {}", inputs.config_warnings.join("; ")),
        format!("correct or remove those keys in {path} (`nvidia-ctk config` shows the effective config)"),
    )
}

fn driver_check(root: &DriverRoot, config_path: &Path) -> Check {
    let version_file = root.proc_path("driver/nvidia/version");
    let fix = format!(
        "load the driver (`modprobe nvidia`), or set nvidia-container-cli.root in {} to where \
         the driver is (`/run/nvidia/driver` with the GPU Operator's driver container)",
        config_path.display()
    );
    if !root.root.is_dir() {
        return check(
            "driver",
            Status::Fail,
            format!(
                "driver root {} is not a directory: every GPU check needs it",
                root.root.display()
            ),
            format!(
                "set nvidia-container-cli.root to where the driver is: `nvidia-ctk config --set nvidia-container-cli.root=/ --in-place{}` for a driver installed on the host; with the GPU Operator's driver container, /run/nvidia/driver appears once that container runs",
                config_file_flag(config_path)
            ),
        );
    }
    match devices::read_proc_file(&version_file)
        .ok()
        .and_then(|t| devices::parse_driver_version(&t))
    {
        Some(v) => ok(
            "driver",
            format!(
                "driver {v} loaded ({}); driver root {}",
                version_file.display(),
                root.root.display()
            ),
        ),
        None => check(
            "driver",
            Status::Fail,
            format!(
                "{} is missing or unreadable: the kernel module is not loaded",
                version_file.display()
            ),
            fix,
        ),
    }
}

/// Shown only when it fails: `<device root>/dev`, where the node checks look and their fixes
/// would create nodes, is not a directory. When the device root is the driver root and that is
/// missing, the driver check has already said so.
fn device_root_check(root: &DriverRoot, config_path: &Path) -> Option<Check> {
    let dev = root.dev_path("/dev");
    if dev.is_dir() || (root.dev_root == root.root && !root.root.is_dir()) {
        return None;
    }
    Some(check(
        "device root",
        Status::Fail,
        format!(
            "{} is not a directory: the NVIDIA device nodes are looked for there (device root {})",
            dev.display(),
            root.dev_root.display()
        ),
        format!(
            "point nvidia-container-cli.dev-root at the directory whose dev/ has the nodes, e.g. the host's: `nvidia-ctk config --set nvidia-container-cli.dev-root=/ --in-place{}`",
            config_file_flag(config_path)
        ),
    ))
}

/// ` --config-file=PATH` for a fix command, when the config is not the default one.
fn config_file_flag(config_path: &Path) -> String {
    if config_path == Path::new("/etc/nvidia-container-runtime/config.toml") {
        String::new()
    } else {
        format!(" --config-file={}", config_path.display())
    }
}

/// The low-level runtime the shim execs: the first of `nvidia-container-runtime.runtimes` that
/// [`shim::find_runtime`] finds (a name on `PATH`, or an absolute path to a file), which must
/// be executable. Without one every container through the `nvidia` runtime fails to start.
fn runtime_check(
    config: &Config,
    config_path: &Path,
    which: &dyn Fn(&str) -> Option<PathBuf>,
) -> Check {
    let name = "low-level runtime";
    let runtimes = &config.runtime.runtimes;
    let fix = format!(
        "`nvidia-ctk config --set nvidia-container-runtime.runtimes=runc:crun --in-place{}`, or install runc",
        config_file_flag(config_path)
    );
    let found = match shim::find_runtime(runtimes, which) {
        Ok(p) => p,
        Err(_) => {
            // `runtimes = ["runc:crun"]`: a list written as one name (an old `config --set`).
            let joined: Vec<String> = runtimes
                .iter()
                .filter(|r| r.contains([':', ',']))
                .map(|r| format!("{r:?} is one name, not a list"))
                .collect();
            let why = if joined.is_empty() {
                String::new()
            } else {
                format!(" ({})", joined.join("; "))
            };
            return check(
                name,
                Status::Fail,
                format!(
                    "none of nvidia-container-runtime.runtimes = {runtimes:?} in {} is on PATH or an existing absolute path{why}: every container through the nvidia runtime fails to start",
                    config_path.display()
                ),
                fix,
            );
        }
    };
    let executable = std::fs::metadata(&found)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
        .unwrap_or(false);
    if !executable {
        return check(
            name,
            Status::Fail,
            format!(
                "{} (from nvidia-container-runtime.runtimes {runtimes:?}) is not executable",
                found.display()
            ),
            format!("`chmod 755 {}`, or {fix}", found.display()),
        );
    }
    ok(
        name,
        format!(
            "{} (the first of {runtimes:?} found, as the shim looks them up)",
            found.display()
        ),
    )
}

fn nvml_check(root: &DriverRoot, cache: &[ldcache::Entry]) -> Check {
    let Some(lib) = driver::nvml_library(root, cache) else {
        return check(
            "nvml",
            Status::Fail,
            format!(
                "libnvidia-ml.so.1 not found under {} (ld cache and lib dirs)",
                root.root.display()
            ),
            "install the driver's user-space libraries, or point nvidia-container-cli.root at them",
        );
    };
    let start = Instant::now();
    let result = nvml::discover_gpus(&lib);
    let ms = start.elapsed().as_millis();
    match result {
        Ok(host) if ms > SLOW_NVML_MS => check(
            "nvml",
            Status::Warn,
            format!("{}: initialised in {ms} ms, {} GPUs", lib.display(), host.gpus.len()),
            "enable persistence (`nvidia-smi -pm 1`, or `systemctl enable --now nvidia-persistenced`): every container start pays this",
        ),
        Ok(host) => ok(
            "nvml",
            format!(
                "{}: initialised in {ms} ms, driver {}, {} GPUs",
                lib.display(),
                host.driver_version,
                host.gpus.len()
            ),
        ),
        Err(e) => check(
            "nvml",
            Status::Fail,
            e.to_string(),
            format!(
                "check that {} belongs to the loaded driver (same version as /proc/driver/nvidia/version) and that `nvidia-smi` works",
                lib.display()
            ),
        ),
    }
}

fn node_present(inv: &Inventory, path: &str) -> bool {
    inv.nodes.iter().any(|n| n.path == Path::new(path))
}

fn gpu_nodes_check(root: &DriverRoot, inv: &Inventory) -> Check {
    let missing: Vec<&nvct_model::Gpu> = inv
        .gpus
        .iter()
        .filter(|g| !node_present(inv, &format!("/dev/nvidia{}", g.minor)))
        .collect();
    if inv.gpus.is_empty() {
        return check(
            "gpu device nodes",
            Status::Fail,
            "the driver reports no GPUs",
            "check `nvidia-smi`, `dmesg | grep -i nvrm` and that the GPUs are not excluded",
        );
    }
    if missing.is_empty() {
        return ok(
            "gpu device nodes",
            format!(
                "{} GPUs, each with its /dev/nvidiaN under {}",
                inv.gpus.len(),
                root.dev_root.display()
            ),
        );
    }
    let named: Vec<String> = missing
        .iter()
        .map(|g| format!("GPU {} ({}): /dev/nvidia{}", g.index, g.uuid, g.minor))
        .collect();
    let minors: Vec<String> = missing.iter().map(|g| g.minor.to_string()).collect();
    check(
        "gpu device nodes",
        Status::Fail,
        format!("missing under {}: {}", root.dev_root.display(), named.join(", ")),
        format!(
            "create them: `nvidia-modprobe -c {}` (one per minor), or `mknod -m 666 {}/dev/nvidiaN c 195 N`",
            minors.join(" -c "),
            root.dev_root.display()
        ),
    )
}

fn control_nodes_check(root: &DriverRoot, inv: &Inventory) -> Check {
    let missing: Vec<&str> = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
        .into_iter()
        .filter(|p| !node_present(inv, p))
        .collect();
    if missing.is_empty() {
        return ok(
            "control device nodes",
            "nvidiactl, nvidia-uvm and nvidia-uvm-tools present",
        );
    }
    let dev = dev_root_flag(root);
    check(
        "control device nodes",
        Status::Fail,
        format!("missing under {}: {}", root.dev_root.display(), missing.join(", ")),
        format!("`nvidia-ctk system create-device-nodes --control-devices{dev}` (needs the nvidia-uvm module: `modprobe nvidia-uvm`)"),
    )
}

/// ` --dev-root=DIR` for a fix command, when the device root is not `/`.
fn dev_root_flag(root: &DriverRoot) -> String {
    if root.dev_root == Path::new("/") {
        String::new()
    } else {
        format!(" --dev-root={}", root.dev_root.display())
    }
}

fn persistence_check(inv: &Inventory) -> Check {
    let off: Vec<String> = inv
        .gpus
        .iter()
        .filter(|g| g.persistence_mode == Some(false))
        .map(|g| g.index.to_string())
        .collect();
    let unknown = inv.gpus.iter().all(|g| g.persistence_mode.is_none());
    let fix = "`nvidia-smi -pm 1`, or run the persistence daemon: `systemctl enable --now nvidia-persistenced`";
    if !off.is_empty() {
        return check(
            "persistence mode",
            Status::Warn,
            format!(
                "off on GPU {}: every container start re-initialises the GPU (slow starts)",
                off.join(", ")
            ),
            fix,
        );
    }
    if unknown {
        return check(
            "persistence mode",
            Status::Warn,
            "unknown (NVML did not answer)",
            fix,
        );
    }
    ok("persistence mode", "on for every GPU")
}

fn libraries_check(inv: &Inventory, cache_path: &Path, cache: Option<&[ldcache::Entry]>) -> Check {
    let found: BTreeSet<&str> = inv
        .files
        .iter()
        .filter(|f| f.kind == FileKind::Library)
        .map(|f| f.name.as_str())
        .collect();
    let cached: BTreeSet<&str> = cache
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e.soname.split(".so").next())
        .collect();
    let mut detail = Vec::new();
    let mut problems = Vec::new();
    for cap in Capability::ALL {
        let families = nvct_model::tables::libraries_for(cap);
        if families.is_empty() {
            continue;
        }
        let have: Vec<&&str> = families.iter().filter(|f| found.contains(**f)).collect();
        detail.push(format!("{} {}/{}", cap.name(), have.len(), families.len()));
        // What every CUDA container needs: libcuda (compute) and libnvidia-ml (utility).
        let required: &[&str] = match cap {
            Capability::Compute => &["libcuda"],
            Capability::Utility => &["libnvidia-ml"],
            _ => &[],
        };
        for r in required {
            if !found.contains(r) {
                problems.push(format!(
                    "{r} ({}) not found for driver {}",
                    cap.name(),
                    inv.driver_version
                ));
            } else if !cached.contains(r) {
                problems.push(format!(
                    "{r} ({}) is not in {}",
                    cap.name(),
                    cache_path.display()
                ));
            }
        }
    }
    if problems.is_empty() {
        return ok(
            "libraries",
            format!("driver {}: {}", inv.driver_version, detail.join(", ")),
        );
    }
    check(
        "libraries",
        Status::Fail,
        format!("{}; found: {}", problems.join("; "), detail.join(", ")),
        format!(
            "reinstall the driver's user-space libraries for {} and run `ldconfig` in the driver root",
            inv.driver_version
        ),
    )
}

fn ldconfig_check(config: &Config, config_path: &Path) -> Check {
    let path = config.host_ldconfig();
    let fix = format!(
        "set nvidia-container-cli.ldconfig in {} to a static ldconfig binary, e.g. \"@/sbin/ldconfig.real\" on Ubuntu, \"@/sbin/ldconfig\" elsewhere",
        config_path.display()
    );
    match nvct_container::ldconfig::open_host(&path) {
        Ok(_) => ok(
            "ldconfig",
            format!(
                "{} (as configured: {:?}) is a static ELF",
                path.display(),
                config.cli.ldconfig
            ),
        ),
        Err(e) => check("ldconfig", Status::Fail, e.to_string(), fix),
    }
}

/// The check, and whether the host is on cgroup v2.
fn cgroup_check(config: &Config) -> (Check, bool) {
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

/// What an engine's config says beyond its check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct EngineFacts {
    /// It uses the systemd cgroup driver.
    systemd: bool,
    /// `nvidia` is its default runtime (what the device plugin's pod runs with when it sets no
    /// runtimeClassName).
    nvidia_default: bool,
}

/// The check, and what the config says of cgroups and the default runtime.
fn engine_check(e: &EngineInput, v2: bool, kubelet: bool) -> (Check, EngineFacts) {
    let name = e.engine.name();
    let check_name = format!("engine {name}");
    let fix = format!(
        "`nvidia-ctk runtime configure --runtime={name} --config={}`, then restart {name}",
        e.path.display()
    );
    // `docker run --gpus` goes through the prestart hook without any entry; only
    // `--runtime=nvidia` needs one. containerd and CRI-O start GPU pods through the entry.
    // containerd without a kubelet serves docker (or ctr) only: a warning.
    let missing = match e.engine {
        Engine::Docker => Status::Warn,
        Engine::Containerd if !kubelet => Status::Warn,
        _ => Status::Fail,
    };
    // A config that does not parse fails the check (and says nothing of systemd cgroups).
    let unreadable = |err: &dyn std::fmt::Display| {
        let why = format!("{} (read from {}): {err}", e.path.display(), e.via);
        let check = check(
            &check_name,
            Status::Fail,
            why,
            format!("fix the file, then {fix}"),
        );
        (check, EngineFacts::default())
    };
    let merged;
    let text = match (&e.text, e.drop_ins.is_empty()) {
        (Some(t), true) => Some(t),
        (t, false) => {
            let main = Source {
                path: &e.path,
                text: t.as_deref().unwrap_or(""),
            };
            let sources: Vec<Source<'_>> = std::iter::once(main)
                .chain(e.drop_ins.iter().map(|(path, text)| Source { path, text }))
                .collect();
            let result = match e.engine {
                Engine::Containerd => runtime_config::containerd::effective(
                    &sources,
                    runtime_config::containerd::MergeRule::of(e.release),
                ),
                _ => runtime_config::merge_toml(&sources),
            };
            match result {
                Ok(m) => {
                    merged = m;
                    Some(&merged)
                }
                Err(err) => return unreadable(&err),
            }
        }
        (None, true) => None,
    };
    let Some(text) = text else {
        return (
            check(
                &check_name,
                Status::Warn,
                format!(
                    "{name} is installed but {} does not exist",
                    e.path.display()
                ),
                fix,
            ),
            EngineFacts {
                systemd: e.engine.default_systemd(v2),
                nvidia_default: false,
            },
        );
    };
    let src = Source {
        path: &e.path,
        text,
    };
    let reg = match e.engine.status(src, runtime_config::DEFAULT_RUNTIME_NAME) {
        Ok(r) => r,
        Err(err) => return unreadable(&err),
    };
    let systemd = reg.systemd_cgroup.unwrap_or(e.engine.default_systemd(v2));
    // containerd without its default runtime does not load its CRI plugin at all.
    let cri_broken = match e.engine {
        Engine::Containerd => runtime_config::containerd::check_default_runtime_under(
            src,
            runtime_config::containerd::MergeRule::of(e.release),
        )
        .err(),
        _ => None,
    };
    let c = match &reg.runtime_path {
        _ if cri_broken.is_some() => check(
            &check_name,
            Status::Fail,
            format!(
                "read from {}: {}",
                e.via,
                cri_broken.expect("matched Some")
            ),
            format!(
                "put the `runc` runtime back (`nvidia-ctk runtime configure --runtime=containerd --config={}` writes it next to `nvidia`), then restart containerd",
                e.path.display()
            ),
        ),
        None => check(
            &check_name,
            missing,
            format!(
                "{} (read from {}) has no `nvidia` runtime{}",
                e.path.display(),
                e.via,
                match e.engine {
                    Engine::Docker => ": `docker run --gpus` still works through the prestart hook, `--runtime=nvidia` does not",
                    Engine::Containerd if !kubelet => ": no kubelet on this node (no /var/lib/kubelet, no --node-labels), so no pod starts through it; `ctr run --runtime` and nerdctl users need it",
                    _ => ": pods with runtimeClassName nvidia cannot start",
                }
            ),
            fix,
        ),
        Some(p) if p.starts_with('/') && !Path::new(p).exists() => check(
            &check_name,
            Status::Fail,
            format!("the `nvidia` runtime in {} runs {p}, which does not exist", e.path.display()),
            fix,
        ),
        Some(p) => ok(
            &check_name,
            format!(
                "`nvidia` runtime registered in {} (read from {}; runs {p}; default runtime: {}; cgroup driver: {})",
                e.path.display(),
                e.via,
                if reg.is_default { "yes" } else { "no" },
                if systemd { "systemd" } else { "cgroupfs" }
            ),
        ),
    };
    let c = match c.status {
        Status::Ok if e.engine == Engine::Containerd => containerd_shadow_check(e).unwrap_or(c),
        _ => c,
    };
    let facts = EngineFacts {
        systemd,
        nvidia_default: reg.is_default && reg.runtime_path.is_some(),
    };
    (c, facts)
}

/// A failed `engine containerd` check when the drop-in that registers `nvidia` shadows a key
/// another file sets differently (containerd before 2.0 replaces the whole CRI table with the
/// drop-in's copy; a copy also overrides key by key in 2.0 and later): an edit made there after
/// `runtime configure` has no effect. `None` when nothing is shadowed (or the files do not
/// parse: the other checks say so).
fn containerd_shadow_check(e: &EngineInput) -> Option<Check> {
    use runtime_config::containerd::{drop_in_of, shadowed, MergeRule};
    let files: Vec<Source<'_>> = e
        .layers
        .iter()
        .map(|(path, text)| Source { path, text })
        .collect();
    let name = runtime_config::DEFAULT_RUNTIME_NAME;
    let drop_in = drop_in_of(&files, name)?;
    let rule = MergeRule::of(e.release);
    let found = shadowed(&files, drop_in, name, rule).ok()?;
    let first = found.first()?;
    const SHOWN: usize = 3;
    let mut list: Vec<String> = found.iter().take(SHOWN).map(|s| s.to_string()).collect();
    if found.len() > SHOWN {
        list.push(format!("and {} more", found.len() - SHOWN));
    }
    let release = match e.release {
        Some(r) => format!("containerd {r}: {}", rule.describe()),
        None => format!("containerd's version unknown, so {}", rule.describe()),
    };
    let drop_in = files[drop_in].path;
    Some(check(
        &format!("engine {}", e.engine.name()),
        Status::Fail,
        format!(
            "the drop-in {} shadows {} set in {}, so that edit has no effect ({release}): {}",
            drop_in.display(),
            first.key,
            first.file.display(),
            list.join("; ")
        ),
        format!(
            "`nvidia-ctk runtime configure --runtime=containerd --refresh-drop-in --config={} --drop-in-config={}`, then `systemctl restart containerd` (`systemctl enable --now nvidia-containerd-dropin.path nvidia-containerd-dropin.service` does this at each change and before each start)",
            e.path.display(),
            drop_in.display()
        ),
    ))
}

/// The check, and the device nodes without a `/dev/char` link. The DRM nodes (`/dev/dri`) are
/// udev's to link, not `create-dev-char-symlinks`' (as upstream's): not checked.
fn char_links_check(root: &DriverRoot, inv: &Inventory) -> (Check, Vec<String>) {
    let nvidia: Vec<nvct_model::DeviceNode> = inv
        .nodes
        .iter()
        .filter(|n| !n.path.starts_with("/dev/dri"))
        .cloned()
        .collect();
    let links = system::char_links(&system::node_numbers(&nvidia));
    let missing: Vec<String> = links
        .iter()
        .filter(|(link, target)| !system::link_is(&root.dev_path(link), target))
        .map(|(link, _)| link.display().to_string())
        .collect();
    let dev = dev_root_flag(root);
    let c = if missing.is_empty() {
        ok(
            "/dev/char links",
            format!("{} links, one per NVIDIA device node", links.len()),
        )
    } else {
        check(
            "/dev/char links",
            Status::Warn,
            format!("missing: {}", missing.join(", ")),
            format!("`nvidia-ctk system create-dev-char-symlinks --create-all{dev}`"),
        )
    };
    (c, missing)
}

/// Whether a spec's containers keep their device rules across a daemon-reload without the
/// `/dev/char` links: it carries the `createRuntime` hook `keep-device-rules`.
fn keeps_device_rules(spec: &cdi::Spec) -> bool {
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
fn systemd_trap_check(
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

/// The CDI spec directories as the CDI library reads them: the file-level checks (a file that
/// does not parse, two files of one directory defining the same devices, a spec shadowed by a
/// later directory's, no nvidia.com spec when mode is "cdi"), which need no driver, and the
/// nvidia.com specs, each of which [`stale_check`] compares with this host.
struct CdiFound {
    files: Vec<Check>,
    nvidia: Vec<(PathBuf, cdi::Spec)>,
}

fn cdi_checks(dirs: &[PathBuf], config: &Config) -> CdiFound {
    let name = "cdi specs";
    let dirs_text = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let (specs, warnings) = list::load(dirs);
    let mut out: Vec<Check> = warnings
        .iter()
        .map(|w| {
            check(
                name,
                Status::Fail,
                w.clone(),
                "regenerate it: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml` (and remove the broken file)",
            )
        })
        .collect();
    // As the CDI library resolves them: a later directory wins, two files of one directory
    // defining a device conflict.
    let resolution = cdi::resolve::resolve(&specs);
    out.extend(list::conflict_texts(&resolution.conflicts).into_iter().map(|text| {
        check(
            name,
            Status::Fail,
            text,
            "remove one of the two files (keep the one `nvidia-ctk cdi generate` or the nvidia-cdi-refresh unit writes)",
        )
    }));
    out.extend(list::shadow_texts(&resolution.shadowed).into_iter().map(|text| {
        check(
            name,
            Status::Warn,
            format!("{text}; containers get the later file's devices"),
            "remove the shadowed file so that only one spec describes the devices (NVIDIA's install guide writes /etc/cdi/nvidia.yaml, the nvidia-cdi-refresh unit /var/run/cdi/nvidia.yaml)",
        )
    }));
    let nvidia: Vec<(PathBuf, cdi::Spec)> = specs
        .into_iter()
        .filter(|f| f.spec.kind.starts_with("nvidia.com/"))
        .map(|f| (f.path, f.spec))
        .collect();
    if nvidia.is_empty() {
        let needed = matches!(config.runtime.mode, Mode::Cdi);
        out.push(check(
            name,
            if needed { Status::Fail } else { Status::Ok },
            format!(
                "no nvidia.com spec in {dirs_text}{}",
                if needed {
                    " and mode is \"cdi\""
                } else {
                    " (only CDI requests need one)"
                }
            ),
            if needed {
                "`nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`"
            } else {
                ""
            },
        ));
    }
    CdiFound { files: out, nvidia }
}

/// One nvidia.com spec against this host: every GPU/MIG UUID, device node and file it names
/// exists.
fn stale_check(path: &Path, spec: &cdi::Spec, inv: &Inventory) -> Check {
    let name = "cdi specs";
    let uuids: BTreeSet<&str> = inv
        .gpus
        .iter()
        .flat_map(|g| {
            std::iter::once(g.uuid.as_str()).chain(g.migs.iter().map(|m| m.uuid.as_str()))
        })
        .collect();
    let stale = stale_parts(spec, &uuids);
    if stale.is_empty() {
        return ok(
            name,
            format!(
                "{}: {} devices of {}, valid, every UUID, node and file exists on this host",
                path.display(),
                spec.devices.len(),
                spec.kind
            ),
        );
    }
    check(
        name,
        Status::Fail,
        format!(
            "{} is stale (written for another driver or other GPUs): {}",
            path.display(),
            stale.join(", ")
        ),
        format!(
            "regenerate it: `nvidia-ctk cdi generate --output={}`",
            path.display()
        ),
    )
}

/// What a spec names that this host does not have: GPU/MIG UUIDs, device nodes, mounted files.
fn stale_parts(spec: &cdi::Spec, uuids: &BTreeSet<&str>) -> Vec<String> {
    let mut out = BTreeSet::new();
    let edits = std::iter::once(&spec.container_edits)
        .chain(spec.devices.iter().map(|d| &d.container_edits));
    for d in &spec.devices {
        if (d.name.starts_with("GPU-") || d.name.starts_with("MIG-"))
            && !uuids.contains(d.name.as_str())
        {
            out.insert(format!("device {}", d.name));
        }
    }
    for e in edits {
        for n in &e.device_nodes {
            let host = n.host_path.as_deref().unwrap_or(&n.path);
            if !Path::new(host).exists() {
                out.insert(format!("node {host}"));
            }
        }
        for m in &e.mounts {
            if !Path::new(&m.host_path).exists() {
                out.insert(format!("file {}", m.host_path));
            }
        }
    }
    let mut v: Vec<String> = out.into_iter().collect();
    if v.len() > 8 {
        let more = v.len() - 8;
        v.truncate(8);
        v.push(format!("and {more} more"));
    }
    v
}

fn labels_check(inv: &Inventory, node: Option<&(PathBuf, Node)>) -> Check {
    let name = "node labels";
    let want = labels::labels(inv);
    let shown = [
        "nvidia.com/gpu.product",
        "nvidia.com/gpu.memory",
        "nvidia.com/gpu.count",
    ];
    let summary: Vec<String> = shown
        .iter()
        .filter_map(|k| want.get(*k).map(|v| format!("{k}={v}")))
        .collect();
    let Some((file, node)) = node else {
        return ok(
            name,
            format!(
                "from the hardware: {} (give --node-labels to compare with the node's)",
                summary.join(" ")
            ),
        );
    };
    let mut wrong = Vec::new();
    let mut fixes = Vec::new();
    for k in shown {
        let Some(w) = want.get(k) else { continue };
        match node.labels.get(k) {
            Some(h) if h == w => {}
            Some(h) => {
                wrong.push(format!("{k}: the node says {h}, the hardware {w}"));
                fixes.push(format!("{k}={w}"));
            }
            None => {
                wrong.push(format!("{k}: missing, the hardware says {w}"));
                fixes.push(format!("{k}={w}"));
            }
        }
    }
    if wrong.is_empty() {
        return ok(
            name,
            format!(
                "{} ({}) match the hardware: {}",
                node.name,
                file.display(),
                summary.join(" ")
            ),
        );
    }
    check(
        name,
        Status::Fail,
        format!("{} ({}): {}", node.name, file.display(), wrong.join("; ")),
        format!(
            "relabel from the hardware: `kubectl label node {} --overwrite {}` (or restart GPU feature discovery); pods selecting the old values stay Pending",
            node.name,
            fixes.join(" ")
        ),
    )
}

/// What the device plugin advertises for the node (`status.allocatable`): no `nvidia.com/gpu`
/// (missing or 0) is the first thing an operator sees of a GPU node that does not work (pods
/// requesting a GPU stay Pending). Run only when this node's driver, NVML, low-level runtime and
/// engines pass, so the causes left are the plugin's.
fn allocatable_check(file: &Path, node: &Node, nvidia_default: bool) -> Check {
    let name = "node allocatable";
    let n = &node.name;
    let count = |m: &BTreeMap<String, String>| {
        m.get(GPU_RESOURCE)
            .map(|v| v.trim().parse::<u64>().unwrap_or(0))
    };
    let Some(all) = &node.allocatable else {
        return ok(
            name,
            format!(
                "{n} ({}): no status.allocatable, not checked (give `kubectl get node {n} -o json` output)",
                file.display()
            ),
        );
    };
    let (allocatable, capacity) = (count(all), count(&node.capacity));
    if let Some(a) = allocatable.filter(|a| *a > 0) {
        return ok(
            name,
            format!("{n} ({}): allocatable {GPU_RESOURCE}={a}", file.display()),
        );
    }
    let said = match allocatable {
        Some(_) => format!("allocatable {GPU_RESOURCE}: 0"),
        None => format!("no {GPU_RESOURCE} in allocatable"),
    };
    // The mixed MIG strategy advertises each MIG profile instead of whole GPUs.
    let migs: Vec<String> = all
        .iter()
        .filter(|(k, v)| k.starts_with("nvidia.com/mig-") && v.trim() != "0")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !migs.is_empty() {
        return check(
            name,
            Status::Warn,
            format!(
                "{n} ({}): {said}, but {} (the device plugin's MIG strategy \"mixed\"): pods requesting {GPU_RESOURCE} stay Pending",
                file.display(),
                migs.join(" ")
            ),
            "request the MIG resources in the pods, or set the device plugin's MIG strategy to \"single\"",
        );
    }
    let mut causes = Vec::new();
    if capacity.is_some_and(|c| c > 0) {
        causes.push(format!(
            "capacity has {} GPUs: the device plugin marked them unhealthy (XID errors: `dmesg | grep -i xid`, `kubectl describe node {n}`)",
            capacity.unwrap_or(0)
        ));
    }
    causes.push(format!(
        "the device plugin is not running on {n}: its DaemonSet does not select the node (the GPU Operator's needs nvidia.com/gpu.deploy.device-plugin=true), or its pod fails (`kubectl get pods -A -o wide --field-selector spec.nodeName={n}`, then `kubectl logs` of the nvidia-device-plugin pod)"
    ));
    causes.push(if nvidia_default {
        "its pod runs without the GPUs: check its logs for \"No devices found\" or NVML errors".to_string()
    } else {
        format!(
            "its pod does not run with the nvidia runtime (no engine here has it as the default): give the pod runtimeClassName: nvidia, or `nvidia-ctk runtime configure --runtime=containerd --set-as-default` on {n}"
        )
    });
    check(
        name,
        Status::Fail,
        format!(
            "{n} ({}): {said}: the device plugin advertises no GPU, so GPU pods stay Pending; this node's driver, NVML, runtime and engine checks pass",
            file.display()
        ),
        format!("likely causes: {}", causes.join("; ")),
    )
}

/// The resource the device plugin advertises for whole GPUs.
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// What doctor reads of a Kubernetes node (`kubectl get node NAME -o json`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// `metadata.name` (`NODE` when the JSON has none), named in the fixes.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `status.allocatable` (`None` without one: not a node's whole JSON) and `status.capacity`
    /// (resource quantities as text).
    pub allocatable: Option<BTreeMap<String, String>>,
    pub capacity: BTreeMap<String, String>,
}

/// A node from `kubectl get node NAME -o json` output.
pub fn parse_node(text: &str) -> Result<Node, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if let Some(items) = v.get("items").and_then(|i| i.as_array()) {
        return Err(format!(
            "a list of {} nodes: give one node's JSON (`kubectl get node NAME -o json`)",
            items.len()
        ));
    }
    let strings = |ptr: &str| -> Option<BTreeMap<String, String>> {
        Some(
            v.pointer(ptr)?
                .as_object()?
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect(),
        )
    };
    let labels = strings("/metadata/labels")
        .ok_or("no metadata.labels object (expected `kubectl get node NAME -o json` output)")?;
    Ok(Node {
        name: v
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("NODE")
            .to_string(),
        labels,
        allocatable: strings("/status/allocatable"),
        capacity: strings("/status/capacity").unwrap_or_default(),
    })
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
    fn engine_check_reads_drop_ins() {
        let entry = "[crio.runtime.runtimes.nvidia]\nruntime_path = \"nvidia-container-runtime\"\n";
        let input = |text: Option<&str>, drop_ins: &[(&str, &str)]| EngineInput {
            engine: Engine::Crio,
            path: PathBuf::from("/etc/crio/crio.conf"),
            via: "the file".into(),
            text: text.map(str::to_string),
            drop_ins: drop_ins
                .iter()
                .map(|(p, t)| (PathBuf::from(p), t.to_string()))
                .collect(),
            layers: vec![],
            release: None,
        };
        let d = "/etc/crio/crio.conf.d/99-nvidia.toml";
        // (case, input, status, words in the detail)
        let cases = [
            (
                "entry in the file",
                input(Some(entry), &[]),
                Status::Ok,
                "registered",
            ),
            (
                "entry in a drop-in",
                input(Some(""), &[(d, entry)]),
                Status::Ok,
                "registered",
            ),
            (
                "drop-in without a main file",
                input(None, &[(d, entry)]),
                Status::Ok,
                "registered",
            ),
            (
                "neither",
                input(Some("[crio]\n"), &[]),
                Status::Fail,
                "has no `nvidia` runtime",
            ),
            (
                "bad drop-in named",
                input(Some(""), &[(d, "[crio\n")]),
                Status::Fail,
                "99-nvidia.toml:1: invalid TOML",
            ),
        ];
        for (name, e, status, words) in cases {
            let (c, _) = engine_check(&e, false, true);
            assert_eq!(c.status, status, "case {name}: {}", c.detail);
            assert!(c.detail.contains(words), "case {name}: {}", c.detail);
        }
    }

    #[test]
    fn containerd_drop_in_that_shadows_an_edit_fails() {
        use runtime_config::containerd::Release;
        let cri = "[plugins.\"io.containerd.grpc.v1.cri\"]";
        let main = |pause: &str| {
            format!(
                "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n{cri}\nsandbox_image = \"{pause}\"\n"
            )
        };
        let nvidia = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\nBinaryName = \"/bin/sh\"\n";
        let runc = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n";
        let copy = format!("version = 2\n{cri}\nsandbox_image = \"pause:1\"\n{runc}{nvidia}");
        let own = format!("version = 2\n{nvidia}");
        let d = "/etc/containerd/conf.d/99-nvidia.toml";
        // (case, main file, drop-in, containerd's release, status, words in the detail)
        let cases: Vec<(&str, String, String, Option<(u64, u64)>, Status, &str)> = vec![
            ("the copy as configure made it", main("pause:1"), copy.clone(), Some((1, 6)), Status::Ok, "registered"),
            (
                "config.toml edited after configure",
                main("pause:2"),
                copy.clone(),
                Some((1, 6)),
                Status::Fail,
                "shadows plugins.\"io.containerd.grpc.v1.cri\".sandbox_image set in /etc/containerd/config.toml",
            ),
            ("unknown release: the rule before 2.0", main("pause:2"), copy.clone(), None, Status::Fail, "version unknown"),
            ("an old copy under 2.x shadows too", main("pause:2"), copy, Some((2, 1)), Status::Fail, "key by key"),
            ("our keys only under 2.x", main("pause:2"), own, Some((2, 0)), Status::Ok, "registered"),
        ];
        for (name, main_text, drop_in, release, status, words) in cases {
            let e = EngineInput {
                engine: Engine::Containerd,
                path: PathBuf::from("/etc/containerd/config.toml"),
                via: "the file".into(),
                text: Some(main_text.clone()),
                drop_ins: vec![(PathBuf::from(d), drop_in.clone())],
                layers: vec![
                    (PathBuf::from("/etc/containerd/config.toml"), main_text),
                    (PathBuf::from(d), drop_in),
                ],
                release: release.map(|(major, minor)| Release { major, minor }),
            };
            let (c, _) = engine_check(&e, false, true);
            assert_eq!(c.status, status, "case {name}: {}", c.detail);
            assert!(c.detail.contains(words), "case {name}: {}", c.detail);
            if status == Status::Fail {
                assert!(
                    c.fix.contains("--refresh-drop-in") && c.fix.contains(d),
                    "case {name}: {}",
                    c.fix
                );
            }
        }
    }

    #[test]
    fn containerd_without_nvidia_fails_only_where_a_kubelet_runs() {
        let e = EngineInput {
            engine: Engine::Containerd,
            path: PathBuf::from("/etc/containerd/config.toml"),
            via: "the file".into(),
            text: Some("version = 2\n".into()),
            drop_ins: vec![],
            layers: vec![],
            release: None,
        };
        // (case, kubelet, status, words in the detail)
        let cases = [
            (
                "a Kubernetes node",
                true,
                Status::Fail,
                "pods with runtimeClassName nvidia",
            ),
            (
                "a docker-only node",
                false,
                Status::Warn,
                "no kubelet on this node",
            ),
        ];
        for (name, kubelet, status, words) in cases {
            let (c, _) = engine_check(&e, false, kubelet);
            assert_eq!(c.status, status, "case {name}: {}", c.detail);
            assert!(c.detail.contains(words), "case {name}: {}", c.detail);
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
    fn node_cases() {
        let good = r#"{"kind":"Node","metadata":{"name":"gpu-7","labels":{"nvidia.com/gpu.memory":"40960"}},
            "status":{"allocatable":{"nvidia.com/gpu":"0","cpu":"8"},"capacity":{"nvidia.com/gpu":"2"}}}"#;
        let n = parse_node(good).unwrap();
        assert_eq!(n.name, "gpu-7");
        assert_eq!(
            n.labels.get("nvidia.com/gpu.memory").map(String::as_str),
            Some("40960")
        );
        let all = n.allocatable.unwrap();
        assert_eq!(all.get("nvidia.com/gpu").map(String::as_str), Some("0"));
        assert_eq!(
            n.capacity.get("nvidia.com/gpu").map(String::as_str),
            Some("2")
        );
        let bare = parse_node(r#"{"metadata":{"labels":{}}}"#).unwrap();
        assert_eq!((bare.name.as_str(), bare.allocatable), ("NODE", None));
        // (case, text, words in the error)
        let cases = [
            ("not json", "{", "not JSON"),
            ("no labels", r#"{"metadata":{}}"#, "no metadata.labels"),
            (
                "a node list",
                r#"{"kind":"List","items":[{},{}]}"#,
                "a list of 2 nodes",
            ),
        ];
        for (name, text, words) in cases {
            let e = parse_node(text).unwrap_err();
            assert!(e.contains(words), "{name}: {e}");
        }
    }

    #[test]
    fn allocatable_cases() {
        let node = |allocatable: Option<&[(&str, &str)]>, capacity: &[(&str, &str)]| Node {
            name: "gpu-7".into(),
            labels: BTreeMap::new(),
            allocatable: allocatable.map(|a| {
                a.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            capacity: capacity
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let gpu = "nvidia.com/gpu";
        // (case, node, nvidia is a default runtime, status, words in the detail, in the fix)
        let cases = [
            (
                "two GPUs",
                node(Some(&[(gpu, "2")]), &[]),
                false,
                Status::Ok,
                "allocatable nvidia.com/gpu=2",
                "",
            ),
            (
                "zero",
                node(Some(&[(gpu, "0")]), &[]),
                true,
                Status::Fail,
                "allocatable nvidia.com/gpu: 0",
                "the device plugin is not running on gpu-7",
            ),
            (
                "missing",
                node(Some(&[("cpu", "8")]), &[]),
                true,
                Status::Fail,
                "no nvidia.com/gpu in allocatable",
                "spec.nodeName=gpu-7",
            ),
            (
                "not the default runtime",
                node(Some(&[(gpu, "0")]), &[]),
                false,
                Status::Fail,
                "advertises no GPU",
                "runtimeClassName: nvidia",
            ),
            (
                "unhealthy",
                node(Some(&[(gpu, "0")]), &[(gpu, "2")]),
                true,
                Status::Fail,
                "advertises no GPU",
                "capacity has 2 GPUs: the device plugin marked them unhealthy",
            ),
            (
                "mixed MIG",
                node(Some(&[(gpu, "0"), ("nvidia.com/mig-1g.10gb", "7")]), &[]),
                true,
                Status::Warn,
                "nvidia.com/mig-1g.10gb=7",
                "MIG strategy",
            ),
            (
                "no status",
                node(None, &[]),
                false,
                Status::Ok,
                "no status.allocatable, not checked",
                "",
            ),
        ];
        for (name, n, default, status, detail, fix) in cases {
            let c = allocatable_check(Path::new("node.json"), &n, default);
            assert_eq!(c.status, status, "{name}: {c:?}");
            assert!(
                c.detail.contains(detail) && c.detail.contains("gpu-7"),
                "{name}: {c:?}"
            );
            assert!(c.fix.contains(fix), "{name}: {c:?}");
            assert_eq!(c.fix.is_empty(), status == Status::Ok, "{name}: {c:?}");
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

    #[test]
    fn runtime_cases() {
        let dir = tempfile::Builder::new()
            .prefix("nvct-doctor-runtime-")
            .tempdir()
            .unwrap();
        let exe = dir.path().join("runc");
        let plain = dir.path().join("not-executable");
        for (p, mode) in [(&exe, 0o755), (&plain, 0o644)] {
            std::fs::write(p, "").unwrap();
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .unwrap();
        }
        let on_path = exe.clone();
        let which = move |n: &str| (n == "runc").then(|| on_path.clone());
        let (exe_s, plain_s) = (exe.display().to_string(), plain.display().to_string());
        // (case, runtimes, status, words in the detail)
        let cases: &[(&str, &[&str], Status, &str)] = &[
            ("the default", &["runc", "crun"], Status::Ok, &exe_s),
            ("the second found", &["crun", "runc"], Status::Ok, &exe_s),
            ("an absolute path", &[&exe_s], Status::Ok, &exe_s),
            (
                "a list as one name",
                &["runc:crun"],
                Status::Fail,
                "\"runc:crun\" is one name, not a list",
            ),
            (
                "none on PATH",
                &["crun", "youki"],
                Status::Fail,
                "is on PATH or an existing absolute path",
            ),
            ("empty", &[], Status::Fail, "runtimes = []"),
            (
                "not executable",
                &[&plain_s],
                Status::Fail,
                "is not executable",
            ),
        ];
        for (name, runtimes, status, words) in cases {
            let mut config = Config::default();
            config.runtime.runtimes = runtimes.iter().map(|r| r.to_string()).collect();
            let c = runtime_check(
                &config,
                Path::new("/etc/nvidia-container-runtime/config.toml"),
                &which,
            );
            assert_eq!(c.status, *status, "{name}: {c:?}");
            assert!(c.detail.contains(words), "{name}: {c:?}");
            if *status == Status::Fail {
                assert!(
                    c.fix.contains("`nvidia-ctk config --set nvidia-container-runtime.runtimes=runc:crun --in-place`"),
                    "{name}: {c:?}"
                );
            }
        }
    }

    #[test]
    fn labels_mismatch_is_a_failure_with_the_relabel_command() {
        let inv = nvct_plan::fixtures::inventory_in("/usr/lib/x86_64-linux-gnu");
        let mut labels = labels::labels(&inv);
        labels.insert("nvidia.com/gpu.memory".into(), "40960".into());
        let node = Node {
            name: "gpu-7".into(),
            labels,
            ..Node::default()
        };
        let c = labels_check(&inv, Some(&(PathBuf::from("node.json"), node)));
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.detail.contains("the node says 40960, the hardware 81559"),
            "{c:?}"
        );
        assert!(
            c.fix
                .contains("kubectl label node gpu-7 --overwrite nvidia.com/gpu.memory=81559"),
            "{c:?}"
        );
    }
}
