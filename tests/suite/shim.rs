//! The runtime shim end to end: the `create` rewrite of config.json with a fake low-level
//! runtime that records its argv, pass-through of other commands, and the edited bundles run
//! under real runc on the simulated GPU host (those of the device rules on each kind of host,
//! tests/suite/common/hostkind.rs).
//! The real containerd path is tests/suite/shim_containerd.rs.

use crate::common::bundle::{self, out_text, Bundle, Image, HOOK};
use crate::common::fakehost::FakeHost;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime");

/// A shell script that records its argv (one per line, `$0` first) and exits `$FAKE_RC`.
fn fake_runtime(dir: &Path) -> (PathBuf, PathBuf) {
    let script = dir.join("fake-runc");
    let record = dir.join("argv.txt");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > '{}'\nexit ${{FAKE_RC:-0}}\n",
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (script, record)
}

/// The `[nvidia-container-runtime]` keys of a debug log at `log`.
fn debug_log(log: &Path) -> String {
    format!(
        "debug = {:?}\nlog-level = \"debug\"\n",
        log.display().to_string()
    )
}

fn recorded(record: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(record).expect("the fake runtime did not run");
    std::fs::remove_file(record).unwrap();
    text.lines().map(String::from).collect()
}

/// config.json with an unknown top-level field first and the keys in reverse of runc's order.
fn custom_spec(base: &Value, gpu: bool) -> Vec<u8> {
    let mut m = Map::new();
    m.insert("x-unknown-field".into(), json!({"keep": [1, 2, 3]}));
    let obj = base.as_object().unwrap();
    let keys: Vec<&String> = obj.keys().collect();
    for k in keys.into_iter().rev() {
        m.insert(k.clone(), obj[k].clone());
    }
    if gpu {
        m["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!("NVIDIA_VISIBLE_DEVICES=0"));
    }
    let mut out = serde_json::to_vec_pretty(&Value::Object(m)).unwrap();
    out.push(b'\n');
    out
}

fn shim(args: &[&str], config: &Path, rc: &str) -> Output {
    Command::new(SHIM)
        .args(args)
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", config)
        .env("FAKE_RC", rc)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A toolkit config for the simulated `host`: the shim in `mode`, the fake runtime, our hook,
/// and `extra` TOML for `[nvidia-container-runtime]`.
fn host_config(dir: &Path, host: &FakeHost, fake: &Path, mode: &str, extra: &str) -> PathBuf {
    bundle::write_config(
        dir,
        &host.driver_root(),
        &host.proc_root(),
        &format!(
            "[nvidia-container-runtime]\nmode = {mode:?}\nruntimes = [{:?}]\n{extra}[nvidia-container-runtime-hook]\npath = {:?}\n",
            fake.display().to_string(),
            HOOK
        ),
    )
}

/// `nvidia-container-runtime create` on bundle `b` with `config` (`b.spec` written first unless
/// `as_is`, when the test wrote config.json itself); asserts success and reloads `b.spec` from
/// what the shim wrote.
fn create(b: &mut Bundle, config: &Path, record: &Path, what: &str, as_is: bool) {
    let cfg_json = b.dir.join("config.json");
    if !as_is {
        std::fs::write(&cfg_json, serde_json::to_vec_pretty(&b.spec).unwrap()).unwrap();
    }
    let out = shim(
        &["create", "--bundle", &b.dir.display().to_string(), "x"],
        config,
        "0",
    );
    assert!(out.status.success(), "{what}: {}", out_text(&out));
    recorded(record);
    b.spec = serde_json::from_slice(&std::fs::read(&cfg_json).unwrap()).unwrap();
}

#[test]
fn create_rewrite_with_fake_runtime() {
    bundle::require("runc");
    let dir = tempfile::Builder::new()
        .prefix("nvct-shim-")
        .tempdir()
        .unwrap();
    let (fake, record) = fake_runtime(dir.path());
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[nvidia-container-runtime]\nruntimes = [{:?}, \"runc\"]\n[nvidia-container-runtime-hook]\npath = {:?}\n",
            fake.display().to_string(),
            HOOK
        ),
    )
    .unwrap();
    let b = Bundle::new(dir.path(), Image::Busybox);
    let cfg_json = b.dir.join("config.json");
    let bundle_s = b.dir.display().to_string();

    // A GPU container: exactly one hook added, everything else kept.
    let before = custom_spec(&b.spec, true);
    std::fs::write(&cfg_json, &before).unwrap();
    std::fs::set_permissions(&cfg_json, std::fs::Permissions::from_mode(0o640)).unwrap();
    let args = [
        "--root",
        "/run/x",
        "--log-format",
        "json",
        "create",
        "--bundle",
        &bundle_s,
        "ctr1",
    ];
    let out = shim(&args, &config, "0");
    assert!(out.status.success(), "{}", out_text(&out));
    assert!(
        out.stdout.is_empty(),
        "the shim wrote to stdout: {}",
        out_text(&out)
    );
    let mut want_argv = vec![fake.display().to_string()];
    want_argv.extend(args.iter().map(|s| s.to_string()));
    assert_eq!(recorded(&record), want_argv);

    let after_bytes = std::fs::read(&cfg_json).unwrap();
    let after: Value = serde_json::from_slice(&after_bytes).unwrap();
    let before_v: Value = serde_json::from_slice(&before).unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let mut want_keys = keys(&before_v);
    if !want_keys.iter().any(|k| k == "hooks") {
        want_keys.push("hooks".into());
    }
    assert_eq!(keys(&after), want_keys, "key order changed");
    assert_eq!(after["x-unknown-field"], json!({"keep": [1, 2, 3]}));
    assert_eq!(after["process"], before_v["process"], "process changed");
    assert_eq!(
        after["hooks"]["prestart"],
        json!([{
            "path": HOOK,
            "args": ["nvidia-container-runtime-hook", "prestart"],
            "env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                format!("NVIDIA_CTK_CONFIG_FILE_PATH={}", config.display()),
            ],
        }])
    );
    let mode = std::fs::metadata(&cfg_json).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640, "file mode changed");
    assert!(
        !b.dir.join("config.json.bak").exists(),
        "a .bak was written for config.json"
    );

    // Again (with -b=): not doubled, file untouched.
    let out = shim(&["create", &format!("-b={bundle_s}"), "ctr1"], &config, "0");
    assert!(out.status.success(), "{}", out_text(&out));
    assert_eq!(
        std::fs::read(&cfg_json).unwrap(),
        after_bytes,
        "second create changed config.json"
    );
    recorded(&record);

    // No GPU asked for: byte for byte untouched; bundle from the cwd.
    let plain = custom_spec(&b.spec, false);
    std::fs::write(&cfg_json, &plain).unwrap();
    let out = Command::new(SHIM)
        .args(["create", "ctr2"])
        .current_dir(&b.dir)
        .env("NVIDIA_CTK_CONFIG_FILE_PATH", &config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", out_text(&out));
    assert_eq!(
        std::fs::read(&cfg_json).unwrap(),
        plain,
        "config.json changed for a non-GPU container"
    );
    assert_eq!(
        recorded(&record),
        vec![fake.display().to_string(), "create".into(), "ctr2".into()]
    );

    // Other commands pass through unchanged, with the runtime's exit code.
    for args in [
        &["state", "x"][..],
        &["delete", "x"][..],
        &["--root", "/r", "delete", "--force", "x"][..],
    ] {
        let out = shim(args, &config, "3");
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", out_text(&out));
        let mut want = vec![fake.display().to_string()];
        want.extend(args.iter().map(|s| s.to_string()));
        assert_eq!(recorded(&record), want, "{args:?}");
    }

    // --version: our line, then the runtime's.
    let out = shim(&["--version"], &config, "0");
    assert!(out.status.success(), "{}", out_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("nvidia-container-runtime version "),
        "{}",
        out_text(&out)
    );
    assert_eq!(
        recorded(&record),
        vec![fake.display().to_string(), "--version".into()]
    );

    // Errors: invalid config.json is named, left alone, runtime not run.
    std::fs::write(&cfg_json, b"{not json").unwrap();
    let out = shim(&["create", "-b", &bundle_s, "x"], &config, "0");
    assert_eq!(out.status.code(), Some(1), "{}", out_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("nvidia-container-runtime: error: ") && err.contains("config.json"),
        "{err}"
    );
    assert_eq!(std::fs::read(&cfg_json).unwrap(), b"{not json");
    assert!(!record.exists(), "the runtime ran after an error");

    // Unsupported mode and a missing hook: clear errors, config.json untouched.
    std::fs::write(&cfg_json, &before).unwrap();
    for (extra, want) in [
        (
            "mode = \"csv\"\n",
            "unknown variant `csv`, expected one of `auto`, `legacy`, `cdi`, `jit-cdi`",
        ),
        (
            "",
            "\"no-such-hook\" (config nvidia-container-runtime-hook.path) was not found",
        ),
    ] {
        let cfg2 = dir.path().join("config2.toml");
        let hook = if extra.is_empty() {
            "no-such-hook"
        } else {
            HOOK
        };
        std::fs::write(
            &cfg2,
            format!(
                "[nvidia-container-runtime]\n{extra}runtimes = [{:?}]\n[nvidia-container-runtime-hook]\npath = {hook:?}\n",
                fake.display().to_string()
            ),
        )
        .unwrap();
        let out = shim(&["create", "-b", &bundle_s, "x"], &cfg2, "0");
        assert_eq!(out.status.code(), Some(1), "{}", out_text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(want),
            "{}",
            out_text(&out)
        );
        assert_eq!(std::fs::read(&cfg_json).unwrap(), before);
        assert!(!record.exists());
    }

    // No runtime found: the error names the list.
    let cfg3 = dir.path().join("config3.toml");
    std::fs::write(
        &cfg3,
        "[nvidia-container-runtime]\nruntimes = [\"no-such-runc\", \"/nonexistent/crun\"]\n",
    )
    .unwrap();
    let out = shim(&["state", "x"], &cfg3, "0");
    assert_eq!(out.status.code(), Some(1), "{}", out_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-runc") && err.contains("/nonexistent/crun"),
        "{err}"
    );
}

