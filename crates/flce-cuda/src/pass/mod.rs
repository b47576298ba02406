//! The pass drivers: each a set of [`crate::CudaLoss`] methods that run one plan kind's work list
//! on the caller's stream — the recomputing forward and backward, the three-product pass, and the
//! vocabulary-slice pass (three products over the classifier's first rows, the backward's four over
//! the rest; `CudaLoss::forward_backward`, in three_product.rs, runs either, as its plan is). They
//! launch through the plan's kernel family ([`crate::family`]) and never plan.

pub(crate) mod backward;
mod backward_steps;
pub(crate) mod forward;
pub(crate) mod three_product;
mod vocab_slice;
