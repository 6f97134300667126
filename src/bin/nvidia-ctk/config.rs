//! `nvidia-ctk config`: show or edit the toolkit's own config.toml.
//!
//! * `config default [--output F]`: the shipped default config, comments included.
//! * `config [--config-file F] [--set KEY[=VALUE]]... [--in-place | --output F]`: the config with
//!   each `--set` applied losslessly by `nvct_engines::config_edit` (unknown keys, bad values and configs
//!   the loader refuses are errors); printed to stdout, written to `--output`, or written back
//!   atomically (mode and owner kept) with `--in-place`. A missing config file starts from the
//!   default text. Raw clap values are resolved into [`Resolved`] first.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nvct_engines::config_edit::{self, Assignment};
use nvct_formats::config::{self, DEFAULT_TEXT};
use nvct_formats::fsutil::{self, WriteOptions, Written};

use crate::Verbosity;

#[derive(Args, Debug)]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: Option<ConfigCommand>,
    /// The toolkit config file (default: $NVIDIA_CTK_CONFIG_FILE_PATH, else
    /// ${XDG_CONFIG_HOME:-/etc}/nvidia-container-runtime/config.toml).
    #[arg(long, short = 'c', visible_alias = "config")]
    config_file: Option<PathBuf>,
    /// Set a key: KEY=VALUE, KEY a dotted path (nvidia-container-cli.root); a bare KEY sets a
    /// boolean to true; list values are separated by --set-list-separator.
    #[arg(long, value_name = "KEY[=VALUE]")]
    set: Vec<String>,
    /// Separator of list items in --set values (`,` always separates too, as upstream's).
    #[arg(long, default_value = ":")]
    set_list_separator: String,
    /// Write the result back to the config file instead of printing it.
    #[arg(long, short = 'i', conflicts_with = "output")]
    in_place: bool,
    /// Write the result to this file instead of stdout.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Print the default config (every key at its default, with comments); upstream's
    /// `generate-default` and `create-default` are the same command.
    #[command(visible_aliases = ["generate-default", "create-default"])]
    Default(DefaultArgs),
}

#[derive(Args, Debug)]
struct DefaultArgs {
    /// Write to this file instead of stdout.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
}

/// Where the result goes.
#[derive(Debug, PartialEq, Eq)]
enum Sink {
    Stdout,
    File(PathBuf),
}

/// What to do, typed and defaulted.
#[derive(Debug)]
enum Resolved {
    Default {
        sink: Sink,
    },
    Edit {
        config: PathBuf,
        sets: Vec<Assignment>,
        separator: String,
        sink: Sink,
    },
}

fn sink(output: Option<PathBuf>) -> Sink {
    output.map_or(Sink::Stdout, Sink::File)
}

fn resolve(raw: ConfigArgs) -> Result<Resolved> {
    let config = raw
        .config_file
        .unwrap_or_else(|| crate::toolkit_config(None));
    if let Some(ConfigCommand::Default(d)) = raw.command {
        if !raw.set.is_empty() || raw.in_place {
            bail!("config default takes no --set or --in-place; use `nvidia-ctk config --set ...`");
        }
        return Ok(Resolved::Default {
            sink: sink(d.output.or(raw.output)),
        });
    }
    if raw.set_list_separator.is_empty() {
        bail!("--set-list-separator must not be empty");
    }
    let sets = raw
        .set
        .iter()
        .map(|s| Assignment::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let sink = if raw.in_place {
        Sink::File(config.clone())
    } else {
        sink(raw.output)
    };
    Ok(Resolved::Edit {
        config,
        sets,
        separator: raw.set_list_separator,
        sink,
    })
}

pub fn run(raw: ConfigArgs, v: Verbosity) -> Result<()> {
    match resolve(raw)? {
        Resolved::Default { sink } => emit(&sink, DEFAULT_TEXT, v),
        Resolved::Edit {
            config,
            sets,
            separator,
            sink,
        } => {
            let text = fsutil::read_optional(&config)?;
            if !v.quiet {
                for w in config::unknown_keys(text.as_deref().unwrap_or_default(), &config) {
                    eprintln!("nvidia-ctk: warning: {w}");
                }
            }
            if text.is_none() && v.debug {
                eprintln!(
                    "nvidia-ctk: {}: not found; starting from the default config",
                    config.display()
                );
            }
            let out = config_edit::edit(
                text.as_deref().unwrap_or(DEFAULT_TEXT),
                &config,
                &sets,
                &separator,
            )?;
            emit(&sink, &out, v)
        }
    }
}

fn emit(sink: &Sink, text: &str, v: Verbosity) -> Result<()> {
    match sink {
        Sink::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .context("cannot write to stdout")
        }
        Sink::File(path) => {
            let written = fsutil::write_atomic(path, text.as_bytes(), &WriteOptions::default())?;
            report(path, written, v);
            Ok(())
        }
    }
}

fn report(path: &Path, written: Written, v: Verbosity) {
    if v.quiet {
        return;
    }
    let what = match written {
        Written::Unchanged => "unchanged",
        Written::Created => "created",
        Written::Replaced => "updated",
        Written::Through => "written (not a regular file: written through)",
    };
    eprintln!("nvidia-ctk: {}: {what}", path.display());
}
