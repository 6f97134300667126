//! OCI bundles for black-box tests: a busybox rootfs (static) or a small glibc rootfs, a
//! config.json from `runc spec` edited for the test, the hook wired in with an explicit env,
//! and `runc run` with the host mount table compared before and after.

#![allow(dead_code)]

use super::hostkind;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

pub const HOOK: &str = env!("CARGO_BIN_EXE_nvidia-container-runtime-hook");
pub const CDI_HOOK: &str = env!("CARGO_BIN_EXE_nvidia-cdi-hook");
pub const CTK: &str = env!("CARGO_BIN_EXE_nvidia-ctk");

/// Panics with a clear message when a tool the tests need is missing (never skips).
pub fn require(tool: &str) -> PathBuf {
    which::which(tool).unwrap_or_else(|_| {
        panic!("{tool} is not installed: run scripts/install-deps.sh (as root) before the tests")
    })
}

/// A character device node `path` (`major:minor`, mode 0666), as an opt-in set's on a
/// simulated host; one that is already there is fine.
#[allow(dead_code)] // not every test binary makes nodes
pub fn mknod_char(path: &Path, major: u32, minor: u32) {
    if let Err(e) = nvct_sys::mknod_char(path, 0o666, major, minor) {
        assert!(
            e.raw_os_error() == Some(libc::EEXIST),
            "mknod {}: {e}",
            path.display()
        );
    }
}

