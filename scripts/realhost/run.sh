#!/usr/bin/env bash
# The real-host phase: boots the Debian 12 guest of build-image.sh headless under qemu with
# this build's tools, its .deb and the fake GPU host's builder shared in (9p), lets the guest's
# nvct-realhost.service run guest/phase.sh (the checks) and power off, and collects the results.
#
# Usage: scripts/realhost/run.sh [OUT_DIR]          (as root; OUT_DIR default target/realhost)
# Needs: cargo build --locked --workspace --all-features --bins --examples --lib, and the .deb of
#        scripts/package.sh in $NVCT_PACKAGE_DIR (default target/package).
# Env:   NVCT_REALHOST_TIMEOUT  seconds the VM may run, boot to power-off (default 1800)
#        NVCT_REALHOST_ACCEL    tcg (default) or kvm: this machine's paravirtualised KVM
#                               (kvm_pvm) cannot boot Debian's kernel, a real KVM host can
#        NVCT_REALHOST_MEM      guest memory in MiB (default 3072); NVCT_REALHOST_CPUS (2)
#        NVCT_REALHOST_CACHE    the image cache's parent (build-image.sh)
# Writes OUT_DIR/:
#   results.tsv, cases/*.log, journal.txt   the guest's (guest/phase.sh says what they hold)
#   console.log    the guest's serial console (kernel, systemd, the phase's progress)
#   timing         image_s, boot_s (to the phase's start), checks_s, vm_s, total_s
#   status         "ok" when the phase ran to its end, else "failed: REASON"
# Exits 0 when the phase ran to its end (whatever the checks said: tests/realhost.rs judges
# them), 1 with the reason and the console's tail when the VM did not boot or the phase did
# not finish.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$repo/target/realhost}
timeout_s=${NVCT_REALHOST_TIMEOUT:-1800}
accel=${NVCT_REALHOST_ACCEL:-tcg}
mem=${NVCT_REALHOST_MEM:-3072}
cpus=${NVCT_REALHOST_CPUS:-2}
t_start=$SECONDS

die() {
  echo "realhost: $*" >&2
  mkdir -p "$out" 2>/dev/null && echo "failed: $*" >"$out/status"
  exit 1
}
[ "$(id -u)" -eq 0 ] || die "run as root (the image build uses mmdebstrap's root mode)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found: run scripts/install-deps.sh (Debian: apt-get install qemu-system-x86)"
case $accel in tcg | kvm) ;; *) die "NVCT_REALHOST_ACCEL=$accel: expected tcg or kvm" ;; esac

bins=(nvidia-ctk nvidia-container-runtime nvidia-container-runtime-hook nvidia-cdi-hook nvidia-ctk-installer)
for b in "${bins[@]}"; do
  [ -x "$repo/target/debug/$b" ] || die "target/debug/$b missing: cargo build --locked --all-features --bins --examples"
done
for f in examples/fake_host libfake_nvml.so; do
  [ -e "$repo/target/debug/$f" ] || die "target/debug/$f missing: cargo build --locked --workspace --all-features --bins --examples --lib"
done
pkg_dir=${NVCT_PACKAGE_DIR:-$repo/target/package}
debs=("$pkg_dir"/nvidia-container-toolkit_*_amd64.deb)
[ -f "${debs[0]}" ] || die "no nvidia-container-toolkit_*_amd64.deb in $pkg_dir: run scripts/package.sh --profile dev (or set NVCT_PACKAGE_DIR)"
[ "${#debs[@]}" -eq 1 ] || die "more than one .deb in $pkg_dir: ${debs[*]}"

# The image (built once, cached).
t0=$SECONDS
image=$("$here/build-image.sh") || die "the guest image could not be built (build-image.sh's output above says why)"
image_s=$((SECONDS - t0))

# The share: what the guest reads, and its out/.
# OUT_DIR is replaced: refuse a directory that is not empty and not an earlier run's.
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -e "$out/status" ] && [ ! -d "$out/share" ]; then
  echo "realhost: $out is not empty and holds no earlier run (no status file): name an empty or new OUT_DIR" >&2
  exit 1
