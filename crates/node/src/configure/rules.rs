//! The rules of a configure run, pure: what is written where ([`Resolved`], [`Target`],
//! [`Output`]), the engine's transform over the documents read ([`transform`]), which documents
//! the edit builds on ([`dump_args`], [`merges_imports`], [`dump_reflects_file`]), what counts as
//! a change ([`is_change`]), which file keeps a `.bak` ([`Target::keeps_backup`]), the `-d` text
//! and the restart hint. Nothing here reads a file or the environment; the binary's flags
//! resolve into a [`Resolved`] (`nvct::flags::runtime`).

use std::path::{Path, PathBuf};

use nvct_engines::{containerd, Engine, Error, Options, Outcome, Source};

/// What is written where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The engine's config, and the drop-in that registers the runtime if there is one.
    ConfigFile {
        config: PathBuf,
        drop_in: Option<PathBuf>,
        /// The engine binary whose dump is the base (`--config-source=command`).
        dump_with: Option<PathBuf>,
    },
    /// An OCI hooks.d file (None: printed to stdout) running the hook binary `hook`.
    OciHook { file: Option<PathBuf>, hook: String },
}

impl Target {
    /// The file whose directory is locked around a write.
    pub fn locked_file(&self) -> Option<&Path> {
        match self {
            Target::ConfigFile { config, .. } => Some(config),
            Target::OciHook { file, .. } => file.as_deref(),
        }
    }

    /// The drop-in written, if any.
    pub fn drop_in(&self) -> Option<&Path> {
        match self {
            Target::ConfigFile { drop_in, .. } => drop_in.as_deref(),
            Target::OciHook { .. } => None,
        }
    }
}

/// What becomes of the changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Write,
    /// `--dry-run`: the new content of each changed file.
    Content,
    /// `--diff`: a unified diff of each changed file.
    Diff,
}

/// Typed, defaulted, checked options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub engine: Engine,
    /// configure (true) or unconfigure.
    pub configure: bool,
    pub target: Target,
    pub output: Output,
    pub opts: Options,
}

/// The documents a config-file run starts from, as read from disk.
#[derive(Debug, Clone, Copy)]
pub struct Documents<'a> {
    /// The engine's config file as it is (empty when there is none).
    pub main: Source<'a>,
    /// What configure builds on: `main`, the engine's dump, or `main` merged with its imports.
    pub base: Source<'a>,
    /// unconfigure: the main file's `.bak`, if any.
    pub previous: Option<&'a str>,
}

/// The engine's transform for this run: the new content of every file.
pub fn transform(r: &Resolved, docs: Documents<'_>) -> Result<Outcome, Error> {
    let drop_in = r.target.drop_in();
    let Documents {
        main,
        base,
        previous,
    } = docs;
    let opts = &r.opts;
    let api = r.engine.api();
    if r.configure {
        api.configure(main, base, drop_in, opts)
    } else {
        api.unconfigure(main, previous, drop_in, opts)
    }
}

impl Resolved {
    /// What `-d` says is being done, in words.
    pub fn describe(&self) -> String {
        let verb = if self.configure {
            "configuring"
        } else {
            "unconfiguring"
        };
        let engine = self.engine.api().display_name();
        let files = match &self.target {
            Target::ConfigFile {
                config,
                drop_in,
                dump_with,
            } => {
                let base = match dump_with {
                    Some(bin) => format!("starting from `{} config dump`", bin.display()),
                    None => format!("starting from {}", config.display()),
                };
                match drop_in {
                    Some(d) => format!("{base}, the runtime in the drop-in {}", d.display()),
                    None => format!("{base}, edited in place"),
                }
            }
            Target::OciHook {
                file: Some(f),
                hook,
            } => {
                format!("an OCI hooks.d file {} running {hook}", f.display())
            }
            Target::OciHook { file: None, hook } => {
                format!("an OCI hooks.d file running {hook}, printed")
            }
        };
        let output = match self.output {
            Output::Write => "writing the files",
            Output::Content => "dry run: printing the new files",
            Output::Diff => "dry run: printing a diff",
        };
        let o = &self.opts;
        let runtime = if self.configure && !o.runtime_path.is_empty() {
            format!(
                "; runtime `{}` = {}{}{}",
                o.runtime_name,
                o.runtime_path,
                if o.set_as_default {
                    ", as the default"
                } else {
                    ""
                },
                if o.cdi_enabled { ", CDI enabled" } else { "" }
            )
        } else {
            format!("; runtime `{}`", o.runtime_name)
        };
        format!("{verb} {engine}: {files}{runtime}; {output}")
    }

