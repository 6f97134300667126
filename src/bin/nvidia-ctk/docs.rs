//! `nvidia-ctk generate-docs --output DIR` (hidden): the man pages and shell completions of
//! `nvidia-ctk`, generated from its clap definitions (`Cli::command()`, so a subcommand added to
//! main.rs gets its page and its completions without a change here). scripts/package.sh runs it
//! from the freshly built binary and installs what it writes:
//!
//! ```text
//! DIR/man1/nvidia-ctk.1                 the command and its subcommands
//! DIR/man1/nvidia-ctk-<sub>[-<sub>].1   one page per visible subcommand, recursively
//! DIR/completions/nvidia-ctk.bash       bash
//! DIR/completions/_nvidia-ctk           zsh
//! DIR/completions/nvidia-ctk.fish       fish
//! ```
//!
//! Hidden subcommands (this one) get no page and no completion. Each file is written atomically.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};
use clap_complete::{Generator, Shell};
use nvct_formats::fsutil::{self, WriteOptions};

use crate::Verbosity;

#[derive(Args, Debug)]
pub struct DocsArgs {
    /// Directory to write man1/ and completions/ into (created when missing).
    #[arg(long)]
    output: PathBuf,
}

#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: Shell,
}

/// `nvidia-ctk completion SHELL`: the completion script on stdout (upstream's command).
pub fn completion(args: CompletionArgs) -> Result<()> {
    let mut cmd = without_hidden_subcommands(&crate::Cli::command());
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, BIN, &mut out);
    use std::io::Write;
    std::io::stdout()
        .lock()
        .write_all(&out)
        .context("writing the completion script to stdout")
}

/// The name users type, and the one the completions register for.
const BIN: &str = "nvidia-ctk";

pub fn run(args: DocsArgs, v: Verbosity) -> Result<()> {
    let mut cmd = crate::Cli::command()
        .bin_name(BIN)
        .disable_help_subcommand(true);
    // Sets each subcommand's display name (`nvidia-ctk-runtime-configure`): the page's title
    // and file name.
    cmd.build();
    let mut written = Vec::new();
    let man1 = args.output.join("man1");
    man_pages(&cmd, &man1, &mut written)?;
    let completions = args.output.join("completions");
    let visible = without_hidden_subcommands(&crate::Cli::command());
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut visible.clone(), BIN, &mut text);
        let path = completions.join(shell.file_name(BIN));
        write(&path, &text)?;
        written.push(path);
    }
    if !v.quiet {
        for p in &written {
            eprintln!("nvidia-ctk: wrote {}", p.display());
        }
    }
    Ok(())
}

/// `cmd` (the root, `nvidia-ctk`) without its hidden subcommands (clap_complete offers those too,
/// and clap has no way to remove a subcommand): a new command with the root's about text,
/// version, arguments and visible subcommands as they are.
fn without_hidden_subcommands(cmd: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new(BIN)
        .bin_name(BIN)
        .disable_help_subcommand(true)
        .disable_version_flag(true)
        .subcommand_required(cmd.is_subcommand_required_set())
        .args(
            cmd.get_arguments()
                .filter(|a| a.get_id() != "help")
                .cloned(),
        )
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if cmd.get_version().is_some() {
        out = out.version(env!("CARGO_PKG_VERSION"));
    }
    out
}

/// The page of `cmd`, then those of its visible subcommands, depth first.
fn man_pages(cmd: &clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<()> {
    let man = clap_mangen::Man::new(cmd.clone())
        .source(concat!(
            "nvidia-container-toolkit ",
            env!("CARGO_PKG_VERSION")
        ))
        .manual("NVIDIA container toolkit");
    let mut text = Vec::new();
    man.render(&mut text)
        .with_context(|| format!("rendering the man page of {}", cmd.get_name()))?;
    let path = dir.join(man.get_filename());
    write(&path, &text)?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, dir, written)?;
    }
    Ok(())
}

fn write(path: &Path, content: &[u8]) -> Result<()> {
    fsutil::write_atomic(path, content, &WriteOptions::default())
        .with_context(|| format!("writing {} (pass a writable --output)", path.display()))?;
    Ok(())
}
