//! Whole-value tests of the planner: an inventory literal in, the complete plan out.

use super::*;

use crate::fixtures::{file, inventory_in, node, request};

fn inventory() -> Inventory {
    inventory_in("/usr/lib/x86_64-linux-gnu")
}

fn layout() -> Layout {
    Layout {
        lib_dir: Some("/usr/lib64".into()),
        lib32_dir: Some("/usr/lib".into()),
        glx_indirect: false,
    }
}

fn mount(host: &str, container: &str, kind: FileKind) -> FileMount {
    FileMount {
        host_path: host.into(),
        container_path: container.into(),
        kind,
    }
}

fn rules(nodes: &[DeviceNode]) -> Vec<CgroupRule> {
    nodes
        .iter()
        .map(|n| CgroupRule {
            major: n.major,
            minor: n.minor,
        })
        .collect()
}

#[test]
fn gpus_0_and_2_with_utility_and_compute() {
    let req = request(
        Devices::List(vec![DeviceId::Index(0), DeviceId::Index(2)]),
        &[Capability::Compute, Capability::Utility],
    );
    let got = plan(&req, &inventory(), &layout()).unwrap();
    let nodes = vec![
        node("/dev/nvidia-uvm", 508, 0),
        node("/dev/nvidia-uvm-tools", 508, 1),
        node("/dev/nvidia0", 195, 0),
        node("/dev/nvidia2", 195, 2),
        node("/dev/nvidiactl", 195, 255),
    ];
    let want = Plan {
        cgroup_rules: rules(&nodes),
        device_nodes: nodes,
        mounts: vec![
            mount(
                "/drv/lib/firmware/nvidia/550.54.15/gsp.bin",
                "/lib/firmware/nvidia/550.54.15/gsp.bin",
                FileKind::Firmware,
            ),
            mount(
                "/drv/usr/bin/nvidia-cuda-mps-control",
                "/usr/bin/nvidia-cuda-mps-control",
                FileKind::Binary,
            ),
            mount(
                "/drv/usr/bin/nvidia-smi",
                "/usr/bin/nvidia-smi",
                FileKind::Binary,
            ),
            mount(
                "/drv/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
                "/usr/lib64/libcuda.so.550.54.15",
                FileKind::Library,
            ),
            mount(
                "/drv/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                "/usr/lib64/libnvidia-ml.so.550.54.15",
                FileKind::Library,
            ),
        ],
        symlinks: vec![Symlink {
            target: "libcuda.so.1".into(),
            link: "/usr/lib64/libcuda.so".into(),
        }],
        cuda_compat: Some("550.54.15".into()),
        ldcache_dirs: vec!["/usr/lib64".into()],
        libcuda_dir: Some("/usr/lib64".into()),
        app_profile: false,
        proc_mask: Some(ProcMask {
            files: vec![
                ("gpus/0000:00:00.0/information".into(), "Model: a\n".into()),
                ("gpus/0000:02:00.0/information".into(), "Model: c\n".into()),
                ("params".into(), "ModifyDeviceFiles: 0\n".into()),
                ("registry".into(), "".into()),
                ("version".into(), "NVRM version: x\n".into()),
            ],
        }),
        notes: vec![],
    };
    assert_eq!(got, want);
}

#[test]
fn none_gives_driver_files_and_control_node_only() {
    let got = plan(
        &request(Devices::None, &[Capability::Utility]),
        &inventory(),
        &layout(),
    )
    .unwrap();
    let nodes = vec![node("/dev/nvidiactl", 195, 255)];
    let want = Plan {
        cgroup_rules: rules(&nodes),
        device_nodes: nodes,
        mounts: vec![
            mount(
                "/drv/lib/firmware/nvidia/550.54.15/gsp.bin",
                "/lib/firmware/nvidia/550.54.15/gsp.bin",
                FileKind::Firmware,
            ),
            mount(
                "/drv/usr/bin/nvidia-smi",
                "/usr/bin/nvidia-smi",
                FileKind::Binary,
            ),
            mount(
                "/drv/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                "/usr/lib64/libnvidia-ml.so.550.54.15",
                FileKind::Library,
            ),
        ],
        symlinks: vec![],
        cuda_compat: None,
        ldcache_dirs: vec!["/usr/lib64".into()],
        libcuda_dir: Some("/usr/lib64".into()),
        app_profile: false,
        proc_mask: Some(ProcMask {
            files: vec![
                ("params".into(), "ModifyDeviceFiles: 0\n".into()),
                ("registry".into(), "".into()),
                ("version".into(), "NVRM version: x\n".into()),
            ],
        }),
        notes: vec![],
    };
    assert_eq!(got, want);
}

#[test]
fn device_selection_cases() {
    let inv = inventory();
    let gpu_nodes = |p: &Plan| -> Vec<String> {
        p.device_nodes
            .iter()
            .map(|n| n.path.display().to_string())
            .filter(|p| p != "/dev/nvidiactl")
            .collect()
    };
    let cases: Vec<(&str, Devices, Result<Vec<&str>, PlanError>)> = vec![
        (
            "all",
            Devices::All,
            Ok(vec!["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2"]),
        ),
        (
            "by uuid",
            Devices::List(vec![DeviceId::Uuid("GPU-2".into())]),
            Ok(vec!["/dev/nvidia2"]),
        ),
        (
            "by bus id",
            Devices::List(vec![DeviceId::BusId("0000:01:00.0".into())]),
            Ok(vec!["/dev/nvidia1"]),
        ),
        (
            "mig by index",
            Devices::List(vec![DeviceId::MigIndex(1, 0)]),
            Ok(vec![
                "/dev/nvidia-caps/nvidia-cap21",
                "/dev/nvidia-caps/nvidia-cap22",
                "/dev/nvidia1",
            ]),
        ),
        (
            "mig by uuid",
            Devices::List(vec![DeviceId::Uuid("MIG-1a".into())]),
            Ok(vec![
                "/dev/nvidia-caps/nvidia-cap21",
                "/dev/nvidia-caps/nvidia-cap22",
                "/dev/nvidia1",
            ]),
        ),
        (
            "same gpu twice",
            Devices::List(vec![DeviceId::Index(1), DeviceId::Uuid("GPU-1".into())]),
            Ok(vec!["/dev/nvidia1"]),
        ),
        (
            "unknown index",
            Devices::List(vec![DeviceId::Index(7)]),
            Err(PlanError::UnknownDevice {
                id: DeviceId::Index(7),
                count: 3,
            }),
        ),
        (
            "unknown uuid",
            Devices::List(vec![DeviceId::Uuid("GPU-x".into())]),
            Err(PlanError::UnknownDevice {
                id: DeviceId::Uuid("GPU-x".into()),
                count: 3,
            }),
        ),
        (
            "mig on non-mig gpu",
            Devices::List(vec![DeviceId::MigIndex(0, 0)]),
            Err(PlanError::MigNotEnabled {
                id: "0:0".into(),
                gpu: 0,
            }),
        ),
    ];
    for (name, devices, want) in cases {
        let got =
            plan(&request(devices, &[Capability::Utility]), &inv, &layout()).map(|p| gpu_nodes(&p));
        assert_eq!(
            got,
            want.map(|v| v.into_iter().map(String::from).collect()),
            "case {name}"
        );
    }
}

