//! Read the engine's files and compute the new content of every file ([`plan`]): the engine's
//! dump with `--config-source=command`, containerd's drop-in derived from the config merged with
//! the files it imports, and `--refresh-drop-in`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use nvct_engines::{containerd, oci_hook, Change, Engine, Outcome, Source};
use nvct_formats::fsutil;

use super::{imports, rules, Documents, Resolved, Target};

/// Output of `binary config dump` (containerd) or `binary status config` (CRI-O).
fn engine_dump(engine: Engine, binary: &Path, config: &Path) -> Result<String> {
    let args = rules::dump_args(engine, config, config.exists()).expect("refused in resolve");
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
    for p in imports::containerd_imports(config, text)? {
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
pub(super) fn plan(
    r: &Resolved,
    refresh: bool,
    rule: Option<containerd::MergeRule>,
) -> Result<Outcome> {
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
        if rules::merges_imports(config, &text, Some(drop_in)) {
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
            dump_label = rules::dump_label(r.engine, binary);
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
    Ok(rules::transform(r, docs)?)
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
            label = rules::dump_label(r.engine, binary);
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
