//! Tiling plans and workspace layouts: pure host logic, unit-tested without a GPU.
//!
//! Forward: the vocabulary is split across blocks for occupancy (`splits`), each split leaving a
//! 16-byte partial per token; the split count is capped so the workspace stays within
//! 1 MB + 16·N bytes.
//!
//! Backward: vocabulary-chunk-outer. For each chunk of `vocab_chunk` rows of C and
//! `token_chunk` tokens the gradient tile kernel writes G [token_chunk, ldg] in the input dtype,
//! and cuBLAS computes dE_acc += G·C_chunk and dC_chunk = Gᵀ·E with f32 accumulation. When one
//! token chunk covers all N, every dC chunk is finished in one product and rounded once; dE
//! accumulates in f32 across vocabulary chunks (in dE itself for f32 inputs). The chunk sizes
//! come from the caller's workspace budget, by default 10% of the gradient bytes.
//!
//! dE's f32 accumulator (N·D·4 bytes, 134 MB at Llama 3) would take most of that budget and force
//! small vocabulary chunks, each costing a read and a write of the whole accumulator. When dC is
//! also wanted and the vocabulary is large against N, the accumulator lives instead in the last
//! bytes of the caller's dC buffer ([`DcTail`]): the main pass writes the dC chunks before
//! `first_row`, accumulates dE over all chunks and rounds it into dE; a second pass recomputes
//! the logits of the chunks from `first_row` on (at most a third of the vocabulary) and writes
//! their dC rows over the finished accumulator.

use flce_core::{DType, Error, Result, Shape};

/// Logit tile of the kernels (tokens × vocabulary), see kernels/tile_gemm.cuh.
pub const TILE_M: usize = 128;
pub const TILE_N: usize = 128;
/// Threads per tile block.
pub const TILE_THREADS: u32 = 256;
/// Dynamic shared memory of the tile kernels (tile_gemm.cuh PIPELINE_BYTES plus each epilogue's
/// scratch; the formulas mirror FORWARD_SMEM_BYTES and GRAD_SMEM_BYTES).
pub const PIPELINE_BYTES: usize = 4 * (TILE_M + TILE_N) * 40 * 2;
pub const FORWARD_SMEM_BYTES: usize = PIPELINE_BYTES + TILE_M * 4 + TILE_M * 4 * 16;
pub const GRAD_SMEM_BYTES: usize = PIPELINE_BYTES + TILE_M * 4 + TILE_M * 16 + 2 * TILE_N * 4;
/// At most this many forward splits.
pub const MAX_SPLITS: usize = 8;
/// Forward workspace target: 1 MB plus this many bytes per token.
pub const FORWARD_BYTES_PER_TOKEN: usize = 16;

const ALIGN: usize = 256;

fn align(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}

/// A region of a workspace: byte offset and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Region {
    pub offset: usize,
    pub bytes: usize,
}

/// Lays out regions one after another, each aligned to 256 bytes.
#[derive(Default)]
struct Layout {
    end: usize,
}

impl Layout {
    fn take(&mut self, bytes: usize) -> Region {
        let r = Region { offset: self.end, bytes };
        self.end = align(self.end + bytes);
        r
    }
}

/// How the forward computes the logits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ForwardMode {
    /// cuBLAS writes the logits of one vocabulary chunk in f32 and a reduction kernel folds them
    /// into each token's statistics: cuBLAS speed, a workspace of one chunk (the budget; by
    /// default 10% of the gradient bytes).
    #[default]
    CublasChunks,
    /// flce's fused tile kernel: no logits anywhere, workspace within 1 MB + 16 bytes per token,
    /// at the speed of flce's portable (mma.sync) main loop.
    Fused,
}

