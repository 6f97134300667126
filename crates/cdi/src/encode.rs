//! A spec's bytes: [`Spec::encode`], as JSON or as YAML. YAML is `serde_norway`'s text with the
//! YAML 1.1 base-60 look-alikes (MIG names such as `1:0`) single-quoted, and [`write`] writes
//! that same text, byte for byte, straight from the struct instead of through libyaml's event
//! emitter, which was a third of `nvidia-ctk cdi generate` for a 64-GPU node
//! (docs/PERFORMANCE.md).
//!
//! The layout is libyaml's block style as `serde_norway` drives it: two-space mappings,
//! sequences at their key's indentation (`key:` then `- item`), a mapping in a sequence started
//! on the `- ` line, `[]` and `{}` for empty collections, no line width. Scalars never guess: a
//! string of `[A-Za-z0-9/_.=+:-]` that the fast reader (`block_yaml.rs`) takes as a plain string
//! is written plain (paths, flags, `NAME=value`, UUIDs: no indicator, number, boolean or null
//! looks like that); every other one-line string is styled by `serde_norway` itself, one scalar
//! at a time (memoised: a spec repeats few of them), so quoting is its own. A string with a line
//! break, a control or a non-ASCII character makes [`write`] return `None`, and
//! [`Spec::encode`] uses `serde_norway` for the whole document. Unit tests and the fuzz target
//! `cdi_spec` check that whatever [`write`] returns is that slow path's text.

use super::spec::{ContainerEdits, Device, DeviceNode, Format, Hook, Mount, Spec};
use std::collections::HashMap;
use std::fmt::Write as _;

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("cannot encode the CDI spec as YAML: {0}")]
    Yaml(#[from] serde_norway::Error),
    #[error("cannot encode the CDI spec as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Spec {
    /// The spec's bytes: YAML (with a leading `---`: `serde_norway`'s text with base-60
    /// look-alikes quoted, through the fast [`write`] where it can) or indented JSON, ending in
    /// a newline.
    pub fn encode(&self, format: Format) -> Result<String, EncodeError> {
        Ok(match format {
            Format::Yaml => match write(self) {
                Some(text) => text,
                None => format!(
                    "---\n{}",
                    quote_sexagesimal(&serde_norway::to_string(self)?)
                ),
            },
            Format::Json => serde_json::to_string_pretty(self)? + "\n",
        })
    }
}

