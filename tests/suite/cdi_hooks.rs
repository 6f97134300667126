//! The CDI hooks (`nvidia-cdi-hook`, `nvidia-ctk hook`) end to end: real `runc run`
//! containers with the hooks registered as `createContainer` entries (as CDI specs write them)
//! with an explicit env, on a simulated GPU host (tests/suite/common/fakehost.rs), and under a real
//! crun (`apt-get install -y crun`; its `createContainer` states have `"pid": 0`), the prestart
//! hook too. Every run also checks that the host's mount table is unchanged (Bundle::run).

use crate::common::bundle::{self, out_text, Bundle, Image, CDI_HOOK, CTK};
use crate::common::fakehost::FakeHost;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

struct Host {
    host: FakeHost,
    dir: PathBuf,
}

fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        bundle::require_root();
        bundle::require("runc");
        let (dir, host) = bundle::scratch_host("nvct-cdihook-", 2);
        Host { host, dir }
    })
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh, empty directory on the host that a hostile image points its symlinks at.
fn canary_dir(h: &Host, name: &str) -> PathBuf {
    let d = h.dir.join(format!("canary-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn assert_empty(dir: &Path, context: &str) {
    let entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        entries.is_empty(),
        "{context}: host directory {} was written: {entries:?}",
        dir.display()
    );
}

#[test]
fn create_symlinks_cases() {
    let h = host();
    // (name, hook kind, binary, setup(rootfs, canary), --link, script, Ok(stdout needle) | Err(message needle))
    type Setup = fn(&Path, &Path);
    let none: Setup = |_, _| {};
    let cases: Vec<(&str, &str, &str, Setup, &str, &str, Result<&str, &str>)> = vec![
        (
            "new link",
            "createContainer",
            CDI_HOOK,
            none,
            "libcuda.so.1::/usr/lib64/libcuda.so",
            "readlink /usr/lib64/libcuda.so",
            Ok("libcuda.so.1"),
        ),
        (
            "via nvidia-ctk hook",
            "createContainer",
            CTK,
            none,
            "libcuda.so.1::/usr/lib64/libcuda.so",
            "readlink /usr/lib64/libcuda.so",
            Ok("libcuda.so.1"),
        ),
        (
            "as prestart (enters the mount namespace)",
            "prestart",
            CDI_HOOK,
            none,
            "/a/b::/opt/x/y/link",
            "readlink /opt/x/y/link",
            Ok("/a/b"),
        ),
        (
            "identical link exists",
            "createContainer",
            CDI_HOOK,
            |r, _| {
                std::fs::create_dir_all(r.join("usr/lib64")).unwrap();
                symlink("libcuda.so.1", r.join("usr/lib64/libcuda.so")).unwrap();
            },
            "libcuda.so.1::/usr/lib64/libcuda.so",
            "readlink /usr/lib64/libcuda.so",
            Ok("libcuda.so.1"),
        ),
        (
            "a link to something else is replaced, not followed",
            "createContainer",
            CDI_HOOK,
            |r, canary| {
                std::fs::create_dir_all(r.join("usr/lib64")).unwrap();
                symlink(canary, r.join("usr/lib64/libcuda.so")).unwrap();
            },
            "libcuda.so.1::/usr/lib64/libcuda.so",
            "readlink /usr/lib64/libcuda.so",
            Ok("libcuda.so.1"),
        ),
        (
            "upstream's libGLX_indirect link over Mesa's: replaced, as upstream's hook",
            "createContainer",
            CDI_HOOK,
            |r, _| {
                std::fs::create_dir_all(r.join("usr/lib/x86_64-linux-gnu")).unwrap();
                symlink(
                    "libGLX_mesa.so.0",
                    r.join("usr/lib/x86_64-linux-gnu/libGLX_indirect.so.0"),
                )
                .unwrap();
            },
            "libGLX_nvidia.so.550.54.15::/usr/lib/x86_64-linux-gnu/libGLX_indirect.so.0",
            "readlink /usr/lib/x86_64-linux-gnu/libGLX_indirect.so.0",
            Ok("libGLX_nvidia.so.550.54.15"),
        ),
        (
            "a file of the image is replaced, as upstream's hook",
            "createContainer",
            CDI_HOOK,
            |r, _| {
                std::fs::create_dir_all(r.join("usr/lib64")).unwrap();
                std::fs::write(r.join("usr/lib64/libcuda.so"), "image file").unwrap();
            },
            "libcuda.so.1::/usr/lib64/libcuda.so",
            "readlink /usr/lib64/libcuda.so",
            Ok("libcuda.so.1"),
        ),
        (
            "a directory there refuses the start",
            "createContainer",
            CDI_HOOK,
            |r, _| {
                std::fs::create_dir_all(r.join("usr/lib64/libcuda.so/x")).unwrap();
            },
            "libcuda.so.1::/usr/lib64/libcuda.so",
            "echo STARTED",
            Err("/usr/lib64/libcuda.so already exists in the container and is a directory"),
        ),
        (
            "parent is a symlink to a host dir that exists inside too",
            "createContainer",
            CDI_HOOK,
            |r, canary| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                std::fs::create_dir_all(r.join(canary.strip_prefix("/").unwrap())).unwrap();
                symlink(canary, r.join("usr/lib64")).unwrap();
            },
            "libcuda.so.1::/usr/lib64/libcuda.so",
            "readlink /usr/lib64/libcuda.so",
            Ok("libcuda.so.1"),
        ),
        (
            "parent is a symlink to a host dir only",
            "createContainer",
            CDI_HOOK,
            |r, canary| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                symlink(canary, r.join("usr/lib64")).unwrap();
            },
            "libcuda.so.1::/usr/lib64/libcuda.so",
            "echo STARTED",
            Err("/usr/lib64 is a symlink that points nowhere inside the container"),
        ),
        (
            "parent is a ../ chain",
            "createContainer",
            CDI_HOOK,
            |r, _| {
                std::fs::create_dir_all(r.join("usr")).unwrap();
                symlink("../../../../../../../..", r.join("usr/up")).unwrap();
            },
            "x::/usr/up/escaped",
            "readlink /escaped",
            Ok("x"),
        ),
    ];
    for (name, kind, binary, setup, link, script, want) in cases {
        let canary = canary_dir(h, &name.replace(' ', "-"));
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        setup(&b.rootfs(), &canary);
        b.add_hook(
            kind,
            binary,
            &(if binary == CTK {
                vec!["hook", "create-symlinks", "--link", link]
            } else {
                vec!["create-symlinks", "--link", link]
            }),
        );
        let out = b.run(script);
        let text = out_text(&out);
        match want {
            Ok(needle) => {
                assert!(out.status.success(), "case {name}: {text}");
                assert!(stdout(&out).contains(needle), "case {name}: {text}");
            }
            Err(needle) => {
                assert!(
                    !out.status.success(),
                    "case {name}: the container must not start: {text}"
                );
                assert!(!stdout(&out).contains("STARTED"), "case {name}: {text}");
                assert!(text.contains(needle), "case {name}: {text}");
            }
        }
        assert_empty(&canary, name);
    }
}

