//! The Python extension module `flce._flce` (PyO3, abi3). It takes raw data pointers, shapes and
//! the caller's CUDA stream from the Python package (`python/flce/`), which allocates every
//! output and workspace with torch; no libtorch link. The GIL is released while Rust works.
//!
//! One entry type, [`Problem`]: a validated (shape, dtype, options) that makes the CUDA plans
//! (`ForwardPlan`, `BackwardPlan`: made once per call shape by the Python side and handed back
//! with every call) and runs forward / backward on the CUDA backend (device pointers) or the CPU
//! backend (host pointers).

use flce::cuda::{DeviceGradOutput, DeviceInputs, Wanted};
use flce::{bf16, cpu, f16, DType, Element, Error, GradBuffers, GradOutput, HostInputs, Options, Reduction, Shape};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

mod cuda_vocab_parallel;
mod memory;
mod plans;
mod ptrs;
mod vocab_parallel;
use plans::{backward_config, forward_config, Plan, PlanKind};
pub(crate) use ptrs::{device_grads, forward_outputs, to_workspace, DevicePtrs, ForwardPtrs, GradPtrs, HostPtrs};

/// Runs `call` on the CUDA backend of device `cuda.0` and the caller's stream `cuda.1`, with the
/// GIL released; its error becomes the Python exception [`to_py`] makes.
pub(crate) fn on_cuda<F>(py: Python<'_>, cuda: (usize, u64), call: F) -> PyResult<()>
where
    F: FnOnce(&flce::cuda::CudaLoss, flce::cuda::Stream) -> flce::Result<()> + Send,
{
    let (device, stream) = cuda;
    py.detach(move || call(&*flce::cuda_backend(device)?, stream as flce::cuda::Stream)).map_err(to_py)
}

pub(crate) fn to_py(e: Error) -> PyErr {
    match e {
        Error::DTypeMismatch { .. } => PyTypeError::new_err(e.to_string()),
        Error::Backend { .. } | Error::Unsupported(_) => PyRuntimeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// A validated problem: shape, dtype and loss options. dtype "f64" is accepted for CPU tensors
/// only: it runs flce's f64 oracle (materialised logits; for gradcheck and small problems).
#[pyclass(frozen, module = "flce._flce")]
pub struct Problem {
    pub(crate) shape: Shape,
    pub(crate) dtype: DType,
    pub(crate) f64: bool,
    pub(crate) opts: Options,
}

impl Problem {
    /// # Safety
    /// The pointers must address live, contiguous host buffers of the problem's shape and dtype.
    pub(crate) unsafe fn host_inputs<'a, T: flce::Real>(&self, p: &HostPtrs) -> HostInputs<'a, T> {
        let Shape { n, d, v } = self.shape;
        HostInputs {
            shape: self.shape,
            e: std::slice::from_raw_parts(p.e as *const T, n * d),
            c: std::slice::from_raw_parts(p.c as *const T, v * d),
            bias: p.bias.map(|b| std::slice::from_raw_parts(b as *const T, v)),
            targets: std::slice::from_raw_parts(p.targets as *const i64, n),
            class_weights: p.class_weights.map(|w| std::slice::from_raw_parts(w as *const f32, v)),
        }
    }

    /// # Safety: as `host_inputs`; `lse` and `per_token` hold N f32.
    unsafe fn cpu_forward_typed<T: Element>(
        &self,
        p: &HostPtrs,
        lse: usize,
        per_token: Option<usize>,
    ) -> flce::Result<(f32, Option<f32>)> {
        let n = self.shape.n;
        let x = self.host_inputs::<T>(p);
        let out = flce::ForwardBuffers {
            lse: std::slice::from_raw_parts_mut(lse as *mut f32, n),
            per_token_loss: per_token.map(|q| std::slice::from_raw_parts_mut(q as *mut f32, n)),
        };
        let s = cpu::forward_into(&x, &self.opts, out)?;
        Ok((s.loss, s.accuracy))
    }

    /// # Safety: as `host_inputs`; gradient pointers hold their shapes in dtype T.
    #[allow(clippy::too_many_arguments)]
    unsafe fn cpu_backward_typed<T: Element>(
        &self,
        p: &HostPtrs,
        lse: usize,
        grad_output: usize,
        de: Option<usize>,
        dc: Option<usize>,
        db: Option<usize>,
    ) -> flce::Result<()> {
        let Shape { n, d, v } = self.shape;
        let x = self.host_inputs::<T>(p);
        let lse = std::slice::from_raw_parts(lse as *const f32, n);
        let go = if self.opts.reduction == Reduction::None {
            GradOutput::PerToken(std::slice::from_raw_parts(grad_output as *const f32, n))
        } else {
            GradOutput::Scalar(*(grad_output as *const f32))
        };
        let grads = GradBuffers {
            de: de.map(|q| std::slice::from_raw_parts_mut(q as *mut T, n * d)),
            dc: dc.map(|q| std::slice::from_raw_parts_mut(q as *mut T, v * d)),
            dbias: db.map(|q| std::slice::from_raw_parts_mut(q as *mut T, v)),
        };
        cpu::backward_into(&x, &self.opts, lse, go, grads)
    }

    /// The f64 oracle on host pointers: fills lse / per-token loss, and the gradients for
    /// `grad_output` when given; returns (loss, accuracy).
    ///
    /// # Safety
    /// As `host_inputs` with T = f64; output pointers hold their shapes.
    #[allow(clippy::too_many_arguments)]
    unsafe fn oracle_f64(
        &self,
        p: &HostPtrs,
        lse: Option<usize>,
        per_token: Option<usize>,
        grad_output: Option<usize>,
        de: Option<usize>,
        dc: Option<usize>,
        db: Option<usize>,
    ) -> flce::Result<(f64, Option<f64>)> {
        let n = self.shape.n;
        let x = self.host_inputs::<f64>(p);
        let zeros = vec![0.0f32; n];
        let go = match (grad_output, self.opts.reduction) {
            (Some(g), Reduction::None) => GradOutput::PerToken(std::slice::from_raw_parts(g as *const f32, n)),
            (Some(g), _) => GradOutput::Scalar(*(g as *const f32)),
            (None, Reduction::None) => GradOutput::PerToken(&zeros),
            (None, _) => GradOutput::Scalar(0.0),
        };
        let r = cpu::reference::evaluate(&x, &self.opts, go)?;
        // float64 problems keep lse and the per-token loss in f64 too (gradcheck needs it)
        for (dst, src) in [(lse, &r.lse), (per_token, &r.per_token_loss), (de, &r.de), (dc, &r.dc), (db, &r.dbias)] {
            if let Some(q) = dst {
                std::slice::from_raw_parts_mut(q as *mut f64, src.len()).copy_from_slice(src);
            }
        }
        Ok((r.loss, self.opts.return_accuracy.then_some(r.accuracy)))
    }

    pub(crate) fn device_inputs(&self, (e, c, bias, targets, class_weights): DevicePtrs) -> DeviceInputs {
        DeviceInputs { shape: self.shape, dtype: self.dtype, e, c, bias, targets, class_weights }
    }

    /// grad_output as the loss's reduction takes it: one value per token for none, a scalar else.
    pub(crate) fn grad_output(&self, ptr: u64) -> DeviceGradOutput {
        if self.opts.reduction == Reduction::None {
            DeviceGradOutput::PerToken(ptr)
        } else {
            DeviceGradOutput::Scalar(ptr)
        }
    }

    pub(crate) fn no_f64_on_cuda(&self) -> PyResult<()> {
        if self.f64 {
            return Err(PyTypeError::new_err("float64 runs on CPU tensors only (flce's f64 oracle)"));
        }
        Ok(())
    }
}

#[pymethods]
impl Problem {
    #[new]
    #[pyo3(signature = (n, d, v, dtype, reduction = "mean", ignore_index = -100, label_smoothing = 0.0, z_loss = 0.0, softcap = None, shift = None, return_accuracy = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        n: usize,
        d: usize,
        v: usize,
        dtype: &str,
        reduction: &str,
        ignore_index: i64,
        label_smoothing: f32,
        z_loss: f32,
        softcap: Option<f32>,
        shift: Option<usize>,
        return_accuracy: bool,
    ) -> PyResult<Self> {
        let f64 = matches!(dtype, "f64" | "float64" | "double");
        let dtype: DType = if f64 { DType::F32 } else { dtype.parse().map_err(PyTypeError::new_err)? };
        let reduction: Reduction = reduction.parse().map_err(PyValueError::new_err)?;
        let opts = Options {
            reduction,
            ignore_index,
            label_smoothing,
            z_loss,
            softcap,
            shift,
            return_per_token_loss: reduction == Reduction::None,
            return_accuracy,
        };
        let shape = Shape::new(n, d, v);
        shape.validate_with(&opts).map_err(to_py)?;
        Ok(Problem { shape, dtype, f64, opts })
    }

    /// The CUDA forward plan of this problem on `device`.
    #[pyo3(signature = (device, mode = "auto", budget = None))]
    fn forward_plan(&self, device: usize, mode: &str, budget: Option<usize>) -> PyResult<Plan> {
        self.no_f64_on_cuda()?;
        let be = flce::cuda_backend(device).map_err(to_py)?;
        let plan = be.forward_plan(self.shape, self.dtype, forward_config(mode, budget)?);
        Ok(Plan { device, plan: PlanKind::Forward(plan) })
    }

    /// The CUDA backward plan of this problem on `device`, for the gradients wanted.
    #[pyo3(signature = (device, de, dc, dbias, mode = "auto", budget = None))]
    fn backward_plan(
        &self,
        device: usize,
        de: bool,
        dc: bool,
        dbias: bool,
        mode: &str,
        budget: Option<usize>,
    ) -> PyResult<Plan> {
        self.no_f64_on_cuda()?;
        let be = flce::cuda_backend(device).map_err(to_py)?;
        let wanted = Wanted { de, dc, dbias };
        let config = backward_config(mode, budget)?;
        let plan = be.backward_plan(self.shape, self.dtype, wanted, config).map_err(to_py)?;
        Ok(Plan { device, plan: PlanKind::Backward(plan) })
    }

    /// CUDA forward on device pointers, as `plan` says, on `cuda` = (device ordinal, the caller's
    /// stream); does not synchronise. `workspace` is (pointer, bytes).
    #[pyo3(signature = (cuda, inputs, outputs, workspace, plan))]
    fn cuda_forward(
        &self,
        py: Python<'_>,
        cuda: (usize, u64),
        inputs: DevicePtrs,
        outputs: ForwardPtrs,
        workspace: (u64, usize),
        plan: &Plan,
    ) -> PyResult<()> {
        let device = cuda.0;
        let plan = plan.forward(device)?;
        let x = self.device_inputs(inputs);
        let out = forward_outputs(outputs);
        let ws = to_workspace(workspace);
        let opts = &self.opts;
        on_cuda(py, cuda, move |be, stream| {
            // SAFETY: the Python caller passes data_ptr()s of live CUDA tensors of the validated
            // shapes and dtypes on `device`, and torch's stream handle.
            unsafe { be.forward(&x, opts, &out, ws, plan, stream) }
        })
    }

    /// CUDA backward on device pointers, as `plan` says, on `cuda` = (device ordinal, stream);
    /// does not synchronise. `grads` are the (dE, dC, db) pointers, None where not wanted.
    #[pyo3(signature = (cuda, inputs, lse, grad_output, grads, workspace, plan))]
    #[allow(clippy::too_many_arguments)]
    fn cuda_backward(
        &self,
        py: Python<'_>,
        cuda: (usize, u64),
        inputs: DevicePtrs,
        lse: u64,
        grad_output: u64,
        grads: GradPtrs,
        workspace: (u64, usize),
        plan: &Plan,
    ) -> PyResult<()> {
        let device = cuda.0;
        let plan = plan.backward(device)?;
        let x = self.device_inputs(inputs);
        let go = self.grad_output(grad_output);
        let grads = device_grads(grads);
        let ws = to_workspace(workspace);
        let opts = &self.opts;
        on_cuda(py, cuda, move |be, stream| {
            // SAFETY: as in cuda_forward.
            unsafe { be.backward(&x, opts, lse, go, &grads, ws, plan, stream) }
        })
    }

    /// The plan of this problem on `device` that computes the forward and the gradients at once
    /// within `budget` bytes of workspace, where one pays (`flce::cuda::CudaLoss::forward_backward_plan`):
    /// the three-product pass where a token chunk of at least
    /// `flce::cuda::plan::MIN_THREE_PRODUCT_TOKEN_CHUNK` tokens (or all of them) fits, else the
    /// vocabulary-slice pass where a head of `flce::cuda::plan::MIN_VOCAB_SLICE_HEAD_ROWS` rows fits;
    /// None otherwise — and for float16 unless `known_grad_output` (the pass will be given the
    /// grad_output its backward brings, AMP's loss scale included:
    /// `flce::cuda::CudaLoss::forward_backward_plan_for_known_grad_output`).
    #[pyo3(signature = (device, de, dc, dbias, budget, known_grad_output=false))]
    fn forward_backward_plan(
        &self,
        device: usize,
        de: bool,
        dc: bool,
        dbias: bool,
        budget: usize,
        known_grad_output: bool,
    ) -> PyResult<Option<Plan>> {
        self.no_f64_on_cuda()?;
        let be = flce::cuda_backend(device).map_err(to_py)?;
        let wanted = Wanted { de, dc, dbias };
        let plan = if known_grad_output {
            be.forward_backward_plan_for_known_grad_output(self.shape, self.dtype, &self.opts, wanted, budget)
        } else {
            be.forward_backward_plan(self.shape, self.dtype, &self.opts, wanted, budget)
        }
        .map_err(to_py)?;
        Ok(plan.map(|plan| Plan { device, plan: PlanKind::ForwardBackward(plan) }))
    }

    /// The CUDA pass of a `forward_backward_plan` (three-product or vocabulary-slice): the forward's outputs
    /// and the gradients for grad_output 1 — or for the f32 at `grad_output`, the one the
    /// backward will bring —, as `plan` says, on `cuda` = (device, stream); does not synchronise.
    #[pyo3(signature = (cuda, inputs, outputs, grads, workspace, plan, grad_output=None))]
    #[allow(clippy::too_many_arguments)]
    fn cuda_forward_backward(
        &self,
        py: Python<'_>,
        cuda: (usize, u64),
        inputs: DevicePtrs,
        outputs: ForwardPtrs,
        grads: GradPtrs,
        workspace: (u64, usize),
        plan: &Plan,
        grad_output: Option<u64>,
    ) -> PyResult<()> {
        let device = cuda.0;
        let plan = plan.forward_backward(device)?;
        let x = self.device_inputs(inputs);
        let out = forward_outputs(outputs);
        let grads = device_grads(grads);
        let ws = to_workspace(workspace);
        let opts = &self.opts;
        on_cuda(py, cuda, move |be, stream| {
            // SAFETY: as in cuda_forward.
            unsafe { be.forward_backward(&x, opts, &out, &grads, ws, plan, grad_output, stream) }
        })
    }

    /// The status word alone (`flce::cuda::CudaLoss::target_status`: the effective targets into
    /// `scratch`, N i32, then the first bad class weight or out-of-range target in `status`, one
    /// i32), on `cuda` = (device, stream); does not synchronise.
    #[pyo3(signature = (cuda, inputs, scratch, status))]
    fn cuda_target_status(
        &self,
        py: Python<'_>,
        cuda: (usize, u64),
        inputs: DevicePtrs,
        scratch: u64,
        status: u64,
    ) -> PyResult<()> {
        self.no_f64_on_cuda()?;
        let x = self.device_inputs(inputs);
        let opts = &self.opts;
        on_cuda(py, cuda, move |be, stream| {
            // SAFETY: as in cuda_forward; `scratch` and `status` are live CUDA tensors of N and one
            // int32 on `device`.
            unsafe { be.target_status(&x, opts, scratch, status, stream) }
        })
    }

    /// CPU forward on host pointers (`inputs` as for cuda_forward); returns (loss, accuracy or None).
    #[pyo3(signature = (inputs, lse, per_token_loss))]
    fn cpu_forward(
        &self,
        py: Python<'_>,
        inputs: DevicePtrs,
        lse: usize,
        per_token_loss: Option<usize>,
    ) -> PyResult<(f64, Option<f64>)> {
        let p = HostPtrs::from(inputs);
        py.detach(move || {
            // SAFETY: the Python caller passes data_ptr()s of live contiguous CPU tensors of the
            // validated shapes and dtypes.
            unsafe {
                if self.f64 {
                    return self.oracle_f64(&p, Some(lse), per_token_loss, None, None, None, None);
                }
                let r = match self.dtype {
                    DType::BF16 => self.cpu_forward_typed::<bf16>(&p, lse, per_token_loss),
                    DType::F16 => self.cpu_forward_typed::<f16>(&p, lse, per_token_loss),
                    DType::F32 => self.cpu_forward_typed::<f32>(&p, lse, per_token_loss),
                };
                r.map(|(loss, acc)| (loss as f64, acc.map(|a| a as f64)))
            }
        })
        .map_err(to_py)
    }

    /// CPU backward on host pointers (`inputs` and `grads` as for cuda_backward).
    #[pyo3(signature = (inputs, lse, grad_output, grads))]
    fn cpu_backward(
        &self,
        py: Python<'_>,
        inputs: DevicePtrs,
        lse: usize,
        grad_output: usize,
        grads: (Option<usize>, Option<usize>, Option<usize>),
    ) -> PyResult<()> {
        let p = HostPtrs::from(inputs);
        let (de, dc, dbias) = grads;
        py.detach(move || {
            // SAFETY: as in cpu_forward.
            unsafe {
                if self.f64 {
                    return self.oracle_f64(&p, None, None, Some(grad_output), de, dc, dbias).map(|_| ());
                }
                match self.dtype {
                    DType::BF16 => self.cpu_backward_typed::<bf16>(&p, lse, grad_output, de, dc, dbias),
                    DType::F16 => self.cpu_backward_typed::<f16>(&p, lse, grad_output, de, dc, dbias),
                    DType::F32 => self.cpu_backward_typed::<f32>(&p, lse, grad_output, de, dc, dbias),
                }
            }
        })
        .map_err(to_py)
    }

    fn __repr__(&self) -> String {
        format!("Problem({}, {}, {:?})", self.shape, self.dtype, self.opts)
    }
}

/// Gradients (bf16, f16 or f32 at `ptr`, `count` elements, on CUDA) times the f32 at `scale`,
/// in place, on `cuda` = (device, stream); a no-op on the device when the scale is 1.
#[pyfunction]
fn scale_gradients(
    py: Python<'_>,
    cuda: (usize, u64),
    dtype: &str,
    ptr: u64,
    count: usize,
    scale: u64,
) -> PyResult<()> {
    let dtype: DType = dtype.parse().map_err(PyTypeError::new_err)?;
    on_cuda(py, cuda, move |be, stream| {
        // SAFETY: the Python caller passes data_ptr()s of live CUDA tensors of that size.
        unsafe { be.scale_gradients(dtype, ptr, count, scale, stream) }
    })
}

/// Number of CUDA devices flce can use (0 without a driver).
#[pyfunction]
fn cuda_device_count() -> usize {
    flce::cuda::CudaLoss::device_count()
}

#[pymodule]
fn _flce(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Problem>()?;
    m.add_class::<Plan>()?;
    m.add_function(wrap_pyfunction!(cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(scale_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(memory::memory_plan, m)?)?;
    m.add_function(wrap_pyfunction!(memory::memory_suggest, m)?)?;
    vocab_parallel::register(m)?;
    cuda_vocab_parallel::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
