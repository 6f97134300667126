//! The toolkit's own config.toml (`/etc/nvidia-container-runtime/config.toml`): types, defaults,
//! where the file is found, and loading it. Read-only: editing the file is `nvidia-ctk config`'s
//! job. Keys and defaults mirror the upstream toolkit (see docs/COMPAT.md); keys this version
//! does not know are ignored on load, so a config written for a newer toolkit still loads.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Env var that names the config file (upstream spelling).
pub const CONFIG_PATH_ENV: &str = "NVIDIA_CTK_CONFIG_FILE_PATH";
/// The shipped default config (config/config.toml): every key at its default, with comments.
/// `nvidia-ctk config default` prints it; `nvidia-ctk config` edits it when the file is missing.
pub const DEFAULT_TEXT: &str = include_str!("../../../config/config.toml");
/// Config files larger than this are refused: it is a small hand-written file.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is larger than 1 MiB; is it the right file?")]
    TooLarge { path: PathBuf },
    #[error("config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path}: {key} = {value:?} is not allowed: {why}")]
    Invalid {
        path: PathBuf,
        key: &'static str,
        value: String,
        why: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct Config {
    pub disable_require: bool,
    pub swarm_resource: String,
    pub supported_driver_capabilities: String,
    pub accept_nvidia_visible_devices_envvar_when_unprivileged: bool,
    pub accept_nvidia_visible_devices_as_volume_mounts: bool,
    #[serde(rename = "nvidia-container-cli")]
    pub cli: CliConfig,
    #[serde(rename = "nvidia-container-runtime")]
    pub runtime: RuntimeConfig,
    #[serde(rename = "nvidia-container-runtime-hook")]
    pub hook: HookConfig,
    #[serde(rename = "nvidia-ctk")]
    pub ctk: CtkConfig,
    pub features: Features,
}

/// `[nvidia-container-cli]`: where the driver is and how the hook injects it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct CliConfig {
    /// Driver root: "" means `/`. Typical with the GPU Operator: `/run/nvidia/driver`.
    pub root: String,
    /// Ours: where the `/dev/nvidia*` nodes live; "" means the driver root.
    pub dev_root: String,
    /// Ours: where `/proc/driver/nvidia` and `/proc/devices` are read from; "" means `/proc`.
    pub proc_root: String,
    pub path: String,
    pub environment: Vec<String>,
    /// Log file of the hook ("" = none).
    pub debug: String,
    pub ldcache: String,
    pub load_kmods: bool,
    pub no_cgroups: bool,
    pub user: String,
    /// `@/sbin/ldconfig`: `@` means a host binary.
    pub ldconfig: String,
}

/// `[nvidia-container-runtime]`: the shim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct RuntimeConfig {
    pub debug: String,
    pub log_level: LogLevel,
    pub runtimes: Vec<String>,
    pub mode: Mode,
    pub modes: Modes,
}

/// `nvidia-container-runtime.mode`: checked when the config loads, so a typo fails
/// `nvidia-ctk config` and the first container with the key's name instead of loading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Auto,
    Legacy,
    Cdi,
    JitCdi,
}

/// `nvidia-container-runtime.modes.legacy.cuda-compat-mode` (upstream's four values). Every
/// value but `disabled` does the same safe thing here: an ld.so.conf.d entry, never a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CudaCompatMode {
    Ldconfig,
    Mount,
    Hook,
    Disabled,
}

/// `nvidia-container-runtime.log-level`, most severe first (so `a <= b` means "a is at least
/// as severe as b"). logrus spellings are accepted: `trace` is debug, `fatal`/`panic` error,
/// `warn` warning; anything else fails the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum LogLevel {
    Error,
    Warning,
    Info,
    Debug,
}

impl LogLevel {
    pub fn parse(s: &str) -> Option<LogLevel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "error" | "fatal" | "panic" => Some(LogLevel::Error),
            "warning" | "warn" => Some(LogLevel::Warning),
            "info" => Some(LogLevel::Info),
            "debug" | "trace" => Some(LogLevel::Debug),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warning => "warning",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        }
    }
}

impl TryFrom<String> for LogLevel {
    type Error = String;
    fn try_from(s: String) -> Result<LogLevel, String> {
        LogLevel::parse(&s).ok_or_else(|| {
            format!("unknown log level {s:?}, expected one of debug, info, warning, error")
        })
    }
}

