//! The two facts about ELF files this toolkit reads: whether an executable is static (the host
//! ldconfig must be, [`static_elf`]), and a shared library's `DT_SONAME` with the ld cache
//! flags of its class and machine ([`shared_object`]), which the native ld cache writer
//! (`container/ld_cache.rs`) needs for every library it lists.
//!
//! Files may be hostile (a library path in a container rootfs is the image's): every offset is
//! bounds-checked, only a few page-sized `pread`s are made whatever the file's size, and nothing
//! here panics. Only little-endian files are read (every architecture a GPU driver ships for).

use crate::ldcache;
use std::os::unix::fs::FileExt;

/// Longest soname accepted (sonames are short file names).
const MAX_SONAME: usize = 255;
/// Most program headers read (real libraries have about ten).
const MAX_PHDRS: usize = 64;
/// Largest dynamic section read (real ones are well under 1 KiB).
const MAX_DYNAMIC: u64 = 16 << 10;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const ET_DYN: u16 = 3;
const DT_NULL: u64 = 0;
const DT_STRTAB: u64 = 5;
const DT_SONAME: u64 = 14;
const EM_386: u16 = 3;
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;

/// A shared library as the ld cache lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedObject {
    pub soname: String,
    /// The cache's type and architecture bits for its class and machine (`0x0303` x86-64).
    pub cache_flags: i32,
}

/// Reads little-endian integers at file offsets; `None` past the end.
struct Reader<'a> {
    read: &'a dyn Fn(u64, &mut [u8]) -> Option<()>,
}

impl Reader<'_> {
    fn bytes<const N: usize>(&self, at: u64) -> Option<[u8; N]> {
        let mut b = [0u8; N];
        (self.read)(at, &mut b)?;
        Some(b)
    }
    fn u16(&self, at: u64) -> Option<u16> {
        self.bytes(at).map(u16::from_le_bytes)
    }
    fn u32(&self, at: u64) -> Option<u32> {
        self.bytes(at).map(u32::from_le_bytes)
    }
    fn u64(&self, at: u64) -> Option<u64> {
        self.bytes(at).map(u64::from_le_bytes)
    }
    /// A word of the file's class.
    fn word(&self, at: u64, is64: bool) -> Option<u64> {
        if is64 {
            self.u64(at)
        } else {
            self.u32(at).map(u64::from)
        }
    }
}

/// A program header: type, file offset, virtual address, size in the file.
struct Phdr {
    kind: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

/// The ELF class (64-bit?), type and machine, and the program headers of a little-endian ELF.
fn headers(r: &Reader) -> Option<(bool, u16, u16, Vec<Phdr>)> {
    let ident: [u8; 16] = r.bytes(0)?;
    if &ident[..4] != b"\x7fELF" || ident[5] != 1 {
        return None;
    }
    let is64 = match ident[4] {
        1 => false,
        2 => true,
        _ => return None,
    };
    let (e_type, machine) = (r.u16(16)?, r.u16(18)?);
    let (phoff, phentsize, phnum) = if is64 {
        (r.u64(32)?, r.u16(54)?, r.u16(56)?)
    } else {
        (u64::from(r.u32(28)?), r.u16(42)?, r.u16(44)?)
    };
    let mut phdrs = Vec::new();
    for i in 0..usize::from(phnum).min(MAX_PHDRS) as u64 {
        let at = phoff.checked_add(i.checked_mul(u64::from(phentsize))?)?;
        let ph = if is64 {
            Phdr {
                kind: r.u32(at)?,
                offset: r.u64(at.checked_add(8)?)?,
                vaddr: r.u64(at.checked_add(16)?)?,
                filesz: r.u64(at.checked_add(32)?)?,
            }
        } else {
            Phdr {
                kind: r.u32(at)?,
                offset: u64::from(r.u32(at.checked_add(4)?)?),
                vaddr: u64::from(r.u32(at.checked_add(8)?)?),
                filesz: u64::from(r.u32(at.checked_add(16)?)?),
            }
        };
        phdrs.push(ph);
    }
    Some((is64, e_type, machine, phdrs))
}

/// The ld cache flags of a library of this class and machine (glibc's `FLAG_ELF_LIBC6` with
/// the architecture bits ldconfig gives it); `None` for machines this toolkit has no driver for.
fn cache_flags(is64: bool, machine: u16) -> Option<i32> {
    let arch = match (is64, machine) {
        (true, EM_X86_64) => ldcache::FLAG_X8664_LIB64,
        (true, EM_AARCH64) => ldcache::FLAG_AARCH64_LIB64,
        (false, EM_386) => 0,
        _ => return None,
    };
    Some(ldcache::FLAG_ELF_LIBC6 | arch)
}

/// PURE over `read`: the soname and cache flags of the shared library whose bytes `read`
/// gives (`read(offset, buf)` fills `buf` or returns `None`). `None` when it is not a
/// little-endian ELF shared object of a known machine with a `DT_SONAME` that is a plain file
/// name.
fn shared_object_from(read: &dyn Fn(u64, &mut [u8]) -> Option<()>) -> Option<SharedObject> {
    let r = Reader { read };
    let (is64, e_type, machine, phdrs) = headers(&r)?;
    if e_type != ET_DYN {
        return None;
    }
    let cache_flags = cache_flags(is64, machine)?;
    let dynamic = phdrs.iter().find(|p| p.kind == PT_DYNAMIC)?;
    let entry_len: u64 = if is64 { 16 } else { 8 };
    let (mut strtab, mut soname) = (None, None);
    let mut at = dynamic.offset;
    let end = dynamic
        .offset
        .checked_add(dynamic.filesz.min(MAX_DYNAMIC))?;
    while at.checked_add(entry_len)? <= end {
        let tag = r.word(at, is64)?;
        let val = r.word(at + entry_len / 2, is64)?;
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = Some(val),
            DT_SONAME => soname = Some(val),
            _ => {}
        }
        at += entry_len;
    }
    let (strtab, soname) = (strtab?, soname?);
    // DT_STRTAB is an address: find the loaded segment that holds it.
    let seg = phdrs
        .iter()
        .find(|p| p.kind == PT_LOAD && p.vaddr <= strtab && strtab - p.vaddr < p.filesz)?;
    let start = (strtab - seg.vaddr)
        .checked_add(seg.offset)?
        .checked_add(soname)?;
    let mut name = Vec::new();
    for i in 0..=MAX_SONAME as u64 {
        let [b] = r.bytes::<1>(start.checked_add(i)?)?;
        if b == 0 {
            break;
        }
        name.push(b);
    }
    let ok = !name.is_empty()
        && name.len() <= MAX_SONAME
        && name != b"."
        && name != b".."
        && name.iter().all(|b| b.is_ascii_graphic() && *b != b'/');
    Some(SharedObject {
        soname: String::from_utf8(name).ok().filter(|_| ok)?,
        cache_flags,
    })
}

