//! The shim's path, one call for the binary: [`run`] loads the config, finds the low-level
//! runtime, and on `create` of a container that asks for a GPU edits `<bundle>/config.json`
//! ([`create`]: our prestart hook in legacy mode, the CDI edits of the requested devices in
//! `cdi` and `jit-cdi`) in one atomic write; then it execs the runtime with the arguments
//! unchanged. It returns only on failure. On any error config.json is left untouched.
//!
//! TEST-ONLY: `NVCT_FAULT_AT=<step>` (a [`fsutil::Step`] name) makes the process abort at that
//! step of the config.json write (used by the crash-safety test).

use super::{Invocation, JitRequest};
use anyhow::{Context, Result};
use nvct_formats::config::{self, Config};
use nvct_formats::fsutil::{self, Step, WriteOptions};
use nvct_formats::log::{Logger, Steps};
use nvct_formats::oci;
use nvct_host::discover;
use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn which(name: &str) -> Option<PathBuf> {
    which::which(name).ok()
}

/// The shim for runc's command line `raw` (`args` its text, `inv` what it says). `front`: this
/// is the statically linked shim, which cannot load the driver's libnvidia-ml and hands a
/// request that needs it, or a host whose `/proc/driver/nvidia` does not answer, to the dynamic
/// program in `../libexec/nvct/` with the same arguments, before config.json is written.
pub fn run(
    raw: &[OsString],
    args: &[String],
    inv: &Invocation,
    front: bool,
    log: &mut Logger,
    steps: &mut Steps,
) -> Result<std::convert::Infallible> {
    let from_env = std::env::var_os(config::CONFIG_PATH_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let config_path = config::default_path(|k| std::env::var(k).ok());
    let (config, warnings) = Config::load_checked(&config_path)?;
    log.configure(&config.runtime);
    // Handed over by the static front, which logged these lines already.
    let front_logged = std::env::var_os(crate::process::HANDED_OVER_ENV).is_some();
    if front_logged {
        log.debug("took over from the static front: the request needs NVML");
    } else {
        for w in &warnings {
            log.warning(w);
        }
        log.debug(&format!("args {args:?}, config {}", config_path.display()));
    }
    steps.mark("config");

    let runtime = super::find_runtime(&config.runtime.runtimes, &which)?;
    if !front_logged {
        log.debug(&format!("low-level runtime {}", runtime.display()));
    }
    steps.mark("find-runtime");

    if inv.version && inv.command.is_none() {
        println!(
            "nvidia-container-runtime version {}",
            env!("CARGO_PKG_VERSION")
        );
        let _ = std::io::stdout().flush();
    } else if inv.is_create() {
        let cwd = std::env::current_dir().context("cannot get the current directory")?;
        let bundle = inv.bundle_or(&cwd);
        let from_env = from_env.is_some().then_some(config_path.as_path());
        create(&bundle, &config, from_env, front, log, steps)?;
    }
    log.debug(&steps.line());
    let e = Command::new(&runtime)
        .arg0(&runtime)
        .args(raw)
        .env_remove(crate::process::HANDED_OVER_ENV)
        .exec();
    Err(anyhow::Error::new(e).context(format!(
        "cannot run the low-level runtime {}",
        runtime.display()
    )))
}

/// `create` of the bundle: config.json gains what the container asked for, in one atomic
/// write. `config_from_env`: the config path when `NVIDIA_CTK_CONFIG_FILE_PATH` named it (the
/// legacy hook is given the same).
pub fn create(
    bundle: &Path,
    config: &Config,
    config_from_env: Option<&Path>,
    front: bool,
    log: &mut Logger,
    steps: &mut Steps,
) -> Result<()> {
    let path = bundle.join("config.json");
    let bytes = oci::read_capped(&path, oci::MAX_SPEC_BYTES)?;
    steps.mark("spec-read");
    let action = super::decide(&bytes, &path, config)?;
    steps.mark("decide");
    if action == super::Action::PassThrough {
        log.info(&format!(
            "{}: no GPU requested; config.json unchanged",
            path.display()
        ));
        return Ok(());
    }
    let mut spec: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|source| oci::OciError::SpecParse {
            path: path.clone(),
            source,
        })?;
    steps.mark("spec-parse");
    let done = match action {
        super::Action::PassThrough => unreachable!("returned above"),
        super::Action::Legacy(req) => {
            let hook = super::find_hook(config, &which)?;
            let env = super::hook_env(config_from_env);
            if !super::add_hook(&mut spec, &hook, &env, &path)? {
                log.info(&format!("{}: our hook is already there", path.display()));
                return Ok(());
            }
            let mut done = format!("{}: added prestart hook {}", req.summary(), hook.display());
            steps.mark("add-hook");
            if !config.cli.no_cgroups {
                // The device rules of what the hook will inject, in the spec too. When the
                // host cannot be planned for, the hook says why at prestart; only warn here.
                let root = config.driver();
                let layout = nvct_plan::Layout::UNKNOWN;
                // The devices only: the rules need nothing of the driver's files.
                let files = discover::Files::Devices(nvct_plan::needs(&req));
                let discovered = discover(&root, nvct_plan::needs_nvml(&req), files, front);
                steps.mark("discovery");
                let planned = discovered
                    .map_err(anyhow::Error::from)
                    .and_then(|inv| Ok(nvct_plan::plan(&req, &inv, &layout)?));
                match planned {
                    Ok(plan) => {
                        crate::spec_edit::allow_devices(&mut spec, &plan.cgroup_rules, &path)?;
                        done += &format!(" and {} device rules", plan.cgroup_rules.len());
                    }
                    Err(e) => log.warning(&format!(
                        "{}: no device rules written: {}",
                        path.display(),
                        nvct_formats::log::error_text(e.chain())
                    )),
                }
            }
            done
        }
        super::Action::Cdi(names) => {
            // runtime.nvidia.com/gpu=<id> is generated on the spot; the rest come from spec dirs.
            let (auto, from_specs) = super::split_auto_kind(&names);
            if !from_specs.is_empty() {
                let dirs: Vec<PathBuf> = config
                    .runtime
                    .modes
                    .cdi
                    .spec_dirs
                    .iter()
                    .map(PathBuf::from)
                    .collect();
                let (specs, warnings) = nvct_cdi::list::load(&dirs);
                for w in warnings {
                    log.warning(&w);
                }
                steps.mark("spec-dirs");
                let searched = config.runtime.modes.cdi.spec_dirs.join(", ");
                super::inject_from_specs(
                    &mut spec,
                    &from_specs,
                    &specs,
                    &searched,
                    &nvct_cdi::fill::fill,
                    &path,
                )?;
            }
            if !auto.is_empty() {
                let jit = super::jit_request(auto, config, &path)?;
                inject_jit(&mut spec, &jit, config, &path, front, log, steps)?;
            }
            format!("injected CDI devices {} (cdi mode)", join(&names))
        }
        super::Action::JitCdi(jit) => {
            if !jit.unchecked_requirements.is_empty() {
                // The decision in super::decide: upstream's jit-cdi evaluates none either.
                log.warning(&format!(
                    "{}: requirements not evaluated in jit-cdi mode (as upstream's jit-cdi): {}; \
                     mode = \"legacy\" checks them, NVIDIA_DISABLE_REQUIRE=true silences this",
                    path.display(),
                    jit.unchecked_requirements.join(" and ")
                ));
            }
            let cdi_hook = inject_jit(&mut spec, &jit, config, &path, front, log, steps)?;
            format!(
                "injected CDI devices {} (jit-cdi mode, hooks {})",
                join(&jit.names),
                cdi_hook.display()
            )
        }
    };
    steps.mark("edit");
    let mut out = serde_json::to_vec_pretty(&spec).context("cannot serialize config.json")?;
    out.push(b'\n');
    steps.mark("serialize");
    let fault = match std::env::var("NVCT_FAULT_AT") {
        Ok(name) => Some(fsutil::abort_at(
            Step::parse(&name)
                .with_context(|| format!("NVCT_FAULT_AT={name:?} is not a write step"))?,
            "nvidia-container-runtime",
        )),
        Err(_) => None,
    };
    // No fsync for the bundle's config.json (docs/PERFORMANCE.md): runc reads it right away
    // from the page cache, and a crash that could lose the write loses the container with it.
    // The rename stays, so runc never reads a half-written file.
    let wopts = WriteOptions {
        backup: false,
        fault: fault.as_ref().map(|f| f as &dyn Fn(Step, &Path)),
        no_fsync: true,
    };
    fsutil::write_atomic(&path, &out, &wopts)?;
    steps.mark("write");
    log.info(&format!("{}: {done}", path.display()));
    Ok(())
}

