//! `nvidia-ctk-installer`'s work (what the GPU Operator's toolkit container does on every node):
//! copy the toolkit into `<install dir>/toolkit`, write its config, register the runtimes
//! `nvidia`, `nvidia-cdi` and `nvidia-legacy` with the engine (a drop-in for containerd and
//! CRI-O, `daemon.json` for docker), optionally write a CDI spec and the control device nodes,
//! restart or signal the engine; and, on the way out, remove exactly what it added and put the
//! engine's files back to their original bytes.
//!
//! Every file it writes is recorded in [`Installed`] with what was there before, so that
//! [`uninstall`] needs no guesswork. Engine config edits go through `runtime_config` (the same
//! lossless transforms as `nvidia-ctk runtime configure`); writes are atomic.
//!
//! The record is also kept on disk (`<install dir>/.nvct-installer-state.json`) so that the next
//! installer undoes the work of one that was killed ([`recover`]). That file lies in a host path
//! a pod may write, so [`recover`] trusts neither its paths ([`trusted`]: only the files this run
//! would write itself) nor its bytes: it never writes a recorded `before` anywhere. It removes
//! this installer's runtimes from the engine's current config with the engine's `unconfigure`
//! (no backup), removes the drop-in when that registers this install's runtimes, and removes the
//! CDI spec only when it holds the recorded bytes and the record says nothing was there before.
//! What `unconfigure` cannot know without a backup is not put back (a default runtime ours
//! replaced: the engine falls back to its own; the engine's CDI switch stays on).

use crate::system;
use nvct_cdi as cdi;
use nvct_engines::{
    self as runtime_config, containerd, crio, docker, Engine, Options as RtOptions, Source,
};
use nvct_formats::fsutil::{self, WriteOptions};
use nvct_formats::root::DriverRoot;
use nvct_host::discover;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The binaries of an install, by name; the first two are required.
const BINARIES: &[&str] = &[
    "nvidia-container-runtime",
    "nvidia-container-runtime-hook",
    "nvidia-ctk",
    "nvidia-cdi-hook",
];

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "{path} not found: --toolkit-source-root {root} must hold bin/{name} (the toolkit's \
         install tree, as scripts/build-release.sh writes it)"
    )]
    MissingBinary {
        path: PathBuf,
        root: PathBuf,
        name: &'static str,
    },
    #[error("{path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error(transparent)]
    Engine(#[from] runtime_config::Error),
    #[error("writing the CDI spec: {0}")]
    Cdi(String),
    #[error("{path}: cannot record what was installed: {why}")]
    State { path: PathBuf, why: String },
    #[error(transparent)]
    System(#[from] system::SystemError),
    #[error("restarting {engine}: {why}")]
    Restart { engine: &'static str, why: String },
}

fn io(path: &Path, what: &'static str) -> impl FnOnce(std::io::Error) -> InstallError {
    let path = path.to_path_buf();
    move |source| InstallError::Io { path, what, source }
}

/// How the engine learns about the new config.
pub use nvct_engines::Restart;

/// What the installer does to the engine's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineConfig {
    /// Register the runtimes in the engine's config files (and drop-in).
    Files,
    /// CRI-O's `CRIO_CONFIG_MODE=hook`: an OCI hook file at this path that runs the installed
    /// hook for every container; CRI-O's config is left alone and CRI-O is not restarted (it
    /// reads its hooks directories as they change), as upstream's `setupHook`.
    CrioHook(PathBuf),
    /// `NO_RUNTIME_CONFIG`: nothing of the engine's is read, written or restarted.
    None,
}

/// Where the document the runtime entries are derived from comes from (upstream's
/// `--config-source`): the first of the list; a file that does not exist is an empty config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    File(PathBuf),
}

/// What to install where; every path is as this process sees it.
#[derive(Debug, Clone)]
pub struct Options {
    pub install_dir: PathBuf,
    /// A prefix holding `bin/<binary>` (and `libexec/nvct/<binary>` for static fronts).
    pub source_root: PathBuf,
    pub engine: Engine,
    pub config: PathBuf,
    /// containerd and CRI-O; docker has none.
    pub drop_in: Option<PathBuf>,
    /// Where the engine on the host sees the drop-in when that is not `drop_in` (the GPU
    /// Operator's `RUNTIME_DROP_IN_CONFIG_HOST_PATH`): containerd's `imports` names it.
    pub drop_in_host_path: Option<PathBuf>,
    /// Toolkit config keys set from upstream's `NVIDIA_CONTAINER_RUNTIME_*` variables
    /// (`installer_flags::upstream_config_sets`), applied over the config each runtime mode gets.
    pub config_sets: Vec<nvct_engines::config_edit::Assignment>,
    pub socket: PathBuf,
    pub restart: Restart,
    pub host_root: PathBuf,
    pub driver_root: PathBuf,
    pub dev_root: PathBuf,
    /// Where this process sees the device root (`DEV_ROOT_CTR_PATH`), when it says.
    pub dev_root_ctr_path: Option<PathBuf>,
    /// Where `driver/nvidia` and `devices` are read (`/proc`; another in tests).
    pub proc_root: PathBuf,
    /// Where this process sees the driver root when that differs from `driver_root` (a host
    /// path): discovery for the CDI spec and the device nodes reads here.
    pub driver_root_ctr_path: Option<PathBuf>,
    /// The config keys of the same names (the device plugin's strategies).
    pub accept_envvar_unprivileged: bool,
    pub accept_volume_mounts: bool,
    pub runtime_name: String,
    pub set_as_default: bool,
    /// Write the CDI specs (the management spec, and the GPU spec where no other holds it).
    pub cdi_enabled: bool,
    /// Turn the engine's CDI support on (upstream's `--enable-cdi-in-runtime`, default: CDI).
    pub engine_cdi: bool,
    pub cdi_output_dir: PathBuf,
    /// The management spec's kind (upstream's `--cdi-kind`, `management.nvidia.com/gpu`).
    pub cdi_vendor: String,
    pub cdi_class: String,
    /// The `nvidia` runtime's mode (`NVIDIA_CONTAINER_RUNTIME_MODE`); `None`: auto. The
    /// `-cdi` and `-legacy` runtimes keep theirs.
    pub runtime_mode: Option<String>,
    pub create_device_nodes: bool,
    pub engine_config: EngineConfig,
    /// The engine config's sources, the first is used; none: the engine's config itself.
    pub config_sources: Vec<ConfigSource>,
    /// Lines for the log from resolving the settings (what was set and is not used, and why).
    pub notes: Vec<String>,
}

impl Options {
    pub fn toolkit_dir(&self) -> PathBuf {
        self.install_dir.join("toolkit")
    }

    /// The driver root as this process sees it.
    fn seen_driver_root(&self) -> PathBuf {
        self.driver_root_ctr_path
            .clone()
            .unwrap_or_else(|| self.driver_root.clone())
    }

    /// The device root as this process sees it: `DEV_ROOT_CTR_PATH`, else under the seen
    /// driver root when the device root is the driver root.
    fn seen_dev_root(&self) -> PathBuf {
        if let Some(p) = &self.dev_root_ctr_path {
            return p.clone();
        }
        match &self.driver_root_ctr_path {
            Some(ctr) if self.dev_root == self.driver_root => ctr.clone(),
            _ => self.dev_root.clone(),
        }
    }

    /// The management spec, named as upstream's installer names it (the CDI library's
    /// `GenerateNameForSpec`, `<vendor>-<class>`, plus `.yaml`).
    pub fn management_spec_path(&self) -> PathBuf {
        self.cdi_output_dir
            .join(format!("{}-{}.yaml", self.cdi_vendor, self.cdi_class))
    }

    /// The GPU spec (`nvidia.com/gpu`), ours: written only where no file is (the refresh
    /// unit's `nvidia.yaml` is another owner's).
    pub fn gpu_spec_path(&self) -> PathBuf {
        self.cdi_output_dir.join("nvidia.yaml")
    }

    /// The toolkit config of the runtime `nvidia` (the others' are `config-<mode>.toml`).
    pub fn toolkit_config(&self) -> PathBuf {
        self.config_dir().join("config.toml")
    }

    fn libexec_dir(&self) -> PathBuf {
        self.install_dir.join("libexec/nvct")
    }

    fn config_dir(&self) -> PathBuf {
        self.toolkit_dir().join(".config/nvidia-container-runtime")
    }

    /// The runtimes registered: (name, wrapper file name, mode forced by its config).
    pub fn runtimes(&self) -> [(String, &'static str, &'static str); 3] {
        let n = &self.runtime_name;
        [
            (n.clone(), "nvidia-container-runtime", "auto"),
            (format!("{n}-cdi"), "nvidia-container-runtime.cdi", "cdi"),
            (
                format!("{n}-legacy"),
                "nvidia-container-runtime.legacy",
                "legacy",
            ),
        ]
    }
}

/// One file written: its path and what was there before (`None`: nothing).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Written {
    pub path: PathBuf,
    pub before: Option<Vec<u8>>,
    pub after: Vec<u8>,
}

/// What [`install`] did, for [`uninstall`]. Also kept on disk ([`save_state`]) so that an
/// installer killed before it could undo its work (SIGKILL, OOM, a node reboot) is undone by
/// the next one ([`recover`]) instead of being taken for the original state.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Installed {
    /// Directories created, outermost first.
    pub dirs: Vec<PathBuf>,
    /// Files of the toolkit itself (binaries, wrappers, configs): removed.
    pub files: Vec<PathBuf>,
    /// Engine configs and the CDI spec: put back as they were by [`uninstall`]; from a record
    /// read back from disk, undone by [`recover`] without its bytes.
    pub edits: Vec<Written>,
    /// What was done, one line each, for the log.
    pub log: Vec<String>,
}

