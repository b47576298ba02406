//! The planner's tails: where dE's f32 accumulator lives when not in the workspace (dC's tail,
//! its head in dE's own bytes, rows past dC's end in the workspace), how far the tail pass
//! reaches, and when the workspace accumulator's plan is taken instead.

use flce_core::{DType, Shape};

use crate::modes::{BackwardMode, Family};
use crate::plan::tests::{BOTH, GEMMA, LLAMA};
use crate::plan::*;

/// The default-mode bf16 plan of both gradients on 132 SMs of the sm90 family, within `budget`.
fn sm90_plan(shape: Shape, budget: Option<usize>) -> BackwardPlan {
    backward_plan(shape, DType::BF16, BOTH, budget, BackwardMode::FusedTiles, Family::Sm90, 132).unwrap()
}

/// The tail invariants: the accumulator lies inside dC, after every row of the main pass; the
/// tail pass starts on a chunk boundary and covers at most a third of the vocabulary.
pub(in crate::plan) fn check_tail(shape: Shape, dtype: DType, p: &BackwardPlan) -> DcTail {
    let t = check_any_tail(shape, dtype, p);
    assert_eq!(t.reach(shape), TailReach::Third);
    assert!(t.first_row > 0 && (shape.v - t.first_row) * 3 <= shape.v);
    assert_eq!(t.overflow_rows, 0);
    t
}

/// The invariants of every tail, whatever its reach: the head within dE's bytes, the middle
/// within dC's and after every row the main pass writes, the overflow (only where dC is full)
/// in its own workspace region.
pub(in crate::plan) fn check_any_tail(shape: Shape, dtype: DType, p: &BackwardPlan) -> DcTail {
    let t = p.dc_tail().expect("dE accumulator in dC's tail");
    let row_bytes = shape.d * dtype.size_in_bytes();
    let dc_bytes = shape.v * row_bytes;
    assert_eq!(t.byte_offset % ALIGN, 0);
    assert!(t.byte_offset + 4 * t.rows_in_dc(shape.n) * shape.d <= dc_bytes, "accumulator past dC's end");
    // the head rows (with their row of slack) within dE's own bytes
    assert!(4 * shape.d * (t.rows_in_de + 1) <= shape.n * row_bytes || t.rows_in_de == 0, "head past dE's end");
    assert!(t.rows_in_de <= de_head_rows(shape.n, dtype));
    assert!(t.first_row * row_bytes <= t.byte_offset, "accumulator overlaps a main-pass row");
    // the tail pass starts on a tile boundary; its chunks run from its last backwards: every one
    // within the chunk and on a tile boundary, the last within a tile of a whole chunk (where the
    // tail is that long: the tail pass recomputes the rest)
    let step = chunk_step(p.vocab_chunk);
    assert_eq!(t.first_row % step, 0);
    for c in p.tail_chunks() {
        let r = p.vocab_range(c);
        assert!(r.len() <= p.vocab_chunk && r.start.is_multiple_of(step), "{r:?}");
    }
    if let Some(last) = p.tail_chunks().last() {
        let whole = p.vocab_chunk.min(shape.v - t.first_row);
        assert!(p.vocab_range(last).len() + step > whole, "{:?}", p.vocab_range(last));
    }
    if t.overflow_rows > 0 {
        // only when dC is full: no room for one more row there
        assert_eq!((t.byte_offset, t.first_row), (0, 0));
        assert!(4 * (t.rows_in_dc(shape.n) + 1) * shape.d > dc_bytes);
        assert_eq!(t.overflow.bytes, 4 * t.overflow_rows * shape.d);
        assert!(t.overflow.offset + t.overflow.bytes <= p.workspace_bytes);
    } else {
        assert_eq!(t.overflow.bytes, 0);
    }
    assert_eq!(p.token_chunk, shape.n);
    assert_eq!(p.tail_chunks().end, p.vocab_chunks());
    assert_eq!(p.vocab_range(p.first_tail_chunk()).start, t.first_row);
    t
}