    /// What the user does next for the change to take effect; `rootless_docker`: docker runs
    /// rootless for this user (the binary judges that from the process).
    pub fn restart_hint(&self, rootless_docker: bool) -> &'static str {
        match &self.target {
            Target::OciHook { .. } => "the hook applies to new containers; no restart needed",
            Target::ConfigFile { .. } => self.engine.api().restart_hint(rootless_docker),
        }
    }

    /// The runtime binary to look for on this host before writing (a typo, or the toolkit not
    /// installed yet would fail every container of the runtime): `None` when nothing names one.
    pub fn runtime_to_check(&self) -> Option<&str> {
        let path = &self.opts.runtime_path;
        (matches!(self.target, Target::ConfigFile { .. }) && !path.is_empty())
            .then_some(path.as_str())
    }
}

/// Whether writing `new` over `current` (`None`: no file / remove it) changes anything: an
/// empty file where there was none (the main file after unconfigure with a drop-in) is nothing
/// to create.
pub fn is_change(current: Option<&str>, new: Option<&str>) -> bool {
    let empty_new_file = current.is_none() && new.is_some_and(|t| t.trim().is_empty());
    current != new && !empty_new_file
}

impl Target {
    /// Whether writing `path` keeps its previous content in a `.bak`: yes for the main file, no
    /// for the drop-in, which lives in a directory the engine reads wholesale (CRI-O reads every
    /// file of crio.conf.d, a `.bak` there would be read as configuration too).
    pub fn keeps_backup(&self, path: &Path) -> bool {
        self.drop_in() != Some(path)
    }
}

/// The arguments of the engine's own dump of its config (`--config-source=command`):
/// `[--config FILE] config dump` for containerd (the file only when it exists), `status config`
/// for CRI-O; `None` for docker, which has none (refused by [`resolve`]).
pub fn dump_args(engine: Engine, config: &Path, config_exists: bool) -> Option<Vec<PathBuf>> {
    engine.api().dump_args(config, config_exists)
}

/// The name a dump goes by in messages, as if it were a file: `<BINARY config dump>`.
pub fn dump_label(engine: Engine, binary: &Path) -> PathBuf {
    // docker has no dump (refused by `resolve`); it would read as CRI-O's.
    let args = engine.api().dump_subcommand().unwrap_or("status config");
    PathBuf::from(format!("<{} {args}>", binary.display()))
}

fn containerd_version(text: &str, config: &Path) -> Option<containerd::Version> {
    let doc = text.parse::<toml_edit::DocumentMut>().ok()?;
    containerd::version(&doc, config).ok()
}

/// Whether containerd's `config dump` (text `dump`) shows the file `config` (text `main`): a
/// containerd 1.x reading a version 3 file dumps its own defaults, not the file.
pub fn dump_reflects_file(config: &Path, main: &str, dump: &str) -> bool {
    containerd_version(main, config) != Some(containerd::Version::V3)
        || containerd_version(dump, config) == Some(containerd::Version::V3)
}

/// Whether configure builds on containerd's merge of `config` (text `text`) with the files it
/// imports: only when the runtime goes to a drop-in (containerd 1.x replaces a whole plugin
/// table per import, so the drop-in's CRI table must carry what the others hold), and not for a
/// version 1 file (edited in place) or one that does not parse (the transform reports it).
pub fn merges_imports(config: &Path, text: &str, drop_in: Option<&Path>) -> bool {
    drop_in.is_some()
        && text.parse::<toml_edit::DocumentMut>().is_ok()
        && containerd_version(text, config) != Some(containerd::Version::V1)
}

/// The warning printed when [`Resolved::runtime_to_check`] is not on this host.
pub fn missing_runtime_warning(path: &str, runtime_name: &str) -> String {
    format!(
        "the runtime {path} does not exist on this host (not installed yet, or a typo?): the engine fails every `{runtime_name}` container until it does; install the toolkit or pass --nvidia-runtime-path"
    )
}

