//! The kubelet's own path, without a cluster: a CRI client talks to a real containerd 1.6's CRI
//! plugin over gRPC, as the kubelet does (`Version`, `RunPodSandbox` with the `nvidia` runtime
//! handler, `CreateContainer`, `StartContainer`, `ContainerStatus`, the container's CRI log,
//! `StopPodSandbox`, `RemovePodSandbox`), and GPU pods start through the runtime that
//! `nvidia-ctk-installer` installed and registered before containerd started. Nothing is
//! pulled: the sandbox and container image is an OCI layout built here (busybox-static) and
//! imported with `ctr images import`. The pods use the host network, so no CNI is needed.
//!
//! The client is tests/cri/cri.py (Python grpcio; stubs generated at the start of the test with
//! grpcio-tools, both installed by scripts/install-deps.sh, from tests/cri/runtime_v1.proto: our
//! own subset of CRI runtime.v1, the calls and fields used here with the runtime's field
//! numbers and types): one process per call, JSON in and out, the logic all here.

use crate::common::bundle::{self, out_text};
use crate::common::containerd::{start_containerd_cri, write_cri_config, Containerd};
use crate::common::installer::{common_args, source_tree, Installer};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The image's name in containerd's `k8s.io` namespace (the sandbox image too).
const IMAGE: &str = "docker.io/library/nvct-cri:1";

/// Writes `bytes` as a blob of the OCI layout `layout`: its descriptor's digest and size.
fn blob(layout: &Path, bytes: &[u8]) -> (String, usize) {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(layout.join("blobs/sha256").join(&hex), bytes).unwrap();
    (format!("sha256:{hex}"), bytes.len())
}

fn tar(dir: &Path, out: &Path, what: &[&str]) {
    let st = Command::new(bundle::require("tar"))
        .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
        .arg(dir)
        .arg("-cf")
        .arg(out)
        .args(what)
        .status()
        .unwrap();
    assert!(st.success(), "tar of {}", dir.display());
}

/// An OCI image archive (oci-layout, index.json, blobs) of a busybox-static rootfs in one
/// uncompressed layer, its entrypoint `sleep 3600` (the sandbox's process), named [`IMAGE`].
fn oci_archive(dir: &Path) -> PathBuf {
    let rootfs = dir.join("image/rootfs");
    for d in ["bin", "etc", "dev", "proc", "sys", "tmp"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::copy(bundle::require("busybox"), rootfs.join("bin/busybox")).unwrap();
    for applet in ["sh", "ls", "echo", "cat", "sleep"] {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
    }
    let layer_tar = dir.join("image/layer.tar");
    tar(&rootfs, &layer_tar, &["."]);
    let layout = dir.join("image/oci");
    std::fs::create_dir_all(layout.join("blobs/sha256")).unwrap();
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let (layer, layer_size) = blob(&layout, &std::fs::read(&layer_tar).unwrap());
    let config = json!({
        "architecture": arch,
        "os": "linux",
        "config": {"Env": ["PATH=/bin"], "Entrypoint": ["/bin/sleep"], "Cmd": ["3600"]},
        // Uncompressed: the layer's diff id is its digest.
        "rootfs": {"type": "layers", "diff_ids": [layer]},
    });
    let (config, config_size) = blob(&layout, &serde_json::to_vec(&config).unwrap());
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer, "size": layer_size}],
    });
    let (manifest, manifest_size) = blob(&layout, &serde_json::to_vec(&manifest).unwrap());
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest,
            "size": manifest_size,
            "platform": {"architecture": arch, "os": "linux"},
            "annotations": {"io.containerd.image.name": IMAGE, "org.opencontainers.image.ref.name": "1"},
        }],
    });
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
    std::fs::write(
        layout.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    let archive = dir.join("image/nvct-cri.tar");
    tar(&layout, &archive, &["oci-layout", "index.json", "blobs"]);
    archive
}

/// The CRI client: tests/cri/cri.py with the stubs generated in `stubs`.
struct Cri<'a> {
    python: PathBuf,
    stubs: PathBuf,
    containerd: &'a Containerd,
}

