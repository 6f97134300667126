//! `FakeHost`: builds a GPU host without a GPU, for tests and for `examples/fake_host.rs`.
//!
//! Owns: one directory laid out as a real NVIDIA host looks from the toolkit's side — a driver
//! root (`DIR/driver`) with stub libraries that carry real SONAMEs (64-bit, and 32-bit ones in
//! the i386 dir for compat32), the fake NVML, an
//! `etc/ld.so.cache` made by the host's real `ldconfig`, utility scripts, firmware and real
//! character device nodes under `DIR/driver/dev`; a procfs copy (`DIR/proc`) in the real
//! formats; and the fake NVML's topology (`DIR/fake-nvml.json`, also next to the library).
//! Everything is derived from the GPU index, so two builds of the same shape are identical.
//!
//! Must not: touch anything outside DIR. Needs root (mknod), `gcc` and `/sbin/ldconfig`, and the
//! fake NVML built by `cargo build --examples`; each missing piece is a clear error, never a skip.

#![allow(dead_code)]

use nvct_host::discover::{Gpu, MigDevice};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Library directory inside the driver root in the default (Debian x86-64) layout.
pub const LIB_DIR: &str = "usr/lib/x86_64-linux-gnu";

/// The library layout of the simulated host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibLayout {
    /// Debian / Ubuntu x86-64: `usr/lib/x86_64-linux-gnu`, cache flags `libc6,x86-64`.
    DebianX86_64,
    /// RHEL / Fedora: `usr/lib64`.
    Rhel,
    /// Debian / Ubuntu on aarch64 (Grace GH200/GB200 nodes): `usr/lib/aarch64-linux-gnu`, and
    /// the ld.so.cache entries carry the AArch64 flags (`0x0a03`; the stubs themselves are
    /// built for this machine, only the cache says aarch64).
    DebianAarch64,
}

impl LibLayout {
    pub fn lib_dir(self) -> &'static str {
        match self {
            LibLayout::DebianX86_64 => LIB_DIR,
            LibLayout::Rhel => "usr/lib64",
            LibLayout::DebianAarch64 => "usr/lib/aarch64-linux-gnu",
        }
    }

    /// Where the driver's 32-bit (compat32) libraries are: Debian's i386 multiarch dir,
    /// RHEL's `usr/lib`; none on aarch64 (the driver has no 32-bit libraries there).
    pub fn lib32_dir(self) -> Option<&'static str> {
        match self {
            LibLayout::DebianX86_64 => Some(LIB32_DIR),
            LibLayout::Rhel => Some("usr/lib"),
            LibLayout::DebianAarch64 => None,
        }
    }
}

/// The 32-bit library directory inside the driver root in the default layout.
pub const LIB32_DIR: &str = "usr/lib/i386-linux-gnu";

/// 32-bit (i386) stub libraries: (name, SONAME version), as [`STUB_LIBS`]. Each is an
/// ELFCLASS32 EM_386 shared object with its SONAME and a `DT_NEEDED` of `libc.so.6`, so the
/// real ldconfig lists it as `libc6` (flags `0x0003`), as the driver's own 32-bit libraries.
pub const STUB_LIBS32: &[(&str, &str)] = &[
    ("libcuda", "1"),
    ("libnvidia-ml", "1"),
    ("libnvidia-glcore", "1"),
    ("libGLX_nvidia", "0"),
    ("libEGL_nvidia", "0"),
];
pub const DEFAULT_DRIVER_VERSION: &str = "550.54.15";
/// What the stub `cuDriverGetVersion` and the fake NVML report (CUDA 12.4).
pub const CUDA_VERSION: i32 = 12040;
pub const MODEL: &str = "NVIDIA H100 80GB HBM3";
/// The compute capability every GPU reports unless the builder says otherwise (an H100's).
pub const COMPUTE_CAPABILITY: &str = "9.0";
/// `pciDeviceId` of an H100 SXM5 80GB (device 0x2330, vendor 0x10de).
const PCI_DEVICE_ID: u32 = 0x2330_10de;
const MEMORY_TOTAL: u64 = 85_520_809_984;

/// Character-device majors as `/proc/devices` of the fake host lists them.
pub const NVIDIA_MAJOR: u32 = 195;
pub const NVIDIA_UVM_MAJOR: u32 = 508;
pub const NVIDIA_CAPS_MAJOR: u32 = 509;
pub const NVIDIA_IMEX_MAJOR: u32 = 510;
/// The DRM major (`/dev/dri/card*`, `/dev/dri/renderD*`).
pub const DRM_MAJOR: u32 = 226;
/// IMEX channel nodes the host has (`/dev/nvidia-caps-imex-channels/channel0`, ...).
pub const IMEX_CHANNELS: u32 = 2;

