//! Which systemd unit a container is, from the text of its `/proc/<pid>/cgroup`
//! (`container::cgroup::systemd::unit_of`): the name the hook hands to systemd's
//! `SetUnitProperties` and to `systemctl set-property` (UTF-8, invalid bytes as U+FFFD).
//! Property: no panic; a unit found ends with `.scope`, has a non-empty name before it, holds
//! only `[A-Za-z0-9-_.:@\]`, and is the last path component (or the whole path) of a line of
//! the v2 hierarchy (`0::`) or of a v1 `devices` or `name=systemd` one, the v2 one when that
//! names a scope; a v1 line after the text does not change a unit found, and a line of another
//! hierarchy before it changes nothing.

use nvct_container::cgroup::systemd::unit_of;

/// Whether `line` is one `unit_of` reads, and its path.
fn hierarchy_path(line: &str) -> Option<&str> {
    let mut parts = line.splitn(3, ':');
    let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
    let v2 = id == "0" && controllers.is_empty();
    let v1 = controllers
        .split(',')
        .any(|c| c == "devices" || c == "name=systemd");
    (v2 || v1).then_some(path)
}

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let unit = unit_of(&text);
    if let Some(name) = &unit {
        let stem = name
            .strip_suffix(".scope")
            .unwrap_or_else(|| panic!("{name:?} is not a scope"));
        assert!(!stem.is_empty(), "{name:?}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:@\\".contains(&b)),
            "{name:?}"
        );
        let slash_name = format!("/{name}");
        assert!(
            text.lines()
                .filter_map(hierarchy_path)
                .any(|p| p == name || p.ends_with(&slash_name)),
            "{name:?} is not the last component of a devices, name=systemd or v2 path"
        );
        assert_eq!(
            unit_of(&format!(
                "{text}\n12:devices:/system.slice/docker-2.scope\n"
            ))
            .as_ref(),
            Some(name),
            "a v1 line after the text changed the unit"
        );
        // The v2 path wins: a v2 scope line after the text is the unit when the text has no
        // v2 scope of its own.
        let v2_scope = text
            .lines()
            .filter(|l| l.starts_with("0::"))
            .filter_map(hierarchy_path)
            .any(|p| p.rsplit('/').next() == Some(name.as_str()));
        if v2_scope {
            assert_eq!(
                unit_of(&format!("{text}\n0::/system.slice/docker-2.scope\n")).as_ref(),
                Some(name),
                "a v2 line after the text changed the text's own v2 unit"
            );
        }
    }
    for other in [
        "5:cpu,cpuacct:/system.slice/cpu-1.scope\n",
        "0:cpu:/system.slice/zero-1.scope\n",
        "3::/system.slice/three-1.scope\n",
        "1:name=other:/other-1.scope\n",
    ] {
        assert_eq!(
            unit_of(&format!("{other}{text}")),
            unit,
            "the line {other:?} changed the unit"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/<pid>/cgroup` of containers under each engine and driver, and of a few other
    /// processes.
    fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        let seeds: &[(&str, &str)] = &[
            ("docker-v2", "0::/system.slice/docker-4f1c8e0a9b2d.scope\n"),
            (
                "containerd-kubepods-v2",
                "0::/kubepods.slice/kubepods-besteffort.slice/\
                 kubepods-besteffort-pod1_2.slice/cri-containerd-ab12.scope\n",
            ),
            (
                "crio-v2",
                "0::/kubepods.slice/kubepods-burstable.slice/\
                 kubepods-burstable-pod3_4.slice/crio-cd34.scope\n",
            ),
            (
                "podman-hybrid-v1",
                "12:devices:/machine.slice/libpod-99.scope\n\
                 11:cpu,cpuacct:/machine.slice/libpod-99.scope\n\
                 1:name=systemd:/machine.slice/libpod-99.scope\n0::/\n",
            ),
            (
                "cgroupfs-v1",
                "12:devices:/docker/4f1c\n3:cpu,cpuacct:/docker/4f1c\n0::/\n",
            ),
            (
                "session-v2",
                "0::/user.slice/user-1000.slice/session-3.scope\n",
            ),
            (
                "escaped-and-odd",
                "0::/system.slice/run-r\\x2d1.scope\r\n1:name=systemd:/a b.scope\n",
            ),
        ];
        seeds
            .iter()
            .map(|(name, text)| (*name, text.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn seeds_are_proc_cgroup_files() {
        let seeds = seeds();
        crate::common::check_seeds("unit_name", &seeds);
        let units: Vec<Option<String>> = seeds
            .iter()
            .map(|(_, t)| unit_of(&String::from_utf8_lossy(t)))
            .collect();
        assert_eq!(
            units,
            [
                Some("docker-4f1c8e0a9b2d.scope".into()),
                Some("cri-containerd-ab12.scope".into()),
                Some("crio-cd34.scope".into()),
                Some("libpod-99.scope".into()),
                None,
                Some("session-3.scope".into()),
                Some("run-r\\x2d1.scope".into()),
            ]
        );
        for (_, bytes) in &seeds {
            run(bytes);
        }
    }
}
