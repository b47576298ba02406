//! The mean's uniform 1/Σw stays out of G (common/types.cuh token_scale_of), applied as the
//! products' α instead: a case where it shows. N = 1,020 tokens share one hidden state e and one
//! target t that the model gives no probability (its logit −20 against one class h at +20:
//! p_t ≈ e⁻⁴⁰), so each G entry at t is −1 exactly, and dC's row t, −(1 − p_t)·e, is N terms −e
//! summed in f32 and scaled once by the f32 1/N: −e exactly. With 1/N inside G each term was
//! bf16(−1/N)·e, and bf16(1/1020) is 1/1020·(1 + 3.9e-3) (the worst of N in [1000, 5000)): the row
//! then missed −e by a bf16 step in nearly every element, and dE (≈ (C_h − C_t)/N) carried the
//! same 3.9e-3 on top of its one rounding. Checked on every backward family and the three-product
//! pass: dC's row t bitwise, every dE element within one rounding of f64. (bf16 only: f16's
//! rounding of 1/N is 2⁻¹¹ at worst.)

use flce_core::cpu::reference;
use flce_core::{bf16, DType, GradOutput, HostInputs, Options, Shape};
use flce_cuda::plan::{three_product_plan, ForwardBackwardPlan, Wanted};
use flce_cuda::{BackwardConfig, BackwardMode, CudaLoss, ForwardConfig, ForwardMode};

use crate::cases::Case;
use crate::oracle::{gpu_run, GpuRun};

const SHAPE: Shape = Shape { n: 1020, d: 64, v: 300 };
const TARGET: usize = 7;
const HIGH: usize = 123;

/// e (bf16 values in (−1, 1)), C (row HIGH = e·20/|e|², row TARGET its negative, the rest small
/// random rows: logits ~ ±0.5) and every token's target.
fn problem() -> (Vec<bf16>, Vec<bf16>, Vec<i64>) {
    let Shape { n, d, v } = SHAPE;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let e: Vec<bf16> = (0..d).map(|_| bf16::from_f64(uniform())).collect();
    let e2: f64 = e.iter().map(|x| x.to_f64() * x.to_f64()).sum();
    let small = (0.75 / e2).sqrt();
    let mut c = Vec::with_capacity(v * d);
    for row in 0..v {
        for x in &e {
            c.push(bf16::from_f64(match row {
                HIGH => x.to_f64() * 20.0 / e2,
                TARGET => -x.to_f64() * 20.0 / e2,
                _ => uniform() * small,
            }));
        }
    }
    let hidden = e.iter().copied().cycle().take(n * d).collect();
    (hidden, c, vec![TARGET as i64; n])
}

/// dC's row TARGET is −e bitwise and every dE element within one bf16 rounding of f64.
fn check(what: &str, got: &GpuRun<bf16>, want: &reference::Reference, e: &[bf16]) -> Result<f64, String> {
    let d = SHAPE.d;
    let row = &got.dc[TARGET * d..(TARGET + 1) * d];
    let off = row.iter().zip(e).filter(|(g, x)| g.to_bits() != (-**x).to_bits()).count();
    if off > 0 {
        let first = row.iter().zip(e).position(|(g, x)| g.to_bits() != (-*x).to_bits()).unwrap_or(0);
        return Err(format!(
            "{what}: dC's target row differs from −e in {off} of {d} elements (first: {} against {})",
            row[first].to_f64(),
            -e[first].to_f64()
        ));
    }
    let mut worst = 0.0f64;
    for (i, (g, w)) in got.de.iter().zip(&want.de).enumerate() {
        // one rounding: half a step of bf16's 8 significant bits, plus f32's sums
        let err = (g.to_f64() - w).abs() / w.abs().max(1e-30);
        if err.is_nan() || err > 2f64.powi(-8) * (1.0 + 1e-3) {
            return Err(format!("{what}: dE[{i}] = {:e} against {w:e} (relative {err:.2e} > 2⁻⁸)", g.to_f64()));
        }
        worst = worst.max(err);
    }
    Ok(worst)
}

pub(crate) fn run_mean_scale(be: &CudaLoss) -> Result<String, String> {
    let s = |e: flce_core::Error| e.to_string();
    let (e_all, c, targets) = problem();
    let host = HostInputs { shape: SHAPE, e: &e_all, c: &c, bias: None, targets: &targets, class_weights: None };
    let opts = Options::default(); // the mean
    let want = reference::evaluate(&host, &opts, GradOutput::Scalar(1.0)).map_err(s)?;
    let p_t = (-(want.lse[0]) + {
        let e = &e_all[..SHAPE.d];
        c[TARGET * SHAPE.d..(TARGET + 1) * SHAPE.d].iter().zip(e).map(|(a, b)| a.to_f64() * b.to_f64()).sum::<f64>()
    })
    .exp();
    if p_t > 1e-12 {
        return Err(format!("the case's target probability is {p_t:e}, not below 1e-12 (G at the target not −1 in bf16): the case is wrong"));
    }
    let up = be.upload(&host, &opts).map_err(s)?;
    let e = &e_all[..SHAPE.d];
    let mut report = vec![];
    let families = [
        (ForwardConfig::default(), BackwardMode::CublasLogits),
        (ForwardConfig { budget: None, mode: ForwardMode::Fused }, BackwardMode::FusedTiles),
        (ForwardConfig { budget: None, mode: ForwardMode::FusedSm80 }, BackwardMode::FusedSm80),
    ];
    for (fconfig, mode) in families {
        let got = gpu_run::<bf16>(be, &up, &opts, &[1.0], fconfig, BackwardConfig { budget: None, mode })?;
        let worst = check(&format!("{mode:?}"), &got, &want, e)?;
        report.push(format!("{mode:?} dE ≤ {worst:.1e}"));
    }
    // the three-product pass (its gradients are for grad_output 1, the oracle's)
    let wanted = Wanted { de: true, dc: true, dbias: false };
    let storage = be.three_product_logits(SHAPE, DType::BF16, &opts);
    let plan = three_product_plan(SHAPE, DType::BF16, wanted, usize::MAX, storage).map_err(s)?;
    let case = Case::planted(DType::BF16, "mean-scale", SHAPE, opts.clone(), false, "");
    let got =
        crate::three_product::forward_backward_run::<bf16>(be, &up, &case, &ForwardBackwardPlan::ThreeProduct(plan))?;
    let worst = check(&format!("three-product {}", storage.name()), &got, &want, e)?;
    report.push(format!("three-product dE ≤ {worst:.1e}"));
    Ok(format!("dC's target row = −e bitwise; {} (p_t {p_t:.0e})", report.join(", ")))
}
