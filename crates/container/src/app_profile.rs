//! The driver application profile that restricts EGL and Vulkan to the container's GPUs (the
//! plan's `app_profile`; the CDI hook `update-application-profile`, as upstream's): the
//! `/dev/nvidiaN` character devices in the container's `/dev` give a mask with bit N set for
//! each (minors 0 to 63; others are dropped with a note), written as the `EGLVisibleDGPUDevices`
//! setting of a profile every application matches, in
//! `/etc/nvidia/nvidia-application-profiles-rc.d/10-container.conf` (mode 0444). Without such
//! a device nothing is written; nor where that directory is on a host volume (noted). The prestart hook and the CDI hook both call [`write`] after the
//! device nodes are in place, so both read the same `/dev`.
//!
//! Must not: write through anything in the image (the file goes through
//! [`Rootfs::replace_file`]), follow a symlink in `/dev`, or open a device.

use crate::rootfs::{Rootfs, RootfsError};
use nvct_sys as sys;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// Where the driver reads application profiles from, inside the container.
pub const PROFILE_DIR: &str = "/etc/nvidia/nvidia-application-profiles-rc.d";
/// The profile file's name in [`PROFILE_DIR`].
pub const PROFILE_FILE: &str = "10-container.conf";

#[derive(Debug, thiserror::Error)]
pub enum AppProfileError {
    #[error(transparent)]
    Rootfs(#[from] RootfsError),
    #[error("cannot list /dev in the container to find its GPUs: {0}")]
    ListDev(io::Error),
    #[error(
        "{path} in the container is {what}; the application profile is not written through it \
             (remove it from the image, or disable the update-application-profile hook)"
    )]
    Target { path: PathBuf, what: &'static str },
}

/// What [`write`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The mask written; `None` when the container has no GPU node (nothing written).
    pub mask: Option<u64>,
    /// Minors of `/dev/nvidiaN` nodes that do not fit the 64-bit mask (left out).
    pub dropped: Vec<u32>,
    /// Why nothing was written although the container has GPUs: the profile's directory is
    /// on a host volume (a pod's volume at `/etc/nvidia`), where nothing is created; the
    /// container works without the profile.
    pub skipped: Option<String>,
}

/// Whether a `/dev` entry name is a GPU node's: `nvidia` followed by digits only.
pub fn is_gpu_node_name(name: &[u8]) -> bool {
    name.strip_prefix(b"nvidia")
        .is_some_and(|n| !n.is_empty() && n.iter().all(u8::is_ascii_digit))
}

/// The mask of `minors` (bit N for minor N), and the minors above 63 that it cannot hold.
/// `None` when no minor fits.
pub fn mask(minors: &[u32]) -> (Option<u64>, Vec<u32>) {
    let mut mask = 0u64;
    let mut dropped = Vec::new();
    for &m in minors {
        match 1u64.checked_shl(m) {
            Some(bit) => mask |= bit,
            None => dropped.push(m),
        }
    }
    ((mask != 0).then_some(mask), dropped)
}

/// The profile file's contents for `mask` (one line of JSON, no newline, the mask in hex as
/// the driver's profile parser takes it).
pub fn profile(mask: u64) -> String {
    format!(
        "{{\"profiles\":[{{\"name\":\"_container_\",\"settings\":[\"EGLVisibleDGPUDevices\",0x{mask:x}]}}],\
         \"rules\":[{{\"pattern\":[],\"profile\":\"_container_\"}}]}}"
    )
}

/// The minors of the `/dev/nvidiaN` character devices in the container's `/dev` (symlinks
/// and other types are not followed or counted), sorted. No `/dev`: none.
pub fn gpu_minors(root: &Rootfs) -> Result<Vec<u32>, AppProfileError> {
    let dev = match root.resolve(Path::new("/dev"), libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(fd) => fd,
        Err(RootfsError::Io { source, .. })
            if matches!(source.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) =>
        {
            return Ok(vec![])
        }
        Err(e) => return Err(e.into()),
    };
    // GPU node names only, and no more than a node could have GPUs (minors 0..=255).
    let names =
        sys::list_dir(dev.as_fd(), is_gpu_node_name, 256).map_err(AppProfileError::ListDev)?;
    let mut minors = Vec::new();
    for name in &names {
        let flags = libc::O_PATH | libc::O_NOFOLLOW;
        let Ok(fd) = sys::openat(dev.as_fd(), Path::new(name), flags, 0) else {
            continue;
        };
        let Ok(st) = sys::fstat(fd.as_fd()) else {
            continue;
        };
        if st.st_mode & libc::S_IFMT == libc::S_IFCHR {
            minors.push(libc::minor(st.st_rdev));
        }
    }
    minors.sort_unstable();
    minors.dedup();
    Ok(minors)
}

