//! The runtime shim's CDI modes end to end: a real containerd 1.6 starting containers with
//! `ctr run --runc-binary <shim>` on the simulated 8-GPU host, in `cdi` mode (a spec written by
//! `nvidia-ctk cdi generate` into a private spec dir named by the shim's `spec-dirs`) and in
//! `jit-cdi` mode (no spec file), compared with what the legacy hook path gives for the same
//! request. Needs root, containerd, ctr, runc, busybox: fails loudly without them.

use crate::common::bundle::{self, Bundle, Image, CDI_HOOK, CTK, HOOK};
use crate::common::containerd::{start_containerd, Containerd};
use crate::common::fakehost::FakeHost;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime");

/// Lists the device nodes, the env var, then the mount table.
const SCRIPT: &str = "export PATH=/bin; ls -1 /dev/nvidia* 2>/dev/null; echo VIS=$NVIDIA_VISIBLE_DEVICES; echo ---; cat /proc/mounts; echo done";

struct Setup {
    dir: tempfile::TempDir,
    host: FakeHost,
    rootfs: String,
    config: PathBuf,
    shim_log: PathBuf,
}

impl Setup {
    fn new(prefix: &str) -> Setup {
        bundle::require_root();
        bundle::require("runc");
        bundle::require("containerd-shim-runc-v2");
        bundle::require("ctr");
        let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
        let host = FakeHost::builder()
            .gpus(8)
            .build(&dir.path().join("host"))
            .unwrap_or_else(|e| panic!("cannot build a fake host ({e}); run `cargo build --examples` and scripts/install-deps.sh first"));
        let rootfs = Bundle::new(dir.path(), Image::Busybox)
            .rootfs()
            .display()
            .to_string();
        let config = dir.path().join("config.toml");
        let shim_log = dir.path().join("shim.log");
        Setup {
            dir,
            host,
            rootfs,
            config,
            shim_log,
        }
    }

    /// (Re)writes the toolkit config the shim reads at each call: `mode` and the spec dirs.
    fn configure(&self, mode: &str, spec_dirs: &[&Path]) {
        let dirs: Vec<String> = spec_dirs
            .iter()
            .map(|d| format!("{:?}", d.display().to_string()))
            .collect();
        let extra = format!(
            "[nvidia-container-runtime]\nmode = {mode:?}\ndebug = {:?}\n[nvidia-container-runtime.modes.cdi]\nspec-dirs = [{}]\n\
             [nvidia-container-runtime-hook]\npath = {HOOK:?}\n",
            self.shim_log.display().to_string(),
            dirs.join(", "),
        );
        let written = bundle::write_config(
            self.dir.path(),
            &self.host.driver_root(),
            &self.host.proc_root(),
            &extra,
        );
        std::fs::rename(written, &self.config).unwrap();
    }

    /// `nvidia-ctk cdi generate` for the fake host into `<dir>/specs/nvidia.yaml`, hooks on.
    fn generate_spec(&self) -> PathBuf {
        let specs = self.dir.path().join("specs");
        std::fs::create_dir_all(&specs).unwrap();
        let s = |p: PathBuf| p.display().to_string();
        let mut cmd = Command::new(CTK);
        cmd.args([
            "cdi",
            "generate",
            "--driver-root",
            &s(self.host.driver_root()),
            "--dev-root",
            &s(self.host.dev_root()),
        ])
        .args([
            "--proc-root",
            &s(self.host.proc_root()),
            "--nvidia-cdi-hook-path",
            CDI_HOOK,
            "--output",
        ])
        .arg(specs.join("nvidia.yaml"));
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{cmd:?}: {}", text(&out));
        specs
    }

    /// `ctr run` through the shim with optional env and annotation; asserts that the host's
    /// mount table is the same afterwards.
    fn run(
        &self,
        cd: &Containerd,
        id: &str,
        env: Option<&str>,
        annotation: Option<&str>,
    ) -> (Output, String) {
        self.run_script(cd, id, env, annotation, SCRIPT)
    }

