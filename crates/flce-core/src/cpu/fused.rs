//! The fast CPU path: never holds the N×V logits.
//!
//! Forward streams the vocabulary in blocks of `VOCAB_BLOCK` rows of C for each block of
//! `TOKEN_BLOCK` tokens: one f32 GEMM per tile, then the tile is folded into each token's running
//! (max, sum-exp, Σw·z, argmax). Work items are (token block, vocabulary segment) pairs, at most
//! `FORWARD_VOCAB_SEGMENTS` segments, merged in vocabulary order, so few tokens still use every
//! core.
//!
//! Backward recomputes logit tiles twice so that every accumulator has one owner and results are
//! bitwise identical for any thread count:
//! - pass 1, parallel over token blocks: dE_block += G_tile · C_block, accumulated in f32;
//! - pass 2, parallel over vocabulary blocks: dC_block += G_tileᵀ · E_block and db, in f32.
//!
//! Each gradient is rounded to the input dtype once. Extra memory: O(N) for per-token values plus
//! O(threads × block) scratch.

use std::ops::Range;

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::options::{Options, Reduction};
use crate::outputs::{ForwardBuffers, ForwardOutput, ForwardScalars, GradBuffers, Gradients};
use crate::problem::{check_len, GradOutput, HostInputs, Prepared};
use crate::spec::{cap_logit, GradCoeffs, LossTerms, RowStats};
use crate::Element;

/// Tokens per tile in the forward and in backward pass 1 (dE).
pub const TOKEN_BLOCK: usize = 128;
/// Vocabulary rows per tile.
pub const VOCAB_BLOCK: usize = 512;
/// Tokens per tile in backward pass 2 (dC): the inner dimension of its Gᵀ·E product.
pub const DC_TOKEN_BLOCK: usize = 512;
/// The forward splits the vocabulary into at most this many segments, merged in order, so that
/// few tokens still fill every core. A constant, not the thread count: results must not depend
/// on the machine.
pub const FORWARD_VOCAB_SEGMENTS: usize = 8;

/// Rows `rows` of a row-major [_, d] matrix as f32: borrowed when T is f32, widened into `buf`
/// otherwise.
fn rows_f32<'s, T: Element>(src: &'s [T], rows: &Range<usize>, d: usize, buf: &'s mut Vec<f32>) -> &'s [f32] {
    let part = &src[rows.start * d..rows.end * d];
    match T::as_f32_slice(part) {
        Some(s) => s,
        None => {
            buf.clear();
            buf.extend(part.iter().map(|x| x.to_f32()));
            buf
        }
    }
}

/// A strided f32 matrix view for [`matmul`].
#[derive(Clone, Copy)]
pub(crate) struct View<'s> {
    data: &'s [f32],
    row_stride: usize,
    col_stride: usize,
}

impl<'s> View<'s> {
    pub(crate) fn row_major(data: &'s [f32], cols: usize) -> Self {
        View { data, row_stride: cols, col_stride: 1 }
    }
    pub(crate) fn transposed(data: &'s [f32], cols: usize) -> Self {
        View { data, row_stride: 1, col_stride: cols }
    }
    fn check(&self, rows: usize, cols: usize) {
        let last = (rows - 1) * self.row_stride + (cols - 1) * self.col_stride;
        assert!(last < self.data.len(), "matmul operand out of bounds");
    }
}

/// dst[m×n] (row-major) = a[m×k]·b[k×n] (+ dst when `accumulate`), single-threaded (callers are
/// already parallel), f32 accumulation.
pub(crate) fn matmul(m: usize, n: usize, k: usize, dst: &mut [f32], a: View<'_>, b: View<'_>, accumulate: bool) {
    matmul_with(m, n, k, dst, a, b, accumulate, gemm::Parallelism::None)
}

/// [`matmul`] with the GEMM's own parallelism (for whole-matrix products).
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_with(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    a: View<'_>,
    b: View<'_>,
    accumulate: bool,
    par: gemm::Parallelism,
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    assert!(dst.len() >= m * n, "matmul destination too small");
    a.check(m, k);
    b.check(k, n);
    // SAFETY: every index the GEMM touches was bounds-checked above; dst does not alias a or b
    // (it is a distinct &mut).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}

/// Everything a tile computation reads, validated.
struct Problem<'a, T: Element> {
    inputs: &'a HostInputs<'a, T>,
    prep: Prepared,
    softcap: Option<f32>,
    terms: LossTerms,
}

