//! Container-engine configuration edits: containerd `config.toml`, docker `daemon.json`,
//! CRI-O `crio.conf` and OCI hooks.d JSON.
//!
//! Everything here is a PURE document transform: text (plus the path it came from, used only in
//! error messages and to name the files a change touches) in, text out. This module never reads or
//! writes the filesystem and never runs a program; `nvidia-ctk runtime` does that, through
//! [`nvct_formats::fsutil`]. Comments, blank lines and key order of the user's TOML survive because every
//! edit goes through `toml_edit::DocumentMut`; JSON goes through `serde_json::Value` with
//! `preserve_order`.
//!
//! # Configure / unconfigure contract
//!
//! * `configure` is idempotent: running it on its own output gives the same bytes.
//! * `unconfigure` removes the runtime entry named by [`Options::runtime_name`], any drop-in file
//!   and `imports` entry configure added, and puts back the values configure overwrote. Those
//!   values are taken from the *previous* document — in practice the `<file>.bak` backup the binary
//!   keeps next to each file it writes — when it is usable: it parses and does not itself contain
//!   the runtime entry (i.e. it predates configure).
//!
//!   With a usable backup:
//!
//!   - the default runtime goes back to the backup's value, or is removed if the backup had none;
//!   - the CDI switch goes back to the backup's value, or is removed if the backup had none;
//!   - tables/objects left empty are removed when the backup did not have them.
//!
//!   Without one: a default runtime equal to our name is removed (the engine falls back to its
//!   built-in default, `runc`), the CDI switch is left alone, and only implicit (header-less) TOML
//!   tables left empty are removed.
//!
//!   So `configure` then `unconfigure` restores the original bytes whenever the backup is the
//!   pre-configure file and, for JSON, the original was already formatted the way we print
//!   (pretty, one indentation unit, as `serde_json` does). Limits: a backup overwritten by a later
//!   write (e.g. configure run twice with different flags) is no longer usable; hand edits made to
//!   the CDI switch after configure are reverted by an unconfigure with a usable backup.

pub mod config_edit;
pub mod containerd;
pub mod crio;
pub mod docker;
pub mod oci_hook;

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, Value};

/// Default name of the runtime entry.
pub const DEFAULT_RUNTIME_NAME: &str = "nvidia";
/// Default path of the runtime shim written into containerd's and CRI-O's config (upstream maps
/// its bare default to this path for those two engines and wants an absolute path there).
pub const DEFAULT_RUNTIME_PATH: &str = "/usr/bin/nvidia-container-runtime";
/// Default runtime written into docker's `daemon.json`: the bare name, which dockerd looks up in
/// its `PATH` (upstream 1.18's default for docker).
pub const DEFAULT_RUNTIME_EXECUTABLE: &str = "nvidia-container-runtime";

/// What to write into an engine's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Name of the runtime entry (`nvidia`).
    pub runtime_name: String,
    /// Path of the runtime binary the entry points at.
    pub runtime_path: String,
    /// Make the entry the engine's default runtime.
    pub set_as_default: bool,
    /// Turn the engine's CDI support on.
    pub cdi_enabled: bool,
    /// containerd: where the engine sees the drop-in, when that is not where it is written (the
    /// installer in a pod writes `/runtime/config-dir.d/99-nvidia.toml`, the host's containerd
    /// reads `/etc/containerd/conf.d/`: upstream's `RUNTIME_DROP_IN_CONFIG_HOST_PATH`). The
    /// main file's `imports` names this path's directory.
    pub drop_in_host_path: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            runtime_name: DEFAULT_RUNTIME_NAME.to_string(),
            runtime_path: DEFAULT_RUNTIME_PATH.to_string(),
            set_as_default: false,
            drop_in_host_path: None,
            cdi_enabled: false,
        }
    }
}

/// One input document: where it came from and its text (empty for a missing file).
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub path: &'a Path,
    pub text: &'a str,
}

/// The new state of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    /// New full content, or `None` to remove the file.
    pub content: Option<String>,
}

/// Result of a transform: every file it touches (possibly with unchanged content — the writer
/// compares) and notes for the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub changes: Vec<Change>,
    pub notes: Vec<String>,
}

/// A container engine whose config registers the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Containerd,
    Docker,
    Crio,
}

