//! NVIDIA_VISIBLE_DEVICES / NVIDIA_MIG_*_DEVICES lists: `request::parse_devices`,
//! `request::DeviceId::parse`, `request::normalize_bus_id`, and CDI names
//! (`cdi::QualifiedName::parse`, which the shim applies to the same variable).
//! Property: no panic; what parses prints back to text that parses to the same value.

use nvct_cdi::QualifiedName;
use nvct_plan::request::{self, DeviceId, Devices};

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(Some(Devices::List(ids))) = request::parse_devices("NVIDIA_VISIBLE_DEVICES", s) {
        assert!(!ids.is_empty() && ids.len() <= request::MAX_DEVICE_IDS);
        let printed: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let again = request::parse_devices("NVIDIA_VISIBLE_DEVICES", &printed.join(","));
        assert_eq!(
            again,
            Ok(Some(Devices::List(ids.clone()))),
            "printed list {printed:?} does not reparse"
        );
    }
    for item in s.split(',') {
        if let Some(id) = DeviceId::parse(item) {
            assert_eq!(
                DeviceId::parse(&id.to_string()).as_ref(),
                Some(&id),
                "{item:?} → {id}"
            );
        }
        if let Some(bus) = request::normalize_bus_id(item) {
            assert_eq!(
                request::normalize_bus_id(&bus).as_deref(),
                Some(bus.as_str()),
                "bus id {item:?} → {bus}"
            );
        }
        if let Ok(name) = QualifiedName::parse(item) {
            assert_eq!(
                QualifiedName::parse(&name.to_string()).as_ref(),
                Ok(&name),
                "CDI name {item:?}"
            );
        }
    }
}
