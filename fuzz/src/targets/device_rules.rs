//! Whether a container's own device list (config.json's `linux.resources.devices`) already
//! allows the plan's device rules (`container::cgroup::spec_allows`): when it does, the
//! prestart hook does not write them to the device cgroup, so a wrong "yes" leaves a
//! container without its GPUs (or trusts a list that the runtime reads otherwise).
//!
//! Input (see [`decode`]): a byte whose value mod 5 is the number of rules, each rule's major
//! and minor, then entries until the input ends (at most 64): a flags byte (bit 0 allow, bits
//! 1–3 the type: unset, `a`, `b`, `c`, `u`, `p`, unset, `c`; bits 4–5 and 6–7: major and
//! minor present), the access byte (0xe0 and above: no `access`; else bits 0–3 `r`, `w`, `m`,
//! `a`, bit 4 reversed), then the numbers present. A number is one byte, an index into a table
//! of the numbers that matter (the GPUs', 0, -1, 2^32 + 195 …), or from 0xf8 on, the raw
//! little-endian value after it (4 bytes for a rule's u32, 8 for an entry's i64).
//!
//! Property: no panic; no rules or no list: `false`; the rules together exactly when each on its
//! own; block and FIFO entries, and char entries whose access is only `m`, never change the
//! verdict, nor does the list given twice; a deny of type `a` or unset (whatever its numbers
//! and access) at the end allows nothing, and so does a char deny of a rule's own numbers
//! without access or with `r` or `w`; an allow of type `a` with `rw` at the end allows all;
//! and a `true` has, for each rule and each of read and write, an allow entry of type `c`, `a`
//! or unset with `access` holding it and the rule's numbers (or none) after the last deny of
//! type `a` or unset.

use nvct_container::cgroup::spec_allows;
use nvct_model::CgroupRule;
use oci_spec::runtime::{LinuxDeviceCgroup, LinuxDeviceType};

/// Rule numbers (u32) by index: the GPU's major and minors, nvidia-uvm's, 0, 1, the top.
const RULE_NUMBERS: [u32; 10] = [195, 0, 255, 254, 1, 10, 200, 508, 226, u32::MAX];
/// Entry numbers (i64): the same, with -1, numbers past u32 that end like 195 and 0, and the
/// type's ends.
const ENTRY_NUMBERS: [i64; 14] = [
    195,
    0,
    255,
    254,
    1,
    10,
    200,
    508,
    226,
    -1,
    u32::MAX as i64,
    (1 << 32) + 195,
    i64::MAX,
    i64::MIN,
];
/// A number byte from here on: the raw value follows.
const RAW: u8 = 0xf8;
/// The types by bits 1–3 of an entry's flags.
const TYPES: [Option<LinuxDeviceType>; 8] = [
    None,
    Some(LinuxDeviceType::A),
    Some(LinuxDeviceType::B),
    Some(LinuxDeviceType::C),
    Some(LinuxDeviceType::U),
    Some(LinuxDeviceType::P),
    None,
    Some(LinuxDeviceType::C),
];
/// An access byte from here on: no `access`.
const NO_ACCESS: u8 = 0xe0;
/// Entries decoded at most.
const MAX_ENTRIES: usize = 64;

/// The decoded input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub rules: Vec<CgroupRule>,
    pub list: Vec<LinuxDeviceCgroup>,
}

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    /// `N` bytes, zeros past the end.
    fn raw<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
    fn rule_number(&mut self) -> u32 {
        match self.byte().unwrap_or(0) {
            b if b >= RAW => u32::from_le_bytes(self.raw()),
            b => RULE_NUMBERS[usize::from(b) % RULE_NUMBERS.len()],
        }
    }
    fn entry_number(&mut self) -> i64 {
        match self.byte().unwrap_or(0) {
            b if b >= RAW => i64::from_le_bytes(self.raw()),
            b => ENTRY_NUMBERS[usize::from(b) % ENTRY_NUMBERS.len()],
        }
    }
}

/// `access` from its byte (see the module doc).
fn access_of(b: u8) -> Option<String> {
    if b >= NO_ACCESS {
        return None;
    }
    let mut s: String = "rwma"
        .chars()
        .enumerate()
        .filter(|(i, _)| b & (1 << i) != 0)
        .map(|(_, c)| c)
        .collect();
    if b & 0x10 != 0 {
        s = s.chars().rev().collect();
    }
    Some(s)
}

/// One entry of the list.
pub fn entry(
    allow: bool,
    typ: Option<LinuxDeviceType>,
    major: Option<i64>,
    minor: Option<i64>,
    access: Option<&str>,
) -> LinuxDeviceCgroup {
    let mut e = LinuxDeviceCgroup::default();
    e.set_allow(allow)
        .set_typ(typ)
        .set_major(major)
        .set_minor(minor)
        .set_access(access.map(str::to_string));
    e
}

