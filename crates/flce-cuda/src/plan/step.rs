//! The three-product plan: forward and backward in one pass over token chunks, for callers that
//! trade memory for speed (`workspace_budget="fast"` in Python).
//!
//! An exact loss that does not keep the logits needs four products (forward, recompute, dE, dC);
//! keeping one token chunk's logits over the whole vocabulary needs three. Per chunk of
//! `token_chunk` tokens: cuBLAS writes the chunk's f32 logits [token_chunk, V]; the cuBLAS
//! family's kernels fold them into the tokens' statistics and finish their lse; G is formed for
//! grad_output = 1; dE for the chunk is one product over V (f32 accumulation, rounded once: final
//! after the chunk); dC accumulates across chunks in an f32 [V, D] accumulator (or in place for
//! f32 inputs) and is rounded once at the end. The backward then only scales the gradients by
//! grad_output.
//!
//! Workspace: the f32 dC accumulator (V·D·4 bytes: 2.1 GB at Llama 3; none when one chunk holds
//! every token; its first rows, up to V/2 − 1 rounded down to a multiple of 128, live in the
//! caller's dC buffer, so about half of it is workspace) plus, per chunk, f32 logits and G
//! (token_chunk·V·(4 + dtype) bytes; compact: 2 bytes). The budget
//! picks the largest token chunk that fits: fewer chunks mean fewer read-modify-writes of the
//! accumulator.
//!
//! Compact logits ([`StepLogits::Compact`], Hopper, every option but a softcap with label
//! smoothing: `loss::compact_logits_hold`): the sm90 forward kernel computes the chunk's logits itself, folds them into the
//! tokens' exact statistics from its f32 accumulators (no statistics pass) and writes each logit
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

use std::ops::Range;

use flce_core::{DType, Error, Result, Shape};

use super::{chunk_range, Layout, Region, Sm90Grid, Wanted};
use crate::family::Family;
use crate::geometry::{SM90_TILE_M, SM90_TILE_N, TILE_M, TILE_N};

/// At most this many vocabulary segments per token in a chunk's statistics.
pub const MAX_STATS_SPLITS: usize = 16;

/// How the three-product pass holds a token chunk's logits between its forward and its G.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepLogits {
    /// cuBLAS writes them in f32 (4 bytes a logit, read by the statistics and the G kernels): any
    /// GPU, dtype and option.
    F32,
    /// The sm90 forward writes each as q = exp(z − m) in f16 (2 bytes, overwritten by G in place)
    /// with its statistics (module docs): sm_90a, 16-bit inputs with 16-byte rows, every option
    /// but a softcap with smoothing (`CudaLoss::step_logits` decides). The forward grid is planned for
    /// `sm_count` SMs with `tuning`'s L2 budget and cluster size, as the sm90 forward's.
    Compact { sm_count: usize, tuning: super::Sm90Tuning },
}

