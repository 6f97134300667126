#!/usr/bin/env bash
# Packages for a GPU host, from a clean checkout:
#   target/package/nvidia-container-toolkit_<version>_<arch>.deb      (apt-get install ./, dpkg -i)
#   target/package/nvidia-container-toolkit-<version>-1.<arch>.rpm    (rpm -i, dnf install)
# <version> is Cargo.toml's; the packages' own version carries the epoch 1 (1:<version>), so
# that it sorts above every upstream version (docs/COMPAT.md, "Switching from upstream's
# packages"). Both hold the same files:
#   usr/bin, usr/libexec/nvct   the install tree of scripts/build-release.sh (static fronts in
#                               usr/bin that exec the dynamic programs in usr/libexec/nvct when
#                               they need the driver's NVML; nvidia-cdi-hook static;
#                               nvidia-ctk-installer and nvidia-container-cli dynamic, in usr/bin)
#   usr/bin/nvidia-container-toolkit   a link to nvidia-container-runtime-hook (upstream's
#                               postinst makes it; older hooks.d files name it)
#   usr/share/nvidia-container-toolkit/{config.toml,nvidia-cdi-refresh.env}   the defaults of
#                               /etc/nvidia-container-runtime/config.toml and
#                               /etc/nvidia-container-toolkit/nvidia-cdi-refresh.env, which the
#                               maintainer scripts write when missing: no conffiles (an upgrade,
#                               a removal or a switch from upstream's packages keeps the
#                               operator's files as they are, and never asks)
#   lib/systemd/system/nvidia-cdi-refresh.{service,path} and its drop-in
#   nvidia-cdi-refresh.service.d/10-container-engines.conf (packaging/systemd/): the .deb in
#                               /lib as upstream's .deb (a .deb moving a file between /lib and
#                               /usr/lib loses it on a merged-/usr system), the .rpm in /usr/lib
#   usr/share/containers/oci/hooks.d/oci-nvidia-hook.json      (podman, CRI-O)
#   usr/share/man/man1/nvidia-ctk*.1.gz, bash/zsh/fish completions of nvidia-ctk: written by
#                               the freshly built nvidia-ctk's hidden `generate-docs`
# Nothing is enabled or started on install: `systemctl enable --now nvidia-cdi-refresh.path`
# is the operator's choice. The maintainer scripts (packaging/debian/{postinst,prerm,postrm},
# packaging/rpm/{post,posttrans,preun,postun}.sh) write the missing config files, reload a
# running systemd after the unit files change, stop and disable the units on removal (not on
# upgrade) and name engine configs that still run the removed programs, and the .deb's purge
# removes the config files and enablement links that are left.
#
# --profile release (default) runs scripts/build-release.sh (LTO). --profile dev packages the
# debug builds scripts/test.sh has already made (target/static/debug/* for the static ones,
# target/debug/* for the dynamic ones), so the suite's package test pays no release build.
#
# dpkg-deb and rpmbuild are used directly rather than cargo-deb or cargo-generate-rpm: those
# would be compiled from crates.io on every fresh CI machine, and the libexec/static-front
# layout would need a hand-written asset list in them anyway; dpkg-deb is on every Debian, and
# rpmbuild is Debian's `rpm` package (scripts/install-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022

usage() {
  echo "usage: scripts/package.sh [--profile release|dev]" >&2
  exit 2
}
profile=release
while [ $# -gt 0 ]; do
  case $1 in
    --profile) [ $# -ge 2 ] || usage; profile=$2; shift 2 ;;
    --profile=*) profile=${1#--profile=}; shift ;;
    -h | --help) usage ;;
    *) echo "package.sh: unknown argument $1" >&2; usage ;;
  esac
done
case $profile in release | dev) ;; *) echo "package.sh: --profile $profile: expected release or dev" >&2; exit 2 ;; esac
for tool in dpkg-deb dpkg rpmbuild gzip; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "package.sh: $tool not found: run scripts/install-deps.sh as root (rpmbuild is in Debian's rpm package)" >&2
    exit 1
  }
