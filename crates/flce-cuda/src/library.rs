//! Finding the CUDA libraries at run time. cudarc (dynamic loading) panics when a library is
//! missing; we probe first with the same candidate names so a missing library becomes an error
//! that names it.

use std::sync::OnceLock;

use crate::error::{CudaError, CudaResult};

/// The libraries flce loads: the driver, NVRTC (compiling kernels) and cuBLAS (backward GEMMs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    Driver,
    Nvrtc,
    Cublas,
}

impl Library {
    fn stem(self) -> &'static str {
        match self {
            Library::Driver => "cuda",
            Library::Nvrtc => "nvrtc",
            Library::Cublas => "cublas",
        }
    }
    fn display(self) -> &'static str {
        match self {
            Library::Driver => "libcuda (the NVIDIA driver)",
            Library::Nvrtc => "libnvrtc (NVRTC)",
            Library::Cublas => "libcublas (cuBLAS)",
        }
    }
}

/// Check that `lib` can be loaded (cached per library).
pub fn require(lib: Library) -> CudaResult<()> {
    static CACHE: [OnceLock<bool>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = &CACHE[lib as usize];
    let candidates = cudarc::get_lib_name_candidates(lib.stem());
    let ok = *slot.get_or_init(|| {
        candidates.iter().any(|name| {
            // SAFETY: loading a shared library runs its initialisers; these are NVIDIA's own
            // libraries, the same ones cudarc would load.
            unsafe { libloading::Library::new(name) }.is_ok()
        })
    });
    if ok {
        Ok(())
    } else {
        Err(CudaError::LibraryMissing { library: lib.display(), tried: candidates.join(", ") })
    }
}

/// The file `lib` was loaded from (found through one of its symbols), for identifying its exact
/// build: the kernel cache keys on NVRTC's file as well as its version.
pub fn loaded_file(lib: Library, symbol: &str) -> Option<std::path::PathBuf> {
    let candidates = cudarc::get_lib_name_candidates(lib.stem());
    candidates.iter().find_map(|name| {
        // SAFETY: as in `require`; the library is the one cudarc loads.
        let library = unsafe { libloading::Library::new(name) }.ok()?;
        // SAFETY: only the symbol's address is used, never called.
        let sym = unsafe { library.get::<*const std::ffi::c_void>(symbol.as_bytes()) }.ok()?;
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr reads the address and fills `info`; dli_fname stays valid while the
        // library is loaded (it is: `library` is alive here, and cudarc keeps its own handle).
        let found = unsafe { libc::dladdr(*sym, &mut info) } != 0 && !info.dli_fname.is_null();
        found.then(|| {
            let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
            std::path::PathBuf::from(name.to_string_lossy().into_owned())
        })
    })
}
