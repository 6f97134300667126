//! TEST-ONLY (unit tests, and the fuzz targets through the `fixtures` feature): the one
//! builder of `Inventory` values for whole-value tests of the planner, the CDI generator and
//! the fuzz targets. Plain literals, no I/O.

use crate::request::Request;
use nvct_model::{
    Capability, DeviceNode, Devices, DriverFile, FileKind, Gpu, Inventory, MigDevice, ProcDriver,
};
use std::collections::BTreeMap;
use std::path::Path;

/// A request for `devices` with `caps`, no requirements, forward compat allowed (the default
/// config's request).
pub fn request(devices: Devices, caps: &[Capability]) -> Request {
    Request {
        devices,
        capabilities: caps.iter().copied().collect(),
        requirements: vec![],
        mig_config: None,
        mig_monitor: None,
        imex_channels: None,
        cuda_compat: true,
        opt_ins: Default::default(),
    }
}

/// A device node at `path` in the container, `/host<path>` on the host.
pub fn node(path: &str, major: u32, minor: u32) -> DeviceNode {
    DeviceNode {
        path: path.into(),
        host_path: Path::new("/host").join(&path[1..]),
        major,
        minor,
        mode: 0o666,
    }
}

/// A driver file at `driver_path` in the driver root `/drv`.
pub fn file(kind: FileKind, name: &str, driver_path: &str) -> DriverFile {
    DriverFile {
        kind,
        name: name.into(),
        host_path: Path::new("/drv").join(&driver_path[1..]),
        driver_path: driver_path.into(),
    }
}

/// GPU `index` (minor = index, bus `0000:0<index>:00.0`); with `mig`, MIG mode on and one MIG
/// device (gi 2, ci 0, `MIG-<index>a`).
pub fn gpu(index: u32, mig: bool) -> Gpu {
    Gpu {
        index,
        minor: index,
        uuid: format!("GPU-{index}"),
        bus_id: format!("0000:0{index}:00.0"),
        model: "NVIDIA H100".into(),
        brand: "tesla".into(),
        memory_mib: 81559,
        persistence_mode: Some(true),
        compute_capability: Some("9.0".into()),
        mig_enabled: mig,
        migs: if mig {
            vec![MigDevice {
                index: 0,
                gi: 2,
                ci: 0,
                uuid: format!("MIG-{index}a"),
            }]
        } else {
            vec![]
        },
    }
}

/// The standard host: three GPUs (GPU 1 in MIG mode), its nodes, a few driver files with the
/// libraries in `lib`, and `/proc/driver/nvidia`.
pub fn inventory_in(lib: &str) -> Inventory {
    Inventory {
        driver_version: "550.54.15".into(),
        cuda_version: Some("12.4".into()),
        gpus: (0..3).map(|i| gpu(i, i == 1)).collect(),
        nodes: vec![
            node("/dev/nvidia-caps/nvidia-cap21", 509, 21),
            node("/dev/nvidia-caps/nvidia-cap22", 509, 22),
            node("/dev/nvidia-uvm", 508, 0),
            node("/dev/nvidia-uvm-tools", 508, 1),
            node("/dev/nvidia0", 195, 0),
            node("/dev/nvidia1", 195, 1),
            node("/dev/nvidia2", 195, 2),
            node("/dev/nvidiactl", 195, 255),
        ],
        drm: BTreeMap::new(),
        mig_minors: BTreeMap::from([
            ("gpu1/gi2/access".into(), 21),
            ("gpu1/gi2/ci0/access".into(), 22),
        ]),
        files: vec![
            file(
                FileKind::Library,
                "libcuda",
                &format!("{lib}/libcuda.so.550.54.15"),
            ),
            file(
                FileKind::Library,
                "libnvidia-ml",
                &format!("{lib}/libnvidia-ml.so.550.54.15"),
            ),
            file(
                FileKind::Library,
                "libnvidia-encode",
                &format!("{lib}/libnvidia-encode.so.550.54.15"),
            ),
            file(FileKind::Binary, "nvidia-smi", "/usr/bin/nvidia-smi"),
            file(
                FileKind::Binary,
                "nvidia-cuda-mps-control",
                "/usr/bin/nvidia-cuda-mps-control",
            ),
            file(
                FileKind::Firmware,
                "gsp.bin",
                "/lib/firmware/nvidia/550.54.15/gsp.bin",
            ),
        ],
        proc_driver: Some(ProcDriver {
            version: "NVRM version: x\n".into(),
            params: "ModifyDeviceFiles: 1\n".into(),
            registry: "".into(),
            gpu_files: BTreeMap::from([
                (
                    "0000:00:00.0".into(),
                    vec![("information".into(), "Model: a\n".into())],
                ),
                (
                    "0000:02:00.0".into(),
                    vec![("information".into(), "Model: c\n".into())],
                ),
            ]),
            caps: BTreeMap::from([
                ("gpu1/gi2/access".into(), "DeviceFileMinor: 21\n".into()),
                ("gpu1/gi2/ci0/access".into(), "DeviceFileMinor: 22\n".into()),
                ("config".into(), "DeviceFileMinor: 1\n".into()),
            ]),
        }),
        notes: vec![],
    }
}
