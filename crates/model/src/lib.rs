//! PURE shared vocabulary, no I/O: the values several stages pass each other, defined once at
//! the bottom so that the `use` lines form a DAG in data-flow order (request, discover, plan,
//! the outputs all import from here; nothing here imports them): capabilities and device ids
//! (what a container asks for), GPUs, MIG devices, device nodes, driver files, the `/proc`
//! files and the [`Inventory`] (what a host has), and [`Arch`], the host's architecture and
//! its library layout (Debian/Ubuntu multiarch dirs, RHEL/Fedora `lib64`, ld.so.cache flags).

pub mod optin;
pub mod plan;
pub mod tables;

pub use self::plan::{CgroupRule, FileMount, Layout, Plan, ProcMask, Symlink};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The `PATH` every hook entry we write carries in its explicit `env` (the shim's prestart
/// hook, CDI specs' hooks, the hooks.d file), never the container's environment.
pub const HOOK_PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The CPU architecture whose libraries the driver provides (the host's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// The architecture this binary was built for, which is the host's.
    pub const fn host() -> Arch {
        if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::X86_64
        }
    }

    /// The Debian/Ubuntu multiarch tuple (`/usr/lib/<tuple>`).
    pub fn multiarch(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-linux-gnu",
            Arch::Aarch64 => "aarch64-linux-gnu",
        }
    }

    /// The Debian/Ubuntu multiarch dir of the 32-bit libraries (`/usr/lib/i386-linux-gnu`);
    /// `None` where the driver has no 32-bit libraries.
    pub fn multiarch32_dir(self) -> Option<&'static str> {
        match self {
            Arch::X86_64 => Some("/usr/lib/i386-linux-gnu"),
            Arch::Aarch64 => None,
        }
    }

    /// Where driver libraries may be besides the dirs the ld cache names, most specific first:
    /// the multiarch dirs (Debian, Ubuntu), `lib64` (RHEL, Fedora, SUSE), `/usr/lib`.
    pub fn lib_dirs(self) -> [String; 5] {
        let t = self.multiarch();
        [
            format!("/usr/lib/{t}"),
            "/usr/lib64".into(),
            format!("/lib/{t}"),
            "/lib64".into(),
            "/usr/lib".into(),
        ]
    }

    /// The library directories an image may use, in the order the container's lib dir is
    /// chosen: its multiarch dir, `/usr/lib64`, `/usr/lib`.
    pub fn image_lib_dirs(self) -> [String; 3] {
        [
            format!("/usr/lib/{}", self.multiarch()),
            "/usr/lib64".into(),
            "/usr/lib".into(),
        ]
    }
}

// ---- what a container asks for

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    Compute,
    Compat32,
    Display,
    Graphics,
    Ngx,
    Utility,
    Video,
}

impl Capability {
    pub const ALL: [Capability; 7] = [
        Capability::Compute,
        Capability::Compat32,
        Capability::Display,
        Capability::Graphics,
        Capability::Ngx,
        Capability::Utility,
        Capability::Video,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Capability::Compute => "compute",
            Capability::Compat32 => "compat32",
            Capability::Display => "display",
            Capability::Graphics => "graphics",
            Capability::Ngx => "ngx",
            Capability::Utility => "utility",
            Capability::Video => "video",
        }
    }

    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// One device id as written by the user; checked against the host by the planner.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum DeviceId {
    /// `0`
    Index(u32),
    /// `0:1`: MIG device 1 of GPU 0.
    MigIndex(u32, u32),
    /// `GPU-…` or `MIG-…`
    Uuid(String),
    /// `0000:3b:00.0` (any domain width, any case)
    BusId(String),
}

impl DeviceId {
    pub fn parse(s: &str) -> Option<DeviceId> {
        if let Ok(i) = s.parse::<u32>() {
            return Some(DeviceId::Index(i));
        }
        if let Some((g, m)) = s.split_once(':') {
            if let (Ok(g), Ok(m)) = (g.parse(), m.parse()) {
                return Some(DeviceId::MigIndex(g, m));
            }
        }
        if (s.starts_with("GPU-") || s.starts_with("MIG-")) && s.len() > 4 {
            return Some(DeviceId::Uuid(s.to_string()));
        }
        normalize_bus_id(s).map(DeviceId::BusId)
    }
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceId::Index(i) => write!(f, "{i}"),
            DeviceId::MigIndex(g, m) => write!(f, "{g}:{m}"),
            DeviceId::Uuid(u) | DeviceId::BusId(u) => f.write_str(u),
        }
    }
}

