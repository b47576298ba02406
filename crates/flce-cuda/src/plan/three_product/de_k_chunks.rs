//! dE of the three-product pass in vocabulary chunks summed in f32, rounded once.
//!
//! The pass forms dE of a token chunk as one product over the whole vocabulary (K = V). On the
//! H200 cuBLAS's sum over so long a K loses precision that an f32 sum keeps: at Gemma 2 (K 256,000,
//! f16, G = softmax − one-hot at AMP's 2¹⁶) one product's dE is 3.69e-4 from the f64 product of
//! the same G and C, its f64 value rounded once to f16 2.07e-4, and the same product over 8
//! K-chunks of 32,000 summed into an f32 buffer then rounded 2.11e-4; at Llama 3 (K 128,256)
//! 2.57e-4 against 2.08e-4 (journal v57; the output type and cuBLAS's
//! reduction mode change nothing: the loss is inside the product). In bf16 the same loss hides
//! under G's own rounding (fast's dE 2.101e-3 against the recomputing path's 2.087e-3 at Gemma
//! 2). The recomputing plans never see it: their dE sums vocabulary chunks in an f32 accumulator.
//!
//! [`with_de_k_chunks`] gives a plan dE as K-chunks of `k_chunk` columns into an f32 accumulator
//! of the token chunk's rows (cuBLAS's host β: 0, then 1), then α and one rounding into dE's
//! rows (`CudaLoss::round_scaled_into`). The accumulator (token_chunk·D·4 bytes: 75 MB at Gemma
//! 2, 128 MB at Llama 3) lives in dC's buffer after the per-token state where the plan keeps that
//! state there (one chunk: dC's product, which writes the buffer, runs after dE's rounding in
//! stream order), else at the workspace's end. Cost measured with torch's elementwise ops for the
//! rounding: +2.3% / +2.0% of the dE product at Gemma 2 / Llama 3 (8 / 4 chunks of ≤ 32,768).
//! On the H200 (journal v58, K-chunks of 32,768, two rounds)
//! f16 at AMP's 2¹⁶: dE 3.965e-4 → 2.626e-4 at Gemma 2, 2.999e-4 → 2.641e-4 at Llama 3 (the
//! recomputing path's 2.631e-4 / 2.623e-4), the step's time within the rounds' spread (means
//! 48.72 / 41.45 ms with them against 48.50 / 41.49 without); bf16: 2.101e-3 → 2.087e-3 at
//! Gemma 2 (46.76 against 46.41 ms), unchanged at Llama 3 (40.16 against 40.21 ms).
//! So [`default_de_k_chunk`]: on for f16, where it is 1.15–1.5× the error; off for bf16, where
//! G's own rounding hides it (`FLCE_THREE_PRODUCT_DE_K_CHUNK` sets either, crate::knobs). 16-bit inputs
//! only (f32 inputs' products do not run on the tensor cores).

use flce_core::{DType, Shape};

use super::super::align;
use super::{DeKChunks, Region, StatePlace, ThreeProductPlan};

/// K-chunks are multiples of this many columns: each chunk's G then starts on a 256-byte
/// boundary of its row (16-bit elements), as the dC tail's rows do (plan/three_product/).
pub const DE_K_CHUNK_ALIGN: usize = 128;

/// The K-chunk width the three-product plans use by default for `dtype` (module docs): 32,768
/// columns for f16, none (one product over V) for bf16 and f32.
pub fn default_de_k_chunk(dtype: DType) -> Option<usize> {
    (dtype == DType::F16).then_some(32_768)
}

