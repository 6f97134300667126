//! Reading CDI spec directories: `cdi list` (every qualified device name) and the runtime
//! shim's `cdi` mode ([`load`]: every usable spec with its file). Files are
//! `*.yaml`, `*.yml` and `*.json`, read in name order per directory, directories in the order
//! given. A missing directory is normal (no spec installed); a broken file is reported as a
//! warning naming it and the others are still read. Read-only.

use super::name::QualifiedName;
use super::validate;
use std::path::{Path, PathBuf};

/// The default spec directories, lowest priority first.
pub const DEFAULT_SPEC_DIRS: &[&str] = &["/etc/cdi", "/var/run/cdi"];

/// Spec files bigger than this are refused rather than read.
const MAX_SPEC_FILE: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    pub names: Vec<QualifiedName>,
    /// One line per file that could not be used, naming it and why.
    pub warnings: Vec<String>,
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
        .filter(|p| p.is_file())
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
pub(crate) fn read_spec(path: &Path) -> Result<super::Spec, String> {
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

/// Every usable spec of `dirs` with its file, in reading order (directories as given, files
/// in name order), and one warning per file or directory that could not be used.
pub fn load(dirs: &[PathBuf]) -> (Vec<(PathBuf, super::Spec)>, Vec<String>) {
    let mut specs = Vec::new();
    let mut warnings = Vec::new();
    for dir in dirs {
        let files = match spec_files(dir) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                warnings.push(format!("{}: cannot read directory: {e}", dir.display()));
                continue;
            }
        };
        for file in files {
            match read_spec(&file) {
                Ok(spec) => specs.push((file, spec)),
                Err(e) => warnings.push(format!("{}: skipped: {e}", file.display())),
            }
        }
    }
    (specs, warnings)
}

/// Every qualified device name of the specs in `dirs` (see [`load`]).
pub fn list(dirs: &[PathBuf]) -> Listing {
    let (specs, warnings) = load(dirs);
    let mut out = Listing {
        names: Vec::new(),
        warnings,
    };
    for (file, spec) in specs {
        let names: Result<Vec<QualifiedName>, _> = spec
            .devices
            .iter()
            .map(|d| QualifiedName::new(&spec.kind, &d.name))
            .collect();
        match names {
            Ok(n) => out.names.extend(n),
            Err(e) => out
                .warnings
                .push(format!("{}: skipped: {e}", file.display())),
        }
    }
    out
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
        let got = list(&[dir.path().to_path_buf(), dir.path().join("missing")]);
        let names: Vec<String> = got.names.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["vendor.com/x=0", "vendor.com/y=one"]);
        assert_eq!(got.warnings.len(), 3, "{:?}", got.warnings);
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
}
