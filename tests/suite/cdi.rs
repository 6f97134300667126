//! `nvidia-ctk cdi generate|list|validate` end to end: the real binary against simulated GPU
//! hosts (tests/suite/common/fakehost.rs), generated specs checked by our validator (which holds the
//! CDI JSON schema's rules, src/cdi/validate.rs) and `cdi validate`, and real podman
//! containers given GPUs through CDI.
//!
//! podman 4.3 has no `--cdi-spec-dir`: the podman tests write their spec to
//! `/etc/cdi/nvct-test-<pid>-<n>.yaml` with a kind unique to the test (`nvidia.com/t<pid>n<n>`,
//! so that a concurrent test run or a real NVIDIA spec in /etc/cdi never conflicts with it) and
//! remove it in a Drop guard.

use crate::common::bundle::{self, Bundle, Image};
use crate::common::fakehost::{self, FakeHost};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

const CTK: &str = env!("CARGO_BIN_EXE_nvidia-ctk");

fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("nvct-cdi-")
            .tempdir()
            .unwrap()
            .keep()
    })
}

fn unique(prefix: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    scratch().join(format!("{prefix}-{}", N.fetch_add(1, Ordering::SeqCst)))
}

/// Fake hosts by shape (gpus, mig), built once per test binary.
fn host(gpus: u32, mig: bool) -> FakeHost {
    static HOSTS: OnceLock<Mutex<BTreeMap<(u32, bool), FakeHost>>> = OnceLock::new();
    bundle::require_root();
    let mut hosts = HOSTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    hosts
        .entry((gpus, mig))
        .or_insert_with(|| {
            FakeHost::builder()
                .gpus(gpus)
                .mig(mig)
                .build(&scratch().join(format!("host-{gpus}-{mig}")))
                .unwrap_or_else(|e| panic!("cannot build a fake host ({e}); run `cargo build --examples` and scripts/install-deps.sh first"))
        })
        .clone()
}

fn out_text(cmd: &Command, out: &Output) -> String {
    format!(
        "{cmd:?}\nstatus {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs nvidia-ctk; returns (success, stdout, stderr, full context for messages).
fn ctk(args: &[&str]) -> (bool, String, String, String) {
    let mut cmd = Command::new(CTK);
    cmd.args(args);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {CTK}: {e}"));
    let text = out_text(&cmd, &out);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
        text,
    )
}

fn root_args(h: &FakeHost) -> Vec<String> {
    let s = |p: PathBuf| p.display().to_string();
    vec![
        "--driver-root".into(),
        s(h.driver_root()),
        "--dev-root".into(),
        s(h.dev_root()),
        "--proc-root".into(),
        s(h.proc_root()),
    ]
}

/// `cdi generate` on `h` with extra flags; the spec text (stdout), panicking with context on failure.
fn generate(h: &FakeHost, extra: &[&str]) -> String {
    let mut args: Vec<String> = vec!["cdi".into(), "generate".into()];
    args.extend(root_args(h));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, stdout, _, text) = ctk(&args);
    assert!(ok, "{text}");
    stdout
}

fn parse(text: &str) -> Value {
    serde_norway::from_str(text).unwrap_or_else(|e| panic!("spec is not YAML/JSON: {e}\n{text}"))
}

/// Our validator's document checks (`nvct_cdi::validate::schema`: every rule of the CDI JSON
/// schema and more; its table is `validate.rs`'s `schema_rules`), as strings.
fn schema_errors(doc: &Value) -> Vec<String> {
    nvct_cdi::validate::schema(doc)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn generated_specs_pass_our_validator_and_cdi_validate() {
    // The validator is not vacuous: it refuses a spec without kind and a mount without
    // containerPath, each for its reason.
    for (bad, why) in [
        (
            json!({"cdiVersion": "0.5.0", "devices": []}),
            "kind: is required",
        ),
        (
            json!({"cdiVersion": "0.5.0", "kind": "a.b/c", "devices": [], "containerEdits": {"mounts": [{"hostPath": "/x"}]}}),
            "containerEdits.mounts[0].containerPath: is required",
        ),
    ] {
        assert_eq!(schema_errors(&bad), [why], "{bad}");
    }
    for (gpus, mig) in [(1, false), (8, false), (64, false), (8, true)] {
        let h = host(gpus, mig);
        for format in ["json", "yaml"] {
            let file = unique("spec").with_extension(format);
            let file_s = file.display().to_string();
            generate(
                &h,
                &[
                    "--device-name-strategy",
                    "index",
                    "--device-name-strategy",
                    "uuid",
                    "--device-name-strategy",
                    "type-index",
                    "--output",
                    &file_s,
                ],
            );
            let text = std::fs::read_to_string(&file).unwrap();
            if format == "json" {
                serde_json::from_str::<Value>(&text)
                    .unwrap_or_else(|e| panic!("{gpus} GPUs: --output *.json must be JSON: {e}"));
            } else {
                assert!(
                    text.starts_with("---\n"),
                    "{gpus} GPUs: YAML document expected:\n{text}"
                );
            }
            let doc = parse(&text);
            let errors = schema_errors(&doc);
            assert!(
                errors.is_empty(),
                "{gpus} GPUs, mig {mig}, {format}: {errors:#?}\n{text}"
            );
            // A GPU in MIG mode (GPU 0 of the MIG host, with 2 MIG devices) is not a device.
            let (whole, migs) = if mig { (gpus - 1, 2) } else { (gpus, 0) };
            let want_devices = 3 * (whole as usize + migs) + 1;
            assert_eq!(
                doc["devices"].as_array().unwrap().len(),
                want_devices,
                "{gpus} GPUs, mig {mig}, {format}"
            );
            let (ok, _, _, out) = ctk(&["cdi", "validate", &file_s]);
            assert!(ok, "our own validate accepts the generated spec: {out}");
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777,
                0o644,
                "{file_s}"
            );
        }
    }
}

#[test]
fn same_host_same_bytes() {
    let h = host(8, true);
    for format in ["yaml", "json"] {
        let a = generate(&h, &["--format", format]);
        let b = generate(&h, &["--format", format]);
        assert!(!a.is_empty());
        assert_eq!(a, b, "{format}: two runs must give the same bytes");
    }
}

