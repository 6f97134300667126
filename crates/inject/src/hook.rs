//! The prestart hook's path, one call for the binary: [`run`] reads the hook state, the bundle
//! and the config, resolves the container's request, discovers, plans once for the log and
//! applies the plan inside the container ([`crate::prestart`]). The static front of the
//! binary hands a request it cannot serve (one that needs NVML) to the dynamic program
//! ([`Outcome::Handoff`]).

use crate::prestart::{self as apply, ContainerTarget};
use anyhow::Result;
use nvct_formats::config::{self, Config};
use nvct_formats::log::Logger;
use nvct_formats::oci::{self, HookState, OciError};
use nvct_formats::syslog;
use nvct_host::discover;
use nvct_plan as plan;
use nvct_plan::request::{self, ContainerView};
use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::Instant;

const NAME: &str = "nvidia-container-runtime-hook";

/// Wall-clock milliseconds of each step, for the debug log (docs/PERFORMANCE.md's breakdown).
struct Timings {
    start: Instant,
    last: Instant,
    steps: Vec<(&'static str, f64)>,
}

impl Timings {
    fn new() -> Timings {
        let now = Instant::now();
        Timings {
            start: now,
            last: now,
            steps: Vec::new(),
        }
    }

    fn step(&mut self, name: &'static str) {
        let now = Instant::now();
        self.steps
            .push((name, (now - self.last).as_secs_f64() * 1000.0));
        self.last = now;
    }

