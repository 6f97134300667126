//! PURE: what a container asks for. From its env, mounts and privilege (a view of config.json)
//! plus the toolkit config, build a [`Request`] — or decide it is not a GPU container.
//!
//! Semantics mirror the upstream toolkit (docs/COMPAT.md, "What the container asks for"). No
//! I/O here; nothing about the host is known yet (ids are checked against the inventory by
//! the planner).

use nvct_formats::config::Config;
pub use nvct_model::optin::OptIn;
pub use nvct_model::{normalize_bus_id, Capability, DeviceId, Devices};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where volume-mount device lists live (upstream spelling).
pub const VOLUME_MOUNT_DIR: &str = "/var/run/nvidia-container-devices";
/// A device list longer than this is refused: no host has that many GPUs.
pub const MAX_DEVICE_IDS: usize = 4096;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("{var} contains a NUL byte; remove it from the container's environment")]
    NulByte { var: String },
    #[error("{var}={value:?}: {why}")]
    BadValue {
        var: String,
        value: String,
        why: String,
    },
    #[error("NVIDIA_DRIVER_CAPABILITIES: unknown capability {0:?} (known: compute, compat32, graphics, utility, video, display, ngx, all)")]
    UnknownCapability(String),
    #[error("NVIDIA_DRIVER_CAPABILITIES: capability {0:?} is not in supported-driver-capabilities of the toolkit config")]
    UnsupportedCapability(String),
    #[error("{var} is only honoured for privileged containers (CAP_SYS_ADMIN); run the container privileged or unset {var}")]
    NeedsPrivilege { var: String },
    #[error("{count} device ids requested in {var}; at most {MAX_DEVICE_IDS} are accepted")]
    TooManyIds { var: String, count: usize },
}

/// What a GPU container asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Request {
    pub devices: Devices,
    pub capabilities: BTreeSet<Capability>,
    /// `NVIDIA_REQUIRE_*` expressions (evaluated by the planner against the driver).
    pub requirements: Vec<String>,
    pub mig_config: Option<Devices>,
    pub mig_monitor: Option<Devices>,
    /// `NVIDIA_IMEX_CHANNELS`: the IMEX channels the container gets
    /// (`/dev/nvidia-caps-imex-channels/channelN`).
    pub imex_channels: Option<ImexChannels>,
    /// The config allows CUDA forward compatibility ([`Config::cuda_compat_enabled`]).
    pub cuda_compat: bool,
    /// The opt-in sets asked for (`NVIDIA_GDS=enabled`, ...: [`OptIn`]).
    pub opt_ins: BTreeSet<OptIn>,
}

/// Which IMEX channels a container asked for. There is no "all": upstream's
/// `NVIDIA_IMEX_CHANNELS=all` gives none, and so does ours (docs/COMPAT.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ImexChannels {
    List(Vec<u32>),
}

impl Request {
    /// The request in plain words, as every log line says it: `GPUs 0,2; compute,utility`.
    pub fn summary(&self) -> String {
        let caps: Vec<&str> = self.capabilities.iter().map(|c| c.name()).collect();
        let caps = if caps.is_empty() {
            "no capabilities".to_string()
        } else {
            caps.join(",")
        };
        let mut out = format!("{}; {caps}", self.devices.summary());
        if !self.requirements.is_empty() {
            out += &format!("; requires {}", self.requirements.join(" and "));
        }
        match &self.imex_channels {
            None => {}
            Some(ImexChannels::List(ids)) => {
                let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
                out += &format!("; IMEX channels {}", ids.join(","));
            }
        }
        if !self.opt_ins.is_empty() {
            let names: Vec<&str> = self.opt_ins.iter().map(|o| o.name()).collect();
            out += &format!("; {}", names.join(","));
        }
        out
    }
}

/// The parts of config.json a request depends on.
#[derive(Debug, Clone, Default)]
pub struct ContainerView {
    /// `process.env` entries, `KEY=VALUE`.
    pub env: Vec<String>,
    /// `(source, destination)` of each mount.
    pub mounts: Vec<(PathBuf, PathBuf)>,
    pub privileged: bool,
}

