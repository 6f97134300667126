//! Host device setup for `nvidia-ctk system`: the NVIDIA device nodes the driver's modules
//! would create (majors from `/proc/devices`, minors fixed by the driver), and the
//! `/dev/char/MAJ:MIN` links that systemd resolves device rules through (without them a
//! `DeviceAllow=/dev/char/195:0` of a container's unit names nothing, and the container loses
//! its GPU at the next `systemctl daemon-reload`).
//!
//! Pure parts (what should exist) are separate from the two writers, which only ever create
//! what is missing under the configured device root (a trusted host path, never a container's).

use nvct_formats::root::DriverRoot;
use nvct_model::{DeviceNode, Gpu};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The minors the driver gives its control nodes on the `nvidia` major.
const CTL_MINOR: u32 = 255;
const MODESET_MINOR: u32 = 254;

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    #[error("cannot read {path}: {source} (is the NVIDIA driver loaded? `modprobe nvidia`)")]
    ProcDevices {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} lists no `{module}` character device: the {module} kernel module is not loaded \
         (`modprobe {modprobe}`), so its nodes cannot be created"
    )]
    NoMajor {
        path: PathBuf,
        module: &'static str,
        modprobe: &'static str,
    },
    #[error("{path} exists but is {what}, not the character device {major}:{minor}; remove it and run again")]
    Occupied {
        path: PathBuf,
        what: String,
        major: u32,
        minor: u32,
    },
    #[error("{path} exists but is {what}, not a symlink to {target}; remove it and run again")]
    NotALink {
        path: PathBuf,
        what: String,
        target: PathBuf,
    },
    #[error("cannot create {path}: {source} (run as root)")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A device node that should exist: its path under `/dev` and its numbers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeSpec {
    /// `/dev/nvidiactl`, as seen from the device root.
    pub path: PathBuf,
    pub major: u32,
    pub minor: u32,
}

