//! Thin wrappers over the privileged Linux calls the project makes: openat2, the new mount API
//! (open_tree, mount_setattr, move_mount, fsopen/fsconfig/fsmount), setns, clone3, execveat,
//! statx, capset/prctl/setrlimit for the ldconfig child, xattrs, mknod, pipes, locks. Files:
//! `sys/bpf.rs` the bpf(2) commands of the cgroup v2 device program, `sys/nvml.rs` the raw
//! NVML calls `nvml-wrapper` lacks, `sys/process.rs` signals, a socket's peer, the environment,
//! `sys/procfs.rs` the reading of procfs files.
//! Every function here is safe: [`in_child`] wraps fork(2) so that its child can only run a
//! closure and exit.
//!
//! The only crate of the workspace with `unsafe` operations (every other crate has
//! `unsafe_code = "forbid"` from `[workspace.lints]`): one operation per block, each with its
//! `SAFETY:` note (clippy's `undocumented_unsafe_blocks` and `multiple_unsafe_ops_per_block`,
//! denied in this crate's Cargo.toml). No policy here: callers decide what to mount where
//! (`nvct-container`, `nvct-inject`) and which paths are allowed (`nvct_container::rootfs`).

pub mod bpf;
pub mod nvml;
pub mod process;
pub mod procfs;

pub use process::{connect_unix_nonblocking, kill, peer_pid, remove_env_vars, Signals};

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
pub const RESOLVE_IN_ROOT: u64 = 0x10;

pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

const OPEN_TREE_CLONE: u32 = 1;
const AT_RECURSIVE: u32 = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
const FSCONFIG_SET_STRING: u32 = 1;
const FSCONFIG_CMD_CREATE: u32 = 6;
const FSMOUNT_CLOEXEC: u32 = 1;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

pub fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn owned(ret: libc::c_long) -> io::Result<OwnedFd> {
    // SAFETY: `ret` is a new file descriptor returned by the kernel that nothing else owns.
    check(ret).map(|fd| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// openat2(2) relative to `dir`.
pub fn openat2(
    dir: BorrowedFd,
    path: &Path,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let c = cstring(path)?;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: mode as u64,
        resolve,
    };
    // With RESOLVE_IN_ROOT the kernel answers EAGAIN when a mount or a rename anywhere on the
    // system raced the lookup of a `..` (openat2(2)): on a busy node other containers are
    // starting all the time, so retry; the lookup itself is still checked every time.
    let mut tries = 0;
    loop {
        // SAFETY: `c` and `how` outlive the call; the kernel reads `size_of::<OpenHow>()` bytes.
        let r = owned(unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c.as_ptr(),
                &how,
                std::mem::size_of::<OpenHow>(),
            )
        });
        match r {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && tries < 64 => tries += 1,
            other => return other,
        }
    }
}

/// openat(2) relative to `dir` (used for single names, never for paths).
pub fn openat(dir: BorrowedFd, name: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let c = cstring(name)?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    owned(
        unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC, mode) }
            as libc::c_long,
    )
}

pub fn mkdirat(dir: BorrowedFd, name: &Path, mode: u32) -> io::Result<()> {
    let c = cstring(name)?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode) } as libc::c_long).map(drop)
}

pub fn fstat(fd: BorrowedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value; the kernel fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } as libc::c_long)?;
    Ok(st)
}

pub fn fstatfs_type(fd: BorrowedFd) -> io::Result<i64> {
    // SAFETY: an all-zero `statfs` is a valid value; the kernel fills it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer.
    check(unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } as libc::c_long)?;
    Ok(st.f_type as i64)
}

/// A detached copy of the mount at `path` (open_tree(2) with OPEN_TREE_CLONE), with
/// `set`/`clear` mount attributes applied before it is attached anywhere.
pub fn clone_mount(path: &Path, set: u64, clear: u64) -> io::Result<OwnedFd> {
    let c = cstring(path)?;
    // SAFETY: `c` is valid for the call; flags are plain integers.
    let fd = owned(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as u32,
        )
    })?;
    set_mount_attr(fd.as_fd(), set, clear)?;
    Ok(fd)
}