impl Engine {
    /// This engine's facts and behaviour (one zero-sized type per engine).
    pub fn api(self) -> &'static dyn Interface {
        match self {
            Engine::Containerd => &containerd::Containerd,
            Engine::Docker => &docker::Docker,
            Engine::Crio => &crio::Crio,
        }
    }

    pub fn name(self) -> &'static str {
        self.api().name()
    }

    /// The engine's main config file where its packages put it.
    pub fn default_config(self) -> &'static str {
        self.api().default_config()
    }

    /// Upstream's default drop-in (1.18.1+ for containerd, 1.19.1+ for CRI-O); docker has none.
    pub fn default_drop_in(self) -> Option<&'static str> {
        self.api().default_drop_in()
    }

    /// The runtime path written when none is given: absolute for containerd and CRI-O, the bare
    /// name for docker.
    pub fn default_runtime_path(self) -> &'static str {
        self.api().default_runtime_path()
    }
}

/// How the engine learns about a changed config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// SIGHUP to the process listening on the engine's socket (docker reloads its runtimes;
    /// containerd exits and its supervisor starts it again).
    Signal,
    /// `systemctl restart <engine>`, through `chroot <host root>` from a container.
    Systemd,
    None,
}

/// One container engine: every fact and behaviour that differs between engines, in one place
/// (upstream's `pkg/config/engine` `Interface`). Implemented by one zero-sized type per engine,
/// next to its transforms ([`containerd::Containerd`], [`docker::Docker`], [`crio::Crio`]);
/// reached through [`Engine::api`].
pub trait Interface: Sync {
    /// The engine this describes.
    fn engine(&self) -> Engine;

    /// Its name in messages, and its systemd unit (`containerd`, `docker`, `crio`).
    fn name(&self) -> &'static str;

    /// Its name in prose (`nvidia-ctk runtime -d`): `CRI-O` for crio.
    fn display_name(&self) -> &'static str {
        self.name()
    }

    /// The engine's main config file where its packages put it.
    fn default_config(&self) -> &'static str;

    /// Upstream's default drop-in (1.18.1+ for containerd, 1.19.1+ for CRI-O); docker has none.
    fn default_drop_in(&self) -> Option<&'static str>;

    /// Whether the engine reads a drop-in at all (docker: only its `daemon.json`).
    fn uses_drop_in(&self) -> bool {
        self.default_drop_in().is_some()
    }

    /// Whether the main config names the drop-in (containerd's `imports`); CRI-O reads its
    /// drop-in directory itself.
    fn imports_drop_in(&self) -> bool {
        false
    }

    /// The runtime path written when none is given: absolute for containerd and CRI-O, the bare
    /// name for docker.
    fn default_runtime_path(&self) -> &'static str;

    /// The socket the engine serves (upstream's default).
    fn default_socket(&self) -> &'static str;

    /// How upstream's installer makes the engine pick up a change by default.
    fn default_restart(&self) -> Restart;

    /// What the user does next for a changed config to take effect; `rootless`: docker runs
    /// rootless for this user (only docker cares).
    fn restart_hint(&self, rootless: bool) -> &'static str;

    /// The engine's own cgroup driver when its config does not say (`v2`: the host has cgroup
    /// v2): CRI-O defaults to systemd; containerd's runc to cgroupfs; docker to systemd on
    /// cgroup v2 only.
    fn default_systemd(&self, v2: bool) -> bool;

    /// The binary whose dump of its config is the base with `--config-source=command`; `None`
    /// for docker, which has no dump.
    fn dump_binary(&self) -> Option<&'static str>;

    /// The words of that dump command (`config dump`, `status config`).
    fn dump_subcommand(&self) -> Option<&'static str>;

    /// The arguments of that dump (`config` is the engine's config file, `config_exists`
    /// whether it exists).
    fn dump_args(&self, config: &Path, config_exists: bool) -> Option<Vec<PathBuf>> {
        let _ = (config, config_exists);
        self.dump_subcommand()
            .map(|words| words.split(' ').map(PathBuf::from).collect())
    }

    /// Register the runtime: `main` is the config file, `base` the document the entry derives
    /// from (the file, or the engine's dump), `drop_in` where the entry goes if anywhere.
    fn configure(
        &self,
        main: Source<'_>,
        base: Source<'_>,
        drop_in: Option<&Path>,
        opts: &Options,
    ) -> Result<Outcome, Error>;

    /// Undo [`Interface::configure`]; `previous` is the backup of `main`, if any.
    fn unconfigure(
        &self,
        main: Source<'_>,
        previous: Option<&str>,
        drop_in: Option<&Path>,
        opts: &Options,
    ) -> Result<Outcome, Error>;

    /// Where the config `src` registers `runtime`.
    fn status(&self, src: Source<'_>, runtime: &str) -> Result<Registration, Error>;
}

