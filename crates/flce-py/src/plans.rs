//! The CUDA plans as Python sees them: one `Plan` class over the forward, backward and
//! three-product plans, made once per call shape by `Problem` and handed back with every call.

use flce::cuda::{BackwardConfig, ForwardBackwardPlan, ForwardConfig};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub(crate) fn forward_config(mode: &str, budget: Option<usize>) -> PyResult<ForwardConfig> {
    Ok(ForwardConfig { budget, mode: mode.parse().map_err(PyValueError::new_err)? })
}

pub(crate) fn backward_config(mode: &str, budget: Option<usize>) -> PyResult<BackwardConfig> {
    Ok(BackwardConfig { budget, mode: mode.parse().map_err(PyValueError::new_err)? })
}

/// A CUDA plan for one call shape on one device: a forward plan, or a backward plan for a set of
/// wanted gradients (see `flce::cuda::{ForwardPlan, BackwardPlan}`). Made once per shape by the
/// Python side and handed back with every call.
#[pyclass(frozen, module = "flce._flce")]
pub struct Plan {
    pub(crate) device: usize,
    pub(crate) plan: PlanKind,
}

// (made once per call shape and kept: the variants' sizes do not matter)
#[allow(clippy::large_enum_variant)]
pub(crate) enum PlanKind {
    Forward(flce::cuda::ForwardPlan),
    Backward(flce::cuda::BackwardPlan),
    /// Forward and gradients at once: the three-product pass, or the vocabulary-slice pass.
    ForwardBackward(flce::cuda::ForwardBackwardPlan),
}

impl Plan {
    pub(crate) fn forward(&self, device: usize) -> PyResult<&flce::cuda::ForwardPlan> {
        self.check_device(device)?;
        match &self.plan {
            PlanKind::Forward(p) => Ok(p),
            _ => Err(PyValueError::new_err(format!("a {} plan was given to the forward", self.kind()))),
        }
    }
    pub(crate) fn backward(&self, device: usize) -> PyResult<&flce::cuda::BackwardPlan> {
        self.check_device(device)?;
        match &self.plan {
            PlanKind::Backward(p) => Ok(p),
            _ => Err(PyValueError::new_err(format!("a {} plan was given to the backward", self.kind()))),
        }
    }
    pub(crate) fn forward_backward(&self, device: usize) -> PyResult<&flce::cuda::ForwardBackwardPlan> {
        self.check_device(device)?;
        match &self.plan {
            PlanKind::ForwardBackward(p) => Ok(p),
            _ => Err(PyValueError::new_err(format!(
                "a {} plan was given to the forward-and-gradients pass",
                self.kind()
            ))),
        }
    }
    fn check_device(&self, device: usize) -> PyResult<()> {
        if device != self.device {
            return Err(PyValueError::new_err(format!(
                "the plan was made for CUDA device {}, not {device}",
                self.device
            )));
        }
        Ok(())
    }
}

#[pymethods]
impl Plan {
    /// "forward", "backward", "three_product" (the three-product pass) or "vocab_slice" (the
    /// vocabulary-slice pass: three products for the classifier's first rows, four for the rest).
    #[getter]
    fn kind(&self) -> &'static str {
        match &self.plan {
            PlanKind::Forward(_) => "forward",
            PlanKind::Backward(_) => "backward",
            PlanKind::ForwardBackward(p) => p.kind(),
        }
    }
    /// Bytes of workspace the call needs.
    #[getter]
    fn workspace_bytes(&self) -> usize {
        match &self.plan {
            PlanKind::Forward(p) => p.workspace_bytes,
            PlanKind::Backward(p) => p.workspace_bytes,
            PlanKind::ForwardBackward(p) => p.workspace_bytes(),
        }
    }
    /// Whether the pass keeps lse itself, so that a caller that will not read lse can give None
    /// for it: the three-product pass of one token chunk with its state in dC's buffer
    /// (`flce::cuda::plan::ThreeProductPlan::lse`; 4·N bytes fewer at the pass's peak).
    #[getter]
    fn keeps_lse(&self) -> bool {
        matches!(&self.plan, PlanKind::ForwardBackward(ForwardBackwardPlan::ThreeProduct(p)) if p.lse.is_some())
    }
    /// Whether the pass keeps its status word itself, so that a caller that will not read it
    /// (one that checked the targets ahead of the call) can give None for it: the same plans as
    /// `keeps_lse` (`flce::cuda::plan::ThreeProductPlan::status`; PyTorch's 512-byte block for the word
    /// not held at the pass's peak).
    #[getter]
    fn keeps_status(&self) -> bool {
        matches!(&self.plan, PlanKind::ForwardBackward(ForwardBackwardPlan::ThreeProduct(p)) if p.status.is_some())
    }
    /// Vocabulary columns per K-chunk of the three-product pass's dE, summed in f32 before one
    /// rounding (`flce::cuda::plan::with_de_k_chunks`: f16's default where V is longer), or None
    /// for one product over V and for every other plan.
    #[getter]
    fn de_k_chunk(&self) -> Option<usize> {
        match &self.plan {
            PlanKind::ForwardBackward(ForwardBackwardPlan::ThreeProduct(p)) => p.de_k_chunks.map(|k| k.columns),
            _ => None,
        }
    }
    /// The kernel family that runs it ("cublas", "sm80" or "sm90").
    #[getter]
    fn family(&self) -> &'static str {
        match &self.plan {
            PlanKind::Forward(p) => p.family.name(),
            PlanKind::Backward(p) => p.family.name(),
            PlanKind::ForwardBackward(ForwardBackwardPlan::ThreeProduct(p)) => p.storage.family().name(),
            PlanKind::ForwardBackward(ForwardBackwardPlan::VocabSlice(_)) => flce::cuda::Family::Sm90.name(),
        }
    }
    /// (token chunk, vocabulary chunk) of a backward plan; (N, vocabulary chunk) of a forward
    /// one; (token chunk, V) of a three-product one; (N, the head's rows) of a slice one.
    #[getter]
    fn chunks(&self) -> (usize, usize) {
        match &self.plan {
            PlanKind::Forward(p) => (p.shape.n, p.vocab_chunk),
            PlanKind::Backward(p) => (p.token_chunk, p.vocab_chunk),
            PlanKind::ForwardBackward(ForwardBackwardPlan::ThreeProduct(p)) => (p.token_chunk, p.shape.v),
            PlanKind::ForwardBackward(ForwardBackwardPlan::VocabSlice(p)) => (p.shape.n, p.head_rows),
        }
    }
    fn __repr__(&self) -> String {
        match &self.plan {
            PlanKind::Forward(p) => format!("Plan(device {}, {p:?})", self.device),
            PlanKind::Backward(p) => format!("Plan(device {}, {p:?})", self.device),
            PlanKind::ForwardBackward(p) => format!("Plan(device {}, {p:?})", self.device),
        }
    }
}
