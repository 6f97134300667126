//! PURE: `cdi` mode's hooks folded into one process. A spec this toolkit generated has one
//! `apply-edits` hook in its common edits and, per device with DRM nodes, a `create-symlinks`
//! hook for the device's `/dev/dri/by-path/` links: two hook processes per start (about 4.5 ms
//! of the cdi path, docs/PERFORMANCE.md). [`fold_link_hooks`] moves such a hook's links into the
//! `apply-edits` hook of the same program, which makes links first of its edits.
//!
//! Folded only when the result cannot differ from the two processes in turn: both hooks
//! `createContainer` with the same path, program name (`args[0]`) and environment, both read
//! by this toolkit's hook parser without `--container-spec`, the `create-symlinks` hook after
//! the `apply-edits` one (as the CDI library orders a spec's common edits before its devices':
//! `Cache::InjectDevices` in container-device-interface's `pkg/cdi/cache.go` appends a spec's
//! edits, once, before each of its devices')
//! and every one of its links under `/dev/`, where nothing else `apply-edits` makes (the /proc
//! mask, the ld cache and its soname links, the application profile) is. Any other hook,
//! upstream's specs included (they have no `apply-edits`), is left as it is.

use nvct_cdi::spec::Hook;
use nvct_cdi::ContainerEdits;
use nvct_container::edits::{self, Edits, Invocation, APPLY_EDITS};
use std::path::Path;

const STAGE: &str = "createContainer";
const CREATE_SYMLINKS: &str = "create-symlinks";

/// The edits `h` asks for as the hook `name` (`args[1]`), when this toolkit's parser reads them
/// and no state file is named.
fn parsed(h: &Hook, name: &str) -> Option<Edits> {
    if h.hook_name != STAGE || h.args.get(1).map(String::as_str) != Some(name) {
        return None;
    }
    match edits::parse(&h.args[1..]) {
        Ok(edits::Parsed {
            invocation: Invocation::Edits(e),
            container_spec: None,
        }) => Some(e),
        _ => None,
    }
}

