//! A second stream for the backward's two products of a chunk, so that they run side by side.
//!
//! Per vocabulary chunk the backward (backward.rs) launches G, then dE += G·C_chunk and dC_chunk = Gᵀ·E. On one
//! stream each product ends with a partial wave (cuBLAS's dE at Llama 3: 946 tiles of 192 × 192
//! on 132 SMs, 7.17 waves run as 8) and the other waits for it. With dC on a second stream the
//! SMs that one product's last wave leaves idle take the other's tiles.
//!
//! The order stays the stream's: after G the caller's stream records `fork`, the side stream
//! waits on it and runs dC; the caller's stream runs dE, then waits on `join`, recorded by the
//! side stream after dC, before anything that follows (the next G overwrites the G both read).
//! The three-product pass (step.rs) does the same per token chunk, its dC joined just before the
//! next chunk's G, so it also runs beside the next chunk's logits and statistics.
//! No host synchronisation; legal under CUDA-graph capture (the side stream joins the capture
//! through `fork` and leaves it through `join`). Each stream has its own cuBLAS handle (and so its
//! own workspace): the products are the same algorithms, bitwise, as on one stream.
//!
//! `FLCE_BWD_STREAMS` (read once, the backend's default; `CudaLoss::with_side_stream` sets it per
//! backend): `2` (default) runs the products side by side, `1` on the caller's stream alone.

use std::sync::{Mutex, MutexGuard};

use cudarc::driver::result as drv;
use cudarc::driver::sys as cu;
use flce_core::Result;

use crate::blas::{Blas, BoundBlas};
use crate::device::Stream;
use crate::error::Check;

/// Whether the backward runs its two products on two streams (`FLCE_BWD_STREAMS`, read once).
pub(crate) fn side_by_side() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("FLCE_BWD_STREAMS").as_deref().map(str::trim) {
        Err(_) | Ok("") | Ok("2") => true,
        Ok("1") => false,
        Ok(v) => {
            eprintln!("flce: ignoring FLCE_BWD_STREAMS={v:?}: neither 1 nor 2");
            true
        }
    })
}

/// The side stream and its two events (created on first use, in the device's context).
struct Raw {
    stream: cu::CUstream,
    fork: cu::CUevent,
    join: cu::CUevent,
}
// SAFETY: the handles are only used under Side's mutex.
unsafe impl Send for Raw {}

impl Raw {
    fn create() -> Result<Raw> {
        let flags = cu::CUevent_flags::CU_EVENT_DISABLE_TIMING;
        let stream = drv::stream::create(drv::stream::StreamKind::NonBlocking).check("cuStreamCreate(side stream)")?;
        let mut raw = Raw { stream, fork: std::ptr::null_mut(), join: std::ptr::null_mut() };
        // on an error, dropping `raw` destroys what was created
        raw.fork = drv::event::create(flags).check("cuEventCreate(fork)")?;
        raw.join = drv::event::create(flags).check("cuEventCreate(join)")?;
        Ok(raw)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: created by Raw::create and no longer used (null: never created).
        unsafe {
            for event in [self.fork, self.join] {
                if !event.is_null() {
                    let _ = drv::event::destroy(event);
                }
            }
            let _ = drv::stream::destroy(self.stream);
        }
    }
}

/// The device's side stream and the cuBLAS handle that runs on it.
#[derive(Default)]
pub(crate) struct Side {
    raw: Mutex<Option<Raw>>,
    blas: Blas,
}

/// The side stream, locked for one backward call, beside the caller's stream `main`.
pub(crate) struct BoundSide<'a> {
    raw: MutexGuard<'a, Option<Raw>>,
    blas: BoundBlas<'a>,
    main: Stream,
}

impl Side {
    /// The side stream (created on first use; the device's context must be current) for work
    /// forked from and joined back into `main`.
    pub(crate) fn bind(&self, main: Stream) -> Result<BoundSide<'_>> {
        let mut raw = self.raw.lock().unwrap_or_else(|e| e.into_inner());
        if raw.is_none() {
            *raw = Some(Raw::create()?);
        }
        let stream = raw.as_ref().expect("just created").stream;
        let blas = self.blas.bind_gemm_ex(stream)?;
        Ok(BoundSide { raw, blas, main })
    }
}

impl BoundSide<'_> {
    fn raw(&self) -> &Raw {
        self.raw.as_ref().expect("created by Side::bind")
    }

    /// The side stream starts after the work issued so far on the caller's stream.
    pub(crate) fn fork(&self) -> Result<()> {
        let r = self.raw();
        // SAFETY: live event and streams of the current context.
        unsafe {
            drv::event::record(r.fork, self.main).check("cuEventRecord(fork)")?;
            drv::stream::wait_event(r.stream, r.fork, cu::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
                .check("cuStreamWaitEvent(side on fork)")?;
        }
        Ok(())
    }

    /// cuBLAS on the side stream.
    pub(crate) fn blas(&self) -> &BoundBlas<'_> {
        &self.blas
    }

    /// The caller's stream continues only after the work issued so far on the side stream.
    pub(crate) fn join(&self) -> Result<()> {
        let r = self.raw();
        // SAFETY: live event and streams of the current context.
        unsafe {
            drv::event::record(r.join, r.stream).check("cuEventRecord(join)")?;
            drv::stream::wait_event(self.main, r.join, cu::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
                .check("cuStreamWaitEvent(main on join)")?;
        }
        Ok(())
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        // the handle bound to the stream goes first, then the stream
        self.blas.release();
        drop(self.raw.get_mut().ok().and_then(|r| r.take()));
    }
}
