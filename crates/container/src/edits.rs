//! The post-mount edits of a plan (links, the `/proc` mask, CUDA forward compatibility, the ld
//! cache, the application profile) and the one protocol that carries them to a CDI hook:
//! [`Edits::to_hooks`] / [`Edits::to_apply_edits`] write the hook arguments a CDI spec holds,
//! [`parse`] reads them back in `nvidia-cdi-hook` / `nvidia-ctk hook`. The writer and the
//! reader are tested as a round trip for every field. [`apply`] makes the edits in a
//! container, in the one order both paths use (the prestart hook's child and the CDI hook).

use super::rootfs::{is_clean_absolute, Rootfs};
use super::{app_profile, ld_cache, ldconfig, ldso_conf, proc_mask, symlinks};
use nvct_formats::log::Steps;
use nvct_model::{ProcMask, Symlink};
use std::collections::BTreeSet;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

/// The hooks a spec can carry (`--disable-hook` names; the nvidia-cdi-hook subcommands), in
/// the order their edits are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookKind {
    CreateSymlinks,
    UpdateLdcache,
    DisableDeviceNodeModification,
    EnableCudaCompat,
    UpdateApplicationProfile,
    /// Not an edit of the container: a `createRuntime` hook that asks systemd to keep the
    /// device rules (`cdi_hooks::keep_device_rules`); in a spec only where systemd is the init.
    KeepDeviceRules,
}

impl HookKind {
    pub const ALL: [HookKind; 6] = [
        HookKind::CreateSymlinks,
        HookKind::UpdateLdcache,
        HookKind::DisableDeviceNodeModification,
        HookKind::EnableCudaCompat,
        HookKind::UpdateApplicationProfile,
        HookKind::KeepDeviceRules,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HookKind::CreateSymlinks => "create-symlinks",
            HookKind::UpdateLdcache => "update-ldcache",
            HookKind::DisableDeviceNodeModification => "disable-device-node-modification",
            HookKind::EnableCudaCompat => "enable-cuda-compat",
            HookKind::UpdateApplicationProfile => "update-application-profile",
            HookKind::KeepDeviceRules => "keep-device-rules",
        }
    }

    /// Every hook's name, comma-separated: the one list help texts and errors give.
    pub fn names() -> String {
        let names: Vec<&str> = HookKind::ALL.iter().map(|k| k.name()).collect();
        names.join(", ")
    }

    pub fn parse(s: &str) -> Option<HookKind> {
        HookKind::ALL.into_iter().find(|h| h.name() == s)
    }

    /// The hooks off unless enabled: `keep-device-rules` where systemd is not the init (no
    /// daemon-reload to survive there; it would only cost a process per container).
    pub fn default_disabled(systemd_booted: bool) -> BTreeSet<HookKind> {
        if systemd_booted {
            BTreeSet::new()
        } else {
            BTreeSet::from([HookKind::KeepDeviceRules])
        }
    }

    /// The hooks a `--disable-hook` list (or `modes.jit-cdi.nvcdi-disable-hooks`) names:
    /// hook names, `all`, and upstream's hooks our specs never carry (nothing to leave out).
    /// `Err` names the first unknown one.
    pub fn parse_disabled<'a>(
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeSet<HookKind>, String> {
        let mut out = BTreeSet::new();
        for h in names {
            if h == "all" {
                out.extend(HookKind::ALL);
            } else if !UPSTREAM_ONLY_HOOKS.contains(&h) {
                out.insert(HookKind::parse(h).ok_or_else(|| h.to_string())?);
            }
        }
        Ok(out)
    }
}

/// Hook names upstream's `--disable-hook` takes that our specs never carry.
pub const UPSTREAM_ONLY_HOOKS: &[&str] = &["chmod", "create-soname-symlinks"];

/// The name of the hook that does the work of several in one process.
pub const APPLY_EDITS: &str = "apply-edits";

/// The host's procfs, which the `/proc` mask is read from unless told otherwise.
pub const DEFAULT_PROC_ROOT: &str = "/proc";

/// `enable-cuda-compat`: the host's driver version and where the image keeps its compat
/// libraries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaCompat {
    pub host_driver_version: String,
    pub dir: PathBuf,
}

