//! PURE: (Inventory, [`Options`]) → CDI [`Spec`], computed from the same [`plan::plan`] as the
//! prestart hook. One plan per device (its node(s): `/dev/nvidiaN`, plus the MIG capability
//! nodes of a MIG device) and one spec-level plan (`Devices::None` with every requested
//! capability: control nodes, libraries, binaries, firmware, IPC) whose edits every device
//! shares. Libraries keep their driver-root path in the container (the image layout is not
//! known when a spec is written), and the spec carries hooks to make their links and refresh
//! the ld cache. Same input → same bytes: nothing here reads the clock, the host or a map with
//! random order.

use super::name::{self, NameError};
use super::spec::{ContainerEdits, Device, DeviceNode, Hook, Mount, Spec};
use super::version;
use crate::discover::{Gpu, Inventory, MigDevice};
use crate::driver::FileKind;
use crate::plan::{self, FileMount, Layout, PlanError};
use crate::request::{Capability, DeviceId, Devices, Request};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The host's procfs, which the CDI hook reads unless told otherwise.
pub(crate) const DEFAULT_PROC_ROOT: &str = "/proc";

pub const DEFAULT_VENDOR: &str = "nvidia.com";
pub const DEFAULT_CLASS: &str = "gpu";
pub const DEFAULT_HOOK_PATH: &str = "/usr/bin/nvidia-cdi-hook";
/// The env a spec sets to the container directory of the driver's libraries (upstream's name).
pub const LIBCUDA_DIR_ENV: &str = "NVIDIA_CTK_LIBCUDA_DIR";

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

/// The hooks a spec can carry (`--disable-hook` names; the nvidia-cdi-hook subcommands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookKind {
    CreateSymlinks,
    UpdateLdcache,
    DisableDeviceNodeModification,
    EnableCudaCompat,
    UpdateApplicationProfile,
}

impl HookKind {
    pub const ALL: [HookKind; 5] = [
        HookKind::CreateSymlinks,
        HookKind::UpdateLdcache,
        HookKind::DisableDeviceNodeModification,
        HookKind::EnableCudaCompat,
        HookKind::UpdateApplicationProfile,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HookKind::CreateSymlinks => "create-symlinks",
            HookKind::UpdateLdcache => "update-ldcache",
            HookKind::DisableDeviceNodeModification => "disable-device-node-modification",
            HookKind::EnableCudaCompat => "enable-cuda-compat",
            HookKind::UpdateApplicationProfile => "update-application-profile",
        }
    }

    pub fn parse(s: &str) -> Option<HookKind> {
        HookKind::ALL.into_iter().find(|h| h.name() == s)
    }

    /// The hooks a `--disable-hook` list (or `modes.jit-cdi.nvcdi-disable-hooks`) names:
    /// hook names, `all`, and upstream's hooks our specs never carry (nothing to leave out).
    /// `Err` names the first unknown one.
    pub fn parse_disabled<'a>(
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeSet<HookKind>, String> {
        let mut out = BTreeSet::new();
        for h in names {
            if h == "all" {
                out.extend(HookKind::ALL);
            } else if !UPSTREAM_ONLY_HOOKS.contains(&h) {
                out.insert(HookKind::parse(h).ok_or_else(|| h.to_string())?);
            }
        }
        Ok(out)
    }
}

/// Hook names upstream's `--disable-hook` takes that our specs never carry.
pub const UPSTREAM_ONLY_HOOKS: &[&str] = &["chmod", "create-soname-symlinks"];

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
    OptIn(crate::optin::OptIn),
    /// For management containers (monitoring agents, DCGM), as upstream's `--mode management`
    /// (kind `management.nvidia.com/gpu`): the GPU spec's common edits, and one device `all`
    /// with every NVIDIA device node (not the GDS, NVSwitch or NVLink ones).
    Management,
}

/// The vendor of upstream's management specs.
pub const MANAGEMENT_VENDOR: &str = "management.nvidia.com";

/// The class of upstream's IMEX channel specs (`nvidia.com/imex-channel=N`).
pub const IMEX_CLASS: &str = "imex-channel";

