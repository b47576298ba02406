//! The CPU path's threads, safe across `fork`. A forked child (a PyTorch DataLoader worker, say)
//! inherits rayon's global pool without its threads: work sent there never runs. So the CPU entry
//! points run through [`in_pool`]: inside a pool the caller chose (`ThreadPool::install`), there;
//! otherwise in flce's own pool, built by — and only used in — the process that built it, and
//! built anew in a forked child.

use std::sync::{Arc, Mutex};

static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

/// Run `f` with rayon parallelism that works in this process.
pub(crate) fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return f(); // already on a worker of a live pool (the caller's)
    }
    let pid = std::process::id();
    let pool = {
        let mut slot = POOL.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some((owner, pool)) if *owner == pid => pool.clone(),
            _ => {
                // In a forked child the slot holds the parent's pool, whose threads do not exist
                // here. Dropping it would wake them through their sleep mutexes, and one of them
                // may have held its mutex at the fork (rayon's workers take it on their way to
                // sleep, just after a call): the child would block forever. Leak it instead.
                if let Some(parents) = slot.take() {
                    std::mem::forget(parents);
                }
                let pool = match rayon::ThreadPoolBuilder::new().thread_name(|i| format!("flce-cpu-{i}")).build() {
                    Ok(p) => Arc::new(p),
                    // no threads to be had: run on the calling thread alone
                    Err(_) => return f(),
                };
                *slot = Some((pid, pool.clone()));
                pool
            }
        }
    };
    pool.install(f)
}
