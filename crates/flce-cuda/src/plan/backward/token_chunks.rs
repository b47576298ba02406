//! Larger vocabulary chunks at large N within the same budget: vocabulary-outer plans in token
//! chunks.
//!
//! A one-token-chunk plan's G holds every token of a vocabulary chunk (N·rows·2 bytes), so past
//! N ≈ V/6 a tenth of the gradients buys ever smaller chunks: Llama 3 3,584 rows at 16k tokens,
//! 1,024 at 65k — 105 main-pass chunks (their first ones larger: [`super::with_dc_scratch`]) and
//! 65 tail-pass ones, each with its G launch, two products and their last waves (journal v16:
//! 126 → 33 chunks at 32k saved 17.4 ms; the default ran 1.23× four logits GEMMs at 65k in the
//! suite, journal v47); at 128k the dE pass of its own ([`super::with_de_pass`]) runs its dC pass in 126. Cutting
//! the tokens into k chunks makes each vocabulary chunk about k times larger for the same G bytes.
//! dC then adds up across the token chunks in an f32 chunk accumulator in the workspace
//! (vocab_chunk·D·4 bytes, rounded once into dC: exact, as [`super::DcAccumulator::Workspace`]
//! already is for small budgets), and dE's accumulator, where the plan has one, stays where the
//! one-token plan keeps it: in dC's tail, its first rows in dE's own bytes ([`super::DcTail`]).
//! What it costs: that accumulator's traffic (about (8k + 2)·V·D bytes over both passes), and a
//! tail pass recomputes all of its chunks (the main pass's last G holds one token chunk, not the
//! last vocabulary chunk's every token).
//!
//! Two kinds of plan are cut: dE and dC with dE's accumulator in dC's tail (the default past
//! N ≈ V/6), and dC without dE (the dE pass's first pass; a classifier-only backward).
//!
//! The backend takes such a plan where `FLCE_BWD_TOKEN_CHUNKS` asks for it (`1`: wherever one
//! exists; `auto`: where [`large_n_seconds`] has it faster; unset: never) or a test does
//! ([`crate::CudaLoss::with_token_chunks`]).
//!
//! Measured on the H200 (journal v48): correct on every
//! family (the GPU cases against f64, twice bitwise; memcheck 0 errors), but not worth its launches
//! — Llama 3 fwd+bwd 1.067× today's plans at 32k tokens (3 token chunks), 0.984× at 65k (7; the
//! model predicted 86 against 121 ms of what differs, ~0.93×). The one-step profile at 65k says
//! why: G took as long cut as whole (167.5 against 164.3 ms: the persistent G kernel has no
//! launch tails at 1,024 rows × 65k tokens for larger chunks to save — the model's 0.19 ms a chunk
//! per 32k tokens is v16's at 32k and smaller chunks), only dE's accumulator traffic fell (the
//! cuBLAS products 211 against 227 ms), and the tail's recompute (~56 ms) is the same in both.
//! Hence off by default; kept as the knob for the dE-pass and one-pass plans a later large-N
//! plan may cut.

use flce_core::{DType, Shape};

use super::dc_tail::{dc_tail_with, launch_tail_seconds, main_pass_seconds, recompute_seconds};
use super::layout::{largest_multiple, layout};
use super::{with_dc_scratch, BackwardPlan, DcAccumulator};
use crate::geometry::{SM90_TILE_N, TILE_M, TILE_N};
use crate::modes::BackwardMode;

/// At most this many token chunks (each vocabulary chunk's launches are that many).
pub const MAX_TOKEN_CHUNKS: usize = 16;

