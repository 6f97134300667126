//! PURE: (Inventory, [`Options`]) → CDI [`Spec`], computed from the same [`plan::plan`] as the
//! prestart hook. One plan per device (its node(s): `/dev/nvidiaN`, plus the MIG capability
//! nodes of a MIG device) and one spec-level plan (`Devices::None` with every requested
//! capability: control nodes, libraries, binaries, firmware, IPC) whose edits every device
//! shares. Libraries keep their driver-root path in the container (the image layout is not
//! known when a spec is written), and the spec carries hooks to make their links and refresh
//! the ld cache. Same input → same bytes: nothing here reads the clock, the host or a map with
//! random order.

use nvct_cdi::name::{self, NameError};
use nvct_cdi::spec::{ContainerEdits, Device, DeviceNode, Spec};
use nvct_cdi::version;
use nvct_model::{Gpu, Inventory, MigDevice};
use nvct_plan::request::{Capability, DeviceId, Devices, Request};
use nvct_plan::{self as plan, FileMount, Layout, PlanError};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use crate::cdi_edits::LIBCUDA_DIR_ENV;
use crate::cdi_edits::{self, link_hook, mount, node, HookOptions};
pub use nvct_container::edits::{HookKind, APPLY_EDITS, DEFAULT_PROC_ROOT, UPSTREAM_ONLY_HOOKS};

pub const DEFAULT_VENDOR: &str = "nvidia.com";
pub const DEFAULT_CLASS: &str = "gpu";
pub const DEFAULT_HOOK_PATH: &str = "/usr/bin/nvidia-cdi-hook";

/// How a device is named in the spec (`--device-name-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NameStrategy {
    /// `0`, `1:0` for MIG device 0 of GPU 1.
    Index,
    /// `GPU-…`, `MIG-…`.
    Uuid,
    /// `gpu0`, `mig1:0`.
    TypeIndex,
}

impl NameStrategy {
    pub fn parse(s: &str) -> Option<NameStrategy> {
        match s {
            "index" => Some(NameStrategy::Index),
            "uuid" => Some(NameStrategy::Uuid),
            "type-index" => Some(NameStrategy::TypeIndex),
            _ => None,
        }
    }
}

/// Typed options of `cdi generate` (the CLI resolves its flags into this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub vendor: String,
    pub class: String,
    /// In the order given; duplicates are ignored.
    pub strategies: Vec<NameStrategy>,
    pub hook_path: String,
    /// Passed to `update-ldcache --ldconfig-path` when set.
    pub ldconfig_path: Option<String>,
    /// Where the host's `driver/nvidia` files are read; passed to
    /// `disable-device-node-modification --proc-root` when it is not [`DEFAULT_PROC_ROOT`].
    pub proc_root: PathBuf,
    pub disabled_hooks: BTreeSet<HookKind>,
    /// Which GPUs / MIG devices get an entry: `All` or a list of ids.
    pub devices: Devices,
    pub capabilities: BTreeSet<Capability>,
    /// Leave out the `all` device (`--no-all-device`).
    pub no_all_device: bool,
    /// One `apply-edits` hook that does every hook's work in one process (the default: saves a
    /// process start per hook), instead of one hook per edit with upstream's names (`cdi
    /// generate --separate-hooks`, for upstream's nvidia-cdi-hook).
    pub one_hook: bool,
    /// What the spec describes: the GPUs, or the IMEX channels (`--mode imex`).
    pub mode: SpecMode,
    /// Leave out the IPC sockets (upstream's `disable-ipc-discoverer` feature flag).
    pub no_ipc: bool,
}

/// The devices of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpecMode {
    #[default]
    Gpus,
    /// One device per `/dev/nvidia-caps-imex-channels/channelN` (named `N`), as upstream's
    /// `--mode imex` (kind `nvidia.com/imex-channel`); no common edits.
    ImexChannels,
    /// An opt-in set as its one device `all` (kind `nvidia.com/<set>`), as upstream's gated
    /// modes (`--mode gds`, `mofed`, `gdrcopy`, `nvswitch`).
    OptIn(nvct_model::optin::OptIn),
    /// For management containers (monitoring agents, DCGM), as upstream's `--mode management`
    /// (kind `management.nvidia.com/gpu`): the GPU spec's common edits, and one device `all`
    /// with every NVIDIA device node (not the GDS, NVSwitch or NVLink ones).
    Management,
}