/// `update-ldcache`: the folders, the host ldconfig (`None`: [`ldconfig::DEFAULT_LDCONFIG`])
/// and whether the cache may be written natively (`--ldconfig-only` says no).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdCache {
    pub folders: Vec<PathBuf>,
    pub ldconfig: Option<PathBuf>,
    pub native: bool,
}

/// The edits one hook invocation makes, each `None` (`false`) when not asked for: a separate
/// hook asks for one, `apply-edits` for several.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Edits {
    /// `create-symlinks --link T::L`.
    pub links: Option<Vec<Symlink>>,
    /// `disable-device-node-modification --proc-root P`: the host's /proc to build the mask from.
    pub mask: Option<PathBuf>,
    pub cuda_compat: Option<CudaCompat>,
    pub ldcache: Option<LdCache>,
    /// `update-application-profile`.
    pub app_profile: bool,
}

/// What a hook's arguments ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    Edits(Edits),
    /// `keep-device-rules` (createRuntime, on the host).
    KeepDeviceRules,
    /// A hook name this toolkit does not have (a newer spec's): warn and do nothing.
    Unknown(String),
    /// `--help` / `-h` or no hook name.
    Help,
}

/// A hook invocation: what it asks for, and the hidden `--container-spec` (the OCI state
/// from a file instead of stdin, as upstream's testing-only flag of every hook).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub invocation: Invocation,
    pub container_spec: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EditsError {
    #[error("{hook}: unknown flag {flag:?} (see `nvidia-cdi-hook --help` for each hook's flags)")]
    UnknownFlag { hook: String, flag: String },
    #[error("{hook}: {flag} needs a value")]
    MissingValue { hook: String, flag: String },
    #[error("{hook}: unexpected argument {arg:?} (every value follows its flag)")]
    Stray { hook: String, arg: String },
    #[error("--link {0:?} is not TARGET::LINK with an absolute, clean LINK (e.g. libcuda.so.1::/usr/lib64/libcuda.so)")]
    BadLink(String),
}

/// The usage text of the hooks: each hook and the flags it reads.
pub const USAGE: &str = "\
Usage: nvidia-cdi-hook <HOOK> [FLAGS]   (nvidia-ctk hook <HOOK> [FLAGS])

The hooks CDI specs reference; each reads the OCI state on stdin.

  create-symlinks --link TARGET::LINK ...
      create symlinks in the container (LINK: an absolute container path)
  update-ldcache --folder DIR ... [--ldconfig-path PATH] [--ldconfig-only]
      refresh the container's ld cache (natively, else with the host ldconfig)
  disable-device-node-modification [--proc-root PATH]
      mask /proc/driver/nvidia: ModifyDeviceFiles: 0, only the container's own GPUs
  enable-cuda-compat --host-driver-version V [--host-cuda-version V]
                     [--cuda-compat-container-root DIR]
      put the image's CUDA forward-compat libraries first in the ld cache when newer
  update-application-profile
      restrict EGL and Vulkan to the container's GPUs
  keep-device-rules
      (createRuntime) ask systemd to keep the container's NVIDIA device rules across
      `systemctl daemon-reload`
  apply-edits [--create-symlinks --link ...] [--disable-device-node-modification
              [--proc-root P]] [--enable-cuda-compat --host-driver-version V]
              [--update-ldcache --folder DIR ...] [--update-application-profile]
      several hooks' work in one process, in the order above

An unknown hook name warns and does nothing (a spec written by a newer toolkit).
";

/// `TARGET::LINK`: `LINK` absolute and clean, `TARGET` non-empty.
pub fn parse_link(arg: &str) -> Result<Symlink, EditsError> {
    let bad = || EditsError::BadLink(arg.to_string());
    let (target, link) = arg.split_once("::").ok_or_else(bad)?;
    let link = Path::new(link);
    if target.is_empty()
        || target.contains('\0')
        || !is_clean_absolute(link)
        || link.parent().is_none()
    {
        return Err(bad());
    }
    Ok(Symlink {
        target: target.into(),
        link: link.to_path_buf(),
    })
}

