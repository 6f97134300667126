//! `nvidia-ctk runtime configure --runtime=containerd`: `runtime_config::containerd::configure`
//! and `unconfigure` on a hostile/odd `config.toml` (input: flags byte + text), in place or
//! with a drop-in, versions 1–3.
//! Properties (panic otherwise): every file a successful transform writes is TOML with a
//! supported version; configure run again on its own output writes the same bytes (the
//! documented idempotence); unconfigure of the configured file succeeds, writes TOML, and a
//! second unconfigure changes nothing.

use crate::common;

use common::{assert_toml, contents};
use nvct_engines::{containerd, Source};
use std::path::Path;

/// One input (see the module doc for what is checked); panics on a failed property.
pub fn run(data: &[u8]) {
    let Some((flags, text)) = common::flags_and_text(data) else {
        return;
    };
    let opts = common::options(flags);
    let main_path = Path::new("/etc/containerd/config.toml");
    let drop_in = common::drop_in(flags, "/etc/containerd/conf.d/99-nvidia.toml");
    let src = Source {
        path: main_path,
        text,
    };
    let Ok(first) = containerd::configure(src, src, drop_in, &opts) else {
        return;
    };
    for (path, content) in contents(&first) {
        let doc = assert_toml("configure", path, content);
        containerd::version(&doc, path)
            .unwrap_or_else(|e| panic!("configure wrote {e}\n{content}"));
    }
    let new_main = contents(&first)
        .into_iter()
        .find(|(p, _)| *p == main_path)
        .map(|(_, c)| c.to_string())
        .expect("configure always writes the main file");

    let again_src = Source {
        path: main_path,
        text: &new_main,
    };
    let second = containerd::configure(again_src, again_src, drop_in, &opts)
        .unwrap_or_else(|e| panic!("configure fails on its own output: {e}\n{new_main}"));
    assert_eq!(first, second, "configure is not idempotent; input:\n{text}");

    // Unconfigure the file configure wrote, with the original as the backup.
    let un = containerd::unconfigure(again_src, Some(text), drop_in, &opts)
        .unwrap_or_else(|e| panic!("unconfigure fails on configure's output: {e}\n{new_main}"));
    let Some(restored) = contents(&un)
        .into_iter()
        .find(|(p, _)| *p == main_path)
        .map(|(_, c)| c.to_string())
    else {
        return;
    };
    assert_toml("unconfigure", main_path, &restored);
    let un_src = Source {
        path: main_path,
        text: &restored,
    };
    let un2 = containerd::unconfigure(un_src, Some(text), drop_in, &opts)
        .unwrap_or_else(|e| panic!("unconfigure fails on its own output: {e}\n{restored}"));
    let restored2 = contents(&un2)
        .into_iter()
        .find(|(p, _)| *p == main_path)
        .map(|(_, c)| c.to_string());
    assert_eq!(
        restored2.as_deref(),
        Some(restored.as_str()),
        "unconfigure is not idempotent; input:\n{text}"
    );
}
