//! The planner's invariants: workspace limits, chunk sizes, where accumulators live, regions.

use flce_core::{DType, Error, Shape};

use super::backward::tail_tests::{check_any_tail, check_tail};
use super::*;
use crate::geometry::{TILE_M, TILE_N};
use crate::modes::{BackwardMode, Family, ForwardMode};

pub(super) const GEMMA: Shape = Shape { n: 8192, d: 2304, v: 256_000 };
pub(super) const LLAMA: Shape = Shape { n: 8192, d: 4096, v: 128_256 };
pub(super) const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };

#[test]
fn forward_workspace_stays_within_one_mb_plus_16_bytes_per_token_and_the_finish_sums() {
    for n in [1usize, 7, 128, 255, 1000, 8192, 65_536, 131_072] {
        for v in [1usize, 123, 128_256, 256_000] {
            let p = forward_plan(Shape::new(n, 64, v), DType::BF16, 132, ForwardMode::Fused, None, Family::Sm80);
            let limit = (1 << 20) + FORWARD_BYTES_PER_TOKEN * n + crate::geometry::finish_sums_bytes(n) + 5 * ALIGN;
            assert!(p.workspace_bytes <= limit, "n {n} v {v}: {} > {limit}", p.workspace_bytes);
            assert!(p.splits >= 1 && p.splits <= MAX_SPLITS);
            assert!(p.splits * p.tiles_per_split >= p.vocab_tiles);
            assert!((p.splits - 1) * p.tiles_per_split < p.vocab_tiles, "an empty split");
        }
    }
}

#[test]
fn forward_splits_fill_the_gpu_for_few_tokens() {
    assert_eq!(forward_plan(GEMMA, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm80).splits, 5);
    assert_eq!(
        forward_plan(Shape::new(128, 64, 256_000), DType::BF16, 132, ForwardMode::Fused, None, Family::Sm80).splits,
        MAX_SPLITS
    );
    assert_eq!(
        forward_plan(Shape::new(65_536, 64, 256_000), DType::BF16, 132, ForwardMode::Fused, None, Family::Sm80).splits,
        1
    );
}

#[test]
fn cublas_forward_chunks_fit_the_budget_or_fall_back() {
    let p = forward_plan(GEMMA, DType::BF16, 132, ForwardMode::CublasChunks, None, Family::Sm80);
    assert_eq!(p.family, Family::Cublas);
    assert!(p.workspace_bytes <= gradient_bytes(GEMMA, DType::BF16, BOTH) / 10, "{}", p.workspace_bytes);
    assert!(p.vocab_chunk >= 2048 && p.vocab_chunk.is_multiple_of(TILE_N) && p.splits == 1);
    assert_eq!(p.vocab_range(p.vocab_chunks() - 1).end, GEMMA.v);
    let small = forward_plan(Shape::new(100, 64, 300), DType::BF16, 132, ForwardMode::CublasChunks, None, Family::Sm80);
    assert_eq!(small.vocab_chunk, 384, "one chunk covers the padded vocabulary");
    let tight = forward_plan(GEMMA, DType::BF16, 132, ForwardMode::CublasChunks, Some(1 << 20), Family::Sm80);
    assert_eq!(tight.family, Family::Sm80);
}

#[test]
fn default_backward_fits_ten_percent_at_gemma() {
    let p = backward_plan(GEMMA, DType::BF16, BOTH, None, BackwardMode::FusedTiles, Family::Sm80, 132).unwrap();
    let grads = gradient_bytes(GEMMA, DType::BF16, BOTH);
    assert!(p.workspace_bytes <= grads / 10, "{} > {}", p.workspace_bytes, grads / 10);
    assert_eq!(p.token_chunk, GEMMA.n);
    assert!(p.vocab_chunk >= 2048, "vocab chunk {}", p.vocab_chunk);
    assert_eq!(p.dc_acc, DcAccumulator::Direct);
    assert_eq!(p.family, Family::Sm80);
}

