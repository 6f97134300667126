//! The container engines: one `engine NAME` check per engine found (docker, containerd, CRI-O):
//! its effective config (with drop-ins) registers the `nvidia` runtime, and for containerd no
//! drop-in shadows an edit of another file; and what the config says of the systemd cgroup
//! driver and the default runtime, which later checks use.

use super::{check, ok, Check, Engine, Status};
use nvct_engines::{self as runtime_config, Source};
use std::path::{Path, PathBuf};

/// One engine's effective config as the caller found it.
#[derive(Debug, Clone)]
pub struct EngineInput {
    pub engine: Engine,
    /// The file the config came from (for messages and the fix's `--config`).
    pub path: PathBuf,
    /// How the text was read (`the file`, `containerd config dump`).
    pub via: String,
    /// The text; `None` when there is no config file.
    pub text: Option<String>,
    /// Drop-ins the engine reads over the file, in the order it applies them (CRI-O's
    /// `crio.conf.d`; containerd's `imports` when it was not dumped by containerd itself):
    /// (path, text). What `nvidia-ctk runtime configure` writes by default.
    pub drop_ins: Vec<(PathBuf, String)>,
    /// containerd: the config file and the files it imports, as read from disk, in the order
    /// containerd loads them (even when `text` is containerd's own dump): what a drop-in
    /// shadows is judged from them. Empty for the other engines.
    pub layers: Vec<(PathBuf, String)>,
    /// containerd: its release (`containerd --version`), which decides how imports merge;
    /// `None` when unknown (the rule before 2.0 is taken).
    pub release: Option<runtime_config::containerd::Release>,
}

/// What an engine's config says beyond its check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct EngineFacts {
    /// It uses the systemd cgroup driver.
    pub(super) systemd: bool,
    /// `nvidia` is its default runtime (what the device plugin's pod runs with when it sets no
    /// runtimeClassName).
    pub(super) nvidia_default: bool,
}

/// The check, and what the config says of cgroups and the default runtime.
pub(super) fn engine_check(e: &EngineInput, v2: bool, kubelet: bool) -> (Check, EngineFacts) {
    let name = e.engine.name();
    let check_name = format!("engine {name}");
    let fix = format!(
        "`nvidia-ctk runtime configure --runtime={name} --config={}`, then restart {name}",
        e.path.display()
    );
    // `docker run --gpus` goes through the prestart hook without any entry; only
    // `--runtime=nvidia` needs one. containerd and CRI-O start GPU pods through the entry.
    // containerd without a kubelet serves docker (or ctr) only: a warning.
    let missing = match e.engine {
        Engine::Docker => Status::Warn,
        Engine::Containerd if !kubelet => Status::Warn,
        _ => Status::Fail,
    };
    // A config that does not parse fails the check (and says nothing of systemd cgroups).
    let unreadable = |err: &dyn std::fmt::Display| {
        let why = format!("{} (read from {}): {err}", e.path.display(), e.via);
        let check = check(
            &check_name,
            Status::Fail,
            why,
            format!("fix the file, then {fix}"),
        );
        (check, EngineFacts::default())
    };
    let merged;
    let text = match (&e.text, e.drop_ins.is_empty()) {
        (Some(t), true) => Some(t),
        (t, false) => {
            let main = Source {
                path: &e.path,
                text: t.as_deref().unwrap_or(""),
            };
            let sources: Vec<Source<'_>> = std::iter::once(main)
                .chain(e.drop_ins.iter().map(|(path, text)| Source { path, text }))
                .collect();
            let result = match e.engine {
                Engine::Containerd => runtime_config::containerd::effective(
                    &sources,
                    runtime_config::containerd::MergeRule::of(e.release),
                ),
                _ => runtime_config::merge_toml(&sources),
            };
            match result {
                Ok(m) => {
                    merged = m;
                    Some(&merged)
                }
                Err(err) => return unreadable(&err),
            }
        }
        (None, true) => None,
    };
    let Some(text) = text else {
        return (
            check(
                &check_name,
                Status::Warn,
                format!(
                    "{name} is installed but {} does not exist",
                    e.path.display()
                ),
                fix,
            ),
            EngineFacts {
                systemd: e.engine.default_systemd(v2),
                nvidia_default: false,
            },
        );
    };
    let src = Source {
        path: &e.path,
        text,
    };
    let reg = match e.engine.status(src, runtime_config::DEFAULT_RUNTIME_NAME) {
        Ok(r) => r,
        Err(err) => return unreadable(&err),
    };
    let systemd = reg.systemd_cgroup.unwrap_or(e.engine.default_systemd(v2));
    // containerd without its default runtime does not load its CRI plugin at all.
    let cri_broken = match e.engine {
        Engine::Containerd => runtime_config::containerd::check_default_runtime_under(
            src,
            runtime_config::containerd::MergeRule::of(e.release),
        )
        .err(),
        _ => None,
    };
    let c = match &reg.runtime_path {
        _ if cri_broken.is_some() => check(
            &check_name,
            Status::Fail,
            format!(
                "read from {}: {}",
                e.via,
                cri_broken.expect("matched Some")
            ),
            format!(
                "put the `runc` runtime back (`nvidia-ctk runtime configure --runtime=containerd --config={}` writes it next to `nvidia`), then restart containerd",
                e.path.display()
            ),
        ),
        None => check(
            &check_name,
            missing,
            format!(
                "{} (read from {}) has no `nvidia` runtime{}",
                e.path.display(),
                e.via,
                match e.engine {
                    Engine::Docker => ": `docker run --gpus` still works through the prestart hook, `--runtime=nvidia` does not",
                    Engine::Containerd if !kubelet => ": no kubelet on this node (no /var/lib/kubelet, no --node-labels), so no pod starts through it; `ctr run --runtime` and nerdctl users need it",
                    _ => ": pods with runtimeClassName nvidia cannot start",
                }
            ),
            fix,
        ),
        Some(p) if p.starts_with('/') && !Path::new(p).exists() => check(
            &check_name,
            Status::Fail,
            format!("the `nvidia` runtime in {} runs {p}, which does not exist", e.path.display()),
            fix,
        ),
        Some(p) => ok(
            &check_name,
            format!(
                "`nvidia` runtime registered in {} (read from {}; runs {p}; default runtime: {}; cgroup driver: {})",
                e.path.display(),
                e.via,
                if reg.is_default { "yes" } else { "no" },
                if systemd { "systemd" } else { "cgroupfs" }
            ),
        ),
    };
    let c = match c.status {
        Status::Ok if e.engine == Engine::Containerd => containerd_shadow_check(e).unwrap_or(c),
        _ => c,
    };
    let facts = EngineFacts {
        systemd,
        nvidia_default: reg.is_default && reg.runtime_path.is_some(),
    };
    (c, facts)
}

