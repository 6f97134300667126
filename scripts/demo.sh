#!/usr/bin/env bash
# The demo: builds the tools, creates a simulated 8-GPU host in a temp dir, and starts a real
# busybox container under runc with NVIDIA_VISIBLE_DEVICES=0,2 through the prestart hook, then
# shows what the container sees and a short summary of it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "== building (cargo build, quiet)"
cargo build --locked --quiet --bins --examples
top=$PWD
work=$(mktemp -d /tmp/nvct-demo.XXXXXX)
trap 'runc delete -f nvct-demo >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

echo "== simulated GPU host in $work/host"
"$top/target/debug/examples/fake_host" --gpus 8 "$work/host"

cat > "$work/config.toml" <<TOML
[nvidia-container-cli]
root = "$work/host/driver"
proc-root = "$work/host/proc"
TOML

mkdir -p "$work/bundle/rootfs/bin" "$work/bundle/rootfs/etc"
cp "$(command -v busybox)" "$work/bundle/rootfs/bin/busybox"
for applet in sh ls cat grep stat mknod echo; do ln -s busybox "$work/bundle/rootfs/bin/$applet"; done
(cd "$work/bundle" && runc spec)
python3 - "$work/bundle/config.json" "$top/target/debug/nvidia-container-runtime-hook" "$work/config.toml" <<'PY'
import json, sys
path, hook, config = sys.argv[1:]
spec = json.load(open(path))
spec["process"]["terminal"] = False
spec["process"]["env"].append("NVIDIA_VISIBLE_DEVICES=0,2")
for s in ("bounding", "effective", "permitted"):
    spec["process"]["capabilities"][s].append("CAP_MKNOD")
spec["process"]["args"] = ["sh", "-c", """
echo '-- device nodes:'; ls -l /dev/nvidia*
echo '-- driver libraries (read-only bind mounts):'; ls /usr/lib64
echo '-- nvidia-smi:'; nvidia-smi
echo '-- /proc/driver/nvidia:'; grep ModifyDeviceFiles /proc/driver/nvidia/params; ls /proc/driver/nvidia/gpus
echo '-- isolation: GPU 0 is allowed (ENXIO: no real driver), GPU 1 is denied by the device cgroup (EPERM):'
cat /dev/nvidia0; mknod /dev/nvidia1 c 195 1; cat /dev/nvidia1; true
"""]
spec["hooks"] = {"prestart": [{"path": hook, "args": ["nvidia-container-runtime-hook", "-config", config, "prestart"],
                               "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}]}
json.dump(spec, open(path, "w"), indent=2)
PY
echo "== runc run with NVIDIA_VISIBLE_DEVICES=0,2"
(cd "$work/bundle" && runc run nvct-demo) 2>&1 | tee "$work/out.txt"

# What the container saw, in one paragraph.
seen=$(grep -E '^c' "$work/out.txt" | grep -oE '/dev/nvidia[0-9]+$' | sort -u | tr '\n' ' ')
libs=$(grep -cE '^lib.*\.so\.[0-9.]+$' "$work/out.txt" || true)
echo
echo "== summary"
echo "GPU device nodes in the container: ${seen:-none}"
echo "driver library files mounted read-only: $libs"
grep -q "ModifyDeviceFiles: 0" "$work/out.txt" && echo "/proc/driver/nvidia masked: ModifyDeviceFiles: 0"
grep -q "nvidia0': No such device or address" "$work/out.txt" && echo "GPU 0: allowed by the device cgroup (ENXIO: no real driver behind it)"
grep -q "nvidia1': Operation not permitted" "$work/out.txt" && echo "GPU 1: denied by the device cgroup even after mknod (EPERM)"
