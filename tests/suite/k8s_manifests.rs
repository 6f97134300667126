//! The Kubernetes manifests (packaging/kubernetes/) and the installer image's Dockerfile, offline:
//! what the Kubernetes JSON schemas cannot see (scripts/validate-k8s.sh checks each document
//! against them). Every document's names and cross-references (namespace, ServiceAccount,
//! RuntimeClass handlers = the runtimes the installer registers), the DaemonSets' placement on
//! GPU nodes, their host access (host paths mounted = what the installer's settings need, no
//! more; hostPID and the host root only for the restart mode that needs them), and the
//! Dockerfile's stages, COPY sources and entrypoint. Nothing here needs a cluster, a network or
//! a container image. A failure lists every problem found, each with its file and field.

use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const DIR: &str = "packaging/kubernetes";
/// The placeholder image the manifests run (README.md of that directory says so).
const IMAGE: &str = "ghcr.io/nvct/nvidia-ctk-installer";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One YAML document of one manifest file.
struct Doc {
    /// `packaging/kubernetes/FILE#N` (N counts from 1).
    at: String,
    v: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.v["kind"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.v["metadata"]["name"].as_str().unwrap_or("")
    }
    fn namespace(&self) -> Option<&str> {
        self.v["metadata"]["namespace"].as_str()
    }
}

fn manifest_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            manifest_files(&p, out);
        } else if matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(p);
        }
    }
}

/// Every document of every manifest (what `kubectl apply -f` reads: .yaml, .yml, .json).
fn docs() -> Vec<Doc> {
    let mut files = Vec::new();
    manifest_files(&repo().join(DIR), &mut files);
    assert!(!files.is_empty(), "no manifests under {DIR}");
    let mut docs = Vec::new();
    for f in files {
        let rel = f.strip_prefix(repo()).unwrap().display().to_string();
        let text = read(&f);
        for (i, de) in serde_norway::Deserializer::from_str(&text).enumerate() {
            let v = Value::deserialize(de).unwrap_or_else(|e| panic!("{rel}: not YAML: {e}"));
            if !v.is_null() {
                docs.push(Doc {
                    at: format!("{rel}#{}", i + 1),
                    v,
                });
            }
        }
    }
    docs
}

fn of_kind<'a>(docs: &'a [Doc], kind: &str) -> Vec<&'a Doc> {
    docs.iter().filter(|d| d.kind() == kind).collect()
}

fn assert_none(problems: Vec<String>) {
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The environment variables nvidia-ctk-installer reads (its interface, docs/COMPAT.md): a
/// misspelt one would be ignored without a word.
const INSTALLER_ENV: &[&str] = &[
    "TOOLKIT_INSTALL_DIR",
    "ROOT",
    "TOOLKIT_SOURCE_ROOT",
    "RUNTIME",
    "RUNTIME_CONFIG",
    "CONTAINERD_CONFIG",
    "DOCKER_CONFIG",
    "RUNTIME_DROP_IN_CONFIG",
    "RUNTIME_SOCKET",
    "CONTAINERD_SOCKET",
    "DOCKER_SOCKET",
    "RUNTIME_RESTART_MODE",
    "HOST_ROOT_MOUNT",
    "NVIDIA_DRIVER_ROOT",
    "DRIVER_ROOT",
    "NVIDIA_DEV_ROOT",
    "DEV_ROOT",
    "NVIDIA_RUNTIME_NAME",
    "CONTAINERD_RUNTIME_CLASS",
    "NVIDIA_RUNTIME_SET_AS_DEFAULT",
    "CONTAINERD_SET_AS_DEFAULT",
    "CDI_ENABLED",
    "CDI_OUTPUT_DIR",
    "CREATE_DEVICE_NODES",
    "NO_DAEMON",
    "TOOLKIT_PID_FILE",
];

/// A DaemonSet's installer container, as the settings the installer acts on (the env the
/// manifest sets, else the installer's defaults).
struct Installer<'a> {
    doc: &'a Doc,
    pod: &'a Value,
    container: &'a Value,
    env: BTreeMap<String, String>,
}