/// Creates `dir` and its missing parents, recording each one created.
fn create_dirs(dir: &Path, done: &mut Installed) -> Result<(), InstallError> {
    let mut missing = Vec::new();
    let mut d = dir;
    while !d.exists() {
        missing.push(d.to_path_buf());
        match d.parent() {
            Some(p) => d = p,
            None => break,
        }
    }
    for m in missing.into_iter().rev() {
        std::fs::create_dir(&m).map_err(io(&m, "create directory"))?;
        done.dirs.push(m);
    }
    Ok(())
}

/// The install dir is the installer's own: a symlink planted anywhere below it (a stale state,
/// a shared hostPath) is removed as a link, never followed, so that no toolkit file is written
/// (and later removed) outside it. Every component from `install_dir` down to `path`.
fn unlink_planted_symlinks(
    install_dir: &Path,
    path: &Path,
    done: &mut Installed,
) -> Result<(), InstallError> {
    let Ok(rel) = path.strip_prefix(install_dir) else {
        return Ok(());
    };
    let mut p = install_dir.to_path_buf();
    for c in rel.components() {
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p).unwrap_or_default();
                std::fs::remove_file(&p).map_err(io(&p, "remove a planted symlink"))?;
                done.log.push(format!(
                    "removed the symlink {} (to {}): the install dir is the installer's own, nothing is written through a link",
                    p.display(),
                    target.display()
                ));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// Writes a toolkit file (atomically, `mode`) under `install_dir` and records it.
fn put_file(
    install_dir: &Path,
    path: &Path,
    content: &[u8],
    mode: u32,
    done: &mut Installed,
) -> Result<(), InstallError> {
    unlink_planted_symlinks(install_dir, path, done)?;
    if let Some(parent) = path.parent() {
        create_dirs(parent, done)?;
    }
    fsutil::write_atomic(path, content, &WriteOptions::default())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io(path, "chmod"))?;
    done.files.push(path.to_path_buf());
    Ok(())
}

/// Writes an engine file or the CDI spec, recording what it replaces.
fn edit_file(path: &Path, content: &str, done: &mut Installed) -> Result<(), InstallError> {
    let before = match std::fs::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(path, "read")(e)),
    };
    if let Some(parent) = path.parent() {
        create_dirs(parent, done)?;
    }
    fsutil::write_atomic(path, content.as_bytes(), &WriteOptions::default())?;
    done.log.push(format!("wrote {}", path.display()));
    done.edits.push(Written {
        path: path.to_path_buf(),
        before,
        after: content.as_bytes().to_vec(),
    });
    Ok(())
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// The toolkit config of one runtime mode, as TOML.
fn config_text(opts: &Options, mode: &str) -> String {
    let text = base_config_text(opts, mode);
    if opts.config_sets.is_empty() {
        return text;
    }
    // The sets were checked by `upstream_config_sets`; one that still fails leaves the base.
    nvct_engines::config_edit::edit(&text, Path::new("config.toml"), &opts.config_sets, ":")
        .unwrap_or(text)
}

