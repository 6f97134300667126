//! Black-box tests of `nvidia-ctk config` and `nvidia-ctk config default`: the real binary, a
//! fresh temp dir per case, the config file named by `--config-file` or by
//! `NVIDIA_CTK_CONFIG_FILE_PATH` (the hook's resolution).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_nvidia-ctk");
const DEFAULT: &str = include_str!("../../config/config.toml");

fn ctk(args: &[&str], config_env: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", config_env)
        .env_remove("XDG_CONFIG_HOME")
        .output()
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

#[test]
fn default_prints_the_shipped_config() {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("unused.toml");
    let out = ctk(&["config", "default"], &env);
    assert!(
        out.status.success(),
        "{}",
        ctx(&["config", "default"], &out)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), DEFAULT);

    let file = dir.path().join("out/config.toml");
    let args = ["config", "default", "--output", file.to_str().unwrap()];
    let out = ctk(&args, &env);
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert!(out.stdout.is_empty(), "{}", ctx(&args, &out));
    assert_eq!(fs::read_to_string(&file).unwrap(), DEFAULT);
}

/// What a case's output must be.
enum Want {
    /// Success; stdout is the input text with each `(from, to)` replaced once.
    Replaced(&'static [(&'static str, &'static str)]),
    /// Failure; stderr contains this, and the file is untouched.
    Error(&'static str),
}

#[test]
fn set_table() {
    let user = "# my config\ndisable-require = false\n\n[nvidia-container-cli]\n# driver root\nroot = \"\"   # keep me\nldconfig = \"@/sbin/ldconfig\"\n\n[nvidia-container-runtime.modes.cdi]\nspec-dirs = [\"/etc/cdi\"]\n";
    let cases: &[(&str, &[&str], Want)] = &[
        (
            "string",
            &["nvidia-container-cli.root=/run/nvidia/driver"],
            Want::Replaced(&[(
                "root = \"\"   # keep me",
                "root = \"/run/nvidia/driver\"   # keep me",
            )]),
        ),
        (
            "list split on the default separator `:` (upstream's runtimes=runc:crun)",
            &["nvidia-container-runtime.modes.cdi.spec-dirs=/etc/cdi:/var/run/cdi"],
            Want::Replaced(&[("[\"/etc/cdi\"]", "[\"/etc/cdi\", \"/var/run/cdi\"]")]),
        ),
        (
            "two keys",
            &["disable-require=true", "nvidia-container-cli.root=/d"],
            Want::Replaced(&[
                ("disable-require = false", "disable-require = true"),
                ("root = \"\"", "root = \"/d\""),
            ]),
        ),
        (
            "unknown key",
            &["nvidia-container-cli.rooot=/d"],
            Want::Error("unknown config key \"nvidia-container-cli.rooot\""),
        ),
        ("no key", &["=x"], Want::Error("expected KEY=VALUE")),
    ];
    for (name, sets, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        fs::write(&file, user).unwrap();
        let mut args = vec!["config", "--config-file", file.to_str().unwrap()];
        for s in *sets {
            args.extend(["--set", s]);
        }
        let out = ctk(&args, &dir.path().join("other.toml"));
        match want {
            Want::Replaced(edits) => {
                assert!(out.status.success(), "case {name}: {}", ctx(&args, &out));
                let mut expected = user.to_string();
                for (from, to) in *edits {
                    assert!(expected.contains(from), "case {name}: bad case");
                    expected = expected.replacen(from, to, 1);
                }
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout),
                    expected,
                    "case {name}: {}",
                    ctx(&args, &out)
                );
            }
            Want::Error(msg) => {
                assert_eq!(
                    out.status.code(),
                    Some(1),
                    "case {name}: {}",
                    ctx(&args, &out)
                );
                assert!(out.stdout.is_empty(), "case {name}: {}", ctx(&args, &out));
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(
                    err.starts_with("nvidia-ctk: error: ") && err.contains(msg),
                    "case {name}: {}",
                    ctx(&args, &out)
                );
            }
        }
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            user,
            "case {name}: the file changed without --in-place"
        );
    }
}

