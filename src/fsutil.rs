//! Crash-safe replacement of configuration files owned by someone else (engine configs).
//!
//! Owns: atomic write (temp file in the same directory, write, fsync, rename, fsync directory),
//! keeping the file's mode and owner, the `<file>.bak` backup of the previous content, and removal
//! with the same backup. It never writes when the content is unchanged and never truncates a file
//! in place, so a crash leaves either the old or the new file, never a torn one.
//!
//! Temp files are named `.<name>.tmp-<pid>-<n>`: hidden and not ending in the file's extension,
//! so a glob such as containerd's `imports = ["conf.d/*.toml"]` never picks one up. A temp file
//! left by a crash is not cleaned up automatically.
//!
//! [`WriteOptions::after_temp_write`] is a TEST-ONLY fault-injection point: the binary sets it
//! (from `NVCT_FAULT_AFTER_TEMP_WRITE=1`) to abort between writing the temp file and renaming it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Errors of file replacement; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
}

fn io_err<'p>(path: &'p Path, what: &'static str) -> impl FnOnce(io::Error) -> FsError + 'p {
    move |source| FsError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The file already had this content; nothing was touched.
    Unchanged,
    /// The file was created.
    Created,
    /// The file was replaced; the old content is in `<file>.bak`.
    Replaced,
}

/// Options of [`write_atomic`].
#[derive(Default)]
pub struct WriteOptions<'a> {
    /// Keep the previous content in `<file>.bak`.
    pub backup: bool,
    /// TEST-ONLY fault injection: called with the temp path after it is written and synced,
    /// before the rename.
    pub after_temp_write: Option<&'a dyn Fn(&Path)>,
}

/// `<file>.bak`.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".bak");
    PathBuf::from(s)
}

/// Read a file, `None` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<String>, FsError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, "read")(e)),
    }
}

fn temp_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

fn sync_dir(dir: &Path) -> Result<(), FsError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir, "fsync directory"))
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Replace `path` with `content` atomically, keeping mode and owner (new files: 0644, parent
/// directories created 0755).
pub fn write_atomic(
    path: &Path,
    content: &[u8],
    opts: &WriteOptions<'_>,
) -> Result<Written, FsError> {
    let old = match fs::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(path, "read")(e)),
    };
    if old.as_deref() == Some(content) {
        return Ok(Written::Unchanged);
    }
    let dir = parent(path);
    fs::create_dir_all(dir).map_err(io_err(dir, "create directory"))?;
    let meta = match &old {
        Some(_) => Some(fs::metadata(path).map_err(io_err(path, "stat"))?),
        None => None,
    };
    if let (Some(old), true) = (&old, opts.backup) {
        let plain = WriteOptions::default();
        write_atomic(&backup_path(path), old, &plain)?;
    }
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io_err(&tmp, "create temp file"))?;
        f.write_all(content).map_err(io_err(&tmp, "write"))?;
        let mode = meta.as_ref().map_or(0o644, |m| m.mode() & 0o7777);
        if let Some(m) = &meta {
            std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()))
                .map_err(io_err(&tmp, "chown"))?;
        }
        f.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io_err(&tmp, "chmod"))?;
        f.sync_all().map_err(io_err(&tmp, "fsync"))?;
        if let Some(hook) = opts.after_temp_write {
            hook(&tmp);
        }
        fs::rename(&tmp, path).map_err(io_err(path, "rename temp file over"))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    sync_dir(dir)?;
    Ok(if old.is_some() {
        Written::Replaced
    } else {
        Written::Created
    })
}

/// Remove `path` (keeping its content in `<file>.bak` when `backup`); `false` if it was absent.
pub fn remove_with_backup(path: &Path, backup: bool) -> Result<bool, FsError> {
    let Some(old) = (match fs::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(path, "read")(e)),
    }) else {
        return Ok(false);
    };
    if backup {
        write_atomic(&backup_path(path), &old, &WriteOptions::default())?;
    }
    fs::remove_file(path).map_err(io_err(path, "remove"))?;
    sync_dir(parent(path))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, initial content + mode, new content, expected outcome, expected backup)
    type Case = (
        &'static str,
        Option<(&'static str, u32)>,
        &'static str,
        Written,
        Option<&'static str>,
    );

    #[test]
    fn writes() {
        let cases: &[Case] = &[
            ("create", None, "new\n", Written::Created, None),
            (
                "replace keeps mode",
                Some(("old\n", 0o640)),
                "new\n",
                Written::Replaced,
                Some("old\n"),
            ),
            (
                "unchanged",
                Some(("same\n", 0o600)),
                "same\n",
                Written::Unchanged,
                None,
            ),
        ];
        for (name, initial, new, want, want_bak) in cases {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("sub/config.toml");
            if let Some((text, mode)) = initial {
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                fs::write(&p, text).unwrap();
                fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).unwrap();
            }
            let got = write_atomic(
                &p,
                new.as_bytes(),
                &WriteOptions {
                    backup: true,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(got, *want, "case {name}");
            assert_eq!(fs::read_to_string(&p).unwrap(), *new, "case {name}");
            let mode = fs::metadata(&p).unwrap().mode() & 0o7777;
            assert_eq!(mode, initial.map_or(0o644, |(_, m)| m), "case {name}: mode");
            assert_eq!(
                read_optional(&backup_path(&p)).unwrap().as_deref(),
                *want_bak,
                "case {name}: backup"
            );
            let leftovers: Vec<_> = fs::read_dir(p.parent().unwrap())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
                .collect();
            assert!(leftovers.is_empty(), "case {name}: temp files left");
        }
    }
}
