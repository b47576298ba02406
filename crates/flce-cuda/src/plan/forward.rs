//! The forward plan: which family computes the per-token statistics, and its workspace.
//!
//! cuBLAS family: vocabulary chunks of f32 logits (the budget; by default 10% of the gradient
//! bytes), folded by a reduction kernel. sm80 family: the fused tile kernel, the vocabulary split
//! across blocks for occupancy (`splits`), each split leaving a 16-byte partial per token; the
//! split count is capped so the workspace stays within 1 MB + 16·N bytes. sm90 family: the same
//! partials, its grid of token-tile slots × splits from [`super::sm90_grid`] (within an L2
//! budget; past 16k tokens up to 16 splits, in launches over bands of 12 token tiles:
//! [`SM90_LARGE_N_TOKENS`], [`SM90_LARGE_N_BAND`]). Either way the finish step merges the partials.

use std::ops::Range;

use flce_core::{DType, Shape};

use super::{chunk_range, gradient_bytes, Layout, Region, Wanted, ALIGN};
use crate::geometry::{TILE_M, TILE_N};
use crate::modes::{Family, ForwardMode};

/// At most this many forward splits.
pub const MAX_SPLITS: usize = 8;
/// Forward workspace target of the fused family: 1 MB plus this many bytes per token (the sm90
/// family past [`SM90_LARGE_N_TOKENS`] tokens: up to [`MAX_SM90_SPLITS`] partials of 16 bytes),
/// and the finish step's block sums (32 bytes per 256 tokens, [`crate::geometry::finish_sums_bytes`]).
pub const FORWARD_BYTES_PER_TOKEN: usize = 16;

/// Past this many tokens the sm90 forward's grid may take up to [`MAX_SM90_SPLITS`] vocabulary
/// splits, and its blocks at least [`SM90_LARGE_N_L2_BUDGET`] bytes of L2. The memory target
/// above allows 2 splits at 32k tokens and 1 past 64k, so every running token tile of E stayed in
/// play: 64 × 2 or 128 × 1 blocks, 68–130 MB of E and C against the H200's 50 MB L2. ncu at
/// (65536, 4096, 128256) (H200, journal v25): DRAM 56%
/// (≈ 290 GB at 4.8 TB/s) at 1.32 GHz, 109 ms, against 32% (≈ 150 GB) at 1.43 GHz, 100 ms, for
/// the 11 × 12 grid these allow; timed, forward 0.964× and 0.976× in two runs, 0.985× at 32k
/// (32 × 4). Not below 16k tokens: the 40 MB budget regrids Gemma 2's 8k forward (32 × 4 →
/// 64 × 2), 1.042× there.
pub const SM90_LARGE_N_TOKENS: usize = 16_384;
/// At most this many sm90 forward splits past [`SM90_LARGE_N_TOKENS`] tokens (16 bytes a token each).
pub const MAX_SM90_SPLITS: usize = 16;
/// The least L2 budget of the sm90 forward's grid past [`SM90_LARGE_N_TOKENS`] tokens.
pub const SM90_LARGE_N_L2_BUDGET: usize = 40 << 20;
/// Token tiles per launch of the sm90 forward past [`SM90_LARGE_N_TOKENS`] tokens (12 × 11 paired
/// blocks a launch on 132 SMs): in one launch the blocks drift apart over their many token tiles
/// and stop sharing C's boxes through L2 (journal v25, v26). Timed on the H200 (journal v26;
/// forward, against one launch): 0.975 / 0.956 / 0.961× at 32k / 65k / 128k tokens, 0.952 /
/// 0.946× at 65k / 128k in a first run (bands of 11, unpaired: 0.974 / 0.955); bands of 16 ran
/// 1.008 / 1.019× bands of 12; at and below 16k bands ran 0.985–1.08× (a short batch's bands
/// leave SMs idle).
pub const SM90_LARGE_N_BAND: usize = 12;

/// Default workspace of a cuBLAS-family forward: 10% of the bytes of dE and dC (the backward's
/// default budget too, so forward + backward never hold more than that), at least 8 MB.
pub fn default_forward_budget(shape: Shape, dtype: DType) -> usize {
    (gradient_bytes(shape, dtype, Wanted { de: true, dc: true, dbias: false }) / 10).max(8 << 20)
}

