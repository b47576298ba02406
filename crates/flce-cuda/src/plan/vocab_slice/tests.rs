//! The vocabulary-slice planner's unit tests (slice.rs): when it applies, the head a budget buys,
//! every region inside the workspace and apart, the rest's chunks covering the vocabulary past
//! the head.

use super::super::{forward_plan, BackwardPlan, DeAccumulator, Sm90Tuning};
use super::*;
use crate::modes::ForwardMode;

const LLAMA: Shape = Shape { n: 8192, d: 4096, v: 128_256 };
const GEMMA: Shape = Shape { n: 8192, d: 2304, v: 256_000 };
const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };
const COMPACT: ThreeProductLogits = ThreeProductLogits::Compact { sm_count: 132, tuning: Sm90Tuning::UNPAIRED };
// The rest with dE's accumulator in the workspace; the backend's default also puts it in dC's head
// rows where they hold it (de_in_dc: de_accumulator_in_dcs_head_rows_buys_a_larger_head).
const REST: VocabSliceRest = VocabSliceRest {
    mode: BackwardMode::FusedTiles,
    family: Family::Sm90,
    sm_count: 132,
    vocab_chunk: 6784,
    dc_scratch: true,
    de_in_dc: false,
};

fn fwd(shape: Shape) -> ForwardPlan {
    forward_plan(shape, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90)
}

fn plan(shape: Shape, wanted: Wanted, budget: usize) -> Option<VocabSlicePlan> {
    vocab_slice_plan(shape, DType::BF16, wanted, budget, COMPACT, REST, MIN_VOCAB_SLICE_HEAD_SHARE, &fwd)
}

/// The rest's vocabulary chunks, in order, cover [head, V) without a gap.
fn rest_rows(rest: &BackwardPlan) -> Vec<std::ops::Range<usize>> {
    (0..rest.vocab_chunks()).map(|i| rest.vocab_range(i)).collect()
}

#[test]
fn it_applies_to_compact_logits_with_dc_wanted_only() {
    assert!(vocab_slice_plan_applies(LLAMA, DType::BF16, BOTH, COMPACT));
    assert!(vocab_slice_plan_applies(LLAMA, DType::F16, Wanted { de: false, ..BOTH }, COMPACT));
    assert!(vocab_slice_plan_applies(LLAMA, DType::BF16, Wanted::ALL, COMPACT));
    assert!(!vocab_slice_plan_applies(LLAMA, DType::BF16, BOTH, ThreeProductLogits::F32), "f32 logits");
    assert!(!vocab_slice_plan_applies(LLAMA, DType::F32, BOTH, COMPACT), "f32 inputs");
    assert!(!vocab_slice_plan_applies(LLAMA, DType::BF16, Wanted { dc: false, ..BOTH }, COMPACT), "frozen classifier");
    assert!(
        !vocab_slice_plan_applies(Shape { v: MIN_VOCAB_SLICE_HEAD_ROWS, ..LLAMA }, DType::BF16, BOTH, COMPACT),
        "no rest"
    );
    assert_eq!(plan(LLAMA, Wanted { dc: false, ..BOTH }, 1 << 30), None);
    let cut = |head| vocab_slice_plan_with_head(LLAMA, DType::BF16, BOTH, head, COMPACT, REST, &fwd);
    for bad in [0, 1000, LLAMA.v.div_ceil(256) * 256] {
        assert!(cut(bad).is_err(), "head {bad}");
    }
    assert!(vocab_slice_plan_with_head(LLAMA, DType::BF16, BOTH, 4096, ThreeProductLogits::F32, REST, &fwd).is_err());
}

