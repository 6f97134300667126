//! Tests of the fake GPU host (`tests/suite/common/fakehost.rs`), the fake NVML
//! (`crates/fake-nvml`) and NVML discovery (`nvct_host::nvml`) against it.
//!
//! Needs root, gcc and /sbin/ldconfig, and `cargo build --workspace` first; a missing piece fails
//! the test with a message saying so, never skips it.

use crate::common::fakehost::{
    FakeHost, CUDA_VERSION, LIB32_DIR, LIB_DIR, NVIDIA_CAPS_MAJOR, NVIDIA_IMEX_MAJOR, NVIDIA_MAJOR,
    NVIDIA_UVM_MAJOR, STUB_LIBS32,
};
use nvct_host::nvml::{discover_gpus, NvmlHost};
use nvml_wrapper::Nvml;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

fn build(gpus: u32, mig: bool) -> (TempDir, FakeHost) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let host = FakeHost::builder()
        .gpus(gpus)
        .mig(mig)
        .build(dir.path())
        .unwrap_or_else(|e| {
            panic!(
                "building a fake host with {gpus} GPUs (mig {mig}) in {}: {e}",
                dir.path().display()
            )
        });
    (dir, host)
}

/// The discovery's view of `host`: its driver root, device root and procfs root.
fn root_of(host: &FakeHost) -> nvct_formats::root::DriverRoot {
    nvct_formats::root::DriverRoot::new(host.driver_root(), host.dev_root(), host.proc_root())
}

