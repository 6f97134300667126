//! `nvidia-ctk runtime configure|unconfigure`: read the engine's files, run the pure transform
//! from `nvct_engines`, then print the new content (`--dry-run`) or a diff (`--diff`) of
//! each changed file, or write it atomically with a `.bak` backup. Raw clap values are copied
//! into [`Flags`] and resolved by `nvct::flags::runtime`, which also holds every rule of
//! the run (what is written where, what counts as a change, which file keeps a `.bak`); this
//! file reads, runs the engine's dump, writes and prints.
//!
//! Defaults are upstream 1.18's: containerd (config version 2 or 3) and CRI-O get a drop-in
//! (`--drop-in-config=""` edits the main file in place; a version 1 containerd config is always
//! edited in place), docker's entry runs the bare `nvidia-container-runtime`.
//!
//! The whole read → transform → write runs under an advisory lock on the config file's
//! directory ([`fsutil::lock_dir_of`]), so concurrent runs never lose each other's updates.
//!
//! containerd (versions 2 and 3, with a drop-in): the drop-in is derived from the config file
//! merged with the other files it imports, by the merge rule of the installed containerd's
//! release (`containerd --version`; [`containerd::MergeRule`]), keeping what the current drop-in
//! already sets. `configure --refresh-drop-in` re-derives it with the settings read back from
//! it (what the package's nvidia-containerd-dropin units run before containerd starts). An
//! imported file that is not TOML or is a symlink out of the config's `/etc`, and a drop-in
//! directory that is a symlink, are refused before anything is written.
//!
//! TEST-ONLY: `NVCT_FAULT_AT=<step>` (a [`fsutil::Step`] name: temp-created, temp-written,
//! temp-synced, renamed, dir-synced) makes the process abort at that step of each file write
//! (used by the crash-safety test).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, Args, Subcommand, ValueEnum};
use nvct::flags::runtime::{
    self as flags, ConfigMode as ConfigModeLib, Documents, Flags, Output, Resolved, Target,
    WriteFlags,
};
use nvct_engines::{containerd, oci_hook, Change, Engine, Outcome, Source};
use nvct_formats::fsutil::{self, Step, WriteOptions, Written};

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
    let configure = r.configure;
    if v.debug {
        eprintln!("nvidia-ctk: {}", r.describe());
    }
    if configure && !refresh && r.output == Output::Write && !v.quiet {
        if let Some(warning) = missing_runtime_warning(&r) {
            eprintln!("nvidia-ctk: warning: {warning}");
        }
    }
    if let Target::OciHook { file: None, hook } = &r.target {
        // Upstream's default without --oci-hook-path: the hook on stdout, nothing written.
        print!("{}", oci_hook::render(hook));
        return Ok(());
    }
    // Held until the end of this function: read, transform and write as one step.
    let _lock = match (r.output, r.target.locked_file()) {
        (Output::Write, Some(f)) => Some(fsutil::lock_dir_of(f)?),
        _ => None,
    };
    let rule = containerd_rule(&r, v);
    let outcome = plan(&r, refresh, rule)?;
    if !v.quiet {
        for note in &outcome.notes {
            eprintln!("nvidia-ctk: note: {note}");
        }
    }
    let snapshot = match (configure, r.engine, r.output) {
        (true, Engine::Containerd, Output::Write) => Some(Snapshot::take(&outcome.changes)?),
        _ => None,
    };
    let changed = apply(&r, outcome.changes, v)?;
    if let (
        Some(snapshot),
        Target::ConfigFile {
            config, dump_with, ..
        },
    ) = (snapshot, &r.target)
    {
        if changed > 0 {
            let rule = rule.unwrap_or(containerd::MergeRule::WholePlugin);
            if let Err(e) = check_containerd(config, dump_with.as_deref(), rule, v) {
                snapshot.restore()?;
                return Err(e.context(format!(
                    "containerd would not load the result, so nothing was changed (every file \
                     is back as it was); fix {} by hand or run with --config-source=command",
                    config.display()
                )));
            }
        }
    }
    if !v.quiet {
        match (changed, r.output) {
            (0, _) => eprintln!("nvidia-ctk: nothing to change"),
            (_, Output::Write) => eprintln!("nvidia-ctk: {}", restart_hint(&r)),
            (_, _) => eprintln!("nvidia-ctk: dry run: nothing was written"),
        }
    }
    Ok(())
}