#[test]
fn de_accumulator_in_dc_tail_keeps_llama_and_gemma_within_ten_percent() {
    // dE's f32 accumulator (134 MB at Llama 3) alone is over 10% of Llama's gradients
    // (112 MB): in dC's tail it costs no workspace, and the chunks grow.
    for shape in [LLAMA, GEMMA, Shape::new(8192, 3584, 152_064), Shape::new(16_384, 4096, 128_256)] {
        for mode in [BackwardMode::CublasLogits, BackwardMode::FusedTiles] {
            let p = backward_plan(shape, DType::BF16, BOTH, None, mode, Family::Sm80, 132).unwrap();
            let grads = gradient_bytes(shape, DType::BF16, BOTH);
            assert!(p.workspace_bytes <= grads / 10, "{shape:?} {mode:?}: {} > {}", p.workspace_bytes, grads / 10);
            // 2048+ rows at 8k tokens, half that at 16k
            assert!(p.vocab_chunk >= 2048 * 8192 / shape.n, "{shape:?} {mode:?}: vocab chunk {}", p.vocab_chunk);
            check_tail(shape, DType::BF16, &p);
        }
    }
}

#[test]
fn de_accumulator_stays_in_the_workspace_where_no_tail_applies() {
    let no_tail = |shape: Shape, dtype: DType, wanted: Wanted| {
        let p = backward_plan(shape, dtype, wanted, None, BackwardMode::CublasLogits, Family::Sm80, 132).unwrap();
        assert!(p.dc_tail().is_none(), "{shape:?} {dtype:?} {wanted:?}");
        assert!(p.tail_chunks().is_empty());
        p
    };
    // one chunk covers the vocabulary and the accumulator fits the tenth
    no_tail(Shape::new(1, 64, 300), DType::BF16, BOTH);
    // f32 accumulates dE in place; dC not wanted
    assert_eq!(no_tail(GEMMA, DType::F32, BOTH).de_acc, DeAccumulator::InPlace);
    let p = no_tail(GEMMA, DType::BF16, Wanted { de: true, dc: false, dbias: false });
    assert_eq!(p.dc_acc, DcAccumulator::NotWanted);
}

fn whole_overflow(shape: Shape) -> usize {
    super::dc_tail::whole_tail_overflow_rows(shape, DType::BF16, BOTH)
}

#[test]
fn past_a_third_of_the_vocabulary_the_tail_reaches_further_within_ten_percent() {
    // N above ~V/3: dE's half of the accumulator leaves more than a third of dC to the rest, and
    // the workspace accumulator (N·D·4 bytes) is 57-114% of the gradient bytes: the default
    // plan's tail pass recomputes more of the vocabulary instead (Llama 3 at 131,072 tokens: all
    // of it, 23 MB of the accumulator past dC's end in the workspace)
    for (shape, overflows) in [
        (Shape::new(43_008, 4096, 128_256), false),
        (Shape::new(65_536, 4096, 128_256), false),
        (Shape::new(131_072, 4096, 128_256), true),
        (Shape::new(65_536, 3584, 152_064), false),
        (Shape::new(131_072, 3584, 152_064), false),
        (Shape::new(131_072, 2304, 256_000), false),
        // the GPU tests' cases (crates/flce-cuda/tests/gpu/cases.rs)
        (Shape::new(3000, 64, 4000), false),
        (Shape::new(5000, 64, 3000), true),
        (Shape::new(255, 507, 123), true),
    ] {
        for family in [Family::Sm80, Family::Sm90] {
            for mode in [BackwardMode::CublasLogits, BackwardMode::FusedTiles] {
                let ctx = format!("{shape:?} {family:?} {mode:?}");
                let p = backward_plan(shape, DType::BF16, BOTH, None, mode, family, 132).unwrap();
                let grads = gradient_bytes(shape, DType::BF16, BOTH);
                // within 10%, or the good chunk's workspace where that is more: the small cases'
                // tiny gradients, cuBLAS logits at 64k+ (512 rows of f32 logits for all N tokens), and
                // the fused tiles' 1024 rows at 128k with Llama 3's overflow (268 + 23 MB, 13.8%)
                let limit = default_backward_budget(shape, DType::BF16, BOTH, mode);
                let rows = if mode == BackwardMode::FusedTiles { 1024 } else { 512 };
                let good = rows * shape.n * if mode == BackwardMode::FusedTiles { 2 } else { 6 };
                let overflow = 4 * whole_overflow(shape) * shape.d;
                assert!(limit <= (grads / 10).max(good + overflow + (4 << 20)), "{ctx}: default budget {limit}");
                assert!(p.workspace_bytes <= limit, "{ctx}: {} > {limit}", p.workspace_bytes);
                let t = check_any_tail(shape, DType::BF16, &p);
                assert_eq!((t.reach(shape), t.overflow_rows > 0), (TailReach::Whole, overflows), "{ctx}: {t:?}");
                assert_eq!(t.rows_in_de, de_head_rows(shape.n, DType::BF16), "{ctx}");
                assert_eq!(with_dc_scratch(p.clone()).dc_tail(), Some(t), "{ctx}");
            }
        }
    }
    // Llama 3 at 64k: about half the vocabulary recomputed (the accumulator's rest is half of dC)
    let p = sm90_plan(Shape::new(65_536, 4096, 128_256), None);
    let t = p.dc_tail().unwrap();
    assert!((0.45..0.6).contains(&(1.0 - t.first_row as f64 / 128_256.0)), "{t:?}");
    // a budget that holds the accumulator still gets the workspace plan (no tail)
    let roomy = sm90_plan(Shape::new(65_536, 4096, 128_256), Some(1400 << 20));
    assert!(matches!(roomy.de_acc, DeAccumulator::Workspace(_)), "{roomy:?}");
}

