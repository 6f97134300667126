# nvidia-container-toolkit %preun: on erase ($1 = 0; an upgrade is 1) the refresh units are
# stopped and disabled, as RPM's %systemd_preun does.
if [ "$1" -eq 0 ]; then
    if [ -d /run/systemd/system ]; then
        systemctl --system stop nvidia-cdi-refresh.path nvidia-cdi-refresh.service >/dev/null 2>&1 || :
    fi
    if command -v systemctl >/dev/null 2>&1; then
        systemctl --system --no-reload disable nvidia-cdi-refresh.path nvidia-cdi-refresh.service >/dev/null 2>&1 || :
    fi
fi
