//! The three-product plan: forward and backward in one pass over token chunks, for callers that
//! trade memory for speed (`workspace_budget="fast"` in Python).
//!
//! An exact loss that does not keep the logits needs four products (forward, recompute, dE, dC);
//! keeping one token chunk's logits over the whole vocabulary needs three. Per chunk of
//! `token_chunk` tokens: cuBLAS writes the chunk's f32 logits [token_chunk, V]; the cuBLAS
//! family's kernels fold them into the tokens' statistics and finish their lse; G is formed for
//! grad_output = 1; dE for the chunk is one product over V (f32 accumulation, rounded once: final
//! after the chunk; or K-chunks of V summed in an f32 buffer, [`super::with_de_k_chunks`], where
//! cuBLAS's own sum over so long a K loses precision: f16's default); dC accumulates across chunks in an f32 [V, D] accumulator (or in place for
//! f32 inputs) and is rounded once at the end. The backward then only scales the gradients by
//! grad_output.
//!
//! Workspace: the f32 dC accumulator (V·D·4 bytes: 2.1 GB at Llama 3; none when one chunk holds
//! every token; its first rows, up to V/2 − 1 rounded down to a multiple of 128, live in the
//! caller's dC buffer, so about half of it is workspace) plus, per chunk, f32 logits and G
//! (token_chunk·V·(4 + dtype) bytes; compact: 2 bytes, and the per-tile maxima, which live in the
//! chunk's rows of the caller's dE where it is wanted: [`MrefPlace`]), plus the per-token state
//! (targets, token scales, statistics' partials: ~1.3 MB at 8k tokens), which a plan of one chunk
//! keeps in the caller's dC buffer instead ([`StatePlace`]). The budget
//! sets the number of chunks, that of the largest token chunk that fits: fewer chunks mean fewer
//! read-modify-writes of the accumulator; with compact logits the chunk itself is the one among
//! as many chunks whose forward grid balances best ([`balanced_chunks`]).
//!
//! Compact logits ([`ThreeProductLogits::Compact`], Hopper, every option but a softcap with label
//! smoothing: `loss::compact_logits_hold`): the sm90 forward kernel computes the chunk's logits
//! itself, folds them into the tokens' exact statistics from its f32 accumulators (no statistics pass) and writes each logit
//! z only as q = exp(z − m) in f16, m the row's running max after the logit's 256-column tile
//! (one f32 per token and tile). G = g·q·exp(m − lse) is then formed in place over q, so a chunk
//! costs 2 bytes a logit instead of 4 + dtype, and 4 bytes of traffic (q written, read; G
//! written, read twice by the products) are saved per logit twice over.
//!
//! Exactness of the compact form: lse, the loss and the target's gradient p_t − 1 come from f32
//! (the target logit is kept exactly). Every other element of G is g·p_j, and p_j = q_j·exp(m − lse)
//! carries q's one f16 rounding: relative error ≤ 2⁻¹¹ (q ∈ (6.1e-5, 1], normal f16), against
//! G's own bf16 rounding of 2⁻⁹ (f16 inputs: 2⁻¹¹) that every exact path has; below 6.1e-5 of its
//! tile's running max, q is subnormal and its absolute error ≤ 2⁻²⁵ of that max. So the compact
//! form rounds G twice — f16, then the input dtype — where the f32 form rounds once; the GPU tests
//! hold its dE and dC to the same bounds against the f64 oracle as the f32 form's. With a
//! softcap, G_j carries the derivative 1 − (z_j/cap)² at z_j = m + ln q_j: q's rounding moves
//! z_j by ≤ 2⁻¹¹ (absolute) and the factor by ≤ 2·2⁻¹¹/cap, below q's own error for caps ≥ 2;
//! where q is 0 (or subnormal), p_j and with it G_j is below the bound above whatever the factor.

mod de_k_chunks;
mod plan;

pub use de_k_chunks::{default_de_k_chunk, with_de_k_chunks, DE_K_CHUNK_ALIGN};
pub use plan::{DeKChunks, MrefPlace, StatePlace, ThreeProductLogits, ThreeProductPlan, MAX_STATS_SPLITS};

use flce_core::{DType, Error, Result, Shape};

use super::{chunk_range, Layout, Region, Wanted};
use crate::geometry::{SM90_TILE_M, SM90_TILE_N, TILE_M, TILE_N};
use plan::token_state;

/// The storage a plan can use: compact logits (f16 q) hold no f32 inputs, whose gradients are
/// exact to f32.
fn usable(storage: ThreeProductLogits, dtype: DType) -> ThreeProductLogits {
    if dtype == DType::F32 {
        ThreeProductLogits::F32
    } else {
        storage
    }
}

