//! `nvidia-ctk-installer`'s command line (clap): every flag with its variable, as upstream's
//! (docs/COMPAT.md); [`resolve`] turns it into the installer's options through
//! [`super::installer`].

use super::installer::Flags;
use clap::{ArgAction, Parser, ValueEnum};
use nvct_engines::Engine;
use nvct_node::installer::{Options, Restart};
use std::path::PathBuf;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeArg {
    Containerd,
    Crio,
    Docker,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartArg {
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
pub struct Cli {
    /// The install dir as upstream's installer before v1.18 took it (the GPU Operator's old
    /// entrypoint `nvidia-toolkit /usr/local/nvidia`); --toolkit-install-dir and its variables
    /// win. Put it before the flags.
    #[arg(value_name = "DESTINATION")]
    pub destination: Option<PathBuf>,
    /// The toolkit goes to DIR/toolkit (default: DESTINATION, else /usr/local/nvidia).
    #[arg(long, visible_alias = "root", env = "TOOLKIT_INSTALL_DIR")]
    pub toolkit_install_dir: Option<PathBuf>,
    /// A prefix holding bin/ (and libexec/nvct/) with the toolkit's binaries; default: the
    /// prefix of this executable.
    #[arg(long, env = "TOOLKIT_SOURCE_ROOT")]
    pub toolkit_source_root: Option<PathBuf>,
    #[arg(
        long,
        short = 'r',
        value_enum,
        env = "RUNTIME",
        default_value = "docker"
    )]
    pub runtime: RuntimeArg,
    /// The engine's config file (default per engine).
    #[arg(long, env = "RUNTIME_CONFIG")]
    pub config: Option<PathBuf>,
    /// The drop-in file (containerd, CRI-O; default per engine).
    #[arg(long, env = "RUNTIME_DROP_IN_CONFIG")]
    pub drop_in_config: Option<PathBuf>,
    /// containerd: the drop-in's path as the host's containerd sees it, when this pod writes it
    /// elsewhere (the GPU Operator mounts the host's conf.d at another path): the config's
    /// `imports` names this one.
    #[arg(long, env = "RUNTIME_DROP_IN_CONFIG_HOST_PATH")]
    pub drop_in_config_host_path: Option<PathBuf>,
    /// The engine's socket (for --restart-mode=signal).
    #[arg(long, env = "RUNTIME_SOCKET")]
    pub socket: Option<PathBuf>,
    /// signal, systemd or none (default: signal for containerd and docker, systemd for CRI-O).
    #[arg(long, value_enum, env = "RUNTIME_RESTART_MODE")]
    pub restart_mode: Option<RestartArg>,
    /// Where the host's / is mounted (systemd restarts run `chroot HOST systemctl ...`).
    #[arg(long, env = "HOST_ROOT_MOUNT", default_value = "/host")]
    pub host_root: PathBuf,
    /// The driver root (`/run/nvidia/driver` with the GPU Operator's driver container).
    #[arg(long, env = "NVIDIA_DRIVER_ROOT", default_value = "/")]
    pub driver_root: PathBuf,
    /// Where this container sees the driver root (e.g. `/driver-root` for a host driver
    /// mounted there): discovery reads it, the config and the CDI spec name --driver-root.
    #[arg(long, env = "DRIVER_ROOT_CTR_PATH")]
    pub driver_root_ctr_path: Option<PathBuf>,
    /// The config's `accept-nvidia-visible-devices-envvar-when-unprivileged`.
    #[arg(long, env = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", action = ArgAction::Set,
          num_args = 0..=1, default_value = "true", default_missing_value = "true",
          value_parser = go_bool)]
    pub accept_nvidia_visible_devices_envvar_when_unprivileged: bool,
    /// The config's `accept-nvidia-visible-devices-as-volume-mounts` (the device plugin's
    /// volume-mounts strategy).
    #[arg(long, env = "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", action = ArgAction::Set,
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = go_bool)]
    pub accept_nvidia_visible_devices_as_volume_mounts: bool,
    /// Where dev/ is; default: the driver root.
    #[arg(long, env = "NVIDIA_DEV_ROOT")]
    pub dev_root: Option<PathBuf>,
    /// Where this container sees the device root (the GPU Operator's validator sets it).
    #[arg(long, env = "DEV_ROOT_CTR_PATH")]
    pub dev_root_ctr_path: Option<PathBuf>,
    /// Ours: the procfs to read the driver's files from (tests point it at a simulated host).
    #[arg(long, default_value = "/proc", hide = true)]
    pub proc_root: PathBuf,
    #[arg(long, visible_aliases = ["nvidia-runtime-name", "runtime-class"], env = "NVIDIA_RUNTIME_NAME", default_value = "nvidia")]
    pub runtime_name: String,
    /// Make the nvidia runtime the engine's default (as upstream, unless told false).
    #[arg(long, env = "NVIDIA_RUNTIME_SET_AS_DEFAULT",
          action = ArgAction::Set, num_args = 0..=1, default_value = "true",
          default_missing_value = "true", value_parser = go_bool)]
    pub set_as_default: bool,
    /// Write the CDI specs (the management spec) and enable CDI (and `cdi.k8s.io/*`
    /// annotations) in the engine.
    #[arg(long, visible_alias = "enable-cdi", env = "CDI_ENABLED", action = ArgAction::Set,
          num_args = 0..=1, default_value = "false", default_missing_value = "true",
          value_parser = go_bool)]
    pub cdi_enabled: bool,
    /// The engine's CDI switch on its own (default: --cdi-enabled).
    #[arg(long, env = "RUNTIME_ENABLE_CDI", action = ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true", value_parser = go_bool)]
    pub enable_cdi_in_runtime: Option<bool>,
    /// "" writes no CDI spec.
    #[arg(long, env = "CDI_OUTPUT_DIR", default_value = "/var/run/cdi")]
    pub cdi_output_dir: PathBuf,
    /// The management spec's kind.
    #[arg(long, env = "CDI_KIND", default_value = super::installer::DEFAULT_CDI_KIND)]
    pub cdi_kind: String,
    /// The `nvidia` runtime's mode: auto, legacy, cdi or jit-cdi (default auto).
    #[arg(
        long = "nvidia-container-runtime.mode",
        visible_alias = "nvidia-container-runtime-mode",
        env = "NVIDIA_CONTAINER_RUNTIME_MODE"
    )]
    pub runtime_mode: Option<String>,
    /// `control` creates the control device nodes (nvidiactl, nvidia-uvm, ...); `none` none
    /// (default: control with CDI, none without).
    #[arg(long, env = "CREATE_DEVICE_NODES", value_delimiter = ',')]
    pub create_device_nodes: Option<Vec<String>>,
    /// Install the toolkit only: the engine's config is neither changed nor restarted.
    #[arg(long, env = "NO_RUNTIME_CONFIG", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub no_runtime_config: bool,
    /// Upstream's NRI plugin mode: refused (there is no NRI plugin here).
    #[arg(long, short = 'p', env = "ENABLE_NRI_PLUGIN", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub enable_nri_plugin: bool,
    /// CRI-O: `config` (a drop-in registers the runtimes) or `hook` (an OCI hook file).
    #[arg(long, env = "CRIO_CONFIG_MODE", default_value = "config")]
    pub config_mode: String,
    /// CRI-O hook mode: the hooks directory.
    #[arg(long, env = "CRIO_HOOKS_DIR", default_value = super::installer::DEFAULT_CRIO_HOOKS_DIR)]
    pub hooks_dir: PathBuf,
    /// CRI-O hook mode: the hook file's name.
    #[arg(long, env = "CRIO_HOOK_FILENAME", default_value = super::installer::DEFAULT_CRIO_HOOK_FILENAME)]
    pub hook_filename: String,
    /// Where the runtime entries are derived from: `file` (the config), `file=PATH` (k3s's
    /// generated config.toml), `command` (not run here); the first is used.
    #[arg(
        long,
        visible_alias = "config-sources",
        env = "RUNTIME_CONFIG_SOURCES",
        value_delimiter = ','
    )]
    pub config_source: Vec<String>,
    /// Exit after installing (nothing is undone).
    #[arg(long, short = 'n', env = "NO_DAEMON", action = ArgAction::Set, num_args = 0..=1,
          default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub no_daemon: bool,
    #[arg(
        long,
        env = "TOOLKIT_PID_FILE",
        default_value = "/run/nvidia/toolkit/toolkit.pid"
    )]
    pub pid_file: PathBuf,
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
    /// The values as typed, for [`super::installer::resolve`].
    fn flags(&self) -> Flags {
        Flags {
            toolkit_install_dir: self.toolkit_install_dir.clone(),
            destination: self.destination.clone(),
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
            dev_root_ctr_path: self.dev_root_ctr_path.clone(),
            proc_root: self.proc_root.clone(),
            runtime_name: self.runtime_name.clone(),
            set_as_default: self.set_as_default,
            cdi_enabled: self.cdi_enabled,
            runtime_enable_cdi: self.enable_cdi_in_runtime,
            cdi_output_dir: self.cdi_output_dir.clone(),
            cdi_kind: self.cdi_kind.clone(),
            runtime_mode: self.runtime_mode.clone(),
            create_device_nodes: self.create_device_nodes.clone(),
            no_runtime_config: self.no_runtime_config,
            enable_nri_plugin: self.enable_nri_plugin,
            crio_config_mode: self.config_mode.clone(),
            crio_hooks_dir: self.hooks_dir.clone(),
            crio_hook_filename: self.hook_filename.clone(),
            config_sources: self.config_source.clone(),
        }
    }
}

