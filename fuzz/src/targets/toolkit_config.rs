//! The toolkit's own `config.toml`: `config::Config::parse` (serde + `Config::validate`).
//! Property: no panic; an accepted config serializes back to TOML that parses to the same
//! config (what `nvidia-ctk config` prints must be readable by the hook).

use nvct_formats::config::Config;
use std::path::Path;

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/etc/nvidia-container-runtime/config.toml");
    let Ok(config) = Config::parse(text, path) else {
        return;
    };
    let printed = toml::to_string(&config).expect("a parsed config serializes");
    match Config::parse(&printed, path) {
        Ok(again) => assert_eq!(
            again, config,
            "printed config reads back differently:\n{printed}"
        ),
        Err(e) => panic!("printed config does not parse: {e}\n{printed}"),
    }
}
