//! Whole-value tests of the generator on inventory literals.

use super::*;
use nvct_cdi::spec::{Hook, Mount};
use nvct_model::FileKind;
use std::collections::BTreeMap;

use nvct_plan::fixtures::{self, file, gpu, node as host_node};

/// Two GPUs; GPU 1 has MIG enabled with one MIG device when `mig`.
fn inventory(mig: bool) -> Inventory {
    let lib = "/usr/lib/x86_64-linux-gnu";
    let mut nodes = vec![
        host_node("/dev/nvidia-modeset", 195, 254),
        host_node("/dev/nvidia-uvm", 508, 0),
        host_node("/dev/nvidia-uvm-tools", 508, 1),
        host_node("/dev/nvidia0", 195, 0),
        host_node("/dev/nvidia1", 195, 1),
        host_node("/dev/nvidiactl", 195, 255),
    ];
    if mig {
        nodes.push(host_node("/dev/nvidia-caps/nvidia-cap21", 509, 21));
        nodes.push(host_node("/dev/nvidia-caps/nvidia-cap22", 509, 22));
    }
    nodes.sort();
    Inventory {
        driver_version: "550.54.15".into(),
        cuda_version: Some("12.4".into()),
        gpus: vec![gpu(0, false), gpu(1, mig)],
        nodes,
        drm: BTreeMap::new(),
        mig_minors: BTreeMap::from([
            ("gpu1/gi2/access".into(), 21),
            ("gpu1/gi2/ci0/access".into(), 22),
        ]),
        files: vec![
            file(
                FileKind::Library,
                "libcuda",
                &format!("{lib}/libcuda.so.550.54.15"),
            ),
            file(
                FileKind::Library,
                "libnvidia-ml",
                &format!("{lib}/libnvidia-ml.so.550.54.15"),
            ),
            file(FileKind::Binary, "nvidia-smi", "/usr/bin/nvidia-smi"),
            file(
                FileKind::Firmware,
                "gsp.bin",
                "/lib/firmware/nvidia/550.54.15/gsp.bin",
            ),
            file(
                FileKind::Ipc,
                "/run/nvidia-persistenced/socket",
                "/run/nvidia-persistenced/socket",
            ),
        ],
        // The host has /proc/driver/nvidia: the plan masks it, so the spec carries
        // disable-device-node-modification.
        proc_driver: Some(nvct_host::discover::ProcDriver {
            version: "NVRM version: x\n".into(),
            ..Default::default()
        }),
        notes: vec![],
    }
}

fn node(path: &str, major: i64, minor: i64) -> DeviceNode {
    DeviceNode {
        path: path.into(),
        host_path: Some(format!("/host{path}")),
        kind: Some("c".into()),
        major: Some(major),
        minor: Some(minor),
        permissions: Some("rwm".into()),
        file_mode: Some(0o666),
        ..Default::default()
    }
}

/// The default options with upstream's one-hook-per-edit layout (`--separate-hooks`), which
/// most cases here look at hook by hook.
fn separate() -> Options {
    Options {
        one_hook: false,
        ..Options::default()
    }
}

fn names(spec: &Spec) -> Vec<&str> {
    spec.devices.iter().map(|d| d.name.as_str()).collect()
}

fn hook_args(spec: &Spec) -> Vec<Vec<&str>> {
    spec.container_edits
        .hooks
        .iter()
        .map(|h| h.args.iter().map(String::as_str).collect())
        .collect()
}

