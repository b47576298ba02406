//! The backward plan's types: [`BackwardPlan`] (its chunks, regions and passes), where each
//! f32 accumulator lives ([`DeAccumulator`], [`DcAccumulator`], [`DcTail`]) and where each
//! chunk's G goes ([`GBuffer`]). The functions that make plans are in the modules beside it.

use std::ops::Range;

use flce_core::{DType, Shape};

use super::{align, chunk_range, last_chunk_start, Region, Wanted};
use crate::geometry::TILE_N;
use crate::modes::Family;

/// Where dE's f32 accumulator lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeAccumulator {
    /// dE is not wanted.
    NotWanted,
    /// f32 inputs: dE accumulates in the caller's dE itself.
    InPlace,
    /// In the workspace; rounded into dE after the main pass.
    Workspace(Region),
    /// In the caller's dC buffer, past the rows the main pass writes; rounded into dE before the
    /// tail pass writes those rows.
    DcTail(DcTail),
    /// In the caller's dC buffer from its first byte, over rows that another pass writes after
    /// this plan's — the vocabulary-slice plan's head rows (their product runs last there:
    /// src/pass/vocab_slice.rs); rounded into dE after the main pass.
    DcHead,
}

impl DeAccumulator {
    /// Whether the f32 accumulator is separate from dE and is rounded into it after the main pass.
    pub fn needs_rounding(&self) -> bool {
        matches!(self, DeAccumulator::Workspace(_) | DeAccumulator::DcTail(_) | DeAccumulator::DcHead)
    }
}

/// Where each dC chunk is accumulated across token chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DcAccumulator {
    /// dC is not wanted.
    NotWanted,
    /// Straight into the caller's dC: one token chunk (one product per dC chunk, rounded once),
    /// or f32 inputs (the products add up in f32).
    Direct,
    /// An f32 chunk accumulator in the workspace, rounded into dC after the chunk's last token
    /// chunk.
    Workspace(Region),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackwardPlan {
    pub shape: Shape,
    pub dtype: DType,
    pub wanted: Wanted,
    /// The family that forms G for each chunk.
    pub family: Family,
    /// Tokens per chunk (a multiple of 128, or N).
    pub token_chunk: usize,
    /// Vocabulary rows per chunk (a multiple of 128).
    pub vocab_chunk: usize,
    /// Row pitch of G (and of the f32 logits and db partials), in elements.
    pub ldg: usize,
    pub targets: Region,
    pub token_scale: Region,
    pub scalars: Region,
    pub status: Region,
    pub de_acc: DeAccumulator,
    pub dc_acc: DcAccumulator,
    /// f32 accumulator of db \[V\] (when db is wanted).
    pub db_acc: Option<Region>,
    pub g: Region,
    /// f32 logits of one chunk [token_chunk, ldg] (cuBLAS family).
    pub logits: Option<Region>,
    /// Column sums of G per row tile (when db is wanted).
    pub db_partial: Option<Region>,
    pub workspace_bytes: usize,
    /// The ends of the leading vocabulary chunks whose G is written into dC's rows past the chunk
    /// (not yet written, so free) instead of the workspace: larger chunks at the same memory
    /// ([`super::with_dc_scratch`]). Empty: every chunk is `vocab_chunk` rows, its G in the
    /// workspace. The chunks after them are `vocab_chunk` rows from the last end.
    pub dc_scratch: Vec<usize>,
    /// The token chunks are the outer loop: each token chunk's dE is completed over the whole
    /// vocabulary (its f32 accumulator `token_chunk` rows) and rounded before the next. Only
    /// without dC ([`super::token_outer`]); otherwise the vocabulary chunks are outer.
    pub token_outer: bool,
    /// dE in a pass of its own after this plan's ([`super::with_de_pass`]): this plan's chunks
    /// compute dC and db only (its `wanted` is the call's), then this token-outer plan computes
    /// dE over the same workspace.
    pub de_pass: Option<Box<BackwardPlan>>,
    /// The first vocabulary row of this plan's chunks (0: the whole vocabulary). Past 0 the rows
    /// before it are another pass's — the vocabulary-slice plan's head ([`crate::plan::VocabSlicePlan`]) —
    /// which has already put its share of dE into this plan's accumulator: the first chunk adds to
    /// it instead of writing it.
    pub vocab_begin: usize,
}

