//! The three-product planner's unit tests (step.rs): chunks that pay, budgets, the storages
//! and their workspace, the compact forward's grid.

use super::super::Sm90Tuning;
use super::*;

const LLAMA: Shape = Shape { n: 8192, d: 4096, v: 128_256 };
const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };
const F32: ThreeProductLogits = ThreeProductLogits::F32;
const UNPAIRED: Sm90Tuning = Sm90Tuning::UNPAIRED;
const COMPACT: ThreeProductLogits = ThreeProductLogits::Compact { sm_count: 132, tuning: UNPAIRED };

#[test]
fn the_three_product_plan_is_taken_only_with_chunks_that_pay() {
    // Llama 3: 1.05 GB of accumulator in the workspace (the other half in dC); 1.5 GB leaves a
    // few hundred tokens a chunk: not worth it; 2.5 GB 2048
    assert!(three_product_plan(LLAMA, DType::BF16, BOTH, 1536 << 20, F32).is_ok());
    assert_eq!(three_product_plan_if_faster(LLAMA, DType::BF16, BOTH, 1536 << 20, F32, usize::MAX), None);
    assert_eq!(
        three_product_plan_if_faster(LLAMA, DType::BF16, BOTH, 2560 << 20, F32, usize::MAX).unwrap().token_chunk,
        2048
    );
    let p = three_product_plan_if_faster(LLAMA, DType::BF16, BOTH, 4 << 30, F32, usize::MAX)
        .expect("4 GB: 2816-token chunks");
    assert!(p.token_chunk >= MIN_THREE_PRODUCT_TOKEN_CHUNK);
    // a batch smaller than the minimum chunk takes it whole
    let small = Shape::new(300, 64, 1000);
    assert_eq!(
        three_product_plan_if_faster(small, DType::BF16, BOTH, 64 << 20, F32, usize::MAX).unwrap().token_chunk,
        300
    );
    assert_eq!(three_product_plan_if_faster(LLAMA, DType::BF16, BOTH, 1 << 30, F32, usize::MAX), None);
}

#[test]
fn a_token_cap_bounds_the_chunk_and_its_workspace() {
    let compact = ThreeProductLogits::Compact { sm_count: 132, tuning: UNPAIRED };
    let long = Shape { n: 65_536, ..LLAMA };
    let whole = three_product_plan(long, DType::BF16, BOTH, 40 << 30, compact).unwrap();
    assert_eq!((whole.token_chunk, whole.dc_acc), (65_536, None), "40 GB: one chunk, no accumulator");
    // (the largest chunk under the cap, or one as many chunks of it take: balanced_chunks)
    for (cap, chunk) in [(8192, 8192), (8000, 7936), (100, 128), (usize::MAX, 65_536)] {
        let p = three_product_plan_capped(long, DType::BF16, BOTH, 40 << 30, compact, cap).unwrap();
        assert!(p.token_chunk <= chunk && p.token_chunks() == long.n.div_ceil(chunk), "cap {cap}: {}", p.token_chunk);
        assert!(p.workspace_bytes <= whole.workspace_bytes);
        // below every token: dC's f32 accumulator
        assert_eq!(p.dc_acc.is_some(), chunk < long.n, "cap {cap}");
    }
    // the budget still binds below the cap
    let tight = three_product_plan_capped(long, DType::BF16, BOTH, 2 << 30, compact, 8192).unwrap();
    assert!(tight.token_chunk < 8192 && tight.workspace_bytes <= 2 << 30, "{}", tight.token_chunk);
    // a cap at or past N changes nothing
    assert_eq!(
        three_product_plan_capped(LLAMA, DType::BF16, BOTH, 8 << 30, compact, 8192).unwrap(),
        three_product_plan(LLAMA, DType::BF16, BOTH, 8 << 30, compact).unwrap()
    );
    let cap = three_product_plan_if_faster(long, DType::BF16, BOTH, 40 << 30, compact, 4096).unwrap();
    assert_eq!(cap.token_chunk, 4096);
}

