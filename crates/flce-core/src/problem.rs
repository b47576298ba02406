//! Shapes, the caller's inputs as host views, and the validation every backend runs first.
//!
//! Layout: E is [N, D], C is [V, D], both row-major and contiguous; bias and class weights are
//! \[V\]; targets are \[N\] (i64, PyTorch's index type). Leading batch dimensions are flattened by
//! the caller.

use crate::error::{Error, Result};
use crate::options::{Options, Reduction};
use crate::Real;

/// The problem size: N tokens, hidden size D, vocabulary V.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub n: usize,
    pub d: usize,
    pub v: usize,
}

impl Shape {
    pub fn new(n: usize, d: usize, v: usize) -> Self {
        Shape { n, d, v }
    }

    pub fn validate(&self) -> Result<()> {
        for (dim, x) in [("N (tokens)", self.n), ("D (hidden size)", self.d), ("V (vocabulary)", self.v)] {
            if x == 0 {
                return Err(Error::EmptyDimension { dim });
            }
        }
        let Shape { n, d, v } = *self;
        if v > i32::MAX as usize || n > i32::MAX as usize || d > i32::MAX as usize {
            return Err(Error::Unsupported(format!("shape {self}: N, D and V must each fit in i32")));
        }
        if n.checked_mul(d).is_none() || v.checked_mul(d).is_none() {
            return Err(Error::Unsupported(format!("shape {self} too large")));
        }
        Ok(())
    }

    /// The checks every entry point runs first (Rust host API, device-pointer API, Python): the
    /// shape ([`Shape::validate`]), every option value ([`Options::validate`]) and that `shift`'s
    /// sequence length divides N.
    pub fn validate_with(&self, opts: &Options) -> Result<()> {
        self.validate()?;
        opts.validate()?;
        if let Some(t) = opts.shift {
            if !self.n.is_multiple_of(t) {
                return Err(Error::InvalidOption {
                    name: "shift",
                    value: t.to_string(),
                    reason: "N must be a multiple of the sequence length",
                });
            }
        }
        Ok(())
    }
}

/// Class weights: V of them, each finite and >= 0.
pub fn check_class_weights(w: &[f32], v: usize) -> Result<()> {
    check_len("class_weights", "[V]", v, w.len())?;
    if let Some((j, &x)) = w.iter().enumerate().find(|(_, x)| !x.is_finite() || **x < 0.0) {
        return Err(Error::InvalidOption {
            name: "class_weights",
            value: format!("w[{j}] = {x}"),
            reason: "class weights must be finite and >= 0",
        });
    }
    Ok(())
}

/// Each token's effective target after `shift` and `ignore_index` (-1: the token takes no part),
/// with every given target checked against the vocabulary `vocab` (the whole vocabulary, also
/// when the caller holds only a slice of the classifier). `targets` has N entries.
pub fn effective_targets(targets: &[i64], vocab: usize, opts: &Options) -> Result<Vec<i32>> {
    for (index, &value) in targets.iter().enumerate() {
        if value != opts.ignore_index && !(0..vocab as i64).contains(&value) {
            return Err(Error::TargetOutOfRange { index, value, vocab, ignore_index: opts.ignore_index });
        }
    }
    Ok((0..targets.len())
        .map(|i| {
            let source = match opts.shift {
                None => Some(i),
                Some(t) if (i + 1) % t != 0 => Some(i + 1),
                Some(_) => None,
            };
            match source.map(|k| targets[k]) {
                Some(x) if x != opts.ignore_index => x as i32,
                _ => -1,
            }
        })
        .collect())
}

/// The shape of grad_output that a backward takes: a scalar for mean and sum, \[N\] for none.
/// `per_token_len` is None for a scalar, else the length of the per-token buffer.
pub fn check_grad_output(reduction: Reduction, n: usize, per_token_len: Option<usize>) -> Result<()> {
    match (reduction, per_token_len) {
        (Reduction::None, Some(len)) => check_len("grad_output", "[N] (reduction none)", n, len),
        (Reduction::None, None) => {
            Err(Error::ShapeMismatch { arg: "grad_output", layout: "[N] (reduction none)".into(), expected: n, got: 1 })
        }
        (_, Some(len)) => Err(Error::ShapeMismatch {
            arg: "grad_output",
            layout: "scalar (reduction mean or sum)".into(),
            expected: 1,
            got: len,
        }),
        (_, None) => Ok(()),
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(N {}, D {}, V {})", self.n, self.d, self.v)
    }
}

/// The caller's inputs, on the host.
#[derive(Clone, Copy, Debug)]
pub struct HostInputs<'a, T> {
    pub shape: Shape,
    /// Hidden states E [N, D].
    pub e: &'a [T],
    /// Classifier weight C [V, D].
    pub c: &'a [T],
    /// Classifier bias b \[V\].
    pub bias: Option<&'a [T]>,
    /// Targets \[N\]: class indices in [0, V) or `ignore_index`.
    pub targets: &'a [i64],
    /// Class weights w \[V\], f32 whatever the input dtype (PyTorch's `weight`).
    pub class_weights: Option<&'a [f32]>,
}

