//! containerd `config.toml`: add / remove the NVIDIA runtime entry for config versions 1, 2 and 3.
//!
//! Owns the mapping of config version → CRI plugin table (see COMPAT.md), the choice of the
//! runtime entry to copy, drop-in generation and the `imports` line. Pure: no I/O.
//!
//! Upstream behaviour mirrored: the new entry is a copy of the current default runtime's whole
//! table (`default_runtime_name`, else `runc`, else `crun`) with `options.BinaryName` (version 1
//! also `options.Runtime`) pointing at our runtime and `runtime_type = "io.containerd.runc.v2"`
//! when empty. An empty document (missing file) becomes a version 2 config.
//!
//! Drop-ins (versions 2 and 3): the main file only gains `imports = ["<drop-in dir>/*.toml"]`;
//! what the drop-in holds follows containerd's merge rule ([`MergeRule`], by its release):
//! before 2.0 an imported file replaces a whole `plugins."<name>"` table, so the drop-in carries
//! the complete CRI plugin table of the base config (the main file merged with its other
//! imports) with our edits; from 2.0 tables merge key by key and the drop-in holds only our keys
//! ([`configure_with`]). The copy is a snapshot: later edits to the CRI table elsewhere are
//! shadowed ([`shadowed`], doctor's check) until the drop-in is derived again ([`refresh`], with
//! the settings read back from it by [`recover`]). Version 1 configs are edited in place.
//!
//! A `runtimes` table with any entry replaces containerd 1.x's built-in `runc`, so when the
//! table configure writes into has none (Debian's stock config, a missing file), the built-in
//! `runc` is written first (`seed_builtin`). [`effective`] and [`check_default_runtime`] model
//! how containerd reads a config with its imports, for the check after a write and for doctor.

use std::path::Path;

use toml_edit::{value, Array, DocumentMut, Item, Table, Value};

mod merge;

pub use merge::{drop_in_of, key_path, shadowed, MergeRule, Release, Shadow, PER_KEY_SINCE};

use super::{
    entry_table_like, has_key, options_table, parse_toml, prepare_copy, prune_empty, restore_value,
    set_value, str_at, table_at, table_at_create, table_at_mut, Change, Error, Options, Outcome,
    Source,
};

/// `runtime_type` written when the copied entry has none.
pub const RUNC_V2: &str = "io.containerd.runc.v2";

/// A containerd config version and where its CRI keys live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
    V3,
}

impl Version {
    fn number(self) -> i64 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
            Version::V3 => 3,
        }
    }

    /// Key path of the CRI plugin table holding `containerd.runtimes` and `enable_cdi`.
    fn cri(self) -> [&'static str; 2] {
        match self {
            Version::V1 => ["plugins", "cri"],
            Version::V2 => ["plugins", "io.containerd.grpc.v1.cri"],
            Version::V3 => ["plugins", "io.containerd.cri.v1.runtime"],
        }
    }

    fn containerd(self) -> [&'static str; 3] {
        let [a, b] = self.cri();
        [a, b, "containerd"]
    }

    fn runtimes(self) -> [&'static str; 4] {
        let [a, b] = self.cri();
        [a, b, "containerd", "runtimes"]
    }
}

/// The version a document declares (`version` key; absent → 1, or 2 for an empty document).
pub fn version(doc: &DocumentMut, path: &Path) -> Result<Version, Error> {
    match doc.get("version") {
        None if doc.is_empty() => Ok(Version::V2),
        None => Ok(Version::V1),
        Some(item) => match item.as_integer() {
            Some(1) => Ok(Version::V1),
            Some(2) => Ok(Version::V2),
            Some(3) => Ok(Version::V3),
            _ => Err(Error::UnknownVersion {
                path: path.to_path_buf(),
                version: item.to_string().trim().to_string(),
            }),
        },
    }
}

/// The version `src` declares (see [`version`]); an error names the file (and line).
pub fn version_of(src: Source<'_>) -> Result<Version, Error> {
    version(&parse_toml(&src)?, src.path)
}

/// Add (or refresh) the runtime entry in `doc`, in place.
fn configure_doc(
    doc: &mut DocumentMut,
    v: Version,
    path: &Path,
    opts: &Options,
) -> Result<(), Error> {
    if doc.is_empty() {
        doc.insert("version", value(v.number()));
    }
    let name = opts.runtime_name.as_str();
    let root = doc.as_table_mut();
    let default = str_at(root, &v.containerd(), "default_runtime_name").map(str::to_string);

    let runtimes = table_at_create(root, &v.runtimes(), path)?;
    seed_builtin(runtimes, v, name);
    if !runtimes.contains_key(name) {
        let template = [default.as_deref(), Some("runc"), Some("crun")]
            .into_iter()
            .flatten()
            .filter(|t| *t != name)
            .find_map(|t| runtimes.get(t).filter(|i| i.is_table_like()).cloned());
        let mut entry = template.unwrap_or_else(|| Item::Table(Table::new()));
        prepare_copy(&mut entry);
        runtimes.insert(name, entry);
    }
    let what = format!("{}.{name}", v.runtimes().join("."));
    let entry = entry_table_like(runtimes, name).ok_or_else(|| Error::NotATable {
        path: path.to_path_buf(),
        key: what.clone(),
    })?;
    if entry
        .get("runtime_type")
        .and_then(Item::as_str)
        .unwrap_or("")
        .is_empty()
    {
        set_value(entry, "runtime_type", Value::from(RUNC_V2));
    }
    if opts.cdi_enabled {
        // containerd 1.6 has no CDI of its own: a device plugin's `cdi.k8s.io/*` annotations
        // reach the runtime (which applies those devices) only if the entry passes them on.
        pass_annotations(entry, CDI_ANNOTATIONS, path, &what)?;
    }
    let options = options_table(entry, path, &what)?;
    set_value(
        options,
        "BinaryName",
        Value::from(opts.runtime_path.as_str()),
    );
    if v == Version::V1 {
        set_value(options, "Runtime", Value::from(opts.runtime_path.as_str()));
    }

    // Never removed on configure (upstream's rule): a re-run keeps an earlier default.
    if opts.set_as_default {
        let t = table_at_create(root, &v.containerd(), path)?;
        set_value(t, "default_runtime_name", Value::from(name));
    }
    if opts.cdi_enabled {
        let t = table_at_create(root, &v.cri(), path)?;
        set_value(t, "enable_cdi", Value::from(true));
    }
    Ok(())
}

