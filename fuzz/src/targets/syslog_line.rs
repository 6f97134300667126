//! The line the hooks send to the system log (`syslog::line`) for any message text (the error
//! chain of a refusal: a container's env values, paths and a driver's words can be in it).
//! Input: a flags byte (bit 0 severity warning, bits 1–2 the tag of one of the binaries that
//! send, bits 3–4 the pid), then the message (UTF-8, invalid bytes as U+FFFD).
//! Property: no panic; the line is `<PRI>TAG[PID]: ` (PRI 27 or 28) and the text; no control
//! character anywhere in it (one line, no NUL); the text at most `syslog::MAX_MESSAGE` bytes;
//! character by character the message with control characters as spaces, cut only where the
//! next character would not fit.

use nvct_formats::syslog::{self, Severity, MAX_MESSAGE};

/// The tags the binaries send with (`nvidia-container-runtime-hook`, the first word of
/// `nvidia-ctk hook`'s program name) and the unit tests' one.
const TAGS: [&str; 4] = [
    "nvidia-container-runtime-hook",
    "nvidia-cdi-hook",
    "nvidia-ctk",
    "hook",
];
/// Pids: init, a small one, Linux's largest `pid_max`, the type's largest.
const PIDS: [u32; 4] = [1, 42, 4_194_304, u32::MAX];

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let msg = String::from_utf8_lossy(rest);
    let (severity, pri) = match flags & 1 {
        0 => (Severity::Err, 27),
        _ => (Severity::Warning, 28),
    };
    let tag = TAGS[usize::from((flags >> 1) & 3)];
    let pid = PIDS[usize::from((flags >> 3) & 3)];
    let line = syslog::line(severity, tag, pid, &msg);
    let head = format!("<{pri}>{tag}[{pid}]: ");
    let Some(text) = line.strip_prefix(&head) else {
        panic!("{line:?} does not start with {head:?}");
    };
    assert!(
        text.len() <= MAX_MESSAGE,
        "a text of {} bytes (at most {MAX_MESSAGE})",
        text.len()
    );
    if let Some(c) = line.chars().find(|c| c.is_control()) {
        panic!("control character {c:?} in the line {line:?}");
    }
    let mut kept = 0;
    for (got, was) in text.chars().zip(msg.chars()) {
        assert!(
            got == was || (got == ' ' && was.is_control()),
            "{was:?} became {got:?} at character {kept}"
        );
        kept += 1;
    }
    assert_eq!(kept, text.chars().count(), "more text than message");
    if let Some(next) = msg.chars().nth(kept) {
        let next_len = if next.is_control() {
            1
        } else {
            next.len_utf8()
        };
        assert!(
            text.len() + next_len > MAX_MESSAGE,
            "cut after {} bytes, before {next:?} that fits",
            text.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Error texts as the hooks log them: one line, several lines, control characters, and
    /// messages about the limit long with a multi-byte character across it.
    fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        let with = |flags: u8, text: &str| [&[flags][..], text.as_bytes()].concat();
        let long = |fill: usize, tail: &str| "x".repeat(fill) + tail;
        vec![
            (
                "error",
                with(
                    0,
                    "error: NVIDIA_VISIBLE_DEVICES=7: no GPU 7 on this host (0, 1, 2)",
                ),
            ),
            (
                "lines",
                with(
                    0b1_0010,
                    "error: cannot mount /usr/lib/libcuda.so.1\ncaused by: \
                     EPERM\r\n\tin /var/lib/docker/overlay2/x/merged\0",
                ),
            ),
            (
                "controls",
                with(0b1_1101, "a\u{7}b\u{1b}[31mc\u{85}d\u{2028}e\u{7f}"),
            ),
            (
                "at-the-limit",
                with(0b0_1000, &long(MAX_MESSAGE - 1, "é tail")),
            ),
            (
                "four-bytes-across-the-limit",
                with(0b0_0111, &long(MAX_MESSAGE - 2, "🙂🙂")),
            ),
            (
                "controls-at-the-limit",
                with(0, &long(MAX_MESSAGE - 1, "\u{85}\u{85}")),
            ),
        ]
    }

    #[test]
    fn seeds_are_messages_the_hooks_log() {
        let seeds = seeds();
        crate::common::check_seeds("syslog_line", &seeds);
        for (_, bytes) in &seeds {
            run(bytes);
        }
        let (_, lines) = &seeds[1];
        let msg = std::str::from_utf8(&lines[1..]).unwrap();
        assert_eq!(
            syslog::line(Severity::Err, "hook", 1, msg),
            "<27>hook[1]: error: cannot mount /usr/lib/libcuda.so.1 caused by: EPERM   \
             in /var/lib/docker/overlay2/x/merged "
        );
    }
}
