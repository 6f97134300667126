//! Best-effort copies of the hooks' refusals to the system log, for runtimes that throw a
//! hook's stderr away (crun reports only "error executing hook ... (exit code: 1)"): one
//! datagram to the local syslog socket `/dev/log` (journald's, or rsyslog's), in the form
//! RFC 3164 receivers accept, `<PRI>TAG[PID]: MESSAGE`, facility `daemon`, without a timestamp
//! (the receiver stamps it). Nothing here can fail a hook: no socket, a full queue or any other
//! error is ignored, and the send never blocks.
//!
//! TEST-ONLY (the `fault-injection` feature): `NVCT_SYSLOG_SOCKET=<path>` sends to that socket
//! instead, so a test can bind one in a scratch directory.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

/// The local syslog socket.
pub const SOCKET: &str = "/dev/log";

/// Longest message sent (the rest is cut, at a character boundary); receivers take at least
/// this much.
pub const MAX_MESSAGE: usize = 2048;

/// `daemon` (3) in the facility bits of PRI.
const FACILITY_DAEMON: u8 = 3 << 3;

/// The severities the hooks send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Err = 3,
    Warning = 4,
}

/// One syslog line: `<PRI>TAG[PID]: MESSAGE`, the message on one line (control characters
/// become spaces) and at most [`MAX_MESSAGE`] bytes.
pub fn line(severity: Severity, tag: &str, pid: u32, msg: &str) -> String {
    let pri = FACILITY_DAEMON | severity as u8;
    let mut text: String = msg
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    format!("<{pri}>{tag}[{pid}]: {text}")
}

fn socket_path() -> PathBuf {
    #[cfg(feature = "fault-injection")]
    if let Some(p) = std::env::var_os("NVCT_SYSLOG_SOCKET") {
        return p.into();
    }
    PathBuf::from(SOCKET)
}

/// Send `msg` to the system log as `tag`; best effort (see the module doc).
pub fn send(severity: Severity, tag: &str, msg: &str) {
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    if sock.set_nonblocking(true).is_err() {
        return;
    }
    let _ = sock.send_to(
        line(severity, tag, std::process::id(), msg).as_bytes(),
        socket_path(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_cases() {
        let long = "é".repeat(MAX_MESSAGE);
        // (case, severity, message, want)
        let cases: &[(&str, Severity, &str, String)] = &[
            (
                "error",
                Severity::Err,
                "refused: no GPU 7",
                "<27>hook[42]: refused: no GPU 7".into(),
            ),
            ("warning", Severity::Warning, "x", "<28>hook[42]: x".into()),
            (
                "newlines become spaces",
                Severity::Err,
                "a\nb\tc",
                "<27>hook[42]: a b c".into(),
            ),
            (
                "cut at a character boundary",
                Severity::Err,
                &long,
                format!("<27>hook[42]: {}", "é".repeat(MAX_MESSAGE / 2)),
            ),
        ];
        for (name, sev, msg, want) in cases {
            assert_eq!(&line(*sev, "hook", 42, msg), want, "case {name}");
        }
    }

    #[test]
    fn lines_fit_a_datagram_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let rx = UnixDatagram::bind(&path).unwrap();
        let tx = UnixDatagram::unbound().unwrap();
        tx.send_to(line(Severity::Err, "t", 1, "m").as_bytes(), &path)
            .unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"<27>t[1]: m");
    }
}
