//! The packages of scripts/package.sh, installed for real: the .deb with `dpkg --root` into a
//! scratch root (an empty dpkg database, and busybox as its /bin/sh: dpkg runs the maintainer
//! scripts chrooted there), its nvidia-ctk run, a GPU container started under real runc whose
//! prestart hook is the installed hook with the installed (edited) config, then `dpkg -r` (the
//! edited config files stay, byte for byte) and `dpkg --purge` (they go). The .rpm is checked
//! against the .deb: the same files with the same modes, and exactly the same config files.
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
const CONFFILES: [&str; 2] = [
    "/etc/nvidia-container-runtime/config.toml",
    "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env",
];

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
    for applet in ["sh", "rm", "[", "test", "cat", "echo"] {
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

/// `dpkg -s`'s Status line of the package in `root` ("" when dpkg knows nothing of it).
fn status(root: &Path) -> String {
    let out = Command::new("dpkg-query")
        .arg(format!(
            "--admindir={}",
            root.join("var/lib/dpkg").display()
        ))
        .args(["-W", "-f", "${Status}", NAME])
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
    for entry in &files {
        let path = entry.split(' ').nth(1).unwrap();
        assert!(
            under(path).symlink_metadata().is_ok(),
            "{path}: in the package, not installed"
        );
    }
    // The layout of scripts/build-release.sh: static fronts and hook in usr/bin, their dynamic
    // programs in usr/libexec/nvct.
    for (path, want_static) in [
        ("/usr/bin/nvidia-cdi-hook", true),
        ("/usr/bin/nvidia-container-runtime-hook", true),
        ("/usr/bin/nvidia-ctk", true),
        ("/usr/bin/nvidia-container-runtime", true),
        ("/usr/bin/nvidia-ctk-installer", false),
        ("/usr/libexec/nvct/nvidia-container-runtime-hook", false),
        ("/usr/libexec/nvct/nvidia-ctk", false),
        ("/usr/libexec/nvct/nvidia-container-runtime", false),
    ] {
        let bytes = std::fs::read(under(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(
            nvct::container::ldconfig::static_elf(&bytes).is_ok(),
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
    let config = under(CONFFILES[0]);
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
    let env_file = under(CONFFILES[1]);
    let mut env_text = std::fs::read(&env_file).unwrap();
    env_text.extend_from_slice(b"NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES=uuid\n");
    std::fs::write(&env_file, &env_text).unwrap();
    let edited: Vec<Vec<u8>> = CONFFILES
        .iter()
        .map(|c| std::fs::read(under(c)).unwrap())
        .collect();
    assert_ne!(
        edited[0], shipped_config,
        "nvidia-ctk config --set changed nothing"
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
    let conffiles: BTreeSet<&str> = CONFFILES.into_iter().collect();
    for entry in &files {
        let path = entry.split(' ').nth(1).unwrap();
        if !conffiles.contains(path) {
            assert!(
                under(path).symlink_metadata().is_err(),
                "{path}: still there after dpkg -r"
            );
        }
    }
    for (c, want) in CONFFILES.iter().zip(&edited) {
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
    for c in CONFFILES {
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
        ("postinst", &["daemon-reload", "/run/systemd/system"]),
        ("prerm", &["stop $units", "disable $units", "remove"]),
        (
            "postrm",
            &["purge", ".wants/nvidia-cdi-refresh.path", "daemon-reload"],
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
        "--no-reload disable nvidia-cdi-refresh.path nvidia-cdi-refresh.service",
        "stop nvidia-cdi-refresh.path nvidia-cdi-refresh.service",
    ] {
        assert!(
            scripts.contains(part),
            "rpm --scripts lacks {part:?}:\n{scripts}"
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

#[test]
fn rpm_holds_the_same_files_and_config_files_as_the_deb() {
    let (deb, rpm) = packages();
    let (deb_set, rpm_set) = (deb_files(&deb), rpm_files(&rpm));
    assert!(!deb_set.is_empty(), "{} holds no files", deb.display());
    assert_eq!(
        deb_set,
        rpm_set,
        "the packages differ: only in the .deb {:#?}, only in the .rpm {:#?}",
        deb_set.difference(&rpm_set).collect::<Vec<_>>(),
        rpm_set.difference(&deb_set).collect::<Vec<_>>()
    );

    let want: BTreeSet<String> = CONFFILES.iter().map(|s| s.to_string()).collect();
    let rpm_conf: BTreeSet<String> =
        stdout(Command::new("rpm").args(["-qp", "--configfiles"]).arg(&rpm))
            .lines()
            .map(String::from)
            .collect();
    assert_eq!(rpm_conf, want, "rpm -qp --configfiles");
    let deb_conf: BTreeSet<String> = stdout(
        Command::new("dpkg-deb")
            .arg("-I")
            .arg(&deb)
            .arg("conffiles"),
    )
    .lines()
    .map(String::from)
    .collect();
    assert_eq!(deb_conf, want, "the .deb's conffiles");

    // The man pages, completions and units are in both (the set check above compares them);
    // here: they are the ones the install layout promises.
    for path in [
        "/usr/share/man/man1/nvidia-ctk.1.gz",
        "/usr/share/man/man1/nvidia-ctk-cdi-generate.1.gz",
        "/usr/share/bash-completion/completions/nvidia-ctk",
        "/usr/share/zsh/vendor-completions/_nvidia-ctk",
        "/usr/share/fish/vendor_completions.d/nvidia-ctk.fish",
        "/usr/lib/systemd/system/nvidia-cdi-refresh.service",
        "/usr/lib/systemd/system/nvidia-cdi-refresh.path",
        "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json",
    ] {
        assert!(
            deb_set.iter().any(|e| e.ends_with(&format!(" {path}"))),
            "{path} is not in the packages"
        );
    }
}

/// The packaged units pass `systemd-analyze verify` (with ExecStart pointing at the packaged
/// nvidia-ctk, extracted, since this host has no /usr/bin/nvidia-ctk of its own).
#[test]
fn packaged_units_verify() {
    let analyze = bundle::require("systemd-analyze");
    let (deb, _) = packages();
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&tree));
    let units = dir.path().join("units");
    std::fs::create_dir(&units).unwrap();
    let ctk = tree.join("usr/bin/nvidia-ctk");
    let mut paths = Vec::new();
    for unit in ["nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path"] {
        let text = std::fs::read_to_string(tree.join("usr/lib/systemd/system").join(unit)).unwrap();
        let path = units.join(unit);
        std::fs::write(
            &path,
            text.replace("/usr/bin/nvidia-ctk", ctk.to_str().unwrap()),
        )
        .unwrap();
        paths.push(path);
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
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// the packaged config's ldconfig and cgroup on each host.
    deb_installs_runs_a_gpu_container_and_removes_cleanly,
}