/// The vendor of upstream's management specs.
pub const MANAGEMENT_VENDOR: &str = "management.nvidia.com";

/// The class of upstream's IMEX channel specs (`nvidia.com/imex-channel=N`).
pub const IMEX_CLASS: &str = "imex-channel";

impl Options {
    /// How the spec's hooks are written.
    pub fn hook_options(&self) -> HookOptions {
        HookOptions {
            hook_path: self.hook_path.clone(),
            ldconfig_path: self.ldconfig_path.clone(),
            proc_root: self.proc_root.clone(),
            disabled: self.disabled_hooks.clone(),
            one_hook: self.one_hook,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            vendor: DEFAULT_VENDOR.into(),
            class: DEFAULT_CLASS.into(),
            strategies: vec![NameStrategy::Index, NameStrategy::Uuid],
            hook_path: DEFAULT_HOOK_PATH.into(),
            ldconfig_path: None,
            proc_root: DEFAULT_PROC_ROOT.into(),
            disabled_hooks: HookKind::default_disabled(false),
            devices: Devices::All,
            // As upstream's `cdi generate`: no 32-bit libraries (its specs carry the ld cache's
            // 64-bit entries only).
            capabilities: Capability::ALL
                .into_iter()
                .filter(|c| *c != Capability::Compat32)
                .collect(),
            no_all_device: false,
            one_hook: true,
            mode: SpecMode::Gpus,
            no_ipc: false,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GenerateError {
    #[error("--vendor/--class: {0}")]
    Kind(NameError),
    #[error("device {device}: {source}")]
    Name { device: String, source: NameError },
    #[error("planning device {device}: {source}")]
    Plan { device: String, source: PlanError },
    #[error("planning the spec-level edits: {0}")]
    SpecPlan(PlanError),
    #[error("--device-id {id:?} matches no GPU or MIG device on this host ({count} GPU(s))")]
    UnknownDevice { id: String, count: usize },
    #[error("no naming strategy given (index, uuid or type-index)")]
    NoStrategy,
    #[error("no NVIDIA GPUs found on this host: a spec would have only devices without edits, which \
             podman and containerd refuse; is the driver loaded and nvidia-container-cli.root right?")]
    NoGpus,
    #[error("--device-id {id:?} matches no IMEX channel on this host ({count} under /dev/nvidia-caps-imex-channels)")]
    UnknownChannel { id: String, count: usize },
    #[error("no IMEX channels found under /dev/nvidia-caps-imex-channels of the dev root: create              them (the IMEX daemon's nvidia-caps-imex-channels, or `mknod` with the major from              /proc/devices), or leave out --mode imex")]
    NoImexChannels,
    #[error(
        "no {set} device nodes found under the dev root ({env}=enabled would give a container \
             nothing): is the {set} driver loaded?"
    )]
    NoOptInNodes {
        set: &'static str,
        env: &'static str,
    },
}

/// One GPU or MIG device that gets entries in the spec.
struct Target<'a> {
    gpu: &'a Gpu,
    mig: Option<&'a MigDevice>,
}

impl Target<'_> {
    fn id(&self) -> DeviceId {
        match self.mig {
            None => DeviceId::Index(self.gpu.index),
            Some(m) => DeviceId::MigIndex(self.gpu.index, m.index),
        }
    }

    fn name(&self, strategy: NameStrategy) -> String {
        match (strategy, self.mig) {
            (NameStrategy::Index, None) => self.gpu.index.to_string(),
            (NameStrategy::Index, Some(m)) => format!("{}:{}", self.gpu.index, m.index),
            (NameStrategy::Uuid, None) => self.gpu.uuid.clone(),
            (NameStrategy::Uuid, Some(m)) => m.uuid.clone(),
            (NameStrategy::TypeIndex, None) => format!("gpu{}", self.gpu.index),
            (NameStrategy::TypeIndex, Some(m)) => format!("mig{}:{}", self.gpu.index, m.index),
        }
    }

    fn matches(&self, id: &DeviceId) -> bool {
        match (id, self.mig) {
            (DeviceId::Index(i), None) => self.gpu.index == *i,
            (DeviceId::BusId(b), None) => &self.gpu.bus_id == b,
            (DeviceId::Uuid(u), None) => &self.gpu.uuid == u,
            (DeviceId::Uuid(u), Some(m)) => &m.uuid == u,
            (DeviceId::MigIndex(g, i), Some(m)) => self.gpu.index == *g && m.index == *i,
            _ => false,
        }
    }
}

