//! Black-box tests of `nvidia-ctk runtime configure|unconfigure`: the real binary, in a fresh
//! temp dir per case, against committed golden files (tests/fixtures/runtime_config), the real
//! containerd (`containerd config dump` is the judge of what we write), bad inputs, a crash at
//! every step of the write, concurrent runs, and `--dry-run` / `--diff`. Upstream's default
//! layout (no path flag: the engines' files under /etc) runs in a [`PrivateEtc`]; every other
//! run names its files in a temp dir, and [`ctk`] refuses a run that would write the host's /etc.
//! These tests need root (mount namespaces, overlayfs, chown).
//!
//! `UPDATE_GOLDEN=1 cargo test --all-features --test suite -- runtime_configure::` rewrites the
//! golden files; review the diff before committing. The containerd tests need the `containerd` binary (Debian:
//! `apt-get install -y containerd`) and fail, never skip, without it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_nvidia-ctk");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runtime_config")
}

fn input(name: &str) -> String {
    let p = fixtures().join("inputs").join(name);
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Would `nvidia-ctk ARGS` write below the host's /etc? `runtime configure|unconfigure` does
/// unless it is a dry run or names every file it writes: `--config`, and for containerd and
/// CRI-O a `--drop-in-config` with a value (the defaults are upstream's /etc paths), or an
/// `--oci-hook-path` (configure without one prints the hook).
fn writes_host_etc(args: &[&str]) -> bool {
    let (Some(&"runtime"), Some(cmd)) = (args.first(), args.get(1)) else {
        return false;
    };
    let has = |flag: &str| {
        args.iter()
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")))
    };
    let dry = (has("--dry-run") && !args.contains(&"--dry-run=false")) || has("--diff");
    if dry {
        return false;
    }
    if args
        .iter()
        .any(|a| a.contains("oci-hook") || *a == "--config-mode=hook")
    {
        return !(has("--oci-hook-path") || *cmd == "configure");
    }
    let engine_with_drop_in = ["--runtime=containerd", "--runtime=crio"]
        .iter()
        .any(|r| args.contains(r));
    let drop_in_named = args.iter().enumerate().any(|(i, a)| {
        a.starts_with("--drop-in-config=")
            || (*a == "--drop-in-config" && args.get(i + 1).is_some_and(|v| !v.starts_with("--")))
    });
    !has("--config") || (engine_with_drop_in && !drop_in_named)
}

/// Run the binary; the returned output is printed in full by [`ctx`] on failure. A run that
/// would write the host's /etc is a bug of the test: use [`PrivateEtc`] for the default paths.
fn ctk(args: &[&str], env: &[(&str, &str)]) -> Output {
    assert!(
        !writes_host_etc(args),
        "test bug: `nvidia-ctk {}` would write the host's /etc (name the files, or run it in a PrivateEtc)",
        args.join(" ")
    );
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("NVCT_FAULT_AT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("running {BIN}: {e}"))
}

fn ctx(args: &[&str], out: &Output) -> String {
    format!(
        "\n--- command: nvidia-ctk {}\n--- status: {}\n--- stdout:\n{}\n--- stderr:\n{}\n",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(args: &[&str]) -> Output {
    let out = ctk(args, &[]);
    assert!(out.status.success(), "command failed{}", ctx(args, &out));
    out
}

fn read_opt(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok()
}

#[test]
fn the_host_etc_guard_of_these_tests() {
    let cases: &[(&str, &[&str], bool)] = &[
        (
            "containerd default drop-in",
            &[
                "runtime",
                "configure",
                "--runtime=containerd",
                "--config",
                "/t/c.toml",
            ],
            true,
        ),
        (
            "bare drop-in flag is the default",
            &[
                "runtime",
                "configure",
                "--runtime=crio",
                "--config=/t/c",
                "--drop-in-config",
            ],
            true,
        ),
        (
            "in place",
            &[
                "runtime",
                "unconfigure",
                "--runtime=containerd",
                "--config=/t/c",
                "--drop-in-config=",
            ],
            false,
        ),
        (
            "drop-in named",
            &[
                "runtime",
                "configure",
                "--runtime=crio",
                "--config=/t/c",
                "--drop-in-config",
                "/t/d.toml",
            ],
            false,
        ),
        (
            "docker named",
            &["runtime", "configure", "--config", "/t/d.json"],
            false,
        ),
        ("docker default", &["runtime", "configure"], true),
        (
            "dry run",
            &["runtime", "configure", "--runtime=containerd", "--dry-run"],
            false,
        ),
        (
            "dry run off",
            &["runtime", "configure", "--dry-run=false"],
            true,
        ),
        (
            "hook to stdout",
            &["runtime", "configure", "--config-mode=oci-hook"],
            false,
        ),
        ("other command", &["cdi", "list"], false),
    ];
    for (name, args, want) in cases {
        assert_eq!(writes_host_etc(args), *want, "case {name}");
    }
}

/// A private /etc for runs that use the engines' default paths (upstream's layout): each run
/// gets a mount namespace with an overlay on the host's /etc whose writes land in `upper`, so
/// the host's /etc is never written. /etc/containerd, /etc/crio and /etc/docker start empty
/// (opaque: nothing of the host's shows through).
struct PrivateEtc {
    dir: tempfile::TempDir,
}

impl PrivateEtc {
    fn new() -> PrivateEtc {
        let dir = tempfile::Builder::new()
            .prefix("nvct-etc-")
            .tempdir()
            .unwrap();
        for d in ["upper", "work"] {
            fs::create_dir(dir.path().join(d)).unwrap();
        }
        let etc = PrivateEtc { dir };
        let out = etc.sh(
            "rm -rf /etc/containerd /etc/crio /etc/docker && mkdir /etc/containerd /etc/crio /etc/docker",
            &[],
        );
        assert!(
            out.status.success(),
            "setting up the private /etc{}",
            ctx(&[], &out)
        );
        etc
    }

    /// `sh -c SCRIPT sh ARGS...` in a mount namespace with the overlay on /etc.
    fn sh(&self, script: &str, args: &[&str]) -> Output {
        let d = self.dir.path();
        let mount = format!(
            "mount -t overlay overlay -o lowerdir=/etc,upperdir={},workdir={} /etc && {script}",
            d.join("upper").display(),
            d.join("work").display()
        );
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &mount, "sh"])
            .args(args)
            .env_remove("NVCT_FAULT_AT")
            .output()
            .unwrap_or_else(|e| panic!("unshare (util-linux) is required: {e}"))
    }

    /// `nvidia-ctk ARGS` seeing the private /etc.
    fn ctk(&self, args: &[&str]) -> Output {
        let mut all = vec![BIN];
        all.extend(args);
        self.sh("exec \"$@\"", &all)
    }

    /// Where `/etc/...` of the private /etc is on the host.
    fn host_path(&self, etc_path: &Path) -> PathBuf {
        let rel = etc_path.strip_prefix("/etc").expect("a path below /etc");
        self.dir.path().join("upper").join(rel)
    }

    /// A file of the private /etc (a removed one is absent, or an overlay whiteout).
    fn read(&self, etc_path: &Path) -> Option<String> {
        use std::os::unix::fs::FileTypeExt;
        let p = self.host_path(etc_path);
        let meta = fs::symlink_metadata(&p).ok()?;
        if meta.file_type().is_char_device() {
            return None;
        }
        read_opt(&p)
    }

    fn write(&self, etc_path: &Path, text: &str) {
        let p = self.host_path(etc_path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
}

/// Compare `got` (with the temp dir replaced by `@TMP@`) against a golden file, or rewrite it.
fn check_golden(case: &str, golden: &str, got: Option<String>, tmp: &Path) {
    let path = fixtures().join("golden").join(golden);
    let got = got.map(|g| g.replace(&tmp.display().to_string(), "@TMP@"));
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        match &got {
            Some(g) => fs::write(&path, g).unwrap(),
            None => {
                let _ = fs::remove_file(&path);
            }
        }
        return;
    }
    let want = read_opt(&path);
    assert_eq!(
        got.as_deref(),
        want.as_deref(),
        "case {case}: {} differs from golden {} (UPDATE_GOLDEN=1 to regenerate, then review)",
        golden,
        path.display()
    );
}

#[derive(Clone, Copy, PartialEq)]
enum RoundTrip {
    /// unconfigure gives back the input bytes.
    Original,
    /// unconfigure removes the file configure created.
    Removed,
}

/// Which files a case names.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Layout {
    /// `--config <tmp>/FILE` and, for containerd and CRI-O, `--drop-in-config=""`: the config
    /// file edited in place.
    InPlace,
    /// `--config <tmp>/FILE --drop-in-config <tmp>/conf.d/99-nvidia.toml`.
    DropIn,
    /// No path flag: the engine's default paths, upstream 1.18's layout (a drop-in for
    /// containerd and CRI-O), in a [`PrivateEtc`].
    Defaults,
}

struct Golden {
    name: &'static str,
    runtime: &'static str,
    /// Fixture under inputs/, or None for a missing config file.
    input: Option<&'static str>,
    /// File name of the config (in the temp dir, or the engine's default under /etc).
    file: &'static str,
    args: &'static [&'static str],
    layout: Layout,
    round_trip: RoundTrip,
}

const GOLDEN: &[Golden] = &[
    Golden {
        name: "containerd-v1",
        runtime: "containerd",
        input: Some("containerd-v1.toml"),
        file: "config.toml",
        args: &[],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v1-default-cdi",
        runtime: "containerd",
        input: Some("containerd-v1.toml"),
        file: "config.toml",
        args: &["--set-as-default", "--enable-cdi"],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v2",
        runtime: "containerd",
        input: Some("containerd-v2-default.toml"),
        file: "config.toml",
        args: &[],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v2-default-cdi",
        runtime: "containerd",
        input: Some("containerd-v2-default.toml"),
        file: "config.toml",
        args: &["--nvidia-set-as-default", "--cdi.enabled"],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v2-drop-in",
        runtime: "containerd",
        input: Some("containerd-v2-default.toml"),
        file: "config.toml",
        args: &["--set-as-default"],
        layout: Layout::DropIn,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v3",
        runtime: "containerd",
        input: Some("containerd-v3.toml"),
        file: "config.toml",
        args: &[
            "--nvidia-runtime-name=gpu",
            "--nvidia-runtime-path=/opt/nvidia/bin/nvidia-container-runtime",
        ],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v3-default-cdi",
        runtime: "containerd",
        input: Some("containerd-v3.toml"),
        file: "config.toml",
        args: &["--set-as-default", "--enable-cdi"],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v3-drop-in",
        runtime: "containerd",
        input: Some("containerd-v3.toml"),
        file: "config.toml",
        args: &["--enable-cdi"],
        layout: Layout::DropIn,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-missing",
        runtime: "containerd",
        input: None,
        file: "config.toml",
        args: &[],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Removed,
    },
    Golden {
        name: "docker",
        runtime: "docker",
        input: Some("daemon.json"),
        file: "daemon.json",
        args: &[],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "docker-default-cdi",
        runtime: "docker",
        input: Some("daemon.json"),
        file: "daemon.json",
        args: &["--set-as-default", "--enable-cdi"],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "docker-missing",
        runtime: "docker",
        input: None,
        file: "daemon.json",
        args: &[],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Removed,
    },
    Golden {
        name: "crio",
        runtime: "crio",
        input: Some("crio.conf"),
        file: "crio.conf",
        args: &[],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "crio-default",
        runtime: "crio",
        input: Some("crio.conf"),
        file: "crio.conf",
        args: &["--set-as-default"],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "crio-drop-in",
        runtime: "crio",
        input: Some("crio.conf"),
        file: "crio.conf",
        args: &["--set-as-default"],
        layout: Layout::DropIn,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "docker-absolute-path",
        runtime: "docker",
        input: Some("daemon.json"),
        file: "daemon.json",
        args: &["--runtime-path=/usr/bin/nvidia-container-runtime"],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Original,
    },
    // Upstream's defaults: no path flag at all.
    Golden {
        name: "containerd-v1-defaults",
        runtime: "containerd",
        input: Some("containerd-v1.toml"),
        file: "config.toml",
        args: &[],
        layout: Layout::Defaults,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v2-defaults",
        runtime: "containerd",
        input: Some("containerd-v2-default.toml"),
        file: "config.toml",
        args: &[],
        layout: Layout::Defaults,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v3-defaults",
        runtime: "containerd",
        input: Some("containerd-v3.toml"),
        file: "config.toml",
        args: &[],
        layout: Layout::Defaults,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-missing-defaults",
        runtime: "containerd",
        input: None,
        file: "config.toml",
        args: &[],
        layout: Layout::Defaults,
        round_trip: RoundTrip::Removed,
    },
    Golden {
        name: "docker-defaults",
        runtime: "docker",
        input: Some("daemon.json"),
        file: "daemon.json",
        args: &[],
        layout: Layout::Defaults,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "crio-defaults",
        runtime: "crio",
        input: Some("crio.conf"),
        file: "crio.conf",
        args: &[],
        layout: Layout::Defaults,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "crio-oci-hook",
        runtime: "crio",
        input: None,
        file: "oci-nvidia-hook.json",
        args: &["--config-mode=oci-hook"],
        layout: Layout::InPlace,
        round_trip: RoundTrip::Removed,
    },
];

fn ext(file: &str) -> &str {
    Path::new(file)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("conf")
}

/// Where a golden case's files are and how its commands run.
struct CaseFiles {
    /// The temp dir (`@TMP@` in the goldens).
    tmp: tempfile::TempDir,
    /// Set for [`Layout::Defaults`].
    etc: Option<PrivateEtc>,
    config: PathBuf,
    drop_in: PathBuf,
    /// `--runtime`, the path flags and the flags unconfigure needs too.
    select: Vec<String>,
}

impl CaseFiles {
    fn new(case: &Golden) -> CaseFiles {
        let tmp = tempfile::Builder::new()
            .prefix("nvct-golden-")
            .tempdir()
            .unwrap();
        let hook = case.args.iter().any(|a| a.starts_with("--config-mode"));
        let (etc, config, drop_in) = match case.layout {
            Layout::Defaults => {
                let dir = match case.runtime {
                    "containerd" => "/etc/containerd",
                    "crio" => "/etc/crio",
                    _ => "/etc/docker",
                };
                let drop_in = match case.runtime {
                    "containerd" => "/etc/containerd/conf.d/99-nvidia.toml",
                    _ => "/etc/crio/crio.conf.d/99-nvidia.toml",
                };
                let config = Path::new(dir).join(case.file);
                (Some(PrivateEtc::new()), config, PathBuf::from(drop_in))
            }
            _ => (
                None,
                tmp.path().join(case.file),
                tmp.path().join("conf.d/99-nvidia.toml"),
            ),
        };
        let mut select = vec![format!("--runtime={}", case.runtime)];
        let path_flag = if hook { "--oci-hook-path" } else { "--config" };
        match case.layout {
            Layout::Defaults => {}
            Layout::InPlace => {
                select.push(format!("{path_flag}={}", config.display()));
                if case.runtime != "docker" && !hook {
                    select.push("--drop-in-config=".into());
                }
            }
            Layout::DropIn => {
                select.push(format!("{path_flag}={}", config.display()));
                select.push(format!("--drop-in-config={}", drop_in.display()));
            }
        }
        select.extend(
            case.args
                .iter()
                .filter(|a| {
                    a.starts_with("--config-mode") || a.starts_with("--nvidia-runtime-name")
                })
                .map(|a| a.to_string()),
        );
        let files = CaseFiles {
            tmp,
            etc,
            config,
            drop_in,
            select,
        };
        if let Some(text) = case.input.map(input) {
            match &files.etc {
                Some(etc) => etc.write(&files.config, &text),
                None => fs::write(&files.config, text).unwrap(),
            }
        }
        files
    }

    fn read(&self, p: &Path) -> Option<String> {
        match &self.etc {
            Some(etc) => etc.read(p),
            None => read_opt(p),
        }
    }

    /// `nvidia-ctk runtime COMMAND <select> EXTRA`, which must succeed.
    fn run(&self, command: &str, extra: &[&str]) -> (Vec<String>, Output) {
        let mut args: Vec<String> = vec!["runtime".into(), command.into()];
        args.extend(self.select.iter().cloned());
        args.extend(extra.iter().map(|a| a.to_string()));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = match &self.etc {
            Some(etc) => etc.ctk(&a),
            None => ctk(&a, &[]),
        };
        assert!(out.status.success(), "command failed{}", ctx(&a, &out));
        (args, out)
    }
}

#[test]
fn golden_configure_idempotent_and_round_trip() {
    for case in GOLDEN {
        let f = CaseFiles::new(case);
        let tmp = f.tmp.path();
        let original = case.input.map(input);
        let extra: Vec<&str> = case
            .args
            .iter()
            .copied()
            .filter(|a| !f.select.iter().any(|s| s == a))
            .collect();

        f.run("configure", &extra);
        let main_after = f.read(&f.config);
        let drop_after = f.read(&f.drop_in);
        check_golden(
            case.name,
            &format!("{}.{}", case.name, ext(case.file)),
            main_after.clone(),
            tmp,
        );
        if case.layout != Layout::InPlace && case.runtime != "docker" {
            check_golden(
                case.name,
                &format!("{}.drop-in.toml", case.name),
                drop_after.clone(),
                tmp,
            );
        } else {
            assert_eq!(
                drop_after, None,
                "case {}: a drop-in was written",
                case.name
            );
        }

        // A second run on its own output changes nothing.
        let (args, out) = f.run("configure", &extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(
            f.read(&f.config),
            main_after,
            "case {}: second run changed the config{}",
            case.name,
            ctx(&args, &out)
        );
        assert_eq!(
            f.read(&f.drop_in),
            drop_after,
            "case {}: second run changed the drop-in",
            case.name
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("nothing to change"),
            "case {}{}",
            case.name,
            ctx(&args, &out)
        );

        // unconfigure (twice) restores the original.
        for round in 1..=2 {
            f.run("unconfigure", &[]);
            let want = match case.round_trip {
                RoundTrip::Original => original.clone(),
                RoundTrip::Removed => None,
            };
            if case.round_trip == RoundTrip::Removed
                && !case.args.iter().any(|a| a.contains("oci-hook"))
            {
                // configure created the file from nothing; unconfigure leaves it without our entry.
                let left = f.read(&f.config).unwrap_or_default();
                assert!(
                    !left.contains("nvidia"),
                    "case {} round {round}: left {left}",
                    case.name
                );
            } else {
                assert_eq!(
                    f.read(&f.config),
                    want,
                    "case {} round {round}: unconfigure did not restore the original",
                    case.name
                );
            }
            assert_eq!(
                f.read(&f.drop_in),
                None,
                "case {} round {round}: drop-in left behind",
                case.name
            );
        }
    }
}

/// `containerd config dump` of `config`, as a TOML document.
fn containerd_dump(config: &Path) -> toml_edit::DocumentMut {
    let out = Command::new("containerd")
        .arg("--config")
        .arg(config)
        .args(["config", "dump"])
        .output()
        .unwrap_or_else(|e| panic!("containerd is required for this test and could not be run ({e}); install it: apt-get install -y containerd"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "containerd config dump failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.parse()
        .unwrap_or_else(|e| panic!("dump is not TOML: {e}\n{text}"))
}

fn default_v2_with_systemd() -> String {
    let text = Command::new("containerd")
        .args(["config", "default"])
        .output()
        .unwrap_or_else(|e| panic!("containerd is required for this test and could not be run ({e}); install it: apt-get install -y containerd"));
    let text = String::from_utf8(text.stdout).unwrap();
    // Turn on SystemdCgroup in runc's options only, to see it inherited.
    let runc = text
        .find("runtimes.runc.options]")
        .expect("runc options in containerd config default");
    let (head, tail) = text.split_at(runc);
    format!(
        "{head}{}",
        tail.replacen("SystemdCgroup = false", "SystemdCgroup = true", 1)
    )
}

#[test]
fn real_containerd_loads_what_we_write() {
    struct Case {
        name: &'static str,
        input: fn() -> String,
        args: &'static [&'static str],
        drop_in: bool,
        binary: &'static str,
        default: &'static str,
    }
    let cases = [
        Case {
            name: "v2 default config",
            input: default_v2_with_systemd,
            args: &[],
            drop_in: false,
            binary: "/usr/bin/nvidia-container-runtime",
            default: "runc",
        },
        Case {
            name: "v1 config, custom path",
            input: || input("containerd-v1.toml"),
            args: &["--nvidia-runtime-path=/opt/nv/nvidia-container-runtime"],
            drop_in: false,
            binary: "/opt/nv/nvidia-container-runtime",
            default: "runc",
        },
        Case {
            name: "v1 config, set as default",
            input: || input("containerd-v1.toml"),
            args: &["--set-as-default"],
            drop_in: false,
            binary: "/usr/bin/nvidia-container-runtime",
            default: "nvidia",
        },
        Case {
            name: "v2 drop-in",
            input: default_v2_with_systemd,
            args: &[],
            drop_in: true,
            binary: "/usr/bin/nvidia-container-runtime",
            default: "runc",
        },
        Case {
            name: "v2 drop-in, set as default",
            input: default_v2_with_systemd,
            args: &["--set-as-default"],
            drop_in: true,
            binary: "/usr/bin/nvidia-container-runtime",
            default: "nvidia",
        },
        Case {
            name: "v1 drop-in from config dump (edited in place)",
            input: || input("containerd-v1.toml"),
            args: &["--config-source=command"],
            drop_in: true,
            binary: "/usr/bin/nvidia-container-runtime",
            default: "runc",
        },
        Case {
            name: "v2 drop-in from config dump",
            input: default_v2_with_systemd,
            args: &["--config-source=command"],
            drop_in: true,
            binary: "/usr/bin/nvidia-container-runtime",
            default: "runc",
        },
    ];
    for case in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        fs::write(&config, (case.input)()).unwrap();
        let before = containerd_dump(&config);
        let cri = &before["plugins"]["io.containerd.grpc.v1.cri"]["containerd"];
        let systemd = cri["runtimes"]["runc"]["options"]["SystemdCgroup"].as_bool();
        assert_eq!(
            systemd,
            Some(true),
            "case {}: fixture should have runc SystemdCgroup = true",
            case.name
        );

        let config_s = config.display().to_string();
        let drop_in_s = dir
            .path()
            .join("conf.d/99-nvidia.toml")
            .display()
            .to_string();
        let mut args = vec![
            "runtime",
            "configure",
            "--runtime=containerd",
            "--config",
            &config_s,
        ];
        if case.drop_in {
            args.extend(["--drop-in-config", &drop_in_s]);
        } else {
            args.push("--drop-in-config=");
        }
        args.extend(case.args);
        ok(&args);

        let dump = containerd_dump(&config);
        let c = &dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"];
        let nv = &c["runtimes"]["nvidia"];
        assert!(
            nv.is_table_like(),
            "case {}: no runtimes.nvidia in dump:\n{dump}",
            case.name
        );
        assert_eq!(
            nv["options"]["BinaryName"].as_str(),
            Some(case.binary),
            "case {}:\n{dump}",
            case.name
        );
        assert_eq!(
            nv["options"]["SystemdCgroup"].as_bool(),
            Some(true),
            "case {}: SystemdCgroup not inherited:\n{dump}",
            case.name
        );
        assert_eq!(
            nv["runtime_type"].as_str(),
            Some("io.containerd.runc.v2"),
            "case {}",
            case.name
        );
        assert_eq!(
            c["default_runtime_name"].as_str(),
            Some(case.default),
            "case {}",
            case.name
        );
        assert_eq!(
            c["runtimes"]["runc"]["options"]["SystemdCgroup"].as_bool(),
            Some(true),
            "case {}: runc changed",
            case.name
        );
    }
}

#[test]
fn real_containerd_loads_the_default_layout() {
    // No path flag (upstream's defaults), in a private /etc: containerd itself reads
    // /etc/containerd/config.toml and what it imports.
    let cases: [(&str, fn() -> String, bool); 2] = [
        ("v2: drop-in and imports", default_v2_with_systemd, true),
        ("v1: edited in place", || input("containerd-v1.toml"), false),
    ];
    for (name, text, drop_in) in cases {
        let etc = PrivateEtc::new();
        etc.write(Path::new("/etc/containerd/config.toml"), &text());
        let args = ["runtime", "configure", "--runtime=containerd"];
        let out = etc.ctk(&args);
        assert!(out.status.success(), "case {name}{}", ctx(&args, &out));
        let written = etc.read(Path::new("/etc/containerd/conf.d/99-nvidia.toml"));
        assert_eq!(
            written.is_some(),
            drop_in,
            "case {name}{}",
            ctx(&args, &out)
        );
        let out = etc.sh(
            "exec containerd --config /etc/containerd/config.toml config dump",
            &[],
        );
        let dump = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "case {name}: containerd config dump{}",
            ctx(&[], &out)
        );
        let dump: toml_edit::DocumentMut = dump.parse().unwrap();
        let nv = &dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"];
        assert_eq!(
            nv["options"]["BinaryName"].as_str(),
            Some("/usr/bin/nvidia-container-runtime"),
            "case {name}:\n{dump}"
        );
        assert_eq!(
            nv["options"]["SystemdCgroup"].as_bool(),
            Some(true),
            "case {name}: SystemdCgroup not inherited:\n{dump}"
        );
    }
}

#[test]
fn bad_inputs_fail_and_leave_the_file_untouched() {
    // (name, runtime, file name, content, expected message parts besides the path)
    let cases: &[(&str, &str, &str, &str, &[&str])] = &[
        (
            "invalid TOML",
            "containerd",
            "config.toml",
            "version = 2\n\n[plugins\n",
            &[":3:", "invalid TOML"],
        ),
        (
            "unknown version",
            "containerd",
            "config.toml",
            "# future\nversion = 7\n",
            &["version 7"],
        ),
        (
            "Go template",
            "containerd",
            "config.toml",
            "version = 2\n{{ template \"base\" . }}\n",
            &["Go template"],
        ),
        (
            "template file name",
            "containerd",
            "config.toml.tmpl",
            "version = 2\n",
            &["Go template"],
        ),
        (
            "invalid JSON",
            "docker",
            "daemon.json",
            "{\n  \"debug\": true,\n}\n",
            &[":3:", "invalid JSON"],
        ),
        (
            "JSON not an object",
            "docker",
            "daemon.json",
            "[1, 2]\n",
            &["not a JSON object"],
        ),
        (
            "invalid crio TOML",
            "crio",
            "crio.conf",
            "[crio.runtime]\ndefault_runtime = \n",
            &[":2:", "invalid TOML"],
        ),
    ];
    for (name, runtime, file, content, parts) in cases {
        for cmd in ["configure", "unconfigure"] {
            let dir = tempfile::tempdir().unwrap();
            let config = dir.path().join(file);
            fs::write(&config, content).unwrap();
            let mtime = fs::metadata(&config).unwrap().modified().unwrap();
            let config_s = config.display().to_string();
            let rt = format!("--runtime={runtime}");
            let mut args = vec!["runtime", cmd, &rt, "--config", &config_s];
            if *runtime != "docker" {
                args.push("--drop-in-config=");
            }
            if cmd == "configure" {
                args.push("--set-as-default");
            }
            let out = ctk(&args, &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "case {name} {cmd}: should fail{}",
                ctx(&args, &out)
            );
            assert!(
                err.contains(&config_s),
                "case {name} {cmd}: message must name the file{}",
                ctx(&args, &out)
            );
            for p in *parts {
                assert!(
                    err.contains(p),
                    "case {name} {cmd}: message lacks {p:?}{}",
                    ctx(&args, &out)
                );
            }
            assert_eq!(
                fs::read_to_string(&config).unwrap(),
                *content,
                "case {name} {cmd}: bytes changed"
            );
            assert_eq!(
                fs::metadata(&config).unwrap().modified().unwrap(),
                mtime,
                "case {name} {cmd}: mtime changed"
            );
            let entries = fs::read_dir(dir.path()).unwrap().count();
            assert_eq!(entries, 1, "case {name} {cmd}: other files were created");
        }
    }
}

/// The steps of fsutil::write_atomic a crash is simulated at (`NVCT_FAULT_AT`), named.
const WRITE_STEPS: &[&str] = &[
    "temp-created",
    "temp-written",
    "temp-synced",
    "renamed",
    "dir-synced",
];

#[test]
fn crash_at_each_write_step_leaves_old_or_new() {
    // (layout, drop-in?) × every step: the process aborts there (SIGABRT, no cleanup).
    for (layout, drop_in) in [("in place", false), ("drop-in", true)] {
        // The content a clean run writes, computed once per layout in its own dir: the paths in
        // it are made equal by running every case at the same path (recreated per case).
        let mut new_content: Option<(Option<String>, Option<String>)> = None;
        for step in std::iter::once("none").chain(WRITE_STEPS.iter().copied()) {
            let name = format!("{layout} / {step}");
            let base = tempfile::tempdir().unwrap();
            let dir = base.path().join("etc-containerd");
            fs::create_dir_all(&dir).unwrap();
            let config = dir.join("config.toml");
            let original = input("containerd-v2-default.toml");
            fs::write(&config, &original).unwrap();
            fs::set_permissions(&config, fs::Permissions::from_mode(0o640)).unwrap();
            let config_s = config.display().to_string();
            let conf_d = dir.join("conf.d");
            let drop_in_path = conf_d.join("99-nvidia.toml");
            let drop_in_s = drop_in_path.display().to_string();
            let mut args = vec![
                "runtime",
                "configure",
                "--runtime=containerd",
                "--config",
                &config_s,
            ];
            if drop_in {
                args.extend(["--drop-in-config", &drop_in_s]);
            } else {
                args.push("--drop-in-config=");
            }
            let relative = |t: Option<String>| {
                t.map(|t| t.replace(&base.path().display().to_string(), "@TMP@"))
            };
            let state = || {
                (
                    relative(read_opt(&config)),
                    relative(read_opt(&drop_in_path)),
                )
            };
            if step == "none" {
                ok(&args);
                new_content = Some(state());
                continue;
            }
            let (new_main, new_drop_in) = new_content.clone().unwrap();
            let out = ctk(&args, &[("NVCT_FAULT_AT", step)]);
            assert!(
                !out.status.success(),
                "case {name}: fault injection did not abort{}",
                ctx(&args, &out)
            );
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("aborting at"),
                "case {name}{}",
                ctx(&args, &out)
            );
            let (main, drop) = state();
            let orig = relative(Some(original.clone()));
            assert!(
                main == orig || main == new_main,
                "case {name}: config.toml torn: {main:?}{}",
                ctx(&args, &out)
            );
            assert!(
                drop.is_none() || drop == new_drop_in,
                "case {name}: drop-in torn: {drop:?}"
            );
            assert!(
                main.as_deref().is_some_and(|m| !m.is_empty()),
                "case {name}: config.toml empty"
            );
            assert_eq!(
                fs::metadata(&config).unwrap().permissions().mode() & 0o7777,
                0o640,
                "case {name}: mode changed"
            );
            for d in [dir.as_path(), conf_d.as_path()] {
                let Ok(rd) = fs::read_dir(d) else { continue };
                for e in rd {
                    let n = e.unwrap().file_name().to_string_lossy().into_owned();
                    assert!(
                        n == "config.toml" || n == "99-nvidia.toml" || !n.ends_with(".toml"),
                        "case {name}: {n} would be read by containerd"
                    );
                }
            }
            // A later normal run succeeds despite the stale temp file and ends in the new content.
            ok(&args);
            assert_eq!(
                state(),
                (new_main, new_drop_in),
                "case {name}: the later run"
            );
            assert_eq!(
                fs::metadata(&config).unwrap().permissions().mode() & 0o7777,
                0o640,
                "case {name}: mode after"
            );
            assert!(
                containerd_dump(&config)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
                    ["runtimes"]
                    .get("nvidia")
                    .is_some(),
                "case {name}: containerd does not see the runtime"
            );
        }
    }
    // An unknown step name is refused, never ignored (a typo would silently test nothing).
    let dir = tempfile::tempdir().unwrap();
    let daemon = dir.path().join("daemon.json").display().to_string();
    let args = [
        "runtime",
        "configure",
        "--runtime=docker",
        "--config",
        &daemon,
    ];
    let out = ctk(&args, &[("NVCT_FAULT_AT", "bogus")]);
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("is not a write step"),
        "{}",
        ctx(&args, &out)
    );
}

