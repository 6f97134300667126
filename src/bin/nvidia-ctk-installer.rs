//! `nvidia-ctk-installer`: what the GPU Operator's toolkit container runs on every GPU node.
//! Flags and environment variables as upstream's (docs/COMPAT.md), resolved by
//! `nvct::installer_flags`; the work is in `nvct::installer`. Installs, restarts or signals the engine, then waits for SIGTERM (or
//! SIGINT, SIGHUP, SIGQUIT) and undoes everything; `--no-daemon` exits after installing.

use clap::{ArgAction, Parser, ValueEnum};
use nvct::installer::{self, Options, Restart};
use nvct::installer_flags::{self, Flags};
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

impl RuntimeArg {
    fn lib(self) -> Engine {
        match self {
            RuntimeArg::Containerd => Engine::Containerd,
            RuntimeArg::Crio => Engine::Crio,
            RuntimeArg::Docker => Engine::Docker,
        }
    }
}

impl RestartArg {
    fn lib(self) -> Restart {
        match self {
            RestartArg::Signal => Restart::Signal,
            RestartArg::Systemd => Restart::Systemd,
            RestartArg::None => Restart::None,
        }
    }
}

impl Cli {
    /// The values as typed, for [`installer_flags::resolve`].
    fn flags(&self) -> Flags {
        Flags {
            toolkit_install_dir: self.toolkit_install_dir.clone(),
            toolkit_source_root: self.toolkit_source_root.clone(),
            runtime: self.runtime.lib(),
            config: self.config.clone(),
            drop_in_config: self.drop_in_config.clone(),
            drop_in_config_host_path: self.drop_in_config_host_path.clone(),
            socket: self.socket.clone(),
            restart_mode: self.restart_mode.map(RestartArg::lib),
            host_root: self.host_root.clone(),
            driver_root: self.driver_root.clone(),
            driver_root_ctr_path: self.driver_root_ctr_path.clone(),
            accept_nvidia_visible_devices_envvar_when_unprivileged: self
                .accept_nvidia_visible_devices_envvar_when_unprivileged,
            accept_nvidia_visible_devices_as_volume_mounts: self
                .accept_nvidia_visible_devices_as_volume_mounts,
            dev_root: self.dev_root.clone(),
            proc_root: self.proc_root.clone(),
            runtime_name: self.runtime_name.clone(),
            set_as_default: self.set_as_default,
            cdi_enabled: self.cdi_enabled,
            cdi_output_dir: self.cdi_output_dir.clone(),
            create_device_nodes: self.create_device_nodes.clone(),
        }
    }
}

/// Copies an alias into its variable. Runs first in `main`, before any thread exists.
fn apply_env_aliases() {
    for (var, value) in installer_flags::alias_assignments(|k| std::env::var_os(k)) {
        std::env::set_var(var, value);
    }
}

/// The variables the flags read (clap's `env`).
fn flag_variables() -> Vec<String> {
    use clap::CommandFactory;
    Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect()
}

fn log(msg: &str) {
    eprintln!("nvidia-ctk-installer: {msg}");
}

fn resolve(cli: &Cli) -> Result<Options, String> {
    installer_flags::resolve(
        &cli.flags(),
        |k| std::env::var(k).ok(),
        std::env::current_exe,
    )
    .map_err(|e| e.to_string())
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
    let names = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
    for var in installer_flags::unread_variables(names, &flag_variables()) {
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
