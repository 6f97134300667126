//! Discovery glue: reads a host (through a [`DriverRoot`]) eagerly into one plain
//! [`Inventory`] value. Read-only: nothing here mounts, writes or execs.

use crate::devices::{self, DevicesError};
use crate::driver;
use crate::model::{DeviceId, Devices};
pub use crate::model::{Gpu, Inventory, MigDevice, ProcDriver};
use crate::request::Request;
use crate::root::DriverRoot;
use crate::{ldcache, nvml};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error(
        "no NVIDIA driver found: {proc_version} is missing and NVML could not be loaded ({nvml}); \
             is the driver installed and is nvidia-container-cli.root ({root}) right?"
    )]
    NoDriver {
        proc_version: PathBuf,
        nvml: String,
        root: PathBuf,
    },
    #[error(transparent)]
    Devices(#[from] DevicesError),
}

/// Whether answering `req` needs what only NVML knows: MIG devices (`0:1`, `MIG-…`), and the
/// CUDA version and brands that `cuda` and `brand` requirement terms compare. Indices, GPU
/// UUIDs and bus ids are in `/proc/driver/nvidia/gpus/*/information` (indices in bus-id
/// order, as NVML numbers the GPUs).
pub fn needs_nvml(req: &Request) -> bool {
    let mig = |id: &DeviceId| match id {
        DeviceId::MigIndex(..) => true,
        DeviceId::Uuid(u) => u.starts_with("MIG-"),
        _ => false,
    };
    let devices = matches!(&req.devices, Devices::List(ids) if ids.iter().any(mig));
    let terms = req.requirements.iter().any(|e| {
        let e = e.to_ascii_lowercase();
        e.contains("cuda") || e.contains("brand")
    });
    devices || terms
}

/// [`discover`] for one container's request: NVML is not loaded when `/proc/driver/nvidia`
/// answers it ([`needs_nvml`]); on a real host NVML's initialisation is the slowest step of
/// discovery (tens to hundreds of milliseconds without persistence mode).
pub fn for_request(root: &DriverRoot, req: &Request) -> Result<Inventory, DiscoverError> {
    discover_with(root, needs_nvml(req))
}

/// Reads the host. NVML (from the driver root's `libnvidia-ml.so.1`) gives the GPUs when it
/// loads; otherwise `/proc/driver/nvidia` does. NOTE: a real NVML starts threads; callers
/// that enter another mount namespace afterwards must do so in a fresh child process.
pub fn discover(root: &DriverRoot) -> Result<Inventory, DiscoverError> {
    discover_with(root, true)
}

/// [`discover`]; with `nvml` false, NVML is loaded only when `/proc/driver/nvidia` has no
/// driver version.
fn discover_with(root: &DriverRoot, nvml: bool) -> Result<Inventory, DiscoverError> {
    let mut notes = Vec::new();
    let cache_path = root.host_path("/etc/ld.so.cache");
    let cache = match ldcache::read(&cache_path) {
        Ok(c) => c,
        Err(e) => {
            notes.push(format!("no usable ld cache in the driver root: {e}"));
            Vec::new()
        }
    };
    let version_path = root.proc_path("driver/nvidia/version");
    let proc_version = devices::read_proc_file(&version_path)
        .ok()
        .and_then(|t| devices::parse_driver_version(&t));
    let nvml = match driver::nvml_library(root, &cache) {
        _ if !nvml && proc_version.is_some() => {
            Err("not needed for this request (no MIG device, cuda or brand requirement)".into())
        }
        Some(lib) => nvml::discover_gpus(&lib).map_err(|e| e.to_string()),
        None => Err(format!(
            "libnvidia-ml.so.1 not found under {}",
            root.root.display()
        )),
    };

    let (driver_version, cuda_version, gpus) = match (nvml, proc_version) {
        (Ok(host), _) => (host.driver_version, host.cuda_version, host.gpus),
        (Err(e), Some(version)) => {
            notes.push(format!(
                "NVML not used: {e}; reading GPUs from {}",
                root.proc_path("driver/nvidia").display()
            ));
            (version, None, devices::gpus_from_proc(root)?)
        }
        (Err(nvml), None) => {
            return Err(DiscoverError::NoDriver {
                proc_version: version_path,
                nvml,
                root: root.root.clone(),
            })
        }
    };
    let mut nodes = devices::nodes(root, &gpus)?;
    let (drm_nodes, drm) = devices::drm(root, &gpus);
    nodes.extend(drm_nodes);
    nodes.sort();
    let mig_minors = devices::read_proc_file(&root.proc_path("driver/nvidia-caps/mig-minors"))
        .map(|t| devices::parse_mig_minors(&t))
        .unwrap_or_default();
    let mut files = driver::libraries(root, &driver_version, &cache);
    files.extend(driver::libraries32(root, &driver_version, &cache));
    files.extend(driver::binaries(root));
    files.extend(driver::firmware(root, &driver_version));
    files.extend(driver::configs(root));
    files.extend(driver::ipc(root));
    files.extend(crate::optin::files(root));
    let proc_driver = read_proc_driver(root, &gpus);
    Ok(Inventory {
        driver_version,
        cuda_version,
        gpus,
        nodes,
        drm,
        mig_minors,
        files,
        proc_driver,
        notes,
    })
}

