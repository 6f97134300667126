//! The CDI spec model: [`Spec`], [`Device`], [`ContainerEdits`] and their parts, with the CDI
//! JSON field names (camelCase) and empty fields omitted, and the reading of a spec file's text
//! (writing it: `encode.rs`). Plain data only: no checks (see `validate.rs`), no file system.

use serde::{Deserialize, Serialize};

/// One CDI spec file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    pub cdi_version: String,
    /// `vendor/class`, e.g. `nvidia.com/gpu`.
    pub kind: String,
    #[serde(default)]
    pub devices: Vec<Device>,
    #[serde(default, skip_serializing_if = "ContainerEdits::is_empty")]
    pub container_edits: ContainerEdits,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    pub name: String,
    #[serde(default)]
    pub container_edits: ContainerEdits,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerEdits {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<DeviceNode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
}

impl ContainerEdits {
    pub fn is_empty(&self) -> bool {
        self.env.is_empty()
            && self.device_nodes.is_empty()
            && self.mounts.is_empty()
            && self.hooks.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceNode {
    /// Path in the container.
    pub path: String,
    /// Path on the host (CDI 0.5.0+); absent = same as `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<String>,
    /// `c` for character devices.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor: Option<i64>,
    /// cgroup access: `rw`, `rwm`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
    /// Mode bits of the node in the container (e.g. 0o666).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_mode: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub host_path: String,
    pub container_path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Mount type (CDI 0.4.0+).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    /// OCI hook stage; we only write `createContainer`.
    pub hook_name: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Always written by us (a hook without `env` inherits the container's; see ARCHITECTURE).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// Output encoding of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

impl Format {
    /// From a file name: `.json` → JSON, `.yaml`/`.yml` → YAML, else `None`.
    pub fn from_path(path: &std::path::Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "json" => Some(Format::Json),
            "yaml" | "yml" => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// A spec file's text as a generic JSON value (YAML is a superset of JSON, so the YAML parser
/// reads both). Validation works on this value so that it can name wrong types. The plain
/// block YAML spec writers emit goes through the fast reader (`block_yaml.rs`, the same value);
/// everything else, errors included, through `serde_norway`.
pub fn parse_value(text: &str) -> Result<serde_json::Value, serde_norway::Error> {
    match super::block_yaml::parse(text) {
        Some(v) => Ok(v),
        None => serde_norway::from_str(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Spec {
        Spec {
            cdi_version: "0.5.0".into(),
            kind: "nvidia.com/gpu".into(),
            devices: vec![Device {
                name: "0".into(),
                container_edits: ContainerEdits {
                    device_nodes: vec![DeviceNode {
                        path: "/dev/nvidia0".into(),
                        host_path: Some("/dev/nvidia0".into()),
                        kind: Some("c".into()),
                        major: Some(195),
                        minor: Some(0),
                        permissions: Some("rw".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            }],
            container_edits: ContainerEdits {
                env: vec!["NVIDIA_VISIBLE_DEVICES=void".into()],
                ..Default::default()
            },
        }
    }

    #[test]
    fn json_field_names_and_omitted_empties() {
        let v: serde_json::Value =
            serde_json::from_str(&sample().encode(Format::Json).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "cdiVersion": "0.5.0",
                "kind": "nvidia.com/gpu",
                "devices": [{"name": "0", "containerEdits": {"deviceNodes": [
                    {"path": "/dev/nvidia0", "hostPath": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "permissions": "rw"}
                ]}}],
                "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=void"]}
            })
        );
    }

    #[test]
    fn yaml_and_json_round_trip() {
        for format in [Format::Yaml, Format::Json] {
            let text = sample().encode(format).unwrap();
            let back: Spec = serde_json::from_value(parse_value(&text).unwrap()).unwrap();
            assert_eq!(back, sample(), "{format:?}:\n{text}");
        }
    }

    #[test]
    fn format_from_extension() {
        for (path, want) in [
            ("a.json", Some(Format::Json)),
            ("a.yaml", Some(Format::Yaml)),
            ("a.yml", Some(Format::Yaml)),
            ("a", None),
            ("a.txt", None),
        ] {
            assert_eq!(
                Format::from_path(std::path::Path::new(path)),
                want,
                "{path}"
            );
        }
    }
}