#[test]
fn crash_at_each_step_of_the_config_json_write() {
    // (step) — the shim aborts (SIGABRT, no cleanup) at that step of its config.json write:
    // config.json is always the old or the new content, never torn or empty, its mode is kept,
    // and a later create succeeds and ends with the new content.
    bundle::require("runc");
    let steps = [
        "temp-created",
        "temp-written",
        "temp-synced",
        "renamed",
        "dir-synced",
    ];
    let dir = tempfile::Builder::new()
        .prefix("nvct-shim-crash-")
        .tempdir()
        .unwrap();
    let (fake, _record) = fake_runtime(dir.path());
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[nvidia-container-runtime]\nruntimes = [{:?}]\n[nvidia-container-runtime-hook]\npath = {:?}\n",
            fake.display().to_string(),
            HOOK
        ),
    )
    .unwrap();
    let b = Bundle::new(dir.path(), Image::Busybox);
    let cfg_json = b.dir.join("config.json");
    let bundle_s = b.dir.display().to_string();
    let old = custom_spec(&b.spec, true);
    let args = ["create", "--bundle", &bundle_s, "ctr1"];
    let reset = || {
        std::fs::write(&cfg_json, &old).unwrap();
        std::fs::set_permissions(&cfg_json, std::fs::Permissions::from_mode(0o640)).unwrap();
    };
    reset();
    let out = shim(&args, &config, "0");
    assert!(out.status.success(), "{}", out_text(&out));
    let new = std::fs::read(&cfg_json).unwrap();
    assert_ne!(new, old);
    let hook: Value = serde_json::from_slice(&new).unwrap();
    assert!(
        hook["hooks"]["prestart"][0]["env"]
            .as_array()
            .is_some_and(|e| !e.is_empty()),
        "the hook entry the shim writes must carry an explicit env: {hook}"
    );
    for step in steps {
        reset();
        let out = Command::new(SHIM)
            .args(args)
            .env("NVIDIA_CTK_CONFIG_FILE_PATH", &config)
            .env("NVCT_FAULT_AT", step)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = format!("step {step}: {}", out_text(&out));
        assert!(
            !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("aborting at"),
            "{text}"
        );
        let now = std::fs::read(&cfg_json).unwrap();
        assert!(
            now == old || now == new,
            "config.json torn or empty after a crash: {text}\n{}",
            String::from_utf8_lossy(&now)
        );
        let mode = std::fs::metadata(&cfg_json).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640, "mode changed: {text}");
        let out = shim(&args, &config, "0");
        assert!(
            out.status.success(),
            "the later create: {text}\n{}",
            out_text(&out)
        );
        assert_eq!(
            std::fs::read(&cfg_json).unwrap(),
            new,
            "the later create: {text}"
        );
    }
}

