//! Kubernetes node labels computed from the hardware (PURE): the `nvidia.com/*` labels that GPU
//! feature discovery publishes and that pods select on (`gpu.product`, `gpu.memory`,
//! `gpu.count`, ...). `nvidia-ctk doctor` compares them with a node's labels, so that a label
//! left from the GPUs a node had before is found.

use nvct_model::Inventory;
use std::collections::BTreeMap;

/// The labels of a host, by key.
pub fn labels(inv: &Inventory) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        out.insert(format!("nvidia.com/{k}"), v);
    };
    put("gpu.present", (!inv.gpus.is_empty()).to_string());
    put("gpu.count", inv.gpus.len().to_string());
    if let Some(first) = inv.gpus.first() {
        put("gpu.product", label_value(&first.model));
        if first.memory_mib > 0 {
            put("gpu.memory", first.memory_mib.to_string());
        }
        if let Some(f) = family(&first.model) {
            put("gpu.family", f.to_string());
        }
        let capable = inv.gpus.iter().any(|g| g.mig_enabled) || mig_capable(&first.model);
        put("mig.capable", capable.to_string());
    }
    let mut parts = inv.driver_version.split('.');
    for key in ["cuda.driver.major", "cuda.driver.minor", "cuda.driver.rev"] {
        if let Some(p) = parts.next().filter(|p| !p.is_empty()) {
            put(key, p.to_string());
        }
    }
    if let Some((major, minor)) = inv.cuda_version.as_deref().and_then(|v| v.split_once('.')) {
        put("cuda.runtime.major", major.to_string());
        put("cuda.runtime.minor", minor.to_string());
    }
    out
}

/// The architecture of a product, from its name (`None` when the name says nothing known).
pub fn family(model: &str) -> Option<&'static str> {
    let m = model.to_ascii_uppercase();
    let words: Vec<&str> = m.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    let has = |p: &str| words.iter().any(|w| w.starts_with(p));
    let table: &[(&[&str], &str)] = &[
        (
            &["B100", "B200", "GB200", "B300", "GB300", "RTX50"],
            "blackwell",
        ),
        (&["H100", "H200", "H800", "H20", "GH200"], "hopper"),
        (&["L4", "L40", "L20", "RTX40"], "ada-lovelace"),
        (
            &["A100", "A800", "A30", "A40", "A10", "A16", "A2", "RTX30"],
            "ampere",
        ),
        (&["T4", "RTX20", "QUADRO"], "turing"),
        (&["V100", "TITANV"], "volta"),
        (&["P100", "P40", "P4", "P6"], "pascal"),
    ];
    // `RTX 4090` is two words: join `RTX` with the next one.
    let joined: Vec<String> = words
        .windows(2)
        .map(|w| format!("{}{}", w[0], w[1]))
        .collect();
    let has_joined = |p: &str| joined.iter().any(|w| w.starts_with(p));
    table
        .iter()
        .find(|(names, _)| names.iter().any(|n| has(n) || has_joined(n)))
        .map(|(_, f)| *f)
}

/// Whether a product supports MIG, from its name (A100, A30, H100, H200, H800, GH200, B200).
fn mig_capable(model: &str) -> bool {
    let m = model.to_ascii_uppercase();
    [
        "A100", "A30", "H100", "H200", "H800", "GH200", "B200", "GB200",
    ]
    .iter()
    .any(|p| {
        m.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| w == *p)
    })
}

/// The labels as a Node Feature Discovery local feature file (`key=value` lines, sorted),
/// what `nvidia-ctk system label-node` writes to
/// `/etc/kubernetes/node-feature-discovery/features.d/nvidia`.
pub fn feature_file(labels: &BTreeMap<String, String>) -> String {
    let mut out =
        String::from("# Written by nvidia-ctk system label-node from this node's GPUs.\n");
    for (k, v) in labels {
        out += &format!("{k}={v}\n");
    }
    out
}

/// A product name as a label value: spaces become `-`, characters a label value cannot hold are
/// dropped, at most 63 characters, starting and ending alphanumeric.
pub fn label_value(s: &str) -> String {
    let v: String = s
        .trim()
        .chars()
        .map(|c| if c == ' ' { '-' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(63)
        .collect();
    v.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvct_plan::fixtures;

    #[test]
    fn label_value_cases() {
        let cases = [
            ("spaces", "NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),
            (
                "odd characters",
                "Tesla V100 (PCIe) 16GB",
                "Tesla-V100-PCIe-16GB",
            ),
            ("trimmed", "  NVIDIA H100  ", "NVIDIA-H100"),
            ("empty", "", ""),
        ];
        for (name, input, want) in cases {
            assert_eq!(label_value(input), want, "{name}");
        }
        assert_eq!(label_value(&"x".repeat(100)).len(), 63, "long");
    }

    #[test]
    fn family_cases() {
        let cases = [
            ("NVIDIA H100 80GB HBM3", Some("hopper")),
            ("NVIDIA A100-SXM4-80GB", Some("ampere")),
            ("NVIDIA GeForce RTX 4090", Some("ada-lovelace")),
            ("NVIDIA L4", Some("ada-lovelace")),
            ("Tesla T4", Some("turing")),
            ("Tesla V100-SXM2-16GB", Some("volta")),
            ("NVIDIA B200", Some("blackwell")),
            ("Some Future GPU", None),
        ];
        for (model, want) in cases {
            assert_eq!(family(model), want, "{model}");
        }
        assert!(mig_capable("NVIDIA A100-SXM4-80GB"));
        assert!(!mig_capable("Tesla T4"));
    }

    #[test]
    fn host_labels() {
        let inv = fixtures::inventory_in("/usr/lib/x86_64-linux-gnu");
        let l = labels(&inv);
        let get = |k: &str| l.get(&format!("nvidia.com/{k}")).map(String::as_str);
        assert_eq!(get("gpu.present"), Some("true"));
        assert_eq!(get("gpu.count"), Some(inv.gpus.len().to_string().as_str()));
        assert_eq!(get("gpu.product"), Some("NVIDIA-H100"));
        assert_eq!(get("gpu.memory"), Some("81559"));
        let mut parts = inv.driver_version.split('.');
        assert_eq!(get("cuda.driver.major"), parts.next());
        assert_eq!(get("cuda.driver.minor"), parts.next());
    }
}
