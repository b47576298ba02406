//! The backward pass: per-token scales, then the plan's work list — a main pass over every
//! vocabulary chunk (G by the plan's family; dE, db and the dC chunks before the tail by the
//! shared accumulators and cuBLAS), dE rounded once, and the tail pass that recomputes G for the
//! dC rows that shared bytes with dE's accumulator. Never synchronises the stream.

use std::ops::Range;

use flce_core::{check_grad_output, DType, Error, Options, Result};

use super::backward_steps::{one_pass_steps, writes_dc, Computes, Pass, Step};
use crate::abi::{DbReduceParams, DevPtr, GradChunk, ScaleParams};
use crate::blas::{Alpha, BoundBlas, Elem, Gemm, Mat};
use crate::device::{DeviceGradOutput, DeviceGrads, DeviceInputs, Stream, Workspace};
use crate::family;
use crate::geometry::{scalar_word, SCALAR_ALPHA, SCALAR_ONE};
use crate::launch::Call;
use crate::loss::CudaLoss;
use crate::modes::Family;
use crate::plan::{BackwardPlan, DcAccumulator, DeAccumulator, GBuffer};

/// The resolved destinations of one backward call.
struct Targets {
    grads: DeviceGrads,
    /// dE's f32 accumulator (None when dE is not wanted).
    de_acc: Option<DevPtr>,
    /// Its last rows, where they do not fit dC ([`crate::plan::DcTail::overflow_rows`]).
    de_overflow: Option<DevPtr>,
    db_acc: Option<DevPtr>,
}

