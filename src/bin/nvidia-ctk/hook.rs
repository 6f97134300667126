//! `nvidia-ctk hook <name>` and `nvidia-cdi-hook <name>` (this file is compiled into both
//! binaries): the hooks CDI specs reference. Flags are parsed here; the work is in
//! `nvct::cdi_hooks`. Host inputs (the ldconfig binary, the host's /proc) are opened before
//! the container's mount namespace is entered. An unknown hook name only warns and exits 0,
//! as upstream does, so that a spec written by a newer toolkit does not break containers.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nvct::cdi_hooks::{self, Container};
use nvct::log::{Logger, Steps};

#[derive(Args, Debug)]
pub struct HookArgs {
    #[command(subcommand)]
    command: HookCommand,
    /// Read the OCI state from this file instead of stdin ("-" or empty: stdin), as
    /// upstream's testing-only flag of every hook.
    #[arg(long, global = true, hide = true, value_name = "PATH")]
    container_spec: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum HookCommand {
    /// Create symlinks inside the container (--link TARGET::LINK, repeatable).
    CreateSymlinks {
        /// TARGET::LINK: the symlink LINK (a container path) pointing to TARGET.
        #[arg(long = "link", value_name = "TARGET::LINK")]
        links: Vec<String>,
    },
    /// Refresh the container's ld cache: written natively (the image's cache plus the
    /// injected libraries), else with the host ldconfig.
    UpdateLdcache {
        /// A container directory to add to the ld cache (repeatable).
        #[arg(long = "folder", value_name = "DIR")]
        folders: Vec<PathBuf>,
        /// The host ldconfig (an absolute host path; never a binary from the container).
        #[arg(long, default_value = nvct::container::ldconfig::DEFAULT_LDCONFIG)]
        ldconfig_path: PathBuf,
        /// Ours: always run the host ldconfig, never write the cache natively.
        #[arg(long)]
        ldconfig_only: bool,
    },
    /// Mask the container's /proc/driver/nvidia: params with `ModifyDeviceFiles: 0`, and only
    /// the container's own GPUs under gpus/ (as the prestart hook does).
    DisableDeviceNodeModification {
        /// The host's /proc (a simulated host's procfs copy in tests).
        #[arg(long, default_value = "/proc")]
        proc_root: PathBuf,
    },
    /// Put the image's CUDA forward-compat libraries first in the ld cache when they are newer.
    EnableCudaCompat {
        /// The host's driver version (e.g. 550.54.15).
        #[arg(long, default_value = "")]
        host_driver_version: String,
        /// The CUDA version of the host's driver (upstream compares it with the CUDA version
        /// an ELF note of the compat libcuda declares). That note is not read here: with this
        /// flag set, forward compatibility stays off, as upstream's for a library without it.
        #[arg(long, default_value = "")]
        host_cuda_version: String,
        /// Where the image keeps its compat libraries.
        #[arg(long, default_value = nvct::container::ldso_conf::CUDA_COMPAT_DIR)]
        cuda_compat_container_root: PathBuf,
    },
    /// Write the driver application profile that restricts EGL and Vulkan to the container's
    /// GPUs (EGLVisibleDGPUDevices, from the /dev/nvidiaN nodes in the container).
    UpdateApplicationProfile,
    /// Ours: several hooks' work in one process (the hooks of jit-cdi specs), each hook's flags
    /// after its `--<hook name>`, done in the order symlinks, /proc mask, forward compat, ld
    /// cache, application profile.
    ApplyEdits {
        #[arg(long)]
        create_symlinks: bool,
        #[arg(long = "link", value_name = "TARGET::LINK")]
        links: Vec<String>,
        #[arg(long)]
        disable_device_node_modification: bool,
        #[arg(long, default_value = "/proc")]
        proc_root: PathBuf,
        #[arg(long)]
        enable_cuda_compat: bool,
        #[arg(long, default_value = "")]
        host_driver_version: String,
        #[arg(long)]
        update_ldcache: bool,
        #[arg(long = "folder", value_name = "DIR")]
        folders: Vec<PathBuf>,
        #[arg(long, default_value = nvct::container::ldconfig::DEFAULT_LDCONFIG)]
        ldconfig_path: PathBuf,
        #[arg(long)]
        ldconfig_only: bool,
        #[arg(long)]
        update_application_profile: bool,
    },
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

/// The edits one hook invocation makes, each `None` when not asked for; the separate hooks
/// ask for one, `apply-edits` for several.
#[derive(Default)]
struct Edits {
    links: Option<Vec<String>>,
    /// The host's /proc to build the mask from.
    mask: Option<PathBuf>,
    /// The host's driver version and the image's compat directory.
    cuda_compat: Option<(String, PathBuf)>,
    /// The folders, the host ldconfig, whether the cache may be written natively.
    ldcache: Option<(Vec<PathBuf>, PathBuf, bool)>,
    /// Write the application profile.
    app_profile: bool,
}

/// What the binary should print as its name in messages. With `debug` (the global `--debug`),
/// the step timings of the edits go to stderr.
pub fn run(args: HookArgs, program: &'static str, debug: bool) -> Result<()> {
    let edits = match args.command {
        HookCommand::CreateSymlinks { links } => Edits {
            links: Some(links),
            ..Edits::default()
        },
        HookCommand::UpdateLdcache {
            folders,
            ldconfig_path,
            ldconfig_only,
        } => Edits {
            ldcache: Some((folders, ldconfig_path, !ldconfig_only)),
            ..Edits::default()
        },
        HookCommand::DisableDeviceNodeModification { proc_root } => Edits {
            mask: Some(proc_root),
            ..Edits::default()
        },
        HookCommand::EnableCudaCompat {
            host_driver_version,
            host_cuda_version,
            cuda_compat_container_root: dir,
        } => Edits {
            cuda_compat: host_cuda_version
                .is_empty()
                .then_some((host_driver_version, dir)),
            ..Edits::default()
        },
        HookCommand::UpdateApplicationProfile => Edits {
            app_profile: true,
            ..Edits::default()
        },
        HookCommand::ApplyEdits {
            create_symlinks,
            links,
            disable_device_node_modification,
            proc_root,
            enable_cuda_compat,
            host_driver_version,
            update_ldcache,
            folders,
            ldconfig_path,
            ldconfig_only,
            update_application_profile,
        } => Edits {
            links: create_symlinks.then_some(links),
            mask: disable_device_node_modification.then_some(proc_root),
            cuda_compat: enable_cuda_compat.then(|| {
                let dir = nvct::container::ldso_conf::CUDA_COMPAT_DIR.into();
                (host_driver_version, dir)
            }),
            ldcache: update_ldcache.then_some((folders, ldconfig_path, !ldconfig_only)),
            app_profile: update_application_profile,
        },
        HookCommand::Unknown(argv) => {
            let name = argv.first().map(String::as_str).unwrap_or_default();
            eprintln!("{program}: warning: unknown hook {name:?}; doing nothing");
            return Ok(());
        }
    };
    let mut steps = Steps::start();
    let result = apply(edits, args.container_spec.as_deref(), &mut steps);
    if debug {
        Logger::stderr_only(program).debug(&steps.line());
    }
    result.inspect_err(|e| {
        // crun throws a hook's stderr away: the system log keeps the reason.
        let tag = program.split(' ').next().unwrap_or(program);
        let text = nvct::log::error_text(e.chain());
        nvct::syslog::send(nvct::syslog::Severity::Err, tag, &format!("error: {text}"));
    })
}

/// Makes `e` in the container of the state on stdin, in the prestart hook's order: links,
/// /proc mask, forward compat, ld cache, application profile. Host inputs first, then the container is entered once.
/// Each step ends with a mark in `steps`.
fn apply(e: Edits, state: Option<&std::path::Path>, steps: &mut Steps) -> Result<()> {
    let links = e
        .links
        .iter()
        .flatten()
        .map(|l| cdi_hooks::parse_link(l))
        .collect::<Result<Vec<_>, _>>()?;
    let ldconfig = e
        .ldcache
        .as_ref()
        .map(|(_, path, _)| nvct::container::ldconfig::open_host(path))
        .transpose()?;
    steps.mark("args");
    let c = match state.filter(|p| !p.as_os_str().is_empty() && *p != std::path::Path::new("-")) {
        Some(path) => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("--container-spec {}", path.display()))?;
            Container::from_state(file)?
        }
        None => Container::from_state(std::io::stdin().lock())?,
    };
    steps.mark("state");
    let mask = match &e.mask {
        // Nothing to mask (no driver files on this host): nothing to do for this edit.
        Some(proc_root) => cdi_hooks::masked_proc_driver(proc_root, &c),
        None => None,
    };
    steps.mark("mask-rediscovery");
    if e.links.is_none()
        && mask.is_none()
        && e.cuda_compat.is_none()
        && ldconfig.is_none()
        && !e.app_profile
    {
        return Ok(());
    }
    let root = c.enter(steps)?;
    if e.links.is_some() {
        cdi_hooks::create_symlinks(&root, &links)?;
        steps.mark("symlinks");
    }
    if let Some(mask) = &mask {
        cdi_hooks::disable_device_node_modification(&root, mask)?;
        steps.mark("proc-mask");
    }
    if let Some((version, dir)) = &e.cuda_compat {
        nvct::container::ldso_conf::enable_cuda_compat(&root, version, dir)?;
        steps.mark("cuda-compat");
    }
    if let (Some(ldconfig), Some((folders, _, native))) = (&ldconfig, &e.ldcache) {
        let fd = std::os::fd::AsFd::as_fd(ldconfig);
        let how = cdi_hooks::update_ldcache(&root, &c, fd, folders, *native)
            .with_context(|| format!("update-ldcache for container {}", c.state.id))?;
        steps.mark(match how {
            nvct::container::ld_cache::Refreshed::Native { .. } => "ldcache-native",
            nvct::container::ld_cache::Refreshed::Ldconfig { .. } => "ldcache-ldconfig",
        });
    }
    if e.app_profile {
        let written = nvct::container::app_profile::write(&root)
            .with_context(|| format!("update-application-profile for container {}", c.state.id))?;
        if let Some(note) = nvct::apply::app_profile_note(&written) {
            eprintln!("warning: {note}");
        }
        steps.mark("app-profile");
    }
    Ok(())
}