/// The result: a request (or none: not a GPU container) and notes worth logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub request: Option<Request>,
    pub notes: Vec<String>,
}

impl ContainerView {
    /// The view of a config.json: its env, its mounts, whether it is privileged. The one
    /// place both the prestart hook and the shim take it from.
    pub fn of(spec: &oci_spec::runtime::Spec) -> ContainerView {
        ContainerView {
            env: nvct_formats::oci::env(spec),
            mounts: nvct_formats::oci::mounts(spec),
            privileged: nvct_formats::oci::is_privileged(spec),
        }
    }

    /// Last definition wins, as with a Go map built from the list.
    fn get(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find_map(|e| e.strip_prefix(key)?.strip_prefix('='))
    }

    fn get_checked(&self, key: &str) -> Result<Option<&str>, RequestError> {
        match self.get(key) {
            Some(v) if v.contains('\0') => Err(RequestError::NulByte { var: key.into() }),
            other => Ok(other),
        }
    }
}

pub fn resolve(view: &ContainerView, config: &Config) -> Result<Resolved, RequestError> {
    let mut notes = Vec::new();
    let legacy_cuda_image = is_legacy_cuda_image(view)?;

    let from_env = visible_devices_env(view, config, legacy_cuda_image, &mut notes)?;
    let from_mounts = if config.accept_nvidia_visible_devices_as_volume_mounts {
        volume_mount_list(&view.mounts)
    } else {
        None
    };
    let (var, list) = match (&from_mounts, from_env) {
        (Some(m), _) => ("volume mounts", m.as_str()),
        (None, Some(e)) => ("NVIDIA_VISIBLE_DEVICES", e),
        (None, None) => {
            return Ok(Resolved {
                request: None,
                notes,
            })
        }
    };
    let Some(devices) = parse_devices(var, list)? else {
        return Ok(Resolved {
            request: None,
            notes,
        });
    };

    let capabilities = parse_capabilities(
        view.get_checked("NVIDIA_DRIVER_CAPABILITIES")?,
        legacy_cuda_image,
        config,
    )?;
    let requirements = requirements(view, config, legacy_cuda_image)?;
    let mig_config = privileged_devices(view, "NVIDIA_MIG_CONFIG_DEVICES")?;
    let mig_monitor = privileged_devices(view, "NVIDIA_MIG_MONITOR_DEVICES")?;
    let imex_channels = imex_channels(view, config, &mut notes)?;
    Ok(Resolved {
        request: Some(Request {
            devices,
            capabilities,
            requirements,
            mig_config,
            mig_monitor,
            imex_channels,
            cuda_compat: config.cuda_compat_enabled(),
            opt_ins: opt_ins(view),
        }),
        notes,
    })
}

/// Whether the container is a legacy CUDA image: `CUDA_VERSION` without `NVIDIA_REQUIRE_CUDA`
/// (it then asks for all GPUs and capabilities, and `cuda>=<its version>`).
pub fn is_legacy_cuda_image(view: &ContainerView) -> Result<bool, RequestError> {
    Ok(view.get_checked("CUDA_VERSION")?.is_some()
        && view.get_checked("NVIDIA_REQUIRE_CUDA")?.is_none())
}

