//! `nvidia-ctk`: the toolkit's command line. This file only parses the global flags and hands
//! each subcommand to its own module (one file per subcommand).

mod cdi;
mod cli;
mod config;
mod docs;
mod doctor;
mod hook;
mod info;
mod runtime;
mod system;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
pub use cli::{toolkit_config, Verbosity};
use cli::{Cli, Command, GLOBAL_CONFIG};

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