fn legacy_mode_writes_the_device_rules_of_the_hook() {
    // Golden test of the legacy edit on the simulated host: the prestart hook, and one
    // `c MAJ:MIN rw` allow rule per node the hook will inject (GPU 2, the control node and the
    // UVM nodes of compute), after runc's own rules, nothing else changed.
    bundle::require("runc");
    let dir = tempfile::Builder::new()
        .prefix("nvct-shim-rules-")
        .tempdir()
        .unwrap();
    let host = FakeHost::builder()
        .gpus(4)
        .build(&dir.path().join("host"))
        .unwrap();
    let (fake, record) = fake_runtime(dir.path());
    let mut b = Bundle::new(dir.path(), Image::Busybox);
    b.env("NVIDIA_VISIBLE_DEVICES=2");
    let before = b.spec.clone();
    let config = host_config(dir.path(), &host, &fake, "legacy", "");
    let hook_log = dir.path().join("hook.log");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "[nvidia-container-cli]\n",
            &format!(
                "[nvidia-container-cli]\ndebug = {:?}\n",
                hook_log.display().to_string()
            ),
        ),
    )
    .unwrap();
    create(&mut b, &config, &record, "legacy", false);
    let mut want = before.clone();
    let rule = |major: u32, minor: u32| json!({"allow": true, "type": "c", "major": major, "minor": minor, "access": "rw"});
    let mut rules = want["linux"]["resources"]["devices"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let uvm = crate::common::fakehost::NVIDIA_UVM_MAJOR;
    rules.extend([rule(uvm, 0), rule(uvm, 1), rule(195, 2), rule(195, 255)]);
    want["linux"]["resources"]["devices"] = Value::Array(rules);
    want["hooks"] = b.spec["hooks"].clone();
    assert_eq!(
        b.spec,
        want,
        "the legacy edit: {}",
        serde_json::to_string_pretty(&b.spec).unwrap()
    );
    assert_eq!(b.spec["hooks"]["prestart"][0]["path"], json!(HOOK));
    // The edited bundle under real runc (on each kind of host): GPU 2 opens as far as a host
    // without a driver allows, another GPU's node is denied.
    b.add_capability("CAP_MKNOD");
    let run = b.run("cat /dev/nvidia2; mknod /dev/nvidia0 c 195 0 && cat /dev/nvidia0; true");
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{}", out_text(&run));
    assert!(
        err.contains("can't open '/dev/nvidia2': No such device or address"),
        "{}",
        out_text(&run)
    );
    assert!(
        err.contains("can't open '/dev/nvidia0': Operation not permitted"),
        "{}",
        out_text(&run)
    );
    // The runtime applied config.json's rules before the prestart hook (the OCI lifecycle), so
    // the hook did not write them again; GPU 2 opening above is the proof they hold.
    let log = std::fs::read_to_string(&hook_log).unwrap_or_default();
    assert!(
        log.contains("allows the 4 GPU device rules already") && log.contains("not written again"),
        "the hook's log: {log}"
    );

    // no-cgroups: the hook only, no rules.
    let config = host_config(dir.path(), &host, &fake, "legacy", "");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "[nvidia-container-cli]\n",
            "[nvidia-container-cli]\nno-cgroups = true\n",
        ),
    )
    .unwrap();
    let mut b = Bundle::new(dir.path(), Image::Busybox);
    b.env("NVIDIA_VISIBLE_DEVICES=2");
    let before = b.spec.clone();
    create(&mut b, &config, &record, "no-cgroups", false);
    assert_eq!(
        b.spec["linux"]["resources"], before["linux"]["resources"],
        "no-cgroups: no rules"
    );
}