/// The `NVIDIA_REQUIRE_*` expressions (the last definition of each variable, sorted by name;
/// `NVIDIA_REQUIRE_JETPACK` and empty ones skipped), plus `cuda>=<major.minor>` of a legacy
/// CUDA image; none when `NVIDIA_DISABLE_REQUIRE` is true or the config disables them.
pub fn requirements(
    view: &ContainerView,
    config: &Config,
    legacy_cuda_image: bool,
) -> Result<Vec<String>, RequestError> {
    let mut requirements = Vec::new();
    let disabled = view
        .get_checked("NVIDIA_DISABLE_REQUIRE")?
        .is_some_and(parse_bool);
    if config.disable_require || disabled {
        return Ok(requirements);
    }
    // The last definition of each variable wins; one pass and a sort (an image may carry
    // tens of thousands of entries).
    let mut last: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for entry in view.env.iter().filter(|e| e.starts_with("NVIDIA_REQUIRE_")) {
        last.insert(
            entry.split_once('=').map_or(entry.as_str(), |(k, _)| k),
            entry,
        );
    }
    let mut vars: Vec<&str> = last.into_values().collect();
    vars.sort_unstable();
    for entry in vars {
        let (k, v) = entry.split_once('=').unwrap_or((entry, ""));
        if k.contains("_JETPACK") || v.trim().is_empty() {
            continue;
        }
        if v.contains('\0') {
            return Err(RequestError::NulByte { var: k.into() });
        }
        requirements.push(v.trim().to_string());
    }
    if legacy_cuda_image {
        if let Some(mm) = view.get("CUDA_VERSION").and_then(major_minor) {
            requirements.push(format!("cuda>={mm}"));
        }
    }
    Ok(requirements)
}

/// A device list only a privileged container may set (`NVIDIA_MIG_CONFIG_DEVICES`,
/// `NVIDIA_MIG_MONITOR_DEVICES`): unset or empty asks for nothing (privileged or not, as
/// upstream); set by an unprivileged container, it is refused.
pub fn privileged_devices(
    view: &ContainerView,
    var: &str,
) -> Result<Option<Devices>, RequestError> {
    match view.get_checked(var)? {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(_) if !view.privileged => Err(RequestError::NeedsPrivilege { var: var.into() }),
        Some(v) => parse_devices(var, v),
    }
}

/// The opt-in sets whose variable is exactly `enabled`, as upstream compares it.
pub fn opt_ins(view: &ContainerView) -> BTreeSet<OptIn> {
    OptIn::ALL
        .into_iter()
        .filter(|o| view.get(o.env()) == Some("enabled"))
        .collect()
}

