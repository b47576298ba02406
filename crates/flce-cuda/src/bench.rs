//! Timing helpers for benchmarks: CUDA events on a stream, and the cuBLAS logits GEMM that is the
//! floor every fused loss is measured against.

use std::ffi::c_void;

use cudarc::cublas::sys as cublas;
use cudarc::driver::result as drv;
use cudarc::driver::sys as cu;
use flce_core::{DType, Result};

use crate::error::Check;
use crate::launch::{CudaLoss, DeviceInputs, Stream};
use crate::params::DevPtr;

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
        let (n, d, v) = (x.shape.n as i32, x.shape.d as i32, x.shape.v as i32);
        let ty = match x.dtype {
            DType::BF16 => cublas::cudaDataType::CUDA_R_16BF,
            DType::F16 => cublas::cudaDataType::CUDA_R_16F,
            DType::F32 => cublas::cudaDataType::CUDA_R_32F,
        };
        let handle = self.cublas_handle(stream)?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // column-major: out (V × N) = Cᵀ(V × D) · E(D × N)
        cudarc::cublas::result::gemm_ex(
            handle,
            cublas::cublasOperation_t::CUBLAS_OP_T,
            cublas::cublasOperation_t::CUBLAS_OP_N,
            v,
            n,
            d,
            &alpha as *const f32 as *const c_void,
            x.c as *const c_void,
            ty,
            d,
            x.e as *const c_void,
            ty,
            d,
            &beta as *const f32 as *const c_void,
            out as *mut c_void,
            ty,
            v,
            cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
        .check("cublasGemmEx(logits)")?;
        Ok(())
    }
}
