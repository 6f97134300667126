//! Reading procfs files (`/proc/self/mountinfo`, `/proc/<pid>/cgroup`, `/proc/driver/nvidia/*`).
//! They report a size of 0, so `std::fs::read_to_string` starts with 32-byte probe reads and
//! grows from there: ten `read` calls for a 12 KiB mountinfo, each of which makes the kernel
//! walk the mount table again up to where it stopped. These read into a buffer the size of a
//! large such file: one or two calls.

use std::io::{self, Read};
use std::path::Path;

/// Room for a node's mount table (a Kubernetes node's runs to tens of KiB) in one read.
const CAPACITY: usize = 64 * 1024;

/// The whole text of `file`, at most `limit` bytes of it.
pub fn read_from(file: std::fs::File, limit: u64) -> io::Result<String> {
    let room = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let mut text = String::with_capacity(CAPACITY.min(room));
    file.take(limit).read_to_string(&mut text)?;
    // Many are kept (the /proc mask's texts): no 64 KiB each.
    text.shrink_to_fit();
    Ok(text)
}

/// The whole text of the file at `path`.
pub fn read(path: &Path) -> io::Result<String> {
    read_from(std::fs::File::open(path)?, u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_procfs_files_whole() {
        for (name, path) in [
            ("mountinfo", "/proc/self/mountinfo"),
            ("status", "/proc/self/status"),
            ("cgroup", "/proc/self/cgroup"),
        ] {
            let ours = read(Path::new(path)).unwrap();
            // The same first line as std's reader (the files change between reads only in
            // their counters, never in their first line).
            let std = std::fs::read_to_string(path).unwrap();
            assert_eq!(ours.lines().next(), std.lines().next(), "{name}");
            assert!(ours.ends_with('\n'), "{name}: {ours:?}");
        }
        let limited = read_from(std::fs::File::open("/proc/self/mountinfo").unwrap(), 10).unwrap();
        assert_eq!(limited.len(), 10);
    }
}