/// A stand-in for the image's own ldconfig: if anything ran it, a canary appears in the
/// rootfs (which is the host-visible bundle directory).
const IMAGE_LDCONFIG: &str = "#!/bin/sh\necho ran > /IMAGE-LDCONFIG-RAN\nexit 0\n";

fn install_image_ldconfig(rootfs: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(rootfs.join("sbin")).unwrap();
    std::fs::write(rootfs.join("sbin/ldconfig"), IMAGE_LDCONFIG).unwrap();
    std::fs::set_permissions(
        rootfs.join("sbin/ldconfig"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
}

/// `update-ldcache` writes the cache natively (no ldconfig generator string in it), or with
/// `--ldconfig-only` by the host ldconfig; libcuda.so.1 resolves either way.
fn update_ldcache_makes_libcuda_resolvable() {
    let h = host();
    let version = h.host.driver_version();
    let lib = format!("libcuda.so.{version}");
    for (name, extra, native) in [
        ("native", None, true),
        ("--ldconfig-only", Some("--ldconfig-only"), false),
    ] {
        let mut b = Bundle::new(&h.dir, Image::Glibc);
        install_image_ldconfig(&b.rootfs());
        b.bind_ro(
            &h.host.lib_dir().join(&lib),
            &format!("/usr/lib/x86_64-linux-gnu/{lib}"),
        );
        let mut args = vec![
            "update-ldcache",
            "--folder",
            "/usr/lib/x86_64-linux-gnu",
            "--ldconfig-path",
            "/sbin/ldconfig",
        ];
        args.extend(extra);
        b.add_hook("createContainer", CDI_HOOK, &args);
        let out = b.run(
            "dlcuda; readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; \
             cat /etc/ld.so.conf.d/00-nvcr-*.conf; cat /etc/ld.so.conf",
        );
        let text = format!("case {name}: {}", out_text(&out));
        let so = stdout(&out);
        assert!(out.status.success(), "{text}");
        assert!(
            so.contains("cuDriverGetVersion rc=0 version=12040"),
            "dlopen(libcuda.so.1) through the cache: {text}"
        );
        assert!(so.contains(&lib), "SONAME link: {text}");
        assert!(
            so.contains("/usr/lib/x86_64-linux-gnu\n"),
            "conf file lists the folder: {text}"
        );
        assert!(
            so.contains("include /etc/ld.so.conf.d/*.conf"),
            "the image's ld.so.conf is kept: {text}"
        );
        let cache = std::fs::read(b.rootfs().join("etc/ld.so.cache")).unwrap();
        assert!(
            cache.windows(12).any(|w| w == b"libcuda.so.1"),
            "ld.so.cache in the rootfs has libcuda.so.1: {text}"
        );
        assert!(
            cache.windows(10).any(|w| w == b"libc.so.6\0"),
            "the image's libc stays in the cache: {text}"
        );
        let generator = cache.windows(10).any(|w| w == b"ldconfig (");
        assert_eq!(generator, !native, "written natively: {native}: {text}");
        assert!(
            !b.rootfs().join("IMAGE-LDCONFIG-RAN").exists(),
            "the image's /sbin/ldconfig must never run: {text}"
        );
    }
}

fn update_ldcache_refusals() {
    let h = host();
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "relative ldconfig",
            &[
                "update-ldcache",
                "--folder",
                "/usr/lib",
                "--ldconfig-path",
                "sbin/ldconfig",
            ],
            "is not absolute",
        ),
        (
            "missing ldconfig",
            &[
                "update-ldcache",
                "--folder",
                "/usr/lib",
                "--ldconfig-path",
                "/nonexistent/ldconfig",
            ],
            "/nonexistent/ldconfig",
        ),
        (
            "folder with ..",
            &[
                "update-ldcache",
                "--folder",
                "/usr/../etc",
                "--ldconfig-path",
                "/sbin/ldconfig",
            ],
            "/usr/../etc",
        ),
    ];
    for (name, args, needle) in cases {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        install_image_ldconfig(&b.rootfs());
        b.add_hook("createContainer", CDI_HOOK, args);
        let out = b.run("echo STARTED");
        let text = out_text(&out);
        assert!(
            !out.status.success() && !stdout(&out).contains("STARTED"),
            "case {name}: {text}"
        );
        assert!(text.contains(needle), "case {name}: {text}");
        assert!(
            !b.rootfs().join("IMAGE-LDCONFIG-RAN").exists(),
            "case {name}: {text}"
        );
    }
}