#[test]
fn long_batches_take_8k_chunks_by_default() {
    let compact = ThreeProductLogits::Compact { sm_count: 132, tuning: UNPAIRED };
    // (16,512 tokens: three chunks of at most 8192 — 6656 / 6656 / 3200, not 8192 / 8192 / 128,
    // whose last chunk of one token tile would take a third of a whole chunk's tile steps)
    for (n, chunk) in [(8192, 8192), (16_384, 16_384), (16_512, 6656), (65_536, 8192)] {
        let shape = Shape { n, ..LLAMA };
        let p = three_product_plan_if_faster(
            shape,
            DType::BF16,
            BOTH,
            40 << 30,
            compact,
            default_three_product_max_tokens(n),
        );
        assert_eq!(p.unwrap().token_chunk, chunk, "n {n}");
    }
    // the budget still binds below the default cap
    let long = Shape { n: 65_536, ..LLAMA };
    let tight =
        three_product_plan_capped(long, DType::BF16, BOTH, 2 << 30, compact, default_three_product_max_tokens(long.n));
    assert!(tight.unwrap().token_chunk < THREE_PRODUCT_LONG_CHUNK);
}

#[test]
fn the_budget_picks_as_many_chunks_as_its_largest_token_chunk_takes() {
    // compact Llama 3 at 8192 tokens fits whole in less than the accumulator and a chunk: 32k
    let long = Shape { n: 32_768, ..LLAMA };
    for (shape, storage) in [(LLAMA, F32), (long, COMPACT)] {
        let p = three_product_plan(shape, DType::BF16, BOTH, 4 << 30, storage).unwrap();
        assert!(p.workspace_bytes <= 4 << 30);
        assert_eq!(p.token_chunk % TILE_M, 0);
        let largest = (p.token_chunk..=shape.n)
            .step_by(TILE_M)
            .take_while(|&c| layout(shape, DType::BF16, BOTH, c, storage).workspace_bytes <= 4 << 30)
            .last()
            .unwrap();
        let bigger = layout(shape, DType::BF16, BOTH, largest + TILE_M, storage);
        assert!(bigger.workspace_bytes > 4 << 30, "{storage:?}: a larger chunk would have fitted");
        assert_eq!(p.token_chunks(), shape.n.div_ceil(largest), "{storage:?}");
        if storage == F32 {
            assert_eq!(p.token_chunk, largest, "no forward grid to balance: the largest");
        }
        // the accumulator's second half (the first in dC's buffer): 1.05 GB
        assert_eq!(p.dc_head_rows, (LLAMA.v / 2 - 1) / 128 * 128);
        assert_eq!(p.dc_acc.unwrap().bytes, (LLAMA.v - p.dc_head_rows) * LLAMA.d * 4);
        assert_eq!(p.token_range(p.token_chunks() - 1).end, shape.n);
    }
    assert!(three_product_plan(LLAMA, DType::BF16, BOTH, 1 << 30, F32).is_err());
    // one chunk of every token needs no accumulator: compact Llama 3 fits whole in 2.1 GB
    let one = three_product_plan(LLAMA, DType::BF16, BOTH, 2100 << 20, COMPACT).unwrap();
    assert_eq!((one.token_chunks(), one.dc_acc), (1, None));
    assert!(three_product_plan(LLAMA, DType::BF16, BOTH, 1900 << 20, COMPACT).unwrap().token_chunks() > 1);
    assert!(three_product_plan(LLAMA, DType::BF16, BOTH, 1 << 30, COMPACT).is_err());
}

