//! One module per fuzz target, each a plain `run(&[u8])` that panics on a failed property:
//! called by the libFuzzer entries in `fuzz_targets/` (nightly, cargo-fuzz) and by the stable
//! replay (`crate::replay`, `tests/replay.rs`, `examples/replay.rs`).

pub mod cdi_spec;
pub mod config_json;
pub mod containerd_config;
pub mod crio_config;
pub mod dbus_reply;
pub mod device_rules;
pub mod devices;
pub mod docker_config;
pub mod elf;
pub mod hook_state;
pub mod ldcache;
pub mod request_env;
pub mod requirements;
pub mod syslog_line;
pub mod toolkit_config;
pub mod unit_name;

/// Every target by its cargo-fuzz name (the `[[bin]]` names of `Cargo.toml`).
pub const ALL: &[(&str, fn(&[u8]))] = &[
    ("cdi_spec", cdi_spec::run),
    ("config_json", config_json::run),
    ("containerd_config", containerd_config::run),
    ("crio_config", crio_config::run),
    ("dbus_reply", dbus_reply::run),
    ("device_rules", device_rules::run),
    ("devices", devices::run),
    ("docker_config", docker_config::run),
    ("elf", elf::run),
    ("hook_state", hook_state::run),
    ("ldcache", ldcache::run),
    ("request_env", request_env::run),
    ("requirements", requirements::run),
    ("syslog_line", syslog_line::run),
    ("toolkit_config", toolkit_config::run),
    ("unit_name", unit_name::run),
];
