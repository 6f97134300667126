//! The real-host phase: a Debian 12 VM (Debian's kernel, systemd, cgroup v2, runc, crun,
//! containerd, podman, docker.io) booted under qemu by `scripts/realhost/run.sh`, turned into a
//! fake 8-GPU node, where `scripts/realhost/guest/phase.sh` runs the engine and systemd checks
//! the simulated hosts cannot give. This test runs the phase once and judges its result file
//! case by case (the table below), with each failed case's log and the guest's journal.
//!
//! Minutes of wall time (an image build the first time, then a TCG boot and the checks), so
//! it is `#[ignore]`d in the plain suite; scripts/test.sh runs it on its own with `--ignored`.
//! Needs root, the tools and examples built, and the .deb of `scripts/package.sh` in
//! `NVCT_PACKAGE_DIR` (run.sh names whatever is missing). `NVCT_REALHOST_OUT` names the result
//! directory (default `target/realhost`); run.sh's own variables pass through.

#[path = "suite/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every case of guest/phase.sh, in its order.
const CASES: &[&str] = &[
    "setup/fake-host",
    "deb/install-units",
    "setup/config",
    "setup/rootfs",
    "setup/cdi-spec",
    // Issue 20 item 1: `runtime configure` on Debian's stock containerd config.
    "containerd/cri",
    // Item 2: CDI hooks under crun; runc is the control.
    "podman/crun-cdi-root",
    "podman/runc-cdi-root",
    // The shim's device rules applied by crun before the prestart hook (issue 24).
    "podman/crun-legacy-shim",
    "podman/crun-cdi-rootless",
    "podman/crun-cdi-rootless-keep-id",
    "docker/gpus",
    // Hostile input round four (issue 35): a scope that is not the container's is not asked.
    "systemd/foreign-scope-runc",
    "systemd/foreign-scope-crun",
    // Real nodes round three (issue 39): no /dev/char links, the shim's rules kept by systemd.
    "systemd/shim-legacy-runc-after-daemon-reload",
    "docker/runtime-nvidia-after-daemon-reload",
    // ... and CDI containers, through the spec's createRuntime hook keep-device-rules.
    "podman/runc-cdi-after-daemon-reload",
    "podman/crun-cdi-after-daemon-reload",
    "podman/hooksd-runc-after-daemon-reload",
    "systemd/runc-hook-after-daemon-reload",
    // Issue 39 (guest/cri_cases.sh, a CRI client in the guest): a pod with handler nvidia and
    // SystemdCgroup keeps GPU 0 across a daemon-reload; a site drop-in's sandbox_image edited
    // after configure is the pod's at the next restart of containerd.
    "containerd/cri-nvidia-systemd-cgroup-after-daemon-reload",
    "containerd/cri-sandbox-image-after-drop-in-edit",
    // Item 5: the hook asks systemd to keep the rules of a container that is a scope.
    "docker/gpus-after-daemon-reload",
    // Issue 34 (guest/arrival.sh): the refresh unit makes the control nodes before the spec;
    // switching from upstream's packages to ours and back, unattended.
    "units/refresh-makes-uvm-nodes",
    "deb/switch-from-upstream-and-back",
    // Issue 39 part 2: the nvidia-containerd-dropin units re-derive containerd's drop-in.
    "containerd/drop-in-units",
    "doctor/configured-node",
    // Real nodes round three: the phase reboots the guest; after the boot, containers keep
    // their GPUs across a daemon-reload with nothing run by hand.
    "reboot/prepare",
    "reboot/gpus-after-daemon-reload",
    // Item 4: the package's maintainer scripts.
    "deb/remove-stops-units",
    "deb/purge-leaves-no-links",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()))
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `results.tsv`: NAME, PASS|FAIL, seconds.
fn parse_results(text: &str) -> Result<BTreeMap<String, (bool, String)>, String> {
    let mut map = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, verdict, secs] = fields[..] else {
            return Err(format!(
                "line {}: 3 tab-separated fields expected: {line:?}",
                n + 1
            ));
        };
        let passed = match verdict {
            "PASS" => true,
            "FAIL" => false,
            _ => return Err(format!("line {}: PASS or FAIL expected: {line:?}", n + 1)),
        };
        if map
            .insert(name.to_string(), (passed, secs.to_string()))
            .is_some()
        {
            return Err(format!("line {}: case {name} twice", n + 1));
        }
    }
    Ok(map)
}

#[test]
fn parse_results_table() {
    let cases: &[(&str, &str, Result<usize, &str>)] = &[
        ("two cases", "a\tPASS\t1\nb/c\tFAIL\t20\n", Ok(2)),
        ("empty", "", Ok(0)),
        ("bad verdict", "a\tOK\t1\n", Err("PASS or FAIL expected")),
        ("short line", "a\tPASS\n", Err("3 tab-separated fields")),
        ("duplicate", "a\tPASS\t1\na\tFAIL\t2\n", Err("case a twice")),
    ];
    for (case, text, want) in cases {
        match (parse_results(text), want) {
            (Ok(map), Ok(n)) => assert_eq!(map.len(), *n, "case {case}"),
            (Err(e), Err(needle)) => assert!(e.contains(needle), "case {case}: {e}"),
            (got, want) => panic!("case {case}: got {got:?}, want {want:?}"),
        }
    }
    let map = parse_results("a\tPASS\t1\nb\tFAIL\t2\n").unwrap();
    assert!(map["a"].0);
    assert!(!map["b"].0);
}

#[test]
#[ignore = "the real-host phase boots a Debian 12 VM (minutes): scripts/test.sh runs it with --ignored"]
fn real_node() {
    common::bundle::require_root();
    let out = std::env::var_os("NVCT_REALHOST_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/realhost"));
    let run = repo().join("scripts/realhost/run.sh");
    let status = Command::new(&run)
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", run.display()));
    assert!(
        status.success(),
        "the real-host phase did not run to its end ({status}): {}\n--- console tail ({})\n{}",
        read(&out.join("status")).trim(),
        out.join("console.log").display(),
        tail(&read(&out.join("console.log")), 60)
    );
    let results = parse_results(&read(&out.join("results.tsv")))
        .unwrap_or_else(|e| panic!("{}: {e}", out.join("results.tsv").display()));
    eprintln!(
        "real-host phase ({}):",
        read(&out.join("timing")).replace('\n', " ").trim()
    );

    let mut failures = Vec::new();
    for name in CASES {
        let log = out
            .join("cases")
            .join(format!("{}.log", name.replace('/', "_")));
        let Some((passed, secs)) = results.get(*name) else {
            failures.push(format!("case {name}: did not run (not in results.tsv)"));
            continue;
        };
        let shown = if *passed {
            "pass"
        } else {
            failures.push(format!(
                "case {name}: FAILED\n--- {}\n{}",
                log.display(),
                tail(&read(&log), 60)
            ));
            "FAIL"
        };
        eprintln!("  {name:<36} {shown} ({secs}s)");
    }
    for name in results.keys() {
        if !CASES.iter().any(|case| case == name) {
            failures.push(format!(
                "case {name}: in results.tsv but not in tests/realhost.rs's CASES: add it"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} real-host cases went wrong:\n\n{}\n\n--- guest journal tail ({})\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n\n"),
        out.join("journal.txt").display(),
        tail(&read(&out.join("journal.txt")), 80)
    );
}