fn automatic_kind_is_generated_in_cdi_mode() {
    // `runtime.nvidia.com/gpu=<id>` names no spec file: in cdi mode (and jit-cdi) the shim
    // generates its edits on the spot; the container then runs under real runc with GPU 1.
    bundle::require("runc");
    let dir = tempfile::Builder::new()
        .prefix("nvct-shim-auto-")
        .tempdir()
        .unwrap();
    let host = FakeHost::builder()
        .gpus(2)
        .build(&dir.path().join("host"))
        .unwrap();
    let (fake, record) = fake_runtime(dir.path());
    let no_specs = dir.path().join("no-specs");
    std::fs::create_dir_all(&no_specs).unwrap();
    let spec_dirs = format!(
        "[nvidia-container-runtime.modes.cdi]\nspec-dirs = [{:?}]\n",
        no_specs.display().to_string()
    );
    for mode in ["cdi", "jit-cdi", "auto"] {
        let mut b = Bundle::new(dir.path(), Image::Busybox);
        b.env("NVIDIA_VISIBLE_DEVICES=runtime.nvidia.com/gpu=1");
        create(
            &mut b,
            &host_config(dir.path(), &host, &fake, mode, &spec_dirs),
            &record,
            mode,
            false,
        );
        let run = b.run("ls /dev; cat /dev/nvidia1; true");
        let text = format!("mode {mode}: {}", out_text(&run));
        assert!(run.status.success(), "{text}");
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            stdout.lines().any(|l| l == "nvidia1") && !stdout.lines().any(|l| l == "nvidia0"),
            "{text}"
        );
        assert!(
            String::from_utf8_lossy(&run.stderr)
                .contains("can't open '/dev/nvidia1': No such device or address"),
            "{text}"
        );
    }
}