/// Writes the profile for the GPUs in the container's `/dev` (see the module doc).
pub fn write(root: &Rootfs) -> Result<Written, AppProfileError> {
    let (mask, dropped) = mask(&gpu_minors(root)?);
    let mut written = Written {
        mask,
        dropped,
        skipped: None,
    };
    let Some(m) = mask else {
        return Ok(written);
    };
    let path = Path::new(PROFILE_DIR).join(PROFILE_FILE);
    match root.replace_file(
        Path::new(PROFILE_DIR),
        PROFILE_FILE,
        profile(m).as_bytes(),
        0o444,
    ) {
        Ok(()) => Ok(written),
        Err(e @ RootfsError::HostVolume { .. }) => {
            written.skipped = Some(format!("skipped the EGL application profile: {e}"));
            Ok(written)
        }
        Err(RootfsError::BadTarget { path: p, what }) if p == path => {
            Err(AppProfileError::Target { path, what })
        }
        Err(e) => Err(e.into()),
    }
}

/// A note for the log when the application profile was skipped (a host volume) or GPUs were
/// left out of its mask.
pub fn note(w: &Written) -> Option<String> {
    let dropped = (!w.dropped.is_empty()).then(|| {
        format!(
            "GPU minors {:?} are above 63, which the EGL application profile's mask cannot hold: \
             left out of it",
            w.dropped
        )
    });
    let notes: Vec<String> = w.skipped.iter().cloned().chain(dropped).collect();
    (!notes.is_empty()).then(|| notes.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_cases() {
        let cases: &[(&str, &[u32], Option<u64>, &[u32])] = &[
            ("no GPU", &[], None, &[]),
            ("GPU 0", &[0], Some(0x1), &[]),
            ("GPUs 1 and 3", &[1, 3], Some(0xa), &[]),
            ("eight GPUs", &[0, 1, 2, 3, 4, 5, 6, 7], Some(0xff), &[]),
            ("minor 63 is the top bit", &[63], Some(1 << 63), &[]),
            ("minor 64 does not fit", &[64, 2], Some(0x4), &[64]),
            ("only minors that do not fit", &[100], None, &[100]),
            ("duplicates", &[5, 5], Some(0x20), &[]),
        ];
        for (name, minors, want, dropped) in cases {
            let (got, got_dropped) = mask(minors);
            assert_eq!(got, *want, "case {name}");
            assert_eq!(got_dropped, *dropped, "case {name}");
        }
    }

    #[test]
    fn profile_cases() {
        let cases: &[(&str, u64, &str)] = &[
            (
                "GPU 0",
                0x1,
                r#"{"profiles":[{"name":"_container_","settings":["EGLVisibleDGPUDevices",0x1]}],"rules":[{"pattern":[],"profile":"_container_"}]}"#,
            ),
            (
                "GPUs 0 to 7, lower-case hex",
                0xff,
                r#"{"profiles":[{"name":"_container_","settings":["EGLVisibleDGPUDevices",0xff]}],"rules":[{"pattern":[],"profile":"_container_"}]}"#,
            ),
            (
                "top bit",
                1 << 63,
                r#"{"profiles":[{"name":"_container_","settings":["EGLVisibleDGPUDevices",0x8000000000000000]}],"rules":[{"pattern":[],"profile":"_container_"}]}"#,
            ),
        ];
        for (name, m, want) in cases {
            assert_eq!(profile(*m), *want, "case {name}");
        }
    }

    #[test]
    fn gpu_node_name_cases() {
        let cases: &[(&str, bool)] = &[
            ("nvidia0", true),
            ("nvidia12", true),
            ("nvidiactl", false),
            ("nvidia-uvm", false),
            ("nvidia", false),
            ("nvidia0x", false),
            ("xnvidia0", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_gpu_node_name(name.as_bytes()), *want, "case {name}");
        }
    }
}
