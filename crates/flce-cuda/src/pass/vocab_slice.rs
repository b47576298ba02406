//! The vocabulary-slice pass ([`crate::plan::VocabSlicePlan`]): loss and gradients in one call, the
//! classifier's first rows with three products over all tokens (their logits kept as the compact
//! forward's f16 q), the rest with the default's four. Gradients come out for grad_output = 1, as
//! the three-product pass's ([`CudaLoss::scale_gradients`] applies the real one). Never
//! synchronises the stream.
//!
//! Order on the stream (plan/vocab_slice/ says why each piece lives where it does):
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

use flce_core::cpu::vocab_parallel::VocabSlice;
use flce_core::{Error, Options, Result, Shape};

use crate::abi::{CompactGradParams, DbReduceParams, DevPtr, GradChunk};
use crate::blas::{Alpha, Elem, Gemm, Mat};
use crate::device::{DeviceForwardOutputs, DeviceGrads, DeviceInputs, Stream, Workspace};
use crate::loss::CudaLoss;
use crate::modes::Family;
use crate::pass::backward::de_accumulator;
use crate::pass::forward::Partials;
use crate::plan::{DeAccumulator, MrefPlace, VocabSlicePlan};

impl CudaLoss {
    /// Forward and backward at once with a vocabulary-slice plan (made by
    /// [`CudaLoss::vocab_slice_plan`] or [`crate::plan::vocab_slice_plan`] for this shape, dtype and these
    /// gradients): the forward's outputs, and dE, dC, db (as `plan.wanted` says) for
    /// grad_output = 1, or for the f32 at `grad_output` (as [`CudaLoss::forward_backward_three_product`]).
    ///
    /// dE's buffer is scratch until the end where the head's plan keeps its per-tile maxima in
    /// dE's rows ([`MrefPlace::DeRows`]). Reduction "none" gives the gradients of the sum (every
    /// token's grad_output 1).
    ///
    /// # Safety
    /// As for [`CudaLoss::forward_backward_three_product`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_backward_vocab_slice(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        out: &DeviceForwardOutputs,
        grads: &DeviceGrads,
        ws: Workspace,
        plan: &VocabSlicePlan,
        grad_output: Option<DevPtr>,
        stream: Stream,
    ) -> Result<()> {
        x.validate(opts)?;
        out.check(x.shape.n, opts)?;
        self.check_plan(x, plan.shape, plan.dtype, Family::Sm90)?;
        if !crate::planning::compact_logits_hold(opts) {
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
                reason: "both halves' forwards must be the sm90 family's (plan::vocab_slice_plan makes them so)",
            });
        }
        crate::pass::three_product::check_maxima_in_de(&plan.head, grads)?;
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
