//! PURE: what one `create` does with a config.json ([`decide`]): pass through, the legacy
//! prestart hook, `cdi` edits of named devices, or `jit-cdi` edits of a [`Request`] made from
//! the names ([`jit_request`]). Every choice of what a mode gives is a line here; the edits
//! themselves are the planner's and `out::cdi_edits`'s.

use super::ShimError;
use nvct_cdi::name::{NameError, QualifiedName};
use nvct_container::edits::HookKind;
use nvct_formats::config::{Config, Mode};
use nvct_formats::oci;
use nvct_plan::request::{self, Capability, ContainerView, DeviceId, Devices, Request};
use oci_spec::runtime::Spec;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What one `create` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Not a GPU container: config.json is not touched.
    PassThrough,
    /// Add our prestart hook, for this request (what the hook will inject: the shim writes its
    /// device rules into the spec too).
    Legacy(Box<request::Request>),
    /// Apply the edits of these devices from the specs of `spec-dirs`.
    Cdi(Vec<QualifiedName>),
    /// Apply edits generated now for these devices and what else the request names.
    JitCdi(Box<JitRequest>),
}

/// A `jit-cdi` container's request (see [`decide`] for what is given and what is not): the
/// names asked for and the [`Request`] they make, planned like any other (`jit_edits`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitRequest {
    /// The devices, of the default kind or [`AUTO_KIND`].
    pub names: Vec<QualifiedName>,
    pub request: Request,
    /// The hooks its edits leave out (`modes.jit-cdi.nvcdi-disable-hooks`, forward
    /// compatibility when the config does not allow it), read once from the config.
    pub disabled_hooks: BTreeSet<HookKind>,
    /// `NVIDIA_REQUIRE_*` (and a legacy CUDA image's `cuda>=`), not evaluated in jit-cdi, as
    /// upstream's jit-cdi; the runtime logs them as such.
    pub unchecked_requirements: Vec<String>,
}

/// The container's CDI request (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CdiRequest {
    pub names: Vec<QualifiedName>,
    /// An annotation or a qualified name asked for CDI explicitly (what `auto` looks at).
    pub explicit: bool,
}

/// Reads the CDI request from annotations and `NVIDIA_VISIBLE_DEVICES`. With `strict` false
/// only `explicit` is computed (bare ids are not converted, so a legacy id can never fail here).
pub fn cdi_request(
    view: &ContainerView,
    annotations: &BTreeMap<String, String>,
    config: &Config,
    strict: bool,
    path: &Path,
) -> Result<CdiRequest, ShimError> {
    let cdi = &config.runtime.modes.cdi;
    let mut out = CdiRequest::default();
    let mut seen = std::collections::HashSet::new();
    for (key, value) in annotations {
        if !cdi
            .annotation_prefixes
            .iter()
            .any(|p| !p.is_empty() && key.starts_with(p.as_str()))
        {
            continue;
        }
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            out.explicit = true;
            let name = QualifiedName::parse(item).map_err(|source| ShimError::CdiName {
                what: format!("annotation {key}={value:?}"),
                source,
            })?;
            if seen.insert(name.to_string()) {
                out.names.push(name);
            }
            if out.names.len() > request::MAX_DEVICE_IDS {
                return Err(ShimError::CdiName {
                    what: format!(
                        "the {prefixes:?} annotations name more than {} devices",
                        request::MAX_DEVICE_IDS,
                        prefixes = cdi.annotation_prefixes
                    ),
                    source: NameError::Empty {
                        what: "a shorter list",
                    },
                });
            }
        }
    }
    if out.explicit {
        return Ok(out);
    }
    let request_err = |source| ShimError::Request {
        path: path.to_path_buf(),
        source,
    };
    let Some(env) =
        request::visible_devices_env(view, config, false, &mut Vec::new()).map_err(request_err)?
    else {
        return Ok(out);
    };
    let items = request::list_items("NVIDIA_VISIBLE_DEVICES", env).map_err(request_err)?;
    if items.contains(&"void") || items.contains(&"none") {
        return Ok(out);
    }
    out.explicit = items.iter().any(|i| i.contains('='));
    if !strict {
        return Ok(out);
    }
    for item in items {
        let parsed = if item.contains('=') {
            QualifiedName::parse(item)
        } else {
            QualifiedName::new(&cdi.default_kind, item)
        };
        let name = parsed.map_err(|source| ShimError::CdiName {
            what: format!("NVIDIA_VISIBLE_DEVICES entry {item:?}"),
            source,
        })?;
        if seen.insert(name.to_string()) {
            out.names.push(name);
        }
    }
    Ok(out)
}

