//! `fake_host`: builds a [`FakeHost`] (a GPU host without a GPU) in a directory, for manual
//! experiments and demos. The builder itself lives in `tests/suite/common/fakehost.rs`.
//!
//! Usage: `fake_host --gpus N [--mig] [--driver-version V] DIR` (as root, after
//! `cargo build --examples`).

#[path = "../tests/suite/common/fakehost.rs"]
mod fakehost;

use fakehost::FakeHost;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: fake_host --gpus N [--mig] [--driver-version V] DIR";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("fake_host: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let mut builder = FakeHost::builder();
    let mut dir = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--gpus" => {
                let n = args.next().ok_or(USAGE)?;
                builder = builder.gpus(
                    n.parse()
                        .map_err(|_| format!("--gpus: not a number: {n:?}"))?,
                );
            }
            "--mig" => builder = builder.mig(true),
            "--driver-version" => builder = builder.driver_version(&args.next().ok_or(USAGE)?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if arg.starts_with('-') || dir.is_some() => {
                return Err(format!("unexpected argument {arg:?}\n{USAGE}"))
            }
            _ => dir = Some(PathBuf::from(arg)),
        }
    }
    let dir = dir.ok_or(USAGE)?;
    let host = builder
        .build(&dir)
        .map_err(|e| format!("cannot build a fake host in {}: {e}", dir.display()))?;

    println!(
        "fake host in {} (driver {})",
        host.dir().display(),
        host.driver_version()
    );
    println!("  driver root: {}", host.driver_root().display());
    println!("  dev root:    {}", host.dev_root().display());
    println!("  proc root:   {}", host.proc_root().display());
    println!(
        "  NVML:        {} (topology {})",
        host.nvml_lib().display(),
        host.nvml_config().display()
    );
    for gpu in host.gpus() {
        println!(
            "  GPU {} minor {} {} {} {}",
            gpu.index, gpu.minor, gpu.bus_id, gpu.uuid, gpu.model
        );
        for mig in &gpu.migs {
            println!(
                "    MIG {}:{} gi {} ci {} {}",
                gpu.index, mig.index, mig.gi, mig.ci, mig.uuid
            );
        }
    }
    println!("  {} device nodes", host.device_nodes().len());
    Ok(())
}
