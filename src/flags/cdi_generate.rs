//! `nvidia-ctk cdi generate`: the flags (and upstream's variables, which clap folds into them) as
//! typed → the spec to make, where, from which roots.
//!
//! PURE: [`GenerateFlags`] holds the raw values (the binary's clap struct copies them in),
//! [`resolve`] checks and defaults them into a [`Generate`]. The toolkit config is read only
//! when a root is not given, through the `load_config` closure the binary passes; the only other
//! thing read is the cwd, to make a relative root absolute (host paths go into the spec as they
//! are). An error names the flag and its variable and says what is expected ([`FlagError`]).

use std::path::{Path, PathBuf};

use nvct_cdi::Format;
use nvct_formats::config::{Config, ConfigError};
use nvct_formats::root::DriverRoot;
use nvct_inject::generate::{HookKind, NameStrategy, Options};
use nvct_inject::generate::{SpecMode, DEFAULT_CLASS, DEFAULT_HOOK_PATH, DEFAULT_VENDOR};
use nvct_inject::generate::{IMEX_CLASS, MANAGEMENT_VENDOR};
use nvct_model::{DeviceId, Devices};

/// `cdi generate`'s flags exactly as typed: a list flag as its items (comma lists split), a flag
/// with a default as that default when not typed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GenerateFlags {
    /// `--output` ("" is stdout).
    pub output: String,
    pub format: Option<String>,
    pub driver_root: Option<String>,
    pub dev_root: Option<String>,
    pub proc_root: Option<PathBuf>,
    pub device_name_strategy: Vec<String>,
    /// "" is the mode's default.
    pub vendor: String,
    /// "" is the mode's default.
    pub class: String,
    /// "" is [`DEFAULT_HOOK_PATH`].
    pub nvidia_cdi_hook_path: String,
    pub ldconfig_path: Option<String>,
    pub disable_hook: Vec<String>,
    pub enable_hook: Vec<String>,
    pub feature_flag: Vec<String>,
    pub device_id: Vec<String>,
    pub no_all_device: bool,
    pub separate_hooks: bool,
    /// "" is `auto`.
    pub mode: String,
    /// Upstream's CSV-mode (Tegra) flags, refused by name.
    pub csv_file: Vec<String>,
    pub csv_ignore_pattern: Vec<String>,
    pub library_search_path: Vec<String>,
    /// Whether systemd is the init here: `keep-device-rules` is then on unless disabled
    /// ([`HookKind::default_disabled`]).
    pub systemd_booted: bool,
}

/// `cdi generate`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generate {
    /// The file written ([`spec_file_name`] of `--output`); `None`: stdout.
    pub output: Option<PathBuf>,
    pub format: Format,
    pub root: DriverRoot,
    pub opts: Options,
}

/// A `cdi generate` command line that cannot be resolved.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error("--format {0:?} (or NVIDIA_CTK_CDI_GENERATE_OUTPUT_FORMAT): expected yaml or json")]
    Format(String),
    #[error(
        "--mode {0} (or NVIDIA_CTK_CDI_GENERATE_MODE): not supported by this toolkit yet; auto, \
         nvml, management, imex, gds, mofed, gdrcopy and nvswitch are (docs/COMPAT.md)"
    )]
    ModeNotSupported(String),
    #[error(
        "--mode {0:?} (or NVIDIA_CTK_CDI_GENERATE_MODE): expected auto, nvml, management, imex, \
         gds, mofed, gdrcopy or nvswitch"
    )]
    Mode(String),
    #[error("{0}: upstream's CSV (Tegra) mode is not supported by this toolkit")]
    Csv(&'static str),
    #[error(
        "--device-name-strategy {0:?} (or NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES): \
         expected index, uuid or type-index"
    )]
    NameStrategy(String),
    #[error(
        "--disable-hook {hook:?} (or NVIDIA_CTK_CDI_GENERATE_DISABLED_HOOKS): expected all or one \
         of {names}"
    )]
    DisableHook { hook: String, names: String },
    #[error(
        "--enable-hook all (or NVIDIA_CTK_CDI_GENERATE_ENABLED_HOOKS): enabling all hooks is not \
         supported; name them"
    )]
    EnableAll,
    #[error(
        "--enable-hook {hook:?} (or NVIDIA_CTK_CDI_GENERATE_ENABLED_HOOKS): not a hook of this \
         toolkit's specs ({names})"
    )]
    EnableHook { hook: String, names: String },
    #[error(
        "--feature-flag {flag:?} (or NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS): expected one of \
         disable-ipc-discoverer, {known}"
    )]
    FeatureFlag { flag: String, known: String },
    #[error(
        "--device-id {0:?} (or NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS): not an index, i:j, UUID or \
         PCI bus id"
    )]
    DeviceId(String),
    /// A root the cwd could not make absolute.
    #[error("{flag} {}", path.display())]
    Absolute {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The toolkit config, read because a root was not given, cannot be loaded.
    #[error("the driver root comes from {} when --driver-root is not given", path.display())]
    Config {
        path: PathBuf,
        #[source]
        source: ConfigError,
    },
}

