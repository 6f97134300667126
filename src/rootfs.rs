//! (placeholder: rootfs)
