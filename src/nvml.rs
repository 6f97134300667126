//! (temporary stub; replaced by branch nvml)
use std::path::{Path, PathBuf};
#[derive(Debug, thiserror::Error)]
#[error("nvml stub {0}")]
pub struct NvmlError(PathBuf);
pub struct NvmlHost { pub driver_version: String, pub cuda_version: Option<String>, pub gpus: Vec<crate::discover::Gpu> }
pub fn discover_gpus(lib: &Path) -> Result<NvmlHost, NvmlError> { Err(NvmlError(lib.into())) }
