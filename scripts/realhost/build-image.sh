#!/usr/bin/env bash
# Builds the real-host phase's Debian 12 guest image from Debian's packages (mmdebstrap, from
# the apt sources this machine already has), once: the image lives in a cache directory keyed
# by a hash of scripts/realhost/packages.txt, this script and the guest unit, and a later run
# (or CI on the same machine) reuses it.
#
# Usage: build-image.sh            prints the cache directory (built when missing)
# Env:   NVCT_REALHOST_CACHE       the cache's parent (default /var/cache/nvct-realhost)
#        NVCT_REALHOST_SOURCES     the apt sources to build from (default: this machine's
#                                  /etc/apt/sources.list.d/debian.sources, else sources.list)
#
# The cache directory holds vmlinuz, initrd.img (Debian's linux-image-amd64 and its
# initramfs), rootfs.img (a raw ext4 disk, the guest's root; qemu runs it with -snapshot, so
# it is never written) and built (the date; its presence marks a finished build).
# Needs root, mmdebstrap and mkfs.ext4 (scripts/install-deps.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${NVCT_REALHOST_CACHE:-/var/cache/nvct-realhost}

die() { echo "build-image.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (mmdebstrap's root mode, mknod in the guest's /dev)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found: run scripts/install-deps.sh (or apt-get install mmdebstrap)"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 not found: apt-get install e2fsprogs"

sources=${NVCT_REALHOST_SOURCES:-}
if [ -z "$sources" ]; then
  if [ -s /etc/apt/sources.list.d/debian.sources ]; then
    sources=/etc/apt/sources.list.d/debian.sources
  elif [ -s /etc/apt/sources.list ]; then
    sources=/etc/apt/sources.list
  else
    die "no apt sources on this machine (/etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list): set NVCT_REALHOST_SOURCES to a sources file for Debian 12 (bookworm)"
  fi
fi
[ -s "$sources" ] || die "NVCT_REALHOST_SOURCES=$sources: no such file (a .sources or sources.list file for bookworm)"

packages=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/packages.txt" | tr -s ' \n' ',' | sed 's/,$//')
key=$(cat "$here/packages.txt" "$here/build-image.sh" "$here/guest/nvct-realhost.service" | sha256sum | cut -c1-16)
dir="$cache_root/$key"
if [ -e "$dir/built" ]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$cache_root"
work=$(mktemp -d "$cache_root/.build.XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
root="$work/root"
echo "build-image.sh: building the guest image $key from $sources (a few minutes; cached in $dir)" >&2
# Check-Valid-Until/Check-Date off: a machine whose clock is ahead of the archive's Release
# files (Valid-Until) would otherwise refuse them.
mmdebstrap --mode=root --variant=apt --format=directory \
  --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Check-Date "false"' \
  --aptopt='APT::Install-Recommends "false"' \
  --include="$packages" \
  --customize-hook='echo nvct-realhost > "$1/etc/hostname"' \
  --customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\nnvct /mnt/nvct 9p trans=virtio,version=9p2000.L,msize=1048576,nofail 0 0\n" > "$1/etc/fstab"' \
  --customize-hook='mkdir -p "$1/mnt/nvct"' \
  --customize-hook='chroot "$1" passwd -d root' \
  --customize-hook='chroot "$1" useradd -m -s /bin/bash -u 1000 nvctuser' \
  --customize-hook='copy-in '"$here"'/guest/nvct-realhost.service /etc/systemd/system' \
  --customize-hook='chroot "$1" systemctl enable nvct-realhost.service' \
  --customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer systemd-timesyncd.service' \
  --customize-hook='rm -rf "$1/var/cache/apt/archives/"*.deb "$1/var/lib/apt/lists/"*' \
  bookworm "$root" "$sources" >&2

kernel=$(ls "$root"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
initrd=$(ls "$root"/boot/initrd.img-* 2>/dev/null | sort -V | tail -1)
[ -n "$kernel" ] && [ -n "$initrd" ] || die "the image has no /boot/vmlinuz-* or /boot/initrd.img-* (did linux-image-amd64 and initramfs-tools install?)"
cp "$kernel" "$work/vmlinuz"
cp "$initrd" "$work/initrd.img"
# A sparse 8 GiB disk: the rootfs plus room for the engines' images and containers.
mkfs.ext4 -q -L nvct-root -d "$root" "$work/rootfs.img" 8G >&2
rm -rf --one-file-system "$root"
date -u +%FT%TZ > "$work/built"
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
echo "$dir"
