//! nvct: the library behind `nvidia-container-runtime-hook`, `nvidia-container-runtime` and
//! `nvidia-ctk`.
//!
//! Every way of giving a container its GPUs is one computation with a different last step:
//! request (pure) → discover (read-only, into an [`discover::Inventory`]) → plan (a pure value)
//! → apply (the prestart hook), spec edit (the runtime shim) or a CDI spec. See
//! docs/ARCHITECTURE.md for the picture and the rules that keep it simple.

// All of the library's `unsafe` is in `sys` (test `unsafe_lint`): one operation per block, so
// each `SAFETY:` note answers for exactly one thing.
#![deny(clippy::multiple_unsafe_ops_per_block)]

pub mod apply;
pub mod cdi;
pub mod cdi_hooks;
pub mod config;
pub mod config_edit;
pub mod container;
pub mod devices;
pub mod discover;
pub mod doctor;
pub mod driver;
pub mod elf;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod fsutil;
pub mod installer;
pub mod labels;
pub mod ldcache;
pub mod log;
pub mod model;
pub mod nvml;
pub mod oci;
pub mod optin;
pub mod plan;
pub mod process;
pub mod request;
pub mod root;
pub mod runtime_config;
pub mod shim;
pub mod spec_edit;
mod sys;
pub mod syslog;
pub mod system;
#[cfg(test)]
mod unsafe_lint;
