//! How containerd merges its config file with the files it imports, by containerd's version,
//! and what a drop-in shadows under that rule. PURE: text in, values out.
//!
//! The two rules (read in containerd's source; COMPAT.md, "containerd: how imports merge"):
//!
//! * [`MergeRule::WholePlugin`], containerd before 2.0 (`services/server/config/config.go`,
//!   `mergeConfig`, up to v1.7.x): after mergo's merge, `for k, v := range from.Plugins {
//!   to.Plugins[k] = v }` replaces a `plugins."<id>"` table with the last imported file's
//!   (containerd issue 5837). A drop-in that registers a runtime must then carry the whole CRI
//!   table, and an edit made to that table elsewhere after the drop-in was written is lost.
//! * [`MergeRule::PerKey`], containerd 2.0 and later (`cmd/containerd/server/config/config.go`,
//!   commit a21e379b6 "Allow sections of Plugins to be merged, and not overwritten as entire
//!   sections", PR #9982, first in v2.0.0-rc.6; its backport to 1.7, 9c058f770, is in no 1.7
//!   tag): the replacement loop is gone and mergo merges `plugins` key by key (a later file's
//!   value wins, tables merge, arrays inside a plugin table are replaced). A drop-in then holds
//!   only its own keys: a copy of the CRI table there would override every key it holds.
//!
//! In both, `imports` (and `required_plugins`, `disabled_plugins`) append (2.x drops
//! duplicates), `proxy_plugins`, `stream_processors` and `timeouts` entries are replaced whole,
//! and other tables merge field by field.

use std::fmt;
use std::path::PathBuf;

use toml_edit::{DocumentMut, Item, Table, TableLike, Value};

use super::super::{merge_table, parse_toml, Error, Source};
use super::{version, Version};

/// How containerd merges an imported file over what it loaded before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeRule {
    /// containerd before 2.0: a `plugins."<id>"` table replaces the earlier one whole.
    WholePlugin,
    /// containerd 2.0 and later: `plugins` merge key by key.
    PerKey,
}

/// A containerd release, as `containerd --version` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    pub major: u64,
    pub minor: u64,
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The first release whose imports merge key by key (v2.0.0; see the module doc).
pub const PER_KEY_SINCE: Release = Release { major: 2, minor: 0 };

impl Release {
    /// The release in `containerd --version` output: the first word that reads `[v]N.N`
    /// (`containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3`,
    /// `containerd containerd.io 1.7.25 bcc8…`, `containerd github.com/containerd/containerd/v2
    /// v2.0.4 1a43…`, k3s's `v1.7.23-k3s2`).
    pub fn parse(output: &str) -> Option<Release> {
        output.split_whitespace().skip(1).find_map(|word| {
            let word = word.strip_prefix('v').unwrap_or(word);
            let mut parts = word.splitn(3, '.');
            let major = parts.next()?.parse().ok()?;
            let minor: String = parts
                .next()?
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            Some(Release {
                major,
                minor: minor.parse().ok()?,
            })
        })
    }
}

impl MergeRule {
    /// The rule of `release`; an unknown release gets the rule before 2.0 (a drop-in written
    /// by it also works, as a snapshot, under the later rule; the reverse is not true).
    pub fn of(release: Option<Release>) -> MergeRule {
        match release {
            Some(r) if r >= PER_KEY_SINCE => MergeRule::PerKey,
            _ => MergeRule::WholePlugin,
        }
    }

    /// In words, for notes and `-d`.
    pub fn describe(self) -> &'static str {
        match self {
            MergeRule::WholePlugin => {
                "an imported plugin table replaces the earlier one whole (containerd before 2.0)"
            }
            MergeRule::PerKey => {
                "imported plugin tables merge key by key (containerd 2.0 and later)"
            }
        }
    }
}

