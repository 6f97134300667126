//! cgroup v2: allow our device nodes by extending the runtime's BPF device program.
//!
//! On v2 a cgroup's device access is decided by the `BPF_CGROUP_DEVICE` programs attached to
//! it and to its ancestors, and access is granted only when every one of them returns 1, so
//! attaching a program of our own could never widen access. Instead each program attached to
//! the container's cgroup is replaced, atomically (`BPF_F_REPLACE`, or the single-program
//! mode's own replacement), by our prefix followed by that program's translated instructions,
//! unchanged (jumps are relative, so prepending keeps them valid).
//!
//! Several programs (e.g. systemd's and runc's on one scope): each is extended. All must allow,
//! so extending only one would still leave the node denied; extending each gives "our nodes, or
//! whatever all of them allowed before", never more. Programs on ancestor cgroups are not
//! ours to change (as on v1, a parent's rules bound the child).
//!
//! Owns: that policy. Must not: detach a program without putting its extension in its place,
//! change a program it cannot reload exactly (helper calls, maps, blinded constants: refused
//! with a message), or add anything but our prefix.

use super::insn::{self, Insn};
use super::{is_denied, CgroupError};
use nvct_model::CgroupRule;
use nvct_sys::bpf::{self, F_ALLOW_MULTI, F_REPLACE};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// `CGROUP2_SUPER_MAGIC`.
const CGROUP2_SUPER_MAGIC: i64 = 0x63677270;
/// The verifier log buffer for a failed load (the kernel caps it at `u32::MAX >> 2`).
const LOG_SIZE: usize = 1 << 20;
/// How much of the log ends up in the error (its end says why).
const LOG_TAIL: usize = 4096;

/// Whether this process can read the device programs of cgroup `dir` (what [`allow`] needs
/// first), for `nvidia-ctk doctor`.
pub fn can_query(dir: &Path) -> io::Result<()> {
    let cgroup = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    bpf::query_device_progs(cgroup.as_fd()).map(|_| ())
}

pub(super) fn allow(dir: &Path, rules: &[CgroupRule]) -> Result<(), CgroupError> {
    let cgroup = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map_err(|source| CgroupError::Open {
            path: dir.to_path_buf(),
            source,
        })?;
    let fs_type = nvct_sys::fstatfs_type(cgroup.as_fd()).map_err(|source| CgroupError::Open {
        path: dir.to_path_buf(),
        source,
    })?;
    if fs_type != CGROUP2_SUPER_MAGIC {
        return Err(CgroupError::NotCgroup2 {
            path: dir.to_path_buf(),
            fs_type,
        });
    }
    let err = |op: &str, source: io::Error| {
        if is_denied(&source) {
            CgroupError::Denied {
                path: dir.to_path_buf(),
                op: op.to_string(),
                source,
            }
        } else {
            CgroupError::Bpf {
                path: dir.to_path_buf(),
                op: op.to_string(),
                source,
            }
        }
    };
    let attached = bpf::query_device_progs(cgroup.as_fd())
        .map_err(|e| err("BPF_PROG_QUERY (device programs)", e))?;
    if attached.prog_ids.is_empty() {
        // No device program on this cgroup: it restricts no device.
        return Ok(());
    }
    let prefix = insn::prefix(rules);
    // Multi mode: replace exactly the program we read. Single-program mode (flags 0 or
    // ALLOW_OVERRIDE): attaching with the same flags replaces the one program in place.
    let (flags, replace) = if attached.attach_flags & F_ALLOW_MULTI != 0 {
        (F_ALLOW_MULTI | F_REPLACE, true)
    } else {
        (attached.attach_flags, false)
    };
    for id in attached.prog_ids {
        let old =
            bpf::prog_fd_by_id(id).map_err(|e| err(&format!("BPF_PROG_GET_FD_BY_ID {id}"), e))?;
        let info = bpf::prog_info(old.as_fd())
            .map_err(|e| err(&format!("BPF_OBJ_GET_INFO_BY_FD (program {id})"), e))?;
        let unsupported = |why: String| CgroupError::Unsupported {
            path: dir.to_path_buf(),
            id,
            name: info.name.clone(),
            why,
        };
        if info.prog_type != bpf::PROG_TYPE_CGROUP_DEVICE {
            return Err(unsupported(format!(
                "its type is {}, not BPF_PROG_TYPE_CGROUP_DEVICE",
                info.prog_type
            )));
        }
        if info.nr_map_ids != 0 {
            return Err(unsupported(format!(
                "it uses {} BPF map(s)",
                info.nr_map_ids
            )));
        }
        let xlated = insn::from_bytes(&info.xlated).ok_or_else(|| {
            unsupported("its translated length is not a multiple of 8 bytes".into())
        })?;
        if xlated.is_empty() {
            return Err(unsupported("the kernel returned no instructions".into()));
        }
        insn::check_reloadable(&xlated).map_err(unsupported)?;
        let program = [&prefix[..], &xlated[..]].concat();
        let new = load(dir, id, &info.name, &program)?;
        bpf::attach_device_prog(
            cgroup.as_fd(),
            new.as_fd(),
            flags,
            replace.then(|| old.as_fd()),
        )
        .map_err(|e| err(&format!("BPF_PROG_ATTACH (replacing program {id})"), e))?;
    }
    Ok(())
}

/// Loads the extended program; on failure loads it again with a verifier log for the error.
fn load(dir: &Path, id: u32, old_name: &str, program: &[Insn]) -> Result<OwnedFd, CgroupError> {
    let name = format!("nvct_{old_name}");
    let program = &insn::to_bytes(program);
    let first = match bpf::load_device_prog(program, &name, None) {
        Ok(fd) => return Ok(fd),
        Err(e) => e,
    };
    if first.raw_os_error() == Some(libc::EPERM) {
        // A missing capability (or, before Linux 5.11, RLIMIT_MEMLOCK), not the verifier.
        return Err(CgroupError::Denied {
            path: dir.to_path_buf(),
            op: "BPF_PROG_LOAD".into(),
            source: first,
        });
    }
    let mut log = vec![0u8; LOG_SIZE];
    let (source, log) = match bpf::load_device_prog(program, &name, Some(&mut log)) {
        // Loaded with a log although it failed without: take it.
        Ok(fd) => return Ok(fd),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).into_owned();
            let tail = match text.char_indices().rev().nth(LOG_TAIL) {
                Some((i, _)) => format!("…{}", &text[i..]),
                None => text,
            };
            (e, tail)
        }
    };
    Err(CgroupError::Verifier {
        path: dir.to_path_buf(),
        id,
        source,
        log,
    })
}
