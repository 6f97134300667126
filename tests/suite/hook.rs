//! The prestart hook end to end: real `runc run` containers on a simulated 8-GPU host
//! (tests/suite/common/fakehost.rs), with the hook in config.json. Every run also checks that the
//! host's mount table is the same after the container exited as before (Bundle::run).

use crate::common::bundle::{self, out_text, Bundle, Image, HOOK};
use crate::common::fakehost::FakeHost;
use crate::common::hostkind;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

struct Host {
    host: FakeHost,
    dir: PathBuf,
    config: PathBuf,
}

/// One simulated 8-GPU host shared by the tests of this binary.
fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        bundle::require_root();
        bundle::require("runc");
        let (dir, host) = bundle::scratch_host("nvct-hook-", 8);
        let config = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
        Host { host, dir, config }
    })
}

/// Lists `/dev/nvidia*` (name major:minor), and whether the control node and libraries are in.
const SHOW: &str =
    "for f in /dev/nvidia*; do test -e $f && echo \"DEV $f $(stat -c '%t:%T' $f)\"; done; \
                    test -e /usr/lib64/libnvidia-ml.so.550.54.15 && echo LIBS; true";

fn devs(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("DEV "))
        .map(String::from)
        .collect()
}

#[test]
fn visible_devices_cases() {
    let h = host();
    let uuid = |i: usize| h.host.gpus()[i].uuid.clone();
    let bus = |i: usize| h.host.gpus()[i].bus_id.clone();
    let base = ["/dev/nvidia-uvm 1fc:0", "/dev/nvidia-uvm-tools 1fc:1"];
    let with = |gpus: &[u32]| -> Vec<String> {
        let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        v.extend(gpus.iter().map(|g| format!("/dev/nvidia{g} c3:{g:x}")));
        v.push("/dev/nvidiactl c3:ff".into());
        v
    };
    let cases: Vec<(&str, Option<String>, Vec<String>, bool)> = vec![
        ("indices", Some("0,2".into()), with(&[0, 2]), true),
        (
            "uuids",
            Some(format!("{},{}", uuid(0), uuid(2))),
            with(&[0, 2]),
            true,
        ),
        (
            "bus ids",
            Some(format!("{},{}", bus(2), bus(0))),
            with(&[0, 2]),
            true,
        ),
        (
            "all",
            Some("all".into()),
            with(&[0, 1, 2, 3, 4, 5, 6, 7]),
            true,
        ),
        ("none", Some("none".into()), with(&[]), true),
        ("unset", None, vec![], false),
        ("empty", Some(String::new()), vec![], false),
        ("void", Some("void".into()), vec![], false),
    ];
    for (name, value, want_devs, want_libs) in cases {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.hook(&h.config);
        if let Some(v) = value {
            b.env(&format!("NVIDIA_VISIBLE_DEVICES={v}"));
        }
        let out = b.run(SHOW);
        let text = out_text(&out);
        assert!(out.status.success(), "case {name}: {text}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(devs(&stdout), want_devs, "case {name}: {text}");
        assert_eq!(stdout.contains("LIBS"), want_libs, "case {name}: {text}");
    }
}

fn imex_channels_cases() {
    // NVIDIA_IMEX_CHANNELS: the channel nodes, openable (the device cgroup allows them: ENXIO
    // from a host without the driver, not EPERM); a channel the host lacks refuses the start.
    let h = host();
    let script = "ls /dev/nvidia-caps-imex-channels 2>/dev/null; \
                  for c in /dev/nvidia-caps-imex-channels/*; do cat $c; done; true";
    let cases: &[(&str, &str, Result<&[&str], &str>)] = &[
        ("one", "1", Ok(&["channel1"])),
        ("two", "0,1", Ok(&["channel0", "channel1"])),
        // As upstream's: `all` is no grant of every channel.
        ("all gives none", "all", Ok(&[])),
        ("none", "none", Ok(&[])),
        (
            "missing",
            "5",
            Err("/dev/nvidia-caps-imex-channels/channel5 is missing on the host"),
        ),
    ];
    for (name, value, want) in cases {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.hook(&h.config)
            .env("NVIDIA_VISIBLE_DEVICES=0")
            .env(&format!("NVIDIA_IMEX_CHANNELS={value}"));
        let out = b.run(script);
        let text = out_text(&out);
        match want {
            Ok(channels) => {
                assert!(out.status.success(), "case {name}: {text}");
                let stdout = String::from_utf8_lossy(&out.stdout);
                let got: Vec<&str> = stdout.lines().map(str::trim).collect();
                assert_eq!(&got, channels, "case {name}: {text}");
                let stderr = String::from_utf8_lossy(&out.stderr);
                for c in *channels {
                    assert!(
                        stderr.contains(&format!("{c}': No such device or address")),
                        "case {name}: {c} allowed by the device cgroup: {text}"
                    );
                }
            }
            Err(msg) => {
                assert!(!out.status.success(), "case {name}: {text}");
                assert!(text.contains(msg), "case {name}: {text}");
            }
        }
    }
}

#[test]
fn unknown_device_refuses_the_container() {
    let h = host();
    for (name, value, needle) in [
        ("index out of range", "9", "unknown device \"9\""),
        (
            "unknown uuid",
            "GPU-00000000-0000-0000-0000-000000000000",
            "GPU-00000000-0000-0000-0000-000000000000",
        ),
        ("not an id", "0,gpu1", "\"gpu1\""),
    ] {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.hook(&h.config)
            .env(&format!("NVIDIA_VISIBLE_DEVICES={value}"));
        let out = b.run("echo STARTED");
        // runc quotes the hook's stderr: unescape it to look for the message.
        let text = out_text(&out).replace("\\\"", "\"");
        assert!(
            !out.status.success(),
            "case {name}: container must not start: {text}"
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("STARTED"),
            "case {name}: {text}"
        );
        assert!(
            text.contains(needle),
            "case {name}: message must name the id: {text}"
        );
    }
}

fn device_cgroup_allows_only_injected_gpus() {
    let h = host();
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.hook(&h.config)
        .env("NVIDIA_VISIBLE_DEVICES=0,2")
        .add_capability("CAP_MKNOD");
    let out = b.run(&format!(
        "cat /dev/nvidia0; mknod /dev/nvidia1 c 195 1 && echo MKNOD-OK; cat /dev/nvidia1; \
                     mknod /dev/nvidia-x c 195 2 && cat /dev/nvidia-x; mknod /dev/mem2 c 1 1 && cat /dev/mem2; \
                     echo null > /dev/null && echo NULL-OK; {}; true",
        hostkind::SHOW_CGROUP
    ));
    let text = out_text(&out);
    hostkind::assert_device_cgroup(&String::from_utf8_lossy(&out.stdout), &text);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        err.contains("can't open '/dev/nvidia0': No such device or address"),
        "nvidia0 allowed (ENXIO): {text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("MKNOD-OK"),
        "{text}"
    );
    assert!(
        err.contains("can't open '/dev/nvidia1': Operation not permitted"),
        "nvidia1 denied (EPERM): {text}"
    );
    assert!(
        err.contains("can't open '/dev/nvidia-x': No such device or address"),
        "195:2 allowed by rule: {text}"
    );
    assert!(
        err.contains("can't open '/dev/mem2': Operation not permitted"),
        "a planted /dev/mem denied: {text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("NULL-OK"),
        "the runtime's own /dev/null rule kept: {text}"
    );
}

