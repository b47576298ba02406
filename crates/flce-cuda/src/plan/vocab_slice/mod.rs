//! The vocabulary-slice plan: between the four-product default and the token-chunked
//! three-product plan, for budgets too small for the latter (docs/journal.md v46–v47).
//!
//! The classifier's first `head_rows` rows (a multiple of the sm90 tile, 256) take the
//! three-product path over **all N tokens**: the compact forward keeps their logits as f16 q
//! (`ThreeProductLogits::Compact`), G is formed from q once the lse is known, dC's head rows are one
//! product over every token (rounded once, no accumulator) and dE's f32 accumulator gets the
//! head's share. The rows after them take the default's four products: their forward partials,
//! then the recomputing backward over vocabulary chunks from `head_rows` on, adding to the same dE
//! accumulator, which is rounded once at the end. Both halves run inside the forward of a call
//! that wants gradients, for grad_output 1, as the three-product pass does (src/pass/vocab_slice.rs).
//!
//! The halves meet in the forward's finish as one forward's vocabulary splits would: the head's
//! splits, then the rest's (whose argmax counts from row head_rows), merged in that order into
//! lse, the loss and the scalars; each token's target logit comes from the half that holds its
//! target. So the arithmetic is that of a forward over two vocabulary slices (flce-core's
//! cpu/vocab_parallel.rs is its CPU specification: any cut within 1e-6 of the one-slice forward).
//! (Merging them as two ranks of the vocabulary-parallel loss, f64 rows and one-block
//! `finish_ranks`, ran no faster, within the runs' spread: journal v46.) Exactness: the head's
//! rows have the compact form's (plan/three_product/), the rest's the default's.
//!
//! Workspace: the head's three-product plan (q: N·head_rows·2 bytes, and N·⌈head_rows/256⌉·4 of
//! per-tile maxima unless dE's rows hold them), the rest's forward plan, the rest's backward plan
//! with dE's f32 accumulator in the workspace (N·D·4 bytes; with [`VocabSliceRest::de_in_dc`], in
//! dC's head rows where they hold it), and both halves' partials (16 bytes a token and split).
//! The head is the largest that fits the budget (the plan is not taken below a sixteenth of the
//! vocabulary: [`MIN_VOCAB_SLICE_HEAD_SHARE`]); the rest's vocabulary chunk is the default plan's, or a
//! smaller one that balances the sm90 G launches better, and with [`VocabSliceRest::dc_scratch`] (the
//! default; `FLCE_VOCAB_SLICE_DC_SCRATCH=0` turns it off) its first chunks larger.

use flce_core::{DType, Error, Result, Shape};

use super::backward::fewest_grad_steps;
use super::backward::{largest_multiple, layout};
use super::{BackwardPlan, DeAccumulator, ForwardPlan, Layout, Region, ThreeProductLogits, ThreeProductPlan, Wanted};
use crate::geometry::SM90_TILE_N;
use crate::modes::{BackwardMode, Family};

/// Heads of fewer rows than this are not planned: the plan's own costs (two forward launches, the
/// rest's backward in more chunks than the default's) would outweigh the recompute they save
/// (2·N·D FLOP a row: 4096 rows at Llama 3's 8k tokens, ~0.4 ms on an H200).
pub const MIN_VOCAB_SLICE_HEAD_ROWS: usize = 4096;

/// Nor heads of less than this share of the vocabulary (1 / 16). Measured (H200, fwd+bwd against
/// the default in the same `flce bench --workspace-budget-mb M` run, the slice ÷ the default): with the
/// rest's first chunks' G in dC's unwritten rows and dE's accumulator in dC's head rows (both on
/// by default; journal v47),
/// Llama 3 / Qwen 2.5 paid from heads of ~4% of V (0.983 / 0.990 at 320 MB; 0.972 / 0.985 at
/// 7%; 0.882 / 0.908 at 1 GB), Gemma 2 from ~8% (1.013 at 3%, 1.008 at 5%, 0.990 at 8%, 1.008 at
/// 10%, 0.973 at 13%, 0.954 at 23%; runs 1–3% apart). Without them (journal v46) the
/// break-even was a sixth. Below the share the budget goes to the default plans.
pub const MIN_VOCAB_SLICE_HEAD_SHARE: f64 = 1.0 / 16.0;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VocabSlicePlan {
    pub shape: Shape,
    pub dtype: DType,
    pub wanted: Wanted,
    /// Classifier rows [0, head_rows) take the three-product path (a multiple of 256, below V).
    pub head_rows: usize,
    /// The head's compact forward and G: the three-product plan of shape (N, D, head_rows) in one
    /// token chunk (its q, maxima and db partials used; its other regions are not); regions
    /// relative to `head_ws`.
    pub head: ThreeProductPlan,
    pub head_ws: Region,
    /// The forward partials of rows [head_rows, V) (shape (N, D, V − head_rows): its targets
    /// region holds the rest's effective targets); regions relative to `rest_forward_ws`.
    pub rest_forward: ForwardPlan,
    pub rest_forward_ws: Region,
    /// The backward of rows [head_rows, V): the whole call's shape, its chunks from
    /// [`BackwardPlan::vocab_begin`] = head_rows, dE's accumulator in its workspace (or in dC's
    /// head rows: [`VocabSliceRest::de_in_dc`]). Its targets, token scales and scalars serve the head's
    /// G too. Regions relative to `rest_ws`.
    pub rest: BackwardPlan,
    pub rest_ws: Region,
    /// Packed RowStats [head splits + rest splits, N]: the head's splits, then the rest's.
    pub partials: Region,
    /// f32 \[N\]: each token's target logit, from the half that holds its target.
    pub target_logit: Region,
    /// The finish step's block sums ([`crate::geometry::finish_sums_bytes`]).
    pub finish_sums: Region,
    /// i32 \[1\]: the rest's targets' status word (the call's own is the whole call's); f32 \[1\]:
    /// 1.0, the grad_output the gradients are formed for.
    pub slice_status: Region,
    pub unit_grad: Region,
    pub workspace_bytes: usize,
}

