//! `nvidia-ctk-installer`'s flags and environment variables → [`nvct_node::installer::Options`].
//!
//! PURE: [`Flags`] holds the values as typed (clap fills them from the flag or its variable),
//! [`resolve`] defaults and checks them per engine. The rest of upstream's variable names live
//! here as tables: the aliases a variable is also read under ([`ENV_ALIASES`],
//! [`alias_assignments`]), the variables that set a toolkit config key ([`CONFIG_VARIABLES`],
//! [`upstream_config_sets`]), upstream's variables this installer does not act on, each with
//! why ([`NOT_ACTED_ON`]), and which set variables the log must name ([`unread_variables`]).
//! The environment comes in through a lookup closure; nothing here reads the process's own
//! state.
//!
//! The facts mirrored are upstream's flag definitions (NVIDIA/nvidia-container-toolkit
//! `cmd/nvidia-ctk-installer/main.go`, `container/runtime/runtime.go`,
//! `container/runtime/{containerd,crio}/*.go`, `toolkit/toolkit.go`), docs/COMPAT.md.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use nvct_engines::Engine;
use nvct_node::installer::{ConfigSource, EngineConfig, Options, Restart};

/// The install dir when neither the flag, its variables nor a positional argument give one.
pub const DEFAULT_INSTALL_DIR: &str = "/usr/local/nvidia";
/// Upstream's `--cdi-kind` default: the kind of the management spec the installer writes.
pub const DEFAULT_CDI_KIND: &str = "management.nvidia.com/gpu";
/// Upstream's CRI-O hook defaults (`container/runtime/crio/crio.go`).
pub const DEFAULT_CRIO_HOOKS_DIR: &str = "/usr/share/containers/oci/hooks.d";
pub const DEFAULT_CRIO_HOOK_FILENAME: &str = "oci-nvidia-hook.json";

/// The installer's flags as typed (or as their variables set them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    /// `--toolkit-install-dir` (`--root`) or its variables `TOOLKIT_INSTALL_DIR`, `ROOT`.
    pub toolkit_install_dir: Option<PathBuf>,
    /// The positional `DESTINATION` of upstream's installer before v1.18 (the GPU Operator's
    /// entrypoint `nvidia-toolkit /usr/local/nvidia`): the install dir only when neither the
    /// flag nor its variables give one (upstream made it the flag's default value).
    pub destination: Option<PathBuf>,
    /// `None`: the prefix of the installer's own executable.
    pub toolkit_source_root: Option<PathBuf>,
    pub runtime: Engine,
    pub config: Option<PathBuf>,
    /// "" is no drop-in (the main file is edited).
    pub drop_in_config: Option<PathBuf>,
    pub drop_in_config_host_path: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    /// `None`: the engine's default.
    pub restart_mode: Option<Restart>,
    pub host_root: PathBuf,
    pub driver_root: PathBuf,
    pub driver_root_ctr_path: Option<PathBuf>,
    pub accept_nvidia_visible_devices_envvar_when_unprivileged: bool,
    pub accept_nvidia_visible_devices_as_volume_mounts: bool,
    pub dev_root: Option<PathBuf>,
    /// Where this container sees the device root (`DEV_ROOT_CTR_PATH`); default: the driver
    /// root's path here when the device root is the driver root.
    pub dev_root_ctr_path: Option<PathBuf>,
    pub proc_root: PathBuf,
    pub runtime_name: String,
    /// Upstream's `defaultSetAsDefault = true`.
    pub set_as_default: bool,
    pub cdi_enabled: bool,
    /// `--enable-cdi-in-runtime` (`RUNTIME_ENABLE_CDI`): the engine's CDI switch; `None`:
    /// follows `cdi_enabled`.
    pub runtime_enable_cdi: Option<bool>,
    pub cdi_output_dir: PathBuf,
    /// `--cdi-kind` (`CDI_KIND`): the management spec's kind.
    pub cdi_kind: String,
    /// `NVIDIA_CONTAINER_RUNTIME_MODE`: the `nvidia` runtime's mode (`None`: auto).
    pub runtime_mode: Option<String>,
    /// The items of `--create-device-nodes` (a comma list); `None`: not given.
    pub create_device_nodes: Option<Vec<String>>,
    /// `NO_RUNTIME_CONFIG`: install the toolkit, leave the engine's config alone.
    pub no_runtime_config: bool,
    /// `ENABLE_NRI_PLUGIN`: refused (no NRI plugin here).
    pub enable_nri_plugin: bool,
    /// `CRIO_CONFIG_MODE`: `config` (a drop-in) or `hook` (an OCI hook file).
    pub crio_config_mode: String,
    pub crio_hooks_dir: PathBuf,
    pub crio_hook_filename: String,
    /// The items of `--config-source` (`RUNTIME_CONFIG_SOURCES`, `RUNTIME_CONFIG_SOURCE`).
    pub config_sources: Vec<String>,
}

impl Flags {
    /// Upstream's defaults, for `runtime`.
    pub fn new(runtime: Engine) -> Flags {
        Flags {
            toolkit_install_dir: None,
            destination: None,
            toolkit_source_root: None,
            runtime,
            config: None,
            drop_in_config: None,
            drop_in_config_host_path: None,
            socket: None,
            restart_mode: None,
            host_root: "/host".into(),
            driver_root: "/".into(),
            driver_root_ctr_path: None,
            accept_nvidia_visible_devices_envvar_when_unprivileged: true,
            accept_nvidia_visible_devices_as_volume_mounts: false,
            dev_root: None,
            dev_root_ctr_path: None,
            proc_root: "/proc".into(),
            runtime_name: "nvidia".into(),
            set_as_default: true,
            cdi_enabled: false,
            runtime_enable_cdi: None,
            cdi_output_dir: "/var/run/cdi".into(),
            cdi_kind: DEFAULT_CDI_KIND.into(),
            runtime_mode: None,
            create_device_nodes: None,
            no_runtime_config: false,
            enable_nri_plugin: false,
            crio_config_mode: "config".into(),
            crio_hooks_dir: DEFAULT_CRIO_HOOKS_DIR.into(),
            crio_hook_filename: DEFAULT_CRIO_HOOK_FILENAME.into(),
            config_sources: Vec::new(),
        }
    }
}

