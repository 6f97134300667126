//! The driver's devices as the kernel shows them: `/proc/devices` majors, `/proc/driver/nvidia`
//! (version, GPUs, params), `/proc/driver/nvidia-caps/mig-minors`, and the `/dev/nvidia*` nodes
//! (stat'ed: their real major:minor is the truth). Parsers are pure; readers take a
//! [`DriverRoot`] and only read.

use nvct_formats::root::DriverRoot;
pub use nvct_model::DeviceNode;
use nvct_model::{normalize_bus_id, Gpu};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

pub use nvct_model::tables::IMEX_CHANNEL_DIR;

/// procfs files we read are tiny; anything larger is not what we expect.
const MAX_PROC_FILE: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum DevicesError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Format { path: PathBuf, what: String },
    #[error("{path} exists but is not a character device")]
    NotCharDevice { path: PathBuf },
}

pub fn read_proc_file(path: &Path) -> Result<String, DevicesError> {
    let err = |source| DevicesError::Read {
        path: path.to_path_buf(),
        source,
    };
    nvct_sys::procfs::read_from(std::fs::File::open(path).map_err(err)?, MAX_PROC_FILE).map_err(err)
}

/// The driver version from `/proc/driver/nvidia/version`
/// (`NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar ...`).
pub fn parse_driver_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let after = line.split_once("Module")?.1;
    after
        .split_whitespace()
        .find(|t| t.contains('.') && t.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .map(str::to_string)
}

/// `Key: value` lines (the format of `information` and `params`).
fn fields(text: &str) -> BTreeMap<&str, &str> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect()
}

/// One `gpus/<busid>/information` file → (model, uuid, bus id, minor).
pub fn parse_gpu_information(text: &str) -> Option<(String, String, String, u32)> {
    let f = fields(text);
    let model = f.get("Model")?.to_string();
    let uuid = f.get("GPU UUID")?.to_string();
    let bus = normalize_bus_id(f.get("Bus Location")?)?;
    let minor = f.get("Device Minor")?.parse().ok()?;
    Some((model, uuid, bus, minor))
}

/// `/proc/driver/nvidia-caps/mig-minors`: `gpu0/gi1/access 3`, `config 1`, … → name → minor.
pub fn parse_mig_minors(text: &str) -> BTreeMap<String, u32> {
    text.lines()
        .filter_map(|l| {
            let (name, minor) = l.trim().rsplit_once(' ')?;
            Some((name.trim().to_string(), minor.parse().ok()?))
        })
        .collect()
}

/// GPUs from `/proc/driver/nvidia/gpus/*/information`, indexed in PCI bus order (as NVML does).
pub fn gpus_from_proc(root: &DriverRoot) -> Result<Vec<Gpu>, DevicesError> {
    let dir = root.proc_path("driver/nvidia/gpus");
    // No `gpus/` at all: a loaded driver with no GPU bound to it (the caller decides whether
    // that is an error).
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        other => other.map_err(|source| DevicesError::Read {
            path: dir.clone(),
            source,
        })?,
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| DevicesError::Read {
            path: dir.clone(),
            source,
        })?;
        let path = entry.path().join("information");
        let text = read_proc_file(&path)?;
        let (model, uuid, bus_id, minor) =
            parse_gpu_information(&text).ok_or_else(|| DevicesError::Format {
                path: path.clone(),
                what: "expected Model, GPU UUID, Bus Location and Device Minor lines".into(),
            })?;
        found.push(Gpu {
            index: 0,
            minor,
            uuid,
            bus_id,
            model,
            brand: String::new(),
            memory_mib: 0,
            persistence_mode: None,
            compute_capability: None,
            mig_enabled: false,
            migs: vec![],
        });
    }
    found.sort_by(|a, b| a.bus_id.cmp(&b.bus_id));
    for (i, gpu) in found.iter_mut().enumerate() {
        gpu.index = i as u32;
    }
    Ok(found)
}

/// Stats a device node under the device root. `Ok(None)` if it does not exist.
pub fn stat_node(root: &DriverRoot, path: &str) -> Result<Option<DeviceNode>, DevicesError> {
    let host_path = root.dev_path(path);
    let meta = match std::fs::metadata(&host_path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(DevicesError::Read {
                path: host_path,
                source,
            })
        }
    };
    if !meta.file_type().is_char_device() {
        return Err(DevicesError::NotCharDevice { path: host_path });
    }
    let rdev = meta.rdev();
    Ok(Some(DeviceNode {
        path: PathBuf::from(path),
        host_path,
        major: libc::major(rdev),
        minor: libc::minor(rdev),
        mode: meta.mode() & 0o7777,
    }))
}

