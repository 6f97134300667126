//! PURE: whether the container's own device list (config.json's `linux.resources.devices`)
//! already allows the plan's device rules.
//!
//! The runtime applies that list when it creates the container's cgroup, before it runs the
//! prestart hooks: the OCI runtime spec's lifecycle (runtime.md: step 2, "the resources
//! requested in the config.json MUST be created", then step 3, the prestart hooks); runc
//! (`libcontainer/process_linux.go`, `procHooks`: `manager.Set` first) and crun
//! (`libcrun_cgroup_enter` → `update_cgroup_resources`, then the prestart hooks) do so. So
//! when the list allows every rule, the prestart hook need not write them again (the shim's
//! legacy mode puts them there; docs/COMPAT.md).
//!
//! Owns: [`spec_allows`]. Must not: read anything. Errs on the side of "not allowed" where
//! the runtimes read an entry differently: runc turns a type `a` (or unset) entry into the
//! whole wildcard whatever its numbers and access (`libcontainer/specconv`, then the cgroups
//! library's device emulator, whose `Apply` drops the rest of a wildcard rule), crun keeps
//! the numbers. So an allow entry counts only for its own numbers with an explicit `access`
//! and a char (or all) type, and a deny entry of type `a` (or unset) denies every device and
//! access; another deny counts for any char-like type, and without `access` denies all.

use nvct_model::CgroupRule;
use oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceType};

/// Whether `list`, applied in order (the last entry that matches a device and an access wins,
/// as in the device cgroup), gives read and write on every `c MAJ:MIN` of `rules`. No rules:
/// `false` (nothing to skip).
pub fn spec_allows(list: &[LinuxDeviceCgroup], rules: &[CgroupRule]) -> bool {
    !rules.is_empty()
        && rules
            .iter()
            .all(|r| ['r', 'w'].into_iter().all(|a| last_word(list, r, a)))
}

