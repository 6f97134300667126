//! The installer's life on the node, after its options are resolved: the pid file locked
//! (one installer per node), an earlier killed installer's work recovered, the install, the
//! engine restarted or signalled, then (unless `no_daemon`) a wait for SIGTERM, SIGINT, SIGHUP
//! or SIGQUIT and everything undone. Progress goes to the caller's `log`.

use crate::installer::{self, Options, TermSignals};
use std::io::Write;
use std::path::Path;

/// The pid file, locked: a second installer on the node refuses to run.
pub fn lock_pid_file(path: &Path) -> Result<std::fs::File, String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !nvct_formats::fsutil::try_lock(&f).map_err(|e| format!("{}: flock: {e}", path.display()))? {
        return Err(format!(
            "{} is locked: another nvidia-ctk-installer is running on this node",
            path.display()
        ));
    }
    f.set_len(0)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    writeln!(f, "{}", std::process::id()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(f)
}

/// Recovers, installs, restarts the engine; then, unless `no_daemon`, waits for a termination
/// signal and undoes it all.
pub fn run(
    opts: &Options,
    no_daemon: bool,
    signals: &TermSignals,
    log: &dyn Fn(&str),
) -> Result<(), String> {
    for l in installer::recover(opts).map_err(|e| e.to_string())? {
        log(&l);
    }
    let done = installer::install(opts).map_err(|e| e.to_string())?;
    // Kept until the undo, so that a killed installer's work is undone by the next one.
    if let Err(e) = installer::save_state(opts, &done) {
        let _ = installer::uninstall(&done);
        return Err(e.to_string());
    }
    for l in &done.log {
        log(l);
    }
    match installer::restart(opts) {
        Ok(l) => log(&l),
        Err(e) => {
            log(&format!("error: {e}; undoing the install"));
            for l in installer::uninstall(&done).map_err(|e| e.to_string())? {
                log(&l);
            }
            installer::forget_state(opts, &done).map_err(|e| e.to_string())?;
            return Err(e.to_string());
        }
    }
    if no_daemon {
        log("installed; exiting (--no-daemon: nothing will be undone)");
        return Ok(());
    }
    log("installed; waiting for SIGTERM to undo it");
    match signals.wait() {
        Ok(sig) => log(&format!("signal {sig}: undoing the install")),
        Err(e) => log(&format!("error: sigwait: {e}; undoing the install")),
    }
    for l in installer::uninstall(&done).map_err(|e| e.to_string())? {
        log(&l);
    }
    installer::forget_state(opts, &done).map_err(|e| e.to_string())?;
    match installer::restart(opts) {
        Ok(l) => log(&l),
        Err(e) => log(&format!("warning: {e}")),
    }
    Ok(())
}