#[test]
fn small_budgets_chunk_tokens_and_tiny_ones_are_errors() {
    // the GPU tests' chunked-budget case
    let shape = Shape::new(700, 96, 3000);
    let p =
        backward_plan(shape, DType::BF16, BOTH, Some(600_000), BackwardMode::FusedTiles, Family::Sm80, 132).unwrap();
    assert!(p.token_chunk < shape.n && p.token_chunk.is_multiple_of(TILE_M));
    assert!(matches!(p.dc_acc, DcAccumulator::Workspace(_)) && p.dc_tail().is_none());
    assert!(p.workspace_bytes <= 600_000);
    assert_eq!(p.token_range(p.token_chunks() - 1).end, shape.n);
    // at Gemma, token chunks would need dE's accumulator in the workspace (75 MB): a budget
    // below the good chunk size takes a smaller tail plan instead
    let p =
        backward_plan(GEMMA, DType::BF16, BOTH, Some(16 << 20), BackwardMode::FusedTiles, Family::Sm80, 132).unwrap();
    assert!(p.vocab_chunk < 1024 && p.workspace_bytes <= 16 << 20);
    check_tail(GEMMA, DType::BF16, &p);
    let err = backward_plan(GEMMA, DType::BF16, BOTH, Some(1 << 20), BackwardMode::FusedTiles, Family::Sm80, 132)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidOption { name: "workspace_budget", .. }), "{err}");
}

#[test]
fn cublas_mode_fits_ten_percent_at_gemma_with_smaller_chunks() {
    let p = backward_plan(GEMMA, DType::BF16, BOTH, None, BackwardMode::CublasLogits, Family::Sm80, 132).unwrap();
    let grads = gradient_bytes(GEMMA, DType::BF16, BOTH);
    assert!(p.workspace_bytes <= grads / 10);
    assert!(p.logits.is_some() && p.token_chunk == GEMMA.n && p.vocab_chunk >= 512, "{p:?}");
    assert_eq!(p.family, Family::Cublas);
}

#[test]
fn f32_inputs_accumulate_in_place() {
    let p =
        backward_plan(Shape::new(300, 64, 1000), DType::F32, BOTH, None, BackwardMode::default(), Family::Sm80, 132)
            .unwrap();
    assert_eq!((p.de_acc, p.dc_acc), (DeAccumulator::InPlace, DcAccumulator::Direct));
}

