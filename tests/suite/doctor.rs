//! Black-box tests of `nvidia-ctk doctor`, `nvidia-ctk info` and `nvidia-ctk system` on
//! simulated GPU hosts: a healthy node is all ok (exit 0); each seeded fault turns its check to
//! `fail` with a fix line, and the exit code to 2. The engines' configs are written by our own
//! `nvidia-ctk runtime configure` in upstream's drop-in layout (and read back by doctor through
//! `containerd config dump` and CRI-O's `crio.conf.d`).

use crate::common::bundle::{self, CTK};
use crate::common::fakehost::FakeHost;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime");

fn ctk(args: &[&str]) -> Output {
    Command::new(CTK).args(args).output().unwrap()
}

/// `nvidia-ctk` inside this run's simulated host (common::hostkind).
fn on_host(args: &[&str]) -> Output {
    crate::common::hostkind::command(CTK)
        .args(args)
        .output()
        .unwrap()
}

fn ok_or_panic(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", bundle::out_text(out));
}

/// A simulated node: a fake GPU host, the toolkit config, the engines' configs with the nvidia
/// runtime, a CDI spec, /dev/char links and node labels that match the hardware.
struct Node {
    dir: PathBuf,
    host: FakeHost,
    config: PathBuf,
    containerd: PathBuf,
    docker: PathBuf,
    crio: PathBuf,
    cdi_dir: PathBuf,
    labels: PathBuf,
}

impl Node {
    fn healthy(name: &str) -> Node {
        bundle::require("containerd");
        let (dir, host) = bundle::scratch_host(&format!("nvct-doctor-{name}-"), 2);
        let config = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
        let node = Node {
            containerd: dir.join("containerd/config.toml"),
            docker: dir.join("docker/daemon.json"),
            crio: dir.join("crio/crio.conf"),
            cdi_dir: dir.join("cdi"),
            labels: dir.join("node.json"),
            dir,
            host,
            config,
        };
        // Upstream's layout (a drop-in for containerd and CRI-O, as `runtime configure` writes by
        // default), next to each file instead of in the host's /etc: doctor reads them through
        // containerd's imports and CRI-O's crio.conf.d.
        for (engine, path, drop_in) in [
            ("containerd", &node.containerd, "conf.d/99-nvidia.toml"),
            ("docker", &node.docker, ""),
            ("crio", &node.crio, "crio.conf.d/99-nvidia.toml"),
        ] {
            let dir = path.parent().unwrap();
            std::fs::create_dir_all(dir).unwrap();
            let drop_in = match drop_in {
                "" => String::new(),
                d => format!("--drop-in-config={}", dir.join(d).display()),
            };
            let mut args = vec![
                "runtime".to_string(),
                "configure".into(),
                format!("--runtime={engine}"),
                format!("--config={}", path.display()),
                format!("--nvidia-runtime-path={SHIM}"),
            ];
            args.extend((!drop_in.is_empty()).then_some(drop_in));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = ctk(&args);
            ok_or_panic(&out, engine);
        }
        let out = ctk(&[
            "cdi",
            "generate",
            &format!("--driver-root={}", node.host.driver_root().display()),
            &format!("--proc-root={}", node.host.proc_root().display()),
            &format!("--output={}", node.cdi_dir.join("nvidia.yaml").display()),
        ]);
        ok_or_panic(&out, "cdi generate");
        let out = ctk(&[
            "system",
            "create-dev-char-symlinks",
            &format!("--dev-root={}", node.host.dev_root().display()),
            &format!("--proc-root={}", node.host.proc_root().display()),
        ]);
        ok_or_panic(&out, "create-dev-char-symlinks");
        node.write_labels("81559");
        node
    }

    fn write_labels(&self, memory: &str) {
        self.write_node(
            memory,
            serde_json::json!({"cpu": "8", "nvidia.com/gpu": "2"}),
        );
    }

