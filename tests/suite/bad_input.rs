//! A corpus of bad inputs, as table tests over the REAL binaries: every case must end in a
//! clear error (exit 1 — never 101, a Rust panic, nor a signal — and a stderr naming the bad
//! thing, with no "panicked") and write nothing.
//!
//! Owns (one table each):
//! - [`hook_state_cases`]: the hook state on stdin of `nvidia-container-runtime-hook prestart`;
//! - [`config_json_cases`]: the bundle's config.json, for the hook and for the shim's `create`;
//! - [`env_cases`]: `process.env` values (`NVIDIA_VISIBLE_DEVICES`, `NVIDIA_DRIVER_CAPABILITIES`,
//!   `NVIDIA_REQUIRE_*`) and the volume-mount device list, for the hook and (request-level
//!   errors) the shim;
//! - [`engine_config_cases`]: the files `nvidia-ctk runtime configure|unconfigure` edits;
//! - [`cdi_spec_cases`]: the files of `nvidia-ctk cdi validate F` and `cdi list --spec-dir D`;
//! - [`ld_cache_cases`]: a driver root whose `etc/ld.so.cache` is corrupt. The design falls back
//!   to scanning the usual lib dirs (src/discover.rs), so these cases assert exactly that: the
//!   container starts with its GPU and libraries, and the hook logs why the cache was not used.
//!
//! "Nothing written" means: for the hook, the bundle (config.json, rootfs) is byte-for-byte and
//! mode-for-mode the same and the host mount table (/proc/self/mountinfo) is unchanged; for the
//! shim, the same for the bundle and the low-level runtime (a recording script) never ran; for
//! `nvidia-ctk`, the file's bytes, mode and mtime are unchanged and it is alone in its
//! directory (no `.bak`, no temp file).
//!
//! The hook cases that get as far as a pid point it at a `sleep` in its own private mount
//! namespace (never pid 1): if a case wrongly got to the apply step, its mounts would land in
//! that throwaway namespace, not on the host.

use crate::common::bundle::{self, out_text, Bundle, Image, CDI_HOOK, CTK, HOOK};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime");

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// The simulated 2-GPU host shared by the hook and shim tables, with a toolkit config for the
/// hook, one that accepts volume-mount device lists, and one for the shim.
struct Host {
    dir: PathBuf,
    config: PathBuf,
    volume_config: PathBuf,
    shim_config: PathBuf,
    shim_volume_config: PathBuf,
    runtime_ran: PathBuf,
    /// config.json as `runc spec` writes it.
    base_spec: Value,
}

fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        bundle::require_root();
        let runc = bundle::require("runc");
        let (dir, host) = bundle::scratch_host("nvct-bad-", 2);
        let config = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
        let volume_config = bundle::write_config(
            &dir,
            &host.driver_root(),
            &host.proc_root(),
            "accept-nvidia-visible-devices-as-volume-mounts = true",
        );
        // The low-level runtime of the shim: records that it ran.
        let fake_runtime = dir.join("fake-runc");
        let runtime_ran = dir.join("fake-runc-ran");
        std::fs::write(&fake_runtime, format!("#!/bin/sh\necho \"$@\" > '{}'\n", runtime_ran.display())).unwrap();
        std::fs::set_permissions(&fake_runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
        let shim_text = format!("[nvidia-container-runtime]\nruntimes = [{fake_runtime:?}]\n[nvidia-container-runtime-hook]\npath = {HOOK:?}\n");
        let shim_config = dir.join("shim-config.toml");
        std::fs::write(&shim_config, &shim_text).unwrap();
        let shim_volume_config = dir.join("shim-volume-config.toml");
        std::fs::write(
            &shim_volume_config,
            format!("accept-nvidia-visible-devices-as-volume-mounts = true\n{shim_text}"),
        )
        .unwrap();
        let spec_dir = dir.join("runc-spec");
        std::fs::create_dir_all(&spec_dir).unwrap();
        let out = Command::new(runc).arg("spec").current_dir(&spec_dir).output().unwrap();
        assert!(out.status.success(), "runc spec: {}", String::from_utf8_lossy(&out.stderr));
        let base_spec = serde_json::from_slice(&std::fs::read(spec_dir.join("config.json")).unwrap()).unwrap();
        Host {
            dir,
            config,
            volume_config,
            shim_config,
            shim_volume_config,
            runtime_ran,
            base_spec,
        }
    })
}

/// The hook and shim tables compare the host mount table around each case; the ld-cache table
/// starts containers. One at a time, so that no test sees another's container.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `program args` (under a 120 s kill timer, so a hang fails the case) with `stdin`.
fn run(program: &str, args: &[&str], env: &[(&str, &Path)], stdin: &[u8]) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.args(["-s", "KILL", "120", program]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.env_remove("NVCT_FAULT_AT");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // The hook stops reading at its size cap: a broken pipe here is expected.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// The checks every case shares: exit 1 (not 101, not a signal, not a timeout), no panic, and
/// stderr holding every one of `want`.
fn assert_clear_failure(case: &str, out: &Output, want: &[&str]) {
    let text = out_text(out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(101),
        "case {case}: a Rust panic: {text}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "case {case}: must fail with exit 1: {text}"
    );
    assert!(!stderr.contains("panicked"), "case {case}: a panic: {text}");
    for w in want {
        assert!(
            stderr.contains(w),
            "case {case}: stderr must contain {w:?}: {text}"
        );
    }
}

/// What a directory holds, recursively: per path its mode and its bytes (a link's target, a
/// device node's number).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let content = if m.is_symlink() {
                use std::os::unix::ffi::OsStrExt;
                std::fs::read_link(&p)
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            } else if m.is_dir() {
                todo.push(p.clone());
                Vec::new()
            } else if m.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                use std::os::unix::fs::MetadataExt;
                m.rdev().to_le_bytes().to_vec()
            };
            out.insert(p, (m.permissions().mode(), content));
        }
    }
    out
}

