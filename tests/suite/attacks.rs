//! Hostile images against the prestart hook, in real runc containers on the simulated GPU
//! host. Each case builds a malicious rootfs, starts the container, and asserts that a canary
//! on the host is untouched, that every NVIDIA mount in the container comes from the fake
//! driver root, and that the container either ran safely or was refused with a clear message.
//! (The host mount table is compared before/after by Bundle::run.)

use crate::common::bundle::{self, Bundle, Image};
use crate::common::fakehost::FakeHost;
use crate::common::hostkind;
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime");

struct Host {
    host: FakeHost,
    dir: PathBuf,
    config: PathBuf,
}

fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        bundle::require_root();
        bundle::require("runc");
        // The fake host has persistenced's socket, so both paths mount
        // /run/nvidia-persistenced/socket.
        let (dir, host) = bundle::scratch_host("nvct-attack-", 2);
        let config = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
        Host { host, dir, config }
    })
}

/// A host directory with one file; `snapshot` lists everything under it with contents.
fn canary(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("canary"), "untouched").unwrap();
    dir
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p.clone());
                out.insert(p, None);
            } else if meta.file_type().is_symlink() {
                // Never follow: runc's /dev links point at /proc/self/fd/N.
                out.insert(
                    p.clone(),
                    Some(
                        std::fs::read_link(&p)
                            .unwrap()
                            .into_os_string()
                            .into_encoded_bytes(),
                    ),
                );
            } else {
                out.insert(p.clone(), Some(std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out
}

/// Prints every mount of the container whose mount point mentions nvidia or a lib dir, as
/// `MNT <mount point> <device> <inode>` of each NVIDIA-looking mount in the container, the
/// device and inode of what is mounted there (a bind mount shows its source's).
const MOUNTS: &str = "grep -E 'nvidia|/lib|/usr/bin' /proc/self/mountinfo | while read a b c root point rest; do echo \"MNT $point $(stat -L -c '%d %i' \"$point\")\"; done";

/// Every mount [`MOUNTS`] listed is a file of the fake host (`allowed`): compared by device
/// and inode, not by mountinfo paths (which assume the root filesystem is its own mount).
fn check_mounts(stdout: &str, allowed: &Path, context: &str) {
    use std::os::unix::fs::MetadataExt;
    let mut host_files = std::collections::BTreeSet::new();
    let mut stack = vec![allowed.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            // Directories count too: the MPS pipe dir is mounted whole.
            host_files.insert((m.dev(), m.ino()));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    let listed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("MNT "))
        .collect();
    assert!(
        !listed.is_empty(),
        "the container listed no NVIDIA mount: {context}"
    );
    for line in listed {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [point, dev, ino] = f[..] else {
            panic!("bad MNT line {line:?}: {context}")
        };
        if point.starts_with("/proc") {
            continue; // the tmpfs mask of /proc/driver/nvidia
        }
        // busybox stat prints the device number in decimal as the kernel's new encoding.
        let (dev, ino): (u64, u64) = (dev.parse().unwrap(), ino.parse().unwrap());
        assert!(
            host_files.contains(&(dev, ino)),
            "mount {point} (dev {dev} ino {ino}) is no file of the fake host {}: {context}",
            allowed.display()
        );
    }
}

struct Case {
    name: &'static str,
    /// Makes the image hostile; gets (rootfs, canary dir).
    setup: fn(&Path, &Path),
    image: Image,
    /// runc 1.1 itself follows a symlinked /dev on the host when it creates /dev/fd, /dev/stdin,
    /// /dev/ptmx… (its bug, not ours): for that case only our own names are checked.
    runc_writes_canary: bool,
}

#[test]
fn redirected_mount_targets() {
    let h = host();
    let cases = [
        Case {
            name: "lib dir is an absolute symlink to a host dir",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                symlink(c, r.join("usr/lib64")).unwrap();
            },
        },
        Case {
            name: "lib dir is a ../ chain",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                symlink(
                    format!("../../../../../../../../..{}", c.display()),
                    r.join("usr/lib64"),
                )
                .unwrap();
            },
        },
        Case {
            name: "lib dir through /proc/self/root",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                symlink(
                    format!("/proc/self/root{}", c.display()),
                    r.join("usr/lib64"),
                )
                .unwrap();
            },
        },
        Case {
            name: "lib dir through /proc/1/cwd",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, _| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                symlink("/proc/1/cwd", r.join("usr/lib64")).unwrap();
            },
        },
        Case {
            name: "multiarch lib dir symlinked to the host",
            image: Image::Glibc,
            runc_writes_canary: false,
            setup: |r, c| {
                let d = r.join("usr/lib/x86_64-linux-gnu/nvidia");
                std::fs::create_dir_all(d.parent().unwrap()).unwrap();
                symlink(c, d).unwrap();
                // and /usr/bin too
                std::fs::remove_dir_all(r.join("usr/bin")).unwrap();
                symlink(c, r.join("usr/bin")).unwrap();
            },
        },
        Case {
            name: "/usr/bin through /proc/self/fd",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, _| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                symlink("/proc/self/fd/3", r.join("usr/bin")).unwrap();
            },
        },
        Case {
            name: "firmware dir symlinked to the host",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("lib/firmware")).unwrap();
                symlink(c, r.join("lib/firmware/nvidia")).unwrap();
            },
        },
        Case {
            name: "persistenced dir symlinked to the host",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("run")).unwrap();
                symlink(c, r.join("run/nvidia-persistenced")).unwrap();
            },
        },
        Case {
            name: "/dev is a symlink to a host dir",
            image: Image::Busybox,
            runc_writes_canary: true,
            setup: |r, c| {
                std::fs::remove_dir_all(r.join("dev")).unwrap();
                symlink(c, r.join("dev")).unwrap();
            },
        },
    ];
    run_redirect_cases(h, &cases, |b| {
        b.hook(&h.config).env("NVIDIA_VISIBLE_DEVICES=0");
    });
}

/// The same attack through the CDI path: the shim in `jit-cdi` mode writes the CDI edits into
/// config.json (mounts at the driver's own paths, `/usr/lib/x86_64-linux-gnu` here, and the
/// `createContainer` hooks `create-symlinks` / `update-ldcache` /
/// `disable-device-node-modification`), then real runc makes the mounts and runs the hooks.
#[test]
fn redirected_mount_targets_cdi_path() {
    let h = host();
    let cases = [
        Case {
            name: "cdi: lib dir is an absolute symlink to a host dir",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("usr/lib")).unwrap();
                symlink(c, r.join("usr/lib/x86_64-linux-gnu")).unwrap();
            },
        },
        Case {
            name: "cdi: lib dir is a ../ chain",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("usr/lib")).unwrap();
                symlink(
                    format!("../../../../../../../../..{}", c.display()),
                    r.join("usr/lib/x86_64-linux-gnu"),
                )
                .unwrap();
            },
        },
        Case {
            name: "cdi: lib dir through /proc/self/root",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("usr/lib")).unwrap();
                symlink(
                    format!("/proc/self/root{}", c.display()),
                    r.join("usr/lib/x86_64-linux-gnu"),
                )
                .unwrap();
            },
        },
        Case {
            name: "cdi: lib dir through /proc/1/cwd",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, _| {
                std::fs::create_dir_all(r.join("usr/lib")).unwrap();
                symlink("/proc/1/cwd", r.join("usr/lib/x86_64-linux-gnu")).unwrap();
            },
        },
        Case {
            name: "cdi: /usr/bin through /proc/self/fd",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, _| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                symlink("/proc/self/fd/3", r.join("usr/bin")).unwrap();
            },
        },
        Case {
            name: "cdi: /usr/bin symlinked to the host, glibc image",
            image: Image::Glibc,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::remove_dir_all(r.join("usr/bin")).unwrap();
                symlink(c, r.join("usr/bin")).unwrap();
            },
        },
        Case {
            name: "cdi: firmware dir symlinked to the host",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("lib/firmware")).unwrap();
                symlink(c, r.join("lib/firmware/nvidia")).unwrap();
            },
        },
        Case {
            name: "cdi: persistenced dir symlinked to the host",
            image: Image::Busybox,
            runc_writes_canary: false,
            setup: |r, c| {
                std::fs::create_dir_all(r.join("run")).unwrap();
                symlink(c, r.join("run/nvidia-persistenced")).unwrap();
            },
        },
        Case {
            name: "cdi: ld.so.conf.d symlinked to the host",
            image: Image::Glibc,
            runc_writes_canary: false,
            setup: |r, c| {
                let _ = std::fs::remove_dir_all(r.join("etc/ld.so.conf.d"));
                symlink(c, r.join("etc/ld.so.conf.d")).unwrap();
            },
        },
    ];
    let work = h.dir.join("cdi-redirect");
    std::fs::create_dir_all(&work).unwrap();
    let config = shim_config(h, &work, "jit-cdi");
    run_redirect_cases(h, &cases, |b| {
        b.env("NVIDIA_VISIBLE_DEVICES=0");
        shim_create(b, &config);
        // jit-cdi writes one hook that does every edit (apply-edits), the links and the ld
        // cache among them: the cases below attack those.
        let args = b.spec["hooks"]["createContainer"][0]["args"].to_string();
        assert!(
            args.contains("apply-edits")
                && args.contains("--create-symlinks")
                && args.contains("--update-ldcache"),
            "jit-cdi wrote no apply-edits hook with links and the ld cache: {}",
            b.spec["hooks"]
        );
    });
}

