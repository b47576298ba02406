//! Loss phases: the forward as per-token partial statistics over a vocabulary range plus a finish
//! step, and the backward on a vocabulary slice — for callers that hold only a slice of the
//! classifier (vocabulary-parallel training: each of P workers holds V/P rows of C).
//!
//! ```text
//! rank k:   partials_k = forward_partials(E, C_k, slice_k)        O(N) statistics
//! everyone: merged = partials_0.merge(partials_1)...               in rank order (deterministic)
//!           out    = finish(merged, targets)                      lse, loss, accuracy
//! rank k:   grads_k = backward_slice(E, C_k, slice_k, lse, merged) dC_k, db_k, and dE's share
//!           dE = Σ_k grads_k.de_partial (f32), rounded once
//! ```
//!
//! [`crate::cpu::forward`] and [`crate::cpu::backward`] are these phases over one slice holding
//! the whole vocabulary. Within a range, statistics are folded over fixed segments of
//! [`SEGMENT_ROWS`] vocabulary rows (global coordinates) and the segments merged in order, so a
//! split whose ranges are single segments reproduces the one-range forward bitwise; any other
//! split differs only by the rounding of the merge order (≤ 1e-6 relative), and is itself
//! bitwise reproducible.

use crate::error::{Error, Result};
use crate::options::{Options, Reduction};
use crate::outputs::ForwardBuffers;
use crate::problem::{check_len, GradOutput};
use crate::spec::{LossTerms, RowStats};

/// Vocabulary rows of one segment of the forward's statistics (a multiple of the tile's
/// vocabulary block); slices that start on a multiple of it keep the one-range result's segments.
pub const SEGMENT_ROWS: usize = 4096;

/// Where a classifier slice sits in the whole vocabulary: its first row and the vocabulary size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VocabSlice {
    pub offset: usize,
    pub total: usize,
}

impl VocabSlice {
    /// The whole vocabulary of `v` rows as one slice.
    pub fn whole(v: usize) -> Self {
        VocabSlice { offset: 0, total: v }
    }

    /// The slice holds rows [offset, offset + rows) of the vocabulary.
    pub fn check(&self, rows: usize) -> Result<()> {
        if self.total > i32::MAX as usize || self.offset.checked_add(rows).is_none_or(|end| end > self.total) {
            return Err(Error::InvalidOption {
                name: "vocab_slice",
                value: format!("rows [{}, {}) of {}", self.offset, self.offset.saturating_add(rows), self.total),
                reason: "the slice must lie inside the vocabulary",
            });
        }
        Ok(())
    }
}

/// Per-token results of the forward over one vocabulary range, mergeable with the next range's.
#[derive(Clone, Debug, PartialEq)]
pub struct Partials {
    /// Softmax statistics per token over the range (argmax in global vocabulary indices).
    pub stats: Vec<RowStats>,
    /// z_t where token i's target lies in the range, 0 elsewhere (exactly one range owns each
    /// target, so merging adds).
    pub target_logit: Vec<f32>,
    /// w_t (1 without class weights) where the target lies in the range, 0 elsewhere.
    pub target_weight: Vec<f32>,
    /// Σ_j w_j over the range's rows (their count without class weights).
    pub class_weight_sum: f64,
}

impl Partials {
    /// The partials of an empty range, for `n` tokens.
    pub fn empty(n: usize) -> Self {
        Partials {
            stats: vec![RowStats::EMPTY; n],
            target_logit: vec![0.0; n],
            target_weight: vec![0.0; n],
            class_weight_sum: 0.0,
        }
    }

    /// Merge the partials of the range that follows (in vocabulary order, for reproducibility).
    pub fn merge(&mut self, next: &Partials) -> Result<()> {
        check_len("partials", "[N]", self.stats.len(), next.stats.len())?;
        for (a, b) in self.stats.iter_mut().zip(&next.stats) {
            a.merge(*b);
        }
        for (a, b) in self.target_logit.iter_mut().zip(&next.target_logit) {
            *a += *b;
        }
        for (a, b) in self.target_weight.iter_mut().zip(&next.target_weight) {
            *a += *b;
        }
        self.class_weight_sum += next.class_weight_sum;
        Ok(())
    }

    pub fn tokens(&self) -> usize {
        self.stats.len()
    }
}

/// Σ_i w_{t_i} over non-ignored tokens (mean's divisor) and their count.
fn active_weight(targets: &[i32], target_weight: &[f32]) -> (f64, usize) {
    let active = targets.iter().zip(target_weight).filter(|(&t, _)| t >= 0);
    active.fold((0.0, 0), |(w, k), (_, &wt)| (w + wt as f64, k + 1))
}

/// ∂L/∂loss_i for every token, the mean's divisor taken from the tokens' target weights.
pub(crate) fn token_grad_scales(
    targets: &[i32],
    target_weight: &[f32],
    reduction: Reduction,
    grad_output: GradOutput<'_>,
) -> Result<Vec<f32>> {
    let (weight, _) = active_weight(targets, target_weight);
    crate::problem::token_grad_scales(targets, weight, reduction, grad_output)
}

/// The finish step: lse, the per-token loss and the reduced loss and accuracy from the merged
/// partials of the whole vocabulary. `targets` are the effective targets (after shift and
/// ignore_index, -1 ignored: [`crate::problem::effective_targets`]); `vocab` the vocabulary size.
pub fn finish(
    merged: &Partials,
    targets: &[i32],
    vocab: usize,
    opts: &Options,
    out: ForwardBuffers<'_>,
) -> Result<crate::ForwardScalars> {
    let n = merged.tokens();
    check_len("targets", "[N]", n, targets.len())?;
    check_len("lse", "[N]", n, out.lse.len())?;
    let mut per_token = out.per_token_loss;
    match (&per_token, opts.reduction) {
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
    let terms = LossTerms::new(opts, vocab, merged.class_weight_sum);
    let (mut total, mut correct) = (0.0f64, 0usize);
    for i in 0..n {
        let stats = merged.stats[i];
        let lse = stats.lse();
        out.lse[i] = lse;
        let t = targets[i];
        let loss = if t < 0 {
            0.0
        } else {
            correct += (stats.argmax == t as u32) as usize;
            terms.token_loss(lse, merged.target_logit[i], merged.target_weight[i], stats.weighted_logit_sum)
        };
        if let Some(buf) = per_token.as_deref_mut() {
            buf[i] = loss;
        }
        total += loss as f64;
    }
    let (weight, active) = active_weight(targets, &merged.target_weight);
    let loss = match opts.reduction {
        Reduction::Mean => total * (1.0 / weight),
        Reduction::Sum | Reduction::None => total,
    } as f32;
    let accuracy = opts.return_accuracy.then(|| (correct as f64 / active as f64) as f32);
    Ok(crate::ForwardScalars { loss, accuracy })
}

pub use super::fused::{backward_slice, forward_partials, SliceGradBuffers};

#[cfg(test)]
#[path = "vocab_parallel_tests.rs"]
mod tests;