    /// [`Setup::run`] with another container script.
    fn run_script(
        &self,
        cd: &Containerd,
        id: &str,
        env: Option<&str>,
        annotation: Option<&str>,
        script: &str,
    ) -> (Output, String) {
        let mut cmd = Command::new(bundle::require("ctr"));
        cmd.arg("-a")
            .arg(&cd.sock)
            .args(["run", "--rm", "--runc-binary", SHIM]);
        if let Some(e) = env {
            cmd.args(["--env", e]);
        }
        if let Some(a) = annotation {
            cmd.args(["--annotation", a]);
        }
        let id = format!("{id}-{}", std::process::id());
        cmd.args(["--rootfs", &self.rootfs, &id, "/bin/sh", "-c", script]);
        let before = host_mounts();
        let out = cmd.stdin(Stdio::null()).output().expect("ctr run");
        assert_eq!(before, host_mounts(), "host mount table changed");
        let diag = format!(
            "{cmd:?}\n{}\n--- containerd log\n{}\n--- shim log\n{}",
            text(&out),
            std::fs::read_to_string(&cd.log).unwrap_or_default(),
            std::fs::read_to_string(&self.shim_log).unwrap_or_default()
        );
        (out, diag)
    }
}

/// The host's mount table without other engines' per-container state (other test runs share
/// this machine: podman's overlay and shm mounts and network namespaces come and go).
fn host_mounts() -> Vec<String> {
    let others = [
        "/var/lib/containers/",
        "/run/netns/",
        "/run/containers/",
        "/run/user/",
    ];
    bundle::host_mounts()
        .into_iter()
        .filter(|l| !others.iter().any(|o| l.starts_with(o)))
        .collect()
}

fn text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What a container saw.
#[derive(Debug)]
struct View {
    nodes: BTreeSet<String>,
    visible: String,
    mounts: Vec<String>,
}