fn update_ldcache_never_writes_through_a_planted_conf_file() {
    // The conf name is predictable (a hash of the folder list). The image plants a symlink to
    // a host file there, or a hardlink of a host file: the hook writes a temp file and renames
    // it over the name, so the planted entry is replaced, the host file is never opened, and
    // the container starts with our entry.
    let h = host();
    // The name the hook will use for this folder list (stable: a hash of the contents).
    let mut probe = Bundle::new(&h.dir, Image::Busybox);
    probe.add_hook(
        "createContainer",
        CDI_HOOK,
        &["update-ldcache", "--folder", "/usr/lib64"],
    );
    let out = probe.run("ls /etc/ld.so.conf.d");
    assert!(out.status.success(), "{}", out_text(&out));
    let name = stdout(&out)
        .lines()
        .find(|l| l.starts_with("00-nvcr-"))
        .expect("conf name")
        .to_string();
    for hardlink in [false, true] {
        let canary = canary_dir(
            h,
            if hardlink {
                "ldconf-hardlink"
            } else {
                "ldconf"
            },
        );
        let target = canary.join("victim.conf");
        std::fs::write(&target, "host content\n").unwrap();
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        let confd = b.rootfs().join("etc/ld.so.conf.d");
        std::fs::create_dir_all(&confd).unwrap();
        if hardlink {
            std::fs::hard_link(&target, confd.join(&name)).unwrap();
        } else {
            symlink(&target, confd.join(&name)).unwrap();
        }
        b.add_hook(
            "createContainer",
            CDI_HOOK,
            &["update-ldcache", "--folder", "/usr/lib64"],
        );
        let out = b.run(&format!("cat /etc/ld.so.conf.d/{name}"));
        let text = format!("hardlink {hardlink}: {}", out_text(&out));
        assert!(out.status.success(), "{text}");
        assert_eq!(stdout(&out), "/usr/lib64\n", "{text}");
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "host content\n",
            "the host file changed: {text}"
        );
        let entries: Vec<_> = std::fs::read_dir(&canary)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            entries.len(),
            1,
            "the host dir changed: {entries:?}: {text}"
        );
    }
}

#[test]
fn disable_device_node_modification_masks_params() {
    let h = host();
    let proc_root = h.host.proc_root();
    let host_params = std::fs::read_to_string(proc_root.join("driver/nvidia/params")).unwrap();
    assert!(
        host_params.contains("ModifyDeviceFiles: 1"),
        "fake host params: {host_params}"
    );
    for kind in ["createContainer", "prestart"] {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.add_hook(
            kind,
            CDI_HOOK,
            &[
                "disable-device-node-modification",
                "--proc-root",
                proc_root.to_str().unwrap(),
            ],
        );
        let out = b.run("cat /proc/driver/nvidia/params; cat /proc/driver/nvidia/version; echo x > /proc/driver/nvidia/params || echo RO");
        let text = out_text(&out);
        let so = stdout(&out);
        assert!(out.status.success(), "{kind}: {text}");
        assert!(
            so.contains("ModifyDeviceFiles: 0") && !so.contains("ModifyDeviceFiles: 1"),
            "{kind}: {text}"
        );
        assert!(
            so.contains(h.host.driver_version()),
            "{kind}: the other files are still there: {text}"
        );
        assert!(so.contains("RO"), "{kind}: read-only: {text}");
    }
}