fn libraries_binaries_and_ld_cache_in_a_glibc_image() {
    let h = host();
    let mut b = Bundle::new(&h.dir, Image::Glibc);
    b.hook(&h.config)
        .env("NVIDIA_VISIBLE_DEVICES=0")
        .env("NVIDIA_DRIVER_CAPABILITIES=utility,compute");
    let out = b.run(
        "grep -E 'libcuda|nvidia-smi|nvidia0 |driver' /proc/mounts; dlcuda; nvidia-smi; \
                     grep -c libcuda.so.1 /etc/ld.so.cache; readlink /usr/lib/x86_64-linux-gnu/libcuda.so.1; \
                     cat /proc/driver/nvidia/params | grep ModifyDeviceFiles; ls /proc/driver/nvidia/gpus; \
                     echo x > /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 || echo RO",
    );
    let text = out_text(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let mount_line = |target: &str| {
        stdout
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(target))
            .map(String::from)
    };
    let lib = mount_line("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15")
        .unwrap_or_else(|| panic!("libcuda not mounted: {text}"));
    assert!(
        lib.contains(" ro,") && lib.contains("nosuid") && lib.contains("nodev"),
        "libcuda ro,nosuid,nodev: {lib}"
    );
    let smi = mount_line("/usr/bin/nvidia-smi")
        .unwrap_or_else(|| panic!("nvidia-smi not mounted: {text}"));
    assert!(smi.contains(" ro,"), "{smi}");
    let dev = mount_line("/dev/nvidia0").unwrap_or_else(|| panic!("nvidia0 not mounted: {text}"));
    assert!(
        dev.contains("noexec") && dev.contains("nosuid") && !dev.contains("nodev"),
        "device: {dev}"
    );
    assert!(
        stdout.contains("cuDriverGetVersion rc=0 version=12040"),
        "dlopen through the ld cache: {text}"
    );
    assert!(stdout.contains("NVIDIA-SMI fake 550.54.15"), "{text}");
    assert!(
        stdout.contains("libcuda.so.550.54.15"),
        "SONAME link: {text}"
    );
    assert!(stdout.contains("ModifyDeviceFiles: 0"), "{text}");
    assert!(
        stdout.contains(&h.host.gpus()[0].bus_id) && !stdout.contains(&h.host.gpus()[1].bus_id),
        "only GPU 0 in /proc: {text}"
    );
    assert!(stdout.contains("RO"), "libraries are read-only: {text}");
}

