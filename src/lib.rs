//! nvct: the flags of the binaries (`nvidia-container-runtime-hook`, `nvidia-container-runtime`,
//! `nvidia-cdi-hook`, `nvidia-ctk`, `nvidia-ctk-installer`): each module turns one binary's
//! flags and variables into a job's options. The work itself is in the crates under `crates/`
//! (crates/README.md: one paragraph each).

pub mod flags;
