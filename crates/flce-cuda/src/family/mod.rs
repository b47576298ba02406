//! Kernel families: each owns its kernels (kernels/<family>/) and its launchers (this folder),
//! and says what it supports. The plan chooses the family once ([`crate::plan`]), from the
//! caller's mode, the problem and the budget; the forward and backward drivers
//! ([`crate::forward`], [`crate::backward`]) run the plan's family through two seams:
//!
//! - forward: `forward_partials` leaves `plan.splits` packed RowStats per token and the target
//!   logits in the workspace; the shared finish kernel (kernels/shared/finish.cu) merges them.
//! - backward: `grad_chunk` writes G (input dtype) and the db column sums of one
//!   (token chunk × vocabulary chunk); the driver's cuBLAS products turn G into dE and dC.
//!
//! Families today:
//! - [`Family::Cublas`] (kernels/cublas): cuBLAS writes f32 logits of a chunk, a reduction or
//!   elementwise kernel consumes them. Any GPU cuBLAS runs on; workspace = the chunk.
//! - [`Family::Sm80`] (kernels/sm80): flce's mma.sync tile main loop with pluggable epilogues,
//!   no logits in memory (forward workspace ≤ 1 MB + 16 bytes per token). sm_80 and newer.
//!
//! A Hopper family (kernels/sm90: wgmma + TMA, warp-specialised) goes beside them: a variant
//! here, its `supports`, its two seams in family/sm90.rs, and the planner's choice.

pub(crate) mod cublas;
pub(crate) mod sm80;

use crate::compile::{Arch, KernelFile};

/// A family of kernels that computes the logits-dependent parts of the loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// cuBLAS vocabulary chunks of f32 logits + flce's reduction / gradient kernels.
    Cublas,
    /// flce's portable mma.sync tiles (sm_80+), logits never in memory.
    Sm80,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Cublas => "cublas",
            Family::Sm80 => "sm80",
        }
    }

    /// Whether the family runs on a GPU of this architecture (`sm_XY` or `sm_XYa`).
    pub fn supports(self, arch: &Arch) -> bool {
        match self {
            Family::Cublas => true,
            Family::Sm80 => arch.capability() >= (8, 0),
        }
    }

    /// The kernel files the family's forward and backward launch (besides the shared ones).
    pub fn kernel_files(self) -> [KernelFile; 2] {
        match self {
            Family::Cublas => [KernelFile::CublasStats, KernelFile::CublasGrad],
            Family::Sm80 => [KernelFile::Sm80Forward, KernelFile::Sm80Grad],
        }
    }
}

/// How the caller asks the forward to compute the logits (the plan picks the family from it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ForwardMode {
    /// The cuBLAS family: cuBLAS speed, a workspace of one chunk (the budget; by default 10% of
    /// the gradient bytes). Falls back to the fused family when the budget holds no chunk.
    #[default]
    CublasChunks,
    /// The sm80 family's fused tile kernel: no logits anywhere, workspace within 1 MB + 16 bytes
    /// per token, at the speed of flce's portable (mma.sync) main loop.
    Fused,
}

/// How the caller asks the backward to get each chunk's logits back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackwardMode {
    /// The cuBLAS family: a cuBLAS product writes the chunk's logits in f32, then an elementwise
    /// kernel forms G: three cuBLAS-speed products in all; 4 + dtype bytes of workspace per chunk
    /// element.
    #[default]
    CublasLogits,
    /// The sm80 family: flce's tile kernel recomputes the logits and forms G in its epilogue (no
    /// f32 logits buffer, dtype bytes per chunk element), at the speed of its main loop.
    FusedTiles,
}

/// Parses a mode name as the Python API and the CLI spell it: "cublas" or "fused".
fn parse_mode<M>(s: &str, what: &str, cublas: M, fused: M) -> Result<M, String> {
    match s {
        "cublas" => Ok(cublas),
        "fused" => Ok(fused),
        other => Err(format!("{what} '{other}': expected 'cublas' or 'fused'")),
    }
}

impl std::str::FromStr for ForwardMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_mode(s, "forward_mode", ForwardMode::CublasChunks, ForwardMode::Fused)
    }
}

impl std::str::FromStr for BackwardMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_mode(s, "backward_mode", BackwardMode::CublasLogits, BackwardMode::FusedTiles)
    }
}

impl BackwardMode {
    pub fn family(self) -> Family {
        match self {
            BackwardMode::CublasLogits => Family::Cublas,
            BackwardMode::FusedTiles => Family::Sm80,
        }
    }
}
