//! `cdi validate`: checks of a CDI spec that name the field at fault
//! (`devices[3].containerEdits.deviceNodes[0].hostPath`). Two layers:
//! - [`schema`]: PURE checks on the parsed document (required fields, types, name charsets,
//!   kind format, known cdiVersion, known hook names) — every rule of the CDI JSON schema
//!   (required fields; the JSON type of each field; uint32 and int64 ranges; the shapes of
//!   annotations and of the later versions' netDevices, intelRdt and additionalGids, which our
//!   model does not carry) plus what the schema cannot express (name charsets, the kind's
//!   form, known versions and hook names, KEY=VALUE env, absolute node paths). Like the
//!   schema, it refuses no unknown field: a newer spec's fields pass;
//! - [`semantic`]: checks against the host and across devices (device names unique, every
//!   hostPath exists, a device node's major:minor — as given, or completed from the host node
//!   where the spec leaves them out, as the CDI library does (`fill.rs`) — matches the node on
//!   the host, cdiVersion not below what the content needs). Reads the file system (stat only).

use super::fill;
use super::name;
use super::spec::{ContainerEdits, Spec};
use super::version;
use serde_json::Value;
use std::fmt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

/// OCI hook stages a CDI hook may name.
pub const HOOK_NAMES: &[&str] = &[
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Field path, e.g. `devices[0].name`; empty for the document itself.
    pub field: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

struct Checker {
    problems: Vec<Problem>,
}

fn join(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value as an error about a field that must be `want` shows it: its type, or the number
/// itself where an integer is wanted (`4294967296` is a number but not a uint32).
fn shown(want: Want, v: &Value) -> String {
    match (want, v) {
        (Want::Int64 | Want::Uint32, Value::Number(n)) => n.to_string(),
        _ => type_name(v).to_string(),
    }
}

/// The JSON type (and integer range) a field must have: what the CDI JSON schema and the CDI
/// library's Go types ask. An integer is written without a fraction (`1.0` is refused, as Go's
/// decoder refuses it for an integer field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    String,
    Array,
    Object,
    Bool,
    /// A signed 64-bit integer (`major`, `minor`).
    Int64,
    /// An integer from 0 to 4294967295 (`uid`, `gid`, `fileMode`, a hook's `timeout`,
    /// `additionalGids`).
    Uint32,
}

impl Want {
    fn matches(self, v: &Value) -> bool {
        match self {
            Want::String => v.is_string(),
            Want::Array => v.is_array(),
            Want::Object => v.is_object(),
            Want::Bool => v.is_boolean(),
            Want::Int64 => v.is_i64(),
            Want::Uint32 => v.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Want::String => "a string",
            Want::Array => "an array",
            Want::Object => "an object",
            Want::Bool => "a boolean",
            Want::Int64 => "an integer (signed 64-bit)",
            Want::Uint32 => "an integer from 0 to 4294967295",
        }
    }
}

impl Checker {
    fn fail(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            field: field.into(),
            message: message.into(),
        });
    }

    /// The field `key` of `obj` if present and of the wanted type; reports otherwise.
    fn get<'v>(
        &mut self,
        obj: &'v serde_json::Map<String, Value>,
        base: &str,
        key: &str,
        required: bool,
        want: Want,
    ) -> Option<&'v Value> {
        let field = join(base, key);
        let Some(v) = obj.get(key) else {
            if required {
                self.fail(field, "is required");
            }
            return None;
        };
        if !want.matches(v) {
            self.fail(
                field,
                format!("must be {}, not {}", want.describe(), shown(want, v)),
            );
            return None;
        }
        Some(v)
    }

    fn string_array(
        &mut self,
        obj: &serde_json::Map<String, Value>,
        base: &str,
        key: &str,
    ) -> Vec<String> {
        let Some(items) = self
            .get(obj, base, key, false, Want::Array)
            .and_then(Value::as_array)
        else {
            return vec![];
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(s) => out.push(s.to_string()),
                None => self.fail(
                    format!("{}[{i}]", join(base, key)),
                    format!("must be a string, not {}", type_name(item)),
                ),
            }
        }
        out
    }

    fn objects<'v>(
        &mut self,
        obj: &'v serde_json::Map<String, Value>,
        base: &str,
        key: &str,
        required: bool,
    ) -> Vec<(String, &'v serde_json::Map<String, Value>)> {
        let Some(items) = self
            .get(obj, base, key, required, Want::Array)
            .and_then(Value::as_array)
        else {
            return vec![];
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let field = format!("{}[{i}]", join(base, key));
            match item.as_object() {
                Some(o) => out.push((field, o)),
                None => self.fail(field, format!("must be an object, not {}", type_name(item))),
            }
        }
        out
    }

    fn edits(&mut self, obj: &serde_json::Map<String, Value>, base: &str, required: bool) {
        let Some(edits) = self
            .get(obj, base, "containerEdits", required, Want::Object)
            .and_then(Value::as_object)
        else {
            return;
        };
        let base = join(base, "containerEdits");
        for (i, e) in self.string_array(edits, &base, "env").iter().enumerate() {
            if !e.contains('=') || e.starts_with('=') {
                self.fail(
                    format!("{base}.env[{i}]"),
                    format!("{e:?} is not KEY=VALUE"),
                );
            }
        }
        for (field, node) in self.objects(edits, &base, "deviceNodes", false) {
            if let Some(p) = self
                .get(node, &field, "path", true, Want::String)
                .and_then(Value::as_str)
            {
                if !p.starts_with('/') {
                    self.fail(
                        join(&field, "path"),
                        format!("{p:?} is not an absolute path"),
                    );
                }
            }
            self.get(node, &field, "hostPath", false, Want::String);
            if let Some(t) = self
                .get(node, &field, "type", false, Want::String)
                .and_then(Value::as_str)
            {
                if !["b", "c", "u", "p"].contains(&t) {
                    self.fail(
                        join(&field, "type"),
                        format!("{t:?} is not a device type (b, c, u or p)"),
                    );
                }
            }
            for key in ["major", "minor"] {
                self.get(node, &field, key, false, Want::Int64);
            }
            for key in ["uid", "gid", "fileMode"] {
                self.get(node, &field, key, false, Want::Uint32);
            }
            if let Some(p) = self
                .get(node, &field, "permissions", false, Want::String)
                .and_then(Value::as_str)
            {
                if p.is_empty() || !p.chars().all(|c| "rwm".contains(c)) {
                    self.fail(
                        join(&field, "permissions"),
                        format!("{p:?} is not a combination of r, w and m"),
                    );
                }
            }
        }
        for (field, mount) in self.objects(edits, &base, "mounts", false) {
            self.get(mount, &field, "hostPath", true, Want::String);
            self.get(mount, &field, "containerPath", true, Want::String);
            self.string_array(mount, &field, "options");
            self.get(mount, &field, "type", false, Want::String);
        }
        for (field, hook) in self.objects(edits, &base, "hooks", false) {
            if let Some(n) = self
                .get(hook, &field, "hookName", true, Want::String)
                .and_then(Value::as_str)
            {
                if !HOOK_NAMES.contains(&n) {
                    self.fail(
                        join(&field, "hookName"),
                        format!("unknown hook {n:?}; known: {}", HOOK_NAMES.join(", ")),
                    );
                }
            }
            self.get(hook, &field, "path", true, Want::String);
            self.string_array(hook, &field, "args");
            self.string_array(hook, &field, "env");
            self.get(hook, &field, "timeout", false, Want::Uint32);
        }
        // Edits of later CDI versions, which this model does not carry (version.rs): their
        // shapes only.
        for (field, dev) in self.objects(edits, &base, "netDevices", false) {
            self.get(dev, &field, "hostInterfaceName", true, Want::String);
            self.get(dev, &field, "name", true, Want::String);
        }
        if let Some(rdt) = self
            .get(edits, &base, "intelRdt", false, Want::Object)
            .and_then(Value::as_object)
        {
            let field = join(&base, "intelRdt");
            for key in ["closID", "l3CacheSchema", "memBwSchema"] {
                self.get(rdt, &field, key, false, Want::String);
            }
            self.string_array(rdt, &field, "schemata");
            self.get(rdt, &field, "enableMonitoring", false, Want::Bool);
        }
        if let Some(gids) = self
            .get(edits, &base, "additionalGids", false, Want::Array)
            .and_then(Value::as_array)
        {
            for (i, gid) in gids.iter().enumerate() {
                if !Want::Uint32.matches(gid) {
                    self.fail(
                        format!("{base}.additionalGids[{i}]"),
                        format!(
                            "must be {}, not {}",
                            Want::Uint32.describe(),
                            shown(Want::Uint32, gid)
                        ),
                    );
                }
            }
        }
    }

    /// `annotations` (of the spec or of a device): an object of strings.
    fn annotations(&mut self, obj: &serde_json::Map<String, Value>, base: &str) {
        let Some(map) = self
            .get(obj, base, "annotations", false, Want::Object)
            .and_then(Value::as_object)
        else {
            return;
        };
        for (key, value) in map {
            if !value.is_string() {
                self.fail(
                    format!("{}[{key:?}]", join(base, "annotations")),
                    format!("must be a string, not {}", type_name(value)),
                );
            }
        }
    }
}

