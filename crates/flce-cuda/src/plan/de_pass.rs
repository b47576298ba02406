//! dE in a pass of its own: a backward in two passes over one workspace, for long sequences.
//!
//! The default backward runs the vocabulary chunks outer, so that each dC chunk is finished in one
//! product and rounded once; dE then accumulates in f32 across every chunk, N·D·4 bytes. Past
//! N ≈ V/3 that accumulator outgrows what dE's and dC's own unwritten bytes can hold, and the
//! plan ([`super::DcTail`], [`super::TailReach::Whole`]) recomputes more of the vocabulary in a
//! tail pass — all of it past N ≈ V, plus the accumulator read and written by every chunk (4.3 GB
//! a chunk at Llama 3 and 128k tokens: perf-notes v18), and still rows in the workspace (13.8%
//! of the gradient bytes there).
//!
//! Split instead: a vocabulary-outer pass computes dC (and db) alone — no dE accumulator at all —
//! then a token-outer pass ([`super::token_outer`]) computes dE alone, each token chunk's rows
//! finished over the vocabulary in an accumulator of that chunk and rounded once. Each pass
//! recomputes the logits once: five products in all (forward, two recomputes, dE, dC) against
//! the default's four plus its tail, within the budget's workspace, as exact as either (every sum
//! in f32, rounded once). The two plans lay out the same prologue (targets, token scales,
//! scalars, status) at the same offsets, so one prologue serves both passes.
//!
//! A measurement knob for now (`FLCE_BWD_DE_PASS=1`, [`crate::geometry::de_pass_enabled`]); its
//! model (docs/perf-notes.md v26): at Llama 3 and 128k tokens 0.91–0.97× the default's 1,152 ms
//! forward+backward (s20), ≈ 1.03× at 65k (where the tail is half the vocabulary), slower below.

use flce_core::{DType, Error, Result, Shape};

use super::{BackwardPlan, Wanted};

/// Whether a call's backward can run as two passes: dE and dC both wanted, 16-bit inputs (f32
/// inputs accumulate dE in dE itself and need no accumulator of their own).
pub fn de_pass_applies(dtype: DType, wanted: Wanted) -> bool {
    wanted.de && wanted.dc && dtype != DType::F32
}

/// The gradients of the first pass (dC and db) and of the second (dE), for a call wanting `wanted`.
pub fn de_pass_wants(wanted: Wanted) -> (Wanted, Wanted) {
    (Wanted { de: false, ..wanted }, Wanted { de: true, dc: false, dbias: false })
}

/// The two-pass plan of a call, each pass planned by `plan_pass` (its gradients, its budget)
/// within `budget`, or by default within the call's [`super::gradient_tenth`] — a pass's own
/// default budget (`None`) where the tenth holds no plan of it (small shapes) — and joined by
/// [`with_de_pass`].
pub fn de_pass_plan(
    shape: Shape,
    dtype: DType,
    wanted: Wanted,
    budget: Option<usize>,
    plan_pass: impl Fn(Wanted, Option<usize>) -> Result<BackwardPlan>,
) -> Result<BackwardPlan> {
    let pass = |w: Wanted| match budget {
        Some(_) => plan_pass(w, budget),
        None => plan_pass(w, Some(super::gradient_tenth(shape, dtype, wanted))).or_else(|_| plan_pass(w, None)),
    };
    let (first, second) = de_pass_wants(wanted);
    with_de_pass(pass(first)?, pass(second)?, wanted)
}