impl From<LogLevel> for String {
    fn from(l: LogLevel) -> String {
        l.as_str().into()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
pub struct Modes {
    pub cdi: CdiMode,
    pub legacy: LegacyMode,
    pub jit_cdi: JitCdiMode,
}

/// `nvidia-container-runtime.modes.jit-cdi`: upstream's settings of the specs jit-cdi makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
pub struct JitCdiMode {
    /// Hooks left out of jit-cdi's edits (`cdi generate --disable-hook` names, or `all`).
    pub nvcdi_disable_hooks: Vec<String>,
    /// Upstream's spec generator feature flags: accepted, none changes anything here.
    pub nvcdi_feature_flags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct CdiMode {
    pub default_kind: String,
    pub annotation_prefixes: Vec<String>,
    pub spec_dirs: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct LegacyMode {
    pub cuda_compat_mode: CudaCompatMode,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct HookConfig {
    pub path: String,
    pub skip_mode_detection: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct CtkConfig {
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
pub struct Features {
    pub allow_ldconfig_from_container: bool,
    pub allow_cuda_compat_libs_from_container: bool,
    pub disable_cuda_compat_lib_hook: bool,
    pub ignore_imex_channel_requests: bool,
    /// Ours: write containers' ld caches with the host ldconfig only (never natively).
    pub disable_native_ldcache: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            disable_require: false,
            swarm_resource: String::new(),
            supported_driver_capabilities: "compat32,compute,display,graphics,ngx,utility,video"
                .into(),
            accept_nvidia_visible_devices_envvar_when_unprivileged: true,
            accept_nvidia_visible_devices_as_volume_mounts: false,
            cli: CliConfig::default(),
            runtime: RuntimeConfig::default(),
            hook: HookConfig::default(),
            ctk: CtkConfig::default(),
            features: Features::default(),
        }
    }
}

impl Default for CliConfig {
    fn default() -> Self {
        CliConfig {
            root: String::new(),
            dev_root: String::new(),
            proc_root: String::new(),
            path: String::new(),
            environment: Vec::new(),
            debug: String::new(),
            ldcache: String::new(),
            load_kmods: true,
            no_cgroups: false,
            user: String::new(),
            ldconfig: "@/sbin/ldconfig".into(),
        }
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            debug: "/dev/null".into(),
            log_level: LogLevel::Info,
            runtimes: vec!["runc".into(), "crun".into()],
            mode: Mode::Auto,
            modes: Modes::default(),
        }
    }
}

impl Default for CdiMode {
    fn default() -> Self {
        CdiMode {
            default_kind: "nvidia.com/gpu".into(),
            annotation_prefixes: vec!["cdi.k8s.io/".into()],
            spec_dirs: vec!["/etc/cdi".into(), "/var/run/cdi".into()],
        }
    }
}

impl Default for LegacyMode {
    fn default() -> Self {
        LegacyMode {
            cuda_compat_mode: CudaCompatMode::Ldconfig,
        }
    }
}

impl Default for HookConfig {
    fn default() -> Self {
        HookConfig {
            path: "nvidia-container-runtime-hook".into(),
            skip_mode_detection: false,
        }
    }
}

impl Default for CtkConfig {
    fn default() -> Self {
        CtkConfig {
            path: "nvidia-ctk".into(),
        }
    }
}

/// Where the config file is: `$NVIDIA_CTK_CONFIG_FILE_PATH`, else
/// `${XDG_CONFIG_HOME:-/etc}/nvidia-container-runtime/config.toml`.
/// `lookup` stands for `std::env::var` so that this stays pure.
pub fn default_path(lookup: impl Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(p) = lookup(CONFIG_PATH_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = lookup("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/etc".into());
    Path::new(&base).join("nvidia-container-runtime/config.toml")
}

/// A TOML error of `text` (the file at `path`) on one line (`line 2, column 8: invalid type:
/// ...`): the parser's own text draws the line with a caret over several lines, which an
/// error line cannot carry.
fn parse_error(text: &str, path: &Path, e: &toml::de::Error) -> ConfigError {
    let message = e.message().trim().replace('\n', "; ");
    let message = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    };
    ConfigError::Parse {
        path: path.to_path_buf(),
        message,
    }
}

impl Config {
    /// Parses config text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| parse_error(text, path, &e))?;
        config.validate(path)?;
        Ok(config)
    }

    /// Loads the file at `path`, with a warning for each key this version does not know (a
    /// typo such as `roott` loads, but is named, with the closest known key). The file is read
    /// and parsed once, into a table that serves both (the hook and the shim load it on every
    /// start); only a type error parses it again, for the error's line and column.
    pub fn load_checked(path: &Path) -> Result<(Config, Vec<String>), ConfigError> {
        let Some(text) = read_text(path)? else {
            return Ok((Config::default(), Vec::new()));
        };
        let doc = text
            .parse::<toml::Table>()
            .map_err(|e| parse_error(&text, path, &e))?;
        let warnings = unknown_keys_of(&doc, path);
        // A type error: the text again, for the error with its place in the text.
        let config: Config = match doc.try_into() {
            Ok(config) => config,
            Err(_) => toml::from_str(&text).map_err(|e| parse_error(&text, path, &e))?,
        };
        config.validate(path)?;
        Ok((config, warnings))
    }

    /// Loads the file at `path`; a missing file means the defaults (upstream behaviour).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        match read_text(path)? {
            None => Ok(Config::default()),
            Some(text) => Config::parse(&text, path),
        }
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let ldconfig = &self.cli.ldconfig;
        if !ldconfig.starts_with('@') && !self.features.allow_ldconfig_from_container {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                key: "nvidia-container-cli.ldconfig",
                value: ldconfig.clone(),
                why: "an ldconfig from the container is never run; use a host binary such as \
                      \"@/sbin/ldconfig\""
                    .into(),
            });
        }
        if ldconfig
            .strip_prefix('@')
            .is_some_and(|p| !p.starts_with('/'))
        {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                key: "nvidia-container-cli.ldconfig",
                value: ldconfig.clone(),
                why: "the host ldconfig must be an absolute path after '@'".into(),
            });
        }
        Ok(())
    }

    /// The driver root, `/` when unset.
    pub fn driver_root(&self) -> PathBuf {
        non_empty_or(&self.cli.root, "/")
    }

    /// Where the device nodes are: the driver root unless `dev-root` is set.
    pub fn dev_root(&self) -> PathBuf {
        if self.cli.dev_root.is_empty() {
            self.driver_root()
        } else {
            PathBuf::from(&self.cli.dev_root)
        }
    }

    /// The driver root, device root and procfs root together (the host's architecture).
    pub fn driver(&self) -> crate::root::DriverRoot {
        crate::root::DriverRoot::new(self.driver_root(), self.dev_root(), self.proc_root())
    }

    /// Where the driver's procfs files are read from, `/proc` when unset.
    pub fn proc_root(&self) -> PathBuf {
        non_empty_or(&self.cli.proc_root, "/proc")
    }

    /// Whether an image's CUDA forward-compat libraries may go first in its ld cache (the
    /// prestart hook, and the `enable-cuda-compat` hook of `jit-cdi`): on unless
    /// `modes.legacy.cuda-compat-mode = "disabled"` or `features.disable-cuda-compat-lib-hook`.
    /// Every other mode (`ldconfig`, upstream's `mount` and `hook`) does the same safe thing:
    /// an ld.so.conf.d entry, never a mount of a file from the image.
    pub fn cuda_compat_enabled(&self) -> bool {
        self.runtime.modes.legacy.cuda_compat_mode != CudaCompatMode::Disabled
            && !self.features.disable_cuda_compat_lib_hook
    }

    /// The host ldconfig binary (the part after `@`).
    pub fn host_ldconfig(&self) -> PathBuf {
        PathBuf::from(self.cli.ldconfig.trim_start_matches('@'))
    }
}