impl<'a> Installer<'a> {
    fn of(doc: &'a Doc) -> Installer<'a> {
        let pod = &doc.v["spec"]["template"]["spec"];
        let containers = pod["containers"].as_array().map(Vec::as_slice);
        let [container] = containers.unwrap_or_default() else {
            panic!(
                "{}: spec.template.spec.containers: one container expected",
                doc.at
            )
        };
        let env = container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let name = e["name"].as_str().unwrap_or_default().to_string();
                let value = e["value"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{}: env {name}: a string value expected", doc.at));
                (name, value.to_string())
            })
            .collect();
        Installer {
            doc,
            pod,
            container,
            env,
        }
    }

    fn get(&self, name: &str, default: &str) -> String {
        self.env
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.into())
    }

    fn runtime(&self) -> String {
        self.get("RUNTIME", "docker")
    }

    fn restart_mode(&self) -> String {
        let default = if self.runtime() == "crio" {
            "systemd"
        } else {
            "signal"
        };
        self.get("RUNTIME_RESTART_MODE", default)
    }

    fn runtime_name(&self) -> String {
        self.get("NVIDIA_RUNTIME_NAME", "nvidia")
    }

    /// The host paths the installer opens, as the pod sees them, each with why.
    fn needed_paths(&self) -> Vec<(String, &'static str)> {
        let (config, drop_in, socket) = match self.runtime().as_str() {
            "containerd" => (
                "/etc/containerd/config.toml",
                Some("/etc/containerd/conf.d/99-nvidia.toml"),
                "/run/containerd/containerd.sock",
            ),
            "crio" => (
                "/etc/crio/crio.conf",
                Some("/etc/crio/crio.conf.d/99-nvidia.toml"),
                "/var/run/crio/crio.sock",
            ),
            _ => ("/etc/docker/daemon.json", None, "/var/run/docker.sock"),
        };
        let mut need = vec![
            (
                self.get("TOOLKIT_INSTALL_DIR", "/usr/local/nvidia"),
                "the install dir",
            ),
            (self.get("RUNTIME_CONFIG", config), "the engine config"),
            (
                self.get("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid"),
                "the pid file",
            ),
            // Mounted even with CDI off, so that CDI_ENABLED=true is the only change needed.
            (
                self.get("CDI_OUTPUT_DIR", "/var/run/cdi"),
                "the CDI spec dir",
            ),
        ];
        if let Some(d) = drop_in {
            need.push((self.get("RUNTIME_DROP_IN_CONFIG", d), "the engine drop-in"));
        }
        if self.restart_mode() == "signal" {
            need.push((self.get("RUNTIME_SOCKET", socket), "the engine socket"));
        }
        if self.restart_mode() == "systemd" {
            need.push((self.get("HOST_ROOT_MOUNT", "/host"), "the host root"));
        }
        let driver_root = self.get("NVIDIA_DRIVER_ROOT", "/");
        if driver_root != "/" {
            need.push((driver_root.clone(), "the driver root"));
        }
        if self.get("CREATE_DEVICE_NODES", "") == "control" {
            let dev_root = self.get("NVIDIA_DEV_ROOT", &driver_root);
            let dev = Path::new(&dev_root).join("dev").display().to_string();
            need.push((dev, "the device nodes"));
        }
        need
    }

    /// (mountPath, hostPath path, readOnly, mountPropagation) of each volumeMount; a mount
    /// without a hostPath volume is a problem.
    fn mounts(&self, problems: &mut Vec<String>) -> Vec<(String, String, bool, String)> {
        let at = &self.doc.at;
        let volumes: BTreeMap<&str, &Value> = self.pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| (v["name"].as_str().unwrap_or_default(), v))
            .collect();
        let mut used = BTreeSet::new();
        let mut out = Vec::new();
        for m in self.container["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let name = m["name"].as_str().unwrap_or_default();
            let path = m["mountPath"].as_str().unwrap_or_default().to_string();
            used.insert(name);
            let Some(vol) = volumes.get(name) else {
                problems.push(format!("{at}: volumeMount {name} ({path}): no such volume"));
                continue;
            };
            let Some(host) = vol["hostPath"]["path"].as_str() else {
                problems.push(format!("{at}: volume {name}: not a hostPath"));
                continue;
            };
            out.push((
                path,
                host.to_string(),
                m["readOnly"].as_bool().unwrap_or(false),
                m["mountPropagation"].as_str().unwrap_or("None").to_string(),
            ));
        }
        for name in volumes.keys() {
            if !used.contains(name) {
                problems.push(format!("{at}: volume {name}: mounted nowhere"));
            }
        }
        out
    }
}

