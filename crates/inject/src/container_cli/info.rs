//! `nvidia-container-cli info [--csv]`: the driver and its GPUs in libnvidia-container's two
//! formats. Plain: `%-15s %s` lines (`NVRM version:`, `CUDA version:`, then per GPU a blank
//! line and its index, minor, model, brand, UUID, bus location, architecture). CSV (what Incus
//! and LXD parse by column, keyed by the bus location): a header and values line for the
//! driver, an empty line, a header and one unquoted row per GPU. The bus location is
//! `%08x:%02x:%02x.0`, lower case.

use super::{read_host, CliError, Globals, Phase};
use nvct_formats::config::Config;
use nvct_host::discover::Files;
use nvct_model::{Gpu, Inventory, Needs};

/// The host's driver and GPUs as `info` prints them (NVML is needed: brand, CUDA version and
/// architecture are its answers).
pub fn info(globals: &Globals, config: &Config, csv: bool) -> Result<String, CliError> {
    let root = globals.driver(config)?;
    let none = Needs {
        drm: false,
        lib32: false,
        configs: false,
    };
    let inv = read_host(&root, true, Files::Devices(none))?;
    if inv.driver_version.is_empty() {
        return Err(CliError::new(
            Phase::Detection,
            "the driver's version is not known (no /proc/driver/nvidia/version, no NVML)",
        ));
    }
    Ok(format(&inv, csv))
}

/// PURE: the text of `info` for `inv`.
pub fn format(inv: &Inventory, csv: bool) -> String {
    let cuda = inv.cuda_version.clone().unwrap_or_default();
    let mut out = String::new();
    if csv {
        out += "NVRM version,CUDA version\n";
        out += &format!("{},{cuda}\n\n", inv.driver_version);
        out += "Device Index,Device Minor,Model,Brand,GPU UUID,Bus Location,Architecture\n";
        for (i, g) in inv.gpus.iter().enumerate() {
            let f = fields(g);
            out += &format!(
                "{i},{},{},{},{},{},{}\n",
                g.minor, f[0], f[1], f[2], f[3], f[4]
            );
        }
        return out;
    }
    let line = |label: &str, value: &str| format!("{:<15} {value}\n", label);
    out += &line("NVRM version:", &inv.driver_version);
    out += &line("CUDA version:", &cuda);
    for (i, g) in inv.gpus.iter().enumerate() {
        let f = fields(g);
        out += "\n";
        out += &line("Device Index:", &i.to_string());
        out += &line("Device Minor:", &g.minor.to_string());
        out += &line("Model:", &f[0]);
        out += &line("Brand:", &f[1]);
        out += &line("GPU UUID:", &f[2]);
        out += &line("Bus Location:", &f[3]);
        out += &line("Architecture:", &f[4]);
    }
    out
}

/// Model, brand, UUID, bus location, architecture.
fn fields(g: &Gpu) -> [String; 5] {
    [
        g.model.clone(),
        brand_name(&g.brand).to_string(),
        g.uuid.clone(),
        bus_location(&g.bus_id),
        g.compute_capability.clone().unwrap_or_default(),
    ]
}

/// `0000:3b:00.0` → `00000000:3b:00.0` (libnvidia-container's `%08x:%02x:%02x.0`).
fn bus_location(bus_id: &str) -> String {
    let parts: Vec<&str> = bus_id.split([':', '.']).collect();
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    match parts.as_slice() {
        [d, b, s, _] => match (hex(d), hex(b), hex(s)) {
            (Some(d), Some(b), Some(s)) => format!("{d:08x}:{b:02x}:{s:02x}.0"),
            _ => bus_id.to_lowercase(),
        },
        _ => bus_id.to_lowercase(),
    }
}

/// NVML's brand (our lower-case name of it) as libnvidia-container prints it; `Unknown` for
/// one it does not name.
pub fn brand_name(brand: &str) -> &'static str {
    const NAMES: &[&str] = &[
        "Quadro",
        "Tesla",
        "NVS",
        "GRID",
        "GeForce",
        "TITAN",
        "VApps",
        "VPC",
        "VCS",
        "VWS",
        "CloudGaming",
        "QuadroRTX",
        "NvidiaRTX",
        "Nvidia",
        "GeForceRTX",
        "TitanRTX",
    ];
    let want = brand.replace(['_', ' '], "");
    NAMES
        .iter()
        .find(|n| n.eq_ignore_ascii_case(&want))
        .copied()
        .unwrap_or("Unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, bus_id: &str, brand: &str, cc: Option<&str>) -> Gpu {
        Gpu {
            index,
            minor: index,
            uuid: format!("GPU-{index}"),
            bus_id: bus_id.into(),
            model: "NVIDIA A100-SXM4-40GB".into(),
            brand: brand.into(),
            memory_mib: 0,
            persistence_mode: None,
            compute_capability: cc.map(String::from),
            mig_enabled: false,
            migs: Vec::new(),
        }
    }

    fn inventory(gpus: Vec<Gpu>) -> Inventory {
        Inventory {
            driver_version: "550.54.14".into(),
            cuda_version: Some("12.4".into()),
            gpus,
            nodes: Vec::new(),
            drm: Default::default(),
            mig_minors: Default::default(),
            files: Vec::new(),
            proc_driver: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn both_formats() {
        let inv = inventory(vec![
            gpu(0, "0000:07:00.0", "nvidia", Some("8.0")),
            gpu(1, "0000:0A:00.0", "geforcertx", None),
        ]);
        assert_eq!(
            format(&inv, false),
            "NVRM version:   550.54.14\nCUDA version:   12.4\n\n\
             Device Index:   0\nDevice Minor:   0\nModel:          NVIDIA A100-SXM4-40GB\n\
             Brand:          Nvidia\nGPU UUID:       GPU-0\nBus Location:   00000000:07:00.0\n\
             Architecture:   8.0\n\n\
             Device Index:   1\nDevice Minor:   1\nModel:          NVIDIA A100-SXM4-40GB\n\
             Brand:          GeForceRTX\nGPU UUID:       GPU-1\nBus Location:   00000000:0a:00.0\n\
             Architecture:   \n"
        );
        assert_eq!(
            format(&inv, true),
            "NVRM version,CUDA version\n550.54.14,12.4\n\n\
             Device Index,Device Minor,Model,Brand,GPU UUID,Bus Location,Architecture\n\
             0,0,NVIDIA A100-SXM4-40GB,Nvidia,GPU-0,00000000:07:00.0,8.0\n\
             1,1,NVIDIA A100-SXM4-40GB,GeForceRTX,GPU-1,00000000:0a:00.0,\n"
        );
        assert_eq!(
            format(&inventory(Vec::new()), false),
            "NVRM version:   550.54.14\nCUDA version:   12.4\n"
        );
    }

    #[test]
    fn brand_cases() {
        // (our name, libnvidia-container's)
        let cases = [
            ("tesla", "Tesla"),
            ("geforce", "GeForce"),
            ("titan", "TITAN"),
            ("nvidiartx", "NvidiaRTX"),
            ("quadro_rtx", "QuadroRTX"),
            ("grid", "GRID"),
            ("", "Unknown"),
            ("vgaming", "Unknown"),
        ];
        for (ours, want) in cases {
            assert_eq!(brand_name(ours), want, "case {ours:?}");
        }
    }
}
