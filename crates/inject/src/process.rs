//! What every hook binary (the prestart hook, `nvidia-cdi-hook`, `nvidia-ctk hook`) does first:
//! drop the loader's and glibc's file-loading variables from its own environment, so that
//! nothing it starts inherits them (a hook is started by the runtime, sometimes with the
//! container's environment), and, in test builds with the `fault-injection` feature only, arm
//! the rootfs check-then-use swap from `NVCT_FAULT_SWAP_PATH` / `NVCT_FAULT_SWAP_TARGET`.
//!
//! Also the static fronts (`exec_worker`): the installed `nvidia-container-runtime-hook` and
//! `nvidia-ctk` are statically linked builds that clean the environment and exec the
//! dynamically linked program (it loads the driver's libnvidia-ml.so.1) from
//! `<prefix>/libexec/nvct/`; the prestart hook's front runs a request that needs nothing of
//! NVML itself and hands the others on with the state it read (`exec_worker_with_stdin`). A
//! static binary has no loader, so an entry without `env` that runc runs with the image's
//! `LD_PRELOAD` cannot load anything into it, and the worker starts with a clean environment.
//! The installed shim is a static front too (`exec_program`: it is no hook, so its
//! environment is passed on as the engine gave it).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The variables that make glibc load files named by the caller: the loader's own (`LD_*`), the
/// ones glibc ignores in setuid programs for the same reason, and every `MALLOC_*` (glibc's
/// allocator settings, `MALLOC_CHECK_` and `MALLOC_TCACHE_*` among them: none loads a file,
/// but a hook has no use for the caller's).
fn unsafe_var(name: &[u8]) -> bool {
    const GLIBC_UNSECURE: &[&[u8]] = &[
        b"GCONV_PATH",
        b"GETCONF_DIR",
        b"GLIBC_TUNABLES",
        b"HOSTALIASES",
        b"LOCALDOMAIN",
        b"LOCPATH",
        b"NIS_PATH",
        b"NLSPATH",
        b"RESOLV_HOST_CONF",
        b"RES_OPTIONS",
        b"TMPDIR",
        b"TZDIR",
    ];
    name.starts_with(b"LD_") || name.starts_with(b"MALLOC_") || GLIBC_UNSECURE.contains(&name)
}

/// Call at the top of `main`. Changing the environment races any other thread's `getenv`, so
/// this is checked, not assumed: a process that already has a second thread is refused (the
/// error is printed and the process exits 1), its environment untouched.
pub fn start_hook() {
    if let Err(e) = nvct_sys::remove_env_vars(unsafe_var) {
        eprintln!(
            "nvct: error: cannot clean this hook's environment: {e} (start_hook must run first \
             in main, before anything starts a thread)"
        );
        std::process::exit(1);
    }
    #[cfg(feature = "fault-injection")]
    if let (Some(p), Some(t)) = (
        std::env::var_os("NVCT_FAULT_SWAP_PATH"),
        std::env::var_os("NVCT_FAULT_SWAP_TARGET"),
    ) {
        nvct_container::rootfs::fault::arm(p.into(), t.into());
    }
    // TEST-ONLY: a second thread for the life of the process, as a real NVML starts, so that
    // the prestart hook takes its forked-child path (`out::prestart::apply`).
    #[cfg(feature = "fault-injection")]
    if std::env::var_os("NVCT_FAULT_SECOND_THREAD").is_some() {
        std::thread::spawn(|| loop {
            std::thread::park();
        });
    }
}

/// Where the front `exe` (`<prefix>/bin/<name>`) finds its worker:
/// `<prefix>/libexec/nvct/<name>`.
pub fn worker_path(exe: &Path, name: &str) -> PathBuf {
    let bin_dir = exe.parent().unwrap_or(Path::new("/"));
    let prefix = bin_dir.parent().unwrap_or(Path::new("/"));
    prefix.join("libexec/nvct").join(name)
}

