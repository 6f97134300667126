//! `docker run --gpus` through a real dockerd (Debian's docker.io), started by the test with
//! its own data root, exec root and socket, no network, on this run's kind of host
//! (`NVCT_TEST_HOST`: cgroup v1, or a simulated cgroup v2 / Ubuntu host). dockerd finds
//! `nvidia-container-runtime-hook` in its PATH and registers it as a prestart hook with its own
//! environment, as on a real node; `NVIDIA_CTK_CONFIG_FILE_PATH` in that environment points the
//! hook at the simulated GPU host.

use crate::common::bundle::{self, out_text};
use crate::common::dockerd::{docker, start_dockerd};
use crate::common::fakehost::FakeHost;
use crate::common::hostkind::{self, HostKind};
use std::path::Path;
use std::process::Command;

fn docker_run_gpus() {
    bundle::require_root();
    let dir = tempfile::Builder::new()
        .prefix("nvct-docker-")
        .tempdir()
        .unwrap();
    let host = FakeHost::builder()
        .gpus(4)
        .build(&dir.path().join("host"))
        .expect("fake host");
    let config = bundle::write_config(dir.path(), &host.driver_root(), &host.proc_root(), "");
    // A busybox image, imported from a rootfs tarball (no registry).
    let img = dir.path().join("img");
    for d in ["bin", "etc", "dev", "proc", "sys", "tmp"] {
        std::fs::create_dir_all(img.join(d)).unwrap();
    }
    std::fs::copy(bundle::require("busybox"), img.join("bin/busybox")).unwrap();
    for applet in ["sh", "ls", "cat", "mknod", "echo", "head"] {
        std::os::unix::fs::symlink("busybox", img.join("bin").join(applet)).unwrap();
    }
    let tar = dir.path().join("img.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(&img)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success());
    let d = start_dockerd(dir.path(), &config, None);
    let out = docker(&d, &["import", tar.to_str().unwrap(), "nvct-busybox:1"]);
    assert!(out.status.success(), "docker import: {}", out_text(&out));
    let info = docker(&d, &["info", "--format", "{{.CgroupVersion}}"]);
    let want_cgroup = if hostkind::kind() == HostKind::V1 {
        "1"
    } else {
        "2"
    };
    assert_eq!(
        String::from_utf8_lossy(&info.stdout).trim(),
        want_cgroup,
        "dockerd's cgroup version: {}",
        out_text(&info)
    );

    let uuid3 = host.gpus()[3].uuid.clone();
    let device_uuid = format!("device={uuid3}");
    // (--gpus value, the GPU nodes the container must see)
    let cases: [(&str, &[&str]); 4] = [
        ("\"device=0,2\"", &["nvidia0", "nvidia2"]),
        ("all", &["nvidia0", "nvidia1", "nvidia2", "nvidia3"]),
        ("1", &["nvidia0"]),
        (&device_uuid, &["nvidia3"]),
    ];
    let script =
        "ls /dev; echo ---; cat /dev/nvidia0; mknod /dev/nvidiax c 195 1 && cat /dev/nvidiax; \
                  mknod /dev/mem2 c 1 1 && cat /dev/mem2; echo ok > /dev/null && echo NULL-OK; \
                  head -c 9 /usr/lib64/libcuda.so.1 >/dev/null && echo LIBCUDA";
    for (gpus, want) in cases {
        let out = docker(
            &d,
            &[
                "run",
                "--rm",
                "--network",
                "none",
                "--gpus",
                gpus,
                "nvct-busybox:1",
                "sh",
                "-c",
                script,
            ],
        );
        let text = format!(
            "--gpus {gpus}: {}\n--- dockerd log tail\n{}",
            out_text(&out),
            tail(&d.log)
        );
        assert!(out.status.success(), "{text}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let nodes: Vec<&str> = stdout
            .split("---")
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .filter(|n| {
                n.strip_prefix("nvidia")
                    .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect();
        assert_eq!(nodes, want, "{text}");
        assert!(
            stdout.contains("LIBCUDA") && stdout.contains("NULL-OK"),
            "{text}"
        );
        if want.contains(&"nvidia0") {
            assert!(
                stderr.contains("can't open '/dev/nvidia0': No such device or address"),
                "GPU 0 allowed (ENXIO): {text}"
            );
        }
        if !want.contains(&"nvidia1") {
            assert!(
                stderr.contains("can't open '/dev/nvidiax': Operation not permitted"),
                "GPU 1 denied (EPERM): {text}"
            );
        }
        assert!(
            stderr.contains("can't open '/dev/mem2': Operation not permitted"),
            "a planted /dev/mem denied: {text}"
        );
    }
    drop(d);
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// dockerd and runc on each cgroup version.
    docker_run_gpus,
}
