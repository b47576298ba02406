//! The kernel cache trusts nothing it did not write: corrupt, truncated, foreign, symlinked and
//! misplaced entries are refused (and removed), untrusted directories are refused, and concurrent
//! writers (threads and processes) leave only complete entries. No GPU or NVRTC needed.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use flce_cuda::cache::{decode, encode, CacheError, KernelCache};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flce-cache-test-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

fn entry_path(cache: &KernelCache) -> PathBuf {
    fs::read_dir(cache.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cubin"))
        .unwrap()
}

const KEY: &str = "0123abcd";

#[test]
fn a_stored_entry_loads_back_and_the_directory_is_private() {
    let dir = scratch("roundtrip");
    let cache = KernelCache::open(&dir).unwrap();
    assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(cache.load("k", KEY), None, "nothing stored yet");
    cache.store("k", KEY, b"cubin bytes").unwrap();
    assert_eq!(cache.load("k", KEY).as_deref(), Some(&b"cubin bytes"[..]));
    assert_eq!(cache.load("k", "another key"), None);
    let mode = fs::metadata(entry_path(&cache)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_truncated_and_misplaced_entries_are_removed() {
    let dir = scratch("bad");
    let cache = KernelCache::open(&dir).unwrap();
    let good = encode(KEY, b"payload of some length");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() - 3].to_vec()),
        ("flipped payload bit", {
            let mut b = good.clone();
            *b.last_mut().unwrap() ^= 1;
            b
        }),
        ("trailing bytes", [good.clone(), vec![0]].concat()),
        ("bad magic", [b"XXXXXXXX".to_vec(), good[8..].to_vec()].concat()),
        ("another key's entry", encode("other", b"payload of some length")),
        ("empty", vec![]),
        ("header only", good[..20].to_vec()),
    ];
    for (what, bytes) in cases {
        cache.store("k", KEY, b"x").unwrap();
        let path = entry_path(&cache);
        fs::write(&path, &bytes).unwrap();
        assert_eq!(cache.load("k", KEY), None, "{what}: must not load");
        assert!(!path.exists(), "{what}: the bad entry must be removed");
        assert!(decode(&bytes, KEY).is_err(), "{what}");
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_symlinked_entry_is_refused_and_only_the_link_removed() {
    let dir = scratch("symlink");
    let cache = KernelCache::open(&dir).unwrap();
    cache.store("k", KEY, b"mine").unwrap();
    let path = entry_path(&cache);
    let target = dir.with_extension("planted");
    fs::write(&target, encode(KEY, b"planted cubin")).unwrap();
    fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert_eq!(cache.load("k", KEY), None);
    assert!(fs::symlink_metadata(&path).is_err(), "the link is removed");
    assert!(target.exists(), "what it pointed to is left alone");
    fs::remove_file(&target).unwrap();
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn untrusted_directories_are_refused() {
    let dir = scratch("open");
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    let err = KernelCache::open(&dir).unwrap_err();
    assert!(
        matches!(err, CacheError::Untrusted { .. }) && err.to_string().contains("writable by group or others"),
        "{err}"
    );
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    assert!(KernelCache::open(&dir).is_ok());
    // a symlink to a private directory is refused too (its target could change under us)
    let link = dir.with_extension("link");
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert!(matches!(KernelCache::open(&link), Err(CacheError::Untrusted { .. })));
    fs::remove_file(&link).unwrap();
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_of_another_user_is_refused() {
    // Only root can hand a directory to another user; elsewhere this check is covered by the
    // same code path as the mode check above.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot chown; the owner check is exercised only as root");
        return;
    }
    let dir = scratch("foreign");
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    let c = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
    let err = KernelCache::open(&dir).unwrap_err();
    assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    // an entry owned by another user inside our own directory is refused as well
    let mine = scratch("foreign-entry");
    let cache = KernelCache::open(&mine).unwrap();
    cache.store("k", KEY, b"x").unwrap();
    let path = entry_path(&cache);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
    assert_eq!(cache.load("k", KEY), None);
    fs::remove_dir_all(&dir).unwrap();
    fs::remove_dir_all(&mine).unwrap();
}

/// Many writers of the same entry at once: every load sees a complete entry.
fn hammer(dir: &std::path::Path, rounds: usize) {
    let cache = KernelCache::open(dir).unwrap();
    let payload: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
    for _ in 0..rounds {
        cache.store("k", KEY, &payload).unwrap();
        assert_eq!(cache.load("k", KEY).as_deref(), Some(&payload[..]));
    }
}

#[test]
fn two_threads_and_two_processes_writing_at_once() {
    if let Some(dir) = std::env::var_os("FLCE_CACHE_TEST_CHILD") {
        hammer(std::path::Path::new(&dir), 200);
        return;
    }
    let dir = scratch("concurrent");
    KernelCache::open(&dir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(&exe)
                .args(["two_threads_and_two_processes_writing_at_once", "--exact", "--nocapture"])
                .env("FLCE_CACHE_TEST_CHILD", &dir)
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| hammer(&dir, 200));
        }
    });
    for mut c in children {
        assert!(c.wait().unwrap().success(), "a child process saw a bad entry");
    }
    let leftovers: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "one entry, no temporary files: {leftovers:?}");
    fs::remove_dir_all(&dir).unwrap();
}