pub fn set_mount_attr(mount: BorrowedFd, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let empty = c"";
    // SAFETY: `attr` and `empty` outlive the call; size matches the struct.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH as u32 | AT_RECURSIVE,
            &attr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Attaches the detached mount `mount` onto the object `target` refers to (no path walk).
pub fn move_mount(mount: BorrowedFd, target: BorrowedFd) -> io::Result<()> {
    let empty = c"";
    // SAFETY: both fds are valid for the call; empty paths with the *_EMPTY_PATH flags.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mount.as_raw_fd(),
            empty.as_ptr(),
            target.as_raw_fd(),
            empty.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// A new, detached tmpfs (fsopen/fsconfig/fsmount); returns the fd of its root.
pub fn new_tmpfs(options: &[(&CStr, &CStr)]) -> io::Result<OwnedFd> {
    // SAFETY: constant C string; flags 0.
    let fs = owned(unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), 0u32) })?;
    for (k, v) in options {
        // SAFETY: `k` and `v` are valid C strings for the call.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_STRING,
                k.as_ptr(),
                v.as_ptr(),
                0,
            )
        })?;
    }
    // SAFETY: plain fsconfig command without pointers.
    check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            0usize,
            0usize,
            0,
        )
    })?;
    // SAFETY: `fs` is a configured filesystem context.
    owned(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0u32) })
}

/// setns(2) into the namespace `ns` refers to.
pub fn setns(ns: BorrowedFd, nstype: i32) -> io::Result<()> {
    // SAFETY: plain syscall on a valid fd.
    check(unsafe { libc::setns(ns.as_raw_fd(), nstype) } as libc::c_long).map(drop)
}

/// Runs `f` in a child made by fork(2) (glibc's, which runs its atfork handlers) and returns
/// what the child said: its exit code (`f`'s return value) and the bytes it wrote to the
/// writer `f` is given (a pipe, read to its end here before the child is waited for).
///
/// Safe to call from a process with other threads (the prestart hook forks after a real NVML
/// has started threads of its own) because the child never returns into the caller's stack:
/// it ends with [`exit_now`] once `f` is done (or has panicked), so no destructor runs twice
/// and no other thread's state is ever used by more than one process. Only the calling thread
/// exists in the child: glibc resets malloc's locks there, so `f` may allocate, but a lock
/// another thread held at the fork (stdout/stderr, the environment, a logger) stays held in
/// the child, so `f` should report through its writer, not print or log.
pub fn in_child(f: impl FnOnce(&mut std::fs::File) -> i32) -> io::Result<(i32, Vec<u8>)> {
    use std::io::Read;
    let (rx, tx) = pipe()?;
    // SAFETY: the child below runs only `f` and ends with `_exit` (never returning into this
    // stack); the limits on what `f` may touch are the ones this fn's doc states, and breaking
    // them can only make the child wait on a lock, not use memory another process owns.
    let pid = check(unsafe { libc::fork() } as libc::c_long)? as libc::pid_t;
    if pid == 0 {
        drop(rx);
        let mut out = std::fs::File::from(tx);
        let code =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut out))).unwrap_or(101);
        drop(out);
        exit_now(code);
    }
    drop(tx);
    let mut msg = Vec::new();
    let read = std::fs::File::from(rx).read_to_end(&mut msg);
    let code = wait(pid)?;
    read?;
    Ok((code, msg))
}