#[test]
fn regions_do_not_overlap() {
    let p = backward_plan(
        Shape::new(1000, 96, 5000),
        DType::F16,
        Wanted::ALL,
        Some(3 << 20),
        BackwardMode::CublasLogits,
        Family::Sm80,
        132,
    )
    .unwrap();
    let in_workspace = |a: DeAccumulator| match a {
        DeAccumulator::Workspace(r) => Some(r),
        _ => None,
    };
    let dc = match p.dc_acc {
        DcAccumulator::Workspace(r) => Some(r),
        _ => None,
    };
    let mut rs: Vec<Region> = [
        Some(p.targets),
        Some(p.token_scale),
        Some(p.scalars),
        Some(p.status),
        in_workspace(p.de_acc),
        p.db_acc,
        Some(p.g),
        p.logits,
        p.db_partial,
        dc,
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

#[test]
fn sm90_forward_splits_fill_the_last_wave_and_respect_memory() {
    // Gemma 2 at 8k tokens: 64 token tiles; before L2 budgets, 2 splits made 128 blocks on 132
    // SMs (one wave); within 32 MB of E and C, 32 slots × 4 splits, two token tiles each, and a
    // rest of 4 blocks over the last 28 vocabulary tiles (a fifth partial a token)
    let p = forward_plan_tuned(GEMMA, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90, NO_L2_BUDGET);
    assert_eq!((p.family, p.splits, p.token_slots), (Family::Sm90, 2, 64));
    let p = forward_plan(GEMMA, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90);
    assert_eq!((p.family, p.splits, p.token_slots), (Family::Sm90, 5, 32));
    let rest = p.sm90_grid.and_then(|g| g.rest).unwrap();
    assert_eq!((rest.slots, rest.splits, rest.tiles_per_split, p.tiles_per_split), (4, 1, 28, 243));
    // one token: the 1000 vocabulary tiles shared out over (almost) every SM, 8 tiles each
    let one = forward_plan(Shape::new(1, 2304, 256_000), DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90);
    assert_eq!(one.splits, 125);
    // the portable mode keeps the portable family on Hopper
    let portable = forward_plan(GEMMA, DType::BF16, 132, ForwardMode::FusedSm80, None, Family::Sm90);
    assert_eq!(portable.family, Family::Sm80);
    for n in [1usize, 100, 128, 1000, 8192, 16_384, 16_512, 32_768, 131_072] {
        let p = forward_plan(Shape::new(n, 4096, 128_256), DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90);
        // past 16k tokens up to 16 partials a token; a rest's (at most REST_MAX_SPLITS) on top
        let target = if n > SM90_LARGE_N_TOKENS { 16 * MAX_SM90_SPLITS * n } else { (1 << 20) + 16 * n }
            + 16 * REST_MAX_SPLITS * n;
        assert!(p.partials.bytes <= target, "n {n}: {} bytes of partials", p.partials.bytes);
    }
}

#[test]
fn best_split_prefers_full_waves_and_the_fewest_splits_on_ties() {
    assert_eq!(best_split(64, 1000, 132, 8), 2);
    assert_eq!(best_split(256, 1000, 132, 8), 1);
    assert_eq!(best_split(1, 10, 132, 132), 10);
    // 28 column tiles for 64 row tiles: 14 tiles per block, 128 blocks (4 blocks of 7 per row
    // tile fill two waves as well: the longer blocks win)
    assert_eq!(best_split(64, 28, 132, 28), 2);
}

#[test]
fn auto_forward_is_the_hopper_fused_family_where_it_runs_and_cublas_elsewhere() {
    let hopper = forward_plan(GEMMA, DType::BF16, 132, ForwardMode::Auto, None, Family::Sm90);
    assert_eq!(hopper.family, Family::Sm90);
    let ampere = forward_plan(GEMMA, DType::BF16, 108, ForwardMode::Auto, None, Family::Sm80);
    assert_eq!(ampere.family, Family::Cublas);
    assert_eq!("auto".parse::<ForwardMode>(), Ok(ForwardMode::Auto));
    assert_eq!("sm80".parse::<BackwardMode>(), Ok(BackwardMode::FusedSm80));
}

#[test]
fn auto_backward_is_the_hopper_fused_family_there_and_cublas_otherwise() {
    assert_eq!("auto".parse::<BackwardMode>(), Ok(BackwardMode::Auto));
    assert_eq!(BackwardMode::default(), BackwardMode::Auto);
    assert_eq!(BackwardMode::Auto.resolve(Family::Sm90), BackwardMode::FusedTiles);
    assert_eq!(BackwardMode::Auto.resolve(Family::Sm80), BackwardMode::CublasLogits);
    // an explicit mode is kept
    assert_eq!(BackwardMode::CublasLogits.resolve(Family::Sm90), BackwardMode::CublasLogits);
    assert_eq!(BackwardMode::FusedTiles.resolve(Family::Sm80), BackwardMode::FusedTiles);
    // the planner resolves an unresolved Auto: its layout is the resolved mode's
    let hopper = backward_plan(GEMMA, DType::BF16, BOTH, None, BackwardMode::Auto, Family::Sm90, 132).unwrap();
    let fused = backward_plan(GEMMA, DType::BF16, BOTH, None, BackwardMode::FusedTiles, Family::Sm90, 132).unwrap();
    assert_eq!((hopper.family, hopper.logits.is_none()), (Family::Sm90, true));
    assert_eq!(hopper.workspace_bytes, fused.workspace_bytes);
    let ampere = backward_plan(GEMMA, DType::BF16, BOTH, None, BackwardMode::Auto, Family::Sm80, 132).unwrap();
    assert_eq!((ampere.family, ampere.logits.is_some()), (Family::Cublas, true));
}

#[test]
fn a_slice_backward_accumulates_de_in_the_callers_f32_share_without_a_tail() {
    use crate::plan::{slice_backward_plan, DeAccumulator};
    let slice = Shape::new(8192, 4096, 64_128); // Llama 3's vocabulary over two ranks
    let both = Wanted { de: true, dc: true, dbias: false };
    let p = slice_backward_plan(slice, DType::BF16, both, None).unwrap();
    assert_eq!(p.de_acc, DeAccumulator::InPlace);
    assert_eq!(p.family, Family::Cublas);
    assert!(p.dc_tail().is_none() && p.tail_chunks().is_empty());
    assert_eq!(p.wanted, both);
    let only_dc = slice_backward_plan(slice, DType::BF16, Wanted { de: false, ..both }, None).unwrap();
    assert_eq!(only_dc.de_acc, DeAccumulator::NotWanted);
}

/// The grid before L2 budgets: every token tile its own slot.
const NO_L2_BUDGET: Sm90Tuning = Sm90Tuning { l2_budget: 0, ..Sm90Tuning::UNPAIRED };
/// The sm90 forward in one launch at every N (`FLCE_SM90_FORWARD_BAND=0`), without a rest (the
/// grids its measurements chose: journal v25, v26).
const ONE_LAUNCH: Sm90Tuning = Sm90Tuning { forward_band: Some(0), rest: false, ..Sm90Tuning::DEFAULT };
/// The default tuning without a rest (`FLCE_SM90_REST=0`).
const NO_REST: Sm90Tuning = Sm90Tuning { rest: false, ..Sm90Tuning::DEFAULT };

#[test]
fn sm90_forward_pairs_keep_even_slots_within_one_wave() {
    let pairs = Sm90Tuning::default();
    assert_eq!((pairs.cluster, pairs.grad_cluster), (2, 1), "the default: paired forwards, unpaired G");
    for shape in
        [GEMMA, Shape::new(8192, 4096, 128256), Shape::new(8192, 3584, 152_064), Shape::new(16384, 2048, 128256)]
    {
        for n in [shape.n, 300, 129, 1] {
            let s = Shape { n, ..shape };
            let p = forward_plan_tuned(s, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90, pairs);
            let tiles = n.div_ceil(128);
            // one token tile cannot pair; pairs only where they keep the unpaired grid's balance
            assert!(p.cluster == 1 || tiles >= 2, "{s:?}");
            assert_eq!(p.token_slots % p.cluster, 0, "{s:?}: {p:?}");
            assert!(p.sm90_grid.unwrap().blocks() <= 132, "{s:?}: a second wave {p:?}");
            // the model shapes at 8k tokens (64 token tiles) pair
            if n == 8192 {
                assert_eq!(p.cluster, 2, "{s:?}");
            }
        }
    }
    // 33 token tiles over Llama 3's vocabulary: paired, the longest block would walk 138 tiles
    // against 126 unpaired — so no pairs; 43 tiles paired 167, unpaired with a rest 164: within
    // the pairs' slack
    let (grid, cluster) = sm90_grid_tuned(33, 501, 132, 16, 4096, pairs);
    assert_eq!((cluster, grid.longest(33)), (1, 126));
    let (grid, cluster) = sm90_grid_tuned(43, 501, 132, 16, 4096, pairs);
    assert_eq!((cluster, grid.slots % 2, grid.longest(44)), (2, 0, 167));
    // other families and the unpaired tuning never pair
    let sm80 = forward_plan_tuned(GEMMA, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm80, pairs);
    assert_eq!(sm80.cluster, 1);
    let unpaired = Sm90Tuning::UNPAIRED;
    assert_eq!(
        forward_plan_tuned(GEMMA, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90, unpaired).cluster,
        1
    );
    assert_eq!(forward_plan(GEMMA, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90).cluster, 2);
}

#[test]
fn sm90_forward_plans_its_grid_within_the_l2_budget_and_the_partials_target() {
    let llama = Shape::new(8192, 4096, 128256);
    let p = forward_plan(llama, DType::BF16, 132, ForwardMode::Auto, None, Family::Sm90);
    assert_eq!((p.family, p.token_slots, p.splits), (Family::Sm90, 16, 9));
    // 8 partials per token (within 1 MB + 16 bytes per token of partials) and the rest's one
    assert!(p.partials.bytes <= (1 << 20) + 16 * 8192 + 16 * 8192);
    assert_eq!(p.sm90_grid.unwrap().rest.map(|r| (r.slots, r.splits)), Some((4, 1)));
    let no_rest = forward_plan_tuned(llama, DType::BF16, 132, ForwardMode::Auto, None, Family::Sm90, NO_REST);
    assert_eq!((no_rest.token_slots, no_rest.splits, no_rest.tiles_per_split), (16, 8, 63));
    // the grid before budgets: every token tile its own block, 2 splits
    let p0 = forward_plan_tuned(llama, DType::BF16, 132, ForwardMode::Auto, None, Family::Sm90, NO_L2_BUDGET);
    assert_eq!((p0.token_slots, p0.splits), (64, 2));
    // past 16k tokens up to 16 splits, within 40 MB of L2: 32 slots × 4 at 32k tokens (the
    // partials target alone: 64 × 2, 68 MB), 12 × 11 paired at 65k (1978 tile steps, within the
    // pairs' slack of 11 × 12 unpaired, 1974; the partials target alone: 128 × 1, 130 MB), 22 × 6
    // at 128k, in one launch (by default these run in bands: sm90_forward_bands_take_one_token_tile_a_block)
    let at = |n: usize| {
        forward_plan_tuned(
            Shape::new(n, 4096, 128256),
            DType::BF16,
            132,
            ForwardMode::Auto,
            None,
            Family::Sm90,
            ONE_LAUNCH,
        )
    };
    for (n, slots, splits, cluster) in [(32_768, 32, 4, 2), (65_536, 12, 11, 2), (131_072, 22, 6, 2)] {
        let p = at(n);
        assert_eq!((p.token_slots, p.splits, p.cluster), (slots, splits, cluster), "n {n}");
        assert!(p.token_slots * p.splits <= 132);
    }
    // up to 16k tokens the grid of the partials target and the 32 MB budget (32 × 4 at 16k)
    let p = at(16_384);
    assert_eq!((p.token_slots, p.splits), (32, 4));
    // the every-token-tile knob (L2 budget 0) keeps its grid past 16k tokens: 1 split at 65k
    let p = forward_plan_tuned(
        Shape::new(65_536, 4096, 128256),
        DType::BF16,
        132,
        ForwardMode::Auto,
        None,
        Family::Sm90,
        NO_L2_BUDGET,
    );
    assert_eq!((p.token_slots, p.splits), (512, 1));
    // one token: one slot, the vocabulary over the SMs within the partials target
    let one = forward_plan(Shape::new(1, 4096, 128256), DType::BF16, 132, ForwardMode::Auto, None, Family::Sm90);
    assert_eq!(one.token_slots, 1);
    assert!(one.splits > 8 && one.splits <= 132, "{one:?}");
    // other families: every token tile
    let sm80 = forward_plan(llama, DType::BF16, 132, ForwardMode::Auto, None, Family::Sm80);
    assert_eq!(sm80.token_slots, sm80.token_tiles);
}

#[test]
fn sm90_forward_bands_take_one_token_tile_a_block() {
    let banded = |band: usize| Sm90Tuning { forward_band: Some(band), ..Sm90Tuning::default() };
    let plan = |n: usize, band: usize, sms: usize| {
        forward_plan_tuned(
            Shape::new(n, 4096, 128_256),
            DType::BF16,
            sms,
            ForwardMode::Auto,
            None,
            Family::Sm90,
            banded(band),
        )
    };
    // 65k tokens in bands of 12 token tiles: 12 × 11 blocks a launch, 11 partials a token, pairs
    let p = plan(65_536, 12, 132);
    assert_eq!((p.band_tiles, p.token_slots, p.splits, p.cluster), (12, 12, 11, 2));
    assert!(p.partials.bytes <= 16 * MAX_SM90_SPLITS * 65_536);
    // an odd band runs unpaired; a band wider than the SMs is cut to them
    assert_eq!(plan(65_536, 11, 132).cluster, 1);
    assert_eq!((plan(8192, 8, 2).band_tiles, plan(8192, 8, 2).splits), (2, 1));
    // up to 16k tokens the partials target still caps the splits: 4 at 16k
    assert_eq!(plan(16_384, 12, 132).splits, 4);
    // by default, bands of 12 past 16k tokens (with an L2 budget) and one launch up to 16k
    let default_at = |n: usize, t: Sm90Tuning| {
        forward_plan_tuned(Shape::new(n, 4096, 128_256), DType::BF16, 132, ForwardMode::Auto, None, Family::Sm90, t)
    };
    for n in [16_385, 32_768, 65_536, 131_072] {
        assert_eq!(default_at(n, Sm90Tuning::DEFAULT), plan(n, SM90_LARGE_N_BAND, 132), "n {n}");
    }
    assert_eq!(default_at(16_384, Sm90Tuning::DEFAULT).band_tiles, 0);
    assert_eq!(default_at(65_536, NO_L2_BUDGET).band_tiles, 0);
    // no band where the batch fits one: the one-launch grid
    let whole = plan(1024, 12, 132);
    assert_eq!(whole.band_tiles, 0);
    assert_eq!(
        whole,
        forward_plan(Shape::new(1024, 4096, 128_256), DType::BF16, 132, ForwardMode::Auto, None, Family::Sm90)
    );
}

#[test]
fn sm90_backward_chunks_fill_the_waves_of_the_g_kernel() {
    const QWEN: Shape = Shape { n: 8192, d: 3584, v: 152_064 };
    for (shape, sm80_chunk, sm90_chunk) in [(LLAMA, 6784, 6656), (GEMMA, 7296, 7168), (QWEN, 6912, 6656)] {
        let sm80 = backward_plan(shape, DType::BF16, BOTH, None, BackwardMode::FusedTiles, Family::Sm80, 132).unwrap();
        let sm90 = backward_plan(shape, DType::BF16, BOTH, None, BackwardMode::FusedTiles, Family::Sm90, 132).unwrap();
        assert_eq!((sm80.vocab_chunk, sm90.vocab_chunk), (sm80_chunk, sm90_chunk), "{shape:?}");
        assert_eq!(sm90.family, Family::Sm90);
        // same token chunk and accumulator place, within the same budget, fewer G steps
        assert_eq!(sm90.token_chunk, shape.n);
        assert!(sm90.dc_tail().is_some() && sm80.dc_tail().is_some());
        assert!(sm90.workspace_bytes <= sm80.workspace_bytes);
        let as_sm90 = BackwardPlan { family: Family::Sm90, ..sm80.clone() };
        assert!(sm90_grad_steps(&sm90, 132) < sm90_grad_steps(&as_sm90, 132), "{shape:?}");
    }
    // Llama 3's numbers: 6784 rows are 26.5 tiles, 2 splits of 14 over 64 token tiles (128 blocks,
    // one wave of 14 steps); 6656 rows are 26 tiles in 13 steps
    let llama = backward_plan(LLAMA, DType::BF16, BOTH, None, BackwardMode::FusedTiles, Family::Sm90, 132).unwrap();
    assert_eq!(super::sm90::grad_launch_steps(64, 27, 132), 14);
    assert_eq!(super::sm90::grad_launch_steps(64, 26, 132), 13);
    // 20 chunks, tail chunks 18..20 (half the accumulator in dE's own bytes: a short tail, 8448
    // rows) laid out from V backwards: the tail's first chunk 7 tiles (4 steps), its last 26 —
    // the tail pass recomputes only the 7 (a chunk-aligned tail: 26), a step per launch
    assert_eq!(super::sm90::grad_launch_steps(64, 7, 132), 4);
    assert_eq!((llama.vocab_chunks(), llama.tail_chunks()), (20, 18..20));
    assert_eq!((llama.vocab_range(18), llama.vocab_range(19)), (119_808..121_600, 121_600..128_256));
    assert_eq!(sm90_grad_steps(&llama, 132), 18 * (13 + 1) + (4 + 1) + (13 + 1) + (4 + 1));
    // a byte budget: still within it; the cuBLAS family's plan is the largest chunk that fits
    for budget in [64 << 20, 256 << 20, 1 << 30] {
        let p =
            backward_plan(LLAMA, DType::BF16, BOTH, Some(budget), BackwardMode::FusedTiles, Family::Sm90, 132).unwrap();
        assert!(p.workspace_bytes <= budget && p.vocab_chunk.is_multiple_of(256), "{budget}: {p:?}");
    }
    let cublas = backward_plan(LLAMA, DType::BF16, BOTH, None, BackwardMode::CublasLogits, Family::Sm90, 132).unwrap();
    assert_eq!(cublas.family, Family::Cublas);
    assert_eq!(cublas.vocab_chunk % 128, 0);
}

#[test]
fn sm90_chunk_choice_keeps_every_plan_invariant() {
    // pseudo-random shapes, dtypes, gradients and budgets (a fixed LCG: reproducible): the sm90
    // plan fits its budget, keeps the unrefined plan's token chunk and accumulator place, never
    // takes more G steps than it, and its tail (where there is one) keeps the tail's invariants
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |m: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize % m
    };
    for _ in 0..300 {
        let shape = Shape::new(1 + next(20_000), 8 * (1 + next(700)), 1 + next(300_000));
        let dtype = [DType::BF16, DType::F16][next(2)];
        let wanted = [BOTH, Wanted { de: true, dc: false, dbias: false }, Wanted::ALL][next(3)];
        let budget = [None, Some(32 << 20), Some(256 << 20), Some(2 << 30)][next(4)];
        let sms = [2, 108, 132][next(3)];
        let (Ok(sm80), Ok(sm90)) = (
            backward_plan(shape, dtype, wanted, budget, BackwardMode::FusedTiles, Family::Sm80, sms),
            backward_plan(shape, dtype, wanted, budget, BackwardMode::FusedTiles, Family::Sm90, sms),
        ) else {
            continue; // no plan within a tiny budget: the same for both families
        };
        let ctx = format!("{shape:?} {dtype:?} {wanted:?} {budget:?} {sms} SMs");
        let limit = budget.unwrap_or_else(|| default_backward_budget(shape, dtype, wanted, BackwardMode::FusedTiles));
        assert!(sm90.workspace_bytes <= limit.max(sm80.workspace_bytes), "{ctx}");
        assert_eq!(sm90.token_chunk, sm80.token_chunk, "{ctx}");
        assert_eq!(sm90.dc_tail().is_some(), sm80.dc_tail().is_some(), "{ctx}");
        assert!(sm90.vocab_chunk <= sm80.vocab_chunk && sm90.vocab_chunk % TILE_N == 0, "{ctx}");
        let as_sm90 = BackwardPlan { family: Family::Sm90, ..sm80.clone() };
        assert!(sm90_grad_steps(&sm90, sms) <= sm90_grad_steps(&as_sm90, sms), "{ctx}");
        if let Some(t) = sm90.dc_tail() {
            check_any_tail(shape, dtype, &sm90);
            assert_eq!(Some(t.reach(shape)), sm80.dc_tail().map(|t| t.reach(shape)), "{ctx}");
        }
        // every vocabulary row in exactly one chunk, in order, each chunk within the chunk size
        // and starting on a tile boundary (the sm80 G kernel addresses its tiles from the chunk's
        // first row / 128), in both families' plans
        for p in [&sm80, &sm90] {
            let mut next = 0;
            for i in 0..p.vocab_chunks() {
                let r = p.vocab_range(i);
                assert!(r.start == next && r.end > r.start && r.start % TILE_N == 0, "{ctx}: chunk {i} {r:?}");
                assert!(r.len() <= p.vocab_chunk || i < p.dc_scratch.len(), "{ctx}: chunk {i} {r:?}");
                next = r.end;
            }
            assert_eq!(next, shape.v, "{ctx}");
        }
    }
}
