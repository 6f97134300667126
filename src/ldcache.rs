//! (temporary stub; replaced by the real parser from branch ldcache)
use std::path::{Path, PathBuf};
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Entry { pub flags: i32, pub soname: String, pub path: PathBuf }
#[derive(Debug, thiserror::Error)]
#[error("ldcache stub")]
pub struct LdCacheError;
pub fn read(_path: &Path) -> Result<Vec<Entry>, LdCacheError> { Err(LdCacheError) }
pub fn is_x86_64(flags: i32) -> bool { flags == 0x0303 }
