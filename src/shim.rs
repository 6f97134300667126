//! The pure parts of `nvidia-container-runtime`, the runc-compatible shim: reading runc's
//! command line (subcommand, bundle), choosing the low-level runtime, deciding whether a
//! container asks for a GPU, and adding our prestart hook to config.json (kept as a
//! `serde_json::Value` so that key order and fields unknown to oci-spec survive).

use crate::config::Config;
use crate::oci;
use crate::request::{self, ContainerView};
use oci_spec::runtime::Spec;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// File name of the hook binary; a prestart hook with this file name is ours.
pub const HOOK_NAME: &str = "nvidia-container-runtime-hook";
/// PATH given to the hook explicitly (runc starts hooks with an empty environment).
pub const HOOK_PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// runc's global flags that take a value (`--flag X` or `--flag=X`).
const GLOBAL_VALUE_FLAGS: &[&str] = &["--root", "--log", "--log-format", "--criu", "--rootless"];

#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    #[error("none of the low-level runtimes {0:?} (config nvidia-container-runtime.runtimes) was found")]
    NoRuntime(Vec<String>),
    #[error("the hook {0:?} (config nvidia-container-runtime-hook.path) was not found")]
    NoHook(String),
    #[error("mode {0:?} is not supported yet (config nvidia-container-runtime.mode; use \"legacy\" or \"auto\")")]
    Mode(String),
    #[error("{path}: {why}")]
    Spec { path: PathBuf, why: String },
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    #[error("{path}: the container's GPU request is not valid: {source}")]
    Request { path: PathBuf, source: request::RequestError },
}

/// What the shim needs to know about runc's command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Invocation {
    /// The runc subcommand (`create`, `start`, `state`, ...), if any.
    pub command: Option<String>,
    /// `--version` / `-v` given before any subcommand.
    pub version: bool,
    /// The bundle given with `--bundle`/`-b` (last wins); `None` means the current directory.
    pub bundle: Option<PathBuf>,
    /// runc's global `--log FILE` (last wins): the shim logs there too.
    pub log: Option<PathBuf>,
    /// runc's global `--log-format` (`text` or `json`; last wins).
    pub log_format: Option<String>,
}

impl Invocation {
    pub fn is_create(&self) -> bool {
        self.command.as_deref() == Some("create")
    }

    /// The bundle directory: the one given, else `cwd`.
    pub fn bundle_or(&self, cwd: &Path) -> PathBuf {
        self.bundle.clone().unwrap_or_else(|| cwd.to_path_buf())
    }
}

/// Parses runc's argv (without argv[0]).
pub fn parse_args(args: &[String]) -> Invocation {
    let mut inv = Invocation::default();
    let mut i = 0;
    // Global flags, up to the subcommand.
    while i < args.len() {
        let a = &args[i];
        if !a.starts_with('-') || a == "-" {
            inv.command = Some(a.clone());
            i += 1;
            break;
        }
        if a == "--" {
            i += 1;
            if let Some(c) = args.get(i) {
                inv.command = Some(c.clone());
                i += 1;
            }
            break;
        }
        if a == "--version" || a == "-v" {
            inv.version = true;
        } else if GLOBAL_VALUE_FLAGS.contains(&a.as_str()) {
            i += 1; // the value
            global_value(&mut inv, a, args.get(i));
        } else if let Some((flag, value)) = a.split_once('=') {
            global_value(&mut inv, flag, Some(&value.to_string()));
        }
        i += 1;
    }
    // Subcommand flags: only the bundle matters.
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--bundle" || a == "-b" {
            if let Some(v) = args.get(i + 1) {
                inv.bundle = Some(PathBuf::from(v));
            }
            i += 2;
            continue;
        }
        if let Some(v) = a.strip_prefix("--bundle=").or_else(|| a.strip_prefix("-b=")) {
            inv.bundle = Some(PathBuf::from(v));
        }
        i += 1;
    }
    inv
}

/// Records the global flags the shim itself uses.
fn global_value(inv: &mut Invocation, flag: &str, value: Option<&String>) {
    match (flag, value) {
        ("--log", Some(v)) if !v.is_empty() => inv.log = Some(PathBuf::from(v)),
        ("--log-format", Some(v)) => inv.log_format = Some(v.clone()),
        _ => {}
    }
}

