//! `nvidia-ctk runtime configure|unconfigure`: the clap flags. Raw values are copied into
//! [`Flags`] and resolved by `nvct::flags::runtime`; the run itself (read the engine's files,
//! transform, print or write them, check containerd still loads the result) is
//! [`nvct_node::configure::run`].
//!
//! Defaults are upstream 1.18's: containerd (config version 2 or 3) and CRI-O get a drop-in
//! (`--drop-in-config=""` edits the main file in place; a version 1 containerd config is always
//! edited in place), docker's entry runs the bare `nvidia-container-runtime`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{ArgAction, Args, Subcommand, ValueEnum};
use nvct::flags::runtime::{self as flags, ConfigMode as ConfigModeLib, Flags, WriteFlags};
use nvct_engines::Engine;
use nvct_node::configure;

use crate::Verbosity;

#[derive(Args, Debug)]
pub struct RuntimeArgs {
    #[command(subcommand)]
    command: RuntimeCommand,
}

#[derive(Subcommand, Debug)]
enum RuntimeCommand {
    /// Add the NVIDIA runtime to an engine's configuration.
    Configure(ConfigureArgs),
    /// Remove what `configure` added and restore the previous default runtime.
    Unconfigure(CommonArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum EngineArg {
    Containerd,
    Docker,
    Crio,
}

impl EngineArg {
    fn lib(self) -> Engine {
        match self {
            EngineArg::Containerd => Engine::Containerd,
            EngineArg::Docker => Engine::Docker,
            EngineArg::Crio => Engine::Crio,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ConfigSource {
    File,
    Command,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ConfigMode {
    #[value(alias = "config")]
    ConfigFile,
    #[value(alias = "hook")]
    OciHook,
}

/// The flags of both configure and unconfigure, exactly as typed.
#[derive(Args, Debug)]
struct CommonArgs {
    /// The engine to configure.
    #[arg(long, value_enum, default_value = "docker")]
    runtime: EngineArg,
    /// The engine's config file [default: /etc/containerd/config.toml, /etc/docker/daemon.json,
    /// /etc/crio/crio.conf].
    #[arg(long)]
    config: Option<PathBuf>,
    /// The drop-in file that registers the runtime (an absolute path); "" edits --config in place
    /// (always so for docker and for a version 1 containerd config); without a value the default
    /// [default: /etc/containerd/conf.d/99-nvidia.toml, /etc/crio/crio.conf.d/99-nvidia.toml].
    #[arg(long, num_args = 0..=1, value_name = "PATH")]
    drop_in_config: Option<Option<String>>,
    /// Write nothing; print the new content of every file that would change (stdout; the file
    /// names go to stderr).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true")]
    dry_run: bool,
    /// Write nothing; print a unified diff of every file that would change (implies --dry-run).
    #[arg(long)]
    diff: bool,
    /// Name of the runtime entry [default: nvidia].
    #[arg(long, value_name = "NAME")]
    nvidia_runtime_name: Option<String>,
    /// Edit the engine's config (config-file, alias config), or write an OCI hooks.d file for
    /// podman and CRI-O (oci-hook, alias hook).
    #[arg(long, value_enum, default_value = "config-file")]
    config_mode: ConfigMode,
    /// With --config-mode=oci-hook: the hook file to write (configure; without it the hook is
    /// printed to stdout) or remove (unconfigure), e.g.
    /// /usr/share/containers/oci/hooks.d/oci-nvidia-hook.json.
    #[arg(long, value_name = "PATH")]
    oci_hook_path: Option<PathBuf>,
}

/// configure's flags: the common ones and those that say what to write.
#[derive(Args, Debug)]
struct ConfigureArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    write: WriteArgs,
    /// containerd: re-derive the drop-in from the current config file and the other files it
    /// imports, with the settings an earlier configure wrote into it (runtime path, default,
    /// CDI), so that edits made there since take effect at containerd's next start; writes only
    /// when the result differs, and nothing without a drop-in. The package's
    /// nvidia-containerd-dropin units run it before containerd starts.
    #[arg(long)]
    refresh_drop_in: bool,
}

#[derive(Args, Debug, Default)]
struct WriteArgs {
    /// The runtime binary the entry runs [default: nvidia-container-runtime for docker (found in
    /// dockerd's PATH), /usr/bin/nvidia-container-runtime for containerd and CRI-O, which need an
    /// absolute path].
    #[arg(
        long = "nvidia-runtime-path",
        visible_alias = "runtime-path",
        value_name = "PATH"
    )]
    nvidia_runtime_path: Option<String>,
    /// With --config-mode=oci-hook: the hook binary the hook file runs (an absolute path)
    /// [default: /usr/bin/nvidia-container-runtime-hook].
    #[arg(long, value_name = "PATH")]
    nvidia_runtime_hook_path: Option<String>,
    /// Make the NVIDIA runtime the engine's default.
    #[arg(long = "nvidia-set-as-default", visible_alias = "set-as-default", action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    set_as_default: Option<bool>,
    /// Enable CDI in the engine (CRI-O has it on already).
    #[arg(long = "cdi.enabled", visible_aliases = ["enable-cdi", "cdi.enable"],
          action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true")]
    cdi_enabled: Option<bool>,
    /// Where the current config is read from: the file, or the engine's own dump (`containerd
    /// config dump`, `crio status config`) [default: file].
    #[arg(long, value_enum)]
    config_source: Option<ConfigSource>,
    /// With --config-source=command: the engine binary to run [default: containerd, crio].
    #[arg(long, value_name = "PATH")]
    executable_path: Option<PathBuf>,
}

impl ConfigMode {
    fn lib(self) -> ConfigModeLib {
        match self {
            ConfigMode::ConfigFile => ConfigModeLib::ConfigFile,
            ConfigMode::OciHook => ConfigModeLib::OciHook,
        }
    }
}

impl ConfigSource {
    fn lib(self) -> flags::ConfigSource {
        match self {
            ConfigSource::File => flags::ConfigSource::File,
            ConfigSource::Command => flags::ConfigSource::Command,
        }
    }
}

impl CommonArgs {
    /// The values as typed, for [`flags::resolve`]; `write` is None for unconfigure.
    fn flags(self, write: Option<WriteArgs>) -> Flags {
        Flags {
            engine: self.runtime.lib(),
            config: self.config,
            drop_in_config: self.drop_in_config,
            dry_run: self.dry_run,
            diff: self.diff,
            nvidia_runtime_name: self.nvidia_runtime_name,
            config_mode: self.config_mode.lib(),
            oci_hook_path: self.oci_hook_path,
            write: write.map(|w| WriteFlags {
                nvidia_runtime_path: w.nvidia_runtime_path,
                nvidia_runtime_hook_path: w.nvidia_runtime_hook_path,
                set_as_default: w.set_as_default,
                cdi_enabled: w.cdi_enabled,
                config_source: w.config_source.map(ConfigSource::lib),
                executable_path: w.executable_path,
            }),
        }
    }
}

fn parsed(command: RuntimeCommand) -> Flags {
    match command {
        RuntimeCommand::Configure(a) => a.common.flags(Some(a.write)),
        RuntimeCommand::Unconfigure(c) => c.flags(None),
    }
}

/// `--refresh-drop-in` with a flag it does not use (the settings come from the drop-in), for
/// another engine, or without a drop-in: the flag at fault and what to do.
fn refresh_conflict(a: &ConfigureArgs) -> Option<String> {
    let (c, w) = (&a.common, &a.write);
    if c.runtime != EngineArg::Containerd {
        return Some(
            "--refresh-drop-in: only containerd's drop-in is derived from the other files; add \
             --runtime=containerd"
                .into(),
        );
    }
    if matches!(&c.drop_in_config, Some(Some(p)) if p.is_empty()) {
        return Some(
            "--refresh-drop-in: --drop-in-config=\"\" names no drop-in (the config is edited \
             in place, there is nothing to re-derive); leave it out or name the drop-in"
                .into(),
        );
    }
    let typed = [
        ("--nvidia-runtime-path", w.nvidia_runtime_path.is_some()),
        ("--nvidia-set-as-default", w.set_as_default.is_some()),
        ("--cdi.enabled", w.cdi_enabled.is_some()),
        ("--config-source", w.config_source.is_some()),
        ("--executable-path", w.executable_path.is_some()),
        (
            "--nvidia-runtime-hook-path",
            w.nvidia_runtime_hook_path.is_some(),
        ),
        ("--oci-hook-path", c.oci_hook_path.is_some()),
        ("--config-mode", c.config_mode != ConfigMode::ConfigFile),
    ];
    let (flag, _) = typed.iter().find(|(_, t)| *t)?;
    Some(format!(
        "{flag}: not used with --refresh-drop-in, which writes the settings the drop-in already \
         has; leave it out (run configure without --refresh-drop-in to change them)"
    ))
}

pub fn run(args: RuntimeArgs, v: Verbosity) -> Result<()> {
    let refresh = match &args.command {
        RuntimeCommand::Configure(a) if a.refresh_drop_in => {
            if let Some(why) = refresh_conflict(a) {
                bail!("{why}");
            }
            true
        }
        _ => false,
    };
    let r = flags::resolve(parsed(args.command))?;
    let v = configure::Verbosity {
        debug: v.debug,
        quiet: v.quiet,
    };
    configure::run(&r, refresh, v)
}

#[cfg(test)]
mod tests {
    //! The clap definitions only: each spelling lands in the right field of [`Flags`]. What the
    //! values resolve to is `nvct::flags::runtime`'s tables.
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(subcommand)]
        command: RuntimeCommand,
    }

    fn parse(args: &[&str]) -> Result<Flags, clap::Error> {
        let t = T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))?;
        Ok(parsed(t.command))
    }

    fn configure(engine: Engine, w: WriteFlags) -> Flags {
        Flags {
            write: Some(w),
            ..Flags::new(engine)
        }
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn spellings_land_in_their_fields() {
        let cases: Vec<(&str, &[&str], Flags)> = vec![
            (
                "defaults: docker, nothing typed",
                &["configure"],
                configure(Engine::Docker, WriteFlags::default()),
            ),
            (
                "upstream alias --runtime-path",
                &["configure", "--runtime-path=/x/rt"],
                configure(
                    Engine::Docker,
                    WriteFlags {
                        nvidia_runtime_path: some("/x/rt"),
                        ..Default::default()
                    },
                ),
            ),
            (
                "--drop-in-config without a value, bare --set-as-default",
                &[
                    "configure",
                    "--runtime=containerd",
                    "--drop-in-config",
                    "--set-as-default",
                ],
                Flags {
                    drop_in_config: Some(None),
                    ..configure(
                        Engine::Containerd,
                        WriteFlags {
                            set_as_default: Some(true),
                            ..Default::default()
                        },
                    )
                },
            ),
            (
                "--drop-in-config= is an empty value",
                &["configure", "--runtime=crio", "--drop-in-config="],
                Flags {
                    drop_in_config: Some(some("")),
                    ..configure(Engine::Crio, WriteFlags::default())
                },
            ),
            (
                "--enable-cdi alias",
                &["configure", "--enable-cdi"],
                configure(
                    Engine::Docker,
                    WriteFlags {
                        cdi_enabled: Some(true),
                        ..Default::default()
                    },
                ),
            ),
            (
                "--cdi.enable alias, --nvidia-set-as-default=false",
                &["configure", "--cdi.enable", "--nvidia-set-as-default=false"],
                configure(
                    Engine::Docker,
                    WriteFlags {
                        cdi_enabled: Some(true),
                        set_as_default: Some(false),
                        ..Default::default()
                    },
                ),
            ),
            (
                "--cdi.enabled=false, --dry-run=false, --config-mode=config alias",
                &[
                    "configure",
                    "--cdi.enabled=false",
                    "--dry-run=false",
                    "--config-mode=config",
                ],
                configure(
                    Engine::Docker,
                    WriteFlags {
                        cdi_enabled: Some(false),
                        ..Default::default()
                    },
                ),
            ),
            (
                "--config-mode=hook alias and the hook flags",
                &[
                    "configure",
                    "--config-mode=hook",
                    "--oci-hook-path=/h.json",
                    "--nvidia-runtime-hook-path=/h",
                ],
                Flags {
                    config_mode: ConfigModeLib::OciHook,
                    oci_hook_path: Some("/h.json".into()),
                    ..configure(
                        Engine::Docker,
                        WriteFlags {
                            nvidia_runtime_hook_path: some("/h"),
                            ..Default::default()
                        },
                    )
                },
            ),
            (
                "dump source flags",
                &[
                    "configure",
                    "--runtime=crio",
                    "--config-source=command",
                    "--executable-path=/bin/crio",
                ],
                configure(
                    Engine::Crio,
                    WriteFlags {
                        config_source: Some(flags::ConfigSource::Command),
                        executable_path: Some("/bin/crio".into()),
                        ..Default::default()
                    },
                ),
            ),
            (
                "unconfigure: common flags only",
                &[
                    "unconfigure",
                    "--runtime=containerd",
                    "--config=/c.toml",
                    "--dry-run",
                    "--diff",
                    "--nvidia-runtime-name=gpu",
                ],
                Flags {
                    config: Some("/c.toml".into()),
                    dry_run: true,
                    diff: true,
                    nvidia_runtime_name: some("gpu"),
                    ..Flags::new(Engine::Containerd)
                },
            ),
        ];
        for (name, args, want) in cases {
            let got = parse(args).unwrap_or_else(|e| panic!("case {name}: {e}"));
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn clap_refuses_what_a_command_does_not_have() {
        // (case, args, the flag the error names)
        let cases: &[(&str, &[&str], &str)] = &[
            (
                "unconfigure has no set-as-default",
                &["unconfigure", "--set-as-default"],
                "--set-as-default",
            ),
            (
                "unconfigure has no runtime path",
                &["unconfigure", "--nvidia-runtime-path=/x"],
                "--nvidia-runtime-path",
            ),
            (
                "unknown config mode",
                &["configure", "--config-mode=bogus"],
                "--config-mode",
            ),
            (
                "unknown engine",
                &["configure", "--runtime=podman"],
                "--runtime",
            ),
        ];
        for (name, args, flag) in cases {
            let e = match parse(args) {
                Ok(f) => panic!("case {name}: accepted: {f:?}"),
                Err(e) => e.to_string(),
            };
            assert!(e.contains(flag), "case {name}: {flag:?} not in: {e}");
        }
    }
}