/// containerd's built-in `runc` entry as `containerd config default` prints it: 1.6 for versions
/// 1 and 2 (`pkg/cri/config/config_unix.go`), 2.0 for version 3
/// (`internal/cri/config/config_unix.go`).
fn builtin_runc(v: Version) -> Table {
    let text = match v {
        Version::V1 | Version::V2 => {
            "runtime_type = \"io.containerd.runc.v2\"\n\n[options]\nBinaryName = \"\"\n\
             CriuImagePath = \"\"\nCriuPath = \"\"\nCriuWorkPath = \"\"\nIoGid = 0\nIoUid = 0\n\
             NoNewKeyring = false\nNoPivotRoot = false\nRoot = \"\"\nShimCgroup = \"\"\n\
             SystemdCgroup = false\n"
        }
        Version::V3 => {
            "runtime_type = \"io.containerd.runc.v2\"\nsandboxer = \"podsandbox\"\n\n[options]\n\
             BinaryName = \"\"\nCriuImagePath = \"\"\nCriuWorkPath = \"\"\nIoGid = 0\nIoUid = 0\n\
             NoNewKeyring = false\nRoot = \"\"\nShimCgroup = \"\"\n"
        }
    };
    let doc: DocumentMut = text.parse().expect("built-in runc entry is valid TOML");
    let mut t = doc.as_table().clone();
    t.set_implicit(false);
    t
}

/// The name of containerd's built-in runtime (and default `default_runtime_name`).
const BUILTIN: &str = "runc";

/// A `runtimes` table with no entry makes containerd use its built-in `runc`; one with any entry
/// replaces the built-in map in containerd 1.x (see COMPAT.md). Before adding our entry to such a
/// table, write the built-in `runc` into it so the default runtime stays (unless our entry is
/// itself named `runc`).
fn seed_builtin(runtimes: &mut Table, v: Version, name: &str) {
    let has_entries = runtimes.iter().any(|(_, i)| i.is_table_like());
    if has_entries || name == BUILTIN {
        return;
    }
    let mut runc = Item::Table(builtin_runc(v));
    prepare_copy(&mut runc);
    runtimes.insert(BUILTIN, runc);
}

/// Is `item` the built-in runc entry of `v`, whatever its formatting?
fn is_builtin_runc(item: &Item, v: Version) -> bool {
    let builtin = Item::Table(builtin_runc(v));
    same_tree(item, &builtin)
}

/// Equal keys and values, ignoring formatting, comments and table-vs-inline layout.
fn same_tree(a: &Item, b: &Item) -> bool {
    match (a.as_table_like(), b.as_table_like()) {
        (Some(x), Some(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, i)| y.get(k).is_some_and(|j| same_tree(i, j)))
        }
        (None, None) => match (a.as_value(), b.as_value()) {
            (Some(x), Some(y)) => {
                let (mut x, mut y) = (x.clone(), y.clone());
                x.decor_mut().clear();
                y.decor_mut().clear();
                x.to_string() == y.to_string()
            }
            _ => false,
        },
        _ => false,
    }
}

/// The annotations a CDI-enabled runtime entry passes on (`container_annotations`).
const CDI_ANNOTATIONS: &str = "cdi.k8s.io/*";

/// Adds `pattern` to the entry's `container_annotations` unless it is there.
fn pass_annotations(
    entry: &mut dyn toml_edit::TableLike,
    pattern: &str,
    path: &Path,
    what: &str,
) -> Result<(), Error> {
    let item = entry
        .entry("container_annotations")
        .or_insert(value(Array::new()));
    let arr = item.as_array_mut().ok_or_else(|| Error::NotATable {
        path: path.to_path_buf(),
        key: format!("{what}.container_annotations (expected an array)"),
    })?;
    if !arr.iter().any(|v| v.as_str() == Some(pattern)) {
        arr.push(pattern);
    }
    Ok(())
}

/// How `src` (a config file, or `containerd config dump` output) registers runtime `name`.
pub fn status(src: Source<'_>, name: &str) -> Result<super::Registration, Error> {
    let doc = parse_toml(&src)?;
    let v = version(&doc, src.path)?;
    let root = doc.as_table();
    let entry = table_at(root, &v.runtimes()).and_then(|t| t.get(name)?.as_table_like());
    let option = |key: &str| entry?.get("options")?.as_table_like()?.get(key).cloned();
    let runtime_path = option("BinaryName")
        .or_else(|| option("Runtime"))
        .and_then(|i| i.as_str().map(str::to_string))
        .or_else(|| entry.map(|_| "runc".to_string()));
    Ok(super::Registration {
        is_default: str_at(root, &v.containerd(), "default_runtime_name") == Some(name),
        systemd_cgroup: option("SystemdCgroup").and_then(|i| i.as_bool()),
        runtime_path,
    })
}

/// The `imports` entries of `src`, as written (globs; relative ones are relative to the file's
/// directory). Used by `nvidia-ctk doctor` to read a config with its drop-ins when there is no
/// `containerd` binary to dump it.
pub fn imports(src: Source<'_>) -> Result<Vec<String>, Error> {
    let doc = parse_toml(&src)?;
    Ok(doc
        .get("imports")
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default())
}

