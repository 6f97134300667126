//! The driver's files per capability (upstream's lists; see docs/COMPAT.md): the vocabulary
//! the reader finds files by (`host::driver`) and the planner picks them by (`plan`). Data
//! only.

use super::Capability;

/// Library families per capability (upstream's lists; see docs/COMPAT.md).
pub fn libraries_for(cap: Capability) -> &'static [&'static str] {
    match cap {
        Capability::Utility => &["libnvidia-ml", "libnvidia-cfg", "libnvidia-nscq"],
        Capability::Compute => &[
            "libcuda",
            "libcudadebugger",
            "libnvidia-opencl",
            "libnvidia-gpucomp",
            "libnvidia-ptxjitcompiler",
            "libnvidia-fatbinaryloader",
            "libnvidia-allocator",
            "libnvidia-compiler",
            "libnvidia-pkcs11",
            "libnvidia-pkcs11-openssl3",
            "libnvidia-nvvm",
        ],
        Capability::Video => &[
            "libvdpau_nvidia",
            "libnvidia-encode",
            "libnvidia-opticalflow",
            "libnvcuvid",
        ],
        Capability::Graphics | Capability::Display => &[
            "libnvidia-eglcore",
            "libnvidia-glcore",
            "libnvidia-tls",
            "libnvidia-glsi",
            "libnvidia-fbc",
            "libnvidia-ifr",
            "libnvidia-rtcore",
            "libnvoptix",
            "libGLX_nvidia",
            "libEGL_nvidia",
            "libGLESv2_nvidia",
            "libGLESv1_CM_nvidia",
            "libnvidia-glvkspirv",
            "libnvidia-cbl",
            // GBM's backend (`gbm/nvidia-drm_gbm.so` links to it), as upstream's graphics.
            "libnvidia-allocator",
            // The EGL external platforms the egl_external_platform.d files name; versioned
            // apart from the driver ([`OWN_VERSION`]).
            "libnvidia-egl-gbm",
            "libnvidia-egl-wayland",
            "libnvidia-egl-xcb",
            "libnvidia-egl-xlib",
        ],
        Capability::Ngx => &["libnvidia-ngx"],
        // compat32 adds no family: it adds the 32-bit builds of the other capabilities'.
        Capability::Compat32 => &[],
    }
}

/// Families whose files carry their own version (`libnvidia-egl-wayland.so.1.1.13`), not the
/// driver's: the one regular file `<family>.so.<version>` of a dir is taken.
pub const OWN_VERSION: &[&str] = &[
    "libnvidia-egl-gbm",
    "libnvidia-egl-wayland",
    "libnvidia-egl-xcb",
    "libnvidia-egl-xlib",
];

/// Binaries per capability.
pub fn binaries_for(cap: Capability) -> &'static [&'static str] {
    match cap {
        Capability::Utility => &[
            "nvidia-smi",
            "nvidia-debugdump",
            "nvidia-persistenced",
            "nv-fabricmanager",
        ],
        Capability::Compute => &["nvidia-cuda-mps-control", "nvidia-cuda-mps-server"],
        // As upstream's graphics mounts.
        Capability::Graphics | Capability::Display => &["nvidia-xconfig"],
        _ => &[],
    }
}

/// IPC endpoints per capability (driver-root paths), mounted only if present.
pub fn ipc_for(cap: Capability) -> &'static [&'static str] {
    match cap {
        Capability::Utility => &[
            "/run/nvidia-persistenced/socket",
            "/run/nvidia-fabricmanager/socket",
        ],
        Capability::Compute => &["/tmp/nvidia-mps"],
        _ => &[],
    }
}

/// Directories of the driver's config files per capability, with the text a file name there
/// must contain to be the driver's (driver-root paths; the files keep their paths in the
/// container).
pub fn config_dirs_for(cap: Capability) -> &'static [(&'static str, &'static str)] {
    match cap {
        Capability::Graphics => &[
            ("/usr/share/vulkan/icd.d", "nvidia"),
            ("/etc/vulkan/icd.d", "nvidia"),
            ("/usr/share/vulkan/implicit_layer.d", "nvidia"),
            ("/etc/vulkan/implicit_layer.d", "nvidia"),
            ("/usr/share/glvnd/egl_vendor.d", "nvidia"),
            ("/usr/share/egl/egl_external_platform.d", "nvidia"),
            // OptiX's denoiser weights, and the X server's NVIDIA config snippets, as
            // upstream's graphics discovery (`internal/discover/graphics.go`) has them.
            ("/usr/share/nvidia", "nvoptix.bin"),
            ("/usr/share/X11/xorg.conf.d", "nvidia"),
            ("/etc/X11/xorg.conf.d", "nvidia"),
        ],
        // The OpenCL ICD file that names libnvidia-opencl (a compute library): without it
        // the ICD loader finds no NVIDIA platform.
        Capability::Compute => &[("/etc/OpenCL/vendors", "nvidia")],
        Capability::Display => &[
            ("/usr/lib/xorg/modules/drivers", "nvidia_drv"),
            ("/usr/lib/xorg/modules/extensions", "libglxserver_nvidia"),
        ],
        _ => &[],
    }
}

/// The directory (next to the driver's libraries) that holds `libvdpau_nvidia.so.<version>`;
/// the container gets it at the same place next to its library directory.
pub const VDPAU_DIR: &str = "vdpau";

/// Where the driver's IMEX channel nodes are (`channel0`, `channel1`, ...).
pub const IMEX_CHANNEL_DIR: &str = "/dev/nvidia-caps-imex-channels";