/// The config file's text, `None` when it does not exist; larger than 1 MiB is refused.
fn read_text(path: &Path) -> Result<Option<String>, ConfigError> {
    let read_err = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    std::fs::read_to_string(path).map(Some).map_err(read_err)
}

/// PURE: a warning for each key of `text` that this version does not know, naming the closest
/// known key when one is near (edit distance at most 3). Keys of upstream's config that this
/// version loads but ignores are known (docs/COMPAT.md lists them).
pub fn unknown_keys(text: &str, path: &Path) -> Vec<String> {
    match text.parse::<toml::Table>() {
        Ok(doc) => unknown_keys_of(&doc, path),
        Err(_) => vec![],
    }
}

/// [`unknown_keys`] of a parsed file.
fn unknown_keys_of(doc: &toml::Table, path: &Path) -> Vec<String> {
    let known = KNOWN_KEYS;
    let mut given = Vec::new();
    key_paths(doc, "", &mut given);
    let ignored: Vec<&str> = IGNORED_KEYS
        .iter()
        .copied()
        .filter(|k| given.iter().any(|g| g == k))
        .collect();
    // The defaults' values, serialised only for a file that sets a key this version ignores.
    let defaults = if ignored.is_empty() {
        toml::Table::new()
    } else {
        toml::Value::try_from(Config::default())
            .ok()
            .and_then(|v| v.as_table().cloned())
            .unwrap_or_default()
    };
    let mut notes: Vec<String> = ignored
        .into_iter()
        .filter(|k| lookup(doc, k) != lookup(&defaults, k))
        .map(|k| {
            format!(
                "{}: {k} is accepted but has no effect in this toolkit (docs/COMPAT.md)",
                path.display()
            )
        })
        .collect();
    // Upstream's own defaults that this version has no field for: silent at upstream's value
    // (its `config default` writes them), a note otherwise.
    notes.extend(
        UPSTREAM_DEFAULTS
            .iter()
            .filter(|(k, v)| lookup(doc, k).is_some_and(|g| g.as_str() != Some(v)))
            .map(|(k, _)| {
                format!(
                    "{}: {k} is accepted but has no effect in this toolkit (docs/COMPAT.md)",
                    path.display()
                )
            }),
    );
    let unknown = given
        .into_iter()
        .filter(|k| !UPSTREAM_DEFAULTS.iter().any(|(u, _)| u == k))
        .filter(|k| {
            !known.iter().any(|kn| {
                k.strip_prefix(kn)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
            })
        })
        .map(|k| {
            let closest = known
                .iter()
                .map(|kn| (edit_distance(&k, kn), kn))
                .min()
                .filter(|(d, _)| *d <= 3);
            match closest {
                Some((_, kn)) => format!(
                    "{}: unknown key {k} (ignored; did you mean {kn}?)",
                    path.display()
                ),
                None => format!(
                    "{}: unknown key {k} (ignored by this version)",
                    path.display()
                ),
            }
        });
    notes.extend(unknown);
    notes
}

