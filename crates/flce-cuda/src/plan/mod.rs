//! Plans as values: pure host logic, unit-tested without a GPU.
//!
//! A plan is made once per call shape ([`forward_plan`], [`backward_plan`]) and then consumed by
//! the launch, which never plans again: it knows its kernel family, its workspace bytes and
//! regions, its work list (vocabulary and token chunks, passes) and where each accumulator lives.
//! The PyTorch binding asks for the plans once per shape and hands them back with every call.

mod backward;
mod dc_scratch;
mod dc_tail;
mod de_pass;
mod forward;
mod grad_steps;
mod product;
mod slice;
mod sm90;
mod step;
mod step_de_chunks;
#[cfg(test)]
mod tail_tests;
#[cfg(test)]
mod tests;
mod token_chunks;
pub mod token_outer;

pub use backward::{
    backward_plan, default_backward_budget, gradient_tenth, slice_backward_plan, BackwardPlan, DcAccumulator,
    DeAccumulator, GBuffer,
};
pub use dc_scratch::with_dc_scratch;
pub use dc_tail::{de_head_rows, without_de_head, DcTail, TailReach};
pub use de_pass::{
    de_pass_applies, de_pass_pays, de_pass_plan, de_pass_wants, one_or_two_passes, with_de_pass, DE_PASS_TAIL_SHARE,
};
pub use forward::{
    best_split, default_forward_budget, forward_plan, forward_plan_tuned, ForwardPlan, FORWARD_BYTES_PER_TOKEN,
    MAX_SM90_SPLITS, MAX_SPLITS, SM90_LARGE_N_BAND, SM90_LARGE_N_L2_BUDGET, SM90_LARGE_N_TOKENS,
};
pub use grad_steps::sm90_grad_steps;
pub use product::{sm90_product_order, sm90_product_tile_n, Sm90ProductOrder, SM90_PRODUCT_TILE_WIDTHS};
pub use slice::{
    slice_plan, slice_plan_applies, slice_plan_with_head, SlicePlan, SliceRest, MIN_SLICE_HEAD_ROWS,
    MIN_SLICE_HEAD_SHARE,
};
pub use sm90::{
    cluster_for_tiles, grad_grid, sm90_grid, sm90_grid_tuned, Sm90Grid, Sm90Rest, Sm90Tuning, REST_IDLE_ONE_IN,
    REST_MAX_SPLITS, SM90_COMPACT_L2_BUDGET, SM90_L2_BUDGET,
};
pub use step::{
    default_step_max_tokens, step_plan, step_plan_capped, step_plan_if_faster, step_plan_with_chunk, DeKChunks,
    MrefPlace, StatePlace, StepLogits, StepPlan, MIN_STEP_TOKEN_CHUNK, STEP_LONG_CHUNK, STEP_WHOLE_MAX_TOKENS,
};
pub use step_de_chunks::{default_de_k_chunk, with_de_k_chunks, DE_K_CHUNK_ALIGN};
pub use token_chunks::{large_n_seconds, token_chunked_plan, with_token_chunks, MAX_TOKEN_CHUNKS};

use std::ops::Range;

use flce_core::{DType, Shape};

pub(crate) const ALIGN: usize = 256;

pub(crate) fn align(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}

/// The tile width every vocabulary chunk of a plan starts on: the sm90 G kernel's 256 columns
/// where the chunk is a multiple of it, else the other families' 128 (the sm80 G kernel addresses
/// its tiles from the chunk's first row / 128).
pub(crate) fn chunk_step(vocab_chunk: usize) -> usize {
    use crate::geometry::{SM90_TILE_N, TILE_N};
    if vocab_chunk % SM90_TILE_N == 0 {
        SM90_TILE_N
    } else {
        TILE_N
    }
}

/// The first row of a plan's last vocabulary chunk when the chunks are laid out from V backwards
/// (the tail's, [`BackwardPlan::vocab_range`]): the tile boundary ([`chunk_step`]) at or after
/// V − `vocab_chunk`, so that the chunk is within a tile of whole and starts on a tile.
pub(crate) fn last_chunk_start(v: usize, vocab_chunk: usize) -> usize {
    let step = chunk_step(vocab_chunk);
    v.saturating_sub(vocab_chunk).div_ceil(step) * step
}

/// A region of a workspace: byte offset and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Region {
    pub offset: usize,
    pub bytes: usize,
}

/// Lays out regions one after another, each aligned to 256 bytes.
#[derive(Default)]
pub(crate) struct Layout {
    end: usize,
}

impl Layout {
    pub(crate) fn take(&mut self, bytes: usize) -> Region {
        let r = Region { offset: self.end, bytes };
        self.end = align(self.end + bytes);
        r
    }
    pub(crate) fn bytes(&self) -> usize {
        self.end
    }
}

/// A plan that trades workspace for speed, run by `CudaLoss::forward_backward_trade` (forward and
/// gradients in one call, for grad_output 1): the three-product pass over token chunks, or, for
/// budgets too small for a chunk that pays, the vocabulary-slice pass.
// (made once per call shape and kept: the variants' sizes do not matter)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TradePlan {
    Step(StepPlan),
    Slice(SlicePlan),
}

impl TradePlan {
    pub fn workspace_bytes(&self) -> usize {
        match self {
            TradePlan::Step(p) => p.workspace_bytes,
            TradePlan::Slice(p) => p.workspace_bytes,
        }
    }
    /// "step" or "slice" (reports, the Python plan's `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            TradePlan::Step(_) => "step",
            TradePlan::Slice(_) => "slice",
        }
    }
}

/// Which gradients a backward call computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Wanted {
    pub de: bool,
    pub dc: bool,
    pub dbias: bool,
}

impl Wanted {
    pub const ALL: Wanted = Wanted { de: true, dc: true, dbias: true };
    pub fn any(&self) -> bool {
        self.de || self.dc || self.dbias
    }
}

/// Bytes of the gradients a backward call returns.
pub fn gradient_bytes(shape: Shape, dtype: DType, wanted: Wanted) -> usize {
    let s = dtype.size_in_bytes();
    (wanted.de as usize * shape.n * shape.d + wanted.dc as usize * shape.v * shape.d + wanted.dbias as usize * shape.v)
        * s
}

/// `count` items in chunks of `chunk`: the i-th chunk's range.
pub(crate) fn chunk_range(i: usize, chunk: usize, count: usize) -> Range<usize> {
    i * chunk..((i + 1) * chunk).min(count)
}
