//! One D-Bus method call to systemd, without a `systemctl` process: `SetUnitProperties(unit,
//! runtime=true, [("DeviceAllow", [(path, "rw"), ...])])` on systemd's private socket
//! (`/run/systemd/private`, root only, peer to peer: no bus daemon, no `Hello`), the call
//! `systemctl set-property --runtime UNIT DeviceAllow=...` makes. `systemd.rs` tries it first
//! and starts `systemctl` when it fails otherwise than by the deadline, so a systemd that
//! answers otherwise than expected costs time, never the rules, and a stuck one costs at most
//! [`TIMEOUT`].
//!
//! Owns: the wire format of that one call and of its answer ([`set_device_allow_message`],
//! [`reply_of`], PURE; the D-Bus specification's marshalling: little-endian, each value aligned
//! to its type from the message's start, header fields `a(yv)`, the body after the header
//! padded to 8), and the exchange on the socket ([`set_device_allow`]: `AUTH EXTERNAL` with
//! our uid, `BEGIN`, the call, the answer whose `REPLY_SERIAL` is ours, all before one
//! deadline). Must not: block the start for long (a non-blocking connect, and every read and
//! write waits only what is left of the deadline), or read more
//! than [`MAX_MESSAGE`] bytes of an answer.

use nvct_model::CgroupRule;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// systemd's private socket: the manager's API for root, without dbus-daemon.
pub const PRIVATE_SOCKET: &str = "/run/systemd/private";
/// The longest the whole request to systemd may take (the D-Bus exchange, and `systemctl`
/// after it where that runs): one deadline, not a limit per read. `systemctl`'s own default
/// is 25 s.
pub const TIMEOUT: Duration = Duration::from_secs(3);
/// The largest answer read (its header and body); systemd's answer to this call is empty.
pub const MAX_MESSAGE: usize = 64 << 10;

const METHOD_CALL: u8 = 1;
const METHOD_RETURN: u8 = 2;
const ERROR: u8 = 3;

