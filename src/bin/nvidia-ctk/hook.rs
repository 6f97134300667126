//! `nvidia-ctk hook <name>` and `nvidia-cdi-hook <name>` (this file is compiled into both
//! binaries): the hooks CDI specs reference. The arguments are read by the library's one hook
//! protocol (`nvct_container::edits::parse`, the reader of what `cdi generate` writes) and
//! the work is `nvct_inject::cdi_hooks::run`. An unknown hook name only warns and exits 0, as
//! upstream does, so that a spec written by a newer toolkit does not break containers.

use anyhow::{Context, Result};
use clap::Args;
use nvct_container::edits::{self, Invocation};
use nvct_formats::log::{Logger, Steps};

#[derive(Args, Debug)]
#[command(after_help = edits::USAGE)]
pub struct HookArgs {
    /// The hook and its flags (listed below).
    #[arg(
        value_name = "HOOK [FLAGS]",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    args: Vec<String>,
}

/// Runs the hook `args` name; `program` is the binary's name in messages. With `debug` (the
/// global `--debug`), the step timings go to stderr as a debug line.
pub fn run(args: HookArgs, program: &'static str, debug: bool) -> Result<()> {
    let mut steps = Steps::start();
    // Upstream's global flags, accepted anywhere and ignored.
    let raw: Vec<String> = args
        .args
        .into_iter()
        .filter(|a| !matches!(a.as_str(), "-d" | "--debug" | "-q" | "--quiet"))
        .collect();
    let parsed = match edits::parse(&raw) {
        Ok(p) => p,
        // A flag's value that is not what the hook can make: an error of this container.
        Err(e @ edits::EditsError::BadLink(_)) => return Err(logged(program, e.into())),
        Err(e) => {
            // As clap's usage errors: exit 2.
            eprintln!("{program}: error: {e}");
            std::process::exit(2);
        }
    };
    let e = match parsed.invocation {
        Invocation::Help => {
            print!("{}", edits::USAGE);
            return Ok(());
        }
        Invocation::Unknown(name) => {
            eprintln!("{program}: warning: unknown hook {name:?}; doing nothing");
            return Ok(());
        }
        Invocation::KeepDeviceRules => {
            return keep_device_rules(parsed.container_spec, program, debug)
        }
        Invocation::Edits(e) => e,
    };
    let state = parsed
        .container_spec
        .filter(|p| !p.as_os_str().is_empty() && *p != std::path::Path::new("-"));
    let result = match state {
        Some(path) => std::fs::File::open(&path)
            .with_context(|| format!("--container-spec {}", path.display()))
            .and_then(|f| {
                nvct_inject::cdi_hooks::run(&e, f, &mut steps).map_err(anyhow::Error::from)
            }),
        None => nvct_inject::cdi_hooks::run(&e, std::io::stdin().lock(), &mut steps)
            .map_err(anyhow::Error::from),
    };
    if debug {
        Logger::stderr_only(program).debug(&steps.line());
    }
    match result {
        Ok(notes) => {
            if let Some(note) = notes.app_profile {
                eprintln!("warning: {note}");
            }
            Ok(())
        }
        Err(e) => Err(logged(program, e)),
    }
}

/// `keep-device-rules`: never fails the container; what systemd did goes to stderr with
/// `--debug`, why it did not to the system log (crun throws a hook's stderr away) and stderr.
fn keep_device_rules(
    container_spec: Option<std::path::PathBuf>,
    program: &'static str,
    debug: bool,
) -> Result<()> {
    let state =
        container_spec.filter(|p| !p.as_os_str().is_empty() && *p != std::path::Path::new("-"));
    let result = match state {
        Some(path) => std::fs::File::open(&path)
            .with_context(|| format!("--container-spec {}", path.display()))
            .and_then(|f| {
                nvct_inject::cdi_hooks::keep_device_rules(f).map_err(anyhow::Error::from)
            }),
        None => nvct_inject::cdi_hooks::keep_device_rules(std::io::stdin().lock())
            .map_err(anyhow::Error::from),
    };
    let tag = program.split(' ').next().unwrap_or(program);
    match result {
        Ok(Some(Ok(line))) if debug => Logger::stderr_only(program).debug(&line),
        Ok(Some(Err(why))) => {
            nvct_formats::syslog::send(nvct_formats::syslog::Severity::Warning, tag, &why);
            eprintln!("{program}: warning: {why}");
        }
        Err(e) => {
            let text = nvct_formats::log::error_text(e.chain());
            let why = format!("keep-device-rules: {text}; the container starts without it");
            nvct_formats::syslog::send(nvct_formats::syslog::Severity::Warning, tag, &why);
            eprintln!("{program}: warning: {why}");
        }
        _ => {}
    }
    Ok(())
}

/// `e`, copied to the system log first: crun throws a hook's stderr away.
fn logged(program: &str, e: anyhow::Error) -> anyhow::Error {
    let tag = program.split(' ').next().unwrap_or(program);
    let text = nvct_formats::log::error_text(e.chain());
    nvct_formats::syslog::send(
        nvct_formats::syslog::Severity::Err,
        tag,
        &format!("error: {text}"),
    );
    e
}
