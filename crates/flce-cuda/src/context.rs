//! The caller's CUDA context, saved and restored around every entry point: flce binds its
//! device's context to make its calls, and a call on device 1 must not leave the caller's thread
//! on device 1's context (PyTorch, and any caller juggling devices, keeps its own current
//! context per thread).

use cudarc::driver::result::ctx;
use cudarc::driver::sys as cu;
use cudarc::driver::CudaContext;

use crate::error::{Check, CudaResult};

/// `context` bound to the calling thread while this lives; the thread's previous context
/// (possibly none) is current again after it drops.
pub(crate) struct BoundContext {
    previous: cu::CUcontext,
}

impl BoundContext {
    pub(crate) fn bind(context: &CudaContext) -> CudaResult<Self> {
        let previous = ctx::get_current().check("cuCtxGetCurrent")?.unwrap_or(std::ptr::null_mut());
        context.bind_to_thread().check("cuCtxSetCurrent")?;
        Ok(BoundContext { previous })
    }
}

impl Drop for BoundContext {
    fn drop(&mut self) {
        // SAFETY: `previous` was current on this thread (or null) when the guard was made; a
        // failure here leaves flce's context current, which every later entry point rebinds.
        unsafe {
            let _ = ctx::set_current(self.previous);
        }
    }
}