#[test]
fn two_gpus_default_options_whole_spec() {
    let spec = generate(&inventory(false), &separate()).unwrap();
    let ro = |host: &str, container: &str| Mount {
        host_path: host.into(),
        container_path: container.into(),
        options: ["ro", "nosuid", "nodev", "bind"].map(String::from).into(),
        kind: None,
    };
    let mut ipc = ro(
        "/drv/run/nvidia-persistenced/socket",
        "/run/nvidia-persistenced/socket",
    );
    ipc.options.push("noexec".into());
    let hook = |args: &[&str]| Hook {
        hook_name: "createContainer".into(),
        path: "/usr/bin/nvidia-cdi-hook".into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: vec![nvct_model::HOOK_PATH_ENV.into()],
    };
    let dev = |name: &str, nodes: Vec<DeviceNode>| Device {
        name: name.into(),
        container_edits: ContainerEdits {
            device_nodes: nodes,
            ..Default::default()
        },
    };
    let want = Spec {
        cdi_version: "0.5.0".into(),
        kind: "nvidia.com/gpu".into(),
        devices: vec![
            dev("0", vec![node("/dev/nvidia0", 195, 0)]),
            dev("GPU-0", vec![node("/dev/nvidia0", 195, 0)]),
            dev("1", vec![node("/dev/nvidia1", 195, 1)]),
            dev("GPU-1", vec![node("/dev/nvidia1", 195, 1)]),
            dev(
                "all",
                vec![node("/dev/nvidia0", 195, 0), node("/dev/nvidia1", 195, 1)],
            ),
        ],
        container_edits: ContainerEdits {
            env: vec![
                "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu".into(),
                "NVIDIA_VISIBLE_DEVICES=void".into(),
            ],
            device_nodes: vec![
                node("/dev/nvidia-modeset", 195, 254),
                node("/dev/nvidia-uvm", 508, 0),
                node("/dev/nvidia-uvm-tools", 508, 1),
                node("/dev/nvidiactl", 195, 255),
            ],
            mounts: vec![
                ro(
                    "/drv/lib/firmware/nvidia/550.54.15/gsp.bin",
                    "/lib/firmware/nvidia/550.54.15/gsp.bin",
                ),
                ipc,
                ro("/drv/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"),
                ro(
                    "/drv/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
                    "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
                ),
                ro(
                    "/drv/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                ),
            ],
            hooks: vec![
                hook(&[
                    "nvidia-cdi-hook",
                    "create-symlinks",
                    "--link",
                    "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
                ]),
                hook(&["nvidia-cdi-hook", "disable-device-node-modification"]),
                hook(&[
                    "nvidia-cdi-hook",
                    "enable-cuda-compat",
                    "--host-driver-version",
                    "550.54.15",
                ]),
                hook(&[
                    "nvidia-cdi-hook",
                    "update-ldcache",
                    "--folder",
                    "/usr/lib/x86_64-linux-gnu",
                ]),
                hook(&["nvidia-cdi-hook", "update-application-profile"]),
            ],
        },
    };
    assert_eq!(spec, want);
}

#[test]
fn naming_strategy_cases() {
    use NameStrategy::*;
    let cases: Vec<(&str, bool, Vec<NameStrategy>, Vec<&str>)> = vec![
        ("index", false, vec![Index], vec!["0", "1", "all"]),
        ("uuid", false, vec![Uuid], vec!["GPU-0", "GPU-1", "all"]),
        (
            "type-index",
            false,
            vec![TypeIndex],
            vec!["gpu0", "gpu1", "all"],
        ),
        (
            "duplicates ignored",
            false,
            vec![Index, Index],
            vec!["0", "1", "all"],
        ),
        // A GPU in MIG mode is not itself a device, as in upstream's specs.
        ("mig index", true, vec![Index], vec!["0", "1:0", "all"]),
        ("mig uuid", true, vec![Uuid], vec!["GPU-0", "MIG-1a", "all"]),
        (
            "mig type-index",
            true,
            vec![TypeIndex, Index],
            vec!["gpu0", "0", "mig1:0", "1:0", "all"],
        ),
    ];
    for (case, mig, strategies, want) in cases {
        let spec = generate(
            &inventory(mig),
            &Options {
                strategies,
                ..separate()
            },
        )
        .unwrap();
        assert_eq!(names(&spec), want, "case {case}");
    }
}

#[test]
fn mig_device_gets_its_cap_nodes_and_all_has_the_union() {
    let spec = generate(
        &inventory(true),
        &Options {
            strategies: vec![NameStrategy::Index],
            ..separate()
        },
    )
    .unwrap();
    let nodes = |name: &str| -> Vec<String> {
        let d = spec
            .devices
            .iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("no device {name}"));
        d.container_edits
            .device_nodes
            .iter()
            .map(|n| n.path.clone())
            .collect()
    };
    assert_eq!(
        nodes("1:0"),
        [
            "/dev/nvidia-caps/nvidia-cap21",
            "/dev/nvidia-caps/nvidia-cap22",
            "/dev/nvidia1"
        ]
    );
    assert!(
        !spec.devices.iter().any(|d| d.name == "1"),
        "a GPU in MIG mode is not a device of the whole spec"
    );
    assert_eq!(
        nodes("all"),
        [
            "/dev/nvidia-caps/nvidia-cap21",
            "/dev/nvidia-caps/nvidia-cap22",
            "/dev/nvidia0",
            "/dev/nvidia1"
        ]
    );
}