impl StepLogits {
    /// "f32" or "compact" (reports and logs).
    pub fn name(&self) -> &'static str {
        match self {
            StepLogits::F32 => "f32",
            StepLogits::Compact { .. } => "compact",
        }
    }
    /// The kernel family that computes a chunk's logits: cuBLAS (f32) or the sm90 forward.
    pub fn family(&self) -> Family {
        match self {
            StepLogits::F32 => Family::Cublas,
            StepLogits::Compact { .. } => Family::Sm90,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepPlan {
    pub shape: Shape,
    pub dtype: DType,
    pub wanted: Wanted,
    pub storage: StepLogits,
    /// Compact logits: the sm90 forward's grid for a whole chunk (the last, shorter chunk runs
    /// with at most its own token tiles as slots); its splits are `stats_splits`.
    pub forward_grid: Option<Sm90Grid>,
    /// Compact: blocks per cluster of the forward grid ([`super::sm90_grid_tuned`]); else 1.
    pub forward_cluster: usize,
    /// Tokens per chunk (a multiple of 128, or N).
    pub token_chunk: usize,
    /// Row pitch of the chunk's logits and G (V padded to 128), in elements.
    pub ldg: usize,
    /// The statistics of a chunk are folded over this many vocabulary segments in parallel
    /// (enough blocks to fill the GPU when the chunk has few tokens) of `stats_seg_cols` columns,
    /// then merged in order by the finish step.
    pub stats_splits: usize,
    pub stats_seg_cols: usize,
    pub targets: Region,
    pub token_scale: Region,
    pub scalars: Region,
    /// 4 bytes holding 1.0f: the grad_output the gradients are formed for.
    pub unit_grad: Region,
    /// Packed RowStats [stats_splits, N] and target logits [N].
    pub partials: Region,
    pub target_logit: Region,
    /// Scalars of the per-chunk finish steps (their loss sums are not used).
    pub chunk_scalars: Region,
    /// f32 logits of one chunk [token_chunk, ldg]; compact: f16 q [token_chunk, ldg], the same
    /// region as `g`.
    pub logits: Region,
    /// G of one chunk [token_chunk, ldg], input dtype.
    pub g: Region,
    /// Compact: f32 m of each (token, 256-column tile) of a chunk [token_chunk, mref_ld()].
    pub m_ref: Option<Region>,
    /// The f32 accumulator of dC's rows [dc_head_rows, V) (dC wanted, 16-bit inputs, several
    /// chunks; f32 inputs accumulate in dC, one chunk writes dC directly).
    pub dc_acc: Option<Region>,
    /// The accumulator's rows [0, dc_head_rows) live in the caller's dC buffer itself (f32 row r
    /// at byte 4·D·(r + 1): V/2 − 1 rows fill a 16-bit dC; the head is that rounded down to a
    /// multiple of 128), rounded in place at the end in passes that never overwrite an unread row
    /// (`CudaLoss::round_head_in_place`): about half the accumulator's workspace.
    pub dc_head_rows: usize,
    /// f32 accumulator of db [V] and the chunk's column sums [row tiles, ldg] (db wanted).
    pub db_acc: Option<Region>,
    pub db_partial: Option<Region>,
    pub workspace_bytes: usize,
}

impl StepPlan {
    pub fn token_chunks(&self) -> usize {
        self.shape.n.div_ceil(self.token_chunk)
    }
    pub fn token_range(&self, i: usize) -> Range<usize> {
        chunk_range(i, self.token_chunk, self.shape.n)
    }
    /// Row pitch of `m_ref`: the vocabulary's 256-column tiles.
    pub fn mref_ld(&self) -> usize {
        self.shape.v.div_ceil(SM90_TILE_N)
    }
}

/// The storage a plan can use: compact logits (f16 q) hold no f32 inputs, whose gradients are
/// exact to f32.
fn usable(storage: StepLogits, dtype: DType) -> StepLogits {
    if dtype == DType::F32 {
        StepLogits::F32
    } else {
        storage
    }
}

fn layout(shape: Shape, dtype: DType, wanted: Wanted, token_chunk: usize, storage: StepLogits) -> StepPlan {
    let Shape { n, d, v } = shape;
    let rows = token_chunk.min(n);
    let ldg = v.div_ceil(TILE_N) * TILE_N;
    let (forward_grid, forward_cluster) = match storage {
        StepLogits::F32 => (None, 1),
        StepLogits::Compact { sm_count, tuning } => {
            // the sm90 forward's grid for a chunk of `rows` tokens, at most MAX_STATS_SPLITS
            // partials a token (a chunk worth taking has ≥ 8 token tiles: 16 splits fill 128 SMs)
            let cap = MAX_STATS_SPLITS.min(sm_count.max(1));
            let row_bytes = d * dtype.size_in_bytes();
            let token_tiles = rows.div_ceil(SM90_TILE_M);
            let (g, cluster) =
                super::sm90_grid_tuned(token_tiles, v.div_ceil(SM90_TILE_N), sm_count, cap, row_bytes, tuning);
            (Some(g), cluster)
        }
    };
    let (stats_splits, stats_seg_cols) = match forward_grid {
        Some(g) => (g.splits, g.tiles_per_split * SM90_TILE_N),
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
    let targets = l.take(4 * n);
    let token_scale = l.take(4 * n);
    let scalars = l.take(16);
    let unit_grad = l.take(4);
    let partials = l.take(16 * n * stats_splits);
    let target_logit = l.take(4 * n);
    let chunk_scalars = l.take(16);
    let (logits, g) = if compact {
        let q = l.take(rows * ldg * 2);
        (q, q)
    } else {
        (l.take(rows * ldg * 4), l.take(rows * ldg * dtype.size_in_bytes()))
    };
    let m_ref = compact.then(|| l.take(rows * v.div_ceil(SM90_TILE_N) * 4));
    // one chunk: dC is one product over every token, rounded once into the caller's dC; several:
    // an f32 accumulator, its first rows in dC's own buffer
    let accumulate = wanted.dc && dtype != DType::F32 && rows < n;
    // (a multiple of 128 rows: the tail's product then reads G from a 256-byte aligned column;
    // at V/2 − 1 = 64127 rows its misaligned operand made cuBLAS 1.5× slower, H200 2026-12-02)
    let fit = (v * dtype.size_in_bytes() / 4).saturating_sub(1);
    let dc_head_rows = if accumulate { fit / TILE_M * TILE_M } else { 0 };
    let dc_acc = accumulate.then(|| l.take((v - dc_head_rows) * d * 4));
    let db_acc = wanted.dbias.then(|| l.take(4 * v));
    let db_partial = wanted.dbias.then(|| l.take(rows.div_ceil(TILE_M) * ldg * 4));
    StepPlan {
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
        targets,
        token_scale,
        scalars,
        unit_grad,
        partials,
        target_logit,
        chunk_scalars,
        logits,
        g,
        m_ref,
        dc_acc,
        dc_head_rows,
        db_acc,
        db_partial,
        workspace_bytes: l.bytes(),
    }
}

/// The three-product plan with the largest token chunk whose workspace fits `budget` bytes, or an
/// error when not even 128 tokens fit (then the four-product plans are the ones to use). Compact
/// storage is for 16-bit inputs without a bias gradient only (it falls back to f32 otherwise).
pub fn step_plan(shape: Shape, dtype: DType, wanted: Wanted, budget: usize, storage: StepLogits) -> Result<StepPlan> {
    step_plan_capped(shape, dtype, wanted, budget, storage, usize::MAX)
}

/// [`step_plan`] with token chunks of at most `max_tokens` tokens (rounded down to a multiple of
/// 128, at least 128): the largest chunk is not always the fastest ([`default_step_max_tokens`]
/// is the measured rule; `crate::geometry::step_max_tokens` passes it, or the
/// `FLCE_STEP_MAX_TOKENS` measurement knob).
pub fn step_plan_capped(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: usize,
    storage: StepLogits,
    max_tokens: usize,
) -> Result<StepPlan> {
    let storage = usable(storage, dtype);
    let max = shape.n.div_ceil(TILE_M).min((max_tokens / TILE_M).max(1));
    let chunk = |k: usize| (k * TILE_M).min(shape.n);
    let fits = |k: usize| layout(shape, dtype, wanted, chunk(k), storage).workspace_bytes <= budget;
    // the whole batch in one chunk needs no dC accumulator, so it may fit where smaller chunks do
    // not; below it the workspace grows with the chunk
    let largest = if fits(max) { Some(max) } else { super::backward::largest_multiple(max - 1, fits) };
    match largest {
        Some(k) => Ok(layout(shape, dtype, wanted, chunk(k), storage)),
        None => Err(Error::InvalidOption {
            name: "workspace_budget",
            value: budget.to_string(),
            reason:
                "below the three-product plan's smallest workspace (the f32 dC accumulator and 128 tokens of logits)",
        }),
    }
}

/// The three-product plan with token chunks of `token_chunk` tokens (a multiple of 128 up to N,
/// or N), whatever its workspace: for tests and measurements of a given chunking.
pub fn step_plan_with_chunk(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    token_chunk: usize,
    storage: StepLogits,
) -> StepPlan {
    // (layout caps the chunk at N)
    layout(shape, dtype, wanted, token_chunk.max(1).div_ceil(TILE_M) * TILE_M, usable(storage, dtype))
}

/// Batches of up to this many tokens take the three-product pass in one chunk where the budget
/// holds it; longer ones in chunks of [`STEP_LONG_CHUNK`] tokens ([`default_step_max_tokens`]).
pub const STEP_WHOLE_MAX_TOKENS: usize = 16_384;

/// The token chunk of the three-product pass past [`STEP_WHOLE_MAX_TOKENS`] tokens.
pub const STEP_LONG_CHUNK: usize = 8192;

/// The most tokens a three-product chunk holds by default in a batch of `n` tokens: all of them
/// up to 16k, chunks of 8k past that. Measured (H200 2026-12-02, D 4096 / V 128256 unless said,
/// three-product pass ms, whole batch → 8k chunks, benchmarks/h200-2026-12-02-s19/step-chunks):
/// 32k 165.6 → 161.5 (0.975), 65k 332.1 → 324.3 (0.976); at 16k one chunk is as fast or faster
/// (8k chunks 1.008×, 1.026× at D 2048, 1.007× at Gemma 2's shape). A chunk of every token needs
/// no dC accumulator, but its logits' workspace grows with the tokens (16 GB at 65k against 3 GB
/// in 8k chunks).
pub fn default_step_max_tokens(n: usize) -> usize {
    if n > STEP_WHOLE_MAX_TOKENS {
        STEP_LONG_CHUNK
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
/// launches and its statistics pass. Measured at 1152-token chunks (H200, 2026-11-30,
/// benchmarks/h200-2026-11-30-session5/final/bench.log, 4 GB): 58.3 / 43.2 / 45.6 ms against
/// 63.3 / 57.4 / 59.1 for the default recomputing pass at Gemma 2 / Llama 3 / Qwen 2.5.
pub const MIN_STEP_TOKEN_CHUNK: usize = 1024;

/// The three-product plan within `budget` (chunks of at most `max_tokens` tokens:
/// [`step_plan_capped`]) when it pays: its token chunk holds at least [`MIN_STEP_TOKEN_CHUNK`]
/// tokens (or every token). None: the recomputing (four-product) plans are the ones to use with
/// this budget.
pub fn step_plan_if_faster(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: usize,
    storage: StepLogits,
    max_tokens: usize,
) -> Option<StepPlan> {
    let plan = step_plan_capped(shape, dtype, wanted, budget, storage, max_tokens).ok()?;
    (plan.token_chunk >= MIN_STEP_TOKEN_CHUNK.min(shape.n)).then_some(plan)
}

#[cfg(test)]
mod tests {
    use super::super::Sm90Tuning;
    use super::*;

    const LLAMA: Shape = Shape { n: 8192, d: 4096, v: 128_256 };
    const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };
    const F32: StepLogits = StepLogits::F32;
    const UNPAIRED: Sm90Tuning = Sm90Tuning::UNPAIRED;
    const COMPACT: StepLogits = StepLogits::Compact { sm_count: 132, tuning: UNPAIRED };

    #[test]
    fn the_three_product_plan_is_taken_only_with_chunks_that_pay() {
        // Llama 3: 1.05 GB of accumulator in the workspace (the other half in dC); 1.5 GB leaves a
        // few hundred tokens a chunk: not worth it; 2.5 GB 2048
        assert!(step_plan(LLAMA, DType::BF16, BOTH, 1536 << 20, F32).is_ok());
        assert_eq!(step_plan_if_faster(LLAMA, DType::BF16, BOTH, 1536 << 20, F32, usize::MAX), None);
        assert_eq!(
            step_plan_if_faster(LLAMA, DType::BF16, BOTH, 2560 << 20, F32, usize::MAX).unwrap().token_chunk,
            2048
        );
        let p =
            step_plan_if_faster(LLAMA, DType::BF16, BOTH, 4 << 30, F32, usize::MAX).expect("4 GB: 2816-token chunks");
        assert!(p.token_chunk >= MIN_STEP_TOKEN_CHUNK);
        // a batch smaller than the minimum chunk takes it whole
        let small = Shape::new(300, 64, 1000);
        assert_eq!(step_plan_if_faster(small, DType::BF16, BOTH, 64 << 20, F32, usize::MAX).unwrap().token_chunk, 300);
        assert_eq!(step_plan_if_faster(LLAMA, DType::BF16, BOTH, 1 << 30, F32, usize::MAX), None);
    }

    #[test]
    fn a_token_cap_bounds_the_chunk_and_its_workspace() {
        let compact = StepLogits::Compact { sm_count: 132, tuning: UNPAIRED };
        let long = Shape { n: 65_536, ..LLAMA };
        let whole = step_plan(long, DType::BF16, BOTH, 40 << 30, compact).unwrap();
        assert_eq!((whole.token_chunk, whole.dc_acc), (65_536, None), "40 GB: one chunk, no accumulator");
        for (cap, chunk) in [(8192, 8192), (8000, 7936), (100, 128), (usize::MAX, 65_536)] {
            let p = step_plan_capped(long, DType::BF16, BOTH, 40 << 30, compact, cap).unwrap();
            assert_eq!(p.token_chunk, chunk, "cap {cap}");
            assert!(p.workspace_bytes <= whole.workspace_bytes);
            // below every token: dC's f32 accumulator
            assert_eq!(p.dc_acc.is_some(), chunk < long.n, "cap {cap}");
        }
        // the budget still binds below the cap
        let tight = step_plan_capped(long, DType::BF16, BOTH, 2 << 30, compact, 8192).unwrap();
        assert!(tight.token_chunk < 8192 && tight.workspace_bytes <= 2 << 30, "{}", tight.token_chunk);
        // a cap at or past N changes nothing
        assert_eq!(
            step_plan_capped(LLAMA, DType::BF16, BOTH, 8 << 30, compact, 8192).unwrap(),
            step_plan(LLAMA, DType::BF16, BOTH, 8 << 30, compact).unwrap()
        );
        let cap = step_plan_if_faster(long, DType::BF16, BOTH, 40 << 30, compact, 4096).unwrap();
        assert_eq!(cap.token_chunk, 4096);
    }

    #[test]
    fn long_batches_take_8k_chunks_by_default() {
        let compact = StepLogits::Compact { sm_count: 132, tuning: UNPAIRED };
        for (n, chunk) in [(8192, 8192), (16_384, 16_384), (16_512, 8192), (65_536, 8192)] {
            let shape = Shape { n, ..LLAMA };
            let p = step_plan_if_faster(shape, DType::BF16, BOTH, 40 << 30, compact, default_step_max_tokens(n));
            assert_eq!(p.unwrap().token_chunk, chunk, "n {n}");
        }
        // the budget still binds below the default cap
        let long = Shape { n: 65_536, ..LLAMA };
        let tight = step_plan_capped(long, DType::BF16, BOTH, 2 << 30, compact, default_step_max_tokens(long.n));
        assert!(tight.unwrap().token_chunk < STEP_LONG_CHUNK);
    }

    #[test]
    fn the_budget_picks_the_largest_token_chunk() {
        // compact Llama 3 at 8192 tokens fits whole in less than the accumulator and a chunk: 32k
        let long = Shape { n: 32_768, ..LLAMA };
        for (shape, storage) in [(LLAMA, F32), (long, COMPACT)] {
            let p = step_plan(shape, DType::BF16, BOTH, 4 << 30, storage).unwrap();
            assert!(p.workspace_bytes <= 4 << 30);
            assert_eq!(p.token_chunk % TILE_M, 0);
            let bigger = layout(shape, DType::BF16, BOTH, p.token_chunk + TILE_M, storage);
            assert!(bigger.workspace_bytes > 4 << 30, "{storage:?}: a larger chunk would have fitted");
            // the accumulator's second half (the first in dC's buffer): 1.05 GB
            assert_eq!(p.dc_head_rows, (LLAMA.v / 2 - 1) / 128 * 128);
            assert_eq!(p.dc_acc.unwrap().bytes, (LLAMA.v - p.dc_head_rows) * LLAMA.d * 4);
            assert_eq!(p.token_range(p.token_chunks() - 1).end, shape.n);
        }
        assert!(step_plan(LLAMA, DType::BF16, BOTH, 1 << 30, F32).is_err());
        // one chunk of every token needs no accumulator: compact Llama 3 fits whole in 2.1 GB
        let one = step_plan(LLAMA, DType::BF16, BOTH, 2100 << 20, COMPACT).unwrap();
        assert_eq!((one.token_chunks(), one.dc_acc), (1, None));
        assert!(step_plan(LLAMA, DType::BF16, BOTH, 1900 << 20, COMPACT).unwrap().token_chunks() > 1);
        assert!(step_plan(LLAMA, DType::BF16, BOTH, 1 << 30, COMPACT).is_err());
    }

    #[test]
    fn compact_logits_take_two_bytes_a_logit_and_triple_the_chunk() {
        // the train step's loss shape: 1 GB of accumulator, 2 GB of budget
        let shape = Shape::new(16_384, 2048, 128_256);
        let f32 = step_plan(shape, DType::BF16, BOTH, 2 << 30, F32).unwrap();
        let compact = step_plan(shape, DType::BF16, BOTH, 2 << 30, COMPACT).unwrap();
        assert_eq!(compact.storage, COMPACT);
        assert_eq!(compact.logits, compact.g, "G overwrites q in place");
        assert_eq!(compact.logits.bytes, compact.token_chunk * compact.ldg * 2);
        assert_eq!(compact.mref_ld(), shape.v.div_ceil(SM90_TILE_N));
        assert_eq!(compact.m_ref.unwrap().bytes, compact.token_chunk * compact.mref_ld() * 4);
        assert!(compact.token_chunk >= 2 * f32.token_chunk, "{} vs {}", compact.token_chunk, f32.token_chunk);
        // the statistics are the forward's partials: one per split of its grid
        let grid = compact.forward_grid.unwrap();
        assert_eq!(compact.stats_splits, grid.splits);
        assert_eq!(compact.partials.bytes, 16 * shape.n * grid.splits);
        assert!(grid.splits * grid.tiles_per_split >= compact.mref_ld());
        assert!(f32.forward_grid.is_none() && f32.m_ref.is_none());
    }

    #[test]
    fn paired_compact_forwards_keep_their_slots_in_pairs_within_one_wave() {
        let paired = StepLogits::Compact { sm_count: 132, tuning: Sm90Tuning { cluster: 2, ..UNPAIRED } };
        let train16k = Shape::new(16384, 2048, 128_256);
        for (shape, budget) in [(train16k, 2 << 30), (LLAMA, 4 << 30), (Shape::new(300, 64, 1000), 64 << 20)] {
            let p = step_plan(shape, DType::BF16, BOTH, budget, paired).unwrap();
            let g = p.forward_grid.unwrap();
            assert_eq!(g.slots % p.forward_cluster, 0, "{shape:?}: {g:?}");
            assert!(g.slots * g.splits <= 132, "{shape:?}: a second wave {g:?}");
            // Llama 3 in one chunk of 64 token tiles and the 16k loss in chunks of 43 pair
            if shape.n >= 8192 {
                assert_eq!(p.forward_cluster, 2, "{shape:?}: {p:?}");
            }
        }
        // unpaired tuning: never
        assert_eq!(step_plan(LLAMA, DType::BF16, BOTH, 4 << 30, COMPACT).unwrap().forward_cluster, 1);
    }

    #[test]
    fn a_given_chunk_is_rounded_to_whole_token_tiles() {
        let s = Shape::new(300, 64, 1000);
        let p = step_plan_with_chunk(s, DType::BF16, BOTH, 100, COMPACT);
        assert_eq!((p.token_chunk, p.token_chunks(), p.storage), (128, 3, COMPACT));
        assert!(p.dc_acc.is_some(), "several chunks accumulate dC in f32");
        let whole = step_plan_with_chunk(s, DType::BF16, BOTH, 1 << 20, F32);
        assert_eq!((whole.token_chunk, whole.token_chunks(), whole.dc_acc), (300, 1, None));
        assert_eq!(step_plan_with_chunk(Shape::new(1, 8, 10), DType::F16, BOTH, 128, COMPACT).token_chunk, 1);
    }

    #[test]
    fn compact_logits_fall_back_to_f32_for_f32_inputs_only() {
        let s = Shape::new(300, 64, 1000);
        assert_eq!(step_plan(s, DType::F32, BOTH, 64 << 20, COMPACT).unwrap().storage, F32);
        assert_eq!(step_plan(s, DType::F16, BOTH, 64 << 20, COMPACT).unwrap().storage, COMPACT);
        // a bias gradient: G's kernel leaves the column sums in db_partial, as the f32 one does
        let with_db = step_plan(s, DType::BF16, Wanted::ALL, 64 << 20, COMPACT).unwrap();
        assert_eq!(with_db.storage, COMPACT);
        assert!(with_db.db_acc.is_some() && with_db.db_partial.is_some() && with_db.m_ref.is_some());
    }

    #[test]
    fn few_tokens_over_a_wide_vocabulary_split_the_statistics() {
        let gemma = Shape::new(8192, 2304, 256_000);
        let p = step_plan(gemma, DType::BF16, BOTH, 4 << 30, F32).unwrap();
        assert!(p.stats_splits > 1 && p.stats_splits <= MAX_STATS_SPLITS, "{}", p.stats_splits);
        assert!(p.stats_splits * p.stats_seg_cols >= gemma.v && (p.stats_splits - 1) * p.stats_seg_cols < gemma.v);
        assert_eq!(p.partials.bytes, 16 * gemma.n * p.stats_splits);
        let small = step_plan(Shape::new(3, 8, 100), DType::BF16, BOTH, 1 << 20, F32).unwrap();
        assert_eq!((small.stats_splits, small.stats_seg_cols), (1, 128));
    }

    #[test]
    fn f32_accumulates_in_place_and_small_problems_take_one_chunk() {
        let p = step_plan(Shape::new(300, 64, 1000), DType::F32, Wanted::ALL, 64 << 20, F32).unwrap();
        assert!(p.dc_acc.is_none() && p.db_acc.is_some());
        assert_eq!((p.token_chunk, p.token_chunks()), (300, 1));
    }
}
