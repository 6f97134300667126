//! The integration suite: one test binary (`cargo test --test suite`), a module per area, all
//! sharing [`common`] (the simulated GPU host, OCI bundles, the daemons). One binary links the
//! helpers and the library once instead of once per area.
//!
//! Host kinds: the container tests run on the kind of GPU node `NVCT_TEST_HOST` names
//! (`common::hostkind`: cgroup v1, cgroup v2, Ubuntu's ldconfig wrapper). A test whose outcome
//! depends on that kind (the device cgroup rules, ldconfig and the ld cache, the mount table and
//! cgroup mounts the tools read) has a name starting with `hostkind_`; scripts/test.sh runs the
//! whole suite once on this machine's cgroup v1 host and then only those tests again on each
//! other kind: `NVCT_TEST_HOST=v2 cargo test --test suite -- hostkind_`.
//!
//! The real-host phase (tests/realhost.rs, a VM) is its own binary: it is `#[ignore]`d here
//! and run last with `--ignored`.

mod common;

mod attacks;
mod bad_input;
mod cdi;
mod cdi_hooks;
mod cri;
mod ctk_config;
mod ctk_docs;
mod docker;
mod doctor;
mod fakehost;
mod hook;
mod installer;
mod k8s_manifests;
mod package;
mod race;
mod runtime_configure;
mod shim;
mod shim_cdi;
mod shim_containerd;
mod shim_log;
