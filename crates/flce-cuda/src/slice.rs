//! The vocabulary-slice pass ([`crate::plan::SlicePlan`]): loss and gradients in one call, the
//! classifier's first rows with three products over all tokens (their logits kept as the compact
//! forward's f16 q), the rest with the default's four. Gradients come out for grad_output = 1, as
//! the three-product pass's ([`CudaLoss::scale_gradients`] applies the real one). Never
//! synchronises the stream.
//!
//! Order on the stream (plan/slice.rs says why each piece lives where it does):
//! 1. the whole call's effective targets and status word (in the rest's backward regions); the
//!    head's compact forward over C's first rows (q, per-tile maxima, its splits' partials, the
//!    target logits it holds); the rest's effective targets (its rows only) and its sm90 forward
//!    (its splits' partials after the head's, the target logits it holds);
//! 2. the forward's finish over both halves' splits in order (the rest's argmax offset by
//!    head_rows): lse, the loss, the scalars;
//! 3. the token scales for grad_output 1 (in the rest's backward regions);
//! 4. the head's G in place over q (flce_grad_from_compact over columns [0, head_rows) of the
//!    whole call: its targets, smoothing's ε/V and class weights), db's head columns, dC's head
//!    rows = Gᵀ·E (one product over every token, rounded once), dE's accumulator = G·C\[head\];
//! 5. the rest's backward passes from head_rows on (their first dE product adds to the head's
//!    share), dE and db rounded once; where dE's accumulator lives in dC's head rows
//!    ([`DeAccumulator::DcHead`]), the head's dC product runs only now, over it.

use flce_core::cpu::phases::VocabSlice;
use flce_core::{Error, Options, Result, Shape};

use crate::abi::{CompactGradParams, DbReduceParams, DevPtr, GradChunk};
use crate::backward::de_accumulator;
use crate::blas::{Alpha, Elem, Gemm, Mat};
use crate::device::{DeviceForwardOutputs, DeviceGrads, DeviceInputs, Stream, Workspace};
use crate::family::{BackwardMode, Family};
use crate::forward::Partials;
use crate::loss::{BackwardConfig, CudaLoss, ForwardConfig};
use crate::plan::{self, DeAccumulator, MrefPlace, SlicePlan, SliceRest, TradePlan, Wanted};

