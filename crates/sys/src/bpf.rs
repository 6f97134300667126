//! Thin wrappers over the bpf(2) commands the device cgroup needs on cgroup v2: query the
//! programs attached to a cgroup, open one by id, read its translated instructions, load a
//! `BPF_PROG_TYPE_CGROUP_DEVICE` program, attach one (or atomically replace one).
//!
//! Owns: the `#[repr(C)]` attribute structs (exact prefixes of `union bpf_attr` and
//! `struct bpf_prog_info` from include/uapi/linux/bpf.h, every padding byte an explicit zeroed
//! field) and the `unsafe` those calls need. Must not: decide anything (which programs to
//! replace, what to allow — that is `container/cgroup/v2.rs`), encode or decode instructions
//! (`container/cgroup/insn.rs`: programs cross this API as raw bytes, 8 per instruction), or
//! touch paths.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_ATTACH: libc::c_int = 8;
const BPF_PROG_GET_FD_BY_ID: libc::c_int = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;
const BPF_PROG_QUERY: libc::c_int = 16;

/// `BPF_PROG_TYPE_CGROUP_DEVICE`.
pub const PROG_TYPE_CGROUP_DEVICE: u32 = 15;
/// `BPF_CGROUP_DEVICE` (enum bpf_attach_type).
pub const ATTACH_CGROUP_DEVICE: u32 = 6;
/// Attach flags (`BPF_F_ALLOW_OVERRIDE` is 1).
pub const F_ALLOW_MULTI: u32 = 2;
pub const F_REPLACE: u32 = 4;
/// The most programs one cgroup holds per attach type (`BPF_CGROUP_MAX_PROGS`).
const MAX_PROGS: usize = 64;

/// `union bpf_attr`, the `BPF_PROG_QUERY` member (up to `prog_cnt`).
#[repr(C)]
#[derive(Default)]
struct QueryAttr {
    target_fd: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    prog_cnt: u32,
    _pad: u32,
}

/// `union bpf_attr`, the `BPF_PROG_ATTACH` member (up to `replace_bpf_fd`).
#[repr(C)]
#[derive(Default)]
struct AttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
}

/// `union bpf_attr`, the `BPF_*_GET_FD_BY_ID` member.
#[repr(C)]
#[derive(Default)]
struct GetIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

/// `union bpf_attr`, the `BPF_OBJ_GET_INFO_BY_FD` member.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `union bpf_attr`, the `BPF_PROG_LOAD` member (up to `expected_attach_type`).
#[repr(C)]
#[derive(Default)]
struct LoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `struct bpf_prog_info` up to the `gpl_compatible` bit field word.
#[repr(C)]
#[derive(Default)]
struct RawProgInfo {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; 16],
    ifindex: u32,
    gpl_compatible: u32,
}

/// Runs one bpf(2) command.
///
/// # Safety
/// `attr` must be a `#[repr(C)]` prefix of `union bpf_attr` for `cmd` with no uninitialised
/// bytes, and every pointer stored in it must be valid, for the length stored next to it, for
/// the kernel to read or write during the call.
unsafe fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: the caller guarantees `attr` and the buffers it points to; the kernel reads (and
    // for some commands writes back) exactly `size_of::<T>()` bytes of `attr`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn owned(ret: libc::c_long) -> OwnedFd {
    // SAFETY: `ret` is a new file descriptor the kernel just returned (bpf() returns one for
    // PROG_LOAD and GET_FD_BY_ID, with O_CLOEXEC set); nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(ret as libc::c_int) }
}

/// The programs attached directly to a cgroup for `BPF_CGROUP_DEVICE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The cgroup's attach flags for this type (0, 1 = `BPF_F_ALLOW_OVERRIDE`, or `F_ALLOW_MULTI`).
    pub attach_flags: u32,
    pub prog_ids: Vec<u32>,
}

pub fn query_device_progs(cgroup: BorrowedFd) -> io::Result<Attached> {
    let mut ids = vec![0u32; MAX_PROGS];
    loop {
        let mut attr = QueryAttr {
            target_fd: cgroup.as_raw_fd() as u32,
            attach_type: ATTACH_CGROUP_DEVICE,
            prog_ids: ids.as_mut_ptr() as u64,
            prog_cnt: ids.len() as u32,
            ..Default::default()
        };
        // SAFETY: `attr` is the PROG_QUERY prefix, fully initialised; `prog_ids` points to
        // `ids`, which holds `prog_cnt` u32s and outlives the call.
        match unsafe { bpf(BPF_PROG_QUERY, &mut attr) } {
            Ok(_) => {
                ids.truncate(attr.prog_cnt as usize);
                return Ok(Attached {
                    attach_flags: attr.attach_flags,
                    prog_ids: ids,
                });
            }
            // The kernel wrote the real count; a future kernel may allow more than 64.
            Err(e)
                if e.raw_os_error() == Some(libc::ENOSPC) && attr.prog_cnt as usize > ids.len() =>
            {
                ids = vec![0u32; attr.prog_cnt as usize];
            }
            Err(e) => return Err(e),
        }
    }
}

pub fn prog_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    let mut attr = GetIdAttr {
        id,
        ..Default::default()
    };
    // SAFETY: `attr` is the GET_FD_BY_ID member, fully initialised, with no pointers.
    unsafe { bpf(BPF_PROG_GET_FD_BY_ID, &mut attr) }.map(owned)
}

/// What we need to know about a loaded program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgInfo {
    pub prog_type: u32,
    pub name: String,
    pub nr_map_ids: u32,
    /// The translated (post-verifier) instructions, as raw bytes (8 per instruction).
    pub xlated: Vec<u8>,
}

