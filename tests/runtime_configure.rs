//! Black-box tests of `nvidia-ctk runtime configure|unconfigure`: the real binary, in a fresh
//! temp dir per case, against committed golden files (tests/fixtures/runtime_config), the real
//! containerd (`containerd config dump` is the judge of what we write), bad inputs, a crash at
//! every step of the write, concurrent runs, and `--dry-run`.
//!
//! `UPDATE_GOLDEN=1 cargo test --test runtime_configure` rewrites the golden files; review the
//! diff before committing. The containerd tests need the `containerd` binary (Debian:
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

/// Run the binary; the returned output is printed in full by [`ctx`] on failure.
fn ctk(args: &[&str], env: &[(&str, &str)]) -> Output {
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

struct Golden {
    name: &'static str,
    runtime: &'static str,
    /// Fixture under inputs/, or None for a missing config file.
    input: Option<&'static str>,
    /// File name of the config inside the temp dir.
    file: &'static str,
    args: &'static [&'static str],
    drop_in: bool,
    round_trip: RoundTrip,
}

const GOLDEN: &[Golden] = &[
    Golden {
        name: "containerd-v1",
        runtime: "containerd",
        input: Some("containerd-v1.toml"),
        file: "config.toml",
        args: &[],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v1-default-cdi",
        runtime: "containerd",
        input: Some("containerd-v1.toml"),
        file: "config.toml",
        args: &["--set-as-default", "--enable-cdi"],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v2",
        runtime: "containerd",
        input: Some("containerd-v2-default.toml"),
        file: "config.toml",
        args: &[],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v2-default-cdi",
        runtime: "containerd",
        input: Some("containerd-v2-default.toml"),
        file: "config.toml",
        args: &["--nvidia-set-as-default", "--cdi.enabled"],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v2-drop-in",
        runtime: "containerd",
        input: Some("containerd-v2-default.toml"),
        file: "config.toml",
        args: &["--set-as-default"],
        drop_in: true,
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
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v3-default-cdi",
        runtime: "containerd",
        input: Some("containerd-v3.toml"),
        file: "config.toml",
        args: &["--set-as-default", "--enable-cdi"],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-v3-drop-in",
        runtime: "containerd",
        input: Some("containerd-v3.toml"),
        file: "config.toml",
        args: &["--enable-cdi"],
        drop_in: true,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "containerd-missing",
        runtime: "containerd",
        input: None,
        file: "config.toml",
        args: &[],
        drop_in: false,
        round_trip: RoundTrip::Removed,
    },
    Golden {
        name: "docker",
        runtime: "docker",
        input: Some("daemon.json"),
        file: "daemon.json",
        args: &[],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "docker-default-cdi",
        runtime: "docker",
        input: Some("daemon.json"),
        file: "daemon.json",
        args: &["--set-as-default", "--enable-cdi"],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "docker-missing",
        runtime: "docker",
        input: None,
        file: "daemon.json",
        args: &[],
        drop_in: false,
        round_trip: RoundTrip::Removed,
    },
    Golden {
        name: "crio",
        runtime: "crio",
        input: Some("crio.conf"),
        file: "crio.conf",
        args: &[],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "crio-default",
        runtime: "crio",
        input: Some("crio.conf"),
        file: "crio.conf",
        args: &["--set-as-default"],
        drop_in: false,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "crio-drop-in",
        runtime: "crio",
        input: Some("crio.conf"),
        file: "crio.conf",
        args: &["--set-as-default"],
        drop_in: true,
        round_trip: RoundTrip::Original,
    },
    Golden {
        name: "crio-oci-hook",
        runtime: "crio",
        input: None,
        file: "oci-nvidia-hook.json",
        args: &["--config-mode=oci-hook"],
        drop_in: false,
        round_trip: RoundTrip::Removed,
    },
];

fn ext(file: &str) -> &str {
    Path::new(file)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("conf")
}

