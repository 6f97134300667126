//! `nvidia-ctk runtime configure --runtime=crio`: `runtime_config::crio::configure` and
//! `unconfigure` on a hostile/odd `crio.conf` (input: flags byte + text), in place or with
//! a drop-in.
//! Properties (panic otherwise): what a successful transform writes is TOML and holds
//! `crio.runtime.runtimes.<name>.runtime_path`; configure on its own output writes the same
//! bytes; unconfigure of the configured file succeeds, writes TOML, and is idempotent.

use crate::common;

use common::{assert_toml, contents};
use nvct_engines::{crio, Source};
use std::path::Path;

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Some((flags, text)) = common::flags_and_text(data) else {
        return;
    };
    let opts = common::options(flags);
    let main_path = Path::new("/etc/crio/crio.conf");
    let drop_in = common::drop_in(flags, "/etc/crio/crio.conf.d/99-nvidia.conf");
    let src = Source {
        path: main_path,
        text,
    };
    let Ok(first) = crio::configure(src, src, drop_in, &opts) else {
        return;
    };
    let written = contents(&first);
    assert_eq!(written.len(), 1, "{first:?}");
    let (target, content) = written[0];
    let doc = assert_toml("configure", target, content);
    let entry = doc
        .get("crio")
        .and_then(|c| c.get("runtime"))
        .and_then(|r| r.get("runtimes"))
        .and_then(|r| r.get(&opts.runtime_name))
        .and_then(|e| e.get("runtime_path"))
        .and_then(|p| p.as_str());
    assert_eq!(
        entry,
        Some(opts.runtime_path.as_str()),
        "runtime entry missing:\n{content}"
    );
    if drop_in.is_some() {
        return; // the drop-in is rebuilt from the untouched main file: nothing more to check
    }

    let content = content.to_string();
    let again_src = Source {
        path: main_path,
        text: &content,
    };
    let second = crio::configure(again_src, again_src, None, &opts)
        .unwrap_or_else(|e| panic!("configure fails on its own output: {e}\n{content}"));
    assert_eq!(first, second, "configure is not idempotent; input:\n{text}");

    let un = crio::unconfigure(again_src, Some(text), None, &opts)
        .unwrap_or_else(|e| panic!("unconfigure fails on configure's output: {e}\n{content}"));
    let Some((_, restored)) = contents(&un).into_iter().next() else {
        return;
    };
    let restored = restored.to_string();
    assert_toml("unconfigure", main_path, &restored);
    let un_src = Source {
        path: main_path,
        text: &restored,
    };
    let un2 = crio::unconfigure(un_src, Some(text), None, &opts)
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