    /// The node `gpu-node-1` as `kubectl get node gpu-node-1 -o json` shows it: these labels
    /// (the hardware's but for `memory`) and this `status.allocatable`.
    fn write_node(&self, memory: &str, allocatable: Value) {
        let node = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-node-1", "labels": {
                "kubernetes.io/hostname": "gpu-node-1",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.memory": memory,
                "nvidia.com/gpu.count": "2",
            }},
            "status": {"allocatable": allocatable, "capacity": {"cpu": "8"}},
        });
        std::fs::write(&self.labels, node.to_string()).unwrap();
    }

    /// Appends `text` to the toolkit config.
    fn add_config(&self, text: &str) {
        let mut config = std::fs::read_to_string(&self.config).unwrap();
        config += text;
        std::fs::write(&self.config, config).unwrap();
    }

    /// `doctor --format json`: (exit code, checks by name, the whole output for messages).
    /// Runs on this run's kind of host (`NVCT_TEST_HOST`: on the simulated v2 and Ubuntu hosts
    /// doctor sees their cgroup2 mount and ldconfig).
    fn doctor(&self) -> (i32, Vec<(String, String, String, String)>, String) {
        self.doctor_dirs(&[&self.cdi_dir])
    }

    /// [`Node::doctor`] with these CDI spec directories.
    fn doctor_dirs(
        &self,
        cdi_dirs: &[&Path],
    ) -> (i32, Vec<(String, String, String, String)>, String) {
        let mut args = vec![
            "doctor".to_string(),
            "--format=json".into(),
            format!("--config={}", self.config.display()),
            format!("--containerd-config={}", self.containerd.display()),
            format!("--docker-config={}", self.docker.display()),
            format!("--crio-config={}", self.crio.display()),
            format!("--node-labels={}", self.labels.display()),
        ];
        args.extend(
            cdi_dirs
                .iter()
                .map(|d| format!("--cdi-spec-dir={}", d.display())),
        );
        let out = on_host(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let text = bundle::out_text(&out);
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor's JSON: {e}\n{text}"));
        let checks = v["checks"]
            .as_array()
            .unwrap_or_else(|| panic!("no checks array\n{text}"))
            .iter()
            .map(|c| {
                let s = |k: &str| {
                    c[k].as_str()
                        .unwrap_or_else(|| panic!("{k} in {c}"))
                        .to_string()
                };
                (s("name"), s("status"), s("detail"), s("fix"))
            })
            .collect();
        (out.status.code().unwrap_or(-1), checks, text)
    }
}