#[test]
fn two_gpu_host_names_and_shared_edits() {
    let h = host(2, false);
    let doc = parse(&generate(&h, &[]));
    let (u0, u1) = (h.gpus()[0].uuid.as_str(), h.gpus()[1].uuid.as_str());
    let names: Vec<&str> = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["0", u0, "1", u1, "all"]);
    assert_eq!(doc["cdiVersion"], "0.5.0");
    assert_eq!(doc["kind"], "nvidia.com/gpu");
    let dev = h.dev_root().join("dev").display().to_string();
    // As upstream's: cgroup access with mknod, and the host node's mode.
    let node = |name: &str, major: u32, minor: u32| {
        use std::os::unix::fs::PermissionsExt;
        let host_path = format!("{dev}/{name}");
        let mode = std::fs::metadata(&host_path).unwrap().permissions().mode() & 0o7777;
        json!({"path": format!("/dev/{name}"), "hostPath": host_path, "type": "c", "major": major, "minor": minor, "permissions": "rwm", "fileMode": mode})
    };
    // Each GPU's own nodes: /dev/nvidiaN and its DRM card and render nodes (as upstream's),
    // with a create-symlinks hook for their /dev/dri/by-path links.
    let links = |indices: &[u32]| {
        let mut pairs = Vec::new();
        for i in indices {
            let (card, render) = FakeHost::drm_names(*i);
            let bus = &h.gpus()[*i as usize].bus_id;
            pairs.push(format!("../{card}::/dev/dri/by-path/pci-{bus}-card"));
            pairs.push(format!("../{render}::/dev/dri/by-path/pci-{bus}-render"));
        }
        pairs.sort(); // by target
        let mut args = vec![json!("nvidia-cdi-hook"), json!("create-symlinks")];
        for p in pairs {
            args.extend([json!("--link"), json!(p)]);
        }
        json!([{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook", "args": args,
                "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}])
    };
    assert_eq!(
        doc["devices"][0]["containerEdits"],
        json!({"deviceNodes": [node("dri/card1", 226, 1), node("dri/renderD128", 226, 128), node("nvidia0", 195, 0)],
               "hooks": links(&[0])})
    );
    assert_eq!(
        doc["devices"][4]["containerEdits"],
        json!({"deviceNodes": [
                node("dri/card1", 226, 1), node("dri/card2", 226, 2),
                node("dri/renderD128", 226, 128), node("dri/renderD129", 226, 129),
                node("nvidia0", 195, 0), node("nvidia1", 195, 1)],
               "hooks": links(&[0, 1])})
    );

    let edits = &doc["containerEdits"];
    assert_eq!(
        edits["env"],
        json!([
            "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu",
            "NVIDIA_VISIBLE_DEVICES=void"
        ])
    );
    assert_eq!(
        edits["deviceNodes"],
        json!([
            node("nvidia-modeset", 195, 254),
            node("nvidia-uvm", 508, 0),
            node("nvidia-uvm-tools", 508, 1),
            node("nvidiactl", 195, 255)
        ])
    );
    let lib = "/usr/lib/x86_64-linux-gnu";
    // The OpenCL ICD file (compute), then the firmware.
    let mut want_targets: Vec<String> = vec!["/etc/OpenCL/vendors/nvidia.icd".into()];
    want_targets.extend(
        ["gsp_ga10x.bin", "gsp_tu10x.bin"]
            .iter()
            .map(|f| format!("/lib/firmware/nvidia/550.54.15/{f}")),
    );
    // The daemons' IPC sockets and the MPS pipe dir the fake host has (mounted noexec).
    let ipc = [
        "/run/nvidia-fabricmanager/socket",
        "/run/nvidia-persistenced/socket",
        "/tmp/nvidia-mps",
    ];
    want_targets.extend(ipc.map(String::from));
    want_targets.extend(
        [
            "nvidia-cuda-mps-control",
            "nvidia-cuda-mps-server",
            "nvidia-debugdump",
            "nvidia-persistenced",
            "nvidia-smi",
            "nvidia-xconfig",
        ]
        .iter()
        .map(|b| format!("/usr/bin/{b}")),
    );
    want_targets.extend(
        [
            "libEGL_nvidia",
            "libGLX_nvidia",
            "libcuda",
            "libcudadebugger",
            "libnvcuvid",
            "libnvidia-allocator",
            "libnvidia-cfg",
            "libnvidia-eglcore",
            "libnvidia-encode",
            "libnvidia-glcore",
            "libnvidia-gpucomp",
            "libnvidia-ml",
            "libnvidia-nscq",
            "libnvidia-nvvm",
            "libnvidia-opencl",
            "libnvidia-ptxjitcompiler",
        ]
        .iter()
        .map(|l| format!("{lib}/{l}.so.550.54.15")),
    );
    // The VDPAU backend in the driver's vdpau/ directory (video), as upstream's.
    want_targets.push(format!("{lib}/vdpau/libvdpau_nvidia.so.550.54.15"));
    // The EGL external platforms, versioned apart from the driver (sorted in after cfg).
    let at = want_targets
        .iter()
        .position(|t| t.ends_with("libnvidia-cfg.so.550.54.15"))
        .unwrap()
        + 1;
    for (i, (name, version, _)) in crate::common::fakehost::STUB_OWN_VERSION_LIBS
        .iter()
        .enumerate()
    {
        want_targets.insert(at + i, format!("{lib}/{name}.so.{version}"));
    }
    // The graphics and display config files, at their own paths.
    want_targets.extend(
        [
            "/usr/lib/xorg/modules/drivers/nvidia_drv.so",
            "/usr/share/X11/xorg.conf.d/10-nvidia.conf",
            "/usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json",
            "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
            "/usr/share/nvidia/nvoptix.bin",
            "/usr/share/vulkan/icd.d/nvidia_icd.json",
            "/usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
        ]
        .map(String::from),
    );
    let mounts = edits["mounts"].as_array().unwrap();
    let targets: Vec<&str> = mounts
        .iter()
        .map(|m| m["containerPath"].as_str().unwrap())
        .collect();
    assert_eq!(targets, want_targets);
    for m in mounts {
        let target = m["containerPath"].as_str().unwrap();
        assert_eq!(
            m["hostPath"],
            h.driver_root().join(&target[1..]).display().to_string(),
            "{m}"
        );
        let mut options = json!(["ro", "nosuid", "nodev", "bind"]);
        if ipc.contains(&target) {
            options.as_array_mut().unwrap().push(json!("noexec"));
        }
        assert_eq!(m["options"], options, "{m}");
    }
    let env = json!(["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]);
    let hook = |args: Value| json!({"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook", "args": args, "env": env});
    // By default one apply-edits hook does every edit in one process, in this order.
    assert_eq!(
        edits["hooks"],
        json!([hook(json!([
            "nvidia-cdi-hook",
            "apply-edits",
            "--create-symlinks",
            "--link",
            format!("../libnvidia-allocator.so.1::{lib}/gbm/nvidia-drm_gbm.so"),
            "--link",
            format!("libGLX_nvidia.so.550.54.15::{lib}/libGLX_indirect.so.0"),
            "--link",
            format!("libcuda.so.1::{lib}/libcuda.so"),
            "--disable-device-node-modification",
            "--proc-root",
            h.proc_root(),
            "--enable-cuda-compat",
            "--host-driver-version",
            "550.54.15",
            "--update-ldcache",
            "--folder",
            lib,
            "--folder",
            format!("{lib}/vdpau"),
            "--update-application-profile"
        ]))])
    );
    // With --separate-hooks, upstream's hooks, one per edit.
    let doc = parse(&generate(&h, &["--separate-hooks"]));
    assert_eq!(
        doc["containerEdits"]["hooks"],
        json!([
            hook(json!([
                "nvidia-cdi-hook",
                "create-symlinks",
                "--link",
                format!("../libnvidia-allocator.so.1::{lib}/gbm/nvidia-drm_gbm.so"),
                "--link",
                format!("libGLX_nvidia.so.550.54.15::{lib}/libGLX_indirect.so.0"),
                "--link",
                format!("libcuda.so.1::{lib}/libcuda.so")
            ])),
            hook(json!([
                "nvidia-cdi-hook",
                "disable-device-node-modification",
                "--proc-root",
                h.proc_root()
            ])),
            hook(json!([
                "nvidia-cdi-hook",
                "enable-cuda-compat",
                "--host-driver-version",
                "550.54.15"
            ])),
            hook(json!([
                "nvidia-cdi-hook",
                "update-ldcache",
                "--folder",
                lib,
                "--folder",
                format!("{lib}/vdpau")
            ])),
            hook(json!(["nvidia-cdi-hook", "update-application-profile"])),
        ])
    );
}

#[test]
fn flags_cases() {
    let h = host(2, true);
    let names = |extra: &[&str]| -> Vec<String> {
        let doc = parse(&generate(&h, extra));
        doc["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect()
    };
    let mig0 = h.gpus()[0].migs[0].uuid.clone();
    let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        (
            "type-index",
            vec!["--device-name-strategy", "type-index"],
            // GPU 0 is in MIG mode: only its MIG devices are devices, as upstream's.
            vec!["mig0:0", "mig0:1", "gpu1", "all"],
        ),
        (
            "a GPU in MIG mode named by --device-id is still given",
            vec!["--device-name-strategy", "index", "--device-id", "0"],
            vec!["0", "all"],
        ),
        (
            "one device id",
            vec!["--device-name-strategy", "index", "--device-id", "1"],
            vec!["1", "all"],
        ),
        (
            "MIG uuid id",
            vec!["--device-name-strategy", "index", "--device-id", &mig0],
            vec!["0:0", "all"],
        ),
        (
            "no all device",
            vec![
                "--device-name-strategy",
                "index",
                "--device-id",
                "1",
                "--no-all-device",
            ],
            vec!["1"],
        ),
    ];
    for (case, extra, want) in cases {
        assert_eq!(names(&extra), want, "case {case}");
    }
    let doc = parse(&generate(
        &h,
        &[
            "--vendor",
            "example.com",
            "--class",
            "acc",
            "--disable-hook",
            "all",
            "--format",
            "json",
        ],
    ));
    assert_eq!(doc["kind"], "example.com/acc");
    assert!(
        doc["containerEdits"].get("hooks").is_none(),
        "--disable-hook all: {doc}"
    );

    let mut args: Vec<String> = vec!["cdi".into(), "generate".into()];
    args.extend(root_args(&h));
    for (case, bad, needle) in [
        (
            "unknown device",
            vec!["--device-id", "9"],
            "--device-id \"9\" matches no GPU",
        ),
        (
            "bad class",
            vec!["--class", "a.b"],
            "class \"a.b\" contains '.'",
        ),
    ] {
        let all: Vec<&str> = args.iter().map(String::as_str).chain(bad).collect();
        let (ok, _, stderr, text) = ctk(&all);
        assert!(!ok, "case {case}: {text}");
        assert!(stderr.contains(needle), "case {case}: {text}");
    }
}

/// `cdi generate` with `env` set and `args` (after `cdi generate`), every other `NVIDIA_CTK_*`
/// variable of this process removed: (success, stdout, stderr, context).
/// `cdi generate` on `h` with `args` fails, saying `needle`.
fn generate_fails(h: &FakeHost, args: &[&str], needle: &str) {
    let mut all: Vec<String> = vec![
        "--driver-root".into(),
        h.driver_root().display().to_string(),
        "--proc-root".into(),
        h.proc_root().display().to_string(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    let (ok, _, stderr, text) = generate_with_env(&[], &all);
    assert!(!ok && stderr.contains(needle), "{args:?}: {text}");
}

fn generate_with_env(env: &[(&str, String)], args: &[String]) -> (bool, String, String, String) {
    let mut cmd = Command::new(CTK);
    for (k, _) in std::env::vars() {
        if k.starts_with("NVIDIA_CTK_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(["cdi", "generate"])
        .args(args)
        .envs(env.iter().cloned());
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {CTK}: {e}"));
    let text = out_text(&cmd, &out);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
        text,
    )
}

/// The variables nvidia-cdi-refresh.service and its env file set (upstream's names) act as their
/// flags; the flag on the command line wins; an empty variable is unset; lists are
/// comma-separated.
#[test]
fn environment_variables_cases() {
    let h = host(2, false);
    let s = |p: &Path| p.display().to_string();
    let (driver, proc) = (s(&h.driver_root()), s(&h.proc_root()));
    // A dev root of its own (its dev/ a link to the host's): the spec's node paths show which
    // root was used.
    let dev_root = unique("devroot");
    std::fs::create_dir_all(&dev_root).unwrap();
    std::os::unix::fs::symlink(h.dev_root().join("dev"), dev_root.join("dev")).unwrap();
    let dev_root = s(&dev_root);
    let (u0, u1) = (h.gpus()[0].uuid.as_str(), h.gpus()[1].uuid.as_str());

    // What a case looks at in the spec text.
    fn names(text: &str) -> Value {
        parse(text)["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].clone())
            .collect()
    }
    fn kind(text: &str) -> Value {
        parse(text)["kind"].clone()
    }
    fn hooks(text: &str) -> Value {
        let doc = parse(text);
        let hooks = doc["containerEdits"]["hooks"].as_array().cloned();
        hooks
            .unwrap_or_default()
            .iter()
            .map(|h| json!([h["path"], h["args"][1]]))
            .collect()
    }
    fn ldcache_args(text: &str) -> Value {
        let doc = parse(text);
        let hooks = doc["containerEdits"]["hooks"].as_array().unwrap().clone();
        hooks
            .into_iter()
            .find(|h| h["args"][1] == "update-ldcache")
            .map(|h| h["args"].clone())
            .unwrap_or_default()
    }
    fn node_path(text: &str) -> Value {
        let doc = parse(text);
        let nodes = doc["devices"][0]["containerEdits"]["deviceNodes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        nodes
            .into_iter()
            .find(|n| n["path"] == "/dev/nvidia0")
            .map(|n| n["hostPath"].clone())
            .unwrap_or(Value::Null)
    }
    fn format(text: &str) -> Value {
        json!(if text.starts_with("---\n") {
            "yaml"
        } else if serde_json::from_str::<Value>(text).is_ok() {
            "json"
        } else {
            "neither"
        })
    }
    const HOOK: &str = "/usr/bin/nvidia-cdi-hook";
    let all_hooks = |path: &str| {
        json!([
            [path, "create-symlinks"],
            [path, "disable-device-node-modification"],
            [path, "enable-cuda-compat"],
            [path, "update-ldcache"],
            [path, "update-application-profile"]
        ])
    };
    let lib = "/usr/lib/x86_64-linux-gnu";
    let ldcache = |ldconfig: &str| {
        json!([
            "nvidia-cdi-hook",
            "update-ldcache",
            "--ldconfig-path",
            ldconfig,
            "--folder",
            lib,
            "--folder",
            format!("{lib}/vdpau")
        ])
    };
    let node = |root: &str| json!(format!("{root}/dev/nvidia0"));
    let cases: Vec<(&str, Vec<(&str, &str)>, Vec<&str>, fn(&str) -> Value, Value)> = vec![
        (
            "device ids",
            vec![("NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS", "1")],
            vec![],
            names,
            json!(["1", u1, "all"]),
        ),
        (
            "device ids: the flag wins",
            vec![("NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS", "1")],
            vec!["--device-id", "0"],
            names,
            json!(["0", u0, "all"]),
        ),
        (
            "device ids: an empty variable is unset",
            vec![("NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS", "")],
            vec![],
            names,
            json!(["0", u0, "1", u1, "all"]),
        ),
        (
            "name strategies, a comma list",
            vec![(
                "NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES",
                "type-index,uuid",
            )],
            vec![],
            names,
            json!(["gpu0", u0, "gpu1", u1, "all"]),
        ),
        (
            "name strategies: the flag wins",
            vec![(
                "NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES",
                "type-index,uuid",
            )],
            vec!["--device-name-strategy", "index"],
            names,
            json!(["0", "1", "all"]),
        ),
        (
            "vendor and class",
            vec![
                ("NVIDIA_CTK_CDI_GENERATE_VENDOR", "example.com"),
                ("NVIDIA_CTK_CDI_GENERATE_CLASS", "acc"),
            ],
            vec![],
            kind,
            json!("example.com/acc"),
        ),
        (
            "vendor and class: the flag wins",
            vec![
                ("NVIDIA_CTK_CDI_GENERATE_VENDOR", "example.com"),
                ("NVIDIA_CTK_CDI_GENERATE_CLASS", "acc"),
            ],
            vec!["--class", "other"],
            kind,
            json!("example.com/other"),
        ),
        (
            "hook path",
            vec![("NVIDIA_CTK_CDI_HOOK_PATH", "/opt/nvct/nvidia-cdi-hook")],
            vec![],
            hooks,
            all_hooks("/opt/nvct/nvidia-cdi-hook"),
        ),
        (
            "hook path: the flag wins",
            vec![("NVIDIA_CTK_CDI_HOOK_PATH", "/opt/nvct/nvidia-cdi-hook")],
            vec!["--nvidia-cdi-hook-path", HOOK],
            hooks,
            all_hooks(HOOK),
        ),
        (
            "disabled hooks, a comma list",
            vec![(
                "NVIDIA_CTK_CDI_GENERATE_DISABLED_HOOKS",
                "create-symlinks,enable-cuda-compat",
            )],
            vec![],
            hooks,
            json!([
                [HOOK, "disable-device-node-modification"],
                [HOOK, "update-ldcache"],
                [HOOK, "update-application-profile"]
            ]),
        ),
        (
            "enabled hooks win over disabled ones",
            vec![
                (
                    "NVIDIA_CTK_CDI_GENERATE_DISABLED_HOOKS",
                    "create-symlinks,enable-cuda-compat",
                ),
                (
                    "NVIDIA_CTK_CDI_GENERATE_ENABLED_HOOKS",
                    "enable-cuda-compat",
                ),
            ],
            vec![],
            hooks,
            json!([
                [HOOK, "disable-device-node-modification"],
                [HOOK, "enable-cuda-compat"],
                [HOOK, "update-ldcache"],
                [HOOK, "update-application-profile"]
            ]),
        ),
        (
            "upstream's feature flags are accepted",
            vec![(
                "NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS",
                "enable-explicit-driver-libraries,no-additional-gids-for-device-nodes",
            )],
            vec!["--disable-hook", "all"],
            hooks,
            json!([]),
        ),
        (
            "disabled hooks: the flag wins",
            vec![(
                "NVIDIA_CTK_CDI_GENERATE_DISABLED_HOOKS",
                "create-symlinks,enable-cuda-compat",
            )],
            vec!["--disable-hook", "all"],
            hooks,
            json!([]),
        ),
        (
            "ldconfig path",
            vec![(
                "NVIDIA_CTK_CDI_GENERATE_LDCONFIG_PATH",
                "/sbin/ldconfig.env",
            )],
            vec![],
            ldcache_args,
            ldcache("/sbin/ldconfig.env"),
        ),
        (
            "ldconfig path: the flag wins",
            vec![(
                "NVIDIA_CTK_CDI_GENERATE_LDCONFIG_PATH",
                "/sbin/ldconfig.env",
            )],
            vec!["--ldconfig-path", "/sbin/ldconfig.flag"],
            ldcache_args,
            ldcache("/sbin/ldconfig.flag"),
        ),
        (
            "driver root",
            vec![("NVIDIA_CTK_DRIVER_ROOT", &driver)],
            vec![],
            node_path,
            node(&driver),
        ),
        (
            "driver root: the flag wins",
            vec![("NVIDIA_CTK_DRIVER_ROOT", "/nonexistent-driver-root")],
            vec!["--driver-root", &driver],
            node_path,
            node(&driver),
        ),
        (
            "dev root",
            vec![("NVIDIA_CTK_DEV_ROOT", &dev_root)],
            vec!["--driver-root", &driver],
            node_path,
            node(&dev_root),
        ),
        (
            "dev root: the flag wins",
            vec![("NVIDIA_CTK_DEV_ROOT", "/nonexistent-dev-root")],
            vec!["--driver-root", &driver, "--dev-root", &dev_root],
            node_path,
            node(&dev_root),
        ),
        (
            "format",
            vec![("NVIDIA_CTK_CDI_GENERATE_OUTPUT_FORMAT", "json")],
            vec![],
            format,
            json!("json"),
        ),
        (
            "format: the flag wins",
            vec![("NVIDIA_CTK_CDI_GENERATE_OUTPUT_FORMAT", "json")],
            vec!["--format", "yaml"],
            format,
            json!("yaml"),
        ),
    ];
    for (case, env, flags, look, want) in cases {
        let env: Vec<(&str, String)> = env.into_iter().map(|(k, v)| (k, v.to_string())).collect();
        // Hook names are looked at below: upstream's separate hooks.
        let mut args: Vec<String> = vec![
            "--proc-root".into(),
            proc.clone(),
            "--separate-hooks".into(),
        ];
        if !env.iter().any(|(k, _)| *k == "NVIDIA_CTK_DRIVER_ROOT")
            && !flags.contains(&"--driver-root")
        {
            args.extend(["--driver-root".into(), driver.clone()]);
        }
        args.extend(flags.iter().map(|f| f.to_string()));
        let (ok, stdout, _, text) = generate_with_env(&env, &args);
        assert!(ok, "case {case}: {text}");
        assert_eq!(look(&stdout), want, "case {case}: {text}");
    }

    // The output file: the unit's variable, and the flag over it.
    let base = || -> Vec<String> {
        vec![
            "--driver-root".into(),
            driver.clone(),
            "--proc-root".into(),
            proc.clone(),
        ]
    };
    let (from_env, from_flag) = (
        unique("env-out").with_extension("json"),
        unique("flag-out").with_extension("yaml"),
    );
    let env = [("NVIDIA_CTK_CDI_OUTPUT_FILE_PATH", s(&from_env))];
    let (ok, stdout, _, text) = generate_with_env(&env, &base());
    assert!(
        ok && stdout.is_empty(),
        "output variable: the spec goes to the file: {text}"
    );
    let written = std::fs::read_to_string(&from_env)
        .unwrap_or_else(|e| panic!("output variable: {}: {e}: {text}", from_env.display()));
    assert_eq!(
        format(&written),
        json!("json"),
        "output variable: format from its extension"
    );
    let mut args = base();
    args.extend(["--output".into(), s(&from_flag)]);
    let env = [("NVIDIA_CTK_CDI_OUTPUT_FILE_PATH", s(&unique("unused")))];
    let (ok, _, _, text) = generate_with_env(&env, &args);
    assert!(ok, "output: the flag wins: {text}");
    assert!(from_flag.exists(), "output: the flag wins: {text}");
    assert!(
        !Path::new(&env[0].1).exists(),
        "output: the variable's file was written: {text}"
    );

    // A bad value from a variable names the variable.
    for (case, var, value) in [
        (
            "strategy",
            "NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES",
            "index,name",
        ),
        ("hook", "NVIDIA_CTK_CDI_GENERATE_DISABLED_HOOKS", "nope"),
        ("device id", "NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS", "gpu0"),
        ("format", "NVIDIA_CTK_CDI_GENERATE_OUTPUT_FORMAT", "toml"),
    ] {
        let (ok, _, stderr, text) = generate_with_env(&[(var, value.to_string())], &base());
        assert!(!ok, "case {case}: {text}");
        assert!(
            stderr.contains(var),
            "case {case}: the message names {var}: {text}"
        );
    }
}

#[test]
fn list_prints_every_device_and_names_broken_files() {
    let h = host(8, false);
    let dir = unique("specs");
    std::fs::create_dir_all(&dir).unwrap();
    let out = |name: &str| dir.join(name).display().to_string();
    generate(&h, &["--output", &out("nvidia.yaml")]);
    generate(
        &h,
        &[
            "--class",
            "other",
            "--device-name-strategy",
            "type-index",
            "--output",
            &out("other.json"),
        ],
    );
    std::fs::write(dir.join("broken.yaml"), "cdiVersion: [\n").unwrap();
    let (ok, stdout, stderr, text) =
        ctk(&["cdi", "list", "--spec-dir", &dir.display().to_string()]);
    assert!(ok, "{text}");
    // Files in name order (nvidia.yaml, other.json), devices in spec order.
    let mut want: Vec<String> = Vec::new();
    for g in h.gpus() {
        want.push(format!("nvidia.com/gpu={}", g.index));
        want.push(format!("nvidia.com/gpu={}", g.uuid));
    }
    want.push("nvidia.com/gpu=all".into());
    want.extend((0..8).map(|i| format!("nvidia.com/other=gpu{i}")));
    want.push("nvidia.com/other=all".into());
    assert_eq!(stdout.lines().collect::<Vec<_>>(), want, "{text}");
    assert!(
        stderr.contains(&format!("{}: skipped", dir.join("broken.yaml").display())),
        "the broken file is named: {text}"
    );
    assert!(
        stderr.contains(&format!("{} CDI devices in {}", want.len(), dir.display())),
        "says what it searched: {text}"
    );

    let (ok, stdout, _, text) = ctk(&[
        "cdi",
        "list",
        "--spec-dir",
        &dir.display().to_string(),
        "--format",
        "json",
    ]);
    assert!(ok, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        json!(want),
        "{text}"
    );
}

/// The same spec in two spec directories (as NVIDIA's install guide and the refresh unit
/// leave a node): each device is listed once, from the later directory; `--format wide` names
/// the file; two files of one directory that define a device are named in a warning and the
/// device is not listed (as the CDI library drops it).
#[test]
fn list_resolves_two_spec_dirs_as_the_cdi_library() {
    let h = host(2, false);
    let (etc, run) = (unique("etc-cdi"), unique("run-cdi"));
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    let (etc_spec, run_spec) = (etc.join("nvidia.yaml"), run.join("nvidia.yaml"));
    for file in [&etc_spec, &run_spec] {
        generate(&h, &["--output", &file.display().to_string()]);
    }
    let dirs = |a: &Path, b: &Path| {
        vec![
            "cdi".to_string(),
            "list".into(),
            "--spec-dir".into(),
            a.display().to_string(),
            "--spec-dir".into(),
            b.display().to_string(),
        ]
    };
    let run_ctk = |args: &[String]| ctk(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let mut want: Vec<String> = Vec::new();
    for g in h.gpus() {
        want.push(format!("nvidia.com/gpu={}", g.index));
        want.push(format!("nvidia.com/gpu={}", g.uuid));
    }
    want.push("nvidia.com/gpu=all".into());

    let (ok, stdout, stderr, text) = run_ctk(&dirs(&etc, &run));
    assert!(ok, "{text}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        want,
        "each name once: {text}"
    );
    assert!(
        stderr.contains(&format!(
            "{} is shadowed by {} (a later spec directory wins) for {} device(s)",
            etc_spec.display(),
            run_spec.display(),
            want.len()
        )),
        "{text}"
    );
    assert!(!stderr.contains("warning"), "{text}");

    let mut wide = dirs(&etc, &run);
    wide.extend(["--format".into(), "wide".into()]);
    let (ok, stdout, _, text) = run_ctk(&wide);
    assert!(ok, "{text}");
    let rows: Vec<String> = want
        .iter()
        .map(|n| format!("{n}\t{}", run_spec.display()))
        .collect();
    assert_eq!(stdout.lines().collect::<Vec<_>>(), rows, "{text}");

    // The other order: the same names, now from the other file.
    let mut wide = dirs(&run, &etc);
    wide.extend(["--format".into(), "wide".into()]);
    let (ok, stdout, _, text) = run_ctk(&wide);
    assert!(ok, "{text}");
    assert!(
        stdout
            .lines()
            .all(|l| l.ends_with(&format!("\t{}", etc_spec.display()))),
        "{text}"
    );
    assert_eq!(stdout.lines().count(), want.len(), "{text}");

    // Two files of one directory: a warning naming both; the name is not listed.
    let copy = run.join("copy.yaml");
    std::fs::copy(&run_spec, &copy).unwrap();
    let (ok, stdout, stderr, text) = run_ctk(&dirs(&etc, &run));
    assert!(ok, "{text}");
    assert!(
        stdout.trim().is_empty(),
        "conflicting names are not listed: {text}"
    );
    let warning = stderr
        .lines()
        .find(|l| l.starts_with("nvidia-ctk: warning: nvidia.com/gpu=0, "))
        .unwrap_or_else(|| panic!("no warning for the conflicting names: {text}"));
    assert!(
        warning.ends_with(&format!(
            " are defined by {} and by {}, two files of one spec directory: neither is used; remove one of them",
            copy.display(),
            run_spec.display()
        )),
        "{text}"
    );
    for name in &want {
        assert!(warning.contains(name.as_str()), "{name}: {warning}");
    }
}

#[test]
fn validate_rejects_broken_specs_naming_the_field() {
    let h = host(8, false);
    let good: Value = parse(&generate(&h, &["--format", "json"]));
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        f(&mut v);
        v
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "missing kind",
            edit(&|v| {
                v.as_object_mut().unwrap().remove("kind");
            }),
            "kind: is required",
        ),
        (
            "bad device name",
            edit(&|v| v["devices"][3]["name"] = json!("gpu/3")),
            "devices[3].name: device name \"gpu/3\" contains '/'",
        ),
        (
            "duplicate names",
            edit(&|v| v["devices"][1]["name"] = json!("0")),
            "devices[1].name: \"0\" is already the name of devices[0]",
        ),
        (
            "missing hostPath",
            edit(&|v| v["devices"][3]["containerEdits"]["deviceNodes"][0]["hostPath"] = json!("/nonexistent/nvidia9")),
            "devices[3].containerEdits.deviceNodes[0].hostPath: /nonexistent/nvidia9: No such file or directory",
        ),
        (
            "missing mount source",
            edit(&|v| v["containerEdits"]["mounts"][0]["hostPath"] = json!("/nonexistent/lib.so")),
            "containerEdits.mounts[0].hostPath: /nonexistent/lib.so",
        ),
        (
            "wrong major",
            edit(&|v| v["devices"][0]["containerEdits"]["deviceNodes"][0]["major"] = json!(196)),
            "devices[0].containerEdits.deviceNodes[0].major: 196 but",
        ),
        (
            "unknown hook",
            edit(&|v| v["containerEdits"]["hooks"][0]["hookName"] = json!("createContainers")),
            "containerEdits.hooks[0].hookName: unknown hook \"createContainers\"",
        ),
        (
            "unknown version",
            edit(&|v| v["cdiVersion"] = json!("0.42.0")),
            "cdiVersion: unknown version \"0.42.0\"",
        ),
        (
            "a device with empty edits (what a host without GPUs used to get)",
            edit(&|v| v["devices"][3]["containerEdits"] = json!({})),
            "has no edits: podman and the CDI library refuse it",
        ),
    ];
    for (case, doc, needle) in cases {
        let file = unique("bad").with_extension("json");
        std::fs::write(&file, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        let mut cmd = Command::new(CTK);
        cmd.args(["cdi", "validate"]).arg(&file);
        let out = cmd.output().unwrap();
        let text = out_text(&cmd, &out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "case {case}: exit 1 expected: {text}"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "case {case}: {needle:?} expected: {text}"
        );
    }
}

/// A spec installed in /etc/cdi for one test; removed on drop.
struct InstalledSpec {
    path: PathBuf,
    kind: String,
}

impl InstalledSpec {
    /// Hooks off.
    fn new(h: &FakeHost) -> InstalledSpec {
        Self::with_flags(h, &["--disable-hook", "all"])
    }

    /// Hooks on, running this build's nvidia-cdi-hook.
    fn with_hooks(h: &FakeHost) -> InstalledSpec {
        Self::with_flags(h, &["--nvidia-cdi-hook-path", bundle::CDI_HOOK])
    }

    fn with_flags(h: &FakeHost, flags: &[&str]) -> InstalledSpec {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let class = format!("t{pid}n{n}");
        let path = PathBuf::from(format!("/etc/cdi/nvct-test-{pid}-{n}.yaml"));
        let spec = InstalledSpec {
            path,
            kind: format!("nvidia.com/{class}"),
        };
        let out = spec.path.display().to_string();
        let mut args = vec!["--class", &class, "--output", &out];
        args.extend_from_slice(flags);
        generate(h, &args);
        spec
    }
}

impl Drop for InstalledSpec {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn podman(rootfs: &Path, device: &str, script: &str) -> (String, String) {
    let _engine = crate::common::engines::engine();
    let mut cmd = Command::new(bundle::require("podman"));
    cmd.args([
        "run",
        "--rm",
        "--runtime",
        "runc",
        "--ulimit",
        "nofile=20000:20000",
        "--ulimit",
        "nproc=4096:4096",
        "--device",
        device,
        "--rootfs",
    ])
    .arg(rootfs)
    .args(["sh", "-c", script]);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run podman: {e}"));
    let text = out_text(&cmd, &out);
    assert!(out.status.success(), "{text}");
    (String::from_utf8_lossy(&out.stdout).into(), text)
}

#[test]
fn podman_gets_exactly_the_named_gpus() {
    bundle::require("podman");
    let h = host(8, false);
    let spec = InstalledSpec::new(&h);
    let rootfs = Bundle::new(scratch(), Image::Busybox).rootfs();
    let gpu_nodes = |stdout: &str| -> Vec<String> {
        let mut v: Vec<String> = stdout
            .lines()
            .filter(|l| l.starts_with("/dev/nvidia") && l[11..].chars().all(|c| c.is_ascii_digit()))
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    let cases: Vec<(&str, String, Vec<String>)> = vec![
        (
            "index 0",
            format!("{}=0", spec.kind),
            vec!["/dev/nvidia0".into()],
        ),
        (
            "uuid of GPU 3",
            format!("{}={}", spec.kind, h.gpus()[3].uuid),
            vec!["/dev/nvidia3".into()],
        ),
        (
            "all",
            format!("{}=all", spec.kind),
            (0..8).map(|i| format!("/dev/nvidia{i}")).collect(),
        ),
    ];
    for (case, device, want) in cases {
        let (stdout, text) = podman(&rootfs, &device, "ls -1 /dev/nvidia*");
        assert_eq!(gpu_nodes(&stdout), want, "case {case}: {text}");
        for control in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] {
            assert!(
                stdout.lines().any(|l| l == control),
                "case {case}: {control} expected: {text}"
            );
        }
    }
}

#[test]
fn podman_mounts_libraries_read_only() {
    bundle::require("podman");
    let h = host(8, false);
    let spec = InstalledSpec::new(&h);
    let rootfs = Bundle::new(scratch(), Image::Busybox).rootfs();
    let (stdout, text) = podman(&rootfs, &format!("{}=0", spec.kind), "cat /proc/mounts");
    let line = |target: &str| {
        stdout
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(target))
            .unwrap_or_else(|| panic!("{target} not mounted: {text}"))
            .to_string()
    };
    for target in [
        "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
        "/usr/bin/nvidia-smi",
    ] {
        let l = line(target);
        let opts: Vec<&str> = l.split(' ').nth(3).unwrap().split(',').collect();
        for want in ["ro", "nosuid", "nodev"] {
            assert!(opts.contains(&want), "{target} must be {want}: {l}");
        }
    }
}

#[test]
fn podman_gets_a_mig_device_by_its_index_pair() {
    bundle::require("podman");
    let h = host(8, true);
    let spec = InstalledSpec::new(&h);
    let rootfs = Bundle::new(scratch(), Image::Busybox).rootfs();
    // `0:1` is written quoted in YAML (a YAML 1.1 parser would read a base-60 number).
    let (stdout, text) = podman(
        &rootfs,
        &format!("{}=0:1", spec.kind),
        "ls -1 /dev/nvidia0 /dev/nvidia1 /dev/nvidia-caps/; true",
    );
    assert!(stdout.lines().any(|l| l == "/dev/nvidia0"), "{text}");
    assert!(
        !stdout.contains("/dev/nvidia1\n"),
        "GPU 1 must not be there: {text}"
    );
    let caps: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("nvidia-cap"))
        .collect();
    assert_eq!(
        caps,
        ["nvidia-cap21", "nvidia-cap22"],
        "gi 2 / ci 0 caps of GPU 0: {text}"
    );
}

/// With the spec's hooks enabled, podman runs them as createContainer hooks: the ld cache
/// of a glibc image then resolves `libcuda.so.1` (update-ldcache ran) and the
/// `libcuda.so` link exists (create-symlinks ran).
#[test]
fn podman_runs_the_spec_hooks() {
    bundle::require("podman");
    let h = host(8, false);
    let spec = InstalledSpec::with_hooks(&h);
    let rootfs = Bundle::new(scratch(), Image::Glibc).rootfs();
    let lib = "/usr/lib/x86_64-linux-gnu";
    let script = format!(
        "/usr/bin/dlcuda; readlink {lib}/libcuda.so; readlink {lib}/libcuda.so.1; grep -q {lib}/libcuda.so.1 /etc/ld.so.cache && echo CACHED; echo VIS=$NVIDIA_VISIBLE_DEVICES; true"
    );
    let (stdout, text) = podman(&rootfs, &format!("{}=0", spec.kind), &script);
    assert!(
        stdout.contains("cuDriverGetVersion rc=0 version=12040"),
        "libcuda.so.1 must resolve: {text}"
    );
    assert!(
        stdout.lines().any(|l| l == "CACHED"),
        "update-ldcache: the ld cache must list libcuda.so.1: {text}"
    );
    assert!(
        stdout.lines().any(|l| l == "libcuda.so.550.54.15"),
        "ldconfig made the SONAME link: {text}"
    );
    assert!(
        stdout.lines().any(|l| l == "libcuda.so.1"),
        "create-symlinks: libcuda.so -> libcuda.so.1 expected: {text}"
    );
    assert!(stdout.lines().any(|l| l == "VIS=void"), "{text}");

    // A fresh copy of the image (`--rootfs` is used in place, so the hooks' links and cache
    // stay in the first one) with a spec without hooks: nothing resolves, so the checks above
    // are not vacuous.
    let plain = InstalledSpec::new(&h);
    let fresh = Bundle::new(scratch(), Image::Glibc).rootfs();
    let (stdout, text) = podman(&fresh, &format!("{}=0", plain.kind), &script);
    assert!(stdout.contains("dlopen failed"), "{text}");
    assert!(!stdout.lines().any(|l| l == "CACHED"), "{text}");
}

/// A spec as Go's `omitempty` writes it (the NVIDIA device plugin's own spec: no `type`, no
/// `minor` where it is 0, here no `major` either for those nodes), hooks on: podman's CDI
/// library fills the numbers from the host nodes, our hooks run on the result, and
/// `cdi validate` accepts the spec.
#[test]
fn podman_runs_a_spec_without_node_numbers_with_its_hooks() {
    bundle::require("podman");
    let h = host(8, false);
    let spec = InstalledSpec::with_hooks(&h);
    let mut doc = parse(&std::fs::read_to_string(&spec.path).unwrap());
    let mut stripped = 0;
    let mut strip = |edits: &mut Value| {
        for n in edits["deviceNodes"].as_array_mut().into_iter().flatten() {
            let n = n.as_object_mut().unwrap();
            n.remove("type");
            if n.get("minor").and_then(Value::as_u64) == Some(0) {
                n.remove("minor");
                n.remove("major");
                stripped += 1;
            }
        }
    };
    strip(&mut doc["containerEdits"]);
    for d in doc["devices"].as_array_mut().unwrap() {
        strip(&mut d["containerEdits"]);
    }
    assert!(stripped >= 2, "nvidia0 and nvidia-uvm lose their numbers");
    std::fs::write(&spec.path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let (ok, _, _, text) = ctk(&["cdi", "validate", &spec.path.display().to_string()]);
    assert!(ok, "{text}");

    let rootfs = Bundle::new(scratch(), Image::Glibc).rootfs();
    let script = "ls -l /dev/nvidia0 /dev/nvidia-uvm; grep -q /usr/lib/x86_64-linux-gnu/libcuda.so.1 /etc/ld.so.cache && echo CACHED; true";
    let (stdout, text) = podman(&rootfs, &format!("{}=0", spec.kind), script);
    let numbers = |node: &str| -> Vec<String> {
        let line = stdout
            .lines()
            .find(|l| l.ends_with(&format!(" {node}")))
            .unwrap_or_else(|| panic!("{node} not in the container: {text}"));
        let (before, after) = line.split_once(',').unwrap();
        vec![
            before.split_whitespace().last().unwrap().to_string(),
            after.split_whitespace().next().unwrap().to_string(),
        ]
    };
    assert_eq!(numbers("/dev/nvidia0"), ["195", "0"], "{text}");
    assert_eq!(
        numbers("/dev/nvidia-uvm"),
        [fakehost::NVIDIA_UVM_MAJOR.to_string(), "0".to_string()],
        "{text}"
    );
    assert!(
        stdout.lines().any(|l| l == "CACHED"),
        "update-ldcache ran: {text}"
    );
}

#[test]
fn generate_on_a_host_without_gpus_fails_and_writes_nothing() {
    // The driver is loaded but no GPU is there: a spec would hold an `all` device without edits,
    // which podman refuses ("unresolvable CDI devices"). Exit 1, a message, no file.
    let h = host(0, false);
    let out_file = unique("nogpu").with_extension("yaml");
    let mut args: Vec<String> = vec!["cdi".into(), "generate".into()];
    args.extend(root_args(&h));
    args.extend(["--output".into(), out_file.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, _, stderr, text) = ctk(&args);
    assert!(!ok, "{text}");
    assert!(
        stderr.contains("no NVIDIA GPUs found on this host"),
        "{text}"
    );
    assert!(!out_file.exists(), "a spec was written: {text}");
}

/// Without root flags, `cdi generate` takes the roots from the toolkit config (as the hook does,
/// and as upstream takes `nvidia-container-cli.root`): what nvidia-cdi-refresh.service runs on a
/// node whose driver is in /run/nvidia/driver.
#[test]
fn roots_come_from_the_toolkit_config_when_not_given() {
    let h = host(2, false);
    let config = unique("config.toml");
    std::fs::write(
        &config,
        format!(
            "[nvidia-container-cli]\nroot = {:?}\nproc-root = {:?}\n",
            h.driver_root().display().to_string(),
            h.proc_root().display().to_string()
        ),
    )
    .unwrap();
    let env = [("NVIDIA_CTK_CONFIG_FILE_PATH", config.display().to_string())];
    let (ok, stdout, _, text) = generate_with_env(&env, &["--format".into(), "json".into()]);
    assert!(ok, "{text}");
    let doc = parse(&stdout);
    assert_eq!(doc["devices"].as_array().unwrap().len(), 5, "{text}");
    let node = doc["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        node.starts_with(&h.driver_root().display().to_string()),
        "the config's driver root: {node}"
    );
    // A broken config is named when it is where the roots come from.
    std::fs::write(&config, "[nvidia-container-cli\n").unwrap();
    let (ok, _, stderr, text) = generate_with_env(&env, &[]);
    assert!(!ok, "{text}");
    assert!(stderr.contains(&config.display().to_string()), "{text}");
}

/// `--mode imex`: upstream's IMEX channel spec (kind `nvidia.com/imex-channel` unless
/// `--class`), a device per channel named by its number, `all`, no common edits; valid against
/// the schema, and podman gives a container exactly the channel it names.
#[test]
fn imex_channel_specs() {
    bundle::require("podman");
    let h = host(2, false);
    let doc = parse(&generate(&h, &["--mode", "imex"]));
    assert_eq!(doc["kind"], "nvidia.com/imex-channel", "{doc}");
    let names: Vec<&str> = doc["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (0..crate::common::fakehost::IMEX_CHANNELS)
        .map(|c| c.to_string())
        .chain(["all".to_string()])
        .collect();
    assert_eq!(names, want, "{doc}");
    assert!(
        doc.get("containerEdits")
            .is_none_or(|e| e.as_object().is_none_or(|o| o.is_empty())),
        "{doc}"
    );
    let node = &doc["devices"][1]["containerEdits"]["deviceNodes"][0];
    assert_eq!(
        node["path"], "/dev/nvidia-caps-imex-channels/channel1",
        "{doc}"
    );
    assert_eq!(
        node["major"],
        crate::common::fakehost::NVIDIA_IMEX_MAJOR,
        "{doc}"
    );
    // One channel by number or by upstream's channelN name; an unknown one is refused.
    for id in ["1", "channel1"] {
        let doc = parse(&generate(&h, &["--mode", "imex", "--device-id", id]));
        assert_eq!(doc["devices"][0]["name"], "1", "--device-id {id}: {doc}");
    }
    generate_fails(
        &h,
        &["--mode", "imex", "--device-id", "7"],
        "matches no IMEX channel",
    );

    let spec = InstalledSpec::with_flags(&h, &["--mode", "imex"]);
    let rootfs = Bundle::new(scratch(), Image::Busybox).rootfs();
    let (stdout, text) = podman(
        &rootfs,
        &format!("{}=1", spec.kind),
        "ls -1 /dev/nvidia-caps-imex-channels",
    );
    assert_eq!(stdout.trim(), "channel1", "{text}");
}

/// `cdi transform root`: a spec generated from a driver root, moved to the host path of that
/// root, from a file and from stdin; every host path moves, container paths stay, the result is
/// still a valid spec; bad arguments are refused by name.
#[test]
fn transform_root_moves_host_paths() {
    let h = host(2, false);
    let dir = scratch().join(format!("transform-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.json");
    std::fs::write(&input, generate(&h, &["--format", "json"])).unwrap();
    let from = h.driver_root().display().to_string();
    let output = dir.join("out.json");
    let run = |args: &[&str], stdin: Option<&[u8]>| {
        use std::io::Write;
        let mut child = Command::new(CTK)
            .args(["cdi", "transform", "root"])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or_default()).unwrap();
        drop(input);
        child.wait_with_output().unwrap()
    };
    let out = run(
        &[
            "--from",
            &from,
            "--to",
            "/run/nvidia/driver",
            "--input",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    let original: Value = serde_json::from_str(&std::fs::read_to_string(&input).unwrap()).unwrap();
    let text = doc.to_string();
    assert!(
        !text.contains(&from),
        "nothing of the old root is left: {text}"
    );
    let mounts = doc["containerEdits"]["mounts"].as_array().unwrap();
    assert!(!mounts.is_empty());
    for (m, o) in mounts
        .iter()
        .zip(original["containerEdits"]["mounts"].as_array().unwrap())
    {
        let host = m["hostPath"].as_str().unwrap();
        assert!(host.starts_with("/run/nvidia/driver/"), "{m}");
        assert_eq!(
            m["containerPath"], o["containerPath"],
            "container paths stay"
        );
    }
    let nodes = doc["devices"][0]["containerEdits"]["deviceNodes"]
        .as_array()
        .unwrap();
    let node = nodes
        .iter()
        .find(|n| n["path"] == "/dev/nvidia0")
        .unwrap_or_else(|| panic!("no /dev/nvidia0 in device 0: {doc}"));
    assert_eq!(node["hostPath"], "/run/nvidia/driver/dev/nvidia0", "{node}");
    // Still a spec; the validator checks host paths exist, which these do not: only the
    // schema problems matter here.
    let v = Command::new(CTK)
        .args(["cdi", "validate"])
        .arg(&output)
        .output()
        .unwrap();
    let problems = String::from_utf8_lossy(&v.stderr);
    assert!(!problems.contains("schema"), "{problems}");
    // stdin to stdout (YAML), relative to the container.
    let out = run(
        &[
            "--from",
            "/dev",
            "--to",
            "/ctr/dev",
            "--relative-to",
            "container",
        ],
        Some(std::fs::read(&input).unwrap().as_slice()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8_lossy(&out.stdout);
    assert!(yaml.contains("path: /ctr/dev/nvidia0"), "{yaml}");
    assert!(
        yaml.contains(&format!("hostPath: {from}/dev/nvidia0")),
        "host paths stay: {yaml}"
    );
    // Refusals.
    for (args, needle) in [
        (vec!["--to", "/x"], "--from"),
        (
            vec!["--from", "rel", "--to", "/x"],
            "a root is an absolute path",
        ),
        (
            vec!["--from", "/a", "--relative-to", "guest"],
            "expected host or container",
        ),
        (
            vec!["--from", "/a", "--input", "/nonexistent/spec.yaml"],
            "/nonexistent/spec.yaml",
        ),
    ] {
        let out = run(&args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(needle),
            "{args:?}: {err}"
        );
    }
}

/// `--mode gds|mofed|gdrcopy|nvswitch`: upstream's gated specs (kind `nvidia.com/<set>`, one
/// device `all` with the set's nodes, GDS also its files); a set the host lacks is refused; a
/// podman container given `nvidia.com/gds=all` has the node and the file.
#[test]
fn opt_in_set_specs() {
    bundle::require("podman");
    let h = host(1, true); // its own host: the nodes below are added to it
    let dev = h.dev_root().join("dev");
    for (node, major, minor) in [("nvidia-fs0", 240u32, 0u32), ("gdrdrv", 241, 0)] {
        bundle::mknod_char(&dev.join(node), major, minor);
    }
    std::fs::write(h.driver_root().join("etc/cufile.json"), "{}\n").unwrap();
    let doc = parse(&generate(&h, &["--mode", "gds"]));
    assert_eq!(doc["kind"], "nvidia.com/gds", "{doc}");
    assert_eq!(doc["devices"].as_array().unwrap().len(), 1, "{doc}");
    let edits = &doc["devices"][0]["containerEdits"];
    assert_eq!(doc["devices"][0]["name"], "all");
    assert_eq!(edits["deviceNodes"][0]["path"], "/dev/nvidia-fs0", "{doc}");
    assert_eq!(
        edits["mounts"][0]["containerPath"], "/etc/cufile.json",
        "{doc}"
    );
    let doc = parse(&generate(&h, &["--mode", "gdrcopy"]));
    assert_eq!(doc["kind"], "nvidia.com/gdrcopy", "{doc}");
    assert_eq!(
        doc["devices"][0]["containerEdits"]["deviceNodes"][0]["path"],
        "/dev/gdrdrv"
    );
    generate_fails(&h, &["--mode", "nvswitch"], "no nvswitch device nodes");

    let spec = InstalledSpec::with_flags(&h, &["--mode", "gds"]);
    let rootfs = Bundle::new(scratch(), Image::Busybox).rootfs();
    let (stdout, text) = podman(
        &rootfs,
        &format!("{}=all", spec.kind),
        "ls /dev/nvidia-fs0; cat /etc/cufile.json",
    );
    assert!(
        stdout.contains("/dev/nvidia-fs0") && stdout.contains("{}"),
        "{text}"
    );
}

/// `--mode management`: upstream's spec for management containers (kind
/// `management.nvidia.com/gpu`): the GPU spec's common edits and one device `all` with every
/// NVIDIA node, MIG capability nodes and IMEX channels included; podman gives a container all
/// GPUs and the driver's tools through it.
#[test]
fn management_spec() {
    bundle::require("podman");
    let h = host(2, true);
    let doc = parse(&generate(&h, &["--mode", "management"]));
    assert_eq!(doc["kind"], "management.nvidia.com/gpu", "{doc}");
    let devices = doc["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 1, "{doc}");
    assert_eq!(devices[0]["name"], "all");
    let paths: Vec<&str> = devices[0]["containerEdits"]["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    for want in [
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidia-caps-imex-channels/channel0",
    ] {
        assert!(paths.contains(&want), "{want}: {paths:?}");
    }
    assert!(
        paths
            .iter()
            .any(|p| p.starts_with("/dev/nvidia-caps/nvidia-cap")),
        "{paths:?}"
    );
    let common = &doc["containerEdits"];
    assert!(!common["mounts"].as_array().unwrap().is_empty(), "{doc}");
    let common_nodes: Vec<&str> = common["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert!(common_nodes.contains(&"/dev/nvidiactl"), "{common_nodes:?}");
    assert!(!paths.contains(&"/dev/nvidiactl"), "not twice: {paths:?}");

    // Installed under a test class of nvidia.com (InstalledSpec's naming).
    let spec = InstalledSpec::with_flags(
        &h,
        &[
            "--mode",
            "management",
            "--vendor",
            "nvidia.com",
            "--disable-hook",
            "all",
        ],
    );
    let rootfs = Bundle::new(scratch(), Image::Busybox).rootfs();
    let (stdout, text) = podman(
        &rootfs,
        &format!("{}=all", spec.kind),
        "ls /dev/nvidia0 /dev/nvidia1 /usr/bin/nvidia-smi",
    );
    assert!(
        stdout.contains("/dev/nvidia1") && stdout.contains("nvidia-smi"),
        "{text}"
    );
}

/// Not CDI: `podman --read-only` (a tmpfs at `/run`, made for the container) with our prestart
/// hook from a hooks.d dir, as the package installs it, on a node that runs
/// nvidia-persistenced: the container starts with the socket mounted in its `/run` tmpfs.
#[test]
fn podman_read_only_with_the_hooks_d_prestart_hook_gets_the_persistenced_socket() {
    bundle::require("podman");
    let h = host(2, false);
    let hooks = unique("hooks.d");
    std::fs::create_dir_all(&hooks).unwrap();
    let config = bundle::write_config(scratch(), &h.driver_root(), &h.proc_root(), "");
    let hook = json!({
        "version": "1.0.0",
        "hook": {
            "path": bundle::HOOK,
            "args": ["nvidia-container-runtime-hook", "-config", config, "prestart"],
            "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
        },
        "when": {"always": true},
        "stages": ["prestart"],
    });
    std::fs::write(hooks.join("oci-nvidia-hook.json"), hook.to_string()).unwrap();
    let rootfs = Bundle::new(scratch(), Image::Busybox).rootfs();
    let _engine = crate::common::engines::engine();
    let mut cmd = Command::new(bundle::require("podman"));
    cmd.arg("--hooks-dir")
        .arg(&hooks)
        .args(["run", "--rm", "--read-only", "--runtime", "runc"])
        .args([
            "--ulimit",
            "nofile=20000:20000",
            "--ulimit",
            "nproc=4096:4096",
        ])
        .args(["-e", "NVIDIA_VISIBLE_DEVICES=1", "--rootfs"])
        .arg(&rootfs)
        .args([
            "sh",
            "-c",
            "grep ' /run tmpfs ' /proc/mounts >/dev/null && echo RUN-TMPFS; \
             test -S /run/nvidia-persistenced/socket && echo SOCKET; ls /dev/nvidia1",
        ]);
    let out = cmd.output().expect("podman run");
    let text = out_text(&cmd, &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for want in ["RUN-TMPFS", "SOCKET", "/dev/nvidia1"] {
        assert!(stdout.lines().any(|l| l == want), "{want}: {text}");
    }
}

/// An output that is not a regular file stays what it is: `--output=/dev/null` (a dry check
/// people script) must not replace the node with a file (a node made in a scratch dir stands
/// for the host's). Each writing command of nvidia-ctk, given a character device: it stays a
/// character device with its mode. A spec name without `.yaml`/`.json` gets the extension of
/// its format (the CDI library reads only those names).
#[test]
fn outputs_that_are_not_regular_files_are_written_through() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let h = host(2, false);
    let dir = unique("outputs");
    std::fs::create_dir_all(&dir).unwrap();
    let node = dir.join("null");
    bundle::mknod_char(&node, 1, 3);
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o666)).unwrap();
    let n = node.display().to_string();
    let mut generate_args: Vec<String> = vec!["cdi".into(), "generate".into()];
    generate_args.extend(root_args(&h));
    generate_args.extend(["--output".into(), n.clone()]);
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("cdi generate --output", generate_args),
        (
            "config default --output",
            vec![
                "config".into(),
                "default".into(),
                "--output".into(),
                n.clone(),
            ],
        ),
        (
            "runtime configure --config",
            vec![
                "runtime".into(),
                "configure".into(),
                "--runtime=docker".into(),
                "--config".into(),
                n.clone(),
            ],
        ),
        (
            "config --config-file --in-place",
            vec![
                "config".into(),
                "--config-file".into(),
                n.clone(),
                "--in-place".into(),
                "--set".into(),
                "nvidia-container-cli.debug=/tmp/x.log".into(),
            ],
        ),
    ];
    for (name, args) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _, _, text) = ctk(&args);
        let meta = std::fs::symlink_metadata(&node).unwrap();
        assert!(ok, "case {name}: {text}");
        assert!(
            meta.file_type().is_char_device(),
            "case {name}: the node was replaced: {text}"
        );
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o666,
            "case {name}: {text}"
        );
    }
    // A directory is refused with its name, nothing written.
    let (ok, _, stderr, text) = ctk(&["config", "default", "--output", dir.to_str().unwrap()]);
    assert!(!ok && stderr.contains("is a directory"), "{text}");

    // A spec name without an extension gets `.yaml` (`.json` with --format json).
    for (format, name, want) in [
        ("yaml", "nvidia", "nvidia.yaml"),
        ("json", "gpus", "gpus.json"),
        ("yaml", "x.yml", "x.yml.yaml"),
    ] {
        let out = dir.join(name);
        let mut args: Vec<String> = vec!["cdi".into(), "generate".into()];
        args.extend(root_args(&h));
        args.extend([
            "--format".into(),
            format.into(),
            "--output".into(),
            out.display().to_string(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _, _, text) = ctk(&args);
        assert!(ok, "{name}: {text}");
        assert!(
            dir.join(want).is_file() && !out.exists(),
            "{name} -> {want}: {text}"
        );
    }
}
