//! The per-token arithmetic of the loss, written once in f32 and shared by the fused CPU path and
//! the host side of the GPU path (the GPU kernels mirror it line for line; see
//! `flce-cuda/kernels/common.cuh`). The f64 oracle in `cpu::reference` is written independently
//! from DESIGN.md's formulas on purpose.
//!
//! Per non-ignored token i with target t, class weights w (all 1 when absent), W = Σ_j w_j:
//!
//! ```text
//! z_ij   = s·tanh((E_i·C_j + b_j)/s)          (E_i·C_j + b_j without softcap)
//! lse_i  = log Σ_j exp(z_ij)
//! loss_i = (1-ε)·w_t·(lse_i − z_it) + (ε/V)·Σ_j w_j·(lse_i − z_ij) + λ·lse_i²
//! ∂loss_i/∂z_ij = a_i·p_ij − (1-ε)·w_t·[j = t] − (ε/V)·w_j,
//!           a_i = (1-ε)·w_t + ε·W/V + 2λ·lse_i,   p_ij = exp(z_ij − lse_i)
//! ```

use crate::options::Options;

/// NaN-propagating max (f32::max drops NaN; PyTorch's loss does not).
#[inline(always)]
pub fn nan_max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

/// The logit transform: bias already added, then the optional softcap.
#[inline(always)]
pub fn cap_logit(x: f32, softcap: Option<f32>) -> f32 {
    match softcap {
        Some(s) => s * (x / s).tanh(),
        None => x,
    }
}

/// dz/dx of the softcap, written in terms of the capped logit z.
#[inline(always)]
pub fn cap_derivative(z: f32, softcap: Option<f32>) -> f32 {
    match softcap {
        Some(s) => {
            let r = z / s;
            1.0 - r * r
        }
        None => 1.0,
    }
}

/// Softmax statistics of one token over a contiguous range of the vocabulary. Ranges merge in
/// vocabulary order, so the result does not depend on how the vocabulary was split.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowStats {
    pub max: f32,
    /// Σ exp(z − max).
    pub sum_exp: f32,
    /// Σ w_j·z_j (label smoothing's term).
    pub weighted_logit_sum: f64,
    /// First index of the max logit (token accuracy).
    pub argmax: u32,
}

impl RowStats {
    pub const EMPTY: RowStats =
        RowStats { max: f32::NEG_INFINITY, sum_exp: 0.0, weighted_logit_sum: 0.0, argmax: u32::MAX };

    /// Fold one range of logits `z` whose first vocabulary index is `first`; `w` are their class
    /// weights (None: all 1).
    pub fn fold(&mut self, z: &[f32], first: usize, w: Option<&[f32]>) {
        let mut tile_max = f32::NEG_INFINITY;
        let mut tile_arg = 0usize;
        for (j, &x) in z.iter().enumerate() {
            if x > tile_max || (x.is_nan() && !tile_max.is_nan()) {
                tile_max = x;
                tile_arg = j;
            }
        }
        let mut sum = 0.0f32;
        for &x in z {
            sum += (x - tile_max).exp();
        }
        let wz: f64 = match w {
            Some(w) => z.iter().zip(w).map(|(&x, &w)| (x * w) as f64).sum(),
            None => z.iter().map(|&x| x as f64).sum(),
        };
        self.merge(RowStats { max: tile_max, sum_exp: sum, weighted_logit_sum: wz, argmax: (first + tile_arg) as u32 });
    }

    /// Merge the statistics of the range that follows this one.
    pub fn merge(&mut self, next: RowStats) {
        let m = nan_max(self.max, next.max);
        let scaled = |s: f32, mx: f32| if s == 0.0 { 0.0 } else { s * (mx - m).exp() };
        self.sum_exp =
            if m == f32::NEG_INFINITY { 0.0 } else { scaled(self.sum_exp, self.max) + scaled(next.sum_exp, next.max) };
        if next.max > self.max || self.argmax == u32::MAX || (next.max.is_nan() && !self.max.is_nan()) {
            self.argmax = next.argmax;
        }
        self.max = m;
        self.weighted_logit_sum += next.weighted_logit_sum;
    }

    pub fn lse(&self) -> f32 {
        self.max + self.sum_exp.ln()
    }
}

/// The option-dependent constants of the per-token loss and gradient.
#[derive(Clone, Copy, Debug)]
pub struct LossTerms {
    pub label_smoothing: f32,
    pub z_loss: f32,
    pub vocab: usize,
    /// W = Σ_j w_j (V without class weights).
    pub total_class_weight: f64,
}

impl LossTerms {
    pub fn new(opts: &Options, vocab: usize, total_class_weight: f64) -> Self {
        LossTerms { label_smoothing: opts.label_smoothing, z_loss: opts.z_loss, vocab, total_class_weight }
    }

    /// loss_i from lse_i, the target logit z_t, the target's class weight w_t and Σ_j w_j·z_j.
    pub fn token_loss(&self, lse: f32, target_logit: f32, w_t: f32, weighted_logit_sum: f64) -> f32 {
        let eps = self.label_smoothing as f64;
        let lse64 = lse as f64;
        let mut loss = (1.0 - eps) * w_t as f64 * (lse64 - target_logit as f64);
        if eps > 0.0 {
            loss += eps / self.vocab as f64 * (self.total_class_weight * lse64 - weighted_logit_sum);
        }
        if self.z_loss > 0.0 {
            loss += self.z_loss as f64 * lse64 * lse64;
        }
        loss as f32
    }

    /// The coefficients of ∂L/∂z_ij = p_scale·p_ij − target·[j = t] − smooth·w_j for a token
    /// with gradient scale g = ∂L/∂loss_i.
    pub fn grad_coeffs(&self, g: f32, lse: f32, w_t: f32) -> GradCoeffs {
        let eps = self.label_smoothing;
        let a = (1.0 - eps) * w_t
            + (eps as f64 * self.total_class_weight / self.vocab as f64) as f32
            + 2.0 * self.z_loss * lse;
        GradCoeffs { p_scale: g * a, target: g * (1.0 - eps) * w_t, smooth: g * eps / self.vocab as f32, lse }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct GradCoeffs {
    pub p_scale: f32,
    pub target: f32,
    pub smooth: f32,
    pub lse: f32,
}

impl GradCoeffs {
    /// ∂L/∂x for one logit: `z` the capped logit, `is_target` whether j = t, `w_j` its weight.
    #[inline(always)]
    pub fn grad(&self, z: f32, is_target: bool, w_j: f32, softcap: Option<f32>) -> f32 {
        let mut gz = self.p_scale * (z - self.lse).exp() - self.smooth * w_j;
        if is_target {
            gz -= self.target;
        }
        gz * cap_derivative(z, softcap)
    }
}
