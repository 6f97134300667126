# Issue 39's CRI cases for guest/phase.sh (sourced by it: must, fail, wait_for, probe,
# expect_gpu0, remove_nvidia_char_links, probe_across_reload and $share, $fake come from it).
# A CRI client in the guest: tests/cri/cri.py (copied to the share by run.sh) over Debian's
# python3-grpcio 1.51 and python3-protobuf 3.21 (the module 4.21.12), its stubs generated here
# from tests/cri/runtime_v1.proto by Debian's python3-grpc-tools 1.14 (an older protoc, whose
# generated code protobuf 4.21 still loads; it needs python3-pkg-resources), as the kubelet
# talks to containerd's CRI plugin.
#
# The node's own drop-in /etc/containerd/conf.d/20-site.toml holds the site's CRI table: a
# sandbox image of its own, and SystemdCgroup = true for runc (a kubeadm node on systemd);
# `nvidia-ctk runtime configure` copies that table into its drop-in (containerd 1.6 takes the
# whole CRI table from the last imported file), the nvidia handler inheriting runc's options.
# Both cases leave the node as containerd/cri left it: no site drop-in, the drop-in derived
# again, the dropin unit disabled, containerd restarted.
cri_dir=/var/lib/nvct-cri
cri_sock=/run/containerd/containerd.sock
cri_site=/etc/containerd/conf.d/20-site.toml

