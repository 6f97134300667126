//! PURE: runc's command line as the shim reads it (the subcommand, the bundle, runc's `--log`
//! and `--log-format`), and where the programs the shim runs are: the low-level runtime, our
//! prestart hook, `nvidia-cdi-hook`.

use super::ShimError;
use nvct_formats::config::Config;
use std::path::{Path, PathBuf};

/// File name of the hook binary; a prestart hook with this file name is ours.
pub const HOOK_NAME: &str = "nvidia-container-runtime-hook";
/// File name of the CDI hook binary that `jit-cdi` specs reference.
pub const CDI_HOOK_NAME: &str = "nvidia-cdi-hook";

/// runc's global flags that take a value (`--flag X` or `--flag=X`).
pub const GLOBAL_VALUE_FLAGS: &[&str] =
    &["--root", "--log", "--log-format", "--criu", "--rootless"];

/// What the shim needs to know about runc's command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Invocation {
    /// The runc subcommand (`create`, `start`, `state`, ...), if any.
    pub command: Option<String>,
    /// `--version` / `-v` given before any subcommand.
    pub version: bool,
    /// The bundle given with `--bundle`/`-b` (last wins); `None` means the current directory.
    pub bundle: Option<PathBuf>,
    /// runc's global `--log FILE` (last wins): the shim logs there too.
    pub log: Option<PathBuf>,
    /// runc's global `--log-format` (`text` or `json`; last wins).
    pub log_format: Option<String>,
}

impl Invocation {
    pub fn is_create(&self) -> bool {
        self.command.as_deref() == Some("create")
    }

    /// The bundle directory: the one given, else `cwd`.
    pub fn bundle_or(&self, cwd: &Path) -> PathBuf {
        self.bundle.clone().unwrap_or_else(|| cwd.to_path_buf())
    }
}

/// Parses runc's argv (without argv[0]).
pub fn parse_args(args: &[String]) -> Invocation {
    let mut inv = Invocation::default();
    let mut i = 0;
    // Global flags, up to the subcommand.
    while i < args.len() {
        let a = &args[i];
        if !a.starts_with('-') || a == "-" {
            inv.command = Some(a.clone());
            i += 1;
            break;
        }
        if a == "--" {
            i += 1;
            if let Some(c) = args.get(i) {
                inv.command = Some(c.clone());
                i += 1;
            }
            break;
        }
        if a == "--version" || a == "-v" {
            inv.version = true;
        } else if GLOBAL_VALUE_FLAGS.contains(&a.as_str()) {
            i += 1; // the value
            global_value(&mut inv, a, args.get(i));
        } else if let Some((flag, value)) = a.split_once('=') {
            global_value(&mut inv, flag, Some(&value.to_string()));
        }
        i += 1;
    }
    // Subcommand flags: only the bundle matters.
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--bundle" || a == "-b" {
            if let Some(v) = args.get(i + 1) {
                inv.bundle = Some(PathBuf::from(v));
            }
            i += 2;
            continue;
        }
        if let Some(v) = a
            .strip_prefix("--bundle=")
            .or_else(|| a.strip_prefix("-b="))
        {
            inv.bundle = Some(PathBuf::from(v));
        }
        i += 1;
    }
    inv
}

/// Records the global flags the shim itself uses.
fn global_value(inv: &mut Invocation, flag: &str, value: Option<&String>) {
    match (flag, value) {
        ("--log", Some(v)) if !v.is_empty() => inv.log = Some(PathBuf::from(v)),
        ("--log-format", Some(v)) => inv.log_format = Some(v.clone()),
        _ => {}
    }
}

/// Finds a program: an absolute path is used as is (if it exists), a name through `which`.
pub fn find_program(name: &str, which: &dyn Fn(&str) -> Option<PathBuf>) -> Option<PathBuf> {
    if name.is_empty() {
        return None;
    }
    let p = Path::new(name);
    if p.is_absolute() {
        return p.is_file().then(|| p.to_path_buf());
    }
    which(name)
}

/// The low-level runtime: the first of `runtimes` found.
pub fn find_runtime(
    runtimes: &[String],
    which: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<PathBuf, ShimError> {
    runtimes
        .iter()
        .find_map(|r| find_program(r, which))
        .ok_or_else(|| ShimError::NoRuntime(runtimes.to_vec()))
}

/// The hook binary named by the config.
pub fn find_hook(
    config: &Config,
    which: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<PathBuf, ShimError> {
    find_program(&config.hook.path, which)
        .ok_or_else(|| ShimError::NoHook(config.hook.path.clone()))
}

/// `nvidia-cdi-hook` for `jit-cdi` specs. Rule: the file of that name next to the legacy hook
/// (config `nvidia-container-runtime-hook.path`, resolved as for legacy mode), else next to
/// `nvidia-ctk` (config `nvidia-ctk.path`, upstream's documented key), else `nvidia-cdi-hook`
/// in PATH. Packages install them side by side.
pub fn find_cdi_hook(
    config: &Config,
    which: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<PathBuf, ShimError> {
    for configured in [&config.hook.path, &config.ctk.path] {
        if let Some(found) = find_program(configured, which) {
            let sibling = found.with_file_name(CDI_HOOK_NAME);
            if sibling.is_file() {
                return Ok(sibling);
            }
        }
    }
    which(CDI_HOOK_NAME).ok_or_else(|| ShimError::NoCdiHook {
        hook: config.hook.path.clone(),
    })
}
