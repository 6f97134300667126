//! PURE: (Request, Inventory, container layout) → [`Plan`], the complete list of what a GPU
//! container gets. Every output (the hook's apply, the shim's spec edit, a CDI spec) is
//! computed from this one value. Order is deterministic; nothing here touches the system.

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod policy;
pub mod request;

use crate::request::{Capability, DeviceId, Devices, ImexChannels, Request};
use nvct_model::tables::{self as driver, IMEX_CHANNEL_DIR};
pub use nvct_model::{CgroupRule, FileMount, Layout, Plan, ProcMask, Symlink};
use nvct_model::{DeviceNode, DriverFile, FileKind, Gpu, Inventory, Needs, ProcDriver};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("unknown device \"{id}\" requested: this host has {}; check NVIDIA_VISIBLE_DEVICES", gpu_count(*count))]
    UnknownDevice { id: DeviceId, count: usize },
    #[error("device {id:?} is a MIG device but MIG is not enabled on GPU {gpu}")]
    MigNotEnabled { id: String, gpu: u32 },
    #[error("driver device node {0} is missing on the host; is the NVIDIA driver loaded (nvidia-modprobe) and dev-root right?")]
    MissingNode(String),
    #[error("MIG capability {0:?} is not in /proc/driver/nvidia-caps/mig-minors")]
    MissingMigCap(String),
    #[error(
        "requirement {expr:?} is not met by this host ({facts}); run the container on a host \
             that meets it, or set NVIDIA_DISABLE_REQUIRE=true in the container to skip the check"
    )]
    Unsatisfied { expr: String, facts: String },
    #[error("cannot parse requirement {0:?} (expected terms like cuda>=12.0, driver>=470, arch>=7.5 (a compute capability) or brand=tesla; comma = and, space = or)")]
    BadRequirement(String),
}

/// "no GPU", "1 GPU (index 0)", "8 GPUs (indices 0 to 7)".
fn gpu_count(count: usize) -> String {
    match count {
        0 => "no GPU".into(),
        1 => "1 GPU (index 0)".into(),
        n => format!("{n} GPUs (indices 0 to {})", n - 1),
    }
}

/// The one rule for `/proc/driver/nvidia` in a container, for both output paths: `params` with
/// `ModifyDeviceFiles: 0`, `registry`, `version`, the `gpus/<bus id>/` files of the GPUs in
/// `bus_ids` only (the container's own GPUs), and the `capabilities/` files of `caps` only
/// (names as `mig-minors` has them: the `access` files of the container's own MIG devices,
/// which libnvidia-container mounts for each, and `config` / `monitor` when it asked for them).
pub fn proc_mask(pd: &ProcDriver, bus_ids: &[&str], caps: &[String]) -> ProcMask {
    let mut files = vec![
        (
            PathBuf::from("params"),
            params_without_device_modification(&pd.params),
        ),
        (PathBuf::from("registry"), pd.registry.clone()),
        (PathBuf::from("version"), pd.version.clone()),
    ];
    for bus_id in bus_ids {
        for (name, text) in pd.gpu_files.get(*bus_id).into_iter().flatten() {
            files.push((Path::new("gpus").join(bus_id).join(name), text.clone()));
        }
    }
    for name in caps {
        if let (Some(rel), Some(text)) = (ProcDriver::cap_path(name), pd.caps.get(name)) {
            files.push((PathBuf::from(rel), text.clone()));
        }
    }
    files.sort();
    files.dedup();
    ProcMask { files }
}

/// The device node paths of the IMEX channels `ch` names. The planner requires each; so does
/// the shim's jit-cdi.
pub fn imex_channel_paths(ch: &ImexChannels) -> Vec<String> {
    let ImexChannels::List(ids) = ch;
    ids.iter()
        .map(|id| format!("{IMEX_CHANNEL_DIR}/channel{id}"))
        .collect()
}

