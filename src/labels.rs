//! Kubernetes node labels computed from the hardware (PURE): the `nvidia.com/*` labels that GPU
//! feature discovery publishes and that pods select on (`gpu.product`, `gpu.memory`,
//! `gpu.count`, ...). `nvidia-ctk doctor` compares them with a node's labels, so that a label
//! left from the GPUs a node had before is found.

use crate::model::Inventory;
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
    use crate::fixtures;

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
