//! READ: the readers of the host. Each turns one part of a node (a driver root, its device
//! nodes, /proc/driver/nvidia, NVML, the driver's files) into the values of [`nvct_model`];
//! [`discover`] puts them together as one `Inventory`. A reader never imports the planner
//! (`nvct_plan`), an output (`nvct_inject`) or the container primitives.

pub mod devices;
pub mod discover;
pub mod driver;
pub mod labels;
pub mod nvml;
pub mod optin;
