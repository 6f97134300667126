//! PURE: requested qualified device names + the specs read from the spec directories → the
//! ordered list of container edits the runtime shim applies (`spec_edit.rs`).
//!
//! Order: names in request order (duplicates once); a spec's spec-level `containerEdits` come
//! once, just before the first of its devices. Lookup is by exact `vendor/class=name`; a name
//! that two devices define (in two files, or twice in one) is an error naming both files
//! rather than a silent pick, but only when it is requested (an unrelated broken spec must not
//! stop every GPU container).

use super::name::QualifiedName;
use super::spec::{ContainerEdits, Spec};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InjectError {
    #[error("unresolvable CDI device(s) {names}: no spec in {searched} defines them (see `nvidia-ctk cdi list`)")]
    Unresolvable { names: String, searched: String },
    #[error("CDI device {name} is defined twice, in {first} and in {second}; remove one of them")]
    Duplicate {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
}

/// The edits for `names`, looked up in `specs` (as [`super::list::load`] returns them).
/// `searched` describes where the specs came from, for the message.
pub fn resolve<'a>(
    names: &[QualifiedName],
    specs: &'a [(PathBuf, Spec)],
    searched: &str,
) -> Result<Vec<&'a ContainerEdits>, InjectError> {
    let mut edits: Vec<&ContainerEdits> = Vec::new();
    let mut used_specs: Vec<usize> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut done: Vec<&QualifiedName> = Vec::new();
    for name in names {
        if done.contains(&name) {
            continue;
        }
        done.push(name);
        let kind = format!("{}/{}", name.vendor, name.class);
        let mut found: Option<(usize, &Path, &ContainerEdits)> = None;
        for (i, (file, spec)) in specs.iter().enumerate() {
            if spec.kind != kind {
                continue;
            }
            for dev in spec.devices.iter().filter(|d| d.name == name.name) {
                if let Some((_, first, _)) = found {
                    return Err(InjectError::Duplicate {
                        name: name.to_string(),
                        first: first.to_path_buf(),
                        second: file.clone(),
                    });
                }
                found = Some((i, file, &dev.container_edits));
            }
        }
        match found {
            None => missing.push(name.to_string()),
            Some((i, _, dev)) => {
                if !used_specs.contains(&i) {
                    used_specs.push(i);
                    edits.push(&specs[i].1.container_edits);
                }
                edits.push(dev);
            }
        }
    }
    if !missing.is_empty() {
        return Err(InjectError::Unresolvable {
            names: missing.join(", "),
            searched: searched.into(),
        });
    }
    Ok(edits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdi::spec::Device;

    fn edits(env: &str) -> ContainerEdits {
        ContainerEdits {
            env: vec![env.into()],
            ..Default::default()
        }
    }

    fn spec(kind: &str, level: &str, devices: &[&str]) -> Spec {
        Spec {
            cdi_version: "0.5.0".into(),
            kind: kind.into(),
            devices: devices
                .iter()
                .map(|d| Device {
                    name: d.to_string(),
                    container_edits: edits(&format!("DEV={kind}={d}")),
                })
                .collect(),
            container_edits: edits(&format!("SPEC={level}")),
        }
    }

    fn q(s: &str) -> QualifiedName {
        QualifiedName::parse(s).unwrap()
    }

    #[test]
    fn resolve_cases() {
        let specs = vec![
            (
                PathBuf::from("/etc/cdi/a.yaml"),
                spec("nvidia.com/gpu", "a", &["0", "1", "all"]),
            ),
            (
                PathBuf::from("/etc/cdi/b.yaml"),
                spec("example.com/acc", "b", &["x"]),
            ),
            (
                PathBuf::from("/etc/cdi/c.yaml"),
                spec("nvidia.com/gpu", "c", &["9"]),
            ),
            (
                PathBuf::from("/run/cdi/d.yaml"),
                spec("example.com/acc", "d", &["x"]),
            ),
        ];
        let env =
            |list: &[&ContainerEdits]| list.iter().map(|e| e.env[0].clone()).collect::<Vec<_>>();
        let cases: Vec<(&str, Vec<&str>, Result<Vec<&str>, InjectError>)> = vec![
            ("nothing", vec![], Ok(vec![])),
            (
                "one",
                vec!["nvidia.com/gpu=0"],
                Ok(vec!["SPEC=a", "DEV=nvidia.com/gpu=0"]),
            ),
            (
                "spec edits once, request order",
                vec!["nvidia.com/gpu=1", "nvidia.com/gpu=0", "nvidia.com/gpu=1"],
                Ok(vec![
                    "SPEC=a",
                    "DEV=nvidia.com/gpu=1",
                    "DEV=nvidia.com/gpu=0",
                ]),
            ),
            (
                "same kind in two files",
                vec!["nvidia.com/gpu=9", "nvidia.com/gpu=0"],
                Ok(vec![
                    "SPEC=c",
                    "DEV=nvidia.com/gpu=9",
                    "SPEC=a",
                    "DEV=nvidia.com/gpu=0",
                ]),
            ),
            (
                "unknown names all named",
                vec!["nvidia.com/gpu=0", "nvidia.com/gpu=7", "other.com/x=0"],
                Err(InjectError::Unresolvable {
                    names: "nvidia.com/gpu=7, other.com/x=0".into(),
                    searched: "/etc/cdi".into(),
                }),
            ),
            (
                "duplicate across files",
                vec!["example.com/acc=x"],
                Err(InjectError::Duplicate {
                    name: "example.com/acc=x".into(),
                    first: "/etc/cdi/b.yaml".into(),
                    second: "/run/cdi/d.yaml".into(),
                }),
            ),
        ];
        for (name, req, want) in cases {
            let req: Vec<QualifiedName> = req.into_iter().map(q).collect();
            let got = resolve(&req, &specs, "/etc/cdi").map(|l| env(&l));
            let want = want.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(got, want, "case {name}");
        }
        let e = resolve(&[q("nvidia.com/gpu=7")], &specs, "/etc/cdi, /var/run/cdi")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "unresolvable CDI device(s) nvidia.com/gpu=7: no spec in /etc/cdi, /var/run/cdi defines them (see `nvidia-ctk cdi list`)"
        );
    }
}