/// `NVIDIA_IMEX_CHANNELS` (a comma list of channel numbers; empty, `none` and `void` ask for
/// none, and so does `all`, as upstream's: a channel is a grant, named one by one), under the same rule for unprivileged containers as `NVIDIA_VISIBLE_DEVICES`;
/// nothing when `features.ignore-imex-channel-requests` is set.
pub fn imex_channels(
    view: &ContainerView,
    config: &Config,
    notes: &mut Vec<String>,
) -> Result<Option<ImexChannels>, RequestError> {
    const VAR: &str = "NVIDIA_IMEX_CHANNELS";
    if config.accept_nvidia_visible_devices_as_volume_mounts
        && !config.features.ignore_imex_channel_requests
    {
        // The device plugin's volume-mounts strategy: /dev/null at .../imex/<channel>.
        let mut ids: Vec<u32> = view
            .mounts
            .iter()
            .filter(|(src, _)| src.as_os_str() == "/dev/null")
            .filter_map(|(_, dst)| {
                dst.strip_prefix(Path::new(VOLUME_MOUNT_DIR).join("imex"))
                    .ok()
            })
            .filter_map(|rest| channel_number(rest.to_str()?))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if !ids.is_empty() {
            return Ok(Some(ImexChannels::List(ids)));
        }
    }
    let Some(value) = view.get_checked(VAR)? else {
        return Ok(None);
    };
    let value = value.trim();
    if matches!(value, "" | "none" | "void") {
        return Ok(None);
    }
    if config.features.ignore_imex_channel_requests {
        notes.push(format!(
            "{VAR} ignored (features.ignore-imex-channel-requests)"
        ));
        return Ok(None);
    }
    if !view.privileged && !config.accept_nvidia_visible_devices_envvar_when_unprivileged {
        notes.push(format!(
            "{VAR} of an unprivileged container ignored \
             (accept-nvidia-visible-devices-envvar-when-unprivileged = false)"
        ));
        return Ok(None);
    }
    if value == "all" {
        notes.push(format!(
            "{VAR}=all gives no IMEX channel (as upstream's); name the channels, e.g. {VAR}=0,1"
        ));
        return Ok(None);
    }
    let parts: Vec<&str> = value.split(',').map(str::trim).collect();
    if parts.len() > MAX_DEVICE_IDS {
        return Err(RequestError::TooManyIds {
            var: VAR.into(),
            count: parts.len(),
        });
    }
    let mut ids = Vec::new();
    for p in parts {
        let id = channel_number(p).ok_or_else(|| RequestError::BadValue {
            var: VAR.into(),
            value: value.into(),
            why: format!("{p:?} is not a channel number (expected numbers like 0,1)"),
        })?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(Some(ImexChannels::List(ids)))
}

/// An IMEX channel number: ASCII digits only (`+5`, ` 5`, `5x` are none).
fn channel_number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `NVIDIA_VISIBLE_DEVICES` (or a `swarm-resource` variable) as the toolkit may read it: NUL
/// bytes refused, `all` for a legacy
/// CUDA image that does not set it (when `legacy_default`), and nothing for an unprivileged
/// container when `accept-nvidia-visible-devices-envvar-when-unprivileged = false` (with a
/// note). The one reader of the variable, for the legacy request and the shim's CDI names.
pub fn visible_devices_env<'a>(
    view: &'a ContainerView,
    config: &Config,
    legacy_default: bool,
    notes: &mut Vec<String>,
) -> Result<Option<&'a str>, RequestError> {
    // `swarm-resource`: Docker Swarm's generic-resource variables (comma-separated names) are
    // read instead of NVIDIA_VISIBLE_DEVICES when the container has one of them (upstream).
    let mut from_swarm = None;
    for name in config
        .swarm_resource
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        if let Some(v) = view.get_checked(name)? {
            from_swarm = Some(v);
            break;
        }
    }
    let value = match from_swarm.or(view.get_checked("NVIDIA_VISIBLE_DEVICES")?) {
        None if legacy_default => Some("all"),
        other => other,
    };
    if value.is_some()
        && !view.privileged
        && !config.accept_nvidia_visible_devices_envvar_when_unprivileged
    {
        notes.push(
            "ignoring NVIDIA_VISIBLE_DEVICES of an unprivileged container \
                    (accept-nvidia-visible-devices-envvar-when-unprivileged = false)"
                .into(),
        );
        return Ok(None);
    }
    Ok(value)
}

/// The comma-separated entries of a device list, trimmed, empty ones dropped, at most
/// [`MAX_DEVICE_IDS`].
pub fn list_items<'a>(var: &str, value: &'a str) -> Result<Vec<&'a str>, RequestError> {
    let items: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.len() > MAX_DEVICE_IDS {
        return Err(RequestError::TooManyIds {
            var: var.into(),
            count: items.len(),
        });
    }
    Ok(items)
}

