//! Crash-safe replacement of configuration files owned by someone else (engine configs).
//!
//! Owns: atomic write (temp file in the same directory, write, fsync, rename, fsync directory;
//! [`WriteOptions::no_fsync`] drops the fsyncs for the shim's bundle `config.json` only),
//! keeping the file's mode and owner, the `<file>.bak` backup of the previous content (with the
//! file's mode and owner, written only once the new content is), and removal with the same
//! backup. A path that is a symlink is written at its target ([`real_path`]). It never writes when the content is unchanged and never truncates a file
//! in place, so a crash leaves either the old or the new file, never a torn one.
//!
//! Temp files are named `.<name>.tmp-<pid>-<n>`: hidden and not ending in the file's extension,
//! so a glob such as containerd's `imports = ["conf.d/*.toml"]` never picks one up. A temp file
//! left by a crash is not cleaned up automatically.
//!
//! [`WriteOptions::fault`] is a TEST-ONLY fault-injection point: it is called at every [`Step`]
//! of the write with the path the step just touched. The library never reads the environment;
//! the binaries (`nvidia-ctk runtime configure`, the shim's config.json write) arm it from
//! `NVCT_FAULT_AT=<step>` ([`Step::NAMES`]) to `abort()` there, so a test can kill the process at
//! each step and check the file is always the old or the new content.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Errors of file replacement; each names the user's file (never only a temp file) and, for
/// the usual causes, what to do.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{path}: {what}: {source}{}", advice(source))]
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
    #[error("{path}: a chain of more than 40 symlinks; pass the real file")]
    LinkLoop { path: PathBuf },
}

/// What to do about a failed write, by cause.
fn advice(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            " (run as root; a file marked immutable needs `chattr -i` first); nothing was changed"
        }
        Some(libc::EROFS) => " (the file system is read-only: remount it read-write, or give the command a path on a writable one); nothing was changed",
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => " (no space left on the device); nothing was changed",
        _ => "",
    }
}

/// The file a path names: `path` itself, or, when it is a symlink (config management, k3s and
/// RKE2 layouts), the file at the end of the chain (which may not exist yet). Writes go there,
/// atomically in the target's directory, so the link stays and the engine reads the new content.
pub fn real_path(path: &Path) -> Result<PathBuf, FsError> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&p).map_err(io_err(&p, "read the symlink"))?;
                p = if target.is_absolute() {
                    target
                } else {
                    parent(&p).join(target)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(FsError::LinkLoop {
        path: path.to_path_buf(),
    })
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
    /// The path is a character device or a FIFO (`/dev/null`, `/dev/stdout`, a pipe): written
    /// through, never replaced by a file.
    Through,
}

/// The steps of [`write_atomic`], in order: the points where a crash is simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The temp file exists, empty (mode 0600).
    TempCreated,
    /// The content is written to the temp file, not yet synced, mode not yet set.
    TempWritten,
    /// Owner and mode are set and the temp file is fsynced (not with `no_fsync`).
    TempSynced,
    /// The temp file was renamed over the file; the directory is not yet fsynced.
    Renamed,
    /// The directory is fsynced (not with `no_fsync`): the write is complete.
    DirSynced,
}

impl Step {
    /// Every step with its name (the value of the binaries' `NVCT_FAULT_AT`).
    pub const NAMES: &'static [(&'static str, Step)] = &[
        ("temp-created", Step::TempCreated),
        ("temp-written", Step::TempWritten),
        ("temp-synced", Step::TempSynced),
        ("renamed", Step::Renamed),
        ("dir-synced", Step::DirSynced),
    ];

    pub fn parse(name: &str) -> Option<Step> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
    }

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("?", |(n, _)| n)
    }
}

