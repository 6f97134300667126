//! The node jobs, each run by an operator or a unit rather than by an engine: `configure` (an
//! engine's config gains or loses the NVIDIA runtime: `nvidia-ctk runtime`), `doctor` (what
//! is wrong on this node), `installer` (what the GPU Operator's toolkit container runs),
//! `daemon` (the installer's life on the node: install, wait, undo), `system` (device nodes
//! and /dev/char links).
//! May use every layer below it.

pub mod configure;
pub mod daemon;
pub mod doctor;
pub mod installer;
pub mod system;