fn a_healthy_node_is_all_ok() {
    let node = Node::healthy("healthy");
    let (code, checks, text) = node.doctor();
    let names: Vec<&str> = checks.iter().map(|c| c.0.as_str()).collect();
    for want in [
        "config",
        "driver",
        "nvml",
        "gpu device nodes",
        "control device nodes",
        "persistence mode",
        "libraries",
        "ldconfig",
        "cgroup",
        "engine containerd",
        "engine docker",
        "engine crio",
        "systemd cgroups",
        "/dev/char links",
        "cdi specs",
        "node labels",
        "low-level runtime",
        "node allocatable",
    ] {
        assert!(
            names.contains(&want),
            "no {want:?} check: {names:?}\n{text}"
        );
    }
    for (name, status, detail, _) in &checks {
        assert_eq!(status, "ok", "{name}: {detail}\n{text}");
    }
    assert_eq!(code, 0, "{text}");
    // The hook's cgroup path as this kind of host has it.
    let cgroup = checks.iter().find(|c| c.0 == "cgroup").unwrap();
    let want = match crate::common::hostkind::kind() {
        crate::common::hostkind::HostKind::V1 => "cgroup v1: the hook writes device rules",
        _ => "cgroup v2: the hook extends the container's eBPF device program",
    };
    assert!(cgroup.2.contains(want), "{cgroup:?}");
    let containerd = checks.iter().find(|c| c.0 == "engine containerd").unwrap();
    assert!(
        containerd.2.contains("containerd config dump"),
        "read through containerd itself: {containerd:?}"
    );
    // The text form says the same, one line per check.
    let out = ctk(&[
        "doctor",
        &format!("--config={}", node.config.display()),
        &format!("--containerd-config={}", node.containerd.display()),
        &format!("--docker-config={}", node.docker.display()),
        &format!("--crio-config={}", node.crio.display()),
        &format!("--cdi-spec-dir={}", node.cdi_dir.display()),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", bundle::out_text(&out));
    let lines: Vec<&str> = stdout.lines().collect();
    let (last, checks_text) = lines.split_last().expect("doctor printed nothing");
    assert!(
        checks_text.iter().all(|l| l.starts_with("ok  ")),
        "{stdout}"
    );
    assert_eq!(
        *last,
        format!("all {} checks ok", checks_text.len()),
        "the closing line: {stdout}"
    );
}

fn each_seeded_fault_fails_its_check_with_a_fix() {
    type Seed = fn(&Node);
    // (case, the fault, the check that must fail, words its detail must contain)
    let cases: &[(&str, Seed, &str, &str)] = &[
        (
            "missing /dev/nvidia-uvm",
            |n| std::fs::remove_file(n.host.dev_root().join("dev/nvidia-uvm")).unwrap(),
            "control device nodes",
            "/dev/nvidia-uvm",
        ),
        (
            "NVML fails to initialise",
            |n| std::fs::write(n.host.lib_dir().join("fake-nvml.json"), "{").unwrap(),
            "nvml",
            "cannot load and initialise NVML",
        ),
        (
            "containerd config without the nvidia runtime",
            |n| std::fs::write(&n.containerd, "version = 2\n").unwrap(),
            "engine containerd",
            "has no `nvidia` runtime",
        ),
        (
            "Debian's containerd config and a drop-in without runc (what configure once wrote)",
            |n| {
                let debian = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/fixtures/containerd-debian/config.toml");
                let drop_in = n.containerd.with_file_name("conf.d/99-nvidia.toml");
                let text = std::fs::read_to_string(debian).unwrap();
                let imports = format!("imports = [{:?}]\n", drop_in.display().to_string());
                std::fs::write(
                    &n.containerd,
                    text.replacen("version = 2\n", &format!("version = 2\n{imports}"), 1),
                )
                .unwrap();
                let cri = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia";
                std::fs::write(
                    drop_in,
                    format!("version = 2\n{cri}]\nruntime_type = \"io.containerd.runc.v2\"\n{cri}.options]\nBinaryName = {SHIM:?}\n"),
                )
                .unwrap();
            },
            "engine containerd",
            "default runtime `runc` is not among the runtimes it would load (nvidia)",
        ),
        (
            "CRI-O drop-in not TOML",
            |n| {
                std::fs::write(
                    n.crio.with_file_name("crio.conf.d/99-nvidia.toml"),
                    "[crio\n",
                )
                .unwrap()
            },
            "engine crio",
            "99-nvidia.toml:1: invalid TOML",
        ),
        (
            "CDI spec for other GPU UUIDs",
            |n| {
                let path = n.cdi_dir.join("nvidia.yaml");
                let mut text = std::fs::read_to_string(&path).unwrap();
                for g in n.host.gpus() {
                    text = text.replace(&g.uuid, &g.uuid.replace("GPU-", "GPU-0ld"));
                }
                std::fs::write(&path, text).unwrap();
            },
            "cdi specs",
            "is stale",
        ),
        (
            "Ubuntu's ldconfig wrapper configured as the ldconfig",
            |n| {
                let sbin = n.dir.join("ubuntu-sbin");
                std::fs::create_dir_all(&sbin).unwrap();
                std::fs::write(
                    sbin.join("ldconfig"),
                    "#!/bin/sh\nexec /sbin/ldconfig.real \"$@\"\n",
                )
                .unwrap();
                let mut text = std::fs::read_to_string(&n.config).unwrap();
                text += &format!("ldconfig = \"@{}\"\n", sbin.join("ldconfig").display());
                std::fs::write(&n.config, text).unwrap();
            },
            "ldconfig",
            "a script",
        ),
        (
            "a stale gpu.memory label",
            |n| n.write_labels("40960"),
            "node labels",
            "the node says 40960, the hardware 81559",
        ),
        (
            "a spec file that is not a spec",
            |n| std::fs::write(n.cdi_dir.join("broken.yaml"), "cdiVersion: [").unwrap(),
            "cdi specs",
            "broken.yaml",
        ),
    ];
    for (case, seed, check, words) in cases {
        // A short prefix: the simulated host's sockets need paths shorter than SUN_LEN.
        let prefix: String = case
            .replace(|c: char| !c.is_ascii_alphanumeric(), "-")
            .chars()
            .take(16)
            .collect();
        let node = Node::healthy(&prefix);
        seed(&node);
        let (code, checks, text) = node.doctor();
        let failed: Vec<_> = checks
            .iter()
            .filter(|c| c.0 == *check && c.1 == "fail")
            .collect();
        assert!(!failed.is_empty(), "{case}: {check} did not fail\n{text}");
        assert!(
            failed.iter().any(|c| c.2.contains(words)),
            "{case}: {check}'s detail lacks {words:?}: {failed:?}"
        );
        assert!(
            failed.iter().all(|c| !c.3.is_empty()),
            "{case}: a failure without a fix: {failed:?}"
        );
        assert_eq!(code, 2, "{case}\n{text}");
    }
}

/// The same spec in the two default directories (NVIDIA's install guide writes /etc/cdi, the
/// refresh unit /var/run/cdi): a warning naming both files, the later one used; two files of
/// one directory defining the same devices: a failure naming both.
#[test]
fn a_shadowed_spec_is_a_warning_and_a_conflict_a_failure() {
    let node = Node::healthy("shadowed-spec");
    let etc = node.dir.join("etc-cdi");
    std::fs::create_dir_all(&etc).unwrap();
    let (early, late) = (etc.join("nvidia.yaml"), node.cdi_dir.join("nvidia.yaml"));
    std::fs::copy(&late, &early).unwrap();
    let (code, checks, text) = node.doctor_dirs(&[&etc, &node.cdi_dir]);
    let warned: Vec<_> = checks
        .iter()
        .filter(|c| c.0 == "cdi specs" && c.1 == "warn")
        .collect();
    assert_eq!(warned.len(), 1, "{text}");
    assert!(
        warned[0].2.starts_with(&format!(
            "{} is shadowed by {} (a later spec directory wins)",
            early.display(),
            late.display()
        )),
        "{warned:?}"
    );
    assert!(!warned[0].3.is_empty(), "{warned:?}");
    assert!(
        !checks.iter().any(|c| c.1 == "fail"),
        "nothing fails: {text}"
    );
    assert_eq!(code, 1, "{text}");

    let copy = node.cdi_dir.join("copy.yaml");
    std::fs::copy(&late, &copy).unwrap();
    let (code, checks, text) = node.doctor();
    let failed: Vec<_> = checks
        .iter()
        .filter(|c| c.0 == "cdi specs" && c.1 == "fail")
        .collect();
    assert_eq!(failed.len(), 1, "one failure for the pair of files: {text}");
    assert!(
        failed[0].2.contains(&format!(
            " are defined by {} and by {}, two files of one spec directory",
            copy.display(),
            late.display()
        )) && failed[0].3.contains("remove one of"),
        "{text}"
    );
    assert_eq!(code, 2, "{text}");
    // Shadowing is a question about the files, not the driver: with the driver root gone it is
    // still reported, and only the comparison of the spec with the host is skipped.
    std::fs::remove_file(&copy).unwrap();
    std::fs::rename(node.host.driver_root(), node.dir.join("moved")).unwrap();
    let (code, checks, text) = node.doctor_dirs(&[&etc, &node.cdi_dir]);
    let cdi: Vec<(&str, &str)> = checks
        .iter()
        .filter(|c| c.0 == "cdi specs")
        .map(|c| (c.1.as_str(), c.2.as_str()))
        .collect();
    // The warning, and one skipped comparison per spec file.
    assert_eq!(cdi.len(), 3, "{text}");
    assert!(
        cdi[0].0 == "warn" && cdi[0].1.contains("is shadowed by"),
        "{cdi:?}"
    );
    for c in &cdi[1..] {
        assert_eq!(*c, ("skip", "skipped: needs driver"), "{text}");
    }
    assert_eq!(not_ok(&checks).0, ["driver"], "{text}");
    assert_eq!(code, 2, "{text}");
}

#[test]
fn a_bad_config_is_an_error_naming_the_file() {
    let node = Node::healthy("bad-config");
    std::fs::write(&node.config, "[nvidia-container-runtime]\nmode = \"cdl\"\n").unwrap();
    let out = ctk(&["doctor", &format!("--config={}", node.config.display())]);
    let text = bundle::out_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains(&node.config.display().to_string()), "{text}");
}

#[test]
fn info_lists_the_gpus_and_what_each_capability_gets() {
    let node = Node::healthy("info");
    let out = ctk(&[
        "info",
        "--format=json",
        &format!("--config={}", node.config.display()),
    ]);
    ok_or_panic(&out, "info");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["driver_version"], node.host.driver_version());
    assert_eq!(v["cuda_version"], "12.4");
    let gpus = v["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    for (g, want) in gpus.iter().zip(node.host.gpus()) {
        assert_eq!(g["uuid"], want.uuid.as_str());
        assert_eq!(g["bus_id"], want.bus_id.as_str());
        assert_eq!(g["minor"], want.minor);
        assert_eq!(g["memory_mib"], 81559);
        assert_eq!(g["name"], want.model.as_str());
    }
    let caps = v["capabilities"].as_array().unwrap();
    let compute = caps.iter().find(|c| c["capability"] == "compute").unwrap();
    let files: Vec<&str> = compute["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        files
            .iter()
            .any(|f| f.ends_with(&format!("libcuda.so.{}", node.host.driver_version()))),
        "{files:?}"
    );
    assert!(
        v["mode"].as_str().unwrap().starts_with("auto (legacy"),
        "{v}"
    );
}

