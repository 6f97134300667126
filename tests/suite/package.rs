//! The packages of scripts/package.sh, installed for real: the .deb with `dpkg --root` into a
//! scratch root (an empty dpkg database, and busybox as its /bin/sh: dpkg runs the maintainer
//! scripts chrooted there), its nvidia-ctk and nvidia-container-cli run, a GPU container started
//! under real runc whose prestart hook is the installed hook with the installed (edited) config,
//! then `dpkg -r` (the edited config files stay, byte for byte) and `dpkg --purge` (they go).
//! The config files are no conffiles: postinst writes them from the packaged defaults when
//! missing. A node with stand-ins for upstream's packages (built here with dpkg-deb: upstream's
//! names and version, a postinst that writes config.toml, their unit copies in
//! /etc/systemd/system, libnvidia-container-tools with its nvidia-container-cli) switches to the
//! .deb and back, unattended, its edited config files kept. The .rpm is checked against the
//! .deb: the same files with the same modes (its units in /usr/lib), no config files either.
//!
//! The packages come from `NVCT_PACKAGE_DIR` (scripts/test.sh runs `scripts/package.sh
//! --profile dev` and sets it).

use crate::common::bundle::{self, out_text, Bundle, Image};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NAME: &str = "nvidia-container-toolkit";
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The packages' version: epoch 1, above every upstream version.
fn package_version() -> String {
    format!("1:{VERSION}")
}
/// The config files postinst writes when missing, and the packaged defaults it writes them from.
const CONFIGS: [(&str, &str); 2] = [
    (
        "/etc/nvidia-container-runtime/config.toml",
        "/usr/share/nvidia-container-toolkit/config.toml",
    ),
    (
        "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env",
        "/usr/share/nvidia-container-toolkit/nvidia-cdi-refresh.env",
    ),
];
const UNITS: [&str; 2] = ["nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path"];

fn package_dir() -> PathBuf {
    let dir = std::env::var_os("NVCT_PACKAGE_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "NVCT_PACKAGE_DIR is not set: build the packages with `scripts/package.sh --profile dev` \
             and set NVCT_PACKAGE_DIR=$PWD/target/package (scripts/test.sh does both)"
        )
    });
    std::path::absolute(&dir).unwrap()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", out_text(&out));
    out
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run(cmd).stdout).unwrap()
}

/// `name_version_arch.deb` and `name-version-1.arch.rpm` in the package dir.
fn packages() -> (PathBuf, PathBuf) {
    let dir = package_dir();
    let deb_arch = stdout(Command::new(bundle::require("dpkg")).arg("--print-architecture"));
    let deb_arch = deb_arch.trim();
    let rpm_arch = match deb_arch {
        "amd64" => "x86_64",
        "arm64" => "aarch64",
        other => panic!("no rpm architecture known for {other}"),
    };
    let deb = dir.join(format!("{NAME}_{VERSION}_{deb_arch}.deb"));
    let rpm = dir.join(format!("{NAME}-{VERSION}-1.{rpm_arch}.rpm"));
    for p in [&deb, &rpm] {
        assert!(
            p.is_file(),
            "{} is missing: run scripts/package.sh --profile dev (NVCT_PACKAGE_DIR={})",
            p.display(),
            dir.display()
        );
    }
    (deb, rpm)
}

/// A scratch root with an empty dpkg database, plus the host's own status entries of the
/// packages the .deb depends on (so that dpkg checks the Depends line against this host's libc6
/// instead of being told to ignore it).
fn scratch_root(dir: &Path, deb: &Path) -> PathBuf {
    let root = dir.join("root");
    let admin = root.join("var/lib/dpkg");
    for d in ["info", "updates"] {
        std::fs::create_dir_all(admin.join(d)).unwrap();
    }
    std::fs::write(admin.join("available"), "").unwrap();
    let depends = stdout(Command::new("dpkg-deb").arg("-f").arg(deb).arg("Depends"));
    let mut status = String::new();
    for dep in depends.trim().split(',') {
        let name = dep.split_whitespace().next().unwrap();
        let out = Command::new("dpkg-query")
            .args(["-s", name])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the .deb depends on {name}, which this host does not have installed: {}",
            out_text(&out)
        );
        status.push_str(String::from_utf8_lossy(&out.stdout).trim_end());
        status.push_str("\n\n");
    }
    std::fs::write(admin.join("status"), status).unwrap();
    // dpkg runs the maintainer scripts chrooted into the root: a shell and the tools they use.
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(bundle::require("busybox"), bin.join("busybox")).unwrap();
    for applet in [
        "sh", "rm", "[", "test", "cat", "echo", "cp", "mv", "mkdir", "rmdir", "ln", "readlink",
        "md5sum", "cut", "grep", "head", "cmp",
    ] {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
    }
    std::fs::create_dir_all(root.join("dev")).unwrap();
    run(Command::new("mknod")
        .arg(root.join("dev/null"))
        .args(["c", "1", "3"]));
    root
}

/// The enablement links `systemctl enable` makes for the refresh units, under `root`.
fn wants_links(root: &Path) -> [PathBuf; 2] {
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    ["nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service"].map(|u| wants.join(u))
}

fn make_wants_links(root: &Path) {
    for link in wants_links(root) {
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        let unit = Path::new("/usr/lib/systemd/system").join(link.file_name().unwrap());
        std::os::unix::fs::symlink(unit, &link).unwrap();
    }
}

fn dpkg(root: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(bundle::require("dpkg"));
    cmd.arg(format!("--root={}", root.display())).args(args);
    run(&mut cmd)
}

