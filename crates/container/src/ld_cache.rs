//! The plan's `ldcache_dirs` in a container, for the prestart hook and `update-ldcache` alike
//! ([`refresh`]): the directories listed in `/etc/ld.so.conf.d` (so a later ldconfig in the
//! container keeps them), then the container's `/etc/ld.so.cache` written by our own code
//! ([`write_native`]): the image's cache as it is, with an entry and a soname link for each
//! injected library. No process is started and nothing of the image is executed or parsed
//! beyond its cache file and the ELF headers of the libraries we mounted.
//!
//! The host ldconfig (run isolated, `ldconfig.rs`) is the fallback wherever the result could
//! differ from what it would write: CUDA forward compatibility is on (the image's compat
//! libraries must go first), the image's cache cannot be read or uses glibc-hwcaps entries,
//! the image has no cache but an `ld.so.conf` of its own, a library has no readable soname,
//! the soname's path holds something else than a link, or the image's cache is beyond the
//! bounds of a real one (`IMAGE_CACHE_MAX` bytes, `ldcache::IMAGE_LIMITS` entries and string
//! bytes: a crafted cache of a few MiB could otherwise decode to millions of entries).
//! [`Refreshed`] says which one ran and why, for the log. One difference from ldconfig remains by design: libraries the image
//! added after its own last ldconfig run (a stale cache) stay missing from the cache.

use super::ldconfig::{self, LdconfigError};
use super::ldso_conf::{self, LdsoConfError};
use super::rootfs::{is_clean_absolute, Rootfs, RootfsError};
use super::symlinks::{self, SymlinkError};
use nvct_formats::elf;
use nvct_formats::ldcache::{self, Entry};
use nvct_model::Symlink;
use nvct_sys as sys;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

const CACHE_DIR: &str = "/etc";
const CACHE_NAME: &str = "ld.so.cache";
/// Largest image cache the native writer reads (real distribution caches are under 1 MiB);
/// a larger one, or one beyond [`ldcache::IMAGE_LIMITS`], goes to the host ldconfig, which
/// does not read the old cache at all. Together they bound the hook's memory and time on
/// image data to a few tens of MiB and milliseconds.
const IMAGE_CACHE_MAX: u64 = 4 << 20;

/// Which writer made the container's cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refreshed {
    /// Written natively with this many injected libraries.
    Native { libraries: usize },
    /// The host ldconfig ran, for this reason.
    Ldconfig { why: String },
}