fn installers(docs: &[Doc]) -> Vec<Installer<'_>> {
    let ds = of_kind(docs, "DaemonSet");
    assert!(!ds.is_empty(), "no DaemonSet under {DIR}");
    ds.into_iter().map(Installer::of).collect()
}

fn under(path: &str, dir: &str) -> bool {
    Path::new(path).starts_with(dir)
}

#[test]
fn every_document_is_named_and_placed() {
    let docs = docs();
    let namespaces: BTreeSet<&str> = of_kind(&docs, "Namespace")
        .iter()
        .map(|d| d.name())
        .collect();
    let mut problems = Vec::new();
    for d in &docs {
        if d.v["apiVersion"].as_str().is_none() || d.kind().is_empty() || d.name().is_empty() {
            problems.push(format!(
                "{}: apiVersion, kind and metadata.name needed",
                d.at
            ));
        }
        match (d.kind(), d.namespace()) {
            ("Namespace" | "RuntimeClass", Some(ns)) => problems.push(format!(
                "{}: {} is cluster-scoped: metadata.namespace {ns} set",
                d.at,
                d.kind()
            )),
            ("Namespace" | "RuntimeClass", None) => {}
            (_, None) => problems.push(format!("{}: metadata.namespace missing", d.at)),
            (_, Some(ns)) if !namespaces.contains(ns) => problems.push(format!(
                "{}: metadata.namespace {ns}: no such Namespace in {DIR}",
                d.at
            )),
            _ => {}
        }
    }
    // Privileged pods with host paths are refused by Pod Security admission's other levels.
    for ns in of_kind(&docs, "Namespace") {
        let level = &ns.v["metadata"]["labels"]["pod-security.kubernetes.io/enforce"];
        if level != "privileged" {
            problems.push(format!(
                "{}: metadata.labels.pod-security.kubernetes.io/enforce: privileged expected, not {level}",
                ns.at
            ));
        }
    }
    assert_none(problems);
}

