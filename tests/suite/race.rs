//! The check-then-use race on mount targets (needs the TEST-ONLY cargo feature
//! `fault-injection`; scripts/test.sh runs `cargo test --all-features`). Right after the hook's
//! rootfs gate has resolved and checked a container path (Rootfs::mount_target), the armed
//! fault point replaces that regular file with a symlink to a host canary by a rename inside
//! the rootfs, as a process in the image racing the hook would. What gets mounted must be the
//! object that was checked (the hook mounts onto the fd), or the start must fail: the host
//! canary is never mounted over or written.
#![cfg(feature = "fault-injection")]

use crate::common::bundle::{self, Bundle, Image};
use serde_json::json;
use std::path::Path;

/// The libraries of the fake driver land in /usr/lib64 of a busybox image.
const LIB: &str = "/usr/lib64/libnvidia-ml.so.550.54.15";

#[test]
fn swapped_mount_target_never_reaches_the_host() {
    bundle::require_root();
    bundle::require("runc");
    let (dir, host) = bundle::scratch_host("nvct-race-", 2);
    let config = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
    // (name, container path swapped, whether the image already has a regular file there)
    let cases: &[(&str, &str, bool)] = &[
        ("library created by the hook", LIB, false),
        ("library the image already has", LIB, true),
        ("device node on the container's /dev", "/dev/nvidia0", false),
    ];
    for (name, path, preexisting) in cases {
        let canary = dir.join(format!(
            "canary-{}",
            name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        ));
        std::fs::write(&canary, "untouched").unwrap();
        let mut b = Bundle::new(&dir, Image::Busybox);
        if *preexisting {
            let p = b.rootfs().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "image file").unwrap();
        }
        b.hook(&config).env("NVIDIA_VISIBLE_DEVICES=0");
        let env = b.spec["hooks"]["prestart"][0]["env"]
            .as_array_mut()
            .unwrap();
        env.push(json!(format!("NVCT_FAULT_SWAP_PATH={path}")));
        env.push(json!(format!(
            "NVCT_FAULT_SWAP_TARGET={}",
            canary.display()
        )));
        let out = b.run(&format!(
            "grep -F '{}' /proc/self/mountinfo; cat {path} 2>&1; echo RAN",
            canary.display()
        ));
        let context = format!(
            "case {name}: status {}\n--- stdout\n{}--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(&canary).unwrap(),
            "untouched",
            "host canary written: {context}"
        );
        assert!(
            !bundle::host_mounts()
                .iter()
                .any(|m| m.contains(&canary.display().to_string())),
            "host canary is a mount point: {context}"
        );
        if path.starts_with("/usr") {
            // The swap really happened (the fault point fired) and left the image's symlink.
            let p = b.rootfs().join(path.trim_start_matches('/'));
            let meta = std::fs::symlink_metadata(&p).unwrap();
            assert!(
                meta.file_type().is_symlink(),
                "the fault point did not fire: {context}"
            );
            assert_eq!(
                std::fs::read_link(&p).unwrap(),
                Path::new(&canary),
                "{context}"
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!(
            "case {name}: {}",
            if out.status.success() {
                "started; mount went onto the checked object"
            } else {
                "refused"
            }
        );
        if out.status.success() {
            // Mounted onto the checked object (now unlinked), never onto what the link names.
            assert!(stdout.contains("RAN"), "{context}");
            assert!(
                !stdout.contains("canary"),
                "the canary is mounted in the container: {context}"
            );
            assert!(
                !stdout.contains("untouched"),
                "the container reads the host canary: {context}"
            );
        } else {
            assert!(
                context.contains("nvidia-container-runtime-hook: error"),
                "refused without our message: {context}"
            );
            assert!(!stdout.contains("RAN"), "{context}");
        }
    }
}

/// The same race against the CDI hooks, which write through directories of the image: right
/// after the gate has resolved the directory a hook writes into, the image moves it aside and
/// puts a symlink to a host directory in its place. The hook must write into the directory it
/// checked (now moved aside, still inside the rootfs), or fail; the host directory stays empty.
#[test]
fn swapped_directory_never_reaches_the_host_in_the_cdi_hooks() {
    bundle::require_root();
    bundle::require("runc");
    let dir = tempfile::Builder::new()
        .prefix("nvct-race-cdi-")
        .tempdir()
        .unwrap()
        .keep();
    // (name, directory swapped, hook argv)
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "update-ldcache writes its conf file",
            "/etc/ld.so.conf.d",
            &["update-ldcache", "--folder", "/usr/lib64"],
        ),
        (
            "create-symlinks makes its link",
            "/usr/lib64",
            &[
                "create-symlinks",
                "--link",
                "libcuda.so.1::/usr/lib64/libcuda.so",
            ],
        ),
    ];
    for (name, swapped, argv) in cases {
        let canary = dir.join(format!(
            "canary-{}",
            name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        ));
        std::fs::create_dir_all(&canary).unwrap();
        let mut b = Bundle::new(&dir, Image::Glibc);
        std::fs::create_dir_all(b.rootfs().join(swapped.trim_start_matches('/'))).unwrap();
        b.add_hook("createContainer", bundle::CDI_HOOK, argv);
        let env = b.spec["hooks"]["createContainer"][0]["env"]
            .as_array_mut()
            .unwrap();
        env.push(json!(format!("NVCT_FAULT_SWAP_PATH={swapped}")));
        env.push(json!(format!(
            "NVCT_FAULT_SWAP_TARGET={}",
            canary.display()
        )));
        let out = b.run("echo RAN");
        let context = format!(
            "case {name}: status {}\n--- stdout\n{}--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let swapped_path = b.rootfs().join(swapped.trim_start_matches('/'));
        let meta = std::fs::symlink_metadata(&swapped_path).unwrap();
        assert!(
            meta.file_type().is_symlink(),
            "the fault point did not fire: {context}"
        );
        let written: Vec<_> = std::fs::read_dir(&canary)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(
            written.is_empty(),
            "the hook wrote {written:?} into the host directory: {context}"
        );
        eprintln!(
            "case {name}: {}",
            if out.status.success() {
                "ran; wrote into the checked directory"
            } else {
                "refused"
            }
        );
        if out.status.success() {
            let moved = swapped_path.with_file_name(nvct_container::rootfs::fault::MOVED);
            assert!(
                std::fs::read_dir(&moved)
                    .map(|d| d.count() > 0)
                    .unwrap_or(false),
                "nothing in the checked directory {}: {context}",
                moved.display()
            );
        } else {
            assert!(
                context.contains("nvidia-cdi-hook: error"),
                "refused without our message: {context}"
            );
        }
    }
}
