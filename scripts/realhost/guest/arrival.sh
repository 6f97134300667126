# The real-host phase's checks of a node's arrival (issue 34): the refresh unit at boot, and a
# switch from upstream's packages to ours and back. Sourced by phase.sh (its helpers: must,
# fail, wait_for, fresh_rootfs, $share, $fake, $out); each function is one `check`, run in a
# subshell whose EXIT trap puts the node back as the later checks expect it.

# --- The node after a boot: nvidia-cdi-refresh.service makes the control nodes first.
# nvidia-uvm's nodes are made on demand, so at boot /dev/nvidia-uvm and /dev/nvidia-uvm-tools
# are often missing when the service runs: a spec written then lacks them and CUDA fails in
# every CDI container. The phase reboots the guest only once, at its end (reboot/prepare, for
# the reboot/* checks, whose boot must see the node as configured here): this check, before
# it, does for this unit what a boot does: the nodes are gone (a boot's /dev is a fresh
# devtmpfs, and nothing makes nvidia-uvm's) and the service runs again (`systemctl restart`).
#
# The fake host has no NVIDIA module, so the unit's ExecCondition skips the service in this
# guest (shown first). For this check only, a runtime drop-in (/run/systemd/system, gone at
# the next boot) empties ExecCondition and binds the fake host's /proc/devices (its NVIDIA
# majors) over the kernel's in the service's own mount namespace; the unit's own lines run
# unchanged. The nodes are made where the spec generator looks (the fake driver root of
# config.toml) through NVIDIA_CTK_DRIVER_ROOT in the env file, the operator's setting for a
# driver root other than /. modprobe fails here (no module) and there is no nvidia-smi: both
# steps are best-effort, and the service must succeed anyway.
arrival_dropin_dir=/run/systemd/system/nvidia-cdi-refresh.service.d
arrival_env=/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env

arrival_refresh_restore() {
  rm -f "$arrival_dropin_dir/50-nvct-fake-host.conf"
  rmdir "$arrival_dropin_dir" 2>/dev/null
  [ -f "$arrival_env.nvct-saved" ] && mv "$arrival_env.nvct-saved" "$arrival_env"
  [ -f /var/lib/nvct-etc-cdi-nvidia.yaml ] && mv /var/lib/nvct-etc-cdi-nvidia.yaml /etc/cdi/nvidia.yaml
  rm -f /var/run/cdi/nvidia.yaml
  # The nodes as setup made them, here and in the guest's /dev.
  local major node
  major=$(awk '$2 == "nvidia-uvm" {print $1}' "$fake/proc/devices")
  for node in nvidia-uvm:0 nvidia-uvm-tools:1; do
    [ -e "$fake/driver/dev/${node%:*}" ] || mknod -m 666 "$fake/driver/dev/${node%:*}" c "$major" "${node#*:}"
  done
  cp -an "$fake/driver/dev/nvidia-uvm" "$fake/driver/dev/nvidia-uvm-tools" /dev/
  nvidia-ctk system create-dev-char-symlinks --create-all --proc-root "$fake/proc" --dev-root "$fake/driver" >/dev/null
  systemctl daemon-reload
}

