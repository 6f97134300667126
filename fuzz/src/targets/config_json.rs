//! A container's `config.json` as the runtime shim and the prestart hook read it:
//! `shim::decide` (every runtime mode, which runs `oci` + `request::resolve` + the CDI
//! request), `oci::rootfs_path` / `env` / `mounts` / `is_privileged`,
//! and the edits the shim writes back: `shim::add_hook` and `shim::inject` (`spec_edit::apply`).
//! Properties: no panic; the modes agree with each other (`auto` decides as `legacy` does
//! unless it picks `cdi`; `cdi` and `jit-cdi` never pick the prestart hook); `add_hook` is
//! idempotent (a second call changes nothing); an edited document still serializes, reparses
//! to the same value, and — when the input was a valid OCI spec — is still a valid OCI spec
//! (if it had a `process`).

use nvct_cdi::{ContainerEdits, DeviceNode, Hook, Mount};
use nvct_formats::config::{Config, Mode, RuntimeConfig};
use nvct_formats::oci;
use nvct_inject::shim::{self, Action};
use oci_spec::runtime::Spec;
use serde_json::Value;
use std::path::Path;

fn reparses(v: &Value, typed_before: bool, what: &str) {
    let text = serde_json::to_string(v).expect("a Value always serializes");
    let back: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{what}: output does not reparse: {e}"));
    assert_eq!(&back, v, "{what}: output reparses to a different document");
    if typed_before {
        if let Err(e) = serde_json::from_str::<Spec>(&text) {
            panic!("{what}: a valid OCI spec became invalid: {e}\n{text}");
        }
    }
}

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let path = Path::new("/bundle/config.json");
    let decide = |mode: Mode| {
        let config = Config {
            runtime: RuntimeConfig {
                mode,
                ..RuntimeConfig::default()
            },
            ..Config::default()
        };
        shim::decide(data, path, &config)
    };
    let (legacy, auto, cdi, jit) = (
        decide(Mode::Legacy),
        decide(Mode::Auto),
        decide(Mode::Cdi),
        decide(Mode::JitCdi),
    );
    match (&auto, &legacy) {
        (Ok(Action::Cdi(_)), _) => {}
        (Ok(a), Ok(l)) => assert_eq!(a, l, "auto neither picked cdi nor decided as legacy"),
        (Err(_), _) | (_, Err(_)) => {}
    }
    for other in [&cdi, &jit] {
        assert!(
            !matches!(other, Ok(Action::Legacy(_))),
            "a CDI mode picked the prestart hook: {other:?}"
        );
    }

    let typed = serde_json::from_slice::<Spec>(data);
    if let Ok(spec) = &typed {
        let _ = oci::rootfs_path(spec, Path::new("/bundle"));
        let _ = (oci::env(spec), oci::mounts(spec), oci::is_privileged(spec));
    }
    // Only a spec with a `process` is held to staying valid: the edits add `process.env`, and
    // a `process` created from nothing lacks the `cwd`/`user` runc needs anyway.
    let typed = typed.is_ok_and(|s| s.process().is_some());
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };

    let mut hooked = doc.clone();
    let env = shim::hook_env(None);
    if let Ok(changed) = shim::add_hook(
        &mut hooked,
        Path::new("/usr/bin/nvidia-container-runtime-hook"),
        &env,
        path,
    ) {
        if !changed {
            assert_eq!(
                hooked, doc,
                "add_hook said unchanged but changed the document"
            );
        }
        let again = hooked.clone();
        let mut twice = hooked.clone();
        let second = shim::add_hook(
            &mut twice,
            Path::new("/usr/bin/nvidia-container-runtime-hook"),
            &env,
            path,
        );
        assert!(matches!(second, Ok(false)), "second add_hook: {second:?}");
        assert_eq!(twice, again, "second add_hook changed the document");
        reparses(&hooked, typed, "add_hook");
    }

    let edits = ContainerEdits {
        env: vec!["NVIDIA_VISIBLE_DEVICES=void".into(), "A=b".into()],
        device_nodes: vec![DeviceNode {
            path: "/dev/nvidia0".into(),
            host_path: Some("/dev/nvidia0".into()),
            kind: Some("c".into()),
            major: Some(195),
            minor: Some(0),
            permissions: Some("rw".into()),
            ..Default::default()
        }],
        mounts: vec![Mount {
            host_path: "/usr/lib/libcuda.so.1".into(),
            container_path: "/usr/lib/libcuda.so.1".into(),
            options: vec!["ro".into(), "nosuid".into(), "nodev".into(), "bind".into()],
            kind: Some("bind".into()),
        }],
        hooks: vec![Hook {
            hook_name: "createContainer".into(),
            path: "/usr/bin/nvidia-cdi-hook".into(),
            args: vec!["nvidia-cdi-hook".into(), "update-ldcache".into()],
            env: vec!["PATH=/usr/bin".into()],
        }],
    };
    let mut injected = doc.clone();
    if shim::inject(&mut injected, &[&edits], path).is_ok() {
        reparses(&injected, typed, "inject");
    }
}
