//! The whole request of a container: `request::resolve` over an environment (one `KEY=VALUE`
//! per input line), volume-mount device requests and privilege, under toolkit configs that
//! accept or refuse them; a resolved request then goes through `nvct_plan::plan` (which evaluates
//! its NVIDIA_REQUIRE_* expressions and checks its ids) on a fixed simulated host.
//! Property: no panic; an unprivileged container never gets MIG config/monitor devices.

use crate::common;

use nvct_formats::config::Config;
use nvct_plan::request::{self, ContainerView};
use nvct_plan::{self, Layout};
use std::path::PathBuf;

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Some((flags, text)) = common::flags_and_text(data) else {
        return;
    };
    let mut env = Vec::new();
    let mut mounts = Vec::new();
    for line in text.lines() {
        // `@src dst` lines are mounts (e.g. `@/dev/null /var/run/nvidia-container-devices/0`).
        match line.strip_prefix('@').and_then(|m| m.split_once(' ')) {
            Some((src, dst)) => mounts.push((PathBuf::from(src), PathBuf::from(dst))),
            None => env.push(line.to_string()),
        }
    }
    let view = ContainerView {
        env,
        mounts,
        privileged: flags & 1 != 0,
    };
    let mut config = Config::default();
    config.accept_nvidia_visible_devices_envvar_when_unprivileged = flags & 2 != 0;
    config.accept_nvidia_visible_devices_as_volume_mounts = flags & 4 != 0;
    config.disable_require = flags & 8 != 0;
    if flags & 16 != 0 {
        config.supported_driver_capabilities = "utility,compute".into();
    }
    let Ok(resolved) = request::resolve(&view, &config) else {
        return;
    };
    let Some(req) = resolved.request else { return };
    if !view.privileged {
        assert!(
            req.mig_config.is_none() && req.mig_monitor.is_none(),
            "MIG devices for an unprivileged container"
        );
    }
    let inv = common::inventory("550.54.15", Some("12.4"));
    // Bit 5: a known layout (the prestart hook's), else a CDI spec's.
    let layout = if flags & 32 != 0 {
        Layout {
            lib_dir: Some(PathBuf::from("/usr/lib64")),
            lib32_dir: Some(PathBuf::from("/usr/lib")),
            glx_indirect: false,
        }
    } else {
        Layout::UNKNOWN
    };
    let _ = nvct_plan::plan(&req, &inv, &layout);
}
