//! `nvidia-ctk cdi generate|list|validate`: raw clap values are resolved into typed options
//! (`generate`'s by `nvct::flags::cdi_generate`), then the library does the work (`nvct_cdi`):
//! discover → pure generate → one atomic write
//! (mode 0644) or stdout; list spec directories; validate one spec file (exit 1 on problems).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nvct::flags::cdi_generate::{self as generate_flags, GenerateFlags};
use nvct_cdi::{self as cdi, list, validate, Format};
use nvct_formats::fsutil::{self, WriteOptions};

use crate::Verbosity;

#[derive(Args, Debug)]
pub struct CdiArgs {
    #[command(subcommand)]
    command: CdiCommand,
}

#[derive(Subcommand, Debug)]
enum CdiCommand {
    /// Write a CDI spec for the GPUs of this host.
    Generate(Box<GenerateArgs>),
    /// Print the qualified names of the CDI devices in the spec directories.
    List(ListArgs),
    /// Check a CDI spec file; exit 1 naming each field at fault.
    Validate(ValidateArgs),
    /// Rewrite a CDI spec (`transform root`: its paths from one root to another).
    #[command(subcommand)]
    Transform(TransformCommand),
}

#[derive(Subcommand, Debug)]
enum TransformCommand {
    /// Move the spec's paths from the root --from to the root --to (e.g. a spec generated in a
    /// driver container, whose paths must be the host's).
    Root(RootArgs),
}

#[derive(Args, Debug)]
struct RootArgs {
    /// The root to replace.
    #[arg(long)]
    from: String,
    /// Its replacement (the same as --from: nothing changes).
    #[arg(long, default_value = "")]
    to: String,
    /// The spec to read; "-" is stdin.
    #[arg(long, default_value = "-")]
    input: String,
    /// Where to write the result (atomically, mode 0644); stdout when empty.
    #[arg(long, default_value = "")]
    output: String,
    /// Which paths move: host (host paths, hooks run on the host) or container.
    #[arg(long, default_value = "host")]
    relative_to: String,
}