/// Runs each case: `prepare` wires the GPU request (hook or shim) into the bundle; the
/// container lists its mounts. Asserts the host canary is untouched and, when the container
/// ran, that every NVIDIA mount comes from the fake host; when it was refused, that a message
/// says so (ours, or runc's when runc itself refused a mount destination).
fn run_redirect_cases(h: &Host, cases: &[Case], prepare: impl Fn(&mut Bundle)) {
    for case in cases {
        let canary_dir = canary(
            &h.dir,
            &format!("canary-{}", case.name.replace(['/', ' '], "_")),
        );
        let before = snapshot(&canary_dir);
        let mut b = Bundle::new(&h.dir, case.image);
        (case.setup)(&b.rootfs(), &canary_dir);
        prepare(&mut b);
        let out = b.run(&format!("{MOUNTS}; echo RAN"));
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let context = format!(
            "case {}: status {}\n{stdout}\n{}",
            case.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let after = snapshot(&canary_dir);
        if case.runc_writes_canary {
            let ours: Vec<_> = after
                .keys()
                .filter(|p| p.to_string_lossy().contains("nvidia"))
                .collect();
            assert!(
                ours.is_empty(),
                "the hook created {ours:?} on the host: {context}"
            );
            assert_eq!(
                after.get(&canary_dir.join("canary")),
                before.get(&canary_dir.join("canary")),
                "{context}"
            );
        } else {
            assert_eq!(after, before, "host canary changed: {context}");
        }
        eprintln!(
            "case {}: {}",
            case.name,
            if out.status.success() {
                "ran".to_string()
            } else {
                format!("refused: {}", String::from_utf8_lossy(&out.stderr).trim())
            }
        );
        if out.status.success() {
            assert!(stdout.contains("RAN"), "{context}");
            check_mounts(&stdout, h.host.dir(), &context);
        } else {
            let refused = [
                "nvidia-container-runtime-hook: error",
                "nvidia-cdi-hook: error",
                "runc run failed",
            ];
            assert!(
                refused.iter().any(|m| context.contains(m)),
                "refused without a message: {context}"
            );
        }
    }
}

/// A toolkit config for the shim in `mode`, with a low-level runtime that does nothing (so
/// that config.json keeps exactly what the shim wrote) and our hooks next to each other.
fn shim_config(h: &Host, work: &Path, mode: &str) -> PathBuf {
    let fake = work.join("fake-runc");
    std::fs::write(&fake, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let extra = format!(
        "[nvidia-container-runtime]\nmode = {mode:?}\nruntimes = [{:?}]\n[nvidia-container-runtime-hook]\npath = {:?}\n",
        fake.display().to_string(),
        bundle::HOOK
    );
    bundle::write_config(work, &h.host.driver_root(), &h.host.proc_root(), &extra)
}

/// `nvidia-container-runtime create` on the bundle with `config`; reloads `b.spec` from the
/// config.json the shim wrote.
fn shim_create(b: &mut Bundle, config: &Path) {
    let cfg_json = b.dir.join("config.json");
    std::fs::write(&cfg_json, serde_json::to_vec_pretty(&b.spec).unwrap()).unwrap();
    let out = std::process::Command::new(SHIM)
        .args(["create", "--bundle"])
        .arg(&b.dir)
        .arg(&b.id)
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "shim: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    b.spec = serde_json::from_slice(&std::fs::read(&cfg_json).unwrap()).unwrap();
}

fn image_ldconfig_and_ld_so_conf_d_are_never_used_on_the_host() {
    let h = host();
    let canary_dir = canary(&h.dir, "canary-ldconfig");
    let before = snapshot(&canary_dir);
    let mut b = Bundle::new(&h.dir, Image::Glibc);
    let r = b.rootfs();
    // The image's own ldconfig would write a marker next to the bundle if it ever ran.
    let marker = b.dir.join("image-ldconfig-ran");
    std::fs::create_dir_all(r.join("sbin")).unwrap();
    std::fs::write(
        r.join("sbin/ldconfig"),
        format!("#!/bin/sh\necho ran > {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        r.join("sbin/ldconfig"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // ld.so.conf.d points at a host directory, and ld.so.conf includes it.
    let _ = std::fs::remove_dir_all(r.join("etc/ld.so.conf.d"));
    symlink(&canary_dir, r.join("etc/ld.so.conf.d")).unwrap();
    std::fs::write(
        r.join("etc/ld.so.conf"),
        "include /etc/ld.so.conf.d/*.conf\n",
    )
    .unwrap();
    b.hook(&h.config).env("NVIDIA_VISIBLE_DEVICES=0");
    let out = b.run("dlcuda");
    let context = format!(
        "status {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{context}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("version=12040"),
        "{context}"
    );
    assert!(
        !marker.exists(),
        "the image's /sbin/ldconfig was executed: {context}"
    );
    assert_eq!(
        snapshot(&canary_dir),
        before,
        "host dir behind ld.so.conf.d changed: {context}"
    );
}

#[test]
fn privilege_rules() {
    let h = host();
    // MIG config devices from an unprivileged container: refused.
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.hook(&h.config)
        .env("NVIDIA_VISIBLE_DEVICES=0")
        .env("NVIDIA_MIG_CONFIG_DEVICES=all");
    let out = b.run("echo RAN");
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("NVIDIA_MIG_CONFIG_DEVICES is only honoured for privileged containers"),
        "{text}"
    );

    // accept-nvidia-visible-devices-envvar-when-unprivileged = false: env ignored.
    let config = bundle::write_config(
        &h.dir,
        &h.host.driver_root(),
        &h.host.proc_root(),
        "accept-nvidia-visible-devices-envvar-when-unprivileged = false",
    );
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.hook(&config).env("NVIDIA_VISIBLE_DEVICES=0");
    let out = b.run("ls /dev; echo RAN");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success() && stdout.contains("RAN"), "{stdout}");
    assert!(
        !stdout.contains("nvidia"),
        "an unprivileged env request must be ignored: {stdout}"
    );
}

/// A library whose constructor writes `CANARY` (a host path) and says so on stderr; also an
/// LD_AUDIT module (la_version).
const EVIL_C: &str = r#"
#include <stdio.h>
__attribute__((constructor)) static void evil(void) {
    FILE *f = fopen("CANARY", "w");
    if (f) { fputs("pwned\n", f); fclose(f); }
    fputs("EVIL-LOADED\n", stderr);
}
unsigned int la_version(unsigned int v) { return v; }
"#;

/// Builds [`EVIL_C`] (writing `canary`) from `src` into `<dir>/libevil.so`; returns its path.
fn evil_library(src: &Path, canary: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(src, EVIL_C.replace("CANARY", &canary.display().to_string())).unwrap();
    let lib = dir.join("libevil.so");
    let gcc = std::process::Command::new(bundle::require("gcc"))
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(src)
        .output()
        .unwrap();
    assert!(
        gcc.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&gcc.stderr)
    );
    lib
}

fn image_loader_env_never_reaches_host_side_processes() {
    // The image's env names a library inside the image for every loader variable. The
    // constructor writes a canary at a path that exists only on the host: a host-side process
    // (our hooks, the host ldconfig they run) that loaded it would create the file. The hook
    // entries carry an explicit env (the shim's, and the CDI createContainer hook's), so runc
    // never hands them the container's env.
    let h = host();
    let work = h.dir.join("env-injection");
    std::fs::create_dir_all(&work).unwrap();
    let canary = work.join("canary-host-only");
    let mut b = Bundle::new(&h.dir, Image::Glibc);
    evil_library(
        &work.join("evil.c"),
        &canary,
        &b.rootfs().join("usr/lib/evil"),
    );
    for kv in [
        "LD_PRELOAD=/usr/lib/evil/libevil.so",
        "LD_LIBRARY_PATH=/usr/lib/evil",
        "LD_AUDIT=/usr/lib/evil/libevil.so",
        "GCONV_PATH=/usr/lib/evil",
        "NVIDIA_VISIBLE_DEVICES=0",
    ] {
        b.env(kv);
    }

    // The shim writes the prestart hook (fake low-level runtime: it only records the create).
    shim_create(&mut b, &shim_config(h, &work, "legacy"));
    let entry = &b.spec["hooks"]["prestart"][0];
    let env: Vec<&str> = entry["env"]
        .as_array()
        .expect("the shim's hook entry has an explicit env")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        !env.is_empty()
            && env
                .iter()
                .all(|e| !e.starts_with("LD_") && !e.starts_with("GCONV_PATH")),
        "{entry}"
    );

    // And the CDI path: a createContainer hook (runc runs it from the container's init) that
    // runs the host ldconfig, with the explicit env a CDI spec carries.
    b.add_hook(
        "createContainer",
        bundle::CDI_HOOK,
        &[
            "update-ldcache",
            "--folder",
            "/usr/lib/x86_64-linux-gnu",
            "--ldconfig-path",
            "/sbin/ldconfig",
        ],
    );
    let out = b.run("dlcuda");
    let context = format!(
        "status {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{context}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("version=12040"),
        "{context}"
    );
    // The attack is live inside the container (its own processes load the library)...
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("EVIL-LOADED"),
        "the image's LD_PRELOAD did not work at all: {context}"
    );
    // ...but nothing on the host side loaded it.
    assert!(
        !canary.exists(),
        "a host-side process loaded the image's library: {context}"
    );
}

/// How a GPU request reaches the container in a test: the legacy prestart hook, or the shim's
/// `jit-cdi` edits of config.json (mounts, device nodes and cgroup rules made by runc itself,
/// `createContainer` hooks).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path_ {
    Hook,
    JitCdi,
}

fn request_gpu(h: &Host, b: &mut Bundle, path: Path_, work: &Path) {
    request_gpu_with(h, b, path, work, "");
}

/// [`request_gpu`] with `extra` TOML appended to the toolkit config.
fn request_gpu_with(h: &Host, b: &mut Bundle, path: Path_, work: &Path, extra: &str) {
    request_devices(h, b, path, work, "0", extra);
}

/// `NVIDIA_VISIBLE_DEVICES=devices` through the prestart hook or jit-cdi, with `extra` TOML
/// appended to the toolkit config.
fn request_devices(h: &Host, b: &mut Bundle, path: Path_, work: &Path, devices: &str, extra: &str) {
    b.env(&format!("NVIDIA_VISIBLE_DEVICES={devices}"));
    let config = match path {
        Path_::Hook => bundle::write_config(work, &h.host.driver_root(), &h.host.proc_root(), ""),
        Path_::JitCdi => shim_config(h, work, "jit-cdi"),
    };
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}\n{extra}\n")).unwrap();
    match path {
        Path_::Hook => {
            b.hook(&config);
        }
        Path_::JitCdi => shim_create(b, &config),
    }
}

/// Not an attack: the graphics, display and OpenCL config files through the same two-path harness.
/// `graphics` gets the Vulkan ICD and layer, glvnd EGL vendor and EGL platform files, OptiX's
/// `nvoptix.bin` and the X server's `xorg.conf.d` snippet, `display` the Xorg driver, `compute`
/// the OpenCL ICD file, each at the path the driver put it, read-only.
/// jit-cdi, like any CDI spec (and as upstream's), gives every capability's files whatever
/// `NVIDIA_DRIVER_CAPABILITIES` says.
#[test]
fn graphics_and_display_config_files_in_both_paths() {
    let h = host();
    let work = h.dir.join("graphics");
    std::fs::create_dir_all(&work).unwrap();
    // graphics (the first seven), display (the Xorg driver), compute (the OpenCL ICD).
    let files = [
        "/usr/share/vulkan/icd.d/nvidia_icd.json",
        "/usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
        "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
        "/usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json",
        "/usr/share/nvidia/nvoptix.bin",
        "/usr/share/X11/xorg.conf.d/10-nvidia.conf",
        "/usr/lib/xorg/modules/drivers/nvidia_drv.so",
        "/etc/OpenCL/vendors/nvidia.icd",
    ];
    let script = files
        .iter()
        .map(|f| format!("echo \"== {f}\"; cat {f} && (echo x > {f} 2>/dev/null || echo RO);"))
        .collect::<String>();
    for path in [Path_::Hook, Path_::JitCdi] {
        for (caps, want) in [
            ("graphics,display", &files[..7]),
            ("graphics", &files[..6]),
            ("compute", &files[7..]),
        ] {
            let want = match path {
                Path_::Hook => want,
                Path_::JitCdi => &files[..],
            };
            let mut b = Bundle::new(&h.dir, Image::Busybox);
            b.env(&format!("NVIDIA_DRIVER_CAPABILITIES={caps}"));
            request_gpu(h, &mut b, path, &work);
            let out = b.run(&format!("{script} true"));
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            let context = format!("{path:?} {caps}: {}", bundle::out_text(&out));
            assert!(out.status.success(), "{context}");
            for f in files {
                let section = stdout
                    .split(&format!("== {f}\n"))
                    .nth(1)
                    .and_then(|rest| rest.split("== ").next())
                    .unwrap_or("");
                let host_text =
                    std::fs::read_to_string(h.host.driver_root().join(&f[1..])).unwrap();
                if want.contains(&f) {
                    assert!(
                        section.starts_with(&host_text),
                        "{f} in the container: {context}"
                    );
                    assert!(section.contains("RO"), "{f} read-only: {context}");
                } else {
                    assert!(!section.contains(&host_text), "{f} not given: {context}");
                }
            }
        }
    }
}