/// PCI bus id in the kernel's form: lowercase, 4-digit domain (`0000:3b:00.0`). NVML writes
/// `00000000:3B:00.0`; users write either.
pub fn normalize_bus_id(s: &str) -> Option<String> {
    let (domain, rest) = match s.matches(':').count() {
        2 => s.split_once(':')?,
        1 => ("0", s),
        _ => return None,
    };
    let (bus, dev_fn) = rest.split_once(':')?;
    let (dev, func) = dev_fn.split_once('.')?;
    let hex = |x: &str, max: usize| {
        !x.is_empty() && x.len() <= max && x.chars().all(|c| c.is_ascii_hexdigit())
    };
    if !(hex(domain, 8) && hex(bus, 2) && hex(dev, 2) && hex(func, 1)) {
        return None;
    }
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let [bus, dev, func] = [bus, dev, func].map(|x| u8::from_str_radix(x, 16).unwrap_or(0));
    if domain > 0xffff {
        return None;
    }
    Some(format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Devices {
    /// `none`: driver files only, no GPU device nodes.
    None,
    All,
    List(Vec<DeviceId>),
}

impl Devices {
    /// `GPUs 0,2`, `all GPUs`, `no GPU (driver files only)`.
    pub fn summary(&self) -> String {
        match self {
            Devices::None => "no GPU (driver files only)".into(),
            Devices::All => "all GPUs".into(),
            Devices::List(ids) => format!(
                "GPUs {}",
                ids.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

// ---- what a host has

/// One physical GPU as the host's driver reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpu {
    /// NVML / nvidia-smi index (PCI bus order).
    pub index: u32,
    /// Minor number of `/dev/nvidia<minor>`.
    pub minor: u32,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub uuid: String,
    /// Normalised PCI bus id: lowercase, 4-digit domain, e.g. `0000:3b:00.0`.
    pub bus_id: String,
    /// Product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub model: String,
    /// NVML's brand, lowercase (`tesla`, `geforce`, `quadro`, `nvidia`, ...); empty when not
    /// known (GPUs read from `/proc/driver/nvidia`).
    pub brand: String,
    /// Total memory in MiB, as NVML reports it; 0 when not known (GPUs read from
    /// `/proc/driver/nvidia`).
    pub memory_mib: u64,
    /// Persistence mode, when NVML told us.
    pub persistence_mode: Option<bool>,
    /// CUDA compute capability, `major.minor` (`9.0` for an H100), what `arch` terms of
    /// `NVIDIA_REQUIRE_*` compare; `None` when not known (GPUs read from `/proc/driver/nvidia`,
    /// or NVML did not answer).
    pub compute_capability: Option<String>,
    /// Whether MIG mode is currently enabled.
    pub mig_enabled: bool,
    /// MIG devices of this GPU (empty unless `mig_enabled`).
    pub migs: Vec<MigDevice>,
}

/// One MIG device (a compute instance inside a GPU instance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigDevice {
    /// Index of this MIG device on its parent (the `j` of `i:j`).
    pub index: u32,
    /// GPU instance id.
    pub gi: u32,
    /// Compute instance id.
    pub ci: u32,
    /// `MIG-xxxxxxxx-...`.
    pub uuid: String,
}

/// `/proc/driver/nvidia` contents shown (masked) to containers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ProcDriver {
    pub version: String,
    pub params: String,
    pub registry: String,
    /// Per GPU bus id: the regular files of `gpus/<busid>/` and their contents.
    pub gpu_files: BTreeMap<String, Vec<(String, String)>>,
    /// The `capabilities/` files read, keyed by the capability's name in
    /// `/proc/driver/nvidia-caps/mig-minors` (`gpu0/gi1/access`, `gpu0/gi1/ci0/access`,
    /// `config`, `monitor`; the file is [`ProcDriver::cap_path`]), with their contents
    /// (`DeviceFileMinor: 12` ...: how the driver's user space finds a MIG device's cap nodes).
    pub caps: BTreeMap<String, String>,
}

impl ProcDriver {
    /// Where the file of capability `name` (as `mig-minors` names it) is under
    /// `/proc/driver/nvidia`: `gpu0/gi1/ci0/access` → `capabilities/gpu0/mig/gi1/ci0/access`,
    /// `config` → `capabilities/mig/config`. `None` for a name that is not a clean relative
    /// path of such a capability.
    pub fn cap_path(name: &str) -> Option<String> {
        let clean = !name.is_empty()
            && name
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
        if !clean {
            return None;
        }
        Some(match name.split_once('/') {
            Some((gpu, rest)) if gpu.starts_with("gpu") => {
                format!("capabilities/{gpu}/mig/{rest}")
            }
            Some(_) => return None,
            None => format!("capabilities/mig/{name}"),
        })
    }
}

/// The DRM nodes of one GPU (for graphics and display): the `/dev/dri/card*` and
/// `/dev/dri/renderD*` that `<sys>/bus/pci/devices/<bus id>/drm/` names and the device root
/// has, and the host's `/dev/dri/by-path/pci-<bus id>-{card,render}` links to them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Drm {
    /// Container paths (`/dev/dri/card1`, `/dev/dri/renderD128`), each also in
    /// [`Inventory::nodes`].
    pub nodes: Vec<PathBuf>,
    /// (target as the host's link has it, link path): (`../card1`,
    /// `/dev/dri/by-path/pci-0000:18:00.0-card`).
    pub by_path: Vec<(PathBuf, PathBuf)>,
}

/// Everything the planner needs to know about the host, as plain data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inventory {
    pub driver_version: String,
    /// `12.4`, when NVML told us.
    pub cuda_version: Option<String>,
    pub gpus: Vec<Gpu>,
    /// Every NVIDIA device node present (the GPUs' DRM nodes included), sorted by container
    /// path.
    pub nodes: Vec<DeviceNode>,
    /// Per GPU bus id, its DRM nodes (GPUs without any are not listed).
    pub drm: BTreeMap<String, Drm>,
    /// `/proc/driver/nvidia-caps/mig-minors`.
    pub mig_minors: BTreeMap<String, u32>,
    pub files: Vec<DriverFile>,
    pub proc_driver: Option<ProcDriver>,
    /// What went wrong but was survivable (e.g. NVML not loadable), for the log.
    pub notes: Vec<String>,
}

// ---- device nodes

/// A character device node: where it is on the host, where it goes in the container.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DeviceNode {
    /// Path inside the container, e.g. `/dev/nvidia0`.
    pub path: PathBuf,
    /// Path on the host (under the device root).
    pub host_path: PathBuf,
    pub major: u32,
    pub minor: u32,
    /// The host node's permission bits (`st_mode` without the file type, e.g. `0o666`): a CDI
    /// spec's `fileMode`, as upstream's.
    pub mode: u32,
}