/// `cdi generate` flags exactly as typed. Each also reads upstream's environment variable (what
/// the nvidia-cdi-refresh unit and its env file set); a flag on the command line wins over its
/// variable, and an empty variable counts as unset. List variables are comma-separated.
#[derive(Args, Debug)]
struct GenerateArgs {
    /// File to write (atomically, mode 0644); stdout when empty.
    #[arg(long, env = "NVIDIA_CTK_CDI_OUTPUT_FILE_PATH", default_value = "")]
    output: String,
    /// yaml or json; default: from the --output extension, else yaml.
    #[arg(long, env = "NVIDIA_CTK_CDI_GENERATE_OUTPUT_FORMAT")]
    format: Option<String>,
    /// Where the driver's files are (`/`, or `/run/nvidia/driver` with a containerised driver);
    /// default: the toolkit config's `nvidia-container-cli.root`, else `/`.
    #[arg(long, env = "NVIDIA_CTK_DRIVER_ROOT")]
    driver_root: Option<String>,
    /// Where `dev/nvidia*` are; default: the config's `dev-root`, else the driver root.
    #[arg(long, env = "NVIDIA_CTK_DEV_ROOT")]
    dev_root: Option<String>,
    /// procfs to read `driver/nvidia` and `devices` from; default: the config's `proc-root`,
    /// else /proc.
    #[arg(long)]
    proc_root: Option<PathBuf>,
    /// index, uuid or type-index (repeatable, or a comma list; default: index and uuid).
    #[arg(
        long = "device-name-strategy",
        env = "NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES",
        value_delimiter = ','
    )]
    device_name_strategy: Vec<String>,
    /// The vendor half of the spec's kind (`vendor/class`) [default: nvidia.com;
    /// management.nvidia.com with --mode management].
    #[arg(
        long,
        alias = "cdi-vendor",
        env = "NVIDIA_CTK_CDI_GENERATE_VENDOR",
        default_value = ""
    )]
    vendor: String,
    /// The class half of the spec's kind (`vendor/class`) [default: gpu; imex-channel with
    /// --mode imex].
    #[arg(
        long,
        alias = "cdi-class",
        env = "NVIDIA_CTK_CDI_GENERATE_CLASS",
        default_value = ""
    )]
    class: String,
    /// The nvidia-cdi-hook the spec's hooks run.
    #[arg(
        long,
        alias = "nvidia-ctk-path",
        env = "NVIDIA_CTK_CDI_HOOK_PATH",
        default_value = nvct_inject::generate::DEFAULT_HOOK_PATH
    )]
    nvidia_cdi_hook_path: String,
    /// ldconfig for the update-ldcache hook (passed as --ldconfig-path when given).
    #[arg(long, env = "NVIDIA_CTK_CDI_GENERATE_LDCONFIG_PATH")]
    ldconfig_path: Option<String>,
    #[arg(
        help = format!(
            "A hook to leave out: {} or all (repeatable, or a comma list)",
            nvct_container::edits::HookKind::names()
        ),
        long = "disable-hook",
        alias = "disable-hooks",
        env = "NVIDIA_CTK_CDI_GENERATE_DISABLED_HOOKS",
        value_delimiter = ','
    )]
    disable_hook: Vec<String>,
    /// A hook to keep even when --disable-hook names it (repeatable, or a comma list; `all` is
    /// refused, as upstream).
    #[arg(
        long = "enable-hook",
        alias = "enable-hooks",
        env = "NVIDIA_CTK_CDI_GENERATE_ENABLED_HOOKS",
        value_delimiter = ','
    )]
    enable_hook: Vec<String>,
    /// Upstream's spec generator feature flags (repeatable, or a comma list):
    /// disable-ipc-discoverer leaves out the IPC sockets; the others upstream knows are
    /// accepted and change nothing here (docs/COMPAT.md).
    #[arg(
        long = "feature-flag",
        alias = "feature-flags",
        env = "NVIDIA_CTK_CDI_GENERATE_FEATURE_FLAGS",
        value_delimiter = ','
    )]
    feature_flag: Vec<String>,
    /// Devices to include: all, or ids (index, i:j, GPU-/MIG- uuid, PCI bus id); repeatable,
    /// comma lists accepted.
    #[arg(
        long = "device-id",
        aliases = ["device-ids", "device", "devices"],
        env = "NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS",
        value_delimiter = ','
    )]
    device_id: Vec<String>,
    /// Leave out the `all` device.
    #[arg(long, env = "NVIDIA_CTK_CDI_GENERATE_NO_ALL_DEVICE", action = clap::ArgAction::Set,
          num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    no_all_device: bool,
    /// Ours: one hook entry per edit, with upstream's hook names (create-symlinks,
    /// update-ldcache, ...), for a hook binary that has no `apply-edits` (upstream's
    /// nvidia-cdi-hook). By default the spec names one `apply-edits` hook that makes every edit
    /// in one process.
    #[arg(long)]
    separate_hooks: bool,
    /// What to describe: auto or nvml (the GPUs; the same here: NVML, else
    /// /proc/driver/nvidia), or imex (the IMEX channels, kind nvidia.com/imex-channel);
    /// upstream's other modes are refused by name.
    #[arg(
        long,
        alias = "discovery-mode",
        env = "NVIDIA_CTK_CDI_GENERATE_MODE",
        default_value = "auto"
    )]
    mode: String,
    /// Upstream's CSV-mode (Tegra) flags: refused by name.
    #[arg(long = "csv.file", hide = true)]
    csv_file: Vec<String>,
    #[arg(long = "csv.ignore-pattern", hide = true)]
    csv_ignore_pattern: Vec<String>,
    #[arg(long = "library-search-path", hide = true)]
    library_search_path: Vec<String>,
}

#[derive(Args, Debug)]
struct ListArgs {
    /// A spec directory (repeatable; default /etc/cdi and /var/run/cdi).
    #[arg(long = "spec-dir")]
    spec_dir: Vec<PathBuf>,
    /// text (one name per line), wide (name and the spec file it comes from, tab-separated) or
    /// json (an array of names).
    #[arg(long, default_value = "text")]
    format: String,
}

#[derive(Args, Debug)]
struct ValidateArgs {
    /// The spec file (YAML or JSON).
    file: PathBuf,
}