#[test]
fn missing_control_node_is_an_error() {
    let mut inv = inventory();
    inv.nodes.retain(|n| n.path != Path::new("/dev/nvidiactl"));
    assert_eq!(
        plan(
            &request(Devices::All, &[Capability::Utility]),
            &inv,
            &layout()
        ),
        Err(PlanError::MissingNode("/dev/nvidiactl".into()))
    );
}

#[test]
fn requirement_cases() {
    let inv = inventory();
    let no_gpu = |term: &str| {
        format!("requirement term \"{term}\" not evaluated: the container gets no GPU")
    };
    let facts = "driver 550.54.15, cuda 12.4, no GPU".to_string();
    let cases: Vec<(&str, Result<Vec<String>, PlanError>)> = vec![
        // Without a GPU, arch and brand hold (libnvidia-container: "no device is visible").
        ("arch>=7.5", Ok(vec![no_gpu("arch>=7.5")])),
        ("arch=99.0 driver>=470", Ok(vec![no_gpu("arch=99.0")])),
        (
            "arch>=x86_64",
            Err(PlanError::BadRequirement("arch>=x86_64".into())),
        ),
        (
            "arch=amd64",
            Err(PlanError::BadRequirement("arch=amd64".into())),
        ),
        ("cuda>=12.0", Ok(vec![])),
        ("cuda>=12.4.0", Ok(vec![])),
        ("driver>=470,driver<600", Ok(vec![])),
        ("cuda>=13.0 driver>=550", Ok(vec![])),
        // The first alternative that holds ends the check.
        ("cuda>=12.0 brand=tesla", Ok(vec![])),
        ("brand=tesla,cuda>=12.0", Ok(vec![no_gpu("brand=tesla")])),
        (
            "cuda>=13.0",
            Err(PlanError::Unsatisfied {
                expr: "cuda>=13.0".into(),
                facts: facts.clone(),
            }),
        ),
        ("cuda~12", Err(PlanError::BadRequirement("cuda~12".into()))),
        ("gpu>=1", Err(PlanError::BadRequirement("gpu>=1".into()))),
        (
            "cuda>=abc",
            Err(PlanError::BadRequirement("cuda>=abc".into())),
        ),
        (
            "driver>=550.x",
            Err(PlanError::BadRequirement("driver>=550.x".into())),
        ),
        (
            "cuda>=12..0",
            Err(PlanError::BadRequirement("cuda>=12..0".into())),
        ),
        (
            "cuda>=99999999999999999999",
            Err(PlanError::BadRequirement(
                "cuda>=99999999999999999999".into(),
            )),
        ),
    ];
    for (expr, want) in cases {
        let req = Request {
            requirements: vec![expr.into()],
            ..request(Devices::None, &[])
        };
        assert_eq!(
            plan(&req, &inv, &layout()).map(|p| p.notes),
            want,
            "requirement {expr}"
        );
    }
}

/// `arch` is each selected GPU's CUDA compute capability, compared as a version, and every
/// GPU the container gets must meet the requirement (libnvidia-container's rule). The fixture:
/// GPUs 0 and 1 (MIG) at 9.0, GPU 2 at 8.0.
#[test]
fn arch_requirements_compare_each_selected_gpus_compute_capability() {
    let mut inv = inventory();
    inv.gpus[2].compute_capability = Some("8.0".into());
    let list =
        |ids: &[&str]| Devices::List(ids.iter().map(|i| DeviceId::parse(i).unwrap()).collect());
    let gpu = |i: u32, cc: &str| format!("; GPU {i}: arch {cc}, brand tesla");
    let unmet = |expr: &str, gpus: &[(u32, &str)], by: u32| {
        Err(PlanError::Unsatisfied {
            expr: expr.into(),
            facts: format!(
                "driver 550.54.15, cuda 12.4{}; not met by GPU {by}",
                gpus.iter().map(|(i, cc)| gpu(*i, cc)).collect::<String>()
            ),
        })
    };
    let cases: Vec<(&str, &str, Devices, Result<Vec<String>, PlanError>)> = vec![
        ("at least", "arch>=7.5", list(&["0"]), Ok(vec![])),
        ("equal", "arch=9.0", list(&["0"]), Ok(vec![])),
        ("equal, short", "arch=9", list(&["0"]), Ok(vec![])),
        ("==", "arch==9.0", list(&["0"]), Ok(vec![])),
        ("not equal", "arch!=8.0", list(&["0"]), Ok(vec![])),
        ("less", "arch<10.0", list(&["0"]), Ok(vec![])),
        ("numeric, not text", "arch>8.10", list(&["0"]), Ok(vec![])),
        (
            "too new",
            "arch>=10.0",
            list(&["0"]),
            unmet("arch>=10.0", &[(0, "9.0")], 0),
        ),
        (
            "the older GPU alone",
            "arch=9.0",
            list(&["2"]),
            unmet("arch=9.0", &[(2, "8.0")], 2),
        ),
        (
            "only the selected GPU counts",
            "arch=8.0",
            list(&["2"]),
            Ok(vec![]),
        ),
        (
            "every selected GPU must meet it",
            "arch>=9.0",
            list(&["0", "2"]),
            unmet("arch>=9.0", &[(0, "9.0"), (2, "8.0")], 2),
        ),
        (
            "alternatives per GPU",
            "arch=9.0 arch=8.0",
            list(&["0", "2"]),
            Ok(vec![]),
        ),
        (
            "all GPUs",
            "arch>=8.0,brand=tesla",
            Devices::All,
            Ok(vec![]),
        ),
        (
            "a MIG device: its parent's",
            "arch=9.0",
            list(&["1:0"]),
            Ok(vec![]),
        ),
        (
            "a MIG device and its parent count once",
            "arch<9.0",
            list(&["1", "1:0"]),
            unmet("arch<9.0", &[(1, "9.0")], 1),
        ),
    ];
    for (name, expr, devices, want) in cases {
        let req = Request {
            requirements: vec![expr.into()],
            ..request(devices, &[Capability::Utility])
        };
        assert_eq!(
            plan(&req, &inv, &layout()).map(|p| p.notes),
            want,
            "case {name}: {expr}"
        );
    }
    // GPUs read from /proc/driver/nvidia have no compute capability: noted, not enforced.
    inv.gpus[0].compute_capability = None;
    let req = Request {
        requirements: vec!["arch>=10.0".into()],
        ..request(list(&["0"]), &[Capability::Utility])
    };
    assert_eq!(
        plan(&req, &inv, &layout()).map(|p| p.notes),
        Ok(vec![
            "requirement term \"arch>=10.0\" not evaluated: arch is not known on this host".into()
        ])
    );
}

