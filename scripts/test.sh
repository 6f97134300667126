#!/usr/bin/env bash
# The whole test suite: installs what it needs, checks formatting and lints, builds the fake
# NVML and the tools, runs every test (unit tests, and black-box tests that start real runc
# containers, a real containerd and podman), then runs the container tests again on each other
# kind of GPU node the suite simulates (tests/suite/common/hostkind.rs): a cgroup v2 host and an
# Ubuntu-like host (cgroup v2, /sbin/ldconfig a shell wrapper of ldconfig.real). Arguments go to
# every test binary (filters, --nocapture); on the other kinds a filter narrows the re-run set.
set -euo pipefail
cd "$(dirname "$0")/.."
# Progress: one line per step with the time so far; at the end (or at the first failure) one
# verdict line with the counts of every cargo test run (`suite: N passed, M failed`).
start=$SECONDS
step() { echo "=== [${SECONDS}s] $*"; }
passed=0
failed=0
current=setup
verdict() {
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "=== the suite passed in $((SECONDS - start))s"
  else
    echo "=== the suite FAILED in step: $current (after $((SECONDS - start))s; the output above says why)"
  fi
  echo "suite: $passed passed, $failed failed"
}
trap verdict EXIT
# Adds the `test result:` counts of cargo test's output (read from a file) to the totals.
count() {
  local p f
  p=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' "$1" | awk '{p+=$1; f+=$2} END {print p+0, f+0}')
  read -r p f <<<"$p"
  passed=$((passed + p))
  failed=$((failed + f))
}
current="installing what the tests need"
step "$current"
scripts/install-deps.sh
current="cargo fmt --check, clippy -D warnings"
step "$current"
cargo fmt --check
cargo clippy --locked --workspace --all-targets --all-features -- -D warnings
# fuzz/ (its own workspace) on stable: every target compiles, its libFuzzer entry included, and
# replays its seeds, regressions and 2000 mutants as a test (docs/FUZZING.md).
current="fuzz/: every target compiles and replays its seeds and mutants"
step "$current"
cargo check --locked --manifest-path fuzz/Cargo.toml --features libfuzzer --bins
fuzz_rc=0
cargo test --locked --manifest-path fuzz/Cargo.toml 2>&1 | tee "${TMPDIR:-/tmp}/nvct-fuzz.log" || fuzz_rc=$?
count "${TMPDIR:-/tmp}/nvct-fuzz.log"
[ "$fuzz_rc" -eq 0 ]
# --all-features: the test-only `fault-injection` feature (tests/suite/race.rs) is exercised here;
# it is never part of a default or release build.
current="building the tools, the static hook binaries and the packages"
step "$current"
cargo build --locked --workspace --bins --examples --lib --all-features
# The installed hook binaries are statically linked (an env-less hook entry gets the image's
# LD_PRELOAD; a static binary has no loader to obey it): nvidia-cdi-hook whole, the prestart
# hook and nvidia-ctk as fronts that exec the dynamic build from ../libexec/nvct/ (the layout
# scripts/build-release.sh ships); the shim too is a static front, for its start-up time. tests/suite/attacks.rs runs them from NVCT_STATIC_BIN_DIR.
for bin in nvidia-cdi-hook nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime; do
  cargo rustc --locked --all-features --target-dir target/static --bin "$bin" -- -C target-feature=+crt-static
done
mkdir -p target/static/libexec/nvct
for bin in nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime; do
  ln -sfn "$PWD/target/debug/$bin" "target/static/libexec/nvct/$bin"
done
export NVCT_STATIC_BIN_DIR="$PWD/target/static/debug"
# The .deb and .rpm of these debug builds (scripts/package.sh; a release package would pay an
# LTO build): tests/suite/package.rs installs the .deb into a scratch root, starts a GPU container
# through the installed hook, removes and purges it, and compares the .rpm with it.
scripts/package.sh --profile dev
export NVCT_PACKAGE_DIR="$PWD/target/package"
# Tests leave their scratch dirs (simulated hosts, bundles, daemons' state) for inspection when
# they fail. Each phase gets its own TMPDIR under one dir per run; a phase that passes has its
# dir removed, so a run needs disk for one phase's scratch, not the whole suite's.
suite_tmp=$(mktemp -d "${TMPDIR:-/tmp}/nvct-suite.XXXXXX")
chmod 0755 "$suite_tmp" # some tests run our tools as an unprivileged user
echo "test scratch dirs under $suite_tmp ($(df -h --output=avail "$suite_tmp" | tail -1 | tr -d ' ') free)"
phase() {
  local name=$1
  current="tests: $2"
  shift 2
  step "$current"
  mkdir -m 1777 "$suite_tmp/$name" # like /tmp
  local rc=0
  TMPDIR="$suite_tmp/$name" "$@" 2>&1 | tee "$suite_tmp/$name.log" || rc=$?
  count "$suite_tmp/$name.log"
  [ "$rc" -eq 0 ] || return "$rc"
  rm -f "$suite_tmp/$name.log"
  rm -rf --one-file-system "${suite_tmp:?}/$name" || echo "warning: could not remove $suite_tmp/$name"
}
phase all "every test (cgroup v1 host)" cargo test --locked --workspace --all-targets --all-features -- "$@"
# The Kubernetes manifests (packaging/kubernetes/) against the Kubernetes JSON schemas, offline.
current="the Kubernetes manifests against the Kubernetes schemas"
step "$current"
scripts/validate-k8s.sh
# The tests whose outcome depends on the kind of host (the device cgroup, ldconfig and the ld
# cache, the library layout, the mount table and /run, doctor's checks of those) run again on
# the simulated v2 and Ubuntu hosts: each area of tests/suite/ lists them in its
# `each_host_kind!` (tests/suite/main.rs says how they are chosen). The others (containerd,
# its CRI plugin and podman among them: they set CPU limits, and this machine's cpu controller is
# bound to its cgroup v1 hierarchy, so on the simulated v2 host they cannot start any container)
# run on v1 only. The re-run set is the `each_host_kind` tests this run's arguments select.
current="listing the host-kind tests"
host_kind_list=$(cargo test --locked --all-features --test suite -- --list "$@")
mapfile -t host_kind_tests < <(sed -n 's/^\(.*::each_host_kind::.*\): test$/\1/p' <<<"$host_kind_list")
if [ "${#host_kind_tests[@]}" -eq 0 ]; then
  step "no host-kind test selected: the v2 and ubuntu re-runs are skipped"
else
  for host in v2 ubuntu; do
    phase "$host" "the ${#host_kind_tests[@]} host-kind tests again on the simulated ${host} host" env NVCT_TEST_HOST="$host" cargo test --locked --all-features --test suite -- --exact "${host_kind_tests[@]}" "$@"
  done
fi
# The real-host phase: a Debian 12 VM under qemu (systemd, cgroup v2, crun, the engines, the
# .deb and its units; scripts/realhost/, docs/REALHOST.md). Its image is built once and cached.
phase realhost "the real-host phase (a Debian 12 VM under qemu)" cargo test --locked --all-features --test realhost -- --ignored "$@"
rmdir "$suite_tmp"