pub fn plan(req: &Request, inv: &Inventory, layout: &Layout) -> Result<Plan, PlanError> {
    let mut notes = Vec::new();
    let selected = select(&req.devices, inv)?;
    // The GPUs requirements are checked against: each selected one (a MIG device's parent), once.
    let mut gpus: Vec<&Gpu> = Vec::new();
    for (g, _) in &selected {
        if !gpus.iter().any(|have| have.index == g.index) {
            gpus.push(g);
        }
    }
    for expr in &req.requirements {
        check_requirement(expr, inv, &gpus, &mut notes)?;
    }
    let caps = &req.capabilities;

    let mut wanted: Vec<(String, bool)> = vec![("/dev/nvidiactl".into(), true)];
    // The capabilities (`mig-minors` names) whose `/proc` files the container sees.
    let mut proc_caps: Vec<String> = Vec::new();
    if caps.contains(&Capability::Compute) {
        wanted.push(("/dev/nvidia-uvm".into(), false));
        wanted.push(("/dev/nvidia-uvm-tools".into(), false));
    }
    if caps.contains(&Capability::Display) {
        wanted.push(("/dev/nvidia-modeset".into(), false));
    }
    for (gpu, mig) in &selected {
        wanted.push((format!("/dev/nvidia{}", gpu.minor), true));
        if let Some(m) = mig {
            for cap in [
                format!("gpu{}/gi{}/access", gpu.minor, m.gi),
                format!("gpu{}/gi{}/ci{}/access", gpu.minor, m.gi, m.ci),
            ] {
                wanted.push((mig_cap_node(inv, &cap)?, true));
                proc_caps.push(cap);
            }
        }
    }
    for (devices, cap) in [(&req.mig_config, "config"), (&req.mig_monitor, "monitor")] {
        if devices.is_some() {
            wanted.push((mig_cap_node(inv, cap)?, true));
            proc_caps.push(cap.to_string());
        }
    }
    if let Some(ch) = &req.imex_channels {
        wanted.extend(imex_channel_paths(ch).into_iter().map(|p| (p, true)));
    }
    // The opt-in sets: every node of each the host has (none: a note), and their files.
    let (optin_nodes, optin_files, optin_notes) = policy::opt_in_select(&req.opt_ins, inv);
    notes.extend(optin_notes);
    wanted.extend(
        optin_nodes
            .iter()
            .map(|n| (n.path.display().to_string(), true)),
    );
    // graphics, display: each selected GPU's DRM nodes and their /dev/dri/by-path links, as
    // upstream (a MIG device gets none: upstream gives them only to MIG devices with the
    // `gfx` attribute, which NVML does not report here).
    let mut drm_links: Vec<Symlink> = Vec::new();
    if caps.contains(&Capability::Graphics) || caps.contains(&Capability::Display) {
        for (gpu, _) in selected.iter().filter(|(_, mig)| mig.is_none()) {
            match inv.drm.get(&gpu.bus_id) {
                Some(drm) => {
                    wanted.extend(drm.nodes.iter().map(|p| (p.display().to_string(), true)));
                    drm_links.extend(drm.by_path.iter().map(|(target, link)| Symlink {
                        target: target.clone(),
                        link: link.clone(),
                    }));
                }
                None => notes.push(format!(
                    "GPU {} ({}) has no DRM nodes on the host (no /dev/dri card or render node \
                     under its sysfs drm directory): none given",
                    gpu.index, gpu.bus_id
                )),
            }
        }
    }
    let device_nodes = find_nodes(wanted, inv, &mut notes)?;
    let cgroup_rules = device_nodes
        .iter()
        .map(|n| CgroupRule {
            major: n.major,
            minor: n.minor,
        })
        .collect();

    let mounts = file_mounts(caps, inv, layout, &optin_files);
    let lib_dirs: BTreeSet<PathBuf> = mounts
        .iter()
        .filter(|m| matches!(m.kind, FileKind::Library | FileKind::Library32))
        .filter_map(|m| m.container_path.parent().map(Path::to_path_buf))
        .collect();
    let ldcache_dirs: Vec<PathBuf> = lib_dirs.into_iter().collect();

    let mut symlinks = library_links(&mounts, caps, layout);
    symlinks.extend(drm_links);
    symlinks.sort();
    symlinks.dedup();
    let bus_ids: Vec<&str> = selected
        .iter()
        .map(|(gpu, _)| gpu.bus_id.as_str())
        .collect();
    let proc_mask = inv
        .proc_driver
        .as_ref()
        .map(|pd| proc_mask(pd, &bus_ids, &proc_caps));
    let compute = caps.contains(&Capability::Compute);
    let cuda_compat =
        (req.cuda_compat && compute && !inv.driver_version.is_empty() && !ldcache_dirs.is_empty())
            .then(|| inv.driver_version.clone());
    let libcuda_dirs: BTreeSet<&Path> = mounts
        .iter()
        .filter(|m| m.kind == FileKind::Library && !in_vdpau_dir(&m.container_path))
        .filter_map(|m| m.container_path.parent())
        .collect();
    let libcuda_dir = (!libcuda_dirs.is_empty()).then(|| {
        libcuda_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    });
    Ok(Plan {
        device_nodes,
        mounts,
        cgroup_rules,
        symlinks,
        proc_mask,
        cuda_compat,
        ldcache_dirs,
        libcuda_dir,
        // The profile selects the GPUs of EGL and Vulkan, which the graphics libraries bring:
        // with graphics or display (a spec and jit-cdi ask for every capability, so their
        // edits carry it always, as upstream's specs; a compute container gets none, as from
        // upstream's legacy path).
        app_profile: caps.contains(&Capability::Graphics) || caps.contains(&Capability::Display),
        notes,
    })
}

