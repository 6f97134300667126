//! Keeps the suite's mount-table checks apart from the container engines that mount on the
//! host. Every area runs in one test process, so a hook test comparing the host's mount table
//! around its container (`Bundle::run`) could run while another area's podman, dockerd or
//! containerd (CRI) holds a container's shm, netns or rootfs mount on the host: the check would
//! fail on a mount that is not ours.
//!
//! A test that starts such an engine holds [`engine`] for as long as the engine runs (the
//! daemon structs hold it; podman's runs take it); a mount-table comparison holds [`quiet`]
//! around its before and after. Engines exclude the comparisons and each other; comparisons
//! run together, as they did in one area's binary before. A test that is itself an engine
//! test (it holds [`engine`]) compares without waiting: nothing else runs then.

#![allow(dead_code)]

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

static LOCK: RwLock<()> = RwLock::new(());

thread_local! {
    /// This test thread's nested [`Engine`]s (a test may start two daemons) and the one
    /// write guard they share.
    static HELD: RefCell<(usize, Option<RwLockWriteGuard<'static, ()>>)> =
        const { RefCell::new((0, None)) };
}

/// Held while an engine that mounts on the host runs; released on drop. Not `Send`: it belongs
/// to the test thread that took it.
pub struct Engine(PhantomData<*const ()>);

/// Waits until no mount-table comparison runs, then keeps them (and other engines) out until
/// the returned [`Engine`] (and every other one this thread holds) is dropped.
pub fn engine() -> Engine {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.0 == 0 {
            held.1 = Some(LOCK.write().unwrap_or_else(PoisonError::into_inner));
        }
        held.0 += 1;
    });
    Engine(PhantomData)
}

impl Drop for Engine {
    fn drop(&mut self) {
        HELD.with(|held| {
            let mut held = held.borrow_mut();
            held.0 -= 1;
            if held.0 == 0 {
                held.1 = None;
            }
        });
    }
}

/// Held around a comparison of the host's mount table: waits until no engine runs. `None`
/// when this thread runs an engine itself (it already keeps every other one out).
pub fn quiet() -> Option<RwLockReadGuard<'static, ()>> {
    if HELD.with(|held| held.borrow().0 > 0) {
        return None;
    }
    Some(LOCK.read().unwrap_or_else(PoisonError::into_inner))
}