arrival_refresh_makes_uvm_nodes() {
  local unit=nvidia-cdi-refresh.service spec=/var/run/cdi/nvidia.yaml dir=/var/lib/nvct-arrival-uvm
  local t0 o before after uvm
  trap arrival_refresh_restore EXIT
  must systemd-analyze verify --man=no "$unit"
  echo "--- the engines are ordered after the service (the drop-in 10-container-engines.conf)"
  before=$(systemctl show -p Before --value "$unit")
  echo "Before=$before"
  for e in docker.service containerd.service crio.service; do
    grep -qw "$e" <<<"$before" || fail "$unit is not ordered before $e"
  done
  for e in docker.service containerd.service; do
    after=$(systemctl show -p After --value "$e")
    grep -qw "$unit" <<<"$after" || fail "$e does not start after $unit: After=$after"
  done
  o=$(systemctl show -p TimeoutStartUSec --value "$unit")
  echo "TimeoutStartUSec=$o"
  [ "$o" = "1min 30s" ] || fail "the start timeout is $o, not 90 s"

  echo "--- as installed, on this guest without an NVIDIA module: skipped by ExecCondition"
  t0=$(date +%s)
  echo "+ systemctl start $unit"
  systemctl start "$unit"
  echo "(exit $?)"
  sleep 1
  journalctl -u "$unit" --since "@$t0" --no-pager -o cat
  systemctl show -p Result -p ExecMainStatus -p ActiveState "$unit"

  echo "--- for this check: the drop-in and the env file's driver root"
  must cp "$arrival_env" "$arrival_env.nvct-saved"
  echo "NVIDIA_CTK_DRIVER_ROOT=$fake/driver" >>"$arrival_env"
  mkdir -p "$arrival_dropin_dir"
  cat >"$arrival_dropin_dir/50-nvct-fake-host.conf" <<EOF
[Service]
ExecCondition=
BindReadOnlyPaths=$fake/proc/devices:/proc/devices
EOF
  must systemctl daemon-reload
  must systemctl cat "$unit"

  echo "--- the boot's state: no nvidia-uvm nodes (in the guest's /dev and under the driver root)"
  must rm -f /dev/nvidia-uvm /dev/nvidia-uvm-tools "$fake/driver/dev/nvidia-uvm" "$fake/driver/dev/nvidia-uvm-tools"
  uvm=$(awk '$2 == "nvidia-uvm" {print $1}' "$fake/proc/devices")
  must rm -f "$fake/driver/dev/char/$uvm:0" "$fake/driver/dev/char/$uvm:1"
  rm -f "$spec"
  # What a spec written now, as the unit did before, holds: no nvidia-uvm.
  must nvidia-ctk cdi generate --output /run/nvct-arrival-before.yaml
  ! grep -q 'path: /dev/nvidia-uvm' /run/nvct-arrival-before.yaml ||
    fail "the spec lists nvidia-uvm although its nodes are gone: the check proves nothing"
  echo "a spec written without the nodes lists no /dev/nvidia-uvm"

  echo "--- systemctl restart $unit (a boot, for this unit)"
  t0=$(date +%s)
  must systemctl restart "$unit"
  journalctl -u "$unit" --since "@$t0" --no-pager
  o=$(systemctl show -p Result --value "$unit")
  [ "$o" = success ] || fail "$unit: Result=$o"
  must ls -l "$fake/driver/dev/nvidia-uvm" "$fake/driver/dev/nvidia-uvm-tools"
  echo "--- $spec"
  grep -nA1 -E 'path: /dev/nvidia(ctl|-uvm|-uvm-tools|-modeset)$' "$spec"
  grep -q 'path: /dev/nvidia-uvm$' "$spec" || fail "$spec lists no /dev/nvidia-uvm"
  grep -q 'path: /dev/nvidia-uvm-tools$' "$spec" || fail "$spec lists no /dev/nvidia-uvm-tools"
  must ls -l "$fake/driver/dev/char/$uvm:0" "$fake/driver/dev/char/$uvm:1"

  echo "--- podman run --device nvidia.com/gpu=0 with only this spec (/etc/cdi's set aside)"
  must mv /etc/cdi/nvidia.yaml /var/lib/nvct-etc-cdi-nvidia.yaml
  fresh_rootfs "$dir"
  o=$(podman run --rm --runtime crun --network none --device nvidia.com/gpu=0 --rootfs "$dir" \
    sh -c 'ls /dev' 2>&1) || fail "podman: $o"
  echo "$o"
  grep -qx nvidia-uvm <<<"$o" || fail "the container has no /dev/nvidia-uvm"
  grep -qx nvidia-uvm-tools <<<"$o" || fail "the container has no /dev/nvidia-uvm-tools"
}

# --- Switching from upstream's packages, and back, unattended.
# Stand-ins for upstream's 1.18 packages, built here with dpkg-deb (nothing of upstream's is
# copied; what they do is what upstream's packaging/debian/ does): nvidia-container-toolkit-
# base holds nvidia-ctk, nvidia-container-runtime and nvidia-cdi-hook (shell stubs), the
# refresh units in /etc/systemd/system and the env file (conffiles, as every /etc file of a
# debhelper-built package), and its postinst writes config.toml when there is none and enables
# and starts the path unit (upstream's does that when `systemctl is-system-running` says
# running or degraded; this phase runs as a unit of the boot, while it says starting, so the
# stand-in asks only that systemd is the init); nvidia-container-toolkit depends on it at
# the same version, holds the prestart hook, and its postinst links /usr/bin/nvidia-container-
# toolkit to it. The stand-in units do nothing (ExecStart=/bin/true).
arrival_work=/var/lib/nvct-arrival
arrival_repo=/var/lib/nvct-standin-repo
arrival_list=/etc/apt/sources.list.d/nvct-standin.list

