//! docker `daemon.json`: add / remove the NVIDIA runtime under `runtimes`, `default-runtime`
//! and `features.cdi`. Every other key is kept, in its order (`serde_json` `preserve_order`).
//!
//! Pure: no I/O. Output is pretty-printed with the indentation the input used (detected from its
//! first indented line; 4 spaces for a new file, as in docker's docs) and a trailing newline.
//! When an edit changes nothing the input text is returned untouched, so a file in another layout
//! is not reformatted by a no-op. Limit: a file that needs a change is re-printed, so a layout other
//! than `serde_json`'s pretty one (e.g. arrays kept on one line) does not survive that write.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{reject_template, Change, Error, Options, Outcome, Source};

fn parse(src: &Source<'_>) -> Result<Map<String, Value>, Error> {
    reject_template(src)?;
    if src.text.trim().is_empty() {
        return Ok(Map::new());
    }
    let v: Value = serde_json::from_str(src.text).map_err(|e| Error::Json {
        path: src.path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        source: e,
    })?;
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(Error::NotAnObject {
            path: src.path.to_path_buf(),
            key: "(top level)".into(),
        }),
    }
}

/// The indentation unit of the first indented line, else four spaces. Only spaces and tabs
/// count: other whitespace (a vertical tab, a no-break space in an otherwise blank file) is not
/// JSON whitespace, and printing with it would write a file docker cannot read.
fn indent_of(text: &str) -> String {
    text.lines()
        .skip(1)
        .map(|l| &l[..l.len() - l.trim_start_matches([' ', '\t']).len()])
        .find(|w| !w.is_empty())
        .unwrap_or("    ")
        .to_string()
}

fn print(m: &Map<String, Value>, indent: &str) -> String {
    use serde::Serialize;
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    m.serialize(&mut ser)
        .expect("serializing a JSON value to memory cannot fail");
    let mut s = String::from_utf8(buf).expect("serde_json writes UTF-8");
    s.push('\n');
    s
}

fn object_mut<'m>(
    m: &'m mut Map<String, Value>,
    key: &str,
    path: &Path,
) -> Result<&'m mut Map<String, Value>, Error> {
    m.entry(key)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| Error::NotAnObject {
            path: path.to_path_buf(),
            key: key.to_string(),
        })
}

fn finish(src: &Source<'_>, before: &Map<String, Value>, after: &Map<String, Value>) -> Outcome {
    let content = if before == after && !src.text.trim().is_empty() {
        src.text.to_string()
    } else {
        print(after, &indent_of(src.text))
    };
    Outcome {
        changes: vec![Change {
            path: src.path.to_path_buf(),
            content: Some(content),
        }],
        notes: vec![],
    }
}

/// How `src` (`daemon.json`) registers runtime `name`.
pub fn status(src: Source<'_>, name: &str) -> Result<super::Registration, Error> {
    let m = parse(&src)?;
    let runtime_path = m.get("runtimes").and_then(|r| r.get(name)).map(|e| {
        e.get("path")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    });
    let systemd_cgroup = m
        .get("exec-opts")
        .and_then(Value::as_array)
        .and_then(|opts| {
            opts.iter()
                .filter_map(Value::as_str)
                .find_map(|o| o.strip_prefix("native.cgroupdriver="))
        })
        .map(|d| d == "systemd");
    Ok(super::Registration {
        runtime_path,
        is_default: m.get("default-runtime").and_then(Value::as_str) == Some(name),
        systemd_cgroup,
    })
}

/// Configure docker: `runtimes.<name> = {"args": [], "path": ...}`, `default-runtime` when set
/// as default (never removed here: `unconfigure` does), `features.cdi = true` with CDI.
pub fn configure(src: Source<'_>, opts: &Options) -> Result<Outcome, Error> {
    let before = parse(&src)?;
    let mut m = before.clone();
    let name = opts.runtime_name.as_str();
    let entry = json!({"args": [], "path": opts.runtime_path});
    let runtimes = object_mut(&mut m, "runtimes", src.path)?;
    if runtimes.get(name) != Some(&entry) {
        runtimes.insert(name.to_string(), entry);
    }
    // Upstream never removes a default on configure: a re-run without --set-as-default (or
    // with --cdi.enabled) keeps the one an earlier run set; `unconfigure` removes it.
    if opts.set_as_default {
        m.insert("default-runtime".into(), Value::from(name));
    }
    if opts.cdi_enabled {
        object_mut(&mut m, "features", src.path)?.insert("cdi".into(), Value::Bool(true));
    }
    Ok(finish(&src, &before, &m))
}

