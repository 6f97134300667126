//! The value of a plan: every edit a GPU container gets, and the container-side layout it is
//! placed for. Made by `nvct_plan`, read by the outputs (`nvct_inject`) and the container
//! primitives (`nvct_container`); nothing here decides anything.

use super::{DeviceNode, FileKind};
use serde::Serialize;
use std::path::PathBuf;

/// The container-side layout the plan depends on, probed from the rootfs by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Where libraries go: `/usr/lib/x86_64-linux-gnu` on Debian-like images, else `/usr/lib64`.
    /// `None` when the container's layout is not known (a CDI spec): each library keeps its
    /// path inside the driver root, and the ld cache covers every directory they are in.
    pub lib_dir: Option<PathBuf>,
    /// Where 32-bit libraries go (compat32): `/usr/lib/i386-linux-gnu` on Debian-like images,
    /// else `/usr/lib32` or `/usr/lib` (see `container::probe_layout`). `None` with `lib_dir`
    /// `None`: each keeps its path inside the driver root; `None` with a `lib_dir`: the image
    /// has no 32-bit dir apart from its 64-bit one, and gets no 32-bit library (never one over
    /// a 64-bit build of the same name).
    pub lib32_dir: Option<PathBuf>,
    /// Whether the image has its own `libGLX_indirect.so.0` in `lib_dir` (Mesa's): then it
    /// keeps it. `false` when the layout is not known: a CDI spec makes the link (as upstream's,
    /// whose `create-symlinks` replaces a link that points elsewhere).
    pub glx_indirect: bool,
}

impl Layout {
    /// The layout of a container not known (a CDI spec, the shim): every library keeps its
    /// path inside the driver root.
    pub const UNKNOWN: Layout = Layout {
        lib_dir: None,
        lib32_dir: None,
        glx_indirect: false,
    };
}

/// A read-only bind mount of a host file or directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct FileMount {
    pub host_path: PathBuf,
    pub container_path: PathBuf,
    pub kind: FileKind,
}

/// One device cgroup rule: `c MAJOR:MINOR rw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CgroupRule {
    pub major: u32,
    pub minor: u32,
}

/// What the container sees at `/proc/driver/nvidia`: a tmpfs holding these files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcMask {
    /// Paths relative to `/proc/driver/nvidia`, with contents.
    pub files: Vec<(PathBuf, String)>,
}

/// A symlink in the container: `link` (an absolute container path) with contents `target`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Symlink {
    pub target: PathBuf,
    pub link: PathBuf,
}

/// Every edit a GPU container gets. Each field is made by one primitive of `container/` in
/// the prestart hook, and written as one CDI edit or hook by `cdi/generate.rs`; a new kind of
/// edit is a new field here, one primitive, one serialiser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub device_nodes: Vec<DeviceNode>,
    pub mounts: Vec<FileMount>,
    pub cgroup_rules: Vec<CgroupRule>,
    /// Links made after the mounts (`libcuda.so` → `libcuda.so.1` next to the mounted libcuda).
    pub symlinks: Vec<Symlink>,
    /// What `/proc/driver/nvidia` shows; `None` when the host has no `/proc/driver/nvidia`.
    pub proc_mask: Option<ProcMask>,
    /// The host driver version when the image's CUDA forward-compat libraries may go first in
    /// its ld cache (compute, ld cache refreshed, allowed by the config).
    pub cuda_compat: Option<String>,
    /// Directories the container's ld cache is refreshed with (after `cuda_compat`).
    pub ldcache_dirs: Vec<PathBuf>,
    /// `NVIDIA_CTK_LIBCUDA_DIR` (a CDI spec's env, as upstream's): the container directories
    /// of the driver's 64-bit libraries (libcuda's), `:`-joined; `None` when none is mounted.
    pub libcuda_dir: Option<String>,
    /// Whether the driver application profile that restricts EGL and Vulkan to the
    /// container's GPUs is written (with `graphics` or `display`, whose libraries read it; a
    /// spec and jit-cdi ask for every capability, so they always carry it, as upstream's):
    /// after the ld cache, from the `/dev/nvidiaN` nodes the container then has
    /// (`container::app_profile`).
    pub app_profile: bool,
    /// Notes for the log (requirements not evaluated, optional nodes missing, …).
    pub notes: Vec<String>,
}
