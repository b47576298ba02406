//! The caller's CUDA context, saved and restored around every entry point: flce binds its
//! device's context to make its calls, and a call on device 1 must not leave the caller's thread
//! on device 1's context (PyTorch, and any caller juggling devices, keeps its own current
//! context per thread).

use cudarc::driver::sys as cu;
use cudarc::driver::CudaContext;

use crate::error::{CudaError, CudaResult};

/// `ctx` bound to the calling thread while this lives; the thread's previous context (possibly
/// none) is current again after it drops.
pub(crate) struct BoundContext {
    previous: cu::CUcontext,
}

impl BoundContext {
    pub(crate) fn bind(ctx: &CudaContext) -> CudaResult<Self> {
        let mut previous: cu::CUcontext = std::ptr::null_mut();
        // SAFETY: writes one context handle (or null) into `previous`.
        let r = unsafe { cu::cuCtxGetCurrent(&mut previous) };
        if r != cu::cudaError_enum::CUDA_SUCCESS {
            return Err(CudaError::call("cuCtxGetCurrent", r));
        }
        ctx.bind_to_thread().map_err(|e| CudaError::call("cuCtxSetCurrent", e))?;
        Ok(BoundContext { previous })
    }
}

impl Drop for BoundContext {
    fn drop(&mut self) {
        // SAFETY: `previous` was current on this thread (or null) when the guard was made; a
        // failure here leaves flce's context current, which every later entry point rebinds.
        unsafe {
            let _ = cu::cuCtxSetCurrent(self.previous);
        }
    }
}

/// The context current on the calling thread (null when none), for tests of the above.
pub fn current_context() -> CudaResult<usize> {
    let mut ctx: cu::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one handle.
    let r = unsafe { cu::cuCtxGetCurrent(&mut ctx) };
    if r != cu::cudaError_enum::CUDA_SUCCESS {
        return Err(CudaError::call("cuCtxGetCurrent", r));
    }
    Ok(ctx as usize)
}

/// Make `ctx` (a value from [`current_context`], 0 for none) current on the calling thread.
///
/// # Safety
/// `ctx` must be 0 or a live context handle.
pub unsafe fn set_current_context(ctx: usize) -> CudaResult<()> {
    let r = cu::cuCtxSetCurrent(ctx as cu::CUcontext);
    if r != cu::cudaError_enum::CUDA_SUCCESS {
        return Err(CudaError::call("cuCtxSetCurrent", r));
    }
    Ok(())
}