/// Where a vocabulary chunk's G is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GBuffer {
    /// The plan's `g` region of the workspace, row pitch `ldg`.
    Workspace,
    /// The caller's dC buffer at this byte offset (past the chunk's own rows), row pitch `ldg`.
    Dc { byte_offset: usize, ldg: usize },
}

impl BackwardPlan {
    pub fn token_chunks(&self) -> usize {
        self.shape.n.div_ceil(self.token_chunk)
    }
    /// The first vocabulary row of the `vocab_chunk`-row chunks (after the dC-scratch chunks).
    pub fn uniform_start(&self) -> usize {
        self.dc_scratch.last().copied().unwrap_or(self.vocab_begin)
    }
    /// The first row of the tail pass's chunks (V without a tail).
    fn tail_start(&self) -> usize {
        let v = self.shape.v;
        self.dc_tail().map_or(v, |t| t.first_row.clamp(self.uniform_start().min(v), v))
    }
    /// The first row of the tail's last chunk ([`super::last_chunk_start`], within the tail; V
    /// itself without a tail).
    fn tail_last_start(&self) -> usize {
        last_chunk_start(self.shape.v, self.vocab_chunk).clamp(self.tail_start(), self.shape.v)
    }
    /// The scratch chunks and the `vocab_chunk`-row chunks before the tail (all of them without
    /// one): the index of the tail's first chunk.
    fn chunks_before_tail(&self) -> usize {
        self.dc_scratch.len() + (self.tail_start() - self.uniform_start()).div_ceil(self.vocab_chunk)
    }
    /// The tail's chunks before its last one.
    fn tail_chunks_before_last(&self) -> usize {
        (self.tail_last_start() - self.tail_start()).div_ceil(self.vocab_chunk)
    }
    /// The `vocab_chunk`-row chunks from [`Self::uniform_start`] to the tail (the last one shorter
    /// where the rows do not divide), then the tail's, laid out from its last chunk backwards: the
    /// last within a chunk of V (whole where V is on a tile boundary), the others whole before it,
    /// the short one first — so that the tail pass, which recomputes every tail chunk's G but the
    /// last one's (left behind by the main pass), recomputes only the tail's rows beyond about
    /// one chunk (Llama 3 at 8k: 1,792 rows, not 6,656). Every chunk starts on a tile boundary.
    pub fn vocab_chunks(&self) -> usize {
        let tail = if self.tail_start() < self.shape.v { self.tail_chunks_before_last() + 1 } else { 0 };
        self.chunks_before_tail() + tail
    }
    /// The tokens of token chunk `i`.
    pub fn token_range(&self, i: usize) -> Range<usize> {
        chunk_range(i, self.token_chunk, self.shape.n)
    }
    /// The vocabulary rows of vocabulary chunk `i`.
    pub fn vocab_range(&self, i: usize) -> Range<usize> {
        debug_assert!(i < self.vocab_chunks(), "vocabulary chunk {i} of {}", self.vocab_chunks());
        let k = self.dc_scratch.len();
        if i < k {
            return if i == 0 { self.vocab_begin } else { self.dc_scratch[i - 1] }..self.dc_scratch[i];
        }
        let (us, ts, vc) = (self.uniform_start(), self.tail_start(), self.vocab_chunk);
        let before_tail = self.chunks_before_tail();
        if i < before_tail {
            let r = chunk_range(i - k, vc, ts - us);
            return us + r.start..us + r.end;
        }
        let (j, last) = (i - before_tail, self.tail_chunks_before_last());
        if j == last {
            return self.tail_last_start()..self.shape.v;
        }
        let end = self.tail_last_start() - (last - 1 - j) * vc;
        let start = if j == 0 { ts } else { end - vc };
        start..end
    }
    /// Where vocabulary chunk `i`'s G goes.
    pub fn g_buffer(&self, i: usize) -> GBuffer {
        if i >= self.dc_scratch.len() {
            return GBuffer::Workspace;
        }
        let r = self.vocab_range(i);
        let row_bytes = self.shape.d * self.dtype.size_in_bytes();
        GBuffer::Dc { byte_offset: align(r.end * row_bytes), ldg: r.len().div_ceil(TILE_N) * TILE_N }
    }
    /// The row pitch of vocabulary chunk `i`'s G.
    pub fn g_ldg(&self, i: usize) -> usize {
        match self.g_buffer(i) {
            GBuffer::Workspace => self.ldg,
            GBuffer::Dc { ldg, .. } => ldg,
        }
    }
    /// dE's accumulator in dC's tail, if the plan put it there.
    pub fn dc_tail(&self) -> Option<DcTail> {
        match self.de_acc {
            DeAccumulator::DcTail(t) => Some(t),
            _ => None,
        }
    }
    /// The first vocabulary chunk of the tail pass (`vocab_chunks()` when there is none).
    pub fn first_tail_chunk(&self) -> usize {
        self.chunks_before_tail()
    }
    /// The vocabulary chunks of the tail pass: their dC rows are written only after dE is final.
    pub fn tail_chunks(&self) -> Range<usize> {
        self.first_tail_chunk()..self.vocab_chunks()
    }
    /// The vocabulary rows whose logits the tail pass recomputes: the tail's, but its last chunk's
    /// where one token chunk leaves that chunk's G behind (0 without a tail).
    pub fn tail_recomputed_rows(&self) -> usize {
        let kept = match (self.token_chunks(), self.tail_chunks().last()) {
            (1, Some(c)) => self.vocab_range(c).len(),
            _ => 0,
        };
        self.dc_tail().map_or(0, |t| (self.shape.v - t.first_row).saturating_sub(kept))
    }
}

