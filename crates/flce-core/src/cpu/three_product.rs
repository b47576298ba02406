//! The three-product pass on the CPU: the structure of the CUDA one, loss and
//! gradients in one pass over token chunks, for callers that trade memory for speed.
//!
//! Per chunk of `token_chunk` tokens: the chunk's logits over the whole vocabulary (f32, kept for
//! the chunk), folded into each token's statistics → lse; the logits become G = ∂L/∂x in place
//! (for grad_output 1); dE for the chunk is one product over V (f32 accumulation, rounded once:
//! final after the chunk); dC and db accumulate across chunks in f32 / f64 and are rounded once at
//! the end. Three products (logits, dE, dC) instead of the recomputing path's five (forward, and
//! two recomputes in the backward); memory: token_chunk × V f32 logits plus the V × D f32 dC
//! accumulator (in place for f32 inputs would need dC's own buffer: it is kept separate for
//! every dtype, as a reference is). Work inside a chunk is split by token blocks (logits,
//! statistics, dE) and by vocabulary blocks (dC, db): every accumulator has one owner, so the
//! results do not depend on the thread count.
//!
//! The gradients are those of grad_output 1 for a mean or sum (what the autograd backward then
//! scales); `reduction = none` is refused (its grad_output is per token, known only later).

use rayon::prelude::*;

use super::fused::{Problem, Scratch, TOKEN_BLOCK, VOCAB_BLOCK};
use super::gemm::{matmul, rows_f32, View};
use super::pool::in_pool;
use super::vocab_parallel::{finish, token_grad_scales, Partials, VocabSlice};
use crate::error::{Error, Result};
use crate::options::{Options, Reduction};
use crate::outputs::{ForwardBuffers, ForwardScalars, GradBuffers};
use crate::problem::{GradOutput, HostInputs};
use crate::spec::{LossTerms, RowStats};
use crate::Element;

/// The forward's outputs into `out` and the gradients for grad_output 1 into `grads`, in one
/// pass over chunks of `token_chunk` tokens (at least 1). Mean or sum reductions.
pub fn forward_backward_into<T: Element>(
    inputs: &HostInputs<'_, T>,
    opts: &Options,
    token_chunk: usize,
    out: ForwardBuffers<'_>,
    grads: GradBuffers<'_, T>,
) -> Result<ForwardScalars> {
    if opts.reduction == Reduction::None {
        return Err(Error::InvalidOption {
            name: "reduction",
            value: "none".into(),
            reason: "the three-product pass computes the gradients of a mean or sum (grad_output 1)",
        });
    }
    if token_chunk == 0 {
        return Err(Error::InvalidOption { name: "token_chunk", value: "0".into(), reason: "must be at least 1" });
    }
    let p = Problem::new(inputs, VocabSlice::whole(inputs.shape.v), opts)?;
    let (n, d, v) = (p.n(), p.d(), p.rows());
    p.check_grad_buffers(&grads)?;
    let GradBuffers { mut de, dc, dbias } = grads;
    let mut partials = Partials::empty(n);
    partials.target_weight = p.target_weights();
    partials.class_weight_sum = p.class_weight_sum();
    let g = token_grad_scales(&p.targets, &partials.target_weight, opts.reduction, GradOutput::Scalar(1.0))?;
    let terms = LossTerms::new(opts, v, partials.class_weight_sum);
    let mut dc_acc = dc.as_ref().map(|_| vec![0.0f32; v * d]);
    let mut db_acc = dbias.as_ref().map(|_| vec![0.0f64; v]);
    let mut logits = Vec::new();
    in_pool(|| {
        for start in (0..n).step_by(token_chunk) {
            let rows = start..(start + token_chunk).min(n);
            logits.resize(rows.len() * v, 0.0f32);
            chunk_grad(&p, &rows, &mut logits, &mut partials, &g, &terms);
            if let Some(de) = de.as_deref_mut() {
                chunk_de(&p, &logits, &mut de[rows.start * d..rows.end * d]);
            }
            chunk_dc(&p, &rows, &logits, dc_acc.as_deref_mut(), db_acc.as_deref_mut());
        }
    });
    if let (Some(dc), Some(acc)) = (dc, &dc_acc) {
        dc.iter_mut().zip(acc).for_each(|(o, &x)| *o = T::from_f32(x));
    }
    if let (Some(db), Some(acc)) = (dbias, &db_acc) {
        db.iter_mut().zip(acc).for_each(|(o, &x)| *o = T::from_f64(x));
    }
    finish(&partials, &p.targets, v, opts, out)
}

