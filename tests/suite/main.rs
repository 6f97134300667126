//! The integration suite: one test binary (`cargo test --test suite`), a module per area, all
//! sharing [`common`] (the simulated GPU host, OCI bundles, the daemons). One binary links the
//! helpers and the library once instead of once per area.
//!
//! Host kinds: the container tests run on the kind of GPU node `NVCT_TEST_HOST` names
//! (`common::hostkind`: this machine's cgroup v1, a cgroup v2 host, an Ubuntu-like host whose
//! `/sbin/ldconfig` is a wrapper script). scripts/test.sh runs every test once on the v1 host,
//! then again on each other kind only the tests whose outcome depends on the kind: the device
//! cgroup (v1 `devices.allow` or v2's eBPF program), ldconfig and the ld cache, the library
//! layout the cache lists, the mount table and `/run` as the runtime sees them, and the checks
//! of `nvidia-ctk doctor` that read them. Each area names those in its `each_host_kind!` list at
//! its end, which puts them in its `each_host_kind` module
//! (`attacks::each_host_kind::device_isolation_in_both_paths`); the re-run is
//! `NVCT_TEST_HOST=v2 cargo test --test suite -- ::each_host_kind::`. A test that only
//! starts a GPU container on the way to other assertions (files, nodes, logs, refusals) is not
//! in the list: the listed ones already fail on a kind where a start does.
//!
//! The real-host phase (tests/realhost.rs, a VM) is its own binary: it is `#[ignore]`d here
//! and run last with `--ignored`.

/// `each_host_kind! { /// why
/// name, ... }`: the area's tests `name` (plain functions above, no `#[test]` of their own)
/// as `#[test]`s of its `each_host_kind` module, which scripts/test.sh runs on every host kind.
macro_rules! each_host_kind {
    ($($(#[doc = $why:literal])* $name:ident,)*) => {
        mod each_host_kind {
            $(
                $(#[doc = $why])*
                #[test]
                fn $name() {
                    super::$name()
                }
            )*
        }
    };
}

mod common;

mod attacks;
mod bad_input;
mod cdi;
mod cdi_hooks;
mod container_cli;
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