/// An installer command line (or environment) that cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error("--drop-in-config: docker has no drop-in files")]
    DockerDropIn,
    #[error("--create-device-nodes {0:?}: expected control or none")]
    DeviceNodes(Vec<String>),
    #[error("the installer's own path: {0}")]
    OwnPath(#[source] std::io::Error),
    #[error("{flag} {}: {source}", path.display())]
    Absolute {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "ENABLE_NRI_PLUGIN (--enable-nri-plugin): this installer has no NRI plugin; nothing was \
         changed on this node. Leave it off (GPU Operator: cdi.nriPluginEnabled=false) and let \
         the engine inject CDI devices itself: CDI_ENABLED=true turns on containerd's enable_cdi \
         (CRI-O's CDI is always on) and the device plugin passes CDI devices through the CRI \
         (its cdi-cri strategy); management pods use the `nvidia` runtime class"
    )]
    Nri,
    #[error("CRIO_CONFIG_MODE (--config-mode) {0:?}: expected config or hook")]
    CrioConfigMode(String),
    #[error(
        "NVIDIA_CONTAINER_RUNTIME_MODE (--nvidia-container-runtime.mode) {0:?}: expected auto, \
         legacy, cdi or jit-cdi"
    )]
    RuntimeMode(String),
    #[error("CDI_KIND (--cdi-kind) {kind:?}: {why}")]
    CdiKind { kind: String, why: String },
    #[error("RUNTIME_CONFIG_SOURCE (--config-source) {0:?}: expected file, file=PATH or command")]
    ConfigSource(String),
    /// A config variable whose value the toolkit config cannot take.
    #[error("{var}={value:?} (config key {key}): {why}")]
    ConfigVariable {
        var: &'static str,
        value: String,
        key: &'static str,
        why: String,
    },
}

/// Go's `strconv.ParseBool`, which upstream's flags (urfave/cli) use for their boolean
/// variables: `1 t T TRUE true True` and `0 f F FALSE false False`.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!(
            "{s:?}: expected a boolean (true, false, 1, 0, t, f, TRUE, FALSE, True, False)"
        )),
    }
}

/// The flags as typed → what to install where. `lookup` reads an environment variable (for
/// [`CONFIG_VARIABLES`]); `current_exe` is the installer's own path, asked only when
/// `--toolkit-source-root` is not given (the source root is its prefix).
pub fn resolve(
    f: &Flags,
    lookup: impl Fn(&str) -> Option<String>,
    current_exe: impl FnOnce() -> std::io::Result<PathBuf>,
) -> Result<Options, FlagError> {
    // First, so that nothing else is looked at: upstream's NRI mode leaves the engine alone
    // and serves an NRI plugin, which this installer does not have.
    if f.enable_nri_plugin {
        return Err(FlagError::Nri);
    }
    let engine = f.runtime;
    // Upstream's defaults for the engine.
    let api = engine.api();
    let (config, drop_in, socket, restart) = (
        api.default_config(),
        api.default_drop_in(),
        api.default_socket(),
        api.default_restart(),
    );
    if !api.uses_drop_in() && f.drop_in_config.is_some() {
        return Err(FlagError::DockerDropIn);
    }
    let mut notes = Vec::new();
    let cdi_output_empty = f.cdi_output_dir.as_os_str().is_empty();
    let cdi_enabled = f.cdi_enabled && !cdi_output_empty;
    if f.cdi_enabled && cdi_output_empty {
        notes.push("CDI_OUTPUT_DIR is empty: no CDI spec is written (as upstream)".to_string());
    }
    // Upstream: `control` by default, and none unless CDI is on; ours also honours an explicit
    // `control` without CDI (packaging/kubernetes sets it).
    let items: Vec<&str> = match &f.create_device_nodes {
        Some(v) => v.iter().map(String::as_str).collect(),
        None if cdi_enabled => vec!["control"],
        None => Vec::new(),
    };
    let create_device_nodes = match items[..] {
        [] | [""] | ["none"] => false,
        ["control"] => true,
        _ => {
            return Err(FlagError::DeviceNodes(
                f.create_device_nodes.clone().unwrap_or_default(),
            ))
        }
    };
    let source_root = match &f.toolkit_source_root {
        Some(r) => r.clone(),
        None => {
            let exe = current_exe().map_err(FlagError::OwnPath)?;
            exe.parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("/"))
                .to_path_buf()
        }
    };
    let abs = |p: &Path, flag: &'static str| {
        std::path::absolute(p).map_err(|source| FlagError::Absolute {
            flag,
            path: p.to_path_buf(),
            source,
        })
    };
    // The GPU Operator sets it for CRI-O too; upstream uses it for containerd's `imports` only.
    let drop_in_host_path = match f.drop_in_config_host_path.clone() {
        Some(p) if p.as_os_str().is_empty() => None,
        Some(p) if !api.imports_drop_in() => {
            notes.push(format!(
                "RUNTIME_DROP_IN_CONFIG_HOST_PATH {}: only containerd's `imports` name the \
                 drop-in; {} reads its drop-in directory itself",
                p.display(),
                engine.name()
            ));
            None
        }
        p => p,
    };
    let runtime_mode = match f.runtime_mode.as_deref() {
        None | Some("") => None,
        Some(m @ ("auto" | "legacy" | "cdi" | "jit-cdi")) => Some(m.to_string()),
        Some(m) => return Err(FlagError::RuntimeMode(m.to_string())),
    };
    let (cdi_vendor, cdi_class) = cdi_kind(&f.cdi_kind)?;
    let config_path: PathBuf = f.config.clone().unwrap_or_else(|| config.into());
    let engine_config = if f.no_runtime_config {
        EngineConfig::None
    } else if engine == Engine::Crio {
        match f.crio_config_mode.as_str() {
            "config" => EngineConfig::Files,
            "hook" => EngineConfig::CrioHook(f.crio_hooks_dir.join(&f.crio_hook_filename)),
            m => return Err(FlagError::CrioConfigMode(m.to_string())),
        }
    } else {
        EngineConfig::Files
    };
    let config_sources = config_sources(engine, &f.config_sources, &config_path, &mut notes)?;
    let config_sets = upstream_config_sets(lookup)?;
    let install_dir = f
        .toolkit_install_dir
        .clone()
        .or_else(|| f.destination.clone())
        .unwrap_or_else(|| DEFAULT_INSTALL_DIR.into());
    Ok(Options {
        drop_in_host_path,
        config_sets,
        install_dir: abs(&install_dir, "--toolkit-install-dir")?,
        source_root,
        engine,
        config: config_path,
        drop_in: match &f.drop_in_config {
            Some(p) if p.as_os_str().is_empty() => None,
            Some(p) => Some(abs(p, "--drop-in-config")?),
            None => drop_in.map(PathBuf::from),
        },
        socket: f.socket.clone().unwrap_or_else(|| socket.into()),
        restart: f.restart_mode.unwrap_or(restart),
        host_root: f.host_root.clone(),
        driver_root: f.driver_root.clone(),
        dev_root: f.dev_root.clone().unwrap_or_else(|| f.driver_root.clone()),
        dev_root_ctr_path: f
            .dev_root_ctr_path
            .clone()
            .filter(|p| !p.as_os_str().is_empty()),
        proc_root: f.proc_root.clone(),
        driver_root_ctr_path: f.driver_root_ctr_path.clone(),
        accept_envvar_unprivileged: f.accept_nvidia_visible_devices_envvar_when_unprivileged,
        accept_volume_mounts: f.accept_nvidia_visible_devices_as_volume_mounts,
        runtime_name: f.runtime_name.clone(),
        set_as_default: f.set_as_default,
        cdi_enabled,
        engine_cdi: f.runtime_enable_cdi.unwrap_or(cdi_enabled),
        cdi_output_dir: f.cdi_output_dir.clone(),
        cdi_vendor,
        cdi_class,
        runtime_mode,
        create_device_nodes,
        engine_config,
        config_sources,
        notes,
    })
}

