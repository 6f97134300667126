//! `nvidia-ctk`'s global flags and its subcommands (clap), and what every subcommand shares:
//! the toolkit config it reads ([`toolkit_config`]) and how chatty it is ([`Verbosity`]).

use crate::{cdi, config, docs, doctor, hook, info, runtime, system};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "nvidia-ctk",
    version,
    disable_version_flag = true,
    about = "NVIDIA container toolkit CLI"
)]
pub struct Cli {
    /// Print the version (`-v`, as upstream spells it).
    #[arg(short = 'v', long = "version", action = clap::ArgAction::Version)]
    pub version: Option<bool>,
    /// Print what is being done, to stderr (also $NVIDIA_CTK_DEBUG, as upstream).
    #[arg(long, short = 'd', global = true, env = "NVIDIA_CTK_DEBUG", value_parser = clap::builder::BoolishValueParser::new(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    pub debug: bool,
    /// The toolkit config file every subcommand reads (before the subcommand, as upstream:
    /// `nvidia-ctk --config FILE cdi generate`; also $NVIDIA_CTK_CONFIG). Default:
    /// $NVIDIA_CTK_CONFIG_FILE_PATH, else /etc/nvidia-container-runtime/config.toml.
    #[arg(long = "config", env = "NVIDIA_CTK_CONFIG", value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Print only errors.
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
pub static GLOBAL_CONFIG: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

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
