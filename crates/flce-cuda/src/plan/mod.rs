//! Plans as values: pure host logic, unit-tested without a GPU.
//!
//! A plan is made once per call shape ([`forward_plan`], [`backward_plan`]) and then consumed by
//! the launch, which never plans again: it knows its kernel family, its workspace bytes and
//! regions, its work list (vocabulary and token chunks, passes) and where each accumulator lives.
//! The PyTorch binding asks for the plans once per shape and hands them back with every call.

mod backward;
mod forward;
mod product;
mod sm90;
#[cfg(test)]
pub(crate) mod tests;
mod three_product;
mod vocab_slice;

pub use backward::token_outer;
pub use backward::{
    backward_plan, de_head_rows, de_pass_applies, de_pass_pays, de_pass_plan, de_pass_wants, default_backward_budget,
    gradient_tenth, large_n_seconds, one_or_two_passes, slice_backward_plan, sm90_grad_steps, token_chunked_plan,
    with_dc_scratch, with_de_pass, with_token_chunks, without_de_head, BackwardPlan, DcAccumulator, DcTail,
    DeAccumulator, GBuffer, TailReach, DE_PASS_TAIL_SHARE, MAX_TOKEN_CHUNKS,
};
pub use forward::{
    best_split, default_forward_budget, forward_plan, forward_plan_tuned, ForwardPlan, FORWARD_BYTES_PER_TOKEN,
    MAX_SM90_SPLITS, MAX_SPLITS, SM90_LARGE_N_BAND, SM90_LARGE_N_L2_BUDGET, SM90_LARGE_N_TOKENS,
};
pub use product::{sm90_product_order, sm90_product_tile_n, Sm90ProductOrder, SM90_PRODUCT_TILE_WIDTHS};
pub use sm90::{
    cluster_for_tiles, grad_grid, sm90_grid, sm90_grid_tuned, Sm90Grid, Sm90Rest, Sm90Tuning, REST_IDLE_ONE_IN,
    REST_MAX_SPLITS, SM90_COMPACT_L2_BUDGET, SM90_L2_BUDGET,
};
pub use three_product::{
    default_de_k_chunk, default_three_product_max_tokens, three_product_plan, three_product_plan_capped,
    three_product_plan_if_faster, three_product_plan_with_chunk, with_de_k_chunks, DeKChunks, MrefPlace, StatePlace,
    ThreeProductLogits, ThreeProductPlan, DE_K_CHUNK_ALIGN, MIN_THREE_PRODUCT_TOKEN_CHUNK, THREE_PRODUCT_LONG_CHUNK,
    THREE_PRODUCT_WHOLE_MAX_TOKENS,
};
pub use vocab_slice::{
    vocab_slice_plan, vocab_slice_plan_applies, vocab_slice_plan_with_head, VocabSlicePlan, VocabSliceRest,
    MIN_VOCAB_SLICE_HEAD_ROWS, MIN_VOCAB_SLICE_HEAD_SHARE,
};

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
    if vocab_chunk.is_multiple_of(SM90_TILE_N) {
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

/// A plan that computes the loss and its gradients in the forward, for a workspace budget that
/// buys speed, run by `CudaLoss::forward_backward` (for grad_output 1, or the grad_output the
/// caller says its backward will bring): the three-product pass over token chunks, or, for budgets
/// too small for a chunk that pays, the vocabulary-slice pass.
// (made once per call shape and kept: the variants' sizes do not matter)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForwardBackwardPlan {
    ThreeProduct(ThreeProductPlan),
    VocabSlice(VocabSlicePlan),
}

impl ForwardBackwardPlan {
    pub fn workspace_bytes(&self) -> usize {
        match self {
            ForwardBackwardPlan::ThreeProduct(p) => p.workspace_bytes,
            ForwardBackwardPlan::VocabSlice(p) => p.workspace_bytes,
        }
    }
    /// "three_product" or "vocab_slice" (reports, the Python plan's `kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            ForwardBackwardPlan::ThreeProduct(_) => "three_product",
            ForwardBackwardPlan::VocabSlice(_) => "vocab_slice",
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
    /// Whether a backward call plans its token chunks outer: dE wanted, dC not
    /// ([`token_outer`]).
    pub fn token_outer(&self) -> bool {
        self.de && !self.dc
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
