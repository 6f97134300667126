//! Discovery glue: reads a host (through a [`DriverRoot`]) eagerly into one plain
//! [`Inventory`] value. Read-only: nothing here mounts, writes or execs.

use crate::devices::{self, DevicesError};
use crate::driver;
use crate::nvml;
use nvct_formats::ldcache;
use nvct_formats::root::DriverRoot;
use nvct_model::{DriverFile, Needs};
pub use nvct_model::{Gpu, Inventory, MigDevice, ProcDriver};
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

/// Reads the host, everything ([`read`] with NVML needed and [`Files::All`]). NVML (from the
/// driver root's `libnvidia-ml.so.1`) gives the GPUs when it loads; otherwise
/// `/proc/driver/nvidia` does. NOTE: a real NVML starts threads, and `setns` into a mount
/// namespace refuses a process with more than one: check (`out::prestart` does), or enter in
/// a fresh child process.
pub fn discover(root: &DriverRoot) -> Result<Inventory, DiscoverError> {
    read(root, Nvml::Needed, Files::All)
}

/// [`discover`] for a CDI spec (`nvidia-ctk cdi generate`, the installer): the same, except
/// that the `gpus/<bus id>/` files of `/proc/driver/nvidia` are not read. A spec only says
/// whether there is a mask (the `disable-device-node-modification` hook reads the files when a
/// container starts), and on a 64-GPU node those are a quarter of discovery's syscalls.
pub fn discover_for_spec(root: &DriverRoot) -> Result<Inventory, DiscoverError> {
    read(root, Nvml::Needed, Files::ButProcGpus(Needs::ALL))
}

/// When discovery loads NVML.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Nvml {
    /// The request needs NVML's answers.
    Needed,
    /// Only when `/proc/driver/nvidia` has no driver version.
    IfNoProcfs,
    Never,
}

/// What discovery reads besides the GPUs and their device nodes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Files {
    /// Nothing: the device rules need no more (and no DRM nodes unless the needs have them).
    Devices(Needs),
    /// The driver's files and its procfs files, each GPU's included (the /proc mask).
    All,
    /// The driver's files and its procfs files but the GPUs' own (`gpus/<bus id>/` and their
    /// MIG devices' `capabilities/` files): the mask's presence without its per-GPU texts, all
    /// that CDI edits need (their hook reads the files when the container starts); of the
    /// driver's files, those these needs use (a spec: all; jit-cdi: its request's).
    ButProcGpus(Needs),
    /// [`Files::All`] but the parts a request with these needs does not use, and no GPU's
    /// own procfs files (the prestart hook's: it plans for one request, and adds the files of
    /// the GPUs it selects with [`read_proc_gpus`]).
    For(Needs),
}

impl Nvml {
    /// [`Nvml::Needed`] for a request that needs it, else [`Nvml::IfNoProcfs`].
    pub fn wanted(needed: bool) -> Nvml {
        if needed {
            Nvml::Needed
        } else {
            Nvml::IfNoProcfs
        }
    }
}

