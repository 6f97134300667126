#!/usr/bin/env bash
# The real-host phase's checks, run inside the Debian 12 guest at boot by nvct-realhost.service
# (scripts/realhost/run.sh boots the VM; tests/realhost.rs asserts on what this writes).
#
# Reads the 9p share at /mnt/nvct: bin/ (this build's tools, bin/examples/fake_host and the
# fake NVML next to it), deb/ (the .deb of scripts/package.sh). Writes /mnt/nvct/out:
#   results.tsv    one line per check: NAME<TAB>PASS|FAIL<TAB>SECONDS
#   cases/NAME.log each check's commands and output (NAME with / turned into _)
#   timing         boot_s (the guest's uptime when this started), checks_s
#   journal.txt    the guest's journal of this boot, at the end
#   finished       written last: its absence means the phase did not run to the end
# The unit powers the VM off when this exits, whatever the checks said.
set -uo pipefail
share=/mnt/nvct
out=$share/out
mkdir -p "$out/cases"
# The phase spans two boots (section 6 reboots the guest): which one this is, counted on the
# guest's disk (-snapshot keeps it for the life of the qemu process, across the reboot).
stage=/var/lib/nvct-phase
mkdir -p "$stage"
boot=$(($(cat "$stage/boots" 2>/dev/null || echo 0) + 1))
echo "$boot" >"$stage/boots"
if [ "$boot" -eq 1 ]; then
  : >"$out/results.tsv"
  echo "boot_s $(cut -d' ' -f1 /proc/uptime)" >"$out/timing"
else
  echo "reboot_s $(cut -d' ' -f1 /proc/uptime)" >>"$out/timing"
fi
start=$(date +%s)
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
fake=/var/lib/nvct-fake
rootfs_dir=/var/lib/nvct-rootfs
user=nvctuser

