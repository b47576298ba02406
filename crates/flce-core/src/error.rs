//! The one error type of flce. Every bad input is reported before anything is computed or
//! written, naming the argument and the offending value.

use crate::DType;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A dimension that must be positive is zero (N = 0 tokens, D = 0, V = 0).
    #[error("{dim} must be at least 1, got 0")]
    EmptyDimension { dim: &'static str },

    /// A buffer's length does not match the shape it must have.
    #[error("{arg}: expected {expected} elements ({layout}), got {got}")]
    ShapeMismatch { arg: &'static str, layout: String, expected: usize, got: usize },

    /// A tensor's dtype differs from the dtype of the input E.
    #[error("{arg}: dtype {got} does not match the input dtype {expected}")]
    DTypeMismatch { arg: &'static str, expected: DType, got: DType },

    /// A target is neither a valid class index nor ignore_index.
    #[error("target[{index}] = {value} is outside [0, {vocab}) and is not ignore_index ({ignore_index})")]
    TargetOutOfRange { index: usize, value: i64, vocab: usize, ignore_index: i64 },

    /// An option value outside its domain (negative, NaN, ...).
    #[error("option {name} = {value}: {reason}")]
    InvalidOption { name: &'static str, value: String, reason: &'static str },

    /// A device pointer argument that is not memory of the call's GPU.
    #[error("{arg}: device pointer {ptr:#x} {reason}")]
    BadPointer { arg: &'static str, ptr: u64, reason: String },

    /// A request the chosen backend cannot serve (a dtype, a layout, a missing library).
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// A failure inside a backend (a CUDA call, an NVRTC compile), with its context.
    #[error("{backend} backend: {context}: {source}")]
    Backend {
        backend: &'static str,
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl Error {
    pub fn invalid_option(name: &'static str, value: impl std::fmt::Display, reason: &'static str) -> Self {
        Error::InvalidOption { name, value: value.to_string(), reason }
    }
}