/// Stub driver libraries: (name, SONAME version). Files are `<name>.so.<driver version>`.
const STUB_LIBS: &[(&str, &str)] = &[
    ("libcuda", "1"),
    ("libcudadebugger", "1"),
    ("libnvidia-ptxjitcompiler", "1"),
    ("libnvidia-nvvm", "1"),
    ("libnvidia-opencl", "1"),
    ("libnvidia-gpucomp", "1"),
    ("libnvidia-allocator", "1"),
    ("libnvidia-cfg", "1"),
    ("libnvidia-nscq", "1"),
    ("libnvidia-encode", "1"),
    ("libnvcuvid", "1"),
    ("libnvidia-eglcore", "1"),
    ("libnvidia-glcore", "1"),
    ("libGLX_nvidia", "0"),
    ("libEGL_nvidia", "0"),
];

/// The driver's VDPAU backend, in `vdpau/` under the lib dir as the driver installs it:
/// (name, SONAME version), the file `vdpau/<name>.so.<driver version>`.
pub const STUB_VDPAU_LIB: (&str, &str) = ("libvdpau_nvidia", "1");

/// Stub libraries versioned apart from the driver: (name, file version, SONAME version), the
/// file `<name>.so.<file version>` (the EGL external platforms).
pub const STUB_OWN_VERSION_LIBS: &[(&str, &str, &str)] = &[
    ("libnvidia-egl-gbm", "1.1.1", "1"),
    ("libnvidia-egl-wayland", "1.1.13", "1"),
];

const BINARIES: &[&str] = &[
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
    "nvidia-xconfig",
];

/// One device node the fake host created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceNode {
    /// Absolute path on this machine, e.g. `DIR/driver/dev/nvidia0`.
    pub path: PathBuf,
    pub major: u32,
    pub minor: u32,
}

#[derive(Debug, Clone)]
pub struct FakeHostBuilder {
    gpus: u32,
    mig: bool,
    driver_version: String,
    layout: LibLayout,
    /// Per GPU index, a compute capability other than [`COMPUTE_CAPABILITY`].
    compute_capabilities: Vec<(u32, String)>,
}

/// A built fake host; see the module doc for the layout.
#[derive(Debug, Clone)]
pub struct FakeHost {
    dir: PathBuf,
    layout: LibLayout,
    driver_version: String,
    gpus: Vec<Gpu>,
    device_nodes: Vec<DeviceNode>,
}

impl FakeHost {
    pub fn builder() -> FakeHostBuilder {
        FakeHostBuilder {
            gpus: 1,
            mig: false,
            driver_version: DEFAULT_DRIVER_VERSION.to_owned(),
            layout: LibLayout::DebianX86_64,
            compute_capabilities: Vec::new(),
        }
    }

    /// The directory the host was built in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `DIR/driver`: where libraries, binaries and firmware live (the host's `/`).
    pub fn driver_root(&self) -> PathBuf {
        self.dir.join("driver")
    }

    /// The root under which `dev/` lives: the driver root, as on a host whose driver root is `/`.
    pub fn dev_root(&self) -> PathBuf {
        self.driver_root()
    }

    /// `DIR/proc`: the host's `/proc` (only the parts the toolkit reads).
    pub fn proc_root(&self) -> PathBuf {
        self.dir.join("proc")
    }

    /// `DIR/sys`: the host's `/sys` (each GPU's `bus/pci/devices/<bus id>/drm/` entries), which
    /// the toolkit reads beside the procfs root (`<proc root>/../sys`).
    pub fn sys_root(&self) -> PathBuf {
        self.dir.join("sys")
    }

    /// GPU `index`'s DRM node names: `card<index + 1>` (card0 is left to a BMC's display, as
    /// on many servers) and `renderD<128 + index>`.
    pub fn drm_names(index: u32) -> (String, String) {
        (
            format!("card{}", index + 1),
            format!("renderD{}", 128 + index),
        )
    }

    /// `DIR/fake-nvml.json`: the fake NVML's topology.
    pub fn nvml_config(&self) -> PathBuf {
        self.dir.join("fake-nvml.json")
    }

    /// `DIR/driver/<the layout's lib dir>` (`usr/lib/x86_64-linux-gnu` by default).
    pub fn lib_dir(&self) -> PathBuf {
        self.driver_root().join(self.layout.lib_dir())
    }

    /// `DIR/driver/<the layout's 32-bit lib dir>` (`usr/lib/i386-linux-gnu` by default).
    pub fn lib32_dir(&self) -> Option<PathBuf> {
        self.layout.lib32_dir().map(|d| self.driver_root().join(d))
    }

    pub fn layout(&self) -> LibLayout {
        self.layout
    }