/// The flags each hook reads: (flag, takes a value).
fn flags_of(hook: &str) -> Option<&'static [(&'static str, bool)]> {
    Some(match hook {
        "create-symlinks" => &[("--link", true)],
        "update-ldcache" => &[
            ("--folder", true),
            ("--ldconfig-path", true),
            ("--ldconfig-only", false),
        ],
        "disable-device-node-modification" => &[("--proc-root", true)],
        "enable-cuda-compat" => &[
            ("--host-driver-version", true),
            ("--host-cuda-version", true),
            ("--cuda-compat-container-root", true),
        ],
        "update-application-profile" => &[],
        "keep-device-rules" => &[],
        APPLY_EDITS => &[
            ("--create-symlinks", false),
            ("--link", true),
            ("--disable-device-node-modification", false),
            ("--proc-root", true),
            ("--enable-cuda-compat", false),
            ("--host-driver-version", true),
            ("--host-cuda-version", true),
            ("--cuda-compat-container-root", true),
            ("--update-ldcache", false),
            ("--folder", true),
            ("--ldconfig-path", true),
            ("--ldconfig-only", false),
            ("--update-application-profile", false),
        ],
        _ => return None,
    })
}

/// Reads a hook's arguments (everything after `nvidia-cdi-hook` / `nvidia-ctk hook`): the
/// hook name, its flags (`--flag value` or `--flag=value`), and the hidden `--container-spec`
/// anywhere. The reader of what [`Edits::to_hooks`] and [`Edits::to_apply_edits`] write.
pub fn parse(args: &[String]) -> Result<Parsed, EditsError> {
    let mut container_spec = None;
    let mut hook: Option<&str> = None;
    let mut values: Vec<(&'static str, Option<String>)> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        if flag == "--container-spec" {
            container_spec = Some(PathBuf::from(match inline {
                Some(v) => v,
                None => it.next().cloned().ok_or_else(|| EditsError::MissingValue {
                    hook: hook.unwrap_or("hook").into(),
                    flag: flag.into(),
                })?,
            }));
            continue;
        }
        if flag == "--help" || flag == "-h" || (hook.is_none() && flag == "help") {
            return Ok(Parsed {
                invocation: Invocation::Help,
                container_spec,
            });
        }
        let Some(name) = hook else {
            if flag.starts_with('-') {
                return Err(EditsError::UnknownFlag {
                    hook: "hook".into(),
                    flag: flag.into(),
                });
            }
            if flags_of(arg).is_none() {
                return Ok(Parsed {
                    invocation: Invocation::Unknown(arg.clone()),
                    container_spec,
                });
            }
            hook = Some(arg.as_str());
            continue;
        };
        let known = flags_of(name).unwrap_or(&[]);
        let Some(&(flag, takes_value)) = known.iter().find(|(f, _)| *f == flag) else {
            return Err(if flag.starts_with('-') {
                EditsError::UnknownFlag {
                    hook: name.into(),
                    flag: flag.into(),
                }
            } else {
                EditsError::Stray {
                    hook: name.into(),
                    arg: arg.clone(),
                }
            });
        };
        let value = match (takes_value, inline) {
            (false, None) => None,
            (false, Some(_)) => {
                return Err(EditsError::UnknownFlag {
                    hook: name.into(),
                    flag: arg.clone(),
                })
            }
            (true, Some(v)) => Some(v),
            (true, None) => Some(it.next().cloned().ok_or_else(|| EditsError::MissingValue {
                hook: name.into(),
                flag: flag.into(),
            })?),
        };
        values.push((flag, value));
    }
    let Some(name) = hook else {
        return Ok(Parsed {
            invocation: Invocation::Help,
            container_spec,
        });
    };
    let invocation = if name == HookKind::KeepDeviceRules.name() {
        Invocation::KeepDeviceRules
    } else {
        Invocation::Edits(edits_from(name, &values)?)
    };
    Ok(Parsed {
        invocation,
        container_spec,
    })
}

