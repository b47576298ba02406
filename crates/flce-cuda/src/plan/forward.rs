//! The forward plan: which family computes the per-token statistics, and its workspace.
//!
//! cuBLAS family: vocabulary chunks of f32 logits (the budget; by default 10% of the gradient
//! bytes), folded by a reduction kernel. sm80 family: the fused tile kernel, the vocabulary split
//! across blocks for occupancy (`splits`), each split leaving a 16-byte partial per token; the
//! split count is capped so the workspace stays within 1 MB + 16·N bytes. Either way the finish
//! step merges the partials.

use std::ops::Range;

use flce_core::{DType, Shape};

use super::{chunk_range, gradient_bytes, Layout, Region, Wanted, ALIGN};
use crate::family::{Family, ForwardMode};
use crate::geometry::{TILE_M, TILE_N};

/// At most this many forward splits.
pub const MAX_SPLITS: usize = 8;
/// Forward workspace target of the fused family: 1 MB plus this many bytes per token.
pub const FORWARD_BYTES_PER_TOKEN: usize = 16;

/// Default workspace of a cuBLAS-family forward: 10% of the bytes of dE and dC (the backward's
/// default budget too, so forward + backward never hold more than that), at least 8 MB.
pub fn default_forward_budget(shape: Shape, dtype: DType) -> usize {
    (gradient_bytes(shape, dtype, Wanted { de: true, dc: true, dbias: false }) / 10).max(8 << 20)
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
    /// merge into one partial as they go).
    pub splits: usize,
    pub tiles_per_split: usize,
    /// The sm90 forward's lanes-and-helpers schedule, when it is on (a profiling variant,
    /// `FLCE_SM90_MAINLOOP=lanes=1`) and pays; `splits` then counts both kinds of partials.
    pub sm90_lanes: Option<Sm90Lanes>,
    pub targets: Region,
    pub target_logit: Region,
    pub partials: Region,
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

/// The sm90 forward's "lanes and helpers" schedule (docs/perf-notes.md v12): the split grid's
/// lanes (token tile × vocabulary split, `lane_tiles` 256-column tiles each, every lane walking
/// its range in step with the others, so that the blocks running together read the same C tiles)
/// stop after `main_tiles`, and `helpers` blocks on the SMs the lanes leave idle take the lanes'
/// leftovers, helper h the lanes [h·L/H, (h+1)·L/H) one after another (they too walk in step).
/// Partials per token: `lane_splits` from the lanes, then `lane_splits` from the helpers (one per
/// lane, written even when its leftover is empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm90Lanes {
    pub lane_splits: usize,
    pub lane_tiles: usize,
    pub main_tiles: usize,
    pub helpers: usize,
}

impl Sm90Lanes {
    /// The schedule for `token_tiles` × `vocab_tiles` (256-column) tiles split `lane_splits` ways,
    /// when it shortens the longest block's run on `sm_count` SMs; None otherwise.
    pub fn plan(token_tiles: usize, vocab_tiles: usize, lane_splits: usize, sm_count: usize) -> Option<Self> {
        let lanes = token_tiles * lane_splits;
        if lane_splits == 0 || lanes == 0 || lanes >= sm_count {
            return None;
        }
        let helpers = sm_count - lanes;
        let lane_tiles = vocab_tiles.div_ceil(lane_splits);
        // k lanes per helper at most; main = k·(lane − main) balances the two kinds of block
        let k = lanes.div_ceil(helpers);
        let main_tiles = (k * lane_tiles).div_ceil(k + 1);
        let s = Sm90Lanes { lane_splits, lane_tiles, main_tiles, helpers };
        (s.longest_run(token_tiles) < lane_tiles).then_some(s)
    }

