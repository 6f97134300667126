//! The driver and its user space: the checks `driver` (the kernel module is loaded from the
//! driver root), `nvml` (libnvidia-ml loads and answers, quickly), `persistence mode` and
//! `libraries` (the driver's libraries each capability needs, in the ld cache).

use super::config::config_file_flag;
use super::{check, ok, Check, Status};
use nvct_formats::ldcache;
use nvct_formats::root::DriverRoot;
use nvct_host::{devices, driver, nvml};
use nvct_model::{Capability, FileKind, Inventory};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

/// NVML initialisation slower than this is worth a warning (no persistence daemon).
const SLOW_NVML_MS: u128 = 1000;

pub(super) fn driver_check(root: &DriverRoot, config_path: &Path) -> Check {
    let version_file = root.proc_path("driver/nvidia/version");
    let fix = format!(
        "load the driver (`modprobe nvidia`), or set nvidia-container-cli.root in {} to where \
         the driver is (`/run/nvidia/driver` with the GPU Operator's driver container)",
        config_path.display()
    );
    if !root.root.is_dir() {
        return check(
            "driver",
            Status::Fail,
            format!(
                "driver root {} is not a directory: every GPU check needs it",
                root.root.display()
            ),
            format!(
                "set nvidia-container-cli.root to where the driver is: `nvidia-ctk config --set nvidia-container-cli.root=/ --in-place{}` for a driver installed on the host; with the GPU Operator's driver container, /run/nvidia/driver appears once that container runs",
                config_file_flag(config_path)
            ),
        );
    }
    match devices::read_proc_file(&version_file)
        .ok()
        .and_then(|t| devices::parse_driver_version(&t))
    {
        Some(v) => ok(
            "driver",
            format!(
                "driver {v} loaded ({}); driver root {}",
                version_file.display(),
                root.root.display()
            ),
        ),
        None => check(
            "driver",
            Status::Fail,
            format!(
                "{} is missing or unreadable: the kernel module is not loaded",
                version_file.display()
            ),
            fix,
        ),
    }
}

pub(super) fn nvml_check(root: &DriverRoot, cache: &[ldcache::Entry]) -> Check {
    let Some(lib) = driver::nvml_library(root, cache) else {
        return check(
            "nvml",
            Status::Fail,
            format!(
                "libnvidia-ml.so.1 not found under {} (ld cache and lib dirs)",
                root.root.display()
            ),
            "install the driver's user-space libraries, or point nvidia-container-cli.root at them",
        );
    };
    let start = Instant::now();
    let result = nvml::discover_gpus(&lib);
    let ms = start.elapsed().as_millis();
    match result {
        Ok(host) if ms > SLOW_NVML_MS => check(
            "nvml",
            Status::Warn,
            format!("{}: initialised in {ms} ms, {} GPUs", lib.display(), host.gpus.len()),
            "enable persistence (`nvidia-smi -pm 1`, or `systemctl enable --now nvidia-persistenced`): every container start pays this",
        ),
        Ok(host) => ok(
            "nvml",
            format!(
                "{}: initialised in {ms} ms, driver {}, {} GPUs",
                lib.display(),
                host.driver_version,
                host.gpus.len()
            ),
        ),
        Err(e) => check(
            "nvml",
            Status::Fail,
            e.to_string(),
            format!(
                "check that {} belongs to the loaded driver (same version as /proc/driver/nvidia/version) and that `nvidia-smi` works",
                lib.display()
            ),
        ),
    }
}

pub(super) fn persistence_check(inv: &Inventory) -> Check {
    let off: Vec<String> = inv
        .gpus
        .iter()
        .filter(|g| g.persistence_mode == Some(false))
        .map(|g| g.index.to_string())
        .collect();
    let unknown = inv.gpus.iter().all(|g| g.persistence_mode.is_none());
    let fix = "`nvidia-smi -pm 1`, or run the persistence daemon: `systemctl enable --now nvidia-persistenced`";
    if !off.is_empty() {
        return check(
            "persistence mode",
            Status::Warn,
            format!(
                "off on GPU {}: every container start re-initialises the GPU (slow starts)",
                off.join(", ")
            ),
            fix,
        );
    }
    if unknown {
        return check(
            "persistence mode",
            Status::Warn,
            "unknown (NVML did not answer)",
            fix,
        );
    }
    ok("persistence mode", "on for every GPU")
}

pub(super) fn libraries_check(
    inv: &Inventory,
    cache_path: &Path,
    cache: Option<&[ldcache::Entry]>,
) -> Check {
    let found: BTreeSet<&str> = inv
        .files
        .iter()
        .filter(|f| f.kind == FileKind::Library)
        .map(|f| f.name.as_str())
        .collect();
    let cached: BTreeSet<&str> = cache
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e.soname.split(".so").next())
        .collect();
    let mut detail = Vec::new();
    let mut problems = Vec::new();
    for cap in Capability::ALL {
        let families = nvct_model::tables::libraries_for(cap);
        if families.is_empty() {
            continue;
        }
        let have: Vec<&&str> = families.iter().filter(|f| found.contains(**f)).collect();
        detail.push(format!("{} {}/{}", cap.name(), have.len(), families.len()));
        // What every CUDA container needs: libcuda (compute) and libnvidia-ml (utility).
        let required: &[&str] = match cap {
            Capability::Compute => &["libcuda"],
            Capability::Utility => &["libnvidia-ml"],
            _ => &[],
        };
        for r in required {
            if !found.contains(r) {
                problems.push(format!(
                    "{r} ({}) not found for driver {}",
                    cap.name(),
                    inv.driver_version
                ));
            } else if !cached.contains(r) {
                problems.push(format!(
                    "{r} ({}) is not in {}",
                    cap.name(),
                    cache_path.display()
                ));
            }
        }
    }
    if problems.is_empty() {
        return ok(
            "libraries",
            format!("driver {}: {}", inv.driver_version, detail.join(", ")),
        );
    }
    check(
        "libraries",
        Status::Fail,
        format!("{}; found: {}", problems.join("; "), detail.join(", ")),
        format!(
            "reinstall the driver's user-space libraries for {} and run `ldconfig` in the driver root",
            inv.driver_version
        ),
    )
}