#[test]
fn enable_cuda_compat_cases() {
    let h = host();
    let host_version = h.host.driver_version().to_string();
    assert!(
        host_version.starts_with("550."),
        "fake host version {host_version}"
    );
    type Setup = fn(&Path);
    fn compat(r: &Path) -> PathBuf {
        let d = r.join("usr/local/cuda/compat");
        std::fs::create_dir_all(&d).unwrap();
        d
    }
    let cases: Vec<(&str, Setup, bool)> = vec![
        (
            "newer major",
            |r| std::fs::write(compat(r).join("libcuda.so.560.35.03"), "").unwrap(),
            true,
        ),
        (
            "same major, newer minor (upstream compares majors)",
            |r| std::fs::write(compat(r).join("libcuda.so.550.99.01"), "").unwrap(),
            false,
        ),
        (
            "older",
            |r| std::fs::write(compat(r).join("libcuda.so.535.104.05"), "").unwrap(),
            false,
        ),
        (
            "symlink named like a newer lib",
            |r| symlink("/etc/passwd", compat(r).join("libcuda.so.999.1")).unwrap(),
            false,
        ),
        (
            "directory named like a newer lib",
            |r| std::fs::create_dir_all(compat(r).join("libcuda.so.999.1")).unwrap(),
            false,
        ),
        ("no compat dir", |_| {}, false),
        (
            "compat dir is a symlink to a host dir",
            |r| {
                std::fs::create_dir_all(r.join("usr/local/cuda")).unwrap();
                symlink("/usr/lib/x86_64-linux-gnu", r.join("usr/local/cuda/compat")).unwrap();
            },
            false,
        ),
    ];
    for (name, setup, want) in cases {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        setup(&b.rootfs());
        b.add_hook(
            "createContainer",
            CDI_HOOK,
            &["enable-cuda-compat", "--host-driver-version", &host_version],
        );
        let out = b.run("cat /etc/ld.so.conf.d/00-compat-*.conf 2>/dev/null; echo END");
        let text = out_text(&out);
        assert!(out.status.success(), "case {name}: {text}");
        assert_eq!(
            stdout(&out).contains("/usr/local/cuda/compat"),
            want,
            "case {name}: {text}"
        );
    }
    // The conf file only names the directory: nothing from the image is mounted.
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    std::fs::write(compat(&b.rootfs()).join("libcuda.so.560.35.03"), "").unwrap();
    b.add_hook(
        "createContainer",
        CDI_HOOK,
        &["enable-cuda-compat", "--host-driver-version", &host_version],
    );
    let out = b.run("grep -c compat /proc/mounts; true");
    assert_eq!(stdout(&out).trim(), "0", "{}", out_text(&out));

    // Upstream's other flags: another compat dir; a host CUDA version (whose comparison needs
    // the compat libcuda's ELF note, not read here) leaves forward compatibility off.
    let flag_cases: [(&str, &str, &[&str], Option<&str>); 3] = [
        (
            "--cuda-compat-container-root",
            "opt/compat",
            &["--cuda-compat-container-root", "/opt/compat"],
            Some("/opt/compat"),
        ),
        (
            "--host-cuda-version",
            "usr/local/cuda/compat",
            &["--host-cuda-version", "12.4"],
            None,
        ),
        (
            "default dir",
            "usr/local/cuda/compat",
            &[],
            Some("/usr/local/cuda/compat"),
        ),
    ];
    for (name, dir, extra, want) in flag_cases {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        let d = b.rootfs().join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("libcuda.so.560.35.03"), "").unwrap();
        let mut args = vec!["enable-cuda-compat", "--host-driver-version", &host_version];
        args.extend(extra);
        b.add_hook("createContainer", CDI_HOOK, &args);
        let out = b.run("cat /etc/ld.so.conf.d/00-compat-*.conf 2>/dev/null; echo END");
        let text = out_text(&out);
        assert!(out.status.success(), "case {name}: {text}");
        let listed = stdout(&out)
            .lines()
            .find(|l| l.starts_with('/'))
            .map(String::from);
        assert_eq!(listed.as_deref(), want, "case {name}: {text}");
    }
}

