//! `nvidia-ctk-installer`: what the GPU Operator's toolkit container runs on every GPU node.
//! Flags and environment variables as upstream's (docs/COMPAT.md); the work is in
//! `nvct::installer`. Installs, restarts or signals the engine, then waits for SIGTERM (or
//! SIGINT, SIGHUP, SIGQUIT) and undoes everything; `--no-daemon` exits after installing.

use clap::{ArgAction, Parser, ValueEnum};
use nvct::installer::{self, Options, Restart};
use nvct::runtime_config::Engine;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RuntimeArg {
    Containerd,
    Crio,
    Docker,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RestartArg {
    Signal,
    Systemd,
    None,
}

#[derive(Parser, Debug)]
#[command(
    name = "nvidia-ctk-installer",
    version,
    about = "Install the NVIDIA container toolkit on this node, register it with the container engine, and undo it on exit"
)]
struct Cli {
    /// The toolkit goes to DIR/toolkit.
    #[arg(
        long,
        visible_alias = "root",
        env = "TOOLKIT_INSTALL_DIR",
        default_value = "/usr/local/nvidia"
    )]
    toolkit_install_dir: PathBuf,
    /// A prefix holding bin/ (and libexec/nvct/) with the toolkit's binaries; default: the
    /// prefix of this executable.
    #[arg(long, env = "TOOLKIT_SOURCE_ROOT")]
    toolkit_source_root: Option<PathBuf>,
    #[arg(
        long,
        short = 'r',
        value_enum,
        env = "RUNTIME",
        default_value = "docker"
    )]
    runtime: RuntimeArg,
    /// The engine's config file (default per engine).
    #[arg(long, env = "RUNTIME_CONFIG")]
    config: Option<PathBuf>,
    /// The drop-in file (containerd, CRI-O; default per engine).
    #[arg(long, env = "RUNTIME_DROP_IN_CONFIG")]
    drop_in_config: Option<PathBuf>,
    /// containerd: the drop-in's path as the host's containerd sees it, when this pod writes it
    /// elsewhere (the GPU Operator mounts the host's conf.d at another path): the config's
    /// `imports` names this one.
    #[arg(long, env = "RUNTIME_DROP_IN_CONFIG_HOST_PATH")]
    drop_in_config_host_path: Option<PathBuf>,
    /// The engine's socket (for --restart-mode=signal).
    #[arg(long, env = "RUNTIME_SOCKET")]
    socket: Option<PathBuf>,
    /// signal, systemd or none (default: signal for containerd and docker, systemd for CRI-O).
    #[arg(long, value_enum, env = "RUNTIME_RESTART_MODE")]
    restart_mode: Option<RestartArg>,
    /// Where the host's / is mounted (systemd restarts run `chroot HOST systemctl ...`).
    #[arg(long, env = "HOST_ROOT_MOUNT", default_value = "/host")]
    host_root: PathBuf,
    /// The driver root (`/run/nvidia/driver` with the GPU Operator's driver container).
    #[arg(long, env = "NVIDIA_DRIVER_ROOT", default_value = "/")]
    driver_root: PathBuf,
    /// Where this container sees the driver root (e.g. `/driver-root` for a host driver
    /// mounted there): discovery reads it, the config and the CDI spec name --driver-root.
    #[arg(long, env = "DRIVER_ROOT_CTR_PATH")]
    driver_root_ctr_path: Option<PathBuf>,
    /// The config's `accept-nvidia-visible-devices-envvar-when-unprivileged`.
    #[arg(long, env = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", action = ArgAction::Set,
          num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    accept_nvidia_visible_devices_envvar_when_unprivileged: bool,
    /// The config's `accept-nvidia-visible-devices-as-volume-mounts` (the device plugin's
    /// volume-mounts strategy).
    #[arg(long, env = "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", action = ArgAction::Set,
          num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    accept_nvidia_visible_devices_as_volume_mounts: bool,
    /// Where dev/ is; default: the driver root.
    #[arg(long, env = "NVIDIA_DEV_ROOT")]
    dev_root: Option<PathBuf>,
    /// Ours: the procfs to read the driver's files from (tests point it at a simulated host).
    #[arg(long, default_value = "/proc", hide = true)]
    proc_root: PathBuf,
    #[arg(long, visible_aliases = ["nvidia-runtime-name", "runtime-class"], env = "NVIDIA_RUNTIME_NAME", default_value = "nvidia")]
    runtime_name: String,
    /// Make the nvidia runtime the engine's default.
    #[arg(long, env = "NVIDIA_RUNTIME_SET_AS_DEFAULT", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true")]
    set_as_default: bool,
    /// Write a CDI spec and enable CDI (and `cdi.k8s.io/*` annotations) in the engine.
    #[arg(long, env = "CDI_ENABLED", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true")]
    cdi_enabled: bool,
    #[arg(long, env = "CDI_OUTPUT_DIR", default_value = "/var/run/cdi")]
    cdi_output_dir: PathBuf,
    /// `control` creates the control device nodes (nvidiactl, nvidia-uvm, ...).
    #[arg(long, env = "CREATE_DEVICE_NODES", value_delimiter = ',')]
    create_device_nodes: Vec<String>,
    /// Exit after installing (nothing is undone).
    #[arg(long, short = 'n', env = "NO_DAEMON", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true")]
    no_daemon: bool,
    #[arg(
        long,
        env = "TOOLKIT_PID_FILE",
        default_value = "/run/nvidia/toolkit/toolkit.pid"
    )]
    pid_file: PathBuf,
}

