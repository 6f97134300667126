//! Every fuzz target on stable: its seeds and regressions as they are, then mutants
//! (`NVCT_FUZZ_MUTANTS` each, default 2000; `NVCT_FUZZ_SEED`, default 1). One test per target.

use nvct_fuzz::replay;
use std::path::Path;

fn replay_target(name: &str) {
    let (_, target) = nvct_fuzz::targets::ALL
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no target {name}"));
    let env = |k: &str, default: u64| {
        std::env::var(k).ok().map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{k}={v}: not a number"))
        })
    };
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let report = replay::run(
        fuzz_dir,
        name,
        *target,
        env("NVCT_FUZZ_MUTANTS", 2000),
        env("NVCT_FUZZ_SEED", 1),
    );
    assert!(report.runs > 0, "{name}: nothing ran");
    eprintln!(
        "{name}: {} seed/regression inputs, {} runs",
        report.replayed, report.runs
    );
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {
        $(#[test]
        fn $name() {
            replay_target(stringify!($name));
        })*

        #[test]
        fn every_target_has_a_replay_test() {
            let tested = [$(stringify!($name)),*];
            for (name, _) in nvct_fuzz::targets::ALL {
                assert!(tested.contains(name), "add {name} to replay_tests!");
            }
        }
    };
}

replay_tests!(
    cdi_spec,
    config_json,
    containerd_config,
    crio_config,
    dbus_reply,
    device_rules,
    devices,
    docker_config,
    elf,
    hook_state,
    ldcache,
    request_env,
    requirements,
    syslog_line,
    toolkit_config,
    unit_name,
);
