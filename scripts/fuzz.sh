#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time, one after another, and prints
# the executions each reached. Exits non-zero if any target crashes (panic, failed property
# assertion, sanitizer report, timeout, out-of-memory) or fails to build.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]          (default 60)
#   FUZZ_TARGETS="ldcache cdi_spec" scripts/fuzz.sh 30   (a subset)
#
# Needs the nightly toolchain (libFuzzer + AddressSanitizer); installs cargo-fuzz if missing.
# The libFuzzer entries are behind the fuzz crate's `libfuzzer` feature (stable builds of fuzz/
# leave libFuzzer out), which every cargo-fuzz command below turns on.
# Each target starts from its committed seeds (fuzz/seeds/<target>/) plus whatever an earlier
# run left in its working corpus (fuzz/corpus/<target>/, git-ignored). Crash inputs land in
# fuzz/artifacts/<target>/ (git-ignored); logs in fuzz/artifacts/logs/. See docs/FUZZING.md.
#
#   scripts/fuzz.sh --stable MUTANTS [SEED]       (no nightly, no cargo-fuzz: every target on
#   FUZZ_TARGETS="ldcache elf" scripts/fuzz.sh --stable 1000000     its seeds, regressions and
#                                                  MUTANTS PRNG mutants; a release build with
#                                                  debug assertions; fuzz/src/replay.rs)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--stable" ]; then
    mutants="${2:-}"
    seed="${3:-1}"
    case "$mutants$seed" in '' | *[!0-9]*) echo "usage: $0 --stable MUTANTS [SEED]" >&2; exit 2 ;; esac
    # Overflow checks and debug assertions on, as in the nightly run below.
    export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
    echo "== stable replay: $mutants mutants per target, seed $seed ($(nproc) cores, $(date -u +%Y-%m-%d))"
    # shellcheck disable=SC2086 # FUZZ_TARGETS is a list of names
    exec cargo run --locked --release --manifest-path fuzz/Cargo.toml --example replay -- \
        "$mutants" "$seed" ${FUZZ_TARGETS:-}
fi

secs="${1:-60}"
case "$secs" in '' | *[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2 ;; esac

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz.sh: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

# Debug assertions (and with them overflow checks) on: an arithmetic overflow on hostile
# input is reported as a crash instead of wrapping silently.
build_flags=(--debug-assertions --features libfuzzer)
cargo +nightly fuzz build "${build_flags[@]}"

targets="${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}"
logs=fuzz/artifacts/logs
mkdir -p "$logs"
failed=()
summary=()
for t in $targets; do
    mkdir -p "fuzz/corpus/$t"
    seeds=()
    [ -d "fuzz/seeds/$t" ] && seeds=("fuzz/seeds/$t")
    [ -d "fuzz/regressions/$t" ] && seeds+=("fuzz/regressions/$t")
    echo "== $t: ${secs}s"
    set +e
    cargo +nightly fuzz run "${build_flags[@]}" "$t" "fuzz/corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$logs/$t.log" 2>&1
    rc=$?
    set -e
    runs=$(sed -n 's/^Done \([0-9]*\) runs in .*/\1/p' "$logs/$t.log" | tail -1 || true)
    cov=$(grep -o 'cov: [0-9]*' "$logs/$t.log" | tail -1 | cut -d' ' -f2 || true)
    corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
    if [ "$rc" -eq 0 ] && [ -n "$runs" ]; then
        status=ok
    else
        status="CRASH (rc $rc; see $logs/$t.log and fuzz/artifacts/$t/)"
        failed+=("$t")
        grep -A1 -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)|^SUMMARY' "$logs/$t.log" | head -5 || true
    fi
    summary+=("$(printf '%-20s %12s runs  cov %6s  corpus %5s  %s' "$t" "${runs:--}" "${cov:--}" "$corpus" "$status")")
done

echo
echo "== summary (${secs}s per target, $(nproc) cores, $(date -u +%Y-%m-%d))"
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz.sh: crashed: ${failed[*]}" >&2
    exit 1
fi
