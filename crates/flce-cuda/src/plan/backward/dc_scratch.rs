//! Larger backward chunks at the same memory: G of the first vocabulary chunks in dC's own
//! unwritten rows.
//!
//! The backward writes dC chunk by chunk, from row 0 up; until a row's chunk comes, its bytes in
//! the caller's dC buffer are free. So chunk [a, b)'s G (N × (b − a) elements) can sit in dC's
//! bytes past row b, if it fits there before dE's accumulator (the tail, [`super::DcTail`]) or
//! dC's end: the dC product of [a, b) writes rows [a, b) and reads G past them; the next chunk's
//! G is written only after both products of this one (stream order); every row past b is written
//! later by its own chunk's product. The room shrinks as the chunks advance: at Llama 3 (N/D = 2)
//! a chunk ending at row b may take (L − b)/3 rows, L the accumulator's first row; at D 2048 and
//! 16k tokens (N/D = 8) (L − b)/9. When that room is no longer more than the workspace's chunk,
//! the plan's own `vocab_chunk`-row chunks take over, G in the workspace, tail pass unchanged.
//!
//! Why: a chunk costs a read and a write of dE's N·D f32 accumulator (beta = 1) and three
//! launches with their tail waves, and the chunked cuBLAS products ran at 1.15× their full-size
//! rate (docs/journal.md v11, v15). At the default budget: Llama 3 20 chunks → 10, Gemma 2
//! 36 → 15, the train step's loss shape (16384, 2048, 128256) 72 → 36 (see the tests).
//!
//! Only where G would go to the workspace as the plan's only buffer of its kind: one token chunk,
//! dC wanted, no f32 logits region (fused families) and no db column sums (both sized by the
//! workspace chunk's pitch). A plan whose chunks start at [`BackwardPlan::vocab_begin`] (the
//! vocabulary-slice plan's rest) covers its rows from there: the rows before it are the head's,
//! written before this plan's first product.

use flce_core::Shape;

use super::{align, BackwardPlan};

/// `plan` with its leading vocabulary chunks' G in dC's unwritten rows, where that makes fewer
/// chunks (the plan unchanged otherwise). The chunk sizes are multiples of the family's tile
/// width; the `vocab_chunk`-row chunks after them, the tail's first row and the workspace are
/// unchanged.
pub fn with_dc_scratch(mut plan: BackwardPlan) -> BackwardPlan {
    let Shape { n, d, v } = plan.shape;
    let usable = plan.wanted.dc
        && plan.token_chunk >= n
        && plan.logits.is_none()
        && plan.db_partial.is_none()
        && plan.dc_scratch.is_empty();
    if !usable {
        return plan;
    }
    let s = plan.dtype.size_in_bytes();
    let vc = plan.vocab_chunk;
    let step = super::chunk_step(vc);
    let tail = plan.dc_tail();
    // G may run to the accumulator's first byte, or dC's end
    let limit = tail.map_or(v * d * s, |t| t.byte_offset);
    // the most rows (a multiple of `step`) of a chunk ending at row b whose G fits past b
    let room = |b: usize| limit.saturating_sub(align(b * d * s)) / (n * s) / step * step;
    // the chunks covering [begin, end), each as large as its end allows (from the end backwards:
    // the fewest chunks), or None if some end has no room
    let begin = plan.vocab_begin;
    let cover = |end: usize| -> Option<Vec<usize>> {
        let mut ends = vec![];
        let mut b = end;
        while b > begin {
            let r = room(b);
            if r <= vc {
                return None;
            }
            ends.push(b);
            b = b.saturating_sub(r).max(begin);
        }
        ends.reverse();
        Some(ends)
    };
    // The scratch chunks end where the uniform chunks start: `vocab_chunk`-row steps back from
    // the tail's first row (or from V, rounded down to the tile width); the best such point is
    // the one with the fewest chunks in all.
    let anchor = tail.map_or(v / step * step, |t| t.first_row);
    let mut best: Option<(usize, Vec<usize>)> = None;
    for m in 0..=anchor / vc {
        let end = anchor - m * vc;
        if end <= begin {
            break;
        }
        let Some(ends) = cover(end) else { continue };
        // (with a tail: m chunks before it and the tail's own, as the plan has them)
        let uniform = match tail {
            Some(t) => m + (v - t.first_row).div_ceil(vc),
            None => (v - end).div_ceil(vc),
        };
        let chunks = ends.len() + uniform;
        if best.as_ref().is_none_or(|(c, _)| chunks < *c) {
            best = Some((chunks, ends));
        }
    }
    if let Some((chunks, ends)) = best {
        if chunks < plan.vocab_chunks() {
            plan.dc_scratch = ends;
        }
    }
    plan
}

#[cfg(test)]
pub(in crate::plan) mod tests {
    use flce_core::DType;

    use super::*;
    use crate::geometry::TILE_N;
    use crate::modes::{BackwardMode, Family};
    use crate::plan::{backward_plan, GBuffer, Wanted};

