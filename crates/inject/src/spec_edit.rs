//! PURE: CDI container edits → an OCI config.json held as a `serde_json::Value`. This is the
//! runtime shim's last step in `cdi` and `jit-cdi` modes (the prestart hook's is `prestart.rs`).
//!
//! Lossless: only the fields named below are touched; unknown fields and key order stay (the
//! crate builds `serde_json` with `preserve_order`). Deterministic: edits are applied in the
//! order given (the caller passes the spec-level edits of a spec before its devices' edits),
//! and within one edit in the order of its lists.
//!
//! What each CDI field becomes (mirroring the CDI reference library's `ContainerEdits.Apply`):
//! - `env` → `process.env`: a `KEY=VALUE` replaces the entry with the same key in place, else
//!   it is appended;
//! - `deviceNodes` → `linux.devices` (`path`, `type` (default `c`), `major`, `minor`, and
//!   `fileMode`/`uid`/`gid` when given; an entry with the same `path` is replaced in place) and
//!   one `linux.resources.devices` allow rule per character/block node,
//!   `{"allow": true, "type", "major", "minor", "access"}` with `access` = the node's
//!   `permissions`, `rwm` when it has none (an identical rule is not added twice);
//! - `mounts` → `mounts`: an existing mount with the same destination is removed and the new
//!   one appended (`type` as given, else `bind` when the options say `bind`/`rbind`);
//! - `hooks` → `hooks.<hookName>`: appended with their `args` and always an explicit `env`
//!   (an empty list when the spec gives none: runc hands a hook without `env` the
//!   container's environment); an entry identical to one already there is not added again.
//!
//! [`allow_devices`] writes a plan's cgroup rules the same way (the shim's legacy mode).
//!
//! Must not: read the host (device numbers must already be in the edits), or write files.

use nvct_cdi::spec::{ContainerEdits, DeviceNode, Hook, Mount};
use nvct_model::CgroupRule;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// The OCI hook stages a CDI hook may name.
pub const HOOK_STAGES: &[&str] = &[
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecEditError {
    #[error("{path}: {field} is not {want}; cannot apply CDI edits to it")]
    Shape {
        path: PathBuf,
        field: String,
        want: &'static str,
    },
    #[error("{path}: CDI env entry {entry:?} is not KEY=VALUE")]
    Env { path: PathBuf, entry: String },
    #[error("{path}: CDI device node {node} has no {what}; the spec must give major and minor")]
    Node {
        path: PathBuf,
        node: String,
        what: &'static str,
    },
    #[error("{path}: CDI device node {node} has type {kind:?}; expected c, b, u or p")]
    NodeType {
        path: PathBuf,
        node: String,
        kind: String,
    },
    #[error("{path}: CDI hook {hook} has hookName {stage:?}; expected one of {HOOK_STAGES:?}")]
    HookStage {
        path: PathBuf,
        hook: String,
        stage: String,
    },
}

/// Applies `edits` to `spec` in order. `path` names config.json in messages. On error `spec`
/// may be partly edited: callers edit a copy and write only on success.
pub fn apply(
    spec: &mut Value,
    edits: &[&ContainerEdits],
    path: &Path,
) -> Result<(), SpecEditError> {
    let mut e = Editor { spec, path };
    for edit in edits {
        for entry in &edit.env {
            e.set_env(entry)?;
        }
        for node in &edit.device_nodes {
            e.add_device(node)?;
        }
        for mount in &edit.mounts {
            e.add_mount(mount)?;
        }
        for hook in &edit.hooks {
            e.add_hook(hook)?;
        }
    }
    Ok(())
}

/// The plan's `cgroup_rules` as `linux.resources.devices` allow rules (`c MAJ:MIN rw`), for
/// the shim's legacy mode: the runtime (and systemd, when it manages the cgroup) then knows
/// the devices the prestart hook injects, so a `systemctl daemon-reload` cannot take them away.
pub fn allow_devices(
    spec: &mut Value,
    rules: &[CgroupRule],
    path: &Path,
) -> Result<(), SpecEditError> {
    let mut e = Editor { spec, path };
    for r in rules {
        e.allow_rule("c", r.major.into(), r.minor.into(), "rw")?;
    }
    Ok(())
}

/// Sets `KEY=VALUE` in `process.env` (replacing the same key in place).
pub fn set_env(spec: &mut Value, entry: &str, path: &Path) -> Result<(), SpecEditError> {
    Editor { spec, path }.set_env(entry)
}

struct Editor<'a> {
    spec: &'a mut Value,
    path: &'a Path,
}