#[test]
fn compact_logits_take_two_bytes_a_logit_and_triple_the_chunk() {
    // the train step's loss shape: 1 GB of accumulator, 2 GB of budget
    let shape = Shape::new(16_384, 2048, 128_256);
    let f32 = three_product_plan(shape, DType::BF16, BOTH, 2 << 30, F32).unwrap();
    let compact = three_product_plan(shape, DType::BF16, BOTH, 2 << 30, COMPACT).unwrap();
    assert_eq!(compact.storage, COMPACT);
    assert_eq!(compact.logits, compact.g, "G overwrites q in place");
    assert_eq!(compact.logits.bytes, compact.token_chunk * compact.ldg * 2);
    // the maxima in the chunk's dE rows (4·501 bytes of a 4096-byte row): dE's pitch in floats
    assert_eq!((compact.m_ref, compact.mref_ld()), (Some(MrefPlace::DeRows), shape.d / 2));
    assert!(compact.token_chunk >= 2 * f32.token_chunk, "{} vs {}", compact.token_chunk, f32.token_chunk);
    // the statistics are the forward's partials: one per split of its grid
    let grid = compact.forward_grid.unwrap();
    assert_eq!(compact.stats_splits, grid.partial_rows());
    assert_eq!(compact.partials.bytes, 16 * shape.n * grid.partial_rows());
    let rest_tiles = grid.rest.map_or(0, |r| r.splits * r.tiles_per_split);
    assert!(grid.splits * grid.tiles_per_split + rest_tiles >= shape.v.div_ceil(SM90_TILE_N));
    assert!(f32.forward_grid.is_none() && f32.m_ref.is_none());
}

#[test]
fn paired_compact_forwards_keep_their_slots_in_pairs_within_one_wave() {
    let paired = ThreeProductLogits::Compact { sm_count: 132, tuning: Sm90Tuning { cluster: 2, ..UNPAIRED } };
    let train16k = Shape::new(16384, 2048, 128_256);
    for (shape, budget) in [(train16k, 2 << 30), (LLAMA, 4 << 30), (Shape::new(300, 64, 1000), 64 << 20)] {
        let p = three_product_plan(shape, DType::BF16, BOTH, budget, paired).unwrap();
        let g = p.forward_grid.unwrap();
        assert_eq!(g.slots % p.forward_cluster, 0, "{shape:?}: {g:?}");
        assert!(g.blocks() <= 132, "{shape:?}: a second wave {g:?}");
        // Llama 3 in one chunk of 64 token tiles and the 16k loss in chunks of 43 pair
        if shape.n >= 8192 {
            assert_eq!(p.forward_cluster, 2, "{shape:?}: {p:?}");
        }
    }
    // unpaired tuning: never
    assert_eq!(three_product_plan(LLAMA, DType::BF16, BOTH, 4 << 30, COMPACT).unwrap().forward_cluster, 1);
}

#[test]
fn the_compact_forward_grid_follows_its_own_l2_budget() {
    // the 16k training-step loss at 2 GB: 6144-token chunks (48 token tiles, 501 vocabulary tiles)
    let train16k = Shape::new(16384, 2048, 128_256);
    let plan = |compact_mb: usize| {
        let tuning = Sm90Tuning { compact_l2_budget: compact_mb << 20, rest: false, ..Sm90Tuning::DEFAULT };
        three_product_plan_with_chunk(
            train16k,
            DType::BF16,
            BOTH,
            6144,
            ThreeProductLogits::Compact { sm_count: 132, tuning },
        )
    };
    let (wide, narrow) = (plan(32), plan(16));
    let (w, n) = (wide.forward_grid.unwrap(), narrow.forward_grid.unwrap());
    assert_eq!((w.slots, w.splits), (12, 11), "{w:?}");
    assert_eq!((n.slots, n.splits), (16, 8), "{n:?}");
    // the statistics follow the grid: one partial per split
    assert_eq!(narrow.stats_splits, 8);
    assert!(n.footprint(2 * 2048) <= 16 << 20);
    // with a rest (the default) both budgets plan 16 × 8 blocks over 8 × 61 tiles and 4 over the
    // last 13: 183 tile steps (184 for 12 × 11)
    let with_rest = |compact_mb: usize| {
        let tuning = Sm90Tuning { compact_l2_budget: compact_mb << 20, ..Sm90Tuning::DEFAULT };
        let p = three_product_plan(
            train16k,
            DType::BF16,
            BOTH,
            2 << 30,
            ThreeProductLogits::Compact { sm_count: 132, tuning },
        );
        p.unwrap().forward_grid.unwrap()
    };
    let rest = Some(crate::plan::Sm90Rest { slots: 4, splits: 1, tiles_per_split: 13 });
    for mb in [16, 32] {
        let g = with_rest(mb);
        assert_eq!((g.slots, g.splits, g.tiles_per_split, g.rest, g.longest(48)), (16, 8, 61, rest, 183), "{mb} MB");
    }
}