/// Not an attack: compat32 through the two-path harness. `graphics,compat32,utility` starts
/// the container; the 32-bit builds are mounted read-only in the 32-bit dir (the prestart hook
/// probes the image's: `/usr/lib32` in busybox; a CDI spec keeps the driver's own,
/// `/usr/lib/i386-linux-gnu`) and the container's ld cache lists them as i386 (`libc6`
/// without `x86-64`).
fn compat32_libraries_in_both_paths() {
    let h = host();
    let work = h.dir.join("compat32");
    std::fs::create_dir_all(&work).unwrap();
    let v = h.host.driver_version();
    for (path, dir) in [
        (Path_::Hook, "/usr/lib32"),
        (Path_::JitCdi, "/usr/lib/i386-linux-gnu"),
    ] {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.env("NVIDIA_DRIVER_CAPABILITIES=graphics,compat32,utility");
        request_gpu(h, &mut b, path, &work);
        let out = b.run(&format!(
            "grep ' {dir}/' /proc/mounts; echo x > {dir}/libGLX_nvidia.so.{v} 2>/dev/null || echo RO"
        ));
        let context = format!("{path:?}: {}", bundle::out_text(&out));
        assert!(out.status.success(), "{context}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        for family in ["libGLX_nvidia", "libnvidia-ml"] {
            let target = format!("{dir}/{family}.so.{v}");
            let line = stdout
                .lines()
                .find(|l| l.split(' ').nth(1) == Some(target.as_str()))
                .unwrap_or_else(|| panic!("{target} not mounted: {context}"));
            assert!(line.contains(" ro,"), "{line}: {context}");
        }
        assert!(stdout.contains("RO"), "read-only: {context}");
        let listing = std::process::Command::new("/sbin/ldconfig")
            .arg("-p")
            .arg("-C")
            .arg(b.rootfs().join("etc/ld.so.cache"))
            .output()
            .unwrap();
        let listing = String::from_utf8_lossy(&listing.stdout);
        for soname in ["libGLX_nvidia.so.0", "libnvidia-ml.so.1"] {
            let want = format!("{soname} (libc6) => {dir}/{soname}");
            assert!(
                listing.lines().any(|l| l.trim() == want),
                "{path:?}: the cache lacks {want:?}:\n{listing}"
            );
        }
    }
}

/// Not an attack: the GPU's `/dev/dri` nodes through the two-path harness, with graphics:
/// GPU 0's card and render nodes (its sysfs `drm/` entries), allowed by the device rules (ENXIO
/// from a host without the driver, not EPERM), and the `/dev/dri/by-path` links to them.
fn dri_nodes_in_both_paths() {
    let h = host();
    let work = h.dir.join("dri");
    std::fs::create_dir_all(&work).unwrap();
    let (card, render) = FakeHost::drm_names(0);
    let bus = &h.host.gpus()[0].bus_id;
    for path in [Path_::Hook, Path_::JitCdi] {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.env("NVIDIA_DRIVER_CAPABILITIES=graphics,utility");
        request_gpu(h, &mut b, path, &work);
        let out = b.run(&format!(
            "ls /dev/dri; readlink /dev/dri/by-path/pci-{bus}-card; readlink /dev/dri/by-path/pci-{bus}-render; \
             cat /dev/dri/{card}; cat /dev/dri/{render}; true"
        ));
        let context = format!("{path:?}: {}", bundle::out_text(&out));
        assert!(out.status.success(), "{context}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(
            lines,
            [
                "by-path".to_string(),
                card.clone(),
                render.clone(),
                format!("../{card}"),
                format!("../{render}")
            ],
            "{context}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("{card}': No such device or address"))
                && stderr.contains(&format!("{render}': No such device or address")),
            "{context}"
        );
    }
}

/// Not an attack: GBM and glvnd's indirect GLX through the two-path harness, in a Debian-like
/// image (libraries in /usr/lib/x86_64-linux-gnu in both paths). graphics gets
/// `gbm/nvidia-drm_gbm.so` -> `../libnvidia-allocator.so.1` (which resolves) and
/// `libGLX_indirect.so.0` -> libGLX_nvidia. An image with Mesa's `libGLX_indirect.so.0` keeps
/// it with the prestart hook; a CDI spec replaces it, as upstream's `create-symlinks` does.
fn gbm_and_glx_indirect_in_both_paths() {
    // GBM's backend link, libGLX_indirect (Mesa's kept by the prestart hook), and the EGL GBM
    // platform library.
    let h = host();
    let work = h.dir.join("gbm");
    std::fs::create_dir_all(&work).unwrap();
    let lib = "/usr/lib/x86_64-linux-gnu";
    let v = h.host.driver_version();
    for path in [Path_::Hook, Path_::JitCdi] {
        for mesa in [false, true] {
            let mut b = Bundle::new(&h.dir, Image::Glibc);
            if mesa {
                symlink(
                    "libGLX_mesa.so.0",
                    b.rootfs().join(&lib[1..]).join("libGLX_indirect.so.0"),
                )
                .unwrap();
            }
            b.env("NVIDIA_DRIVER_CAPABILITIES=graphics,utility");
            request_gpu(h, &mut b, path, &work);
            let out = b.run(&format!(
                "echo GBM $(readlink {lib}/gbm/nvidia-drm_gbm.so); \
                 test -e {lib}/gbm/nvidia-drm_gbm.so && echo RESOLVES; \
                 echo GLX $(readlink {lib}/libGLX_indirect.so.0); \
                 echo EGLGBM $(readlink {lib}/libnvidia-egl-gbm.so.1); \
                 echo CACHED $(grep -c libnvidia-egl-gbm.so.1 /etc/ld.so.cache); \
                 test -x /usr/bin/nvidia-xconfig && echo XCONFIG"
            ));
            let context = format!("{path:?}, mesa {mesa}: {}", bundle::out_text(&out));
            assert!(out.status.success(), "{context}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.contains("GBM ../libnvidia-allocator.so.1") && stdout.contains("RESOLVES"),
                "{context}"
            );
            let glx = if mesa && path == Path_::Hook {
                "GLX libGLX_mesa.so.0".to_string()
            } else {
                format!("GLX libGLX_nvidia.so.{v}")
            };
            assert!(stdout.contains(&glx), "want {glx:?}: {context}");
            // The EGL GBM platform (its own version), found by its soname through the cache.
            assert!(
                stdout.contains("EGLGBM libnvidia-egl-gbm.so.1.1.1") && stdout.contains("CACHED 1"),
                "{context}"
            );
            assert!(
                stdout.contains("XCONFIG"),
                "graphics gets nvidia-xconfig: {context}"
            );
        }
    }
}

/// Not an attack: what upstream's current specs add, through the two-path harness, in a
/// Debian-like image (libraries in /usr/lib/x86_64-linux-gnu in both paths). Graphics gets
/// the driver application profile whose `EGLVisibleDGPUDevices` mask has the bit of each GPU
/// minor the container has (GPU 1 alone: 0x2; both: 0x3), read-only, in
/// /etc/nvidia/nvidia-application-profiles-rc.d/10-container.conf; video the VDPAU backend in
/// `vdpau/` next to the libraries, read-only. A spec (jit-cdi) also sets
/// `NVIDIA_CTK_LIBCUDA_DIR` to the library directory; a prestart hook cannot change the
/// environment of a process whose config the runtime has already read, so that path has none
/// (as upstream's legacy path). Compute alone: no profile through the prestart hook (no EGL or
/// Vulkan without the graphics libraries; upstream's legacy path writes none either), the
/// profile through jit-cdi (which asks for every capability, as upstream's specs carry it).
#[test]
fn application_profile_vdpau_and_libcuda_dir_in_both_paths() {
    use std::os::unix::fs::PermissionsExt;
    let h = host();
    let work = h.dir.join("app-profile");
    std::fs::create_dir_all(&work).unwrap();
    let lib = "/usr/lib/x86_64-linux-gnu";
    let v = h.host.driver_version();
    let profile = "etc/nvidia/nvidia-application-profiles-rc.d/10-container.conf";
    for path in [Path_::Hook, Path_::JitCdi] {
        for (devices, mask) in [("1", "0x2"), ("0,1", "0x3")] {
            let mut b = Bundle::new(&h.dir, Image::Glibc);
            b.env("NVIDIA_DRIVER_CAPABILITIES=graphics,video,utility");
            request_devices(h, &mut b, path, &work, devices, "");
            let out = b.run(&format!(
                "echo LIBCUDA=$NVIDIA_CTK_LIBCUDA_DIR; grep ' {lib}/vdpau/' /proc/mounts; \
                 echo x > {lib}/vdpau/libvdpau_nvidia.so.{v} 2>/dev/null || echo VDPAU-RO"
            ));
            let context = format!("{path:?}, devices {devices}: {}", bundle::out_text(&out));
            assert!(out.status.success(), "{context}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let want = format!(
                "{{\"profiles\":[{{\"name\":\"_container_\",\"settings\":[\"EGLVisibleDGPUDevices\",{mask}]}}],\
                 \"rules\":[{{\"pattern\":[],\"profile\":\"_container_\"}}]}}"
            );
            let file = b.rootfs().join(profile);
            let got = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}: {context}", file.display()));
            assert_eq!(got, want, "the profile: {context}");
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, 0o444, "the profile's mode: {context}");
            let mount = format!(" {lib}/vdpau/libvdpau_nvidia.so.{v} ");
            assert!(
                stdout
                    .lines()
                    .any(|l| l.contains(&mount) && l.contains(" ro,")),
                "the VDPAU backend mounted read-only: {context}"
            );
            assert!(stdout.contains("VDPAU-RO"), "{context}");
            let libcuda = match path {
                Path_::Hook => "LIBCUDA=".to_string(),
                Path_::JitCdi => format!("LIBCUDA={lib}"),
            };
            assert!(
                stdout.lines().any(|l| l == libcuda),
                "want {libcuda:?}: {context}"
            );
        }
        // compute alone: jit-cdi asks for every capability (the profile); the prestart hook
        // for compute and utility (none).
        let mut b = Bundle::new(&h.dir, Image::Glibc);
        b.env("NVIDIA_DRIVER_CAPABILITIES=compute,utility");
        request_devices(h, &mut b, path, &work, "1", "");
        let out = b.run("true");
        let context = format!("{path:?}, compute: {}", bundle::out_text(&out));
        assert!(out.status.success(), "{context}");
        let file = b.rootfs().join(profile);
        match path {
            Path_::JitCdi => {
                let got = std::fs::read_to_string(&file).unwrap_or_default();
                assert!(
                    got.contains("[\"EGLVisibleDGPUDevices\",0x2]"),
                    "the profile with jit-cdi: {got:?}: {context}"
                );
            }
            Path_::Hook => assert!(
                !file.exists() && !b.rootfs().join("etc/nvidia").exists(),
                "no profile (nor its directories) for compute through the hook: {context}"
            ),
        }
    }
}