/// Runs a command and returns its stdout; panics with full context unless it succeeds.
fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?} (is it installed?): {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn assert_nvml_sees_the_host(host: &FakeHost) {
    let found = discover_gpus(&host.nvml_lib()).unwrap_or_else(|e| panic!("discover_gpus: {e}"));
    let want = NvmlHost {
        driver_version: host.driver_version().to_owned(),
        cuda_version: Some("12.4".to_owned()),
        gpus: host.gpus().to_vec(),
    };
    assert_eq!(found, want);
}

#[test]
fn nvml_discovers_eight_gpus() {
    let (_dir, host) = build(8, false);
    assert_eq!(host.gpus().len(), 8);
    assert!(host
        .gpus()
        .iter()
        .all(|g| !g.mig_enabled && g.migs.is_empty()));
    assert_nvml_sees_the_host(&host);
}

#[test]
fn nvml_discovers_sixty_four_gpus() {
    let (_dir, host) = build(64, false);
    assert_eq!(host.gpus().len(), 64);
    assert_nvml_sees_the_host(&host);
}

#[test]
fn nvml_discovers_mig_devices_on_gpu_zero() {
    let (_dir, host) = build(2, true);
    assert_nvml_sees_the_host(&host);
    let found = discover_gpus(&host.nvml_lib()).expect("discover_gpus");
    let migs: Vec<(u32, u32, u32)> = found.gpus[0]
        .migs
        .iter()
        .map(|m| (m.index, m.gi, m.ci))
        .collect();
    assert_eq!(migs, [(0, 1, 0), (1, 2, 0)]);
    assert!(found.gpus[0]
        .migs
        .iter()
        .all(|m| m.uuid.starts_with("MIG-")));
    assert!(found.gpus[0].mig_enabled);
    assert!(!found.gpus[1].mig_enabled && found.gpus[1].migs.is_empty());
}

#[test]
fn identities_follow_the_index() {
    let (_dir, host) = build(2, false);
    let gpu0 = &host.gpus()[0];
    assert_eq!(
        (gpu0.index, gpu0.minor, gpu0.bus_id.as_str()),
        (0, 0, "0000:18:00.0")
    );
    assert_eq!(host.gpus()[1].bus_id, "0000:1b:00.0");
    assert!(
        gpu0.uuid.starts_with("GPU-") && gpu0.uuid.len() == 40,
        "{}",
        gpu0.uuid
    );
    // Deterministic: a second host of the same shape is identical.
    let (_other_dir, other) = build(2, false);
    assert_eq!(host.gpus(), other.gpus());
}

#[test]
fn device_nodes_are_char_devices_with_the_right_numbers() {
    let (_dir, host) = build(2, true);
    let dev = host.dev_root().join("dev");
    let expected = [
        ("nvidia0", NVIDIA_MAJOR, 0),
        ("nvidia1", NVIDIA_MAJOR, 1),
        ("nvidiactl", NVIDIA_MAJOR, 255),
        ("nvidia-modeset", NVIDIA_MAJOR, 254),
        ("nvidia-uvm", NVIDIA_UVM_MAJOR, 0),
        ("nvidia-uvm-tools", NVIDIA_UVM_MAJOR, 1),
        ("nvidia-caps-imex-channels/channel0", NVIDIA_IMEX_MAJOR, 0),
        ("nvidia-caps-imex-channels/channel1", NVIDIA_IMEX_MAJOR, 1),
        ("nvidia-caps/nvidia-cap1", NVIDIA_CAPS_MAJOR, 1),
        ("nvidia-caps/nvidia-cap2", NVIDIA_CAPS_MAJOR, 2),
        // gpu0/gi1/access, gpu0/gi1/ci0/access, gpu0/gi2/access, gpu0/gi2/ci0/access
        ("nvidia-caps/nvidia-cap12", NVIDIA_CAPS_MAJOR, 12),
        ("nvidia-caps/nvidia-cap13", NVIDIA_CAPS_MAJOR, 13),
        ("nvidia-caps/nvidia-cap21", NVIDIA_CAPS_MAJOR, 21),
        ("nvidia-caps/nvidia-cap22", NVIDIA_CAPS_MAJOR, 22),
    ];
    let listed: Vec<(String, u32, u32)> = host
        .device_nodes()
        .iter()
        .map(|n| {
            (
                n.path.strip_prefix(&dev).unwrap().display().to_string(),
                n.major,
                n.minor,
            )
        })
        .collect();
    let want: Vec<(String, u32, u32)> = expected
        .iter()
        .map(|(p, ma, mi)| (p.to_string(), *ma, *mi))
        .collect();
    assert_eq!(listed, want);
    for (name, major, minor) in expected {
        let path = dev.join(name);
        let meta = std::fs::symlink_metadata(&path)
            .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
        assert!(
            meta.file_type().is_char_device(),
            "{} is not a character device",
            path.display()
        );
        assert_eq!(
            (libc::major(meta.rdev()), libc::minor(meta.rdev())),
            (major, minor),
            "{}",
            path.display()
        );
        assert_eq!(meta.mode() & 0o7777, 0o666, "{}", path.display());
    }
    let minors =
        std::fs::read_to_string(host.proc_root().join("driver/nvidia-caps/mig-minors")).unwrap();
    for line in [
        "config 1",
        "monitor 2",
        "gpu0/gi1/access 12",
        "gpu0/gi1/ci0/access 13",
        "gpu0/gi2/ci0/access 22",
    ] {
        assert!(
            minors.lines().any(|l| l == line),
            "mig-minors lacks {line:?}"
        );
    }
}

#[test]
fn proc_files_describe_the_same_gpus() {
    let (_dir, host) = build(8, false);
    let nvidia = host.proc_root().join("driver/nvidia");
    let version = std::fs::read_to_string(nvidia.join("version")).unwrap();
    assert!(
        version.starts_with("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  "),
        "{version}"
    );
    let params = std::fs::read_to_string(nvidia.join("params")).unwrap();
    assert!(
        params.lines().any(|l| l == "ModifyDeviceFiles: 1"),
        "{params}"
    );
    for gpu in host.gpus() {
        let path = nvidia.join("gpus").join(&gpu.bus_id).join("information");
        let info = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let field = |key: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_owned()))
                .unwrap_or_else(|| panic!("{} lacks {key}", path.display()))
        };
        assert_eq!(field("Model:"), gpu.model);
        assert_eq!(field("GPU UUID:"), gpu.uuid);
        assert_eq!(field("Bus Location:"), gpu.bus_id);
        assert_eq!(field("Device Minor:"), gpu.minor.to_string());
    }
    let devices = std::fs::read_to_string(host.proc_root().join("devices")).unwrap();
    for line in [
        "  1 mem",
        "195 nvidia-frontend",
        "508 nvidia-uvm",
        "509 nvidia-caps",
    ] {
        assert!(
            devices.lines().any(|l| l == line),
            "/proc/devices lacks {line:?}"
        );
    }
    assert!(
        !host.proc_root().join("driver/nvidia-caps").exists(),
        "mig-minors without MIG"
    );
}