/// Undo [`configure`]; `previous` is the backup text, used as described in the module doc of
/// `runtime_config`.
pub fn unconfigure(
    src: Source<'_>,
    previous: Option<&str>,
    opts: &Options,
) -> Result<Outcome, Error> {
    let before = parse(&src)?;
    let mut m = before.clone();
    let name = opts.runtime_name.as_str();
    let prev = previous
        .and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
        .filter(|p| p.get("runtimes").and_then(|r| r.get(name)).is_none());
    let had = |k: &str| prev.as_ref().is_some_and(|p| p.contains_key(k));

    if let Some(rt) = m.get_mut("runtimes").and_then(Value::as_object_mut) {
        rt.shift_remove(name);
        if rt.is_empty() && prev.is_some() && !had("runtimes") {
            m.shift_remove("runtimes");
        }
    }
    if m.get("default-runtime").and_then(Value::as_str) == Some(name) {
        match prev.as_ref().and_then(|p| p.get("default-runtime")) {
            Some(v) => {
                m.insert("default-runtime".into(), v.clone());
            }
            None => {
                m.shift_remove("default-runtime");
            }
        }
    }
    if let Some(p) = &prev {
        let old = p.get("features").and_then(|f| f.get("cdi")).cloned();
        if let Some(f) = m.get_mut("features").and_then(Value::as_object_mut) {
            match old {
                Some(v) => {
                    f.insert("cdi".into(), v);
                }
                None => {
                    f.shift_remove("cdi");
                }
            }
            if f.is_empty() && !had("features") {
                m.shift_remove("features");
            }
        }
    }
    Ok(finish(&src, &before, &m))
}

/// Removes a `runtimes` object left empty when `before` (the same file before [`unconfigure`]
/// ran) had entries in it: the runtimes removed were its only ones. For a caller with no usable
/// backup (the installer's recovery), where [`unconfigure`] keeps the emptied object; dockerd
/// reads an empty `runtimes` as none.
pub fn drop_emptied_runtimes(src: Source<'_>, before: &str) -> Result<Outcome, Error> {
    let had = parse(&Source {
        path: src.path,
        text: before,
    })?
    .get("runtimes")
    .and_then(Value::as_object)
    .is_some_and(|r| !r.is_empty());
    let now = parse(&src)?;
    let mut m = now.clone();
    let emptied = m
        .get("runtimes")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty);
    if had && emptied {
        m.shift_remove("runtimes");
    }
    Ok(finish(&src, &now, &m))
}

/// docker, for [`crate::Engine::api`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Docker;