/// Upstream's other names of the variables: (the variable clap reads, its aliases). An alias
/// counts when the variable itself is unset.
const ENV_ALIASES: &[(&str, &[&str])] = &[
    ("TOOLKIT_INSTALL_DIR", &["ROOT"]),
    ("RUNTIME_CONFIG", &["CONTAINERD_CONFIG", "DOCKER_CONFIG"]),
    ("RUNTIME_SOCKET", &["CONTAINERD_SOCKET", "DOCKER_SOCKET"]),
    ("NVIDIA_DRIVER_ROOT", &["DRIVER_ROOT"]),
    ("NVIDIA_DEV_ROOT", &["DEV_ROOT"]),
    (
        "NVIDIA_RUNTIME_NAME",
        &["CONTAINERD_RUNTIME_CLASS", "DOCKER_RUNTIME_NAME"],
    ),
    (
        "NVIDIA_RUNTIME_SET_AS_DEFAULT",
        &["CONTAINERD_SET_AS_DEFAULT", "DOCKER_SET_AS_DEFAULT"],
    ),
    ("CDI_ENABLED", &["ENABLE_CDI"]),
    ("TOOLKIT_PID_FILE", &["PID_FILE"]),
];

/// Copies an alias into its variable. Runs first in `main`, before any thread exists.
fn apply_env_aliases() {
    for (var, aliases) in ENV_ALIASES {
        if std::env::var_os(var).is_some() {
            continue;
        }
        if let Some(v) = aliases.iter().find_map(std::env::var_os) {
            std::env::set_var(var, v);
        }
    }
}

/// Prefixes of upstream's installer variables: one of these we do not act on is named in the
/// log, never ignored without a word.
const UPSTREAM_PREFIXES: &[&str] = &[
    "NVIDIA_CONTAINER_RUNTIME_",
    "NVIDIA_CONTAINER_CLI_",
    "NVIDIA_CONTAINER_TOOLKIT_",
    "NVIDIA_TOOLKIT_",
    "NVIDIA_RUNTIME_",
    "CONTAINERD_",
    "CRIO_",
    "RUNTIME_",
    "TOOLKIT_",
    "CDI_",
];