/// clone3(2) as a fork into new namespaces `flags` (CLONE_NEW*). Returns 0 in the child, and
/// in the parent the child's pid with a pidfd for it (CLONE_PIDFD). The child should end with
/// an exec or [`exit_now`] (returning runs the parent's destructors a second time).
///
/// Refused unless this process is single-threaded ([`single_threaded`]): a raw clone3 skips
/// glibc's atfork handlers, so a lock another thread held (malloc's among them) would stay
/// locked in the child.
pub fn fork_into_new_namespaces(flags: u64) -> io::Result<(libc::pid_t, Option<OwnedFd>)> {
    if !single_threaded() {
        return Err(io::Error::other(
            "the calling process has more than one thread",
        ));
    }
    let mut pidfd: libc::c_int = -1;
    let args = CloneArgs {
        flags: flags | libc::CLONE_PIDFD as u64,
        pidfd: &mut pidfd as *mut libc::c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..Default::default()
    };
    // SAFETY: no CLONE_VM, so this behaves like fork(2) and the child gets its own copy of
    // memory; this process has one thread (checked above, and only this thread could start
    // another), so no lock is held in the copy; `args` and `pidfd` outlive the call.
    let pid =
        check(unsafe { libc::syscall(libc::SYS_clone3, &args, std::mem::size_of::<CloneArgs>()) })?
            as libc::pid_t;
    // SAFETY: in the parent the kernel stored a new pidfd that nobody else owns.
    Ok((
        pid,
        (pid != 0 && pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) }),
    ))
}

/// Waits up to `timeout` for the process behind `pidfd` to exit; `Ok(false)` on timeout.
pub fn wait_pidfd(pidfd: BorrowedFd, timeout: std::time::Duration) -> io::Result<bool> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut p = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        match r {
            1.. => return Ok(true),
            0 => return Ok(false),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// kill(pid, SIGKILL).
pub fn kill_now(pid: libc::pid_t) {
    // SAFETY: plain syscall; a pid that is gone only gives ESRCH.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// prctl(PR_SET_PDEATHSIG, SIGKILL): this process dies with its parent (thread).
pub fn die_with_parent() -> io::Result<()> {
    // SAFETY: plain prctl with integer arguments.
    check(unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } as libc::c_long)
    .map(drop)
}

/// prctl(PR_SET_NO_NEW_PRIVS, 1): nothing exec'd later gains privileges.
pub fn no_new_privs() -> io::Result<()> {
    // SAFETY: plain prctl with integer arguments.
    check(
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) }
            as libc::c_long,
    )
    .map(drop)
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// setrlimit(resource, value) for both the soft and the hard limit.
pub fn limit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let rl = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: a valid rlimit struct.
    check(unsafe { libc::setrlimit(resource, &rl) } as libc::c_long).map(drop)
}

/// Keeps only the capabilities `keep` (CAP_* numbers): every other one leaves the bounding set
/// (so an exec cannot regain it), the ambient set is cleared, and effective, permitted and
/// inheritable become `keep`.
pub fn keep_only_caps(keep: &[u32]) -> io::Result<()> {
    for cap in 0..64u32 {
        if keep.contains(&cap) {
            continue;
        }
        // SAFETY: plain prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINVAL) {
                break; // past the kernel's last capability
            }
            return Err(e);
        }
    }
    // SAFETY: plain prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut set = [0u32; 2];
    for cap in keep {
        set[(*cap / 32) as usize] |= 1 << (cap % 32);
    }
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [0, 1].map(|i| Data {
        effective: set[i],
        permitted: set[i],
        inheritable: set[i],
    });
    // SAFETY: _LINUX_CAPABILITY_VERSION_3 header and its two data structs, valid for the call.
    check(unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) }).map(drop)
}

/// mount("none", path, "tmpfs", flags, data): a fresh tmpfs over `path`.
pub fn mount_tmpfs(path: &CStr, data: &CStr) -> io::Result<()> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: valid C strings for the call.
    check(unsafe {
        libc::mount(
            c"none".as_ptr(),
            path.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    } as libc::c_long)
    .map(drop)
}

/// Whether this process has exactly one thread (`Threads:` of /proc/self/status).
pub fn single_threaded() -> bool {
    procfs::read(std::path::Path::new("/proc/self/status")).is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Threads:").is_some_and(|n| n.trim() == "1"))
    })
}

/// Waits for `pid`; returns its exit code, or 128+signal.
pub fn wait(pid: libc::pid_t) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r >= 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    })
}