/// Options of [`write_atomic`].
#[derive(Default)]
pub struct WriteOptions<'a> {
    /// Keep the previous content in `<file>.bak`.
    pub backup: bool,
    /// TEST-ONLY fault injection: called at each [`Step`] of the write of the file itself (not
    /// of its `.bak`) with the path the step touched (the temp file, then the file).
    pub fault: Option<&'a dyn Fn(Step, &Path)>,
    /// Skip both fsyncs (the temp file's and the directory's); the rename stays, so no reader
    /// ever sees a half-written file. Only for a file whose loss in a crash loses nothing: the
    /// shim's bundle `config.json` (runc reads it right away, and a crash that could lose it
    /// ends the container with it). Operators' files (engine configs, CDI specs, the
    /// installer's state) keep the default: durable.
    pub no_fsync: bool,
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
    if let Some(written) = write_through_special(path, content)? {
        return Ok(written);
    }
    write_atomic_as(&real_path(path)?, content, opts, None)
}

/// Atomic replacement is for regular files: replacing `/dev/null` (`--output=/dev/null`, a dry
/// check people script) with a file breaks the node. A path that names a character device or a
/// FIFO (through any symlinks, `/dev/stdout` included) is written through, as upstream does; a
/// directory, a socket or a block device is refused. `None`: a regular file or nothing there.
fn write_through_special(path: &Path, content: &[u8]) -> Result<Option<Written>, FsError> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(_) => return Ok(None),
    };
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(None);
    }
    if kind.is_char_device() || kind.is_fifo() {
        let mut f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err(path, "open for writing"))?;
        f.write_all(content).map_err(io_err(path, "write"))?;
        return Ok(Some(Written::Through));
    }
    let (what, errno) = if kind.is_dir() {
        (
            "is a directory, not a file: name a file in it",
            libc::EISDIR,
        )
    } else {
        (
            "is a socket or a block device, not a file: name a regular file",
            libc::EINVAL,
        )
    };
    Err(FsError::Io {
        path: path.to_path_buf(),
        what,
        source: io::Error::from_raw_os_error(errno),
    })
}

/// The backup of a file whose metadata is `original`: written with the original's mode, owner
/// and group from the start (its temp file is 0600 until then), so a 0600 config that holds
/// registry credentials never has a world-readable `.bak`, not even for an instant.
fn write_backup(path: &Path, old: &[u8], original: &fs::Metadata) -> Result<(), FsError> {
    write_atomic_as(
        &backup_path(path),
        old,
        &WriteOptions::default(),
        Some((original, path)),
    )
    .map(drop)
}

/// [`write_atomic`], with the mode, owner and extended attributes (ACLs) of `like` (its
/// metadata and path) instead of the existing file's.
fn write_atomic_as(
    path: &Path,
    content: &[u8],
    opts: &WriteOptions<'_>,
    like: Option<(&fs::Metadata, &Path)>,
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
    let meta = match (&old, like) {
        (_, Some((like, _))) => Some(like.clone()),
        (Some(_), None) => Some(fs::metadata(path).map_err(io_err(path, "stat"))?),
        (None, None) => None,
    };
    let fault = |step: Step, p: &Path| {
        if let Some(f) = opts.fault {
            f(step, p);
        }
    };
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io_err(path, "create a temp file next to it"))?;
        fault(Step::TempCreated, &tmp);
        f.write_all(content)
            .map_err(io_err(path, "write the temp file"))?;
        fault(Step::TempWritten, &tmp);
        let mode = meta.as_ref().map_or(0o644, |m| m.mode() & 0o7777);
        if let Some(m) = &meta {
            std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()))
                .map_err(io_err(path, "chown the temp file"))?;
        }
        f.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io_err(path, "chmod the temp file"))?;
        let attrs_from = like.map(|(_, p)| p).or(old.as_ref().map(|_| path));
        if let Some(src) = attrs_from {
            nvct_sys::copy_xattrs(src, std::os::fd::AsFd::as_fd(&f));
        }
        if !opts.no_fsync {
            f.sync_all().map_err(io_err(path, "fsync the temp file"))?;
        }
        fault(Step::TempSynced, &tmp);
        // The backup only once the new content is safely written: a write that fails (read-only
        // fs, not root) leaves no `.bak` behind; one whose rename fails (an immutable file) puts
        // the previous `.bak` back.
        let mut previous_bak = None;
        if let (Some(old), true, Some(m)) = (&old, opts.backup, &meta) {
            let bak = backup_path(path);
            previous_bak = Some((fs::read(&bak).ok(), fs::metadata(&bak).ok()));
            write_backup(path, old, m)?;
        }
        let renamed = fs::rename(&tmp, path).map_err(io_err(path, "rename the temp file over it"));
        if let (Err(_), Some((before, before_meta))) = (&renamed, previous_bak) {
            let bak = backup_path(path);
            match (before, before_meta) {
                (Some(b), Some(m)) => drop(write_atomic_as(
                    &bak,
                    &b,
                    &WriteOptions::default(),
                    Some((&m, &bak)),
                )),
                _ => drop(fs::remove_file(&bak)),
            }
        }
        renamed
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    fault(Step::Renamed, path);
    if !opts.no_fsync {
        sync_dir(dir)?;
    }
    fault(Step::DirSynced, path);
    Ok(if old.is_some() {
        Written::Replaced
    } else {
        Written::Created
    })
}

