//! Errors of the CUDA backend. Every failure carries its context (which call, which kernel,
//! the NVRTC log and options) and converts into `flce_core::Error::Backend`.

use flce_core::Error;

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// A CUDA library could not be loaded.
    #[error("could not load {library} (tried {tried}); install the NVIDIA driver / CUDA runtime libraries or put them on the loader path (LD_LIBRARY_PATH)")]
    LibraryMissing { library: &'static str, tried: String },

    /// NVRTC rejected a kernel.
    #[error("NVRTC failed to compile {kernel} with options [{options}]:\n{log}")]
    Compile { kernel: String, options: String, log: String },

    /// A driver, NVRTC or cuBLAS call failed.
    #[error("{call}: {message}")]
    Call { call: String, message: String },

    /// Device reported targets outside [0, V).
    #[error("target[{index}] is outside [0, {vocab}) and is not ignore_index")]
    BadTarget { index: usize, vocab: usize },
}

impl CudaError {
    pub fn call(call: impl Into<String>, err: impl std::fmt::Debug) -> Self {
        CudaError::Call { call: call.into(), message: format!("{err:?}") }
    }
}

impl From<CudaError> for Error {
    fn from(e: CudaError) -> Self {
        let context = match &e {
            CudaError::LibraryMissing { .. } => "loading CUDA".to_string(),
            CudaError::Compile { kernel, .. } => format!("compiling {kernel}"),
            CudaError::Call { .. } => "CUDA call".to_string(),
            CudaError::BadTarget { .. } => "target check".to_string(),
        };
        Error::Backend { backend: "cuda", context, source: Box::new(e) }
    }
}

pub type CudaResult<T> = std::result::Result<T, CudaError>;

/// Turn a cudarc result into ours, naming the call.
pub(crate) trait Check<T> {
    fn check(self, call: &str) -> CudaResult<T>;
}

impl<T, E: std::fmt::Debug> Check<T> for std::result::Result<T, E> {
    fn check(self, call: &str) -> CudaResult<T> {
        self.map_err(|e| CudaError::call(call, e))
    }
}