impl std::fmt::Display for Refreshed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refreshed::Native { libraries } => {
                write!(f, "ld cache written natively ({libraries} libraries added)")
            }
            Refreshed::Ldconfig { why } => write!(f, "ld cache by the host ldconfig: {why}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Ldconfig(#[from] LdconfigError),
    #[error(transparent)]
    Conf(#[from] LdsoConfError),
    #[error(transparent)]
    Rootfs(#[from] RootfsError),
    #[error(transparent)]
    Symlink(#[from] SymlinkError),
    #[error("cannot write the container's ld cache: {0}")]
    Write(#[from] ldcache::WriteError),
    #[error("ld cache directory {path:?} is not an absolute, clean path without newlines")]
    BadDir { path: PathBuf },
}

/// The plan's `ldcache_dirs`: lists `dirs` in `/etc/ld.so.conf.d/00-nvcr-<hash>.conf`
/// (skipped when the image's `/etc/ld.so.conf.d` cannot be written safely), makes sure
/// `/etc/ld.so.conf` includes that directory when the image has none, then writes the cache:
/// natively for `libs` (the injected libraries, container paths) unless `native` is off or
/// [`write_native`] says the host ldconfig is needed, else with `ldconfig` (the host binary's
/// fd, [`ldconfig::open_host`]).
pub fn refresh(
    root: &Rootfs,
    ldconfig: BorrowedFd,
    dirs: &[PathBuf],
    libs: &[PathBuf],
    native: bool,
) -> Result<Refreshed, RefreshError> {
    if let Some(bad) = dirs.iter().find(|d| !is_clean_absolute(d)) {
        return Err(RefreshError::BadDir { path: bad.clone() });
    }
    // Looked at before our own ld.so.conf is made.
    let plan = if native {
        native_plan(root, libs)
    } else {
        Err("turned off (features.disable-native-ldcache)".to_string())
    };
    if !dirs.is_empty() {
        let text: String = dirs.iter().map(|d| format!("{}\n", d.display())).collect();
        match ldso_conf::write_conf(root, "00-nvcr", &text) {
            // The image's ld.so.conf.d is a link out of the rootfs or not a directory: it is
            // not written through, and the cache still gets `dirs`.
            Err(LdsoConfError::Rootfs(RootfsError::BadTarget { .. })) => {}
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
    }
    ldso_conf::ensure_ldso_conf(root)?;
    match plan {
        Ok(plan) => write_native(root, plan),
        Err(why) => {
            ldconfig::run_isolated(root, ldconfig, dirs)?;
            Ok(Refreshed::Ldconfig { why })
        }
    }
}

/// What [`write_native`] writes: the cache's entries and the soname links.
#[derive(Debug)]
pub struct NativePlan {
    entries: Vec<Entry>,
    links: Vec<Symlink>,
    libraries: usize,
}

/// Reads what the native cache needs, or says why the host ldconfig must run instead.
fn native_plan(root: &Rootfs, libs: &[PathBuf]) -> Result<NativePlan, String> {
    if compat_enabled(root) {
        return Err(
            "CUDA forward compatibility is on (the image's compat libraries go first)".into(),
        );
    }
    let image = image_entries(root)?;
    if let Some(e) = image.iter().find(|e| e.hwcap != 0) {
        return Err(format!(
            "the image's cache has glibc-hwcaps entries ({})",
            e.path.display()
        ));
    }
    let mut ours = Vec::new();
    let mut links = Vec::new();
    for lib in libs {
        let (Some(dir), Some(file)) = (lib.parent(), lib.file_name()) else {
            return Err(format!("{} is not a library path", lib.display()));
        };
        let so = read_shared_object(root, lib)?;
        let soname_path = dir.join(&so.soname);
        if file != std::ffi::OsStr::new(&so.soname) {
            link_is_free(root, dir, &so.soname, file)?;
            links.push(Symlink {
                target: PathBuf::from(file),
                link: soname_path.clone(),
            });
        }
        ours.push(Entry {
            flags: so.cache_flags,
            soname: so.soname,
            path: soname_path,
            hwcap: 0,
        });
    }
    let libraries = ours.len();
    Ok(NativePlan {
        entries: merge(image, ours),
        links,
        libraries,
    })
}

/// The image's entries with `ours` put in: an image entry with the soname and flags of one of
/// ours is dropped (the injected driver library wins), ours go first among equal names.
pub fn merge(image: Vec<Entry>, ours: Vec<Entry>) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(image.len() + ours.len());
    for e in ours {
        if !out
            .iter()
            .any(|o| o.soname == e.soname && o.flags == e.flags)
        {
            out.push(e);
        }
    }
    let kept = image.into_iter().filter(|i| {
        !out.iter()
            .any(|o| o.soname == i.soname && o.flags == i.flags)
    });
    let mut kept: Vec<Entry> = kept.collect();
    out.append(&mut kept);
    out
}

/// Makes the links and writes `/etc/ld.so.cache` (a new file renamed over the old one).
fn write_native(root: &Rootfs, plan: NativePlan) -> Result<Refreshed, RefreshError> {
    symlinks::create(root, &plan.links)?;
    let bytes = ldcache::write(&plan.entries)?;
    root.replace_file(Path::new(CACHE_DIR), CACHE_NAME, &bytes, 0o644)?;
    Ok(Refreshed::Native {
        libraries: plan.libraries,
    })
}

/// Whether `enable-cuda-compat` (ours, in this container) listed the compat directory.
fn compat_enabled(root: &Rootfs) -> bool {
    let Ok(dir) = root.resolve(
        Path::new("/etc/ld.so.conf.d"),
        libc::O_RDONLY | libc::O_DIRECTORY,
    ) else {
        return false;
    };
    let ours = |n: &[u8]| {
        n.strip_prefix(ldso_conf::COMPAT_CONF_PREFIX.as_bytes())
            .is_some_and(|rest| rest.starts_with(b"-"))
    };
    sys::list_dir(dir.as_fd(), ours, 1).is_ok_and(|names| !names.is_empty())
}

/// Opens a container path for reading without following a final symlink or blocking on a
/// FIFO; only a regular file is returned.
fn open_regular(root: &Rootfs, path: &Path) -> Result<std::fs::File, String> {
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let fd = root.resolve(path, flags).map_err(|e| e.to_string())?;
    let st = sys::fstat(fd.as_fd()).map_err(|e| format!("{}: {e}", path.display()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(format!("{} is not a regular file", path.display()));
    }
    Ok(std::fs::File::from(fd))
}

/// glibc's dynamic loaders (x86-64, AArch64, i386), as an image's binaries name them.
const LOADERS: [&str; 3] = [
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/ld-linux-aarch64.so.1",
    "/lib/ld-linux.so.2",
];

/// The entries of the image's `/etc/ld.so.cache`. An image without one gets none only when it
/// has no glibc loader and no `ld.so.conf` either (busybox, distroless-static): nothing of the
/// image reads a cache there. With a loader, ldconfig would list the image's own libraries in
/// the directories it is given, so it decides.
fn image_entries(root: &Rootfs) -> Result<Vec<Entry>, String> {
    let path = Path::new(CACHE_DIR).join(CACHE_NAME);
    let missing = |p: &Path| {
        matches!(root.resolve(p, libc::O_PATH | libc::O_NOFOLLOW),
            Err(RootfsError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOENT))
    };
    if missing(&path) {
        if !missing(Path::new("/etc/ld.so.conf")) {
            return Err("the image has an /etc/ld.so.conf but no ld.so.cache".into());
        }
        if let Some(l) = LOADERS
            .iter()
            .find(|l| root.resolve(Path::new(l), libc::O_PATH).is_ok())
        {
            return Err(format!(
                "the image has a dynamic loader ({l}) but no ld.so.cache"
            ));
        }
        return Ok(vec![]);
    }
    let file = open_regular(root, &path)?;
    let too_large = || {
        format!(
            "the image's {} is larger than the native writer's {IMAGE_CACHE_MAX}-byte bound",
            path.display()
        )
    };
    // A regular file's size is known before reading; the read is bounded all the same.
    let size = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if size > IMAGE_CACHE_MAX {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(IMAGE_CACHE_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > IMAGE_CACHE_MAX {
        return Err(too_large());
    }
    ldcache::parse_within(&bytes, ldcache::IMAGE_LIMITS)
        .map_err(|e| format!("the image's {}: {e}", path.display()))
}

fn read_shared_object(root: &Rootfs, lib: &Path) -> Result<elf::SharedObject, String> {
    let file = open_regular(root, lib)?;
    elf::shared_object(&file).ok_or_else(|| {
        format!(
            "{} is not a shared library with a soname ldconfig would list",
            lib.display()
        )
    })
}

/// The soname link `dir/soname` may be made: nothing is there, or a symlink (ldconfig
/// replaces those too). A file or directory of the image there is what ldconfig would list
/// instead, so it decides.
fn link_is_free(
    root: &Rootfs,
    dir: &Path,
    soname: &str,
    file: &std::ffi::OsStr,
) -> Result<(), String> {
    let path = dir.join(soname);
    match root.resolve(&path, libc::O_PATH | libc::O_NOFOLLOW) {
        Err(RootfsError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => {
            Ok(())
        }
        Err(e) => Err(e.to_string()),
        Ok(fd) => match sys::fstat(fd.as_fd()) {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => Ok(()),
            _ => Err(format!(
                "{} in the image is not a link (to {})",
                path.display(),
                Path::new(file).display()
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(flags: i32, soname: &str, path: &str) -> Entry {
        Entry {
            flags,
            soname: soname.into(),
            path: path.into(),
            hwcap: 0,
        }
    }

    #[test]
    fn merge_cases() {
        let img_cuda = e(0x0303, "libcuda.so.1", "/usr/local/lib/libcuda.so.1");
        let img_c = e(0x0303, "libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6");
        let img_cuda32 = e(
            0x0003,
            "libcuda.so.1",
            "/usr/lib/i386-linux-gnu/libcuda.so.1",
        );
        let ours = e(
            0x0303,
            "libcuda.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        );
        let cases: Vec<(&str, Vec<Entry>, Vec<Entry>, Vec<Entry>)> = vec![
            (
                "empty image",
                vec![],
                vec![ours.clone()],
                vec![ours.clone()],
            ),
            (
                "ours replaces the image's of the same name and flags",
                vec![img_c.clone(), img_cuda.clone()],
                vec![ours.clone()],
                vec![ours.clone(), img_c.clone()],
            ),
            (
                "other flags stay",
                vec![img_cuda32.clone()],
                vec![ours.clone()],
                vec![ours.clone(), img_cuda32.clone()],
            ),
            (
                "ours once",
                vec![],
                vec![ours.clone(), ours.clone()],
                vec![ours.clone()],
            ),
            (
                "nothing of ours",
                vec![img_c.clone()],
                vec![],
                vec![img_c.clone()],
            ),
        ];
        for (name, image, ours, want) in cases {
            assert_eq!(merge(image, ours), want, "case {name}");
        }
    }
}
