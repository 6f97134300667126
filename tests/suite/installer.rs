//! Black-box tests of `nvidia-ctk-installer` (what the GPU Operator's toolkit container runs):
//! against a real containerd (the installed runtime starts a GPU container under `ctr run`), a
//! real dockerd (SIGHUP makes it load the three runtimes), and CRI-O's files with a systemd
//! restart through `chroot <host root>`; SIGTERM then puts every engine file back to its
//! original bytes and removes the install. The GPU Operator's way of running it (its
//! entrypoint `exec nvidia-toolkit DESTINATION`, its variables per engine and per CDI setting,
//! as `controllers/object_controls.go` of NVIDIA/gpu-operator sets them) is a table of its own.

use crate::common::bundle::{self, out_text, Bundle, Image};
use crate::common::containerd::start_containerd;
use crate::common::dockerd::{docker, start_dockerd};
use crate::common::installer::{common_args, operator_command, source_tree, Installer, INSTALLER};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[test]
fn containerd_install_runs_gpu_containers_and_sigterm_restores_everything() {
    bundle::require_root();
    bundle::require("runc");
    bundle::require("containerd-shim-runc-v2");
    let ctr = bundle::require("ctr");
    let (dir, host) = bundle::scratch_host("nvct-installer-ctrd-", 2);
    let config_env = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
    let cd = start_containerd(&dir, &config_env);
    let engine_config = dir.join("containerd.toml");
    let original = std::fs::read(&engine_config).unwrap();
    let source = source_tree(&dir);
    let mut args = common_args(&dir, &host, &source);
    args.extend([
        "--runtime=containerd".to_string(),
        format!("--config={}", engine_config.display()),
        format!(
            "--drop-in-config={}",
            dir.join("conf.d/99-nvidia.toml").display()
        ),
        // containerd exits on SIGHUP (its supervisor restarts it): this one has none.
        "--restart-mode=none".to_string(),
        "--cdi-enabled".to_string(),
    ]);
    let inst = Installer::start(&dir, &args);
    let toolkit = dir.join("install/toolkit");

    // containerd itself loads the result (this containerd runs without its CRI plugin, so its
    // dump leaves the CRI table out: the drop-in is read for the entries).
    let dump = Command::new(bundle::require("containerd"))
        .arg("--config")
        .arg(&engine_config)
        .args(["config", "dump"])
        .output()
        .unwrap();
    assert!(dump.status.success(), "{}", out_text(&dump));
    let drop_in = dir.join("conf.d/99-nvidia.toml");
    let dump_text = std::fs::read_to_string(&drop_in).unwrap();
    for (name, wrapper) in [
        ("nvidia", "nvidia-container-runtime"),
        ("nvidia-cdi", "nvidia-container-runtime.cdi"),
        ("nvidia-legacy", "nvidia-container-runtime.legacy"),
    ] {
        let st = nvct_engines::containerd::status(
            nvct_engines::Source {
                path: &drop_in,
                text: &dump_text,
            },
            name,
        )
        .unwrap();
        assert_eq!(
            st.runtime_path.as_deref(),
            Some(toolkit.join(wrapper).to_str().unwrap()),
            "{name}: {dump_text}"
        );
    }
    assert!(dump_text.contains("enable_cdi = true"), "{dump_text}");
    assert!(dump_text.contains("cdi.k8s.io/*"), "{dump_text}");
    let spec = dir.join("cdi/nvidia.yaml");
    let spec_text = std::fs::read_to_string(&spec).unwrap();
    assert!(
        spec_text.contains(toolkit.join("nvidia-cdi-hook").to_str().unwrap()),
        "the spec's hooks run the installed nvidia-cdi-hook:\n{spec_text}"
    );

    // A GPU container through the installed runtime (its wrapper, its config).
    let b = Bundle::new(&dir, Image::Busybox);
    let id = format!("nvct-installer-{}", std::process::id());
    let out: Output = Command::new(&ctr)
        .arg("-a")
        .arg(&cd.sock)
        .args(["run", "--rm", "--runc-binary"])
        .arg(toolkit.join("nvidia-container-runtime"))
        .args(["--env", "NVIDIA_VISIBLE_DEVICES=1", "--rootfs"])
        .arg(b.rootfs())
        .args([
            &id,
            "/bin/sh",
            "-c",
            "export PATH=/bin; ls /dev/nvidia*; echo done",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}\n--- containerd log\n{}\n--- installer\n{}",
        out_text(&out),
        std::fs::read_to_string(&cd.log).unwrap_or_default(),
        inst.text()
    );
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert!(lines.contains(&"/dev/nvidia1"), "{text}");
    assert!(!lines.contains(&"/dev/nvidia0"), "{text}");

    let (ok, log) = inst.stop();
    assert!(ok, "{log}");
    assert_eq!(
        std::fs::read(&engine_config).unwrap(),
        original,
        "the engine config is not its original bytes:\n{log}"
    );
    assert!(!dir.join("conf.d/99-nvidia.toml").exists(), "{log}");
    assert!(
        !dir.join("install").exists(),
        "the install dir is left:\n{log}"
    );
    assert!(!spec.exists(), "the CDI spec is left:\n{log}");
    assert!(!dir.join("run/toolkit.pid").exists(), "{log}");
    drop(cd);
}