/// execveat(fd, "", argv, envp, AT_EMPTY_PATH): runs the program `fd` refers to. Only returns
/// on error.
pub fn exec_fd(fd: BorrowedFd, argv: &[CString], envp: &[CString]) -> io::Error {
    let mut a: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    a.push(std::ptr::null());
    let mut e: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    e.push(std::ptr::null());
    // SAFETY: argv/envp are NUL-terminated arrays of valid C strings that outlive the call.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            fd.as_raw_fd(),
            c"".as_ptr(),
            a.as_ptr(),
            e.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    io::Error::last_os_error()
}

/// fchdir(dir): makes `dir` the working directory.
pub fn fchdir(dir: BorrowedFd) -> io::Result<()> {
    // SAFETY: plain syscall on a valid fd.
    check(unsafe { libc::fchdir(dir.as_raw_fd()) } as libc::c_long).map(drop)
}

/// chroot("."): the working directory becomes the root (the working directory is kept).
pub fn chroot_cwd() -> io::Result<()> {
    // SAFETY: a constant C string.
    check(unsafe { libc::chroot(c".".as_ptr()) } as libc::c_long).map(drop)
}

/// chroot(".") and chdir("/"): the working directory becomes the root. Fails unless that is
/// the directory `expected` refers to (same device and inode). After a clone into a new mount
/// namespace the working directory is the copy of the parent's in the new namespace, so a
/// child that chroots this way is rooted in its own mounts (an fd opened before the clone
/// would still be a mount of the namespace it left).
pub fn chroot_cwd_checked(expected: BorrowedFd) -> io::Result<()> {
    // SAFETY: a constant C string.
    check(unsafe { libc::chroot(c".".as_ptr()) } as libc::c_long)?;
    // SAFETY: a constant C string.
    check(unsafe { libc::chdir(c"/".as_ptr()) } as libc::c_long)?;
    let now = std::fs::metadata("/")?;
    let want = fstat(expected)?;
    use std::os::unix::fs::MetadataExt;
    if (now.dev(), now.ino()) != (want.st_dev, want.st_ino) {
        return Err(io::Error::other(
            "the new root is not the rootfs that was opened",
        ));
    }
    Ok(())
}

/// mount(NULL, "/", NULL, MS_REC|MS_PRIVATE): nothing done later in this mount namespace
/// propagates anywhere.
pub fn make_mounts_private() -> io::Result<()> {
    // SAFETY: constant strings, null data.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    } as libc::c_long)
    .map(drop)
}

/// umount2(path, MNT_DETACH).
pub fn detach(path: &CStr) -> io::Result<()> {
    // SAFETY: valid C string.
    check(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } as libc::c_long).map(drop)
}

/// Exits the (forked) process at once, without running Rust or libc atexit handlers.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and is async-signal-safe.
    unsafe { libc::_exit(code) }
}

/// symlinkat(2): creates the symlink `name` in `dir` with contents `target`.
pub fn symlinkat(target: &Path, dir: BorrowedFd, name: &Path) -> io::Result<()> {
    let t = cstring(target)?;
    let n = cstring(name)?;
    // SAFETY: both strings are valid NUL-terminated C strings for the duration of the call.
    check(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), n.as_ptr()) } as libc::c_long)
        .map(drop)
}

/// readlinkat(2) of the single name `name` in `dir`.
pub fn readlinkat(dir: BorrowedFd, name: &Path) -> io::Result<std::path::PathBuf> {
    let n = cstring(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: `buf` is writable for `buf.len()` bytes; `n` is a valid C string.
    let len = check(unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            n.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    } as libc::c_long)?;
    buf.truncate(len as usize);
    Ok(std::path::PathBuf::from(std::ffi::OsString::from(
        <std::ffi::OsStr as OsStrExt>::from_bytes(&buf),
    )))
}