/// Folds the `create-symlinks` hooks of `edits` that may be (module doc) into the first
/// `apply-edits` hook; the folded ones are removed.
pub fn fold_link_hooks(edits: &mut [ContainerEdits]) {
    let Some((ei, hi)) = edits.iter().enumerate().find_map(|(ei, e)| {
        e.hooks
            .iter()
            .position(|h| parsed(h, APPLY_EDITS).is_some())
            .map(|hi| (ei, hi))
    }) else {
        return;
    };
    let apply = edits[ei].hooks[hi].clone();
    let Some(mut merged) = parsed(&apply, APPLY_EDITS) else {
        return;
    };
    let same_program = |h: &Hook| {
        h.path == apply.path && h.args.first() == apply.args.first() && h.env == apply.env
    };
    // Below a directory of /dev, never /dev itself: the application profile counts the
    // `/dev/nvidiaN` nodes, which a link there would replace.
    let in_dev_subdir = |l: &Path| {
        l.parent()
            .is_some_and(|p| p.starts_with("/dev") && p != Path::new("/dev"))
    };
    let mut folded = 0;
    for (i, e) in edits.iter_mut().enumerate().skip(ei) {
        // Only the hooks after the apply-edits hook.
        let first = if i == ei { hi + 1 } else { 0 };
        let mut kept = e.hooks[..first].to_vec();
        for h in e.hooks.drain(..).skip(first) {
            let links = parsed(&h, CREATE_SYMLINKS)
                .filter(|_| same_program(&h))
                .and_then(|e| e.links)
                .filter(|l| l.iter().all(|l| in_dev_subdir(&l.link)));
            match links {
                Some(links) => {
                    merged.links.get_or_insert_with(Vec::new).extend(links);
                    folded += 1;
                }
                None => kept.push(h),
            }
        }
        e.hooks = kept;
    }
    if folded == 0 {
        return;
    }
    let args = apply
        .args
        .first()
        .cloned()
        .into_iter()
        .chain(merged.to_apply_edits())
        .collect();
    edits[ei].hooks[hi].args = args;
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOOK: &str = "/usr/bin/nvidia-cdi-hook";
    const BY_PATH: &str = "../card1::/dev/dri/by-path/pci-0000:01:00.0-card";

    fn hook(path: &str, args: &[&str]) -> Hook {
        Hook {
            hook_name: STAGE.into(),
            path: path.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec!["NVIDIA_CTK_DEBUG=false".into()],
        }
    }

    fn edits_with(hooks: Vec<Hook>) -> ContainerEdits {
        ContainerEdits {
            hooks,
            ..Default::default()
        }
    }

    fn apply_edits() -> Hook {
        hook(
            HOOK,
            &[
                "nvidia-cdi-hook",
                "apply-edits",
                "--create-symlinks",
                "--link",
                "libcuda.so.1::/usr/lib64/libcuda.so",
                "--update-ldcache",
                "--folder",
                "/usr/lib64",
            ],
        )
    }

    fn links(path: &str, link: &str) -> Hook {
        hook(
            path,
            &["nvidia-cdi-hook", "create-symlinks", "--link", link],
        )
    }

    /// The edits of every hook, in order, as the hook program reads them.
    fn asked(edits: &[ContainerEdits]) -> Vec<(String, Edits)> {
        edits
            .iter()
            .flat_map(|e| &e.hooks)
            .map(|h| {
                let Ok(edits::Parsed {
                    invocation: Invocation::Edits(e),
                    ..
                }) = edits::parse(&h.args[1..])
                else {
                    panic!("{:?} does not parse", h.args)
                };
                (h.args[1].clone(), e)
            })
            .collect()
    }

    #[test]
    fn folds_only_what_cannot_change_the_result() {
        let folded = {
            let mut e = parsed(&apply_edits(), APPLY_EDITS).unwrap();
            e.links
                .as_mut()
                .unwrap()
                .push(edits::parse_link(BY_PATH).unwrap());
            vec![("apply-edits".to_string(), e)]
        };
        let mut with_spec_file = links(HOOK, BY_PATH);
        with_spec_file
            .args
            .extend(["--container-spec".into(), "/s.json".into()]);
        let mut other_env = links(HOOK, BY_PATH);
        other_env.env.clear();
        let cases: Vec<(&str, Vec<ContainerEdits>, Option<Vec<(String, Edits)>>)> = vec![
            (
                "our spec: common apply-edits, the device's by-path links",
                vec![
                    edits_with(vec![apply_edits()]),
                    edits_with(vec![links(HOOK, BY_PATH)]),
                ],
                Some(folded.clone()),
            ),
            (
                "links before apply-edits stay (order kept)",
                vec![
                    edits_with(vec![links(HOOK, BY_PATH)]),
                    edits_with(vec![apply_edits()]),
                ],
                None,
            ),
            (
                "a link outside /dev stays",
                vec![
                    edits_with(vec![apply_edits()]),
                    edits_with(vec![links(HOOK, "x.so.1::/usr/lib64/x.so")]),
                ],
                None,
            ),
            (
                "a link in /dev itself stays",
                vec![
                    edits_with(vec![apply_edits()]),
                    edits_with(vec![links(HOOK, "nvidia1::/dev/nvidia0")]),
                ],
                None,
            ),
            (
                "another program's hook stays",
                vec![
                    edits_with(vec![apply_edits()]),
                    edits_with(vec![links("/other/nvidia-cdi-hook", BY_PATH)]),
                ],
                None,
            ),
            (
                "another environment stays",
                vec![edits_with(vec![apply_edits()]), edits_with(vec![other_env])],
                None,
            ),
            (
                "a hook with --container-spec stays",
                vec![
                    edits_with(vec![apply_edits()]),
                    edits_with(vec![with_spec_file]),
                ],
                None,
            ),
            (
                "upstream's spec: no apply-edits, nothing folded",
                vec![
                    edits_with(vec![links(HOOK, "libcuda.so.1::/usr/lib64/libcuda.so")]),
                    edits_with(vec![links(HOOK, BY_PATH)]),
                ],
                None,
            ),
        ];
        for (name, mut edits, want) in cases {
            let before = edits.clone();
            fold_link_hooks(&mut edits);
            match want {
                Some(want) => assert_eq!(asked(&edits), want, "case {name}"),
                None => assert_eq!(edits, before, "case {name}"),
            }
        }
    }
}