/// dpkg unattended, as apt runs it with no terminal: stdin at end of file (a conffile question
/// would fail the install), DEBIAN_FRONTEND=noninteractive; the maintainer scripts run
/// outside a chroot (`--force-script-chrootless`, DPKG_ROOT set: the scripts honour it) with
/// this host's tools, dpkg-query among them.
fn dpkg_unattended(root: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(bundle::require("dpkg"));
    cmd.arg(format!("--root={}", root.display()))
        .arg("--force-script-chrootless")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(std::process::Stdio::null());
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// `dpkg -s`'s Status line of the package in `root` ("" when dpkg knows nothing of it).
fn status(root: &Path) -> String {
    status_of(root, NAME)
}

fn status_of(root: &Path, package: &str) -> String {
    query(root, package, "${Status}")
}

fn query(root: &Path, package: &str, format: &str) -> String {
    let out = Command::new("dpkg-query")
        .arg(format!(
            "--admindir={}",
            root.join("var/lib/dpkg").display()
        ))
        .args(["-W", "-f", format, package])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The non-directory entries of the .deb as `perms path` (`-rwxr-xr-x /usr/bin/nvidia-ctk`).
fn deb_files(deb: &Path) -> BTreeSet<String> {
    stdout(Command::new("dpkg-deb").arg("-c").arg(deb))
        .lines()
        .filter(|l| !l.starts_with('d'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            format!("{} {}", f[0], f[5].trim_start_matches('.'))
        })
        .collect()
}

/// The .deb's units sit in /lib/systemd/system, the .rpm's in /usr/lib/systemd/system.
fn usr_lib(entry: &str) -> String {
    entry.replacen(" /lib/systemd/", " /usr/lib/systemd/", 1)
}

/// The same for the .rpm.
fn rpm_files(rpm: &Path) -> BTreeSet<String> {
    stdout(
        Command::new(bundle::require("rpm"))
            .args(["-qp", "--qf", "[%{FILEMODES:perms} %{FILENAMES}\\n]"])
            .arg(rpm),
    )
    .lines()
    .filter(|l| !l.starts_with('d'))
    .map(String::from)
    .collect()
}

fn deb_installs_runs_a_gpu_container_and_removes_cleanly() {
    bundle::require_root();
    bundle::require("runc");
    let (deb, _) = packages();
    let (dir, host) = bundle::scratch_host("nvct-package-", 2);
    let root = scratch_root(&dir, &deb);
    let under = |p: &str| root.join(p.trim_start_matches('/'));
    let files = deb_files(&deb);

    dpkg(&root, &["-i", deb.to_str().unwrap()]);
    assert_eq!(status(&root), "install ok installed");
    // postinst wrote the config files from the packaged defaults; upstream's link is there.
    for (config, default) in CONFIGS {
        let written = std::fs::read(under(config)).unwrap_or_else(|e| panic!("{config}: {e}"));
        assert_eq!(
            written,
            std::fs::read(under(default)).unwrap(),
            "{config} is not the packaged {default}"
        );
    }
    assert_eq!(
        std::fs::read_link(under("/usr/bin/nvidia-container-toolkit")).unwrap(),
        Path::new("nvidia-container-runtime-hook")
    );
    for entry in &files {
        let path = entry.split(' ').nth(1).unwrap();
        assert!(
            under(path).symlink_metadata().is_ok(),
            "{path}: in the package, not installed"
        );
    }
    // The layout of scripts/build-release.sh: static fronts and hook in usr/bin, their dynamic
    // programs in usr/libexec/nvct; the installer and nvidia-container-cli (its `info` loads
    // NVML) dynamic in usr/bin.
    for (path, want_static) in [
        ("/usr/bin/nvidia-cdi-hook", true),
        ("/usr/bin/nvidia-container-runtime-hook", true),
        ("/usr/bin/nvidia-ctk", true),
        ("/usr/bin/nvidia-container-runtime", true),
        ("/usr/bin/nvidia-ctk-installer", false),
        ("/usr/bin/nvidia-container-cli", false),
        ("/usr/libexec/nvct/nvidia-container-runtime-hook", false),
        ("/usr/libexec/nvct/nvidia-ctk", false),
        ("/usr/libexec/nvct/nvidia-container-runtime", false),
    ] {
        let bytes = std::fs::read(under(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(
            nvct_container::ldconfig::static_elf(&bytes).is_ok(),
            want_static,
            "{path}: statically linked should be {want_static}"
        );
    }

    // The installed front finds its program in the scratch root's usr/libexec/nvct.
    let ctk = under("/usr/bin/nvidia-ctk");
    let version = stdout(Command::new(&ctk).arg("-v"));
    assert!(
        version.contains(VERSION),
        "{} -v: {version:?} does not name {VERSION}",
        ctk.display()
    );

    // The operator points the installed config at the (simulated) driver, with the installed
    // nvidia-ctk, and adds a line to the env file.
    let config = under(CONFIGS[0].0);
    let shipped_config = std::fs::read(&config).unwrap();
    run(Command::new(&ctk)
        .arg("config")
        .arg("--config-file")
        .arg(&config)
        .arg(format!(
            "--set=nvidia-container-cli.root={}",
            host.driver_root().display()
        ))
        .arg(format!(
            "--set=nvidia-container-cli.proc-root={}",
            host.proc_root().display()
        ))
        .arg("--in-place"));
    let env_file = under(CONFIGS[1].0);
    let mut env_text = std::fs::read(&env_file).unwrap();
    env_text.extend_from_slice(b"NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES=uuid\n");
    std::fs::write(&env_file, &env_text).unwrap();
    let edited: Vec<Vec<u8>> = CONFIGS
        .iter()
        .map(|(c, _)| std::fs::read(under(c)).unwrap())
        .collect();
    assert_ne!(
        edited[0], shipped_config,
        "nvidia-ctk config --set changed nothing"
    );

    // The installed nvidia-container-cli, as LXC's hook and Incus find it (in PATH, by name):
    // its version (Charliecloud reads the second field of the first line), and `info --csv`
    // (what Incus parses) of the simulated GPUs, with NVML loaded from the driver root the
    // installed config names.
    let cli = under("/usr/bin/nvidia-container-cli");
    let version = stdout(Command::new(&cli).arg("-V"));
    assert_eq!(
        version.lines().next().and_then(|l| l.split(' ').nth(1)),
        Some(VERSION),
        "{} -V: {version:?}",
        cli.display()
    );
    let csv = stdout(
        Command::new(&cli)
            .args(["info", "--csv"])
            .env("NVIDIA_CTK_CONFIG_FILE_PATH", &config),
    );
    let rows: Vec<&str> = csv.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        rows.len(),
        3 + host.gpus().len(),
        "{} info --csv: the driver and one row per GPU:\n{csv}",
        cli.display()
    );
    assert_eq!(
        rows[1].split(',').next(),
        Some(host.driver_version()),
        "{csv}"
    );

    // A GPU container whose prestart hook is the installed one, with the installed config.
    let hook = under("/usr/bin/nvidia-container-runtime-hook");
    let mut b = Bundle::new(&dir, Image::Busybox);
    b.spec["hooks"] = json!({"prestart": [{
        "path": hook,
        "args": ["nvidia-container-runtime-hook", "-config", config, "prestart"],
        "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
    }]});
    b.env("NVIDIA_VISIBLE_DEVICES=1");
    let out = b.run("ls /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl 2>&1; true");
    let text = out_text(&out);
    assert!(out.status.success(), "the container did not start: {text}");
    let seen = String::from_utf8_lossy(&out.stdout);
    for (node, want) in [
        ("/dev/nvidia1", true),
        ("/dev/nvidiactl", true),
        ("/dev/nvidia0", false),
    ] {
        assert_eq!(
            seen.lines().any(|l| l == node),
            want,
            "{node} in the container should be {want} (NVIDIA_VISIBLE_DEVICES=1): {text}"
        );
    }

    // Remove: the programs go, the edited config files stay as they are.
    dpkg(&root, &["-r", NAME]);
    assert_eq!(status(&root), "deinstall ok config-files");
    for entry in &files {
        let path = entry.split(' ').nth(1).unwrap();
        assert!(
            under(path).symlink_metadata().is_err(),
            "{path}: still there after dpkg -r"
        );
    }
    for ((c, _), want) in CONFIGS.iter().zip(&edited) {
        let now = std::fs::read(under(c)).unwrap_or_else(|e| panic!("{c} after dpkg -r: {e}"));
        assert!(
            &now == want,
            "{c}: dpkg -r changed the edited config file:\n--- edited\n{}\n--- after dpkg -r\n{}",
            String::from_utf8_lossy(want),
            String::from_utf8_lossy(&now)
        );
    }

    // Purge: the config files go too.
    dpkg(&root, &["--purge", NAME]);
    assert_eq!(
        status(&root),
        "",
        "dpkg still knows the package after --purge"
    );
    for (c, _) in CONFIGS {
        assert!(
            under(c).symlink_metadata().is_err(),
            "{c}: still there after dpkg --purge"
        );
    }
}

/// The .deb's control archive carries the three maintainer scripts, executable, and the
/// .rpm the matching scriptlets.
#[test]
fn packages_carry_the_maintainer_scripts() {
    let (deb, rpm) = packages();
    let dir = tempfile::tempdir().unwrap();
    let control = dir.path().join("DEBIAN");
    run(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&control));
    // (script, words it must hold)
    let cases: &[(&str, &[&str])] = &[
        (
            "postinst",
            &[
                "daemon-reload",
                "/run/systemd/system",
                "/usr/share/nvidia-container-toolkit",
                "nvidia-container-toolkit-base",
                "deb-systemd-helper unmask",
            ],
        ),
        (
            "prerm",
            &[
                "stop $units",
                "disable $units",
                "remove",
                "nvidia-ctk runtime unconfigure --runtime=docker",
            ],
        ),
        (
            "postrm",
            &[
                "purge",
                ".wants/nvidia-cdi-refresh.path",
                "daemon-reload",
                "/etc/nvidia-container-runtime/config.toml",
            ],
        ),
    ];
    for (script, words) in cases {
        let path = control.join(script);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{script}: {e}"));
        use std::os::unix::fs::PermissionsExt;
        let mode = path.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{script} is not executable: {mode:o}");
        for w in *words {
            assert!(text.contains(w), "{script} lacks {w:?}:\n{text}");
        }
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            !code.contains(" enable ") && !code.contains(" start "),
            "{script}: installing enables and starts nothing:\n{text}"
        );
        let check = Command::new("sh").arg("-n").arg(&path).output().unwrap();
        assert!(
            check.status.success(),
            "sh -n {script}: {}",
            out_text(&check)
        );
    }
    let scripts = stdout(
        Command::new(bundle::require("rpm"))
            .args(["-qp", "--scripts"])
            .arg(&rpm),
    );
    for part in [
        "postinstall scriptlet",
        "preuninstall scriptlet",
        "postuninstall scriptlet",
        "posttrans scriptlet",
        "--no-reload disable nvidia-cdi-refresh.path nvidia-cdi-refresh.service",
        "stop nvidia-cdi-refresh.path nvidia-cdi-refresh.service",
        "nvidia-ctk runtime unconfigure --runtime=docker",
        "/usr/share/nvidia-container-toolkit/config.toml /etc/nvidia-container-runtime/config.toml",
        ".rpmsave",
    ] {
        assert!(
            scripts.contains(part),
            "rpm --scripts lacks {part:?}:\n{scripts}"
        );
    }
}

/// What makes the packages take a node over from upstream's: the .deb is the next version of
/// upstream's `nvidia-container-toolkit` (epoch 1: above 1.18, above any later upstream version,
/// so that NVIDIA's repository never offers theirs as an upgrade), and it provides, conflicts
/// with and replaces `nvidia-container-toolkit-base` and `libnvidia-container-tools` (upstream's
/// package of `nvidia-container-cli`); the .rpm carries the same epoch and obsoletes and
/// provides those packages.
#[test]
fn packages_take_over_upstreams_names_and_sort_above_its_versions() {
    let (deb, rpm) = packages();
    let field = |name: &str| {
        stdout(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(name))
            .trim()
            .to_string()
    };
    assert_eq!(field("Package"), NAME);
    assert_eq!(field("Version"), package_version());
    assert_eq!(
        field("Provides"),
        format!(
            "nvidia-container-toolkit-base (= {v}), libnvidia-container-tools (= {v})",
            v = package_version()
        )
    );
    for relation in ["Conflicts", "Replaces"] {
        let value = field(relation);
        for upstream in ["nvidia-container-toolkit-base", "libnvidia-container-tools"] {
            assert!(
                value.split(", ").any(|p| p == upstream),
                "{relation} lacks {upstream}: {value}"
            );
        }
    }
    for upstream in ["1.18.2-1", "1.19.1-1", "99.0.0-1"] {
        let newer = Command::new("dpkg")
            .args(["--compare-versions", &package_version(), "gt", upstream])
            .status()
            .unwrap();
        assert!(
            newer.success(),
            "{} does not sort above {upstream}",
            package_version()
        );
    }
    let q = |format: &str| {
        stdout(
            Command::new(bundle::require("rpm"))
                .args(["-qp", "--qf", format])
                .arg(&rpm),
        )
    };
    assert_eq!(q("%{EPOCH}:%{VERSION}"), package_version());
    let provides = q("[%{PROVIDES} %{PROVIDEVERSION}\\n]");
    let obsoletes = q("[%{OBSOLETES} %{OBSOLETEFLAGS:depflags} %{OBSOLETEVERSION}\\n]");
    for upstream in ["nvidia-container-toolkit-base", "libnvidia-container-tools"] {
        assert!(
            provides
                .lines()
                .any(|l| l == format!("{upstream} {}-1", package_version())),
            "rpm provides no {upstream}: {provides}"
        );
        assert!(
            obsoletes
                .lines()
                .any(|l| l == format!("{upstream} < {}-1", package_version())),
            "rpm obsoletes no {upstream}: {obsoletes}"
        );
    }
}

/// `dpkg -i`, `-r` and `--purge` in a scratch root, with the maintainer scripts really run
/// (chrooted there): without systemd (no systemctl, no /run/systemd/system) they do nothing
/// and succeed; with a running "systemd" (the directory) and a fake `systemctl` that records
/// its arguments, install only reloads, removal stops and disables the units, and purge
/// removes enablement links that are left.
#[test]
fn deb_scripts_stop_disable_and_purge_links() {
    bundle::require_root();
    let (deb, _) = packages();
    for with_systemd in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = scratch_root(dir.path(), &deb);
        let log = root.join("systemctl.log");
        if with_systemd {
            std::fs::create_dir_all(root.join("run/systemd/system")).unwrap();
            let systemctl = root.join("usr/bin/systemctl");
            std::fs::create_dir_all(systemctl.parent().unwrap()).unwrap();
            std::fs::write(&systemctl, "#!/bin/sh\necho \"$*\" >> /systemctl.log\n").unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let case = if with_systemd {
            "with systemd"
        } else {
            "without systemd"
        };
        let calls = || std::fs::read_to_string(&log).unwrap_or_default();

        dpkg(&root, &["-i", deb.to_str().unwrap()]);
        let want_install = if with_systemd {
            "--system daemon-reload\n"
        } else {
            ""
        };
        assert_eq!(
            calls(),
            want_install,
            "{case}: dpkg -i: nothing enabled or started"
        );

        // The operator enabled the units (links as `systemctl enable` makes them).
        make_wants_links(&root);
        dpkg(&root, &["-r", NAME]);
        let units = "nvidia-cdi-refresh.path nvidia-cdi-refresh.service";
        let want_remove = if with_systemd {
            format!(
                "{want_install}--system stop {units}\n--system --no-reload disable {units}\n--system daemon-reload\n"
            )
        } else {
            String::new()
        };
        assert_eq!(calls(), want_remove, "{case}: dpkg -r");

        dpkg(&root, &["--purge", NAME]);
        for link in wants_links(&root) {
            assert!(
                link.symlink_metadata().is_err(),
                "{case}: {} left after --purge",
                link.display()
            );
        }
        if with_systemd {
            assert!(
                calls().ends_with("--system daemon-reload\n"),
                "{case}: purge reloads: {}",
                calls()
            );
        } else {
            assert_eq!(calls(), "", "{case}: nothing called");
        }
    }
}

/// `dpkg -r` names every engine config that still runs the removed programs (docker's
/// daemon.json, containerd's and CRI-O's configs and drop-ins, podman's hooks.d), with the
/// `nvidia-ctk runtime unconfigure` command that undoes it; a file that names them only in a
/// comment, or not at all, is not named. The scripts run chrooted, with busybox's tools.
#[test]
fn deb_removal_names_engine_configs_that_still_run_it() {
    bundle::require_root();
    let (deb, _) = packages();
    let dir = tempfile::tempdir().unwrap();
    let root = scratch_root(dir.path(), &deb);
    dpkg(&root, &["-i", deb.to_str().unwrap()]);
    // (file, content, the undo command the warning must name; None: no warning)
    let cases: &[(&str, &str, Option<&str>)] = &[
        (
            "/etc/docker/daemon.json",
            r#"{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}"#,
            Some("nvidia-ctk runtime unconfigure --runtime=docker"),
        ),
        (
            "/etc/containerd/config.toml",
            "version = 2\n# the nvidia runtime (nvidia-container-runtime) is in conf.d\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n",
            None,
        ),
        (
            "/etc/containerd/conf.d/99-nvidia.toml",
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n  BinaryName = \"/usr/bin/nvidia-container-runtime\"\n",
            Some("nvidia-ctk runtime unconfigure --runtime=containerd"),
        ),
        (
            "/etc/crio/crio.conf.d/50-gpu.toml",
            "[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/bin/nvidia-container-runtime\"\n",
            Some("nvidia-ctk runtime unconfigure --runtime=crio --drop-in-config=/etc/crio/crio.conf.d/50-gpu.toml"),
        ),
        (
            "/etc/containers/oci/hooks.d/nvidia.json",
            r#"{"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"]}, "when": {"always": true}, "stages": ["prestart"]}"#,
            Some("nvidia-ctk runtime unconfigure --config-mode=oci-hook --oci-hook-path=/etc/containers/oci/hooks.d/nvidia.json"),
        ),
        (
            "/etc/crio/crio.conf",
            "[crio.runtime]\ndefault_runtime = \"crun\"\n",
            None,
        ),
    ];
    for (file, content, _) in cases {
        let path = root.join(file.trim_start_matches('/'));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
    }
    let out = dpkg(&root, &["-r", NAME]);
    let said = String::from_utf8_lossy(&out.stderr);
    for (file, _, undo) in cases {
        let named = said.contains(&format!("warning: {file} still runs"));
        assert_eq!(
            named,
            undo.is_some(),
            "dpkg -r: {file} named should be {}: {}",
            undo.is_some(),
            out_text(&out)
        );
        if let Some(undo) = undo {
            assert!(
                said.contains(&format!("run `{undo}` and restart")),
                "dpkg -r does not say how to undo {file} ({undo}): {}",
                out_text(&out)
            );
        }
    }
    // The engines' files are the operator's: named, not edited.
    for (file, content, _) in cases {
        let now = std::fs::read_to_string(root.join(file.trim_start_matches('/'))).unwrap();
        assert_eq!(&now, content, "{file} was changed by the removal");
    }
}

/// Stand-ins for upstream's 1.18 packages, built here with dpkg-deb (nothing of upstream's is
/// copied; what they do is what upstream's packaging/debian/ does): `nvidia-container-toolkit-
/// base` holds nvidia-ctk, nvidia-container-runtime and nvidia-cdi-hook (shell stubs), the
/// refresh units in /etc/systemd/system and the env file (conffiles: every file under /etc of
/// a debhelper-built package is), and its postinst writes config.toml when there is none;
/// `libnvidia-container-tools` holds /usr/bin/nvidia-container-cli (a shell stub; upstream's
/// depends on libnvidia-container1, the library, which holds no file of ours and is left out
/// here); `nvidia-container-toolkit` depends on the base package at the same version and on
/// the tools as upstream's `packaging/debian/control` (`>= VERSION`, `<< 2.0.0`), holds the
/// prestart hook and its postinst links /usr/bin/nvidia-container-toolkit to it (purge removes
/// the link). The scripts honour DPKG_ROOT (run with --force-script-chrootless).
fn stand_ins(dir: &Path, version: &str) -> StandIns {
    use std::os::unix::fs::PermissionsExt;
    let write = |path: PathBuf, text: &str, mode: u32| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let base = dir.join(format!("stand-in-base-{version}"));
    for program in ["nvidia-ctk", "nvidia-container-runtime", "nvidia-cdi-hook"] {
        write(
            base.join("usr/bin").join(program),
            &format!("#!/bin/sh\necho \"stand-in {program} {version}\"\n"),
            0o755,
        );
    }
    write(
        base.join("etc/systemd/system/nvidia-cdi-refresh.service"),
        "[Unit]\nDescription=stand-in refresh\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n",
        0o644,
    );
    write(
        base.join("etc/systemd/system/nvidia-cdi-refresh.path"),
        "[Unit]\nDescription=stand-in refresh trigger\n\n[Path]\nPathChanged=/lib/modules/%v/modules.dep\n\n[Install]\nWantedBy=multi-user.target\n",
        0o644,
    );
    write(
        base.join("etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"),
        "# stand-in: variables of nvidia-ctk cdi generate\n",
        0o644,
    );
    write(
        base.join("DEBIAN/conffiles"),
        "/etc/systemd/system/nvidia-cdi-refresh.service\n/etc/systemd/system/nvidia-cdi-refresh.path\n/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env\n",
        0o644,
    );
    write(
        base.join("DEBIAN/postinst"),
        "#!/bin/sh\nset -e\nr=${DPKG_ROOT:-}\nif [ \"$1\" = configure ] && [ ! -e \"$r/etc/nvidia-container-runtime/config.toml\" ]; then\n  mkdir -p \"$r/etc/nvidia-container-runtime\"\n  printf '[nvidia-container-cli]\\nldconfig = \"@/sbin/ldconfig\"\\n\\n[nvidia-container-runtime]\\nlog-level = \"info\"\\n' >\"$r/etc/nvidia-container-runtime/config.toml\"\nfi\n",
        0o755,
    );
    write(
        base.join("DEBIAN/control"),
        &format!("Package: nvidia-container-toolkit-base\nVersion: {version}\nArchitecture: all\nMaintainer: stand-in <stand-in@localhost>\nDescription: stand-in for upstream's nvidia-container-toolkit-base\n"),
        0o644,
    );
    let tools = dir.join(format!("stand-in-tools-{version}"));
    write(
        tools.join("usr/bin/nvidia-container-cli"),
        &format!("#!/bin/sh\necho \"stand-in nvidia-container-cli {version}\"\n"),
        0o755,
    );
    // A file of its own too, as upstream's (its docs): without it our Replaces would take its
    // only file and dpkg would drop the package as emptied, hiding that plain dpkg leaves it
    // installed (deb_switches_from_upstream_stand_ins_and_back).
    write(
        tools.join("usr/share/doc/libnvidia-container-tools/copyright"),
        "stand-in\n",
        0o644,
    );
    write(
        tools.join("DEBIAN/control"),
        &format!("Package: libnvidia-container-tools\nVersion: {version}\nArchitecture: all\nMaintainer: stand-in <stand-in@localhost>\nDescription: stand-in for upstream's libnvidia-container-tools\n"),
        0o644,
    );
    let toolkit = dir.join(format!("stand-in-toolkit-{version}"));
    write(
        toolkit.join("usr/bin/nvidia-container-runtime-hook"),
        &format!("#!/bin/sh\necho \"stand-in hook {version}\"\n"),
        0o755,
    );
    write(
        toolkit.join("DEBIAN/postinst"),
        "#!/bin/sh\nset -e\nr=${DPKG_ROOT:-}\nif [ \"$1\" = configure ] && [ -f \"$r/usr/bin/nvidia-container-runtime-hook\" ] && [ ! -e \"$r/usr/bin/nvidia-container-toolkit\" ]; then\n  ln -s /usr/bin/nvidia-container-runtime-hook \"$r/usr/bin/nvidia-container-toolkit\"\nfi\n",
        0o755,
    );
    write(
        toolkit.join("DEBIAN/postrm"),
        "#!/bin/sh\nset -e\nr=${DPKG_ROOT:-}\nif [ \"$1\" = purge ] && [ -L \"$r/usr/bin/nvidia-container-toolkit\" ]; then rm -f \"$r/usr/bin/nvidia-container-toolkit\"; fi\n",
        0o755,
    );
    write(
        toolkit.join("DEBIAN/control"),
        &format!("Package: nvidia-container-toolkit\nVersion: {version}\nArchitecture: all\nMaintainer: stand-in <stand-in@localhost>\nDepends: nvidia-container-toolkit-base (= {version}), libnvidia-container-tools (>= {version}), libnvidia-container-tools (<< 2.0.0)\nDescription: stand-in for upstream's nvidia-container-toolkit\n"),
        0o644,
    );
    let build = |tree: &Path, name: &str| {
        let deb = dir.join(format!("{name}_{version}_all.deb"));
        run(Command::new("dpkg-deb")
            .arg("--root-owner-group")
            .arg("--build")
            .arg(tree)
            .arg(&deb));
        deb.to_str().unwrap().to_string()
    };
    StandIns {
        base: build(&base, "nvidia-container-toolkit-base"),
        tools: build(&tools, "libnvidia-container-tools"),
        toolkit: build(&toolkit, NAME),
    }
}

/// The stand-in .debs of [`stand_ins`], by path.
struct StandIns {
    base: String,
    tools: String,
    toolkit: String,
}

/// Whether the file at `path` is an ELF program (ours), not a stand-in's shell stub.
fn is_elf(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"\x7fELF"))
}

