//! The formats every layer reads or writes, each a module with no policy of its own: the OCI
//! runtime spec and hook state (`oci`), glibc's ld.so.cache (`ldcache`), ELF headers (`elf`),
//! the toolkit's config.toml (`config`) and its log (`log`), syslog lines (`syslog`), bounded
//! and atomic file I/O (`fsutil`) and the host root a driver lives under (`root`).
//! May use: `nvct-model`, `nvct-sys`.

pub mod config;
pub mod elf;
pub mod fsutil;
pub mod ldcache;
pub mod log;
pub mod oci;
pub mod root;
pub mod syslog;
