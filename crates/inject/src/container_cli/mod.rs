//! `nvidia-container-cli`'s three commands on the one Plan, for the engines that exec the CLI
//! instead of running an OCI hook (LXC/Incus/LXD's `hooks/nvidia`, enroot, Apptainer and
//! SingularityCE's `--nvccli`, Charliecloud's `ch-fromhost`): [`info`] and [`list`] read the
//! host ([`nvct_host::discover`]) and print it in libnvidia-container's formats;
//! [`configure`] turns its flags into a [`Request`], discovers, plans and applies the plan to
//! the rootfs with the prestart hook's primitives ([`crate::prestart`]): in this process's
//! mount namespace (standalone: the caller runs it inside the container's namespaces, before
//! pivot_root) or in `/proc/<pid>/ns/mnt` with `--pid` (supervised).
//!
//! Errors carry libnvidia-container's phase (`device error: 7: unknown device`), which callers
//! and people grep for; the binary prints them as `nvidia-container-cli: <phase> error: ...`.

mod configure;
mod info;
mod list;

pub use configure::{configure, Configure};
pub use info::{brand_name, info};
pub use list::{list, List};

use nvct_formats::config::Config;
use nvct_formats::root::DriverRoot;
use nvct_host::discover::{self, Files, Nvml};
use nvct_model::{DeviceId, Devices, Inventory};
use std::fmt;

/// The phase of a failure, as libnvidia-container names it in its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Input,
    Initialization,
    Container,
    Detection,
    Device,
    Requirement,
    Mount,
    Ldcache,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Input => "input",
            Phase::Initialization => "initialization",
            Phase::Container => "container",
            Phase::Detection => "detection",
            Phase::Device => "device",
            Phase::Requirement => "requirement",
            Phase::Mount => "mount",
            Phase::Ldcache => "ldcache",
        }
    }
}

/// A failure: `<phase> error: <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CliError {
    pub phase: Phase,
    pub message: String,
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.phase.name(), self.message)
    }
}

impl CliError {
    pub fn new(phase: Phase, message: impl Into<String>) -> CliError {
        CliError {
            phase,
            message: message.into(),
        }
    }
}

/// The global options every command shares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Globals {
    /// `--root`: the driver root (default: the toolkit config's, else `/`).
    pub root: Option<String>,
    /// `--ldcache`: the ld cache under the root (only `/etc/ld.so.cache` is read).
    pub ldcache: Option<String>,
    /// `--user[=UID[:GID]]`: accepted; files are made as the calling user, whatever it says.
    pub user: Option<Option<String>>,
    /// `--debug=FILE`: where the debug log goes.
    pub debug: Option<String>,
    /// `--load-kmods`: accepted; the driver's modules are never loaded from here.
    pub load_kmods: bool,
    /// `--no-pivot`, `--no-create-imex-channels`: accepted, nothing to change.
    pub no_pivot: bool,
}

impl Globals {
    /// The driver root to read: the toolkit `config`'s, with `--root` over its `root`.
    pub fn driver(&self, config: &Config) -> Result<DriverRoot, CliError> {
        if let Some(l) = &self.ldcache {
            if l.trim_end_matches('/') != "/etc/ld.so.cache" {
                return Err(CliError::new(
                    Phase::Input,
                    format!(
                        "--ldcache={l}: only the driver root's /etc/ld.so.cache is read; leave \
                         --ldcache out or point --root at the tree that has it"
                    ),
                ));
            }
        }
        let mut config = config.clone();
        if let Some(root) = &self.root {
            config.cli.root = root.clone();
            // The device and proc roots follow --root unless the config names them.
        }
        Ok(config.driver())
    }
}

/// The host as much as `files` says, NVML loaded when `nvml` (a failure is libnvidia-container's
/// `initialization error`).
fn read_host(root: &DriverRoot, nvml: bool, files: Files) -> Result<Inventory, CliError> {
    let use_nvml = if nvml { Nvml::Needed } else { Nvml::IfNoProcfs };
    discover::read(root, use_nvml, files)
        .map_err(|e| CliError::new(Phase::Initialization, e.to_string()))
}

/// `--device` values (each comma-split, as libnvidia-container joins repeated ones) → the
/// devices asked for: `all` (any case) ends the list with every GPU; GPU and MIG UUIDs, PCI
/// bus ids, indices and `GPU:MIG` indices otherwise. `none` is no GPU (driver files only);
/// `void` is nothing at all (`Ok(None)`): Apptainer passes `NVIDIA_VISIBLE_DEVICES`
/// verbatim. An unknown token is `device error: <token>: unknown device`.
pub fn parse_devices(values: &[String]) -> Result<Option<Devices>, CliError> {
    let tokens: Vec<&str> = values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if tokens.is_empty() {
        return Ok(Some(Devices::None));
    }
    match tokens.as_slice() {
        ["void"] => return Ok(None),
        ["none"] => return Ok(Some(Devices::None)),
        _ => {}
    }
    let mut ids: Vec<DeviceId> = Vec::new();
    for t in tokens {
        if t.eq_ignore_ascii_case("all") {
            return Ok(Some(Devices::All));
        }
        let id = DeviceId::parse(t).ok_or_else(|| unknown_device(t))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(Some(Devices::List(ids)))
}

fn unknown_device(token: &str) -> CliError {
    CliError::new(Phase::Device, format!("{token}: unknown device"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_cases() {
        let list = |ids: &[DeviceId]| Ok(Some(Devices::List(ids.to_vec())));
        // (case, --device values, devices)
        let cases: Vec<(&str, Vec<&str>, Result<Option<Devices>, CliError>)> = vec![
            ("no flag", vec![], Ok(Some(Devices::None))),
            ("all", vec!["all"], Ok(Some(Devices::All))),
            (
                "ALL ends the list",
                vec!["0,ALL,junk"],
                Ok(Some(Devices::All)),
            ),
            ("none", vec!["none"], Ok(Some(Devices::None))),
            ("void", vec!["void"], Ok(None)),
            (
                "indices, repeated flags, duplicates",
                vec!["0,2", "2"],
                list(&[DeviceId::Index(0), DeviceId::Index(2)]),
            ),
            ("mig index", vec!["1:0"], list(&[DeviceId::MigIndex(1, 0)])),
            (
                "unknown",
                vec!["0,gpu7"],
                Err(CliError::new(Phase::Device, "gpu7: unknown device")),
            ),
            (
                "none among others is a token",
                vec!["0,none"],
                Err(CliError::new(Phase::Device, "none: unknown device")),
            ),
        ];
        for (name, values, want) in cases {
            let values: Vec<String> = values.into_iter().map(String::from).collect();
            assert_eq!(parse_devices(&values), want, "case {name}");
        }
    }

    #[test]
    fn errors_read_as_libnvidia_containers() {
        let e = CliError::new(Phase::Requirement, "unsatisfied condition: cuda>=99.0");
        assert_eq!(
            e.to_string(),
            "requirement error: unsatisfied condition: cuda>=99.0"
        );
    }
}