/// `1:0` is a plain string to a YAML 1.2 parser but a base-60 integer (60) to a YAML 1.1 one
/// (PyYAML, older Go libraries), and MIG device names look exactly like that. Such plain
/// scalars (a line's value after `key: ` or `- `) are single-quoted so that every parser reads
/// a string.
pub fn quote_sexagesimal(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    for line in yaml.lines() {
        let split = line.find(": ").map(|i| i + 2).or_else(|| {
            let trimmed = line.trim_start();
            trimmed
                .starts_with("- ")
                .then(|| line.len() - trimmed.len() + 2)
        });
        match split {
            Some(at) if is_sexagesimal(&line[at..]) => {
                out.push_str(&line[..at]);
                out.push('\'');
                out.push_str(&line[at..]);
                out.push('\'');
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// YAML 1.1 base-60 numbers: `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?`.
fn is_sexagesimal(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (s, frac) = match s.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let mut parts = s.split(':');
    let head = parts.next().unwrap_or("");
    let head_ok = head.starts_with(|c: char| c.is_ascii_digit())
        && head.chars().all(|c| c.is_ascii_digit() || c == '_');
    let rest: Vec<&str> = parts.collect();
    let rest_ok = !rest.is_empty()
        && rest.iter().all(|p| {
            (1..=2).contains(&p.len())
                && p.chars().all(|c| c.is_ascii_digit())
                && (p.len() == 1 || p.as_bytes()[0] <= b'5')
        });
    head_ok && rest_ok && frac.is_none_or(|f| f.chars().all(|c| c.is_ascii_digit() || c == '_'))
}

/// `---\n` and `quote_sexagesimal(serde_norway::to_string(spec))`, or `None` where a scalar is
/// outside the one-line ASCII subset.
pub fn write(spec: &Spec) -> Option<String> {
    let mut w = Writer {
        out: String::with_capacity(256 + spec.devices.len() * 1024),
        styled: HashMap::new(),
    };
    w.out.push_str("---\n");
    w.str_field(0, "cdiVersion", &spec.cdi_version)?;
    w.str_field(0, "kind", &spec.kind)?;
    w.seq_field(0, "devices", &spec.devices, Writer::device)?;
    if !spec.container_edits.is_empty() {
        w.key(0, "containerEdits");
        w.out.push('\n');
        w.edits(2, &spec.container_edits)?;
    }
    Some(w.out)
}

struct Writer<'a> {
    out: String,
    /// Each string's text as `serde_norway` styles it (base-60 look-alikes quoted), for those
    /// not written plain.
    styled: HashMap<&'a str, String>,
}

/// Where a mapping key goes: `indent` spaces on a fresh line, or, with [`ON_DASH_LINE`] set,
/// right after the `- ` that `seq_field` wrote (the first key of a mapping in a sequence).
type Indent = usize;

impl<'a> Writer<'a> {
    /// `key:` where `indent` says.
    fn key(&mut self, indent: Indent, key: &str) {
        if indent & ON_DASH_LINE == 0 {
            self.pad(indent);
        }
        self.out.push_str(key);
        self.out.push(':');
    }

    fn pad(&mut self, n: usize) {
        const SPACES: &str = "                                ";
        match SPACES.get(..n) {
            Some(spaces) => self.out.push_str(spaces),
            None => self.out.extend(std::iter::repeat_n(' ', n)),
        }
    }

    fn scalar(&mut self, s: &'a str) -> Option<()> {
        if is_plain(s) {
            self.out.push_str(s);
            return Some(());
        }
        if let Some(t) = self.styled.get(s) {
            self.out.push_str(t);
            return Some(());
        }
        if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return None;
        }
        let text = serde_norway::to_string(s).ok()?;
        let text = text.strip_suffix('\n')?;
        if text.contains('\n') {
            return None;
        }
        let text = if is_sexagesimal(text) {
            format!("'{text}'")
        } else {
            text.to_string()
        };
        self.out.push_str(&text);
        self.styled.insert(s, text);
        Some(())
    }

    fn str_field(&mut self, indent: Indent, key: &str, value: &'a str) -> Option<()> {
        self.key(indent, key);
        self.out.push(' ');
        self.scalar(value)?;
        self.out.push('\n');
        Some(())
    }

    fn opt_str_field(
        &mut self,
        indent: Indent,
        key: &str,
        value: &'a Option<String>,
    ) -> Option<()> {
        match value {
            Some(v) => self.str_field(indent, key, v),
            None => Some(()),
        }
    }

    fn int_field(&mut self, indent: Indent, key: &str, value: Option<impl std::fmt::Display>) {
        if let Some(v) = value {
            self.key(indent, key);
            let _ = writeln!(self.out, " {v}");
        }
    }

    /// `key:` and the items at the key's own indentation; `key: []` when there are none.
    fn seq_field<T>(
        &mut self,
        indent: Indent,
        key: &str,
        items: &'a [T],
        item: fn(&mut Self, Indent, &'a T) -> Option<()>,
    ) -> Option<()> {
        self.key(indent, key);
        if items.is_empty() {
            self.out.push_str(" []\n");
            return Some(());
        }
        self.out.push('\n');
        let at = indent & !ON_DASH_LINE;
        for t in items {
            self.pad(at);
            self.out.push_str("- ");
            item(self, (at + 2) | ON_DASH_LINE, t)?;
        }
        Some(())
    }

    /// A sequence field that `serde_norway` skips when empty.
    fn strings_field(&mut self, indent: Indent, key: &str, items: &'a [String]) -> Option<()> {
        if items.is_empty() {
            return Some(());
        }
        self.seq_field(indent, key, items, |w, _, s| {
            w.scalar(s)?;
            w.out.push('\n');
            Some(())
        })
    }

    fn device(&mut self, indent: Indent, d: &'a Device) -> Option<()> {
        self.str_field(indent, "name", &d.name)?;
        let indent = indent & !ON_DASH_LINE;
        self.key(indent, "containerEdits");
        if d.container_edits.is_empty() {
            self.out.push_str(" {}\n");
            return Some(());
        }
        self.out.push('\n');
        self.edits(indent + 2, &d.container_edits)
    }

    /// A non-empty `ContainerEdits` mapping, its keys at `indent` (never on a `- ` line).
    fn edits(&mut self, indent: Indent, e: &'a ContainerEdits) -> Option<()> {
        self.strings_field(indent, "env", &e.env)?;
        if !e.device_nodes.is_empty() {
            self.seq_field(indent, "deviceNodes", &e.device_nodes, Writer::node)?;
        }
        if !e.mounts.is_empty() {
            self.seq_field(indent, "mounts", &e.mounts, Writer::mount)?;
        }
        if !e.hooks.is_empty() {
            self.seq_field(indent, "hooks", &e.hooks, Writer::hook)?;
        }
        Some(())
    }

    fn node(&mut self, indent: Indent, n: &'a DeviceNode) -> Option<()> {
        self.str_field(indent, "path", &n.path)?;
        let i = indent & !ON_DASH_LINE;
        self.opt_str_field(i, "hostPath", &n.host_path)?;
        self.opt_str_field(i, "type", &n.kind)?;
        self.int_field(i, "major", n.major);
        self.int_field(i, "minor", n.minor);
        self.opt_str_field(i, "permissions", &n.permissions)?;
        self.int_field(i, "fileMode", n.file_mode);
        self.int_field(i, "uid", n.uid);
        self.int_field(i, "gid", n.gid);
        Some(())
    }

    fn mount(&mut self, indent: Indent, m: &'a Mount) -> Option<()> {
        self.str_field(indent, "hostPath", &m.host_path)?;
        let i = indent & !ON_DASH_LINE;
        self.str_field(i, "containerPath", &m.container_path)?;
        self.strings_field(i, "options", &m.options)?;
        self.opt_str_field(i, "type", &m.kind)
    }

    fn hook(&mut self, indent: Indent, h: &'a Hook) -> Option<()> {
        self.str_field(indent, "hookName", &h.hook_name)?;
        let i = indent & !ON_DASH_LINE;
        self.str_field(i, "path", &h.path)?;
        self.strings_field(i, "args", &h.args)?;
        self.strings_field(i, "env", &h.env)
    }
}

/// Set on an indent when the key goes right after the `- ` already written.
const ON_DASH_LINE: usize = 1 << (usize::BITS - 1);

/// A string `serde_norway` writes plain: one the fast reader takes as a plain string (it
/// starts with a letter, `/`, `--`, `-<letter>`, `..` or `./` and is no null or boolean word,
/// so it is no number and starts with no indicator; no trailing `:`), of characters that
/// libyaml's block style never quotes (no space, so no `: ` or ` #` either).
fn is_plain(s: &str) -> bool {
    s.bytes().all(|b| {
        b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'.' | b'=' | b'+' | b':' | b'-')
    }) && !s.ends_with(':')
        && super::block_yaml::has_string_lead(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, edits: ContainerEdits) -> Device {
        Device {
            name: name.into(),
            container_edits: edits,
        }
    }

    fn spec(devices: Vec<Device>, edits: ContainerEdits) -> Spec {
        Spec {
            cdi_version: "0.5.0".into(),
            kind: "nvidia.com/gpu".into(),
            devices,
            container_edits: edits,
        }
    }

    fn env(vars: &[&str]) -> ContainerEdits {
        ContainerEdits {
            env: vars.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        }
    }

    fn full_edits() -> ContainerEdits {
        ContainerEdits {
            env: vec!["NVIDIA_VISIBLE_DEVICES=void".into()],
            device_nodes: vec![
                DeviceNode {
                    path: "/dev/nvidia0".into(),
                    host_path: Some("/driver/dev/nvidia0".into()),
                    kind: Some("c".into()),
                    major: Some(195),
                    minor: Some(0),
                    permissions: Some("rwm".into()),
                    file_mode: Some(0o666),
                    uid: Some(0),
                    gid: Some(44),
                },
                DeviceNode {
                    path: "/dev/nvidiactl".into(),
                    ..Default::default()
                },
            ],
            mounts: vec![
                Mount {
                    host_path: "/usr/lib/libcuda.so.550.54.15".into(),
                    container_path: "/usr/lib/libcuda.so.550.54.15".into(),
                    options: vec!["ro".into(), "nosuid".into(), "bind".into()],
                    kind: Some("bind".into()),
                },
                Mount {
                    host_path: "/run/nvidia-persistenced/socket".into(),
                    container_path: "/run/nvidia-persistenced/socket".into(),
                    options: vec![],
                    kind: None,
                },
            ],
            hooks: vec![
                Hook {
                    hook_name: "createContainer".into(),
                    path: "/usr/bin/nvidia-cdi-hook".into(),
                    args: vec![
                        "nvidia-cdi-hook".into(),
                        "create-symlinks".into(),
                        "--link".into(),
                        "../card1::/dev/dri/by-path/pci-0000:18:00.0-card".into(),
                    ],
                    env: vec!["PATH=/usr/bin:/bin".into()],
                },
                Hook {
                    hook_name: "createContainer".into(),
                    path: "/usr/bin/true".into(),
                    args: vec![],
                    env: vec![],
                },
            ],
        }
    }

    /// The slow path of `Spec::encode`.
    fn slow(spec: &Spec) -> String {
        let text = serde_norway::to_string(spec).unwrap();
        format!("---\n{}", quote_sexagesimal(&text))
    }

    /// Every case's text is the slow path's, byte for byte.
    #[test]
    fn writes_what_serde_norway_writes() {
        let cases: Vec<(&str, Spec)> = vec![
            (
                "no devices, no edits",
                spec(vec![], ContainerEdits::default()),
            ),
            (
                "a device without edits",
                spec(
                    vec![dev("all", ContainerEdits::default())],
                    ContainerEdits::default(),
                ),
            ),
            (
                "every field",
                spec(vec![dev("0", full_edits())], full_edits()),
            ),
            (
                "names and values that need quotes",
                spec(
                    [
                        "0", "1:0", "0:1:2", "yes", "true", "True", "null", "~", "1.5", "0x10",
                        "-", "a: b", "#x", " lead", "trail ", "'", "\"", "[a]", "{a}", "*a", "&a",
                        "!a", "|", ">", "%a", "@a", "`a", "?", "a #b", "", ".inf", "1e3", "-1",
                        "+1", "0o7", "a\\b", "x:", "12:30:45", "1_0:5", "-1:0", "1:60", "1:0.5",
                        "7:0:1",
                    ]
                    .into_iter()
                    .map(|n| dev(n, env(&[n])))
                    .collect(),
                    ContainerEdits::default(),
                ),
            ),
            (
                "paths with characters outside the plain set",
                spec(
                    vec![dev(
                        "gpu",
                        env(&["/a b", "/a:b", "/a#b", "/a: b", "/tmp/x,y", "/~", "/a'b"]),
                    )],
                    ContainerEdits::default(),
                ),
            ),
        ];
        for (name, spec) in cases {
            assert_eq!(write(&spec), Some(slow(&spec)), "case {name}");
        }
    }

    #[test]
    fn sexagesimal_names_are_quoted() {
        for (value, quoted) in [
            ("1:0", true),
            ("12:7", true),
            ("1:60", false),
            ("gpu0", false),
            ("0", false),
            ("GPU-1:2", false),
            ("a::b", false),
        ] {
            assert_eq!(is_sexagesimal(value), quoted, "{value}");
        }
        let spec = spec(
            vec![dev("1:0", ContainerEdits::default())],
            ContainerEdits::default(),
        );
        let text = spec.encode(Format::Yaml).unwrap();
        assert!(text.contains("- name: '1:0'\n"), "{text}");
        let back = crate::spec::parse_value(&text).unwrap();
        assert_eq!(serde_json::from_value::<Spec>(back).unwrap(), spec);
    }

    /// Multi-line and non-ASCII strings go to `serde_norway` whole.
    #[test]
    fn declines_what_it_does_not_write() {
        for (name, value) in [
            ("a line break", "a\nb"),
            ("a tab", "a\tb"),
            ("non-ASCII", "gpu-é"),
            ("a control character", "a\u{7f}"),
        ] {
            let s = spec(vec![dev("0", env(&[value]))], ContainerEdits::default());
            assert_eq!(write(&s), None, "case {name}");
        }
    }
}
