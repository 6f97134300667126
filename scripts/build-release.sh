#!/usr/bin/env bash
# Release binaries for a real GPU host, as an install tree under target/dist/ (copy it to / or
# package it):
#   usr/bin/nvidia-cdi-hook                  statically linked
#   usr/bin/nvidia-container-runtime-hook    statically linked front
#   usr/bin/nvidia-ctk                       statically linked front
#   usr/bin/nvidia-container-runtime         the runtime shim: statically linked front (started by
#                                            the engine for every command of every container)
#   usr/bin/nvidia-ctk-installer             the Kubernetes node installer (dynamic; packaging/kubernetes)
#   usr/bin/nvidia-container-cli             libnvidia-container's CLI for the engines that exec it
#                                            (LXC/Incus, enroot, Apptainer, Charliecloud): dynamic,
#                                            `info` loads the driver's libnvidia-ml; the engines'
#                                            hook scripts exec it with their own environment, not
#                                            the image's
#   usr/libexec/nvct/nvidia-container-runtime-hook, usr/libexec/nvct/nvidia-ctk,
#   usr/libexec/nvct/nvidia-container-runtime
#                                            the dynamic programs the fronts exec (the hooks' with
#                                            a clean environment) for what needs the driver's
#                                            libnvidia-ml, which a static binary cannot load
# A hook entry without `env` (older CDI specs, hand-written hooks.d files) is run by runc with
# the container's environment; a static binary has no loader to obey the image's LD_PRELOAD /
# LD_AUDIT / LD_LIBRARY_PATH (docs/SECURITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release --bins
for b in nvidia-cdi-hook nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime; do
  cargo rustc --locked --release --target-dir target/static --bin "$b" -- -C target-feature=+crt-static
done
rm -rf target/dist
mkdir -p target/dist/usr/bin target/dist/usr/libexec/nvct
for b in nvidia-cdi-hook nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime; do
  install -m 0755 "target/static/release/$b" target/dist/usr/bin/
done
for b in nvidia-ctk-installer nvidia-container-cli; do
  install -m 0755 "target/release/$b" target/dist/usr/bin/
done
for b in nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime; do
  install -m 0755 "target/release/$b" target/dist/usr/libexec/nvct/
done
(cd target/dist && find . -type f | sort)