/// Every key of this version's config: the dotted paths of the defaults' values
/// (`tests::known_keys_are_the_defaults_keys` keeps the two the same).
const KNOWN_KEYS: &[&str] = &[
    "accept-nvidia-visible-devices-as-volume-mounts",
    "accept-nvidia-visible-devices-envvar-when-unprivileged",
    "disable-require",
    "features.allow-cuda-compat-libs-from-container",
    "features.allow-ldconfig-from-container",
    "features.disable-cuda-compat-lib-hook",
    "features.disable-native-ldcache",
    "features.ignore-imex-channel-requests",
    "nvidia-container-cli.debug",
    "nvidia-container-cli.dev-root",
    "nvidia-container-cli.environment",
    "nvidia-container-cli.ldcache",
    "nvidia-container-cli.ldconfig",
    "nvidia-container-cli.load-kmods",
    "nvidia-container-cli.no-cgroups",
    "nvidia-container-cli.path",
    "nvidia-container-cli.proc-root",
    "nvidia-container-cli.root",
    "nvidia-container-cli.user",
    "nvidia-container-runtime.debug",
    "nvidia-container-runtime.log-level",
    "nvidia-container-runtime.mode",
    "nvidia-container-runtime.modes.cdi.annotation-prefixes",
    "nvidia-container-runtime.modes.cdi.default-kind",
    "nvidia-container-runtime.modes.cdi.spec-dirs",
    "nvidia-container-runtime.modes.jit-cdi.nvcdi-disable-hooks",
    "nvidia-container-runtime.modes.jit-cdi.nvcdi-feature-flags",
    "nvidia-container-runtime.modes.legacy.cuda-compat-mode",
    "nvidia-container-runtime.runtimes",
    "nvidia-container-runtime-hook.path",
    "nvidia-container-runtime-hook.skip-mode-detection",
    "nvidia-ctk.path",
    "supported-driver-capabilities",
    "swarm-resource",
];

/// Keys of upstream's default config (its `nvidia-ctk config default`, 1.18) that this version
/// has no field for, with upstream's default value: `csv` mode's spec dir (the mode is
/// refused here; docs/COMPAT.md).
const UPSTREAM_DEFAULTS: &[(&str, &str)] = &[(
    "nvidia-container-runtime.modes.csv.mount-spec-path",
    "/etc/nvidia-container-runtime/host-files-for-container.d",
)];

