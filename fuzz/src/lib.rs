//! The fuzz targets of `nvct` as plain functions (`targets::<name>::run`), their shared host
//! (`common`) and a stable replay runner (`replay`). The libFuzzer entries in `fuzz_targets/`
//! (nightly, `cargo fuzz`, `scripts/fuzz.sh`) call the same functions; `tests/replay.rs` runs
//! each on its seeds and a bounded count of mutants on stable, and `examples/replay.rs` runs
//! any count (`scripts/fuzz.sh --stable N`). See docs/FUZZING.md.

pub mod common;
pub mod replay;
pub mod targets;