#[test]
fn daemonsets_run_the_installer_on_gpu_nodes() {
    let docs = docs();
    let accounts: BTreeSet<(Option<&str>, &str)> = of_kind(&docs, "ServiceAccount")
        .iter()
        .map(|d| (d.namespace(), d.name()))
        .collect();
    let mut problems = Vec::new();
    for i in installers(&docs) {
        let at = &i.doc.at;
        let sa = i.pod["serviceAccountName"].as_str().unwrap_or_default();
        if !accounts.contains(&(i.doc.namespace(), sa)) {
            problems.push(format!(
                "{at}: serviceAccountName {sa:?}: no such ServiceAccount in its namespace"
            ));
        }
        let selector = i.doc.v["spec"]["selector"]["matchLabels"].as_object();
        let labels = &i.doc.v["spec"]["template"]["metadata"]["labels"];
        for (k, v) in selector.into_iter().flatten() {
            if &labels[k] != v {
                problems.push(format!(
                    "{at}: spec.selector.matchLabels.{k}: the pod template's label differs"
                ));
            }
        }
        if i.pod["nodeSelector"]["nvidia.com/gpu.present"] != "true" {
            problems.push(format!(
                "{at}: spec.template.spec.nodeSelector: nvidia.com/gpu.present: \"true\" expected"
            ));
        }
        if !tolerates_gpu_taint(&i.pod["tolerations"]) {
            problems.push(format!(
                "{at}: spec.template.spec.tolerations: nvidia.com/gpu, operator Exists, effect NoSchedule expected"
            ));
        }
        let image = i.container["image"].as_str().unwrap_or_default();
        let want = format!("{IMAGE}:{}", env!("CARGO_PKG_VERSION"));
        if image != want {
            problems.push(format!("{at}: image {image:?}: {want} expected"));
        }
        if !i.container["command"].is_null() || !i.container["args"].is_null() {
            problems.push(format!(
                "{at}: command/args set: the image's entrypoint and the env configure it"
            ));
        }
        // The cleanup is SIGTERM's: no preStop, and time for it.
        if !i.container["lifecycle"]["preStop"].is_null() {
            problems.push(format!(
                "{at}: lifecycle.preStop: the installer cleans up on SIGTERM"
            ));
        }
        let grace = i.pod["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap_or(30);
        if grace < 60 {
            problems.push(format!(
                "{at}: terminationGracePeriodSeconds {grace}: 60 or more expected (the cleanup restarts the engine)"
            ));
        }
    }
    assert_none(problems);
}

fn tolerates_gpu_taint(tolerations: &Value) -> bool {
    tolerations.as_array().into_iter().flatten().any(|t| {
        t["key"] == "nvidia.com/gpu"
            && t["operator"] == "Exists"
            && (t["effect"] == "NoSchedule" || t["effect"].is_null())
    })
}

#[test]
fn installer_env_is_its_interface() {
    let docs = docs();
    let mut problems = Vec::new();
    for i in installers(&docs) {
        let at = &i.doc.at;
        for (name, value) in &i.env {
            if !INSTALLER_ENV.contains(&name.as_str()) {
                problems.push(format!(
                    "{at}: env {name}: not a variable the installer reads"
                ));
            }
            let allowed: &[&str] = match name.as_str() {
                "RUNTIME" => &["containerd", "crio", "docker"],
                "RUNTIME_RESTART_MODE" => &["signal", "systemd", "none"],
                "CREATE_DEVICE_NODES" => &["control", "none", ""],
                "NVIDIA_RUNTIME_SET_AS_DEFAULT" | "CDI_ENABLED" | "NO_DAEMON" => &["true", "false"],
                _ => &[],
            };
            if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
                problems.push(format!("{at}: env {name}={value:?}: one of {allowed:?}"));
            }
            let is_path = ["_DIR", "_ROOT", "_CONFIG", "_FILE", "_MOUNT", "_SOCKET"]
                .iter()
                .any(|s| name.ends_with(s));
            if is_path && !value.starts_with('/') {
                problems.push(format!("{at}: env {name}={value:?}: an absolute path"));
            }
        }
        if i.env.get("NO_DAEMON").map(String::as_str) == Some("true") {
            problems.push(format!(
                "{at}: env NO_DAEMON=true: the pod must wait to undo the install on SIGTERM"
            ));
        }
        if !i.env.contains_key("RUNTIME") {
            problems.push(format!(
                "{at}: env RUNTIME: name the engine (default docker)"
            ));
        }
    }
    assert_none(problems);
}

#[test]
fn host_paths_are_what_the_installer_needs_and_no_more() {
    let docs = docs();
    let mut problems = Vec::new();
    // Read-write mounts of these would hand the pod far more of the host than it needs.
    let too_broad = [
        "/",
        "/etc",
        "/run",
        "/var",
        "/var/run",
        "/usr",
        "/usr/local",
        "/proc",
        "/sys",
    ];
    for i in installers(&docs) {
        let at = &i.doc.at;
        let mounts = i.mounts(&mut problems);
        let need = i.needed_paths();
        let host_root = i.get("HOST_ROOT_MOUNT", "/host");
        for (path, host, ro, _) in &mounts {
            if *path == host_root && i.restart_mode() == "systemd" {
                // The host root for `chroot HOST systemctl`: read-only is enough.
                if host != "/" || !ro {
                    problems.push(format!(
                        "{at}: volumeMount {path}: the host root, hostPath / readOnly expected"
                    ));
                }
                continue;
            }
            // What the installer writes (engine entries, the toolkit config, a CDI spec) names
            // paths the host reads: each host path is mounted at the same path.
            if path != host {
                problems.push(format!(
                    "{at}: volumeMount {path}: hostPath {host}: the same path expected"
                ));
            }
            if too_broad.contains(&path.as_str()) && !ro {
                problems.push(format!("{at}: volumeMount {path}: too broad a host path"));
            }
            if !need.iter().any(|(p, _)| under(p, path)) {
                problems.push(format!(
                    "{at}: volumeMount {path}: nothing the installer uses is there (restart mode {})",
                    i.restart_mode()
                ));
            }
        }
        for (p, why) in &need {
            let Some((path, _, ro, _)) = mounts
                .iter()
                .filter(|(m, ..)| under(p, m))
                .max_by_key(|(m, ..)| m.len())
            else {
                problems.push(format!("{at}: {why} {p}: no volumeMount holds it"));
                continue;
            };
            if *ro && *why != "the host root" {
                problems.push(format!("{at}: {why} {p}: volumeMount {path} is readOnly"));
            }
        }
        // /run/nvidia/driver is where the GPU Operator's driver container puts its root: its
        // mount must let that appear later, whichever driver root the env names now.
        if let Some((path, _, _, propagation)) =
            mounts.iter().find(|(m, ..)| under("/run/nvidia/driver", m))
        {
            if propagation != "HostToContainer" {
                problems.push(format!(
                    "{at}: volumeMount {path}: mountPropagation HostToContainer expected (the driver container's root appears there later)"
                ));
            }
        }
    }
    assert_none(problems);
}

