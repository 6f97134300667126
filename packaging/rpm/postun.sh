# nvidia-container-toolkit %postun: a running systemd forgets the removed or replaced unit
# files, as RPM's %systemd_postun does.
if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null 2>&1 || :
fi
