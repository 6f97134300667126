//! `nvidia-ctk generate-docs` (hidden; scripts/package.sh installs what it writes): one man page
//! per visible subcommand, recursively, named as `man` looks them up, and completions for bash,
//! zsh and fish. The subcommands are read from the real binary's `--help`, so a subcommand
//! added later is checked without a change here.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const CTK: &str = env!("CARGO_BIN_EXE_nvidia-ctk");

fn run(args: &[&str]) -> String {
    let mut cmd = Command::new(CTK);
    cmd.args(args);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {CTK}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands `nvidia-ctk <path> --help` lists (without `help`).
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let help = run(&args);
    let Some(section) = help.split("\nCommands:\n").nth(1) else {
        return Vec::new();
    };
    section
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(String::from)
        .collect()
}

/// Every visible command path below the root, depth first: `["runtime"]`,
/// `["runtime", "configure"]`, ...
fn command_paths(path: &[String], out: &mut Vec<Vec<String>>) {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    for sub in subcommands(&p) {
        let mut child = path.to_vec();
        child.push(sub);
        out.push(child.clone());
        command_paths(&child, out);
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn man_pages_and_completions_cover_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("docs");
    run(&["-q", "generate-docs", "--output", out.to_str().unwrap()]);

    let mut paths = Vec::new();
    command_paths(&[], &mut paths);
    let top: Vec<&Vec<String>> = paths.iter().filter(|p| p.len() == 1).collect();
    for want in ["runtime", "config", "hook", "cdi"] {
        assert!(
            top.iter().any(|p| p[0] == want),
            "`nvidia-ctk --help` lists no {want} (read from it: {paths:?})"
        );
    }

    // One page per command, named nvidia-ctk[-sub...].1, and no other page (the hidden
    // generate-docs has none).
    let man1 = out.join("man1");
    let mut want_pages: BTreeSet<String> = paths
        .iter()
        .map(|p| format!("nvidia-ctk-{}.1", p.join("-")))
        .collect();
    want_pages.insert("nvidia-ctk.1".into());
    let pages: BTreeSet<String> = std::fs::read_dir(&man1)
        .unwrap_or_else(|e| panic!("{}: {e}", man1.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        pages,
        want_pages,
        "man pages: missing {:?}, unexpected {:?}",
        want_pages.difference(&pages).collect::<Vec<_>>(),
        pages.difference(&want_pages).collect::<Vec<_>>()
    );

    // Each page is a man page of its command, and refers to the pages of its subcommands
    // (roff escapes '-' as '\-').
    for path in std::iter::once(Vec::new()).chain(paths.iter().cloned()) {
        let name = std::iter::once("nvidia-ctk".to_string())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join("-");
        let page = read(&man1.join(format!("{name}.1")));
        assert!(
            page.contains(&format!(".TH {name} 1 ")),
            "{name}.1: no .TH title line:\n{page}"
        );
        assert!(
            page.contains(".SH NAME") && page.contains(".SH SYNOPSIS"),
            "{name}.1: NAME and SYNOPSIS sections expected:\n{page}"
        );
        let subs: Vec<&Vec<String>> = paths
            .iter()
            .filter(|p| p.len() == path.len() + 1 && p.starts_with(&path))
            .collect();
        for sub in subs {
            let refer = format!("{name}-{}(1)", sub.last().unwrap()).replace('-', "\\-");
            assert!(
                page.contains(&refer),
                "{name}.1 does not mention its subcommand {}:\n{page}",
                sub.join(" ")
            );
        }
        assert!(
            !page.contains("generate\\-docs"),
            "{name}.1 mentions the hidden generate-docs"
        );
    }
    // The variables of `cdi generate` are documented on its page.
    let generate = read(&man1.join("nvidia-ctk-cdi-generate.1"));
    for var in [
        "NVIDIA_CTK_CDI_OUTPUT_FILE_PATH",
        "NVIDIA_CTK_CDI_GENERATE_DEVICE_IDS",
    ] {
        assert!(
            generate.contains(var),
            "nvidia-ctk-cdi-generate.1 does not name {var}"
        );
    }

    // Completions: non-empty, registered for nvidia-ctk, offering every top-level subcommand.
    let completions = out.join("completions");
    for file in ["nvidia-ctk.bash", "_nvidia-ctk", "nvidia-ctk.fish"] {
        let text = read(&completions.join(file));
        assert!(
            text.contains("nvidia-ctk"),
            "{file} does not name nvidia-ctk"
        );
        for sub in &top {
            assert!(text.contains(&sub[0]), "{file} does not offer {}", sub[0]);
        }
        assert!(
            !text.contains("generate-docs"),
            "{file} offers the hidden generate-docs"
        );
    }
    let bash = Command::new("bash")
        .arg("-n")
        .arg(completions.join("nvidia-ctk.bash"))
        .output()
        .expect("bash");
    assert!(
        bash.status.success(),
        "bash -n nvidia-ctk.bash: {}",
        String::from_utf8_lossy(&bash.stderr)
    );
}