#[test]
fn a_given_chunk_is_rounded_to_whole_token_tiles() {
    let s = Shape::new(300, 64, 1000);
    let p = three_product_plan_with_chunk(s, DType::BF16, BOTH, 100, COMPACT);
    assert_eq!((p.token_chunk, p.token_chunks(), p.storage), (128, 3, COMPACT));
    assert!(p.dc_acc.is_some(), "several chunks accumulate dC in f32");
    let whole = three_product_plan_with_chunk(s, DType::BF16, BOTH, 1 << 20, F32);
    assert_eq!((whole.token_chunk, whole.token_chunks(), whole.dc_acc), (300, 1, None));
    assert_eq!(three_product_plan_with_chunk(Shape::new(1, 8, 10), DType::F16, BOTH, 128, COMPACT).token_chunk, 1);
}

#[test]
fn compact_logits_fall_back_to_f32_for_f32_inputs_only() {
    let s = Shape::new(300, 64, 1000);
    assert_eq!(three_product_plan(s, DType::F32, BOTH, 64 << 20, COMPACT).unwrap().storage, F32);
    assert_eq!(three_product_plan(s, DType::F16, BOTH, 64 << 20, COMPACT).unwrap().storage, COMPACT);
    // a bias gradient: G's kernel leaves the column sums in db_partial, as the f32 one does
    let with_db = three_product_plan(s, DType::BF16, Wanted::ALL, 64 << 20, COMPACT).unwrap();
    assert_eq!(with_db.storage, COMPACT);
    assert!(with_db.db_acc.is_some() && with_db.db_partial.is_some() && with_db.m_ref.is_some());
}

#[test]
fn few_tokens_over_a_wide_vocabulary_split_the_statistics() {
    let gemma = Shape::new(8192, 2304, 256_000);
    let p = three_product_plan(gemma, DType::BF16, BOTH, 4 << 30, F32).unwrap();
    assert!(p.stats_splits > 1 && p.stats_splits <= MAX_STATS_SPLITS, "{}", p.stats_splits);
    assert!(p.stats_splits * p.stats_seg_cols >= gemma.v && (p.stats_splits - 1) * p.stats_seg_cols < gemma.v);
    assert_eq!(p.partials.bytes, 16 * gemma.n * p.stats_splits);
    let small = three_product_plan(Shape::new(3, 8, 100), DType::BF16, BOTH, 1 << 20, F32).unwrap();
    assert_eq!((small.stats_splits, small.stats_seg_cols), (1, 128));
}

#[test]
fn f32_accumulates_in_place_and_small_problems_take_one_chunk() {
    let p = three_product_plan(Shape::new(300, 64, 1000), DType::F32, Wanted::ALL, 64 << 20, F32).unwrap();
    assert!(p.dc_acc.is_none() && p.db_acc.is_some());
    assert_eq!((p.token_chunk, p.token_chunks()), (300, 1));
}