pub fn require_root() {
    let euid = nvct_sys::euid();
    assert_eq!(euid, 0, "these tests need root (they run real containers)");
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Image {
    /// busybox-static only: no libc, libraries go to /usr/lib64.
    Busybox,
    /// busybox plus the host's glibc and a program that dlopens libcuda.so.1.
    Glibc,
    /// The same in the RHEL / Fedora layout: glibc in /usr/lib64, /lib64 a link to it.
    GlibcLib64,
}

pub struct Bundle {
    pub dir: PathBuf,
    pub id: String,
    pub spec: Value,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Bundle {
    /// A new bundle under `parent` with a fresh rootfs of `image`.
    pub fn new(parent: &Path, image: Image) -> Bundle {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let id = format!("nvct-{}-{n}", std::process::id());
        let dir = parent.join(&id);
        let rootfs = dir.join("rootfs");
        for d in ["bin", "etc", "proc", "dev", "sys", "tmp"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        let busybox = require("busybox");
        std::fs::copy(&busybox, rootfs.join("bin/busybox")).unwrap();
        for applet in [
            "sh", "ls", "cat", "echo", "mknod", "grep", "mount", "readlink", "stat", "test", "wc",
        ] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
        }
        match image {
            Image::Busybox => {}
            Image::Glibc => glibc_rootfs(&rootfs, &parent.join(format!("{id}-build")), false),
            Image::GlibcLib64 => glibc_rootfs(&rootfs, &parent.join(format!("{id}-build")), true),
        }
        run_ok(Command::new(require("runc")).arg("spec").current_dir(&dir));
        let spec: Value =
            serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
        let mut b = Bundle { dir, id, spec };
        b.spec["process"]["terminal"] = json!(false);
        b
    }

    pub fn rootfs(&self) -> PathBuf {
        self.dir.join("rootfs")
    }

    pub fn env(&mut self, kv: &str) -> &mut Self {
        self.spec["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!(kv));
        self
    }

    pub fn add_capability(&mut self, cap: &str) -> &mut Self {
        for set in ["bounding", "effective", "permitted"] {
            self.spec["process"]["capabilities"][set]
                .as_array_mut()
                .unwrap()
                .push(json!(cap));
        }
        self
    }

    /// Registers our hook as the prestart hook with `-config config`, with an explicit env.
    pub fn hook(&mut self, config: &Path) -> &mut Self {
        self.spec["hooks"] = json!({"prestart": [{
            "path": HOOK,
            "args": ["nvidia-container-runtime-hook", "-config", config, "prestart"],
            "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
        }]});
        self
    }

    /// Appends a hook of `kind` (`createContainer`, `prestart`, …) running `path` with `args`
    /// (argv[1..]) and an explicit env, as a CDI spec writes it.
    pub fn add_hook(&mut self, kind: &str, path: &str, args: &[&str]) -> &mut Self {
        let mut argv = vec![Path::new(path).file_name().unwrap().to_str().unwrap()];
        argv.extend_from_slice(args);
        if !self.spec["hooks"].is_object() {
            self.spec["hooks"] = json!({});
        }
        let mut list = self.spec["hooks"][kind]
            .as_array()
            .cloned()
            .unwrap_or_default();
        list.push(
            json!({"path": path, "args": argv, "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}),
        );
        self.spec["hooks"][kind] = Value::Array(list);
        self
    }

    /// Adds a read-only bind mount of the host path `source` at `destination`.
    pub fn bind_ro(&mut self, source: &Path, destination: &str) -> &mut Self {
        self.spec["mounts"].as_array_mut().unwrap().push(json!({
            "destination": destination, "type": "bind", "source": source, "options": ["rbind", "ro", "nosuid", "nodev"],
        }));
        self
    }

    /// `runc run` with `sh -c script`; returns the output. Asserts that the host's mount table
    /// is exactly the same after the container exited as before it started.
    pub fn run(&mut self, script: &str) -> Output {
        let _quiet = super::engines::quiet();
        let before = host_mounts();
        let out = self.run_unchecked(script);
        let after = host_mounts();
        assert_eq!(
            before, after,
            "the host mount table changed across the container's life"
        );
        out
    }
}

impl Bundle {
    /// `runc run` with `sh -c script` without the mount-table check (for containers run in
    /// parallel, where the caller compares the table around all of them).
    pub fn run_unchecked(&mut self, script: &str) -> Output {
        self.spec["process"]["args"] = json!(["sh", "-c", script]);
        std::fs::write(
            self.dir.join("config.json"),
            serde_json::to_vec_pretty(&self.spec).unwrap(),
        )
        .unwrap();
        let out = hostkind::command(require("runc"))
            .args(["run", &self.id])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .expect("runc run");
        let _ = hostkind::command("runc")
            .args(["delete", "-f", &self.id])
            .output();
        out
    }
}

impl Bundle {
    /// `runc run` with `sh -c script`, killed (and the container deleted) when it has not
    /// finished after `limit`: `None` then. For images built to hang the start.
    pub fn run_within(&mut self, script: &str, limit: std::time::Duration) -> Option<Output> {
        self.spec["process"]["args"] = json!(["sh", "-c", script]);
        std::fs::write(
            self.dir.join("config.json"),
            serde_json::to_vec_pretty(&self.spec).unwrap(),
        )
        .unwrap();
        let (out_path, err_path) = (self.dir.join("runc.stdout"), self.dir.join("runc.stderr"));
        // Its own pid namespace (everything it starts dies with it) and, on cgroup v1, its own
        // memory cgroup (512 MiB for runc, our hooks and what they run), so that a start that
        // hangs or floods cannot hang or starve the suite.
        let memcg = Path::new("/sys/fs/cgroup/memory").join(format!("nvct-{}", self.id));
        let memcg = (hostkind::kind() == hostkind::HostKind::V1
            && std::fs::create_dir(&memcg).is_ok())
        .then(|| {
            std::fs::write(memcg.join("memory.limit_in_bytes"), "536870912").unwrap();
            memcg
        });
        let enter = match &memcg {
            Some(cg) => format!("echo $$ > {}/cgroup.procs && ", cg.display()),
            None => String::new(),
        };
        let mut child = hostkind::command("sh")
            .arg("-c")
            .arg(format!(
                "{enter}exec unshare -p -f --kill-child --mount-proc \"$0\" \"$@\""
            ))
            .arg(require("runc"))
            .args(["run", &self.id])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .spawn()
            .expect("runc run");
        let deadline = std::time::Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let _ = hostkind::command("runc")
            .args(["delete", "-f", &self.id])
            .output();
        if let Some(cg) = memcg {
            let _ = std::fs::remove_dir(cg);
        }
        let status = status?;
        Some(Output {
            status,
            stdout: std::fs::read(&out_path).unwrap(),
            stderr: std::fs::read(&err_path).unwrap(),
        })
    }
}

/// Pids of the processes whose root directory is `dir` (a container's rootfs): what a start
/// left behind once the container is gone.
pub fn processes_rooted_at(dir: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let want = std::fs::metadata(dir).unwrap();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(m) = std::fs::metadata(e.path().join("root")) {
            if (m.dev(), m.ino()) == (want.dev(), want.ino()) {
                out.push(pid);
            }
        }
    }
    out
}

/// A simulated GPU host with `gpus` GPUs in a new temp dir named `<prefix>…` that outlives the
/// test (container tests inspect it after failures): (the dir, the host under `dir/host`).
pub fn scratch_host(prefix: &str, gpus: u32) -> (PathBuf, super::fakehost::FakeHost) {
    require_root();
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .unwrap()
        .keep();
    let host = super::fakehost::FakeHost::builder()
        .gpus(gpus)
        .build(&dir.join("host"))
        .unwrap_or_else(|e| {
            panic!("building the simulated host (run `cargo build --workspace` first): {e}")
        });
    (dir, host)
}

/// A finished command's status, stdout and stderr, for assertion messages.
pub fn out_text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Mount points of this (host) mount namespace, sorted, with their sources and options.
/// Part of the name of every host tmpfs a test mounts on purpose (`host_mounts` leaves them
/// out, so that concurrent tests' mount-table checks do not see them).
pub const HOST_TMPFS_MARK: &str = "nvct-host-tmpfs-";

pub fn host_mounts() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut v: Vec<String> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            format!("{} {} {}", f[4], f[3], f[5])
        })
        // runc 1.1 protects its own binary (CVE-2019-5736) with a short-lived read-only bind
        // of itself onto a file in its state dir (/run/runc/<id>/runc.XXXX) while it starts a
        // container: that of a concurrent test's container, not a mount of ours.
        .filter(|m| !(m.contains("/runc ") && m.starts_with("/run/runc/")))
        // podman's storage (containers/storage's overlay driver) binds its own home dir onto
        // itself and mounts each container's rootfs under it while a podman command runs: a
        // concurrent podman test's, not a mount of ours.
        .filter(|m| !m.starts_with("/var/lib/containers/storage/"))
        // Host tmpfs mounts a test makes on purpose (a volume's backing store), named so.
        .filter(|m| !m.contains(HOST_TMPFS_MARK))
        .collect();
    v.sort();
    v
}

const DLCUDA_C: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) { printf("dlopen failed: %s\n", dlerror()); return 1; }
    int (*get)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    if (!get) { printf("dlsym failed: %s\n", dlerror()); return 1; }
    int v = 0;
    int rc = get(&v);
    printf("cuDriverGetVersion rc=%d version=%d\n", rc, v);
    return rc;
}
"#;