/// The verdict of the last entry of `list` that matches device `r` and access `a`; none: denied.
fn last_word(list: &[LinuxDeviceCgroup], r: &CgroupRule, a: char) -> bool {
    list.iter()
        .rev()
        .find_map(|e| {
            let numbers = e.major().is_none_or(|m| m == i64::from(r.major))
                && e.minor().is_none_or(|m| m == i64::from(r.minor));
            let wildcard = matches!(e.typ(), None | Some(LinuxDeviceType::A));
            let matches = match e.allow() {
                true => {
                    numbers
                        && (wildcard || e.typ() == Some(LinuxDeviceType::C))
                        && e.access().as_deref().is_some_and(|s| s.contains(a))
                }
                false if wildcard => true,
                false => {
                    numbers
                        && !matches!(e.typ(), Some(LinuxDeviceType::B | LinuxDeviceType::P))
                        && e.access()
                            .as_deref()
                            .is_none_or(|s| s.is_empty() || s.contains(a))
                }
            };
            matches.then_some(e.allow())
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        allow: bool,
        typ: Option<&str>,
        major: Option<i64>,
        minor: Option<i64>,
        access: Option<&str>,
    ) -> LinuxDeviceCgroup {
        let mut v = serde_json::json!({"allow": allow});
        if let Some(t) = typ {
            v["type"] = t.into();
        }
        if let Some(m) = major {
            v["major"] = m.into();
        }
        if let Some(m) = minor {
            v["minor"] = m.into();
        }
        if let Some(a) = access {
            v["access"] = a.into();
        }
        serde_json::from_value(v).unwrap()
    }

    const GPU0: CgroupRule = CgroupRule {
        major: 195,
        minor: 0,
    };
    const CTL: CgroupRule = CgroupRule {
        major: 195,
        minor: 255,
    };

    #[test]
    fn the_last_matching_entry_decides_conservatively() {
        let deny_all = entry(false, None, None, None, Some("rwm"));
        let gpu0_rw = entry(true, Some("c"), Some(195), Some(0), Some("rw"));
        let ctl_rw = entry(true, Some("c"), Some(195), Some(255), Some("rw"));
        let cases: &[(&str, Vec<LinuxDeviceCgroup>, &[CgroupRule], bool)] = &[
            (
                "the shim's legacy list",
                vec![deny_all.clone(), gpu0_rw.clone(), ctl_rw.clone()],
                &[GPU0, CTL],
                true,
            ),
            (
                "one rule missing",
                vec![deny_all.clone(), gpu0_rw.clone()],
                &[GPU0, CTL],
                false,
            ),
            ("no list", vec![], &[GPU0], false),
            (
                "no rules to allow",
                vec![deny_all.clone(), gpu0_rw.clone()],
                &[],
                false,
            ),
            (
                "read only",
                vec![
                    deny_all.clone(),
                    entry(true, Some("c"), Some(195), Some(0), Some("r")),
                ],
                &[GPU0],
                false,
            ),
            (
                "rwm",
                vec![
                    deny_all.clone(),
                    entry(true, Some("c"), Some(195), Some(0), Some("rwm")),
                ],
                &[GPU0],
                true,
            ),
            (
                "a later deny of write",
                vec![
                    deny_all.clone(),
                    gpu0_rw.clone(),
                    entry(false, Some("c"), Some(195), None, Some("w")),
                ],
                &[GPU0],
                false,
            ),
            (
                "a later deny-all",
                vec![gpu0_rw.clone(), deny_all.clone()],
                &[GPU0],
                false,
            ),
            (
                "a deny without access denies all",
                vec![
                    gpu0_rw.clone(),
                    entry(false, Some("c"), Some(195), Some(0), None),
                ],
                &[GPU0],
                false,
            ),
            (
                "a deny of type u counts",
                vec![
                    gpu0_rw.clone(),
                    entry(false, Some("u"), Some(195), Some(0), Some("rw")),
                ],
                &[GPU0],
                false,
            ),
            (
                "a deny of a block device does not",
                vec![
                    gpu0_rw.clone(),
                    entry(false, Some("b"), Some(195), Some(0), Some("rw")),
                ],
                &[GPU0],
                true,
            ),
            (
                "an earlier deny is overridden",
                vec![deny_all.clone(), gpu0_rw.clone()],
                &[GPU0],
                true,
            ),
            (
                "privileged: all devices",
                vec![entry(true, Some("a"), None, None, Some("rwm"))],
                &[GPU0, CTL],
                true,
            ),
            (
                "a major wildcard",
                vec![
                    deny_all.clone(),
                    entry(true, Some("c"), Some(195), None, Some("rw")),
                ],
                &[GPU0, CTL],
                true,
            ),
            (
                "another major",
                vec![
                    deny_all.clone(),
                    entry(true, Some("c"), Some(196), Some(0), Some("rw")),
                ],
                &[GPU0],
                false,
            ),
            (
                "another minor",
                vec![
                    deny_all.clone(),
                    entry(true, Some("c"), Some(195), Some(1), Some("rw")),
                ],
                &[GPU0],
                false,
            ),
            (
                "a block allow",
                vec![
                    deny_all.clone(),
                    entry(true, Some("b"), Some(195), Some(0), Some("rw")),
                ],
                &[GPU0],
                false,
            ),
            (
                "an allow without access",
                vec![
                    deny_all.clone(),
                    entry(true, Some("c"), Some(195), Some(0), None),
                ],
                &[GPU0],
                false,
            ),
            (
                "a later deny of type a with numbers (runc: the whole wildcard)",
                vec![
                    deny_all.clone(),
                    gpu0_rw.clone(),
                    entry(false, Some("a"), Some(10), Some(200), Some("rwm")),
                ],
                &[GPU0],
                false,
            ),
            (
                "a later deny without a type, mknod only (runc: deny all)",
                vec![
                    deny_all.clone(),
                    gpu0_rw.clone(),
                    entry(false, None, None, None, Some("m")),
                ],
                &[GPU0],
                false,
            ),
            (
                "a later deny of another char device",
                vec![
                    deny_all.clone(),
                    gpu0_rw.clone(),
                    entry(false, Some("c"), Some(10), Some(200), Some("rwm")),
                ],
                &[GPU0],
                true,
            ),
            (
                "an allow without a type (all)",
                vec![
                    deny_all.clone(),
                    entry(true, None, Some(195), Some(0), Some("rw")),
                ],
                &[GPU0],
                true,
            ),
        ];
        for (name, list, rules, want) in cases {
            assert_eq!(spec_allows(list, rules), *want, "{name}");
        }
    }
}