#[test]
fn the_budget_takes_the_chunk_that_balances_the_forward_grid_among_as_many_chunks() {
    // the 16k training-step loss: with 2,112 MB the largest chunk that fits is 6400 tokens (a
    // 10 × 12 grid, 507 tile steps over its three chunks); 6144 (16 × 8, 488) is as many chunks
    let train16k = Shape::new(16384, 2048, 128_256);
    let compact = ThreeProductLogits::Compact { sm_count: 132, tuning: Sm90Tuning::DEFAULT };
    let plan = |mib: usize| three_product_plan(train16k, DType::BF16, BOTH, mib << 20, compact).unwrap();
    let steps = |p: &ThreeProductPlan| forward_tile_steps(p).unwrap();
    let wide = three_product_plan_with_chunk(train16k, DType::BF16, BOTH, 6400, compact);
    assert_eq!((wide.token_chunks(), steps(&wide)), (3, 507));
    for mib in [2048, 2112, 2176] {
        let p = plan(mib);
        assert_eq!((p.token_chunk, p.token_chunks(), steps(&p)), (6144, 3, 488), "{mib} MiB");
        assert!(p.workspace_bytes <= mib << 20);
    }
    // 1,792 MB holds 5120-token chunks (539 steps); four chunks of 4096 take 488 in less memory
    let p = plan(1792);
    assert_eq!((p.token_chunk, p.token_chunks(), steps(&p)), (4096, 4, 488));
    // the whole batch in one chunk stays one chunk; cuBLAS's f32 logits (no grid) keep the largest
    assert_eq!(plan(4096).token_chunk, 16384);
    let f32 = three_product_plan(train16k, DType::BF16, BOTH, 2112 << 20, ThreeProductLogits::F32).unwrap();
    assert_eq!(
        f32.token_chunk,
        three_product_plan_with_chunk(train16k, DType::BF16, BOTH, f32.token_chunk, ThreeProductLogits::F32)
            .token_chunk
    );
    // never a chunk under MIN_THREE_PRODUCT_TOKEN_CHUNK where the largest one was at least that
    for mib in (800..4200).step_by(37) {
        if let Ok(p) = three_product_plan(train16k, DType::BF16, BOTH, mib << 20, compact) {
            assert!(
                p.token_chunk >= MIN_THREE_PRODUCT_TOKEN_CHUNK && p.workspace_bytes <= mib << 20,
                "{mib} MiB: {}",
                p.token_chunk
            );
        }
    }
}

#[test]
fn the_compact_maxima_live_in_de_rows_where_they_fit() {
    let plan =
        |shape: Shape, dtype: DType, wanted: Wanted| three_product_plan_with_chunk(shape, dtype, wanted, 4096, COMPACT);
    let in_de = plan(LLAMA, DType::BF16, BOTH);
    assert_eq!((in_de.m_ref, in_de.mref_ld()), (Some(MrefPlace::DeRows), 2048));
    // the same plan with the maxima in the workspace is larger by exactly their bytes
    let no_de = Wanted { de: false, ..BOTH };
    let in_ws = plan(LLAMA, DType::BF16, no_de);
    let tiles = LLAMA.v.div_ceil(SM90_TILE_N);
    assert_eq!(in_ws.m_ref.map(|m| matches!(m, MrefPlace::Workspace(r) if r.bytes == 4096 * tiles * 4)), Some(true));
    assert_eq!(in_ws.mref_ld(), tiles);
    assert_eq!(in_ws.workspace_bytes - in_de.workspace_bytes, 4096 * tiles * 4);
    // Gemma 2: 4·1000 bytes of maxima in a 4608-byte row; D 64 at V 100000: 1564 bytes, no room
    assert_eq!(plan(Shape::new(8192, 2304, 256_000), DType::BF16, BOTH).m_ref, Some(MrefPlace::DeRows));
    assert!(matches!(plan(Shape::new(1024, 64, 100_000), DType::F16, BOTH).m_ref, Some(MrefPlace::Workspace(_))));
    // an odd D: dE rows 2·D bytes apart are not 4-byte aligned
    assert!(matches!(plan(Shape::new(1024, 507, 3000), DType::BF16, BOTH).m_ref, Some(MrefPlace::Workspace(_))));
    // (q itself stays in the workspace, 2 bytes a logit); f32 logits keep no maxima
    assert_eq!(in_de.logits.bytes, 4096 * in_de.ldg * 2);
    assert_eq!(three_product_plan_with_chunk(LLAMA, DType::BF16, BOTH, 4096, F32).m_ref, None);
}

