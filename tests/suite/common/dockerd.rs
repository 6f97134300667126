//! dockerd as a plain process for black-box tests: its own data root, exec root, pid file and
//! socket in the test's directory, no network; stopped (and waited for) on drop.

#![allow(dead_code)]

use super::bundle::{self, HOOK};
use super::hostkind;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Dockerd {
    pub sock: PathBuf,
    pub log: PathBuf,
    child: Child,
    /// Keeps mount-table checks out while it runs (its containers mount on the host).
    _engine: super::engines::Engine,
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        super::daemon::stop(&mut self.child, Duration::from_secs(20));
    }
}

/// Starts dockerd with its own data root, exec root, pid file and socket under `dir`, the
/// toolkit config `config` in its environment, the hook's directory first in its PATH, and
/// `config_file` as its daemon.json when given.
pub fn start_dockerd(dir: &Path, config: &Path, config_file: Option<&Path>) -> Dockerd {
    let dockerd = bundle::require("dockerd");
    let hook_dir = Path::new(HOOK).parent().unwrap();
    let sock = dir.join("docker.sock");
    let log = dir.join("dockerd.log");
    let engine = super::engines::engine();
    let mut cmd = hostkind::command(dockerd);
    if let Some(f) = config_file {
        cmd.arg("--config-file").arg(f);
    }
    let child = cmd
        .args(["--data-root"])
        .arg(dir.join("data"))
        .arg("--exec-root")
        .arg(dir.join("exec"))
        .arg("--pidfile")
        .arg(dir.join("docker.pid"))
        .arg("-H")
        .arg(format!("unix://{}", sock.display()))
        .args([
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
            "--storage-driver=vfs",
        ])
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", hook_dir.display()),
        )
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", config)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start dockerd");
    let mut d = Dockerd {
        sock,
        log,
        child,
        _engine: engine,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(st)) = d.child.try_wait() {
            panic!(
                "dockerd exited ({st}): {}",
                std::fs::read_to_string(&d.log).unwrap_or_default()
            );
        }
        if d.sock.exists() && docker(&d, &["info"]).status.success() {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "dockerd did not come up: {}",
            std::fs::read_to_string(&d.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs the docker CLI against `d`.
pub fn docker(d: &Dockerd, args: &[&str]) -> Output {
    Command::new(bundle::require("docker"))
        .env("DOCKER_HOST", format!("unix://{}", d.sock.display()))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run docker")
}