#[test]
fn numbers_in_config_json_survive_the_edit() {
    // config.json is the engine's: an integer beyond 64 bits, a float that f64 cannot hold
    // exactly, a negative zero and a trailing zero come back as written (arbitrary_precision),
    // in the legacy edit and in the CDI edit alike.
    bundle::require("runc");
    let dir = tempfile::Builder::new()
        .prefix("nvct-shim-numbers-")
        .tempdir()
        .unwrap();
    let host = FakeHost::builder()
        .gpus(1)
        .build(&dir.path().join("host"))
        .unwrap();
    let (fake, record) = fake_runtime(dir.path());
    let numbers = "[44444444444444444444444444444444444444244444444444, 0.1000000000000000055511151231257827, -0, 12.50]";
    for mode in ["legacy", "jit-cdi"] {
        let mut b = Bundle::new(dir.path(), Image::Busybox);
        b.env("NVIDIA_VISIBLE_DEVICES=0");
        let cfg_json = b.dir.join("config.json");
        let text = serde_json::to_string_pretty(&b.spec).unwrap();
        let text = text.replacen('{', &format!("{{\n  \"x-numbers\": {numbers},"), 1);
        std::fs::write(&cfg_json, &text).unwrap();
        create(
            &mut b,
            &host_config(dir.path(), &host, &fake, mode, ""),
            &record,
            mode,
            true,
        );
        let after = std::fs::read_to_string(&cfg_json).unwrap();
        assert_ne!(after, text, "mode {mode}: nothing was edited");
        let compact: String = after
            .split("\"x-numbers\":")
            .nth(1)
            .unwrap()
            .split(']')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(
            format!("{compact}]"),
            numbers.replace(' ', ""),
            "mode {mode}: {after}"
        );
    }
}

