//! `nvidia-ctk system create-device-nodes|create-dev-char-symlinks`: flags as upstream, the
//! work in `nvct_node::system` (what should exist, and the writers that create what is missing).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nvct_formats::root::DriverRoot;
use nvct_node::system::{self, Done};

use crate::Verbosity;

#[derive(Args, Debug)]
pub struct SystemArgs {
    #[command(subcommand)]
    command: SystemCommand,
}

#[derive(Subcommand, Debug)]
enum SystemCommand {
    /// Create the NVIDIA control device nodes (nvidiactl, nvidia-modeset, nvidia-uvm,
    /// nvidia-uvm-tools) from the majors in /proc/devices.
    CreateDeviceNodes(NodesArgs),
    /// Create /dev/char/MAJ:MIN links to every NVIDIA device node (systemd resolves a
    /// container's device rules through them).
    CreateDevCharSymlinks(LinksArgs),
    /// Write this node's nvidia.com/* labels (from the hardware) as a Node Feature Discovery
    /// local feature file, so labels follow the GPUs instead of going stale.
    LabelNode(LabelArgs),
}

#[derive(Args, Debug)]
struct LabelArgs {
    /// The toolkit config (driver root, proc root; default as the hook).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The feature file; `-` prints it.
    #[arg(
        long,
        default_value = "/etc/kubernetes/node-feature-discovery/features.d/nvidia"
    )]
    output: PathBuf,
}

/// Upstream's boolean flags also come from variables (`CREATE_ALL=true`, `DRY_RUN=1`): Go's
/// ParseBool forms, read case-insensitively.
fn boolish() -> clap::builder::BoolishValueParser {
    clap::builder::BoolishValueParser::new()
}

#[derive(Args, Debug)]
struct NodesArgs {
    /// The driver root: the nodes are created in its `dev/` unless --dev-root is given
    /// (default `/`; also $NVIDIA_DRIVER_ROOT or $DRIVER_ROOT, as upstream).
    #[arg(long, visible_alias = "root")]
    driver_root: Option<PathBuf>,
    /// Where `dev/` is (default: the driver root).
    #[arg(long, env = "NVIDIA_CTK_DEV_ROOT")]
    dev_root: Option<PathBuf>,
    /// Create the control device nodes.
    #[arg(long)]
    control_devices: bool,
    /// Load the NVIDIA kernel modules first (`modprobe`).
    #[arg(long, env = "LOAD_KERNEL_MODULES", value_parser = boolish(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    load_kernel_modules: bool,
    /// Ours: the procfs to read `devices` from.
    #[arg(long, default_value = "/proc")]
    proc_root: PathBuf,
    /// Print what would be created.
    #[arg(long, env = "DRY_RUN", value_parser = boolish(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    dry_run: bool,
}

#[derive(Args, Debug)]
struct LinksArgs {
    /// The directory of the links (under the device root).
    #[arg(long, default_value = "/dev/char", env = "DEV_CHAR_PATH")]
    dev_char_path: PathBuf,
    /// The driver root (default `/`; also $NVIDIA_DRIVER_ROOT or $DRIVER_ROOT, as upstream);
    /// the nodes are looked for under --dev-root, which defaults to it.
    #[arg(long, visible_alias = "root")]
    driver_root: Option<PathBuf>,
    /// Where `dev/` is; default: the driver root.
    #[arg(long, env = "NVIDIA_CTK_DEV_ROOT")]
    dev_root: Option<PathBuf>,
    /// Also link the nodes the driver will create (control nodes, one per GPU in
    /// /proc/driver/nvidia/gpus) even where they do not exist yet.
    #[arg(long, env = "CREATE_ALL", value_parser = boolish(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    create_all: bool,
    /// Create the control device nodes first.
    #[arg(long, env = "CREATE_DEVICE_NODES", value_parser = boolish(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    create_device_nodes: bool,
    /// Load the NVIDIA kernel modules first (`modprobe`).
    #[arg(long, env = "LOAD_KERNEL_MODULES", value_parser = boolish(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    load_kernel_modules: bool,
    /// Not supported: run this command from the nvidia-cdi-refresh.path unit or a udev rule.
    #[arg(long, hide = true, env = "WATCH", value_parser = boolish(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    watch: bool,
    /// Ours: the procfs to read `devices` and `driver/nvidia` from.
    #[arg(long, default_value = "/proc")]
    proc_root: PathBuf,
    /// Print what would be created.
    #[arg(long, env = "DRY_RUN", value_parser = boolish(), num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false")]
    dry_run: bool,
}

/// The driver root: the flag, else `$NVIDIA_DRIVER_ROOT`, `$DRIVER_ROOT` (upstream's names),
/// `$NVIDIA_CTK_DRIVER_ROOT` (ours), else `/`. A root that is not a directory is refused by
/// name (a typo must not surface as a missing `/dev/nvidiactl`).
fn driver_root(flag: Option<PathBuf>, lookup: impl Fn(&str) -> Option<String>) -> Result<PathBuf> {
    let (root, from) = match flag {
        Some(p) => (p, "--driver-root".to_string()),
        None => [
            "NVIDIA_DRIVER_ROOT",
            "DRIVER_ROOT",
            "NVIDIA_CTK_DRIVER_ROOT",
        ]
        .into_iter()
        .find_map(|k| {
            lookup(k)
                .filter(|v| !v.is_empty())
                .map(|v| (PathBuf::from(v), format!("${k}")))
        })
        .unwrap_or_else(|| (PathBuf::from("/"), "the default".to_string())),
    };
    if !root.is_dir() {
        bail!(
            "the driver root {} ({from}) is not a directory: no such directory; give the directory the driver is installed under (`/` for a driver on the host, `/run/nvidia/driver` for the GPU Operator's driver container)",
            root.display()
        );
    }
    Ok(root)
}