impl<'a, T: Element> Problem<'a, T> {
    fn new(inputs: &'a HostInputs<'a, T>, opts: &Options) -> Result<Self> {
        let prep = inputs.prepare(opts)?;
        let terms = LossTerms::new(opts, prep.shape.v, prep.total_class_weight);
        Ok(Problem { inputs, prep, softcap: opts.softcap, terms })
    }

    fn token_blocks(&self, block: usize) -> usize {
        self.prep.shape.n.div_ceil(block)
    }
    fn vocab_blocks(&self) -> usize {
        self.prep.shape.v.div_ceil(VOCAB_BLOCK)
    }
    fn token_range(&self, b: usize, block: usize) -> Range<usize> {
        b * block..((b + 1) * block).min(self.prep.shape.n)
    }
    fn vocab_range(&self, b: usize) -> Range<usize> {
        b * VOCAB_BLOCK..((b + 1) * VOCAB_BLOCK).min(self.prep.shape.v)
    }
    fn class_weight(&self, j: usize) -> f32 {
        self.inputs.class_weights.map_or(1.0, |w| w[j])
    }

    /// tile[rows×cols] = softcap(E[rows]·C[cols]ᵀ + b[cols]).
    fn logits(&self, e_rows: &[f32], c_rows: &[f32], cols: &Range<usize>, tile: &mut Vec<f32>) {
        let (d, nr, nc) = (self.prep.shape.d, e_rows.len() / self.prep.shape.d, cols.len());
        tile.resize(nr * nc, 0.0);
        matmul(nr, nc, d, tile, View::row_major(e_rows, d), View::transposed(c_rows, d), false);
        if self.inputs.bias.is_none() && self.softcap.is_none() {
            return;
        }
        for row in tile.chunks_exact_mut(nc) {
            for (x, j) in row.iter_mut().zip(cols.clone()) {
                let b = self.inputs.bias.map_or(0.0, |b| b[j].to_f32());
                *x = cap_logit(*x + b, self.softcap);
            }
        }
    }

    /// Replace a logit tile by ∂L/∂x in place.
    fn logits_to_grad(&self, tile: &mut [f32], rows: &Range<usize>, cols: &Range<usize>, coeffs: &[GradCoeffs]) {
        for (row, i) in tile.chunks_exact_mut(cols.len()).zip(rows.clone()) {
            let c = &coeffs[i];
            if c.p_scale == 0.0 && c.target == 0.0 && c.smooth == 0.0 {
                row.fill(0.0);
                continue;
            }
            let t = self.prep.targets[i];
            for (x, j) in row.iter_mut().zip(cols.clone()) {
                *x = c.grad(*x, j as i32 == t, self.class_weight(j), self.softcap);
            }
        }
    }
}

#[derive(Default)]
struct Scratch {
    e: Vec<f32>,
    c: Vec<f32>,
    tile: Vec<f32>,
    acc: Vec<f32>,
}

