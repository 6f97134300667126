//! CDI (Container Device Interface): our own small model of the spec format, names and
//! versions, the pure generator, the resolution of requested names to edits (`inject.rs`, for the
//! runtime shim), (Inventory → Spec, through the planner), the checks of
//! `cdi validate`, the reading of spec directories for `cdi list`, which file wins when several
//! define a device (`resolve.rs`), device nodes completed from the host (`fill.rs`), and
//! `cdi transform root`.
//! Why not the `container-device-interface` crate: docs/CDI.md.

pub mod block_yaml;
pub mod encode;
pub mod fill;
pub mod inject;
pub mod list;
pub mod name;
pub mod resolve;
pub mod spec;
pub mod transform;
pub mod validate;
pub mod version;

pub use name::QualifiedName;
pub use spec::{ContainerEdits, Device, DeviceNode, Format, Hook, Mount, Spec};