/// A host directory bound at `/etc/nvidia` (a pod's volume): the application profile is not
/// created there (the host's directory stays as it was), and the container starts without it,
/// in both paths.
fn application_profile_skips_a_host_volume_at_etc_nvidia() {
    let h = host();
    let work = h.dir.join("app-profile-volume");
    std::fs::create_dir_all(&work).unwrap();
    for path in [Path_::Hook, Path_::JitCdi] {
        let vol = canary(&work, &format!("etc-nvidia-{path:?}"));
        let before = snapshot(&vol);
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.spec["mounts"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "destination": "/etc/nvidia", "type": "bind", "source": vol, "options": ["rbind", "rw"],
            }));
        // Graphics: the prestart hook writes the profile only then (jit-cdi always).
        b.env("NVIDIA_DRIVER_CAPABILITIES=graphics,utility");
        request_gpu(h, &mut b, path, &work);
        let out = b.run("echo RAN");
        let context = format!("path {path:?}: {}", bundle::out_text(&out));
        assert!(out.status.success() && out_has(&out, "RAN"), "{context}");
        assert_eq!(
            snapshot(&vol),
            before,
            "the profile was written into the host volume: {context}"
        );
    }
}

/// Not an attack: IMEX channels through the two-path harness. The requested channel is in
/// the container and allowed by its device rules (ENXIO from a host without the driver, not
/// EPERM); the other is not there.
fn imex_channels_in_both_paths() {
    let h = host();
    let work = h.dir.join("imex");
    std::fs::create_dir_all(&work).unwrap();
    for path in [Path_::Hook, Path_::JitCdi] {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.env("NVIDIA_IMEX_CHANNELS=1");
        request_gpu(h, &mut b, path, &work);
        let out = b.run(
            "ls /dev/nvidia-caps-imex-channels; cat /dev/nvidia-caps-imex-channels/channel1; true",
        );
        let context = format!("{path:?}: {}", bundle::out_text(&out));
        assert!(out.status.success(), "{context}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.trim(), "channel1", "{context}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("channel1': No such device or address"),
            "{context}"
        );
    }
}

/// Not an attack: the opt-in sets through the two-path harness. `NVIDIA_GDS=enabled` and
/// `NVIDIA_MOFED=enabled` give the host's `/dev/nvidia-fs*` and `/dev/infiniband/uverbs*`
/// nodes, allowed by the device rules (ENXIO from nodes without a driver, not EPERM), and GDS's
/// `/etc/cufile.json`; without the variables (or with another value than `enabled`) none.
fn opt_in_sets_in_both_paths() {
    let h = host();
    let work = h.dir.join("opt-in");
    std::fs::create_dir_all(&work).unwrap();
    let dev = h.host.dev_root().join("dev");
    std::fs::create_dir_all(dev.join("infiniband")).unwrap();
    for (node, major, minor) in [("nvidia-fs0", 240, 0), ("infiniband/uverbs0", 231, 192)] {
        bundle::mknod_char(&dev.join(node), major, minor);
    }
    std::fs::write(
        h.host.driver_root().join("etc/cufile.json"),
        "{\"cufile\": 1}\n",
    )
    .unwrap();
    for path in [Path_::Hook, Path_::JitCdi] {
        for (env, want) in [
            (vec!["NVIDIA_GDS=enabled", "NVIDIA_MOFED=enabled"], true),
            (vec!["NVIDIA_GDS=yes"], false),
            (vec![], false),
        ] {
            let mut b = Bundle::new(&h.dir, Image::Busybox);
            for e in &env {
                b.env(e);
            }
            request_gpu(h, &mut b, path, &work);
            let out = b.run(
                "ls /dev/nvidia-fs0 /dev/infiniband/uverbs0; cat /etc/cufile.json; \
                 cat /dev/nvidia-fs0; cat /dev/infiniband/uverbs0; true",
            );
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            let context = format!("path {path:?}, {env:?}: {}", bundle::out_text(&out));
            assert!(out.status.success(), "{context}");
            assert_eq!(stdout.contains("/dev/nvidia-fs0"), want, "{context}");
            assert_eq!(
                stdout.contains("/dev/infiniband/uverbs0"),
                want,
                "{context}"
            );
            assert_eq!(stdout.contains("\"cufile\": 1"), want, "{context}");
            if want {
                for node in ["/dev/nvidia-fs0", "/dev/infiniband/uverbs0"] {
                    assert!(
                        stderr.contains(&format!("can't open '{node}': No such device or address")),
                        "{node} allowed (ENXIO): {context}"
                    );
                }
            }
        }
    }
}

/// Not an attack: a MIG device through the two-path harness, by MIG index and by MIG UUID. The
/// container gets its GPU's node and exactly the two access nodes of that MIG device (its GPU
/// instance and compute instance), allowed by its device rules, and their access files under
/// `/proc/driver/nvidia/capabilities`; the other MIG device's are not there.
fn mig_device_in_both_paths() {
    let h = host();
    let dir = h.dir.join("mig");
    let mig_host = FakeHost::builder()
        .gpus(1)
        .mig(true)
        .build(&dir.join("host"))
        .expect("a MIG host");
    let uuid = mig_host.gpus()[0].migs[1].uuid.clone();
    let m = Host {
        config: bundle::write_config(&dir, &mig_host.driver_root(), &mig_host.proc_root(), ""),
        host: mig_host,
        dir: dir.clone(),
    };
    // The fake host's mig-minors: GPU instance g of GPU 0 has access minor 3 + 9g, its
    // compute instance 0 the next one (MIG device 0 is gi 1, MIG device 1 gi 2).
    let want = [
        ["nvidia-cap12", "nvidia-cap13"],
        ["nvidia-cap21", "nvidia-cap22"],
    ];
    for path in [Path_::Hook, Path_::JitCdi] {
        for (id, mig) in [("0:0", 0usize), (uuid.as_str(), 1)] {
            let mut b = Bundle::new(&m.dir, Image::Busybox);
            request_devices(&m, &mut b, path, &dir, id, "");
            let out = b.run(
                "ls /dev/nvidia-caps; ls /dev | grep -c '^nvidia[0-9]'; cat /dev/nvidia-caps/*; \
                 for f in $(find /proc/driver/nvidia/capabilities -type f | sort); do \
                 echo \"PROC $f $(grep DeviceFileMinor $f)\"; done; true",
            );
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            let context = format!("path {path:?}, {id}: {}", bundle::out_text(&out));
            assert!(out.status.success(), "{context}");
            let caps: Vec<&str> = stdout
                .lines()
                .filter(|l| l.starts_with("nvidia-cap"))
                .collect();
            assert_eq!(
                caps, want[mig],
                "the access nodes of MIG device {mig}: {context}"
            );
            for cap in &caps {
                assert!(
                    stderr.contains(&format!(
                        "can't open '/dev/nvidia-caps/{cap}': No such device or address"
                    )),
                    "{cap} allowed (ENXIO): {context}"
                );
            }
            assert!(stdout.lines().any(|l| l == "1"), "one GPU node: {context}");
            // /proc/driver/nvidia/capabilities: that MIG device's GPU and compute instance
            // access files with the host's contents (the cap minors), no other device's.
            let gi = mig + 1;
            let minor = |cap: &str| cap.trim_start_matches("nvidia-cap").to_string();
            let proc_files: Vec<&str> = stdout
                .lines()
                .filter_map(|l| l.strip_prefix("PROC "))
                .collect();
            assert_eq!(
                proc_files,
                [
                    format!(
                        "/proc/driver/nvidia/capabilities/gpu0/mig/gi{gi}/access DeviceFileMinor: {}",
                        minor(want[mig][0])
                    ),
                    format!(
                        "/proc/driver/nvidia/capabilities/gpu0/mig/gi{gi}/ci0/access DeviceFileMinor: {}",
                        minor(want[mig][1])
                    ),
                ],
                "the capability files of MIG device {mig} only: {context}"
            );
        }
    }
}

fn device_isolation_in_both_paths() {
    // Only GPU 0 is injected. The container has CAP_MKNOD (as Docker's default set grants):
    // making GPU 1's node works, opening it does not (the device cgroup: EPERM), while GPU 0
    // opens as far as a host without a driver allows (ENXIO). /proc/driver/nvidia says
    // ModifyDeviceFiles: 0 (so a driver would not create nodes on demand).
    let h = host();
    let work = h.dir.join("isolation");
    std::fs::create_dir_all(&work).unwrap();
    for path in [Path_::Hook, Path_::JitCdi] {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.add_capability("CAP_MKNOD");
        request_gpu(h, &mut b, path, &work);
        let out = b.run(
            &"cat /dev/nvidia0; mknod /dev/nvidia1 c 195 1 && echo MKNOD-OK; cat /dev/nvidia1; \
                         grep ModifyDeviceFiles /proc/driver/nvidia/params; echo GPUS; ls /proc/driver/nvidia/gpus; echo END; ls /dev; \
                         mknod /dev/mem2 c 1 1 && cat /dev/mem2; echo null > /dev/null && echo NULL-OK; CGROUP; true"
                .replace("CGROUP", hostkind::SHOW_CGROUP),
        );
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let context = format!("path {path:?}: status {}\n{stdout}\n{stderr}", out.status);
        assert!(out.status.success(), "{context}");
        assert!(
            stderr.contains("can't open '/dev/nvidia0': No such device or address"),
            "GPU 0 allowed (ENXIO): {context}"
        );
        assert!(stdout.contains("MKNOD-OK"), "{context}");
        assert!(
            stderr.contains("can't open '/dev/nvidia1': Operation not permitted"),
            "GPU 1 denied (EPERM): {context}"
        );
        assert!(stdout.contains("ModifyDeviceFiles: 0"), "{context}");
        assert!(
            stderr.contains("can't open '/dev/mem2': Operation not permitted"),
            "a planted /dev/mem denied: {context}"
        );
        assert!(
            stdout.contains("NULL-OK"),
            "the runtime's own /dev/null rule kept: {context}"
        );
        hostkind::assert_device_cgroup(&stdout, &context);
        // One rule for the mask in both paths: only the container's own GPU under gpus/.
        let gpus = stdout
            .split("GPUS\n")
            .nth(1)
            .and_then(|t| t.split("END").next())
            .unwrap_or_default();
        assert_eq!(
            gpus.split_whitespace().collect::<Vec<_>>(),
            vec![h.host.gpus()[0].bus_id.as_str()],
            "{context}"
        );
    }
}

