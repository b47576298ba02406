//! One rank's steps of the vocabulary-parallel loss on the GPU (kernels in
//! kernels/shared/vocab_parallel.cu; their CPU specification in flce-core's cpu/vocab_parallel.rs). Rank k holds rows [offset, offset + V_k) of the classifier and all N tokens:
//!
//! 1. [`CudaLoss::forward_partials_slice`]: the rank's per-token partials as f64 [N, 6] rows
//!    (max, Σexp, Σw·z, global argmax, target logit and target weight where the rank owns the
//!    target) and Σ_j w_j of its rows;
//! 2. the caller gathers every rank's rows and sums, in rank order (O(N) bytes a rank);
//! 3. [`CudaLoss::finish_ranks`]: every rank merges them the same way: lse, loss, scalars, and
//!    the merged rows the backward needs;
//! 4. [`CudaLoss::backward_slice`]: the rank's dC / db rows and its f32 share of dE, which the
//!    caller sums over the ranks (in rank order, for the same bits on every rank) and rounds once.
//!
//! Nothing synchronises; every call runs on the caller's stream.

use flce_core::cpu::vocab_parallel::VocabSlice;
use flce_core::{DType, Error, Options, Result, Shape};

use crate::abi::{
    DevPtr, ExportParams, LossConstants, PrepParams, RanksFinishParams, SliceScalesParams, SliceTargetsParams,
};
use crate::context::BoundContext;
use crate::device::{DeviceForwardOutputs, DeviceGradOutput, DeviceGrads, DeviceInputs, Stream, Workspace};
use crate::error::STATUS_OK;
use crate::launch::Call;
use crate::loss::CudaLoss;
use crate::pass::backward::de_accumulator;
use crate::plan::{BackwardPlan, DeAccumulator, ForwardPlan};

/// f64 values per token in a rank's partials.
pub const PARTIAL_FIELDS: usize = 6;

/// Where [`CudaLoss::forward_partials_slice`] writes.
#[derive(Clone, Copy, Debug)]
pub struct SlicePartials {
    /// f64 [N, 6].
    pub rows: DevPtr,
    /// f64 \[1\]: Σ_j w_j over the slice's rows (their count without class weights).
    pub class_weight_sum: DevPtr,
    /// i32 \[1\]: the first token whose target is outside the whole vocabulary, or i32::MAX.
    pub status: DevPtr,
}

/// Every rank's partials, gathered in rank order.
#[derive(Clone, Copy, Debug)]
pub struct RankPartials {
    /// f64 [ranks, N, 6].
    pub rows: DevPtr,
    /// f64 \[ranks\].
    pub class_weight_sums: DevPtr,
    pub ranks: usize,
}

/// Where [`CudaLoss::backward_slice`] keeps the class weights extended by each token's target
/// weight (when class weights are given): past the plan's workspace, 256-byte aligned.
fn extended_weights_offset(plan: &BackwardPlan) -> usize {
    plan.workspace_bytes.div_ceil(256) * 256
}

/// The workspace bytes [`CudaLoss::backward_slice`] needs with `plan` (from
/// [`crate::plan::slice_backward_plan`]): the plan's, and the extended class weights [V_k + N]
/// when class weights are given.
pub fn slice_backward_workspace_bytes(plan: &BackwardPlan, class_weights: bool) -> usize {
    let Shape { n, v, .. } = plan.shape;
    extended_weights_offset(plan) + if class_weights { 4 * (v + n) } else { 0 }
}

