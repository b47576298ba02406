//! # flce-memory
//!
//! What fits on a given GPU: the memory of one training step of a decoder model (weights,
//! gradients, optimizer states, activations with and without checkpointing and offload, the loss
//! with plain PyTorch, torch.compile or flce, the CUDA context and the allocator's slack) and the
//! longest context that fits, for each combination. The `flce plan` command and `flce.plan(...)`
//! in Python print it.
//!
//! ```
//! use flce_memory::{plan, Model, Request};
//! let model = Model::built_in("Llama-3.2-1B").unwrap();
//! let req = Request::new(10.0, 4096, 1, "adamw", 16).unwrap();
//! let rows = plan(&model, &req);
//! assert_eq!(rows.len(), 9); // 3 losses × 3 activation modes
//! ```

mod estimate;
mod model;
mod report;
mod suggest;
mod svg;

pub use estimate::{
    estimate, layer_activation_bytes_per_token, longest_context, mlp_activation_bytes_per_token, Activations,
    Attention, Breakdown, Loss, Optimizer, Setup, ALLOCATOR_SLACK, CUDA_CONTEXT_BYTES,
};
pub use model::Model;
pub use report::{plan, table, PlanRow, Request};
pub use suggest::{ladder, suggest, PatchOptions};
pub use svg::{curves, doubling_seqs, svg, write_chart, Curve};

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("unknown model '{name}' (built in: {known}; or give a Hugging Face config.json)")]
    UnknownModel { name: String, known: String },
    #[error("config.json: {0}")]
    Config(String),
    #[error("{0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests;
