//! The CDI spec files: the `cdi specs` checks, file-level (a file that does not parse,
//! conflicting or shadowed specs, no nvidia.com spec where mode is "cdi") and one per
//! nvidia.com spec (nothing it names is stale on this host).

use super::{check, ok, Check, Status};
use nvct_cdi::{self as cdi, list};
use nvct_formats::config::{Config, Mode};
use nvct_model::Inventory;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The CDI spec directories as the CDI library reads them: the file-level checks (a file that
/// does not parse, two files of one directory defining the same devices, a spec shadowed by a
/// later directory's, no nvidia.com spec when mode is "cdi"), which need no driver, and the
/// nvidia.com specs, each of which [`stale_check`] compares with this host.
pub(super) struct CdiFound {
    pub(super) files: Vec<Check>,
    pub(super) nvidia: Vec<(PathBuf, cdi::Spec)>,
}

pub(super) fn cdi_checks(dirs: &[PathBuf], config: &Config) -> CdiFound {
    let name = "cdi specs";
    let dirs_text = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let (specs, warnings) = list::load(dirs);
    let mut out: Vec<Check> = warnings
        .iter()
        .map(|w| {
            check(
                name,
                Status::Fail,
                w.clone(),
                "regenerate it: `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml` (and remove the broken file)",
            )
        })
        .collect();
    // As the CDI library resolves them: a later directory wins, two files of one directory
    // defining a device conflict.
    let resolution = cdi::resolve::resolve(&specs);
    out.extend(list::conflict_texts(&resolution.conflicts).into_iter().map(|text| {
        check(
            name,
            Status::Fail,
            text,
            "remove one of the two files (keep the one `nvidia-ctk cdi generate` or the nvidia-cdi-refresh unit writes)",
        )
    }));
    out.extend(list::shadow_texts(&resolution.shadowed).into_iter().map(|text| {
        check(
            name,
            Status::Warn,
            format!("{text}; containers get the later file's devices"),
            "remove the shadowed file so that only one spec describes the devices (NVIDIA's install guide writes /etc/cdi/nvidia.yaml, the nvidia-cdi-refresh unit /var/run/cdi/nvidia.yaml)",
        )
    }));
    let nvidia: Vec<(PathBuf, cdi::Spec)> = specs
        .into_iter()
        .filter(|f| f.spec.kind.starts_with("nvidia.com/"))
        .map(|f| (f.path, f.spec))
        .collect();
    if nvidia.is_empty() {
        let needed = matches!(config.runtime.mode, Mode::Cdi);
        out.push(check(
            name,
            if needed { Status::Fail } else { Status::Ok },
            format!(
                "no nvidia.com spec in {dirs_text}{}",
                if needed {
                    " and mode is \"cdi\""
                } else {
                    " (only CDI requests need one)"
                }
            ),
            if needed {
                "`nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`"
            } else {
                ""
            },
        ));
    }
    CdiFound { files: out, nvidia }
}

/// One nvidia.com spec against this host: every GPU/MIG UUID, device node and file it names
/// exists.
pub(super) fn stale_check(path: &Path, spec: &cdi::Spec, inv: &Inventory) -> Check {
    let name = "cdi specs";
    let uuids: BTreeSet<&str> = inv
        .gpus
        .iter()
        .flat_map(|g| {
            std::iter::once(g.uuid.as_str()).chain(g.migs.iter().map(|m| m.uuid.as_str()))
        })
        .collect();
    let stale = stale_parts(spec, &uuids);
    if stale.is_empty() {
        return ok(
            name,
            format!(
                "{}: {} devices of {}, valid, every UUID, node and file exists on this host",
                path.display(),
                spec.devices.len(),
                spec.kind
            ),
        );
    }
    check(
        name,
        Status::Fail,
        format!(
            "{} is stale (written for another driver or other GPUs): {}",
            path.display(),
            stale.join(", ")
        ),
        format!(
            "regenerate it: `nvidia-ctk cdi generate --output={}`",
            path.display()
        ),
    )
}

/// What a spec names that this host does not have: GPU/MIG UUIDs, device nodes, mounted files.
fn stale_parts(spec: &cdi::Spec, uuids: &BTreeSet<&str>) -> Vec<String> {
    let mut out = BTreeSet::new();
    let edits = std::iter::once(&spec.container_edits)
        .chain(spec.devices.iter().map(|d| &d.container_edits));
    for d in &spec.devices {
        if (d.name.starts_with("GPU-") || d.name.starts_with("MIG-"))
            && !uuids.contains(d.name.as_str())
        {
            out.insert(format!("device {}", d.name));
        }
    }
    for e in edits {
        for n in &e.device_nodes {
            let host = n.host_path.as_deref().unwrap_or(&n.path);
            if !Path::new(host).exists() {
                out.insert(format!("node {host}"));
            }
        }
        for m in &e.mounts {
            if !Path::new(&m.host_path).exists() {
                out.insert(format!("file {}", m.host_path));
            }
        }
    }
    let mut v: Vec<String> = out.into_iter().collect();
    if v.len() > 8 {
        let more = v.len() - 8;
        v.truncate(8);
        v.push(format!("and {more} more"));
    }
    v
}