#[test]
fn libraries_carry_their_sonames() {
    let (_dir, host) = build(1, false);
    let lib_dir = host.lib_dir();
    let cases = [
        ("libcuda.so.550.54.15", "libcuda.so.1"),
        ("libnvidia-ml.so.550.54.15", "libnvidia-ml.so.1"),
        ("libGLX_nvidia.so.550.54.15", "libGLX_nvidia.so.0"),
        ("libEGL_nvidia.so.550.54.15", "libEGL_nvidia.so.0"),
        (
            "libnvidia-ptxjitcompiler.so.550.54.15",
            "libnvidia-ptxjitcompiler.so.1",
        ),
    ];
    for (file, soname) in cases {
        let dynamic = run(Command::new("readelf").arg("-d").arg(lib_dir.join(file)));
        assert!(
            dynamic.contains(&format!("Library soname: [{soname}]")),
            "{file}:\n{dynamic}"
        );
        let link = std::fs::read_link(lib_dir.join(soname))
            .unwrap_or_else(|e| panic!("{soname} is not a link: {e}"));
        assert_eq!(link, Path::new(file), "{soname} points elsewhere");
    }
}

#[test]
fn ld_cache_lists_the_driver_libraries() {
    let (_dir, host) = build(1, false);
    let cache = host.driver_root().join("etc/ld.so.cache");
    assert!(cache.is_file(), "{} missing", cache.display());
    let listing = run(Command::new("/sbin/ldconfig")
        .arg("-p")
        .arg("-C")
        .arg(&cache));
    for soname in ["libcuda.so.1", "libnvidia-ml.so.1", "libGLX_nvidia.so.0"] {
        let want = format!("{soname} (libc6,x86-64) => /{LIB_DIR}/{soname}");
        assert!(
            listing.lines().any(|l| l.trim() == want),
            "cache lacks {want:?}:\n{listing}"
        );
    }
    // The 32-bit stubs: i386 entries (`libc6` without `x86-64`, flags 0x0003), ELF32 EM_386.
    for (name, version) in STUB_LIBS32 {
        let soname = format!("{name}.so.{version}");
        let want = format!("{soname} (libc6) => /{LIB32_DIR}/{soname}");
        assert!(
            listing.lines().any(|l| l.trim() == want),
            "cache lacks {want:?}:\n{listing}"
        );
        let header = run(Command::new("readelf")
            .arg("-hd")
            .arg(host.driver_root().join(LIB32_DIR).join(&soname)));
        assert!(
            header.contains("ELF32")
                && header.contains("Intel 80386")
                && header.contains(&format!("Library soname: [{soname}]")),
            "{soname}:\n{header}"
        );
    }
}