/// Default workspace of a CublasChunks forward: 10% of the bytes of dE and dC (the backward's
/// default budget too, so forward + backward never hold more than that), at least 8 MB.
pub fn default_forward_budget(shape: Shape, dtype: DType) -> usize {
    (gradient_bytes(shape, dtype, Wanted { de: true, dc: true, dbias: false }) / 10).max(8 << 20)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardPlan {
    pub mode: ForwardMode,
    /// Vocabulary rows per cuBLAS chunk (CublasChunks).
    pub vocab_chunk: usize,
    /// f32 logits of one chunk [N, vocab_chunk] (CublasChunks).
    pub logits: Option<Region>,
    pub token_tiles: usize,
    pub vocab_tiles: usize,
    pub splits: usize,
    pub tiles_per_split: usize,
    pub targets: Region,
    pub target_logit: Region,
    pub partials: Region,
    pub status: Region,
    pub workspace_bytes: usize,
}

/// The forward plan for `shape` on a GPU with `sm_count` multiprocessors. CublasChunks falls back
/// to Fused when not even 128 vocabulary columns of f32 logits for every token fit the budget.
pub fn forward_plan(
    shape: Shape,
    dtype: DType,
    sm_count: usize,
    mode: ForwardMode,
    budget: Option<usize>,
) -> ForwardPlan {
    let n = shape.n;
    let token_tiles = n.div_ceil(TILE_M);
    let vocab_tiles = shape.v.div_ceil(TILE_N);
    let v_pad = vocab_tiles * TILE_N;
    let budget = budget.unwrap_or_else(|| default_forward_budget(shape, dtype));
    let chunk = (budget.saturating_sub(24 * n + 4 * ALIGN) / (4 * n) / TILE_N * TILE_N).min(v_pad);
    let mode = if mode == ForwardMode::CublasChunks && chunk >= TILE_N { mode } else { ForwardMode::Fused };
    let splits = if mode == ForwardMode::Fused {
        // Aim for two waves of blocks; never more partials than the memory target allows.
        let wanted = (2 * sm_count.max(1)).div_ceil(token_tiles);
        let by_memory = ((1 << 20) + (FORWARD_BYTES_PER_TOKEN - 8) * n) / (16 * n);
        wanted.min(MAX_SPLITS).min(by_memory).min(vocab_tiles).max(1)
    } else {
        1
    };
    let tiles_per_split = vocab_tiles.div_ceil(splits);
    let splits = vocab_tiles.div_ceil(tiles_per_split);
    let mut l = Layout::default();
    let targets = l.take(4 * n);
    let target_logit = l.take(4 * n);
    let partials = l.take(16 * n * splits);
    let status = l.take(4);
    let (vocab_chunk, logits) = match mode {
        ForwardMode::CublasChunks => (chunk, Some(l.take(4 * n * chunk))),
        ForwardMode::Fused => (0, None),
    };
    ForwardPlan {
        mode,
        vocab_chunk,
        logits,
        token_tiles,
        vocab_tiles,
        splits,
        tiles_per_split,
        targets,
        target_logit,
        partials,
        status,
        workspace_bytes: l.end,
    }
}

/// How the backward gets each chunk's logits back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackwardMode {
    /// A cuBLAS product writes the chunk's logits in f32, then an elementwise kernel forms G:
    /// three cuBLAS-speed products in all; 4 + dtype bytes of workspace per chunk element.
    #[default]
    CublasLogits,
    /// flce's own tile kernel recomputes the logits and forms G in its epilogue: no f32 logits
    /// buffer (dtype bytes per chunk element), at the speed of flce's tile main loop.
    FusedTiles,
}

/// Which gradients a backward call computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub de: bool,
    pub dc: bool,
    pub dbias: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackwardPlan {
    /// Tokens per chunk (a multiple of 128, or N).
    pub token_chunk: usize,
    /// Vocabulary rows per chunk (a multiple of 128).
    pub vocab_chunk: usize,
    /// Row pitch of G, in elements.
    pub ldg: usize,
    pub targets: Region,
    pub token_scale: Region,
    pub scalars: Region,
    pub status: Region,
    /// f32 accumulator of dE [N, D] (absent for f32 inputs: dE accumulates in place).
    pub de_acc: Option<Region>,
    /// f32 accumulator of db [V].
    pub db_acc: Option<Region>,
    pub g: Region,
    /// f32 logits of one chunk [token_chunk, ldg] (CublasLogits mode).
    pub logits: Option<Region>,
    pub db_partial: Option<Region>,
    /// f32 accumulator of one dC chunk, when tokens are chunked (absent for f32 inputs).
    pub dc_acc: Option<Region>,
    /// dE's f32 accumulator kept in dC's tail instead of the workspace (then `de_acc` is None).
    pub dc_tail: Option<DcTail>,
    pub mode: BackwardMode,
    pub workspace_bytes: usize,
}

