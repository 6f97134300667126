//! Process-wide state and other processes: signals (send, block, wait), the peer of a unix
//! socket, and this process's environment. Part of `sys`: the `unsafe` these need lives here.

use super::{check, single_threaded};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The pid of the process at the other end of the connected unix socket `socket`
/// (`SO_PEERCRED`).
pub fn peer_pid(socket: BorrowedFd) -> io::Result<libc::pid_t> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a writable ucred and `len` holds its size; the kernel writes at most
    // `len` bytes.
    check(unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    } as libc::c_long)?;
    Ok(cred.pid)
}

/// A stream connection to the unix socket `path` that never waits in `connect()`: the socket
/// is made `SOCK_NONBLOCK`, so a listener whose backlog is full gives `WouldBlock` (EAGAIN)
/// instead of blocking until it accepts (a unix socket's connect completes at once otherwise).
/// The stream is returned in blocking mode, for reads and writes with timeouts.
pub fn connect_unix_nonblocking(
    path: &std::path::Path,
) -> io::Result<std::os::unix::net::UnixStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data; zeroed is a valid (empty) address.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.is_empty() || bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a unix socket path (empty, NUL or over 107 bytes)",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket takes plain integers.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    } as libc::c_long)?;
    // SAFETY: the kernel just created this fd and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as std::os::fd::RawFd) };
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: `addr` is an initialised sockaddr_un and `len` covers its family, the path and
    // its NUL, within the struct.
    check(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    } as libc::c_long)?;
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// kill(pid, signal).
pub fn kill(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes plain integers and touches no memory of ours.
    check(unsafe { libc::kill(pid, signal) } as libc::c_long).map(drop)
}

/// A set of signals blocked in the calling thread (and in every thread it starts afterwards),
/// left pending until [`Signals::wait`] takes one.
pub struct Signals(libc::sigset_t);

impl Signals {
    /// Blocks `signals` (pthread_sigmask(SIG_BLOCK)).
    pub fn block(signals: &[libc::c_int]) -> io::Result<Signals> {
        // SAFETY: sigset_t is plain old data; sigemptyset below initialises it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid, writable sigset_t.
        check(unsafe { libc::sigemptyset(&mut set) } as libc::c_long)?;
        for &s in signals {
            // SAFETY: `set` is an initialised sigset_t; a bad number only gives EINVAL.
            check(unsafe { libc::sigaddset(&mut set, s) } as libc::c_long)?;
        }
        // SAFETY: `set` is initialised; a null old-set pointer is allowed.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(Signals(set))
    }

    /// sigwait(2): waits until one of the blocked signals arrives; returns its number.
    pub fn wait(&self) -> io::Result<libc::c_int> {
        let mut sig = 0;
        // SAFETY: `self.0` is an initialised sigset_t and `sig` a writable int.
        let r = unsafe { libc::sigwait(&self.0, &mut sig) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(sig)
    }
}

/// Removes from this process's environment every variable whose name `drop` picks. Refused
/// (nothing removed) unless the process is single-threaded: glibc's getenv, which C libraries
/// call from any thread, does not lock against a concurrent change.
pub fn remove_env_vars(drop: impl Fn(&[u8]) -> bool) -> io::Result<()> {
    if !single_threaded() {
        return Err(io::Error::other(
            "the process has more than one thread (or /proc/self/status is unreadable)",
        ));
    }
    for (k, _) in std::env::vars_os() {
        if drop(k.as_encoded_bytes()) {
            std::env::remove_var(k);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{exit_now, fork_into_new_namespaces, single_threaded, wait};

    /// Runs `f` while a second thread of this process is alive.
    fn with_a_second_thread<T>(f: impl FnOnce() -> T) -> T {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (ready, is_ready) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            ready.send(()).unwrap();
            let _ = stopped.recv();
        });
        is_ready.recv().unwrap();
        let out = f();
        stop.send(()).unwrap();
        t.join().unwrap();
        out
    }

    #[test]
    fn process_wide_changes_are_refused_with_a_second_thread() {
        with_a_second_thread(|| {
            assert!(!single_threaded(), "the second thread is seen");
            let picked = std::cell::Cell::new(0);
            let env = remove_env_vars(|_| {
                picked.set(picked.get() + 1);
                false
            });
            assert!(env.is_err(), "remove_env_vars is refused");
            assert_eq!(picked.get(), 0, "and looks at no variable");
            match fork_into_new_namespaces(0) {
                Ok((0, _)) => exit_now(0), // a child that should not exist: leave at once
                Ok((pid, _)) => {
                    let _ = wait(pid);
                    panic!("clone3 ran in a multi-threaded process");
                }
                Err(e) => assert!(e.to_string().contains("more than one thread"), "{e}"),
            }
        });
    }
}
