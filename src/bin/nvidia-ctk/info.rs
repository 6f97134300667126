//! `nvidia-ctk info`: what this node has and what a container gets: driver and CUDA version,
//! each GPU and MIG device, per capability the files a container is given (the planner's own
//! answer), the config file in use and what mode `auto` resolves to. `--format json`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use nvct_formats::config::{Config, Mode};
use nvct_model::{Capability, Devices, FileKind};
use nvct_plan::request::Request;
use nvct_plan::{self as plan, Layout};
use serde::Serialize;

use crate::Verbosity;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum InfoFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// The toolkit config (default: $NVIDIA_CTK_CONFIG_FILE_PATH, else
    /// /etc/nvidia-container-runtime/config.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    format: InfoFormat,
}

#[derive(Serialize)]
struct Info {
    config_file: PathBuf,
    config_file_exists: bool,
    mode: String,
    driver_root: PathBuf,
    driver_version: String,
    cuda_version: Option<String>,
    gpus: Vec<GpuInfo>,
    capabilities: Vec<CapInfo>,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct GpuInfo {
    index: u32,
    minor: u32,
    uuid: String,
    bus_id: String,
    name: String,
    memory_mib: u64,
    mig_enabled: bool,
    migs: Vec<MigInfo>,
}

#[derive(Serialize)]
struct MigInfo {
    index: String,
    uuid: String,
    gi: u32,
    ci: u32,
}

#[derive(Serialize)]
struct CapInfo {
    capability: String,
    supported: bool,
    files: Vec<PathBuf>,
}

/// What `auto` means for this config, in words.
fn mode_text(mode: Mode) -> String {
    match mode {
        Mode::Auto => "auto (legacy: the prestart hook; cdi when a container names CDI devices by annotation or runtime.nvidia.com/gpu)".into(),
        Mode::Legacy => "legacy (the prestart hook)".into(),
        Mode::Cdi => "cdi (devices from the CDI specs)".into(),
        Mode::JitCdi => "jit-cdi (a CDI spec generated per container)".into(),
    }
}

pub fn run(args: InfoArgs, _v: Verbosity) -> Result<()> {
    let path = args.config.unwrap_or_else(|| crate::toolkit_config(None));
    let (config, warnings) = Config::load_checked(&path)?;
    let root = config.driver();
    let inv = nvct_host::discover::discover(&root)?;
    let supported: Vec<&str> = config
        .supported_driver_capabilities
        .split(',')
        .map(str::trim)
        .collect();
    let mut capabilities = Vec::new();
    for cap in Capability::ALL {
        // compat32 adds the 32-bit builds of the other capabilities' libraries: list those.
        let compat32 = cap == Capability::Compat32;
        let req = Request {
            devices: Devices::All,
            capabilities: if compat32 {
                Capability::ALL.into_iter().collect()
            } else {
                [cap].into_iter().collect()
            },
            requirements: vec![],
            mig_config: None,
            mig_monitor: None,
            imex_channels: None,
            cuda_compat: false,
            opt_ins: Default::default(),
        };
        let files = match plan::plan(&req, &inv, &Layout::UNKNOWN) {
            Ok(p) => p
                .mounts
                .into_iter()
                .filter(|m| !compat32 || m.kind == FileKind::Library32)
                .map(|m| m.container_path)
                .collect(),
            Err(_) => vec![],
        };
        capabilities.push(CapInfo {
            capability: cap.name().into(),
            supported: supported.contains(&cap.name()) || supported.contains(&"all"),
            files,
        });
    }
    let info = Info {
        config_file_exists: path.exists(),
        config_file: path,
        mode: mode_text(config.runtime.mode),
        driver_root: root.root.clone(),
        driver_version: inv.driver_version.clone(),
        cuda_version: inv.cuda_version.clone(),
        gpus: inv
            .gpus
            .iter()
            .map(|g| GpuInfo {
                index: g.index,
                minor: g.minor,
                uuid: g.uuid.clone(),
                bus_id: g.bus_id.clone(),
                name: g.model.clone(),
                memory_mib: g.memory_mib,
                mig_enabled: g.mig_enabled,
                migs: g
                    .migs
                    .iter()
                    .map(|m| MigInfo {
                        index: format!("{}:{}", g.index, m.index),
                        uuid: m.uuid.clone(),
                        gi: m.gi,
                        ci: m.ci,
                    })
                    .collect(),
            })
            .collect(),
        capabilities,
        notes: warnings
            .into_iter()
            .chain(inv.notes.iter().cloned())
            .collect(),
    };
    match args.format {
        InfoFormat::Json => println!("{}", serde_json::to_string_pretty(&info)?),
        InfoFormat::Text => print!("{}", text(&info)),
    }
    Ok(())
}

fn text(i: &Info) -> String {
    let mut s = String::new();
    let cfg_state = if i.config_file_exists {
        ""
    } else {
        " (not there: defaults)"
    };
    s += &format!("config:  {}{cfg_state}\n", i.config_file.display());
    s += &format!("mode:    {}\n", i.mode);
    s += &format!(
        "driver:  {} (root {})\n",
        i.driver_version,
        i.driver_root.display()
    );
    s += &format!(
        "CUDA:    {}\n",
        i.cuda_version.as_deref().unwrap_or("unknown (no NVML)")
    );
    s += &format!("GPUs:    {}\n", i.gpus.len());
    for g in &i.gpus {
        let mem = if g.memory_mib > 0 {
            format!("{} MiB", g.memory_mib)
        } else {
            "memory unknown".into()
        };
        s += &format!(
            "  GPU {} (minor {}): {} {} {} {mem}{}\n",
            g.index,
            g.minor,
            g.name,
            g.uuid,
            g.bus_id,
            if g.mig_enabled { ", MIG on" } else { "" }
        );
        for m in &g.migs {
            s += &format!(
                "    MIG {}: {} (gi {}, ci {})\n",
                m.index, m.uuid, m.gi, m.ci
            );
        }
    }
    s += "a container gets, per capability:\n";
    for c in &i.capabilities {
        let state = if c.supported {
            ""
        } else {
            " (not in supported-driver-capabilities)"
        };
        s += &format!("  {}: {} files{state}\n", c.capability, c.files.len());
        for f in &c.files {
            s += &format!("    {}\n", f.display());
        }
    }
    for n in &i.notes {
        s += &format!("note: {n}\n");
    }
    s
}