/// Plans `jit` for a fresh discovery and applies its edits; returns the CDI hook the edits
/// run.
fn inject_jit(
    spec: &mut serde_json::Value,
    jit: &JitRequest,
    config: &Config,
    path: &Path,
    front: bool,
    log: &mut Logger,
    steps: &mut Steps,
) -> Result<PathBuf> {
    let cdi_hook = super::find_cdi_hook(config, &which)?;
    // NVML only when the request needs what only it knows (its start is the slowest step of
    // discovery on a real host).
    let nvml = nvct_plan::needs_nvml_cdi(&jit.request);
    // What the request can use (no DRM nodes without graphics or display, ...), as the
    // prestart hook's discovery: the same planner plans both.
    let files = discover::Files::ButProcGpus(nvct_plan::needs(&jit.request));
    let inv = discover(&config.driver(), nvml, files, front);
    steps.mark("discovery");
    let inv = inv?;
    for note in &inv.notes {
        log.debug(note);
    }
    let edits = super::jit_edits(jit, &inv, config, &cdi_hook, path)?;
    super::inject(spec, &[&edits], path)?;
    Ok(cdi_hook)
}

fn hand_over() -> ! {
    crate::process::exec_program("nvidia-container-runtime")
}

/// What `files` says of the host's driver (the legacy mode's device rules: its GPUs and device
/// nodes; jit-cdi: what CDI edits need), or the static shim's (`front`) hand-over.
fn discover(
    root: &nvct_formats::root::DriverRoot,
    nvml: bool,
    files: discover::Files,
    front: bool,
) -> Result<nvct_model::Inventory, discover::DiscoverError> {
    use discover::Nvml;
    match front {
        true if nvml => hand_over(),
        true => discover::read(root, Nvml::Never, files).or_else(|_| hand_over()),
        false => discover::read(root, Nvml::wanted(nvml), files),
    }
}

fn join(names: &[nvct_cdi::QualifiedName]) -> String {
    names
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