impl Cri<'_> {
    /// Generates the stubs from tests/cri/runtime_v1.proto into `stubs`.
    fn new<'a>(containerd: &'a Containerd, stubs: &Path) -> Cri<'a> {
        let python = bundle::require("python3");
        std::fs::create_dir_all(stubs).unwrap();
        let protos = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cri");
        let out = Command::new(&python)
            .args(["-m", "grpc_tools.protoc", "-I"])
            .arg(&protos)
            .arg(format!("--python_out={}", stubs.display()))
            .arg(format!("--grpc_python_out={}", stubs.display()))
            .arg(protos.join("runtime_v1.proto"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "generating the CRI stubs (grpcio-tools missing? run scripts/install-deps.sh): {}",
            out_text(&out)
        );
        Cri {
            python,
            stubs: stubs.to_path_buf(),
            containerd,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.containerd.log).unwrap_or_default()
    }

    /// One call: `method` is `Service.Method`; the response, or the gRPC error.
    fn try_call(&self, method: &str, request: &Value) -> Result<Value, String> {
        let mut child = Command::new(&self.python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cri/cri.py"))
            .arg(&self.stubs)
            .arg(&self.containerd.sock)
            .arg(method)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(&serde_json::to_vec(request).unwrap())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        if !out.status.success() {
            return Err(out_text(&out));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("{e}: {}", out_text(&out)))
    }

    /// One call that must succeed; panics with containerd's log.
    fn call(&self, method: &str, request: Value) -> Value {
        self.try_call(method, &request).unwrap_or_else(|e| {
            panic!(
                "{method} {request}:\n{e}\n--- containerd log\n{}",
                self.log()
            )
        })
    }
}

/// A pod sandbox; stopped and removed on drop (also when a test fails halfway).
struct Pod<'a> {
    cri: &'a Cri<'a>,
    id: String,
}

impl Drop for Pod<'_> {
    fn drop(&mut self) {
        let req = json!({"pod_sandbox_id": self.id});
        let stop = self.cri.try_call("RuntimeService.StopPodSandbox", &req);
        let remove = self.cri.try_call("RuntimeService.RemovePodSandbox", &req);
        if !std::thread::panicking() {
            stop.unwrap_or_else(|e| panic!("StopPodSandbox: {e}\n{}", self.cri.log()));
            remove.unwrap_or_else(|e| panic!("RemovePodSandbox: {e}\n{}", self.cri.log()));
        }
    }
}

