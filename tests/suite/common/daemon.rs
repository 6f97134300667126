//! Stopping a daemon a test started (containerd, dockerd): SIGTERM, a grace period, SIGKILL.

use std::process::Child;
use std::time::{Duration, Instant};

pub fn stop(child: &mut Child, grace: Duration) {
    let _ = nvct_sys::process::kill(child.id() as i32, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
