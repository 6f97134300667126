//! A fast reader for the plain block-style YAML that CDI spec writers emit (`nvidia-ctk cdi
//! generate`, upstream's toolkit, Go's yaml encoders): `key: value` mappings, `- item`
//! sequences, plain and quoted one-line scalars, `[]` and `{}`, full-line comments and a
//! leading `---`. [`parse`] turns such a document into the value `serde_norway` gives for it,
//! about six times faster (docs/PERFORMANCE.md: the shim's cdi mode reads every spec file on
//! every start, and the YAML scanner was most of that step).
//!
//! It never guesses: on anything else (anchors, aliases, tags, flow collections, block
//! scalars, multi-line or escaped scalars, tabs, trailing comments, duplicate keys, odd
//! indentation) it returns `None` and [`super::spec::parse_value`] uses `serde_norway`. A plain
//! scalar is taken as a string only when it starts with a letter or `/` and is no YAML null or
//! boolean word in any spelling; every other plain scalar (numbers, versions, `~`) is resolved
//! by `serde_norway` itself, one scalar at a time, so the types are its own. The fuzz target
//! `cdi_spec` checks that whatever this returns is what `serde_norway` returns.

use serde_json::{Map, Value};

/// The document as `serde_norway::from_str::<Value>` would give it, or `None` where the text
/// is outside the subset (the caller then uses the full parser).
pub fn parse(text: &str) -> Option<Value> {
    let mut lines = Vec::new();
    for (n, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        // Tabs, other line breaks and control or non-ASCII characters: the full parser's rules.
        if !line.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return None;
        }
        let content = line.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if n == 0 && line == "---" {
            continue;
        }
        // `---` or `...` at the left margin starts or ends a document.
        if line.starts_with("---") || line.starts_with("...") {
            return None;
        }
        if content.trim_end() != content {
            return None;
        }
        lines.push(Line {
            indent: line.len() - content.len(),
            content,
        });
    }
    if lines.is_empty() || lines[0].indent != 0 {
        return None;
    }
    let mut p = Parser { lines, pos: 0 };
    let v = p.node(0)?;
    (p.pos == p.lines.len()).then_some(v)
}

#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    content: &'a str,
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    /// The block node whose first line is the current one, at `indent`.
    fn node(&mut self, indent: usize) -> Option<Value> {
        let line = *self.lines.get(self.pos)?;
        if line.indent != indent {
            return None;
        }
        if is_item(line.content) {
            self.sequence(indent)
        } else {
            self.mapping(indent)
        }
    }

    fn sequence(&mut self, indent: usize) -> Option<Value> {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.pos).copied() {
            // A sequence at its key's indentation ends at the mapping's next key.
            if line.indent < indent || (line.indent == indent && !is_item(line.content)) {
                break;
            }
            if line.indent > indent {
                return None;
            }
            let rest = line.content.strip_prefix("- ")?;
            let body = rest.trim_start_matches(' ');
            let col = indent + 2 + (rest.len() - body.len());
            if body.is_empty() || is_item(body) || body == "-" {
                return None;
            }
            if entry_split(body).is_some() {
                // `- key: value`: a mapping whose keys line up with `key`.
                self.lines[self.pos] = Line {
                    indent: col,
                    content: body,
                };
                items.push(self.mapping(col)?);
            } else {
                self.pos += 1;
                items.push(scalar(body)?);
            }
        }
        Some(Value::Array(items))
    }

    fn mapping(&mut self, indent: usize) -> Option<Value> {
        let mut map = Map::new();
        while let Some(line) = self.lines.get(self.pos).copied() {
            if line.indent < indent {
                break;
            }
            if line.indent > indent || is_item(line.content) {
                return None;
            }
            let (key, value) = entry_split(line.content)?;
            self.pos += 1;
            let value = if value.is_empty() {
                match self.lines.get(self.pos).copied() {
                    Some(next) if next.indent > indent => self.node(next.indent)?,
                    // A sequence may sit at its key's own indentation.
                    Some(next) if next.indent == indent && is_item(next.content) => {
                        self.sequence(indent)?
                    }
                    _ => Value::Null,
                }
            } else {
                scalar(value)?
            };
            if map.insert(key, value).is_some() {
                return None;
            }
        }
        Some(Value::Object(map))
    }
}

fn is_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// `key: value` or `key:` split into the key and the (possibly empty) value text, or `None`
/// when the line is not a one-line mapping entry of the subset.
fn entry_split(content: &str) -> Option<(String, &str)> {
    let (key, rest) = if let Some(q) = content.chars().next().filter(|c| *c == '\'' || *c == '"') {
        let end = closing_quote(content, q)?;
        (quoted(&content[..=end])?, &content[end + 1..])
    } else {
        let at = match content.find(": ") {
            Some(at) => at,
            None if content.ends_with(':') => content.len() - 1,
            None => return None,
        };
        let key = &content[..at];
        if !is_plain_string(key) {
            return None;
        }
        (key.to_string(), &content[at..])
    };
    let rest = rest.strip_prefix(':')?;
    if rest.is_empty() {
        return Some((key, ""));
    }
    let value = rest.strip_prefix(' ')?.trim_start_matches(' ');
    Some((key, value))
}

