//! The Kubernetes node (`kubectl get node NAME -o json`, given with `--node-labels`): the
//! checks `node labels` (GPU feature discovery's labels match the hardware) and
//! `node allocatable` (the device plugin advertises GPUs), and [`Node`], [`parse_node`].

use super::{check, ok, Check, Status};
use nvct_host::labels;
use nvct_model::Inventory;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(super) fn labels_check(inv: &Inventory, node: Option<&(PathBuf, Node)>) -> Check {
    let name = "node labels";
    let want = labels::labels(inv);
    let shown = [
        "nvidia.com/gpu.product",
        "nvidia.com/gpu.memory",
        "nvidia.com/gpu.count",
    ];
    let summary: Vec<String> = shown
        .iter()
        .filter_map(|k| want.get(*k).map(|v| format!("{k}={v}")))
        .collect();
    let Some((file, node)) = node else {
        return ok(
            name,
            format!(
                "from the hardware: {} (give --node-labels to compare with the node's)",
                summary.join(" ")
            ),
        );
    };
    let mut wrong = Vec::new();
    let mut fixes = Vec::new();
    for k in shown {
        let Some(w) = want.get(k) else { continue };
        match node.labels.get(k) {
            Some(h) if h == w => {}
            Some(h) => {
                wrong.push(format!("{k}: the node says {h}, the hardware {w}"));
                fixes.push(format!("{k}={w}"));
            }
            None => {
                wrong.push(format!("{k}: missing, the hardware says {w}"));
                fixes.push(format!("{k}={w}"));
            }
        }
    }
    if wrong.is_empty() {
        return ok(
            name,
            format!(
                "{} ({}) match the hardware: {}",
                node.name,
                file.display(),
                summary.join(" ")
            ),
        );
    }
    check(
        name,
        Status::Fail,
        format!("{} ({}): {}", node.name, file.display(), wrong.join("; ")),
        format!(
            "relabel from the hardware: `kubectl label node {} --overwrite {}` (or restart GPU feature discovery); pods selecting the old values stay Pending",
            node.name,
            fixes.join(" ")
        ),
    )
}

/// What the device plugin advertises for the node (`status.allocatable`): no `nvidia.com/gpu`
/// (missing or 0) is the first thing an operator sees of a GPU node that does not work (pods
/// requesting a GPU stay Pending). Run only when this node's driver, NVML, low-level runtime and
/// engines pass, so the causes left are the plugin's.
pub(super) fn allocatable_check(file: &Path, node: &Node, nvidia_default: bool) -> Check {
    let name = "node allocatable";
    let n = &node.name;
    let count = |m: &BTreeMap<String, String>| {
        m.get(GPU_RESOURCE)
            .map(|v| v.trim().parse::<u64>().unwrap_or(0))
    };
    let Some(all) = &node.allocatable else {
        return ok(
            name,
            format!(
                "{n} ({}): no status.allocatable, not checked (give `kubectl get node {n} -o json` output)",
                file.display()
            ),
        );
    };
    let (allocatable, capacity) = (count(all), count(&node.capacity));
    if let Some(a) = allocatable.filter(|a| *a > 0) {
        return ok(
            name,
            format!("{n} ({}): allocatable {GPU_RESOURCE}={a}", file.display()),
        );
    }
    let said = match allocatable {
        Some(_) => format!("allocatable {GPU_RESOURCE}: 0"),
        None => format!("no {GPU_RESOURCE} in allocatable"),
    };
    // The mixed MIG strategy advertises each MIG profile instead of whole GPUs.
    let migs: Vec<String> = all
        .iter()
        .filter(|(k, v)| k.starts_with("nvidia.com/mig-") && v.trim() != "0")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !migs.is_empty() {
        return check(
            name,
            Status::Warn,
            format!(
                "{n} ({}): {said}, but {} (the device plugin's MIG strategy \"mixed\"): pods requesting {GPU_RESOURCE} stay Pending",
                file.display(),
                migs.join(" ")
            ),
            "request the MIG resources in the pods, or set the device plugin's MIG strategy to \"single\"",
        );
    }
    let mut causes = Vec::new();
    if capacity.is_some_and(|c| c > 0) {
        causes.push(format!(
            "capacity has {} GPUs: the device plugin marked them unhealthy (XID errors: `dmesg | grep -i xid`, `kubectl describe node {n}`)",
            capacity.unwrap_or(0)
        ));
    }
    causes.push(format!(
        "the device plugin is not running on {n}: its DaemonSet does not select the node (the GPU Operator's needs nvidia.com/gpu.deploy.device-plugin=true), or its pod fails (`kubectl get pods -A -o wide --field-selector spec.nodeName={n}`, then `kubectl logs` of the nvidia-device-plugin pod)"
    ));
    causes.push(if nvidia_default {
        "its pod runs without the GPUs: check its logs for \"No devices found\" or NVML errors".to_string()
    } else {
        format!(
            "its pod does not run with the nvidia runtime (no engine here has it as the default): give the pod runtimeClassName: nvidia, or `nvidia-ctk runtime configure --runtime=containerd --set-as-default` on {n}"
        )
    });
    check(
        name,
        Status::Fail,
        format!(
            "{n} ({}): {said}: the device plugin advertises no GPU, so GPU pods stay Pending; this node's driver, NVML, runtime and engine checks pass",
            file.display()
        ),
        format!("likely causes: {}", causes.join("; ")),
    )
}

/// The resource the device plugin advertises for whole GPUs.
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// What doctor reads of a Kubernetes node (`kubectl get node NAME -o json`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// `metadata.name` (`NODE` when the JSON has none), named in the fixes.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `status.allocatable` (`None` without one: not a node's whole JSON) and `status.capacity`
    /// (resource quantities as text).
    pub allocatable: Option<BTreeMap<String, String>>,
    pub capacity: BTreeMap<String, String>,
}

