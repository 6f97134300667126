//! `nvidia-ctk doctor`: gathers what the checks need that is not under the config's roots (the
//! engines' effective configs: the file, or `containerd config dump`; the node's labels) and
//! prints `nvct::doctor`'s checklist, one line per check, or `--format json`. Exit code: 0 all
//! ok, 1 with warnings, 2 with a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nvct::config::{self, Config};
use nvct::doctor::{self, Check, Engine, EngineInput, Inputs};
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
    /// The node's labels: `kubectl get node NAME -o json` output.
    #[arg(long)]
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
        .unwrap_or_else(|| config::default_path(|k| std::env::var(k).ok()));
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
    let node_labels = match &args.node_labels {
        None => None,
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("--node-labels {}", p.display()))?;
            let labels: BTreeMap<String, String> = doctor::parse_node_labels(&text)
                .map_err(|e| anyhow::anyhow!("--node-labels {}: {e}", p.display()))?;
            Some((p.clone(), labels))
        }
    };
    let checks = doctor::run(&Inputs {
        config: &config,
        config_path: &path,
        config_warnings: &warnings,
        engines,
        cdi_dirs,
        node_labels,
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
        }
    }
    Ok(ExitCode::from(doctor::exit_code(&checks)))
}

/// An engine's effective config: for containerd `containerd --config FILE config dump` when the
/// binary is there (imports and drop-ins merged), else the file.
fn read_engine(engine: Engine, file: &Path, installed: bool) -> Result<EngineInput> {
    let read = || -> Result<Option<String>> {
        match std::fs::read_to_string(file) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
        }
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
            });
        }
    }
    Ok(EngineInput {
        engine,
        path: file.to_path_buf(),
        via: "the file".into(),
        text: read()?,
    })
}