/// What the slice planner takes from the device: the backward's resolved mode and family, the
/// SM count, the rest's vocabulary chunk (the default backward plan's: at most this many rows a
/// chunk), whether its first chunks may keep G in dC's unwritten rows ([`super::with_dc_scratch`]),
/// and whether dE's f32 accumulator may live in dC's head rows ([`DeAccumulator::DcHead`]: the
/// head's dC product then runs after the rest's passes) where they hold it, instead of the
/// workspace — N·D·4 bytes more for the head (134 MB at Llama 3's 8k tokens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VocabSliceRest {
    pub mode: BackwardMode,
    pub family: Family,
    pub sm_count: usize,
    pub vocab_chunk: usize,
    pub dc_scratch: bool,
    pub de_in_dc: bool,
}

/// Whether a call can take the slice plan at all: compact logits (sm_90a, 16-bit inputs, every
/// option but a softcap with smoothing: the caller's `ThreeProductLogits`), dC wanted (without it the
/// default backward is token-outer, whose dE accumulator holds one token chunk), and a
/// vocabulary with room for a head of [`MIN_VOCAB_SLICE_HEAD_ROWS`] and a rest.
pub fn vocab_slice_plan_applies(shape: Shape, dtype: DType, wanted: Wanted, storage: ThreeProductLogits) -> bool {
    matches!(storage, ThreeProductLogits::Compact { .. })
        && dtype != DType::F32
        && wanted.dc
        && shape.v >= MIN_VOCAB_SLICE_HEAD_ROWS + SM90_TILE_N
}

/// The slice plan with a head of `head_rows` rows whatever its workspace (tests and
/// measurements of a given cut; [`vocab_slice_plan`] picks the head from a budget). `forward_plan`
/// makes the device's forward plan of a shape (`CudaLoss::forward_plan`).
pub fn vocab_slice_plan_with_head(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    head_rows: usize,
    storage: ThreeProductLogits,
    rest: VocabSliceRest,
    forward_plan: &dyn Fn(Shape) -> ForwardPlan,
) -> Result<VocabSlicePlan> {
    if !matches!(storage, ThreeProductLogits::Compact { .. }) || dtype == DType::F32 || !wanted.dc {
        return Err(Error::InvalidOption {
            name: "plan",
            value: format!("{} {dtype}, dC wanted {}", storage.name(), wanted.dc),
            reason: "the slice plan needs compact logits (16-bit inputs on sm_90a) and dC wanted",
        });
    }
    if head_rows == 0 || !head_rows.is_multiple_of(SM90_TILE_N) || head_rows >= shape.v {
        return Err(Error::invalid_option("head_rows", head_rows, "must be a positive multiple of 256 below V"));
    }
    let Shape { n, .. } = shape;
    let head = super::three_product_plan_with_chunk(Shape { v: head_rows, ..shape }, dtype, wanted, n, storage);
    let rest_forward = forward_plan(Shape { v: shape.v - head_rows, ..shape });
    let rest_plan = rest_backward(shape, dtype, wanted, head_rows, rest);
    let mut l = Layout::default();
    let head_ws = l.take(head.workspace_bytes);
    let rest_forward_ws = l.take(rest_forward.workspace_bytes);
    let rest_ws = l.take(rest_plan.workspace_bytes);
    let partials = l.take(16 * n * (head.stats_splits + rest_forward.splits));
    let target_logit = l.take(4 * n);
    let finish_sums = l.take(crate::geometry::finish_sums_bytes(n));
    let slice_status = l.take(4);
    let unit_grad = l.take(4);
    Ok(VocabSlicePlan {
        shape,
        dtype,
        wanted,
        head_rows,
        head,
        head_ws,
        rest_forward,
        rest_forward_ws,
        rest: rest_plan,
        rest_ws,
        partials,
        target_logit,
        finish_sums,
        slice_status,
        unit_grad,
        workspace_bytes: l.bytes(),
    })
}

