#!/usr/bin/env bash
# Release binaries for a real GPU host, into target/dist/: the prestart hook, the runtime shim
# and nvidia-ctk (dynamically linked: they load the driver's libnvidia-ml.so.1), and
# nvidia-cdi-hook statically linked, so that a CDI hook entry without an `env` (older specs,
# hand-written hooks.d files), which runc runs with the container's environment, cannot make
# the loader pull the image's LD_PRELOAD / LD_AUDIT / LD_LIBRARY_PATH libraries into it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release --bins
cargo rustc --locked --release --target-dir target/static --bin nvidia-cdi-hook -- -C target-feature=+crt-static
mkdir -p target/dist
for b in nvidia-container-runtime-hook nvidia-container-runtime nvidia-ctk; do
  install -m 0755 "target/release/$b" target/dist/
done
install -m 0755 target/static/release/nvidia-cdi-hook target/dist/
echo "target/dist: $(ls target/dist | tr '\n' ' ')"
