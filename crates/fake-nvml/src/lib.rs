//! A fake `libnvidia-ml.so.1` for tests on machines without a GPU.
//!
//! Owns: the C ABI of the handful of NVML entry points that `nvml-wrapper` 0.13 calls for
//! discovery (init/shutdown, versions, device enumeration, identity, PCI, memory, MIG), answered
//! from a JSON topology. Signatures and struct layouts mirror `nvml-wrapper-sys` 0.10's
//! bindings (`nvmlPciInfo_t`, `nvmlMemory_t`, `nvmlMemory_v2_t`).
//!
//! Must not: panic across the FFI boundary (every entry point runs inside [`guard`], which turns
//! a panic into `NVML_ERROR_UNKNOWN`), trust any pointer or handle it is given (each is checked
//! and answered with `NVML_ERROR_INVALID_ARGUMENT`, `NOT_FOUND` or `INSUFFICIENT_SIZE` like the
//! real library), or start threads (a real libnvidia-ml does; this one deliberately does not).
//!
//! The topology is read at `nvmlInit*` from the file named by `FAKE_NVML_CONFIG`, or else from
//! `fake-nvml.json` next to this library (found through `dladdr`). Format:
//!
//! ```json
//! {"driver_version": "550.54.15", "cuda_version": 12040,
//!  "gpus": [{"uuid": "GPU-…", "name": "NVIDIA H100 80GB HBM3", "minor": 0,
//!            "bus_id": "00000000:3B:00.0", "pci_device_id": 590352606,
//!            "memory_total": 85520809984, "persistence_mode": true, "mig_enabled": true,
//!            "compute_capability": "9.0",
//!            "migs": [{"gi": 1, "ci": 0, "uuid": "MIG-…"}]}]}
//! ```
//!
//! `compute_capability` (`major.minor`, default `9.0`, an H100's) is what
//! `nvmlDeviceGetCudaComputeCapability` answers for the GPU and its MIG devices.
//!
//! Handles are opaque non-null pointer values: GPU `i` is `(i+1) << 8`, MIG device `j` of GPU
//! `i` is `((i+1) << 8) | (j+1)`. NVML indices are positions in `gpus`.

#![allow(non_snake_case)]

use serde::Deserialize;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr};
use std::panic::{catch_unwind, UnwindSafe};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

type NvmlReturn = c_uint;
type Device = *mut c_void;

const SUCCESS: NvmlReturn = 0;
const ERROR_UNINITIALIZED: NvmlReturn = 1;
const ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
const ERROR_NOT_SUPPORTED: NvmlReturn = 3;
const ERROR_NOT_FOUND: NvmlReturn = 6;
const ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
const ERROR_LIBRARY_NOT_FOUND: NvmlReturn = 12;
const ERROR_ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
const ERROR_UNKNOWN: NvmlReturn = 999;

/// Upper bound of MIG devices per GPU (what an A100/H100 reports).
const MAX_MIG_DEVICES: c_uint = 7;
const MAX_GPUS: usize = 64;

#[derive(Deserialize)]
struct Config {
    driver_version: String,
    cuda_version: c_int,
    gpus: Vec<GpuConfig>,
}

#[derive(Deserialize)]
struct GpuConfig {
    uuid: String,
    name: String,
    minor: c_uint,
    bus_id: String,
    pci_device_id: c_uint,
    memory_total: c_ulonglong,
    #[serde(default)]
    persistence_mode: bool,
    #[serde(default = "default_compute_capability")]
    compute_capability: String,
    #[serde(default)]
    mig_enabled: bool,
    #[serde(default)]
    migs: Vec<MigConfig>,
}

fn default_compute_capability() -> String {
    "9.0".into()
}

#[derive(Deserialize)]
struct MigConfig {
    gi: c_uint,
    ci: c_uint,
    uuid: String,
}

/// PCI location parsed once from `bus_id`.
struct Pci {
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    function: c_uint,
}

