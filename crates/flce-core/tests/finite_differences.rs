//! The oracle's analytic gradients against central finite differences of its own loss, in f64,
//! for every option. This is what makes the oracle trustworthy as the reference for the rest.

use flce_core::cpu::reference;
use flce_core::testing::{DataKind, RandomProblem};
use flce_core::{GradOutput, Options, Reduction, Shape};

fn check(opts: Options, bias: bool, weights: bool, seed: u64) {
    let shape = Shape::new(5, 4, 7);
    let p = RandomProblem::<f64>::new(shape, seed, DataKind::Planted, 0.2, &opts, bias, weights);
    let g_tok: Vec<f32> = (0..shape.n).map(|i| 0.5 + i as f32).collect();
    let go = match opts.reduction {
        Reduction::None => GradOutput::PerToken(&g_tok),
        _ => GradOutput::Scalar(1.0),
    };
    // L = Σ_i g_i·loss_i for none, the reduced loss otherwise.
    let objective = |p: &RandomProblem<f64>| -> f64 {
        let r = reference::evaluate(&p.inputs(), &opts, go).unwrap();
        match opts.reduction {
            Reduction::None => r.per_token_loss.iter().zip(&g_tok).map(|(l, &g)| l * g as f64).sum(),
            _ => r.loss,
        }
    };
    let analytic = reference::evaluate(&p.inputs(), &opts, go).unwrap();
    let h = 1e-6;
    let mut worst = 0.0f64;
    let mut probe = |get: &dyn Fn(&mut RandomProblem<f64>) -> &mut f64, want: f64| {
        let mut q = p.clone();
        *get(&mut q) += h;
        let up = objective(&q);
        *get(&mut q) -= 2.0 * h;
        let down = objective(&q);
        let fd = (up - down) / (2.0 * h);
        worst = worst.max((fd - want).abs() / want.abs().max(1e-3));
    };
    for k in 0..shape.n * shape.d {
        probe(&|q| &mut q.e[k], analytic.de[k]);
    }
    for k in 0..shape.v * shape.d {
        probe(&|q| &mut q.c[k], analytic.dc[k]);
    }
    if bias {
        for k in 0..shape.v {
            probe(&|q| &mut q.bias.as_mut().unwrap()[k], analytic.dbias[k]);
        }
    }
    assert!(worst < 1e-5, "{opts:?} bias={bias} weights={weights}: worst relative error {worst:e}");
}

#[test]
fn oracle_gradients_match_finite_differences() {
    let base = Options::default();
    let cases = [
        (base.clone(), false, false),
        (Options { reduction: Reduction::Sum, ..base.clone() }, false, false),
        (Options { reduction: Reduction::None, ..base.clone() }, false, false),
        (Options { label_smoothing: 0.3, ..base.clone() }, false, false),
        (Options { z_loss: 0.05, ..base.clone() }, false, false),
        (Options { softcap: Some(3.0), ..base.clone() }, false, false),
        (Options { shift: Some(5), ..base.clone() }, false, false),
        (base.clone(), true, false),
        (base.clone(), false, true),
        (Options { label_smoothing: 0.2, ..base.clone() }, false, true),
        (
            Options {
                label_smoothing: 0.1,
                z_loss: 0.01,
                softcap: Some(5.0),
                reduction: Reduction::None,
                ..base.clone()
            },
            true,
            true,
        ),
    ];
    for (seed, (opts, bias, weights)) in cases.into_iter().enumerate() {
        check(opts, bias, weights, seed as u64);
    }
}
