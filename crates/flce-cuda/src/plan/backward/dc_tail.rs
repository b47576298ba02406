//! Where dE's f32 accumulator lives when it is not in the workspace: in the caller's dC buffer,
//! past the rows the main pass writes, with its first rows in dE's own bytes ([`DcTail`]); the
//! tail pass then writes the dC rows that shared bytes with it. And the model that chooses,
//! where both fit, between such a tail plan and the workspace accumulator's.
//!
//! A tail pass recomputes the logits of its rows (all but its last chunk's), so a plan takes one
//! over at most a third of the vocabulary ([`TailReach::Third`]) when it has the choice. Past
//! N ≈ V/3 tokens (Llama 3 from ~39k) no such tail holds the accumulator, and the workspace
//! accumulator (N·D·4 bytes: 2.1 GB at Llama 3 and 128k tokens, 114% of the gradient bytes)
//! would break the budget: there the tail may reach the whole vocabulary ([`TailReach::Whole`],
//! up to a fifth product), and where N > V even all of dC does not hold the accumulator's
//! rows past dE's half, its last rows go to the workspace ([`DcTail::overflow_rows`]: 23 MB at
//! Llama 3 and 131,072 tokens).

use flce_core::{DType, Shape};

use super::plan::{within_a_third, MAX_TAIL_FRACTION_INV};
use super::{with_dc_scratch, BackwardPlan, DcTail, DeAccumulator, Region, TailReach, Wanted, ALIGN};

/// The accumulator rows dE's own buffer holds in a [`DcTail`] plan: half its token count as f32
/// rows, less the row of slack at the front (0 below 4 tokens).
pub fn de_head_rows(n: usize, dtype: DType) -> usize {
    (n * dtype.size_in_bytes() / 4).saturating_sub(1)
}

/// dE's accumulator in dC's tail, if this plan can have it: both gradients wanted, low-precision
/// inputs (f32 dE accumulates in place), one token chunk, and a tail pass within `reach`; its
/// first rows in dE's own buffer ([`DcTail::rows_in_de`]; all N in dC below 4 tokens).
pub(super) fn dc_tail(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    token_chunk: usize,
    vocab_chunk: usize,
    reach: TailReach,
) -> Option<DcTail> {
    if !(wanted.de && wanted.dc) || dtype == DType::F32 || token_chunk < shape.n {
        return None;
    }
    dc_tail_with(shape, dtype, vocab_chunk, de_head_rows(shape.n, dtype), reach)
}

/// The tail of a plan whose accumulator keeps `rows_in_de` rows in dE, if its tail pass is
/// within `reach`.
pub(super) fn dc_tail_with(
    shape: Shape,
    dtype: DType,
    vocab_chunk: usize,
    rows_in_de: usize,
    reach: TailReach,
) -> Option<DcTail> {
    let Shape { n, d, v } = shape;
    let acc_bytes = 4 * (n - rows_in_de) * d;
    let dc_bytes = v * d * dtype.size_in_bytes();
    let (byte_offset, overflow_rows) = match (dc_bytes.checked_sub(acc_bytes), reach) {
        (Some(room), _) => (room / ALIGN * ALIGN, 0),
        (None, TailReach::Third) => return None,
        (None, TailReach::Whole) => (0, n - rows_in_de - dc_bytes / (4 * d)),
    };
    // On the family's tile width: the tail's chunks are laid out from its last backwards
    // (`BackwardPlan::vocab_range`), so its first row need not be a chunk boundary of the main
    // pass — the rows before it end in a short chunk. The tail pass recomputes all its rows but
    // its last chunk's: where the accumulator's rows fit in one chunk, the tail starts as early
    // as one chunk and a third of V allow (nothing recomputed, the main pass shortest), else as
    // late as the accumulator allows (the least recomputed).
    let step = super::chunk_step(vocab_chunk);
    let latest = byte_offset / (d * dtype.size_in_bytes()) / step * step;
    let a_third = (v - v / MAX_TAIL_FRACTION_INV).div_ceil(step) * step;
    let earliest = super::last_chunk_start(v, vocab_chunk).max(a_third);
    let first_row = earliest.min(latest);
    let tail = DcTail { byte_offset, first_row, rows_in_de, overflow_rows, overflow: Region::default() };
    match reach {
        TailReach::Third => within_a_third(v, first_row).then_some(tail),
        TailReach::Whole => Some(tail),
    }
}

