//! The fast CPU path: never holds the N×V logits. It works on a vocabulary slice (the classifier
//! rows a caller holds, [`VocabSlice`]); the whole vocabulary is one slice ([`forward`],
//! [`backward`]), and vocabulary-parallel callers use the steps in [`super::vocab_parallel`].
//!
//! Forward streams the slice in blocks of `VOCAB_BLOCK` rows of C for each block of
//! `TOKEN_BLOCK` tokens: one f32 GEMM per tile, then the tile is folded into each token's running
//! (max, sum-exp, Σw·z, argmax). Work items are (token block, segment of
//! [`super::vocab_parallel::SEGMENT_ROWS`] rows), merged in vocabulary order, so few tokens still use
//! every core and the result does not depend on the machine.
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

use super::gemm::{matmul, rows_f32, View};
use super::pool::in_pool;
use super::vocab_parallel::{finish, token_grad_scales, Partials, VocabSlice, SEGMENT_ROWS};
use crate::error::Result;
use crate::options::Options;
use crate::outputs::{ForwardBuffers, ForwardOutput, ForwardScalars, GradBuffers, Gradients};
use crate::problem::{check_class_weights, check_len, effective_targets, GradOutput, HostInputs};
use crate::spec::{cap_logit, GradCoeffs, LossTerms, RowStats};
use crate::Element;

/// Tokens per tile in the forward and in backward pass 1 (dE).
pub const TOKEN_BLOCK: usize = 128;
/// Vocabulary rows per tile.
pub const VOCAB_BLOCK: usize = 512;
/// Tokens per tile in backward pass 2 (dC): the inner dimension of its Gᵀ·E product.
pub const DC_TOKEN_BLOCK: usize = 512;

const _: () = assert!(SEGMENT_ROWS.is_multiple_of(VOCAB_BLOCK));

/// The inputs of one slice, validated: E [N, D], the slice's rows of C, bias and class weights,
/// and every token's effective target in global vocabulary indices.
pub(super) struct Problem<'a, T: Element> {
    pub(super) inputs: &'a HostInputs<'a, T>,
    slice: VocabSlice,
    pub(super) targets: Vec<i32>,
    softcap: Option<f32>,
}

impl<'a, T: Element> Problem<'a, T> {
    pub(super) fn new(inputs: &'a HostInputs<'a, T>, slice: VocabSlice, opts: &Options) -> Result<Self> {
        let s = inputs.shape;
        s.validate_with(opts)?;
        slice.check(s.v)?;
        check_len("e", "[N, D]", s.n * s.d, inputs.e.len())?;
        check_len("c", "[V, D]", s.v * s.d, inputs.c.len())?;
        if let Some(b) = inputs.bias {
            check_len("bias", "[V]", s.v, b.len())?;
        }
        if let Some(w) = inputs.class_weights {
            check_class_weights(w, s.v)?;
        }
        check_len("targets", "[N]", s.n, inputs.targets.len())?;
        let targets = effective_targets(inputs.targets, slice.total, opts)?;
        Ok(Problem { inputs, slice, targets, softcap: opts.softcap })
    }

    pub(super) fn n(&self) -> usize {
        self.inputs.shape.n
    }
    pub(super) fn d(&self) -> usize {
        self.inputs.shape.d
    }
    pub(super) fn rows(&self) -> usize {
        self.inputs.shape.v
    }
    fn token_blocks(&self, block: usize) -> usize {
        self.n().div_ceil(block)
    }
    fn token_range(&self, b: usize, block: usize) -> Range<usize> {
        b * block..((b + 1) * block).min(self.n())
    }
    pub(super) fn vocab_blocks(&self) -> usize {
        self.rows().div_ceil(VOCAB_BLOCK)
    }
    /// Local rows of vocabulary block `b` (blocks start at the slice's first row).
    pub(super) fn vocab_range(&self, b: usize) -> Range<usize> {
        b * VOCAB_BLOCK..((b + 1) * VOCAB_BLOCK).min(self.rows())
    }
    pub(super) fn class_weight(&self, local: usize) -> f32 {
        self.inputs.class_weights.map_or(1.0, |w| w[local])
    }
    /// Token i's target as a local row, if this slice holds it.
    pub(super) fn local_target(&self, i: usize) -> Option<usize> {
        let t = usize::try_from(self.targets[i]).ok()?;
        (t >= self.slice.offset && t < self.slice.offset + self.rows()).then(|| t - self.slice.offset)
    }