/// Runs `binary args` directly with `stdin`.
fn direct(binary: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("LD_PRELOAD", "/nonexistent/evil.so")
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn command_line_cases() {
    let h = host();
    let _ = h;
    let state = br#"{"pid":1,"bundle":"/nonexistent/bundle"}"#;
    let cases: &[(&str, &str, &[&str], &[u8], i32, &str)] = &[
        (
            "unknown hook",
            CDI_HOOK,
            &["frobnicate", "--flag", "x"],
            b"",
            0,
            "warning: unknown hook \"frobnicate\"",
        ),
        (
            "unknown hook via nvidia-ctk",
            CTK,
            &["hook", "chmod", "--mode", "755"],
            b"",
            0,
            "warning: unknown hook \"chmod\"",
        ),
        (
            "bad stdin",
            CDI_HOOK,
            &["create-symlinks", "--link", "a::/b"],
            b"{not json",
            1,
            "not valid JSON",
        ),
        (
            "empty stdin",
            CDI_HOOK,
            &["enable-cuda-compat", "--host-driver-version", "550.1"],
            b"",
            1,
            "not valid JSON",
        ),
        (
            "missing bundle",
            CDI_HOOK,
            &["disable-device-node-modification"],
            state,
            1,
            "/nonexistent/bundle/config.json",
        ),
        (
            "bad link",
            CDI_HOOK,
            &["create-symlinks", "--link", "a:/b"],
            state,
            1,
            "is not TARGET::LINK",
        ),
        (
            "--container-spec: the state from a file",
            CDI_HOOK,
            &[
                "disable-device-node-modification",
                "--container-spec",
                "/nonexistent/state.json",
            ],
            b"",
            1,
            "--container-spec /nonexistent/state.json",
        ),
        (
            "--container-spec -: the state from stdin",
            CDI_HOOK,
            &[
                "update-ldcache",
                "--container-spec",
                "-",
                "--folder",
                "/usr/lib",
            ],
            state,
            1,
            "/nonexistent/bundle/config.json",
        ),
        (
            "huge state",
            CDI_HOOK,
            &["create-symlinks", "--link", "a::/b"],
            &[b' '; 2 << 20],
            1,
            "larger than",
        ),
        (
            "version",
            CDI_HOOK,
            &["--version"],
            b"",
            0,
            "nvidia-cdi-hook",
        ),
    ];
    for (name, binary, args, stdin, code, needle) in cases {
        let out = direct(binary, args, stdin);
        let text = out_text(&out);
        assert_eq!(out.status.code(), Some(*code), "case {name}: {text}");
        assert!(text.contains(needle), "case {name}: {text}");
    }
}

/// `--debug` puts one line of step timings on stderr (scripts/bench.sh --breakdown reads it),
/// for `nvidia-cdi-hook` and `nvidia-ctk hook` alike; without it stderr stays empty. Only the
/// step names are checked, never the times.
#[test]
fn debug_prints_the_step_timings() {
    let h = host();
    let bundle = h.dir.join(format!("debug-steps-{}", std::process::id()));
    std::fs::create_dir_all(bundle.join("rootfs")).unwrap();
    std::fs::write(
        bundle.join("config.json"),
        r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"}}"#,
    )
    .unwrap();
    let state = format!(r#"{{"pid":0,"bundle":"{}"}}"#, bundle.display());
    let cases: &[(&str, &str, &[&str], Option<&str>)] = &[
        (
            "nvidia-cdi-hook --debug",
            CDI_HOOK,
            &["--debug", "apply-edits"],
            Some("nvidia-cdi-hook: step timings (us): args="),
        ),
        (
            "nvidia-ctk --debug hook",
            CTK,
            &["--debug", "hook", "apply-edits"],
            Some("nvidia-ctk hook: step timings (us): args="),
        ),
        ("no --debug: nothing", CDI_HOOK, &["apply-edits"], None),
    ];
    for (name, binary, args, want) in cases {
        let out = direct(binary, args, state.as_bytes());
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "case {name}: {err}");
        match want {
            Some(prefix) => {
                let line = err.lines().find(|l| l.starts_with(prefix));
                let line = line.unwrap_or_else(|| panic!("case {name}: no {prefix:?} in {err}"));
                let steps: Vec<&str> = line
                    .split_once("(us): ")
                    .unwrap()
                    .1
                    .split(' ')
                    .map(|kv| kv.split_once('=').unwrap().0)
                    .collect();
                // Nothing to edit: the state is read, then the hook stops before entering (no
                // mask asked for: nothing rediscovered).
                assert_eq!(steps, ["args", "state", "total"], "case {name}: {line}");
            }
            None => assert!(!err.contains("step timings"), "case {name}: {err}"),
        }
    }
    std::fs::remove_dir_all(&bundle).unwrap();
}

/// `crun run` of `b` with `sh -c script`. crun 1.8 refuses this machine's hybrid cgroup
/// layout ("cgroups in hybrid mode not supported"), so it runs in a private mount namespace
/// without the cgroup2 mount at /sys/fs/cgroup/unified and with `--cgroup-manager=disabled`
/// (the CDI hooks touch no cgroup). The host's mount table is compared around the run.
fn crun_run(b: &mut Bundle, script: &str) -> Output {
    let crun = bundle::require("crun");
    b.spec["process"]["args"] = serde_json::json!(["sh", "-c", script]);
    std::fs::write(
        b.dir.join("config.json"),
        serde_json::to_vec_pretty(&b.spec).unwrap(),
    )
    .unwrap();
    let _quiet = crate::common::engines::quiet();
    let before = bundle::host_mounts();
    let out = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount --make-rprivate / && { umount /sys/fs/cgroup/unified 2>/dev/null; true; } && \
             exec \"$0\" --cgroup-manager=disabled run --bundle \"$1\" \"$2\"",
        ])
        .arg(&crun)
        .arg(&b.dir)
        .arg(&b.id)
        .stdin(Stdio::null())
        .output()
        .expect("unshare");
    let _ = Command::new(&crun).args(["delete", "-f", &b.id]).output();
    assert_eq!(
        bundle::host_mounts(),
        before,
        "the host mount table changed"
    );
    out
}