/// Upstream's feature flags that change nothing in the specs made here (explicit driver
/// libraries are what these specs list anyway; there are no nvsandboxutils, coherent
/// annotations, CSV devices, or additional GIDs for device nodes).
pub const UPSTREAM_FEATURE_FLAGS: &[&str] = &[
    "enable-explicit-driver-libraries",
    "disable-nvsandboxutils",
    "enable-coherent-annotations",
    "disable-multiple-csv-devices",
    "no-additional-gids-for-device-nodes",
];

/// The items of a list flag or variable, trimmed, without empty ones (`a,,b`, a trailing comma,
/// an empty variable).
fn nonempty(items: &[String]) -> impl Iterator<Item = &str> {
    items.iter().map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// `value`, or `default` when it is empty (an empty variable of the env file).
fn or_default(value: String, default: &str) -> String {
    if value.is_empty() {
        default.to_owned()
    } else {
        value
    }
}

fn parse_mode(mode: &str) -> Result<SpecMode, FlagError> {
    Ok(match mode {
        "" | "auto" | "nvml" => SpecMode::Gpus,
        "imex" => SpecMode::ImexChannels,
        "management" => SpecMode::Management,
        m => match nvct_model::optin::OptIn::parse(m) {
            Some(set) => SpecMode::OptIn(set),
            None if ["csv", "wsl"].contains(&m) => {
                return Err(FlagError::ModeNotSupported(m.into()))
            }
            None => return Err(FlagError::Mode(m.into())),
        },
    })
}

/// The format: `--format`, else the output file's extension, else YAML.
fn format(typed: Option<&str>, output: Option<&Path>) -> Result<Format, FlagError> {
    Ok(match (typed.filter(|f| !f.is_empty()), output) {
        (Some("yaml"), _) => Format::Yaml,
        (Some("json"), _) => Format::Json,
        (Some(other), _) => return Err(FlagError::Format(other.into())),
        (None, Some(p)) => Format::from_path(p).unwrap_or(Format::Yaml),
        (None, None) => Format::Yaml,
    })
}

fn hook_names() -> String {
    HookKind::names()
}

fn devices(ids: &[String], mode: SpecMode) -> Result<Devices, FlagError> {
    let ids: Vec<&str> = nonempty(ids).collect();
    if ids.is_empty() || ids.contains(&"all") {
        return Ok(Devices::All);
    }
    let parsed = ids
        .iter()
        .map(|s| {
            // IMEX channels are named `N` or `channelN`, as upstream takes them.
            let s = match mode {
                SpecMode::ImexChannels => s.strip_prefix("channel").unwrap_or(s),
                SpecMode::Gpus | SpecMode::OptIn(_) | SpecMode::Management => s,
            };
            DeviceId::parse(s).ok_or_else(|| FlagError::DeviceId(s.into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Devices::List(parsed))
}

/// The flags as typed → the spec to make. `load_config` reads the toolkit config, called only
/// when a root is not given (then its roots are the defaults, as upstream takes
/// `nvidia-container-cli.root`); `special` says whether a path is a device or FIFO
/// ([`spec_file_name`]).
pub fn resolve(
    raw: GenerateFlags,
    load_config: impl FnOnce() -> Result<Config, FlagError>,
    special: impl Fn(&Path) -> bool,
) -> Result<Generate, FlagError> {
    let output = (!raw.output.is_empty()).then(|| PathBuf::from(&raw.output));
    let format = format(raw.format.as_deref(), output.as_deref())?;
    let output = output.map(|p| {
        let special = special(&p);
        spec_file_name(p, format, special)
    });
    let mode = parse_mode(&raw.mode)?;
    for (flag, given) in [
        ("--csv.file", !raw.csv_file.is_empty()),
        ("--csv.ignore-pattern", !raw.csv_ignore_pattern.is_empty()),
        ("--library-search-path", !raw.library_search_path.is_empty()),
    ] {
        if given {
            return Err(FlagError::Csv(flag));
        }
    }
    let mut strategies = Vec::new();
    for s in nonempty(&raw.device_name_strategy) {
        strategies.push(NameStrategy::parse(s).ok_or_else(|| FlagError::NameStrategy(s.into()))?);
    }
    if strategies.is_empty() {
        strategies = Options::default().strategies;
    }
    let mut disabled_hooks = HookKind::default_disabled(raw.systemd_booted);
    disabled_hooks.extend(
        HookKind::parse_disabled(nonempty(&raw.disable_hook)).map_err(|hook| {
            FlagError::DisableHook {
                hook,
                names: hook_names(),
            }
        })?,
    );
    for h in nonempty(&raw.enable_hook) {
        if h == "all" {
            return Err(FlagError::EnableAll);
        }
        let kind = HookKind::parse(h).ok_or_else(|| FlagError::EnableHook {
            hook: h.into(),
            names: hook_names(),
        })?;
        disabled_hooks.remove(&kind);
    }
    let mut no_ipc = false;
    for f in nonempty(&raw.feature_flag) {
        match f {
            "disable-ipc-discoverer" => no_ipc = true,
            f if UPSTREAM_FEATURE_FLAGS.contains(&f) => {}
            f => {
                return Err(FlagError::FeatureFlag {
                    flag: f.into(),
                    known: UPSTREAM_FEATURE_FLAGS.join(", "),
                })
            }
        }
    }
    let devices = devices(&raw.device_id, mode)?;
    let absolute = |path: PathBuf, flag: &'static str| {
        std::path::absolute(&path).map_err(|source| FlagError::Absolute { flag, path, source })
    };
    let given = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    let config = if given(&raw.driver_root) && given(&raw.dev_root) && raw.proc_root.is_some() {
        None
    } else {
        Some(load_config()?)
    };
    let driver_root = match (raw.driver_root.as_deref(), &config) {
        (Some(d), _) if !d.is_empty() => absolute(d.into(), "--driver-root")?,
        (_, Some(c)) => c.driver_root(),
        _ => PathBuf::from("/"),
    };
    let dev_root = match (raw.dev_root.as_deref(), &config) {
        (Some(d), _) if !d.is_empty() => absolute(d.into(), "--dev-root")?,
        (_, Some(c)) if !c.cli.dev_root.is_empty() => c.dev_root(),
        _ => driver_root.clone(),
    };
    let proc_root = match (raw.proc_root, &config) {
        (Some(p), _) => absolute(p, "--proc-root")?,
        (None, Some(c)) => c.proc_root(),
        (None, None) => PathBuf::from("/proc"),
    };
    let vendor = match mode {
        SpecMode::Management => MANAGEMENT_VENDOR,
        _ => DEFAULT_VENDOR,
    };
    let class = match mode {
        SpecMode::Gpus | SpecMode::Management => DEFAULT_CLASS,
        SpecMode::ImexChannels => IMEX_CLASS,
        SpecMode::OptIn(set) => set.name(),
    };
    Ok(Generate {
        output,
        format,
        root: DriverRoot::new(driver_root, dev_root, proc_root.clone()),
        opts: Options {
            vendor: or_default(raw.vendor, vendor),
            class: or_default(raw.class, class),
            strategies,
            hook_path: or_default(raw.nvidia_cdi_hook_path, DEFAULT_HOOK_PATH),
            ldconfig_path: raw.ldconfig_path.filter(|p| !p.is_empty()),
            proc_root,
            disabled_hooks,
            devices,
            no_all_device: raw.no_all_device,
            one_hook: !raw.separate_hooks,
            no_ipc,
            mode,
            ..Options::default()
        },
    })
}

/// The file a spec is written to: `path`, with `.yaml` (`.json` for that format) appended when
/// its name has neither extension, as upstream does: the CDI library reads only those names.
/// `special`: the path is a character device or a FIFO (`/dev/null`, `/dev/stdout`), written
/// through as named.
pub fn spec_file_name(path: PathBuf, format: Format, special: bool) -> PathBuf {
    let read_by_cdi = path.extension().is_some_and(|e| e == "yaml" || e == "json");
    if special || read_by_cdi {
        return path;
    }
    let ext = match format {
        Format::Json => "json",
        Format::Yaml => "yaml",
    };
    let mut name = path.into_os_string();
    name.push(".");
    name.push(ext);
    PathBuf::from(name)
}

impl Generate {
    /// What `-d` says is being done, in words.
    pub fn describe(&self) -> String {
        let o = &self.opts;
        let to = match &self.output {
            Some(p) => p.display().to_string(),
            None => "stdout".into(),
        };
        let format = match self.format {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        };
        let hooks = if o.one_hook {
            "one apply-edits hook"
        } else {
            "separate hooks"
        };
        format!(
            "generating a CDI spec for {}/{} ({format}, to {to}) from the driver under {} (devices under {}/dev, /proc at {}); hooks: {hooks} of {}",
            o.vendor,
            o.class,
            self.root.root.display(),
            self.root.dev_root.display(),
            self.root.proc_root.display(),
            o.hook_path,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvct_inject::generate::SpecMode;
    use nvct_model::optin::OptIn;
    use std::collections::BTreeSet;

    /// Roots given on the command line: the config is never read.
    fn rooted() -> GenerateFlags {
        GenerateFlags {
            driver_root: Some("/drv".into()),
            dev_root: Some("/devs".into()),
            proc_root: Some("/p".into()),
            ..Default::default()
        }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// `resolve` with the toolkit config `config` (`None`: reading it fails the test), every
    /// path an ordinary file.
    fn run(flags: GenerateFlags, config: Option<&str>) -> Result<Generate, FlagError> {
        let load = || match config {
            Some(text) => Ok(Config::parse(text, Path::new("config.toml")).unwrap()),
            None => panic!("the config was read although every root was given"),
        };
        resolve(flags, load, |_| false)
    }

    /// What the defaults give, for struct-update in the cases.
    fn defaults() -> Options {
        run(rooted(), None).unwrap().opts
    }

    #[test]
    fn options_from_flags() {
        let d = defaults();
        let hooks = |kinds: &[HookKind]| kinds.iter().copied().collect::<BTreeSet<_>>();
        let cases: Vec<(&str, GenerateFlags, Options)> = vec![
            ("nothing typed", rooted(), d.clone()),
            (
                "vendor, class, hook path, ldconfig",
                GenerateFlags {
                    vendor: "example.com".into(),
                    class: "acc".into(),
                    nvidia_cdi_hook_path: "/opt/h".into(),
                    ldconfig_path: Some("/sbin/ldconfig.real".into()),
                    ..rooted()
                },
                Options {
                    vendor: "example.com".into(),
                    class: "acc".into(),
                    hook_path: "/opt/h".into(),
                    ldconfig_path: Some("/sbin/ldconfig.real".into()),
                    ..d.clone()
                },
            ),
            (
                "empty values (of an env file) are the defaults",
                GenerateFlags {
                    nvidia_cdi_hook_path: "".into(),
                    ldconfig_path: Some("".into()),
                    mode: "".into(),
                    device_name_strategy: strings(&["", " "]),
                    device_id: strings(&[""]),
                    ..rooted()
                },
                d.clone(),
            ),
            (
                "upstream's mode names that mean the same: nvml",
                GenerateFlags {
                    mode: "nvml".into(),
                    ..rooted()
                },
                d.clone(),
            ),
            (
                "mode auto",
                GenerateFlags {
                    mode: "auto".into(),
                    ..rooted()
                },
                d.clone(),
            ),
            (
                "imex: its class; channels named N or channelN",
                GenerateFlags {
                    mode: "imex".into(),
                    device_id: strings(&["channel3", "4"]),
                    ..rooted()
                },
                Options {
                    mode: SpecMode::ImexChannels,
                    class: "imex-channel".into(),
                    devices: Devices::List(vec![DeviceId::Index(3), DeviceId::Index(4)]),
                    ..d.clone()
                },
            ),
            (
                "management: its vendor",
                GenerateFlags {
                    mode: "management".into(),
                    ..rooted()
                },
                Options {
                    mode: SpecMode::Management,
                    vendor: "management.nvidia.com".into(),
                    ..d.clone()
                },
            ),
            (
                "an opt-in set: its name is the class",
                GenerateFlags {
                    mode: "gds".into(),
                    ..rooted()
                },
                Options {
                    mode: SpecMode::OptIn(OptIn::Gds),
                    class: "gds".into(),
                    ..d.clone()
                },
            ),
            (
                "device ids: a list, trimmed, empty items dropped",
                GenerateFlags {
                    device_id: strings(&["0", " 1:2 ", "", "GPU-abc", "0000:3b:00.0"]),
                    ..rooted()
                },
                Options {
                    devices: Devices::List(vec![
                        DeviceId::Index(0),
                        DeviceId::MigIndex(1, 2),
                        DeviceId::Uuid("GPU-abc".into()),
                        DeviceId::BusId("0000:3b:00.0".into()),
                    ]),
                    ..d.clone()
                },
            ),
            (
                "device ids: all among them is all",
                GenerateFlags {
                    device_id: strings(&["1", "all"]),
                    ..rooted()
                },
                d.clone(),
            ),
            (
                "name strategies in the order given; no all device; separate hooks",
                GenerateFlags {
                    device_name_strategy: strings(&["type-index", "uuid"]),
                    no_all_device: true,
                    separate_hooks: true,
                    ..rooted()
                },
                Options {
                    strategies: vec![NameStrategy::TypeIndex, NameStrategy::Uuid],
                    no_all_device: true,
                    one_hook: false,
                    ..d.clone()
                },
            ),
            (
                "disable all",
                GenerateFlags {
                    disable_hook: strings(&["all"]),
                    ..rooted()
                },
                Options {
                    disabled_hooks: hooks(&HookKind::ALL),
                    ..d.clone()
                },
            ),
            (
                "enabled hooks win over disabled ones",
                GenerateFlags {
                    disable_hook: strings(&["create-symlinks", "enable-cuda-compat"]),
                    enable_hook: strings(&["enable-cuda-compat"]),
                    ..rooted()
                },
                Options {
                    disabled_hooks: hooks(&[HookKind::CreateSymlinks, HookKind::KeepDeviceRules]),
                    ..d.clone()
                },
            ),
            (
                "systemd the init: keep-device-rules on by default",
                GenerateFlags {
                    systemd_booted: true,
                    ..rooted()
                },
                Options {
                    disabled_hooks: BTreeSet::new(),
                    ..d.clone()
                },
            ),
            (
                "no systemd: keep-device-rules on when enabled",
                GenerateFlags {
                    enable_hook: strings(&["keep-device-rules"]),
                    ..rooted()
                },
                Options {
                    disabled_hooks: BTreeSet::new(),
                    ..d.clone()
                },
            ),
            (
                "disabling update-application-profile is accepted",
                GenerateFlags {
                    disable_hook: strings(&["update-application-profile"]),
                    ..rooted()
                },
                Options {
                    disabled_hooks: hooks(&[
                        HookKind::UpdateApplicationProfile,
                        HookKind::KeepDeviceRules,
                    ]),
                    ..d.clone()
                },
            ),
            (
                "an upstream-only hook name leaves nothing out",
                GenerateFlags {
                    disable_hook: strings(&["chmod", "create-soname-symlinks"]),
                    ..rooted()
                },
                d.clone(),
            ),
            (
                "upstream's feature flags are accepted and change nothing",
                GenerateFlags {
                    feature_flag: strings(UPSTREAM_FEATURE_FLAGS),
                    ..rooted()
                },
                d.clone(),
            ),
            (
                "disable-ipc-discoverer",
                GenerateFlags {
                    feature_flag: strings(&["disable-ipc-discoverer"]),
                    ..rooted()
                },
                Options {
                    no_ipc: true,
                    ..d.clone()
                },
            ),
        ];
        for (name, flags, want) in cases {
            let got = run(flags, None).unwrap_or_else(|e| panic!("case {name}: {e}"));
            assert_eq!(got.opts, want, "case {name}");
        }
        assert_eq!(d.vendor, "nvidia.com");
        assert_eq!(d.class, "gpu");
        assert_eq!(d.hook_path, "/usr/bin/nvidia-cdi-hook");
        assert_eq!(d.strategies, [NameStrategy::Index, NameStrategy::Uuid]);
        assert!(d.one_hook && !d.no_ipc && !d.no_all_device);
        assert_eq!((d.mode, d.devices), (SpecMode::Gpus, Devices::All));
        // Off by default where systemd is not the init (these flags say it is not).
        assert_eq!(d.disabled_hooks, hooks(&[HookKind::KeepDeviceRules]));
        assert!(d.ldconfig_path.is_none());
    }

    #[test]
    fn output_and_format() {
        // (case, --output, --format, special file, file written, format)
        let cases: &[(&str, &str, Option<&str>, bool, Option<&str>, Format)] = &[
            ("stdout, yaml", "", None, false, None, Format::Yaml),
            ("stdout, json", "", Some("json"), false, None, Format::Json),
            (
                "empty format is unset",
                "",
                Some(""),
                false,
                None,
                Format::Yaml,
            ),
            (
                "format from the extension",
                "/s/nvidia.json",
                None,
                false,
                Some("/s/nvidia.json"),
                Format::Json,
            ),
            (
                ".yml is YAML, and .yaml is appended (the CDI library reads only .yaml/.json)",
                "/s/nvidia.yml",
                None,
                false,
                Some("/s/nvidia.yml.yaml"),
                Format::Yaml,
            ),
            (
                "no extension: the format's appended",
                "/s/nvidia",
                Some("json"),
                false,
                Some("/s/nvidia.json"),
                Format::Json,
            ),
            (
                "the flag wins over the extension",
                "/s/nvidia.json",
                Some("yaml"),
                false,
                Some("/s/nvidia.json"),
                Format::Yaml,
            ),
            (
                "a device is written through as named",
                "/dev/stdout",
                None,
                true,
                Some("/dev/stdout"),
                Format::Yaml,
            ),
        ];
        for (name, output, format, special, file, want_format) in cases {
            let flags = GenerateFlags {
                output: output.to_string(),
                format: format.map(String::from),
                ..rooted()
            };
            let g = resolve(flags, || unreachable!(), |_| *special)
                .unwrap_or_else(|e| panic!("case {name}: {e}"));
            assert_eq!(g.output.as_deref(), file.map(Path::new), "case {name}");
            assert_eq!(g.format, *want_format, "case {name}");
        }
    }

    #[test]
    fn roots_from_flags_and_config() {
        let config = "[nvidia-container-cli]\nroot = \"/run/nvidia/driver\"\n";
        let with_dev =
            "[nvidia-container-cli]\nroot = \"/r\"\ndev-root = \"/dr\"\nproc-root = \"/pr\"\n";
        // (case, driver, dev, proc, config, (root, dev root, proc root))
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            Option<&'a str>,
            Option<&'a str>,
            Option<&'a str>,
            (&'a str, &'a str, &'a str),
        );
        let cases: &[Case] = &[
            (
                "all given: the config is not read",
                Some("/drv"),
                Some("/devs"),
                Some("/p"),
                None,
                ("/drv", "/devs", "/p"),
            ),
            (
                "none given, empty config: / and /proc",
                None,
                None,
                None,
                Some(""),
                ("/", "/", "/proc"),
            ),
            (
                "the config's root; dev root follows it",
                None,
                None,
                None,
                Some(config),
                ("/run/nvidia/driver", "/run/nvidia/driver", "/proc"),
            ),
            (
                "the config's three roots",
                None,
                None,
                None,
                Some(with_dev),
                ("/r", "/dr", "/pr"),
            ),
            (
                "a flag wins over the config",
                Some("/drv"),
                None,
                None,
                Some(with_dev),
                ("/drv", "/dr", "/pr"),
            ),
            (
                "an empty flag (variable) is not given",
                Some(""),
                Some(""),
                Some("/p"),
                Some(config),
                ("/run/nvidia/driver", "/run/nvidia/driver", "/p"),
            ),
            (
                "dev root follows a typed driver root",
                Some("/drv"),
                None,
                Some("/p"),
                Some(""),
                ("/drv", "/drv", "/p"),
            ),
            (
                "paths are made absolute and normalised",
                Some("/a/./b"),
                Some("/c"),
                Some("/d/"),
                None,
                ("/a/b", "/c", "/d"),
            ),
        ];
        for (name, driver, dev, proc, config, (root, dev_root, proc_root)) in cases {
            let flags = GenerateFlags {
                driver_root: driver.map(String::from),
                dev_root: dev.map(String::from),
                proc_root: proc.map(PathBuf::from),
                ..Default::default()
            };
            let g = run(flags, *config).unwrap_or_else(|e| panic!("case {name}: {e}"));
            let got = (
                g.root.root.as_path(),
                g.root.dev_root.as_path(),
                g.root.proc_root.as_path(),
            );
            let want = (Path::new(root), Path::new(dev_root), Path::new(proc_root));
            assert_eq!(got, want, "case {name}");
            assert_eq!(g.opts.proc_root, g.root.proc_root, "case {name}");
        }
        // A relative root is taken from the cwd.
        let g = run(
            GenerateFlags {
                driver_root: Some("rel".into()),
                ..rooted()
            },
            None,
        )
        .unwrap();
        assert_eq!(g.root.root, std::env::current_dir().unwrap().join("rel"));
    }

    #[test]
    fn refusals_name_the_flag_and_variable() {
        let hooks = "create-symlinks, update-ldcache, disable-device-node-modification, \
                     enable-cuda-compat, update-application-profile, keep-device-rules";
        let cases: Vec<(&str, GenerateFlags, String)> = vec![
            (
                "unknown format",
                GenerateFlags {
                    format: Some("toml".into()),
                    ..rooted()
                },
                "--format \"toml\" (or NVIDIA_CTK_CDI_GENERATE_OUTPUT_FORMAT): expected yaml or \
                 json"
                    .into(),
            ),
            (
                "a mode not supported here",
                GenerateFlags {
                    mode: "csv".into(),
                    ..rooted()
                },
                "--mode csv (or NVIDIA_CTK_CDI_GENERATE_MODE): not supported by this toolkit \
                 yet; auto, nvml, management, imex, gds, mofed, gdrcopy and nvswitch are \
                 (docs/COMPAT.md)"
                    .into(),
            ),
            (
                "wsl mode",
                GenerateFlags {
                    mode: "wsl".into(),
                    ..rooted()
                },
                "--mode wsl (or NVIDIA_CTK_CDI_GENERATE_MODE): not supported by this toolkit \
                 yet; auto, nvml, management, imex, gds, mofed, gdrcopy and nvswitch are \
                 (docs/COMPAT.md)"
                    .into(),
            ),
            (
                "an unknown mode",
                GenerateFlags {
                    mode: "fast".into(),
                    ..rooted()
                },
                "--mode \"fast\" (or NVIDIA_CTK_CDI_GENERATE_MODE): expected auto, nvml, \
                 management, imex, gds, mofed, gdrcopy or nvswitch"
                    .into(),
            ),
            (
                "a CSV-mode flag",
                GenerateFlags {
                    csv_file: strings(&["/etc/x.csv"]),
                    ..rooted()
                },
                "--csv.file: upstream's CSV (Tegra) mode is not supported by this toolkit".into(),
            ),
            (
                "csv ignore pattern",
                GenerateFlags {
                    csv_ignore_pattern: strings(&["x"]),
                    ..rooted()
                },
                "--csv.ignore-pattern: upstream's CSV (Tegra) mode is not supported by this \
                 toolkit"
                    .into(),
            ),
            (
                "library search path",
                GenerateFlags {
                    library_search_path: strings(&["/x"]),
                    ..rooted()
                },
                "--library-search-path: upstream's CSV (Tegra) mode is not supported by this \
                 toolkit"
                    .into(),
            ),
            (
                "unknown strategy",
                GenerateFlags {
                    device_name_strategy: strings(&["index", "name"]),
                    ..rooted()
                },
                "--device-name-strategy \"name\" (or \
                 NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES): expected index, uuid or \
                 type-index"
                    .into(),
            ),
            (
                "unknown hook",
                GenerateFlags {
                    disable_hook: strings(&["nope"]),
                    ..rooted()
                },
                format!(
                    "--disable-hook \"nope\" (or NVIDIA_CTK_CDI_GENERATE_DISABLED_HOOKS): \
                     expected all or one of {hooks}"
                ),
            ),
            (
                "enable all hooks",
                GenerateFlags {
                    enable_hook: strings(&["all"]),
                    ..rooted()
                },
                "--enable-hook all (or NVIDIA_CTK_CDI_GENERATE_ENABLED_HOOKS): enabling all \
                 hooks is not supported; name them"
                    .into(),
            ),
            (
                "enable a hook we do not write",
                GenerateFlags {
                    enable_hook: strings(&["chmod"]),
                    ..rooted()
                },
                format!(
                    "--enable-hook \"chmod\" (or NVIDIA_CTK_CDI_GENERATE_ENABLED_HOOKS): not a \
                     hook of this toolkit's specs ({hooks})"
                ),
            ),
            (
                "an unknown feature flag",
                GenerateFlags {
                    feature_flag: strings(&["go-faster"]),
                    ..rooted()
                },
                format!(
                    "--feature-flag \"go-faster\" (or NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS): \
                     expected one of disable-ipc-discoverer, {}",
                    UPSTREAM_FEATURE_FLAGS.join(", ")
                ),
            ),
            (
                "not a device id",
                GenerateFlags {
                    device_id: strings(&["gpu0"]),
                    ..rooted()
                },
                "--device-id \"gpu0\" (or NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS): not an index, \
                 i:j, UUID or PCI bus id"
                    .into(),
            ),
            (
                "an imex channel name is stripped before it is judged",
                GenerateFlags {
                    mode: "imex".into(),
                    device_id: strings(&["channelx"]),
                    ..rooted()
                },
                "--device-id \"x\" (or NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS): not an index, i:j, \
                 UUID or PCI bus id"
                    .into(),
            ),
        ];
        for (name, flags, want) in cases {
            match run(flags, None) {
                Ok(g) => panic!("case {name}: accepted: {g:?}"),
                Err(e) => assert_eq!(e.to_string(), want, "case {name}"),
            }
        }
    }

    #[test]
    fn a_config_that_does_not_load_is_named_with_its_cause() {
        let flags = GenerateFlags {
            driver_root: Some("/drv".into()),
            ..Default::default()
        };
        let e = resolve(
            flags,
            || {
                let path = PathBuf::from("/etc/nvidia-container-runtime/config.toml");
                Err(FlagError::Config {
                    source: Config::parse("= x", &path).unwrap_err(),
                    path,
                })
            },
            |_| false,
        )
        .unwrap_err();
        let text = nvct_formats::log::error_text(std::iter::successors(
            Some(&e as &(dyn std::error::Error + 'static)),
            |e| e.source(),
        ));
        assert!(
            text.starts_with(
                "the driver root comes from /etc/nvidia-container-runtime/config.toml when \
                 --driver-root is not given: config file /etc/nvidia-container-runtime/config.toml \
                 is not valid"
            ),
            "{text}"
        );
    }

    #[test]
    fn describe_says_what_and_where() {
        let g = run(
            GenerateFlags {
                output: "/var/run/cdi/nvidia.yaml".into(),
                separate_hooks: true,
                ..rooted()
            },
            None,
        )
        .unwrap();
        assert_eq!(
            g.describe(),
            "generating a CDI spec for nvidia.com/gpu (YAML, to /var/run/cdi/nvidia.yaml) from \
             the driver under /drv (devices under /devs/dev, /proc at /p); hooks: separate hooks \
             of /usr/bin/nvidia-cdi-hook"
        );
        let g = run(
            GenerateFlags {
                format: Some("json".into()),
                ..rooted()
            },
            None,
        )
        .unwrap();
        assert_eq!(
            g.describe(),
            "generating a CDI spec for nvidia.com/gpu (JSON, to stdout) from the driver under \
             /drv (devices under /devs/dev, /proc at /p); hooks: one apply-edits hook of \
             /usr/bin/nvidia-cdi-hook"
        );
    }
}
