//! Build script: gives the fake NVML (a cdylib, this crate's only target) the SONAME of the
//! real library, `libnvidia-ml.so.1`, so that `ldconfig` in a fake driver root links and caches
//! it exactly as it does the real one. `rustc-link-arg-cdylib` reaches only this crate's
//! shared object, never a binary.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("TARGET")
        .unwrap_or_default()
        .contains("linux-gnu")
    {
        println!("cargo:rustc-link-arg-cdylib=-Wl,-soname,libnvidia-ml.so.1");
    }
}
