//! `nvidia-container-cli`'s command line, as libnvidia-container's (glibc argp): global options
//! before the command (`--root`, `--ldcache`, `--user[=UID[:GID]]`, `--debug`, `--load-kmods`,
//! `--no-pivot`, `--no-create-imex-channels`), then `info`, `list` or `configure` with their
//! own options, mixed with their arguments (`--` ends the options). Long options may be
//! abbreviated to any unambiguous prefix; short ones may be bundled (`-cu`); a required
//! argument is the next word or follows `=` (long) or the letter (short); an optional one
//! (`--user`) only follows `=` or the letter. Usage errors read as argp's and exit 1;
//! `--help`, `--usage` and `--version` (`-V`) print to stdout and exit 0.
//!
//! PURE: words in, a [`Parsed`] out.

use nvct_inject::container_cli::{Configure, Globals, List};
use nvct_model::Capability;
use std::path::PathBuf;

const PROG: &str = "nvidia-container-cli";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Text for stdout, exit 0 (`--help`, `--usage`).
    Print(String),
    Version,
    /// Text for stderr, exit 1 (usage and input errors).
    Fail(String),
    Info(Globals, bool),
    List(Globals, List),
    Configure(Globals, Configure),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Arg {
    No,
    Required,
    Optional,
}

/// One option: its long name, short letter, argument and help line.
struct Opt {
    long: &'static str,
    short: Option<char>,
    arg: Arg,
    value: &'static str,
    help: &'static str,
}

const fn opt(
    long: &'static str,
    short: Option<char>,
    arg: Arg,
    value: &'static str,
    help: &'static str,
) -> Opt {
    Opt {
        long,
        short,
        arg,
        value,
        help,
    }
}

/// Every level's own: help, usage, version.
const BUILTIN: [Opt; 3] = [
    opt("help", Some('?'), Arg::No, "", "This help"),
    opt(
        "usage",
        None,
        Arg::No,
        "",
        "The command line in one paragraph",
    ),
    opt("version", Some('V'), Arg::No, "", "The version"),
];

const GLOBAL: &[Opt] = &[
    opt(
        "debug",
        Some('d'),
        Arg::Required,
        "FILE",
        "Write a debug log to FILE",
    ),
    opt(
        "load-kmods",
        Some('k'),
        Arg::No,
        "",
        "Accepted; kernel modules are not loaded",
    ),
    opt(
        "ldcache",
        Some('l'),
        Arg::Required,
        "FILE",
        "The ld cache under the root (/etc/ld.so.cache)",
    ),
    opt(
        "no-create-imex-channels",
        None,
        Arg::No,
        "",
        "Accepted; no IMEX channel is created",
    ),
    opt(
        "no-pivot",
        Some('n'),
        Arg::No,
        "",
        "Accepted; nothing pivots here",
    ),
    opt(
        "root",
        Some('r'),
        Arg::Required,
        "PATH",
        "The driver root (default: the toolkit config's, else /)",
    ),
    opt(
        "user",
        Some('u'),
        Arg::Optional,
        "UID[:GID]",
        "Accepted; files are made as the caller",
    ),
];

const INFO: &[Opt] = &[opt(
    "csv",
    None,
    Arg::No,
    "",
    "Comma-separated values, as Incus and LXD read them",
)];

const LIST: &[Opt] = &[
    opt("binaries", Some('b'), Arg::No, "", "The driver's binaries"),
    opt("compat32", None, Arg::No, "", "The 32-bit libraries too"),
    opt(
        "device",
        Some('d'),
        Arg::Required,
        "ID",
        "The device nodes of these GPUs (indices, UUIDs, bus ids, all)",
    ),
    opt("firmwares", Some('f'), Arg::No, "", "The GSP firmware"),
    opt("imex-channel", None, Arg::Required, "CHANNEL", "Accepted"),
    opt(
        "ipcs",
        Some('i'),
        Arg::No,
        "",
        "The daemons' sockets and the MPS directory",
    ),
    opt(
        "libraries",
        Some('l'),
        Arg::No,
        "",
        "The driver's libraries",
    ),
    opt("mig-config", None, Arg::Required, "ID", "Accepted"),
    opt("mig-monitor", None, Arg::Required, "ID", "Accepted"),
    opt(
        "no-fabricmanager",
        None,
        Arg::No,
        "",
        "Not the fabric manager's socket",
    ),
    opt("no-gsp-firmware", None, Arg::No, "", "No GSP firmware"),
    opt(
        "no-persistenced",
        None,
        Arg::No,
        "",
        "Not the persistence daemon's socket",
    ),
];