/// The sm90 forward's split cap, tuning and token tiles per launch (0: one launch) for `n`
/// tokens: past [`SM90_LARGE_N_TOKENS`], up to [`MAX_SM90_SPLITS`] splits, at least
/// [`SM90_LARGE_N_L2_BUDGET`] of L2 and bands of [`SM90_LARGE_N_BAND`] where the tuning names no
/// band (an L2 budget of 0, the every-token-tile grid of the measurement knob, keeps all three).
fn sm90_large_n(n: usize, by_memory: usize, tuning: super::Sm90Tuning) -> (usize, super::Sm90Tuning, usize) {
    if n <= SM90_LARGE_N_TOKENS || tuning.l2_budget == 0 {
        return (by_memory, tuning, tuning.forward_band.unwrap_or(0));
    }
    let l2_budget = tuning.l2_budget.max(SM90_LARGE_N_L2_BUDGET);
    let band = tuning.forward_band.unwrap_or(SM90_LARGE_N_BAND);
    (by_memory.max(MAX_SM90_SPLITS), super::Sm90Tuning { l2_budget, ..tuning }, band)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardPlan {
    pub shape: Shape,
    pub dtype: DType,
    pub family: Family,
    /// Vocabulary rows per cuBLAS chunk (cuBLAS family; 0 otherwise).
    pub vocab_chunk: usize,
    /// f32 logits of one chunk [N, vocab_chunk] (cuBLAS family).
    pub logits: Option<Region>,
    pub token_tiles: usize,
    pub vocab_tiles: usize,
    /// Partials per token (vocabulary splits of the fused family; 1 for cuBLAS chunks, which
    /// merge into one partial as they go; sm90: its grid's and its rest's).
    pub splits: usize,
    /// Vocabulary tiles per split: 128-column tiles (`vocab_tiles`), the sm90 main grid's
    /// 256-column ones.
    pub tiles_per_split: usize,
    /// Token-tile slots of the sm90 grid (grid x; [`super::sm90_grid`]): each block runs every
    /// `token_slots`-th token tile of its split (a multiple of `cluster`). The token tiles for the
    /// other families.
    pub token_slots: usize,
    /// Blocks per cluster of the sm90 grid ([`super::Sm90Tuning::cluster_for`]); 1 elsewhere.
    pub cluster: usize,
    /// sm90: token tiles per launch (0: one launch; [`super::Sm90Tuning::forward_band`]). Each
    /// launch is a grid of `token_slots` (the band's token tiles) × `splits` blocks over its band.
    pub band_tiles: usize,
    /// sm90: the grid of each launch (256-column tiles; `splits` counts its rest's partials
    /// too, [`super::Sm90Grid::partial_rows`]).
    pub sm90_grid: Option<super::Sm90Grid>,
    pub targets: Region,
    pub target_logit: Region,
    pub partials: Region,
    /// The finish step's block sums ([`crate::geometry::finish_sums_bytes`]).
    pub finish_sums: Region,
    pub status: Region,
    pub workspace_bytes: usize,
}

impl ForwardPlan {
    /// Number of cuBLAS vocabulary chunks (cuBLAS family).
    pub fn vocab_chunks(&self) -> usize {
        self.shape.v.div_ceil(self.vocab_chunk.max(1))
    }
    /// The vocabulary rows of chunk `i`.
    pub fn vocab_range(&self, i: usize) -> Range<usize> {
        chunk_range(i, self.vocab_chunk, self.shape.v)
    }
}

/// The forward plan for `shape` on a GPU with `sm_count` multiprocessors, where "fused" means the
/// family `fused` ([`crate::modes::fused_family`]). The cuBLAS family falls back to the fused one
/// when not even 128 vocabulary columns of f32 logits for every token fit the budget.
pub fn forward_plan(
    shape: Shape,
    dtype: DType,
    sm_count: usize,
    mode: ForwardMode,
    budget: Option<usize>,
    fused: Family,
) -> ForwardPlan {
    forward_plan_tuned(shape, dtype, sm_count, mode, budget, fused, super::Sm90Tuning::default())
}

/// [`forward_plan`] with the sm90 grid's L2 budget and cluster size ([`super::sm90_grid`]; the
/// backend passes its [`crate::tuning::Tuning`]'s, which measurement knobs may override).
pub fn forward_plan_tuned(
    shape: Shape,
    dtype: DType,
    sm_count: usize,
    mode: ForwardMode,
    budget: Option<usize>,
    fused: Family,
    tuning: super::Sm90Tuning,
) -> ForwardPlan {
    let n = shape.n;
    let token_tiles = n.div_ceil(TILE_M);
    let vocab_tiles = shape.v.div_ceil(TILE_N);
    let v_pad = vocab_tiles * TILE_N;
    let budget = budget.unwrap_or_else(|| default_forward_budget(shape, dtype));
    let chunk = (budget.saturating_sub(24 * n + 4 * ALIGN) / (4 * n) / TILE_N * TILE_N).min(v_pad);
    let mode = mode.resolve(fused);
    let family = if mode == ForwardMode::CublasChunks && chunk >= TILE_N { Family::Cublas } else { mode.fused(fused) };
    // never more partials than the memory target allows
    let by_memory = ((1 << 20) + (FORWARD_BYTES_PER_TOKEN - 8) * n) / (16 * n);
    // (splits, token-tile slots, blocks per cluster, sm90 token tiles per launch: 0 for one
    // launch, the sm90 grid)
    let (splits, token_slots, cluster, band_tiles, sm90_grid) = match family {
        // two blocks per SM: aim for two waves of blocks
        Family::Sm80 => {
            let s = (2 * sm_count.max(1)).div_ceil(token_tiles).min(MAX_SPLITS).min(by_memory).min(vocab_tiles).max(1);
            (s, token_tiles, 1, 0, None)
        }
        Family::Sm90 => {
            let (by_memory, tuning, band) = sm90_large_n(n, by_memory, tuning);
            let tiles = shape.v.div_ceil(crate::geometry::SM90_TILE_N);
            let token_tiles = n.div_ceil(crate::geometry::SM90_TILE_M);
            let (g, cluster, band) = if band > 0 && token_tiles > band {
                // launches over bands of token tiles, one block per (token tile, split) of a band
                let band = band.min(sm_count.max(1));
                let splits = (sm_count.max(1) / band).min(by_memory).min(tiles).max(1);
                let cluster = if band % 2 == 0 { tuning.cluster_for(band) } else { 1 };
                (super::Sm90Grid::even(band, splits, tiles), cluster, band)
            } else {
                // one block per SM, running start to end, every token tile of its split in turn
                let cap = by_memory.min(sm_count.max(1)).min(vocab_tiles).max(1);
                let row_bytes = shape.d * dtype.size_in_bytes();
                let (g, cluster) = super::sm90_grid_tuned(token_tiles, tiles, sm_count, cap, row_bytes, tuning);
                (g, cluster, 0)
            };
            (g.partial_rows(), g.slots, cluster, band, Some(g))
        }
        Family::Cublas => (1, token_tiles, 1, 0, None),
    };
    // (sm80 and cuBLAS: 128-column tiles; sm90: the grid's 256-column ones)
    let (splits, tiles_per_split) = match sm90_grid {
        Some(g) => (splits, g.tiles_per_split),
        None => {
            let per_split = vocab_tiles.div_ceil(splits);
            (vocab_tiles.div_ceil(per_split), per_split)
        }
    };
    let mut l = Layout::default();
    let targets = l.take(4 * n);
    let target_logit = l.take(4 * n);
    let partials = l.take(16 * n * splits);
    let finish_sums = l.take(crate::geometry::finish_sums_bytes(n));
    let status = l.take(4);
    let (vocab_chunk, logits) = match family {
        Family::Cublas => (chunk, Some(l.take(4 * n * chunk))),
        Family::Sm80 | Family::Sm90 => (0, None),
    };
    ForwardPlan {
        shape,
        dtype,
        family,
        vocab_chunk,
        logits,
        token_tiles,
        vocab_tiles,
        splits,
        tiles_per_split,
        token_slots,
        cluster,
        band_tiles,
        sm90_grid,
        targets,
        target_logit,
        partials,
        finish_sums,
        status,
        workspace_bytes: l.bytes(),
    }
}

/// How many ways to split `cols` column tiles for `rows` row tiles on `sm_count` SMs running one
/// block each to the end: the split count in 1..=cap whose grid of rows × splits blocks (each
/// ceil(cols / splits) tiles long) keeps the largest fraction of the SMs busy over the run; the
/// smallest such count on ties (longer blocks fill their pipelines fewer times).
pub fn best_split(rows: usize, cols: usize, sm_count: usize, cap: usize) -> usize {
    let sm = sm_count.max(1);
    let busy = |s: usize| {
        let per_block = cols.div_ceil(s);
        let blocks = rows * cols.div_ceil(per_block);
        let waves = blocks.div_ceil(sm);
        (rows * cols) as f64 / (waves * sm * per_block) as f64
    };
    let mut best = 1;
    for s in 2..=cap.max(1).min(cols.max(1)) {
        if busy(s) > busy(best) + 1e-9 {
            best = s;
        }
    }
    best
}