#[test]
fn version_is_the_minimum_needed() {
    // type-index names start with a letter, but node hostPaths still need 0.5.0.
    let spec = generate(
        &inventory(false),
        &Options {
            strategies: vec![NameStrategy::TypeIndex],
            ..separate()
        },
    )
    .unwrap();
    assert_eq!(spec.cdi_version, "0.5.0");
}

#[test]
fn hook_option_cases() {
    let all: BTreeSet<HookKind> = HookKind::ALL.into_iter().collect();
    let cases: Vec<(&str, Options, Vec<Vec<&str>>)> = vec![
        (
            "all disabled",
            Options {
                disabled_hooks: all,
                ..separate()
            },
            vec![],
        ),
        (
            "ldconfig path, symlinks disabled",
            Options {
                ldconfig_path: Some("/sbin/ldconfig.real".into()),
                disabled_hooks: BTreeSet::from([
                    HookKind::CreateSymlinks,
                    HookKind::KeepDeviceRules,
                ]),
                ..separate()
            },
            vec![
                vec!["nvidia-cdi-hook", "disable-device-node-modification"],
                vec![
                    "nvidia-cdi-hook",
                    "enable-cuda-compat",
                    "--host-driver-version",
                    "550.54.15",
                ],
                vec![
                    "nvidia-cdi-hook",
                    "update-ldcache",
                    "--ldconfig-path",
                    "/sbin/ldconfig.real",
                    "--folder",
                    "/usr/lib/x86_64-linux-gnu",
                ],
                vec!["nvidia-cdi-hook", "update-application-profile"],
            ],
        ),
        (
            "proc root, compat disabled",
            Options {
                proc_root: "/host/proc".into(),
                disabled_hooks: BTreeSet::from([
                    HookKind::EnableCudaCompat,
                    HookKind::KeepDeviceRules,
                ]),
                ..separate()
            },
            vec![
                vec![
                    "nvidia-cdi-hook",
                    "create-symlinks",
                    "--link",
                    "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
                ],
                vec![
                    "nvidia-cdi-hook",
                    "disable-device-node-modification",
                    "--proc-root",
                    "/host/proc",
                ],
                vec![
                    "nvidia-cdi-hook",
                    "update-ldcache",
                    "--folder",
                    "/usr/lib/x86_64-linux-gnu",
                ],
                vec!["nvidia-cdi-hook", "update-application-profile"],
            ],
        ),
        (
            "one hook (jit-cdi): every hook's flags after its marker, in the same order",
            Options {
                proc_root: "/host/proc".into(),
                one_hook: true,
                ..separate()
            },
            vec![vec![
                "nvidia-cdi-hook",
                "apply-edits",
                "--create-symlinks",
                "--link",
                "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
                "--disable-device-node-modification",
                "--proc-root",
                "/host/proc",
                "--enable-cuda-compat",
                "--host-driver-version",
                "550.54.15",
                "--update-ldcache",
                "--folder",
                "/usr/lib/x86_64-linux-gnu",
                "--update-application-profile",
            ]],
        ),
        (
            "application profile disabled",
            Options {
                disabled_hooks: BTreeSet::from([
                    HookKind::CreateSymlinks,
                    HookKind::EnableCudaCompat,
                    HookKind::UpdateLdcache,
                    HookKind::UpdateApplicationProfile,
                ]),
                ..separate()
            },
            vec![
                vec!["nvidia-cdi-hook", "disable-device-node-modification"],
                vec!["nvidia-cdi-hook", "keep-device-rules"],
            ],
        ),
        (
            "utility alone: no compat hook, no profile (no graphics)",
            Options {
                capabilities: BTreeSet::from([Capability::Utility]),
                ..separate()
            },
            vec![
                vec!["nvidia-cdi-hook", "disable-device-node-modification"],
                vec![
                    "nvidia-cdi-hook",
                    "update-ldcache",
                    "--folder",
                    "/usr/lib/x86_64-linux-gnu",
                ],
            ],
        ),
    ];
    for (case, opts, want) in cases {
        let spec = generate(&inventory(false), &opts).unwrap();
        assert_eq!(hook_args(&spec), want, "case {case}");
        for h in &spec.container_edits.hooks {
            // keep-device-rules runs on the host, with the container's host pid.
            let stage = match h.args.get(1).map(String::as_str) {
                Some("keep-device-rules") => "createRuntime",
                _ => "createContainer",
            };
            assert_eq!(h.hook_name, stage, "case {case}");
            assert!(
                !h.env.is_empty(),
                "case {case}: every hook carries an explicit env"
            );
        }
    }
}

