//! `nvidia-ctk runtime configure --runtime=docker`: `runtime_config::docker::configure` and
//! `unconfigure` on a hostile/odd `daemon.json` (input: flags byte + text).
//! Properties (panic otherwise): what a successful transform writes is a JSON object;
//! configure's output has `runtimes.<name> = {"args": [], "path": …}`; configure on its own
//! output writes the same bytes; unconfigure of the configured file succeeds, writes JSON
//! without `runtimes.<name>`, and is idempotent.

use crate::common;

use common::contents;
use nvct_engines::{docker, Source};
use serde_json::{json, Map, Value};
use std::path::Path;

fn object(what: &str, text: &str) -> Map<String, Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => m,
        Ok(other) => panic!("{what}: wrote JSON that is not an object: {other}"),
        Err(e) => panic!("{what}: wrote invalid JSON: {e}\n{text}"),
    }
}

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Some((flags, text)) = common::flags_and_text(data) else {
        return;
    };
    let opts = common::options(flags);
    let path = Path::new("/etc/docker/daemon.json");
    let Ok(first) = docker::configure(Source { path, text }, &opts) else {
        return;
    };
    let written = contents(&first);
    assert_eq!(written.len(), 1, "{first:?}");
    let content = written[0].1.to_string();
    let m = object("configure", &content);
    let want = json!({"args": [], "path": opts.runtime_path});
    assert_eq!(
        m.get("runtimes").and_then(|r| r.get(&opts.runtime_name)),
        Some(&want),
        "runtime entry missing:\n{content}"
    );

    let second = docker::configure(
        Source {
            path,
            text: &content,
        },
        &opts,
    )
    .unwrap_or_else(|e| panic!("configure fails on its own output: {e}\n{content}"));
    assert_eq!(first, second, "configure is not idempotent; input:\n{text}");

    let un = docker::unconfigure(
        Source {
            path,
            text: &content,
        },
        Some(text),
        &opts,
    )
    .unwrap_or_else(|e| panic!("unconfigure fails on configure's output: {e}\n{content}"));
    let Some((_, restored)) = contents(&un).into_iter().next() else {
        return;
    };
    let restored = restored.to_string();
    if !restored.trim().is_empty() {
        let m = object("unconfigure", &restored);
        assert!(
            m.get("runtimes")
                .and_then(|r| r.get(&opts.runtime_name))
                .is_none(),
            "runtime still there:\n{restored}"
        );
    }
    let un2 = docker::unconfigure(
        Source {
            path,
            text: &restored,
        },
        Some(text),
        &opts,
    )
    .unwrap_or_else(|e| panic!("unconfigure fails on its own output: {e}\n{restored}"));
    let restored2 = contents(&un2)
        .into_iter()
        .next()
        .map(|(_, c)| c.to_string());
    assert_eq!(
        restored2.as_deref(),
        Some(restored.as_str()),
        "unconfigure is not idempotent; input:\n{text}"
    );
}
