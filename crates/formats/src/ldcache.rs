//! Reader and writer for glibc's `ld.so.cache`: turns the bytes of the cache file into a list
//! of [`Entry`] values (soname → path, with the cache's flags), and a list back into bytes
//! ([`write`], the new format that glibc's loader reads, sorted for its binary search).
//!
//! This module owns the *format* only. It is a pure parser and writer plus one bounded read:
//! it does no lookup policy (which entry wins, architecture preference, hwcaps ordering,
//! path rewriting into a driver root); callers filter the entries themselves, e.g. with
//! [`is_x86_64`].
//!
//! Formats understood (all little-endian):
//!
//! * **new** (`ldconfig -c new`, the default since glibc 2.32): a 48-byte header
//!   `"glibc-ld.so.cache1.1"`, `u32 nlibs`, `u32 len_strings`, `u8 flags`, 3 padding bytes,
//!   `u32 extension_offset`, 3 × `u32` unused; then `nlibs` 24-byte entries
//!   `{i32 flags, u32 key, u32 value, u32 osversion, u64 hwcap}`. String offsets are
//!   relative to the start of this header.
//! * **compat** (`ldconfig -c compat`): an old-format block followed by a new-format
//!   block, the latter at the next 8-byte boundary after the old entry table. Only the
//!   new-format block is read (it is the complete one: it also holds the hwcaps entries),
//!   as glibc's loader does.
//! * **old** (`ldconfig -c old`): `"ld.so-1.7.0\0"`, `u32 nlibs`, then `nlibs` 12-byte
//!   entries `{i32 flags, u32 key, u32 value}`. String offsets are relative to the end of
//!   the entry table (where the string table starts).
//!
//! The file may be hostile: every count and offset is bounds-checked with checked
//! arithmetic, strings must be NUL-terminated inside the file and at most
//! [`MAX_STRING_LEN`] bytes, sonames must be UTF-8, and the total output is bounded by a
//! small multiple of the input size. Nothing here panics.

use nvct_model::Arch;
use serde::Serialize;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Largest cache file [`read`] accepts (real caches are well under 1 MiB).
pub const MAX_CACHE_SIZE: u64 = 64 * 1024 * 1024;

/// Longest string (soname or path, without its NUL) accepted; glibc's `PATH_MAX`.
pub const MAX_STRING_LEN: usize = 4096;

/// Bounds on what [`parse_within`] decodes, beyond the format's own checks: a cache file is
/// small, but its entries may all share a few strings, so a crafted file of a few MiB can
/// decode into millions of heap strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most entries (`nlibs` of the block that is read).
    pub entries: u32,
    /// Most bytes of decoded sonames and paths together.
    pub string_bytes: usize,
}

/// The bounds of an image's cache taken by the native writer (`container::ld_cache`): real
/// distribution caches hold under 10 000 entries and under 1 MiB of strings; beyond these the
/// host ldconfig builds the container's cache instead.
pub const IMAGE_LIMITS: Limits = Limits {
    entries: 20_000,
    string_bytes: 8 << 20,
};

/// `flags & FLAG_TYPE_MASK`: the library type.
pub const FLAG_TYPE_MASK: i32 = 0x00ff;
/// Library type of glibc (libc6) ELF libraries.
pub const FLAG_ELF_LIBC6: i32 = 0x0003;
/// `flags & FLAG_ARCH_MASK`: the architecture / ABI (glibc's `FLAG_REQUIRED_MASK`).
pub const FLAG_ARCH_MASK: i32 = 0xff00;
/// Architecture bits of x86-64 64-bit libraries.
pub const FLAG_X8664_LIB64: i32 = 0x0300;
/// Architecture bits of AArch64 64-bit libraries.
pub const FLAG_AARCH64_LIB64: i32 = 0x0a00;

const OLD_MAGIC: &[u8] = b"ld.so-1.7.0\0";
const OLD_HEADER_LEN: usize = 16; // magic (12) + nlibs (4)
const OLD_ENTRY_LEN: usize = 12;

const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache";
const NEW_VERSION: &[u8] = b"1.1";
const NEW_HEADER_LEN: usize = 48;
const NEW_ENTRY_LEN: usize = 24;
/// Alignment of the new-format header inside a compat file (`__alignof__` of the header,
/// which holds a `uint64_t` in its entries).
const NEW_ALIGN: usize = 8;

/// Byte-order bits of the new header's `flags` byte (glibc ≥ 2.33).
const ENDIAN_MASK: u8 = 0b11;
const ENDIAN_UNSET: u8 = 0;
const ENDIAN_LITTLE: u8 = 2;

/// One library in the cache: `soname` (the cache key) resolves to `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Type and architecture bits, e.g. `0x0303` for x86-64 libc6 (see [`is_x86_64`]).
    pub flags: i32,
    /// The key, e.g. `libcuda.so.1`.
    pub soname: String,
    /// The value, e.g. `/usr/lib/x86_64-linux-gnu/libcuda.so.1`.
    pub path: PathBuf,
    /// The new format's hwcap word: 0 for ordinary entries; glibc-hwcaps entries (from
    /// `glibc-hwcaps/` subdirectories) have bit 62 set and index the file's extension section.
    pub hwcap: u64,
}

/// Whether `flags` mark a 64-bit x86-64 glibc library (`0x0303`).
pub fn is_x86_64(flags: i32) -> bool {
    flags & FLAG_TYPE_MASK == FLAG_ELF_LIBC6 && flags & FLAG_ARCH_MASK == FLAG_X8664_LIB64
}

/// Whether `flags` mark a 32-bit i386 glibc library (`0x0003`: libc6, no architecture bits;
/// `ldconfig -p` lists it as `libc6` without `x86-64`).
pub fn is_i386(flags: i32) -> bool {
    flags & FLAG_TYPE_MASK == FLAG_ELF_LIBC6 && flags & FLAG_ARCH_MASK == 0
}

/// Whether `flags` mark a 64-bit AArch64 glibc library (`0x0a03`).
pub fn is_aarch64(flags: i32) -> bool {
    flags & FLAG_TYPE_MASK == FLAG_ELF_LIBC6 && flags & FLAG_ARCH_MASK == FLAG_AARCH64_LIB64
}

/// Whether an entry with `flags` is a 64-bit glibc library of `arch` (x86-64 `0x0303`,
/// AArch64 `0x0a03`).
pub fn matches_arch(arch: Arch, flags: i32) -> bool {
    match arch {
        Arch::X86_64 => is_x86_64(flags),
        Arch::Aarch64 => is_aarch64(flags),
    }
}