fn view(out: &Output, diag: &str) -> View {
    assert!(out.status.success(), "{diag}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (head, tail) = stdout
        .split_once("---\n")
        .unwrap_or_else(|| panic!("no separator: {diag}"));
    assert!(tail.lines().any(|l| l == "done"), "{diag}");
    View {
        nodes: head
            .lines()
            .filter(|l| l.starts_with("/dev/nvidia"))
            .map(String::from)
            .collect(),
        visible: head
            .lines()
            .find_map(|l| l.strip_prefix("VIS="))
            .unwrap_or_default()
            .to_string(),
        mounts: tail.lines().map(String::from).collect(),
    }
}

/// The GPU nodes (`/dev/nvidiaN`) of a view.
fn gpus(v: &View) -> Vec<&str> {
    v.nodes
        .iter()
        .map(String::as_str)
        .filter(|n| n[11..].chars().all(|c| c.is_ascii_digit()) && n.len() > 11)
        .collect()
}

/// GPU 0 only, control nodes, libraries read-only, env voided.
fn assert_gpu0(v: &View, diag: &str) {
    assert_eq!(gpus(v), ["/dev/nvidia0"], "{diag}");
    assert!(
        v.nodes.contains("/dev/nvidiactl"),
        "no /dev/nvidiactl: {diag}"
    );
    assert_eq!(
        v.visible, "void",
        "NVIDIA_VISIBLE_DEVICES must be void in the container: {diag}"
    );
    let lib = "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15";
    let line = v
        .mounts
        .iter()
        .find(|l| l.split(' ').nth(1) == Some(lib))
        .unwrap_or_else(|| panic!("{lib} not mounted: {diag}"));
    let opts: Vec<&str> = line.split(' ').nth(3).unwrap().split(',').collect();
    assert!(
        opts.contains(&"ro") && opts.contains(&"nosuid") && opts.contains(&"nodev"),
        "{lib} must be ro,nosuid,nodev: {line}\n{diag}"
    );
}

/// The legacy hook path's view of `NVIDIA_VISIBLE_DEVICES=0` (same containerd, config switched).
/// `id` must differ between tests: runc's state root (`/run/containerd/runc/default`) is shared
/// by every containerd on the machine.
fn legacy_view(s: &Setup, cd: &Containerd, id: &str) -> View {
    s.configure("legacy", &[]);
    let (out, diag) = s.run(cd, id, Some("NVIDIA_VISIBLE_DEVICES=0"), None);
    view(&out, &diag)
}

/// A refused container: ctr fails and the name is in what the user sees or in the shim log.
fn assert_refused(out: &Output, diag: &str, name: &str) {
    assert!(
        !out.status.success(),
        "the container must be refused: {diag}"
    );
    let seen = format!("{}{}", String::from_utf8_lossy(&out.stderr), diag);
    assert!(seen.contains(name), "the error must name {name}: {diag}");
    assert!(seen.contains("unresolvable CDI device"), "{diag}");
}

#[test]
fn cdi_mode_with_a_generated_spec() {
    let s = Setup::new("nvct-shimcdi-");
    let specs = s.generate_spec();
    let empty = s.dir.path().join("no-specs-here");
    s.configure("cdi", &[&empty, &specs]);
    let cd = start_containerd(s.dir.path(), &s.config);

    let (out, diag) = s.run(
        &cd,
        "cdi-ann",
        None,
        Some("cdi.k8s.io/gpu=nvidia.com/gpu=0"),
    );
    let by_annotation = view(&out, &diag);
    assert_gpu0(&by_annotation, &diag);

    // GPU 0's /dev/dri/by-path links (its device entry's create-symlinks hook, which the shim
    // folds into the spec's apply-edits hook: one hook process) are made all the same.
    let (out, diag) = s.run_script(
        &cd,
        "cdi-links",
        Some("NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0"),
        None,
        "export PATH=/bin; ls -l /dev/dri/by-path/; echo done",
    );
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && listing.contains("done"), "{diag}");
    for target in ["../card1", "../renderD128"] {
        assert!(
            listing
                .lines()
                .any(|l| l.ends_with(&format!("-> {target}"))),
            "no by-path link to {target}: {listing}\n{diag}"
        );
    }
    assert!(
        std::fs::read_to_string(&s.shim_log)
            .unwrap_or_default()
            .contains("injected CDI devices nvidia.com/gpu=0 (cdi mode)"),
        "{diag}"
    );

    for (case, env) in [
        ("qualified env", "NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0"),
        ("bare index", "NVIDIA_VISIBLE_DEVICES=0"),
    ] {
        let (out, diag) = s.run(&cd, "cdi-env", Some(env), None);
        let v = view(&out, &diag);
        assert_gpu0(&v, &format!("case {case}: {diag}"));
        assert_eq!(v.nodes, by_annotation.nodes, "case {case}: {diag}");
    }

    let (out, diag) = s.run(
        &cd,
        "cdi-unknown",
        None,
        Some("cdi.k8s.io/gpu=nvidia.com/gpu=nosuch"),
    );
    assert_refused(&out, &diag, "nvidia.com/gpu=nosuch");

    // The legacy hook path gives the same GPUs; the CDI spec's control nodes include its.
    let legacy = legacy_view(&s, &cd, "cdi-legacy");
    assert_eq!(
        gpus(&legacy),
        gpus(&by_annotation),
        "legacy {legacy:?}\ncdi {by_annotation:?}"
    );
    assert!(
        legacy.nodes.is_subset(&by_annotation.nodes),
        "legacy {legacy:?}\ncdi {by_annotation:?}"
    );
    drop(cd);
}