#[test]
fn system_commands_create_what_is_missing_and_nothing_else() {
    let (dir, host) = bundle::scratch_host("nvct-system-", 2);
    let dev = host.dev_root();
    let roots = [
        format!("--dev-root={}", dev.display()),
        format!("--proc-root={}", host.proc_root().display()),
    ];
    std::fs::remove_file(dev.join("dev/nvidia-uvm")).unwrap();
    std::fs::remove_file(dev.join("dev/nvidiactl")).unwrap();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        a.extend(roots.iter().cloned());
        a
    };
    // Dry run: says what it would create, creates nothing.
    let out = Command::new(CTK)
        .args(args(&[
            "system",
            "create-device-nodes",
            "--control-devices",
            "--dry-run",
        ]))
        .output()
        .unwrap();
    ok_or_panic(&out, "dry run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("would create") && stdout.contains("nvidia-uvm"),
        "{stdout}"
    );
    assert!(!dev.join("dev/nvidia-uvm").exists());
    let out = Command::new(CTK)
        .args(args(&[
            "system",
            "create-device-nodes",
            "--control-devices",
        ]))
        .output()
        .unwrap();
    ok_or_panic(&out, "create-device-nodes");
    for (name, major, minor) in [("nvidia-uvm", 508, 0), ("nvidiactl", 195, 255)] {
        use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
        let m = std::fs::metadata(dev.join("dev").join(name)).unwrap();
        assert!(m.file_type().is_char_device(), "{name}");
        assert_eq!(
            (libc::major(m.rdev()), libc::minor(m.rdev())),
            (major, minor),
            "{name}"
        );
        assert_eq!(m.permissions().mode() & 0o777, 0o666, "{name}");
    }
    // Links: one per node, relative, and a second run changes nothing.
    for run in 0..2 {
        let out = Command::new(CTK)
            .args(args(&["system", "create-dev-char-symlinks"]))
            .output()
            .unwrap();
        ok_or_panic(&out, "create-dev-char-symlinks");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.contains("created"), run == 0, "run {run}: {stdout}");
    }
    let link = dev.join("dev/char/195:1");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("../nvidia1"));
    assert_eq!(
        std::fs::canonicalize(&link).unwrap(),
        std::fs::canonicalize(dev.join("dev/nvidia1")).unwrap()
    );
    // A regular file where a link should be is refused by name, and left as it was.
    std::fs::remove_file(&link).unwrap();
    std::fs::write(&link, "mine").unwrap();
    let out = Command::new(CTK)
        .args(args(&["system", "create-dev-char-symlinks"]))
        .output()
        .unwrap();
    let text = bundle::out_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("195:1 exists but is a regular file, not a symlink to ../nvidia1"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "mine");
    std::fs::remove_file(&link).unwrap();
    // A regular file where a node should be is refused by name, and left as it was.
    std::fs::remove_file(dev.join("dev/nvidia-uvm-tools")).unwrap();
    std::fs::write(dev.join("dev/nvidia-uvm-tools"), "mine").unwrap();
    let out = Command::new(CTK)
        .args(args(&[
            "system",
            "create-device-nodes",
            "--control-devices",
        ]))
        .output()
        .unwrap();
    let text = bundle::out_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("nvidia-uvm-tools exists but is a regular file"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(dev.join("dev/nvidia-uvm-tools")).unwrap(),
        "mine"
    );
    // Without the nvidia-uvm module (not in /proc/devices): an error that says so.
    let devices = host.proc_root().join("devices");
    let text = std::fs::read_to_string(&devices)
        .unwrap()
        .replace("508 nvidia-uvm\n", "");
    std::fs::write(&devices, text).unwrap();
    std::fs::remove_file(dev.join("dev/nvidia-uvm-tools")).unwrap();
    let out = Command::new(CTK)
        .args(args(&[
            "system",
            "create-device-nodes",
            "--control-devices",
        ]))
        .output()
        .unwrap();
    let text = bundle::out_text(&out);
    assert!(
        !out.status.success() && text.contains("modprobe nvidia-uvm"),
        "{text}"
    );
    drop(dir);
}

