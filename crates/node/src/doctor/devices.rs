//! The device nodes under the device root: the checks `device root` (shown only when its `dev/`
//! is missing), `gpu device nodes`, `control device nodes` and `/dev/char links`.

use super::config::config_file_flag;
use super::{check, ok, Check, Status};
use crate::system;
use nvct_formats::root::DriverRoot;
use nvct_model::Inventory;
use std::path::Path;

/// Shown only when it fails: `<device root>/dev`, where the node checks look and their fixes
/// would create nodes, is not a directory. When the device root is the driver root and that is
/// missing, the driver check has already said so.
pub(super) fn device_root_check(root: &DriverRoot, config_path: &Path) -> Option<Check> {
    let dev = root.dev_path("/dev");
    if dev.is_dir() || (root.dev_root == root.root && !root.root.is_dir()) {
        return None;
    }
    Some(check(
        "device root",
        Status::Fail,
        format!(
            "{} is not a directory: the NVIDIA device nodes are looked for there (device root {})",
            dev.display(),
            root.dev_root.display()
        ),
        format!(
            "point nvidia-container-cli.dev-root at the directory whose dev/ has the nodes, e.g. the host's: `nvidia-ctk config --set nvidia-container-cli.dev-root=/ --in-place{}`",
            config_file_flag(config_path)
        ),
    ))
}

fn node_present(inv: &Inventory, path: &str) -> bool {
    inv.nodes.iter().any(|n| n.path == Path::new(path))
}

pub(super) fn gpu_nodes_check(root: &DriverRoot, inv: &Inventory) -> Check {
    let missing: Vec<&nvct_model::Gpu> = inv
        .gpus
        .iter()
        .filter(|g| !node_present(inv, &format!("/dev/nvidia{}", g.minor)))
        .collect();
    if inv.gpus.is_empty() {
        return check(
            "gpu device nodes",
            Status::Fail,
            "the driver reports no GPUs",
            "check `nvidia-smi`, `dmesg | grep -i nvrm` and that the GPUs are not excluded",
        );
    }
    if missing.is_empty() {
        return ok(
            "gpu device nodes",
            format!(
                "{} GPUs, each with its /dev/nvidiaN under {}",
                inv.gpus.len(),
                root.dev_root.display()
            ),
        );
    }
    let named: Vec<String> = missing
        .iter()
        .map(|g| format!("GPU {} ({}): /dev/nvidia{}", g.index, g.uuid, g.minor))
        .collect();
    let minors: Vec<String> = missing.iter().map(|g| g.minor.to_string()).collect();
    check(
        "gpu device nodes",
        Status::Fail,
        format!("missing under {}: {}", root.dev_root.display(), named.join(", ")),
        format!(
            "create them: `nvidia-modprobe -c {}` (one per minor), or `mknod -m 666 {}/dev/nvidiaN c 195 N`",
            minors.join(" -c "),
            root.dev_root.display()
        ),
    )
}

pub(super) fn control_nodes_check(root: &DriverRoot, inv: &Inventory) -> Check {
    let missing: Vec<&str> = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
        .into_iter()
        .filter(|p| !node_present(inv, p))
        .collect();
    if missing.is_empty() {
        return ok(
            "control device nodes",
            "nvidiactl, nvidia-uvm and nvidia-uvm-tools present",
        );
    }
    let dev = dev_root_flag(root);
    check(
        "control device nodes",
        Status::Fail,
        format!("missing under {}: {}", root.dev_root.display(), missing.join(", ")),
        format!("`nvidia-ctk system create-device-nodes --control-devices{dev}` (needs the nvidia-uvm module: `modprobe nvidia-uvm`)"),
    )
}

/// ` --dev-root=DIR` for a fix command, when the device root is not `/`.
fn dev_root_flag(root: &DriverRoot) -> String {
    if root.dev_root == Path::new("/") {
        String::new()
    } else {
        format!(" --dev-root={}", root.dev_root.display())
    }
}

/// The check, and the device nodes without a `/dev/char` link. The DRM nodes (`/dev/dri`) are
/// udev's to link, not `create-dev-char-symlinks`' (as upstream's): not checked.
pub(super) fn char_links_check(root: &DriverRoot, inv: &Inventory) -> (Check, Vec<String>) {
    let nvidia: Vec<nvct_model::DeviceNode> = inv
        .nodes
        .iter()
        .filter(|n| !n.path.starts_with("/dev/dri"))
        .cloned()
        .collect();
    let links = system::char_links(&system::node_numbers(&nvidia));
    let missing: Vec<String> = links
        .iter()
        .filter(|(link, target)| !system::link_is(&root.dev_path(link), target))
        .map(|(link, _)| link.display().to_string())
        .collect();
    let dev = dev_root_flag(root);
    let c = if missing.is_empty() {
        ok(
            "/dev/char links",
            format!("{} links, one per NVIDIA device node", links.len()),
        )
    } else {
        check(
            "/dev/char links",
            Status::Warn,
            format!("missing: {}", missing.join(", ")),
            format!("`nvidia-ctk system create-dev-char-symlinks --create-all{dev}`"),
        )
    };
    (c, missing)
}