fi
rm -rf --one-file-system "$out"
share=$out/share
mkdir -p "$share/bin/examples" "$share/deb" "$share/guest" "$share/out"
for b in "${bins[@]}"; do cp "$repo/target/debug/$b" "$share/bin/"; done
cp "$repo/target/debug/examples/fake_host" "$repo/target/debug/libfake_nvml.so" "$share/bin/examples/"
cp "${debs[0]}" "$share/deb/"
cp "$here/guest/phase.sh" "$here/guest/arrival.sh" "$share/guest/"
cp "$here/guest/cri_cases.sh" "$share/guest/"
cp "$repo/tests/cri/cri.py" "$repo/tests/cri/runtime_v1.proto" "$share/guest/" # cri_cases.sh's CRI client

echo "realhost: booting the guest ($image, $accel, timeout ${timeout_s}s)" >&2
accel_args=(-accel tcg,thread=multi -cpu max)
[ "$accel" = kvm ] && accel_args=(-accel kvm -cpu host,-arch-capabilities)
t0=$SECONDS
qemu_rc=0
# -snapshot: the cached image is never written (the guest's writes live for the life of this
# qemu process, across the phase's one reboot). No -no-reboot, for that reboot: a guest panic
# (panic=-1 reboots) comes back as a third boot, which the phase ends at once
# (reboot/unexpected-boot).
# rootflags=noinit_itable: the guest's ext4 does not zero its uninitialised inode tables in
# the background (the image's mkfs leaves them to it, and with -snapshot every boot would do
# it again: 8 GiB of write-zeroes under emulation, competing with the checks; one boot
# livelocked in it, ext4_lazyinit_thread in blkdev_issue_zeroout, soft lockups on both CPUs).
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 "${accel_args[@]}" \
  -m "$mem" -smp "$cpus" -nodefaults -display none \
  -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
  -append "root=/dev/vda rw rootflags=noinit_itable console=ttyS0 panic=-1 systemd.show_status=1 net.ifnames=0" \
  -drive "file=$image/rootfs.img,format=raw,if=virtio,snapshot=on" \
  -virtfs "local,path=$share,mount_tag=nvct,security_model=none,id=nvct" \
  -serial "file:$out/console.log" </dev/null || qemu_rc=$?
vm_s=$((SECONDS - t0))

# The guest's results, next to the console log.
cp -a "$share/out/." "$out/" 2>/dev/null || true
boot_s=$(awk '$1 == "boot_s" {print $2}' "$out/timing" 2>/dev/null || true)
reboot_s=$(awk '$1 == "reboot_s" {print $2}' "$out/timing" 2>/dev/null || true)
# One line per boot: the two added.
checks_s=$(awk '$1 == "checks_s" {s += $2; n++} END {if (n) print s}' "$out/timing" 2>/dev/null || true)
{
  echo "image_s $image_s"
  echo "boot_s ${boot_s:-?}"
  echo "reboot_s ${reboot_s:-?}"
  echo "checks_s ${checks_s:-?}"
  echo "vm_s $vm_s"
  echo "total_s $((SECONDS - t_start))"
} >"$out/timing"
rm -rf --one-file-system "$share"
console_tail() { tail -n 40 "$out/console.log" 2>/dev/null | sed 's/^/  console: /' >&2; }
if [ ! -e "$out/finished" ]; then
  case $qemu_rc in
    124 | 137) reason="the VM did not finish in ${timeout_s}s (NVCT_REALHOST_TIMEOUT)" ;;
    0) reason="the VM powered off before the phase finished" ;;
    *) reason="qemu exited $qemu_rc" ;;
  esac
  [ -s "$out/results.tsv" ] || reason="$reason; the phase never started (no results: the guest did not boot, or did not mount the share)"
  echo "failed: $reason (console: $out/console.log)" >"$out/status"
  echo "realhost: $reason; the console's tail:" >&2
  console_tail
  exit 1
fi
echo ok >"$out/status"
echo "realhost: the phase finished in ${vm_s}s (image ${image_s}s, boot ${boot_s:-?}s, checks ${checks_s:-?}s); results in $out/results.tsv" >&2
