//! containerd 1.6 as a plain process for black-box tests: private root, state and sockets in
//! the test's directory. [`start_containerd`]: the CRI plugin off; `ctr -a SOCK run
//! --runc-binary SHIM` then starts containers through our runtime shim.
//! [`write_cri_config`] + [`start_containerd_cri`]: the CRI plugin on (tests/suite/cri.rs), served on
//! the same socket, its runtimes from the config (and the drop-ins it imports).

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
    /// Keeps mount-table checks out while it runs (its containers mount on the host).
    _engine: super::engines::Engine,
}

impl Drop for Containerd {
    fn drop(&mut self) {
        super::daemon::stop(&mut self.child, Duration::from_secs(10));
    }
}

/// Starts containerd (private root, state and sockets under `dir`) with the toolkit config
/// `config_env` in its environment, and waits for its socket.
pub fn start_containerd(dir: &Path, config_env: &Path) -> Containerd {
    let conf = dir.join("containerd.toml");
    std::fs::write(
        &conf,
        format!(
            "{}disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n{}",
            top_level(dir),
            sockets(dir)
        ),
    )
    .unwrap();
    spawn(dir, &conf, Some(config_env))
}

/// `version`, `root` and `state` under `dir` (the top of the file: TOML tables come after).
fn top_level(dir: &Path) -> String {
    format!(
        "version = 2\nroot = {:?}\nstate = {:?}\n",
        dir.join("root").display().to_string(),
        dir.join("state").display().to_string(),
    )
}

/// The `[grpc]` and `[ttrpc]` sockets under `dir`.
fn sockets(dir: &Path) -> String {
    format!(
        "[grpc]\naddress = {:?}\n[ttrpc]\naddress = {:?}\n",
        dir.join("containerd.sock").display().to_string(),
        dir.join("containerd.sock.ttrpc").display().to_string(),
    )
}

/// Writes `dir/containerd.toml` for a containerd with its CRI plugin on, as a node without a
/// kubelet can run it: `sandbox_image` (which must be in the `k8s.io` namespace before the
/// first pod: nothing is pulled), CNI dirs under `dir` (no CNI config: the pods use the host
/// network), the streaming server on an ephemeral loopback port (the default 10010 clashes with
/// any other containerd), `runc` the default runtime; `extra_toml` goes inside the CRI
/// plugin's table (keys, then tables of its own). Returns the file's path.
pub fn write_cri_config(dir: &Path, sandbox_image: &str, extra_toml: &str) -> PathBuf {
    let conf = dir.join("containerd.toml");
    let cri = r#"[plugins."io.containerd.grpc.v1.cri"]"#;
    std::fs::create_dir_all(dir.join("cni/bin")).unwrap();
    std::fs::create_dir_all(dir.join("cni/net.d")).unwrap();
    std::fs::write(
        &conf,
        format!(
            "{top}{sockets}\n{cri}\nsandbox_image = {sandbox_image:?}\n\
             stream_server_address = \"127.0.0.1\"\nstream_server_port = \"0\"\n{extra_toml}\n\
             {cni}\nbin_dir = {bin:?}\nconf_dir = {net:?}\n\
             {ctrd}\ndefault_runtime_name = \"runc\"\n\
             {ctrd_runc}\nruntime_type = \"io.containerd.runc.v2\"\n",
            top = top_level(dir),
            sockets = sockets(dir),
            cni = r#"[plugins."io.containerd.grpc.v1.cri".cni]"#,
            bin = dir.join("cni/bin").display().to_string(),
            net = dir.join("cni/net.d").display().to_string(),
            ctrd = r#"[plugins."io.containerd.grpc.v1.cri".containerd]"#,
            ctrd_runc = r#"[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]"#,
        ),
    )
    .unwrap();
    conf
}

/// Starts containerd with the config [`write_cri_config`] wrote (and whatever edited it since,
/// such as an installer's `imports`), `config_env` (if any) in its environment, and waits for
/// its socket. The CRI plugin may answer a moment after the socket appears.
pub fn start_containerd_cri(dir: &Path, config_env: Option<&Path>) -> Containerd {
    spawn(dir, &dir.join("containerd.toml"), config_env)
}

fn spawn(dir: &Path, conf: &Path, config_env: Option<&Path>) -> Containerd {
    let containerd = bundle::require("containerd");
    let sock = dir.join("containerd.sock");
    let log = dir.join("containerd.log");
    let engine = super::engines::engine();
    let mut cmd = hostkind::command(containerd);
    cmd.arg("--config").arg(conf);
    if let Some(env) = config_env {
        cmd.env("NVIDIA_CTK_CONFIG_FILE_PATH", env);
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start containerd");
    let mut c = Containerd {
        child,
        sock,
        log,
        _engine: engine,
    };
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