/// Finds a program: an absolute path is used as is (if it exists), a name through `which`.
pub fn find_program(name: &str, which: &dyn Fn(&str) -> Option<PathBuf>) -> Option<PathBuf> {
    if name.is_empty() {
        return None;
    }
    let p = Path::new(name);
    if p.is_absolute() {
        return p.is_file().then(|| p.to_path_buf());
    }
    which(name)
}

/// The low-level runtime: the first of `runtimes` found.
pub fn find_runtime(runtimes: &[String], which: &dyn Fn(&str) -> Option<PathBuf>) -> Result<PathBuf, ShimError> {
    runtimes
        .iter()
        .find_map(|r| find_program(r, which))
        .ok_or_else(|| ShimError::NoRuntime(runtimes.to_vec()))
}

/// The hook binary named by the config.
pub fn find_hook(config: &Config, which: &dyn Fn(&str) -> Option<PathBuf>) -> Result<PathBuf, ShimError> {
    find_program(&config.hook.path, which).ok_or_else(|| ShimError::NoHook(config.hook.path.clone()))
}

/// Refuses modes this version cannot do.
pub fn check_mode(config: &Config) -> Result<(), ShimError> {
    match config.runtime.mode.as_str() {
        "legacy" | "auto" => Ok(()),
        other => Err(ShimError::Mode(other.to_string())),
    }
}

/// Whether the container described by config.json (`bytes`, read from `path`) asks for a GPU.
pub fn wants_gpu(bytes: &[u8], path: &Path, config: &Config) -> Result<bool, ShimError> {
    let spec: Spec = serde_json::from_slice(bytes)
        .map_err(|source| oci::OciError::SpecParse { path: path.to_path_buf(), source })?;
    let view = ContainerView { env: oci::env(&spec), mounts: oci::mounts(&spec), privileged: oci::is_privileged(&spec) };
    let resolved = request::resolve(&view, config)
        .map_err(|source| ShimError::Request { path: path.to_path_buf(), source })?;
    Ok(resolved.request.is_some())
}