/// Under crun the CDI hooks get `"pid": 0` at createContainer (crun runs them from the
/// container's init, inside its mount namespace): they stay in that namespace and edit the
/// container, as under runc. A recorder hook shows the state crun really passes. At prestart
/// crun passes the pid and the hooks enter the namespace.
#[test]
fn crun_runs_the_cdi_hooks_at_each_stage() {
    let h = host();
    let version = h.host.driver_version();
    let lib = format!("libcuda.so.{version}");
    for stage in ["createContainer", "prestart"] {
        let mut b = Bundle::new(&h.dir, Image::Glibc);
        // crun makes a read-only rootfs read-only before createContainer (runc after it):
        // a writable one, as podman gives without --read-only.
        b.spec["root"]["readonly"] = serde_json::json!(false);
        b.bind_ro(
            &h.host.lib_dir().join(&lib),
            &format!("/usr/lib/x86_64-linux-gnu/{lib}"),
        );
        let recorded = b.dir.join(format!("{stage}-state.json"));
        let record = format!("cat > {}", recorded.display());
        b.add_hook(stage, "/bin/sh", &["-c", &record]);
        b.add_hook(
            stage,
            CDI_HOOK,
            &[
                "create-symlinks",
                "--link",
                "libcuda.so.1::/usr/lib64/libcuda.so",
            ],
        );
        b.add_hook(
            stage,
            CDI_HOOK,
            &[
                "update-ldcache",
                "--folder",
                "/usr/lib/x86_64-linux-gnu",
                "--ldconfig-path",
                "/sbin/ldconfig",
            ],
        );
        let out = crun_run(&mut b, "readlink /usr/lib64/libcuda.so; dlcuda");
        let text = format!("stage {stage}: {}", out_text(&out));
        let state: serde_json::Value = serde_json::from_slice(
            &std::fs::read(&recorded).unwrap_or_else(|e| panic!("{text}\nno recorded state: {e}")),
        )
        .unwrap();
        if stage == "createContainer" {
            assert_eq!(state["pid"], 0, "crun's createContainer state: {state}");
        } else {
            assert!(
                state["pid"].as_u64().unwrap_or(0) > 0,
                "crun's prestart state: {state}"
            );
        }
        assert!(out.status.success(), "{text}");
        let so = stdout(&out);
        assert!(so.contains("libcuda.so.1\n"), "the link: {text}");
        assert!(
            so.contains("cuDriverGetVersion rc=0 version=12040"),
            "dlopen(libcuda.so.1) through the cache: {text}"
        );
    }
}

/// The prestart hook (podman's hooks.d route) under a real crun: crun's prestart state has the
/// container's pid and its bundle, and the GPU asked for arrives. `no-cgroups = true`: crun
/// runs here without cgroups (see [`crun_run`]), as a rootless podman does.
#[test]
fn crun_runs_the_prestart_hook() {
    let h = host();
    let config = bundle::write_config(&h.dir, &h.host.driver_root(), &h.host.proc_root(), "");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("no-cgroups = true\n");
    std::fs::write(&config, text).unwrap();
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.hook(&config);
    b.env("NVIDIA_VISIBLE_DEVICES=1");
    let out = crun_run(
        &mut b,
        "ls /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl 2>&1; true",
    );
    let text = out_text(&out);
    assert!(out.status.success(), "{text}");
    let seen = stdout(&out);
    for (node, want) in [
        ("/dev/nvidia1", true),
        ("/dev/nvidiactl", true),
        ("/dev/nvidia0", false),
    ] {
        assert_eq!(
            seen.lines().any(|l| l == node),
            want,
            "{node} should be there: {want}: {text}"
        );
    }
}

