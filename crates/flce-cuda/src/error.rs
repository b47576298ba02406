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

    /// Device reported a class weight that is negative or not finite.
    #[error("class weight [{class}] is negative or not finite (class weights must be finite and >= 0)")]
    BadClassWeight { class: usize },
}

/// The status word's value when the input is good (kernels/common/types.cuh).
pub const STATUS_OK: i32 = i32::MAX;
/// `STATUS_BAD_CLASS_WEIGHT + j`: class j's weight is negative or not finite.
pub const STATUS_BAD_CLASS_WEIGHT: i32 = i32::MIN;

impl CudaError {
    /// The error a forward's status word reports, if any: the first bad class weight, else the
    /// first out-of-range target.
    pub fn from_status(status: i32, vocab: usize) -> Option<Self> {
        match status {
            STATUS_OK => None,
            s if s < 0 => Some(CudaError::BadClassWeight { class: (s - STATUS_BAD_CLASS_WEIGHT) as usize }),
            s => Some(CudaError::BadTarget { index: s as usize, vocab }),
        }
    }

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
            CudaError::BadClassWeight { .. } => "class weight check".to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_word_decodes_to_the_first_bad_input() {
        assert!(CudaError::from_status(STATUS_OK, 10).is_none());
        assert!(matches!(CudaError::from_status(3, 10), Some(CudaError::BadTarget { index: 3, vocab: 10 })));
        assert!(matches!(CudaError::from_status(0, 10), Some(CudaError::BadTarget { index: 0, .. })));
        assert!(matches!(
            CudaError::from_status(STATUS_BAD_CLASS_WEIGHT + 7, 10),
            Some(CudaError::BadClassWeight { class: 7 })
        ));
        assert!(matches!(
            CudaError::from_status(STATUS_BAD_CLASS_WEIGHT, 10),
            Some(CudaError::BadClassWeight { class: 0 })
        ));
    }
}
