//! The backward without dC (a frozen classifier: LoRA and other adapters): token chunks outer.
//!
//! With dC wanted, the vocabulary chunks are the outer loop, so that each dC chunk is finished in
//! one product and rounded once; dE then accumulates in f32 across all of them, an accumulator
//! of all N tokens (N·D·4 bytes, twice dE's own bytes at bf16). Without dC nothing accumulates
//! across token chunks, so the loops turn round: each token chunk's dE is completed over the
//! whole vocabulary in an accumulator of that chunk's rows, rounded once into dE, and the next
//! token chunk reuses it. The accumulator shrinks from N·D·4 bytes to `token_chunk`·D·4 (16 MB
//! at 1024 tokens and D 4096, small enough to stay in the H200's L2 while the vocabulary chunks
//! stream past it), exactness is unchanged (dE summed in f32 over the vocabulary, rounded once),
//! and db's per-vocabulary-row accumulator is the same in either order.
//!
//! The chunks: a token chunk of at least [`GOOD_TOKEN_CHUNK`] tokens (8 of the sm90 family's
//! 128-token tiles; dE's product then has ≥ 128 output tiles of 256 × 128 at D 4096) and a
//! vocabulary chunk of [`GOOD_VOCAB_CHUNK`] rows (32 of its 256-wide tiles: with 8 token tiles,
//! two waves of 128 blocks on 132 SMs), more tokens as the budget allows. Below that the
//! vocabulary chunk halves first. The default budget is 10% of dE's bytes, or that good plan's
//! workspace where it is more (below ~16k tokens at D 4096: 24–32 MB).

use flce_core::{DType, Result, Shape};

use super::layout::{largest_multiple, layout, no_plan};
use super::{BackwardPlan, Wanted};
use crate::geometry::{TILE_M, TILE_N};
use crate::modes::BackwardMode;

/// Tokens per chunk the planner keeps when the budget allows (or N).
pub const GOOD_TOKEN_CHUNK: usize = 1024;
/// Vocabulary rows per chunk the planner keeps when the budget allows (or the padded vocabulary).
pub const GOOD_VOCAB_CHUNK: usize = 8192;

/// The good (token chunk, vocabulary chunk) of `shape`.
fn good_chunks(shape: Shape) -> (usize, usize) {
    let v_pad = shape.v.div_ceil(TILE_N) * TILE_N;
    (shape.n.min(GOOD_TOKEN_CHUNK), v_pad.min(GOOD_VOCAB_CHUNK))
}

/// The workspace of the good chunks: the least the default budget gives.
pub(super) fn good_workspace(shape: Shape, dtype: DType, wanted: Wanted, mode: BackwardMode) -> usize {
    let (t, vc) = good_chunks(shape);
    layout(shape, dtype, wanted, mode, t, vc, None).workspace_bytes
}