const CONFIGURE: &[Opt] = &[
    opt("compat32", None, Arg::No, "", "32-bit libraries"),
    opt("compute", Some('c'), Arg::No, "", "Compute (CUDA, OpenCL)"),
    opt(
        "cuda-compat-mode",
        None,
        Arg::Required,
        "MODE",
        "mount, ldconfig or disabled",
    ),
    opt(
        "device",
        Some('d'),
        Arg::Required,
        "ID",
        "GPUs: indices, GPU or MIG UUIDs, GPU:MIG, bus ids, all, none, void",
    ),
    opt("display", Some('D'), Arg::No, "", "Display"),
    opt(
        "graphics",
        Some('g'),
        Arg::No,
        "",
        "Graphics (OpenGL, Vulkan)",
    ),
    opt(
        "imex-channel",
        None,
        Arg::Required,
        "CHANNEL",
        "Accepted; not injected by this CLI",
    ),
    opt(
        "ldconfig",
        Some('l'),
        Arg::Required,
        "PATH",
        "The host ldconfig (@PATH; a plain PATH is read on the host too)",
    ),
    opt(
        "mig-config",
        None,
        Arg::Required,
        "ID",
        "Accepted; not injected by this CLI",
    ),
    opt(
        "mig-monitor",
        None,
        Arg::Required,
        "ID",
        "Accepted; not injected by this CLI",
    ),
    opt("ngx", Some('n'), Arg::No, "", "NGX"),
    opt(
        "no-cgroups",
        None,
        Arg::No,
        "",
        "Leave the device cgroup alone",
    ),
    opt(
        "no-cntlibs",
        None,
        Arg::No,
        "",
        "No CUDA forward compatibility",
    ),
    opt(
        "no-devbind",
        None,
        Arg::No,
        "",
        "Do not mount the device nodes",
    ),
    opt(
        "no-fabricmanager",
        None,
        Arg::No,
        "",
        "Not the fabric manager's socket",
    ),
    opt("no-gsp-firmware", None, Arg::No, "", "No GSP firmware"),
    opt(
        "no-persistenced",
        None,
        Arg::No,
        "",
        "Not the persistence daemon's socket",
    ),
    opt(
        "pid",
        Some('p'),
        Arg::Required,
        "PID",
        "The container's init (supervised); default: this namespace (standalone)",
    ),
    opt(
        "require",
        Some('r'),
        Arg::Required,
        "EXPR",
        "A requirement (cuda>=12.0 brand=tesla,arch>=8.0); up to 32",
    ),
    opt(
        "utility",
        Some('u'),
        Arg::No,
        "",
        "Utility (nvidia-smi, NVML)",
    ),
    opt("video", Some('v'), Arg::No, "", "Video (encode, decode)"),
];

/// `Try `PROG --help' or `PROG --usage' for more information.`, wrapped at 79 columns as argp.
fn try_line(prog: &str) -> String {
    wrap(&format!(
        "Try `{prog} --help' or `{prog} --usage' for more information."
    ))
}

fn wrap(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.len() + 1 + word.len() > 79 {
            out += &line;
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line += word;
    }
    out + &line + "\n"
}

fn fail(prog: &str, first: &str) -> Parsed {
    Parsed::Fail(format!("{first}\n{}", try_line(prog)))
}

