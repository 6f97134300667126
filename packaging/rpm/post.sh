# nvidia-container-toolkit %post: installing enables and starts nothing; a running systemd is
# told that the unit files are new or changed.
if [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null 2>&1 || :
fi