    /// The fake NVML through its SONAME link: `<lib dir>/libnvidia-ml.so.1`.
    pub fn nvml_lib(&self) -> PathBuf {
        self.lib_dir().join("libnvidia-ml.so.1")
    }

    pub fn driver_version(&self) -> &str {
        &self.driver_version
    }

    /// The GPUs, by index, exactly as NVML and `/proc/driver/nvidia` describe them.
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// Every device node created, in creation order.
    pub fn device_nodes(&self) -> &[DeviceNode] {
        &self.device_nodes
    }
}

impl FakeHostBuilder {
    /// Number of GPUs, 0 (a node whose GPUs are gone: driver loaded, no device) to 64.
    pub fn gpus(mut self, count: u32) -> Self {
        self.gpus = count;
        self
    }

    /// With MIG, GPU 0 has MIG enabled with two MIG devices (gi 1/ci 0 and gi 2/ci 0), and
    /// `proc/driver/nvidia/capabilities/` has their `gpu0/mig/giG/access` and
    /// `giG/ciC/access` files and `mig/config`, `mig/monitor`.
    pub fn mig(mut self, enabled: bool) -> Self {
        self.mig = enabled;
        self
    }

    pub fn driver_version(mut self, version: &str) -> Self {
        self.driver_version = version.to_owned();
        self
    }

    pub fn layout(mut self, layout: LibLayout) -> Self {
        self.layout = layout;
        self
    }

    /// GPU `index` reports compute capability `cc` (`8.0`: an A100) instead of
    /// [`COMPUTE_CAPABILITY`], for a host with GPUs of mixed generations.
    pub fn compute_capability(mut self, index: u32, cc: &str) -> Self {
        self.compute_capabilities.retain(|(i, _)| *i != index);
        self.compute_capabilities.push((index, cc.to_owned()));
        self
    }

    /// Creates the host in `dir` (which may exist; it should be empty).
    pub fn build(self, dir: &Path) -> io::Result<FakeHost> {
        if !(0..=64).contains(&self.gpus) {
            return Err(invalid(format!(
                "FakeHost supports 0 to 64 GPUs, not {}",
                self.gpus
            )));
        }
        if self.driver_version.is_empty() || self.driver_version.contains('/') {
            return Err(invalid(format!(
                "bad driver version {:?}",
                self.driver_version
            )));
        }
        if nvct_sys::euid() != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "FakeHost must run as root: it creates device nodes with mknod",
            ));
        }
        let fake_nvml = fake_nvml_library()?;
        let mut host = FakeHost {
            dir: dir.to_owned(),
            layout: self.layout,
            driver_version: self.driver_version.clone(),
            gpus: (0..self.gpus)
                .map(|i| {
                    let mut g = gpu(i, self.mig && i == 0);
                    if let Some((_, cc)) = self.compute_capabilities.iter().find(|(j, _)| *j == i) {
                        g.compute_capability = Some(cc.clone());
                    }
                    g
                })
                .collect(),
            device_nodes: Vec::new(),
        };
        write_libraries(&host, &fake_nvml)?;
        write_binaries_and_firmware(&host)?;
        write_device_nodes(&mut host)?;
        write_drm(&host)?;
        write_proc(&host)?;
        let config = nvml_config_json(&host);
        write(&host.nvml_config(), &config)?;
        write(&host.lib_dir().join("fake-nvml.json"), &config)?;
        run_ldconfig(&host.driver_root())?;
        if host.layout == LibLayout::DebianAarch64 {
            retag_cache(&host.driver_root().join("etc/ld.so.cache"), 0x0303, 0x0a03)?;
        }
        Ok(host)
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// Adds what failed and on which path to an I/O error.
fn context(what: &str, path: &Path) -> impl FnOnce(io::Error) -> io::Error {
    let message = format!("{what} {}", path.display());
    move |e| io::Error::new(e.kind(), format!("{message}: {e}"))
}

fn write(path: &Path, contents: &str) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(context("cannot create directory", parent))?;
    }
    std::fs::write(path, contents).map_err(context("cannot write", path))
}

/// A deterministic 64-bit mix (splitmix64), so identifiers look random but never change.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn uuid_body(seed: u64) -> String {
    let (a, b) = (mix(seed), mix(seed ^ 0x5555_aaaa_5555_aaaa));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// PCI bus number of GPU `index`: increasing with the index, as NVML orders by PCI.
fn pci_bus(index: u32) -> u32 {
    0x18 + 3 * index
}

