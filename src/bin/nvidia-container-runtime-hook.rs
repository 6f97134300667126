//! `nvidia-container-runtime-hook`: the OCI prestart hook. Reads the hook state on stdin,
//! works out what the container asked for, discovers the driver, plans, and applies the plan
//! inside the container. `poststart` and `poststop` do nothing. Command line as upstream:
//! `[-config FILE] [-debug] [-version] prestart|poststart|poststop`.

use nvct::flags::hook::{parse_args, USAGE};
use nvct_formats::syslog;
use nvct_inject::hook;
use std::process::ExitCode;

const NAME: &str = "nvidia-container-runtime-hook";

fn main() -> ExitCode {
    // Hooks are hostile-input programs: never let the container's loader variables reach
    // anything we start.
    nvct_inject::process::start_hook();
    // The statically linked build is the installed front: it runs `prestart` itself when the
    // request needs nothing of NVML (a static binary cannot load the driver's library), and
    // execs the dynamic program (nvct_inject::process) for everything else.
    let front = cfg!(target_feature = "crt-static");
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) if front && (a.help || a.version || a.command.as_deref() != Some("prestart")) => {
            nvct_inject::process::exec_worker(NAME)
        }
        Err(_) if front => nvct_inject::process::exec_worker(NAME),
        Ok(a) => a,
        Err(e) => {
            eprintln!("nvidia-container-runtime-hook: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if args.version {
        println!(
            "nvidia-container-runtime-hook version {}",
            env!("CARGO_PKG_VERSION")
        );
        return ExitCode::SUCCESS;
    }
    match args.command.as_deref() {
        Some("prestart") => match hook::run(args.config, args.debug, front) {
            Ok(hook::Outcome::Done) => ExitCode::SUCCESS,
            Ok(hook::Outcome::Handoff(state)) => {
                nvct_inject::process::exec_worker_with_stdin(NAME, &state)
            }
            Err(e) => {
                let text = nvct_formats::log::error_text(e.chain());
                eprintln!("nvidia-container-runtime-hook: error: {text}");
                // crun throws a hook's stderr away: the system log keeps the reason.
                syslog::send(
                    syslog::Severity::Err,
                    "nvidia-container-runtime-hook",
                    &format!("error: {text}"),
                );
                ExitCode::FAILURE
            }
        },
        Some("poststart") | Some("poststop") => ExitCode::SUCCESS,
        Some(other) => {
            eprintln!("nvidia-container-runtime-hook: unknown command {other:?}\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
