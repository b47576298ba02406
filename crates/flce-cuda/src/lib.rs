//! # flce-cuda
//!
//! The CUDA backend of flce: the fused forward and the exact backward of the linear
//! cross-entropy on NVIDIA GPUs from sm_80 (A100, RTX 30xx/40xx, H100/H200), with no N×V buffer.
//!
//! - Kernels are CUDA C++ files in `kernels/`, compiled at first use by NVRTC for the GPU's own
//!   architecture and cached on disk ([`compile`]); the crate builds without a CUDA toolkit and
//!   finds libcuda, libnvrtc and libcublas at run time ([`library`]).
//! - [`CudaLoss`] holds the compiled kernels and a cuBLAS handle for one device. Its `forward` and
//!   `backward` take raw device pointers, the caller's stream and a caller-owned workspace (what
//!   the PyTorch binding uses); `forward_host` / `backward_host` are owned conveniences for Rust
//!   users with host data.
//! - Tiling and workspace sizing live in [`plan`]; parameter structs shared with the kernels in
//!   [`params`].
//!
//! Layers, as in cudarc: raw FFI (cudarc's `sys`), checked calls ([`error::Check`] gives each
//! failure its call and context), safe types ([`DeviceInputs`], [`DeviceBuffer`], [`CudaLoss`]).

pub mod bench;
pub mod compile;
pub mod error;
mod host;
mod launch;
pub mod library;
pub mod params;
pub mod plan;

pub use error::CudaError;
pub use host::{DeviceBuffer, UploadedInputs};
pub use launch::{
    BackwardConfig, CudaLoss, DeviceForwardOutputs, DeviceGradOutput, DeviceGrads, DeviceInputs, ForwardConfig, Stream,
    Workspace,
};
pub use plan::{BackwardMode, ForwardMode, Wanted};