#[test]
fn de_accumulator_head_in_de_keeps_long_sequences_within_ten_percent() {
    // Llama 3 at 21k-39k tokens (Qwen 2.5 at 32k, D 2048 at 24k, Gemma 2 at 64k): all N rows of the accumulator
    // would make a tail over a third of dC; with the first half in dE's own buffer they do not
    for shape in [
        Shape::new(21_504, 4096, 128_256),
        Shape::new(32_768, 4096, 128_256),
        Shape::new(38_912, 4096, 128_256),
        Shape::new(32_768, 3584, 152_064),
        Shape::new(24_576, 2048, 128_256),
        Shape::new(65_536, 2304, 256_000),
        // the GPU tests' case (crates/flce-cuda/tests/gpu/cases.rs)
        Shape::new(3000, 64, 12_000),
    ] {
        for family in [Family::Sm80, Family::Sm90] {
            let p = backward_plan(shape, DType::BF16, BOTH, None, BackwardMode::FusedTiles, family, 132).unwrap();
            let grads = gradient_bytes(shape, DType::BF16, BOTH);
            // (the small case's workspace is the good chunk's, over 10% of its tiny gradients)
            let limit = if shape.n < 8192 { p.workspace_bytes } else { grads / 10 };
            assert!(p.workspace_bytes <= limit, "{shape:?}: {} > {}", p.workspace_bytes, grads / 10);
            let t = check_tail(shape, DType::BF16, &p);
            assert_eq!(t.rows_in_de, de_head_rows(shape.n, DType::BF16), "{shape:?}");
            let p = with_dc_scratch(p);
            assert_eq!(p.dc_tail(), Some(t), "{shape:?}");
        }
    }
    // at 8k tokens all N rows would fit the third too (FLCE_DE_HEAD=0 puts them there): the
    // head halves the tail at the same chunks and workspace
    let p = sm90_plan(LLAMA, None);
    assert_eq!(check_tail(LLAMA, DType::BF16, &p).rows_in_de, 4095);
    let all_in_dc = without_de_head(p.clone());
    let t = check_tail(LLAMA, DType::BF16, &all_in_dc);
    assert_eq!((t.rows_in_de, all_in_dc.workspace_bytes, all_in_dc.vocab_chunk), (0, p.workspace_bytes, p.vocab_chunk));
    assert!(t.first_row < p.dc_tail().unwrap().first_row, "a longer tail pass");
    // where all N rows would not fit the third, the plan keeps its head
    let long = sm90_plan(Shape::new(32_768, 4096, 128_256), None);
    assert_eq!(without_de_head(long.clone()), long);
    assert_eq!(de_head_rows(3, DType::BF16), 0);
    assert_eq!(de_head_rows(4, DType::F16), 1);
}