fn base_config_text(opts: &Options, mode: &str) -> String {
    let mut doc = toml_edit::DocumentMut::new();
    let toolkit = opts.toolkit_dir();
    let s = |p: &Path| toml_edit::value(p.display().to_string());
    doc["accept-nvidia-visible-devices-envvar-when-unprivileged"] =
        toml_edit::value(opts.accept_envvar_unprivileged);
    doc["accept-nvidia-visible-devices-as-volume-mounts"] =
        toml_edit::value(opts.accept_volume_mounts);
    doc["nvidia-container-cli"]["root"] = s(&opts.driver_root);
    doc["nvidia-container-cli"]["dev-root"] = s(&opts.dev_root);
    if opts.proc_root != Path::new("/proc") {
        doc["nvidia-container-cli"]["proc-root"] = s(&opts.proc_root);
    }
    // With a containerised driver, the driver root's own ldconfig (as upstream).
    let ldconfig = ["sbin/ldconfig.real", "sbin/ldconfig"]
        .iter()
        .find(|l| opts.driver_root != Path::new("/") && opts.seen_driver_root().join(l).exists())
        .map(|l| {
            let p = opts.driver_root.join(l).display().to_string();
            PathBuf::from(p.strip_suffix(".real").unwrap_or(&p))
        })
        .unwrap_or_else(|| PathBuf::from("/sbin/ldconfig"));
    doc["nvidia-container-cli"]["ldconfig"] = toml_edit::value(format!("@{}", ldconfig.display()));
    doc["nvidia-container-runtime"]["mode"] = toml_edit::value(mode);
    let mut dirs = toml_edit::Array::new();
    for d in ["/etc/cdi", "/var/run/cdi"] {
        dirs.push(d);
    }
    let out = opts.cdi_output_dir.display().to_string();
    if !dirs.iter().any(|d| d.as_str() == Some(out.as_str())) {
        dirs.push(out);
    }
    doc["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] = toml_edit::value(dirs);
    doc["nvidia-container-runtime-hook"]["path"] =
        s(&toolkit.join("nvidia-container-runtime-hook"));
    doc["nvidia-ctk"]["path"] = s(&toolkit.join("nvidia-ctk"));
    format!(
        "# Written by nvidia-ctk-installer; removed when it exits.\n{}",
        doc
    )
}

/// Installs; on an error, what was done so far is undone before the error is returned.
pub fn install(opts: &Options) -> Result<Installed, InstallError> {
    let mut done = Installed::default();
    match install_steps(opts, &mut done) {
        Ok(()) => Ok(done),
        Err(e) => {
            let _ = uninstall(&done);
            Err(e)
        }
    }
}

fn install_steps(opts: &Options, done: &mut Installed) -> Result<(), InstallError> {
    let toolkit = opts.toolkit_dir();
    create_dirs(&toolkit, done)?;
    for (i, name) in BINARIES.iter().enumerate() {
        let src = opts.source_root.join("bin").join(name);
        if !src.is_file() {
            if i < 2 {
                return Err(InstallError::MissingBinary {
                    path: src,
                    root: opts.source_root.clone(),
                    name,
                });
            }
            continue;
        }
        let bytes = std::fs::read(&src).map_err(io(&src, "read"))?;
        // The shim is reached through a wrapper that names this install's config.
        let dest = if *name == "nvidia-container-runtime" {
            toolkit.join("nvidia-container-runtime.real")
        } else {
            toolkit.join(name)
        };
        put_file(&opts.install_dir, &dest, &bytes, 0o755, done)?;
        let worker = opts.source_root.join("libexec/nvct").join(name);
        if worker.is_file() {
            let bytes = std::fs::read(&worker).map_err(io(&worker, "read"))?;
            put_file(
                &opts.install_dir,
                &opts.libexec_dir().join(name),
                &bytes,
                0o755,
                done,
            )?;
        }
    }
    done.log
        .push(format!("installed the toolkit in {}", toolkit.display()));
    let real = toolkit.join("nvidia-container-runtime.real");
    for (_, wrapper, mode) in opts.runtimes() {
        let config = opts.config_dir().join(if mode == "auto" {
            "config.toml".to_string()
        } else {
            format!("config-{mode}.toml")
        });
        // The `nvidia` runtime takes NVIDIA_CONTAINER_RUNTIME_MODE (upstream writes it into
        // the one config its runtimes share; the `.cdi` and `.legacy` ones force theirs).
        let mode = match (mode, opts.runtime_mode.as_deref()) {
            ("auto", Some(m)) => m,
            (m, _) => m,
        };
        put_file(
            &opts.install_dir,
            &config,
            config_text(opts, mode).as_bytes(),
            0o644,
            done,
        )?;
        let script = format!(
            "#!/bin/sh\n# Written by nvidia-ctk-installer: the NVIDIA runtime with this install's config (mode {mode}).\nNVIDIA_CTK_CONFIG_FILE_PATH={} exec {} \"$@\"\n",
            shell_quote(&config),
            shell_quote(&real)
        );
        put_file(
            &opts.install_dir,
            &toolkit.join(wrapper),
            script.as_bytes(),
            0o755,
            done,
        )?;
    }
    match &opts.engine_config {
        EngineConfig::Files => register(opts, done)?,
        EngineConfig::CrioHook(path) => write_crio_hook(opts, path, done)?,
        EngineConfig::None => done.log.push(format!(
            "not configuring {} (NO_RUNTIME_CONFIG): its config is left as it is",
            opts.engine.name()
        )),
    }
    if opts.create_device_nodes {
        let root = DriverRoot::new(
            opts.seen_driver_root(),
            opts.seen_dev_root(),
            &opts.proc_root,
        );
        let majors = system::read_majors(&root)?;
        let nodes = system::control_nodes(&majors, &root.proc_path("devices"))?;
        for d in system::create_nodes(&root, &nodes, false)? {
            if let system::Done::Created(p) = d {
                done.log.push(format!("created {}", p.display()));
            }
        }
    }
    if opts.cdi_enabled {
        write_cdi_spec(opts, done)?;
    }
    Ok(())
}

/// Registers the three runtimes with the engine.
fn register(opts: &Options, done: &mut Installed) -> Result<(), InstallError> {
    let toolkit = opts.toolkit_dir();
    let rt = |name: &str, wrapper: &str, default: bool| RtOptions {
        runtime_name: name.to_string(),
        runtime_path: toolkit.join(wrapper).display().to_string(),
        set_as_default: default && opts.set_as_default,
        cdi_enabled: opts.engine_cdi,
        drop_in_host_path: opts.drop_in_host_path.clone(),
    };
    let read = |p: &Path| fsutil::read_optional(p).map(Option::unwrap_or_default);
    let existing = fsutil::read_optional(&opts.config)?;
    // The document the entries derive from: the first config source (upstream's LoadFirst; a
    // missing file is an empty config).
    let base_path = match opts.config_sources.first() {
        Some(ConfigSource::File(p)) => p,
        None => &opts.config,
    };
    let base_text = if base_path == &opts.config {
        existing.clone().unwrap_or_default()
    } else {
        read(base_path)?
    };
    // No config yet and another source (k3s: no `config.toml.tmpl` yet, its generated
    // `config.toml` the source): the file written starts from the source's settings.
    let main_text = match &existing {
        Some(t) => t.clone(),
        None => base_text.clone(),
    };
    if existing.is_none() && base_path != &opts.config && !base_text.is_empty() {
        done.log.push(format!(
            "{} does not exist: writing it from {} with the runtimes added",
            opts.config.display(),
            base_path.display()
        ));
    }
    // A k3s/RKE2 template holding plain TOML is edited as the TOML it is; one with Go template
    // syntax keeps its name, which the transforms refuse (edit it by hand).
    let config_seen = transform_path(&opts.config, &main_text);
    let main = Source {
        path: &config_seen,
        text: &main_text,
    };
    let runtimes = opts.runtimes();
    let drop_in = &opts.drop_in;
    let changes = match opts.engine {
        Engine::Docker => {
            let mut text = main_text.clone();
            for (i, (name, wrapper, _)) in runtimes.iter().enumerate() {
                let src = Source {
                    path: &opts.config,
                    text: &text,
                };
                let out = docker::configure(src, &rt(name, wrapper, i == 0))?;
                text = out.changes[0].content.clone().unwrap_or_default();
            }
            vec![(opts.config.clone(), text)]
        }
        Engine::Containerd => {
            // All three entries into one document, then that document's CRI table into the
            // drop-in (or, without one, the document itself replaces the config).
            let mut full = base_text.clone();
            for (i, (name, wrapper, _)) in runtimes.iter().enumerate() {
                let src = Source {
                    path: &config_seen,
                    text: &full,
                };
                let out = containerd::configure(src, src, None, &rt(name, wrapper, i == 0))?;
                full = out.changes[0].content.clone().unwrap_or_default();
            }
            let base = Source {
                path: &config_seen,
                text: &full,
            };
            let (name, wrapper, _) = &runtimes[0];
            let out =
                containerd::configure(main, base, drop_in.as_deref(), &rt(name, wrapper, true))?;
            done.log.extend(out.notes.iter().cloned());
            out.changes
                .into_iter()
                .filter_map(|c| Some((c.path, c.content?)))
                .collect()
        }
        Engine::Crio => {
            let target = drop_in.clone().unwrap_or_else(|| config_seen.clone());
            let mut text = if drop_in.is_some() {
                read(&target)?
            } else {
                main_text.clone()
            };
            let main = Source {
                path: &config_seen,
                text: &base_text,
            };
            for (i, (name, wrapper, _)) in runtimes.iter().enumerate() {
                let src = Source {
                    path: &target,
                    text: &text,
                };
                let out = crio::configure_drop_in(src, main, &rt(name, wrapper, i == 0))?;
                text = out.changes[0].content.clone().unwrap_or_default();
            }
            vec![(target, text)]
        }
    };
    for (path, text) in changes {
        // Back to the real name of a template edited under another (`transform_path`).
        let path = if path == config_seen {
            opts.config.clone()
        } else {
            path
        };
        let current = read(&path)?;
        if current != text {
            edit_file(&path, &text, done)?;
        }
    }
    done.log.push(format!(
        "registered the runtimes {} with {}",
        runtimes
            .iter()
            .map(|r| r.0.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        opts.engine.name()
    ));
    Ok(())
}

/// The path the engine transforms see for `config`: a k3s/RKE2 template (`*.tmpl`) that holds
/// plain TOML (none yet: the text is k3s's generated config; or one this installer wrote) is
/// edited under its name less `.tmpl`; one with Go template syntax (`{{`) keeps its name, which
/// the transforms refuse with their "edit the template by hand" error.
fn transform_path(config: &Path, text: &str) -> PathBuf {
    let tmpl = config.extension().is_some_and(|e| e == "tmpl");
    if tmpl && !text.contains("{{") {
        config.with_extension("")
    } else {
        config.to_path_buf()
    }
}

/// The OCI hook file of `CRIO_CONFIG_MODE=hook`: the installed hook for every container, with
/// this install's toolkit config (upstream's hook path is a wrapper script that sets it; ours
/// is the binary, so the file's `env` names the config).
fn crio_hook_text(opts: &Options) -> String {
    let hook = opts.toolkit_dir().join("nvidia-container-runtime-hook");
    let config = format!(
        "{}={}",
        nvct_formats::config::CONFIG_PATH_ENV,
        opts.toolkit_config().display()
    );
    runtime_config::oci_hook::render_with_env(&hook.display().to_string(), &[config])
}

/// Writes the OCI hook file (recorded like an engine file: put back or removed on exit).
fn write_crio_hook(opts: &Options, path: &Path, done: &mut Installed) -> Result<(), InstallError> {
    edit_file(path, &crio_hook_text(opts), done)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
        .map_err(io(path, "chmod"))?;
    done.log.push(format!(
        "CRI-O in hook mode: its config is left as it is, {} runs {} for every container",
        path.display(),
        opts.toolkit_dir()
            .join("nvidia-container-runtime-hook")
            .display()
    ));
    Ok(())
}

/// The CDI specs: the management spec (as upstream's installer: every NVIDIA device node as
/// the one device `all`, for management containers), and our GPU spec (`nvidia.com/gpu`, one
/// device per GPU) where no file is: another owner's spec there (the refresh unit's) is left
/// as it is.
fn write_cdi_spec(opts: &Options, done: &mut Installed) -> Result<(), InstallError> {
    let root = DriverRoot::new(
        opts.seen_driver_root(),
        opts.seen_dev_root(),
        &opts.proc_root,
    );
    let inv = discover::discover_for_spec(&root).map_err(|e| InstallError::Cdi(e.to_string()))?;
    let hook_path = opts
        .toolkit_dir()
        .join("nvidia-cdi-hook")
        .display()
        .to_string();
    let management = nvct_inject::generate::Options {
        hook_path: hook_path.clone(),
        vendor: opts.cdi_vendor.clone(),
        class: opts.cdi_class.clone(),
        mode: nvct_inject::generate::SpecMode::Management,
        ..nvct_inject::generate::Options::default()
    };
    let gpus = nvct_inject::generate::Options {
        hook_path,
        ..nvct_inject::generate::Options::default()
    };
    let gpu_spec = opts.gpu_spec_path();
    let mut specs = vec![(opts.management_spec_path(), management)];
    if gpu_spec == opts.management_spec_path() {
        // CDI_KIND=nvidia.com/gpu: the one spec is the management spec.
    } else if std::fs::symlink_metadata(&gpu_spec).is_ok() {
        done.log.push(format!(
            "left {}: another owner's spec (nvidia.com/gpu devices come from it)",
            gpu_spec.display()
        ));
    } else {
        specs.push((gpu_spec, gpus));
    }
    for (path, gen) in specs {
        let mut spec = nvct_inject::generate::generate(&inv, &gen)
            .map_err(|e| InstallError::Cdi(e.to_string()))?;
        if opts.driver_root_ctr_path.is_some() || opts.dev_root_ctr_path.is_some() {
            to_host_paths(&mut spec, &opts.seen_driver_root(), &opts.driver_root)?;
            to_host_paths(&mut spec, &opts.seen_dev_root(), &opts.dev_root)?;
        }
        let text = spec
            .encode(cdi::Format::Yaml)
            .map_err(|e| InstallError::Cdi(e.to_string()))?;
        edit_file(&path, &text, done)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .map_err(io(&path, "chmod"))?;
    }
    Ok(())
}

/// Rewrites the spec's host paths under `seen` (this process's view) to `host`.
/// The spec's host paths under `seen` (the driver root as the installer's container sees it)
/// moved to `host` ([`cdi::transform::root`], relative to the host).
fn to_host_paths(spec: &mut cdi::Spec, seen: &Path, host: &Path) -> Result<(), InstallError> {
    let err = |e: serde_json::Error| InstallError::Cdi(format!("moving the spec's paths: {e}"));
    let mut value = serde_json::to_value(&*spec).map_err(err)?;
    let (seen, host) = (seen.display().to_string(), host.display().to_string());
    cdi::transform::root(&mut value, &seen, &host, cdi::transform::RelativeTo::Host);
    *spec = serde_json::from_value(value).map_err(err)?;
    Ok(())
}

/// Where an install's record is kept: beside the toolkit dir, outside what is removed.
pub fn state_path(opts: &Options) -> PathBuf {
    opts.install_dir.join(".nvct-installer-state.json")
}

/// Writes `done` to [`state_path`] (atomically).
pub fn save_state(opts: &Options, done: &Installed) -> Result<(), InstallError> {
    let text = serde_json::to_string(done).map_err(|e| InstallError::State {
        path: state_path(opts),
        why: e.to_string(),
    })?;
    fsutil::write_atomic(&state_path(opts), text.as_bytes(), &WriteOptions::default())?;
    Ok(())
}

/// The toolkit files [`install`] writes under the install dir (as `install_steps` names them).
fn own_files(opts: &Options) -> Vec<PathBuf> {
    let toolkit = opts.toolkit_dir();
    let mut out = Vec::new();
    for name in BINARIES {
        out.push(if *name == "nvidia-container-runtime" {
            toolkit.join("nvidia-container-runtime.real")
        } else {
            toolkit.join(name)
        });
        out.push(opts.libexec_dir().join(name));
    }
    for (_, wrapper, mode) in opts.runtimes() {
        out.push(opts.config_dir().join(if mode == "auto" {
            "config.toml".to_string()
        } else {
            format!("config-{mode}.toml")
        }));
        out.push(toolkit.join(wrapper));
    }
    out
}

/// The engine files and the CDI specs [`install`] may edit: the config and drop-in it was
/// given (or CRI-O's hook file in hook mode, or none with `NO_RUNTIME_CONFIG`), the management
/// spec and `<cdi output dir>/nvidia.yaml`.
fn own_edits(opts: &Options) -> Vec<PathBuf> {
    let mut out = Vec::new();
    match &opts.engine_config {
        EngineConfig::Files => {
            out.push(opts.config.clone());
            out.extend(opts.drop_in.clone());
        }
        EngineConfig::CrioHook(p) => out.push(p.clone()),
        EngineConfig::None => {}
    }
    out.push(opts.management_spec_path());
    out.push(opts.gpu_spec_path());
    out
}

/// Whether no component of `path` below `base` (which `path` must start with) is a symlink,
/// checked one component at a time without following any; a component that does not exist
/// ends the walk (nothing below it can be reached).
fn no_symlink_below(base: &Path, path: &Path) -> bool {
    let Ok(rest) = path.strip_prefix(base) else {
        return false;
    };
    let mut p = base.to_path_buf();
    for c in rest.components() {
        if !matches!(c, std::path::Component::Normal(_)) {
            return false;
        }
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => return false,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) => return false,
        }
    }
    true
}