/// Decides what `create` does for the container described by config.json (`bytes`, read
/// from `path`).
pub fn decide(bytes: &[u8], path: &Path, config: &Config) -> Result<Action, ShimError> {
    let spec: Spec = oci::parse_spec(bytes, path)?;
    let view = ContainerView::of(&spec);
    let annotations: BTreeMap<String, String> = spec
        .annotations()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let legacy = || -> Result<Action, ShimError> {
        let resolved = request::resolve(&view, config).map_err(|source| ShimError::Request {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(resolved
            .request
            .map_or(Action::PassThrough, |r| Action::Legacy(Box::new(r))))
    };
    let strict = || cdi_request(&view, &annotations, config, true, path);
    let names = |names: Vec<QualifiedName>| Some(names).filter(|n| !n.is_empty());
    match config.runtime.mode {
        Mode::Legacy => legacy(),
        Mode::Auto if cdi_request(&view, &annotations, config, false, path)?.explicit => {
            Ok(Action::Cdi(strict()?.names))
        }
        Mode::Auto => legacy(),
        Mode::Cdi => Ok(names(strict()?.names).map_or(Action::PassThrough, Action::Cdi)),
        // As upstream: jit-cdi reads NVIDIA_VISIBLE_DEVICES (under the unprivileged policy),
        // never the CDI annotations, which only cdi mode resolves.
        Mode::JitCdi => {
            let env_only = cdi_request(&view, &BTreeMap::new(), config, true, path)?;
            let Some(names) = names(env_only.names) else {
                return Ok(Action::PassThrough);
            };
            let request_err = |source| ShimError::Request {
                path: path.to_path_buf(),
                source,
            };
            let mut jit = jit_request(names, config, path)?;
            // What jit-cdi gives beyond the named devices, one line each (docs/COMPAT.md,
            // "jit-cdi"):
            // - NVIDIA_IMEX_CHANNELS and the opt-in sets (NVIDIA_GDS, ...): as legacy mode.
            // - NVIDIA_MIG_CONFIG_DEVICES / NVIDIA_MIG_MONITOR_DEVICES: as legacy mode (the
            //   config / monitor cap node for a privileged container; an unprivileged one that
            //   sets either is refused); upstream's jit-cdi ignores both.
            // - NVIDIA_REQUIRE_*: not evaluated, as upstream's jit-cdi (its modifier checks
            //   requirements only in csv mode); the runtime logs each one left unchecked, and
            //   mode = "legacy" (or "auto") checks them.
            let r = &mut jit.request;
            r.imex_channels =
                request::imex_channels(&view, config, &mut Vec::new()).map_err(request_err)?;
            r.opt_ins = request::opt_ins(&view);
            r.mig_config = request::privileged_devices(&view, "NVIDIA_MIG_CONFIG_DEVICES")
                .map_err(request_err)?;
            r.mig_monitor = request::privileged_devices(&view, "NVIDIA_MIG_MONITOR_DEVICES")
                .map_err(request_err)?;
            let legacy_cuda = request::is_legacy_cuda_image(&view).map_err(request_err)?;
            jit.unchecked_requirements =
                request::requirements(&view, config, legacy_cuda).map_err(request_err)?;
            Ok(Action::JitCdi(Box::new(jit)))
        }
    }
}

/// The request of jit-cdi names (each of the default kind or [`AUTO_KIND`]; `all` asks for
/// every device a CDI spec's `all` has): their devices, every capability's files (as any CDI
/// spec; beyond upstream's jit-cdi, the 32-bit libraries too, as legacy mode gives them), and
/// forward compatibility as the config allows it. Nothing else (the caller adds what the
/// container's env asks for).
pub fn jit_request(
    names: Vec<QualifiedName>,
    config: &Config,
    path: &Path,
) -> Result<JitRequest, ShimError> {
    let default_kind = &config.runtime.modes.cdi.default_kind;
    let unresolvable = |name: &QualifiedName, why: String| ShimError::JitDevice {
        path: path.to_path_buf(),
        name: name.to_string(),
        why,
    };
    let mut ids: Vec<DeviceId> = Vec::new();
    let mut all = false;
    for name in &names {
        let kind = name.kind();
        if kind != AUTO_KIND && kind != *default_kind {
            return Err(unresolvable(
                name,
                format!("jit-cdi only makes devices of the default kind {default_kind} (config nvidia-container-runtime.modes.cdi.default-kind) or {AUTO_KIND}"),
            ));
        }
        if name.name == "all" {
            all = true;
            continue;
        }
        let id = DeviceId::parse(&name.name).ok_or_else(|| {
            unresolvable(
                name,
                "not a GPU index, MIG index, UUID or PCI bus id".into(),
            )
        })?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    nvct_cdi::name::parse_kind(default_kind).map_err(ShimError::DefaultKind)?;
    let disabled_hooks = jit_disabled_hooks(config, path)?;
    Ok(JitRequest {
        names,
        request: Request {
            devices: if all {
                Devices::All
            } else {
                Devices::List(ids)
            },
            capabilities: Capability::ALL.into_iter().collect(),
            requirements: vec![],
            mig_config: None,
            mig_monitor: None,
            imex_channels: None,
            cuda_compat: !disabled_hooks.contains(&HookKind::EnableCudaCompat),
            opt_ins: BTreeSet::new(),
        },
        disabled_hooks,
        unchecked_requirements: vec![],
    })
}

/// The hooks jit-cdi leaves out: `modes.jit-cdi.nvcdi-disable-hooks`, and forward
/// compatibility when the config does not allow it.
fn jit_disabled_hooks(config: &Config, path: &Path) -> Result<BTreeSet<HookKind>, ShimError> {
    let jit = &config.runtime.modes.jit_cdi;
    let mut disabled = HookKind::parse_disabled(jit.nvcdi_disable_hooks.iter().map(String::as_str))
        .map_err(|hook| ShimError::DisabledHook {
            path: path.to_path_buf(),
            hook,
        })?;
    if !config.cuda_compat_enabled() {
        disabled.insert(HookKind::EnableCudaCompat);
    }
    Ok(disabled)
}

/// `runtime.nvidia.com/gpu=<id>`: the automatic kind, generated on the spot in every CDI mode
/// (as upstream 1.18: no spec file names it).
pub const AUTO_KIND: &str = "runtime.nvidia.com/gpu";

/// Splits requested names into those of [`AUTO_KIND`] and the rest, each in request order.
pub fn split_auto_kind(names: &[QualifiedName]) -> (Vec<QualifiedName>, Vec<QualifiedName>) {
    names.iter().cloned().partition(|n| n.kind() == AUTO_KIND)
}
