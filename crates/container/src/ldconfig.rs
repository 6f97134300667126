//! The host ldconfig, run safely against a container rootfs: the fallback of the native ld
//! cache writer (`ld_cache.rs`), for the prestart hook and the CDI `update-ldcache` hook alike.
//!
//! The binary is opened on the host ([`open_host`]) before anything touches the container and
//! is executed from that fd (execveat), so nothing from the image is ever run. `@/sbin/ldconfig`
//! becomes `/sbin/ldconfig.real` where that exists (Ubuntu's `/sbin/ldconfig` is a shell
//! wrapper), as upstream does, and only a *static* ELF is accepted: a script would run the
//! image's `/bin/sh`, a dynamic ELF the image's dynamic loader, both as root.
//!
//! It runs in a clone3 child with new mount/pid/ipc/uts/net namespaces, chrooted into the
//! rootfs, with the container's /proc and /sys detached, an empty tmpfs over its /dev (a link
//! to `/dev/zero` or a device node finds nothing), rlimits (address space, CPU time, file size,
//! open files), no capabilities but the file-access ones, `no_new_privs`, `PDEATHSIG`, an empty
//! environment, `-i` (the image's aux cache is not read; ldconfig still saves one), and a
//! wall-clock limit after which it
//! is killed ([`TIMEOUT`]): a FIFO anywhere in the image's ld.so.conf tree blocks `open()`
//! forever, and then the container is refused instead of hanging. `ldconfig` follows symlinks
//! inside the rootfs, which the image controls, so the rootfs must *be* its `/` (`ldconfig -r
//! ROOT` from the host would follow them on the host). Its scratch files `/etc/ld.so.cache~`
//! and `/var/cache/ldconfig/aux-cache~`, which it opens with `O_CREAT|O_TRUNC`, are unlinked
//! through the rootfs gate first, so an image's hardlink there to a host file loses only its
//! name.
//!
//! Must not: look the binary up by a path after entering the container, or inherit any
//! environment.

use crate::rootfs::{Rootfs, RootfsError};
use nvct_sys as sys;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// The host ldconfig when none is configured (`update-ldcache --ldconfig-path`, and the
/// default `@/sbin/ldconfig` of the toolkit config).
pub const DEFAULT_LDCONFIG: &str = "/sbin/ldconfig";

/// The temporary name glibc's ldconfig writes the cache to before renaming it.
const SCRATCH_NAME: &str = "ld.so.cache~";
/// Where glibc's ldconfig saves its aux cache, and the temporary name it writes it to first
/// (`O_CREAT|O_TRUNC`, then a rename). `-i` only stops it from *reading* the aux cache: it
/// still saves one whenever that directory exists (glibc 2.36, seen with strace).
const AUX_CACHE_DIR: &str = "/var/cache/ldconfig";
const AUX_SCRATCH_NAME: &str = "aux-cache~";

/// How long the host ldconfig may run on one container (it takes milliseconds on real images).
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Its limits: address space, CPU seconds, size of a file it writes, open files.
const LIMITS: [(libc::__rlimit_resource_t, u64); 4] = [
    (libc::RLIMIT_AS, 1 << 30),
    (libc::RLIMIT_CPU, 5),
    (libc::RLIMIT_FSIZE, 256 << 20),
    (libc::RLIMIT_NOFILE, 1024),
];
/// The capabilities it keeps: reading and writing files of any owner in the rootfs.
const KEPT_CAPS: [u32; 4] = [
    0, /* CHOWN */
    1, /* DAC_OVERRIDE */
    2, /* DAC_READ_SEARCH */
    3, /* FOWNER */
];
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LdconfigError {
    #[error("the ldconfig path {path} is not absolute: the host ldconfig must be named by an absolute host path")]
    NotAbsolute { path: PathBuf },
    #[error("cannot open the host ldconfig {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error(
        "the host ldconfig {path} is {what}; only a statically linked ELF binary is run as root \
             against a container (set nvidia-container-cli.ldconfig, or --ldconfig-path, to the real \
             binary, e.g. \"@/sbin/ldconfig.real\" on Ubuntu)"
    )]
    NotStatic { path: PathBuf, what: &'static str },
    #[error("ld cache directory {path:?} holds a NUL byte")]
    BadDir { path: PathBuf },
    #[error("cannot prepare /etc in the container: {0}")]
    Etc(#[from] RootfsError),
    #[error("ldconfig for {rootfs}: cannot start a child in new namespaces (clone3): {source}")]
    Clone { rootfs: PathBuf, source: io::Error },
    #[error("ldconfig for {rootfs}: cannot wait for the child: {source}")]
    Wait { rootfs: PathBuf, source: io::Error },
    #[error(
        "the host ldconfig failed for {rootfs} (exit status {code}); its stderr above says why"
    )]
    Failed { rootfs: PathBuf, code: i32 },
    #[error("the host ldconfig did not finish within {}s for {rootfs} and was killed: the image's \
             ld.so.conf tree (or a library) is a FIFO, a device or otherwise unreadable", TIMEOUT.as_secs())]
    TimedOut { rootfs: PathBuf },
}

/// Opens the host ldconfig binary: `path`, or `path.real` when that exists (Ubuntu). `path`
/// must be absolute (a host path, never resolved in a container) and the file a static ELF.
pub fn open_host(path: &Path) -> Result<OwnedFd, LdconfigError> {
    if !path.is_absolute() {
        return Err(LdconfigError::NotAbsolute {
            path: path.to_path_buf(),
        });
    }
    let mut real = path.as_os_str().to_owned();
    real.push(".real");
    let path = if Path::new(&real).is_file() {
        PathBuf::from(real)
    } else {
        path.to_path_buf()
    };
    let file = std::fs::File::open(&path).map_err(|source| LdconfigError::Open {
        path: path.clone(),
        source,
    })?;
    let mut head = vec![0u8; 64 << 10];
    let n = file
        .read_at(&mut head, 0)
        .map_err(|source| LdconfigError::Open {
            path: path.clone(),
            source,
        })?;
    head.truncate(n);
    if let Err(what) = static_elf(&head) {
        return Err(LdconfigError::NotStatic { path, what });
    }
    Ok(OwnedFd::from(file))
}

