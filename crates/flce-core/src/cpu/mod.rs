//! The CPU backend: `reference` is the f64 oracle (materialises the logits), `fused` the fast
//! path that never holds N×V. Both implement the same function; `fused` is what the public API
//! runs on host data, through the steps of `vocab_parallel` (partials over a vocabulary slice,
//! merge, finish; backward on a slice) over one slice holding the whole vocabulary.
//! `three_product` is the three-product pass (loss and gradients in one pass over token chunks),
//! the executable specification of the CUDA one; on a CPU it is not faster than `fused`
//! (benchmarks/results/2026-11-30-cpu-bench/).

pub mod fused;
mod gemm;
pub mod materialized;
mod pool;
pub mod reference;
pub mod three_product;
pub mod vocab_parallel;

pub use fused::{backward, backward_into, forward, forward_into};