fn targets<'a>(inv: &'a Inventory, devices: &Devices) -> Result<Vec<Target<'a>>, GenerateError> {
    let every: Vec<Target<'a>> = inv
        .gpus
        .iter()
        .flat_map(|gpu| {
            let migs = gpu
                .migs
                .iter()
                .filter(|_| gpu.mig_enabled)
                .map(move |m| Target { gpu, mig: Some(m) });
            std::iter::once(Target { gpu, mig: None }).chain(migs)
        })
        .collect();
    match devices {
        // A GPU in MIG mode is not itself a device of the whole spec (upstream's lists only its
        // MIG devices): a container given it would get the whole GPU past its partitions. A
        // `--device-id` naming it still gets it, as upstream's.
        Devices::All => Ok(every
            .into_iter()
            .filter(|t| t.mig.is_some() || !t.gpu.mig_enabled)
            .collect()),
        Devices::None => Ok(vec![]),
        Devices::List(ids) => {
            for id in ids {
                if !every.iter().any(|t| t.matches(id)) {
                    return Err(GenerateError::UnknownDevice {
                        id: id.to_string(),
                        count: inv.gpus.len(),
                    });
                }
            }
            Ok(every
                .into_iter()
                .filter(|t| ids.iter().any(|id| t.matches(id)))
                .collect())
        }
    }
}

fn request(devices: Devices, capabilities: BTreeSet<Capability>, cuda_compat: bool) -> Request {
    Request {
        devices,
        capabilities,
        requirements: vec![],
        mig_config: None,
        mig_monitor: None,
        imex_channels: None,
        cuda_compat,
        opt_ins: Default::default(),
    }
}

