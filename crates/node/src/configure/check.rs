//! containerd around a write: the merge rule of the release that reads the config
//! ([`containerd_rule`]), the check that containerd still loads the result
//! ([`check_containerd`]), and the [`Snapshot`] of the files put back when it does not.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Result};
use nvct_engines::{containerd, Change, Engine, Source};
use nvct_formats::fsutil::{self, WriteOptions};

use super::{imports, rules, Resolved, Target, Verbosity};

/// The files a write may touch (each changed file and its `.bak`), as they were before it.
pub(super) struct Snapshot(Vec<(PathBuf, Option<String>)>);

impl Snapshot {
    pub(super) fn take(changes: &[Change]) -> Result<Snapshot> {
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
    pub(super) fn restore(&self) -> Result<()> {
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
pub(super) fn check_containerd(
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
    if let Some(text) = dump.filter(|d| rules::dump_reflects_file(config, &main, d)) {
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
    for p in imports::containerd_imports(config, &main)? {
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

/// The merge rule of the containerd that reads the config (`--executable-path` with
/// `--config-source=command`, else `containerd` from `PATH`), for a containerd configure or
/// refresh with a drop-in; `None` for every other run. An unknown release takes the rule before
/// 2.0 and says so in one line.
pub(super) fn containerd_rule(r: &Resolved, v: Verbosity) -> Option<containerd::MergeRule> {
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