/// Schema-level checks of a parsed spec document.
pub fn schema(doc: &Value) -> Vec<Problem> {
    let mut c = Checker { problems: vec![] };
    let Some(root) = doc.as_object() else {
        c.fail(
            "",
            format!("a CDI spec must be an object, not {}", type_name(doc)),
        );
        return c.problems;
    };
    if let Some(v) = c
        .get(root, "", "cdiVersion", true, Want::String)
        .and_then(Value::as_str)
    {
        if !version::is_known(v) {
            c.fail(
                "cdiVersion",
                format!(
                    "unknown version {v:?}; known: {}",
                    version::KNOWN.join(", ")
                ),
            );
        }
    }
    if let Some(kind) = c
        .get(root, "", "kind", true, Want::String)
        .and_then(Value::as_str)
    {
        if let Err(e) = name::parse_kind(kind) {
            c.fail("kind", e.to_string());
        }
    }
    for (field, device) in c.objects(root, "", "devices", true) {
        if let Some(n) = c
            .get(device, &field, "name", true, Want::String)
            .and_then(Value::as_str)
        {
            if let Err(e) = name::validate_device_name(n) {
                c.fail(join(&field, "name"), e.to_string());
            }
        }
        c.annotations(device, &field);
        c.edits(device, &field, true);
    }
    c.annotations(root, "");
    c.edits(root, "", false);
    c.problems
}

