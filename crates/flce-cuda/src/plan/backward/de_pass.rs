//! dE in a pass of its own: a backward in two passes over one workspace, for long sequences.
//!
//! The default backward runs the vocabulary chunks outer, so that each dC chunk is finished in one
//! product and rounded once; dE then accumulates in f32 across every chunk, N·D·4 bytes. Past
//! N ≈ V/3 that accumulator outgrows what dE's and dC's own unwritten bytes can hold, and the
//! plan ([`super::DcTail`], [`super::TailReach::Whole`]) recomputes more of the vocabulary in a
//! tail pass — all of it past N ≈ V, plus the accumulator read and written by every chunk (4.3 GB
//! a chunk at Llama 3 and 128k tokens: journal v18), and still rows in the workspace (13.8%
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
//! The default where it pays ([`de_pass_pays`]): the one-pass plan's tail recomputes at least
//! three quarters of the vocabulary. Measured on the H200 (journal v27;
//! forward+backward, two passes ÷ one): Llama 3 at N/V 0.26 / 0.51 / 0.77 / 0.89 / 1.02 / 1.53
//! (tails of 26% / 51% / 77% / 90% / 100% / 100% of V) 1.166 / 1.079 / 1.006 / 0.985 / 0.946 /
//! 0.953, Gemma 2 at N/V 0.51 / 1.02 1.074 / 0.927; and from a tail of 77% the one pass no longer
//! keeps within the tenth (10.9% of the gradient bytes at 98k tokens, 36% at 196k), where two
//! passes do. (Below the share the default keeps the faster one pass even where it leaves the
//! tenth: Gemma 2 at 128k tokens, 15%.) `FLCE_BWD_DE_PASS=1` / `0`
//! ([`crate::geometry::de_pass_knob`]) forces either.

use flce_core::{DType, Error, Result, Shape};

use super::{BackwardPlan, Wanted};

/// The share of the vocabulary a one-pass plan's tail recomputes from which two passes are the
/// default (module docs: at 77% they tie, past it they win, below 51% they lose by 8–17%).
pub const DE_PASS_TAIL_SHARE: f64 = 0.75;

/// Whether dE in a pass of its own pays for a call whose one-pass plan is `one_pass`: its dC
/// tail recomputes at least [`DE_PASS_TAIL_SHARE`] of the vocabulary (with accumulator rows in
/// the workspace, all of it). Whether two passes apply at all is [`de_pass_applies`]'s question.
pub fn de_pass_pays(one_pass: &BackwardPlan) -> bool {
    let v = one_pass.shape.v;
    one_pass.dc_tail().is_some_and(|t| (v - t.first_row.min(v)) as f64 >= DE_PASS_TAIL_SHARE * v as f64)
}

/// Whether a call's backward can run as two passes: dE and dC both wanted, 16-bit inputs (f32
/// inputs accumulate dE in dE itself and need no accumulator of their own).
pub fn de_pass_applies(dtype: DType, wanted: Wanted) -> bool {
    wanted.de && wanted.dc && dtype != DType::F32
}

/// The default's choice between a call's one-pass plan and its two passes (planned only where
/// they pay, [`de_pass_pays`]): the two passes where they pay and the budget holds them, else the
/// one pass.
pub fn one_or_two_passes(one_pass: BackwardPlan, two_passes: impl FnOnce() -> Result<BackwardPlan>) -> BackwardPlan {
    if de_pass_pays(&one_pass) {
        two_passes().unwrap_or(one_pass)
    } else {
        one_pass
    }
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
    use crate::modes::{BackwardMode, Family};
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
    fn two_passes_pay_where_the_one_pass_tail_recomputes_three_quarters_of_the_vocabulary() {
        // the measured points (module docs): N / V and whether two passes were faster or tied
        let one = |n, d, v| {
            backward_plan(Shape::new(n, d, v), DType::BF16, BOTH, None, BackwardMode::FusedTiles, Family::Sm90, 132)
                .unwrap()
        };
        for (n, d, v, pays) in [
            (8192, 4096, 128_256, false),
            (32_768, 4096, 128_256, false),
            (65_536, 4096, 128_256, false),
            (131_072, 2304, 256_000, false),
            (98_304, 4096, 128_256, true),
            (114_688, 4096, 128_256, true),
            (131_072, 4096, 128_256, true),
            (196_608, 4096, 128_256, true),
            (262_144, 2304, 256_000, true),
        ] {
            let p = one(n, d, v);
            assert_eq!(de_pass_pays(&p), pays, "({n}, {d}, {v}): {:?}", p.dc_tail());
            // where it pays the one pass has left the tenth, and the two passes keep it (Gemma 2
            // at 128k tokens has left it too, 15%, but there one pass is 7% faster)
            let tenth = gradient_tenth(p.shape, DType::BF16, BOTH);
            assert!(!pays || p.workspace_bytes > tenth, "({n}, {d}, {v})");
            assert!(!pays || two_pass(p.shape, BOTH, BackwardMode::FusedTiles).workspace_bytes <= tenth);
        }
        // no tail (short sequences, a plan in token chunks): one pass; the GPU tests' "de-pass
        // default" case (N above V): two, in every mode
        assert!(!de_pass_pays(&one(1024, 64, 8000)));
        for mode in [BackwardMode::FusedTiles, BackwardMode::CublasLogits, BackwardMode::FusedSm80] {
            let shape = Shape::new(5000, 64, 3000);
            let family = if mode == BackwardMode::FusedSm80 { Family::Sm80 } else { Family::Sm90 };
            assert!(
                de_pass_pays(&backward_plan(shape, DType::BF16, BOTH, None, mode, family, 132).unwrap()),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn the_default_keeps_about_a_tenth_of_the_gradients_at_every_length() {
        // the default's plans (one pass, or two where they pay) from 1k to 256k tokens: within
        // the tenth at Llama 3 except around 88k tokens (10.4%), where the one pass's tail is
        // under 3/4 of V; at Gemma 2 the one pass reaches 17% (72k–160k tokens) before two pay
        // (its tail there is half of V, where two passes measured 7% slower)
        for ((d, v), (most, two_from)) in [
            ((4096, 128_256), (0.105, 96 * 1024)),
            ((3584, 152_064), (0.12, 112 * 1024)),
            ((2304, 256_000), (0.175, 192 * 1024)),
        ] {
            for k in [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 128, 160, 192, 256] {
                let shape = Shape::new(k * 1024, d, v);
                let plan = |w, b| backward_plan(shape, DType::BF16, w, b, BackwardMode::FusedTiles, Family::Sm90, 132);
                let one = plan(BOTH, None).unwrap();
                let p = one_or_two_passes(one, || de_pass_plan(shape, DType::BF16, BOTH, None, plan));
                let share = p.workspace_bytes as f64 / gradient_bytes(shape, DType::BF16, BOTH) as f64;
                assert!(share <= most, "{shape:?}: {share:.3}");
                assert_eq!(p.de_pass.is_some(), shape.n >= two_from, "{shape:?}");
                assert!(p.de_pass.is_none() || share <= 0.1, "{shape:?}: {share:.3}");
            }
        }
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
