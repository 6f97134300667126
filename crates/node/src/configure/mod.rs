//! `nvidia-ctk runtime configure|unconfigure`, the transaction: read the engine's files, run
//! the pure transform from `nvct_engines`, then print the new content (`--dry-run`) or a diff
//! (`--diff`) of each changed file, or write it atomically with a `.bak` backup. The binary
//! resolves its flags into a [`Resolved`] (`nvct::flags::runtime`) and calls [`run`].
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
//! directory that is a symlink, are refused before anything is written. After a write,
//! containerd must still load the result (`containerd config dump`), else every file is put
//! back.
//!
//! Modules: `rules` (pure: what is written where, the `-d` text, what counts as a change),
//! `plan` (read the files and compute the new content), `check` (containerd's merge rule, the
//! load check and the snapshot it restores), `write` (print or write each change), `imports`
//! (the files a containerd config imports).
//!
//! TEST-ONLY: `NVCT_FAULT_AT=<step>` (a [`fsutil::Step`] name: temp-created, temp-written,
//! temp-synced, renamed, dir-synced) makes the process abort at that step of each file write
//! (used by the crash-safety test).

mod check;
pub mod imports;
mod plan;
mod rules;
mod write;

use std::path::Path;

use anyhow::Result;
use nvct_engines::{containerd, oci_hook, Engine};
use nvct_formats::fsutil;

pub use rules::{
    dump_args, dump_label, dump_reflects_file, is_change, merges_imports, missing_runtime_warning,
    rootless_docker, transform, Documents, Output, Resolved, Target,
};

/// What a run prints to stderr besides errors: `-d` adds the details, `-q` keeps only warnings
/// and errors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verbosity {
    pub debug: bool,
    pub quiet: bool,
}

/// Run configure (or unconfigure, as `r` says); `refresh`: `configure --refresh-drop-in`
/// (containerd's drop-in re-derived with the settings it already has).
pub fn run(r: &Resolved, refresh: bool, v: Verbosity) -> Result<()> {
    let configure = r.configure;
    if v.debug {
        eprintln!("nvidia-ctk: {}", r.describe());
    }
    if configure && !refresh && r.output == Output::Write && !v.quiet {
        if let Some(warning) = runtime_warning(r) {
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
    let rule = check::containerd_rule(r, v);
    let outcome = plan::plan(r, refresh, rule)?;
    if !v.quiet {
        for note in &outcome.notes {
            eprintln!("nvidia-ctk: note: {note}");
        }
    }
    let snapshot = match (configure, r.engine, r.output) {
        (true, Engine::Containerd, Output::Write) => Some(check::Snapshot::take(&outcome.changes)?),
        _ => None,
    };
    let changed = write::apply(r, outcome.changes, v)?;
    if let (
        Some(snapshot),
        Target::ConfigFile {
            config, dump_with, ..
        },
    ) = (snapshot, &r.target)
    {
        if changed > 0 {
            let rule = rule.unwrap_or(containerd::MergeRule::WholePlugin);
            if let Err(e) = check::check_containerd(config, dump_with.as_deref(), rule, v) {
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
            (_, Output::Write) => eprintln!("nvidia-ctk: {}", restart_hint_here(r)),
            (_, _) => eprintln!("nvidia-ctk: dry run: nothing was written"),
        }
    }
    Ok(())
}

/// A warning when the runtime path written does not exist here (a typo, or the toolkit not
/// installed yet): the engine would fail every container of that runtime.
fn runtime_warning(r: &Resolved) -> Option<String> {
    let path = r.runtime_to_check()?;
    let found = if path.contains('/') {
        Path::new(path).exists()
    } else {
        which::which(path).is_ok()
    };
    (!found).then(|| missing_runtime_warning(path, &r.opts.runtime_name))
}

/// What to do next, with docker's rootless mode judged from this process.
fn restart_hint_here(r: &Resolved) -> &'static str {
    let rootless = match &r.target {
        Target::ConfigFile { config, .. } if r.engine == Engine::Docker => {
            // Our effective uid, as /proc shows it (the owner of /proc/self).
            let euid = std::fs::metadata("/proc/self")
                .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
                .ok();
            rootless_docker(config, std::env::var_os("HOME").as_deref(), euid)
        }
        _ => false,
    };
    r.restart_hint(rootless)
}