fn version_tuple(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// Device names defined more than once (a `kind=name` would be ambiguous). Pure.
pub fn duplicate_names(spec: &Spec) -> Vec<Problem> {
    let mut out = Vec::new();
    for (i, d) in spec.devices.iter().enumerate() {
        if let Some(first) = spec.devices[..i].iter().position(|e| e.name == d.name) {
            out.push(Problem {
                field: format!("devices[{i}].name"),
                message: format!("{:?} is already the name of devices[{first}]", d.name),
            });
        }
    }
    out
}

/// Checks across devices and against the host. `spec` should have passed [`schema`].
pub fn semantic(spec: &Spec) -> Vec<Problem> {
    let mut c = Checker { problems: vec![] };
    let need = version::minimum(spec);
    if version_tuple(&spec.cdi_version) < version_tuple(need) {
        c.fail(
            "cdiVersion",
            format!(
                "{:?} is too old for this content, which needs {need}",
                spec.cdi_version
            ),
        );
    }
    c.problems.extend(duplicate_names(spec));
    for (i, d) in spec.devices.iter().enumerate() {
        if d.container_edits.is_empty() {
            c.fail(
                format!("devices[{i}].containerEdits"),
                format!(
                    "device {:?} has no edits: podman and the CDI library refuse it (\"invalid device, empty device edits\")",
                    d.name
                ),
            );
        }
    }
    let edits = spec
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| (format!("devices[{i}].containerEdits"), &d.container_edits))
        .chain(std::iter::once((
            "containerEdits".to_string(),
            &spec.container_edits,
        )));
    for (base, e) in edits {
        host_checks(&mut c, &base, e);
    }
    c.problems
}