pub use nvct_formats::elf::static_elf;

/// Runs `ldconfig DIR...` from the fd `ldconfig` (see [`open_host`]) with the rootfs as `/`.
/// Must be called from inside the container's mount namespace (its /proc and /sys are the
/// mounts detached in the child).
pub fn run_isolated(
    root: &Rootfs,
    ldconfig: BorrowedFd,
    dirs: &[PathBuf],
) -> Result<(), LdconfigError> {
    root.mkdir_all(Path::new("/etc"))?;
    // ldconfig writes its new cache to `/etc/ld.so.cache~` with O_CREAT|O_TRUNC (O_NOFOLLOW
    // only): an image's hardlink there to a host file (a plain-directory rootfs on the host's
    // file system) would have that file truncated and written. The name goes first.
    root.remove_file(Path::new("/etc"), SCRATCH_NAME)?;
    // The same for the aux cache's scratch file, where ldconfig will write one (it does not
    // create the directory).
    if root.is_dir(Path::new(AUX_CACHE_DIR)) {
        root.remove_file(Path::new(AUX_CACHE_DIR), AUX_SCRATCH_NAME)?;
    }
    let mut argv = vec![CString::from(c"ldconfig"), CString::from(c"-i")];
    for d in dirs {
        argv.push(
            CString::new(d.as_os_str().as_bytes())
                .map_err(|_| LdconfigError::BadDir { path: d.clone() })?,
        );
    }
    let rootfs = root.host_path().to_path_buf();
    let flags = (libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWNET) as u64;
    if !sys::single_threaded() {
        let source = io::Error::other("the calling process has more than one thread");
        return Err(LdconfigError::Clone { rootfs, source });
    }
    // The child's new mount namespace carries the working directory over as its own copy.
    sys::fchdir(root.fd()).map_err(|source| LdconfigError::Clone {
        rootfs: rootfs.clone(),
        source,
    })?;
    // The child only makes syscalls, prints one line and execs or `exit_now`s.
    let (pid, pidfd) =
        sys::fork_into_new_namespaces(flags).map_err(|source| LdconfigError::Clone {
            rootfs: rootfs.clone(),
            source,
        })?;
    if pid == 0 {
        let e = match confine(root) {
            Ok(()) => sys::exec_fd(ldconfig, &argv, &[]),
            Err(e) => e,
        };
        eprintln!(
            "nvct: cannot run the host ldconfig in {}: {e}",
            rootfs.display()
        );
        sys::exit_now(127);
    }
    let finished = match &pidfd {
        Some(fd) => sys::wait_pidfd(fd.as_fd(), TIMEOUT).map_err(|source| LdconfigError::Wait {
            rootfs: rootfs.clone(),
            source,
        })?,
        None => true,
    };
    if !finished {
        sys::kill_now(pid);
        let _ = sys::wait(pid);
        return Err(LdconfigError::TimedOut { rootfs });
    }
    match sys::wait(pid) {
        Ok(0) => Ok(()),
        Ok(code) => Err(LdconfigError::Failed { rootfs, code }),
        Err(source) => Err(LdconfigError::Wait { rootfs, source }),
    }
}

/// In the ldconfig child: everything but the exec (see the module doc).
fn confine(root: &Rootfs) -> io::Result<()> {
    let step =
        |what: &'static str| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    sys::die_with_parent().map_err(step("PDEATHSIG"))?;
    sys::make_mounts_private().map_err(step("private mounts"))?;
    // The working directory (the rootfs, set before the clone) is now its copy in our own
    // mount namespace; `root.fd()` is a mount of the namespace we left, under which no mount of
    // ours could be made or removed.
    sys::chroot_cwd_checked(root.fd()).map_err(step("chroot"))?;
    // The container's /proc, /sys and /dev are not ldconfig's business; detached (and /dev
    // covered by an empty tmpfs), they cannot be reached through any path the image controls.
    for mnt in [c"/proc", c"/sys"] {
        match sys::detach(mnt) {
            Err(e)
                if e.raw_os_error() != Some(libc::EINVAL)
                    && e.raw_os_error() != Some(libc::ENOENT) =>
            {
                return Err(step("detaching /proc and /sys")(e));
            }
            _ => {} // detached, or not a mount point
        }
    }
    if std::fs::symlink_metadata("/dev").is_ok_and(|m| m.is_dir()) {
        sys::mount_tmpfs(c"/dev", c"size=4k,nr_inodes=16,mode=0755")
            .map_err(step("tmpfs over /dev"))?;
    }
    for (resource, value) in LIMITS {
        sys::limit(resource, value).map_err(step("rlimit"))?;
    }
    sys::keep_only_caps(&KEPT_CAPS).map_err(step("dropping capabilities"))?;
    sys::no_new_privs().map_err(step("no_new_privs"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_hosts_ldconfig_is_static() {
        // Debian's and Ubuntu's ldconfig(.real) are static-pie: the stock config must work.
        let fd = open_host(Path::new("/sbin/ldconfig")).expect("the stock ldconfig is accepted");
        drop(fd);
        let e = open_host(Path::new("/bin/sh")).unwrap_err().to_string();
        assert!(
            e.contains("dynamically linked") && e.contains("nvidia-container-cli.ldconfig"),
            "{e}"
        );
    }
}
