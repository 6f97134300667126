//! What systemd answers on its private socket, read by the hook's one D-Bus call
//! (`container::cgroup::dbus`): `dbus::reply_of` on the whole input and, framed as the exchange
//! reads the socket (16 header bytes, `dbus::message_len`, that many bytes; up to 16 messages
//! until the answer), on each message. An input whose first byte is not `l` (little-endian,
//! which is all `reply_of` reads) is also read with an `l` there, so that mutants of the first
//! byte still reach the header fields.
//! Property: no panic; errors are `Malformed`; `message_len` is the header, the header fields
//! padded to 8 and the body as declared, within `MAX_MESSAGE`; an answer (`Some`) is given for
//! at most one serial, which is the value of a `REPLY_SERIAL` header field (code 5, signature
//! `u`, at an 8-aligned offset from 16 up to the fields array's end rounded up to 8), a method
//! return for message type 2 and a `Refused` for type 3 (with an `ERROR_NAME` field when it
//! names one); more bytes after the message (the next one on the socket) change neither the
//! answer nor the error's name.

use nvct_container::cgroup::dbus::{self, DbusError, MAX_MESSAGE};

/// The serial of the hook's call (`dbus.rs`, the exchange's `SERIAL`).
const OURS: u32 = 1;
const METHOD_RETURN: u8 = 2;
const ERROR: u8 = 3;
/// `reply_of`'s name for an error without an `ERROR_NAME` field.
const NO_NAME: &str = "(no error name)";

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    if data.first().is_some_and(|&b| b != b'l') {
        let mut le = data.to_vec();
        le[0] = b'l';
        check(&le);
    }
    check(data);
    let mut rest = data;
    for _ in 0..16 {
        let Some(head) = rest.first_chunk::<16>() else {
            return;
        };
        let word = |at: usize| u64::from(u32::from_le_bytes(head[at..at + 4].try_into().unwrap()));
        // The header, the fields array, the padding to 8 and the body, as the header declares.
        let declared = 16 + word(12) + word(4);
        let len = match dbus::message_len(head) {
            Ok(len) => len,
            Err(e) => {
                assert!(matches!(e, DbusError::Malformed(_)), "{e:?}");
                assert!(
                    head[0] != b'l' || declared + 7 > MAX_MESSAGE as u64,
                    "a little-endian message of {declared} bytes refused: {e:?}"
                );
                return;
            }
        };
        assert_eq!(head[0], b'l');
        assert!(
            len <= MAX_MESSAGE && len as u64 >= declared && (len as u64) < declared + 8,
            "message_len {len} for a header declaring {declared} bytes"
        );
        let Some(msg) = rest.get(..len) else {
            return;
        };
        check(msg);
        if !matches!(dbus::reply_of(msg, OURS), Ok(None)) {
            return;
        }
        rest = &rest[len..];
    }
}

/// The 8-aligned offsets where `reply_of` may read a header field of `msg`: from 16 to the end
/// of the fields array rounded up to 8 (it aligns to the next field once it has seen that the
/// array goes on, so a field can start in the array's padding: seed `field-past-the-array`).
fn field_starts(msg: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let end = msg.get(12..16).map_or(16, |w| {
        16usize.saturating_add(u32::from_le_bytes(w.try_into().unwrap()) as usize)
    });
    (16..=end.next_multiple_of(8).min(msg.len())).step_by(8)
}

/// The values of the `REPLY_SERIAL` fields of `msg`: code 5, signature `u`, the value at +4.
fn reply_serials(msg: &[u8]) -> impl Iterator<Item = u32> + '_ {
    field_starts(msg).filter_map(|f| {
        let field = msg.get(f..f + 8)?;
        (field[..4] == [5, 1, b'u', 0]).then(|| u32::from_le_bytes(field[4..].try_into().unwrap()))
    })
}

/// Whether `msg` has an `ERROR_NAME` field: code 4, signature `s` (or `o`, which reads alike).
fn has_error_name(msg: &[u8]) -> bool {
    field_starts(msg).any(|f| {
        msg.get(f..f + 4)
            .is_some_and(|h| h[0] == 4 && h[1] == 1 && matches!(h[2], b's' | b'o') && h[3] == 0)
    })
}