/// `vendor/class` of `--cdi-kind`, checked as a CDI kind.
fn cdi_kind(kind: &str) -> Result<(String, String), FlagError> {
    let err = |why: String| FlagError::CdiKind {
        kind: kind.to_string(),
        why,
    };
    let (vendor, class) = nvct_cdi::name::parse_kind(kind).map_err(|e| err(e.to_string()))?;
    Ok((vendor.to_string(), class.to_string()))
}

/// The engine config's sources (upstream's `--config-source`, `GetConfigLoaders`): `file` is
/// the engine's config, `file=PATH` another file (k3s's generated `config.toml` beside the
/// `config.toml.tmpl` to write), `command` (the engine's `config dump`) is not run here and
/// is said so in `notes`. None given (or only `command`): empty, the engine's config itself.
/// Docker reads only its file (as upstream, which overrides the sources for docker).
fn config_sources(
    engine: Engine,
    items: &[String],
    config: &Path,
    notes: &mut Vec<String>,
) -> Result<Vec<ConfigSource>, FlagError> {
    let items: Vec<&str> = items
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    if engine == Engine::Docker {
        if !items.is_empty() {
            notes.push(format!(
                "RUNTIME_CONFIG_SOURCE {}: docker's config is read from its file only (as upstream)",
                items.join(",")
            ));
        }
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for item in &items {
        let (kind, arg) = match item.split_once('=') {
            Some((k, a)) => (k.trim(), Some(a.trim())),
            None => (*item, None),
        };
        match (kind, arg) {
            ("file", None) => out.push(ConfigSource::File(config.to_path_buf())),
            ("file", Some(p)) if !p.is_empty() => out.push(ConfigSource::File(p.into())),
            ("command", _) => notes.push(format!(
                "RUNTIME_CONFIG_SOURCE {item}: the engine's `config dump` is not run here; the \
                 next source is used (else {})",
                config.display()
            )),
            _ => return Err(FlagError::ConfigSource(item.to_string())),
        }
    }
    Ok(out)
}

/// Upstream's other names of the variables: (the variable a flag reads, its aliases). An alias
/// counts when the variable itself is unset; the first alias set wins.
pub const ENV_ALIASES: &[(&str, &[&str])] = &[
    ("TOOLKIT_INSTALL_DIR", &["ROOT"]),
    ("RUNTIME_CONFIG", &["CONTAINERD_CONFIG", "DOCKER_CONFIG"]),
    ("RUNTIME_SOCKET", &["CONTAINERD_SOCKET", "DOCKER_SOCKET"]),
    ("NVIDIA_DRIVER_ROOT", &["DRIVER_ROOT"]),
    ("NVIDIA_DEV_ROOT", &["DEV_ROOT"]),
    (
        "NVIDIA_RUNTIME_NAME",
        &["CONTAINERD_RUNTIME_CLASS", "DOCKER_RUNTIME_NAME"],
    ),
    (
        "NVIDIA_RUNTIME_SET_AS_DEFAULT",
        &["CONTAINERD_SET_AS_DEFAULT", "DOCKER_SET_AS_DEFAULT"],
    ),
    ("CDI_ENABLED", &["ENABLE_CDI"]),
    ("TOOLKIT_PID_FILE", &["PID_FILE"]),
    ("RUNTIME_CONFIG_SOURCES", &["RUNTIME_CONFIG_SOURCE"]),
];

/// The variables to set from their aliases (`lookup` reads the environment): each variable of
/// [`ENV_ALIASES`] that is unset and has an alias set, with that alias's value.
pub fn alias_assignments(
    lookup: impl Fn(&str) -> Option<OsString>,
) -> Vec<(&'static str, OsString)> {
    ENV_ALIASES
        .iter()
        .filter(|(var, _)| lookup(var).is_none())
        .filter_map(|(var, aliases)| Some((*var, aliases.iter().find_map(|a| lookup(a))?)))
        .collect()
}

/// Prefixes of upstream's installer variables: a variable of this shape that nothing here reads
/// is named in the log too (a misspelt one, one of a newer upstream).
pub const UPSTREAM_PREFIXES: &[&str] = &[
    "NVIDIA_CONTAINER_RUNTIME_",
    "NVIDIA_CONTAINER_CLI_",
    "NVIDIA_CONTAINER_TOOLKIT_",
    "NVIDIA_TOOLKIT_",
    "NVIDIA_RUNTIME_",
    "CONTAINERD_",
    "CRIO_",
    "RUNTIME_",
    "TOOLKIT_",
    "CDI_",
    "NRI_",
];

const NRI_OFF: &str = "NRI is not supported here (ENABLE_NRI_PLUGIN=true is refused); upstream \
                       reads it only with the NRI plugin on";
const NO_OVERRIDE: &str = "the runtime entries copy the default runtime's options; there is no \
                           JSON override";

/// Upstream's installer variables (its flag definitions) that this installer does not act on,
/// each with why; named in the log when set. Plus `CRIO_CONFIG`, which the GPU Operator sets
/// and upstream's installer does not read either.
pub const NOT_ACTED_ON: &[(&str, &str)] = &[
    (
        "TOOLKIT_PACKAGE_TYPE",
        "there is one install tree (the image's), no deb/rpm artifacts to choose from",
    ),
    ("TOOLKIT_DEBUG", "this installer logs every step it takes"),
    (
        "RUNTIME_EXECUTABLE_PATH",
        "the engine is never run to read its config (the `command` config source)",
    ),
    ("RUNTIME_CONFIG_OVERRIDE", NO_OVERRIDE),
    ("CONTAINERD_RUNTIME_CONFIG_OVERRIDE", NO_OVERRIDE),
    (
        "CONTAINERD_USE_LEGACY_CONFIG",
        "the config's own `version` decides its layout",
    ),
    (
        "CONTAINERD_RUNTIME_TYPE",
        "runtime_type is copied from the default runtime (else io.containerd.runc.v2)",
    ),
    (
        "NVIDIA_CONTAINER_TOOLKIT_OPT_IN_FEATURES",
        "no `features.*` keys are set from it; set them with nvidia-ctk config --set",
    ),
    ("NRI_PLUGIN_INDEX", NRI_OFF),
    ("NRI_SOCKET", NRI_OFF),
    ("NRI_NAMESPACE", NRI_OFF),
    ("NRI_MANAGEMENT_CDI_DEVICE_NAMESPACES", NRI_OFF),
    (
        "CRIO_CONFIG",
        "upstream's installer does not read it either; RUNTIME_CONFIG names CRI-O's config",
    ),
];

/// Upstream's installer variables: every `EnvVars(...)` of its flag definitions
/// (NVIDIA/nvidia-container-toolkit at d34b304: `cmd/nvidia-ctk-installer/main.go`,
/// `container/runtime/runtime.go`, `container/runtime/containerd/containerd.go`,
/// `container/runtime/crio/crio.go`, `toolkit/toolkit.go`). Each is read here or named in
/// [`NOT_ACTED_ON`] (the binary's tests check it against its flags).
pub const UPSTREAM_VARIABLES: &[&str] = &[
    "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS",
    "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED",
    "CDI_ENABLED",
    "ENABLE_CDI",
    "CDI_KIND",
    "CDI_OUTPUT_DIR",
    "CONTAINERD_RUNTIME_TYPE",
    "CONTAINERD_USE_LEGACY_CONFIG",
    "CREATE_DEVICE_NODES",
    "CRIO_CONFIG_MODE",
    "CRIO_HOOKS_DIR",
    "CRIO_HOOK_FILENAME",
    "DEV_ROOT_CTR_PATH",
    "DRIVER_ROOT_CTR_PATH",
    "ENABLE_NRI_PLUGIN",
    "HOST_ROOT_MOUNT",
    "NO_DAEMON",
    "NO_RUNTIME_CONFIG",
    "NRI_MANAGEMENT_CDI_DEVICE_NAMESPACES",
    "NRI_NAMESPACE",
    "NRI_PLUGIN_INDEX",
    "NRI_SOCKET",
    "NVIDIA_CONTAINER_CLI_DEBUG",
    "NVIDIA_CONTAINER_RUNTIME_DEBUG",
    "NVIDIA_CONTAINER_RUNTIME_HOOK_SKIP_MODE_DETECTION",
    "NVIDIA_CONTAINER_RUNTIME_LOG_LEVEL",
    "NVIDIA_CONTAINER_RUNTIME_MODE",
    "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES",
    "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
    "NVIDIA_CONTAINER_RUNTIME_RUNTIMES",
    "NVIDIA_CONTAINER_TOOLKIT_OPT_IN_FEATURES",
    "NVIDIA_DEV_ROOT",
    "DEV_ROOT",
    "NVIDIA_DRIVER_ROOT",
    "DRIVER_ROOT",
    "NVIDIA_RUNTIME_NAME",
    "CONTAINERD_RUNTIME_CLASS",
    "DOCKER_RUNTIME_NAME",
    "NVIDIA_RUNTIME_SET_AS_DEFAULT",
    "CONTAINERD_SET_AS_DEFAULT",
    "DOCKER_SET_AS_DEFAULT",
    "RUNTIME",
    "RUNTIME_CONFIG",
    "CONTAINERD_CONFIG",
    "DOCKER_CONFIG",
    "RUNTIME_CONFIG_OVERRIDE",
    "CONTAINERD_RUNTIME_CONFIG_OVERRIDE",
    "RUNTIME_CONFIG_SOURCES",
    "RUNTIME_CONFIG_SOURCE",
    "RUNTIME_DROP_IN_CONFIG",
    "RUNTIME_DROP_IN_CONFIG_HOST_PATH",
    "RUNTIME_ENABLE_CDI",
    "RUNTIME_EXECUTABLE_PATH",
    "RUNTIME_RESTART_MODE",
    "RUNTIME_SOCKET",
    "CONTAINERD_SOCKET",
    "DOCKER_SOCKET",
    "TOOLKIT_DEBUG",
    "TOOLKIT_INSTALL_DIR",
    "ROOT",
    "TOOLKIT_PACKAGE_TYPE",
    "TOOLKIT_PID_FILE",
    "PID_FILE",
    "TOOLKIT_SOURCE_ROOT",
];

/// Variables read here that only one engine acts on: (variable, the engine).
const ENGINE_ONLY: &[(&str, Engine)] = &[
    ("CRIO_CONFIG_MODE", Engine::Crio),
    ("CRIO_HOOKS_DIR", Engine::Crio),
    ("CRIO_HOOK_FILENAME", Engine::Crio),
];

/// The variables in `names` (those set) that the log must name, sorted, each with why: those of
/// [`NOT_ACTED_ON`]; those only another engine acts on; and those that look like upstream's (a
/// prefix of [`UPSTREAM_PREFIXES`]) that nothing reads. `flag_variables` are those the flags
/// read (the binary's clap definitions); their aliases and [`CONFIG_VARIABLES`] count as read.
pub fn unread_variables(
    names: impl Iterator<Item = String>,
    flag_variables: &[String],
    engine: Engine,
) -> Vec<(String, String)> {
    let read = |n: &str| {
        flag_variables.iter().any(|v| v == n)
            || ENV_ALIASES.iter().any(|(_, a)| a.contains(&n))
            || CONFIG_VARIABLES.iter().any(|(v, _)| *v == n)
    };
    let mut out: Vec<(String, String)> = names
        .filter_map(|n| {
            if let Some((_, why)) = NOT_ACTED_ON.iter().find(|(v, _)| *v == n) {
                return Some((n, why.to_string()));
            }
            if let Some((_, only)) = ENGINE_ONLY.iter().find(|(v, e)| *v == n && *e != engine) {
                let why = format!("only --runtime={} acts on it", only.name());
                return Some((n, why));
            }
            let upstream_shape = UPSTREAM_PREFIXES.iter().any(|p| n.starts_with(p));
            (upstream_shape && !read(&n)).then(|| {
                (
                    n,
                    "an upstream setting this installer does not have".to_string(),
                )
            })
        })
        .collect();
    out.sort();
    out
}

/// Upstream's installer variables that set a key of the toolkit config it writes, and the key:
/// (variable, config key). Values are typed as `nvidia-ctk config --set` types them (lists
/// split on `:` and `,`, booleans in Go's forms).
pub const CONFIG_VARIABLES: &[(&str, &str)] = &[
    (
        "NVIDIA_CONTAINER_RUNTIME_DEBUG",
        "nvidia-container-runtime.debug",
    ),
    (
        "NVIDIA_CONTAINER_RUNTIME_LOG_LEVEL",
        "nvidia-container-runtime.log-level",
    ),
    (
        "NVIDIA_CONTAINER_RUNTIME_RUNTIMES",
        "nvidia-container-runtime.runtimes",
    ),
    (
        "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
        "nvidia-container-runtime.modes.cdi.default-kind",
    ),
    (
        "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES",
        "nvidia-container-runtime.modes.cdi.annotation-prefixes",
    ),
    (
        "NVIDIA_CONTAINER_RUNTIME_HOOK_SKIP_MODE_DETECTION",
        "nvidia-container-runtime-hook.skip-mode-detection",
    ),
    ("NVIDIA_CONTAINER_CLI_DEBUG", "nvidia-container-cli.debug"),
];

/// The config settings the variables of [`CONFIG_VARIABLES`] ask for (`lookup` reads the
/// environment), each checked against the config's keys and types; an error names the
/// variable.
pub fn upstream_config_sets(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<nvct_engines::config_edit::Assignment>, FlagError> {
    let mut sets = Vec::new();
    for (var, key) in CONFIG_VARIABLES {
        let Some(value) = lookup(var) else { continue };
        let a = nvct_engines::config_edit::Assignment {
            key: key.to_string(),
            value: Some(value.clone()),
        };
        nvct_engines::config_edit::edit("", Path::new(var), std::slice::from_ref(&a), ":")
            .map_err(|e| FlagError::ConfigVariable {
                var,
                value,
                key,
                why: e.to_string(),
            })?;
        sets.push(a);
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No environment.
    fn no_env(_: &str) -> Option<String> {
        None
    }

    /// The installer installed as /opt/nvct/bin/nvidia-ctk-installer.
    fn exe() -> std::io::Result<PathBuf> {
        Ok("/opt/nvct/bin/nvidia-ctk-installer".into())
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// The fields a case looks at: (config, drop-in, socket, restart, install dir, source
    /// root, dev root, create device nodes).
    type Seen = (
        PathBuf,
        Option<PathBuf>,
        PathBuf,
        Restart,
        PathBuf,
        PathBuf,
        PathBuf,
        bool,
    );

    fn seen(o: &Options) -> Seen {
        (
            o.config.clone(),
            o.drop_in.clone(),
            o.socket.clone(),
            o.restart,
            o.install_dir.clone(),
            o.source_root.clone(),
            o.dev_root.clone(),
            o.create_device_nodes,
        )
    }

    fn want(
        config: &str,
        drop_in: Option<&str>,
        socket: &str,
        restart: Restart,
        source_root: &str,
        dev_root: &str,
        nodes: bool,
    ) -> Seen {
        (
            config.into(),
            drop_in.map(PathBuf::from),
            socket.into(),
            restart,
            "/usr/local/nvidia".into(),
            source_root.into(),
            dev_root.into(),
            nodes,
        )
    }

    #[test]
    fn options_per_engine_and_flag() {
        use Engine::*;
        let cases: Vec<(&str, Flags, Seen)> = vec![
            (
                "docker defaults: daemon.json, no drop-in, signal",
                Flags::new(Docker),
                want(
                    "/etc/docker/daemon.json",
                    None,
                    "/var/run/docker.sock",
                    Restart::Signal,
                    "/opt/nvct",
                    "/",
                    false,
                ),
            ),
            (
                "containerd defaults: the drop-in, signal",
                Flags::new(Containerd),
                want(
                    "/etc/containerd/config.toml",
                    Some("/etc/containerd/conf.d/99-nvidia.toml"),
                    "/run/containerd/containerd.sock",
                    Restart::Signal,
                    "/opt/nvct",
                    "/",
                    false,
                ),
            ),
            (
                "crio defaults: the drop-in, systemd",
                Flags::new(Crio),
                want(
                    "/etc/crio/crio.conf",
                    Some("/etc/crio/crio.conf.d/99-nvidia.toml"),
                    "/var/run/crio/crio.sock",
                    Restart::Systemd,
                    "/opt/nvct",
                    "/",
                    false,
                ),
            ),
            (
                "given paths, restart mode, source root; dev root follows the driver root",
                Flags {
                    config: Some("/c.toml".into()),
                    drop_in_config: Some("/d/99.toml".into()),
                    socket: Some("/s.sock".into()),
                    restart_mode: Some(Restart::None),
                    toolkit_source_root: Some("/src".into()),
                    driver_root: "/run/nvidia/driver".into(),
                    ..Flags::new(Crio)
                },
                want(
                    "/c.toml",
                    Some("/d/99.toml"),
                    "/s.sock",
                    Restart::None,
                    "/src",
                    "/run/nvidia/driver",
                    false,
                ),
            ),
            (
                "an empty drop-in edits the main file; a dev root of its own",
                Flags {
                    drop_in_config: Some("".into()),
                    dev_root: Some("/devs".into()),
                    ..Flags::new(Containerd)
                },
                want(
                    "/etc/containerd/config.toml",
                    None,
                    "/run/containerd/containerd.sock",
                    Restart::Signal,
                    "/opt/nvct",
                    "/devs",
                    false,
                ),
            ),
            (
                "create-device-nodes control",
                Flags {
                    create_device_nodes: Some(strings(&["control"])),
                    ..Flags::new(Docker)
                },
                want(
                    "/etc/docker/daemon.json",
                    None,
                    "/var/run/docker.sock",
                    Restart::Signal,
                    "/opt/nvct",
                    "/",
                    true,
                ),
            ),
        ];
        for (name, flags, want) in cases {
            let o = resolve(&flags, no_env, exe).unwrap_or_else(|e| panic!("case {name}: {e}"));
            assert_eq!(seen(&o), want, "case {name}");
            assert_eq!(o.engine, flags.runtime, "case {name}");
            assert!(o.config_sets.is_empty(), "case {name}");
        }
    }

    #[test]
    fn device_nodes_values() {
        for (items, want) in [
            (&[][..], false),
            (&[""][..], false),
            (&["none"][..], false),
            (&["control"][..], true),
        ] {
            let flags = Flags {
                create_device_nodes: Some(strings(items)),
                ..Flags::new(Engine::Docker)
            };
            let o = resolve(&flags, no_env, exe).unwrap();
            assert_eq!(o.create_device_nodes, want, "{items:?}");
        }
    }

    #[test]
    fn plain_values_pass_through() {
        let flags = Flags {
            host_root: "/h".into(),
            proc_root: "/p".into(),
            driver_root_ctr_path: Some("/driver-root".into()),
            accept_nvidia_visible_devices_envvar_when_unprivileged: false,
            accept_nvidia_visible_devices_as_volume_mounts: true,
            runtime_name: "gpu".into(),
            set_as_default: true,
            cdi_enabled: true,
            cdi_output_dir: "/cdi".into(),
            drop_in_config_host_path: Some("/etc/containerd/conf.d/99-nvidia.toml".into()),
            toolkit_install_dir: Some("/i".into()),
            ..Flags::new(Engine::Containerd)
        };
        let o = resolve(&flags, no_env, exe).unwrap();
        assert_eq!(o.host_root, Path::new("/h"));
        assert_eq!(o.proc_root, Path::new("/p"));
        assert_eq!(
            o.driver_root_ctr_path.as_deref(),
            Some(Path::new("/driver-root"))
        );
        assert!(!o.accept_envvar_unprivileged && o.accept_volume_mounts);
        assert_eq!(o.runtime_name, "gpu");
        assert!(o.set_as_default && o.cdi_enabled);
        assert_eq!(o.cdi_output_dir, Path::new("/cdi"));
        assert_eq!(
            o.drop_in_host_path.as_deref(),
            Some(Path::new("/etc/containerd/conf.d/99-nvidia.toml"))
        );
        assert_eq!(o.install_dir, Path::new("/i"));
        // An empty host path is none; relative paths are made absolute from the cwd.
        let flags = Flags {
            drop_in_config_host_path: Some("".into()),
            toolkit_install_dir: Some("rel".into()),
            drop_in_config: Some("d/99.toml".into()),
            ..Flags::new(Engine::Containerd)
        };
        let o = resolve(&flags, no_env, exe).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(o.drop_in_host_path, None);
        assert_eq!(o.install_dir, cwd.join("rel"));
        assert_eq!(o.drop_in, Some(cwd.join("d/99.toml")));
        // CRI-O and docker: a host path (the GPU Operator sets it for CRI-O) is not used, and
        // the log says so.
        for engine in [Engine::Crio, Engine::Docker] {
            let flags = Flags {
                drop_in_config_host_path: Some("/etc/crio/crio.conf.d/99-nvidia.conf".into()),
                ..Flags::new(engine)
            };
            let o = resolve(&flags, no_env, exe).unwrap();
            assert_eq!(o.drop_in_host_path, None, "{engine:?}");
            assert!(
                o.notes[0].starts_with("RUNTIME_DROP_IN_CONFIG_HOST_PATH /etc/crio/"),
                "{engine:?}: {:?}",
                o.notes
            );
        }
        // The installer at the root of the filesystem: / is the source root.
        let o = resolve(&Flags::new(Engine::Docker), no_env, || {
            Ok("/installer".into())
        })
        .unwrap();
        assert_eq!(o.source_root, Path::new("/"));
    }

    #[test]
    fn config_variables_become_config_sets() {
        let env = |k: &str| match k {
            "NVIDIA_CONTAINER_RUNTIME_LOG_LEVEL" => Some("debug".to_string()),
            "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND" => Some("example.com/gpu".into()),
            "NVIDIA_CONTAINER_RUNTIME_NOT_A_SETTING" => Some("x".into()),
            _ => None,
        };
        let o = resolve(&Flags::new(Engine::Docker), env, exe).unwrap();
        let sets: Vec<(&str, Option<&str>)> = o
            .config_sets
            .iter()
            .map(|a| (a.key.as_str(), a.value.as_deref()))
            .collect();
        assert_eq!(
            sets,
            [
                ("nvidia-container-runtime.log-level", Some("debug")),
                (
                    "nvidia-container-runtime.modes.cdi.default-kind",
                    Some("example.com/gpu")
                ),
            ]
        );
    }

    #[test]
    fn refusals_name_the_flag() {
        let cases: Vec<(&str, Flags, &str)> = vec![
            (
                "drop-in for docker",
                Flags {
                    drop_in_config: Some("/x.toml".into()),
                    ..Flags::new(Engine::Docker)
                },
                "--drop-in-config: docker has no drop-in files",
            ),
            (
                "an empty drop-in for docker",
                Flags {
                    drop_in_config: Some("".into()),
                    ..Flags::new(Engine::Docker)
                },
                "--drop-in-config: docker has no drop-in files",
            ),
            (
                "bad device nodes value",
                Flags {
                    create_device_nodes: Some(strings(&["all"])),
                    ..Flags::new(Engine::Docker)
                },
                "--create-device-nodes [\"all\"]: expected control or none",
            ),
            (
                "two device nodes values",
                Flags {
                    create_device_nodes: Some(strings(&["control", "none"])),
                    ..Flags::new(Engine::Docker)
                },
                "--create-device-nodes [\"control\", \"none\"]: expected control or none",
            ),
        ];
        for (name, flags, want) in cases {
            match resolve(&flags, no_env, exe) {
                Ok(o) => panic!("case {name}: accepted: {o:?}"),
                Err(e) => assert_eq!(e.to_string(), want, "case {name}"),
            }
        }
        let e = resolve(&Flags::new(Engine::Docker), no_env, || {
            Err(std::io::Error::from_raw_os_error(libc::ENOENT))
        })
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the installer's own path: No such file"),
            "{e}"
        );
        let env = |k: &str| {
            (k == "NVIDIA_CONTAINER_RUNTIME_HOOK_SKIP_MODE_DETECTION").then(|| "maybe".to_string())
        };
        let e = resolve(&Flags::new(Engine::Docker), env, exe).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "NVIDIA_CONTAINER_RUNTIME_HOOK_SKIP_MODE_DETECTION=\"maybe\" (config key \
                 nvidia-container-runtime-hook.skip-mode-detection): "
            ),
            "{e}"
        );
    }

    #[test]
    fn aliases_fill_unset_variables() {
        // (case, environment, assignments)
        let cases: &[(&str, &[(&str, &str)], &[(&str, &str)])] = &[
            ("nothing set", &[], &[]),
            (
                "the GPU Operator's names",
                &[
                    ("ROOT", "/i"),
                    ("CONTAINERD_CONFIG", "/c.toml"),
                    ("DRIVER_ROOT", "/run/nvidia/driver"),
                    ("CONTAINERD_RUNTIME_CLASS", "gpu"),
                    ("ENABLE_CDI", "true"),
                    ("PID_FILE", "/p.pid"),
                ],
                &[
                    ("TOOLKIT_INSTALL_DIR", "/i"),
                    ("RUNTIME_CONFIG", "/c.toml"),
                    ("NVIDIA_DRIVER_ROOT", "/run/nvidia/driver"),
                    ("NVIDIA_RUNTIME_NAME", "gpu"),
                    ("CDI_ENABLED", "true"),
                    ("TOOLKIT_PID_FILE", "/p.pid"),
                ],
            ),
            (
                "the variable itself wins over an alias",
                &[("RUNTIME_SOCKET", "/a.sock"), ("DOCKER_SOCKET", "/b.sock")],
                &[],
            ),
            (
                "the first alias set wins",
                &[
                    ("DOCKER_SET_AS_DEFAULT", "false"),
                    ("CONTAINERD_SET_AS_DEFAULT", "true"),
                    ("DEV_ROOT", "/d"),
                ],
                &[
                    ("NVIDIA_DEV_ROOT", "/d"),
                    ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "true"),
                ],
            ),
        ];
        for (name, env, want) in cases {
            let lookup = |k: &str| {
                env.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            };
            let got = alias_assignments(lookup);
            let want: Vec<(&str, OsString)> =
                want.iter().map(|(k, v)| (*k, OsString::from(v))).collect();
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn unread_variables_are_named() {
        let flag_vars = strings(&[
            "RUNTIME",
            "RUNTIME_CONFIG",
            "CDI_ENABLED",
            "CRIO_CONFIG_MODE",
            "CRIO_HOOKS_DIR",
        ]);
        // (case, engine, variables set, those named)
        let cases: &[(&str, Engine, &[&str], &[&str])] = &[
            (
                "flag variables, aliases and config variables are read",
                Engine::Containerd,
                &[
                    "RUNTIME_CONFIG",
                    "CONTAINERD_CONFIG",
                    "NVIDIA_CONTAINER_RUNTIME_LOG_LEVEL",
                    "CDI_ENABLED",
                    "RUNTIME_CONFIG_SOURCE",
                ],
                &[],
            ),
            (
                "upstream's shape, not read: named, sorted",
                Engine::Containerd,
                &["NVIDIA_CONTAINER_RUNTIME_NOT_A_SETTING", "TOOLKIT_ARGS"],
                &["NVIDIA_CONTAINER_RUNTIME_NOT_A_SETTING", "TOOLKIT_ARGS"],
            ),
            (
                "upstream's variables not acted on, the GPU Operator's CRIO_CONFIG",
                Engine::Crio,
                &[
                    "NRI_NAMESPACE",
                    "TOOLKIT_PACKAGE_TYPE",
                    "CONTAINERD_RUNTIME_TYPE",
                    "CRIO_CONFIG",
                ],
                &[
                    "CONTAINERD_RUNTIME_TYPE",
                    "CRIO_CONFIG",
                    "NRI_NAMESPACE",
                    "TOOLKIT_PACKAGE_TYPE",
                ],
            ),
            (
                "CRI-O's settings on another engine (the Operator sets CRIO_CONFIG_MODE with CDI)",
                Engine::Containerd,
                &["CRIO_CONFIG_MODE", "CRIO_HOOKS_DIR"],
                &["CRIO_CONFIG_MODE", "CRIO_HOOKS_DIR"],
            ),
            (
                "CRI-O's settings on CRI-O: read",
                Engine::Crio,
                &["CRIO_CONFIG_MODE", "CRIO_HOOKS_DIR"],
                &[],
            ),
            (
                "other variables are none of ours",
                Engine::Docker,
                &[
                    "PATH",
                    "HOME",
                    "NVIDIA_VISIBLE_DEVICES",
                    "RUNTIMEX",
                    "IS_HOST_DRIVER",
                ],
                &[],
            ),
        ];
        for (name, engine, set, want) in cases {
            let got = unread_variables(set.iter().map(|s| s.to_string()), &flag_vars, *engine);
            let names: Vec<&str> = got.iter().map(|(v, _)| v.as_str()).collect();
            assert_eq!(names, *want, "case {name}");
            assert!(got.iter().all(|(_, why)| !why.is_empty()), "case {name}");
        }
    }

    #[test]
    fn the_tables_name_upstreams_variables() {
        // Every alias and every variable named as not acted on is upstream's (CRIO_CONFIG: the
        // GPU Operator's); the binary's test checks that each of upstream's is read or named.
        for (var, aliases) in ENV_ALIASES {
            for v in std::iter::once(var).chain(aliases.iter()) {
                assert!(UPSTREAM_VARIABLES.contains(v), "{v}");
            }
        }
        for (v, _) in NOT_ACTED_ON {
            assert!(UPSTREAM_VARIABLES.contains(v) || *v == "CRIO_CONFIG", "{v}");
        }
        for (v, _) in CONFIG_VARIABLES {
            assert!(UPSTREAM_VARIABLES.contains(v), "{v}");
        }
    }

    #[test]
    fn go_booleans() {
        for (s, want) in [
            ("true", Ok(true)),
            ("True", Ok(true)),
            ("TRUE", Ok(true)),
            ("t", Ok(true)),
            ("1", Ok(true)),
            ("false", Ok(false)),
            ("F", Ok(false)),
            ("0", Ok(false)),
            ("yes", Err(())),
            ("", Err(())),
        ] {
            assert_eq!(parse_go_bool(s).map_err(|_| ()), want, "{s:?}");
        }
    }

    #[test]
    fn install_dir_precedence() {
        // The flag or its variables (clap puts the variable into the flag's value) win over
        // the positional DESTINATION, which wins over the default (upstream before v1.18 made
        // the positional the flag's default value).
        let cases: &[(&str, Option<&str>, Option<&str>, &str)] = &[
            ("nothing", None, None, "/usr/local/nvidia"),
            (
                "the Operator's old entrypoint",
                None,
                Some("/opt/nv"),
                "/opt/nv",
            ),
            ("ROOT or the flag", Some("/i"), None, "/i"),
            (
                "ROOT or the flag over the positional",
                Some("/i"),
                Some("/opt/nv"),
                "/i",
            ),
        ];
        for (name, flag, positional, want) in cases {
            let flags = Flags {
                toolkit_install_dir: flag.map(PathBuf::from),
                destination: positional.map(PathBuf::from),
                ..Flags::new(Engine::Containerd)
            };
            let o = resolve(&flags, no_env, exe).unwrap();
            assert_eq!(o.install_dir, Path::new(want), "case {name}");
        }
    }

    /// The fields of the GPU Operator's settings: (engine config, set as default, CDI specs,
    /// engine CDI, runtime mode, device nodes).
    type OperatorSeen = (EngineConfig, bool, bool, bool, Option<String>, bool);

    #[test]
    fn gpu_operator_settings() {
        use Engine::*;
        let hook = |dir: &str, file: &str| EngineConfig::CrioHook(Path::new(dir).join(file));
        let cdi_on = |runtime| Flags {
            cdi_enabled: true,
            set_as_default: false,
            runtime_mode: Some("cdi".into()),
            crio_config_mode: "config".into(),
            ..Flags::new(runtime)
        };
        let cases: Vec<(&str, Flags, OperatorSeen)> = vec![
            (
                "containerd, CDI off: nvidia is the default (upstream's defaultSetAsDefault)",
                Flags::new(Containerd),
                (EngineConfig::Files, true, false, false, None, false),
            ),
            (
                "NVIDIA_RUNTIME_SET_AS_DEFAULT=false leaves the default alone",
                Flags {
                    set_as_default: false,
                    ..Flags::new(Docker)
                },
                (EngineConfig::Files, false, false, false, None, false),
            ),
            (
                "CDI on (the Operator's default): mode cdi, specs, engine CDI, control nodes",
                cdi_on(Containerd),
                (
                    EngineConfig::Files,
                    false,
                    true,
                    true,
                    Some("cdi".into()),
                    true,
                ),
            ),
            (
                "CDI on, CRI-O in config mode",
                cdi_on(Crio),
                (
                    EngineConfig::Files,
                    false,
                    true,
                    true,
                    Some("cdi".into()),
                    true,
                ),
            ),
            (
                "CDI on, CREATE_DEVICE_NODES=none",
                Flags {
                    create_device_nodes: Some(strings(&["none"])),
                    ..cdi_on(Docker)
                },
                (
                    EngineConfig::Files,
                    false,
                    true,
                    true,
                    Some("cdi".into()),
                    false,
                ),
            ),
            (
                "RUNTIME_ENABLE_CDI=false: the specs, not the engine's switch",
                Flags {
                    runtime_enable_cdi: Some(false),
                    ..cdi_on(Containerd)
                },
                (
                    EngineConfig::Files,
                    false,
                    true,
                    false,
                    Some("cdi".into()),
                    true,
                ),
            ),
            (
                "CDI on with no output dir: no spec (as upstream)",
                Flags {
                    cdi_output_dir: "".into(),
                    ..cdi_on(Containerd)
                },
                (
                    EngineConfig::Files,
                    false,
                    false,
                    false,
                    Some("cdi".into()),
                    false,
                ),
            ),
            (
                "CRI-O, CDI off: the Operator's hook mode, upstream's hooks dir and file",
                Flags {
                    crio_config_mode: "hook".into(),
                    ..Flags::new(Crio)
                },
                (
                    hook(DEFAULT_CRIO_HOOKS_DIR, DEFAULT_CRIO_HOOK_FILENAME),
                    true,
                    false,
                    false,
                    None,
                    false,
                ),
            ),
            (
                "CRI-O hook mode, CRIO_HOOKS_DIR and CRIO_HOOK_FILENAME",
                Flags {
                    crio_config_mode: "hook".into(),
                    crio_hooks_dir: "/run/containers/oci/hooks.d".into(),
                    crio_hook_filename: "nvidia.json".into(),
                    ..Flags::new(Crio)
                },
                (
                    hook("/run/containers/oci/hooks.d", "nvidia.json"),
                    true,
                    false,
                    false,
                    None,
                    false,
                ),
            ),
            (
                "CRIO_CONFIG_MODE=hook on containerd: only CRI-O acts on it",
                Flags {
                    crio_config_mode: "hook".into(),
                    ..Flags::new(Containerd)
                },
                (EngineConfig::Files, true, false, false, None, false),
            ),
            (
                "NO_RUNTIME_CONFIG: no engine config at all",
                Flags {
                    no_runtime_config: true,
                    ..cdi_on(Crio)
                },
                (
                    EngineConfig::None,
                    false,
                    true,
                    true,
                    Some("cdi".into()),
                    true,
                ),
            ),
        ];
        for (name, flags, want) in cases {
            let o = resolve(&flags, no_env, exe).unwrap_or_else(|e| panic!("case {name}: {e}"));
            let got = (
                o.engine_config.clone(),
                o.set_as_default,
                o.cdi_enabled,
                o.engine_cdi,
                o.runtime_mode.clone(),
                o.create_device_nodes,
            );
            assert_eq!(got, want, "case {name}");
            assert_eq!(
                o.management_spec_path(),
                Path::new(&flags.cdi_output_dir).join("management.nvidia.com-gpu.yaml"),
                "case {name}"
            );
        }
    }

    #[test]
    fn config_sources_cases() {
        use Engine::*;
        let file = |p: &str| ConfigSource::File(p.into());
        let k3s = "/host/var/lib/rancher/k3s/agent/etc/containerd/config.toml";
        let k3s_item = format!("file={k3s}");
        let k3s_items = [k3s_item.as_str()];
        // (case, engine, --config-source items, sources, a note expected)
        let cases: Vec<(&str, Engine, &[&str], Vec<ConfigSource>, bool)> = vec![
            ("none: the config itself", Containerd, &[], vec![], false),
            (
                "k3s's generated config (the Operator prefixes /host)",
                Containerd,
                &k3s_items,
                vec![file(k3s)],
                false,
            ),
            (
                "upstream's default: command is not run, file is the config",
                Crio,
                &["command", "file"],
                vec![file("/etc/crio/crio.conf")],
                true,
            ),
            (
                "only command: the config itself",
                Containerd,
                &["command"],
                vec![],
                true,
            ),
            (
                "docker reads its file only",
                Docker,
                &["file=/x.json"],
                vec![],
                true,
            ),
        ];
        for (name, engine, items, want, note) in cases {
            let flags = Flags {
                config_sources: strings(items),
                ..Flags::new(engine)
            };
            let o = resolve(&flags, no_env, exe).unwrap_or_else(|e| panic!("case {name}: {e}"));
            assert_eq!(o.config_sources, want, "case {name}");
            assert_eq!(!o.notes.is_empty(), note, "case {name}: {:?}", o.notes);
        }
    }

    #[test]
    fn operator_refusals_name_the_setting() {
        // (case, flags, the message starts with)
        let cases: Vec<(&str, Flags, &str)> = vec![
            (
                "NRI, even with a valid rest",
                Flags {
                    enable_nri_plugin: true,
                    cdi_enabled: true,
                    ..Flags::new(Engine::Containerd)
                },
                "ENABLE_NRI_PLUGIN (--enable-nri-plugin): this installer has no NRI plugin; \
                 nothing was changed on this node. Leave it off",
            ),
            (
                "NRI before another refusal",
                Flags {
                    enable_nri_plugin: true,
                    drop_in_config: Some("/x".into()),
                    ..Flags::new(Engine::Docker)
                },
                "ENABLE_NRI_PLUGIN",
            ),
            (
                "a CRI-O config mode",
                Flags {
                    crio_config_mode: "oci-hook".into(),
                    ..Flags::new(Engine::Crio)
                },
                "CRIO_CONFIG_MODE (--config-mode) \"oci-hook\": expected config or hook",
            ),
            (
                "a runtime mode",
                Flags {
                    runtime_mode: Some("csv".into()),
                    ..Flags::new(Engine::Containerd)
                },
                "NVIDIA_CONTAINER_RUNTIME_MODE (--nvidia-container-runtime.mode) \"csv\"",
            ),
            (
                "a CDI kind",
                Flags {
                    cdi_kind: "management".into(),
                    ..Flags::new(Engine::Containerd)
                },
                "CDI_KIND (--cdi-kind) \"management\": ",
            ),
            (
                "a config source",
                Flags {
                    config_sources: strings(&["dump"]),
                    ..Flags::new(Engine::Containerd)
                },
                "RUNTIME_CONFIG_SOURCE (--config-source) \"dump\"",
            ),
        ];
        for (name, flags, want) in cases {
            match resolve(&flags, no_env, exe) {
                Ok(o) => panic!("case {name}: accepted: {o:?}"),
                Err(e) => assert!(e.to_string().starts_with(want), "case {name}: {e}"),
            }
        }
    }
}