    const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };

    fn sm90(shape: Shape, dtype: DType, wanted: Wanted, budget: Option<usize>) -> Option<BackwardPlan> {
        backward_plan(shape, dtype, wanted, budget, BackwardMode::FusedTiles, Family::Sm90, 132).ok()
    }

    /// Every row from the plan's first (`vocab_begin`) in one chunk, in order (each scratch chunk
    /// but the first larger than the workspace's); every scratch G past its chunk's rows and
    /// before the accumulator (or dC's end); the tail's first row a chunk boundary with the same
    /// tail; the workspace and the uniform chunks as before.
    pub(in crate::plan) fn check(before: &BackwardPlan, after: &BackwardPlan) {
        let Shape { n, d, v } = after.shape;
        let s = after.dtype.size_in_bytes();
        let ctx = format!("{:?} {:?} {:?}", after.shape, after.dtype, after.wanted);
        assert_eq!(after.workspace_bytes, before.workspace_bytes, "{ctx}");
        assert_eq!(
            (after.vocab_chunk, after.ldg, after.de_acc),
            (before.vocab_chunk, before.ldg, before.de_acc),
            "{ctx}"
        );
        let mut next = after.vocab_begin;
        for i in 0..after.vocab_chunks() {
            let r = after.vocab_range(i);
            assert!(r.start == next && r.end > r.start && r.end <= v, "{ctx}: chunk {i} {r:?}");
            next = r.end;
            match after.g_buffer(i) {
                GBuffer::Workspace => {
                    assert!(r.len() <= after.vocab_chunk && after.g_ldg(i) == after.ldg, "{ctx}: chunk {i}")
                }
                GBuffer::Dc { byte_offset, ldg } => {
                    // (the first may be smaller: the chunks are as large as their ends allow)
                    assert!(i == 0 || r.len() > after.vocab_chunk, "{ctx}: chunk {i} {r:?}");
                    assert!(ldg >= r.len() && ldg % TILE_N == 0, "{ctx}: chunk {i}");
                    assert!(byte_offset >= r.end * d * s && byte_offset % 256 == 0, "{ctx}: G over its own rows");
                    let limit = after.dc_tail().map_or(v * d * s, |t| t.byte_offset);
                    assert!(byte_offset + n * ldg * s <= limit, "{ctx}: chunk {i}'s G past {limit}");
                }
            }
        }
        assert_eq!(next, v, "{ctx}");
        assert!(after.vocab_chunks() <= before.vocab_chunks(), "{ctx}");
        if let Some(t) = after.dc_tail() {
            assert_eq!(Some(t), before.dc_tail(), "{ctx}");
            assert_eq!(after.vocab_range(after.first_tail_chunk()).start, t.first_row, "{ctx}");
            assert_eq!(after.tail_chunks().len(), before.tail_chunks().len(), "{ctx}");
            // the last chunk (its G kept for the tail pass) is a workspace chunk
            assert_eq!(after.g_buffer(after.vocab_chunks() - 1), GBuffer::Workspace, "{ctx}");
        }
    }

    #[test]
    fn model_shapes_take_fewer_chunks() {
        let llama = Shape::new(8192, 4096, 128_256);
        let train_step = Shape::new(16_384, 2048, 128_256);
        let gemma = Shape::new(8192, 2304, 256_000);
        // (without scratch, the train step's and Gemma 2's plans end their main pass in a short
        // chunk before the tail, which starts on a tile boundary: a chunk more than a
        // chunk-aligned tail would have)
        for (shape, before_chunks, after_chunks) in [(llama, 20, 10), (train_step, 73, 36), (gemma, 37, 15)] {
            let before = sm90(shape, DType::BF16, BOTH, None).unwrap();
            let after = with_dc_scratch(before.clone());
            check(&before, &after);
            assert_eq!((before.vocab_chunks(), after.vocab_chunks()), (before_chunks, after_chunks), "{shape:?}");
        }
    }

    #[test]
    fn plans_that_cannot_use_dc_are_unchanged() {
        let shape = Shape::new(8192, 4096, 128_256);
        for wanted in [Wanted::ALL, Wanted { de: true, dc: false, dbias: false }] {
            let p = sm90(shape, DType::BF16, wanted, None).unwrap();
            assert_eq!(with_dc_scratch(p.clone()), p, "{wanted:?}");
        }
        // f32 logits (cuBLAS family) and token chunks
        let cublas =
            backward_plan(shape, DType::BF16, BOTH, None, BackwardMode::CublasLogits, Family::Sm90, 132).unwrap();
        assert_eq!(with_dc_scratch(cublas.clone()), cublas);
        let small = Shape::new(700, 96, 3000);
        let chunked = sm90(small, DType::BF16, BOTH, Some(600_000)).unwrap();
        assert!(chunked.token_chunk < small.n);
        assert_eq!(with_dc_scratch(chunked.clone()), chunked);
    }

    #[test]
    fn every_plan_keeps_its_invariants() {
        // pseudo-random shapes, dtypes, gradients and budgets (a fixed LCG: reproducible)
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: usize| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % m
        };
        let mut used = 0;
        for _ in 0..400 {
            let shape = Shape::new(1 + next(40_000), 8 * (1 + next(1000)), 1 + next(300_000));
            let dtype = [DType::BF16, DType::F16, DType::F32][next(3)];
            let wanted = [BOTH, Wanted { de: false, dc: true, dbias: false }, Wanted::ALL][next(3)];
            let budget = [None, Some(32 << 20), Some(256 << 20), Some(2 << 30)][next(4)];
            let family = [Family::Sm80, Family::Sm90][next(2)];
            let Ok(before) = backward_plan(shape, dtype, wanted, budget, BackwardMode::FusedTiles, family, 132) else {
                continue;
            };
            let after = with_dc_scratch(before.clone());
            check(&before, &after);
            used += !after.dc_scratch.is_empty() as usize;
        }
        assert!(used > 50, "only {used} plans used dC's rows");
    }
}