impl GenerateArgs {
    /// The values as typed, for [`generate_flags::resolve`].
    fn flags(self) -> GenerateFlags {
        GenerateFlags {
            output: self.output,
            format: self.format,
            driver_root: self.driver_root,
            dev_root: self.dev_root,
            proc_root: self.proc_root,
            device_name_strategy: self.device_name_strategy,
            vendor: self.vendor,
            class: self.class,
            nvidia_cdi_hook_path: self.nvidia_cdi_hook_path,
            ldconfig_path: self.ldconfig_path,
            disable_hook: self.disable_hook,
            enable_hook: self.enable_hook,
            feature_flag: self.feature_flag,
            device_id: self.device_id,
            no_all_device: self.no_all_device,
            separate_hooks: self.separate_hooks,
            mode: self.mode,
            csv_file: self.csv_file,
            csv_ignore_pattern: self.csv_ignore_pattern,
            library_search_path: self.library_search_path,
            systemd_booted: nvct_container::cgroup::systemd::booted(),
        }
    }
}

/// The toolkit config `cdi generate` takes its roots from when they are not given.
fn load_toolkit_config() -> Result<nvct_formats::config::Config, generate_flags::FlagError> {
    let path = crate::toolkit_config(None);
    nvct_formats::config::Config::load(&path)
        .map_err(|source| generate_flags::FlagError::Config { path, source })
}

/// A character device or a FIFO (`/dev/null`, `/dev/stdout`): written through as named.
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

fn generate(raw: GenerateArgs, v: Verbosity) -> Result<()> {
    let g = generate_flags::resolve(raw.flags(), load_toolkit_config, is_special)?;
    if v.debug {
        eprintln!("nvidia-ctk: {}", g.describe());
    }
    let inv = nvct_host::discover::discover_for_spec(&g.root)?;
    if v.debug {
        for note in &inv.notes {
            eprintln!("nvidia-ctk: note: {note}");
        }
    }
    let spec = nvct_inject::generate::generate(&inv, &g.opts)?;
    let text = spec.encode(g.format)?;
    let written = write_spec(g.output.as_deref(), &text)?;
    if let (Some(path), false) = (written, v.quiet) {
        eprintln!(
            "nvidia-ctk: wrote {} ({} devices)",
            path.display(),
            spec.devices.len()
        );
    }
    Ok(())
}

/// A spec is public data: 0644 even when it replaces a file with another mode.
fn set_mode_0644(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                " (the spec belongs to another user: run as root, as the refresh unit does)"
            }
            _ => "",
        };
        anyhow::anyhow!(
            "cannot make {} readable by all (chmod 0644){hint}: {e}",
            path.display()
        )
    })
}

fn list_specs(raw: ListArgs, v: Verbosity) -> Result<()> {
    #[derive(PartialEq)]
    enum Out {
        Text,
        Wide,
        Json,
    }
    let format = match raw.format.as_str() {
        "text" => Out::Text,
        "wide" => Out::Wide,
        "json" => Out::Json,
        other => bail!("--format {other:?}: expected text, wide or json"),
    };
    let dirs = if raw.spec_dir.is_empty() {
        list::DEFAULT_SPEC_DIRS.iter().map(PathBuf::from).collect()
    } else {
        raw.spec_dir
    };
    let listing = list::list(&dirs);
    if !v.quiet {
        for w in &listing.warnings {
            eprintln!("nvidia-ctk: warning: {w}");
        }
        for s in &listing.shadowed {
            eprintln!("nvidia-ctk: {s}");
        }
        // Which file each device comes from, per file (`--format wide`: per device).
        let mut files: Vec<(&Path, usize)> = Vec::new();
        for (_, file) in &listing.names {
            match files.iter_mut().find(|(f, _)| *f == file.as_path()) {
                Some((_, n)) => *n += 1,
                None => files.push((file, 1)),
            }
        }
        for (file, n) in files {
            eprintln!("nvidia-ctk: {n} CDI devices from {}", file.display());
        }
    }
    let names: Vec<String> = listing.names.iter().map(|(n, _)| n.to_string()).collect();
    if !v.quiet {
        let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        eprintln!(
            "nvidia-ctk: {} CDI devices in {}{}",
            names.len(),
            searched.join(", "),
            if names.is_empty() {
                " (`nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml` writes a spec)"
            } else {
                ""
            }
        );
    }
    let mut out = std::io::stdout().lock();
    match format {
        Out::Json => writeln!(out, "{}", serde_json::to_string(&names)?)?,
        Out::Text => {
            for n in names {
                writeln!(out, "{n}")?;
            }
        }
        Out::Wide => {
            for (n, file) in &listing.names {
                writeln!(out, "{n}\t{}", file.display())?;
            }
        }
    }
    Ok(())
}