/// A node with upstream's packages (stand-ins, [`stand_ins`]) whose operator edited the
/// config.toml their postinst wrote and the env file, and enabled the refresh path unit,
/// switches to the .deb unattended (dpkg with no terminal; `--auto-deconfigure`, which apt
/// passes, lets dpkg remove upstream's base package and libnvidia-container-tools, which their
/// old nvidia-container-toolkit depends on): "install ok installed", the base package left as
/// config-files, the tools package gone and /usr/bin/nvidia-container-cli ours, both edited
/// files kept byte for byte, upstream's unit copies in /etc/systemd/system moved aside and the
/// enablement link re-pointed at the packaged unit, /usr/bin/nvidia-container-toolkit a link to
/// the hook. Then back to the stand-ins: upstream's unit copies are where dpkg records them
/// again, their nvidia-container-cli back, the config files still kept. Plain `dpkg -i` without
/// --auto-deconfigure is refused by dpkg (it says why) and changes nothing.
#[test]
fn deb_switches_from_upstream_stand_ins_and_back() {
    bundle::require_root();
    let (deb, _) = packages();
    let dir = tempfile::tempdir().unwrap();
    let root = scratch_root(dir.path(), &deb);
    let under = |p: &str| root.join(p.trim_start_matches('/'));
    let upstream = stand_ins(dir.path(), "1.18.2-1");
    let ok = |out: Output, what: &str| {
        assert!(out.status.success(), "{what}: {}", out_text(&out));
        let text = out_text(&out);
        assert!(
            !text.contains("Configuration file"),
            "{what}: dpkg asked about a conffile: {text}"
        );
        text
    };
    let states = || {
        (
            query(&root, NAME, "${Version} ${Status}"),
            query(
                &root,
                "nvidia-container-toolkit-base",
                "${Version} ${Status}",
            ),
            query(&root, "libnvidia-container-tools", "${Version} ${Status}"),
        )
    };
    let cli = under("/usr/bin/nvidia-container-cli");

    ok(
        dpkg_unattended(
            &root,
            &["-i", &upstream.base, &upstream.tools, &upstream.toolkit],
        ),
        "installing the stand-ins",
    );
    assert!(
        !is_elf(&cli),
        "the stand-in's nvidia-container-cli is not installed"
    );
    // The operator's edits, and `systemctl enable nvidia-cdi-refresh.path` (upstream's 1.18
    // postinst does it with a running systemd).
    let mut config = std::fs::read_to_string(under(CONFIGS[0].0)).unwrap();
    assert!(config.contains("log-level = \"info\""), "{config}");
    config = config.replace("log-level = \"info\"", "log-level = \"debug\"");
    config.push_str("# edited by the operator\n");
    std::fs::write(under(CONFIGS[0].0), &config).unwrap();
    let mut env = std::fs::read_to_string(under(CONFIGS[1].0)).unwrap();
    env.push_str("NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES=uuid\n");
    std::fs::write(under(CONFIGS[1].0), &env).unwrap();
    let link = under("/etc/systemd/system/multi-user.target.wants/nvidia-cdi-refresh.path");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/etc/systemd/system/nvidia-cdi-refresh.path", &link).unwrap();
    let kept = || {
        for (file, want) in [(CONFIGS[0].0, &config), (CONFIGS[1].0, &env)] {
            let now = std::fs::read_to_string(under(file)).unwrap_or_default();
            assert_eq!(&now, want, "{file} was not kept");
        }
    };

    // Plain dpkg -i: refused, nothing changed.
    let before = states();
    let out = dpkg_unattended(&root, &["-i", deb.to_str().unwrap()]);
    assert!(
        !out.status.success() && out_text(&out).contains("--auto-deconfigure"),
        "dpkg -i without --auto-deconfigure: {}",
        out_text(&out)
    );
    assert_eq!(states(), before, "a refused dpkg -i changed the packages");
    kept();

    // The switch.
    let text = ok(
        dpkg_unattended(&root, &["--auto-deconfigure", "-i", deb.to_str().unwrap()]),
        "switching to ours",
    );
    assert_eq!(
        states(),
        (
            format!("{} install ok installed", package_version()),
            "1.18.2-1 install ok config-files".to_string(),
            // dpkg alone leaves the tools package (its other files) installed: having
            // deconfigured upstream's old toolkit for the base package, it skips our further
            // Conflicts (apt removes both packages itself before the unpack). postinst says
            // how to finish.
            "1.18.2-1 install ok installed".to_string()
        ),
        "{text}"
    );
    assert!(
        is_elf(&cli),
        "/usr/bin/nvidia-container-cli is not ours: {text}"
    );
    assert!(
        text.contains("`dpkg -r libnvidia-container-tools`"),
        "no note about the tools package left installed: {text}"
    );
    let removed = ok(
        dpkg_unattended(&root, &["-r", "libnvidia-container-tools"]),
        "removing what is left of libnvidia-container-tools",
    );
    assert!(
        !states().2.contains("ok installed"),
        "libnvidia-container-tools: {:?}: {removed}",
        states().2
    );
    assert!(
        is_elf(&cli),
        "dpkg -r libnvidia-container-tools removed our nvidia-container-cli: {removed}"
    );
    kept();
    for unit in UNITS {
        assert!(
            under(&format!("/etc/systemd/system/{unit}"))
                .symlink_metadata()
                .is_err(),
            "upstream's /etc/systemd/system/{unit} still overrides ours: {text}"
        );
        assert!(under(&format!("/lib/systemd/system/{unit}")).is_file());
    }
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new("/lib/systemd/system/nvidia-cdi-refresh.path"),
        "the enablement link does not name the packaged unit"
    );
    assert_eq!(
        std::fs::read_link(under("/usr/bin/nvidia-container-toolkit")).unwrap(),
        Path::new("nvidia-container-runtime-hook")
    );
    assert!(
        text.contains("purging that package deletes it"),
        "no note about the env file upstream's base package still records: {text}"
    );

    // And back: the toolkit first (ours conflicts with their base and tools packages until it
    // goes).
    let text = ok(
        dpkg_unattended(
            &root,
            &["-i", &upstream.toolkit, &upstream.base, &upstream.tools],
        ),
        "switching back to the stand-ins",
    );
    assert_eq!(
        states(),
        (
            "1.18.2-1 install ok installed".to_string(),
            "1.18.2-1 install ok installed".to_string(),
            "1.18.2-1 install ok installed".to_string()
        ),
        "{text}"
    );
    assert!(
        !is_elf(&cli),
        "the stand-in's nvidia-container-cli is not back: {text}"
    );
    kept();
    for unit in UNITS {
        let file = under(&format!("/etc/systemd/system/{unit}"));
        assert!(
            file.is_file(),
            "upstream's {unit} is not back in /etc/systemd/system: {text}"
        );
    }
    assert!(
        !under("/var/lib/nvidia-container-toolkit").exists(),
        "the kept unit copies are still kept"
    );
    assert!(
        !text.contains("still runs"),
        "a switch back warned about engine configs: {text}"
    );
    assert_eq!(
        std::fs::read_link(under("/usr/bin/nvidia-container-toolkit")).unwrap(),
        Path::new("/usr/bin/nvidia-container-runtime-hook"),
        "the stand-in's postinst did not link its hook"
    );
}

