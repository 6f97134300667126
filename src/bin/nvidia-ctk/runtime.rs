//! `nvidia-ctk runtime configure|unconfigure`: read the engine's files, run the pure transform
//! from `nvct::runtime_config`, then print the new content (`--dry-run`) or a diff (`--diff`) of
//! each changed file, or write it atomically with a `.bak` backup. Raw clap values are resolved
//! into [`Resolved`] first; a flag that does nothing in the mode asked for is refused by name.
//!
//! Defaults are upstream 1.18's: containerd (config version 2 or 3) and CRI-O get a drop-in
//! (`--drop-in-config=""` edits the main file in place; a version 1 containerd config is always
//! edited in place), docker's entry runs the bare `nvidia-container-runtime`.
//!
//! The whole read → transform → write runs under an advisory lock on the config file's
//! directory ([`fsutil::lock_dir_of`]), so concurrent runs never lose each other's updates.
//!
//! TEST-ONLY: `NVCT_FAULT_AT=<step>` (a [`fsutil::Step`] name: temp-created, temp-written,
//! temp-synced, renamed, dir-synced) makes the process abort at that step of each file write
//! (used by the crash-safety test).

use std::io::Write as _;
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
    Configure(ConfigureArgs),
    /// Remove what `configure` added and restore the previous default runtime.
    Unconfigure(CommonArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Containerd,
    Docker,
    Crio,
}