/// `sources` (the main file, then the files it imports, in containerd's load order) merged by
/// `rule`. Each source is parsed on its own, so an error names its file.
pub fn merged(sources: &[Source<'_>], rule: MergeRule) -> Result<DocumentMut, Error> {
    let mut merged = DocumentMut::new();
    for src in sources {
        let doc = parse_toml(src)?;
        version(&doc, src.path)?;
        merge_doc(&mut merged, &doc, rule);
    }
    Ok(merged)
}

fn merge_doc(merged: &mut DocumentMut, doc: &DocumentMut, rule: MergeRule) {
    for (key, item) in doc.iter() {
        let whole_entries = matches!(key, "proxy_plugins" | "stream_processors" | "timeouts")
            || (key == "plugins" && rule == MergeRule::WholePlugin);
        match (merged.get_mut(key), item) {
            (Some(dst), from) if key == "plugins" && rule == MergeRule::PerKey => {
                merge_per_key(dst, from)
            }
            (Some(Item::Table(dst)), Item::Table(from)) if whole_entries => {
                for (k, i) in from.iter() {
                    dst.insert(k, i.clone());
                }
            }
            (Some(Item::Table(dst)), Item::Table(from)) => merge_table(dst, from),
            (Some(Item::Value(Value::Array(dst))), Item::Value(Value::Array(from))) => {
                for v in from.iter() {
                    let dup = rule == MergeRule::PerKey && dst.iter().any(|d| value_eq(d, v));
                    if !dup {
                        dst.push_formatted(v.clone());
                    }
                }
            }
            _ => {
                merged.insert(key, item.clone());
            }
        }
    }
}

/// mergo's map merge (containerd 2.x's `plugins`): tables merge key by key, anything else is
/// replaced by the later file's value.
fn merge_per_key(dst: &mut Item, from: &Item) {
    let (Some(d), Some(f)) = (dst.as_table_like_mut(), from.as_table_like()) else {
        *dst = from.clone();
        return;
    };
    for (k, item) in f.iter() {
        match d.get_mut(k) {
            Some(existing) if existing.is_table_like() && item.is_table_like() => {
                merge_per_key(existing, item)
            }
            _ => {
                d.insert(k, item.clone());
            }
        }
    }
}

/// Equal values, whatever their formatting (quotes, layout, comments).
pub fn value_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.value() == y.value(),
        (Value::Integer(x), Value::Integer(y)) => x.value() == y.value(),
        (Value::Float(x), Value::Float(y)) => x.value() == y.value(),
        (Value::Boolean(x), Value::Boolean(y)) => x.value() == y.value(),
        (Value::Datetime(x), Value::Datetime(y)) => x.value() == y.value(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| value_eq(p, q))
        }
        (Value::InlineTable(x), Value::InlineTable(y)) => table_eq(x, y),
        _ => false,
    }
}

fn table_eq(x: &dyn TableLike, y: &dyn TableLike) -> bool {
    x.len() == y.len()
        && x.iter()
            .all(|(k, i)| y.get(k).is_some_and(|j| item_eq(i, j)))
}

/// Equal items (a table and an inline table with the same keys are equal).
pub fn item_eq(a: &Item, b: &Item) -> bool {
    match (a.as_table_like(), b.as_table_like()) {
        (Some(x), Some(y)) => table_eq(x, y),
        (None, None) => match (a, b) {
            (Item::Value(x), Item::Value(y)) => value_eq(x, y),
            (Item::ArrayOfTables(x), Item::ArrayOfTables(y)) => {
                x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| table_eq(p, q))
            }
            (Item::None, Item::None) => true,
            _ => false,
        },
        _ => false,
    }
}

/// Every value below `t` that is not a table, with its key path.
fn leaves<'t>(
    t: &'t dyn TableLike,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, &'t Item)>,
) {
    for (k, item) in t.iter() {
        path.push(k.to_string());
        match item.as_table_like() {
            Some(sub) => leaves(sub, path, out),
            None => out.push((path.clone(), item)),
        }
        path.pop();
    }
}

fn item_at<'t>(root: &'t Table, path: &[String]) -> Option<&'t Item> {
    let (last, parents) = path.split_last()?;
    let mut t: &dyn TableLike = root;
    for k in parents {
        t = t.get(k)?.as_table_like()?;
    }
    t.get(last)
}

/// A key path as TOML writes it: `plugins."io.containerd.grpc.v1.cri".sandbox_image`.
pub fn key_path(path: &[String]) -> String {
    path.iter()
        .map(|k| toml_edit::Key::new(k.as_str()).display_repr().into_owned())
        .collect::<Vec<_>>()
        .join(".")
}