/// Whether an entry with `flags` is a 32-bit library of `arch`'s compat32 ABI (i386 `0x0003`
/// on x86-64; none on AArch64, whose driver has no 32-bit libraries).
pub fn matches_arch32(arch: Arch, flags: i32) -> bool {
    match arch {
        Arch::X86_64 => is_i386(flags),
        Arch::Aarch64 => false,
    }
}

/// What is wrong with a cache's bytes. Offsets are from the start of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("file is empty")]
    Empty,
    #[error("unknown magic (neither `glibc-ld.so.cache` nor `ld.so-1.7.0`)")]
    BadMagic,
    #[error("unsupported new-format version {version:?} (expected \"1.1\")")]
    UnsupportedVersion { version: String },
    #[error(
        "unsupported byte order (header flags {flags:#04x}); only little-endian caches are read"
    )]
    UnsupportedByteOrder { flags: u8 },
    #[error("truncated: {what} at offset {offset} needs {needed} bytes, file has {size}")]
    Truncated {
        what: &'static str,
        offset: usize,
        needed: usize,
        size: usize,
    },
    #[error("{nlibs} entries of {entry_len} bytes at offset {offset} do not fit in the {size}-byte file")]
    TooManyEntries {
        nlibs: u32,
        entry_len: usize,
        offset: usize,
        size: usize,
    },
    #[error("entry {entry}: {field} string offset {offset} is outside the file")]
    StringOutOfRange {
        entry: usize,
        field: &'static str,
        offset: u64,
    },
    #[error("entry {entry}: {field} string at offset {offset} has no NUL terminator within {MAX_STRING_LEN} bytes or before the end of the file")]
    UnterminatedString {
        entry: usize,
        field: &'static str,
        offset: usize,
    },
    #[error("entry {entry}: soname at offset {offset} is not UTF-8")]
    NonUtf8Soname { entry: usize, offset: usize },
    #[error("decoded strings exceed {limit} bytes (a small multiple of the file size, or the caller's bound)")]
    OutputTooLarge { limit: usize },
    #[error("{nlibs} entries exceed the limit of {limit}")]
    EntryLimit { nlibs: u32, limit: u32 },
}