#[test]
fn in_place_keeps_comments_and_mode() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    let text = DEFAULT.replace("log-level = \"info\"", "log-level = \"info\" # was debug");
    fs::write(&file, &text).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();

    // Same value: byte for byte unchanged (found through NVIDIA_CTK_CONFIG_FILE_PATH).
    let args = [
        "config",
        "--in-place",
        "--set",
        "nvidia-container-runtime.log-level=info",
        "--set",
        "nvidia-container-runtime.runtimes=runc,crun",
    ];
    let out = ctk(&args, &file);
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert!(out.stdout.is_empty(), "{}", ctx(&args, &out));
    assert_eq!(fs::read_to_string(&file).unwrap(), text);

    // A change: only that value differs; mode kept; no temp files or backups left.
    let args = [
        "config",
        "-i",
        "--set",
        "nvidia-container-runtime.log-level=debug",
    ];
    let out = ctk(&args, &file);
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        text.replace(
            "log-level = \"info\" # was debug",
            "log-level = \"debug\" # was debug"
        )
    );
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o7777,
        0o600
    );
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["config.toml"]);

    // A refused edit leaves the file alone.
    let before = fs::read_to_string(&file).unwrap();
    let args = [
        "config",
        "-i",
        "--set",
        "nvidia-container-cli.ldconfig=ldconfig",
    ];
    let out = ctk(&args, &file);
    assert_eq!(out.status.code(), Some(1), "{}", ctx(&args, &out));
    assert_eq!(fs::read_to_string(&file).unwrap(), before);
}

#[test]
fn missing_file_starts_from_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("etc/nvidia-container-runtime/config.toml");
    let args = [
        "config",
        "--set",
        "nvidia-container-cli.root=/run/nvidia/driver",
    ];
    let want = DEFAULT.replacen("root = \"\"", "root = \"/run/nvidia/driver\"", 1);

    let out = ctk(&args, &file);
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    assert!(!file.exists(), "written without --in-place");

    let mut args = args.to_vec();
    args.push("--in-place");
    let out = ctk(&args, &file);
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert_eq!(fs::read_to_string(&file).unwrap(), want);
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o7777,
        0o644
    );
}

#[test]
fn typos_are_named_and_bad_values_refused() {
    // An unknown key loads (a newer toolkit's file still works) but is named with the key it
    // probably meant; a value the loader would refuse is refused by `--set` already, naming
    // the key, and nothing is written; `-v` prints the version as upstream spells it.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("config.toml");
    fs::write(
        &conf,
        "[nvidia-container-cli]\nroott = \"/run/nvidia/driver\"\n",
    )
    .unwrap();
    let args = ["config", "--config-file", conf.to_str().unwrap()];
    let out = ctk(&args, &conf);
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown key nvidia-container-cli.roott (ignored; did you mean nvidia-container-cli.root?)"),
        "{}",
        ctx(&args, &out)
    );
    for (set, needle) in [
        (
            "nvidia-container-runtime.mode=bogus",
            "unknown variant `bogus`",
        ),
        (
            "nvidia-container-runtime.log-level=loud",
            "unknown log level \"loud\"",
        ),
        (
            "nvidia-container-runtime.modes.legacy.cuda-compat-mode=off",
            "unknown variant `off`",
        ),
    ] {
        let args = [
            "config",
            "--config-file",
            conf.to_str().unwrap(),
            "--set",
            set,
            "--in-place",
        ];
        let out = ctk(&args, &conf);
        assert_eq!(out.status.code(), Some(1), "{set}: {}", ctx(&args, &out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{set}: {}",
            ctx(&args, &out)
        );
        assert_eq!(
            fs::read_to_string(&conf).unwrap(),
            "[nvidia-container-cli]\nroott = \"/run/nvidia/driver\"\n"
        );
    }
    let out = ctk(&["-v"], &conf);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).starts_with("nvidia-ctk "),
        "{}",
        ctx(&["-v"], &out)
    );
}