/// The files a write may touch (each changed file and its `.bak`), as they were before it.
struct Snapshot(Vec<(PathBuf, Option<String>)>);

impl Snapshot {
    fn take(changes: &[Change]) -> Result<Snapshot> {
        let mut files = Vec::new();
        for c in changes {
            let real = fsutil::real_path(&c.path)?;
            for p in [fsutil::backup_path(&real), real] {
                let text = fsutil::read_optional(&p)?;
                files.push((p, text));
            }
        }
        Ok(Snapshot(files))
    }

    /// Put every file back (content; a file that was not there is removed).
    fn restore(&self) -> Result<()> {
        let wopts = WriteOptions {
            backup: false,
            fault: None,
            no_fsync: false,
        };
        for (path, text) in &self.0 {
            match text {
                Some(t) => {
                    fsutil::write_atomic(path, t.as_bytes(), &wopts)?;
                }
                None => {
                    fsutil::remove_with_backup(path, false)?;
                }
            }
        }
        Ok(())
    }
}

/// After a write: does containerd still have its default runtime? Judged by `containerd
/// --config FILE config dump` (which loads the imports) when the binary is there (`dump_with`,
/// else `containerd` from PATH) and reads the file's config version, else by our model of
/// containerd's merge over the file and the files it imports (a containerd 1.x reading a
/// version 3 file dumps its own defaults, not the file).
fn check_containerd(
    config: &Path,
    dump_with: Option<&Path>,
    rule: containerd::MergeRule,
    v: Verbosity,
) -> Result<()> {
    let main = fsutil::read_optional(config)?.unwrap_or_default();
    let binary = dump_with.unwrap_or(Path::new("containerd"));
    let spawn = Command::new(binary)
        .arg("--config")
        .arg(config)
        .args(["config", "dump"])
        .output();
    let dump = match spawn {
        Ok(out) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => bail!(
            "`{} --config {} config dump` failed ({}): {}",
            binary.display(),
            config.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && dump_with.is_none() => None,
        Err(e) => bail!("running {}: {e}", binary.display()),
    };
    if let Some(text) = dump.filter(|d| flags::dump_reflects_file(config, &main, d)) {
        let label = format!(
            "<{} --config {} config dump>",
            binary.display(),
            config.display()
        );
        containerd::check_default_runtime_under(
            Source {
                path: Path::new(&label),
                text: &text,
            },
            rule,
        )?;
        return Ok(());
    }
    if v.debug {
        eprintln!("nvidia-ctk: no containerd that reads this config; checking the merged files");
    }
    let mut files = vec![(config.to_path_buf(), main.clone())];
    for p in crate::doctor::containerd_imports(config, &main)? {
        if let Some(t) = fsutil::read_optional(&p)? {
            files.push((p, t));
        }
    }
    let sources: Vec<Source<'_>> = files
        .iter()
        .map(|(path, text)| Source { path, text })
        .collect();
    let merged = containerd::effective(&sources, rule)?;
    let label = format!("{} with its imports", config.display());
    containerd::check_default_runtime_under(
        Source {
            path: Path::new(&label),
            text: &merged,
        },
        rule,
    )?;
    Ok(())
}

/// Output of `binary config dump` (containerd) or `binary status config` (CRI-O).
fn engine_dump(engine: Engine, binary: &Path, config: &Path) -> Result<String> {
    let args = flags::dump_args(engine, config, config.exists()).expect("refused in resolve");
    let mut cmd = Command::new(binary);
    cmd.args(args);
    let out = cmd.output().with_context(|| {
        format!("--config-source=command: running {cmd:?} (--executable-path names the binary)")
    })?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{cmd:?} printed non-UTF-8 output"))
}

/// The merge rule of the containerd that reads the config (`--executable-path` with
/// `--config-source=command`, else `containerd` from `PATH`), for a containerd configure or
/// refresh with a drop-in; `None` for every other run. An unknown release takes the rule before
/// 2.0 and says so in one line.
fn containerd_rule(r: &Resolved, v: Verbosity) -> Option<containerd::MergeRule> {
    let Target::ConfigFile {
        drop_in: Some(_),
        dump_with,
        ..
    } = &r.target
    else {
        return None;
    };
    if r.engine != Engine::Containerd || !r.configure {
        return None;
    }
    let binary = dump_with.as_deref().unwrap_or(Path::new("containerd"));
    let release = Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| containerd::Release::parse(&String::from_utf8_lossy(&o.stdout)));
    let rule = containerd::MergeRule::of(release);
    match release {
        Some(rel) if v.debug => eprintln!(
            "nvidia-ctk: containerd {rel} ({}): {}",
            binary.display(),
            rule.describe()
        ),
        Some(_) => {}
        None if !v.quiet => eprintln!(
            "nvidia-ctk: note: containerd's version is unknown (`{} --version` gave none), so the \
             rule before {}: {}",
            binary.display(),
            containerd::PER_KEY_SINCE,
            rule.describe()
        ),
        None => {}
    }
    Some(rule)
}

