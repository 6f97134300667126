//! `nvidia-ctk-installer` for black-box tests: a toolkit source tree as the installer's image
//! has it, and the installer run as a daemon until SIGTERM.

#![allow(dead_code)]

use super::bundle;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const INSTALLER: &str = env!("CARGO_BIN_EXE_nvidia-ctk-installer");

/// A toolkit source tree as the image has it: `bin/` with the four binaries (the static fronts
/// and `libexec/nvct/` when the suite built them, else the dynamic builds).
pub fn source_tree(dir: &Path) -> PathBuf {
    let root = dir.join("artifacts");
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let built = Path::new(bundle::HOOK).parent().unwrap();
    let statics = std::env::var_os("NVCT_STATIC_BIN_DIR").map(PathBuf::from);
    for name in [
        "nvidia-container-runtime",
        "nvidia-container-runtime-hook",
        "nvidia-ctk",
        "nvidia-cdi-hook",
    ] {
        let front = statics
            .as_ref()
            .map(|d| d.join(name))
            .filter(|p| p.exists());
        match front {
            Some(f) => {
                std::fs::copy(&f, bin.join(name)).unwrap();
                if name != "nvidia-cdi-hook" {
                    let libexec = root.join("libexec/nvct");
                    std::fs::create_dir_all(&libexec).unwrap();
                    std::fs::copy(built.join(name), libexec.join(name)).unwrap();
                }
            }
            _ => {
                std::fs::copy(built.join(name), bin.join(name)).unwrap();
            }
        }
    }
    root
}

/// `nvidia-ctk-installer` as a daemon (stdout and stderr to `log`); SIGTERM on [`stop`].
pub struct Installer {
    child: Child,
    log: PathBuf,
}

impl Installer {
    pub fn start(dir: &Path, args: &[String]) -> Installer {
        let mut cmd = Command::new(INSTALLER);
        cmd.args(args);
        Installer::start_cmd(dir, cmd)
    }

    /// `cmd` (the installer, or a shell that execs it) until it waits for SIGTERM.
    pub fn start_cmd(dir: &Path, mut cmd: Command) -> Installer {
        let log = dir.join("installer.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let mut i = Installer { child, log };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !i.text().contains("waiting for SIGTERM") {
            if let Ok(Some(st)) = i.child.try_wait() {
                panic!("the installer exited ({st}):\n{}", i.text());
            }
            assert!(
                Instant::now() < deadline,
                "the installer did not finish:\n{}",
                i.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        i
    }

    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: nothing is undone (an OOM kill, a node reboot).
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then whether it exited 0, and its log.
    pub fn stop(mut self) -> (bool, String) {
        let _ = nvct_sys::process::kill(self.child.id() as i32, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return (st.success(), self.text());
            }
            assert!(
                Instant::now() < deadline,
                "the installer did not stop:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Installer {
    fn drop(&mut self) {
        // A test that failed before `stop`: put the engine's files back all the same.
        if let Ok(None) = self.child.try_wait() {
            let _ = nvct_sys::process::kill(self.child.id() as i32, libc::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

/// The flags every test run of the installer takes: its dirs under `dir`, the simulated host
/// `host`, the source tree `source`.
pub fn common_args(dir: &Path, host: &super::fakehost::FakeHost, source: &Path) -> Vec<String> {
    vec![
        format!("--toolkit-install-dir={}", dir.join("install").display()),
        format!("--toolkit-source-root={}", source.display()),
        format!("--driver-root={}", host.driver_root().display()),
        format!("--proc-root={}", host.proc_root().display()),
        format!("--pid-file={}", dir.join("run/toolkit.pid").display()),
        format!("--cdi-output-dir={}", dir.join("cdi").display()),
    ]
}

/// `DIR/image-bin/nvidia-toolkit`, a link to the installer: the name the GPU Operator's
/// entrypoint runs, as the image has it (packaging/kubernetes/Dockerfile). Returns its dir.
pub fn toolkit_name_dir(dir: &Path) -> PathBuf {
    let bin = dir.join("image-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("nvidia-toolkit");
    if !link.exists() {
        std::os::unix::fs::symlink(INSTALLER, &link).unwrap();
    }
    bin
}

/// The GPU Operator's container command: `/bin/sh -c` running its entrypoint's last line,
/// `exec nvidia-toolkit DESTINATION` (the name found in PATH), with `env` as the whole
/// environment (and a PATH that finds the link first), then `extra` (flags a test needs).
pub fn operator_command(
    dir: &Path,
    destination: &Path,
    env: &[(String, String)],
    extra: &[String],
) -> Command {
    let bin = toolkit_name_dir(dir);
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("exec nvidia-toolkit \"$@\"")
        .arg("entrypoint.sh")
        .arg(destination)
        .args(extra)
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                bin.display()
            ),
        );
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}
