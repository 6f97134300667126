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

use crate::fsutil::{self, WriteOptions};
use crate::host::discover;
use crate::host::root::DriverRoot;
use crate::runtime_config::{self, containerd, crio, docker, Engine, Options as RtOptions, Source};
use crate::{cdi, system};
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// SIGHUP to the process listening on the engine's socket (docker reloads its runtimes;
    /// containerd exits and its supervisor starts it again).
    Signal,
    /// `systemctl restart <engine>`, through `chroot <host root>` from a container.
    Systemd,
    None,
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
    pub config_sets: Vec<crate::config_edit::Assignment>,
    pub socket: PathBuf,
    pub restart: Restart,
    pub host_root: PathBuf,
    pub driver_root: PathBuf,
    pub dev_root: PathBuf,
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
    pub cdi_enabled: bool,
    pub cdi_output_dir: PathBuf,
    pub create_device_nodes: bool,
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

    /// The device root as this process sees it (under the seen driver root when the device
    /// root is the driver root).
    fn seen_dev_root(&self) -> PathBuf {
        match &self.driver_root_ctr_path {
            Some(ctr) if self.dev_root == self.driver_root => ctr.clone(),
            _ => self.dev_root.clone(),
        }
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
    /// Engine configs and the CDI spec: put back as they were.
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
    crate::config_edit::edit(&text, Path::new("config.toml"), &opts.config_sets, ":")
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
    register(opts, done)?;
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
        cdi_enabled: opts.cdi_enabled,
        drop_in_host_path: opts.drop_in_host_path.clone(),
    };
    let read = |p: &Path| fsutil::read_optional(p).map(Option::unwrap_or_default);
    let main_text = read(&opts.config)?;
    let main = Source {
        path: &opts.config,
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
            let mut full = main_text.clone();
            for (i, (name, wrapper, _)) in runtimes.iter().enumerate() {
                let src = Source {
                    path: &opts.config,
                    text: &full,
                };
                let out = containerd::configure(src, src, None, &rt(name, wrapper, i == 0))?;
                full = out.changes[0].content.clone().unwrap_or_default();
            }
            let base = Source {
                path: &opts.config,
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
            let target = drop_in.clone().unwrap_or_else(|| opts.config.clone());
            let mut text = read(&target)?;
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

fn write_cdi_spec(opts: &Options, done: &mut Installed) -> Result<(), InstallError> {
    let root = DriverRoot::new(
        opts.seen_driver_root(),
        opts.seen_dev_root(),
        &opts.proc_root,
    );
    let inv = discover::discover_for_spec(&root).map_err(|e| InstallError::Cdi(e.to_string()))?;
    let gen = cdi::generate::Options {
        hook_path: opts
            .toolkit_dir()
            .join("nvidia-cdi-hook")
            .display()
            .to_string(),
        ..cdi::generate::Options::default()
    };
    let mut spec =
        cdi::generate::generate(&inv, &gen).map_err(|e| InstallError::Cdi(e.to_string()))?;
    if opts.driver_root_ctr_path.is_some() {
        to_host_paths(&mut spec, &opts.seen_driver_root(), &opts.driver_root)?;
        to_host_paths(&mut spec, &opts.seen_dev_root(), &opts.dev_root)?;
    }
    let text = spec
        .encode(cdi::Format::Yaml)
        .map_err(|e| InstallError::Cdi(e.to_string()))?;
    let path = opts.cdi_output_dir.join("nvidia.yaml");
    edit_file(&path, &text, done)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
        .map_err(io(&path, "chmod"))?;
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

/// The engine files and the CDI spec [`install`] may edit: the config and drop-in it was given
/// and `<cdi output dir>/nvidia.yaml`.
fn own_edits(opts: &Options) -> Vec<PathBuf> {
    let mut out = vec![opts.config.clone()];
    out.extend(opts.drop_in.clone());
    out.push(opts.cdi_output_dir.join("nvidia.yaml"));
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
    log.extend(uninstall(&done)?);
    forget_state(opts, &done)?;
    Ok(log)
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
    match crate::sys::peer_pid(stream.as_fd()) {
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
pub struct TermSignals(crate::sys::Signals);

impl TermSignals {
    pub fn block() -> std::io::Result<TermSignals> {
        let set = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];
        crate::sys::Signals::block(&set).map(TermSignals)
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
    match opts.restart {
        Restart::None => Ok(format!("not restarting {engine} (restart mode none)")),
        Restart::Signal => {
            let pid = socket_peer_pid(&opts.socket)
                .map_err(|why| InstallError::Restart { engine, why })?;
            if let Err(e) = crate::sys::kill(pid, libc::SIGHUP) {
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
            proc_root: "/proc".into(),
            driver_root_ctr_path: None,
            accept_envvar_unprivileged: true,
            accept_volume_mounts: false,
            runtime_name: "nvidia".into(),
            set_as_default: false,
            cdi_enabled: false,
            cdi_output_dir: "/var/run/cdi".into(),
            create_device_nodes: false,
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
        let cfg = crate::config::Config::parse(&text, Path::new("c.toml")).unwrap();
        assert_eq!(cfg.runtime.mode, crate::config::Mode::Cdi);
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
            crate::config::unknown_keys(&text, Path::new("c.toml")).is_empty(),
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

    #[test]
    fn shell_quote_cases() {
        assert_eq!(shell_quote(Path::new("/a b")), "'/a b'");
        assert_eq!(shell_quote(Path::new("/it's")), r"'/it'\''s'");
    }
}
