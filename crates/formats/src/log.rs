//! The runtime shim's log: leveled lines to the config's `nvidia-container-runtime.debug` file
//! (unless "" or "/dev/null") and to runc's own `--log FILE` when the shim's command line has one,
//! in runc's format: logrus JSON lines (`{"level":"info","msg":"...","time":"RFC3339"}`) with
//! `--log-format json`, else logrus text (`time="..." level=info msg="..."`). Lines below
//! `nvidia-container-runtime.log-level` (debug | info | warning | error) are dropped.
//!
//! The prestart hook uses the same logger ([`Logger::for_hook`]): its `nvidia-container-cli.debug`
//! file, timestamped, and stderr with `-debug`. The shim's logger never writes to stdout or
//! stderr: the shim's stdout belongs to runc. Files are opened for
//! append (runc appends to the same `--log` file after us) and close on exec; a file that cannot
//! be opened or written is skipped silently, since logging must never fail a container.
//!
//! Also [`error_text`], the one-line error every binary prints on stderr.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::config::RuntimeConfig;

/// Severity: the config's `log-level` type.
pub use crate::config::LogLevel as Level;

/// runc's `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Text,
    Json,
}

impl Format {
    /// `json` is JSON; anything else (runc's default `text`) is text.
    pub fn parse(s: &str) -> Format {
        if s == "json" {
            Format::Json
        } else {
            Format::Text
        }
    }
}