fn validate_file(raw: ValidateArgs, v: Verbosity) -> Result<()> {
    let text = list::read_text(&raw.file)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", raw.file.display()))?;
    match validate::validate_text(&text) {
        Ok(spec) => {
            if !v.quiet {
                println!(
                    "{}: valid CDI {} spec, kind {}, {} devices",
                    raw.file.display(),
                    spec.cdi_version,
                    spec.kind,
                    spec.devices.len()
                );
            }
            Ok(())
        }
        Err(problems) => {
            for p in &problems {
                eprintln!("{}: {p}", raw.file.display());
            }
            bail!(
                "{} is not a valid CDI spec ({} problem(s))",
                raw.file.display(),
                problems.len()
            )
        }
    }
}

fn transform_root(raw: RootArgs, v: Verbosity) -> Result<()> {
    let rel = cdi::transform::RelativeTo::parse(&raw.relative_to).with_context(|| {
        format!(
            "--relative-to {:?}: expected host or container",
            raw.relative_to
        )
    })?;
    for (flag, value) in [("--from", &raw.from), ("--to", &raw.to)] {
        if !value.is_empty() && !value.starts_with('/') {
            bail!("{flag} {value:?}: a root is an absolute path");
        }
    }
    if raw.from.is_empty() {
        bail!("--from: the root to replace is required (e.g. --from /driver-root)");
    }
    let text = if raw.input == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut t)
            .context("reading the spec from stdin")?;
        t
    } else {
        list::read_text(Path::new(&raw.input))
            .map_err(|e| anyhow::anyhow!("reading --input {}: {e}", raw.input))?
    };
    let mut spec = cdi::spec::parse_value(&text)
        .with_context(|| format!("--input {}: not a YAML or JSON document", raw.input))?;
    if !spec.is_object() {
        bail!(
            "--input {}: not a CDI spec (the document is not a mapping)",
            raw.input
        );
    }
    cdi::transform::root(&mut spec, &raw.from, &raw.to, rel);
    let output = (!raw.output.is_empty()).then(|| PathBuf::from(&raw.output));
    let format = output
        .as_deref()
        .and_then(Format::from_path)
        .unwrap_or(Format::Yaml);
    let output = output.map(|p| {
        let special = is_special(&p);
        generate_flags::spec_file_name(p, format, special)
    });
    let text = match format {
        Format::Json => serde_json::to_string_pretty(&spec)? + "\n",
        Format::Yaml => serde_norway::to_string(&spec)?,
    };
    let written = write_spec(output.as_deref(), &text)?;
    if let (Some(path), false) = (written, v.quiet) {
        eprintln!("nvidia-ctk: wrote {}", path.display());
    }
    Ok(())
}

/// Writes a spec's text to `output` (atomically, mode 0644; a device or FIFO written through,
/// its mode untouched), or to stdout when `None`; returns the file written.
fn write_spec<'a>(output: Option<&'a Path>, text: &str) -> Result<Option<&'a Path>> {
    match output {
        None => std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("writing the spec to stdout")?,
        Some(path) => {
            let written = fsutil::write_atomic(path, text.as_bytes(), &WriteOptions::default())
                .with_context(|| format!("--output {}", path.display()))?;
            if written != fsutil::Written::Through {
                set_mode_0644(path)?;
            }
        }
    }
    Ok(output)
}

pub fn run(args: CdiArgs, v: Verbosity) -> Result<()> {
    match args.command {
        CdiCommand::Generate(a) => generate(*a, v),
        CdiCommand::List(a) => list_specs(a, v),
        CdiCommand::Validate(a) => validate_file(a, v),
        CdiCommand::Transform(TransformCommand::Root(a)) => transform_root(a, v),
    }
}
