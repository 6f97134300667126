//! PURE shared vocabulary, no I/O: facts about the host that several stages need and none
//! owns. Today: [`Arch`], the host's architecture and its library layout (Debian/Ubuntu
//! multiarch dirs, RHEL/Fedora `lib64`, the ld.so.cache flags of its libraries).

use crate::ldcache;

/// The CPU architecture whose libraries the driver provides (the host's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// The architecture this binary was built for, which is the host's.
    pub const fn host() -> Arch {
        if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::X86_64
        }
    }

    /// The Debian/Ubuntu multiarch tuple (`/usr/lib/<tuple>`).
    pub fn multiarch(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-linux-gnu",
            Arch::Aarch64 => "aarch64-linux-gnu",
        }
    }

    /// Whether an ld.so.cache entry with `flags` is a 64-bit glibc library of this
    /// architecture (x86-64 `0x0303`, AArch64 `0x0a03`).
    pub fn matches_cache_flags(self, flags: i32) -> bool {
        match self {
            Arch::X86_64 => ldcache::is_x86_64(flags),
            Arch::Aarch64 => ldcache::is_aarch64(flags),
        }
    }

    /// Where driver libraries may be besides the dirs the ld cache names, most specific first:
    /// the multiarch dirs (Debian, Ubuntu), `lib64` (RHEL, Fedora, SUSE), `/usr/lib`.
    pub fn lib_dirs(self) -> [String; 5] {
        let t = self.multiarch();
        [
            format!("/usr/lib/{t}"),
            "/usr/lib64".into(),
            format!("/lib/{t}"),
            "/lib64".into(),
            "/usr/lib".into(),
        ]
    }

    /// The library directories an image may use, in the order the container's lib dir is
    /// chosen: its multiarch dir, `/usr/lib64`, `/usr/lib`.
    pub fn image_lib_dirs(self) -> [String; 3] {
        [
            format!("/usr/lib/{}", self.multiarch()),
            "/usr/lib64".into(),
            "/usr/lib".into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_cases() {
        let cases = [
            ("x86-64", Arch::X86_64, "x86_64-linux-gnu", 0x0303, 0x0a03),
            (
                "aarch64",
                Arch::Aarch64,
                "aarch64-linux-gnu",
                0x0a03,
                0x0303,
            ),
        ];
        for (name, arch, tuple, own, other) in cases {
            assert_eq!(arch.multiarch(), tuple, "{name}");
            assert!(arch.matches_cache_flags(own), "{name}");
            assert!(!arch.matches_cache_flags(other), "{name}");
            assert_eq!(arch.lib_dirs()[0], format!("/usr/lib/{tuple}"), "{name}");
            assert_eq!(
                arch.image_lib_dirs(),
                [
                    format!("/usr/lib/{tuple}"),
                    "/usr/lib64".into(),
                    "/usr/lib".into()
                ],
                "{name}"
            );
        }
    }
}