/// Errors of [`parse`] and [`read`].
#[derive(Debug, thiserror::Error)]
pub enum LdCacheError {
    /// The file could not be opened or read.
    #[error("cannot read ld.so cache {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The file is larger than [`MAX_CACHE_SIZE`].
    #[error("ld.so cache {} is larger than the {limit}-byte limit", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    /// [`read`]: the file's bytes are not a valid cache.
    #[error("malformed ld.so cache {}: {error}", path.display())]
    Malformed { path: PathBuf, error: FormatError },
    /// [`parse`]: the bytes are not a valid cache.
    #[error("malformed ld.so cache: {0}")]
    Format(#[from] FormatError),
}

impl LdCacheError {
    /// The format problem, if this error is one.
    pub fn format_error(&self) -> Option<&FormatError> {
        match self {
            LdCacheError::Malformed { error, .. } | LdCacheError::Format(error) => Some(error),
            _ => None,
        }
    }
}

/// Reads and parses the cache at `path` (at most [`MAX_CACHE_SIZE`] bytes).
pub fn read(path: &Path) -> Result<Vec<Entry>, LdCacheError> {
    let io_err = |error| LdCacheError::Read {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::File::open(path).map_err(io_err)?;
    let mut bytes = Vec::new();
    // Read one byte past the limit to detect an oversized file without trusting metadata
    // (which may lie for special files).
    file.take(MAX_CACHE_SIZE + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > MAX_CACHE_SIZE {
        return Err(LdCacheError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_CACHE_SIZE,
        });
    }
    parse(&bytes).map_err(|e| match e {
        LdCacheError::Format(error) => LdCacheError::Malformed {
            path: path.to_path_buf(),
            error,
        },
        other => other,
    })
}

/// Parses the bytes of an `ld.so.cache` (new, compat or old format) into its entries, in
/// file order. hwcaps entries (from `glibc-hwcaps/` subdirectories) are included like any
/// other.
pub fn parse(bytes: &[u8]) -> Result<Vec<Entry>, LdCacheError> {
    let unbounded = Limits {
        entries: u32::MAX,
        string_bytes: usize::MAX,
    };
    Ok(parse_inner(bytes, unbounded)?)
}

/// [`parse`] within `limits`: a cache with more entries or decoded string bytes is refused
/// ([`FormatError::EntryLimit`], [`FormatError::OutputTooLarge`]) before any entry beyond the
/// bound is decoded.
pub fn parse_within(bytes: &[u8], limits: Limits) -> Result<Vec<Entry>, LdCacheError> {
    Ok(parse_inner(bytes, limits)?)
}

fn parse_inner(bytes: &[u8], limits: Limits) -> Result<Vec<Entry>, FormatError> {
    if bytes.is_empty() {
        return Err(FormatError::Empty);
    }
    if bytes.starts_with(NEW_MAGIC) {
        return parse_new(bytes, 0, limits);
    }
    if !bytes.starts_with(OLD_MAGIC) {
        // A file shorter than either magic that is a prefix of one is truncated, not foreign.
        if NEW_MAGIC.starts_with(bytes) || OLD_MAGIC.starts_with(bytes) {
            return Err(FormatError::Truncated {
                what: "magic",
                offset: 0,
                needed: OLD_MAGIC.len().min(NEW_MAGIC.len()),
                size: bytes.len(),
            });
        }
        return Err(FormatError::BadMagic);
    }
    let nlibs = read_u32(bytes, OLD_MAGIC.len(), "old-format header")?;
    let table_end = table_end(bytes, OLD_HEADER_LEN, nlibs, OLD_ENTRY_LEN)?;
    // compat: a new-format block follows at the next aligned offset (glibc's loader checks
    // exactly this position and otherwise falls back to the old entries).
    if let Some(new_start) = table_end.checked_next_multiple_of(NEW_ALIGN) {
        if bytes
            .get(new_start..)
            .is_some_and(|rest| rest.starts_with(NEW_MAGIC))
        {
            return parse_new(bytes, new_start, limits);
        }
    }
    check_count(nlibs, limits)?;
    let mut out = Output::new(bytes.len(), limits);
    let mut entries = Vec::with_capacity(nlibs as usize);
    for i in 0..nlibs as usize {
        // In bounds: table_end() checked the whole table.
        let at = OLD_HEADER_LEN + i * OLD_ENTRY_LEN;
        let flags = read_u32(bytes, at, "old-format entry")? as i32;
        let key = read_u32(bytes, at + 4, "old-format entry")?;
        let value = read_u32(bytes, at + 8, "old-format entry")?;
        entries.push(out.entry(bytes, table_end, i, flags, key, value)?);
    }
    Ok(entries)
}

/// Parses the new-format block whose header starts at `start`.
fn parse_new(bytes: &[u8], start: usize, limits: Limits) -> Result<Vec<Entry>, FormatError> {
    let header = start
        .checked_add(NEW_HEADER_LEN)
        .and_then(|end| bytes.get(start..end))
        .ok_or(FormatError::Truncated {
            what: "new-format header",
            offset: start,
            needed: NEW_HEADER_LEN,
            size: bytes.len(),
        })?;
    let version = &header[NEW_MAGIC.len()..NEW_MAGIC.len() + NEW_VERSION.len()];
    if version != NEW_VERSION {
        return Err(FormatError::UnsupportedVersion {
            version: String::from_utf8_lossy(version).into_owned(),
        });
    }
    let nlibs = read_u32(header, 20, "new-format header")?;
    // header[24..28] is len_strings: not needed, strings are bounded by the file itself.
    let flags = header[28];
    match flags & ENDIAN_MASK {
        ENDIAN_UNSET | ENDIAN_LITTLE => {}
        _ => return Err(FormatError::UnsupportedByteOrder { flags }),
    }
    let table_start = start + NEW_HEADER_LEN; // cannot overflow: header slice exists
    table_end(bytes, table_start, nlibs, NEW_ENTRY_LEN)?;
    check_count(nlibs, limits)?;
    let mut out = Output::new(bytes.len(), limits);
    let mut entries = Vec::with_capacity(nlibs as usize);
    for i in 0..nlibs as usize {
        let at = table_start + i * NEW_ENTRY_LEN;
        let flags = read_u32(bytes, at, "new-format entry")? as i32;
        let key = read_u32(bytes, at + 4, "new-format entry")?;
        let value = read_u32(bytes, at + 8, "new-format entry")?;
        // osversion (at + 12) is unused by glibc; the hwcap word is at + 16.
        let hwcap = u64::from(read_u32(bytes, at + 16, "new-format entry")?)
            | u64::from(read_u32(bytes, at + 20, "new-format entry")?) << 32;
        let mut e = out.entry(bytes, start, i, flags, key, value)?;
        e.hwcap = hwcap;
        entries.push(e);
    }
    Ok(entries)
}

fn check_count(nlibs: u32, limits: Limits) -> Result<(), FormatError> {
    if nlibs > limits.entries {
        return Err(FormatError::EntryLimit {
            nlibs,
            limit: limits.entries,
        });
    }
    Ok(())
}

/// End offset of a table of `nlibs` entries of `entry_len` bytes at `start`, if it fits.
fn table_end(
    bytes: &[u8],
    start: usize,
    nlibs: u32,
    entry_len: usize,
) -> Result<usize, FormatError> {
    usize::try_from(nlibs)
        .ok()
        .and_then(|n| n.checked_mul(entry_len))
        .and_then(|len| len.checked_add(start))
        .filter(|&end| end <= bytes.len())
        .ok_or(FormatError::TooManyEntries {
            nlibs,
            entry_len,
            offset: start,
            size: bytes.len(),
        })
}

fn read_u32(bytes: &[u8], at: usize, what: &'static str) -> Result<u32, FormatError> {
    at.checked_add(4)
        .and_then(|end| bytes.get(at..end))
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or(FormatError::Truncated {
            what,
            offset: at,
            needed: 4,
            size: bytes.len(),
        })
}

/// Builds entries while keeping the decoded output proportional to the input: many
/// entries may legitimately share one string, but a crafted file could point millions of
/// entries at the same long string.
struct Output {
    used: usize,
    limit: usize,
}

impl Output {
    fn new(file_len: usize, limits: Limits) -> Self {
        Output {
            used: 0,
            limit: file_len
                .saturating_mul(4)
                .saturating_add(1 << 20)
                .min(limits.string_bytes),
        }
    }

    fn entry(
        &mut self,
        bytes: &[u8],
        base: usize,
        entry: usize,
        flags: i32,
        key: u32,
        value: u32,
    ) -> Result<Entry, FormatError> {
        let soname = c_string(bytes, base, key, entry, "soname")?;
        let path = c_string(bytes, base, value, entry, "path")?;
        self.used = self
            .used
            .saturating_add(soname.len())
            .saturating_add(path.len());
        if self.used > self.limit {
            return Err(FormatError::OutputTooLarge { limit: self.limit });
        }
        let soname_at = base + key as usize; // checked in c_string
        let soname = std::str::from_utf8(soname)
            .map_err(|_| FormatError::NonUtf8Soname {
                entry,
                offset: soname_at,
            })?
            .to_owned();
        Ok(Entry {
            flags,
            soname,
            path: PathBuf::from(OsStr::from_bytes(path)),
            hwcap: 0,
        })
    }
}

/// The NUL-terminated string at `base + offset` (without its NUL).
fn c_string<'a>(
    bytes: &'a [u8],
    base: usize,
    offset: u32,
    entry: usize,
    field: &'static str,
) -> Result<&'a [u8], FormatError> {
    let start = usize::try_from(offset)
        .ok()
        .and_then(|o| o.checked_add(base))
        .filter(|&s| s < bytes.len())
        .ok_or(FormatError::StringOutOfRange {
            entry,
            field,
            offset: base as u64 + u64::from(offset),
        })?;
    let rest = &bytes[start..];
    let window = &rest[..rest.len().min(MAX_STRING_LEN + 1)];
    let nul = window
        .iter()
        .position(|&b| b == 0)
        .ok_or(FormatError::UnterminatedString {
            entry,
            field,
            offset: start,
        })?;
    Ok(&rest[..nul])
}

/// glibc's order of library names (`_dl_cache_libcmp`): runs of digits compare as numbers, a
/// digit sorts after any other character, other bytes compare as the platform's `char`.
pub fn libcmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut i, mut j) = (0, 0);
    let digit = |s: &[u8], k: usize| s.get(k).is_some_and(u8::is_ascii_digit);
    let number = |s: &[u8], k: &mut usize| {
        let mut v: i32 = 0;
        while digit(s, *k) {
            v = v.wrapping_mul(10).wrapping_add(i32::from(s[*k] - b'0'));
            *k += 1;
        }
        v
    };
    let char_of = |s: &[u8], k: usize| s.get(k).map_or(0, |&c| c as std::ffi::c_char as i32);
    while i < a.len() {
        if digit(a, i) {
            if !digit(b, j) {
                return Ordering::Greater;
            }
            let (x, y) = (number(a, &mut i), number(b, &mut j));
            if x != y {
                return x.cmp(&y);
            }
        } else if digit(b, j) {
            return Ordering::Less;
        } else if char_of(a, i) != char_of(b, j) {
            return char_of(a, i).cmp(&char_of(b, j));
        } else {
            i += 1;
            j += 1;
        }
    }
    0.cmp(&char_of(b, j))
}