/// containerd's effective config of `sources` (the main file, then the files it imports, in the
/// order containerd loads them), merged by `rule` (see [`MergeRule`] and COMPAT.md, "containerd:
/// how imports merge"): arrays are appended, other values replaced by the later file;
/// `proxy_plugins`, `stream_processors` and `timeouts` entries are replaced whole; a
/// `plugins."<id>"` table is replaced whole (containerd before 2.0) or merged key by key
/// (2.0 and later); other tables are merged key by key. Each source is parsed on its own, so an
/// error names its file. Used where no `containerd` binary can dump the config, and to derive
/// the drop-in from the other files.
pub fn effective(sources: &[Source<'_>], rule: MergeRule) -> Result<String, Error> {
    Ok(merge::merged(sources, rule)?.to_string())
}

/// The runtimes containerd's CRI plugin would load from `src` (an effective config: a
/// `containerd config dump`, or [`effective`]'s output) and its default runtime's name.
///
/// A `runtimes` table with entries replaces the built-in `runc` in containerd 1.x (versions 1
/// and 2: go-toml v1 decodes a map into a new one); containerd 2.x (version 3) decodes over the
/// built-in map, so `runc` stays.
pub fn runtimes(src: Source<'_>) -> Result<(String, Vec<String>), Error> {
    runtimes_under(src, MergeRule::WholePlugin)
}

/// [`runtimes`] as the containerd of `rule` loads them: 2.x ([`MergeRule::PerKey`]) keeps its
/// built-in `runc` whatever the file's version (it decodes a version 2 file over the built-in
/// map too).
pub fn runtimes_under(src: Source<'_>, rule: MergeRule) -> Result<(String, Vec<String>), Error> {
    let doc = parse_toml(&src)?;
    let v = version(&doc, src.path)?;
    let root = doc.as_table();
    let mut default = str_at(root, &v.containerd(), "default_runtime_name")
        .unwrap_or(BUILTIN)
        .to_string();
    let mut names: Vec<String> = table_at(root, &v.runtimes())
        .map(|t| {
            t.iter()
                .filter(|(_, i)| i.is_table_like())
                .map(|(k, _)| k.to_string())
                .collect()
        })
        .unwrap_or_default();
    let keeps_builtin = v == Version::V3 || rule == MergeRule::PerKey;
    if (names.is_empty() || keeps_builtin) && !names.iter().any(|n| n == BUILTIN) {
        names.insert(0, BUILTIN.to_string());
    }
    // containerd 1.x: the deprecated `default_runtime` table, when it names a type, becomes the
    // runtime `default` and the default (`pkg/cri/config/config.go`, ValidatePluginConfig).
    let [a, b, c] = v.containerd();
    if str_at(root, &[a, b, c, "default_runtime"], "runtime_type").is_some_and(|t| !t.is_empty()) {
        default = "default".to_string();
        names.push(default.clone());
    }
    Ok((default, names))
}

/// Error unless the default runtime of `src` (an effective config, see [`runtimes`]) is one of
/// the runtimes containerd would load: without it the CRI plugin (what the kubelet talks to)
/// does not load.
pub fn check_default_runtime(src: Source<'_>) -> Result<(), Error> {
    check_default_runtime_under(src, MergeRule::WholePlugin)
}

/// [`check_default_runtime`] as the containerd of `rule` loads the runtimes
/// ([`runtimes_under`]).
pub fn check_default_runtime_under(src: Source<'_>, rule: MergeRule) -> Result<(), Error> {
    let (default, names) = runtimes_under(src, rule)?;
    if names.contains(&default) {
        return Ok(());
    }
    let doc = parse_toml(&src)?;
    let v = version(&doc, src.path)?;
    Err(Error::DefaultRuntimeMissing {
        path: src.path.to_path_buf(),
        default,
        have: names.join(", "),
        table: v.runtimes().join("."),
    })
}

/// The glob written into `imports` for a drop-in file.
pub fn import_glob(drop_in: &Path) -> String {
    let dir = drop_in.parent().unwrap_or(Path::new("/"));
    format!("{}/*.toml", dir.display())
}

/// Configure containerd.
///
/// `main` is the config file; `base` is the document the runtime entry is derived from (the same
/// file, or `containerd config dump` output). With `drop_in` (versions 2/3) the edits go to that
/// file and `main` only gains the `imports` glob; otherwise the edited `base` replaces `main`.
/// The drop-in holds the whole CRI table (containerd before 2.0); see [`configure_with`].
pub fn configure(
    main: Source<'_>,
    base: Source<'_>,
    drop_in: Option<&Path>,
    opts: &Options,
) -> Result<Outcome, Error> {
    configure_with(main, base, drop_in, None, opts, MergeRule::WholePlugin)
}

/// What an earlier configure left in the drop-in, read back from it (see [`recover`]).
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    /// The runtime entry's `options.BinaryName` (version 1: `options.Runtime`), when not empty.
    pub runtime_path: Option<String>,
    /// The drop-in makes the runtime containerd's default.
    pub set_as_default: bool,
    /// The entry passes CDI annotations on and the drop-in turns `enable_cdi` on (what
    /// `--cdi.enabled` writes).
    pub cdi_enabled: bool,
    /// Other runtimes of the family (`<name>-*`: `nvidia-cdi`, `nvidia-legacy`, which
    /// `nvidia-ctk-installer` writes next to `nvidia`), name and entry.
    siblings: Vec<(String, Item)>,
}

impl Recovered {
    /// `opts` with what the drop-in already sets: a default or CDI switch an earlier run wrote
    /// stays (upstream's rule for a re-run: it never removes a default), as it does in a config
    /// edited in place.
    pub fn sticky(&self, opts: &Options) -> Options {
        Options {
            set_as_default: opts.set_as_default || self.set_as_default,
            cdi_enabled: opts.cdi_enabled || self.cdi_enabled,
            ..opts.clone()
        }
    }

    /// The options a refresh writes with: the ones configure wrote, read back; `opts` gives the
    /// runtime's name and the rest (the runtime path when the drop-in names none).
    pub fn options(&self, opts: &Options) -> Options {
        let mut o = self.sticky(opts);
        if let Some(p) = &self.runtime_path {
            o.runtime_path = p.clone();
        }
        o
    }
}

/// Read back from `drop_in` (the current drop-in) what configure wrote there for runtime
/// `name`; `None` when it registers no such runtime (not ours, or emptied by hand).
pub fn recover(drop_in: Source<'_>, name: &str) -> Result<Option<Recovered>, Error> {
    let doc = parse_toml(&drop_in)?;
    let v = version(&doc, drop_in.path)?;
    let root = doc.as_table();
    let Some(runtimes) = table_at(root, &v.runtimes()) else {
        return Ok(None);
    };
    let Some(entry) = runtimes.get(name).and_then(Item::as_table_like) else {
        return Ok(None);
    };
    let option = |key: &str| {
        entry
            .get("options")?
            .as_table_like()?
            .get(key)?
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let annotations = entry
        .get("container_annotations")
        .and_then(Item::as_array)
        .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(CDI_ANNOTATIONS)));
    let cdi_switch = table_at(root, &v.cri())
        .and_then(|t| t.get("enable_cdi"))
        .and_then(Item::as_bool)
        == Some(true);
    let prefix = format!("{name}-");
    Ok(Some(Recovered {
        runtime_path: option("BinaryName").or_else(|| option("Runtime")),
        set_as_default: str_at(root, &v.containerd(), "default_runtime_name") == Some(name),
        cdi_enabled: annotations && cdi_switch,
        siblings: runtimes
            .iter()
            .filter(|(k, i)| k.starts_with(&prefix) && i.is_table_like())
            .map(|(k, i)| (k.to_string(), i.clone()))
            .collect(),
    }))
}

