//! `/etc/ld.so.cache` bytes (new, compat and old formats): `ldcache::parse`.
//! Property: no panic; decoded strings contain no NUL byte and their total stays within the
//! parser's documented bound (4 × file size + 1 MiB), so a crafted file cannot blow up memory;
//! every entry is backed by a table slot inside the file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match nvct::ldcache::parse(data) {
        Ok(entries) => {
            let mut total = 0usize;
            for e in &entries {
                assert!(!e.soname.contains('\0'), "{e:?}");
                assert!(!e.path.as_os_str().as_encoded_bytes().contains(&0), "{e:?}");
                total += e.soname.len() + e.path.as_os_str().len();
            }
            assert!(total <= data.len() * 4 + (1 << 20), "{total} bytes decoded from {}", data.len());
            // Old entries are 12 bytes, new ones 24: the table itself must be in the file.
            assert!(entries.len() * 12 <= data.len(), "{} entries from {} bytes", entries.len(), data.len());
        }
        Err(e) => {
            assert!(e.format_error().is_some(), "parse() only fails on the format: {e}");
            let _ = e.to_string();
        }
    }
});