/// The DRM nodes of each GPU: the `card*` and `renderD*` entries of
/// `<sys>/bus/pci/devices/<bus id>/drm/` that are character devices at `/dev/dri/<name>` under
/// the device root, and the device root's `/dev/dri/by-path/pci-<bus id>-{card,render}` links
/// whose target is one of them. A GPU without any is left out; nothing here is an error (DRM
/// is optional: the planner notes what is missing).
pub fn drm(
    root: &DriverRoot,
    gpus: &[Gpu],
) -> (Vec<DeviceNode>, BTreeMap<String, nvct_model::Drm>) {
    let mut nodes = Vec::new();
    let mut out = BTreeMap::new();
    for gpu in gpus {
        let dir = root.sys_path(format!("bus/pci/devices/{}/drm", gpu.bus_id));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| {
                (n.starts_with("card") || n.starts_with("renderD"))
                    && !n.contains('/')
                    && n.len() < 64
            })
            .collect();
        names.sort();
        let mut drm = nvct_model::Drm::default();
        for name in &names {
            let path = format!("/dev/dri/{name}");
            if let Ok(Some(node)) = stat_node(root, &path) {
                drm.nodes.push(node.path.clone());
                nodes.push(node);
            }
        }
        for kind in ["card", "render"] {
            let link = PathBuf::from(format!("/dev/dri/by-path/pci-{}-{kind}", gpu.bus_id));
            let Ok(target) = std::fs::read_link(root.dev_path(&link)) else {
                continue;
            };
            let to = target.file_name().and_then(|n| n.to_str());
            let in_dri = match target.parent() {
                Some(p) if target.is_absolute() => p == Path::new("/dev/dri"),
                Some(p) => p == Path::new(".."),
                None => false,
            };
            if in_dri
                && drm
                    .nodes
                    .iter()
                    .any(|n| n.file_name().and_then(|f| f.to_str()) == to)
            {
                drm.by_path.push((target, link));
            }
        }
        if !drm.nodes.is_empty() {
            out.insert(gpu.bus_id.clone(), drm);
        }
    }
    (nodes, out)
}

/// Every NVIDIA device node present under the device root: control nodes, one per GPU minor,
/// the MIG capability nodes, IMEX channels and the opt-in sets' nodes. Sorted by container path.
pub fn nodes(root: &DriverRoot, gpus: &[Gpu]) -> Result<Vec<DeviceNode>, DevicesError> {
    let mut names: Vec<String> = [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-modeset",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    names.extend(gpus.iter().map(|g| format!("/dev/nvidia{}", g.minor)));
    for (dir, prefix) in [
        ("/dev/nvidia-caps", "nvidia-cap"),
        (IMEX_CHANNEL_DIR, "channel"),
    ] {
        names.extend(names_in(root, dir, prefix));
    }
    names.extend(crate::optin::node_names(root));
    let mut out = Vec::new();
    for name in names {
        out.extend(stat_node(root, &name)?);
    }
    out.sort();
    Ok(out)
}

/// The entries of the device-root directory `dir` (`/dev/nvidia-caps`) whose names start with
/// `prefix`, as container paths (`/dev/nvidia-caps/nvidia-cap1`), in directory order; none
/// when `dir` is missing or unreadable. The one enumerator of `/dev` directories: discovery's
/// and `nvidia-ctk system`'s.
pub fn names_in(root: &DriverRoot, dir: &str, prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.dev_path(dir)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str().filter(|n| n.starts_with(prefix))?;
            Some(format!("{dir}/{name}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions() {
        for (text, want) in [
            (
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version: x\n",
                Some("550.54.15"),
            ),
            (
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build  (dvs-builder@U16)\n",
                Some("560.35.03"),
            ),
            ("garbage", None),
        ] {
            assert_eq!(parse_driver_version(text).as_deref(), want);
        }
    }

    #[test]
    fn gpu_information() {
        let text = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-0a\nBus Location: \t 0000:3B:00.0\nDevice Minor: \t 3\n";
        assert_eq!(
            parse_gpu_information(text),
            Some((
                "NVIDIA H100 80GB HBM3".into(),
                "GPU-0a".into(),
                "0000:3b:00.0".into(),
                3
            ))
        );
        assert_eq!(parse_gpu_information("Model: x\n"), None);
    }

    #[test]
    fn mig_minors() {
        let m = parse_mig_minors("config 1\nmonitor 2\ngpu0/gi1/access 3\ngpu0/gi1/ci0/access 4\n");
        assert_eq!(m.get("gpu0/gi1/ci0/access"), Some(&4));
        assert_eq!(m.get("config"), Some(&1));
    }
}