/// GPU `index`: minor = index, bus ids and UUIDs derived from the index.
fn gpu(index: u32, mig_enabled: bool) -> Gpu {
    let migs = if mig_enabled {
        (0..2u32)
            .map(|j| MigDevice {
                index: j,
                gi: j + 1,
                ci: 0,
                uuid: format!(
                    "MIG-{}",
                    uuid_body(0x1_0000 + u64::from(index) * 16 + u64::from(j))
                ),
            })
            .collect()
    } else {
        Vec::new()
    };
    Gpu {
        index,
        minor: index,
        uuid: format!("GPU-{}", uuid_body(u64::from(index))),
        bus_id: format!("0000:{:02x}:00.0", pci_bus(index)),
        model: MODEL.to_owned(),
        brand: "tesla".to_owned(),
        memory_mib: MEMORY_TOTAL / (1024 * 1024),
        persistence_mode: Some(true),
        compute_capability: Some(COMPUTE_CAPABILITY.to_owned()),
        mig_enabled,
        migs,
    }
}

/// Cap minors in `/proc/driver/nvidia-caps/mig-minors`: per GPU minor, 15 GPU instances of
/// one `access` minor plus 8 compute instances each, after `config 1` and `monitor 2`.
fn gi_cap_minor(gpu_minor: u32, gi: u32) -> u32 {
    3 + gpu_minor * 15 * 9 + gi * 9
}

fn ci_cap_minor(gpu_minor: u32, gi: u32, ci: u32) -> u32 {
    gi_cap_minor(gpu_minor, gi) + 1 + ci
}

/// `target/debug/libfake_nvml.so` (crates/fake-nvml), found from the running executable
/// (`target/debug/deps/<test>` or `target/debug/examples/<example>`).
fn fake_nvml_library() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(2) {
        for candidate in [
            dir.join("libfake_nvml.so"),
            dir.join("examples/libfake_nvml.so"),
        ] {
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "the fake NVML (libfake_nvml.so) is not built next to {}: run `cargo build --workspace` first",
            exe.display()
        ),
    ))
}

/// Compiles every stub library in parallel with gcc, then copies the fake NVML.
fn write_libraries(host: &FakeHost, fake_nvml: &Path) -> io::Result<()> {
    let lib_dir = host.lib_dir();
    std::fs::create_dir_all(&lib_dir).map_err(context("cannot create directory", &lib_dir))?;
    let mut conf = format!("/{}\n", host.layout.lib_dir());
    if let Some(dir) = host.layout.lib32_dir() {
        conf += &format!("/{dir}\n");
    }
    write(&host.driver_root().join("etc/ld.so.conf"), &conf)?;
    if let Some(dir) = host.lib32_dir() {
        write_libraries32(host, &dir)?;
    }

    let mut builds = Vec::new();
    let own_version = STUB_OWN_VERSION_LIBS
        .iter()
        .map(|(name, file, soname)| (*name, file.to_string(), *soname));
    let vdpau_dir = lib_dir.join("vdpau");
    std::fs::create_dir_all(&vdpau_dir).map_err(context("cannot create directory", &vdpau_dir))?;
    let (vdpau, vdpau_soname) = STUB_VDPAU_LIB;
    let stubs = STUB_LIBS
        .iter()
        .map(|(name, soname)| (*name, host.driver_version.clone(), *soname))
        .chain(own_version)
        .map(|stub| (&lib_dir, stub))
        .chain([(
            &vdpau_dir,
            (vdpau, host.driver_version.clone(), vdpau_soname),
        )]);
    for (dir, (name, file_version, soname_version)) in stubs {
        let output = dir.join(format!("{name}.so.{file_version}"));
        let soname = format!("{name}.so.{soname_version}");
        let source = if name == "libcuda" {
            format!("int cuDriverGetVersion(int *v) {{ if (!v) return 1; *v = {CUDA_VERSION}; return 0; }}\nint cuInit(unsigned flags) {{ (void)flags; return 0; }}\n")
        } else {
            format!(
                "int nvct_stub_{}(void) {{ return 0; }}\n",
                name.replace('-', "_")
            )
        };
        let soname_arg = format!("-Wl,-soname,{soname}");
        let out_arg = output.display().to_string();
        let args = [
            "-x",
            "c",
            "-",
            "-shared",
            "-fPIC",
            "-o",
            &out_arg,
            &soname_arg,
        ];
        let child = spawn_gcc(&args, &source, &output)?;
        builds.push((output, child));
    }
    for (output, child) in builds {
        wait_gcc(child, &output)?;
    }

    let nvml = lib_dir.join(format!("libnvidia-ml.so.{}", host.driver_version));
    std::fs::copy(fake_nvml, &nvml).map_err(context(
        &format!("cannot copy {} to", fake_nvml.display()),
        &nvml,
    ))?;
    Ok(())
}