impl Engine {
    fn lib(self) -> runtime_config::Engine {
        match self {
            Engine::Containerd => runtime_config::Engine::Containerd,
            Engine::Docker => runtime_config::Engine::Docker,
            Engine::Crio => runtime_config::Engine::Crio,
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
    runtime: Engine,
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

/// What is written where.
#[derive(Debug)]
enum Target {
    /// The engine's config, and the drop-in that registers the runtime if there is one.
    ConfigFile {
        config: PathBuf,
        drop_in: Option<PathBuf>,
        /// The engine binary whose dump is the base (`--config-source=command`).
        dump_with: Option<PathBuf>,
    },
    /// An OCI hooks.d file (None: printed to stdout) running the hook binary `hook`.
    OciHook { file: Option<PathBuf>, hook: String },
}

/// What becomes of the changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    Write,
    /// `--dry-run`: the new content of each changed file.
    Content,
    /// `--diff`: a unified diff of each changed file.
    Diff,
}

/// Typed, defaulted, checked options.
#[derive(Debug)]
struct Resolved {
    engine: Engine,
    target: Target,
    output: Output,
    opts: Options,
}

/// Refuse each flag in `given` that was typed: `why` says what the user asked for instead.
fn refuse_given(given: &[(&str, bool)], why: &str) -> Result<()> {
    match given.iter().find(|(_, typed)| *typed) {
        Some((flag, _)) => bail!("{flag}: {why}"),
        None => Ok(()),
    }
}

/// `--drop-in-config` as typed → the drop-in, if any.
fn resolve_drop_in(engine: Engine, typed: Option<Option<String>>) -> Result<Option<PathBuf>> {
    let default = engine.lib().default_drop_in();
    let path = match (typed, default) {
        (None, d) | (Some(None), d @ Some(_)) => return Ok(d.map(PathBuf::from)),
        (Some(Some(p)), _) if p.is_empty() => return Ok(None),
        (Some(_), None) => bail!(
            "--drop-in-config: docker has no drop-in files; daemon.json is edited in place \
             (leave the flag out)"
        ),
        (Some(Some(p)), Some(_)) => PathBuf::from(p),
    };
    if !path.is_absolute() {
        bail!(
            "--drop-in-config={}: not an absolute path (containerd imports the drop-in's \
             directory by its path); give an absolute path",
            path.display()
        );
    }
    Ok(Some(path))
}

/// `--nvidia-runtime-path` → what the entry runs: upstream's bare default becomes the absolute
/// path for containerd and CRI-O, which need one.
fn resolve_runtime_path(engine: Engine, typed: Option<String>) -> Result<String> {
    let path = match typed {
        Some(p) if p != runtime_config::DEFAULT_RUNTIME_EXECUTABLE => p,
        _ => return Ok(engine.lib().default_runtime_path().to_string()),
    };
    if path.is_empty() {
        bail!("--nvidia-runtime-path is empty; give the runtime binary's path");
    }
    if engine != Engine::Docker && !path.starts_with('/') {
        bail!(
            "--nvidia-runtime-path={path}: {} needs an absolute path to the runtime binary",
            engine.lib().name()
        );
    }
    Ok(path)
}

fn resolve_oci_hook(common: &CommonArgs, w: &WriteArgs, configure: bool) -> Result<Target> {
    refuse_given(
        &[
            ("--config", common.config.is_some()),
            ("--drop-in-config", common.drop_in_config.is_some()),
            (
                "--nvidia-runtime-name",
                common.nvidia_runtime_name.is_some(),
            ),
            ("--nvidia-runtime-path", w.nvidia_runtime_path.is_some()),
            ("--nvidia-set-as-default", w.set_as_default.is_some()),
            ("--cdi.enabled", w.cdi_enabled.is_some()),
            ("--config-source", w.config_source.is_some()),
            ("--executable-path", w.executable_path.is_some()),
        ],
        "not used with --config-mode=oci-hook, which writes only the hook file \
         (--oci-hook-path, the hook binary --nvidia-runtime-hook-path); leave it out",
    )?;
    let hook = w
        .nvidia_runtime_hook_path
        .clone()
        .unwrap_or_else(|| oci_hook::DEFAULT_HOOK_BINARY.to_string());
    if !hook.starts_with('/') {
        bail!("--nvidia-runtime-hook-path={hook}: not an absolute path; give the hook binary's absolute path");
    }
    if !configure && common.oci_hook_path.is_none() {
        bail!(
            "unconfigure --config-mode=oci-hook: name the hook file to remove with \
             --oci-hook-path (the packages install {})",
            oci_hook::DEFAULT_PATH
        );
    }
    Ok(Target::OciHook {
        file: common.oci_hook_path.clone(),
        hook,
    })
}

fn resolve_config_file(engine: Engine, common: &CommonArgs, w: &WriteArgs) -> Result<Target> {
    refuse_given(
        &[
            ("--oci-hook-path", common.oci_hook_path.is_some()),
            (
                "--nvidia-runtime-hook-path",
                w.nvidia_runtime_hook_path.is_some(),
            ),
        ],
        "only used with --config-mode=oci-hook; leave it out, or add --config-mode=oci-hook",
    )?;
    let command = w.config_source == Some(ConfigSource::Command);
    if command && engine == Engine::Docker {
        bail!("--config-source=command: docker has no config dump; leave it out (daemon.json is read)");
    }
    let dump_with = match (&w.executable_path, command, engine) {
        (Some(_), _, Engine::Docker) => bail!(
            "--executable-path: docker's config is always read from daemon.json; leave it out"
        ),
        (Some(_), false, _) => bail!(
            "--executable-path names the engine binary for --config-source=command; add that flag or leave it out"
        ),
        (Some(p), true, _) => Some(p.clone()),
        (None, true, Engine::Containerd) => Some(PathBuf::from("containerd")),
        (None, true, _) => Some(PathBuf::from("crio")),
        (None, false, _) => None,
    };
    Ok(Target::ConfigFile {
        config: common
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from(engine.lib().default_config())),
        drop_in: resolve_drop_in(engine, common.drop_in_config.clone())?,
        dump_with,
    })
}

/// `write` is None for unconfigure, which has none of those flags.
fn resolve(common: CommonArgs, write: Option<WriteArgs>) -> Result<Resolved> {
    let configure = write.is_some();
    let w = write.unwrap_or_default();
    let engine = common.runtime;
    let target = match common.config_mode {
        ConfigMode::OciHook => resolve_oci_hook(&common, &w, configure)?,
        ConfigMode::ConfigFile => resolve_config_file(engine, &common, &w)?,
    };
    let output = match (common.diff, common.dry_run) {
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
        target,
        output,
        opts: Options {
            runtime_name: common
                .nvidia_runtime_name
                .unwrap_or_else(|| runtime_config::DEFAULT_RUNTIME_NAME.to_string()),
            runtime_path,
            set_as_default: w.set_as_default.unwrap_or(false),
            cdi_enabled: w.cdi_enabled.unwrap_or(false),
            drop_in_host_path: None,
        },
    })
}