# One CRI call: cri_call Service.Method JSON; the response (JSON) on stdout.
cri_call() {
  python3 "$share/guest/cri.py" "$cri_dir/stubs" "$cri_sock" "$1" <<<"$2"
}
# A field of a JSON document on stdin: cri_get 'd["pod_sandbox_id"]'.
cri_get() {
  python3 -c 'import json, sys; d = json.load(sys.stdin); v = '"$1"'; print(v if isinstance(v, str) else json.dumps(v))'
}
# An OCI image archive of the busybox rootfs (guest/phase.sh's make_rootfs) plus
# /etc/nvct-image holding $2, entrypoint `sleep 3600` (a sandbox's process), named $1.
cri_image_archive() {
  local name=$1 marker=$2 out=$3 work
  work=$(mktemp -d)
  mkdir -p "$work/rootfs"
  tar -C "$work/rootfs" -xf /var/lib/nvct-rootfs.tar
  mkdir -p "$work/rootfs/etc"
  echo "$marker" >"$work/rootfs/etc/nvct-image"
  tar --numeric-owner --owner=0 --group=0 -C "$work/rootfs" -cf "$work/layer.tar" .
  python3 - "$work" "$name" "$out" <<'EOF' || return 1
import hashlib, json, os, sys, tarfile
work, name, out = sys.argv[1:4]
layout = os.path.join(work, "oci")
os.makedirs(os.path.join(layout, "blobs/sha256"))
def blob(data):
    h = hashlib.sha256(data).hexdigest()
    open(os.path.join(layout, "blobs/sha256", h), "wb").write(data)
    return {"digest": "sha256:" + h, "size": len(data)}
layer = blob(open(os.path.join(work, "layer.tar"), "rb").read())
config = blob(json.dumps({"architecture": "amd64", "os": "linux",
    "config": {"Env": ["PATH=/bin"], "Entrypoint": ["/bin/sleep"], "Cmd": ["3600"]},
    "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}).encode())
manifest = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
    "layers": [dict(layer, mediaType="application/vnd.oci.image.layer.v1.tar")]}).encode())
index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [dict(manifest, mediaType="application/vnd.oci.image.manifest.v1+json",
        platform={"architecture": "amd64", "os": "linux"},
        annotations={"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]})]}
open(os.path.join(layout, "index.json"), "w").write(json.dumps(index))
open(os.path.join(layout, "oci-layout"), "w").write('{"imageLayoutVersion":"1.0.0"}')
with tarfile.open(out, "w") as t:
    for f in ("oci-layout", "index.json", "blobs"):
        t.add(os.path.join(layout, f), arcname=f)
EOF
  rm -rf "$work"
}
# The site drop-in, its sandbox image example.org/nvct-pause:$1.
cri_site_toml() {
  cat >"$cri_site" <<EOF
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "example.org/nvct-pause:$1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
EOF
  echo "--- $cri_site"
  cat "$cri_site"
}
# Waits for the CRI plugin to answer after a (re)start of containerd.
cri_wait() {
  must wait_for 30 ctr version
  wait_for 30 cri_call RuntimeService.Version '{"version": "v1"}' || fail "the CRI does not answer"
}
# The stubs, the images (both pause tags and the container image), the site drop-in
# (pause:1, SystemdCgroup), configure, restart: once per boot.
cri_setup() {
  [ -e /run/nvct-cri-setup ] && return 0
  must mkdir -p "$cri_dir/stubs" "$cri_dir/pods"
  must python3 -c 'import grpc, google.protobuf; print("grpcio", grpc.__version__, "protobuf", google.protobuf.__version__)'
  # The suite's proto plus the pod's cgroup_parent (LinuxPodSandboxConfig field 1): with
  # SystemdCgroup the CRI plugin gives a container a systemd cgroupsPath
  # (`SLICE:cri-containerd:ID`) only under a parent that is a slice, as the kubelet's are.
  sed 's/^message LinuxPodSandboxConfig {$/&\n  string cgroup_parent = 1;/' "$share/guest/runtime_v1.proto" >"$cri_dir/runtime_v1.proto"
  grep -A3 '^message LinuxPodSandboxConfig' "$cri_dir/runtime_v1.proto"
  must python3 -m grpc_tools.protoc -I "$cri_dir" --python_out="$cri_dir/stubs" \
    --grpc_python_out="$cri_dir/stubs" "$cri_dir/runtime_v1.proto"
  cri_site_toml 1
  must nvidia-ctk runtime configure --runtime=containerd
  echo "--- /etc/containerd/conf.d/99-nvidia.toml"
  cat /etc/containerd/conf.d/99-nvidia.toml
  must systemctl restart containerd
  cri_wait
  local n
  for n in 1 2; do
    must cri_image_archive "example.org/nvct-pause:$n" "pause-$n" "$cri_dir/pause-$n.tar"
    must ctr -n k8s.io images import --all-platforms "$cri_dir/pause-$n.tar"
  done
  local st
  for n in 1 2; do
    for _ in $(seq 30); do
      st=$(cri_call ImageService.ImageStatus "{\"image\": {\"image\": \"example.org/nvct-pause:$n\"}}")
      grep -q '"image"' <<<"$st" && break
      sleep 1
    done
    echo "ImageStatus pause:$n: $st"
    grep -q '"image"' <<<"$st" || fail "the CRI does not see example.org/nvct-pause:$n"
  done
  touch /run/nvct-cri-setup
}
# Back as containerd/cri left it.
cri_restore() {
  rm -f "$cri_site"
  nvidia-ctk runtime configure --runtime=containerd --refresh-drop-in
  systemctl disable nvidia-containerd-dropin.service 2>&1
  systemctl restart containerd
  wait_for 30 ctr version >/dev/null
  rm -f /run/nvct-cri-setup
}
# A pod (host network) with handler $2: its id on stdout.
cri_pod() {
  local name=$1 handler=$2 r
  mkdir -p "$cri_dir/pods/$name"
  r=$(cri_call RuntimeService.RunPodSandbox "{\"config\": {\"metadata\": {\"name\": \"$name\", \"uid\": \"nvct-$name-$$\", \"namespace\": \"default\", \"attempt\": 0}, \"log_directory\": \"$cri_dir/pods/$name\", \"linux\": {\"cgroup_parent\": \"system.slice\", \"security_context\": {\"namespace_options\": {\"network\": \"NODE\"}}}}, \"runtime_handler\": \"$handler\"}") ||
    { journalctl -u containerd -b --no-pager --since=-60s | tail -20 >&2; return 1; }
  cri_get 'd["pod_sandbox_id"]' <<<"$r"
}
cri_pod_remove() {
  cri_call RuntimeService.StopPodSandbox "{\"pod_sandbox_id\": \"$1\"}" >/dev/null
  cri_call RuntimeService.RemovePodSandbox "{\"pod_sandbox_id\": \"$1\"}" >/dev/null
}
# An exec into a CRI container through containerd (our CRI subset has no ExecSync).
cri_exec() {
  ctr -n k8s.io tasks exec --exec-id "nvct-$RANDOM$RANDOM" "$@"
}

# (1) A pod with runtime handler nvidia, SystemdCgroup = true for it, its container asking for
# GPU 0 by NVIDIA_VISIBLE_DEVICES=0 (the shim in legacy mode: the prestart hook writes the
# device rules and asks systemd to keep them), no /dev/char links: /dev/nvidia0 opens before
# and after `systemctl daemon-reload`.
cri_pod_systemd_cgroup_reload() {
  local cfg=/etc/nvidia-container-runtime/config.toml log=/var/log/nvct-cri-hook.log
  local pod cid r rc=0 dump
  cri_setup
  echo "+ containerd config dump (the nvidia handler's options)"
  dump=$(containerd config dump 2>&1)
  sed -n '/runtimes.nvidia.options\]/,/^$/p' <<<"$dump"
  sed -n '/runtimes.nvidia.options\]/,/^$/p' <<<"$dump" | grep -qE '^\s*SystemdCgroup = true' ||
    fail "the nvidia handler does not have SystemdCgroup = true"
  remove_nvidia_char_links
  pod=$(cri_pod gpu-systemd nvidia) || fail "RunPodSandbox (handler nvidia) failed"
  echo "pod $pod"
  must cp "$cfg" "$cfg.nvct-saved"
  must nvidia-ctk config --config-file "$cfg" --in-place --set "nvidia-container-cli.debug=$log"
  rm -f "$log"
  r=$(cri_call RuntimeService.CreateContainer "{\"pod_sandbox_id\": \"$pod\", \"config\": {\"metadata\": {\"name\": \"gpu\", \"attempt\": 0}, \"image\": {\"image\": \"example.org/nvct-pause:1\"}, \"command\": [\"/bin/sleep\", \"3600\"], \"envs\": [{\"key\": \"NVIDIA_VISIBLE_DEVICES\", \"value\": \"0\"}], \"log_path\": \"gpu.log\"}, \"sandbox_config\": {\"metadata\": {\"name\": \"gpu-systemd\", \"uid\": \"nvct-gpu-systemd-$$\", \"namespace\": \"default\", \"attempt\": 0}, \"log_directory\": \"$cri_dir/pods/gpu-systemd\", \"linux\": {\"cgroup_parent\": \"system.slice\", \"security_context\": {\"namespace_options\": {\"network\": \"NODE\"}}}}}") || rc=$?
  [ "$rc" -eq 0 ] && cid=$(cri_get 'd["container_id"]' <<<"$r") &&
    cri_call RuntimeService.StartContainer "{\"container_id\": \"$cid\"}" >/dev/null || rc=1
  must mv "$cfg.nvct-saved" "$cfg"
  [ "$rc" -eq 0 ] || { hook_journal; journalctl -u containerd -b --no-pager --since=-60s | tail -20; cri_pod_remove "$pod"; fail "CreateContainer/StartContainer failed"; }
  echo "container $cid: $(cri_call RuntimeService.ContainerStatus "{\"container_id\": \"$cid\"}")"
  echo "--- the prestart hook's log"
  cat "$log" 2>&1
  local scope=cri-containerd-$cid.scope
  echo "$scope DeviceAllow: $(systemctl show "$scope" -p DeviceAllow --value 2>&1)"
  echo "its cgroup: $(systemctl show "$scope" -p ControlGroup --value 2>&1)"
  grep -q "keeps the .* over D-Bus" "$log" || { cri_pod_remove "$pod"; fail "the hook did not ask systemd (over D-Bus) to keep the device rules"; }
  ( probe_across_reload cri_exec "$cid" ) || rc=$?
  cri_pod_remove "$pod"
  [ "$rc" -eq 0 ] || fail "the pod's container lost /dev/nvidia0 (or never had it)"
}

# (2) The site drop-in's sandbox_image edited after configure takes effect at
# `systemctl restart containerd`: the package's nvidia-containerd-dropin.service (enabled, as
# its unit says) re-derives the NVIDIA drop-in before containerd starts.
cri_sandbox_of() {
  local pod=$1 pid info
  info=$(ctr -n k8s.io containers info "$pod" 2>&1)
  echo "containers info Image: $(grep -m1 '"Image"' <<<"$info")" >&2
  pid=$(ctr -n k8s.io tasks ls 2>/dev/null | awk -v id="$pod" '$1 == id {print $2}')
  echo "sandbox task pid: ${pid:-none}" >&2
  [ -n "$pid" ] && cat "/proc/$pid/root/etc/nvct-image"
}
cri_sandbox_image_edit() {
  local pod seen cfgimg
  cri_setup
  pod=$(cri_pod sandbox-1 runc) || fail "RunPodSandbox failed"
  seen=$(cri_sandbox_of "$pod")
  cri_pod_remove "$pod"
  echo "the pod's sandbox before the edit: $seen"
  [ "$seen" = pause-1 ] || fail "the sandbox before the edit is not example.org/nvct-pause:1 ($seen)"
  cri_site_toml 2
  must systemctl enable nvidia-containerd-dropin.service
  must systemctl restart containerd
  cri_wait
  journalctl -b --no-pager -u nvidia-containerd-dropin.service | tail -5
  cfgimg=$(cri_call RuntimeService.Status '{"verbose": true}' | cri_get 'json.loads(d["info"]["config"])["sandboxImage"]')
  echo "the CRI's sandboxImage: $cfgimg"
  pod=$(cri_pod sandbox-2 runc) || fail "RunPodSandbox after the edit failed"
  seen=$(cri_sandbox_of "$pod")
  cri_pod_remove "$pod"
  echo "the pod's sandbox after the edit: $seen"
  [ "$cfgimg" = example.org/nvct-pause:2 ] || fail "the CRI's sandboxImage is $cfgimg after the edit and a restart"
  [ "$seen" = pause-2 ] || fail "the pod's sandbox is not example.org/nvct-pause:2 after the edit and a restart ($seen)"
}
# The case: its checks, then the node restored whatever they said.
cri_sandbox_image_after_edit() {
  local rc=0
  (cri_sandbox_image_edit) || rc=$?
  echo "--- restoring the node (no site drop-in, the drop-in derived again, containerd restarted)"
  cri_restore
  [ "$rc" -eq 0 ] || exit "$rc"
}