// ---- driver files

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum FileKind {
    Library,
    /// A 32-bit library (compat32): found through the ld cache's i386 entries, mounted into the
    /// image's 32-bit lib dir for the capabilities that ask for its family.
    Library32,
    Binary,
    Firmware,
    Ipc,
    /// A file mounted at its own path that the loader does not find by itself: the Vulkan ICD,
    /// glvnd EGL vendor and EGL platform JSON files, the Xorg modules.
    Config,
}

/// One driver file on the host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct DriverFile {
    pub kind: FileKind,
    /// Library family (`libcuda`) or binary name; the file name for firmware and IPC.
    pub name: String,
    /// Path on the host.
    pub host_path: PathBuf,
    /// Path inside the driver root (`/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15`).
    pub driver_path: PathBuf,
}

/// The parts of the driver only some requests use (`plan::needs` says which a request does);
/// with `host::discover::Files::For`, discovery leaves out those that are not needed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Needs {
    /// The DRM nodes and their `/dev/dri/by-path` links (graphics, display).
    pub drm: bool,
    /// The 32-bit libraries (compat32).
    pub lib32: bool,
    /// The files of the capabilities' config directories (graphics, display).
    pub configs: bool,
}

impl Needs {
    /// Everything: what discovery reads for a spec, or for any request.
    pub const ALL: Needs = Needs {
        drm: true,
        lib32: true,
        configs: true,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_path_cases() {
        let cases = [
            (
                "gi",
                "gpu0/gi1/access",
                Some("capabilities/gpu0/mig/gi1/access"),
            ),
            (
                "ci",
                "gpu3/gi2/ci0/access",
                Some("capabilities/gpu3/mig/gi2/ci0/access"),
            ),
            ("config", "config", Some("capabilities/mig/config")),
            ("monitor", "monitor", Some("capabilities/mig/monitor")),
            ("dot dot", "gpu0/../../x", None),
            ("absolute", "/gpu0/gi1/access", None),
            ("not a gpu", "fabric/x", None),
            ("empty", "", None),
        ];
        for (case, name, want) in cases {
            assert_eq!(ProcDriver::cap_path(name).as_deref(), want, "case {case}");
        }
    }

    #[test]
    fn arch_cases() {
        let cases = [
            ("x86-64", Arch::X86_64, "x86_64-linux-gnu"),
            ("aarch64", Arch::Aarch64, "aarch64-linux-gnu"),
        ];
        for (name, arch, tuple) in cases {
            assert_eq!(arch.multiarch(), tuple, "{name}");
            assert_eq!(
                arch.multiarch32_dir().is_some(),
                arch == Arch::X86_64,
                "{name}"
            );
            assert_eq!(arch.lib_dirs()[0], format!("/usr/lib/{tuple}"), "{name}");
            assert_eq!(
                arch.image_lib_dirs(),
                [
                    format!("/usr/lib/{tuple}"),
                    "/usr/lib64".into(),
                    "/usr/lib".into()
                ],
                "{name}"
            );
        }
    }
}
