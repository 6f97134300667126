//! PURE: the lines of `/proc/<pid>/mountinfo` as values, for the rootfs gate (which mount a
//! directory is on, whether it propagates) and the device cgroup (where a hierarchy is
//! mounted). The caller reads the text; nothing here does I/O.

use std::path::PathBuf;

/// One mount, the fields we use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// The mount id (field 1; what statx `STATX_MNT_ID` returns).
    pub id: u64,
    /// The filesystem's device, `major:minor` (field 3): the same for every mount of one
    /// filesystem, in every mount namespace (a bind mount shows its source's).
    pub dev: String,
    /// The directory of the filesystem this mount shows (field 4).
    pub root: PathBuf,
    pub mount_point: PathBuf,
    /// The optional fields say `shared:N`: mounts under it propagate to its peers.
    pub shared: bool,
    pub fstype: String,
    /// The filesystem's own options (the last field), e.g. `rw,devices` of a v1 cgroup.
    pub super_opts: String,
}

/// The entries of a mountinfo text; malformed lines are skipped.
pub fn parse(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let mut r = right.split(' ');
            let (fstype, _source, super_opts) = (r.next()?, r.next()?, r.next()?);
            Some(MountEntry {
                id: f.first()?.parse().ok()?,
                dev: f.get(2)?.to_string(),
                root: PathBuf::from(unescape(f.get(3)?)),
                mount_point: PathBuf::from(unescape(f.get(4)?)),
                shared: f.iter().skip(6).any(|o| o.starts_with("shared:")),
                fstype: fstype.to_string(),
                super_opts: super_opts.to_string(),
            })
        })
        .collect()
}

/// The entries whose mount point is neither `root` nor below it: in a container's mount
/// namespace before pivot_root (where the runtime runs createContainer hooks), the runtime's
/// own mount table, without the mounts it made for the container under its rootfs.
pub fn outside(entries: Vec<MountEntry>, root: &std::path::Path) -> Vec<MountEntry> {
    entries
        .into_iter()
        .filter(|m| !m.mount_point.starts_with(root))
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\040`, `\011`, `\012`, `\134`.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            if let Ok(v) = u8::try_from(v) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_cases() {
        let text = "\
20 1 8:1 / / rw - ext4 /dev/sda1 rw
30 20 0:50 / /mnt/vol rw - tmpfs tmpfs rw
40 20 0:60 / /b/rootfs rw - overlay overlay rw
41 40 0:61 / /b/rootfs/dev rw - tmpfs tmpfs rw
42 40 0:50 / /b/rootfs/data rw - tmpfs tmpfs rw
43 20 0:62 / /b/rootfs2 rw - tmpfs tmpfs rw
";
        let kept: Vec<String> = outside(parse(text), std::path::Path::new("/b/rootfs"))
            .into_iter()
            .map(|m| m.mount_point.display().to_string())
            .collect();
        // The runtime's mounts stay (its volume's filesystem 0:50 among them); the rootfs and
        // everything under it go; a sibling whose name only starts the same stays.
        assert_eq!(kept, ["/", "/mnt/vol", "/b/rootfs2"]);
    }

    #[test]
    fn mountinfo_cases() {
        let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:5 / /dev rw,nosuid - tmpfs tmpfs rw,mode=755
31 22 8:1 /srv/vol /data\\040dir rw master:1 - ext4 /dev/sda1 rw
32 22 0:6 / /proc rw shared:7 master:2 - proc proc rw
40 22 0:30 /docker /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices
garbage line
33 22 0:7 / /x rw
";
        let e =
            |id, dev: &str, root: &str, mp: &str, shared, fstype: &str, opts: &str| MountEntry {
                id,
                dev: dev.into(),
                root: root.into(),
                mount_point: mp.into(),
                shared,
                fstype: fstype.into(),
                super_opts: opts.into(),
            };
        let want = vec![
            e(22, "8:1", "/", "/", true, "ext4", "rw"),
            e(30, "0:5", "/", "/dev", false, "tmpfs", "rw,mode=755"),
            e(31, "8:1", "/srv/vol", "/data dir", false, "ext4", "rw"),
            e(32, "0:6", "/", "/proc", true, "proc", "rw"),
            e(
                40,
                "0:30",
                "/docker",
                "/sys/fs/cgroup/devices",
                false,
                "cgroup",
                "rw,devices",
            ),
        ];
        assert_eq!(parse(text), want);
        let cases = [
            ("tab and backslash", "a\\011b\\134c", "a\tb\\c"),
            ("short escape kept", "a\\12", "a\\12"),
            ("over 255 kept", "\\777", "\\777"),
            ("plain", "/usr/lib", "/usr/lib"),
            ("space, tab, backslash", "a\\040b\\011c\\134d", "a b\tc\\d"),
            ("trailing short escape", "trailing\\04", "trailing\\04"),
        ];
        for (name, input, want) in cases {
            assert_eq!(unescape(input), want, "case {name}");
        }
    }
}