#[test]
fn libcuda_stub_answers_cu_driver_get_version() {
    let (dir, host) = build(1, false);
    let source = dir.path().join("cuda-version.c");
    let program = dir.path().join("cuda-version");
    std::fs::write(
        &source,
        r#"#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    int (*get)(int *) = (int (*)(int *))dlsym(lib, "cuDriverGetVersion");
    int version = 0;
    if (!get || get(&version) != 0) return 1;
    printf("%d\n", version);
    return 0;
}
"#,
    )
    .unwrap();
    run(Command::new("gcc")
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .arg("-ldl"));
    let out = run(Command::new(&program).arg(host.lib_dir().join("libcuda.so.1")));
    assert_eq!(out.trim(), CUDA_VERSION.to_string());
}

#[test]
fn binaries_and_firmware_exist() {
    let (_dir, host) = build(2, false);
    let smi = run(&mut Command::new(
        host.driver_root().join("usr/bin/nvidia-smi"),
    ));
    assert!(smi.contains("NVIDIA-SMI fake 550.54.15"), "{smi}");
    let list = run(Command::new(host.driver_root().join("usr/bin/nvidia-smi")).arg("-L"));
    assert!(list.contains(&host.gpus()[1].uuid), "{list}");
    for name in ["gsp_ga10x.bin", "gsp_tu10x.bin"] {
        assert!(
            host.driver_root()
                .join("lib/firmware/nvidia/550.54.15")
                .join(name)
                .is_file(),
            "{name}"
        );
    }
}

#[test]
fn driver_version_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let host = FakeHost::builder()
        .gpus(1)
        .driver_version("535.161.08")
        .build(dir.path())
        .expect("build");
    assert!(host.lib_dir().join("libcuda.so.535.161.08").is_file());
    assert_eq!(
        discover_gpus(&host.nvml_lib())
            .expect("discover_gpus")
            .driver_version,
        "535.161.08"
    );
}

/// What the fake NVML answers to bad requests, through nvml-wrapper (Debug of its error) and,
/// where the wrapper cannot express the request, through the raw entry points (return codes).
#[test]
fn fake_nvml_rejects_bad_requests() {
    let (_dir, host) = build(2, true);
    let nvml = Nvml::builder()
        .lib_path(host.nvml_lib().as_os_str())
        .init()
        .expect("init fake NVML");
    let gpu0 = nvml.device_by_index(0).expect("GPU 0");
    let gpu1 = nvml.device_by_index(1).expect("GPU 1");
    let mig = gpu0.mig_device_by_index(0).expect("MIG 0:0");
    let err = |r: Result<nvml_wrapper::Device, nvml_wrapper::error::NvmlError>| {
        r.err().map(|e| format!("{e:?}"))
    };

    let wrapped: Vec<(&str, Option<String>, &str)> = vec![
        (
            "handle index out of range",
            err(nvml.device_by_index(2)),
            "InvalidArg",
        ),
        (
            "unknown UUID",
            err(nvml.device_by_uuid("GPU-00000000-0000-0000-0000-000000000000")),
            "NotFound",
        ),
        (
            "unknown bus id",
            err(nvml.device_by_pci_bus_id("00000000:FF:00.0")),
            "NotFound",
        ),
        (
            "malformed bus id",
            err(nvml.device_by_pci_bus_id("not a bus id")),
            "InvalidArg",
        ),
        (
            "MIG index beyond the maximum",
            err(gpu0.mig_device_by_index(7)),
            "InvalidArg",
        ),
        (
            "empty MIG slot",
            err(gpu0.mig_device_by_index(2)),
            "NotFound",
        ),
        (
            "MIG on a GPU without MIG",
            err(gpu1.mig_device_by_index(0)),
            "NotFound",
        ),
        (
            "MIG parent of a physical GPU",
            err(gpu0.mig_parent_device()),
            "InvalidArg",
        ),
        (
            "minor number of a MIG device",
            mig.minor_number().err().map(|e| format!("{e:?}")),
            "NotSupported",
        ),
        (
            "MIG mode of a MIG device",
            mig.mig_mode().err().map(|e| format!("{e:?}")),
            "NotSupported",
        ),
    ];
    for (name, got, want) in wrapped {
        assert_eq!(got.as_deref(), Some(want), "case {name}");
    }
    assert_eq!(
        nvml.device_by_pci_bus_id("0000:1b:00.0")
            .expect("legacy bus id form")
            .index()
            .unwrap(),
        1
    );
    assert_eq!(
        mig.mig_parent_device().expect("MIG parent").uuid().unwrap(),
        host.gpus()[0].uuid
    );

    // The raw C ABI's answers to null and bogus pointers: crates/fake-nvml's unit test.
}

