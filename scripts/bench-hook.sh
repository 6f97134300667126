#!/usr/bin/env bash
# Measures what the prestart hook adds to a container start: `runc run` of a busybox `true`
# with no hook, then through the hook with NVIDIA_VISIBLE_DEVICES=0,2 and =all (8 GPUs,
# utility+compute), on a simulated host. Release build. Prints mean and median per case.
# Usage: scripts/bench-hook.sh [RUNS]   (as root; results go in docs/PERFORMANCE.md by hand)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-30}
cargo build --locked --release --workspace --bins --examples --lib >/dev/null
top=$PWD
work=$(mktemp -d /tmp/nvct-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$top/target/release/examples/fake_host" --gpus 8 "$work/host" >/dev/null
printf '[nvidia-container-cli]\nroot = "%s"\nproc-root = "%s"\n' "$work/host/driver" "$work/host/proc" > "$work/config.toml"
mkdir -p "$work/bundle/rootfs/bin"
cp "$(command -v busybox)" "$work/bundle/rootfs/bin/busybox"
ln -s busybox "$work/bundle/rootfs/bin/true"
(cd "$work/bundle" && runc spec)

setup() { # $1 = NVIDIA_VISIBLE_DEVICES value or "" for no hook
  python3 - "$work/bundle/config.json" "$top/target/release/nvidia-container-runtime-hook" "$work/config.toml" "$1" <<'PY'
import json, sys
path, hook, config, devices = sys.argv[1:]
spec = json.load(open(path))
spec["process"]["terminal"] = False
spec["process"]["args"] = ["true"]
spec["process"]["env"] = [e for e in spec["process"]["env"] if not e.startswith("NVIDIA_")]
spec.pop("hooks", None)
if devices:
    spec["process"]["env"].append("NVIDIA_VISIBLE_DEVICES=" + devices)
    spec["hooks"] = {"prestart": [{"path": hook, "args": ["nvidia-container-runtime-hook", "-config", config, "prestart"],
                                   "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}]}
json.dump(spec, open(path, "w"))
PY
}

measure() { # $1 = label
  local times=()
  for i in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s%N)
    (cd "$work/bundle" && runc run "bench-$$-$i" </dev/null >/dev/null)
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v label="$1" '{a[NR]=$1; s+=$1} END {printf "%-28s mean %7.2f ms  median %7.2f ms  (n=%d)\n", label, s/NR/1000, a[int((NR+1)/2)]/1000, NR}'
}

setup ""; measure "no hook"
setup "0,2"; measure "hook, GPUs 0,2"
setup "all"; measure "hook, all 8 GPUs"

# Peak memory of the hook process (GNU time's maximum resident set size), GPUs 0,2.
if [ -x /usr/bin/time ]; then
  python3 - "$work/bundle/config.json" "$top/target/release/nvidia-container-runtime-hook" "$work/config.toml" "$work/rss" <<'PY'
import json, sys
path, hook, config, rss = sys.argv[1:]
spec = json.load(open(path))
spec["process"]["env"] = [e for e in spec["process"]["env"] if not e.startswith("NVIDIA_")] + ["NVIDIA_VISIBLE_DEVICES=0,2"]
spec["hooks"] = {"prestart": [{"path": "/usr/bin/time", "args": ["time", "-f", "%M", "-a", "-o", rss, hook, "-config", config, "prestart"],
                               "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}]}
json.dump(spec, open(path, "w"))
PY
  for i in 1 2 3 4 5; do (cd "$work/bundle" && runc run "bench-rss-$$-$i" </dev/null >/dev/null); done
  sort -n "$work/rss" | tail -1 | awk '{printf "hook peak RSS (max of 5)       %d KiB\n", $1}'
fi
