//! The f64 oracle: materialises the N×V logits and evaluates DESIGN.md's formulas literally.
//! O(N·V) memory: for tests and small problems only. Everything flce computes elsewhere is
//! checked against this.

use crate::error::Result;
use crate::options::{Options, Reduction};
use crate::problem::{check_grad_output, GradOutput, HostInputs, Shape};
use crate::Real;
use rayon::prelude::*;

/// Loss, per-token values and all gradients in f64.
#[derive(Clone, Debug)]
pub struct Reference {
    /// Reduced loss (mean or sum); for `Reduction::None` the sum of per-token losses.
    pub loss: f64,
    pub per_token_loss: Vec<f64>,
    pub lse: Vec<f64>,
    /// NaN when every token is ignored.
    pub accuracy: f64,
    pub de: Vec<f64>,
    pub dc: Vec<f64>,
    pub dbias: Vec<f64>,
}

/// Evaluate loss and gradients (for `grad_output`) in f64.
///
/// Only the argument checks are shared with the implementations (`HostInputs::prepare`); the
/// target of each token (shift, ignore_index), the mean's denominator and the per-token gradient
/// scales are derived here on their own, so an off-by-one in the shared code cannot pass.
pub fn evaluate<T: Real>(inputs: &HostInputs<'_, T>, opts: &Options, grad_output: GradOutput<'_>) -> Result<Reference> {
    inputs.prepare(opts)?; // argument checks only
    let Shape { n, d, v } = inputs.shape;
    let per_token_len = match grad_output {
        GradOutput::Scalar(_) => None,
        GradOutput::PerToken(g) => Some(g.len()),
    };
    check_grad_output(opts.reduction, n, per_token_len)?;
    // token i of a sequence of T predicts the given target of token i + 1; the last of each
    // sequence predicts nothing
    let target_of = |i: usize| -> Option<usize> {
        let source = match opts.shift {
            Some(t) if i % t == t - 1 => return None,
            Some(_) => i + 1,
            None => i,
        };
        let raw = inputs.targets[source];
        (raw != opts.ignore_index).then_some(raw as usize)
    };
    let targets: Vec<Option<usize>> = (0..n).map(target_of).collect();
    let weight_of = |j: usize| inputs.class_weights.map_or(1.0, |w| w[j] as f64);
    let denominator: f64 = targets.iter().flatten().map(|&t| weight_of(t)).sum();
    let active = targets.iter().flatten().count();
    let g: Vec<f64> = (0..n)
        .map(|i| match (targets[i], grad_output) {
            (None, _) => 0.0,
            (Some(_), GradOutput::PerToken(g)) => g[i] as f64,
            (Some(_), GradOutput::Scalar(g)) if opts.reduction == Reduction::Mean => g as f64 / denominator,
            (Some(_), GradOutput::Scalar(g)) => g as f64,
        })
        .collect();
    let e: Vec<f64> = inputs.e.iter().map(|x| x.real_to_f64()).collect();
    let c: Vec<f64> = inputs.c.iter().map(|x| x.real_to_f64()).collect();
    let b: Vec<f64> = match inputs.bias {
        Some(b) => b.iter().map(|x| x.real_to_f64()).collect(),
        None => vec![0.0; v],
    };
    let w: Vec<f64> = match inputs.class_weights {
        Some(w) => w.iter().map(|&x| x as f64).collect(),
        None => vec![1.0; v],
    };
    let total_w: f64 = w.iter().sum();
    let eps = opts.label_smoothing as f64;
    let lambda = opts.z_loss as f64;
    let softcap = opts.softcap.map(|s| s as f64);

    // x = E·Cᵀ + b, z = softcap(x). The three O(N·V·D) loops run over independent output rows on
    // rayon's threads; each element's sum keeps the serial order, so the result is the same bits
    // on any thread count (the GPU tests' oracle time is most of their run).
    let mut z = vec![0.0f64; n * v];
    z.par_chunks_mut(v.max(1)).enumerate().for_each(|(i, zi)| {
        for (j, zij) in zi.iter_mut().enumerate() {
            let x: f64 = (0..d).map(|k| e[i * d + k] * c[j * d + k]).sum::<f64>() + b[j];
            *zij = match softcap {
                Some(s) => s * (x / s).tanh(),
                None => x,
            };
        }
    });

    let mut lse = vec![0.0; n];
    let mut per_token = vec![0.0; n];
    let mut correct = 0usize;
    let mut gz = vec![0.0f64; n * v]; // ∂L/∂z
    for i in 0..n {
        let row = &z[i * v..(i + 1) * v];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let l = m + row.iter().map(|&x| (x - m).exp()).sum::<f64>().ln();
        lse[i] = l;
        let Some(t) = targets[i] else { continue };
        let wt = w[t];
        let smooth: f64 = (0..v).map(|j| w[j] * (l - row[j])).sum();
        per_token[i] = (1.0 - eps) * wt * (l - row[t]) + eps / v as f64 * smooth + lambda * l * l;
        let argmax = (0..v).fold(0, |best, j| if row[j] > row[best] { j } else { best });
        correct += (argmax == t) as usize;
        let gi = g[i];
        for j in 0..v {
            let p = (row[j] - l).exp();
            let mut dl = (1.0 - eps) * wt * p + eps / v as f64 * (total_w * p - w[j]) + 2.0 * lambda * l * p;
            if j == t {
                dl -= (1.0 - eps) * wt;
            }
            gz[i * v + j] = gi * dl;
        }
    }
    // chain through the softcap: ∂z/∂x = 1 − (z/s)²
    if let Some(s) = softcap {
        for (gx, &zz) in gz.iter_mut().zip(&z) {
            *gx *= 1.0 - (zz / s) * (zz / s);
        }
    }
    let total: f64 = per_token.iter().sum();
    let loss = match opts.reduction {
        Reduction::Mean => total / denominator,
        Reduction::Sum | Reduction::None => total,
    };
    // dE[i] = Σ_j gz[i, j]·C[j] (j ascending), dC[j] = Σ_i gz[i, j]·E[i] and db[j] = Σ_i gz[i, j]
    // (i ascending): zero terms skipped, as the serial loop over (i, j) did
    let mut de = vec![0.0; n * d];
    let mut dc = vec![0.0; v * d];
    de.par_chunks_mut(d.max(1)).enumerate().for_each(|(i, dei)| {
        for j in 0..v {
            let gx = gz[i * v + j];
            if gx != 0.0 {
                for (k, x) in dei.iter_mut().enumerate() {
                    *x += gx * c[j * d + k];
                }
            }
        }
    });
    dc.par_chunks_mut(d.max(1)).enumerate().for_each(|(j, dcj)| {
        for i in 0..n {
            let gx = gz[i * v + j];
            if gx != 0.0 {
                for (k, x) in dcj.iter_mut().enumerate() {
                    *x += gx * e[i * d + k];
                }
            }
        }
    });
    let dbias: Vec<f64> = (0..v)
        .into_par_iter()
        .map(|j| (0..n).map(|i| gz[i * v + j]).filter(|&gx| gx != 0.0).fold(0.0, |acc, gx| acc + gx))
        .collect();
    Ok(Reference { loss, per_token_loss: per_token, lse, accuracy: correct as f64 / active as f64, de, dc, dbias })
}
