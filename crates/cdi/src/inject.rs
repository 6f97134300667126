//! PURE: requested qualified device names + the specs read from the spec directories → the
//! ordered list of container edits the runtime shim applies (`spec_edit.rs`), each with the
//! spec file it comes from (device nodes are completed from the host with `fill.rs` next).
//!
//! Order: names in request order (duplicates once); a spec's spec-level `containerEdits` come
//! once, just before the first of its devices. Which file defines a name is `resolve.rs`'s
//! rule (the CDI library's): a later spec directory wins; a name that two files of one
//! directory define is an error naming both files, but only when it is requested (an
//! unrelated broken spec must not stop every GPU container).

use super::name::QualifiedName;
use super::resolve::{self, SpecFile};
use super::spec::ContainerEdits;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InjectError {
    #[error("unresolvable CDI device(s) {names}: no spec in {searched} defines them (see `nvidia-ctk cdi list`)")]
    Unresolvable { names: String, searched: String },
    #[error("CDI device {name} is defined twice in one spec directory, in {first} and in {second}; remove one of them (a file in a later spec directory would replace one in an earlier directory, but two files of one directory conflict)")]
    Duplicate {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
}

/// One edit to apply and the spec file it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edit<'a> {
    pub file: &'a Path,
    pub edits: &'a ContainerEdits,
}

/// The edits for `names`, looked up in `specs` (as [`super::list::load`] returns them).
/// `searched` describes where the specs came from, for the message.
pub fn resolve<'a>(
    names: &[QualifiedName],
    specs: &'a [SpecFile],
    searched: &str,
) -> Result<Vec<Edit<'a>>, InjectError> {
    let r = resolve::resolve(specs);
    let mut edits: Vec<Edit> = Vec::new();
    let mut used_specs: Vec<usize> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let mut done: Vec<&QualifiedName> = Vec::new();
    for name in names {
        if done.contains(&name) {
            continue;
        }
        done.push(name);
        let key = name.to_string();
        if let Some(c) = r.conflict(&key) {
            return Err(InjectError::Duplicate {
                name: key,
                first: c.first.clone(),
                second: c.second.clone(),
            });
        }
        match r.devices.get(&key) {
            None => missing.push(key),
            Some(w) => {
                let file = &specs[w.spec];
                if !used_specs.contains(&w.spec) {
                    used_specs.push(w.spec);
                    edits.push(Edit {
                        file: &file.path,
                        edits: &file.spec.container_edits,
                    });
                }
                edits.push(Edit {
                    file: &file.path,
                    edits: &file.spec.devices[w.device].container_edits,
                });
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
    use crate::spec::{Device, Spec};

    fn edits(env: &str) -> ContainerEdits {
        ContainerEdits {
            env: vec![env.into()],
            ..Default::default()
        }
    }

    fn spec(path: &str, priority: usize, kind: &str, level: &str, devices: &[&str]) -> SpecFile {
        let spec = Spec {
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
        };
        SpecFile {
            path: path.into(),
            priority,
            spec,
        }
    }

    fn q(s: &str) -> QualifiedName {
        QualifiedName::parse(s).unwrap()
    }

    #[test]
    fn resolve_cases() {
        let specs = vec![
            spec(
                "/etc/cdi/a.yaml",
                0,
                "nvidia.com/gpu",
                "a",
                &["0", "1", "all"],
            ),
            spec("/etc/cdi/b.yaml", 0, "example.com/acc", "b", &["x", "y"]),
            spec("/etc/cdi/c.yaml", 0, "nvidia.com/gpu", "c", &["9"]),
            spec("/etc/cdi/d.yaml", 0, "example.com/acc", "d", &["x"]),
            spec("/var/run/cdi/e.yaml", 1, "nvidia.com/gpu", "e", &["1"]),
        ];
        let env = |list: &[Edit]| {
            list.iter()
                .map(|e| format!("{}@{}", e.edits.env[0], e.file.display()))
                .collect::<Vec<_>>()
        };
        let a = "/etc/cdi/a.yaml";
        let c = "/etc/cdi/c.yaml";
        let e = "/var/run/cdi/e.yaml";
        let cases: Vec<(&str, Vec<&str>, Result<Vec<(&str, &str)>, InjectError>)> = vec![
            ("nothing", vec![], Ok(vec![])),
            (
                "one",
                vec!["nvidia.com/gpu=0"],
                Ok(vec![("SPEC=a", a), ("DEV=nvidia.com/gpu=0", a)]),
            ),
            (
                "spec edits once, request order",
                vec![
                    "nvidia.com/gpu=all",
                    "nvidia.com/gpu=0",
                    "nvidia.com/gpu=all",
                ],
                Ok(vec![
                    ("SPEC=a", a),
                    ("DEV=nvidia.com/gpu=all", a),
                    ("DEV=nvidia.com/gpu=0", a),
                ]),
            ),
            (
                "same kind in two files",
                vec!["nvidia.com/gpu=9", "nvidia.com/gpu=0"],
                Ok(vec![
                    ("SPEC=c", c),
                    ("DEV=nvidia.com/gpu=9", c),
                    ("SPEC=a", a),
                    ("DEV=nvidia.com/gpu=0", a),
                ]),
            ),
            (
                "a later directory wins, with its spec-level edits",
                vec!["nvidia.com/gpu=1", "nvidia.com/gpu=0"],
                Ok(vec![
                    ("SPEC=e", e),
                    ("DEV=nvidia.com/gpu=1", e),
                    ("SPEC=a", a),
                    ("DEV=nvidia.com/gpu=0", a),
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
                "two files of one directory: refused, both named",
                vec!["example.com/acc=y", "example.com/acc=x"],
                Err(InjectError::Duplicate {
                    name: "example.com/acc=x".into(),
                    first: "/etc/cdi/b.yaml".into(),
                    second: "/etc/cdi/d.yaml".into(),
                }),
            ),
            (
                "a conflict not requested does not matter",
                vec!["example.com/acc=y"],
                Ok(vec![
                    ("SPEC=b", "/etc/cdi/b.yaml"),
                    ("DEV=example.com/acc=y", "/etc/cdi/b.yaml"),
                ]),
            ),
        ];
        for (name, req, want) in cases {
            let req: Vec<QualifiedName> = req.into_iter().map(q).collect();
            let got = resolve(&req, &specs, "/etc/cdi").map(|l| env(&l));
            let want = want.map(|v| {
                v.into_iter()
                    .map(|(env, file)| format!("{env}@{file}"))
                    .collect::<Vec<_>>()
            });
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
