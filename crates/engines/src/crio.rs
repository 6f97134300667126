//! CRI-O `crio.conf` (or a `crio.conf.d` drop-in): add / remove `[crio.runtime.runtimes.<name>]`
//! and `[crio.runtime] default_runtime`. Pure: no I/O.
//!
//! Upstream behaviour mirrored: the entry copies the default runtime's table (`default_runtime`,
//! else `runc`, else `crun`), sets `runtime_path`, and `runtime_type = "oci"` when empty. CRI-O
//! merges drop-ins key by key, so a drop-in carries only our entry (and the default when set);
//! CRI-O has CDI on by default, so `cdi_enabled` only adds a note.

use std::path::Path;

use toml_edit::{DocumentMut, Item, Table, Value};

use super::{
    entry_table_like, has_key, parse_toml, prepare_copy, prune_empty, require_tables,
    restore_value, set_value, str_at, table_at, table_at_create, table_at_mut, Change, Error,
    Options, Outcome, Source,
};

const RUNTIME: [&str; 2] = ["crio", "runtime"];
const RUNTIMES: [&str; 3] = ["crio", "runtime", "runtimes"];

fn configure_doc(
    doc: &mut DocumentMut,
    template_from: &DocumentMut,
    path: &Path,
    opts: &Options,
) -> Result<(), Error> {
    let name = opts.runtime_name.as_str();
    let from = template_from.as_table();
    let default = str_at(from, &RUNTIME, "default_runtime").map(str::to_string);
    let root = doc.as_table_mut();
    let runtimes = table_at_create(root, &RUNTIMES, path)?;
    if !runtimes.contains_key(name) {
        let template = [default.as_deref(), Some("runc"), Some("crun")]
            .into_iter()
            .flatten()
            .filter(|t| *t != name)
            .find_map(|t| {
                super::table_at(from, &RUNTIMES)?
                    .get(t)
                    .filter(|i| i.is_table_like())
                    .cloned()
            });
        let mut entry = template.unwrap_or_else(|| Item::Table(Table::new()));
        prepare_copy(&mut entry);
        runtimes.insert(name, entry);
    }
    let entry = entry_table_like(runtimes, name).ok_or_else(|| Error::NotATable {
        path: path.to_path_buf(),
        key: format!("{}.{name}", RUNTIMES.join(".")),
    })?;
    set_value(
        entry,
        "runtime_path",
        Value::from(opts.runtime_path.as_str()),
    );
    if entry
        .get("runtime_type")
        .and_then(Item::as_str)
        .unwrap_or("")
        .is_empty()
    {
        set_value(entry, "runtime_type", Value::from("oci"));
    }
    // Never removed on configure (upstream's rule): a re-run keeps an earlier default.
    if opts.set_as_default {
        set_value(
            table_at_create(root, &RUNTIME, path)?,
            "default_runtime",
            Value::from(name),
        );
    }
    Ok(())
}

/// How `src` (a config file or drop-in, or `crio status config` output) registers runtime
/// `name`. CRI-O's own default cgroup manager is systemd.
pub fn status(src: Source<'_>, name: &str) -> Result<super::Registration, Error> {
    let doc = parse_toml(&src)?;
    let root = doc.as_table();
    let runtime_path = table_at(root, &RUNTIMES)
        .and_then(|t| t.get(name)?.as_table_like())
        .map(|e| {
            e.get("runtime_path")
                .and_then(|i| i.as_str())
                .unwrap_or("")
                .to_string()
        });
    Ok(super::Registration {
        runtime_path,
        is_default: str_at(root, &RUNTIME, "default_runtime") == Some(name),
        systemd_cgroup: str_at(root, &RUNTIME, "cgroup_manager").map(|m| m == "systemd"),
    })
}

/// Configure CRI-O. `base` supplies the runtime to copy (the file itself, or `crio status config`
/// output). With `drop_in` the entry goes to that file alone; otherwise `base` edited replaces
/// `main`.
pub fn configure(
    main: Source<'_>,
    base: Source<'_>,
    drop_in: Option<&Path>,
    opts: &Options,
) -> Result<Outcome, Error> {
    let mut out = Outcome::default();
    if opts.cdi_enabled {
        out.notes
            .push("CRI-O enables CDI by default; --cdi.enabled changes nothing".into());
    }
    let base_doc = parse_toml(&base)?;
    require_tables(base_doc.as_table(), &RUNTIMES, base.path)?;
    let (target, mut doc) = match drop_in {
        Some(d) => (d, DocumentMut::new()),
        None => (main.path, base_doc.clone()),
    };
    configure_doc(&mut doc, &base_doc, target, opts)?;
    let mut text = doc.to_string();
    if drop_in.is_some() {
        // A new file starts at its first table, not at the blank line a copied table keeps.
        text = text.trim_start_matches('\n').to_string();
    }
    out.changes.push(Change {
        path: target.to_path_buf(),
        content: Some(text),
    });
    Ok(out)
}

