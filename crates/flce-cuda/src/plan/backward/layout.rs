//! The arithmetic every backward plan shares: one (token chunk, vocabulary chunk) choice's layout,
//! the smallest good vocabulary chunk, the no-plan error and the binary search over chunk sizes.

use flce_core::{DType, Error, Shape};

use super::{BackwardPlan, DcAccumulator, DcTail, DeAccumulator};
use super::{Layout, Wanted};
use crate::geometry::{TILE_M, TILE_N};
use crate::modes::{BackwardMode, Family};

/// The smallest vocabulary chunk an unchunked-token plan should use (below it, chunking tokens
/// is preferred): 1024 rows for the fused tiles, 512 for cuBLAS logits.
pub(in crate::plan) fn good_vocab_chunk(mode: BackwardMode) -> usize {
    match mode {
        BackwardMode::FusedTiles | BackwardMode::FusedSm80 => 1024,
        // (Auto is resolved before planning; unresolved, it plans as cuBLAS logits)
        BackwardMode::CublasLogits | BackwardMode::Auto => 512,
    }
}

/// The plan of one (token chunk, vocabulary chunk) choice; `tail` puts dE's accumulator in dC's
/// tail instead of the workspace. Without dC the token chunks are outer, and dE's accumulator
/// holds one token chunk.
pub(in crate::plan) fn layout(
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
    let token_outer = wanted.token_outer();
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

/// The error when no plan fits `budget`.
pub(in crate::plan) fn no_plan(shape: Shape, dtype: DType, wanted: Wanted, mode: BackwardMode, budget: usize) -> Error {
    let min = layout(shape, dtype, wanted, mode, TILE_M.min(shape.n), TILE_N, None).workspace_bytes;
    Error::InvalidOption {
        name: "workspace_budget",
        value: budget.to_string(),
        reason: if min > budget { "below the smallest backward workspace for this shape" } else { "no plan fits" },
    }
}

/// The largest k in 1..=max with `fits(k)`, for `fits` monotone (true up to some k): binary search.
pub(in crate::plan) fn largest_multiple(max: usize, fits: impl Fn(usize) -> bool) -> Option<usize> {
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
