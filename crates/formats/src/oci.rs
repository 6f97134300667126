//! OCI inputs: the hook state read from stdin, a bundle's config.json as a typed view
//! (oci-spec), and the small facts the request needs from it. Reads only; writing config.json
//! back belongs to the shim.
//!
//! Both inputs are written by others (the engine, the image author): sizes are capped and
//! every failure names the file.

use oci_spec::runtime::Spec;
use serde::Deserialize;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Hook state larger than this is refused (a real one is a few hundred bytes).
pub const MAX_STATE_BYTES: u64 = 1 << 20;
/// config.json larger than this is refused.
pub const MAX_SPEC_BYTES: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("cannot read the OCI hook state from stdin: {0}")]
    StateRead(std::io::Error),
    #[error("the OCI hook state on stdin is larger than {MAX_STATE_BYTES} bytes")]
    StateTooLarge,
    #[error("the OCI hook state on stdin is not valid JSON: {0} (expected {{\"pid\": N, \"bundle\": \"/path\", ...}} as runc writes it)")]
    StateParse(serde_json::Error),
    #[error("the OCI hook state on stdin is not a JSON object (expected {{\"pid\": N, \"bundle\": \"/path\", ...}} as runc writes it)")]
    StateNotObject,
    #[error(
        "the OCI hook state has no usable pid (got {0:?}); is the hook registered as prestart?"
    )]
    StatePid(Option<i64>),
    #[error(
        "the OCI hook state has pid 0: crun gives 0 to createContainer and startContainer hooks, \
         which it runs from inside the container; this hook works on the container from the \
         host and needs its pid: register it as a prestart hook (runc, crun and youki pass the \
         container's pid there)"
    )]
    StateNoPid,
    #[error("the OCI hook state has an empty bundle path")]
    StateBundle,
    #[error("the OCI hook state's bundle path {0:?} is not absolute (runtimes always pass an absolute one)")]
    StateBundleRelative(PathBuf),
    #[error("cannot read {path}: {source}")]
    SpecRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is larger than {MAX_SPEC_BYTES} bytes")]
    SpecTooLarge { path: PathBuf },
    #[error("{path} is not a valid OCI runtime spec: {source}")]
    SpecParse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path} is not a valid OCI runtime spec: the document is not a JSON object")]
    SpecNotObject { path: PathBuf },
    #[error("{path} has no root.path: the container has no root filesystem")]
    NoRoot { path: PathBuf },
}

/// The state a runtime passes to hooks on stdin.
///
/// `pid` is `None` for `"pid": 0`: crun (`do_hooks` in `src/libcrun/container.c`) passes 0 to
/// `createContainer` and `startContainer` hooks, which it runs from the container's init,
/// inside the container's namespaces, before (createContainer) or after (startContainer)
/// pivot_root. A hook that needs the pid asks [`HookState::pid`]. crun's `bundle` is the
/// working directory of the process that runs the hook (`getcwd`), normally the bundle (crun
/// changes into `--bundle`), but not always (see `docs/COMPAT.md`, "crun's hook states").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookState {
    pub id: String,
    pub pid: Option<u32>,
    pub bundle: PathBuf,
    /// crun's `root`: the container's rootfs (absolute; `None` when absent or relative). The
    /// CDI hooks fall back on it when config.json cannot be read (crun `--userns=nomap`).
    pub root: Option<PathBuf>,
}

#[derive(Deserialize)]
struct RawState {
    #[serde(default)]
    id: String,
    pid: Option<i64>,
    #[serde(default)]
    bundle: String,
    #[serde(default)]
    root: String,
}

impl HookState {
    pub fn parse(bytes: &[u8]) -> Result<HookState, OciError> {
        let raw: RawState = serde_json::from_slice(bytes).map_err(OciError::StateParse)?;
        if !is_json_object(bytes) {
            return Err(OciError::StateNotObject);
        }
        let pid = match raw.pid {
            Some(0) => None,
            Some(p) if p > 0 && p <= i64::from(i32::MAX) => Some(p as u32),
            other => return Err(OciError::StatePid(other)),
        };
        if raw.bundle.is_empty() {
            return Err(OciError::StateBundle);
        }
        // The OCI runtime spec requires an absolute path; a relative one would be resolved
        // against whatever directory the hook happens to run in.
        if !Path::new(&raw.bundle).is_absolute() {
            return Err(OciError::StateBundleRelative(PathBuf::from(raw.bundle)));
        }
        let root = Some(PathBuf::from(raw.root)).filter(|r| r.is_absolute());
        Ok(HookState {
            id: raw.id,
            pid,
            bundle: PathBuf::from(raw.bundle),
            root,
        })
    }

    /// The container's pid, for a hook that works on it from the host (the prestart hook);
    /// an error naming the stage to register at when the runtime gave none.
    pub fn pid(&self) -> Result<u32, OciError> {
        self.pid.ok_or(OciError::StateNoPid)
    }