#[derive(Debug, thiserror::Error)]
pub enum DbusError {
    #[error("{PRIVATE_SOCKET}: {0}")]
    Io(#[from] io::Error),
    #[error("{PRIVATE_SOCKET}: authentication refused: {0:?}")]
    Auth(String),
    #[error("{PRIVATE_SOCKET}: an answer that is not D-Bus: {0}")]
    Malformed(&'static str),
    #[error("systemd refused: {name}: {message}")]
    Refused { name: String, message: String },
    /// The deadline passed (a busy or stuck systemd): nothing else is tried.
    #[error("{PRIVATE_SOCKET}: no answer in time ({0})")]
    TimedOut(&'static str),
}

/// Appends D-Bus values to a message, aligned from the message's start.
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn pad(&mut self, align: usize) {
        while !self.buf.len().is_multiple_of(align) {
            self.buf.push(0);
        }
    }
    fn byte(&mut self, b: u8) {
        self.buf.push(b);
    }
    fn u32(&mut self, v: u32) {
        self.pad(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A STRING or an OBJECT_PATH: length, bytes, NUL.
    fn string(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }
    /// A SIGNATURE: one byte of length, bytes, NUL.
    fn signature(&mut self, s: &str) {
        self.buf.push(s.len() as u8);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }
    /// An ARRAY whose elements align to `align`: its byte length (which counts neither itself
    /// nor the padding after it) is written once `elements` has appended them.
    fn array(&mut self, align: usize, elements: impl FnOnce(&mut Writer)) {
        self.u32(0);
        let at = self.buf.len() - 4;
        self.pad(align);
        let start = self.buf.len();
        elements(self);
        let len = (self.buf.len() - start) as u32;
        self.buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
}

/// The `SetUnitProperties` call, serial `serial`: `unit` gets `DeviceAllow=/dev/char/M:m rw`
/// for each rule, at runtime (lost at reboot, as the container's scope itself).
pub fn set_device_allow_message(serial: u32, unit: &str, rules: &[CgroupRule]) -> Vec<u8> {
    let mut body = Writer { buf: Vec::new() };
    body.string(unit);
    body.u32(1); // BOOLEAN true: runtime
    body.array(8, |w| {
        w.pad(8);
        w.string("DeviceAllow");
        w.signature("a(ss)");
        w.array(8, |w| {
            for r in rules {
                w.pad(8);
                w.string(&format!("/dev/char/{}:{}", r.major, r.minor));
                w.string("rw");
            }
        });
    });
    let mut m = Writer { buf: Vec::new() };
    m.byte(b'l');
    m.byte(METHOD_CALL);
    m.byte(0); // flags: a reply is expected
    m.byte(1); // protocol version
    m.u32(body.buf.len() as u32);
    m.u32(serial);
    m.array(8, |w| {
        let field = |w: &mut Writer, code: u8, sig: &str, value: &str| {
            w.pad(8);
            w.byte(code);
            w.signature(sig);
            match sig {
                "g" => w.signature(value),
                _ => w.string(value),
            }
        };
        field(w, 1, "o", "/org/freedesktop/systemd1");
        field(w, 2, "s", "org.freedesktop.systemd1.Manager");
        field(w, 3, "s", "SetUnitProperties");
        field(w, 6, "s", "org.freedesktop.systemd1");
        field(w, 8, "g", "sba(sv)");
    });
    m.pad(8);
    m.buf.extend_from_slice(&body.buf);
    m.buf
}

/// Reads D-Bus values from a message, aligned from its start.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn align(&mut self, align: usize) -> Result<(), DbusError> {
        self.take(self.at.next_multiple_of(align) - self.at)
            .map(|_| ())
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DbusError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(DbusError::Malformed("truncated"))?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn byte(&mut self) -> Result<u8, DbusError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, DbusError> {
        self.align(4)?;
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn text(&mut self, len: usize) -> Result<String, DbusError> {
        let b = self.take(len + 1)?;
        if b[len] != 0 {
            return Err(DbusError::Malformed("a string without its NUL"));
        }
        Ok(String::from_utf8_lossy(&b[..len]).into_owned())
    }
    fn string(&mut self) -> Result<String, DbusError> {
        let len = self.u32()? as usize;
        self.text(len)
    }
    fn signature(&mut self) -> Result<String, DbusError> {
        let len = self.byte()? as usize;
        self.text(len)
    }
}

/// The total length of the message whose first 16 bytes are `head`, or why it is not one.
/// Public for the fuzz target `dbus_reply`, which frames its input as the exchange does.
pub fn message_len(head: &[u8; 16]) -> Result<usize, DbusError> {
    if head[0] != b'l' {
        return Err(DbusError::Malformed("not little-endian"));
    }
    let body = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    let fields = u32::from_le_bytes([head[12], head[13], head[14], head[15]]) as usize;
    let len = (16 + fields).next_multiple_of(8) + body;
    if len > MAX_MESSAGE {
        return Err(DbusError::Malformed("an answer over the size limit"));
    }
    Ok(len)
}

/// What a whole message `msg` answers: `None` when it is not the answer to `serial` (another
/// message on the socket), `Some(Ok(()))` for a method return, `Some(Err(Refused))` for an
/// error (its name and, when the body starts with a string, its message).
pub fn reply_of(msg: &[u8], serial: u32) -> Result<Option<Result<(), DbusError>>, DbusError> {
    let mut r = Reader { buf: msg, at: 0 };
    if r.byte()? != b'l' {
        return Err(DbusError::Malformed("not little-endian"));
    }
    let kind = r.byte()?;
    r.take(2)?; // flags, version
    let _body_len = r.u32()?;
    let _serial = r.u32()?;
    let fields_len = r.u32()? as usize;
    let fields_end =
        r.at.checked_add(fields_len)
            .filter(|&e| e <= msg.len())
            .ok_or(DbusError::Malformed("truncated"))?;
    let (mut reply_serial, mut error_name, mut signature) = (None, None, String::new());
    while r.at < fields_end {
        r.align(8)?;
        // The padding may reach the end of the fields: what follows is the body.
        if r.at >= fields_end {
            break;
        }
        let code = r.byte()?;
        let sig = r.signature()?;
        match sig.as_str() {
            "s" | "o" => {
                let v = r.string()?;
                if code == 4 {
                    error_name = Some(v);
                }
            }
            "u" => {
                let v = r.u32()?;
                if code == 5 {
                    reply_serial = Some(v);
                }
            }
            "g" => {
                let v = r.signature()?;
                if code == 8 {
                    signature = v;
                }
            }
            _ => return Err(DbusError::Malformed("a header field of an unknown type")),
        }
    }
    if reply_serial != Some(serial) || !matches!(kind, METHOD_RETURN | ERROR) {
        return Ok(None);
    }
    if kind == METHOD_RETURN {
        return Ok(Some(Ok(())));
    }
    r.at = fields_end;
    r.align(8)?;
    let message = if signature.starts_with('s') {
        r.string().unwrap_or_default()
    } else {
        String::new()
    };
    Ok(Some(Err(DbusError::Refused {
        name: error_name.unwrap_or_else(|| "(no error name)".into()),
        message,
    })))
}

/// Makes the call on `socket` (systemd's [`PRIVATE_SOCKET`]) as user `uid`, all of it (the
/// connection, the authentication, the call and its answer) before `deadline`.
pub fn set_device_allow(
    socket: &Path,
    uid: u32,
    unit: &str,
    rules: &[CgroupRule],
    deadline: Instant,
) -> Result<(), DbusError> {
    let mut s = Timed::connect(socket, deadline)?;
    // SASL: a NUL byte, then EXTERNAL with the uid's decimal digits in hex.
    let hex: String = uid
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    s.write_all(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes())?;
    let line = s.read_line()?;
    if !line.starts_with("OK ") {
        return Err(DbusError::Auth(line));
    }
    const SERIAL: u32 = 1;
    let mut out = b"BEGIN\r\n".to_vec();
    out.extend(set_device_allow_message(SERIAL, unit, rules));
    s.write_all(&out)?;
    // The answer to our serial; a few other messages (signals) are skipped.
    for _ in 0..16 {
        let mut head = [0u8; 16];
        s.read_exact(&mut head)?;
        let mut msg = head.to_vec();
        msg.resize(message_len(&head)?, 0);
        s.read_exact(&mut msg[16..])?;
        if let Some(answer) = reply_of(&msg, SERIAL)? {
            return answer;
        }
    }
    Err(DbusError::Malformed(
        "no answer among the first 16 messages",
    ))
}

/// A connection whose every step ends by one deadline: each read or write waits at most what
/// is left of it, so a peer that trickles a byte at a time cannot stretch the exchange.
struct Timed {
    s: UnixStream,
    deadline: Instant,
}

impl Timed {
    /// Connects without blocking on a full listen backlog: `connect()` is retried until the
    /// deadline, never waited in.
    fn connect(path: &Path, deadline: Instant) -> Result<Timed, DbusError> {
        loop {
            match nvct_sys::connect_unix_nonblocking(path) {
                Ok(s) => return Ok(Timed { s, deadline }),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(DbusError::TimedOut("connecting (its backlog is full)"));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// What is left of the deadline, or [`DbusError::TimedOut`] naming `step`.
    fn left(&self, step: &'static str) -> Result<Duration, DbusError> {
        self.deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(DbusError::TimedOut(step))
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), DbusError> {
        let mut at = 0;
        while at < buf.len() {
            self.s
                .set_read_timeout(Some(self.left("reading the answer")?))?;
            match self.s.read(&mut buf[at..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
                Ok(n) => at += n,
                Err(e) => Self::retry_or(e, "reading the answer")?,
            }
        }
        Ok(())
    }

    fn write_all(&mut self, mut buf: &[u8]) -> Result<(), DbusError> {
        while !buf.is_empty() {
            self.s
                .set_write_timeout(Some(self.left("writing the call")?))?;
            match self.s.write(buf) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
                Ok(n) => buf = &buf[n..],
                Err(e) => Self::retry_or(e, "writing the call")?,
            }
        }
        Ok(())
    }

    /// An interrupted call is retried; a socket timeout is the deadline's.
    fn retry_or(e: io::Error, step: &'static str) -> Result<(), DbusError> {
        match e.kind() {
            io::ErrorKind::Interrupted => Ok(()),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Err(DbusError::TimedOut(step)),
            _ => Err(e.into()),
        }
    }

    /// One line of the SASL exchange (up to `\r\n`), at most 512 bytes.
    fn read_line(&mut self) -> Result<String, DbusError> {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            if line.len() > 512 {
                return Err(DbusError::Malformed(
                    "an authentication line over 512 bytes",
                ));
            }
            self.read_exact(&mut b)?;
            line.push(b[0]);
        }
        line.truncate(line.len() - 2);
        Ok(String::from_utf8_lossy(&line).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The call's bytes for one rule, written out by hand from the specification (offsets in
    /// the comments are from the message's start; the body starts at 192).
    #[test]
    fn the_call_for_one_rule() {
        let rules = [CgroupRule {
            major: 195,
            minor: 0,
        }];
        let le = |v: u32| v.to_le_bytes().to_vec();
        let pad = |v: &mut Vec<u8>, to: usize| v.resize(to, 0);
        let mut want: Vec<u8> = vec![b'l', 1, 0, 1];
        want.extend(le(83)); // the body's length
        want.extend(le(7)); // the serial
        want.extend(le(173)); // the header fields' length: 16 to 189
                              // A string-valued header field (code, signature, value with its NUL), then the padding
                              // to where the next one starts: PATH at 16, INTERFACE at 56, MEMBER at 104,
                              // DESTINATION at 136, SIGNATURE at 176.
        let field = |want: &mut Vec<u8>, code: u8, sig: u8, value: &[u8], next: usize| {
            want.extend([code, 1, sig, 0]);
            want.extend(le(value.len() as u32 - 1));
            want.extend(value);
            pad(want, next);
        };
        field(&mut want, 1, b'o', b"/org/freedesktop/systemd1\0", 56);
        field(
            &mut want,
            2,
            b's',
            b"org.freedesktop.systemd1.Manager\0",
            104,
        );
        field(&mut want, 3, b's', b"SetUnitProperties\0", 136);
        field(&mut want, 6, b's', b"org.freedesktop.systemd1\0", 176);
        want.extend([8, 1, b'g', 0, 7]);
        want.extend(b"sba(sv)\0");
        assert_eq!(want.len(), 189);
        pad(&mut want, 192);
        // The body: the unit, runtime = true, a(sv) of 59 bytes from body offset 24 holding
        // ("DeviceAllow", <a(ss)>), whose array of 27 bytes from 56 holds one (path, "rw").
        want.extend(le(7));
        want.extend(b"a.scope\0");
        want.extend(le(1));
        want.extend(le(59));
        want.extend([0; 4]);
        want.extend(le(11));
        want.extend(b"DeviceAllow\0");
        want.extend([5]);
        want.extend(b"a(ss)\0");
        want.extend([0]);
        want.extend(le(27));
        want.extend([0; 4]);
        want.extend(le(15));
        want.extend(b"/dev/char/195:0\0");
        want.extend(le(2));
        want.extend(b"rw\0");
        assert_eq!(want.len(), 192 + 83);
        assert_eq!(set_device_allow_message(7, "a.scope", &rules), want);
        // Two rules: the second struct at the next 8-byte boundary of the inner array.
        let two = set_device_allow_message(
            7,
            "a.scope",
            &[
                rules[0],
                CgroupRule {
                    major: 508,
                    minor: 1,
                },
            ],
        );
        let body = &two[192..];
        assert_eq!(&body[48..52], le(27 + 5 + 4 + 16 + 4 + 3).as_slice());
        assert_eq!(&body[88..92], le(15).as_slice());
        assert_eq!(&body[92..108], b"/dev/char/508:1\0");
    }

    /// A reply as systemd sends it: the fixed header, `REPLY_SERIAL`, for an error its
    /// `ERROR_NAME` and `SIGNATURE` "s" and the message in the body.
    fn reply(kind: u8, reply_serial: u32, error: Option<(&str, &str)>) -> Vec<u8> {
        let mut w = Writer { buf: Vec::new() };
        let mut body = Writer { buf: Vec::new() };
        if let Some((_, message)) = error {
            body.string(message);
        }
        w.byte(b'l');
        w.byte(kind);
        w.byte(1);
        w.byte(1);
        w.u32(body.buf.len() as u32);
        w.u32(99);
        w.array(8, |w| {
            w.pad(8);
            w.byte(5);
            w.signature("u");
            w.u32(reply_serial);
            if let Some((name, _)) = error {
                w.pad(8);
                w.byte(4);
                w.signature("s");
                w.string(name);
                w.pad(8);
                w.byte(8);
                w.signature("g");
                w.signature("s");
            }
        });
        w.pad(8);
        w.buf.extend(&body.buf);
        w.buf
    }

    /// What the fake systemd does after `OK`: answer the call (with this reply), or nothing.
    enum Peer {
        Answer(Vec<u8>),
        Refuse,
        Silent,
        /// Sends its `OK` line one byte every 40 ms (each read is short; the whole is not).
        Trickle,
    }

    /// A fake systemd on a Unix socket for one exchange: it checks the SASL lines and that the
    /// call it reads is the one [`set_device_allow_message`] makes, then does `peer`.
    fn fake_systemd(
        dir: &Path,
        peer: Peer,
    ) -> (std::path::PathBuf, std::thread::JoinHandle<Vec<u8>>) {
        let path = dir.join("private");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let handle = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut auth = [0u8; 19];
            c.read_exact(&mut auth).unwrap();
            assert_eq!(&auth, b"\0AUTH EXTERNAL 30\r\n", "uid 0 as hex of \"0\"");
            if let Peer::Refuse = peer {
                c.write_all(b"REJECTED EXTERNAL\r\n").unwrap();
                return Vec::new();
            }
            if let Peer::Trickle = peer {
                for b in b"OK 0123456789abcdef0123456789abcdef\r\n" {
                    if c.write_all(&[*b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(40));
                }
                return Vec::new();
            }
            c.write_all(b"OK 0123456789abcdef0123456789abcdef\r\n")
                .unwrap();
            let mut begin = [0u8; 7];
            c.read_exact(&mut begin).unwrap();
            assert_eq!(&begin, b"BEGIN\r\n");
            let mut head = [0u8; 16];
            c.read_exact(&mut head).unwrap();
            let mut call = head.to_vec();
            call.resize(message_len(&head).unwrap(), 0);
            c.read_exact(&mut call[16..]).unwrap();
            match peer {
                Peer::Answer(reply) => c.write_all(&reply).unwrap(),
                Peer::Silent => std::thread::sleep(Duration::from_millis(500)),
                Peer::Refuse | Peer::Trickle => unreachable!(),
            }
            call
        });
        (path, handle)
    }

    #[test]
    fn exchange_cases() {
        let rules = [CgroupRule {
            major: 195,
            minor: 0,
        }];
        let call = set_device_allow_message(1, "x.scope", &rules);
        let short = Duration::from_millis(200);
        // (case, what the peer does, what the exchange gives)
        type Want = fn(&Result<(), DbusError>) -> bool;
        let cases: Vec<(&str, Peer, Want)> = vec![
            (
                "a signal first, then the return",
                Peer::Answer([reply(4, 0, None), reply(METHOD_RETURN, 1, None)].concat()),
                |r| r.is_ok(),
            ),
            (
                "an error",
                Peer::Answer(reply(
                    ERROR,
                    1,
                    Some(("org.freedesktop.DBus.Error.AccessDenied", "no")),
                )),
                |r| matches!(r, Err(DbusError::Refused { name, .. }) if name.ends_with("AccessDenied")),
            ),
            (
                "authentication refused",
                Peer::Refuse,
                |r| matches!(r, Err(DbusError::Auth(l)) if l == "REJECTED EXTERNAL"),
            ),
            ("no answer: the deadline", Peer::Silent, |r| {
                matches!(r, Err(DbusError::TimedOut(_)))
            }),
            (
                "a byte every 40 ms: the deadline, not a limit per read",
                Peer::Trickle,
                |r| matches!(r, Err(DbusError::TimedOut(_))),
            ),
        ];
        for (name, peer, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            let sends_call = !matches!(peer, Peer::Refuse | Peer::Trickle);
            let (path, server) = fake_systemd(dir.path(), peer);
            let started = Instant::now();
            let got = set_device_allow(&path, 0, "x.scope", &rules, started + short);
            let took = started.elapsed();
            assert!(want(&got), "case {name}: {got:?}");
            assert!(
                took < short + Duration::from_millis(150),
                "case {name}: the exchange took {took:?}, its deadline was {short:?}"
            );
            let seen = server.join().unwrap();
            if sends_call {
                assert_eq!(seen, call, "case {name}: the call as sent");
            }
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(
            matches!(
                set_device_allow(
                    &dir.path().join("none"),
                    0,
                    "x.scope",
                    &rules,
                    Instant::now() + short
                ),
                Err(DbusError::Io(_))
            ),
            "no socket: an I/O error, so the caller runs systemctl"
        );
    }

    /// A listener that accepts nothing and whose backlog is full: `connect()` would block until
    /// it accepts (for ever); the exchange gives up at its deadline instead.
    #[test]
    fn a_full_backlog_ends_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("private");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        // std listens with the largest backlog (somaxconn): fill it, within the fd limit.
        nvct_sys::limit(libc::RLIMIT_NOFILE, 16384).unwrap();
        let mut queued = Vec::new();
        loop {
            match nvct_sys::connect_unix_nonblocking(&path) {
                Ok(s) => queued.push(s),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("after {} connections: {e}", queued.len()),
            }
            assert!(queued.len() < 16000, "the backlog never filled");
        }
        let rules = [CgroupRule {
            major: 195,
            minor: 0,
        }];
        let started = Instant::now();
        let got = set_device_allow(
            &path,
            0,
            "x.scope",
            &rules,
            started + Duration::from_millis(200),
        );
        let took = started.elapsed();
        assert!(
            matches!(got, Err(DbusError::TimedOut(_))),
            "after {} queued: {got:?}",
            queued.len()
        );
        assert!(took < Duration::from_millis(400), "took {took:?}");
    }

    #[test]
    fn reply_cases() {
        let ok = reply(METHOD_RETURN, 1, None);
        assert!(matches!(reply_of(&ok, 1), Ok(Some(Ok(())))));
        assert!(
            matches!(reply_of(&ok, 2), Ok(None)),
            "another serial's answer"
        );
        let signal = reply(4, 1, None);
        assert!(matches!(reply_of(&signal, 1), Ok(None)), "a signal");
        let err = reply(
            ERROR,
            1,
            Some((
                "org.freedesktop.systemd1.NoSuchUnit",
                "Unit x.scope not loaded.",
            )),
        );
        match reply_of(&err, 1) {
            Ok(Some(Err(DbusError::Refused { name, message }))) => {
                assert_eq!(name, "org.freedesktop.systemd1.NoSuchUnit");
                assert_eq!(message, "Unit x.scope not loaded.");
            }
            other => panic!("{other:?}"),
        }
        let mut head = [0u8; 16];
        head.copy_from_slice(&err[..16]);
        assert_eq!(message_len(&head).unwrap(), err.len());
        for cut in [0, 3, 15, 20, 40] {
            assert!(
                reply_of(&err[..cut], 1).is_err(),
                "a reply cut at {cut} bytes (in its header) is malformed"
            );
        }
        // A cut body still names the error (its message is only for the log).
        match reply_of(&err[..err.len() - 1], 1) {
            Ok(Some(Err(DbusError::Refused { name, .. }))) => {
                assert_eq!(name, "org.freedesktop.systemd1.NoSuchUnit")
            }
            other => panic!("{other:?}"),
        }
        let mut big = head;
        big[4..8].copy_from_slice(&(1u32 << 30).to_le_bytes());
        assert!(message_len(&big).is_err(), "over the size limit");
        let mut be = head;
        be[0] = b'B';
        assert!(message_len(&be).is_err(), "big-endian is not read");
    }
}
