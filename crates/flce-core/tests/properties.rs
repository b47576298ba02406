//! The fused CPU path against the f64 oracle on property-generated problems: odd shapes (V, D not
//! multiples of the blocks, N = 1), planted large logits, ignored tokens, every option alone and
//! combined, all three dtypes.

use flce_core::cpu::{self, reference};
use flce_core::testing::{to_f64, DataKind, RandomProblem};
use flce_core::{bf16, f16, Element, GradOutput, Options, Real, Reduction, Shape};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Case {
    shape: Shape,
    seed: u64,
    kind: DataKind,
    ignore_fraction: f32,
    bias: bool,
    class_weights: bool,
    opts: Options,
    grad_scale: f32,
}

fn shape() -> impl Strategy<Value = Shape> {
    // cpu::fused's token block (128) and vocabulary block (512): cross both boundaries, and hit
    // N = 1. (Its 4096-row segments are crossed by cpu::vocab_parallel' tests.)
    (prop_oneof![Just(1usize), 1usize..140], 1usize..72, prop_oneof![Just(1usize), 1usize..600])
        .prop_map(|(n, d, v)| Shape::new(n, d, v))
}

fn case() -> impl Strategy<Value = Case> {
    (
        shape(),
        any::<u64>(),
        prop_oneof![Just(DataKind::Planted), Just(DataKind::Peaky)],
        prop_oneof![Just(0.0f32), 0.0f32..0.6, Just(1.0f32)],
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(Reduction::Mean), Just(Reduction::Sum), Just(Reduction::None)],
        prop_oneof![Just(0.0f32), 0.0f32..0.5],
        prop_oneof![Just(0.0f32), 0.0f32..0.01],
        prop_oneof![Just(None), (1.0f32..40.0).prop_map(Some)],
        (any::<bool>(), 1usize..5, any::<bool>()),
        prop_oneof![Just(1.0f32), -3.0f32..3.0],
    )
        .prop_map(
            |(
                shape,
                seed,
                kind,
                ignore_fraction,
                bias,
                class_weights,
                reduction,
                ls,
                zl,
                softcap,
                (shift, t, acc),
                grad_scale,
            )| {
                let mut shape = shape;
                let shift = if shift {
                    // shift needs N to be a multiple of the sequence length
                    shape.n = shape.n.div_ceil(t) * t;
                    Some(t)
                } else {
                    None
                };
                let opts = Options {
                    reduction,
                    ignore_index: -100,
                    label_smoothing: ls,
                    z_loss: zl,
                    softcap,
                    shift,
                    return_per_token_loss: true,
                    return_accuracy: acc,
                };
                Case { shape, seed, kind, ignore_fraction, bias, class_weights, opts, grad_scale }
            },
        )
}

/// Tolerance on gradients: f32 accumulation, then one rounding to the dtype.
fn grad_tol<T: Element>() -> f64 {
    match T::DTYPE {
        flce_core::DType::F32 => 2e-5,
        flce_core::DType::F16 => 2e-3,
        flce_core::DType::BF16 => 8e-3,
    }
}

/// Half the spacing of the output dtype's subnormals: the most one rounding can move a gradient
/// entry that underflows below the smallest normal (f16 gradients of tiny tokens' scales do:
/// z-loss alone at V = 1 puts dE's entries near 1e-6, where f16's spacing is 6e-8).
fn subnormal_half_step<T: Element>() -> f64 {
    match T::DTYPE {
        flce_core::DType::F32 => 2f64.powi(-150),
        flce_core::DType::F16 => 2f64.powi(-25),
        flce_core::DType::BF16 => 2f64.powi(-134),
    }
}

