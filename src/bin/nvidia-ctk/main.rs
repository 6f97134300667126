//! `nvidia-ctk`: the toolkit's command line. This file only parses the global flags and hands
//! each subcommand to its own module (one file per subcommand).

mod cdi;
mod config;
mod docs;
mod doctor;
mod hook;
mod info;
mod runtime;
mod system;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    /// Print what is being done, to stderr (also $NVIDIA_CTK_DEBUG, as upstream).
    #[arg(long, short = 'd', global = true, env = "NVIDIA_CTK_DEBUG", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    debug: bool,
    /// The toolkit config file every subcommand reads (before the subcommand, as upstream:
    /// `nvidia-ctk --config FILE cdi generate`; also $NVIDIA_CTK_CONFIG). Default:
    /// $NVIDIA_CTK_CONFIG_FILE_PATH, else /etc/nvidia-container-runtime/config.toml.
    #[arg(long = "config", env = "NVIDIA_CTK_CONFIG", value_name = "FILE")]
    config: Option<std::path::PathBuf>,
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
    /// Set up the host's NVIDIA device nodes and /dev/char links.
    System(system::SystemArgs),
    /// Show the driver, the GPUs and what a container gets.
    Info(info::InfoArgs),
    /// Check this GPU node: one line per check (ok / warn / fail) with the fix; exit 0, 1
    /// (warnings) or 2 (a failure).
    Doctor(doctor::DoctorArgs),
    /// Print the shell completion script for bash, zsh or fish
    /// (`source <(nvidia-ctk completion bash)`).
    Completion(docs::CompletionArgs),
    /// Write the man pages and shell completions (for packages).
    #[command(hide = true)]
    GenerateDocs(docs::DocsArgs),
}

/// The global `--config` (or `$NVIDIA_CTK_CONFIG`), set once by `main`.
static GLOBAL_CONFIG: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// The toolkit config file a subcommand reads: its own flag, else the global `--config`, else
/// `$NVIDIA_CTK_CONFIG_FILE_PATH` or the default path ([`nvct_formats::config::default_path`]).
pub fn toolkit_config(own: Option<std::path::PathBuf>) -> std::path::PathBuf {
    own.or_else(|| GLOBAL_CONFIG.get().cloned())
        .unwrap_or_else(|| nvct_formats::config::default_path(|k| std::env::var(k).ok()))
}

/// How chatty the binary is; shared by every subcommand.
#[derive(Debug, Clone, Copy)]
pub struct Verbosity {
    pub debug: bool,
    pub quiet: bool,
}

fn main() -> ExitCode {
    // The statically linked build is the installed front (nvct_inject::process::exec_worker).
    if cfg!(target_feature = "crt-static") {
        nvct_inject::process::exec_worker("nvidia-ctk");
    }
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let v = Verbosity {
        debug: cli.debug,
        quiet: cli.quiet,
    };
    if let Some(path) = cli.config.filter(|p| !p.as_os_str().is_empty()) {
        let _ = GLOBAL_CONFIG.set(path);
    }
    let result = match cli.command {
        Command::Runtime(args) => runtime::run(args, v),
        Command::Config(args) => config::run(args, v),
        Command::Hook(args) => {
            nvct_inject::process::start_hook();
            hook::run(args, "nvidia-ctk hook", v.debug)
        }
        Command::Cdi(args) => cdi::run(args, v),
        Command::System(args) => system::run(args, v),
        Command::Info(args) => info::run(args, v),
        Command::Doctor(args) => match doctor::run(args, v, &matches) {
            Ok(code) => return code,
            // 1 means "warnings" for doctor: its own errors are failures.
            Err(e) => {
                eprintln!(
                    "nvidia-ctk: error: {}",
                    nvct_formats::log::error_text(e.chain())
                );
                return ExitCode::from(2);
            }
        },
        Command::Completion(args) => docs::completion(args),
        Command::GenerateDocs(args) => docs::run(args, v),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "nvidia-ctk: error: {}",
                nvct_formats::log::error_text(e.chain())
            );
            ExitCode::FAILURE
        }
    }
}