/// The host's nodes for the `wanted` container paths (`required` ones missing refuse the
/// plan; optional ones missing are a note), each once, sorted.
fn find_nodes(
    wanted: Vec<(String, bool)>,
    inv: &Inventory,
    notes: &mut Vec<String>,
) -> Result<Vec<DeviceNode>, PlanError> {
    let mut device_nodes: Vec<DeviceNode> = Vec::new();
    for (path, required) in wanted {
        // Byte equality first: `Path`'s `==` parses components, and a many-GPU spec plans
        // every GPU against a long node list.
        let found = inv
            .nodes
            .iter()
            .find(|n| n.path.as_os_str() == path.as_str())
            .or_else(|| inv.nodes.iter().find(|n| n.path == Path::new(&path)));
        match found {
            Some(n) if !device_nodes.contains(n) => device_nodes.push(n.clone()),
            Some(_) => {}
            None if required => return Err(PlanError::MissingNode(path)),
            None => notes.push(format!(
                "optional device node {path} is not present on the host"
            )),
        }
    }
    device_nodes.sort();
    Ok(device_nodes)
}

/// The driver's files the capabilities `caps` (and the opt-in sets' `optin_files`) bring, each
/// at its container path for `layout`, sorted.
fn file_mounts(
    caps: &BTreeSet<Capability>,
    inv: &Inventory,
    layout: &Layout,
    optin_files: &[&DriverFile],
) -> Vec<FileMount> {
    let families: BTreeSet<&str> = caps
        .iter()
        .flat_map(|c| driver::libraries_for(*c))
        .copied()
        .collect();
    let binaries: BTreeSet<&str> = caps
        .iter()
        .flat_map(|c| driver::binaries_for(*c))
        .copied()
        .collect();
    let ipc: BTreeSet<&str> = caps
        .iter()
        .flat_map(|c| driver::ipc_for(*c))
        .copied()
        .collect();
    let config_dirs: BTreeSet<&str> = caps
        .iter()
        .flat_map(|c| driver::config_dirs_for(*c))
        .map(|(dir, _)| *dir)
        .collect();
    let compat32 = caps.contains(&Capability::Compat32);
    let mut mounts = Vec::new();
    for f in &inv.files {
        let file_name = f
            .driver_path
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_default();
        let container_path = match f.kind {
            FileKind::Library if families.contains(f.name.as_str()) => match &layout.lib_dir {
                // The VDPAU backend keeps its `vdpau/` subdirectory, where libvdpau looks.
                Some(dir) if in_vdpau_dir(&f.driver_path) => {
                    dir.join(driver::VDPAU_DIR).join(file_name)
                }
                Some(dir) => dir.join(file_name),
                None => f.driver_path.clone(),
            },
            // compat32: the 32-bit builds of the families the other capabilities ask for.
            FileKind::Library32 if compat32 && families.contains(f.name.as_str()) => {
                match (&layout.lib_dir, &layout.lib32_dir) {
                    (_, Some(dir)) => dir.join(file_name),
                    (None, None) => f.driver_path.clone(),
                    // A known image with no 32-bit dir apart from its 64-bit one: none.
                    (Some(_), None) => continue,
                }
            }
            FileKind::Binary if binaries.contains(f.name.as_str()) => {
                Path::new("/usr/bin").join(file_name)
            }
            FileKind::Firmware if !caps.is_empty() => f.driver_path.clone(),
            FileKind::Ipc if ipc.contains(f.name.as_str()) => f.driver_path.clone(),
            FileKind::Config if config_dirs.contains(f.name.as_str()) => f.driver_path.clone(),
            // An opt-in set's files come with its nodes (GDS: none, nothing to use them with).
            FileKind::Config if optin_files.contains(&f) => f.driver_path.clone(),
            _ => continue,
        };
        mounts.push(FileMount {
            host_path: f.host_path.clone(),
            container_path,
            kind: f.kind,
        });
    }
    mounts.sort();
    mounts
}

