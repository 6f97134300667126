//! Reading CDI spec directories: `cdi list` (every qualified device name once, with the file
//! that defines it) and the runtime shim's `cdi` mode ([`load`]: every usable spec with its
//! file and priority). Files are `*.yaml`, `*.yml` and `*.json`, read in name order per
//! directory, directories in the order given (later ones have priority: `resolve.rs`). A
//! missing directory is normal (no spec installed); a broken file is reported as a warning
//! naming it and the others are still read. Read-only.

use super::name::QualifiedName;
use super::resolve::{self, SpecFile};
use super::validate;
use std::path::{Path, PathBuf};

/// The default spec directories, lowest priority first.
pub const DEFAULT_SPEC_DIRS: &[&str] = &["/etc/cdi", "/var/run/cdi"];

/// Spec files bigger than this are refused rather than read.
const MAX_SPEC_FILE: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    /// Each name that resolves, once, with the file it comes from: files in reading order,
    /// devices in spec order.
    pub names: Vec<(QualifiedName, PathBuf)>,
    /// One line per file that could not be used, naming it and why, and per name that two
    /// files of one directory define.
    pub warnings: Vec<String>,
    /// One line per file whose devices a later directory's file replaces ([`shadow_texts`]).
    pub shadowed: Vec<String>,
}

/// The spec files of `dir`, sorted by name.
fn spec_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        // Regular files, and symlinks that point nowhere (reported by [`load`]: an engine
        // skips them silently, and the devices they named are gone).
        .filter(|p| p.is_file() || (p.is_symlink() && !p.exists()))
        .collect();
    files.sort();
    Ok(files)
}

/// A spec file's text, at most [`MAX_SPEC_FILE`] bytes (counted while reading, so a special
/// file whose size says 0 cannot make it read forever); the error says why not.
pub fn read_text(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_SPEC_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_SPEC_FILE {
        return Err(format!(
            "more than the {MAX_SPEC_FILE} bytes a spec file may have"
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))
}

/// Reads and checks one spec file; the error says why it cannot be used.
pub fn read_spec(path: &Path) -> Result<super::Spec, String> {
    let text = read_text(path)?;
    let doc = super::spec::parse_value(&text).map_err(|e| format!("not YAML or JSON: {e}"))?;
    if let Some(p) = validate::schema(&doc).first() {
        return Err(p.to_string());
    }
    let spec: super::Spec = serde_json::from_value(doc).map_err(|e| e.to_string())?;
    match validate::duplicate_names(&spec).first() {
        Some(p) => Err(p.to_string()),
        None => Ok(spec),
    }
}

/// Every usable spec of `dirs` with its file and priority (the index of its directory), in
/// reading order (directories as given, files in name order), and one warning per file or
/// directory that could not be used.
pub fn load(dirs: &[PathBuf]) -> (Vec<SpecFile>, Vec<String>) {
    let mut specs = Vec::new();
    let mut warnings = Vec::new();
    for (priority, dir) in dirs.iter().enumerate() {
        let files = match spec_files(dir) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                warnings.push(format!("{}: cannot read directory: {e}", dir.display()));
                continue;
            }
        };
        for file in files {
            if !file.exists() {
                let target = std::fs::read_link(&file).unwrap_or_default();
                warnings.push(format!(
                    "{}: skipped: a symlink to {}, which does not exist (remove the link, or \
                     bring back what it points at)",
                    file.display(),
                    target.display()
                ));
                continue;
            }
            match read_spec(&file) {
                Ok(spec) => specs.push(SpecFile {
                    path: file,
                    priority,
                    spec,
                }),
                Err(e) => warnings.push(format!("{}: skipped: {e}", file.display())),
            }
        }
    }
    (specs, warnings)
}

/// Every qualified device name of the specs in `dirs` (see [`load`]), each once, resolved as
/// `resolve.rs` says.
pub fn list(dirs: &[PathBuf]) -> Listing {
    let (specs, warnings) = load(dirs);
    let r = resolve::resolve(&specs);
    let mut out = Listing {
        names: Vec::new(),
        warnings,
        shadowed: shadow_texts(&r.shadowed),
    };
    out.warnings.extend(conflict_texts(&r.conflicts));
    for (i, file) in specs.iter().enumerate() {
        let spec = &file.spec;
        let names: Result<Vec<QualifiedName>, _> = spec
            .devices
            .iter()
            .map(|d| QualifiedName::new(&spec.kind, &d.name))
            .collect();
        match names {
            Ok(n) => out.names.extend(
                n.into_iter()
                    .enumerate()
                    .filter(|(j, q)| {
                        r.devices.get(&q.to_string())
                            == Some(&resolve::Winner {
                                spec: i,
                                device: *j,
                            })
                    })
                    .map(|(_, q)| (q, file.path.clone())),
            ),
            Err(e) => out
                .warnings
                .push(format!("{}: skipped: {e}", file.path.display())),
        }
    }
    out
}

/// Names grouped by the pair of files they are about, pairs in the order first seen.
fn by_pair<'a>(
    items: impl Iterator<Item = (&'a Path, &'a Path, &'a str)>,
) -> Vec<(&'a Path, &'a Path, Vec<&'a str>)> {
    let mut pairs: Vec<(&Path, &Path, Vec<&str>)> = Vec::new();
    for (a, b, name) in items {
        match pairs.iter_mut().find(|(x, y, _)| (*x, *y) == (a, b)) {
            Some((_, _, names)) => names.push(name),
            None => pairs.push((a, b, vec![name])),
        }
    }
    pairs
}

