//! NVIDIA_REQUIRE_* expressions: `nvct_plan::plan` with a request that only carries requirements
//! (the planner's `check_requirement` / `parse_term` / `compare_versions`), against a host
//! whose driver and CUDA versions also come from the input (hostile or odd NVML strings).
//! Input: `driver\ncuda\nexpr...`. Property: no panic; an expression whose every term is
//! `cuda>=0` or `driver>=0` is always met.

use crate::common;

use nvct_plan::request::{Devices, Request};
use nvct_plan::{self, Layout, PlanError};

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.splitn(3, '\n');
    let (driver, cuda, rest) = (
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
    );
    let cuda = (!cuda.is_empty()).then_some(cuda);
    let inv = common::inventory(driver, cuda);
    let requirements: Vec<String> = rest.lines().map(str::to_string).collect();
    let req = Request {
        requirements,
        ..request_none()
    };
    let _ = nvct_plan::plan(&req, &inv, &Layout::UNKNOWN);

    // Trivially true requirements are met whatever the host reports.
    let req = Request {
        requirements: vec!["driver>=0,cuda>=0".into()],
        ..request_none()
    };
    let got = nvct_plan::plan(&req, &inv, &Layout::UNKNOWN);
    assert!(
        !matches!(
            got,
            Err(PlanError::Unsatisfied { .. } | PlanError::BadRequirement(_))
        ),
        "{got:?}"
    );
}

fn request_none() -> Request {
    nvct_plan::fixtures::request(Devices::None, &[])
}