/// Fused forward into caller-owned buffers.
pub fn forward_into<T: Element>(
    inputs: &HostInputs<'_, T>,
    opts: &Options,
    out: ForwardBuffers<'_>,
) -> Result<ForwardScalars> {
    let p = Problem::new(inputs, opts)?;
    let n = p.prep.shape.n;
    check_len("lse", "[N]", n, out.lse.len())?;
    match (&out.per_token_loss, opts.reduction) {
        (Some(buf), _) => check_len("per_token_loss", "[N]", n, buf.len())?,
        (None, Reduction::None) => {
            return Err(Error::ShapeMismatch {
                arg: "per_token_loss",
                layout: "[N] (required for reduction none)".into(),
                expected: n,
                got: 0,
            })
        }
        (None, _) => {}
    }
    let d = p.prep.shape.d;
    // Work items: (token block, vocabulary segment); each yields (stats, target logit) per row.
    let vblocks = p.vocab_blocks();
    let segments = FORWARD_VOCAB_SEGMENTS.min(vblocks);
    let blocks_per_segment = vblocks.div_ceil(segments);
    let tblocks = p.token_blocks(TOKEN_BLOCK);
    let partials: Vec<Vec<(RowStats, f32)>> = (0..tblocks * segments)
        .into_par_iter()
        .map_init(Scratch::default, |s, item| {
            let (tb, seg) = (item / segments, item % segments);
            let rows = p.token_range(tb, TOKEN_BLOCK);
            let e_rows = rows_f32(inputs.e, &rows, d, &mut s.e);
            let mut acc = vec![(RowStats::EMPTY, f32::NAN); rows.len()];
            for vb in seg * blocks_per_segment..((seg + 1) * blocks_per_segment).min(vblocks) {
                let cols = p.vocab_range(vb);
                let c_rows = rows_f32(inputs.c, &cols, d, &mut s.c);
                p.logits(e_rows, c_rows, &cols, &mut s.tile);
                let w = inputs.class_weights.map(|w| &w[cols.clone()]);
                for ((r, z), (stats, target_logit)) in s.tile.chunks_exact(cols.len()).enumerate().zip(&mut acc) {
                    stats.fold(z, cols.start, w);
                    let t = p.prep.targets[rows.start + r];
                    if t >= 0 && cols.contains(&(t as usize)) {
                        *target_logit = z[t as usize - cols.start];
                    }
                }
            }
            acc
        })
        .collect();

    let mut total = 0.0f64;
    let mut correct = 0usize;
    let mut per_token = out.per_token_loss;
    for tb in 0..tblocks {
        let rows = p.token_range(tb, TOKEN_BLOCK);
        for (r, i) in rows.clone().enumerate() {
            let mut stats = RowStats::EMPTY;
            let mut target_logit = f32::NAN;
            for part in &partials[tb * segments..(tb + 1) * segments] {
                stats.merge(part[r].0);
                if !part[r].1.is_nan() {
                    target_logit = part[r].1;
                }
            }
            let lse = stats.lse();
            out.lse[i] = lse;
            let t = p.prep.targets[i];
            let loss = if t < 0 {
                0.0
            } else {
                correct += (stats.argmax == t as u32) as usize;
                p.terms.token_loss(lse, target_logit, p.class_weight(t as usize), stats.weighted_logit_sum)
            };
            if let Some(buf) = per_token.as_deref_mut() {
                buf[i] = loss;
            }
            total += loss as f64;
        }
    }
    let loss = (total * p.prep.reduction_scale(opts.reduction)) as f32;
    let accuracy = opts.return_accuracy.then(|| (correct as f64 / p.prep.active_tokens as f64) as f32);
    Ok(ForwardScalars { loss, accuracy })
}

/// Fused forward with owned outputs.
pub fn forward<T: Element>(inputs: &HostInputs<'_, T>, opts: &Options) -> Result<ForwardOutput> {
    let n = inputs.shape.n;
    let mut lse = vec![0.0; n];
    let mut per_token = opts.wants_per_token_loss().then(|| vec![0.0; n]);
    let scalars =
        forward_into(inputs, opts, ForwardBuffers { lse: &mut lse, per_token_loss: per_token.as_deref_mut() })?;
    Ok(ForwardOutput { loss: scalars.loss, lse, per_token_loss: per_token, accuracy: scalars.accuracy })
}

