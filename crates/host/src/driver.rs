//! The driver's user-space files under a [`DriverRoot`]: libraries (found through the root's
//! `etc/ld.so.cache` and the usual lib dirs, matched by exact driver version), binaries,
//! firmware and IPC sockets, and which capability needs which of them. Reads only.

use nvct_formats::ldcache;
use nvct_formats::root::DriverRoot;
use nvct_model::tables::{
    binaries_for, config_dirs_for, ipc_for, libraries_for, OWN_VERSION, VDPAU_DIR,
};
use nvct_model::Capability;
pub use nvct_model::{DriverFile, FileKind};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// `family` of a file name `<family>.so.<version>`: the driver's version, or for the
/// [`OWN_VERSION`] families their own (a regular file, not the soname link).
fn family_of<'a>(file: &'a str, suffix: &str, families: &BTreeSet<&str>) -> Option<&'a str> {
    if let Some(f) = file.strip_suffix(suffix).filter(|f| families.contains(f)) {
        return Some(f);
    }
    let (family, version) = file.split_once(".so.")?;
    let own = OWN_VERSION.contains(&family) && families.contains(family);
    (own && version.contains('.') && version.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        .then_some(family)
}

/// The driver's config files present: regular files (not links) in [`config_dirs_for`]'s
/// directories whose names carry the driver's marker. `name` is the directory.
pub fn configs(root: &DriverRoot) -> Vec<DriverFile> {
    let mut out = Vec::new();
    for cap in Capability::ALL {
        for (dir, marker) in config_dirs_for(cap) {
            let Ok(entries) = std::fs::read_dir(root.host_path(dir)) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(name) = e.file_name().into_string() else {
                    continue;
                };
                let driver_path = Path::new(dir).join(&name);
                let host_path = root.host_path(&driver_path);
                if name.contains(marker) && is_regular_file(&host_path) {
                    out.push(DriverFile {
                        kind: FileKind::Config,
                        name: (*dir).to_string(),
                        host_path,
                        driver_path,
                    });
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

const BIN_DIRS: &[&str] = &["/usr/bin", "/usr/sbin", "/bin", "/sbin"];

/// The driver's libraries: files named `<family>.so.<version>` for every known family, in
/// the dirs the root's ld cache names for them and the usual lib dirs. `cache` is the root's
/// parsed ld.so.cache (empty if it has none).
pub fn libraries(root: &DriverRoot, version: &str, cache: &[ldcache::Entry]) -> Vec<DriverFile> {
    let mut dirs = cache_dirs(cache, |flags| ldcache::matches_arch(root.arch, flags));
    for d in root.arch.lib_dirs().map(PathBuf::from) {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    let mut found = scan(root, &dirs, version, FileKind::Library);
    // The driver keeps its VDPAU backend in `vdpau/` next to its other libraries (upstream
    // searches `<dir of libcuda>/vdpau`), where no ld cache names it.
    let mut vdpau_dirs: Vec<PathBuf> = Vec::new();
    for dir in found.iter().filter_map(|f| f.driver_path.parent()) {
        let dir = dir.join(VDPAU_DIR);
        if !vdpau_dirs.contains(&dir) {
            vdpau_dirs.push(dir);
        }
    }
    for f in scan(root, &vdpau_dirs, version, FileKind::Library) {
        if f.name == "libvdpau_nvidia" && !found.iter().any(|g| g.name == f.name) {
            found.push(f);
        }
    }
    found.sort();
    found
}

/// The driver's 32-bit libraries (compat32): files named `<family>.so.<version>` in the dirs
/// the root's ld cache names for the families' i386 entries (flags `0x0003`), as upstream
/// finds them (through the ld cache only: a 32-bit dir is not the same on every distribution).
pub fn libraries32(root: &DriverRoot, version: &str, cache: &[ldcache::Entry]) -> Vec<DriverFile> {
    let dirs = cache_dirs(cache, |flags| ldcache::matches_arch32(root.arch, flags));
    scan(root, &dirs, version, FileKind::Library32)
}

fn families() -> BTreeSet<&'static str> {
    Capability::ALL
        .into_iter()
        .flat_map(libraries_for)
        .copied()
        .collect()
}

/// The dirs of the cache entries with `flags` that are of a known family, in cache order.
fn cache_dirs(cache: &[ldcache::Entry], flags: impl Fn(i32) -> bool) -> Vec<PathBuf> {
    let families = families();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for e in cache.iter().filter(|e| flags(e.flags)) {
        let family = e.soname.split(".so").next().unwrap_or("");
        if let Some(dir) = e.path.parent().filter(|_| families.contains(family)) {
            if !dirs.iter().any(|d| d == dir) {
                dirs.push(dir.to_path_buf());
            }
        }
    }
    dirs
}

/// The regular files `<family>.so.<version>` in `dirs` (driver-root paths), the first of each
/// family, as `kind`.
fn scan(root: &DriverRoot, dirs: &[PathBuf], version: &str, kind: FileKind) -> Vec<DriverFile> {
    let families = families();
    let suffix = format!(".so.{version}");
    let mut out: Vec<DriverFile> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(root.host_path(dir)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for file in names {
            let Some(family) = family_of(&file, &suffix, &families) else {
                continue;
            };
            if out.iter().any(|f| f.name == family) {
                continue;
            }
            let driver_path = dir.join(&file);
            let host_path = root.host_path(&driver_path);
            if is_regular_file(&host_path) {
                out.push(DriverFile {
                    kind,
                    name: family.into(),
                    host_path,
                    driver_path,
                });
            }
        }
    }
    out.sort();
    out
}

/// Known driver binaries present in the usual bin dirs.
pub fn binaries(root: &DriverRoot) -> Vec<DriverFile> {
    let names: BTreeSet<&str> = Capability::ALL
        .into_iter()
        .flat_map(binaries_for)
        .copied()
        .collect();
    names
        .into_iter()
        .filter_map(|name| {
            BIN_DIRS
                .iter()
                .map(|d| Path::new(d).join(name))
                .find_map(|driver_path| {
                    let host_path = root.host_path(&driver_path);
                    is_regular_file(&host_path).then(|| DriverFile {
                        kind: FileKind::Binary,
                        name: name.into(),
                        host_path,
                        driver_path,
                    })
                })
        })
        .collect()
}

/// GSP firmware: `/lib/firmware/nvidia/<version>/*.bin`.
pub fn firmware(root: &DriverRoot, version: &str) -> Vec<DriverFile> {
    let dir = Path::new("/lib/firmware/nvidia").join(version);
    let Ok(entries) = std::fs::read_dir(root.host_path(&dir)) else {
        return vec![];
    };
    let mut out: Vec<DriverFile> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".bin"))
        .map(|n| {
            let driver_path = dir.join(&n);
            DriverFile {
                kind: FileKind::Firmware,
                name: n,
                host_path: root.host_path(&driver_path),
                driver_path,
            }
        })
        .filter(|f| is_regular_file(&f.host_path))
        .collect();
    out.sort();
    out
}

/// IPC sockets and the MPS pipe dir that exist.
pub fn ipc(root: &DriverRoot) -> Vec<DriverFile> {
    Capability::ALL
        .into_iter()
        .flat_map(ipc_for)
        .map(|p| {
            let driver_path = PathBuf::from(p);
            DriverFile {
                kind: FileKind::Ipc,
                name: p.to_string(),
                host_path: root.host_path(&driver_path),
                driver_path,
            }
        })
        .filter(|f| f.host_path.exists())
        .collect()
}

/// The `libnvidia-ml.so.1` to load NVML from: the ld cache's entry, else the usual lib dirs.
pub fn nvml_library(root: &DriverRoot, cache: &[ldcache::Entry]) -> Option<PathBuf> {
    let from_cache = cache
        .iter()
        .filter(|e| ldcache::matches_arch(root.arch, e.flags) && e.soname == "libnvidia-ml.so.1")
        .map(|e| root.host_path(&e.path));
    let from_dirs = root
        .arch
        .lib_dirs()
        .into_iter()
        .map(|d| root.host_path(Path::new(&d).join("libnvidia-ml.so.1")));
    from_cache.chain(from_dirs).find(|p| p.exists())
}

fn is_regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_of_cases() {
        let families: BTreeSet<&str> =
            ["libcuda", "libnvidia-egl-gbm", "libnvidia-egl-wayland"].into();
        let suffix = ".so.550.54.15";
        let cases = [
            ("driver version", "libcuda.so.550.54.15", Some("libcuda")),
            ("another driver version", "libcuda.so.535.1.1", None),
            ("the soname link", "libcuda.so.1", None),
            (
                "own version",
                "libnvidia-egl-gbm.so.1.1.1",
                Some("libnvidia-egl-gbm"),
            ),
            (
                "own version, longer",
                "libnvidia-egl-wayland.so.1.1.13",
                Some("libnvidia-egl-wayland"),
            ),
            ("own soname link", "libnvidia-egl-gbm.so.1", None),
            ("not a version", "libnvidia-egl-gbm.so.1.x", None),
            ("unknown family", "libfoo.so.1.2.3", None),
            (
                "own-version family not asked for",
                "libnvidia-egl-xcb.so.1.0.1",
                None,
            ),
        ];
        for (name, file, want) in cases {
            assert_eq!(family_of(file, suffix, &families), want, "case {name}");
        }
    }
}
