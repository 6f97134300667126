//! OCI hooks.d JSON (podman, CRI-O `--config-mode=oci-hook`): the file that makes the engine run
//! `nvidia-container-runtime-hook prestart` for every container. Pure: no I/O.
//!
//! The hook gets an explicit `PATH` (never the caller's environment), so the file is the same on
//! every run and the hook never inherits a container-controlled search path: the standard
//! directories, plus the hook's own directory when it is not one of them (as upstream does).

use std::path::Path;

use serde_json::json;

/// Where the packages install the hook file (podman and CRI-O read this directory).
pub const DEFAULT_PATH: &str = "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json";
/// The hook binary the file runs by default.
pub const DEFAULT_HOOK_BINARY: &str = "/usr/bin/nvidia-container-runtime-hook";

/// `PATH=<standard dirs>[:<dir of the hook>]`.
fn path_env(hook_path: &str) -> String {
    let base = nvct_model::HOOK_PATH_ENV;
    let dir = Path::new(hook_path).parent().and_then(Path::to_str);
    match dir {
        Some(d) if !d.is_empty() && !base["PATH=".len()..].split(':').any(|p| p == d) => {
            format!("{base}:{d}")
        }
        _ => base.to_string(),
    }
}

/// The hooks.d document for a hook binary at `hook_path`, pretty-printed with a trailing newline.
pub fn render(hook_path: &str) -> String {
    render_with_env(hook_path, &[])
}

/// [`render`] with `extra_env` (`NAME=VALUE` each) after `PATH` in the hook's `env`: the
/// installer's hook file names its own toolkit config (`NVIDIA_CTK_CONFIG_FILE_PATH`), which
/// upstream's sets through the wrapper script its hook path names.
pub fn render_with_env(hook_path: &str, extra_env: &[String]) -> String {
    let base = Path::new(hook_path)
        .file_name()
        .map_or(hook_path.into(), |b| b.to_string_lossy());
    let doc = json!({
        "version": "1.0.0",
        "hook": {
            "path": hook_path,
            "args": [base, "prestart"],
            "env": std::iter::once(path_env(hook_path))
                .chain(extra_env.iter().cloned())
                .collect::<Vec<_>>(),
        },
        "when": {"always": true, "commands": [".*"]},
        "stages": ["prestart"],
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("serializing a JSON value cannot fail");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn shape() {
        let cases = [(
            "default",
            "/usr/bin/nvidia-container-runtime-hook",
            "nvidia-container-runtime-hook",
        )];
        for (name, path, base) in cases {
            let v: serde_json::Value = serde_json::from_str(&super::render(path)).unwrap();
            assert_eq!(v["hook"]["path"], path, "case {name}");
            assert_eq!(
                v["hook"]["args"],
                serde_json::json!([base, "prestart"]),
                "case {name}"
            );
            assert_eq!(v["stages"], serde_json::json!(["prestart"]), "case {name}");
            assert_eq!(v["when"]["always"], true, "case {name}");
        }
    }

    #[test]
    fn extra_env_follows_path() {
        // (case, extra env, the hook's env)
        let std = nvct_model::HOOK_PATH_ENV;
        let cases: &[(&str, &[&str], Vec<String>)] = &[
            ("none", &[], vec![std.to_string()]),
            (
                "the installer's config",
                &["NVIDIA_CTK_CONFIG_FILE_PATH=/usr/local/nvidia/toolkit/.config/c.toml"],
                vec![
                    std.to_string(),
                    "NVIDIA_CTK_CONFIG_FILE_PATH=/usr/local/nvidia/toolkit/.config/c.toml".into(),
                ],
            ),
        ];
        for (name, extra, want) in cases {
            let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            let v: serde_json::Value = serde_json::from_str(&super::render_with_env(
                "/usr/bin/nvidia-container-runtime-hook",
                &extra,
            ))
            .unwrap();
            assert_eq!(v["hook"]["env"], serde_json::json!(want), "case {name}");
        }
    }

    #[test]
    fn path_env_cases() {
        let std = nvct_model::HOOK_PATH_ENV;
        let cases = [
            (
                "standard dir",
                "/usr/bin/nvidia-container-runtime-hook",
                std.to_string(),
            ),
            (
                "other dir appended",
                "/opt/nv/bin/nvidia-container-runtime-hook",
                format!("{std}:/opt/nv/bin"),
            ),
        ];
        for (name, hook, want) in cases {
            assert_eq!(super::path_env(hook), want, "case {name}");
        }
    }
}