impl<'a, T: Real> HostInputs<'a, T> {
    /// Inputs without bias or class weights; the shape is read off the slices (D given).
    pub fn new(e: &'a [T], c: &'a [T], targets: &'a [i64], d: usize) -> Self {
        let shape = Shape { n: targets.len(), d, v: c.len().checked_div(d).unwrap_or(0) };
        HostInputs { shape, e, c, bias: None, targets, class_weights: None }
    }

    pub fn with_bias(mut self, bias: &'a [T]) -> Self {
        self.bias = Some(bias);
        self
    }

    pub fn with_class_weights(mut self, w: &'a [f32]) -> Self {
        self.class_weights = Some(w);
        self
    }

    /// Check shapes, targets and options; return what every backend derives from them.
    pub fn prepare(&self, opts: &Options) -> Result<Prepared> {
        let s = self.shape;
        check_len("e", "[N, D]", s.n * s.d, self.e.len())?;
        check_len("c", "[V, D]", s.v * s.d, self.c.len())?;
        if let Some(b) = self.bias {
            check_len("bias", "[V]", s.v, b.len())?;
        }
        Prepared::new(s, self.targets, self.class_weights, opts)
    }
}

pub fn check_len(arg: &'static str, layout: &str, expected: usize, got: usize) -> Result<()> {
    if expected != got {
        return Err(Error::ShapeMismatch { arg, layout: layout.to_string(), expected, got });
    }
    Ok(())
}

/// What validation derives from shapes, targets, class weights and options, shared by all
/// backends: the effective target of each token (after `shift` and `ignore_index`) and the
/// normalisers of the loss.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub shape: Shape,
    /// Effective target per token; -1 marks a token that takes no part.
    pub targets: Vec<i32>,
    /// Σ_j w_j (V without class weights): the label-smoothing normaliser.
    pub total_class_weight: f64,
    /// Σ over non-ignored tokens of w\[t_i\] (their count without class weights).
    pub target_weight_sum: f64,
    /// Number of non-ignored tokens.
    pub active_tokens: usize,
}

impl Prepared {
    pub fn new(shape: Shape, targets: &[i64], class_weights: Option<&[f32]>, opts: &Options) -> Result<Self> {
        shape.validate_with(opts)?;
        check_len("targets", "[N]", shape.n, targets.len())?;
        if let Some(w) = class_weights {
            check_class_weights(w, shape.v)?;
        }
        let effective = effective_targets(targets, shape.v, opts)?;
        let weight_of = |t: i32| class_weights.map_or(1.0, |w| w[t as usize] as f64);
        let active: Vec<i32> = effective.iter().copied().filter(|&t| t >= 0).collect();
        Ok(Prepared {
            shape,
            total_class_weight: class_weights.map_or(shape.v as f64, |w| w.iter().map(|&x| x as f64).sum()),
            target_weight_sum: active.iter().map(|&t| weight_of(t)).sum(),
            active_tokens: active.len(),
            targets: effective,
        })
    }

    /// The factor that turns a per-token loss into its share of the reduced loss.
    pub fn reduction_scale(&self, reduction: Reduction) -> f64 {
        match reduction {
            Reduction::Mean => 1.0 / self.target_weight_sum,
            Reduction::Sum | Reduction::None => 1.0,
        }
    }

    /// ∂L/∂loss_i for every token from the caller's grad_output; 0 at ignored tokens.
    pub fn token_grad_scales(&self, reduction: Reduction, grad_output: GradOutput<'_>) -> Result<Vec<f32>> {
        token_grad_scales(&self.targets, self.target_weight_sum, reduction, grad_output)
    }
}

/// ∂L/∂loss_i for every token (effective `targets`, -1 ignored) from the caller's grad_output;
/// `mean_divisor` is Σ w_t over the non-ignored tokens. 0 at ignored tokens.
pub(crate) fn token_grad_scales(
    targets: &[i32],
    mean_divisor: f64,
    reduction: Reduction,
    grad_output: GradOutput<'_>,
) -> Result<Vec<f32>> {
    let n = targets.len();
    let scales = match grad_output {
        GradOutput::PerToken(g) => {
            check_grad_output(reduction, n, Some(g.len()))?;
            g.to_vec()
        }
        GradOutput::Scalar(g) => {
            check_grad_output(reduction, n, None)?;
            // With every token ignored the mean is 0/0 and PyTorch's gradient is zero.
            let scale = match reduction {
                Reduction::Mean if mean_divisor == 0.0 => 0.0,
                Reduction::Mean => g as f64 * (1.0 / mean_divisor),
                _ => g as f64,
            };
            vec![scale as f32; n]
        }
    };
    Ok(targets.iter().zip(scales).map(|(&t, g)| if t < 0 { 0.0 } else { g }).collect())
}

/// ∂L/∂(output of forward): a scalar for mean and sum, one value per token for none.
#[derive(Clone, Copy, Debug)]
pub enum GradOutput<'a> {
    Scalar(f32),
    PerToken(&'a [f32]),
}
