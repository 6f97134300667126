//! A spec's device nodes completed from the host, as the CDI library does before it edits a
//! container (`container-device-interface`, `pkg/cdi/container-edits_unix.go`,
//! `DeviceNode.fillMissingInfo`): specs written by Go programs (the NVIDIA device plugin's
//! own spec for its `cdi-annotations` strategy) leave out `type`, and `major`/`minor` where
//! they are 0 (`omitempty`), so `/dev/nvidia0` and `/dev/nvidia-uvm` come without a minor.
//!
//! Rule (the library's): a node is *minimally specified* when it has a `type` and a non-zero
//! `major` (a fifo, `p`, needs no numbers). The host node (`hostPath`, else `path`) is
//! `lstat`ed (a symbolic link is not a device node). If that fails, a minimally specified
//! node is used as written (an absent minor is 0) and any other one is refused, naming the
//! node and the spec file. If it succeeds, `fileMode` is taken from the host node when the
//! spec has none; a minimally specified node is otherwise used as written; any other one gets
//! the host node's type (a `type` that differs from the host's is refused), and, when its
//! `major` is absent or 0, the host node's major *and* minor.
//!
//! Reads the host (lstat only); writes nothing.

use super::spec::{ContainerEdits, DeviceNode};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FillError {
    #[error("{spec}: CDI device node {node} gives no type and major and its host node {host} cannot be used to find them: {why}; give \"type\", \"major\" and \"minor\" in the spec, or create {host} on the host (regenerate the spec for this host)")]
    NoHostNode {
        spec: PathBuf,
        node: String,
        host: String,
        why: String,
    },
    #[error("{spec}: CDI device node {node} has type {kind:?} but its host node {host} is of type {host_kind:?}; fix \"type\" in the spec or leave it out")]
    TypeMismatch {
        spec: PathBuf,
        node: String,
        host: String,
        kind: String,
        host_kind: String,
    },
}

/// What `lstat` says about a host device node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostNode {
    /// `c`, `b` or `p`.
    pub kind: &'static str,
    pub major: i64,
    pub minor: i64,
    /// Permission bits.
    pub mode: u32,
}

/// `lstat(path)` as a device node; the error says why it is not one.
pub fn host_node(path: &Path) -> Result<HostNode, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    let ft = meta.file_type();
    let kind = if ft.is_char_device() {
        "c"
    } else if ft.is_block_device() {
        "b"
    } else if ft.is_fifo() {
        "p"
    } else {
        return Err("not a device node".into());
    };
    Ok(HostNode {
        kind,
        major: i64::from(libc::major(meta.rdev())),
        minor: i64::from(libc::minor(meta.rdev())),
        mode: meta.mode() & 0o777,
    })
}

/// PURE: `node` completed with what `host` (the lstat of its host node, or why that failed)
/// says, by the rule in the module doc. `spec` names the spec file in errors.
pub fn fill_node(
    node: &DeviceNode,
    host: Result<HostNode, String>,
    spec: &Path,
) -> Result<DeviceNode, FillError> {
    let mut n = node.clone();
    let kind = n.kind.clone().filter(|k| !k.is_empty());
    let minimal = kind
        .as_deref()
        .is_some_and(|k| k == "p" || n.major.unwrap_or(0) != 0);
    let host_path = n.host_path.clone().unwrap_or_else(|| n.path.clone());
    let host = match host {
        Ok(h) => h,
        Err(why) if !minimal => {
            return Err(FillError::NoHostNode {
                spec: spec.to_path_buf(),
                node: n.path.clone(),
                host: host_path,
                why,
            })
        }
        Err(_) => {
            n.kind = kind;
            if n.kind.as_deref() != Some("p") {
                n.minor = Some(n.minor.unwrap_or(0));
            }
            return Ok(n);
        }
    };
    if n.file_mode.is_none() {
        n.file_mode = Some(host.mode);
    }
    if minimal {
        n.kind = kind;
        if n.kind.as_deref() != Some("p") {
            n.minor = Some(n.minor.unwrap_or(0));
        }
        return Ok(n);
    }
    let kind = kind.unwrap_or_else(|| host.kind.to_string());
    if kind != host.kind {
        return Err(FillError::TypeMismatch {
            spec: spec.to_path_buf(),
            node: n.path.clone(),
            host: host_path,
            kind,
            host_kind: host.kind.into(),
        });
    }
    n.kind = Some(kind);
    if host.kind == "p" {
        return Ok(n);
    }
    if n.major.unwrap_or(0) == 0 {
        n.major = Some(host.major);
        n.minor = Some(host.minor);
    } else {
        n.minor = Some(n.minor.unwrap_or(0));
    }
    Ok(n)
}

