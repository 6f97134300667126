//! `nvidia-container-cli` with the peers that exec it instead of running an OCI hook:
//! - LXC (Debian's `lxc`): unprivileged containers (`lxc.idmap`) whose mount hook is LXC's own
//!   `/usr/share/lxc/hooks/nvidia`, which execs our CLI inside the container's namespaces
//!   before pivot_root (what Incus and LXD's `nvidia.runtime=true` run);
//! - Incus and LXD's parse of `info --csv` (by column, keyed by the bus location);
//! - Charliecloud's `ch-fromhost --nvidia` (Debian's `charliecloud-builders`), which copies what
//!   `list --binaries --libraries` prints into an image, run as an ordinary user;
//! - SingularityCE's setuid start, which execs the CLI as `/proc/self/fd/N` with
//!   `--ldconfig=@/proc/self/fd/3`.
//!
//! Needs root, lxc, charliecloud-builders and busybox-static (scripts/install-deps.sh); a
//! missing one fails the test, never skips it.

use crate::common::bundle::{out_text, require, require_root};
use crate::common::fakehost::FakeHost;
use crate::common::hostkind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CLI: &str = env!("CARGO_BIN_EXE_nvidia-container-cli");

/// LXC's own hook (Debian's liblxc-common).
const LXC_HOOK: &str = "/usr/share/lxc/hooks/nvidia";

/// The host ids of the unprivileged container's root (its `lxc.idmap`).
const MAPPED_ROOT: u32 = 100_000;

/// A simulated host with `gpus` GPUs in a new dir readable by every user (an unprivileged
/// container's root reads the driver's files and nodes as an "other" user), and a toolkit
/// config naming it.
struct Host {
    dir: PathBuf,
    host: FakeHost,
    config: PathBuf,
}

fn host(prefix: &str, gpus: u32) -> Host {
    require_root();
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .unwrap()
        .keep();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let host = FakeHost::builder()
        .gpus(gpus)
        .build(&dir.join("host"))
        .unwrap_or_else(|e| panic!("building the simulated host: {e}"));
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[nvidia-container-cli]\nroot = {:?}\nproc-root = {:?}\n",
            host.driver_root().display().to_string(),
            host.proc_root().display().to_string()
        ),
    )
    .unwrap();
    Host { dir, host, config }
}

impl Host {
    /// A copy of the CLI in `dir` (made if missing), for users other than root: the build's
    /// own path may be under a directory only root may enter (/root).
    fn install_cli(&self, dir: &Path) -> PathBuf {
        let to = dir.join("nvidia-container-cli");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(CLI, &to).unwrap();
        to
    }

    fn cli(&self, args: &[&str]) -> Output {
        Command::new(CLI)
            .args(args)
            .env("NVIDIA_CTK_CONFIG_FILE_PATH", &self.config)
            .output()
            .expect("run nvidia-container-cli")
    }

    fn cli_ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "{args:?}: {}", out_text(&out));
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
fn info_csv_reads_as_incus_parses_it() {
    let h = host("nvct-cli-info-", 3);
    let csv = h.cli_ok(&["info", "--csv"]);
    // Incus (shared/resources/gpu.go): encoding/csv, blank lines skipped; record 1 the driver,
    // records 3.. the GPUs by column; the bus location (column 5) is the key it matches with
    // "0000" + the sysfs address.
    let records: Vec<Vec<&str>> = csv
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(records[1], [h.host.driver_version(), "12.4"], "{csv}");
    assert_eq!(records.len(), 3 + h.host.gpus().len(), "{csv}");
    for (gpu, rec) in h.host.gpus().iter().zip(&records[3..]) {
        assert_eq!(rec.len(), 7, "{rec:?}");
        assert_eq!(rec[1], gpu.minor.to_string(), "minor: card nvidia<minor>");
        assert_eq!(rec[2], gpu.model);
        assert_eq!(rec[4], gpu.uuid);
        assert_eq!(
            rec[5],
            format!("0000{}", gpu.bus_id.to_lowercase()),
            "{rec:?}"
        );
        assert_eq!(Some(rec[6]), gpu.compute_capability.as_deref());
    }
    let plain = h.cli_ok(&["info"]);
    assert!(
        plain.starts_with(&format!(
            "NVRM version:   {}\nCUDA version:   12.4\n\nDevice Index:   0\n",
            h.host.driver_version()
        )),
        "{plain}"
    );
    let _ = std::fs::remove_dir_all(&h.dir);
}