fn check<T: Element>(case: &Case) -> Result<(), TestCaseError> {
    let p = RandomProblem::<T>::new(
        case.shape,
        case.seed,
        case.kind,
        case.ignore_fraction,
        &case.opts,
        case.bias,
        case.class_weights,
    );
    let inputs = p.inputs();
    let opts = &case.opts;
    let per_token_g: Vec<f32> = (0..case.shape.n).map(|i| case.grad_scale * (1.0 + (i % 3) as f32)).collect();
    let go = match opts.reduction {
        Reduction::None => GradOutput::PerToken(&per_token_g),
        _ => GradOutput::Scalar(case.grad_scale),
    };
    let oracle = reference::evaluate(&inputs, opts, go).unwrap();
    let fwd = cpu::forward(&inputs, opts).unwrap();
    let grads = cpu::backward(&inputs, opts, &fwd.lse, go).unwrap();

    let all_ignored = oracle.per_token_loss.iter().all(|&x| x == 0.0) && oracle.accuracy.is_nan();
    if opts.reduction == Reduction::Mean && all_ignored {
        prop_assert!(fwd.loss.is_nan(), "mean over no tokens must be NaN (PyTorch), got {}", fwd.loss);
    } else {
        let e = ((fwd.loss as f64 - oracle.loss) / oracle.loss.abs().max(1e-30)).abs();
        // Each token's loss is a difference (lse − z, and the smoothing's lse − mean z) whose f32
        // rounding is relative to |lse|, not to the difference: near one-hot softmaxes (V = 1
        // exactly, where every loss is 0) leave only that rounding. So the loss may also be off by
        // 16 f32 ulps of the terms: Σ |lse| (Mean: the largest |lse|), times the class weights'
        // largest (1.75, testing.rs).
        let lse_abs = oracle.lse.iter().map(|x| x.abs());
        let terms = if opts.reduction == Reduction::Mean { lse_abs.fold(0.0, f64::max) } else { lse_abs.sum() };
        let cancel = 16.0 * f32::EPSILON as f64 / 2.0 * 1.75 * terms;
        let abs = (fwd.loss as f64 - oracle.loss).abs();
        prop_assert!(
            e <= 2e-5 || abs < 1e-5 || abs <= cancel,
            "loss {} vs {} (rel {e:e}; terms' rounding {cancel:e})",
            fwd.loss,
            oracle.loss
        );
    }
    if opts.return_accuracy {
        let acc = fwd.accuracy.unwrap() as f64;
        // a row whose two largest logits tie within f32 rounding (a saturated softcap at tiny D)
        // may pick either as its argmax: each such row may move the accuracy by one token
        let ties = near_tied_rows(&inputs, opts) as f64;
        let counted = (inputs.targets.iter().filter(|&&t| t != opts.ignore_index).count() as f64 - 1.0).max(1.0);
        prop_assert!(
            (acc - oracle.accuracy).abs() < 1e-6 + ties / counted || (acc.is_nan() && oracle.accuracy.is_nan()),
            "accuracy {acc} vs {} ({ties} near-tied rows)",
            oracle.accuracy
        );
    } else {
        prop_assert!(fwd.accuracy.is_none());
    }
    let tol = grad_tol::<T>();
    // A gradient whose every entry is ~1e-12 (a fully saturated softcap, say) is rounding noise in
    // f32: an absolute floor keeps the relative metric meaningful there.
    // Its size: f32 rounding (1e-6, with margin) of the largest token gradient scale times the
    // norms of the inputs that multiply it.
    let g = inputs.prepare(opts).unwrap().token_grad_scales(opts.reduction, go).unwrap();
    let g_max = g.iter().fold(0.0f64, |m, &x| m.max(x.abs() as f64));
    let w_max = p.class_weights.as_ref().map_or(1.0, |w| w.iter().fold(1.0f64, |m, &x| m.max(x as f64)));
    let norm = |x: &[T]| to_f64(x).iter().map(|v| v * v).sum::<f64>().sqrt();
    let grad_floor = 1e-6 * g_max * w_max * (norm(&p.e) + norm(&p.c) + 1.0);
    // Forward values: f32 rounding of lse-sized quantities (a loss that is exactly 0, as for
    // V = 1, comes out as rounding noise of lse), and of the logits themselves: an f32 dot product
    // of D terms is off by ~√D ulps of Σ|e_k·c_k| (at most ‖e_i‖·‖c_j‖), which cancellation can
    // make far larger than the logit (CI drew V = 1, D = 65: lse, the one logit, 0.072 and 1.7e-6
    // off, 2.4e-5 relative; the case is in the regressions file).
    let lse_max = oracle.lse.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    let d = case.shape.d;
    let row_norm_max = |x: &[f64], rows: usize| {
        (0..rows).map(|r| x[r * d..(r + 1) * d].iter().map(|v| v * v).sum::<f64>().sqrt()).fold(0.0, f64::max)
    };
    let dot_terms = row_norm_max(&to_f64(&p.e), case.shape.n) * row_norm_max(&to_f64(&p.c), case.shape.v);
    let dot_rounding = (d as f64).sqrt() * f32::EPSILON as f64 * dot_terms;
    let fwd_floor = (oracle.lse.len() as f64).sqrt() * (1e-6 * lse_max + dot_rounding) * w_max;
    let close_floor = |name: &str, got: &[f64], want: &[f64], tol: f64, floor: f64| -> Result<(), TestCaseError> {
        let abs = {
            let d: f64 = got.iter().zip(want).map(|(a, b)| (a - b) * (a - b)).sum();
            d.sqrt()
        };
        let norm = want.iter().map(|x| x * x).sum::<f64>().sqrt();
        prop_assert!(
            abs <= tol * norm + floor,
            "{name}: |diff| {abs:e} vs tol·|ref| {:e} (rel {:e})",
            tol * norm,
            abs / norm
        );
        Ok(())
    };
    // (and the output dtype's subnormal rounding, √len of it: a norm of independent errors)
    let close = |name: &str, got: &[f64], want: &[f64]| {
        let underflow = subnormal_half_step::<T>() * (want.len() as f64).sqrt();
        close_floor(name, got, want, tol, grad_floor + underflow)
    };
    let lse: Vec<f64> = fwd.lse.iter().map(|&x| x as f64).collect();
    let ptl: Vec<f64> = fwd.per_token_loss.as_ref().unwrap().iter().map(|&x| x as f64).collect();
    close_floor("lse", &lse, &oracle.lse, 1e-5, fwd_floor)?;
    close_floor("per-token loss", &ptl, &oracle.per_token_loss, 2e-5, fwd_floor)?;
    close("dE", &to_f64(&grads.de), &oracle.de)?;
    close("dC", &to_f64(&grads.dc), &oracle.dc)?;
    if let Some(db) = &grads.dbias {
        close("db", &to_f64(db), &oracle.dbias)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn fused_matches_oracle_f32(case in case()) { check::<f32>(&case)?; }

    #[test]
    fn fused_matches_oracle_bf16(case in case()) { check::<bf16>(&case)?; }

    #[test]
    fn fused_matches_oracle_f16(case in case()) { check::<f16>(&case)?; }
}

/// Each option alone on one awkward shape, so a failure names the option.
#[test]
fn every_option_alone() {
    let shape = Shape::new(67, 45, 301);
    let base = Options { return_per_token_loss: true, return_accuracy: true, ..Options::default() };
    let variants: Vec<(&str, Options, bool, bool)> = vec![
        ("plain", base.clone(), false, false),
        ("sum", Options { reduction: Reduction::Sum, ..base.clone() }, false, false),
        ("none", Options { reduction: Reduction::None, ..base.clone() }, false, false),
        ("label_smoothing", Options { label_smoothing: 0.1, ..base.clone() }, false, false),
        ("z_loss", Options { z_loss: 1e-3, ..base.clone() }, false, false),
        ("softcap", Options { softcap: Some(30.0), ..base.clone() }, false, false),
        ("shift", Options { shift: Some(67), ..base.clone() }, false, false),
        ("ignore_index=7", Options { ignore_index: 7, ..base.clone() }, false, false),
        ("bias", base.clone(), true, false),
        ("class_weights", base.clone(), false, true),
        ("all", Options { label_smoothing: 0.2, z_loss: 1e-4, softcap: Some(15.0), ..base.clone() }, true, true),
    ];
    for (name, opts, bias, weights) in variants {
        for seed in 0..2 {
            let case = Case {
                shape,
                seed,
                kind: DataKind::Planted,
                ignore_fraction: 0.2,
                bias,
                class_weights: weights,
                opts: opts.clone(),
                grad_scale: 1.0,
            };
            check::<f32>(&case).unwrap_or_else(|e| panic!("{name} f32: {e}"));
            check::<bf16>(&case).unwrap_or_else(|e| panic!("{name} bf16: {e}"));
        }
    }
}

/// The naive materialised path (the demo's and benchmarks' baseline) computes the same function.
#[test]
fn materialized_matches_oracle() {
    let opts = Options {
        label_smoothing: 0.1,
        z_loss: 1e-3,
        softcap: Some(20.0),
        return_per_token_loss: true,
        return_accuracy: true,
        ..Options::default()
    };
    let p = RandomProblem::<bf16>::new(Shape::new(70, 33, 300), 3, DataKind::Peaky, 0.2, &opts, true, true);
    let oracle = reference::evaluate(&p.inputs(), &opts, GradOutput::Scalar(1.0)).unwrap();
    let (f, g) = cpu::materialized::loss_and_grads(&p.inputs(), &opts, GradOutput::Scalar(1.0)).unwrap();
    assert!(((f.loss as f64 - oracle.loss) / oracle.loss).abs() < 2e-5);
    assert_eq!(f.accuracy.unwrap() as f64, oracle.accuracy as f32 as f64);
    for (name, got, want) in [("dE", &g.de, &oracle.de), ("dC", &g.dc, &oracle.dc)] {
        let e = flce_core::testing::rel_err(&to_f64(got), want);
        assert!(e < 8e-3, "{name} rel {e:e}");
    }
}

/// Rows whose two largest logits z = softcap(E·Cᵀ + b), in f64, lie within f32 rounding of each
/// other (where the f32 CPU pass and the f64 oracle may choose different argmaxes).
fn near_tied_rows<T: Real>(inputs: &flce_core::HostInputs<'_, T>, opts: &Options) -> usize {
    let Shape { n, d, v } = inputs.shape;
    (0..n)
        .filter(|&i| {
            let mut z: Vec<f64> = (0..v)
                .map(|j| {
                    let x: f64 = (0..d)
                        .map(|k| inputs.e[i * d + k].real_to_f64() * inputs.c[j * d + k].real_to_f64())
                        .sum::<f64>()
                        + inputs.bias.map_or(0.0, |b| b[j].real_to_f64());
                    opts.softcap.map_or(x, |s| s as f64 * (x / s as f64).tanh())
                })
                .collect();
            z.sort_by(|a, b| b.total_cmp(a));
            v > 1 && z[0] - z[1] <= 1e-5 * (1.0 + z[0].abs())
        })
        .count()
}

/// A proptest case CI drew: f16, V = 1, z-loss alone (the cross-entropy gradient
/// of one class is 0), a small grad_output — dE's entries near 1e-6, in f16's subnormals, where
/// one rounding moves an entry by up to 3e-8 (2.9e-3 relative in all): within the subnormal
/// floor, not within the relative tolerance alone.
#[test]
fn f16_gradients_in_the_subnormals_are_held_to_their_rounding() {
    let case = Case {
        shape: Shape::new(8, 44, 1),
        seed: 164_611_372_677_446_734,
        kind: DataKind::Peaky,
        ignore_fraction: 0.0,
        bias: false,
        class_weights: false,
        opts: Options { z_loss: 0.006_223_447_6, return_per_token_loss: true, ..Options::default() },
        grad_scale: 0.003_309_536,
    };
    check::<f16>(&case).unwrap();
}