/// Of the plans of `one`'s call in 2 to [`MAX_TOKEN_CHUNKS`] token chunks — `one` a
/// one-token-chunk vocabulary-outer plan ([`super::backward_plan`]) wanting dE and dC with dE's
/// accumulator in dC's tail, or dC without dE — each with the largest vocabulary chunk whose
/// workspace fits `budget` (and, with a tail, whose tail the accumulator allows, as far into the
/// vocabulary as `one`'s reaches), the one [`large_n_seconds`] has fastest. None where `one` is
/// not such a plan or no candidate has larger vocabulary chunks than `one`.
pub fn token_chunked_plan(one: &BackwardPlan, budget: usize, mode: BackwardMode) -> Option<BackwardPlan> {
    let (shape, dtype, wanted) = (one.shape, one.dtype, one.wanted);
    let plain = one.token_chunk >= shape.n && !one.token_outer && one.de_pass.is_none() && one.vocab_begin == 0;
    let tail = one.dc_tail();
    // dE and dC with dE's accumulator in dC's tail, or dC without dE
    let kind = matches!((tail, wanted.de, wanted.dc), (Some(_), true, true) | (None, false, true));
    if !(plain && kind && dtype != DType::F32) {
        return None;
    }
    let step = if one.vocab_chunk.is_multiple_of(SM90_TILE_N) { SM90_TILE_N } else { TILE_N };
    let most = shape.v.div_ceil(step);
    let mut best: Option<(f64, BackwardPlan)> = None;
    for k in 2..=MAX_TOKEN_CHUNKS {
        let tc = shape.n.div_ceil(k).div_ceil(TILE_M) * TILE_M;
        if tc >= shape.n || shape.n.div_ceil(tc) != k {
            continue; // one token chunk, or the same chunks as a smaller k
        }
        // the workspace grows with the chunk (G, dC's accumulator) and not with where a tail
        // starts: the largest chunk that fits with `one`'s tail, then the largest at or below it
        // that has a tail of its own (a multiple of the chunk)
        let bytes = |vc: usize| layout(shape, dtype, wanted, mode, tc, vc, tail).workspace_bytes;
        let Some(largest) = largest_multiple(most, |m| bytes(m * step) <= budget) else { continue };
        let plan = (one.vocab_chunk / step + 1..=largest).rev().find_map(|m| {
            let vc = m * step;
            let t = match tail {
                Some(t) => Some(dc_tail_with(shape, dtype, vc, t.rows_in_de, t.reach(shape))?),
                None => None,
            };
            let mut p = layout(shape, dtype, wanted, mode, tc, vc, t);
            p.family = one.family;
            (p.workspace_bytes <= budget).then_some(p)
        });
        if let Some(p) = plan {
            let s = large_n_seconds(&p);
            if best.as_ref().is_none_or(|(b, _)| s < *b) {
                best = Some((s, p));
            }
        }
    }
    best.map(|(_, p)| p)
}

/// `one`, or its plan in token chunks ([`token_chunked_plan`]): always where one exists when
/// `force`, else where [`large_n_seconds`] has it faster by more than the model's own error (5%
/// of one logits product, as the one-token plans' choice in plan/backward/).
pub fn with_token_chunks(one: BackwardPlan, budget: usize, mode: BackwardMode, force: bool) -> BackwardPlan {
    let Some(chunked) = token_chunked_plan(&one, budget, mode) else { return one };
    let Shape { n, d, v } = one.shape;
    let margin = 0.05 * 2.0 * (n * d * v) as f64 / 650e12;
    if force || large_n_seconds(&chunked) < large_n_seconds(&one) - margin {
        chunked
    } else {
        one
    }
}

/// Modeled seconds of what differs between a call's vocabulary-outer plans at large N (one token
/// chunk or several): the tail pass's recomputed logits (2·N·D FLOP a row at ~650 TFLOP/s; all
/// its rows but the last chunk's with one token chunk, all of them with several); per vocabulary
/// chunk of either pass ~0.19 ms per 32k tokens of launch tails (plan/backward/dc_tail.rs
/// `modeled_seconds`, from journal v16), and in the main pass the part of dE's accumulator
/// traffic (N·D·8 bytes at ~3.5 TB/s) its product's compute does not hide; with several token
/// chunks, dC's f32 chunk accumulator's traffic ((8k + 2)·V·D bytes: written by the first token
/// chunk, read and written by the others, read by the rounding, which writes 2 bytes an element)
/// and ~4 µs a launch for the three launches of every (vocabulary, token) chunk pair. One-token
/// plans are modeled with their leading chunks' G in dC's rows, as [`with_dc_scratch`] makes them.
pub fn large_n_seconds(p: &BackwardPlan) -> f64 {
    let Shape { n, d, v } = p.shape;
    let p = if p.token_chunk >= n { with_dc_scratch(p.clone()) } else { p.clone() };
    let k = p.token_chunks();
    let tail = p.tail_chunks();
    let recomputed = p.tail_recomputed_rows();
    let dc_acc = match p.dc_acc {
        DcAccumulator::Workspace(_) => ((8 * k + 2) * v * d) as f64 / 3.5e12,
        _ => 0.0,
    };
    let launches = 3.0 * 4e-6 * (k * (p.vocab_chunks() + tail.len())) as f64;
    recompute_seconds(&p, recomputed)
        + main_pass_seconds(&p)
        + tail.len() as f64 * launch_tail_seconds(&p)
        + dc_acc
        + launches
}