#[test]
fn one_chunk_keeps_its_token_state_in_dc_and_the_workspace_at_the_logits() {
    // the model shapes with one chunk of every token: the workspace is q (N·V·2 bytes, a multiple
    // of 2 MiB: what torch.compile's bf16 logits take) and the 256-byte scalars region, nothing
    // more; the per-token state (1.28 MB at Llama 3) lives in dC's buffer
    for shape in [LLAMA, Shape::new(8192, 2304, 256_000), Shape::new(8192, 3584, 152_064), Shape { n: 1024, ..LLAMA }] {
        let p = three_product_plan(shape, DType::BF16, BOTH, usize::MAX, COMPACT).unwrap();
        assert_eq!((p.token_chunks(), p.token_state), (1, StatePlace::DcBuffer), "{shape:?}");
        assert_eq!(p.workspace_bytes, shape.n * shape.v * 2 + 256, "{shape:?}");
        let ends = [p.targets, p.token_scale, p.partials, p.target_logit, p.finish_sums].map(|r| r.offset + r.bytes);
        assert!(ends.iter().all(|&e| e + 255 <= shape.v * shape.d * 2), "{shape:?}: the state fits dC");
        // and room for lse after it (a caller without an lse buffer), 4-byte aligned, in dC too
        let lse = p.lse.expect("lse's room in dC's state");
        assert_eq!(lse.bytes, 4 * shape.n);
        assert!(ends.iter().all(|&e| e <= lse.offset) && lse.offset.is_multiple_of(4), "{shape:?}: after the state");
        assert!(lse.offset + lse.bytes + 255 <= shape.v * shape.d * 2, "{shape:?}: lse fits dC");
        // and the status word's room after lse (a caller that checked its targets ahead)
        let status = p.status.expect("the status word's room in dC's state");
        assert_eq!(status.bytes, 4);
        assert!(lse.offset + lse.bytes <= status.offset && status.offset.is_multiple_of(4), "{shape:?}: after lse");
        assert!(status.offset + 4 + 255 <= shape.v * shape.d * 2, "{shape:?}: the status fits dC");
        // the unit grad_output is a spare word of the scalars region
        assert_eq!(p.unit_grad.offset, p.scalars.offset + 4 * crate::geometry::SCALAR_UNIT);
        assert!(p.unit_grad.offset + 4 <= p.scalars.offset + crate::geometry::BACKWARD_SCALARS_BYTES);
        // f32 logits and f32 inputs too
        assert_eq!(
            three_product_plan(shape, DType::BF16, BOTH, usize::MAX, F32).unwrap().token_state,
            StatePlace::DcBuffer
        );
        assert_eq!(
            three_product_plan(shape, DType::F32, BOTH, usize::MAX, F32).unwrap().token_state,
            StatePlace::DcBuffer
        );
    }
    let state_bytes = |p: &ThreeProductPlan| p.finish_sums.offset + p.finish_sums.bytes;
    // without dC, or with several chunks (the state outlives a chunk's dC product), the workspace
    // holds it, the same bytes more
    let one = three_product_plan(LLAMA, DType::BF16, BOTH, usize::MAX, COMPACT).unwrap();
    let no_dc = three_product_plan(LLAMA, DType::BF16, Wanted { dc: false, ..BOTH }, usize::MAX, COMPACT).unwrap();
    assert_eq!((no_dc.token_state, no_dc.lse, no_dc.status), (StatePlace::Workspace, None, None));
    assert!(no_dc.workspace_bytes >= one.workspace_bytes + state_bytes(&one) - 256);
    let chunked = three_product_plan_with_chunk(LLAMA, DType::BF16, BOTH, 4096, COMPACT);
    assert_eq!(
        (chunked.token_state, chunked.lse, chunked.status),
        (StatePlace::Workspace, None, None),
        "the caller's lse and status then"
    );
    // a dC too small for the state (255 bytes spare for its alignment)
    let tiny = Shape::new(4096, 16, 64);
    assert_eq!(
        three_product_plan(tiny, DType::BF16, BOTH, usize::MAX, F32).unwrap().token_state,
        StatePlace::Workspace
    );
}