/// A node from `kubectl get node NAME -o json` output.
pub fn parse_node(text: &str) -> Result<Node, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if let Some(items) = v.get("items").and_then(|i| i.as_array()) {
        return Err(format!(
            "a list of {} nodes: give one node's JSON (`kubectl get node NAME -o json`)",
            items.len()
        ));
    }
    let strings = |ptr: &str| -> Option<BTreeMap<String, String>> {
        Some(
            v.pointer(ptr)?
                .as_object()?
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect(),
        )
    };
    let labels = strings("/metadata/labels")
        .ok_or("no metadata.labels object (expected `kubectl get node NAME -o json` output)")?;
    Ok(Node {
        name: v
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("NODE")
            .to_string(),
        labels,
        allocatable: strings("/status/allocatable"),
        capacity: strings("/status/capacity").unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_cases() {
        let good = r#"{"kind":"Node","metadata":{"name":"gpu-7","labels":{"nvidia.com/gpu.memory":"40960"}},
            "status":{"allocatable":{"nvidia.com/gpu":"0","cpu":"8"},"capacity":{"nvidia.com/gpu":"2"}}}"#;
        let n = parse_node(good).unwrap();
        assert_eq!(n.name, "gpu-7");
        assert_eq!(
            n.labels.get("nvidia.com/gpu.memory").map(String::as_str),
            Some("40960")
        );
        let all = n.allocatable.unwrap();
        assert_eq!(all.get("nvidia.com/gpu").map(String::as_str), Some("0"));
        assert_eq!(
            n.capacity.get("nvidia.com/gpu").map(String::as_str),
            Some("2")
        );
        let bare = parse_node(r#"{"metadata":{"labels":{}}}"#).unwrap();
        assert_eq!((bare.name.as_str(), bare.allocatable), ("NODE", None));
        // (case, text, words in the error)
        let cases = [
            ("not json", "{", "not JSON"),
            ("no labels", r#"{"metadata":{}}"#, "no metadata.labels"),
            (
                "a node list",
                r#"{"kind":"List","items":[{},{}]}"#,
                "a list of 2 nodes",
            ),
        ];
        for (name, text, words) in cases {
            let e = parse_node(text).unwrap_err();
            assert!(e.contains(words), "{name}: {e}");
        }
    }

    #[test]
    fn allocatable_cases() {
        let node = |allocatable: Option<&[(&str, &str)]>, capacity: &[(&str, &str)]| Node {
            name: "gpu-7".into(),
            labels: BTreeMap::new(),
            allocatable: allocatable.map(|a| {
                a.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            capacity: capacity
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let gpu = "nvidia.com/gpu";
        // (case, node, nvidia is a default runtime, status, words in the detail, in the fix)
        let cases = [
            (
                "two GPUs",
                node(Some(&[(gpu, "2")]), &[]),
                false,
                Status::Ok,
                "allocatable nvidia.com/gpu=2",
                "",
            ),
            (
                "zero",
                node(Some(&[(gpu, "0")]), &[]),
                true,
                Status::Fail,
                "allocatable nvidia.com/gpu: 0",
                "the device plugin is not running on gpu-7",
            ),
            (
                "missing",
                node(Some(&[("cpu", "8")]), &[]),
                true,
                Status::Fail,
                "no nvidia.com/gpu in allocatable",
                "spec.nodeName=gpu-7",
            ),
            (
                "not the default runtime",
                node(Some(&[(gpu, "0")]), &[]),
                false,
                Status::Fail,
                "advertises no GPU",
                "runtimeClassName: nvidia",
            ),
            (
                "unhealthy",
                node(Some(&[(gpu, "0")]), &[(gpu, "2")]),
                true,
                Status::Fail,
                "advertises no GPU",
                "capacity has 2 GPUs: the device plugin marked them unhealthy",
            ),
            (
                "mixed MIG",
                node(Some(&[(gpu, "0"), ("nvidia.com/mig-1g.10gb", "7")]), &[]),
                true,
                Status::Warn,
                "nvidia.com/mig-1g.10gb=7",
                "MIG strategy",
            ),
            (
                "no status",
                node(None, &[]),
                false,
                Status::Ok,
                "no status.allocatable, not checked",
                "",
            ),
        ];
        for (name, n, default, status, detail, fix) in cases {
            let c = allocatable_check(Path::new("node.json"), &n, default);
            assert_eq!(c.status, status, "{name}: {c:?}");
            assert!(
                c.detail.contains(detail) && c.detail.contains("gpu-7"),
                "{name}: {c:?}"
            );
            assert!(c.fix.contains(fix), "{name}: {c:?}");
            assert_eq!(c.fix.is_empty(), status == Status::Ok, "{name}: {c:?}");
        }
    }

    #[test]
    fn labels_mismatch_is_a_failure_with_the_relabel_command() {
        let inv = nvct_plan::fixtures::inventory_in("/usr/lib/x86_64-linux-gnu");
        let mut labels = labels::labels(&inv);
        labels.insert("nvidia.com/gpu.memory".into(), "40960".into());
        let node = Node {
            name: "gpu-7".into(),
            labels,
            ..Node::default()
        };
        let c = labels_check(&inv, Some(&(PathBuf::from("node.json"), node)));
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.detail.contains("the node says 40960, the hardware 81559"),
            "{c:?}"
        );
        assert!(
            c.fix
                .contains("kubectl label node gpu-7 --overwrite nvidia.com/gpu.memory=81559"),
            "{c:?}"
        );
    }
}