/// Where dE's f32 accumulator sits inside the caller's dC buffer, and which dC rows are written
/// only after dE is final (their logits recomputed in a second pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcTail {
    /// Byte offset of the accumulator in dC (a multiple of 256; the accumulator runs to at most
    /// the end of dC).
    pub byte_offset: usize,
    /// First vocabulary row of the second pass: a multiple of `vocab_chunk`, and no row before it
    /// shares bytes with the accumulator.
    pub first_row: usize,
}

/// At most this fraction (1/n) of the vocabulary is recomputed by the second pass.
/// The trade: the second pass costs that fraction of a logits product; without the tail, every
/// vocabulary chunk reads and writes the N·D·4-byte accumulator, and the accumulator squeezes the
/// chunks (Llama 3 at 16k tokens: 268 MB of accumulator; a 10% budget then leaves 512-row chunks
/// and ~135 GB of accumulator traffic, against a 26% second pass).
const MAX_TAIL_FRACTION_INV: usize = 3;

impl BackwardPlan {
    pub fn token_chunks(&self, n: usize) -> usize {
        n.div_ceil(self.token_chunk)
    }
    pub fn vocab_chunks(&self, v: usize) -> usize {
        v.div_ceil(self.vocab_chunk)
    }
}

/// Bytes of the gradients a backward call returns.
pub fn gradient_bytes(shape: Shape, dtype: DType, wanted: Wanted) -> usize {
    let s = dtype.size_in_bytes();
    (wanted.de as usize * shape.n * shape.d + wanted.dc as usize * shape.v * shape.d + wanted.dbias as usize * shape.v)
        * s
}

/// The default workspace budget: 10% of the gradient bytes, but never below what the smallest
/// good unchunked plan needs (1024 vocabulary rows per chunk for the fused tiles, 512 for cuBLAS
/// logits, whose f32 logits cost 4 more bytes per element).
pub fn default_backward_budget(shape: Shape, dtype: DType, wanted: Wanted, mode: BackwardMode) -> usize {
    let tenth = gradient_bytes(shape, dtype, wanted) / 10;
    let rows = good_vocab_chunk(mode).min(shape.v.div_ceil(TILE_N) * TILE_N);
    let de_acc_in_dc = dc_tail(shape, dtype, wanted, shape.n, rows).is_some();
    tenth.max(layout(shape, dtype, wanted, mode, shape.n, rows, de_acc_in_dc).workspace_bytes)
}

/// The smallest vocabulary chunk an unchunked-token plan should use (below it, chunking tokens
/// is preferred): 1024 rows for the fused tiles, 512 for cuBLAS logits.
fn good_vocab_chunk(mode: BackwardMode) -> usize {
    match mode {
        BackwardMode::FusedTiles => 1024,
        BackwardMode::CublasLogits => 512,
    }
}

/// dE's accumulator in dC's tail, if this plan can have it: both gradients wanted, low-precision
/// inputs (f32 dE accumulates in place), one token chunk, and a second pass over at most a third
/// of the vocabulary.
fn dc_tail(shape: Shape, dtype: DType, wanted: Wanted, token_chunk: usize, vocab_chunk: usize) -> Option<DcTail> {
    let Shape { n, d, v } = shape;
    if !(wanted.de && wanted.dc) || dtype == DType::F32 || token_chunk < n {
        return None;
    }
    let acc_bytes = 4 * n * d;
    let dc_bytes = v * d * dtype.size_in_bytes();
    let byte_offset = dc_bytes.checked_sub(acc_bytes)? / ALIGN * ALIGN;
    let first_row = byte_offset / (d * dtype.size_in_bytes()) / vocab_chunk * vocab_chunk;
    ((v - first_row) * MAX_TAIL_FRACTION_INV <= v && first_row > 0).then_some(DcTail { byte_offset, first_row })
}