/// The variables in `names` that look like upstream's (a prefix above) and that this
/// installer does not read: its flags' variables, their aliases and the config variables
/// count as read.
fn unread_variables(names: impl Iterator<Item = String>) -> Vec<String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let mut known: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect();
    known.extend(
        ENV_ALIASES
            .iter()
            .flat_map(|(_, a)| a.iter().map(|s| s.to_string())),
    );
    known.extend(
        installer::CONFIG_VARIABLES
            .iter()
            .map(|(v, _)| v.to_string()),
    );
    let mut out: Vec<String> = names
        .filter(|n| UPSTREAM_PREFIXES.iter().any(|p| n.starts_with(p)))
        .filter(|n| !known.contains(n))
        .collect();
    out.sort();
    out
}

fn log(msg: &str) {
    eprintln!("nvidia-ctk-installer: {msg}");
}

fn resolve(cli: &Cli) -> Result<Options, String> {
    let (engine, config, drop_in, socket, restart) = match cli.runtime {
        RuntimeArg::Containerd => (
            Engine::Containerd,
            "/etc/containerd/config.toml",
            Some("/etc/containerd/conf.d/99-nvidia.toml"),
            "/run/containerd/containerd.sock",
            Restart::Signal,
        ),
        RuntimeArg::Crio => (
            Engine::Crio,
            "/etc/crio/crio.conf",
            Some("/etc/crio/crio.conf.d/99-nvidia.toml"),
            "/var/run/crio/crio.sock",
            Restart::Systemd,
        ),
        RuntimeArg::Docker => (
            Engine::Docker,
            "/etc/docker/daemon.json",
            None,
            "/var/run/docker.sock",
            Restart::Signal,
        ),
    };
    if engine == Engine::Docker && cli.drop_in_config.is_some() {
        return Err("--drop-in-config: docker has no drop-in files".into());
    }
    let create_device_nodes = match cli
        .create_device_nodes
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()[..]
    {
        [] | [""] | ["none"] => false,
        ["control"] => true,
        ref other => {
            return Err(format!(
                "--create-device-nodes {other:?}: expected control or none"
            ))
        }
    };
    let source_root = match &cli.toolkit_source_root {
        Some(r) => r.clone(),
        None => {
            let exe =
                std::env::current_exe().map_err(|e| format!("the installer's own path: {e}"))?;
            exe.parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("/"))
                .to_path_buf()
        }
    };
    let abs = |p: &Path, flag: &str| {
        std::path::absolute(p).map_err(|e| format!("{flag} {}: {e}", p.display()))
    };
    if cli.drop_in_config_host_path.is_some() && engine != Engine::Containerd {
        return Err(
            "--drop-in-config-host-path (RUNTIME_DROP_IN_CONFIG_HOST_PATH): only containerd imports a drop-in by path; leave it out".into(),
        );
    }
    let config_sets = installer::upstream_config_sets(|k| std::env::var(k).ok())?;
    Ok(Options {
        drop_in_host_path: cli
            .drop_in_config_host_path
            .clone()
            .filter(|p| !p.as_os_str().is_empty()),
        config_sets,
        install_dir: abs(&cli.toolkit_install_dir, "--toolkit-install-dir")?,
        source_root,
        engine,
        config: cli.config.clone().unwrap_or_else(|| config.into()),
        drop_in: match &cli.drop_in_config {
            Some(p) if p.as_os_str().is_empty() => None,
            Some(p) => Some(abs(p, "--drop-in-config")?),
            None => drop_in.map(PathBuf::from),
        },
        socket: cli.socket.clone().unwrap_or_else(|| socket.into()),
        restart: match cli.restart_mode {
            Some(RestartArg::Signal) => Restart::Signal,
            Some(RestartArg::Systemd) => Restart::Systemd,
            Some(RestartArg::None) => Restart::None,
            None => restart,
        },
        host_root: cli.host_root.clone(),
        driver_root: cli.driver_root.clone(),
        dev_root: cli
            .dev_root
            .clone()
            .unwrap_or_else(|| cli.driver_root.clone()),
        proc_root: cli.proc_root.clone(),
        driver_root_ctr_path: cli.driver_root_ctr_path.clone(),
        accept_envvar_unprivileged: cli.accept_nvidia_visible_devices_envvar_when_unprivileged,
        accept_volume_mounts: cli.accept_nvidia_visible_devices_as_volume_mounts,
        runtime_name: cli.runtime_name.clone(),
        set_as_default: cli.set_as_default,
        cdi_enabled: cli.cdi_enabled,
        cdi_output_dir: cli.cdi_output_dir.clone(),
        create_device_nodes,
    })
}