#[test]
fn fake_nvml_without_topology_fails_to_initialise() {
    let (dir, host) = build(1, false);
    let lonely = dir.path().join("lonely");
    std::fs::create_dir(&lonely).unwrap();
    let lib = lonely.join("libnvidia-ml.so.1");
    std::fs::copy(host.lib_dir().join("libnvidia-ml.so.550.54.15"), &lib).unwrap();
    let err = discover_gpus(&lib).expect_err("NVML without fake-nvml.json must not initialise");
    let message = err.to_string();
    assert!(
        message.contains(&lib.display().to_string()),
        "error does not name the library: {message}"
    );
    assert!(format!("{err:?}").contains("LibraryNotFound"), "{err:?}");
}

#[test]
fn missing_library_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libnvidia-ml.so.1");
    let err = discover_gpus(&lib).expect_err("no library there");
    assert!(
        err.to_string().contains(&lib.display().to_string()),
        "{err}"
    );
}

#[test]
fn discovery_follows_each_library_layout() {
    // The simulated host built in each layout, discovered with the architecture of that
    // host: every driver library is found in the layout's dir (through the ld cache, whose
    // flags say aarch64 on the Grace layout), and the same driver root read for the other
    // architecture finds none of them (so the flags and dirs really decide).
    use crate::common::fakehost::LibLayout;
    use nvct_host::driver::FileKind;
    use nvct_model::Arch;
    let cases = [
        (
            "debian x86-64",
            LibLayout::DebianX86_64,
            Arch::X86_64,
            Arch::Aarch64,
        ),
        ("rhel lib64", LibLayout::Rhel, Arch::X86_64, Arch::Aarch64),
        (
            "ubuntu aarch64",
            LibLayout::DebianAarch64,
            Arch::Aarch64,
            Arch::X86_64,
        ),
    ];
    for (name, layout, arch, other) in cases {
        let dir = tempfile::tempdir().unwrap();
        let host = FakeHost::builder()
            .layout(layout)
            .build(dir.path())
            .unwrap();
        let mut root = root_of(&host);
        root.arch = arch;
        let inv = nvct_host::discover::discover(&root).unwrap_or_else(|e| panic!("{name}: {e}"));
        let libs: Vec<_> = inv
            .files
            .iter()
            .filter(|f| f.kind == FileKind::Library)
            .collect();
        assert!(libs.len() >= 10, "{name}: {libs:?}");
        let want_dir = Path::new("/").join(layout.lib_dir());
        for f in &libs {
            // The VDPAU backend is in the driver's vdpau/ directory next to the others.
            let want_dir = match f.name.as_str() {
                "libvdpau_nvidia" => want_dir.join("vdpau"),
                _ => want_dir.clone(),
            };
            assert_eq!(
                f.driver_path.parent(),
                Some(want_dir.as_path()),
                "{name}: {f:?}"
            );
            assert_eq!(
                f.host_path,
                host.driver_root()
                    .join(f.driver_path.strip_prefix("/").unwrap()),
                "{name}"
            );
        }
        for family in ["libcuda", "libvdpau_nvidia"] {
            assert!(
                libs.iter().any(|f| f.name == family),
                "{name}: {family}: {libs:?}"
            );
        }
        // The 32-bit libraries: through the cache's i386 entries, in the layout's 32-bit dir;
        // none on aarch64.
        let libs32: Vec<(&str, &Path)> = inv
            .files
            .iter()
            .filter(|f| f.kind == FileKind::Library32)
            .map(|f| (f.name.as_str(), f.driver_path.parent().unwrap()))
            .collect();
        let want32: Vec<(&str, PathBuf)> = match layout.lib32_dir() {
            Some(dir) => {
                let mut names: Vec<&str> = STUB_LIBS32.iter().map(|(n, _)| *n).collect();
                names.sort();
                names
                    .into_iter()
                    .map(|n| (n, Path::new("/").join(dir)))
                    .collect()
            }
            None => vec![],
        };
        let want32: Vec<(&str, &Path)> = want32.iter().map(|(n, d)| (*n, d.as_path())).collect();
        assert_eq!(libs32, want32, "{name}: 32-bit libraries");
        // The other architecture: cache entries do not match, and its dirs hold nothing
        // (lib64 is x86-64's and aarch64's alike on RHEL, so only the Debian layouts differ).
        if layout != LibLayout::Rhel {
            root.arch = other;
            let cache =
                nvct_formats::ldcache::read(&host.driver_root().join("etc/ld.so.cache")).unwrap();
            let libs = nvct_host::driver::libraries(&root, host.driver_version(), &cache);
            assert!(libs.is_empty(), "{name}: read as {other:?}: {libs:?}");
        }
    }
}