/// The links next to the mounted libraries: `libcuda.so`, and with graphics or display GBM's
/// backend and glvnd's indirect GLX (unless the image has its own), sorted later with the rest.
fn library_links(
    mounts: &[FileMount],
    caps: &BTreeSet<Capability>,
    layout: &Layout,
) -> Vec<Symlink> {
    let mut symlinks: Vec<Symlink> = mounts
        .iter()
        .filter(|m| m.kind == FileKind::Library)
        .find(|m| {
            m.container_path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libcuda.so."))
        })
        .and_then(|m| m.container_path.parent())
        .map(|dir| Symlink {
            target: "libcuda.so.1".into(),
            link: dir.join("libcuda.so"),
        })
        .into_iter()
        .collect();
    // graphics (upstream's CDI links): GBM's `gbm/nvidia-drm_gbm.so` -> the allocator, and
    // glvnd's `libGLX_indirect.so.0` -> libGLX_nvidia unless the image has its own.
    let library = |family: &str| {
        let prefix = format!("{family}.so.");
        mounts.iter().find(|m| {
            m.kind == FileKind::Library
                && m.container_path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix))
        })
    };
    let gfx = caps.contains(&Capability::Graphics) || caps.contains(&Capability::Display);
    if let Some(dir) = library("libnvidia-allocator")
        .filter(|_| gfx)
        .and_then(|m| m.container_path.parent())
    {
        symlinks.push(Symlink {
            target: "../libnvidia-allocator.so.1".into(),
            link: dir.join("gbm/nvidia-drm_gbm.so"),
        });
    }
    if let Some(glx) = library("libGLX_nvidia").filter(|_| gfx && !layout.glx_indirect) {
        if let (Some(dir), Some(name)) =
            (glx.container_path.parent(), glx.container_path.file_name())
        {
            symlinks.push(Symlink {
                target: name.into(),
                link: dir.join("libGLX_indirect.so.0"),
            });
        }
    }
    symlinks
}

/// Whether a library is the driver's `vdpau/` backend directory.
fn in_vdpau_dir(path: &Path) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == driver::VDPAU_DIR)
}