/// Configure containerd, as [`configure`], with the drop-in written for `rule` and what the
/// current drop-in (`previous`, when there is one) already sets.
///
/// * [`MergeRule::WholePlugin`] (containerd before 2.0): the drop-in holds the whole CRI table
///   of `base` with our edits (an import replaces the table, so it must carry the rest).
/// * [`MergeRule::PerKey`] (2.0 and later): the drop-in holds only our keys (the runtime entry,
///   and `default_runtime_name` / `enable_cdi` when asked for): a copy of the rest would
///   override later edits of those keys elsewhere.
///
/// `previous` keeps an earlier `--set-as-default` / `--cdi.enabled` ([`Recovered::sticky`]) and
/// the runtimes `<name>-*` it registers that `base` lacks. `base` must not include the current
/// drop-in (its copy would hold the values this re-derives).
pub fn configure_with(
    main: Source<'_>,
    base: Source<'_>,
    drop_in: Option<&Path>,
    previous: Option<Source<'_>>,
    opts: &Options,
    rule: MergeRule,
) -> Result<Outcome, Error> {
    let mut out = Outcome::default();
    let mut m = parse_toml(&main)?;
    let main_version = version(&m, main.path)?;
    let mut doc = parse_toml(&base)?;
    let v = version(&doc, base.path)?;

    // A version 1 main file cannot import a drop-in: containerd merges the drop-in's version over
    // it and then rejects the v1 plugin keys (seen with containerd 1.6).
    let drop_in = match (drop_in, main_version) {
        (Some(_), Version::V1) => {
            out.notes.push(format!(
                "{}: version 1 config: drop-in files are not used, editing in place",
                main.path.display()
            ));
            None
        }
        (d, _) => d,
    };
    let Some(drop_in) = drop_in else {
        configure_doc(&mut doc, v, base.path, opts)?;
        out.changes.push(Change {
            path: main.path.to_path_buf(),
            content: Some(doc.to_string()),
        });
        return Ok(out);
    };

    let recovered = match previous {
        Some(p) => recover(p, &opts.runtime_name)?.unwrap_or_default(),
        None => Recovered::default(),
    };
    let opts = &recovered.sticky(opts);
    let name = opts.runtime_name.as_str();
    if rule == MergeRule::PerKey {
        // containerd 2.x keeps its built-in runc next to configured runtimes: only the copy our
        // entry starts from needs it, and then as 2.x prints it.
        let runtimes = table_at_create(doc.as_table_mut(), &v.runtimes(), base.path)?;
        seed_builtin(runtimes, Version::V3, name);
    }
    configure_doc(&mut doc, v, base.path, opts)?;
    let runtimes = table_at_create(doc.as_table_mut(), &v.runtimes(), base.path)?;
    for (k, item) in &recovered.siblings {
        if !runtimes.contains_key(k) {
            runtimes.insert(k, item.clone());
        }
    }

    let [plugins, cri] = v.cri();
    let mut d = DocumentMut::new();
    d.insert("version", value(v.number()));
    match rule {
        MergeRule::WholePlugin => {
            let cri_table = doc[plugins][cri].clone();
            table_at_create(d.as_table_mut(), &[plugins], drop_in)?.insert(cri, cri_table);
        }
        MergeRule::PerKey => {
            let root = d.as_table_mut();
            if opts.cdi_enabled {
                let t = table_at_create(root, &v.cri(), drop_in)?;
                set_value(t, "enable_cdi", Value::from(true));
            }
            if opts.set_as_default {
                let t = table_at_create(root, &v.containerd(), drop_in)?;
                set_value(t, "default_runtime_name", Value::from(name));
            }
            let from = table_at(doc.as_table(), &v.runtimes()).expect("configure_doc made it");
            let ours: Vec<(String, Item)> = from
                .iter()
                .filter(|(k, _)| *k == name || recovered.siblings.iter().any(|(s, _)| s == k))
                .map(|(k, i)| (k.to_string(), i.clone()))
                .collect();
            let to = table_at_create(root, &v.runtimes(), drop_in)?;
            for (k, mut item) in ours {
                prepare_copy(&mut item);
                to.insert(&k, item);
            }
        }
    }
    out.changes.push(Change {
        path: drop_in.to_path_buf(),
        content: Some(d.to_string()),
    });

    // The main file: imports the drop-in directory once.
    if m.is_empty() {
        m.insert("version", value(v.number()));
    }
    let seen_at = opts.drop_in_host_path.as_deref().unwrap_or(drop_in);
    let glob = import_glob(seen_at);
    let drop_in_str = seen_at.display().to_string();
    let imports = m.entry("imports").or_insert_with(|| value(Array::new()));
    let arr = imports.as_array_mut().ok_or_else(|| Error::NotATable {
        path: main.path.to_path_buf(),
        key: "imports (expected an array)".into(),
    })?;
    if !arr
        .iter()
        .any(|i| i.as_str().is_some_and(|s| s == glob || s == drop_in_str))
    {
        arr.push(glob.as_str());
    }
    out.changes.push(Change {
        path: main.path.to_path_buf(),
        content: Some(m.to_string()),
    });
    Ok(out)
}

/// Re-derive the drop-in `previous` (at `drop_in`) from `base` (the main file merged with the
/// other files it imports, by `rule`) with the options configure wrote it with, read back from
/// it ([`recover`]; `opts` names the runtime). The one change is the drop-in (the main file
/// already imports it); `None` when the drop-in registers no runtime `opts.runtime_name`.
pub fn refresh(
    main: Source<'_>,
    base: Source<'_>,
    drop_in: &Path,
    previous: Source<'_>,
    opts: &Options,
    rule: MergeRule,
) -> Result<Option<Change>, Error> {
    let Some(recovered) = recover(previous, &opts.runtime_name)? else {
        return Ok(None);
    };
    let opts = recovered.options(opts);
    let out = configure_with(main, base, Some(drop_in), Some(previous), &opts, rule)?;
    Ok(out.changes.into_iter().find(|c| c.path == drop_in))
}