/// Runs gcc with `args` and `source` on stdin, naming `output` in its errors.
fn gcc(args: &[&str], source: &str, output: &Path) -> io::Result<()> {
    wait_gcc(spawn_gcc(args, source, output)?, output)
}

/// Starts gcc with `args`, `source` written to its stdin.
fn spawn_gcc(args: &[&str], source: &str, output: &Path) -> io::Result<std::process::Child> {
    let mut child = Command::new("gcc")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot run gcc (is it installed?) to build {}: {e}",
                    output.display()
                ),
            )
        })?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(source.as_bytes())?;
    Ok(child)
}

/// Waits for a [`spawn_gcc`]; its stderr in the error when it failed.
fn wait_gcc(child: std::process::Child, output: &Path) -> io::Result<()> {
    let result = child.wait_with_output()?;
    if !result.status.success() {
        return Err(io::Error::other(format!(
            "gcc failed ({}) building {}: {}",
            result.status,
            output.display(),
            String::from_utf8_lossy(&result.stderr)
        )));
    }
    Ok(())
}

/// The 32-bit stubs of [`STUB_LIBS32`] in `dir`. Built with `gcc -m32 -nostdlib -shared`,
/// which needs no 32-bit C library or crt files (no gcc-multilib): the `DT_NEEDED` on
/// `libc.so.6` comes from a 32-bit stub `libc.so.6` linked against by path, built first in
/// `DIR/build32` (outside the driver root, so not in its cache).
fn write_libraries32(host: &FakeHost, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir).map_err(context("cannot create directory", dir))?;
    let build = host.dir.join("build32");
    std::fs::create_dir_all(&build).map_err(context("cannot create directory", &build))?;
    let libc = build.join("libc.so.6");
    let libc_arg = libc.display().to_string();
    gcc(
        &[
            "-m32",
            "-x",
            "c",
            "-",
            "-shared",
            "-nostdlib",
            "-fPIC",
            "-o",
            &libc_arg,
            "-Wl,-soname,libc.so.6",
        ],
        "int nvct_stub_libc(void) { return 0; }\n",
        &libc,
    )?;
    for (name, soname_version) in STUB_LIBS32 {
        let output = dir.join(format!("{name}.so.{}", host.driver_version));
        let out_arg = output.display().to_string();
        let soname = format!("-Wl,-soname,{name}.so.{soname_version}");
        let source = format!(
            "int nvct_stub32_{}(void) {{ return 32; }}\n",
            name.replace('-', "_")
        );
        gcc(
            &[
                "-m32",
                "-x",
                "c",
                "-",
                "-x",
                "none",
                "-shared",
                "-nostdlib",
                "-fPIC",
                "-o",
                &out_arg,
                &soname,
                "-Wl,--no-as-needed",
                &libc_arg,
            ],
            &source,
            &output,
        )?;
    }
    Ok(())
}

fn write_binaries_and_firmware(host: &FakeHost) -> io::Result<()> {
    let bin = host.driver_root().join("usr/bin");
    for name in BINARIES {
        let script = if *name == "nvidia-smi" {
            let list: String = host
                .gpus
                .iter()
                .map(|g| format!("GPU {}: {} (UUID: {})\n", g.index, g.model, g.uuid))
                .collect();
            format!(
                "#!/bin/sh\n# fake nvidia-smi written by FakeHost\nif [ \"$1\" = \"-L\" ]; then\ncat <<'EOF'\n{list}EOF\nexit 0\nfi\necho 'NVIDIA-SMI fake {ver}    Driver Version: {ver}    CUDA Version: 12.4'\n",
                ver = host.driver_version
            )
        } else {
            format!(
                "#!/bin/sh\n# fake {name} written by FakeHost\necho '{name} fake {}'\n",
                host.driver_version
            )
        };
        let path = bin.join(name);
        write(&path, &script)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(context("cannot chmod", &path))?;
    }
    let firmware = host
        .driver_root()
        .join("lib/firmware/nvidia")
        .join(&host.driver_version);
    for name in ["gsp_ga10x.bin", "gsp_tu10x.bin"] {
        write(&firmware.join(name), "fake GSP firmware\n")?;
    }
    // The graphics and display config files, where the driver's installer puts them.
    let ver = &host.driver_version;
    let configs = [
        (
            "usr/share/vulkan/icd.d/nvidia_icd.json",
            format!("{{\"file_format_version\": \"1.0.1\", \"ICD\": {{\"library_path\": \"libGLX_nvidia.so.0\", \"api_version\": \"1.3.277\"}}, \"fake\": \"{ver}\"}}\n"),
        ),
        (
            "usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
            format!("{{\"file_format_version\": \"1.0.1\", \"layer\": {{\"name\": \"VK_LAYER_NV_optimus\"}}, \"fake\": \"{ver}\"}}\n"),
        ),
        (
            "usr/share/glvnd/egl_vendor.d/10_nvidia.json",
            format!("{{\"file_format_version\": \"1.0.0\", \"ICD\": {{\"library_path\": \"libEGL_nvidia.so.0\"}}, \"fake\": \"{ver}\"}}\n"),
        ),
        (
            "usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json",
            format!("{{\"file_format_version\": \"1.0.0\", \"ICD\": {{\"library_path\": \"libnvidia-egl-gbm.so.1\"}}, \"fake\": \"{ver}\"}}\n"),
        ),
        (
            "usr/lib/xorg/modules/drivers/nvidia_drv.so",
            format!("fake Xorg driver {ver}\n"),
        ),
        ("usr/share/nvidia/nvoptix.bin", format!("fake OptiX weights {ver}\n")),
        (
            "usr/share/X11/xorg.conf.d/10-nvidia.conf",
            format!("Section \"OutputClass\"\n    Identifier \"nvidia\"\nEndSection\n# fake {ver}\n"),
        ),
        ("etc/OpenCL/vendors/nvidia.icd", format!("libnvidia-opencl.so.1\n# fake {ver}\n")),
    ];
    for (path, text) in configs {
        write(&host.driver_root().join(path), &text)?;
    }
    write_daemon_ipc(host)
}

