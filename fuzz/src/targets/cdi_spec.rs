//! CDI spec files (YAML or JSON) as `nvidia-ctk cdi validate/list` and the shim's `cdi` mode
//! read them: `nvct_cdi::validate::validate_text` (= `spec::parse_value` + `validate::schema` +
//! typed decode + `validate::semantic`), `nvct_cdi::QualifiedName::new`, `nvct_cdi::inject::resolve`,
//! `spec_edit::apply` (via `shim::inject`).
//! Properties (panic otherwise): no panic and no memory blow-up (YAML aliases); the fast
//! block-YAML reader (`nvct_cdi::block_yaml`) gives exactly serde_norway's value or declines; the fast
//! writer (`nvct_cdi::encode::write`) gives exactly serde_norway's text or declines; a valid spec
//! encodes to JSON and to YAML that decode to the same spec (what `nvidia-ctk cdi generate`
//! writes must be readable); every device of a valid spec has a valid qualified name that
//! `inject::resolve` finds; injecting a valid spec into a valid config.json yields a valid
//! OCI spec.

use nvct_cdi::{self, validate, Format, QualifiedName, Spec};
use nvct_inject::shim;
use std::path::{Path, PathBuf};

const CONFIG_JSON: &str = r#"{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"cwd":"/","args":["sh"],"env":["PATH=/bin"]},"root":{"path":"rootfs"},"linux":{}}"#;

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The fast reader never reads a document otherwise than the full parser.
    if let Some(fast) = nvct_cdi::block_yaml::parse(text) {
        match serde_norway::from_str::<serde_json::Value>(text) {
            Ok(full) => assert_eq!(
                fast, full,
                "the fast reader differs from serde_norway:\n{text}"
            ),
            Err(e) => panic!("the fast reader took what serde_norway refuses ({e}):\n{text}"),
        }
    }
    // schema alone is what `cdi list` uses; it must not panic on any document.
    if let Ok(doc) = nvct_cdi::spec::parse_value(text) {
        let _ = validate::schema(&doc);
    }
    let Ok(spec) = validate::validate_text(text) else {
        return;
    };

    if let Some(fast) = nvct_cdi::encode::write(&spec) {
        let full = serde_norway::to_string(&spec).expect("a valid spec serializes");
        let full = format!("---\n{}", nvct_cdi::encode::quote_sexagesimal(&full));
        assert_eq!(fast, full, "the fast writer differs from serde_norway");
    }

    for format in [Format::Json, Format::Yaml] {
        let encoded = spec
            .encode(format)
            .unwrap_or_else(|e| panic!("valid spec does not encode: {e}"));
        let doc = nvct_cdi::spec::parse_value(&encoded)
            .unwrap_or_else(|e| panic!("{format:?} output does not parse: {e}\n{encoded}"));
        let problems = validate::schema(&doc);
        assert!(
            problems.is_empty(),
            "{format:?} output fails the schema: {problems:?}\n{encoded}"
        );
        let back: Spec = serde_json::from_value(doc)
            .unwrap_or_else(|e| panic!("{format:?} output does not decode: {e}\n{encoded}"));
        assert_eq!(
            back, spec,
            "{format:?} round trip changed the spec\n{encoded}"
        );
    }

    let names: Vec<QualifiedName> = spec
        .devices
        .iter()
        .map(|d| {
            QualifiedName::new(&spec.kind, &d.name)
                .unwrap_or_else(|e| panic!("valid spec, invalid device name {:?}: {e}", d.name))
        })
        .collect();
    let specs = vec![nvct_cdi::resolve::SpecFile {
        path: PathBuf::from("/etc/cdi/fuzz.yaml"),
        priority: 0,
        spec: spec.clone(),
    }];
    let resolved = nvct_cdi::inject::resolve(&names, &specs, "/etc/cdi")
        .unwrap_or_else(|e| panic!("valid spec, its own devices do not resolve: {e}"));
    let edits: Vec<&nvct_cdi::ContainerEdits> = resolved.iter().map(|e| e.edits).collect();

    let path = Path::new("/bundle/config.json");
    let mut doc: serde_json::Value = serde_json::from_str(CONFIG_JSON).unwrap();
    debug_assert!(serde_json::from_str::<oci_spec::runtime::Spec>(CONFIG_JSON).is_ok());
    if shim::inject(&mut doc, &edits, path).is_ok() {
        let out = serde_json::to_string(&doc).unwrap();
        if let Err(e) = serde_json::from_str::<oci_spec::runtime::Spec>(&out) {
            panic!("injecting a valid CDI spec made an invalid config.json: {e}\n{out}");
        }
    }
}