/// The pid file, locked: a second installer on the node refuses to run.
fn lock_pid_file(path: &Path) -> Result<std::fs::File, String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !nvct::fsutil::try_lock(&f).map_err(|e| format!("{}: flock: {e}", path.display()))? {
        return Err(format!(
            "{} is locked: another nvidia-ctk-installer is running on this node",
            path.display()
        ));
    }
    f.set_len(0)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    writeln!(f, "{}", std::process::id()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(f)
}

fn main() -> ExitCode {
    let signals = match installer::TermSignals::block() {
        Ok(s) => s,
        Err(e) => {
            log(&format!("error: cannot block the termination signals: {e}"));
            return ExitCode::FAILURE;
        }
    };
    apply_env_aliases();
    let cli = Cli::parse();
    let opts = match resolve(&cli) {
        Ok(o) => o,
        Err(e) => {
            log(&format!("error: {e}"));
            return ExitCode::from(2);
        }
    };
    for var in unread_variables(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok())) {
        log(&format!(
            "warning: {var} is set but not acted on here (an upstream setting this installer does not have; docs/COMPAT.md)"
        ));
    }
    let _pid = match lock_pid_file(&cli.pid_file) {
        Ok(f) => f,
        Err(e) => {
            log(&format!("error: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let result = run(&opts, cli.no_daemon, &signals);
    if !cli.no_daemon {
        let _ = std::fs::remove_file(&cli.pid_file);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log(&format!("error: {e}"));
            ExitCode::FAILURE
        }
    }
}

fn run(opts: &Options, no_daemon: bool, signals: &installer::TermSignals) -> Result<(), String> {
    for l in installer::recover(opts).map_err(|e| e.to_string())? {
        log(&l);
    }
    let done = installer::install(opts).map_err(|e| e.to_string())?;
    // Kept until the undo, so that a killed installer's work is undone by the next one.
    if let Err(e) = installer::save_state(opts, &done) {
        let _ = installer::uninstall(&done);
        return Err(e.to_string());
    }
    for l in &done.log {
        log(l);
    }
    match installer::restart(opts) {
        Ok(l) => log(&l),
        Err(e) => {
            log(&format!("error: {e}; undoing the install"));
            for l in installer::uninstall(&done).map_err(|e| e.to_string())? {
                log(&l);
            }
            installer::forget_state(opts, &done).map_err(|e| e.to_string())?;
            return Err(e.to_string());
        }
    }
    if no_daemon {
        log("installed; exiting (--no-daemon: nothing will be undone)");
        return Ok(());
    }
    log("installed; waiting for SIGTERM to undo it");
    match signals.wait() {
        Ok(sig) => log(&format!("signal {sig}: undoing the install")),
        Err(e) => log(&format!("error: sigwait: {e}; undoing the install")),
    }
    for l in installer::uninstall(&done).map_err(|e| e.to_string())? {
        log(&l);
    }
    installer::forget_state(opts, &done).map_err(|e| e.to_string())?;
    match installer::restart(opts) {
        Ok(l) => log(&l),
        Err(e) => log(&format!("warning: {e}")),
    }
    Ok(())
}
