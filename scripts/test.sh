#!/usr/bin/env bash
# The whole test suite: installs what it needs, checks formatting and lints, builds the fake
# NVML and the tools, runs every test (unit tests, and black-box tests that start real runc
# containers, a real containerd and podman), then runs the container tests again on each other
# kind of GPU node the suite simulates (tests/common/hostkind.rs): a cgroup v2 host and an
# Ubuntu-like host (cgroup v2, /sbin/ldconfig a shell wrapper of ldconfig.real).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo fmt --check
cargo clippy --locked --all-targets --all-features -- -D warnings
# --all-features: the test-only `fault-injection` feature (tests/race.rs) is exercised here;
# it is never part of a default or release build.
cargo build --locked --bins --examples --all-features
# The installed hook binaries are statically linked (an env-less hook entry gets the image's
# LD_PRELOAD; a static binary has no loader to obey it): nvidia-cdi-hook whole, the prestart
# hook and nvidia-ctk as fronts that exec the dynamic build from ../libexec/nvct/ (the layout
# scripts/build-release.sh ships). tests/attacks.rs runs them from NVCT_STATIC_BIN_DIR.
for bin in nvidia-cdi-hook nvidia-container-runtime-hook nvidia-ctk; do
  cargo rustc --locked --all-features --target-dir target/static --bin "$bin" -- -C target-feature=+crt-static
done
mkdir -p target/static/libexec/nvct
for bin in nvidia-container-runtime-hook nvidia-ctk; do
  ln -sfn "$PWD/target/debug/$bin" "target/static/libexec/nvct/$bin"
done
export NVCT_STATIC_BIN_DIR="$PWD/target/static/debug"
# The .deb and .rpm of these debug builds (scripts/package.sh; a release package would pay an
# LTO build): tests/package.rs installs the .deb into a scratch root, starts a GPU container
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
  shift
  mkdir -m 1777 "$suite_tmp/$name" # like /tmp
  TMPDIR="$suite_tmp/$name" "$@"
  rm -rf --one-file-system "${suite_tmp:?}/$name" || echo "warning: could not remove $suite_tmp/$name"
}
phase all cargo test --locked --all-targets --all-features -- "$@"
# The Kubernetes manifests (packaging/kubernetes/) against the Kubernetes JSON schemas, offline.
scripts/validate-k8s.sh
# The runc-based container tests (the prestart hook; the shim's legacy, cdi and jit-cdi edits
# with our CDI hooks under runc; the installed package's hook), `docker run --gpus` through a
# real dockerd, and `nvidia-ctk doctor` (its cgroup check sees the simulated host's). containerd (`ctr run`: tests/shim_containerd.rs, tests/shim_cdi.rs,
# tests/installer.rs; its CRI plugin: tests/cri.rs) and podman
# (tests/cdi.rs) set CPU limits, and this machine's cpu controller is bound to its cgroup v1
# hierarchy, so on the simulated v2 host they cannot start any container (GPU or not): they run
# on v1 only.
container_tests=(--test hook --test attacks --test race --test cdi_hooks --test shim --test docker --test bad_input --test package --test doctor)
for host in v2 ubuntu; do
  echo "=== container tests on the simulated ${host} host"
  phase "$host" env NVCT_TEST_HOST="$host" cargo test --locked --all-features "${container_tests[@]}" -- "$@"
done
rmdir "$suite_tmp"