/// `update-application-profile` (and `apply-edits --update-application-profile`) under real
/// runc: the `/dev/nvidiaN` nodes config.json gives the container (runc makes them before
/// `createContainer` hooks run) set bits N of the `EGLVisibleDGPUDevices` mask in
/// /etc/nvidia/nvidia-application-profiles-rc.d/10-container.conf (mode 0444); other NVIDIA
/// nodes count for nothing, and without a GPU node nothing is written. An image's link at the
/// file is replaced, never written through; a directory link that points only at the host is
/// refused (the container does not start).
#[test]
fn update_application_profile_cases() {
    use std::os::unix::fs::PermissionsExt;
    let h = host();
    const DIR: &str = "etc/nvidia/nvidia-application-profiles-rc.d";
    type Setup = fn(&Path, &Path);
    let none: Setup = |_, _| {};
    let profile = |mask: &str| {
        format!(
            "{{\"profiles\":[{{\"name\":\"_container_\",\"settings\":[\"EGLVisibleDGPUDevices\",{mask}]}}],\
             \"rules\":[{{\"pattern\":[],\"profile\":\"_container_\"}}]}}"
        )
    };
    // (name, binary + args, the nodes config.json gives (path, minor), setup,
    //  Ok(the mask written, if any) | Err(the refusal))
    let separate: &[&str] = &["update-application-profile"];
    let one: &[&str] = &["hook", "apply-edits", "--update-application-profile"];
    type Want<'a> = Result<Option<&'a str>, &'a str>;
    let cases: Vec<(&str, &str, &[&str], Vec<(&str, u32)>, Setup, Want)> = vec![
        (
            "GPU 1",
            CDI_HOOK,
            separate,
            vec![("/dev/nvidia1", 1)],
            none,
            Ok(Some("0x2")),
        ),
        (
            "GPUs 0 and 3, the control node counts for nothing",
            CDI_HOOK,
            separate,
            vec![("/dev/nvidia0", 0), ("/dev/nvidia3", 3), ("/dev/nvidiactl", 255)],
            none,
            Ok(Some("0x9")),
        ),
        (
            "through nvidia-ctk hook apply-edits",
            CTK,
            one,
            vec![("/dev/nvidia1", 1)],
            none,
            Ok(Some("0x2")),
        ),
        (
            "no GPU node: nothing written",
            CDI_HOOK,
            separate,
            vec![("/dev/nvidiactl", 255)],
            none,
            Ok(None),
        ),
        (
            "the image's profile is a link to a host file: replaced, not followed",
            CDI_HOOK,
            separate,
            vec![("/dev/nvidia0", 0)],
            |r, canary| {
                std::fs::create_dir_all(r.join(DIR)).unwrap();
                symlink(canary.join("target"), r.join(DIR).join("10-container.conf")).unwrap();
            },
            Ok(Some("0x1")),
        ),
        (
            "the image's profile dir is a link to a host dir only: refused",
            CDI_HOOK,
            separate,
            vec![("/dev/nvidia0", 0)],
            |r, canary| {
                std::fs::create_dir_all(r.join("etc/nvidia")).unwrap();
                symlink(canary, r.join(DIR)).unwrap();
            },
            Err("/etc/nvidia/nvidia-application-profiles-rc.d is a symlink that points nowhere inside the container"),
        ),
    ];
    for (name, binary, args, nodes, setup, want) in cases {
        let canary = canary_dir(h, &name.replace(' ', "-").replace([',', ':', '\''], ""));
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        setup(&b.rootfs(), &canary);
        let devices: Vec<serde_json::Value> = nodes
            .iter()
            .map(|(path, minor)| {
                serde_json::json!({"path": path, "type": "c", "major": 195, "minor": minor})
            })
            .collect();
        b.spec["linux"]["devices"] = serde_json::Value::Array(devices);
        b.add_hook("createContainer", binary, args);
        let out = b.run(&format!(
            "echo STARTED; cat /{DIR}/10-container.conf 2>/dev/null; true"
        ));
        let text = out_text(&out);
        let got = stdout(&out);
        match want {
            Ok(Some(mask)) => {
                assert!(out.status.success(), "case {name}: {text}");
                assert_eq!(
                    got,
                    format!("STARTED\n{}", profile(mask)),
                    "case {name}: {text}"
                );
                let file = b.rootfs().join(DIR).join("10-container.conf");
                let meta = std::fs::symlink_metadata(&file).unwrap();
                assert!(meta.is_file(), "case {name}: a regular file");
                assert_eq!(meta.permissions().mode() & 0o7777, 0o444, "case {name}");
            }
            Ok(None) => {
                assert!(out.status.success(), "case {name}: {text}");
                assert_eq!(got, "STARTED\n", "case {name}: {text}");
            }
            Err(needle) => {
                assert!(!out.status.success(), "case {name}: must not start: {text}");
                assert!(!got.contains("STARTED"), "case {name}: {text}");
                assert!(text.contains(needle), "case {name}: {text}");
            }
        }
        assert_empty(&canary, name);
    }
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// update-ldcache: native, or by the host ldconfig.
    update_ldcache_makes_libcuda_resolvable,
    /// the ldconfig update-ldcache runs.
    update_ldcache_refusals,
    /// update-ldcache and the image's ld.so.conf.d.
    update_ldcache_never_writes_through_a_planted_conf_file,
}

