//! A test that keeps `unsafe` behind `sys`: no `src/` file other than `src/sys.rs` and
//! `src/sys/**` may hold an `unsafe` block, fn, impl or trait. The one thing allowed elsewhere
//! is a call of an `unsafe fn` that `sys` declares, written `unsafe { sys::name(…) }` with a
//! `// SAFETY:` comment right above it (the caller vouches for the contract in the fn's
//! `# Safety` section; today that is the prestart hook's `sys::fork`).
//!
//! Owns: a small scanner that blanks comments, strings and char literals out of Rust source
//! (so the word in docs, messages and test tables does not count) and finds the `unsafe`
//! keyword in what is left. Must not: judge the `unsafe` inside `sys` (clippy's
//! `undocumented_unsafe_blocks`, denied in Cargo.toml, wants a `SAFETY:` note on each block).

use std::path::{Path, PathBuf};

/// `src` with every comment, string literal and char literal replaced by spaces (newlines
/// kept, so byte offsets and line numbers still match the original).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if let Some(end) = raw_string_end(b, i) {
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}', 'é'); otherwise a lifetime or label.
            let end = if rest.get(1) == Some(&b'\\') {
                // The escaped character itself may be a quote: `'\''`.
                rest.get(3..)
                    .and_then(|r| r.iter().position(|&c| c == b'\''))
                    .map(|n| i + 3 + n + 1)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 1 + ch + 1)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else if ident(b[i]) {
            // Skip a whole identifier, so that `r`/`b` inside one never starts a literal.
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced")
}

/// Where the raw string literal (`r"…"`, `r#"…"#`, `br"…"`, `cr#"…"#`) starting at `i` ends,
/// if one starts there.
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return None;
    }
    let mut j = i;
    if matches!(b.get(j), Some(b'b') | Some(b'c')) {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    j += hashes;
    if b.get(j) != Some(&b'"') {
        return None;
    }
    let close: Vec<u8> = std::iter::once(b'"')
        .chain(std::iter::repeat_n(b'#', hashes))
        .collect();
    let body = j + 1;
    let n = b[body..].windows(close.len()).position(|w| w == close)?;
    Some(body + n + close.len())
}

/// The byte offsets of the `unsafe` keyword in `code` (the output of [`code_only`]).
fn keyword_offsets(code: &str) -> Vec<usize> {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let b = code.as_bytes();
    code.match_indices("unsafe")
        .map(|(i, _)| i)
        .filter(|&i| {
            let before = i.checked_sub(1).map(|j| b[j]);
            let after = b.get(i + "unsafe".len()).copied();
            !before.is_some_and(ident) && !after.is_some_and(ident)
        })
        .collect()
}

