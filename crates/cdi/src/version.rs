//! `cdiVersion`: the versions we know and the minimum a spec's content needs. We write the
//! lowest version that can express a spec, so that older runtimes (whose CDI library refuses
//! versions it does not know) still load it.
//!
//! Rules for the features this model can carry (the CDI spec's changelog):
//! - 0.3.0: the baseline we write (kind, devices, containerEdits with env, deviceNodes,
//!   mounts, hooks);
//! - 0.4.0: a mount `type`;
//! - 0.5.0: a device node `hostPath`, and device names starting with a digit (`0`, `1:0`).
//!
//! Later versions add fields this model does not have (0.6.0 annotations, 0.7.0 intelRdt and
//! additionalGids, 1.0.0 netDevices), so they never raise what we write; `validate` still
//! accepts them as known versions.

use super::spec::Spec;

/// Every released CDI spec version, oldest first.
pub const KNOWN: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "0.9.0", "1.0.0",
    "1.1.0",
];

pub fn is_known(version: &str) -> bool {
    KNOWN.contains(&version)
}

/// The lowest version that can express `spec`.
pub fn minimum(spec: &Spec) -> &'static str {
    let edits = std::iter::once(&spec.container_edits)
        .chain(spec.devices.iter().map(|d| &d.container_edits));
    let mut need = "0.3.0";
    for e in edits {
        if e.mounts.iter().any(|m| m.kind.is_some()) {
            need = need.max("0.4.0");
        }
        if e.device_nodes.iter().any(|n| n.host_path.is_some()) {
            need = need.max("0.5.0");
        }
    }
    if spec
        .devices
        .iter()
        .any(|d| d.name.starts_with(|c: char| c.is_ascii_digit()))
    {
        need = need.max("0.5.0");
    }
    need
}

#[cfg(test)]
mod tests {
    use super::super::spec::{ContainerEdits, Device, DeviceNode, Mount};
    use super::*;

    #[test]
    fn minimum_version_cases() {
        let device = |name: &str, edits: ContainerEdits| Device {
            name: name.into(),
            container_edits: edits,
        };
        let node = |host: Option<&str>| DeviceNode {
            path: "/dev/nvidia0".into(),
            host_path: host.map(String::from),
            kind: None,
            major: None,
            minor: None,
            permissions: None,
            ..Default::default()
        };
        let mount = |kind: Option<&str>| Mount {
            host_path: "/a".into(),
            container_path: "/a".into(),
            options: vec![],
            kind: kind.map(String::from),
        };
        let cases: Vec<(&str, Vec<Device>, &str)> = vec![
            (
                "letter names, no host paths",
                vec![device(
                    "gpu0",
                    ContainerEdits {
                        device_nodes: vec![node(None)],
                        ..Default::default()
                    },
                )],
                "0.3.0",
            ),
            (
                "mount type",
                vec![device(
                    "gpu0",
                    ContainerEdits {
                        mounts: vec![mount(Some("bind"))],
                        ..Default::default()
                    },
                )],
                "0.4.0",
            ),
            (
                "digit name",
                vec![device("0", ContainerEdits::default())],
                "0.5.0",
            ),
            (
                "node hostPath",
                vec![device(
                    "gpu0",
                    ContainerEdits {
                        device_nodes: vec![node(Some("/dev/nvidia0"))],
                        ..Default::default()
                    },
                )],
                "0.5.0",
            ),
        ];
        for (case, devices, want) in cases {
            let spec = Spec {
                cdi_version: String::new(),
                kind: "nvidia.com/gpu".into(),
                devices,
                container_edits: ContainerEdits::default(),
            };
            assert_eq!(minimum(&spec), want, "case {case}");
        }
    }
}