impl CudaLoss {
    /// Forward and backward at once with a vocabulary-slice plan (made by
    /// [`CudaLoss::slice_plan`] or [`crate::plan::slice_plan`] for this shape, dtype and these
    /// gradients): the forward's outputs, and dE, dC, db (as `plan.wanted` says) for
    /// grad_output = 1, or for the f32 at `grad_output` (as [`CudaLoss::forward_backward`]).
    ///
    /// dE's buffer is scratch until the end where the head's plan keeps its per-tile maxima in
    /// dE's rows ([`MrefPlace::DeRows`]). Reduction "none" gives the gradients of the sum (every
    /// token's grad_output 1).
    ///
    /// # Safety
    /// As for [`CudaLoss::forward_backward`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_backward_sliced(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        out: &DeviceForwardOutputs,
        grads: &DeviceGrads,
        ws: Workspace,
        plan: &SlicePlan,
        grad_output: Option<DevPtr>,
        stream: Stream,
    ) -> Result<()> {
        x.validate(opts)?;
        out.check(x.shape.n, opts)?;
        self.check_plan(x, plan.shape, plan.dtype, Family::Sm90)?;
        if !crate::loss::compact_logits_hold(opts) {
            return Err(Error::InvalidOption {
                name: "plan",
                value: "vocabulary slice".into(),
                reason: "its head's compact logits hold no softcap with label smoothing: take another plan",
            });
        }
        if !x.rows_aligned() {
            return Err(Error::Unsupported("the vocabulary-slice plan needs 16-byte aligned rows of E and C".into()));
        }
        grads.check_plan(plan.wanted)?;
        ws.check(plan.workspace_bytes)?;
        if plan.rest_forward.sm90_grid.is_none() || plan.head.forward_grid.is_none() {
            return Err(Error::InvalidOption {
                name: "plan",
                value: "vocabulary slice".into(),
                reason: "both halves' forwards must be the sm90 family's (plan::slice_plan makes them so)",
            });
        }
        crate::step::check_maxima_in_de(&plan.head, grads)?;
        let (hws, rws) = (ws.sub(plan.head_ws), ws.sub(plan.rest_ws));
        let de_acc = de_accumulator(&plan.rest, grads, &rws)?;
        let targets = rws.at(plan.rest.targets);
        let call = self.call(x, opts, targets, rws, stream)?;
        let given =
            out.pointers().into_iter().chain(grads.pointers()).chain([ws.pointer(), ("grad_output", grad_output)]);
        self.check_pointers(x.pointers().into_iter().chain(given))?;

        let Shape { n, d, v } = x.shape;
        let head_rows = plan.head_rows;
        let s = x.dtype.size_in_bytes() as u64;
        let (partials, target_logit) = (ws.at(plan.partials), ws.at(plan.target_logit));
        let m_ref = match plan.head.m_ref {
            Some(MrefPlace::Workspace(r)) => hws.at(r),
            Some(MrefPlace::DeRows) => grads.de.unwrap_or(0),
            None => 0,
        };

        // 1. the whole call's effective targets and status word (class weights checked too)
        self.prep_targets(x, call.lp.k, targets, out.status, stream)?;
        // the head: its rows of C (and of the bias and class weights) with the call's targets (a
        // target past the head matches none of its columns): its splits first
        let head_x = DeviceInputs { shape: Shape { v: head_rows, ..x.shape }, ..*x };
        let head_call = self.call(&head_x, opts, targets, hws, stream)?;
        let outputs = (partials, target_logit);
        crate::family::sm90::forward_compact(&head_call, &plan.head, 0..n, head_call.lp, m_ref, outputs)?;
        drop(head_call);
        // the rest: rows [head_rows, V) with their own effective targets (a target in the head is
        // inactive there), its splits after the head's
        let offset = |p: Option<u64>, elem: u64| p.map(|p| p + head_rows as u64 * elem);
        let rest_x = DeviceInputs {
            shape: Shape { v: v - head_rows, ..x.shape },
            c: x.c + (head_rows * d) as u64 * s,
            bias: offset(x.bias, s),
            class_weights: offset(x.class_weights, 4),
            ..*x
        };
        let rfws = ws.sub(plan.rest_forward_ws);
        let rest_call = self.call(&rest_x, opts, rfws.at(plan.rest_forward.targets), rfws, stream)?;
        let rest_slice = VocabSlice { offset: head_rows, total: v };
        self.slice_targets(&rest_call, rest_slice, ws.at(plan.slice_status), -1)?;
        let rest_partials = partials + 16 * (n * plan.head.stats_splits) as u64;
        crate::family::sm90::forward_partials_into(&rest_call, &plan.rest_forward, (rest_partials, target_logit))?;
        drop(rest_call);

        // 2. both halves' splits merged in order: lse, loss, scalars
        let splits = plan.head.stats_splits + plan.rest_forward.splits;
        let all = Partials {
            offset_split: plan.head.stats_splits,
            argmax_offset: head_rows,
            ..Partials::new(partials, target_logit, splits)
        };
        self.finish(&call, all, ws.at(plan.finish_sums), out)?;

        // 3. the token scales for grad_output 1 (or the caller's)
        let (token_scale, scalars) = (rws.at(plan.rest.token_scale), rws.at(plan.rest.scalars));
        let unit = (grad_output, ws.at(plan.unit_grad));
        self.unit_token_scales(&call, opts, targets, unit, (token_scale, scalars))?;

        // 4. the head's G over q, then its products
        let (q, ldg) = (hws.at(plan.head.logits), plan.head.ldg);
        let db_partial = plan.head.db_partial.map_or(0, |r| hws.at(r));
        let chunk = GradChunk {
            lse: out.lse,
            token_scale,
            scalars,
            n0: 0,
            n_end: n as i32,
            v0: 0,
            v_end: head_rows as i32,
            g_out: q,
            ldg: ldg as i32,
            db_partial,
        };
        let grad =
            CompactGradParams { lp: call.lp, chunk, q, m_ref, ld_mref: plan.head.mref_ld() as i32, target_logit };
        self.kernels.launch(x.dtype, &grad, stream)?;
        if let (Some(_), Some(acc)) = (grads.dbias, plan.rest.db_acc) {
            let reduce = DbReduceParams {
                db_partial,
                row_tiles: n.div_ceil(crate::geometry::TILE_M) as i32,
                ldb: ldg as i32,
                count: head_rows as i32,
                accumulate: 0,
                db_acc: rws.at(acc),
                alpha: crate::geometry::scalar_word(scalars, crate::geometry::SCALAR_ALPHA),
            };
            self.kernels.launch(x.dtype, &reduce, stream)?;
        }
        let input = Elem::Input(x.dtype);
        let alpha = Alpha::Scalars(scalars);
        // dC[head] = Gᵀ·E over every token, rounded once; column-major (D × head) = E(D × N) · Gᵀ
        let head_dc = |dc: u64| {
            let (a, b) = (Mat::new(x.e, input, d), Mat::new(q, input, ldg).t());
            Gemm { m: d, n: head_rows, k: n, a, b, alpha, beta: 0.0, out: Mat::new(dc, input, d) }
        };
        // (with dE's accumulator in dC's head rows, their product runs last, over the dead accumulator)
        let dc_last = plan.rest.de_acc == DeAccumulator::DcHead;
        let blas = self.blas.bind(stream)?;
        if let (Some(dc), false) = (grads.dc, dc_last) {
            head_dc(dc).run(&blas)?;
        }
        if let Some(acc) = de_acc {
            // dE's accumulator = G·C[head]; column-major (D × N) = C(D × head) · G
            let (a, b) = (Mat::new(x.c, input, d), Mat::new(q, input, ldg));
            // (into the f32 accumulator without α: the rest's passes round it with α)
            let out = Mat::new(acc, Elem::F32, d);
            Gemm { m: d, n, k: head_rows, a, b, alpha: Alpha::One, beta: 0.0, out }.run(&blas)?;
        }
        drop(blas);

        // 5. the rest's backward: its chunks add to dE's accumulator; dE and db rounded once
        self.passes(&call, &plan.rest, grads, de_acc, out.lse)?;
        if let (Some(dc), true) = (grads.dc, dc_last) {
            head_dc(dc).run(&self.blas.bind(stream)?)?;
        }
        Ok(())
    }
}

