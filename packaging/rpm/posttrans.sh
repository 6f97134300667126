# nvidia-container-toolkit %posttrans: the config files are not %config files of this package:
# they are written here when missing, from the defaults in /usr/share/nvidia-container-toolkit/,
# and never touched when present. %posttrans runs after the whole transaction, so after a
# switch from upstream's packages it sees what their removal left: upstream's config.toml (their
# %post wrote it; no package owns it) stays as it is, and an nvidia-cdi-refresh.env the operator
# had edited, which rpm saved as .rpmsave when it erased nvidia-container-toolkit-base (our
# Obsoletes), is put back.
install_default() {
    if [ -e "$2" ] || [ -L "$2" ]; then
        return 0
    fi
    if [ -f "$2.rpmsave" ]; then
        mv "$2.rpmsave" "$2"
        echo "nvidia-container-toolkit: $2 restored from $2.rpmsave"
        return 0
    fi
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2.rpmnew-nvct" && mv "$2.rpmnew-nvct" "$2"
}
install_default /usr/share/nvidia-container-toolkit/config.toml /etc/nvidia-container-runtime/config.toml
install_default /usr/share/nvidia-container-toolkit/nvidia-cdi-refresh.env /etc/nvidia-container-toolkit/nvidia-cdi-refresh.env
