//! `nvidia-ctk`: the toolkit's command line. This file only parses the global flags and hands
//! each subcommand to its own module (one file per subcommand).

mod cdi;
mod config;
mod docs;
mod hook;
mod runtime;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "nvidia-ctk",
    version,
    disable_version_flag = true,
    about = "NVIDIA container toolkit CLI"
)]
struct Cli {
    /// Print the version (`-v`, as upstream spells it).
    #[arg(short = 'v', long = "version", action = clap::ArgAction::Version)]
    version: Option<bool>,
    /// Print what is being done, to stderr.
    #[arg(long, short = 'd', global = true)]
    debug: bool,
    /// Print only errors.
    #[arg(long, short = 'q', global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Configure container engines (containerd, docker, CRI-O) for the NVIDIA runtime.
    Runtime(runtime::RuntimeArgs),
    /// Show or edit the toolkit's config.toml (`config default`, `config --set KEY=VALUE`).
    Config(config::ConfigArgs),
    /// Hooks referenced from CDI specs (the same as `nvidia-cdi-hook`).
    Hook(hook::HookArgs),
    /// Generate, list and validate CDI specs.
    Cdi(cdi::CdiArgs),
    /// Write the man pages and shell completions (for packages).
    #[command(hide = true)]
    GenerateDocs(docs::DocsArgs),
}

/// How chatty the binary is; shared by every subcommand.
#[derive(Debug, Clone, Copy)]
pub struct Verbosity {
    pub debug: bool,
    pub quiet: bool,
}

fn main() -> ExitCode {
    // The statically linked build is the installed front (nvct::process::exec_worker).
    if cfg!(target_feature = "crt-static") {
        nvct::process::exec_worker("nvidia-ctk");
    }
    let cli = Cli::parse();
    let v = Verbosity {
        debug: cli.debug,
        quiet: cli.quiet,
    };
    let result = match cli.command {
        Command::Runtime(args) => runtime::run(args, v),
        Command::Config(args) => config::run(args, v),
        Command::Hook(args) => {
            nvct::process::start_hook();
            hook::run(args, "nvidia-ctk hook")
        }
        Command::Cdi(args) => cdi::run(args, v),
        Command::GenerateDocs(args) => docs::run(args, v),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nvidia-ctk: error: {}", nvct::log::error_text(e.chain()));
            ExitCode::FAILURE
        }
    }
}