/// A node that never had upstream's packages switches to them (stand-ins) unattended: our
/// unedited env file goes before theirs, a conffile, is unpacked (a file no package owns at a
/// conffile's path would make dpkg ask); the config.toml our postinst wrote stays; their
/// libnvidia-container-tools takes /usr/bin/nvidia-container-cli.
#[test]
fn deb_makes_way_for_upstream_stand_ins() {
    bundle::require_root();
    let (deb, _) = packages();
    let dir = tempfile::tempdir().unwrap();
    let root = scratch_root(dir.path(), &deb);
    let under = |p: &str| root.join(p.trim_start_matches('/'));
    let upstream = stand_ins(dir.path(), "1.18.2-1");
    let out = dpkg_unattended(&root, &["-i", deb.to_str().unwrap()]);
    assert!(out.status.success(), "{}", out_text(&out));
    let config = std::fs::read(under(CONFIGS[0].0)).unwrap();
    let out = dpkg_unattended(
        &root,
        &["-i", &upstream.toolkit, &upstream.base, &upstream.tools],
    );
    assert!(
        out.status.success(),
        "switching to the stand-ins: {}",
        out_text(&out)
    );
    assert_eq!(
        query(&root, NAME, "${Version} ${Status}"),
        "1.18.2-1 install ok installed"
    );
    assert_eq!(std::fs::read(under(CONFIGS[0].0)).unwrap(), config);
    assert_eq!(
        std::fs::read_to_string(under(CONFIGS[1].0)).unwrap(),
        "# stand-in: variables of nvidia-ctk cdi generate\n",
        "the stand-in's env file is not the one installed"
    );
    assert_eq!(
        query(&root, "libnvidia-container-tools", "${Version} ${Status}"),
        "1.18.2-1 install ok installed"
    );
    assert!(
        !is_elf(&under("/usr/bin/nvidia-container-cli")),
        "/usr/bin/nvidia-container-cli is not the stand-in's"
    );
}