    /// Local block ranges of each segment: segments cut at global multiples of SEGMENT_ROWS.
    pub(super) fn segments(&self) -> Vec<Range<usize>> {
        let first = self.slice.offset / SEGMENT_ROWS;
        let last = (self.slice.offset + self.rows()).div_ceil(SEGMENT_ROWS);
        let block_of = |global: usize| {
            (global.clamp(self.slice.offset, self.slice.offset + self.rows()) - self.slice.offset).div_ceil(VOCAB_BLOCK)
        };
        (first..last)
            .map(|s| block_of(s * SEGMENT_ROWS)..block_of((s + 1) * SEGMENT_ROWS))
            .filter(|r| !r.is_empty())
            .collect()
    }

    /// tile[rows×cols] = softcap(E\[rows\]·C\[cols\]ᵀ + b\[cols\]) (cols local).
    pub(super) fn logits(&self, e_rows: &[f32], c_rows: &[f32], cols: &Range<usize>, tile: &mut Vec<f32>) {
        let (d, nr, nc) = (self.d(), e_rows.len() / self.d(), cols.len());
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

    /// Replace a logit tile by ∂L/∂x in place; `coeffs` are the rows' coefficients, `coeffs[k]`
    /// for token `rows.start + k`.
    pub(super) fn logits_to_grad(
        &self,
        tile: &mut [f32],
        rows: &Range<usize>,
        cols: &Range<usize>,
        coeffs: &[GradCoeffs],
    ) {
        for ((row, i), c) in tile.chunks_exact_mut(cols.len()).zip(rows.clone()).zip(coeffs) {
            if c.p_scale == 0.0 && c.target == 0.0 && c.smooth == 0.0 {
                row.fill(0.0);
                continue;
            }
            let t = self.local_target(i);
            for (x, j) in row.iter_mut().zip(cols.clone()) {
                *x = c.grad(*x, Some(j) == t, self.class_weight(j), self.softcap);
            }
        }
    }

    /// The partials of the slice: (token block × segment) items, segments merged in order.
    fn partials(&self) -> Partials {
        let n = self.n();
        let segments = self.segments();
        let per_block: Vec<Vec<(RowStats, f32)>> = (0..self.token_blocks(TOKEN_BLOCK) * segments.len())
            .into_par_iter()
            .map_init(Scratch::default, |s, item| {
                let (tb, seg) = (item / segments.len(), item % segments.len());
                let rows = self.token_range(tb, TOKEN_BLOCK);
                let e_rows = rows_f32(self.inputs.e, &rows, self.d(), &mut s.e);
                let mut acc = vec![(RowStats::EMPTY, 0.0f32); rows.len()];
                for vb in segments[seg].clone() {
                    let cols = self.vocab_range(vb);
                    let c_rows = rows_f32(self.inputs.c, &cols, self.d(), &mut s.c);
                    self.logits(e_rows, c_rows, &cols, &mut s.tile);
                    let w = self.inputs.class_weights.map(|w| &w[cols.clone()]);
                    for ((r, z), (stats, target_logit)) in s.tile.chunks_exact(cols.len()).enumerate().zip(&mut acc) {
                        stats.fold(z, self.slice.offset + cols.start, w);
                        if let Some(t) = self.local_target(rows.start + r).filter(|t| cols.contains(t)) {
                            *target_logit = z[t - cols.start];
                        }
                    }
                }
                acc
            })
            .collect();
        let mut out = Partials::empty(n);
        for tb in 0..self.token_blocks(TOKEN_BLOCK) {
            for (r, i) in self.token_range(tb, TOKEN_BLOCK).enumerate() {
                for part in &per_block[tb * segments.len()..(tb + 1) * segments.len()] {
                    out.stats[i].merge(part[r].0);
                    out.target_logit[i] += part[r].1;
                }
                if let Some(t) = self.local_target(i) {
                    out.target_weight[i] = self.class_weight(t);
                }
            }
        }
        out.class_weight_sum = self.class_weight_sum();
        out
    }

    /// Each token's target weight w_t (its class weight, 1 without; 0 for ignored tokens and
    /// targets outside the slice).
    pub(super) fn target_weights(&self) -> Vec<f32> {
        (0..self.n()).map(|i| self.local_target(i).map_or(0.0, |t| self.class_weight(t))).collect()
    }

    /// The whole-vocabulary gradient buffers have this problem's sizes.
    pub(super) fn check_grad_buffers(&self, grads: &GradBuffers<'_, T>) -> Result<()> {
        check_grads(
            &grads.de.as_deref().map(<[T]>::len),
            &grads.dc.as_deref().map(<[T]>::len),
            &grads.dbias.as_deref().map(<[T]>::len),
            self.n(),
            self.d(),
            self.rows(),
        )
    }

    /// Σ_j w_j over the slice's rows, in f64 (exact whenever the weights span less than 2^29).
    pub(super) fn class_weight_sum(&self) -> f64 {
        match self.inputs.class_weights {
            Some(w) => w.iter().map(|&x| x as f64).sum(),
            None => self.rows() as f64,
        }
    }

    /// The per-token gradient coefficients from each token's target weight w_t and W = Σ_j w_j,
    /// both over the whole vocabulary.
    fn grad_coeffs(
        &self,
        opts: &Options,
        lse: &[f32],
        target_weight: &[f32],
        class_weight_sum: f64,
        go: GradOutput<'_>,
    ) -> Result<Vec<GradCoeffs>> {
        check_len("lse", "[N]", self.n(), lse.len())?;
        let g = token_grad_scales(&self.targets, target_weight, opts.reduction, go)?;
        let terms = LossTerms::new(opts, self.slice.total, class_weight_sum);
        Ok((0..self.n()).map(|i| terms.grad_coeffs(g[i], lse[i], target_weight[i])).collect())
    }

    /// Pass 1: each token block owns its rows of dE's share from this slice (f32 accumulation);
    /// `store` writes a finished block.
    fn de_pass(&self, coeffs: &[GradCoeffs], store: impl Fn(usize, &[f32]) + Sync) {
        let d = self.d();
        (0..self.token_blocks(TOKEN_BLOCK)).into_par_iter().for_each_init(Scratch::default, |sc, tb| {
            let rows = self.token_range(tb, TOKEN_BLOCK);
            let e_rows = rows_f32(self.inputs.e, &rows, d, &mut sc.e);
            sc.acc.clear();
            sc.acc.resize(rows.len() * d, 0.0);
            for vb in 0..self.vocab_blocks() {
                let cols = self.vocab_range(vb);
                let c_rows = rows_f32(self.inputs.c, &cols, d, &mut sc.c);
                self.logits(e_rows, c_rows, &cols, &mut sc.tile);
                self.logits_to_grad(&mut sc.tile, &rows, &cols, &coeffs[rows.clone()]);
                let g = View::row_major(&sc.tile, cols.len());
                matmul(rows.len(), d, cols.len(), &mut sc.acc, g, View::row_major(c_rows, d), true);
            }
            store(tb, &sc.acc);
        });
    }

    /// Pass 2: each vocabulary block owns its rows of dC and its part of db.
    fn dc_pass(&self, coeffs: &[GradCoeffs], dc: Option<&mut [T]>, dbias: Option<&mut [T]>) {
        let (d, vblocks) = (self.d(), self.vocab_blocks());
        let mut dc_chunks: Vec<Option<&mut [T]>> = match dc {
            Some(dc) => dc.chunks_mut(VOCAB_BLOCK * d).map(Some).collect(),
            None => (0..vblocks).map(|_| None).collect(),
        };
        let mut db_chunks: Vec<Option<&mut [T]>> = match dbias {
            Some(db) => db.chunks_mut(VOCAB_BLOCK).map(Some).collect(),
            None => (0..vblocks).map(|_| None).collect(),
        };
        let want_dc = dc_chunks[0].is_some();
        dc_chunks.par_iter_mut().zip(db_chunks.par_iter_mut()).enumerate().for_each_init(
            Scratch::default,
            |sc, (vb, (dc_rows, db_part))| {
                let cols = self.vocab_range(vb);
                let c_rows = rows_f32(self.inputs.c, &cols, d, &mut sc.c);
                sc.acc.clear();
                if want_dc {
                    sc.acc.resize(cols.len() * d, 0.0);
                }
                let mut db_acc = vec![0.0f64; cols.len()];
                for tb in 0..self.token_blocks(DC_TOKEN_BLOCK) {
                    let rows = self.token_range(tb, DC_TOKEN_BLOCK);
                    let e_rows = rows_f32(self.inputs.e, &rows, d, &mut sc.e);
                    self.logits(e_rows, c_rows, &cols, &mut sc.tile);
                    self.logits_to_grad(&mut sc.tile, &rows, &cols, &coeffs[rows.clone()]);
                    for row in sc.tile.chunks_exact(cols.len()) {
                        for (a, &x) in db_acc.iter_mut().zip(row) {
                            *a += x as f64;
                        }
                    }
                    if want_dc {
                        let gt = View::transposed(&sc.tile, cols.len());
                        matmul(cols.len(), d, rows.len(), &mut sc.acc, gt, View::row_major(e_rows, d), true);
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
    }
}

#[derive(Default)]
pub(super) struct Scratch {
    pub(super) e: Vec<f32>,
    pub(super) c: Vec<f32>,
    pub(super) tile: Vec<f32>,
    pub(super) acc: Vec<f32>,
}

/// Phase 1 on a slice: `inputs` hold E, the slice's rows of C (and of bias and class weights)
/// and the global targets; see [`super::vocab_parallel`].
pub fn forward_partials<T: Element>(inputs: &HostInputs<'_, T>, slice: VocabSlice, opts: &Options) -> Result<Partials> {
    let p = Problem::new(inputs, slice, opts)?;
    Ok(in_pool(|| p.partials()))
}

/// Where [`backward_slice`] writes: dE's share from this slice in f32 (to be summed over slices
/// and rounded once), the slice's rows of dC and db in the input dtype; `None` skips one.
#[derive(Debug)]
pub struct SliceGradBuffers<'a, T: Element> {
    /// [N, D], f32, overwritten.
    pub de_partial: Option<&'a mut [f32]>,
    /// [rows of the slice, D]
    pub dc: Option<&'a mut [T]>,
    /// [rows of the slice]
    pub dbias: Option<&'a mut [T]>,
}

/// The backward on a slice, from the lse of the whole vocabulary and the merged partials.
pub fn backward_slice<T: Element>(
    inputs: &HostInputs<'_, T>,
    slice: VocabSlice,
    opts: &Options,
    lse: &[f32],
    merged: &Partials,
    grad_output: GradOutput<'_>,
    out: SliceGradBuffers<'_, T>,
) -> Result<()> {
    let p = Problem::new(inputs, slice, opts)?;
    let (n, d, rows) = (p.n(), p.d(), p.rows());
    check_grads(
        &out.de_partial.as_deref().map(<[f32]>::len),
        &out.dc.as_deref().map(<[T]>::len),
        &out.dbias.as_deref().map(<[T]>::len),
        n,
        d,
        rows,
    )?;
    check_len("partials", "[N]", n, merged.tokens())?;
    let coeffs = p.grad_coeffs(opts, lse, &merged.target_weight, merged.class_weight_sum, grad_output)?;
    let copy = |dst: &mut [f32], acc: &[f32]| dst.copy_from_slice(acc);
    in_pool(|| gradients(&p, &coeffs, out.de_partial, copy, out.dc, out.dbias));
    Ok(())
}

/// Both backward passes; dE's finished blocks (f32) go through `store` into `de`'s element type.
fn gradients<T: Element, D: Send>(
    p: &Problem<'_, T>,
    coeffs: &[GradCoeffs],
    de: Option<&mut [D]>,
    store: impl Fn(&mut [D], &[f32]) + Sync,
    dc: Option<&mut [T]>,
    dbias: Option<&mut [T]>,
) {
    if let Some(de) = de {
        let blocks = std::sync::Mutex::new(de.chunks_mut(TOKEN_BLOCK * p.d()).map(Some).collect::<Vec<_>>());
        p.de_pass(coeffs, |tb, acc| {
            let dst = blocks.lock().unwrap_or_else(|e| e.into_inner())[tb].take().expect("each block stored once");
            store(dst, acc);
        });
    }
    if dc.is_some() || dbias.is_some() {
        p.dc_pass(coeffs, dc, dbias);
    }
}

fn check_grads(de: &Option<usize>, dc: &Option<usize>, db: &Option<usize>, n: usize, d: usize, v: usize) -> Result<()> {
    for (arg, layout, len, want) in [("de", "[N, D]", de, n * d), ("dc", "[V, D]", dc, v * d), ("dbias", "[V]", db, v)]
    {
        if let Some(len) = len {
            check_len(arg, layout, want, *len)?;
        }
    }
    Ok(())
}

/// Fused forward into caller-owned buffers.
pub fn forward_into<T: Element>(
    inputs: &HostInputs<'_, T>,
    opts: &Options,
    out: ForwardBuffers<'_>,
) -> Result<ForwardScalars> {
    let p = Problem::new(inputs, VocabSlice::whole(inputs.shape.v), opts)?;
    finish(&in_pool(|| p.partials()), &p.targets, inputs.shape.v, opts, out)
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
    let p = Problem::new(inputs, VocabSlice::whole(inputs.shape.v), opts)?;
    p.check_grad_buffers(&grads)?;
    let coeffs = p.grad_coeffs(opts, lse, &p.target_weights(), p.class_weight_sum(), grad_output)?;
    let round = |dst: &mut [T], acc: &[f32]| dst.iter_mut().zip(acc).for_each(|(o, &x)| *o = T::from_f32(x));
    in_pool(|| gradients(&p, &coeffs, grads.de, round, grads.dc, grads.dbias));
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
