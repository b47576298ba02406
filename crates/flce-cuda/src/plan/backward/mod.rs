//! The backward plan: vocabulary-chunk-outer, with G formed per chunk by a family.
//!
//! For each chunk of `vocab_chunk` rows of C and `token_chunk` tokens a family writes G
//! [token_chunk, ldg] in the input dtype, and cuBLAS computes dE_acc += G·C_chunk and
//! dC_chunk = Gᵀ·E with f32 accumulation. When one token chunk covers all N, every dC chunk is
//! finished in one product and rounded once; dE accumulates in f32 across vocabulary chunks (in
//! dE itself for f32 inputs). The chunk sizes come from the caller's workspace budget, by default
//! 10% of the gradient bytes.
//!
//! dE's f32 accumulator (N·D·4 bytes, 134 MB at Llama 3) would take most of that budget and force
//! small vocabulary chunks, each costing a read and a write of the whole accumulator. When dC is
//! also wanted and the vocabulary is large against N, the accumulator lives instead in the last
//! bytes of the caller's dC buffer ([`super::DcTail`]): the main pass writes the dC chunks before
//! `first_row`, accumulates dE over all chunks and rounds it into dE; a tail pass writes the dC
//! rows from `first_row` on over the finished accumulator — the last chunk's from the G the main
//! pass left in the workspace, the others' logits recomputed (at most a third of the vocabulary).
//! Where all N rows would make that tail longer than a third (N above ~V/6), the accumulator's
//! first half lives in dE's own bytes instead ([`super::DcTail::rows_in_de`]), and only the rest in dC.
//! Past N ≈ V/3, where that rest takes more than a third of dC, the tail pass may recompute more
//! of the vocabulary — up to all of it — rather than break the budget ([`super::TailReach`]).
//!
//! Without dC the token chunks are outer instead ([`super::token_outer`]).

pub(super) mod dc_scratch;
mod dc_tail;
mod de_pass;
mod grad_steps;
mod layout;
mod plan;
#[cfg(test)]
pub(super) mod tail_tests;
mod token_chunks;
pub mod token_outer;

pub use dc_scratch::with_dc_scratch;
pub use dc_tail::{de_head_rows, without_de_head};
pub use de_pass::{
    de_pass_applies, de_pass_pays, de_pass_plan, de_pass_wants, one_or_two_passes, with_de_pass, DE_PASS_TAIL_SHARE,
};
pub(super) use grad_steps::fewest_grad_steps;
pub use grad_steps::sm90_grad_steps;
pub(super) use layout::{largest_multiple, layout};
pub use plan::{BackwardPlan, DcAccumulator, DcTail, DeAccumulator, GBuffer, TailReach};
pub use token_chunks::{large_n_seconds, token_chunked_plan, with_token_chunks, MAX_TOKEN_CHUNKS};

use flce_core::{DType, Result, Shape};

use super::{align, chunk_range, chunk_step, gradient_bytes, last_chunk_start, Layout, Region, Wanted, ALIGN};
use crate::geometry::{TILE_M, TILE_N};
use crate::modes::{BackwardMode, Family};
use dc_tail::{dc_tail, modeled_seconds, whole_tail_overflow_rows};
use layout::{good_vocab_chunk, no_plan};