fn layout(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    token_chunk: usize,
    storage: ThreeProductLogits,
) -> ThreeProductPlan {
    let Shape { n, d, v } = shape;
    let rows = token_chunk.min(n);
    let ldg = v.div_ceil(TILE_N) * TILE_N;
    let (forward_grid, forward_cluster) = match storage {
        ThreeProductLogits::F32 => (None, 1),
        ThreeProductLogits::Compact { sm_count, tuning } => {
            // the sm90 forward's grid for a chunk of `rows` tokens, at most MAX_STATS_SPLITS
            // partials a token (a chunk worth taking has ≥ 8 token tiles: 16 splits fill 128 SMs)
            let cap = MAX_STATS_SPLITS.min(sm_count.max(1));
            let row_bytes = d * dtype.size_in_bytes();
            let token_tiles = rows.div_ceil(SM90_TILE_M);
            let tuning = super::Sm90Tuning { l2_budget: tuning.compact_l2_budget, ..tuning };
            let (g, cluster) =
                super::sm90_grid_tuned(token_tiles, v.div_ceil(SM90_TILE_N), sm_count, cap, row_bytes, tuning);
            (Some(g), cluster)
        }
    };
    let (stats_splits, stats_seg_cols) = match forward_grid {
        Some(g) => (g.partial_rows(), g.tiles_per_split * SM90_TILE_N),
        None => {
            // about 2048 blocks of 8 tokens for the statistics, at most 16 segments of at least 1024 columns
            let stats_blocks = rows.div_ceil(crate::geometry::STATS_TOKENS_PER_BLOCK as usize);
            let wanted_splits = (2048usize.div_ceil(stats_blocks)).clamp(1, MAX_STATS_SPLITS).min(v.div_ceil(1024));
            let seg = v.div_ceil(wanted_splits).div_ceil(32) * 32;
            (v.div_ceil(seg), seg)
        }
    };
    let compact = forward_grid.is_some();
    let mut l = Layout::default();
    let scalars = l.take(crate::geometry::BACKWARD_SCALARS_BYTES);
    let unit_grad = Region { offset: scalars.offset + 4 * crate::geometry::SCALAR_UNIT, bytes: 4 };
    // the state laid out from dC's boundary (and room for lse after it), kept where it fits
    // there; else in the workspace
    let mut dc_layout = Layout::default();
    let in_dc = token_state(&mut dc_layout, n, stats_splits);
    let lse_in_dc = dc_layout.take(4 * n);
    let status_in_dc = dc_layout.take(4);
    let state_bytes = status_in_dc.offset + status_in_dc.bytes;
    let token_state_place = if wanted.dc && rows == n && state_bytes + 255 <= v * d * dtype.size_in_bytes() {
        StatePlace::DcBuffer
    } else {
        StatePlace::Workspace
    };
    let ([targets, token_scale, partials, target_logit, finish_sums], lse, status) = match token_state_place {
        StatePlace::DcBuffer => (in_dc, Some(lse_in_dc), Some(status_in_dc)),
        StatePlace::Workspace => (token_state(&mut l, n, stats_splits), None, None),
    };
    let (logits, g) = if compact {
        let q = l.take(rows * ldg * 2);
        (q, q)
    } else {
        (l.take(rows * ldg * 4), l.take(rows * ldg * dtype.size_in_bytes()))
    };
    let mref_row = v.div_ceil(SM90_TILE_N) * 4;
    let de_row = d * dtype.size_in_bytes();
    let m_ref = compact.then(|| {
        if wanted.de && de_row.is_multiple_of(4) && mref_row <= de_row {
            MrefPlace::DeRows
        } else {
            MrefPlace::Workspace(l.take(rows * mref_row))
        }
    });
    // one chunk: dC is one product over every token, rounded once into the caller's dC; several:
    // an f32 accumulator, its first rows in dC's own buffer
    let accumulate = wanted.dc && dtype != DType::F32 && rows < n;
    // (a multiple of 128 rows: the tail's product then reads G from a 256-byte aligned column;
    // at V/2 − 1 = 64127 rows its misaligned operand made cuBLAS 1.5× slower, H200)
    let fit = (v * dtype.size_in_bytes() / 4).saturating_sub(1);
    let dc_head_rows = if accumulate { fit / TILE_M * TILE_M } else { 0 };
    let dc_acc = accumulate.then(|| l.take((v - dc_head_rows) * d * 4));
    let db_acc = wanted.dbias.then(|| l.take(4 * v));
    let db_partial = wanted.dbias.then(|| l.take(rows.div_ceil(TILE_M) * ldg * 4));
    ThreeProductPlan {
        shape,
        dtype,
        wanted,
        storage,
        forward_grid,
        forward_cluster,
        token_chunk: rows,
        ldg,
        stats_splits,
        stats_seg_cols,
        token_state: token_state_place,
        targets,
        token_scale,
        scalars,
        unit_grad,
        partials,
        target_logit,
        finish_sums,
        lse,
        status,
        logits,
        g,
        m_ref,
        dc_acc,
        dc_head_rows,
        db_acc,
        db_partial,
        de_k_chunks: None,
        workspace_bytes: l.bytes(),
    }
}

