#!/usr/bin/env bash
# The demo: builds the tools, creates a simulated 8-GPU host in a temp dir, and starts a real
# busybox container under runc with NVIDIA_VISIBLE_DEVICES=0,2 through the prestart hook, then
# shows what the container sees and a short summary of it; then registers the runtime with
# `nvidia-ctk runtime configure` (a scratch daemon.json) and starts the same request through
# the runtime shim, as an engine would.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step_no=0
# One line per step: what it does, how long it usually takes, and the time so far.
step() {
  step_no=$((step_no + 1))
  echo "== [$step_no/6, ${SECONDS}s] $*"
}
step "installing what the demo uses, when missing (runc, busybox-static, gcc, python3; up to a minute)"
scripts/install-deps.sh --demo
step "building the tools (cargo build; about 2 minutes the first time, seconds after)"
cargo build --locked --quiet --workspace --bins --examples --lib
top=$PWD
work=$(mktemp -d /tmp/nvct-demo.XXXXXX)
trap 'runc delete -f nvct-demo >/dev/null 2>&1 || true; runc delete -f nvct-demo-shim >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

step "creating a simulated 8-GPU host in $work/host (stub driver libraries, device nodes, /proc files; seconds)"
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
step "runc run with NVIDIA_VISIBLE_DEVICES=0,2 and our prestart hook (under a second)"
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

# The same request through the runtime shim, as an engine runs it: `nvidia-ctk runtime
# configure` registers the runtime (here in a scratch daemon.json), and the shim's `create`
# adds the hook and the device rules before runc starts the container.
echo
step "nvidia-ctk runtime configure --runtime=docker (a scratch daemon.json)"
"$top/target/debug/nvidia-ctk" runtime configure --runtime=docker --config "$work/daemon.json" \
  --nvidia-runtime-path "$top/target/debug/nvidia-container-runtime" -q
cat "$work/daemon.json"
cat >> "$work/config.toml" <<TOML
[nvidia-container-runtime]
mode = "legacy"
runtimes = ["runc"]
[nvidia-container-runtime-hook]
path = "$top/target/debug/nvidia-container-runtime-hook"
TOML
python3 - "$work/bundle/config.json" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec.pop("hooks", None)  # the shim adds it
spec["process"]["args"] = ["sh", "-c", "ls /dev/nvidia*; cat /dev/nvidia1 2>&1; true"]
json.dump(spec, open(sys.argv[1], "w"), indent=2)
PY
step "the same request through the runtime shim: nvidia-container-runtime create + runc start (legacy mode)"
NVIDIA_CTK_CONFIG_FILE_PATH="$work/config.toml" "$top/target/debug/nvidia-container-runtime" \
  create --bundle "$work/bundle" nvct-demo-shim > "$work/shim-out.txt" 2>&1
runc start nvct-demo-shim
while [ "$(runc state nvct-demo-shim 2>/dev/null | sed -n 's/.*"status": "\([a-z]*\)".*/\1/p')" != stopped ]; do sleep 0.05; done
runc delete nvct-demo-shim
cat "$work/shim-out.txt"
rules=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len([r for r in d["linux"]["resources"]["devices"] if r.get("allow")]))' "$work/bundle/config.json")
echo "== the shim wrote the prestart hook and $rules device rules into config.json"
echo "   (the container asked for GPUs 0 and 2 only: /dev/nvidia1 is absent, so cat cannot open it)"
echo
echo "== done in $((SECONDS - start))s. To try next:"
echo "   scripts/test.sh                       the whole suite (real runc, containerd, podman, docker; installs them)"
echo "   target/debug/nvidia-ctk cdi generate --driver-root DIR --dev-root DIR --proc-root DIR"
echo "                                         a CDI spec of a (simulated) host: target/debug/examples/fake_host --gpus 8 DIR"
echo "   target/debug/nvidia-ctk doctor        on a real GPU node: what is wrong and how to fix it"
echo '   README.md "On a GPU node"             install and wire the toolkit into docker, containerd or CRI-O'
