//! The naive CPU path, for comparison only: widens E and C to f32, materialises the N×V logits
//! and their gradient, and runs whole-matrix GEMMs. This is what a plain framework
//! implementation does; its extra memory grows with N×V (the thing flce removes). The demo and
//! the benchmarks set it beside the fused path.

use rayon::prelude::*;

use super::gemm::{matmul_with, View};
use crate::error::Result;
use crate::options::Options;
use crate::outputs::{ForwardOutput, Gradients};
use crate::problem::{GradOutput, HostInputs};
use crate::spec::{cap_logit, LossTerms, RowStats};
use crate::Element;

fn par() -> gemm::Parallelism {
    gemm::Parallelism::Rayon(0)
}

/// Forward and backward at once, materialising the logits.
pub fn loss_and_grads<T: Element>(
    inputs: &HostInputs<'_, T>,
    opts: &Options,
    grad_output: GradOutput<'_>,
) -> Result<(ForwardOutput, Gradients<T>)> {
    super::pool::in_pool(|| materialized(inputs, opts, grad_output))
}

fn materialized<T: Element>(
    inputs: &HostInputs<'_, T>,
    opts: &Options,
    grad_output: GradOutput<'_>,
) -> Result<(ForwardOutput, Gradients<T>)> {
    let prep = inputs.prepare(opts)?;
    let g = prep.token_grad_scales(opts.reduction, grad_output)?;
    let (n, d, v) = (prep.shape.n, prep.shape.d, prep.shape.v);
    let terms = LossTerms::new(opts, v, prep.total_class_weight);
    let weight = |j: usize| inputs.class_weights.map_or(1.0, |w| w[j]);
    let e: Vec<f32> = inputs.e.iter().map(|x| x.to_f32()).collect();
    let c: Vec<f32> = inputs.c.iter().map(|x| x.to_f32()).collect();
    let mut z = vec![0.0f32; n * v];
    matmul_with(n, v, d, &mut z, View::row_major(&e, d), View::transposed(&c, d), false, par());
    let results: Vec<(f32, f32, bool)> = z
        .par_chunks_mut(v)
        .enumerate()
        .map(|(i, row)| {
            for (j, x) in row.iter_mut().enumerate() {
                *x = cap_logit(*x + inputs.bias.map_or(0.0, |b| b[j].to_f32()), opts.softcap);
            }
            let mut st = RowStats::EMPTY;
            st.fold(row, 0, inputs.class_weights);
            let lse = st.lse();
            let t = prep.targets[i];
            let (loss, correct) = if t < 0 {
                (0.0, false)
            } else {
                let t = t as usize;
                (terms.token_loss(lse, row[t], weight(t), st.weighted_logit_sum), st.argmax == t as u32)
            };
            // The row becomes ∂L/∂x.
            let w_t = if t < 0 { 0.0 } else { weight(t as usize) };
            let coeffs = terms.grad_coeffs(g[i], lse, w_t);
            for (j, x) in row.iter_mut().enumerate() {
                *x = coeffs.grad(*x, j as i32 == t, weight(j), opts.softcap);
            }
            (lse, loss, correct)
        })
        .collect();
    let mut de = vec![0.0f32; n * d];
    matmul_with(n, d, v, &mut de, View::row_major(&z, v), View::row_major(&c, d), false, par());
    let mut dc = vec![0.0f32; v * d];
    matmul_with(v, d, n, &mut dc, View::transposed(&z, v), View::row_major(&e, d), false, par());
    let dbias = inputs.bias.map(|_| (0..v).map(|j| T::from_f64((0..n).map(|i| z[i * v + j] as f64).sum())).collect());

    let total: f64 = results.iter().map(|r| r.1 as f64).sum();
    let correct = results.iter().filter(|r| r.2).count();
    let fwd = ForwardOutput {
        loss: (total * prep.reduction_scale(opts.reduction)) as f32,
        lse: results.iter().map(|r| r.0).collect(),
        per_token_loss: opts.wants_per_token_loss().then(|| results.iter().map(|r| r.1).collect()),
        accuracy: opts.return_accuracy.then(|| (correct as f64 / prep.active_tokens as f64) as f32),
    };
    let grads = Gradients {
        de: de.into_iter().map(T::from_f32).collect(),
        dc: dc.into_iter().map(T::from_f32).collect(),
        dbias,
    };
    Ok((fwd, grads))
}

/// The bare GEMM floor: one f32 logits product [N, D]·[V, D]ᵀ of the same size, through the
/// same GEMM library, all threads. An exact forward + backward needs four of these.
pub fn logits_gemm(e: &[f32], c: &[f32], n: usize, d: usize, v: usize, out: &mut [f32]) {
    matmul_with(n, v, d, out, View::row_major(e, d), View::transposed(c, d), false, par());
}