/// Upstream's own default config (its `config default` writes the csv mode's spec dir) loads
/// without a warning; `--quiet` prints only errors (an unknown key's warning and the "updated"
/// line are not errors); `config default` does not offer `csv`, which is refused.
#[test]
fn upstream_defaults_are_quiet_and_quiet_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("config.toml");
    fs::write(
        &conf,
        "[nvidia-container-runtime.modes.csv]\nmount-spec-path = \"/etc/nvidia-container-runtime/host-files-for-container.d\"\n",
    )
    .unwrap();
    let args = ["config", "--config-file", conf.to_str().unwrap()];
    let out = ctk(&args, &conf);
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert!(
        out.stderr.is_empty(),
        "a warning for upstream's default: {}",
        ctx(&args, &out)
    );
    fs::write(&conf, "[nvidia-container-cli]\nroott = \"/\"\n").unwrap();
    let args = [
        "--quiet",
        "config",
        "--config-file",
        conf.to_str().unwrap(),
        "--set",
        "swarm-resource=x",
        "--in-place",
    ];
    let out = ctk(&args, &conf);
    assert!(out.status.success(), "{}", ctx(&args, &out));
    assert!(
        out.stderr.is_empty(),
        "--quiet printed: {}",
        ctx(&args, &out)
    );
    assert!(fs::read_to_string(&conf)
        .unwrap()
        .contains("swarm-resource = \"x\""));
    let out = ctk(&["config", "default"], &conf);
    let text = String::from_utf8_lossy(&out.stdout);
    let mode_comment = text
        .lines()
        .find(|l| l.starts_with("# auto | legacy"))
        .unwrap_or_default();
    assert!(
        !mode_comment.contains("| csv"),
        "config default offers csv: {mode_comment}"
    );
}

/// Upstream's names (flags and variables) that operators and upstream's own units type, each
/// taken here: a table of (case, args, env, ok?, text the output must hold).
#[test]
fn upstream_flags_and_variables_are_taken() {
    let dir = tempfile::tempdir().unwrap();
    let custom = dir.path().join("custom.toml");
    fs::write(&custom, "[nvidia-container-cli]\nroot = \"/custom-root\"\n").unwrap();
    let env_file = dir.path().join("env.toml");
    let custom_s = custom.display().to_string();
    let missing = dir.path().join("no-such-root").display().to_string();
    type Case<'a> = (
        &'a str,
        Vec<&'a str>,
        Vec<(&'a str, &'a str)>,
        bool,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "completion bash",
            vec!["completion", "bash"],
            vec![],
            true,
            "complete -F _nvidia__ctk",
        ),
        (
            "completion zsh",
            vec!["completion", "zsh"],
            vec![],
            true,
            "#compdef nvidia-ctk",
        ),
        (
            "completion fish",
            vec!["completion", "fish"],
            vec![],
            true,
            "complete -c nvidia-ctk",
        ),
        (
            "completion of an unknown shell",
            vec!["completion", "tcsh"],
            vec![],
            false,
            "tcsh",
        ),
        (
            "global --config",
            vec!["--config", &custom_s, "config"],
            vec![],
            true,
            "/custom-root",
        ),
        (
            "NVIDIA_CTK_CONFIG",
            vec!["config"],
            vec![("NVIDIA_CTK_CONFIG", &custom_s)],
            true,
            "/custom-root",
        ),
        (
            "config generate-default",
            vec!["config", "generate-default"],
            vec![],
            true,
            "[nvidia-container-cli]",
        ),
        (
            "config create-default",
            vec!["config", "create-default"],
            vec![],
            true,
            "[nvidia-container-cli]",
        ),
        (
            "NVIDIA_CTK_DEBUG=1",
            vec!["config", "default"],
            vec![("NVIDIA_CTK_DEBUG", "1")],
            true,
            "[nvidia-container-cli]",
        ),
        (
            "NVIDIA_CTK_DEBUG=bogus refused",
            vec!["config", "default"],
            vec![("NVIDIA_CTK_DEBUG", "bogus")],
            false,
            "bogus",
        ),
        (
            "system --root (upstream's alias), a typo",
            vec![
                "system",
                "create-dev-char-symlinks",
                "--root",
                &missing,
                "--dry-run",
            ],
            vec![],
            false,
            "(--driver-root) is not a directory: no such directory",
        ),
        (
            "create-device-nodes --driver-root, a typo",
            vec![
                "system",
                "create-device-nodes",
                "--driver-root",
                &missing,
                "--control-devices",
                "--dry-run",
            ],
            vec![],
            false,
            "(--driver-root) is not a directory",
        ),
        (
            "DRIVER_ROOT",
            vec!["system", "create-dev-char-symlinks"],
            vec![("DRIVER_ROOT", &missing), ("DRY_RUN", "true")],
            false,
            "($DRIVER_ROOT) is not a directory",
        ),
        (
            "NVIDIA_DRIVER_ROOT before DRIVER_ROOT",
            vec!["system", "create-dev-char-symlinks", "--dry-run"],
            vec![("NVIDIA_DRIVER_ROOT", &missing), ("DRIVER_ROOT", "/")],
            false,
            "($NVIDIA_DRIVER_ROOT) is not a directory",
        ),
        (
            "DEV_CHAR_PATH",
            vec!["system", "create-dev-char-symlinks"],
            vec![("DEV_CHAR_PATH", "/elsewhere/char")],
            false,
            "--dev-char-path /elsewhere/char",
        ),
        (
            "WATCH=TRUE",
            vec!["system", "create-dev-char-symlinks"],
            vec![("WATCH", "TRUE")],
            false,
            "--watch is not supported",
        ),
    ];
    for (name, args, env, ok, want) in cases {
        let mut cmd = Command::new(BIN);
        cmd.args(&args)
            .env("NVIDIA_CTK_CONFIG_FILE_PATH", &env_file)
            .env_remove("XDG_CONFIG_HOME");
        for k in [
            "NVIDIA_CTK_CONFIG",
            "NVIDIA_CTK_DEBUG",
            "DRIVER_ROOT",
            "NVIDIA_DRIVER_ROOT",
            "NVIDIA_CTK_DRIVER_ROOT",
            "DEV_CHAR_PATH",
            "WATCH",
            "DRY_RUN",
            "CREATE_ALL",
        ] {
            cmd.env_remove(k);
        }
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            out.status.success(),
            ok,
            "case {name}: {}",
            ctx(&args, &out)
        );
        assert!(
            text.contains(want),
            "case {name}: no {want:?}: {}",
            ctx(&args, &out)
        );
    }
}