#[test]
fn unknown_layout_keeps_driver_paths_for_libraries() {
    let mut inv = inventory();
    inv.files.push(file(
        FileKind::Library,
        "libnvidia-cfg",
        "/usr/lib64/libnvidia-cfg.so.550.54.15",
    ));
    let got = plan(
        &request(Devices::None, &[Capability::Utility]),
        &inv,
        &Layout::UNKNOWN,
    )
    .unwrap();
    assert_eq!(
        got.mounts,
        vec![
            mount(
                "/drv/lib/firmware/nvidia/550.54.15/gsp.bin",
                "/lib/firmware/nvidia/550.54.15/gsp.bin",
                FileKind::Firmware
            ),
            mount(
                "/drv/usr/bin/nvidia-smi",
                "/usr/bin/nvidia-smi",
                FileKind::Binary
            ),
            mount(
                "/drv/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                FileKind::Library
            ),
            mount(
                "/drv/usr/lib64/libnvidia-cfg.so.550.54.15",
                "/usr/lib64/libnvidia-cfg.so.550.54.15",
                FileKind::Library
            ),
        ]
    );
    assert_eq!(
        got.ldcache_dirs,
        vec![
            PathBuf::from("/usr/lib/x86_64-linux-gnu"),
            PathBuf::from("/usr/lib64")
        ]
    );
}

#[test]
fn each_library_layout_whole_plan() {
    // (name, where the host's driver keeps its libraries, the image's lib dir): the plan mounts
    // each library from the driver's dir into the image's, refreshes that dir's cache and links
    // libcuda.so there. Debian/Ubuntu x86-64, RHEL/Fedora, Debian/Ubuntu aarch64 (Grace), and
    // a RHEL host with a Debian image.
    let cases = [
        (
            "debian x86-64",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
        ),
        ("rhel", "/usr/lib64", "/usr/lib64"),
        (
            "ubuntu aarch64",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
        ),
        (
            "rhel host, debian image",
            "/usr/lib64",
            "/usr/lib/x86_64-linux-gnu",
        ),
    ];
    for (name, host_dir, image_dir) in cases {
        let req = request(
            Devices::List(vec![DeviceId::Index(0)]),
            &[Capability::Compute, Capability::Utility],
        );
        let got = plan(
            &req,
            &inventory_in(host_dir),
            &Layout {
                lib_dir: Some(image_dir.into()),
                lib32_dir: None,
                glx_indirect: false,
            },
        )
        .unwrap();
        let nodes = vec![
            node("/dev/nvidia-uvm", 508, 0),
            node("/dev/nvidia-uvm-tools", 508, 1),
            node("/dev/nvidia0", 195, 0),
            node("/dev/nvidiactl", 195, 255),
        ];
        let want = Plan {
            cgroup_rules: rules(&nodes),
            device_nodes: nodes,
            mounts: vec![
                mount(
                    "/drv/lib/firmware/nvidia/550.54.15/gsp.bin",
                    "/lib/firmware/nvidia/550.54.15/gsp.bin",
                    FileKind::Firmware,
                ),
                mount(
                    "/drv/usr/bin/nvidia-cuda-mps-control",
                    "/usr/bin/nvidia-cuda-mps-control",
                    FileKind::Binary,
                ),
                mount(
                    "/drv/usr/bin/nvidia-smi",
                    "/usr/bin/nvidia-smi",
                    FileKind::Binary,
                ),
                mount(
                    &format!("/drv{host_dir}/libcuda.so.550.54.15"),
                    &format!("{image_dir}/libcuda.so.550.54.15"),
                    FileKind::Library,
                ),
                mount(
                    &format!("/drv{host_dir}/libnvidia-ml.so.550.54.15"),
                    &format!("{image_dir}/libnvidia-ml.so.550.54.15"),
                    FileKind::Library,
                ),
            ],
            symlinks: vec![Symlink {
                target: "libcuda.so.1".into(),
                link: Path::new(image_dir).join("libcuda.so"),
            }],
            cuda_compat: Some("550.54.15".into()),
            ldcache_dirs: vec![image_dir.into()],
            libcuda_dir: Some(image_dir.into()),
            app_profile: false,
            proc_mask: Some(ProcMask {
                files: vec![
                    ("gpus/0000:00:00.0/information".into(), "Model: a\n".into()),
                    ("params".into(), "ModifyDeviceFiles: 0\n".into()),
                    ("registry".into(), "".into()),
                    ("version".into(), "NVRM version: x\n".into()),
                ],
            }),
            notes: vec![],
        };
        let mut want = want; // the plan's order is sorted; the literal above is by kind
        want.mounts.sort();
        assert_eq!(got, want, "case {name}");
    }
}

