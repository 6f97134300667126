//! `nvidia-container-cli list`: the host paths of what `configure` would give a container, one
//! absolute path per line, in libnvidia-container's order: device nodes (the control nodes
//! first, then each selected GPU's), binaries, libraries (the 64-bit ones whose file name ends
//! with the driver version, by capability: utility, compute, ngx, video, graphics, display),
//! the 32-bit ones with `--compat32`, IPC sockets and directories, GSP firmware. With no flag
//! at all every section is listed for every GPU; any flag lists only what it names.
//! Charliecloud's `ch-fromhost --nvidia` copies what `list --binaries --libraries` prints.

use super::{parse_devices, read_host, unknown_device, CliError, Globals, Phase};
use nvct_formats::config::Config;
use nvct_host::discover::Files;
use nvct_model::tables::libraries_for;
use nvct_model::{Capability, Devices, DriverFile, FileKind, Gpu, Inventory};
use nvct_plan::PlanError;
use std::path::Path;

/// What `list` was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct List {
    /// `--device` values (none given and no other flag: every GPU).
    pub devices: Vec<String>,
    pub libraries: bool,
    pub binaries: bool,
    pub ipcs: bool,
    pub firmwares: bool,
    pub compat32: bool,
    pub no_persistenced: bool,
    pub no_fabricmanager: bool,
    pub no_gsp_firmware: bool,
    /// No flag at all: everything.
    pub everything: bool,
}

/// The lines `list` prints.
pub fn list(globals: &Globals, config: &Config, what: &List) -> Result<String, CliError> {
    let root = globals.driver(config)?;
    let inv = read_host(&root, false, Files::All)?;
    let lines = lines(&inv, what)?;
    Ok(lines.iter().map(|l| format!("{l}\n")).collect())
}

/// PURE: the paths of `what` on the host `inv`, in order.
pub fn lines(inv: &Inventory, what: &List) -> Result<Vec<String>, CliError> {
    let mut out: Vec<String> = Vec::new();
    let devices = if what.everything {
        Some(Devices::All)
    } else if what.devices.is_empty() {
        None
    } else {
        parse_devices(&what.devices)?
    };
    if let Some(devices) = devices {
        const CONTROL: [&str; 4] = [
            "/dev/nvidiactl",
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools",
            "/dev/nvidia-modeset",
        ];
        for c in CONTROL {
            if let Some(n) = inv.nodes.iter().find(|n| n.path == Path::new(c)) {
                out.push(n.host_path.display().to_string());
            }
        }
        for g in select(inv, &devices)? {
            let path = format!("/dev/nvidia{}", g.minor);
            if let Some(n) = inv.nodes.iter().find(|n| n.path == Path::new(&path)) {
                out.push(n.host_path.display().to_string());
            }
        }
    }
    let (all, every) = (what.everything, |f: bool| what.everything || f);
    if every(what.binaries) {
        const ORDER: [&str; 6] = [
            "nvidia-smi",
            "nvidia-debugdump",
            "nvidia-persistenced",
            "nv-fabricmanager",
            "nvidia-cuda-mps-control",
            "nvidia-cuda-mps-server",
        ];
        for name in ORDER {
            out.extend(files(inv, FileKind::Binary, |f| f.name == name));
        }
    }
    let libs = |kind: FileKind, out: &mut Vec<String>| {
        let caps = [
            Capability::Utility,
            Capability::Compute,
            Capability::Ngx,
            Capability::Video,
            Capability::Graphics,
            Capability::Display,
        ];
        for cap in caps {
            for family in libraries_for(cap) {
                for l in files(inv, kind, |f| {
                    &f.name == family && ends_with_version(f, &inv.driver_version)
                }) {
                    if !out.contains(&l) {
                        out.push(l);
                    }
                }
            }
        }
    };
    if every(what.libraries) {
        libs(FileKind::Library, &mut out);
    }
    if all || what.compat32 && what.libraries {
        libs(FileKind::Library32, &mut out);
    }
    if every(what.ipcs) {
        let order = [
            ("persistenced", what.no_persistenced),
            ("fabricmanager", what.no_fabricmanager),
            ("mps", false),
        ];
        for (part, skip) in order {
            if !skip {
                out.extend(files(inv, FileKind::Ipc, |f| {
                    f.driver_path.to_string_lossy().contains(part)
                }));
            }
        }
    }
    if every(what.firmwares) && !what.no_gsp_firmware {
        out.extend(files(inv, FileKind::Firmware, |_| true));
    }
    Ok(out)
}

fn files(inv: &Inventory, kind: FileKind, keep: impl Fn(&DriverFile) -> bool) -> Vec<String> {
    inv.files
        .iter()
        .filter(|f| f.kind == kind && keep(f))
        .map(|f| f.host_path.display().to_string())
        .collect()
}

fn ends_with_version(f: &DriverFile, version: &str) -> bool {
    f.host_path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(version))
}

/// The GPUs `devices` selects on `inv` (a MIG device selects its GPU), by the planner's
/// matcher; on a host without GPUs nothing is selected and nothing is unknown, as
/// libnvidia-container.
fn select<'a>(inv: &'a Inventory, devices: &Devices) -> Result<Vec<&'a Gpu>, CliError> {
    if inv.gpus.is_empty() {
        return Ok(Vec::new());
    }
    let selected = nvct_plan::select(devices, inv).map_err(|e| match e {
        PlanError::UnknownDevice { id, .. } => unknown_device(&id.to_string()),
        e => CliError::new(Phase::Device, e.to_string()),
    })?;
    let mut out: Vec<&Gpu> = Vec::new();
    for (gpu, _) in selected {
        if !out.iter().any(|g| g.index == gpu.index) {
            out.push(gpu);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvct_plan::fixtures::inventory_in;

    #[test]
    fn sections_and_order() {
        let inv = inventory_in("/usr/lib/x86_64-linux-gnu");
        let everything = lines(
            &inv,
            &List {
                everything: true,
                ..List::default()
            },
        )
        .unwrap();
        let ctl = everything
            .iter()
            .position(|l| l.ends_with("/dev/nvidiactl"));
        let gpu0 = everything.iter().position(|l| l.ends_with("/dev/nvidia0"));
        let smi = everything.iter().position(|l| l.ends_with("/nvidia-smi"));
        let cuda = everything.iter().position(|l| l.contains("/libcuda.so."));
        assert!(
            ctl < gpu0 && gpu0 < smi && smi < cuda && ctl.is_some(),
            "control nodes, GPUs, binaries, libraries: {everything:#?}"
        );
        let bins_libs = lines(
            &inv,
            &List {
                binaries: true,
                libraries: true,
                ..List::default()
            },
        )
        .unwrap();
        assert!(
            bins_libs.iter().all(|l| !l.contains("/dev/")),
            "no devices without --device: {bins_libs:#?}"
        );
        assert!(bins_libs.iter().any(|l| l.ends_with("/nvidia-smi")));
        let one = lines(
            &inv,
            &List {
                devices: vec!["1".into()],
                ..List::default()
            },
        )
        .unwrap();
        assert!(one.iter().any(|l| l.ends_with("/dev/nvidia1")), "{one:#?}");
        assert!(!one.iter().any(|l| l.ends_with("/dev/nvidia0")), "{one:#?}");
        let unknown = lines(
            &inv,
            &List {
                devices: vec!["77".into()],
                ..List::default()
            },
        );
        assert_eq!(
            unknown.unwrap_err().to_string(),
            "device error: 77: unknown device"
        );
    }
}