/// The directory an imported file must stay in, for a config at `config`: the nearest
/// ancestor directory named `etc` (`/etc` for `/etc/containerd/config.toml`, k3s's
/// `.../agent/etc`), else the config's own directory.
pub fn import_root(config: &Path) -> &Path {
    let dir = config.parent().unwrap_or(Path::new("/"));
    dir.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "etc"))
        .unwrap_or(dir)
}

/// Undo [`configure`]; see the module doc of `runtime_config` for the rule. `previous` is the
/// backup of `main` (its text) if there is one.
pub fn unconfigure(
    main: Source<'_>,
    previous: Option<&str>,
    drop_in: Option<&Path>,
    opts: &Options,
) -> Result<Outcome, Error> {
    unconfigure_with(main, previous, drop_in, opts, false)
}

/// [`unconfigure`]; with `keep_glob` the `imports` glob configure writes stays: the binary asks
/// for that when the drop-in directory holds other files the glob matches (the node's own
/// drop-ins need it), or when the main file has no backup (configure, which adds the glob,
/// keeps one whenever it writes the file: without one the glob was there before).
pub fn unconfigure_with(
    main: Source<'_>,
    previous: Option<&str>,
    drop_in: Option<&Path>,
    opts: &Options,
    keep_glob: bool,
) -> Result<Outcome, Error> {
    let mut out = Outcome::default();
    let mut doc = parse_toml(&main)?;
    let v = version(&doc, main.path)?;
    let name = opts.runtime_name.as_str();
    let prev = previous
        .and_then(|p| p.parse::<DocumentMut>().ok())
        .filter(|p| version(p, main.path).ok() == Some(v))
        .filter(|p| !has_key(p.as_table(), &[&v.runtimes()[..], &[name]].concat()));
    let prev = prev.as_ref().map(DocumentMut::as_table);
    let prev_has_runc = prev.is_some_and(|p| has_key(p, &[&v.runtimes()[..], &[BUILTIN]].concat()));
    let root = doc.as_table_mut();

    if let Some(rt) = table_at_mut(root, &v.runtimes()) {
        rt.remove(name);
        // The built-in runc that configure wrote next to ours (see `seed_builtin`): alone, it
        // means what no entry means, so it goes with ours.
        let alone = rt.len() == 1 && rt.get(BUILTIN).is_some_and(|i| is_builtin_runc(i, v));
        if alone && name != BUILTIN && !prev_has_runc {
            rt.remove(BUILTIN);
        }
    }
    prune_empty(root, &v.runtimes(), prev);
    if str_at(root, &v.containerd(), "default_runtime_name") == Some(name) {
        match prev {
            Some(p) => restore_value(root, &v.containerd(), "default_runtime_name", p),
            None => {
                table_at_mut(root, &v.containerd()).map(|t| t.remove("default_runtime_name"));
            }
        }
        prune_empty(root, &v.containerd(), prev);
    }
    if let Some(p) = prev {
        restore_value(root, &v.cri(), "enable_cdi", p);
        prune_empty(root, &v.cri(), Some(p));
    }

    if let Some(drop_in) = drop_in {
        let glob = import_glob(drop_in);
        let drop_in_str = drop_in.display().to_string();
        let mut emptied = false;
        let imports = doc
            .get_mut("imports")
            .and_then(Item::as_array_mut)
            .filter(|_| !keep_glob);
        if let Some(arr) = imports {
            let before = arr.len();
            arr.retain(|i| !i.as_str().is_some_and(|s| s == glob || s == drop_in_str));
            emptied = before != arr.len() && arr.is_empty();
        }
        // An `imports` left empty goes unless the backup had one (without a backup it held only
        // ours: nothing else is lost).
        if emptied && prev.is_none_or(|p| !p.contains_key("imports")) {
            doc.remove("imports");
        }
        out.changes.push(Change {
            path: drop_in.to_path_buf(),
            content: None,
        });
    }
    out.changes.push(Change {
        path: main.path.to_path_buf(),
        content: Some(doc.to_string()),
    });
    Ok(out)
}

/// containerd, for [`crate::Engine::api`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Containerd;

