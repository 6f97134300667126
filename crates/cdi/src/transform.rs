//! `nvidia-ctk cdi transform root`: a spec's paths moved from one root to another, as
//! upstream's root transform does (a spec generated inside a driver container, whose paths
//! must be the host's, e.g. `/driver-root/usr/lib/...` → `/run/nvidia/driver/usr/lib/...`).
//!
//! PURE, over the spec as a JSON value, so that every field of the input (annotations, fields of
//! a newer CDI version) is kept as it was. Which paths move:
//! - relative to the host (default): device nodes' `hostPath` (their `path` when they have
//!   none), mounts' `hostPath`, hooks' `path` (not of `startContainer` hooks, which run in the
//!   container), and the arguments of the hooks that run on the host (not `createContainer` /
//!   `startContainer`);
//! - relative to the container: device nodes' `path`, mounts' `containerPath`, the `path` of
//!   `startContainer` hooks and the arguments of `createContainer` / `startContainer` hooks.
//!
//! An argument `A::B` (create-symlinks' links) has both halves moved. A path moves when it is
//! the root itself or below it (`/a/bc` is not below `/a/b`).

use serde_json::Value;
use std::path::Path;

/// Which side of the spec's paths a root transform applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelativeTo {
    Host,
    Container,
}

impl RelativeTo {
    pub fn parse(s: &str) -> Option<RelativeTo> {
        match s {
            "host" => Some(RelativeTo::Host),
            "container" => Some(RelativeTo::Container),
            _ => None,
        }
    }
}

/// `path` with the root `from` replaced by `to`, or unchanged when it is not under `from`.
pub fn move_path(path: &str, from: &str, to: &str) -> String {
    let root = from.trim_end_matches('/');
    let rest = match path.strip_prefix(root) {
        Some(rest) if (rest.is_empty() && !root.is_empty()) || rest.starts_with('/') => rest,
        _ => return path.to_string(),
    };
    let joined = Path::new(to).join(rest.trim_start_matches('/'));
    let s = joined.to_string_lossy().into_owned();
    match s.trim_end_matches('/') {
        "" if s.starts_with('/') => "/".to_string(),
        t => t.to_string(),
    }
}

/// Moves the paths of `spec` (see the module doc) from `from` to `to`.
pub fn root(spec: &mut Value, from: &str, to: &str, rel: RelativeTo) {
    if from == to {
        return;
    }
    let mv = |s: &str| move_path(s, from, to);
    if let Some(devices) = spec.get_mut("devices").and_then(Value::as_array_mut) {
        for e in devices
            .iter_mut()
            .filter_map(|d| d.get_mut("containerEdits"))
        {
            edits_root(e, &mv, rel);
        }
    }
    if let Some(e) = spec.get_mut("containerEdits") {
        edits_root(e, &mv, rel);
    }
}

fn edits_root(edits: &mut Value, mv: &dyn Fn(&str) -> String, rel: RelativeTo) {
    for node in array(edits, "deviceNodes") {
        match rel {
            RelativeTo::Host => {
                if node
                    .get("hostPath")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    let path = node.get("path").cloned().unwrap_or(Value::Null);
                    if let Some(obj) = node.as_object_mut() {
                        obj.insert("hostPath".into(), path);
                    }
                }
                field(node, "hostPath", mv);
            }
            RelativeTo::Container => field(node, "path", mv),
        }
    }
    for mount in array(edits, "mounts") {
        match rel {
            RelativeTo::Host => field(mount, "hostPath", mv),
            RelativeTo::Container => field(mount, "containerPath", mv),
        }
    }
    for hook in array(edits, "hooks") {
        let name = hook
            .get("hookName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let in_container = name == "createContainer" || name == "startContainer";
        let (path, args) = match rel {
            RelativeTo::Host => (name != "startContainer", !in_container),
            RelativeTo::Container => (name == "startContainer", in_container),
        };
        if path {
            field(hook, "path", mv);
        }
        if args {
            for arg in array(hook, "args") {
                if let Some(s) = arg.as_str() {
                    let moved = match s.split_once("::") {
                        Some((a, b)) => format!("{}::{}", mv(a), mv(b)),
                        None => mv(s),
                    };
                    *arg = Value::String(moved);
                }
            }
        }
    }
}