/// What of a recorded install (`done`, read from the state file) this run may undo: only the
/// paths it would write itself ([`own_files`] under the install dir with no symlink below it,
/// [`own_edits`] not themselves symlinks, and directories above those), because the record
/// may come from another node, a restored backup or a shared host path. Returns the kept part
/// and one line for each path ignored.
pub fn trusted(opts: &Options, done: Installed, state: &Path) -> (Installed, Vec<String>) {
    let files = own_files(opts);
    let edits = own_edits(opts);
    let mut ignored = Vec::new();
    let mut ignore = |path: &Path, why: &str| {
        ignored.push(format!(
            "ignored {} in {}: {why}",
            path.display(),
            state.display()
        ));
    };
    let in_install = |p: &Path| no_symlink_below(&opts.install_dir, p);
    let final_not_link = |p: &Path| p.parent().is_some_and(|dir| no_symlink_below(dir, p));
    let mut kept = Installed {
        log: done.log,
        ..Installed::default()
    };
    for f in done.files {
        if !files.contains(&f) {
            ignore(&f, "not a toolkit file this installer writes");
        } else if !in_install(&f) {
            ignore(&f, "reached through a symlink");
        } else {
            kept.files.push(f);
        }
    }
    for w in done.edits {
        if !edits.contains(&w.path) {
            ignore(
                &w.path,
                "not the engine config, drop-in or CDI spec given to this installer",
            );
        } else if !final_not_link(&w.path) {
            ignore(&w.path, "a symlink");
        } else {
            kept.edits.push(w);
        }
    }
    for d in done.dirs {
        let above_own = files
            .iter()
            .chain(&edits)
            .any(|p| p != &d && p.starts_with(&d));
        let safe = if d.starts_with(&opts.install_dir) {
            in_install(&d)
        } else {
            final_not_link(&d)
        };
        if !above_own {
            ignore(&d, "not a directory above a file this installer writes");
        } else if !safe {
            ignore(&d, "reached through a symlink");
        } else {
            kept.dirs.push(d);
        }
    }
    (kept, ignored)
}

/// Undoes what an earlier installer recorded and did not undo, as far as [`trusted`] accepts
/// it; removes the record. Returns one line per action and per path ignored (none when there
/// was no record).
///
/// The record may be planted (whoever can write the install dir can write it), so its bytes are
/// never written back: the engine files and the CDI spec are undone by what they hold now
/// (`recover_edits`). The toolkit's files and the directories created are removed as
/// [`uninstall`] removes them.
pub fn recover(opts: &Options) -> Result<Vec<String>, InstallError> {
    let path = state_path(opts);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io(&path, "read")(e)),
    };
    let done: Installed = serde_json::from_str(&text).map_err(|e| InstallError::Io {
        path: path.clone(),
        what: "parse (remove it if no installer ran here)",
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })?;
    let mut log = vec![format!(
        "{} is left by an installer that did not finish: undoing what it did",
        path.display()
    )];
    let (done, ignored) = trusted(opts, done, &path);
    log.extend(ignored);
    log.extend(recover_edits(opts, &done.edits)?);
    let rest = Installed {
        edits: Vec::new(),
        ..done
    };
    log.extend(uninstall(&rest)?);
    forget_state(opts, &rest)?;
    Ok(log)
}

/// The engine and CDI edits of a record read from disk (already through [`trusted`]) undone
/// from the files' current content, never from the recorded bytes: the engine's config has this
/// installer's runtimes removed ([`unregistered`]), the drop-in is removed when it is the
/// installer's ([`remove_drop_in`]), the CDI spec when it is exactly what the record says was
/// written where there was none ([`remove_spec`]). Each only when the record names its path (the
/// earlier run wrote it). Returns one line per file.
fn recover_edits(opts: &Options, edits: &[Written]) -> Result<Vec<String>, InstallError> {
    let listed = |p: &Path| edits.iter().any(|w| w.path == p);
    let mut log = Vec::new();
    let mut engine_files = Vec::new();
    match &opts.engine_config {
        EngineConfig::Files => {
            if listed(&opts.config) {
                log.push(unregister_config(opts)?);
            }
            engine_files.push(opts.config.clone());
            if let Some(d) = opts.drop_in.as_deref() {
                if listed(d) && d != opts.config {
                    log.push(remove_drop_in(opts, d)?);
                }
                engine_files.push(d.to_path_buf());
            }
        }
        EngineConfig::CrioHook(hook) => {
            if listed(hook) {
                log.push(remove_crio_hook(opts, hook)?);
            }
            engine_files.push(hook.clone());
        }
        EngineConfig::None => {}
    }
    let mut specs = vec![opts.management_spec_path(), opts.gpu_spec_path()];
    specs.dedup();
    for spec in specs {
        if listed(&spec) && !engine_files.contains(&spec) {
            log.push(remove_spec(&spec, edits)?);
        }
    }
    Ok(log)
}

/// Removes CRI-O's hook file when it is exactly the one this install writes (it names this
/// install's hook and config); anything else there is left, and the line says so.
fn remove_crio_hook(opts: &Options, hook: &Path) -> Result<String, InstallError> {
    match std::fs::read(hook) {
        Ok(b) if b == crio_hook_text(opts).as_bytes() => {
            std::fs::remove_file(hook).map_err(io(hook, "remove"))?;
            Ok(format!("removed {}", hook.display()))
        }
        Ok(_) => Ok(format!(
            "left {}: not the hook file this install writes",
            hook.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(format!("{}: not there, nothing to undo", hook.display()))
        }
        Err(e) => Err(io(hook, "read")(e)),
    }
}

/// Writes the engine's config without this installer's runtimes ([`unregistered`]), atomically
/// and only when that changes it. Returns what was done.
fn unregister_config(opts: &Options) -> Result<String, InstallError> {
    let path = &opts.config;
    let Some(text) = fsutil::read_optional(path)? else {
        return Ok(format!("{}: not there, nothing to undo", path.display()));
    };
    let names = opts.runtimes().map(|r| r.0).join(", ");
    let new = unregistered(opts, &text)?;
    if new == text {
        return Ok(format!(
            "left {}: it registers none of the runtimes {names}",
            path.display()
        ));
    }
    fsutil::write_atomic(path, new.as_bytes(), &WriteOptions::default())?;
    Ok(format!(
        "removed the runtimes {names} from {} (its recorded bytes are not written back)",
        path.display()
    ))
}

/// `text` (the engine's main config as it is now) with the engine's `unconfigure` applied for
/// each runtime [`Options::runtimes`] names, with no backup (`previous = None`): their entries
/// go, a default runtime that is one of them goes (the engine falls back to its own), and for
/// containerd the `imports` entry [`register`] adds for the drop-in; for docker a `runtimes`
/// object that held only ours. What only a backup could tell is not put back: a default runtime
/// ours replaced is not restored, and the engine's CDI switch (containerd's `enable_cdi`,
/// docker's `features.cdi`) stays as it is now.
fn unregistered(opts: &Options, text: &str) -> Result<String, InstallError> {
    if text.trim().is_empty() {
        return Ok(text.to_string());
    }
    // The import names the drop-in where the engine sees it, as `register` wrote it
    // (`containerd::configure` with `drop_in_host_path`); only containerd's config imports it.
    let api = opts.engine.api();
    let import = opts
        .drop_in
        .as_ref()
        .filter(|_| api.imports_drop_in())
        .map(|d| {
            opts.drop_in_host_path
                .clone()
                .unwrap_or_else(|| d.to_path_buf())
        });
    // A k3s template of plain TOML is undone as the TOML it is (as `register` edited it).
    let config = transform_path(&opts.config, text);
    let mut out = text.to_string();
    for (name, _, _) in opts.runtimes() {
        let rt = RtOptions {
            runtime_name: name,
            runtime_path: String::new(),
            set_as_default: false,
            cdi_enabled: false,
            drop_in_host_path: None,
        };
        let src = Source {
            path: &config,
            text: &out,
        };
        // The drop-in file itself is left to `remove_drop_in` (its change is not applied here).
        let outcome = api.unconfigure(src, None, import.as_deref(), &rt)?;
        if let Some(c) = outcome
            .changes
            .into_iter()
            .find(|c| c.path == config)
            .and_then(|c| c.content)
        {
            out = c;
        }
    }
    if opts.engine == Engine::Docker {
        // A `runtimes` that held only ours goes with them (without a backup `unconfigure`
        // keeps it, empty).
        let src = Source {
            path: &config,
            text: &out,
        };
        if let Some(c) = docker::drop_emptied_runtimes(src, text)?
            .changes
            .into_iter()
            .next()
            .and_then(|c| c.content)
        {
            out = c;
        }
    }
    Ok(out)
}

/// Removes the drop-in [`register`] writes whole (as `runtime unconfigure` removes it) when it
/// is the installer's: it registers one of [`Options::runtimes`] with this install's wrapper
/// (`<toolkit dir>/<wrapper>`). That, and not the recorded `after`, is the check: the record
/// may be planted, while no other file names this install's wrappers; its path is the one this
/// installer was given ([`trusted`]), so removing it loses nothing the install that follows
/// would not replace. A file there that registers none of them (someone else's, one that does
/// not parse) is left, and the line says so.
fn remove_drop_in(opts: &Options, drop_in: &Path) -> Result<String, InstallError> {
    let bytes = match std::fs::read(drop_in) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(format!("{}: not there, nothing to undo", drop_in.display()))
        }
        Err(e) => return Err(io(drop_in, "read")(e)),
    };
    let text = String::from_utf8_lossy(&bytes);
    let src = Source {
        path: drop_in,
        text: &text,
    };
    let toolkit = opts.toolkit_dir();
    let api = opts.engine.api();
    let ours = api.uses_drop_in()
        && opts.runtimes().iter().any(|(name, wrapper, _)| {
            api.status(src, name).ok().and_then(|r| r.runtime_path)
                == Some(toolkit.join(wrapper).display().to_string())
        });
    if !ours {
        return Ok(format!(
            "left {}: it does not register this install's runtimes",
            drop_in.display()
        ));
    }
    std::fs::remove_file(drop_in).map_err(io(drop_in, "remove"))?;
    Ok(format!("removed {}", drop_in.display()))
}