#[test]
fn concurrent_configures_all_land() {
    // 10 runs at once, each adding its own runtime name to the same containerd config: the
    // lock on the config's directory serialises read-modify-write, so no update is lost.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    fs::write(&config, input("containerd-v2-default.toml")).unwrap();
    let config_s = config.display().to_string();
    let names: Vec<String> = (0..10).map(|i| format!("nvidia-{i}")).collect();
    let outs: Vec<(String, Output)> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|n| {
                let config_s = &config_s;
                s.spawn(move || {
                    let rn = format!("--nvidia-runtime-name={n}");
                    (
                        n.clone(),
                        ctk(
                            &[
                                "runtime",
                                "configure",
                                "--runtime=containerd",
                                "--config",
                                config_s,
                                "--drop-in-config=",
                                &rn,
                            ],
                            &[],
                        ),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (n, out) in &outs {
        assert!(
            out.status.success(),
            "run {n} failed{}",
            ctx(&["runtime", "configure", n], out)
        );
    }
    let text = fs::read_to_string(&config).unwrap();
    let doc: toml_edit::DocumentMut = text
        .parse()
        .unwrap_or_else(|e| panic!("final file does not parse: {e}\n{text}"));
    let runtimes = &doc["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"];
    for n in &names {
        assert!(
            runtimes.get(n).is_some(),
            "runtime {n} lost (a concurrent update was overwritten):\n{text}"
        );
    }
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

/// Every file below `dir`, with its content and mtime.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p);
            } else if m.is_symlink() {
                let to = fs::read_link(&p).unwrap();
                out.push((
                    p,
                    to.into_os_string().into_encoded_bytes(),
                    m.modified().unwrap(),
                ));
            } else {
                out.push((p.clone(), fs::read(&p).unwrap(), m.modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn dry_run_prints_what_would_be_written_and_writes_nothing() {
    /// What stdout must hold.
    enum Want {
        /// The new content of each changed file, in this order (relative to the temp dir), as
        /// the same command without `--dry-run` writes it.
        Content(&'static [&'static str]),
        /// `--diff`: a unified diff with this `+` line.
        Diff(&'static str),
    }
    // (case, runtime, fixture, config file, flags, want)
    let cases: &[(&str, &str, &str, &str, &[&str], Want)] = &[
        (
            "containerd drop-in: the drop-in, then the main file",
            "containerd",
            "containerd-v2-default.toml",
            "config.toml",
            &["--drop-in-config=@TMP@/conf.d/99-nvidia.toml", "--dry-run"],
            Want::Content(&["conf.d/99-nvidia.toml", "config.toml"]),
        ),
        (
            "containerd in place",
            "containerd",
            "containerd-v3.toml",
            "config.toml",
            &["--drop-in-config=", "--dry-run=true", "--set-as-default"],
            Want::Content(&["config.toml"]),
        ),
        (
            "docker: just the new daemon.json",
            "docker",
            "daemon.json",
            "daemon.json",
            &["--dry-run"],
            Want::Content(&["daemon.json"]),
        ),
        (
            "crio drop-in: only the drop-in changes",
            "crio",
            "crio.conf",
            "crio.conf",
            &[
                "--drop-in-config=@TMP@/crio.conf.d/99-nvidia.toml",
                "--dry-run",
                "-q",
            ],
            Want::Content(&["crio.conf.d/99-nvidia.toml"]),
        ),
        (
            "containerd diff",
            "containerd",
            "containerd-v2-default.toml",
            "config.toml",
            &["--drop-in-config=", "--diff"],
            Want::Diff(
                "+        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]",
            ),
        ),
        (
            "docker diff with dry-run",
            "docker",
            "daemon.json",
            "daemon.json",
            &["--dry-run", "--diff"],
            Want::Diff("+    \"nvidia\": {"),
        ),
        (
            "crio diff",
            "crio",
            "crio.conf",
            "crio.conf",
            &["--drop-in-config=", "--diff"],
            Want::Diff("+[crio.runtime.runtimes.nvidia]"),
        ),
    ];
    for (name, runtime, fixture, file, flags, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().display().to_string();
        let config = dir.path().join(file);
        fs::write(&config, input(fixture)).unwrap();
        let before = snapshot(dir.path());
        let config_s = config.display().to_string();
        let rt = format!("--runtime={runtime}");
        let flags: Vec<String> = flags.iter().map(|f| f.replace("@TMP@", &tmp)).collect();
        let mut args = vec!["runtime", "configure", &rt, "--config", &config_s];
        args.extend(flags.iter().map(String::as_str));
        let out = ok(&args);
        assert_eq!(
            snapshot(dir.path()),
            before,
            "case {name}: something was written"
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        match want {
            Want::Diff(plus) => {
                assert!(
                    stdout.contains(&format!("+++ {config_s}")) && stdout.contains(plus),
                    "case {name}: no diff with {plus:?}{}",
                    ctx(&args, &out)
                );
            }
            Want::Content(files) => {
                // The same command for real: stdout was exactly what it writes.
                let real: Vec<&str> = args
                    .iter()
                    .copied()
                    .filter(|a| !a.starts_with("--dry-run"))
                    .collect();
                ok(&real);
                let written: String = files
                    .iter()
                    .map(|f| fs::read_to_string(dir.path().join(f)).unwrap())
                    .collect();
                assert_eq!(stdout, written, "case {name}{}", ctx(&args, &out));
                let quiet = args.contains(&"-q");
                for f in *files {
                    let p = dir.path().join(f).display().to_string();
                    assert_eq!(
                        stderr.contains(&format!("would create {p}:"))
                            || stderr.contains(&format!("would update {p}:")),
                        !quiet,
                        "case {name}: stderr names {p} (unless -q){}",
                        ctx(&args, &out)
                    );
                }
            }
        }
    }
}

#[test]
fn dry_runs_of_the_defaults_unconfigure_and_the_hook() {
    // No path flag: upstream's drop-in under the real /etc path (in a private /etc).
    let etc = PrivateEtc::new();
    let config = Path::new("/etc/containerd/config.toml");
    etc.write(config, &input("containerd-v2-default.toml"));
    let upper = etc.dir.path().join("upper");
    let before = snapshot(&upper);
    let args = ["runtime", "configure", "--runtime=containerd", "--dry-run"];
    let out = etc.ctk(&args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert!(
        stderr.contains("would create /etc/containerd/conf.d/99-nvidia.toml:")
            && stderr.contains("would update /etc/containerd/config.toml:")
            && stdout
                .contains("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]")
            && stdout.contains("imports = [\"/etc/containerd/conf.d/*.toml\"]"),
        "{}",
        ctx(&args, &out)
    );
    assert_eq!(snapshot(&upper), before, "the dry run wrote something");

    // unconfigure --dry-run after a real configure: the drop-in would go.
    let out = etc.ctk(&["runtime", "configure", "--runtime=containerd"]);
    assert!(out.status.success(), "{}", ctx(&[], &out));
    let before = snapshot(&upper);
    let args = [
        "runtime",
        "unconfigure",
        "--runtime=containerd",
        "--dry-run",
    ];
    let out = etc.ctk(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            && stderr.contains("would remove /etc/containerd/conf.d/99-nvidia.toml")
            && String::from_utf8_lossy(&out.stdout) == input("containerd-v2-default.toml"),
        "{}",
        ctx(&args, &out)
    );
    assert_eq!(snapshot(&upper), before, "the dry run wrote something");

    // --config-mode=oci-hook without --oci-hook-path: the hook on stdout (upstream), no file.
    let args = ["runtime", "configure", "--config-mode=oci-hook"];
    let out = etc.ctk(&args);
    let hook: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not the hook JSON: {e}{}", ctx(&args, &out)));
    assert_eq!(
        hook["hook"]["path"],
        "/usr/bin/nvidia-container-runtime-hook"
    );
    assert_eq!(snapshot(&upper), before, "the hook was written somewhere");
}

#[test]
fn backups_of_secret_configs_stay_secret() {
    // containerd's config.toml and docker's daemon.json often hold registry credentials: mode
    // 0600, owned by the engine's user. `configure` (and `unconfigure`) keep that on the file
    // and give the `.bak` the same mode and owner, never a world-readable copy.
    use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        ("containerd", "config.toml", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"r.example\".auth]\npassword = \"hunter2\"\n"),
        ("docker", "daemon.json", "{\"registry-mirrors\": [\"https://user:hunter2@r.example\"]}\n"),
    ];
    for (runtime, file, text) in cases {
        let p = tmp.path().join(format!("{runtime}-{file}"));
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        chown(&p, Some(4321), Some(8765)).unwrap();
        for command in ["configure", "unconfigure"] {
            // In place: the file with the secrets is the one written.
            ok(&[
                "runtime",
                command,
                &format!("--runtime={runtime}"),
                "--config",
                p.to_str().unwrap(),
                "--drop-in-config=",
            ]);
            let bak = PathBuf::from(format!("{}.bak", p.display()));
            for f in [&p, &bak] {
                let m = std::fs::metadata(f)
                    .unwrap_or_else(|e| panic!("{runtime} {command}: {}: {e}", f.display()));
                assert_eq!(
                    (m.mode() & 0o7777, m.uid(), m.gid()),
                    (0o600, 4321, 8765),
                    "{runtime} {command}: {}",
                    f.display()
                );
            }
        }
    }
}

#[test]
fn symlinks_drop_ins_and_failed_writes() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();

    // A symlinked config (config management, k3s/RKE2): the link stays, its target gets the
    // runtime, the backup lies next to the target; unconfigure restores the target's bytes.
    let real_dir = tmp.path().join("managed");
    fs::create_dir_all(&real_dir).unwrap();
    let target = real_dir.join("config.toml");
    let original = "version = 2\n# managed by config management\n";
    fs::write(&target, original).unwrap();
    let link = tmp.path().join("config.toml");
    symlink(&target, &link).unwrap();
    let out = ok(&[
        "runtime",
        "configure",
        "--runtime=containerd",
        "--config",
        link.to_str().unwrap(),
        "--drop-in-config=",
    ]);
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced{}",
        ctx(&[], &out)
    );
    assert!(
        fs::read_to_string(&target).unwrap().contains("nvidia"),
        "{}",
        ctx(&[], &out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("(a symlink to {})", target.display())),
        "{}",
        ctx(&[], &out)
    );
    assert_eq!(
        fs::read_to_string(real_dir.join("config.toml.bak")).unwrap(),
        original
    );
    assert!(
        !tmp.path().join("config.toml.bak").exists(),
        "a backup next to the link"
    );
    ok(&[
        "runtime",
        "unconfigure",
        "--runtime=containerd",
        "--config",
        link.to_str().unwrap(),
        "--drop-in-config=",
    ]);
    assert_eq!(fs::read_to_string(&target).unwrap(), original);
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());

    // A CRI-O drop-in, configured twice (as default) and unconfigured: crio.conf.d lists the
    // same files before and after (no `.bak` there: CRI-O reads every file), and no empty
    // crio.conf appears.
    let etc = tmp.path().join("crio");
    let confd = etc.join("crio.conf.d");
    fs::create_dir_all(&confd).unwrap();
    fs::write(
        confd.join("10-site.conf"),
        "[crio.runtime]\nlog_level = \"info\"\n",
    )
    .unwrap();
    let listing = |d: &Path| {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let (before_confd, before_etc) = (listing(&confd), listing(&etc));
    let crio_conf = etc.join("crio.conf");
    let drop_in = confd.join("99-nvidia.toml");
    let args = |cmd: &'static str, default: bool| -> Vec<String> {
        let mut a = vec![
            "runtime".into(),
            cmd.into(),
            "--runtime=crio".into(),
            "--config".into(),
            crio_conf.display().to_string(),
            "--drop-in-config".into(),
            drop_in.display().to_string(),
        ];
        if default {
            a.push("--set-as-default".into());
        }
        a
    };
    for (cmd, default) in [
        ("configure", true),
        ("configure", false),
        ("unconfigure", false),
    ] {
        let a = args(cmd, default);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        ok(&a);
        assert!(
            !confd.join("99-nvidia.toml.bak").exists(),
            "{cmd}: a .bak in crio.conf.d: {:?}",
            listing(&confd)
        );
        assert!(!crio_conf.exists(), "{cmd}: crio.conf was created");
    }
    assert_eq!((listing(&confd), listing(&etc)), (before_confd, before_etc));

    // Failed writes: not root, a read-only file system, an immutable file. Exit 1, the user's
    // file named with what to do, the file unchanged, no new backup (an earlier one kept as it
    // was) and no temp file left.
    let cases: [(&str, &str, &str); 3] = [
        (
            "not root",
            "setpriv --reuid=65534 --regid=65534 --clear-groups",
            "run as root",
        ),
        (
            "read-only file system",
            "RO",
            "the file system is read-only",
        ),
        ("immutable file with a backup", "IMMUTABLE", "chattr -i"),
    ];
    for (name, how, want) in cases {
        let dir = tmp.path().join(name.replace(' ', "-"));
        fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("config.toml");
        fs::write(&conf, "version = 2\n").unwrap();
        if how == "IMMUTABLE" {
            // An earlier backup is there: it must be the same after the failed write.
            fs::write(dir.join("config.toml.bak"), "earlier backup\n").unwrap();
            let st = Command::new("chattr")
                .arg("+i")
                .arg(&conf)
                .status()
                .expect("chattr (e2fsprogs)");
            assert!(
                st.success(),
                "chattr +i {} failed: the test needs a file system with attributes (ext4, xfs) under the temp dir",
                conf.display()
            );
        }
        let script = if how == "IMMUTABLE" {
            format!(
                "exec {BIN} runtime configure --runtime=containerd --drop-in-config= --config {}",
                conf.display()
            )
        } else if how == "RO" {
            format!(
                "mount --bind {d} {d} && mount -o remount,bind,ro {d} && exec {BIN} runtime configure --runtime=containerd --drop-in-config= --config {c}",
                d = dir.display(),
                c = conf.display()
            )
        } else {
            format!(
                "exec {how} {BIN} runtime configure --runtime=containerd --drop-in-config= --config {}",
                conf.display()
            )
        };
        let out = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .output()
            .unwrap();
        let text = format!("case {name}{}", ctx(&[], &out));
        assert_eq!(out.status.code(), Some(1), "{text}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&conf.display().to_string())
                && err.contains(want)
                && err.contains("nothing was changed"),
            "{text}"
        );
        assert_eq!(
            fs::read_to_string(&conf).unwrap(),
            "version = 2\n",
            "{text}"
        );
        if how == "IMMUTABLE" {
            let _ = Command::new("chattr").arg("-i").arg(&conf).status();
            assert_eq!(
                fs::read_to_string(dir.join("config.toml.bak")).unwrap(),
                "earlier backup\n",
                "{text}"
            );
            assert_eq!(
                listing(&dir),
                vec!["config.toml".to_string(), "config.toml.bak".to_string()],
                "{text}"
            );
        } else {
            assert_eq!(listing(&dir), vec!["config.toml".to_string()], "{text}");
        }
    }
}

/// An earlier `--set-as-default` survives re-runs without it (a plain re-run, and one with
/// `--cdi.enabled`), for each engine, as upstream's configure never removes a default;
/// `unconfigure` still takes it away.
#[test]
fn the_default_runtime_survives_re_runs() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "docker",
            "daemon.json",
            "{}\n",
            "\"default-runtime\": \"nvidia\"",
        ),
        (
            "containerd",
            "config.toml",
            "version = 2\n",
            "default_runtime_name = \"nvidia\"",
        ),
        ("crio", "crio.conf", "", "default_runtime = \"nvidia\""),
    ];
    for (runtime, file, content, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(file);
        fs::write(&config, content).unwrap();
        let config_s = config.display().to_string();
        let rt = format!("--runtime={runtime}");
        let run = |cmd: &str, extra: &[&str]| {
            let mut args = vec!["runtime", cmd, &rt, "--config", &config_s];
            if *runtime != "docker" {
                args.push("--drop-in-config=");
            }
            args.extend_from_slice(extra);
            let out = ctk(&args, &[]);
            assert!(
                out.status.success(),
                "{runtime} {args:?}{}",
                ctx(&args, &out)
            );
            fs::read_to_string(&config).unwrap()
        };
        let text = run("configure", &["--set-as-default"]);
        assert!(text.contains(want), "{runtime}: set: {text}");
        for extra in [&[][..], &["--cdi.enabled"][..]] {
            let text = run("configure", extra);
            assert!(
                text.contains(want),
                "{runtime} re-run {extra:?}: default lost: {text}"
            );
        }
        let text = run("unconfigure", &[]);
        assert!(
            !text.contains(want),
            "{runtime}: unconfigure keeps the default: {text}"
        );
    }
}
fn debian_stock() -> String {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/containerd-debian/config.toml");
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A directory holding no `containerd`: on PATH, configure has no binary to ask and checks
/// its own model of containerd's merge.
fn path_without_containerd(dir: &Path) -> String {
    let bin = dir.join("no-containerd-bin");
    fs::create_dir_all(&bin).unwrap();
    bin.display().to_string()
}

/// Debian 12's containerd config (a CRI table with only cni settings): configure must leave
/// containerd its built-in `runc` next to `nvidia`, judged by containerd itself, with and
/// without a `containerd` binary for configure to check with; and containerd started on the
/// result loads its CRI plugin.
#[test]
fn debian_stock_containerd_keeps_runc() {
    // (case, containerd on configure's PATH, extra flags)
    let cases: &[(&str, bool, &[&str])] = &[
        ("checked by containerd config dump", true, &[]),
        ("checked by our merge model", false, &[]),
        ("set as default", true, &["--set-as-default"]),
    ];
    for (name, with_binary, extra) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        fs::write(&config, debian_stock()).unwrap();
        let drop_in = dir.path().join("conf.d/99-nvidia.toml");
        let (config_s, drop_in_s) = (config.display().to_string(), drop_in.display().to_string());
        let mut args = vec![
            "runtime",
            "configure",
            "--runtime=containerd",
            "--config",
            &config_s,
            "--drop-in-config",
            &drop_in_s,
        ];
        args.extend(*extra);
        let path = path_without_containerd(dir.path());
        let env: &[(&str, &str)] = if *with_binary {
            &[]
        } else {
            &[("PATH", &path)]
        };
        let out = ctk(&args, env);
        assert!(out.status.success(), "case {name}{}", ctx(&args, &out));

        let dump = containerd_dump(&config);
        let c = &dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"];
        let runtimes: Vec<&str> = c["runtimes"]
            .as_table_like()
            .unwrap_or_else(|| panic!("case {name}: no runtimes in dump:\n{dump}"))
            .iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(runtimes, ["nvidia", "runc"], "case {name}:\n{dump}");
        let default = if extra.contains(&"--set-as-default") {
            "nvidia"
        } else {
            "runc"
        };
        assert_eq!(
            c["default_runtime_name"].as_str(),
            Some(default),
            "case {name}"
        );
        assert_eq!(
            c["runtimes"]["runc"]["runtime_type"].as_str(),
            Some("io.containerd.runc.v2"),
            "case {name}:\n{dump}"
        );
        assert_eq!(
            c["runtimes"]["runc"]["options"]["BinaryName"].as_str(),
            Some(""),
            "case {name}: runc must run plain runc:\n{dump}"
        );
        assert_eq!(
            c["runtimes"]["nvidia"]["options"]["BinaryName"].as_str(),
            Some("/usr/bin/nvidia-container-runtime"),
            "case {name}"
        );
        // Debian's cni settings survive the drop-in's CRI table.
        assert_eq!(
            dump["plugins"]["io.containerd.grpc.v1.cri"]["cni"]["bin_dir"].as_str(),
            Some("/usr/lib/cni"),
            "case {name}"
        );

        // unconfigure gives Debian's file back and removes the drop-in.
        let un = [
            "runtime",
            "unconfigure",
            "--runtime=containerd",
            "--config",
            &config_s,
            "--drop-in-config",
            &drop_in_s,
        ];
        ok(&un);
        assert_eq!(
            read_opt(&config).as_deref(),
            Some(debian_stock().as_str()),
            "case {name}"
        );
        assert!(!drop_in.exists(), "case {name}");
    }
}

/// containerd started on Debian's config after configure: `ctr plugins ls` lists the CRI
/// plugin as loaded (before the fix it was `error`: the default runtime `runc` was gone).
#[test]
fn debian_stock_containerd_loads_cri_after_configure() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Debian's file, with what a second containerd on this machine needs of its own: root,
    // state, sockets, the opt plugin's dir and an ephemeral streaming port (the CRI table keeps
    // only cni from Debian, as the fixture).
    let mut doc: toml_edit::DocumentMut = debian_stock().parse().unwrap();
    let s = |p: &Path| toml_edit::value(p.display().to_string());
    doc["root"] = s(&d.join("root"));
    doc["state"] = s(&d.join("state"));
    doc["grpc"]["address"] = s(&d.join("c.sock"));
    doc["ttrpc"]["address"] = s(&d.join("c.sock.ttrpc"));
    doc["plugins"]["io.containerd.internal.v1.opt"]["path"] = s(&d.join("opt"));
    let cri = &mut doc["plugins"]["io.containerd.grpc.v1.cri"];
    cri["stream_server_port"] = toml_edit::value("0");
    cri["stream_server_address"] = toml_edit::value("127.0.0.1");
    let config = d.join("config.toml");
    fs::write(&config, doc.to_string()).unwrap();
    let drop_in = d.join("conf.d/99-nvidia.toml");
    let (config_s, drop_in_s) = (config.display().to_string(), drop_in.display().to_string());
    ok(&[
        "runtime",
        "configure",
        "--runtime=containerd",
        "--config",
        &config_s,
        "--drop-in-config",
        &drop_in_s,
    ]);

    let log = d.join("containerd.log");
    let mut child = Command::new("containerd")
        .arg("--config")
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .stdout(fs::File::create(&log).unwrap())
        .stderr(fs::File::create(&log).unwrap())
        .spawn()
        .expect("containerd is required for this test: apt-get install -y containerd");
    let sock = d.join("c.sock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut listing = String::new();
    while std::time::Instant::now() < deadline {
        if sock.exists() {
            let out = Command::new("ctr")
                .arg("-a")
                .arg(&sock)
                .args(["plugins", "ls"])
                .output()
                .expect("ctr (containerd's package)");
            listing = String::from_utf8_lossy(&out.stdout).into_owned();
            if listing.contains("io.containerd.grpc.v1") {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let _ = nvct_sys::process::kill(child.id() as i32, libc::SIGTERM);
    let _ = child.wait();
    let cri: Vec<&str> = listing
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("cri"))
        .collect();
    assert_eq!(
        cri.len(),
        1,
        "no cri plugin line in `ctr plugins ls`:\n{listing}\n--- log:\n{}",
        fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        cri[0].split_whitespace().last() == Some("ok"),
        "CRI plugin not loaded: {}\n--- log:\n{}",
        cri[0],
        fs::read_to_string(&log).unwrap_or_default()
    );
}

/// A config whose default runtime containerd would not have is refused, with and without a
/// `containerd` binary to check with, and every file is left as it was.
#[test]
fn configure_refuses_what_containerd_cannot_load_and_puts_files_back() {
    let broken = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\
                  default_runtime_name = \"kata\"\n\
                  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
                  runtime_type = \"io.containerd.runc.v2\"\n";
    // (case, containerd on PATH, drop-in)
    let cases = [
        ("drop-in, containerd dump", true, true),
        ("drop-in, merge model", false, true),
        ("in place, containerd dump", true, false),
        ("in place, merge model", false, false),
    ];
    for (name, with_binary, use_drop_in) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        fs::write(&config, broken).unwrap();
        let drop_in = dir.path().join("conf.d/99-nvidia.toml");
        let config_s = config.display().to_string();
        let drop_in_arg = if use_drop_in {
            format!("--drop-in-config={}", drop_in.display())
        } else {
            "--drop-in-config=".to_string()
        };
        let args = [
            "runtime",
            "configure",
            "--runtime=containerd",
            "--config",
            &config_s,
            &drop_in_arg,
        ];
        let path = path_without_containerd(dir.path());
        let env: &[(&str, &str)] = if with_binary { &[] } else { &[("PATH", &path)] };
        let out = ctk(&args, env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "case {name}: accepted{}",
            ctx(&args, &out)
        );
        for part in [
            "default runtime `kata`",
            "nothing was changed",
            "runc",
            "nvidia",
        ] {
            assert!(
                err.contains(part),
                "case {name}: no {part:?}{}",
                ctx(&args, &out)
            );
        }
        assert_eq!(
            read_opt(&config).as_deref(),
            Some(broken),
            "case {name}: config changed"
        );
        assert!(!drop_in.exists(), "case {name}: drop-in left behind");
        assert!(
            !fsutil_backup(&config).exists(),
            "case {name}: a .bak of a write that was undone"
        );
    }
}

fn fsutil_backup(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".bak");
    PathBuf::from(s)
}

/// Debian's config importing a site drop-in that registers `crun` next to `runc`: containerd
/// 1.6 replaces the CRI table per import, so our drop-in (loaded after it) carries the site's
/// runtimes too, and containerd keeps all three.
#[test]
fn other_imports_keep_their_runtimes() {
    let dir = tempfile::tempdir().unwrap();
    let conf_d = dir.path().join("conf.d");
    fs::create_dir_all(&conf_d).unwrap();
    let config = dir.path().join("config.toml");
    let glob = format!("{}/*.toml", conf_d.display());
    let main = debian_stock().replacen(
        "version = 2\n",
        &format!("version = 2\nimports = [{glob:?}]\n"),
        1,
    );
    fs::write(&config, &main).unwrap();
    let rt = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes";
    let site = format!(
        "version = 2\n{rt}.runc]\nruntime_type = \"io.containerd.runc.v2\"\n\
         {rt}.crun]\nruntime_type = \"io.containerd.runc.v2\"\n{rt}.crun.options]\n\
         BinaryName = \"/usr/bin/crun\"\n"
    );
    fs::write(conf_d.join("50-site.toml"), &site).unwrap();
    let drop_in = conf_d.join("99-nvidia.toml");
    let (config_s, drop_in_s) = (config.display().to_string(), drop_in.display().to_string());
    let args = [
        "runtime",
        "configure",
        "--runtime=containerd",
        "--config",
        &config_s,
        "--drop-in-config",
        &drop_in_s,
    ];
    ok(&args);
    let dump = containerd_dump(&config);
    let c = &dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"];
    let runtimes: Vec<&str> = c["runtimes"]
        .as_table_like()
        .unwrap_or_else(|| panic!("no runtimes in dump:\n{dump}"))
        .iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(runtimes, ["crun", "nvidia", "runc"], "{dump}");
    assert_eq!(
        c["runtimes"]["crun"]["options"]["BinaryName"].as_str(),
        Some("/usr/bin/crun")
    );
    assert_eq!(c["default_runtime_name"].as_str(), Some("runc"));
    // Idempotent: a second run (our drop-in now among the imports) changes nothing.
    let first = read_opt(&drop_in);
    ok(&args);
    assert_eq!(
        read_opt(&drop_in),
        first,
        "second configure changed the drop-in"
    );
    assert_eq!(
        read_opt(&conf_d.join("50-site.toml")).as_deref(),
        Some(site.as_str())
    );
}

/// A containerd config in a temp dir that imports `conf.d/*.toml` (Debian's stock file with the
/// `imports` line), configured with the drop-in `conf.d/99-nvidia.toml`: the states of issue 39,
/// judged by `containerd config dump` and by `nvidia-ctk doctor`.
struct DropInNode {
    dir: tempfile::TempDir,
    config: PathBuf,
    conf_d: PathBuf,
    drop_in: PathBuf,
}

const CRI: &str = "[plugins.\"io.containerd.grpc.v1.cri\"]";
const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime");

impl DropInNode {
    fn new() -> DropInNode {
        let dir = tempfile::tempdir().unwrap();
        let conf_d = dir.path().join("conf.d");
        fs::create_dir_all(&conf_d).unwrap();
        let config = dir.path().join("config.toml");
        let glob = format!("{}/*.toml", conf_d.display());
        let main = debian_stock().replacen(
            "version = 2\n",
            &format!("version = 2\nimports = [{glob:?}]\n"),
            1,
        );
        fs::write(&config, main).unwrap();
        let drop_in = conf_d.join("99-nvidia.toml");
        DropInNode {
            dir,
            config,
            conf_d,
            drop_in,
        }
    }

    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = [
            "runtime",
            "configure",
            "--runtime=containerd",
            "--config",
            self.config.to_str().unwrap(),
            "--drop-in-config",
            self.drop_in.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    /// `runtime configure` (with `extra`), with `env`.
    fn run(&self, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let a = self.args(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        ctk(&a, env)
    }

    fn ok(&self, extra: &[&str]) -> Output {
        let out = self.run(extra, &[]);
        let a = self.args(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        assert!(out.status.success(), "command failed{}", ctx(&a, &out));
        out
    }

    fn configure(&self) -> Output {
        self.ok(&[&format!("--nvidia-runtime-path={SHIM}")])
    }

    fn refresh(&self) -> Output {
        self.ok(&["--refresh-drop-in"])
    }

    /// `plugins."io.containerd.grpc.v1.cri".KEY` in containerd's own dump.
    fn dumped(&self, key: &str) -> Option<String> {
        let dump = containerd_dump(&self.config);
        let v = &dump["plugins"]["io.containerd.grpc.v1.cri"][key];
        v.as_value().map(|v| {
            let mut v = v.clone();
            v.decor_mut().clear();
            v.to_string()
        })
    }

    /// doctor's `engine containerd` check: (status, detail, fix).
    fn doctor(&self) -> (String, String, String) {
        let d = self.dir.path();
        let args = [
            "doctor".to_string(),
            "--format=json".into(),
            format!("--config={}", d.join("toolkit.toml").display()),
            format!("--containerd-config={}", self.config.display()),
            format!("--docker-config={}", d.join("daemon.json").display()),
            format!("--crio-config={}", d.join("crio.conf").display()),
        ];
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ctk(&a, &[]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor's JSON: {e}{}", ctx(&a, &out)));
        let c = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "engine containerd")
            .unwrap_or_else(|| panic!("no engine containerd check{}", ctx(&a, &out)))
            .clone();
        let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        (s("status"), s("detail"), s("fix"))
    }
}

/// Issue 39: a node's own drop-in made before configure stays effective; the same file (or
/// config.toml's CRI table) edited after configure is shadowed by our drop-in's copy (containerd
/// 1.6 replaces the whole CRI table per import) until `--refresh-drop-in`, after which
/// containerd's dump has the edit; doctor fails in between, naming the file, the key and the
/// command, and is ok before and after. The refresh keeps the drop-in's mode and owner, writes
/// nothing the second time, and unconfigure still gives config.toml back byte for byte.
#[test]
fn edits_after_configure_take_effect_after_the_refresh() {
    // (case, the site file before configure (None: none), the edit after configure: (file
    // name under the temp dir, from, to), the key edited, its value after the edit, another
    // key the edit adds and its value)
    struct Case {
        name: &'static str,
        site: Option<String>,
        edit: (&'static str, String, String),
        key: &'static str,
        want: &'static str,
        added: Option<(&'static str, &'static str)>,
    }
    let site = |pause: &str, extra: &str| {
        format!(
            "version = 2\n{CRI}\nsandbox_image = \"example.org/pause:{pause}\"\n{extra}\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\nbin_dir = \"/usr/lib/cni\"\n"
        )
    };
    let cases = [
        Case {
            name: "a node drop-in, edited after configure",
            site: Some(site("1", "")),
            edit: (
                "conf.d/20-site.toml",
                site("1", ""),
                site("2", "max_concurrent_downloads = 9\n"),
            ),
            key: "sandbox_image",
            want: "\"example.org/pause:2\"",
            added: Some(("max_concurrent_downloads", "9")),
        },
        Case {
            name: "config.toml's CRI table, edited after configure",
            site: None,
            edit: (
                "config.toml",
                format!("{CRI}\n"),
                format!("{CRI}\n    sandbox_image = \"example.org/pause:2\"\n"),
            ),
            key: "sandbox_image",
            want: "\"example.org/pause:2\"",
            added: None,
        },
    ];
    for case in cases {
        let name = case.name;
        let node = DropInNode::new();
        let original = fs::read_to_string(&node.config).unwrap();
        if let Some(s) = &case.site {
            fs::write(node.conf_d.join("20-site.toml"), s).unwrap();
        }
        let before = node.dumped(case.key);
        node.configure();
        assert_eq!(
            node.dumped(case.key),
            before,
            "case {name}: the node's setting stays effective after configure"
        );
        let (status, detail, _) = node.doctor();
        assert_eq!(
            status, "ok",
            "case {name}: doctor after configure: {detail}"
        );

        // The edit, after configure: shadowed by the drop-in's copy.
        let (file, from, to) = &case.edit;
        let edited = node.dir.path().join(file);
        let text = fs::read_to_string(&edited).unwrap();
        assert!(text.contains(from.as_str()), "case {name}: {text}");
        fs::write(&edited, text.replacen(from.as_str(), to, 1)).unwrap();
        assert_eq!(
            node.dumped(case.key),
            before,
            "case {name}: the edit is shadowed before the refresh (else this test shows nothing)"
        );
        let (status, detail, fix) = node.doctor();
        assert_eq!(
            status, "fail",
            "case {name}: doctor with the edit shadowed: {detail}"
        );
        for part in [
            edited.display().to_string(),
            case.key.to_string(),
            node.drop_in.display().to_string(),
        ] {
            assert!(
                detail.contains(&part),
                "case {name}: {part:?} not in {detail}"
            );
        }
        assert!(
            fix.contains("--refresh-drop-in") && fix.contains("systemctl restart containerd"),
            "case {name}: {fix}"
        );

        // The refresh: the edit is effective, the drop-in keeps its mode and owner.
        use std::os::unix::fs::MetadataExt;
        fs::set_permissions(&node.drop_in, fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::chown(&node.drop_in, Some(1234), Some(5678)).unwrap();
        let out = node.refresh();
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("restart containerd"),
            "case {name}{}",
            ctx(&[], &out)
        );
        assert_eq!(
            node.dumped(case.key).as_deref(),
            Some(case.want),
            "case {name}"
        );
        if let Some((k, v)) = case.added {
            assert_eq!(
                node.dumped(k).as_deref(),
                Some(v),
                "case {name}: the new key"
            );
        }
        let dump = containerd_dump(&node.config);
        let rt = &dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"];
        assert_eq!(
            rt["nvidia"]["options"]["BinaryName"].as_str(),
            Some(SHIM),
            "case {name}: the runtime path read back from the drop-in"
        );
        assert!(
            rt["runc"].is_table_like(),
            "case {name}: runc kept:\n{dump}"
        );
        let m = fs::metadata(&node.drop_in).unwrap();
        assert_eq!(
            (m.mode() & 0o7777, m.uid(), m.gid()),
            (0o640, 1234, 5678),
            "case {name}: mode and owner"
        );
        let (status, detail, _) = node.doctor();
        assert_eq!(
            status, "ok",
            "case {name}: doctor after the refresh: {detail}"
        );

        // Idempotent: nothing to write the second time.
        let mtime = m.modified().unwrap();
        let text = fs::read_to_string(&node.drop_in).unwrap();
        let out = node.refresh();
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("nothing to change"),
            "case {name}{}",
            ctx(&[], &out)
        );
        assert_eq!(fs::read_to_string(&node.drop_in).unwrap(), text);
        assert_eq!(
            fs::metadata(&node.drop_in).unwrap().modified().unwrap(),
            mtime
        );
        assert!(
            !fsutil_backup(&node.drop_in).exists(),
            "case {name}: a .bak in conf.d (containerd would import it)"
        );

        // unconfigure: config.toml byte for byte (with the edit, when it was there), no drop-in.
        let un = [
            "runtime",
            "unconfigure",
            "--runtime=containerd",
            "--config",
            node.config.to_str().unwrap(),
            "--drop-in-config",
            node.drop_in.to_str().unwrap(),
        ];
        ok(&un);
        let want = if *file == "config.toml" {
            original.replacen(from.as_str(), to, 1)
        } else {
            original.clone()
        };
        assert_eq!(read_opt(&node.config), Some(want), "case {name}");
        assert!(!node.drop_in.exists(), "case {name}");
    }
}

/// `--refresh-drop-in` where there is nothing to re-derive: exit 0, a note, nothing written.
#[test]
fn refresh_with_nothing_to_refresh() {
    // (case, config text (None: no file), drop-in text (None: none), words of the note)
    let nvidia_v2 =
        "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n";
    let cases: &[(&str, Option<&str>, Option<&str>, &str)] = &[
        ("no config", None, None, "does not exist"),
        (
            "no drop-in",
            Some("version = 2\n"),
            None,
            "does not exist (configure writes it)",
        ),
        (
            "a drop-in the config does not import",
            Some("version = 2\n"),
            Some(nvidia_v2),
            "is not among the files",
        ),
        (
            "a drop-in without our runtime",
            Some("IMPORTS"),
            Some("version = 2\n"),
            "registers no `nvidia` runtime",
        ),
        (
            "a version 1 config",
            Some("[plugins.cri]\n"),
            Some(nvidia_v2),
            "version 1 config imports no drop-in",
        ),
    ];
    for (name, config_text, drop_in_text, words) in cases {
        let node = DropInNode::new();
        fs::remove_file(&node.config).unwrap();
        let imports = format!(
            "version = 2\nimports = [\"{}/*.toml\"]\n",
            node.conf_d.display()
        );
        if let Some(t) = config_text {
            fs::write(&node.config, t.replace("IMPORTS", &imports)).unwrap();
        }
        if let Some(t) = drop_in_text {
            fs::write(&node.drop_in, t).unwrap();
        }
        let before = snapshot(node.dir.path());
        let out = node.run(&["--refresh-drop-in"], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "case {name}{}", ctx(&[], &out));
        assert!(
            err.contains("nothing to refresh") && err.contains(words),
            "case {name}{}",
            ctx(&[], &out)
        );
        assert_eq!(
            snapshot(node.dir.path()),
            before,
            "case {name}: files changed"
        );
    }
}

/// `--refresh-drop-in` takes its settings from the drop-in: the flags that set them, another
/// engine and an in-place config are refused by name, and nothing is written.
#[test]
fn refresh_refuses_the_flags_it_does_not_use() {
    // (case, extra flags, the words of the error)
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "set as default",
            &["--set-as-default"],
            "--nvidia-set-as-default: not used with --refresh-drop-in",
        ),
        (
            "runtime path",
            &["--nvidia-runtime-path=/x"],
            "--nvidia-runtime-path: not used",
        ),
        ("cdi", &["--cdi.enabled"], "--cdi.enabled: not used"),
        (
            "config source",
            &["--config-source=command"],
            "--config-source: not used",
        ),
        ("in place", &["--drop-in-config="], "names no drop-in"),
        ("docker", &["--runtime=docker"], "add --runtime=containerd"),
    ];
    for (name, extra, words) in cases {
        let node = DropInNode::new();
        node.configure();
        let before = snapshot(node.dir.path());
        let config = node.config.display().to_string();
        let out = if extra == &["--drop-in-config="] {
            let a = [
                "runtime",
                "configure",
                "--runtime=containerd",
                "--config",
                &config,
                "--refresh-drop-in",
                "--drop-in-config=",
            ];
            ctk(&a, &[])
        } else if extra == &["--runtime=docker"] {
            let daemon = node.dir.path().join("daemon.json").display().to_string();
            let a = [
                "runtime",
                "configure",
                "--runtime=docker",
                "--config",
                &daemon,
                "--refresh-drop-in",
            ];
            ctk(&a, &[])
        } else {
            let mut all = vec!["--refresh-drop-in"];
            all.extend_from_slice(extra);
            node.run(&all, &[])
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "case {name}: accepted{}",
            ctx(&[], &out)
        );
        assert!(err.contains(words), "case {name}{}", ctx(&[], &out));
        assert_eq!(
            snapshot(node.dir.path()),
            before,
            "case {name}: files changed"
        );
    }
}

/// Bad imports: a file that is not TOML, a symlink out of the config's directory, a drop-in
/// directory that is a symlink, our own drop-in broken. configure (on a fresh node) and the
/// refresh (on a configured one) refuse, naming the file (and line) and the fix, and write
/// nothing. An `imports` glob that matches nothing is normal.
#[test]
fn bad_imports_are_refused_before_anything_is_written() {
    use std::os::unix::fs::symlink;
    // (case, what to do to the node, the words of the error)
    type Spoil = fn(&DropInNode, &Path);
    let cases: &[(&str, Spoil, &[&str])] = &[
        (
            "an imported file that is not TOML",
            |n, _| {
                fs::write(
                    n.conf_d.join("20-site.toml"),
                    "version = 2\n# ok\n[plugins\n",
                )
                .unwrap()
            },
            &["20-site.toml:3: invalid TOML", "fix that line"],
        ),
        (
            "an imported file that is a symlink out of the config's directory",
            |n, outside| {
                let target = outside.join("site.toml");
                fs::write(&target, "version = 2\n").unwrap();
                symlink(&target, n.conf_d.join("20-site.toml")).unwrap();
            },
            &[
                "20-site.toml: a symlink to",
                "outside",
                "cp --remove-destination",
            ],
        ),
        (
            "a drop-in directory that is a symlink",
            |n, outside| {
                let moved = outside.join("conf.d");
                fs::rename(&n.conf_d, &moved).unwrap();
                symlink(&moved, &n.conf_d).unwrap();
            },
            &[
                "the drop-in directory is a symlink",
                "replace the link with a directory",
            ],
        ),
        (
            "our drop-in broken by hand",
            |n, _| {
                if n.drop_in.exists() {
                    let t = fs::read_to_string(&n.drop_in).unwrap();
                    fs::write(&n.drop_in, format!("{t}\n[[oops\n")).unwrap();
                } else {
                    fs::write(&n.drop_in, "version = 2\n[[oops\n").unwrap();
                }
            },
            &["99-nvidia.toml:", "invalid TOML", "run configure again"],
        ),
    ];
    for (name, spoil, words) in cases {
        for refresh in [false, true] {
            let what = if refresh { "refresh" } else { "configure" };
            let node = DropInNode::new();
            let outside = tempfile::tempdir().unwrap();
            if refresh {
                node.configure();
            }
            spoil(&node, outside.path());
            let before = snapshot(node.dir.path());
            let out = if refresh {
                node.run(&["--refresh-drop-in"], &[])
            } else {
                node.run(&[&format!("--nvidia-runtime-path={SHIM}")], &[])
            };
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "case {name}, {what}: accepted{}",
                ctx(&[], &out)
            );
            for w in *words {
                assert!(
                    err.contains(w),
                    "case {name}, {what}: no {w:?}{}",
                    ctx(&[], &out)
                );
            }
            assert!(
                err.contains("nothing was changed"),
                "case {name}, {what}{}",
                ctx(&[], &out)
            );
            assert_eq!(
                snapshot(node.dir.path()),
                before,
                "case {name}, {what}: files changed"
            );
        }
    }

    // A glob that matches nothing (no conf.d at all, or an empty one) is normal.
    for remove_dir in [false, true] {
        let node = DropInNode::new();
        if remove_dir {
            fs::remove_dir(&node.conf_d).unwrap();
        }
        node.configure();
        assert!(node.drop_in.exists());
        node.refresh();
    }
}

/// containerd's release decides the drop-in: 1.6 (this host's) gets the whole CRI table; a
/// containerd 2.x (a stand-in script answering `--version` and `config dump` as 2.0 does) gets
/// only the nvidia runtime's keys; without any `containerd` the rule before 2.0 is taken, said
/// in one line.
#[test]
fn the_drop_in_follows_containerd_s_merge_rule() {
    let fake_bin = tempfile::tempdir().unwrap();
    let fake = fake_bin.path().join("containerd");
    fs::write(
        &fake,
        "#!/bin/sh\ncase \"$1\" in\n--version) echo 'containerd github.com/containerd/containerd/v2 v2.0.4 1a43cb6a1035441f9aca8f5666a9b3ef9e70ab20' ;;\n\
         *) echo 'version = 3' ;;\nesac\n",
    )
    .unwrap();
    fs::set_permissions(&fake, fs::Permissions::from_mode(0o755)).unwrap();
    let fake_path = format!("{}:/usr/bin:/bin", fake_bin.path().display());
    // (case, PATH (None: this host's), the drop-in has, has not, a note about the version)
    let cases: &[(&str, Option<&str>, &[&str], &[&str], bool)] = &[
        (
            "containerd 1.6: the whole CRI table",
            None,
            &[
                "[plugins.\"io.containerd.grpc.v1.cri\".cni]",
                "runtimes.nvidia]",
            ],
            &[],
            false,
        ),
        (
            "containerd 2.0: only the nvidia runtime's keys",
            Some(&fake_path),
            &["runtimes.nvidia]", "BinaryName"],
            &["cni", "sandbox_image", "runtimes.runc"],
            false,
        ),
        (
            "no containerd: the rule before 2.0, said once",
            Some("NO_CONTAINERD"),
            &[
                "[plugins.\"io.containerd.grpc.v1.cri\".cni]",
                "runtimes.nvidia]",
            ],
            &[],
            true,
        ),
    ];
    for (name, path, has, lacks, note) in cases {
        let node = DropInNode::new();
        let no_containerd = path_without_containerd(node.dir.path());
        let path = path.map(|p| {
            if p == "NO_CONTAINERD" {
                no_containerd.as_str()
            } else {
                p
            }
        });
        let env: Vec<(&str, &str)> = path.map(|p| ("PATH", p)).into_iter().collect();
        let out = node.run(&[&format!("--nvidia-runtime-path={SHIM}")], &env);
        assert!(out.status.success(), "case {name}{}", ctx(&[], &out));
        let got = fs::read_to_string(&node.drop_in).unwrap();
        for h in *has {
            assert!(got.contains(h), "case {name}: no {h:?} in\n{got}");
        }
        for l in *lacks {
            assert!(!got.contains(l), "case {name}: {l:?} in\n{got}");
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let notes = err.matches("containerd's version is unknown").count();
        assert_eq!(notes, usize::from(*note), "case {name}{}", ctx(&[], &out));
        // The refresh under the same containerd changes nothing.
        let out = node.run(&["--refresh-drop-in"], &env);
        assert!(out.status.success(), "case {name}{}", ctx(&[], &out));
        assert_eq!(
            fs::read_to_string(&node.drop_in).unwrap(),
            got,
            "case {name}: refresh"
        );
    }
}
