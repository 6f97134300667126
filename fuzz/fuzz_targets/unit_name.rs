//! libFuzzer entry of `nvct_fuzz::targets::unit_name` (the body and its properties are there, so
//! that the same function also runs on stable as a replay test: `fuzz/tests/replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nvct_fuzz::targets::unit_name::run(data));