    fn line(&self) -> String {
        let parts: Vec<String> = self
            .steps
            .iter()
            .map(|(n, ms)| format!("{n} {ms:.2}"))
            .collect();
        format!(
            "{:.2} ms in all: {}",
            self.start.elapsed().as_secs_f64() * 1000.0,
            parts.join(", ")
        )
    }
}

/// What [`run`] ended with.
pub enum Outcome {
    Done,
    /// The static front hands the request to the dynamic program, with the state it read
    /// (nothing was logged or changed yet).
    Handoff(Vec<u8>),
}

/// The prestart hook, with the state read from stdin. In the static `front`, a request that needs NVML, and any error up to
/// and including discovery, is handed to the dynamic program with nothing logged (it reports
/// such errors as it always did); a planning error (from the same `/proc/driver/nvidia` the
/// dynamic program would read) or an error while applying is reported here.
pub fn run(config_flag: Option<PathBuf>, debug: bool, front: bool) -> Result<Outcome> {
    let mut t = Timings::new();
    let bytes = HookState::read_bytes(std::io::stdin().lock())?;
    let handoff = || Ok(Outcome::Handoff(bytes.clone()));
    let checked = check(&bytes, config_flag, &mut t);
    let (state, spec, rootfs, config, warnings) = match checked {
        Ok(Checked::Run {
            state,
            spec,
            rootfs,
            config,
            warnings,
        }) => (state, spec, rootfs, config, warnings),
        Ok(Checked::NoBundle { msg, config }) => {
            // crun passes its working directory as the bundle (1.8 with podman's
            // --userns=keep-id: "/"); a container we cannot read asked us for nothing we can
            // see, and failing it would fail every container of a hooks.d `always` hook.
            Logger::for_hook(&config.cli.debug, debug).warning(&msg);
            syslog::send(syslog::Severity::Warning, NAME, &msg);
            return Ok(Outcome::Done);
        }
        Err(_) if front => return handoff(),
        Err(e) => return Err(e),
    };
    let view = ContainerView::of(&spec);
    let resolved = match request::resolve(&view, &config) {
        Ok(r) => r,
        Err(_) if front => return handoff(),
        Err(e) => {
            let e = anyhow::Error::new(e).context("the container's GPU request is not valid");
            refused(&mut start_log(&config, debug, &warnings), &state, &e);
            return Err(e);
        }
    };
    t.step("request");
    if front && resolved.request.as_ref().is_some_and(plan::needs_nvml) {
        return handoff();
    }
    let root = config.driver();
    let inv = match &resolved.request {
        Some(req) if front => match apply::discover(&root, req, discover::Nvml::Never) {
            Ok(inv) => {
                t.step("discovery");
                Some(inv)
            }
            Err(_) => return handoff(),
        },
        _ => None,
    };
    let mut log = start_log(&config, debug, &warnings);
    inject(
        &state, &spec, rootfs, &config, resolved, inv, &mut log, &mut t,
    )
    .inspect_err(|e| refused(&mut log, &state, e))
    .map(|()| Outcome::Done)
}

/// The hook's logger, with the config's warnings logged first (the static front makes it only
/// once it keeps the request: a handed-on one is logged by the dynamic program).
fn start_log(config: &Config, debug: bool, warnings: &[String]) -> Logger {
    let mut log = Logger::for_hook(&config.cli.debug, debug);
    for w in warnings {
        log.warning(w);
    }
    log
}

/// Every refusal is logged with its reason, not only printed to runc.
fn refused(log: &mut Logger, state: &HookState, e: &anyhow::Error) {
    log.error(&format!(
        "container {}: refused: {}",
        state.id,
        nvct_formats::log::error_text(e.chain())
    ));
}

/// What the state, the bundle and the config say, before any request is looked at.
enum Checked {
    Run {
        state: HookState,
        spec: Box<oci_spec::runtime::Spec>,
        rootfs: PathBuf,
        config: Config,
        warnings: Vec<String>,
    },
    /// The state names a bundle directory without a config.json (crun; see `prestart`).
    NoBundle { msg: String, config: Config },
}

fn check(bytes: &[u8], config_flag: Option<PathBuf>, t: &mut Timings) -> Result<Checked> {
    // The state first, and its pid checked before any config is read: a hook registered at
    // the wrong stage runs with the container's environment (its config path variable).
    let state = HookState::parse(bytes)?;
    let pid = state.pid()?;
    let spec = match oci::load_spec(&state.bundle) {
        Err(OciError::SpecRead { path, source })
            if source.kind() == ErrorKind::NotFound && state.bundle.is_dir() =>
        {
            let (config, _) = load_config(config_flag)?;
            let msg = format!(
                "container {}: {} does not exist (the runtime's hook state names bundle {:?}); \
                 cannot see what the container asks for, so it gets nothing from this hook \
                 (CDI devices, `--device nvidia.com/gpu=N`, do not need it)",
                state.id,
                path.display(),
                state.bundle
            );
            return Ok(Checked::NoBundle { msg, config });
        }
        r => r?,
    };
    let rootfs = oci::rootfs_path(&spec, &state.bundle)?;
    apply::check_pid(pid, &rootfs)?;
    t.step("state and spec");
    let (config, warnings) = load_config(config_flag)?;
    t.step("config");
    Ok(Checked::Run {
        state,
        spec: Box::new(spec),
        rootfs,
        config,
        warnings,
    })
}

/// The config from `-config`, else the default path (`NVIDIA_CTK_CONFIG_FILE_PATH`, else
/// /etc/nvidia-container-runtime/config.toml), with its warnings.
fn load_config(flag: Option<PathBuf>) -> Result<(Config, Vec<String>)> {
    let path = flag.unwrap_or_else(|| config::default_path(|k| std::env::var(k).ok()));
    Ok(Config::load_checked(&path)?)
}

/// `resolved` is the container's request; `inv` its discovery when the static front made it
/// already (else it is made here).
#[allow(clippy::too_many_arguments)]
fn inject(
    state: &HookState,
    spec: &oci_spec::runtime::Spec,
    rootfs: PathBuf,
    config: &Config,
    resolved: request::Resolved,
    inv: Option<nvct_model::Inventory>,
    log: &mut Logger,
    t: &mut Timings,
) -> Result<()> {
    for n in &resolved.notes {
        log.debug(n);
    }
    let Some(req) = resolved.request else {
        log.debug(&format!(
            "container {}: no GPU requested; nothing to do",
            state.id
        ));
        return Ok(());
    };
    log.info(&format!("container {}: {}", state.id, req.summary()));

    let root = config.driver();
    let inv = match inv {
        Some(inv) => inv,
        None => {
            let nvml = discover::Nvml::wanted(plan::needs_nvml(&req));
            let inv = apply::discover(&root, &req, nvml)?;
            t.step("discovery");
            inv
        }
    };
    for n in &inv.notes {
        log.debug(n);
    }
    let target = ContainerTarget {
        pid: state.pid()?,
        id: state.id.clone(),
        rootfs,
        ldconfig: config.host_ldconfig(),
        no_cgroups: config.cli.no_cgroups,
        device_rules: oci::device_rules(spec),
        arch: root.arch,
        native_ldcache: !config.features.disable_native_ldcache,
        mounts: oci::mounts(spec).into_iter().map(|(_, d)| d).collect(),
    };
    // Planned once, for the image's layout (probed through the container's root), and applied.
    let applied = apply::apply(&req, &inv, &target)?;
    t.step("plan-and-apply");
    let plan = &applied.plan;
    for n in &plan.notes {
        log.debug(n);
    }
    log.debug(&format!(
        "container {}: {} device nodes, {} mounts (libraries into the image's lib dir)",
        state.id,
        plan.device_nodes.len(),
        plan.mounts.len(),
    ));
    for n in &applied.notes {
        log.warning(&format!("container {}: {n}", state.id));
    }
    if applied.rules_in_spec {
        log.debug(&format!(
            "container {}: device cgroup: config.json's linux.resources.devices allows the {} \
             GPU device rules already, which the runtime applied before this hook; not written \
             again",
            state.id,
            plan.cgroup_rules.len()
        ));
    }
    if let Some(line) = &applied.systemd {
        log.debug(&format!("container {}: {line}", state.id));
    }
    if let Some(line) = &applied.ld_cache {
        log.debug(&format!("container {}: {line}", state.id));
    }
    log.debug(&format!(
        "container {}: in the container's mount namespace ({}), {}",
        state.id,
        match applied.forked {
            true => "a forked child: this process has more than one thread",
            false => "this process",
        },
        applied.ns_steps
    ));
    log.debug(&format!("container {}: {}", state.id, t.line()));
    Ok(())
}