/// Bytes read from a file per `pread` ([`Windows`]): the ELF and program headers come in the
/// first one, the dynamic section and the soname in one each.
const WINDOW: usize = 4096;
/// Windows kept at once (headers, dynamic section, string table, and a spare).
const MAX_WINDOWS: usize = 4;

/// Reads of a file through a few [`WINDOW`]-byte buffers: a field inside a window already read
/// costs no system call. Without this the parser's field-by-field reads made some 55 `pread`s
/// per library (2,299 for 40 libraries in the ld cache step); with it, about three.
struct Windows<'a> {
    file: &'a std::fs::File,
    /// (file offset, bytes read there: shorter than [`WINDOW`] only at the end of the file).
    kept: std::cell::RefCell<Vec<(u64, Vec<u8>)>>,
}

impl Windows<'_> {
    fn read(&self, at: u64, buf: &mut [u8]) -> Option<()> {
        let end = at.checked_add(buf.len() as u64)?;
        let mut kept = self.kept.borrow_mut();
        let hit = kept
            .iter()
            .find(|(start, bytes)| *start <= at && end <= start + bytes.len() as u64);
        if let Some((start, bytes)) = hit {
            let from = usize::try_from(at - start).ok()?;
            buf.copy_from_slice(&bytes[from..from + buf.len()]);
            return Some(());
        }
        let mut bytes = vec![0u8; WINDOW.max(buf.len())];
        let mut filled = 0;
        while filled < bytes.len() {
            match self.file.read_at(&mut bytes[filled..], at + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        bytes.truncate(filled);
        if filled < buf.len() {
            return None;
        }
        buf.copy_from_slice(&bytes[..buf.len()]);
        if kept.len() == MAX_WINDOWS {
            kept.remove(0);
        }
        kept.push((at, bytes));
        Some(())
    }
}

/// The shared library `file` (see [`shared_object_from`]); a few reads of at most a page each.
pub fn shared_object(file: &std::fs::File) -> Option<SharedObject> {
    let windows = Windows {
        file,
        kept: Default::default(),
    };
    shared_object_from(&|at, buf| windows.read(at, buf))
}

/// Reads of `bytes` at file offsets, as [`Reader`] takes them.
fn in_memory(bytes: &[u8]) -> impl Fn(u64, &mut [u8]) -> Option<()> + '_ {
    move |at, buf| {
        let at = usize::try_from(at).ok()?;
        buf.copy_from_slice(bytes.get(at..at.checked_add(buf.len())?)?);
        Some(())
    }
}

/// PURE: the same over bytes in memory (tests, fuzzing).
pub fn shared_object_in(bytes: &[u8]) -> Option<SharedObject> {
    shared_object_from(&in_memory(bytes))
}