/// What the driver's daemons leave on a real node: nvidia-persistenced's and the fabric
/// manager's sockets (real unix sockets, as the daemons bind them) and the MPS pipe dir.
fn write_daemon_ipc(host: &FakeHost) -> io::Result<()> {
    for sock in [
        "run/nvidia-persistenced/socket",
        "run/nvidia-fabricmanager/socket",
    ] {
        let path = host.driver_root().join(sock);
        let parent = path.parent().expect("socket path has a parent");
        std::fs::create_dir_all(parent).map_err(context("cannot create directory", parent))?;
        // The listener is dropped at once; the socket file stays, as a crashed daemon's would.
        // Bound through the parent's fd (`/proc/self/fd/N/socket`): a deep scratch dir makes the
        // full path longer than a socket address may be (108 bytes).
        let dir = std::fs::File::open(parent).map_err(context("cannot open", parent))?;
        let name = path.file_name().expect("socket path has a name");
        let short = Path::new("/proc/self/fd")
            .join(std::os::fd::AsRawFd::as_raw_fd(&dir).to_string())
            .join(name);
        std::os::unix::net::UnixListener::bind(&short).map_err(context("cannot bind", &path))?;
    }
    let mps = host.driver_root().join("tmp/nvidia-mps");
    std::fs::create_dir_all(&mps).map_err(context("cannot create directory", &mps))
}

fn mknod(path: &Path, major: u32, minor: u32) -> io::Result<()> {
    nvct_sys::mknod_char(path, 0o666, major, minor)
        .map_err(context(&format!("cannot mknod {major}:{minor} at"), path))?;
    // mknod's mode is filtered by the umask; set the real one.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .map_err(context("cannot chmod", path))
}

fn write_device_nodes(host: &mut FakeHost) -> io::Result<()> {
    let dev = host.dev_root().join("dev");
    let mut nodes: Vec<(PathBuf, u32, u32)> = Vec::new();
    for gpu in &host.gpus {
        nodes.push((
            dev.join(format!("nvidia{}", gpu.minor)),
            NVIDIA_MAJOR,
            gpu.minor,
        ));
    }
    nodes.push((dev.join("nvidiactl"), NVIDIA_MAJOR, 255));
    nodes.push((dev.join("nvidia-modeset"), NVIDIA_MAJOR, 254));
    nodes.push((dev.join("nvidia-uvm"), NVIDIA_UVM_MAJOR, 0));
    nodes.push((dev.join("nvidia-uvm-tools"), NVIDIA_UVM_MAJOR, 1));
    for ch in 0..IMEX_CHANNELS {
        nodes.push((
            dev.join(format!("nvidia-caps-imex-channels/channel{ch}")),
            NVIDIA_IMEX_MAJOR,
            ch,
        ));
    }
    if host.gpus.iter().any(|g| g.mig_enabled) {
        let caps = dev.join("nvidia-caps");
        nodes.push((caps.join("nvidia-cap1"), NVIDIA_CAPS_MAJOR, 1));
        nodes.push((caps.join("nvidia-cap2"), NVIDIA_CAPS_MAJOR, 2));
        for gpu in &host.gpus {
            for mig in &gpu.migs {
                for minor in [
                    gi_cap_minor(gpu.minor, mig.gi),
                    ci_cap_minor(gpu.minor, mig.gi, mig.ci),
                ] {
                    nodes.push((
                        caps.join(format!("nvidia-cap{minor}")),
                        NVIDIA_CAPS_MAJOR,
                        minor,
                    ));
                }
            }
        }
    }
    for (path, major, minor) in nodes {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(context("cannot create directory", parent))?;
        }
        mknod(&path, major, minor)?;
        host.device_nodes.push(DeviceNode { path, major, minor });
    }
    Ok(())
}

