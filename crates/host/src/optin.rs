//! READ: the opt-in sets' device nodes under the device root and their files in the driver
//! root (the sets themselves: `model::optin`).

use nvct_formats::root::DriverRoot;
pub use nvct_model::optin::OptIn;
use nvct_model::{DriverFile, FileKind};
use std::path::{Path, PathBuf};

/// The container paths of every opt-in node under the device root (discovery stats them).
/// Each directory the sets' patterns name is listed once (`/dev` holds hundreds of entries on
/// a real node, and several patterns look there).
pub fn node_names(root: &DriverRoot) -> Vec<String> {
    let patterns: Vec<_> = OptIn::ALL.iter().flat_map(|o| o.patterns()).collect();
    let mut dirs: Vec<&str> = patterns.iter().map(|p| p.dir).collect();
    dirs.sort_unstable();
    dirs.dedup();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(root.dev_path(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let is_char = e.file_type().is_ok_and(|t| {
                use std::os::unix::fs::FileTypeExt;
                t.is_char_device()
            });
            let Some(name) = e.file_name().to_str().map(String::from) else {
                continue;
            };
            if is_char
                && patterns
                    .iter()
                    .any(|p| p.dir == dir && p.matches(Path::new(p.dir), &name))
            {
                out.push(format!("{dir}/{name}"));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The files of the sets that have some (GDS: `/run/udev`, `/etc/cufile.json`) present in the
/// driver root, as config files named `optin-<set>`, mounted at their own path.
pub fn files(root: &DriverRoot) -> Vec<DriverFile> {
    let mut out = Vec::new();
    for path in ["/run/udev", "/etc/cufile.json"] {
        let host_path = root.host_path(Path::new(path));
        if host_path.exists() {
            out.push(DriverFile {
                kind: FileKind::Config,
                name: format!("optin-{}", OptIn::Gds.name()),
                host_path,
                driver_path: PathBuf::from(path),
            });
        }
    }
    out
}
