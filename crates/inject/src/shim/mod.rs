//! The pure parts of `nvidia-container-runtime`, the runc-compatible shim: reading runc's
//! command line (subcommand, bundle), choosing the low-level runtime, deciding what a `create`
//! does ([`decide`]: pass through, legacy prestart hook, `cdi` or `jit-cdi` edits), and the
//! config.json edits themselves (kept as a `serde_json::Value` so that key order and fields
//! unknown to oci-spec survive).
//!
//! Modes (config `nvidia-container-runtime.mode`), as upstream chooses them:
//! - `legacy`: a GPU container (request.rs) gets our prestart hook;
//! - `cdi`: CDI names come from annotations whose key starts with an `annotation-prefixes`
//!   entry (keys sorted, values comma-split) or, when there are none, from
//!   `NVIDIA_VISIBLE_DEVICES` (qualified `vendor/class=name` entries as they are, bare ids such
//!   as `0` or `all` as `<default-kind>=<id>`); they are looked up in the specs of `spec-dirs`
//!   (`cdi/inject.rs`; a later directory wins), their device nodes completed from the host by
//!   the caller's `fill` (`cdi/fill.rs`), our own spec's device link hooks folded into its
//!   one `apply-edits` hook (`fold.rs`), and applied with `spec_edit.rs`;
//!   `NVIDIA_VISIBLE_DEVICES=void` is then set so that a prestart hook registered elsewhere
//!   does nothing;
//! - `jit-cdi`: the names from `NVIDIA_VISIBLE_DEVICES` only (never annotations, as upstream),
//!   of `default-kind` or [`AUTO_KIND`]; the edits come from a spec generated in memory for
//!   just those devices (`nvct_inject::generate::generate` on a fresh discovery); the CDI hooks in it run
//!   `nvidia-cdi-hook` found by [`find_cdi_hook`];
//! - `auto`: `cdi` when an annotation or a qualified name in `NVIDIA_VISIBLE_DEVICES` asks for
//!   a CDI device, else `legacy`: measured faster than `jit-cdi` on the same host and as
//!   correct there (cgroup v2, device rules in the spec); docs/COMPAT.md, "What `auto` picks".
//!   `runtime.nvidia.com/gpu=<id>` ([`AUTO_KIND`]) is generated on the spot in every CDI mode.
//!
//! A container that asks for nothing passes through untouched whatever the mode (an unknown
//! mode is only an error for a GPU container). `none`, `void` and empty lists ask for nothing
//! in the CDI modes.

mod argv;
mod decide;
mod fold;
mod run;

pub use argv::*;
pub use decide::*;
pub use fold::fold_link_hooks;
pub use run::{create, run};

use crate::cdi_edits::{self, HookOptions};
use crate::spec_edit::{self, SpecEditError};
use nvct_cdi::name::{NameError, QualifiedName};
use nvct_cdi::{self as cdi, ContainerEdits};
use nvct_container::edits::HookKind;
use nvct_formats::config::Config;
use nvct_formats::oci;
use nvct_model::{Inventory, Layout};
use nvct_plan::request::{self, DeviceId, Devices};
use nvct_plan::{self as plan, PlanError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    #[error(
        "none of the low-level runtimes {0:?} (config nvidia-container-runtime.runtimes) was found"
    )]
    NoRuntime(Vec<String>),
    #[error("the hook {0:?} (config nvidia-container-runtime-hook.path) was not found")]
    NoHook(String),
    #[error("{what}: {source}")]
    CdiName { what: String, source: NameError },
    #[error("config nvidia-container-runtime.modes.cdi.default-kind: {0}")]
    DefaultKind(NameError),
    #[error("{path}: {source}")]
    Inject {
        path: PathBuf,
        source: cdi::inject::InjectError,
    },
    #[error("{path}: {source}")]
    Fill {
        path: PathBuf,
        source: Box<cdi::fill::FillError>,
    },
    #[error(
        "{path}: nvidia-container-runtime.modes.jit-cdi.nvcdi-disable-hooks names {hook:?}, \
             which is no hook ({}, all)",
        HookKind::names()
    )]
    DisabledHook { path: PathBuf, hook: String },
    #[error("{path}: unresolvable CDI device {name}: {why}")]
    JitDevice {
        path: PathBuf,
        name: String,
        why: String,
    },
    #[error("{path}: cannot make CDI edits for {names} (jit-cdi): {source}")]
    Jit {
        path: PathBuf,
        names: String,
        source: PlanError,
    },
    #[error("{CDI_HOOK_NAME} was found neither next to the hook {hook:?} (config nvidia-container-runtime-hook.path), nor next to nvidia-ctk (config nvidia-ctk.path), nor in PATH; jit-cdi needs it")]
    NoCdiHook { hook: String },
    #[error(transparent)]
    Edit(#[from] SpecEditError),
    #[error("{path}: {why}")]
    Spec { path: PathBuf, why: String },
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    #[error("{path}: the container's GPU request is not valid: {source}")]
    Request {
        path: PathBuf,
        source: request::RequestError,
    },
}

