//! The files a containerd config imports, found on disk ([`containerd_imports`]): its
//! `imports` entries with a `*` glob matched against the directory. The same rule as
//! `nvidia-ctk doctor`'s.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The regular files of `dir` by name (CRI-O applies them in that order); none without `dir`.
pub fn files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let mut files = Vec::new();
    for e in entries {
        let e = e.with_context(|| format!("cannot read {}", dir.display()))?;
        if std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()) {
            files.push(e.path());
        }
    }
    files.sort();
    Ok(files)
}

/// The files containerd imports from `file` (text `text`): each entry, relative to the file's
/// directory unless absolute, with a `*` in its last component matched against that directory.
/// A file that does not parse has none (its check reports the error).
pub fn containerd_imports(file: &Path, text: &str) -> Result<Vec<PathBuf>> {
    let src = nvct_engines::Source { path: file, text };
    let Ok(imports) = nvct_engines::containerd::imports(src) else {
        return Ok(Vec::new());
    };
    let base = file.parent().unwrap_or(Path::new("/"));
    let mut out = Vec::new();
    for entry in imports {
        let path = base.join(&entry);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        match (name, path.parent()) {
            (Some(pattern), Some(dir)) if pattern.contains('*') => {
                out.extend(files_in(dir)?.into_iter().filter(|f| {
                    f.file_name()
                        .is_some_and(|n| glob_match(&pattern, &n.to_string_lossy()))
                }))
            }
            _ => out.push(path),
        }
    }
    Ok(out)
}

/// `name` matches `pattern`, whose only wildcard is `*` (any run of characters).
fn glob_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return name == pattern;
    }
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn containerd_imports_cases() {
        let dir = tempfile::Builder::new()
            .prefix("nvct-configure-imports-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("conf.d")).unwrap();
        for f in [
            "conf.d/99-nvidia.toml",
            "conf.d/10-site.toml",
            "conf.d/99-nvidia.toml.bak",
            "extra.toml",
        ] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let config = d.join("config.toml");
        let glob = format!("imports = [\"{}/conf.d/*.toml\"]\n", d.display());
        // (case, config text, the files imported, relative to the dir)
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "absolute glob, in name order",
                &glob,
                &["conf.d/10-site.toml", "conf.d/99-nvidia.toml"],
            ),
            (
                "relative file",
                "imports = [\"extra.toml\"]\n",
                &["extra.toml"],
            ),
            (
                "relative glob, no match",
                "imports = [\"none/*.toml\"]\n",
                &[],
            ),
            ("no imports", "version = 2\n", &[]),
            ("not TOML: none (the check reports it)", "[x\n", &[]),
        ];
        for (name, text, want) in cases {
            let got = super::containerd_imports(&config, text).unwrap();
            let want: Vec<_> = want.iter().map(|f| d.join(f)).collect();
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn glob_cases() {
        let cases = [
            ("star suffix", "*.toml", "99-nvidia.toml", true),
            (
                "star suffix, other ext",
                "*.toml",
                "99-nvidia.toml.bak",
                false,
            ),
            ("prefix and suffix", "99-*.toml", "99-nvidia.toml", true),
            ("two stars", "*-*.toml", "99-nvidia.toml", true),
            ("too short", "ab*ba", "aba", false),
            ("no star", "a.toml", "a.toml", true),
        ];
        for (name, pattern, file, want) in cases {
            assert_eq!(super::glob_match(pattern, file), want, "case {name}");
        }
    }
}