#[test]
fn privilege_rules_through_the_shim() {
    // With accept-nvidia-visible-devices-envvar-when-unprivileged = false, an unprivileged
    // container's NVIDIA_VISIBLE_DEVICES is ignored in every shim mode: config.json is left
    // byte for byte as it was, and the container starts without GPUs.
    let h = host();
    let work = h.dir.join("shim-privilege");
    std::fs::create_dir_all(&work).unwrap();
    for mode in ["legacy", "cdi", "jit-cdi", "auto"] {
        let config = shim_config(h, &work, mode);
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(
            &config,
            format!("accept-nvidia-visible-devices-envvar-when-unprivileged = false\n{text}"),
        )
        .unwrap();
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.env("NVIDIA_VISIBLE_DEVICES=0");
        let before = serde_json::to_vec_pretty(&b.spec).unwrap();
        shim_create(&mut b, &config);
        assert_eq!(
            serde_json::to_vec_pretty(&b.spec).unwrap(),
            before,
            "mode {mode}: an ignored request must not edit config.json"
        );
        let out = b.run("ls /dev; echo RAN");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("RAN"),
            "mode {mode}: {stdout}"
        );
        assert!(
            !stdout.contains("nvidia"),
            "mode {mode}: an unprivileged env request must be ignored: {stdout}"
        );
    }
}

struct CompatCase {
    name: &'static str,
    /// TOML appended to the toolkit config.
    config: &'static str,
    /// Builds `/usr/local/cuda/compat` in the image; gets (rootfs, canary dir on the host).
    setup: fn(&Path, &Path),
    /// Whether the image's compat dir must end up listed in its ld.so.conf.d.
    listed: bool,
}

