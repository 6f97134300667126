//! The node jobs, each run by an operator or a unit rather than by an engine: `doctor` (what
//! is wrong on this node), `installer` (what the GPU Operator's toolkit container runs),
//! `system` (device nodes and /dev/char links).
//! May use every layer below it.

pub mod doctor;
pub mod installer;
pub mod system;