/// The names in the directory `dir` refers to (opened for reading) that `keep` picks, at most
/// `max` of them (the first met; the directory is hostile: an image's may hold 300 000 long
/// names, and only the picked ones take memory), without `.` and `..`, sorted.
pub fn list_dir(
    dir: BorrowedFd,
    keep: impl Fn(&[u8]) -> bool,
    max: usize,
) -> io::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStringExt;
    // fdopendir takes ownership of its fd: give it a fresh one for this directory.
    let own = openat(dir, Path::new("."), libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    // SAFETY: `own` is a valid directory fd; on success the DIR owns it.
    let d = unsafe { libc::fdopendir(own.as_raw_fd()) };
    if d.is_null() {
        return Err(io::Error::last_os_error());
    }
    std::mem::forget(own);
    let mut names = Vec::new();
    loop {
        // SAFETY: `d` is a valid DIR stream until closedir below.
        let ent = unsafe { libc::readdir(d) };
        if ent.is_null() {
            break;
        }
        // SAFETY: `ent` is the non-null dirent readdir just returned, valid until the next
        // readdir on `d`.
        let d_name = unsafe { &(*ent).d_name };
        // SAFETY: d_name is NUL-terminated within the dirent.
        let name = unsafe { CStr::from_ptr(d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." && keep(name) {
            names.push(std::ffi::OsString::from_vec(name.to_vec()));
            if names.len() >= max {
                break;
            }
        }
    }
    // SAFETY: `d` is valid and closed exactly once (this also closes its fd).
    unsafe { libc::closedir(d) };
    names.sort();
    Ok(names)
}

/// flock(LOCK_EX) on `fd`, waiting for other holders (advisory; released when the fd closes).
pub fn flock_exclusive(fd: BorrowedFd) -> io::Result<()> {
    loop {
        // SAFETY: flock on a valid fd.
        match check(unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX) } as libc::c_long) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r.map(drop),
        }
    }
}

/// renameat(dir, from, dir, to): atomically replaces `to` in `dir`.
pub fn renameat(dir: BorrowedFd, from: &Path, to: &Path) -> io::Result<()> {
    let (f, t) = (cstring(from)?, cstring(to)?);
    // SAFETY: valid C strings and a valid directory fd.
    check(
        unsafe { libc::renameat(dir.as_raw_fd(), f.as_ptr(), dir.as_raw_fd(), t.as_ptr()) }
            as libc::c_long,
    )
    .map(drop)
}

/// unlinkat(dir, name, 0): removes a file (not a directory) in `dir`.
pub fn unlinkat(dir: BorrowedFd, name: &Path) -> io::Result<()> {
    let n = cstring(name)?;
    // SAFETY: valid C string and fd.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), n.as_ptr(), 0) } as libc::c_long).map(drop)
}

/// The id of the mount `fd` is on (statx `STATX_MNT_ID`, the first field of mountinfo).
pub fn mount_id(fd: BorrowedFd) -> io::Result<u64> {
    // SAFETY: statx is plain old data; zeroed is a valid value.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, empty C string with AT_EMPTY_PATH, a valid out-pointer.
    check(unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_MNT_ID,
            &mut st,
        )
    } as libc::c_long)?;
    if st.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::other(
            "the kernel gave no mount id (statx STATX_MNT_ID needs Linux 5.8)",
        ));
    }
    Ok(st.stx_mnt_id)
}

