#!/usr/bin/env bash
# The start-path benchmark (issues 13 and 24; method and how to reproduce in docs/PERFORMANCE.md).
#
# Builds release binaries (the static nvidia-cdi-hook too), makes a simulated 8-GPU host and a
# 64-GPU one, prints the machine (CPU, cores, kernel, runc, load average at the start and the
# end), and times engine-style starts of a busybox `true` (a fresh overlay rootfs, create, start,
# wait for the container's process to exit, delete) in shuffled rounds: every scenario once per
# round, in a new random order each round, so drift and noise fall on all of them alike:
#   runc          plain runc, no GPU (the baseline every "added" figure is taken against)
#   hook-noop     a prestart hook that does nothing (busybox's static `true`): what runc itself
#                 adds for running any hook (each prestart-hook scenario is also printed over it)
#   hook-nogpu    the prestart hook in config.json, no GPU asked for (what a hooks.d `always`
#                 entry costs every container)
#   hook-1        the prestart hook in config.json (legacy), GPU 0, compute+utility
#   hook-8        the same, all 8 GPUs
#   legacy-1      the shim in legacy mode (it adds the prestart hook), GPU 0
#   cdi-mounts    plain runc on the config.json the first set's shim writes in cdi mode, less its
#                 hooks: runc's own cost of the spec's mounts and nodes (each CDI scenario is
#                 also printed over it)
#   cdi           the shim in cdi mode, GPU 0 from a spec generated beforehand
#   jit-cdi       the shim in jit-cdi mode, GPU 0
#   shim-nogpu    the shim (legacy mode), no GPU asked for
#   *-glibc       hook-1 and jit-cdi again on a Debian-like image: the host's multiarch lib dir
#                 (hard links, about 1,100 files) with its ld.so.conf and ld.so.cache
# It also times creating a file and a directory in an overlay on this disk, the unit of the
# hooks' filesystem work. Each scenario prints its median, p10 and p90, the median added over
# plain runc, and the added time paired by round (median, p10-p90). Then the
# concurrency scenario (N GPU containers started at once through the shim: total wall time, p50
# and p99 of one start), `nvidia-ctk cdi generate` on the 8- and 64-GPU hosts, and peak RSS.
#
# Usage: scripts/bench.sh [--rounds N] [--compare DIR] [--concurrency N] [--breakdown N]
#                         [--hook-kinds N]  (root)
#   --compare DIR   a second set of binaries in DIR (nvidia-container-runtime, nvidia-ctk,
#                   nvidia-cdi-hook; nvidia-container-runtime-hook if it has one, and for a
#                   static front its program in DIR/libexec/nvct/): another build of this
#                   project, or the upstream toolkit built from source. Timed in the
#                   same rounds, each with its own flags; per-round ratios A/B are printed. A
#                   scenario a set cannot run here is printed as "n/a: <reason>", not failed.
#   --concurrency N containers started at once (default 50; 0 skips it)
#   --breakdown N   instead of the rounds: N starts each of jit-cdi, jit-cdi-glibc, cdi,
#                   legacy-1, shim-nogpu, hook-noop and hook-1 with debug logs on, then the
#                   median (p10, p90) per step of the apply-edits hook, the shim and the
#                   prestart hook (their "step timings" lines), the wall time of every hook
#                   process from fork to exit (examples/hook_timer; a peer's: wall times only),
#                   and the prestart hook's process over the no-op hook's
#   --hook-kinds N  instead of the rounds: N shuffled rounds of `runc create` alone (then
#                   `delete -f`) with no hook and with busybox `true` as a prestart,
#                   createRuntime and createContainer hook: runc's own cost of running any
#                   hook of each kind, paired by round
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=30
compare=""
concurrency=50
breakdown=0
hookkinds=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --compare) compare=$(realpath "$2"); shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --breakdown) breakdown=$2; shift 2 ;;
    --hook-kinds) hookkinds=$2; shift 2 ;;
    -h|--help) sed -n '2,49p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$rounds" "$concurrency" "$breakdown" "$hookkinds"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "bench.sh: $n is not a count (a whole number)" >&2; exit 2; }
done
[ "$rounds" -ge 1 ] || { echo "bench.sh: --rounds must be at least 1" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench.sh: run as root (it starts containers)" >&2; exit 2; }
for tool in runc busybox python3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench.sh: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
if [ -n "$compare" ]; then
  for b in nvidia-container-runtime nvidia-cdi-hook nvidia-ctk; do
    [ -x "$compare/$b" ] || { echo "bench.sh: --compare $compare has no executable $b" >&2; exit 2; }
  done
fi
cargo build --locked --release --workspace --bins --examples --lib >/dev/null
for b in nvidia-cdi-hook nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime; do
  cargo rustc --locked --release --target-dir target/static --bin "$b" -- -C target-feature=+crt-static >/dev/null 2>&1
done
work=$(mktemp -d /tmp/nvct-bench.XXXXXX)
cleanup() { umount -R "$work"/*/merged 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
# The installed layout (scripts/build-release.sh): the static nvidia-cdi-hook, the static
# fronts of the prestart hook, nvidia-ctk and the shim in bin/, their dynamic programs in
# libexec/nvct/.
mkdir -p "$work/A/bin" "$work/A/libexec/nvct"
for b in nvidia-cdi-hook nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime; do
  cp "target/static/release/$b" "$work/A/bin/"
done
cp target/release/nvidia-container-runtime-hook target/release/nvidia-ctk \
  target/release/nvidia-container-runtime "$work/A/libexec/nvct/"
sets="A"
if [ -n "$compare" ]; then
  mkdir -p "$work/B/bin"
  cp "$compare"/nvidia-* "$work/B/bin/"
  if [ -d "$compare/libexec/nvct" ]; then cp -r "$compare/libexec" "$work/B/"; fi
  sets="A B"
fi
target/release/examples/fake_host --gpus 8 "$work/host" >/dev/null
target/release/examples/fake_host --gpus 64 "$work/host64" >/dev/null
mkdir -p "$work/lower/bin"
cp "$(command -v busybox)" "$work/lower/bin/busybox"
ln -s busybox "$work/lower/bin/true"
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
mkdir -p "$work/lower-glibc/usr/lib" "$work/lower-glibc/etc"
cp -a "$work/lower/bin" "$work/lower-glibc/"
cp -al "/usr/lib/$multiarch" "$work/lower-glibc/usr/lib/" 2>/dev/null || cp -a "/usr/lib/$multiarch" "$work/lower-glibc/usr/lib/"
cp -a /etc/ld.so.conf /etc/ld.so.conf.d "$work/lower-glibc/etc/"
ldconfig -r "$work/lower-glibc"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +changes)"
# Not exec: the EXIT trap removes the work directory afterwards.
python3 scripts/bench.py "$work" "$rounds" "$sets" "$concurrency" "$breakdown" "$commit" "$compare" "$hookkinds"