/// Upstream's booleans (Go's `strconv.ParseBool`).
fn go_bool(s: &str) -> Result<bool, String> {
    super::installer::parse_go_bool(s)
}

/// The variables the flags read (clap's `env`).
pub fn flag_variables() -> Vec<String> {
    use clap::CommandFactory;
    Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect()
}

pub fn resolve(cli: &Cli) -> Result<Options, String> {
    super::installer::resolve(
        &cli.flags(),
        |k| std::env::var(k).ok(),
        std::env::current_exe,
    )
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_upstream_variable_is_read_or_named() {
        // Nothing of upstream's is ignored without a word: each of its variables is read by a
        // flag here, is an alias or a config variable, or is named in the log as not acted on.
        let flags = flag_variables();
        for var in super::super::installer::UPSTREAM_VARIABLES {
            let read = flags.iter().any(|v| v == var)
                || super::super::installer::ENV_ALIASES
                    .iter()
                    .any(|(_, a)| a.contains(var))
                || super::super::installer::CONFIG_VARIABLES
                    .iter()
                    .any(|(v, _)| v == var);
            let named = super::super::installer::NOT_ACTED_ON
                .iter()
                .any(|(v, _)| v == var);
            assert!(
                read != named,
                "{var}: read {read}, named as not acted on {named}"
            );
        }
    }

    #[test]
    fn the_operators_entrypoint_parses() {
        // `nvidia-toolkit /usr/local/nvidia` (argv0 is only a name), and the flags after it.
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("no argument", &["nvidia-toolkit"], None),
            (
                "the install dir",
                &["nvidia-toolkit", "/usr/local/nvidia"],
                Some("/usr/local/nvidia"),
            ),
            (
                "then flags",
                &["nvidia-toolkit", "/opt/nv", "--runtime=crio", "--no-daemon"],
                Some("/opt/nv"),
            ),
        ];
        for (name, argv, want) in cases {
            let cli = Cli::try_parse_from(*argv).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                cli.destination.as_deref(),
                want.map(std::path::Path::new),
                "{name}"
            );
        }
        assert!(Cli::try_parse_from(["nvidia-toolkit", "/a", "/b"]).is_err());
    }
}