/// Why [`write`] refused a list of entries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("entry {soname}: glibc-hwcaps entries (hwcap {hwcap:#x}) need the extension section, which is not written")]
    Hwcaps { soname: String, hwcap: u64 },
    #[error("entry {soname}: a soname or path that is empty, longer than {MAX_STRING_LEN} bytes or holds a NUL")]
    BadString { soname: String },
    #[error("{0} entries do not fit in a cache file")]
    TooLarge(usize),
}

/// Serialises `entries` as a new-format cache (`glibc-ld.so.cache1.1`, little-endian, no
/// extension section), as `ldconfig -c new` lays it out: the header, the entries sorted the
/// way glibc's loader binary-searches them (by name descending in [`libcmp`] order, then by
/// flags descending; entries that tie keep their order), then the strings, each once, a
/// soname stored as the tail of its path where it is one.
pub fn write(entries: &[Entry]) -> Result<Vec<u8>, WriteError> {
    use std::collections::HashMap;
    for e in entries {
        let bad = |s: &[u8]| s.is_empty() || s.len() > MAX_STRING_LEN || s.contains(&0);
        if e.hwcap != 0 {
            return Err(WriteError::Hwcaps {
                soname: e.soname.clone(),
                hwcap: e.hwcap,
            });
        }
        if bad(e.soname.as_bytes()) || bad(e.path.as_os_str().as_bytes()) {
            return Err(WriteError::BadString {
                soname: e.soname.clone(),
            });
        }
    }
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|x, y| {
        libcmp(y.soname.as_bytes(), x.soname.as_bytes()).then(y.flags.cmp(&x.flags))
    });
    let too_large = || WriteError::TooLarge(entries.len());
    let table_len = sorted
        .len()
        .checked_mul(NEW_ENTRY_LEN)
        .ok_or_else(too_large)?;
    let strings_at = NEW_HEADER_LEN + table_len;
    let mut strings: Vec<u8> = Vec::new();
    let mut offsets: HashMap<&[u8], u32> = HashMap::new();
    let mut table = Vec::with_capacity(table_len);
    for e in &sorted {
        let path = e.path.as_os_str().as_bytes();
        let soname = e.soname.as_bytes();
        let value = match offsets.get(path) {
            Some(&at) => at,
            None => {
                let at = u32::try_from(strings_at + strings.len()).map_err(|_| too_large())?;
                strings.extend_from_slice(path);
                strings.push(0);
                offsets.insert(path, at);
                // The soname as the path's tail (`/lib/libx.so.1` holds `libx.so.1`).
                if path.ends_with(soname) && path[..path.len() - soname.len()].ends_with(b"/") {
                    offsets
                        .entry(soname)
                        .or_insert(at + (path.len() - soname.len()) as u32);
                }
                at
            }
        };
        let key = match offsets.get(soname) {
            Some(&at) => at,
            None => {
                let at = u32::try_from(strings_at + strings.len()).map_err(|_| too_large())?;
                strings.extend_from_slice(soname);
                strings.push(0);
                offsets.insert(soname, at);
                at
            }
        };
        table.extend_from_slice(&e.flags.to_le_bytes());
        table.extend_from_slice(&key.to_le_bytes());
        table.extend_from_slice(&value.to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes()); // osversion
        table.extend_from_slice(&e.hwcap.to_le_bytes());
    }
    let nlibs = u32::try_from(sorted.len()).map_err(|_| too_large())?;
    let len_strings = u32::try_from(strings.len()).map_err(|_| too_large())?;
    let mut out = Vec::with_capacity(strings_at + strings.len());
    out.extend_from_slice(NEW_MAGIC);
    out.extend_from_slice(NEW_VERSION);
    out.extend_from_slice(&nlibs.to_le_bytes());
    out.extend_from_slice(&len_strings.to_le_bytes());
    out.push(ENDIAN_LITTLE);
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&0u32.to_le_bytes()); // extension_offset: none
    out.extend_from_slice(&[0; 12]);
    out.extend_from_slice(&table);
    out.extend_from_slice(&strings);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[cfg(target_arch = "x86_64")]
    const HOST_FLAGS: i32 = FLAG_ELF_LIBC6 | FLAG_X8664_LIB64;
    #[cfg(target_arch = "aarch64")]
    const HOST_FLAGS: i32 = FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64;
    #[cfg(target_arch = "x86_64")]
    const HWCAPS_SUBDIR: &str = "x86-64-v2";
    #[cfg(target_arch = "aarch64")]
    const HWCAPS_SUBDIR: &str = "power10"; // never matched on aarch64; see real_caches

    fn ldconfig() -> PathBuf {
        ["/sbin/ldconfig", "/usr/sbin/ldconfig"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .or_else(|| which::which("ldconfig").ok())
            .expect(
                "ldconfig not found: these tests need glibc's ldconfig (apt-get install libc-bin)",
            )
    }

    fn gcc() -> PathBuf {
        which::which("gcc").expect("gcc not found: these tests need gcc to build shared objects")
    }

    fn run(cmd: &mut Command) -> std::process::Output {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        assert!(
            out.status.success(),
            "{cmd:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Compiles a shared object with `soname` into `dir/file`.
    fn build_lib(dir: &Path, file: &str, soname: &str) {
        std::fs::create_dir_all(dir).unwrap();
        let src = dir.join(format!("{file}.c"));
        std::fs::write(
            &src,
            format!("int f_{}(void) {{ return 1; }}\n", file.len()),
        )
        .unwrap();
        run(Command::new(gcc())
            .arg("-shared")
            .arg("-fPIC")
            .arg(format!("-Wl,-soname,{soname}"))
            .arg("-o")
            .arg(dir.join(file))
            .arg(&src));
        std::fs::remove_file(src).unwrap();
    }

    /// A root with `/lib/libfoo.so.1.2.3` (soname libfoo.so.1), `/lib/libbar.so.2`,
    /// optionally `/lib/libbaz.so.3` and a glibc-hwcaps copy of libfoo.
    fn make_root(extra_lib: bool, hwcaps: bool) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let lib = root.join("lib");
        build_lib(&lib, "libfoo.so.1.2.3", "libfoo.so.1");
        build_lib(&lib, "libbar.so.2", "libbar.so.2");
        if extra_lib {
            build_lib(&lib, "libbaz.so.3", "libbaz.so.3");
        }
        if hwcaps {
            build_lib(
                &lib.join("glibc-hwcaps").join(HWCAPS_SUBDIR),
                "libfoo.so.1.2.3",
                "libfoo.so.1",
            );
        }
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/ld.so.conf"), "/lib\n").unwrap();
        tmp
    }

    /// Runs the real ldconfig on `root` writing `root/etc/ld.so.cache` in `format`.
    fn make_cache(root: &Path, format: &str) -> Vec<u8> {
        run(Command::new(ldconfig()).arg("-r").arg(root).args([
            "-c",
            format,
            "-C",
            "/etc/ld.so.cache",
            "-f",
            "/etc/ld.so.conf",
            "-X",
        ]));
        std::fs::read(root.join("etc/ld.so.cache")).unwrap()
    }

    /// (soname, path) pairs as `ldconfig -p` prints them, in its order.
    fn ldconfig_print(cache: &Path) -> Vec<(String, PathBuf)> {
        let out = run(Command::new(ldconfig()).arg("-p").arg("-C").arg(cache));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix('\t'))
            .map(|l| {
                let (soname, _) = l.split_once(" (").unwrap();
                let (_, path) = l.rsplit_once(" => ").unwrap();
                (soname.to_owned(), PathBuf::from(path))
            })
            .collect()
    }

    fn e(soname: &str, path: &str) -> Entry {
        Entry {
            flags: HOST_FLAGS,
            soname: soname.into(),
            path: path.into(),
            hwcap: 0,
        }
    }

    #[test]
    fn real_caches() {
        let hw_path = format!("/lib/glibc-hwcaps/{HWCAPS_SUBDIR}/libfoo.so.1.2.3");
        let foo = e("libfoo.so.1", "/lib/libfoo.so.1");
        let bar = e("libbar.so.2", "/lib/libbar.so.2");
        let baz = e("libbaz.so.3", "/lib/libbaz.so.3");
        let hw = e("libfoo.so.1", &hw_path);
        let hwcaps_known = cfg!(target_arch = "x86_64");
        // (name, ldconfig -c format, extra lib, hwcaps dir, expected entries)
        let cases: Vec<(&str, &str, bool, bool, Vec<Entry>)> = vec![
            (
                "new, two libs",
                "new",
                false,
                false,
                vec![foo.clone(), bar.clone()],
            ),
            (
                "compat, two libs",
                "compat",
                false,
                false,
                vec![foo.clone(), bar.clone()],
            ),
            (
                "old, two libs",
                "old",
                false,
                false,
                vec![foo.clone(), bar.clone()],
            ),
            (
                "new, three libs",
                "new",
                true,
                false,
                vec![foo.clone(), baz.clone(), bar.clone()],
            ),
            // Odd old-entry count: ldconfig pads the old table (duplicating an entry) so the
            // new header stays 8-aligned; only the new block is read.
            (
                "compat, three libs",
                "compat",
                true,
                false,
                vec![foo.clone(), baz.clone(), bar.clone()],
            ),
            (
                "old, three libs",
                "old",
                true,
                false,
                vec![foo.clone(), baz.clone(), bar.clone()],
            ),
            (
                "new, hwcaps",
                "new",
                false,
                hwcaps_known,
                if hwcaps_known {
                    vec![hw.clone(), foo.clone(), bar.clone()]
                } else {
                    vec![foo.clone(), bar.clone()]
                },
            ),
            (
                "compat, hwcaps",
                "compat",
                true,
                hwcaps_known,
                if hwcaps_known {
                    vec![hw.clone(), foo.clone(), baz.clone(), bar.clone()]
                } else {
                    vec![foo.clone(), baz.clone(), bar.clone()]
                },
            ),
            // The old format has no hwcap field, but ldconfig still lists the hwcaps copy
            // as an ordinary entry there.
            (
                "old, hwcaps",
                "old",
                false,
                hwcaps_known,
                if hwcaps_known {
                    vec![hw.clone(), foo.clone(), bar.clone()]
                } else {
                    vec![foo.clone(), bar.clone()]
                },
            ),
        ];
        for (name, format, extra, hwcaps, want) in cases {
            let root = make_root(extra, hwcaps);
            let bytes = make_cache(root.path(), format);
            let magic: &[u8] = if format == "new" {
                NEW_MAGIC
            } else {
                OLD_MAGIC
            };
            assert!(
                bytes.starts_with(magic),
                "{name}: ldconfig wrote an unexpected format"
            );
            let got = parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            for e in &got {
                let hwcaps_entry = format != "old" && e.path.to_string_lossy().contains("hwcaps");
                assert_eq!(e.hwcap >> 62 & 1 == 1, hwcaps_entry, "{name}: {e:?}");
            }
            let without_hwcap = |v: Vec<Entry>| -> Vec<Entry> {
                v.into_iter().map(|e| Entry { hwcap: 0, ..e }).collect()
            };
            let got = without_hwcap(got);
            assert_eq!(got, want, "{name}");
            let cache = root.path().join("etc/ld.so.cache");
            assert_eq!(without_hwcap(read(&cache).unwrap()), want, "{name}: read()");
            let oracle = ldconfig_print(&cache);
            let ours: Vec<_> = got
                .iter()
                .map(|e| (e.soname.clone(), e.path.clone()))
                .collect();
            assert_eq!(ours, oracle, "{name}: differs from `ldconfig -p`");
            assert!(got.iter().all(|e| e.flags == HOST_FLAGS), "{name}");
        }
    }

    #[test]
    fn libcmp_cases() {
        use std::cmp::Ordering::*;
        let cases = [
            ("equal", "libfoo.so.1", "libfoo.so.1", Equal),
            (
                "numbers, not digits",
                "libfoo.so.10",
                "libfoo.so.9",
                Greater,
            ),
            ("leading zeros", "libfoo.so.01", "libfoo.so.1", Equal),
            ("longer name", "libfoo.so.1.2", "libfoo.so.1", Greater),
            ("prefix", "libfoo", "libfoo.so", Less),
            ("digit after a letter", "lib1", "liba", Greater),
            ("letter before a digit", "liba", "lib1", Less),
            ("bytes", "libA.so", "liba.so", Less),
            ("dash and dot", "lib-x.so", "lib.x.so", Less),
        ];
        for (name, a, b, want) in cases {
            assert_eq!(libcmp(a.as_bytes(), b.as_bytes()), want, "case {name}");
            assert_eq!(
                libcmp(b.as_bytes(), a.as_bytes()),
                want.reverse(),
                "case {name}, reversed"
            );
        }
    }

    /// Our writer sorts a real ldconfig's entries back into ldconfig's own order, and the real
    /// ldconfig (and our reader) read what it writes.
    #[test]
    fn written_caches_match_ldconfig() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let libs = [
            ("libfoo.so.1.2.3", "libfoo.so.1"),
            ("libfoo.so.10.0", "libfoo.so.10"),
            ("libfoo.so.9", "libfoo.so.9"),
            ("libfoo2.so.1", "libfoo2.so.1"),
            ("libfoo-bar.so.1", "libfoo-bar.so.1"),
            ("libFoo.so.1", "libFoo.so.1"),
            ("liba.so.0", "liba.so.0"),
            ("libz.so.1.2.13", "libz.so.1"),
            ("libnvidia-ml.so.550.54.15", "libnvidia-ml.so.1"),
            ("libcuda.so.550.54.15", "libcuda.so.1"),
        ];
        for (file, soname) in libs {
            build_lib(&root.join("lib"), file, soname);
        }
        build_lib(&root.join("usr/lib"), "libfoo.so.1.0", "libfoo.so.1");
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/ld.so.conf"), "/lib\n/usr/lib\n").unwrap();
        let real = parse(&make_cache(root, "new")).unwrap();
        assert_eq!(real.len(), libs.len() + 1, "{real:?}");
        // Another order (by path), which keeps the two libfoo.so.1 (a tie) as ldconfig has them.
        let mut shuffled = real.clone();
        shuffled.sort_by(|a, b| a.path.cmp(&b.path));
        assert_ne!(shuffled, real);
        let bytes = write(&shuffled).unwrap();
        assert_eq!(parse(&bytes).unwrap(), real, "our order is ldconfig's");
        let ours = root.join("etc/ours.cache");
        std::fs::write(&ours, &bytes).unwrap();
        let printed = ldconfig_print(&ours);
        let want: Vec<_> = real
            .iter()
            .map(|e| (e.soname.clone(), e.path.clone()))
            .collect();
        assert_eq!(printed, want, "`ldconfig -p` reads our cache");
        // Strings are shared: every soname here is the tail of its path.
        let strings: usize = real.iter().map(|e| e.path.as_os_str().len() + 1).sum();
        assert_eq!(
            bytes.len(),
            NEW_HEADER_LEN + real.len() * NEW_ENTRY_LEN + strings
        );
    }

    #[test]
    fn write_cases() {
        let entry = |flags, soname: &str, path: &str| Entry {
            flags,
            soname: soname.into(),
            path: path.into(),
            hwcap: 0,
        };
        let x86 = entry(0x0303, "libx.so.1", "/usr/lib/x86_64-linux-gnu/libx.so.1");
        let i386 = entry(0x0003, "libx.so.1", "/usr/lib/i386-linux-gnu/libx.so.1");
        let other_name = entry(0x0303, "libx.so.1", "/opt/libx.so.1.2");
        let cases: Vec<(&str, Vec<Entry>, Result<Vec<Entry>, WriteError>)> = vec![
            ("empty", vec![], Ok(vec![])),
            (
                "same name: flags descending",
                vec![i386.clone(), x86.clone()],
                Ok(vec![x86.clone(), i386.clone()]),
            ),
            (
                "ties keep their order",
                vec![other_name.clone(), x86.clone()],
                Ok(vec![other_name.clone(), x86.clone()]),
            ),
            (
                "hwcaps entry",
                vec![Entry {
                    hwcap: 1 << 62,
                    ..x86.clone()
                }],
                Err(WriteError::Hwcaps {
                    soname: "libx.so.1".into(),
                    hwcap: 1 << 62,
                }),
            ),
            (
                "NUL in a path",
                vec![entry(0x0303, "libx.so.1", "/lib/a\0b")],
                Err(WriteError::BadString {
                    soname: "libx.so.1".into(),
                }),
            ),
            (
                "empty soname",
                vec![entry(0x0303, "", "/lib/a")],
                Err(WriteError::BadString { soname: "".into() }),
            ),
        ];
        for (name, input, want) in cases {
            let got = write(&input).map(|b| parse(&b).unwrap());
            assert_eq!(got, want, "case {name}");
        }
    }

    /// Every prefix and many single-byte corruptions of a real compat cache: no panics.
    #[test]
    fn real_cache_mutations_do_not_panic() {
        let root = make_root(true, cfg!(target_arch = "x86_64"));
        for format in ["compat", "old"] {
            let bytes = make_cache(root.path(), format);
            assert!(parse(&bytes).is_ok());
            for len in 0..bytes.len() {
                let _ = parse(&bytes[..len]);
            }
            let mut m = bytes.clone();
            for i in 0..m.len() {
                for v in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                    let old = m[i];
                    m[i] = v;
                    let _ = parse(&m);
                    m[i] = old;
                }
            }
        }
    }

    fn new_header(nlibs: u32, flags: u8) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(NEW_MAGIC);
        b.extend_from_slice(NEW_VERSION);
        b.extend_from_slice(&nlibs.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // len_strings
        b.extend_from_slice(&[flags, 0, 0, 0]);
        b.extend_from_slice(&[0; 16]); // extension_offset + 3 unused
        assert_eq!(b.len(), NEW_HEADER_LEN);
        b
    }

    /// A new-format cache with entries `(flags, key, value)`; offsets are from the header.
    fn new_cache(entries: &[(i32, u32, u32)], strings: &[u8]) -> Vec<u8> {
        let mut b = new_header(entries.len() as u32, ENDIAN_LITTLE);
        for &(flags, key, value) in entries {
            b.extend_from_slice(&flags.to_le_bytes());
            b.extend_from_slice(&key.to_le_bytes());
            b.extend_from_slice(&value.to_le_bytes());
            b.extend_from_slice(&[0; 12]); // osversion, hwcap
        }
        b.extend_from_slice(strings);
        b
    }

    /// Offset of `strings` in a [`new_cache`] with `n` entries.
    fn str_base(n: u32) -> u32 {
        (NEW_HEADER_LEN + n as usize * NEW_ENTRY_LEN) as u32
    }

    fn old_cache(entries: &[(i32, u32, u32)], strings: &[u8]) -> Vec<u8> {
        let mut b = OLD_MAGIC.to_vec();
        b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for &(flags, key, value) in entries {
            b.extend_from_slice(&flags.to_le_bytes());
            b.extend_from_slice(&key.to_le_bytes());
            b.extend_from_slice(&value.to_le_bytes());
        }
        b.extend_from_slice(strings);
        b
    }

    #[test]
    fn crafted_ok() {
        let b1 = str_base(1);
        let strings = b"/lib/libx.so.1\0";
        let x = Entry {
            flags: 0x0303,
            soname: "libx.so.1".into(),
            path: "/lib/libx.so.1".into(),
            hwcap: 0,
        };
        // compat with ONE old entry: 16 + 12 = 28, so the new header sits at 32 (aligned),
        // and the old block's offsets are relative to its end (28).
        let mut compat = old_cache(&[(0x0303, 9, 4)], &[0; 4]);
        let new_at = compat.len() as u32;
        assert_eq!(new_at, 32);
        compat.extend(new_cache(&[(0x0303, b1 + 5, b1)], strings));
        // Same, but the new block is not at the aligned offset: glibc falls back to old.
        let mut misaligned = old_cache(&[(0x0303, 5, 0)], strings);
        misaligned.extend(new_cache(&[(0x0a03, b1 + 5, b1)], strings));
        let mut non_utf8_path = b"/lib/\xffx.so\0".to_vec();
        non_utf8_path.extend_from_slice(b"libx.so.1\0");
        let cases: Vec<(&str, Vec<u8>, Vec<Entry>)> = vec![
            ("new, no entries", new_cache(&[], b""), vec![]),
            (
                "new, shared suffix",
                new_cache(&[(0x0303, b1 + 5, b1)], strings),
                vec![x.clone()],
            ),
            (
                "endian unset (glibc < 2.33)",
                {
                    let mut b = new_cache(&[(0x0303, b1 + 5, b1)], strings);
                    b[28] = ENDIAN_UNSET;
                    b
                },
                vec![x.clone()],
            ),
            (
                "old only",
                old_cache(&[(0x0303, 5, 0)], strings),
                vec![x.clone()],
            ),
            ("old, no entries", old_cache(&[], b""), vec![]),
            ("compat, aligned new block", compat, vec![x.clone()]),
            (
                "compat, misaligned new block is ignored",
                misaligned,
                vec![x.clone()],
            ),
            (
                "non-UTF-8 path kept byte-exact",
                new_cache(&[(0x0303, b1 + 11, b1)], &non_utf8_path),
                vec![Entry {
                    flags: 0x0303,
                    soname: "libx.so.1".into(),
                    path: PathBuf::from(OsStr::from_bytes(b"/lib/\xffx.so")),
                    hwcap: 0,
                }],
            ),
        ];
        for (name, bytes, want) in cases {
            assert_eq!(
                parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}")),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn crafted_errors() {
        let b1 = str_base(1);
        let strings = b"/lib/libx.so.1\0";
        let long = {
            let mut s = vec![b'a'; MAX_STRING_LEN + 10];
            s.push(0);
            s
        };
        let mut amplify = Vec::new();
        let n = 20_000u32;
        let long_at = str_base(n);
        for _ in 0..n {
            amplify.push((0x0303, long_at, long_at));
        }
        let mut just_long = vec![b'a'; MAX_STRING_LEN];
        just_long.push(0);
        let cases: Vec<(&str, Vec<u8>, FormatError)> = vec![
            ("empty", vec![], FormatError::Empty),
            (
                "wrong magic",
                b"this is not an ld.so.cache at all".to_vec(),
                FormatError::BadMagic,
            ),
            ("one foreign byte", b"x".to_vec(), FormatError::BadMagic),
            (
                "truncated magic",
                b"glibc-ld".to_vec(),
                FormatError::Truncated {
                    what: "magic",
                    offset: 0,
                    needed: 12,
                    size: 8,
                },
            ),
            (
                "truncated new header",
                new_header(0, ENDIAN_LITTLE)[..30].to_vec(),
                FormatError::Truncated {
                    what: "new-format header",
                    offset: 0,
                    needed: 48,
                    size: 30,
                },
            ),
            (
                "truncated old header",
                b"ld.so-1.7.0\0\x01\x00".to_vec(),
                FormatError::Truncated {
                    what: "old-format header",
                    offset: 12,
                    needed: 4,
                    size: 14,
                },
            ),
            (
                "unsupported version",
                {
                    let mut b = new_header(0, ENDIAN_LITTLE);
                    b[17..20].copy_from_slice(b"2.0");
                    b
                },
                FormatError::UnsupportedVersion {
                    version: "2.0".into(),
                },
            ),
            (
                "big-endian cache",
                new_header(0, 3),
                FormatError::UnsupportedByteOrder { flags: 3 },
            ),
            (
                "new nlibs huge",
                new_header(u32::MAX, ENDIAN_LITTLE),
                FormatError::TooManyEntries {
                    nlibs: u32::MAX,
                    entry_len: 24,
                    offset: 48,
                    size: 48,
                },
            ),
            (
                "new table one byte short",
                {
                    let mut b = new_cache(&[(0x0303, 0, 0)], b"");
                    b.pop();
                    b
                },
                FormatError::TooManyEntries {
                    nlibs: 1,
                    entry_len: 24,
                    offset: 48,
                    size: 71,
                },
            ),
            (
                "old nlibs huge",
                {
                    let mut b = OLD_MAGIC.to_vec();
                    b.extend_from_slice(&u32::MAX.to_le_bytes());
                    b
                },
                FormatError::TooManyEntries {
                    nlibs: u32::MAX,
                    entry_len: 12,
                    offset: 16,
                    size: 16,
                },
            ),
            (
                "compat old nlibs huge",
                {
                    let mut b = old_cache(&[], b"");
                    b[12..16].copy_from_slice(&0x4000_0000u32.to_le_bytes());
                    b.extend(new_cache(&[], b""));
                    b
                },
                FormatError::TooManyEntries {
                    nlibs: 0x4000_0000,
                    entry_len: 12,
                    offset: 16,
                    size: 64,
                },
            ),
            (
                "key offset past end",
                new_cache(&[(0x0303, b1 + 1000, b1)], strings),
                FormatError::StringOutOfRange {
                    entry: 0,
                    field: "soname",
                    offset: u64::from(b1) + 1000,
                },
            ),
            (
                "value offset exactly at end",
                new_cache(&[(0x0303, b1 + 5, b1 + 15)], strings),
                FormatError::StringOutOfRange {
                    entry: 0,
                    field: "path",
                    offset: u64::from(b1) + 15,
                },
            ),
            (
                "offset u32::MAX",
                new_cache(&[(0x0303, u32::MAX, b1)], strings),
                FormatError::StringOutOfRange {
                    entry: 0,
                    field: "soname",
                    offset: u64::from(u32::MAX),
                },
            ),
            (
                "old-format offset past end",
                old_cache(&[(0x0303, 5, 100)], strings),
                FormatError::StringOutOfRange {
                    entry: 0,
                    field: "path",
                    offset: 28 + 100,
                },
            ),
            (
                "missing NUL",
                new_cache(&[(0x0303, b1 + 5, b1)], b"/lib/libx.so.1"),
                FormatError::UnterminatedString {
                    entry: 0,
                    field: "soname",
                    offset: b1 as usize + 5,
                },
            ),
            (
                "string longer than MAX_STRING_LEN",
                new_cache(&[(0x0303, b1, b1)], &long),
                FormatError::UnterminatedString {
                    entry: 0,
                    field: "soname",
                    offset: b1 as usize,
                },
            ),
            (
                "non-UTF-8 soname",
                new_cache(&[(0x0303, b1, b1)], b"lib\xc3x.so\0"),
                FormatError::NonUtf8Soname {
                    entry: 0,
                    offset: b1 as usize,
                },
            ),
            (
                "second entry bad",
                new_cache(
                    &[
                        (0x0303, str_base(2) + 5, str_base(2)),
                        (0x0303, 0xffff, str_base(2)),
                    ],
                    strings,
                ),
                FormatError::StringOutOfRange {
                    entry: 1,
                    field: "soname",
                    offset: 0xffff,
                },
            ),
            (
                "many entries sharing one long string",
                new_cache(&amplify, &just_long),
                FormatError::OutputTooLarge {
                    limit: (str_base(n) as usize + just_long.len()) * 4 + (1 << 20),
                },
            ),
        ];
        for (name, bytes, want) in cases {
            match parse(&bytes) {
                Err(LdCacheError::Format(got)) => assert_eq!(got, want, "{name}"),
                other => panic!("{name}: expected {want:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn parse_within_bounds_entries_and_strings() {
        // Many entries sharing one short string: small files, many decoded strings.
        let limits = Limits {
            entries: 100,
            string_bytes: 1000,
        };
        let strings = b"/lib/libx.so.1\0";
        let new = |n: u32| {
            let e = vec![(0x0303, str_base(n) + 5, str_base(n)); n as usize];
            new_cache(&e, strings)
        };
        let old = |n: u32| {
            // Old-format offsets are from the end of the entry table.
            let e = vec![(0x0303, 5, 0); n as usize];
            old_cache(&e, strings)
        };
        let cases: Vec<(&str, Vec<u8>, Result<usize, FormatError>)> = vec![
            ("new format within both bounds", new(30), Ok(30)),
            ("old format within both bounds", old(30), Ok(30)),
            (
                "new format over the entry bound",
                new(101),
                Err(FormatError::EntryLimit {
                    nlibs: 101,
                    limit: 100,
                }),
            ),
            (
                "old format over the entry bound",
                old(101),
                Err(FormatError::EntryLimit {
                    nlibs: 101,
                    limit: 100,
                }),
            ),
            (
                "new format over the string bound",
                new(60),
                Err(FormatError::OutputTooLarge { limit: 1000 }),
            ),
            (
                "old format over the string bound",
                old(60),
                Err(FormatError::OutputTooLarge { limit: 1000 }),
            ),
        ];
        for (name, bytes, want) in cases {
            let got = parse_within(&bytes, limits).map(|e| e.len());
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{name}"),
                (Err(LdCacheError::Format(got)), Err(want)) => assert_eq!(got, want, "{name}"),
                (got, want) => panic!("{name}: expected {want:?}, got {got:?}"),
            }
            // The unbounded parser takes them all.
            assert!(parse(&bytes).is_ok(), "{name}");
        }
    }

    #[test]
    fn read_errors_name_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("missing");
        let bad = tmp.path().join("bad");
        std::fs::write(&bad, b"not a cache").unwrap();
        let huge = tmp.path().join("huge");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(MAX_CACHE_SIZE + 1)
            .unwrap();
        let cases: Vec<(&str, &Path)> = vec![
            ("missing", &missing),
            ("malformed", &bad),
            ("too large", &huge),
        ];
        for (name, path) in cases {
            let err = read(path).unwrap_err();
            match (name, &err) {
                ("missing", LdCacheError::Read { path: p, error }) => {
                    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
                    assert_eq!(p, path);
                }
                ("malformed", LdCacheError::Malformed { path: p, error }) => {
                    assert_eq!(error, &FormatError::BadMagic);
                    assert_eq!(err.format_error(), Some(&FormatError::BadMagic));
                    assert_eq!(p, path);
                }
                ("too large", LdCacheError::TooLarge { path: p, limit }) => {
                    assert_eq!(*limit, MAX_CACHE_SIZE);
                    assert_eq!(p, path);
                }
                _ => panic!("{name}: unexpected {err:?}"),
            }
            assert!(
                err.to_string().contains(&path.display().to_string()),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn arch_flags() {
        let cases = [
            ("x86-64 libc6", 0x0303, true, false),
            ("aarch64 libc6", 0x0a03, false, true),
            ("i386 libc6", 0x0003, false, false),
            ("x32", 0x0803, false, false),
            ("x86-64 libc5", 0x0302, false, false),
            ("negative", -1, false, false),
        ];
        for (name, flags, x86, arm) in cases {
            assert_eq!(is_x86_64(flags), x86, "{name}");
            assert_eq!(is_aarch64(flags), arm, "{name}");
        }
    }

    /// The cache entry flags each architecture's libraries carry (its own, and the compat32
    /// ABI's: i386 `libc6` has no arch bits and is x86-64's; AArch64 has none).
    #[test]
    fn arch_flag_cases() {
        let cases = [
            ("x86-64", nvct_model::Arch::X86_64, 0x0303, 0x0a03),
            ("aarch64", nvct_model::Arch::Aarch64, 0x0a03, 0x0303),
        ];
        for (name, arch, own, other) in cases {
            assert!(matches_arch(arch, own), "{name}");
            assert!(!matches_arch(arch, other), "{name}");
            assert_eq!(
                matches_arch32(arch, 0x0003),
                arch == nvct_model::Arch::X86_64,
                "{name}"
            );
            assert!(!matches_arch32(arch, own), "{name}");
        }
    }
}