/// A failed `engine containerd` check when the drop-in that registers `nvidia` shadows a key
/// another file sets differently (containerd before 2.0 replaces the whole CRI table with the
/// drop-in's copy; a copy also overrides key by key in 2.0 and later): an edit made there after
/// `runtime configure` has no effect. `None` when nothing is shadowed (or the files do not
/// parse: the other checks say so).
fn containerd_shadow_check(e: &EngineInput) -> Option<Check> {
    use runtime_config::containerd::{drop_in_of, shadowed, MergeRule};
    let files: Vec<Source<'_>> = e
        .layers
        .iter()
        .map(|(path, text)| Source { path, text })
        .collect();
    let name = runtime_config::DEFAULT_RUNTIME_NAME;
    let drop_in = drop_in_of(&files, name)?;
    let rule = MergeRule::of(e.release);
    let found = shadowed(&files, drop_in, name, rule).ok()?;
    let first = found.first()?;
    const SHOWN: usize = 3;
    let mut list: Vec<String> = found.iter().take(SHOWN).map(|s| s.to_string()).collect();
    if found.len() > SHOWN {
        list.push(format!("and {} more", found.len() - SHOWN));
    }
    let release = match e.release {
        Some(r) => format!("containerd {r}: {}", rule.describe()),
        None => format!("containerd's version unknown, so {}", rule.describe()),
    };
    let drop_in = files[drop_in].path;
    Some(check(
        &format!("engine {}", e.engine.name()),
        Status::Fail,
        format!(
            "the drop-in {} shadows {} set in {}, so that edit has no effect ({release}): {}",
            drop_in.display(),
            first.key,
            first.file.display(),
            list.join("; ")
        ),
        format!(
            "`nvidia-ctk runtime configure --runtime=containerd --refresh-drop-in --config={} --drop-in-config={}`, then `systemctl restart containerd` (`systemctl enable --now nvidia-containerd-dropin.path nvidia-containerd-dropin.service` does this at each change and before each start)",
            e.path.display(),
            drop_in.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_check_reads_drop_ins() {
        let entry = "[crio.runtime.runtimes.nvidia]\nruntime_path = \"nvidia-container-runtime\"\n";
        let input = |text: Option<&str>, drop_ins: &[(&str, &str)]| EngineInput {
            engine: Engine::Crio,
            path: PathBuf::from("/etc/crio/crio.conf"),
            via: "the file".into(),
            text: text.map(str::to_string),
            drop_ins: drop_ins
                .iter()
                .map(|(p, t)| (PathBuf::from(p), t.to_string()))
                .collect(),
            layers: vec![],
            release: None,
        };
        let d = "/etc/crio/crio.conf.d/99-nvidia.toml";
        // (case, input, status, words in the detail)
        let cases = [
            (
                "entry in the file",
                input(Some(entry), &[]),
                Status::Ok,
                "registered",
            ),
            (
                "entry in a drop-in",
                input(Some(""), &[(d, entry)]),
                Status::Ok,
                "registered",
            ),
            (
                "drop-in without a main file",
                input(None, &[(d, entry)]),
                Status::Ok,
                "registered",
            ),
            (
                "neither",
                input(Some("[crio]\n"), &[]),
                Status::Fail,
                "has no `nvidia` runtime",
            ),
            (
                "bad drop-in named",
                input(Some(""), &[(d, "[crio\n")]),
                Status::Fail,
                "99-nvidia.toml:1: invalid TOML",
            ),
        ];
        for (name, e, status, words) in cases {
            let (c, _) = engine_check(&e, false, true);
            assert_eq!(c.status, status, "case {name}: {}", c.detail);
            assert!(c.detail.contains(words), "case {name}: {}", c.detail);
        }
    }

    #[test]
    fn containerd_drop_in_that_shadows_an_edit_fails() {
        use runtime_config::containerd::Release;
        let cri = "[plugins.\"io.containerd.grpc.v1.cri\"]";
        let main = |pause: &str| {
            format!(
                "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n{cri}\nsandbox_image = \"{pause}\"\n"
            )
        };
        let nvidia = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\nBinaryName = \"/bin/sh\"\n";
        let runc = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n";
        let copy = format!("version = 2\n{cri}\nsandbox_image = \"pause:1\"\n{runc}{nvidia}");
        let own = format!("version = 2\n{nvidia}");
        let d = "/etc/containerd/conf.d/99-nvidia.toml";
        // (case, main file, drop-in, containerd's release, status, words in the detail)
        let cases: Vec<(&str, String, String, Option<(u64, u64)>, Status, &str)> = vec![
            ("the copy as configure made it", main("pause:1"), copy.clone(), Some((1, 6)), Status::Ok, "registered"),
            (
                "config.toml edited after configure",
                main("pause:2"),
                copy.clone(),
                Some((1, 6)),
                Status::Fail,
                "shadows plugins.\"io.containerd.grpc.v1.cri\".sandbox_image set in /etc/containerd/config.toml",
            ),
            ("unknown release: the rule before 2.0", main("pause:2"), copy.clone(), None, Status::Fail, "version unknown"),
            ("an old copy under 2.x shadows too", main("pause:2"), copy, Some((2, 1)), Status::Fail, "key by key"),
            ("our keys only under 2.x", main("pause:2"), own, Some((2, 0)), Status::Ok, "registered"),
        ];
        for (name, main_text, drop_in, release, status, words) in cases {
            let e = EngineInput {
                engine: Engine::Containerd,
                path: PathBuf::from("/etc/containerd/config.toml"),
                via: "the file".into(),
                text: Some(main_text.clone()),
                drop_ins: vec![(PathBuf::from(d), drop_in.clone())],
                layers: vec![
                    (PathBuf::from("/etc/containerd/config.toml"), main_text),
                    (PathBuf::from(d), drop_in),
                ],
                release: release.map(|(major, minor)| Release { major, minor }),
            };
            let (c, _) = engine_check(&e, false, true);
            assert_eq!(c.status, status, "case {name}: {}", c.detail);
            assert!(c.detail.contains(words), "case {name}: {}", c.detail);
            if status == Status::Fail {
                assert!(
                    c.fix.contains("--refresh-drop-in") && c.fix.contains(d),
                    "case {name}: {}",
                    c.fix
                );
            }
        }
    }

    #[test]
    fn containerd_without_nvidia_fails_only_where_a_kubelet_runs() {
        let e = EngineInput {
            engine: Engine::Containerd,
            path: PathBuf::from("/etc/containerd/config.toml"),
            via: "the file".into(),
            text: Some("version = 2\n".into()),
            drop_ins: vec![],
            layers: vec![],
            release: None,
        };
        // (case, kubelet, status, words in the detail)
        let cases = [
            (
                "a Kubernetes node",
                true,
                Status::Fail,
                "pods with runtimeClassName nvidia",
            ),
            (
                "a docker-only node",
                false,
                Status::Warn,
                "no kubelet on this node",
            ),
        ];
        for (name, kubelet, status, words) in cases {
            let (c, _) = engine_check(&e, false, kubelet);
            assert_eq!(c.status, status, "case {name}: {}", c.detail);
            assert!(c.detail.contains(words), "case {name}: {}", c.detail);
        }
    }
}