/// `edits` with every device node completed from the host (see the module doc); `spec` is
/// the file they come from.
pub fn fill(edits: &ContainerEdits, spec: &Path) -> Result<ContainerEdits, FillError> {
    let mut out = edits.clone();
    for node in &mut out.device_nodes {
        let host = host_node(Path::new(node.host_path.as_deref().unwrap_or(&node.path)));
        *node = fill_node(node, host, spec)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(kind: Option<&str>, major: Option<i64>, minor: Option<i64>) -> DeviceNode {
        DeviceNode {
            path: "/dev/nvidia-uvm".into(),
            host_path: Some("/host/dev/nvidia-uvm".into()),
            kind: kind.map(String::from),
            major,
            minor,
            ..Default::default()
        }
    }

    const UVM: HostNode = HostNode {
        kind: "c",
        major: 508,
        minor: 0,
        mode: 0o666,
    };
    const GPU1: HostNode = HostNode {
        kind: "c",
        major: 195,
        minor: 1,
        mode: 0o660,
    };

    #[test]
    fn fill_cases() {
        let spec = Path::new("/etc/cdi/k8s-device-plugin.json");
        let filled = |kind: &str, major, minor, mode| {
            let mut n = node(Some(kind), Some(major), Some(minor));
            n.file_mode = Some(mode);
            Ok(n)
        };
        let gone = || Err::<HostNode, _>("No such file or directory (os error 2)".to_string());
        let cases: Vec<(
            &str,
            DeviceNode,
            Result<HostNode, String>,
            Result<DeviceNode, FillError>,
        )> = vec![
            (
                "Go omitempty: no type, major or minor",
                node(None, None, None),
                Ok(UVM),
                filled("c", 508, 0, 0o666),
            ),
            (
                "no type, major given, minor 0 left out",
                node(None, Some(195), None),
                Ok(GPU1),
                // As the library: a non-zero major keeps the spec's numbers (minor 0).
                filled("c", 195, 0, 0o660),
            ),
            (
                "no type, major 0: both numbers from the host",
                node(None, Some(0), Some(9)),
                Ok(GPU1),
                filled("c", 195, 1, 0o660),
            ),
            (
                "type c without major: numbers from the host",
                node(Some("c"), None, None),
                Ok(GPU1),
                filled("c", 195, 1, 0o660),
            ),
            (
                "minimal: type and major, minor 0 left out, host node missing",
                node(Some("c"), Some(195), None),
                gone(),
                Ok(node(Some("c"), Some(195), Some(0))),
            ),
            (
                "minimal: the spec's numbers win over the host's, mode from the host",
                node(Some("c"), Some(195), Some(7)),
                Ok(GPU1),
                filled("c", 195, 7, 0o660),
            ),
            (
                "fully given, mode given: kept",
                DeviceNode {
                    file_mode: Some(0o600),
                    ..node(Some("c"), Some(508), Some(0))
                },
                Ok(UVM),
                filled("c", 508, 0, 0o600),
            ),
            (
                "fifo without numbers",
                node(Some("p"), None, None),
                gone(),
                Ok(node(Some("p"), None, None)),
            ),
            (
                "no numbers and no host node: refused",
                node(None, None, None),
                gone(),
                Err(FillError::NoHostNode {
                    spec: spec.into(),
                    node: "/dev/nvidia-uvm".into(),
                    host: "/host/dev/nvidia-uvm".into(),
                    why: "No such file or directory (os error 2)".into(),
                }),
            ),
            (
                "type only, host path not a device: refused",
                node(Some("c"), None, None),
                Err("not a device node".into()),
                Err(FillError::NoHostNode {
                    spec: spec.into(),
                    node: "/dev/nvidia-uvm".into(),
                    host: "/host/dev/nvidia-uvm".into(),
                    why: "not a device node".into(),
                }),
            ),
            (
                "type differs from the host's: refused",
                node(Some("b"), None, None),
                Ok(UVM),
                Err(FillError::TypeMismatch {
                    spec: spec.into(),
                    node: "/dev/nvidia-uvm".into(),
                    host: "/host/dev/nvidia-uvm".into(),
                    kind: "b".into(),
                    host_kind: "c".into(),
                }),
            ),
        ];
        for (name, n, host, want) in cases {
            assert_eq!(fill_node(&n, host, spec), want, "case {name}");
        }
        let e = fill_node(&node(None, None, None), gone(), spec)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/etc/cdi/k8s-device-plugin.json: CDI device node /dev/nvidia-uvm gives no type and major and its host node /host/dev/nvidia-uvm cannot be used"),
            "{e}"
        );
    }

    #[test]
    fn host_nodes_by_lstat() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("null-link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let null = host_node(Path::new("/dev/null")).unwrap();
        assert_eq!((null.kind, null.major, null.minor), ("c", 1, 3));
        assert_eq!(
            host_node(&link),
            Err("not a device node".to_string()),
            "a link is not followed"
        );
        assert_eq!(host_node(dir.path()), Err("not a device node".to_string()));
        assert!(host_node(&dir.path().join("missing")).is_err());
        let edits = ContainerEdits {
            device_nodes: vec![DeviceNode {
                path: "/dev/null".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let got = fill(&edits, Path::new("/etc/cdi/x.yaml")).unwrap();
        let n = &got.device_nodes[0];
        assert_eq!(
            (n.kind.as_deref(), n.major, n.minor),
            (Some("c"), Some(1), Some(3))
        );
    }
}