#[test]
fn drm_nodes_are_found_through_the_sysfs_beside_the_proc_root() {
    // The toolkit reads sysfs at <proc root>/../sys: the fake host's DIR/sys.
    let (_dir, host) = build(2, false);
    let root = root_of(&host);
    assert_eq!(root.sys_path("/"), host.sys_root());
    let inv = nvct_host::discover::discover(&root).unwrap();
    for gpu in host.gpus() {
        let (card, render) = FakeHost::drm_names(gpu.index);
        let drm = inv
            .drm
            .get(&gpu.bus_id)
            .unwrap_or_else(|| panic!("GPU {}: no DRM nodes: {:?}", gpu.index, inv.drm));
        assert_eq!(
            drm.nodes,
            [format!("/dev/dri/{card}"), format!("/dev/dri/{render}")].map(PathBuf::from),
            "GPU {}",
            gpu.index
        );
        assert_eq!(
            drm.by_path,
            [
                (
                    PathBuf::from(format!("../{card}")),
                    PathBuf::from(format!("/dev/dri/by-path/pci-{}-card", gpu.bus_id))
                ),
                (
                    PathBuf::from(format!("../{render}")),
                    PathBuf::from(format!("/dev/dri/by-path/pci-{}-render", gpu.bus_id))
                ),
            ],
            "GPU {}",
            gpu.index
        );
        for path in &drm.nodes {
            let n = inv.nodes.iter().find(|n| &n.path == path).unwrap();
            assert_eq!(n.major, crate::common::fakehost::DRM_MAJOR, "{path:?}");
        }
    }
}