#[test]
fn the_gpu_tests_odd_shapes_take_the_tail_plan() {
    // crates/flce-cuda/tests/gpu/ runs both kernel families on these shapes in bf16 and f16
    // (at N = 1 one chunk covers V, no tail: see below)
    let cases = [
        (Shape::new(129, 200, 5003), BackwardMode::CublasLogits),
        (Shape::new(129, 200, 5003), BackwardMode::FusedTiles),
    ];
    for (shape, mode) in cases {
        for dtype in [DType::BF16, DType::F16] {
            for dbias in [false, true] {
                let p = backward_plan(shape, dtype, Wanted { dbias, ..BOTH }, None, mode, Family::Sm80, 132).unwrap();
                check_tail(shape, dtype, &p);
                assert!(!p.tail_chunks().is_empty(), "a tail pass exists");
            }
        }
    } // N = 1: the workspace accumulator (4·D bytes) with one chunk over all of V costs less, by the
      // model, than a tail plan's two chunks
    let one = Shape::new(1, 64, 1000);
    let p = backward_plan(one, DType::BF16, BOTH, None, BackwardMode::CublasLogits, Family::Sm80, 132).unwrap();
    assert!(matches!(p.de_acc, DeAccumulator::Workspace(_)) && p.vocab_chunks() == 1, "{p:?}");
}

#[test]
fn a_budget_that_holds_the_accumulator_takes_the_faster_plan_at_long_sequences() {
    // Llama 3 at 32k tokens: the default 10% budget has only the tail plan (26% of the vocabulary
    // recomputed); 640 MB holds the 537 MB workspace accumulator with no tail, which the model
    // prefers (measured: 224 ms against 243, docs/journal.md v17)
    let long = Shape::new(32_768, 4096, 128_256);
    let plan = |budget| sm90_plan(long, budget);
    assert!(plan(None).dc_tail().is_some());
    // (577 MiB: b4843ca's default plan there, vocabulary chunks of 1024 rows)
    let old = plan(Some(577 << 20));
    assert!(matches!(old.de_acc, DeAccumulator::Workspace(_)) && old.vocab_chunk == 1024, "{old:?}");
    let roomy = plan(Some(640 << 20));
    assert!(matches!(roomy.de_acc, DeAccumulator::Workspace(_)) && roomy.tail_chunks().is_empty(), "{roomy:?}");
    // at 8k the tail plan stays the faster one at any budget
    for budget in [None, Some(640 << 20), Some(4 << 30)] {
        assert!(sm90_plan(LLAMA, budget).dc_tail().is_some(), "{budget:?}");
    }
}

#[test]
fn a_tail_within_one_chunk_starts_as_early_as_a_third_allows() {
    // Llama 3 at 1k tokens: dE's accumulator (8 MB past dE's own half) needs only dC's last ~1k
    // rows and the chunk is 50,688 rows: the tail is one chunk from the first tile past two thirds
    // of V, nothing recomputed, and the main pass one chunk (a tail from the accumulator's first
    // tile, 126,976, would leave the main pass two)
    let p = with_dc_scratch(sm90_plan(Shape::new(1024, 4096, 128_256), None));
    let t = check_tail(p.shape, DType::BF16, &p);
    assert_eq!((t.first_row, p.vocab_chunk), (85_504, 50_688));
    assert_eq!((p.vocab_chunks(), p.tail_chunks()), (2, 1..2));
    // a longer accumulator (Llama 3 at 8k: 8,194 rows past a 6,656-row chunk) starts the tail at
    // its first tile, so the tail pass recomputes only what the last chunk does not hold
    let p = sm90_plan(LLAMA, None);
    let t = check_tail(LLAMA, DType::BF16, &p);
    assert_eq!(t.first_row, t.byte_offset / (LLAMA.d * 2) / 256 * 256);
}