/// Runs the hook binary directly with `stdin` as the state.
fn hook_with_state(config: &Path, stdin: &[u8]) -> std::process::Output {
    let mut child = Command::new(HOOK)
        .args(["-config", config.to_str().unwrap(), "prestart"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The hook stops reading at its size cap: a broken pipe here is expected.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn bad_input_cases() {
    let h = host();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("malformed state", b"{not json".to_vec(), "not valid JSON"),
        ("empty state", Vec::new(), "not valid JSON"),
        ("no pid", br#"{"bundle":"/tmp"}"#.to_vec(), "no usable pid"),
        (
            "missing bundle",
            br#"{"pid":1,"bundle":"/nonexistent/bundle"}"#.to_vec(),
            "/nonexistent/bundle/config.json",
        ),
        ("huge state", vec![b' '; 2 << 20], "larger than"),
    ];
    for (name, stdin, needle) in cases {
        let _quiet = crate::common::engines::quiet();
        let before = bundle::host_mounts();
        let out = hook_with_state(&h.config, &stdin);
        let text = out_text(&out);
        assert_eq!(out.status.code(), Some(1), "case {name}: {text}");
        assert!(text.contains(needle), "case {name}: {text}");
        assert_eq!(bundle::host_mounts(), before, "case {name}");
    }
}

#[test]
fn missing_driver_refuses_the_container() {
    let h = host();
    let empty = h.dir.join("no-driver");
    std::fs::create_dir_all(&empty).unwrap();
    let config = bundle::write_config(&h.dir, &empty, &empty, "");
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.hook(&config).env("NVIDIA_VISIBLE_DEVICES=0");
    let out = b.run("echo STARTED");
    let text = out_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("no NVIDIA driver found"), "{text}");
}

#[test]
fn command_line() {
    let run = |args: &[&str]| {
        Command::new(HOOK)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let cases: &[(&str, &[&str], i32, &str)] = &[
        ("no command", &[], 2, "usage:"),
        ("unknown command", &["create"], 2, "unknown command"),
        (
            "unknown flag",
            &["-frobnicate", "prestart"],
            2,
            "unknown flag",
        ),
        ("poststart", &["poststart"], 0, ""),
        ("poststop", &["poststop"], 0, ""),
        (
            "version",
            &["-version"],
            0,
            "nvidia-container-runtime-hook version",
        ),
        ("-h", &["-h"], 0, "usage: nvidia-container-runtime-hook"),
        (
            "-help",
            &["-help"],
            0,
            "usage: nvidia-container-runtime-hook",
        ),
        (
            "--help",
            &["--help"],
            0,
            "usage: nvidia-container-runtime-hook",
        ),
    ];
    for (name, args, code, needle) in cases {
        let out = run(args);
        let text = out_text(&out);
        assert_eq!(out.status.code(), Some(*code), "case {name}: {text}");
        assert!(text.contains(needle), "case {name}: {text}");
    }
}

fn twenty_gpu_containers_at_once() {
    // 20 containers started in parallel through the hook, container i asking for GPU i mod 8:
    // every one starts, sees exactly its GPU (and may open it: ENXIO, not EPERM), and the host
    // mount table is the same after all of them as before.
    let h = host();
    let mut bundles: Vec<(usize, Bundle)> = (0..20)
        .map(|i| {
            let mut b = Bundle::new(&h.dir, Image::Busybox);
            b.hook(&h.config)
                .env(&format!("NVIDIA_VISIBLE_DEVICES={}", i % 8));
            (i, b)
        })
        .collect();
    let _quiet = crate::common::engines::quiet();
    let before = bundle::host_mounts();
    let outs: Vec<(usize, std::process::Output)> = std::thread::scope(|s| {
        let handles: Vec<_> = bundles
            .iter_mut()
            .map(|(i, b)| {
                let i = *i;
                s.spawn(move || {
                    (
                        i,
                        b.run_unchecked(&format!(
                            "{SHOW}; cat /dev/nvidia{} 2>&1; echo RAN",
                            i % 8
                        )),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let after = bundle::host_mounts();
    for (i, out) in &outs {
        let text = out_text(out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("RAN"),
            "container {i}: {text}"
        );
        let g = i % 8;
        let gpus: Vec<String> = devs(&stdout)
            .into_iter()
            .filter(|d| d.starts_with("/dev/nvidia") && d.as_bytes()[11].is_ascii_digit())
            .collect();
        assert_eq!(
            gpus,
            vec![format!("/dev/nvidia{g} c3:{g:x}")],
            "container {i}: {text}"
        );
        assert!(
            stdout.contains("No such device or address"),
            "container {i}: its GPU must be allowed (ENXIO): {text}"
        );
        assert!(stdout.contains("LIBS"), "container {i}: {text}");
    }
    assert_eq!(
        before, after,
        "mounts left behind on the host by 20 concurrent containers"
    );
}

/// How the ld cache is made, by image and config: natively (the image's cache plus ours, no
/// ldconfig generator string left in the file) or by the host ldconfig (its generator string
/// in the file); either way libcuda.so.1 resolves and the image's own libc stays in the cache.
fn ld_cache_native_or_by_the_host_ldconfig() {
    let h = host();
    let disabled = bundle::write_config(
        &h.dir,
        &h.host.driver_root(),
        &h.host.proc_root(),
        "[features]\ndisable-native-ldcache = true",
    );
    let lib = "/usr/lib/x86_64-linux-gnu";
    #[derive(PartialEq)]
    enum Prep {
        Nothing,
        NoCache,
        OwnSonameFile,
    }
    use Prep::*;
    // (name, image, config, prepare the rootfs, written natively)
    let cases: Vec<(&str, Image, &Path, Prep, bool)> = vec![
        ("image with a cache", Image::Glibc, &h.config, Nothing, true),
        (
            "turned off in the config",
            Image::Glibc,
            &disabled,
            Nothing,
            false,
        ),
        (
            "image with a loader but no cache",
            Image::Glibc,
            &h.config,
            NoCache,
            false,
        ),
        (
            "image's own file at the soname",
            Image::Glibc,
            &h.config,
            OwnSonameFile,
            false,
        ),
        (
            "busybox: no loader, no cache",
            Image::Busybox,
            &h.config,
            Nothing,
            true,
        ),
    ];
    for (name, image, config, prepare, native) in cases {
        let mut b = Bundle::new(&h.dir, image);
        let rootfs = b.rootfs();
        match prepare {
            Nothing => {}
            NoCache => std::fs::remove_file(rootfs.join("etc/ld.so.cache")).unwrap(),
            OwnSonameFile => {
                std::fs::write(rootfs.join(&lib[1..]).join("libcuda.so.1"), b"not a link").unwrap()
            }
        }
        b.hook(config)
            .env("NVIDIA_VISIBLE_DEVICES=0")
            .env("NVIDIA_DRIVER_CAPABILITIES=compute,utility");
        let libdir = if image == Image::Busybox {
            "/usr/lib64"
        } else {
            lib
        };
        let out = b.run(&format!(
            "test -x /usr/bin/dlcuda && dlcuda; echo GEN $(grep -c 'ldconfig (' /etc/ld.so.cache); \
             echo CUDA $(grep -c 'libcuda.so.1' /etc/ld.so.cache); echo LIBC $(grep -c 'libc.so.6' /etc/ld.so.cache); \
             echo LINK $(readlink {libdir}/libcuda.so.1)"
        ));
        let text = format!("case {name}: {}", out_text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        let generator = if native { "GEN 0" } else { "GEN 1" };
        assert!(stdout.contains(generator), "{text}");
        assert!(stdout.contains("CUDA 1"), "{text}");
        if image == Image::Glibc {
            assert!(stdout.contains("LIBC 1"), "the image's libc stays: {text}");
        }
        // An image's own file at the soname is what ldconfig lists (as upstream's does).
        if prepare != OwnSonameFile {
            assert!(stdout.contains("LINK libcuda.so.550.54.15"), "{text}");
            if image == Image::Glibc {
                assert!(
                    stdout.contains("cuDriverGetVersion rc=0 version=12040"),
                    "{text}"
                );
            }
        }
    }
}

fn rhel_layouts_of_host_and_image() {
    // A RHEL/Fedora host (driver libraries in /usr/lib64) with a RHEL image and with a Debian
    // image: the libraries go to the image's lib dir (probed in the container's mount
    // namespace), libcuda.so.1 resolves through the refreshed ld cache, libcuda.so links it.
    let h = host();
    let dir = h.dir.join("rhel");
    let rhel = FakeHost::builder()
        .layout(crate::common::fakehost::LibLayout::Rhel)
        .build(&dir.join("host"))
        .expect("fake RHEL host");
    let config = bundle::write_config(&dir, &rhel.driver_root(), &rhel.proc_root(), "");
    for (image, lib_dir) in [
        (Image::GlibcLib64, "/usr/lib64"),
        (Image::Glibc, "/usr/lib/x86_64-linux-gnu"),
    ] {
        let mut b = Bundle::new(&h.dir, image);
        b.hook(&config).env("NVIDIA_VISIBLE_DEVICES=0");
        let out = b.run(&format!(
            "dlcuda; grep -c libcuda.so.1 /etc/ld.so.cache; readlink {lib_dir}/libcuda.so; \
             grep ' {lib_dir}/libcuda.so.' /proc/mounts"
        ));
        let text = format!("image lib dir {lib_dir}: {}", out_text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(stdout.contains("version=12040"), "{text}");
        assert!(
            stdout.lines().any(|l| l == "libcuda.so.1"),
            "libcuda.so link: {text}"
        );
        assert!(
            stdout.contains(&format!(" {lib_dir}/libcuda.so.{} ", rhel.driver_version())),
            "{text}"
        );
    }
}

#[test]
fn the_debug_log_says_why_a_container_was_refused() {
    // nvidia-container-cli.debug: timestamped logrus lines, a typo in the config named with the
    // key it probably meant, the request as a summary, and the reason of a refusal (not only
    // runc's stderr).
    let h = host();
    let log = h.dir.join("refusal.log");
    let config = bundle::write_config(&h.dir, &h.host.driver_root(), &h.host.proc_root(), "");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "{text}debug = {:?}\nno-cgroupz = false\n",
            log.display().to_string()
        ),
    )
    .unwrap();
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.hook(&config).env("NVIDIA_VISIBLE_DEVICES=42");
    let out = b.run("true");
    assert!(!out.status.success(), "{}", out_text(&out));
    let lines = std::fs::read_to_string(&log).unwrap();
    assert!(
        lines
            .lines()
            .all(|l| l.starts_with("time=\"") && l.contains(" level=")),
        "{lines}"
    );
    assert!(
        lines.contains("level=info msg=\"container ")
            && lines.contains(": GPUs 42; compute,utility\""),
        "{lines}"
    );
    assert!(
        lines.contains("unknown key nvidia-container-cli.no-cgroupz (ignored; did you mean nvidia-container-cli.no-cgroups?)"),
        "a typo in the config is named: {lines}"
    );
    let refusal = lines
        .lines()
        .find(|l| l.contains("level=error"))
        .unwrap_or_else(|| panic!("no error line: {lines}"));
    assert!(
        refusal.contains("refused") && refusal.contains("unknown device \\\"42\\\" requested"),
        "{refusal}"
    );
    // A request that does not parse is a refusal too, logged the same way.
    std::fs::remove_file(&log).unwrap();
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.hook(&config)
        .env("NVIDIA_VISIBLE_DEVICES=0")
        .env("NVIDIA_DRIVER_CAPABILITIES=bogus");
    let out = b.run("true");
    assert!(!out.status.success(), "{}", out_text(&out));
    let lines = std::fs::read_to_string(&log).unwrap();
    assert!(
        lines.lines().any(|l| l.contains("level=error")
            && l.contains("refused: the container's GPU request is not valid")
            && l.contains("unknown capability")),
        "{lines}"
    );
    // A container that starts: its steps' times, for docs/PERFORMANCE.md's breakdown.
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    b.hook(&config).env("NVIDIA_VISIBLE_DEVICES=0");
    let out = b.run("true");
    assert!(out.status.success(), "{}", out_text(&out));
    let lines = std::fs::read_to_string(&log).unwrap();
    let timing = lines
        .lines()
        .find(|l| l.contains("ms in all: "))
        .unwrap_or_else(|| panic!("no timing line: {lines}"));
    for step in [
        "state and spec",
        "config",
        "request",
        "discovery",
        "plan-and-apply",
    ] {
        assert!(timing.contains(&format!(" {step} ")), "{step}: {timing}");
    }
}

/// A config for the simulated host whose prestart hook logs (at debug level) to `log`.
fn config_logging_to(h: &Host, log: &Path) -> PathBuf {
    let config = bundle::write_config(&h.dir, &h.host.driver_root(), &h.host.proc_root(), "");
    // The file ends in its [nvidia-container-cli] table.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}debug = {:?}\n", log.display().to_string()),
    )
    .unwrap();
    config
}

/// The work in the container's mount namespace is done by the hook process itself when it has
/// one thread, and by a forked child when it has more (a real NVML starts threads; here the
/// test-only `NVCT_FAULT_SECOND_THREAD` starts one): the same container either way, and the
/// hook's own log (written after it came back) says which. The device cgroup (v1 rules or the
/// v2 program, written before either path) lets the GPU open as far as a host without the
/// driver allows (ENXIO, not EPERM).
fn the_namespace_work_in_this_process_or_in_a_forked_child() {
    let h = host();
    let cases = [
        ("one thread", None, "(this process)"),
        (
            "a second thread",
            Some("NVCT_FAULT_SECOND_THREAD=1"),
            "(a forked child: this process has more than one thread)",
        ),
    ];
    for (i, (name, hook_env, want)) in cases.into_iter().enumerate() {
        let log = h.dir.join(format!("ns-path-{i}.log"));
        let config = config_logging_to(h, &log);
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.hook(&config).env("NVIDIA_VISIBLE_DEVICES=1");
        if let Some(e) = hook_env {
            b.spec["hooks"]["prestart"][0]["env"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!(e));
        }
        let out = b.run(
            "for d in /dev/nvidia[0-9]*; do echo DEV $d; done; cat /dev/nvidia1; \
             ls /usr/lib64/libcuda.so.1; ls /proc/driver/nvidia/gpus",
        );
        let text = out_text(&out);
        assert!(out.status.success(), "case {name}: {text}");
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("can't open '/dev/nvidia1': No such device or address"),
            "case {name}: nvidia1 allowed by the device cgroup (ENXIO): {text}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(devs(&stdout), ["/dev/nvidia1"], "case {name}: {text}");
        let gpus: Vec<&str> = stdout.lines().filter(|l| l.starts_with("0000:")).collect();
        assert_eq!(
            gpus,
            [h.host.gpus()[1].bus_id.as_str()],
            "case {name}: the /proc mask shows the selected GPU only: {text}"
        );
        let lines = std::fs::read_to_string(&log).unwrap();
        let ns_line = lines
            .lines()
            .find(|l| l.contains("in the container's mount namespace"))
            .unwrap_or_else(|| panic!("case {name}: no namespace line: {lines}"));
        assert!(ns_line.contains(want), "case {name}: {ns_line}");
        assert!(
            ns_line.contains("step timings (us): setns="),
            "case {name}: {ns_line}"
        );
    }
}

/// NVML is loaded only for what `/proc/driver/nvidia` cannot answer: MIG devices and `cuda` /
/// `brand` / `arch` requirement terms (the debug log's discovery note says which source gave the GPUs).
#[test]
fn nvml_is_loaded_only_when_the_request_needs_it() {
    let h = host();
    let uuid = h.host.gpus()[1].uuid.clone();
    let bus = h.host.gpus()[2].bus_id.clone();
    let cases: Vec<(&str, Vec<String>, bool)> = vec![
        ("index", vec!["NVIDIA_VISIBLE_DEVICES=0".into()], false),
        (
            "GPU UUID",
            vec![format!("NVIDIA_VISIBLE_DEVICES={uuid}")],
            false,
        ),
        (
            "bus id",
            vec![format!("NVIDIA_VISIBLE_DEVICES={bus}")],
            false,
        ),
        ("all", vec!["NVIDIA_VISIBLE_DEVICES=all".into()], false),
        (
            "driver requirement",
            vec![
                "NVIDIA_VISIBLE_DEVICES=0".into(),
                "NVIDIA_REQUIRE_DRIVER=driver>=500".into(),
            ],
            false,
        ),
        (
            "cuda requirement",
            vec![
                "NVIDIA_VISIBLE_DEVICES=0".into(),
                "NVIDIA_REQUIRE_CUDA=cuda>=12.0".into(),
            ],
            true,
        ),
        (
            "brand requirement",
            vec![
                "NVIDIA_VISIBLE_DEVICES=0".into(),
                "NVIDIA_REQUIRE_X=brand=tesla".into(),
            ],
            true,
        ),
        (
            "arch requirement (a compute capability)",
            vec![
                "NVIDIA_VISIBLE_DEVICES=0".into(),
                "NVIDIA_REQUIRE_ARCH=arch>=7.5".into(),
            ],
            true,
        ),
    ];
    for (i, (name, env, nvml)) in cases.into_iter().enumerate() {
        let log = h.dir.join(format!("nvml-{i}.log"));
        let config = config_logging_to(h, &log);
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.hook(&config);
        for e in &env {
            b.env(e);
        }
        let out = b.run("ls /dev/nvidia*");
        assert!(out.status.success(), "case {name}: {}", out_text(&out));
        let lines = std::fs::read_to_string(&log).unwrap();
        let from_proc = lines.contains("NVML not used: not needed for this request");
        assert_eq!(from_proc, !nvml, "case {name}: {lines}");
    }
}

/// `NVIDIA_REQUIRE_*` `arch` terms are each selected GPU's CUDA compute capability (from NVML),
/// compared as a version, as libnvidia-container compares them: on a host with GPUs of two
/// generations (GPU 0 an H100, 9.0; GPU 1 an A100, 8.0) only the GPUs the container gets count,
/// a refusal says what each has, and `NVIDIA_DISABLE_REQUIRE` lifts the check.
#[test]
fn arch_requirements_are_the_selected_gpus_compute_capability() {
    bundle::require_root();
    bundle::require("runc");
    let dir = tempfile::Builder::new()
        .prefix("nvct-hook-arch-")
        .tempdir()
        .unwrap()
        .keep();
    let host = FakeHost::builder()
        .gpus(2)
        .compute_capability(1, "8.0")
        .build(&dir.join("host"))
        .expect("building the simulated host (run `cargo build --examples` first)");
    let config = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
    let cases: &[(&str, &str, &[&str], Result<&str, &str>)] = &[
        (
            "at least 7.5 on 9.0",
            "0",
            &["NVIDIA_REQUIRE_ARCH=arch>=7.5"],
            Ok("/dev/nvidia0"),
        ),
        (
            "exactly 9.0 on 9.0",
            "0",
            &["NVIDIA_REQUIRE_ARCH=arch=9.0"],
            Ok("/dev/nvidia0"),
        ),
        (
            "at least 10.0 on 9.0",
            "0",
            &["NVIDIA_REQUIRE_ARCH=arch>=10.0"],
            Err(
                "requirement \"arch>=10.0\" is not met by this host (driver 550.54.15, cuda 12.4; \
                 GPU 0: arch 9.0, brand tesla; not met by GPU 0)",
            ),
        ),
        (
            "9.0 asked, the 8.0 GPU selected",
            "1",
            &["NVIDIA_REQUIRE_ARCH=arch=9.0"],
            Err("(driver 550.54.15, cuda 12.4; GPU 1: arch 8.0, brand tesla; not met by GPU 1)"),
        ),
        (
            "8.0 asked, the 8.0 GPU selected",
            "1",
            &["NVIDIA_REQUIRE_ARCH=arch=8.0"],
            Ok("/dev/nvidia1"),
        ),
        (
            "both GPUs must meet it",
            "0,1",
            &["NVIDIA_REQUIRE_ARCH=arch>=9.0"],
            Err("GPU 0: arch 9.0, brand tesla; GPU 1: arch 8.0, brand tesla; not met by GPU 1"),
        ),
        (
            "with the CUDA image's terms",
            "0",
            &[
                "NVIDIA_REQUIRE_CUDA=cuda>=12.0 brand=tesla,driver>=470",
                "NVIDIA_REQUIRE_ARCH=arch>=9.0",
            ],
            Ok("/dev/nvidia0"),
        ),
        (
            "lifted by NVIDIA_DISABLE_REQUIRE",
            "0",
            &[
                "NVIDIA_REQUIRE_ARCH=arch>=10.0",
                "NVIDIA_DISABLE_REQUIRE=true",
            ],
            Ok("/dev/nvidia0"),
        ),
        (
            "a CPU name is not a compute capability",
            "0",
            &["NVIDIA_REQUIRE_ARCH=arch=x86_64"],
            Err("cannot parse requirement \"arch=x86_64\""),
        ),
    ];
    for (name, devices, env, want) in cases {
        let mut b = Bundle::new(&dir, Image::Busybox);
        b.hook(&config)
            .env(&format!("NVIDIA_VISIBLE_DEVICES={devices}"));
        for e in *env {
            b.env(e);
        }
        let out = b.run("ls /dev/nvidia0 /dev/nvidia1 2>/dev/null; echo STARTED");
        // runc quotes the hook's stderr: unescape it to look for the message.
        let text = out_text(&out).replace("\\\"", "\"");
        let stdout = String::from_utf8_lossy(&out.stdout);
        match want {
            Ok(node) => {
                assert!(out.status.success(), "case {name}: {text}");
                let nodes: Vec<&str> = stdout.lines().filter(|l| l.starts_with("/dev/")).collect();
                assert_eq!(nodes, [*node], "case {name}: only the selected GPU: {text}");
            }
            Err(msg) => {
                assert!(
                    !out.status.success(),
                    "case {name}: must be refused: {text}"
                );
                assert!(!stdout.contains("STARTED"), "case {name}: {text}");
                assert!(
                    text.contains(msg),
                    "case {name}: the refusal says {msg:?}: {text}"
                );
            }
        }
    }
}

/// `ldconfig -p` of the container's `/etc/ld.so.cache`, read on the host after it exited.
fn cache_listing(rootfs: &Path) -> String {
    let out = Command::new("/sbin/ldconfig")
        .arg("-p")
        .arg("-C")
        .arg(rootfs.join("etc/ld.so.cache"))
        .output()
        .expect("/sbin/ldconfig -p");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// compat32: the common `graphics,compat32,utility` line starts a container, and the 32-bit
/// builds of exactly the requested families are mounted read-only in the image's 32-bit dir
/// (chosen as upstream does, per image) and listed in its ld cache as i386 (`libc6` without
/// `x86-64`), next to their 64-bit builds.
fn compat32_libraries_in_the_images_32_bit_dir() {
    let h = host();
    #[derive(Clone, Copy)]
    enum Prep {
        Nothing,
        UsrLib,
        UsrLibAndLib32,
        Lib64LinksToLib,
        Lib32LinksToLib64,
    }
    use Prep::*;
    // (name, image, prepare the rootfs, the 32-bit dir). An image with only /usr/lib keeps its
    // 64-bit libraries there, so its 32-bit ones go to /usr/lib32 as with lib64 -> lib.
    let cases = [
        (
            "debian-like",
            Image::Glibc,
            Nothing,
            "/usr/lib/i386-linux-gnu",
        ),
        ("no usr at all", Image::Busybox, Nothing, "/usr/lib32"),
        (
            "rhel-like: lib64 and lib",
            Image::Busybox,
            UsrLib,
            "/usr/lib",
        ),
        (
            "/usr/lib32 first",
            Image::Busybox,
            UsrLibAndLib32,
            "/usr/lib32",
        ),
        (
            "lib64 is /usr/lib",
            Image::Busybox,
            Lib64LinksToLib,
            "/usr/lib32",
        ),
        (
            "/usr/lib32 links to lib64: absent",
            Image::Busybox,
            Lib32LinksToLib64,
            "/usr/lib",
        ),
    ];
    let v = h.host.driver_version();
    for (name, image, prep, dir) in cases {
        let mut b = Bundle::new(&h.dir, image);
        let usr = b.rootfs().join("usr");
        match prep {
            Nothing => {}
            UsrLib => {
                std::fs::create_dir_all(usr.join("lib")).unwrap();
                std::fs::create_dir_all(usr.join("lib64")).unwrap();
            }
            UsrLibAndLib32 => {
                std::fs::create_dir_all(usr.join("lib")).unwrap();
                std::fs::create_dir_all(usr.join("lib64")).unwrap();
                std::fs::create_dir_all(usr.join("lib32")).unwrap();
            }
            Lib64LinksToLib => {
                std::fs::create_dir_all(usr.join("lib")).unwrap();
                std::os::unix::fs::symlink("lib", usr.join("lib64")).unwrap();
            }
            Lib32LinksToLib64 => {
                std::fs::create_dir_all(usr.join("lib")).unwrap();
                std::fs::create_dir_all(usr.join("lib64")).unwrap();
                std::os::unix::fs::symlink("lib64", usr.join("lib32")).unwrap();
            }
        }
        b.hook(&h.config)
            .env("NVIDIA_VISIBLE_DEVICES=0")
            .env("NVIDIA_DRIVER_CAPABILITIES=graphics,compat32,utility");
        let out = b.run(&format!(
            "grep ' {dir}/' /proc/mounts; ls {dir}; \
             echo x > {dir}/libGLX_nvidia.so.{v} 2>/dev/null || echo RO"
        ));
        let text = format!("case {name}: {}", out_text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        for family in [
            "libGLX_nvidia",
            "libEGL_nvidia",
            "libnvidia-glcore",
            "libnvidia-ml",
        ] {
            let target = format!("{dir}/{family}.so.{v}");
            let line = stdout
                .lines()
                .find(|l| l.split(' ').nth(1) == Some(target.as_str()))
                .unwrap_or_else(|| panic!("{target} not mounted: {text}"));
            assert!(
                line.contains(" ro,") && line.contains("nodev"),
                "{line}: {text}"
            );
        }
        assert!(
            !stdout.contains("libcuda.so"),
            "compute was not asked for: no 32-bit libcuda: {text}"
        );
        assert!(stdout.contains("RO"), "read-only: {text}");
        let listing = cache_listing(&b.rootfs());
        for soname in ["libGLX_nvidia.so.0", "libnvidia-ml.so.1"] {
            let want = format!("{soname} (libc6) => {dir}/{soname}");
            assert!(
                listing.lines().any(|l| l.trim() == want),
                "case {name}: the cache lacks {want:?}:\n{listing}"
            );
            let link = std::fs::read_link(b.rootfs().join(&dir[1..]).join(soname))
                .unwrap_or_else(|e| panic!("case {name}: {soname} link: {e}"));
            assert_eq!(
                link,
                Path::new(&format!(
                    "{}.so.{v}",
                    &soname[..soname.find(".so").unwrap()]
                )),
                "case {name}"
            );
        }
        assert!(
            listing.contains("libnvidia-ml.so.1 (libc6,x86-64) =>"),
            "case {name}: the 64-bit build stays: {listing}"
        );
    }
}

/// compat32 in an image whose every usual 32-bit dir is its 64-bit dir (`/usr/lib32` and
/// `/usr/lib` link to `lib64`): the 32-bit builds go to the multiarch dir
/// `/usr/lib/i386-linux-gnu` (a directory of their own), none over a 64-bit build.
fn compat32_never_over_the_64_bit_dir() {
    let h = host();
    let v = h.host.driver_version();
    let mut b = Bundle::new(&h.dir, Image::Busybox);
    let usr = b.rootfs().join("usr");
    std::fs::create_dir_all(usr.join("lib64")).unwrap();
    std::os::unix::fs::symlink("lib64", usr.join("lib32")).unwrap();
    std::os::unix::fs::symlink("lib64", usr.join("lib")).unwrap();
    b.hook(&h.config)
        .env("NVIDIA_VISIBLE_DEVICES=0")
        .env("NVIDIA_DRIVER_CAPABILITIES=graphics,compat32,utility");
    let target = format!("/usr/lib64/libnvidia-ml.so.{v}");
    let out = b.run(&format!("grep -c ' {target} ' /proc/mounts; true"));
    let text = out_text(&out);
    assert!(out.status.success(), "{text}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "1",
        "one mount at {target}: {text}"
    );
    let listing = cache_listing(&b.rootfs());
    assert!(
        listing.contains("libnvidia-ml.so.1 (libc6,x86-64) =>"),
        "the 64-bit build: {listing}"
    );
    assert!(
        listing.contains("libnvidia-ml.so.1 (libc6) => /usr/lib/i386-linux-gnu/"),
        "the 32-bit build in a directory of its own: {listing}"
    );
    assert!(
        usr.join("lib64/i386-linux-gnu").is_dir(),
        "created under the link"
    );
}

/// graphics and display: the selected GPU's own `/dev/dri` card and render nodes (found through
/// its sysfs `drm/` directory), allowed by the device cgroup (ENXIO from a host without the
/// driver, never EPERM), with udev's `/dev/dri/by-path` links; no other GPU's; none for compute.
fn dri_nodes_of_the_selected_gpu() {
    let h = host();
    let (card, render) = FakeHost::drm_names(1);
    let (other_card, _) = FakeHost::drm_names(0);
    let bus = &h.host.gpus()[1].bus_id;
    for (caps, want) in [
        ("graphics", true),
        ("display", true),
        ("compute,utility", false),
    ] {
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.hook(&h.config)
            .env("NVIDIA_VISIBLE_DEVICES=1")
            .env(&format!("NVIDIA_DRIVER_CAPABILITIES={caps}"));
        let out = b.run(&format!(
            "for f in /dev/dri/*; do test -c $f && echo \"DRI $f $(stat -c '%t:%T' $f)\"; done; \
             for l in /dev/dri/by-path/*; do test -L $l && echo \"LINK $l $(readlink $l)\"; done; \
             cat /dev/dri/{card} /dev/dri/{render}; true"
        ));
        let text = format!("{caps}: {}", out_text(&out));
        assert!(out.status.success(), "{text}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let dri: Vec<&str> = stdout.lines().filter(|l| l.starts_with("DRI ")).collect();
        let links: Vec<&str> = stdout.lines().filter(|l| l.starts_with("LINK ")).collect();
        if want {
            assert_eq!(
                dri,
                [
                    format!("DRI /dev/dri/{card} e2:2"),
                    format!("DRI /dev/dri/{render} e2:81")
                ],
                "{text}"
            );
            assert_eq!(
                links,
                [
                    format!("LINK /dev/dri/by-path/pci-{bus}-card ../{card}"),
                    format!("LINK /dev/dri/by-path/pci-{bus}-render ../{render}")
                ],
                "{text}"
            );
            assert!(!stderr.contains("not permitted"), "allowed: {text}");
            assert!(!stdout.contains(&other_card), "{text}");
        } else {
            assert!(dri.is_empty() && links.is_empty(), "{text}");
        }
    }
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// the channel nodes open: the device cgroup (v1 rules or v2 eBPF) allows them.
    imex_channels_cases,
    /// the device cgroup itself, v1 or v2.
    device_cgroup_allows_only_injected_gpus,
    /// libcuda resolves through the ld cache the hook refreshes.
    libraries_binaries_and_ld_cache_in_a_glibc_image,
    /// concurrent device cgroup rules and ld cache updates.
    twenty_gpu_containers_at_once,
    /// the host ldconfig (Ubuntu's is a wrapper script).
    ld_cache_native_or_by_the_host_ldconfig,
    /// library layouts as the ld cache lists them.
    rhel_layouts_of_host_and_image,
    /// the i386 entries of the ld cache.
    compat32_libraries_in_the_images_32_bit_dir,
    /// the ld cache of a multiarch image.
    compat32_never_over_the_64_bit_dir,
    /// the DRI nodes open: allowed by the device cgroup.
    dri_nodes_of_the_selected_gpu,
    /// the static front writes the device cgroup itself (v1 rules or v2 eBPF).
    the_static_front_runs_what_needs_no_nvml_and_hands_on_the_rest,
    /// the device cgroup, then the namespace work in this process or in a forked child.
    the_namespace_work_in_this_process_or_in_a_forked_child,
}

/// The installed prestart hook is the statically linked front (scripts/build-release.sh): it
/// runs a request that needs nothing of NVML itself, in one process, and hands the others, with
/// the hook state it read, to its dynamic program in `../libexec/nvct/` (a static binary cannot
/// load the driver's libnvidia-ml). Without that program installed, only the handed-on
/// requests fail, naming it. GPU 0 opens as far as a host without the driver allows (ENXIO,
/// never EPERM): the device cgroup the front wrote lets it through.
fn the_static_front_runs_what_needs_no_nvml_and_hands_on_the_rest() {
    let h = host();
    let front_build = std::env::var_os("NVCT_STATIC_BIN_DIR")
        .map(|d| PathBuf::from(d).join("nvidia-container-runtime-hook"))
        .expect("NVCT_STATIC_BIN_DIR is not set: run the suite with scripts/test.sh, which builds the static hook binaries");
    let cuda = "NVIDIA_REQUIRE_CUDA=cuda>=12.0";
    // (case, env, worker installed, Ok(what the debug log shows) or Err(what the run says))
    let cases: &[(&str, &[&str], bool, Result<&str, &str>)] = &[
        (
            "GPU 0, no worker installed: the front alone",
            &["NVIDIA_VISIBLE_DEVICES=0"],
            false,
            Ok("NVML not used: not loaded by a statically linked binary"),
        ),
        (
            "an unknown GPU: the front's own refusal",
            &["NVIDIA_VISIBLE_DEVICES=42"],
            false,
            Err("unknown device"),
        ),
        (
            "a cuda requirement needs NVML: handed on, no worker installed",
            &["NVIDIA_VISIBLE_DEVICES=0", cuda],
            false,
            Err("cannot start the driver-facing program"),
        ),
        (
            "a cuda requirement needs NVML: handed on to the worker",
            &["NVIDIA_VISIBLE_DEVICES=0", cuda],
            true,
            Ok("container"),
        ),
    ];
    for (i, (name, env, worker, want)) in cases.iter().enumerate() {
        let prefix = h.dir.join(format!("front-{i}"));
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        let front = prefix.join("bin/nvidia-container-runtime-hook");
        std::fs::copy(&front_build, &front).unwrap();
        if *worker {
            std::fs::create_dir_all(prefix.join("libexec/nvct")).unwrap();
            std::fs::copy(
                bundle::HOOK,
                prefix.join("libexec/nvct/nvidia-container-runtime-hook"),
            )
            .unwrap();
        }
        let log = h.dir.join(format!("front-{i}.log"));
        let config = config_logging_to(h, &log);
        let mut b = Bundle::new(&h.dir, Image::Busybox);
        b.hook(&config);
        b.spec["hooks"]["prestart"][0]["path"] = serde_json::json!(front);
        for e in *env {
            b.env(e);
        }
        let out = b.run("cat /dev/nvidia0; true");
        let lines = std::fs::read_to_string(&log).unwrap_or_default();
        let context = format!("case {name}: {}\nlog:\n{lines}", out_text(&out));
        match want {
            Ok(shown) => {
                assert!(out.status.success(), "{context}");
                assert!(lines.contains(shown), "{context}");
                assert!(
                    out_text(&out).contains("can't open '/dev/nvidia0': No such device or address"),
                    "{context}"
                );
                // The worker loaded NVML (the requirement needs it); the front never does.
                assert_eq!(
                    lines.contains("not loaded by a statically linked binary"),
                    !worker,
                    "{context}"
                );
            }
            Err(said) => {
                assert!(!out.status.success(), "{context}");
                assert!(out_text(&out).contains(said), "{context}");
            }
        }
    }
}