pub fn run(args: SystemArgs, v: Verbosity) -> Result<()> {
    match args.command {
        SystemCommand::CreateDeviceNodes(a) => create_device_nodes(a, v),
        SystemCommand::CreateDevCharSymlinks(a) => create_links(a, v),
        SystemCommand::LabelNode(a) => label_node(a, v),
    }
}

fn load_modules() -> Result<()> {
    for module in ["nvidia", "nvidia-uvm", "nvidia-modeset"] {
        let status = std::process::Command::new("modprobe")
            .arg(module)
            .status()
            .context("cannot run modprobe (is kmod installed?)")?;
        if !status.success() {
            bail!("`modprobe {module}` failed ({status}): is the NVIDIA driver installed for this kernel?");
        }
    }
    Ok(())
}

fn report(done: &[Done], v: Verbosity) {
    if !v.quiet && done.iter().all(|d| matches!(d, Done::Present(_))) {
        println!("nothing to create: all {} present", done.len());
    }
    for d in done {
        match d {
            Done::Created(p) if !v.quiet => println!("created {}", p.display()),
            Done::WouldCreate(p) => println!("would create {}", p.display()),
            Done::Present(p) if v.debug => eprintln!("present: {}", p.display()),
            _ => {}
        }
    }
}

fn create_device_nodes(a: NodesArgs, v: Verbosity) -> Result<()> {
    if !a.control_devices {
        if !v.quiet {
            eprintln!("nvidia-ctk: nothing to do: give --control-devices to create the control device nodes");
        }
        return Ok(());
    }
    if a.load_kernel_modules && !a.dry_run {
        load_modules()?;
    }
    let driver_root = driver_root(a.driver_root, |k| std::env::var(k).ok())?;
    let dev_root = a.dev_root.unwrap_or(driver_root);
    existing_root("--dev-root", &dev_root)?;
    let root = DriverRoot::new("/", &dev_root, &a.proc_root);
    let majors = system::read_majors(&root)?;
    let nodes = system::control_nodes(&majors, &root.proc_path("devices"))?;
    let done = system::create_nodes(&root, &nodes, a.dry_run)?;
    report(&done, v);
    Ok(())
}

/// Refuses a root given on the command line that is not an existing directory: a typo
/// (`--dev-root=/opt/typo`) would otherwise have its `dev/` created and nodes made there.
fn existing_root(flag: &str, root: &std::path::Path) -> Result<()> {
    if !root.is_dir() {
        bail!(
            "{flag} {}: no such directory (the root whose dev/ holds the NVIDIA nodes: / for a \
             driver on the host, /run/nvidia/driver for the GPU Operator's driver container); \
             nothing was created",
            root.display()
        );
    }
    Ok(())
}

fn create_links(a: LinksArgs, v: Verbosity) -> Result<()> {
    if a.watch {
        bail!("--watch is not supported: run `nvidia-ctk system create-dev-char-symlinks --create-all` from the nvidia-cdi-refresh.path unit or a udev rule when the driver changes");
    }
    if a.dev_char_path != std::path::Path::new("/dev/char") {
        bail!(
            "--dev-char-path {}: only /dev/char (under --dev-root) is supported: systemd looks for the links there",
            a.dev_char_path.display()
        );
    }
    if a.load_kernel_modules && !a.dry_run {
        load_modules()?;
    }
    let driver_root = driver_root(a.driver_root, |k| std::env::var(k).ok())?;
    let dev_root = a.dev_root.clone().unwrap_or_else(|| driver_root.clone());
    existing_root("--dev-root", &dev_root)?;
    let root = DriverRoot::new(&driver_root, &dev_root, &a.proc_root);
    let mut nodes = system::present_nodes(&root);
    if a.create_all || a.create_device_nodes {
        let majors = system::read_majors(&root)?;
        let proc_devices = root.proc_path("devices");
        let mut wanted = system::control_nodes(&majors, &proc_devices)?;
        let gpus = nvct_host::devices::gpus_from_proc(&root)?;
        wanted.extend(system::gpu_nodes(&majors, &gpus, &proc_devices)?);
        if a.create_device_nodes {
            let control = system::control_nodes(&majors, &proc_devices)?;
            report(&system::create_nodes(&root, &control, a.dry_run)?, v);
        }
        if a.create_all {
            nodes.extend(wanted.into_iter().map(|n| (n.path, n.major, n.minor)));
        }
    }
    let links = system::char_links(&nodes);
    if links.is_empty() {
        bail!(
            "no NVIDIA device nodes under {}/dev: load the driver, or give --create-all",
            dev_root.display()
        );
    }
    report(&system::create_char_links(&root, &links, a.dry_run)?, v);
    Ok(())
}

fn label_node(a: LabelArgs, v: Verbosity) -> Result<()> {
    let path = a.config.unwrap_or_else(|| crate::toolkit_config(None));
    let config = nvct_formats::config::Config::load(&path)?;
    let inv = nvct_host::discover::discover(&config.driver())?;
    let text = nvct_host::labels::feature_file(&nvct_host::labels::labels(&inv));
    if a.output == std::path::Path::new("-") {
        print!("{text}");
        return Ok(());
    }
    nvct_formats::fsutil::write_atomic(&a.output, text.as_bytes(), &Default::default())?;
    if !v.quiet {
        println!("wrote {}", a.output.display());
    }
    Ok(())
}
