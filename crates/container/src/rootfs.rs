//! The one gate for paths inside a container rootfs. The rootfs is hostile: any component of
//! a path may be a symlink to `/`, `../../..`, or a `/proc` magic link. Every lookup here is an
//! `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)` relative to the rootfs directory fd, so
//! symlinks resolve as if the rootfs were `/`, and the result is a file descriptor: callers
//! mount onto or write through that fd and never walk a path string again.
//!
//! Where files may be created (one rule, [`Rootfs::check_create_in`]): on the rootfs's own
//! mount, or on a filesystem that is mounted nowhere in the runtime's (host's) mount namespace,
//! i.e. one made for this container alone (runc's `/dev` tmpfs, a `/run` tmpfs of containerd's
//! default spec or `podman --read-only`). Never on a filesystem the host also has mounted: a
//! volume, a host directory bound in whatever its type (a host tmpfs at `/dev/infiniband`, a
//! pod's emptyDir at `/run`): what is created there lives on the host (CVE-2024-0133). And
//! nothing is mounted onto a target whose mount is shared (it would propagate to the host and
//! outlive the container). Both are refused with the path and the rule named.
//!
//! No other module may join a path onto a container rootfs.

use super::mountinfo;
use nvct_sys as sys;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// `/a/b`: absolute, no `.`/`..`, no trailing `/`, no NUL or newline. What a container path
/// given on a hook's command line must look like.
pub fn is_clean_absolute(p: &Path) -> bool {
    let bytes = p.as_os_str().as_bytes();
    let mut comps = p.components();
    bytes.len() > 1
        && !bytes.ends_with(b"/")
        && !bytes.contains(&b'\0')
        && !bytes.contains(&b'\n')
        && !bytes.split(|b| *b == b'/').any(|c| c == b"." || c == b"..")
        && comps.next() == Some(Component::RootDir)
        && comps.all(|c| matches!(c, Component::Normal(_)))
}

#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    #[error("cannot open container rootfs {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("container path {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("container path {path} is {what}; refusing to mount onto or write through it")]
    BadTarget { path: PathBuf, what: &'static str },
    #[error("container path {path} is not absolute and clean")]
    BadPath { path: PathBuf },
    /// The creation rule refused: the directory's filesystem is also mounted on the host.
    #[error(
        "container path {path} is on a filesystem that is also mounted on the host (at \
         {host_mount}): a volume, i.e. a host directory bound into the container (a pod's \
         emptyDir, a host tmpfs); nothing is created there (files are created only on the \
         container's rootfs or on a filesystem made for the container alone)"
    )]
    HostVolume { path: PathBuf, host_mount: PathBuf },
    #[error("cannot read the host's mount table {path} (needed to tell a volume from a filesystem of the container's own): {source}")]
    HostMounts { path: PathBuf, source: io::Error },
}

/// The mounts of the runtime's (the host's) mount namespace: the reference of the creation
/// rule. Opened before the caller enters the container's mount namespace (a mountinfo file
/// shows the namespace its opener was in), read once, when a directory off the rootfs's own
/// mount is first checked: a start that creates nothing outside the rootfs never reads it.
pub struct HostMounts {
    path: PathBuf,
    file: std::sync::Mutex<Option<std::fs::File>>,
    /// Mounts at or below this path are left out (the container's own, [`mountinfo::outside`]).
    outside: Option<PathBuf>,
    entries: std::sync::OnceLock<Result<Vec<mountinfo::MountEntry>, String>>,
}

impl HostMounts {
    /// `/proc/self/mountinfo`: call before `setns` into the container.
    pub fn of_this_namespace() -> Result<HostMounts, RootfsError> {
        HostMounts::open(Path::new("/proc/self/mountinfo"))
    }

    /// For a hook the runtime started inside the container's mount namespace before
    /// pivot_root (createContainer): that namespace's table without the mounts at or below
    /// `rootfs` (the container's own), which is the runtime's table as it was when the
    /// namespace was made. The runtime's namespace, not the host init's: a runtime in a mount
    /// namespace of its own (docker as a snap, a unit with `PrivateMounts=`, `unshare -m`) has
    /// filesystems that `/proc/1/mountinfo` does not list, and a volume of one of them would
    /// pass for the container's own.
    pub fn of_this_namespace_outside(rootfs: &Path) -> Result<HostMounts, RootfsError> {
        let mut m = HostMounts::open(Path::new("/proc/self/mountinfo"))?;
        m.outside = Some(rootfs.to_path_buf());
        Ok(m)
    }