/// A runtime in a mount namespace of its own (docker as a snap, a unit with `PrivateMounts=`,
/// a wrapper's `unshare -m`) has filesystems that PID 1's mount table does not list. A tmpfs
/// mounted only there and bound into the container is a volume all the same: the CDI hooks
/// (createContainer, run from inside the container's mount namespace) must judge it against
/// the runtime's table, not `/proc/1/mountinfo`, and write nothing into it (here: the image's
/// lib dir is a symlink into the volume, so `create-symlinks` would put `libcuda.so` there).
/// Under runc and under crun; the volume's listing is taken in that namespace after the run.
#[test]
fn a_volume_only_the_runtimes_namespace_has_gets_nothing_under_runc_and_crun() {
    let h = host();
    for runtime in ["runc", "crun"] {
        let bin = bundle::require(runtime);
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.spec["root"]["readonly"] = serde_json::json!(false);
        let vol = h.dir.join(format!("ns-only-vol-{runtime}"));
        std::fs::create_dir_all(&vol).unwrap();
        std::fs::create_dir_all(b.rootfs().join("usr")).unwrap();
        symlink("/vol", b.rootfs().join("usr/lib64")).unwrap();
        b.spec["mounts"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "destination": "/vol", "type": "bind", "source": vol, "options": ["rbind", "rw"],
            }));
        // Through sh, for the hook's stderr (crun does not pass it on).
        let log = b.dir.join("hook.log");
        let line = format!(
            "exec {CDI_HOOK} create-symlinks --link libcuda.so.1::/usr/lib64/libcuda.so 2>>{}",
            log.display()
        );
        b.add_hook("createContainer", "/bin/sh", &["-c", &line]);
        b.spec["process"]["args"] = serde_json::json!(["sh", "-c", "ls -A /vol; echo RAN"]);
        std::fs::write(
            b.dir.join("config.json"),
            serde_json::to_vec_pretty(&b.spec).unwrap(),
        )
        .unwrap();
        let run = match runtime {
            "runc" => "\"$RT\" run --bundle \"$B\" \"$ID\"",
            _ => "{ umount /sys/fs/cgroup/unified 2>/dev/null; true; } && \"$RT\" --cgroup-manager=disabled run --bundle \"$B\" \"$ID\"",
        };
        let script = format!(
            "mount --make-rprivate / && mount -t tmpfs -o size=1m tmpfs \"$VOL\" && \
             echo keep > \"$VOL/keep\" && {run}; rc=$?; echo VOLUME; ls -A \"$VOL\"; exit $rc"
        );
        let _quiet = crate::common::engines::quiet();
        let before = bundle::host_mounts();
        let out = Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .env("RT", &bin)
            .env("B", &b.dir)
            .env("ID", &b.id)
            .env("VOL", &vol)
            .stdin(Stdio::null())
            .output()
            .expect("unshare");
        let _ = Command::new(&bin).args(["delete", "-f", &b.id]).output();
        assert_eq!(
            bundle::host_mounts(),
            before,
            "the host mount table changed"
        );
        let hook_log = std::fs::read_to_string(&log).unwrap_or_default();
        let text = format!("{}\n--- the hook's stderr\n{hook_log}", out_text(&out));
        let context = format!("{runtime}: {text}");
        let listing = stdout(&out);
        let volume = listing.split("VOLUME\n").nth(1).unwrap_or_default();
        assert_eq!(
            volume.split_whitespace().collect::<Vec<_>>(),
            ["keep"],
            "our hook wrote into a volume of the runtime's namespace: {context}"
        );
        assert!(
            !out.status.success() && hook_log.contains("also mounted on the host"),
            "the start is refused naming the rule: {context}"
        );
    }
}

/// crun `--userns=nomap` runs the hooks where the bundle's config.json cannot be read; its state
/// names the rootfs (`root`), and the CDI hooks take it from there (as upstream since 7df27d08).
/// Without `root` the missing config.json is still an error naming it.
#[test]
fn the_state_root_stands_in_for_an_unreadable_config_json() {
    let h = host();
    let dir = h.dir.join("state-root");
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(rootfs.join("usr/lib64")).unwrap();
    let bundle = dir.join("bundle-without-config");
    std::fs::create_dir_all(&bundle).unwrap();
    let with_root = format!(
        r#"{{"ociVersion":"1.0","id":"nomap","pid":0,"root":"{}","bundle":"{}","status":"created"}}"#,
        rootfs.display(),
        bundle.display()
    );
    let args = [
        "create-symlinks",
        "--link",
        "libcuda.so.1::/usr/lib64/libcuda.so",
    ];
    let out = direct(CDI_HOOK, &args, with_root.as_bytes());
    assert!(out.status.success(), "{}", out_text(&out));
    assert_eq!(
        std::fs::read_link(rootfs.join("usr/lib64/libcuda.so")).unwrap(),
        Path::new("libcuda.so.1")
    );
    let without = format!(r#"{{"pid":0,"bundle":"{}"}}"#, bundle.display());
    let out = direct(CDI_HOOK, &args, without.as_bytes());
    assert_eq!(out.status.code(), Some(1), "{}", out_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("config.json"),
        "{}",
        out_text(&out)
    );
}