#[test]
fn host_access_matches_the_restart_mode() {
    let docs = docs();
    let mut problems = Vec::new();
    for i in installers(&docs) {
        let at = &i.doc.at;
        let signal = i.restart_mode() == "signal";
        // The signal mode reads the engine's pid from its socket's peer credentials: a pid of
        // the host's pid namespace.
        let host_pid = i.pod["hostPID"].as_bool().unwrap_or(false);
        if host_pid != signal {
            problems.push(format!(
                "{at}: hostPID {host_pid}: {signal} expected for restart mode {}",
                i.restart_mode()
            ));
        }
        for field in ["hostNetwork", "hostIPC"] {
            if i.pod[field].as_bool().unwrap_or(false) {
                problems.push(format!("{at}: {field}: the installer needs no such thing"));
            }
        }
        // Signals to the engine, mknod in the host's /dev, SELinux-labelled host files.
        if i.container["securityContext"]["privileged"] != true {
            problems.push(format!("{at}: securityContext.privileged: true expected"));
        }
        if i.pod["automountServiceAccountToken"] != false {
            problems.push(format!(
                "{at}: automountServiceAccountToken: false expected (the installer never calls the API)"
            ));
        }
    }
    assert_none(problems);
}

#[test]
fn runtime_classes_match_the_registered_runtimes() {
    let docs = docs();
    let classes = of_kind(&docs, "RuntimeClass");
    let mut problems = Vec::new();
    let handlers: BTreeSet<&str> = classes
        .iter()
        .map(|c| c.v["handler"].as_str().unwrap_or_default())
        .collect();
    for c in &classes {
        if c.v["handler"] != c.name() {
            problems.push(format!(
                "{}: handler {}: the RuntimeClass is named after its runtime ({})",
                c.at,
                c.v["handler"],
                c.name()
            ));
        }
        let s = &c.v["scheduling"];
        if !s.is_null()
            && (s["nodeSelector"]["nvidia.com/gpu.present"] != "true"
                || !tolerates_gpu_taint(&s["tolerations"]))
        {
            problems.push(format!(
                "{}: scheduling: the DaemonSets' GPU nodes (nodeSelector and toleration) expected",
                c.at
            ));
        }
    }
    for i in installers(&docs) {
        // The names the installer registers (src/installer.rs, `Options::runtimes`): the
        // runtime name and its `-cdi` and `-legacy` variants.
        let n = i.runtime_name();
        let registered = [n.clone(), format!("{n}-cdi"), format!("{n}-legacy")];
        let registered: BTreeSet<&str> = registered.iter().map(String::as_str).collect();
        if !handlers.contains(n.as_str()) {
            problems.push(format!(
                "{}: NVIDIA_RUNTIME_NAME {n}: no RuntimeClass has that handler",
                i.doc.at
            ));
        }
        for h in handlers.difference(&registered) {
            problems.push(format!(
                "{}: RuntimeClass handler {h}: not a runtime the installer registers ({registered:?})",
                i.doc.at
            ));
        }
    }
    assert_none(problems);
}

