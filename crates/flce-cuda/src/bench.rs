//! Timing helpers for benchmarks: CUDA events on a stream, and the cuBLAS logits GEMM that is the
//! floor every fused loss is measured against.

use cudarc::driver::result as drv;
use cudarc::driver::sys as cu;
use flce_core::{Result, Shape};

use crate::abi::DevPtr;
use crate::blas::{Alpha, Elem, Gemm, Mat};
use crate::device::{DeviceInputs, Stream};
use crate::error::Check;
use crate::loss::CudaLoss;

/// Median milliseconds of `iters` timed calls of `f` on `stream` (after `warmup` untimed calls),
/// measured with CUDA events around each call.
///
/// # Safety
/// `stream` must be a live stream of the current context (or null, the default stream).
pub unsafe fn median_ms(stream: Stream, warmup: usize, iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f32> {
    for _ in 0..warmup {
        f()?;
    }
    let flags = cu::CUevent_flags::CU_EVENT_DEFAULT;
    let start = drv::event::create(flags).check("cuEventCreate")?;
    let stop = drv::event::create(flags).check("cuEventCreate")?;
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters.max(1) {
        // SAFETY: events and stream are live for the calls.
        unsafe {
            drv::event::record(start, stream).check("cuEventRecord")?;
            f()?;
            drv::event::record(stop, stream).check("cuEventRecord")?;
            drv::event::synchronize(stop).check("cuEventSynchronize")?;
            times.push(drv::event::elapsed(start, stop).check("cuEventElapsedTime")?);
        }
    }
    // SAFETY: not used after this.
    unsafe {
        let _ = drv::event::destroy(start);
        let _ = drv::event::destroy(stop);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(times[times.len() / 2])
}

impl CudaLoss {
    /// The plain logits product `out [N, V] = E·Cᵀ` through cuBLAS (input dtype out, f32
    /// accumulation): what an unfused implementation does first, and the speed floor.
    ///
    /// # Safety
    /// Pointers as for [`CudaLoss::forward`]; `out` holds N·V elements of the input dtype.
    pub unsafe fn logits_gemm(&self, x: &DeviceInputs, out: DevPtr, stream: Stream) -> Result<()> {
        let Shape { n, d, v } = x.shape;
        let input = Elem::Input(x.dtype);
        let blas = self.blas.bind(stream)?;
        // column-major: out (V × N) = Cᵀ(V × D) · E(D × N)
        let gemm = Gemm {
            m: v,
            n,
            k: d,
            a: Mat::new(x.c, input, d).t(),
            b: Mat::new(x.e, input, d),
            alpha: Alpha::One,
            beta: 0.0,
            out: Mat::new(out, input, v),
        };
        gemm.run(&blas)?;
        Ok(())
    }
}
