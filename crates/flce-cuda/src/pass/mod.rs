//! The pass drivers: each a set of [`crate::CudaLoss`] methods that run one plan kind's work list
//! on the caller's stream — the recomputing forward and backward, the three-product pass, and the
//! vocabulary-slice pass (three products over the classifier's first rows, the backward's four over
//! the rest). They launch through the plan's kernel family ([`crate::family`]) and never plan.

pub(crate) mod backward;
mod backward_steps;
pub(crate) mod forward;
pub(crate) mod three_product;
mod vocab_slice;

use flce_core::{Options, Result};

use crate::abi::DevPtr;
use crate::device::{DeviceForwardOutputs, DeviceGrads, DeviceInputs, Stream, Workspace};
use crate::loss::CudaLoss;
use crate::plan::ForwardBackwardPlan;

impl CudaLoss {
    /// [`CudaLoss::forward_backward_three_product`] or [`CudaLoss::forward_backward_vocab_slice`], as `plan` is.
    ///
    /// # Safety
    /// As for [`CudaLoss::forward_backward_three_product`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_backward(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        out: &DeviceForwardOutputs,
        grads: &DeviceGrads,
        ws: Workspace,
        plan: &ForwardBackwardPlan,
        grad_output: Option<DevPtr>,
        stream: Stream,
    ) -> Result<()> {
        match plan {
            ForwardBackwardPlan::ThreeProduct(p) => {
                self.forward_backward_three_product(x, opts, out, grads, ws, p, grad_output, stream)
            }
            ForwardBackwardPlan::VocabSlice(p) => {
                self.forward_backward_vocab_slice(x, opts, out, grads, ws, p, grad_output, stream)
            }
        }
    }
}