/// One level's words → its options (long name, value) and other words. `in_order`: the first
/// other word ends the options (the global level: it is the command).
fn scan(
    prog: &str,
    opts: &[Opt],
    words: &[String],
    in_order: bool,
) -> Result<(Vec<(&'static str, Option<String>)>, Vec<String>), Box<Parsed>> {
    let all: Vec<&Opt> = opts.iter().chain(BUILTIN.iter()).collect();
    let mut found = Vec::new();
    let mut rest = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if w == "--" {
            rest.extend(words[i..].iter().cloned());
            break;
        }
        if let Some(body) = w.strip_prefix("--") {
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let o = match all.iter().find(|o| o.long == name) {
                Some(o) => *o,
                None => {
                    let cands: Vec<&&Opt> =
                        all.iter().filter(|o| o.long.starts_with(name)).collect();
                    match cands.as_slice() {
                        [o] => **o,
                        [] => {
                            return Err(Box::new(fail(
                                prog,
                                &format!("{prog}: unrecognized option '{w}'"),
                            )))
                        }
                        many => {
                            let names: Vec<String> =
                                many.iter().map(|o| format!("'--{}'", o.long)).collect();
                            return Err(Box::new(fail(
                                prog,
                                &format!(
                                    "{prog}: option '--{name}' is ambiguous; possibilities: {}",
                                    names.join(" ")
                                ),
                            )));
                        }
                    }
                }
            };
            let value = match (o.arg, value) {
                (Arg::No, Some(_)) => {
                    return Err(Box::new(fail(
                        prog,
                        &format!("{prog}: option '--{}' doesn't allow an argument", o.long),
                    )))
                }
                (Arg::Required, None) => match words.get(i) {
                    Some(v) => {
                        i += 1;
                        Some(v.clone())
                    }
                    None => {
                        return Err(Box::new(fail(
                            prog,
                            &format!("{prog}: option '--{}' requires an argument", o.long),
                        )))
                    }
                },
                (_, v) => v,
            };
            found.push((o.long, value));
            continue;
        }
        if let Some(body) = w.strip_prefix('-').filter(|b| !b.is_empty()) {
            let chars: Vec<char> = body.chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let c = chars[j];
                j += 1;
                let Some(o) = all.iter().find(|o| o.short == Some(c)) else {
                    return Err(Box::new(fail(
                        prog,
                        &format!("{prog}: invalid option -- '{c}'"),
                    )));
                };
                let attached: String = chars[j..].iter().collect();
                let value = match o.arg {
                    Arg::No => None,
                    Arg::Optional => {
                        j = chars.len();
                        (!attached.is_empty()).then_some(attached)
                    }
                    Arg::Required if !attached.is_empty() => {
                        j = chars.len();
                        Some(attached)
                    }
                    Arg::Required => match words.get(i) {
                        Some(v) => {
                            i += 1;
                            Some(v.clone())
                        }
                        None => {
                            return Err(Box::new(fail(
                                prog,
                                &format!("{prog}: option requires an argument -- '{c}'"),
                            )))
                        }
                    },
                };
                found.push((o.long, value));
            }
            continue;
        }
        rest.push(w.clone());
        if in_order {
            rest.extend(words[i..].iter().cloned());
            break;
        }
    }
    Ok((found, rest))
}

/// The help text of a level.
fn help(usage: &str, about: &str, opts: &[Opt]) -> String {
    let mut all: Vec<&Opt> = opts.iter().chain(BUILTIN.iter()).collect();
    all.sort_by_key(|o| o.long);
    let mut out = format!("{usage}\n{about}\n\n Options:\n");
    for o in all {
        let short = o
            .short
            .map(|c| format!("-{c}, "))
            .unwrap_or_else(|| "    ".into());
        let value = match o.arg {
            Arg::No => String::new(),
            Arg::Required => format!("={}", o.value),
            Arg::Optional => format!("[={}]", o.value),
        };
        let left = format!("  {short}--{}{value}", o.long);
        out += &format!("{left:<29}{}\n", o.help);
    }
    out
}

/// Whether one of the built-ins was given: its output.
fn builtin(
    found: &[(&str, Option<String>)],
    usage: &str,
    about: &str,
    opts: &[Opt],
) -> Option<Parsed> {
    found.iter().find_map(|(name, _)| match *name {
        "help" => Some(Parsed::Print(help(usage, about, opts))),
        "usage" => Some(Parsed::Print(format!("{usage}\n"))),
        "version" => Some(Parsed::Version),
        _ => None,
    })
}

const MAIN_USAGE: &str = "Usage: nvidia-container-cli [OPTION...] COMMAND [ARG...]";
const MAIN_ABOUT: &str = "GPUs for containers whose engine runs this CLI (LXC, Incus, enroot, Apptainer).\n\n Commands:\n  configure                  Give a container's rootfs its GPUs\n  info                       The driver and its GPUs\n  list                       The host paths a container would get";