/// The files containerd imports from `config` (text `text`), read and checked, with the drop-in
/// `drop_in` told apart: (the others in load order, the drop-in's text when it is imported and
/// there). Refused, before anything is written: a drop-in directory that is a symlink, and an
/// imported file that is a symlink out of the config's `/etc` ([`containerd::import_root`]) or
/// a dangling one.
fn containerd_layers(
    config: &Path,
    text: &str,
    drop_in: &Path,
) -> Result<(Vec<(PathBuf, String)>, Option<String>)> {
    let dir = drop_in.parent().unwrap_or(Path::new("/"));
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        let to = std::fs::read_link(dir).unwrap_or_default();
        bail!(
            "{}: the drop-in directory is a symlink (to {}); containerd's drop-ins belong in a \
             real directory next to its config: replace the link with a directory (move the \
             files over), or name one with --drop-in-config; nothing was changed",
            dir.display(),
            to.display()
        );
    }
    let root = containerd::import_root(config);
    let real_root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let ours = fsutil::real_path(drop_in).unwrap_or_else(|_| drop_in.to_path_buf());
    let mut others = Vec::new();
    let mut previous = None;
    for p in crate::doctor::containerd_imports(config, text)? {
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
        };
        if meta.file_type().is_symlink() {
            let to = std::fs::read_link(&p).unwrap_or_default();
            match std::fs::canonicalize(&p) {
                Ok(real) if real.starts_with(&real_root) => {}
                Ok(real) => bail!(
                    "{}: a symlink to {}, outside {}: containerd imports it from {}, and this \
                     tool does not copy settings from outside {} into its drop-in; put the file \
                     itself there (cp --remove-destination {} {}) or remove the link; nothing \
                     was changed",
                    p.display(),
                    real.display(),
                    root.display(),
                    config.display(),
                    root.display(),
                    real.display(),
                    p.display()
                ),
                Err(_) => bail!(
                    "{}: a dangling symlink (to {}), which containerd's imports match and then \
                     fail to open: remove it or restore its target; nothing was changed",
                    p.display(),
                    to.display()
                ),
            }
        }
        let Some(t) = fsutil::read_optional(&p)? else {
            continue;
        };
        let real = fsutil::real_path(&p).unwrap_or_else(|_| p.clone());
        if real == ours {
            previous = Some(t);
        } else {
            others.push((p, t));
        }
    }
    Ok((others, previous))
}

/// A TOML error in a file containerd imports, with the fix.
fn import_error(e: nvct_engines::Error, config: &Path, drop_in: &Path) -> anyhow::Error {
    let nvct_engines::Error::Toml { path, .. } = &e else {
        return e.into();
    };
    if path == drop_in {
        anyhow::anyhow!(
            "{e}; containerd would not start with it either: fix that line, or remove {} and run \
             configure again with the flags it was written with; nothing was changed",
            drop_in.display()
        )
    } else {
        anyhow::anyhow!(
            "{e}; containerd imports it from {} and would not start with it either: fix that \
             line, or move the file out of what `imports` matches; nothing was changed",
            config.display()
        )
    }
}

