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
    pub fn new(shape: Shape, seed: u64, kind: DataKind, ignore_fraction: f32, opts: &Options, bias: bool, class_weights: bool) -> Self {
        let mut rng = Rng::new(seed);
        let Shape { n, d, v } = shape;
        let scale = 1.0 / (d as f32).sqrt();
        let mut e: Vec<f32> = (0..n * d).map(|_| rng.normal()).collect();
        let mut c: Vec<f32> = (0..v * d).map(|_| rng.normal() * scale).collect();
        match kind {
            DataKind::Planted => {
                // A few vocabulary rows with 10-30x the norm: logits in the tens for every token.
                for _ in 0..(v / 50).max(1) {
                    let j = rng.below(v);
                    let f = 10.0 + 20.0 * rng.uniform();
                    c[j * d..(j + 1) * d].iter_mut().for_each(|x| *x *= f);
                }
            }
            DataKind::Peaky => {
                // Each token's hidden state leans towards one of a few "popular" classifier rows.
                let popular: Vec<usize> = (0..8.min(v)).map(|_| rng.below(v)).collect();
                for i in 0..n {
                    let j = popular[rng.below(popular.len())];
                    for k in 0..d {
                        // |c_j|² ≈ 1, so this adds ~10 to the logit of class j.
                        e[i * d + k] += 10.0 * c[j * d + k];
                    }
                }
            }
        }
        let targets = (0..n)
            .map(|_| if rng.uniform() < ignore_fraction { opts.ignore_index } else { rng.below(v) as i64 })
            .collect();
        let bias = bias.then(|| (0..v).map(|_| T::real_from_f64(f64::from(rng.normal()))).collect());
        let class_weights = class_weights.then(|| (0..v).map(|_| 0.25 + 1.5 * rng.uniform()).collect());
        RandomProblem {
            shape,
            e: e.into_iter().map(|x| T::real_from_f64(x.into())).collect(),
            c: c.into_iter().map(|x| T::real_from_f64(x.into())).collect(),
            bias,
            targets,
            class_weights,
        }
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
