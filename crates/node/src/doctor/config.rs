//! The toolkit's own set-up: the checks `config` (the config file loads without unknown keys),
//! `ldconfig` (the configured ldconfig is a static binary) and `low-level runtime` (the runtime
//! the shim execs is found and executable); and the ` --config-file=` flag of fixes that edit
//! the config.

use super::{check, ok, Check, Inputs, Status};
use nvct_formats::config::Config;
use nvct_inject::shim;
use std::path::{Path, PathBuf};

pub(super) fn config_check(inputs: &Inputs<'_>) -> Check {
    let path = inputs.config_path.display();
    let exists = inputs.config_path.exists();
    let state = if exists { "" } else { " (not there: defaults)" };
    if inputs.config_warnings.is_empty() {
        return ok("config", format!("{path}{state}"));
    }
    check(
        "config",
        Status::Warn,
        format!("{path}: {}", inputs.config_warnings.join("; ")),
        format!("correct or remove those keys in {path} (`nvidia-ctk config` shows the effective config)"),
    )
}

/// ` --config-file=PATH` for a fix command, when the config is not the default one.
pub(super) fn config_file_flag(config_path: &Path) -> String {
    if config_path == Path::new("/etc/nvidia-container-runtime/config.toml") {
        String::new()
    } else {
        format!(" --config-file={}", config_path.display())
    }
}

/// The low-level runtime the shim execs: the first of `nvidia-container-runtime.runtimes` that
/// [`shim::find_runtime`] finds (a name on `PATH`, or an absolute path to a file), which must
/// be executable. Without one every container through the `nvidia` runtime fails to start.
pub(super) fn runtime_check(
    config: &Config,
    config_path: &Path,
    which: &dyn Fn(&str) -> Option<PathBuf>,
) -> Check {
    let name = "low-level runtime";
    let runtimes = &config.runtime.runtimes;
    let fix = format!(
        "`nvidia-ctk config --set nvidia-container-runtime.runtimes=runc:crun --in-place{}`, or install runc",
        config_file_flag(config_path)
    );
    let found = match shim::find_runtime(runtimes, which) {
        Ok(p) => p,
        Err(_) => {
            // `runtimes = ["runc:crun"]`: a list written as one name (an old `config --set`).
            let joined: Vec<String> = runtimes
                .iter()
                .filter(|r| r.contains([':', ',']))
                .map(|r| format!("{r:?} is one name, not a list"))
                .collect();
            let why = if joined.is_empty() {
                String::new()
            } else {
                format!(" ({})", joined.join("; "))
            };
            return check(
                name,
                Status::Fail,
                format!(
                    "none of nvidia-container-runtime.runtimes = {runtimes:?} in {} is on PATH or an existing absolute path{why}: every container through the nvidia runtime fails to start",
                    config_path.display()
                ),
                fix,
            );
        }
    };
    let executable = std::fs::metadata(&found)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
        .unwrap_or(false);
    if !executable {
        return check(
            name,
            Status::Fail,
            format!(
                "{} (from nvidia-container-runtime.runtimes {runtimes:?}) is not executable",
                found.display()
            ),
            format!("`chmod 755 {}`, or {fix}", found.display()),
        );
    }
    ok(
        name,
        format!(
            "{} (the first of {runtimes:?} found, as the shim looks them up)",
            found.display()
        ),
    )
}

pub(super) fn ldconfig_check(config: &Config, config_path: &Path) -> Check {
    let path = config.host_ldconfig();
    let fix = format!(
        "set nvidia-container-cli.ldconfig in {} to a static ldconfig binary, e.g. \"@/sbin/ldconfig.real\" on Ubuntu, \"@/sbin/ldconfig\" elsewhere",
        config_path.display()
    );
    match nvct_container::ldconfig::open_host(&path) {
        Ok(_) => ok(
            "ldconfig",
            format!(
                "{} (as configured: {:?}) is a static ELF",
                path.display(),
                config.cli.ldconfig
            ),
        ),
        Err(e) => check("ldconfig", Status::Fail, e.to_string(), fix),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_cases() {
        let dir = tempfile::Builder::new()
            .prefix("nvct-doctor-runtime-")
            .tempdir()
            .unwrap();
        let exe = dir.path().join("runc");
        let plain = dir.path().join("not-executable");
        for (p, mode) in [(&exe, 0o755), (&plain, 0o644)] {
            std::fs::write(p, "").unwrap();
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .unwrap();
        }
        let on_path = exe.clone();
        let which = move |n: &str| (n == "runc").then(|| on_path.clone());
        let (exe_s, plain_s) = (exe.display().to_string(), plain.display().to_string());
        // (case, runtimes, status, words in the detail)
        let cases: &[(&str, &[&str], Status, &str)] = &[
            ("the default", &["runc", "crun"], Status::Ok, &exe_s),
            ("the second found", &["crun", "runc"], Status::Ok, &exe_s),
            ("an absolute path", &[&exe_s], Status::Ok, &exe_s),
            (
                "a list as one name",
                &["runc:crun"],
                Status::Fail,
                "\"runc:crun\" is one name, not a list",
            ),
            (
                "none on PATH",
                &["crun", "youki"],
                Status::Fail,
                "is on PATH or an existing absolute path",
            ),
            ("empty", &[], Status::Fail, "runtimes = []"),
            (
                "not executable",
                &[&plain_s],
                Status::Fail,
                "is not executable",
            ),
        ];
        for (name, runtimes, status, words) in cases {
            let mut config = Config::default();
            config.runtime.runtimes = runtimes.iter().map(|r| r.to_string()).collect();
            let c = runtime_check(
                &config,
                Path::new("/etc/nvidia-container-runtime/config.toml"),
                &which,
            );
            assert_eq!(c.status, *status, "{name}: {c:?}");
            assert!(c.detail.contains(words), "{name}: {c:?}");
            if *status == Status::Fail {
                assert!(
                    c.fix.contains("`nvidia-ctk config --set nvidia-container-runtime.runtimes=runc:crun --in-place`"),
                    "{name}: {c:?}"
                );
            }
        }
    }
}