/// `plan` with dE in K-chunks of `k_chunk` columns (rounded up to [`DE_K_CHUNK_ALIGN`]) summed in
/// an f32 accumulator (module docs): its place and bytes set, the workspace grown by them where
/// dC's buffer has no room. Unchanged where dE is not wanted, for f32 inputs, when one chunk
/// covers the vocabulary, or when it already has K-chunks.
pub fn with_de_k_chunks(mut plan: ThreeProductPlan, k_chunk: usize) -> ThreeProductPlan {
    let Shape { d, v, .. } = plan.shape;
    let k_chunk = k_chunk.max(1).div_ceil(DE_K_CHUNK_ALIGN) * DE_K_CHUNK_ALIGN;
    if !plan.wanted.de || plan.dtype == DType::F32 || k_chunk >= v || plan.de_k_chunks.is_some() {
        return plan;
    }
    let bytes = plan.token_chunk * d * 4;
    let dc_bytes = v * d * plan.dtype.size_in_bytes();
    // after the state's last region in dC (the status word's room), 255 bytes kept for the
    // boundary the state starts at
    let in_dc = match (plan.token_state, plan.status) {
        (StatePlace::DcBuffer, Some(status)) => {
            let offset = align(status.offset + status.bytes);
            (offset + bytes + 255 <= dc_bytes).then_some(Region { offset, bytes })
        }
        _ => None,
    };
    let (place, acc) = match in_dc {
        Some(r) => (StatePlace::DcBuffer, r),
        None => {
            let r = Region { offset: plan.workspace_bytes, bytes };
            plan.workspace_bytes = align(plan.workspace_bytes + bytes);
            (StatePlace::Workspace, r)
        }
    };
    plan.de_k_chunks = Some(DeKChunks { columns: k_chunk, place, acc });
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{three_product_plan, three_product_plan_with_chunk, ThreeProductLogits, Wanted};

    const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };
    const LLAMA: Shape = Shape { n: 8192, d: 4096, v: 128_256 };

    #[test]
    fn one_chunk_sums_de_in_dc_after_the_state_at_no_workspace() {
        for shape in [LLAMA, Shape::new(8192, 2304, 256_000), Shape::new(1024, 4096, 128_256)] {
            let p = three_product_plan(shape, DType::BF16, BOTH, usize::MAX, ThreeProductLogits::F32).unwrap();
            assert_eq!(p.token_state, StatePlace::DcBuffer);
            let k = with_de_k_chunks(p.clone(), 32_768);
            let DeKChunks { columns, place, acc: r } = k.de_k_chunks.expect("an accumulator");
            assert_eq!(columns, 32_768);
            assert_eq!(place, StatePlace::DcBuffer, "{shape:?}");
            assert_eq!(r.bytes, shape.n * shape.d * 4);
            let status = p.status.unwrap();
            assert!(r.offset >= status.offset + 4 && r.offset % 256 == 0, "after the state, aligned");
            assert!(r.offset + r.bytes + 255 <= shape.v * shape.d * 2, "{shape:?}: within dC");
            assert_eq!(k.workspace_bytes, p.workspace_bytes, "no workspace more");
        }
    }

    #[test]
    fn several_chunks_or_no_room_sum_de_at_the_workspace_end() {
        let p = three_product_plan_with_chunk(LLAMA, DType::BF16, BOTH, 2048, ThreeProductLogits::F32);
        assert_eq!(p.token_state, StatePlace::Workspace);
        let k = with_de_k_chunks(p.clone(), 1000);
        let DeKChunks { columns, place, acc: r } = k.de_k_chunks.unwrap();
        assert_eq!(columns, 1024, "rounded up to 128 columns");
        assert_eq!((place, r.offset, r.bytes), (StatePlace::Workspace, p.workspace_bytes, 2048 * 4096 * 4));
        assert_eq!(k.workspace_bytes, p.workspace_bytes + 2048 * 4096 * 4);
        // dC smaller than the state and an N × D f32 buffer: the workspace too
        let narrow = Shape::new(4096, 256, 2048);
        let p = three_product_plan(narrow, DType::BF16, BOTH, usize::MAX, ThreeProductLogits::F32).unwrap();
        let k = with_de_k_chunks(p, 256);
        assert_eq!(k.de_k_chunks.unwrap().place, StatePlace::Workspace);
    }

    #[test]
    fn unchanged_without_de_for_f32_for_one_k_chunk_and_twice() {
        let p = three_product_plan(LLAMA, DType::BF16, BOTH, usize::MAX, ThreeProductLogits::F32).unwrap();
        assert_eq!(with_de_k_chunks(p.clone(), LLAMA.v), p, "one chunk covers V");
        let no_de =
            three_product_plan(LLAMA, DType::BF16, Wanted { de: false, ..BOTH }, usize::MAX, ThreeProductLogits::F32)
                .unwrap();
        assert_eq!(with_de_k_chunks(no_de.clone(), 4096), no_de);
        let f32 = three_product_plan(LLAMA, DType::F32, BOTH, usize::MAX, ThreeProductLogits::F32).unwrap();
        assert_eq!(with_de_k_chunks(f32.clone(), 4096), f32);
        let once = with_de_k_chunks(p, 4096);
        assert_eq!(with_de_k_chunks(once.clone(), 1024), once);
    }

    #[test]
    fn f16_alone_takes_k_chunks_by_default() {
        assert_eq!(default_de_k_chunk(DType::F16), Some(32_768));
        assert_eq!(default_de_k_chunk(DType::BF16), None);
        assert_eq!(default_de_k_chunk(DType::F32), None);
        // the width is a multiple of the alignment: with_de_k_chunks keeps it as given
        let p = three_product_plan(LLAMA, DType::F16, BOTH, usize::MAX, ThreeProductLogits::F32).unwrap();
        let k = with_de_k_chunks(p, default_de_k_chunk(DType::F16).unwrap());
        assert_eq!(k.de_k_chunks.unwrap().columns, 32_768);
    }
}