/// A value in one line, for a message.
fn show(item: &Item) -> String {
    match item {
        Item::Value(v) => {
            let mut v = v.clone();
            v.decor_mut().clear();
            v.to_string()
        }
        Item::ArrayOfTables(_) => "[[...]] (an array of tables)".to_string(),
        _ => "a table".to_string(),
    }
}

/// A key the drop-in sets differently from what containerd would have without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    /// Where the key is set (the last file before the drop-in that sets it).
    pub file: PathBuf,
    /// Its key path (TOML notation).
    pub key: String,
    /// Its value there.
    pub there: String,
    /// Its value in the drop-in, or `None` when the drop-in lacks it (and, replacing the whole
    /// plugin table, takes it away).
    pub drop_in: Option<String>,
}

impl fmt::Display for Shadow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.drop_in {
            Some(d) => write!(
                f,
                "{} = {} in {} (the drop-in has {d})",
                self.key,
                self.there,
                self.file.display()
            ),
            None => write!(
                f,
                "{} = {} in {} (the drop-in lacks it)",
                self.key,
                self.there,
                self.file.display()
            ),
        }
    }
}

/// The index in `files` (the main file first, then its imports in load order) of the last
/// imported file that registers runtime `name` in its CRI table: our drop-in. `None` when no
/// import does (the main file holds it, or nothing does) or a file does not parse.
pub fn drop_in_of(files: &[Source<'_>], name: &str) -> Option<usize> {
    (1..files.len()).rev().find(|&i| {
        let Ok(doc) = parse_toml(&files[i]) else {
            return false;
        };
        let Ok(v) = version(&doc, files[i].path) else {
            return false;
        };
        let [a, b, c, d] = v.runtimes();
        item_at(doc.as_table(), &[a, b, c, d, name].map(String::from)).is_some()
    })
}

/// The keys the drop-in `files[drop_in]` shadows under `rule`: each value that containerd would
/// have without the drop-in (the other files merged) and has otherwise, in the plugin tables the
/// drop-in holds. The drop-in's own keys are not counted: the runtime `name`'s entry, a
/// `default_runtime_name` naming a runtime the drop-in registers, `enable_cdi = true`. Empty for
/// a version 1 main file (containerd 1.x does not import into it).
pub fn shadowed(
    files: &[Source<'_>],
    drop_in: usize,
    name: &str,
    rule: MergeRule,
) -> Result<Vec<Shadow>, Error> {
    let docs: Vec<DocumentMut> = files.iter().map(parse_toml).collect::<Result<_, _>>()?;
    let Some(main) = docs.first() else {
        return Ok(Vec::new());
    };
    if version(main, files[0].path)? == Version::V1 || drop_in >= files.len() || drop_in == 0 {
        return Ok(Vec::new());
    }
    let others: Vec<Source<'_>> = files
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != drop_in)
        .map(|(_, s)| *s)
        .collect();
    let without = merged(&others, rule)?;
    let with = merged(files, rule)?;
    let d = &docs[drop_in];
    let v = version(d, files[drop_in].path)?;
    let [p, cri, c, r] = v.runtimes();
    let registers =
        |rt: &str| item_at(d.as_table(), &[p, cri, c, r, rt].map(String::from)).is_some();
    let ours = |path: &[String]| -> bool {
        let at = |n: usize, keys: &[&str]| {
            path.len() >= n && path[..keys.len()].iter().zip(keys).all(|(a, b)| a == b)
        };
        if at(5, &[p, cri, c, r, name]) {
            return true;
        }
        let set_in_drop_in = item_at(d.as_table(), path).is_some();
        if path == [p, cri, c, "default_runtime_name"] && set_in_drop_in {
            let value = item_at(d.as_table(), path).and_then(Item::as_str);
            return value.is_some_and(|rt| rt == name || registers(rt));
        }
        if path == [p, cri, "enable_cdi"] && set_in_drop_in {
            return item_at(d.as_table(), path).and_then(Item::as_bool) == Some(true);
        }
        false
    };
    let Some(plugins) = d.get("plugins").and_then(Item::as_table_like) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (id, _) in plugins.iter() {
        let prefix = vec!["plugins".to_string(), id.to_string()];
        let Some(table) = item_at(without.as_table(), &prefix).and_then(Item::as_table_like) else {
            continue;
        };
        let mut found = Vec::new();
        leaves(table, &mut prefix.clone(), &mut found);
        for (path, before) in found {
            if ours(&path) {
                continue;
            }
            let after = item_at(with.as_table(), &path);
            if after.is_some_and(|a| item_eq(a, before)) {
                continue;
            }
            let file = (0..files.len())
                .rev()
                .filter(|&i| i != drop_in)
                .find(|&i| item_at(docs[i].as_table(), &path).is_some())
                .map_or_else(
                    || files[0].path.to_path_buf(),
                    |i| files[i].path.to_path_buf(),
                );
            out.push(Shadow {
                file,
                key: key_path(&path),
                there: show(before),
                drop_in: item_at(d.as_table(), &path).map(show),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const CRI: &str = "[plugins.\"io.containerd.grpc.v1.cri\"";

    fn srcs<'a>(files: &'a [(&'a str, String)]) -> Vec<Source<'a>> {
        files
            .iter()
            .map(|(p, t)| Source {
                path: Path::new(p),
                text: t,
            })
            .collect()
    }

    #[test]
    fn releases() {
        let cases: &[(&str, &str, Option<(u64, u64)>, MergeRule)] = &[
            (
                "Debian 12",
                "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n",
                Some((1, 6)),
                MergeRule::WholePlugin,
            ),
            (
                "docker's containerd.io 1.7",
                "containerd containerd.io 1.7.25 bcc810d6b9066471b0b6fa75f557a15a1cbf31bb",
                Some((1, 7)),
                MergeRule::WholePlugin,
            ),
            (
                "k3s",
                "containerd github.com/k3s-io/containerd v1.7.23-k3s2 abcd",
                Some((1, 7)),
                MergeRule::WholePlugin,
            ),
            (
                "2.0",
                "containerd github.com/containerd/containerd/v2 v2.0.4 1a43cb6a1035441f9aca8f5666a9b3ef9e70ab20",
                Some((2, 0)),
                MergeRule::PerKey,
            ),
            (
                "2.1",
                "containerd github.com/containerd/containerd/v2 v2.1.0 abc",
                Some((2, 1)),
                MergeRule::PerKey,
            ),
            ("garbage", "containerd: command not found", None, MergeRule::WholePlugin),
            ("empty", "", None, MergeRule::WholePlugin),
        ];
        for (name, text, want, rule) in cases {
            let got = Release::parse(text);
            assert_eq!(got.map(|r| (r.major, r.minor)), *want, "case {name}");
            assert_eq!(MergeRule::of(got), *rule, "case {name}");
        }
    }

    /// Both rules over the same files: (case, files, key, want under WholePlugin, want under
    /// PerKey) where want is the key's value in the merged config (None: absent).
    #[test]
    fn merge_rules() {
        type Case<'a> = (
            &'a str,
            Vec<String>,
            &'a [&'a str],
            Option<&'a str>,
            Option<&'a str>,
        );
        let k = |rest: &[&'static str]| -> Vec<&'static str> {
            let mut v = vec!["plugins", "io.containerd.grpc.v1.cri"];
            v.extend_from_slice(rest);
            v
        };
        let sandbox = k(&["sandbox_image"]);
        let bin_dir = k(&["cni", "bin_dir"]);
        let conf_dir = k(&["cni", "conf_dir"]);
        let runc = k(&["containerd", "runtimes", "runc", "runtime_type"]);
        let annotations = k(&["containerd", "runtimes", "runc", "container_annotations"]);
        let cases: Vec<Case> = vec![
            (
                "a later key wins in both",
                vec![
                    format!("version = 2\n{CRI}]\nsandbox_image = \"a\"\n"),
                    format!("version = 2\n{CRI}]\nsandbox_image = \"b\"\n"),
                ],
                &sandbox,
                Some("\"b\""),
                Some("\"b\""),
            ),
            (
                "a key only the earlier file sets: gone with the whole table, kept per key",
                vec![
                    format!("version = 2\n{CRI}]\nsandbox_image = \"a\"\n"),
                    format!("version = 2\n{CRI}.cni]\nbin_dir = \"/x\"\n"),
                ],
                &sandbox,
                None,
                Some("\"a\""),
            ),
            (
                "sub-tables: containerd's own test (TestMergingPluginsWithTwoCriCniDropInConfigs)",
                vec![
                    format!("version = 2\n{CRI}.cni]\nbin_dir = \"/b\"\n"),
                    format!("version = 2\n{CRI}.cni]\nconf_dir = \"/tmp\"\n"),
                ],
                &bin_dir,
                None,
                Some("\"/b\""),
            ),
            (
                "the later sub-table's own key in both",
                vec![
                    format!("version = 2\n{CRI}.cni]\nbin_dir = \"/b\"\n"),
                    format!("version = 2\n{CRI}.cni]\nconf_dir = \"/tmp\"\n"),
                ],
                &conf_dir,
                Some("\"/tmp\""),
                Some("\"/tmp\""),
            ),
            (
                "a runtime of the main file next to an imported one",
                vec![
                    format!("version = 2\n{CRI}.containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n"),
                    format!("version = 2\n{CRI}.containerd.runtimes.nvidia]\nruntime_type = \"io.containerd.runc.v2\"\n"),
                ],
                &runc,
                None,
                Some("\"io.containerd.runc.v2\""),
            ),
            (
                "an array inside a plugin table is replaced per key",
                vec![
                    format!("version = 2\n{CRI}.containerd.runtimes.runc]\ncontainer_annotations = [\"a\"]\n"),
                    format!("version = 2\n{CRI}.containerd.runtimes.runc]\ncontainer_annotations = [\"b\"]\n"),
                ],
                &annotations,
                Some("[\"b\"]"),
                Some("[\"b\"]"),
            ),
            (
                "an inline table merges with a table per key",
                vec![
                    format!("version = 2\n{CRI}]\ncni = {{ bin_dir = \"/b\" }}\n"),
                    format!("version = 2\n{CRI}.cni]\nconf_dir = \"/tmp\"\n"),
                ],
                &bin_dir,
                None,
                Some("\"/b\""),
            ),
            (
                "other plugins' tables are kept in both",
                vec![
                    format!("version = 2\n{CRI}]\nsandbox_image = \"a\"\n"),
                    "version = 2\n[plugins.\"io.containerd.internal.v1.opt\"]\npath = \"/o\"\n".into(),
                ],
                &sandbox,
                Some("\"a\""),
                Some("\"a\""),
            ),
        ];
        for (name, texts, key, whole, per_key) in cases {
            let files: Vec<(&str, String)> = texts
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    (
                        if i == 0 {
                            "/etc/containerd/config.toml"
                        } else {
                            "/etc/containerd/conf.d/x.toml"
                        },
                        t,
                    )
                })
                .collect();
            let sources = srcs(&files);
            for (rule, want) in [
                (MergeRule::WholePlugin, whole),
                (MergeRule::PerKey, per_key),
            ] {
                let doc = merged(&sources, rule).unwrap_or_else(|e| panic!("case {name}: {e}"));
                let path: Vec<String> = key.iter().map(|s| s.to_string()).collect();
                let got = item_at(doc.as_table(), &path).map(show);
                assert_eq!(got.as_deref(), want, "case {name}, {rule:?}:\n{doc}");
            }
        }

        // Top-level arrays append; 2.x drops a value already there.
        let files = [
            ("/a", "version = 2\nimports = [\"/a/*.toml\"]\n".to_string()),
            (
                "/b",
                "version = 2\nimports = [\"/a/*.toml\", \"/b.toml\"]\n".to_string(),
            ),
        ];
        for (rule, want) in [
            (
                MergeRule::WholePlugin,
                "[\"/a/*.toml\", \"/a/*.toml\", \"/b.toml\"]",
            ),
            (MergeRule::PerKey, "[\"/a/*.toml\", \"/b.toml\"]"),
        ] {
            let doc = merged(&srcs(&files), rule).unwrap();
            let got = show(&doc["imports"]).replace(['\n', ' '], "");
            assert_eq!(got, want.replace(' ', ""), "{rule:?}");
        }
    }

    /// (case, files (main first), drop-in index, rule, want: the shadowed keys as `file key`)
    #[test]
    fn shadows() {
        type Case<'a> = (&'a str, Vec<String>, usize, MergeRule, &'a [&'a str]);
        let nv = format!(
            "{CRI}.containerd.runtimes.nvidia]\nruntime_type = \"io.containerd.runc.v2\"\n\
             {CRI}.containerd.runtimes.nvidia.options]\nBinaryName = \"/usr/bin/nvidia-container-runtime\"\n"
        );
        let main = format!("version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n{CRI}]\nsandbox_image = \"pause:3.6\"\n");
        let full = format!("version = 2\n{CRI}]\nsandbox_image = \"pause:3.6\"\n{nv}");
        let cases: Vec<Case> = vec![
            (
                "a full copy made from the files: nothing shadowed",
                vec![main.clone(), full.clone()],
                1,
                MergeRule::WholePlugin,
                &[],
            ),
            (
                "config.toml edited after the copy: shadowed (whole table)",
                vec![main.replace("3.6", "3.9"), full.clone()],
                1,
                MergeRule::WholePlugin,
                &["0 plugins.\"io.containerd.grpc.v1.cri\".sandbox_image = \"pause:3.9\" (the drop-in has \"pause:3.6\")"],
            ),
            (
                "a site file's new key, which the copy lacks (whole table)",
                vec![
                    main.clone(),
                    format!("version = 2\n{CRI}]\nsandbox_image = \"pause:3.6\"\nmax_concurrent_downloads = 9\n"),
                    full.clone(),
                ],
                2,
                MergeRule::WholePlugin,
                &["1 plugins.\"io.containerd.grpc.v1.cri\".max_concurrent_downloads = 9 (the drop-in lacks it)"],
            ),
            (
                "the same copy per key: the key it lacks stays, the one it copies wins",
                vec![
                    main.replace("3.6", "3.9"),
                    format!("version = 2\n{CRI}]\nmax_concurrent_downloads = 9\n"),
                    full.clone(),
                ],
                2,
                MergeRule::PerKey,
                &["0 plugins.\"io.containerd.grpc.v1.cri\".sandbox_image = \"pause:3.9\" (the drop-in has \"pause:3.6\")"],
            ),
            (
                "only our keys per key: nothing shadowed",
                vec![main.replace("3.6", "3.9"), format!("version = 2\n{nv}")],
                1,
                MergeRule::PerKey,
                &[],
            ),
            (
                "our default and CDI switch are ours",
                vec![
                    format!("{main}{CRI}.containerd]\ndefault_runtime_name = \"runc\"\n"),
                    format!("version = 2\n{CRI}]\nsandbox_image = \"pause:3.6\"\nenable_cdi = true\n{CRI}.containerd]\ndefault_runtime_name = \"nvidia\"\n{nv}"),
                ],
                1,
                MergeRule::WholePlugin,
                &[],
            ),
            (
                "a file after the drop-in wins over it: not shadowed by it",
                vec![
                    main.replace("3.6", "3.9"),
                    full.clone(),
                    format!("version = 2\n{CRI}]\nsandbox_image = \"pause:3.9\"\n"),
                ],
                1,
                MergeRule::PerKey,
                &[],
            ),
            (
                "formatting is no difference",
                vec![main.replace('"', "'").replace("'/etc", "\"/etc").replace("toml'", "toml\""), full.clone()],
                1,
                MergeRule::WholePlugin,
                &[],
            ),
            (
                "a version 1 main file imports nothing",
                vec![format!("[plugins.cri]\nsandbox_image = \"x\"\n"), full.clone()],
                1,
                MergeRule::WholePlugin,
                &[],
            ),
        ];
        for (name, texts, drop_in, rule, want) in cases {
            let files: Vec<(String, String)> = texts
                .into_iter()
                .enumerate()
                .map(|(i, t)| (i.to_string(), t))
                .collect();
            let sources: Vec<Source<'_>> = files
                .iter()
                .map(|(p, t)| Source {
                    path: Path::new(p),
                    text: t,
                })
                .collect();
            assert_eq!(
                drop_in_of(&sources, "nvidia"),
                Some(drop_in),
                "case {name}: drop_in_of"
            );
            let got: Vec<String> = shadowed(&sources, drop_in, "nvidia", rule)
                .unwrap_or_else(|e| panic!("case {name}: {e}"))
                .iter()
                .map(|s| s.to_string())
                .collect();
            let want: Vec<String> = want
                .iter()
                .map(|w| {
                    let (file, rest) = w.split_once(' ').unwrap();
                    // `key = value in FILE (...)`
                    let (kv, tail) = rest.split_once(" (").unwrap();
                    format!("{kv} in {file} ({tail}")
                })
                .collect();
            assert_eq!(got, want, "case {name}");
        }
    }
}
