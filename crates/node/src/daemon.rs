//! The installer's life on the node, after its options are resolved: the pid file locked
//! (one installer per node), an earlier killed installer's work recovered, the install, the
//! engine restarted or signalled, then (unless `no_daemon`) a wait for SIGTERM, SIGINT, SIGHUP
//! or SIGQUIT and everything undone. Progress goes to the caller's `log`.

use crate::installer::{self, InstallError, Options, TermSignals};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: flock: {source}")]
    Flock {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is locked: another nvidia-ctk-installer is running on this node")]
    Locked { path: PathBuf },
    #[error(transparent)]
    Install(#[from] InstallError),
}

/// The pid file, locked: a second installer on the node refuses to run.
pub fn lock_pid_file(path: &Path) -> Result<std::fs::File, DaemonError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DaemonError::Io { path, source }
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io(path))?;
    let locked = nvct_formats::fsutil::try_lock(&f).map_err(|source| DaemonError::Flock {
        path: path.to_path_buf(),
        source,
    })?;
    if !locked {
        return Err(DaemonError::Locked {
            path: path.to_path_buf(),
        });
    }
    f.set_len(0).map_err(io(path))?;
    writeln!(f, "{}", std::process::id()).map_err(io(path))?;
    Ok(f)
}

/// Recovers, installs, restarts the engine; then, unless `no_daemon`, waits for a termination
/// signal and undoes it all.
pub fn run(
    opts: &Options,
    no_daemon: bool,
    signals: &TermSignals,
    log: &dyn Fn(&str),
) -> Result<(), DaemonError> {
    for l in installer::recover(opts)? {
        log(&l);
    }
    let done = installer::install(opts)?;
    // Kept until the undo, so that a killed installer's work is undone by the next one.
    if let Err(e) = installer::save_state(opts, &done) {
        let _ = installer::uninstall(&done);
        return Err(e.into());
    }
    for l in &done.log {
        log(l);
    }
    match installer::restart(opts) {
        Ok(l) => log(&l),
        Err(e) => {
            log(&format!("error: {e}; undoing the install"));
            for l in installer::uninstall(&done)? {
                log(&l);
            }
            installer::forget_state(opts, &done)?;
            return Err(e.into());
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
    for l in installer::uninstall(&done)? {
        log(&l);
    }
    installer::forget_state(opts, &done)?;
    match installer::restart(opts) {
        Ok(l) => log(&l),
        Err(e) => log(&format!("warning: {e}")),
    }
    Ok(())
}
