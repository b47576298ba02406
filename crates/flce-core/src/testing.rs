//! Test and benchmark support shared by every backend's tests: seeded random problems with
//! planted outlier logits and ignored tokens, and the relative-error metric. Public so the CUDA
//! backend's tests, the CLI and the benchmarks draw the same data.

use crate::{Element, HostInputs, Options, Real, Shape};

/// A small, fast, seeded generator (SplitMix64); tests need reproducible data, not crypto.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Approximately standard normal (sum of uniforms; enough for test data).
    pub fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.uniform()).sum::<f32>() * 1.732_050_8 - 3.464_101_6
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// How the generated logits look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    /// Logits of standard deviation ~1 with a few planted outliers (|logit| in the tens).
    Planted,
    /// Trained-like: a few strongly preferred classes per token (peaky softmax).
    Peaky,
}

/// An owned random problem.
#[derive(Clone, Debug)]
pub struct RandomProblem<T> {
    pub shape: Shape,
    pub e: Vec<T>,
    pub c: Vec<T>,
    pub bias: Option<Vec<T>>,
    pub targets: Vec<i64>,
    pub class_weights: Option<Vec<f32>>,
}

impl<T: Real> RandomProblem<T> {
    /// Random E, C (logit scale ~1 before outliers), targets with `ignore_fraction` of them set to
    /// `ignore_index`, optional bias and class weights.
    pub fn new(
        shape: Shape,
        seed: u64,
        kind: DataKind,
        ignore_fraction: f32,
        opts: &Options,
        bias: bool,
        class_weights: bool,
    ) -> Self {
        use rayon::prelude::*;
        let Shape { n, d, v } = shape;
        let scale = 1.0 / (d as f32).sqrt();
        // Every row has its own generator, so rows fill in parallel and the data do not depend on
        // the thread count.
        let row_rng =
            |tensor: u64, row: usize| Rng::new(seed.wrapping_mul(0x100_0000_01B3) ^ (tensor << 56) ^ row as u64);
        let mut rng = row_rng(0, 0);
        // Planted outliers: a few vocabulary rows with 10-30x the norm (logits in the tens).
        let mut row_gain = vec![1.0f32; v];
        if kind == DataKind::Planted {
            for _ in 0..(v / 50).max(1) {
                row_gain[rng.below(v)] = 10.0 + 20.0 * rng.uniform();
            }
        }
        let mut c = vec![T::default(); v * d];
        c.par_chunks_mut(d).enumerate().for_each(|(j, row)| {
            let mut r = row_rng(1, j);
            row.iter_mut().for_each(|x| *x = T::real_from_f64((r.normal() * scale * row_gain[j]) as f64));
        });
        // Peaky: each token leans towards one of a few "popular" classes (|c_j|² ≈ 1, so adding
        // 10·c_j adds ~10 to that logit), and half the time that class is also the target, as for
        // a trained model.
        let popular: Vec<usize> = (0..8.min(v)).map(|_| rng.below(v)).collect();
        let mut leaned = vec![usize::MAX; n];
        let mut e = vec![T::default(); n * d];
        let c_ref = &c;
        e.par_chunks_mut(d).zip(leaned.par_iter_mut()).enumerate().for_each(|(i, (row, lean))| {
            let mut r = row_rng(2, i);
            row.iter_mut().for_each(|x| *x = T::real_from_f64(r.normal() as f64));
            if kind == DataKind::Peaky {
                let j = popular[r.below(popular.len())];
                *lean = j;
                for (x, cj) in row.iter_mut().zip(&c_ref[j * d..(j + 1) * d]) {
                    *x = T::real_from_f64(x.real_to_f64() + 10.0 * cj.real_to_f64());
                }
            }
        });
        let targets = (0..n)
            .map(|i| {
                if rng.uniform() < ignore_fraction {
                    opts.ignore_index
                } else if leaned[i] != usize::MAX && rng.uniform() < 0.5 {
                    leaned[i] as i64
                } else {
                    rng.below(v) as i64
                }
            })
            .collect();
        let bias = bias.then(|| (0..v).map(|_| T::real_from_f64(f64::from(rng.normal()))).collect());
        let class_weights = class_weights.then(|| (0..v).map(|_| 0.25 + 1.5 * rng.uniform()).collect());
        RandomProblem { shape, e, c, bias, targets, class_weights }
    }

    pub fn inputs(&self) -> HostInputs<'_, T> {
        HostInputs {
            shape: self.shape,
            e: &self.e,
            c: &self.c,
            bias: self.bias.as_deref(),
            targets: &self.targets,
            class_weights: self.class_weights.as_deref(),
        }
    }
}

/// ‖a − b‖ / ‖b‖ in f64; when b is all zeros, ‖a‖ (so zeros compare as 0 error). NaN in either
/// gives NaN, which fails every `<=` tolerance check.
pub fn rel_err<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    assert_eq!(a.len(), b.len(), "rel_err: length mismatch");
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x.into(), y.into());
        num += (x - y) * (x - y);
        den += y * y;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// Elements as f64, for [`rel_err`] on half types.
pub fn to_f64<T: Element>(x: &[T]) -> Vec<f64> {
    x.iter().map(|v| v.to_f64()).collect()
}