#[test]
fn the_devices_only_discovery_gives_the_same_device_rules() {
    // The shim's legacy mode writes the plan's device rules from a devices-only discovery
    // (`Files::Devices` of its request's needs); they must be the full discovery's, for every
    // kind of request, with NVML and without.
    use nvct_host::discover::{read, Files, Nvml};
    use nvct_model::{Capability as C, DeviceId, Devices, Needs};
    use nvct_plan::Layout;
    let cases: Vec<(&str, bool, Devices, Vec<C>)> = vec![
        (
            "GPU 0, compute",
            false,
            Devices::List(vec![DeviceId::Index(0)]),
            vec![C::Compute, C::Utility],
        ),
        (
            "all, graphics (DRM nodes)",
            false,
            Devices::All,
            vec![C::Graphics, C::Display],
        ),
        ("none", false, Devices::None, vec![C::Utility]),
        (
            "a MIG device",
            true,
            Devices::List(vec![DeviceId::MigIndex(0, 0)]),
            vec![C::Compute],
        ),
        ("all on a MIG host", true, Devices::All, C::ALL.to_vec()),
    ];
    for (name, mig, devices, caps) in cases {
        let (_dir, host) = build(2, mig);
        let root = root_of(&host);
        let req = nvct_plan::fixtures::request(devices, &caps);
        let nvml = nvct_plan::needs_nvml(&req);
        let full = read(&root, Nvml::wanted(nvml), Files::All).unwrap();
        let devs = read(&root, Nvml::wanted(nvml), Files::Devices(Needs::ALL)).unwrap();
        assert!(
            devs.files.is_empty() && devs.proc_driver.is_none(),
            "{name}"
        );
        assert_eq!(
            (&devs.gpus, &devs.nodes),
            (&full.gpus, &full.nodes),
            "{name}"
        );
        // The shim's: no DRM nodes unless the request has graphics or display.
        let scoped = read(
            &root,
            Nvml::wanted(nvml),
            Files::Devices(nvct_plan::needs(&req)),
        )
        .unwrap();
        let rules = |inv| nvct_plan::plan(&req, inv, &Layout::UNKNOWN).map(|p| p.cgroup_rules);
        let want = rules(&full).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            !want.is_empty() || matches!(req.devices, Devices::None),
            "{name}"
        );
        assert_eq!(rules(&devs).unwrap(), want, "{name}");
        assert_eq!(rules(&scoped).unwrap(), want, "{name}: scoped to its needs");
    }
}

#[test]
fn the_devices_only_discovery_does_not_read_the_ld_cache() {
    // Nothing of the device rules is found through the host ld cache (a real host's is tens of
    // KB): without NVML, a devices-only discovery does not open it. A FIFO in its place shows
    // it: opening one blocks until a writer comes, so a discovery that opens it never returns.
    use nvct_host::discover::{read, Files, Nvml};
    let (_dir, host) = build(2, false);
    let cache = host.driver_root().join("etc/ld.so.cache");
    std::fs::remove_file(&cache).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&cache).status();
    assert!(
        made.is_ok_and(|s| s.success()),
        "mkfifo {}",
        cache.display()
    );
    let root = root_of(&host);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let inv = read(&root, Nvml::Never, Files::Devices(nvct_model::Needs::ALL));
        let _ = tx.send(inv.map(|i| i.gpus.len()).map_err(|e| e.to_string()));
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(10));
    if got.is_err() {
        // Let the blocked open go (a writer arrives), then fail.
        let _ = std::fs::OpenOptions::new().write(true).open(&cache);
    }
    assert_eq!(
        got.expect("the devices-only discovery opened the ld cache"),
        Ok(2)
    );
}