/// The overflow rows of a [`TailReach::Whole`] tail (they do not depend on the vocabulary
/// chunk): 0 where dC holds every row past dE's half, or where no tail applies.
pub(crate) fn whole_tail_overflow_rows(shape: Shape, dtype: DType, wanted: Wanted) -> usize {
    dc_tail(shape, dtype, wanted, shape.n, ANY_CHUNK, TailReach::Whole).map_or(0, |t| t.overflow_rows)
}

/// Any vocabulary chunk, for what does not depend on it.
const ANY_CHUNK: usize = 128;

/// `plan` with all N rows of its accumulator in dC's tail (no rows in dE's own buffer) where
/// that tail is still at most a third of the vocabulary: the plans before the head rows, kept
/// as a measurement knob (`FLCE_DE_HEAD=0`). Before [`super::with_dc_scratch`].
pub fn without_de_head(mut plan: BackwardPlan) -> BackwardPlan {
    if let (Some(t), true) = (plan.dc_tail(), plan.dc_scratch.is_empty()) {
        if t.rows_in_de > 0 {
            if let Some(tail) = dc_tail_with(plan.shape, plan.dtype, plan.vocab_chunk, 0, TailReach::Third) {
                plan.de_acc = DeAccumulator::DcTail(tail);
            }
        }
    }
    plan
}

/// Modeled seconds of what differs between two one-token-chunk plans of a shape, from the H200's
/// measurements: the tail pass's recomputed logits (its rows but the last chunk's, 2·N·D FLOP each
/// at ~650 TFLOP/s), and per vocabulary chunk (with the leading chunks' G in dC's rows, as
/// [`super::with_dc_scratch`] will make them) the part of dE's accumulator traffic (N·D·8 bytes at
/// ~3.5 TB/s) that its product's own compute does not hide, plus ~0.19 ms per 32k tokens of
/// launch tails (journal v16: 126 → 33 chunks saved 17.4 ms at Llama 3 32k; 21 → 11 nothing
/// measurable at 8k). At the default budget only the tail plan fits where it matters; with a
/// larger one the workspace accumulator's plan wins where the tail is long (v17: Llama 3 32k,
/// 224 ms with the 537 MB accumulator in the workspace against 243 with a 26% tail).
pub(super) fn modeled_seconds(p: &BackwardPlan) -> f64 {
    let v = p.shape.v;
    let p = with_dc_scratch(p.clone());
    let recomputed = p.dc_tail().map_or(0, |t| (v - t.first_row).saturating_sub(p.vocab_chunk));
    recompute_seconds(&p, recomputed) + main_pass_seconds(&p)
}

/// Modeled seconds of recomputing `rows` vocabulary rows' logits for every token of `p`'s call
/// (2·N·D FLOP a row at ~650 TFLOP/s).
pub(super) fn recompute_seconds(p: &BackwardPlan, rows: usize) -> f64 {
    2.0 * rows as f64 * (p.shape.n * p.shape.d) as f64 / 650e12
}

/// A vocabulary chunk's launch tails over every token of `p`'s call: ~0.19 ms per 32k tokens
/// (journal v16).
pub(super) fn launch_tail_seconds(p: &BackwardPlan) -> f64 {
    0.19e-3 * p.shape.n as f64 / 32_768.0
}

/// Modeled seconds of `p`'s main-pass vocabulary chunks: each one's launch tails, and the part of
/// dE's accumulator traffic (N·D·8 bytes at ~3.5 TB/s) its product's compute does not hide.
pub(super) fn main_pass_seconds(p: &BackwardPlan) -> f64 {
    let nd = (p.shape.n * p.shape.d) as f64;
    let chunk = |rows: usize| {
        let unhidden = if p.wanted.de { (8.0 * nd / 3.5e12 - 2.0 * nd * rows as f64 / 650e12).max(0.0) } else { 0.0 };
        unhidden + launch_tail_seconds(p)
    };
    (0..p.vocab_chunks()).map(|i| chunk(p.vocab_range(i).len())).sum()
}