/// Go's `strconv.ParseBool` true values (what upstream accepts for `NVIDIA_DISABLE_REQUIRE`).
fn parse_bool(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// `None` means "not a GPU container" (empty or `void`).
pub fn parse_devices(var: &str, value: &str) -> Result<Option<Devices>, RequestError> {
    let items = list_items(var, value)?;
    if items.is_empty() || items.contains(&"void") {
        return Ok(None);
    }
    if items.contains(&"all") {
        return Ok(Some(Devices::All));
    }
    if items.contains(&"none") {
        return Ok(Some(Devices::None));
    }
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let id = DeviceId::parse(item).ok_or_else(|| RequestError::BadValue {
            var: var.into(),
            value: item.into(),
            why: "not a device id (expected an index like 0, a MIG index like 0:1, a GPU-/MIG- UUID, \
                  a PCI bus id like 0000:3b:00.0, or one of all, none, void)"
                .into(),
        })?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(Some(Devices::List(ids)))
}

fn volume_mount_list(mounts: &[(PathBuf, PathBuf)]) -> Option<String> {
    let ids: Vec<String> = mounts
        .iter()
        .filter(|(src, _)| src.as_os_str() == "/dev/null")
        .filter_map(|(_, dst)| dst.strip_prefix(VOLUME_MOUNT_DIR).ok())
        .filter_map(|rest| rest.to_str().map(str::to_string))
        .filter(|rest| !rest.is_empty() && !rest.contains('/'))
        .collect();
    (!ids.is_empty()).then(|| ids.join(","))
}

fn parse_capabilities(
    value: Option<&str>,
    legacy_cuda_image: bool,
    config: &Config,
) -> Result<BTreeSet<Capability>, RequestError> {
    let mut supported: BTreeSet<&str> = config
        .supported_driver_capabilities
        .split(',')
        .map(str::trim)
        .collect();
    if supported.contains("all") {
        // `supported-driver-capabilities = "all"` means every capability (upstream).
        supported.extend(Capability::ALL.iter().map(|c| c.name()));
    }
    let value = match value.map(str::trim) {
        None | Some("") if legacy_cuda_image => "all",
        None | Some("") => "utility,compute",
        Some(v) => v,
    };
    let mut caps = BTreeSet::new();
    for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if name == "all" {
            caps.extend(
                Capability::ALL
                    .into_iter()
                    .filter(|c| supported.contains(c.name())),
            );
            continue;
        }
        let cap = Capability::from_name(name)
            .ok_or_else(|| RequestError::UnknownCapability(name.into()))?;
        if !supported.contains(name) {
            return Err(RequestError::UnsupportedCapability(name.into()));
        }
        caps.insert(cap);
    }
    Ok(caps)
}

