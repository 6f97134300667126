//! cgroup v1: `c MAJ:MIN rw` into the container's `devices.allow`, one write per rule (the
//! kernel parses one rule per write).
//!
//! Owns: opening and writing `devices.allow` in the directory `locate.rs` found. Must not:
//! find that directory itself, write `a` (all devices) or any access other than `rw`, or write
//! `devices.deny`.

use super::{is_denied, CgroupError};
use nvct_model::CgroupRule;
use std::io::Write;
use std::path::Path;

/// `CGROUP_SUPER_MAGIC`.
const CGROUP_SUPER_MAGIC: i64 = 0x27e0eb;

/// The text written for one rule.
pub(super) fn rule_text(r: &CgroupRule) -> String {
    format!("c {}:{} rw", r.major, r.minor)
}

pub(super) fn allow(dir: &Path, rules: &[CgroupRule]) -> Result<(), CgroupError> {
    let allow = dir.join("devices.allow");
    let err = |op: String, source: std::io::Error| {
        if is_denied(&source) {
            CgroupError::Denied {
                path: allow.clone(),
                op,
                source,
            }
        } else {
            CgroupError::V1 {
                path: allow.clone(),
                op,
                source,
            }
        }
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&allow)
        .map_err(|e| err("open".into(), e))?;
    {
        use std::os::fd::AsFd;
        let fs_type = nvct_sys::fstatfs_type(file.as_fd()).map_err(|e| err("statfs".into(), e))?;
        if fs_type != CGROUP_SUPER_MAGIC {
            let e = std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("not a cgroup v1 file (statfs type {fs_type:#x})"),
            );
            return Err(err("use".into(), e));
        }
    }
    for r in rules {
        let text = rule_text(r);
        file.write_all(text.as_bytes())
            .map_err(|e| err(format!("write {text:?} to"), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_text_is_char_rw_only() {
        assert_eq!(
            rule_text(&CgroupRule {
                major: 195,
                minor: 255
            }),
            "c 195:255 rw"
        );
    }
}