/// A process in its own private mount namespace, for the state's pid; killed on drop.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        let child = Command::new(bundle::require("unshare"))
            .args(["--mount", "--propagation", "private", "sleep", "600"])
            .spawn()
            .unwrap();
        // Wait until unshare has exec'd sleep, i.e. the new namespace exists.
        let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ns(&child.id().to_string()) == ns("self")
            || std::fs::read_to_string(format!("/proc/{}/comm", child.id()))
                .unwrap_or_default()
                .trim()
                != "sleep"
        {
            assert!(
                std::time::Instant::now() < deadline,
                "unshare did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Sleeper(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A new bundle directory under the host's dir: `config.json` with `bytes`, an empty rootfs.
fn bundle_dir(bytes: &[u8]) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = host().dir.join(format!(
        "bundle-{}",
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    std::fs::create_dir_all(dir.join("rootfs/etc")).unwrap();
    std::fs::write(dir.join("config.json"), bytes).unwrap();
    std::fs::set_permissions(
        dir.join("config.json"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    dir
}

fn state(pid: u32, bundle: &Path) -> Vec<u8> {
    serde_json::to_vec(&json!({"ociVersion": "1.0.2", "id": "bad-input", "status": "created", "pid": pid, "bundle": bundle})).unwrap()
}

/// Runs the hook with `stdin` as the state and checks that it failed clearly and that neither
/// `bundle` nor the host mount table changed.
fn hook_must_fail(case: &str, config: &Path, bundle: &Path, stdin: &[u8], want: &[&str]) {
    let _quiet = crate::common::engines::quiet();
    let before = (snapshot(bundle), bundle::host_mounts());
    let out = run(
        HOOK,
        &["-config", config.to_str().unwrap(), "prestart"],
        &[],
        stdin,
    );
    assert_clear_failure(case, &out, want);
    assert!(
        snapshot(bundle) == before.0,
        "case {case}: the bundle changed"
    );
    assert_eq!(
        bundle::host_mounts(),
        before.1,
        "case {case}: the host mount table changed"
    );
}

/// Runs the shim's `create` on `bundle` and checks that it failed clearly, left the bundle
/// alone and never ran the low-level runtime.
fn shim_must_fail(case: &str, config: &Path, bundle: &Path, want: &[&str]) {
    let h = host();
    let _ = std::fs::remove_file(&h.runtime_ran);
    let _quiet = crate::common::engines::quiet();
    let before = (snapshot(bundle), bundle::host_mounts());
    let out = run(
        SHIM,
        &["create", "--bundle", bundle.to_str().unwrap(), "bad-input"],
        &[("NVIDIA_CTK_CONFIG_FILE_PATH", config)],
        b"",
    );
    assert_clear_failure(case, &out, want);
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("nvidia-container-runtime: error: "),
        "case {case}: {}",
        out_text(&out)
    );
    assert!(
        snapshot(bundle) == before.0,
        "case {case}: the shim changed the bundle"
    );
    assert_eq!(
        bundle::host_mounts(),
        before.1,
        "case {case}: the host mount table changed"
    );
    assert!(
        !h.runtime_ran.exists(),
        "case {case}: the low-level runtime ran after an error"
    );
}

// ---------------------------------------------------------------------------------------------
// The hook state on stdin
// ---------------------------------------------------------------------------------------------

struct StateCase {
    name: &'static str,
    stdin: Vec<u8>,
    want: Vec<String>,
}

fn state_case(name: &'static str, stdin: impl Into<Vec<u8>>, want: &[&str]) -> StateCase {
    StateCase {
        name,
        stdin: stdin.into(),
        want: want.iter().map(|w| w.to_string()).collect(),
    }
}

const NOT_JSON: &str = "the OCI hook state on stdin is not valid JSON";

#[test]
fn hook_state_cases() {
    let h = host();
    let _serial = serial();
    let sleeper = Sleeper::start();
    // A GPU container's config.json: were the state accepted, the hook would go on to apply.
    let mut spec = h.base_spec.clone();
    spec["process"]["env"]
        .as_array_mut()
        .unwrap()
        .push(json!("NVIDIA_VISIBLE_DEVICES=0"));
    let good = bundle_dir(&serde_json::to_vec_pretty(&spec).unwrap());
    let file = good.join("config.json");
    let pid = sleeper.pid();
    // A state with this pid (as JSON text) and the good bundle; one with our pid and this bundle.
    let with_pid = |p: &str| format!(r#"{{"pid":{p},"bundle":"{}"}}"#, good.display());
    let with_bundle = |b: &str| format!(r#"{{"pid":{pid},"bundle":"{b}"}}"#);
    let mut huge_valid = with_pid(&pid.to_string())
        .replace('}', r#","annotations":{"x":""#)
        .into_bytes();
    huge_valid.extend(std::iter::repeat_n(b'a', 4 << 20));
    huge_valid.extend(br#""}}"#);
    let cases = vec![
        state_case("empty", "", &[NOT_JSON, "EOF while parsing"]),
        state_case("not JSON", "{not json", &[NOT_JSON]),
        state_case("JSON null", "null", &[NOT_JSON, "invalid type: null"]),
        state_case("JSON array", "[1,2]", &[NOT_JSON]),
        state_case(
            "JSON string",
            "\"state\"",
            &[NOT_JSON, "invalid type: string"],
        ),
        // serde would take an array as the struct's fields in order.
        state_case(
            "fields as an array",
            format!(r#"["bad-input",{pid},"{}"]"#, good.display()),
            &["the OCI hook state on stdin is not a JSON object"],
        ),
        state_case(
            "pid missing",
            format!(r#"{{"bundle":"{}"}}"#, good.display()),
            &["no usable pid (got None)"],
        ),
        // crun's createContainer state: the prestart hook needs a pid and says where to
        // register (the CDI hooks take it: tests/suite/cdi_hooks.rs).
        state_case(
            "pid 0",
            with_pid("0"),
            &["has pid 0", "register it as a prestart hook"],
        ),
        state_case(
            "pid negative",
            with_pid("-1"),
            &["no usable pid (got Some(-1))"],
        ),
        state_case(
            "pid over i32",
            with_pid("2147483648"),
            &["no usable pid (got Some(2147483648))"],
        ),
        state_case(
            "pid over u64",
            with_pid("18446744073709551616"),
            &[NOT_JSON, "expected i64"],
        ),
        state_case(
            "pid fractional",
            with_pid("1.5"),
            &[NOT_JSON, "floating point `1.5`"],
        ),
        state_case(
            "pid a string",
            with_pid("\"1\""),
            &[NOT_JSON, "invalid type: string \"1\""],
        ),
        // The largest pid the parser takes, with no such process: refused when its mount
        // namespace is opened, before anything is attached anywhere.
        state_case(
            "pid of no process",
            with_pid("2147483647"),
            &["cannot open /proc/2147483647/ns/mnt"],
        ),
        state_case(
            "bundle missing",
            format!(r#"{{"pid":{pid}}}"#),
            &["empty bundle path"],
        ),
        state_case("bundle empty", with_bundle(""), &["empty bundle path"]),
        state_case(
            "bundle a number",
            format!(r#"{{"pid":{pid},"bundle":5}}"#),
            &[NOT_JSON, "invalid type: integer `5`"],
        ),
        state_case(
            "bundle relative",
            with_bundle("rootfs/.."),
            &["bundle path \"rootfs/..\" is not absolute"],
        ),
        state_case(
            "bundle does not exist",
            with_bundle("/nonexistent/nvct-bundle"),
            &[
                "cannot read /nonexistent/nvct-bundle/config.json",
                "No such file",
            ],
        ),
        state_case(
            "bundle is a file",
            with_bundle(&file.display().to_string()),
            &[
                &format!("cannot read {}/config.json", file.display()),
                "Not a directory",
            ],
        ),
        state_case(
            "bundle with a NUL",
            with_bundle(&format!("{}\\u0000x", good.display())),
            &["cannot read", "NUL byte"],
        ),
        state_case(
            "huge: 4 MiB of spaces",
            vec![b' '; 4 << 20],
            &["larger than 1048576 bytes"],
        ),
        state_case(
            "huge: a valid state with a 4 MiB annotation",
            huge_valid,
            &["larger than 1048576 bytes"],
        ),
        state_case("non-UTF-8 bytes", vec![0xff, 0xfe, 0x00, 0x80], &[NOT_JSON]),
        state_case(
            "non-UTF-8 in the bundle string",
            [&br#"{"pid":1,"bundle":"/tmp/"#[..], &[0xff, 0xfe], br#""}"#].concat(),
            &[NOT_JSON, "invalid unicode code point"],
        ),
    ];
    for case in cases {
        let want: Vec<&str> = case.want.iter().map(String::as_str).collect();
        hook_must_fail(case.name, &h.config, &good, &case.stdin, &want);
    }
}

/// crun's hook states name its working directory as the bundle (1.8 with podman's
/// `--userns=keep-id`: "/"): a bundle directory without config.json is a container the hook
/// cannot read. It is let through (the hooks.d hook runs for every container), with a warning
/// in the debug log and the system log; everything else about the state is still checked, and a
/// bundle that is not there at all still fails (see `hook_state_cases`).
#[test]
fn a_bundle_without_config_json_is_let_through_and_logged() {
    let h = host();
    let _serial = serial();
    let sleeper = Sleeper::start();
    let no_config = bundle_dir(b"");
    std::fs::remove_file(no_config.join("config.json")).unwrap();
    let debug_log = no_config.join("hook-debug.log");
    let config = no_config.join("config.toml");
    let text = std::fs::read_to_string(&h.config).unwrap();
    std::fs::write(
        &config,
        text.replacen(
            "[nvidia-container-cli]",
            &format!(
                "[nvidia-container-cli]\ndebug = {:?}",
                debug_log.display().to_string()
            ),
            1,
        ),
    )
    .unwrap();
    // The system log: a datagram socket in the scratch dir (the test-only override).
    let sock_path = no_config.join("syslog.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    assert!(
        !Path::new("/config.json").exists(),
        "this test needs a host without /config.json"
    );
    // A bundle directory without config.json, and crun 1.8's keep-id bundle "/".
    for bundle in [no_config.as_path(), Path::new("/")] {
        let state = format!(
            r#"{{"ociVersion":"1.0","id":"keep-id","pid":{},"root":"/r","bundle":"{}","status":"created"}}"#,
            sleeper.pid(),
            bundle.display()
        );
        let case = bundle.display();
        let _quiet = crate::common::engines::quiet();
        let before = bundle::host_mounts();
        let out = run(
            HOOK,
            &["-config", config.to_str().unwrap(), "prestart"],
            &[("NVCT_SYSLOG_SOCKET", &sock_path)],
            state.as_bytes(),
        );
        assert!(out.status.success(), "bundle {case}: {}", out_text(&out));
        assert_eq!(
            bundle::host_mounts(),
            before,
            "bundle {case}: the host mount table changed"
        );
        let logged = std::fs::read_to_string(&debug_log).unwrap_or_default();
        let want = format!("{} does not exist", bundle.join("config.json").display());
        assert!(
            logged.contains(&want) && logged.contains("level=warning"),
            "bundle {case}: debug log: {logged}"
        );
        let mut buf = vec![0u8; 4096];
        let n = sock.recv(&mut buf).expect("a line on the syslog socket");
        let line = String::from_utf8_lossy(&buf[..n]);
        assert!(
            line.starts_with("<28>nvidia-container-runtime-hook[") && line.contains(&want),
            "bundle {case}: syslog line: {line}"
        );
    }
}

/// Every refusal of the prestart hook and of the CDI hooks also goes to the system log (crun
/// drops hook stderr), tagged with the program's name; stderr keeps it too.
#[test]
fn refusals_reach_the_system_log() {
    let h = host();
    let _serial = serial();
    let dir = bundle_dir(b"{}");
    let sock_path = dir.join("syslog.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let pid0 = format!(r#"{{"pid":0,"bundle":"{}"}}"#, dir.display());
    let config = h.config.to_str().unwrap();
    // (case, program, args, stdin, the line's start, words it holds)
    let cases: &[(&str, &str, &[&str], &str, &str, &str)] = &[
        (
            "prestart hook, pid 0",
            HOOK,
            &["-config", config, "prestart"],
            &pid0,
            "<27>nvidia-container-runtime-hook[",
            "error: the OCI hook state has pid 0",
        ),
        (
            "CDI hook, no state",
            CDI_HOOK,
            &["create-symlinks", "--link", "x::/y/z"],
            "",
            "<27>nvidia-cdi-hook[",
            "error: the OCI hook state on stdin is not valid JSON",
        ),
        (
            "nvidia-ctk hook, empty bundle",
            CTK,
            &["hook", "create-symlinks", "--link", "x::/y/z"],
            r#"{"pid":1,"bundle":""}"#,
            "<27>nvidia-ctk[",
            "error: the OCI hook state has an empty bundle path",
        ),
    ];
    for (name, program, args, stdin, start, words) in cases {
        let out = run(
            program,
            args,
            &[("NVCT_SYSLOG_SOCKET", &sock_path)],
            stdin.as_bytes(),
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "case {name}: {}",
            out_text(&out)
        );
        let mut buf = vec![0u8; 4096];
        let n = sock
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("case {name}: no line on the syslog socket: {e}"));
        let line = String::from_utf8_lossy(&buf[..n]);
        assert!(
            line.starts_with(start) && line.contains(words),
            "case {name}: syslog line: {line}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = words.trim_start_matches("error: ");
        assert!(
            stderr.contains(first),
            "case {name}: stderr still has it: {stderr}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// config.json in the bundle
// ---------------------------------------------------------------------------------------------

struct SpecCase {
    name: &'static str,
    /// config.json's bytes; `None` for the special files set up in the loop.
    bytes: Option<Vec<u8>>,
    want: &'static [&'static str],
    /// The shim refuses it too (it reads the same file; it needs no root.path).
    shim: bool,
}

/// `base` with `edit` applied, as bytes.
fn spec_bytes(base: &Value, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v = base.clone();
    edit(&mut v);
    serde_json::to_vec_pretty(&v).unwrap()
}

#[test]
fn config_json_cases() {
    let h = host();
    let _serial = serial();
    let sleeper = Sleeper::start();
    let mut gpu = h.base_spec.clone();
    gpu["process"]["env"]
        .as_array_mut()
        .unwrap()
        .push(json!("NVIDIA_VISIBLE_DEVICES=0"));
    let gpu_text = serde_json::to_string_pretty(&gpu).unwrap();
    // Non-UTF-8 cannot be written in valid JSON (neither raw nor as an escape), so the env
    // value is given its bytes raw, as a hand-written config.json could: the whole file is
    // refused before any env var is looked at (oci-spec's strings are UTF-8). The volume-mount
    // list cannot carry them either: it comes from the same JSON.
    let raw_env = |raw: &[u8]| -> Vec<u8> {
        let text = gpu_text.replacen(
            "\"NVIDIA_VISIBLE_DEVICES=0\"",
            "\"NVIDIA_VISIBLE_DEVICES=0@RAW@\"",
            1,
        );
        let (a, b) = text.split_once("@RAW@").unwrap();
        [a.as_bytes(), raw, b.as_bytes()].concat()
    };
    let mut huge = gpu_text.clone().into_bytes();
    huge.resize(nvct_formats::oci::MAX_SPEC_BYTES as usize + 1, b' ');
    const PARSE: &str = "is not a valid OCI runtime spec";
    let cases = vec![
        SpecCase {
            name: "empty file",
            bytes: Some(vec![]),
            want: &[PARSE, "EOF while parsing"],
            shim: true,
        },
        SpecCase {
            name: "not JSON",
            bytes: Some(b"{\"ociVersion\": ".to_vec()),
            want: &[PARSE],
            shim: true,
        },
        SpecCase {
            name: "trailing garbage",
            bytes: Some([gpu_text.as_bytes(), b"}"].concat()),
            want: &[PARSE, "trailing characters"],
            shim: true,
        },
        // serde would take an array as a struct's fields in order (`[]`: an empty spec).
        SpecCase {
            name: "a JSON array",
            bytes: Some(b" []".to_vec()),
            want: &[PARSE, "not a JSON object"],
            shim: true,
        },
        SpecCase {
            name: "process.env a string",
            bytes: Some(spec_bytes(&gpu, |v| {
                v["process"]["env"] = json!("NVIDIA_VISIBLE_DEVICES=0")
            })),
            want: &[PARSE, "invalid type: string"],
            shim: true,
        },
        SpecCase {
            name: "an env entry a number",
            bytes: Some(spec_bytes(&gpu, |v| {
                v["process"]["env"].as_array_mut().unwrap().push(json!(7))
            })),
            want: &[PARSE, "invalid type: integer `7`"],
            shim: true,
        },
        SpecCase {
            name: "root.path a number",
            bytes: Some(spec_bytes(&gpu, |v| v["root"]["path"] = json!(1))),
            want: &[PARSE, "invalid type: integer `1`"],
            shim: true,
        },
        SpecCase {
            name: "mounts an object",
            bytes: Some(spec_bytes(&gpu, |v| {
                v["mounts"] = json!({"destination": "/x"})
            })),
            want: &[PARSE, "invalid type: map"],
            shim: true,
        },
        SpecCase {
            name: "an unknown capability",
            bytes: Some(spec_bytes(&gpu, |v| {
                v["process"]["capabilities"]["bounding"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!("CAP_NVCT_FAKE"))
            })),
            want: &[PARSE, "CAP_NVCT_FAKE"],
            shim: true,
        },
        // No stack overflow: serde_json skips an unknown field without recursing.
        SpecCase {
            name: "nested 100 000 deep, unterminated",
            bytes: Some(format!("{{\"x\":{}", "[".repeat(100_000)).into_bytes()),
            want: &[PARSE, "EOF while parsing a list"],
            shim: true,
        },
        SpecCase {
            name: "invalid UTF-8 in an env value",
            bytes: Some(raw_env(&[0xff, 0xfe])),
            want: &[PARSE, "invalid unicode code point"],
            shim: true,
        },
        SpecCase {
            name: "a lone surrogate escape",
            bytes: Some(raw_env(b"\\udcff")),
            want: &[PARSE, "surrogate"],
            shim: true,
        },
        SpecCase {
            name: "huge: over the 16 MiB cap",
            bytes: Some(huge),
            want: &["is larger than 16777216 bytes"],
            shim: true,
        },
        SpecCase {
            name: "endless: a link to /dev/zero",
            bytes: None,
            want: &["is larger than 16777216 bytes"],
            shim: true,
        },
        SpecCase {
            name: "a directory",
            bytes: None,
            want: &["cannot read", "Is a directory"],
            shim: true,
        },
        // Only the hook needs the rootfs (after discovery, before anything is applied).
        SpecCase {
            name: "no root.path",
            bytes: Some(spec_bytes(&gpu, |v| {
                v.as_object_mut().unwrap().remove("root");
            })),
            want: &["has no root.path"],
            shim: false,
        },
    ];
    for case in cases {
        let dir = bundle_dir(case.bytes.as_deref().unwrap_or(b""));
        let config_json = dir.join("config.json");
        if case.bytes.is_none() {
            std::fs::remove_file(&config_json).unwrap();
            if case.name.contains("/dev/zero") {
                std::os::unix::fs::symlink("/dev/zero", &config_json).unwrap();
            } else {
                std::fs::create_dir(&config_json).unwrap();
            }
        }
        let path = config_json.display().to_string();
        let want: Vec<&str> = std::iter::once(path.as_str())
            .chain(case.want.iter().copied())
            .collect();
        hook_must_fail(
            case.name,
            &h.config,
            &dir,
            &state(sleeper.pid(), &dir),
            &want,
        );
        if case.shim {
            shim_must_fail(case.name, &h.shim_config, &dir, &want);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Env values in process.env, and the volume-mount device list
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Layer {
    /// Refused by request.rs: the hook before discovery, and the shim's `create` too.
    Request,
    /// Refused by the planner against the host (ids, requirements): the hook only; the shim
    /// does not discover in legacy mode, so it adds its hook and the hook refuses later.
    Plan,
}

struct EnvCase {
    name: &'static str,
    env: Vec<String>,
    /// Device ids given as volume mounts (`/dev/null` on `/var/run/nvidia-container-devices/ID`),
    /// with a config that accepts them.
    volume_ids: Vec<String>,
    want: String,
    layer: Layer,
}

fn env_case(name: &'static str, env: &[&str], want: &str, layer: Layer) -> EnvCase {
    EnvCase {
        name,
        env: env.iter().map(|s| s.to_string()).collect(),
        volume_ids: vec![],
        want: want.into(),
        layer,
    }
}

#[test]
fn env_cases() {
    use Layer::*;
    let h = host();
    let _serial = serial();
    let sleeper = Sleeper::start();
    let gpu0 = "NVIDIA_VISIBLE_DEVICES=0";
    let many: String = (0..100_000)
        .map(|i| (i % 2).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let many_env = format!("NVIDIA_VISIBLE_DEVICES={many}");
    let bad_req = |expr: &str| format!("cannot parse requirement {expr:?}");
    let not_id = |v: &str| format!("NVIDIA_VISIBLE_DEVICES={v:?}: not a device id");
    let mut cases = vec![
        env_case(
            "100 000 device ids",
            &[&many_env],
            "100000 device ids requested in NVIDIA_VISIBLE_DEVICES; at most 4096",
            Request,
        ),
        env_case(
            "NUL in NVIDIA_VISIBLE_DEVICES",
            &["NVIDIA_VISIBLE_DEVICES=0\0,1"],
            "NVIDIA_VISIBLE_DEVICES contains a NUL byte",
            Request,
        ),
        env_case(
            "NUL in NVIDIA_DRIVER_CAPABILITIES",
            &[gpu0, "NVIDIA_DRIVER_CAPABILITIES=compute\0"],
            "NVIDIA_DRIVER_CAPABILITIES contains a NUL byte",
            Request,
        ),
        env_case(
            "NUL in NVIDIA_REQUIRE_CUDA",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=12.0\0"],
            "NVIDIA_REQUIRE_CUDA contains a NUL byte",
            Request,
        ),
        env_case(
            "NUL in CUDA_VERSION",
            &["CUDA_VERSION=12.0\0"],
            "CUDA_VERSION contains a NUL byte",
            Request,
        ),
        env_case(
            "garbage id",
            &["NVIDIA_VISIBLE_DEVICES=0,gpu1"],
            &not_id("gpu1"),
            Request,
        ),
        env_case(
            "a path as id",
            &["NVIDIA_VISIBLE_DEVICES=../../etc/shadow"],
            &not_id("../../etc/shadow"),
            Request,
        ),
        env_case(
            "negative index",
            &["NVIDIA_VISIBLE_DEVICES=-1"],
            &not_id("-1"),
            Request,
        ),
        env_case(
            "index past u32",
            &["NVIDIA_VISIBLE_DEVICES=4294967296"],
            &not_id("4294967296"),
            Request,
        ),
        env_case(
            "bad MIG index",
            &["NVIDIA_VISIBLE_DEVICES=0:x"],
            &not_id("0:x"),
            Request,
        ),
        env_case(
            "bare GPU- prefix",
            &["NVIDIA_VISIBLE_DEVICES=GPU-"],
            &not_id("GPU-"),
            Request,
        ),
        env_case(
            "a newline in the list",
            &["NVIDIA_VISIBLE_DEVICES=0\n1"],
            &not_id("0\n1"),
            Request,
        ),
        env_case(
            "index not on this host",
            &["NVIDIA_VISIBLE_DEVICES=7"],
            "unknown device \"7\"",
            Plan,
        ),
        env_case(
            "uuid not on this host",
            &["NVIDIA_VISIBLE_DEVICES=GPU-00000000-0000-0000-0000-000000000000"],
            "GPU-00000000-0000-0000-0000-000000000000",
            Plan,
        ),
        env_case(
            "bus id not on this host",
            &["NVIDIA_VISIBLE_DEVICES=0000:ff:00.0"],
            "0000:ff:00.0",
            Plan,
        ),
        env_case(
            "MIG index of a non-MIG GPU",
            &["NVIDIA_VISIBLE_DEVICES=0:1"],
            "0:1",
            Plan,
        ),
        env_case(
            "unknown capability",
            &[gpu0, "NVIDIA_DRIVER_CAPABILITIES=compute,teleport"],
            "unknown capability \"teleport\"",
            Request,
        ),
        env_case(
            "capability in upper case",
            &[gpu0, "NVIDIA_DRIVER_CAPABILITIES=UTILITY"],
            "unknown capability \"UTILITY\"",
            Request,
        ),
        env_case(
            "MIG config unprivileged",
            &[gpu0, "NVIDIA_MIG_CONFIG_DEVICES=all"],
            "NVIDIA_MIG_CONFIG_DEVICES is only honoured for privileged containers",
            Request,
        ),
        env_case(
            "requirement cuda>=",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>="],
            &bad_req("cuda>="),
            Plan,
        ),
        env_case(
            "requirement cuda>=abc",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=abc"],
            &bad_req("cuda>=abc"),
            Plan,
        ),
        env_case(
            "requirement foo>1",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=foo>1"],
            &bad_req("foo>1"),
            Plan,
        ),
        env_case(
            "requirement cuda>>12",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>>12"],
            &bad_req("cuda>>12"),
            Plan,
        ),
        env_case(
            "requirement without a key",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=>=12.0"],
            &bad_req(">=12.0"),
            Plan,
        ),
        env_case(
            "requirement cuda>=12..0",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=12..0"],
            &bad_req("cuda>=12..0"),
            Plan,
        ),
        env_case(
            "requirement version past u64",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=99999999999999999999"],
            &bad_req("cuda>=99999999999999999999"),
            Plan,
        ),
        env_case(
            "requirement driver>=550.x",
            &[gpu0, "NVIDIA_REQUIRE_DRIVER=driver>=550.x"],
            &bad_req("driver>=550.x"),
            Plan,
        ),
        env_case(
            "one bad term among good ones",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=12.0 brand=tesla,cuda~12"],
            &bad_req("cuda>=12.0 brand=tesla,cuda~12"),
            Plan,
        ),
        env_case(
            "unsatisfied cuda",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=99.0"],
            "requirement \"cuda>=99.0\" is not met by this host (driver 550.54.15, cuda 12.4; GPU 0: \
             arch 9.0, brand tesla; not met by GPU 0); run the container on a host that meets it, or set \
             NVIDIA_DISABLE_REQUIRE=true",
            Plan,
        ),
        env_case(
            "unsatisfied alternatives",
            &[gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=13.0 driver<100"],
            "requirement \"cuda>=13.0 driver<100\" is not met",
            Plan,
        ),
        env_case(
            "unsatisfied legacy CUDA_VERSION",
            &["CUDA_VERSION=99.1.0"],
            "requirement \"cuda>=99.1\" is not met",
            Plan,
        ),
    ];
    cases.push(EnvCase {
        name: "100 000 volume-mount ids",
        env: vec![],
        volume_ids: (0..100_000).map(|i| format!("{}", i % 2)).collect(),
        want: "100000 device ids requested in volume mounts".into(),
        layer: Request,
    });
    cases.push(EnvCase {
        name: "garbage volume-mount id",
        env: vec![],
        volume_ids: vec!["0".into(), "gpu1".into()],
        want: "volume mounts=\"gpu1\": not a device id".into(),
        layer: Request,
    });
    for case in cases {
        let mut spec = h.base_spec.clone();
        spec["process"]["env"]
            .as_array_mut()
            .unwrap()
            .extend(case.env.iter().map(|e| json!(e)));
        for id in &case.volume_ids {
            spec["mounts"]
                .as_array_mut()
                .unwrap()
                .push(json!({"destination": format!("/var/run/nvidia-container-devices/{id}"), "source": "/dev/null"}));
        }
        // Compact: 100 000 mounts pretty-printed would pass the 16 MiB cap.
        let dir = bundle_dir(&serde_json::to_vec(&spec).unwrap());
        let (config, shim_config) = if case.volume_ids.is_empty() {
            (&h.config, &h.shim_config)
        } else {
            (&h.volume_config, &h.shim_volume_config)
        };
        hook_must_fail(
            case.name,
            config,
            &dir,
            &state(sleeper.pid(), &dir),
            &[&case.want],
        );
        if case.layer == Request {
            let path = dir.join("config.json").display().to_string();
            shim_must_fail(
                case.name,
                shim_config,
                &dir,
                &[
                    &path,
                    "the container's GPU request is not valid",
                    &case.want,
                ],
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Engine configs: nvidia-ctk runtime configure|unconfigure --config F
// ---------------------------------------------------------------------------------------------

/// What `unconfigure` does with the same file.
#[derive(Clone, Copy, PartialEq)]
enum Unconfigure {
    /// Fails with the same message.
    Fails,
    /// Nothing of ours can be in a subtree of the wrong type: "nothing to change", exit 0,
    /// the file untouched (there is nothing to undo, so nothing to refuse).
    NothingToChange,
    /// Not bad input for unconfigure (it removes an entry of our name whatever it holds).
    NotChecked,
}

struct EngineCase {
    name: &'static str,
    runtime: &'static str,
    file: &'static str,
    content: Vec<u8>,
    /// Besides the file's path.
    want: &'static [&'static str],
    unconfigure: Unconfigure,
}

fn engine_case(
    name: &'static str,
    runtime: &'static str,
    file: &'static str,
    content: &str,
    want: &'static [&'static str],
    unconfigure: Unconfigure,
) -> EngineCase {
    EngineCase {
        name,
        runtime,
        file,
        content: content.as_bytes().to_vec(),
        want,
        unconfigure,
    }
}

#[test]
fn engine_config_cases() {
    use Unconfigure::*;
    let cri = "[plugins.\"io.containerd.grpc.v1.cri\".containerd]";
    let cases = vec![
        engine_case(
            "containerd: invalid TOML",
            "containerd",
            "config.toml",
            "version = 2\n\n[plugins\n",
            &[":3:", "invalid TOML"],
            Fails,
        ),
        engine_case(
            "containerd: duplicate key",
            "containerd",
            "config.toml",
            "version = 2\nversion = 3\n",
            &[":2:", "invalid TOML", "duplicate key"],
            Fails,
        ),
        engine_case(
            "containerd: unknown version",
            "containerd",
            "config.toml",
            "# future\nversion = 7\n",
            &["unsupported containerd config version 7"],
            Fails,
        ),
        engine_case(
            "containerd: version a string",
            "containerd",
            "config.toml",
            "version = \"2\"\n",
            &["unsupported containerd config version \"2\""],
            Fails,
        ),
        engine_case(
            "containerd: version a float",
            "containerd",
            "config.toml",
            "version = 2.5\n",
            &["unsupported containerd config version 2.5"],
            Fails,
        ),
        engine_case(
            "containerd: version a boolean",
            "containerd",
            "config.toml",
            "version = true\n",
            &["unsupported containerd config version true"],
            Fails,
        ),
        engine_case(
            "containerd: Go template",
            "containerd",
            "config.toml",
            "version = 2\n{{ template \"base\" . }}\n",
            &["Go template"],
            Fails,
        ),
        engine_case(
            "containerd: template file name",
            "containerd",
            "config.toml.tmpl",
            "version = 2\n",
            &["Go template"],
            Fails,
        ),
        engine_case(
            "containerd: plugins not a table",
            "containerd",
            "config.toml",
            "version = 2\nplugins = 5\n",
            &["`plugins` is not a table"],
            NothingToChange,
        ),
        EngineCase {
            content: format!("version = 2\n{cri}\nruntimes = [1]\n").into_bytes(),
            ..engine_case(
                "containerd: runtimes not a table",
                "containerd",
                "config.toml",
                "",
                &["`plugins.io.containerd.grpc.v1.cri.containerd.runtimes` is not a table"],
                NothingToChange,
            )
        },
        EngineCase {
            content: format!("version = 2\n{cri}\nruntimes.nvidia = \"x\"\n").into_bytes(),
            ..engine_case(
                "containerd: our entry not a table",
                "containerd",
                "config.toml",
                "",
                &["`plugins.io.containerd.grpc.v1.cri.containerd.runtimes.nvidia` is not a table"],
                NotChecked,
            )
        },
        engine_case(
            "containerd: nested 100 000 deep",
            "containerd",
            "config.toml",
            &format!(
                "version = 2\na = {}{}\n",
                "[".repeat(100_000),
                "]".repeat(100_000)
            ),
            &[":2:", "invalid TOML", "recursion"],
            Fails,
        ),
        EngineCase {
            content: b"version = 2\n# \xff\xfe\n".to_vec(),
            ..engine_case(
                "containerd: not UTF-8",
                "containerd",
                "config.toml",
                "",
                &["valid UTF-8"],
                Fails,
            )
        },
        engine_case(
            "docker: invalid JSON",
            "docker",
            "daemon.json",
            "{\n  \"debug\": true,\n}\n",
            &[":3:", "invalid JSON"],
            Fails,
        ),
        engine_case(
            "docker: trailing garbage",
            "docker",
            "daemon.json",
            "{} x\n",
            &[":1:", "invalid JSON", "trailing characters"],
            Fails,
        ),
        engine_case(
            "docker: not an object",
            "docker",
            "daemon.json",
            "[1, 2]\n",
            &["not a JSON object"],
            Fails,
        ),
        engine_case(
            "docker: null",
            "docker",
            "daemon.json",
            "null\n",
            &["not a JSON object"],
            Fails,
        ),
        engine_case(
            "docker: runtimes not an object",
            "docker",
            "daemon.json",
            "{\"runtimes\": 5}\n",
            &["`runtimes` is not a JSON object"],
            NothingToChange,
        ),
        engine_case(
            "docker: runtimes an array",
            "docker",
            "daemon.json",
            "{\"runtimes\": [\"nvidia\"]}\n",
            &["`runtimes` is not a JSON object"],
            NothingToChange,
        ),
        engine_case(
            "docker: nested 100 000 deep",
            "docker",
            "daemon.json",
            &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
            &["invalid JSON", "recursion limit exceeded"],
            Fails,
        ),
        EngineCase {
            content: b"{\"debug\": \"\xff\"}\n".to_vec(),
            ..engine_case(
                "docker: not UTF-8",
                "docker",
                "daemon.json",
                "",
                &["valid UTF-8"],
                Fails,
            )
        },
        engine_case(
            "crio: invalid TOML",
            "crio",
            "crio.conf",
            "[crio.runtime]\ndefault_runtime = \n",
            &[":2:", "invalid TOML"],
            Fails,
        ),
        engine_case(
            "crio: crio.runtime not a table",
            "crio",
            "crio.conf",
            "[crio]\nruntime = 5\n",
            &["`crio.runtime` is not a table"],
            NothingToChange,
        ),
        engine_case(
            "crio: runtimes not a table",
            "crio",
            "crio.conf",
            "[crio.runtime]\nruntimes = 5\n",
            &["`crio.runtime.runtimes` is not a table"],
            NothingToChange,
        ),
    ];
    // containerd and CRI-O: in place, and with a drop-in next to the file (upstream's default
    // layout; the drop-in must not be written either).
    let layouts = |runtime: &str| -> &'static [&'static str] {
        if runtime == "docker" {
            &["in place"]
        } else {
            &["in place", "drop-in"]
        }
    };
    let combos = cases.iter().flat_map(|case| {
        ["configure", "unconfigure"]
            .into_iter()
            .flat_map(move |cmd| layouts(case.runtime).iter().map(move |l| (case, cmd, *l)))
    });
    for (case, cmd, layout) in combos {
        if cmd == "unconfigure" && case.unconfigure == NotChecked {
            continue;
        }
        let name = format!("{} / {cmd} / {layout}", case.name);
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(case.file);
        std::fs::write(&config, &case.content).unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mtime = std::fs::metadata(&config).unwrap().modified().unwrap();
        let config_s = config.display().to_string();
        let rt = format!("--runtime={}", case.runtime);
        let drop_in = match layout {
            "drop-in" => format!(
                "--drop-in-config={}",
                dir.path().join("conf.d/99-nvidia.toml").display()
            ),
            _ => "--drop-in-config=".to_string(),
        };
        let mut args = vec!["runtime", cmd, &rt, "--config", &config_s, &drop_in];
        if cmd == "configure" {
            args.push("--set-as-default");
        }
        let out = run(CTK, &args, &[], b"");
        if cmd == "unconfigure" && case.unconfigure == NothingToChange {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success()
                    && stderr.contains("nothing to change")
                    && !stderr.contains("panicked"),
                "case {name}: {}",
                out_text(&out)
            );
        } else {
            let want: Vec<&str> = std::iter::once(config_s.as_str())
                .chain(case.want.iter().copied())
                .collect();
            assert_clear_failure(&name, &out, &want);
        }
        assert_eq!(
            std::fs::read(&config).unwrap(),
            case.content,
            "case {name}: bytes changed"
        );
        let meta = std::fs::metadata(&config).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            0o640,
            "case {name}: mode changed"
        );
        assert_eq!(
            meta.modified().unwrap(),
            mtime,
            "case {name}: mtime changed"
        );
        let entries: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            entries,
            [config.file_name().unwrap()],
            "case {name}: other files were left in the directory"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// CDI specs: nvidia-ctk cdi validate F, nvidia-ctk cdi list --spec-dir D
// ---------------------------------------------------------------------------------------------

struct CdiCase {
    name: &'static str,
    /// File name (its extension decides whether `cdi list` reads it).
    file: &'static str,
    content: Vec<u8>,
    /// The problem, as `validate` prints it after `FILE: ` and `list` after `FILE: skipped: `.
    want: &'static str,
}

fn cdi_case(name: &'static str, file: &'static str, content: &str, want: &'static str) -> CdiCase {
    CdiCase {
        name,
        file,
        content: content.as_bytes().to_vec(),
        want,
    }
}

const GOOD_SPEC: &str = "cdiVersion: 0.5.0\nkind: example.com/good\ndevices:\n- name: one\n  containerEdits:\n    env: [A=1]\n";

#[test]
fn cdi_spec_cases() {
    let bomb = {
        let mut s = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for (i, c) in "bcdefghij".chars().enumerate() {
            let prev = (b'a' + i as u8) as char;
            s += &format!("{c}: &{c} [{}]\n", vec![format!("*{prev}"); 9].join(", "));
        }
        s
    };
    let mut huge = GOOD_SPEC.replace("good", "huge").into_bytes();
    huge.extend(b"# ");
    huge.resize((64 << 20) + 1, b'x');
    huge.push(b'\n');
    let dev = |edits: &str| {
        format!("cdiVersion: 0.5.0\nkind: example.com/bad\ndevices:\n- name: a\n  containerEdits: {edits}\n")
    };
    let cases = vec![
        cdi_case("not YAML", "bad.yaml", "kind: [broken\n", "not YAML or JSON: did not find expected ',' or ']'"),
        cdi_case("not JSON", "bad.json", "{\"cdiVersion\": \"0.5.0\",", "not YAML or JSON"),
        cdi_case("empty file", "bad.yaml", "", "a CDI spec must be an object, not null"),
        cdi_case("a list", "bad.yaml", "- 1\n- 2\n", "a CDI spec must be an object, not an array"),
        cdi_case("unknown cdiVersion", "bad.yaml", "cdiVersion: 9.9.9\nkind: example.com/bad\ndevices: []\n", "cdiVersion: unknown version \"9.9.9\""),
        cdi_case("cdiVersion a number", "bad.yaml", "cdiVersion: 5\nkind: example.com/bad\ndevices: []\n", "cdiVersion: must be a string, not a number"),
        cdi_case("kind without a class", "bad.yaml", "cdiVersion: 0.5.0\nkind: example.com\ndevices: []\n", "kind: \"example.com\" is not a CDI kind"),
        cdi_case("kind with two slashes", "bad.yaml", "cdiVersion: 0.5.0\nkind: a.com/b/c\ndevices: []\n", "kind: class \"b/c\" contains '/'"),
        cdi_case("missing kind", "bad.yaml", "cdiVersion: 0.5.0\ndevices: []\n", "kind: is required"),
        cdi_case("missing cdiVersion", "bad.yaml", "kind: example.com/bad\ndevices: []\n", "cdiVersion: is required"),
        cdi_case("missing devices", "bad.yaml", "cdiVersion: 0.5.0\nkind: example.com/bad\n", "devices: is required"),
        cdi_case(
            "device without containerEdits",
            "bad.yaml",
            "cdiVersion: 0.5.0\nkind: example.com/bad\ndevices:\n- name: a\n",
            "devices[0].containerEdits: is required",
        ),
        cdi_case(
            "device name with a slash",
            "bad.yaml",
            "cdiVersion: 0.5.0\nkind: example.com/bad\ndevices:\n- name: a/b\n  containerEdits: {}\n",
            "devices[0].name: device name \"a/b\" contains '/'",
        ),
        cdi_case(
            "duplicate device names",
            "bad.yaml",
            "cdiVersion: 0.5.0\nkind: example.com/bad\ndevices:\n- name: a\n  containerEdits: {env: [A=1]}\n- name: a\n  containerEdits: {env: [A=2]}\n",
            "devices[1].name: \"a\" is already the name of devices[0]",
        ),
        cdi_case("device node without path", "bad.yaml", &dev("{deviceNodes: [{type: c}]}"), "devices[0].containerEdits.deviceNodes[0].path: is required"),
        cdi_case(
            "hook with an unknown name",
            "bad.yaml",
            &dev("{hooks: [{hookName: preStart, path: /bin/true}]}"),
            "devices[0].containerEdits.hooks[0].hookName: unknown hook \"preStart\"",
        ),
        cdi_case("YAML alias bomb", "bad.yaml", &bomb, "not YAML or JSON: repetition limit exceeded"),
        cdi_case("nested 100 000 deep", "bad.yaml", &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)), "not YAML or JSON: recursion limit exceeded"),
        CdiCase { content: b"cdiVersion: 0.5.0\nkind: example.com/bad\n# \xff\n".to_vec(), ..cdi_case("not UTF-8", "bad.yaml", "", "not UTF-8") },
        CdiCase { content: huge, ..cdi_case("huge: over the 64 MiB cap", "huge.yaml", "", "a spec file may have") },
        cdi_case(
            "annotation value a list",
            "bad.yaml",
            "cdiVersion: 0.6.0\nkind: example.com/bad\nannotations: {a: [1]}\ndevices: []\n",
            "annotations[\"a\"]: must be a string, not an array",
        ),
        cdi_case(
            "device node uid above uint32",
            "bad.yaml",
            &dev("{deviceNodes: [{path: /dev/null, uid: 4294967296}]}"),
            "devices[0].containerEdits.deviceNodes[0].uid: must be an integer from 0 to 4294967295, not 4294967296",
        ),
    ];
    for case in cases {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(case.file);
        std::fs::write(&file, &case.content).unwrap();
        std::fs::write(dir.path().join("good.yaml"), GOOD_SPEC).unwrap();
        let file_s = file.display().to_string();
        let before = snapshot(dir.path());

        let out = run(CTK, &["cdi", "validate", &file_s], &[], b"");
        assert_clear_failure(
            &format!("{} / validate", case.name),
            &out,
            &[&format!("{file_s}: "), case.want],
        );

        // `cdi list` skips a broken file with a warning naming it (by design: src/cdi/list.rs)
        // and still lists the good ones; it exits 0.
        let out = run(
            CTK,
            &["cdi", "list", "--spec-dir", dir.path().to_str().unwrap()],
            &[],
            b"",
        );
        let text = format!("case {} / list: {}", case.name, out_text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("panicked"),
            "{text}"
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "example.com/good=one\n",
            "{text}"
        );
        assert!(
            stderr.contains(&format!("nvidia-ctk: warning: {file_s}: skipped: "))
                && stderr.contains(case.want),
            "{text}"
        );
        assert!(
            snapshot(dir.path()) == before,
            "case {}: the spec directory changed",
            case.name
        );
    }
}

// ---------------------------------------------------------------------------------------------
// ld.so.cache bytes in the driver root
// ---------------------------------------------------------------------------------------------

struct CacheCase {
    name: &'static str,
    /// Makes `etc/ld.so.cache` from the real cache's bytes (`None`: set up in the loop).
    bytes: Option<Vec<u8>>,
    /// What the hook logs after "no usable ld cache in the driver root: ".
    want: String,
}

/// Offsets in a new-format cache (src/ldcache.rs): the entry count, the byte-order flags, and
/// entry 0's soname offset.
const NLIBS_AT: usize = 20;
const FLAGS_AT: usize = 28;
const ENTRY0_KEY_AT: usize = 48 + 4;

fn patched(real: &[u8], at: usize, with: &[u8]) -> Vec<u8> {
    let mut b = real.to_vec();
    b[at..at + with.len()].copy_from_slice(with);
    b
}

fn ld_cache_cases() {
    // Its own host: every case replaces the driver root's cache.
    let _serial = serial();
    bundle::require_root();
    bundle::require("runc");
    let (dir, host) = bundle::scratch_host("nvct-bad-ldcache-", 2);
    let log = dir.join("hook.log");
    let config = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
    // The last table of the file is [nvidia-container-cli]: its debug log.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&config)
        .unwrap()
        .write_all(format!("debug = {:?}\n", log.display().to_string()).as_bytes())
        .unwrap();
    let cache = host.driver_root().join("etc/ld.so.cache");
    let real = std::fs::read(&cache).unwrap();
    assert!(
        real.starts_with(b"glibc-ld.so.cache1.1"),
        "the host's ldconfig wrote an unexpected format"
    );
    let nlibs = u32::from_le_bytes(real[NLIBS_AT..NLIBS_AT + 4].try_into().unwrap());
    let key0 =
        u32::from_le_bytes(real[ENTRY0_KEY_AT..ENTRY0_KEY_AT + 4].try_into().unwrap()) as usize;
    let mut unterminated = patched(&real, ENTRY0_KEY_AT, &(real.len() as u32 - 1).to_le_bytes());
    *unterminated.last_mut().unwrap() = b'x';
    let malformed = |what: &str| format!("malformed ld.so cache {}: {what}", cache.display());
    let cases = vec![
        CacheCase {
            name: "empty",
            bytes: Some(vec![]),
            want: malformed("file is empty"),
        },
        CacheCase {
            name: "wrong magic",
            bytes: Some(patched(&real, 0, b"GLIBC")),
            want: malformed("unknown magic"),
        },
        CacheCase {
            name: "truncated in the magic",
            bytes: Some(real[..5].to_vec()),
            want: malformed("truncated: magic at offset 0"),
        },
        CacheCase {
            name: "truncated in the header",
            bytes: Some(real[..30].to_vec()),
            want: malformed("truncated: new-format header at offset 0 needs 48 bytes, file has 30"),
        },
        CacheCase {
            name: "truncated in the entries",
            bytes: Some(real[..60].to_vec()),
            want: malformed(&format!(
                "{nlibs} entries of 24 bytes at offset 48 do not fit in the 60-byte file"
            )),
        },
        CacheCase {
            name: "unknown version",
            bytes: Some(patched(&real, 17, b"9.9")),
            want: malformed("unsupported new-format version \"9.9\""),
        },
        CacheCase {
            name: "big-endian flag",
            bytes: Some(patched(&real, FLAGS_AT, &[1])),
            want: malformed("unsupported byte order"),
        },
        CacheCase {
            name: "count that overflows",
            bytes: Some(patched(&real, NLIBS_AT, &u32::MAX.to_le_bytes())),
            want: malformed("4294967295 entries of 24 bytes"),
        },
        CacheCase {
            name: "string offset out of bounds",
            bytes: Some(patched(&real, ENTRY0_KEY_AT, &0xffff_fff0u32.to_le_bytes())),
            want: malformed("entry 0: soname string offset"),
        },
        CacheCase {
            name: "string without a NUL",
            bytes: Some(unterminated),
            want: malformed("entry 0: soname string at offset"),
        },
        CacheCase {
            name: "soname not UTF-8",
            bytes: Some(patched(&real, key0, &[0xff])),
            want: malformed(&format!("entry 0: soname at offset {key0} is not UTF-8")),
        },
        CacheCase {
            name: "a directory",
            bytes: None,
            want: format!("cannot read ld.so cache {}", cache.display()),
        },
        CacheCase {
            name: "endless: a link to /dev/zero",
            bytes: None,
            want: format!(
                "ld.so cache {} is larger than the 67108864-byte limit",
                cache.display()
            ),
        },
    ];
    for case in cases {
        let _ = std::fs::remove_file(&cache);
        let _ = std::fs::remove_dir(&cache);
        match &case.bytes {
            Some(b) => std::fs::write(&cache, b).unwrap(),
            None if case.name.contains("/dev/zero") => {
                std::os::unix::fs::symlink("/dev/zero", &cache).unwrap()
            }
            None => std::fs::create_dir(&cache).unwrap(),
        }
        std::fs::write(&log, b"").unwrap();
        let before = snapshot(&host.driver_root());
        let mut b = Bundle::new(&dir, Image::Busybox);
        b.hook(&config).env("NVIDIA_VISIBLE_DEVICES=1");
        // Bundle::run also asserts the host mount table is unchanged across the container.
        let out = b.run(
            "ls /dev/nvidia1 /dev/nvidia0 2>&1; test -e /usr/lib64/libcuda.so.550.54.15 && test -e /usr/lib64/libnvidia-ml.so.550.54.15 && echo LIBS",
        );
        let log_text = std::fs::read_to_string(&log).unwrap();
        let text = format!(
            "case {}: {}\n--- hook log\n{log_text}",
            case.name,
            out_text(&out)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && !text.contains("panicked"), "{text}");
        assert!(
            stdout.contains("/dev/nvidia1\n") && stdout.contains("/dev/nvidia0: No such file"),
            "only GPU 1, found by the lib-dir scan: {text}"
        );
        assert!(
            stdout.contains("LIBS"),
            "libraries found by scanning the lib dirs: {text}"
        );
        // The log is logrus text: the message is a JSON string (quotes escaped).
        let want_msg = serde_json::to_string(&format!(
            "no usable ld cache in the driver root: {}",
            case.want
        ))
        .unwrap();
        assert!(
            log_text.contains(want_msg.trim_matches('"')),
            "the hook must say why the cache was not used: {text}"
        );
        assert!(
            snapshot(&host.driver_root()) == before,
            "case {}: the driver root changed",
            case.name
        );
    }
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// the ld cache step on broken caches.
    ld_cache_cases,
}

/// The node commands' bad inputs met on arrival (issue 34): each is refused with exit 1, the
/// message names the thing and the fix, and nothing is written: the config file keeps its
/// bytes, a mistyped root is not created, a spec is not written onto a read-only file system.
#[test]
fn node_command_cases() {
    let h = host();
    let work = h.dir.join("node-commands");
    std::fs::create_dir_all(&work).unwrap();
    let driver = h.dir.join("host/driver");
    let proc = h.dir.join("host/proc");
    // (case, setup writing what the command reads, args, what stderr must name, what must stay)
    type Setup = fn(&Path) -> PathBuf;
    let cases: Vec<(&str, Setup, Vec<String>, &[&str])> = vec![
        (
            "config --set of no low-level runtime",
            |w| {
                let f = w.join("runtimes.toml");
                std::fs::write(&f, "[nvidia-container-runtime]\nruntimes = [\"runc\"]\n").unwrap();
                f
            },
            vec![
                "--set".into(),
                "nvidia-container-runtime.runtimes=".into(),
                "--in-place".into(),
            ],
            &[
                "nvidia-container-runtime.runtimes",
                "no low-level runtime",
                "runc,crun",
            ],
        ),
        (
            "a table given twice",
            |w| {
                let f = w.join("dup.toml");
                std::fs::write(&f, "[nvidia-container-cli]\nroot = \"/\"\n\n[nvidia-container-cli]\ndebug = \"/tmp/x\"\n").unwrap();
                f
            },
            vec![
                "--set".into(),
                "swarm-resource=x".into(),
                "--in-place".into(),
            ],
            &[
                "dup.toml:4",
                "the table [nvidia-container-cli] is given twice",
            ],
        ),
    ];
    for (name, setup, args, want) in cases {
        let file = setup(&work);
        let before = std::fs::read(&file).unwrap();
        let mut all = vec![
            "config".to_string(),
            "--config-file".into(),
            file.display().to_string(),
        ];
        all.extend(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = run(CTK, &all, &[], b"");
        assert_clear_failure(name, &out, want);
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "case {name}: the file changed"
        );
    }

    // A mistyped root: refused, not created.
    for flag in ["--dev-root", "--driver-root"] {
        let typo = work.join(format!("typo{flag}"));
        let arg = format!("{flag}={}", typo.display());
        let proc_arg = format!("--proc-root={}", proc.display());
        let out = run(
            CTK,
            &[
                "system",
                "create-dev-char-symlinks",
                "--create-all",
                &arg,
                &proc_arg,
            ],
            &[],
            b"",
        );
        assert_clear_failure(flag, &out, &[flag, "no such directory"]);
        assert!(!typo.exists(), "{flag}: {} was created", typo.display());
    }

    // `cdi generate --output` onto a read-only file system names --output (not --config).
    let ro = work.join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let mount = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
        .arg(&ro)
        .output()
        .unwrap();
    assert!(mount.status.success(), "mount: {}", out_text(&mount));
    let output = ro.join("nvidia.yaml");
    let out = run(
        CTK,
        &[
            "cdi",
            "generate",
            &format!("--driver-root={}", driver.display()),
            &format!("--proc-root={}", proc.display()),
            &format!("--output={}", output.display()),
        ],
        &[],
        b"",
    );
    let _ = Command::new("umount").arg(&ro).output();
    assert_clear_failure(
        "cdi generate onto a read-only file system",
        &out,
        &["--output", "read-only", "nothing was changed"],
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("--config"),
        "names --config: {}",
        out_text(&out)
    );
}