done

name=nvidia-container-toolkit
# `path+file:///dir#name@1.2.3`, or `...#1.2.3` when the directory has the package's name.
version=$(cargo pkgid --locked | sed 's/.*[#@]//')
deb_arch=$(dpkg --print-architecture)
case $deb_arch in
  amd64) rpm_arch=x86_64 ;;
  arm64) rpm_arch=aarch64 ;;
  *) rpm_arch=$(uname -m) ;;
esac
out=target/package
work=$out/build
rm -rf "$work" "$out/${name}_${version}_${deb_arch}.deb" "$out/${name}-${version}-1.${rpm_arch}.rpm"
stage=$work/root
mkdir -p "$stage/usr/bin" "$stage/usr/libexec/nvct"

# The binaries, in the layout of scripts/build-release.sh.
statics=(nvidia-cdi-hook nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime)
workers=(nvidia-container-runtime-hook nvidia-ctk nvidia-container-runtime)
# Dynamic programs in usr/bin itself: the installer, and nvidia-container-cli (`info` loads the
# driver's libnvidia-ml; the engines that exec it run it by that name from PATH).
dynamics=(nvidia-ctk-installer nvidia-container-cli)
if [ "$profile" = release ]; then
  scripts/build-release.sh >/dev/null
  cp -a target/dist/usr/. "$stage/usr/"
else
  for b in "${statics[@]}"; do
    f=target/static/debug/$b
    [ -x "$f" ] || { echo "package.sh: $f missing: --profile dev packages what scripts/test.sh builds (cargo rustc --locked --all-features --target-dir target/static --bin $b -- -C target-feature=+crt-static)" >&2; exit 1; }
    install -m 0755 "$f" "$stage/usr/bin/"
  done
  for b in "${dynamics[@]}" "${workers[@]}"; do
    f=target/debug/$b
    [ -x "$f" ] || { echo "package.sh: $f missing: --profile dev packages what scripts/test.sh builds (cargo build --locked --bins --all-features)" >&2; exit 1; }
  done
  for b in "${dynamics[@]}"; do
    install -m 0755 "target/debug/$b" "$stage/usr/bin/"
  done
  for b in "${workers[@]}"; do
    install -m 0755 "target/debug/$b" "$stage/usr/libexec/nvct/"
  done
fi

# The default config files, units, the OCI hook, upstream's link.
install -D -m 0644 config/config.toml "$stage/usr/share/$name/config.toml"
install -D -m 0644 packaging/systemd/nvidia-cdi-refresh.env "$stage/usr/share/$name/nvidia-cdi-refresh.env"
for unit in nvidia-cdi-refresh.service nvidia-cdi-refresh.path nvidia-cdi-refresh.service.d/10-container-engines.conf nvidia-containerd-dropin.service nvidia-containerd-dropin.path; do
  install -D -m 0644 "packaging/systemd/$unit" "$stage/usr/lib/systemd/system/$unit"
done
ln -s nvidia-container-runtime-hook "$stage/usr/bin/nvidia-container-toolkit"
install -D -m 0644 packaging/oci-hooks.d/oci-nvidia-hook.json "$stage/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json"