#[test]
fn device_id_selection_cases() {
    let only =
        |ids: &[&str]| Devices::List(ids.iter().map(|s| DeviceId::parse(s).unwrap()).collect());
    let cases: Vec<(&str, Devices, Result<&str, GenerateError>)> = vec![
        ("index", only(&["1"]), Ok("1 all")),
        ("uuid", only(&["GPU-0"]), Ok("0 all")),
        ("mig", only(&["1:0"]), Ok("1:0 all")),
        (
            "unknown",
            only(&["7"]),
            Err(GenerateError::UnknownDevice {
                id: "7".into(),
                count: 2,
            }),
        ),
    ];
    for (case, devices, want) in cases {
        let got = generate(
            &inventory(true),
            &Options {
                devices,
                strategies: vec![NameStrategy::Index],
                ..separate()
            },
        );
        assert_eq!(
            got.map(|s| names(&s).join(" ")),
            want.map(String::from),
            "case {case}"
        );
    }
}

#[test]
fn bad_kind_is_refused() {
    let got = generate(
        &inventory(false),
        &Options {
            class: "g.pu".into(),
            ..separate()
        },
    );
    assert!(matches!(got, Err(GenerateError::Kind(_))), "{got:?}");
}

#[test]
fn a_host_without_gpus_gets_no_spec() {
    // The `all` device would have no edits, which podman refuses; upstream exits 1 too.
    let mut inv = inventory(false);
    inv.gpus.clear();
    inv.nodes.retain(|n| {
        !n.path
            .to_string_lossy()
            .trim_start_matches("/dev/nvidia")
            .chars()
            .all(|c| c.is_ascii_digit())
    });
    let got = generate(&inv, &separate());
    assert_eq!(got, Err(GenerateError::NoGpus));
    assert!(GenerateError::NoGpus
        .to_string()
        .starts_with("no NVIDIA GPUs found"));
}

#[test]
fn same_input_same_bytes() {
    let a = generate(&inventory(true), &separate()).unwrap();
    let b = generate(&inventory(true), &separate()).unwrap();
    for f in [nvct_cdi::Format::Yaml, nvct_cdi::Format::Json] {
        assert_eq!(a.encode(f).unwrap(), b.encode(f).unwrap());
    }
}

