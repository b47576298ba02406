//! The kernel families and the modes a caller asks for: what a plan chooses between
//! ([`crate::plan`]) and a launch runs ([`crate::family`]'s launchers).

use flce_core::{DType, Shape};

use crate::compile::{Arch, KernelFile};

/// A family of kernels that computes the logits-dependent parts of the loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// cuBLAS vocabulary chunks of f32 logits + flce's reduction / gradient kernels.
    Cublas,
    /// flce's portable mma.sync tiles (sm_80+), logits never in memory.
    Sm80,
    /// Hopper TMA + wgmma tiles (sm_90a), logits never in memory.
    Sm90,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Cublas => "cublas",
            Family::Sm80 => "sm80",
            Family::Sm90 => "sm90",
        }
    }

    /// Whether the family runs on a GPU of this architecture (`sm_XY` or `sm_XYa`).
    pub fn supports(self, arch: &Arch) -> bool {
        match self {
            Family::Cublas => true,
            Family::Sm80 => arch.capability() >= (8, 0),
            Family::Sm90 => arch.0 == "sm_90a",
        }
    }

    /// The kernel files the family's forward and backward launch (besides the shared ones).
    pub fn kernel_files(self) -> [KernelFile; 2] {
        match self {
            Family::Cublas => [KernelFile::CublasStats, KernelFile::CublasGrad],
            Family::Sm80 => [KernelFile::Sm80Forward, KernelFile::Sm80Grad],
            Family::Sm90 => [KernelFile::Sm90Forward, KernelFile::Sm90Grad],
        }
    }
}

/// The fused family for a problem on a GPU: sm90 on sm_90a for 16-bit inputs whose rows are a
/// multiple of 16 bytes (TMA), sm80 otherwise.
pub fn fused_family(arch: &Arch, shape: Shape, dtype: DType) -> Family {
    let tma_rows = (shape.d * dtype.size_in_bytes()).is_multiple_of(16);
    if Family::Sm90.supports(arch) && dtype != DType::F32 && tma_rows {
        Family::Sm90
    } else {
        Family::Sm80
    }
}

/// How the caller asks the forward to compute the logits (the plan picks the family from it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ForwardMode {
    /// The fastest measured choice for the GPU ([`ForwardMode::resolve`]): the sm90 fused family
    /// where it runs (faster than cuBLAS chunks and without their workspace; H200: 1.12-1.14x the
    /// logits GEMM against 1.40-1.58x; at Gemma 2 with a softcap 15.9-16.0 ms against 19.8-20.6,
    /// with every option 16.4 against 23.8-23.9: journal v7, v28), cuBLAS chunks elsewhere (the
    /// sm80 fused kernel runs at ~4x the GEMM).
    #[default]
    Auto,
    /// The cuBLAS family: cuBLAS speed, a workspace of one chunk (the budget; by default 10% of
    /// the gradient bytes). Falls back to the fused family when the budget holds no chunk.
    CublasChunks,
    /// The fastest fused family the GPU allows ([`fused_family`]: sm90 on Hopper, sm80 elsewhere):
    /// no logits anywhere, workspace within 1 MB + 16 bytes per token (sm90 past 16k tokens: up to
    /// 16 bytes per token and vocabulary split, at most 16 splits: `plan::SM90_LARGE_N_TOKENS`).
    Fused,
    /// The portable sm80 fused family even where a faster one exists.
    FusedSm80,
}

/// How the caller asks the backward to get each chunk's logits back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackwardMode {
    /// The fastest measured choice ([`BackwardMode::resolve`]): the sm90 fused tiles on Hopper
    /// (H200, with the sm90 forward: fwd+bwd 63.6 / 57.6 / 60.0 ms at Gemma 2 / Llama 3 / Qwen 2.5
    /// against 72.3 / 63.2 / 63.4 with cuBLAS logits in the same run; with a softcap, each set of
    /// logit options in a module of its own, 63.7 / 55.6 at Gemma 2 / Llama 3 against 77.8 / 63.3:
    /// journal v10, v28), cuBLAS logits elsewhere.
    #[default]
    Auto,
    /// The cuBLAS family: a cuBLAS product writes the chunk's logits in f32, then an elementwise
    /// kernel forms G: three cuBLAS-speed products in all; 4 + dtype bytes of workspace per chunk
    /// element.
    CublasLogits,
    /// The fastest fused family the GPU allows (sm90 on Hopper, sm80 elsewhere): its tile kernel
    /// recomputes the logits and forms G in its epilogue (no f32 logits buffer, dtype bytes per
    /// chunk element).
    FusedTiles,
    /// The portable sm80 fused family even where a faster one exists.
    FusedSm80,
}

/// Parses a mode name as the Python API and the CLI spell it: "auto", "cublas", "fused" or "sm80".
fn parse_mode<M>(s: &str, what: &str, [auto, cublas, fused, sm80]: [M; 4]) -> Result<M, String> {
    match s {
        "auto" => Ok(auto),
        "cublas" => Ok(cublas),
        "fused" => Ok(fused),
        "sm80" => Ok(sm80),
        other => Err(format!("{what} '{other}': expected 'auto', 'cublas', 'fused' or 'sm80'")),
    }
}

impl std::str::FromStr for ForwardMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        use ForwardMode::*;
        parse_mode(s, "forward_mode", [Auto, CublasChunks, Fused, FusedSm80])
    }
}

impl std::str::FromStr for BackwardMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        use BackwardMode::*;
        parse_mode(s, "backward_mode", [Auto, CublasLogits, FusedTiles, FusedSm80])
    }
}

impl ForwardMode {
    /// [`ForwardMode::Auto`] made concrete, given what "fused" means on this GPU for this problem.
    pub fn resolve(self, fused: Family) -> ForwardMode {
        match self {
            ForwardMode::Auto if fused == Family::Sm90 => ForwardMode::Fused,
            ForwardMode::Auto => ForwardMode::CublasChunks,
            m => m,
        }
    }

    /// The family of a fused mode, given what "fused" means on this GPU for this problem.
    pub fn fused(self, fused: Family) -> Family {
        if self == ForwardMode::FusedSm80 {
            Family::Sm80
        } else {
            fused
        }
    }
}

impl BackwardMode {
    /// [`BackwardMode::Auto`] made concrete, given what "fused" means on this GPU for this problem.
    pub fn resolve(self, fused: Family) -> BackwardMode {
        match self {
            BackwardMode::Auto if fused == Family::Sm90 => BackwardMode::FusedTiles,
            BackwardMode::Auto => BackwardMode::CublasLogits,
            m => m,
        }
    }

    /// The family that forms G, given what "fused" means on this GPU for this problem.
    pub fn family(self, fused: Family) -> Family {
        match self.resolve(fused) {
            BackwardMode::Auto | BackwardMode::CublasLogits => Family::Cublas,
            BackwardMode::FusedTiles => fused,
            BackwardMode::FusedSm80 => Family::Sm80,
        }
    }
}
