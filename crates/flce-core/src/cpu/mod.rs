//! The CPU backend: `reference` is the f64 oracle (materialises the logits), `fused` the fast
//! path that never holds N×V. Both implement the same function; `fused` is what the public API
//! runs on host data, through the loss phases of `phases` (partials over a vocabulary range,
//! merge, finish; backward on a vocabulary slice). `step` is the three-product pass (loss and
//! gradients in one pass over token chunks), the executable specification of the CUDA one; on
//! this hardware it is not faster than `fused` (benchmarks/cpu-2026-11-30-step/).

pub mod fused;
mod gemm;
pub mod materialized;
pub mod phases;
mod pool;
pub mod reference;
pub mod step;

pub use fused::{backward, backward_into, forward, forward_into};