#[test]
fn compat32_libraries_per_capability_set() {
    // A host with a 32-bit libcuda (an i386 ld cache entry): `cdi generate`, as upstream's,
    // writes no 32-bit library; a spec asked for compat32 (jit-cdi) mounts it at its driver
    // path and refreshes the ld cache with its dir.
    let lib32 = "/usr/lib/i386-linux-gnu/libcuda.so.550.54.15";
    let mut inv = inventory(false);
    inv.files.push(file(FileKind::Library32, "libcuda", lib32));
    let every: BTreeSet<Capability> = Capability::ALL.into_iter().collect();
    // (case, capabilities, whether the 32-bit libcuda is mounted)
    let cases = [
        ("cdi generate's defaults", separate().capabilities, false),
        ("every capability (jit-cdi)", every, true),
    ];
    for (name, capabilities, want) in cases {
        let spec = generate(
            &inv,
            &Options {
                capabilities,
                ..separate()
            },
        )
        .unwrap();
        let mounted = spec
            .container_edits
            .mounts
            .iter()
            .any(|m| m.container_path == lib32 && m.host_path == format!("/drv{lib32}"));
        assert_eq!(mounted, want, "{name}: {:?}", spec.container_edits.mounts);
        let ldcache = hook_args(&spec)
            .into_iter()
            .find(|a| a.get(1) == Some(&"update-ldcache"))
            .unwrap();
        assert_eq!(
            ldcache.contains(&"/usr/lib/i386-linux-gnu"),
            want,
            "{name}: {ldcache:?}"
        );
    }
    assert!(!separate().capabilities.contains(&Capability::Compat32));
}

#[test]
fn drm_nodes_are_each_gpus_own() {
    // GPU 0 has card1 and renderD128 and their by-path links; GPU 1 has none. As upstream's
    // specs: the nodes are in GPU 0's own entry (and `all`), with a create-symlinks hook for
    // the by-path links; not in the spec-level edits; none without graphics and display.
    let mut inv = inventory(false);
    let bus0 = inv.gpus[0].bus_id.clone();
    inv.nodes.push(host_node("/dev/dri/card1", 226, 1));
    inv.nodes.push(host_node("/dev/dri/renderD128", 226, 128));
    inv.nodes.sort();
    inv.drm.insert(
        bus0.clone(),
        nvct_model::Drm {
            nodes: vec!["/dev/dri/card1".into(), "/dev/dri/renderD128".into()],
            by_path: vec![
                (
                    "../card1".into(),
                    format!("/dev/dri/by-path/pci-{bus0}-card").into(),
                ),
                (
                    "../renderD128".into(),
                    format!("/dev/dri/by-path/pci-{bus0}-render").into(),
                ),
            ],
        },
    );
    let link_args = vec![
        "nvidia-cdi-hook".to_string(),
        "create-symlinks".into(),
        "--link".into(),
        format!("../card1::/dev/dri/by-path/pci-{bus0}-card"),
        "--link".into(),
        format!("../renderD128::/dev/dri/by-path/pci-{bus0}-render"),
    ];
    let compute: BTreeSet<Capability> = [Capability::Compute, Capability::Utility].into();
    // (case, capabilities, whether GPU 0's entry and `all` get the nodes and the hook)
    let cases = [
        (
            "defaults (graphics, display)",
            separate().capabilities,
            true,
        ),
        ("compute and utility only", compute, false),
    ];
    for (name, capabilities, want) in cases {
        let spec = generate(
            &inv,
            &Options {
                capabilities,
                strategies: vec![NameStrategy::Index],
                ..separate()
            },
        )
        .unwrap();
        let device = |n: &str| {
            &spec
                .devices
                .iter()
                .find(|d| d.name == n)
                .unwrap()
                .container_edits
        };
        let paths = |e: &ContainerEdits| -> Vec<String> {
            e.device_nodes.iter().map(|n| n.path.clone()).collect()
        };
        let dri = if want {
            vec![
                "/dev/dri/card1".to_string(),
                "/dev/dri/renderD128".into(),
                "/dev/nvidia0".into(),
            ]
        } else {
            vec!["/dev/nvidia0".to_string()]
        };
        assert_eq!(paths(device("0")), dri, "{name}");
        assert_eq!(paths(device("1")), vec!["/dev/nvidia1"], "{name}");
        let hooks = |e: &ContainerEdits| -> Vec<Vec<String>> {
            e.hooks.iter().map(|h| h.args.clone()).collect()
        };
        let want_hooks = if want {
            vec![link_args.clone()]
        } else {
            vec![]
        };
        assert_eq!(hooks(device("0")), want_hooks, "{name}");
        assert_eq!(hooks(device("all")), want_hooks, "{name}");
        assert!(hooks(device("1")).is_empty(), "{name}");
        assert!(
            !paths(&spec.container_edits)
                .iter()
                .any(|p| p.starts_with("/dev/dri")),
            "{name}"
        );
        let card = device("0").device_nodes.first().unwrap();
        assert_eq!(
            (card.major, card.minor, card.host_path.as_deref()),
            if want {
                (Some(226), Some(1), Some("/host/dev/dri/card1"))
            } else {
                (Some(195), Some(0), Some("/host/dev/nvidia0"))
            },
            "{name}"
        );
    }
}

