//! Shared helpers for the integration tests: the [`fakehost::FakeHost`] builder.

pub mod bundle;
pub mod containerd;
pub mod daemon;
pub mod dockerd;
pub mod engines;
pub mod fakehost;
pub mod hostkind;
pub mod installer;