/// Fused backward into caller-owned gradient buffers. `lse` is forward's output for the same
/// inputs and options.
pub fn backward_into<T: Element>(
    inputs: &HostInputs<'_, T>,
    opts: &Options,
    lse: &[f32],
    grad_output: GradOutput<'_>,
    grads: GradBuffers<'_, T>,
) -> Result<()> {
    let p = Problem::new(inputs, opts)?;
    let s = p.prep.shape;
    check_len("lse", "[N]", s.n, lse.len())?;
    if let Some(de) = &grads.de {
        check_len("de", "[N, D]", s.n * s.d, de.len())?;
    }
    if let Some(dc) = &grads.dc {
        check_len("dc", "[V, D]", s.v * s.d, dc.len())?;
    }
    if let Some(db) = &grads.dbias {
        check_len("dbias", "[V]", s.v, db.len())?;
    }
    let g = p.prep.token_grad_scales(opts.reduction, grad_output)?;
    let coeffs: Vec<GradCoeffs> = (0..s.n)
        .map(|i| {
            let t = p.prep.targets[i];
            let w_t = if t < 0 { 0.0 } else { p.class_weight(t as usize) };
            p.terms.grad_coeffs(g[i], lse[i], w_t)
        })
        .collect();
    let d = s.d;

    if let Some(de) = grads.de {
        // Pass 1: each token block owns its rows of dE.
        de.par_chunks_mut(TOKEN_BLOCK * d).enumerate().for_each_init(Scratch::default, |sc, (tb, de_rows)| {
            let rows = p.token_range(tb, TOKEN_BLOCK);
            let e_rows = rows_f32(inputs.e, &rows, d, &mut sc.e);
            sc.acc.clear();
            sc.acc.resize(rows.len() * d, 0.0);
            for vb in 0..p.vocab_blocks() {
                let cols = p.vocab_range(vb);
                let c_rows = rows_f32(inputs.c, &cols, d, &mut sc.c);
                p.logits(e_rows, c_rows, &cols, &mut sc.tile);
                p.logits_to_grad(&mut sc.tile, &rows, &cols, &coeffs);
                matmul(
                    rows.len(),
                    d,
                    cols.len(),
                    &mut sc.acc,
                    View::row_major(&sc.tile, cols.len()),
                    View::row_major(c_rows, d),
                    true,
                );
            }
            for (o, &x) in de_rows.iter_mut().zip(&sc.acc) {
                *o = T::from_f32(x);
            }
        });
    }

    if grads.dc.is_none() && grads.dbias.is_none() {
        return Ok(());
    }
    // Pass 2: each vocabulary block owns its rows of dC and its part of db.
    let vblocks = p.vocab_blocks();
    let mut dc_chunks: Vec<Option<&mut [T]>> = match grads.dc {
        Some(dc) => dc.chunks_mut(VOCAB_BLOCK * d).map(Some).collect(),
        None => (0..vblocks).map(|_| None).collect(),
    };
    let mut db_chunks: Vec<Option<&mut [T]>> = match grads.dbias {
        Some(db) => db.chunks_mut(VOCAB_BLOCK).map(Some).collect(),
        None => (0..vblocks).map(|_| None).collect(),
    };
    let want_dc = dc_chunks[0].is_some();
    dc_chunks.par_iter_mut().zip(db_chunks.par_iter_mut()).enumerate().for_each_init(
        Scratch::default,
        |sc, (vb, (dc_rows, db_part))| {
            let cols = p.vocab_range(vb);
            let c_rows = rows_f32(inputs.c, &cols, d, &mut sc.c);
            sc.acc.clear();
            if want_dc {
                sc.acc.resize(cols.len() * d, 0.0);
            }
            let mut db_acc = vec![0.0f64; cols.len()];
            for tb in 0..p.token_blocks(DC_TOKEN_BLOCK) {
                let rows = p.token_range(tb, DC_TOKEN_BLOCK);
                let e_rows = rows_f32(inputs.e, &rows, d, &mut sc.e);
                p.logits(e_rows, c_rows, &cols, &mut sc.tile);
                p.logits_to_grad(&mut sc.tile, &rows, &cols, &coeffs);
                for row in sc.tile.chunks_exact(cols.len()) {
                    for (a, &x) in db_acc.iter_mut().zip(row) {
                        *a += x as f64;
                    }
                }
                if want_dc {
                    matmul(
                        cols.len(),
                        d,
                        rows.len(),
                        &mut sc.acc,
                        View::transposed(&sc.tile, cols.len()),
                        View::row_major(e_rows, d),
                        true,
                    );
                }
            }
            if let Some(dc_rows) = dc_rows {
                for (o, &x) in dc_rows.iter_mut().zip(&sc.acc) {
                    *o = T::from_f32(x);
                }
            }
            if let Some(db) = db_part {
                for (o, &x) in db.iter_mut().zip(&db_acc) {
                    *o = T::from_f64(x);
                }
            }
        },
    );
    Ok(())
}

/// Fused backward with owned gradients (dE, dC, and db when the inputs have a bias).
pub fn backward<T: Element>(
    inputs: &HostInputs<'_, T>,
    opts: &Options,
    lse: &[f32],
    grad_output: GradOutput<'_>,
) -> Result<Gradients<T>> {
    let s = inputs.shape;
    let mut de = vec![T::default(); s.n * s.d];
    let mut dc = vec![T::default(); s.v * s.d];
    let mut dbias = inputs.bias.map(|_| vec![T::default(); s.v]);
    backward_into(
        inputs,
        opts,
        lse,
        grad_output,
        GradBuffers { de: Some(&mut de), dc: Some(&mut dc), dbias: dbias.as_deref_mut() },
    )?;
    Ok(Gradients { de, dc, dbias })
}
