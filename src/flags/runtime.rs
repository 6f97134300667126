//! `nvidia-ctk runtime configure|unconfigure`: the flags as typed → what is written where.
//!
//! PURE: [`Flags`] holds the raw values (the binary's clap structs copy them in, nothing else),
//! and [`resolve`] defaults and checks them into a [`Resolved`]. A flag that does nothing in the
//! mode asked for is refused by name ([`FlagError`]), saying how to fix the command line. The
//! rules of the run itself (the engine's transform, what counts as a change, which file keeps a
//! `.bak`, the `-d` text and the restart hint) and the run live in [`nvct_node::configure`];
//! the types a run takes are re-exported here.
//!
//! Defaults are upstream 1.18's: containerd (config version 2 or 3) and CRI-O get a drop-in
//! (`--drop-in-config=""` edits the main file in place; a version 1 containerd config is always
//! edited in place), docker's entry runs the bare `nvidia-container-runtime`.

use std::path::{Path, PathBuf};

use nvct_engines::{oci_hook, Engine, Options};
pub use nvct_node::configure::{Output, Resolved, Target};

/// Where the current config is read from (`--config-source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    File,
    Command,
}

/// `--config-mode`: the engine's config, or an OCI hooks.d file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfigMode {
    #[default]
    ConfigFile,
    OciHook,
}

/// The flags of configure and unconfigure, exactly as typed (`None`: not on the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    /// `--runtime`.
    pub engine: Engine,
    pub config: Option<PathBuf>,
    /// `--drop-in-config`: absent, given without a value, or given with one ("" is in place).
    pub drop_in_config: Option<Option<String>>,
    pub dry_run: bool,
    pub diff: bool,
    pub nvidia_runtime_name: Option<String>,
    pub config_mode: ConfigMode,
    pub oci_hook_path: Option<PathBuf>,
    /// configure's own flags; `None` for unconfigure, which has none of them.
    pub write: Option<WriteFlags>,
}

impl Flags {
    /// No flag typed but `--runtime`.
    pub fn new(engine: Engine) -> Flags {
        Flags {
            engine,
            config: None,
            drop_in_config: None,
            dry_run: false,
            diff: false,
            nvidia_runtime_name: None,
            config_mode: ConfigMode::ConfigFile,
            oci_hook_path: None,
            write: None,
        }
    }
}

/// configure's flags that say what to write, exactly as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteFlags {
    /// `--nvidia-runtime-path` (alias `--runtime-path`).
    pub nvidia_runtime_path: Option<String>,
    pub nvidia_runtime_hook_path: Option<String>,
    /// `--nvidia-set-as-default` (alias `--set-as-default`).
    pub set_as_default: Option<bool>,
    /// `--cdi.enabled` (aliases `--enable-cdi`, `--cdi.enable`).
    pub cdi_enabled: Option<bool>,
    pub config_source: Option<ConfigSource>,
    pub executable_path: Option<PathBuf>,
}

/// A command line that cannot be resolved: the flag at fault and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    /// A flag that does nothing in the mode asked for.
    #[error("{flag}: {why}")]
    NotInThisMode {
        flag: &'static str,
        why: &'static str,
    },
    #[error(
        "--drop-in-config: docker has no drop-in files; daemon.json is edited in place \
         (leave the flag out)"
    )]
    DockerDropIn,
    #[error(
        "--drop-in-config={0}: not an absolute path (containerd imports the drop-in's \
         directory by its path); give an absolute path"
    )]
    RelativeDropIn(String),
    #[error("--nvidia-runtime-path is empty; give the runtime binary's path")]
    EmptyRuntimePath,
    #[error("--nvidia-runtime-path={path}: {engine} needs an absolute path to the runtime binary")]
    RelativeRuntimePath { path: String, engine: &'static str },
    #[error(
        "--nvidia-runtime-hook-path={0}: not an absolute path; give the hook binary's absolute path"
    )]
    RelativeHookPath(String),
    #[error(
        "unconfigure --config-mode=oci-hook: name the hook file to remove with --oci-hook-path \
         (the packages install {})",
        oci_hook::DEFAULT_PATH
    )]
    NoHookFileToRemove,
    #[error(
        "--config-source=command: docker has no config dump; leave it out (daemon.json is read)"
    )]
    DockerDump,
    #[error("--executable-path: docker's config is always read from daemon.json; leave it out")]
    DockerExecutable,
    #[error(
        "--executable-path names the engine binary for --config-source=command; add that flag or \
         leave it out"
    )]
    ExecutableWithoutCommand,
}