impl crate::Interface for Containerd {
    fn engine(&self) -> crate::Engine {
        crate::Engine::Containerd
    }
    fn name(&self) -> &'static str {
        "containerd"
    }
    fn default_config(&self) -> &'static str {
        "/etc/containerd/config.toml"
    }
    fn default_drop_in(&self) -> Option<&'static str> {
        Some("/etc/containerd/conf.d/99-nvidia.toml")
    }
    fn imports_drop_in(&self) -> bool {
        true
    }
    fn default_runtime_path(&self) -> &'static str {
        crate::DEFAULT_RUNTIME_PATH
    }
    fn default_socket(&self) -> &'static str {
        "/run/containerd/containerd.sock"
    }
    fn default_restart(&self) -> crate::Restart {
        crate::Restart::Signal
    }
    fn restart_hint(&self, _rootless: bool) -> &'static str {
        "restart containerd to apply: systemctl restart containerd"
    }
    fn default_systemd(&self, _v2: bool) -> bool {
        false
    }
    fn dump_binary(&self) -> Option<&'static str> {
        Some("containerd")
    }
    fn dump_subcommand(&self) -> Option<&'static str> {
        Some("config dump")
    }
    /// `[--config FILE] config dump` (the file only when it exists).
    fn dump_args(&self, config: &Path, config_exists: bool) -> Option<Vec<std::path::PathBuf>> {
        let mut args: Vec<std::path::PathBuf> = Vec::new();
        if config_exists {
            args.extend(["--config".into(), config.to_path_buf()]);
        }
        args.extend(["config".into(), "dump".into()]);
        Some(args)
    }
    fn configure(
        &self,
        main: Source<'_>,
        base: Source<'_>,
        drop_in: Option<&Path>,
        opts: &Options,
    ) -> Result<Outcome, Error> {
        configure(main, base, drop_in, opts)
    }
    fn unconfigure(
        &self,
        main: Source<'_>,
        previous: Option<&str>,
        drop_in: Option<&Path>,
        opts: &Options,
    ) -> Result<Outcome, Error> {
        unconfigure(main, previous, drop_in, opts)
    }
    fn status(&self, src: Source<'_>, runtime: &str) -> Result<super::Registration, Error> {
        status(src, runtime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, opts: &Options) -> Result<String, Error> {
        let src = Source {
            path: Path::new("/etc/containerd/config.toml"),
            text,
        };
        let out = configure(src, src, None, opts)?;
        Ok(out.changes[0].content.clone().unwrap())
    }

    #[test]
    fn effective_follows_containerd_merge() {
        let cri = "[plugins.\"io.containerd.grpc.v1.cri\"";
        let cri3 = "[plugins.\"io.containerd.cri.v1.runtime\"";
        use MergeRule::{PerKey, WholePlugin};
        // (case, rule, files in load order, want (default, runtimes) of the effective config)
        let cases: &[(&str, MergeRule, &[String], (&str, &[&str]))] = &[
            (
                "no runtimes: the built-in runc",
                WholePlugin,
                &["version = 2\n".into()],
                ("runc", &["runc"]),
            ),
            (
                "v2, containerd 1.x: an import replaces the whole plugin table",
                WholePlugin,
                &[
                    format!("version = 2\n{cri}.containerd]\ndefault_runtime_name = \"kata\"\n{cri}.containerd.runtimes.kata]\n"),
                    format!("version = 2\n{cri}.containerd.runtimes.nvidia]\n"),
                ],
                ("runc", &["nvidia"]),
            ),
            (
                "v2, containerd 2.x: the import merges key by key",
                PerKey,
                &[
                    format!("version = 2\n{cri}.containerd]\ndefault_runtime_name = \"kata\"\n{cri}.containerd.runtimes.kata]\n"),
                    format!("version = 2\n{cri}.containerd.runtimes.nvidia]\n"),
                ],
                ("kata", &["kata", "nvidia"]),
            ),
            (
                "v2: other plugins' tables are kept",
                WholePlugin,
                &[
                    format!("version = 2\n{cri}.containerd.runtimes.runc]\n[plugins.x]\ny = 1\n"),
                    "version = 2\n[plugins.z]\n".into(),
                ],
                ("runc", &["runc"]),
            ),
            (
                "an empty default_runtime_name is no runtime",
                WholePlugin,
                &[format!("version = 2\n{cri}.containerd]\ndefault_runtime_name = \"\"\n")],
                ("", &["runc"]),
            ),
            (
                "the deprecated default_runtime table is the default",
                WholePlugin,
                &[format!("version = 2\n{cri}.containerd.default_runtime]\nruntime_type = \"io.containerd.runc.v2\"\n{cri}.containerd.runtimes.nvidia]\n")],
                ("default", &["nvidia", "default"]),
            ),
            (
                "v3, containerd 2.x: plugin tables merge and runc stays built in",
                PerKey,
                &[
                    format!("version = 3\n{cri3}.containerd]\ndefault_runtime_name = \"runc\"\n"),
                    format!("version = 3\n{cri3}.containerd.runtimes.nvidia]\n"),
                ],
                ("runc", &["runc", "nvidia"]),
            ),
        ];
        for (name, rule, files, (default, names)) in cases {
            let sources: Vec<Source<'_>> = files
                .iter()
                .map(|text| Source {
                    path: Path::new("/etc/containerd/x.toml"),
                    text,
                })
                .collect();
            let merged = effective(&sources, *rule).unwrap_or_else(|e| panic!("case {name}: {e}"));
            let src = Source {
                path: Path::new("merged"),
                text: &merged,
            };
            let (d, n) = runtimes(src).unwrap();
            let (mut got, mut want) = (n.clone(), names.to_vec());
            got.sort();
            want.sort();
            assert_eq!(
                (d.as_str(), got),
                (
                    *default,
                    want.iter().map(|s| s.to_string()).collect::<Vec<_>>()
                ),
                "case {name}:\n{merged}"
            );
            let ok = n.contains(&d);
            assert_eq!(check_default_runtime(src).is_ok(), ok, "case {name}");
        }
        let imports = effective(
            &[
                Source {
                    path: Path::new("a"),
                    text: "version = 2\nimports = [\"/a/*.toml\"]\n",
                },
                Source {
                    path: Path::new("b"),
                    text: "version = 2\nimports = [\"/b.toml\"]\n",
                },
            ],
            WholePlugin,
        )
        .unwrap();
        let doc: DocumentMut = imports.parse().unwrap();
        let got: Vec<&str> = doc["imports"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(got, ["/a/*.toml", "/b.toml"], "arrays append");
    }

    /// A derivation case: (name, rule, main file, other imports, current drop-in, options,
    /// refresh instead of configure, the drop-in must contain, must not contain).
    type Derive<'a> = (
        &'a str,
        MergeRule,
        String,
        Vec<String>,
        Option<String>,
        Options,
        bool,
        &'a [&'a str],
        &'a [&'a str],
    );

    /// The drop-in configure (or refresh) derives, by both merge rules; then, whatever the case:
    /// a second run over its own output changes nothing, and the result shadows nothing.
    #[test]
    fn drop_in_derivation() {
        use MergeRule::{PerKey, WholePlugin};
        let cri = "[plugins.\"io.containerd.grpc.v1.cri\"";
        let main = |sandbox: &str| {
            format!(
                "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n{cri}]\n\
                 sandbox_image = \"{sandbox}\"\n{cri}.containerd.runtimes.runc]\n\
                 runtime_type = \"io.containerd.runc.v2\"\n{cri}.containerd.runtimes.runc.options]\n\
                 SystemdCgroup = true\n"
            )
        };
        // A site file with a CRI table: before 2.0 it replaces the main file's (so it repeats
        // what it needs of it).
        let site = format!(
            "version = 2\n{cri}]\nsandbox_image = \"pause:3.9\"\nmax_concurrent_downloads = 9\n"
        );
        let old_copy = |sandbox: &str, extra: &str| {
            format!(
                "version = 2\n{cri}]\nsandbox_image = \"{sandbox}\"\n{extra}\
                 {cri}.containerd.runtimes.nvidia]\nruntime_type = \"io.containerd.runc.v2\"\n\
                 {cri}.containerd.runtimes.nvidia.options]\nBinaryName = \"/opt/nv/nvidia-container-runtime\"\n"
            )
        };
        let opts = Options::default;
        let cases: Vec<Derive> = vec![
            (
                "whole table: the CRI table of the others and our entry",
                WholePlugin,
                main("pause:3.9"),
                vec![site.clone()],
                None,
                opts(),
                false,
                &["sandbox_image = \"pause:3.9\"", "max_concurrent_downloads = 9", "runtimes.runc]", "BinaryName = \"/usr/bin/nvidia-container-runtime\""],
                &["SystemdCgroup = true"],
            ),
            (
                "per key: only our entry",
                PerKey,
                main("pause:3.9"),
                vec![site.clone()],
                None,
                opts(),
                false,
                &["runtimes.nvidia]", "SystemdCgroup = true\nBinaryName = \"/usr/bin/nvidia-container-runtime\""],
                &["sandbox_image", "max_concurrent_downloads", "runtimes.runc", "default_runtime_name", "enable_cdi"],
            ),
            (
                "per key: the default and the CDI switch when asked for",
                PerKey,
                main("pause:3.9"),
                vec![],
                None,
                Options { set_as_default: true, cdi_enabled: true, ..opts() },
                false,
                &["default_runtime_name = \"nvidia\"", "enable_cdi = true", "container_annotations = [\"cdi.k8s.io/*\"]"],
                &["sandbox_image", "runtimes.runc"],
            ),
            (
                "per key, no runtime in the others: a copy of 2.x's runc, and no runc of ours",
                PerKey,
                "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n".into(),
                vec![],
                None,
                opts(),
                false,
                &["runtimes.nvidia]\nruntime_type = \"io.containerd.runc.v2\"\nsandboxer = \"podsandbox\""],
                &["runtimes.runc", "CriuPath"],
            ),
            (
                "whole table, no runtime in the others: the built-in runc next to ours",
                WholePlugin,
                "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n".into(),
                vec![],
                None,
                opts(),
                false,
                &["runtimes.runc]", "runtimes.nvidia]"],
                &[],
            ),
            (
                "a re-run keeps the default and CDI switch of the drop-in (both rules)",
                WholePlugin,
                main("pause:3.9"),
                vec![],
                Some(old_copy("pause:3.6", "enable_cdi = true\n").replace(
                    "runtime_type = \"io.containerd.runc.v2\"\n",
                    "runtime_type = \"io.containerd.runc.v2\"\ncontainer_annotations = [\"cdi.k8s.io/*\"]\n",
                ) + &format!("{cri}.containerd]\ndefault_runtime_name = \"nvidia\"\n")),
                opts(),
                false,
                &["default_runtime_name = \"nvidia\"", "enable_cdi = true", "sandbox_image = \"pause:3.9\""],
                &["pause:3.6"],
            ),
            (
                "per key: the same re-run",
                PerKey,
                main("pause:3.9"),
                vec![],
                Some(old_copy("pause:3.6", "enable_cdi = true\n").replace(
                    "runtime_type = \"io.containerd.runc.v2\"\n",
                    "runtime_type = \"io.containerd.runc.v2\"\ncontainer_annotations = [\"cdi.k8s.io/*\"]\n",
                ) + &format!("{cri}.containerd]\ndefault_runtime_name = \"nvidia\"\n")),
                opts(),
                false,
                &["default_runtime_name = \"nvidia\"", "enable_cdi = true"],
                &["sandbox_image"],
            ),
            (
                "refresh: the others' new values, the runtime path read back",
                WholePlugin,
                main("pause:3.9"),
                vec![site.clone()],
                Some(old_copy("pause:3.6", "")),
                opts(),
                true,
                &["sandbox_image = \"pause:3.9\"", "max_concurrent_downloads = 9", "BinaryName = \"/opt/nv/nvidia-container-runtime\""],
                &["pause:3.6", "/usr/bin/nvidia-container-runtime"],
            ),
            (
                "refresh after an upgrade to 2.x: the old copy becomes our keys only",
                PerKey,
                main("pause:3.9"),
                vec![site.clone()],
                Some(old_copy("pause:3.6", "")),
                opts(),
                true,
                &["BinaryName = \"/opt/nv/nvidia-container-runtime\""],
                &["sandbox_image", "max_concurrent_downloads", "runtimes.runc"],
            ),
            (
                "refresh keeps the installer's nvidia-* runtimes the others lack",
                PerKey,
                main("pause:3.9"),
                vec![],
                Some(old_copy("pause:3.6", "") + &format!("{cri}.containerd.runtimes.nvidia-cdi]\nruntime_type = \"io.containerd.runc.v2\"\n{cri}.containerd.runtimes.crun]\nruntime_type = \"io.containerd.runc.v2\"\n")),
                opts(),
                true,
                &["runtimes.nvidia-cdi]"],
                &["runtimes.crun", "sandbox_image"],
            ),
        ];
        let path = |p: &'static str| Path::new(p);
        for (name, rule, main_text, others, previous, opts, refresh_it, has, lacks) in cases {
            let main_src = Source {
                path: path("/etc/containerd/config.toml"),
                text: &main_text,
            };
            let mut files = vec![main_src];
            let site_paths = [
                "/etc/containerd/conf.d/20-site.toml",
                "/etc/containerd/conf.d/30-more.toml",
            ];
            for (i, t) in others.iter().enumerate() {
                files.push(Source {
                    path: path(site_paths[i]),
                    text: t,
                });
            }
            let base_text = effective(&files, rule).unwrap();
            let base = Source {
                path: path("<merged>"),
                text: &base_text,
            };
            let d = path("/etc/containerd/conf.d/99-nvidia.toml");
            let derive = |prev: Option<&str>| -> String {
                let prev = prev.map(|text| Source { path: d, text });
                if refresh_it {
                    let p = prev.expect("refresh cases have a drop-in");
                    let c = refresh(main_src, base, d, p, &opts, rule)
                        .unwrap_or_else(|e| panic!("case {name}: {e}"))
                        .unwrap_or_else(|| panic!("case {name}: nothing to refresh"));
                    c.content.unwrap()
                } else {
                    let out = configure_with(main_src, base, Some(d), prev, &opts, rule)
                        .unwrap_or_else(|e| panic!("case {name}: {e}"));
                    assert_eq!(
                        out.changes[1].content.as_deref(),
                        Some(main_text.as_str()),
                        "case {name}: main file changed"
                    );
                    out.changes[0].content.clone().unwrap()
                }
            };
            let got = derive(previous.as_deref());
            for h in has {
                assert!(got.contains(h), "case {name}: missing {h:?} in\n{got}");
            }
            for l in lacks {
                assert!(!got.contains(l), "case {name}: unexpected {l:?} in\n{got}");
            }
            assert_eq!(
                derive(Some(&got)),
                got,
                "case {name}: a second run changed it"
            );
            let mut with = files.clone();
            with.push(Source {
                path: d,
                text: &got,
            });
            let shadows = shadowed(&with, with.len() - 1, "nvidia", rule).unwrap();
            assert_eq!(shadows, vec![], "case {name}: shadows\n{got}");
            // containerd still has its default runtime.
            let all = effective(&with, rule).unwrap();
            check_default_runtime_under(
                Source {
                    path: path("<all>"),
                    text: &all,
                },
                rule,
            )
            .unwrap_or_else(|e| panic!("case {name}: {e}\n{all}"));
        }

        // Nothing to refresh in a drop-in that registers no `nvidia`.
        let none = "version = 2\n".to_string();
        let src = Source {
            path: path("/c.toml"),
            text: &none,
        };
        assert!(
            refresh(src, src, path("/d.toml"), src, &Options::default(), PerKey)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn import_roots() {
        let cases = [
            ("Debian", "/etc/containerd/config.toml", "/etc"),
            (
                "k3s",
                "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
                "/var/lib/rancher/k3s/agent/etc",
            ),
            (
                "no etc: the config's directory",
                "/tmp/x/config.toml",
                "/tmp/x",
            ),
            ("relative", "config.toml", ""),
        ];
        for (name, config, want) in cases {
            assert_eq!(
                import_root(Path::new(config)),
                Path::new(want),
                "case {name}"
            );
        }
    }

    #[test]
    fn versions() {
        let cases = [
            ("absent is v1", "[plugins.cri]\n", Ok(Version::V1)),
            ("empty is v2", "", Ok(Version::V2)),
            ("v2", "version = 2\n", Ok(Version::V2)),
            ("v3", "version = 3\n", Ok(Version::V3)),
            ("v4 unknown", "version = 4\n", Err("version 4")),
            ("string unknown", "version = \"2\"\n", Err("version \"2\"")),
        ];
        for (name, text, want) in cases {
            let doc: DocumentMut = text.parse().unwrap();
            let got = version(&doc, Path::new("c.toml"));
            match (got, want) {
                (Ok(g), Ok(w)) => assert_eq!(g, w, "case {name}"),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "case {name}: {e}"),
                (g, w) => panic!("case {name}: got {g:?}, want {w:?}"),
            }
        }
    }

    /// (name, input, options, output must contain, output must not contain)
    type Case<'a> = (&'a str, &'a str, Options, &'a [&'a str], &'a [&'a str]);

    #[test]
    fn transforms() {
        let nv =
            |t: &str| format!("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{t}]");
        let cases: &[Case] = &[
            (
                "no template",
                "version = 2\n",
                Options::default(),
                &["runtime_type = \"io.containerd.runc.v2\"", "BinaryName = \"/usr/bin/nvidia-container-runtime\""],
                &["default_runtime_name", "Runtime ="],
            ),
            (
                "copies runc options",
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nSystemdCgroup = true\n",
                Options::default(),
                &[&nv("nvidia.options"), "SystemdCgroup = true\nBinaryName"],
                &[],
            ),
            (
                "v1 sets Runtime",
                "[plugins.cri.containerd]\nsnapshotter = \"overlayfs\"\n",
                Options::default(),
                &["[plugins.cri.containerd.runtimes.nvidia]", "Runtime = \"/usr/bin/nvidia-container-runtime\""],
                &[],
            ),
            (
                "set as default and cdi",
                "version = 3\n",
                Options { set_as_default: true, cdi_enabled: true, ..Options::default() },
                &["default_runtime_name = \"nvidia\"", "enable_cdi = true", "container_annotations = [\"cdi.k8s.io/*\"]"],
                &[],
            ),
            (
                "a re-run without set-as-default keeps the default (upstream's rule)",
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"nvidia\"\n",
                Options::default(),
                &["default_runtime_name = \"nvidia\""],
                &[],
            ),
            (
                "a CRI table with only cni (Debian's) gets the built-in runc next to ours",
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nbin_dir = \"/usr/lib/cni\"\n",
                Options::default(),
                &["runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"", "SystemdCgroup = false\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]"],
                &[],
            ),
            (
                "v3 built-in runc has the pod sandboxer",
                "version = 3\n",
                Options::default(),
                &["runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\nsandboxer = \"podsandbox\""],
                &["CriuPath", "NoPivotRoot"],
            ),
            (
                "inline options kept inline",
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\noptions = { SystemdCgroup = true }\n",
                Options { runtime_name: "gpu".into(), ..Options::default() },
                &["SystemdCgroup = true , BinaryName = \"/usr/bin/nvidia-container-runtime\" }", &nv("gpu")],
                &[],
            ),
        ];
        for (name, input, opts, has, lacks) in cases {
            let got = run(input, opts).unwrap_or_else(|e| panic!("case {name}: {e}"));
            for h in *has {
                assert!(got.contains(h), "case {name}: missing {h:?} in\n{got}");
            }
            for l in *lacks {
                assert!(!got.contains(l), "case {name}: unexpected {l:?} in\n{got}");
            }
            assert_eq!(
                run(&got, opts).unwrap(),
                got,
                "case {name}: second run changed it"
            );
            let src = Source {
                path: Path::new("c.toml"),
                text: &got,
            };
            let back = unconfigure(src, Some(input), None, opts).unwrap();
            if !input.is_empty() && !input.contains("\"nvidia\"") {
                assert_eq!(
                    back.changes[0].content.as_deref(),
                    Some(*input),
                    "case {name}: round trip"
                );
            }
        }
    }
}
