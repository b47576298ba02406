//! One forward + backward set up on the GPU through the device-pointer API, as a training loop
//! would: outputs, gradients and both workspaces allocated once from the plans, then
//! [`GpuCall::forward`] / [`GpuCall::backward`] as often as wanted. Shared by `flce demo` and
//! `flce bench`.

use flce::cuda::{
    BackwardConfig, BackwardPlan, CudaLoss, DeviceBuffer, DeviceForwardOutputs, DeviceGradOutput, DeviceGrads,
    ForwardBackwardPlan, ForwardConfig, ForwardPlan, Stream, UploadedInputs,
};
use flce::{Element, Options, Result};

pub struct GpuCall<'a> {
    be: &'a CudaLoss,
    up: &'a UploadedInputs,
    opts: &'a Options,
    lse: DeviceBuffer,
    out: DeviceForwardOutputs,
    grads: DeviceGrads,
    go: DeviceBuffer,
    pub fplan: ForwardPlan,
    pub bplan: BackwardPlan,
    pub fws: DeviceBuffer,
    pub bws: DeviceBuffer,
    /// The plan that computes forward and gradients at once (three-product or vocabulary-slice)
    /// and its workspace, when asked for.
    pub forward_backward: Option<(ForwardBackwardPlan, DeviceBuffer)>,
    // owned buffers behind `out` and `grads`
    _outputs: Vec<DeviceBuffer>,
}

impl<'a> GpuCall<'a> {
    /// Buffers and plans for `up` (dE wanted, dC if `want_dc`; grad_output 1).
    pub fn new<T: Element>(
        be: &'a CudaLoss,
        up: &'a UploadedInputs,
        opts: &'a Options,
        fconfig: ForwardConfig,
        bconfig: BackwardConfig,
        want_dc: bool,
    ) -> Result<Self> {
        let s = up.inputs.shape;
        let es = std::mem::size_of::<T>();
        let lse = DeviceBuffer::new(4 * s.n)?;
        let (scalars, status) = (DeviceBuffer::new(16)?, DeviceBuffer::new(4)?);
        let de = DeviceBuffer::new(s.n * s.d * es)?;
        let dc = DeviceBuffer::new(if want_dc { s.v * s.d * es } else { 0 })?;
        let out =
            DeviceForwardOutputs { lse: lse.ptr(), per_token_loss: None, scalars: scalars.ptr(), status: status.ptr() };
        let grads = DeviceGrads { de: Some(de.ptr()), dc: want_dc.then(|| dc.ptr()), dbias: None };
        let fplan = be.forward_plan(s, T::DTYPE, fconfig);
        let bplan = be.backward_plan(s, T::DTYPE, grads.wanted(), bconfig)?;
        let fws = DeviceBuffer::new(fplan.workspace_bytes)?;
        let bws = DeviceBuffer::new(bplan.workspace_bytes)?;
        let go = DeviceBuffer::from_slice(&[1.0f32])?;
        Ok(GpuCall {
            be,
            up,
            opts,
            lse,
            out,
            grads,
            go,
            fplan,
            bplan,
            fws,
            bws,
            forward_backward: None,
            _outputs: vec![scalars, status, de, dc],
        })
    }

    /// Also set up the pass that computes forward and gradients at once within `budget` bytes of
    /// workspace: the plan a trading call takes (`CudaLoss::forward_backward_plan`: the three-product pass
    /// where a chunk that pays fits, else the vocabulary-slice pass), or where neither does (and
    /// for f16, which forward_backward_plan leaves to the recomputing plans), the three-product pass with the
    /// largest chunk that fits.
    pub fn with_forward_backward<T: Element>(mut self, budget: usize) -> Result<Self> {
        let (shape, wanted) = (self.up.inputs.shape, self.grads.wanted());
        let plan = match self.be.forward_backward_plan(shape, T::DTYPE, self.opts, wanted, budget)? {
            Some(p) => p,
            None => {
                let storage = self.be.three_product_logits(shape, T::DTYPE, self.opts);
                let max_tokens = self.be.three_product_max_tokens(shape.n);
                ForwardBackwardPlan::ThreeProduct(flce::cuda::plan::three_product_plan_capped(
                    shape,
                    T::DTYPE,
                    wanted,
                    budget,
                    storage,
                    max_tokens,
                )?)
            }
        };
        let ws = DeviceBuffer::new(plan.workspace_bytes())?;
        self.forward_backward = Some((plan, ws));
        Ok(self)
    }

    /// The forward and the gradients at once (the `with_forward_backward` plan) on the default stream.
    pub fn forward_backward(&self) -> Result<()> {
        let none = || flce::Error::Unsupported("no forward-and-gradients plan set up".into());
        let (plan, ws) = self.forward_backward.as_ref().ok_or_else(none)?;
        let stream: Stream = std::ptr::null_mut();
        // SAFETY: as in forward.
        unsafe {
            self.be.forward_backward(
                &self.up.inputs,
                self.opts,
                &self.out,
                &self.grads,
                ws.workspace(),
                plan,
                None,
                stream,
            )
        }
    }

    /// The forward on the default stream (not synchronised).
    pub fn forward(&self) -> Result<()> {
        let stream: Stream = std::ptr::null_mut();
        // SAFETY: every buffer is owned by self, live and sized for the shape and plan.
        unsafe { self.be.forward(&self.up.inputs, self.opts, &self.out, self.fws.workspace(), &self.fplan, stream) }
    }

    /// The backward from the last forward's lse on the default stream (not synchronised).
    pub fn backward(&self) -> Result<()> {
        let stream: Stream = std::ptr::null_mut();
        let go = DeviceGradOutput::Scalar(self.go.ptr());
        let (x, ws) = (&self.up.inputs, self.bws.workspace());
        // SAFETY: as in forward.
        unsafe { self.be.backward(x, self.opts, self.lse.ptr(), go, &self.grads, ws, &self.bplan, stream) }
    }
}