fn array<'a>(v: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// `v[key]` moved by `mv` when it is a string.
fn field(v: &mut Value, key: &str, mv: &dyn Fn(&str) -> String) {
    if let Some(f) = v.get_mut(key) {
        if let Some(s) = f.as_str() {
            *f = Value::String(mv(s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn move_path_cases() {
        let cases = [
            (
                "below the root",
                "/driver-root/usr/lib/x.so",
                "/driver-root",
                "/run/nvidia/driver",
                "/run/nvidia/driver/usr/lib/x.so",
            ),
            (
                "the root itself",
                "/driver-root",
                "/driver-root",
                "/host",
                "/host",
            ),
            (
                "root with a slash",
                "/driver-root/dev/nvidia0",
                "/driver-root/",
                "/",
                "/dev/nvidia0",
            ),
            (
                "a sibling is not below",
                "/driver-rootfs/x",
                "/driver-root",
                "/host",
                "/driver-rootfs/x",
            ),
            (
                "not under the root",
                "/usr/bin/nvidia-cdi-hook",
                "/driver-root",
                "/host",
                "/usr/bin/nvidia-cdi-hook",
            ),
            ("to the root", "/driver-root", "/driver-root", "/", "/"),
            (
                "from the root",
                "/usr/lib/x.so",
                "/",
                "/host",
                "/host/usr/lib/x.so",
            ),
            ("a flag", "--folder", "/", "/host", "--folder"),
        ];
        for (name, path, from, to, want) in cases {
            assert_eq!(move_path(path, from, to), want, "case {name}");
        }
    }

    #[test]
    fn root_cases() {
        let spec = || {
            json!({
                "cdiVersion": "0.5.0",
                "kind": "nvidia.com/gpu",
                "annotations": {"kept": "as is"},
                "devices": [{"name": "0", "containerEdits": {"deviceNodes": [
                    {"path": "/d/dev/nvidia0"},
                    {"path": "/dev/nvidia1", "hostPath": "/d/dev/nvidia1"}
                ]}}],
                "containerEdits": {
                    "mounts": [{"hostPath": "/d/usr/lib/libcuda.so.1", "containerPath": "/d/usr/lib/libcuda.so.1"}],
                    "hooks": [
                        {"hookName": "createContainer", "path": "/d/usr/bin/nvidia-cdi-hook",
                         "args": ["nvidia-cdi-hook", "create-symlinks", "--link", "/d/a::/d/b"]},
                        {"hookName": "prestart", "path": "/d/bin/hook", "args": ["hook", "/d/x"]},
                        {"hookName": "startContainer", "path": "/d/bin/start", "args": ["start", "/d/y"]}
                    ]
                }
            })
        };
        let mut host = spec();
        root(&mut host, "/d", "/h", RelativeTo::Host);
        assert_eq!(host["annotations"], json!({"kept": "as is"}));
        let nodes = &host["devices"][0]["containerEdits"]["deviceNodes"];
        assert_eq!(
            nodes[0],
            json!({"path": "/d/dev/nvidia0", "hostPath": "/h/dev/nvidia0"})
        );
        assert_eq!(nodes[1]["hostPath"], "/h/dev/nvidia1");
        let e = &host["containerEdits"];
        assert_eq!(
            e["mounts"][0],
            json!({"hostPath": "/h/usr/lib/libcuda.so.1", "containerPath": "/d/usr/lib/libcuda.so.1"})
        );
        assert_eq!(e["hooks"][0]["path"], "/h/usr/bin/nvidia-cdi-hook");
        assert_eq!(
            e["hooks"][0]["args"][3], "/d/a::/d/b",
            "createContainer args are container paths"
        );
        assert_eq!(e["hooks"][1]["path"], "/h/bin/hook");
        assert_eq!(e["hooks"][1]["args"], json!(["hook", "/h/x"]));
        assert_eq!(
            e["hooks"][2]["path"], "/d/bin/start",
            "startContainer runs in the container"
        );

        let mut ctr = spec();
        root(&mut ctr, "/d", "/c", RelativeTo::Container);
        let nodes = &ctr["devices"][0]["containerEdits"]["deviceNodes"];
        assert_eq!(nodes[0], json!({"path": "/c/dev/nvidia0"}));
        assert_eq!(nodes[1]["hostPath"], "/d/dev/nvidia1");
        let e = &ctr["containerEdits"];
        assert_eq!(e["mounts"][0]["containerPath"], "/c/usr/lib/libcuda.so.1");
        assert_eq!(e["mounts"][0]["hostPath"], "/d/usr/lib/libcuda.so.1");
        assert_eq!(e["hooks"][0]["path"], "/d/usr/bin/nvidia-cdi-hook");
        assert_eq!(e["hooks"][0]["args"][3], "/c/a::/c/b");
        assert_eq!(e["hooks"][1]["args"], json!(["hook", "/d/x"]));
        assert_eq!(e["hooks"][2]["path"], "/c/bin/start");
        assert_eq!(e["hooks"][2]["args"], json!(["start", "/c/y"]));

        let mut same = spec();
        root(&mut same, "/d", "/d", RelativeTo::Host);
        assert_eq!(same, spec(), "from == to is a no-op");
    }
}
