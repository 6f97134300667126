//! The OCI hook state on stdin: `oci::HookState::parse` and the capped `HookState::read`.
//! Property: no panic; an accepted state has no pid (crun's 0) or 0 < pid <= i32::MAX, a
//! non-empty bundle, and `read` agrees with `parse`.

use nvct_formats::oci::HookState;

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let parsed = HookState::parse(data);
    if let Ok(s) = &parsed {
        if let Some(pid) = s.pid {
            assert!(pid > 0 && pid <= i32::MAX as u32, "{s:?}");
        }
        assert!(!s.bundle.as_os_str().is_empty(), "{s:?}");
    }
    let read = HookState::read(data);
    assert_eq!(read.as_ref().ok(), parsed.as_ref().ok());
}
