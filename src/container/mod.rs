//! The container layer: the one primitive for each kind of edit a [`crate::plan::Plan`] holds,
//! called by the prestart hook's applier (`apply.rs`) and by the CDI hooks (`cdi_hooks.rs`)
//! alike, so both output paths make each edit with the same code:
//!
//! | plan field     | primitive                          | CDI hook                          |
//! |----------------|------------------------------------|-----------------------------------|
//! | mounts, nodes  | [`rootfs::Rootfs::mount_target`]   | (runc mounts them from the spec)  |
//! | `cgroup_rules` | [`cgroup::allow_devices`]          | (runc applies the spec's rules)   |
//! | `symlinks`     | [`symlinks::create`]               | `create-symlinks`                 |
//! | `proc_mask`    | [`proc_mask::mount`]               | `disable-device-node-modification`|
//! | `cuda_compat`  | [`ldso_conf::enable_cuda_compat`]  | `enable-cuda-compat`              |
//! | `ldcache_dirs` | [`ld_cache::refresh`] (native, else [`ldconfig`]) | `update-ldcache` |
//!
//! Every path inside a container goes through [`rootfs`], the one gate. These functions run in
//! the container's mount namespace; none of them executes anything from the image.

pub mod cgroup;
pub mod ld_cache;
pub mod ldconfig;
pub mod ldso_conf;
pub mod mountinfo;
pub mod proc_mask;
pub mod rootfs;
pub mod symlinks;

/// Where the image keeps its libraries, probed through the gate in the container's mount
/// namespace: its multiarch dir (`/usr/lib/x86_64-linux-gnu`, `/usr/lib/aarch64-linux-gnu`)
/// if it has one, else `/usr/lib64`, else `/usr/lib`, else `/usr/lib64` (created).
pub(crate) fn probe_layout(root: &rootfs::Rootfs, arch: crate::model::Arch) -> crate::plan::Layout {
    let dirs = arch.image_lib_dirs();
    let lib_dir = dirs
        .iter()
        .find(|d| root.is_dir(std::path::Path::new(d)))
        .cloned()
        .unwrap_or_else(|| "/usr/lib64".into());
    crate::plan::Layout {
        lib_dir: Some(lib_dir.into()),
    }
}
