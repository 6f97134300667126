//! The runtime shim under a real containerd 1.6 (`ctr run --runc-binary <shim>`), starting
//! containers on the simulated 8-GPU host. Runs on cgroup v1 only: `ctr run` sets CPU limits,
//! and this machine's cpu controller is bound to its cgroup v1 hierarchy, so containerd cannot
//! start any container (GPU or not) on the simulated v2 host.

use crate::common::bundle::{self, out_text, Bundle, Image, HOOK};
use crate::common::containerd::start_containerd;
use crate::common::fakehost::FakeHost;
use std::process::{Command, Output, Stdio};

const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime");

#[test]
fn containerd_ctr_run_with_shim() {
    bundle::require_root();
    bundle::require("runc");
    bundle::require("containerd-shim-runc-v2");
    let ctr = bundle::require("ctr");
    let dir = tempfile::Builder::new()
        .prefix("nvct-ctrd-")
        .tempdir()
        .unwrap();
    let host = FakeHost::builder()
        .gpus(8)
        .build(&dir.path().join("host"))
        .expect("fake host");
    let shim_log = dir.path().join("shim.log");
    let extra = format!(
        "[nvidia-container-runtime]\ndebug = {:?}\n[nvidia-container-runtime-hook]\npath = {:?}\n",
        shim_log.display().to_string(),
        HOOK
    );
    let config = bundle::write_config(dir.path(), &host.driver_root(), &host.proc_root(), &extra);
    let cd = start_containerd(dir.path(), &config);
    let b = Bundle::new(dir.path(), Image::Busybox);
    let rootfs = b.rootfs().display().to_string();

    let run = |id: &str, gpu: bool| -> Output {
        let mut cmd = Command::new(&ctr);
        cmd.arg("-a")
            .arg(&cd.sock)
            .args(["run", "--rm", "--runc-binary", SHIM]);
        if gpu {
            cmd.args(["--env", "NVIDIA_VISIBLE_DEVICES=0"]);
        }
        // `ctr run --rootfs` has no image config, so the process gets no PATH: use absolute paths.
        cmd.args([
            "--rootfs",
            &rootfs,
            id,
            "/bin/sh",
            "-c",
            "export PATH=/bin; ls /dev/nvidia* 2>/dev/null; grep ' /run tmpfs ' /proc/mounts >/dev/null && echo RUN-TMPFS; test -S /run/nvidia-persistenced/socket && echo SOCKET; echo done",
        ]);
        let before = bundle::host_mounts();
        let out = cmd.stdin(Stdio::null()).output().expect("ctr run");
        assert_eq!(before, bundle::host_mounts(), "host mount table changed");
        out
    };
    let diag = |out: &Output| {
        format!(
            "{}\n--- containerd log\n{}\n--- shim log\n{}",
            out_text(out),
            std::fs::read_to_string(&cd.log).unwrap_or_default(),
            std::fs::read_to_string(&shim_log).unwrap_or_default()
        )
    };

    let id = format!("nvct-plain-{}", std::process::id());
    let out = run(&id, false);
    let text = diag(&out);
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("/dev/nvidia"),
        "GPU nodes in a non-GPU container: {text}"
    );
    assert!(stdout.contains("done"), "{text}");
    let id = format!("nvct-gpu-{}", std::process::id());
    let out = run(&id, true);
    let text = diag(&out);
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert!(lines.contains(&"/dev/nvidia0"), "no /dev/nvidia0: {text}");
    assert!(
        !lines.contains(&"/dev/nvidia1"),
        "/dev/nvidia1 is visible: {text}"
    );
    assert!(lines.contains(&"done"), "{text}");
    // containerd's default spec mounts a tmpfs at /run; the node runs nvidia-persistenced (the
    // fake host has its socket): the socket is mounted into that tmpfs.
    assert!(
        lines.contains(&"RUN-TMPFS"),
        "no /run tmpfs from ctr's default spec: {text}"
    );
    assert!(lines.contains(&"SOCKET"), "no persistenced socket: {text}");
    assert!(
        std::fs::read_to_string(&shim_log)
            .unwrap_or_default()
            .contains("added prestart hook"),
        "{text}"
    );

    drop(cd);
}