/// The hook's explicit env: PATH, and the config file when the shim's came from the env var.
pub fn hook_env(config_from_env: Option<&Path>) -> Vec<String> {
    let mut env = vec![HOOK_PATH_ENV.to_string()];
    if let Some(p) = config_from_env {
        env.push(format!("{}={}", crate::config::CONFIG_PATH_ENV, p.display()));
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
pub fn add_hook(spec: &mut Value, hook_path: &Path, env: &[String], path: &Path) -> Result<bool, ShimError> {
    let err = |why: &str| ShimError::Spec { path: path.to_path_buf(), why: why.to_string() };
    let root = spec.as_object_mut().ok_or_else(|| err("the spec is not a JSON object"))?;
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    if hooks.is_null() {
        *hooks = json!({});
    }
    let hooks = hooks.as_object_mut().ok_or_else(|| err("\"hooks\" is not an object"))?;
    let prestart = hooks.entry("prestart").or_insert_with(|| json!([]));
    if prestart.is_null() {
        *prestart = json!([]);
    }
    let prestart = prestart.as_array_mut().ok_or_else(|| err("\"hooks.prestart\" is not an array"))?;
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

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// (name, argv, command, version, bundle)
    type ArgvCase<'a> = (&'a str, &'a [&'a str], Option<&'a str>, bool, Option<&'a str>);

    #[test]
    fn argv_table() {
        let cases: &[ArgvCase] = &[
            ("empty", &[], None, false, None),
            ("plain create", &["create", "id"], Some("create"), false, None),
            ("create --bundle X", &["create", "--bundle", "/b", "id"], Some("create"), false, Some("/b")),
            ("create --bundle=X", &["create", "--bundle=/b", "id"], Some("create"), false, Some("/b")),
            ("create -b X", &["create", "-b", "/b", "id"], Some("create"), false, Some("/b")),
            ("create -b=X", &["create", "-b=/b", "id"], Some("create"), false, Some("/b")),
            ("last bundle wins", &["create", "-b", "/a", "--bundle=/c", "id"], Some("create"), false, Some("/c")),
            (
                "global flags with values",
                &["--root", "/run/runc", "--log", "/l.json", "--log-format", "json", "create", "-b", "/b", "x"],
                Some("create"),
                false,
                Some("/b"),
            ),
            ("global flags with =", &["--root=/r", "--log-format=json", "create", "x"], Some("create"), false, None),
            ("boolean global flags", &["--systemd-cgroup", "--debug", "create", "x"], Some("create"), false, None),
            ("value not taken as command", &["--root", "create", "state", "x"], Some("state"), false, None),
            ("state", &["--root", "/r", "state", "x"], Some("state"), false, None),
            ("delete", &["delete", "--force", "x"], Some("delete"), false, None),
            ("version", &["--version"], None, true, None),
            ("-v", &["-v"], None, true, None),
            ("run is not create", &["run", "-b", "/b", "x"], Some("run"), false, Some("/b")),
            ("bundle before command is ignored", &["-b", "/b", "create", "x"], Some("/b"), false, None),
            ("create with other flags", &["create", "--pid-file", "/p", "--console-socket", "/s", "--bundle", "/b", "x"], Some("create"), false, Some("/b")),
        ];
        for (name, argv, command, version, bundle) in cases {
            let inv = parse_args(&s(argv));
            assert_eq!(inv.command.as_deref(), *command, "case {name}: command");
            assert_eq!(inv.version, *version, "case {name}: version");
            assert_eq!(inv.bundle.as_deref(), bundle.map(Path::new), "case {name}: bundle");
            assert_eq!(inv.is_create(), *command == Some("create"), "case {name}: is_create");
        }
    }

    /// (name, argv, --log, --log-format)
    type LogCase<'a> = (&'a str, &'a [&'a str], Option<&'a str>, Option<&'a str>);

    #[test]
    fn log_flags_table() {
        let cases: &[LogCase] = &[
            ("none", &["create", "x"], None, None),
            ("spaced", &["--log", "/l", "--log-format", "json", "create", "x"], Some("/l"), Some("json")),
            ("equals", &["--log=/l", "--log-format=text", "create", "x"], Some("/l"), Some("text")),
            ("last wins", &["--log", "/a", "--log=/b", "state", "x"], Some("/b"), None),
            ("after the command is not global", &["create", "--log", "/l", "x"], None, None),
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
        assert_eq!(find_runtime(&s(&["runc", "crun"]), &which).unwrap(), PathBuf::from("/usr/bin/crun"));
        assert_eq!(find_runtime(&s(&["/bin/sh", "crun"]), &which).unwrap(), PathBuf::from("/bin/sh"));
        assert_eq!(find_runtime(&s(&["/nonexistent/runc", "crun"]), &which).unwrap(), PathBuf::from("/usr/bin/crun"));
        let e = find_runtime(&s(&["runc", "youki"]), &which).unwrap_err().to_string();
        assert!(e.contains("\"runc\"") && e.contains("\"youki\""), "{e}");
    }

    #[test]
    fn hook_added_once_keeping_order() {
        let text = r#"{"zzz":1,"ociVersion":"1.0.2","hooks":{"poststop":[]},"aaa":{"x":true}}"#;
        let mut v: Value = serde_json::from_str(text).unwrap();
        let env = hook_env(Some(Path::new("/c.toml")));
        assert!(add_hook(&mut v, Path::new("/usr/bin/nvidia-container-runtime-hook"), &env, Path::new("c.json")).unwrap());
        assert!(!add_hook(&mut v, Path::new("/other/nvidia-container-runtime-hook"), &env, Path::new("c.json")).unwrap());
        let out = serde_json::to_string(&v).unwrap();
        assert_eq!(
            out,
            r#"{"zzz":1,"ociVersion":"1.0.2","hooks":{"poststop":[],"prestart":[{"path":"/usr/bin/nvidia-container-runtime-hook","args":["nvidia-container-runtime-hook","prestart"],"env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","NVIDIA_CTK_CONFIG_FILE_PATH=/c.toml"]}]},"aaa":{"x":true}}"#
        );
        let mut bad: Value = serde_json::from_str(r#"{"hooks":{"prestart":{}}}"#).unwrap();
        assert!(add_hook(&mut bad, Path::new("/h"), &env, Path::new("c.json")).unwrap_err().to_string().contains("c.json"));
    }

    #[test]
    fn modes() {
        let mut c = Config::default();
        for (mode, ok) in [("auto", true), ("legacy", true), ("cdi", false), ("csv", false), ("jit-cdi", false)] {
            c.runtime.mode = mode.into();
            let r = check_mode(&c);
            assert_eq!(r.is_ok(), ok, "mode {mode}");
            if let Err(e) = r {
                assert!(e.to_string().contains(&format!("mode \"{mode}\" is not supported yet")), "{e}");
            }
        }
    }
}