#[test]
fn docker_reloads_the_runtimes_on_sighup_and_gets_its_daemon_json_back() {
    bundle::require_root();
    let (dir, host) = bundle::scratch_host("nvct-installer-docker-", 1);
    let config_env = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
    let daemon_json = dir.join("daemon.json");
    let original = b"{\n  \"log-level\": \"warn\"\n}\n".to_vec();
    std::fs::write(&daemon_json, &original).unwrap();
    let d = start_dockerd(&dir, &config_env, Some(&daemon_json));
    let runtimes = || {
        let out = docker(&d, &["info", "--format", "{{json .Runtimes}}"]);
        assert!(out.status.success(), "{}", out_text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(!runtimes().contains("nvidia"));
    let source = source_tree(&dir);
    let mut args = common_args(&dir, &host, &source);
    args.extend([
        "--runtime=docker".to_string(),
        format!("--config={}", daemon_json.display()),
        format!("--socket={}", d.sock.display()),
        "--restart-mode=signal".to_string(),
    ]);
    let inst = Installer::start(&dir, &args);
    let deadline = Instant::now() + Duration::from_secs(20);
    let r = loop {
        let r = runtimes();
        if ["nvidia", "nvidia-cdi", "nvidia-legacy"]
            .iter()
            .all(|n| r.contains(&format!("\"{n}\"")))
        {
            break r;
        }
        assert!(Instant::now() < deadline, "docker's runtimes: {r}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        r.contains(
            dir.join("install/toolkit/nvidia-container-runtime")
                .to_str()
                .unwrap()
        ),
        "{r}"
    );
    assert!(
        inst.text().contains("sent SIGHUP to docker"),
        "{}",
        inst.text()
    );
    let (ok, log) = inst.stop();
    assert!(ok, "{log}");
    assert_eq!(std::fs::read(&daemon_json).unwrap(), original, "{log}");
    // dockerd reloads `runtimes` on SIGHUP only when daemon.json has the key, so the entries
    // stay in the running daemon until it restarts (docs/COMPAT.md, nvidia-ctk-installer).
    assert!(log.contains("sent SIGHUP to docker"), "{log}");
}

#[test]
fn crio_gets_a_drop_in_and_a_systemd_restart_through_the_host_root() {
    bundle::require_root();
    let busybox = bundle::require("busybox");
    let (dir, host) = bundle::scratch_host("nvct-installer-crio-", 1);
    // The host root as the installer's container sees it: /bin/sh and a systemctl that logs.
    let host_root = dir.join("hostroot");
    std::fs::create_dir_all(host_root.join("bin")).unwrap();
    std::fs::create_dir_all(host_root.join("usr/bin")).unwrap();
    std::fs::copy(&busybox, host_root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", host_root.join("bin/sh")).unwrap();
    let systemctl = host_root.join("usr/bin/systemctl");
    std::fs::write(&systemctl, "#!/bin/sh\necho \"$@\" >> /systemctl.log\n").unwrap();
    std::fs::set_permissions(
        &systemctl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let crio_conf = dir.join("crio.conf");
    let original = b"[crio.runtime]\ndefault_runtime = \"runc\"\n\n[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\nmonitor_path = \"/usr/bin/conmon\"\n".to_vec();
    std::fs::write(&crio_conf, &original).unwrap();
    let drop_in = dir.join("crio.conf.d/99-nvidia.toml");
    let source = source_tree(&dir);
    let mut args = common_args(&dir, &host, &source);
    args.extend([
        "--runtime=crio".to_string(),
        format!("--config={}", crio_conf.display()),
        format!("--drop-in-config={}", drop_in.display()),
        format!("--host-root={}", host_root.display()),
    ]);
    let inst = Installer::start(&dir, &args);
    let text = std::fs::read_to_string(&drop_in).unwrap();
    let toolkit = dir.join("install/toolkit");
    for (name, wrapper) in [
        ("nvidia", "nvidia-container-runtime"),
        ("nvidia-cdi", "nvidia-container-runtime.cdi"),
        ("nvidia-legacy", "nvidia-container-runtime.legacy"),
    ] {
        let st = nvct_engines::crio::status(
            nvct_engines::Source {
                path: &drop_in,
                text: &text,
            },
            name,
        )
        .unwrap();
        assert_eq!(
            st.runtime_path.as_deref(),
            Some(toolkit.join(wrapper).to_str().unwrap()),
            "{name}:\n{text}"
        );
    }
    assert!(
        text.contains("monitor_path = \"/usr/bin/conmon\""),
        "copied from runc:\n{text}"
    );
    assert_eq!(
        std::fs::read(&crio_conf).unwrap(),
        original,
        "the main file is untouched"
    );
    let (ok, log) = inst.stop();
    assert!(ok, "{log}");
    assert!(!drop_in.exists(), "{log}");
    assert_eq!(std::fs::read(&crio_conf).unwrap(), original);
    assert_eq!(
        std::fs::read_to_string(host_root.join("systemctl.log")).unwrap(),
        "restart crio\nrestart crio\n",
        "restarted after the install and after the undo:\n{log}"
    );
}

#[test]
fn bad_input_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: &[(&str, &[&str], &str)] = &[
        ("unknown runtime", &["--runtime=podman"], "podman"),
        (
            "drop-in for docker",
            &["--runtime=docker", "--drop-in-config=/x.toml"],
            "docker has no drop-in files",
        ),
        (
            "no binaries in the source root",
            &["--runtime=docker", "--restart-mode=none", "--no-daemon"],
            "must hold bin/nvidia-container-runtime",
        ),
    ];
    for (case, extra, want) in cases {
        let mut args = vec![
            format!("--toolkit-install-dir={}", d.join("install").display()),
            format!("--toolkit-source-root={}", d.join("empty").display()),
            format!("--pid-file={}", d.join("toolkit.pid").display()),
            format!("--config={}", d.join("daemon.json").display()),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = Command::new(INSTALLER).args(&args).output().unwrap();
        let text = out_text(&out);
        assert!(!out.status.success(), "{case}: {text}");
        assert!(text.contains(want), "{case}: {text}");
        assert!(
            !d.join("install").exists(),
            "{case}: an install dir was left"
        );
        assert!(
            !d.join("daemon.json").exists(),
            "{case}: daemon.json was written"
        );
    }
}

#[test]
fn upstream_variable_names_and_a_driver_root_seen_elsewhere() {
    bundle::require_root();
    let (dir, host) = bundle::scratch_host("nvct-installer-env-", 1);
    let source = source_tree(&dir);
    let engine_config = dir.join("containerd.toml");
    std::fs::write(&engine_config, "version = 2\n").unwrap();
    // The GPU Operator's spelling: aliases only, a host driver root the pod sees elsewhere.
    let out = Command::new(INSTALLER)
        .env("ROOT", dir.join("install"))
        .env("RUNTIME", "containerd")
        .env("CONTAINERD_CONFIG", &engine_config)
        .env("RUNTIME_DROP_IN_CONFIG", dir.join("conf.d/99-nvidia.toml"))
        .env("RUNTIME_RESTART_MODE", "none")
        .env("DRIVER_ROOT", "/run/nvidia/driver")
        .env("DRIVER_ROOT_CTR_PATH", host.driver_root())
        .env("CONTAINERD_RUNTIME_CLASS", "gpu")
        .env("ENABLE_CDI", "true")
        .env("CDI_OUTPUT_DIR", dir.join("cdi"))
        .env("ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "true")
        .env("PID_FILE", dir.join("run/toolkit.pid"))
        .env("NO_DAEMON", "true")
        .arg(format!("--toolkit-source-root={}", source.display()))
        .arg(format!("--proc-root={}", host.proc_root().display()))
        .output()
        .unwrap();
    let text = out_text(&out);
    assert!(out.status.success(), "{text}");
    let config = std::fs::read_to_string(
        dir.join("install/toolkit/.config/nvidia-container-runtime/config.toml"),
    )
    .unwrap();
    let cfg = nvct_formats::config::Config::parse(&config, Path::new("config.toml")).unwrap();
    assert_eq!(cfg.cli.root, "/run/nvidia/driver", "{config}");
    assert!(
        cfg.accept_nvidia_visible_devices_as_volume_mounts,
        "{config}"
    );
    let drop_in = std::fs::read_to_string(dir.join("conf.d/99-nvidia.toml")).unwrap();
    for name in ["gpu", "gpu-cdi", "gpu-legacy"] {
        let st = nvct_engines::containerd::status(
            nvct_engines::Source {
                path: Path::new("99-nvidia.toml"),
                text: &drop_in,
            },
            name,
        )
        .unwrap();
        assert!(st.runtime_path.is_some(), "{name}: {drop_in}");
    }
    let spec = std::fs::read_to_string(dir.join("cdi/nvidia.yaml")).unwrap();
    let seen = host.driver_root().display().to_string();
    assert!(!spec.contains(&seen), "a path as the pod sees it:\n{spec}");
    assert!(
        spec.contains("hostPath: /run/nvidia/driver/dev/nvidia0"),
        "host paths under the host's driver root:\n{spec}"
    );
}

#[test]
fn a_killed_installer_is_undone_by_the_next_one() {
    // SIGKILL (an OOM kill, a node reboot) leaves the engine config edited and the install in
    // place; the next installer must take that for its own work, not for the original state,
    // or its SIGTERM would "restore" the edited config.
    bundle::require_root();
    let (dir, host) = bundle::scratch_host("nvct-installer-kill-", 1);
    let source = source_tree(&dir);
    let daemon_json = dir.join("daemon.json");
    let original = b"{\n  \"log-level\": \"warn\"\n}\n".to_vec();
    std::fs::write(&daemon_json, &original).unwrap();
    let mut args = common_args(&dir, &host, &source);
    args.extend([
        "--runtime=docker".to_string(),
        format!("--config={}", daemon_json.display()),
        "--restart-mode=none".to_string(),
    ]);
    let first = Installer::start(&dir, &args);
    first.kill();
    assert_ne!(
        std::fs::read(&daemon_json).unwrap(),
        original,
        "the first install edited it"
    );
    let second = Installer::start(&dir, &args);
    assert!(
        second
            .text()
            .contains("did not finish: undoing what it did"),
        "{}",
        second.text()
    );
    let (ok, log) = second.stop();
    assert!(ok, "{log}");
    assert_eq!(
        std::fs::read(&daemon_json).unwrap(),
        original,
        "back to the bytes before the first install:\n{log}"
    );
    assert!(!dir.join("install").exists(), "{log}");
}

#[test]
fn a_planted_state_file_touches_nothing_outside_the_installers_own_paths() {
    // The state file is read at start and its paths undone: a stale one from another node, a
    // restored backup or a shared hostPath must not turn into root deletes and writes. Only
    // the paths this run would write itself are undone, never through a symlink; the rest is
    // ignored, and the log says so.
    bundle::require_root();
    let (dir, host) = bundle::scratch_host("nvct-installer-state-", 1);
    let source = source_tree(&dir);
    let daemon_json = dir.join("daemon.json");
    let original = b"{\n  \"log-level\": \"warn\"\n}\n".to_vec();
    std::fs::write(&daemon_json, &original).unwrap();
    // Host files outside the install: a stand-in for /etc/passwd (named in `files`), one for a
    // config (named in `edits`, its current bytes as `after`), an empty directory (in `dirs`).
    let outside = dir.join("outside");
    std::fs::create_dir_all(outside.join("empty")).unwrap();
    let passwd = outside.join("passwd");
    std::fs::write(&passwd, "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    let config = outside.join("sshd_config");
    std::fs::write(&config, "PermitRootLogin no\n").unwrap();
    // A symlink under the install dir pointing out: <install>/libexec -> outside/libexec,
    // which holds a file at the name of a toolkit worker.
    let install = dir.join("install");
    std::fs::create_dir_all(&install).unwrap();
    std::fs::create_dir_all(outside.join("libexec/nvct")).unwrap();
    let worker = outside.join("libexec/nvct/nvidia-ctk");
    std::fs::write(&worker, "a host file\n").unwrap();
    std::os::unix::fs::symlink(outside.join("libexec"), install.join("libexec")).unwrap();
    let through_link = install.join("libexec/nvct/nvidia-ctk");
    let state = serde_json::json!({
        "dirs": [outside.join("empty")],
        "files": [&passwd, &through_link],
        "edits": [{
            "path": &config,
            "before": b"PermitRootLogin yes\n".to_vec(),
            "after": std::fs::read(&config).unwrap(),
        }],
        "log": [],
    });
    std::fs::write(
        install.join(".nvct-installer-state.json"),
        serde_json::to_vec(&state).unwrap(),
    )
    .unwrap();
    let before = |p: &Path| std::fs::read(p).unwrap();
    let (passwd_before, config_before, worker_before) =
        (before(&passwd), before(&config), before(&worker));

    let mut args = common_args(&dir, &host, &source);
    args.extend([
        "--runtime=docker".to_string(),
        format!("--config={}", daemon_json.display()),
        "--restart-mode=none".to_string(),
    ]);
    let installer = Installer::start(&dir, &args);
    let text = installer.text();
    for (path, why) in [
        (&passwd, "not a toolkit file this installer writes"),
        (&through_link, "reached through a symlink"),
        (&config, "not the engine config, drop-in or CDI spec"),
        (
            &outside.join("empty"),
            "not a directory above a file this installer writes",
        ),
    ] {
        assert!(
            text.contains(&format!("ignored {}", path.display())) && text.contains(why),
            "the log names {} ({why}):\n{text}",
            path.display()
        );
    }
    // The planted link under the install dir is removed as a link, not written through (the
    // static fronts' workers go to <install>/libexec/nvct).
    if std::env::var_os("NVCT_STATIC_BIN_DIR").is_some() {
        assert!(
            text.contains(&format!(
                "removed the symlink {}",
                install.join("libexec").display()
            )),
            "{text}"
        );
    }
    let (ok, log) = installer.stop();
    assert!(ok, "{log}");
    assert_eq!(before(&passwd), passwd_before, "{log}");
    assert_eq!(before(&config), config_before, "{log}");
    assert_eq!(before(&worker), worker_before, "{log}");
    assert!(outside.join("empty").is_dir(), "{log}");
    assert_eq!(before(&daemon_json), original, "{log}");
}

#[test]
fn a_planted_state_files_bytes_never_reach_the_engine_config() {
    // The record lies in the install dir, a host path a pod may write. Its paths are checked
    // (the test above); its `before` for the engine config, written back, would be the
    // engine's config: a runc `BinaryName` containerd runs as root for every container, a
    // docker runtime path. Recovery undoes by what the config holds now: the operator's content
    // stays, no runtime of ours, none of the record's bytes.
    bundle::require_root();
    let v2 = "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"runc\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n    SystemdCgroup = true\n";
    let v2_evil = v2.replace("SystemdCgroup = true", "BinaryName = \"/tmp/evil\"");
    let daemon_json = "{\n  \"log-level\": \"warn\"\n}\n";
    let daemon_evil =
        "{\"runtimes\":{\"nvidia\":{\"path\":\"/tmp/evil\"}},\"default-runtime\":\"nvidia\"}";
    // (case, --runtime, config file, drop-in file, the operator's config, the planted `before`)
    let cases: &[(&str, &str, &str, Option<&str>, &str, &str)] = &[
        (
            "docker",
            "docker",
            "daemon.json",
            None,
            daemon_json,
            daemon_evil,
        ),
        (
            "containerd with a drop-in",
            "containerd",
            "config.toml",
            Some("conf.d/99-nvidia.toml"),
            v2,
            &v2_evil,
        ),
        (
            "containerd in place",
            "containerd",
            "config.toml",
            None,
            v2,
            &v2_evil,
        ),
    ];
    for &(name, runtime, file, drop_in, original, evil) in cases {
        let (dir, host) = bundle::scratch_host("nvct-installer-bytes-", 1);
        let source = source_tree(&dir);
        let config = dir.join(file);
        std::fs::write(&config, original).unwrap();
        let mut args = common_args(&dir, &host, &source);
        args.extend([
            format!("--runtime={runtime}"),
            format!("--config={}", config.display()),
            "--restart-mode=none".to_string(),
            // Without a backup the recovery cannot put back a default runtime ours replaced
            // (docs/COMPAT.md); this test is about the record's bytes.
            "--set-as-default=false".to_string(),
        ]);
        if let Some(d) = drop_in {
            args.push(format!("--drop-in-config={}", dir.join(d).display()));
        }
        // The record as a killed installer leaves it (paths and `after` real), its `before`
        // planted.
        Installer::start(&dir, &args).kill();
        let state = dir.join("install/.nvct-installer-state.json");
        let mut record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
        let edits = record["edits"].as_array_mut().unwrap();
        assert!(!edits.is_empty(), "{name}: {record}");
        for e in edits {
            e["before"] = serde_json::json!(evil.as_bytes());
        }
        std::fs::write(&state, serde_json::to_vec(&record).unwrap()).unwrap();

        let second = Installer::start(&dir, &args);
        let text = second.text();
        assert!(
            text.contains("did not finish: undoing what it did")
                && text.contains("its recorded bytes are not written back"),
            "{name}:\n{text}"
        );
        let now = std::fs::read_to_string(&config).unwrap();
        assert!(!now.contains("/tmp/evil"), "{name}: {now}\n{text}");
        let (ok, log) = second.stop();
        assert!(ok, "{name}:\n{log}");
        let now = std::fs::read_to_string(&config).unwrap();
        assert!(
            !now.contains("/tmp/evil") && !now.contains("nvidia"),
            "{name}: {now}\n{log}"
        );
        assert_eq!(now, original, "{name}: the operator's config:\n{log}");
        if let Some(d) = drop_in {
            assert!(!dir.join(d).exists(), "{name}: the drop-in is left:\n{log}");
        }
        assert!(!dir.join("install").exists(), "{name}:\n{log}");
    }
}

/// The GPU Operator's layout: the pod sees the host's containerd config dir at one path and
/// writes the drop-in through another (`RUNTIME_DROP_IN_CONFIG`), while the host's containerd
/// reads `RUNTIME_DROP_IN_CONFIG_HOST_PATH`. `imports` names the host path, and a real
/// containerd given only the host paths loads the runtimes (`nvidia` the default). Upstream's
/// `NVIDIA_CONTAINER_RUNTIME_*` config variables land in the toolkit config; a variable of
/// upstream's shape that is not read here is named in the log.
#[test]
fn gpu_operator_layout_imports_the_host_path_and_takes_upstreams_config_variables() {
    bundle::require_root();
    let containerd = bundle::require("containerd");
    let (dir, host) = bundle::scratch_host("nvct-installer-op-", 1);
    let source = source_tree(&dir);
    let host_etc = dir.join("host/etc/containerd");
    std::fs::create_dir_all(host_etc.join("conf.d")).unwrap();
    std::fs::write(host_etc.join("config.toml"), "version = 2\n").unwrap();
    // The pod's mounts of the host's dirs, at the Operator's paths.
    let pod = dir.join("pod/runtime");
    std::fs::create_dir_all(&pod).unwrap();
    std::os::unix::fs::symlink(&host_etc, pod.join("config-dir")).unwrap();
    std::os::unix::fs::symlink(host_etc.join("conf.d"), pod.join("config-dir.d")).unwrap();
    let host_drop_in = host_etc.join("conf.d/99-nvidia.toml");
    let out = Command::new(INSTALLER)
        .env("RUNTIME", "containerd")
        .env("RUNTIME_CONFIG", pod.join("config-dir/config.toml"))
        .env(
            "RUNTIME_DROP_IN_CONFIG",
            pod.join("config-dir.d/99-nvidia.toml"),
        )
        .env("RUNTIME_DROP_IN_CONFIG_HOST_PATH", &host_drop_in)
        .env("RUNTIME_RESTART_MODE", "none")
        .env(
            "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
            "example.com/gpu",
        )
        .env("NVIDIA_CONTAINER_RUNTIME_LOG_LEVEL", "debug")
        .env("NVIDIA_CONTAINER_RUNTIME_NOT_A_SETTING", "x")
        .env("NO_DAEMON", "true")
        .args(common_args(&dir, &host, &source))
        .output()
        .unwrap();
    let text = out_text(&out);
    assert!(out.status.success(), "{text}");
    let main = std::fs::read_to_string(host_etc.join("config.toml")).unwrap();
    let imports = nvct_engines::containerd::imports(nvct_engines::Source {
        path: Path::new("config.toml"),
        text: &main,
    })
    .unwrap();
    assert_eq!(
        imports,
        [format!("{}/*.toml", host_etc.join("conf.d").display())],
        "imports names the host's path: {main}\n{text}"
    );
    assert!(host_drop_in.is_file(), "{text}");
    let dump = Command::new(&containerd)
        .arg("--config")
        .arg(host_etc.join("config.toml"))
        .args(["config", "dump"])
        .output()
        .unwrap();
    let dump_text = String::from_utf8_lossy(&dump.stdout).to_string();
    assert!(dump.status.success(), "{}", out_text(&dump));
    for want in [
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]",
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia-cdi]",
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]",
        // Upstream's defaultSetAsDefault: without NVIDIA_RUNTIME_SET_AS_DEFAULT=false.
        "default_runtime_name = \"nvidia\"",
    ] {
        assert!(
            dump_text.contains(want),
            "containerd's dump lacks {want}:\n{dump_text}"
        );
    }
    let config = std::fs::read_to_string(
        dir.join("install/toolkit/.config/nvidia-container-runtime/config.toml"),
    )
    .unwrap();
    let cfg = nvct_formats::config::Config::parse(&config, Path::new("config.toml")).unwrap();
    assert_eq!(
        cfg.runtime.modes.cdi.default_kind, "example.com/gpu",
        "{config}"
    );
    assert!(
        text.contains("NVIDIA_CONTAINER_RUNTIME_NOT_A_SETTING is set but not acted on"),
        "{text}"
    );
    assert!(
        !text.contains("NVIDIA_CONTAINER_RUNTIME_LOG_LEVEL is set but"),
        "{text}"
    );

    // A value the config cannot take is refused naming the variable; nothing is installed.
    let out = Command::new(INSTALLER)
        .env("RUNTIME", "containerd")
        .env("RUNTIME_CONFIG", dir.join("other.toml"))
        .env("NVIDIA_CONTAINER_RUNTIME_HOOK_SKIP_MODE_DETECTION", "maybe")
        .env("NO_DAEMON", "true")
        .args(common_args(&dir.join("refused"), &host, &source))
        .output()
        .unwrap();
    let text = out_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("NVIDIA_CONTAINER_RUNTIME_HOOK_SKIP_MODE_DETECTION"),
        "{text}"
    );
    assert!(!dir.join("refused/install").exists(), "{text}");
}

/// The host root as the installer's container sees it (`/host`): a shell and a `systemctl`
/// that logs its arguments to `<host root>/systemctl.log` (CRI-O's systemd restart).
fn fake_host_root(dir: &Path) -> std::path::PathBuf {
    let busybox = bundle::require("busybox");
    let host_root = dir.join("hostroot");
    std::fs::create_dir_all(host_root.join("bin")).unwrap();
    std::fs::create_dir_all(host_root.join("usr/bin")).unwrap();
    std::fs::copy(&busybox, host_root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", host_root.join("bin/sh")).unwrap();
    let systemctl = host_root.join("usr/bin/systemctl");
    std::fs::write(&systemctl, "#!/bin/sh\necho \"$@\" >> /systemctl.log\n").unwrap();
    std::fs::set_permissions(
        &systemctl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    host_root
}

const CRI: &str = "plugins.\"io.containerd.grpc.v1.cri\".containerd";

/// k3s's generated containerd config (the parts that matter here: its CRI settings).
const K3S_GENERATED: &str = "# File generated by k3s. DO NOT EDIT. Use config.toml.tmpl instead.\nversion = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"rancher/mirrored-pause:3.6\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n";

/// The environment the GPU Operator gives the toolkit container for `runtime` (its DaemonSet
/// asset, `TransformToolkit`, `transformToolkitCtrForCDI`, `transformForRuntime`,
/// `transformRuntimeConfigAndSocketMounts` of `controllers/object_controls.go`, the driver
/// validation's `driver-ready` file that its entrypoint sources), with this test's paths:
/// `pod` stands for the pod's `/runtime` mounts. The restart mode and the hooks, CDI and pid
/// paths are the test's (the Operator leaves them at their defaults, host paths here).
fn operator_env(
    dir: &Path,
    host: &crate::common::fakehost::FakeHost,
    source: &Path,
    runtime: &str,
    cdi: bool,
    variant: &str,
) -> Vec<(String, String)> {
    let pod = dir.join("pod/runtime");
    let driver = host.driver_root().display().to_string();
    let mut env: Vec<(&str, String)> = vec![
        // The DaemonSet's own.
        (
            "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
            "management.nvidia.com/gpu".into(),
        ),
        ("NVIDIA_VISIBLE_DEVICES", "void".into()),
        (
            "TOOLKIT_PID_FILE",
            dir.join("run/nvidia/toolkit/toolkit.pid")
                .display()
                .to_string(),
        ),
        ("NRI_NAMESPACE", "gpu-operator".into()),
        // driver-ready, for a driver installed on the host (the pod sees / at /host).
        ("IS_HOST_DRIVER", "true".into()),
        ("NVIDIA_DRIVER_ROOT", "/".into()),
        ("DRIVER_ROOT_CTR_PATH", driver.clone()),
        ("NVIDIA_DEV_ROOT", "/".into()),
        ("DEV_ROOT_CTR_PATH", driver),
        ("RUNTIME", runtime.into()),
        // The test's: the tree the image has under /usr, the spec dir, no engine to signal.
        ("TOOLKIT_SOURCE_ROOT", source.display().to_string()),
        ("CDI_OUTPUT_DIR", dir.join("cdi").display().to_string()),
    ];
    if cdi {
        env.extend([
            ("CDI_ENABLED", "true".to_string()),
            ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false".into()),
            ("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi".into()),
            ("CRIO_CONFIG_MODE", "config".into()),
        ]);
    }
    let at = |p: &str| pod.join(p).display().to_string();
    match runtime {
        "containerd" => {
            let config = if variant == "k3s" {
                "config-dir/config.toml.tmpl"
            } else {
                "config-dir/config.toml"
            };
            env.extend([
                ("CONTAINERD_RUNTIME_CLASS", "nvidia".to_string()),
                ("RUNTIME_CONFIG", at(config)),
                ("CONTAINERD_CONFIG", at(config)),
                ("RUNTIME_DROP_IN_CONFIG", at("config-dir.d/99-nvidia.toml")),
                (
                    "RUNTIME_DROP_IN_CONFIG_HOST_PATH",
                    dir.join("host/etc/containerd/conf.d/99-nvidia.toml")
                        .display()
                        .to_string(),
                ),
                ("RUNTIME_SOCKET", at("sock-dir/containerd.sock")),
                ("CONTAINERD_SOCKET", at("sock-dir/containerd.sock")),
                ("RUNTIME_RESTART_MODE", "none".into()),
            ]);
            if variant == "k3s" {
                // The Operator puts /host before the host path of a file source.
                let generated =
                    dir.join("host/var/lib/rancher/k3s/agent/etc/containerd/config.toml");
                env.push((
                    "RUNTIME_CONFIG_SOURCE",
                    format!("file={}", generated.display()),
                ));
            }
        }
        "docker" => env.extend([
            ("RUNTIME_CONFIG", at("config-dir/daemon.json")),
            ("DOCKER_CONFIG", at("config-dir/daemon.json")),
            ("RUNTIME_SOCKET", at("sock-dir/docker.sock")),
            ("DOCKER_SOCKET", at("sock-dir/docker.sock")),
            ("RUNTIME_RESTART_MODE", "none".into()),
        ]),
        _ => {
            env.extend([
                ("RUNTIME_CONFIG", at("config-dir/config.toml")),
                ("CRIO_CONFIG", at("config-dir/config.toml")),
                ("RUNTIME_DROP_IN_CONFIG", at("config-dir.d/99-nvidia.conf")),
                (
                    "RUNTIME_DROP_IN_CONFIG_HOST_PATH",
                    "/etc/crio/crio.conf.d/99-nvidia.conf".into(),
                ),
                (
                    "HOST_ROOT_MOUNT",
                    dir.join("hostroot").display().to_string(),
                ),
                (
                    "CRIO_HOOKS_DIR",
                    dir.join("host/usr/share/containers/oci/hooks.d")
                        .display()
                        .to_string(),
                ),
            ]);
            if !cdi {
                // TransformToolkit: CRI-O without CDI keeps the OCI hook.
                env.push(("CRIO_CONFIG_MODE", "hook".into()));
            }
        }
    }
    env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The GPU Operator runs the toolkit image with its own entrypoint, whose last line is `exec
/// nvidia-toolkit /usr/local/nvidia` (the name upstream's image links to the installer), and
/// sets the installer's variables per engine and per CDI setting. For each of its
/// configurations: the engine's config the node ends with (loaded by a real containerd where
/// the engine is containerd), the toolkit config and the CDI specs; then SIGTERM puts every
/// engine file back to its bytes and removes what the install added, leaving another owner's
/// `nvidia.yaml` alone.
#[test]
fn the_gpu_operators_entrypoint_and_variables_for_each_engine_and_cdi_setting() {
    bundle::require_root();
    let containerd = bundle::require("containerd");
    // (case, RUNTIME, CDI on, variant)
    let cases: &[(&str, &str, bool, &str)] = &[
        ("containerd", "containerd", false, ""),
        ("containerd, CDI", "containerd", true, ""),
        ("docker", "docker", false, ""),
        ("docker, CDI", "docker", true, ""),
        (
            "CRI-O without CDI: the Operator's hook mode",
            "crio",
            false,
            "",
        ),
        ("CRI-O, CDI: config mode", "crio", true, ""),
        (
            "k3s: config.toml.tmpl from k3s's generated config",
            "containerd",
            false,
            "k3s",
        ),
    ];
    for &(name, runtime, cdi, variant) in cases {
        let (dir, host) = bundle::scratch_host("nvct-installer-operator-", 2);
        let source = source_tree(&dir);
        let install = dir.join("usr/local/nvidia");
        let toolkit = install.join("toolkit");
        // The host's engine dir and the pod's mounts of it (links here).
        let (host_etc, originals): (std::path::PathBuf, Vec<(&str, &str)>) = match (runtime, variant) {
            ("containerd", "k3s") => (
                dir.join("host/var/lib/rancher/k3s/agent/etc/containerd"),
                vec![("config.toml", K3S_GENERATED)],
            ),
            ("containerd", _) => (
                dir.join("host/etc/containerd"),
                vec![(
                    "config.toml",
                    "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"runc\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n",
                )],
            ),
            ("docker", _) => (
                dir.join("host/etc/docker"),
                vec![("daemon.json", "{\n  \"log-level\": \"warn\"\n}\n")],
            ),
            _ => (
                dir.join("host/etc/crio"),
                vec![(
                    "config.toml",
                    "[crio.runtime]\ndefault_runtime = \"runc\"\n\n[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\n",
                )],
            ),
        };
        let drop_in_dir = match runtime {
            "containerd" => dir.join("host/etc/containerd/conf.d"),
            _ => host_etc.join("crio.conf.d"),
        };
        std::fs::create_dir_all(&host_etc).unwrap();
        std::fs::create_dir_all(&drop_in_dir).unwrap();
        for (file, text) in &originals {
            std::fs::write(host_etc.join(file), text).unwrap();
        }
        let pod = dir.join("pod/runtime");
        std::fs::create_dir_all(&pod).unwrap();
        std::os::unix::fs::symlink(&host_etc, pod.join("config-dir")).unwrap();
        std::os::unix::fs::symlink(&drop_in_dir, pod.join("config-dir.d")).unwrap();
        let host_root = fake_host_root(&dir);
        // The refresh unit's spec: another owner's.
        let cdi_dir = dir.join("cdi");
        std::fs::create_dir_all(&cdi_dir).unwrap();
        let refresh_spec = b"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n".to_vec();
        std::fs::write(cdi_dir.join("nvidia.yaml"), &refresh_spec).unwrap();

        let env = operator_env(&dir, &host, &source, runtime, cdi, variant);
        let extra = [format!("--proc-root={}", host.proc_root().display())];
        let inst = Installer::start_cmd(&dir, operator_command(&dir, &install, &env, &extra));
        let log = inst.text();
        let ctx = format!("{name}:\n--- installer\n{log}");
        assert!(toolkit.join("nvidia-container-runtime").is_file(), "{ctx}");
        assert!(
            log.contains("NRI_NAMESPACE is set but not acted on"),
            "NRI_NAMESPACE is named: {ctx}"
        );

        // The toolkit config of the `nvidia` runtime.
        let config_text =
            std::fs::read_to_string(toolkit.join(".config/nvidia-container-runtime/config.toml"))
                .unwrap();
        let cfg =
            nvct_formats::config::Config::parse(&config_text, Path::new("config.toml")).unwrap();
        let mode = if cdi {
            nvct_formats::config::Mode::Cdi
        } else {
            nvct_formats::config::Mode::Auto
        };
        assert_eq!(cfg.runtime.mode, mode, "{ctx}\n{config_text}");
        assert_eq!(
            cfg.runtime.modes.cdi.default_kind, "management.nvidia.com/gpu",
            "{ctx}"
        );

        // The CDI specs: upstream's management spec; the refresh unit's left alone.
        let management = cdi_dir.join("management.nvidia.com-gpu.yaml");
        assert_eq!(
            std::fs::read(cdi_dir.join("nvidia.yaml")).unwrap(),
            refresh_spec,
            "{ctx}"
        );
        if cdi {
            let spec = std::fs::read_to_string(&management).unwrap();
            for want in [
                "kind: management.nvidia.com/gpu",
                "name: all",
                "hostPath: /dev/nvidia0",
                "hostPath: /dev/nvidia1",
                toolkit.join("nvidia-cdi-hook").to_str().unwrap(),
            ] {
                assert!(spec.contains(want), "{ctx}\nthe spec lacks {want}:\n{spec}");
            }
            let seen = host.driver_root().display().to_string();
            assert!(
                !spec.contains(&seen),
                "a path as the pod sees it: {ctx}\n{spec}"
            );
        } else {
            assert!(!management.exists(), "{ctx}");
        }

        // The engine's config as the node ends with it.
        let wrapper = |w: &str| toolkit.join(w).display().to_string();
        let systemctl_log = host_root.join("systemctl.log");
        match runtime {
            "containerd" => {
                let main = host_etc.join(if variant == "k3s" {
                    "config.toml.tmpl"
                } else {
                    "config.toml"
                });
                let dump = Command::new(&containerd)
                    .arg("--config")
                    .arg(&main)
                    .args(["config", "dump"])
                    .output()
                    .unwrap();
                assert!(dump.status.success(), "{ctx}\n{}", out_text(&dump));
                let dump = String::from_utf8_lossy(&dump.stdout).to_string();
                let default = if cdi { "runc" } else { "nvidia" };
                let mut wants = vec![
                    format!("[{CRI}.runtimes.nvidia]"),
                    format!("[{CRI}.runtimes.nvidia-cdi]"),
                    format!("[{CRI}.runtimes.nvidia-legacy]"),
                    format!("BinaryName = \"{}\"", wrapper("nvidia-container-runtime")),
                    format!("default_runtime_name = \"{default}\""),
                ];
                // containerd 1.6 (these machines) has no CDI of its own and drops the key from
                // its dump: the drop-in says it.
                let drop_in =
                    std::fs::read_to_string(dir.join("host/etc/containerd/conf.d/99-nvidia.toml"))
                        .unwrap();
                assert_eq!(
                    drop_in.contains("enable_cdi = true"),
                    cdi,
                    "{ctx}\n{drop_in}"
                );
                if variant == "k3s" {
                    wants.push("sandbox_image = \"rancher/mirrored-pause:3.6\"".into());
                    let tmpl = std::fs::read_to_string(&main).unwrap();
                    assert!(!tmpl.contains("{{"), "{ctx}\n{tmpl}");
                }
                for want in wants {
                    assert!(
                        dump.contains(&want),
                        "{ctx}\ncontainerd's dump lacks {want}:\n{dump}"
                    );
                }
            }
            "docker" => {
                let v: serde_json::Value = serde_json::from_str(
                    &std::fs::read_to_string(host_etc.join("daemon.json")).unwrap(),
                )
                .unwrap();
                assert_eq!(v["log-level"], "warn", "{ctx}");
                assert_eq!(
                    v["runtimes"]["nvidia"]["path"],
                    wrapper("nvidia-container-runtime"),
                    "{ctx}"
                );
                assert_eq!(
                    v["runtimes"]["nvidia-cdi"]["path"],
                    wrapper("nvidia-container-runtime.cdi"),
                    "{ctx}"
                );
                let default = (!cdi).then_some("nvidia");
                assert_eq!(v["default-runtime"].as_str(), default, "{ctx}\n{v}");
                assert_eq!(
                    v["features"]["cdi"].as_bool(),
                    cdi.then_some(true),
                    "{ctx}\n{v}"
                );
            }
            _ => {
                let drop_in = drop_in_dir.join("99-nvidia.conf");
                let hook = dir.join("host/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json");
                if cdi {
                    let text = std::fs::read_to_string(&drop_in).unwrap();
                    let st = nvct_engines::crio::status(
                        nvct_engines::Source {
                            path: &drop_in,
                            text: &text,
                        },
                        "nvidia",
                    )
                    .unwrap();
                    assert_eq!(
                        st.runtime_path,
                        Some(wrapper("nvidia-container-runtime")),
                        "{ctx}\n{text}"
                    );
                    assert!(!text.contains("default_runtime"), "{ctx}\n{text}");
                    assert!(!hook.exists(), "{ctx}");
                    assert_eq!(
                        std::fs::read_to_string(&systemctl_log).unwrap(),
                        "restart crio\n",
                        "{ctx}"
                    );
                } else {
                    let v: serde_json::Value =
                        serde_json::from_str(&std::fs::read_to_string(&hook).unwrap()).unwrap();
                    assert_eq!(
                        v["hook"]["path"],
                        wrapper("nvidia-container-runtime-hook"),
                        "{ctx}\n{v}"
                    );
                    assert_eq!(v["stages"], serde_json::json!(["prestart"]), "{ctx}");
                    let env = v["hook"]["env"].to_string();
                    assert!(
                        env.contains(&format!(
                            "NVIDIA_CTK_CONFIG_FILE_PATH={}",
                            toolkit
                                .join(".config/nvidia-container-runtime/config.toml")
                                .display()
                        )),
                        "{ctx}\n{v}"
                    );
                    assert!(!drop_in.exists(), "hook mode writes no drop-in: {ctx}");
                    assert!(!systemctl_log.exists(), "hook mode restarts nothing: {ctx}");
                }
            }
        }

        let (ok, log) = inst.stop();
        let ctx = format!("{name}:\n--- installer\n{log}");
        assert!(ok, "{ctx}");
        for (file, text) in &originals {
            assert_eq!(
                std::fs::read_to_string(host_etc.join(file)).unwrap(),
                *text,
                "{file}: {ctx}"
            );
        }
        assert_eq!(
            std::fs::read_dir(&drop_in_dir).unwrap().count(),
            0,
            "the drop-in is left: {ctx}"
        );
        assert!(!host_etc.join("config.toml.tmpl").exists(), "{ctx}");
        assert!(
            !dir.join("host/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json")
                .exists(),
            "{ctx}"
        );
        assert!(!management.exists(), "{ctx}");
        assert_eq!(
            std::fs::read(cdi_dir.join("nvidia.yaml")).unwrap(),
            refresh_spec,
            "{ctx}"
        );
        assert!(!toolkit.exists(), "{ctx}");
        assert!(
            !dir.join("run/nvidia/toolkit/toolkit.pid").exists(),
            "{ctx}"
        );
        if runtime == "crio" && cdi {
            assert_eq!(
                std::fs::read_to_string(&systemctl_log).unwrap(),
                "restart crio\nrestart crio\n",
                "{ctx}"
            );
        }
    }
}

/// With CDI on, the Operator's management containers (DCGM, the device plugin's own pod) run
/// with the `nvidia` runtime class and `NVIDIA_VISIBLE_DEVICES=all`: the runtime's mode is
/// `cdi`, its default kind `management.nvidia.com/gpu`, so the container gets every GPU from
/// the management spec the installer wrote. Here through a real containerd (`ctr run` with the
/// installed `nvidia` wrapper as the runc binary).
#[test]
fn with_cdi_on_a_management_container_gets_every_gpu_from_the_management_spec() {
    bundle::require_root();
    bundle::require("runc");
    bundle::require("containerd-shim-runc-v2");
    let ctr = bundle::require("ctr");
    let (dir, host) = bundle::scratch_host("nvct-installer-mgmt-", 2);
    let config_env = bundle::write_config(&dir, &host.driver_root(), &host.proc_root(), "");
    let cd = start_containerd(&dir, &config_env);
    let engine_config = dir.join("containerd.toml");
    let original = std::fs::read(&engine_config).unwrap();
    let source = source_tree(&dir);
    let install = dir.join("install");
    let driver = host.driver_root().display().to_string();
    let env: Vec<(String, String)> = [
        (
            "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
            "management.nvidia.com/gpu",
        ),
        ("NVIDIA_VISIBLE_DEVICES", "void"),
        ("RUNTIME", "containerd"),
        ("CONTAINERD_RUNTIME_CLASS", "nvidia"),
        ("CDI_ENABLED", "true"),
        ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false"),
        ("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi"),
        ("CRIO_CONFIG_MODE", "config"),
        ("NVIDIA_DRIVER_ROOT", &driver),
        ("NVIDIA_DEV_ROOT", &driver),
        ("RUNTIME_RESTART_MODE", "none"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .chain([
        (
            "RUNTIME_CONFIG".to_string(),
            engine_config.display().to_string(),
        ),
        (
            "RUNTIME_DROP_IN_CONFIG".to_string(),
            dir.join("conf.d/99-nvidia.toml").display().to_string(),
        ),
        (
            "TOOLKIT_PID_FILE".to_string(),
            dir.join("run/toolkit.pid").display().to_string(),
        ),
        (
            "TOOLKIT_SOURCE_ROOT".to_string(),
            source.display().to_string(),
        ),
        (
            "CDI_OUTPUT_DIR".to_string(),
            dir.join("cdi").display().to_string(),
        ),
    ])
    .collect();
    let extra = [format!("--proc-root={}", host.proc_root().display())];
    let inst = Installer::start_cmd(&dir, operator_command(&dir, &install, &env, &extra));
    let toolkit = install.join("toolkit");
    assert!(
        dir.join("cdi/management.nvidia.com-gpu.yaml").is_file(),
        "{}",
        inst.text()
    );

    let b = Bundle::new(&dir, Image::Busybox);
    let id = format!("nvct-installer-mgmt-{}", std::process::id());
    let out: Output = Command::new(&ctr)
        .arg("-a")
        .arg(&cd.sock)
        .args(["run", "--rm", "--runc-binary"])
        .arg(toolkit.join("nvidia-container-runtime"))
        .args(["--env", "NVIDIA_VISIBLE_DEVICES=all", "--rootfs"])
        .arg(b.rootfs())
        .args([
            &id,
            "/bin/sh",
            "-c",
            "export PATH=/bin; ls /dev/nvidia*; echo done",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}\n--- containerd log\n{}\n--- installer\n{}",
        out_text(&out),
        std::fs::read_to_string(&cd.log).unwrap_or_default(),
        inst.text()
    );
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    for node in [
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
    ] {
        assert!(lines.contains(&node), "{node}: {text}");
    }
    let (ok, log) = inst.stop();
    assert!(ok, "{log}");
    assert_eq!(std::fs::read(&engine_config).unwrap(), original, "{log}");
    assert!(
        !dir.join("cdi/management.nvidia.com-gpu.yaml").exists(),
        "{log}"
    );
    drop(cd);
}

/// What the installer refuses or leaves alone, run as the Operator runs it: the NRI plugin
/// mode is refused before anything is touched (exit 2, a message saying what to set
/// instead); `NO_RUNTIME_CONFIG=true` installs the toolkit and leaves the engine's config as
/// it is (and `ROOT` wins over the entrypoint's positional install dir).
#[test]
fn the_nri_mode_is_refused_and_no_runtime_config_leaves_the_engine_alone() {
    bundle::require_root();
    let (dir, host) = bundle::scratch_host("nvct-installer-nri-", 1);
    let source = source_tree(&dir);
    let config = dir.join("config.toml");
    let original = "version = 2\n";
    std::fs::write(&config, original).unwrap();
    let base: Vec<(String, String)> = [
        ("RUNTIME", "containerd".to_string()),
        ("RUNTIME_CONFIG", config.display().to_string()),
        (
            "RUNTIME_DROP_IN_CONFIG",
            dir.join("conf.d/99-nvidia.toml").display().to_string(),
        ),
        ("RUNTIME_RESTART_MODE", "signal".into()),
        (
            "TOOLKIT_PID_FILE",
            dir.join("run/toolkit.pid").display().to_string(),
        ),
        ("TOOLKIT_SOURCE_ROOT", source.display().to_string()),
        ("CDI_OUTPUT_DIR", dir.join("cdi").display().to_string()),
        (
            "NVIDIA_DRIVER_ROOT",
            host.driver_root().display().to_string(),
        ),
        ("NO_DAEMON", "true".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let extra = [format!("--proc-root={}", host.proc_root().display())];
    let with = |more: &[(&str, String)]| {
        let mut env = base.clone();
        env.extend(more.iter().map(|(k, v)| (k.to_string(), v.clone())));
        env
    };

    // NRI (the Operator's cdi.nriPluginEnabled): refused, nothing touched.
    let nri = with(&[
        ("CDI_ENABLED", "true".into()),
        ("ENABLE_NRI_PLUGIN", "true".into()),
        ("NRI_SOCKET", "/runtime/nri-sock-dir/nri.sock".into()),
        ("NRI_NAMESPACE", "gpu-operator".into()),
    ]);
    let out = operator_command(&dir, &dir.join("install"), &nri, &extra)
        .output()
        .unwrap();
    let text = out_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    for want in [
        "ENABLE_NRI_PLUGIN",
        "this installer has no NRI plugin",
        "nothing was changed",
        "Leave it off",
        "CDI_ENABLED=true",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(!dir.join("install").exists(), "{text}");
    assert!(!dir.join("run").exists(), "{text}");
    assert!(!dir.join("conf.d").exists(), "{text}");
    assert!(!dir.join("cdi").exists(), "{text}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), original);

    // NO_RUNTIME_CONFIG: the toolkit in ROOT (not the positional dir), the engine untouched,
    // no signal (there is no engine socket here).
    let root = dir.join("root-dir");
    let plain = with(&[
        ("NO_RUNTIME_CONFIG", "true".into()),
        ("ROOT", root.display().to_string()),
    ]);
    let out = operator_command(&dir, &dir.join("install"), &plain, &extra)
        .output()
        .unwrap();
    let text = out_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        root.join("toolkit/nvidia-container-runtime").is_file(),
        "{text}"
    );
    assert!(!dir.join("install").exists(), "{text}");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        original,
        "{text}"
    );
    assert!(!dir.join("conf.d").exists(), "{text}");
    assert!(
        text.contains("not restarting containerd: its config was not changed (NO_RUNTIME_CONFIG)"),
        "{text}"
    );
}

/// CRI-O without CDI under the GPU Operator: hook mode. The hook file the installer writes is
/// the hooks.d format CRI-O and podman share; podman given that directory (`--hooks-dir`) runs
/// the installed hook with the installed config for a container asking for GPU 1, which gets
/// it. SIGTERM removes the file.
#[test]
fn crio_hook_mode_hook_file_runs_the_installed_hook_under_podman() {
    bundle::require_root();
    let podman = bundle::require("podman");
    bundle::require("runc");
    let (dir, host) = bundle::scratch_host("nvct-installer-hook-", 2);
    let source = source_tree(&dir);
    let hooks = dir.join("hooks.d");
    let env: Vec<(String, String)> = [
        ("RUNTIME", "crio".to_string()),
        ("CRIO_CONFIG_MODE", "hook".into()),
        ("CRIO_HOOKS_DIR", hooks.display().to_string()),
        (
            "RUNTIME_CONFIG",
            dir.join("crio/config.toml").display().to_string(),
        ),
        (
            "NVIDIA_DRIVER_ROOT",
            host.driver_root().display().to_string(),
        ),
        (
            "TOOLKIT_PID_FILE",
            dir.join("run/toolkit.pid").display().to_string(),
        ),
        ("TOOLKIT_SOURCE_ROOT", source.display().to_string()),
        ("CDI_OUTPUT_DIR", dir.join("cdi").display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let extra = [format!("--proc-root={}", host.proc_root().display())];
    let install = dir.join("install");
    let inst = Installer::start_cmd(&dir, operator_command(&dir, &install, &env, &extra));
    let hook_file = hooks.join("oci-nvidia-hook.json");
    assert!(hook_file.is_file(), "{}", inst.text());
    assert!(!dir.join("crio").exists(), "CRI-O's config is left alone");

    let rootfs = Bundle::new(&dir, Image::Busybox).rootfs();
    let _engine = crate::common::engines::engine();
    let out = Command::new(&podman)
        .arg("--hooks-dir")
        .arg(&hooks)
        .args(["run", "--rm", "--runtime", "runc"])
        .args([
            "--ulimit",
            "nofile=20000:20000",
            "--ulimit",
            "nproc=4096:4096",
        ])
        .args(["-e", "NVIDIA_VISIBLE_DEVICES=1", "--rootfs"])
        .arg(&rootfs)
        .args(["sh", "-c", "ls /dev/nvidia*; echo done"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}\n--- installer\n{}", out_text(&out), inst.text());
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert!(lines.contains(&"/dev/nvidia1"), "{text}");
    assert!(!lines.contains(&"/dev/nvidia0"), "{text}");
    let (ok, log) = inst.stop();
    assert!(ok, "{log}");
    assert!(!hook_file.exists(), "{log}");
    assert!(!install.join("toolkit").exists(), "{log}");
}