/// The spec for `inv`. Fails on a bad kind or name, an unknown `--device-id`, or a plan error
/// (e.g. a GPU whose `/dev/nvidiaN` is missing), naming the device.
pub fn generate(inv: &Inventory, opts: &Options) -> Result<Spec, GenerateError> {
    let kind = format!("{}/{}", opts.vendor, opts.class);
    name::parse_kind(&kind).map_err(GenerateError::Kind)?;
    match opts.mode {
        SpecMode::ImexChannels => return imex_channels(inv, opts, kind),
        SpecMode::OptIn(set) => return opt_in(inv, set, kind),
        SpecMode::Management => return management(inv, opts),
        SpecMode::Gpus => {}
    }
    let mut strategies: Vec<NameStrategy> = Vec::new();
    for s in &opts.strategies {
        if !strategies.contains(s) {
            strategies.push(*s);
        }
    }
    if strategies.is_empty() {
        return Err(GenerateError::NoStrategy);
    }
    let layout = Layout::UNKNOWN;

    let cuda_compat = !opts.disabled_hooks.contains(&HookKind::EnableCudaCompat);
    let hook_opts = opts.hook_options();
    let shared = plan::plan(
        &request(Devices::None, opts.capabilities.clone(), cuda_compat),
        inv,
        &layout,
    )
    .map_err(GenerateError::SpecPlan)?;
    let shared_nodes: Vec<&nvct_model::DeviceNode> = shared.device_nodes.iter().collect();

    let mut devices = Vec::new();
    // Sets: every GPU's nodes and links, once each and sorted, for `all` (a 64-GPU node has
    // about 200 of them).
    let mut all_nodes: BTreeSet<nvct_model::DeviceNode> = BTreeSet::new();
    let mut all_links: BTreeSet<plan::Symlink> = BTreeSet::new();
    // A GPU's DRM nodes (and their /dev/dri/by-path links) are its own, as upstream's specs
    // have them: planned per device with graphics when the spec is for graphics or display.
    let device_caps: BTreeSet<Capability> = if opts.capabilities.contains(&Capability::Graphics)
        || opts.capabilities.contains(&Capability::Display)
    {
        [Capability::Graphics].into()
    } else {
        BTreeSet::new()
    };
    let targets = targets(inv, &opts.devices)?;
    if targets.is_empty() {
        return Err(GenerateError::NoGpus);
    }
    // A device's own edits are its nodes and DRM links, as upstream's: its plans need no
    // driver files and no /proc mask (a 64-GPU node plans 128 devices).
    let devices_only = Inventory {
        files: Vec::new(),
        proc_driver: None,
        ..inv.clone()
    };
    for target in targets {
        let id = target.id();
        let p = plan::plan(
            &request(Devices::List(vec![id.clone()]), device_caps.clone(), false),
            &devices_only,
            &layout,
        )
        .map_err(|source| GenerateError::Plan {
            device: id.to_string(),
            source,
        })?;
        let own: Vec<nvct_model::DeviceNode> = p
            .device_nodes
            .into_iter()
            .filter(|n| !shared_nodes.contains(&n))
            .collect();
        all_nodes.extend(own.iter().cloned());
        // Only the device's own links (the DRM by-path ones): its plan has no libraries.
        let links: Vec<plan::Symlink> = p
            .symlinks
            .into_iter()
            .filter(|l| !shared.symlinks.contains(l))
            .collect();
        all_links.extend(links.iter().cloned());
        for s in &strategies {
            let name = target.name(*s);
            name::validate_device_name(&name).map_err(|source| GenerateError::Name {
                device: id.to_string(),
                source,
            })?;
            let container_edits = ContainerEdits {
                device_nodes: own.iter().map(node).collect(),
                hooks: link_hook(&hook_opts, &links).into_iter().collect(),
                ..Default::default()
            };
            devices.push(Device {
                name,
                container_edits,
            });
        }
    }
    if !opts.no_all_device {
        let all_links: Vec<plan::Symlink> = all_links.into_iter().collect();
        devices.push(Device {
            name: "all".into(),
            container_edits: ContainerEdits {
                device_nodes: all_nodes.iter().map(node).collect(),
                hooks: link_hook(&hook_opts, &all_links).into_iter().collect(),
                ..Default::default()
            },
        });
    }

    let container_edits = cdi_edits::container_edits(
        &hook_opts,
        &shared,
        &["NVIDIA_VISIBLE_DEVICES=void".to_string()],
        opts.no_ipc,
    );
    let mut spec = Spec {
        cdi_version: String::new(),
        kind,
        devices,
        container_edits,
    };
    spec.cdi_version = version::minimum(&spec).to_string();
    Ok(spec)
}

/// The management spec: the common edits of the GPU spec, and `all` with every NVIDIA node
/// not already in them (upstream leaves out `nvidia-fs*`, `nvidia-nvswitch*`,
/// `nvidia-nvlink*`).
fn management(inv: &Inventory, opts: &Options) -> Result<Spec, GenerateError> {
    let gpus = Options {
        mode: SpecMode::Gpus,
        no_all_device: true,
        ..opts.clone()
    };
    let mut spec = generate(inv, &gpus)?;
    let common: Vec<&str> = spec
        .container_edits
        .device_nodes
        .iter()
        .map(|n| n.path.as_str())
        .collect();
    let blocked = ["nvidia-fs", "nvidia-nvswitch", "nvidia-nvlink"];
    let nodes: Vec<DeviceNode> = inv
        .nodes
        .iter()
        .filter(|n| {
            let name = n.path.file_name().and_then(|f| f.to_str()).unwrap_or("");
            let nvidia = n.path.starts_with("/dev/nvidia-caps")
                || n.path.starts_with(nvct_model::tables::IMEX_CHANNEL_DIR)
                || (n.path.parent() == Some(Path::new("/dev")) && name.starts_with("nvidia"));
            nvidia
                && !blocked.iter().any(|b| name.starts_with(b))
                && !common.contains(&n.path.to_string_lossy().as_ref())
        })
        .map(node)
        .collect();
    spec.devices = vec![Device {
        name: "all".into(),
        container_edits: ContainerEdits {
            device_nodes: nodes,
            ..Default::default()
        },
    }];
    spec.cdi_version = version::minimum(&spec).to_string();
    Ok(spec)
}