#[test]
fn golden_configure_idempotent_and_round_trip() {
    for case in GOLDEN {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path();
        let config = tmp.join(case.file);
        let original = case.input.map(input);
        if let Some(text) = &original {
            fs::write(&config, text).unwrap();
        }
        let drop_in = tmp.join("conf.d/99-nvidia.toml");
        let config_s = config.display().to_string();
        let drop_in_s = drop_in.display().to_string();
        let rt = format!("--runtime={}", case.runtime);
        let mut select: Vec<&str> = vec![&rt, "--config", &config_s];
        if case.drop_in {
            select.extend(["--drop-in-config", &drop_in_s]);
        }
        select.extend(
            case.args.iter().filter(|a| {
                a.starts_with("--config-mode") || a.starts_with("--nvidia-runtime-name")
            }),
        );
        let mut args: Vec<&str> = vec!["runtime", "configure"];
        args.extend(&select);
        args.extend(case.args.iter().filter(|a| !select.contains(a)));

        ok(&args);
        let main_after = read_opt(&config);
        let drop_after = read_opt(&drop_in);
        check_golden(
            case.name,
            &format!("{}.{}", case.name, ext(case.file)),
            main_after.clone(),
            tmp,
        );
        if case.drop_in {
            check_golden(
                case.name,
                &format!("{}.drop-in.toml", case.name),
                drop_after.clone(),
                tmp,
            );
        }

        // A second run on its own output changes nothing.
        let out = ok(&args);
        assert_eq!(
            read_opt(&config),
            main_after,
            "case {}: second run changed the config{}",
            case.name,
            ctx(&args, &out)
        );
        assert_eq!(
            read_opt(&drop_in),
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
        let mut un: Vec<&str> = vec!["runtime", "unconfigure"];
        un.extend(&select);
        for round in 1..=2 {
            ok(&un);
            let want = match case.round_trip {
                RoundTrip::Original => original.clone(),
                RoundTrip::Removed => None,
            };
            if case.round_trip == RoundTrip::Removed && case.runtime != "crio" {
                // configure created the file from nothing; unconfigure leaves it without our entry.
                let left = read_opt(&config).unwrap_or_default();
                assert!(
                    !left.contains("nvidia"),
                    "case {} round {round}: left {left}",
                    case.name
                );
                continue;
            }
            assert_eq!(
                read_opt(&config),
                want,
                "case {} round {round}: unconfigure did not restore the original",
                case.name
            );
            assert!(
                !drop_in.exists(),
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
            let args = [
                "runtime",
                cmd,
                &rt,
                "--config",
                &config_s,
                "--set-as-default",
            ];
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

#[test]
fn dry_run_prints_diff_and_writes_nothing() {
    // (name, runtime, fixture, file, expected `+` line)
    let cases = [
        (
            "containerd v2",
            "containerd",
            "containerd-v2-default.toml",
            "config.toml",
            "+        [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]",
        ),
        (
            "docker",
            "docker",
            "daemon.json",
            "daemon.json",
            "+    \"nvidia\": {",
        ),
        (
            "crio",
            "crio",
            "crio.conf",
            "crio.conf",
            "+[crio.runtime.runtimes.nvidia]",
        ),
    ];
    for (name, runtime, fixture, file, plus) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(file);
        fs::write(&config, input(fixture)).unwrap();
        let mtime = fs::metadata(&config).unwrap().modified().unwrap();
        let config_s = config.display().to_string();
        let rt = format!("--runtime={runtime}");
        let args = [
            "runtime",
            "configure",
            &rt,
            "--config",
            &config_s,
            "--dry-run",
        ];
        let out = ok(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("+++ {config_s}")),
            "case {name}{}",
            ctx(&args, &out)
        );
        assert!(
            stdout.contains(plus),
            "case {name}: no {plus:?}{}",
            ctx(&args, &out)
        );
        assert_eq!(
            fs::read_to_string(&config).unwrap(),
            input(fixture),
            "case {name}"
        );
        assert_eq!(
            fs::metadata(&config).unwrap().modified().unwrap(),
            mtime,
            "case {name}"
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "case {name}: files created"
        );
    }
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
            ok(&[
                "runtime",
                command,
                &format!("--runtime={runtime}"),
                "--config",
                p.to_str().unwrap(),
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
                "exec {BIN} runtime configure --runtime=containerd --config {}",
                conf.display()
            )
        } else if how == "RO" {
            format!(
                "mount --bind {d} {d} && mount -o remount,bind,ro {d} && exec {BIN} runtime configure --runtime=containerd --config {c}",
                d = dir.display(),
                c = conf.display()
            )
        } else {
            format!(
                "exec {how} {BIN} runtime configure --runtime=containerd --config {}",
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
