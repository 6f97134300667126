//! `nvidia-ctk doctor`: gathers what the checks need that is not under the config's roots (the
//! engines' effective configs: the file, or `containerd config dump`; the Kubernetes node's JSON)
//! and prints `nvct_node::doctor`'s checklist, one line per check (`ok`, `skip`, `warn`, `fail`), or
//! `--format json`. Exit code: 0 all ok, 1 with warnings, 2 with a failure.

use nvct_node::configure::imports::{containerd_imports, files_in};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nvct_formats::config::Config;
use nvct_node::doctor::{self, Check, Engine, EngineInput, Inputs};
use serde::Serialize;

use crate::Verbosity;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum DoctorFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The toolkit config (default: $NVIDIA_CTK_CONFIG_FILE_PATH, else
    /// /etc/nvidia-container-runtime/config.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    format: DoctorFormat,
    /// containerd's config (checked when given, or when the file or the containerd binary
    /// exists).
    #[arg(long, default_value = "/etc/containerd/config.toml")]
    containerd_config: PathBuf,
    /// docker's daemon.json (checked when given, or when the file or dockerd exists).
    #[arg(long, default_value = "/etc/docker/daemon.json")]
    docker_config: PathBuf,
    /// CRI-O's config (checked when given, or when the file or crio exists).
    #[arg(long, default_value = "/etc/crio/crio.conf")]
    crio_config: PathBuf,
    /// A CDI spec directory (repeatable; default: the config's spec-dirs).
    #[arg(long = "cdi-spec-dir")]
    cdi_spec_dir: Vec<PathBuf>,
    /// The Kubernetes node: `kubectl get node NAME -o json` output (its labels and allocatable
    /// GPUs are checked, and its name is used in the fixes).
    #[arg(long, value_name = "NODE_JSON")]
    node_labels: Option<PathBuf>,
}

#[derive(Serialize)]
struct Report<'a> {
    checks: &'a [Check],
}

/// Runs the checks; the exit code says how they went (0, 1, 2).
pub fn run(args: DoctorArgs, v: Verbosity, matches: &clap::ArgMatches) -> Result<ExitCode> {
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| crate::toolkit_config(None));
    let (config, warnings) = Config::load_checked(&path)?;
    let given = |id: &str| {
        matches
            .subcommand_matches("doctor")
            .and_then(|m| m.value_source(id))
            == Some(clap::parser::ValueSource::CommandLine)
    };
    let mut engines = Vec::new();
    for (engine, file, id, binary) in [
        (
            Engine::Containerd,
            &args.containerd_config,
            "containerd_config",
            "containerd",
        ),
        (
            Engine::Docker,
            &args.docker_config,
            "docker_config",
            "dockerd",
        ),
        (Engine::Crio, &args.crio_config, "crio_config", "crio"),
    ] {
        let installed = which::which(binary).is_ok();
        if !(given(id) || file.exists() || installed) {
            continue;
        }
        engines.push(read_engine(engine, file, installed)?);
    }
    let cdi_dirs = if args.cdi_spec_dir.is_empty() {
        config
            .runtime
            .modes
            .cdi
            .spec_dirs
            .iter()
            .map(PathBuf::from)
            .collect()
    } else {
        args.cdi_spec_dir.clone()
    };
    let node = match &args.node_labels {
        None => None,
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("--node-labels {}", p.display()))?;
            let node = doctor::parse_node(&text)
                .map_err(|e| anyhow::anyhow!("--node-labels {}: {e}", p.display()))?;
            Some((p.clone(), node))
        }
    };
    let which = |name: &str| which::which(name).ok();
    let checks = doctor::run(&Inputs {
        config: &config,
        config_path: &path,
        config_warnings: &warnings,
        engines,
        cdi_dirs,
        kubelet: node.is_some() || std::path::Path::new("/var/lib/kubelet").is_dir(),
        node,
        which: &which,
    });
    match args.format {
        DoctorFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&Report { checks: &checks })?
        ),
        DoctorFormat::Text => {
            for c in &checks {
                if v.quiet && c.status == doctor::Status::Ok {
                    continue;
                }
                println!("{:<4}  {}: {}", c.status.as_str(), c.name, c.detail);
                if !c.fix.is_empty() {
                    println!("      fix: {}", c.fix);
                }
            }
            if !v.quiet || doctor::exit_code(&checks) != 0 {
                println!("{}", doctor::summary(&checks));
            }
        }
    }
    Ok(ExitCode::from(doctor::exit_code(&checks)))
}

/// An engine's effective config: for containerd `containerd --config FILE config dump` when the
/// binary is there (imports and drop-ins merged), else the file with the drop-ins the engine
/// reads over it (containerd's `imports`, CRI-O's `crio.conf.d` next to the file).
fn read_engine(engine: Engine, file: &Path, installed: bool) -> Result<EngineInput> {
    let (layers, release) = match engine {
        Engine::Containerd => containerd_layers(file, installed)?,
        _ => (Vec::new(), None),
    };
    if engine == Engine::Containerd && installed && file.exists() {
        let out = std::process::Command::new("containerd")
            .arg("--config")
            .arg(file)
            .args(["config", "dump"])
            .output();
        if let Some(out) = out.ok().filter(|o| o.status.success()) {
            return Ok(EngineInput {
                engine,
                path: file.to_path_buf(),
                via: "containerd config dump".into(),
                text: Some(String::from_utf8_lossy(&out.stdout).into_owned()),
                drop_ins: Vec::new(),
                layers,
                release,
            });
        }
    }
    let text = read_optional(file)?;
    let drop_in_files = match (engine, &text) {
        (Engine::Crio, _) => files_in(&file.with_file_name("crio.conf.d"))?,
        (Engine::Containerd, Some(t)) => containerd_imports(file, t)?,
        _ => Vec::new(),
    };
    let mut drop_ins = Vec::new();
    for p in drop_in_files {
        if let Some(t) = read_optional(&p)? {
            drop_ins.push((p, t));
        }
    }
    let names: Vec<String> = drop_ins
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    let via = match (&text, names.is_empty()) {
        (_, true) => "the file".to_string(),
        (Some(_), false) => format!("the file and {}", names.join(", ")),
        (None, false) => names.join(", "),
    };
    Ok(EngineInput {
        engine,
        path: file.to_path_buf(),
        via,
        text,
        drop_ins,
        layers,
        release,
    })
}

/// containerd's config file and the files it imports, as read (for the drop-in shadow check),
/// and its release when the binary is there (`containerd --version`).
fn containerd_layers(
    file: &Path,
    installed: bool,
) -> Result<(
    Vec<(PathBuf, String)>,
    Option<nvct_engines::containerd::Release>,
)> {
    let release = installed
        .then(|| {
            std::process::Command::new("containerd")
                .arg("--version")
                .output()
                .ok()
        })
        .flatten()
        .filter(|o| o.status.success())
        .and_then(|o| {
            nvct_engines::containerd::Release::parse(&String::from_utf8_lossy(&o.stdout))
        });
    let Some(text) = read_optional(file)? else {
        return Ok((Vec::new(), release));
    };
    let mut layers = vec![(file.to_path_buf(), text.clone())];
    for p in containerd_imports(file, &text)? {
        if let Some(t) = read_optional(&p)? {
            layers.push((p, t));
        }
    }
    Ok((layers, release))
}

fn read_optional(file: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(file) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
}