/// Keys of upstream's config that load but do nothing here (docs/COMPAT.md's table).
const IGNORED_KEYS: &[&str] = &[
    "nvidia-container-cli.path",
    "nvidia-container-cli.environment",
    "nvidia-container-cli.ldcache",
    "nvidia-container-cli.load-kmods",
    "nvidia-container-cli.user",
    "nvidia-container-runtime-hook.skip-mode-detection",
    "features.allow-cuda-compat-libs-from-container",
];

/// The value at a dotted key path.
fn lookup<'t>(table: &'t toml::Table, key: &str) -> Option<&'t toml::Value> {
    let mut parts = key.split('.');
    let mut v = table.get(parts.next()?)?;
    for p in parts {
        v = v.as_table()?.get(p)?;
    }
    Some(v)
}

/// Dotted paths of every non-table value in `table`.
fn key_paths(table: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in table {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => key_paths(t, &path, out),
            _ => out.push(path),
        }
    }
}

/// Levenshtein distance (keys are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != *cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

fn non_empty_or(value: &str, default: &str) -> PathBuf {
    PathBuf::from(if value.is_empty() { default } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_are_the_defaults_keys() {
        let defaults = toml::Value::try_from(Config::default()).unwrap();
        let mut keys = Vec::new();
        key_paths(defaults.as_table().unwrap(), "", &mut keys);
        keys.sort();
        let mut known: Vec<String> = KNOWN_KEYS.iter().map(|k| k.to_string()).collect();
        known.sort();
        assert_eq!(
            known, keys,
            "KNOWN_KEYS must list every key of Config::default()"
        );
    }

    #[test]
    fn missing_file_means_defaults() {
        let c = Config::load(Path::new("/nonexistent/config.toml")).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.cli.ldconfig, "@/sbin/ldconfig");
        assert_eq!(c.runtime.runtimes, vec!["runc", "crun"]);
    }

    #[test]
    fn parse_cases() {
        let p = Path::new("/etc/x/config.toml");
        let cases: &[(&str, &str, Result<fn(&Config) -> bool, &str>)] = &[
            ("empty", "", Ok(|c| *c == Config::default())),
            (
                "root",
                "[nvidia-container-cli]\nroot = \"/run/nvidia/driver\"\n",
                Ok(|c| {
                    c.driver_root() == Path::new("/run/nvidia/driver")
                        && c.dev_root() == Path::new("/run/nvidia/driver")
                }),
            ),
            (
                "unknown keys ignored",
                "future-key = 1\n[nvidia-container-cli]\nnew = true\n",
                Ok(|c| *c == Config::default()),
            ),
            (
                "unprivileged off",
                "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n",
                Ok(|c| !c.accept_nvidia_visible_devices_envvar_when_unprivileged),
            ),
            (
                "container ldconfig refused",
                "[nvidia-container-cli]\nldconfig = \"/sbin/ldconfig\"\n",
                Err("an ldconfig from the container is never run"),
            ),
            (
                "relative host ldconfig",
                "[nvidia-container-cli]\nldconfig = \"@ldconfig\"\n",
                Err("absolute path"),
            ),
            (
                "not TOML: the line and column",
                "[nvidia-container-cli]\nroot = \n",
                Err("line 2, column 8"),
            ),
            (
                "a type error deep in a table: the line",
                "[nvidia-container-runtime]\nmode = \"legacy\"\nruntimes = \"runc\"\n",
                Err("line 3"),
            ),
            (
                "wrong type",
                "disable-require = \"yes\"\n",
                Err("config.toml is not valid"),
            ),
            (
                "bad mode names the key",
                "[nvidia-container-runtime]\nmode = \"csv\"\n",
                Err("unknown variant `csv`, expected one of `auto`, `legacy`, `cdi`, `jit-cdi`"),
            ),
            (
                "jit-cdi mode",
                "[nvidia-container-runtime]\nmode = \"jit-cdi\"\n",
                Ok(|c| c.runtime.mode == Mode::JitCdi),
            ),
            (
                "bad log level",
                "[nvidia-container-runtime]\nlog-level = \"verbose\"\n",
                Err("unknown log level \"verbose\""),
            ),
            (
                "logrus level spelling",
                "[nvidia-container-runtime]\nlog-level = \"warn\"\n",
                Ok(|c| c.runtime.log_level == LogLevel::Warning),
            ),
            (
                "bad cuda-compat-mode",
                "[nvidia-container-runtime.modes.legacy]\ncuda-compat-mode = \"off\"\n",
                Err("unknown variant `off`"),
            ),
            (
                "cuda-compat disabled",
                "[nvidia-container-runtime.modes.legacy]\ncuda-compat-mode = \"disabled\"\n",
                Ok(|c| !c.cuda_compat_enabled()),
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        for (name, text, want) in cases {
            match (Config::parse(text, p), want) {
                (Ok(c), Ok(check)) => assert!(check(&c), "{name}: unexpected {c:?}"),
                (Err(e), Err(msg)) => assert!(e.to_string().contains(msg), "{name}: {e}"),
                (got, _) => panic!("{name}: got {got:?}"),
            }
            // The loader parses once for both the config and its warnings: the same result.
            std::fs::write(&file, text).unwrap();
            let loaded = Config::load_checked(&file).map(|(c, _)| c);
            let parsed = Config::parse(text, &file);
            match (loaded, parsed) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{name}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}"),
                (a, b) => panic!("{name}: load_checked {a:?}, parse {b:?}"),
            }
        }
    }

    #[test]
    fn unknown_key_cases() {
        let p = Path::new("/c.toml");
        let cases: &[(&str, &str, &[&str])] = &[
            ("none", "[nvidia-container-cli]\nroot = \"/\"\n", &[]),
            ("typo with a near key", "[nvidia-container-cli]\nroott = \"/\"\n",
                &["/c.toml: unknown key nvidia-container-cli.roott (ignored; did you mean nvidia-container-cli.root?)"]),
            ("far from everything", "totally-new-feature = 1\n", &["/c.toml: unknown key totally-new-feature (ignored by this version)"]),
            ("upstream's csv default", "[nvidia-container-runtime.modes.csv]\nmount-spec-path = \"/etc/nvidia-container-runtime/host-files-for-container.d\"\n", &[]),
            ("upstream's csv key, another value", "[nvidia-container-runtime.modes.csv]\nmount-spec-path = \"/x\"\n", &["/c.toml: nvidia-container-runtime.modes.csv.mount-spec-path is accepted but has no effect in this toolkit (docs/COMPAT.md)"]),
            ("an upstream key we ignore, at its default", "[nvidia-container-cli]\nload-kmods = true\n", &[]),
            ("an upstream key we ignore, set", "[nvidia-container-cli]\nload-kmods = false\n",
                &["/c.toml: nvidia-container-cli.load-kmods is accepted but has no effect in this toolkit (docs/COMPAT.md)"]),
            ("a list value is one key", "[nvidia-container-runtime]\nruntimes = [\"runc\"]\n", &[]),
            ("not TOML: the loader reports it", "[[[", &[]),
        ];
        for (name, text, want) in cases {
            assert_eq!(unknown_keys(text, p), *want, "case {name}");
        }
        assert_eq!(edit_distance("roott", "root"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn path_resolution() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            default_path(env(&[])),
            Path::new("/etc/nvidia-container-runtime/config.toml")
        );
        assert_eq!(
            default_path(env(&[("XDG_CONFIG_HOME", "/x")])),
            Path::new("/x/nvidia-container-runtime/config.toml")
        );
        assert_eq!(
            default_path(env(&[
                ("XDG_CONFIG_HOME", "/x"),
                (CONFIG_PATH_ENV, "/c.toml")
            ])),
            Path::new("/c.toml")
        );
    }
}

#[cfg(test)]
mod shipped {
    use super::*;

    /// config/config.toml documents every key with its default: it must parse to exactly the
    /// defaults, and serialising the defaults must name no key the file lacks.
    #[test]
    fn shipped_config_is_the_defaults() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../config/config.toml"
        ));
        let text = std::fs::read_to_string(path).unwrap();
        assert_eq!(text, DEFAULT_TEXT, "the embedded default text is stale");
        assert_eq!(
            Config::parse(DEFAULT_TEXT, path).unwrap(),
            Config::default()
        );
        let defaults = toml::to_string(&Config::default()).unwrap();
        for line in defaults.lines().filter(|l| l.contains(" = ")) {
            let key = line.split(" = ").next().unwrap();
            assert!(
                text.contains(&format!("{key} = ")),
                "config/config.toml lacks {key}"
            );
        }
    }
}
