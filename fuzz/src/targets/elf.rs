//! Bytes of a would-be shared library: `elf::shared_object_in` (the native ld cache writer reads
//! the soname of every injected library) and `elf::static_elf`.
//! Property: no panic; a soname found is a plain file name (non-empty, printable ASCII, no
//! `/`, at most 255 bytes) and its cache flags are glibc's libc6 type.

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    if let Some(so) = nvct_formats::elf::shared_object_in(data) {
        let s = so.soname.as_bytes();
        assert!(!s.is_empty() && s.len() <= 255, "{so:?}");
        assert!(
            s.iter().all(|b| b.is_ascii_graphic() && *b != b'/'),
            "{so:?}"
        );
        assert!(so.soname != "." && so.soname != "..", "{so:?}");
        assert_eq!(so.cache_flags & 0xff, 3, "{so:?}");
    }
    let _ = nvct_formats::elf::static_elf(data);
}
