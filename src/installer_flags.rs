//! `nvidia-ctk-installer`'s flags and environment variables → [`crate::installer::Options`].
//!
//! PURE: [`Flags`] holds the values as typed (clap fills them from the flag or its variable),
//! [`resolve`] defaults and checks them per engine. The rest of upstream's variable names live
//! here as tables: the aliases a variable is also read under ([`ENV_ALIASES`],
//! [`alias_assignments`]), the variables that set a toolkit config key ([`CONFIG_VARIABLES`],
//! [`upstream_config_sets`]), and which variables of upstream's shape are not read at all
//! ([`unread_variables`]). The environment comes in through a lookup closure; nothing here reads
//! the process's own state.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::installer::{Options, Restart};
use crate::runtime_config::Engine;

/// The installer's flags as typed (or as their variables set them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    pub toolkit_install_dir: PathBuf,
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
    pub proc_root: PathBuf,
    pub runtime_name: String,
    pub set_as_default: bool,
    pub cdi_enabled: bool,
    pub cdi_output_dir: PathBuf,
    /// The items of `--create-device-nodes` (a comma list).
    pub create_device_nodes: Vec<String>,
}

impl Flags {
    /// Upstream's defaults, for `runtime`.
    pub fn new(runtime: Engine) -> Flags {
        Flags {
            toolkit_install_dir: "/usr/local/nvidia".into(),
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
            proc_root: "/proc".into(),
            runtime_name: "nvidia".into(),
            set_as_default: false,
            cdi_enabled: false,
            cdi_output_dir: "/var/run/cdi".into(),
            create_device_nodes: Vec::new(),
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
        "--drop-in-config-host-path (RUNTIME_DROP_IN_CONFIG_HOST_PATH): only containerd imports \
         a drop-in by path; leave it out"
    )]
    HostPathNotContainerd,
    /// A config variable whose value the toolkit config cannot take.
    #[error("{var}={value:?} (config key {key}): {why}")]
    ConfigVariable {
        var: &'static str,
        value: String,
        key: &'static str,
        why: String,
    },
}

