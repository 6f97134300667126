//! The opt-in device sets: what a container gets with `NVIDIA_GDS`, `NVIDIA_MOFED`,
//! `NVIDIA_GDRCOPY` or `NVIDIA_NVSWITCH` set to `enabled` (with a GPU request), and what
//! `cdi generate --mode gds|mofed|gdrcopy|nvswitch` describes, as upstream's gated modes:
//!
//! | set | device nodes | files (GDS: only when it has nodes) |
//! |---|---|---|
//! | `gds` | `/dev/nvidia-fs*` | `/run/udev`, `/etc/cufile.json` |
//! | `mofed` | `/dev/infiniband/uverbs*`, `/dev/infiniband/rdma_cm` | |
//! | `gdrcopy` | `/dev/gdrdrv` | |
//! | `nvswitch` | `/dev/nvidia-nvswitchctl`, `/dev/nvidia-nvswitch*` | |
//!
//! Each is what the host has: a set whose nodes are missing gives nothing (the planner notes it).
//! This is their vocabulary (names, variables, node patterns). The nodes and files are found by
//! `host::optin`; the planner and the CDI paths select from the inventory with
//! `plan::policy::opt_in_select`.

use super::{DriverFile, FileKind};
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum OptIn {
    Gds,
    Mofed,
    Gdrcopy,
    Nvswitch,
}

/// A node pattern: a directory and a name prefix (`exact`: the whole name).
pub struct Pattern {
    pub dir: &'static str,
    name: &'static str,
    exact: bool,
}

impl Pattern {
    /// Whether a node named `name` in `dir` is one of this pattern's.
    pub fn matches(&self, dir: &Path, name: &str) -> bool {
        Path::new(self.dir) == dir
            && if self.exact {
                name == self.name
            } else {
                name.starts_with(self.name)
            }
    }
}

const fn prefix(dir: &'static str, name: &'static str) -> Pattern {
    Pattern {
        dir,
        name,
        exact: false,
    }
}

const fn exact(dir: &'static str, name: &'static str) -> Pattern {
    Pattern {
        dir,
        name,
        exact: true,
    }
}

impl OptIn {
    pub const ALL: [OptIn; 4] = [OptIn::Gds, OptIn::Mofed, OptIn::Gdrcopy, OptIn::Nvswitch];

    /// The `cdi generate --mode` value and the spec's class (`nvidia.com/gds`).
    pub fn name(self) -> &'static str {
        match self {
            OptIn::Gds => "gds",
            OptIn::Mofed => "mofed",
            OptIn::Gdrcopy => "gdrcopy",
            OptIn::Nvswitch => "nvswitch",
        }
    }

    /// The variable that asks for the set (`=enabled`).
    pub fn env(self) -> &'static str {
        match self {
            OptIn::Gds => "NVIDIA_GDS",
            OptIn::Mofed => "NVIDIA_MOFED",
            OptIn::Gdrcopy => "NVIDIA_GDRCOPY",
            OptIn::Nvswitch => "NVIDIA_NVSWITCH",
        }
    }

    pub fn parse(name: &str) -> Option<OptIn> {
        OptIn::ALL.into_iter().find(|o| o.name() == name)
    }

    pub fn patterns(self) -> &'static [Pattern] {
        const GDS: [Pattern; 1] = [prefix("/dev", "nvidia-fs")];
        const MOFED: [Pattern; 2] = [
            prefix("/dev/infiniband", "uverbs"),
            exact("/dev/infiniband", "rdma_cm"),
        ];
        const GDRCOPY: [Pattern; 1] = [exact("/dev", "gdrdrv")];
        const NVSWITCH: [Pattern; 1] = [prefix("/dev", "nvidia-nvswitch")];
        match self {
            OptIn::Gds => &GDS,
            OptIn::Mofed => &MOFED,
            OptIn::Gdrcopy => &GDRCOPY,
            OptIn::Nvswitch => &NVSWITCH,
        }
    }

    /// Whether the device node at container path `path` belongs to this set.
    pub fn has_node(self, path: &Path) -> bool {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
        else {
            return false;
        };
        self.patterns().iter().any(|p| p.matches(dir, name))
    }

    /// Whether a driver file (from [`files`]) belongs to this set.
    pub fn has_file(self, f: &DriverFile) -> bool {
        f.kind == FileKind::Config && f.name == format!("optin-{}", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_node_cases() {
        let cases = [
            (OptIn::Gds, "/dev/nvidia-fs0", true),
            (OptIn::Gds, "/dev/nvidia-fs", true),
            (OptIn::Gds, "/dev/nvidia0", false),
            (OptIn::Mofed, "/dev/infiniband/uverbs3", true),
            (OptIn::Mofed, "/dev/infiniband/rdma_cm", true),
            (OptIn::Mofed, "/dev/infiniband/umad0", false),
            (OptIn::Mofed, "/dev/uverbs0", false),
            (OptIn::Gdrcopy, "/dev/gdrdrv", true),
            (OptIn::Gdrcopy, "/dev/gdrdrv1", false),
            (OptIn::Nvswitch, "/dev/nvidia-nvswitchctl", true),
            (OptIn::Nvswitch, "/dev/nvidia-nvswitch2", true),
            (OptIn::Nvswitch, "/dev/nvidiactl", false),
        ];
        for (set, path, want) in cases {
            assert_eq!(set.has_node(Path::new(path)), want, "{set:?} {path}");
        }
    }
}