/// Where dE's f32 accumulator sits inside the caller's dC buffer (and, for its first rows, in
/// dE's own buffer), and which dC rows are written only after dE is final (their logits
/// recomputed in the tail pass).
///
/// dE's own bytes hold half as many f32 rows as it has tokens: with `rows_in_de` > 0 the
/// accumulator's rows [0, rows_in_de) live there (f32 row r at byte 4·D·(r + 1): one row's slack
/// at the front lets the rounding compact them in place, see `round_de_head`), and only rows
/// [rows_in_de, N) in dC, halving the tail pass — which is what lets Llama 3 from ~21k to ~39k
/// tokens have a tail over at most a third of the vocabulary, and shortens it everywhere (H200:
/// fwd+bwd 0.986x at Llama 3 8k).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcTail {
    /// Byte offset in dC of the accumulator's rows [rows_in_de, N) (a multiple of 256; they run
    /// to at most the end of dC).
    pub byte_offset: usize,
    /// First vocabulary row of the tail pass: a multiple of the family's tile width (256 rows
    /// where the chunk is a multiple of it, else 128), and no row before it shares bytes with the
    /// accumulator.
    pub first_row: usize,
    /// The accumulator's first rows, kept in dE's own buffer (0: none).
    pub rows_in_de: usize,
    /// The accumulator's last rows, which neither dE's half nor all of dC holds (N above ~V),
    /// kept in the workspace region `overflow` (0: none; with some, `byte_offset` is 0 and the
    /// tail pass covers the whole vocabulary).
    pub overflow_rows: usize,
    /// The workspace region of the overflow rows (set by the plan's layout; empty without them).
    pub overflow: Region,
}

impl DcTail {
    /// The accumulator rows in dC's bytes (from `byte_offset`): after the head's, before the
    /// overflow's.
    pub fn rows_in_dc(&self, n: usize) -> usize {
        n - self.rows_in_de - self.overflow_rows
    }

    /// The reach this tail needed.
    pub fn reach(&self, shape: Shape) -> TailReach {
        if self.overflow_rows == 0 && within_a_third(shape.v, self.first_row) {
            TailReach::Third
        } else {
            TailReach::Whole
        }
    }
}

/// How much of the vocabulary a tail pass may recompute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailReach {
    /// At most a third of the vocabulary, starting past row 0: a plan's choice.
    Third,
    /// Any part of it, up to all (then the main pass writes no dC row), and the accumulator's
    /// rows past dC's end in the workspace: where nothing else keeps the budget.
    Whole,
}

/// At most this fraction (1/n) of the vocabulary is recomputed by the tail pass.
/// The trade: the tail pass costs that fraction of a logits product (less its last chunk, whose G
/// the main pass leaves behind); without the tail, every vocabulary chunk reads and writes the
/// N·D·4-byte accumulator, and the accumulator squeezes the chunks (Llama 3 at 16k tokens: 268 MB of accumulator; a 10% budget then leaves 512-row chunks
/// and ~135 GB of accumulator traffic, against a 26% tail pass).
pub(super) const MAX_TAIL_FRACTION_INV: usize = 3;

/// Whether a tail pass from `first_row` on is within [`TailReach::Third`] of a `v`-row vocabulary.
pub(super) fn within_a_third(v: usize, first_row: usize) -> bool {
    first_row > 0 && (v - first_row) * MAX_TAIL_FRACTION_INV <= v
}