/// The GPUs (and MIG devices) a request names, in request order, each once.
pub fn select<'a>(
    devices: &Devices,
    inv: &'a Inventory,
) -> Result<Vec<(&'a Gpu, Option<&'a nvct_model::MigDevice>)>, PlanError> {
    let ids = match devices {
        Devices::None => return Ok(vec![]),
        Devices::All => return Ok(inv.gpus.iter().map(|g| (g, None)).collect()),
        Devices::List(ids) => ids,
    };
    let unknown = |id: &DeviceId| PlanError::UnknownDevice {
        id: id.clone(),
        count: inv.gpus.len(),
    };
    let mut out: Vec<(&Gpu, Option<&nvct_model::MigDevice>)> = Vec::new();
    for id in ids {
        let found = match id {
            DeviceId::Index(i) => inv.gpus.iter().find(|g| g.index == *i).map(|g| (g, None)),
            DeviceId::BusId(b) => inv.gpus.iter().find(|g| &g.bus_id == b).map(|g| (g, None)),
            DeviceId::Uuid(u) => inv
                .gpus
                .iter()
                .find(|g| &g.uuid == u)
                .map(|g| (g, None))
                .or_else(|| {
                    inv.gpus
                        .iter()
                        .find_map(|g| g.migs.iter().find(|m| &m.uuid == u).map(|m| (g, Some(m))))
                }),
            DeviceId::MigIndex(gi, mi) => {
                let gpu = inv
                    .gpus
                    .iter()
                    .find(|g| g.index == *gi)
                    .ok_or_else(|| unknown(id))?;
                if !gpu.mig_enabled {
                    return Err(PlanError::MigNotEnabled {
                        id: id.to_string(),
                        gpu: *gi,
                    });
                }
                gpu.migs
                    .iter()
                    .find(|m| m.index == *mi)
                    .map(|m| (gpu, Some(m)))
            }
        };
        let found = found.ok_or_else(|| unknown(id))?;
        if !out
            .iter()
            .any(|(g, m)| g.index == found.0.index && *m == found.1)
        {
            out.push(found);
        }
    }
    Ok(out)
}

fn mig_cap_node(inv: &Inventory, name: &str) -> Result<String, PlanError> {
    let minor = inv
        .mig_minors
        .get(name)
        .ok_or_else(|| PlanError::MissingMigCap(name.into()))?;
    Ok(format!("/dev/nvidia-caps/nvidia-cap{minor}"))
}