impl CudaLoss {
    /// The vocabulary-slice plan of a call within `budget` bytes of workspace (its head the
    /// largest that fits), or None where it does not apply (`plan::slice_plan_applies`: compact
    /// logits for these options, dC wanted) or no head worth it fits. The rest's vocabulary chunk
    /// is at most the default backward plan's.
    pub fn slice_plan(
        &self,
        shape: Shape,
        dtype: flce_core::DType,
        opts: &Options,
        wanted: Wanted,
        budget: usize,
    ) -> Result<Option<SlicePlan>> {
        let storage = self.step_logits(shape, dtype, opts);
        if !plan::slice_plan_applies(shape, dtype, wanted, storage) {
            return Ok(None);
        }
        let fused = crate::family::fused_family(self.arch(), shape, dtype);
        let mode = BackwardMode::Auto.resolve(fused);
        let default = self.backward_plan(shape, dtype, wanted, BackwardConfig::default())?;
        let rest = SliceRest {
            mode,
            family: mode.family(fused),
            sm_count: self.sm_count(),
            vocab_chunk: default.vocab_chunk,
            dc_scratch: crate::knobs::slice_dc_scratch_knob(),
            de_in_dc: crate::knobs::slice_de_in_dc_knob(),
        };
        let forward_plan = |s: Shape| self.forward_plan(s, dtype, ForwardConfig::default());
        let share = crate::knobs::slice_min_share();
        Ok(plan::slice_plan(shape, dtype, wanted, budget, storage, rest, share, &forward_plan))
    }