# arrival_standins VERSION DIR: DIR/nvidia-container-toolkit{,-base}_VERSION_all.deb
arrival_standins() {
  local v=$1 out=$2 tree p
  tree=$(mktemp -d)
  mkdir -p "$tree/base/DEBIAN" "$tree/base/usr/bin" "$tree/base/etc/systemd/system" \
    "$tree/base/etc/nvidia-container-toolkit" "$tree/tk/DEBIAN" "$tree/tk/usr/bin"
  for p in nvidia-ctk nvidia-container-runtime nvidia-cdi-hook; do
    printf '#!/bin/sh\necho "stand-in %s %s"\n' "$p" "$v" >"$tree/base/usr/bin/$p"
    chmod 755 "$tree/base/usr/bin/$p"
  done
  printf '[Unit]\nDescription=stand-in refresh\n\n[Service]\nType=oneshot\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n' \
    >"$tree/base/etc/systemd/system/nvidia-cdi-refresh.service"
  printf '[Unit]\nDescription=stand-in refresh trigger\n\n[Path]\nPathChanged=/lib/modules/%%v/modules.dep\n\n[Install]\nWantedBy=multi-user.target\n' \
    >"$tree/base/etc/systemd/system/nvidia-cdi-refresh.path"
  printf '# stand-in: variables of nvidia-ctk cdi generate\n' >"$tree/base/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"
  printf '%s\n' /etc/systemd/system/nvidia-cdi-refresh.service /etc/systemd/system/nvidia-cdi-refresh.path \
    /etc/nvidia-container-toolkit/nvidia-cdi-refresh.env >"$tree/base/DEBIAN/conffiles"
  cat >"$tree/base/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if [ ! -e /etc/nvidia-container-runtime/config.toml ]; then
    mkdir -p /etc/nvidia-container-runtime
    printf '[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig"\n\n[nvidia-container-runtime]\nlog-level = "info"\n' >/etc/nvidia-container-runtime/config.toml
  fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
    systemctl enable --now nvidia-cdi-refresh.path || true
  fi
fi
EOF
  printf 'Package: nvidia-container-toolkit-base\nVersion: %s\nArchitecture: all\nMaintainer: stand-in <stand-in@localhost>\nDescription: stand-in for upstream'"'"'s nvidia-container-toolkit-base\n' "$v" \
    >"$tree/base/DEBIAN/control"
  printf '#!/bin/sh\necho "stand-in hook %s"\n' "$v" >"$tree/tk/usr/bin/nvidia-container-runtime-hook"
  chmod 755 "$tree/tk/usr/bin/nvidia-container-runtime-hook"
  cat >"$tree/tk/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -f /usr/bin/nvidia-container-runtime-hook ] && [ ! -e /usr/bin/nvidia-container-toolkit ]; then
  ln -s /usr/bin/nvidia-container-runtime-hook /usr/bin/nvidia-container-toolkit
fi
EOF
  cat >"$tree/tk/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = purge ] && [ -L /usr/bin/nvidia-container-toolkit ]; then rm -f /usr/bin/nvidia-container-toolkit; fi
EOF
  chmod 755 "$tree/base/DEBIAN/postinst" "$tree/tk/DEBIAN/postinst" "$tree/tk/DEBIAN/postrm"
  printf 'Package: nvidia-container-toolkit\nVersion: %s\nArchitecture: all\nMaintainer: stand-in <stand-in@localhost>\nDepends: nvidia-container-toolkit-base (= %s)\nDescription: stand-in for upstream'"'"'s nvidia-container-toolkit\n' "$v" "$v" \
    >"$tree/tk/DEBIAN/control"
  mkdir -p "$out"
  dpkg-deb --root-owner-group --build "$tree/base" "$out/nvidia-container-toolkit-base_${v}_all.deb" >/dev/null &&
    dpkg-deb --root-owner-group --build "$tree/tk" "$out/nvidia-container-toolkit_${v}_all.deb" >/dev/null
  local rc=$?
  rm -rf "$tree"
  return $rc
}