/// The host's glibc (loader + libc) in the Debian layout (or the RHEL one, `lib64`), and
/// /usr/bin/dlcuda.
fn glibc_rootfs(rootfs: &Path, build: &Path, lib64: bool) {
    std::fs::create_dir_all(build).unwrap();
    let libdir = rootfs.join(if lib64 {
        "usr/lib64"
    } else {
        "usr/lib/x86_64-linux-gnu"
    });
    std::fs::create_dir_all(&libdir).unwrap();
    std::fs::create_dir_all(rootfs.join("usr/bin")).unwrap();
    for lib in ["libc.so.6", "ld-linux-x86-64.so.2"] {
        std::fs::copy(
            Path::new("/lib/x86_64-linux-gnu").join(lib),
            libdir.join(lib),
        )
        .unwrap();
    }
    if lib64 {
        std::os::unix::fs::symlink("usr/lib64", rootfs.join("lib64")).unwrap();
        std::os::unix::fs::symlink("usr/lib", rootfs.join("lib")).unwrap();
        std::fs::create_dir_all(rootfs.join("usr/lib")).unwrap();
    } else {
        std::fs::create_dir_all(rootfs.join("lib64")).unwrap();
        std::os::unix::fs::symlink("usr/lib", rootfs.join("lib")).unwrap();
        std::os::unix::fs::symlink(
            "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            rootfs.join("lib64/ld-linux-x86-64.so.2"),
        )
        .unwrap();
    }
    let src = build.join("dlcuda.c");
    std::fs::write(&src, DLCUDA_C).unwrap();
    run_ok(
        Command::new(require("gcc"))
            .arg("-o")
            .arg(rootfs.join("usr/bin/dlcuda"))
            .arg(&src),
    );
    // As a distribution's image: an ld.so.conf naming its lib dir, and the cache its
    // ldconfig made when the image was built.
    let lib_dir = Path::new("/").join(libdir.strip_prefix(rootfs).unwrap());
    std::fs::create_dir_all(rootfs.join("etc/ld.so.conf.d")).unwrap();
    std::fs::write(
        rootfs.join("etc/ld.so.conf"),
        "include /etc/ld.so.conf.d/*.conf\n",
    )
    .unwrap();
    std::fs::write(
        rootfs.join("etc/ld.so.conf.d/libc.conf"),
        format!("{}\n", lib_dir.display()),
    )
    .unwrap();
    run_ok(Command::new("/sbin/ldconfig").arg("-r").arg(rootfs));
}

/// A toolkit config.toml for a fake host.
pub fn write_config(dir: &Path, driver_root: &Path, proc_root: &Path, extra: &str) -> PathBuf {
    let path = dir.join(format!(
        "config-{}.toml",
        COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    let text = format!(
        "{extra}\n[nvidia-container-cli]\nroot = {:?}\nproc-root = {:?}\n",
        driver_root.display().to_string(),
        proc_root.display().to_string()
    );
    std::fs::write(&path, text).unwrap();
    path
}