#[test]
fn rpm_holds_the_same_files_as_the_deb_and_no_config_files() {
    let (deb, rpm) = packages();
    let deb_set: BTreeSet<String> = deb_files(&deb).iter().map(|e| usr_lib(e)).collect();
    let rpm_set = rpm_files(&rpm);
    assert!(!deb_set.is_empty(), "{} holds no files", deb.display());
    assert_eq!(
        deb_set,
        rpm_set,
        "the packages differ: only in the .deb {:#?}, only in the .rpm {:#?}",
        deb_set.difference(&rpm_set).collect::<Vec<_>>(),
        rpm_set.difference(&deb_set).collect::<Vec<_>>()
    );

    // No config files: the scripts write them when missing (an upgrade, a removal or a switch
    // from upstream's packages never asks).
    let rpm_conf = stdout(Command::new("rpm").args(["-qp", "--configfiles"]).arg(&rpm));
    assert_eq!(rpm_conf.trim(), "", "rpm -qp --configfiles");
    let out = Command::new("dpkg-deb")
        .arg("-I")
        .arg(&deb)
        .arg("conffiles")
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the .deb has conffiles: {}",
        out_text(&out)
    );

    // The man pages, completions, defaults and units are in both (the set check above compares
    // them); here: they are the ones the install layout promises.
    for path in [
        "/usr/share/man/man1/nvidia-ctk.1.gz",
        "/usr/share/man/man1/nvidia-ctk-cdi-generate.1.gz",
        "/usr/share/bash-completion/completions/nvidia-ctk",
        "/usr/share/zsh/vendor-completions/_nvidia-ctk",
        "/usr/share/fish/vendor_completions.d/nvidia-ctk.fish",
        "/usr/lib/systemd/system/nvidia-cdi-refresh.service",
        "/usr/lib/systemd/system/nvidia-cdi-refresh.path",
        "/usr/lib/systemd/system/nvidia-cdi-refresh.service.d/10-container-engines.conf",
        "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json",
        "/usr/share/nvidia-container-toolkit/config.toml",
        "/usr/share/nvidia-container-toolkit/nvidia-cdi-refresh.env",
        "/usr/bin/nvidia-container-toolkit",
        "/usr/bin/nvidia-container-cli",
    ] {
        assert!(
            deb_set.iter().any(|e| e.ends_with(&format!(" {path}"))),
            "{path} is not in the packages"
        );
    }
    assert!(
        deb_files(&deb)
            .iter()
            .any(|e| e.ends_with(" /lib/systemd/system/nvidia-cdi-refresh.service")),
        "the .deb's units are not in /lib/systemd/system, where upstream's .deb has them"
    );
}