#[test]
fn the_budget_buys_the_largest_head_that_fits() {
    for shape in [LLAMA, GEMMA] {
        let mut last = 0;
        for mb in [1024usize, 1536, 2048] {
            let budget = mb << 20;
            let p = plan(shape, BOTH, budget).unwrap_or_else(|| panic!("{shape:?} {mb} MB"));
            assert!(
                p.workspace_bytes <= budget
                    && p.head_rows.is_multiple_of(256)
                    && p.head_rows >= MIN_VOCAB_SLICE_HEAD_ROWS
            );
            assert!(p.head_rows > last, "{mb} MB: head {} after {last}", p.head_rows);
            last = p.head_rows;
            // the next head does not fit
            let next =
                vocab_slice_plan_with_head(shape, DType::BF16, BOTH, p.head_rows + 256, COMPACT, REST, &fwd).unwrap();
            assert!(next.workspace_bytes > budget, "{mb} MB: head {} + 256 fits", p.head_rows);
            // q is most of what the budget holds past the rest's fixed part: within a tile of the
            // rows the bytes left over after the rest would give (2 bytes a logit and its maxima)
            let fixed = p.workspace_bytes - p.head.logits.bytes;
            let rows = (budget - fixed) / (2 * shape.n);
            assert!(rows - p.head_rows < 512, "{mb} MB: head {} of ~{rows} rows", p.head_rows);
        }
    }
    // Llama 3's rest alone (dE's accumulator: 134 MB; G of a chunk) leaves 256 MB no head worth it
    assert_eq!(plan(LLAMA, BOTH, 256 << 20), None);
    // heads below a sixteenth of the vocabulary (measured slower than the default or barely
    // faster): 384 MB buys Llama 3 7.4% of it (taken), Gemma 2 4.9% (not)
    assert!(plan(LLAMA, BOTH, 384 << 20).is_some());
    assert_eq!(plan(GEMMA, BOTH, 384 << 20), None);
    for shape in [LLAMA, GEMMA] {
        let rows = (shape.v as f64 * MIN_VOCAB_SLICE_HEAD_SHARE) as usize / 256 * 256;
        assert!((rows as f64) < shape.v as f64 * MIN_VOCAB_SLICE_HEAD_SHARE);
        let below = vocab_slice_plan_with_head(shape, DType::BF16, BOTH, rows, COMPACT, REST, &fwd);
        let bytes = below.unwrap().workspace_bytes;
        assert_eq!(plan(shape, BOTH, bytes), None, "{shape:?}: a head below V/16");
        // (a measurement may lower the share)
        let any = vocab_slice_plan(shape, DType::BF16, BOTH, bytes, COMPACT, REST, 0.0, &fwd).unwrap();
        assert_eq!(any.head_rows, rows, "{shape:?}");
        // one tile more is taken
        let above = vocab_slice_plan_with_head(shape, DType::BF16, BOTH, rows + 256, COMPACT, REST, &fwd);
        assert_eq!(plan(shape, BOTH, above.unwrap().workspace_bytes).unwrap().head_rows, rows + 256);
    }
    // a vocabulary too small for a head and a rest
    assert_eq!(plan(Shape::new(8192, 4096, 4000), BOTH, 4 << 30), None);
}

#[test]
fn every_region_lies_inside_the_workspace_and_apart() {
    let p = plan(LLAMA, Wanted::ALL, 1 << 30).unwrap();
    let mut regions = [
        p.head_ws,
        p.rest_forward_ws,
        p.rest_ws,
        p.partials,
        p.target_logit,
        p.finish_sums,
        p.slice_status,
        p.unit_grad,
    ];
    assert_eq!(
        (p.head_ws.bytes, p.rest_forward_ws.bytes, p.rest_ws.bytes),
        (p.head.workspace_bytes, p.rest_forward.workspace_bytes, p.rest.workspace_bytes)
    );
    regions.sort_by_key(|r| r.offset);
    for w in regions.windows(2) {
        assert!(w[0].offset + w[0].bytes <= w[1].offset, "{:?} overlaps {:?}", w[0], w[1]);
    }
    let last = regions.last().unwrap();
    assert!(last.offset + last.bytes <= p.workspace_bytes);
    assert_eq!(p.partials.bytes, 16 * LLAMA.n * (p.head.stats_splits + p.rest_forward.splits));
}