/// One log line, formatted. `unix` is seconds since the epoch (UTC).
pub fn format_line(format: Format, level: Level, msg: &str, unix: u64) -> String {
    let time = rfc3339(unix);
    match format {
        Format::Json => json!({"level": level.as_str(), "msg": msg, "time": time}).to_string(),
        Format::Text => format!(
            "time=\"{time}\" level={} msg={}",
            level.as_str(),
            json!(msg)
        ),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch.
pub fn rfc3339(unix: u64) -> String {
    let (days, secs) = (unix / 86_400, unix % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The shim's logger. Starts with runc's `--log` file only (so errors while loading the config
/// reach it), at level info; [`Logger::configure`] adds the debug file and the level.
#[derive(Debug)]
pub struct Logger {
    level: Level,
    format: Format,
    files: Vec<(PathBuf, File)>,
    /// Also write `<program>: <msg>` lines to stderr (the prestart hook's `-debug`; never the
    /// shim, whose stdout and stderr belong to runc).
    stderr: Option<&'static str>,
}

fn open_append(path: &Path) -> Option<File> {
    OpenOptions::new().create(true).append(true).open(path).ok()
}

impl Logger {
    /// A logger writing to runc's `--log` file, if given, in `format`.
    pub fn new(runc_log: Option<&Path>, format: Format) -> Logger {
        let files = runc_log
            .and_then(|p| Some((p.to_path_buf(), open_append(p)?)))
            .into_iter()
            .collect();
        Logger {
            level: Level::Info,
            format,
            files,
            stderr: None,
        }
    }

    /// The prestart hook's log: the config's `nvidia-container-cli.debug` file (if set) at debug
    /// level, in logrus text format (timestamped), and stderr too with `-debug`.
    pub fn for_hook(debug_file: &str, stderr: bool) -> Logger {
        let mut log = Logger::new(None, Format::Text);
        log.add_file(Path::new(debug_file));
        log.level = Level::Debug;
        log.stderr = stderr.then_some("nvidia-container-runtime-hook");
        log
    }

    /// A logger at debug level writing `<program>: <msg>` lines to stderr only (the CDI hooks'
    /// `--debug`).
    pub fn stderr_only(program: &'static str) -> Logger {
        let mut log = Logger::new(None, Format::Text);
        log.level = Level::Debug;
        log.stderr = Some(program);
        log
    }

    /// Adds a file to write to ("" and `/dev/null` mean none; an unopenable file is skipped).
    pub fn add_file(&mut self, path: &Path) {
        let unset = path.as_os_str().is_empty() || path == Path::new("/dev/null");
        if !unset && !self.files.iter().any(|(p, _)| p == path) {
            if let Some(f) = open_append(path) {
                self.files.push((path.to_path_buf(), f));
            }
        }
    }

    /// Applies `[nvidia-container-runtime]`: `log-level` (checked when the config loaded) and
    /// the `debug` file.
    pub fn configure(&mut self, config: &RuntimeConfig) {
        self.add_file(Path::new(&config.debug));
        self.level = config.log_level;
    }

    /// Whether lines of `level` are written anywhere.
    pub fn enabled(&self, level: Level) -> bool {
        level <= self.level && (!self.files.is_empty() || self.stderr.is_some())
    }

    pub fn log(&mut self, level: Level, msg: &str) {
        if !self.enabled(level) {
            return;
        }
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Some(program) = self.stderr {
            eprintln!("{program}: {}", escape_controls(msg));
        }
        let mut line = format_line(self.format, level, msg, unix);
        line.push('\n');
        for (_, f) in &mut self.files {
            let _ = f.write_all(line.as_bytes());
        }
    }

    pub fn error(&mut self, msg: &str) {
        self.log(Level::Error, msg);
    }
    pub fn warning(&mut self, msg: &str) {
        self.log(Level::Warning, msg);
    }
    pub fn info(&mut self, msg: &str) {
        self.log(Level::Info, msg);
    }
    pub fn debug(&mut self, msg: &str) {
        self.log(Level::Debug, msg);
    }
}

/// Step timings for the debug log: [`Steps::mark`] after each step records the microseconds
/// since the previous mark; [`Steps::line`] is one line `step timings (us): a=12 b=340 total=352`
/// (scripts/bench.sh `--breakdown` reads it). Timings are logged, never asserted.
#[derive(Debug)]
pub struct Steps {
    start: Instant,
    last: Instant,
    parts: Vec<(&'static str, u128)>,
}

impl Steps {
    pub fn start() -> Steps {
        let now = Instant::now();
        Steps {
            start: now,
            last: now,
            parts: Vec::new(),
        }
    }

    /// Ends the step `name` (the time since the previous mark, or the start).
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.parts
            .push((name, now.duration_since(self.last).as_micros()));
        self.last = now;
    }

    /// The marks so far and the total since the start.
    pub fn line(&self) -> String {
        let mut out = String::from("step timings (us):");
        for (name, us) in &self.parts {
            out.push_str(&format!(" {name}={us}"));
        }
        out.push_str(&format!(" total={}", self.start.elapsed().as_micros()));
        out
    }
}

/// One line for an error and its causes, as `{:#}` would print them, but without repeating a
/// cause that a message already contains (our thiserror messages embed their `source`).
/// Control characters (a newline in an annotation key, an escape sequence in an env value)
/// are escaped, so a container's input can never forge or split a line on stderr.
pub fn error_text<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut out = String::new();
    for cause in chain {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    escape_controls(&out)
}

/// `\n`, `\t`, `\r` and every other control character as an escape (`\u{1b}`).
pub fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("container path /usr/lib64: {source}")]
        Embeds { source: std::io::Error },
        #[error("cannot mask /proc/driver/nvidia")]
        Wraps(#[source] std::io::Error),
    }

    #[test]
    fn control_characters_are_escaped() {
        let cases = [
            (
                "plain",
                "annotation cdi.k8s.io/x",
                "annotation cdi.k8s.io/x",
            ),
            ("newline", "key a\nforged line", "key a\\nforged line"),
            ("escape sequence", "\u{1b}[31mred", "\\u{1b}[31mred"),
            ("tab and CR", "a\tb\rc", "a\\tb\\rc"),
            ("non-ASCII kept", "GPU-é", "GPU-é"),
        ];
        for (name, input, want) in cases {
            assert_eq!(escape_controls(input), want, "case {name}");
        }
    }

    #[test]
    fn error_text_cases() {
        let eloop = || std::io::Error::from_raw_os_error(libc::ELOOP);
        let cases: [(&str, Outer, &str); 2] = [
            (
                "a cause already in the message is not repeated",
                Outer::Embeds { source: eloop() },
                "container path /usr/lib64: Too many levels of symbolic links (os error 40)",
            ),
            (
                "a cause not in the message is appended",
                Outer::Wraps(eloop()),
                "cannot mask /proc/driver/nvidia: Too many levels of symbolic links (os error 40)",
            ),
        ];
        for (name, err, want) in cases {
            let chain =
                std::iter::successors(Some(&err as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                });
            assert_eq!(error_text(chain), want, "case {name}");
        }
    }

    #[test]
    fn times() {
        let cases = [
            ("epoch", 0, "1970-01-01T00:00:00Z"),
            ("leap day", 951_782_400, "2000-02-29T00:00:00Z"),
            ("end of 2023", 1_704_067_199, "2023-12-31T23:59:59Z"),
            ("2026", 1_780_000_000, "2026-05-28T20:26:40Z"),
        ];
        for (name, unix, want) in cases {
            assert_eq!(rfc3339(unix), want, "case {name}");
        }
    }

    #[test]
    fn lines() {
        let cases = [
            (
                "json",
                Format::Json,
                Level::Info,
                "a \"b\"",
                r#"{"level":"info","msg":"a \"b\"","time":"1970-01-01T00:00:00Z"}"#,
            ),
            (
                "text",
                Format::Text,
                Level::Warning,
                "a \"b\"",
                r#"time="1970-01-01T00:00:00Z" level=warning msg="a \"b\"""#,
            ),
        ];
        for (name, format, level, msg, want) in cases {
            assert_eq!(format_line(format, level, msg, 0), want, "case {name}");
        }
    }

    #[test]
    fn step_line_names_each_step_and_the_total() {
        let mut steps = Steps::start();
        steps.mark("read");
        steps.mark("write");
        let line = steps.line();
        let names: Vec<&str> = line
            .trim_start_matches("step timings (us): ")
            .split(' ')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                assert!(v.parse::<u128>().is_ok(), "{kv} in {line}");
                k
            })
            .collect();
        assert_eq!(names, ["read", "write", "total"]);
    }

    #[test]
    fn levels_filter() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("info", "info", &["error", "warning", "info"][..]),
            ("error", "error", &["error"][..]),
            ("debug", "debug", &["error", "warning", "info", "debug"][..]),
            ("logrus warn", "warn", &["error", "warning"][..]),
        ];
        for (name, level, want) in cases {
            let file = dir.path().join(format!("{name}.log"));
            let mut log = Logger::new(Some(&file), Format::Json);
            let config = RuntimeConfig {
                log_level: Level::parse(level).unwrap(),
                ..RuntimeConfig::default()
            };
            log.configure(&config);
            for l in [Level::Error, Level::Warning, Level::Info, Level::Debug] {
                log.log(l, "m");
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let got: Vec<String> = text
                .lines()
                .map(|l| {
                    serde_json::from_str::<serde_json::Value>(l).unwrap()["level"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            assert_eq!(got, want, "case {name}");
        }
    }
}