struct State {
    config: Config,
    pci: Vec<Pci>,
    /// `nvmlInit` reference count, as in the real library.
    refs: usize,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<State>> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs one entry point; a panic becomes `NVML_ERROR_UNKNOWN` instead of unwinding into C.
fn guard(f: impl FnOnce() -> NvmlReturn + UnwindSafe) -> NvmlReturn {
    catch_unwind(f).unwrap_or(ERROR_UNKNOWN)
}

/// Runs `f` with the initialised state, or answers `NVML_ERROR_UNINITIALIZED`.
fn with_state(f: impl FnOnce(&State) -> NvmlReturn + UnwindSafe) -> NvmlReturn {
    guard(|| match lock().as_ref() {
        Some(state) => f(state),
        None => ERROR_UNINITIALIZED,
    })
}

/// What a handle points at.
#[derive(Clone, Copy)]
enum Handle {
    Gpu(usize),
    Mig(usize, usize),
}

impl Handle {
    fn encode(self) -> Device {
        let value = match self {
            Handle::Gpu(i) => (i + 1) << 8,
            Handle::Mig(i, j) => ((i + 1) << 8) | (j + 1),
        };
        value as Device
    }

    fn decode(state: &State, device: Device) -> Option<Handle> {
        let value = device as usize;
        let gpu = (value >> 8).checked_sub(1)?;
        let gpu_config = state.config.gpus.get(gpu)?;
        match value & 0xff {
            0 => Some(Handle::Gpu(gpu)),
            j if j <= gpu_config.migs.len() && gpu_config.mig_enabled => {
                Some(Handle::Mig(gpu, j - 1))
            }
            _ => None,
        }
    }

    fn gpu(self) -> usize {
        match self {
            Handle::Gpu(i) | Handle::Mig(i, _) => i,
        }
    }
}

/// Decodes `device` and runs `f` on it; invalid handles get `NVML_ERROR_INVALID_ARGUMENT`.
fn with_device(
    device: Device,
    f: impl FnOnce(&State, Handle) -> NvmlReturn + UnwindSafe,
) -> NvmlReturn {
    with_state(move |state| match Handle::decode(state, device) {
        Some(handle) => f(state, handle),
        None => ERROR_INVALID_ARGUMENT,
    })
}

/// Writes `value` through `out` unless it is null.
fn put<T>(out: *mut T, value: T) -> NvmlReturn {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: `out` is non-null and, per the NVML contract, points to a writable `T`.
    unsafe { out.write(value) };
    SUCCESS
}

/// Copies `text` and its NUL into the caller's `length`-byte buffer.
fn put_str(out: *mut c_char, length: c_uint, text: &str) -> NvmlReturn {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let bytes = text.as_bytes();
    if bytes.len() + 1 > length as usize {
        return ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: `out` is non-null and the caller promises `length` writable bytes; we write
    // `bytes.len() + 1 <= length` of them.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), bytes.len());
        out.add(bytes.len()).write(0);
    }
    SUCCESS
}

/// Reads a caller-provided C string, or `None` for null / non-UTF-8.
fn get_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null and, per the NVML contract, NUL-terminated.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .ok()
        .map(str::to_owned)
}

/// Parses `DDDDDDDD:BB:DD.F` (any domain width, any case).
fn parse_bus_id(text: &str) -> Option<Pci> {
    let (rest, function) = text.rsplit_once('.')?;
    let mut parts = rest.split(':');
    let (domain, bus, device) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some(Pci {
        domain: c_uint::from_str_radix(domain, 16).ok()?,
        bus: c_uint::from_str_radix(bus, 16).ok()?,
        device: c_uint::from_str_radix(device, 16).ok()?,
        function: c_uint::from_str_radix(function, 16).ok()?,
    })
}