#[test]
fn brand_requirements_hold_for_every_gpu_the_container_gets() {
    let inv = inventory(); // every GPU of the fixture is a "tesla"
    let cases: Vec<(&str, Devices, Result<Vec<&str>, PlanError>)> = vec![
        (
            "brand=tesla",
            Devices::List(vec![DeviceId::Index(0), DeviceId::Index(2)]),
            Ok(vec![]),
        ),
        ("brand=Tesla", Devices::All, Ok(vec![])),
        (
            "brand!=geforce",
            Devices::List(vec![DeviceId::Index(0)]),
            Ok(vec![]),
        ),
        (
            "brand=geforce brand=tesla",
            Devices::List(vec![DeviceId::Index(0)]),
            Ok(vec![]),
        ),
        (
            "brand=geforce",
            Devices::List(vec![DeviceId::Index(0), DeviceId::Index(2)]),
            Err(PlanError::Unsatisfied {
                expr: "brand=geforce".into(),
                facts:
                    "driver 550.54.15, cuda 12.4; GPU 0: arch 9.0, brand tesla; GPU 2: arch 9.0, \
                        brand tesla; not met by GPU 0"
                        .into(),
            }),
        ),
        (
            "brand>tesla",
            Devices::List(vec![DeviceId::Index(0)]),
            Err(PlanError::BadRequirement("brand>tesla".into())),
        ),
        (
            "brand=geforce",
            Devices::None,
            Ok(vec![
                "requirement term \"brand=geforce\" not evaluated: the container gets no GPU",
            ]),
        ),
    ];
    for (expr, devices, want) in cases {
        let req = Request {
            requirements: vec![expr.into()],
            ..request(devices.clone(), &[Capability::Utility])
        };
        assert_eq!(
            plan(&req, &inv, &layout()).map(|p| p.notes),
            want.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>()),
            "requirement {expr} for {devices:?}"
        );
    }
}

#[test]
fn config_files_per_capability() {
    let mut inv = inventory();
    let icd = "/usr/share/vulkan/icd.d/nvidia_icd.json";
    let egl = "/usr/share/glvnd/egl_vendor.d/10_nvidia.json";
    let xorg = "/usr/lib/xorg/modules/drivers/nvidia_drv.so";
    for path in [icd, egl, xorg] {
        let dir = Path::new(path).parent().unwrap().to_str().unwrap();
        inv.files.push(file(FileKind::Config, dir, path));
    }
    // (case, capabilities, the config files mounted, each at its own path)
    let cases: &[(&str, &[Capability], &[&str])] = &[
        ("graphics", &[Capability::Graphics], &[egl, icd]),
        ("display", &[Capability::Display], &[xorg]),
        (
            "graphics and display",
            &[Capability::Graphics, Capability::Display],
            &[xorg, egl, icd],
        ),
        ("compute", &[Capability::Compute], &[]),
    ];
    for (name, caps, want) in cases {
        let got = plan(&request(Devices::None, caps), &inv, &layout()).unwrap();
        let configs: Vec<&Path> = got
            .mounts
            .iter()
            .filter(|m| m.kind == FileKind::Config)
            .map(|m| {
                assert_eq!(
                    m.host_path,
                    Path::new("/drv").join(m.container_path.strip_prefix("/").unwrap()),
                    "{name}"
                );
                m.container_path.as_path()
            })
            .collect();
        let want: Vec<&Path> = want.iter().map(Path::new).collect();
        assert_eq!(configs, want, "{name}");
    }
}

#[test]
fn imex_channel_cases() {
    use crate::request::ImexChannels;
    let mut inv = inventory();
    for ch in 0..2 {
        inv.nodes.push(crate::fixtures::node(
            &format!("/dev/nvidia-caps-imex-channels/channel{ch}"),
            510,
            ch,
        ));
    }
    let imex = |n: &str| PathBuf::from(format!("/dev/nvidia-caps-imex-channels/{n}"));
    // (case, channels asked for, the channel nodes the container gets, or the missing node)
    let cases: Vec<(&str, Option<ImexChannels>, Result<Vec<PathBuf>, String>)> = vec![
        ("none", None, Ok(vec![])),
        (
            "one",
            Some(ImexChannels::List(vec![1])),
            Ok(vec![imex("channel1")]),
        ),
        (
            "two",
            Some(ImexChannels::List(vec![0, 1])),
            Ok(vec![imex("channel0"), imex("channel1")]),
        ),
        (
            "a channel the host lacks",
            Some(ImexChannels::List(vec![7])),
            Err("/dev/nvidia-caps-imex-channels/channel7".into()),
        ),
    ];
    for (name, channels, want) in cases {
        let req = Request {
            imex_channels: channels,
            ..request(Devices::None, &[Capability::Utility])
        };
        let got = plan(&req, &inv, &layout()).map(|p| {
            let rules: Vec<(u32, u32)> =
                p.cgroup_rules.iter().map(|r| (r.major, r.minor)).collect();
            p.device_nodes
                .into_iter()
                .filter(|n| n.path.starts_with("/dev/nvidia-caps-imex-channels"))
                .inspect(|n| {
                    assert!(
                        rules.contains(&(n.major, n.minor)),
                        "{name}: a rule for {n:?}"
                    )
                })
                .map(|n| n.path)
                .collect::<Vec<_>>()
        });
        match (got, want) {
            (Ok(g), Ok(w)) => assert_eq!(g, w, "{name}"),
            (Err(PlanError::MissingNode(p)), Err(w)) => assert_eq!(p, w, "{name}"),
            (g, w) => panic!("{name}: got {g:?}, want {w:?}"),
        }
    }
}