#[test]
fn jit_cdi_mode_without_a_spec_file() {
    let s = Setup::new("nvct-shimjit-");
    s.configure("jit-cdi", &[&s.dir.path().join("no-specs-here")]);
    let cd = start_containerd(s.dir.path(), &s.config);

    let (out, diag) = s.run(&cd, "jit", Some("NVIDIA_VISIBLE_DEVICES=0"), None);
    let jit = view(&out, &diag);
    assert_gpu0(&jit, &diag);
    let log = std::fs::read_to_string(&s.shim_log).unwrap_or_default();
    assert!(
        log.contains(&format!(
            "(jit-cdi mode, hooks {})",
            Path::new(HOOK).with_file_name("nvidia-cdi-hook").display()
        )),
        "{diag}"
    );

    // As upstream, jit-cdi resolves NVIDIA_VISIBLE_DEVICES only: a CDI annotation (which only
    // cdi mode reads) gives the container nothing.
    let (out, diag) = s.run(
        &cd,
        "jit-ann",
        None,
        Some("cdi.k8s.io/gpu=nvidia.com/gpu=0"),
    );
    assert!(
        gpus(&view(&out, &diag)).is_empty(),
        "jit-cdi honoured an annotation: {diag}"
    );

    let (out, diag) = s.run(&cd, "jit-unknown", Some("NVIDIA_VISIBLE_DEVICES=9"), None);
    assert_refused(&out, &diag, "nvidia.com/gpu=9");

    let legacy = legacy_view(&s, &cd, "jit-legacy");
    assert_eq!(gpus(&legacy), gpus(&jit), "legacy {legacy:?}\njit {jit:?}");
    assert!(
        legacy.nodes.is_subset(&jit.nodes),
        "legacy {legacy:?}\njit {jit:?}"
    );
    drop(cd);
}

/// A refused container whose error (seen by the user or in the shim log) contains each of
/// `needles`.
fn assert_refused_with(out: &Output, diag: &str, needles: &[&str]) {
    assert!(
        !out.status.success(),
        "the container must be refused: {diag}"
    );
    for needle in needles {
        assert!(
            diag.contains(needle),
            "the error must say {needle:?}: {diag}"
        );
    }
}

/// The spec `generate_spec` wrote, as JSON.
fn read_spec(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    nvct_cdi::spec::parse_value(&text).unwrap()
}

/// Every device node object of a spec (spec-level and per device).
fn nodes_mut(spec: &mut serde_json::Value) -> Vec<&mut serde_json::Value> {
    let mut out: Vec<&mut serde_json::Value> = Vec::new();
    let (devices, top) = {
        let obj = spec.as_object_mut().unwrap();
        let mut devices = None;
        let mut top = None;
        for (k, v) in obj.iter_mut() {
            match k.as_str() {
                "devices" => devices = Some(v),
                "containerEdits" => top = Some(v),
                _ => {}
            }
        }
        (devices, top)
    };
    let edits = devices
        .into_iter()
        .flat_map(|d| d.as_array_mut().unwrap().iter_mut())
        .map(|d| &mut d["containerEdits"])
        .chain(top);
    for e in edits {
        if let Some(nodes) = e.get_mut("deviceNodes").and_then(|n| n.as_array_mut()) {
            out.extend(nodes.iter_mut());
        }
    }
    out
}

/// The same spec in two spec directories: the later directory's devices win (both orders);
/// two files of one directory that define the requested device are refused, naming both.
#[test]
fn cdi_mode_same_spec_in_two_dirs() {
    let s = Setup::new("nvct-shimcdi2-");
    let later = s.generate_spec();
    // The earlier directory's copy: device "0" is GPU 3 there.
    let earlier = s.dir.path().join("etc-cdi");
    std::fs::create_dir_all(&earlier).unwrap();
    let mut spec = read_spec(&later.join("nvidia.yaml"));
    let gpu3 = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "3")
        .unwrap()
        .clone();
    for d in spec["devices"].as_array_mut().unwrap() {
        if d["name"] == "0" {
            d["containerEdits"] = gpu3["containerEdits"].clone();
        }
    }
    std::fs::write(
        earlier.join("nvidia.yaml"),
        serde_json::to_string_pretty(&spec).unwrap(),
    )
    .unwrap();

    s.configure("cdi", &[&earlier, &later]);
    let cd = start_containerd(s.dir.path(), &s.config);
    let ann = Some("cdi.k8s.io/gpu=nvidia.com/gpu=0");
    let (out, diag) = s.run(&cd, "cdi-two-dirs", None, ann);
    let v = view(&out, &diag);
    assert_gpu0(&v, &diag);

    // The other order: the (edited) copy is now the later one and wins.
    s.configure("cdi", &[&later, &earlier]);
    let (out, diag) = s.run(&cd, "cdi-two-dirs-swapped", None, ann);
    assert_eq!(gpus(&view(&out, &diag)), ["/dev/nvidia3"], "{diag}");

    // Two files of one directory: refused, both named, even though the other dir has it too.
    std::fs::copy(later.join("nvidia.yaml"), later.join("copy.yaml")).unwrap();
    s.configure("cdi", &[&earlier, &later]);
    let (out, diag) = s.run(&cd, "cdi-two-dirs-conflict", None, ann);
    assert_refused_with(
        &out,
        &diag,
        &[
            "nvidia.com/gpu=0 is defined twice in one spec directory",
            &later.join("copy.yaml").display().to_string(),
            &later.join("nvidia.yaml").display().to_string(),
        ],
    );
    drop(cd);
}