/// How an engine's config registers a runtime (read by `nvidia-ctk doctor` through the same
/// parsers `configure` uses).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registration {
    /// The binary the runtime entry runs; `None` when there is no entry of that name.
    pub runtime_path: Option<String>,
    /// Whether the entry is the engine's default runtime.
    pub is_default: bool,
    /// Whether the engine puts containers in systemd-managed cgroups (containerd's runc
    /// `SystemdCgroup`, docker's `native.cgroupdriver=systemd`, CRI-O's `cgroup_manager`).
    /// `None` when the config does not say and the engine's own default applies.
    pub systemd_cgroup: Option<bool>,
}

/// Errors of the document transforms; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}:{line}: invalid TOML: {message}")]
    Toml {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}:{line}:{column}: invalid JSON: {source}")]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        source: serde_json::Error,
    },
    #[error("{path}: unsupported containerd config version {version} (supported: 1, 2, 3)")]
    UnknownVersion { path: PathBuf, version: String },
    #[error(
        "{path}: looks like a Go template (k3s/RKE2 config.toml.tmpl); edit the template by hand, \
         this tool only edits plain TOML/JSON"
    )]
    GoTemplate { path: PathBuf },
    #[error("{path}: `{key}` is not a table; cannot add the runtime under it")]
    NotATable { path: PathBuf, key: String },
    #[error(
        "{path}: containerd's default runtime `{default}` is not among the runtimes it would load \
         ({have}), so its CRI plugin (what the kubelet talks to) would not load; add a `{default}` \
         entry under [{table}] or set default_runtime_name to one of those"
    )]
    DefaultRuntimeMissing {
        path: PathBuf,
        default: String,
        have: String,
        table: String,
    },
    #[error("{path}: `{key}` is not a JSON object; cannot add the runtime under it")]
    NotAnObject { path: PathBuf, key: String },
}

/// The documents of `sources` merged in order: a later value wins, tables are merged key by key
/// (how CRI-O applies `crio.conf.d` over `crio.conf`; for containerd's `imports` close enough to
/// tell which runtimes are registered). Each source is parsed on its own, so an error names its
/// file. Used by `nvidia-ctk doctor` to read an engine's config with its drop-ins.
pub fn merge_toml(sources: &[Source<'_>]) -> Result<String, Error> {
    let mut merged = DocumentMut::new();
    for src in sources {
        let doc = parse_toml(src)?;
        merge_table(merged.as_table_mut(), doc.as_table());
    }
    Ok(merged.to_string())
}

pub fn merge_table(into: &mut Table, from: &Table) {
    for (key, item) in from.iter() {
        match (into.get_mut(key), item) {
            (Some(Item::Table(dst)), Item::Table(src)) => merge_table(dst, src),
            _ => {
                into.insert(key, item.clone());
            }
        }
    }
}

/// Refuse Go templates before parsing: a file named `*.tmpl`, or `{{` anywhere in the text.
pub fn reject_template(src: &Source<'_>) -> Result<(), Error> {
    let tmpl = src.path.extension().is_some_and(|e| e == "tmpl");
    if tmpl || src.text.contains("{{") {
        return Err(Error::GoTemplate {
            path: src.path.to_path_buf(),
        });
    }
    Ok(())
}

/// 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

pub fn parse_toml(src: &Source<'_>) -> Result<DocumentMut, Error> {
    reject_template(src)?;
    src.text
        .parse::<DocumentMut>()
        .map_err(|e| toml_error(src.path, src.text, &e))
}

/// A TOML parse error of `text` (read from `path`) with its line; a duplicate key or table
/// also names what is duplicated (toml_edit says only "duplicate key"), from the line itself.
pub fn toml_error(path: &Path, text: &str, e: &toml_edit::TomlError) -> Error {
    let line = e.span().map_or(1, |s| line_of(text, s.start));
    let mut message = e.message().trim().to_string();
    if message.starts_with("duplicate key") {
        let what = text.lines().nth(line - 1).unwrap_or_default().trim();
        let what = what.split('#').next().unwrap_or_default().trim();
        if what.starts_with('[') {
            message =
                format!("the table {what} is given twice (merge its keys into the first {what})");
        } else if !what.is_empty() {
            message = format!("duplicate key: {what} (a key given twice in one table)");
        }
    }
    Error::Toml {
        path: path.to_path_buf(),
        line,
        message,
    }
}

/// The table at `keys` below `root`, if every step is a table.
pub fn table_at<'t>(root: &'t Table, keys: &[&str]) -> Option<&'t Table> {
    keys.iter().try_fold(root, |t, k| t.get(k)?.as_table())
}

