# nvidia-container-toolkit %preun: on erase ($1 = 0; an upgrade is 1) the refresh units are
# stopped and disabled, as RPM's %systemd_preun does, and an engine config that still runs this
# package's programs is named with the command that undoes it (the erase edits no engine
# config, as upstream's does not; packaging/debian/prerm does the same).
if [ "$1" -eq 0 ]; then
    if [ -d /run/systemd/system ]; then
        systemctl --system stop nvidia-cdi-refresh.path nvidia-cdi-refresh.service >/dev/null 2>&1 || :
    fi
    if command -v systemctl >/dev/null 2>&1; then
        systemctl --system --no-reload disable nvidia-cdi-refresh.path nvidia-cdi-refresh.service >/dev/null 2>&1 || :
    fi
    nvct_warn_engine() {
        [ -f "$2" ] || return 0
        program=$(grep -sE '^[^#]*nvidia-container-runtime' "$2" |
            grep -oE 'nvidia-container-runtime(-hook)?' | head -n 1) || :
        [ -n "$program" ] || return 0
        echo "nvidia-container-toolkit: warning: $2 still runs $program, which this removal" >&2
        echo "  deletes: $1 can no longer run the containers that use it (none at all, where it is the default)." >&2
        echo "  To undo it: reinstall the package, run \`$3\` and restart $1, then remove the package;" >&2
        echo "  or delete that entry from $2 by hand and restart $1." >&2
    }
    nvct_warn_engine docker /etc/docker/daemon.json "nvidia-ctk runtime unconfigure --runtime=docker"
    for f in /etc/containerd/config.toml /etc/containerd/conf.d/*.toml; do
        case $f in
        /etc/containerd/config.toml | /etc/containerd/conf.d/99-nvidia.toml) undo="nvidia-ctk runtime unconfigure --runtime=containerd" ;;
        *) undo="nvidia-ctk runtime unconfigure --runtime=containerd --drop-in-config=$f" ;;
        esac
        nvct_warn_engine containerd "$f" "$undo"
    done
    for f in /etc/crio/crio.conf /etc/crio/crio.conf.d/*; do
        case $f in
        /etc/crio/crio.conf | /etc/crio/crio.conf.d/99-nvidia.toml) undo="nvidia-ctk runtime unconfigure --runtime=crio" ;;
        *) undo="nvidia-ctk runtime unconfigure --runtime=crio --drop-in-config=$f" ;;
        esac
        nvct_warn_engine crio "$f" "$undo"
    done
    for f in /etc/containers/oci/hooks.d/*.json; do
        nvct_warn_engine "podman and CRI-O" "$f" "nvidia-ctk runtime unconfigure --config-mode=oci-hook --oci-hook-path=$f"
    done
fi
