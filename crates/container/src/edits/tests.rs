use super::*;

fn args(s: &[&str]) -> Vec<String> {
    s.iter().map(|a| a.to_string()).collect()
}

fn link(t: &str, l: &str) -> Symlink {
    Symlink {
        target: t.into(),
        link: l.into(),
    }
}

fn edits_of(a: &[&str]) -> Edits {
    match parse(&args(a)).expect("parses").invocation {
        Invocation::Edits(e) => e,
        other => panic!("{a:?}: {other:?}"),
    }
}

/// One value per field (and one with every field), each written as separate hooks and as one
/// `apply-edits` hook, must read back as the same value.
#[test]
fn every_field_round_trips_through_both_hook_forms() {
    let ld = |ldconfig: Option<&str>, native: bool| LdCache {
        folders: vec!["/usr/lib64".into(), "/usr/lib/x86_64-linux-gnu".into()],
        ldconfig: ldconfig.map(PathBuf::from),
        native,
    };
    let compat = |dir: &str| CudaCompat {
        host_driver_version: "550.54.15".into(),
        dir: dir.into(),
    };
    let all = Edits {
        links: Some(vec![
            link("libcuda.so.1", "/usr/lib64/libcuda.so"),
            link("../card1", "/dev/dri/by-path/pci-0000:3b:00.0-card"),
        ]),
        mask: Some("/host/proc".into()),
        cuda_compat: Some(compat("/opt/compat")),
        ldcache: Some(ld(Some("/usr/sbin/ldconfig.real"), false)),
        app_profile: true,
    };
    let cases: &[(&str, Edits)] = &[
        (
            "links",
            Edits {
                links: all.links.clone(),
                ..Edits::default()
            },
        ),
        (
            "no links (an empty create-symlinks)",
            Edits {
                links: Some(vec![]),
                ..Edits::default()
            },
        ),
        (
            "mask, default proc root",
            Edits {
                mask: Some(DEFAULT_PROC_ROOT.into()),
                ..Edits::default()
            },
        ),
        (
            "mask, other proc root",
            Edits {
                mask: all.mask.clone(),
                ..Edits::default()
            },
        ),
        (
            "cuda compat, default dir",
            Edits {
                cuda_compat: Some(compat(ldso_conf::CUDA_COMPAT_DIR)),
                ..Edits::default()
            },
        ),
        (
            "cuda compat, other dir",
            Edits {
                cuda_compat: Some(compat("/opt/compat")),
                ..Edits::default()
            },
        ),
        (
            "ld cache, defaults",
            Edits {
                ldcache: Some(ld(None, true)),
                ..Edits::default()
            },
        ),
        (
            "ld cache, ldconfig path and ldconfig only",
            Edits {
                ldcache: all.ldcache.clone(),
                ..Edits::default()
            },
        ),
        (
            "application profile",
            Edits {
                app_profile: true,
                ..Edits::default()
            },
        ),
        ("every field", all.clone()),
    ];
    for (name, e) in cases {
        let one = e.to_apply_edits();
        assert_eq!(
            &edits_of(&one.iter().map(String::as_str).collect::<Vec<_>>()),
            e,
            "case {name}: apply-edits {one:?}"
        );
        let hooks = e.to_hooks();
        let mut merged = Edits::default();
        for h in &hooks {
            let got = edits_of(&h.iter().map(String::as_str).collect::<Vec<_>>());
            merged.links = merged.links.or(got.links);
            merged.mask = merged.mask.or(got.mask);
            merged.cuda_compat = merged.cuda_compat.or(got.cuda_compat);
            merged.ldcache = merged.ldcache.or(got.ldcache);
            merged.app_profile |= got.app_profile;
        }
        assert_eq!(&merged, e, "case {name}: hooks {hooks:?}");
    }
}

/// The order of the separate hooks is the order [`apply`] makes the edits in.
#[test]
fn hooks_are_written_in_the_apply_order() {
    let e = Edits {
        links: Some(vec![link("a", "/b")]),
        mask: Some(DEFAULT_PROC_ROOT.into()),
        cuda_compat: Some(CudaCompat {
            host_driver_version: "1".into(),
            dir: ldso_conf::CUDA_COMPAT_DIR.into(),
        }),
        ldcache: Some(LdCache {
            folders: vec!["/l".into()],
            ldconfig: None,
            native: true,
        }),
        app_profile: true,
    };
    let names: Vec<String> = e.to_hooks().into_iter().map(|h| h[0].clone()).collect();
    assert_eq!(
        names,
        [
            "create-symlinks",
            "disable-device-node-modification",
            "enable-cuda-compat",
            "update-ldcache",
            "update-application-profile"
        ]
    );
}

