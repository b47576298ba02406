//! The safe types of the device-pointer API: the caller's inputs, outputs, gradients, workspace
//! and stream, and the pointer checks they get before any launch (shape and option checks are
//! flce-core's, shared with every entry point).

use cudarc::driver::sys as cu;
use flce_core::{DType, Error, Options, Result, Shape};

use crate::abi::DevPtr;
use crate::plan::{Region, Wanted};

/// A raw CUDA stream (`cudaStream_t`); null is the legacy default stream.
pub type Stream = cu::CUstream;

/// The caller's inputs in device memory (row-major, contiguous).
#[derive(Clone, Copy, Debug)]
pub struct DeviceInputs {
    pub shape: Shape,
    pub dtype: DType,
    /// E [N, D], dtype.
    pub e: DevPtr,
    /// C [V, D], dtype.
    pub c: DevPtr,
    /// b [V], dtype.
    pub bias: Option<DevPtr>,
    /// targets [N], i64.
    pub targets: DevPtr,
    /// class weights [V], f32.
    pub class_weights: Option<DevPtr>,
}

impl DeviceInputs {
    /// flce-core's checks of the shape and options, then non-null, aligned pointers.
    pub fn validate(&self, opts: &Options) -> Result<()> {
        self.shape.validate_with(opts)?;
        let elem = self.dtype.size_in_bytes() as u64;
        for (arg, p, a) in [
            ("e", Some(self.e), elem),
            ("c", Some(self.c), elem),
            ("bias", self.bias, elem),
            ("targets", Some(self.targets), 8),
            ("class_weights", self.class_weights, 4),
        ] {
            if let Some(p) = p {
                if p == 0 || p % a != 0 {
                    return Err(Error::Unsupported(format!(
                        "{arg}: device pointer {p:#x} is null or not aligned to {a} bytes"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether every row of E and C starts on a 16-byte boundary (the tile kernels' fast copies).
    pub fn rows_aligned(&self) -> bool {
        (self.shape.d * self.dtype.size_in_bytes()) % 16 == 0 && self.e % 16 == 0 && self.c % 16 == 0
    }
}

/// Where the forward writes.
#[derive(Clone, Copy, Debug)]
pub struct DeviceForwardOutputs {
    /// lse [N], f32.
    pub lse: DevPtr,
    /// per-token loss [N], f32; required for reduction none.
    pub per_token_loss: Option<DevPtr>,
    /// f32 [4]: loss (mean or sum; the sum for none), accuracy, Σ w_t over non-ignored tokens, W.
    pub scalars: DevPtr,
    /// i32 [1]: the first token whose target is outside [0, V) and not ignore_index, or i32::MAX.
    /// Such tokens are treated as ignored; read this to report them.
    pub status: DevPtr,
}

impl DeviceForwardOutputs {
    /// Reduction none writes one loss per token: its buffer must be given.
    pub fn check(&self, n: usize, opts: &Options) -> Result<()> {
        if opts.reduction == flce_core::Reduction::None && self.per_token_loss.is_none() {
            return Err(Error::ShapeMismatch {
                arg: "per_token_loss",
                layout: "[N] (required for reduction none)".into(),
                expected: n,
                got: 0,
            });
        }
        Ok(())
    }
}

/// ∂L/∂(forward output), in device memory (f32).
#[derive(Clone, Copy, Debug)]
pub enum DeviceGradOutput {
    /// A scalar, for mean and sum.
    Scalar(DevPtr),
    /// [N], for reduction none.
    PerToken(DevPtr),
}

impl DeviceGradOutput {
    pub fn ptr(&self) -> DevPtr {
        match *self {
            DeviceGradOutput::Scalar(p) | DeviceGradOutput::PerToken(p) => p,
        }
    }
    /// The per-token length for flce-core's check (None for a scalar).
    pub fn per_token_len(&self, n: usize) -> Option<usize> {
        matches!(self, DeviceGradOutput::PerToken(_)).then_some(n)
    }
}

/// Where the backward writes (input dtype); `None` skips that gradient.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceGrads {
    pub de: Option<DevPtr>,
    pub dc: Option<DevPtr>,
    pub dbias: Option<DevPtr>,
}

impl DeviceGrads {
    pub fn wanted(&self) -> Wanted {
        Wanted { de: self.de.is_some(), dc: self.dc.is_some(), dbias: self.dbias.is_some() }
    }

    /// The gradients asked for are the ones a plan was made for.
    pub fn check_plan(&self, planned: Wanted) -> Result<()> {
        if planned != self.wanted() {
            return Err(Error::InvalidOption {
                name: "plan",
                value: format!("{planned:?}"),
                reason: "the plan was made for other gradients than the ones asked for",
            });
        }
        Ok(())
    }
}

/// Caller-owned scratch memory.
#[derive(Clone, Copy, Debug)]
pub struct Workspace {
    pub ptr: DevPtr,
    pub bytes: usize,
}

impl Workspace {
    pub(crate) fn at(&self, r: Region) -> DevPtr {
        self.ptr + r.offset as u64
    }

    /// At least `needed` bytes, at a real address when any are needed.
    pub(crate) fn check(&self, needed: usize) -> Result<()> {
        if self.bytes < needed || (needed > 0 && self.ptr == 0) {
            return Err(Error::ShapeMismatch {
                arg: "workspace",
                layout: "bytes".into(),
                expected: needed,
                got: self.bytes,
            });
        }
        Ok(())
    }
}