fn host_checks(c: &mut Checker, base: &str, e: &ContainerEdits) {
    for (i, n) in e.device_nodes.iter().enumerate() {
        let (field, path) = match &n.host_path {
            Some(h) => (format!("{base}.deviceNodes[{i}].hostPath"), h),
            None => (format!("{base}.deviceNodes[{i}].path"), &n.path),
        };
        let meta = match std::fs::metadata(path) {
            Err(err) => {
                c.fail(field, format!("{path}: {err}"));
                continue;
            }
            Ok(meta) => meta,
        };
        if !(meta.file_type().is_char_device() || meta.file_type().is_block_device()) {
            c.fail(field, format!("{path} is not a device node"));
            continue;
        }
        // The numbers a container gets: what the spec gives, completed from the host as the
        // CDI library does (`fill.rs`; a Go-written spec leaves out type and zero numbers).
        let host = fill::host_node(std::path::Path::new(path));
        let filled = match fill::fill_node(n, host, std::path::Path::new("")) {
            Ok(f) => f,
            Err(fill::FillError::TypeMismatch {
                kind, host_kind, ..
            }) => {
                c.fail(
                    format!("{base}.deviceNodes[{i}].type"),
                    format!("{kind:?} but {path} is of type {host_kind:?} on this host"),
                );
                continue;
            }
            Err(fill::FillError::NoHostNode { why, .. }) => {
                c.fail(
                    field,
                    format!("{path}: {why}; without type and major in the spec, the CDI library reads them from this node itself (a symbolic link is not followed)"),
                );
                continue;
            }
        };
        let (major, minor) = (
            i64::from(libc::major(meta.rdev())),
            i64::from(libc::minor(meta.rdev())),
        );
        for (key, want, have) in [
            ("major", filled.major, major),
            ("minor", filled.minor, minor),
        ] {
            if want.is_some_and(|w| w != have) {
                let given = if key == "minor" && n.minor.is_none() {
                    "absent (0)".to_string()
                } else {
                    want.unwrap_or_default().to_string()
                };
                c.fail(
                    format!("{base}.deviceNodes[{i}].{key}"),
                    format!("{given} but {path} is {major}:{minor} on this host"),
                );
            }
        }
    }
    for (i, m) in e.mounts.iter().enumerate() {
        if let Err(err) = std::fs::symlink_metadata(&m.host_path) {
            c.fail(
                format!("{base}.mounts[{i}].hostPath"),
                format!("{}: {err}", m.host_path),
            );
        }
    }
}