const HOOK_MODE_ONLY: &str =
    "only used with --config-mode=oci-hook; leave it out, or add --config-mode=oci-hook";
const NOT_IN_HOOK_MODE: &str = "not used with --config-mode=oci-hook, which writes only the hook \
     file (--oci-hook-path, the hook binary --nvidia-runtime-hook-path); leave it out";

/// The first flag in `given` that was typed, refused with `why`.
fn refuse_given(given: &[(&'static str, bool)], why: &'static str) -> Result<(), FlagError> {
    match given.iter().find(|(_, typed)| *typed) {
        Some((flag, _)) => Err(FlagError::NotInThisMode { flag, why }),
        None => Ok(()),
    }
}

/// `--drop-in-config` as typed → the drop-in, if any.
pub fn resolve_drop_in(
    engine: Engine,
    typed: Option<Option<String>>,
) -> Result<Option<PathBuf>, FlagError> {
    let default = engine.default_drop_in();
    let path = match (typed, default) {
        (None, d) | (Some(None), d @ Some(_)) => return Ok(d.map(PathBuf::from)),
        (Some(Some(p)), _) if p.is_empty() => return Ok(None),
        (Some(_), None) => return Err(FlagError::DockerDropIn),
        (Some(Some(p)), Some(_)) => p,
    };
    if !Path::new(&path).is_absolute() {
        return Err(FlagError::RelativeDropIn(path));
    }
    Ok(Some(PathBuf::from(path)))
}

/// `--nvidia-runtime-path` → what the entry runs: upstream's bare default becomes the absolute
/// path for containerd and CRI-O, which need one.
pub fn resolve_runtime_path(engine: Engine, typed: Option<String>) -> Result<String, FlagError> {
    let path = match typed {
        Some(p) if p != nvct_engines::DEFAULT_RUNTIME_EXECUTABLE => p,
        _ => return Ok(engine.default_runtime_path().to_string()),
    };
    if path.is_empty() {
        return Err(FlagError::EmptyRuntimePath);
    }
    if engine != Engine::Docker && !path.starts_with('/') {
        return Err(FlagError::RelativeRuntimePath {
            path,
            engine: engine.name(),
        });
    }
    Ok(path)
}

fn resolve_oci_hook(f: &Flags, w: &WriteFlags, configure: bool) -> Result<Target, FlagError> {
    refuse_given(
        &[
            ("--config", f.config.is_some()),
            ("--drop-in-config", f.drop_in_config.is_some()),
            ("--nvidia-runtime-name", f.nvidia_runtime_name.is_some()),
            ("--nvidia-runtime-path", w.nvidia_runtime_path.is_some()),
            ("--nvidia-set-as-default", w.set_as_default.is_some()),
            ("--cdi.enabled", w.cdi_enabled.is_some()),
            ("--config-source", w.config_source.is_some()),
            ("--executable-path", w.executable_path.is_some()),
        ],
        NOT_IN_HOOK_MODE,
    )?;
    let hook = w
        .nvidia_runtime_hook_path
        .clone()
        .unwrap_or_else(|| oci_hook::DEFAULT_HOOK_BINARY.to_string());
    if !hook.starts_with('/') {
        return Err(FlagError::RelativeHookPath(hook));
    }
    if !configure && f.oci_hook_path.is_none() {
        return Err(FlagError::NoHookFileToRemove);
    }
    Ok(Target::OciHook {
        file: f.oci_hook_path.clone(),
        hook,
    })
}

fn resolve_config_file(f: &Flags, w: &WriteFlags) -> Result<Target, FlagError> {
    let engine = f.engine;
    refuse_given(
        &[
            ("--oci-hook-path", f.oci_hook_path.is_some()),
            (
                "--nvidia-runtime-hook-path",
                w.nvidia_runtime_hook_path.is_some(),
            ),
        ],
        HOOK_MODE_ONLY,
    )?;
    let command = w.config_source == Some(ConfigSource::Command);
    // The engine binary that dumps its config; docker has none.
    let dump_binary = engine.api().dump_binary();
    if command && dump_binary.is_none() {
        return Err(FlagError::DockerDump);
    }
    let dump_with = match (&w.executable_path, command, dump_binary) {
        (Some(_), _, None) => return Err(FlagError::DockerExecutable),
        (Some(_), false, _) => return Err(FlagError::ExecutableWithoutCommand),
        (Some(p), true, _) => Some(p.clone()),
        (None, true, binary) => binary.map(PathBuf::from),
        (None, false, _) => None,
    };
    Ok(Target::ConfigFile {
        config: f
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from(engine.default_config())),
        drop_in: resolve_drop_in(engine, f.drop_in_config.clone())?,
        dump_with,
    })
}

/// The flags as typed → what to write where, or the first flag at fault.
pub fn resolve(f: Flags) -> Result<Resolved, FlagError> {
    let configure = f.write.is_some();
    let w = f.write.clone().unwrap_or_default();
    let engine = f.engine;
    let target = match f.config_mode {
        ConfigMode::OciHook => resolve_oci_hook(&f, &w, configure)?,
        ConfigMode::ConfigFile => resolve_config_file(&f, &w)?,
    };
    let output = match (f.diff, f.dry_run) {
        (true, _) => Output::Diff,
        (false, true) => Output::Content,
        (false, false) => Output::Write,
    };
    let runtime_path = match target {
        Target::ConfigFile { .. } => resolve_runtime_path(engine, w.nvidia_runtime_path)?,
        Target::OciHook { .. } => String::new(),
    };
    Ok(Resolved {
        engine,
        configure,
        target,
        output,
        opts: Options {
            runtime_name: f
                .nvidia_runtime_name
                .unwrap_or_else(|| nvct_engines::DEFAULT_RUNTIME_NAME.to_string()),
            runtime_path,
            set_as_default: w.set_as_default.unwrap_or(false),
            cdi_enabled: w.cdi_enabled.unwrap_or(false),
            drop_in_host_path: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvct_engines::Source;
    use nvct_node::configure::{missing_runtime_warning, transform, Documents};

    const CONTAINERD: &str = "/etc/containerd/config.toml";
    const CONTAINERD_DROP_IN: Option<&str> = Some("/etc/containerd/conf.d/99-nvidia.toml");
    const CRIO: &str = "/etc/crio/crio.conf";
    const CRIO_DROP_IN: Option<&str> = Some("/etc/crio/crio.conf.d/99-nvidia.toml");
    const DOCKER: &str = "/etc/docker/daemon.json";
    const ABS_RUNTIME: &str = "/usr/bin/nvidia-container-runtime";

    /// `configure --runtime=ENGINE` and nothing else.
    fn configure(engine: Engine) -> Flags {
        Flags {
            write: Some(WriteFlags::default()),
            ..Flags::new(engine)
        }
    }

    /// `configure` with configure's own flags `w`.
    fn configure_with(engine: Engine, w: WriteFlags) -> Flags {
        Flags {
            write: Some(w),
            ..Flags::new(engine)
        }
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    /// (config, drop-in, runtime path, set as default, cdi enabled) of a config-file run.
    type Files<'a> = (&'a str, Option<&'a str>, &'a str, bool, bool);

    #[test]
    fn config_file_resolution() {
        use Engine::*;
        let cases: &[(&str, Flags, Files)] = &[
            (
                "docker defaults: bare runtime name",
                configure(Docker),
                (DOCKER, None, "nvidia-container-runtime", false, false),
            ),
            (
                "docker absolute runtime path",
                configure_with(
                    Docker,
                    WriteFlags {
                        nvidia_runtime_path: some(ABS_RUNTIME),
                        ..Default::default()
                    },
                ),
                (DOCKER, None, ABS_RUNTIME, false, false),
            ),
            (
                "docker relative runtime path is dockerd's PATH lookup",
                configure_with(
                    Docker,
                    WriteFlags {
                        nvidia_runtime_path: some("bin/runtime"),
                        ..Default::default()
                    },
                ),
                (DOCKER, None, "bin/runtime", false, false),
            ),
            (
                "containerd defaults: upstream drop-in, absolute path",
                configure(Containerd),
                (CONTAINERD, CONTAINERD_DROP_IN, ABS_RUNTIME, false, false),
            ),
            (
                "containerd bare name typed: made absolute as upstream",
                configure_with(
                    Containerd,
                    WriteFlags {
                        nvidia_runtime_path: some("nvidia-container-runtime"),
                        ..Default::default()
                    },
                ),
                (CONTAINERD, CONTAINERD_DROP_IN, ABS_RUNTIME, false, false),
            ),
            (
                "drop-in without a value is the default",
                Flags {
                    drop_in_config: Some(None),
                    ..configure_with(
                        Containerd,
                        WriteFlags {
                            set_as_default: Some(true),
                            ..Default::default()
                        },
                    )
                },
                (CONTAINERD, CONTAINERD_DROP_IN, ABS_RUNTIME, true, false),
            ),
            (
                "drop-in empty is in place",
                Flags {
                    drop_in_config: Some(some("")),
                    ..configure(Containerd)
                },
                (CONTAINERD, None, ABS_RUNTIME, false, false),
            ),
            (
                "drop-in path",
                Flags {
                    drop_in_config: Some(some("/x/crio.conf.d/50-nv.toml")),
                    ..configure(Crio)
                },
                (
                    CRIO,
                    Some("/x/crio.conf.d/50-nv.toml"),
                    ABS_RUNTIME,
                    false,
                    false,
                ),
            ),
            (
                "crio defaults: upstream drop-in; cdi enabled",
                configure_with(
                    Crio,
                    WriteFlags {
                        cdi_enabled: Some(true),
                        ..Default::default()
                    },
                ),
                (CRIO, CRIO_DROP_IN, ABS_RUNTIME, false, true),
            ),
            (
                "set-as-default explicitly false",
                configure_with(
                    Crio,
                    WriteFlags {
                        set_as_default: Some(false),
                        cdi_enabled: Some(true),
                        ..Default::default()
                    },
                ),
                (CRIO, CRIO_DROP_IN, ABS_RUNTIME, false, true),
            ),
            (
                "cdi.enabled=false, set-as-default=true, own config",
                Flags {
                    config: Some("/d.json".into()),
                    ..configure_with(
                        Docker,
                        WriteFlags {
                            set_as_default: Some(true),
                            cdi_enabled: Some(false),
                            ..Default::default()
                        },
                    )
                },
                ("/d.json", None, "nvidia-container-runtime", true, false),
            ),
            (
                "unconfigure defaults match configure's",
                Flags::new(Containerd),
                (CONTAINERD, CONTAINERD_DROP_IN, ABS_RUNTIME, false, false),
            ),
        ];
        for (name, flags, want) in cases {
            let r = resolve(flags.clone()).unwrap_or_else(|e| panic!("case {name}: {e}"));
            let Target::ConfigFile {
                config, drop_in, ..
            } = &r.target
            else {
                panic!("case {name}: {r:?}");
            };
            let got = (
                config.as_path(),
                drop_in.as_deref(),
                r.opts.runtime_path.as_str(),
                r.opts.set_as_default,
                r.opts.cdi_enabled,
            );
            let (c, d, p, s, cdi) = *want;
            assert_eq!(
                got,
                (Path::new(c), d.map(Path::new), p, s, cdi),
                "case {name}"
            );
            assert_eq!(r.configure, flags.write.is_some(), "case {name}");
            assert_eq!(r.opts.runtime_name, "nvidia", "case {name}");
        }
    }

    #[test]
    fn dump_sources() {
        use Engine::*;
        let command = |engine, exe: Option<&str>| {
            configure_with(
                engine,
                WriteFlags {
                    config_source: Some(ConfigSource::Command),
                    executable_path: exe.map(PathBuf::from),
                    ..Default::default()
                },
            )
        };
        let cases: &[(&str, Flags, Option<&str>)] = &[
            ("file source", configure(Containerd), None),
            (
                "explicit file source",
                configure_with(
                    Crio,
                    WriteFlags {
                        config_source: Some(ConfigSource::File),
                        ..Default::default()
                    },
                ),
                None,
            ),
            (
                "containerd command: containerd from PATH",
                command(Containerd, None),
                Some("containerd"),
            ),
            (
                "crio command: crio from PATH",
                command(Crio, None),
                Some("crio"),
            ),
            (
                "executable path",
                command(Containerd, Some("/opt/bin/containerd")),
                Some("/opt/bin/containerd"),
            ),
        ];
        for (name, flags, want) in cases {
            let r = resolve(flags.clone()).unwrap_or_else(|e| panic!("case {name}: {e}"));
            let Target::ConfigFile { dump_with, .. } = &r.target else {
                panic!("case {name}: {r:?}");
            };
            assert_eq!(dump_with.as_deref(), want.map(Path::new), "case {name}");
        }
    }

    #[test]
    fn outputs_and_hook_mode() {
        let hook_mode = |engine| Flags {
            config_mode: ConfigMode::OciHook,
            ..configure(engine)
        };
        let cases: &[(&str, Flags, Output, Option<(Option<&str>, &str)>)] = &[
            ("write", configure(Engine::Docker), Output::Write, None),
            (
                "dry run",
                Flags {
                    dry_run: true,
                    ..configure(Engine::Docker)
                },
                Output::Content,
                None,
            ),
            (
                "diff",
                Flags {
                    diff: true,
                    ..configure(Engine::Docker)
                },
                Output::Diff,
                None,
            ),
            (
                "dry run and diff",
                Flags {
                    dry_run: true,
                    diff: true,
                    ..Flags::new(Engine::Docker)
                },
                Output::Diff,
                None,
            ),
            (
                "oci hook on stdout, any engine",
                hook_mode(Engine::Docker),
                Output::Write,
                Some((None, "/usr/bin/nvidia-container-runtime-hook")),
            ),
            (
                "hook file and binary",
                Flags {
                    oci_hook_path: Some("/h/x.json".into()),
                    write: Some(WriteFlags {
                        nvidia_runtime_hook_path: some("/opt/h"),
                        ..Default::default()
                    }),
                    ..hook_mode(Engine::Crio)
                },
                Output::Write,
                Some((Some("/h/x.json"), "/opt/h")),
            ),
            (
                "unconfigure hook file",
                Flags {
                    config_mode: ConfigMode::OciHook,
                    oci_hook_path: Some("/h/x.json".into()),
                    ..Flags::new(Engine::Docker)
                },
                Output::Write,
                Some((Some("/h/x.json"), "/usr/bin/nvidia-container-runtime-hook")),
            ),
        ];
        for (name, flags, output, hook) in cases {
            let r = resolve(flags.clone()).unwrap_or_else(|e| panic!("case {name}: {e}"));
            assert_eq!(r.output, *output, "case {name}");
            let got = match &r.target {
                Target::OciHook { file, hook } => Some((file.as_deref(), hook.as_str())),
                Target::ConfigFile { .. } => None,
            };
            let want = hook.map(|(f, h)| (f.map(Path::new), h));
            assert_eq!(got, want, "case {name}");
            if got.is_some() {
                assert_eq!(
                    r.opts.runtime_path, "",
                    "case {name}: no runtime in hook mode"
                );
            }
        }
    }

    #[test]
    fn refusals_name_the_flag() {
        use Engine::*;
        let write = |w: WriteFlags| configure_with(Docker, w);
        let hook_mode = |f: Flags| Flags {
            config_mode: ConfigMode::OciHook,
            ..f
        };
        // (case, flags, the whole message)
        let cases: Vec<(&str, Flags, &str)> = vec![
            (
                "docker drop-in",
                Flags {
                    drop_in_config: Some(None),
                    ..configure(Docker)
                },
                "--drop-in-config: docker has no drop-in files; daemon.json is edited in place \
                 (leave the flag out)",
            ),
            (
                "docker drop-in path",
                Flags {
                    drop_in_config: Some(some("/x.toml")),
                    ..configure(Docker)
                },
                "--drop-in-config: docker has no drop-in files; daemon.json is edited in place \
                 (leave the flag out)",
            ),
            (
                "relative drop-in",
                Flags {
                    drop_in_config: Some(some("conf.d/99.toml")),
                    ..configure(Containerd)
                },
                "--drop-in-config=conf.d/99.toml: not an absolute path (containerd imports the \
                 drop-in's directory by its path); give an absolute path",
            ),
            (
                "docker command source",
                write(WriteFlags {
                    config_source: Some(ConfigSource::Command),
                    ..Default::default()
                }),
                "--config-source=command: docker has no config dump; leave it out (daemon.json \
                 is read)",
            ),
            (
                "executable without command source",
                configure_with(
                    Containerd,
                    WriteFlags {
                        executable_path: Some("/usr/bin/containerd".into()),
                        ..Default::default()
                    },
                ),
                "--executable-path names the engine binary for --config-source=command; add \
                 that flag or leave it out",
            ),
            (
                "executable for docker",
                write(WriteFlags {
                    executable_path: Some("/usr/bin/dockerd".into()),
                    ..Default::default()
                }),
                "--executable-path: docker's config is always read from daemon.json; leave it out",
            ),
            (
                "relative runtime path for containerd",
                configure_with(
                    Containerd,
                    WriteFlags {
                        nvidia_runtime_path: some("bin/nvidia-container-runtime"),
                        ..Default::default()
                    },
                ),
                "--nvidia-runtime-path=bin/nvidia-container-runtime: containerd needs an \
                 absolute path to the runtime binary",
            ),
            (
                "relative runtime path for crio",
                configure_with(
                    Crio,
                    WriteFlags {
                        nvidia_runtime_path: some("runtime"),
                        ..Default::default()
                    },
                ),
                "--nvidia-runtime-path=runtime: crio needs an absolute path to the runtime binary",
            ),
            (
                "empty runtime path",
                write(WriteFlags {
                    nvidia_runtime_path: some(""),
                    ..Default::default()
                }),
                "--nvidia-runtime-path is empty; give the runtime binary's path",
            ),
            (
                "hook path in config-file mode",
                Flags {
                    oci_hook_path: Some("/h.json".into()),
                    ..configure(Docker)
                },
                "--oci-hook-path: only used with --config-mode=oci-hook; leave it out, or add \
                 --config-mode=oci-hook",
            ),
            (
                "hook binary in config-file mode",
                write(WriteFlags {
                    nvidia_runtime_hook_path: some("/usr/bin/h"),
                    ..Default::default()
                }),
                "--nvidia-runtime-hook-path: only used with --config-mode=oci-hook; leave it \
                 out, or add --config-mode=oci-hook",
            ),
            (
                "config in hook mode",
                hook_mode(Flags {
                    config: Some("/etc/crio/crio.conf".into()),
                    ..configure(Docker)
                }),
                "--config: not used with --config-mode=oci-hook, which writes only the hook \
                 file (--oci-hook-path, the hook binary --nvidia-runtime-hook-path); leave it out",
            ),
            (
                "set as default in hook mode",
                hook_mode(write(WriteFlags {
                    set_as_default: Some(true),
                    ..Default::default()
                })),
                "--nvidia-set-as-default: not used with --config-mode=oci-hook, which writes \
                 only the hook file (--oci-hook-path, the hook binary \
                 --nvidia-runtime-hook-path); leave it out",
            ),
            (
                "cdi in hook mode",
                hook_mode(write(WriteFlags {
                    cdi_enabled: Some(false),
                    ..Default::default()
                })),
                "--cdi.enabled: not used with --config-mode=oci-hook, which writes only the \
                 hook file (--oci-hook-path, the hook binary --nvidia-runtime-hook-path); leave \
                 it out",
            ),
            (
                "relative hook binary",
                hook_mode(write(WriteFlags {
                    nvidia_runtime_hook_path: some("h"),
                    ..Default::default()
                })),
                "--nvidia-runtime-hook-path=h: not an absolute path; give the hook binary's \
                 absolute path",
            ),
            (
                "unconfigure hook without file",
                hook_mode(Flags::new(Docker)),
                "unconfigure --config-mode=oci-hook: name the hook file to remove with \
                 --oci-hook-path (the packages install \
                 /usr/share/containers/oci/hooks.d/oci-nvidia-hook.json)",
            ),
        ];
        for (name, flags, want) in cases {
            match resolve(flags) {
                Ok(r) => panic!("case {name}: accepted: {r:?}"),
                Err(e) => assert_eq!(e.to_string(), want, "case {name}"),
            }
        }
    }

    #[test]
    fn describe_and_restart_hint() {
        use Engine::*;
        // (case, flags, rootless docker, -d text, restart hint)
        let cases: &[(&str, Flags, bool, &str, &str)] = &[
            (
                "containerd drop-in",
                configure(Containerd),
                false,
                "configuring containerd: starting from /etc/containerd/config.toml, the runtime \
                 in the drop-in /etc/containerd/conf.d/99-nvidia.toml; runtime `nvidia` = \
                 /usr/bin/nvidia-container-runtime; writing the files",
                "restart containerd to apply: systemctl restart containerd",
            ),
            (
                "docker default and cdi, diff",
                Flags {
                    diff: true,
                    ..configure_with(
                        Docker,
                        WriteFlags {
                            set_as_default: Some(true),
                            cdi_enabled: Some(true),
                            ..Default::default()
                        },
                    )
                },
                false,
                "configuring docker: starting from /etc/docker/daemon.json, edited in place; \
                 runtime `nvidia` = nvidia-container-runtime, as the default, CDI enabled; dry \
                 run: printing a diff",
                "restart docker to apply: systemctl restart docker",
            ),
            (
                "rootless docker",
                configure(Docker),
                true,
                "configuring docker: starting from /etc/docker/daemon.json, edited in place; \
                 runtime `nvidia` = nvidia-container-runtime; writing the files",
                "restart the rootless docker to apply: systemctl --user restart docker",
            ),
            (
                "crio unconfigure dry run, own name",
                Flags {
                    dry_run: true,
                    nvidia_runtime_name: some("gpu"),
                    ..Flags::new(Crio)
                },
                false,
                "unconfiguring CRI-O: starting from /etc/crio/crio.conf, the runtime in the \
                 drop-in /etc/crio/crio.conf.d/99-nvidia.toml; runtime `gpu`; dry run: printing \
                 the new files",
                "restart CRI-O to apply: systemctl restart crio",
            ),
            (
                "containerd dump",
                configure_with(
                    Containerd,
                    WriteFlags {
                        config_source: Some(ConfigSource::Command),
                        ..Default::default()
                    },
                ),
                false,
                "configuring containerd: starting from `containerd config dump`, the runtime in \
                 the drop-in /etc/containerd/conf.d/99-nvidia.toml; runtime `nvidia` = \
                 /usr/bin/nvidia-container-runtime; writing the files",
                "restart containerd to apply: systemctl restart containerd",
            ),
            (
                "hook printed",
                Flags {
                    config_mode: ConfigMode::OciHook,
                    ..configure(Crio)
                },
                true,
                "configuring CRI-O: an OCI hooks.d file running \
                 /usr/bin/nvidia-container-runtime-hook, printed; runtime `nvidia`; writing the \
                 files",
                "the hook applies to new containers; no restart needed",
            ),
        ];
        for (name, flags, rootless, describe, hint) in cases {
            let r = resolve(flags.clone()).unwrap_or_else(|e| panic!("case {name}: {e}"));
            assert_eq!(r.describe(), *describe, "case {name}");
            assert_eq!(r.restart_hint(*rootless), *hint, "case {name}");
        }
    }

    #[test]
    fn runtime_to_check_and_warning() {
        let r = resolve(configure(Engine::Containerd)).unwrap();
        assert_eq!(r.runtime_to_check(), Some(ABS_RUNTIME));
        let hook = resolve(Flags {
            config_mode: ConfigMode::OciHook,
            ..configure(Engine::Docker)
        })
        .unwrap();
        assert_eq!(hook.runtime_to_check(), None);
        assert_eq!(
            missing_runtime_warning("/x/rt", "nvidia"),
            "the runtime /x/rt does not exist on this host (not installed yet, or a typo?): the \
             engine fails every `nvidia` container until it does; install the toolkit or pass \
             --nvidia-runtime-path"
        );
    }

    #[test]
    fn backups_only_of_the_main_file() {
        let r = resolve(configure(Engine::Crio)).unwrap();
        assert!(r.target.keeps_backup(Path::new(CRIO)));
        assert!(!r.target.keeps_backup(Path::new(CRIO_DROP_IN.unwrap())));
        let r = resolve(Flags {
            drop_in_config: Some(some("")),
            ..configure(Engine::Containerd)
        })
        .unwrap();
        assert!(r.target.keeps_backup(Path::new(CONTAINERD)));
    }

    #[test]
    fn transform_picks_the_engine_and_direction() {
        let path = Path::new("/etc/docker/daemon.json");
        let main = Source { path, text: "{}" };
        let docs = Documents {
            main,
            base: main,
            previous: None,
        };
        let r = resolve(configure(Engine::Docker)).unwrap();
        let out = transform(&r, docs).unwrap();
        assert_eq!(out.changes.len(), 1);
        let text = out.changes[0].content.as_deref().unwrap();
        assert!(text.contains("\"nvidia\""), "{text}");
        let un = resolve(Flags::new(Engine::Docker)).unwrap();
        let doc = Source { path, text };
        let back = transform(
            &un,
            Documents {
                main: doc,
                base: doc,
                previous: None,
            },
        )
        .unwrap();
        let text = back.changes[0].content.as_deref().unwrap();
        assert!(!text.contains("nvidia"), "{text}");
    }
}