/// TEST-ONLY: a [`WriteOptions::fault`] hook that aborts the process (as a crash or
/// `kill -9` would end it: no unwinding, no cleanup) at step `at`. Binaries arm it from
/// `NVCT_FAULT_AT`; nothing else may.
pub fn abort_at(at: Step, program: &'static str) -> impl Fn(Step, &Path) {
    move |step, p| {
        if step == at {
            eprintln!(
                "{program}: NVCT_FAULT_AT={}: aborting at {}",
                step.name(),
                p.display()
            );
            std::process::abort();
        }
    }
}

/// An exclusive advisory lock (flock) on the directory of `path`, held until the returned
/// value is dropped. Every read-modify-write of an engine config by `nvidia-ctk` takes it, so
/// concurrent runs serialise instead of losing each other's updates. Locking the directory
/// (not a lock file) leaves nothing behind for an engine's `conf.d/*` glob to pick up. The
/// directory is created (0755) when missing.
pub fn lock_dir_of(path: &Path) -> Result<File, FsError> {
    let dir = parent(path);
    fs::create_dir_all(dir).map_err(io_err(dir, "create directory"))?;
    let f = File::open(dir).map_err(io_err(dir, "open directory to lock"))?;
    nvct_sys::flock_exclusive(std::os::fd::AsFd::as_fd(&f)).map_err(io_err(dir, "lock (flock)"))?;
    Ok(f)
}

/// Takes an exclusive advisory lock (flock) on `file` without waiting: `Ok(false)` when another
/// process holds it. Released when `file` is closed.
pub fn try_lock(file: &File) -> io::Result<bool> {
    nvct_sys::try_flock_exclusive(std::os::fd::AsFd::as_fd(file))
}

