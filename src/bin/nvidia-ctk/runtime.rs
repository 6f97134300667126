//! `nvidia-ctk runtime configure|unconfigure`: read the engine's files, run the pure transform
//! from `nvct::runtime_config`, then show a diff (`--dry-run`) or write each changed file
//! atomically with a `.bak` backup. Raw clap values are resolved into [`Resolved`] first.
//!
//! The whole read → transform → write runs under an advisory lock on the config file's
//! directory ([`fsutil::lock_dir_of`]), so concurrent runs never lose each other's updates.
//!
//! TEST-ONLY: `NVCT_FAULT_AT=<step>` (a [`fsutil::Step`] name: temp-created, temp-written,
//! temp-synced, renamed, dir-synced) makes the process abort at that step of each file write
//! (used by the crash-safety test).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, Args, Subcommand, ValueEnum};
use nvct::fsutil::{self, Step, WriteOptions, Written};
use nvct::runtime_config::{
    self, containerd, crio, docker, oci_hook, Change, Options, Outcome, Source,
};

use crate::Verbosity;

#[derive(Args, Debug)]
pub struct RuntimeArgs {
    #[command(subcommand)]
    command: RuntimeCommand,
}

#[derive(Subcommand, Debug)]
enum RuntimeCommand {
    /// Add the NVIDIA runtime to an engine's configuration.
    Configure(RawArgs),
    /// Remove what `configure` added and restore the previous default runtime.
    Unconfigure(RawArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Containerd,
    Docker,
    Crio,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ConfigSource {
    File,
    Command,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ConfigMode {
    ConfigFile,
    OciHook,
}

/// The flags exactly as typed (shared by configure and unconfigure).
#[derive(Args, Debug)]
struct RawArgs {
    /// The engine to configure.
    #[arg(long, value_enum, default_value = "docker")]
    runtime: Engine,
    /// The engine's config file (default per engine).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Write the change to this drop-in file (containerd v2/v3, CRI-O); without a value the
    /// engine's default drop-in; "" edits the config file in place.
    #[arg(long, num_args = 0..=1)]
    drop_in_config: Option<Option<String>>,
    /// Print a unified diff of every file that would change; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Name of the runtime entry.
    #[arg(long, default_value = runtime_config::DEFAULT_RUNTIME_NAME)]
    nvidia_runtime_name: String,
    /// Path of the NVIDIA runtime binary.
    #[arg(long, default_value = runtime_config::DEFAULT_RUNTIME_PATH)]
    nvidia_runtime_path: String,
    /// Make the NVIDIA runtime the engine's default.
    #[arg(long = "nvidia-set-as-default", visible_alias = "set-as-default", action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    set_as_default: bool,
    /// Enable CDI in the engine.
    #[arg(long = "cdi.enabled", visible_alias = "enable-cdi", action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true")]
    cdi_enabled: bool,
    /// Where the base config comes from: the file, or the engine's own dump
    /// (`containerd config dump`, `crio status config`).
    #[arg(long, value_enum, default_value = "file")]
    config_source: ConfigSource,
    /// Edit the engine's config file, or write an OCI hooks.d file (CRI-O, podman).
    #[arg(long, value_enum, default_value = "config-file")]
    config_mode: ConfigMode,
}

/// Typed, defaulted options.
#[derive(Debug)]
struct Resolved {
    engine: Engine,
    mode: ConfigMode,
    config: PathBuf,
    drop_in: Option<PathBuf>,
    dry_run: bool,
    source: ConfigSource,
    opts: Options,
}

fn resolve(raw: RawArgs) -> Result<Resolved> {
    let (default_config, default_drop_in) = match raw.runtime {
        Engine::Containerd => (
            "/etc/containerd/config.toml",
            Some("/etc/containerd/conf.d/99-nvidia.toml"),
        ),
        Engine::Docker => ("/etc/docker/daemon.json", None),
        Engine::Crio => (
            "/etc/crio/crio.conf",
            Some("/etc/crio/crio.conf.d/99-nvidia.toml"),
        ),
    };
    let drop_in = match (raw.drop_in_config, default_drop_in) {
        (None, _) => None,
        (Some(Some(p)), _) if p.is_empty() => None,
        (Some(_), None) => bail!("--drop-in-config: docker has no drop-in files; use --config"),
        (Some(Some(p)), _) => Some(PathBuf::from(p)),
        (Some(None), Some(d)) => Some(PathBuf::from(d)),
    };
    // The drop-in's directory goes into containerd's `imports`; make it independent of the cwd.
    let drop_in = drop_in
        .map(std::path::absolute)
        .transpose()
        .context("--drop-in-config")?;
    let config = match (raw.config_mode, raw.config) {
        (_, Some(c)) => c,
        (ConfigMode::OciHook, None) => PathBuf::from(oci_hook::DEFAULT_PATH),
        (ConfigMode::ConfigFile, None) => PathBuf::from(default_config),
    };
    if raw.config_mode == ConfigMode::OciHook && raw.runtime != Engine::Crio {
        bail!("--config-mode=oci-hook is supported for --runtime=crio only");
    }
    if raw.config_source == ConfigSource::Command && raw.runtime == Engine::Docker {
        bail!("--config-source=command is not supported for docker");
    }
    Ok(Resolved {
        engine: raw.runtime,
        mode: raw.config_mode,
        config,
        drop_in,
        dry_run: raw.dry_run,
        source: raw.config_source,
        opts: Options {
            runtime_name: raw.nvidia_runtime_name,
            runtime_path: raw.nvidia_runtime_path,
            set_as_default: raw.set_as_default,
            cdi_enabled: raw.cdi_enabled,
        },
    })
}

pub fn run(args: RuntimeArgs, v: Verbosity) -> Result<()> {
    let (configure, raw) = match args.command {
        RuntimeCommand::Configure(r) => (true, r),
        RuntimeCommand::Unconfigure(r) => (false, r),
    };
    let r = resolve(raw)?;
    if v.debug {
        eprintln!("nvidia-ctk: {r:?}");
    }
    // Held until the end of this function: read, transform and write as one step.
    let _lock = if r.dry_run {
        None
    } else {
        Some(fsutil::lock_dir_of(&r.config)?)
    };
    let outcome = plan(&r, configure)?;
    if !v.quiet {
        for note in &outcome.notes {
            eprintln!("nvidia-ctk: note: {note}");
        }
    }
    apply(&r, outcome.changes, v)
}

/// Output of a command run for `--config-source=command`.
fn engine_dump(r: &Resolved) -> Result<String> {
    let mut cmd = match r.engine {
        Engine::Containerd => {
            let mut c = Command::new("containerd");
            if r.config.exists() {
                c.arg("--config").arg(&r.config);
            }
            c.args(["config", "dump"]);
            c
        }
        Engine::Crio => {
            let mut c = Command::new("crio");
            c.args(["status", "config"]);
            c
        }
        Engine::Docker => unreachable!("refused in resolve"),
    };
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{cmd:?} printed non-UTF-8 output"))
}

/// Compute the new content of every file (pure transforms over what is read here).
fn plan(r: &Resolved, configure: bool) -> Result<Outcome> {
    if r.mode == ConfigMode::OciHook {
        let dir = Path::new(&r.opts.runtime_path)
            .parent()
            .unwrap_or(Path::new("/usr/bin"));
        let hook = dir
            .join("nvidia-container-runtime-hook")
            .display()
            .to_string();
        let content = configure.then(|| oci_hook::render(&hook));
        return Ok(Outcome {
            changes: vec![Change {
                path: r.config.clone(),
                content,
            }],
            notes: vec![],
        });
    }
    let text = fsutil::read_optional(&r.config)?.unwrap_or_default();
    let main = Source {
        path: &r.config,
        text: &text,
    };
    let dump_label;
    let dump_text;
    let base = if configure && r.source == ConfigSource::Command {
        dump_text = engine_dump(r)?;
        dump_label = PathBuf::from(match r.engine {
            Engine::Containerd => "<containerd config dump>",
            _ => "<crio status config>",
        });
        Source {
            path: &dump_label,
            text: &dump_text,
        }
    } else {
        main
    };
    let drop_in = r.drop_in.as_deref();
    let previous = if configure {
        None
    } else {
        fsutil::read_optional(&fsutil::backup_path(&fsutil::real_path(&r.config)?))?
    };
    let previous = previous.as_deref();
    let out = match (r.engine, configure) {
        (Engine::Containerd, true) => containerd::configure(main, base, drop_in, &r.opts)?,
        (Engine::Containerd, false) => containerd::unconfigure(main, previous, drop_in, &r.opts)?,
        (Engine::Docker, true) => docker::configure(base, &r.opts)?,
        (Engine::Docker, false) => docker::unconfigure(main, previous, &r.opts)?,
        (Engine::Crio, true) => crio::configure(main, base, drop_in, &r.opts)?,
        (Engine::Crio, false) => crio::unconfigure(main, previous, drop_in, &r.opts)?,
    };
    Ok(out)
}

fn unified_diff(path: &Path, old: Option<&str>, new: Option<&str>) -> String {
    let name = path.display().to_string();
    let a = if old.is_some() {
        name.clone()
    } else {
        "/dev/null".into()
    };
    let b = if new.is_some() {
        name
    } else {
        "/dev/null".into()
    };
    similar::TextDiff::from_lines(old.unwrap_or(""), new.unwrap_or(""))
        .unified_diff()
        .context_radius(3)
        .header(&a, &b)
        .to_string()
}

/// Show or write every change whose content differs from the file on disk.
fn apply(r: &Resolved, changes: Vec<Change>, v: Verbosity) -> Result<()> {
    let fault = match std::env::var("NVCT_FAULT_AT") {
        Ok(name) => Some(fsutil::abort_at(
            Step::parse(&name)
                .with_context(|| format!("NVCT_FAULT_AT={name:?} is not a write step"))?,
            "nvidia-ctk",
        )),
        Err(_) => None,
    };
    let mut changed = 0;
    for c in changes {
        // A drop-in lives in a directory the engine reads wholesale (CRI-O reads every file of
        // crio.conf.d): no `.bak` there, it would be read as configuration too. Drop-ins are
        // ours; the main file keeps its backup.
        let backup = r.drop_in.as_deref() != Some(c.path.as_path());
        let wopts = WriteOptions {
            backup,
            fault: fault.as_ref().map(|f| f as &dyn Fn(Step, &Path)),
        };
        let current = fsutil::read_optional(&c.path)?;
        // Nothing to create: an empty main file when there was none (unconfigure with a drop-in).
        let empty_new_file =
            current.is_none() && c.content.as_deref().is_some_and(|t| t.trim().is_empty());
        if current == c.content || empty_new_file {
            if v.debug {
                eprintln!("nvidia-ctk: {}: unchanged", c.path.display());
            }
            continue;
        }
        changed += 1;
        if r.dry_run {
            print!(
                "{}",
                unified_diff(&c.path, current.as_deref(), c.content.as_deref())
            );
            continue;
        }
        let what = match &c.content {
            Some(text) => match fsutil::write_atomic(&c.path, text.as_bytes(), &wopts)? {
                Written::Created => "created",
                Written::Replaced if backup => "updated (previous content in .bak)",
                Written::Replaced => "updated",
                Written::Unchanged => continue,
            },
            None => {
                fsutil::remove_with_backup(&c.path, backup)?;
                if backup {
                    "removed (previous content in .bak)"
                } else {
                    "removed"
                }
            }
        };
        if !v.quiet {
            let real = fsutil::real_path(&c.path)?;
            let link = if real != c.path {
                format!(" (a symlink to {})", real.display())
            } else {
                String::new()
            };
            eprintln!("nvidia-ctk: {}{link}: {what}", c.path.display());
        }
    }
    if !v.quiet && !r.dry_run {
        if changed == 0 {
            eprintln!("nvidia-ctk: nothing to change");
        } else {
            let hint = match (r.mode, r.engine) {
                (ConfigMode::OciHook, _) => "the hook applies to new containers; no restart needed",
                (_, Engine::Containerd) => {
                    "restart containerd to apply: systemctl restart containerd"
                }
                (_, Engine::Docker) => "restart docker to apply: systemctl restart docker",
                (_, Engine::Crio) => "restart CRI-O to apply: systemctl restart crio",
            };
            eprintln!("nvidia-ctk: {hint}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        raw: RawArgs,
    }

    fn resolve_args(args: &[&str]) -> Result<Resolved> {
        let t = T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))?;
        resolve(t.raw)
    }

    /// Expected (config, drop-in, set-as-default, cdi), or None for a refusal.
    type Want = Option<(&'static str, Option<&'static str>, bool, bool)>;

    #[test]
    fn resolution() {
        let cases: &[(&str, &[&str], Want)] = &[
            (
                "docker defaults",
                &[],
                Some(("/etc/docker/daemon.json", None, false, false)),
            ),
            (
                "containerd drop-in default",
                &[
                    "--runtime=containerd",
                    "--drop-in-config",
                    "--set-as-default",
                ],
                Some((
                    "/etc/containerd/config.toml",
                    Some("/etc/containerd/conf.d/99-nvidia.toml"),
                    true,
                    false,
                )),
            ),
            (
                "drop-in empty is in place",
                &["--runtime=containerd", "--drop-in-config="],
                Some(("/etc/containerd/config.toml", None, false, false)),
            ),
            (
                "enable-cdi alias",
                &["--runtime=crio", "--enable-cdi"],
                Some(("/etc/crio/crio.conf", None, false, true)),
            ),
            (
                "cdi.enabled=false",
                &["--cdi.enabled=false", "--nvidia-set-as-default=true"],
                Some(("/etc/docker/daemon.json", None, true, false)),
            ),
            (
                "oci hook path",
                &["--runtime=crio", "--config-mode=oci-hook"],
                Some((oci_hook::DEFAULT_PATH, None, false, false)),
            ),
            ("docker drop-in refused", &["--drop-in-config"], None),
            ("oci hook docker refused", &["--config-mode=oci-hook"], None),
            ("docker command refused", &["--config-source=command"], None),
        ];
        for (name, args, want) in cases {
            match (resolve_args(args), want) {
                (Ok(r), Some((config, drop_in, def, cdi))) => {
                    assert_eq!(r.config, Path::new(config), "case {name}");
                    assert_eq!(r.drop_in.as_deref(), drop_in.map(Path::new), "case {name}");
                    assert_eq!(
                        (r.opts.set_as_default, r.opts.cdi_enabled),
                        (*def, *cdi),
                        "case {name}"
                    );
                }
                (Err(_), None) => {}
                (got, want) => panic!("case {name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