#[test]
fn label_node_writes_the_feature_file_golden() {
    const HEADER: &str = "# Written by nvidia-ctk system label-node from this node's GPUs.\n";
    let golden = |count: u32| {
        format!(
            "{HEADER}nvidia.com/cuda.driver.major=550\nnvidia.com/cuda.driver.minor=54\n\
             nvidia.com/cuda.driver.rev=15\nnvidia.com/cuda.runtime.major=12\n\
             nvidia.com/cuda.runtime.minor=4\nnvidia.com/gpu.count={count}\n\
             nvidia.com/gpu.family=hopper\nnvidia.com/gpu.memory=81559\n\
             nvidia.com/gpu.present=true\nnvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n\
             nvidia.com/mig.capable=true\n"
        )
    };
    bundle::require_root();
    let dir = tempfile::Builder::new()
        .prefix("nvct-labels-")
        .tempdir()
        .unwrap();
    // (case, GPUs, MIG on GPU 0)
    for (case, gpus, mig) in [("8 GPUs", 8, false), ("MIG", 2, true)] {
        let host = FakeHost::builder()
            .gpus(gpus)
            .mig(mig)
            .build(&dir.path().join(case.replace(' ', "-")))
            .unwrap();
        let config = bundle::write_config(dir.path(), &host.driver_root(), &host.proc_root(), "");
        let out_file = dir.path().join(format!("{gpus}/features.d/nvidia"));
        let out = ctk(&[
            "system",
            "label-node",
            &format!("--config={}", config.display()),
            &format!("--output={}", out_file.display()),
        ]);
        ok_or_panic(&out, case);
        assert_eq!(
            std::fs::read_to_string(&out_file).unwrap(),
            golden(gpus),
            "{case}"
        );
    }
}