/// The default workspace budget: 10% of the gradient bytes less what a call holds besides the
/// workspace (lse, per-token loss, grad_output and their allocator rounding: 16 bytes a token), so
/// that a whole training call stays within gradients + 10%; but never below what the smallest
/// good unchunked plan needs (1024 vocabulary rows per chunk for the fused tiles, 512 for cuBLAS
/// logits, whose f32 logits cost 4 more bytes per element). Past N ≈ V/3, where dE's accumulator
/// has no tail plan over at most a third of the vocabulary, that plan's tail reaches further
/// ([`TailReach::Whole`]: up to a fifth product) rather than take the accumulator's N·D·4 bytes.
/// Without dC, the token-outer plan's good chunks ([`super::token_outer`]).
pub fn default_backward_budget(shape: Shape, dtype: DType, wanted: Wanted, mode: BackwardMode) -> usize {
    let tenth = gradient_tenth(shape, dtype, wanted);
    if wanted.token_outer() {
        return tenth.max(token_outer::good_workspace(shape, dtype, wanted, mode));
    }
    let rows = good_vocab_chunk(mode).min(shape.v.div_ceil(TILE_N) * TILE_N);
    let good = |tail| layout(shape, dtype, wanted, mode, shape.n, rows, tail).workspace_bytes;
    // the good chunk with a tail of at most a third; else with the workspace accumulator where
    // that stays within the tenth; else with a longer tail (up to all of the vocabulary)
    let floor = match dc_tail(shape, dtype, wanted, shape.n, rows, TailReach::Third) {
        Some(t) => good(Some(t)),
        None => match (good(None), dc_tail(shape, dtype, wanted, shape.n, rows, TailReach::Whole)) {
            (acc, Some(t)) if acc > tenth => acc.min(good(Some(t))),
            (acc, _) => acc,
        },
    };
    tenth.max(floor)
}

/// A tenth of a call's gradient bytes less what it holds besides the workspace (lse, per-token
/// loss, grad_output and their allocator rounding: 16 bytes a token): the backward's memory target.
pub fn gradient_tenth(shape: Shape, dtype: DType, wanted: Wanted) -> usize {
    (gradient_bytes(shape, dtype, wanted) / 10).saturating_sub(16 * shape.n)
}

/// The backward plan within `budget` bytes of workspace (None: the default budget), where "fused"
/// means the family `fused` ([`crate::modes::fused_family`]; the fused families share one
/// layout). Prefers one token chunk (each dC chunk finished in one product) with the largest
/// vocabulary chunk that fits; chunks tokens only when even 1024 vocabulary rows for all N tokens
/// do not fit. When the sm90 family forms G, the vocabulary chunk is then the one at or below
/// the largest whose G launches finish in the fewest tile steps on `sm_count` SMs
/// (`super::grad_steps::sm90_balanced_chunks`).
pub fn backward_plan(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: Option<usize>,
    mode: BackwardMode,
    fused: Family,
    sm_count: usize,
) -> Result<BackwardPlan> {
    let mode = mode.resolve(fused);
    let budget = budget.unwrap_or_else(|| default_backward_budget(shape, dtype, wanted, mode));
    let mut plan = backward_layout_plan(shape, dtype, wanted, budget, mode)?;
    plan.family = mode.family(fused);
    if plan.family == Family::Sm90 {
        plan = grad_steps::sm90_balanced_chunks(plan, mode, budget, sm_count);
    }
    Ok(plan)
}

/// The backward plan of one rank's vocabulary slice (shared/vocab_parallel.cu, `CudaLoss::backward_slice`):
/// cuBLAS logits (the tile kernels bound C's rows by the loss constants' vocabulary, which a
/// slice sets to the whole vocabulary's size), no tail pass, and dE's f32 share accumulated in the
/// caller's f32 buffer ([`DeAccumulator::InPlace`]), to be summed over the ranks and rounded once.
/// `shape` has V = the slice's rows.
pub fn slice_backward_plan(shape: Shape, dtype: DType, wanted: Wanted, budget: Option<usize>) -> Result<BackwardPlan> {
    // planned without dE, so without its accumulator (and so without a tail pass), then dE in place
    let without_de = Wanted { de: false, ..wanted };
    // (the cuBLAS family's chunks do not depend on the SM count)
    let mut plan = backward_plan(shape, dtype, without_de, budget, BackwardMode::CublasLogits, Family::Cublas, 1)?;
    plan.wanted = wanted;
    if wanted.de {
        plan.de_acc = DeAccumulator::InPlace;
    }
    Ok(plan)
}