/// The rules and the list that `data` encodes (see the module doc); every input is one.
pub fn decode(data: &[u8]) -> Input {
    let mut b = Bytes(data);
    let n = b.byte().unwrap_or(0) % 5;
    let rules = (0..n)
        .map(|_| CgroupRule {
            major: b.rule_number(),
            minor: b.rule_number(),
        })
        .collect();
    let mut list = Vec::new();
    while list.len() < MAX_ENTRIES {
        let Some(flags) = b.byte() else {
            break;
        };
        let access = access_of(b.byte().unwrap_or(0));
        let major = (flags & 0x30 != 0).then(|| b.entry_number());
        let minor = (flags & 0xc0 != 0).then(|| b.entry_number());
        list.push(entry(
            flags & 1 != 0,
            TYPES[usize::from((flags >> 1) & 7)],
            major,
            minor,
            access.as_deref(),
        ));
    }
    Input { rules, list }
}

fn wildcard(e: &LinuxDeviceCgroup) -> bool {
    matches!(e.typ(), None | Some(LinuxDeviceType::A))
}

/// `list` with `more` after it.
fn then(list: &[LinuxDeviceCgroup], more: &[LinuxDeviceCgroup]) -> Vec<LinuxDeviceCgroup> {
    [list, more].concat()
}

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Input { rules, list } = decode(data);
    let allows = spec_allows(&list, &rules);
    if rules.is_empty() {
        assert!(!allows, "no rules, yet allowed: {list:?}");
        return;
    }
    if list.is_empty() {
        assert!(!allows, "no list, yet allowed: {rules:?}");
    }
    let each = rules
        .iter()
        .all(|r| spec_allows(&list, std::slice::from_ref(r)));
    assert_eq!(allows, each, "the rules together and each on its own");

    let same = |what: &str, other: &[LinuxDeviceCgroup]| {
        assert_eq!(
            spec_allows(other, &rules),
            allows,
            "{what} changed the verdict on {rules:?}: {list:?}"
        );
    };
    let not_block: Vec<LinuxDeviceCgroup> = list
        .iter()
        .filter(|e| !matches!(e.typ(), Some(LinuxDeviceType::B | LinuxDeviceType::P)))
        .cloned()
        .collect();
    same("leaving out block and FIFO entries", &not_block);
    same("the list twice", &then(&list, &list));
    let r0 = rules[0];
    let (major, minor) = (Some(i64::from(r0.major)), Some(i64::from(r0.minor)));
    let c = Some(LinuxDeviceType::C);
    same(
        "mknod-only char entries",
        &then(
            &list,
            &[
                entry(true, c, major, minor, Some("m")),
                entry(false, c, major, minor, Some("m")),
                entry(true, c, None, None, Some("m")),
            ],
        ),
    );

    let denied = |what: &str, last: LinuxDeviceCgroup| {
        assert!(
            !spec_allows(&then(&list, &[last]), &rules),
            "allowed after {what}: {rules:?}, {list:?}"
        );
    };
    denied(
        "a deny of type unset",
        entry(false, None, None, None, Some("m")),
    );
    denied(
        "a deny of type a with numbers",
        entry(
            false,
            Some(LinuxDeviceType::A),
            Some(10),
            Some(200),
            Some("rwm"),
        ),
    );
    for access in [None, Some(""), Some("r"), Some("w")] {
        denied(
            "a char deny of the rule",
            entry(false, c, major, minor, access),
        );
        denied(
            "a u deny of the rule",
            entry(false, Some(LinuxDeviceType::U), major, None, access),
        );
    }
    assert!(
        spec_allows(
            &then(
                &list,
                &[entry(
                    true,
                    Some(LinuxDeviceType::A),
                    None,
                    None,
                    Some("rw")
                )]
            ),
            &rules
        ),
        "an allow of all at the end, yet not allowed: {rules:?}, {list:?}"
    );

    if allows {
        let after = list
            .iter()
            .rposition(|e| !e.allow() && wildcard(e))
            .map_or(0, |i| i + 1);
        for r in &rules {
            for a in ['r', 'w'] {
                let witness = list[after..].iter().any(|e| {
                    e.allow()
                        && (wildcard(e) || e.typ() == c)
                        && e.major().is_none_or(|m| m == i64::from(r.major))
                        && e.minor().is_none_or(|m| m == i64::from(r.minor))
                        && e.access().as_deref().is_some_and(|s| s.contains(a))
                });
                assert!(
                    witness,
                    "{r:?} allowed {a} without an allow entry after the last deny-all: {list:?}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The input that decodes to `input` (the inverse of [`decode`]).
    fn encode(input: &Input) -> Vec<u8> {
        let mut out = vec![input.rules.len() as u8];
        let rule_number =
            |out: &mut Vec<u8>, n: u32| match RULE_NUMBERS.iter().position(|&x| x == n) {
                Some(i) => out.push(i as u8),
                None => {
                    out.push(RAW);
                    out.extend(n.to_le_bytes());
                }
            };
        let entry_number =
            |out: &mut Vec<u8>, n: i64| match ENTRY_NUMBERS.iter().position(|&x| x == n) {
                Some(i) => out.push(i as u8),
                None => {
                    out.push(RAW);
                    out.extend(n.to_le_bytes());
                }
            };
        for r in &input.rules {
            rule_number(&mut out, r.major);
            rule_number(&mut out, r.minor);
        }
        for e in &input.list {
            let typ = TYPES.iter().position(|t| *t == e.typ()).unwrap() as u8;
            let flags = u8::from(e.allow())
                | typ << 1
                | if e.major().is_some() { 0x10 } else { 0 }
                | if e.minor().is_some() { 0x40 } else { 0 };
            out.push(flags);
            out.push(match e.access() {
                None => NO_ACCESS,
                Some(s) => {
                    let bits = s
                        .chars()
                        .map(|c| 1u8 << "rwma".find(c).unwrap())
                        .fold(0, |a, b| a | b);
                    let reversed = access_of(bits).as_deref() != Some(s.as_str());
                    bits | if reversed { 0x10 } else { 0 }
                }
            });
            e.major()
                .into_iter()
                .for_each(|n| entry_number(&mut out, n));
            e.minor()
                .into_iter()
                .for_each(|n| entry_number(&mut out, n));
        }
        out
    }

    const GPU0: CgroupRule = CgroupRule {
        major: 195,
        minor: 0,
    };
    const CTL: CgroupRule = CgroupRule {
        major: 195,
        minor: 255,
    };
    const UVM: CgroupRule = CgroupRule {
        major: 508,
        minor: 0,
    };

    /// Device lists as the engines write them (the shim's legacy list, docker's default,
    /// privileged) and the edges of `spec_allows`, with the verdict each gives.
    fn seeds() -> Vec<(&'static str, Input, bool)> {
        let c = Some(LinuxDeviceType::C);
        let deny_all = entry(false, None, None, None, Some("rwm"));
        let gpu0 = entry(true, c, Some(195), Some(0), Some("rw"));
        let ctl = entry(true, c, Some(195), Some(255), Some("rw"));
        let input = |rules: &[CgroupRule], list: Vec<LinuxDeviceCgroup>| Input {
            rules: rules.to_vec(),
            list,
        };
        vec![
            (
                "legacy-shim",
                input(
                    &[GPU0, CTL],
                    vec![deny_all.clone(), gpu0.clone(), ctl.clone()],
                ),
                true,
            ),
            (
                "docker-default",
                input(
                    &[GPU0],
                    vec![
                        deny_all.clone(),
                        entry(true, c, None, None, Some("m")),
                        entry(true, Some(LinuxDeviceType::B), None, None, Some("m")),
                        entry(true, c, Some(1), Some(3), Some("rwm")),
                        entry(true, c, Some(136), None, Some("rwm")),
                        entry(true, c, Some(5), Some(2), Some("rwm")),
                        entry(false, c, Some(10), Some(200), Some("rwm")),
                    ],
                ),
                false,
            ),
            (
                "privileged",
                input(
                    &[GPU0, CTL, UVM],
                    vec![entry(
                        true,
                        Some(LinuxDeviceType::A),
                        None,
                        None,
                        Some("rwm"),
                    )],
                ),
                true,
            ),
            (
                "major-wildcard-then-deny-write",
                input(
                    &[GPU0, CTL],
                    vec![
                        deny_all.clone(),
                        entry(true, c, Some(195), None, Some("mwr")),
                        entry(
                            false,
                            Some(LinuxDeviceType::U),
                            Some(195),
                            Some(255),
                            Some("w"),
                        ),
                    ],
                ),
                false,
            ),
            (
                "numbers-past-u32",
                input(
                    &[
                        GPU0,
                        CgroupRule {
                            major: 0xdead_beef,
                            minor: 7,
                        },
                    ],
                    vec![
                        deny_all.clone(),
                        entry(true, c, Some((1 << 32) + 195), Some(0), Some("rw")),
                        entry(true, None, Some(0xdead_beef), Some(7), Some("rw")),
                        entry(true, c, Some(195), Some(-1), Some("rw")),
                    ],
                ),
                false,
            ),
            (
                "no-type-no-access",
                input(
                    &[GPU0],
                    vec![deny_all, gpu0, entry(false, c, Some(195), Some(0), None)],
                ),
                false,
            ),
        ]
    }

    #[test]
    fn seeds_are_device_lists() {
        let seeds = seeds();
        let files: Vec<(&str, Vec<u8>)> = seeds.iter().map(|(n, i, _)| (*n, encode(i))).collect();
        crate::common::check_seeds("device_rules", &files);
        for ((name, input, verdict), (_, bytes)) in seeds.iter().zip(&files) {
            assert_eq!(&decode(bytes), input, "{name}");
            assert_eq!(spec_allows(&input.list, &input.rules), *verdict, "{name}");
            run(bytes);
        }
    }
}
