//! `nvidia-ctk doctor`: the GPU node checklist, one [`Check`] per item (`ok` / `warn` / `fail`,
//! the evidence, the exact fix). Reads the same config (driver root, device root, proc root,
//! ldconfig) and goes through the same discovery, parsers and device rules as the hook, so what
//! it says is what a container start will meet. Reads only; the engines' config texts are
//! gathered by the caller (a file, or `containerd config dump`).

use crate::cdi::{self, list};
use crate::config::{Config, Mode};
use crate::container::cgroup::{self, Hierarchy};
use crate::model::{Capability, FileKind, Inventory};
use crate::root::DriverRoot;
use crate::runtime_config::{self, Registration, Source};
use crate::{devices, discover, driver, labels, ldcache, nvml, system};
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
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
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
}

fn check(name: &str, status: Status, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        status,
        detail: detail.into(),
        fix: fix.into(),
    }
}

fn ok(name: &str, detail: impl Into<String>) -> Check {
    check(name, Status::Ok, detail, "")
}

/// 0 when every check is ok, 1 with warnings, 2 with a failure.
pub fn exit_code(checks: &[Check]) -> u8 {
    match checks.iter().map(|c| c.status).max() {
        Some(Status::Fail) => 2,
        Some(Status::Warn) => 1,
        _ => 0,
    }
}

pub use crate::runtime_config::Engine;

impl Engine {
    fn status(self, src: Source<'_>, runtime: &str) -> Result<Registration, String> {
        let r = match self {
            Engine::Containerd => runtime_config::containerd::status(src, runtime),
            Engine::Docker => runtime_config::docker::status(src, runtime),
            Engine::Crio => runtime_config::crio::status(src, runtime),
        };
        r.map_err(|e| e.to_string())
    }

    /// The engine's own cgroup driver when its config does not say: CRI-O defaults to
    /// systemd; containerd's runc to cgroupfs; docker to systemd on cgroup v2 only.
    fn default_systemd(self, v2: bool) -> bool {
        match self {
            Engine::Crio => true,
            Engine::Containerd => false,
            Engine::Docker => v2,
        }
    }
}

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
    /// The node's labels (`kubectl get node NAME -o json`), with the file they came from.
    pub node_labels: Option<(PathBuf, BTreeMap<String, String>)>,
}