#[cfg(test)]
mod tests {
    use flce_core::DType;

    use super::*;
    use crate::modes::Family;
    use crate::plan::{backward_plan, default_backward_budget, DeAccumulator, Wanted};

    const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };
    const MODE: BackwardMode = BackwardMode::FusedTiles;

    fn one(shape: Shape, wanted: Wanted) -> (BackwardPlan, usize) {
        let budget = default_backward_budget(shape, DType::BF16, wanted, MODE);
        (backward_plan(shape, DType::BF16, wanted, Some(budget), MODE, Family::Sm90, 132).unwrap(), budget)
    }

    /// Every (vocabulary, token) chunk pair once: the vocabulary chunks cover V in order, the
    /// token chunks N; the tail's first row a chunk boundary; dE's accumulator where the one-token
    /// plan keeps it (same rows in dE, within dC, no overflow moved), dC's in the workspace.
    fn check(one: &BackwardPlan, p: &BackwardPlan, budget: usize) {
        let Shape { n, v, .. } = p.shape;
        let ctx = format!("{:?}: {} x {}", p.shape, p.token_chunk, p.vocab_chunk);
        assert!(p.workspace_bytes <= budget, "{ctx}: {} > {budget}", p.workspace_bytes);
        assert!(p.token_chunks() >= 2 && p.token_chunk.is_multiple_of(TILE_M), "{ctx}");
        assert!(p.vocab_chunk > one.vocab_chunk, "{ctx}: not larger than {}", one.vocab_chunk);
        assert!(p.dc_scratch.is_empty() && !p.token_outer && p.de_pass.is_none(), "{ctx}");
        assert!(matches!(p.dc_acc, DcAccumulator::Workspace(_)), "{ctx}: {:?}", p.dc_acc);
        let (t, t1) = (p.dc_tail().unwrap(), one.dc_tail().unwrap());
        assert_eq!(
            (t.rows_in_de, t.overflow_rows, t.reach(p.shape)),
            (t1.rows_in_de, t1.overflow_rows, t1.reach(p.shape))
        );
        assert!(t.byte_offset >= t.first_row * p.shape.d * 2, "{ctx}: the accumulator over rows the main pass writes");
        assert_eq!(p.vocab_range(p.first_tail_chunk()).start, t.first_row.min(v), "{ctx}");
        let mut next = 0;
        for i in 0..p.vocab_chunks() {
            let r = p.vocab_range(i);
            assert_eq!(r.start, next, "{ctx}");
            next = r.end;
        }
        assert_eq!(next, v, "{ctx}");
        let tokens: usize = (0..p.token_chunks()).map(|i| p.token_range(i).len()).sum();
        assert_eq!(tokens, n, "{ctx}");
    }

    #[test]
    fn large_n_takes_larger_vocabulary_chunks_in_token_chunks() {
        // Llama 3 from 32k tokens (a tail of a third and more; 128k: the whole vocabulary, rows
        // past dC's end in the workspace), the 16k training-step loss shape
        for shape in [
            Shape::new(32_768, 4096, 128_256),
            Shape::new(65_536, 4096, 128_256),
            Shape::new(131_072, 4096, 128_256),
            Shape::new(16_384, 2048, 128_256),
        ] {
            let (one, budget) = one(shape, BOTH);
            let p = token_chunked_plan(&one, budget, MODE).unwrap_or_else(|| panic!("{shape:?}: none"));
            check(&one, &p, budget);
            // fewer vocabulary chunks over both passes
            let chunks = |p: &BackwardPlan| p.vocab_chunks() + p.tail_chunks().len();
            assert!(chunks(&p) < chunks(&with_dc_scratch(one.clone())), "{shape:?}");
        }
    }

    #[test]
    fn the_model_takes_it_at_large_n_only() {
        // 65k tokens at Llama 3: 105 + 65 chunks against ~40 + ~20; by the model several ms
        let (one65, budget) = one(Shape::new(65_536, 4096, 128_256), BOTH);
        let p = with_token_chunks(one65.clone(), budget, MODE, false);
        assert!(p.token_chunks() > 1, "{}", p.token_chunks());
        assert!(large_n_seconds(&p) < large_n_seconds(&one65));
        // 8k tokens at Llama 3: the one-token plan's chunks are already large
        let (one8, budget) = one(Shape::new(8192, 4096, 128_256), BOTH);
        assert_eq!(with_token_chunks(one8.clone(), budget, MODE, false), one8);
        // forced, where a candidate exists: taken
        if let Some(c) = token_chunked_plan(&one8, budget, MODE) {
            assert_eq!(with_token_chunks(one8.clone(), budget, MODE, true), c);
        }
    }

    #[test]
    fn the_de_pass_first_pass_too() {
        // dC without dE (the dE pass's first pass, forced at 65k: 126 chunks of 1024 rows at a
        // tenth; at 128k the planner already cuts its tokens, 4 × 63 chunks of 2048 rows)
        let shape = Shape::new(65_536, 4096, 128_256);
        let dc_only = Wanted { de: false, ..BOTH };
        let budget = crate::plan::gradient_tenth(shape, DType::BF16, BOTH);
        let one = backward_plan(shape, DType::BF16, dc_only, Some(budget), MODE, Family::Sm90, 132).unwrap();
        assert_eq!((one.token_chunks(), one.dc_tail()), (1, None));
        let p = token_chunked_plan(&one, budget, MODE).expect("a dC-only plan in token chunks");
        assert!(p.workspace_bytes <= budget && p.token_chunks() >= 2 && p.vocab_chunk > one.vocab_chunk);
        assert!(matches!(p.dc_acc, DcAccumulator::Workspace(_)) && p.de_acc == DeAccumulator::NotWanted);
        assert_eq!((p.tail_chunks().len(), p.vocab_range(p.vocab_chunks() - 1).end), (0, shape.v));
        // (the model keeps the one-token plan here: its first chunks' G in dC's unwritten rows
        // make it ~50 chunks, and the cut plan pays dC's accumulator traffic)
        assert_eq!(with_token_chunks(one.clone(), budget, MODE, false), one);
        // and joined with the dE pass as the one-token first pass is (same prologue regions)
        let de_only = Wanted { dc: false, ..BOTH };
        let de = backward_plan(shape, DType::BF16, de_only, Some(budget), MODE, Family::Sm90, 132).unwrap();
        assert!(crate::plan::with_de_pass(p, de, BOTH).is_ok());
    }

    #[test]
    fn not_for_token_outer_f32_or_workspace_accumulator_plans() {
        let shape = Shape::new(65_536, 4096, 128_256);
        // dE only (token-outer): none
        let (p, budget) = one(shape, Wanted { dc: false, ..BOTH });
        assert!(p.token_outer && token_chunked_plan(&p, budget, MODE).is_none());
        // f32 (dE accumulates in place): none
        let budget = default_backward_budget(shape, DType::F32, BOTH, MODE);
        let f32 = backward_plan(shape, DType::F32, BOTH, Some(budget), MODE, Family::Sm90, 132).unwrap();
        assert!(token_chunked_plan(&f32, budget, MODE).is_none());
        // dE's accumulator in the workspace (a plan a large budget may take): none
        let shape = Shape::new(8192, 4096, 128_256);
        let mut p = layout(shape, DType::BF16, BOTH, MODE, shape.n, 4096, None);
        p.family = Family::Sm90;
        assert!(matches!(p.de_acc, DeAccumulator::Workspace(_)), "{:?}", p.de_acc);
        assert!(token_chunked_plan(&p, 4 << 30, MODE).is_none());
    }
}
