#!/usr/bin/env bash
# Measures an engine-style container start (create through the runtime shim, start, wait,
# delete) of a busybox `true` asking for GPU 0 (compute+utility) on the simulated 8-GPU host,
# in the shim's legacy mode (prestart hook, plus the device rules the shim writes) and in its
# jit-cdi mode (CDI edits, runc makes the mounts, our CDI hooks), against the same start with
# plain runc and no GPU. This is the measurement behind what `mode = "auto"` picks
# (docs/PERFORMANCE.md). Uses farm-bench (pairs, medians) when it is on PATH, else a loop.
# Usage: scripts/bench-modes.sh [RUNS]   (as root; release build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
cargo build --locked --release --workspace --bins --examples --lib >/dev/null
cargo rustc --locked --release --target-dir target/static --bin nvidia-cdi-hook -- -C target-feature=+crt-static >/dev/null 2>&1
top=$PWD
work=$(mktemp -d /tmp/nvct-modes.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cp target/release/nvidia-container-runtime target/release/nvidia-container-runtime-hook "$work/bin/"
cp target/static/release/nvidia-cdi-hook "$work/bin/"
"$top/target/release/examples/fake_host" --gpus 8 "$work/host" >/dev/null
for mode in legacy jit-cdi; do
  cat > "$work/$mode.toml" <<TOML
[nvidia-container-cli]
root = "$work/host/driver"
proc-root = "$work/host/proc"
[nvidia-container-runtime]
mode = "$mode"
runtimes = ["runc"]
[nvidia-container-runtime-hook]
path = "$work/bin/nvidia-container-runtime-hook"
TOML
done
mkdir -p "$work/bundle/rootfs/bin"
cp "$(command -v busybox)" "$work/bundle/rootfs/bin/busybox"
ln -s busybox "$work/bundle/rootfs/bin/true"
(cd "$work/bundle" && runc spec)
python3 - "$work/bundle/config.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["process"]["terminal"] = False
spec["process"]["args"] = ["true"]
spec["process"]["env"].append("NVIDIA_VISIBLE_DEVICES=0")
json.dump(spec, open(sys.argv[1], "w"))
PY
cp "$work/bundle/config.json" "$work/pristine.json"
cat > "$work/start.sh" <<'SH'
#!/bin/sh
# One engine-style start: $1 = legacy | jit-cdi | runc.
set -e
w=$(dirname "$0"); id="bench-$1-$$"
cp "$w/pristine.json" "$w/bundle/config.json"
if [ "$1" = runc ]; then rt=runc; else rt="$w/bin/nvidia-container-runtime"; export NVIDIA_CTK_CONFIG_FILE_PATH="$w/$1.toml"; fi
"$rt" create --bundle "$w/bundle" "$id" </dev/null >/dev/null
runc start "$id"
while [ "$(runc state "$id" 2>/dev/null | sed -n 's/.*"status": "\([a-z]*\)".*/\1/p')" != stopped ]; do :; done
runc delete "$id"
SH
chmod +x "$work/start.sh"
# The no-GPU baseline must not inject anything: strip the request for it.
python3 - "$work/pristine.json" "$work/nogpu.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["process"]["env"] = [e for e in spec["process"]["env"] if not e.startswith("NVIDIA_")]
json.dump(spec, open(sys.argv[2], "w"))
PY
sed -i 's|cp "$w/pristine.json"|if [ "$1" = runc ]; then cp "$w/nogpu.json" "$w/bundle/config.json"; else cp "$w/pristine.json" "$w/bundle/config.json"; fi; : |' "$work/start.sh"
for mode in legacy jit-cdi runc; do "$work/start.sh" "$mode"; done  # each works once
if command -v farm-bench >/dev/null 2>&1; then
  for mode in legacy jit-cdi; do
    echo "== $mode vs plain runc (no GPU)"
    farm-bench -n "$runs" --timeout 600 --vs "$work/start.sh runc" -- "$work/start.sh" "$mode"
  done
  echo "== legacy vs jit-cdi"
  farm-bench -n "$runs" --timeout 600 --vs "$work/start.sh jit-cdi" -- "$work/start.sh" legacy
else
  for mode in runc legacy jit-cdi; do
    t0=$(date +%s%N); for i in $(seq "$runs"); do "$work/start.sh" "$mode"; done; t1=$(date +%s%N)
    echo "$mode: mean $(( (t1 - t0) / runs / 1000 )) us"
  done
fi