/// The names of the `unsafe fn`s declared in `code` (the output of [`code_only`]).
fn unsafe_fn_names(code: &str) -> Vec<String> {
    keyword_offsets(code)
        .into_iter()
        .filter_map(|i| {
            let rest = code[i + "unsafe".len()..].trim_start();
            let rest = rest.strip_prefix("fn")?;
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The `unsafe` in `src` that break the rule, as (line, why); `sys_unsafe_fns` are the
/// `unsafe fn`s that `sys` declares.
fn violations(src: &str, sys_unsafe_fns: &[String]) -> Vec<(usize, String)> {
    let code = code_only(src);
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for i in keyword_offsets(&code) {
        let line = code[..i].matches('\n').count();
        let rest = code[i + "unsafe".len()..].trim_start();
        let callee = rest
            .strip_prefix('{')
            .map(str::trim_start)
            .and_then(|r| r.strip_prefix("crate::").or(Some(r)))
            .and_then(|r| r.strip_prefix("sys::"))
            .map(|r| {
                r.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            });
        let Some(callee) = callee.filter(|c| sys_unsafe_fns.contains(c)) else {
            out.push((
                line + 1,
                "`unsafe` outside sys: add a safe wrapper to src/sys.rs (or src/sys/) and call it"
                    .to_string(),
            ));
            continue;
        };
        // The comment lines right above the statement must say why the contract holds.
        let documented = lines[..line]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("//"))
            .any(|l| l.contains("SAFETY:"));
        if !documented {
            out.push((
                line + 1,
                format!("the call of the `unsafe fn` sys::{callee} has no `// SAFETY:` comment right above it"),
            ));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn unsafe_only_in_sys() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let in_sys = |p: &Path| p == src.join("sys.rs") || p.starts_with(src.join("sys"));
    let read =
        |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let sys_unsafe_fns: Vec<String> = files
        .iter()
        .filter(|p| in_sys(p))
        .flat_map(|p| unsafe_fn_names(&code_only(&read(p))))
        .collect();
    assert!(
        sys_unsafe_fns.iter().any(|f| f == "fork"),
        "the scanner finds sys's unsafe fns (fork among them): {sys_unsafe_fns:?}"
    );
    let mut found = Vec::new();
    for p in files.iter().filter(|p| !in_sys(p)) {
        for (line, why) in violations(&read(p), &sys_unsafe_fns) {
            found.push(format!(
                "{}:{line}: {why}",
                p.strip_prefix(&src).unwrap().display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "unsafe outside src/sys:\n{}",
        found.join("\n")
    );
}

#[test]
fn scanner_cases() {
    let sys_fns = vec!["fork".to_string()];
    // (name, source, lines reported)
    let cases: &[(&str, &str, &[usize])] = &[
        (
            "block",
            "fn f() {\n    unsafe { libc::getpid() };\n}\n",
            &[2],
        ),
        ("unsafe fn", "unsafe fn f() {}\n", &[1]),
        (
            "unsafe impl",
            "struct S;\nunsafe impl Send for S {}\n",
            &[2],
        ),
        ("unsafe extern", "unsafe extern \"C\" {}\n", &[1]),
        ("line comment", "// an unsafe { thing }\nfn f() {}\n", &[]),
        (
            "doc comment",
            "//! the only `unsafe` here\n/// unsafe fn\nfn f() {}\n",
            &[],
        ),
        (
            "nested block comment",
            "/* a /* unsafe */ unsafe { } */ fn f() {}\n",
            &[],
        ),
        ("string", "const S: &str = \"unsafe { }\";\n", &[]),
        (
            "escaped quote in string",
            "const S: &str = \"\\\" unsafe\";\n",
            &[],
        ),
        (
            "raw string",
            "const S: &str = r#\"say \"unsafe\" {\"#;\n",
            &[],
        ),
        (
            "byte and C strings",
            "const A: &[u8] = b\"unsafe\"; const B: &CStr = c\"unsafe\";\n",
            &[],
        ),
        ("identifier", "fn unsafe_var() {}\nfn is_unsafe() {}\n", &[]),
        (
            "escaped quote char",
            "const Q: char = '\\'';\nconst U: &str = \"unsafe\";\n",
            &[],
        ),
        (
            "char literals and lifetimes",
            "fn f<'a>(x: &'a str) -> char { '\"' }\nunsafe fn g() {}\n",
            &[2],
        ),
        (
            "documented sys unsafe fn",
            "// SAFETY: the child keeps the rules.\nlet p = unsafe { sys::fork() };\n",
            &[],
        ),
        (
            "crate path",
            "// SAFETY: the child keeps the rules.\nlet p = unsafe { crate::sys::fork() };\n",
            &[],
        ),
        (
            "undocumented sys unsafe fn",
            "let p = unsafe { sys::fork() };\n",
            &[1],
        ),
        (
            "a safe sys fn in an unsafe block",
            "// SAFETY: none needed.\nunsafe { sys::pipe() };\n",
            &[2],
        ),
        (
            "SAFETY note not right above",
            "// SAFETY: stale.\n\nlet p = unsafe { sys::fork() };\n",
            &[3],
        ),
    ];
    for (name, src, want) in cases {
        let got: Vec<usize> = violations(src, &sys_fns)
            .into_iter()
            .map(|(l, _)| l)
            .collect();
        assert_eq!(&got, want, "case {name}: {src:?}");
    }
}

#[test]
fn unsafe_fn_names_cases() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("pub unsafe fn", "pub unsafe fn fork() {}\n", &["fork"]),
        (
            "private unsafe fn",
            "unsafe fn bpf<T>(attr: &mut T) {}\n",
            &["bpf"],
        ),
        ("block is not a fn", "fn f() { unsafe { g() } }\n", &[]),
        (
            "doc mention",
            "/// Unlike `unsafe fn fork`.\nfn f() {}\n",
            &[],
        ),
    ];
    for (name, src, want) in cases {
        assert_eq!(unsafe_fn_names(&code_only(src)), *want, "case {name}");
    }
}