# Man pages and completions, from the nvidia-ctk just staged (its static front runs the staged
# worker in usr/libexec/nvct: this also checks that the pair works).
"$stage/usr/bin/nvidia-ctk" -q generate-docs --output "$work/docs"
mkdir -p "$stage/usr/share/man/man1"
for page in "$work"/docs/man1/*.1; do
  gzip -9n <"$page" >"$stage/usr/share/man/man1/$(basename "$page").gz"
done
install -D -m 0644 "$work/docs/completions/nvidia-ctk.bash" "$stage/usr/share/bash-completion/completions/nvidia-ctk"
install -D -m 0644 "$work/docs/completions/_nvidia-ctk" "$stage/usr/share/zsh/vendor-completions/_nvidia-ctk"
install -D -m 0644 "$work/docs/completions/nvidia-ctk.fish" "$stage/usr/share/fish/vendor_completions.d/nvidia-ctk.fish"
mkdir -p "$stage/usr/share/doc/$name"
cat >"$stage/usr/share/doc/$name/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: $name (nvct)

Files: *
License: Apache-2.0
 On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0.
EOF

maintainer=${NVCT_PACKAGE_MAINTAINER:-nvct developers <nvct@localhost>}
summary="Gives containers their NVIDIA GPUs (OCI hook, runtime shim, nvidia-ctk, CDI)"
description="A drop-in replacement, in Rust, for the NVIDIA container toolkit: the prestart
hook nvidia-container-runtime-hook, the runtime shim nvidia-container-runtime, nvidia-ctk
(runtime configure, cdi generate, config), the CDI hooks nvidia-cdi-hook, and
nvidia-container-cli (libnvidia-container's info, list and configure, for LXC, Incus,
enroot, Apptainer and Charliecloud), with the nvidia-cdi-refresh systemd units that keep
/var/run/cdi/nvidia.yaml up to date."
# The version of the packages: epoch 1, above every upstream version (none has an epoch), so
# that apt and dnf never see NVIDIA's repository's nvidia-container-toolkit as an upgrade.
epoch=1
# Upstream's packages whose files ours holds: nvidia-container-toolkit-base (nvidia-ctk,
# nvidia-container-runtime, nvidia-cdi-hook, the units, the env file), libnvidia-container-tools
# (nvidia-container-cli; its library package libnvidia-container1 holds no file of ours and
# stays) and the pre-1.6 packages (upstream's own Breaks/Replaces boundaries). Upstream's
# nvidia-container-toolkit is this package's name: ours is its next version.
replaced_deb="nvidia-container-toolkit-base, libnvidia-container-tools, nvidia-container-runtime (<= 3.5.0-1), nvidia-container-runtime-hook"

# --- .deb
# Depends: the Debian package of each shared library the dynamic programs load (their ELF
# NEEDED entries; objdump is in binutils, which gcc brings), glibc at least at the newest
# GLIBC_x.y symbol version they reference.
dynamic=("${dynamics[@]/#/$stage/usr/bin/}" "$stage"/usr/libexec/nvct/*)
depends=()
for so in $(objdump -p "${dynamic[@]}" | awk '$1 == "NEEDED" {print $2}' | sort -u); do
  case $so in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*.so.*) pkg=libc6 ;;
    libgcc_s.so.1) pkg=libgcc-s1 ;;
    *)
      echo "package.sh: the dynamic programs need $so, whose Debian package scripts/package.sh does not know: add it to the Depends map" >&2
      exit 1
      ;;
  esac
  [[ " ${depends[*]} " == *" $pkg "* ]] || depends+=("$pkg")
done
glibc=$(objdump -T "${dynamic[@]}" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
depends_line=$(for pkg in "${depends[@]}"; do
  if [ "$pkg" = libc6 ] && [ -n "$glibc" ]; then echo "libc6 (>= $glibc)"; else echo "$pkg"; fi
done | paste -sd, - | sed 's/,/, /g')
# Release packages are compressed hard; the suite's dev packages (debug binaries, ~100 MB)
# quickly.
if [ "$profile" = release ]; then
  deb_compress=(-Zxz)
  rpm_payload=w9.xzdio
else
  deb_compress=(-Zgzip -z1)
  rpm_payload=w1.gzdio
fi
deb=$work/deb
cp -a "$stage" "$deb"
# The units in /lib/systemd/system, where upstream's .deb has them.
mkdir -p "$deb/lib"
mv "$deb/usr/lib/systemd" "$deb/lib/systemd"
rmdir --ignore-fail-on-non-empty "$deb/usr/lib"
mkdir -p "$deb/DEBIAN"
for script in postinst prerm postrm; do
  install -m 0755 "packaging/debian/$script" "$deb/DEBIAN/$script"
done
(cd "$deb" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$deb/DEBIAN/md5sums"
{
  echo "Package: $name"
  echo "Version: $epoch:$version"
  echo "Architecture: $deb_arch"
  echo "Maintainer: $maintainer"
  echo "Installed-Size: $(du -sk --exclude=DEBIAN "$deb" | cut -f1)"
  echo "Depends: $depends_line"
  # Provides: a package that depends on upstream's base package or on its
  # libnvidia-container-tools (nvidia-container-cli) finds it here; Conflicts and Replaces: apt
  # removes those packages when this one comes (dpkg -i alone needs --auto-deconfigure:
  # upstream's old nvidia-container-toolkit depends on them; dpkg then removes the base package
  # only, and postinst names the tools package left: docs/COMPAT.md).
  echo "Provides: nvidia-container-toolkit-base (= $epoch:$version), libnvidia-container-tools (= $epoch:$version)"
  echo "Conflicts: $replaced_deb"
  echo "Replaces: $replaced_deb"
  echo "Section: utils"
  echo "Priority: optional"
  echo "Description: $summary"
  sed 's/^/ /' <<<"$description"
} >"$deb/DEBIAN/control"
dpkg-deb --root-owner-group "${deb_compress[@]}" --build "$deb" "$out/${name}_${version}_${deb_arch}.deb" >/dev/null

# --- .rpm
# Every file of the staged tree (no %config file: %posttrans writes the config files when
# missing, as the .deb's postinst does); the package's own directories owned by it. rpmbuild's
# post-processing (stripping, compressing man pages again, build-id links, debuginfo) is off:
# the payload is exactly the staged tree, the same files as the .deb.
files=$work/files.list
{
  echo '%defattr(-,root,root,-)'
  for d in /usr/libexec/nvct "/usr/share/$name" /usr/lib/systemd/system/nvidia-cdi-refresh.service.d "/usr/share/doc/$name"; do
    echo "%dir $d"
  done
  (cd "$stage" && find . ! -type d -printf '/%P\n' | sort)
} >"$files"
# Obsoletes (rpm's way to replace another package in one transaction: dnf erases upstream's
# base package and its libnvidia-container-tools as this one comes) and Provides, with
# upstream's own boundaries for the pre-1.6 packages.
cat >"$work/$name.spec" <<EOF
Name: $name
Epoch: $epoch
Version: $version
Release: 1
Summary: $summary
License: Apache-2.0
Provides: nvidia-container-toolkit-base = $epoch:$version-1
Obsoletes: nvidia-container-toolkit-base < $epoch:$version-1
Provides: libnvidia-container-tools = $epoch:$version-1
Obsoletes: libnvidia-container-tools < $epoch:$version-1
Provides: nvidia-container-runtime, nvidia-container-runtime-hook
Obsoletes: nvidia-container-runtime <= 3.5.0-1, nvidia-container-runtime-hook <= 1.4.0-2
%define debug_package %{nil}
%define __os_install_post %{nil}
%define _build_id_links none

%description
$description

%install
mkdir -p %{buildroot}
cp -a $PWD/$stage/. %{buildroot}/

%post
$(cat packaging/rpm/post.sh)

%preun
$(cat packaging/rpm/preun.sh)

%postun
$(cat packaging/rpm/postun.sh)

%posttrans
$(cat packaging/rpm/posttrans.sh)

%files -f $PWD/$files
EOF
rpmbuild --quiet -bb --target "$rpm_arch" \
  --define "_binary_payload $rpm_payload" \
  --define "_topdir $PWD/$work/rpmbuild" \
  --define "_rpmdir $PWD/$out" \
  --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
  "$work/$name.spec" >/dev/null

ls -1 "$out/${name}_${version}_${deb_arch}.deb" "$out/${name}-${version}-1.${rpm_arch}.rpm"