/// Compute the new content of every file (the library's transform over what is read here).
fn plan(r: &Resolved, refresh: bool, rule: Option<containerd::MergeRule>) -> Result<Outcome> {
    let configure = r.configure;
    let (config, drop_in, dump_with) = match &r.target {
        Target::OciHook { file, hook } => {
            let path = file.clone().expect("stdout output is handled in run");
            return Ok(Outcome {
                changes: vec![Change {
                    path,
                    content: configure.then(|| oci_hook::render(hook)),
                }],
                notes: vec![],
            });
        }
        Target::ConfigFile {
            config,
            drop_in,
            dump_with,
        } => (config, drop_in.as_deref(), dump_with),
    };
    let text = fsutil::read_optional(config)?;
    if refresh && text.is_none() {
        return Ok(nothing_to_refresh(format!(
            "{} does not exist",
            config.display()
        )));
    }
    let text = text.unwrap_or_default();
    let main = Source {
        path: config,
        text: &text,
    };
    if let (true, Engine::Containerd, Some(drop_in), Some(rule)) =
        (configure, r.engine, drop_in, rule)
    {
        if flags::merges_imports(config, &text, Some(drop_in)) {
            return plan_containerd(r, main, drop_in, dump_with.as_deref(), refresh, rule);
        }
    }
    if refresh {
        // A version 1 file (edited in place), or one that does not parse.
        containerd::version_of(main)?;
        return Ok(nothing_to_refresh(format!(
            "{}: a version 1 config imports no drop-in (configure edits it in place)",
            config.display()
        )));
    }
    let dump_label;
    let dump_text;
    let base = match dump_with {
        Some(binary) if configure => {
            dump_text = engine_dump(r.engine, binary, config)?;
            dump_label = flags::dump_label(r.engine, binary);
            Source {
                path: &dump_label,
                text: &dump_text,
            }
        }
        _ => main,
    };
    let previous = if configure {
        None
    } else {
        fsutil::read_optional(&fsutil::backup_path(&fsutil::real_path(config)?))?
    };
    if let (false, Engine::Containerd) = (configure, r.engine) {
        return Ok(containerd::unconfigure_with(
            main,
            previous.as_deref(),
            drop_in,
            &r.opts,
            previous.is_none() || drop_in.is_some_and(glob_in_use),
        )?);
    }
    let docs = Documents {
        main,
        base,
        previous: previous.as_deref(),
    };
    Ok(flags::transform(r, docs)?)
}

/// Whether the drop-in's directory holds other `*.toml` files (the node's own drop-ins), which
/// the `imports` glob configure writes also matches: then unconfigure keeps the glob.
fn glob_in_use(drop_in: &Path) -> bool {
    let (Some(dir), Some(ours)) = (drop_in.parent(), drop_in.file_name()) else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        name != ours
            && name.to_string_lossy().ends_with(".toml")
            && std::fs::metadata(e.path()).is_ok_and(|m| m.is_file())
    })
}

fn nothing_to_refresh(why: String) -> Outcome {
    Outcome {
        changes: vec![],
        notes: vec![format!("nothing to refresh: {why}")],
    }
}