    /// The plan a call that trades workspace for speed takes within `budget` bytes: the
    /// three-product pass where a token chunk that pays fits (`plan::step_plan_if_faster`), else
    /// the vocabulary-slice pass where a head fits ([`CudaLoss::slice_plan`]; not with
    /// `FLCE_SLICE_PLAN=0`), else None (the default recomputing plans within the budget).
    ///
    /// None for f16 inputs: both passes round the gradients in the forward for grad_output 1 and
    /// scale them in the backward, and a mean's gradients at grad_output 1 are mostly f16
    /// subnormals (dE over 8k tokens), so AMP's loss scale came too late — dE 9.2e-3 against the
    /// recomputing path's 2.6e-4 at Gemma 2 with grad_output 2¹⁶ (docs/perf-notes.md v54). A
    /// caller that knows the grad_output its backward will bring takes
    /// [`CudaLoss::trade_plan_for_known_grad_output`] instead.
    pub fn trade_plan(
        &self,
        shape: Shape,
        dtype: flce_core::DType,
        opts: &Options,
        wanted: Wanted,
        budget: usize,
    ) -> Result<Option<TradePlan>> {
        if dtype == flce_core::DType::F16 {
            return Ok(None);
        }
        self.trade_plan_for_known_grad_output(shape, dtype, opts, wanted, budget)
    }

    /// [`CudaLoss::trade_plan`] for a caller that gives the pass the grad_output its backward will
    /// bring (the f32 at `grad_output` of [`CudaLoss::forward_backward_trade`], AMP's loss scale
    /// included): the forward then rounds the gradients once at their final scale, as the
    /// recomputing plans do, so f16 inputs trade too (docs/perf-notes.md v57). A grad_output
    /// other than the one given costs a second rounding, and for f16 a given one far below the
    /// real scale (a loss scale left out) the subnormals of v54.
    pub fn trade_plan_for_known_grad_output(
        &self,
        shape: Shape,
        dtype: flce_core::DType,
        opts: &Options,
        wanted: Wanted,
        budget: usize,
    ) -> Result<Option<TradePlan>> {
        let storage = self.step_logits(shape, dtype, opts);
        let max_tokens = crate::geometry::step_max_tokens(shape.n);
        if let Some(p) = plan::step_plan_if_faster(shape, dtype, wanted, budget, storage, max_tokens) {
            // (dE in K-chunks summed in f32 where the dtype's default or the knob asks and the
            // budget holds its accumulator: plan::with_de_k_chunks; without it f16's dE is
            // 1.15–1.5× the recomputing plans' error)
            let p = match crate::knobs::step_de_k_chunk(dtype).map(|k| plan::with_de_k_chunks(p.clone(), k)) {
                Some(k) if k.workspace_bytes <= budget => k,
                _ => p,
            };
            return Ok(Some(TradePlan::Step(p)));
        }
        if !crate::knobs::slice_plan_enabled() {
            return Ok(None);
        }
        Ok(self.slice_plan(shape, dtype, opts, wanted, budget)?.map(TradePlan::Slice))
    }

    /// [`CudaLoss::forward_backward`] or [`CudaLoss::forward_backward_sliced`], as `plan` is.
    ///
    /// # Safety
    /// As for [`CudaLoss::forward_backward`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_backward_trade(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        out: &DeviceForwardOutputs,
        grads: &DeviceGrads,
        ws: Workspace,
        plan: &TradePlan,
        grad_output: Option<DevPtr>,
        stream: Stream,
    ) -> Result<()> {
        match plan {
            TradePlan::Step(p) => self.forward_backward(x, opts, out, grads, ws, p, grad_output, stream),
            TradePlan::Slice(p) => self.forward_backward_sliced(x, opts, out, grads, ws, p, grad_output, stream),
        }
    }
}