/// The edits of hook `name` given its flag values.
fn edits_from(name: &str, values: &[(&'static str, Option<String>)]) -> Result<Edits, EditsError> {
    let all = |flag: &str| -> Vec<&str> {
        values
            .iter()
            .filter(|(f, _)| *f == flag)
            .filter_map(|(_, v)| v.as_deref())
            .collect()
    };
    let last = |flag: &str| all(flag).last().map(|v| v.to_string());
    let set = |flag: &str| values.iter().any(|(f, _)| *f == flag);
    let one = name != APPLY_EDITS;
    let asked = |kind: HookKind| {
        if one {
            name == kind.name()
        } else {
            set(&format!("--{}", kind.name()))
        }
    };
    let mut e = Edits::default();
    if asked(HookKind::CreateSymlinks) {
        let links: Result<Vec<Symlink>, EditsError> =
            all("--link").into_iter().map(parse_link).collect();
        e.links = Some(links?);
    }
    if asked(HookKind::DisableDeviceNodeModification) {
        e.mask = Some(
            last("--proc-root")
                .unwrap_or(DEFAULT_PROC_ROOT.into())
                .into(),
        );
    }
    // With the host's CUDA version given, upstream compares it with the ELF note of the
    // image's compat libcuda; that note is not read here, so forward compatibility stays off,
    // as upstream's for a library without the note.
    if asked(HookKind::EnableCudaCompat)
        && last("--host-cuda-version").unwrap_or_default().is_empty()
    {
        e.cuda_compat = Some(CudaCompat {
            host_driver_version: last("--host-driver-version").unwrap_or_default(),
            dir: last("--cuda-compat-container-root")
                .unwrap_or(ldso_conf::CUDA_COMPAT_DIR.into())
                .into(),
        });
    }
    if asked(HookKind::UpdateLdcache) {
        e.ldcache = Some(LdCache {
            folders: all("--folder").into_iter().map(PathBuf::from).collect(),
            ldconfig: last("--ldconfig-path").map(PathBuf::from),
            native: !set("--ldconfig-only"),
        });
    }
    e.app_profile = asked(HookKind::UpdateApplicationProfile);
    Ok(e)
}

impl Edits {
    /// Whether nothing is asked for.
    pub fn is_empty(&self) -> bool {
        *self == Edits::default()
    }

    /// Each asked-for edit as one hook's arguments (`[name, flags...]`), in the order the
    /// edits are made. Defaults are left out (`--proc-root /proc`, the compat dir).
    pub fn to_hooks(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut hook = |kind: HookKind, flags: Vec<String>| {
            out.push(
                std::iter::once(kind.name().to_string())
                    .chain(flags)
                    .collect(),
            );
        };
        if let Some(links) = &self.links {
            let mut flags = Vec::new();
            for l in links {
                flags.extend([
                    "--link".into(),
                    format!(
                        "{}::{}",
                        l.target.to_string_lossy(),
                        l.link.to_string_lossy()
                    ),
                ]);
            }
            hook(HookKind::CreateSymlinks, flags);
        }
        if let Some(proc_root) = &self.mask {
            let mut flags = Vec::new();
            if proc_root != Path::new(DEFAULT_PROC_ROOT) {
                flags.extend(["--proc-root".into(), proc_root.display().to_string()]);
            }
            hook(HookKind::DisableDeviceNodeModification, flags);
        }
        if let Some(c) = &self.cuda_compat {
            let mut flags = vec![
                "--host-driver-version".into(),
                c.host_driver_version.clone(),
            ];
            if c.dir != Path::new(ldso_conf::CUDA_COMPAT_DIR) {
                flags.extend([
                    "--cuda-compat-container-root".into(),
                    c.dir.display().to_string(),
                ]);
            }
            hook(HookKind::EnableCudaCompat, flags);
        }
        if let Some(l) = &self.ldcache {
            let mut flags = Vec::new();
            if let Some(ldconfig) = &l.ldconfig {
                flags.extend(["--ldconfig-path".into(), ldconfig.display().to_string()]);
            }
            if !l.native {
                flags.push("--ldconfig-only".into());
            }
            for dir in &l.folders {
                flags.extend(["--folder".into(), dir.display().to_string()]);
            }
            hook(HookKind::UpdateLdcache, flags);
        }
        if self.app_profile {
            hook(HookKind::UpdateApplicationProfile, vec![]);
        }
        out
    }

    /// All of them as one `apply-edits` hook's arguments: each hook's flags after a
    /// `--<hook name>` marker, in the same order.
    pub fn to_apply_edits(&self) -> Vec<String> {
        let mut args = vec![APPLY_EDITS.to_string()];
        for h in self.to_hooks() {
            let mut it = h.into_iter();
            if let Some(name) = it.next() {
                args.push(format!("--{name}"));
            }
            args.extend(it);
        }
        args
    }
}

/// The edits resolved for one container, ready to make: the mask computed, the ldconfig
/// opened, the injected libraries known. Both paths build one and call [`apply`].
pub struct Work<'a> {
    pub symlinks: &'a [Symlink],
    pub proc_mask: Option<&'a ProcMask>,
    /// The host driver version and the image's compat dir.
    pub cuda_compat: Option<(&'a str, &'a Path)>,
    pub ldcache: Option<LdWork<'a>>,
    pub app_profile: bool,
}

/// The ld cache step's inputs: the host ldconfig (opened on the host), the folders, the
/// injected libraries (container paths), whether the cache may be written natively.
pub struct LdWork<'a> {
    pub ldconfig: BorrowedFd<'a>,
    pub folders: &'a [PathBuf],
    pub libs: Vec<PathBuf>,
    pub native: bool,
}