/// `NVIDIA_REQUIRE_*`: space-separated alternatives, each a comma-separated conjunction of
/// `key op value` terms, checked as libnvidia-container checks them: once for each GPU the
/// container gets (a MIG device counts as its parent), every GPU must satisfy it. `cuda` and
/// `driver` compare the driver's versions, `arch` the GPU's CUDA compute capability (as a
/// version: `arch>=7.5`), `brand` the GPU's brand. With no GPU, `arch` and `brand` hold; a
/// value not known here (the CUDA version, the brand or compute capability of GPUs read from
/// `/proc/driver/nvidia`) is noted, not enforced.
fn check_requirement(
    expr: &str,
    inv: &Inventory,
    gpus: &[&Gpu],
    notes: &mut Vec<String>,
) -> Result<(), PlanError> {
    let bad = || PlanError::BadRequirement(expr.into());
    let mut alternatives: Vec<Vec<(&str, &str, &str)>> = Vec::new();
    for alternative in expr.split_whitespace() {
        let mut terms = Vec::new();
        for term in alternative.split(',').filter(|t| !t.is_empty()) {
            let (key, op, want) = parse_term(term).ok_or_else(bad)?;
            if key == "brand" && !matches!(op, "=" | "==" | "!=") {
                return Err(bad());
            }
            terms.push((key, op, want));
        }
        alternatives.push(terms);
    }
    let mut note = |text: String| {
        if !notes.contains(&text) {
            notes.push(text);
        }
    };
    let devices: Vec<Option<&Gpu>> = if gpus.is_empty() {
        vec![None]
    } else {
        gpus.iter().copied().map(Some).collect()
    };
    for gpu in &devices {
        let mut holds = |key: &str, op: &str, want: &str| -> bool {
            let term = format!("{key}{op}{want}");
            let have = match (key, gpu) {
                ("cuda", _) => inv.cuda_version.as_deref(),
                ("driver", _) => Some(inv.driver_version.as_str()),
                (_, None) => {
                    note(format!(
                        "requirement term {term:?} not evaluated: the container gets no GPU"
                    ));
                    return true;
                }
                ("arch", Some(g)) => g.compute_capability.as_deref(),
                (_, Some(g)) => Some(g.brand.as_str()).filter(|b| !b.is_empty()),
            };
            let Some(have) = have else {
                note(format!(
                    "requirement term {term:?} not evaluated: {key} is not known on this host"
                ));
                return true;
            };
            if key == "brand" {
                have.eq_ignore_ascii_case(want) == (op != "!=")
            } else {
                op_holds(op, compare_versions(have, want))
            }
        };
        let met = alternatives.iter().any(|terms| {
            // Every term is evaluated (no short cut), so each one not evaluated is noted.
            terms
                .iter()
                .fold(true, |all, (key, op, want)| holds(key, op, want) & all)
        });
        if !met {
            let mut facts = format!(
                "driver {}, cuda {}",
                inv.driver_version,
                inv.cuda_version.as_deref().unwrap_or("unknown")
            );
            if gpus.is_empty() {
                facts += ", no GPU";
            }
            for g in gpus {
                facts += &format!(
                    "; GPU {}: arch {}, brand {}",
                    g.index,
                    g.compute_capability.as_deref().unwrap_or("unknown"),
                    Some(g.brand.as_str())
                        .filter(|b| !b.is_empty())
                        .unwrap_or("unknown")
                );
            }
            if let Some(g) = gpu {
                facts += &format!("; not met by GPU {}", g.index);
            }
            return Err(PlanError::Unsatisfied {
                expr: expr.into(),
                facts,
            });
        }
    }
    Ok(())
}

/// What `all` names in a CDI spec and in jit-cdi, as upstream's `all` device: every GPU not
/// in MIG mode and every MIG device of those that are (a container given a MIG-mode GPU
/// would get the whole GPU past its partitions).
pub fn cdi_all(inv: &Inventory) -> Devices {
    let mut ids = Vec::new();
    for g in &inv.gpus {
        if g.mig_enabled {
            ids.extend(g.migs.iter().map(|m| DeviceId::MigIndex(g.index, m.index)));
        } else {
            ids.push(DeviceId::Index(g.index));
        }
    }
    Devices::List(ids)
}

/// Whether planning `req` needs what only NVML knows: MIG devices (`0:1`, `MIG-…`), and the
/// CUDA version, brands and compute capabilities that `cuda`, `brand` and `arch` requirement
/// terms compare (terms read as
/// [`check_requirement`] reads them). Indices, GPU UUIDs and bus ids are in
/// `/proc/driver/nvidia/gpus/*/information` (indices in bus-id order, as NVML numbers them).
pub fn needs_nvml(req: &Request) -> bool {
    let mig = |id: &DeviceId| match id {
        DeviceId::MigIndex(..) => true,
        DeviceId::Uuid(u) => u.starts_with("MIG-"),
        _ => false,
    };
    let devices = matches!(&req.devices, Devices::List(ids) if ids.iter().any(mig));
    let terms = req
        .requirements
        .iter()
        .flat_map(|e| e.split([' ', '\t', '\n', ',']))
        .filter_map(parse_term)
        .any(|(key, _, _)| matches!(key, "cuda" | "brand" | "arch"));
    devices || terms
}