/// The index of the quote that closes the one starting `s` (`''` inside single quotes is an
/// escaped quote); `None` if it does not close on this line.
fn closing_quote(s: &str, q: char) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 1;
    while i < b.len() {
        if b[i] == q as u8 {
            if q == '\'' && b.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// A complete quoted scalar (quotes included) as a string: single quotes with `''`, double
/// quotes without any escape (a backslash goes to the full parser).
fn quoted(s: &str) -> Option<String> {
    let inner = &s[1..s.len() - 1];
    if s.starts_with('\'') {
        Some(inner.replace("''", "'"))
    } else if inner.contains('\\') || inner.contains('"') {
        None
    } else {
        Some(inner.to_string())
    }
}

/// One value on the rest of a line.
fn scalar(s: &str) -> Option<Value> {
    match s {
        "[]" => return Some(Value::Array(vec![])),
        "{}" => return Some(Value::Object(Map::new())),
        _ => {}
    }
    if s.starts_with(['\'', '"']) {
        let q = s.chars().next()?;
        let end = closing_quote(s, q)?;
        return (end == s.len() - 1)
            .then(|| quoted(s))
            .flatten()
            .map(Value::String);
    }
    if !is_plain(s) {
        return None;
    }
    if is_plain_string(s) {
        return Some(Value::String(s.to_string()));
    }
    // A decimal without a leading zero (device numbers, modes): serde_norway's u64.
    if s.len() < 20 && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0')) {
        return s.parse::<u64>().ok().map(Value::from);
    }
    // Another number, a version, `~`: the full parser's own type resolution, on this scalar alone
    // as a sequence item (the same block context as here; alone, `---` would start a document).
    match serde_norway::from_str::<Value>(&format!("- {s}")).ok()? {
        Value::Array(mut items) if items.len() == 1 => match items.pop()? {
            v @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_)) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

/// A plain (unquoted) one-line scalar of the subset: no indicator first, no `: ` or ` #`
/// inside, not ending in `:`.
fn is_plain(s: &str) -> bool {
    const INDICATORS: &[char] = &[
        '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@',
        '`',
    ];
    let first_ok = match s.chars().next() {
        None => false,
        // `-1`, `-x`: a sign or a dash is plain when not followed by a space.
        Some('-') => s.len() > 1 && !s[1..].starts_with(' '),
        Some(c) => !INDICATORS.contains(&c),
    };
    first_ok && s.trim() == s && !s.contains(": ") && !s.contains(" #") && !s.ends_with(':')
}

/// A plain scalar every YAML schema reads as a string: it starts with an ASCII letter or `/`
/// and is no null or boolean word (YAML 1.1's `yes`, `on`, ... included, in any case), or it
/// starts with `--`, `-<letter>`, `-/`, `..` or `./` (flags, relative links), which no number
/// syntax allows.
fn is_plain_string(s: &str) -> bool {
    has_string_lead(s) && is_plain(s)
}

/// The start [`is_plain_string`] asks for (also the fast writer's, `encode.rs`).
pub(super) fn has_string_lead(s: &str) -> bool {
    const WORDS: &[&str] = &["null", "true", "false", "yes", "no", "on", "off", "y", "n"];
    let b = s.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_alphabetic() || *c == b'/' => {
            !WORDS.iter().any(|w| s.eq_ignore_ascii_case(w))
        }
        Some(b'-') => b
            .get(1)
            .is_some_and(|c| c.is_ascii_alphabetic() || b"-/".contains(c)),
        Some(b'.') => b.get(1).is_some_and(|c| b"./".contains(c)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Documents the fast reader takes: its value must equal serde_norway's.
    #[test]
    fn same_value_as_the_full_parser() {
        let cases: &[(&str, &str)] = &[
            ("flat", "a: b\nc: /d/e\n"),
            (
                "document start",
                "---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\n",
            ),
            (
                "numbers and versions",
                "major: 195\nminor: 0\nv: 0.5.0\nf: 1.5\nneg: -3\n",
            ),
            (
                "leading zero and the largest u64",
                "a: 007\nb: 18446744073709551615\nc: 1844674407370955161\n",
            ),
            (
                "null and booleans by the full parser",
                "a: ~\nb: true\nc: False\nd:\n",
            ),
            (
                "sequence at the key's indentation",
                "devices:\n- name: '0'\n  edits:\n    env:\n    - A=1\n    - B=2\n- name: x\n",
            ),
            (
                "indented sequence",
                "args:\n  - nvidia-cdi-hook\n  - --link\n  - a::b\n",
            ),
            ("quoted keys and values", "'a b': \"c d\"\n\"e\": 'it''s'\n"),
            ("empty collections", "a: []\nb: {}\n"),
            (
                "comments and blank lines",
                "# head\na: b\n\n  # inside\nc: d\n",
            ),
            ("crlf", "a: b\r\nc:\r\n- d\r\n"),
            (
                "nested sequences of mappings",
                "a:\n- b: 1\n  c:\n  - d: x\n    e: y\n",
            ),
            (
                "colon inside a plain scalar",
                "link: ../card1::/dev/dri/by-path/pci-0000:18:00.0-card\n",
            ),
            (
                "dash-led plain scalars",
                "- -x\n- --flag\n- -1\n- -inf\n- -.5\n- -/a\n",
            ),
            (
                "dot-led plain scalars",
                "- ../a::/b\n- ./c\n- .5\n- .inf\n- .nan\n- ..\n",
            ),
            ("yes and on are the full parser's", "a: yes\nb: On\nc: n\n"),
            (
                "hex and octal by the full parser",
                "a: 0x10\nb: 0o17\nc: 010\n",
            ),
            ("extra spaces after the dash", "-   a: b\n    c: d\n"),
            (
                "upstream's layout (go-yaml: sequences indented by four, quoted names)",
                "---\ncdiVersion: 0.5.0\ndevices:\n    - name: \"0\"\n      containerEdits:\n        deviceNodes:\n            - path: /dev/nvidia0\n              major: 195\n              fileMode: 438\n",
            ),
            (
                "commas and brackets inside plain scalars",
                "a: compute,utility\nb: x[1]{2}\n",
            ),
            (
                "sequence at the key's indentation, then the next key",
                "a:\n- x\nb: y\n",
            ),
            (
                "item mapping with a sequence at its indentation",
                "- a:\n  - x\n  b: y\n",
            ),
            ("empty value then the next key", "a:\nb: 1\n"),
            ("document markers as values", "a: ---\nb: ...\nc: --x\n"),
        ];
        for (name, text) in cases {
            let want: Value = serde_norway::from_str(text).unwrap();
            assert_eq!(parse(text), Some(want), "case {name}:\n{text}");
        }
    }

    /// Documents outside the subset: the fast reader declines, whatever the full parser says.
    #[test]
    fn declines_what_it_does_not_read() {
        let cases: &[(&str, &str)] = &[
            ("anchor and alias", "a: &x b\nc: *x\n"),
            ("tag", "a: !!str 1\n"),
            ("flow sequence", "a: [b, c]\n"),
            ("flow mapping", "a: {b: c}\n"),
            ("block scalar", "a: |\n  text\n"),
            ("folded scalar", "a: >\n  text\n"),
            ("multi-line plain scalar", "a: b\n  c\n"),
            ("trailing comment", "a: b # c\n"),
            ("tab", "a:\n\t- b\n"),
            ("duplicate key", "a: 1\na: 2\n"),
            ("escaped double quotes", "a: \"b\\nc\"\n"),
            ("unclosed quote", "a: 'b\n"),
            ("odd indentation", "a:\n  b: 1\n c: 2\n"),
            ("bare dash", "a:\n-\n"),
            ("compact nested sequence", "- - a\n"),
            ("second document", "a: b\n---\nc: d\n"),
            ("document marker with content", "a: b\n--- c: d\n"),
            ("document end", "a: b\n...\n"),
            ("json", "{\"a\": \"b\"}"),
            ("empty", ""),
            ("scalar document", "just text"),
            ("complex key", "? a\n: b\n"),
            ("numeric key", "1: a\n"),
            ("trailing space", "a: b \n"),
            ("space before the colon", "a : b\n"),
            ("control character", "a: b\u{1}c\n"),
            ("non-ASCII", "a: caf\u{e9}\n"),
            ("lone carriage return", "a: b\rc: d\n"),
            ("sequence item then a deeper line", "- a\n  b\n"),
            ("comment as a value", "a: #b\n"),
        ];
        for (name, text) in cases {
            assert_eq!(parse(text), None, "case {name}:\n{text}");
        }
    }

    #[test]
    fn generated_spec_reads_the_same() {
        let spec = crate::Spec {
            cdi_version: "0.5.0".into(),
            kind: "nvidia.com/gpu".into(),
            devices: vec![crate::Device {
                name: "0".into(),
                container_edits: crate::ContainerEdits {
                    env: vec!["NVIDIA_VISIBLE_DEVICES=void".into(), "A='b'".into()],
                    ..Default::default()
                },
            }],
            container_edits: Default::default(),
        };
        let text = spec.encode(crate::Format::Yaml).unwrap();
        let want: Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(parse(&text), Some(want), "{text}");
    }
}