/// The opt-in sets (`NVIDIA_GDS=enabled`, ...): each set's nodes the host has, with their
/// rules; GDS's files only with its nodes; a set the host lacks is a note, not a refusal.
#[test]
fn opt_in_sets() {
    use nvct_host::optin::OptIn;
    let mut inv = inventory();
    let extra = [
        node("/dev/nvidia-fs0", 240, 0),
        node("/dev/nvidia-fs1", 240, 1),
        node("/dev/infiniband/uverbs0", 231, 192),
        node("/dev/infiniband/rdma_cm", 10, 58),
        node("/dev/gdrdrv", 241, 0),
    ];
    inv.nodes.extend(extra.iter().cloned());
    let mut cufile = file(FileKind::Config, "optin-gds", "/etc/cufile.json");
    cufile.host_path = "/host/etc/cufile.json".into();
    inv.files.push(cufile);
    let base = plan(
        &request(Devices::List(vec![DeviceId::Index(0)]), &[]),
        &inv,
        &layout(),
    )
    .unwrap();
    let gds_mount = mount(
        "/host/etc/cufile.json",
        "/etc/cufile.json",
        FileKind::Config,
    );
    // (name, sets, extra nodes, extra mounts, note)
    let cases: Vec<(
        &str,
        Vec<OptIn>,
        Vec<DeviceNode>,
        Vec<FileMount>,
        Option<&str>,
    )> = vec![
        ("none", vec![], vec![], vec![], None),
        (
            "gds",
            vec![OptIn::Gds],
            extra[..2].to_vec(),
            vec![gds_mount.clone()],
            None,
        ),
        (
            "mofed",
            vec![OptIn::Mofed],
            extra[2..4].to_vec(),
            vec![],
            None,
        ),
        (
            "gdrcopy",
            vec![OptIn::Gdrcopy],
            extra[4..].to_vec(),
            vec![],
            None,
        ),
        (
            "nvswitch: none on this host",
            vec![OptIn::Nvswitch],
            vec![],
            vec![],
            Some("NVIDIA_NVSWITCH=enabled: the host has no nvswitch device nodes"),
        ),
        (
            "all four",
            OptIn::ALL.to_vec(),
            extra.to_vec(),
            vec![gds_mount.clone()],
            Some("NVIDIA_NVSWITCH=enabled: the host has no nvswitch device nodes"),
        ),
    ];
    for (name, sets, nodes, mounts, note) in cases {
        let mut req = request(Devices::List(vec![DeviceId::Index(0)]), &[]);
        req.opt_ins = sets.into_iter().collect();
        let got = plan(&req, &inv, &layout()).unwrap();
        let mut want_nodes = base.device_nodes.clone();
        want_nodes.extend(nodes);
        want_nodes.sort();
        assert_eq!(got.device_nodes, want_nodes, "case {name}");
        assert_eq!(got.cgroup_rules, rules(&want_nodes), "case {name}");
        let mut want_mounts = base.mounts.clone();
        want_mounts.extend(mounts);
        want_mounts.sort();
        assert_eq!(got.mounts, want_mounts, "case {name}");
        assert_eq!(
            got.notes.iter().any(|n| Some(n.as_str()) == note),
            note.is_some(),
            "case {name}: {:?}",
            got.notes
        );
    }
    // GDS's files without its nodes: nothing.
    let mut no_nodes = inv.clone();
    no_nodes.nodes.retain(|n| !OptIn::Gds.has_node(&n.path));
    let mut req = request(Devices::List(vec![DeviceId::Index(0)]), &[]);
    req.opt_ins = [OptIn::Gds].into();
    assert_eq!(
        plan(&req, &no_nodes, &layout()).unwrap().mounts,
        base.mounts
    );
}

#[test]
fn compat32_cases() {
    // The host's 32-bit builds (found through its ld cache's i386 entries) of libcuda,
    // libnvidia-ml and libGLX_nvidia.
    let lib32 = "/usr/lib/i386-linux-gnu";
    let mut inv = inventory();
    for family in ["libcuda", "libnvidia-ml", "libGLX_nvidia"] {
        inv.files.push(file(
            FileKind::Library32,
            family,
            &format!("{lib32}/{family}.so.550.54.15"),
        ));
    }
    let debian = Layout {
        lib_dir: Some("/usr/lib/x86_64-linux-gnu".into()),
        lib32_dir: Some(lib32.into()),
        glx_indirect: false,
    };
    let rhel = Layout {
        lib_dir: Some("/usr/lib64".into()),
        lib32_dir: Some("/usr/lib".into()),
        glx_indirect: false,
    };
    let no_lib32 = Layout {
        lib_dir: Some("/usr/lib64".into()),
        lib32_dir: None,
        glx_indirect: false,
    };
    use Capability::*;
    // (case, capabilities, layout, the 32-bit libraries the container gets (container paths),
    // ldcache_dirs): the whole plan is the plan without compat32 plus exactly these.
    let cases: Vec<(&str, Vec<Capability>, &Layout, Vec<&str>, Vec<&str>)> = vec![
        (
            "compute,compat32 in a debian image",
            vec![Compute, Compat32],
            &debian,
            vec!["/usr/lib/i386-linux-gnu/libcuda.so.550.54.15"],
            vec![lib32, "/usr/lib/x86_64-linux-gnu"],
        ),
        (
            "graphics,compat32,utility: each requested family's 32-bit build",
            vec![Graphics, Compat32, Utility],
            &debian,
            vec![
                "/usr/lib/i386-linux-gnu/libGLX_nvidia.so.550.54.15",
                "/usr/lib/i386-linux-gnu/libnvidia-ml.so.550.54.15",
            ],
            vec![lib32, "/usr/lib/x86_64-linux-gnu"],
        ),
        (
            "rhel image: /usr/lib",
            vec![Compute, Utility, Compat32],
            &rhel,
            vec![
                "/usr/lib/libcuda.so.550.54.15",
                "/usr/lib/libnvidia-ml.so.550.54.15",
            ],
            vec!["/usr/lib", "/usr/lib64"],
        ),
        (
            "unknown layout (a CDI spec): the driver's own 32-bit dir",
            vec![Compute, Compat32],
            &Layout::UNKNOWN,
            vec!["/usr/lib/i386-linux-gnu/libcuda.so.550.54.15"],
            vec![lib32, "/usr/lib/x86_64-linux-gnu"],
        ),
        (
            "video,compat32: the host has no 32-bit build of a video library",
            vec![Video, Compat32],
            &debian,
            vec![],
            vec!["/usr/lib/x86_64-linux-gnu"],
        ),
        (
            "no compat32: none",
            vec![Compute, Utility],
            &debian,
            vec![],
            vec!["/usr/lib/x86_64-linux-gnu"],
        ),
        (
            "an image whose every 32-bit dir is its 64-bit one: none",
            vec![Compute, Utility, Compat32],
            &no_lib32,
            vec![],
            vec!["/usr/lib64"],
        ),
    ];
    for (name, caps, layout, libs32, dirs) in cases {
        let req = request(Devices::List(vec![DeviceId::Index(0)]), &caps);
        let got = plan(&req, &inv, layout).unwrap();
        let without: Vec<Capability> = caps.iter().copied().filter(|c| *c != Compat32).collect();
        let mut want = plan(
            &request(Devices::List(vec![DeviceId::Index(0)]), &without),
            &inv,
            layout,
        )
        .unwrap();
        for lib in &libs32 {
            let file = Path::new(lib).file_name().unwrap();
            want.mounts.push(mount(
                Path::new("/drv/usr/lib/i386-linux-gnu")
                    .join(file)
                    .to_str()
                    .unwrap(),
                lib,
                FileKind::Library32,
            ));
        }
        want.mounts.sort();
        want.ldcache_dirs = dirs.iter().map(PathBuf::from).collect();
        assert_eq!(got, want, "case {name}");
        // The 32-bit libraries never get the 64-bit libcuda.so link.
        assert!(
            got.symlinks
                .iter()
                .all(|l| !l.link.starts_with("/usr/lib/i386-linux-gnu")),
            "case {name}"
        );
    }
}