impl CudaLoss {
    /// The exact backward: dE, dC, db (each optional) from forward's lse, on `stream`, as `plan`
    /// says (made by [`CudaLoss::backward_plan`] for this shape, dtype and these gradients).
    ///
    /// dC's buffer is also scratch while the call runs: when the plan says so
    /// ([`DeAccumulator::DcTail`]), dE's f32 accumulator lives in its last bytes before the final
    /// dC rows are written. dC must then be 16-byte aligned (as every cudaMalloc or torch
    /// allocation is).
    ///
    /// # Safety
    /// As for [`CudaLoss::forward`] (the plan from [`CudaLoss::backward_plan`]); `lse` is
    /// forward's output for the same inputs and options.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn backward(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        lse: DevPtr,
        grad_output: DeviceGradOutput,
        grads: &DeviceGrads,
        ws: Workspace,
        plan: &BackwardPlan,
        stream: Stream,
    ) -> Result<()> {
        if !self.check_backward(x, opts, &grad_output, grads, plan)? {
            return Ok(());
        }
        ws.check(plan.workspace_bytes)?;
        let de_acc = de_accumulator(plan, grads, &ws)?;
        let targets = ws.at(plan.targets);
        let call = self.call(x, opts, targets, ws, stream)?;
        let given = [("lse", Some(lse)), ("grad_output", Some(grad_output.ptr())), ws.pointer()];
        self.check_pointers(x.pointers().into_iter().chain(grads.pointers()).chain(given))?;
        self.prep_targets(x, call.lp.k, targets, ws.at(plan.status), stream)?;
        let scale = ScaleParams {
            k: call.lp.k,
            targets,
            class_w: call.lp.class_w,
            grad_output: grad_output.ptr(),
            token_scale: ws.at(plan.token_scale),
            scalars: ws.at(plan.scalars),
        };
        self.kernels.launch(x.dtype, &scale, stream)?;
        self.passes(&call, plan, grads, de_acc, lse)
    }

    /// What every backward entry point checks before any work: the inputs and options,
    /// grad_output's length, the plan against the call and the gradients asked for. False when no
    /// gradient is wanted (nothing to do).
    pub(crate) fn check_backward(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        grad_output: &DeviceGradOutput,
        grads: &DeviceGrads,
        plan: &BackwardPlan,
    ) -> Result<bool> {
        x.validate(opts)?;
        check_grad_output(opts.reduction, x.shape.n, grad_output.per_token_len(x.shape.n))?;
        if !grads.wanted().any() {
            return Ok(false);
        }
        self.check_plan(x, plan.shape, plan.dtype, plan.family)?;
        grads.check_plan(plan.wanted)?;
        Ok(true)
    }

    /// The plan's passes once targets, token scales and scalars are in the workspace: every
    /// vocabulary chunk (G by the family, dE / dC / db by cuBLAS and the accumulators), dE rounded
    /// (unless it accumulates in place), the tail pass, db rounded; with a `de_pass`, these for dC
    /// and db, then the token-outer passes for dE.
    ///
    /// # Safety
    /// As for [`CudaLoss::backward`]; `de_acc` from [`de_accumulator`] for this plan and `grads`.
    pub(crate) unsafe fn passes(
        &self,
        call: &Call<'_>,
        plan: &BackwardPlan,
        grads: &DeviceGrads,
        de_acc: Option<DevPtr>,
        lse: DevPtr,
    ) -> Result<()> {
        if let Some(de_plan) = &plan.de_pass {
            // dC and db over the vocabulary chunks, then dE over token chunks, both after the one
            // prologue (the plans share its regions: plan::with_de_pass)
            let (dc_db, de_only) =
                (DeviceGrads { de: None, ..*grads }, DeviceGrads { de: grads.de, dc: None, dbias: None });
            self.one_pass(call, plan, &dc_db, None, lse)?;
            let de_acc = de_accumulator(de_plan, &de_only, &call.ws)?;
            return self.one_pass(call, de_plan, &de_only, de_acc, lse);
        }
        self.one_pass(call, plan, grads, de_acc, lse)
    }

    /// The passes of a one-pass plan ([`CudaLoss::passes`] without a `de_pass`).
    ///
    /// # Safety
    /// As for [`CudaLoss::passes`].
    unsafe fn one_pass(
        &self,
        call: &Call<'_>,
        plan: &BackwardPlan,
        grads: &DeviceGrads,
        de_acc: Option<DevPtr>,
        lse: DevPtr,
    ) -> Result<()> {
        let (x, ws, stream) = (call.x, call.ws, call.stream);
        // the backward's α (the scalars' word SCALAR_ALPHA), for the accumulators' rounding
        let alpha = scalar_word(ws.at(plan.scalars), SCALAR_ALPHA);
        let de_overflow = plan.dc_tail().filter(|t| t.overflow_rows > 0).map(|t| ws.at(t.overflow));
        let dst = Targets { grads: *grads, de_acc, de_overflow, db_acc: plan.db_acc.map(|r| ws.at(r)) };
        let blas = self.blas.bind(stream)?;
        let what = Computes {
            de_rounded: grads.de.is_some() && de_acc.is_some() && plan.de_acc.needs_rounding(),
            dc: grads.dc.is_some(),
            db: grads.dbias.is_some(),
        };
        let d = x.shape.d;
        // the address of row `row` of a [*, D] gradient (or accumulator) in the input dtype
        let row_at = |base: DevPtr, row: usize| base + (row * d * x.dtype.size_in_bytes()) as u64;
        // (one_pass_steps emits a rounding only where `what` and the plan hold its buffers)
        let missing = |step: Step| Error::Unsupported(format!("backward step {step:?} without its buffers"));
        for step in one_pass_steps(plan, what) {
            match step {
                Step::Pair { vc, tc, pass } => self.chunk_pair(call, &blas, plan, &dst, lse, vc, tc, pass)?,
                Step::RoundDc { vc } => {
                    let (Some(dc), DcAccumulator::Workspace(r)) = (grads.dc, plan.dc_acc) else {
                        return Err(missing(step));
                    };
                    let vocab = plan.vocab_range(vc);
                    self.round_scaled_into(x.dtype, ws.at(r), row_at(dc, vocab.start), vocab.len() * d, alpha, stream)?;
                }
                Step::RoundDeChunk { tc } => {
                    // (no dC: no tail pass; dE's accumulator holds one token chunk, rounded after it)
                    let (Some(de), Some(acc)) = (grads.de, de_acc) else { return Err(missing(step)) };
                    let tokens = plan.token_range(tc);
                    self.round_scaled_into(x.dtype, acc, row_at(de, tokens.start), tokens.len() * d, alpha, stream)?;
                }
                Step::RoundDe => {
                    // the rows kept in dE's own buffer first: their bytes are the others' destination
                    let (Some(de), Some(acc)) = (grads.de, de_acc) else { return Err(missing(step)) };
                    let head = plan.dc_tail().map_or(0, |t| t.rows_in_de);
                    self.round_head_in_place(x.dtype, de, head, d, alpha, stream)?;
                    for (rows, from) in de_acc_rows(plan, Some(de), acc, dst.de_overflow, &(head..x.shape.n)) {
                        self.round_scaled_into(x.dtype, from, row_at(de, rows.start), rows.len() * d, alpha, stream)?;
                    }
                }
                Step::RoundDb => {
                    // (flce_db_reduce applied α already)
                    let (Some(db), Some(acc)) = (grads.dbias, dst.db_acc) else { return Err(missing(step)) };
                    self.round_into(x.dtype, acc, db, x.shape.v, stream)?;
                }
            }
        }
        // f32 inputs: dE accumulated in the caller's dE itself (no rounding step) without α
        if let (Some(de), Some(_), DeAccumulator::InPlace) = (grads.de, de_acc, plan.de_acc) {
            self.scale_in_place(DType::F32, de, x.shape.n * d, alpha, stream)?;
        }
        Ok(())
    }

    /// An accumulator's rows [0, rows) kept in its gradient's own buffer `buf` (f32 row r at byte
    /// 4·D·(r + 1): dE's head, [`crate::plan::DcTail::rows_in_de`], and the three-product pass's
    /// dC head, [`crate::plan::ThreeProductPlan::dc_head_rows`]) rounded in place into rows [0, rows). At 16-bit
    /// dtypes the rounded rows [a, b) (bytes [2Da, 2Db)) overlap f32 row r only if
    /// r < b/2 − 1; in passes with b ≤ 2a + 2 — rows [0, 2), [2, 6), [6, 14), … — every f32 row
    /// a pass writes over was read by an earlier pass (stream order), none of its own. Each value
    /// is multiplied by the f32 at `scale` (0: none) before it is rounded.
    pub(crate) unsafe fn round_head_in_place(
        &self,
        dtype: DType,
        buf: DevPtr,
        rows: usize,
        d: usize,
        scale: DevPtr,
        stream: Stream,
    ) -> Result<()> {
        debug_assert!(rows == 0 || dtype.size_in_bytes() == 2);
        let (f32_row, row) = (4 * d as u64, (d * dtype.size_in_bytes()) as u64);
        let mut a = 0usize;
        while a < rows {
            let b = (2 * a + 2).min(rows);
            let (src, dst) = (buf + f32_row * (a as u64 + 1), buf + row * a as u64);
            self.round_scaled_into(dtype, src, dst, (b - a) * d, scale, stream)?;
            a = b;
        }
        Ok(())
    }

    /// Vocabulary chunk `vc` × token chunk `tc` in `pass`: G by the family, db's column sums, the
    /// dC and dE products into their accumulators.
    #[allow(clippy::too_many_arguments)]
    unsafe fn chunk_pair(
        &self,
        call: &Call<'_>,
        blas: &BoundBlas<'_>,
        plan: &BackwardPlan,
        dst: &Targets,
        lse: DevPtr,
        vc: usize,
        tc: usize,
        pass: Pass,
    ) -> Result<()> {
        let (x, ws, stream) = (call.x, call.ws, call.stream);
        let (d, s) = (x.shape.d, x.dtype.size_in_bytes() as u64);
        let input = Elem::Input(x.dtype);
        let vocab = plan.vocab_range(vc);
        let ldg = plan.g_ldg(vc);
        let g = match (plan.g_buffer(vc), dst.grads.dc) {
            (GBuffer::Dc { byte_offset, .. }, Some(dc)) => dc + byte_offset as u64,
            // (a Dc buffer without dC was refused by check_dc_as_scratch)
            _ => ws.at(plan.g),
        };
        let writes_dc = writes_dc(plan, vc, pass);
        let tokens = plan.token_range(tc);
        // the products' α, from the scalars whose token scales G was formed with: on the device for
        // a product written once into dC; 1 for those into f32 accumulators (dE's always, dC's in
        // the workspace), whose rounding applies it (`Step::Round*`, `scale_in_place`)
        let scalars = ws.at(plan.scalars);
        let word = |i: usize| scalar_word(scalars, i);
        let chunk = GradChunk {
            lse,
            token_scale: ws.at(plan.token_scale),
            scalars,
            n0: tokens.start as i32,
            n_end: tokens.end as i32,
            v0: vocab.start as i32,
            v_end: vocab.end as i32,
            g_out: g,
            ldg: ldg as i32,
            db_partial: plan.db_partial.map_or(0, |r| ws.at(r)),
        };
        match (pass, plan.family) {
            (Pass::TailKeptG, _) => {}
            (_, Family::Cublas) => family::cublas::grad_chunk(call, blas, plan, chunk)?,
            (_, Family::Sm80) => family::sm80::grad_chunk(call, plan, chunk)?,
            (_, Family::Sm90) if !x.rows_aligned() => family::sm80::grad_chunk(call, plan, chunk)?,
            (_, Family::Sm90) => family::sm90::grad_chunk(call, plan, chunk)?,
        }
        let first_tokens = (tc == 0) as i32;
        // (FLCE_SM90_PRODUCTS=1: flce's own TMA + wgmma products instead of cuBLAS's, a measurement)
        let own_products = self.tuning.sm90_products && plan.family == Family::Sm90 && x.rows_aligned();
        if let (Some(acc), Pass::Main) = (dst.db_acc, pass) {
            let reduce = DbReduceParams {
                db_partial: chunk.db_partial,
                row_tiles: tokens.len().div_ceil(crate::geometry::TILE_M) as i32,
                ldb: plan.ldg as i32,
                count: vocab.len() as i32,
                accumulate: 1 - first_tokens,
                db_acc: acc + 4 * vocab.start as u64,
                alpha: word(SCALAR_ALPHA),
            };
            self.kernels.launch(x.dtype, &reduce, stream)?;
        }
        if let (Some(dc), true) = (dst.grads.dc, writes_dc) {
            // dC[vocab] (+)= Gᵀ·E[tokens]; column-major view: (D × vlen) = E(D × nlen) · Gᵀ
            let beta = (1 - first_tokens) as f32;
            let f32_acc = matches!(plan.dc_acc, DcAccumulator::Workspace(_));
            let out = match plan.dc_acc {
                DcAccumulator::Workspace(r) => ws.at(r),
                _ => dc + vocab.start as u64 * d as u64 * s,
            };
            let (alpha, alpha_word) =
                if f32_acc { (Alpha::One, word(SCALAR_ONE)) } else { (Alpha::Scalars(scalars), word(SCALAR_ALPHA)) };
            // (a 16-bit dC is written once: one token chunk)
            if own_products && (f32_acc || first_tokens == 1) {
                let what = family::sm90::Product::Dc { out, f32_acc, accumulate: first_tokens == 0 };
                family::sm90::product(call, g, ldg, tokens.clone(), vocab.clone(), what, alpha_word)?;
            } else {
                let out = Mat::new(out, if f32_acc { Elem::F32 } else { input }, d);
                let a = Mat::new(x.e + tokens.start as u64 * d as u64 * s, input, d);
                let b = Mat::new(g, input, ldg).t();
                Gemm { m: d, n: vocab.len(), k: tokens.len(), a, b, alpha, beta, out }.run(blas)?;
            }
        }
        if let (Some(acc), Pass::Main) = (dst.de_acc, pass) {
            // dE[tokens] (+)= G·C[vocab]; column-major view: (D × nlen) = C(D × vlen) · G — added
            // to what the chunks before (or the slice plan's head, before `vocab_begin`) left
            let adds = vc > 0 || plan.vocab_begin > 0;
            let beta = adds as i32 as f32;
            let a = Mat::new(x.c + vocab.start as u64 * d as u64 * s, input, d);
            let segments = de_acc_rows(plan, dst.grads.de, acc, dst.de_overflow, &tokens);
            // G's row of token `t`
            let g_row = |t: usize| g + (t - tokens.start) as u64 * ldg as u64 * s;
            if own_products && !segments.is_empty() {
                // one launch over every segment: more tiles per launch fill the SMs' waves better
                // (Gemma 2: two launches of 288 tiles on 132 SMs, 73% of their last waves, against
                // one of 576, 87%)
                let rows = segments[0].0.start..segments[segments.len() - 1].0.end;
                let g_rows = g_row(rows.start);
                let what = family::sm90::Product::De { segments, accumulate: adds };
                family::sm90::product(call, g_rows, ldg, rows, vocab.clone(), what, word(SCALAR_ONE))?;
            } else {
                for (rows, out) in segments {
                    let b = Mat::new(g_row(rows.start), input, ldg);
                    let out = Mat::new(out, Elem::F32, d);
                    Gemm { m: d, n: rows.len(), k: vocab.len(), a, b, alpha: Alpha::One, beta, out }.run(blas)?;
                }
            }
        }
        Ok(())
    }
}