say() { echo "phase: $*"; }
# Inside a check: run a command shown in the log; a failure ends the check.
must() {
  echo "+ $*"
  "$@" || fail "exit $?: $*"
}
fail() {
  echo "CHECK FAILED: $*"
  exit 1
}
# check NAME FUNCTION: runs FUNCTION in a subshell (a `fail` ends only it), its output in
# cases/NAME.log, and one result line.
check() {
  local name=$1 fn=$2 rc=0 t0=$SECONDS
  say "check $name"
  (set +e; "$fn") >"$out/cases/${name//\//_}.log" 2>&1 </dev/null || rc=$?
  local verdict=PASS
  [ "$rc" -eq 0 ] || verdict=FAIL
  printf '%s\t%s\t%s\n' "$name" "$verdict" "$((SECONDS - t0))" >>"$out/results.tsv"
  say "$name: $verdict"
}
# Waits up to $1 seconds for a command to succeed.
wait_for() {
  local secs=$1
  shift
  for _ in $(seq "$secs"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 1
  done
  "$@"
}
# The container script: lists /dev, opens /dev/nvidia0 (a fake node: the open fails with
# ENXIO, "No such device or address", when the device cgroup allows it, EPERM when not), and
# says whether the driver's libcuda is in the container and in its ld cache.
probe='ls /dev; echo ---; cat /dev/nvidia0; ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 && echo LIBCUDA; grep -q libcuda.so.1 /etc/ld.so.cache && echo CACHED; true'
# The probe's output says the container got GPU 0 and may open it.
expect_gpu0() {
  echo "$1"
  grep -qx 'nvidia0' <<<"$(sed -n '1,/^---$/p' <<<"$1")" || fail "/dev/nvidia0 is not in the container"
  grep -q "can't open '/dev/nvidia0': No such device or address" <<<"$1" ||
    fail "the container cannot open /dev/nvidia0 (ENXIO expected from the fake node: the device cgroup refused it, or the node is missing)"
  grep -qx LIBCUDA <<<"$1" || fail "libcuda.so.1 is not in the container"
}

# --- setup: the fake GPU host (on the local disk: mknod), the toolkit installed and pointed
# at it, a busybox rootfs and image. A failed setup is a check of its own.
setup_fake_host() {
  must rm -rf "$fake"
  must "$share/bin/examples/fake_host" --gpus 8 "$fake"
  # The nodes also at the guest's /dev, as on a real node: rootless crun bind-mounts a device
  # from the host path the spec's container path names (the OCI spec has no host path).
  must cp -an "$fake/driver/dev/." /dev/
  must ls -l /dev/nvidia0 /dev/nvidiactl
}
install_deb() {
  local deb
  deb=$(ls "$share"/deb/*.deb) || fail "no .deb in $share/deb"
  must dpkg -i "$deb"
  for unit in nvidia-cdi-refresh.service nvidia-cdi-refresh.path; do
    must test -f "/usr/lib/systemd/system/$unit"
    must systemctl cat "$unit"
  done
  # The operator's step (the package enables nothing today); harmless once it does.
  must systemctl enable --now nvidia-cdi-refresh.path
  must systemctl is-active nvidia-cdi-refresh.path
  must systemctl is-enabled nvidia-cdi-refresh.path
}
point_config_at_fake_host() {
  local cfg=/etc/nvidia-container-runtime/config.toml
  must test -f "$cfg"
  must nvidia-ctk config --config-file "$cfg" --in-place \
    --set "nvidia-container-cli.root=$fake/driver" --set "nvidia-container-cli.proc-root=$fake/proc"
  must grep -A3 '^\[nvidia-container-cli\]' "$cfg"
}
make_rootfs() {
  must rm -rf "$rootfs_dir"
  mkdir -p "$rootfs_dir"/{bin,etc,dev,proc,sys,tmp,usr/lib/x86_64-linux-gnu}
  must cp /bin/busybox "$rootfs_dir/bin/busybox"
  for applet in sh ls cat echo grep sed head sleep true; do
    ln -s busybox "$rootfs_dir/bin/$applet"
  done
  must tar -C "$rootfs_dir" -cf /var/lib/nvct-rootfs.tar .
}
# A fresh copy of the rootfs (podman --rootfs runs it in place; the CDI hooks write into it),
# owned by $2 when given.
fresh_rootfs() {
  local dir=$1
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -C "$dir" -xf /var/lib/nvct-rootfs.tar
  [ -z "${2:-}" ] || chown -R "$2" "$dir"
}
generate_spec() {
  must mkdir -p /etc/cdi
  must nvidia-ctk cdi generate --driver-root "$fake/driver" --dev-root "$fake/driver" \
    --proc-root "$fake/proc" --output /etc/cdi/nvidia.yaml
  must nvidia-ctk cdi list
}

# --- (1) containerd: `runtime configure` on Debian's stock config keeps the CRI plugin.
containerd_cri() {
  local cfg=/etc/containerd/config.toml
  echo "--- Debian's stock $cfg"
  cat "$cfg" || echo "(none)"
  must nvidia-ctk runtime configure --runtime=containerd
  for f in /etc/containerd/conf.d/*.toml; do
    [ -f "$f" ] && { echo "--- $f"; cat "$f"; }
  done
  must systemctl restart containerd
  must wait_for 30 ctr version
  echo "+ ctr plugins ls"
  local plugins
  plugins=$(ctr plugins ls 2>&1)
  echo "$plugins"
  grep -E '^io\.containerd\.grpc\.v1[[:space:]]+cri[[:space:]]' <<<"$plugins" | grep -qw ok ||
    { journalctl -u containerd -b --no-pager | tail -20; fail "the CRI plugin (io.containerd.grpc.v1 cri) did not load"; }
  echo "+ containerd config dump"
  local dump
  dump=$(containerd config dump 2>&1) || fail "containerd config dump: $dump"
  echo "$dump" | sed -n '/io.containerd.grpc.v1.cri".containerd\]/,/^  \[plugins."io.containerd.grpc.v1.cri".image/p'
  grep -qE '^\s*default_runtime_name = "runc"' <<<"$dump" || fail "runc is not the default runtime"
  grep -qF '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]' <<<"$dump" || fail "the runc runtime is gone"
  grep -qF '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' <<<"$dump" || fail "no nvidia runtime"
}

# --- (2) podman with CDI: root under crun and runc, rootless under crun (also keep-id).
podman_root() {
  local runtime=$1 dir=/var/lib/nvct-podman-$1
  fresh_rootfs "$dir"
  echo "+ podman run --runtime $runtime --device nvidia.com/gpu=0"
  local o
  o=$(podman run --rm --runtime "$runtime" --network none --device nvidia.com/gpu=0 \
    --rootfs "$dir" sh -c "$probe" 2>&1) || { hook_journal; fail "podman: $o"; }
  expect_gpu0 "$o"
}
podman_crun_root() { podman_root crun; }
podman_runc_root() { podman_root runc; }
# crun throws hook stderr away: what the journal has of the hooks' last minute.
hook_journal() {
  echo "--- journal (hooks, last minute)"
  journalctl -b --no-pager --since=-60s 2>&1 | grep -iE 'nvidia|hook|crun|conmon' | tail -n 30
}
as_user() {
  local uid
  uid=$(id -u "$user")
  runuser -u "$user" -- env HOME="/home/$user" XDG_RUNTIME_DIR="/run/user/$uid" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
}
podman_rootless() {
  local extra=("$@") dir
  dir=/home/$user/rootfs-$RANDOM
  grep -q "^$user:" /etc/subuid || must usermod --add-subuids 100000-165535 --add-subgids 100000-165535 "$user"
  must loginctl enable-linger "$user"
  must wait_for 30 test -S "/run/user/$(id -u "$user")/bus"
  fresh_rootfs "$dir" "$user:$user"
  echo "+ (as $user) podman run --runtime crun ${extra[*]} --device nvidia.com/gpu=0"
  local o
  o=$(as_user podman run --rm --runtime crun "${extra[@]}" --network none --device nvidia.com/gpu=0 \
    --rootfs "$dir" sh -c "$probe" 2>&1) || { hook_journal; fail "podman: $o"; }
  expect_gpu0 "$o"
}
# The shim in legacy mode under crun (systemd cgroup driver, cgroup v2): it writes the device
# rules into config.json and adds the prestart hook, crun applies the rules before it runs the
# hook, so the hook leaves the device cgroup alone (its debug log says so) and the GPU opens.
# podman runs with an empty hooks dir: the package's hooks.d file would add the hook first, and
# the shim leaves a spec that has its hook as it is (no rules; the hook writes them then).
podman_crun_legacy_shim() {
  local cfg=/etc/nvidia-container-runtime/config.toml dir=/var/lib/nvct-podman-legacy
  local log=/var/log/nvct-legacy-hook.log o rc=0
  must cp "$cfg" "$cfg.nvct-saved"
  must nvidia-ctk config --config-file "$cfg" --in-place \
    --set nvidia-container-runtime.mode=legacy --set nvidia-container-runtime.runtimes=crun \
    --set "nvidia-container-cli.debug=$log"
  rm -f "$log"
  fresh_rootfs "$dir"
  podman rm -f nvct-legacy >/dev/null 2>&1
  must mkdir -p /var/lib/nvct-no-hooks
  echo "+ podman --hooks-dir (empty) run --runtime /usr/bin/nvidia-container-runtime -e NVIDIA_VISIBLE_DEVICES=0"
  o=$(podman --hooks-dir /var/lib/nvct-no-hooks run --name nvct-legacy \
    --runtime /usr/bin/nvidia-container-runtime --network none \
    -e NVIDIA_VISIBLE_DEVICES=0 --rootfs "$dir" sh -c "$probe" 2>&1) || rc=$?
  must mv "$cfg.nvct-saved" "$cfg"
  local id
  id=$(podman inspect --format '{{.Id}}' nvct-legacy 2>/dev/null)
  echo "--- config.json's device list and prestart hooks, as the shim left them"
  tr -d '\n' <"/var/lib/containers/storage/overlay-containers/$id/userdata/config.json" |
    grep -oE '"(devices|prestart)": ?\[[^]]*\]' 2>&1
  podman rm -f nvct-legacy >/dev/null 2>&1
  echo "--- the prestart hook's log"
  cat "$log" 2>&1
  [ "$rc" -eq 0 ] || { hook_journal; fail "podman: $o"; }
  expect_gpu0 "$o"
  grep -q "not written again" "$log" ||
    fail "the hook wrote the device rules although config.json had them (or did not run)"
}
podman_crun_rootless() { podman_rootless; }
podman_crun_rootless_keep_id() { podman_rootless --userns=keep-id; }

# --- (3) docker --gpus, before and after `systemctl daemon-reload`.
# The README's node step for docker: register the runtime, restart docker (dockerd also looks
# for nvidia-container-runtime-hook, the `--gpus` driver, only when it starts).
docker_setup() {
  if [ ! -e /run/nvct-docker-configured ]; then
    must nvidia-ctk runtime configure --runtime=docker
    must cat /etc/docker/daemon.json
    must systemctl restart docker
    touch /run/nvct-docker-configured
  fi
  must wait_for 60 docker info
  docker image inspect nvct-busybox:1 >/dev/null 2>&1 || must docker import /var/lib/nvct-rootfs.tar nvct-busybox:1
}
docker_gpus() {
  docker_setup
  local o
  o=$(docker run --rm --network none --gpus device=0 nvct-busybox:1 sh -c "$probe" 2>&1) || fail "docker run: $o"
  expect_gpu0 "$o"
}
docker_gpus_after_daemon_reload() {
  local cfg=/etc/nvidia-container-runtime/config.toml log=/var/log/nvct-reload-hook.log
  docker_setup
  # The /dev/char links upstream and doctor advise for the systemd cgroup driver: in the
  # guest's /dev (where systemd resolves them; the fake nodes are copied there) and under the
  # fake driver root (where doctor, configured with that root, looks); on a real node whose
  # driver root is / the two are one.
  must nvidia-ctk system create-dev-char-symlinks --create-all --proc-root "$fake/proc"
  must nvidia-ctk system create-dev-char-symlinks --create-all --proc-root "$fake/proc" --dev-root "$fake/driver"
  must ls -l /dev/char/195:0
  docker rm -f nvct-reload >/dev/null 2>&1
  # The hook's debug log, for this one start: its step timings and its systemd line (that it
  # asked systemd to keep the rules over D-Bus, not through systemctl, and how long it took).
  must cp "$cfg" "$cfg.nvct-saved"
  must nvidia-ctk config --config-file "$cfg" --in-place --set "nvidia-container-cli.debug=$log"
  rm -f "$log"
  local rc=0
  echo "+ docker run -d --name nvct-reload --network none --gpus device=0 nvct-busybox:1 sleep 3600"
  docker run -d --name nvct-reload --network none --gpus device=0 nvct-busybox:1 sleep 3600 || rc=$?
  must mv "$cfg.nvct-saved" "$cfg"
  [ "$rc" -eq 0 ] || { hook_journal; fail "docker run: exit $rc"; }
  echo "--- the prestart hook's log"
  cat "$log" 2>&1
  grep -q "keeps the .* GPU device rule" "$log" ||
    fail "the hook did not ask systemd to keep the device rules (its log above says why)"
  grep -q "keeps the .* over D-Bus" "$log" ||
    fail "the hook's D-Bus call to systemd failed and systemctl did it (its log above says why)"
  local o
  probe_across_reload docker exec nvct-reload
  docker rm -f nvct-reload >/dev/null 2>&1
}

# --- (3b) systemd and the device rules, on paths other than docker --gpus.
# An OCI bundle of the busybox rootfs at $1 (id $2): cgroupsPath $3, the process $4 (a shell
# line), NVIDIA_VISIBLE_DEVICES=0, and the prestart hook when $5 is "hook".
oci_bundle() {
  local dir=$1 cgroups=$3 script=$4 hooks=''
  fresh_rootfs "$dir/rootfs"
  [ "${5:-}" != hook ] || hooks='"hooks": {"prestart": [{"path": "/usr/bin/nvidia-container-runtime-hook", "args": ["nvidia-container-runtime-hook", "prestart"], "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}]},'
  cat >"$dir/config.json" <<EOF
{"ociVersion": "1.0.2",
 "process": {"terminal": false, "user": {"uid": 0, "gid": 0}, "cwd": "/",
   "args": ["sh", "-c", "$script"], "env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=0"]},
 "root": {"path": "rootfs"}, "hostname": "nvct",
 "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755", "size=65536k"]}],
 $hooks
 "linux": {"cgroupsPath": "$cgroups",
   "namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "ipc"}, {"type": "uts"}],
   "resources": {"devices": [{"allow": false, "access": "rwm"}]}}}
EOF
}
# Removes the /dev/char links to NVIDIA nodes (a node whose driver nodes were made with mknod
# has none): runc then hands systemd none of the GPU rules, and only our request keeps them.
remove_nvidia_char_links() {
  local l
  for l in /dev/char/*; do
    case "$(readlink "$l")" in *nvidia*) rm -f "$l" ;; esac
  done
  echo "NVIDIA /dev/char links left: $(find /dev/char -lname '*nvidia*' | wc -l)"
}
# Runs the probe through `$@` (an exec into a running container) before and after a
# `systemctl daemon-reload`: the container must open /dev/nvidia0 both times.
probe_across_reload() {
  local o
  o=$("$@" sh -c "$probe" 2>&1)
  echo "--- before daemon-reload"
  expect_gpu0 "$o"
  must systemctl daemon-reload
  sleep 2
  o=$("$@" sh -c "$probe" 2>&1)
  echo "--- after daemon-reload"
  expect_gpu0 "$o"
}
# A container whose cgroup is another unit's scope (a cgroupfs cgroupsPath ending in a login
# session's or a service's scope): the hook must not ask systemd to add DeviceAllow= to it
# (that would close the unit to the GPU and systemd's static list). Under runc and crun.
foreign_scope() {
  local rt=$1 dir=/var/lib/nvct-foreign-$1 id=nvct-foreign-$1 log=/var/log/nvct-foreign-hook.log
  local cfg=/etc/nvidia-container-runtime/config.toml o rc=0 allow
  systemctl stop nvct-victim.scope >/dev/null 2>&1
  systemd-run --unit=nvct-victim --scope -- sleep 600 >/dev/null 2>&1 &
  must wait_for 10 systemctl is-active nvct-victim.scope
  must systemctl show nvct-victim.scope -p DevicePolicy -p DeviceAllow
  oci_bundle "$dir" "$id" /system.slice/nvct-victim.scope "$probe" hook
  must cp "$cfg" "$cfg.nvct-saved"
  must nvidia-ctk config --config-file "$cfg" --in-place --set "nvidia-container-cli.debug=$log"
  rm -f "$log"
  echo "+ $rt (cgroupfs) run, cgroupsPath /system.slice/nvct-victim.scope"
  case $rt in
    runc) o=$(runc run --bundle "$dir" "$id" 2>&1 </dev/null) || rc=$? ;;
    crun) o=$(crun --cgroup-manager=cgroupfs run --bundle "$dir" "$id" 2>&1 </dev/null) || rc=$? ;;
  esac
  must mv "$cfg.nvct-saved" "$cfg"
  "$rt" delete -f "$id" >/dev/null 2>&1
  echo "--- the prestart hook's log"
  cat "$log" 2>&1
  allow=$(systemctl show nvct-victim.scope -p DeviceAllow --value)
  echo "nvct-victim.scope DeviceAllow after: '${allow}'"
  systemctl stop nvct-victim.scope >/dev/null 2>&1
  [ "$rc" -eq 0 ] || { hook_journal; fail "$rt run: $o"; }
  expect_gpu0 "$o"
  [ -z "$allow" ] || fail "the hook added DeviceAllow= to a scope that is not the container's: $allow"
  grep -q "not the container's own" "$log" || fail "the hook's log does not say it left the foreign scope alone"
}
foreign_scope_runc() { foreign_scope runc; }
foreign_scope_crun() { foreign_scope crun; }
# The shim in legacy mode under runc's systemd cgroup driver, no /dev/char links: runc applies
# the shim's device rules (from config.json) and hands systemd none of them; the hook asks
# systemd to keep them anyway, so the GPU stays after a daemon-reload.
shim_systemd_reload() {
  local dir=/var/lib/nvct-shim-reload id=nvct-shim-reload log=/var/log/nvct-shim-reload-hook.log
  local cfg=/etc/nvidia-container-runtime/config.toml o rc=0
  remove_nvidia_char_links
  oci_bundle "$dir" "$id" "system.slice:nvct:$id" "sleep 3600"
  must cp "$cfg" "$cfg.nvct-saved"
  must nvidia-ctk config --config-file "$cfg" --in-place \
    --set nvidia-container-runtime.mode=legacy --set nvidia-container-runtime.runtimes=runc \
    --set "nvidia-container-cli.debug=$log"
  rm -f "$log"
  runc --systemd-cgroup delete -f "$id" >/dev/null 2>&1
  echo "+ nvidia-container-runtime --systemd-cgroup create; runc start"
  nvidia-container-runtime --systemd-cgroup create --bundle "$dir" "$id" </dev/null >/dev/null 2>"$dir/create.err" || rc=$?
  must mv "$cfg.nvct-saved" "$cfg"
  cat "$dir/create.err"
  [ "$rc" -eq 0 ] || { hook_journal; fail "create: exit $rc"; }
  must runc --systemd-cgroup start "$id"
  echo "--- the prestart hook's log"
  cat "$log" 2>&1
  o=$(runc --systemd-cgroup exec "$id" sh -c "$probe" 2>&1)
  echo "--- before daemon-reload"
  expect_gpu0 "$o"
  grep -q "keeps the .* over D-Bus" "$log" || { runc --systemd-cgroup delete -f "$id"; fail "the hook did not ask systemd to keep the rules the shim put in config.json"; }
  must systemctl daemon-reload
  sleep 2
  o=$(runc --systemd-cgroup exec "$id" sh -c "$probe" 2>&1)
  echo "--- after daemon-reload"
  runc --systemd-cgroup delete -f "$id" >/dev/null 2>&1
  expect_gpu0 "$o"
}
# podman with CDI (`--device nvidia.com/gpu=0`) under runc or crun and the systemd cgroup
# driver, no /dev/char links: the runtime hands systemd none of the spec's NVIDIA rules; the
# spec's createRuntime hook `keep-device-rules` asks systemd to keep them, so the GPU stays
# after a daemon-reload.
podman_cdi_reload() {
  local rt=$1 dir=/var/lib/nvct-podman-reload-$1 name=nvct-cdi-reload-$1 o
  remove_nvidia_char_links
  grep -q keep-device-rules /etc/cdi/nvidia.yaml || fail "the spec has no keep-device-rules hook (systemd is the init here)"
  fresh_rootfs "$dir"
  podman rm -f "$name" >/dev/null 2>&1
  must podman run -d --name "$name" --runtime "$rt" --network none --device nvidia.com/gpu=0 --rootfs "$dir" sleep 3600
  local id allow
  id=$(podman inspect --format '{{.Id}}' "$name")
  allow=$(systemctl show "libpod-$id.scope" -p DeviceAllow --value 2>&1)
  echo "libpod-$id.scope DeviceAllow: $allow"
  # Under runc the rules systemd holds are the hook's alone (runc skipped the linkless ones).
  if [ "$rt" = runc ]; then
    grep -q '/dev/char/195:0' <<<"$allow" || fail "systemd holds no rule for /dev/nvidia0 (195:0): keep-device-rules did not ask it"
  fi
  echo "--- journal (nvidia-cdi-hook)"
  journalctl -b --no-pager --since=-120s 2>&1 | grep -i 'nvidia-cdi-hook' | tail -n 10
  probe_across_reload podman exec "$name"
  podman rm -f "$name" >/dev/null 2>&1
}
podman_runc_cdi_reload() { podman_cdi_reload runc; }
podman_crun_cdi_reload() { podman_cdi_reload crun; }

# podman's hooks.d (the package's file adds the prestart hook) under runc and the systemd
# cgroup driver, no /dev/char links: the hook writes the rules and asks systemd to keep them.
podman_hooksd_reload() {
  local dir=/var/lib/nvct-podman-hooksd-reload name=nvct-hooksd-reload o
  remove_nvidia_char_links
  fresh_rootfs "$dir"
  podman rm -f "$name" >/dev/null 2>&1
  must podman run -d --name "$name" --runtime runc --network none -e NVIDIA_VISIBLE_DEVICES=0 --rootfs "$dir" sleep 3600
  probe_across_reload podman exec "$name"
  podman rm -f "$name" >/dev/null 2>&1
}
# A bare prestart hook under `runc --systemd-cgroup`, no /dev/char links.
runc_systemd_hook_reload() {
  local dir=/var/lib/nvct-runc-hook-reload id=nvct-runc-hook-reload o
  remove_nvidia_char_links
  oci_bundle "$dir" "$id" "system.slice:nvct:$id" "sleep 3600" hook
  runc --systemd-cgroup delete -f "$id" >/dev/null 2>&1
  must runc --systemd-cgroup run -d --bundle "$dir" "$id" </dev/null >/dev/null 2>"$dir/run.err"
  cat "$dir/run.err"
  probe_across_reload runc --systemd-cgroup exec "$id"
  runc --systemd-cgroup delete -f "$id" >/dev/null 2>&1
}

# docker --runtime=nvidia (the shim; legacy mode for NVIDIA_VISIBLE_DEVICES), no /dev/char
# links, systemd cgroup driver: the GPU stays after a daemon-reload.
docker_runtime_nvidia_after_daemon_reload() {
  docker_setup
  remove_nvidia_char_links
  docker rm -f nvct-rt-reload >/dev/null 2>&1
  must docker run -d --name nvct-rt-reload --network none --runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=0 nvct-busybox:1 sleep 3600
  local o
  probe_across_reload docker exec nvct-rt-reload
  docker rm -f nvct-rt-reload >/dev/null 2>&1
}

# --- (5) doctor on the configured node: its verdict must agree with what the checks above
# found: a `fail` line naming containerd when the CRI plugin does not load (and none when it
# does), a `warn` or `fail` line naming daemon-reload when it takes docker's GPUs away.
doctor() {
  local rc=0 o
  echo "+ nvidia-ctk doctor"
  o=$(nvidia-ctk doctor 2>&1) || rc=$?
  echo "$o"
  echo "(exit $rc)"
  [ "$rc" -le 2 ] || fail "doctor exited $rc (0, 1 or 2 expected)"
  if grep -qP '^containerd/cri\tFAIL' "$out/results.tsv"; then
    grep -qE '^fail .*containerd' <<<"$o" || fail "the CRI plugin does not load after runtime configure, and doctor has no fail line naming containerd"
  else
    ! grep -qE '^fail .*containerd' <<<"$o" || fail "the CRI plugin loads, and doctor fails containerd"
  fi
  if grep -qP '^docker/gpus-after-daemon-reload\tFAIL' "$out/results.tsv"; then
    grep -qE '^(warn|fail) .*daemon-reload' <<<"$o" || fail "daemon-reload takes docker --gpus containers' GPUs away, and doctor has no warn or fail line naming daemon-reload"
  fi
}

# --- (6) a reboot: the node comes back with its engines configured and nothing run by hand.
# The fake driver's nodes live in /dev (a devtmpfs, gone at a reboot), so a unit stands in for
# the kernel driver, which makes its nodes at every boot (nvidia-modprobe); it is the fake
# node's, not the toolkit's.
prepare_reboot() {
  cat >/etc/systemd/system/nvct-fake-driver.service <<EOF
[Unit]
Description=The fake NVIDIA driver's device nodes (the real-host phase's stand-in for the driver)
DefaultDependencies=no
After=local-fs.target
Before=containerd.service docker.service nvidia-cdi-refresh.service

[Service]
Type=oneshot
ExecStart=/bin/cp -an $fake/driver/dev/. /dev/
# The driver makes nodes, not /dev/char links (the fake root's own, made by an earlier case,
# are not the driver's).
ExecStartPost=/usr/bin/find /dev/char -lname *nvidia* -delete

[Install]
WantedBy=sysinit.target
EOF
  must systemctl enable nvct-fake-driver.service
  # The toolkit's refresh unit, enabled as an operator does, runs at the next boot on this fake
  # node: its ExecCondition lifted (no real module) and the fake /proc/devices bound in, the
  # driver root the fake one. And the boot's state issue 34 names: no nvidia-uvm nodes (made
  # on demand, so missing at boot), here and under the driver root.
  mkdir -p /etc/systemd/system/nvidia-cdi-refresh.service.d
  printf '[Service]\nExecCondition=\nBindReadOnlyPaths=%s:/proc/devices\n' "$fake/proc/devices" \
    >/etc/systemd/system/nvidia-cdi-refresh.service.d/50-nvct-fake-host.conf
  grep -q '^NVIDIA_CTK_DRIVER_ROOT=' /etc/nvidia-container-toolkit/nvidia-cdi-refresh.env ||
    echo "NVIDIA_CTK_DRIVER_ROOT=$fake/driver" >>/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env
  must systemctl daemon-reload
  must systemctl enable nvidia-cdi-refresh.service
  must rm -f /dev/nvidia-uvm /dev/nvidia-uvm-tools "$fake/driver/dev/nvidia-uvm" "$fake/driver/dev/nvidia-uvm-tools"
}
# After the reboot: docker --gpus (the prestart hook) and podman CDI under runc (the spec's
# keep-device-rules) each open /dev/nvidia0 before and after a daemon-reload; no toolkit
# command is run first.
after_reboot() {
  local dir=/var/lib/nvct-podman-boot o1 o2
  must wait_for 60 docker info
  echo "NVIDIA /dev/char links after the boot: $(find /dev/char -lname '*nvidia*' 2>/dev/null | wc -l)"
  # The refresh unit ran at this boot, before the engines, and made the uvm nodes the boot
  # lacked before it wrote the spec (issue 34).
  echo "+ nvidia-cdi-refresh.service at this boot"
  systemctl show -p Result -p ExecMainStatus nvidia-cdi-refresh.service
  journalctl -b -u nvidia-cdi-refresh.service --no-pager | tail -n 15
  must ls -l "$fake/driver/dev/nvidia-uvm" "$fake/driver/dev/nvidia-uvm-tools"
  grep -q 'path: /dev/nvidia-uvm$' /var/run/cdi/nvidia.yaml || fail "the spec written at boot lists no /dev/nvidia-uvm"
  grep -q 'path: /dev/nvidia-uvm-tools$' /var/run/cdi/nvidia.yaml || fail "the spec written at boot lists no /dev/nvidia-uvm-tools"
  must ls -l /dev/nvidia0 /dev/nvidiactl
  fresh_rootfs "$dir"
  docker rm -f nvct-boot-gpus >/dev/null 2>&1
  podman rm -f nvct-boot-cdi >/dev/null 2>&1
  must docker run -d --name nvct-boot-gpus --network none --gpus device=0 nvct-busybox:1 sleep 3600
  must podman run -d --name nvct-boot-cdi --runtime runc --network none --device nvidia.com/gpu=0 --rootfs "$dir" sleep 3600
  o1=$(docker exec nvct-boot-gpus sh -c "$probe" 2>&1)
  o2=$(podman exec nvct-boot-cdi sh -c "$probe" 2>&1)
  echo "--- before daemon-reload: docker --gpus"
  expect_gpu0 "$o1"
  echo "--- before daemon-reload: podman CDI"
  expect_gpu0 "$o2"
  grep -qx 'nvidia-uvm' <<<"$(sed -n '1,/^---$/p' <<<"$o2")" || fail "the CDI container has no /dev/nvidia-uvm"
  must systemctl daemon-reload
  sleep 2
  o1=$(docker exec nvct-boot-gpus sh -c "$probe" 2>&1)
  o2=$(podman exec nvct-boot-cdi sh -c "$probe" 2>&1)
  docker rm -f nvct-boot-gpus >/dev/null 2>&1
  podman rm -f nvct-boot-cdi >/dev/null 2>&1
  echo "--- after daemon-reload: docker --gpus"
  expect_gpu0 "$o1"
  echo "--- after daemon-reload: podman CDI"
  expect_gpu0 "$o2"
  # doctor agrees: the links are missing after the boot, and the hooks make up for them.
  local d
  d=$(nvidia-ctk doctor 2>&1)
  echo "$d"
  grep -qE '^ok +systemd cgroups' <<<"$d" || fail "doctor does not say ok for systemd cgroups, though every path kept its GPUs"
}

# --- (4) dpkg -r stops and disables the refresh units; --purge leaves no wants link.
deb_remove() {
  must systemctl is-active nvidia-cdi-refresh.path
  must dpkg -r nvidia-container-toolkit
  echo "+ systemctl status nvidia-cdi-refresh.path"
  systemctl status --no-pager nvidia-cdi-refresh.path 2>&1
  ! systemctl is-active nvidia-cdi-refresh.path || fail "nvidia-cdi-refresh.path still active after dpkg -r"
  [ "$(systemctl is-enabled nvidia-cdi-refresh.path 2>/dev/null)" != enabled ] || fail "nvidia-cdi-refresh.path still enabled after dpkg -r"
}
deb_purge() {
  must dpkg --purge nvidia-container-toolkit
  local links
  links=$(find /etc/systemd/system -name 'nvidia-cdi-refresh*' 2>/dev/null)
  echo "links after purge: ${links:-none}"
  [ -z "$links" ] || fail "dpkg --purge left: $links"
}

# Writes what the phase leaves for run.sh, and powers off (the unit's SuccessAction).
finish() {
  echo "checks_s $(($(date +%s) - start))" >>"$out/timing"
  journalctl -b --no-pager >>"$out/journal.txt" 2>&1
  sync
  echo done >"$out/finished"
  sync
  say "finished"
  exit 0
}
. "$share/guest/arrival.sh" # issue 34's checks: the refresh unit at boot, switching packages
say "boot $boot: started at uptime $(cut -d' ' -f1 /proc/uptime)s"
if [ "$boot" -eq 2 ]; then
  check reboot/gpus-after-daemon-reload after_reboot
  # The fake node's drop-in for the refresh unit goes before the package's removal is judged.
  rm -f /etc/systemd/system/nvidia-cdi-refresh.service.d/50-nvct-fake-host.conf
  rmdir /etc/systemd/system/nvidia-cdi-refresh.service.d 2>/dev/null
  systemctl daemon-reload
  check deb/remove-stops-units deb_remove
  check deb/purge-leaves-no-links deb_purge
  finish
elif [ "$boot" -gt 2 ]; then
  printf 'reboot/unexpected-boot\tFAIL\t0\n' >>"$out/results.tsv"
  finish
fi
check setup/fake-host setup_fake_host
check deb/install-units install_deb
if ! grep -qP '^deb/install-units\tPASS' "$out/results.tsv"; then
  # Later checks need the tools: this build's, from the share.
  say "the .deb did not install: the later checks use the share's binaries in /usr/local/bin"
  for b in nvidia-ctk nvidia-container-runtime nvidia-container-runtime-hook nvidia-cdi-hook; do
    install -m 0755 "$share/bin/$b" /usr/local/bin/
  done
  mkdir -p /etc/nvidia-container-runtime
  [ -f /etc/nvidia-container-runtime/config.toml ] || nvidia-ctk config default >/etc/nvidia-container-runtime/config.toml
fi
check setup/config point_config_at_fake_host
check setup/rootfs make_rootfs
check setup/cdi-spec generate_spec
check containerd/cri containerd_cri
check podman/crun-cdi-root podman_crun_root
check podman/runc-cdi-root podman_runc_root
check podman/crun-legacy-shim podman_crun_legacy_shim
check podman/crun-cdi-rootless podman_crun_rootless
check podman/crun-cdi-rootless-keep-id podman_crun_rootless_keep_id
check docker/gpus docker_gpus
check systemd/foreign-scope-runc foreign_scope_runc
check systemd/foreign-scope-crun foreign_scope_crun
check systemd/shim-legacy-runc-after-daemon-reload shim_systemd_reload
check docker/runtime-nvidia-after-daemon-reload docker_runtime_nvidia_after_daemon_reload
check podman/runc-cdi-after-daemon-reload podman_runc_cdi_reload
check podman/crun-cdi-after-daemon-reload podman_crun_cdi_reload
check podman/hooksd-runc-after-daemon-reload podman_hooksd_reload
check systemd/runc-hook-after-daemon-reload runc_systemd_hook_reload
. "$share/guest/cri_cases.sh" # issue 39: a CRI client in the guest (tests/cri/cri.py)
check containerd/cri-nvidia-systemd-cgroup-after-daemon-reload cri_pod_systemd_cgroup_reload
check containerd/cri-sandbox-image-after-drop-in-edit cri_sandbox_image_after_edit
check docker/gpus-after-daemon-reload docker_gpus_after_daemon_reload
check units/refresh-makes-uvm-nodes arrival_refresh_makes_uvm_nodes
check deb/switch-from-upstream-and-back arrival_switch_packages
# --- Issue 39 part 2: the package's nvidia-containerd-dropin units keep containerd's drop-in
# (a copy of the CRI table on Debian's containerd 1.6) in step with a node drop-in edited after
# configure: the service before each start of containerd, the path unit at each change; the
# service's own write does not start it again. Leaves the node as containerd/cri left it.
dropin_runs() { journalctl -b --no-pager -o cat -u nvidia-containerd-dropin.service 2>/dev/null | grep -c '^Starting ' || true; }
dropin_sandbox() { containerd config dump 2>/dev/null | grep -E '^\s*sandbox_image = ' | head -1; }
containerd_dropin_units() {
  local site=/etc/containerd/conf.d/20-site.toml dropin=/etc/containerd/conf.d/99-nvidia.toml
  [ -f /lib/systemd/system/nvidia-containerd-dropin.service ] || fail "the package has no nvidia-containerd-dropin.service"
  [ -f "$dropin" ] || must nvidia-ctk runtime configure --runtime=containerd
  site_toml() { printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nsandbox_image = "example.org/pause:%s"\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/usr/lib/cni"\nconf_dir = "/etc/cni/net.d"\n' "$1"; }
  # Before configure's copy knows it: the node's drop-in, then configure again.
  site_toml 1 >"$site"
  must nvidia-ctk runtime configure --runtime=containerd
  must systemctl enable nvidia-containerd-dropin.service
  # 1. The service alone (the path unit stopped): an edit, then `systemctl restart containerd`.
  site_toml 2 >"$site"
  echo "+ nvidia-ctk doctor (the edit shadowed)"
  nvidia-ctk doctor 2>&1 | grep -A1 'engine containerd' || true
  must systemctl restart containerd
  must wait_for 30 ctr version
  echo "sandbox after restart: $(dropin_sandbox)"
  dropin_sandbox | grep -q 'example.org/pause:2' || { journalctl -b --no-pager -u nvidia-containerd-dropin.service | tail -20; fail "the edit is not effective after systemctl restart containerd"; }
  ctr plugins ls 2>&1 | grep -E '^io\.containerd\.grpc\.v1[[:space:]]+cri[[:space:]]' | grep -qw ok || fail "the CRI plugin did not load"
  # 2. The path unit: an edit re-derives the drop-in without a restart, once.
  must systemctl enable --now nvidia-containerd-dropin.path
  local before after runs1 runs2
  before=$(dropin_runs)
  site_toml 3 >"$site"
  for _ in $(seq 20); do grep -q 'pause:3' "$dropin" && break; sleep 1; done
  grep -q 'example.org/pause:3' "$dropin" || { journalctl -b --no-pager -u nvidia-containerd-dropin.service | tail -20; fail "the path unit did not re-derive the drop-in"; }
  sleep 5
  runs1=$(dropin_runs)
  sleep 10
  runs2=$(dropin_runs)
  echo "service runs: $before before the edit, $runs1 after it, $runs2 ten seconds later"
  [ "$runs1" = "$runs2" ] || fail "the service keeps starting (a loop with the path unit?)"
  [ $((runs1 - before)) -le 2 ] || fail "the edit started the service $((runs1 - before)) times"
  systemctl is-active nvidia-containerd-dropin.path || fail "the path unit is not active (trigger limit?)"
  journalctl -b --no-pager -u nvidia-containerd-dropin.service | tail -8
  # Back as containerd/cri left it: no site drop-in, the drop-in derived again, units off.
  rm -f "$site"
  must nvidia-ctk runtime configure --runtime=containerd --refresh-drop-in
  must systemctl disable --now nvidia-containerd-dropin.path nvidia-containerd-dropin.service
  must systemctl restart containerd
  must wait_for 30 ctr version
  ! grep -q 'example.org' "$dropin" || fail "the drop-in still holds the site's value"
}
check containerd/drop-in-units containerd_dropin_units
check doctor/configured-node doctor
check reboot/prepare prepare_reboot
# The reboot: at once, without stopping the units (a stopped phase unit would power the VM
# off: SuccessAction), after the share and the disk are synced; the guest unit runs this
# script again at the next boot, which goes on above.
echo "checks_s $(($(date +%s) - start))" >>"$out/timing"
journalctl -b --no-pager >"$out/journal.txt" 2>&1
say "rebooting"
sync
echo b >/proc/sysrq-trigger
sleep 600