/// The packaged units and drop-in pass `systemd-analyze verify` (with ExecStart pointing at
/// the packaged nvidia-ctk, extracted, since this host has no /usr/bin/nvidia-ctk of its own;
/// verify reads the drop-in from the directory next to the unit, and warns of a bad line in
/// it). The service makes the control nodes and the /dev/char links before the spec, each
/// step best-effort, and the drop-in orders the engines after it with a start timeout.
#[test]
fn packaged_units_verify() {
    let analyze = bundle::require("systemd-analyze");
    let (deb, _) = packages();
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree));
    let units = dir.path().join("units");
    std::fs::create_dir_all(units.join("nvidia-cdi-refresh.service.d")).unwrap();
    let ctk = tree.join("usr/bin/nvidia-ctk");
    let mut paths = Vec::new();
    let mut texts = Vec::new();
    for unit in [
        "nvidia-cdi-refresh.service",
        "nvidia-cdi-refresh.path",
        "nvidia-cdi-refresh.service.d/10-container-engines.conf",
    ] {
        let text = std::fs::read_to_string(tree.join("lib/systemd/system").join(unit)).unwrap();
        let path = units.join(unit);
        std::fs::write(
            &path,
            text.replace("/usr/bin/nvidia-ctk", ctk.to_str().unwrap()),
        )
        .unwrap();
        if !unit.contains(".d/") {
            paths.push(path);
        }
        texts.push(text);
    }
    let out = Command::new(analyze)
        .args(["verify", "--man=no"])
        .args(&paths)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}",
        out_text(&out)
    );

    let lines = |text: &str, key: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(String::from)
            .collect()
    };
    let pre = lines(&texts[0], "ExecStartPre");
    let want_pre = [
        "/usr/bin/nvidia-smi /usr/sbin/nvidia-smi",
        "create-device-nodes --control-devices --load-kernel-modules",
        "create-dev-char-symlinks --create-all",
    ];
    assert_eq!(pre.len(), want_pre.len(), "ExecStartPre lines: {pre:#?}");
    for (line, want) in pre.iter().zip(want_pre) {
        assert!(
            line.starts_with('-') && line.contains(want),
            "ExecStartPre={line}: expected a best-effort ('-') step running {want:?}"
        );
    }
    assert_eq!(
        lines(&texts[0], "ExecStart"),
        ["/usr/bin/nvidia-ctk cdi generate"]
    );
    let before = lines(&texts[2], "Before").join(" ");
    for engine in ["docker.service", "containerd.service", "crio.service"] {
        assert!(
            before.split(' ').any(|u| u == engine),
            "the drop-in does not order {engine} after the service: Before={before}"
        );
    }
    assert_eq!(lines(&texts[2], "TimeoutStartSec"), ["90s"]);
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// the packaged config's ldconfig and cgroup on each host.
    deb_installs_runs_a_gpu_container_and_removes_cleanly,
}

