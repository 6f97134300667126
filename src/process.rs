//! What every hook binary (the prestart hook, `nvidia-cdi-hook`, `nvidia-ctk hook`) does first:
//! drop the dynamic loader's variables from its own environment, so that nothing it starts
//! inherits them (a hook is started by the runtime, sometimes with the container's
//! environment), and, in test builds with the `fault-injection` feature only, arm the rootfs
//! check-then-use swap from `NVCT_FAULT_SWAP_PATH` / `NVCT_FAULT_SWAP_TARGET`.

/// Call at the top of `main`, before any thread exists.
pub fn start_hook() {
    for (k, _) in std::env::vars_os() {
        if k.as_encoded_bytes().starts_with(b"LD_") || k == "GCONV_PATH" {
            std::env::remove_var(k);
        }
    }
    #[cfg(feature = "fault-injection")]
    if let (Some(p), Some(t)) = (
        std::env::var_os("NVCT_FAULT_SWAP_PATH"),
        std::env::var_os("NVCT_FAULT_SWAP_TARGET"),
    ) {
        crate::container::rootfs::fault::arm(p.into(), t.into());
    }
}