/// (name, status, detail, fix) of doctor's JSON.
type Checks = Vec<(String, String, String, String)>;

/// The checks not ok: (failed, skipped), by name.
fn not_ok(checks: &Checks) -> (Vec<&str>, Vec<&str>) {
    let with = |s: &str| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.1 == s)
            .map(|c| c.0.as_str())
            .collect()
    };
    (with("fail"), with("skip"))
}

/// One cause is one failure: the checks that need the failed one are skipped and say which
/// they need, the node's own set-up is still checked, and no fix writes under a directory that
/// is not there.
fn one_cause_is_one_failure_and_its_dependants_are_skipped() {
    const GPU: &[&str] = &[
        "nvml",
        "gpu device nodes",
        "control device nodes",
        "persistence mode",
        "libraries",
        "/dev/char links",
        "cdi specs",
        "node labels",
        "node allocatable",
        // CRI-O uses the systemd cgroup driver: the trap is a question about the links.
        "systemd cgroups",
    ];
    const NODES: &[&str] = &[
        "gpu device nodes",
        "control device nodes",
        "/dev/char links",
        "systemd cgroups",
        "cdi specs",
    ];
    type Seed = fn(&Node) -> PathBuf;
    // (case, the fault (returns the directory that is not there), the one failure, the skips)
    let cases: &[(&str, Seed, &str, &[&str])] = &[
        (
            "driver root missing",
            |n| {
                let root = n.host.driver_root();
                std::fs::rename(&root, n.dir.join("driver-moved")).unwrap();
                root
            },
            "driver",
            GPU,
        ),
        (
            "the driver container not running: its root and the ldconfig in it",
            |n| {
                let root = n.host.driver_root();
                n.add_config(&format!(
                    "ldconfig = \"@{}\"\n",
                    root.join("sbin/ldconfig").display()
                ));
                std::fs::rename(&root, n.dir.join("driver-moved")).unwrap();
                root
            },
            "driver",
            &[GPU, &["ldconfig"]].concat(),
        ),
        (
            "kernel module not loaded",
            |n| {
                std::fs::remove_file(n.host.proc_root().join("driver/nvidia/version")).unwrap();
                std::fs::write(n.host.lib_dir().join("fake-nvml.json"), "{").unwrap();
                n.host.proc_root().join("driver/nvidia/version")
            },
            "driver",
            GPU,
        ),
        (
            "device root missing",
            |n| {
                let dev_root = n.dir.join("no-such-dev-root");
                n.add_config(&format!(
                    "dev-root = {:?}\n",
                    dev_root.display().to_string()
                ));
                dev_root
            },
            "device root",
            NODES,
        ),
    ];
    for (case, seed, failure, skips) in cases {
        let node = Node::healthy(&case.replace(' ', "-"));
        let gone = seed(&node);
        let (code, checks, text) = node.doctor();
        let (failed, skipped) = not_ok(&checks);
        assert_eq!(failed, [*failure], "{case}: one failure\n{text}");
        let mut want: Vec<&str> = skips.to_vec();
        let mut got = skipped.clone();
        want.sort();
        got.sort();
        got.dedup();
        assert_eq!(got, want, "{case}: the skipped checks\n{text}");
        for c in checks.iter().filter(|c| c.1 == "skip") {
            assert_eq!(c.2, format!("skipped: needs {failure}"), "{case}: {c:?}");
            assert!(c.3.is_empty(), "{case}: a skipped check has no fix: {c:?}");
        }
        for c in &checks {
            assert!(
                !c.3.contains("mknod") && !c.3.contains(&gone.display().to_string()),
                "{case}: a fix writes where nothing is: {c:?}"
            );
        }
        let fail = checks.iter().find(|c| c.0 == *failure).unwrap();
        assert!(!fail.3.is_empty(), "{case}: {fail:?}");
        for name in [
            "ldconfig",
            "cgroup",
            "low-level runtime",
            "engine containerd",
            "engine crio",
        ] {
            if skips.contains(&name) {
                continue;
            }
            let c = checks.iter().find(|c| c.0 == name).unwrap();
            assert_eq!(c.1, "ok", "{case}: {name} is still checked: {c:?}");
        }
        assert_eq!(code, 2, "{case}\n{text}");
    }
    // The text form: the same, one line per check.
    let node = Node::healthy("driver-root-missing-text");
    std::fs::rename(node.host.driver_root(), node.dir.join("moved")).unwrap();
    let out = ctk(&[
        "doctor",
        &format!("--config={}", node.config.display()),
        &format!("--containerd-config={}", node.containerd.display()),
        &format!("--cdi-spec-dir={}", node.cdi_dir.display()),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{}", bundle::out_text(&out));
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("fail")).count(),
        1,
        "{stdout}"
    );
    assert!(
        stdout.contains("\nskip  gpu device nodes: skipped: needs driver\n"),
        "{stdout}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("1 failure, ") && last.ends_with(": fix \"driver\" first"),
        "the closing line names the one cause: {stdout}"
    );
}