fn major_minor(version: &str) -> Option<String> {
    let mut parts = version.split('.');
    let (major, minor) = (parts.next()?, parts.next().unwrap_or("0"));
    (major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok())
        .then(|| format!("{major}.{minor}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Capability::*;

    fn view(env: &[&str]) -> ContainerView {
        ContainerView {
            env: env.iter().map(|s| s.to_string()).collect(),
            mounts: vec![],
            privileged: false,
        }
    }

    use crate::fixtures::request as req;

    #[test]
    fn upstream_config_spellings() {
        let all_supported = Config {
            supported_driver_capabilities: "all".into(),
            ..Config::default()
        };
        let r = resolve(
            &view(&[
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_DRIVER_CAPABILITIES=video,utility",
            ]),
            &all_supported,
        )
        .unwrap();
        assert_eq!(
            r.request.unwrap().capabilities,
            [Utility, Video].into(),
            "supported-driver-capabilities = all"
        );
        let r = resolve(
            &view(&[
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_MIG_CONFIG_DEVICES=",
                "NVIDIA_MIG_MONITOR_DEVICES= ",
            ]),
            &Config::default(),
        );
        assert_eq!(
            r.unwrap().request.unwrap().mig_config,
            None,
            "empty MIG values in an unprivileged container ask for nothing"
        );
        let swarm = Config {
            swarm_resource: "DOCKER_RESOURCE_GPU,DOCKER_RESOURCE_GPU2".into(),
            ..Config::default()
        };
        let r = resolve(
            &view(&["NVIDIA_VISIBLE_DEVICES=0", "DOCKER_RESOURCE_GPU2=3"]),
            &swarm,
        )
        .unwrap();
        assert_eq!(
            r.request.unwrap().devices,
            Devices::List(vec![DeviceId::Index(3)]),
            "swarm-resource wins over NVIDIA_VISIBLE_DEVICES"
        );
        let r = resolve(&view(&["NVIDIA_VISIBLE_DEVICES=0"]), &swarm).unwrap();
        assert_eq!(
            r.request.unwrap().devices,
            Devices::List(vec![DeviceId::Index(0)]),
            "no swarm variable: NVIDIA_VISIBLE_DEVICES"
        );
    }

    #[test]
    fn summary_cases() {
        let ids = Devices::List;
        let cases = [
            (
                "two GPUs",
                req(
                    ids(vec![DeviceId::Index(0), DeviceId::Index(2)]),
                    &[Compute, Utility],
                ),
                "GPUs 0,2; compute,utility",
            ),
            ("all", req(Devices::All, &[Utility]), "all GPUs; utility"),
            (
                "none",
                req(Devices::None, &[Utility]),
                "no GPU (driver files only); utility",
            ),
            (
                "uuid and MIG",
                req(
                    ids(vec![
                        DeviceId::Uuid("GPU-1".into()),
                        DeviceId::MigIndex(1, 0),
                    ]),
                    &[],
                ),
                "GPUs GPU-1,1:0; no capabilities",
            ),
            (
                "requirements",
                Request {
                    requirements: vec!["cuda>=12.0".into()],
                    ..req(Devices::All, &[Compute])
                },
                "all GPUs; compute; requires cuda>=12.0",
            ),
        ];
        for (name, r, want) in cases {
            assert_eq!(r.summary(), want, "case {name}");
        }
    }

    #[test]
    fn resolve_cases() {
        let all_caps = [Compute, Compat32, Display, Graphics, Ngx, Utility, Video];
        let ids = |v: Vec<DeviceId>| Devices::List(v);
        let cases: Vec<(&str, Vec<&str>, Result<Option<Request>, RequestError>)> = vec![
            ("unset", vec![], Ok(None)),
            ("empty", vec!["NVIDIA_VISIBLE_DEVICES="], Ok(None)),
            ("void", vec!["NVIDIA_VISIBLE_DEVICES=void"], Ok(None)),
            ("none", vec!["NVIDIA_VISIBLE_DEVICES=none"], Ok(Some(req(Devices::None, &[Compute, Utility])))),
            ("all", vec!["NVIDIA_VISIBLE_DEVICES=all"], Ok(Some(req(Devices::All, &[Compute, Utility])))),
            ("indices trimmed", vec!["NVIDIA_VISIBLE_DEVICES= 0, 2 ,"],
                Ok(Some(req(ids(vec![DeviceId::Index(0), DeviceId::Index(2)]), &[Compute, Utility])))),
            ("duplicates dropped", vec!["NVIDIA_VISIBLE_DEVICES=1,1"],
                Ok(Some(req(ids(vec![DeviceId::Index(1)]), &[Compute, Utility])))),
            ("mixed ids", vec!["NVIDIA_VISIBLE_DEVICES=GPU-abc,0:1,00000000:3B:00.0,MIG-x"],
                Ok(Some(req(ids(vec![
                    DeviceId::Uuid("GPU-abc".into()), DeviceId::MigIndex(0, 1),
                    DeviceId::BusId("0000:3b:00.0".into()), DeviceId::Uuid("MIG-x".into())]), &[Compute, Utility])))),
            ("last definition wins", vec!["NVIDIA_VISIBLE_DEVICES=1", "NVIDIA_VISIBLE_DEVICES=void"], Ok(None)),
            ("garbage id", vec!["NVIDIA_VISIBLE_DEVICES=0,gpu0"], Err(RequestError::BadValue {
                var: "NVIDIA_VISIBLE_DEVICES".into(), value: "gpu0".into(),
                why: "not a device id (expected an index like 0, a MIG index like 0:1, a GPU-/MIG- UUID, a PCI bus id like 0000:3b:00.0, or one of all, none, void)".into() })),
            ("nul byte", vec!["NVIDIA_VISIBLE_DEVICES=0\u{0}1"], Err(RequestError::NulByte { var: "NVIDIA_VISIBLE_DEVICES".into() })),
            ("legacy cuda image", vec!["CUDA_VERSION=11.8.0"],
                Ok(Some(Request { requirements: vec!["cuda>=11.8".into()], ..req(Devices::All, &all_caps) }))),
            ("modern cuda image without devices", vec!["CUDA_VERSION=12.4.0", "NVIDIA_REQUIRE_CUDA=cuda>=12.4"], Ok(None)),
            ("requirements collected", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=cuda>=12.0 brand=tesla", "NVIDIA_REQUIRE_JETPACK=csv"],
                Ok(Some(Request { requirements: vec!["cuda>=12.0 brand=tesla".into()], ..req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility]) }))),
            ("requirements disabled", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=true"],
                Ok(Some(req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility])))),
            ("requirements disabled by 1 (Go ParseBool)", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=1"],
                Ok(Some(req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility])))),
            ("requirements disabled by TRUE", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=TRUE"],
                Ok(Some(req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility])))),
            ("yes is not a Go bool", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_DISABLE_REQUIRE=yes"],
                Ok(Some(Request { requirements: vec!["cuda>=99".into()], ..req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility]) }))),
            ("last definition of a requirement wins", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_REQUIRE_CUDA=cuda>=11"],
                Ok(Some(Request { requirements: vec!["cuda>=11".into()], ..req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility]) }))),
            ("capabilities", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility"],
                Ok(Some(req(ids(vec![DeviceId::Index(0)]), &[Utility])))),
            ("capabilities all", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=all"],
                Ok(Some(req(ids(vec![DeviceId::Index(0)]), &all_caps)))),
            ("unknown capability", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=compute,teleport"],
                Err(RequestError::UnknownCapability("teleport".into()))),
            ("the common graphics line", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=graphics,compat32,utility"],
                Ok(Some(req(ids(vec![DeviceId::Index(0)]), &[Compat32, Graphics, Utility])))),
            ("mig config unprivileged", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_MIG_CONFIG_DEVICES=all"],
                Err(RequestError::NeedsPrivilege { var: "NVIDIA_MIG_CONFIG_DEVICES".into() })),
            ("imex channels", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS= 1, 0 ,1"],
                Ok(Some(Request { imex_channels: Some(ImexChannels::List(vec![1, 0])), ..req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility]) }))),
            ("all imex channels: none, as upstream's", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=all"],
                Ok(Some(Request { imex_channels: None, ..req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility]) }))),
            ("no imex channel", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=none"],
                Ok(Some(req(ids(vec![DeviceId::Index(0)]), &[Compute, Utility])))),
            ("bad imex channel", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=0,x"], Err(RequestError::BadValue {
                var: "NVIDIA_IMEX_CHANNELS".into(), value: "0,x".into(),
                why: "\"x\" is not a channel number (expected numbers like 0,1)".into() })),
            ("signed imex channel", vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_IMEX_CHANNELS=+5"], Err(RequestError::BadValue {
                var: "NVIDIA_IMEX_CHANNELS".into(), value: "+5".into(),
                why: "\"+5\" is not a channel number (expected numbers like 0,1)".into() })),
        ];
        let config = Config::default();
        for (name, env, want) in cases {
            let got = resolve(&view(&env), &config).map(|r| r.request);
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn policy_cases() {
        let mut config = Config {
            accept_nvidia_visible_devices_envvar_when_unprivileged: false,
            ..Config::default()
        };
        let v = view(&["NVIDIA_VISIBLE_DEVICES=0"]);
        let r = resolve(&v, &config).unwrap();
        assert_eq!(r.request, None, "unprivileged env request ignored");
        assert_eq!(r.notes.len(), 1);
        let privileged = ContainerView {
            privileged: true,
            ..v.clone()
        };
        assert!(
            resolve(&privileged, &config).unwrap().request.is_some(),
            "privileged env request honoured"
        );

        config.accept_nvidia_visible_devices_as_volume_mounts = true;
        let mounted = ContainerView {
            mounts: vec![
                (
                    "/dev/null".into(),
                    "/var/run/nvidia-container-devices/GPU-1".into(),
                ),
                (
                    "/dev/null".into(),
                    "/var/run/nvidia-container-devices/3".into(),
                ),
                (
                    "/etc/x".into(),
                    "/var/run/nvidia-container-devices/4".into(),
                ),
            ],
            ..v
        };
        let r = resolve(&mounted, &config).unwrap().request.unwrap();
        assert_eq!(
            r.devices,
            Devices::List(vec![DeviceId::Uuid("GPU-1".into()), DeviceId::Index(3)])
        );
        // IMEX channels follow the env policy, and the feature switch turns them off.
        let imex = ContainerView {
            env: vec![
                "NVIDIA_VISIBLE_DEVICES=0".into(),
                "NVIDIA_IMEX_CHANNELS=0".into(),
            ],
            ..mounted
        };
        let r = resolve(&imex, &config).unwrap();
        assert_eq!(
            r.request.unwrap().imex_channels,
            None,
            "unprivileged: {:?}",
            r.notes
        );
        let privileged = ContainerView {
            privileged: true,
            ..imex.clone()
        };
        assert_eq!(
            resolve(&privileged, &config)
                .unwrap()
                .request
                .unwrap()
                .imex_channels,
            Some(ImexChannels::List(vec![0]))
        );
        // By volume mount (the device plugin's volume-mounts strategy), unprivileged too.
        let mounted_imex = ContainerView {
            mounts: vec![(
                "/dev/null".into(),
                "/var/run/nvidia-container-devices/imex/1".into(),
            )],
            ..imex.clone()
        };
        assert_eq!(
            resolve(&mounted_imex, &config)
                .unwrap()
                .request
                .map(|r| r.imex_channels),
            None,
            "no GPU by mount or allowed env: no request at all"
        );
        let mounted_both = ContainerView {
            mounts: vec![
                (
                    "/dev/null".into(),
                    "/var/run/nvidia-container-devices/0".into(),
                ),
                (
                    "/dev/null".into(),
                    "/var/run/nvidia-container-devices/imex/1".into(),
                ),
            ],
            ..imex.clone()
        };
        assert_eq!(
            resolve(&mounted_both, &config)
                .unwrap()
                .request
                .unwrap()
                .imex_channels,
            Some(ImexChannels::List(vec![1]))
        );
        // Volume-mount ids are digits only: `+5` (which u32's parser takes) asks for nothing.
        for (dir, want) in [
            ("imex/+5", None),
            ("imex/05", Some(vec![5])),
            ("imex/5x", None),
        ] {
            let mounted = ContainerView {
                mounts: vec![
                    (
                        "/dev/null".into(),
                        "/var/run/nvidia-container-devices/0".into(),
                    ),
                    (
                        "/dev/null".into(),
                        Path::new("/var/run/nvidia-container-devices").join(dir),
                    ),
                ],
                env: vec!["NVIDIA_VISIBLE_DEVICES=void".into()],
                ..imex.clone()
            };
            let got = resolve(&mounted, &config).unwrap().request.unwrap();
            assert_eq!(got.imex_channels, want.map(ImexChannels::List), "{dir}");
        }
        config.features.ignore_imex_channel_requests = true;
        assert_eq!(
            resolve(&privileged, &config)
                .unwrap()
                .request
                .unwrap()
                .imex_channels,
            None
        );
    }

    #[test]
    fn huge_and_hostile_lists() {
        let many = (0..100_000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            parse_devices("NVIDIA_VISIBLE_DEVICES", &many),
            Err(RequestError::TooManyIds {
                var: "NVIDIA_VISIBLE_DEVICES".into(),
                count: 100_000
            })
        );
        for bad in ["../../etc", "0:x", "GPU-", "1:2:3:4", "zz:00.0", "-1"] {
            assert!(parse_devices("V", bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn bus_ids() {
        for (input, want) in [
            ("00000000:3B:00.0", Some("0000:3b:00.0")),
            ("0000:3b:00.0", Some("0000:3b:00.0")),
            ("3b:00.0", Some("0000:3b:00.0")),
            ("1:2:3.4", Some("0001:02:03.4")),
            ("0000:3b:00", None),
            ("123456789:3b:00.0", None),
        ] {
            assert_eq!(normalize_bus_id(input).as_deref(), want, "{input}");
        }
    }
}