#[test]
fn list_prints_what_configure_mounts() {
    let h = host("nvct-cli-list-", 2);
    let all = h.cli_ok(&["list"]);
    let lines: Vec<&str> = all.lines().collect();
    let root = h.host.driver_root();
    for l in &lines {
        assert!(
            Path::new(l).is_absolute() && Path::new(l).exists(),
            "{l}: every line is an absolute host path that exists\n{all}"
        );
    }
    let at = |suffix: &str| lines.iter().position(|l| l.ends_with(suffix));
    let libcuda = format!("/libcuda.so.{}", h.host.driver_version());
    assert!(
        at("/dev/nvidiactl") < at("/dev/nvidia1")
            && at("/dev/nvidia1") < at("/nvidia-smi")
            && at("/nvidia-smi") < at(&libcuda),
        "devices, binaries, libraries in this order:\n{all}"
    );
    let bins_libs = h.cli_ok(&["list", "--binaries", "--libraries"]);
    assert!(!bins_libs.contains("/dev/"), "{bins_libs}");
    assert!(
        bins_libs.contains(&format!("{}{}", root.display(), "/usr/bin/nvidia-smi")),
        "{bins_libs}"
    );
    let one = h.cli_ok(&["list", "--device=1"]);
    assert!(
        one.contains("/dev/nvidia1\n") && !one.contains("/dev/nvidia0\n"),
        "{one}"
    );
    let bad = h.cli(&["list", "--device=9"]);
    assert_eq!(bad.status.code(), Some(1), "{}", out_text(&bad));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "nvidia-container-cli: device error: 9: unknown device\n"
    );
    let _ = std::fs::remove_dir_all(&h.dir);
}

