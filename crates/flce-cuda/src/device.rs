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
    /// b \[V\], dtype.
    pub bias: Option<DevPtr>,
    /// targets \[N\], i64.
    pub targets: DevPtr,
    /// class weights \[V\], f32.
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

    /// The pointer arguments, named, for [`check_device_pointers`].
    pub(crate) fn pointers(&self) -> [(&'static str, Option<DevPtr>); 5] {
        [
            ("e", Some(self.e)),
            ("c", Some(self.c)),
            ("bias", self.bias),
            ("targets", Some(self.targets)),
            ("class_weights", self.class_weights),
        ]
    }

    /// Whether every row of E and C starts on a 16-byte boundary (the tile kernels' fast copies).
    pub fn rows_aligned(&self) -> bool {
        (self.shape.d * self.dtype.size_in_bytes()).is_multiple_of(16)
            && self.e.is_multiple_of(16)
            && self.c.is_multiple_of(16)
    }
}

/// Where the forward writes.
#[derive(Clone, Copy, Debug)]
pub struct DeviceForwardOutputs {
    /// lse \[N\], f32. Null (0) only for the three-product pass of a plan that keeps lse in its
    /// own state ([`crate::plan::ThreeProductPlan::lse`]), for a caller that will not read it; every other
    /// entry point and plan refuses it before any kernel.
    pub lse: DevPtr,
    /// per-token loss \[N\], f32; required for reduction none.
    pub per_token_loss: Option<DevPtr>,
    /// f32 \[4\]: loss (mean or sum; the sum for none), accuracy, Σ w_t over non-ignored tokens, W.
    pub scalars: DevPtr,
    /// i32 \[1\], the status word: i32::MAX when the input is good; else the first token whose
    /// target is outside [0, V) and not ignore_index (>= 0; such tokens get a NaN loss and NaN
    /// gradient rows), or i32::MIN + j for the first class j whose weight is negative or not
    /// finite (then every token's loss and gradient row is NaN). Read it to report them:
    /// [`crate::CudaError::from_status`].
    pub status: DevPtr,
}

impl DeviceForwardOutputs {
    pub(crate) fn pointers(&self) -> [(&'static str, Option<DevPtr>); 4] {
        [
            ("lse", Some(self.lse)),
            ("per_token_loss", self.per_token_loss),
            ("scalars", Some(self.scalars)),
            ("status", Some(self.status)),
        ]
    }

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
    /// \[N\], for reduction none.
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
    pub(crate) fn pointers(&self) -> [(&'static str, Option<DevPtr>); 3] {
        [("grads.de", self.de), ("grads.dc", self.dc), ("grads.dbias", self.dbias)]
    }

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
    pub(crate) fn pointer(&self) -> (&'static str, Option<DevPtr>) {
        ("workspace", (self.bytes > 0).then_some(self.ptr))
    }

    pub(crate) fn at(&self, r: Region) -> DevPtr {
        self.ptr + r.offset as u64
    }

    /// The part of this workspace at `r`, as a workspace of its own (a sub-plan's regions count
    /// from its first byte).
    pub(crate) fn sub(&self, r: Region) -> Workspace {
        Workspace { ptr: self.at(r), bytes: r.bytes }
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

/// Every pointer argument of a call is memory of device `ordinal`: an address CUDA does not know
/// (a host pointer, a freed or made-up one), host memory, or another GPU's memory is an error that
/// names the argument, before any work is queued. Managed memory passes (it migrates on access).
/// One driver query per pointer (cuPointerGetAttributes: memory type, device ordinal, managed).
pub(crate) fn check_device_pointers(
    ordinal: usize,
    args: impl IntoIterator<Item = (&'static str, Option<DevPtr>)>,
) -> Result<()> {
    use cudarc::driver::sys as cu;
    use std::ffi::c_void;
    for (name, ptr) in args {
        let Some(ptr) = ptr else { continue };
        let (mut kind, mut device, mut managed) = (0u32, -1i32, 0u32);
        let mut attrs = [
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            cu::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        ];
        let mut data = [
            &mut kind as *mut u32 as *mut c_void,
            &mut device as *mut i32 as *mut c_void,
            &mut managed as *mut u32 as *mut c_void,
        ];
        // SAFETY: three attributes, each with a slot of its value's type (CUmemorytype and the
        // managed flag are 32-bit, the ordinal an int); an unknown address leaves the defaults.
        let r = unsafe { cu::cuPointerGetAttributes(3, attrs.as_mut_ptr(), data.as_mut_ptr(), ptr) };
        let bad = |reason: String| Error::BadPointer { arg: name, ptr, reason };
        if r != cu::CUresult::CUDA_SUCCESS {
            return Err(bad(format!("the driver could not describe this address ({r:?})")));
        }
        if managed != 0 {
            continue;
        }
        if kind != cu::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
            let what = if kind == cu::CUmemorytype::CU_MEMORYTYPE_HOST as u32 {
                "host memory"
            } else {
                "not memory CUDA knows (a host pointer, or freed)"
            };
            return Err(bad(format!("is {what}; the call needs device memory of GPU {ordinal}")));
        }
        if device != ordinal as i32 {
            return Err(bad(format!("is memory of GPU {device}; the call runs on GPU {ordinal}")));
        }
    }
    Ok(())
}
