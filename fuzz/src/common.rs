//! Shared by several targets: a fixed simulated host (the planner's inputs) and small helpers.

use nvct_host::discover::Inventory;
use nvct_plan::fixtures::{inventory_in, node};
use std::path::Path;

/// The unit tests' standard host (`nvct_plan::fixtures`: three GPUs, GPU 1 in MIG mode), with
/// `driver_version` / `cuda_version`, the MIG config/monitor capabilities and the modeset
/// node, so that every request the fuzzers make has something to plan with.
pub fn inventory(driver_version: &str, cuda_version: Option<&str>) -> Inventory {
    let mut inv = inventory_in("/usr/lib/x86_64-linux-gnu");
    inv.driver_version = driver_version.into();
    inv.cuda_version = cuda_version.map(str::to_string);
    inv.nodes.extend([
        node("/dev/nvidia-caps/nvidia-cap1", 509, 1),
        node("/dev/nvidia-caps/nvidia-cap2", 509, 2),
        node("/dev/nvidia-modeset", 195, 254),
    ]);
    inv.nodes.sort();
    inv.mig_minors
        .extend([("config".into(), 1), ("monitor".into(), 2)]);
    inv
}

/// Splits the fuzz input into a flags byte and UTF-8 text (None when not UTF-8).
pub fn flags_and_text(data: &[u8]) -> Option<(u8, &str)> {
    let (&flags, rest) = data.split_first()?;
    Some((flags, std::str::from_utf8(rest).ok()?))
}

/// Engine-config options from the flags byte: bit 0 set-as-default, bit 1 CDI, bits 3–4 the
/// runtime name (including names that need quoting in TOML and the name of the template).
pub fn options(flags: u8) -> nvct_engines::Options {
    let names = ["nvidia", "nvidia-cdi", "my.runtime", "runc"];
    nvct_engines::Options {
        runtime_name: names[usize::from((flags >> 3) & 3)].into(),
        runtime_path: "/usr/bin/nvidia-container-runtime".into(),
        set_as_default: flags & 1 != 0,
        cdi_enabled: flags & 2 != 0,
        drop_in_host_path: None,
    }
}

/// Bit 2 of the flags byte: write a drop-in file instead of editing in place.
pub fn drop_in(flags: u8, path: &str) -> Option<&Path> {
    (flags & 4 != 0).then_some(Path::new(path))
}

/// The content of every change (a removal has none).
pub fn contents(out: &nvct_engines::Outcome) -> Vec<(&Path, &str)> {
    out.changes
        .iter()
        .filter_map(|c| Some((c.path.as_path(), c.content.as_deref()?)))
        .collect()
}

/// Panics unless `text` is TOML (what the engine will have to read).
pub fn assert_toml(what: &str, path: &Path, text: &str) -> toml_edit::DocumentMut {
    if let Err(e) = toml::from_str::<toml::Table>(text) {
        panic!(
            "{what}: {} is not TOML any more: {e}\n{text}",
            path.display()
        );
    }
    text.parse().unwrap_or_else(|e| {
        panic!(
            "{what}: {} is not TOML for toml_edit: {e}\n{text}",
            path.display()
        )
    })
}

/// Checks that the committed seeds of `target` (`fuzz/seeds/<target>/`) are exactly `seeds`
/// (file name, bytes), for the targets whose seeds are built in code (their unit tests call
/// this), so that the files stay what the code says they are. With `NVCT_FUZZ_WRITE_SEEDS=1`
/// it (re)writes them first.
pub fn check_seeds(target: &str, seeds: &[(&str, Vec<u8>)]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    if std::env::var_os("NVCT_FUZZ_WRITE_SEEDS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let committed = crate::replay::inputs_in(&dir);
    let names: Vec<String> = committed
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut want: Vec<&str> = seeds.iter().map(|(n, _)| *n).collect();
    want.sort_unstable();
    assert_eq!(
        names,
        want,
        "{}: the committed seeds (NVCT_FUZZ_WRITE_SEEDS=1 writes them)",
        dir.display()
    );
    for (name, bytes) in seeds {
        let (_, got) = committed
            .iter()
            .find(|(p, _)| p.file_name().is_some_and(|f| f == *name))
            .unwrap();
        assert!(
            got == bytes,
            "{}/{name} differs from what the code builds (NVCT_FUZZ_WRITE_SEEDS=1 rewrites it)",
            dir.display()
        );
    }
}