impl Default for Options {
    fn default() -> Self {
        Options {
            vendor: DEFAULT_VENDOR.into(),
            class: DEFAULT_CLASS.into(),
            strategies: vec![NameStrategy::Index, NameStrategy::Uuid],
            hook_path: DEFAULT_HOOK_PATH.into(),
            ldconfig_path: None,
            proc_root: DEFAULT_PROC_ROOT.into(),
            disabled_hooks: BTreeSet::new(),
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

pub(crate) fn node(n: &crate::devices::DeviceNode) -> DeviceNode {
    DeviceNode {
        path: n.path.display().to_string(),
        host_path: Some(n.host_path.display().to_string()),
        kind: Some("c".into()),
        major: Some(n.major.into()),
        minor: Some(n.minor.into()),
        // As upstream's: the host node's mode, and cgroup access with mknod (`rwm`).
        permissions: Some("rwm".into()),
        file_mode: (n.mode != 0).then_some(n.mode),
        ..Default::default()
    }
}

fn mount(m: &FileMount) -> Mount {
    let mut options: Vec<String> = ["ro", "nosuid", "nodev", "bind"].map(String::from).into();
    if m.kind == FileKind::Ipc {
        options.push("noexec".into());
    }
    Mount {
        host_path: m.host_path.display().to_string(),
        container_path: m.container_path.display().to_string(),
        options,
        kind: None,
    }
}

fn hook(opts: &Options, args: Vec<String>) -> Hook {
    Hook {
        hook_name: "createContainer".into(),
        path: opts.hook_path.clone(),
        args: std::iter::once("nvidia-cdi-hook".to_string())
            .chain(args)
            .collect(),
        env: vec![crate::model::HOOK_PATH_ENV.into()],
    }
}

/// The spec-level hooks, each the serialisation of one [`plan::Plan`] field, in the order the
/// prestart hook applies them: `symlinks` (create-symlinks), `proc_mask`
/// (disable-device-node-modification: the hook computes the same mask from the host's proc
/// root and the container's device nodes), `cuda_compat` (enable-cuda-compat, before the ld
/// cache, which it feeds), `ldcache_dirs` (update-ldcache), `app_profile`
/// (update-application-profile, last as in upstream's specs: the hook finds the container's
/// GPUs in its `/dev`).
fn hooks(opts: &Options, plan: &plan::Plan) -> Vec<Hook> {
    let enabled = |h: HookKind| !opts.disabled_hooks.contains(&h);
    let mut out: Vec<Hook> = link_hook(opts, &plan.symlinks).into_iter().collect();
    if enabled(HookKind::DisableDeviceNodeModification) && plan.proc_mask.is_some() {
        let mut args = vec![HookKind::DisableDeviceNodeModification.name().to_string()];
        if opts.proc_root != Path::new(DEFAULT_PROC_ROOT) {
            args.extend(["--proc-root".into(), opts.proc_root.display().to_string()]);
        }
        out.push(hook(opts, args));
    }
    if let Some(version) = plan
        .cuda_compat
        .as_ref()
        .filter(|_| enabled(HookKind::EnableCudaCompat))
    {
        out.push(hook(
            opts,
            vec![
                HookKind::EnableCudaCompat.name().into(),
                "--host-driver-version".into(),
                version.clone(),
            ],
        ));
    }
    if enabled(HookKind::UpdateLdcache) && !plan.ldcache_dirs.is_empty() {
        let mut args = vec![HookKind::UpdateLdcache.name().to_string()];
        if let Some(ldconfig) = &opts.ldconfig_path {
            args.extend(["--ldconfig-path".into(), ldconfig.clone()]);
        }
        for dir in &plan.ldcache_dirs {
            args.extend(["--folder".into(), dir.display().to_string()]);
        }
        out.push(hook(opts, args));
    }
    if enabled(HookKind::UpdateApplicationProfile) && plan.app_profile {
        out.push(hook(
            opts,
            vec![HookKind::UpdateApplicationProfile.name().into()],
        ));
    }
    if opts.one_hook && out.len() > 1 {
        return vec![one_hook(opts, &out)];
    }
    out
}

/// The `create-symlinks` hook of `links` (the spec's library links, or a device's own DRM
/// `/dev/dri/by-path` links), if there are any and the hook is not disabled.
fn link_hook(opts: &Options, links: &[plan::Symlink]) -> Option<Hook> {
    if links.is_empty() || opts.disabled_hooks.contains(&HookKind::CreateSymlinks) {
        return None;
    }
    let mut args = vec![HookKind::CreateSymlinks.name().to_string()];
    for l in links {
        args.extend([
            "--link".into(),
            format!("{}::{}", l.target.display(), l.link.display()),
        ]);
    }
    Some(hook(opts, args))
}

/// The name of the hook that does the work of several ([`Options::one_hook`]).
pub const APPLY_EDITS: &str = "apply-edits";

/// `hooks` as one `apply-edits` hook: each hook's flags after a `--<hook name>` marker, in the
/// same order (links, /proc mask, forward compat, ld cache, application profile), so the one process does the same
/// edits as the separate ones.
fn one_hook(opts: &Options, hooks: &[Hook]) -> Hook {
    let mut args = vec![APPLY_EDITS.to_string()];
    for h in hooks {
        // args[0] is the program name, args[1] the hook's name.
        let mut rest = h.args.iter().skip(1);
        if let Some(name) = rest.next() {
            args.push(format!("--{name}"));
        }
        args.extend(rest.cloned());
    }
    hook(opts, args)
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
    let shared = plan::plan(
        &request(Devices::None, opts.capabilities.clone(), cuda_compat),
        inv,
        &layout,
    )
    .map_err(GenerateError::SpecPlan)?;
    let shared_nodes: Vec<&crate::devices::DeviceNode> = shared.device_nodes.iter().collect();

    let mut devices = Vec::new();
    let mut all_nodes: Vec<crate::devices::DeviceNode> = Vec::new();
    let mut all_links: Vec<plan::Symlink> = Vec::new();
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
    for target in targets {
        let id = target.id();
        let p = plan::plan(
            &request(Devices::List(vec![id.clone()]), device_caps.clone(), false),
            inv,
            &layout,
        )
        .map_err(|source| GenerateError::Plan {
            device: id.to_string(),
            source,
        })?;
        let own: Vec<crate::devices::DeviceNode> = p
            .device_nodes
            .into_iter()
            .filter(|n| !shared_nodes.contains(&n))
            .collect();
        for n in &own {
            if !all_nodes.contains(n) {
                all_nodes.push(n.clone());
            }
        }
        // Only the device's own links (the DRM by-path ones): its plan has no libraries.
        let links: Vec<plan::Symlink> = p
            .symlinks
            .into_iter()
            .filter(|l| !shared.symlinks.contains(l))
            .collect();
        for l in &links {
            if !all_links.contains(l) {
                all_links.push(l.clone());
            }
        }
        for s in &strategies {
            let name = target.name(*s);
            name::validate_device_name(&name).map_err(|source| GenerateError::Name {
                device: id.to_string(),
                source,
            })?;
            let container_edits = ContainerEdits {
                device_nodes: own.iter().map(node).collect(),
                hooks: link_hook(opts, &links).into_iter().collect(),
                ..Default::default()
            };
            devices.push(Device {
                name,
                container_edits,
            });
        }
    }
    all_nodes.sort();
    all_links.sort();
    if !opts.no_all_device {
        devices.push(Device {
            name: "all".into(),
            container_edits: ContainerEdits {
                device_nodes: all_nodes.iter().map(node).collect(),
                hooks: link_hook(opts, &all_links).into_iter().collect(),
                ..Default::default()
            },
        });
    }

    // As upstream's: where the driver's libraries are in the container, for tools that
    // look for libcuda there.
    let env = shared
        .libcuda_dir
        .iter()
        .map(|dir| format!("{LIBCUDA_DIR_ENV}={dir}"))
        .chain(["NVIDIA_VISIBLE_DEVICES=void".to_string()])
        .collect();
    let container_edits = ContainerEdits {
        env,
        device_nodes: shared.device_nodes.iter().map(node).collect(),
        mounts: shared
            .mounts
            .iter()
            .filter(|m| !(opts.no_ipc && m.kind == FileKind::Ipc))
            .map(mount)
            .collect(),
        hooks: hooks(opts, &shared),
    };
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
                || n.path.starts_with(crate::devices::IMEX_CHANNEL_DIR)
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
/// ([`crate::optin::select`]).
fn opt_in(inv: &Inventory, set: crate::optin::OptIn, kind: String) -> Result<Spec, GenerateError> {
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
/// ([`crate::optin::select`], as the planner gives them), as CDI edits: the spec of
/// `--mode gds` and the like, and what jit-cdi adds for `NVIDIA_GDS=enabled` and the like.
pub fn opt_in_edits(sets: &BTreeSet<crate::optin::OptIn>, inv: &Inventory) -> ContainerEdits {
    let (nodes, files, _) = crate::optin::select(sets, inv);
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
    let channel = |n: &&crate::devices::DeviceNode| {
        n.path
            .strip_prefix(crate::devices::IMEX_CHANNEL_DIR)
            .ok()
            .and_then(|p| p.to_str()?.strip_prefix("channel")?.parse::<u32>().ok())
    };
    let mut found: Vec<(u32, &crate::devices::DeviceNode)> = inv
        .nodes
        .iter()
        .filter_map(|n| channel(&n).map(|id| (id, n)))
        .collect();
    found.sort_by_key(|(id, _)| *id);
    let wanted: Vec<(u32, &crate::devices::DeviceNode)> = match &opts.devices {
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