/// The host, as much of it as `files` says, NVML loaded as `use_nvml` says (the functions above
/// name the usual combinations).
pub fn read(root: &DriverRoot, use_nvml: Nvml, files: Files) -> Result<Inventory, DiscoverError> {
    let mut notes = Vec::new();
    let version_path = root.proc_path("driver/nvidia/version");
    let proc_version = devices::read_proc_file(&version_path)
        .ok()
        .and_then(|t| devices::parse_driver_version(&t));
    let skip_nvml = match use_nvml {
        Nvml::Needed => false,
        Nvml::IfNoProcfs => proc_version.is_some(),
        Nvml::Never => true,
    };
    let cache_path = root.host_path("/etc/ld.so.cache");
    // Not read at all (a real host's is tens of KB) when nothing found through it is used.
    let cache = if matches!(files, Files::Devices(_)) && skip_nvml {
        Vec::new()
    } else {
        ldcache::read(&cache_path).unwrap_or_else(|e| {
            notes.push(format!("no usable ld cache in the driver root: {e}"));
            Vec::new()
        })
    };
    let nvml = match driver::nvml_library(root, &cache) {
        _ if use_nvml == Nvml::Never => Err("not loaded by a statically linked binary".into()),
        _ if skip_nvml => Err(
            "not needed for this request (no MIG device, cuda, brand or arch requirement)".into(),
        ),
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
    let needs = match files {
        Files::For(needs) | Files::Devices(needs) | Files::ButProcGpus(needs) => needs,
        Files::All => Needs::ALL,
    };
    let mut nodes = devices::nodes(root, &gpus)?;
    let (drm_nodes, drm) = match needs.drm {
        true => devices::drm(root, &gpus),
        false => Default::default(),
    };
    nodes.extend(drm_nodes);
    nodes.sort();
    let mig_minors = devices::read_proc_file(&root.proc_path("driver/nvidia-caps/mig-minors"))
        .map(|t| devices::parse_mig_minors(&t))
        .unwrap_or_default();
    let (files, proc_driver) = match files {
        Files::All => driver_files(
            root,
            &driver_version,
            &cache,
            &gpus,
            &gpus,
            &mig_minors,
            needs,
        ),
        // No GPUs for the procfs part: none of their files are read ([`read_proc_gpus`] adds
        // the selected GPUs' for the prestart hook).
        Files::For(_) => driver_files(
            root,
            &driver_version,
            &cache,
            &[],
            &gpus,
            &mig_minors,
            needs,
        ),
        Files::ButProcGpus(_) => {
            driver_files(root, &driver_version, &cache, &[], &[], &mig_minors, needs)
        }
        Files::Devices(_) => (Vec::new(), None),
    };
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

/// The driver's files on the host, and its procfs files for the /proc mask.
fn driver_files(
    root: &DriverRoot,
    driver_version: &str,
    cache: &[ldcache::Entry],
    proc_gpus: &[Gpu],
    mig_gpus: &[Gpu],
    mig_minors: &BTreeMap<String, u32>,
    needs: Needs,
) -> (Vec<DriverFile>, Option<ProcDriver>) {
    let mut files = driver::libraries(root, driver_version, cache);
    if needs.lib32 {
        files.extend(driver::libraries32(root, driver_version, cache));
    }
    files.extend(driver::binaries(root));
    files.extend(driver::firmware(root, driver_version));
    if needs.configs {
        files.extend(driver::configs(root));
    }
    files.extend(driver::ipc(root));
    files.extend(crate::optin::files(root));
    // The capability files of each MIG device (the mask shows a container its own), and the
    // MIG config and monitor capabilities.
    let caps: Vec<String> = mig_gpus
        .iter()
        .flat_map(|g| {
            g.migs.iter().flat_map(move |m| {
                [
                    format!("gpu{}/gi{}/access", g.minor, m.gi),
                    format!("gpu{}/gi{}/ci{}/access", g.minor, m.gi, m.ci),
                ]
            })
        })
        .chain(
            (!mig_minors.is_empty())
                .then(|| ["config".to_string(), "monitor".to_string()])
                .into_iter()
                .flatten(),
        )
        .collect();
    (files, read_proc_driver(root, proc_gpus, &caps))
}

/// The driver's procfs files under `root.proc_root` (`None` without `driver/nvidia/version`),
/// with the `gpus/<bus id>/` files of `gpus` and the `capabilities/` files of `caps` (names as
/// `mig-minors` has them; those the host lacks are left out). Also read by the CDI hook
/// `disable-device-node-modification`.
pub fn read_proc_driver(root: &DriverRoot, gpus: &[Gpu], caps: &[String]) -> Option<ProcDriver> {
    let read = |rel: &str| devices::read_proc_file(&root.proc_path(rel)).ok();
    let mut pd = ProcDriver {
        version: read("driver/nvidia/version")?,
        params: read("driver/nvidia/params").unwrap_or_default(),
        registry: read("driver/nvidia/registry").unwrap_or_default(),
        gpu_files: BTreeMap::new(),
        caps: BTreeMap::new(),
    };
    for name in caps {
        let Some(rel) = ProcDriver::cap_path(name) else {
            continue;
        };
        if let Some(text) = read(&format!("driver/nvidia/{rel}")) {
            pd.caps.insert(name.clone(), text);
        }
    }
    for gpu in gpus {
        read_gpu_files(root, &mut pd, &gpu.bus_id);
    }
    Some(pd)
}

/// Adds the `gpus/<bus id>/` files of each of `bus_ids` to an inventory read with
/// [`Files::For`], which leaves them out: the prestart hook reads those of the GPUs its
/// request selects (`plan::selected_bus_ids`), all that the /proc mask shows.
pub fn read_proc_gpus(root: &DriverRoot, inv: &mut Inventory, bus_ids: &[String]) {
    if let Some(pd) = inv.proc_driver.as_mut() {
        for bus_id in bus_ids {
            if !pd.gpu_files.contains_key(bus_id) {
                read_gpu_files(root, pd, bus_id);
            }
        }
    }
}

fn read_gpu_files(root: &DriverRoot, pd: &mut ProcDriver, bus_id: &str) {
    let dir = root.proc_path(format!("driver/nvidia/gpus/{bus_id}"));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
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
    pd.gpu_files.insert(bus_id.to_string(), files);
}