/// # Safety
/// Every buffer pointer in `info` must be zero or valid for the kernel to write as many bytes
/// as the length field next to it says (only `xlated_prog_insns`/`xlated_prog_len` are used).
unsafe fn get_info(fd: BorrowedFd, info: &mut RawProgInfo) -> io::Result<()> {
    let mut attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of::<RawProgInfo>() as u32,
        info: info as *mut RawProgInfo as u64,
    };
    // SAFETY: `attr` is the OBJ_GET_INFO_BY_FD member; `info` points to a live, initialised
    // `RawProgInfo` of `info_len` bytes, and the caller vouches for the buffers it names.
    unsafe { bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }.map(drop)
}

pub fn prog_info(fd: BorrowedFd) -> io::Result<ProgInfo> {
    // First call: the lengths only (every pointer and length zero).
    let mut info = RawProgInfo::default();
    // SAFETY: every pointer in `info` is zero.
    unsafe { get_info(fd, &mut info) }?;
    let len = info.xlated_prog_len;
    let mut buf = vec![0u8; len as usize];
    let mut info = RawProgInfo {
        xlated_prog_len: len,
        xlated_prog_insns: buf.as_mut_ptr() as u64,
        ..Default::default()
    };
    // SAFETY: the one pointer, `xlated_prog_insns`, is `buf`, which holds `xlated_prog_len`
    // bytes and lives until after the call.
    unsafe { get_info(fd, &mut info) }?;
    if len > 0 && info.xlated_prog_insns == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the kernel withheld the translated instructions (constant blinding with \
             kernel.kptr_restrict: see net.core.bpf_jit_harden)",
        ));
    }
    buf.truncate(info.xlated_prog_len.min(len) as usize);
    let name_len = info
        .name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(info.name.len());
    Ok(ProgInfo {
        prog_type: info.prog_type,
        name: String::from_utf8_lossy(&info.name[..name_len]).into_owned(),
        nr_map_ids: info.nr_map_ids,
        xlated: buf,
    })
}

/// Loads a `BPF_PROG_TYPE_CGROUP_DEVICE` program for `BPF_CGROUP_DEVICE` from `code`, its
/// encoded instructions (8 bytes each). With `log`, the verifier writes its level-1 log into
/// that buffer (NUL-terminated, truncated to fit).
pub fn load_device_prog(code: &[u8], name: &str, log: Option<&mut [u8]>) -> io::Result<OwnedFd> {
    if !code.len().is_multiple_of(8) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "program length is not a multiple of 8 bytes",
        ));
    }
    let license = c"Apache-2.0";
    let mut prog_name = [0u8; 16];
    let name = name
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .take(15);
    for (d, s) in prog_name.iter_mut().zip(name) {
        *d = s;
    }
    let (log_level, log_size, log_buf) = match log {
        Some(l) => (1, l.len() as u32, l.as_mut_ptr() as u64),
        None => (0, 0, 0),
    };
    let mut attr = LoadAttr {
        prog_type: PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: (code.len() / 8) as u32,
        insns: code.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        prog_name,
        expected_attach_type: ATTACH_CGROUP_DEVICE,
        ..Default::default()
    };
    // SAFETY: `attr` is the PROG_LOAD prefix, fully initialised; `insns` points to `code`
    // (insn_cnt * 8 bytes), `license` to a NUL-terminated static string, and `log_buf` (when
    // set) to the caller's exclusively borrowed buffer of `log_size` bytes, which the kernel
    // may write; all outlive the call.
    unsafe { bpf(BPF_PROG_LOAD, &mut attr) }.map(owned)
}

/// Attaches `prog` to `cgroup` for `BPF_CGROUP_DEVICE`. With `F_REPLACE` in `flags`, `replace`
/// is the program it atomically takes the place of.
pub fn attach_device_prog(
    cgroup: BorrowedFd,
    prog: BorrowedFd,
    flags: u32,
    replace: Option<BorrowedFd>,
) -> io::Result<()> {
    let mut attr = AttachAttr {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: ATTACH_CGROUP_DEVICE,
        attach_flags: flags,
        replace_bpf_fd: replace.map_or(0, |r| r.as_raw_fd() as u32),
    };
    // SAFETY: `attr` is the PROG_ATTACH member, fully initialised, with no pointers.
    unsafe { bpf(BPF_PROG_ATTACH, &mut attr) }.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_the_uapi_header() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<QueryAttr>(), 32);
        assert_eq!(offset_of!(QueryAttr, prog_ids), 16);
        assert_eq!(offset_of!(QueryAttr, prog_cnt), 24);
        assert_eq!(size_of::<AttachAttr>(), 20);
        assert_eq!(offset_of!(AttachAttr, replace_bpf_fd), 16);
        assert_eq!(size_of::<GetIdAttr>(), 12);
        assert_eq!(size_of::<InfoAttr>(), 16);
        assert_eq!(offset_of!(LoadAttr, log_buf), 32);
        assert_eq!(offset_of!(LoadAttr, prog_name), 48);
        assert_eq!(offset_of!(LoadAttr, expected_attach_type), 68);
        assert_eq!(size_of::<LoadAttr>(), 72);
        assert_eq!(offset_of!(RawProgInfo, xlated_prog_len), 20);
        assert_eq!(offset_of!(RawProgInfo, xlated_prog_insns), 32);
        assert_eq!(offset_of!(RawProgInfo, nr_map_ids), 52);
        assert_eq!(offset_of!(RawProgInfo, name), 64);
        assert_eq!(size_of::<RawProgInfo>(), 88);
    }
}