/// How `cdi` mode completes a spec's device nodes from the host: [`cdi::fill::fill`] (the
/// binary passes it; the only host read in this mode).
pub type FillNodes<'a> =
    &'a dyn Fn(&ContainerEdits, &Path) -> Result<ContainerEdits, cdi::fill::FillError>;

/// `cdi` mode: the edits of `names` from `specs` (read from `searched`; `cdi/inject.rs`), their
/// device nodes completed by `fill` (each with its spec file), applied to `doc`, then
/// `NVIDIA_VISIBLE_DEVICES=void`.
pub fn inject_from_specs(
    doc: &mut Value,
    names: &[QualifiedName],
    specs: &[cdi::resolve::SpecFile],
    searched: &str,
    fill: FillNodes,
    path: &Path,
) -> Result<(), ShimError> {
    let edits =
        cdi::inject::resolve(names, specs, searched).map_err(|source| ShimError::Inject {
            path: path.to_path_buf(),
            source,
        })?;
    let filled = edits
        .iter()
        .map(|e| fill(e.edits, e.file))
        .collect::<Result<Vec<ContainerEdits>, _>>()
        .map_err(|source| ShimError::Fill {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
    let mut filled = filled;
    fold_link_hooks(&mut filled);
    inject(doc, &filled.iter().collect::<Vec<_>>(), path)
}

/// Applies `edits` and sets `NVIDIA_VISIBLE_DEVICES=void` (so that a legacy hook does nothing).
pub fn inject(doc: &mut Value, edits: &[&ContainerEdits], path: &Path) -> Result<(), ShimError> {
    spec_edit::apply(doc, edits, path)?;
    spec_edit::set_env(doc, "NVIDIA_VISIBLE_DEVICES=void", path)?;
    Ok(())
}

/// jit-cdi's edits: `jit` planned for the host `inv` as any request (`all` is what a CDI
/// spec's `all` device has: [`plan::cdi_all`]), written as CDI edits whose one hook runs
/// `cdi_hook`.
pub fn jit_edits(
    jit: &JitRequest,
    inv: &Inventory,
    config: &Config,
    cdi_hook: &Path,
    path: &Path,
) -> Result<ContainerEdits, ShimError> {
    let mut req = jit.request.clone();
    if req.devices == Devices::All {
        req.devices = plan::cdi_all(inv);
    }
    let planned = plan::plan(&req, inv, &Layout::UNKNOWN).map_err(|source| {
        // The device the planner does not know, by the name the container used.
        let named = match &source {
            PlanError::UnknownDevice { id, count } => jit
                .names
                .iter()
                .find(|n| DeviceId::parse(&n.name).as_ref() == Some(id))
                .map(|n| (n, *count)),
            _ => None,
        };
        match named {
            Some((name, count)) => ShimError::JitDevice {
                path: path.to_path_buf(),
                name: name.to_string(),
                why: format!("no such GPU or MIG device on this host ({count} GPU(s))"),
            },
            None => ShimError::Jit {
                path: path.to_path_buf(),
                names: join(&jit.names),
                source,
            },
        }
    })?;
    let ldconfig = config.host_ldconfig();
    let opts = HookOptions {
        hook_path: cdi_hook.display().to_string(),
        ldconfig_path: (ldconfig != Path::new(nvct_container::ldconfig::DEFAULT_LDCONFIG))
            .then(|| ldconfig.display().to_string()),
        proc_root: config.proc_root(),
        disabled: jit
            .disabled_hooks
            .iter()
            .copied()
            .chain(HookKind::default_disabled(
                nvct_container::cgroup::systemd::booted(),
            ))
            .collect(),
        // Only our hook ever runs these edits: one process for all of them.
        one_hook: true,
    };
    Ok(cdi_edits::container_edits(&opts, &planned, &[], false))
}

fn join(names: &[QualifiedName]) -> String {
    names
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The hook's explicit env: PATH, and the config file when the shim's came from the env var.
pub fn hook_env(config_from_env: Option<&Path>) -> Vec<String> {
    let mut env = vec![nvct_model::HOOK_PATH_ENV.to_string()];
    if let Some(p) = config_from_env {
        env.push(format!(
            "{}={}",
            nvct_formats::config::CONFIG_PATH_ENV,
            p.display()
        ));
    }
    env
}

fn is_our_hook(hook: &Value) -> bool {
    hook.get("path")
        .and_then(Value::as_str)
        .is_some_and(|p| Path::new(p).file_name().is_some_and(|n| n == HOOK_NAME))
}

/// Adds our prestart hook to `spec` unless one is there already. Returns whether it changed.
/// `path` is config.json's, for messages.
pub fn add_hook(
    spec: &mut Value,
    hook_path: &Path,
    env: &[String],
    path: &Path,
) -> Result<bool, ShimError> {
    let err = |why: &str| ShimError::Spec {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let root = spec
        .as_object_mut()
        .ok_or_else(|| err("the spec is not a JSON object"))?;
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    if hooks.is_null() {
        *hooks = json!({});
    }
    let hooks = hooks
        .as_object_mut()
        .ok_or_else(|| err("\"hooks\" is not an object"))?;
    let prestart = hooks.entry("prestart").or_insert_with(|| json!([]));
    if prestart.is_null() {
        *prestart = json!([]);
    }
    let prestart = prestart
        .as_array_mut()
        .ok_or_else(|| err("\"hooks.prestart\" is not an array"))?;
    if prestart.iter().any(is_our_hook) {
        return Ok(false);
    }
    prestart.push(json!({
        "path": hook_path.to_string_lossy(),
        "args": [HOOK_NAME, "prestart"],
        "env": env,
    }));
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvct_formats::config::Mode;
    use nvct_plan::request::ContainerView;
    use serde_json::json;
    use std::collections::BTreeSet;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// (name, argv, command, version, bundle)
    type ArgvCase<'a> = (
        &'a str,
        &'a [&'a str],
        Option<&'a str>,
        bool,
        Option<&'a str>,
    );

    #[test]
    fn argv_table() {
        let cases: &[ArgvCase] = &[
            ("empty", &[], None, false, None),
            (
                "plain create",
                &["create", "id"],
                Some("create"),
                false,
                None,
            ),
            (
                "create --bundle X",
                &["create", "--bundle", "/b", "id"],
                Some("create"),
                false,
                Some("/b"),
            ),
            (
                "create --bundle=X",
                &["create", "--bundle=/b", "id"],
                Some("create"),
                false,
                Some("/b"),
            ),
            (
                "create -b X",
                &["create", "-b", "/b", "id"],
                Some("create"),
                false,
                Some("/b"),
            ),
            (
                "create -b=X",
                &["create", "-b=/b", "id"],
                Some("create"),
                false,
                Some("/b"),
            ),
            (
                "last bundle wins",
                &["create", "-b", "/a", "--bundle=/c", "id"],
                Some("create"),
                false,
                Some("/c"),
            ),
            (
                "global flags with values",
                &[
                    "--root",
                    "/run/runc",
                    "--log",
                    "/l.json",
                    "--log-format",
                    "json",
                    "create",
                    "-b",
                    "/b",
                    "x",
                ],
                Some("create"),
                false,
                Some("/b"),
            ),
            (
                "global flags with =",
                &["--root=/r", "--log-format=json", "create", "x"],
                Some("create"),
                false,
                None,
            ),
            (
                "boolean global flags",
                &["--systemd-cgroup", "--debug", "create", "x"],
                Some("create"),
                false,
                None,
            ),
            (
                "value not taken as command",
                &["--root", "create", "state", "x"],
                Some("state"),
                false,
                None,
            ),
            (
                "state",
                &["--root", "/r", "state", "x"],
                Some("state"),
                false,
                None,
            ),
            (
                "delete",
                &["delete", "--force", "x"],
                Some("delete"),
                false,
                None,
            ),
            ("version", &["--version"], None, true, None),
            ("-v", &["-v"], None, true, None),
            (
                "run is not create",
                &["run", "-b", "/b", "x"],
                Some("run"),
                false,
                Some("/b"),
            ),
            (
                "bundle before command is ignored",
                &["-b", "/b", "create", "x"],
                Some("/b"),
                false,
                None,
            ),
            (
                "create with other flags",
                &[
                    "create",
                    "--pid-file",
                    "/p",
                    "--console-socket",
                    "/s",
                    "--bundle",
                    "/b",
                    "x",
                ],
                Some("create"),
                false,
                Some("/b"),
            ),
        ];
        for (name, argv, command, version, bundle) in cases {
            let inv = parse_args(&s(argv));
            assert_eq!(inv.command.as_deref(), *command, "case {name}: command");
            assert_eq!(inv.version, *version, "case {name}: version");
            assert_eq!(
                inv.bundle.as_deref(),
                bundle.map(Path::new),
                "case {name}: bundle"
            );
            assert_eq!(
                inv.is_create(),
                *command == Some("create"),
                "case {name}: is_create"
            );
        }
    }

    /// (name, argv, --log, --log-format)
    type LogCase<'a> = (&'a str, &'a [&'a str], Option<&'a str>, Option<&'a str>);

    #[test]
    fn log_flags_table() {
        let cases: &[LogCase] = &[
            ("none", &["create", "x"], None, None),
            (
                "spaced",
                &["--log", "/l", "--log-format", "json", "create", "x"],
                Some("/l"),
                Some("json"),
            ),
            (
                "equals",
                &["--log=/l", "--log-format=text", "create", "x"],
                Some("/l"),
                Some("text"),
            ),
            (
                "last wins",
                &["--log", "/a", "--log=/b", "state", "x"],
                Some("/b"),
                None,
            ),
            (
                "after the command is not global",
                &["create", "--log", "/l", "x"],
                None,
                None,
            ),
            ("empty log ignored", &["--log=", "create", "x"], None, None),
        ];
        for (name, argv, log, format) in cases {
            let inv = parse_args(&s(argv));
            assert_eq!(inv.log.as_deref(), log.map(Path::new), "case {name}: log");
            assert_eq!(inv.log_format.as_deref(), *format, "case {name}: format");
        }
    }

    #[test]
    fn bundle_defaults_to_cwd() {
        let inv = parse_args(&s(&["create", "x"]));
        assert_eq!(inv.bundle_or(Path::new("/cwd")), PathBuf::from("/cwd"));
    }

    #[test]
    fn runtime_choice() {
        let which = |n: &str| (n == "crun").then(|| PathBuf::from("/usr/bin/crun"));
        assert_eq!(
            find_runtime(&s(&["runc", "crun"]), &which).unwrap(),
            PathBuf::from("/usr/bin/crun")
        );
        assert_eq!(
            find_runtime(&s(&["/bin/sh", "crun"]), &which).unwrap(),
            PathBuf::from("/bin/sh")
        );
        assert_eq!(
            find_runtime(&s(&["/nonexistent/runc", "crun"]), &which).unwrap(),
            PathBuf::from("/usr/bin/crun")
        );
        let e = find_runtime(&s(&["runc", "youki"]), &which)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"runc\"") && e.contains("\"youki\""), "{e}");
    }

    #[test]
    fn hook_added_once_keeping_order() {
        let text = r#"{"zzz":1,"ociVersion":"1.0.2","hooks":{"poststop":[]},"aaa":{"x":true}}"#;
        let mut v: Value = serde_json::from_str(text).unwrap();
        let env = hook_env(Some(Path::new("/c.toml")));
        assert!(add_hook(
            &mut v,
            Path::new("/usr/bin/nvidia-container-runtime-hook"),
            &env,
            Path::new("c.json")
        )
        .unwrap());
        assert!(!add_hook(
            &mut v,
            Path::new("/other/nvidia-container-runtime-hook"),
            &env,
            Path::new("c.json")
        )
        .unwrap());
        let out = serde_json::to_string(&v).unwrap();
        assert_eq!(
            out,
            r#"{"zzz":1,"ociVersion":"1.0.2","hooks":{"poststop":[],"prestart":[{"path":"/usr/bin/nvidia-container-runtime-hook","args":["nvidia-container-runtime-hook","prestart"],"env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","NVIDIA_CTK_CONFIG_FILE_PATH=/c.toml"]}]},"aaa":{"x":true}}"#
        );
        let mut bad: Value = serde_json::from_str(r#"{"hooks":{"prestart":{}}}"#).unwrap();
        assert!(
            add_hook(&mut bad, Path::new("/h"), &env, Path::new("c.json"))
                .unwrap_err()
                .to_string()
                .contains("c.json")
        );
    }

    fn doc(env: &[&str], annotations: &[(&str, &str)]) -> Vec<u8> {
        let ann: serde_json::Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        serde_json::to_vec(
            &json!({"ociVersion": "1.0.2", "process": {"cwd": "/", "args": ["sh"], "env": env, "user": {"uid": 0, "gid": 0}}, "annotations": ann}),
        )
        .unwrap()
    }

    fn jit_request(names: Vec<QualifiedName>) -> JitRequest {
        super::jit_request(names, &Config::default(), Path::new("c.json")).unwrap()
    }

    fn jit(
        names: Vec<QualifiedName>,
        imex: Option<request::ImexChannels>,
        sets: BTreeSet<request::OptIn>,
    ) -> Action {
        let mut j = jit_request(names);
        j.request.imex_channels = imex;
        j.request.opt_ins = sets;
        Action::JitCdi(Box::new(j))
    }

    fn q(names: &[&str]) -> Vec<QualifiedName> {
        names
            .iter()
            .map(|n| QualifiedName::parse(n).unwrap())
            .collect()
    }

    #[test]
    fn decide_cases() {
        use Action::*;
        let gpu0 = "NVIDIA_VISIBLE_DEVICES=0";
        // Legacy carries the request the prestart hook will serve (unprivileged, default config).
        let legacy = |env: Vec<&str>| {
            let view = ContainerView {
                env: env.iter().map(|e| e.to_string()).collect(),
                ..ContainerView::default()
            };
            Legacy(Box::new(
                request::resolve(&view, &Config::default())
                    .unwrap()
                    .request
                    .unwrap(),
            ))
        };
        let ann = [
            ("cdi.k8s.io/b", "nvidia.com/gpu=1"),
            ("cdi.k8s.io/a", "nvidia.com/gpu=0, example.com/x=y"),
            ("other/c", "nvidia.com/gpu=3"),
        ];
        type Case<'a> = (
            &'a str,
            Mode,
            Vec<&'a str>,
            Vec<(&'a str, &'a str)>,
            Result<Action, &'a str>,
        );
        let cases: Vec<Case> = vec![
            ("auto, nothing", Mode::Auto, vec![], vec![], Ok(PassThrough)),
            ("auto, index is legacy", Mode::Auto, vec![gpu0], vec![], Ok(legacy(vec![gpu0]))),
            ("auto, legacy cuda image", Mode::Auto, vec!["CUDA_VERSION=11.8.0"], vec![], Ok(legacy(vec!["CUDA_VERSION=11.8.0"]))),
            (
                "auto, qualified env is cdi, bare ids get the default kind",
                Mode::Auto,
                vec!["NVIDIA_VISIBLE_DEVICES=example.com/x=a,1"],
                vec![],
                Ok(Cdi(q(&["example.com/x=a", "nvidia.com/gpu=1"]))),
            ),
            (
                "auto, annotations sorted by key and split, win over env",
                Mode::Auto,
                vec![gpu0],
                ann.to_vec(),
                Ok(Cdi(q(&["nvidia.com/gpu=0", "example.com/x=y", "nvidia.com/gpu=1"]))),
            ),
            (
                "auto, other prefixes ignored",
                Mode::Auto,
                vec![],
                vec![("other/c", "nvidia.com/gpu=3")],
                Ok(PassThrough),
            ),
            ("legacy ignores annotations", Mode::Legacy, vec![], ann.to_vec(), Ok(PassThrough)),
            (
                "legacy refuses a qualified env",
                Mode::Legacy,
                vec!["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0"],
                vec![],
                Err("not a device id"),
            ),
            (
                "cdi, bare ids",
                Mode::Cdi,
                vec!["NVIDIA_VISIBLE_DEVICES=0,all,0"],
                vec![],
                Ok(Cdi(q(&["nvidia.com/gpu=0", "nvidia.com/gpu=all"]))),
            ),
            ("cdi, void", Mode::Cdi, vec!["NVIDIA_VISIBLE_DEVICES=void"], vec![], Ok(PassThrough)),
            ("cdi, none", Mode::Cdi, vec!["NVIDIA_VISIBLE_DEVICES=none"], vec![], Ok(PassThrough)),
            ("cdi, nothing", Mode::Cdi, vec!["CUDA_VERSION=11.8.0"], vec![], Ok(PassThrough)),
            (
                "cdi, bad name",
                Mode::Cdi,
                vec!["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=a/b"],
                vec![],
                Err("NVIDIA_VISIBLE_DEVICES entry \"nvidia.com/gpu=a/b\": device name \"a/b\" contains '/'"),
            ),
            (
                "cdi, bad annotation",
                Mode::Cdi,
                vec![],
                vec![("cdi.k8s.io/x", "gpu0")],
                Err("annotation cdi.k8s.io/x=\"gpu0\": \"gpu0\" is not a qualified CDI device name"),
            ),
            ("jit-cdi", Mode::JitCdi, vec![gpu0], vec![], Ok(jit(q(&["nvidia.com/gpu=0"]), None, BTreeSet::new()))),
            ("jit-cdi, nothing", Mode::JitCdi, vec![], vec![], Ok(PassThrough)),
            ("jit-cdi ignores annotations", Mode::JitCdi, vec![], ann.to_vec(), Ok(PassThrough)),
            ("jit-cdi: env, annotations ignored", Mode::JitCdi, vec![gpu0], ann.to_vec(), Ok(jit(q(&["nvidia.com/gpu=0"]), None, BTreeSet::new()))),
            ("jit-cdi with IMEX channels", Mode::JitCdi, vec![gpu0, "NVIDIA_IMEX_CHANNELS=1"], vec![],
                Ok(jit(q(&["nvidia.com/gpu=0"]), Some(request::ImexChannels::List(vec![1])), BTreeSet::new()))),
            ("jit-cdi with opt-in sets", Mode::JitCdi, vec![gpu0, "NVIDIA_GDS=enabled", "NVIDIA_MOFED=yes", "NVIDIA_GDRCOPY=enabled"], vec![],
                Ok(jit(q(&["nvidia.com/gpu=0"]), None, [request::OptIn::Gds, request::OptIn::Gdrcopy].into()))),
            ("jit-cdi, bad IMEX channel", Mode::JitCdi, vec![gpu0, "NVIDIA_IMEX_CHANNELS=x"], vec![],
                Err("NVIDIA_IMEX_CHANNELS=\"x\": \"x\" is not a channel number")),
            // Requirements: carried to be logged as not evaluated (upstream's jit-cdi).
            ("jit-cdi, requirements not evaluated", Mode::JitCdi,
                vec![gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=99.0", "NVIDIA_REQUIRE_ARCH=arch>=7.5"], vec![],
                Ok(JitCdi(Box::new(JitRequest {
                    unchecked_requirements: vec!["arch>=7.5".into(), "cuda>=99.0".into()],
                    ..jit_request(q(&["nvidia.com/gpu=0"]))
                })))),
            ("jit-cdi, requirements disabled", Mode::JitCdi,
                vec![gpu0, "NVIDIA_REQUIRE_CUDA=cuda>=99.0", "NVIDIA_DISABLE_REQUIRE=true"], vec![],
                Ok(jit(q(&["nvidia.com/gpu=0"]), None, BTreeSet::new()))),
            ("jit-cdi, legacy CUDA image", Mode::JitCdi,
                vec![gpu0, "CUDA_VERSION=11.8.0"], vec![],
                Ok(JitCdi(Box::new(JitRequest {
                    unchecked_requirements: vec!["cuda>=11.8".into()],
                    ..jit_request(q(&["nvidia.com/gpu=0"]))
                })))),
            // MIG config / monitor: refused unprivileged, as legacy mode.
            ("jit-cdi, MIG config unprivileged", Mode::JitCdi, vec![gpu0, "NVIDIA_MIG_CONFIG_DEVICES=all"], vec![],
                Err("NVIDIA_MIG_CONFIG_DEVICES is only honoured for privileged containers")),
            ("jit-cdi, MIG monitor unprivileged", Mode::JitCdi, vec![gpu0, "NVIDIA_MIG_MONITOR_DEVICES=0"], vec![],
                Err("NVIDIA_MIG_MONITOR_DEVICES is only honoured for privileged containers")),
            ("jit-cdi, empty MIG config asks for nothing", Mode::JitCdi, vec![gpu0, "NVIDIA_MIG_CONFIG_DEVICES="], vec![],
                Ok(jit(q(&["nvidia.com/gpu=0"]), None, BTreeSet::new()))),
            ("jit-cdi, MIG config without a GPU request", Mode::JitCdi, vec!["NVIDIA_MIG_CONFIG_DEVICES=all"], vec![],
                Ok(PassThrough)),
        ];
        for (name, mode, env, annotations, want) in cases {
            let mut c = Config::default();
            c.runtime.mode = mode;
            let got = decide(&doc(&env, &annotations), Path::new("c.json"), &c);
            match (got, want) {
                (Ok(a), Ok(w)) => assert_eq!(a, w, "case {name}"),
                (Err(e), Err(needle)) => {
                    assert!(e.to_string().contains(needle), "case {name}: {e}")
                }
                (got, want) => panic!("case {name}: got {got:?}, want {want:?}"),
            }
        }
        // A privileged container gets the MIG config / monitor caps it asks for.
        let privileged = serde_json::to_vec(&json!({"ociVersion": "1.0.2", "process": {
            "cwd": "/", "args": ["sh"], "user": {"uid": 0, "gid": 0},
            "env": [gpu0, "NVIDIA_MIG_CONFIG_DEVICES=all", "NVIDIA_MIG_MONITOR_DEVICES=0"],
            "capabilities": {"bounding": ["CAP_SYS_ADMIN"]}}}))
        .unwrap();
        let mut c = Config::default();
        c.runtime.mode = Mode::JitCdi;
        assert_eq!(
            decide(&privileged, Path::new("c.json"), &c).unwrap(),
            Action::JitCdi(Box::new({
                let mut j = jit_request(q(&["nvidia.com/gpu=0"]));
                j.request.mig_config = Some(Devices::All);
                j.request.mig_monitor = Some(Devices::List(vec![DeviceId::Index(0)]));
                j
            })),
            "privileged MIG config and monitor"
        );
        let mut c = Config {
            accept_nvidia_visible_devices_envvar_when_unprivileged: false,
            ..Config::default()
        };
        c.runtime.mode = Mode::Cdi;
        assert_eq!(
            decide(&doc(&[gpu0], &[]), Path::new("c.json"), &c).unwrap(),
            Action::PassThrough,
            "unprivileged env ignored"
        );
    }

    #[test]
    fn long_annotation_lists_are_linear_and_capped() {
        let names = |n: usize| {
            (0..n)
                .map(|i| format!("nvidia.com/gpu={i}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let c = Config {
            runtime: nvct_formats::config::RuntimeConfig {
                mode: Mode::Cdi,
                ..Default::default()
            },
            ..Config::default()
        };
        let within = names(request::MAX_DEVICE_IDS);
        match decide(
            &doc(&[], &[("cdi.k8s.io/x", &within)]),
            Path::new("c.json"),
            &c,
        )
        .unwrap()
        {
            Action::Cdi(got) => assert_eq!(got.len(), request::MAX_DEVICE_IDS),
            other => panic!("{other:?}"),
        }
        // Repeats are deduplicated by a set, not by scanning the list.
        let repeated = vec!["nvidia.com/gpu=0"; 40_000].join(",");
        assert_eq!(
            decide(
                &doc(&[], &[("cdi.k8s.io/x", &repeated)]),
                Path::new("c.json"),
                &c
            )
            .unwrap(),
            Action::Cdi(q(&["nvidia.com/gpu=0"]))
        );
        let e = decide(
            &doc(
                &[],
                &[("cdi.k8s.io/x", &names(request::MAX_DEVICE_IDS + 1))],
            ),
            Path::new("c.json"),
            &c,
        )
        .unwrap_err();
        assert!(e.to_string().contains("name more than 4096 devices"), "{e}");
    }

    #[test]
    fn cdi_hook_next_to_the_legacy_hook_else_path() {
        let dir = tempfile::tempdir().unwrap();
        let hook = dir.path().join(HOOK_NAME);
        std::fs::write(&hook, "").unwrap();
        let mut c = Config::default();
        c.hook.path = hook.display().to_string();
        let nowhere = |_: &str| None;
        let in_path =
            |n: &str| (n == CDI_HOOK_NAME).then(|| PathBuf::from("/usr/bin/nvidia-cdi-hook"));
        assert_eq!(
            find_cdi_hook(&c, &in_path).unwrap(),
            PathBuf::from("/usr/bin/nvidia-cdi-hook"),
            "no sibling: PATH"
        );
        let e = find_cdi_hook(&c, &nowhere).unwrap_err().to_string();
        assert!(
            e.starts_with("nvidia-cdi-hook was found neither next to the hook"),
            "{e}"
        );
        std::fs::write(dir.path().join(CDI_HOOK_NAME), "").unwrap();
        assert_eq!(
            find_cdi_hook(&c, &in_path).unwrap(),
            dir.path().join(CDI_HOOK_NAME),
            "sibling first"
        );
        // Upstream's documented config names nvidia-ctk, not the hook.
        let ctk_dir = tempfile::tempdir().unwrap();
        std::fs::write(ctk_dir.path().join("nvidia-ctk"), "").unwrap();
        std::fs::write(ctk_dir.path().join(CDI_HOOK_NAME), "").unwrap();
        let mut c = Config::default();
        c.hook.path = "/nonexistent/nvidia-container-runtime-hook".into();
        c.ctk.path = ctk_dir.path().join("nvidia-ctk").display().to_string();
        assert_eq!(
            find_cdi_hook(&c, &nowhere).unwrap(),
            ctk_dir.path().join(CDI_HOOK_NAME),
            "next to nvidia-ctk.path"
        );
    }
}

#[cfg(test)]
mod jit_tests {
    use super::*;

    /// `modes.jit-cdi.nvcdi-disable-hooks` leaves those hooks out of jit-cdi's edits; an
    /// unknown name is an error naming the key.
    #[test]
    fn jit_cdi_disabled_hooks() {
        let inv = nvct_plan::fixtures::inventory_in("/usr/lib/x86_64-linux-gnu");
        let names = vec![QualifiedName::parse("nvidia.com/gpu=0").unwrap()];
        let hook_args = |disabled: &[&str]| -> Result<Vec<String>, String> {
            let mut config = Config::default();
            config.runtime.modes.jit_cdi.nvcdi_disable_hooks =
                disabled.iter().map(|s| s.to_string()).collect();
            let path = Path::new("/b/config.json");
            let edits = jit_request(names.clone(), &config, path)
                .and_then(|jit| {
                    jit_edits(&jit, &inv, &config, Path::new("/h/nvidia-cdi-hook"), path)
                })
                .map_err(|e| e.to_string())?;
            Ok(edits.hooks.iter().flat_map(|h| h.args.clone()).collect())
        };
        let all = hook_args(&[]).unwrap();
        assert!(all.contains(&"--create-symlinks".to_string()), "{all:?}");
        assert!(all.contains(&"--update-ldcache".to_string()), "{all:?}");
        let some = hook_args(&["create-symlinks", "chmod"]).unwrap();
        assert!(!some.contains(&"--create-symlinks".to_string()), "{some:?}");
        assert!(some.contains(&"--update-ldcache".to_string()), "{some:?}");
        assert_eq!(hook_args(&["all"]).unwrap(), Vec::<String>::new());
        let err = hook_args(&["frobnicate"]).unwrap_err();
        assert!(
            err.contains("nvcdi-disable-hooks names \"frobnicate\""),
            "{err}"
        );
    }
}