/// The static front's whole `main`: clean the environment, then exec the worker named `name`
/// with the same arguments (argv[0] included) and stdin/stdout/stderr. Never returns: if the
/// worker cannot be started, prints why and exits 1.
pub fn exec_worker(name: &str) -> ! {
    start_hook();
    exec_worker_with(name, None, false)
}

/// [`exec_worker`] for a front that has already read its stdin (the prestart hook's state)
/// and cleaned its environment: the worker gets `stdin` as its stdin, in a memfd.
pub fn exec_worker_with_stdin(name: &str, stdin: &[u8]) -> ! {
    match nvct_sys::memfd_with(c"hook-state", stdin) {
        Ok(fd) => exec_worker_with(name, Some(fd), false),
        Err(e) => {
            eprintln!(
                "{name}: error: cannot keep the hook state for the driver-facing program: {e}"
            );
            std::process::exit(1)
        }
    }
}

/// Set (to the front's name) in the environment of a program a static front handed over to:
/// the front has logged its start already, so the program does not log it again. The program
/// removes it from the environment of whatever it runs.
pub const HANDED_OVER_ENV: &str = "NVCT_HANDED_OVER";

/// The statically linked shim's hand-over: exec its dynamic program with the same arguments,
/// stdio and environment (the engine's; the shim is no hook), plus [`HANDED_OVER_ENV`]. Never
/// returns.
pub fn exec_program(name: &str) -> ! {
    exec_worker_with(name, None, true)
}

fn exec_worker_with(name: &str, stdin: Option<std::os::fd::OwnedFd>, logged: bool) -> ! {
    let exe = match std::fs::read_link("/proc/self/exe") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{name}: error: /proc/self/exe: {e} (is /proc mounted?)");
            std::process::exit(1)
        }
    };
    let worker = worker_path(&exe, name);
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| OsString::from(name));
    let mut cmd = std::process::Command::new(&worker);
    cmd.arg0(argv0).args(args);
    if let Some(fd) = stdin {
        cmd.stdin(fd);
    }
    if logged {
        cmd.env(HANDED_OVER_ENV, name);
    }
    let e = cmd.exec();
    eprintln!(
        "{name}: error: {}: cannot start the driver-facing program: {e} ({} is the statically \
         linked front of an install that also has {}; reinstall the package, or install both \
         from scripts/build-release.sh's target/dist)",
        worker.display(),
        exe.display(),
        worker.display()
    );
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_var_cases() {
        let cases: &[(&str, bool)] = &[
            ("LD_PRELOAD", true),
            ("LD_AUDIT", true),
            ("LD_LIBRARY_PATH", true),
            ("GCONV_PATH", true),
            ("GLIBC_TUNABLES", true),
            ("LOCPATH", true),
            ("MALLOC_CHECK_", true),
            ("MALLOC_TCACHE_MAX", true),
            ("MALLOC_TCACHE_COUNT", true),
            ("MALLOC_TCACHE_UNSORTED_LIMIT", true),
            ("MALLOC_ARENA_MAX", true),
            ("MALLOC_TRACE", true),
            ("MALLOC_PERTURB_", true),
            ("MALLOC_", true),
            ("NOT_MALLOC_CHECK_", false),
            ("malloc_check_", false),
            ("NVIDIA_VISIBLE_DEVICES", false),
            ("PATH", false),
            ("OLD_PRELOAD", false),
        ];
        for (name, want) in cases {
            assert_eq!(unsafe_var(name.as_bytes()), *want, "{name}");
        }
    }

    #[test]
    fn worker_path_cases() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "package",
                "/usr/bin/nvidia-ctk",
                "/usr/libexec/nvct/nvidia-ctk",
            ),
            (
                "local prefix",
                "/usr/local/bin/nvidia-container-runtime-hook",
                "/usr/local/libexec/nvct/nvidia-container-runtime-hook",
            ),
            ("at the root", "/nvidia-ctk", "/libexec/nvct/nvidia-ctk"),
        ];
        for (case, exe, want) in cases {
            let name = Path::new(exe).file_name().unwrap().to_str().unwrap();
            assert_eq!(worker_path(Path::new(exe), name), Path::new(want), "{case}");
        }
    }
}
