//! # flce
//!
//! A fused linear cross-entropy: the loss of a language model's last layer,
//! `cross_entropy(E·Cᵀ + b, targets)`, and its exact gradients, computed without ever holding
//! the N×V logits.
//!
//! This is the public API. Where the data lives picks the backend: host slices
//! ([`HostInputs`]) run on the CPU (the [`cpu`] module's fused path) or, asked for with
//! [`Device::Cuda`], are uploaded to the GPU; device buffers ([`cuda::DeviceInputs`]) run on the
//! CUDA backend ([`cuda::CudaLoss`]). Options, validation and errors are the same for every
//! backend.
//!
//! ```
//! use flce::{Device, GradOutput, HostInputs, Options};
//! let (n, d, v) = (2, 3, 4);
//! let e = vec![0.5f32; n * d];
//! let c: Vec<f32> = (0..v * d).map(|i| i as f32 * 0.1).collect();
//! let targets = [3i64, 0];
//! let out = flce::loss_and_grads(&HostInputs::new(&e, &c, &targets, d), &Options::default(), Device::Cpu).unwrap();
//! assert!(out.forward.loss > 0.0);
//! ```

pub use flce_core::{
    bf16, cpu, effective_targets, f16, spec, testing, DType, Element, Error, ForwardBuffers, ForwardOutput,
    ForwardScalars, GradBuffers, GradOutput, Gradients, HostInputs, Options, Prepared, Real, Reduction, Result, Shape,
};

/// The CUDA backend (raw device-pointer API, workspace planning, timing helpers).
pub use flce_cuda as cuda;

/// Where a computation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    Cpu,
    /// A CUDA device by ordinal.
    Cuda(usize),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "CPU (fused, {} threads)", rayon_threads()),
            Device::Cuda(i) => write!(f, "CUDA device {i}"),
        }
    }
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The devices this process can use, best first: every CUDA device the driver reports, then the
/// CPU.
pub fn available_devices() -> Vec<Device> {
    let mut v: Vec<Device> = (0..cuda::CudaLoss::device_count()).map(Device::Cuda).collect();
    v.push(Device::Cpu);
    v
}

/// The CUDA backend for `ordinal`, created once per process and device.
pub fn cuda_backend(ordinal: usize) -> Result<std::sync::Arc<cuda::CudaLoss>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    /// The process that created the backends, and the backends by device ordinal.
    type Backends = (u32, HashMap<usize, Arc<cuda::CudaLoss>>);
    static BACKENDS: OnceLock<Mutex<Backends>> = OnceLock::new();
    let mut guard = BACKENDS
        .get_or_init(|| Mutex::new((std::process::id(), HashMap::new())))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (created_in, map) = &mut *guard;
    if !map.is_empty() {
        not_forked(*created_in, std::process::id())?;
    } else {
        *created_in = std::process::id();
    }
    if let Some(b) = map.get(&ordinal) {
        return Ok(b.clone());
    }
    let b = Arc::new(cuda::CudaLoss::new(ordinal)?);
    map.insert(ordinal, b.clone());
    Ok(b)
}

/// CUDA state does not survive `fork`: a child of the process that initialised it gets a clear
/// error instead of failing driver calls (or a hang).
fn not_forked(created_in: u32, now: u32) -> Result<()> {
    if created_in != now {
        return Err(Error::Unsupported(format!(
            "flce's CUDA backend was initialised in process {created_in}; this process ({now}) is a fork of it, and \
             CUDA cannot be used after fork. Use the 'spawn' start method for workers (PyTorch: \
             multiprocessing_context='spawn'), or keep CUDA work in the parent"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fork_of_the_process_that_initialised_cuda_gets_a_clear_error() {
        assert!(super::not_forked(7, 7).is_ok());
        let err = super::not_forked(7, 8).unwrap_err().to_string();
        assert!(err.contains("fork") && err.contains("spawn"), "{err}");
    }
}

/// Forward and backward outputs of one call.
#[derive(Clone, Debug)]
pub struct LossAndGrads<T: Element> {
    pub forward: ForwardOutput,
    pub grads: Gradients<T>,
}

/// Loss and gradients for host inputs on `device` (grad_output 1 for mean/sum, all ones for
/// reduction none: the gradient of the plain loss).
pub fn loss_and_grads<T: Element>(
    inputs: &HostInputs<'_, T>,
    opts: &Options,
    device: Device,
) -> Result<LossAndGrads<T>> {
    let ones;
    let go = if opts.reduction == Reduction::None {
        ones = vec![1.0f32; inputs.shape.n];
        GradOutput::PerToken(&ones)
    } else {
        GradOutput::Scalar(1.0)
    };
    match device {
        Device::Cpu => {
            let forward = cpu::forward(inputs, opts)?;
            let grads = cpu::backward(inputs, opts, &forward.lse, go)?;
            Ok(LossAndGrads { forward, grads })
        }
        Device::Cuda(i) => {
            let be = cuda_backend(i)?;
            let up = be.upload(inputs, opts)?;
            let forward = be.forward_uploaded(&up, opts)?;
            let config = cuda::BackwardConfig::default();
            let grads = be.backward_uploaded(&up, opts, &forward.lse, go, config)?;
            Ok(LossAndGrads { forward, grads })
        }
    }
}

/// The README's Rust example, compiled and run by `cargo test` (its other code blocks are tagged
/// with their own languages, which rustdoc leaves alone).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}