/// The workspace regions of one plan; `de_acc_in_dc` leaves dE's accumulator out of the
/// workspace (the caller then sets `dc_tail`).
fn layout(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    mode: BackwardMode,
    token_chunk: usize,
    vocab_chunk: usize,
    de_acc_in_dc: bool,
) -> BackwardPlan {
    let Shape { n, d, v } = shape;
    let s = dtype.size_in_bytes();
    let f32_inputs = dtype == DType::F32;
    let chunked = token_chunk < n;
    let ldg = vocab_chunk.div_ceil(TILE_N) * TILE_N;
    let rows = token_chunk.min(n);
    let mut l = Layout::default();
    let targets = l.take(4 * n);
    let token_scale = l.take(4 * n);
    let scalars = l.take(16);
    let status = l.take(4);
    let de_acc = (wanted.de && !f32_inputs && !de_acc_in_dc).then(|| l.take(4 * n * d));
    let db_acc = wanted.dbias.then(|| l.take(4 * v));
    let g = l.take(rows * ldg * s);
    let logits = (mode == BackwardMode::CublasLogits).then(|| l.take(rows * ldg * 4));
    let db_partial = wanted.dbias.then(|| l.take(rows.div_ceil(TILE_M) * ldg * 4));
    let dc_acc = (wanted.dc && chunked && !f32_inputs).then(|| l.take(vocab_chunk * d * 4));
    BackwardPlan {
        token_chunk: rows,
        vocab_chunk,
        ldg,
        targets,
        token_scale,
        scalars,
        status,
        de_acc,
        db_acc,
        g,
        logits,
        db_partial,
        dc_acc,
        dc_tail: None,
        mode,
        workspace_bytes: l.end,
    }
}