/// Character-device majors by name from `/proc/devices` text (the block section is ignored).
pub fn parse_proc_devices(text: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let mut in_char = false;
    for line in text.lines() {
        match line.trim() {
            "Character devices:" => in_char = true,
            "Block devices:" => in_char = false,
            l if in_char => {
                if let Some((major, name)) = l.split_once(' ') {
                    if let Ok(major) = major.trim().parse() {
                        out.entry(name.trim().to_string()).or_insert(major);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The `/proc/devices` of `root`.
pub fn read_majors(root: &DriverRoot) -> Result<BTreeMap<String, u32>, SystemError> {
    let path = root.proc_path("devices");
    let text = std::fs::read_to_string(&path).map_err(|source| SystemError::ProcDevices {
        path: path.clone(),
        source,
    })?;
    Ok(parse_proc_devices(&text))
}

fn major(
    majors: &BTreeMap<String, u32>,
    names: &[&str],
    module: &'static str,
    modprobe: &'static str,
    proc_devices: &Path,
) -> Result<u32, SystemError> {
    names
        .iter()
        .find_map(|n| majors.get(*n).copied())
        .ok_or_else(|| SystemError::NoMajor {
            path: proc_devices.to_path_buf(),
            module,
            modprobe,
        })
}

/// The control nodes: `nvidiactl` and `nvidia-modeset` on the `nvidia` major, `nvidia-uvm` and
/// `nvidia-uvm-tools` on the `nvidia-uvm` major. `proc_devices` only names the file in errors.
pub fn control_nodes(
    majors: &BTreeMap<String, u32>,
    proc_devices: &Path,
) -> Result<Vec<NodeSpec>, SystemError> {
    let nv = major(
        majors,
        &["nvidia-frontend", "nvidia"],
        "nvidia",
        "nvidia",
        proc_devices,
    )?;
    let uvm = major(
        majors,
        &["nvidia-uvm"],
        "nvidia-uvm",
        "nvidia-uvm",
        proc_devices,
    )?;
    let node = |path: &str, major, minor| NodeSpec {
        path: path.into(),
        major,
        minor,
    };
    Ok(vec![
        node("/dev/nvidiactl", nv, CTL_MINOR),
        node("/dev/nvidia-modeset", nv, MODESET_MINOR),
        node("/dev/nvidia-uvm", uvm, 0),
        node("/dev/nvidia-uvm-tools", uvm, 1),
    ])
}

/// One `/dev/nvidia<minor>` per GPU, on the `nvidia` major.
pub fn gpu_nodes(
    majors: &BTreeMap<String, u32>,
    gpus: &[Gpu],
    proc_devices: &Path,
) -> Result<Vec<NodeSpec>, SystemError> {
    let nv = major(
        majors,
        &["nvidia-frontend", "nvidia"],
        "nvidia",
        "nvidia",
        proc_devices,
    )?;
    Ok(gpus
        .iter()
        .map(|g| NodeSpec {
            path: format!("/dev/nvidia{}", g.minor).into(),
            major: nv,
            minor: g.minor,
        })
        .collect())
}

/// What a writer did with one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    Created(PathBuf),
    WouldCreate(PathBuf),
    Present(PathBuf),
}

/// Creates each node that is missing under `root`'s device root (mode 0666, as the driver
/// makes them); a present node with the right numbers is left alone; anything else at the
/// path is an error naming it.
pub fn create_nodes(
    root: &DriverRoot,
    nodes: &[NodeSpec],
    dry_run: bool,
) -> Result<Vec<Done>, SystemError> {
    let mut out = Vec::new();
    for n in nodes {
        let path = root.dev_path(&n.path);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_char_device() => {
                let rdev = m.rdev();
                if (libc::major(rdev), libc::minor(rdev)) == (n.major, n.minor) {
                    out.push(Done::Present(path));
                    continue;
                }
                return Err(SystemError::Occupied {
                    what: format!(
                        "the character device {}:{}",
                        libc::major(rdev),
                        libc::minor(rdev)
                    ),
                    path,
                    major: n.major,
                    minor: n.minor,
                });
            }
            Ok(m) => {
                return Err(SystemError::Occupied {
                    what: kind_of(&m),
                    path,
                    major: n.major,
                    minor: n.minor,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(SystemError::Create { path, source }),
        }
        if dry_run {
            out.push(Done::WouldCreate(path));
            continue;
        }
        let create = |source| SystemError::Create {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(create)?;
        }
        mknod(&path, n.major, n.minor).map_err(create)?;
        out.push(Done::Created(path));
    }
    Ok(out)
}

fn kind_of(m: &std::fs::Metadata) -> String {
    let t = m.file_type();
    if t.is_symlink() {
        "a symlink".into()
    } else if t.is_dir() {
        "a directory".into()
    } else if t.is_file() {
        "a regular file".into()
    } else {
        "another kind of file".into()
    }
}

fn mknod(path: &Path, major: u32, minor: u32) -> std::io::Result<()> {
    nvct_sys::mknod_char(path, 0o666, major, minor)?;
    // mknod's mode is masked by the umask; the driver's nodes are 0666.
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
}

/// The `/dev/char` links for `nodes`: (`/dev/char/MAJ:MIN`, target relative to `/dev/char`).
pub fn char_links(nodes: &[(PathBuf, u32, u32)]) -> Vec<(PathBuf, PathBuf)> {
    let mut out: Vec<(PathBuf, PathBuf)> = nodes
        .iter()
        .filter_map(|(path, major, minor)| {
            let rel = path.strip_prefix("/dev").ok()?;
            Some((
                PathBuf::from(format!("/dev/char/{major}:{minor}")),
                Path::new("..").join(rel),
            ))
        })
        .collect();
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// The (path, major, minor) of present nodes.
pub fn node_numbers(nodes: &[DeviceNode]) -> Vec<(PathBuf, u32, u32)> {
    nodes
        .iter()
        .map(|n| (n.path.clone(), n.major, n.minor))
        .collect()
}

/// The NVIDIA character devices present under `root`'s device root (`/dev/nvidia*` and
/// `/dev/nvidia-caps/*`): (path under `/dev`, major, minor), sorted.
pub fn present_nodes(root: &DriverRoot) -> Vec<(PathBuf, u32, u32)> {
    let mut out = Vec::new();
    for (dir, prefix) in [
        ("/dev", "nvidia"),
        ("/dev/nvidia-caps", "nvidia-cap"),
        (nvct_host::devices::IMEX_CHANNEL_DIR, "channel"),
    ] {
        for path in nvct_host::devices::names_in(root, dir, prefix) {
            if let Ok(m) = std::fs::symlink_metadata(root.dev_path(&path)) {
                if m.file_type().is_char_device() {
                    let rdev = m.rdev();
                    out.push((PathBuf::from(path), libc::major(rdev), libc::minor(rdev)));
                }
            }
        }
    }
    out.sort();
    out
}

/// Whether `link` (a host path) is a symlink whose target is `target`.
pub fn link_is(link: &Path, target: &Path) -> bool {
    std::fs::read_link(link).is_ok_and(|t| t == target)
}

/// Creates the missing links under `root`'s device root. A link pointing elsewhere is replaced
/// (new link renamed over it); a non-link at the path is an error naming it.
pub fn create_char_links(
    root: &DriverRoot,
    links: &[(PathBuf, PathBuf)],
    dry_run: bool,
) -> Result<Vec<Done>, SystemError> {
    let mut out = Vec::new();
    for (link, target) in links {
        let path = root.dev_path(link);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                if link_is(&path, target) {
                    out.push(Done::Present(path));
                    continue;
                }
            }
            Ok(m) => {
                return Err(SystemError::NotALink {
                    what: kind_of(&m),
                    path,
                    target: target.clone(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(SystemError::Create { path, source }),
        }
        if dry_run {
            out.push(Done::WouldCreate(path));
            continue;
        }
        let create = |source| SystemError::Create {
            path: path.clone(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(dir).map_err(create)?;
        let tmp = dir.join(format!(
            ".{}.nvct-tmp",
            path.file_name().unwrap_or_default().to_string_lossy()
        ));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(target, &tmp).map_err(create)?;
        std::fs::rename(&tmp, &path).map_err(create)?;
        out.push(Done::Created(path));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEVICES: &str = "Character devices:\n  1 mem\n195 nvidia-frontend\n508 nvidia-uvm\n509 nvidia-caps\n\nBlock devices:\n  7 loop\n195 notchar\n";

    #[test]
    fn mknod_makes_a_0666_char_device() {
        assert_eq!(
            nvct_sys::euid(),
            0,
            "mknod needs root (the test suite runs as root)"
        );
        let dir = tempfile::tempdir().unwrap();
        // (name, major, minor)
        let cases: &[(&str, u32, u32)] = &[("nvidiactl", 195, 255), ("nvidia-uvm", 508, 0)];
        for (name, major, minor) in cases {
            let path = dir.path().join(name);
            mknod(&path, *major, *minor).unwrap_or_else(|e| panic!("case {name}: {e}"));
            let m = std::fs::symlink_metadata(&path).unwrap();
            assert!(m.file_type().is_char_device(), "case {name}: a char device");
            let rdev = m.rdev();
            assert_eq!(
                (libc::major(rdev), libc::minor(rdev), m.mode() & 0o7777),
                (*major, *minor, 0o666),
                "case {name}"
            );
            let again = mknod(&path, *major, *minor).unwrap_err();
            assert_eq!(
                again.kind(),
                std::io::ErrorKind::AlreadyExists,
                "case {name}"
            );
        }
    }

    #[test]
    fn proc_devices_cases() {
        let m = parse_proc_devices(DEVICES);
        assert_eq!(m.get("nvidia-frontend"), Some(&195));
        assert_eq!(m.get("nvidia-uvm"), Some(&508));
        assert_eq!(m.get("loop"), None, "block devices are not char majors");
        assert_eq!(m.get("notchar"), None);
    }

    #[test]
    fn control_nodes_cases() {
        let m = parse_proc_devices(DEVICES);
        let nodes = control_nodes(&m, Path::new("/proc/devices")).unwrap();
        let got: Vec<(String, u32, u32)> = nodes
            .iter()
            .map(|n| (n.path.display().to_string(), n.major, n.minor))
            .collect();
        assert_eq!(
            got,
            [
                ("/dev/nvidiactl".to_string(), 195, 255),
                ("/dev/nvidia-modeset".to_string(), 195, 254),
                ("/dev/nvidia-uvm".to_string(), 508, 0),
                ("/dev/nvidia-uvm-tools".to_string(), 508, 1),
            ]
        );
        let no_uvm = parse_proc_devices("Character devices:\n195 nvidia\n");
        let err = control_nodes(&no_uvm, Path::new("/p/devices")).unwrap_err();
        assert!(err.to_string().contains("modprobe nvidia-uvm"), "{err}");
    }

    #[test]
    fn char_link_cases() {
        let links = char_links(&[
            ("/dev/nvidia0".into(), 195, 0),
            ("/dev/nvidia-caps/nvidia-cap1".into(), 509, 1),
            ("/dev/nvidia0".into(), 195, 0),
        ]);
        assert_eq!(
            links,
            [
                ("/dev/char/195:0".into(), "../nvidia0".into()),
                (
                    "/dev/char/509:1".into(),
                    "../nvidia-caps/nvidia-cap1".into()
                ),
            ]
        );
    }
}