#[test]
fn drm_node_cases() {
    // GPU 0 has card1 and renderD128 with both by-path links; GPU 1 (in MIG mode) card2 and
    // renderD129 without links; GPU 2 none (no sysfs drm directory, or no nodes).
    let mut inv = inventory();
    let bus = |i: u32| inv.gpus[i as usize].bus_id.clone();
    let (bus0, bus1, bus2) = (bus(0), bus(1), bus(2));
    let dri = |name: &str, minor| node(&format!("/dev/dri/{name}"), 226, minor);
    let by_path = |kind: &str, target: &str| {
        (
            PathBuf::from(target),
            PathBuf::from(format!("/dev/dri/by-path/pci-{bus0}-{kind}")),
        )
    };
    let without_drm = inv.clone();
    inv.nodes.extend([
        dri("card1", 1),
        dri("renderD128", 128),
        dri("card2", 2),
        dri("renderD129", 129),
    ]);
    inv.nodes.sort();
    inv.drm.insert(
        bus0.clone(),
        nvct_model::Drm {
            nodes: vec!["/dev/dri/card1".into(), "/dev/dri/renderD128".into()],
            by_path: vec![
                by_path("card", "../card1"),
                by_path("render", "../renderD128"),
            ],
        },
    );
    inv.drm.insert(
        bus1.clone(),
        nvct_model::Drm {
            nodes: vec!["/dev/dri/card2".into(), "/dev/dri/renderD129".into()],
            by_path: vec![],
        },
    );
    let links0 = vec![
        Symlink {
            target: "../card1".into(),
            link: format!("/dev/dri/by-path/pci-{bus0}-card").into(),
        },
        Symlink {
            target: "../renderD128".into(),
            link: format!("/dev/dri/by-path/pci-{bus0}-render").into(),
        },
    ];
    let no_drm_note = |i: u32, bus: &str| {
        format!(
            "GPU {i} ({bus}) has no DRM nodes on the host (no /dev/dri card or render node \
             under its sysfs drm directory): none given"
        )
    };
    use Capability::*;
    // (case, devices, capabilities, the DRM nodes added, the links added, the notes)
    let cases: Vec<(
        &str,
        Vec<DeviceId>,
        Vec<Capability>,
        Vec<DeviceNode>,
        Vec<Symlink>,
        Vec<String>,
    )> = vec![
        (
            "graphics on GPU 0: its nodes and by-path links",
            vec![DeviceId::Index(0)],
            vec![Graphics, Utility],
            vec![dri("card1", 1), dri("renderD128", 128)],
            links0.clone(),
            vec![],
        ),
        (
            "display on GPUs 0 and 1: each GPU's own nodes, links where the host has them",
            vec![DeviceId::Index(0), DeviceId::Index(1)],
            vec![Display],
            vec![
                dri("card1", 1),
                dri("card2", 2),
                dri("renderD128", 128),
                dri("renderD129", 129),
            ],
            links0.clone(),
            vec![],
        ),
        (
            "graphics on GPU 2, which has none: a note",
            vec![DeviceId::Index(2)],
            vec![Graphics],
            vec![],
            vec![],
            vec![no_drm_note(2, &bus2)],
        ),
        (
            "compute on GPU 0: none",
            vec![DeviceId::Index(0)],
            vec![Compute, Utility],
            vec![],
            vec![],
            vec![],
        ),
        (
            "graphics on MIG device 1:0: none (upstream: only MIG devices with gfx)",
            vec![DeviceId::MigIndex(1, 0)],
            vec![Graphics],
            vec![],
            vec![],
            vec![],
        ),
    ];
    for (name, ids, caps, nodes, links, notes) in cases {
        let req = request(Devices::List(ids), &caps);
        let got = plan(&req, &inv, &layout()).unwrap();
        // The same plan on a host without DRM nodes, with them added.
        let mut want = plan(&req, &without_drm, &layout()).unwrap();
        want.device_nodes.extend(nodes);
        want.device_nodes.sort();
        want.cgroup_rules = rules(&want.device_nodes);
        want.symlinks.extend(links);
        want.symlinks.sort();
        // (its notes: the DRM ones of this host first, then the rest)
        let rest = want
            .notes
            .iter()
            .filter(|n| !n.contains("no DRM nodes"))
            .cloned();
        want.notes = notes.into_iter().chain(rest).collect();
        assert_eq!(got, want, "case {name}");
    }
}