/// The two-pass plan of a call wanting `wanted`: `dc_plan` (made for [`de_pass_wants`]'s first
/// gradients) with `de_plan` (its second, token chunks outer) as its `de_pass`, the workspace
/// the larger of the two. An error when the plans were not made for one call (shape, dtype,
/// family) and these gradients, or their prologue regions differ (never, from
/// [`super::backward_plan`] with the same shape, dtype and mode).
pub fn with_de_pass(dc_plan: BackwardPlan, de_plan: BackwardPlan, wanted: Wanted) -> Result<BackwardPlan> {
    let (first, second) = de_pass_wants(wanted);
    let prologue = |p: &BackwardPlan| (p.targets, p.token_scale, p.scalars, p.status);
    let call = |p: &BackwardPlan| (p.shape, p.dtype, p.family);
    let reason = if (dc_plan.wanted, de_plan.wanted) != (first, second) {
        Some("the two passes' plans were made for other gradients")
    } else if !de_plan.token_outer || de_plan.de_pass.is_some() || dc_plan.de_pass.is_some() {
        Some("the second pass must be a one-pass token-outer plan")
    } else if call(&dc_plan) != call(&de_plan) {
        Some("the two passes' plans were made for different calls")
    } else if prologue(&dc_plan) != prologue(&de_plan) {
        Some("the two passes' plans lay out their prologue differently")
    } else {
        None
    };
    if let Some(reason) = reason {
        let value = format!("{:?} then {:?}", dc_plan.wanted, de_plan.wanted);
        return Err(Error::InvalidOption { name: "plan", value, reason });
    }
    let workspace_bytes = dc_plan.workspace_bytes.max(de_plan.workspace_bytes);
    Ok(BackwardPlan { wanted, workspace_bytes, de_pass: Some(Box::new(de_plan)), ..dc_plan })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{BackwardMode, Family};
    use crate::plan::{backward_plan, gradient_bytes, gradient_tenth, DcAccumulator, DeAccumulator};

    const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };

    fn two_pass(shape: Shape, wanted: Wanted, mode: BackwardMode) -> BackwardPlan {
        // as CudaLoss::backward_plan plans it at the default budget
        let plan_pass = |w, b| backward_plan(shape, DType::BF16, w, b, mode, Family::Sm90, 132);
        de_pass_plan(shape, DType::BF16, wanted, None, plan_pass).unwrap()
    }

    #[test]
    fn two_passes_keep_llama3_at_128k_tokens_within_a_tenth_of_the_gradients() {
        let shape = Shape::new(131_072, 4096, 128_256);
        let tenth = gradient_bytes(shape, DType::BF16, BOTH) / 10;
        let one = backward_plan(shape, DType::BF16, BOTH, None, BackwardMode::FusedTiles, Family::Sm90, 132).unwrap();
        // the one-pass default: a tail over the whole vocabulary and rows in the workspace (13.8%)
        assert!(one.dc_tail().is_some_and(|t| t.overflow_rows > 0), "{:?}", one.de_acc);
        assert!(one.workspace_bytes > tenth);
        for mode in [BackwardMode::FusedTiles, BackwardMode::CublasLogits] {
            let p = two_pass(shape, BOTH, mode);
            assert!(p.workspace_bytes <= tenth, "{mode:?}: {} > {tenth}", p.workspace_bytes);
            // first pass: dC alone, no dE accumulator; an f32 chunk accumulator where its tokens
            // come in chunks (at 128k the budget holds no 1024-row chunk of all N tokens' G)
            assert_eq!((p.wanted, p.de_acc, p.token_outer), (BOTH, DeAccumulator::NotWanted, false));
            assert!(p.dc_tail().is_none() && p.tail_chunks().is_empty());
            assert_eq!(p.token_chunk < shape.n, matches!(p.dc_acc, DcAccumulator::Workspace(_)), "{mode:?}");
            // second pass: dE alone, token chunks outer, an accumulator of one token chunk
            let de = p.de_pass.as_deref().unwrap();
            assert!(de.token_outer && de.wanted == Wanted { de: true, dc: false, dbias: false });
            assert!(matches!(de.de_acc, DeAccumulator::Workspace(r) if r.bytes == 4 * de.token_chunk * shape.d));
            assert!(de.workspace_bytes <= p.workspace_bytes && de.de_pass.is_none());
        }
    }

    #[test]
    fn two_passes_plan_the_model_shapes_at_every_length_within_the_tenth() {
        // (Gemma 2, Llama 3, Qwen 2.5) × 1k–128k tokens, both fused families' layouts and cuBLAS
        // logits: where the tenth holds the passes they stay within it; where it does not
        // (short sequences, whose tenth is below a good chunk) they take no more than the
        // one-pass default
        for (d, v) in [(2304, 256_000), (4096, 128_256), (3584, 152_064)] {
            for n in [1024, 4096, 8192, 16_384, 32_768, 65_536, 131_072] {
                let shape = Shape::new(n, d, v);
                let tenth = gradient_tenth(shape, DType::BF16, BOTH);
                for mode in [BackwardMode::FusedTiles, BackwardMode::CublasLogits] {
                    let p = two_pass(shape, BOTH, mode);
                    let one = backward_plan(shape, DType::BF16, BOTH, None, mode, Family::Sm90, 132).unwrap();
                    let at = format!("{shape:?} {mode:?}");
                    assert!(p.workspace_bytes <= tenth.max(one.workspace_bytes), "{at}: {}", p.workspace_bytes);
                    assert!(n < 65_536 || p.workspace_bytes <= tenth, "{at}: {} > {tenth}", p.workspace_bytes);
                    assert!(p.de_pass.as_deref().is_some_and(|de| de.token_outer), "{at}");
                }
            }
        }
    }

    /// The GPU tests' "de-pass cut" case: a budget that cuts both passes into token chunks.
    const CUT_SHAPE: Shape = Shape { n: 3000, d: 64, v: 12_000 };
    const CUT_BUDGET: usize = 600_000;

    #[test]
    fn a_small_budget_cuts_both_passes_into_token_chunks() {
        for mode in [BackwardMode::FusedTiles, BackwardMode::CublasLogits] {
            let plan_pass = |w, b| backward_plan(CUT_SHAPE, DType::BF16, w, b, mode, Family::Sm90, 132);
            let p = de_pass_plan(CUT_SHAPE, DType::BF16, BOTH, Some(CUT_BUDGET), plan_pass).unwrap();
            assert!(p.workspace_bytes <= CUT_BUDGET);
            assert!(p.token_chunks() > 1 && matches!(p.dc_acc, DcAccumulator::Workspace(_)), "{mode:?}: {p:?}");
            let de = p.de_pass.as_deref().unwrap();
            assert!(de.token_chunks() > 1 && de.vocab_chunks() > 1, "{mode:?}: {de:?}");
        }
    }

    #[test]
    fn the_bias_gradient_goes_with_dc_in_the_first_pass() {
        let wanted = Wanted { dbias: true, ..BOTH };
        let p = two_pass(Shape::new(3000, 64, 1000), wanted, BackwardMode::FusedTiles);
        assert!(p.db_acc.is_some() && p.de_pass.as_deref().unwrap().db_acc.is_none());
        assert_eq!(de_pass_wants(wanted).1, Wanted { de: true, dc: false, dbias: false });
    }

    #[test]
    fn two_passes_apply_to_16_bit_calls_wanting_both_gradients() {
        assert!(de_pass_applies(DType::BF16, BOTH) && de_pass_applies(DType::F16, Wanted::ALL));
        assert!(!de_pass_applies(DType::F32, BOTH), "f32 accumulates dE in dE itself");
        assert!(!de_pass_applies(DType::BF16, Wanted { dc: false, ..BOTH }), "dE alone is token-outer already");
        assert!(!de_pass_applies(DType::BF16, Wanted { de: false, ..BOTH }));
    }

    #[test]
    fn the_passes_must_be_planned_for_their_gradients_and_one_call() {
        let shape = Shape::new(2048, 64, 1000);
        let plan = |s, w| backward_plan(s, DType::BF16, w, None, BackwardMode::FusedTiles, Family::Sm90, 132).unwrap();
        let (first, second) = de_pass_wants(BOTH);
        let err = with_de_pass(plan(shape, BOTH), plan(shape, second), BOTH).unwrap_err().to_string();
        assert!(err.contains("other gradients"), "{err}");
        let other = Shape::new(1024, 64, 1000);
        let err = with_de_pass(plan(shape, first), plan(other, second), BOTH).unwrap_err().to_string();
        assert!(err.contains("different calls") || err.contains("prologue"), "{err}");
        assert!(with_de_pass(plan(shape, first), plan(shape, second), BOTH).is_ok());
    }
}
