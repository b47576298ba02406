//! The three-product pass ([`crate::plan::ThreeProductPlan`]): loss and gradients in one pass over token
//! chunks, with each chunk's logits over the whole vocabulary kept in f32 (cuBLAS family) or, on
//! Hopper, in the sm90 forward's compact f16 form ([`crate::plan::ThreeProductLogits`]).
//! Gradients come out for grad_output = 1; scale them by the real grad_output afterwards
//! ([`CudaLoss::scale_gradients`], exact when it is 1). Never synchronises the stream.

use flce_core::{Options, Reduction, Result};

use crate::abi::{
    CompactGradParams, DbReduceParams, DevPtr, GradChunk, GradLogitsParams, LossConstants, ScaleParams, StatsParams,
};
use crate::blas::{Alpha, Elem, Gemm, Mat};
use crate::device::{DeviceForwardOutputs, DeviceGrads, DeviceInputs, Stream, Workspace};
use crate::geometry::{scalar_word, SCALAR_ALPHA};
use crate::loss::CudaLoss;
use crate::modes::Family;
use crate::plan::{ForwardBackwardPlan, MrefPlace, Region, StatePlace, ThreeProductPlan};

impl CudaLoss {
    /// Forward and backward at once: the forward's outputs, and dE, dC, db (each optional) for
    /// grad_output = 1 — or for the f32 at `grad_output` (device memory), the one the caller's
    /// backward will bring, so that nothing rescales the rounded gradients (a second rounding) —
    /// as `plan` says (made by [`crate::plan::three_product_plan`] for this shape, dtype and these
    /// gradients).
    ///
    /// With compact logits dE's buffer is scratch until each chunk's product writes its rows
    /// ([`MrefPlace::DeRows`]): the chunk's per-tile maxima live there in between. With one chunk
    /// dC's buffer is scratch until its product ([`StatePlace::DcBuffer`]): the per-token state
    /// lives there, from the buffer's first 256-byte boundary. Such a plan also takes `out.lse`
    /// and `out.status` = 0 (null) from a caller that will not read them: the pass keeps them in
    /// that state ([`ThreeProductPlan::lse`], [`ThreeProductPlan::status`]); every other plan and entry point
    /// needs both buffers.
    ///
    /// # Safety
    /// As for [`CudaLoss::forward`] and [`CudaLoss::backward`] (the plan from
    /// [`crate::plan::three_product_plan`]).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward_backward_three_product(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        out: &DeviceForwardOutputs,
        grads: &DeviceGrads,
        ws: Workspace,
        plan: &ThreeProductPlan,
        grad_output: Option<DevPtr>,
        stream: Stream,
    ) -> Result<()> {
        x.validate(opts)?;
        out.check(x.shape.n, opts)?;
        let compact = plan.storage.family() == Family::Sm90;
        self.check_plan(x, plan.shape, plan.dtype, plan.storage.family())?;
        if compact && !crate::planning::compact_logits_hold(opts) {
            return Err(flce_core::Error::InvalidOption {
                name: "plan",
                value: "compact step logits".into(),
                reason:
                    "compact logits hold no softcap with label smoothing: plan this call with ThreeProductLogits::F32",
            });
        }
        grads.check_plan(plan.wanted)?;
        ws.check(plan.workspace_bytes)?;
        check_maxima_in_de(plan, grads)?;
        let state = token_state_at(plan, ws, grads)?;
        let out = &DeviceForwardOutputs {
            lse: own_or_kept(out.lse, plan.lse, &state, "out.lse", NO_LSE)?,
            status: own_or_kept(out.status, plan.status, &state, "out.status", NO_STATUS)?,
            ..*out
        };
        let targets = state(plan.targets);
        let call = self.call(x, opts, targets, ws, stream)?;
        let given =
            out.pointers().into_iter().chain(grads.pointers()).chain([ws.pointer(), ("grad_output", grad_output)]);
        self.check_pointers(x.pointers().into_iter().chain(given))?;
        let k = call.lp.k;
        self.prep_targets(x, k, targets, out.status, stream)?;
        let scalars = ws.at(plan.scalars);
        let unit = (grad_output, ws.at(plan.unit_grad));
        self.unit_token_scales(&call, opts, targets, unit, (state(plan.token_scale), scalars))?;

        let (d, v, s) = (x.shape.d, x.shape.v, x.dtype.size_in_bytes() as u64);
        let input = Elem::Input(x.dtype);
        let (logits, g) = (ws.at(plan.logits), ws.at(plan.g));
        let (partials, target_logit) = (state(plan.partials), state(plan.target_logit));
        // dE's K-chunks and their f32 accumulator: in dC's buffer beside the state, or the workspace
        let de_k_chunks = plan.de_k_chunks.map(|k| {
            let acc = match k.place {
                StatePlace::DcBuffer => state(k.acc),
                StatePlace::Workspace => ws.at(k.acc),
            };
            (k.columns, acc)
        });
        // the products' α from the scalars G's token scales came with: on the device for those
        // written once into dE / dC, 1 for dC's f32 accumulator, whose rounding applies it
        let alpha = Alpha::Scalars(scalars);
        let blas = self.blas.bind(stream)?;
        for chunk in 0..plan.token_chunks() {
            let tokens = plan.token_range(chunk);
            let (n0, nlen) = (tokens.start as u64, tokens.len());
            let first = chunk == 0;
            let e_chunk = x.e + n0 * d as u64 * s;
            // the chunk's tokens as a problem of their own: statistics, then their lse
            let mut view = call.lp;
            view.k.n = nlen as i32;
            view.targets = targets + 4 * n0;
            // the chunk's per-tile maxima (compact): the workspace's rows, or the chunk's own dE rows
            let m_ref = match plan.m_ref {
                Some(MrefPlace::Workspace(r)) => ws.at(r),
                Some(MrefPlace::DeRows) => grads.de.map_or(0, |de| de + n0 * d as u64 * s),
                None => 0,
            };
            if compact {
                // statistics, target logits and q from the sm90 forward (partials at n0, ld N)
                let outputs = (partials, target_logit);
                crate::family::sm90::forward_compact(&call, plan, tokens.clone(), view, m_ref, outputs)?;
            } else {
                // logits of the chunk over the whole vocabulary, f32 [nlen, ldg]
                crate::family::cublas::chunk_logits(&call, &blas, 0, v, tokens.start, nlen, logits, plan.ldg)?;
                let stats = StatsParams {
                    lp: view,
                    logits,
                    ldl: plan.ldg as i32,
                    v0: 0,
                    v_end: v as i32,
                    seg_cols: plan.stats_seg_cols as i32,
                    partials_ld: x.shape.n as i32,
                    first_chunk: 1,
                    partials: partials + 16 * n0,
                    target_logit: target_logit + 4 * n0,
                };
                self.kernels.launch(x.dtype, &stats, stream)?;
            }
            let chunk_partials =
                crate::pass::forward::Partials::new(partials + 16 * n0, target_logit + 4 * n0, plan.stats_splits);
            self.merge_partials(&call, view.k, view.targets, chunk_partials, out.lse + 4 * n0, 0, 0)?;
            if chunk + 1 == plan.token_chunks() {
                // the whole forward's outputs from the partials of every chunk, before the last
                // chunk's products: with one chunk the state may live in dC's buffer
                // (StatePlace::DcBuffer), which its dC product writes
                let all = crate::pass::forward::Partials::new(partials, target_logit, plan.stats_splits);
                self.finish(&call, all, state(plan.finish_sums), out)?;
            }
            // G for grad_output = 1, and db's column sums
            let chunk = GradChunk {
                lse: out.lse,
                token_scale: state(plan.token_scale),
                scalars,
                n0: tokens.start as i32,
                n_end: tokens.end as i32,
                v0: 0,
                v_end: v as i32,
                g_out: g,
                ldg: plan.ldg as i32,
                db_partial: plan.db_partial.map_or(0, |r| ws.at(r)),
            };
            if compact {
                let grad = CompactGradParams {
                    lp: call.lp,
                    chunk,
                    q: logits,
                    m_ref,
                    ld_mref: plan.mref_ld() as i32,
                    target_logit,
                };
                self.kernels.launch(x.dtype, &grad, stream)?;
            } else {
                let grad = GradLogitsParams { lp: call.lp, chunk, logits, ldl: plan.ldg as i32 };
                self.kernels.launch(x.dtype, &grad, stream)?;
            }
            if let Some(de) = grads.de {
                let rows = de + n0 * d as u64 * s;
                match de_k_chunks {
                    Some((k_chunk, acc)) => {
                        // dE[chunk] = G·C over K-chunks of V summed in f32 (host β: 0, then 1),
                        // then α and one rounding (plan::with_de_k_chunks says why)
                        for (i, k0) in (0..v).step_by(k_chunk).enumerate() {
                            let a = Mat::new(x.c + (k0 * d) as u64 * s, input, d);
                            let b = Mat::new(g + k0 as u64 * s, input, plan.ldg);
                            let out = Mat::new(acc, Elem::F32, d);
                            let beta = if i == 0 { 0.0 } else { 1.0 };
                            let k = k_chunk.min(v - k0);
                            Gemm { m: d, n: nlen, k, a, b, alpha: Alpha::One, beta, out }.run(&blas)?;
                        }
                        let alpha = scalar_word(scalars, SCALAR_ALPHA);
                        self.round_scaled_into(x.dtype, acc, rows, nlen * d, alpha, stream)?;
                    }
                    None => {
                        // dE[chunk] = G·C, one product over V, rounded once; column-major (D × nlen) = C(D × V) · G
                        let b = Mat::new(g, input, plan.ldg);
                        let out = Mat::new(rows, input, d);
                        let a = Mat::new(x.c, input, d);
                        Gemm { m: d, n: nlen, k: v, a, b, alpha, beta: 0.0, out }.run(&blas)?;
                    }
                }
            }
            if let Some(dc) = grads.dc {
                // dC (+)= Gᵀ·E[chunk] in f32; column-major (D × V) = E(D × nlen) · Gᵀ, vocabulary
                // rows [v0, v1) into `out`: with an accumulator, rows [0, head) in dC's own buffer
                // (f32 row r at byte 4·D·(r + 1)) and the rest in the workspace; else dC itself
                let beta = if first { 0.0 } else { 1.0 };
                let a = Mat::new(e_chunk, input, d);
                let rows = |v0: usize, v1: usize, out: Mat| {
                    let b = Mat::new(g + v0 as u64 * s, input, plan.ldg).t();
                    let alpha = if out.elem == Elem::F32 && plan.dc_acc.is_some() { Alpha::One } else { alpha };
                    Gemm { m: d, n: v1 - v0, k: nlen, a, b, alpha, beta, out }
                };
                match plan.dc_acc {
                    Some(r) => {
                        let head = plan.dc_head_rows;
                        if head > 0 {
                            rows(0, head, Mat::new(dc + 4 * d as u64, Elem::F32, d)).run(&blas)?;
                        }
                        rows(head, v, Mat::new(ws.at(r), Elem::F32, d)).run(&blas)?;
                    }
                    None => rows(0, v, Mat::new(dc, input, d)).run(&blas)?,
                }
            }
            if let (Some(acc), Some(part)) = (plan.db_acc, plan.db_partial) {
                let reduce = DbReduceParams {
                    db_partial: ws.at(part),
                    row_tiles: nlen.div_ceil(crate::geometry::TILE_M) as i32,
                    ldb: plan.ldg as i32,
                    count: v as i32,
                    accumulate: (!first) as i32,
                    db_acc: ws.at(acc),
                    alpha: scalar_word(scalars, SCALAR_ALPHA),
                };
                self.kernels.launch(x.dtype, &reduce, stream)?;
            }
        }
        drop(blas);
        if let (Some(dc), Some(acc)) = (grads.dc, plan.dc_acc) {
            // the head in place first: its rounded rows leave free the bytes the tail's go to
            let head = plan.dc_head_rows;
            let alpha = scalar_word(scalars, SCALAR_ALPHA);
            self.round_head_in_place(x.dtype, dc, head, d, alpha, stream)?;
            let tail = dc + (head * d) as u64 * s;
            self.round_scaled_into(x.dtype, ws.at(acc), tail, (v - head) * d, alpha, stream)?;
        }
        if let (Some(db), Some(acc)) = (grads.dbias, plan.db_acc) {
            // (flce_db_reduce applied α already)
            self.round_into(x.dtype, ws.at(acc), db, v, stream)?;
        }
        Ok(())
    }

    /// The per-token scales and scalars of the gradients for grad_output = 1 (reduction none: 1
    /// for every token, as for sum), or for the caller's scalar at `grad_output`, into
    /// `(token_scale, scalars)`; `unit_word` is a 4-byte workspace slot for the 1. The passes that
    /// compute the gradients in the forward (this one and the vocabulary-slice pass, src/pass/vocab_slice.rs).
    ///
    /// # Safety
    /// `call`'s inputs and `targets` (prepared) live on its stream; the regions are in its workspace.
    pub(crate) unsafe fn unit_token_scales(
        &self,
        call: &crate::launch::Call<'_>,
        opts: &Options,
        targets: DevPtr,
        (grad_output, unit_word): (Option<DevPtr>, DevPtr),
        (token_scale, scalars): (DevPtr, DevPtr),
    ) -> Result<()> {
        let (x, stream) = (call.x, call.stream);
        let unit = match grad_output {
            Some(given) => given,
            None => {
                self.kernels.fill_i32(unit_word, 1.0f32.to_bits() as i32, 1, stream)?;
                unit_word
            }
        };
        let as_sum = Options { reduction: Reduction::Sum, ..opts.clone() };
        let scale = ScaleParams {
            k: if opts.reduction == Reduction::None { LossConstants::new(x.shape, &as_sum) } else { call.lp.k },
            targets,
            class_w: call.lp.class_w,
            grad_output: unit,
            token_scale,
            scalars,
        };
        self.kernels.launch(x.dtype, &scale, stream)?;
        Ok(())
    }

    /// Multiply `count` gradient elements (input dtype) at `data` by the f32 at `scale` (device
    /// memory), skipping the pass when it is 1: the backward of [`CudaLoss::forward_backward_three_product`].
    /// Exact for grad_output 1; otherwise one more rounding than a recomputing backward.
    ///
    /// # Safety
    /// `data` holds `count` elements of `dtype`, `scale` one f32, on `stream`.
    pub unsafe fn scale_gradients(
        &self,
        dtype: flce_core::DType,
        data: u64,
        count: usize,
        scale: u64,
        stream: Stream,
    ) -> Result<()> {
        let _bound = crate::context::BoundContext::bind(self.context())?;
        self.scale_in_place(dtype, data, count, scale, stream)
    }
}