/// The Dockerfile's instructions: (keyword, arguments), continuation lines joined, comments
/// dropped.
fn dockerfile() -> Vec<(String, String)> {
    let text = read(&repo().join(DIR).join("Dockerfile"));
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || (t.is_empty() && cur.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                cur.push_str(part);
                cur.push(' ');
            }
            None => {
                cur.push_str(t);
                let (k, rest) = cur.split_once(char::is_whitespace).unwrap_or((&cur, ""));
                out.push((k.to_uppercase(), rest.trim().to_string()));
                cur.clear();
            }
        }
    }
    assert!(cur.is_empty(), "Dockerfile ends in a continuation line");
    out
}

/// One stage: its base image, its name, and its instructions after FROM.
struct Stage {
    image: String,
    name: Option<String>,
    body: Vec<(String, String)>,
}

fn stages() -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    for (k, rest) in dockerfile() {
        if k == "FROM" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let (image, name) = match words[..] {
                [image] => (image, None),
                [image, kw, name] if kw.eq_ignore_ascii_case("as") => (image, Some(name)),
                _ => panic!("Dockerfile: FROM {rest}: IMAGE [AS NAME] expected"),
            };
            stages.push(Stage {
                image: image.into(),
                name: name.map(String::from),
                body: Vec::new(),
            });
        } else {
            let stage = stages
                .last_mut()
                .expect("Dockerfile: an instruction before FROM");
            stage.body.push((k, rest));
        }
    }
    stages
}