/// `reply_of` on one message, asked for our serial, 0, `u32::MAX` and the message's own
/// `REPLY_SERIAL` values.
fn check(msg: &[u8]) {
    let mut serials = vec![OURS, 0, u32::MAX];
    serials.extend(reply_serials(msg).take(16));
    serials.sort_unstable();
    serials.dedup();
    let mut answered: Option<u32> = None;
    for serial in serials {
        let answer = match dbus::reply_of(msg, serial) {
            Err(e) => {
                assert!(matches!(e, DbusError::Malformed(_)), "{e:?}");
                continue;
            }
            Ok(None) => continue,
            Ok(Some(answer)) => answer,
        };
        assert!(
            reply_serials(msg).any(|s| s == serial),
            "an answer to serial {serial} without a REPLY_SERIAL field of that value: {answer:?}"
        );
        if let Some(other) = answered.replace(serial) {
            panic!("an answer to serial {other} and to serial {serial}");
        }
        let name = match &answer {
            Ok(()) => {
                assert_eq!(
                    msg[1], METHOD_RETURN,
                    "a method return of message type {}",
                    msg[1]
                );
                None
            }
            Err(DbusError::Refused { name, .. }) => {
                assert_eq!(msg[1], ERROR, "a refusal of message type {}", msg[1]);
                assert!(
                    name == NO_NAME || has_error_name(msg),
                    "error name {name:?} without an ERROR_NAME field"
                );
                Some(name)
            }
            Err(e) => panic!("an answer that is neither a return nor a refusal: {e:?}"),
        };
        // The next message on the socket, or garbage, after it.
        let mut longer = msg.to_vec();
        longer.extend_from_slice(&[b'l', 4, 0, 1, 0xff, 0xff, 0xff, 0xff]);
        match (name, dbus::reply_of(&longer, serial)) {
            (None, Ok(Some(Ok(())))) => {}
            (Some(a), Ok(Some(Err(DbusError::Refused { name: b, .. })))) if *a == b => {}
            (_, other) => panic!("{answer:?}, but with bytes after it: {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvct_model::CgroupRule;

    /// A value of a header field or of the body.
    enum V<'a> {
        U(u32),
        S(&'a str),
        O(&'a str),
        G(&'a str),
    }

    fn pad(b: &mut Vec<u8>, align: usize) {
        while b.len() % align != 0 {
            b.push(0);
        }
    }

    /// One value, aligned from the message's start (the D-Bus specification's marshalling).
    fn put(b: &mut Vec<u8>, v: &V) {
        match v {
            V::U(n) => {
                pad(b, 4);
                b.extend(n.to_le_bytes());
            }
            V::S(s) | V::O(s) => {
                pad(b, 4);
                b.extend((s.len() as u32).to_le_bytes());
                b.extend(s.as_bytes());
                b.push(0);
            }
            V::G(s) => {
                b.push(s.len() as u8);
                b.extend(s.as_bytes());
                b.push(0);
            }
        }
    }

    /// A little-endian, protocol 1 message of type `kind` with `flags` (1: no reply expected,
    /// as sd-bus sets on its replies), serial `serial`, the header fields `fields` (code and
    /// value) in that order and the body `body`.
    fn message(kind: u8, flags: u8, serial: u32, fields: &[(u8, V)], body: &[V]) -> Vec<u8> {
        let mut b = vec![b'l', kind, flags, 1];
        b.extend([0; 4]); // the body's length, below
        b.extend(serial.to_le_bytes());
        b.extend([0; 4]); // the fields array's length, below
        for (code, v) in fields {
            pad(&mut b, 8);
            b.push(*code);
            let sig = match v {
                V::U(_) => "u",
                V::S(_) => "s",
                V::O(_) => "o",
                V::G(_) => "g",
            };
            put(&mut b, &V::G(sig));
            put(&mut b, v);
        }
        let fields_len = (b.len() - 16) as u32;
        b[12..16].copy_from_slice(&fields_len.to_le_bytes());
        pad(&mut b, 8);
        let start = b.len();
        for v in body {
            put(&mut b, v);
        }
        let body_len = (b.len() - start) as u32;
        b[4..8].copy_from_slice(&body_len.to_le_bytes());
        b
    }

    /// systemd's answers to our call (serial 1): a method return, two refusals; a signal and
    /// another serial's return before ours; and our own call (a method call, not an answer).
    fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        let ret = |serial, to| message(METHOD_RETURN, 1, serial, &[(5, V::U(to))], &[]);
        let error = |name, text| {
            message(
                ERROR,
                1,
                8,
                &[(5, V::U(1)), (4, V::S(name)), (8, V::G("s"))],
                &[V::S(text)],
            )
        };
        let signal = message(
            4,
            1,
            5,
            &[
                (1, V::O("/org/freedesktop/systemd1")),
                (2, V::S("org.freedesktop.systemd1.Manager")),
                (3, V::S("UnitNew")),
                (8, V::G("so")),
            ],
            &[
                V::S("docker-1.scope"),
                V::O("/org/freedesktop/systemd1/unit/docker_2d1_2escope"),
            ],
        );
        // A return whose fields array (a SIGNATURE field of 6 bytes) is declared 7 bytes long,
        // then a body of 8 bytes: `reply_of` reads on past the array's end (23) to the next
        // 8-aligned offset, 24, where the body starts, and takes the body for a REPLY_SERIAL.
        let mut past = message(METHOD_RETURN, 1, 7, &[(8, V::G("")), (5, V::U(1))], &[]);
        past[4..8].copy_from_slice(&8u32.to_le_bytes());
        past[12..16].copy_from_slice(&7u32.to_le_bytes());
        let gpu = |minor| CgroupRule { major: 195, minor };
        vec![
            (
                "call",
                dbus::set_device_allow_message(1, "docker-1.scope", &[gpu(0), gpu(255)]),
            ),
            (
                "error-access-denied",
                error("org.freedesktop.DBus.Error.AccessDenied", "Access denied"),
            ),
            (
                "error-no-such-unit",
                error(
                    "org.freedesktop.systemd1.NoSuchUnit",
                    "Unit docker-1.scope not loaded.",
                ),
            ),
            ("field-past-the-array", past),
            ("other-serial-then-return", [ret(6, 2), ret(7, 1)].concat()),
            ("return", ret(7, 1)),
            ("signal-then-return", [signal, ret(7, 1)].concat()),
        ]
    }

    #[test]
    fn seeds_are_systemds_answers() {
        let seeds = seeds();
        crate::common::check_seeds("dbus_reply", &seeds);
        // (seed, what the exchange makes of its first message, of its last)
        let first_last = |name: &str| -> (String, String) {
            let (_, bytes) = seeds.iter().find(|(n, _)| *n == name).unwrap();
            let len = dbus::message_len(bytes.first_chunk().unwrap()).unwrap();
            let show = |m: &[u8]| format!("{:?}", dbus::reply_of(m, OURS));
            (show(&bytes[..len]), show(&bytes[len..]))
        };
        let ok = "Ok(Some(Ok(())))";
        assert_eq!(first_last("return").0, ok);
        // A field that would start past the declared array (in its padding) is not read:
        // the body after it is no REPLY_SERIAL (it was, before the fix this seed found).
        assert_eq!(first_last("field-past-the-array").0, "Ok(None)");
        assert_eq!(first_last("call").0, "Ok(None)");
        assert_eq!(
            first_last("signal-then-return"),
            ("Ok(None)".into(), ok.into())
        );
        assert_eq!(
            first_last("other-serial-then-return"),
            ("Ok(None)".into(), ok.into())
        );
        assert!(first_last("error-no-such-unit").0.contains(
            "Refused { name: \"org.freedesktop.systemd1.NoSuchUnit\", message: \"Unit docker-1.scope not loaded.\" }"
        ));
        for (name, bytes) in &seeds {
            run(bytes);
            let len = dbus::message_len(bytes.first_chunk().unwrap()).unwrap();
            assert!(len <= bytes.len(), "{name}");
        }
    }
}