/// The shim execs the first of `nvidia-container-runtime.runtimes` found: a list with none that
/// exists fails the check, and the fix it prints, run as printed, makes it pass.
#[test]
fn runtimes_without_an_executable_fail_and_the_fix_works() {
    // (case, runtimes, words in the detail)
    let cases = [
        (
            "a list written as one name",
            r#"["runc:crun"]"#,
            r#""runc:crun" is one name, not a list"#,
        ),
        (
            "a path that is not there",
            r#"["/nonexistent/runc"]"#,
            "is on PATH or an existing absolute path",
        ),
        ("no runtime", "[]", "runtimes = []"),
    ];
    for (case, runtimes, words) in cases {
        let node = Node::healthy(&case.replace(' ', "-"));
        node.add_config(&format!(
            "\n[nvidia-container-runtime]\nruntimes = {runtimes}\n"
        ));
        let (code, checks, text) = node.doctor();
        let (failed, skipped) = not_ok(&checks);
        assert_eq!(failed, ["low-level runtime"], "{case}\n{text}");
        assert_eq!(
            skipped,
            ["node allocatable"],
            "{case}: the plugin needs a runtime\n{text}"
        );
        let c = checks.iter().find(|c| c.0 == "low-level runtime").unwrap();
        assert!(c.2.contains(words), "{case}: {c:?}");
        assert_eq!(code, 2, "{case}\n{text}");
        // The fix's command, run as printed.
        let command =
            c.3.split('`')
                .nth(1)
                .unwrap_or_else(|| panic!("{case}: {c:?}"));
        assert!(
            command.starts_with(
                "nvidia-ctk config --set nvidia-container-runtime.runtimes=runc:crun --in-place"
            ),
            "{case}: {command}"
        );
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        ok_or_panic(&ctk(&args), command);
        let (code, checks, text) = node.doctor();
        let c = checks.iter().find(|c| c.0 == "low-level runtime").unwrap();
        assert_eq!(c.1, "ok", "{case}: after the fix: {c:?}");
        assert_eq!(code, 0, "{case}: after the fix\n{text}");
    }
}