/// What of the driver `req` can use, for the prestart hook's discovery
/// (`host::discover::Files::For`): the planner looks at DRM nodes only for graphics and display,
/// at 32-bit libraries only for compat32, at config files only for the capabilities with
/// config directories (opt-in sets' files are read either way).
pub fn needs(req: &Request) -> Needs {
    let caps = &req.capabilities;
    Needs {
        drm: caps.contains(&Capability::Graphics) || caps.contains(&Capability::Display),
        lib32: caps.contains(&Capability::Compat32),
        configs: caps.iter().any(|c| !driver::config_dirs_for(*c).is_empty()),
    }
}

/// The bus ids of the GPUs `req` selects in `inv` (a MIG device's parent), whose procfs files
/// the /proc mask shows (`host::discover::read_proc_gpus`); none for a request that does not
/// resolve (planning it fails with the reason).
pub fn selected_bus_ids(req: &Request, inv: &Inventory) -> Vec<String> {
    select(&req.devices, inv)
        .unwrap_or_default()
        .iter()
        .map(|(gpu, _)| gpu.bus_id.clone())
        .collect()
}

/// [`needs_nvml`] for a CDI request (jit-cdi): there `all` is [`cdi_all`], which needs to know
/// which GPUs are in MIG mode and their MIG devices, as only NVML does.
pub fn needs_nvml_cdi(req: &Request) -> bool {
    needs_nvml(req) || req.devices == Devices::All
}

fn parse_term(term: &str) -> Option<(&str, &str, &str)> {
    let at = term.find(['<', '>', '=', '!'])?;
    let (key, rest) = term.split_at(at);
    let op_len = rest.chars().take_while(|c| "<>=!".contains(*c)).count();
    let (op, value) = rest.split_at(op_len);
    let known_key = ["cuda", "driver", "arch", "brand"].contains(&key);
    let known_op = ["=", "==", "!=", "<", "<=", ">", ">="].contains(&op);
    // A version we compare must be one (`cuda>=abc` would otherwise compare as 0 and pass).
    let is_version = |v: &str| {
        v.split('.').all(|p| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u64>().is_ok()
        })
    };
    let value_ok =
        !value.is_empty() && (!matches!(key, "cuda" | "driver" | "arch") || is_version(value));
    (known_key && known_op && value_ok).then_some((key, op, value))
}

fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let parts = |s: &str| {
        s.split('.')
            .map(|p| p.parse::<u64>().unwrap_or(0))
            .collect::<Vec<_>>()
    };
    let (mut pa, mut pb) = (parts(a), parts(b));
    let n = pa.len().max(pb.len());
    pa.resize(n, 0);
    pb.resize(n, 0);
    pa.cmp(&pb)
}

fn op_holds(op: &str, ord: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match op {
        "=" | "==" => ord == Equal,
        "!=" => ord != Equal,
        "<" => ord == Less,
        "<=" => ord != Greater,
        ">" => ord == Greater,
        _ => ord != Less,
    }
}

/// `params` with `ModifyDeviceFiles` forced to 0: what the container is shown, so that a
/// CUDA program inside never tries to create device nodes.
fn params_without_device_modification(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut seen = false;
    for line in text.lines() {
        if line.split(':').next().map(str::trim) == Some("ModifyDeviceFiles") {
            out.push_str("ModifyDeviceFiles: 0\n");
            seen = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !seen {
        out.push_str("ModifyDeviceFiles: 0\n");
    }
    out
}

#[cfg(test)]
mod mask_tests {
    use super::*;

    #[test]
    fn params_masked() {
        assert_eq!(
            params_without_device_modification(
                "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nDeviceFileUID: 0\n"
            ),
            "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 0\nDeviceFileUID: 0\n"
        );
        assert_eq!(
            params_without_device_modification("A: 1"),
            "A: 1\nModifyDeviceFiles: 0\n"
        );
    }
}

#[cfg(test)]
mod tests;