/// The .rpm's switch, in a scratch rpm root (busybox as its /bin/sh; `--nodeps`: the root has
/// no libc package): stand-ins for upstream's 1.18 rpms (built here with rpmbuild: the base
/// package holds nvidia-ctk, the units in /etc/systemd/system and the env file as a
/// `%config(noreplace)` file, and its %post writes config.toml when there is none;
/// libnvidia-container-tools holds nvidia-container-cli), the operator's edits to both files,
/// then `rpm -U` of ours: the base and tools packages are erased (our Obsoletes) and
/// /usr/bin/nvidia-container-cli is ours, rpm saves the edited env file as .rpmsave and our
/// %posttrans puts it back, the config stays, upstream's unit copies go with their package.
#[test]
fn rpm_switches_from_upstream_stand_ins() {
    bundle::require_root();
    let rpm_tool = bundle::require("rpm");
    let rpmbuild = bundle::require("rpmbuild");
    let (_, rpm) = packages();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("stand-in.spec");
    std::fs::write(
        &spec,
        r#"Name: nvidia-container-toolkit
Version: 1.18.2
Release: 1
Summary: stand-in for upstream's nvidia-container-toolkit
License: none
BuildArch: noarch
Requires: nvidia-container-toolkit-base == %{version}-%{release}
Requires: libnvidia-container-tools >= %{version}-%{release}, libnvidia-container-tools < 2.0.0
%description
stand-in
%package base
Summary: stand-in for upstream's nvidia-container-toolkit-base
%description base
stand-in
%package -n libnvidia-container-tools
Summary: stand-in for upstream's libnvidia-container-tools
%description -n libnvidia-container-tools
stand-in
%install
mkdir -p %{buildroot}/usr/bin %{buildroot}/etc/systemd/system %{buildroot}/etc/nvidia-container-toolkit
for p in nvidia-ctk nvidia-container-runtime nvidia-cdi-hook nvidia-container-runtime-hook nvidia-container-cli; do printf '#!/bin/sh\necho stand-in\n' >%{buildroot}/usr/bin/$p; chmod 755 %{buildroot}/usr/bin/$p; done
printf '[Unit]\nDescription=stand-in\n' >%{buildroot}/etc/systemd/system/nvidia-cdi-refresh.service
printf '[Unit]\nDescription=stand-in\n' >%{buildroot}/etc/systemd/system/nvidia-cdi-refresh.path
printf '# stand-in: variables of nvidia-ctk cdi generate\n' >%{buildroot}/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env
%post base
[ -e /etc/nvidia-container-runtime/config.toml ] || { mkdir -p /etc/nvidia-container-runtime; printf '[nvidia-container-runtime]\nlog-level = "info"\n' >/etc/nvidia-container-runtime/config.toml; }
%posttrans
ln -sf /usr/bin/nvidia-container-runtime-hook /usr/bin/nvidia-container-toolkit
%files
/usr/bin/nvidia-container-runtime-hook
%files base
/usr/bin/nvidia-ctk
/usr/bin/nvidia-container-runtime
/usr/bin/nvidia-cdi-hook
/etc/systemd/system/nvidia-cdi-refresh.service
/etc/systemd/system/nvidia-cdi-refresh.path
%config(noreplace) /etc/nvidia-container-toolkit/nvidia-cdi-refresh.env
%files -n libnvidia-container-tools
/usr/bin/nvidia-container-cli
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    run(Command::new(rpmbuild)
        .args(["--quiet", "-bb"])
        .arg("--define")
        .arg(format!("_topdir {}", dir.path().join("top").display()))
        .arg("--define")
        .arg(format!("_rpmdir {}", out.display()))
        .arg("--define")
        .arg("_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm")
        .arg(&spec));
    let root = dir.path().join("root");
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(bundle::require("busybox"), bin.join("busybox")).unwrap();
    for applet in [
        "sh", "rm", "[", "test", "cat", "echo", "cp", "mv", "mkdir", "ln", "dirname", "grep",
        "head",
    ] {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).unwrap();
    }
    std::fs::create_dir_all(root.join("dev")).unwrap();
    run(Command::new("mknod")
        .arg(root.join("dev/null"))
        .args(["c", "1", "3"]));
    let rpm_in = |args: &[&str]| {
        let mut cmd = Command::new(&rpm_tool);
        cmd.arg("--root").arg(&root).args(args);
        run(&mut cmd)
    };
    rpm_in(&["--initdb"]);
    rpm_in(&[
        "-i",
        "--nodeps",
        out.join("nvidia-container-toolkit-base-1.18.2-1.noarch.rpm")
            .to_str()
            .unwrap(),
        out.join("nvidia-container-toolkit-1.18.2-1.noarch.rpm")
            .to_str()
            .unwrap(),
        out.join("libnvidia-container-tools-1.18.2-1.noarch.rpm")
            .to_str()
            .unwrap(),
    ]);
    let under = |p: &str| root.join(p.trim_start_matches('/'));
    let mut config = std::fs::read_to_string(under(CONFIGS[0].0)).unwrap();
    config.push_str("# edited by the operator\n");
    std::fs::write(under(CONFIGS[0].0), &config).unwrap();
    let mut env = std::fs::read_to_string(under(CONFIGS[1].0)).unwrap();
    env.push_str("NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES=uuid\n");
    std::fs::write(under(CONFIGS[1].0), &env).unwrap();

    let done = rpm_in(&["-U", "--nodeps", rpm.to_str().unwrap()]);
    let installed = stdout(Command::new(&rpm_tool).arg("--root").arg(&root).args([
        "-qa",
        "--qf",
        "%{NAME} %{EPOCH}:%{VERSION}\\n",
    ]));
    assert_eq!(
        installed.trim(),
        format!("{NAME} {}", package_version()),
        "rpm -U: {}",
        out_text(&done)
    );
    for (file, want) in [(CONFIGS[0].0, &config), (CONFIGS[1].0, &env)] {
        let now = std::fs::read_to_string(under(file)).unwrap_or_default();
        assert_eq!(&now, want, "{file} was not kept: {}", out_text(&done));
    }
    for unit in UNITS {
        assert!(
            !under(&format!("/etc/systemd/system/{unit}")).exists(),
            "upstream's {unit} copy is still in /etc/systemd/system"
        );
    }
    assert_eq!(
        std::fs::read_link(under("/usr/bin/nvidia-container-toolkit")).unwrap(),
        Path::new("nvidia-container-runtime-hook")
    );
    assert!(
        is_elf(&under("/usr/bin/nvidia-container-cli")),
        "/usr/bin/nvidia-container-cli is not ours after rpm -U: {}",
        out_text(&done)
    );
}