#[test]
fn the_request_scoped_discovery_gives_the_same_plan() {
    // The prestart hook reads only what its request can use (`out::prestart::discover`: no
    // DRM nodes without graphics or display, no 32-bit libraries without compat32, no config
    // files without a capability that has config dirs, the /proc files of the selected GPUs
    // only). Its plan must be the full discovery's, for every capability alone and together,
    // for all GPUs, one, and a MIG device, for an image of either library layout.
    use nvct_host::discover::{read, Files, Nvml};
    use nvct_model::{Capability as C, DeviceId, Devices, Layout};
    let layouts = [
        Layout::UNKNOWN,
        Layout {
            lib_dir: Some("/usr/lib/x86_64-linux-gnu".into()),
            lib32_dir: Some("/usr/lib/i386-linux-gnu".into()),
            glx_indirect: false,
        },
    ];
    let mut caps_cases: Vec<Vec<C>> = C::ALL.iter().map(|c| vec![*c]).collect();
    caps_cases.push(vec![C::Compute, C::Utility]);
    caps_cases.push(vec![C::Graphics, C::Compat32]);
    caps_cases.push(C::ALL.to_vec());
    for mig in [false, true] {
        let (_dir, host) = build(2, mig);
        let root = root_of(&host);
        let full = read(&root, Nvml::Needed, Files::All).unwrap();
        assert!(
            !full.drm.is_empty()
                && full
                    .files
                    .iter()
                    .any(|f| f.kind == nvct_model::FileKind::Config),
            "the fake host has DRM nodes and config files to leave out"
        );
        for caps in &caps_cases {
            let mut device_cases = vec![Devices::All, Devices::List(vec![DeviceId::Index(1)])];
            if mig {
                device_cases.push(Devices::List(vec![DeviceId::MigIndex(0, 0)]));
            }
            for devices in device_cases {
                let name = format!("mig {mig}, {caps:?}, {devices:?}");
                let req = nvct_plan::fixtures::request(devices, caps);
                let scoped = nvct_inject::prestart::discover(&root, &req, Nvml::Needed).unwrap();
                let gpu_files =
                    |inv: &nvct_model::Inventory| inv.proc_driver.as_ref().unwrap().gpu_files.len();
                let selected = match &req.devices {
                    Devices::All => 2,
                    _ => 1,
                };
                assert_eq!(
                    gpu_files(&scoped),
                    selected,
                    "{name}: the selected GPUs' files"
                );
                for layout in &layouts {
                    let want = nvct_plan::plan(&req, &full, layout)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    let got = nvct_plan::plan(&req, &scoped, layout).unwrap();
                    assert_eq!(got, want, "{name}, {layout:?}");
                }
                // jit-cdi's discovery (no GPU's procfs files; the driver's files its request
                // can use): the same plan as a spec's discovery, so the same CDI edits.
                let jit = |needs| {
                    let inv = read(&root, Nvml::Needed, Files::ButProcGpus(needs)).unwrap();
                    let mut req = req.clone();
                    if req.devices == Devices::All {
                        req.devices = nvct_plan::cdi_all(&inv);
                    }
                    nvct_plan::plan(&req, &inv, &Layout::UNKNOWN).unwrap()
                };
                assert_eq!(
                    jit(nvct_plan::needs(&req)),
                    jit(nvct_model::Needs::ALL),
                    "{name}: jit-cdi"
                );
            }
        }
    }
}

#[test]
fn the_spec_discovery_gives_the_same_spec() {
    // `cdi generate` and the installer read the host with `discover_for_spec`, which leaves out
    // the GPUs' /proc files; the spec must be the full discovery's, byte for byte, for every
    // kind of spec, on hosts with and without MIG.
    use nvct_inject::generate::{generate, Options, SpecMode};
    use nvct_model::Capability as C;
    let kinds: Vec<(&str, Options)> = vec![
        ("default", Options::default()),
        (
            "compute only",
            Options {
                capabilities: [C::Compute, C::Utility].into(),
                ..Options::default()
            },
        ),
        (
            "management",
            Options {
                mode: SpecMode::Management,
                ..Options::default()
            },
        ),
    ];
    for mig in [false, true] {
        let (_dir, host) = build(4, mig);
        let root = root_of(&host);
        let full = nvct_host::discover::discover(&root).unwrap();
        let lean = nvct_host::discover::discover_for_spec(&root).unwrap();
        assert!(
            full.proc_driver
                .as_ref()
                .is_some_and(|pd| !pd.gpu_files.is_empty())
                && lean
                    .proc_driver
                    .as_ref()
                    .is_some_and(|pd| pd.gpu_files.is_empty()),
            "MIG {mig}: the lean discovery reads no GPU's /proc files, the full one does"
        );
        for (name, opts) in &kinds {
            let yaml = |inv| {
                generate(inv, opts)
                    .unwrap_or_else(|e| panic!("{name}, MIG {mig}: {e}"))
                    .encode(nvct_cdi::Format::Yaml)
                    .unwrap()
            };
            assert_eq!(yaml(&lean), yaml(&full), "{name}, MIG {mig}");
        }
    }
}