fn backward_layout_plan(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: usize,
    mode: BackwardMode,
) -> Result<BackwardPlan> {
    if wanted.token_outer() {
        return token_outer::plan(shape, dtype, wanted, budget, mode);
    }
    let v_pad = shape.v.div_ceil(TILE_N) * TILE_N;
    let good = good_vocab_chunk(mode).min(v_pad);
    let fits = |token_chunk: usize, vocab_chunk: usize, tail: Option<DcTail>| {
        layout(shape, dtype, wanted, mode, token_chunk, vocab_chunk, tail).workspace_bytes <= budget
    };
    // Unchunked tokens: the largest vocabulary chunk (multiple of 128) that fits, with dE's
    // accumulator in dC's tail where it can be, else in the workspace. Workspaces grow with the
    // chunk; whether the tail is possible does not change with it monotonically, so the tail plan
    // is the largest chunk, at or below the largest that fits, where it is.
    let largest_fitting = |reach: Option<TailReach>| -> Option<BackwardPlan> {
        // the accumulator's place does not change the workspace of a tail plan with the chunk
        // (its overflow rows do not depend on the chunk)
        let probe_tail = reach.map(|reach| DcTail {
            byte_offset: 0,
            first_row: 0,
            rows_in_de: 0,
            overflow_rows: if reach == TailReach::Whole { whole_tail_overflow_rows(shape, dtype, wanted) } else { 0 },
            overflow: Region::default(),
        });
        let largest = largest_multiple(v_pad / TILE_N, |k| fits(shape.n, k * TILE_N, probe_tail))? * TILE_N;
        let Some(reach) = reach else {
            return Some(layout(shape, dtype, wanted, mode, shape.n, largest, None));
        };
        (1..=largest / TILE_N).rev().map(|k| k * TILE_N).find_map(|vc| {
            let tail = dc_tail(shape, dtype, wanted, shape.n, vc, reach)?;
            Some(layout(shape, dtype, wanted, mode, shape.n, vc, Some(tail)))
        })
    };
    let tail = largest_fitting(Some(TailReach::Third));
    let best = largest_fitting(None);
    // of the two with a good chunk, the tail plan unless the model has the other faster by more
    // than its own error (5% of one logits product: at 8k tokens it cannot tell them apart)
    let [t, b] = [&tail, &best].map(|p| p.as_ref().filter(|p| p.vocab_chunk >= good));
    let logits_seconds = 2.0 * (shape.n * shape.d * shape.v) as f64 / 650e12;
    match (t, b) {
        (Some(t), Some(b)) if modeled_seconds(b) < modeled_seconds(t) - 0.05 * logits_seconds => return Ok(b.clone()),
        (Some(p), _) | (None, Some(p)) => return Ok(p.clone()),
        (None, None) => {}
    }
    // Neither within the budget (past N ≈ V/3 at the default's 10%): a tail pass over more of the
    // vocabulary, up to all of it, rather than chunked tokens (whose workspace holds all of
    // dE's accumulator as well) or a broken budget
    let whole = largest_fitting(Some(TailReach::Whole));
    if let Some(p) = whole.as_ref().filter(|p| p.vocab_chunk >= good) {
        return Ok(p.clone());
    }
    // Chunk tokens: for the largest vocabulary chunk in 2048, 1024, ..., 128, the largest token
    // chunk (multiple of 128) that fits.
    for vc in [2048usize, 1024, 512, 256, 128] {
        let vc = vc.min(v_pad);
        let token_chunk = |k: usize| (k * TILE_M).min(shape.n);
        if let Some(k) = largest_multiple(shape.n.div_ceil(TILE_M), |k| fits(token_chunk(k), vc, None)) {
            return Ok(layout(shape, dtype, wanted, mode, token_chunk(k), vc, None));
        }
    }
    // small vocabulary chunks for all tokens rather than none
    tail.or(best).or(whole).ok_or_else(|| no_plan(shape, dtype, wanted, mode, budget))
}
