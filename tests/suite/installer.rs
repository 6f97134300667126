//! Black-box tests of `nvidia-ctk-installer` (what the GPU Operator's toolkit container runs):
//! against a real containerd (the installed runtime starts a GPU container under `ctr run`), a
//! real dockerd (SIGHUP makes it load the three runtimes), and CRI-O's files with a systemd
//! restart through `chroot <host root>`; SIGTERM then puts every engine file back to its
//! original bytes and removes the install.

use crate::common::bundle::{self, out_text, Bundle, Image};
use crate::common::containerd::start_containerd;
use crate::common::dockerd::{docker, start_dockerd};
use crate::common::installer::{common_args, source_tree, Installer, INSTALLER};
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
        let st = nvct::runtime_config::containerd::status(
            nvct::runtime_config::Source {
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
        let st = nvct::runtime_config::crio::status(
            nvct::runtime_config::Source {
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
    let cfg = nvct::config::Config::parse(&config, Path::new("config.toml")).unwrap();
    assert_eq!(cfg.cli.root, "/run/nvidia/driver", "{config}");
    assert!(
        cfg.accept_nvidia_visible_devices_as_volume_mounts,
        "{config}"
    );
    let drop_in = std::fs::read_to_string(dir.join("conf.d/99-nvidia.toml")).unwrap();
    for name in ["gpu", "gpu-cdi", "gpu-legacy"] {
        let st = nvct::runtime_config::containerd::status(
            nvct::runtime_config::Source {
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

/// The GPU Operator's layout: the pod sees the host's containerd config dir at one path and
/// writes the drop-in through another (`RUNTIME_DROP_IN_CONFIG`), while the host's containerd
/// reads `RUNTIME_DROP_IN_CONFIG_HOST_PATH`. `imports` names the host path, and a real
/// containerd given only the host paths loads the runtimes (runc still the default). Upstream's
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
    let imports = nvct::runtime_config::containerd::imports(nvct::runtime_config::Source {
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
        "default_runtime_name = \"runc\"",
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
    let cfg = nvct::config::Config::parse(&config, Path::new("config.toml")).unwrap();
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