/// The spec of an opt-in set: its device `all` with the set's nodes and files
/// ([`nvct_plan::policy::opt_in_select`]).
fn opt_in(
    inv: &Inventory,
    set: nvct_model::optin::OptIn,
    kind: String,
) -> Result<Spec, GenerateError> {
    let container_edits = opt_in_edits(&[set].into(), inv);
    if container_edits.device_nodes.is_empty() {
        return Err(GenerateError::NoOptInNodes {
            set: set.name(),
            env: set.env(),
        });
    }
    let mut spec = Spec {
        cdi_version: String::new(),
        kind,
        devices: vec![Device {
            name: "all".into(),
            container_edits,
        }],
        container_edits: ContainerEdits::default(),
    };
    spec.cdi_version = version::minimum(&spec).to_string();
    Ok(spec)
}

/// The device nodes and files of the opt-in sets `sets` the host has
/// ([`nvct_plan::policy::opt_in_select`], as the planner gives them), as CDI edits: the spec of
/// `--mode gds` and the like, and what jit-cdi adds for `NVIDIA_GDS=enabled` and the like.
pub fn opt_in_edits(sets: &BTreeSet<nvct_model::optin::OptIn>, inv: &Inventory) -> ContainerEdits {
    let (nodes, files, _) = nvct_plan::policy::opt_in_select(sets, inv);
    let mounts = files
        .into_iter()
        .map(|f| {
            mount(&FileMount {
                host_path: f.host_path.clone(),
                container_path: f.driver_path.clone(),
                kind: f.kind,
            })
        })
        .collect();
    ContainerEdits {
        device_nodes: nodes.into_iter().map(node).collect(),
        mounts,
        ..Default::default()
    }
}

/// The IMEX channel spec: a device per channel node the host has (those `opts.devices` names,
/// by channel number), and `all`.
fn imex_channels(inv: &Inventory, opts: &Options, kind: String) -> Result<Spec, GenerateError> {
    let channel = |n: &&nvct_model::DeviceNode| {
        n.path
            .strip_prefix(nvct_model::tables::IMEX_CHANNEL_DIR)
            .ok()
            .and_then(|p| p.to_str()?.strip_prefix("channel")?.parse::<u32>().ok())
    };
    let mut found: Vec<(u32, &nvct_model::DeviceNode)> = inv
        .nodes
        .iter()
        .filter_map(|n| channel(&n).map(|id| (id, n)))
        .collect();
    found.sort_by_key(|(id, _)| *id);
    let wanted: Vec<(u32, &nvct_model::DeviceNode)> = match &opts.devices {
        Devices::None | Devices::All => found,
        Devices::List(ids) => {
            let mut out = Vec::new();
            for id in ids {
                let hit = match id {
                    DeviceId::Index(i) => found.iter().find(|(c, _)| c == i),
                    _ => None,
                };
                out.push(*hit.ok_or_else(|| GenerateError::UnknownChannel {
                    id: id.to_string(),
                    count: found.len(),
                })?);
            }
            out
        }
    };
    if wanted.is_empty() {
        return Err(GenerateError::NoImexChannels);
    }
    let mut devices: Vec<Device> = wanted
        .iter()
        .map(|(id, n)| Device {
            name: id.to_string(),
            container_edits: ContainerEdits {
                device_nodes: vec![node(n)],
                ..Default::default()
            },
        })
        .collect();
    if !opts.no_all_device {
        devices.push(Device {
            name: "all".into(),
            container_edits: ContainerEdits {
                device_nodes: wanted.iter().map(|(_, n)| node(n)).collect(),
                ..Default::default()
            },
        });
    }
    let mut spec = Spec {
        cdi_version: String::new(),
        kind,
        devices,
        container_edits: ContainerEdits::default(),
    };
    spec.cdi_version = version::minimum(&spec).to_string();
    Ok(spec)
}

#[cfg(test)]
mod tests;