/// Removes the CDI spec only when it holds exactly the bytes the record says were written and
/// the record says nothing was there before; otherwise it is left (a spec the record says
/// replaced another is not put back: the recorded bytes are never written).
fn remove_spec(spec: &Path, edits: &[Written]) -> Result<String, InstallError> {
    let now = match std::fs::read(spec) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(format!("{}: not there, nothing to undo", spec.display()))
        }
        Err(e) => return Err(io(spec, "read")(e)),
    };
    let recorded = edits.iter().filter(|w| w.path == spec && w.after == now);
    let mut had_before = false;
    for w in recorded {
        if w.before.is_none() {
            std::fs::remove_file(spec).map_err(io(spec, "remove"))?;
            return Ok(format!("removed {}", spec.display()));
        }
        had_before = true;
    }
    Ok(if had_before {
        format!(
            "left {}: the record says another file was there before, and recorded bytes are not written back",
            spec.display()
        )
    } else {
        format!(
            "left {}: not the bytes the record says were written",
            spec.display()
        )
    })
}

/// Removes the record (after the uninstall of `done`), then the directories `done` created
/// that only the record kept.
pub fn forget_state(opts: &Options, done: &Installed) -> Result<(), InstallError> {
    match std::fs::remove_file(state_path(opts)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&state_path(opts), "remove")(e)),
    }
    for d in done.dirs.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
    Ok(())
}

/// Undoes `done`: engine files and the spec back to their bytes before (or removed when there
/// was nothing), unless someone changed them since (then they are left, and said so); the
/// toolkit's files and the directories created removed. Returns one line per action.
pub fn uninstall(done: &Installed) -> Result<Vec<String>, InstallError> {
    let mut log = Vec::new();
    for w in done.edits.iter().rev() {
        let now = std::fs::read(&w.path).ok();
        if now.as_deref() != Some(w.after.as_slice()) {
            log.push(format!(
                "left {}: changed since it was written",
                w.path.display()
            ));
            continue;
        }
        match &w.before {
            Some(b) => {
                fsutil::write_atomic(&w.path, b, &WriteOptions::default())?;
                log.push(format!("restored {}", w.path.display()));
            }
            None => {
                std::fs::remove_file(&w.path).map_err(io(&w.path, "remove"))?;
                log.push(format!("removed {}", w.path.display()));
            }
        }
    }
    for f in done.files.iter().rev() {
        match std::fs::remove_file(f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(f, "remove")(e)),
        }
    }
    for d in done.dirs.iter().rev() {
        // Only if empty: what others put there stays.
        if std::fs::remove_dir(d).is_ok() {
            log.push(format!("removed {}", d.display()));
        }
    }
    Ok(log)
}

/// The pid of the process serving the unix socket `socket` (`SO_PEERCRED`).
fn socket_peer_pid(socket: &Path) -> Result<i32, String> {
    use std::os::fd::AsFd;
    let stream = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("cannot connect to {}: {e}", socket.display()))?;
    match nvct_sys::peer_pid(stream.as_fd()) {
        Ok(pid) if pid > 0 => Ok(pid),
        Ok(pid) => Err(format!(
            "SO_PEERCRED on {}: the kernel gave pid {pid}",
            socket.display()
        )),
        Err(e) => Err(format!("SO_PEERCRED on {}: {e}", socket.display())),
    }
}

/// The termination signals (SIGTERM, SIGINT, SIGHUP, SIGQUIT), blocked so that they stay
/// pending until [`TermSignals::wait`]: the daemon undoes its install on the first one. Block
/// them first in `main`, so that every thread started later inherits the mask.
pub struct TermSignals(nvct_sys::Signals);

impl TermSignals {
    pub fn block() -> std::io::Result<TermSignals> {
        let set = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];
        nvct_sys::Signals::block(&set).map(TermSignals)
    }

    /// Waits for one of them; returns its number.
    pub fn wait(&self) -> std::io::Result<i32> {
        self.0.wait()
    }
}

/// The command `--restart-mode=systemd` runs.
pub fn systemd_command(opts: &Options) -> Vec<String> {
    let unit = opts.engine.name().to_string();
    let mut cmd = Vec::new();
    if opts.host_root != Path::new("/") {
        cmd.push("chroot".to_string());
        cmd.push(opts.host_root.display().to_string());
    }
    cmd.extend(["systemctl".to_string(), "restart".to_string(), unit]);
    cmd
}

