//! Build script: gives the fake NVML (`examples/fake_nvml.rs`, a cdylib example) the SONAME of
//! the real library, `libnvidia-ml.so.1`, so that `ldconfig` in a fake driver root links and
//! caches it exactly as it does the real one.
//!
//! Why a GCC spec file: Cargo passes `rustc-link-arg-examples` only to *executable* examples,
//! and `rustc-link-arg-cdylib` only to a cdylib *library* target. A plain `-Wl,-soname` for all
//! targets would stamp the SONAME on every binary too (glibc would then answer a later
//! `dlopen("libnvidia-ml.so.1")` with the executable itself). The spec adds `-soname` only when
//! the link is `-shared`, and the fake NVML is the package's only shared object.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    if !target.contains("linux-gnu") {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let specs = out.join("fake-nvml-soname.specs");
    std::fs::write(&specs, "*link:\n+ %{shared:-soname libnvidia-ml.so.1}\n\n")
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", specs.display()));
    println!("cargo:rustc-link-arg=-specs={}", specs.display());
}
