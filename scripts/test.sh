#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds the fake NVML and the tools, runs every
# test (unit tests, and black-box tests that start real runc containers and a real containerd).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# --all-features: the test-only `fault-injection` feature (tests/race.rs) is exercised here;
# it is never part of a default or release build.
cargo build --locked --bins --examples --all-features
cargo test --locked --all-targets --all-features -- "$@"
