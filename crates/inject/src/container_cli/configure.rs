//! `nvidia-container-cli configure`: its flags → a [`Request`], then the prestart hook's
//! discovery, planner and container primitives. Standalone (no `--pid`, how LXC's, enroot's and
//! Apptainer's hooks run it): this process is already in the container's mount namespace,
//! before pivot_root, and the plan is applied here to ROOTFS ([`prestart::apply_here`]).
//! Supervised (`--pid=N`, NVIDIA's legacy hook): applied in `/proc/N/ns/mnt` as the prestart
//! hook does ([`prestart::apply`]).

use super::{parse_devices, read_host, CliError, Globals, Phase};
use crate::prestart::{self, ApplyError, ContainerTarget, HereTarget};
use nvct_formats::config::Config;
use nvct_host::discover::Files;
use nvct_model::{Capability, Devices, FileKind, Inventory};
use nvct_plan::request::{ImexChannels, Request};
use nvct_plan::{self as plan, PlanError};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// What `configure` was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Configure {
    /// `--pid`: the container's init, for the supervised mode; `None` (or 0): standalone.
    pub pid: Option<u32>,
    /// `--device` values.
    pub devices: Vec<String>,
    /// `--compute`, `--utility`, ...: the capabilities (none: no driver file).
    pub capabilities: BTreeSet<Capability>,
    /// `--require` expressions (at most 32).
    pub requirements: Vec<String>,
    /// `--ldconfig`: `@host path` (or a container path, read as the host's: nothing of the
    /// image is run).
    pub ldconfig: Option<String>,
    pub no_cgroups: bool,
    /// `--no-devbind`: the device nodes are not mounted (their cgroup rules still are).
    pub no_devbind: bool,
    /// `--no-cntlibs` / `--cuda-compat-mode=disabled`: no CUDA forward compatibility.
    pub no_cuda_compat: bool,
    /// `--mig-config`, `--mig-monitor` values (only `all`, as libnvidia-container).
    pub mig_config: Vec<String>,
    pub mig_monitor: Vec<String>,
    /// `--imex-channel` values (channel numbers, comma-separated).
    pub imex_channels: Vec<String>,
    /// `--no-persistenced`, `--no-fabricmanager`: not the daemon's socket.
    pub no_persistenced: bool,
    pub no_fabricmanager: bool,
    /// `--no-gsp-firmware`: no GSP firmware file.
    pub no_gsp_firmware: bool,
    /// The container's rootfs (absolute, not `/`).
    pub rootfs: PathBuf,
}

/// What `configure` did, for the debug log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    pub summary: String,
    pub notes: Vec<String>,
}

/// Configures `what.rootfs` for the request its flags make.
pub fn configure(
    globals: &Globals,
    config: &Config,
    what: &Configure,
) -> Result<Option<Configured>, CliError> {
    let Some(devices) = parse_devices(&what.devices)? else {
        return Ok(None); // `void`: nothing at all
    };
    let root = globals.driver(config)?;
    let req = Request {
        devices,
        capabilities: what.capabilities.clone(),
        requirements: what.requirements.clone(),
        mig_config: mig("mig-config", &what.mig_config)?,
        mig_monitor: mig("mig-monitor", &what.mig_monitor)?,
        imex_channels: imex(&what.imex_channels)?,
        cuda_compat: config.cuda_compat_enabled() && !what.no_cuda_compat,
        opt_ins: BTreeSet::new(),
    };
    let nvml = plan::needs_nvml(&req);
    let mut inv = read_host(&root, nvml, Files::For(plan::needs(&req)))?;
    leave_out(&mut inv, what);
    let bus_ids = plan::selected_bus_ids(&req, &inv);
    nvct_host::discover::read_proc_gpus(&root, &mut inv, &bus_ids);
    let ldconfig = what
        .ldconfig
        .as_deref()
        .map(|l| PathBuf::from(l.trim_start_matches('@')))
        .unwrap_or_else(|| config.host_ldconfig());
    let no_cgroups = what.no_cgroups || config.cli.no_cgroups;
    let applied = match what.pid.filter(|p| *p > 0) {
        Some(pid) => {
            let target = ContainerTarget {
                pid,
                id: format!("pid {pid}"),
                rootfs: what.rootfs.clone(),
                ldconfig,
                no_cgroups,
                device_rules: Vec::new(),
                arch: root.arch,
                native_ldcache: !config.features.disable_native_ldcache,
                mounts: Vec::new(),
            };
            prestart::apply(&req, &inv, &target)
        }
        None => {
            let target = HereTarget {
                rootfs: what.rootfs.clone(),
                ldconfig,
                cgroup_pid: (!no_cgroups).then(std::process::id),
                arch: root.arch,
                native_ldcache: !config.features.disable_native_ldcache,
                no_devbind: what.no_devbind,
            };
            prestart::apply_here(&req, &inv, &target)
        }
    }
    .map_err(|e| match e {
        ApplyError::Plan(e) => plan_error(e),
        ApplyError::Ldconfig(_) => CliError::new(Phase::Ldcache, e.to_string()),
        e => CliError::new(Phase::Mount, e.to_string()),
    })?;
    let mut notes = applied.notes;
    notes.extend(applied.ld_cache);
    Ok(Some(Configured {
        summary: req.summary(),
        notes,
    }))
}