/// Remove `path` (keeping its content in `<file>.bak` when `backup`); `false` if it was absent.
pub fn remove_with_backup(path: &Path, backup: bool) -> Result<bool, FsError> {
    let path = &real_path(path)?;
    let Some(old) = (match fs::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(path, "read")(e)),
    }) else {
        return Ok(false);
    };
    if backup {
        let meta = fs::metadata(path).map_err(io_err(path, "stat"))?;
        write_backup(path, &old, &meta)?;
    }
    fs::remove_file(path).map_err(io_err(path, "remove"))?;
    sync_dir(parent(path))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_lock_fails_while_another_open_file_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("installer.pid");
        let open = || File::create(&p).unwrap();
        let first = open();
        assert!(try_lock(&first).unwrap(), "the first lock is taken");
        let second = open();
        assert!(!try_lock(&second).unwrap(), "a second open file is refused");
        drop(first);
        assert!(
            try_lock(&second).unwrap(),
            "taken once the holder closed its file"
        );
    }

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

    #[test]
    fn backups_keep_the_originals_mode_and_owner() {
        // A 0600 config owned by another user (it holds registry credentials): its `.bak`,
        // whether new or replacing a stale world-readable one, is 0600 and owned alike; the
        // same for the backup that a removal keeps. (Root: the tests chown.)
        use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        for (name, stale_bak) in [("new backup", false), ("stale 0644 backup replaced", true)] {
            let p = dir.path().join(format!("{}.toml", name.replace(' ', "-")));
            fs::write(&p, "secret = 1\n").unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
            chown(&p, Some(1234), Some(5678)).unwrap();
            if stale_bak {
                fs::write(backup_path(&p), "old").unwrap();
                fs::set_permissions(backup_path(&p), fs::Permissions::from_mode(0o644)).unwrap();
            }
            let opts = WriteOptions {
                backup: true,
                fault: None,
                no_fsync: false,
            };
            write_atomic(&p, b"secret = 2\n", &opts).unwrap();
            for f in [p.clone(), backup_path(&p)] {
                let m = fs::metadata(&f).unwrap();
                assert_eq!(
                    (m.mode() & 0o7777, m.uid(), m.gid()),
                    (0o600, 1234, 5678),
                    "case {name}: {}",
                    f.display()
                );
            }
            assert_eq!(
                fs::read_to_string(backup_path(&p)).unwrap(),
                "secret = 1\n",
                "case {name}"
            );
            fs::remove_file(backup_path(&p)).unwrap();
            assert!(remove_with_backup(&p, true).unwrap());
            let m = fs::metadata(backup_path(&p)).unwrap();
            assert_eq!(
                (m.mode() & 0o7777, m.uid(), m.gid()),
                (0o600, 1234, 5678),
                "case {name}: removal's backup"
            );
        }
    }

    #[test]
    fn extended_attributes_follow_the_file_and_its_backup() {
        // ACLs and labels are extended attributes; a `user.` one stands for them here.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("daemon.json");
        fs::write(&p, "{}").unwrap();
        if let Err(e) = nvct_sys::set_xattr(&p, c"user.nvct-test", b"kept!") {
            panic!("this file system keeps user xattrs: {e}");
        }
        let get = |path: &Path| nvct_sys::get_xattr(path, c"user.nvct-test");
        let opts = WriteOptions {
            backup: true,
            fault: None,
            no_fsync: false,
        };
        write_atomic(&p, b"{\"a\": 1}", &opts).unwrap();
        assert_eq!(get(&p).as_deref(), Some(&b"kept!"[..]), "the new file");
        assert_eq!(
            get(&backup_path(&p)).as_deref(),
            Some(&b"kept!"[..]),
            "its backup"
        );
    }

    #[test]
    fn fault_points_fire_in_order_with_the_state_they_name() {
        // Without the fsyncs (the shim's config.json) the file goes from old to new at the
        // rename all the same: never a torn or empty file at `p`.
        for no_fsync in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("c.toml");
            fs::write(&p, "old\n").unwrap();
            let seen = std::cell::RefCell::new(Vec::new());
            let hook = |step: Step, at: &Path| {
                let file = fs::read_to_string(&p).unwrap();
                let at_content = fs::read_to_string(at).unwrap();
                seen.borrow_mut().push((step.name(), file, at_content));
            };
            let opts = WriteOptions {
                backup: true,
                fault: Some(&hook),
                no_fsync,
            };
            write_atomic(&p, b"new\n", &opts).unwrap();
            let want: Vec<(&str, String, String)> = vec![
                ("temp-created", "old\n".into(), "".into()),
                ("temp-written", "old\n".into(), "new\n".into()),
                ("temp-synced", "old\n".into(), "new\n".into()),
                ("renamed", "new\n".into(), "new\n".into()),
                ("dir-synced", "new\n".into(), "new\n".into()),
            ];
            assert_eq!(*seen.borrow(), want, "no_fsync {no_fsync}");
            let left: Vec<_> = fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.contains(".tmp-"))
                .collect();
            assert!(
                left.is_empty(),
                "no_fsync {no_fsync}: temp files left {left:?}"
            );
        }
        for (name, step) in Step::NAMES {
            assert_eq!(Step::parse(name), Some(*step));
            assert_eq!(step.name(), *name);
        }
    }
}