impl CudaLoss {
    /// Phase 1 on this rank's slice: `x` holds the slice's rows of C (and of the bias and class
    /// weights; x.shape.v = its rows) and the global targets; `plan` is this backend's forward
    /// plan for that shape.
    ///
    /// # Safety
    /// As for [`CudaLoss::forward`]; `out.rows` holds N·6 f64.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_partials_slice(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        slice: VocabSlice,
        out: &SlicePartials,
        ws: Workspace,
        plan: &ForwardPlan,
        stream: Stream,
    ) -> Result<()> {
        x.validate(opts)?;
        slice.check(x.shape.v)?;
        self.check_plan(x, plan.shape, plan.dtype, plan.family)?;
        ws.check(plan.workspace_bytes)?;
        let targets = ws.at(plan.targets);
        let call = self.call(x, opts, targets, ws, stream)?;
        let given = [("rows", Some(out.rows)), ("class_weight_sum", Some(out.class_weight_sum))];
        self.check_pointers(x.pointers().into_iter().chain(given).chain([("status", Some(out.status)), ws.pointer()]))?;
        // a target on another rank: inactive here (no statistic of this slice needs it)
        self.slice_targets(&call, slice, out.status, -1)?;
        self.family_partials(&call, plan)?;
        let export = ExportParams {
            k: call.lp.k,
            partials: ws.at(plan.partials),
            target_logit: ws.at(plan.target_logit),
            targets,
            class_w: call.lp.class_w,
            splits: plan.splits as i32,
            partials_ld: x.shape.n as i32,
            offset: slice.offset as i32,
            out: out.rows,
            class_weight_sum: out.class_weight_sum,
        };
        self.kernels.launch(x.dtype, &export, stream)?;
        Ok(())
    }

    /// Phase 3: the ranks' partials merged in rank order, then the forward's outputs over the
    /// whole vocabulary (`shape.v`), and the merged rows at `merged` (f64 [N, 6]) for
    /// [`CudaLoss::backward_slice`]. `targets` are the given i64 targets; `ws` holds 4·N bytes.
    ///
    /// # Safety
    /// Every pointer device memory of this backend's device, valid for its shape, until the work
    /// queued on `stream` has finished.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn finish_ranks(
        &self,
        shape: Shape,
        opts: &Options,
        targets: DevPtr,
        parts: &RankPartials,
        out: &DeviceForwardOutputs,
        merged: DevPtr,
        ws: Workspace,
        stream: Stream,
    ) -> Result<()> {
        shape.validate_with(opts)?;
        out.check(shape.n, opts)?;
        if parts.ranks == 0 || parts.ranks > i32::MAX as usize {
            return Err(Error::invalid_option("ranks", parts.ranks, "must be at least 1"));
        }
        ws.check(4 * shape.n)?;
        let _bound = BoundContext::bind(self.context())?;
        let given = [("targets", Some(targets)), ("parts.rows", Some(parts.rows)), ("merged", Some(merged))];
        let sums = [("parts.class_weight_sums", Some(parts.class_weight_sums)), ws.pointer()];
        self.check_pointers(given.into_iter().chain(sums).chain(out.pointers()))?;
        let k = LossConstants::new(shape, opts);
        let prepared = ws.ptr;
        // the kernels of both files read no input data: one module serves every dtype
        self.kernels.fill_i32(out.status, STATUS_OK, 1, stream)?;
        self.kernels.launch(DType::F32, &PrepParams { k, targets, out: prepared, status: out.status }, stream)?;
        let finish = RanksFinishParams {
            k,
            parts: parts.rows,
            class_weight_sums: parts.class_weight_sums,
            ranks: parts.ranks as i32,
            targets: prepared,
            lse: out.lse,
            per_token_loss: out.per_token_loss.unwrap_or(0),
            out_scalars: out.scalars,
            merged,
        };
        self.kernels.launch(DType::F32, &finish, stream)?;
        Ok(())
    }

    /// Phase 4 on this rank's slice, from the whole vocabulary's `lse`, the merged rows and the
    /// ranks' Σ w_j: dC and db of the slice's rows, and dE's f32 share at `grads.de` (f32 [N, D],
    /// not rounded). `plan` from [`crate::plan::slice_backward_plan`]; `ws` holds its workspace
    /// of [`slice_backward_workspace_bytes`].
    ///
    /// # Safety
    /// As for [`CudaLoss::backward`]; `merged` from [`CudaLoss::finish_ranks`] of this step.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn backward_slice(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        slice: VocabSlice,
        lse: DevPtr,
        merged: DevPtr,
        parts: &RankPartials,
        grad_output: DeviceGradOutput,
        grads: &DeviceGrads,
        ws: Workspace,
        plan: &BackwardPlan,
        stream: Stream,
    ) -> Result<()> {
        slice.check(x.shape.v)?;
        if !self.check_backward(x, opts, &grad_output, grads, plan)? {
            return Ok(());
        }
        if !matches!(plan.de_acc, DeAccumulator::InPlace | DeAccumulator::NotWanted) || plan.dc_tail().is_some() {
            return Err(Error::InvalidOption {
                name: "plan",
                value: format!("{:?}", plan.de_acc),
                reason: "a slice's backward takes a plan from slice_backward_plan (dE's f32 share in place)",
            });
        }
        ws.check(slice_backward_workspace_bytes(plan, x.class_weights.is_some()))?;
        let de_acc = de_accumulator(plan, grads, &ws)?;
        let targets = ws.at(plan.targets);
        let mut call = self.call(x, opts, targets, ws, stream)?;
        let given =
            [("lse", Some(lse)), ("merged", Some(merged)), ("parts.class_weight_sums", Some(parts.class_weight_sums))];
        let more = [("grad_output", Some(grad_output.ptr())), ws.pointer()];
        self.check_pointers(x.pointers().into_iter().chain(grads.pointers()).chain(given).chain(more))?;
        // a target on another rank: an index past the slice (no column is it) whose extended
        // class weight is the token's own
        self.slice_targets(&call, slice, ws.at(plan.status), x.shape.v as i32)?;
        let ext = x.class_weights.map(|_| ws.ptr + extended_weights_offset(plan) as u64);
        let scales = SliceScalesParams {
            k: call.lp.k,
            targets,
            merged,
            class_weight_sums: parts.class_weight_sums,
            ranks: parts.ranks as i32,
            v_slice: x.shape.v as i32,
            class_w: x.class_weights.unwrap_or(0),
            class_w_ext: ext.unwrap_or(0),
            grad_output: grad_output.ptr(),
            token_scale: ws.at(plan.token_scale),
            scalars: ws.at(plan.scalars),
        };
        self.kernels.launch(x.dtype, &scales, stream)?;
        // the gradient kernels see the whole vocabulary's size (label smoothing's ε/V) and every
        // token's target weight through the extended class weights; their columns stay the slice's
        call.lp.k.v = slice.total as i32;
        if let Some(e) = ext {
            call.lp.class_w = e;
        }
        self.passes(&call, plan, grads, de_acc, lse)
    }

    /// The slice's effective targets (see flce_slice_targets) into the call's target buffer,
    /// the status word reset first. `elsewhere_base` < 0: a target on another rank is inactive.
    pub(crate) unsafe fn slice_targets(
        &self,
        call: &Call<'_>,
        slice: VocabSlice,
        status: DevPtr,
        elsewhere_base: i32,
    ) -> Result<()> {
        self.kernels.fill_i32(status, STATUS_OK, 1, call.stream)?;
        let p = SliceTargetsParams {
            k: call.lp.k,
            targets: call.x.targets,
            out: call.lp.targets,
            status,
            offset: slice.offset as i32,
            total: slice.total as i32,
            elsewhere_base,
        };
        self.kernels.launch(call.x.dtype, &p, call.stream)?;
        Ok(())
    }
}