/// jit-cdi beyond devices, as decided in `shim::decide` (docs/COMPAT.md): `NVIDIA_REQUIRE_*` is
/// not evaluated, as upstream's jit-cdi (the container starts; the log says which requirement
/// was left unchecked); `NVIDIA_MIG_CONFIG_DEVICES` / `NVIDIA_MIG_MONITOR_DEVICES` are served as
/// legacy mode serves them: refused for an unprivileged container, the config and monitor cap
/// nodes (and their `/proc/driver/nvidia/capabilities/mig/` files) for a privileged one.
fn jit_cdi_requirements_and_mig_requests() {
    bundle::require("runc");
    let dir = tempfile::Builder::new()
        .prefix("nvct-shim-jit-")
        .tempdir()
        .unwrap();
    let host = FakeHost::builder()
        .gpus(2)
        .mig(true)
        .build(&dir.path().join("host"))
        .unwrap();
    let (fake, record) = fake_runtime(dir.path());
    let log = dir.path().join("runtime.log");
    let config = host_config(dir.path(), &host, &fake, "jit-cdi", &debug_log(&log));

    // Requirements: not evaluated (arch>=10.0 on compute capability 9.0), logged as such.
    let mut b = Bundle::new(dir.path(), Image::Busybox);
    b.env("NVIDIA_VISIBLE_DEVICES=1")
        .env("NVIDIA_REQUIRE_ARCH=arch>=10.0")
        .env("NVIDIA_REQUIRE_CUDA=cuda>=99.0");
    create(&mut b, &config, &record, "requirements", false);
    let lines = std::fs::read_to_string(&log).unwrap();
    assert!(
        lines.contains(
            "requirements not evaluated in jit-cdi mode (as upstream's jit-cdi): arch>=10.0 and cuda>=99.0"
        ),
        "the log names the unchecked requirements: {lines}"
    );
    let run = b.run("ls /dev | grep '^nvidia[0-9]'; true");
    assert!(run.status.success(), "{}", out_text(&run));
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        "nvidia1",
        "{}",
        out_text(&run)
    );
    // NVIDIA_DISABLE_REQUIRE: nothing to leave unchecked, nothing logged.
    std::fs::remove_file(&log).unwrap();
    let mut b = Bundle::new(dir.path(), Image::Busybox);
    b.env("NVIDIA_VISIBLE_DEVICES=1")
        .env("NVIDIA_REQUIRE_ARCH=arch>=10.0")
        .env("NVIDIA_DISABLE_REQUIRE=true");
    create(&mut b, &config, &record, "requirements disabled", false);
    let lines = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!lines.contains("not evaluated"), "{lines}");

    // MIG config / monitor from an unprivileged container: refused, the runtime not run.
    for var in ["NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES"] {
        let mut b = Bundle::new(dir.path(), Image::Busybox);
        b.env("NVIDIA_VISIBLE_DEVICES=0:0")
            .env(&format!("{var}=all"));
        std::fs::write(
            b.dir.join("config.json"),
            serde_json::to_vec_pretty(&b.spec).unwrap(),
        )
        .unwrap();
        let out = shim(
            &["create", "--bundle", &b.dir.display().to_string(), "x"],
            &config,
            "0",
        );
        let text = out_text(&out);
        assert!(!out.status.success(), "{var}: {text}");
        assert!(
            text.contains(&format!(
                "{var} is only honoured for privileged containers (CAP_SYS_ADMIN)"
            )),
            "{var}: {text}"
        );
        assert!(!record.exists(), "{var}: the runtime must not run: {text}");
    }

    // A privileged container: the config and monitor cap nodes with their rules and /proc
    // files, beside its MIG device's own.
    let mut b = Bundle::new(dir.path(), Image::Busybox);
    b.env("NVIDIA_VISIBLE_DEVICES=0:0")
        .env("NVIDIA_MIG_CONFIG_DEVICES=all")
        .env("NVIDIA_MIG_MONITOR_DEVICES=all")
        .add_capability("CAP_SYS_ADMIN");
    create(&mut b, &config, &record, "privileged MIG config", false);
    // (The order of device nodes is the planner's, sorted by path; the set is what counts.)
    let nodes: BTreeSet<String> = b.spec["linux"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["path"].as_str())
        .filter(|p| p.starts_with("/dev/nvidia-caps/"))
        .map(String::from)
        .collect();
    assert_eq!(
        nodes,
        [
            "/dev/nvidia-caps/nvidia-cap12",
            "/dev/nvidia-caps/nvidia-cap13",
            "/dev/nvidia-caps/nvidia-cap1",
            "/dev/nvidia-caps/nvidia-cap2",
        ]
        .map(String::from)
        .into(),
        "{}",
        serde_json::to_string_pretty(&b.spec["linux"]).unwrap()
    );
    let run = b.run(
        "cat /dev/nvidia-caps/nvidia-cap1 /dev/nvidia-caps/nvidia-cap2; \
         find /proc/driver/nvidia/capabilities -type f | sort; true",
    );
    let text = out_text(&run);
    assert!(run.status.success(), "{text}");
    for cap in ["nvidia-cap1", "nvidia-cap2"] {
        assert!(
            String::from_utf8_lossy(&run.stderr).contains(&format!(
                "can't open '/dev/nvidia-caps/{cap}': No such device or address"
            )),
            "{cap} allowed by the device rules (ENXIO): {text}"
        );
    }
    let files: Vec<&str> = std::str::from_utf8(&run.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("/proc/"))
        .collect();
    assert_eq!(
        files,
        [
            "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/access",
            "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/ci0/access",
            "/proc/driver/nvidia/capabilities/mig/config",
            "/proc/driver/nvidia/capabilities/mig/monitor",
        ],
        "{text}"
    );
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// device rules applied by runc on v1 or v2.
    legacy_mode_writes_the_device_rules_of_the_hook,
    /// the GPU node opens: runc's device rules from the edits.
    automatic_kind_is_generated_in_cdi_mode,
    /// the cap nodes open: runc's device rules from the edits.
    jit_cdi_requirements_and_mig_requests,
}

