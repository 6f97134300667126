//! `nvidia-container-cli`: libnvidia-container's command line (`info`, `list`, `configure`)
//! on the toolkit's own discovery, Plan and container primitives, for the engines that exec it
//! (LXC/Incus/LXD, enroot, Apptainer/SingularityCE, Charliecloud). Flags: `nvct::flags::
//! container_cli`; the work: `nvct_inject::container_cli`. The toolkit config (default path,
//! or `NVIDIA_CTK_CONFIG_FILE_PATH`) gives what the flags do not (`root`, `ldconfig`, ours
//! `dev-root` and `proc-root`). Errors: `nvidia-container-cli: <phase> error: ...`, exit 1.

use nvct::flags::container_cli::{parse, Parsed};
use nvct_formats::config::{self, Config};
use nvct_formats::log::Logger;
use nvct_inject::container_cli::{self as cli, CliError, Phase};
use std::io::Write;
use std::process::ExitCode;

const NAME: &str = "nvidia-container-cli";

fn main() -> ExitCode {
    // Run by engines as root in the container's namespaces, with the container's environment.
    nvct_inject::process::start_hook();
    let words: Vec<String> = std::env::args().skip(1).collect();
    let result = match parse(&words) {
        Parsed::Print(text) => return print(&text),
        Parsed::Version => {
            let v = env!("CARGO_PKG_VERSION");
            return print(&format!(
                "cli-version: {v}\nlib-version: {v} (nvct, no libnvidia-container)\n"
            ));
        }
        Parsed::Fail(text) => {
            let _ = std::io::stderr().write_all(text.as_bytes());
            return ExitCode::FAILURE;
        }
        Parsed::Info(g, csv) => load().and_then(|c| cli::info(&g, &c, csv)),
        Parsed::List(g, l) => load().and_then(|c| cli::list(&g, &c, &l)),
        Parsed::Configure(g, what) => {
            let done = load().and_then(|c| cli::configure(&g, &c, &what));
            // The debug file (`--debug`; LXC's hook passes one) keeps the outcome: an engine
            // may not show the CLI's stderr (LXC logs only the hook's first ten reads).
            if let Some(file) = &g.debug {
                let mut log = Logger::for_hook(file, false);
                match &done {
                    Ok(Some(d)) => {
                        log.info(&format!(
                            "configured {}: {}",
                            what.rootfs.display(),
                            d.summary
                        ));
                        d.notes.iter().for_each(|n| log.debug(n));
                    }
                    Ok(None) => log.info("void: nothing to configure"),
                    Err(e) => log.error(&format!("{NAME}: {e}")),
                }
            }
            done.map(|_| String::new())
        }
    };
    match result {
        Ok(text) => print(&text),
        Err(e) => {
            // One write: callers log what they read in chunks (LXC's hook runner, per read).
            let _ = std::io::stderr().write_all(format!("{NAME}: {e}\n").as_bytes());
            ExitCode::FAILURE
        }
    }
}

fn print(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// The toolkit config (its defaults when the file does not exist).
fn load() -> Result<Config, CliError> {
    let path = config::default_path(|k| std::env::var(k).ok());
    Config::load_checked(&path)
        .map(|(c, _)| c)
        .map_err(|e| CliError::new(Phase::Initialization, e.to_string()))
}