impl crate::Interface for Docker {
    fn engine(&self) -> crate::Engine {
        crate::Engine::Docker
    }
    fn name(&self) -> &'static str {
        "docker"
    }
    fn default_config(&self) -> &'static str {
        "/etc/docker/daemon.json"
    }
    fn default_drop_in(&self) -> Option<&'static str> {
        None
    }
    fn default_runtime_path(&self) -> &'static str {
        crate::DEFAULT_RUNTIME_EXECUTABLE
    }
    fn default_socket(&self) -> &'static str {
        "/var/run/docker.sock"
    }
    fn default_restart(&self) -> crate::Restart {
        crate::Restart::Signal
    }
    fn restart_hint(&self, rootless: bool) -> &'static str {
        if rootless {
            "restart the rootless docker to apply: systemctl --user restart docker"
        } else {
            "restart docker to apply: systemctl restart docker"
        }
    }
    fn default_systemd(&self, v2: bool) -> bool {
        v2
    }
    fn dump_binary(&self) -> Option<&'static str> {
        None
    }
    fn dump_subcommand(&self) -> Option<&'static str> {
        None
    }
    /// The entry derives from `base` and replaces the file; docker has no drop-in, so `main`
    /// and `drop_in` are unused.
    fn configure(
        &self,
        _main: Source<'_>,
        base: Source<'_>,
        _drop_in: Option<&Path>,
        opts: &Options,
    ) -> Result<Outcome, Error> {
        configure(base, opts)
    }
    fn unconfigure(
        &self,
        main: Source<'_>,
        previous: Option<&str>,
        _drop_in: Option<&Path>,
        opts: &Options,
    ) -> Result<Outcome, Error> {
        unconfigure(main, previous, opts)
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
        let p = Path::new("/etc/docker/daemon.json");
        let cases: &[(&str, &str, Options, &str)] = &[
            (
                "empty file",
                "",
                Options::default(),
                "{\n    \"runtimes\": {\n        \"nvidia\": {\n            \"args\": [],\n            \"path\": \"/usr/bin/nvidia-container-runtime\"\n        }\n    }\n}\n",
            ),
            (
                "two-space indent, default, cdi merged",
                "{\n  \"features\": {\n    \"buildkit\": true\n  }\n}\n",
                Options { set_as_default: true, cdi_enabled: true, ..Options::default() },
                "{\n  \"features\": {\n    \"buildkit\": true,\n    \"cdi\": true\n  },\n  \"runtimes\": {\n    \"nvidia\": {\n      \"args\": [],\n      \"path\": \"/usr/bin/nvidia-container-runtime\"\n    }\n  },\n  \"default-runtime\": \"nvidia\"\n}\n",
            ),
            (
                // fuzz/ docker_config: the vertical tab was taken as the indentation unit and
                // the file written was not JSON.
                "blank file with a vertical tab",
                "\n\n\u{b} \n",
                Options::default(),
                "{\n    \"runtimes\": {\n        \"nvidia\": {\n            \"args\": [],\n            \"path\": \"/usr/bin/nvidia-container-runtime\"\n        }\n    }\n}\n",
            ),
        ];
        for (name, input, opts, want) in cases {
            let got = configure(
                Source {
                    path: p,
                    text: input,
                },
                opts,
            )
            .unwrap();
            let got = got.changes[0].content.clone().unwrap();
            assert_eq!(got, *want, "case {name}");
            let again = configure(
                Source {
                    path: p,
                    text: &got,
                },
                opts,
            )
            .unwrap();
            assert_eq!(
                again.changes[0].content.as_deref(),
                Some(got.as_str()),
                "case {name}: idempotent"
            );
            if !input.trim().is_empty() {
                let back = unconfigure(
                    Source {
                        path: p,
                        text: &got,
                    },
                    Some(input),
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

    #[test]
    fn drop_emptied_runtimes_cases() {
        let p = Path::new("/etc/docker/daemon.json");
        // (case, the file before unconfigure, as it is now, want)
        let cases = [
            (
                "emptied by unconfigure: goes",
                "{\"runtimes\": {\"nvidia\": {}}}",
                "{\n  \"debug\": true,\n  \"runtimes\": {}\n}\n",
                "{\n  \"debug\": true\n}\n",
            ),
            (
                "empty before as well: stays",
                "{\"runtimes\": {}}",
                "{\n  \"runtimes\": {}\n}\n",
                "{\n  \"runtimes\": {}\n}\n",
            ),
            (
                "entries left: stays",
                "{\"runtimes\": {\"nvidia\": {}, \"crun\": {}}}",
                "{\"runtimes\": {\"crun\": {}}}",
                "{\"runtimes\": {\"crun\": {}}}",
            ),
        ];
        for (name, before, now, want) in cases {
            let out = drop_emptied_runtimes(Source { path: p, text: now }, before).unwrap();
            assert_eq!(out.changes[0].content.as_deref(), Some(want), "{name}");
        }
    }

    #[test]
    fn bad_json_names_line() {
        let e = configure(
            Source {
                path: Path::new("d.json"),
                text: "{\n  \"a\": 1,\n}\n",
            },
            &Options::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("d.json:3:"), "{e}");
    }
}