/// Per GPU: `DIR/sys/bus/pci/devices/<bus id>/drm/{cardN,renderDM}` (directories, as sysfs
/// has them), the nodes `dev/dri/cardN` and `dev/dri/renderDM` (major 226; not in
/// `device_nodes()`), and udev's links `dev/dri/by-path/pci-<bus id>-{card,render}` →
/// `../cardN`, `../renderDM`.
fn write_drm(host: &FakeHost) -> io::Result<()> {
    let dri = host.dev_root().join("dev/dri");
    let by_path = dri.join("by-path");
    std::fs::create_dir_all(&by_path).map_err(context("cannot create directory", &by_path))?;
    for gpu in &host.gpus {
        let (card, render) = FakeHost::drm_names(gpu.index);
        let sys = host
            .sys_root()
            .join("bus/pci/devices")
            .join(&gpu.bus_id)
            .join("drm");
        for (name, minor, kind) in [
            (&card, gpu.index + 1, "card"),
            (&render, 128 + gpu.index, "render"),
        ] {
            let entry = sys.join(name);
            std::fs::create_dir_all(&entry).map_err(context("cannot create directory", &entry))?;
            mknod(&dri.join(name), DRM_MAJOR, minor)?;
            let link = by_path.join(format!("pci-{}-{kind}", gpu.bus_id));
            std::os::unix::fs::symlink(format!("../{name}"), &link)
                .map_err(context("cannot create link", &link))?;
        }
    }
    Ok(())
}

const PARAMS: &str = "ResmanDebugLevel: 4294967295
RmLogonRC: 1
ModifyDeviceFiles: 1
DeviceFileUID: 0
DeviceFileGID: 0
DeviceFileMode: 438
InitializeSystemMemoryAllocations: 1
UsePageAttributeTable: 4294967295
EnableMSI: 1
EnablePCIeGen3: 0
MemoryPoolSize: 0
KMallocHeapMaxSize: 0
VMallocHeapMaxSize: 0
IgnoreMMIOCheck: 0
TCEBypassMode: 0
EnableStreamMemOPs: 0
EnableUserNUMAManagement: 1
NvLinkDisable: 0
RmProfilingAdminOnly: 1
PreserveVideoMemoryAllocations: 0
EnableS0ixPowerManagement: 0
S0ixPowerManagementVideoMemoryThreshold: 256
DynamicPowerManagement: 3
DynamicPowerManagementVideoMemoryThreshold: 200
RegisterPCIDriver: 1
EnablePCIERelaxedOrderingMode: 0
EnableResizableBar: 0
EnableGpuFirmware: 18
EnableGpuFirmwareLogs: 2
RmNvlinkBandwidth: \"\"
EnableDbgBreakpoint: 0
OpenRmEnableUnsupportedGpus: 1
DmaRemapPeerMmio: 1
RegistryDwords: \"\"
RegistryDwordsPerDevice: \"\"
RmMsg: \"\"
GpuBlacklist: \"\"
TemporaryFilePath: \"\"
ExcludedGpus: \"\"
";

const DEVICES: &str = "Character devices:
  1 mem
  4 /dev/vc/0
  4 tty
  4 ttyS
  5 /dev/tty
  5 /dev/console
  5 /dev/ptmx
  7 vcs
 10 misc
 13 input
 29 fb
 89 i2c
128 ptm
136 pts
180 usb
189 usb_device
195 nvidia-frontend
226 drm
242 aux
243 cec
244 lirc
245 hidraw
246 nvme-generic
247 nvme
248 bsg
249 watchdog
250 ptp
251 pps
252 rtc
253 dma_heap
254 gpiochip
508 nvidia-uvm
509 nvidia-caps
510 nvidia-caps-imex-channels

Block devices:
  7 loop
  8 sd
  9 md
 11 sr
 65 sd
253 device-mapper
254 mdp
259 blkext
";