/// Messages an operator reads at 3 a.m.: what is being done in words (`-d`), a config error on
/// one line, a runtime path that does not exist, and the rootless docker restart.
#[test]
fn messages_say_what_is_done_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let daemon = d.join("daemon.json");
    fs::write(&daemon, "{}\n").unwrap();
    let bad = d.join("bad.toml");
    fs::write(&bad, "[nvidia-container-cli]\nroot = 5\n").unwrap();
    let user_daemon = d.join("home/.config/docker/daemon.json");
    let (daemon_s, bad_s, user_s) = (
        daemon.display().to_string(),
        bad.display().to_string(),
        user_daemon.display().to_string(),
    );
    let home = d.join("home").display().to_string();
    type Case<'a> = (
        &'a str,
        Vec<&'a str>,
        Vec<(&'a str, &'a str)>,
        &'a [&'a str],
        &'a [&'a str],
    );
    let cases: Vec<Case> = vec![
        (
            "-d in words",
            vec!["-d", "runtime", "configure", "--runtime=docker", "--config", &daemon_s, "--dry-run"],
            vec![],
            &["configuring docker: starting from", "runtime `nvidia` = nvidia-container-runtime"],
            &["Resolved {", "Options {"],
        ),
        (
            "a config error on one line",
            vec!["--config", &bad_s, "info"],
            vec![],
            &["line 2, column 8: invalid type: integer `5`, expected a string"],
            &["\\n", "|"],
        ),
        (
            "a runtime path that does not exist",
            vec!["runtime", "configure", "--runtime=docker", "--config", &daemon_s, "--nvidia-runtime-path", "/no/such/nvidia-container-runtime"],
            vec![],
            &["warning: the runtime /no/such/nvidia-container-runtime does not exist on this host"],
            &[],
        ),
        (
            "rootless docker restarts with --user",
            vec!["runtime", "configure", "--runtime=docker", "--config", &user_s],
            vec![("HOME", &home)],
            &["systemctl --user restart docker"],
            &[],
        ),
    ];
    for (name, args, env, want, not) in cases {
        let mut cmd = Command::new(BIN);
        cmd.args(&args)
            .env_remove("NVIDIA_CTK_DEBUG")
            .env_remove("NVIDIA_CTK_CONFIG");
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        for w in want {
            assert!(
                stderr.contains(w),
                "case {name}: no {w:?}: {}",
                ctx(&args, &out)
            );
        }
        for n in not {
            assert!(
                !stderr.contains(n),
                "case {name}: {n:?} in: {}",
                ctx(&args, &out)
            );
        }
    }
}
