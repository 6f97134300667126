//! containerd 1.6 as a plain process for black-box tests: private root, state and sockets in
//! the test's directory, the CRI plugin off; `ctr -a SOCK run --runc-binary SHIM` then starts
//! containers through our runtime shim.

#![allow(dead_code)]

use super::{bundle, hostkind};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// containerd started by the test; killed (and waited for) on drop.
pub struct Containerd {
    child: Child,
    pub sock: PathBuf,
    pub log: PathBuf,
}

impl Drop for Containerd {
    fn drop(&mut self) {
        super::daemon::stop(&mut self.child, Duration::from_secs(10));
    }
}

/// Starts containerd (private root, state and sockets under `dir`) with the toolkit config
/// `config_env` in its environment, and waits for its socket.
pub fn start_containerd(dir: &Path, config_env: &Path) -> Containerd {
    let containerd = bundle::require("containerd");
    let sock = dir.join("containerd.sock");
    let conf = dir.join("containerd.toml");
    std::fs::write(
        &conf,
        format!(
            "version = 2\nroot = {:?}\nstate = {:?}\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [grpc]\naddress = {:?}\n[ttrpc]\naddress = {:?}\n",
            dir.join("root").display().to_string(),
            dir.join("state").display().to_string(),
            sock.display().to_string(),
            dir.join("containerd.sock.ttrpc").display().to_string(),
        ),
    )
    .unwrap();
    let log = dir.join("containerd.log");
    let child = hostkind::command(containerd)
        .arg("--config")
        .arg(&conf)
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", config_env)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start containerd");
    let mut c = Containerd { child, sock, log };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.sock.exists() {
        if let Ok(Some(st)) = c.child.try_wait() {
            panic!(
                "containerd exited ({st}): {}",
                std::fs::read_to_string(&c.log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "containerd socket did not appear: {}",
            std::fs::read_to_string(&c.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c
}
