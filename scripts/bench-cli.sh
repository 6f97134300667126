#!/usr/bin/env bash
# Measures `nvidia-container-cli configure` (standalone, as LXC's and enroot's hooks run it) beside
# the prestart hook for the same request (GPUs 0,2; compute,utility; 8 simulated GPUs): each CLI
# run is a fresh mount namespace (`unshare -m`) whose rootfs gets its own /proc and /dev, minus
# the same namespace set up without the CLI; then scripts/bench-hook.sh for the hook (what it
# adds to `runc run`), and both programs' peak memory (GNU time). Release build.
# Usage: scripts/bench-cli.sh [RUNS]   (as root; results go in docs/PERFORMANCE.md by hand)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-30}
cargo build --locked --release --workspace --bins --examples --lib >/dev/null
top=$PWD
work=$(mktemp -d /tmp/nvct-bench-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$top/target/release/examples/fake_host" --gpus 8 "$work/host" >/dev/null
printf '[nvidia-container-cli]\nroot = "%s"\nproc-root = "%s"\n' "$work/host/driver" "$work/host/proc" > "$work/config.toml"
export NVIDIA_CTK_CONFIG_FILE_PATH="$work/config.toml"
cli="$top/target/release/nvidia-container-cli"

# One run: a fresh rootfs in a fresh mount namespace; $1 = the command run in it (or `true`).
one() {
  local r="$work/rootfs"
  rm -rf "$r"
  mkdir -p "$r/dev" "$r/proc" "$r/etc" "$r/usr/bin" "$r/usr/lib/x86_64-linux-gnu"
  touch "$r/etc/debian_version"
  unshare -m -p -f sh -c "mount --make-rprivate / && mount -t proc proc $r/proc && mount -t tmpfs tmpfs $r/dev && $1"
}

measure() { # $1 = label, $2 = command
  local times=()
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s%N)
    one "$2" >/dev/null
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v label="$1" '{a[NR]=$1; s+=$1} END {printf "%-36s mean %7.2f ms  median %7.2f ms  (n=%d)\n", label, s/NR/1000, a[int((NR+1)/2)]/1000, NR}'
}

configure="$cli --user configure --no-cgroups --ldconfig=@/sbin/ldconfig --device=0,2 --compute --utility $work/rootfs"
measure "namespace and rootfs only" "true"
measure "nvidia-container-cli configure" "$configure"
if [ -x /usr/bin/time ]; then
  one "/usr/bin/time -f %M -o $work/rss $configure" >/dev/null
  echo "nvidia-container-cli configure peak RSS: $(cat "$work/rss") KiB"
fi
scripts/bench-hook.sh "$runs"