/// Copies every extended attribute of the file at `from` (ACLs are `system.posix_acl_*`,
/// SELinux labels `security.selinux`) onto the open file `to`. Best effort: an attribute the
/// target file system or our privileges refuse is skipped (never more access than the
/// original: a missing ACL entry only takes access away).
pub fn copy_xattrs(from: &Path, to: BorrowedFd) {
    let Ok(src) = cstring(from) else { return };
    // SAFETY: valid C string; a null buffer of size 0 asks for the size.
    let len = unsafe { libc::llistxattr(src.as_ptr(), std::ptr::null_mut(), 0) };
    if len <= 0 {
        return;
    }
    let mut names = vec![0u8; len as usize];
    // SAFETY: the buffer has `names.len()` bytes.
    let len = unsafe { libc::llistxattr(src.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if len <= 0 {
        return;
    }
    names.truncate(len as usize);
    for name in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let Ok(name) = CString::new(name) else {
            continue;
        };
        // SAFETY: valid C strings; size query first.
        let size = unsafe { libc::lgetxattr(src.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
        if size < 0 {
            continue;
        }
        let mut value = vec![0u8; size as usize];
        // SAFETY: the buffer has `value.len()` bytes.
        let size = unsafe {
            libc::lgetxattr(
                src.as_ptr(),
                name.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        if size < 0 {
            continue;
        }
        // SAFETY: valid fd, C string and a buffer of `size` bytes.
        unsafe {
            libc::fsetxattr(
                to.as_raw_fd(),
                name.as_ptr(),
                value.as_ptr().cast(),
                size as usize,
                0,
            )
        };
    }
}

/// `AT_FDCWD` as a borrowed fd: the working directory, for the `*at` calls.
pub fn cwd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is never a real descriptor that could be closed: every `*at` call takes
    // it as "the working directory" for the life of the process.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// pipe2(O_CLOEXEC): (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 wants.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } as libc::c_long)?;
    // SAFETY: the kernel just created this fd and nothing else owns it.
    let rx = unsafe { OwnedFd::from_raw_fd(fds[0]) };
    // SAFETY: as for `rx`.
    let tx = unsafe { OwnedFd::from_raw_fd(fds[1]) };
    Ok((rx, tx))
}

/// memfd_create(name, MFD_CLOEXEC) holding `bytes`, its offset back at 0: a file to give a
/// program as its stdin (the static prestart hook hands the hook state it read to its dynamic
/// program this way).
pub fn memfd_with(name: &CStr, bytes: &[u8]) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let fd =
        check(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) } as libc::c_long)?;
    // SAFETY: the kernel just created this fd and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes)?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
}

/// mkfifo(path, mode): a named pipe (`mode` masked by the umask).
pub fn mkfifo(path: &Path, mode: u32) -> io::Result<()> {
    let c = cstring(path)?;
    // SAFETY: `c` is a valid NUL-terminated path for the call.
    check(unsafe { libc::mkfifo(c.as_ptr(), mode) } as libc::c_long).map(drop)
}

/// mknod(path, S_IFCHR | mode, major:minor): a character device node (`mode` is masked by the
/// umask, as mknod(2) does).
pub fn mknod_char(path: &Path, mode: u32, major: u32, minor: u32) -> io::Result<()> {
    let c = cstring(path)?;
    // SAFETY: `c` is a valid NUL-terminated path for the call; the rest are plain integers.
    check(unsafe {
        libc::mknod(
            c.as_ptr(),
            libc::S_IFCHR | mode,
            libc::makedev(major, minor),
        )
    } as libc::c_long)
    .map(drop)
}

/// flock(LOCK_EX | LOCK_NB) on `fd`: `Ok(false)` when another holder has it.
pub fn try_flock_exclusive(fd: BorrowedFd) -> io::Result<bool> {
    loop {
        // SAFETY: flock on a valid fd, plain integer flags.
        let r = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        match check(r as libc::c_long) {
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// setxattr(path, name, value, 0), for tests that stand a `user.` attribute for an ACL.
pub fn set_xattr(path: &Path, name: &CStr, value: &[u8]) -> io::Result<()> {
    let p = cstring(path)?;
    // SAFETY: valid C strings and a buffer of `value.len()` readable bytes.
    check(unsafe {
        libc::setxattr(
            p.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    } as libc::c_long)
    .map(drop)
}

/// getxattr(path, name): the value, up to 256 bytes; `None` when the file has no such
/// attribute (or it cannot be read).
pub fn get_xattr(path: &Path, name: &CStr) -> Option<Vec<u8>> {
    let p = cstring(path).ok()?;
    let mut buf = [0u8; 256];
    // SAFETY: valid C strings and a writable buffer of `buf.len()` bytes.
    let n = unsafe {
        libc::getxattr(
            p.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    (n >= 0).then(|| buf[..n as usize].to_vec())
}