/// Parses `words` (the arguments, without the program's name).
pub fn parse(words: &[String]) -> Parsed {
    let (found, rest) = match scan(PROG, GLOBAL, words, true) {
        Ok(x) => x,
        Err(p) => return *p,
    };
    if let Some(p) = builtin(&found, MAIN_USAGE, MAIN_ABOUT, GLOBAL) {
        return p;
    }
    let mut g = Globals::default();
    for (name, value) in found {
        match name {
            "debug" => g.debug = value,
            "load-kmods" => g.load_kmods = true,
            "ldcache" => g.ldcache = value,
            "no-pivot" | "no-create-imex-channels" => g.no_pivot = true,
            "root" => g.root = value,
            "user" => g.user = Some(value),
            _ => {}
        }
    }
    let Some((command, args)) = rest.split_first() else {
        return fail(PROG, MAIN_USAGE);
    };
    let sub = format!("{PROG} {command}");
    match command.as_str() {
        "info" => {
            let usage = format!("Usage: {sub} [OPTION...]");
            let (found, rest) = match scan(&sub, INFO, args, false) {
                Ok(x) => x,
                Err(p) => return *p,
            };
            if let Some(p) = builtin(&found, &usage, "The driver and its GPUs.", INFO) {
                return p;
            }
            if !rest.is_empty() {
                return fail(&sub, &format!("{sub}: Too many arguments"));
            }
            Parsed::Info(g, !found.is_empty())
        }
        "list" => {
            let usage = format!("Usage: {sub} [OPTION...]");
            let (found, rest) = match scan(&sub, LIST, args, false) {
                Ok(x) => x,
                Err(p) => return *p,
            };
            if let Some(p) = builtin(
                &found,
                &usage,
                "The host paths a container would get.",
                LIST,
            ) {
                return p;
            }
            if !rest.is_empty() {
                return fail(&sub, &format!("{sub}: Too many arguments"));
            }
            let mut l = List {
                everything: found.iter().all(|(n, _)| *n == "imex-channel"),
                ..List::default()
            };
            for (name, value) in found {
                match name {
                    "device" => l.devices.extend(value),
                    "libraries" => l.libraries = true,
                    "binaries" => l.binaries = true,
                    "ipcs" => l.ipcs = true,
                    "firmwares" => l.firmwares = true,
                    "compat32" => l.compat32 = true,
                    "no-persistenced" => l.no_persistenced = true,
                    "no-fabricmanager" => l.no_fabricmanager = true,
                    "no-gsp-firmware" => l.no_gsp_firmware = true,
                    _ => {}
                }
            }
            Parsed::List(g, l)
        }
        "configure" => configure(g, &sub, args),
        _ => fail(PROG, MAIN_USAGE),
    }
}

fn input_error(message: &str) -> Parsed {
    Parsed::Fail(format!("{PROG}: input error: {message}\n"))
}