/// Runs every check, in checklist order.
pub fn run(inputs: &Inputs<'_>) -> Vec<Check> {
    let config = inputs.config;
    let root = config.driver();
    let mut out = vec![config_check(inputs)];
    out.push(driver_check(&root, inputs.config_path));
    let cache_path = root.host_path("/etc/ld.so.cache");
    let cache = ldcache::read(&cache_path);
    out.push(nvml_check(&root, cache.as_deref().unwrap_or_default()));
    // Without a driver the GPU checks have nothing to look at; the node's own set-up (ldconfig,
    // cgroup, engines) is still checked.
    let inv = match discover::discover(&root) {
        Ok(inv) => Some(inv),
        Err(e) => {
            out.push(check(
                "inventory",
                Status::Fail,
                e.to_string(),
                "fix the driver checks above; the GPU checks need a driver",
            ));
            None
        }
    };
    if let Some(inv) = &inv {
        out.push(gpu_nodes_check(&root, inv));
        out.push(control_nodes_check(&root, inv));
        out.push(persistence_check(inv));
        out.push(libraries_check(inv, &cache_path, cache.as_deref().ok()));
    }
    out.push(ldconfig_check(config, inputs.config_path));
    let cgroup = cgroup_check(config);
    let v2 = cgroup.1;
    out.push(cgroup.0);
    let mut systemd_engines = Vec::new();
    for e in &inputs.engines {
        let (c, systemd) = engine_check(e, v2);
        if systemd {
            systemd_engines.push(e.engine.name());
        }
        out.push(c);
    }
    if let Some(inv) = &inv {
        let links = char_links_check(&root, inv);
        out.push(systemd_trap_check(&systemd_engines, &links.1, config));
        out.push(links.0);
        out.extend(cdi_checks(&inputs.cdi_dirs, inv, config));
        out.push(labels_check(inv, inputs.node_labels.as_ref()));
    }
    out
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
            format!("driver root {} is not a directory", root.root.display()),
            fix,
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
    let missing: Vec<&crate::model::Gpu> = inv
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
        let families = driver::libraries_for(cap);
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
    match crate::container::ldconfig::open_host(&path) {
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

/// The check, and whether the engine uses systemd cgroups.
fn engine_check(e: &EngineInput, v2: bool) -> (Check, bool) {
    let name = e.engine.name();
    let check_name = format!("engine {name}");
    let fix = format!(
        "`nvidia-ctk runtime configure --runtime={name} --config={}`, then restart {name}",
        e.path.display()
    );
    // `docker run --gpus` goes through the prestart hook without any entry; only
    // `--runtime=nvidia` needs one. containerd and CRI-O start GPU pods through the entry.
    let missing = if e.engine == Engine::Docker {
        Status::Warn
    } else {
        Status::Fail
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
        (check, false)
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
                Engine::Containerd => runtime_config::containerd::effective(&sources),
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
            e.engine.default_systemd(v2),
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
        Engine::Containerd => runtime_config::containerd::check_default_runtime(src).err(),
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
                if e.engine == Engine::Docker {
                    ": `docker run --gpus` still works through the prestart hook, `--runtime=nvidia` does not"
                } else {
                    ": pods with runtimeClassName nvidia cannot start"
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
    (c, systemd)
}

/// The check, and the device nodes without a `/dev/char` link. The DRM nodes (`/dev/dri`) are
/// udev's to link, not `create-dev-char-symlinks`' (as upstream's): not checked.
fn char_links_check(root: &DriverRoot, inv: &Inventory) -> (Check, Vec<String>) {
    let nvidia: Vec<crate::model::DeviceNode> = inv
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

fn systemd_trap_check(
    systemd_engines: &[&str],
    missing_links: &[String],
    config: &Config,
) -> Check {
    let name = "systemd cgroups";
    if systemd_engines.is_empty() {
        return ok(name, "no engine here uses the systemd cgroup driver");
    }
    let engines = systemd_engines.join(", ");
    let hook_only = matches!(config.runtime.mode, Mode::Legacy | Mode::Auto);
    if !missing_links.is_empty() {
        return check(
            name,
            Status::Fail,
            format!(
                "{engines} use the systemd cgroup driver and {} /dev/char links are missing: at the next `systemctl daemon-reload` systemd rewrites each container's device rules from /dev/char/MAJ:MIN and the containers lose their GPUs (\"Failed to initialize NVML: Unknown Error\")",
                missing_links.len()
            ),
            "`nvidia-ctk system create-dev-char-symlinks --create-all`, and prefer mode \"cdi\" or \"jit-cdi\" so the devices are in each container's spec",
        );
    }
    if hook_only {
        return ok(
            name,
            format!("{engines} use the systemd cgroup driver; /dev/char links present. Devices added only by the prestart hook (docker --gpus, the OCI hook) are not in a container's spec and are still lost at a daemon-reload; the nvidia runtime and CDI put them in the spec"),
        );
    }
    ok(name, format!("{engines} use the systemd cgroup driver; /dev/char links present and mode {:?} puts devices in the spec", config.runtime.mode))
}

fn cdi_checks(dirs: &[PathBuf], inv: &Inventory, config: &Config) -> Vec<Check> {
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
    let nvidia: Vec<(&PathBuf, &cdi::Spec)> = specs
        .iter()
        .filter(|f| f.spec.kind.starts_with("nvidia.com/"))
        .map(|f| (&f.path, &f.spec))
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
        return out;
    }
    let uuids: BTreeSet<&str> = inv
        .gpus
        .iter()
        .flat_map(|g| {
            std::iter::once(g.uuid.as_str()).chain(g.migs.iter().map(|m| m.uuid.as_str()))
        })
        .collect();
    for (path, spec) in nvidia {
        let fix = format!(
            "regenerate it: `nvidia-ctk cdi generate --output={}`",
            path.display()
        );
        let stale = stale_parts(spec, &uuids);
        if stale.is_empty() {
            out.push(ok(
                name,
                format!(
                    "{}: {} devices of {}, valid, every UUID, node and file exists on this host",
                    path.display(),
                    spec.devices.len(),
                    spec.kind
                ),
            ));
        } else {
            out.push(check(
                name,
                Status::Fail,
                format!(
                    "{} is stale (written for another driver or other GPUs): {}",
                    path.display(),
                    stale.join(", ")
                ),
                fix,
            ));
        }
    }
    out
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

fn labels_check(inv: &Inventory, node: Option<&(PathBuf, BTreeMap<String, String>)>) -> Check {
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
    let Some((file, have)) = node else {
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
        match have.get(k) {
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
                "{} match the hardware: {}",
                file.display(),
                summary.join(" ")
            ),
        );
    }
    check(
        name,
        Status::Fail,
        format!("{}: {}", file.display(), wrong.join("; ")),
        format!(
            "relabel from the hardware: `kubectl label node NODE --overwrite {}` (or restart GPU feature discovery); pods selecting the old values stay Pending",
            fixes.join(" ")
        ),
    )
}

/// The labels of a node from `kubectl get node NAME -o json` output (`metadata.labels`).
pub fn parse_node_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let labels = v
        .pointer("/metadata/labels")
        .and_then(|l| l.as_object())
        .ok_or("no metadata.labels object (expected `kubectl get node NAME -o json` output)")?;
    Ok(labels
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect())
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
            let (c, _) = engine_check(&e, false);
            assert_eq!(c.status, status, "case {name}: {}", c.detail);
            assert!(c.detail.contains(words), "case {name}: {}", c.detail);
        }
    }

    #[test]
    fn node_label_cases() {
        let good = r#"{"metadata":{"labels":{"nvidia.com/gpu.memory":"40960","kubernetes.io/os":"linux"}}}"#;
        let l = parse_node_labels(good).unwrap();
        assert_eq!(
            l.get("nvidia.com/gpu.memory").map(String::as_str),
            Some("40960")
        );
        let cases = [("not json", "{"), ("no labels", r#"{"metadata":{}}"#)];
        for (name, text) in cases {
            assert!(parse_node_labels(text).is_err(), "{name}");
        }
    }

    #[test]
    fn labels_mismatch_is_a_failure_with_the_relabel_command() {
        let inv = crate::fixtures::inventory_in("/usr/lib/x86_64-linux-gnu");
        let mut node = labels::labels(&inv);
        node.insert("nvidia.com/gpu.memory".into(), "40960".into());
        let c = labels_check(&inv, Some(&(PathBuf::from("node.json"), node)));
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.detail.contains("the node says 40960, the hardware 81559"),
            "{c:?}"
        );
        assert!(c.fix.contains("nvidia.com/gpu.memory=81559"), "{c:?}");
    }
}