/// The node JSON doctor is given: what the device plugin advertises (`status.allocatable`),
/// reported with the node's name in the detail and the fix.
#[test]
fn a_node_without_allocatable_gpus_is_reported_by_name() {
    let node = Node::healthy("allocatable");
    // (case, status.allocatable, status, words in the detail, in the fix)
    let cases = [
        (
            "two GPUs",
            serde_json::json!({"nvidia.com/gpu": "2"}),
            "ok",
            "allocatable nvidia.com/gpu=2",
            "",
        ),
        (
            "zero",
            serde_json::json!({"nvidia.com/gpu": "0"}),
            "fail",
            "allocatable nvidia.com/gpu: 0: the device plugin advertises no GPU",
            "spec.nodeName=gpu-node-1",
        ),
        (
            "missing",
            serde_json::json!({"cpu": "8"}),
            "fail",
            "no nvidia.com/gpu in allocatable",
            "the device plugin is not running on gpu-node-1",
        ),
    ];
    for (case, allocatable, status, detail, fix) in cases {
        node.write_node("81559", allocatable);
        let (code, checks, text) = node.doctor();
        let c = checks.iter().find(|c| c.0 == "node allocatable").unwrap();
        assert_eq!(c.1, status, "{case}: {c:?}");
        assert!(
            c.2.starts_with("gpu-node-1 (") && c.2.contains(detail),
            "{case}: {c:?}"
        );
        assert!(c.3.contains(fix), "{case}: {c:?}");
        let (failed, _) = not_ok(&checks);
        let want: &[&str] = if status == "ok" {
            &[]
        } else {
            &["node allocatable"]
        };
        assert_eq!(failed, want, "{case}\n{text}");
        assert_eq!(code, if status == "ok" { 0 } else { 2 }, "{case}\n{text}");
    }
    // The relabel fix names the node too.
    node.write_labels("40960");
    let (_, checks, _) = node.doctor();
    let c = checks.iter().find(|c| c.0 == "node labels").unwrap();
    assert!(
        c.3.contains("kubectl label node gpu-node-1 --overwrite"),
        "{c:?}"
    );
}

// The tests whose outcome depends on the kind of host: run again on each (tests/suite/main.rs).
each_host_kind! {
    /// doctor's cgroup and ldconfig checks.
    a_healthy_node_is_all_ok,
    /// doctor's ldconfig checks.
    each_seeded_fault_fails_its_check_with_a_fix,
    /// doctor's cgroup checks and their dependants.
    one_cause_is_one_failure_and_its_dependants_are_skipped,
}