impl Editor<'_> {
    fn shape(&self, field: &str, want: &'static str) -> SpecEditError {
        SpecEditError::Shape {
            path: self.path.to_path_buf(),
            field: field.into(),
            want,
        }
    }

    /// The object at `keys` (created, as `{}`, where missing or null).
    fn object(&mut self, keys: &[&str]) -> Result<&mut Map<String, Value>, SpecEditError> {
        let path = self.path.to_path_buf();
        let mut cur: &mut Value = self.spec;
        let mut field = String::new();
        if !cur.is_object() {
            return Err(SpecEditError::Shape {
                path,
                field: "the document".into(),
                want: "a JSON object",
            });
        }
        for key in keys {
            field = if field.is_empty() {
                key.to_string()
            } else {
                format!("{field}.{key}")
            };
            let map = cur.as_object_mut().expect("checked above");
            let next = map.entry(key.to_string()).or_insert_with(|| json!({}));
            if next.is_null() {
                *next = json!({});
            }
            if !next.is_object() {
                return Err(SpecEditError::Shape {
                    path,
                    field,
                    want: "an object",
                });
            }
            cur = next;
        }
        Ok(cur.as_object_mut().expect("checked in the loop"))
    }

    /// The array `key` of the object at `keys` (created where missing or null).
    fn array(&mut self, keys: &[&str], key: &str) -> Result<&mut Vec<Value>, SpecEditError> {
        let field = keys
            .iter()
            .chain(std::iter::once(&key))
            .copied()
            .collect::<Vec<_>>()
            .join(".");
        let err = self.shape(&field, "an array");
        let map = self.object(keys)?;
        let v = map.entry(key.to_string()).or_insert_with(|| json!([]));
        if v.is_null() {
            *v = json!([]);
        }
        v.as_array_mut().ok_or(err)
    }

    fn set_env(&mut self, entry: &str) -> Result<(), SpecEditError> {
        let key = match entry.split_once('=') {
            Some((k, _)) if !k.is_empty() => k.to_string(),
            _ => {
                return Err(SpecEditError::Env {
                    path: self.path.to_path_buf(),
                    entry: entry.into(),
                })
            }
        };
        let env = self.array(&["process"], "env")?;
        let same = |v: &Value| {
            v.as_str()
                .and_then(|s| s.split_once('='))
                .is_some_and(|(k, _)| k == key)
        };
        match env.iter().position(same) {
            Some(i) => {
                env[i] = json!(entry);
                // Later duplicates of the key would win over ours: drop them.
                let mut n = 0;
                env.retain(|v| {
                    n += 1;
                    n <= i + 1 || !same(v)
                });
            }
            None => env.push(json!(entry)),
        }
        Ok(())
    }

    fn add_device(&mut self, node: &DeviceNode) -> Result<(), SpecEditError> {
        let missing = |what| SpecEditError::Node {
            path: self.path.to_path_buf(),
            node: node.path.clone(),
            what,
        };
        let kind = node.kind.clone().unwrap_or_else(|| "c".into());
        if !matches!(kind.as_str(), "c" | "b" | "u" | "p") {
            return Err(SpecEditError::NodeType {
                path: self.path.to_path_buf(),
                node: node.path.clone(),
                kind,
            });
        }
        let (major, minor) = if kind == "p" {
            (node.major.unwrap_or(0), node.minor.unwrap_or(0))
        } else {
            (
                node.major.ok_or_else(|| missing("major"))?,
                node.minor.ok_or_else(|| missing("minor"))?,
            )
        };
        let mut dev = Map::new();
        dev.insert("path".into(), json!(node.path));
        dev.insert("type".into(), json!(kind));
        dev.insert("major".into(), json!(major));
        dev.insert("minor".into(), json!(minor));
        if let Some(mode) = node.file_mode {
            dev.insert("fileMode".into(), json!(mode));
        }
        if let Some(uid) = node.uid {
            dev.insert("uid".into(), json!(uid));
        }
        if let Some(gid) = node.gid {
            dev.insert("gid".into(), json!(gid));
        }
        let devices = self.array(&["linux"], "devices")?;
        let dev = Value::Object(dev);
        match devices
            .iter()
            .position(|d| d.get("path").and_then(Value::as_str) == Some(node.path.as_str()))
        {
            Some(i) => devices[i] = dev,
            None => devices.push(dev),
        }
        if kind == "c" || kind == "b" || kind == "u" {
            let access = node
                .permissions
                .clone()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "rwm".into());
            self.allow_rule(if kind == "b" { "b" } else { "c" }, major, minor, &access)?;
        }
        Ok(())
    }

    /// One `linux.resources.devices` allow rule, not added twice.
    fn allow_rule(
        &mut self,
        cg_type: &str,
        major: i64,
        minor: i64,
        access: &str,
    ) -> Result<(), SpecEditError> {
        let rule = json!({"allow": true, "type": cg_type, "major": major, "minor": minor, "access": access});
        let rules = self.array(&["linux", "resources"], "devices")?;
        if !rules.contains(&rule) {
            rules.push(rule);
        }
        Ok(())
    }

    fn add_mount(&mut self, m: &Mount) -> Result<(), SpecEditError> {
        let mut out = Map::new();
        out.insert("destination".into(), json!(m.container_path));
        let kind = m.kind.clone().or_else(|| {
            m.options
                .iter()
                .any(|o| o == "bind" || o == "rbind")
                .then(|| "bind".to_string())
        });
        if let Some(kind) = kind {
            out.insert("type".into(), json!(kind));
        }
        out.insert("source".into(), json!(m.host_path));
        if !m.options.is_empty() {
            out.insert("options".into(), json!(m.options));
        }
        let mounts = self.array(&[], "mounts")?;
        mounts.retain(|x| {
            x.get("destination").and_then(Value::as_str) != Some(m.container_path.as_str())
        });
        mounts.push(Value::Object(out));
        Ok(())
    }

    fn add_hook(&mut self, h: &Hook) -> Result<(), SpecEditError> {
        if !HOOK_STAGES.contains(&h.hook_name.as_str()) {
            return Err(SpecEditError::HookStage {
                path: self.path.to_path_buf(),
                hook: h.path.clone(),
                stage: h.hook_name.clone(),
            });
        }
        let mut out = Map::new();
        out.insert("path".into(), json!(h.path));
        if !h.args.is_empty() {
            out.insert("args".into(), json!(h.args));
        }
        out.insert("env".into(), json!(h.env));
        let out = Value::Object(out);
        let list = self.array(&["hooks"], &h.hook_name)?;
        if !list.contains(&out) {
            list.push(out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(path: &str, major: i64, minor: i64) -> DeviceNode {
        DeviceNode {
            path: path.into(),
            host_path: Some(format!("/host{path}")),
            kind: Some("c".into()),
            major: Some(major),
            minor: Some(minor),
            permissions: Some("rw".into()),
            ..Default::default()
        }
    }

    fn mount(host: &str, container: &str) -> Mount {
        Mount {
            host_path: host.into(),
            container_path: container.into(),
            options: vec!["ro".into(), "nosuid".into(), "nodev".into(), "bind".into()],
            kind: None,
        }
    }

    fn hook(args: &[&str]) -> Hook {
        Hook {
            hook_name: "createContainer".into(),
            path: "/usr/bin/nvidia-cdi-hook".into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec!["PATH=/bin".into()],
        }
    }

    fn spec_level() -> ContainerEdits {
        ContainerEdits {
            env: vec!["NVIDIA_VISIBLE_DEVICES=void".into()],
            device_nodes: vec![node("/dev/nvidiactl", 195, 255)],
            mounts: vec![mount("/drv/usr/lib/libcuda.so.1", "/usr/lib/libcuda.so.1")],
            hooks: vec![hook(&[
                "nvidia-cdi-hook",
                "update-ldcache",
                "--folder",
                "/usr/lib",
            ])],
        }
    }

    fn gpu0() -> ContainerEdits {
        ContainerEdits {
            device_nodes: vec![node("/dev/nvidia0", 195, 0)],
            ..Default::default()
        }
    }

    fn base() -> Value {
        json!({
            "ociVersion": "1.0.2",
            "x-unknown": {"keep": [1, 2]},
            "process": {"args": ["sh"], "env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=0", "HOME=/root"], "cwd": "/"},
            "root": {"path": "rootfs"},
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
            "linux": {"resources": {"devices": [{"allow": false, "access": "rwm"}]}, "namespaces": [{"type": "mount"}]}
        })
    }

    #[test]
    fn edit_cases() {
        let p = Path::new("/b/config.json");
        let ctl_dev = json!({"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255});
        let gpu0_dev = json!({"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0});
        let ctl_rule =
            json!({"allow": true, "type": "c", "major": 195, "minor": 255, "access": "rw"});
        let gpu0_rule =
            json!({"allow": true, "type": "c", "major": 195, "minor": 0, "access": "rw"});
        let lib_mount = json!({"destination": "/usr/lib/libcuda.so.1", "type": "bind", "source": "/drv/usr/lib/libcuda.so.1", "options": ["ro", "nosuid", "nodev", "bind"]});
        let ldcache = json!({"path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib"], "env": ["PATH=/bin"]});

        let twice_edits = [spec_level(), gpu0()];
        let mut custom_node = node("/dev/nvidia1", 195, 1);
        custom_node.file_mode = Some(0o660);
        custom_node.uid = Some(0);
        custom_node.gid = Some(44);
        custom_node.permissions = None;
        let mut no_env_hook = hook(&[]);
        no_env_hook.env = vec![];
        no_env_hook.hook_name = "poststart".into();
        let replacing = ContainerEdits {
            env: vec!["HOME=/home/x".into()],
            device_nodes: vec![DeviceNode {
                major: Some(10),
                ..node("/dev/nvidia0", 195, 0)
            }],
            mounts: vec![mount("/a", "/proc")],
            ..Default::default()
        };

        type Case = (&'static str, Value, Vec<ContainerEdits>, Value);
        let cases: Vec<Case> = vec![
            ("nothing", base(), vec![], base()),
            (
                "spec level then one gpu",
                base(),
                twice_edits.to_vec(),
                json!({
                    "ociVersion": "1.0.2",
                    "x-unknown": {"keep": [1, 2]},
                    "process": {"args": ["sh"], "env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=void", "HOME=/root"], "cwd": "/"},
                    "root": {"path": "rootfs"},
                    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}, lib_mount.clone()],
                    "linux": {
                        "resources": {"devices": [{"allow": false, "access": "rwm"}, ctl_rule.clone(), gpu0_rule.clone()]},
                        "namespaces": [{"type": "mount"}],
                        "devices": [ctl_dev.clone(), gpu0_dev.clone()]
                    },
                    "hooks": {"createContainer": [ldcache.clone()]}
                }),
            ),
            (
                "applied twice is the same",
                base(),
                [twice_edits.to_vec(), twice_edits.to_vec()].concat(),
                json!({
                    "ociVersion": "1.0.2",
                    "x-unknown": {"keep": [1, 2]},
                    "process": {"args": ["sh"], "env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=void", "HOME=/root"], "cwd": "/"},
                    "root": {"path": "rootfs"},
                    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}, lib_mount.clone()],
                    "linux": {
                        "resources": {"devices": [{"allow": false, "access": "rwm"}, ctl_rule.clone(), gpu0_rule.clone()]},
                        "namespaces": [{"type": "mount"}],
                        "devices": [ctl_dev.clone(), gpu0_dev.clone()]
                    },
                    "hooks": {"createContainer": [ldcache.clone()]}
                }),
            ),
            (
                "empty document gets every section",
                json!({}),
                vec![ContainerEdits {
                    device_nodes: vec![custom_node],
                    hooks: vec![no_env_hook],
                    ..spec_level()
                }],
                json!({
                    "process": {"env": ["NVIDIA_VISIBLE_DEVICES=void"]},
                    "linux": {
                        "devices": [{"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 1, "fileMode": 0o660, "uid": 0, "gid": 44}],
                        "resources": {"devices": [{"allow": true, "type": "c", "major": 195, "minor": 1, "access": "rwm"}]}
                    },
                    "mounts": [lib_mount.clone()],
                    "hooks": {"poststart": [{"path": "/usr/bin/nvidia-cdi-hook", "env": []}]}
                }),
            ),
            (
                "same key, path and destination are replaced",
                {
                    let mut b = base();
                    b["linux"]["devices"] = json!([gpu0_dev.clone(), {"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229}]);
                    b["process"]["env"] = json!(["HOME=/a", "PATH=/bin", "HOME=/b"]);
                    b
                },
                vec![replacing],
                json!({
                    "ociVersion": "1.0.2",
                    "x-unknown": {"keep": [1, 2]},
                    "process": {"args": ["sh"], "env": ["HOME=/home/x", "PATH=/bin"], "cwd": "/"},
                    "root": {"path": "rootfs"},
                    "mounts": [{"destination": "/proc", "type": "bind", "source": "/a", "options": ["ro", "nosuid", "nodev", "bind"]}],
                    "linux": {
                        "resources": {"devices": [{"allow": false, "access": "rwm"}, {"allow": true, "type": "c", "major": 10, "minor": 0, "access": "rw"}]},
                        "namespaces": [{"type": "mount"}],
                        "devices": [{"path": "/dev/nvidia0", "type": "c", "major": 10, "minor": 0}, {"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229}]
                    }
                }),
            ),
        ];
        for (name, mut doc, edits, want) in cases {
            let refs: Vec<&ContainerEdits> = edits.iter().collect();
            apply(&mut doc, &refs, p).unwrap_or_else(|e| panic!("case {name}: {e}"));
            assert_eq!(doc, want, "case {name}");
            // Key order is part of the contract (lossless edit), not just the value.
            assert_eq!(
                serde_json::to_string(&doc).unwrap(),
                serde_json::to_string(&want).unwrap(),
                "case {name}: key order"
            );
        }
    }

    #[test]
    fn error_cases() {
        let p = Path::new("/b/config.json");
        let bad_hook = ContainerEdits {
            hooks: vec![Hook {
                hook_name: "prestarts".into(),
                ..hook(&[])
            }],
            ..Default::default()
        };
        let no_minor = ContainerEdits {
            device_nodes: vec![DeviceNode {
                minor: None,
                ..node("/dev/nvidia0", 195, 0)
            }],
            ..Default::default()
        };
        let bad_env = ContainerEdits {
            env: vec!["=x".into()],
            ..Default::default()
        };
        let bad_type = ContainerEdits {
            device_nodes: vec![DeviceNode {
                kind: Some("x".into()),
                ..node("/dev/nvidia0", 195, 0)
            }],
            ..Default::default()
        };
        let path = || p.to_path_buf();
        let cases: Vec<(&str, Value, ContainerEdits, SpecEditError)> = vec![
            (
                "env not an array",
                json!({"process": {"env": "A=b"}}),
                spec_level(),
                SpecEditError::Shape {
                    path: path(),
                    field: "process.env".into(),
                    want: "an array",
                },
            ),
            (
                "linux not an object",
                json!({"linux": []}),
                gpu0(),
                SpecEditError::Shape {
                    path: path(),
                    field: "linux".into(),
                    want: "an object",
                },
            ),
            (
                "not an object",
                json!([]),
                gpu0(),
                SpecEditError::Shape {
                    path: path(),
                    field: "the document".into(),
                    want: "a JSON object",
                },
            ),
            (
                "unknown hook stage",
                json!({}),
                bad_hook,
                SpecEditError::HookStage {
                    path: path(),
                    hook: "/usr/bin/nvidia-cdi-hook".into(),
                    stage: "prestarts".into(),
                },
            ),
            (
                "node without minor",
                json!({}),
                no_minor,
                SpecEditError::Node {
                    path: path(),
                    node: "/dev/nvidia0".into(),
                    what: "minor",
                },
            ),
            (
                "bad env",
                json!({}),
                bad_env,
                SpecEditError::Env {
                    path: path(),
                    entry: "=x".into(),
                },
            ),
            (
                "bad node type",
                json!({}),
                bad_type,
                SpecEditError::NodeType {
                    path: path(),
                    node: "/dev/nvidia0".into(),
                    kind: "x".into(),
                },
            ),
        ];
        for (name, mut doc, edits, want) in cases {
            assert_eq!(apply(&mut doc, &[&edits], p), Err(want), "case {name}");
        }
        let e = apply(&mut json!({"process": {"env": 1}}), &[&spec_level()], p)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/b/config.json: process.env is not an array; cannot apply CDI edits to it"
        );
    }
}
