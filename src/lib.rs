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

pub mod cdi;
pub mod cdi_hooks;
pub mod config;
pub mod config_edit;
pub mod container;
pub mod doctor;
pub mod elf;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
#[cfg(test)]
mod floors;
pub mod fsutil;
pub mod host;
pub mod installer;
pub mod installer_flags;
pub mod ldcache;
pub mod log;
pub mod model;
pub mod oci;
pub mod out;
pub mod plan;
pub mod process;
pub mod runtime_config;
mod sys;
pub mod syslog;
pub mod system;
#[cfg(test)]
mod unsafe_lint;