/// Both layers on a spec file's text: the typed spec, or every problem found.
pub fn validate_text(text: &str) -> Result<Spec, Vec<Problem>> {
    let doc = super::spec::parse_value(text).map_err(|e| {
        vec![Problem {
            field: String::new(),
            message: format!("not YAML or JSON: {e}"),
        }]
    })?;
    let problems = schema(&doc);
    if !problems.is_empty() {
        return Err(problems);
    }
    let spec: Spec = serde_json::from_value(doc).map_err(|e| {
        vec![Problem {
            field: String::new(),
            message: e.to_string(),
        }]
    })?;
    let problems = semantic(&spec);
    if problems.is_empty() {
        Ok(spec)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "cdiVersion": "0.5.0",
            "kind": "nvidia.com/gpu",
            "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/null", "type": "c", "major": 1, "minor": 3}]}}],
            "containerEdits": {"env": ["A=b"], "hooks": [{"hookName": "createContainer", "path": "/bin/true", "env": ["PATH=/bin"]}]}
        })
    }

    #[test]
    fn schema_cases() {
        let edit = |f: &dyn Fn(&mut Value)| {
            let mut v = base();
            f(&mut v);
            v
        };
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("valid", base(), vec![]),
            ("not an object", json!([1]), vec!["a CDI spec must be an object, not an array"]),
            ("missing kind", edit(&|v| { v.as_object_mut().unwrap().remove("kind"); }), vec!["kind: is required"]),
            ("bad kind", edit(&|v| v["kind"] = json!("nvidia.com")), vec!["kind: \"nvidia.com\" is not a CDI kind: expected vendor/class, e.g. nvidia.com/gpu"]),
            ("unknown version", edit(&|v| v["cdiVersion"] = json!("9.9.9")), vec!["cdiVersion: unknown version \"9.9.9\"; known: 0.1.0, 0.2.0, 0.3.0, 0.4.0, 0.5.0, 0.6.0, 0.7.0, 0.8.0, 0.9.0, 1.0.0, 1.1.0"]),
            ("bad device name", edit(&|v| v["devices"][0]["name"] = json!("a/b")),
                vec!["devices[0].name: device name \"a/b\" contains '/'; allowed: letters, digits and _.:-"]),
            ("name not a string", edit(&|v| v["devices"][0]["name"] = json!(3)), vec!["devices[0].name: must be a string, not a number"]),
            ("device without edits", edit(&|v| { v["devices"][0].as_object_mut().unwrap().remove("containerEdits"); }),
                vec!["devices[0].containerEdits: is required"]),
            ("node without path", edit(&|v| { v["devices"][0]["containerEdits"]["deviceNodes"][0].as_object_mut().unwrap().remove("path"); }),
                vec!["devices[0].containerEdits.deviceNodes[0].path: is required"]),
            ("major not an integer", edit(&|v| v["devices"][0]["containerEdits"]["deviceNodes"][0]["major"] = json!("195")),
                vec!["devices[0].containerEdits.deviceNodes[0].major: must be an integer (signed 64-bit), not a string"]),
            ("unknown hook", edit(&|v| v["containerEdits"]["hooks"][0]["hookName"] = json!("preStart")),
                vec!["containerEdits.hooks[0].hookName: unknown hook \"preStart\"; known: prestart, createRuntime, createContainer, startContainer, poststart, poststop"]),
            ("env not KEY=VALUE", edit(&|v| v["containerEdits"]["env"] = json!(["A=1", "B"])), vec!["containerEdits.env[1]: \"B\" is not KEY=VALUE"]),
            ("mount without containerPath", edit(&|v| v["containerEdits"]["mounts"] = json!([{"hostPath": "/a"}])),
                vec!["containerEdits.mounts[0].containerPath: is required"]),
        ];
        for (case, doc, want) in cases {
            let got: Vec<String> = schema(&doc).iter().map(ToString::to_string).collect();
            assert_eq!(got, want, "case {case}");
        }
    }

    /// Each rule the CDI JSON schema states, as one spec that breaks it and the reason it is
    /// refused with; then one spec with every field of the later versions, well formed.
    #[test]
    fn schema_rules() {
        let edit = |f: &dyn Fn(&mut Value)| {
            let mut v = base();
            f(&mut v);
            v
        };
        let node = |f: &dyn Fn(&mut Value)| {
            edit(&|v| f(&mut v["devices"][0]["containerEdits"]["deviceNodes"][0]))
        };
        let hook = |f: &dyn Fn(&mut Value)| edit(&|v| f(&mut v["containerEdits"]["hooks"][0]));
        let edits = |key: &str, value: Value| {
            let mut v = base();
            v["containerEdits"][key] = value;
            v
        };
        const N: &str = "devices[0].containerEdits.deviceNodes[0]";
        const H: &str = "containerEdits.hooks[0]";
        let cases: Vec<(&str, Value, Vec<String>)> = vec![
            // The document.
            ("missing cdiVersion", edit(&|v| { v.as_object_mut().unwrap().remove("cdiVersion"); }), vec!["cdiVersion: is required".into()]),
            ("cdiVersion a number", edit(&|v| v["cdiVersion"] = json!(0.5)), vec!["cdiVersion: must be a string, not a number".into()]),
            ("kind a list", edit(&|v| v["kind"] = json!(["nvidia.com/gpu"])), vec!["kind: must be a string, not an array".into()]),
            ("missing devices", edit(&|v| { v.as_object_mut().unwrap().remove("devices"); }), vec!["devices: is required".into()]),
            ("devices an object", edit(&|v| v["devices"] = json!({"0": {}})), vec!["devices: must be an array, not an object".into()]),
            ("a device a string", edit(&|v| v["devices"] = json!(["0"])), vec!["devices[0]: must be an object, not a string".into()]),
            ("device without name", edit(&|v| { v["devices"][0].as_object_mut().unwrap().remove("name"); }), vec!["devices[0].name: is required".into()]),
            ("containerEdits a list", edit(&|v| v["containerEdits"] = json!([])), vec!["containerEdits: must be an object, not an array".into()]),
            // Annotations: an object of strings, on the spec and on a device.
            ("annotations a list", edit(&|v| v["annotations"] = json!(["a=b"])), vec!["annotations: must be an object, not an array".into()]),
            ("annotation value a number", edit(&|v| v["devices"][0]["annotations"] = json!({"a": "x", "b": 1})),
                vec!["devices[0].annotations[\"b\"]: must be a string, not a number".into()]),
            // env.
            ("env a string", edits("env", json!("A=1")), vec!["containerEdits.env: must be an array, not a string".into()]),
            ("env entry a number", edits("env", json!([1])), vec!["containerEdits.env[0]: must be a string, not a number".into()]),
            // deviceNodes.
            ("deviceNodes an object", edit(&|v| v["devices"][0]["containerEdits"]["deviceNodes"] = json!({"path": "/dev/null"})),
                vec!["devices[0].containerEdits.deviceNodes: must be an array, not an object".into()]),
            ("device node a string", edit(&|v| v["devices"][0]["containerEdits"]["deviceNodes"] = json!(["/dev/null"])),
                vec![format!("{N}: must be an object, not a string")]),
            ("node path a number", node(&|n| n["path"] = json!(1)), vec![format!("{N}.path: must be a string, not a number")]),
            ("node hostPath a boolean", node(&|n| n["hostPath"] = json!(true)), vec![format!("{N}.hostPath: must be a string, not a boolean")]),
            ("node type a number", node(&|n| n["type"] = json!(99)), vec![format!("{N}.type: must be a string, not a number")]),
            ("node permissions a list", node(&|n| n["permissions"] = json!(["r"])), vec![format!("{N}.permissions: must be a string, not an array")]),
            ("major above int64", node(&|n| n["major"] = json!(u64::MAX)), vec![format!("{N}.major: must be an integer (signed 64-bit), not 18446744073709551615")]),
            ("minor a fraction", node(&|n| n["minor"] = json!(3.5)), vec![format!("{N}.minor: must be an integer (signed 64-bit), not 3.5")]),
            ("uid negative", node(&|n| n["uid"] = json!(-1)), vec![format!("{N}.uid: must be an integer from 0 to 4294967295, not -1")]),
            ("gid above uint32", node(&|n| n["gid"] = json!(4_294_967_296_u64)), vec![format!("{N}.gid: must be an integer from 0 to 4294967295, not 4294967296")]),
            ("fileMode a string", node(&|n| n["fileMode"] = json!("0666")), vec![format!("{N}.fileMode: must be an integer from 0 to 4294967295, not a string")]),
            // mounts.
            ("mount without hostPath", edits("mounts", json!([{"containerPath": "/a"}])), vec!["containerEdits.mounts[0].hostPath: is required".into()]),
            ("mount containerPath a number", edits("mounts", json!([{"hostPath": "/a", "containerPath": 1}])),
                vec!["containerEdits.mounts[0].containerPath: must be a string, not a number".into()]),
            ("mount option a number", edits("mounts", json!([{"hostPath": "/a", "containerPath": "/a", "options": ["ro", 1]}])),
                vec!["containerEdits.mounts[0].options[1]: must be a string, not a number".into()]),
            ("mount type an object", edits("mounts", json!([{"hostPath": "/a", "containerPath": "/a", "type": {}}])),
                vec!["containerEdits.mounts[0].type: must be a string, not an object".into()]),
            // hooks.
            ("hook without hookName", hook(&|h| { h.as_object_mut().unwrap().remove("hookName"); }), vec![format!("{H}.hookName: is required")]),
            ("hook without path", hook(&|h| { h.as_object_mut().unwrap().remove("path"); }), vec![format!("{H}.path: is required")]),
            ("hook args a string", hook(&|h| h["args"] = json!("true")), vec![format!("{H}.args: must be an array, not a string")]),
            ("hook env entry null", hook(&|h| h["env"] = json!([null])), vec![format!("{H}.env[0]: must be a string, not null")]),
            ("hook timeout negative", hook(&|h| h["timeout"] = json!(-5)), vec![format!("{H}.timeout: must be an integer from 0 to 4294967295, not -5")]),
            // Later versions' edits.
            ("netDevice without name", edits("netDevices", json!([{"hostInterfaceName": "eth0"}])),
                vec!["containerEdits.netDevices[0].name: is required".into()]),
            ("netDevice without hostInterfaceName", edits("netDevices", json!([{"name": "eth1"}])),
                vec!["containerEdits.netDevices[0].hostInterfaceName: is required".into()]),
            ("intelRdt a string", edits("intelRdt", json!("COS1")), vec!["containerEdits.intelRdt: must be an object, not a string".into()]),
            ("intelRdt closID a number", edits("intelRdt", json!({"closID": 1})), vec!["containerEdits.intelRdt.closID: must be a string, not a number".into()]),
            ("intelRdt schemata a string", edits("intelRdt", json!({"schemata": "L3:0=f"})),
                vec!["containerEdits.intelRdt.schemata: must be an array, not a string".into()]),
            ("intelRdt enableMonitoring a string", edits("intelRdt", json!({"enableMonitoring": "yes"})),
                vec!["containerEdits.intelRdt.enableMonitoring: must be a boolean, not a string".into()]),
            ("additionalGids an integer", edits("additionalGids", json!(5)), vec!["containerEdits.additionalGids: must be an array, not a number".into()]),
            ("additionalGid negative", edits("additionalGids", json!([5, -1])),
                vec!["containerEdits.additionalGids[1]: must be an integer from 0 to 4294967295, not -1".into()]),
            // Every problem is reported, each at its own field.
            ("two problems", edit(&|v| { v["kind"] = json!(1); v["devices"][0]["name"] = json!(null); }),
                vec!["kind: must be a string, not a number".into(), "devices[0].name: must be a string, not null".into()]),
            // Well formed: every later-version field, and a field no version has (the schema
            // refuses no unknown field, nor do we).
            ("later fields and an unknown one", edit(&|v| {
                v["annotations"] = json!({"a": "b"});
                v["devices"][0]["annotations"] = json!({"c": "d"});
                v["containerEdits"]["netDevices"] = json!([{"hostInterfaceName": "eth0", "name": "eth1"}]);
                v["containerEdits"]["intelRdt"] = json!({"closID": "c", "l3CacheSchema": "L3:0=f", "memBwSchema": "MB:0=50", "schemata": ["L3:0=f"], "enableMonitoring": true});
                v["containerEdits"]["additionalGids"] = json!([0, 4_294_967_295_u64]);
                v["containerEdits"]["hooks"][0]["timeout"] = json!(10);
                v["devices"][0]["containerEdits"]["deviceNodes"][0]["uid"] = json!(0);
                v["devices"][0]["containerEdits"]["deviceNodes"][0]["fileMode"] = json!(438);
                v["x-unknown"] = json!({"any": ["thing"]});
            }), vec![]),
        ];
        for (case, doc, want) in cases {
            let got: Vec<String> = schema(&doc).iter().map(ToString::to_string).collect();
            assert_eq!(got, want, "case {case}: {doc}");
        }
    }

    #[test]
    fn semantic_cases() {
        let edit = |f: &dyn Fn(&mut Value)| {
            let mut v = base();
            f(&mut v);
            serde_json::from_value::<Spec>(v).unwrap()
        };
        let cases: Vec<(&str, Spec, Vec<&str>)> = vec![
            ("valid", edit(&|_| {}), vec![]),
            (
                "duplicate names",
                edit(&|v| {
                    let d = v["devices"][0].clone();
                    v["devices"].as_array_mut().unwrap().push(d);
                }),
                vec!["devices[1].name: \"0\" is already the name of devices[0]"],
            ),
            (
                "missing hostPath",
                edit(&|v| v["containerEdits"]["mounts"] = json!([{"hostPath": "/nonexistent/nvct", "containerPath": "/x"}])),
                vec!["containerEdits.mounts[0].hostPath: /nonexistent/nvct: No such file or directory (os error 2)"],
            ),
            (
                "wrong minor",
                edit(&|v| v["devices"][0]["containerEdits"]["deviceNodes"][0]["minor"] = json!(5)),
                vec!["devices[0].containerEdits.deviceNodes[0].minor: 5 but /dev/null is 1:3 on this host"],
            ),
            (
                "Go omitempty: no type, major or minor",
                edit(&|v| v["devices"][0]["containerEdits"]["deviceNodes"][0] = json!({"path": "/dev/null"})),
                vec![],
            ),
            (
                "minor 0 left out where the host's is not 0",
                edit(&|v| v["devices"][0]["containerEdits"]["deviceNodes"][0] = json!({"path": "/dev/null", "major": 1})),
                vec!["devices[0].containerEdits.deviceNodes[0].minor: absent (0) but /dev/null is 1:3 on this host"],
            ),
            (
                "type other than the host's",
                edit(&|v| v["devices"][0]["containerEdits"]["deviceNodes"][0] = json!({"path": "/dev/null", "type": "b"})),
                vec!["devices[0].containerEdits.deviceNodes[0].type: \"b\" but /dev/null is of type \"c\" on this host"],
            ),
            (
                "a device with empty edits",
                edit(&|v| v["devices"][0]["containerEdits"] = json!({})),
                vec!["devices[0].containerEdits: device \"0\" has no edits: podman and the CDI library refuse it (\"invalid device, empty device edits\")"],
            ),
            (
                "version too old",
                edit(&|v| v["cdiVersion"] = json!("0.3.0")),
                vec!["cdiVersion: \"0.3.0\" is too old for this content, which needs 0.5.0"],
            ),
        ];
        for (case, spec, want) in cases {
            let got: Vec<String> = semantic(&spec).iter().map(ToString::to_string).collect();
            assert_eq!(got, want, "case {case}");
        }
    }
}