/// One warning per pair of files of one spec directory that define the same names, naming
/// both files and the names.
pub fn conflict_texts(conflicts: &[resolve::Conflict]) -> Vec<String> {
    by_pair(
        conflicts
            .iter()
            .map(|c| (c.first.as_path(), c.second.as_path(), c.name.as_str())),
    )
    .into_iter()
    .map(|(first, second, names)| {
        format!(
            "{} {} defined by {} and by {}, two files of one spec directory: neither is used; remove one of them",
            names.join(", "),
            if names.len() == 1 { "is" } else { "are" },
            first.display(),
            second.display()
        )
    })
    .collect()
}

/// One line per pair of files where a later spec directory's file replaces devices of an
/// earlier one, naming both files and the devices.
pub fn shadow_texts(shadowed: &[resolve::Shadow]) -> Vec<String> {
    by_pair(
        shadowed
            .iter()
            .map(|s| (s.hidden.as_path(), s.by.as_path(), s.name.as_str())),
    )
    .into_iter()
    .map(|(hidden, by, names)| {
        format!(
            "{} is shadowed by {} (a later spec directory wins) for {} device(s): {}",
            hidden.display(),
            by.display(),
            names.len(),
            names.join(", ")
        )
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_good_files_and_names_broken_ones() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "a.yaml",
            "cdiVersion: 0.5.0\nkind: vendor.com/x\ndevices:\n- name: \"0\"\n  containerEdits: {env: [A=b]}\n",
        );
        write(
            "b.json",
            r#"{"cdiVersion":"0.3.0","kind":"vendor.com/y","devices":[{"name":"one","containerEdits":{}}]}"#,
        );
        write("c.yaml", "kind: [broken\n");
        write("d.json", r#"{"cdiVersion":"0.3.0","devices":[]}"#);
        write(
            "e.yaml",
            "cdiVersion: 0.5.0\nkind: vendor.com/z\ndevices:\n- {name: a, containerEdits: {env: [A=1]}}\n- {name: a, containerEdits: {env: [A=2]}}\n",
        );
        write("notes.txt", "ignored");
        // A spec link whose target is gone (a driver container's spec, not running).
        std::os::unix::fs::symlink("/nonexistent/nvidia.yaml", dir.path().join("f.yaml")).unwrap();
        let got = list(&[dir.path().to_path_buf(), dir.path().join("missing")]);
        let names: Vec<String> = got.names.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names, ["vendor.com/x=0", "vendor.com/y=one"]);
        assert_eq!(got.warnings.len(), 4, "{:?}", got.warnings);
        assert_eq!(
            got.warnings[3],
            format!(
                "{}: skipped: a symlink to /nonexistent/nvidia.yaml, which does not exist (remove the link, or bring back what it points at)",
                dir.path().join("f.yaml").display()
            )
        );
        assert!(
            got.warnings[0].starts_with(&format!(
                "{}: skipped: not YAML or JSON",
                dir.path().join("c.yaml").display()
            )),
            "{:?}",
            got.warnings
        );
        assert_eq!(
            got.warnings[1],
            format!(
                "{}: skipped: kind: is required",
                dir.path().join("d.json").display()
            )
        );
        assert_eq!(
            got.warnings[2],
            format!(
                "{}: skipped: devices[1].name: \"a\" is already the name of devices[0]",
                dir.path().join("e.yaml").display()
            )
        );
    }

    #[test]
    fn each_name_once_from_the_winning_file() {
        let root = tempfile::tempdir().unwrap();
        let (etc, run) = (root.path().join("etc"), root.path().join("run"));
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::create_dir_all(&run).unwrap();
        let spec = |names: &[&str]| {
            let devices: Vec<String> = names
                .iter()
                .map(|n| format!("- {{name: \"{n}\", containerEdits: {{env: [A=1]}}}}\n"))
                .collect();
            format!(
                "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n{}",
                devices.concat()
            )
        };
        std::fs::write(etc.join("nvidia.yaml"), spec(&["0", "1", "7"])).unwrap();
        std::fs::write(run.join("nvidia.yaml"), spec(&["0", "1"])).unwrap();
        std::fs::write(run.join("other.yaml"), spec(&["9", "1"])).unwrap();
        let got = list(&[etc.clone(), run.clone()]);
        let names: Vec<(String, PathBuf)> = got
            .names
            .iter()
            .map(|(n, f)| (n.to_string(), f.clone()))
            .collect();
        assert_eq!(
            names,
            [
                ("nvidia.com/gpu=7".to_string(), etc.join("nvidia.yaml")),
                ("nvidia.com/gpu=0".to_string(), run.join("nvidia.yaml")),
                ("nvidia.com/gpu=9".to_string(), run.join("other.yaml")),
            ]
        );
        assert_eq!(
            got.warnings,
            [format!(
                "nvidia.com/gpu=1 is defined by {} and by {}, two files of one spec directory: neither is used; remove one of them",
                run.join("nvidia.yaml").display(),
                run.join("other.yaml").display()
            )]
        );
        assert_eq!(
            got.shadowed,
            [format!(
                "{} is shadowed by {} (a later spec directory wins) for 2 device(s): nvidia.com/gpu=0, nvidia.com/gpu=1",
                etc.join("nvidia.yaml").display(),
                run.join("nvidia.yaml").display()
            )]
        );
    }
}
