//! `nvidia-ctk-installer`: what the GPU Operator's toolkit container runs on every GPU node.
//! Flags and environment variables as upstream's (docs/COMPAT.md), resolved by
//! `nvct::flags::installer`; the work is in `nvct_node::installer`. Installs, restarts or signals the engine, then waits for SIGTERM (or
//! SIGINT, SIGHUP, SIGQUIT) and undoes everything; `--no-daemon` exits after installing.
//! The image also has it as `nvidia-toolkit` (the GPU Operator's entrypoint runs that name):
//! nothing here depends on the name it is run under.

use clap::Parser;
use nvct::flags::installer as installer_flags;
use nvct::flags::installer_cli::{flag_variables, resolve, Cli};
use nvct_node::{daemon, installer};
use std::process::ExitCode;

/// Copies an alias into its variable. Runs first in `main`, before any thread exists.
fn apply_env_aliases() {
    for (var, value) in installer_flags::alias_assignments(|k| std::env::var_os(k)) {
        std::env::set_var(var, value);
    }
}

fn log(msg: &str) {
    eprintln!("nvidia-ctk-installer: {msg}");
}

fn main() -> ExitCode {
    let signals = match installer::TermSignals::block() {
        Ok(s) => s,
        Err(e) => {
            log(&format!("error: cannot block the termination signals: {e}"));
            return ExitCode::FAILURE;
        }
    };
    apply_env_aliases();
    let cli = Cli::parse();
    let opts = match resolve(&cli) {
        Ok(o) => o,
        Err(e) => {
            log(&format!("error: {e}"));
            return ExitCode::from(2);
        }
    };
    let names = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
    for (var, why) in installer_flags::unread_variables(names, &flag_variables(), opts.engine) {
        log(&format!(
            "warning: {var} is set but not acted on here: {why} (docs/COMPAT.md)"
        ));
    }
    for note in &opts.notes {
        log(&format!("warning: {note}"));
    }
    let _pid = match daemon::lock_pid_file(&cli.pid_file) {
        Ok(f) => f,
        Err(e) => {
            log(&format!("error: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let result = daemon::run(&opts, cli.no_daemon, &signals, &log);
    if !cli.no_daemon {
        let _ = std::fs::remove_file(&cli.pid_file);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log(&format!("error: {e}"));
            ExitCode::FAILURE
        }
    }
}