/// The backward plan within `budget` bytes of workspace (None: the default budget). Prefers one
/// token chunk (each dC chunk finished in one product) with the largest vocabulary chunk that
/// fits; chunks tokens only when even 1024 vocabulary rows for all N tokens do not fit.
pub fn backward_plan(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: Option<usize>,
    mode: BackwardMode,
) -> Result<BackwardPlan> {
    let budget = budget.unwrap_or_else(|| default_backward_budget(shape, dtype, wanted, mode));
    let v_pad = shape.v.div_ceil(TILE_N) * TILE_N;
    let good = good_vocab_chunk(mode).min(v_pad);
    // Unchunked tokens: the largest vocabulary chunk (multiple of 128) that fits, with dE's
    // accumulator in dC's tail where it can be, else in the workspace. Workspaces grow with the
    // chunk; whether the tail is possible does not change with it monotonically, so the tail plan
    // is the largest chunk, at or below the largest that fits, where it is.
    let largest_fitting = |de_acc_in_dc: bool| -> Option<BackwardPlan> {
        let (mut lo, mut hi) = (1usize, v_pad / TILE_N);
        let mut best = None;
        while lo <= hi {
            let mid = (lo + hi) / 2;
            if layout(shape, dtype, wanted, mode, shape.n, mid * TILE_N, de_acc_in_dc).workspace_bytes <= budget {
                best = Some(mid);
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        let largest = best? * TILE_N;
        if !de_acc_in_dc {
            return Some(layout(shape, dtype, wanted, mode, shape.n, largest, false));
        }
        (1..=largest / TILE_N).rev().map(|k| k * TILE_N).find_map(|vc| {
            let tail = dc_tail(shape, dtype, wanted, shape.n, vc)?;
            Some(BackwardPlan { dc_tail: Some(tail), ..layout(shape, dtype, wanted, mode, shape.n, vc, true) })
        })
    };
    let tail = largest_fitting(true);
    let best = largest_fitting(false);
    for p in [&tail, &best].into_iter().flatten() {
        if p.vocab_chunk >= good {
            return Ok(p.clone());
        }
    }
    // Chunk tokens: for the largest vocabulary chunk in 2048, 1024, ..., 128, the largest token
    // chunk (multiple of 128) that fits.
    for vc in [2048usize, 1024, 512, 256, 128] {
        let vc = vc.min(v_pad);
        let (mut lo, mut hi) = (1usize, shape.n.div_ceil(TILE_M));
        let mut found = None;
        while lo <= hi {
            let mid = (lo + hi) / 2;
            let p = layout(shape, dtype, wanted, mode, (mid * TILE_M).min(shape.n), vc, false);
            if p.workspace_bytes <= budget {
                found = Some(p);
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        if let Some(p) = found {
            return Ok(p);
        }
    }
    // small vocabulary chunks for all tokens rather than none
    tail.or(best).ok_or_else(|| {
        let min = layout(shape, dtype, wanted, mode, TILE_M.min(shape.n), TILE_N, false).workspace_bytes;
        Error::InvalidOption {
            name: "workspace_budget",
            value: budget.to_string(),
            reason: if min > budget { "below the smallest backward workspace for this shape" } else { "no plan fits" },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEMMA: Shape = Shape { n: 8192, d: 2304, v: 256_000 };
    const LLAMA: Shape = Shape { n: 8192, d: 4096, v: 128_256 };
    const ALL: Wanted = Wanted { de: true, dc: true, dbias: false };

    #[test]
    fn smem_matches_the_kernel_formulas() {
        assert_eq!(PIPELINE_BYTES, 81_920);
        assert_eq!(FORWARD_SMEM_BYTES, 90_624);
        assert_eq!(GRAD_SMEM_BYTES, 85_504);
        const { assert!(FORWARD_SMEM_BYTES <= 99 * 1024, "must fit sm_86's 99 KB per block") };
    }

    #[test]
    fn forward_workspace_stays_within_one_mb_plus_16_bytes_per_token() {
        for n in [1usize, 7, 128, 255, 1000, 8192, 65_536, 131_072] {
            for v in [1usize, 123, 128_256, 256_000] {
                let p = forward_plan(Shape::new(n, 64, v), DType::BF16, 132, ForwardMode::Fused, None);
                let limit = (1 << 20) + FORWARD_BYTES_PER_TOKEN * n + 4 * ALIGN;
                assert!(p.workspace_bytes <= limit, "n {n} v {v}: {} > {limit}", p.workspace_bytes);
                assert!(p.splits >= 1 && p.splits <= MAX_SPLITS);
                assert!(p.splits * p.tiles_per_split >= p.vocab_tiles);
                assert!((p.splits - 1) * p.tiles_per_split < p.vocab_tiles, "an empty split");
            }
        }
    }

    #[test]
    fn forward_splits_fill_the_gpu_for_few_tokens() {
        assert_eq!(forward_plan(GEMMA, DType::BF16, 132, ForwardMode::Fused, None).splits, 5);
        assert_eq!(
            forward_plan(Shape::new(128, 64, 256_000), DType::BF16, 132, ForwardMode::Fused, None).splits,
            MAX_SPLITS
        );
        assert_eq!(forward_plan(Shape::new(65_536, 64, 256_000), DType::BF16, 132, ForwardMode::Fused, None).splits, 1);
    }

    #[test]
    fn cublas_forward_chunks_fit_the_budget_or_fall_back() {
        let p = forward_plan(GEMMA, DType::BF16, 132, ForwardMode::CublasChunks, None);
        assert_eq!(p.mode, ForwardMode::CublasChunks);
        assert!(p.workspace_bytes <= gradient_bytes(GEMMA, DType::BF16, ALL) / 10, "{}", p.workspace_bytes);
        assert!(p.vocab_chunk >= 2048 && p.vocab_chunk % TILE_N == 0 && p.splits == 1);
        let small = forward_plan(Shape::new(100, 64, 300), DType::BF16, 132, ForwardMode::CublasChunks, None);
        assert_eq!(small.vocab_chunk, 384, "one chunk covers the padded vocabulary");
        let tight = forward_plan(GEMMA, DType::BF16, 132, ForwardMode::CublasChunks, Some(1 << 20));
        assert_eq!(tight.mode, ForwardMode::Fused);
    }

    #[test]
    fn default_backward_fits_ten_percent_at_gemma() {
        let p = backward_plan(GEMMA, DType::BF16, ALL, None, BackwardMode::FusedTiles).unwrap();
        let grads = gradient_bytes(GEMMA, DType::BF16, ALL);
        assert!(p.workspace_bytes <= grads / 10, "{} > {}", p.workspace_bytes, grads / 10);
        assert_eq!(p.token_chunk, GEMMA.n);
        assert!(p.vocab_chunk >= 2048, "vocab chunk {}", p.vocab_chunk);
        assert!(p.dc_acc.is_none());
    }

    /// The tail invariants: the accumulator lies inside dC, after every row of the main pass; the
    /// second pass starts on a chunk boundary and covers at most a third of the vocabulary.
    fn check_tail(shape: Shape, dtype: DType, p: &BackwardPlan) -> DcTail {
        let t = p.dc_tail.expect("dE accumulator in dC's tail");
        let row_bytes = shape.d * dtype.size_in_bytes();
        assert!(p.de_acc.is_none());
        assert_eq!(t.byte_offset % ALIGN, 0);
        assert!(t.byte_offset + 4 * shape.n * shape.d <= shape.v * row_bytes, "accumulator past dC's end");
        assert!(t.first_row * row_bytes <= t.byte_offset, "accumulator overlaps a main-pass row");
        assert_eq!(t.first_row % p.vocab_chunk, 0);
        assert!(t.first_row > 0 && (shape.v - t.first_row) * 3 <= shape.v);
        assert_eq!(p.token_chunk, shape.n);
        t
    }

    #[test]
    fn de_accumulator_in_dc_tail_keeps_llama_and_gemma_within_ten_percent() {
        // dE's f32 accumulator (134 MB at Llama 3) alone is over 10% of Llama's gradients
        // (112 MB): in dC's tail it costs no workspace, and the chunks grow.
        for shape in [LLAMA, GEMMA, Shape::new(8192, 3584, 152_064), Shape::new(16_384, 4096, 128_256)] {
            for mode in [BackwardMode::CublasLogits, BackwardMode::FusedTiles] {
                let p = backward_plan(shape, DType::BF16, ALL, None, mode).unwrap();
                let grads = gradient_bytes(shape, DType::BF16, ALL);
                assert!(p.workspace_bytes <= grads / 10, "{shape:?} {mode:?}: {} > {}", p.workspace_bytes, grads / 10);
                // 2048+ rows at 8k tokens, half that at 16k
                assert!(p.vocab_chunk >= 2048 * 8192 / shape.n, "{shape:?} {mode:?}: vocab chunk {}", p.vocab_chunk);
                check_tail(shape, DType::BF16, &p);
            }
        }
    }

    #[test]
    fn de_accumulator_stays_in_the_workspace_where_the_tail_cannot_hold_it() {
        let workspace_acc = |shape: Shape, dtype: DType, wanted: Wanted| {
            let p = backward_plan(shape, dtype, wanted, None, BackwardMode::CublasLogits).unwrap();
            assert!(p.dc_tail.is_none(), "{shape:?} {dtype:?} {wanted:?}");
            p
        };
        // more than a third of the vocabulary would be recomputed (Llama 3 at 32k tokens)
        let p = workspace_acc(Shape::new(32_768, 4096, 128_256), DType::BF16, ALL);
        assert!(p.de_acc.is_some());
        // the accumulator is larger than dC
        workspace_acc(Shape::new(255, 507, 123), DType::BF16, ALL);
        // one chunk covers the vocabulary: no main pass to hide the tail behind
        workspace_acc(Shape::new(1, 64, 300), DType::BF16, ALL);
        // f32 accumulates dE in place; dC not wanted
        assert!(workspace_acc(GEMMA, DType::F32, ALL).de_acc.is_none());
        workspace_acc(GEMMA, DType::BF16, Wanted { de: true, dc: false, dbias: false });
    }

    #[test]
    fn the_gpu_tests_odd_shapes_take_the_tail_plan() {
        // crates/flce-cuda/tests/gpu.rs runs both kernel families on these shapes in bf16 and f16
        // (at N = 1 the fused family's 1024-row chunk covers V: it keeps the workspace plan)
        let cases = [
            (Shape::new(129, 200, 5003), BackwardMode::CublasLogits),
            (Shape::new(129, 200, 5003), BackwardMode::FusedTiles),
            (Shape::new(1, 64, 1000), BackwardMode::CublasLogits),
        ];
        for (shape, mode) in cases {
            for dtype in [DType::BF16, DType::F16] {
                for dbias in [false, true] {
                    let p = backward_plan(shape, dtype, Wanted { dbias, ..ALL }, None, mode).unwrap();
                    let t = check_tail(shape, dtype, &p);
                    assert!(p.vocab_chunks(shape.v) > t.first_row / p.vocab_chunk, "a second pass exists");
                }
            }
        }
    }

    #[test]
    fn small_budgets_chunk_tokens_and_tiny_ones_are_errors() {
        // the GPU tests' chunked-budget case
        let shape = Shape::new(700, 96, 3000);
        let p = backward_plan(shape, DType::BF16, ALL, Some(600_000), BackwardMode::FusedTiles).unwrap();
        assert!(p.token_chunk < shape.n && p.token_chunk % TILE_M == 0);
        assert!(p.dc_acc.is_some() && p.dc_tail.is_none());
        assert!(p.workspace_bytes <= 600_000);
        // at Gemma, token chunks would need dE's accumulator in the workspace (75 MB): a budget
        // below the good chunk size takes a smaller tail plan instead
        let p = backward_plan(GEMMA, DType::BF16, ALL, Some(16 << 20), BackwardMode::FusedTiles).unwrap();
        assert!(p.vocab_chunk < 1024 && p.workspace_bytes <= 16 << 20);
        check_tail(GEMMA, DType::BF16, &p);
        let err = backward_plan(GEMMA, DType::BF16, ALL, Some(1 << 20), BackwardMode::FusedTiles).unwrap_err();
        assert!(matches!(err, Error::InvalidOption { name: "workspace_budget", .. }), "{err}");
    }

    #[test]
    fn cublas_mode_fits_ten_percent_at_gemma_with_smaller_chunks() {
        let p = backward_plan(GEMMA, DType::BF16, ALL, None, BackwardMode::CublasLogits).unwrap();
        let grads = gradient_bytes(GEMMA, DType::BF16, ALL);
        assert!(p.workspace_bytes <= grads / 10);
        assert!(p.logits.is_some() && p.token_chunk == GEMMA.n && p.vocab_chunk >= 512, "{p:?}");
    }

    #[test]
    fn f32_inputs_accumulate_in_place() {
        let p = backward_plan(Shape::new(300, 64, 1000), DType::F32, ALL, None, BackwardMode::default()).unwrap();
        assert!(p.de_acc.is_none() && p.dc_acc.is_none());
    }

    #[test]
    fn regions_do_not_overlap() {
        let p = backward_plan(
            Shape::new(1000, 96, 5000),
            DType::F16,
            Wanted { de: true, dc: true, dbias: true },
            Some(3 << 20),
            BackwardMode::CublasLogits,
        )
        .unwrap();
        let mut rs: Vec<Region> = [
            Some(p.targets),
            Some(p.token_scale),
            Some(p.scalars),
            Some(p.status),
            p.de_acc,
            p.db_acc,
            Some(p.g),
            p.logits,
            p.db_partial,
            p.dc_acc,
        ]
        .into_iter()
        .flatten()
        .collect();
        rs.sort_by_key(|r| r.offset);
        for w in rs.windows(2) {
            assert!(w[0].offset + w[0].bytes <= w[1].offset);
        }
        assert!(rs.last().unwrap().offset + rs.last().unwrap().bytes <= p.workspace_bytes);
        assert!(p.workspace_bytes <= 3 << 20);
    }
}