/// Per engine: (config, drop-in, socket, restart), upstream's defaults.
fn engine_defaults(engine: Engine) -> (&'static str, Option<&'static str>, &'static str, Restart) {
    match engine {
        Engine::Containerd => (
            "/etc/containerd/config.toml",
            Some("/etc/containerd/conf.d/99-nvidia.toml"),
            "/run/containerd/containerd.sock",
            Restart::Signal,
        ),
        Engine::Crio => (
            "/etc/crio/crio.conf",
            Some("/etc/crio/crio.conf.d/99-nvidia.toml"),
            "/var/run/crio/crio.sock",
            Restart::Systemd,
        ),
        Engine::Docker => (
            "/etc/docker/daemon.json",
            None,
            "/var/run/docker.sock",
            Restart::Signal,
        ),
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
    let engine = f.runtime;
    let (config, drop_in, socket, restart) = engine_defaults(engine);
    if engine == Engine::Docker && f.drop_in_config.is_some() {
        return Err(FlagError::DockerDropIn);
    }
    let items: Vec<&str> = f.create_device_nodes.iter().map(String::as_str).collect();
    let create_device_nodes = match items[..] {
        [] | [""] | ["none"] => false,
        ["control"] => true,
        _ => return Err(FlagError::DeviceNodes(f.create_device_nodes.clone())),
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
    if f.drop_in_config_host_path.is_some() && engine != Engine::Containerd {
        return Err(FlagError::HostPathNotContainerd);
    }
    let config_sets = upstream_config_sets(lookup)?;
    Ok(Options {
        drop_in_host_path: f
            .drop_in_config_host_path
            .clone()
            .filter(|p| !p.as_os_str().is_empty()),
        config_sets,
        install_dir: abs(&f.toolkit_install_dir, "--toolkit-install-dir")?,
        source_root,
        engine,
        config: f.config.clone().unwrap_or_else(|| config.into()),
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
        proc_root: f.proc_root.clone(),
        driver_root_ctr_path: f.driver_root_ctr_path.clone(),
        accept_envvar_unprivileged: f.accept_nvidia_visible_devices_envvar_when_unprivileged,
        accept_volume_mounts: f.accept_nvidia_visible_devices_as_volume_mounts,
        runtime_name: f.runtime_name.clone(),
        set_as_default: f.set_as_default,
        cdi_enabled: f.cdi_enabled,
        cdi_output_dir: f.cdi_output_dir.clone(),
        create_device_nodes,
    })
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

/// Prefixes of upstream's installer variables: one of these we do not act on is named in the
/// log, never ignored without a word.
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
];

/// The variables in `names` that look like upstream's (a prefix of [`UPSTREAM_PREFIXES`]) and
/// that the installer does not read, sorted. `flag_variables` are those its flags read (the
/// binary's clap definitions); their aliases and [`CONFIG_VARIABLES`] count as read too.
pub fn unread_variables(
    names: impl Iterator<Item = String>,
    flag_variables: &[String],
) -> Vec<String> {
    let read = |n: &str| {
        flag_variables.iter().any(|v| v == n)
            || ENV_ALIASES.iter().any(|(_, a)| a.contains(&n))
            || CONFIG_VARIABLES.iter().any(|(v, _)| *v == n)
    };
    let mut out: Vec<String> = names
        .filter(|n| UPSTREAM_PREFIXES.iter().any(|p| n.starts_with(p)))
        .filter(|n| !read(n))
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
) -> Result<Vec<crate::config_edit::Assignment>, FlagError> {
    let mut sets = Vec::new();
    for (var, key) in CONFIG_VARIABLES {
        let Some(value) = lookup(var) else { continue };
        let a = crate::config_edit::Assignment {
            key: key.to_string(),
            value: Some(value.clone()),
        };
        crate::config_edit::edit("", Path::new(var), std::slice::from_ref(&a), ":").map_err(
            |e| FlagError::ConfigVariable {
                var,
                value,
                key,
                why: e.to_string(),
            },
        )?;
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
                    create_device_nodes: strings(&["control"]),
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
                create_device_nodes: strings(items),
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
            toolkit_install_dir: "/i".into(),
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
            toolkit_install_dir: "rel".into(),
            drop_in_config: Some("d/99.toml".into()),
            ..Flags::new(Engine::Containerd)
        };
        let o = resolve(&flags, no_env, exe).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(o.drop_in_host_path, None);
        assert_eq!(o.install_dir, cwd.join("rel"));
        assert_eq!(o.drop_in, Some(cwd.join("d/99.toml")));
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
                    create_device_nodes: strings(&["all"]),
                    ..Flags::new(Engine::Docker)
                },
                "--create-device-nodes [\"all\"]: expected control or none",
            ),
            (
                "two device nodes values",
                Flags {
                    create_device_nodes: strings(&["control", "none"]),
                    ..Flags::new(Engine::Docker)
                },
                "--create-device-nodes [\"control\", \"none\"]: expected control or none",
            ),
            (
                "host path for CRI-O",
                Flags {
                    drop_in_config_host_path: Some("/etc/crio/crio.conf.d/99-nvidia.toml".into()),
                    ..Flags::new(Engine::Crio)
                },
                "--drop-in-config-host-path (RUNTIME_DROP_IN_CONFIG_HOST_PATH): only containerd \
                 imports a drop-in by path; leave it out",
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
        let flag_vars = strings(&["RUNTIME", "RUNTIME_CONFIG", "CDI_ENABLED"]);
        // (case, variables set, those named)
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "flag variables, aliases and config variables are read",
                &[
                    "RUNTIME_CONFIG",
                    "CONTAINERD_CONFIG",
                    "NVIDIA_CONTAINER_RUNTIME_LOG_LEVEL",
                    "CDI_ENABLED",
                ],
                &[],
            ),
            (
                "upstream's shape, not read: named, sorted",
                &[
                    "NVIDIA_CONTAINER_RUNTIME_NOT_A_SETTING",
                    "CRIO_HOOKS_DIR",
                    "TOOLKIT_ARGS",
                ],
                &[
                    "CRIO_HOOKS_DIR",
                    "NVIDIA_CONTAINER_RUNTIME_NOT_A_SETTING",
                    "TOOLKIT_ARGS",
                ],
            ),
            (
                "other variables are none of ours",
                &["PATH", "HOME", "NVIDIA_VISIBLE_DEVICES", "RUNTIMEX"],
                &[],
            ),
        ];
        for (name, set, want) in cases {
            let got = unread_variables(set.iter().map(|s| s.to_string()), &flag_vars);
            assert_eq!(got, strings(want), "case {name}");
        }
    }
}