/// The three-product plan with the largest token chunk whose workspace fits `budget` bytes (with
/// the compact forward, the chunk among as many chunks that balances its grid best:
/// `balanced_chunks`), or an error when not even 128 tokens fit (then the four-product plans are the ones to use). Compact
/// storage is for 16-bit inputs without a bias gradient only (it falls back to f32 otherwise).
pub fn three_product_plan(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: usize,
    storage: ThreeProductLogits,
) -> Result<ThreeProductPlan> {
    three_product_plan_capped(shape, dtype, wanted, budget, storage, usize::MAX)
}

/// [`three_product_plan`] with token chunks of at most `max_tokens` tokens (rounded down to a multiple of
/// 128, at least 128): the largest chunk is not always the fastest ([`default_three_product_max_tokens`]
/// is the measured rule; `crate::geometry::three_product_max_tokens` passes it, or the
/// `FLCE_THREE_PRODUCT_MAX_TOKENS` measurement knob).
pub fn three_product_plan_capped(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: usize,
    storage: ThreeProductLogits,
    max_tokens: usize,
) -> Result<ThreeProductPlan> {
    let storage = usable(storage, dtype);
    let max = shape.n.div_ceil(TILE_M).min((max_tokens / TILE_M).max(1));
    let chunk = |k: usize| (k * TILE_M).min(shape.n);
    let fits = |k: usize| layout(shape, dtype, wanted, chunk(k), storage).workspace_bytes <= budget;
    // the whole batch in one chunk needs no dC accumulator, so it may fit where smaller chunks do
    // not; below it the workspace grows with the chunk
    let largest = if fits(max) { Some(max) } else { super::backward::largest_multiple(max - 1, fits) };
    match largest {
        Some(k) => Ok(balanced_chunks(shape, dtype, wanted, k, storage, budget)),
        None => Err(Error::InvalidOption {
            name: "workspace_budget",
            value: budget.to_string(),
            reason:
                "below the three-product plan's smallest workspace (the f32 dC accumulator and 128 tokens of logits)",
        }),
    }
}

/// The compact forward's tile steps over a plan's chunks: its grid (planned for the full chunk,
/// which the last chunk runs on too: family/sm90.rs) summed over the chunks' longest blocks.
fn forward_tile_steps(plan: &ThreeProductPlan) -> Option<usize> {
    let grid = plan.forward_grid?;
    let n = plan.shape.n;
    Some(
        (0..plan.token_chunks())
            .map(|i| grid.longest(chunk_range(i, plan.token_chunk, n).len().div_ceil(SM90_TILE_M)))
            .sum(),
    )
}

/// The plan with the largest token chunk that fits (`k` token tiles), or, with the compact
/// forward, the chunk of at most `k` tiles that cuts the tokens into as many chunks and takes the
/// fewest forward tile steps ([`forward_tile_steps`]; ties to the smaller workspace). The number
/// of chunks sets the dC accumulator's round trips and the products' shapes; within it the
/// chunk sets how evenly the forward grid's slots share the chunk's token tiles: at the 16k
/// training-step loss (16384, 2048, 128256) with 2,112 MB, 6400-token chunks run 507 tile steps
/// on a 10 × 12 grid where 6144 run 488 on 16 × 8 (and 5504, the equal thirds, 504: measured
/// 1.021× the 6144 ones, journal v41; with 1,792 MB, 5120-token chunks 539 where four of 4096
/// run 488). Chunks under [`MIN_THREE_PRODUCT_TOKEN_CHUNK`] are not candidates.
fn balanced_chunks(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    k: usize,
    storage: ThreeProductLogits,
    budget: usize,
) -> ThreeProductPlan {
    let at = |j: usize| layout(shape, dtype, wanted, (j * TILE_M).min(shape.n), storage);
    if storage == ThreeProductLogits::F32 {
        return at(k);
    }
    // the smallest chunk, in token tiles, that still cuts the tokens into as many chunks as k
    // does (a workspace grows with its chunk: each candidate fits where k's does; the key's
    // workspace makes it unique, so the smaller wins a tie in tile steps)
    let count = shape.n.div_ceil(TILE_M).div_ceil(k);
    let smallest = shape.n.div_ceil(TILE_M).div_ceil(count).max(MIN_THREE_PRODUCT_TOKEN_CHUNK / TILE_M).min(k);
    (smallest..=k)
        .map(at)
        .filter(|p| p.workspace_bytes <= budget)
        .min_by_key(|p| (forward_tile_steps(p), p.workspace_bytes))
        .unwrap_or_else(|| at(k))
}

