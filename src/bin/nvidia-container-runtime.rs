//! `nvidia-container-runtime`: the runc-compatible shim. Every command but `create` is exec'd
//! unchanged on the low-level runtime (config `nvidia-container-runtime.runtimes`). On `create`
//! of a container that asks for a GPU, `<bundle>/config.json` gains our prestart hook (legacy
//! mode) or the CDI edits of the requested devices (`cdi`, `jit-cdi`; see `nvct_inject::shim`) in
//! one atomic write before the runtime is exec'd; on any error it is left untouched. Never
//! writes to stdout except through the runtime; logs go through [`nvct_formats::log::Logger`] (config `debug` file and runc's `--log`).
//! The work is `nvct_inject::shim::run`.

use nvct_formats::log::{Format, Logger, Steps};
use nvct_inject::shim;
use std::ffi::OsString;

fn main() {
    let mut steps = Steps::start();
    let raw: Vec<OsString> = std::env::args_os().skip(1).collect();
    let args: Vec<String> = raw
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let inv = shim::parse_args(&args);
    let format = Format::parse(inv.log_format.as_deref().unwrap_or("text"));
    let mut log = Logger::new(inv.log.as_deref(), format);
    steps.mark("args");
    // try_run only returns on failure (success ends in exec).
    // The installed shim is statically linked (it starts faster; the engine runs it for every
    // command of every container) and hands what needs NVML to the dynamic program.
    let front = cfg!(target_feature = "crt-static");
    let err = match shim::run(&raw, &args, &inv, front, &mut log, &mut steps) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    let text = nvct_formats::log::error_text(err.chain());
    log.error(&format!("nvidia-container-runtime: {text}"));
    eprintln!("nvidia-container-runtime: error: {text}");
    std::process::exit(1);
}