# A flat apt repository of the .debs in DIR (NVIDIA's, as far as apt can tell): Packages and
# an unsigned Release (the source line says trusted=yes).
arrival_repo_index() {
  local dir=$1 deb
  : >"$dir/Packages"
  for deb in "$dir"/*.deb; do
    {
      dpkg-deb -f "$deb"
      echo "Filename: ./$(basename "$deb")"
      echo "Size: $(stat -c %s "$deb")"
      echo "SHA256: $(sha256sum "$deb" | cut -d' ' -f1)"
      echo
    } >>"$dir/Packages"
  done
  {
    echo "Origin: nvct stand-in"
    echo "Label: nvct stand-in"
    echo "Date: $(date -u -R)"
    echo "SHA256:"
    echo " $(sha256sum "$dir/Packages" | cut -d' ' -f1) $(stat -c %s "$dir/Packages") Packages"
  } >"$dir/Release"
}

# apt with no terminal, as an unattended install runs it.
arrival_apt() {
  echo "+ apt-get $*"
  DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Use-Pty=0 "$@" </dev/null 2>&1
}

arrival_versions() {
  dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n' nvidia-container-toolkit nvidia-container-toolkit-base 2>/dev/null
}

arrival_switch_restore() {
  local ours
  ours=$(ls "$share"/deb/*.deb)
  rm -f "$arrival_list" /var/lib/apt/lists/*nvct-standin-repo*
  if [ "$(dpkg-query -W -f='${Version}' nvidia-container-toolkit 2>/dev/null)" = "$(dpkg-deb -f "$ours" Version)" ]; then
    :
  else
    echo "--- restore: our package again"
    arrival_apt install "$ours"
  fi
  # Upstream's leftovers (the stand-in base package's conffiles) go; its env file was the one
  # at our path, so the one this phase had before comes back after.
  dpkg --purge nvidia-container-toolkit-base >/dev/null 2>&1
  [ -f "$arrival_work/config.toml.fake-host" ] && mv "$arrival_work/config.toml.fake-host" /etc/nvidia-container-runtime/config.toml
  mkdir -p "${arrival_env%/*}"
  [ -f "$arrival_work/env.before" ] && cp "$arrival_work/env.before" "$arrival_env"
  systemctl daemon-reload
  systemctl enable --now nvidia-cdi-refresh.path
  echo "--- after restoring"
  arrival_versions
  systemctl is-active nvidia-cdi-refresh.path
}

arrival_switch_packages() {
  local cfg=/etc/nvidia-container-runtime/config.toml ours ours_version o sums
  trap arrival_switch_restore EXIT
  ours=$(ls "$share"/deb/*.deb) || fail "no .deb in $share/deb"
  ours_version=$(dpkg-deb -f "$ours" Version)
  rm -rf "$arrival_work" "$arrival_repo"
  mkdir -p "$arrival_work"
  must arrival_standins 1.18.2-1 "$arrival_work"
  # NVIDIA's repository, with a newer upstream release than the node had.
  must arrival_standins 1.19.0-1 "$arrival_repo"
  arrival_repo_index "$arrival_repo"
  must cp "$arrival_env" "$arrival_work/env.before"
  # The node's config (pointed at the fake host) waits aside; upstream's postinst writes its own.
  must mv "$cfg" "$arrival_work/config.toml.fake-host"

  echo "=== ours -> upstream's (stand-ins 1.18.2-1): a downgrade for apt"
  o=$(arrival_apt install --allow-downgrades "$arrival_work/nvidia-container-toolkit_1.18.2-1_all.deb" \
    "$arrival_work/nvidia-container-toolkit-base_1.18.2-1_all.deb") || fail "apt-get: $o"
  echo "$o"
  arrival_versions
  [ "$(dpkg-query -W -f='${Version} ${Status}' nvidia-container-toolkit)" = "1.18.2-1 install ok installed" ] ||
    fail "the stand-in nvidia-container-toolkit is not installed"
  [ "$(dpkg-query -W -f='${Status}' nvidia-container-toolkit-base)" = "install ok installed" ] ||
    fail "the stand-in nvidia-container-toolkit-base is not installed"
  must test -f "$cfg"
  must cat "$cfg"
  ! grep -q "still runs" <<<"$o" || fail "the switch warned about engine configs (upstream ships the same programs)"

  echo "=== the operator edits upstream's config.toml and env file"
  must sed -i 's/log-level = "info"/log-level = "debug"/' "$cfg"
  echo "# edited by the operator" >>"$cfg"
  echo "NVIDIA_CTK_CDI_GENERATE_DEVICE_NAME_STRATEGIES=uuid" >>"$arrival_env"
  sums=$(sha256sum "$cfg" "$arrival_env")
  echo "$sums"
  must systemctl is-enabled nvidia-cdi-refresh.path
  echo "FragmentPath=$(systemctl show -p FragmentPath --value nvidia-cdi-refresh.path)"

  echo "=== upstream's -> ours: apt-get install ./ours.deb"
  o=$(arrival_apt install "$ours") || fail "apt-get: $o"
  echo "$o"
  ! grep -q "Configuration file" <<<"$o" || fail "dpkg asked about a conffile"
  arrival_versions
  [ "$(dpkg-query -W -f='${Version} ${Status}' nvidia-container-toolkit)" = "$ours_version install ok installed" ] ||
    fail "ours is not installed"
  [ "$(dpkg-query -W -f='${db:Status-Abbrev}' nvidia-container-toolkit-base)" = "rc " ] ||
    fail "upstream's nvidia-container-toolkit-base is not removed (rc)"
  [ "$(sha256sum "$cfg" "$arrival_env")" = "$sums" ] || fail "the operator's config.toml or env file changed"
  echo "the operator's config.toml and env file are kept"
  for u in nvidia-cdi-refresh.service nvidia-cdi-refresh.path; do
    [ ! -e "/etc/systemd/system/$u" ] || fail "upstream's /etc/systemd/system/$u still overrides ours"
  done
  o=$(systemctl show -p FragmentPath --value nvidia-cdi-refresh.path)
  echo "FragmentPath=$o"
  case $o in /lib/systemd/system/* | /usr/lib/systemd/system/*) ;; *) fail "nvidia-cdi-refresh.path comes from $o" ;; esac
  [ "$(systemctl is-enabled nvidia-cdi-refresh.path)" = enabled ] || fail "the path unit the operator had enabled is no longer enabled"
  must systemctl is-active nvidia-cdi-refresh.path
  [ "$(readlink -f /usr/bin/nvidia-container-toolkit)" = /usr/bin/nvidia-container-runtime-hook ] ||
    fail "/usr/bin/nvidia-container-toolkit is not a link to the hook"
  o=$(nvidia-ctk -v 2>&1)
  echo "nvidia-ctk -v: $o"
  grep -q "stand-in" <<<"$o" && fail "nvidia-ctk is still the stand-in"

  echo "=== apt-get upgrade with NVIDIA's repository (stand-ins 1.19.0-1)"
  echo "deb [trusted=yes] file:$arrival_repo ./" >"$arrival_list"
  o=$(arrival_apt update -o Dir::Etc::sourcelist="$arrival_list" -o Dir::Etc::sourceparts=- \
    -o APT::Get::List-Cleanup=0) || fail "apt-get update: $o"
  echo "$o"
  apt-cache policy nvidia-container-toolkit nvidia-container-toolkit-base
  o=$(arrival_apt upgrade) || fail "apt-get upgrade: $o"
  echo "$o"
  arrival_versions
  [ "$(dpkg-query -W -f='${Version}' nvidia-container-toolkit)" = "$ours_version" ] ||
    fail "apt-get upgrade put upstream's nvidia-container-toolkit back"
  [ "$(dpkg-query -W -f='${db:Status-Abbrev}' nvidia-container-toolkit-base)" = "rc " ] ||
    fail "apt-get upgrade installed upstream's nvidia-container-toolkit-base"
  o=$(arrival_apt install -s nvidia-container-toolkit)
  echo "$o"
  grep -q "already the newest version" <<<"$o" || fail "apt would install upstream's nvidia-container-toolkit"
  rm -f "$arrival_list" /var/lib/apt/lists/*nvct-standin-repo*

  echo "=== ours -> upstream's again (stand-ins 1.18.2-1)"
  o=$(arrival_apt install --allow-downgrades "$arrival_work/nvidia-container-toolkit_1.18.2-1_all.deb" \
    "$arrival_work/nvidia-container-toolkit-base_1.18.2-1_all.deb") || fail "apt-get: $o"
  echo "$o"
  ! grep -q "Configuration file" <<<"$o" || fail "dpkg asked about a conffile"
  arrival_versions
  [ "$(dpkg-query -W -f='${Version} ${Status}' nvidia-container-toolkit)" = "1.18.2-1 install ok installed" ] ||
    fail "the stand-in nvidia-container-toolkit is not installed"
  [ "$(dpkg-query -W -f='${Status}' nvidia-container-toolkit-base)" = "install ok installed" ] ||
    fail "the stand-in nvidia-container-toolkit-base is not installed"
  [ "$(sha256sum "$cfg" "$arrival_env")" = "$sums" ] || fail "the operator's config.toml or env file changed"
  for u in nvidia-cdi-refresh.service nvidia-cdi-refresh.path; do
    must test -f "/etc/systemd/system/$u"
  done
  echo "FragmentPath=$(systemctl show -p FragmentPath --value nvidia-cdi-refresh.path)"
  [ "$(systemctl is-enabled nvidia-cdi-refresh.path)" = enabled ] || fail "upstream's path unit is not enabled again"
  [ "$(readlink -f /usr/bin/nvidia-container-toolkit)" = /usr/bin/nvidia-container-runtime-hook ] ||
    fail "/usr/bin/nvidia-container-toolkit is not a link to the hook"
  ! grep -q "still runs" <<<"$o" || fail "the switch back warned about engine configs"
  # The EXIT trap installs ours again, purges the stand-in base package's leftovers and puts
  # the node's config back, for the checks after this one.
}
