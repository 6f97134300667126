//! The floors of the library, checked: every `crate::` / `super::` path in a module's code
//! (comments and tests left aside) must point to a lower floor, or to the same floor of the
//! same top-level module, and the modules' imports must have no cycle. docs/ARCHITECTURE.md
//! draws the same table.
//!
//! | floor | modules |
//! |---|---|
//! | 0 values | `model`, `sys` |
//! | 1 formats | `ldcache`, `oci`, `fsutil`, `syslog`, `host::root`, the CDI format (`cdi::*` but `generate`) |
//! | 2 | `elf` (reads `ldcache`'s flags), `config` (the toolkit's), `runtime_config` (engines' text) |
//! | 3 | `log` (configured by `config`) |
//! | 4 readers, planner, primitives | `host` (reads), `plan` (pure), `container` (writes into a container), `config_edit`: none imports another |
//! | 5 outputs | `out` (each a function of one plan) |
//! | 6 the jobs | `cdi::generate`, `cdi_hooks`, `doctor`, `installer`, `system`, `process`, `fixtures` |
//! | 7 flags | `cdi::generate_flags`, `installer_flags`, `runtime_config::flags`: a binary's flags and variables → a job's options |

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The floor of each module path prefix; the longest prefix wins.
const FLOORS: &[(&str, u8)] = &[
    ("model", 0),
    ("sys", 0),
    ("ldcache", 1),
    ("oci", 1),
    ("fsutil", 1),
    ("syslog", 1),
    ("host::root", 1),
    ("cdi", 1),
    ("elf", 2),
    ("config", 2),
    ("runtime_config", 2),
    ("log", 3),
    ("host", 4),
    ("plan", 4),
    ("container", 4),
    ("config_edit", 4),
    ("out", 5),
    ("cdi::generate", 6),
    ("cdi_hooks", 6),
    ("doctor", 6),
    ("installer", 6),
    ("system", 6),
    ("process", 6),
    ("fixtures", 6),
    ("floors", 6),
    ("unsafe_lint", 6),
    ("cdi::generate_flags", 7),
    ("installer_flags", 7),
    ("runtime_config::flags", 7),
];

fn floor(module: &str) -> Option<u8> {
    FLOORS
        .iter()
        .filter(|(p, _)| module == *p || module.starts_with(&format!("{p}::")))
        .max_by_key(|(p, _)| p.len())
        .map(|(_, f)| *f)
}

/// Every module of `src/` (`a::b` for `src/a/b.rs` or `src/a/b/mod.rs`) with its code before
/// its first `#[cfg(test)]`, comments removed. `src/bin` and test-only files are left out.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                if path != src.join("bin") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["lib"] || parts.last().is_some_and(|p| p == "tests") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code: String = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            out.insert(parts.join("::"), code);
        }
    }
    out
}

/// The modules `code` (of module `me`) names through `crate::` or `super::` paths, each
/// resolved to the longest known module path.
fn imports(me: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    // `use child::X` / `pub use self::child::X`: a module naming its own submodule.
    for line in code.lines() {
        let line = line.trim_start();
        let Some(rest) = line
            .strip_prefix("pub use ")
            .or_else(|| line.strip_prefix("use "))
        else {
            continue;
        };
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        let first: String = rest
            .chars()
            .take_while(|&c| c.is_ascii_alphanumeric() || c == '_')
            .collect();
        let child = format!("{me}::{first}");
        if known.contains(&child) {
            out.insert(child);
        }
    }
    for (start, anchor) in [("crate::", None), ("super::", Some(()))] {
        for (i, _) in code.match_indices(start) {
            if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest: String = code[i + start.len()..]
                .chars()
                .take_while(|&c| ident(c))
                .collect();
            let mut path: Vec<String> = Vec::new();
            if anchor.is_some() {
                // `super` of a module, a `mod.rs` one too, is its parent.
                let mut base: Vec<&str> = me.split("::").collect();
                base.pop();
                path.extend(base.iter().map(|s| s.to_string()));
            }
            path.extend(rest.split("::").filter(|s| !s.is_empty()).map(String::from));
            // Brace groups (`crate::{a, b}`) name several; the group's own prefix is enough
            // for the floors (each name is checked where it is a `crate::x` path too).
            while !path.is_empty() {
                let candidate = path.join("::");
                if known.contains(&candidate) {
                    if candidate != me {
                        out.insert(candidate);
                    }
                    break;
                }
                path.pop();
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let known: BTreeSet<String> = mods.keys().cloned().collect();
    mods.iter()
        .map(|(m, code)| (m.clone(), imports(m, code, &known)))
        .collect()
}

#[test]
fn every_module_has_a_floor() {
    let missing: Vec<String> = graph().into_keys().filter(|m| floor(m).is_none()).collect();
    assert!(
        missing.is_empty(),
        "modules with no floor in FLOORS: {missing:?}"
    );
}

#[test]
fn no_import_runs_upward_or_sideways() {
    let mut bad = Vec::new();
    for (m, deps) in graph() {
        let own = floor(&m).unwrap_or(u8::MAX);
        let top = m.split("::").next().unwrap_or_default();
        for d in deps {
            let theirs = floor(&d).unwrap_or(u8::MAX);
            // A module's own children and parent (`container` ↔ `container::rootfs`) share
            // its floor; another top-level module of the same floor is a sibling.
            let same_top = d.split("::").next() == Some(top);
            let parent = m.starts_with(&format!("{d}::"));
            if theirs > own || (theirs == own && !same_top && !parent) {
                bad.push(format!("{m} (floor {own}) imports {d} (floor {theirs})"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports against the floors:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_imports_have_no_cycle() {
    let g = graph();
    // Depth-first search with colours: a back edge is a cycle.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(1) => {
                let start = path.iter().position(|p| p == m).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            // A parent naming its children (`pub use` of a submodule) is not a dependency
            // of the child on the parent's other children.
            if d.starts_with(&format!("{m}::")) {
                continue;
            }
            if let Some(c) = visit(d, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if let Some(cycle) = visit(m, &g, &mut state, &mut Vec::new()) {
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn the_checker_sees_imports() {
    let known: BTreeSet<String> = ["model", "plan", "plan::request", "host::devices", "host"]
        .map(String::from)
        .into();
    let code = "use crate::plan::request::{Request, Devices};\nuse super::devices;\nlet x = crate::model::Gpu::default();";
    let got = imports("host::discover", code, &known);
    let want: BTreeSet<String> = ["plan::request", "host::devices", "model"]
        .map(String::from)
        .into();
    assert_eq!(got, want);
    let got = imports("plan", "pub use request::Request;\n", &known);
    assert_eq!(got, ["plan::request".to_string()].into());
}