pub fn run(args: RuntimeArgs, v: Verbosity) -> Result<()> {
    let (configure, r) = match args.command {
        RuntimeCommand::Configure(a) => (true, resolve(a.common, Some(a.write))?),
        RuntimeCommand::Unconfigure(c) => (false, resolve(c, None)?),
    };
    if v.debug {
        eprintln!("nvidia-ctk: {}", r.describe(configure));
    }
    if configure && r.output == Output::Write && !v.quiet {
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
    let _lock = match (r.output, locked_file(&r.target)) {
        (Output::Write, Some(f)) => Some(fsutil::lock_dir_of(f)?),
        _ => None,
    };
    let outcome = plan(&r, configure)?;
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
            if let Err(e) = check_containerd(config, dump_with.as_deref(), v) {
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
fn check_containerd(config: &Path, dump_with: Option<&Path>, v: Verbosity) -> Result<()> {
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
    let version_of = |text: &str| {
        let doc = text.parse::<toml_edit::DocumentMut>().ok()?;
        containerd::version(&doc, config).ok()
    };
    let reads_it = |dump: &String| {
        version_of(&main) != Some(containerd::Version::V3)
            || version_of(dump) == Some(containerd::Version::V3)
    };
    if let Some(text) = dump.filter(reads_it) {
        let label = format!(
            "<{} --config {} config dump>",
            binary.display(),
            config.display()
        );
        containerd::check_default_runtime(Source {
            path: Path::new(&label),
            text: &text,
        })?;
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
    let merged = containerd::effective(&sources)?;
    let label = format!("{} with its imports", config.display());
    containerd::check_default_runtime(Source {
        path: Path::new(&label),
        text: &merged,
    })?;
    Ok(())
}

/// The file whose directory is locked around a write.
fn locked_file(t: &Target) -> Option<&Path> {
    match t {
        Target::ConfigFile { config, .. } => Some(config),
        Target::OciHook { file, .. } => file.as_deref(),
    }
}

/// Output of `binary config dump` (containerd) or `binary status config` (CRI-O).
fn engine_dump(engine: Engine, binary: &Path, config: &Path) -> Result<String> {
    let mut cmd = Command::new(binary);
    match engine {
        Engine::Containerd => {
            if config.exists() {
                cmd.arg("--config").arg(config);
            }
            cmd.args(["config", "dump"]);
        }
        Engine::Crio => {
            cmd.args(["status", "config"]);
        }
        Engine::Docker => unreachable!("refused in resolve"),
    };
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

/// containerd's effective config of `config` (text `text`) and the files it imports other than
/// `drop_in`, by containerd's merge rules, when the edit goes to that drop-in and there are such
/// files: containerd 1.x replaces a whole plugin table per import, so the drop-in's CRI table
/// must carry what the others' tables hold. `None` when the file alone is the base (no other
/// imports, no drop-in, or a version 1 file, which is edited in place).
fn containerd_with_imports(
    config: &Path,
    text: &str,
    drop_in: Option<&Path>,
) -> Result<Option<String>> {
    let Some(drop_in) = drop_in else {
        return Ok(None);
    };
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return Ok(None); // the transform reports the error, naming the file
    };
    if containerd::version(&doc, config).ok() == Some(containerd::Version::V1) {
        return Ok(None);
    }
    let ours = fsutil::real_path(drop_in).unwrap_or_else(|_| drop_in.to_path_buf());
    let mut files = vec![(config.to_path_buf(), text.to_string())];
    for p in crate::doctor::containerd_imports(config, text)? {
        let real = fsutil::real_path(&p).unwrap_or_else(|_| p.clone());
        if real == ours {
            continue;
        }
        if let Some(t) = fsutil::read_optional(&p)? {
            files.push((p, t));
        }
    }
    if files.len() == 1 {
        return Ok(None);
    }
    let sources: Vec<Source<'_>> = files
        .iter()
        .map(|(path, text)| Source { path, text })
        .collect();
    Ok(Some(containerd::effective(&sources)?))
}

/// Compute the new content of every file (pure transforms over what is read here).
fn plan(r: &Resolved, configure: bool) -> Result<Outcome> {
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
    let text = fsutil::read_optional(config)?.unwrap_or_default();
    let main = Source {
        path: config,
        text: &text,
    };
    let dump_label;
    let dump_text;
    let base = match dump_with {
        Some(binary) if configure => {
            dump_text = engine_dump(r.engine, binary, config)?;
            let args = match r.engine {
                Engine::Containerd => "config dump",
                _ => "status config",
            };
            dump_label = PathBuf::from(format!("<{} {args}>", binary.display()));
            Source {
                path: &dump_label,
                text: &dump_text,
            }
        }
        _ if configure && r.engine == Engine::Containerd => {
            match containerd_with_imports(config, &text, drop_in)? {
                Some(merged) => {
                    dump_text = merged;
                    dump_label = PathBuf::from(format!("<{} with its imports>", config.display()));
                    Source {
                        path: &dump_label,
                        text: &dump_text,
                    }
                }
                None => main,
            }
        }
        _ => main,
    };
    let previous = if configure {
        None
    } else {
        fsutil::read_optional(&fsutil::backup_path(&fsutil::real_path(config)?))?
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
    let wopts = WriteOptions { backup, fault };
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

impl Resolved {
    /// What `-d` says is being done, in words.
    fn describe(&self, configure: bool) -> String {
        let verb = if configure {
            "configuring"
        } else {
            "unconfiguring"
        };
        let engine = match self.engine {
            Engine::Containerd => "containerd",
            Engine::Docker => "docker",
            Engine::Crio => "CRI-O",
        };
        let files = match &self.target {
            Target::ConfigFile {
                config,
                drop_in,
                dump_with,
            } => {
                let base = match dump_with {
                    Some(bin) => format!("starting from `{} config dump`", bin.display()),
                    None => format!("starting from {}", config.display()),
                };
                match drop_in {
                    Some(d) => format!("{base}, the runtime in the drop-in {}", d.display()),
                    None => format!("{base}, edited in place"),
                }
            }
            Target::OciHook {
                file: Some(f),
                hook,
            } => {
                format!("an OCI hooks.d file {} running {hook}", f.display())
            }
            Target::OciHook { file: None, hook } => {
                format!("an OCI hooks.d file running {hook}, printed")
            }
        };
        let output = match self.output {
            Output::Write => "writing the files",
            Output::Content => "dry run: printing the new files",
            Output::Diff => "dry run: printing a diff",
        };
        let o = &self.opts;
        let runtime = if configure && !o.runtime_path.is_empty() {
            format!(
                "; runtime `{}` = {}{}{}",
                o.runtime_name,
                o.runtime_path,
                if o.set_as_default {
                    ", as the default"
                } else {
                    ""
                },
                if o.cdi_enabled { ", CDI enabled" } else { "" }
            )
        } else {
            format!("; runtime `{}`", o.runtime_name)
        };
        format!("{verb} {engine}: {files}{runtime}; {output}")
    }
}

/// A warning when the runtime path written does not exist here (a typo, or the toolkit not
/// installed yet): the engine would fail every container of that runtime.
fn missing_runtime_warning(r: &Resolved) -> Option<String> {
    let path = &r.opts.runtime_path;
    if !matches!(r.target, Target::ConfigFile { .. }) || path.is_empty() {
        return None;
    }
    let found = if path.contains('/') {
        Path::new(path).exists()
    } else {
        which::which(path).is_ok()
    };
    (!found).then(|| {
        format!(
            "the runtime {path} does not exist on this host (not installed yet, or a typo?): the engine fails every `{}` container until it does; install the toolkit or pass --nvidia-runtime-path",
            r.opts.runtime_name
        )
    })
}

/// Whether docker runs rootless for this user (rootlesskit): its daemon.json is the user's
/// (`~/.config/docker/daemon.json`), or we are not root.
fn rootless_docker(r: &Resolved) -> bool {
    let user_config = match &r.target {
        Target::ConfigFile { config, .. } => {
            std::env::var_os("HOME")
                .is_some_and(|home| home != "/" && home != "/root" && config.starts_with(home))
                || config.components().any(|c| c.as_os_str() == ".config")
        }
        Target::OciHook { .. } => false,
    };
    // Our effective uid, as /proc shows it (the owner of /proc/self).
    let euid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    user_config || euid.is_ok_and(|uid| uid != 0)
}

fn restart_hint(r: &Resolved) -> &'static str {
    match (&r.target, r.engine) {
        (Target::OciHook { .. }, _) => "the hook applies to new containers; no restart needed",
        (_, Engine::Containerd) => "restart containerd to apply: systemctl restart containerd",
        (_, Engine::Docker) if rootless_docker(r) => {
            "restart the rootless docker to apply: systemctl --user restart docker"
        }
        (_, Engine::Docker) => "restart docker to apply: systemctl restart docker",
        (_, Engine::Crio) => "restart CRI-O to apply: systemctl restart crio",
    }
}

/// Show or write every change whose content differs from the file on disk; how many did.
fn apply(r: &Resolved, changes: Vec<Change>, v: Verbosity) -> Result<usize> {
    let fault = fault_from_env()?;
    let drop_in = match &r.target {
        Target::ConfigFile { drop_in, .. } => drop_in.as_deref(),
        Target::OciHook { .. } => None,
    };
    let mut changed = 0;
    for c in changes {
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
        match r.output {
            Output::Diff => print!(
                "{}",
                unified_diff(&c.path, current.as_deref(), c.content.as_deref())
            ),
            Output::Content => show(&c, current.is_some(), v)?,
            Output::Write => {
                // A drop-in lives in a directory the engine reads wholesale (CRI-O reads every
                // file of crio.conf.d): no `.bak` there, it would be read as configuration too.
                // Drop-ins are ours; the main file keeps its backup.
                let backup = drop_in != Some(c.path.as_path());
                let fault = fault.as_ref().map(|f| f as &dyn Fn(Step, &Path));
                write(&c, backup, fault, v)?;
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(subcommand)]
        command: RuntimeCommand,
    }

    /// `configure ARGS` or `unconfigure ARGS`, parsed and resolved.
    fn resolve_args(args: &[&str]) -> Result<Resolved> {
        let t = T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))?;
        match t.command {
            RuntimeCommand::Configure(a) => resolve(a.common, Some(a.write)),
            RuntimeCommand::Unconfigure(c) => resolve(c, None),
        }
    }

    /// What a case resolves to.
    #[derive(Debug, PartialEq)]
    struct Want {
        config: &'static str,
        drop_in: Option<&'static str>,
        runtime_path: &'static str,
        set_as_default: bool,
        cdi: bool,
    }

    const fn want(config: &'static str, drop_in: Option<&'static str>) -> Want {
        Want {
            config,
            drop_in,
            runtime_path: "/usr/bin/nvidia-container-runtime",
            set_as_default: false,
            cdi: false,
        }
    }

    const CONTAINERD: &str = "/etc/containerd/config.toml";
    const CONTAINERD_DROP_IN: Option<&str> = Some("/etc/containerd/conf.d/99-nvidia.toml");
    const CRIO: &str = "/etc/crio/crio.conf";
    const CRIO_DROP_IN: Option<&str> = Some("/etc/crio/crio.conf.d/99-nvidia.toml");
    const DOCKER: &str = "/etc/docker/daemon.json";

    #[test]
    fn config_file_resolution() {
        let cases: &[(&str, &[&str], Want)] = &[
            (
                "docker defaults: bare runtime name",
                &["configure"],
                docker_default(),
            ),
            (
                "docker absolute path through the upstream alias",
                &[
                    "configure",
                    "--runtime-path=/usr/bin/nvidia-container-runtime",
                ],
                want(DOCKER, None),
            ),
            (
                "containerd defaults: upstream drop-in, absolute path",
                &["configure", "--runtime=containerd"],
                want(CONTAINERD, CONTAINERD_DROP_IN),
            ),
            (
                "containerd bare name typed: made absolute as upstream",
                &[
                    "configure",
                    "--runtime=containerd",
                    "--nvidia-runtime-path=nvidia-container-runtime",
                ],
                want(CONTAINERD, CONTAINERD_DROP_IN),
            ),
            (
                "drop-in without a value is the default",
                &[
                    "configure",
                    "--runtime=containerd",
                    "--drop-in-config",
                    "--set-as-default",
                ],
                Want {
                    set_as_default: true,
                    ..want(CONTAINERD, CONTAINERD_DROP_IN)
                },
            ),
            (
                "drop-in empty is in place",
                &["configure", "--runtime=containerd", "--drop-in-config="],
                want(CONTAINERD, None),
            ),
            (
                "drop-in path",
                &[
                    "configure",
                    "--runtime=crio",
                    "--drop-in-config=/x/crio.conf.d/50-nv.toml",
                ],
                want(CRIO, Some("/x/crio.conf.d/50-nv.toml")),
            ),
            (
                "crio defaults: upstream drop-in; enable-cdi alias",
                &["configure", "--runtime=crio", "--enable-cdi"],
                Want {
                    cdi: true,
                    ..want(CRIO, CRIO_DROP_IN)
                },
            ),
            (
                "cdi.enable alias, explicit false",
                &[
                    "configure",
                    "--runtime=crio",
                    "--cdi.enable",
                    "--nvidia-set-as-default=false",
                ],
                Want {
                    cdi: true,
                    ..want(CRIO, CRIO_DROP_IN)
                },
            ),
            (
                "cdi.enabled=false, set-as-default=true",
                &[
                    "configure",
                    "--cdi.enabled=false",
                    "--nvidia-set-as-default=true",
                    "--config=/d.json",
                ],
                Want {
                    config: "/d.json",
                    set_as_default: true,
                    ..docker_default()
                },
            ),
            (
                "config-mode alias config",
                &[
                    "configure",
                    "--runtime=containerd",
                    "--config-mode=config",
                    "--dry-run=false",
                ],
                want(CONTAINERD, CONTAINERD_DROP_IN),
            ),
            (
                "unconfigure defaults match configure's",
                &["unconfigure", "--runtime=containerd"],
                want(CONTAINERD, CONTAINERD_DROP_IN),
            ),
        ];
        for (name, args, want) in cases {
            let r = resolve_args(args).unwrap_or_else(|e| panic!("case {name}: {e:#}"));
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
            let w = (
                Path::new(want.config),
                want.drop_in.map(Path::new),
                want.runtime_path,
                want.set_as_default,
                want.cdi,
            );
            assert_eq!(got, w, "case {name}");
        }
    }

    fn docker_default() -> Want {
        Want {
            runtime_path: "nvidia-container-runtime",
            ..want(DOCKER, None)
        }
    }

    #[test]
    fn outputs_and_hook_mode() {
        let cases: &[(&str, &[&str], Output, Option<(Option<&str>, &str)>)] = &[
            ("write", &["configure"], Output::Write, None),
            (
                "dry run",
                &["configure", "--dry-run"],
                Output::Content,
                None,
            ),
            ("diff", &["configure", "--diff"], Output::Diff, None),
            (
                "dry run and diff",
                &["unconfigure", "--dry-run", "--diff"],
                Output::Diff,
                None,
            ),
            (
                "oci hook on stdout, any engine",
                &["configure", "--config-mode=oci-hook"],
                Output::Write,
                Some((None, "/usr/bin/nvidia-container-runtime-hook")),
            ),
            (
                "hook alias, file and binary",
                &[
                    "configure",
                    "--runtime=crio",
                    "--config-mode=hook",
                    "--oci-hook-path=/h/x.json",
                    "--nvidia-runtime-hook-path=/opt/h",
                ],
                Output::Write,
                Some((Some("/h/x.json"), "/opt/h")),
            ),
            (
                "unconfigure hook file",
                &[
                    "unconfigure",
                    "--config-mode=oci-hook",
                    "--oci-hook-path=/h/x.json",
                ],
                Output::Write,
                Some((Some("/h/x.json"), "/usr/bin/nvidia-container-runtime-hook")),
            ),
        ];
        for (name, args, output, hook) in cases {
            let r = resolve_args(args).unwrap_or_else(|e| panic!("case {name}: {e:#}"));
            assert_eq!(r.output, *output, "case {name}");
            let got = match &r.target {
                Target::OciHook { file, hook } => Some((file.as_deref(), hook.as_str())),
                Target::ConfigFile { .. } => None,
            };
            let want = hook.map(|(f, h)| (f.map(Path::new), h));
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn refusals_name_the_flag() {
        // (case, args, words the error must contain)
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "docker drop-in",
                &["configure", "--drop-in-config"],
                &["--drop-in-config", "docker has no drop-in"],
            ),
            (
                "docker drop-in path",
                &["configure", "--drop-in-config=/x.toml"],
                &["--drop-in-config", "docker"],
            ),
            (
                "relative drop-in",
                &[
                    "configure",
                    "--runtime=containerd",
                    "--drop-in-config=conf.d/99.toml",
                ],
                &["--drop-in-config=conf.d/99.toml", "absolute"],
            ),
            (
                "docker command source",
                &["configure", "--config-source=command"],
                &["--config-source=command", "docker"],
            ),
            (
                "executable without command source",
                &[
                    "configure",
                    "--runtime=containerd",
                    "--executable-path=/usr/bin/containerd",
                ],
                &["--executable-path", "--config-source=command"],
            ),
            (
                "executable for docker",
                &["configure", "--executable-path=/usr/bin/dockerd"],
                &["--executable-path", "docker"],
            ),
            (
                "relative runtime path for containerd",
                &[
                    "configure",
                    "--runtime=containerd",
                    "--runtime-path=bin/nvidia-container-runtime",
                ],
                &[
                    "--nvidia-runtime-path=bin/nvidia-container-runtime",
                    "absolute",
                ],
            ),
            (
                "empty runtime path",
                &["configure", "--nvidia-runtime-path="],
                &["--nvidia-runtime-path", "empty"],
            ),
            (
                "hook path in config-file mode",
                &["configure", "--oci-hook-path=/h.json"],
                &["--oci-hook-path", "--config-mode=oci-hook"],
            ),
            (
                "hook binary in config-file mode",
                &["configure", "--nvidia-runtime-hook-path=/usr/bin/h"],
                &["--nvidia-runtime-hook-path", "--config-mode=oci-hook"],
            ),
            (
                "config in hook mode",
                &[
                    "configure",
                    "--config-mode=oci-hook",
                    "--config=/etc/crio/crio.conf",
                ],
                &["--config", "--oci-hook-path"],
            ),
            (
                "set as default in hook mode",
                &["configure", "--config-mode=oci-hook", "--set-as-default"],
                &["--nvidia-set-as-default", "oci-hook"],
            ),
            (
                "relative hook binary",
                &[
                    "configure",
                    "--config-mode=oci-hook",
                    "--nvidia-runtime-hook-path=h",
                ],
                &["--nvidia-runtime-hook-path=h", "absolute"],
            ),
            (
                "unconfigure hook without file",
                &["unconfigure", "--config-mode=oci-hook"],
                &["--oci-hook-path"],
            ),
            (
                "unconfigure has no set-as-default",
                &["unconfigure", "--set-as-default"],
                &["--set-as-default"],
            ),
            (
                "unconfigure has no runtime path",
                &["unconfigure", "--nvidia-runtime-path=/x"],
                &["--nvidia-runtime-path"],
            ),
            (
                "unknown config mode",
                &["configure", "--config-mode=bogus"],
                &["--config-mode"],
            ),
        ];
        for (name, args, words) in cases {
            let e = match resolve_args(args) {
                Ok(r) => panic!("case {name}: accepted: {r:?}"),
                Err(e) => format!("{e:#}"),
            };
            for w in *words {
                assert!(e.contains(w), "case {name}: {w:?} not in: {e}");
            }
        }
    }
}
