//! # flce-core
//!
//! The core of flce, a fused linear cross-entropy: the loss of the last layer of a language
//! model, `cross_entropy(E·Cᵀ + b, targets)`, and its gradients, computed without holding the
//! N×V logits.
//!
//! This crate owns what every backend shares: the options ([`Options`]), shapes and validation
//! ([`HostInputs::prepare`], [`Prepared`]), the error type ([`Error`]), the per-token arithmetic
//! ([`spec`]) and the CPU backend ([`cpu`]: an f64 oracle that materialises the logits, and the
//! fused path used for real work). The CUDA backend (`flce-cuda`) plugs in behind the same
//! options and validation; the `flce` facade picks a backend by where the data lives.
//!
//! ```
//! use flce_core::{cpu, GradOutput, HostInputs, Options};
//! let (n, d, v) = (3, 4, 5);
//! let e: Vec<f32> = (0..n * d).map(|i| (i as f32 * 0.37).sin()).collect();
//! let c: Vec<f32> = (0..v * d).map(|i| (i as f32 * 0.91).cos()).collect();
//! let targets = [1i64, -100, 4];
//! let inputs = HostInputs::new(&e, &c, &targets, d);
//! let opts = Options::default();
//! let fwd = cpu::forward(&inputs, &opts).unwrap();
//! let grads = cpu::backward(&inputs, &opts, &fwd.lse, GradOutput::Scalar(1.0)).unwrap();
//! assert!(fwd.loss.is_finite());
//! assert_eq!(grads.de.len(), n * d);
//! ```
//!
//! NaN or Inf in E, C or the bias propagate to the loss and gradients as in PyTorch (a NaN logit
//! makes its token's lse, loss and gradient row NaN); they are not reported as errors.

pub mod cpu;
pub mod dtype;
pub mod error;
pub mod options;
pub mod outputs;
pub mod problem;
pub mod spec;
pub mod testing;

pub use dtype::{DType, Element, Real};
pub use error::{Error, Result};
pub use half::{bf16, f16};
pub use options::{Options, Reduction};
pub use outputs::{ForwardBuffers, ForwardOutput, ForwardScalars, GradBuffers, Gradients};
pub use problem::{
    check_grad_output, check_len as problem_check_len, effective_targets, GradOutput, HostInputs, Prepared, Shape,
};