/// The three-product plan with token chunks of `token_chunk` tokens (a multiple of 128 up to N,
/// or N), whatever its workspace: for tests and measurements of a given chunking.
pub fn three_product_plan_with_chunk(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    token_chunk: usize,
    storage: ThreeProductLogits,
) -> ThreeProductPlan {
    // (layout caps the chunk at N)
    layout(shape, dtype, wanted, token_chunk.max(1).div_ceil(TILE_M) * TILE_M, usable(storage, dtype))
}

/// Batches of up to this many tokens take the three-product pass in one chunk where the budget
/// holds it; longer ones in chunks of [`THREE_PRODUCT_LONG_CHUNK`] tokens ([`default_three_product_max_tokens`]).
pub const THREE_PRODUCT_WHOLE_MAX_TOKENS: usize = 16_384;

/// The token chunk of the three-product pass past [`THREE_PRODUCT_WHOLE_MAX_TOKENS`] tokens.
pub const THREE_PRODUCT_LONG_CHUNK: usize = 8192;

/// The most tokens a three-product chunk holds by default in a batch of `n` tokens: all of them
/// up to 16k, chunks of 8k past that. Measured (H200, D 4096 / V 128256 unless said,
/// three-product pass ms, whole batch → 8k chunks, journal v25):
/// 32k 165.6 → 161.5 (0.975), 65k 332.1 → 324.3 (0.976); at 16k one chunk is as fast or faster
/// (8k chunks 1.008×, 1.026× at D 2048, 1.007× at Gemma 2's shape). A chunk of every token needs
/// no dC accumulator, but its logits' workspace grows with the tokens (16 GB at 65k against 3 GB
/// in 8k chunks).
pub fn default_three_product_max_tokens(n: usize) -> usize {
    if n > THREE_PRODUCT_WHOLE_MAX_TOKENS {
        THREE_PRODUCT_LONG_CHUNK
    } else {
        usize::MAX
    }
}

/// Token chunks of the three-product pass below this many tokens (unless the whole batch is
/// smaller) cost more than they save. Each chunk after the first reads and writes the f32 dC
/// accumulator (2·V·D·4 bytes: Gemma 2 4.7 GB, ~1.2 ms at the H200's ~4 TB/s) and saves the
/// recompute of its own logits (2·n·V·D FLOP: 1024 tokens at Gemma 2 are 2.4 TFLOP, ~3.6 ms at
/// ~660 TFLOP/s), while the f32 logits and G traffic is the same per token either way; below
/// ~350 tokens the round trip outweighs the recompute, and 1024 keeps a margin for the chunk's
/// launches and its statistics pass. Measured at 1152-token chunks (H200,
/// 4 GB, journal v6): 58.3 / 43.2 / 45.6 ms against
/// 63.3 / 57.4 / 59.1 for the default recomputing pass at Gemma 2 / Llama 3 / Qwen 2.5.
pub const MIN_THREE_PRODUCT_TOKEN_CHUNK: usize = 1024;

/// The three-product plan within `budget` (chunks of at most `max_tokens` tokens:
/// [`three_product_plan_capped`]) when it pays: its token chunk holds at least [`MIN_THREE_PRODUCT_TOKEN_CHUNK`]
/// tokens (or every token). None: the recomputing (four-product) plans are the ones to use with
/// this budget.
pub fn three_product_plan_if_faster(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: usize,
    storage: ThreeProductLogits,
    max_tokens: usize,
) -> Option<ThreeProductPlan> {
    let plan = three_product_plan_capped(shape, dtype, wanted, budget, storage, max_tokens).ok()?;
    (plan.token_chunk >= MIN_THREE_PRODUCT_TOKEN_CHUNK.min(shape.n)).then_some(plan)
}

#[cfg(test)]
mod tests;