fn configure(g: Globals, sub: &str, args: &[String]) -> Parsed {
    let usage = format!("Usage: {sub} [OPTION...] ROOTFS");
    let (found, rest) = match scan(sub, CONFIGURE, args, false) {
        Ok(x) => x,
        Err(p) => return *p,
    };
    let about = "Gives the container whose rootfs is ROOTFS its GPUs: from inside its mount namespace\n(standalone), or from the host with --pid (supervised).";
    if let Some(p) = builtin(&found, &usage, about, CONFIGURE) {
        return p;
    }
    let [rootfs] = rest.as_slice() else {
        return fail(sub, &usage);
    };
    if !rootfs.starts_with('/') || rootfs.trim_end_matches('/').is_empty() {
        return input_error("invalid rootfs directory");
    }
    let mut c = Configure {
        rootfs: PathBuf::from(rootfs),
        ..Configure::default()
    };
    for (name, value) in found {
        let value = value.unwrap_or_default();
        match name {
            "pid" => match value.parse::<i64>() {
                Ok(p) if p <= 0 => c.pid = None,
                Ok(p) => match u32::try_from(p) {
                    Ok(p) => c.pid = Some(p),
                    Err(_) => {
                        return input_error("parse pid failed: numerical result out of range")
                    }
                },
                Err(_) => return input_error("parse pid failed: invalid argument"),
            },
            "device" => c.devices.push(value),
            "require" => {
                if c.requirements.len() == 32 {
                    return input_error("too many requirements");
                }
                c.requirements.push(value);
            }
            "ldconfig" => c.ldconfig = Some(value),
            "no-cgroups" => c.no_cgroups = true,
            "no-devbind" => c.no_devbind = true,
            "no-persistenced" => c.no_persistenced = true,
            "no-fabricmanager" => c.no_fabricmanager = true,
            "no-gsp-firmware" => c.no_gsp_firmware = true,
            "no-cntlibs" => c.no_cuda_compat = true,
            "cuda-compat-mode" => match value.as_str() {
                "disabled" => c.no_cuda_compat = true,
                "mount" | "ldconfig" => {}
                other => {
                    return input_error(&format!(
                        "--cuda-compat-mode={other}: expected mount, ldconfig or disabled"
                    ))
                }
            },
            "mig-config" => c.mig_config.push(value),
            "mig-monitor" => c.mig_monitor.push(value),
            "imex-channel" => c.imex_channels.push(value),
            cap => {
                if let Some(cap) = Capability::from_name(cap) {
                    c.capabilities.insert(cap);
                }
            }
        }
    }
    Parsed::Configure(g, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn lxc_hook_line() {
        // The line LXC's hooks/nvidia builds (lxc/lxc hooks/nvidia).
        let p = parse(&words(
            "--user --root=/drv configure --no-cgroups --ldconfig=@/sbin/ldconfig.real \
             --device=0,1 --compute --utility --require=cuda>=12.0 /var/lib/lxc/c1/rootfs",
        ));
        let Parsed::Configure(g, c) = p else {
            panic!("{p:?}")
        };
        assert_eq!(g.user, Some(None));
        assert_eq!(g.root.as_deref(), Some("/drv"));
        assert!(c.no_cgroups);
        assert_eq!(c.ldconfig.as_deref(), Some("@/sbin/ldconfig.real"));
        assert_eq!(c.devices, ["0,1"]);
        assert_eq!(
            c.capabilities,
            [Capability::Compute, Capability::Utility]
                .into_iter()
                .collect()
        );
        assert_eq!(c.requirements, ["cuda>=12.0"]);
        assert_eq!(c.rootfs, PathBuf::from("/var/lib/lxc/c1/rootfs"));
    }

    #[test]
    fn grammar_cases() {
        // (case, words, what parse gives: a Debug prefix)
        let cases = [
            ("prefix of a long option", "configure --dev 0 --comp /r", "Fail(\"nvidia-container-cli configure: option '--comp' is ambiguous; possibilities: '--compat32' '--compute'"),
            ("bundled shorts", "configure -cu -d0 /r", "Configure("),
            ("user with a value", "--user=1000:1000 info", "Info(Globals { root: None, ldcache: None, user: Some(Some(\"1000:1000\"))"),
            ("-u X does not take X", "-u info", "Info("),
            ("no command", "--root=/", "Fail(\"Usage: nvidia-container-cli [OPTION...] COMMAND [ARG...]\\nTry `nvidia-container-cli --help' or `nvidia-container-cli --usage' for more\\ninformation.\\n\")"),
            ("unknown command", "start", "Fail(\"Usage: nvidia-container-cli"),
            ("unknown option", "--foo info", "Fail(\"nvidia-container-cli: unrecognized option '--foo'\\nTry"),
            ("invalid short", "configure -x /r", "Fail(\"nvidia-container-cli configure: invalid option -- 'x'"),
            ("missing argument", "--debug", "Fail(\"nvidia-container-cli: option '--debug' requires an argument"),
            ("no argument allowed", "info --csv=1", "Fail(\"nvidia-container-cli info: option '--csv' doesn't allow an argument"),
            ("too many arguments", "info extra", "Fail(\"nvidia-container-cli info: Too many arguments"),
            ("no rootfs", "configure --compute", "Fail(\"Usage: nvidia-container-cli configure [OPTION...] ROOTFS\\nTry `nvidia-container-cli configure --help' or `nvidia-container-cli configure\\n--usage' for more information.\\n\")"),
            ("relative rootfs", "configure rootfs", "Fail(\"nvidia-container-cli: input error: invalid rootfs directory\\n\")"),
            ("rootfs /", "configure /", "Fail(\"nvidia-container-cli: input error: invalid rootfs directory"),
            ("bad pid", "configure --pid=x /r", "Fail(\"nvidia-container-cli: input error: parse pid failed: invalid argument"),
            ("version anywhere", "configure -V", "Version"),
            ("help", "--help", "Print(\"Usage: nvidia-container-cli [OPTION...] COMMAND [ARG...]\\n"),
            ("-- ends the options", "configure --compute -- /r", "Configure("),
        ];
        for (name, w, want) in cases {
            let got = format!("{:?}", parse(&words(w)));
            assert!(got.starts_with(want), "case {name}: {got}");
        }
        let many = format!("configure {} /r", "--require=cuda>=1 ".repeat(33));
        assert_eq!(
            parse(&words(&many)),
            Parsed::Fail("nvidia-container-cli: input error: too many requirements\n".into())
        );
    }

    #[test]
    fn list_defaults() {
        let Parsed::List(_, l) = parse(&words("list")) else {
            panic!()
        };
        assert!(l.everything);
        let Parsed::List(_, l) = parse(&words("list --binaries --libraries")) else {
            panic!()
        };
        assert!(!l.everything && l.binaries && l.libraries && l.devices.is_empty());
    }
}