pub fn table_at_mut<'t>(root: &'t mut Table, keys: &[&str]) -> Option<&'t mut Table> {
    keys.iter()
        .try_fold(root, |t, k| t.get_mut(k)?.as_table_mut())
}

/// The table at `keys`, creating missing steps as implicit (header-less) tables.
pub fn table_at_create<'t>(
    root: &'t mut Table,
    keys: &[&str],
    path: &Path,
) -> Result<&'t mut Table, Error> {
    let mut t = root;
    for (i, k) in keys.iter().enumerate() {
        let item = t.entry(k).or_insert_with(|| {
            let mut n = Table::new();
            n.set_implicit(true);
            Item::Table(n)
        });
        t = item.as_table_mut().ok_or_else(|| Error::NotATable {
            path: path.to_path_buf(),
            key: keys[..=i].join("."),
        })?;
    }
    Ok(t)
}

/// Error unless every step of `keys` that `root` holds is a table: a drop-in is merged over the
/// file, so a value of another type there makes the engine's merged config invalid even when the
/// drop-in alone is fine.
pub fn require_tables(root: &Table, keys: &[&str], path: &Path) -> Result<(), Error> {
    let mut t: &dyn toml_edit::TableLike = root;
    for (i, k) in keys.iter().enumerate() {
        let Some(item) = t.get(k) else {
            return Ok(());
        };
        t = item.as_table_like().ok_or_else(|| Error::NotATable {
            path: path.to_path_buf(),
            key: keys[..=i].join("."),
        })?;
    }
    Ok(())
}

/// Does `root` hold anything at `keys`?
pub fn has_key(root: &Table, keys: &[&str]) -> bool {
    match keys.split_last() {
        Some((last, parents)) => table_at(root, parents).is_some_and(|t| t.contains_key(last)),
        None => true,
    }
}

/// Set `key` to `value` unless it already holds an equal value; an existing value keeps its
/// surrounding whitespace and comments.
pub fn set_value(table: &mut dyn toml_edit::TableLike, key: &str, value: Value) {
    match table.get_mut(key).and_then(Item::as_value_mut) {
        Some(old) if same_value(old, &value) => {}
        Some(old) => {
            let decor = old.decor().clone();
            *old = value;
            *old.decor_mut() = decor;
        }
        None => {
            // Indent a new key like the table's last key-value (comments are not copied).
            let indent = table
                .iter()
                .filter(|(_, i)| i.is_value())
                .filter_map(|(k, _)| table.key(k)?.leaf_decor().prefix()?.as_str())
                .last()
                .map(last_line)
                .filter(|s| s.chars().all(char::is_whitespace))
                .map(str::to_string);
            table.insert(key, Item::Value(value));
            if let (Some(indent), Some(mut k)) = (indent, table.key_mut(key)) {
                k.leaf_decor_mut().set_prefix(indent);
            }
        }
    }
}

fn last_line(s: &str) -> &str {
    s.rsplit('\n').next().unwrap_or("")
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.value() == y.value(),
        (Value::Boolean(x), Value::Boolean(y)) => x.value() == y.value(),
        (Value::Integer(x), Value::Integer(y)) => x.value() == y.value(),
        _ => false,
    }
}

/// Prepare a copied subtree for insertion: forget its document positions so it is printed right
/// after the table that precedes it (its template's last subtable) instead of interleaved with
/// the template, and drop comments above its table headers (they describe the template), keeping
/// one blank line and the header's indentation.
pub fn prepare_copy(item: &mut Item) {
    if let Item::Table(t) = item {
        t.set_position(None);
        if let Some(indent) = t.decor().prefix().and_then(|p| p.as_str()).map(last_line) {
            let prefix = format!("\n{indent}");
            t.decor_mut().set_prefix(prefix);
        }
        for (_, child) in t.iter_mut() {
            prepare_copy(child);
        }
    }
}