    pub fn read(input: impl Read) -> Result<HookState, OciError> {
        HookState::parse(&HookState::read_bytes(input)?)
    }

    /// The state's bytes as [`HookState::read`] reads them (capped), not yet parsed.
    pub fn read_bytes(input: impl Read) -> Result<Vec<u8>, OciError> {
        let mut buf = Vec::new();
        input
            .take(MAX_STATE_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(OciError::StateRead)?;
        if buf.len() as u64 > MAX_STATE_BYTES {
            return Err(OciError::StateTooLarge);
        }
        Ok(buf)
    }
}

/// Reads a whole file with a size cap, naming it in errors.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, OciError> {
    let err = |source| OciError::SpecRead {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(err)?;
    // `take` hides the file's size from `read_to_end`, which would start with 32-byte reads.
    let size = file.metadata().map(|m| m.len()).unwrap_or(0).min(cap + 1);
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    file.take(cap + 1).read_to_end(&mut buf).map_err(err)?;
    if buf.len() as u64 > cap {
        return Err(OciError::SpecTooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(buf)
}

/// Whether JSON text's top-level value is an object. serde's derived structs also accept an
/// array of their fields in order (`[]` is an empty spec), which no engine writes.
fn is_json_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b" \t\n\r".contains(b)) == Some(&b'{')
}

/// config.json's bytes (read from `path`) as a typed spec.
pub fn parse_spec(bytes: &[u8], path: &Path) -> Result<Spec, OciError> {
    let spec = serde_json::from_slice(bytes).map_err(|source| OciError::SpecParse {
        path: path.to_path_buf(),
        source,
    })?;
    if !is_json_object(bytes) {
        return Err(OciError::SpecNotObject {
            path: path.to_path_buf(),
        });
    }
    Ok(spec)
}

/// Loads `<bundle>/config.json` as a typed spec.
pub fn load_spec(bundle: &Path) -> Result<Spec, OciError> {
    let path = bundle.join("config.json");
    let bytes = read_capped(&path, MAX_SPEC_BYTES)?;
    parse_spec(&bytes, &path)
}

/// The container's root filesystem on the host: `root.path`, relative to the bundle unless
/// absolute (runc's default is `rootfs`; `ctr run --rootfs` gives an absolute one).
pub fn rootfs_path(spec: &Spec, bundle: &Path) -> Result<PathBuf, OciError> {
    let root = spec
        .root()
        .as_ref()
        .map(|r| r.path().clone())
        .filter(|p| !p.as_os_str().is_empty());
    let root = root.ok_or_else(|| OciError::NoRoot {
        path: bundle.join("config.json"),
    })?;
    Ok(if root.is_absolute() {
        root
    } else {
        bundle.join(root)
    })
}

/// `process.env` as given (`KEY=VALUE` strings).
pub fn env(spec: &Spec) -> Vec<String> {
    spec.process()
        .as_ref()
        .and_then(|p| p.env().clone())
        .unwrap_or_default()
}

/// Privileged means `CAP_SYS_ADMIN` in the bounding set (upstream's rule).
pub fn is_privileged(spec: &Spec) -> bool {
    use oci_spec::runtime::Capability;
    spec.process()
        .as_ref()
        .and_then(|p| p.capabilities().as_ref())
        .and_then(|c| c.bounding().as_ref())
        .is_some_and(|b| b.contains(&Capability::SysAdmin))
}

/// `(path, minor)` of every character device in `linux.devices`.
pub fn devices(spec: &Spec) -> Vec<(PathBuf, u32)> {
    char_devices(spec)
        .filter_map(|d| Some((d.path().clone(), u32::try_from(d.minor()).ok()?)))
        .collect()
}

/// The character devices of `linux.devices` (type `c` or `u`), in order.
fn char_devices(spec: &Spec) -> impl Iterator<Item = &oci_spec::runtime::LinuxDevice> {
    use oci_spec::runtime::LinuxDeviceType;
    spec.linux()
        .as_ref()
        .and_then(|l| l.devices().as_ref())
        .into_iter()
        .flatten()
        .filter(|d| matches!(d.typ(), LinuxDeviceType::C | LinuxDeviceType::U))
}

/// The character devices of `linux.devices` whose path starts with `prefix` (e.g.
/// `/dev/nvidia`), as device cgroup rules (major, minor), in order.
pub fn char_device_rules(spec: &Spec, prefix: &str) -> Vec<nvct_model::CgroupRule> {
    char_devices(spec)
        .filter(|d| d.path().to_str().is_some_and(|p| p.starts_with(prefix)))
        .filter_map(|d| {
            Some(nvct_model::CgroupRule {
                major: u32::try_from(d.major()).ok()?,
                minor: u32::try_from(d.minor()).ok()?,
            })
        })
        .collect()
}

/// `linux.resources.devices`: the container's device list, in order.
pub fn device_rules(spec: &Spec) -> Vec<oci_spec::runtime::LinuxDeviceCgroup> {
    spec.linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.devices().clone())
        .unwrap_or_default()
}

