//! A binary's flags and environment → a library call's options, one module per flag family.

pub mod cdi_generate;
pub mod container_cli;
pub mod hook;
pub mod installer;
pub mod installer_cli;
pub mod runtime;