/// The device address of a per-token state region of `plan` (its [`StatePlace`]): in the
/// workspace, or in dC's buffer from its first 256-byte boundary.
fn token_state_at(plan: &ThreeProductPlan, ws: Workspace, grads: &DeviceGrads) -> Result<impl Fn(Region) -> DevPtr> {
    let base = match plan.token_state {
        StatePlace::Workspace => ws.ptr,
        StatePlace::DcBuffer => {
            let dc = grads.dc.ok_or_else(|| flce_core::Error::InvalidOption {
                name: "grads.dc",
                value: "none".into(),
                reason: "this plan keeps its per-token state in dC's buffer: dC must be given",
            })?;
            dc.next_multiple_of(256)
        }
    };
    Ok(move |r: Region| base + r.offset as u64)
}

const NO_LSE: &str = "this plan keeps no lse of its own (several token chunks, or no dC): give an lse buffer of N f32";
const NO_STATUS: &str =
    "this plan keeps no status word of its own (several token chunks, or no dC): give a status word (one i32)";

/// The pass's lse or status word: the caller's buffer, or with a null pointer the plan's room for
/// it in the state ([`ThreeProductPlan::lse`], [`ThreeProductPlan::status`]: one chunk, the state in dC's buffer);
/// a clear error for a null pointer with any other plan.
fn own_or_kept(
    given: DevPtr,
    kept: Option<Region>,
    state: &impl Fn(Region) -> DevPtr,
    name: &'static str,
    reason: &'static str,
) -> Result<DevPtr> {
    match (given, kept) {
        (0, Some(r)) => Ok(state(r)),
        (0, None) => Err(flce_core::Error::InvalidOption { name, value: "null".into(), reason }),
        (ptr, _) => Ok(ptr),
    }
}

/// Where `plan` keeps the compact forward's per-tile maxima in dE's rows ([`MrefPlace::DeRows`]):
/// f32 values, so dE must be 4-byte aligned (torch's are); a clear error before any kernel
/// otherwise. (The three-product pass, and the vocabulary-slice pass's head: src/pass/vocab_slice.rs.)
pub(crate) fn check_maxima_in_de(plan: &ThreeProductPlan, grads: &DeviceGrads) -> Result<()> {
    if let (Some(MrefPlace::DeRows), Some(de)) = (plan.m_ref, grads.de) {
        if de % 4 != 0 {
            return Err(flce_core::Error::InvalidOption {
                name: "grads.de",
                value: format!("{de:#x}"),
                reason: "this plan keeps per-tile maxima in dE's rows: dE must be 4-byte aligned",
            });
        }
    }
    Ok(())
}

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