/// Add (or refresh) the runtime entry in the drop-in `drop_in` (its current text: empty when
/// new), taking the entry to copy from `base`: several runtimes can share one drop-in
/// (`nvidia-ctk-installer` registers three).
pub fn configure_drop_in(
    drop_in: Source<'_>,
    base: Source<'_>,
    opts: &Options,
) -> Result<Outcome, Error> {
    let base_doc = parse_toml(&base)?;
    let mut doc = parse_toml(&drop_in)?;
    configure_doc(&mut doc, &base_doc, drop_in.path, opts)?;
    Ok(Outcome {
        changes: vec![Change {
            path: drop_in.path.to_path_buf(),
            content: Some(doc.to_string()),
        }],
        notes: vec![],
    })
}

/// Undo [`configure`] (rule: module doc of `runtime_config`); a drop-in is removed.
pub fn unconfigure(
    main: Source<'_>,
    previous: Option<&str>,
    drop_in: Option<&Path>,
    opts: &Options,
) -> Result<Outcome, Error> {
    let mut out = Outcome::default();
    let name = opts.runtime_name.as_str();
    let mut doc = parse_toml(&main)?;
    let prev = previous
        .and_then(|p| p.parse::<DocumentMut>().ok())
        .filter(|p| !has_key(p.as_table(), &[RUNTIMES[0], RUNTIMES[1], RUNTIMES[2], name]));
    let prev = prev.as_ref().map(DocumentMut::as_table);
    let root = doc.as_table_mut();
    if let Some(rt) = table_at_mut(root, &RUNTIMES) {
        rt.remove(name);
    }
    prune_empty(root, &RUNTIMES, prev);
    if str_at(root, &RUNTIME, "default_runtime") == Some(name) {
        match prev {
            Some(p) => restore_value(root, &RUNTIME, "default_runtime", p),
            None => {
                table_at_mut(root, &RUNTIME).map(|t| t.remove("default_runtime"));
            }
        }
        prune_empty(root, &RUNTIME, prev);
    }
    if let Some(d) = drop_in {
        out.changes.push(Change {
            path: d.to_path_buf(),
            content: None,
        });
    }
    out.changes.push(Change {
        path: main.path.to_path_buf(),
        content: Some(doc.to_string()),
    });
    Ok(out)
}

/// CRI-O, for [`crate::Engine::api`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Crio;

impl crate::Interface for Crio {
    fn engine(&self) -> crate::Engine {
        crate::Engine::Crio
    }
    fn name(&self) -> &'static str {
        "crio"
    }
    fn display_name(&self) -> &'static str {
        "CRI-O"
    }
    fn default_config(&self) -> &'static str {
        "/etc/crio/crio.conf"
    }
    fn default_drop_in(&self) -> Option<&'static str> {
        Some("/etc/crio/crio.conf.d/99-nvidia.toml")
    }
    fn default_runtime_path(&self) -> &'static str {
        crate::DEFAULT_RUNTIME_PATH
    }
    fn default_socket(&self) -> &'static str {
        "/var/run/crio/crio.sock"
    }
    fn default_restart(&self) -> crate::Restart {
        crate::Restart::Systemd
    }
    fn restart_hint(&self, _rootless: bool) -> &'static str {
        "restart CRI-O to apply: systemctl restart crio"
    }
    fn default_systemd(&self, _v2: bool) -> bool {
        true
    }
    fn dump_binary(&self) -> Option<&'static str> {
        Some("crio")
    }
    fn dump_subcommand(&self) -> Option<&'static str> {
        Some("status config")
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

    #[test]
    fn transforms() {
        let p = Path::new("/etc/crio/crio.conf");
        let runc = "# CRI-O\n[crio.runtime]\ndefault_runtime = \"runc\"\n\n[crio.runtime.runtimes.runc]\nruntime_path = \"\"\nruntime_type = \"oci\"\nruntime_root = \"/run/runc\"\n";
        let cases: &[(&str, &str, Options, Option<&str>, &str)] = &[
            (
                "copies runc",
                runc,
                Options::default(),
                None,
                "# CRI-O\n[crio.runtime]\ndefault_runtime = \"runc\"\n\n[crio.runtime.runtimes.runc]\nruntime_path = \"\"\nruntime_type = \"oci\"\nruntime_root = \"/run/runc\"\n\n[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/bin/nvidia-container-runtime\"\nruntime_type = \"oci\"\nruntime_root = \"/run/runc\"\n",
            ),
            (
                "drop-in default",
                runc,
                Options { set_as_default: true, ..Options::default() },
                Some("/etc/crio/crio.conf.d/99-nvidia.toml"),
                "[crio.runtime]\ndefault_runtime = \"nvidia\"\n\n[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/bin/nvidia-container-runtime\"\nruntime_type = \"oci\"\nruntime_root = \"/run/runc\"\n",
            ),
        ];
        for (name, input, opts, drop_in, want) in cases {
            let src = Source {
                path: p,
                text: input,
            };
            let out = configure(src, src, drop_in.map(Path::new), opts).unwrap();
            let got = out.changes[0].content.clone().unwrap();
            assert_eq!(got, *want, "case {name}");
            if drop_in.is_none() {
                let back = unconfigure(
                    Source {
                        path: p,
                        text: &got,
                    },
                    Some(input),
                    None,
                    opts,
                )
                .unwrap();
                assert_eq!(
                    back.changes[0].content.as_deref(),
                    Some(*input),
                    "case {name}: round trip"
                );
            }
        }
    }
}
