//! A test probe's module (tests/probes/*.cu) on the GPU: compiled for an arch with its include
//! lines expanded as the kernels' are, loaded in the current context, unloaded when dropped.

use std::ffi::{c_void, CStr};

use cudarc::driver::sys as cu;
use flce_core::DType;
use flce_cuda::compile::{compile_uncached, expand_includes, options, Arch};

pub(crate) struct ProbeModule(cu::CUmodule);

impl ProbeModule {
    /// `source` (a probe's text, named `name` in NVRTC's messages) compiled for `arch`, loaded.
    /// The caller's thread has the context bound.
    pub(crate) fn load(source: &str, name: &str, arch: &Arch) -> Result<Self, String> {
        let cubin =
            compile_uncached(&expand_includes(source, DType::BF16), name, &options(arch)).map_err(|e| e.to_string())?;
        let mut module: cu::CUmodule = std::ptr::null_mut();
        // SAFETY: the cubin outlives the call; the context is current.
        unsafe { cu::cuModuleLoadData(&mut module, cubin.as_ptr() as *const c_void) }
            .result()
            .map_err(|e| format!("cuModuleLoadData: {e:?}"))?;
        Ok(ProbeModule(module))
    }

    /// Runs `kernel` on `grid` blocks of `block` threads with `smem` bytes of dynamic shared
    /// memory, and waits for it.
    ///
    /// # Safety
    /// `params` points at one value of each of the kernel's parameters, in order and of its types,
    /// and every device pointer among them is valid for what the kernel accesses.
    pub(crate) unsafe fn launch(
        &self,
        kernel: &CStr,
        grid: u32,
        block: u32,
        smem: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), String> {
        let mut f: cu::CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded in the current context; the name is NUL-terminated.
        unsafe { cu::cuModuleGetFunction(&mut f, self.0, kernel.as_ptr()) }.result().map_err(|e| format!("{e:?}"))?;
        // SAFETY: the caller's contract on `params`; synchronised before returning.
        unsafe {
            cu::cuLaunchKernel(
                f,
                grid,
                1,
                1,
                block,
                1,
                1,
                smem,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
            .result()
            .map_err(|e| format!("launch {kernel:?}: {e:?}"))?;
            cu::cuCtxSynchronize().result().map_err(|e| format!("{kernel:?}: {e:?}"))
        }
    }
}

impl Drop for ProbeModule {
    fn drop(&mut self) {
        // SAFETY: every launch of the module was synchronised (`launch` waits for it).
        if let Err(e) = unsafe { cu::cuModuleUnload(self.0) }.result() {
            eprintln!("cuModuleUnload: {e:?}");
        }
    }
}
