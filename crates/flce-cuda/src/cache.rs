//! A trusted on-disk cache of compiled kernels: the second process starts without compiling, and
//! nothing another user can write is ever loaded into the GPU context.
//!
//! - Directory: `$FLCE_CACHE_DIR`, else `$XDG_CACHE_HOME/flce/kernels`, else
//!   `~/.cache/flce/kernels`; created 0700. A directory owned by another user, or writable by
//!   group or others, is refused with a clear error (the caller then compiles in memory).
//! - Entry: `FLCEKC01` | key length (u32 LE) | key | payload length (u64 LE) | SHA-256(payload) |
//!   payload. Loading checks the magic, that the key is the one asked for, the exact length and the
//!   hash, before anything is handed on; opening refuses symlinks (O_NOFOLLOW) and files not owned
//!   by this user. A bad entry is removed (with a warning) and the kernel recompiled.
//! - Writing: a unique temporary file in the directory (O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600),
//!   written, fsynced, renamed into place: concurrent writers (threads, processes) each rename a
//!   complete entry, and readers never see a partial one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"FLCEKC01";

/// A cache directory that passed the ownership and permission checks.
#[derive(Debug)]
pub struct KernelCache {
    dir: PathBuf,
}

/// Why a cache directory is not used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("kernel cache {dir}: {reason}; set FLCE_CACHE_DIR to a private directory (compiling in memory meanwhile)")]
    Untrusted { dir: PathBuf, reason: String },
    #[error("kernel cache {dir}: {source}")]
    Io { dir: PathBuf, source: io::Error },
}

/// The default cache directory (see the module doc), if the environment names one.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(d) = crate::tuning::cache_dir_override() {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("flce").join("kernels"))
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

impl KernelCache {
    /// Open (creating it 0700 if missing) the cache at `dir`, refusing a directory that another
    /// user owns or that group or others can write.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CacheError> {
        let dir = dir.into();
        let io_err = |source| CacheError::Io { dir: dir.clone(), source };
        if fs::symlink_metadata(&dir).is_err() {
            fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(io_err)?;
        }
        let meta = fs::symlink_metadata(&dir).map_err(io_err)?;
        let untrusted = |reason: String| CacheError::Untrusted { dir: dir.clone(), reason };
        if !meta.is_dir() {
            return Err(untrusted("not a directory (or a symlink)".into()));
        }
        if meta.uid() != euid() {
            return Err(untrusted(format!("owned by uid {}, not by this user (uid {})", meta.uid(), euid())));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(untrusted(format!("writable by group or others (mode {:o})", meta.mode() & 0o777)));
        }
        Ok(KernelCache { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry file of `name` (a readable prefix) and `key` (the full cache key).
    fn path(&self, name: &str, key: &str) -> PathBuf {
        let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' }).collect();
        self.dir.join(format!("{name}-{key}.cubin"))
    }

    /// The payload stored under `key`, if a valid entry exists. An invalid one (corrupt,
    /// truncated, another key, a symlink, another owner) is removed, with a warning.
    pub fn load(&self, name: &str, key: &str) -> Option<Vec<u8>> {
        let path = self.path(name, key);
        match read_entry(&path, key) {
            Ok(Some(payload)) => Some(payload),
            Ok(None) => None,
            Err(why) => {
                eprintln!("flce: removing bad kernel cache entry {}: {why}; recompiling", path.display());
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Store `payload` under `key`: a complete entry appears atomically, or none.
    pub fn store(&self, name: &str, key: &str, payload: &[u8]) -> io::Result<()> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}-{}-{}",
            std::process::id(),
            thread_id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
        ));
        let result = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            f.write_all(&encode(key, payload))?;
            f.sync_all()?;
            fs::rename(&tmp, self.path(name, key))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
}

fn thread_id() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::thread::current().id().hash(&mut h);
    h.finish()
}

/// An entry's bytes.
pub fn encode(key: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 4 + key.len() + 8 + 32 + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(payload));
    out.extend_from_slice(payload);
    out
}

/// The payload of an entry's bytes, checked against `key`.
pub fn decode<'a>(bytes: &'a [u8], key: &str) -> Result<&'a [u8], String> {
    let take = |at: usize, n: usize| bytes.get(at..at + n).ok_or_else(|| format!("truncated at byte {at}"));
    if take(0, 8)? != MAGIC {
        return Err("not a flce kernel cache entry (bad magic)".into());
    }
    let key_len = u32::from_le_bytes(take(8, 4)?.try_into().expect("4 bytes")) as usize;
    if take(12, key_len)? != key.as_bytes() {
        return Err("stored under another key".into());
    }
    let at = 12 + key_len;
    let len = u64::from_le_bytes(take(at, 8)?.try_into().expect("8 bytes"));
    let hash = take(at + 8, 32)?;
    let payload = &bytes[(at + 40).min(bytes.len())..];
    if payload.len() as u64 != len {
        return Err(format!("payload of {} bytes, header says {len}", payload.len()));
    }
    if Sha256::digest(payload).as_slice() != hash {
        return Err("payload does not match its SHA-256".into());
    }
    Ok(payload)
}

/// Ok(None): no entry. Err: an entry that must not be used.
fn read_entry(path: &Path, key: &str) -> Result<Option<Vec<u8>>, String> {
    let mut f = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("a symlink".into()),
        Err(e) => return Err(e.to_string()),
    };
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() || meta.uid() != euid() {
        return Err(format!("not a regular file of this user (uid {})", meta.uid()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    File::read_to_end(&mut f, &mut bytes).map_err(|e| e.to_string())?;
    decode(&bytes, key).map(|p| Some(p.to_vec()))
}