fn cuda_compat_libraries_from_the_image_in_both_paths() {
    // Forward compatibility only ever writes an ld.so.conf.d entry inside the rootfs naming
    // /usr/local/cuda/compat, and only for one regular, newer libcuda there. Nothing from the
    // image is mounted; a compat dir or library that is a symlink to the host, or a directory,
    // is never used.
    let h = host();
    let work = h.dir.join("compat");
    std::fs::create_dir_all(&work).unwrap();
    let compat = |r: &Path| {
        let d = r.join("usr/local/cuda/compat");
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let cases = [
        CompatCase {
            name: "newer regular library",
            listed: true,
            config: "",
            setup: |r, _| {
                std::fs::write(
                    r.join("usr/local/cuda/compat/libcuda.so.999.1.1"),
                    "image compat lib",
                )
                .unwrap();
            },
        },
        CompatCase {
            name: "newer library, disable-cuda-compat-lib-hook",
            listed: false,
            config: "[features]\ndisable-cuda-compat-lib-hook = true",
            setup: |r, _| {
                std::fs::write(
                    r.join("usr/local/cuda/compat/libcuda.so.999.1.1"),
                    "image compat lib",
                )
                .unwrap();
            },
        },
        CompatCase {
            name: "newer library, cuda-compat-mode disabled",
            listed: false,
            config: "[nvidia-container-runtime.modes.legacy]\ncuda-compat-mode = \"disabled\"",
            setup: |r, _| {
                std::fs::write(
                    r.join("usr/local/cuda/compat/libcuda.so.999.1.1"),
                    "image compat lib",
                )
                .unwrap();
            },
        },
        CompatCase {
            name: "older regular library",
            listed: false,
            config: "",
            setup: |r, _| {
                std::fs::write(r.join("usr/local/cuda/compat/libcuda.so.500.1.1"), "old").unwrap();
            },
        },
        CompatCase {
            name: "library is a symlink to a host file",
            listed: false,
            config: "",
            setup: |r, c| {
                symlink(
                    c.join("canary"),
                    r.join("usr/local/cuda/compat/libcuda.so.999.1.1"),
                )
                .unwrap();
            },
        },
        CompatCase {
            name: "library is a directory",
            listed: false,
            config: "",
            setup: |r, _| {
                std::fs::create_dir(r.join("usr/local/cuda/compat/libcuda.so.999.1.1")).unwrap();
            },
        },
        CompatCase {
            name: "compat dir is a symlink to a host dir",
            listed: false,
            config: "",
            setup: |r, c| {
                std::fs::remove_dir(r.join("usr/local/cuda/compat")).unwrap();
                std::fs::write(c.join("libcuda.so.999.1.1"), "host file").unwrap();
                symlink(c, r.join("usr/local/cuda/compat")).unwrap();
            },
        },
    ];
    for path in [Path_::Hook, Path_::JitCdi] {
        for case in &cases {
            let canary_dir = canary(
                &h.dir,
                &format!("canary-compat-{path:?}-{}", case.name.replace(' ', "_")),
            );
            let mut b = Bundle::new(&h.dir, Image::Glibc);
            compat(&b.rootfs());
            (case.setup)(&b.rootfs(), &canary_dir);
            let before = snapshot(&canary_dir);
            request_gpu_with(h, &mut b, path, &work, case.config);
            let out = b.run(&format!(
                "echo CONF; cat /etc/ld.so.conf.d/*.conf 2>/dev/null; echo END; {MOUNTS}; dlcuda; echo RAN"
            ));
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            let context = format!(
                "path {path:?}, case {}: status {}\n{stdout}\n{}",
                case.name,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success() && stdout.contains("RAN"), "{context}");
            assert_eq!(
                snapshot(&canary_dir),
                before,
                "host canary changed: {context}"
            );
            let conf = stdout
                .split_once("CONF\n")
                .and_then(|(_, rest)| rest.split_once("END\n"))
                .map(|(c, _)| c)
                .unwrap_or_else(|| panic!("{context}"));
            assert_eq!(
                conf.lines().any(|l| l == "/usr/local/cuda/compat"),
                case.listed,
                "compat dir listed: {context}"
            );
            assert!(
                !stdout
                    .lines()
                    .any(|l| l.starts_with("MNT ") && l.contains("/usr/local/cuda")),
                "a mount from or onto the compat dir: {context}"
            );
            check_mounts(&stdout, h.host.dir(), &context);
        }
    }
}

fn image_ldconfig_is_never_run_in_the_cdi_path() {
    // The jit-cdi spec's update-ldcache hook runs an ldconfig: the host's, opened on the host,
    // never one of the image's (which would write a marker next to the bundle). The ld cache
    // it builds still makes libcuda.so.1 resolvable. (A symlinked ld.so.conf.d is a case of
    // redirected_mount_targets_cdi_path.)
    let h = host();
    let work = h.dir.join("cdi-ldconfig");
    std::fs::create_dir_all(&work).unwrap();
    let mut b = Bundle::new(&h.dir, Image::Glibc);
    let r = b.rootfs();
    let marker = b.dir.join("image-ldconfig-ran");
    for p in ["sbin/ldconfig", "sbin/ldconfig.real", "usr/sbin/ldconfig"] {
        std::fs::create_dir_all(r.join(p).parent().unwrap()).unwrap();
        std::fs::write(
            r.join(p),
            format!("#!/bin/sh\necho ran > {}\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(
            r.join(p),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
    }
    request_gpu(h, &mut b, Path_::JitCdi, &work);
    let out = b.run("dlcuda");
    let context = format!(
        "status {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{context}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("version=12040"),
        "{context}"
    );
    assert!(
        !marker.exists(),
        "an ldconfig of the image was executed: {context}"
    );
}

/// A hostile ld.so.conf tree or library for the ld cache step. `fifo` makes a FIFO at a path;
/// `link` a symlink.
struct LdCase {
    name: &'static str,
    setup: fn(&Path),
}

fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    nvct_sys::mkfifo(path, 0o644).unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

fn ld_cache_step_cannot_be_hung_or_flooded_in_both_paths() {
    // A FIFO blocks the host ldconfig's open() for ever; /dev/zero grows one line without end,
    // /dev/urandom spins a CPU; the native writer must not read any of them as the image's cache. Each start must end within seconds (the ldconfig child is
    // killed after its time limit; the container's /dev is an empty tmpfs for it), the
    // container refused with our message or started, and no process left rooted in the image.
    let h = host();
    let work = h.dir.join("ld-hang");
    std::fs::create_dir_all(&work).unwrap();
    let cases = [
        LdCase {
            name: "ld.so.conf is a FIFO",
            setup: |r| mkfifo(&r.join("etc/ld.so.conf")),
        },
        LdCase {
            name: "included conf is a FIFO",
            setup: |r| {
                std::fs::write(
                    r.join("etc/ld.so.conf"),
                    "include /etc/ld.so.conf.d/*.conf\n",
                )
                .unwrap();
                mkfifo(&r.join("etc/ld.so.conf.d/evil.conf"));
            },
        },
        LdCase {
            name: "aux cache is a FIFO",
            setup: |r| mkfifo(&r.join("var/cache/ldconfig/aux-cache")),
        },
        LdCase {
            name: "library links to a FIFO",
            setup: |r| {
                mkfifo(&r.join("tmp/fifo"));
                std::fs::create_dir_all(r.join("usr/lib")).unwrap();
                symlink("/tmp/fifo", r.join("usr/lib/libevil.so.1")).unwrap();
            },
        },
        LdCase {
            name: "ld.so.conf links to /dev/zero",
            setup: |r| symlink("/dev/zero", r.join("etc/ld.so.conf")).unwrap(),
        },
        LdCase {
            name: "ld.so.conf links to /dev/urandom",
            setup: |r| symlink("/dev/urandom", r.join("etc/ld.so.conf")).unwrap(),
        },
        // The image's cache, which the native writer reads.
        LdCase {
            name: "ld.so.cache is a FIFO",
            setup: |r| mkfifo(&r.join("etc/ld.so.cache")),
        },
        LdCase {
            name: "ld.so.cache links to /dev/zero",
            setup: |r| symlink("/dev/zero", r.join("etc/ld.so.cache")).unwrap(),
        },
        LdCase {
            name: "ld.so.cache is garbage with a cache's magic",
            setup: |r| {
                let mut b = b"glibc-ld.so.cache1.1".to_vec();
                b.extend_from_slice(&[0xff; 64]);
                std::fs::write(r.join("etc/ld.so.cache"), b).unwrap()
            },
        },
    ];
    std::thread::scope(|scope| {
        for path in [Path_::Hook, Path_::JitCdi] {
            for (i, case) in cases.iter().enumerate() {
                // Each start its own config dir: the fake runtime written there is exec'd.
                let work = work.join(format!("{path:?}-{i}"));
                std::fs::create_dir_all(&work).unwrap();
                scope.spawn(move || {
                    let mut b = Bundle::new(&h.dir, Image::Busybox);
                    (case.setup)(&b.rootfs());
                    request_gpu(h, &mut b, path, &work);
                    let started = std::time::Instant::now();
                    let out = b.run_within("echo RAN", std::time::Duration::from_secs(40));
                    let took = started.elapsed();
                    let context = format!("path {path:?}, case {}: after {took:?}", case.name);
                    let out = out.unwrap_or_else(|| panic!("{context}: the start hung"));
                    let (stdout, stderr) = (
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr),
                    );
                    let context = format!("{context}: status {}\n{stdout}\n{stderr}", out.status);
                    eprintln!("{context}");
                    if out.status.success() {
                        assert!(stdout.contains("RAN"), "{context}");
                    } else {
                        assert!(
                            stderr.contains("did not finish within")
                                || stderr.contains("the host ldconfig failed"),
                            "refused without our message: {context}"
                        );
                    }
                    let left = bundle::processes_rooted_at(&b.rootfs());
                    assert!(left.is_empty(), "processes left behind {left:?}: {context}");
                });
            }
        }
    });
}

fn prestart_hook_refuses_a_pid_that_is_not_a_container_being_created() {
    // Registered at createContainer (a hand-written hooks.d entry), runc runs the hook inside
    // the container's pid namespace: the state's pid is 1, and /proc/1 there is the host's
    // init. Without an `env` the hook also gets the image's environment, whose config path
    // would load a config that runs a host canary as "ldconfig". Refused, before any config
    // is read, with a message naming the stage; nothing mounted (Bundle::run compares the
    // host mount table), the canary never written.
    let h = host();
    let work = h.dir.join("pid-trust");
    std::fs::create_dir_all(&work).unwrap();
    let marker = work.join("evil-ran");
    let evil = work.join("evil-ldconfig");
    std::fs::write(
        &evil,
        format!("#!/bin/sh\necho ran > {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let evil_config = work.join("evil.toml");
    std::fs::write(
        &evil_config,
        format!(
            "[nvidia-container-cli]\nroot = {:?}\nproc-root = {:?}\nldconfig = \"@{}\"\n",
            h.host.driver_root().display().to_string(),
            h.host.proc_root().display().to_string(),
            evil.display()
        ),
    )
    .unwrap();
    for env_less in [false, true] {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.env("NVIDIA_VISIBLE_DEVICES=0").env(&format!(
            "NVIDIA_CTK_CONFIG_FILE_PATH={}",
            evil_config.display()
        ));
        b.add_hook("createContainer", bundle::HOOK, &["prestart"]);
        if env_less {
            b.spec["hooks"]["createContainer"][0]
                .as_object_mut()
                .unwrap()
                .remove("env");
        }
        let out = b.run("echo RAN");
        let context = format!("env-less {env_less}: {}", bundle::out_text(&out));
        assert!(!out.status.success(), "{context}");
        assert!(
            out_has(&out, "is not a container being created")
                && out_has(&out, "Register it as a prestart hook"),
            "{context}"
        );
        assert!(!marker.exists(), "the image's config was used: {context}");
    }

    // A state whose pid shares the hook's own mount namespace (this test process): refused.
    let b = Bundle::new(&h.dir, Image::Busybox);
    std::fs::write(
        b.dir.join("config.json"),
        serde_json::to_vec(&b.spec).unwrap(),
    )
    .unwrap();
    let _quiet = crate::common::engines::quiet();
    let before = bundle::host_mounts();
    let state = serde_json::json!({"ociVersion": "1.0.2", "id": "x", "status": "created", "pid": std::process::id(), "bundle": b.dir});
    let mut child = std::process::Command::new(bundle::HOOK)
        .args(["-config", h.config.to_str().unwrap(), "prestart"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        state.to_string().as_bytes(),
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let context = bundle::out_text(&out);
    assert!(
        !out.status.success() && out_has(&out, "shares the hook's own mount namespace"),
        "{context}"
    );
    assert_eq!(bundle::host_mounts(), before, "{context}");
}

fn out_has(out: &std::process::Output, needle: &str) -> bool {
    String::from_utf8_lossy(&out.stderr).contains(needle)
        || String::from_utf8_lossy(&out.stdout).contains(needle)
}

fn host_volumes_get_no_files_and_shared_mounts_no_mounts() {
    // A host directory bound into the container as a volume, and the image's lib dir pointing
    // into it: the hook would create its mount-point files (and a libcuda.so link) there, on
    // the host (the CVE-2024-0133 shape). Refused, the host directory untouched. Through the
    // CDI path runc itself creates its mount points (runc's behaviour, not ours); our hooks
    // create nothing there.
    let h = host();
    let work = h.dir.join("volumes");
    std::fs::create_dir_all(&work).unwrap();
    for path in [Path_::Hook, Path_::JitCdi] {
        let vol = canary(&work, &format!("vol-{path:?}"));
        std::fs::create_dir_all(vol.join("lib")).unwrap();
        let before = snapshot(&vol);
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        let lib_dir = match path {
            Path_::Hook => "usr/lib64",
            Path_::JitCdi => "usr/lib/x86_64-linux-gnu",
        };
        std::fs::create_dir_all(b.rootfs().join(lib_dir).parent().unwrap()).unwrap();
        symlink("/vol/lib", b.rootfs().join(lib_dir)).unwrap();
        b.spec["mounts"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "destination": "/vol", "type": "bind", "source": vol, "options": ["rbind", "rw"],
            }));
        request_gpu(h, &mut b, path, &work);
        let out = b.run("ls -la /vol/lib; echo RAN");
        let context = format!("path {path:?}: {}", bundle::out_text(&out));
        let after = snapshot(&vol);
        match path {
            Path_::Hook => {
                assert!(!out.status.success(), "{context}");
                assert!(out_has(&out, "also mounted on the host"), "{context}");
                assert_eq!(
                    after, before,
                    "the hook created files in the host volume: {context}"
                );
            }
            Path_::JitCdi => {
                let ours: Vec<_> = after
                    .keys()
                    .filter(|p| {
                        let name = p.file_name().unwrap_or_default().to_string_lossy();
                        name == "libcuda.so" || name.ends_with(".conf")
                    })
                    .collect();
                assert!(
                    ours.is_empty(),
                    "our CDI hooks created {ours:?} in the host volume: {context}"
                );
                assert!(
                    !out.status.success() && out_has(&out, "also mounted on the host"),
                    "{context}"
                );
            }
        }
    }

    // rootfsPropagation rshared and an rshared volume the lib dir points into: what the hook
    // mounted there would propagate to the host and outlive the container. Refused; the host
    // mount table (Bundle::run compares it) and the volume stay as they were.
    let vol = canary(&work, "vol-rshared");
    std::fs::create_dir_all(vol.join("lib")).unwrap();
    let before = snapshot(&vol);
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.spec["linux"]["rootfsPropagation"] = serde_json::json!("rshared");
    std::fs::create_dir_all(b.rootfs().join("usr")).unwrap();
    symlink("/vol/lib", b.rootfs().join("usr/lib64")).unwrap();
    b.spec["mounts"].as_array_mut().unwrap().push(serde_json::json!({
        "destination": "/vol", "type": "bind", "source": vol, "options": ["rbind", "rw", "rshared"],
    }));
    request_gpu(h, &mut b, Path_::Hook, &work);
    let out = b.run("echo RAN");
    let context = bundle::out_text(&out);
    assert!(
        !out.status.success() && out_has(&out, "nothing is created there"),
        "{context}"
    );
    assert_eq!(snapshot(&vol), before, "{context}");
}

/// A tmpfs mounted on the host at `dir` (a host tmpfs directory, as a pod's `medium: Memory`
/// emptyDir or a host's `/run/...` is), unmounted when dropped.
struct HostTmpfs(PathBuf);

impl HostTmpfs {
    fn mount(dir: &Path) -> HostTmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mount tmpfs: {}",
            bundle::out_text(&out)
        );
        HostTmpfs(dir.to_path_buf())
    }
}

impl Drop for HostTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

/// The creation rule on the filesystems a real node has at the places the hook creates files:
/// a tmpfs made for the container (containerd's default spec, `podman --read-only` and
/// `docker --tmpfs /run` mount one at `/run`) gets persistenced's socket in both paths; a host
/// tmpfs directory bound into the container (at `/run`, at `/dev/infiniband`, at a library
/// dir) gets nothing from us: at `/run` (a pod's emptyDir) the hook skips the optional socket
/// and starts the container, at `/dev/infiniband` (a node the container asked for) and at the
/// lib dir it refuses the start naming the rule. Through the CDI path runc itself creates its
/// mount points (runc's behaviour, as under upstream's spec), so there only our hooks' files
/// are checked.
fn run_tmpfs_gets_the_socket_and_host_tmpfs_volumes_get_nothing() {
    let h = host();
    let work = h.dir.join("tmpfs-rule");
    std::fs::create_dir_all(&work).unwrap();
    let run_tmpfs = serde_json::json!({
        "destination": "/run", "type": "tmpfs", "source": "tmpfs",
        "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
    });
    let bind = |source: &Path, dest: &str| serde_json::json!({"destination": dest, "type": "bind", "source": source, "options": ["rbind", "rw"]});
    for path in [Path_::Hook, Path_::JitCdi] {
        // containerd's default /run tmpfs: the socket is mounted in it.
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.spec["mounts"]
            .as_array_mut()
            .unwrap()
            .push(run_tmpfs.clone());
        b.env("NVIDIA_DRIVER_CAPABILITIES=utility,compute");
        request_gpu(h, &mut b, path, &work);
        let out = b.run(
            "test -S /run/nvidia-persistenced/socket && echo SOCKET; grep -c ' /run ' /proc/mounts",
        );
        let context = format!("path {path:?}, /run tmpfs: {}", bundle::out_text(&out));
        assert!(out.status.success(), "{context}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("SOCKET"),
            "{context}"
        );

        // A host tmpfs bound at the image's lib dir: refused in both paths, nothing created.
        let vol = work.join(format!("{}lib-{path:?}", bundle::HOST_TMPFS_MARK));
        let _tmpfs = HostTmpfs::mount(&vol);
        std::fs::create_dir_all(vol.join("lib")).unwrap();
        std::fs::write(vol.join("canary"), "untouched").unwrap();
        let before = snapshot(&vol);
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        let lib_dir = match path {
            Path_::Hook => "usr/lib64",
            Path_::JitCdi => "usr/lib/x86_64-linux-gnu",
        };
        std::fs::create_dir_all(b.rootfs().join(lib_dir).parent().unwrap()).unwrap();
        symlink("/vol/lib", b.rootfs().join(lib_dir)).unwrap();
        b.spec["mounts"]
            .as_array_mut()
            .unwrap()
            .push(bind(&vol, "/vol"));
        request_gpu(h, &mut b, path, &work);
        let out = b.run("echo RAN");
        let context = format!(
            "path {path:?}, host tmpfs at the lib dir: {}",
            bundle::out_text(&out)
        );
        assert!(
            !out.status.success() && out_has(&out, "also mounted on the host"),
            "{context}"
        );
        let after = snapshot(&vol);
        let ours: Vec<_> = after
            .keys()
            .filter(|p| !before.contains_key(*p))
            .filter(|p| {
                // runc's own mount points (CDI path) are runc's; ours are links and conf files.
                path == Path_::Hook || {
                    let name = p.file_name().unwrap_or_default().to_string_lossy();
                    name.starts_with("lib") && !name.contains(".so.") || name.ends_with(".conf")
                }
            })
            .collect();
        assert!(
            ours.is_empty(),
            "created {ours:?} in the host tmpfs: {context}"
        );
    }

    // A pod's emptyDir (a host tmpfs) at /run: the hook skips the optional socket and starts.
    let vol = work.join(format!("{}emptydir", bundle::HOST_TMPFS_MARK));
    let _tmpfs = HostTmpfs::mount(&vol);
    std::fs::write(vol.join("canary"), "untouched").unwrap();
    let before = snapshot(&vol);
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.spec["mounts"]
        .as_array_mut()
        .unwrap()
        .push(bind(&vol, "/run"));
    b.env("NVIDIA_DRIVER_CAPABILITIES=utility,compute");
    request_gpu(h, &mut b, Path_::Hook, &work);
    let out = b.run(
        "test -e /run/nvidia-persistenced/socket && echo SOCKET; test -e /dev/nvidia0 && echo GPU",
    );
    let context = format!("emptyDir at /run: {}", bundle::out_text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{context}");
    assert!(
        stdout.contains("GPU") && !stdout.contains("SOCKET"),
        "{context}"
    );
    assert_eq!(
        snapshot(&vol),
        before,
        "the hook created files in the emptyDir: {context}"
    );

    // A host tmpfs directory at /dev/infiniband and NVIDIA_MOFED=enabled: the uverbs node is
    // not optional, so the start is refused and the host directory stays as it was.
    std::fs::create_dir_all(h.host.dev_root().join("dev/infiniband")).unwrap();
    bundle::mknod_char(&h.host.dev_root().join("dev/infiniband/uverbs0"), 231, 192);
    let vol = work.join(format!("{}infiniband", bundle::HOST_TMPFS_MARK));
    let _tmpfs = HostTmpfs::mount(&vol);
    std::fs::write(vol.join("canary"), "untouched").unwrap();
    let before = snapshot(&vol);
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.spec["mounts"]
        .as_array_mut()
        .unwrap()
        .push(bind(&vol, "/dev/infiniband"));
    b.env("NVIDIA_MOFED=enabled");
    request_gpu(h, &mut b, Path_::Hook, &work);
    let out = b.run("echo RAN");
    let context = format!("host tmpfs at /dev/infiniband: {}", bundle::out_text(&out));
    assert!(
        !out.status.success() && out_has(&out, "also mounted on the host"),
        "{context}"
    );
    assert_eq!(
        snapshot(&vol),
        before,
        "the hook created files in the host tmpfs: {context}"
    );
}

/// The statically linked build of `name` that scripts/test.sh builds into `NVCT_STATIC_BIN_DIR`
/// (and scripts/build-release.sh ships): `nvidia-cdi-hook` whole; the prestart hook and
/// `nvidia-ctk` as fronts that exec the dynamic build from `../libexec/nvct/`.
fn static_bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("NVCT_STATIC_BIN_DIR")
        .map(PathBuf::from)
        .expect("NVCT_STATIC_BIN_DIR is not set: run the suite with scripts/test.sh, which builds the static hook binaries");
    let path = dir.join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        nvct_container::ldconfig::static_elf(&bytes),
        Ok(()),
        "{} is not a static ELF",
        path.display()
    );
    path
}

fn env_less_hook_entries_never_load_the_image_library() {
    // CDI specs and hooks.d files written by older toolkits, or by hand, run our binaries
    // without an `env`: runc then gives a createContainer hook the container's environment,
    // LD_PRELOAD included, and a dynamically linked binary loads the image's library as root
    // on the host before main (NVIDIAScape). The shipped binaries are static (the prestart
    // hook and nvidia-ctk as fronts that clean the environment and exec the dynamic program):
    // the loader variables do nothing. Control: the dynamically linked build of each does load
    // it, so the test sees the attack when it works.
    let h = host();
    let work = h.dir.join("env-less");
    std::fs::create_dir_all(&work).unwrap();
    let ldcache: &[&str] = &["update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu"];
    let ctk_ldcache: &[&str] = &[
        "hook",
        "update-ldcache",
        "--folder",
        "/usr/lib/x86_64-linux-gnu",
    ];
    // (case, binary, dynamic build, args, what a run of the static build ends with)
    let cases: &[(&str, &str, &str, &[&str], Result<(), &str>)] = &[
        (
            "nvidia-cdi-hook",
            "nvidia-cdi-hook",
            bundle::CDI_HOOK,
            ldcache,
            Ok(()),
        ),
        (
            "nvidia-ctk hook",
            "nvidia-ctk",
            bundle::CTK,
            ctk_ldcache,
            Ok(()),
        ),
        (
            "prestart hook at createContainer",
            "nvidia-container-runtime-hook",
            bundle::HOOK,
            &["prestart"],
            Err("registered at another stage than prestart"),
        ),
    ];
    for (case, name, dynamic, args, want) in cases {
        for (hook, must_load) in [(static_bin(name), false), (PathBuf::from(dynamic), true)] {
            let tag = format!("{}-{must_load}", name);
            let canary = work.join(format!("canary-{tag}"));
            let mut b = Bundle::new(&h.dir, Image::Glibc);
            let lib = evil_library(
                &work.join(format!("evil-{tag}.c")),
                &canary,
                &b.rootfs().join("usr/lib/evil"),
            );
            b.env(&format!("LD_PRELOAD={}", lib.display()));
            b.env("NVIDIA_VISIBLE_DEVICES=0");
            b.add_hook("createContainer", hook.to_str().unwrap(), args);
            b.spec["hooks"]["createContainer"][0]
                .as_object_mut()
                .unwrap()
                .remove("env");
            let out = b.run("true");
            let context = format!("{case}: {} : {}", hook.display(), bundle::out_text(&out));
            assert_eq!(canary.exists(), must_load, "{context}");
            if !must_load {
                match want {
                    Ok(()) => assert!(out.status.success(), "{context}"),
                    Err(msg) => {
                        assert!(!out.status.success(), "{context}");
                        assert!(out_has(&out, msg), "{context}");
                    }
                }
            }
        }
    }
}

/// Wraps every hook of `b` in GNU time, which appends `<max RSS in KiB> <wall seconds>` of
/// the hook to `out`: wait4's rusage, whose max RSS also covers the children the hook waited
/// for (the ldconfig child).
fn measure_hooks(b: &mut Bundle, out: &Path) {
    let time = PathBuf::from("/usr/bin/time");
    assert!(
        time.exists(),
        "GNU time is not installed: run scripts/install-deps.sh"
    );
    let Some(kinds) = b.spec["hooks"].as_object_mut() else {
        return;
    };
    for hooks in kinds.values_mut() {
        for hook in hooks.as_array_mut().into_iter().flatten() {
            let path = hook["path"].as_str().unwrap().to_string();
            let args: Vec<String> = hook["args"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .skip(1)
                        .map(|v| v.as_str().unwrap().into())
                        .collect()
                })
                .unwrap_or_default();
            let mut argv = vec!["time".to_string(), "-a".into(), "-f".into(), "%M %e".into()];
            argv.extend(["-o".into(), out.display().to_string(), path]);
            argv.extend(args);
            hook["path"] = serde_json::json!(time.display().to_string());
            hook["args"] = serde_json::json!(argv);
        }
    }
}