#[test]
fn the_head_is_one_compact_chunk_and_the_rest_covers_the_vocabulary_after_it() {
    let p = plan(LLAMA, BOTH, 1 << 30).unwrap();
    let h = &p.head;
    assert_eq!(
        (h.shape, h.token_chunk, h.dc_acc, h.storage),
        (Shape { v: p.head_rows, ..LLAMA }, LLAMA.n, None, COMPACT)
    );
    assert_eq!(h.m_ref, Some(super::super::MrefPlace::DeRows), "the head's maxima live in dE's rows");
    assert_eq!(p.rest_forward.shape, Shape { v: LLAMA.v - p.head_rows, ..LLAMA });
    let r = &p.rest;
    assert_eq!((r.shape, r.vocab_begin, r.token_chunk, r.family), (LLAMA, p.head_rows, LLAMA.n, Family::Sm90));
    assert!(!r.token_outer && r.de_pass.is_none());
    assert!(matches!(r.de_acc, DeAccumulator::Workspace(_)), "{:?}", r.de_acc);
    assert!(r.vocab_chunk <= REST.vocab_chunk.div_ceil(256) * 256 && r.vocab_chunk.is_multiple_of(256));
    let rows = rest_rows(r);
    assert_eq!(rows.first().unwrap().start, p.head_rows);
    assert_eq!(rows.last().unwrap().end, LLAMA.v);
    assert!(rows.windows(2).all(|w| w[0].end == w[1].start));
    assert_eq!(r.tail_chunks().len(), 0, "no tail pass");
    // its first chunks larger, their G in dC's unwritten rows past them (none before the head's end)
    let uniform = super::rest_backward_uniform(LLAMA, DType::BF16, BOTH, p.head_rows, REST);
    assert!(!r.dc_scratch.is_empty() && r.vocab_chunks() < uniform.vocab_chunks());
    crate::plan::backward::dc_scratch::tests::check(&uniform, r);
    let without = VocabSliceRest { dc_scratch: false, ..REST };
    let plain = vocab_slice_plan_with_head(LLAMA, DType::BF16, BOTH, p.head_rows, COMPACT, without, &fwd).unwrap();
    assert_eq!(plain.rest, uniform);
    // Gemma 2 at 1 GB: about half the chunks (the profile: 29 G launches without, the default 16)
    let gemma = plan(GEMMA, BOTH, 1 << 30).unwrap();
    let uniform = super::rest_backward_uniform(GEMMA, DType::BF16, BOTH, gemma.head_rows, REST);
    assert!(
        2 * gemma.rest.vocab_chunks() <= uniform.vocab_chunks() + 2,
        "{} of {}",
        gemma.rest.vocab_chunks(),
        uniform.vocab_chunks()
    );
    // without dE: the maxima in the workspace, no dE accumulator
    let dc_only = plan(LLAMA, Wanted { de: false, ..BOTH }, 1 << 30).unwrap();
    assert!(matches!(dc_only.head.m_ref, Some(super::super::MrefPlace::Workspace(_))));
    assert_eq!(dc_only.rest.de_acc, DeAccumulator::NotWanted);
}

#[test]
fn de_accumulator_in_dcs_head_rows_buys_a_larger_head() {
    let with = VocabSliceRest { de_in_dc: true, ..REST };
    let plan_with = |shape, budget| {
        vocab_slice_plan(shape, DType::BF16, BOTH, budget, COMPACT, with, MIN_VOCAB_SLICE_HEAD_SHARE, &fwd)
    };
    for shape in [LLAMA, GEMMA] {
        let (a, b) = (plan(shape, BOTH, 1 << 30).unwrap(), plan_with(shape, 1 << 30).unwrap());
        assert_eq!(b.rest.de_acc, DeAccumulator::DcHead);
        assert!(b.workspace_bytes <= 1 << 30);
        // N·D·4 bytes at 2 bytes a row and token: 2·D rows more, within two tiles
        let more = 2 * shape.d;
        assert!(b.head_rows + 512 >= a.head_rows + more, "{shape:?}: {} -> {}", a.head_rows, b.head_rows);
        assert!(4 * shape.n <= 2 * b.head_rows, "the accumulator inside dC's head rows");
        // the G of the rest's scratch chunks past the head, so past the accumulator
        for i in 0..b.rest.vocab_chunks() {
            if let super::super::GBuffer::Dc { byte_offset, .. } = b.rest.g_buffer(i) {
                assert!(byte_offset >= b.head_rows * shape.d * 2);
            }
        }
    }
    // a head too small to hold it: the workspace's accumulator
    let small = vocab_slice_plan_with_head(LLAMA, DType::BF16, BOTH, 4096, COMPACT, with, &fwd).unwrap();
    assert!(matches!(small.rest.de_acc, DeAccumulator::Workspace(_)));
    // no dE: none
    let dc_only =
        vocab_slice_plan_with_head(LLAMA, DType::BF16, Wanted { de: false, ..BOTH }, 65_536, COMPACT, with, &fwd);
    assert_eq!(dc_only.unwrap().rest.de_acc, DeAccumulator::NotWanted);
}