/// What a pod's container asks for.
#[derive(Default)]
struct Case {
    name: &'static str,
    envs: Vec<(&'static str, String)>,
    /// (host path, container path)
    mounts: Vec<(PathBuf, String)>,
    annotations: Vec<(&'static str, &'static str)>,
    /// The container's script; [`SCRIPT`] when `None`.
    script: Option<&'static str>,
    /// The pod's runtime handler (its RuntimeClass's); `None`: `nvidia`, `Some("")`: none
    /// (no runtimeClassName: containerd's default runtime).
    handler: Option<&'static str>,
}

/// What the container did: its exit code and its stdout and stderr lines (from its CRI log).
struct Seen {
    exit_code: i64,
    stdout: Vec<String>,
    stderr: Vec<String>,
    /// For assertion messages: the log, the container's status.
    text: String,
}

impl Seen {
    /// The `/dev/nvidia*` paths the container listed.
    fn nvidia_nodes(&self) -> Vec<&str> {
        self.stdout
            .iter()
            .map(String::as_str)
            .filter(|l| l.starts_with("/dev/nvidia"))
            .collect()
    }
}

const SCRIPT: &str = "ls -d /dev/nvidia*; echo done";

/// A pod (host network, the `nvidia` runtime handler) with one container running [`SCRIPT`]
/// as `case` asks; waits for the container to exit and reads its CRI log.
fn run_pod(cri: &Cri, dir: &Path, case: &Case) -> Seen {
    let log_dir = dir.join("pods").join(case.name);
    std::fs::create_dir_all(&log_dir).unwrap();
    let sandbox_config = json!({
        "metadata": {
            "name": format!("gpu-{}", case.name),
            "uid": format!("nvct-cri-{}-{}", case.name, std::process::id()),
            "namespace": "default",
            "attempt": 0,
        },
        "log_directory": log_dir,
        "linux": {"security_context": {"namespace_options": {"network": "NODE"}}},
    });
    let pod = Pod {
        cri,
        id: cri.call(
            "RuntimeService.RunPodSandbox",
            json!({"config": sandbox_config, "runtime_handler": case.handler.unwrap_or("nvidia")}),
        )["pod_sandbox_id"]
            .as_str()
            .unwrap()
            .to_string(),
    };
    let envs: Vec<Value> = case
        .envs
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    let mounts: Vec<Value> = case
        .mounts
        .iter()
        .map(|(h, c)| json!({"host_path": h, "container_path": c, "readonly": true}))
        .collect();
    let annotations: serde_json::Map<String, Value> = case
        .annotations
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let created = cri.call(
        "RuntimeService.CreateContainer",
        json!({
            "pod_sandbox_id": pod.id,
            "config": {
                "metadata": {"name": "gpu", "attempt": 0},
                "image": {"image": IMAGE},
                "command": ["/bin/sh", "-c", case.script.unwrap_or(SCRIPT)],
                "envs": envs,
                "mounts": mounts,
                "annotations": annotations,
                "log_path": "gpu.log",
            },
            "sandbox_config": sandbox_config,
        }),
    );
    let id = created["container_id"].as_str().unwrap().to_string();
    cri.call("RuntimeService.StartContainer", json!({"container_id": id}));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let st = cri.call(
            "RuntimeService.ContainerStatus",
            json!({"container_id": id}),
        );
        if st["status"]["state"] == "CONTAINER_EXITED" {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "{}: the container did not exit: {st}\n--- containerd log\n{}",
            case.name,
            cri.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let log = std::fs::read_to_string(log_dir.join("gpu.log")).unwrap_or_default();
    // CRI log lines: `<RFC 3339 time> <stdout|stderr> <F|P> <text>`.
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for line in log.lines() {
        let f: Vec<&str> = line.splitn(4, ' ').collect();
        assert_eq!(f.len(), 4, "{}: not a CRI log line: {line:?}", case.name);
        match f[1] {
            "stdout" => stdout.push(f[3].to_string()),
            "stderr" => stderr.push(f[3].to_string()),
            other => panic!("{}: stream {other:?} in {line:?}", case.name),
        }
    }
    drop(pod);
    Seen {
        exit_code: status["status"]["exit_code"].as_i64().unwrap_or(0),
        stdout,
        stderr,
        text: format!(
            "{}: container status {}\n--- its log\n{log}\n--- containerd log\n{}",
            case.name,
            status["status"],
            cri.log()
        ),
    }
}

/// Sets the two `accept-nvidia-visible-devices-*` keys of the installed runtime's config (read
/// by the runtime at each container start), checked through our own config parser.
fn set_accept_keys(config: &Path, envvar_when_unprivileged: bool, as_volume_mounts: bool) {
    let text = std::fs::read_to_string(config).unwrap();
    let mut doc: toml_edit::DocumentMut = text.parse().unwrap();
    doc["accept-nvidia-visible-devices-envvar-when-unprivileged"] =
        toml_edit::value(envvar_when_unprivileged);
    doc["accept-nvidia-visible-devices-as-volume-mounts"] = toml_edit::value(as_volume_mounts);
    std::fs::write(config, doc.to_string()).unwrap();
    let parsed: nvct_formats::config::Config = toml::from_str(&doc.to_string()).unwrap();
    assert_eq!(
        (
            parsed.accept_nvidia_visible_devices_envvar_when_unprivileged,
            parsed.accept_nvidia_visible_devices_as_volume_mounts
        ),
        (envvar_when_unprivileged, as_volume_mounts),
        "{}",
        doc
    );
}

#[test]
fn gpu_pods_start_through_the_cri_with_the_installed_nvidia_runtime_handler() {
    bundle::require_root();
    for tool in ["runc", "containerd-shim-runc-v2", "tar", "busybox"] {
        bundle::require(tool);
    }
    let ctr = bundle::require("ctr");
    let (dir, host) = bundle::scratch_host("nvct-cri-", 2);
    let uuid = |i: usize| host.gpus()[i].uuid.clone();
    // restrict_oom_score_adj: containerd gives the sandbox -998, and this machine (root without
    // CAP_SYS_RESOURCE) cannot lower an oom_score_adj, so runc's init fails every sandbox start
    // ("can't get final child's PID from pipe: EOF"); the setting keeps each container's at or
    // above containerd's own, what it is for (a containerd without that capability).
    let engine_config = write_cri_config(&dir, IMAGE, "restrict_oom_score_adj = true");
    let original = std::fs::read(&engine_config).unwrap();

    // The installer first: containerd reads its config (and the drop-in) once, at its start.
    let source = source_tree(&dir);
    let drop_in = dir.join("conf.d/99-nvidia.toml");
    let inst = Installer::start(
        &dir,
        &[
            common_args(&dir, &host, &source),
            vec![
                "--runtime=containerd".to_string(),
                format!("--config={}", engine_config.display()),
                format!("--drop-in-config={}", drop_in.display()),
                "--restart-mode=none".to_string(),
                "--cdi-enabled".to_string(),
            ],
        ]
        .concat(),
    );
    let toolkit = dir.join("install/toolkit");
    let toolkit_config = toolkit.join(".config/nvidia-container-runtime/config.toml");
    assert!(toolkit_config.exists(), "{}", inst.text());

    let cd = start_containerd_cri(&dir, None);
    let archive = oci_archive(&dir);
    let out = Command::new(&ctr)
        .arg("-a")
        .arg(&cd.sock)
        .args(["-n", "k8s.io", "images", "import", "--all-platforms"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctr images import: {}\n--- containerd log\n{}",
        out_text(&out),
        std::fs::read_to_string(&cd.log).unwrap_or_default()
    );
    let cri = Cri::new(&cd, &dir.join("cri-stubs"));

    // The CRI plugin answers once it has started (a moment after the socket appears).
    let deadline = Instant::now() + Duration::from_secs(30);
    let version = loop {
        match cri.try_call("RuntimeService.Version", &json!({"version": "v1"})) {
            Ok(v) => break v,
            Err(e) => assert!(
                Instant::now() < deadline,
                "Version: {e}\n--- containerd log\n{}",
                cri.log()
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(version["runtime_name"], "containerd", "{version}");
    assert_eq!(version["runtime_api_version"], "v1", "{version}");
    // The `nvidia` handler in the CRI plugin's config is the installed runtime.
    let status = cri.call("RuntimeService.Status", json!({"verbose": true}));
    let cri_config: Value =
        serde_json::from_str(status["info"]["config"].as_str().unwrap()).unwrap();
    let handler = &cri_config["containerd"]["runtimes"]["nvidia"];
    assert_eq!(
        handler["options"]["BinaryName"],
        toolkit
            .join("nvidia-container-runtime")
            .display()
            .to_string(),
        "the CRI plugin's nvidia handler: {handler}"
    );
    assert_eq!(
        handler["ContainerAnnotations"],
        json!(["cdi.k8s.io/*"]),
        "the CRI plugin's nvidia handler: {handler}"
    );
    // The image import reaches the CRI plugin's image store through containerd's events.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = cri.call(
            "ImageService.ImageStatus",
            json!({"image": {"image": IMAGE}}),
        );
        if st.get("image").is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the CRI does not see {IMAGE}: {st}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // `want`: every /dev/nvidia* node the container lists. The legacy injection (the envvar,
    // the volume mounts) adds the control nodes compute needs; the CDI spec's common edits add
    // /dev/nvidia-modeset too, as upstream's generated spec does.
    let expect = |seen: &Seen, want: &[&str]| {
        assert_eq!(seen.exit_code, 0, "{}", seen.text);
        assert_eq!(
            seen.stdout.last().map(String::as_str),
            Some("done"),
            "{}",
            seen.text
        );
        let mut want = want.to_vec();
        want.sort();
        let mut got = seen.nvidia_nodes();
        got.sort();
        assert_eq!(got, want, "{}", seen.text);
    };
    let legacy = |gpu: &'static str| {
        [
            gpu,
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools",
            "/dev/nvidiactl",
        ]
    };

    // (a) The device plugin's envvar strategy: NVIDIA_VISIBLE_DEVICES=<UUID of GPU 1>.
    let a = run_pod(
        &cri,
        &dir,
        &Case {
            name: "envvar",
            envs: vec![("NVIDIA_VISIBLE_DEVICES", uuid(1))],
            ..Case::default()
        },
    );
    expect(&a, &legacy("/dev/nvidia1"));

    // (a') The same with no runtimeClassName (the GPU Operator with CDI off sets none): the
    // installer made `nvidia` containerd's default runtime, as upstream's does.
    assert_eq!(
        cri_config["containerd"]["defaultRuntimeName"], "nvidia",
        "the CRI plugin's default runtime"
    );
    let a2 = run_pod(
        &cri,
        &dir,
        &Case {
            name: "envvar-default-runtime",
            envs: vec![("NVIDIA_VISIBLE_DEVICES", uuid(1))],
            handler: Some(""),
            ..Case::default()
        },
    );
    expect(&a2, &legacy("/dev/nvidia1"));

    // (c) CDI: a cdi.k8s.io/* annotation on the container, which containerd 1.6 passes to the
    // runtime because the installer put `container_annotations` on the handler.
    let c = run_pod(
        &cri,
        &dir,
        &Case {
            name: "cdi",
            annotations: vec![("cdi.k8s.io/test", "nvidia.com/gpu=1")],
            ..Case::default()
        },
    );
    expect(
        &c,
        &[
            "/dev/nvidia1",
            "/dev/nvidia-modeset",
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools",
            "/dev/nvidiactl",
        ],
    );

    // (e) CDI with a spec written as the NVIDIA device plugin writes its own (Go, `omitempty`):
    // its kind, devices by UUID, no `type`, no `minor` where it is 0, and here no `major`
    // either for GPU 0's node. The runtime completes them from the host nodes, as the CDI
    // library does; the container's nodes have the host's numbers.
    let dev = host.dev_root().join("dev");
    let plugin_spec = json!({
        "cdiVersion": "0.5.0",
        "kind": "k8s.device-plugin.nvidia.com/gpu",
        "devices": [{
            "name": uuid(0),
            "containerEdits": {"deviceNodes": [
                {"path": "/dev/nvidia0", "hostPath": dev.join("nvidia0")},
            ]},
        }],
        "containerEdits": {"deviceNodes": [
            {"path": "/dev/nvidiactl", "hostPath": dev.join("nvidiactl"), "major": 195, "minor": 255},
            {"path": "/dev/nvidia-uvm", "hostPath": dev.join("nvidia-uvm"), "major": crate::common::fakehost::NVIDIA_UVM_MAJOR},
            {"path": "/dev/nvidia-uvm-tools", "hostPath": dev.join("nvidia-uvm-tools")},
        ]},
    });
    std::fs::write(
        dir.join("cdi/k8s-device-plugin.json"),
        serde_json::to_string_pretty(&plugin_spec).unwrap(),
    )
    .unwrap();
    let plugin_device: &'static str =
        Box::leak(format!("k8s.device-plugin.nvidia.com/gpu={}", uuid(0)).into_boxed_str());
    let e = run_pod(
        &cri,
        &dir,
        &Case {
            name: "cdi-plugin-spec",
            annotations: vec![("cdi.k8s.io/nvidia-device-plugin_gpu0", plugin_device)],
            script: Some("ls -l /dev/nvidia*; echo done"),
            ..Case::default()
        },
    );
    assert_eq!(e.exit_code, 0, "{}", e.text);
    let mut listed: Vec<(String, String)> = e
        .stdout
        .iter()
        .filter_map(|l| {
            let (before, after) = l.split_once(',')?;
            let node = l.split_whitespace().last()?.to_string();
            let major = before.split_whitespace().last()?;
            let minor = after.split_whitespace().next()?;
            Some((node, format!("{major}:{minor}")))
        })
        .collect();
    listed.sort();
    let mut want: Vec<(String, String)> =
        ["nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"]
            .iter()
            .map(|name| {
                let n = host
                    .device_nodes()
                    .iter()
                    .find(|n| n.path == dev.join(name))
                    .unwrap_or_else(|| panic!("the fake host has no {name}"));
                (format!("/dev/{name}"), format!("{}:{}", n.major, n.minor))
            })
            .collect();
    want.sort();
    assert_eq!(listed, want, "{}", e.text);

    // The device plugin's volume-mounts strategy, which refuses the envvar of unprivileged
    // containers.
    set_accept_keys(&toolkit_config, false, true);

    // (b) The device plugin's volume mount, host path /dev/null, at
    // /var/run/nvidia-container-devices/<UUID of GPU 0>. Only /dev/null mounts name devices
    // (upstream's rule): another mount there, from an empty dir, naming GPU 1, asks for nothing.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let b = run_pod(
        &cri,
        &dir,
        &Case {
            name: "volume",
            mounts: vec![
                (
                    PathBuf::from("/dev/null"),
                    format!("/var/run/nvidia-container-devices/{}", uuid(0)),
                ),
                (
                    empty.clone(),
                    format!("/var/run/nvidia-container-devices/{}", uuid(1)),
                ),
            ],
            ..Case::default()
        },
    );
    expect(&b, &legacy("/dev/nvidia0"));

    // (d) An unprivileged pod that sets NVIDIA_VISIBLE_DEVICES=all itself, without an
    // allocation: no GPU at all.
    let d = run_pod(
        &cri,
        &dir,
        &Case {
            name: "unallocated",
            envs: vec![("NVIDIA_VISIBLE_DEVICES", "all".to_string())],
            ..Case::default()
        },
    );
    expect(&d, &[]);
    assert!(
        d.stderr.iter().any(|l| l.contains("/dev/nvidia*")),
        "ls found nothing: {}",
        d.text
    );

    // The cdi-annotations strategy with the unprivileged env policy off (what README.md says
    // to set for it): the annotation still gives GPU 1, a pod's own NVIDIA_VISIBLE_DEVICES=all
    // gives nothing.
    set_accept_keys(&toolkit_config, false, false);
    let f = run_pod(
        &cri,
        &dir,
        &Case {
            name: "cdi-policy-off",
            annotations: vec![("cdi.k8s.io/test", "nvidia.com/gpu=1")],
            ..Case::default()
        },
    );
    expect(
        &f,
        &[
            "/dev/nvidia1",
            "/dev/nvidia-modeset",
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools",
            "/dev/nvidiactl",
        ],
    );
    let g = run_pod(
        &cri,
        &dir,
        &Case {
            name: "cdi-policy-off-unallocated",
            envs: vec![("NVIDIA_VISIBLE_DEVICES", "all".to_string())],
            ..Case::default()
        },
    );
    expect(&g, &[]);

    let containerd_log = cri.log();
    let (ok, log) = inst.stop();
    assert!(ok, "{log}");
    assert_eq!(
        std::fs::read(&engine_config).unwrap(),
        original,
        "the containerd config is not its original bytes:\n{log}"
    );
    assert!(!drop_in.exists(), "{log}");
    assert!(!dir.join("install").exists(), "{log}\n{containerd_log}");
    drop(cri);
    drop(cd);
}