#[test]
fn parse_cases() {
    type Want = Result<Invocation, EditsError>;
    let cases: &[(&str, &[&str], Want)] = &[
        ("no hook", &[], Ok(Invocation::Help)),
        ("help", &["update-ldcache", "--help"], Ok(Invocation::Help)),
        (
            "unknown hook (a newer spec's)",
            &["chmod", "--mode", "755"],
            Ok(Invocation::Unknown("chmod".into())),
        ),
        (
            "keep-device-rules (createRuntime, no flags)",
            &["keep-device-rules"],
            Ok(Invocation::KeepDeviceRules),
        ),
        (
            "keep-device-rules takes no flag",
            &["keep-device-rules", "--folder", "/x"],
            Err(EditsError::UnknownFlag {
                hook: "keep-device-rules".into(),
                flag: "--folder".into(),
            }),
        ),
        (
            "flag=value",
            &["update-ldcache", "--folder=/usr/lib64"],
            Ok(Invocation::Edits(Edits {
                ldcache: Some(LdCache {
                    folders: vec!["/usr/lib64".into()],
                    ldconfig: None,
                    native: true,
                }),
                ..Edits::default()
            })),
        ),
        (
            "host CUDA version given: forward compat stays off",
            &[
                "enable-cuda-compat",
                "--host-driver-version",
                "550.1",
                "--host-cuda-version",
                "12.4",
            ],
            Ok(Invocation::Edits(Edits::default())),
        ),
        (
            "apply-edits without markers asks for nothing",
            &["apply-edits", "--folder", "/x"],
            Ok(Invocation::Edits(Edits::default())),
        ),
        (
            "another hook's flag",
            &["create-symlinks", "--folder", "/x"],
            Err(EditsError::UnknownFlag {
                hook: "create-symlinks".into(),
                flag: "--folder".into(),
            }),
        ),
        (
            "missing value",
            &["update-ldcache", "--folder"],
            Err(EditsError::MissingValue {
                hook: "update-ldcache".into(),
                flag: "--folder".into(),
            }),
        ),
        (
            "stray value",
            &["update-ldcache", "/usr/lib64"],
            Err(EditsError::Stray {
                hook: "update-ldcache".into(),
                arg: "/usr/lib64".into(),
            }),
        ),
        (
            "bad link",
            &["create-symlinks", "--link", "x::y"],
            Err(EditsError::BadLink("x::y".into())),
        ),
    ];
    for (name, a, want) in cases {
        let got = parse(&args(a)).map(|p| p.invocation);
        assert_eq!(&got, want, "case {name}");
    }
}

#[test]
fn container_spec_is_read_anywhere() {
    for a in [
        &["--container-spec", "/s.json", "update-application-profile"][..],
        &["update-application-profile", "--container-spec=/s.json"],
    ] {
        let p = parse(&args(a)).unwrap();
        assert_eq!(p.container_spec, Some(PathBuf::from("/s.json")), "{a:?}");
        assert_eq!(
            p.invocation,
            Invocation::Edits(Edits {
                app_profile: true,
                ..Edits::default()
            })
        );
    }
}

#[test]
fn link_cases() {
    let cases: &[(&str, &str, Option<(&str, &str)>)] = &[
        (
            "relative target",
            "libcuda.so.1::/usr/lib64/libcuda.so",
            Some(("libcuda.so.1", "/usr/lib64/libcuda.so")),
        ),
        (
            "absolute target",
            "/usr/lib/x::/usr/lib/y",
            Some(("/usr/lib/x", "/usr/lib/y")),
        ),
        ("target with ::", "a::b::/c", None),
        ("no separator", "/usr/lib/x", None),
        ("relative link", "x::usr/lib/y", None),
        ("dotdot link", "x::/usr/../etc/y", None),
        ("dot link", "x::/usr/lib/.", None),
        ("trailing slash", "x::/usr/lib/", None),
        ("root link", "x::/", None),
        ("empty target", "::/usr/lib/y", None),
    ];
    for (name, arg, want) in cases {
        let got = parse_link(arg).ok();
        let want = want.map(|(t, l)| link(t, l));
        assert_eq!(got, want, "case {name}");
    }
}
