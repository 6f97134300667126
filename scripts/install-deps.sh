#!/usr/bin/env bash
# Installs what the demo and the tests need on a Debian/Ubuntu machine (as root), when missing:
# runc, crun, busybox-static, containerd, podman, docker.io (dockerd and its client), gcc and the C
# headers (the simulated host's 32-bit stubs are built with `gcc -m32 -nostdlib`, which needs
# no gcc-multilib), and for scripts/package.sh and its test rpm (rpmbuild, rpm), binutils (objdump) and
# systemd (systemd-analyze verify of the units), lxc and charliecloud (the peers that exec
# nvidia-container-cli), GNU time (tests/suite/attacks.rs measures the hook's peak
# memory with it), qemu and mmdebstrap (the real-host phase's VM), and with pip the Python packages of
# scripts/validate-k8s.sh and tests/suite/cri.rs's CRI client. The Rust toolchain is not installed
# here (Debian's cargo is too old): use rustup's stable Rust, 1.89 or newer (tested with 1.95),
# with its clippy and rustfmt components (added here with rustup when missing).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (the tests start real containers)" >&2
  exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps.sh: cargo not found: install Rust 1.89+ with rustup (https://rustup.rs)" >&2
  exit 1
fi
for component in clippy rustfmt; do
  sub=$([ "$component" = rustfmt ] && echo fmt || echo clippy)
  if ! cargo "$sub" --version >/dev/null 2>&1; then
    echo "install-deps.sh: cargo $sub missing; rustup component add $component"
    rustup component add "$component" || { echo "install-deps.sh: cannot add the $component component (the test command runs cargo $sub)" >&2; exit 1; }
  fi
done

# `--demo`: only what scripts/demo.sh uses (runc, a static busybox, gcc and the C headers for
# the simulated host's stub libraries, python3, ldconfig), not the whole test toolchain.
demo=false
[ "${1:-}" = --demo ] && demo=true

need=()
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v crun >/dev/null 2>&1 || need+=(crun)
command -v busybox >/dev/null 2>&1 || need+=(busybox-static)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v python3 >/dev/null 2>&1 || need+=(python3)
[ -e /usr/include/dlfcn.h ] || need+=(libc6-dev)
command -v ldconfig >/dev/null 2>&1 || [ -x /sbin/ldconfig ] || need+=(libc-bin)
if $demo; then
  if [ ${#need[@]} -gt 0 ]; then
    echo "install-deps.sh: installing ${need[*]} (apt-get; about a minute)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  need=()
fi
$demo || {
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v chattr >/dev/null 2>&1 || need+=(e2fsprogs)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
command -v rpmbuild >/dev/null 2>&1 || need+=(rpm)
command -v objdump >/dev/null 2>&1 || need+=(binutils)
command -v unshare >/dev/null 2>&1 && command -v mknod >/dev/null 2>&1 || need+=(util-linux coreutils)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
[ -x /usr/bin/time ] || need+=(time)
command -v g++ >/dev/null 2>&1 || need+=(g++) # fuzz/'s libFuzzer entries (libfuzzer-sys builds C++)
# The real-host phase (scripts/realhost/): qemu boots its Debian 12 guest, which mmdebstrap
# builds from this machine's apt sources (mkfs.ext4, from e2fsprogs above, makes its disk).
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
# tests/suite/container_cli.rs: the peers that exec nvidia-container-cli: LXC (its hooks/nvidia)
# and Charliecloud's ch-fromhost (charliecloud-builders) and ch-run (charliecloud-runtime).
# Without their recommends (LXC's would add dnsmasq, lxcfs, debootstrap; none is used).
norec=()
command -v lxc-start >/dev/null 2>&1 || norec+=(lxc)
command -v ch-fromhost >/dev/null 2>&1 || norec+=(charliecloud-builders)
command -v ch-run >/dev/null 2>&1 || norec+=(charliecloud-runtime)

if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps.sh: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ${#norec[@]} -gt 0 ]; then
  echo "install-deps.sh: installing ${norec[*]} (without their recommends)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${norec[@]}" >/dev/null
fi
# scripts/validate-k8s.sh: the Kubernetes JSON schemas, offline (kubernetes-validate ships them),
# pinned. PIP_BREAK_SYSTEM_PACKAGES: Debian's own python3 refuses a system-wide pip install.
if ! python3 -c 'import importlib.metadata as m, sys; sys.exit(m.version("kubernetes-validate") != "1.37.0")' 2>/dev/null; then
  echo "install-deps.sh: installing kubernetes-validate 1.37.0 (pip)"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --root-user-action=ignore "kubernetes-validate==1.37.0"
fi
# tests/suite/cri.rs: its CRI client (tests/cri/cri.py) speaks gRPC with grpcio and generates its
# stubs from tests/cri/runtime_v1.proto with grpcio-tools (which ships protoc), pinned.
if ! python3 -c 'import importlib.metadata as m, sys; sys.exit([m.version(p) for p in ("grpcio-tools", "grpcio", "protobuf")] != ["1.85.1", "1.85.3", "7.36.2"])' 2>/dev/null; then
  echo "install-deps.sh: installing grpcio-tools 1.85.1, grpcio 1.85.3, protobuf 7.36.2 (pip)"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --root-user-action=ignore "grpcio-tools==1.85.1" "grpcio==1.85.3" "protobuf==7.36.2"
fi
}
# busybox-static must really be static: the test images have no libc of their own. (`file` may
# be missing; glibc's ldd says "not a dynamic executable" or "statically linked".)
if ! file -L "$(command -v busybox)" 2>/dev/null | grep -q 'statically linked' &&
  ! ldd "$(command -v busybox)" 2>&1 | grep -qE 'not a dynamic|statically linked'; then
  echo "install-deps.sh: $(command -v busybox) is not statically linked; installing busybox-static"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
fi