/// Remove tables along `keys` (deepest first) that are empty and were not in `prev` (with a usable
/// previous document) or are implicit (without one). Stops at the first table that stays.
pub fn prune_empty(root: &mut Table, keys: &[&str], prev: Option<&Table>) {
    for n in (1..=keys.len()).rev() {
        let (last, parents) = keys[..n].split_last().expect("n >= 1");
        let Some(parent) = table_at_mut(root, parents) else {
            return;
        };
        let removable = match parent.get(last) {
            Some(Item::Table(t)) => {
                t.is_empty() && prev.map_or(t.is_implicit(), |p| !has_key(p, &keys[..n]))
            }
            Some(Item::Value(Value::InlineTable(t))) => {
                t.is_empty() && prev.is_some_and(|p| !has_key(p, &keys[..n]))
            }
            _ => false,
        };
        if !removable {
            return;
        }
        parent.remove(last);
    }
}

/// Put the value at `parents.key` back to what `prev` had there, or remove it if `prev` had none.
pub fn restore_value(root: &mut Table, parents: &[&str], key: &str, prev: &Table) {
    let old = table_at(prev, parents)
        .and_then(|t| t.get(key))
        .and_then(Item::as_value);
    match (old, table_at_mut(root, parents)) {
        (Some(v), Some(t)) => set_value(t, key, v.clone()),
        (Some(v), None) => {
            if let Ok(t) = table_at_create(root, parents, Path::new("")) {
                set_value(t, key, v.clone());
            }
        }
        (None, Some(t)) => {
            t.remove(key);
        }
        (None, None) => {}
    }
}

/// Value of a string key in a table-like item.
pub fn str_at<'t>(root: &'t Table, parents: &[&str], key: &str) -> Option<&'t str> {
    table_at(root, parents)?.get(key)?.as_str()
}

/// The entry `name` of table-like `parent` as a mutable table-like (table or inline table).
pub fn entry_table_like<'t>(
    parent: &'t mut Table,
    name: &str,
) -> Option<&'t mut dyn toml_edit::TableLike> {
    parent.get_mut(name)?.as_table_like_mut()
}

/// Set `options.<key>` of a runtime entry, creating the `options` table when missing.
pub fn options_table<'t>(
    entry: &'t mut dyn toml_edit::TableLike,
    path: &Path,
    what: &str,
) -> Result<&'t mut dyn toml_edit::TableLike, Error> {
    if entry.get("options").is_none() {
        entry.insert("options", Item::Table(Table::new()));
    }
    entry
        .get_mut("options")
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| Error::NotATable {
            path: path.to_path_buf(),
            key: format!("{what}.options"),
        })
}

impl Engine {
    /// Where this engine's config registers `runtime`, read from `src`.
    pub fn status(self, src: Source<'_>, runtime: &str) -> Result<Registration, String> {
        self.api().status(src, runtime).map_err(|e| e.to_string())
    }