/// The driver's procfs files under `root.proc_root` (`None` without `driver/nvidia/version`),
/// with the `gpus/<bus id>/` files of `gpus`. Also read by the CDI hook
/// `disable-device-node-modification`.
pub(crate) fn read_proc_driver(root: &DriverRoot, gpus: &[Gpu]) -> Option<ProcDriver> {
    let read = |rel: &str| devices::read_proc_file(&root.proc_path(rel)).ok();
    let mut pd = ProcDriver {
        version: read("driver/nvidia/version")?,
        params: read("driver/nvidia/params").unwrap_or_default(),
        registry: read("driver/nvidia/registry").unwrap_or_default(),
        gpu_files: BTreeMap::new(),
    };
    for gpu in gpus {
        let dir = root.proc_path(format!("driver/nvidia/gpus/{}", gpu.bus_id));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<(String, String)> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| {
                Some((
                    e.file_name().into_string().ok()?,
                    devices::read_proc_file(&e.path()).ok()?,
                ))
            })
            .collect();
        files.sort();
        pd.gpu_files.insert(gpu.bus_id.clone(), files);
    }
    Some(pd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_nvml_cases() {
        let req = |devices: Devices, requirements: &[&str]| Request {
            devices,
            capabilities: Default::default(),
            requirements: requirements.iter().map(|s| s.to_string()).collect(),
            mig_config: None,
            mig_monitor: None,
            imex_channels: None,
            cuda_compat: false,
            opt_ins: Default::default(),
        };
        let list =
            |ids: &[&str]| Devices::List(ids.iter().map(|i| DeviceId::parse(i).unwrap()).collect());
        let cases = [
            ("index", req(list(&["0", "1"]), &[]), false),
            (
                "GPU UUID",
                req(list(&["GPU-8f6b4f47-0000-0000-0000-000000000000"]), &[]),
                false,
            ),
            ("bus id", req(list(&["0000:3b:00.0"]), &[]), false),
            ("all", req(Devices::All, &[]), false),
            ("MIG index", req(list(&["0", "0:1"]), &[]), true),
            (
                "MIG UUID",
                req(list(&["MIG-8f6b4f47-0000-0000-0000-000000000000"]), &[]),
                true,
            ),
            (
                "driver and arch terms",
                req(Devices::All, &["driver>=535 arch=x86_64"]),
                false,
            ),
            ("cuda term", req(Devices::All, &["cuda>=12.0"]), true),
            (
                "brand term, upper case",
                req(Devices::All, &["BRAND=tesla"]),
                true,
            ),
        ];
        for (name, r, want) in cases {
            assert_eq!(needs_nvml(&r), want, "case {name}");
        }
    }
}