    /// Block `block`'s parts, in order: (token tile, first 256-column tile, tiles, partial slot).
    /// kernels/sm90/forward.cu (flce_sm90_forward_lanes) computes the same, in the same order.
    pub fn parts(&self, token_tiles: usize, vocab_tiles: usize, block: usize) -> Vec<(usize, usize, usize, usize)> {
        let lanes = token_tiles * self.lane_splits;
        let helper = block >= lanes;
        let (first, end) = if helper {
            let h = block - lanes;
            (h * lanes / self.helpers, (h + 1) * lanes / self.helpers)
        } else {
            (block, block + 1)
        };
        (first..end)
            .map(|lane| {
                let split = lane / token_tiles;
                let begin = split * self.lane_tiles;
                let end = (begin + self.lane_tiles).min(vocab_tiles);
                let cut = (begin + self.main_tiles).min(end);
                let t0 = if helper { cut } else { begin };
                let count = (if helper { end } else { cut }).saturating_sub(t0);
                let slot = if helper { self.lane_splits + split } else { split };
                (lane % token_tiles, t0, count, slot)
            })
            .collect()
    }

    /// The tiles of the longest block: a lane's main part or a helper's leftovers.
    pub fn longest_run(&self, token_tiles: usize) -> usize {
        let lanes = token_tiles * self.lane_splits;
        self.main_tiles.max(lanes.div_ceil(self.helpers) * self.lane_tiles.saturating_sub(self.main_tiles))
    }
}

/// The forward plan for `shape` on a GPU with `sm_count` multiprocessors, where "fused" means the
/// family `fused` ([`crate::family::fused_family`]). The cuBLAS family falls back to the fused one
/// when not even 128 vocabulary columns of f32 logits for every token fit the budget.
pub fn forward_plan(
    shape: Shape,
    dtype: DType,
    sm_count: usize,
    mode: ForwardMode,
    budget: Option<usize>,
    fused: Family,
) -> ForwardPlan {
    forward_plan_with_lanes(shape, dtype, sm_count, mode, budget, fused, false)
}

/// [`forward_plan`], with the sm90 forward's lanes-and-helpers variant ([`Sm90Lanes`]) planned
/// where it pays when `sm90_lanes` (the backend passes whether its kernels were compiled so).
pub fn forward_plan_with_lanes(
    shape: Shape,
    dtype: DType,
    sm_count: usize,
    mode: ForwardMode,
    budget: Option<usize>,
    fused: Family,
    sm90_lanes: bool,
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
    let splits = match family {
        // two blocks per SM: aim for two waves of blocks
        Family::Sm80 => {
            (2 * sm_count.max(1)).div_ceil(token_tiles).min(MAX_SPLITS).min(by_memory).min(vocab_tiles).max(1)
        }
        // one block per SM, running start to end: the split count whose grid wastes least of the
        // last wave (a wave is one block per SM)
        Family::Sm90 => {
            let cap = by_memory.min(sm_count.max(1)).min(vocab_tiles).max(1);
            best_split(token_tiles, shape.v.div_ceil(crate::geometry::SM90_TILE_N), sm_count, cap)
        }
        Family::Cublas => 1,
    };
    // the lanes-and-helpers variant doubles the partials (lanes', then helpers')
    let sm90_lanes = (family == Family::Sm90 && sm90_lanes)
        .then(|| {
            let tiles = shape.v.div_ceil(crate::geometry::SM90_TILE_N);
            Sm90Lanes::plan(n.div_ceil(crate::geometry::SM90_TILE_M), tiles, splits, sm_count)
        })
        .flatten()
        // within the partials' memory, and a split count the sm80 fallback (rows not 16-byte
        // aligned) fills exactly with its own 128-column tiles
        .filter(|_| 2 * splits <= by_memory && vocab_tiles.div_ceil(vocab_tiles.div_ceil(2 * splits)) == 2 * splits);
    let splits = if sm90_lanes.is_some() { 2 * splits } else { splits };
    let tiles_per_split = vocab_tiles.div_ceil(splits);
    let splits = vocab_tiles.div_ceil(tiles_per_split);
    let mut l = Layout::default();
    let targets = l.take(4 * n);
    let target_logit = l.take(4 * n);
    let partials = l.take(16 * n * splits);
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
        sm90_lanes,
        targets,
        target_logit,
        partials,
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
