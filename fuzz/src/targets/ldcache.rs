//! `/etc/ld.so.cache` bytes (new, compat and old formats): `ldcache::parse`, and
//! `ldcache::parse_within` with the native writer's bounds (`IMAGE_LIMITS`).
//! Property: no panic; decoded strings contain no NUL byte and their total stays within the
//! parser's documented bound (4 × file size + 1 MiB), so a crafted file cannot blow up memory;
//! every entry is backed by a table slot inside the file. Writer against reader: what
//! `ldcache::write` makes of the entries parses back to the same entries (as a multiset), and
//! writing those again gives the same bytes (the order is a fixed point). The bounded parser
//! returns what `parse` does or a bound's error (`EntryLimit`, `OutputTooLarge`), never more
//! entries than its bound.

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    match nvct_formats::ldcache::parse(data) {
        Ok(entries) => {
            let mut total = 0usize;
            for e in &entries {
                assert!(!e.soname.contains('\0'), "{e:?}");
                assert!(!e.path.as_os_str().as_encoded_bytes().contains(&0), "{e:?}");
                total += e.soname.len() + e.path.as_os_str().len();
            }
            assert!(
                total <= data.len() * 4 + (1 << 20),
                "{total} bytes decoded from {}",
                data.len()
            );
            // Old entries are 12 bytes, new ones 24: the table itself must be in the file.
            assert!(
                entries.len() * 12 <= data.len(),
                "{} entries from {} bytes",
                entries.len(),
                data.len()
            );
            // Within the native writer's bounds the bounded parser agrees; beyond them it
            // refuses with a bound's error, never another.
            let limits = nvct_formats::ldcache::IMAGE_LIMITS;
            match nvct_formats::ldcache::parse_within(data, limits) {
                Ok(bounded) => {
                    assert_eq!(bounded, entries, "parse_within disagrees with parse");
                    assert!(bounded.len() <= limits.entries as usize);
                }
                Err(e) => assert!(
                    matches!(
                        e.format_error(),
                        Some(
                            nvct_formats::ldcache::FormatError::EntryLimit { .. }
                                | nvct_formats::ldcache::FormatError::OutputTooLarge { .. }
                        )
                    ),
                    "parse_within failed where parse did not: {e}"
                ),
            }
            if let Ok(bytes) = nvct_formats::ldcache::write(&entries) {
                let back = nvct_formats::ldcache::parse(&bytes).expect("our own cache parses");
                let key =
                    |e: &nvct_formats::ldcache::Entry| (e.soname.clone(), e.path.clone(), e.flags);
                let (mut a, mut b): (Vec<_>, Vec<_>) = (
                    entries.iter().map(key).collect(),
                    back.iter().map(key).collect(),
                );
                a.sort();
                b.sort();
                assert_eq!(a, b, "write then parse keeps every entry");
                assert_eq!(
                    nvct_formats::ldcache::write(&back).unwrap(),
                    bytes,
                    "the order is stable"
                );
            }
        }
        Err(e) => {
            assert!(
                e.format_error().is_some(),
                "parse() only fails on the format: {e}"
            );
            assert!(
                nvct_formats::ldcache::parse_within(data, nvct_formats::ldcache::IMAGE_LIMITS)
                    .is_err(),
                "parse_within accepts what parse refuses"
            );
            let _ = e.to_string();
        }
    }
}