/// Where the topology comes from: `$FAKE_NVML_CONFIG`, else `fake-nvml.json` beside this library.
fn config_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FAKE_NVML_CONFIG") {
        return Some(PathBuf::from(path));
    }
    // SAFETY: `Dl_info` is plain data; all-zero is a valid value that dladdr overwrites.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let anchor = nvmlInit_v2 as *const c_void;
    // SAFETY: `anchor` is an address inside this library and `info` is a valid out-pointer.
    if unsafe { libc::dladdr(anchor, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr succeeded, so `dli_fname` is a NUL-terminated path owned by the loader.
    let lib = unsafe { CStr::from_ptr(info.dli_fname) };
    let lib = PathBuf::from(std::ffi::OsStr::new(
        std::str::from_utf8(lib.to_bytes()).ok()?,
    ));
    Some(lib.parent()?.join("fake-nvml.json"))
}

fn load() -> Result<State, NvmlReturn> {
    let path = config_path().ok_or(ERROR_LIBRARY_NOT_FOUND)?;
    let text = std::fs::read_to_string(&path).map_err(|_| ERROR_LIBRARY_NOT_FOUND)?;
    let config: Config = serde_json::from_str(&text).map_err(|_| ERROR_UNKNOWN)?;
    if config.gpus.is_empty() || config.gpus.len() > MAX_GPUS {
        return Err(ERROR_UNKNOWN);
    }
    let mut pci = Vec::with_capacity(config.gpus.len());
    for gpu in &config.gpus {
        if gpu.migs.len() > MAX_MIG_DEVICES as usize {
            return Err(ERROR_UNKNOWN);
        }
        pci.push(parse_bus_id(&gpu.bus_id).ok_or(ERROR_UNKNOWN)?);
    }
    Ok(State {
        config,
        pci,
        refs: 0,
    })
}

fn init() -> NvmlReturn {
    guard(|| {
        let mut state = lock();
        if state.is_none() {
            match load() {
                Ok(loaded) => *state = Some(loaded),
                Err(code) => return code,
            }
        }
        if let Some(state) = state.as_mut() {
            state.refs += 1;
        }
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    init()
}

#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    init()
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    guard(|| {
        let mut state = lock();
        match state.as_mut() {
            None => ERROR_UNINITIALIZED,
            Some(current) => {
                current.refs -= 1;
                if current.refs == 0 {
                    *state = None;
                }
                SUCCESS
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    let text: &'static CStr = match result {
        SUCCESS => c"Success",
        ERROR_UNINITIALIZED => c"Uninitialized",
        ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        ERROR_NOT_SUPPORTED => c"Not Supported",
        ERROR_NOT_FOUND => c"Not Found",
        ERROR_INSUFFICIENT_SIZE => c"Insufficient Size",
        ERROR_LIBRARY_NOT_FOUND => c"NVML Shared Library Not Found",
        ERROR_ARGUMENT_VERSION_MISMATCH => c"Argument version mismatch",
        _ => c"Unknown Error",
    };
    text.as_ptr()
}

#[no_mangle]
pub extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> NvmlReturn {
    with_state(move |s| put_str(version, length, &s.config.driver_version))
}

#[no_mangle]
pub extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> NvmlReturn {
    with_state(move |s| {
        let major = s.config.cuda_version / 1000;
        put_str(
            version,
            length,
            &format!("{major}.{}", s.config.driver_version),
        )
    })
}

#[no_mangle]
pub extern "C" fn nvmlSystemGetCudaDriverVersion(cuda: *mut c_int) -> NvmlReturn {
    with_state(move |s| put(cuda, s.config.cuda_version))
}

#[no_mangle]
pub extern "C" fn nvmlSystemGetCudaDriverVersion_v2(cuda: *mut c_int) -> NvmlReturn {
    nvmlSystemGetCudaDriverVersion(cuda)
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    with_state(move |s| put(count, s.config.gpus.len() as c_uint))
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut Device) -> NvmlReturn {
    with_state(move |s| {
        if index as usize >= s.config.gpus.len() {
            return ERROR_INVALID_ARGUMENT;
        }
        put(device, Handle::Gpu(index as usize).encode())
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut Device,
) -> NvmlReturn {
    with_state(move |s| {
        let Some(uuid) = get_str(uuid) else {
            return ERROR_INVALID_ARGUMENT;
        };
        for (i, gpu) in s.config.gpus.iter().enumerate() {
            if gpu.uuid == uuid {
                return put(device, Handle::Gpu(i).encode());
            }
            if let Some(j) = gpu
                .migs
                .iter()
                .position(|m| m.uuid == uuid)
                .filter(|_| gpu.mig_enabled)
            {
                return put(device, Handle::Mig(i, j).encode());
            }
        }
        ERROR_NOT_FOUND
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut Device,
) -> NvmlReturn {
    with_state(move |s| {
        let Some(wanted) = get_str(bus_id).as_deref().and_then(parse_bus_id) else {
            return ERROR_INVALID_ARGUMENT;
        };
        let found = s.pci.iter().position(|p| {
            (p.domain, p.bus, p.device, p.function)
                == (wanted.domain, wanted.bus, wanted.device, wanted.function)
        });
        match found {
            Some(i) => put(device, Handle::Gpu(i).encode()),
            None => ERROR_NOT_FOUND,
        }
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetUUID(
    device: Device,
    uuid: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    with_device(device, move |s, handle| {
        let text = match handle {
            Handle::Gpu(i) => &s.config.gpus[i].uuid,
            Handle::Mig(i, j) => &s.config.gpus[i].migs[j].uuid,
        };
        put_str(uuid, length, text)
    })
}

/// `NVML_BRAND_TESLA`: every simulated GPU is a data-centre part.
const BRAND_TESLA: c_uint = 2;

#[no_mangle]
pub extern "C" fn nvmlDeviceGetBrand(device: Device, brand: *mut c_uint) -> NvmlReturn {
    with_device(device, move |_, _| put(brand, BRAND_TESLA))
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetName(
    device: Device,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    with_device(device, move |s, handle| {
        let text = match handle {
            Handle::Gpu(i) => s.config.gpus[i].name.clone(),
            Handle::Mig(i, _) => format!("{} MIG", s.config.gpus[i].name),
        };
        put_str(name, length, &text)
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetMinorNumber(device: Device, minor: *mut c_uint) -> NvmlReturn {
    with_device(device, move |s, handle| match handle {
        Handle::Gpu(i) => put(minor, s.config.gpus[i].minor),
        Handle::Mig(..) => ERROR_NOT_SUPPORTED,
    })
}

/// `nvmlEnableState_t`: 0 disabled, 1 enabled (`persistence_mode` of the GPU).
#[no_mangle]
pub extern "C" fn nvmlDeviceGetPersistenceMode(device: Device, mode: *mut c_uint) -> NvmlReturn {
    with_device(device, move |s, handle| match handle {
        Handle::Gpu(i) => put(mode, c_uint::from(s.config.gpus[i].persistence_mode)),
        Handle::Mig(..) => ERROR_NOT_SUPPORTED,
    })
}

/// The GPU's `compute_capability` (`major.minor`); a MIG device answers with its parent's.
#[no_mangle]
pub extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: Device,
    major: *mut c_int,
    minor: *mut c_int,
) -> NvmlReturn {
    with_device(device, move |s, handle| {
        if major.is_null() || minor.is_null() {
            return ERROR_INVALID_ARGUMENT;
        }
        let text = &s.config.gpus[handle.gpu()].compute_capability;
        let parsed = text
            .split_once('.')
            .and_then(|(a, b)| Some((a.parse::<c_int>().ok()?, b.parse::<c_int>().ok()?)));
        match parsed {
            Some((a, b)) => {
                put(major, a);
                put(minor, b)
            }
            None => ERROR_UNKNOWN,
        }
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetIndex(device: Device, index: *mut c_uint) -> NvmlReturn {
    with_device(device, move |_, handle| match handle {
        Handle::Gpu(i) => put(index, i as c_uint),
        Handle::Mig(_, j) => put(index, j as c_uint),
    })
}

/// `nvmlPciInfo_t` (nvml-wrapper-sys 0.10 `nvmlPciInfo_st`).
#[repr(C)]
pub struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

fn c_array<const N: usize>(text: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (slot, byte) in out.iter_mut().zip(text.bytes().take(N - 1)) {
        *slot = byte as c_char;
    }
    out
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetPciInfo_v3(device: Device, pci: *mut PciInfo) -> NvmlReturn {
    // A MIG device reports its parent's PCI location, as the real library does.
    with_device(device, move |s, handle| {
        let p = &s.pci[handle.gpu()];
        let (domain, bus, dev, function) = (p.domain, p.bus, p.device, p.function);
        put(
            pci,
            PciInfo {
                bus_id_legacy: c_array(&format!("{domain:04X}:{bus:02X}:{dev:02X}.{function:X}")),
                domain,
                bus,
                device: dev,
                pci_device_id: s.config.gpus[handle.gpu()].pci_device_id,
                pci_sub_system_id: 0x16c1_10de,
                bus_id: c_array(&format!("{domain:08X}:{bus:02X}:{dev:02X}.{function:X}")),
            },
        )
    })
}

/// `nvmlMemory_t`.
#[repr(C)]
pub struct Memory {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlMemory_v2_t`; `version` must be `NVML_STRUCT_VERSION(Memory, 2)`.
#[repr(C)]
pub struct MemoryV2 {
    version: c_uint,
    total: c_ulonglong,
    reserved: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

const MEMORY_V2_VERSION: c_uint = (std::mem::size_of::<MemoryV2>() | (2 << 24)) as c_uint;

/// Total, reserved and used bytes of a device (a MIG device gets an equal share).
fn memory_of(s: &State, handle: Handle) -> (c_ulonglong, c_ulonglong, c_ulonglong) {
    let gpu = &s.config.gpus[handle.gpu()];
    let total = match handle {
        Handle::Gpu(_) => gpu.memory_total,
        Handle::Mig(..) => gpu.memory_total / MAX_MIG_DEVICES as c_ulonglong,
    };
    let reserved = total / 100;
    (total, reserved, reserved / 2)
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetMemoryInfo(device: Device, memory: *mut Memory) -> NvmlReturn {
    with_device(device, move |s, handle| {
        let (total, reserved, used) = memory_of(s, handle);
        put(
            memory,
            Memory {
                total,
                free: total - reserved - used,
                used: reserved + used,
            },
        )
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetMemoryInfo_v2(device: Device, memory: *mut MemoryV2) -> NvmlReturn {
    with_device(device, move |s, handle| {
        if memory.is_null() {
            return ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: non-null; the caller provides an `nvmlMemory_v2_t` whose first field is the version.
        let version = unsafe { memory.cast::<c_uint>().read() };
        if version != MEMORY_V2_VERSION {
            return ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        let (total, reserved, used) = memory_of(s, handle);
        put(
            memory,
            MemoryV2 {
                version,
                total,
                reserved,
                free: total - reserved - used,
                used,
            },
        )
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetMigMode(
    device: Device,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    with_device(device, move |s, handle| match handle {
        Handle::Gpu(i) => {
            if current.is_null() || pending.is_null() {
                return ERROR_INVALID_ARGUMENT;
            }
            let mode = s.config.gpus[i].mig_enabled as c_uint;
            put(current, mode);
            put(pending, mode)
        }
        Handle::Mig(..) => ERROR_NOT_SUPPORTED,
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetMaxMigDeviceCount(device: Device, count: *mut c_uint) -> NvmlReturn {
    with_device(device, move |_, handle| match handle {
        Handle::Gpu(_) => put(count, MAX_MIG_DEVICES),
        Handle::Mig(..) => ERROR_NOT_SUPPORTED,
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: Device,
    index: c_uint,
    mig: *mut Device,
) -> NvmlReturn {
    with_device(device, move |s, handle| {
        let Handle::Gpu(i) = handle else {
            return ERROR_INVALID_ARGUMENT;
        };
        let gpu = &s.config.gpus[i];
        if index >= MAX_MIG_DEVICES {
            return ERROR_INVALID_ARGUMENT;
        }
        if !gpu.mig_enabled || index as usize >= gpu.migs.len() {
            return ERROR_NOT_FOUND;
        }
        put(mig, Handle::Mig(i, index as usize).encode())
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceIsMigDeviceHandle(device: Device, is_mig: *mut c_uint) -> NvmlReturn {
    with_device(device, move |_, handle| {
        put(is_mig, matches!(handle, Handle::Mig(..)) as c_uint)
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetGpuInstanceId(device: Device, id: *mut c_uint) -> NvmlReturn {
    with_device(device, move |s, handle| match handle {
        Handle::Mig(i, j) => put(id, s.config.gpus[i].migs[j].gi),
        Handle::Gpu(_) => ERROR_NOT_SUPPORTED,
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetComputeInstanceId(device: Device, id: *mut c_uint) -> NvmlReturn {
    with_device(device, move |s, handle| match handle {
        Handle::Mig(i, j) => put(id, s.config.gpus[i].migs[j].ci),
        Handle::Gpu(_) => ERROR_NOT_SUPPORTED,
    })
}

#[no_mangle]
pub extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig: Device,
    device: *mut Device,
) -> NvmlReturn {
    with_device(mig, move |_, handle| match handle {
        Handle::Mig(i, _) => put(device, Handle::Gpu(i).encode()),
        Handle::Gpu(_) => ERROR_INVALID_ARGUMENT,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The C ABI answers a bad handle, a null or short buffer, and a null out-pointer the way
    /// the real library does, without dereferencing anything it was not given.
    #[test]
    fn bad_requests_get_nvml_error_codes() {
        let dir = std::env::temp_dir().join(format!("fake-nvml-abi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("fake-nvml.json");
        std::fs::write(
            &config,
            r#"{"driver_version": "550.54.15", "cuda_version": 12040,
                "gpus": [{"uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000",
                          "name": "NVIDIA H100 80GB HBM3", "minor": 0,
                          "bus_id": "00000000:3B:00.0", "pci_device_id": 590352606,
                          "memory_total": 85520809984, "persistence_mode": true,
                          "mig_enabled": true,
                          "migs": [{"gi": 1, "ci": 0,
                                    "uuid": "MIG-bbbbbbbb-0000-0000-0000-000000000000"}]}]}"#,
        )
        .unwrap();
        std::env::set_var("FAKE_NVML_CONFIG", &config);
        assert_eq!(nvmlInit_v2(), SUCCESS);
        let gpu0 = (1usize << 8) as Device;
        let mig = ((1usize << 8) | 1) as Device;
        let mut buffer = [0 as c_char; 96];
        let cases: Vec<(&str, NvmlReturn, NvmlReturn)> = vec![
            (
                "UUID of a bogus handle",
                nvmlDeviceGetUUID(0xdead_0000usize as _, buffer.as_mut_ptr(), 96),
                2,
            ),
            (
                "UUID of a null handle",
                nvmlDeviceGetUUID(std::ptr::null_mut(), buffer.as_mut_ptr(), 96),
                2,
            ),
            (
                "UUID into a null buffer",
                nvmlDeviceGetUUID(gpu0, std::ptr::null_mut(), 96),
                2,
            ),
            (
                "UUID into a short buffer",
                nvmlDeviceGetUUID(gpu0, buffer.as_mut_ptr(), 10),
                7,
            ),
            (
                "driver version into a short buffer",
                nvmlSystemGetDriverVersion(buffer.as_mut_ptr(), 4),
                7,
            ),
            (
                "count into a null pointer",
                nvmlDeviceGetCount_v2(std::ptr::null_mut()),
                2,
            ),
            (
                "UUID with room to spare",
                nvmlDeviceGetUUID(mig, buffer.as_mut_ptr(), 96),
                0,
            ),
        ];
        for (name, got, want) in cases {
            assert_eq!(got, want, "case {name}: NVML return code");
        }
        let bytes: Vec<u8> = buffer.iter().map(|&c| c as u8).collect();
        let uuid = CStr::from_bytes_until_nul(&bytes).unwrap();
        assert_eq!(
            uuid.to_str().unwrap(),
            "MIG-bbbbbbbb-0000-0000-0000-000000000000"
        );
        assert_eq!(nvmlShutdown(), SUCCESS);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
