//! cuBLAS for the plain products: one handle per device (created on first use, bound to the
//! caller's stream for each call) and [`Gemm`], a product described by named fields instead of
//! GemmEx's sixteen positional arguments. Always f32 accumulation (CUBLAS_COMPUTE_32F); alpha 1,
//! or the backward's α read from the device ([`Alpha`]).

use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

use cudarc::cublas::sys as cublas;
use flce_core::{DType, Result};

use crate::abi::DevPtr;
use crate::device::Stream;
use crate::error::{Check, CudaResult};
use crate::geometry::{SCALAR_ALPHA, SCALAR_ONE, SCALAR_ZERO};
use crate::library::{require, Library};

struct Handle(cublas::cublasHandle_t);
// SAFETY: the handle is only used under Blas's mutex.
unsafe impl Send for Handle {}

/// The cuBLAS handle of one device.
#[derive(Default)]
pub(crate) struct Blas {
    handle: Mutex<Option<Handle>>,
}

/// The handle bound to a stream, held for the duration of a pass.
pub(crate) struct BoundBlas<'a>(MutexGuard<'a, Option<Handle>>);

impl BoundBlas<'_> {
    pub(crate) fn raw(&self) -> cublas::cublasHandle_t {
        self.0.as_ref().expect("created by Blas::bind").0
    }
}

impl Blas {
    /// The handle, created on first use, bound to `stream`, locked for the caller.
    pub(crate) fn bind(&self, stream: Stream) -> Result<BoundBlas<'_>> {
        let mut guard = self.handle.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            require(Library::Cublas)?;
            let raw = cudarc::cublas::result::create_handle().check("cublasCreate")?;
            // Reductions in f32: cuBLAS's default math lets a split-K product of 16-bit output
            // sum its partial products in the output type — a rounding per split where flce's
            // policy is f32 sums rounded once. No measured product takes that path (H200:
            // errors and times unchanged with this mode, docs/journal.md v57); the mode keeps it
            // so for shapes and cuBLAS versions not measured.
            let mode = cublas::cublasMath_t::CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
            // SAFETY: the live handle just created.
            let set = unsafe { cublas::cublasSetMathMode(raw, mode) }.result().check("cublasSetMathMode");
            if let Err(e) = set {
                // SAFETY: created above, used by nothing else.
                unsafe {
                    let _ = cublas::cublasDestroy_v2(raw);
                }
                return Err(e.into());
            }
            *guard = Some(Handle(raw));
        }
        let raw = guard.as_ref().expect("just created").0;
        // SAFETY: a live handle; the stream belongs to this context.
        unsafe { cudarc::cublas::result::set_stream(raw, stream as cublas::cudaStream_t) }.check("cublasSetStream")?;
        Ok(BoundBlas(guard))
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        if let Some(Handle(h)) = self.handle.get_mut().ok().and_then(|b| b.take()) {
            // SAFETY: the handle was created by us and is no longer used.
            unsafe {
                let _ = cublas::cublasDestroy_v2(h);
            }
        }
    }
}

/// Element type of a matrix in a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    /// The problem's input dtype.
    Input(DType),
    F32,
}

impl Elem {
    fn cuda(self) -> cublas::cudaDataType {
        match self {
            Elem::Input(DType::BF16) => cublas::cudaDataType::CUDA_R_16BF,
            Elem::Input(DType::F16) => cublas::cudaDataType::CUDA_R_16F,
            Elem::Input(DType::F32) | Elem::F32 => cublas::cudaDataType::CUDA_R_32F,
        }
    }
}

/// A column-major matrix operand: address, element type, leading dimension, and whether the
/// product reads it transposed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat {
    pub ptr: DevPtr,
    pub elem: Elem,
    pub ld: usize,
    pub transposed: bool,
}

impl Mat {
    pub(crate) fn new(ptr: DevPtr, elem: Elem, ld: usize) -> Self {
        Mat { ptr, elem, ld, transposed: false }
    }
    pub(crate) fn t(self) -> Self {
        Mat { transposed: true, ..self }
    }
}

/// A product's alpha.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Alpha {
    One,
    /// The f32 at word [`SCALAR_ALPHA`] of the backward's scalars region at this address: the
    /// mean's or sum's uniform ∂L/∂loss, which G leaves out so that its rounding does not depend
    /// on it (common/types.cuh token_scale_of). The call runs in cuBLAS's device pointer mode,
    /// its beta read from the region's 0 or 1 (words [`SCALAR_ZERO`], [`SCALAR_ONE`]): no host
    /// ever reads α, so nothing synchronises. Only for products written once into a gradient:
    /// with a device beta cuBLAS runs its generic epilogue, and on the f32 accumulators' beta = 1
    /// products that cost 43% (journal v53) — those run with [`Alpha::One`] and the kernel that
    /// rounds the accumulator applies α (`CudaLoss::round_scaled_into`).
    Scalars(DevPtr),
}

/// `out (m × n) = alpha · a (m × k) · b (k × n) + beta · out`, column-major, f32 accumulation
/// (alpha applied to the f32 sum, before the one rounding to `out`'s type).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Mat,
    pub b: Mat,
    pub alpha: Alpha,
    /// 0 or 1 with [`Alpha::Scalars`].
    pub beta: f32,
    pub out: Mat,
}

impl Gemm {
    /// # Safety
    /// Every matrix must be device memory valid for its extent on the handle's stream.
    pub(crate) unsafe fn run(&self, blas: &BoundBlas<'_>) -> CudaResult<()> {
        let op = |m: &Mat| {
            if m.transposed {
                cublas::cublasOperation_t::CUBLAS_OP_T
            } else {
                cublas::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let one = 1.0f32;
        let Gemm { m, n, k, a, b, alpha, beta, out } = *self;
        let word = |base: DevPtr, i: usize| crate::geometry::scalar_word(base, i) as *const c_void;
        let (mode, alpha, beta) = match alpha {
            Alpha::One => (
                cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST,
                &one as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
            ),
            Alpha::Scalars(s) => {
                if beta != 0.0 && beta != 1.0 {
                    let message = format!("a product with the device alpha takes beta 0 or 1, not {beta}");
                    return Err(crate::error::CudaError::Call { call: "Gemm::run".into(), message });
                }
                let b = if beta == 0.0 { SCALAR_ZERO } else { SCALAR_ONE };
                (cublas::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE, word(s, SCALAR_ALPHA), word(s, b))
            }
        };
        // set on every call: the handle is shared by every product of the device
        cublas::cublasSetPointerMode_v2(blas.raw(), mode).result().check("cublasSetPointerMode")?;
        cudarc::cublas::result::gemm_ex(
            blas.raw(),
            op(&a),
            op(&b),
            m as i32,
            n as i32,
            k as i32,
            alpha,
            a.ptr as *const c_void,
            a.elem.cuda(),
            a.ld as i32,
            b.ptr as *const c_void,
            b.elem.cuda(),
            b.ld as i32,
            beta,
            out.ptr as *mut c_void,
            out.elem.cuda(),
            out.ld as i32,
            cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
        .check(&format!("cublasGemmEx(m {m}, n {n}, k {k})"))
    }
}