/// Whether docker runs rootless for this user (rootlesskit): its daemon.json is the user's
/// (under `$HOME` other than `/` or `/root`, or under a `.config` dir), or `euid` (ours, as
/// `/proc/self` shows it) is not root.
pub fn rootless_docker(config: &Path, home: Option<&std::ffi::OsStr>, euid: Option<u32>) -> bool {
    let user_config = home
        .is_some_and(|home| home != "/" && home != "/root" && config.starts_with(home))
        || config.components().any(|c| c.as_os_str() == ".config");
    user_config || euid.is_some_and(|uid| uid != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTAINERD: &str = "/etc/containerd/config.toml";
    const DOCKER: &str = "/etc/docker/daemon.json";

    #[test]
    fn rootless_docker_cases() {
        let cases: &[(&str, &str, Option<&str>, Option<u32>, bool)] = &[
            ("root, system file", DOCKER, Some("/root"), Some(0), false),
            ("not root", DOCKER, Some("/root"), Some(1000), true),
            (
                "the user's file",
                "/home/u/.config/docker/daemon.json",
                Some("/home/u"),
                Some(0),
                true,
            ),
            ("under HOME", "/home/u/d.json", Some("/home/u"), None, true),
            ("HOME is /", "/etc/d.json", Some("/"), Some(0), false),
            (
                "HOME is /root",
                "/root/d.json",
                Some("/root"),
                Some(0),
                false,
            ),
            (
                "a .config dir, no HOME",
                "/x/.config/d.json",
                None,
                None,
                true,
            ),
            ("uid unknown", DOCKER, None, None, false),
        ];
        for (name, config, home, euid, want) in cases {
            let got = rootless_docker(Path::new(config), home.map(std::ffi::OsStr::new), *euid);
            assert_eq!(got, *want, "case {name}");
        }
    }

    #[test]
    fn what_counts_as_a_change() {
        let cases: &[(&str, Option<&str>, Option<&str>, bool)] = &[
            ("same text", Some("a\n"), Some("a\n"), false),
            ("new text", Some("a\n"), Some("b\n"), true),
            ("created", None, Some("a\n"), true),
            (
                "an empty file where there was none",
                None,
                Some(" \n"),
                false,
            ),
            ("emptied", Some("a\n"), Some(""), true),
            ("removed", Some("a\n"), None, true),
            ("nothing to remove", None, None, false),
        ];
        for (name, current, new, want) in cases {
            assert_eq!(is_change(*current, *new), *want, "case {name}");
        }
    }

    #[test]
    fn dump_commands() {
        let c = Path::new("/etc/containerd/config.toml");
        let args = |a: Option<Vec<PathBuf>>| {
            a.map(|v| {
                v.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
            })
        };
        let cases: &[(&str, Engine, bool, Option<&[&str]>)] = &[
            (
                "containerd, the file exists",
                Engine::Containerd,
                true,
                Some(&["--config", "/etc/containerd/config.toml", "config", "dump"]),
            ),
            (
                "containerd, no file: its defaults",
                Engine::Containerd,
                false,
                Some(&["config", "dump"]),
            ),
            ("crio", Engine::Crio, true, Some(&["status", "config"])),
            ("docker has none", Engine::Docker, true, None),
        ];
        for (name, engine, exists, want) in cases {
            let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(args(dump_args(*engine, c, *exists)), want, "case {name}");
        }
        assert_eq!(
            dump_label(Engine::Containerd, Path::new("/bin/containerd")),
            Path::new("</bin/containerd config dump>")
        );
        assert_eq!(
            dump_label(Engine::Crio, Path::new("crio")),
            Path::new("<crio status config>")
        );
    }

    #[test]
    fn containerd_versions_decide_dump_and_merge() {
        let c = Path::new(CONTAINERD);
        let (v1, v2, v3) = ("version = 1\n", "version = 2\n", "version = 3\n");
        // (case, main, dump, the dump shows the file)
        let dumps: &[(&str, &str, &str, bool)] = &[
            ("v2 file", v2, v2, true),
            ("v3 file, a containerd 2 dump", v3, v3, true),
            (
                "v3 file, a containerd 1.x dump of its defaults",
                v3,
                v2,
                false,
            ),
            ("v1 file, migrated in the dump", v1, v2, true),
        ];
        for (name, main, dump, want) in dumps {
            assert_eq!(dump_reflects_file(c, main, dump), *want, "case {name}");
        }
        let drop_in = Some(Path::new("/etc/containerd/conf.d/99-nvidia.toml"));
        // (case, text, drop-in, merged)
        let merges: &[(&str, &str, Option<&Path>, bool)] = &[
            ("v2 with a drop-in", v2, drop_in, true),
            ("v3 with a drop-in", v3, drop_in, true),
            ("an empty file is version 2", "", drop_in, true),
            (
                "no version key: version 1",
                "[plugins.cri]\n",
                drop_in,
                false,
            ),
            ("v1: edited in place", v1, drop_in, false),
            ("in place", v2, None, false),
            ("does not parse", "[plugins\n", drop_in, false),
        ];
        for (name, text, d, want) in merges {
            assert_eq!(merges_imports(c, text, *d), *want, "case {name}");
        }
    }
}