/// `(source, destination)` of every mount in the spec.
pub fn mounts(spec: &Spec) -> Vec<(PathBuf, PathBuf)> {
    spec.mounts()
        .iter()
        .flatten()
        .map(|m| {
            (
                m.source().clone().unwrap_or_default(),
                m.destination().clone(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_device_rules_take_the_prefixs_char_devices() {
        let spec: Spec = serde_json::from_str(
            r#"{"ociVersion":"1.0.2","linux":{"devices":[
                {"path":"/dev/nvidia0","type":"c","major":195,"minor":0},
                {"path":"/dev/nvidiactl","type":"c","major":195,"minor":255},
                {"path":"/dev/nvidia-caps/nvidia-cap1","type":"c","major":508,"minor":1},
                {"path":"/dev/dri/card0","type":"c","major":226,"minor":0},
                {"path":"/dev/nvidia-block","type":"b","major":8,"minor":0}]}}"#,
        )
        .unwrap();
        let got: Vec<(u32, u32)> = char_device_rules(&spec, "/dev/nvidia")
            .into_iter()
            .map(|r| (r.major, r.minor))
            .collect();
        assert_eq!(got, [(195, 0), (195, 255), (508, 1)]);
    }

    #[test]
    fn state_root_cases() {
        // (case, state, root)
        let cases: &[(&str, &str, Option<&str>)] = &[
            (
                "crun names the rootfs",
                r#"{"pid":0,"root":"/r/rootfs","bundle":"/b"}"#,
                Some("/r/rootfs"),
            ),
            ("runc names none", r#"{"pid":3,"bundle":"/b"}"#, None),
            (
                "a relative root is not taken",
                r#"{"pid":3,"root":"rootfs","bundle":"/b"}"#,
                None,
            ),
        ];
        for (name, text, want) in cases {
            let st = HookState::parse(text.as_bytes()).unwrap();
            assert_eq!(st.root.as_deref(), want.map(Path::new), "case {name}");
        }
    }

    #[test]
    fn state_cases() {
        let cases: &[(&str, &str, Result<(Option<u32>, &str), &str>)] = &[
            (
                "runc state",
                r#"{"ociVersion":"1.0.2","id":"c1","status":"created","pid":42,"bundle":"/b","annotations":{}}"#,
                Ok((Some(42), "/b")),
            ),
            (
                "crun createContainer state: pid 0 is no pid",
                r#"{"ociVersion":"1.0","id":"c1","pid":0,"root":"/r","bundle":"/b","status":"created"}"#,
                Ok((None, "/b")),
            ),
            ("not json", "hello", Err("not valid JSON")),
            ("empty", "", Err("not valid JSON")),
            (
                "no pid",
                r#"{"bundle":"/b"}"#,
                Err("no usable pid (got None)"),
            ),
            (
                "negative pid",
                r#"{"pid":-1,"bundle":"/b"}"#,
                Err("no usable pid (got Some(-1))"),
            ),
            (
                "huge pid",
                r#"{"pid":99999999999,"bundle":"/b"}"#,
                Err("no usable pid"),
            ),
            ("no bundle", r#"{"pid":3}"#, Err("empty bundle")),
            (
                "relative bundle",
                r#"{"pid":3,"bundle":"b"}"#,
                Err("bundle path \"b\" is not absolute"),
            ),
            (
                "pid as string",
                r#"{"pid":"3","bundle":"/b"}"#,
                Err("not valid JSON"),
            ),
            (
                "fields as an array",
                r#" ["c1", 3, "/b"]"#,
                Err("not a JSON object"),
            ),
        ];
        for (name, input, want) in cases {
            match (HookState::parse(input.as_bytes()), want) {
                (Ok(s), Ok((pid, bundle))) => {
                    assert_eq!(
                        (s.pid, s.bundle.as_path()),
                        (*pid, Path::new(bundle)),
                        "{name}"
                    )
                }
                (Err(e), Err(msg)) => assert!(e.to_string().contains(msg), "{name}: {e}"),
                (got, _) => panic!("{name}: got {got:?}"),
            }
        }
    }

    #[test]
    fn pid_zero_needs_a_prestart_registration() {
        let s = HookState::parse(br#"{"pid":0,"bundle":"/b"}"#).unwrap();
        let e = s.pid().unwrap_err().to_string();
        assert!(
            e.contains("pid 0") && e.contains("register it as a prestart hook"),
            "{e}"
        );
        let s = HookState::parse(br#"{"pid":7,"bundle":"/b"}"#).unwrap();
        assert_eq!(s.pid().unwrap(), 7);
    }

    #[test]
    fn state_too_large() {
        let big = vec![b' '; MAX_STATE_BYTES as usize + 10];
        assert!(matches!(
            HookState::read(&big[..]),
            Err(OciError::StateTooLarge)
        ));
    }
}
