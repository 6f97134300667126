//! Each change, shown or written ([`apply`]): the new content (`--dry-run`), a unified diff
//! (`--diff`), or an atomic write with a `.bak` of the main file; `NVCT_FAULT_AT` aborts a
//! write at a step (test-only, see the module doc of `configure`).

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use nvct_engines::Change;
use nvct_formats::fsutil::{self, Step, WriteOptions, Written};

use super::{rules, Output, Resolved, Verbosity};

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

/// The `NVCT_FAULT_AT` abort hook (see the module doc of `configure`), if set.
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

/// Show or write every change whose content differs from the file on disk; how many did.
pub(super) fn apply(r: &Resolved, changes: Vec<Change>, v: Verbosity) -> Result<usize> {
    let fault = fault_from_env()?;
    let mut changed = 0;
    for c in changes {
        let current = fsutil::read_optional(&c.path)?;
        if !rules::is_change(current.as_deref(), c.content.as_deref()) {
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
