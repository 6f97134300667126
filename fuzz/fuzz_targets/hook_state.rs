//! The OCI hook state on stdin: `oci::HookState::parse` and the capped `HookState::read`.
//! Property: no panic; an accepted state has 0 < pid <= i32::MAX and a non-empty bundle, and
//! `read` agrees with `parse`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvct::oci::HookState;

fuzz_target!(|data: &[u8]| {
    let parsed = HookState::parse(data);
    if let Ok(s) = &parsed {
        assert!(s.pid > 0 && s.pid <= i32::MAX as u32, "{s:?}");
        assert!(!s.bundle.as_os_str().is_empty(), "{s:?}");
    }
    let read = HookState::read(data);
    assert_eq!(read.as_ref().ok(), parsed.as_ref().ok());
});