/// The installed shim is a statically linked front (scripts/build-release.sh; it starts faster,
/// and the engine runs it for every command of every container): it does everything that needs
/// nothing of NVML itself, and hands a request that does (jit-cdi's `all`) to its dynamic program
/// in `../libexec/nvct/` with the same arguments, before config.json is written. Without that
/// program installed, only the handed-on request fails, naming it, and config.json is untouched.
#[test]
fn the_static_shim_hands_on_only_what_needs_nvml() {
    let front_build = std::env::var_os("NVCT_STATIC_BIN_DIR")
        .map(|d| PathBuf::from(d).join("nvidia-container-runtime"))
        .expect("NVCT_STATIC_BIN_DIR is not set: run the suite with scripts/test.sh, which builds the static binaries");
    let dir = tempfile::Builder::new()
        .prefix("nvct-shim-front-")
        .tempdir()
        .unwrap();
    let host = FakeHost::builder()
        .gpus(2)
        .build(&dir.path().join("host"))
        .unwrap();
    let (fake, record) = fake_runtime(dir.path());
    // The runtime also records whether the hand-over's marker reached it.
    let script = std::fs::read_to_string(&fake).unwrap().replace(
        "\nexit",
        &format!(
            "\necho \"marker=${{NVCT_HANDED_OVER-none}}\" >> '{}'\nexit",
            record.display()
        ),
    );
    std::fs::write(&fake, script).unwrap();
    let log = dir.path().join("shim.log");
    let config = host_config(dir.path(), &host, &fake, "jit-cdi", &debug_log(&log));
    // (case, NVIDIA_VISIBLE_DEVICES, program installed, Ok(config.json edited) or Err(said))
    let cases: &[(&str, Option<&str>, bool, Result<bool, &str>)] = &[
        ("no GPU: passed through", None, false, Ok(false)),
        ("GPU 0: the front alone", Some("0"), false, Ok(true)),
        (
            "all needs NVML: handed on, no program installed",
            Some("all"),
            false,
            Err("cannot start the driver-facing program"),
        ),
        (
            "all needs NVML: handed on to the program",
            Some("all"),
            true,
            Ok(true),
        ),
    ];
    for (i, (name, visible, program, want)) in cases.iter().enumerate() {
        let prefix = dir.path().join(format!("prefix-{i}"));
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        let front = prefix.join("bin/nvidia-container-runtime");
        std::fs::copy(&front_build, &front).unwrap();
        if *program {
            std::fs::create_dir_all(prefix.join("libexec/nvct")).unwrap();
            std::fs::copy(SHIM, prefix.join("libexec/nvct/nvidia-container-runtime")).unwrap();
        }
        let mut b = Bundle::new(dir.path(), Image::Busybox);
        if let Some(v) = visible {
            b.env(&format!("NVIDIA_VISIBLE_DEVICES={v}"));
        }
        let cfg_json = b.dir.join("config.json");
        let before = serde_json::to_vec_pretty(&b.spec).unwrap();
        std::fs::write(&cfg_json, &before).unwrap();
        let out = Command::new(&front)
            .args(["create", "--bundle", &b.dir.display().to_string(), "x"])
            .env("NVIDIA_CTK_CONFIG_FILE_PATH", &config)
            .env("FAKE_RC", "0")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        let context = format!("case {name}: {}\nlog:\n{logged}", out_text(&out));
        let after = std::fs::read(&cfg_json).unwrap();
        match want {
            Ok(edited) => {
                assert!(out.status.success(), "{context}");
                let argv = recorded(&record);
                assert_eq!(argv[1], "create", "{context}");
                // The start is logged once, by the front, also when the program takes over;
                // the runtime never sees the marker.
                assert_eq!(logged.matches("args [").count(), 1, "{context}");
                assert_eq!(logged.matches("low-level runtime").count(), 1, "{context}");
                assert_eq!(
                    logged.contains("took over from the static front"),
                    *program,
                    "{context}"
                );
                assert_eq!(argv.last().unwrap(), "marker=none", "{context}");
                assert_eq!(after != before, *edited, "{context}");
                if *edited {
                    let spec: Value = serde_json::from_slice(&after).unwrap();
                    assert!(
                        spec["hooks"]["createContainer"].is_array(),
                        "{context}: no CDI hook in {spec}"
                    );
                }
            }
            Err(said) => {
                assert!(!out.status.success(), "{context}");
                assert!(out_text(&out).contains(said), "{context}");
                assert_eq!(after, before, "{context}: config.json changed");
                assert!(!record.exists(), "{context}: the runtime ran");
            }
        }
    }
}
