//! `cargo run --release --example replay -- MUTANTS [SEED] [TARGET...]`: the stable replay
//! of `nvct_fuzz::replay` for any count (scripts/fuzz.sh --stable), one line per target with
//! its executions and time; exits non-zero (a panic naming the saved input) on a failure.

use std::path::Path;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: replay MUTANTS [SEED] [TARGET...]";
    let mutants: u64 = args.first().and_then(|a| a.parse().ok()).expect(usage);
    let seed: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let only: Vec<&str> = args.iter().skip(2).map(String::as_str).collect();
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, target) in nvct_fuzz::targets::ALL {
        if !only.is_empty() && !only.contains(name) {
            continue;
        }
        let started = Instant::now();
        let r = nvct_fuzz::replay::run(fuzz_dir, name, *target, mutants, seed);
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{name:<20} {:>10} runs  ({} seeds/regressions)  {secs:8.1} s  {:>10.0} runs/s  0 crashes",
            r.runs,
            r.replayed,
            r.runs as f64 / secs.max(1e-9)
        );
    }
}
