//! Kernel families: each owns its kernels (`kernels/<family>/`) and its launchers (this folder),
//! and says what it supports. The plan chooses the family once ([`crate::plan`]), from the
//! caller's mode, the problem and the budget; the forward and backward drivers
//! (`crate::forward`, `crate::backward`) run the plan's family through two seams:
//!
//! - forward: `forward_partials` leaves `plan.splits` packed RowStats per token and the target
//!   logits in the workspace; the shared finish kernel (kernels/shared/finish.cu) merges them.
//! - backward: `grad_chunk` writes G (input dtype) and the db column sums of one
//!   (token chunk × vocabulary chunk); the driver's cuBLAS products turn G into dE and dC.
//!
//! Families today:
//! - [`Family::Cublas`](crate::modes::Family::Cublas) (kernels/cublas): cuBLAS writes f32 logits of a chunk, a reduction or
//!   elementwise kernel consumes them. Any GPU cuBLAS runs on; workspace = the chunk.
//! - [`Family::Sm80`](crate::modes::Family::Sm80) (kernels/sm80): flce's mma.sync tile main loop with pluggable epilogues,
//!   no logits in memory (forward workspace ≤ 1 MB + 16 bytes per token). sm_80 and newer.
//!
//! - [`Family::Sm90`](crate::modes::Family::Sm90) (kernels/sm90): TMA + wgmma, warp-specialised, 128 × 256 tiles; the same
//!   seams and workspace layouts as sm80, so a plan made for it runs on sm80 where a call's
//!   pointers do not suit TMA. sm_90a only, 16-bit inputs with 16-byte rows.
//!
//! "fused" means the fastest fused family the GPU and problem allow
//! ([`crate::modes::fused_family`]); the `Sm80` modes force the portable one (to test it on Hopper).
//! The families and modes themselves, which plans choose between, are in [`crate::modes`].

pub(crate) mod cublas;
pub(crate) mod sm80;
pub(crate) mod sm90;

/// The sm90 family's TMA descriptors (for tests/gpu/mn_major.rs, which checks their layout).
pub use sm90::tensor_map_pitched;
