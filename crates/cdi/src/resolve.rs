//! PURE: which spec file defines each fully-qualified CDI device when several spec directories
//! are read, as the CDI library (`container-device-interface`, `pkg/cdi/cache.go`,
//! `Cache.refresh`) resolves it, so that the shim's `cdi` mode, `cdi list` and `doctor` agree
//! with podman, containerd and CRI-O on one node.
//!
//! Rule: a spec file's priority is the index of its directory in the list given (default
//! `/etc/cdi` 0, `/var/run/cdi` 1); files are visited directory by directory, each in name
//! order. A device defined again in a file of higher priority replaces the earlier definition
//! (the earlier file is *shadowed* for that name). Two definitions at the same priority (two
//! files of one directory) are a *conflict*: the name resolves to nothing (not even to a
//! definition in a later directory: the library drops a conflicting name after the scan) and
//! a request for it is refused naming both files. Two devices of one name in one file never
//! get here (`list::read_spec` refuses that file).

use super::spec::Spec;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One spec file as read from a spec directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecFile {
    pub path: PathBuf,
    /// Index of the file's directory in the list of spec directories (higher wins).
    pub priority: usize,
    pub spec: Spec,
}

/// Where one qualified name resolves to: `specs[spec].spec.devices[device]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Winner {
    pub spec: usize,
    pub device: usize,
}

/// A name defined by two files of the same directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub name: String,
    pub first: PathBuf,
    pub second: PathBuf,
}

/// A name whose definition in `hidden` is replaced by the one in `by` (a later directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    pub name: String,
    pub hidden: PathBuf,
    pub by: PathBuf,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Every name that resolves (`vendor/class=name`), conflicting names left out.
    pub devices: BTreeMap<String, Winner>,
    /// In the order found; a name that three files of one directory define is named once, with
    /// its first two files.
    pub conflicts: Vec<Conflict>,
    /// In the order found.
    pub shadowed: Vec<Shadow>,
}

impl Resolution {
    /// The conflict of `name`, if it has one.
    pub fn conflict(&self, name: &str) -> Option<&Conflict> {
        self.conflicts.iter().find(|c| c.name == name)
    }
}