/// containerd configure (or `--refresh-drop-in`) with a drop-in, for a version 2 or 3 config:
/// the drop-in derived from the file merged with the other files it imports (or from
/// `containerd config dump` with `--config-source=command`), by `rule`, keeping what the current
/// drop-in sets.
fn plan_containerd(
    r: &Resolved,
    main: Source<'_>,
    drop_in: &Path,
    dump_with: Option<&Path>,
    refresh: bool,
    rule: containerd::MergeRule,
) -> Result<Outcome> {
    let config = main.path;
    let (others, previous) = containerd_layers(config, main.text, drop_in)?;
    let previous_src = previous.as_deref().map(|text| Source {
        path: drop_in,
        text,
    });
    let label;
    let base_text;
    let base = match dump_with {
        Some(binary) => {
            base_text = engine_dump(r.engine, binary, config)?;
            label = flags::dump_label(r.engine, binary);
            Source {
                path: &label,
                text: &base_text,
            }
        }
        None if others.is_empty() => main,
        None => {
            let sources: Vec<Source<'_>> = std::iter::once(main)
                .chain(others.iter().map(|(path, text)| Source { path, text }))
                .collect();
            base_text = containerd::effective(&sources, rule)
                .map_err(|e| import_error(e, config, drop_in))?;
            label = PathBuf::from(format!("<{} with its imports>", config.display()));
            Source {
                path: &label,
                text: &base_text,
            }
        }
    };
    if let Some(p) = previous_src {
        // Its errors are the drop-in's, named with the fix.
        containerd::recover(p, &r.opts.runtime_name)
            .map_err(|e| import_error(e, config, drop_in))?;
    }
    if !refresh {
        let out =
            containerd::configure_with(main, base, Some(drop_in), previous_src, &r.opts, rule)?;
        return Ok(out);
    }
    let Some(previous_src) = previous_src else {
        return Ok(nothing_to_refresh(format!(
            "{} {}",
            drop_in.display(),
            if drop_in.exists() {
                format!("is not among the files {} imports", config.display())
            } else {
                "does not exist (configure writes it)".to_string()
            }
        )));
    };
    match containerd::refresh(main, base, drop_in, previous_src, &r.opts, rule)? {
        Some(change) => Ok(Outcome {
            changes: vec![change],
            notes: vec![],
        }),
        None => Ok(nothing_to_refresh(format!(
            "{} registers no `{}` runtime (not written by configure; --nvidia-runtime-name names \
             another)",
            drop_in.display(),
            r.opts.runtime_name
        ))),
    }
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

/// `--dry-run`: the new content on stdout, what it is on stderr (as upstream, which logs
/// "Drop-in config:" / "Top-level config:" before each).
fn show(c: &Change, exists: bool, v: Verbosity) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let Some(text) = &c.content else {
        if !v.quiet {
            eprintln!("nvidia-ctk: would remove {}", c.path.display());
        }
        return Ok(());
    };
    if !v.quiet {
        out.flush()?;
        let verb = if exists { "update" } else { "create" };
        eprintln!("nvidia-ctk: would {verb} {}:", c.path.display());
    }
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// The `NVCT_FAULT_AT` abort hook (see the module doc), if set.
fn fault_from_env() -> Result<Option<impl Fn(Step, &Path)>> {
    match std::env::var("NVCT_FAULT_AT") {
        Ok(name) => Ok(Some(fsutil::abort_at(
            Step::parse(&name)
                .with_context(|| format!("NVCT_FAULT_AT={name:?} is not a write step"))?,
            "nvidia-ctk",
        ))),
        Err(_) => Ok(None),
    }
}

/// Write (or remove) one changed file and say so.
fn write(
    c: &Change,
    backup: bool,
    fault: Option<&dyn Fn(Step, &Path)>,
    v: Verbosity,
) -> Result<()> {
    let wopts = WriteOptions {
        backup,
        fault,
        no_fsync: false,
    };
    let what = match &c.content {
        Some(text) => match fsutil::write_atomic(&c.path, text.as_bytes(), &wopts)? {
            Written::Created => "created",
            Written::Replaced if backup => "updated (previous content in .bak)",
            Written::Replaced => "updated",
            Written::Through => "written (not a regular file: written through)",
            Written::Unchanged => return Ok(()),
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
    Ok(())
}

/// A warning when the runtime path written does not exist here (a typo, or the toolkit not
/// installed yet): the engine would fail every container of that runtime.
fn missing_runtime_warning(r: &Resolved) -> Option<String> {
    let path = r.runtime_to_check()?;
    let found = if path.contains('/') {
        Path::new(path).exists()
    } else {
        which::which(path).is_ok()
    };
    (!found).then(|| flags::missing_runtime_warning(path, &r.opts.runtime_name))
}

/// What to do next, with docker's rootless mode judged from this process.
fn restart_hint(r: &Resolved) -> &'static str {
    let rootless = match &r.target {
        Target::ConfigFile { config, .. } if r.engine == Engine::Docker => {
            // Our effective uid, as /proc shows it (the owner of /proc/self).
            let euid = std::fs::metadata("/proc/self")
                .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
                .ok();
            flags::rootless_docker(config, std::env::var_os("HOME").as_deref(), euid)
        }
        _ => false,
    };
    r.restart_hint(rootless)
}

/// Show or write every change whose content differs from the file on disk; how many did.
fn apply(r: &Resolved, changes: Vec<Change>, v: Verbosity) -> Result<usize> {
    let fault = fault_from_env()?;
    let mut changed = 0;
    for c in changes {
        let current = fsutil::read_optional(&c.path)?;
        if !flags::is_change(current.as_deref(), c.content.as_deref()) {
            if v.debug {
                eprintln!("nvidia-ctk: {}: unchanged", c.path.display());
            }
            continue;
        }
        changed += 1;
        match r.output {
            Output::Diff => print!(
                "{}",
                unified_diff(&c.path, current.as_deref(), c.content.as_deref())
            ),
            Output::Content => show(&c, current.is_some(), v)?,
            Output::Write => {
                let backup = r.target.keeps_backup(&c.path);
                let fault = fault.as_ref().map(|f| f as &dyn Fn(Step, &Path));
                write(&c, backup, fault, v)?;
            }
        }
    }
    Ok(changed)
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