fn write_proc(host: &FakeHost) -> io::Result<()> {
    let proc = host.proc_root();
    let nvidia = proc.join("driver/nvidia");
    let ver = &host.driver_version;
    write(
        &nvidia.join("version"),
        &format!("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {ver}  Tue Mar  5 22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n"),
    )?;
    write(&nvidia.join("params"), PARAMS)?;
    write(&nvidia.join("registry"), "Binary: \"\"\n")?;
    for gpu in &host.gpus {
        let info = format!(
            "Model: \t\t {}\nIRQ:   \t\t None\nGPU UUID: \t {}\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t {}\nDevice Minor: \t {}\nGPU Firmware: \t {ver}\nGPU Excluded:\t No\n",
            gpu.model, gpu.uuid, gpu.bus_id, gpu.minor
        );
        write(
            &nvidia.join("gpus").join(&gpu.bus_id).join("information"),
            &info,
        )?;
    }
    write(&proc.join("devices"), DEVICES)?;
    if host.gpus.iter().any(|g| g.mig_enabled) {
        let mut minors = String::from("config 1\nmonitor 2\n");
        for gpu in &host.gpus {
            for gi in 0..15 {
                minors += &format!(
                    "gpu{}/gi{gi}/access {}\n",
                    gpu.minor,
                    gi_cap_minor(gpu.minor, gi)
                );
                for ci in 0..8 {
                    minors += &format!(
                        "gpu{}/gi{gi}/ci{ci}/access {}\n",
                        gpu.minor,
                        ci_cap_minor(gpu.minor, gi, ci)
                    );
                }
            }
        }
        write(&proc.join("driver/nvidia-caps/mig-minors"), &minors)?;
        // The driver's capability files of what exists: the MIG config and monitor caps, and
        // each MIG device's GPU and compute instance `access` file, in the driver's format.
        let caps = nvidia.join("capabilities");
        let cap_file = |minor: u32| {
            format!("DeviceFileMinor: {minor}\nDeviceFileMode: 256\nDeviceFileModify: 1\n")
        };
        write(&caps.join("mig/config"), &cap_file(1))?;
        write(&caps.join("mig/monitor"), &cap_file(2))?;
        for gpu in &host.gpus {
            for mig in &gpu.migs {
                let gi = caps.join(format!("gpu{}/mig/gi{}", gpu.minor, mig.gi));
                write(
                    &gi.join("access"),
                    &cap_file(gi_cap_minor(gpu.minor, mig.gi)),
                )?;
                write(
                    &gi.join(format!("ci{}/access", mig.ci)),
                    &cap_file(ci_cap_minor(gpu.minor, mig.gi, mig.ci)),
                )?;
            }
        }
    }
    Ok(())
}

/// The fake NVML's topology; see `examples/fake_nvml.rs` for the format.
fn nvml_config_json(host: &FakeHost) -> String {
    let gpus: Vec<serde_json::Value> = host
        .gpus
        .iter()
        .map(|g| {
            serde_json::json!({
                "uuid": g.uuid,
                "name": g.model,
                "minor": g.minor,
                "bus_id": format!("00000000:{:02X}:00.0", pci_bus(g.index)),
                "pci_device_id": PCI_DEVICE_ID,
                "memory_total": MEMORY_TOTAL,
                "persistence_mode": g.persistence_mode == Some(true),
                "compute_capability": g.compute_capability,
                "mig_enabled": g.mig_enabled,
                "migs": g.migs.iter().map(|m| serde_json::json!({"gi": m.gi, "ci": m.ci, "uuid": m.uuid})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let config = serde_json::json!({
        "driver_version": host.driver_version,
        "cuda_version": CUDA_VERSION,
        "gpus": gpus,
    });
    serde_json::to_string_pretty(&config).expect("a JSON value always serialises") + "\n"
}

/// Runs the host's real ldconfig on the driver root: SONAME links plus `etc/ld.so.cache`.
/// Rewrites the flags of every entry of a new-format ld.so.cache from `from` to `to` (the
/// format: a 48-byte header `glibc-ld.so.cache1.1`, nlibs u32 at 20, then 24-byte entries
/// whose first field is the i32 flags).
fn retag_cache(path: &Path, from: i32, to: i32) -> io::Result<()> {
    let mut bytes = std::fs::read(path)?;
    if !bytes.starts_with(b"glibc-ld.so.cache1.1") {
        return Err(invalid(format!(
            "{}: not a new-format ld.so.cache",
            path.display()
        )));
    }
    let nlibs = u32::from_le_bytes(bytes[20..24].try_into().unwrap()) as usize;
    for i in 0..nlibs {
        let at = 48 + i * 24;
        if i32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) == from {
            bytes[at..at + 4].copy_from_slice(&to.to_le_bytes());
        }
    }
    std::fs::write(path, bytes)
}

fn run_ldconfig(driver_root: &Path) -> io::Result<()> {
    let output = Command::new("/sbin/ldconfig")
        .arg("-r")
        .arg(driver_root)
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot run /sbin/ldconfig -r {} (is libc-bin installed?): {e}",
                    driver_root.display()
                ),
            )
        })?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "/sbin/ldconfig -r {} failed ({}): {}",
            driver_root.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(())
}
