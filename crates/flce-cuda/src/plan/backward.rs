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

use std::ops::Range;

use flce_core::{DType, Error, Result, Shape};

use super::dc_tail::{dc_tail, modeled_seconds, whole_tail_overflow_rows, DcTail, TailReach};
use super::{chunk_range, gradient_bytes, Layout, Region, Wanted};
use crate::family::{BackwardMode, Family};
use crate::geometry::{TILE_M, TILE_N};

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
    /// src/slice.rs); rounded into dE after the main pass.
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
    /// before it are another pass's — the vocabulary-slice plan's head ([`super::SlicePlan`]) —
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
        super::last_chunk_start(self.shape.v, self.vocab_chunk).clamp(self.tail_start(), self.shape.v)
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
        GBuffer::Dc { byte_offset: super::align(r.end * row_bytes), ldg: r.len().div_ceil(TILE_N) * TILE_N }
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
    if super::token_outer::applies(wanted) {
        return tenth.max(super::token_outer::good_workspace(shape, dtype, wanted, mode));
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

/// The smallest vocabulary chunk an unchunked-token plan should use (below it, chunking tokens
/// is preferred): 1024 rows for the fused tiles, 512 for cuBLAS logits.
pub(super) fn good_vocab_chunk(mode: BackwardMode) -> usize {
    match mode {
        BackwardMode::FusedTiles | BackwardMode::FusedSm80 => 1024,
        // (Auto is resolved before planning; unresolved, it plans as cuBLAS logits)
        BackwardMode::CublasLogits | BackwardMode::Auto => 512,
    }
}

/// The plan of one (token chunk, vocabulary chunk) choice; `tail` puts dE's accumulator in dC's
/// tail instead of the workspace. Without dC the token chunks are outer, and dE's accumulator
/// holds one token chunk.
pub(super) fn layout(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    mode: BackwardMode,
    token_chunk: usize,
    vocab_chunk: usize,
    tail: Option<DcTail>,
) -> BackwardPlan {
    let Shape { n, d, v } = shape;
    let s = dtype.size_in_bytes();
    let f32_inputs = dtype == DType::F32;
    let chunked = token_chunk < n;
    let token_outer = super::token_outer::applies(wanted);
    let ldg = vocab_chunk.div_ceil(TILE_N) * TILE_N;
    let rows = token_chunk.min(n);
    let mut l = Layout::default();
    let targets = l.take(4 * n);
    let token_scale = l.take(4 * n);
    let scalars = l.take(crate::geometry::BACKWARD_SCALARS_BYTES);
    let status = l.take(4);
    let de_acc = match (wanted.de, f32_inputs, tail) {
        (false, ..) => DeAccumulator::NotWanted,
        (true, true, _) => DeAccumulator::InPlace,
        (true, false, Some(t)) if t.overflow_rows > 0 => {
            DeAccumulator::DcTail(DcTail { overflow: l.take(4 * t.overflow_rows * d), ..t })
        }
        (true, false, Some(t)) => DeAccumulator::DcTail(t),
        (true, false, None) => DeAccumulator::Workspace(l.take(4 * if token_outer { rows } else { n } * d)),
    };
    let db_acc = wanted.dbias.then(|| l.take(4 * v));
    let g = l.take(rows * ldg * s);
    let logits = matches!(mode, BackwardMode::CublasLogits | BackwardMode::Auto).then(|| l.take(rows * ldg * 4));
    let db_partial = wanted.dbias.then(|| l.take(rows.div_ceil(TILE_M) * ldg * 4));
    let dc_acc = match (wanted.dc, chunked && !f32_inputs) {
        (false, _) => DcAccumulator::NotWanted,
        (true, false) => DcAccumulator::Direct,
        (true, true) => DcAccumulator::Workspace(l.take(vocab_chunk * d * 4)),
    };
    BackwardPlan {
        shape,
        dtype,
        wanted,
        family: mode.family(Family::Sm80),
        token_chunk: rows,
        vocab_chunk,
        ldg,
        targets,
        token_scale,
        scalars,
        status,
        de_acc,
        dc_acc,
        db_acc,
        g,
        logits,
        db_partial,
        workspace_bytes: l.bytes(),
        dc_scratch: vec![],
        token_outer,
        de_pass: None,
        vocab_begin: 0,
    }
}

/// The backward plan within `budget` bytes of workspace (None: the default budget), where "fused"
/// means the family `fused` ([`crate::family::fused_family`]; the fused families share one
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
        plan = super::grad_steps::sm90_balanced_chunks(plan, mode, budget, sm_count);
    }
    Ok(plan)
}

/// The backward plan of one rank's vocabulary slice (shared/phases.cu, `CudaLoss::backward_slice`):
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
    if super::token_outer::applies(wanted) {
        return super::token_outer::plan(shape, dtype, wanted, budget, mode);
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

/// The error when no plan fits `budget`.
pub(super) fn no_plan(shape: Shape, dtype: DType, wanted: Wanted, mode: BackwardMode, budget: usize) -> Error {
    let min = layout(shape, dtype, wanted, mode, TILE_M.min(shape.n), TILE_N, None).workspace_bytes;
    Error::InvalidOption {
        name: "workspace_budget",
        value: budget.to_string(),
        reason: if min > budget { "below the smallest backward workspace for this shape" } else { "no plan fits" },
    }
}

/// The largest k in 1..=max with `fits(k)`, for `fits` monotone (true up to some k): binary search.
pub(super) fn largest_multiple(max: usize, fits: impl Fn(usize) -> bool) -> Option<usize> {
    let (mut lo, mut hi) = (1usize, max);
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            best = Some(mid);
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    best
}