/// The token rows of `tokens` whose dE accumulator rows are contiguous, each with the address of
/// its first row's accumulator: the accumulator's rows in dE's own buffer (a [`DcTail`] with
/// `rows_in_de`: row r at byte 4·D·(r + 1)), then the rest at `acc` (from
/// [`DcTail::rows_in_de`] on; a token-outer workspace accumulator holds this token chunk's rows
/// only, any other all N rows), and the rows past dC's end at `overflow`
/// ([`DcTail::overflow_rows`]).
fn de_acc_rows(
    plan: &BackwardPlan,
    de: Option<DevPtr>,
    acc: DevPtr,
    overflow: Option<DevPtr>,
    tokens: &Range<usize>,
) -> Vec<(Range<usize>, DevPtr)> {
    let row = 4 * plan.shape.d as u64;
    let tail = plan.dc_tail();
    let head = tail.map_or(0, |t| t.rows_in_de);
    let spill = tail.map_or(plan.shape.n, |t| plan.shape.n - t.overflow_rows);
    let mut out = vec![];
    if let (Some(de), true) = (de, tokens.start < head) {
        out.push((tokens.start..head.min(tokens.end), de + row * (tokens.start as u64 + 1)));
    }
    let rest = tokens.start.max(head)..tokens.end.min(spill);
    let first = if plan.token_outer && plan.de_acc.needs_rounding() { tokens.start } else { head };
    if !rest.is_empty() {
        out.push((rest.clone(), acc + row * (rest.start - first) as u64));
    }
    let past = tokens.start.max(spill)..tokens.end;
    if let (Some(overflow), false) = (overflow, past.is_empty()) {
        out.push((past.clone(), overflow + row * (past.start - spill) as u64));
    }
    out
}