/// Resolves the names of `specs`, which must be in reading order (directories by priority,
/// files by name within one).
pub fn resolve(specs: &[SpecFile]) -> Resolution {
    let mut out = Resolution::default();
    for (i, file) in specs.iter().enumerate() {
        for (j, dev) in file.spec.devices.iter().enumerate() {
            let name = format!("{}={}", file.spec.kind, dev.name);
            let here = Winner { spec: i, device: j };
            match out.devices.get(&name).copied() {
                Some(old) if specs[old.spec].priority == file.priority => {
                    if out.conflict(&name).is_none() {
                        out.conflicts.push(Conflict {
                            name: name.clone(),
                            first: specs[old.spec].path.clone(),
                            second: file.path.clone(),
                        });
                    }
                }
                Some(old) if specs[old.spec].priority > file.priority => {
                    // Not in reading order; the higher priority still wins.
                    out.shadowed.push(Shadow {
                        name,
                        hidden: file.path.clone(),
                        by: specs[old.spec].path.clone(),
                    });
                }
                Some(old) => {
                    out.shadowed.push(Shadow {
                        name: name.clone(),
                        hidden: specs[old.spec].path.clone(),
                        by: file.path.clone(),
                    });
                    out.devices.insert(name, here);
                }
                None => {
                    out.devices.insert(name, here);
                }
            }
        }
    }
    for c in &out.conflicts {
        out.devices.remove(&c.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{ContainerEdits, Device};

    fn file(path: &str, priority: usize, kind: &str, devices: &[&str]) -> SpecFile {
        SpecFile {
            path: path.into(),
            priority,
            spec: Spec {
                cdi_version: "0.5.0".into(),
                kind: kind.into(),
                devices: devices
                    .iter()
                    .map(|d| Device {
                        name: d.to_string(),
                        container_edits: ContainerEdits {
                            env: vec![format!("FROM={path}")],
                            ..Default::default()
                        },
                    })
                    .collect(),
                container_edits: ContainerEdits::default(),
            },
        }
    }

    /// name → the path of the file it resolves to.
    fn winners(specs: &[SpecFile], r: &Resolution) -> Vec<(String, String)> {
        r.devices
            .iter()
            .map(|(n, w)| (n.clone(), specs[w.spec].path.display().to_string()))
            .collect()
    }

    #[test]
    fn resolution_cases() {
        type Case<'a> = (
            &'a str,
            Vec<SpecFile>,
            Vec<(&'a str, &'a str)>,
            Vec<(&'a str, &'a str, &'a str)>,
            Vec<(&'a str, &'a str, &'a str)>,
        );
        let gpu = "nvidia.com/gpu";
        let cases: Vec<Case> = vec![
            (
                "one dir, one file",
                vec![file("/etc/cdi/a.yaml", 0, gpu, &["0", "all"])],
                vec![
                    ("nvidia.com/gpu=0", "/etc/cdi/a.yaml"),
                    ("nvidia.com/gpu=all", "/etc/cdi/a.yaml"),
                ],
                vec![],
                vec![],
            ),
            (
                "same spec in both default dirs: the later dir wins",
                vec![
                    file("/etc/cdi/nvidia.yaml", 0, gpu, &["0", "1"]),
                    file("/var/run/cdi/nvidia.yaml", 1, gpu, &["0", "1"]),
                ],
                vec![
                    ("nvidia.com/gpu=0", "/var/run/cdi/nvidia.yaml"),
                    ("nvidia.com/gpu=1", "/var/run/cdi/nvidia.yaml"),
                ],
                vec![],
                vec![
                    (
                        "nvidia.com/gpu=0",
                        "/etc/cdi/nvidia.yaml",
                        "/var/run/cdi/nvidia.yaml",
                    ),
                    (
                        "nvidia.com/gpu=1",
                        "/etc/cdi/nvidia.yaml",
                        "/var/run/cdi/nvidia.yaml",
                    ),
                ],
            ),
            (
                "the earlier dir keeps what the later one lacks",
                vec![
                    file("/etc/cdi/nvidia.yaml", 0, gpu, &["0", "7"]),
                    file("/var/run/cdi/nvidia.yaml", 1, gpu, &["0"]),
                ],
                vec![
                    ("nvidia.com/gpu=0", "/var/run/cdi/nvidia.yaml"),
                    ("nvidia.com/gpu=7", "/etc/cdi/nvidia.yaml"),
                ],
                vec![],
                vec![(
                    "nvidia.com/gpu=0",
                    "/etc/cdi/nvidia.yaml",
                    "/var/run/cdi/nvidia.yaml",
                )],
            ),
            (
                "two files of one dir: a conflict, both files named",
                vec![
                    file("/etc/cdi/a.yaml", 0, gpu, &["0", "1"]),
                    file("/etc/cdi/b.yaml", 0, gpu, &["0"]),
                ],
                vec![("nvidia.com/gpu=1", "/etc/cdi/a.yaml")],
                vec![("nvidia.com/gpu=0", "/etc/cdi/a.yaml", "/etc/cdi/b.yaml")],
                vec![],
            ),
            (
                "a conflict in the later dir",
                vec![
                    file("/etc/cdi/a.yaml", 0, gpu, &["0"]),
                    file("/var/run/cdi/a.yaml", 1, gpu, &["0"]),
                    file("/var/run/cdi/b.yaml", 1, gpu, &["0"]),
                ],
                vec![],
                vec![(
                    "nvidia.com/gpu=0",
                    "/var/run/cdi/a.yaml",
                    "/var/run/cdi/b.yaml",
                )],
                vec![("nvidia.com/gpu=0", "/etc/cdi/a.yaml", "/var/run/cdi/a.yaml")],
            ),
            (
                "a conflict in the earlier dir is not lifted by the later dir (as the library)",
                vec![
                    file("/etc/cdi/a.yaml", 0, gpu, &["0"]),
                    file("/etc/cdi/b.yaml", 0, gpu, &["0"]),
                    file("/var/run/cdi/c.yaml", 1, gpu, &["0"]),
                ],
                vec![],
                vec![("nvidia.com/gpu=0", "/etc/cdi/a.yaml", "/etc/cdi/b.yaml")],
                vec![("nvidia.com/gpu=0", "/etc/cdi/a.yaml", "/var/run/cdi/c.yaml")],
            ),
            (
                "three files of one dir: one conflict, the first two named",
                vec![
                    file("/etc/cdi/a.yaml", 0, gpu, &["0"]),
                    file("/etc/cdi/b.yaml", 0, gpu, &["0"]),
                    file("/etc/cdi/c.yaml", 0, gpu, &["0"]),
                ],
                vec![],
                vec![("nvidia.com/gpu=0", "/etc/cdi/a.yaml", "/etc/cdi/b.yaml")],
                vec![],
            ),
            (
                "same device name, other kind: no conflict",
                vec![
                    file("/etc/cdi/a.yaml", 0, gpu, &["0"]),
                    file("/etc/cdi/b.yaml", 0, "example.com/acc", &["0"]),
                ],
                vec![
                    ("example.com/acc=0", "/etc/cdi/b.yaml"),
                    ("nvidia.com/gpu=0", "/etc/cdi/a.yaml"),
                ],
                vec![],
                vec![],
            ),
            (
                "three dirs: the last wins",
                vec![
                    file("/a/x.yaml", 0, gpu, &["0"]),
                    file("/b/x.yaml", 1, gpu, &["0"]),
                    file("/c/x.yaml", 2, gpu, &["0"]),
                ],
                vec![("nvidia.com/gpu=0", "/c/x.yaml")],
                vec![],
                vec![
                    ("nvidia.com/gpu=0", "/a/x.yaml", "/b/x.yaml"),
                    ("nvidia.com/gpu=0", "/b/x.yaml", "/c/x.yaml"),
                ],
            ),
        ];
        for (name, specs, want, conflicts, shadowed) in cases {
            let r = resolve(&specs);
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            assert_eq!(winners(&specs, &r), want, "case {name}");
            let got: Vec<(String, String, String)> = r
                .conflicts
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        c.first.display().to_string(),
                        c.second.display().to_string(),
                    )
                })
                .collect();
            let want: Vec<(String, String, String)> = conflicts
                .into_iter()
                .map(|(a, b, c)| (a.into(), b.into(), c.into()))
                .collect();
            assert_eq!(got, want, "case {name}: conflicts");
            let got: Vec<(String, String, String)> = r
                .shadowed
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        s.hidden.display().to_string(),
                        s.by.display().to_string(),
                    )
                })
                .collect();
            let want: Vec<(String, String, String)> = shadowed
                .into_iter()
                .map(|(a, b, c)| (a.into(), b.into(), c.into()))
                .collect();
            assert_eq!(got, want, "case {name}: shadowed");
        }
    }
}