/// (major, minor) of "1.95" or "1.95.0".
fn version(s: &str) -> (u32, u32) {
    let mut parts = s.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[test]
fn dockerfile_builds_with_the_projects_rust_and_ships_the_install_tree() {
    let stages = stages();
    let [build, runtime] = &stages[..] else {
        panic!(
            "Dockerfile: two stages expected (build, runtime), found {}",
            stages.len()
        )
    };
    let mut problems = Vec::new();
    // The build stage: an official rust image no older than the crate's rust-version.
    let cargo: toml::Table = toml::from_str(&read(&repo().join("Cargo.toml"))).unwrap();
    let msrv = version(cargo["package"]["rust-version"].as_str().unwrap());
    match build.image.strip_prefix("docker.io/library/rust:") {
        Some(tag) => {
            let v = version(tag.split('-').next().unwrap_or_default());
            if v < msrv {
                problems.push(format!(
                    "Dockerfile: FROM {}: older than rust-version {msrv:?}",
                    build.image
                ));
            }
            let readme = read(&repo().join("README.md"));
            if !readme.contains(&format!("tested with {}.{}", v.0, v.1)) {
                problems.push(format!(
                    "Dockerfile: FROM {}: the README names another tested Rust",
                    build.image
                ));
            }
        }
        None => problems.push(format!(
            "Dockerfile: FROM {}: rust:VERSION expected",
            build.image
        )),
    }
    let Some(build_name) = &build.name else {
        panic!("Dockerfile: the build stage needs a name (FROM ... AS build)")
    };
    let workdir = build
        .body
        .iter()
        .rev()
        .find(|(k, _)| k == "WORKDIR")
        .map(|(_, d)| d.clone())
        .expect("Dockerfile: the build stage sets WORKDIR");
    let runs: Vec<&str> = build
        .body
        .iter()
        .filter(|(k, _)| k == "RUN")
        .map(|(_, r)| r.as_str())
        .collect();
    if !runs.iter().any(|r| r.contains("scripts/build-release.sh")) {
        problems.push("Dockerfile: the build stage does not run scripts/build-release.sh".into());
    }
    // COPY from the context: paths of the repository.
    for (k, rest) in &build.body {
        if k == "COPY" {
            let words: Vec<&str> = rest.split_whitespace().collect();
            for src in &words[..words.len() - 1] {
                if !src.starts_with("--") && !repo().join(src).exists() {
                    problems.push(format!("Dockerfile: COPY {src}: not in the repository"));
                }
            }
        }
    }
    // COPY --from=build: outputs that scripts/build-release.sh (or a RUN of the stage) writes.
    let release = read(&repo().join("scripts/build-release.sh"));
    let mut copied = Vec::new();
    for (k, rest) in &runtime.body {
        if k != "COPY" {
            continue;
        }
        let words: Vec<&str> = rest.split_whitespace().collect();
        let from = format!("--from={build_name}");
        if !words.contains(&from.as_str()) {
            problems.push(format!(
                "Dockerfile: runtime COPY {rest}: only {from} expected"
            ));
            continue;
        }
        let dest = words[words.len() - 1];
        for src in words[..words.len() - 1]
            .iter()
            .filter(|w| !w.starts_with("--"))
        {
            let Some(rel) = src.strip_prefix(&format!("{}/", workdir.trim_end_matches('/'))) else {
                problems.push(format!(
                    "Dockerfile: COPY {src}: not under WORKDIR {workdir}"
                ));
                continue;
            };
            let rel = rel.trim_end_matches('/');
            if !release.contains(rel) && !runs.iter().any(|r| r.contains(rel)) {
                problems.push(format!(
                    "Dockerfile: COPY {src}: scripts/build-release.sh does not write {rel}"
                ));
            }
            copied.push((rel.to_string(), dest.to_string()));
        }
    }
    // The tree lands under /usr, so the installer's default source root (its own prefix) holds
    // bin/ and libexec/nvct/.
    if !copied
        .iter()
        .any(|(src, dest)| src == "target/dist/usr" && dest.trim_end_matches('/') == "/usr")
    {
        problems.push("Dockerfile: COPY --from=build .../target/dist/usr/ /usr/ expected".into());
    }
    // The entrypoint: the installer binary, in exec form, put into the tree in the build.
    let entry = runtime
        .body
        .iter()
        .rev()
        .find(|(k, _)| k == "ENTRYPOINT")
        .map(|(_, e)| e.as_str())
        .expect("Dockerfile: the runtime stage sets ENTRYPOINT");
    match serde_json::from_str::<Vec<String>>(entry).as_deref() {
        Ok([bin]) if bin == "/usr/bin/nvidia-ctk-installer" => {}
        _ => problems.push(format!(
            "Dockerfile: ENTRYPOINT {entry}: [\"/usr/bin/nvidia-ctk-installer\"] expected"
        )),
    }
    let installs_installer = runs.iter().any(|r| {
        r.contains("target/release/nvidia-ctk-installer") && r.contains("target/dist/usr/bin")
    }) || release.contains("nvidia-ctk-installer");
    if !installs_installer {
        problems
            .push("Dockerfile: nothing puts nvidia-ctk-installer into target/dist/usr/bin".into());
    }
    let bins: Vec<&str> = cargo["bin"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    if !bins.contains(&"nvidia-ctk-installer") {
        problems
            .push("Cargo.toml: no [[bin]] nvidia-ctk-installer for the image's entrypoint".into());
    }
    // The manifests' image tag is the one the Dockerfile's build line names.
    let text = read(&repo().join(DIR).join("Dockerfile"));
    let tag = format!("{IMAGE}:{}", env!("CARGO_PKG_VERSION"));
    if !text.contains(&format!("-t {tag} .")) {
        problems.push(format!(
            "Dockerfile: the build command line does not tag {tag}"
        ));
    }
    assert_none(problems);
}

#[test]
fn dockerignore_keeps_what_the_build_needs() {
    let ignore = read(&repo().join(DIR).join("Dockerfile.dockerignore"));
    let patterns: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut problems = Vec::new();
    for must in ["target", ".git"] {
        if !patterns.contains(&must) {
            problems.push(format!("Dockerfile.dockerignore: {must} is not left out"));
        }
    }
    for need in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "src",
        "scripts",
        "examples",
    ] {
        if patterns
            .iter()
            .any(|p| need == *p || need.starts_with(&format!("{p}/")) || *p == "*")
        {
            problems.push(format!(
                "Dockerfile.dockerignore: leaves out {need}, which the build needs"
            ));
        }
    }
    assert_none(problems);
}