#[test]
fn gbm_and_glx_indirect_cases() {
    // The host's libnvidia-allocator (GBM's backend) and libGLX_nvidia.
    let lib = "/usr/lib/x86_64-linux-gnu";
    let base = inventory();
    let mut inv = base.clone();
    for family in ["libnvidia-allocator", "libGLX_nvidia"] {
        inv.files.push(file(
            FileKind::Library,
            family,
            &format!("{lib}/{family}.so.550.54.15"),
        ));
    }
    let debian = |glx_indirect| Layout {
        lib_dir: Some(lib.into()),
        lib32_dir: Some("/usr/lib/i386-linux-gnu".into()),
        glx_indirect,
    };
    let gbm = |dir: &str| Symlink {
        target: "../libnvidia-allocator.so.1".into(),
        link: format!("{dir}/gbm/nvidia-drm_gbm.so").into(),
    };
    let glx = |dir: &str| Symlink {
        target: "libGLX_nvidia.so.550.54.15".into(),
        link: format!("{dir}/libGLX_indirect.so.0").into(),
    };
    use Capability::*;
    // (case, capabilities, layout, the libraries mounted from the two, the links added)
    let cases: Vec<(&str, Vec<Capability>, Layout, Vec<&str>, Vec<Symlink>)> = vec![
        (
            "graphics, an image without libGLX_indirect: both links",
            vec![Graphics],
            debian(false),
            vec!["libGLX_nvidia", "libnvidia-allocator"],
            vec![gbm(lib), glx(lib)],
        ),
        (
            "graphics, an image with Mesa's libGLX_indirect: it keeps it",
            vec![Graphics],
            debian(true),
            vec!["libGLX_nvidia", "libnvidia-allocator"],
            vec![gbm(lib)],
        ),
        (
            "display: the same libraries and links",
            vec![Display],
            debian(false),
            vec!["libGLX_nvidia", "libnvidia-allocator"],
            vec![gbm(lib), glx(lib)],
        ),
        (
            "graphics, layout unknown (a CDI spec): both, at the driver's paths",
            vec![Graphics],
            Layout::UNKNOWN,
            vec!["libGLX_nvidia", "libnvidia-allocator"],
            vec![gbm(lib), glx(lib)],
        ),
        (
            "compute: the allocator, no GBM link",
            vec![Compute],
            debian(false),
            vec!["libnvidia-allocator"],
            vec![],
        ),
    ];
    for (name, caps, layout, libs, links) in cases {
        let req = request(Devices::None, &caps);
        let got = plan(&req, &inv, &layout).unwrap();
        // The plan on a host without the two libraries, plus exactly these.
        let mut want = plan(&req, &base, &layout).unwrap();
        for family in libs {
            let path = format!("{lib}/{family}.so.550.54.15");
            want.mounts
                .push(mount(&format!("/drv{path}"), &path, FileKind::Library));
        }
        want.mounts.sort();
        want.ldcache_dirs = vec![lib.into()];
        want.libcuda_dir = Some(lib.into());
        want.symlinks.extend(links);
        want.symlinks.sort();
        assert_eq!(got, want, "case {name}");
    }
}

#[test]
fn needs_nvml_cdi_cases() {
    let req = |devices: Devices| request(devices, &[]);
    let cases = [
        (
            "indices",
            req(Devices::List(vec![DeviceId::Index(0)])),
            false,
        ),
        (
            "a MIG device",
            req(Devices::List(vec![DeviceId::MigIndex(0, 1)])),
            true,
        ),
        ("all: which GPUs are in MIG mode", req(Devices::All), true),
    ];
    for (name, r, want) in cases {
        assert_eq!(needs_nvml_cdi(&r), want, "case {name}");
    }
}

#[test]
fn needs_nvml_cases() {
    let list =
        |ids: &[&str]| Devices::List(ids.iter().map(|i| DeviceId::parse(i).unwrap()).collect());
    let with = |devices: Devices, requirements: &[&str]| Request {
        requirements: requirements.iter().map(|s| s.to_string()).collect(),
        ..request(devices, &[])
    };
    let cases = [
        ("index", with(list(&["0", "1"]), &[]), false),
        (
            "GPU UUID",
            with(list(&["GPU-8f6b4f47-0000-0000-0000-000000000000"]), &[]),
            false,
        ),
        ("bus id", with(list(&["0000:3b:00.0"]), &[]), false),
        ("all", with(Devices::All, &[]), false),
        ("MIG index", with(list(&["0", "0:1"]), &[]), true),
        (
            "MIG UUID",
            with(list(&["MIG-8f6b4f47-0000-0000-0000-000000000000"]), &[]),
            true,
        ),
        ("driver term", with(Devices::All, &["driver>=535"]), false),
        (
            "arch term (a compute capability)",
            with(Devices::All, &["driver>=535 arch>=7.5"]),
            true,
        ),
        ("cuda term", with(Devices::All, &["cuda>=12.0"]), true),
        (
            "brand term in an alternative",
            with(Devices::All, &["driver>=535 brand=tesla"]),
            true,
        ),
        // Not a term the planner reads: it refuses the request, NVML or not.
        (
            "an unknown key",
            with(Devices::All, &["BRAND=tesla"]),
            false,
        ),
    ];
    for (name, r, want) in cases {
        assert_eq!(needs_nvml(&r), want, "case {name}");
    }
}

#[test]
fn unknown_device_names_the_indices_there_are() {
    let cases = [
        ("none", 0, "this host has no GPU;"),
        ("one", 1, "this host has 1 GPU (index 0);"),
        ("eight", 8, "this host has 8 GPUs (indices 0 to 7);"),
    ];
    for (name, count, want) in cases {
        let text = PlanError::UnknownDevice {
            id: DeviceId::Index(9),
            count,
        }
        .to_string();
        assert!(text.contains(want), "case {name}: {text}");
    }
}

