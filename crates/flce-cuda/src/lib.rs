//! # flce-cuda
//!
//! The CUDA backend of flce: the fused forward and the exact backward of the linear
//! cross-entropy on NVIDIA GPUs from sm_80 (A100, RTX 30xx/40xx, H100/H200), with no N×V buffer.
//!
//! A call flows: caller → validation (flce-core, [`DeviceInputs::validate`]) → a plan made once
//! per shape ([`plan`]: family, chunks, passes, workspace regions, where each accumulator lives)
//! → the pass drivers (`forward.rs`, `backward.rs`) → the plan's kernel family ([`family`]:
//! cuBLAS chunks, or the sm80 mma.sync tiles; a Hopper family goes beside them) → kernels
//! launched by typed parameter structs ([`abi`], `runtime.rs`).
//!
//! - Kernels are CUDA C++ files in `kernels/` (common/, shared/, and one folder per family),
//!   compiled at first use by NVRTC for the GPU's own architecture and cached on disk
//!   ([`compile`]); the crate builds without a CUDA toolkit and finds libcuda, libnvrtc and
//!   libcublas at run time ([`library`]). The structs, dtype codes and geometry the kernels use
//!   are generated from Rust ([`abi`], [`geometry`]).
//! - [`CudaLoss`] holds the compiled kernels and a cuBLAS handle for one device. Its `forward` and
//!   `backward` take raw device pointers, the caller's stream, a caller-owned workspace and the
//!   plan (what the PyTorch binding uses); `forward_host` / `backward_host` are owned
//!   conveniences for Rust users with host data.
//!
//! Layers, as in cudarc: raw FFI (cudarc's `sys`), checked calls (`error::Check` gives each
//! failure its call and context), safe types ([`DeviceInputs`], [`DeviceBuffer`], [`CudaLoss`]).

pub mod abi;
pub mod bench;
mod blas;
pub mod cache;
pub mod compile;
mod context;
mod device;
pub mod error;
pub mod family;
pub mod geometry;
mod host;
mod launch;
pub mod library;
mod loss;
pub mod modes;
pub mod nccl;
mod pass;
pub mod plan;
mod planning;
mod runtime;
pub mod tuning;
pub mod vocab_parallel;

pub use abi::DevPtr;
pub use device::{DeviceForwardOutputs, DeviceGradOutput, DeviceGrads, DeviceInputs, Stream, Workspace};
pub use error::{CudaError, STATUS_BAD_CLASS_WEIGHT, STATUS_OK};
pub use host::{DeviceBuffer, UploadedInputs};
pub use loss::CudaLoss;
pub use modes::{BackwardMode, Family, ForwardMode};
pub use plan::{BackwardPlan, ForwardBackwardPlan, ForwardPlan, TailReach, ThreeProductPlan, VocabSlicePlan, Wanted};
pub use planning::{BackwardConfig, ForwardConfig};
pub use runtime::Kernel;
