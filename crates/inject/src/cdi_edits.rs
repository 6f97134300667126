//! PURE: a [`Plan`] as CDI container edits — its device nodes and mounts as the spec's
//! `deviceNodes` and `mounts` (runc makes them), its post-mount fields as hooks through the
//! one hook protocol ([`nvct_container::edits::Edits`]). Used by `cdi generate` (the shared
//! edits, and each device's own nodes and links) and by jit-cdi (once, for the request).

use nvct_cdi::spec::{ContainerEdits, DeviceNode, Hook, Mount};
use nvct_container::edits::{CudaCompat, Edits, HookKind, LdCache};
use nvct_container::ldso_conf::CUDA_COMPAT_DIR;
use nvct_model::{FileKind, FileMount, Plan, Symlink};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The env a spec sets to the container directory of the driver's libraries (upstream's name).
pub const LIBCUDA_DIR_ENV: &str = "NVIDIA_CTK_LIBCUDA_DIR";

/// How the hooks of a spec are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookOptions {
    /// The hook binary (`nvidia-cdi-hook`).
    pub hook_path: String,
    /// `update-ldcache --ldconfig-path`, when set.
    pub ldconfig_path: Option<String>,
    /// `disable-device-node-modification --proc-root` (left out when `/proc`).
    pub proc_root: PathBuf,
    pub disabled: BTreeSet<HookKind>,
    /// One `apply-edits` hook instead of one hook per edit.
    pub one_hook: bool,
}

/// A device node of the plan as a spec's, as upstream's: the host node's mode, and cgroup
/// access with mknod (`rwm`).
pub fn node(n: &nvct_model::DeviceNode) -> DeviceNode {
    DeviceNode {
        path: n.path.to_string_lossy().into_owned(),
        host_path: Some(n.host_path.to_string_lossy().into_owned()),
        kind: Some("c".into()),
        major: Some(n.major.into()),
        minor: Some(n.minor.into()),
        permissions: Some("rwm".into()),
        file_mode: (n.mode != 0).then_some(n.mode),
        ..Default::default()
    }
}

/// A file mount of the plan: read-only bind, IPC sockets also `noexec`.
pub fn mount(m: &FileMount) -> Mount {
    let mut options: Vec<String> = ["ro", "nosuid", "nodev", "bind"].map(String::from).into();
    if m.kind == FileKind::Ipc {
        options.push("noexec".into());
    }
    Mount {
        host_path: m.host_path.to_string_lossy().into_owned(),
        container_path: m.container_path.to_string_lossy().into_owned(),
        options,
        kind: None,
    }
}

fn hook(opts: &HookOptions, args: Vec<String>) -> Hook {
    Hook {
        hook_name: "createContainer".into(),
        path: opts.hook_path.clone(),
        args: std::iter::once("nvidia-cdi-hook".to_string())
            .chain(args)
            .collect(),
        env: vec![nvct_model::HOOK_PATH_ENV.into()],
    }
}

/// The post-mount fields of `plan` as hook edits, each left out when its hook is disabled:
/// `symlinks` (create-symlinks), `proc_mask` (disable-device-node-modification: the hook
/// computes the same mask from the host's proc root and the container's device nodes),
/// `cuda_compat` (enable-cuda-compat), `ldcache_dirs` (update-ldcache), `app_profile`
/// (update-application-profile).
pub fn edits(opts: &HookOptions, plan: &Plan) -> Edits {
    let on = |h: HookKind| !opts.disabled.contains(&h);
    Edits {
        links: (on(HookKind::CreateSymlinks) && !plan.symlinks.is_empty())
            .then(|| plan.symlinks.clone()),
        mask: (on(HookKind::DisableDeviceNodeModification) && plan.proc_mask.is_some())
            .then(|| opts.proc_root.clone()),
        cuda_compat: plan
            .cuda_compat
            .clone()
            .filter(|_| on(HookKind::EnableCudaCompat))
            .map(|host_driver_version| CudaCompat {
                host_driver_version,
                dir: CUDA_COMPAT_DIR.into(),
            }),
        ldcache: (on(HookKind::UpdateLdcache) && !plan.ldcache_dirs.is_empty()).then(|| LdCache {
            folders: plan.ldcache_dirs.clone(),
            ldconfig: opts.ldconfig_path.as_ref().map(PathBuf::from),
            native: true,
        }),
        app_profile: on(HookKind::UpdateApplicationProfile) && plan.app_profile,
    }
}

/// `e` as the spec's hooks: one per edit, or one `apply-edits` hook when asked for and more
/// than one edit is made; then `keep-device-rules` (createRuntime) unless it is disabled.
pub fn hooks(opts: &HookOptions, e: &Edits) -> Vec<Hook> {
    let separate = e.to_hooks();
    let mut out: Vec<Hook> = if opts.one_hook && separate.len() > 1 {
        vec![hook(opts, e.to_apply_edits())]
    } else {
        separate.into_iter().map(|args| hook(opts, args)).collect()
    };
    if !opts.disabled.contains(&HookKind::KeepDeviceRules) {
        out.push(Hook {
            hook_name: "createRuntime".into(),
            ..hook(opts, vec![HookKind::KeepDeviceRules.name().into()])
        });
    }
    out
}

/// The `create-symlinks` hook of `links` (a device's own DRM `/dev/dri/by-path` links), if
/// there are any and the hook is not disabled.
pub fn link_hook(opts: &HookOptions, links: &[Symlink]) -> Option<Hook> {
    if links.is_empty() || opts.disabled.contains(&HookKind::CreateSymlinks) {
        return None;
    }
    let e = Edits {
        links: Some(links.to_vec()),
        ..Edits::default()
    };
    e.to_hooks().into_iter().next().map(|args| hook(opts, args))
}

/// The container edits of a whole plan: `NVIDIA_CTK_LIBCUDA_DIR` and `extra_env`, its device
/// nodes, its mounts (IPC sockets left out with `no_ipc`), its hooks.
pub fn container_edits(
    opts: &HookOptions,
    plan: &Plan,
    extra_env: &[String],
    no_ipc: bool,
) -> ContainerEdits {
    let env = plan
        .libcuda_dir
        .iter()
        .map(|dir| format!("{LIBCUDA_DIR_ENV}={dir}"))
        .chain(extra_env.iter().cloned())
        .collect();
    ContainerEdits {
        env,
        device_nodes: plan.device_nodes.iter().map(node).collect(),
        mounts: plan
            .mounts
            .iter()
            .filter(|m| !(no_ipc && m.kind == FileKind::Ipc))
            .map(mount)
            .collect(),
        hooks: hooks(opts, &edits(opts, plan)),
    }
}
