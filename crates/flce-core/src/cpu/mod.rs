//! The CPU backend: `reference` is the f64 oracle (materialises the logits), `fused` the fast
//! path that never holds N×V. Both implement the same function; `fused` is what the public API
//! runs on host data.

pub mod fused;
pub mod materialized;
pub mod reference;

pub use fused::{backward, backward_into, forward, forward_into};