/// The chunk's logits [rows × V] (in `tile`), their statistics and target logits (into
/// `partials`), then G in place. Parallel over token blocks of the chunk.
fn chunk_grad<T: Element>(
    p: &Problem<'_, T>,
    rows: &std::ops::Range<usize>,
    tile: &mut [f32],
    partials: &mut Partials,
    g: &[f32],
    terms: &LossTerms,
) {
    let (d, v) = (p.d(), p.rows());
    let segments = p.segments();
    let target_weight = &partials.target_weight;
    let blocks: Vec<(RowStats, f32)> = tile
        .par_chunks_mut(TOKEN_BLOCK * v)
        .enumerate()
        .flat_map_iter(|(b, block)| {
            let (mut sc, mut e_buf) = (Scratch::default(), Vec::new());
            let r = rows.start + b * TOKEN_BLOCK..(rows.start + (b + 1) * TOKEN_BLOCK).min(rows.end);
            let e_rows = rows_f32(p.inputs.e, &r, d, &mut e_buf);
            let mut out = Vec::with_capacity(r.len());
            let mut coeffs = Vec::with_capacity(r.len());
            for vb in 0..p.vocab_blocks() {
                let cols = p.vocab_range(vb);
                let c_rows = rows_f32(p.inputs.c, &cols, d, &mut sc.c);
                p.logits(e_rows, c_rows, &cols, &mut sc.tile);
                for (k, z) in sc.tile.chunks_exact(cols.len()).enumerate() {
                    block[k * v + cols.start..k * v + cols.end].copy_from_slice(z);
                }
            }
            for (k, i) in r.clone().enumerate() {
                let z = &block[k * v..(k + 1) * v];
                // folded as the forward folds (per vocabulary block, merged per segment, segments
                // in order): the same summation order for the statistics
                let mut stats = RowStats::EMPTY;
                for seg in &segments {
                    let mut part = RowStats::EMPTY;
                    for vb in seg.clone() {
                        let cols = p.vocab_range(vb);
                        part.fold(&z[cols.clone()], cols.start, p.inputs.class_weights.map(|w| &w[cols]));
                    }
                    stats.merge(part);
                }
                let target_logit = p.local_target(i).map_or(0.0, |t| z[t]);
                coeffs.push(terms.grad_coeffs(g[i], stats.lse(), target_weight[i]));
                out.push((stats, target_logit));
            }
            p.logits_to_grad(block, &r, &(0..v), &coeffs);
            out
        })
        .collect();
    for (i, (stats, target_logit)) in rows.clone().zip(blocks) {
        partials.stats[i] = stats;
        partials.target_logit[i] = target_logit;
    }
}

/// dE\[rows\] = G · C, one product over the whole vocabulary per token block, rounded once.
fn chunk_de<T: Element>(p: &Problem<'_, T>, g: &[f32], de: &mut [T]) {
    let (d, v) = (p.d(), p.rows());
    de.par_chunks_mut(TOKEN_BLOCK * d).zip(g.par_chunks(TOKEN_BLOCK * v)).for_each(|(out, gb)| {
        let mut sc = Scratch::default();
        let nr = out.len() / d;
        sc.acc.resize(nr * d, 0.0);
        for vb in 0..p.vocab_blocks() {
            let cols = p.vocab_range(vb);
            let c_rows = rows_f32(p.inputs.c, &cols, d, &mut sc.c);
            let g_cols = View::row_major(&gb[cols.start..], v);
            matmul(nr, d, cols.len(), &mut sc.acc, g_cols, View::row_major(c_rows, d), true);
        }
        out.iter_mut().zip(&sc.acc).for_each(|(o, &x)| *o = T::from_f32(x));
    });
}

/// dC_acc\[block\] += G[:, block]ᵀ · E\[rows\] and db_acc\[block\] += Σ_rows G[:, block], per
/// vocabulary block (each block owns its accumulator rows).
fn chunk_dc<T: Element>(
    p: &Problem<'_, T>,
    rows: &std::ops::Range<usize>,
    g: &[f32],
    dc_acc: Option<&mut [f32]>,
    db_acc: Option<&mut [f64]>,
) {
    let (d, v, nr) = (p.d(), p.rows(), rows.len());
    let blocks = p.vocab_blocks();
    let mut dc_parts: Vec<Option<&mut [f32]>> = match dc_acc {
        Some(acc) => acc.chunks_mut(VOCAB_BLOCK * d).map(Some).collect(),
        None => (0..blocks).map(|_| None).collect(),
    };
    let mut db_parts: Vec<Option<&mut [f64]>> = match db_acc {
        Some(acc) => acc.chunks_mut(VOCAB_BLOCK).map(Some).collect(),
        None => (0..blocks).map(|_| None).collect(),
    };
    dc_parts.par_iter_mut().zip(db_parts.par_iter_mut()).enumerate().for_each(|(vb, (dc, db))| {
        let cols = p.vocab_range(vb);
        if let Some(dc) = dc {
            let mut sc = Scratch::default();
            let e_rows = rows_f32(p.inputs.e, rows, d, &mut sc.e);
            let gt = View::transposed(&g[cols.start..], v);
            matmul(cols.len(), d, nr, dc, gt, View::row_major(e_rows, d), true);
        }
        if let Some(db) = db {
            for r in 0..nr {
                for (a, &x) in db.iter_mut().zip(&g[r * v + cols.start..r * v + cols.end]) {
                    *a += x as f64;
                }
            }
        }
    });
}

#[cfg(test)]
#[path = "three_product_tests.rs"]
mod tests;