/// The token-outer plan within `budget`: for the good vocabulary chunk, then its halves, the most
/// tokens that fit; the first with at least the good token chunk wins (with all N tokens, the
/// largest vocabulary chunk that fits them). Failing that, the candidate covering the most
/// (token, vocabulary) pairs per chunk.
pub(super) fn plan(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: usize,
    mode: BackwardMode,
) -> Result<BackwardPlan> {
    let n = shape.n;
    let v_pad = shape.v.div_ceil(TILE_N) * TILE_N;
    let (good_tokens, good_vocab) = good_chunks(shape);
    let fits = |t: usize, vc: usize| layout(shape, dtype, wanted, mode, t, vc, None).workspace_bytes <= budget;
    let tokens = |k: usize| (k * TILE_M).min(n);
    let most_tokens = |vc: usize| largest_multiple(n.div_ceil(TILE_M), |k| fits(tokens(k), vc)).map(tokens);
    let mut fallback: Option<(usize, usize)> = None;
    let mut vc = good_vocab;
    loop {
        if let Some(t) = most_tokens(vc) {
            if t == n {
                // all tokens in one chunk: as many vocabulary rows as fit them
                let most = largest_multiple(v_pad / TILE_N, |k| fits(n, k * TILE_N)).unwrap_or(1) * TILE_N;
                return Ok(layout(shape, dtype, wanted, mode, n, most.max(vc), None));
            }
            if t >= good_tokens {
                return Ok(layout(shape, dtype, wanted, mode, t, vc, None));
            }
            if fallback.is_none_or(|(ft, fvc)| t * vc > ft * fvc) {
                fallback = Some((t, vc));
            }
        }
        if vc == TILE_N {
            break;
        }
        vc = (vc / 2 / TILE_N * TILE_N).max(TILE_N);
    }
    let (t, vc) = fallback.ok_or_else(|| no_plan(shape, dtype, wanted, mode, budget))?;
    Ok(layout(shape, dtype, wanted, mode, t, vc, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::Family;
    use crate::plan::{backward_plan, default_backward_budget, gradient_bytes, DeAccumulator};

    const DE: Wanted = Wanted { de: true, dc: false, dbias: false };

    fn sm90(shape: Shape, dtype: DType, wanted: Wanted, budget: Option<usize>) -> BackwardPlan {
        backward_plan(shape, dtype, wanted, budget, BackwardMode::FusedTiles, Family::Sm90, 132).unwrap()
    }

    #[test]
    fn de_alone_stays_within_ten_percent_or_the_good_chunks() {
        // Llama 3's classifier frozen: 2.25x dE's bytes before (an all-token f32 accumulator)
        for n in [1024usize, 8192, 16_384, 32_768, 131_072] {
            let shape = Shape::new(n, 4096, 128_256);
            let p = sm90(shape, DType::BF16, DE, None);
            let grads = gradient_bytes(shape, DType::BF16, DE);
            let limit = (grads / 10).max(33 << 20);
            assert!(p.workspace_bytes <= limit, "n {n}: {} > {limit}", p.workspace_bytes);
            assert!(p.token_outer);
            let DeAccumulator::Workspace(acc) = p.de_acc else { panic!("n {n}: {:?}", p.de_acc) };
            assert_eq!(acc.bytes, 4 * p.token_chunk * 4096, "n {n}");
            assert!(p.token_chunk >= GOOD_TOKEN_CHUNK.min(n) && p.vocab_chunk >= GOOD_VOCAB_CHUNK, "n {n}: {p:?}");
        }
        // 128k tokens: 10% of dE (107 MB) takes more tokens per chunk than the good 1024
        let big = sm90(Shape::new(131_072, 4096, 128_256), DType::BF16, DE, None);
        assert!(big.token_chunk >= 3 * GOOD_TOKEN_CHUNK, "{big:?}");
    }

    #[test]
    fn token_outer_plans_fit_every_budget_and_cover_every_pair() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % m
        };
        for _ in 0..300 {
            let shape = Shape::new(1 + next(40_000), 8 * (1 + next(600)), 1 + next(300_000));
            let dtype = [DType::BF16, DType::F16, DType::F32][next(3)];
            let wanted = [DE, Wanted { de: true, dc: false, dbias: true }][next(2)];
            let budget = [None, Some(4 << 20), Some(64 << 20), Some(1 << 30)][next(4)];
            let mode = [BackwardMode::FusedTiles, BackwardMode::CublasLogits][next(2)];
            let ctx = format!("{shape:?} {dtype:?} {wanted:?} {budget:?} {mode:?}");
            let Ok(p) = backward_plan(shape, dtype, wanted, budget, mode, Family::Sm90, 132) else {
                assert!(budget.is_some(), "{ctx}: no plan at the default budget");
                continue;
            };
            let limit = budget.unwrap_or_else(|| default_backward_budget(shape, dtype, wanted, mode));
            assert!(p.workspace_bytes <= limit, "{ctx}: {} > {limit}", p.workspace_bytes);
            assert!(p.token_outer, "{ctx}");
            let tokens: usize = (0..p.token_chunks()).map(|i| p.token_range(i).len()).sum();
            let rows: usize = (0..p.vocab_chunks()).map(|i| p.vocab_range(i).len()).sum();
            assert_eq!((tokens, rows), (shape.n, shape.v), "{ctx}");
            match (dtype, p.de_acc) {
                (DType::F32, DeAccumulator::InPlace) => {}
                (_, DeAccumulator::Workspace(r)) => assert_eq!(r.bytes, 4 * p.token_chunk * shape.d, "{ctx}"),
                (_, acc) => panic!("{ctx}: {acc:?}"),
            }
            assert!(p.dc_scratch.is_empty() && p.dc_tail().is_none(), "{ctx}");
        }
    }

    #[test]
    fn with_dc_the_vocabulary_stays_outer() {
        let both = Wanted { de: true, dc: true, dbias: false };
        assert!(!sm90(Shape::new(8192, 4096, 128_256), DType::BF16, both, None).token_outer);
        let dc = Wanted { de: false, dc: true, dbias: true };
        assert!(!sm90(Shape::new(8192, 4096, 128_256), DType::BF16, dc, None).token_outer);
    }
}