/// PURE: whether `head` (the first bytes of a file) is an ELF executable without an
/// interpreter (`PT_INTERP`): one the kernel runs without loading anything else.
pub fn static_elf(head: &[u8]) -> Result<(), &'static str> {
    if head.len() < 52 || &head[..4] != b"\x7fELF" {
        return Err(if head.starts_with(b"#!") {
            "a script"
        } else {
            "not an ELF binary"
        });
    }
    if head[5] != 1 {
        return Err("a big-endian ELF file");
    }
    let read = in_memory(head);
    let r = Reader { read: &read };
    let truncated = "an ELF file whose program headers cannot be read";
    let is64 = head[4] == 2;
    let (phoff, phentsize, phnum) = if is64 {
        (r.u64(32), r.u16(54), r.u16(56))
    } else {
        (r.u32(28).map(u64::from), r.u16(42), r.u16(44))
    };
    let (phoff, phentsize, phnum) = (
        phoff.ok_or(truncated)?,
        phentsize.ok_or(truncated)?,
        phnum.ok_or(truncated)?,
    );
    for i in 0..u64::from(phnum) {
        let at = i
            .checked_mul(u64::from(phentsize))
            .and_then(|o| o.checked_add(phoff))
            .ok_or(truncated)?;
        if r.u32(at).ok_or(truncated)? == PT_INTERP {
            return Err("dynamically linked (it has an interpreter)");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn elf64(phdrs: &[u32]) -> Vec<u8> {
        let mut f = vec![0u8; 64 + 56 * phdrs.len()];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2; // 64-bit
        f[5] = 1; // little endian
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        for (i, t) in phdrs.iter().enumerate() {
            f[64 + 56 * i..68 + 56 * i].copy_from_slice(&t.to_le_bytes());
        }
        f
    }

    #[test]
    fn static_elf_cases() {
        let mut truncated = elf64(&[1, 3]);
        truncated.truncate(64 + 56 + 2);
        let mut big_endian = elf64(&[1]);
        big_endian[5] = 2;
        let cases: Vec<(&str, Vec<u8>, Result<(), &str>)> = vec![
            ("static: LOAD only", elf64(&[1, 1, 4]), Ok(())),
            ("no program headers", elf64(&[]), Ok(())),
            (
                "dynamic: INTERP",
                elf64(&[6, 3, 1]),
                Err("dynamically linked (it has an interpreter)"),
            ),
            (
                "shell wrapper",
                b"#!/bin/sh\nexec /sbin/ldconfig.real \"$@\"\n".to_vec(),
                Err("a script"),
            ),
            ("empty", vec![], Err("not an ELF binary")),
            (
                "truncated headers",
                truncated,
                Err("an ELF file whose program headers cannot be read"),
            ),
            ("big endian", big_endian, Err("a big-endian ELF file")),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(static_elf(&bytes), want, "case {name}");
        }
    }

    fn gcc_lib(dir: &Path, name: &str, args: &[&str]) -> Vec<u8> {
        let src = dir.join("x.c");
        std::fs::write(&src, "int f(void) { return 1; }\n").unwrap();
        let out = dir.join(name);
        let status = Command::new("gcc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .args(args)
            .status()
            .expect("gcc not found: this test builds shared objects with it");
        assert!(status.success(), "gcc {args:?}");
        std::fs::read(out).unwrap()
    }

    #[test]
    fn sonames_of_real_and_crafted_files() {
        let tmp = tempfile::tempdir().unwrap();
        let host_flags = ldcache::FLAG_ELF_LIBC6
            | if cfg!(target_arch = "aarch64") {
                ldcache::FLAG_AARCH64_LIB64
            } else {
                ldcache::FLAG_X8664_LIB64
            };
        let with = gcc_lib(tmp.path(), "a.so", &["-Wl,-soname,libfoo.so.1"]);
        let without = gcc_lib(tmp.path(), "b.so", &[]);
        let slash = gcc_lib(tmp.path(), "c.so", &["-Wl,-soname,../../etc/x"]);
        let exe = std::fs::read("/bin/true").unwrap();
        let mut truncated = with.clone();
        truncated.truncate(200);
        let mut big_endian = with.clone();
        big_endian[5] = 2;
        let cases: Vec<(&str, Vec<u8>, Option<&str>)> = vec![
            ("gcc -soname", with.clone(), Some("libfoo.so.1")),
            ("no DT_SONAME", without, None),
            ("soname with a slash", slash, None),
            ("an executable", exe, None),
            ("truncated", truncated, None),
            ("big endian", big_endian, None),
            ("empty", vec![], None),
            ("garbage", vec![0x7f; 4096], None),
        ];
        for (name, bytes, want) in cases {
            let got = shared_object_in(&bytes);
            assert_eq!(got.as_ref().map(|s| s.soname.as_str()), want, "case {name}");
            // The file reader (page-sized windows) and the in-memory one agree.
            let path = tmp.path().join("case.bin");
            std::fs::write(&path, &bytes).unwrap();
            let f = std::fs::File::open(&path).unwrap();
            assert_eq!(shared_object(&f), got, "case {name}, read from a file");
            if let Some(so) = got {
                assert_eq!(so.cache_flags, host_flags, "case {name}");
            }
        }
        // A large real library, whose dynamic section and strings lie far from its headers.
        for libc in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/aarch64-linux-gnu/libc.so.6",
            "/lib64/libc.so.6",
        ] {
            if let Ok(bytes) = std::fs::read(libc) {
                let f = std::fs::File::open(libc).unwrap();
                let got = shared_object(&f);
                assert!(got.is_some(), "{libc}");
                assert_eq!(got, shared_object_in(&bytes), "{libc}");
            }
        }
    }
}