/// What [`apply`] has to say: how the ld cache was refreshed, and why the application profile
/// left something out (a warning).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Notes {
    pub ld_cache: Option<String>,
    pub app_profile: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Symlink(#[from] symlinks::SymlinkError),
    #[error("cannot mask /proc/driver/nvidia in the container: {0}")]
    Mask(String),
    #[error("CUDA forward compatibility: {0}")]
    CudaCompat(#[from] ldso_conf::LdsoConfError),
    #[error("update-ldcache: {0}")]
    LdCache(#[from] ld_cache::RefreshError),
    #[error("update-application-profile: {0}")]
    AppProfile(#[from] app_profile::AppProfileError),
}

/// Makes `w` in the container `root`, in the one order: links, `/proc` mask, forward compat
/// (which the ld cache then reads), ld cache, application profile (from the `/dev/nvidiaN`
/// nodes the container has by then).
/// Each step ends with a mark in `steps` (the debug log's step timings).
pub fn apply(root: &Rootfs, w: &Work, steps: &mut Steps) -> Result<Notes, ApplyError> {
    let mut notes = Notes::default();
    symlinks::create(root, w.symlinks)?;
    steps.mark("symlinks");
    if let Some(mask) = w.proc_mask {
        proc_mask::mount(root, mask).map_err(ApplyError::Mask)?;
        steps.mark("proc-mask");
    }
    if let Some((version, dir)) = w.cuda_compat {
        ldso_conf::enable_cuda_compat(root, version, dir)?;
        steps.mark("cuda-compat");
    }
    if let Some(l) = &w.ldcache {
        let refreshed = ld_cache::refresh(root, l.ldconfig, l.folders, &l.libs, l.native)?;
        steps.mark(match refreshed {
            ld_cache::Refreshed::Native { .. } => "ldcache-native",
            ld_cache::Refreshed::Ldconfig { .. } => "ldcache-ldconfig",
        });
        notes.ld_cache = Some(refreshed.to_string());
    }
    if w.app_profile {
        let written = app_profile::write(root)?;
        notes.app_profile = app_profile::note(&written);
        steps.mark("app-profile");
    }
    Ok(notes)
}

/// The libraries injected into the container, for the ld cache: the mounts (container
/// paths) directly in one of `folders` whose names say `.so`. The one rule of both paths: the
/// prestart hook gives it the plan's library mounts and config.json's mounts, the CDI hook
/// config.json's mounts (where the runtime put the spec's), so a volume of the user's there
/// counts the same in both.
pub fn injected_libraries<'a>(
    mounts: impl IntoIterator<Item = &'a Path>,
    folders: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mounts
        .into_iter()
        .filter(|m| m.parent().is_some_and(|p| folders.iter().any(|f| f == p)))
        .filter(|m| {
            m.file_name()
                .is_some_and(|n| n.as_encoded_bytes().windows(3).any(|w| w == b".so"))
        })
        .map(Path::to_path_buf)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The default host ldconfig path of [`LdCache::ldconfig`].
pub fn ldconfig_path(l: &LdCache) -> &Path {
    l.ldconfig
        .as_deref()
        .unwrap_or(Path::new(ldconfig::DEFAULT_LDCONFIG))
}

#[cfg(test)]
mod tests;
