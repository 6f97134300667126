//! The outputs: each a function of one [`nvct_model::Plan`] (or of CDI edits made from
//! one), never a decision of its own. [`prestart`] applies a plan to a container from the
//! prestart hook, [`spec_edit`] writes edits into a config.json, [`cdi_edits`] turns a plan
//! into CDI container edits (for `cdi generate`, per device, and for jit-cdi, once), and
//! [`shim`] is what the runtime shim does with a `create`.

pub mod cdi_edits;
pub mod cdi_hooks;
pub mod container_cli;
pub mod generate;
pub mod hook;
pub mod prestart;
pub mod process;
pub mod shim;
pub mod spec_edit;
