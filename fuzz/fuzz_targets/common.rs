//! Shared by several targets: a fixed simulated host (the planner's inputs) and small helpers.
#![allow(dead_code)]

use nvct::devices::DeviceNode;
use nvct::discover::{Gpu, Inventory, MigDevice, ProcDriver};
use nvct::driver::{DriverFile, FileKind};
use std::collections::BTreeMap;
use std::path::Path;

fn node(path: &str, major: u32, minor: u32) -> DeviceNode {
    DeviceNode { path: path.into(), host_path: Path::new("/host").join(&path[1..]), major, minor }
}

fn file(kind: FileKind, name: &str, driver_path: &str) -> DriverFile {
    DriverFile { kind, name: name.into(), host_path: Path::new("/drv").join(&driver_path[1..]), driver_path: driver_path.into() }
}

fn gpu(index: u32) -> Gpu {
    Gpu {
        index,
        minor: index,
        uuid: format!("GPU-{index}"),
        bus_id: format!("0000:0{index}:00.0"),
        model: "NVIDIA H100".into(),
        mig_enabled: index == 1,
        migs: if index == 1 { vec![MigDevice { index: 0, gi: 2, ci: 0, uuid: "MIG-a".into() }] } else { vec![] },
    }
}

/// Three GPUs (GPU 1 in MIG mode), the usual nodes, a few driver files.
pub fn inventory(driver_version: &str, cuda_version: Option<&str>) -> Inventory {
    let lib = "/usr/lib/x86_64-linux-gnu";
    Inventory {
        driver_version: driver_version.into(),
        cuda_version: cuda_version.map(str::to_string),
        gpus: (0..3).map(gpu).collect(),
        nodes: vec![
            node("/dev/nvidia-caps/nvidia-cap1", 509, 1),
            node("/dev/nvidia-caps/nvidia-cap2", 509, 2),
            node("/dev/nvidia-caps/nvidia-cap21", 509, 21),
            node("/dev/nvidia-caps/nvidia-cap22", 509, 22),
            node("/dev/nvidia-modeset", 195, 254),
            node("/dev/nvidia-uvm", 508, 0),
            node("/dev/nvidia-uvm-tools", 508, 1),
            node("/dev/nvidia0", 195, 0),
            node("/dev/nvidia1", 195, 1),
            node("/dev/nvidia2", 195, 2),
            node("/dev/nvidiactl", 195, 255),
        ],
        mig_minors: BTreeMap::from([
            ("config".into(), 1),
            ("monitor".into(), 2),
            ("gpu1/gi2/access".into(), 21),
            ("gpu1/gi2/ci0/access".into(), 22),
        ]),
        files: vec![
            file(FileKind::Library, "libcuda", &format!("{lib}/libcuda.so.550.54.15")),
            file(FileKind::Library, "libnvidia-ml", &format!("{lib}/libnvidia-ml.so.550.54.15")),
            file(FileKind::Library, "libnvidia-encode", &format!("{lib}/libnvidia-encode.so.550.54.15")),
            file(FileKind::Binary, "nvidia-smi", "/usr/bin/nvidia-smi"),
            file(FileKind::Firmware, "gsp.bin", "/lib/firmware/nvidia/550.54.15/gsp.bin"),
        ],
        proc_driver: Some(ProcDriver {
            version: "NVRM version: x\n".into(),
            params: "ModifyDeviceFiles: 1\n".into(),
            registry: "".into(),
            gpu_files: BTreeMap::from([("0000:00:00.0".into(), vec![("information".into(), "Model: a\n".into())])]),
        }),
        notes: vec![],
    }
}

/// Splits the fuzz input into a flags byte and UTF-8 text (None when not UTF-8).
pub fn flags_and_text(data: &[u8]) -> Option<(u8, &str)> {
    let (&flags, rest) = data.split_first()?;
    Some((flags, std::str::from_utf8(rest).ok()?))
}

/// Engine-config options from the flags byte: bit 0 set-as-default, bit 1 CDI, bits 3–4 the
/// runtime name (including names that need quoting in TOML and the name of the template).
pub fn options(flags: u8) -> nvct::runtime_config::Options {
    let names = ["nvidia", "nvidia-cdi", "my.runtime", "runc"];
    nvct::runtime_config::Options {
        runtime_name: names[usize::from((flags >> 3) & 3)].into(),
        runtime_path: "/usr/bin/nvidia-container-runtime".into(),
        set_as_default: flags & 1 != 0,
        cdi_enabled: flags & 2 != 0,
    }
}

/// Bit 2 of the flags byte: write a drop-in file instead of editing in place.
pub fn drop_in(flags: u8, path: &str) -> Option<&Path> {
    (flags & 4 != 0).then_some(Path::new(path))
}

/// The content of every change (a removal has none).
pub fn contents(out: &nvct::runtime_config::Outcome) -> Vec<(&Path, &str)> {
    out.changes.iter().filter_map(|c| Some((c.path.as_path(), c.content.as_deref()?))).collect()
}

/// Panics unless `text` is TOML (what the engine will have to read).
pub fn assert_toml(what: &str, path: &Path, text: &str) -> toml_edit::DocumentMut {
    if let Err(e) = toml::from_str::<toml::Table>(text) {
        panic!("{what}: {} is not TOML any more: {e}\n{text}", path.display());
    }
    text.parse().unwrap_or_else(|e| panic!("{what}: {} is not TOML for toml_edit: {e}\n{text}", path.display()))
}