#[test]
fn gbm_and_glx_indirect_links_as_upstreams() {
    // As upstream's `cdi generate`: create-symlinks makes gbm/nvidia-drm_gbm.so ->
    // ../libnvidia-allocator.so.1 and libGLX_indirect.so.0 -> libGLX_nvidia.so.<version>,
    // next to the libraries at their driver paths.
    let lib = "/usr/lib/x86_64-linux-gnu";
    let mut inv = inventory(false);
    for family in ["libnvidia-allocator", "libGLX_nvidia"] {
        inv.files.push(file(
            FileKind::Library,
            family,
            &format!("{lib}/{family}.so.550.54.15"),
        ));
    }
    let spec = generate(&inv, &separate()).unwrap();
    let links = hook_args(&spec)
        .into_iter()
        .find(|a| a.get(1) == Some(&"create-symlinks"))
        .unwrap();
    for want in [
        format!("../libnvidia-allocator.so.1::{lib}/gbm/nvidia-drm_gbm.so"),
        format!("libGLX_nvidia.so.550.54.15::{lib}/libGLX_indirect.so.0"),
        format!("libcuda.so.1::{lib}/libcuda.so"),
    ] {
        assert!(links.contains(&want.as_str()), "{want}: {links:?}");
    }
}

#[test]
fn disable_ipc_discoverer_leaves_out_the_sockets() {
    let inv = inventory(false);
    let paths = |no_ipc: bool| -> Vec<String> {
        let opts = Options {
            no_ipc,
            ..separate()
        };
        generate(&inv, &opts)
            .unwrap()
            .container_edits
            .mounts
            .iter()
            .map(|m| m.container_path.clone())
            .collect()
    };
    let socket = "/run/nvidia-persistenced/socket".to_string();
    assert!(paths(false).contains(&socket));
    let without = paths(true);
    assert!(!without.contains(&socket), "{without:?}");
    assert_eq!(without.len(), paths(false).len() - 1);
}

/// The generator's spec (MIG names too) takes the fast YAML writer, whose text is the slow
/// path's (`serde_norway` with base-60 look-alikes quoted) byte for byte.
#[test]
fn the_generated_spec_is_written_as_serde_norway_writes_it() {
    let spec = generate(&fixtures::inventory_in("/usr/lib64"), &Options::default())
        .expect("the fixture host generates a spec");
    let slow = format!(
        "---\n{}",
        nvct_cdi::encode::quote_sexagesimal(&serde_norway::to_string(&spec).unwrap())
    );
    assert_eq!(nvct_cdi::encode::write(&spec), Some(slow));
}
