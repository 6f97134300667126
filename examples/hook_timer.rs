//! `hook_timer`: stands in for a hook binary in `scripts/bench.sh --breakdown` and times the
//! real one, so the breakdown's wall time of a hook process is that process's own (fork,
//! exec, start-up, its work, exit), not a shell's.
//!
//! Installed as a copy named like the hook it times (`bin/nvidia-cdi-hook`), with the real
//! binary next to it as `<name>.real` and a settings file `<name>.timer` of `key=value` lines:
//! `log=<file>` (required), `flags=<one argument put before the hook's own>` (optional, e.g.
//! `--debug`), `pid1to0=1` (optional: the OCI state's `"pid":1,` becomes `"pid":0,`, which
//! sends this project's hook down the path of runc's direct child, as the timer is its parent
//! instead of the container's init), `arg0=<name>` (optional: the real binary's argv[0], for a
//! multi-call binary such as busybox), `name=<name>` (optional: the name in the log). It reads the OCI state from stdin, runs the real hook with
//! it, appends `hook-wall <name> <µs>` to the log (the name: `name=`, else the first argument, or
//! the second after `hook`), and exits with the hook's status. Bench-only: never installed.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

fn main() -> ExitCode {
    match run() {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("hook_timer: {e}");
            ExitCode::from(127)
        }
    }
}

fn run() -> Result<u8, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find itself: {e}"))?;
    let real = format!("{}.real", me.display());
    let settings_path = format!("{}.timer", me.display());
    let settings = std::fs::read_to_string(&settings_path)
        .map_err(|e| format!("cannot read {settings_path}: {e}"))?;
    let get = |key: &str| {
        settings
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
    };
    let log = get("log").ok_or_else(|| format!("{settings_path}: no log= line"))?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = get("name").unwrap_or_else(|| match args.first().map(String::as_str) {
        Some("hook") => args.get(1).cloned().unwrap_or_default(),
        Some(a) => a.to_owned(),
        None => String::new(),
    });
    let mut state = Vec::new();
    std::io::stdin()
        .read_to_end(&mut state)
        .map_err(|e| format!("cannot read the state: {e}"))?;
    if get("pid1to0").as_deref() == Some("1") {
        let text = String::from_utf8_lossy(&state).replacen("\"pid\":1,", "\"pid\":0,", 1);
        state = text.into_bytes();
    }
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| format!("cannot open {log}: {e}"))?;
    let mut cmd = Command::new(&real);
    if let Some(arg0) = get("arg0") {
        cmd.arg0(arg0);
    }
    if let Some(flag) = get("flags").filter(|f| !f.is_empty()) {
        cmd.arg(flag);
    }
    cmd.args(&args).stdin(Stdio::piped()).stderr(stderr);
    let t0 = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {real}: {e}"))?;
    // The state is a few hundred bytes: it fits the pipe, so writing it before the wait
    // cannot block on a hook that exits without reading.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&state);
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for {real}: {e}"))?;
    let us = t0.elapsed().as_micros();
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .map_err(|e| format!("cannot open {log}: {e}"))?;
    writeln!(out, "hook-wall {name} {us}").map_err(|e| format!("cannot write {log}: {e}"))?;
    Ok(status.code().map_or(1, |c| c.clamp(0, 255) as u8))
}
