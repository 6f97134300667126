//! NVML discovery: the crate's only FFI (its one raw call is `sys/nvml.rs`).
//!
//! Owns: loading `libnvidia-ml.so.1` from a path the caller names (through `nvml-wrapper`),
//! reading driver/CUDA versions and the GPUs (compute capabilities included) with their MIG devices into plain data, and closing
//! the library again. Must not: look for the library anywhere else, keep NVML open past one call,
//! or mount, write or exec anything.
//!
//! Pitfall: a real `libnvidia-ml` starts threads when it is initialised, and `setns(CLONE_NEWNS)`
//! fails with `EINVAL` in a multi-threaded process. A process that calls [`discover_gpus`] must
//! therefore not enter a container's mount namespace afterwards; do the namespace work in a fresh
//! child, or answer from `/proc/driver/nvidia` without NVML.

use nvct_model::{normalize_bus_id, Gpu, MigDevice};
use nvct_sys::nvml::{mig_instance_id, Instance};
use nvml_wrapper::error::NvmlError as WrapperError;
use nvml_wrapper::{Device, Nvml};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What NVML reports about a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NvmlHost {
    /// Kernel driver version, e.g. `550.54.15`.
    pub driver_version: String,
    /// CUDA driver API version, e.g. `12.4`; `None` when NVML cannot tell.
    pub cuda_version: Option<String>,
    /// Physical GPUs sorted by NVML index.
    pub gpus: Vec<Gpu>,
}

/// A failure to load or query NVML; every variant names the library.
#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    #[error("cannot load and initialise NVML from {}: {source}", lib.display())]
    Init {
        lib: PathBuf,
        #[source]
        source: WrapperError,
    },
    #[error("NVML query `{what}` failed (library {}): {source}", lib.display())]
    Query {
        lib: PathBuf,
        what: String,
        #[source]
        source: WrapperError,
    },
    #[error("NVML (library {}) reported {what} with an unparsable PCI bus id {bus_id:?}", lib.display())]
    BusId {
        lib: PathBuf,
        what: String,
        bus_id: String,
    },
}

/// Loads NVML from `lib` and reads the driver version, CUDA version and every GPU with its MIG
/// devices. See the module doc for why the calling process must not `setns` afterwards.
pub fn discover_gpus(lib: &Path) -> Result<NvmlHost, NvmlError> {
    let nvml = Nvml::builder()
        .lib_path(lib.as_os_str())
        .init()
        .map_err(|source| NvmlError::Init {
            lib: lib.to_owned(),
            source,
        })?;
    let query = |what: &str| {
        let what = what.to_owned();
        move |source| NvmlError::Query {
            lib: lib.to_owned(),
            what,
            source,
        }
    };

    let driver_version = nvml.sys_driver_version().map_err(query("driver version"))?;
    let cuda_version = nvml
        .sys_cuda_driver_version()
        .ok()
        .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));

    let count = nvml.device_count().map_err(query("device count"))?;
    let mut gpus = Vec::with_capacity(count as usize);
    for i in 0..count {
        let device = nvml
            .device_by_index(i)
            .map_err(query(&format!("device {i}: handle")))?;
        gpus.push(read_gpu(&device, i, lib)?);
    }
    gpus.sort_by_key(|gpu| gpu.index);
    Ok(NvmlHost {
        driver_version,
        cuda_version,
        gpus,
    })
}

fn read_gpu(device: &Device, i: u32, lib: &Path) -> Result<Gpu, NvmlError> {
    let query = |what: &str| {
        let what = format!("device {i}: {what}");
        move |source| NvmlError::Query {
            lib: lib.to_owned(),
            what,
            source,
        }
    };
    let pci = device.pci_info().map_err(query("PCI info"))?;
    let bus_id = normalize_bus_id(&pci.bus_id).ok_or_else(|| NvmlError::BusId {
        lib: lib.to_owned(),
        what: format!("device {i}"),
        bus_id: pci.bus_id.clone(),
    })?;
    // GPUs without MIG support answer NotSupported: that is "MIG off", not a failure.
    let mig_enabled = match device.mig_mode() {
        Ok(mode) => mode.current == 1,
        Err(WrapperError::NotSupported) => false,
        Err(e) => return Err(query("MIG mode")(e)),
    };
    let migs = if mig_enabled {
        read_migs(device, i, lib)?
    } else {
        Vec::new()
    };
    Ok(Gpu {
        index: device.index().map_err(query("index"))?,
        minor: device.minor_number().map_err(query("minor number"))?,
        uuid: device.uuid().map_err(query("UUID"))?,
        bus_id,
        model: device.name().map_err(query("name"))?,
        // Not every driver answers for every part: unknown is "", the requirement not checked.
        brand: device
            .brand()
            .map(|b| format!("{b:?}").to_lowercase())
            .unwrap_or_default(),
        memory_mib: device
            .memory_info()
            .map(|m| m.total / (1024 * 1024))
            .unwrap_or(0),
        persistence_mode: device.is_in_persistent_mode().ok(),
        // What libnvidia-container compares `arch` requirement terms with (`9.0`).
        compute_capability: device
            .cuda_compute_capability()
            .ok()
            .map(|cc| format!("{}.{}", cc.major, cc.minor)),
        mig_enabled,
        migs,
    })
}

/// Lists the MIG devices of one GPU. Slots `0..max` may be sparse; empty ones answer NotFound.
fn read_migs(device: &Device, i: u32, lib: &Path) -> Result<Vec<MigDevice>, NvmlError> {
    let query = |what: String| {
        move |source| NvmlError::Query {
            lib: lib.to_owned(),
            what,
            source,
        }
    };
    let max = device
        .mig_device_count()
        .map_err(query(format!("device {i}: MIG device count")))?;
    let mut migs = Vec::new();
    for j in 0..max {
        let mig = match device.mig_device_by_index(j) {
            Ok(mig) => mig,
            Err(WrapperError::NotFound) => continue,
            Err(e) => return Err(query(format!("device {i}: MIG device {j}"))(e)),
        };
        migs.push(MigDevice {
            index: j,
            gi: mig_instance_id(&mig, Instance::Gpu)
                .map_err(query(format!("MIG device {i}:{j}: GPU instance id")))?,
            ci: mig_instance_id(&mig, Instance::Compute)
                .map_err(query(format!("MIG device {i}:{j}: compute instance id")))?,
            uuid: mig
                .uuid()
                .map_err(query(format!("MIG device {i}:{j}: UUID")))?,
        });
    }
    Ok(migs)
}