/// An unprivileged LXC container (root mapped to [`MAPPED_ROOT`]) of a busybox rootfs, whose
/// init writes what it sees to `/tmp/out.txt`, started in the foreground with LXC's nvidia
/// hook; `env` its `lxc.environment`. Returns (whether lxc-start succeeded, what the container
/// saw, LXC's log).
fn lxc_start(h: &Host, name: &str, env: &[&str]) -> (bool, String, String) {
    let lxc_start = require("lxc-start");
    assert!(
        Path::new(LXC_HOOK).is_file(),
        "{LXC_HOOK} missing: install lxc (scripts/install-deps.sh)"
    );
    let busybox = require("busybox");
    let lxc = h.dir.join("lxc");
    let rootfs = lxc.join(name).join("rootfs");
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "etc",
        "tmp",
        "usr/bin",
        "usr/lib/x86_64-linux-gnu",
    ] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::copy(&busybox, rootfs.join("bin/busybox")).unwrap();
    for applet in ["sh", "ls", "cat", "stat"] {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
    }
    std::fs::write(rootfs.join("etc/debian_version"), "12\n").unwrap();
    std::fs::write(
        rootfs.join("check.sh"),
        "#!/bin/sh\n\
         for n in /dev/nvidia*; do [ -e \"$n\" ] && stat -c '%n %t:%T' \"$n\"; done > /tmp/out.txt\n\
         ls /usr/bin /usr/lib/x86_64-linux-gnu >> /tmp/out.txt\n\
         cat /proc/self/uid_map >> /tmp/out.txt\n",
    )
    .unwrap();
    std::fs::set_permissions(
        rootfs.join("check.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let chown = Command::new("chown")
        .arg("-R")
        .arg(format!("{MAPPED_ROOT}:{MAPPED_ROOT}"))
        .arg(&rootfs)
        .output()
        .unwrap();
    assert!(chown.status.success(), "{}", out_text(&chown));
    std::fs::set_permissions(&lxc, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The container's root may write the hook's debug log (`<dir>/hook/nvidia.log`, which
    // LXC's hook names with `--debug` when LXC logs at DEBUG).
    std::os::unix::fs::chown(lxc.join(name), Some(MAPPED_ROOT), Some(MAPPED_ROOT)).unwrap();
    // The hook finds nvidia-container-cli on PATH. PATH holds no newuidmap: with one, LXC
    // insists on /etc/subuid ranges for root (LXC conf.c lxc_map_ids); root maps ids itself.
    let bin = lxc.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    if !bin.join("nvidia-container-cli").exists() {
        h.install_cli(&bin);
    }
    let path = format!("{}:/usr/sbin:/sbin", bin.display());
    let mut config = format!(
        "lxc.uts.name = {name}\n\
         lxc.rootfs.path = dir:{}\n\
         lxc.idmap = u 0 {MAPPED_ROOT} 65536\n\
         lxc.idmap = g 0 {MAPPED_ROOT} 65536\n\
         lxc.mount.auto = proc:mixed sys:ro\n\
         lxc.autodev = 1\n\
         lxc.net.0.type = empty\n\
         lxc.apparmor.profile = unconfined\n\
         lxc.hook.mount = {LXC_HOOK} --root={}\n\
         lxc.init.cmd = /check.sh\n\
         lxc.environment = PATH={path}\n\
         lxc.environment = NVIDIA_CTK_CONFIG_FILE_PATH={}\n",
        rootfs.display(),
        h.host.driver_root().display(),
        h.config.display(),
    );
    for e in env {
        config += &format!("lxc.environment = {e}\n");
    }
    std::fs::write(lxc.join(name).join("config"), config).unwrap();
    let log = lxc.join(format!("{name}.log"));
    let out = Command::new(lxc_start)
        .args(["-n", name, "-F", "-l", "DEBUG", "-P"])
        .arg(&lxc)
        .arg("-o")
        .arg(&log)
        .env_clear()
        .env("PATH", &path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let seen = std::fs::read_to_string(rootfs.join("tmp/out.txt")).unwrap_or_default();
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let hook_log =
        std::fs::read_to_string(lxc.join(name).join("hook/nvidia.log")).unwrap_or_default();
    (
        out.status.success() && !seen.is_empty(),
        seen,
        format!(
            "{}\n--- LXC log\n{log_text}\n--- the hook's debug log\n{hook_log}",
            out_text(&out)
        ),
    )
}

/// The device nodes a container saw (`/dev/nvidia0 c3:0` lines).
fn nodes(seen: &str) -> Vec<&str> {
    seen.lines()
        .filter(|l| l.starts_with("/dev/nvidia"))
        .collect()
}

#[test]
fn lxc_unprivileged_containers_get_their_gpus_through_lxcs_hook() {
    let h = host("nvct-cli-lxc-", 2);
    let gpu = |minor: u32| format!("/dev/nvidia{minor} c3:{minor:x}");
    let libcuda = format!("libcuda.so.{}", h.host.driver_version());
    let ml = format!("libnvidia-ml.so.{}", h.host.driver_version());
    // (case, lxc.environment, GPU nodes, files it has, files it must not have)
    type Case<'a> = (
        &'a str,
        Vec<&'a str>,
        Vec<String>,
        Vec<&'a str>,
        Vec<&'a str>,
    );
    let cases: Vec<Case> = vec![
        (
            "one index, compute and utility",
            vec![
                "NVIDIA_VISIBLE_DEVICES=1",
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            ],
            vec![gpu(1)],
            vec![&libcuda, &ml, "nvidia-smi", "libcuda.so.1"],
            vec![],
        ),
        (
            "all GPUs, utility only",
            vec![
                "NVIDIA_VISIBLE_DEVICES=all",
                "NVIDIA_DRIVER_CAPABILITIES=utility",
            ],
            vec![gpu(0), gpu(1)],
            vec![&ml, "nvidia-smi"],
            vec![&libcuda],
        ),
        (
            "none: the driver without GPUs",
            vec![
                "NVIDIA_VISIBLE_DEVICES=none",
                "NVIDIA_DRIVER_CAPABILITIES=compute",
            ],
            vec![],
            vec![&libcuda],
            vec!["nvidia-smi"],
        ),
        (
            "a requirement met",
            vec![
                "NVIDIA_VISIBLE_DEVICES=0",
                "NVIDIA_DRIVER_CAPABILITIES=compute",
                "NVIDIA_REQUIRE_CUDA=cuda>=12.0",
            ],
            vec![gpu(0)],
            vec![&libcuda],
            vec![],
        ),
    ];
    for (i, (name, env, want_nodes, has, has_not)) in cases.into_iter().enumerate() {
        let (ok, seen, log) = lxc_start(&h, &format!("c{i}"), &env);
        assert!(ok, "case {name}: the container did not start\n{log}");
        let got = nodes(&seen);
        for n in &want_nodes {
            assert!(
                got.contains(&n.as_str()),
                "case {name}: {n} missing\n{seen}"
            );
        }
        let gpus = got
            .iter()
            .filter(|l| l.contains(" c3:") && !l.contains("c3:ff"))
            .count();
        assert_eq!(gpus, want_nodes.len(), "case {name}: GPU nodes\n{seen}");
        assert!(
            got.contains(&"/dev/nvidiactl c3:ff"),
            "case {name}: nvidiactl\n{seen}"
        );
        for f in has {
            assert!(
                seen.lines().any(|l| l == f),
                "case {name}: {f} missing\n{seen}"
            );
        }
        for f in has_not {
            assert!(
                !seen.lines().any(|l| l == f),
                "case {name}: {f} given\n{seen}"
            );
        }
        assert!(
            seen.lines()
                .any(|l| l.split_whitespace().eq(["0", "100000", "65536"])),
            "case {name}: an unprivileged container\n{seen}"
        );
    }
    // Refused starts: LXC stops at the hook (its own log says so) and the hook's debug log
    // names why. LXC's log keeps only the hook's first ten reads of output (lxc/lxc
    // src/lxc/utils.c run_buffer), which the hook's trace may use up.
    let refused = [
        (
            "a requirement unmet",
            vec!["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=cuda>=99.0"],
            "requirement error: unsatisfied condition: cuda>=99.0, please update your driver",
        ),
        (
            "an unknown device",
            vec!["NVIDIA_VISIBLE_DEVICES=7"],
            "device error: 7: unknown device",
        ),
    ];
    for (i, (name, env, why)) in refused.into_iter().enumerate() {
        let (ok, seen, log) = lxc_start(&h, &format!("r{i}"), &env);
        assert!(!ok && seen.is_empty(), "case {name}: started\n{log}");
        assert!(
            log.contains("Failed to run mount hooks"),
            "case {name}\n{log}"
        );
        let hook_log = log.split("--- the hook's debug log").nth(1).unwrap_or("");
        assert!(
            hook_log.contains(why),
            "case {name}: the hook's log does not say {why:?}\n{log}"
        );
    }
    // void: the hook does nothing, the container starts without GPUs.
    let (ok, seen, log) = lxc_start(&h, "v", &["NVIDIA_VISIBLE_DEVICES=void"]);
    assert!(ok && nodes(&seen).is_empty(), "void\n{seen}\n{log}");
    // Nothing left behind: no mount of the containers' dirs in this namespace.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&h.dir.display().to_string()),
        "mounts left behind:\n{mounts}"
    );
    let _ = std::fs::remove_dir_all(&h.dir);
}

/// SingularityCE as root: the CLI run as `/proc/self/fd/N` (it cannot dispatch on its name)
/// with `--ldconfig=@/proc/self/fd/3`, in a mount namespace of its own with the rootfs's /proc
/// mounted (standalone mode, as a runtime's hook runs it before pivot_root); with an IMEX
/// channel, and without the persistence daemon's socket (`--no-persistenced`).
fn singularity_runs_it_from_a_file_descriptor() {
    let h = host("nvct-cli-fd-", 1);
    let rootfs = h.dir.join("rootfs");
    for d in ["dev", "proc", "etc", "usr/bin", "usr/lib/x86_64-linux-gnu"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::write(rootfs.join("etc/debian_version"), "12\n").unwrap();
    // The ldconfig binary SingularityCE hands over: the real one where the host kind's
    // /sbin/ldconfig is Ubuntu's wrapper script.
    let script = format!(
        "set -e; mount --make-rprivate /; mount -t proc proc {r}/proc; mount -t tmpfs tmpfs {r}/dev; \
         l=/sbin/ldconfig.real; [ -e $l ] || l=/sbin/ldconfig; exec 3<$l 4<{CLI}; /proc/self/fd/4 configure --no-cgroups --ldconfig=@/proc/self/fd/3 \
         --device=0 --compute --utility --no-persistenced --imex-channel=1 {r}; \
         stat -c '%t:%T' {r}/dev/nvidia0; test -c {r}/dev/nvidia-caps-imex-channels/channel1; \
         ls {r}/usr/lib/x86_64-linux-gnu; ls {r}/etc/ld.so.cache; \
         test -S {r}/run/nvidia-fabricmanager/socket; test ! -e {r}/run/nvidia-persistenced/socket",
        r = rootfs.display()
    );
    let out = hostkind::command(require("unshare"))
        .args(["-m", "-p", "-f", "sh", "-c", &script])
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", &h.config)
        .output()
        .unwrap();
    let text = out_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("c3:0"), "{text}");
    assert!(
        text.contains(&format!("libcuda.so.{}", h.host.driver_version())),
        "{text}"
    );
    let meta = std::fs::metadata(h.host.driver_root().join("dev/nvidia0")).unwrap();
    assert_eq!(meta.rdev() >> 8, 195, "the host node is the one mounted");
    let _ = std::fs::remove_dir_all(&h.dir);
}

/// Charliecloud's `ch-fromhost --nvidia IMAGE`, as an ordinary user (`nobody`): it copies what
/// `list --binaries --libraries` prints into an image directory (binaries to /usr/bin,
/// libraries where the image's ldconfig says), then runs the image's ldconfig with `ch-run`.
#[test]
fn charliecloud_copies_what_list_prints_into_an_image() {
    let h = host("nvct-cli-charliecloud-", 1);
    let ch_fromhost = require("ch-fromhost");
    require("ch-run");
    let image = h.dir.join("image");
    for d in [
        "bin",
        "sbin",
        "dev",
        "proc",
        "sys",
        "etc",
        "tmp",
        "home",
        "mnt",
        "run",
        "var/tmp",
        "usr/bin",
        "usr/lib/x86_64-linux-gnu",
    ] {
        std::fs::create_dir_all(image.join(d)).unwrap();
    }
    std::fs::copy(require("busybox"), image.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", image.join("bin/sh")).unwrap();
    // Debian's ldconfig is static: the image can run it.
    std::fs::copy("/sbin/ldconfig", image.join("sbin/ldconfig")).unwrap();
    std::fs::write(image.join("etc/ld.so.conf"), "/usr/lib/x86_64-linux-gnu\n").unwrap();
    for f in ["passwd", "group", "hosts", "resolv.conf"] {
        std::fs::write(image.join("etc").join(f), "").unwrap();
    }
    let chown = Command::new("chown")
        .args(["-R", "nobody:nogroup"])
        .arg(&image)
        .output()
        .unwrap();
    assert!(chown.status.success(), "{}", out_text(&chown));
    let bin = h.dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    h.install_cli(&bin);
    let out = Command::new(require("setpriv"))
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(ch_fromhost)
        .arg("--nvidia")
        .arg(&image)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("USER", "nobody")
        .env("HOME", "/tmp")
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", &h.config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", out_text(&out));
    let libs = image.join("usr/lib/x86_64-linux-gnu");
    let version = h.host.driver_version();
    for f in [
        image.join("usr/bin/nvidia-smi"),
        libs.join(format!("libcuda.so.{version}")),
        libs.join(format!("libnvidia-ml.so.{version}")),
        // The image's ldconfig made the SONAME links: the libraries are the real ones.
        libs.join("libcuda.so.1"),
        image.join("etc/ld.so.cache"),
    ] {
        assert!(f.exists(), "{} missing\n{}", f.display(), out_text(&out));
    }
    let _ = std::fs::remove_dir_all(&h.dir);
}

/// enroot's context (conf/hooks/98-nvidia.sh; enroot is not packaged by Debian): the CLI run by
/// an unprivileged user (uid 1000, mapped to itself only) in new user and mount namespaces with
/// its capabilities there, the rootfs's /dev a bind of the host's: the GPU nodes are already
/// there and are used as they are (nothing can be created on the host's /dev), the libraries
/// and the ld cache go to the rootfs. `--ldconfig=@/sbin/ldconfig` as given: on the Ubuntu
/// host kind a `#!/bin/sh` wrapper, whose `ldconfig.real` is the one run.
fn enroot_runs_it_as_an_unprivileged_user_with_the_hosts_dev() {
    let h = host("nvct-cli-enroot-", 1);
    let rootfs = h.dir.join("rootfs");
    for d in ["dev", "proc", "etc", "usr/bin", "usr/lib/x86_64-linux-gnu"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::write(rootfs.join("etc/debian_version"), "12\n").unwrap();
    let chown = Command::new("chown")
        .args(["-R", "1000:1000"])
        .arg(&rootfs)
        .output()
        .unwrap();
    assert!(chown.status.success(), "{}", out_text(&chown));
    let busybox = require("busybox");
    // busybox's mount: util-linux's refuses a user that is not uid 0.
    let script = format!(
        "set -e; {bb} mount --rbind {dev} {r}/dev; {bb} mount --rbind /proc {r}/proc; \
         {cli} --user configure --no-cgroups --ldconfig=@/sbin/ldconfig --device=0 --compute \
         --utility {r}; cat /proc/self/uid_map; ls {r}/usr/lib/x86_64-linux-gnu {r}/etc",
        bb = busybox.display(),
        dev = h.host.dev_root().join("dev").display(),
        cli = h.install_cli(&h.dir.join("bin")).display(),
        r = rootfs.display()
    );
    let out = hostkind::command(require("setpriv"))
        .args(["--reuid=1000", "--regid=1000", "--clear-groups"])
        .arg(require("unshare"))
        .args([
            "-U",
            "-m",
            "--map-current-user",
            "--keep-caps",
            "sh",
            "-c",
            &script,
        ])
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", &h.config)
        .output()
        .unwrap();
    let text = out_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().eq(["1000", "1000", "1"])),
        "uid 1000 mapped to itself only\n{text}"
    );
    let version = h.host.driver_version();
    for f in [
        format!("libcuda.so.{version}"),
        "libcuda.so.1".into(),
        "ld.so.cache".into(),
    ] {
        assert!(text.lines().any(|l| l == f), "{f} missing\n{text}");
    }
    let _ = std::fs::remove_dir_all(&h.dir);
}

each_host_kind! {
    /// the ld cache through the host kind's ldconfig (Ubuntu's wrapper script included), the
    /// mount table as the runtime sees it.
    singularity_runs_it_from_a_file_descriptor,
    /// the same, as an unprivileged user with the host's /dev.
    enroot_runs_it_as_an_unprivileged_user_with_the_hosts_dev,
}