/// A spec as Go's `omitempty` writes it (the NVIDIA device plugin's own spec): no `type`,
/// no `minor` where it is 0, and here no `major` either for those nodes. The container gets
/// the host nodes' numbers; a node that gives none and is not on the host is refused, naming
/// it and the spec file.
#[test]
fn cdi_mode_spec_without_node_numbers() {
    let s = Setup::new("nvct-shimcdi-go-");
    let specs = s.generate_spec();
    let file = specs.join("nvidia.yaml");
    let mut spec = read_spec(&file);
    let mut stripped = 0;
    for n in nodes_mut(&mut spec) {
        let n = n.as_object_mut().unwrap();
        n.remove("type");
        if n.get("minor").and_then(|m| m.as_u64()) == Some(0) {
            n.remove("minor");
            n.remove("major");
            stripped += 1;
        }
    }
    assert!(stripped >= 2, "nvidia0 and nvidia-uvm lose their numbers");
    std::fs::remove_file(&file).unwrap();
    let json = specs.join("k8s-device-plugin.json");
    std::fs::write(&json, serde_json::to_string_pretty(&spec).unwrap()).unwrap();

    s.configure("cdi", &[&specs]);
    let cd = start_containerd(s.dir.path(), &s.config);
    let script =
        "export PATH=/bin; ls -l /dev/nvidia0 /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools";
    let (out, diag) = s.run_script(
        &cd,
        "cdi-go",
        None,
        Some("cdi.k8s.io/gpu=nvidia.com/gpu=0"),
        script,
    );
    assert!(out.status.success(), "{diag}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dev = s.host.dev_root().join("dev");
    for name in ["nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] {
        let host = s
            .host
            .device_nodes()
            .iter()
            .find(|n| n.path == dev.join(name))
            .unwrap_or_else(|| panic!("the fake host has no {name}"));
        let line = stdout
            .lines()
            .find(|l| l.ends_with(&format!(" /dev/{name}")))
            .unwrap_or_else(|| panic!("/dev/{name} not in the container: {diag}"));
        // busybox: `crw-rw-rw-    1 0  0  195,   0 Jan  1 00:00 /dev/nvidia0`
        assert!(line.starts_with('c'), "{line}: {diag}");
        let numbers: Vec<String> = line
            .split(',')
            .map(|p| p.split_whitespace().collect::<Vec<_>>())
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    w.last().unwrap().to_string()
                } else {
                    w.first().unwrap().to_string()
                }
            })
            .collect();
        assert_eq!(
            numbers,
            [host.major.to_string(), host.minor.to_string()],
            "/dev/{name}: {line}\n{diag}"
        );
    }

    // A node with no numbers that the host does not have: refused, naming it and the file.
    let gone = dev.join("nvidia-gone");
    for d in spec["devices"].as_array_mut().unwrap() {
        if d["name"] == "0" {
            d["containerEdits"]["deviceNodes"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"path": "/dev/nvidia-gone", "hostPath": gone}));
        }
    }
    std::fs::write(&json, serde_json::to_string_pretty(&spec).unwrap()).unwrap();
    let (out, diag) = s.run(
        &cd,
        "cdi-go-gone",
        None,
        Some("cdi.k8s.io/gpu=nvidia.com/gpu=0"),
    );
    assert_refused_with(
        &out,
        &diag,
        &[
            &format!(
                "{}: CDI device node /dev/nvidia-gone gives no type and major",
                json.display()
            ),
            &gone.display().to_string(),
        ],
    );
    drop(cd);
}
