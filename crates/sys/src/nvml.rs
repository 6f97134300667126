//! The raw NVML entry points `nvml-wrapper` 0.13 does not wrap, behind safe functions: a MIG
//! device's GPU and compute instance ids.
//!
//! Owns: the `unsafe` of calling a function pointer `nvml-wrapper` resolved from the loaded
//! library. Must not: load, initialise or shut down NVML (`nvml.rs` does, through
//! `nvml-wrapper`), or interpret the ids.

use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::Device;

/// Which instance id of a MIG device to read.
pub enum Instance {
    Gpu,
    Compute,
}

/// Reads `mig`'s GPU or compute instance id (`nvmlDeviceGetGpuInstanceId` /
/// `nvmlDeviceGetComputeInstanceId`) from the library `mig` came from.
pub fn mig_instance_id(mig: &Device, which: Instance) -> Result<u32, NvmlError> {
    let lib = mig.nvml().lib();
    let function = match which {
        Instance::Gpu => lib.nvmlDeviceGetGpuInstanceId.as_ref(),
        Instance::Compute => lib.nvmlDeviceGetComputeInstanceId.as_ref(),
    };
    // A library without the symbol is too old for MIG.
    let function = function.map_err(|_| NvmlError::FunctionNotFound)?;
    let mut id: libc::c_uint = 0;
    // SAFETY: the raw handle is only passed to the library it came from, below.
    let handle = unsafe { mig.handle() };
    // SAFETY: `function` was resolved from the loaded NVML by `nvml-wrapper`, whose field type
    // carries the C signature `nvmlReturn_t (nvmlDevice_t, unsigned int *)`; `handle` is a live
    // handle from that same library (`mig` borrows the `Nvml` it came from, so NVML stays
    // initialised for the call), and `id` is a valid, writable `unsigned int`.
    let code = unsafe { function(handle, &mut id) };
    nvml_try(code)?;
    Ok(id)
}