    /// The engine's own cgroup driver when its config does not say: CRI-O defaults to
    /// systemd; containerd's runc to cgroupfs; docker to systemd on cgroup v2 only.
    pub fn default_systemd(self, v2: bool) -> bool {
        self.api().default_systemd(v2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_cases() {
        type Status = fn(Source<'_>, &str) -> Result<Registration, Error>;
        let reg = |path: Option<&str>, is_default, systemd_cgroup| Registration {
            runtime_path: path.map(str::to_string),
            is_default,
            systemd_cgroup,
        };
        // (case, engine's status fn, config text, want)
        let cases: &[(&str, Status, &str, Registration)] = &[
            ("containerd v2 default", containerd::status,
             "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"nvidia\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\nBinaryName = \"/usr/bin/nvidia-container-runtime\"\nSystemdCgroup = true\n",
             reg(Some("/usr/bin/nvidia-container-runtime"), true, Some(true))),
            ("containerd v3 registered", containerd::status,
             "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.nvidia.options]\nBinaryName = \"/x/nvidia-container-runtime\"\n",
             reg(Some("/x/nvidia-container-runtime"), false, None)),
            ("containerd without it", containerd::status,
             "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n",
             reg(None, false, None)),
            ("docker systemd", docker::status,
             "{\"runtimes\": {\"nvidia\": {\"path\": \"nvidia-container-runtime\"}}, \"exec-opts\": [\"native.cgroupdriver=systemd\"]}",
             reg(Some("nvidia-container-runtime"), false, Some(true))),
            ("docker empty", docker::status, "", reg(None, false, None)),
            ("crio default", crio::status,
             "[crio.runtime]\ndefault_runtime = \"nvidia\"\ncgroup_manager = \"cgroupfs\"\n[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/bin/nvidia-container-runtime\"\n",
             reg(Some("/usr/bin/nvidia-container-runtime"), true, Some(false))),
        ];
        for (name, status, text, want) in cases {
            let src = Source {
                path: Path::new("/etc/x"),
                text,
            };
            assert_eq!(&status(src, "nvidia").unwrap(), want, "{name}");
        }
    }

    #[test]
    fn api_describes_its_engine() {
        for e in [Engine::Containerd, Engine::Docker, Engine::Crio] {
            let api = e.api();
            assert_eq!(api.engine(), e, "{}", api.name());
            assert_eq!(api.uses_drop_in(), api.default_drop_in().is_some());
            assert_eq!(api.dump_binary().is_some(), api.dump_subcommand().is_some());
            assert!(!api.imports_drop_in() || api.uses_drop_in());
        }
    }

    #[test]
    fn merge_cases() {
        // (case, documents in order, key path to read, want)
        let cases: &[(&str, &[&str], &[&str], Option<&str>)] = &[
            (
                "later value wins",
                &["[a]\nx = \"1\"\n", "[a]\nx = \"2\"\n"],
                &["a", "x"],
                Some("2"),
            ),
            (
                "tables merge key by key",
                &["[a]\nx = \"1\"\n", "[a]\ny = \"2\"\n"],
                &["a", "x"],
                Some("1"),
            ),
            (
                "new subtable",
                &["[a]\n", "[a.b]\nz = \"3\"\n"],
                &["a", "b", "z"],
                Some("3"),
            ),
            (
                "empty main",
                &["", "[crio.runtime]\ndefault_runtime = \"nvidia\"\n"],
                &["crio", "runtime", "default_runtime"],
                Some("nvidia"),
            ),
        ];
        for (name, docs, keys, want) in cases {
            let sources: Vec<Source<'_>> = docs
                .iter()
                .map(|text| Source {
                    path: Path::new("/etc/x.toml"),
                    text,
                })
                .collect();
            let merged: DocumentMut = merge_toml(&sources).unwrap().parse().unwrap();
            let (last, parents) = keys.split_last().unwrap();
            assert_eq!(
                str_at(merged.as_table(), parents, last),
                *want,
                "case {name}"
            );
        }
        let bad = [
            Source {
                path: Path::new("/etc/main.toml"),
                text: "",
            },
            Source {
                path: Path::new("/etc/d/99.toml"),
                text: "[a\n",
            },
        ];
        let e = merge_toml(&bad).unwrap_err().to_string();
        assert!(e.starts_with("/etc/d/99.toml:1: invalid TOML"), "{e}");
    }

    #[test]
    fn line_of_offsets() {
        let cases = [
            ("start", "a\nb\nc", 0, 1),
            ("second line", "a\nb\nc", 2, 2),
            ("past end", "a\n", 9, 2),
        ];
        for (name, text, off, want) in cases {
            assert_eq!(line_of(text, off), want, "case {name}");
        }
    }

    #[test]
    fn templates_rejected() {
        let cases = [
            (
                "braces",
                "config.toml",
                "version = 2\n{{ template \"base\" . }}\n",
                true,
            ),
            ("tmpl name", "config.toml.tmpl", "version = 2\n", true),
            ("plain", "config.toml", "version = 2\n", false),
        ];
        for (name, path, text, want_err) in cases {
            let src = Source {
                path: Path::new(path),
                text,
            };
            assert_eq!(reject_template(&src).is_err(), want_err, "case {name}");
        }
    }

    #[test]
    fn parse_error_names_file_and_line() {
        let src = Source {
            path: Path::new("/x/config.toml"),
            text: "a = 1\nb = = 2\n",
        };
        let msg = parse_toml(&src).unwrap_err().to_string();
        assert!(msg.starts_with("/x/config.toml:2: invalid TOML"), "{msg}");
    }
}