/// A hostile `ld.so.cache` of about `size` bytes: as many entries as fit, all pointing at 16
/// short strings (old format: `ld.so-1.7.0`, offsets from the string table; new format:
/// `glibc-ld.so.cache1.1`, offsets from the header).
fn hostile_ld_cache(new_format: bool, size: usize) -> Vec<u8> {
    let mut strings = Vec::new();
    let mut pairs = Vec::new();
    for i in 0..16 {
        let soname = strings.len() as u32;
        strings.extend_from_slice(format!("libh{i}.so.1\0").as_bytes());
        let path = strings.len() as u32;
        strings.extend_from_slice(format!("/lib/libh{i}.so.1\0").as_bytes());
        pairs.push((soname, path));
    }
    let (header, entry) = if new_format { (48, 24) } else { (16, 12) };
    let n = (size - header - strings.len()) / entry;
    let mut b = Vec::with_capacity(size);
    let base = if new_format {
        b.extend_from_slice(b"glibc-ld.so.cache1.1");
        b.extend_from_slice(&(n as u32).to_le_bytes());
        b.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        b.extend_from_slice(&[2, 0, 0, 0]); // little-endian
        b.extend_from_slice(&[0; 16]); // extension offset, unused
        (header + n * entry) as u32
    } else {
        b.extend_from_slice(b"ld.so-1.7.0\0");
        b.extend_from_slice(&(n as u32).to_le_bytes());
        0
    };
    for i in 0..n {
        let (key, value) = pairs[i % pairs.len()];
        b.extend_from_slice(&0x0303i32.to_le_bytes());
        b.extend_from_slice(&(base + key).to_le_bytes());
        b.extend_from_slice(&(base + value).to_le_bytes());
        if new_format {
            b.extend_from_slice(&[0; 12]); // osversion, hwcap
        }
    }
    b.extend_from_slice(&strings);
    b
}

/// The hook's peak memory (wait4 max RSS, with its ldconfig child) on a hostile image cache.
const LD_CACHE_RSS_BOUND_KIB: u64 = 64 * 1024;
/// Its wall time per start (the ldconfig child alone may take its 5 s limit).
const LD_CACHE_WALL_BOUND_S: f64 = 15.0;