/// The caller's dC, where the plan uses its bytes as scratch while the call runs (dE's f32
/// accumulator in its tail, the first chunks' G past their rows): given, and 16-byte aligned.
fn check_dc_as_scratch(plan: &BackwardPlan, grads: &DeviceGrads) -> Result<()> {
    if let (Some(t), Some(de)) = (plan.dc_tail(), grads.de) {
        if t.rows_in_de > 0 && de % 16 != 0 {
            let reason = "dE must be 16-byte aligned (it holds part of its own f32 accumulator during the call)";
            return Err(Error::InvalidOption { name: "grads.de", value: format!("{de:#x}"), reason });
        }
    }
    let (unaligned, missing_value, missing) = match (plan.dc_tail(), plan.dc_scratch.is_empty()) {
        _ if plan.de_acc == DeAccumulator::DcHead => (
            "dC must be 16-byte aligned (it holds dE's f32 accumulator during the call)",
            "de_acc: DcHead",
            "dE's accumulator is in dC's first rows, but dC is not given",
        ),
        (Some(_), _) => (
            "dC must be 16-byte aligned (it holds dE's f32 accumulator during the call)",
            "de_acc: DcTail",
            "dE's accumulator is in dC's tail, but dC is not given",
        ),
        (None, false) => (
            "dC must be 16-byte aligned (it holds the first chunks' G during the call)",
            "dc_scratch",
            "the plan puts G in dC's rows, but dC is not given",
        ),
        (None, true) => return Ok(()),
    };
    match grads.dc {
        Some(dc) if dc % 16 == 0 => Ok(()),
        Some(dc) => Err(Error::InvalidOption { name: "grads.dc", value: format!("{dc:#x}"), reason: unaligned }),
        None => Err(Error::InvalidOption { name: "plan", value: missing_value.into(), reason: missing }),
    }
}

/// Where dE's f32 accumulator is for `plan` and `grads` (None when dE is not wanted).
pub(crate) fn de_accumulator(plan: &BackwardPlan, grads: &DeviceGrads, ws: &Workspace) -> Result<Option<DevPtr>> {
    check_dc_as_scratch(plan, grads)?;
    Ok(match (plan.de_acc, grads.de, grads.dc) {
        (DeAccumulator::NotWanted, ..) => None,
        (DeAccumulator::InPlace, de, _) => de,
        (DeAccumulator::Workspace(r), ..) => Some(ws.at(r)),
        (DeAccumulator::DcTail(tail), _, dc) => Some(dc.expect("checked above") + tail.byte_offset as u64),
        (DeAccumulator::DcHead, _, dc) => Some(dc.expect("checked above")),
    })
}
