//! Black-box tests of the runtime shim's logging: runc's `--log FILE` (text or `--log-format
//! json`), the config's `debug` file and `log-level`, with a fake low-level runtime script, and
//! nothing on stdout but what the runtime prints.

use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime");
const HOOK: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime-hook");

fn out_text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

struct Setup {
    dir: tempfile::TempDir,
    bundle: PathBuf,
}

impl Setup {
    /// A fake runtime (prints nothing, exits 0), a bundle asking for GPU 0, no config yet.
    fn new() -> Setup {
        let dir = tempfile::Builder::new()
            .prefix("nvct-shimlog-")
            .tempdir()
            .unwrap();
        let fake = dir.path().join("fake-runc");
        std::fs::write(&fake, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bundle = dir.path().join("bundle");
        std::fs::create_dir_all(bundle.join("rootfs")).unwrap();
        let s = Setup { dir, bundle };
        s.spec(true);
        s
    }

    fn spec(&self, gpu: bool) {
        let mut env = vec!["PATH=/bin"];
        if gpu {
            env.push("NVIDIA_VISIBLE_DEVICES=0");
        }
        let spec = json!({
            "ociVersion": "1.0.2",
            "process": {"cwd": "/", "args": ["sh"], "env": env, "user": {"uid": 0, "gid": 0}},
            "root": {"path": "rootfs"},
        });
        std::fs::write(
            self.bundle.join("config.json"),
            serde_json::to_vec_pretty(&spec).unwrap(),
        )
        .unwrap();
    }

    /// config.toml with the fake runtime, the real hook and `extra` lines in
    /// `[nvidia-container-runtime]`.
    fn config(&self, extra: &str) -> PathBuf {
        let p = self.dir.path().join("config.toml");
        std::fs::write(
            &p,
            format!(
                "[nvidia-container-runtime]\nruntimes = [{:?}]\n{extra}[nvidia-container-runtime-hook]\npath = {HOOK:?}\n",
                self.dir.path().join("fake-runc").display().to_string()
            ),
        )
        .unwrap();
        p
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, global: &[&str], config: &Path) -> Output {
        Command::new(SHIM)
            .args(global)
            .args(["create", "--bundle", self.bundle.to_str().unwrap(), "ctr"])
            .env("NVIDIA_CTK_CONFIG_FILE_PATH", config)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

/// Every line of a JSON log, checked to have level, msg and an RFC 3339 UTC time.
fn json_lines(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            let time = v["time"].as_str().unwrap_or_else(|| panic!("no time: {l}"));
            assert!(
                time.len() == 20 && time.ends_with('Z') && &time[10..11] == "T",
                "time {time:?}: {l}"
            );
            let level = v["level"]
                .as_str()
                .unwrap_or_else(|| panic!("no level: {l}"));
            let msg = v["msg"].as_str().unwrap_or_else(|| panic!("no msg: {l}"));
            (level.to_string(), msg.to_string())
        })
        .collect()
}

#[test]
fn runc_log_json() {
    let s = Setup::new();
    let config = s.config("");
    let log = s.path("runc-log.json");
    let log_s = log.to_str().unwrap();
    let out = s.run(
        &["--root", "/run/x", "--log", log_s, "--log-format", "json"],
        &config,
    );
    assert!(out.status.success(), "{}", out_text(&out));
    assert!(
        out.stdout.is_empty(),
        "the shim wrote to stdout: {}",
        out_text(&out)
    );
    let lines = json_lines(&log);
    assert!(
        lines
            .iter()
            .any(|(l, m)| l == "info" && m.contains("added prestart hook")),
        "no info line about the hook: {lines:?}"
    );
    assert!(
        lines.iter().all(|(l, _)| l != "debug"),
        "debug lines at level info: {lines:?}"
    );

    // An error reaches runc's log as an error line (containerd shows it), and stderr.
    std::fs::write(s.bundle.join("config.json"), "{not json").unwrap();
    std::fs::remove_file(&log).unwrap();
    let out = s.run(&["--log", log_s, "--log-format=json"], &config);
    assert_eq!(out.status.code(), Some(1), "{}", out_text(&out));
    assert!(out.stdout.is_empty(), "{}", out_text(&out));
    let lines = json_lines(&log);
    assert!(
        lines
            .iter()
            .any(|(l, m)| l == "error" && m.contains("config.json")),
        "no error line naming config.json: {lines:?}"
    );
}

#[test]
fn log_level_and_debug_file() {
    // log-level error: no info lines anywhere, even when the hook is added.
    let s = Setup::new();
    let debug = s.path("runtime.log");
    let config = s.config(&format!(
        "debug = {:?}\nlog-level = \"error\"\n",
        debug.display().to_string()
    ));
    let log = s.path("runc.log");
    let out = s.run(
        &["--log", log.to_str().unwrap(), "--log-format", "json"],
        &config,
    );
    assert!(out.status.success(), "{}", out_text(&out));
    assert!(out.stdout.is_empty(), "{}", out_text(&out));
    for p in [&log, &debug] {
        let lines = if p.exists() {
            json_lines(p)
        } else {
            Vec::new()
        };
        assert!(
            lines.iter().all(|(l, _)| l == "error"),
            "{}: {lines:?}",
            p.display()
        );
    }

    // log-level debug, text format (runc's default): debug and info lines in both files.
    let s = Setup::new();
    let debug = s.path("runtime.log");
    let config = s.config(&format!(
        "debug = {:?}\nlog-level = \"debug\"\n",
        debug.display().to_string()
    ));
    let log = s.path("runc.log");
    let out = s.run(&["--log", log.to_str().unwrap()], &config);
    assert!(out.status.success(), "{}", out_text(&out));
    assert!(out.stdout.is_empty(), "{}", out_text(&out));
    for p in [&log, &debug] {
        let text = std::fs::read_to_string(p).unwrap();
        assert!(
            text.lines().all(|l| l.starts_with("time=\"")
                && l.contains(" level=")
                && l.contains(" msg=\"")),
            "{text}"
        );
        assert!(
            text.contains("level=debug msg=\"args "),
            "{}: {text}",
            p.display()
        );
        // The step timings (scripts/bench.sh --breakdown): names checked, never the times.
        let steps = text
            .lines()
            .find_map(|l| l.split_once("msg=\"step timings (us): "))
            .map(|(_, rest)| rest.trim_end_matches('"'))
            .unwrap_or_else(|| panic!("{}: no step timings: {text}", p.display()));
        let names: Vec<&str> = steps
            .split(' ')
            .map(|kv| kv.split_once('=').unwrap().0)
            .collect();
        for want in [
            "config",
            "spec-read",
            "decide",
            "discovery",
            "write",
            "total",
        ] {
            assert!(names.contains(&want), "{}: {want} in {steps}", p.display());
        }
        assert!(
            text.contains("level=info msg=") && text.contains("added prestart hook"),
            "{}: {text}",
            p.display()
        );
    }

    // No --log and debug = /dev/null (the default): nothing written anywhere, stdout empty.
    let s = Setup::new();
    let config = s.config("");
    let out = s.run(&[], &config);
    assert!(out.status.success(), "{}", out_text(&out));
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        out_text(&out)
    );
}