fn hostile_ld_cache_is_not_decoded_past_a_real_caches_bounds_in_both_paths() {
    // A few MiB of cache (a gzipped layer of under 1 MB) whose millions of entries share 16
    // strings once made the hook decode, merge, sort and write them all (1 GiB of RSS, 20 s
    // per start). Beyond a real cache's bounds (4 MiB, 20 000 entries) the native writer
    // leaves the image's cache to the host ldconfig, which does not read it: the container
    // starts with ldconfig's cache, and the hook stays under a fixed memory and time bound.
    // Measured (GNU time around the hook): the prestart hook, and `nvidia-cdi-hook
    // update-ldcache` registered as a prestart hook (a createContainer hook must be the
    // container init's own child, so it cannot be wrapped); jit-cdi's createContainer hooks
    // run unwrapped, bounded by the start's wall time.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Way {
        Hook,
        CdiHook,
        JitCdi,
    }
    let h = host();
    let work = h.dir.join("ld-flood");
    std::fs::create_dir_all(&work).unwrap();
    let cases: [(&str, bool, usize); 4] = [
        ("60 MiB, old format", false, 60 << 20),
        ("60 MiB, new format", true, 60 << 20),
        ("3 MiB, old format, 260 000 entries", false, 3 << 20),
        ("3 MiB, new format, 130 000 entries", true, 3 << 20),
    ];
    std::thread::scope(|scope| {
        for way in [Way::Hook, Way::CdiHook, Way::JitCdi] {
            for (i, &(name, new_format, size)) in cases.iter().enumerate() {
                let work = work.join(format!("{way:?}-{i}"));
                std::fs::create_dir_all(&work).unwrap();
                scope.spawn(move || {
                    let mut b = Bundle::new(&h.dir, Image::Busybox);
                    let cache = b.rootfs().join("etc/ld.so.cache");
                    std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
                    std::fs::write(&cache, hostile_ld_cache(new_format, size)).unwrap();
                    let usage = work.join("usage");
                    match way {
                        Way::Hook => request_gpu(h, &mut b, Path_::Hook, &work),
                        Way::JitCdi => request_gpu(h, &mut b, Path_::JitCdi, &work),
                        Way::CdiHook => {
                            b.add_hook(
                                "prestart",
                                bundle::CDI_HOOK,
                                &[
                                    "update-ldcache",
                                    "--folder",
                                    "/usr/lib64",
                                    "--ldconfig-path",
                                    "/sbin/ldconfig",
                                ],
                            );
                        }
                    }
                    if way != Way::JitCdi {
                        measure_hooks(&mut b, &usage);
                    }
                    let started = std::time::Instant::now();
                    let out = b.run_within("echo RAN", std::time::Duration::from_secs(60));
                    let took = started.elapsed();
                    let context = format!("{way:?}, case {name}: after {took:?}");
                    let out = out.unwrap_or_else(|| panic!("{context}: the start hung"));
                    let context = format!("{context}: {}", bundle::out_text(&out));
                    assert!(out.status.success(), "{context}");
                    assert!(
                        String::from_utf8_lossy(&out.stdout).contains("RAN"),
                        "{context}"
                    );
                    let written = std::fs::read(&cache).unwrap();
                    assert!(
                        written.windows(10).any(|w| w == b"ldconfig ("),
                        "the host ldconfig wrote the cache: {context}"
                    );
                    assert!(
                        written.len() < 1 << 20,
                        "{} bytes: {context}",
                        written.len()
                    );
                    if way == Way::JitCdi {
                        let bound = std::time::Duration::from_secs_f64(LD_CACHE_WALL_BOUND_S * 2.0);
                        assert!(took <= bound, "the start took {took:?}: {context}");
                        return;
                    }
                    let usage = std::fs::read_to_string(&usage).unwrap();
                    let lines: Vec<&str> = usage.lines().filter(|l| !l.is_empty()).collect();
                    assert!(!lines.is_empty(), "no hook measured: {context}");
                    for line in lines {
                        eprintln!("{context}\nhook usage (KiB, s): {line}");
                        let (rss, wall) = line.split_once(' ').unwrap();
                        let (rss, wall): (u64, f64) = (rss.parse().unwrap(), wall.parse().unwrap());
                        assert!(
                            rss <= LD_CACHE_RSS_BOUND_KIB,
                            "hook RSS {rss} KiB: {context}"
                        );
                        assert!(
                            wall <= LD_CACHE_WALL_BOUND_S,
                            "hook took {wall} s: {context}"
                        );
                    }
                });
            }
        }
    });
}

/// An image whose `/usr/local/cuda/compat` and `/etc/ld.so.conf.d` hold 150 000 long names
/// each (names the readers look for: `libcuda.so.*`, and conf files): the prestart hook reads
/// both (forward compatibility, the native ld cache), and keeps only a bounded number of the
/// names it picks, so its memory does not grow with what the image holds. The start succeeds.
#[test]
fn directory_floods_in_the_image_are_read_within_a_bound() {
    let h = host();
    let work = h.dir.join("dir-flood");
    std::fs::create_dir_all(&work).unwrap();
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    let compat = b.rootfs().join("usr/local/cuda/compat");
    let conf_d = b.rootfs().join("etc/ld.so.conf.d");
    std::fs::create_dir_all(&compat).unwrap();
    std::fs::create_dir_all(&conf_d).unwrap();
    let pad = "p".repeat(200);
    for i in 0..150_000 {
        std::fs::File::create(compat.join(format!("libcuda.so.999.{i}.{pad}"))).unwrap();
        std::fs::File::create(conf_d.join(format!("00-nvcr-{i}-{pad}.conf"))).unwrap();
    }
    let usage = work.join("usage");
    request_gpu(h, &mut b, Path_::Hook, &work);
    measure_hooks(&mut b, &usage);
    let out = b
        .run_within("echo RAN", std::time::Duration::from_secs(60))
        .expect("the start hung");
    let context = bundle::out_text(&out);
    assert!(out.status.success(), "{context}");
    let usage = std::fs::read_to_string(&usage).unwrap();
    let line = usage
        .lines()
        .find(|l| !l.is_empty())
        .expect("no hook measured");
    eprintln!("hook usage with 2 x 150 000 names (KiB, s): {line}");
    let rss: u64 = line.split(' ').next().unwrap().parse().unwrap();
    // Every name kept would be 2 x 150 000 x ~220 bytes, about 64 MiB with their allocations.
    assert!(
        rss <= DIR_FLOOD_RSS_BOUND_KIB,
        "hook RSS {rss} KiB: {context}"
    );
}

/// The prestart hook's peak memory on [`directory_floods_in_the_image_are_read_within_a_bound`]'s
/// image: a hook that keeps only what it needs of the directories stays far below it.
const DIR_FLOOD_RSS_BOUND_KIB: u64 = 24 * 1024;

fn ldconfig_scratch_file_hardlinked_to_a_host_file_is_not_written_in_both_paths() {
    // glibc's ldconfig writes its new cache to /etc/ld.so.cache~ with O_CREAT|O_TRUNC, and its
    // aux cache (even with -i) to /var/cache/ldconfig/aux-cache~ the same way: an image's
    // hardlink there (a plain-directory rootfs on the host's file system) to a host file would
    // get that file truncated, written and renamed into the image. The hook unlinks both names
    // through the rootfs gate first: the host files keep their content and the inode is not
    // the container's cache.
    let h = host();
    let work = h.dir.join("ld-scratch");
    std::fs::create_dir_all(&work).unwrap();
    #[derive(Debug, Clone, Copy)]
    enum Case {
        /// The prestart hook with the native writer turned off.
        HookLdconfigFallback,
        /// jit-cdi's update-ldcache on an image whose ld.so.conf has no cache (the fallback).
        JitCdiNoCache,
        /// `nvidia-cdi-hook update-ldcache --ldconfig-only` as a createContainer hook.
        CdiHookLdconfigOnly,
    }
    for case in [
        Case::HookLdconfigFallback,
        Case::JitCdiNoCache,
        Case::CdiHookLdconfigOnly,
    ] {
        let work = work.join(format!("{case:?}"));
        std::fs::create_dir_all(&work).unwrap();
        let host_file = work.join("passwd");
        std::fs::write(&host_file, "root:x:0:0:host file:/root:/bin/sh\n").unwrap();
        let before = std::fs::read(&host_file).unwrap();
        // And the aux cache's scratch file: ldconfig saves an aux cache, `-i` or not, where
        // /var/cache/ldconfig exists.
        let host_aux = work.join("shadow");
        std::fs::write(&host_aux, "root:*:19000:0:99999:7:::\n").unwrap();
        let aux_before = std::fs::read(&host_aux).unwrap();
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        let etc = b.rootfs().join("etc");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::hard_link(&host_file, etc.join("ld.so.cache~")).unwrap();
        let aux_dir = b.rootfs().join("var/cache/ldconfig");
        std::fs::create_dir_all(&aux_dir).unwrap();
        std::fs::hard_link(&host_aux, aux_dir.join("aux-cache~")).unwrap();
        match case {
            Case::HookLdconfigFallback => request_gpu_with(
                h,
                &mut b,
                Path_::Hook,
                &work,
                "[features]\ndisable-native-ldcache = true",
            ),
            Case::JitCdiNoCache => {
                std::fs::write(etc.join("ld.so.conf"), "/usr/lib64\n").unwrap();
                request_gpu(h, &mut b, Path_::JitCdi, &work);
            }
            Case::CdiHookLdconfigOnly => {
                b.add_hook(
                    "createContainer",
                    bundle::CDI_HOOK,
                    &[
                        "update-ldcache",
                        "--folder",
                        "/usr/lib64",
                        "--ldconfig-path",
                        "/sbin/ldconfig",
                        "--ldconfig-only",
                    ],
                );
            }
        }
        let out = b.run("echo RAN");
        let context = format!("case {case:?}: {}", bundle::out_text(&out));
        assert!(out.status.success(), "{context}");
        assert_eq!(
            std::fs::read(&host_file).unwrap(),
            before,
            "the host file was written: {context}"
        );
        assert_eq!(
            std::fs::read(&host_aux).unwrap(),
            aux_before,
            "the host file linked at aux-cache~ was written: {context}"
        );
        use std::os::unix::fs::MetadataExt;
        let host_ino = std::fs::metadata(&host_file).unwrap().ino();
        let cache = std::fs::symlink_metadata(etc.join("ld.so.cache")).unwrap();
        assert_ne!(
            cache.ino(),
            host_ino,
            "the host file became the cache: {context}"
        );
        let written = std::fs::read(etc.join("ld.so.cache")).unwrap();
        assert!(
            written.windows(10).any(|w| w == b"ldconfig ("),
            "the host ldconfig wrote the cache: {context}"
        );
    }
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// which ldconfig runs, and on what.
    image_ldconfig_and_ld_so_conf_d_are_never_used_on_the_host,
    /// host-side processes: Ubuntu's ldconfig is a dynamic shell.
    image_loader_env_never_reaches_host_side_processes,
    /// the i386 entries of the ld cache.
    compat32_libraries_in_both_paths,
    /// the DRI nodes open: allowed by the device rules.
    dri_nodes_in_both_paths,
    /// libraries found by soname through the ld cache.
    gbm_and_glx_indirect_in_both_paths,
    /// a host volume as the mount table shows it.
    application_profile_skips_a_host_volume_at_etc_nvidia,
    /// the channel opens: allowed by the device rules.
    imex_channels_in_both_paths,
    /// the GDS and MOFED nodes open: allowed by the device rules.
    opt_in_sets_in_both_paths,
    /// the MIG access nodes open: allowed by the device rules.
    mig_device_in_both_paths,
    /// the device cgroup itself, v1 or v2.
    device_isolation_in_both_paths,
    /// the compat libraries through the ld cache.
    cuda_compat_libraries_from_the_image_in_both_paths,
    /// which ldconfig the CDI hook runs.
    image_ldconfig_is_never_run_in_the_cdi_path,
    /// the ld cache step (and its memory cgroup on v1).
    ld_cache_step_cannot_be_hung_or_flooded_in_both_paths,
    /// mount namespaces: the runtime's is private on v2.
    prestart_hook_refuses_a_pid_that_is_not_a_container_being_created,
    /// mount propagation: private in the v2 runtime's namespace.
    host_volumes_get_no_files_and_shared_mounts_no_mounts,
    /// /run and host tmpfs mounts as the runtime sees them.
    run_tmpfs_gets_the_socket_and_host_tmpfs_volumes_get_nothing,
    /// host-side processes: Ubuntu's ldconfig is a dynamic shell.
    env_less_hook_entries_never_load_the_image_library,
    /// the ld cache step on a hostile cache.
    hostile_ld_cache_is_not_decoded_past_a_real_caches_bounds_in_both_paths,
    /// the host ldconfig's scratch file.
    ldconfig_scratch_file_hardlinked_to_a_host_file_is_not_written_in_both_paths,
}