/// The slice plan with the largest head that fits `budget` bytes of workspace, or None where it
/// does not apply ([`vocab_slice_plan_applies`]) or no head of [`MIN_VOCAB_SLICE_HEAD_ROWS`] rows and
/// `min_head_share` of the vocabulary fits (the backend passes [`MIN_VOCAB_SLICE_HEAD_SHARE`], or the
/// measurement knob `FLCE_VOCAB_SLICE_MIN_SHARE`).
#[allow(clippy::too_many_arguments)]
pub fn vocab_slice_plan(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: usize,
    storage: ThreeProductLogits,
    rest: VocabSliceRest,
    min_head_share: f64,
    forward_plan: &dyn Fn(Shape) -> ForwardPlan,
) -> Option<VocabSlicePlan> {
    if !vocab_slice_plan_applies(shape, dtype, wanted, storage) {
        return None;
    }
    let plan =
        |k: usize| vocab_slice_plan_with_head(shape, dtype, wanted, k * SM90_TILE_N, storage, rest, forward_plan).ok();
    // (the workspace grows with the head, up to the rest's forward plan moving by a split's
    // partials as its vocabulary shrinks; the search returns a head that fits either way)
    let max = (shape.v - 1) / SM90_TILE_N;
    let k = largest_multiple(max, |k| plan(k).is_some_and(|p| p.workspace_bytes <= budget))?;
    let rows = k * SM90_TILE_N;
    let worth = rows >= MIN_VOCAB_SLICE_HEAD_ROWS && rows as f64 >= min_head_share * shape.v as f64;
    worth.then(|| plan(k)).flatten()
}

/// The rest's backward: the whole call's shape with chunks from `head_rows`, one token chunk,
/// dE's accumulator in the workspace (not in dC's tail, as the default's: not planned here), the
/// vocabulary chunk at most `rest.vocab_chunk` — with the sm90 family, the one of at least 1024
/// rows whose G launches take the fewest tile steps ([`sm90_grad_steps`]; the larger on ties) —
/// and, where `rest.dc_scratch`, the first chunks larger with their G in dC's unwritten rows
/// past them. (Without them the rest's many chunks cost Gemma 2 ~3 ms over the default at a
/// 384 MB budget, 34 G launches against 16: H200, journal v47.)
fn rest_backward(shape: Shape, dtype: DType, wanted: Wanted, head_rows: usize, rest: VocabSliceRest) -> BackwardPlan {
    let plan = rest_backward_uniform(shape, dtype, wanted, head_rows, rest);
    if rest.dc_scratch {
        super::with_dc_scratch(plan)
    } else {
        plan
    }
}

/// [`rest_backward`]'s chunks before the dC scratch: all of `vocab_chunk` rows.
fn rest_backward_uniform(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    head_rows: usize,
    rest: VocabSliceRest,
) -> BackwardPlan {
    let de_in_dc = wanted.de && rest.de_in_dc && de_fits_head(shape, dtype, head_rows);
    let at = |vc: usize| {
        // (dE's accumulator in dC's head rows: laid out without it, as for dC and db alone)
        let laid_out = if de_in_dc { Wanted { de: false, ..wanted } } else { wanted };
        let mut p = layout(shape, dtype, laid_out, rest.mode, shape.n, vc, None);
        if de_in_dc {
            (p.wanted, p.de_acc) = (wanted, DeAccumulator::DcHead);
        }
        p.family = rest.family;
        p.vocab_begin = head_rows;
        p
    };
    let largest = rest.vocab_chunk.div_ceil(SM90_TILE_N).max(1) * SM90_TILE_N;
    let largest = at(largest.min((shape.v - head_rows).div_ceil(SM90_TILE_N) * SM90_TILE_N));
    if rest.family != Family::Sm90 {
        return largest;
    }
    fewest_grad_steps(largest, 1024, rest.sm_count, |vc| Some(at(vc)))
}

/// Whether dE's f32 accumulator (N·D·4 bytes) fits in the bytes of dC's first `head_rows` rows.
fn de_fits_head(shape: Shape, dtype: DType, head_rows: usize) -> bool {
    4 * shape.n <= head_rows * dtype.size_in_bytes()
}

#[cfg(test)]
mod tests;