/// `--mig-config` / `--mig-monitor` values: `all` (any case) or nothing; libnvidia-container
/// supports no other (`mig-config error: 0: only 'all' devices are currently supported`).
fn mig(flag: &str, values: &[String]) -> Result<Option<Devices>, CliError> {
    let tokens: Vec<&str> = values
        .iter()
        .flat_map(|v| v.split(','))
        .filter(|t| !t.is_empty())
        .collect();
    match tokens.as_slice() {
        [] => Ok(None),
        t if t.iter().all(|t| t.eq_ignore_ascii_case("all")) => Ok(Some(Devices::All)),
        t => {
            let bad = t
                .iter()
                .find(|t| !t.eq_ignore_ascii_case("all"))
                .copied()
                .unwrap_or("");
            Err(CliError::new(
                Phase::Device,
                format!("{flag}: {bad}: only 'all' devices are currently supported"),
            ))
        }
    }
}

/// `--imex-channel` values: channel numbers below 2^20.
fn imex(values: &[String]) -> Result<Option<ImexChannels>, CliError> {
    let mut ids = Vec::new();
    for t in values
        .iter()
        .flat_map(|v| v.split(','))
        .filter(|t| !t.is_empty())
    {
        match t.parse::<u32>() {
            Ok(n) if n < 1 << 20 => ids.push(n),
            _ => {
                return Err(CliError::new(
                    Phase::Input,
                    format!("unsupported IMEX channel value: {t}"),
                ))
            }
        }
    }
    Ok((!ids.is_empty()).then_some(ImexChannels::List(ids)))
}

/// The driver files `--no-persistenced`, `--no-fabricmanager` and `--no-gsp-firmware` leave
/// out, taken from the inventory before it is planned.
fn leave_out(inv: &mut Inventory, what: &Configure) {
    inv.files.retain(|f| {
        let path = f.driver_path.to_string_lossy();
        !match f.kind {
            FileKind::Ipc => {
                (what.no_persistenced && path.contains("nvidia-persistenced"))
                    || (what.no_fabricmanager && path.contains("nvidia-fabricmanager"))
            }
            FileKind::Firmware => what.no_gsp_firmware,
            _ => false,
        }
    });
}

/// The planner's refusals in libnvidia-container's words: `device error: <id>: unknown
/// device`, `requirement error: unsatisfied condition: <first OR group>` (with its advice to
/// update the driver when that group starts with `cuda>=`), `requirement error: invalid
/// expression`.
fn plan_error(e: PlanError) -> CliError {
    match e {
        PlanError::UnknownDevice { id, .. } => super::unknown_device(&id.to_string()),
        PlanError::Unsatisfied { expr, .. } => {
            let first = expr.split_whitespace().next().unwrap_or("").to_string();
            let mut message = format!("unsatisfied condition: {first}");
            if first.starts_with("cuda>=") {
                message += ", please update your driver to a newer version, or use an earlier \
                            cuda container";
            }
            CliError::new(Phase::Requirement, message)
        }
        PlanError::BadRequirement(_) => CliError::new(Phase::Requirement, "invalid expression"),
        PlanError::MigNotEnabled { .. } | PlanError::MissingMigCap(_) => {
            CliError::new(Phase::Device, e.to_string())
        }
        PlanError::MissingNode(_) => CliError::new(Phase::Detection, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_error_cases() {
        // (case, planner error, the CLI's message)
        let cases = [
            (
                "cuda first: the advice",
                PlanError::Unsatisfied {
                    expr: "cuda>=99.0 brand=tesla".into(),
                    facts: String::new(),
                },
                "requirement error: unsatisfied condition: cuda>=99.0, please update your \
                 driver to a newer version, or use an earlier cuda container",
            ),
            (
                "brand: no advice",
                PlanError::Unsatisfied {
                    expr: "brand=tesla,arch>=9.0".into(),
                    facts: String::new(),
                },
                "requirement error: unsatisfied condition: brand=tesla,arch>=9.0",
            ),
            (
                "bad expression",
                PlanError::BadRequirement("cuda~1".into()),
                "requirement error: invalid expression",
            ),
        ];
        for (name, e, want) in cases {
            assert_eq!(plan_error(e).to_string(), want, "case {name}");
        }
    }
}
