//! `nvidia-cdi-hook <name>`: the hooks CDI specs reference (`create-symlinks`,
//! `update-ldcache`, `disable-device-node-modification`, `enable-cuda-compat`). The same code
//! as `nvidia-ctk hook <name>` (src/bin/nvidia-ctk/hook.rs, compiled into both); the work is in
//! `nvct_inject::cdi_hooks`.

#[path = "nvidia-ctk/hook.rs"]
mod hook;

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "nvidia-cdi-hook",
    version,
    about = "Hooks referenced from NVIDIA CDI specs"
)]
struct Cli {
    /// Print each step's time (microseconds) to stderr.
    #[arg(long, short = 'd', global = true)]
    debug: bool,
    /// Accepted for compatibility (upstream's global flags).
    #[arg(long, short = 'q', global = true)]
    quiet: bool,
    #[command(flatten)]
    hook: hook::HookArgs,
}

fn main() -> ExitCode {
    nvct_inject::process::start_hook();
    let cli = Cli::parse();
    match hook::run(cli.hook, "nvidia-cdi-hook", cli.debug) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "nvidia-cdi-hook: error: {}",
                nvct_formats::log::error_text(e.chain())
            );
            ExitCode::FAILURE
        }
    }
}