/// The `/proc/driver/nvidia` mask keeps the `capabilities/` access files of the container's own
/// MIG devices (libnvidia-container mounts them for each), by index or UUID, and the MIG
/// config / monitor files only when asked for; never another device's.
#[test]
fn proc_mask_keeps_the_mig_devices_own_capability_files() {
    let inv = inventory(); // GPU 1: MIG device 1:0 (gi 2, ci 0)
    let base = ["params", "registry", "version"];
    let gi = "capabilities/gpu1/mig/gi2/access";
    let ci = "capabilities/gpu1/mig/gi2/ci0/access";
    let config = "capabilities/mig/config";
    let list =
        |ids: &[&str]| Devices::List(ids.iter().map(|i| DeviceId::parse(i).unwrap()).collect());
    let cases: Vec<(&str, Request, Vec<&str>)> = vec![
        ("MIG by index", request(list(&["1:0"]), &[]), vec![gi, ci]),
        ("MIG by UUID", request(list(&["MIG-1a"]), &[]), vec![gi, ci]),
        (
            "the parent GPU is not its MIG devices",
            request(list(&["1"]), &[]),
            vec![],
        ),
        ("another GPU", request(list(&["0"]), &[]), vec![]),
        (
            "MIG config asked for",
            Request {
                mig_config: Some(Devices::All),
                ..request(list(&["1:0"]), &[])
            },
            vec![gi, ci, config],
        ),
        (
            "MIG monitor asked for, the host has no monitor file",
            Request {
                mig_monitor: Some(Devices::All),
                ..request(list(&["0"]), &[])
            },
            vec![],
        ),
    ];
    let mut inv = inv;
    inv.mig_minors.insert("config".into(), 1);
    inv.mig_minors.insert("monitor".into(), 2);
    inv.nodes.push(node("/dev/nvidia-caps/nvidia-cap1", 509, 1));
    inv.nodes.push(node("/dev/nvidia-caps/nvidia-cap2", 509, 2));
    for (name, req, want_caps) in cases {
        let got = plan(&req, &inv, &layout()).unwrap_or_else(|e| panic!("case {name}: {e}"));
        let files: Vec<String> = got
            .proc_mask
            .unwrap()
            .files
            .into_iter()
            .map(|(p, _)| p.display().to_string())
            .filter(|p| !p.starts_with("gpus/"))
            .collect();
        let mut want: Vec<String> = base
            .iter()
            .chain(&want_caps)
            .map(|s| s.to_string())
            .collect();
        want.sort();
        assert_eq!(files, want, "case {name}");
    }
    // The files keep the host's contents (the driver's user space reads the cap minor there).
    let got = plan(&request(list(&["1:0"]), &[]), &inv, &layout()).unwrap();
    assert!(got
        .proc_mask
        .unwrap()
        .files
        .contains(&(ci.into(), "DeviceFileMinor: 22\n".into())));
}

/// The VDPAU backend keeps its `vdpau/` subdirectory, `NVIDIA_CTK_LIBCUDA_DIR` names the
/// library directory (not `vdpau/`), and any capability asks for the application profile.
#[test]
fn vdpau_libcuda_dir_and_app_profile_cases() {
    let lib = "/usr/lib/x86_64-linux-gnu";
    let mut inv = inventory_in(lib);
    inv.files.push(file(
        FileKind::Library,
        "libvdpau_nvidia",
        &format!("{lib}/vdpau/libvdpau_nvidia.so.550.54.15"),
    ));
    let vdpau = |dir: &str| format!("{dir}/vdpau/libvdpau_nvidia.so.550.54.15");
    type Case<'a> = (
        &'a str,
        &'a [Capability],
        Layout,
        Option<String>,
        Option<&'a str>,
        bool,
    );
    let cases: Vec<Case> = vec![
        (
            "video, image layout: vdpau/ under the image's lib dir",
            &[Capability::Video],
            layout(),
            Some(vdpau("/usr/lib64")),
            Some("/usr/lib64"),
            false,
        ),
        (
            "every capability, unknown layout (a spec): the driver root's path, the profile",
            &Capability::ALL,
            Layout::UNKNOWN,
            Some(vdpau(lib)),
            Some(lib),
            true,
        ),
        (
            "compute: no vdpau, no profile (no EGL or Vulkan without graphics)",
            &[Capability::Compute],
            layout(),
            None,
            Some("/usr/lib64"),
            false,
        ),
        (
            "video: no profile",
            &[Capability::Video, Capability::Compute],
            layout(),
            Some(vdpau("/usr/lib64")),
            Some("/usr/lib64"),
            false,
        ),
        ("no capability: nothing", &[], layout(), None, None, false),
        (
            "graphics: the profile",
            &[Capability::Graphics],
            layout(),
            None,
            None,
            true,
        ),
        (
            "display: the profile",
            &[Capability::Display, Capability::Utility],
            layout(),
            None,
            Some("/usr/lib64"),
            true,
        ),
    ];
    for (name, caps, layout, want_vdpau, want_dir, want_profile) in cases {
        let got = plan(&request(Devices::All, caps), &inv, &layout).unwrap();
        let vdpau_mount = got
            .mounts
            .iter()
            .find(|m| m.host_path.ends_with("vdpau/libvdpau_nvidia.so.550.54.15"))
            .map(|m| m.container_path.display().to_string());
        assert_eq!(vdpau_mount, want_vdpau, "case {name}: vdpau mount");
        if let Some(path) = &want_vdpau {
            let dir = Path::new(path).parent().unwrap().to_path_buf();
            assert!(got.ldcache_dirs.contains(&dir), "case {name}: ld cache");
        }
        assert_eq!(got.libcuda_dir.as_deref(), want_dir, "case {name}: dir");
        assert_eq!(got.app_profile, want_profile, "case {name}: profile");
    }
}