/// Makes the engine pick up its changed config. Returns what was done.
pub fn restart(opts: &Options) -> Result<String, InstallError> {
    let engine = opts.engine.name();
    match opts.engine_config {
        EngineConfig::Files => {}
        EngineConfig::CrioHook(_) => {
            return Ok(format!(
                "not restarting {engine}: hook mode (CRI-O reads its hooks directory as it changes)"
            ))
        }
        EngineConfig::None => {
            return Ok(format!(
                "not restarting {engine}: its config was not changed (NO_RUNTIME_CONFIG)"
            ))
        }
    }
    match opts.restart {
        Restart::None => Ok(format!("not restarting {engine} (restart mode none)")),
        Restart::Signal => {
            let pid = socket_peer_pid(&opts.socket)
                .map_err(|why| InstallError::Restart { engine, why })?;
            if let Err(e) = nvct_sys::kill(pid, libc::SIGHUP) {
                return Err(InstallError::Restart {
                    engine,
                    why: format!("SIGHUP to pid {pid}: {e}"),
                });
            }
            Ok(format!(
                "sent SIGHUP to {engine} (pid {pid}, serving {})",
                opts.socket.display()
            ))
        }
        Restart::Systemd => {
            let cmd = systemd_command(opts);
            let status = Command::new(&cmd[0])
                .args(&cmd[1..])
                .status()
                .map_err(|e| InstallError::Restart {
                    engine,
                    why: format!("cannot run `{}`: {e}", cmd.join(" ")),
                })?;
            if !status.success() {
                return Err(InstallError::Restart {
                    engine,
                    why: format!("`{}` failed ({status})", cmd.join(" ")),
                });
            }
            Ok(format!("ran `{}`", cmd.join(" ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(engine: Engine, host_root: &str) -> Options {
        Options {
            install_dir: "/usr/local/nvidia".into(),
            source_root: "/usr".into(),
            engine,
            config: "/etc/x".into(),
            drop_in: None,
            drop_in_host_path: None,
            config_sets: Vec::new(),
            socket: "/run/x.sock".into(),
            restart: Restart::Systemd,
            host_root: host_root.into(),
            driver_root: "/run/nvidia/driver".into(),
            dev_root: "/".into(),
            dev_root_ctr_path: None,
            proc_root: "/proc".into(),
            driver_root_ctr_path: None,
            accept_envvar_unprivileged: true,
            accept_volume_mounts: false,
            runtime_name: "nvidia".into(),
            set_as_default: false,
            cdi_enabled: false,
            engine_cdi: false,
            cdi_output_dir: "/var/run/cdi".into(),
            cdi_vendor: "management.nvidia.com".into(),
            cdi_class: "gpu".into(),
            runtime_mode: None,
            create_device_nodes: false,
            engine_config: EngineConfig::Files,
            config_sources: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn systemd_command_cases() {
        let cases = [
            (
                "from a container",
                Engine::Crio,
                "/host",
                "chroot /host systemctl restart crio",
            ),
            (
                "on the host",
                Engine::Docker,
                "/",
                "systemctl restart docker",
            ),
        ];
        for (name, engine, root, want) in cases {
            assert_eq!(
                systemd_command(&opts(engine, root)).join(" "),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn config_names_the_toolkit_and_the_mode() {
        let o = opts(Engine::Containerd, "/host");
        let text = config_text(&o, "cdi");
        let cfg = nvct_formats::config::Config::parse(&text, Path::new("c.toml")).unwrap();
        assert_eq!(cfg.runtime.mode, nvct_formats::config::Mode::Cdi);
        assert_eq!(cfg.cli.root, "/run/nvidia/driver");
        assert_eq!(
            cfg.hook.path,
            "/usr/local/nvidia/toolkit/nvidia-container-runtime-hook"
        );
        assert_eq!(
            cfg.runtime.modes.cdi.spec_dirs,
            ["/etc/cdi", "/var/run/cdi"]
        );
        assert!(
            nvct_formats::config::unknown_keys(&text, Path::new("c.toml")).is_empty(),
            "{text}"
        );
    }

    #[test]
    fn trusted_keeps_all_of_a_real_install() {
        // What install records is exactly what a later run accepts from the state file.
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        for (dir, name) in [
            ("bin", "nvidia-container-runtime"),
            ("bin", "nvidia-container-runtime-hook"),
            ("bin", "nvidia-ctk"),
            ("libexec/nvct", "nvidia-ctk"),
        ] {
            std::fs::create_dir_all(t.join("src").join(dir)).unwrap();
            std::fs::write(t.join("src").join(dir).join(name), b"#!/bin/sh\n").unwrap();
        }
        let o = Options {
            install_dir: t.join("a/b/install"),
            source_root: t.join("src"),
            config: t.join("etc/docker/daemon.json"),
            restart: Restart::None,
            ..opts(Engine::Docker, "/")
        };
        let done = install(&o).unwrap();
        assert!(done.files.len() >= 9 && !done.edits.is_empty() && !done.dirs.is_empty());
        let state = state_path(&o);
        let (kept, ignored) = trusted(&o, done.clone(), &state);
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(kept.files, done.files);
        assert_eq!(kept.edits, done.edits);
        assert_eq!(kept.dirs, done.dirs);
        uninstall(&done).unwrap();
    }

    #[test]
    fn trusted_ignores_paths_of_others_and_through_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let o = Options {
            install_dir: t.join("install"),
            config: t.join("daemon.json"),
            ..opts(Engine::Docker, "/")
        };
        std::fs::create_dir_all(t.join("install")).unwrap();
        std::fs::create_dir_all(t.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(t.join("elsewhere"), t.join("install/toolkit")).unwrap();
        std::os::unix::fs::symlink(t.join("elsewhere/x"), t.join("link.json")).unwrap();
        let linked_config = Options {
            config: t.join("link.json"),
            ..o.clone()
        };
        let edit = |p: &Path| Written {
            path: p.to_path_buf(),
            before: None,
            after: vec![],
        };
        // (case, options, recorded install, the lines' reasons; nothing kept in each case)
        let cases: Vec<(&str, &Options, Installed, &str)> = vec![
            (
                "a host file in files",
                &o,
                Installed {
                    files: vec!["/etc/passwd".into()],
                    ..Installed::default()
                },
                "not a toolkit file",
            ),
            (
                "a toolkit file through a symlinked toolkit dir",
                &o,
                Installed {
                    files: vec![t.join("install/toolkit/nvidia-ctk")],
                    ..Installed::default()
                },
                "reached through a symlink",
            ),
            (
                "a host file in edits",
                &o,
                Installed {
                    edits: vec![edit(Path::new("/etc/shadow"))],
                    ..Installed::default()
                },
                "not the engine config",
            ),
            (
                "the engine config, a symlink",
                &linked_config,
                Installed {
                    edits: vec![edit(&t.join("link.json"))],
                    ..Installed::default()
                },
                "a symlink",
            ),
            (
                "a directory of others",
                &o,
                Installed {
                    dirs: vec!["/var/lib/x".into()],
                    ..Installed::default()
                },
                "not a directory above",
            ),
            (
                "a parent component with ..",
                &o,
                Installed {
                    files: vec![t.join("install/toolkit/../../etc/passwd")],
                    ..Installed::default()
                },
                "not a toolkit file",
            ),
        ];
        for (name, o, done, why) in cases {
            let (kept, ignored) = trusted(o, done, Path::new("/s.json"));
            assert!(
                kept.files.is_empty() && kept.edits.is_empty() && kept.dirs.is_empty(),
                "{name}: {kept:?}"
            );
            assert_eq!(ignored.len(), 1, "{name}: {ignored:?}");
            assert!(
                ignored[0].contains(why) && ignored[0].contains("/s.json"),
                "{name}: {ignored:?}"
            );
        }
    }

    /// A toolkit source tree under `t/src` that `install` accepts.
    fn source_tree(t: &Path) -> PathBuf {
        for (dir, name) in [
            ("bin", "nvidia-container-runtime"),
            ("bin", "nvidia-container-runtime-hook"),
        ] {
            std::fs::create_dir_all(t.join("src").join(dir)).unwrap();
            std::fs::write(t.join("src").join(dir).join(name), b"#!/bin/sh\n").unwrap();
        }
        t.join("src")
    }

    #[test]
    fn unregistered_removes_only_this_installers_runtimes() {
        let docker = |runtime_name: &str| Options {
            config: "/etc/docker/daemon.json".into(),
            runtime_name: runtime_name.into(),
            ..opts(Engine::Docker, "/")
        };
        let containerd = |drop_in: Option<&str>, host: Option<&str>| Options {
            config: "/etc/containerd/config.toml".into(),
            drop_in: drop_in.map(PathBuf::from),
            drop_in_host_path: host.map(PathBuf::from),
            ..opts(Engine::Containerd, "/")
        };
        let crio = Options {
            config: "/etc/crio/crio.conf".into(),
            ..opts(Engine::Crio, "/")
        };
        let cri = "plugins.\"io.containerd.grpc.v1.cri\".containerd";
        let ours = |table: &str| {
            ["nvidia", "nvidia-cdi", "nvidia-legacy"]
                .map(|n| {
                    format!(
                        "\n[{table}.runtimes.{n}]\n  runtime_type = \"io.containerd.runc.v2\"\n  [{table}.runtimes.{n}.options]\n    BinaryName = \"/usr/local/nvidia/toolkit/x\"\n"
                    )
                })
                .concat()
        };
        let runc = format!(
            "\n[{cri}.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n  [{cri}.runtimes.runc.options]\n    SystemdCgroup = true\n"
        );
        let docker_ours = "    \"nvidia\": {\n      \"args\": [],\n      \"path\": \"/x/nvidia-container-runtime\"\n    },\n    \"nvidia-cdi\": {\n      \"args\": [],\n      \"path\": \"/x/nvidia-container-runtime.cdi\"\n    },\n    \"nvidia-legacy\": {\n      \"args\": [],\n      \"path\": \"/x/nvidia-container-runtime.legacy\"\n    }";
        // (case, options, the config as it is now, want)
        let cases: Vec<(&str, Options, String, String)> = vec![
            (
                "docker: ours go, the operator's runtime stays, our default goes",
                docker("nvidia"),
                format!("{{\n  \"log-level\": \"warn\",\n  \"runtimes\": {{\n    \"crun\": {{\n      \"path\": \"/usr/bin/crun\"\n    }},\n{docker_ours}\n  }},\n  \"default-runtime\": \"nvidia\"\n}}\n"),
                "{\n  \"log-level\": \"warn\",\n  \"runtimes\": {\n    \"crun\": {\n      \"path\": \"/usr/bin/crun\"\n    }\n  }\n}\n".into(),
            ),
            (
                "docker: a runtimes object that held only ours goes with them",
                docker("nvidia"),
                format!("{{\n  \"log-level\": \"warn\",\n  \"runtimes\": {{\n{docker_ours}\n  }}\n}}\n"),
                "{\n  \"log-level\": \"warn\"\n}\n".into(),
            ),
            (
                "docker: another runtime name leaves nvidia alone",
                docker("gpu"),
                format!("{{\n  \"runtimes\": {{\n{docker_ours}\n  }}\n}}\n"),
                format!("{{\n  \"runtimes\": {{\n{docker_ours}\n  }}\n}}\n"),
            ),
            (
                "docker: none of ours, not re-printed",
                docker("nvidia"),
                "{\"log-level\":\"warn\"}".into(),
                "{\"log-level\":\"warn\"}".into(),
            ),
            (
                "containerd in place: ours and our default go, the operator's runc stays",
                containerd(None, None),
                format!("version = 2\n\n[{cri}]\n  default_runtime_name = \"nvidia\"\n{runc}{}", ours(cri)),
                format!("version = 2\n\n[{cri}]\n{runc}"),
            ),
            (
                "containerd in place: the built-in runc seeded beside ours goes with them",
                containerd(None, None),
                format!(
                    "version = 2\n{}{}",
                    ours(cri),
                    "\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nBinaryName = \"\"\nCriuImagePath = \"\"\nCriuPath = \"\"\nCriuWorkPath = \"\"\nIoGid = 0\nIoUid = 0\nNoNewKeyring = false\nNoPivotRoot = false\nRoot = \"\"\nShimCgroup = \"\"\nSystemdCgroup = false\n"
                ),
                "version = 2\n".into(),
            ),
            (
                "containerd drop-in: the import of its directory goes",
                containerd(Some("/etc/containerd/conf.d/99-nvidia.toml"), None),
                "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n".into(),
                "version = 2\n".into(),
            ),
            (
                "containerd drop-in seen at a host path: the host dir's import goes, others stay",
                containerd(
                    Some("/runtime/config-dir.d/99-nvidia.toml"),
                    Some("/etc/containerd/conf.d/99-nvidia.toml"),
                ),
                "version = 2\nimports = [\"/etc/containerd/other/*.toml\", \"/etc/containerd/conf.d/*.toml\", \"/runtime/config-dir.d/*.toml\"]\n".into(),
                "version = 2\nimports = [\"/etc/containerd/other/*.toml\", \"/runtime/config-dir.d/*.toml\"]\n".into(),
            ),
            (
                "crio in place: ours and our default go",
                crio,
                "[crio.runtime]\ndefault_runtime = \"nvidia\"\n\n[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\n\n[crio.runtime.runtimes.nvidia]\nruntime_path = \"/x\"\n\n[crio.runtime.runtimes.nvidia-legacy]\nruntime_path = \"/x\"\n".into(),
                "[crio.runtime]\n\n[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\n".into(),
            ),
        ];
        for (name, o, text, want) in cases {
            assert_eq!(unregistered(&o, &text).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn recover_never_writes_the_recorded_bytes() {
        // A real install, then its record on disk with `before` replaced by an attacker's
        // engine config (the record lies in a host path a pod may write): recovery must leave
        // the operator's config, not the attacker's, and no runtime of ours.
        let v2_runc = "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"runc\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n    SystemdCgroup = true\n";
        let v2_evil = v2_runc.replace("SystemdCgroup = true", "BinaryName = \"/tmp/evil\"");
        let v2_no_default = v2_runc.replace("  default_runtime_name = \"runc\"\n", "");
        let docker_json = "{\n  \"log-level\": \"warn\"\n}\n";
        let docker_evil =
            "{\"runtimes\":{\"nvidia\":{\"path\":\"/tmp/evil\"}},\"default-runtime\":\"nvidia\"}";
        let crio_conf = "[crio.runtime]\ndefault_runtime = \"runc\"\n\n[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\n";
        let crio_evil = crio_conf.replace("/usr/bin/runc", "/tmp/evil");
        // (case, engine, config file name, drop-in?, default?, the operator's config (None:
        // no file), the planted `before`, the config recovery leaves)
        let cases: &[(&str, Engine, &str, bool, bool, Option<&str>, &str, &str)] = &[
            (
                "docker",
                Engine::Docker,
                "daemon.json",
                false,
                true,
                Some(docker_json),
                docker_evil,
                docker_json,
            ),
            (
                "docker without a daemon.json before",
                Engine::Docker,
                "daemon.json",
                false,
                false,
                None,
                docker_evil,
                "{}\n",
            ),
            (
                "containerd with a drop-in",
                Engine::Containerd,
                "config.toml",
                true,
                false,
                Some(v2_runc),
                &v2_evil,
                v2_runc,
            ),
            (
                // Without a backup the default ours replaced is not put back: containerd
                // falls back to its built-in default (runc).
                "containerd in place, set as default",
                Engine::Containerd,
                "config.toml",
                false,
                true,
                Some(v2_runc),
                &v2_evil,
                &v2_no_default,
            ),
            (
                "crio with a drop-in",
                Engine::Crio,
                "crio.conf",
                true,
                false,
                Some(crio_conf),
                &crio_evil,
                crio_conf,
            ),
            (
                "crio in place",
                Engine::Crio,
                "crio.conf",
                false,
                false,
                Some(crio_conf),
                &crio_evil,
                crio_conf,
            ),
        ];
        for &(name, engine, file, with_drop_in, default, original, evil, want) in cases {
            let tmp = tempfile::tempdir().unwrap();
            let t = tmp.path();
            let o = Options {
                install_dir: t.join("install"),
                source_root: source_tree(t),
                config: t.join("etc").join(file),
                drop_in: with_drop_in.then(|| t.join("etc/conf.d/99-nvidia.toml")),
                set_as_default: default,
                restart: Restart::None,
                cdi_output_dir: t.join("cdi"),
                ..opts(engine, "/")
            };
            std::fs::create_dir_all(t.join("etc")).unwrap();
            if let Some(text) = original {
                std::fs::write(&o.config, text).unwrap();
            }
            let mut done = install(&o).unwrap();
            assert!(!done.edits.is_empty(), "{name}");
            for w in &mut done.edits {
                w.before = Some(evil.as_bytes().to_vec());
            }
            save_state(&o, &done).unwrap();
            let log = recover(&o).unwrap().join("\n");
            let config = std::fs::read_to_string(&o.config).unwrap_or_default();
            assert_eq!(config, want, "{name}:\n{log}");
            assert!(!config.contains("/tmp/evil"), "{name}: {config}");
            if let Some(d) = &o.drop_in {
                assert!(!d.exists(), "{name}: the drop-in is left:\n{log}");
            }
            assert!(!o.install_dir.join("toolkit").exists(), "{name}:\n{log}");
            assert!(!state_path(&o).exists(), "{name}:\n{log}");
            assert!(!log.contains("restored"), "{name}:\n{log}");
        }
    }

    #[test]
    fn recover_removes_only_the_installers_drop_in_and_spec() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let o = Options {
            install_dir: t.join("install"),
            config: t.join("config.toml"),
            drop_in: Some(t.join("conf.d/99-nvidia.toml")),
            cdi_output_dir: t.join("cdi"),
            ..opts(Engine::Containerd, "/")
        };
        let spec = t.join("cdi/nvidia.yaml");
        let drop_in = t.join("conf.d/99-nvidia.toml");
        let wrapper = o.toolkit_dir().join("nvidia-container-runtime.cdi");
        let entry = |binary: &Path| {
            format!(
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia-cdi.options]\nBinaryName = \"{}\"\n",
                binary.display()
            )
        };
        let written = |path: &Path, before: Option<&str>, after: &str| Written {
            path: path.to_path_buf(),
            before: before.map(|b| b.as_bytes().to_vec()),
            after: after.as_bytes().to_vec(),
        };
        let spec_text = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n";
        // (case, file, its content now, the record's edits, whether it is left, the log says)
        let cases: Vec<(&str, &Path, String, Vec<Written>, bool, &str)> = vec![
            (
                "a drop-in naming this install's wrapper",
                &drop_in,
                entry(&wrapper),
                vec![written(&drop_in, Some("evil"), "other")],
                false,
                "removed",
            ),
            (
                "a drop-in of someone else",
                &drop_in,
                entry(Path::new("/usr/bin/nvidia-container-runtime")),
                vec![written(&drop_in, None, "")],
                true,
                "does not register this install's runtimes",
            ),
            (
                "a drop-in that does not parse",
                &drop_in,
                "[plugins\n".into(),
                vec![written(&drop_in, None, "[plugins\n")],
                true,
                "does not register this install's runtimes",
            ),
            (
                "the spec as recorded, nothing before",
                &spec,
                spec_text.into(),
                vec![written(&spec, None, spec_text)],
                false,
                "removed",
            ),
            (
                "the spec as recorded, another before",
                &spec,
                spec_text.into(),
                vec![written(&spec, Some("evil"), spec_text)],
                true,
                "the record says another file was there before",
            ),
            (
                "the spec changed since",
                &spec,
                spec_text.into(),
                vec![written(&spec, None, "other")],
                true,
                "not the bytes the record says were written",
            ),
        ];
        for (name, path, now, edits, left, says) in cases {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, &now).unwrap();
            let done = Installed {
                edits,
                ..Installed::default()
            };
            save_state(&o, &done).unwrap();
            let log = recover(&o).unwrap().join("\n");
            let after = std::fs::read_to_string(path).ok();
            if left {
                assert_eq!(after.as_deref(), Some(now.as_str()), "{name}:\n{log}");
            } else {
                assert_eq!(after, None, "{name}:\n{log}");
            }
            assert!(
                log.contains(&format!(
                    "{} {}",
                    if left { "left" } else { "removed" },
                    path.display()
                )) && log.contains(says),
                "{name}:\n{log}"
            );
            assert!(!log.contains("evil"), "{name}:\n{log}");
            let _ = std::fs::remove_file(path);
        }
    }

    /// Options for an install under the temp dir `t` (source tree, install dir, CDI dir).
    fn tmp_opts(t: &Path, engine: Engine, config: &str) -> Options {
        Options {
            install_dir: t.join("install"),
            source_root: source_tree(t),
            config: t.join(config),
            restart: Restart::None,
            cdi_output_dir: t.join("cdi"),
            ..opts(engine, "/")
        }
    }

    #[test]
    fn the_nvidia_runtime_takes_the_runtime_mode() {
        // NVIDIA_CONTAINER_RUNTIME_MODE=cdi (the GPU Operator with CDI) is the `nvidia`
        // runtime's mode; `nvidia-cdi` and `nvidia-legacy` keep theirs.
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        // (case, NVIDIA_CONTAINER_RUNTIME_MODE, the modes of config.toml, -cdi, -legacy)
        let cases = [
            ("unset", None, ["auto", "cdi", "legacy"]),
            ("cdi", Some("cdi"), ["cdi", "cdi", "legacy"]),
            ("legacy", Some("legacy"), ["legacy", "cdi", "legacy"]),
        ];
        for (name, mode, want) in cases {
            let o = Options {
                runtime_mode: mode.map(String::from),
                ..tmp_opts(t, Engine::Docker, "daemon.json")
            };
            let done = install(&o).unwrap();
            for (file, want) in ["config.toml", "config-cdi.toml", "config-legacy.toml"]
                .iter()
                .zip(want)
            {
                let text = std::fs::read_to_string(o.config_dir().join(file)).unwrap();
                assert!(
                    text.contains(&format!("mode = \"{want}\"")),
                    "{name}: {file}:\n{text}"
                );
            }
            uninstall(&done).unwrap();
        }
    }

    #[test]
    fn engine_config_modes_install_and_undo() {
        let crio_conf = "[crio.runtime]\ndefault_runtime = \"runc\"\n";
        let packaged_hook = "{\"version\": \"1.0.0\"}\n";
        // (case, engine config (under the temp dir), a hook file there before, the log says
        // about the restart)
        let cases: &[(&str, &str, Option<&str>, &str)] = &[
            (
                "CRI-O hook mode",
                "hook",
                None,
                "not restarting crio: hook mode",
            ),
            (
                "CRI-O hook mode over a packaged hook file: put back on exit",
                "hook",
                Some(packaged_hook),
                "not restarting crio: hook mode",
            ),
            (
                "NO_RUNTIME_CONFIG",
                "none",
                None,
                "not restarting crio: its config was not changed (NO_RUNTIME_CONFIG)",
            ),
        ];
        for &(name, mode, before, restarts) in cases {
            let tmp = tempfile::tempdir().unwrap();
            let t = tmp.path();
            let hook = t.join("hooks.d/oci-nvidia-hook.json");
            let o = Options {
                drop_in: Some(t.join("crio.conf.d/99-nvidia.toml")),
                engine_config: match mode {
                    "hook" => EngineConfig::CrioHook(hook.clone()),
                    _ => EngineConfig::None,
                },
                ..tmp_opts(t, Engine::Crio, "crio.conf")
            };
            std::fs::write(&o.config, crio_conf).unwrap();
            if let Some(b) = before {
                std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
                std::fs::write(&hook, b).unwrap();
            }
            let done = install(&o).unwrap();
            assert_eq!(
                std::fs::read_to_string(&o.config).unwrap(),
                crio_conf,
                "{name}"
            );
            assert!(!t.join("crio.conf.d").exists(), "{name}: a drop-in");
            assert!(restart(&o).unwrap().starts_with(restarts), "{name}");
            if mode == "hook" {
                let v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&hook).unwrap()).unwrap();
                let bin = o.toolkit_dir().join("nvidia-container-runtime-hook");
                assert_eq!(v["hook"]["path"], bin.display().to_string(), "{name}");
                assert_eq!(
                    v["hook"]["args"],
                    serde_json::json!(["nvidia-container-runtime-hook", "prestart"]),
                    "{name}"
                );
                let config = format!(
                    "NVIDIA_CTK_CONFIG_FILE_PATH={}",
                    o.toolkit_config().display()
                );
                assert_eq!(v["hook"]["env"][1], config, "{name}");
                assert!(o.toolkit_config().is_file(), "{name}");
                assert!(own_edits(&o).contains(&hook), "{name}");
            } else {
                assert!(!hook.exists(), "{name}");
                assert!(!own_edits(&o).contains(&o.config), "{name}");
            }
            uninstall(&done).unwrap();
            assert_eq!(
                std::fs::read_to_string(&hook).ok().as_deref(),
                before,
                "{name}"
            );
            assert_eq!(
                std::fs::read_to_string(&o.config).unwrap(),
                crio_conf,
                "{name}"
            );
        }
    }

    #[test]
    fn a_killed_hook_mode_install_is_undone_by_the_next() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let hook = t.join("hooks.d/oci-nvidia-hook.json");
        let o = Options {
            engine_config: EngineConfig::CrioHook(hook.clone()),
            ..tmp_opts(t, Engine::Crio, "crio.conf")
        };
        let done = install(&o).unwrap();
        save_state(&o, &done).unwrap();
        let log = recover(&o).unwrap().join("\n");
        assert!(!hook.exists(), "{log}");
        assert!(
            log.contains(&format!("removed {}", hook.display())),
            "{log}"
        );
        // Another's hook file at that path is left.
        let done = install(&o).unwrap();
        save_state(&o, &done).unwrap();
        std::fs::write(&hook, "{}\n").unwrap();
        let log = recover(&o).unwrap().join("\n");
        assert_eq!(std::fs::read_to_string(&hook).unwrap(), "{}\n", "{log}");
        assert!(
            log.contains("not the hook file this install writes"),
            "{log}"
        );
    }

    #[test]
    fn transform_path_cases() {
        let cases = [
            (
                "a plain config",
                "/etc/containerd/config.toml",
                "",
                "/etc/containerd/config.toml",
            ),
            (
                "a k3s template not there yet",
                "/k3s/config.toml.tmpl",
                "",
                "/k3s/config.toml",
            ),
            (
                "a plain-TOML template",
                "/k3s/config.toml.tmpl",
                "version = 2\n",
                "/k3s/config.toml",
            ),
            (
                "a Go template keeps its name (refused)",
                "/k3s/config.toml.tmpl",
                "{{ template \"base\" . }}\n",
                "/k3s/config.toml.tmpl",
            ),
        ];
        for (name, config, text, want) in cases {
            assert_eq!(
                transform_path(Path::new(config), text),
                Path::new(want),
                "{name}"
            );
        }
    }

    #[test]
    fn k3s_template_from_its_generated_config() {
        // k3s/RKE2 through the GPU Operator: CONTAINERD_CONFIG names config.toml.tmpl (not
        // there yet), RUNTIME_CONFIG_SOURCE=file=<k3s's generated config.toml>. The template
        // written is plain TOML: k3s's settings with the runtimes added; removed on exit.
        let generated = "# File generated by k3s. DO NOT EDIT.\nversion = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"rancher/mirrored-pause:3.6\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n";
        // (case, drop-in?, the template before (None: not there), an error expected)
        let cases: &[(&str, bool, Option<&str>, Option<&str>)] = &[
            ("in place", false, None, None),
            ("with a drop-in", true, None, None),
            (
                "a plain-TOML template there: edited as TOML, put back on exit",
                false,
                Some(generated),
                None,
            ),
            (
                "a template with Go syntax: refused, nothing written",
                false,
                Some("{{ template \"base\" . }}\n"),
                Some("looks like a Go template"),
            ),
        ];
        for &(name, with_drop_in, before, err) in cases {
            let tmp = tempfile::tempdir().unwrap();
            let t = tmp.path();
            let k3s = t.join("k3s/agent/etc/containerd");
            std::fs::create_dir_all(&k3s).unwrap();
            std::fs::write(k3s.join("config.toml"), generated).unwrap();
            let tmpl = k3s.join("config.toml.tmpl");
            if let Some(b) = before {
                std::fs::write(&tmpl, b).unwrap();
            }
            let o = Options {
                config: tmpl.clone(),
                drop_in: with_drop_in.then(|| t.join("conf.d/99-nvidia.toml")),
                config_sources: vec![ConfigSource::File(k3s.join("config.toml"))],
                set_as_default: true,
                ..tmp_opts(t, Engine::Containerd, "unused")
            };
            let result = install(&o);
            assert_eq!(
                std::fs::read_to_string(k3s.join("config.toml")).unwrap(),
                generated,
                "{name}: k3s's own file"
            );
            if let Some(e) = err {
                let msg = result.unwrap_err().to_string();
                assert!(msg.contains(e), "{name}: {msg}");
                assert_eq!(
                    std::fs::read_to_string(&tmpl).ok().as_deref(),
                    before,
                    "{name}"
                );
                assert!(!o.toolkit_dir().exists(), "{name}");
                continue;
            }
            let done = result.unwrap();
            let text = std::fs::read_to_string(&tmpl).unwrap();
            assert!(!text.contains("{{"), "{name}:\n{text}");
            for kept in [
                "sandbox_image = \"rancher/mirrored-pause:3.6\"",
                "snapshotter",
            ] {
                assert!(text.contains(kept), "{name}: {kept}:\n{text}");
            }
            let entries = match &o.drop_in {
                Some(d) => {
                    let imports = containerd::imports(Source {
                        path: Path::new("config.toml"),
                        text: &text,
                    })
                    .unwrap();
                    assert_eq!(imports, [format!("{}/*.toml", t.join("conf.d").display())]);
                    std::fs::read_to_string(d).unwrap()
                }
                None => text.clone(),
            };
            let st = containerd::status(
                Source {
                    path: Path::new("config.toml"),
                    text: &entries,
                },
                "nvidia",
            )
            .unwrap();
            assert_eq!(
                st.runtime_path,
                Some(
                    o.toolkit_dir()
                        .join("nvidia-container-runtime")
                        .display()
                        .to_string()
                ),
                "{name}:\n{entries}"
            );
            assert!(
                entries.contains("default_runtime_name = \"nvidia\""),
                "{name}"
            );
            // A killed install is undone by the next run from the template's content.
            save_state(&o, &done).unwrap();
            let log = recover(&o).unwrap().join("\n");
            let left = std::fs::read_to_string(&tmpl).unwrap();
            assert!(!left.contains("nvidia"), "{name}: {log}\n{left}");
            std::fs::write(&tmpl, &text).unwrap();
            uninstall(&done).unwrap();
            assert_eq!(
                std::fs::read_to_string(&tmpl).ok().as_deref(),
                before,
                "{name}: the template after the undo"
            );
        }
    }

    #[test]
    fn shell_quote_cases() {
        assert_eq!(shell_quote(Path::new("/a b")), "'/a b'");
        assert_eq!(shell_quote(Path::new("/it's")), r"'/it'\''s'");
    }
}
