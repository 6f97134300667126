//! The targets on stable, without libFuzzer: every input of a target's seed directory (and
//! of `regressions/<target>/`, fixed crashes kept for good), then a bounded count of inputs
//! mutated from them by a small seeded PRNG (bit flips, interesting bytes and integers,
//! inserted, deleted, duplicated and spliced ranges). No coverage feedback: this keeps every
//! target compiling and running in the suite, and replays what libFuzzer found; the nightly
//! run (`scripts/fuzz.sh`) is what explores.
//!
//! A failing input is written to `artifacts/<target>/crash-stable-<hash>` (git-ignored, the
//! same place cargo-fuzz puts its crashes) and the panic names that file.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Longest input the mutator makes.
const MAX_LEN: usize = 64 << 10;
/// Mutants kept as parents for later mutations.
const POOL: usize = 256;

/// xorshift64*: small, fast and reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bytes that matter to the parsers: NUL, ASCII edges, the separators of the formats read.
const BYTES: &[u8] = b"\x00\x01\x7f\x80\xff\n\r\t ,=:;\"'{}[]/\\.-+0123456789aA";
/// 32-bit values for counts and offsets (ld.so.cache, ELF headers).
const WORDS: &[u32] = &[
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];

/// One mutant of `input` (one to four stacked edits), possibly spliced with one of `pool`.
pub fn mutate(rng: &mut Rng, input: &[u8], pool: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = BYTES[rng.below(BYTES.len())];
            }
            2 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n)
                    .map(|_| {
                        if rng.below(2) == 0 {
                            BYTES[rng.below(BYTES.len())]
                        } else {
                            rng.next() as u8
                        }
                    })
                    .collect();
                out.splice(at..at, bytes);
            }
            3 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(64));
                out.drain(at..at + n);
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(256));
                let chunk = out[at..at + n].to_vec();
                let to = rng.below(len + 1);
                out.splice(to..to, chunk);
            }
            5 if !pool.is_empty() => {
                let other = &pool[rng.below(pool.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            6 if len >= 4 => {
                let at = rng.below(len - 3);
                let w = WORDS[rng.below(WORDS.len())];
                let w = if rng.below(4) == 0 {
                    w.wrapping_add(len as u32)
                } else {
                    w
                };
                out[at..at + 4].copy_from_slice(&w.to_le_bytes());
            }
            7 if len > 0 => out.truncate(rng.below(len)),
            _ => out.push(BYTES[rng.below(BYTES.len())]),
        }
    }
    out.truncate(MAX_LEN);
    out
}

/// The files directly in `dir` (none when it does not exist), sorted by name.
pub fn inputs_in(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}

/// What one target's replay did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Seed and regression inputs run as they are.
    pub replayed: usize,
    /// Executions in all (replayed + mutants).
    pub runs: u64,
}

/// Runs `target` (the function of `fuzz/src/targets/<name>.rs`) on every input under
/// `<fuzz dir>/seeds/<name>` and `<fuzz dir>/regressions/<name>`, then on `mutants` inputs
/// mutated from those with the PRNG seeded by `seed`. Panics, naming the saved input, on the
/// first input the target panics on.
pub fn run(fuzz_dir: &Path, name: &str, target: fn(&[u8]), mutants: u64, seed: u64) -> Report {
    let mut known: Vec<(PathBuf, Vec<u8>)> = inputs_in(&fuzz_dir.join("seeds").join(name));
    known.extend(inputs_in(&fuzz_dir.join("regressions").join(name)));
    let mut runs = 0u64;
    let check = |input: &[u8], what: &dyn std::fmt::Display| {
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| target(input))) {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let saved = save_crash(fuzz_dir, name, input);
            panic!(
                "fuzz target {name} failed on {what} (saved as {}): {why}",
                saved.display()
            );
        }
    };
    for (path, bytes) in &known {
        check(bytes, &path.display());
        runs += 1;
    }
    let mut pool: Vec<Vec<u8>> = known.into_iter().map(|(_, b)| b).collect();
    let parents = pool.len();
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    let mut rng = Rng::new(seed ^ fnv(name.as_bytes()));
    for i in 0..mutants {
        let parent = pool[rng.below(pool.len())].clone();
        let input = mutate(&mut rng, &parent, &pool);
        check(&input, &format_args!("mutant {i} (seed {seed})"));
        runs += 1;
        // Keep some mutants as parents, so that edits accumulate.
        if rng.below(16) == 0 {
            if pool.len() < POOL + parents {
                pool.push(input);
            } else {
                let at = parents + rng.below(POOL);
                pool[at] = input;
            }
        }
    }
    Report {
        replayed: parents,
        runs,
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn save_crash(fuzz_dir: &Path, name: &str, input: &[u8]) -> PathBuf {
    let dir = fuzz_dir.join("artifacts").join(name);
    let path = dir.join(format!("crash-stable-{:016x}", fnv(input)));
    let _ = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, input));
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prng_is_reproducible_and_mutants_stay_bounded() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let seq: Vec<u64> = (0..8).map(|_| a.next()).collect();
        assert_eq!(seq, (0..8).map(|_| b.next()).collect::<Vec<_>>());
        assert!(seq.windows(2).all(|w| w[0] != w[1]));
        let mut rng = Rng::new(1);
        let big = vec![b'x'; MAX_LEN];
        let pool = vec![big.clone()];
        let mut changed = 0;
        for _ in 0..2000 {
            let m = mutate(&mut rng, &big, &pool);
            assert!(m.len() <= MAX_LEN);
            changed += usize::from(m != big);
        }
        assert!(changed > 1500, "{changed} of 2000 mutants differ");
    }

    #[test]
    fn a_failing_input_is_saved_and_named() {
        let tmp = std::env::temp_dir().join(format!("nvct-fuzz-replay-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("seeds/t")).unwrap();
        std::fs::write(tmp.join("seeds/t/ok"), b"fine").unwrap();
        fn target(data: &[u8]) {
            assert!(!data.contains(&b'!'), "a bang");
        }
        let report = run(&tmp, "t", target, 0, 1);
        assert_eq!(
            report,
            Report {
                replayed: 1,
                runs: 1
            }
        );
        std::fs::write(tmp.join("seeds/t/bad"), b"bang!").unwrap();
        let err = catch_unwind(|| run(&tmp, "t", target, 0, 1)).unwrap_err();
        let msg = err.downcast_ref::<String>().unwrap();
        assert!(
            msg.contains("seeds/t/bad") && msg.contains("a bang"),
            "{msg}"
        );
        let saved = inputs_in(&tmp.join("artifacts/t"));
        assert_eq!(saved.len(), 1);
        assert_eq!(saved[0].1, b"bang!");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
