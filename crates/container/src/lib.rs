//! The container layer: the one primitive for each kind of edit a [`nvct_model::Plan`] holds,
//! called by the prestart hook's applier (`nvct_inject::prestart`) and by the CDI hooks (`cdi_hooks.rs`)
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
//! | `app_profile`  | [`app_profile::write`]             | `update-application-profile`      |
//!
//! Every path inside a container goes through [`rootfs`], the one gate. These functions run in
//! the container's mount namespace; none of them executes anything from the image.

pub mod app_profile;
pub mod cgroup;
pub mod edits;
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
///
/// The 32-bit dir (compat32), as upstream's libnvidia-container picks it: a Debian-like image
/// (here: one with the 64-bit multiarch dir; upstream looks for `/etc/debian_version`) gets
/// `/usr/lib/i386-linux-gnu`; any other gets `/usr/lib32` if it has one, else `/usr/lib` if
/// that is a directory other than the 64-bit one (RHEL, Fedora), else `/usr/lib32` (created).
/// A 32-bit dir that resolves to the 64-bit one (`/usr/lib32 -> lib64`) counts as absent;
/// where the last choice is that one too (or some other object of the image), the multiarch
/// dir `/usr/lib/i386-linux-gnu` is used if it is free or distinct, else there is none and
/// the 32-bit libraries are not injected (never over the 64-bit builds of the same names).
/// And whether the image has its own `libGLX_indirect.so.0` there (which it then keeps).
pub fn probe_layout(root: &rootfs::Rootfs, arch: nvct_model::Arch) -> nvct_model::Layout {
    use std::path::{Path, PathBuf};
    let dirs = arch.image_lib_dirs();
    let lib_dir: PathBuf = dirs
        .iter()
        .find(|d| root.is_dir(Path::new(d)))
        .cloned()
        .unwrap_or_else(|| "/usr/lib64".into())
        .into();
    // A directory other than the 64-bit one (a link `/usr/lib32 -> lib64` is that one).
    let distinct = |p: &Path| root.is_dir(p) && !same_dir(root, &lib_dir, p);
    // Nothing at all there (not even a dangling link): created as a directory of its own.
    let free = |p: &Path| {
        matches!(root.resolve(p, libc::O_PATH | libc::O_NOFOLLOW),
            Err(rootfs::RootfsError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOENT))
    };
    let lib32_dir = arch.multiarch32_dir().and_then(|multiarch32| {
        let dir = if lib_dir == Path::new(&dirs[0]) {
            Path::new(multiarch32)
        } else if distinct(Path::new("/usr/lib32")) {
            Path::new("/usr/lib32")
        } else if distinct(Path::new("/usr/lib")) {
            Path::new("/usr/lib")
        } else {
            Path::new("/usr/lib32")
        };
        // The 32-bit builds never go over the 64-bit ones: else the multiarch dir, else none.
        [dir, Path::new(multiarch32)]
            .into_iter()
            .find(|d| distinct(d) || free(d))
            .map(Path::to_path_buf)
    });
    // Anything at the path (Mesa's link, or a file) is the image's own.
    let glx_indirect = root
        .resolve(
            &lib_dir.join("libGLX_indirect.so.0"),
            libc::O_PATH | libc::O_NOFOLLOW,
        )
        .is_ok();
    nvct_model::Layout {
        lib_dir: Some(lib_dir),
        lib32_dir,
        glx_indirect,
    }
}

/// Whether `a` and `b` resolve (through the gate) to the same directory, e.g. an image whose
/// `/usr/lib64` is a link to `lib`.
fn same_dir(root: &rootfs::Rootfs, a: &std::path::Path, b: &std::path::Path) -> bool {
    let id = |p: &std::path::Path| {
        let fd = root
            .resolve(p, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .ok()?;
        nvct_sys::fstat(std::os::fd::AsFd::as_fd(&fd))
            .ok()
            .map(|st| (st.st_dev, st.st_ino))
    };
    match (id(a), id(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}