    /// The mount table at `path`.
    pub fn open(path: &Path) -> Result<HostMounts, RootfsError> {
        let file = std::fs::File::open(path).map_err(|source| RootfsError::HostMounts {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(HostMounts {
            path: path.to_path_buf(),
            file: std::sync::Mutex::new(Some(file)),
            outside: None,
            entries: std::sync::OnceLock::new(),
        })
    }

    /// A host mount of the filesystem `dev` (`major:minor`), if the host has it mounted.
    fn find(&self, dev: &str) -> Result<Option<&mountinfo::MountEntry>, RootfsError> {
        let entries = self.entries.get_or_init(|| {
            let file = self.file.lock().ok().and_then(|mut f| f.take());
            match file {
                Some(f) => match nvct_sys::procfs::read_from(f, u64::MAX) {
                    Ok(text) => Ok(match &self.outside {
                        Some(root) => mountinfo::outside(mountinfo::parse(&text), root),
                        None => mountinfo::parse(&text),
                    }),
                    Err(e) => Err(e.to_string()),
                },
                None => Err("already read".into()),
            }
        });
        match entries {
            Ok(entries) => Ok(entries.iter().find(|m| m.dev == dev)),
            Err(e) => Err(RootfsError::HostMounts {
                path: self.path.clone(),
                source: io::Error::other(e.clone()),
            }),
        }
    }
}

/// What a mount target must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A regular file or a character device (created empty if missing).
    File,
    /// A directory (created if missing).
    Dir,
}

pub struct Rootfs {
    dir: OwnedFd,
    path: PathBuf,
    /// The mount the rootfs directory is on (statx `STATX_MNT_ID`).
    mnt_id: u64,
    /// The runtime's mount namespace, for the creation rule.
    host: HostMounts,
    /// `/proc/self/mountinfo` of this mount namespace, read when first needed.
    mounts: std::sync::OnceLock<Vec<mountinfo::MountEntry>>,
}

const RESOLVE: u64 = sys::RESOLVE_IN_ROOT | sys::RESOLVE_NO_MAGICLINKS;

impl Rootfs {
    /// Opens the rootfs directory. `path` is a host path written by the engine (trusted);
    /// `host` is the runtime's mount table (see [`HostMounts`]).
    pub fn open(path: &Path, host: HostMounts) -> Result<Rootfs, RootfsError> {
        let dir = sys::openat2(cwd(), path, libc::O_PATH | libc::O_DIRECTORY, 0, 0).map_err(
            |source| RootfsError::Open {
                path: path.to_path_buf(),
                source,
            },
        )?;
        let mnt_id = sys::mount_id(dir.as_fd()).map_err(|source| RootfsError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Rootfs {
            dir,
            path: path.to_path_buf(),
            mnt_id,
            host,
            mounts: std::sync::OnceLock::new(),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// The host path this rootfs was opened at (for messages only).
    pub fn host_path(&self) -> &Path {
        &self.path
    }

    /// Resolves an absolute container path inside the rootfs with `flags` (O_PATH by default).
    pub fn resolve(&self, path: &Path, flags: i32) -> Result<OwnedFd, RootfsError> {
        let rel = relative(path)?;
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel.as_path()
        };
        sys::openat2(self.fd(), rel, flags, 0, RESOLVE).map_err(|source| RootfsError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Whether `path` resolves (inside the rootfs) to a directory.
    pub fn is_dir(&self, path: &Path) -> bool {
        self.resolve(path, libc::O_PATH | libc::O_DIRECTORY).is_ok()
    }

    /// Resolves `path` as a directory, creating missing components (0755) one at a time.
    pub fn mkdir_all(&self, path: &Path) -> Result<OwnedFd, RootfsError> {
        let rel = relative(path)?;
        // The usual case, an existing directory: the one resolve the walk below ends with
        // (one openat2 instead of one per component; the ld cache step makes a link in the
        // same few directories for every library). Any error takes the walk, which creates
        // what is missing and names the component that fails.
        if let Ok(dir) = self.resolve(path, libc::O_PATH | libc::O_DIRECTORY) {
            self.check_create_in(&dir, path)?;
            #[cfg(feature = "fault-injection")]
            fault::after_resolve(self, path);
            return Ok(dir);
        }
        let mut prefix = PathBuf::from("/");
        let mut dir = self.resolve(&prefix, libc::O_PATH | libc::O_DIRECTORY)?;
        for name in rel.components() {
            prefix.push(name);
            dir = match self.resolve(&prefix, libc::O_PATH | libc::O_DIRECTORY) {
                Ok(fd) => fd,
                Err(RootfsError::Io { source, .. })
                    if source.raw_os_error() == Some(libc::ENOENT) =>
                {
                    self.check_create_in(&dir, &prefix)?;
                    match sys::mkdirat(dir.as_fd(), Path::new(name.as_os_str()), 0o755) {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                        Err(source) => {
                            return Err(RootfsError::Io {
                                path: prefix,
                                source,
                            })
                        }
                    }
                    self.resolve(&prefix, libc::O_PATH | libc::O_DIRECTORY)
                        .map_err(|_| RootfsError::BadTarget {
                            path: prefix.clone(),
                            what: "a symlink that points nowhere inside the container",
                        })?
                }
                Err(e) => return Err(e),
            };
        }
        self.check_create_in(&dir, path)?;
        // TEST-ONLY (feature `fault-injection`): the image swaps the checked directory.
        #[cfg(feature = "fault-injection")]
        fault::after_resolve(self, path);
        Ok(dir)
    }

    /// Puts a new regular file holding `bytes` at `dir/name` (a container path): `dir` is
    /// resolved (created) through the gate, a temp file is created in it (`O_EXCL`, no symlink
    /// followed), written, and renamed over `name`. Nothing at `name` is ever opened: an
    /// image's symlink, hardlink (to a host file), FIFO or device there is replaced as a
    /// directory entry; a directory there is refused.
    pub fn replace_file(
        &self,
        dir: &Path,
        name: &str,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), RootfsError> {
        use std::io::Write;
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let path = dir.join(name);
        let dir = self.mkdir_all(dir)?;
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = format!(".{name}.nvct-{}-{n}", std::process::id());
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let err = |source| RootfsError::Io {
            path: path.clone(),
            source,
        };
        let fd = sys::openat(dir.as_fd(), Path::new(&tmp), flags, mode).map_err(err)?;
        let written = std::fs::File::from(fd).write_all(bytes);
        let renamed =
            written.and_then(|()| sys::renameat(dir.as_fd(), Path::new(&tmp), Path::new(name)));
        if let Err(e) = renamed {
            let _ = sys::unlinkat(dir.as_fd(), Path::new(&tmp));
            return Err(match e.raw_os_error() {
                Some(libc::EISDIR) | Some(libc::ENOTEMPTY) | Some(libc::EEXIST) => {
                    RootfsError::BadTarget {
                        path,
                        what: "a directory",
                    }
                }
                _ => err(e),
            });
        }
        Ok(())
    }

    fn mount_entry(&self, id: u64) -> Option<&mountinfo::MountEntry> {
        let mounts = self.mounts.get_or_init(|| {
            mountinfo::parse(
                &nvct_sys::procfs::read(Path::new("/proc/self/mountinfo")).unwrap_or_default(),
            )
        });
        mounts.iter().find(|m| m.id == id)
    }

    /// Whether files may be created in the directory `dir` (the container path `path`): it is
    /// on the rootfs's own mount, or on a filesystem the runtime's mount namespace has mounted
    /// nowhere (made for this container: runc's `/dev`, a `/run` tmpfs). A filesystem the host
    /// also has mounted (a volume, whatever its type) is refused with [`RootfsError::HostVolume`].
    fn check_create_in(&self, dir: &OwnedFd, path: &Path) -> Result<(), RootfsError> {
        let id = sys::mount_id(dir.as_fd()).map_err(|source| RootfsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if id == self.mnt_id {
            return Ok(());
        }
        let Some(mount) = self.mount_entry(id) else {
            return Err(RootfsError::BadTarget {
                path: path.to_path_buf(),
                what: "on a mount this mount namespace does not list; nothing is created there",
            });
        };
        match self.host.find(&mount.dev)? {
            None => Ok(()),
            Some(host) => Err(RootfsError::HostVolume {
                path: path.to_path_buf(),
                host_mount: host.mount_point.clone(),
            }),
        }
    }

    /// Refuses a mount target whose mount propagates (`shared`): what is mounted there would
    /// appear on the host too and stay after the container is gone.
    pub fn check_not_shared(&self, target: &OwnedFd, path: &Path) -> Result<(), RootfsError> {
        let id = sys::mount_id(target.as_fd()).map_err(|source| RootfsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        match self.mount_entry(id) {
            Some(m) if m.shared => Err(RootfsError::BadTarget {
                path: path.to_path_buf(),
                what: "on a shared mount (rootfsPropagation or a volume's propagation is shared), so a mount \
                       there would propagate to the host; use private or slave propagation, or the CDI path",
            }),
            _ => Ok(()),
        }
    }

    /// An fd for the object at `path` to mount onto, creating it (and its parents) if
    /// missing. An existing symlink, or an object of the wrong type, is refused.
    pub fn mount_target(&self, path: &Path, kind: Target) -> Result<OwnedFd, RootfsError> {
        let fd = self.mount_target_fd(path, kind)?;
        self.check_not_shared(&fd, path)?;
        // TEST-ONLY (feature `fault-injection`, off by default): the image swaps the object
        // between the check above and the caller's use of the fd.
        #[cfg(feature = "fault-injection")]
        fault::after_resolve(self, path);
        Ok(fd)
    }

    fn mount_target_fd(&self, path: &Path, kind: Target) -> Result<OwnedFd, RootfsError> {
        if kind == Target::Dir {
            return self.mkdir_all(path);
        }
        let (parent, name) = split(path)?;
        let dir = self.mkdir_all(&parent)?;
        let io_err = |source| RootfsError::Io {
            path: path.to_path_buf(),
            source,
        };
        match sys::openat(
            dir.as_fd(),
            &name,
            libc::O_RDONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            0o644,
        ) {
            Ok(fd) => return Ok(fd),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(io_err(e)),
        }
        let fd =
            sys::openat(dir.as_fd(), &name, libc::O_PATH | libc::O_NOFOLLOW, 0).map_err(io_err)?;
        let mode = sys::fstat(fd.as_fd()).map_err(io_err)?.st_mode & libc::S_IFMT;
        match mode {
            libc::S_IFREG | libc::S_IFCHR => Ok(fd),
            libc::S_IFLNK => Err(RootfsError::BadTarget {
                path: path.to_path_buf(),
                what: "a symlink",
            }),
            libc::S_IFDIR => Err(RootfsError::BadTarget {
                path: path.to_path_buf(),
                what: "a directory",
            }),
            _ => Err(RootfsError::BadTarget {
                path: path.to_path_buf(),
                what: "a special file",
            }),
        }
    }

    /// Removes the directory entry `dir/name` (a container path) if there is one: `dir` is
    /// resolved (created) through the gate, and `name` unlinked relative to it. Nothing at
    /// `name` is opened or followed: an image's symlink or hardlink (to a host file) loses
    /// only its name. A directory there is refused. For names another program then opens with
    /// `O_CREAT|O_TRUNC` (ldconfig's `ld.so.cache~`).
    pub fn remove_file(&self, dir: &Path, name: &str) -> Result<(), RootfsError> {
        let path = dir.join(name);
        let dir = self.mkdir_all(dir)?;
        match sys::unlinkat(dir.as_fd(), Path::new(name)) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => Err(RootfsError::BadTarget {
                path,
                what: "a directory",
            }),
            Err(source) => Err(RootfsError::Io { path, source }),
        }
    }
}

/// TEST-ONLY check-then-use race (cargo feature `fault-injection`, never in a default build).
/// The hook binaries (prestart and CDI) arm it from `NVCT_FAULT_SWAP_PATH=<container path>` and
/// `NVCT_FAULT_SWAP_TARGET=<host path>`; right after [`Rootfs::mount_target`] has resolved and
/// checked that container path (or [`Rootfs::mkdir_all`] has resolved that directory), the
/// object there is replaced (rename inside the rootfs; a directory is first moved aside to
/// [`MOVED`]) by a symlink to the host path, as a process in the image racing the hook would.
/// Whatever is then mounted must be the object that was checked (the fd), or nothing.
#[cfg(feature = "fault-injection")]
pub mod fault {
    use super::{split, Rootfs};
    use nvct_sys as sys;
    use std::os::fd::AsFd;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::OnceLock;

    static SWAP: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    static FIRED: AtomicBool = AtomicBool::new(false);
    /// Where a swapped directory goes (next to it, inside the rootfs).
    pub const MOVED: &str = ".nvct-fault-moved";

    /// Arms the swap of `container_path` for a symlink to `link_target`.
    pub fn arm(container_path: PathBuf, link_target: PathBuf) {
        let _ = SWAP.set((container_path, link_target));
    }

    pub(super) fn after_resolve(root: &Rootfs, path: &Path) {
        let Some((want, target)) = SWAP.get() else {
            return;
        };
        // Once: `mount_target` of a directory passes here twice (mkdir_all, then the check).
        if want != path || FIRED.swap(true, Ordering::SeqCst) {
            return;
        }
        let result = (|| -> Result<(), String> {
            let (parent, name) = split(path).map_err(|e| e.to_string())?;
            let dir = root
                .resolve(&parent, libc::O_PATH | libc::O_DIRECTORY)
                .map_err(|e| e.to_string())?;
            let tmp = Path::new(".nvct-fault-swap");
            sys::symlinkat(target, dir.as_fd(), tmp).map_err(|e| format!("symlink: {e}"))?;
            // A symlink cannot be renamed over a directory: move the directory aside first.
            let is_dir = sys::openat(
                dir.as_fd(),
                &name,
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY,
                0,
            )
            .is_ok();
            if is_dir {
                sys::renameat(dir.as_fd(), &name, Path::new(MOVED))
                    .map_err(|e| format!("move the directory aside: {e}"))?;
            }
            sys::renameat(dir.as_fd(), tmp, &name).map_err(|e| format!("rename: {e}"))
        })();
        match result {
            Ok(()) => eprintln!(
                "nvct fault-injection: swapped {} for a symlink to {}",
                path.display(),
                target.display()
            ),
            Err(e) => eprintln!(
                "nvct fault-injection: could not swap {}: {e}",
                path.display()
            ),
        }
    }
}

fn cwd() -> BorrowedFd<'static> {
    sys::cwd()
}

/// `/a/b` → `a/b`; anything not absolute, or with `.`/`..`, is refused: the plan only
/// produces clean absolute paths.
fn relative(path: &Path) -> Result<PathBuf, RootfsError> {
    let mut out = PathBuf::new();
    let mut comps = path.components();
    if comps.next() != Some(Component::RootDir) {
        return Err(RootfsError::BadPath {
            path: path.to_path_buf(),
        });
    }
    for c in comps {
        match c {
            Component::Normal(n) => out.push(n),
            _ => {
                return Err(RootfsError::BadPath {
                    path: path.to_path_buf(),
                })
            }
        }
    }
    Ok(out)
}

fn split(path: &Path) -> Result<(PathBuf, PathBuf), RootfsError> {
    let bad = || RootfsError::BadPath {
        path: path.to_path_buf(),
    };
    relative(path)?;
    let name = path.file_name().ok_or_else(bad)?;
    let parent = path.parent().ok_or_else(bad)?;
    Ok((parent.to_path_buf(), PathBuf::from(name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn symlinks_stay_inside_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("rootfs");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(root.join("usr")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        symlink(&outside, root.join("usr/lib64")).unwrap(); // absolute, to the host dir
        symlink("../../../../../..", root.join("usr/up")).unwrap();
        symlink("/proc/self/root/tmp", root.join("magic")).unwrap();
        let r = Rootfs::open(&root, HostMounts::of_this_namespace().unwrap()).unwrap();

        // An absolute symlink to a host dir dangles inside the root: refused, nothing created.
        let err = r
            .mount_target(Path::new("/usr/lib64/libcuda.so.1"), Target::File)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("points nowhere inside the container"),
            "{err}"
        );
        assert!(
            std::fs::read_dir(&outside).unwrap().next().is_none(),
            "nothing created outside the root"
        );
        // The same link resolves inside the root once its target exists there.
        std::fs::create_dir_all(root.join(outside.strip_prefix("/").unwrap())).unwrap();
        r.mount_target(Path::new("/usr/lib64/libcuda.so.1"), Target::File)
            .unwrap();
        assert!(root
            .join(outside.strip_prefix("/").unwrap())
            .join("libcuda.so.1")
            .exists());
        assert!(
            std::fs::read_dir(&outside).unwrap().next().is_none(),
            "nothing created outside the root"
        );

        r.mount_target(Path::new("/usr/up/x"), Target::File)
            .unwrap();
        assert!(root.join("x").exists(), "../ chains stop at the root");

        let err = r
            .mount_target(Path::new("/magic/y"), Target::File)
            .unwrap_err();
        assert!(
            err.to_string().contains("/magic"),
            "magic links refused: {err}"
        );

        symlink("/etc/passwd", root.join("usr/link")).unwrap();
        let err = r
            .mount_target(Path::new("/usr/link"), Target::File)
            .unwrap_err();
        assert!(err.to_string().contains("is a symlink"), "{err}");
        assert!(matches!(
            r.resolve(Path::new("usr/x"), libc::O_PATH),
            Err(RootfsError::BadPath { .. })
        ));
        assert!(matches!(
            r.resolve(Path::new("/usr/../x"), libc::O_PATH),
            Err(RootfsError::BadPath { .. })
        ));
    }
}
