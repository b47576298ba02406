//! Owned convenience entry points for Rust users with host data: upload, run on a stream of our
//! own, download. Targets are validated on the host first, so a bad target is the same typed
//! error as on the CPU path.

use cudarc::driver::result as drv;
use cudarc::driver::sys as cu;
use flce_core::{check_grad_output, Element, ForwardOutput, GradOutput, Gradients, HostInputs, Options, Result};

use crate::abi::DevPtr;
use crate::device::{DeviceForwardOutputs, DeviceGradOutput, DeviceGrads, DeviceInputs, Workspace};
use crate::error::{Check, CudaError, CudaResult};
use crate::loss::CudaLoss;
use crate::planning::{BackwardConfig, ForwardConfig};

/// A device allocation freed on drop.
pub struct DeviceBuffer {
    ptr: DevPtr,
    bytes: usize,
}

impl DeviceBuffer {
    /// Allocate `bytes` (at least 1) on the current context.
    pub fn new(bytes: usize) -> CudaResult<Self> {
        // SAFETY: plain allocation on the current context.
        let ptr = unsafe { drv::malloc_sync(bytes.max(1)) }.check(&format!("cuMemAlloc({bytes} bytes)"))?;
        Ok(DeviceBuffer { ptr, bytes })
    }

    /// Allocate and fill from a host slice.
    pub fn from_slice<T: Copy>(data: &[T]) -> CudaResult<Self> {
        let b = Self::new(std::mem::size_of_val(data))?;
        if !data.is_empty() {
            // SAFETY: the allocation holds exactly these bytes.
            unsafe { drv::memcpy_htod_sync(b.ptr, data) }.check("cuMemcpyHtoD")?;
        }
        Ok(b)
    }

    /// Fill with a repeated 32-bit pattern (poisoning outputs in tests).
    pub fn fill_u32(&self, pattern: u32) -> CudaResult<()> {
        // SAFETY: in bounds of the allocation.
        unsafe { cu::cuMemsetD32_v2(self.ptr, pattern, self.bytes / 4) }.result().check("cuMemsetD32")
    }

    pub fn ptr(&self) -> DevPtr {
        self.ptr
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copy the first `out.len()` elements back to the host (synchronous).
    pub fn read<T: Copy>(&self, out: &mut [T]) -> CudaResult<()> {
        assert!(std::mem::size_of_val(out) <= self.bytes, "read past the allocation");
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: in bounds, checked above.
        unsafe { drv::memcpy_dtoh_sync(out, self.ptr) }.check("cuMemcpyDtoH")
    }

    pub fn to_vec<T: Copy + Default>(&self, len: usize) -> CudaResult<Vec<T>> {
        let mut v = vec![T::default(); len];
        self.read(&mut v)?;
        Ok(v)
    }

    pub fn workspace(&self) -> Workspace {
        Workspace { ptr: self.ptr, bytes: self.bytes }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by us; errors at teardown are not actionable.
        unsafe {
            let _ = drv::free_sync(self.ptr);
        }
    }
}

/// The caller's host inputs uploaded once.
pub struct UploadedInputs {
    pub e: DeviceBuffer,
    pub c: DeviceBuffer,
    pub bias: Option<DeviceBuffer>,
    pub targets: DeviceBuffer,
    pub class_weights: Option<DeviceBuffer>,
    pub inputs: DeviceInputs,
}

impl CudaLoss {
    /// Validate host inputs like the CPU path, then upload them.
    pub fn upload<T: Element>(&self, x: &HostInputs<'_, T>, opts: &Options) -> Result<UploadedInputs> {
        x.prepare(opts)?;
        self.context().bind_to_thread().check("cuCtxSetCurrent")?;
        let e = DeviceBuffer::from_slice(x.e)?;
        let c = DeviceBuffer::from_slice(x.c)?;
        let bias = x.bias.map(DeviceBuffer::from_slice).transpose()?;
        let targets = DeviceBuffer::from_slice(x.targets)?;
        let class_weights = x.class_weights.map(DeviceBuffer::from_slice).transpose()?;
        let inputs = DeviceInputs {
            shape: x.shape,
            dtype: T::DTYPE,
            e: e.ptr(),
            c: c.ptr(),
            bias: bias.as_ref().map(|b| b.ptr()),
            targets: targets.ptr(),
            class_weights: class_weights.as_ref().map(|b| b.ptr()),
        };
        Ok(UploadedInputs { e, c, bias, targets, class_weights, inputs })
    }

    fn sync(&self) -> CudaResult<()> {
        self.context().synchronize().check("cuCtxSynchronize")
    }

    /// Forward on host data (owned outputs).
    pub fn forward_host<T: Element>(&self, x: &HostInputs<'_, T>, opts: &Options) -> Result<ForwardOutput> {
        let up = self.upload(x, opts)?;
        self.forward_uploaded(&up, opts)
    }

    /// Forward on uploaded inputs; synchronises and copies the outputs back.
    pub fn forward_uploaded(&self, up: &UploadedInputs, opts: &Options) -> Result<ForwardOutput> {
        let n = up.inputs.shape.n;
        let lse = DeviceBuffer::new(4 * n)?;
        let ptl = opts.wants_per_token_loss().then(|| DeviceBuffer::new(4 * n)).transpose()?;
        let scalars = DeviceBuffer::new(16)?;
        let status = DeviceBuffer::new(4)?;
        let config = ForwardConfig::default();
        let plan = self.forward_plan(up.inputs.shape, up.inputs.dtype, config);
        let ws = DeviceBuffer::new(plan.workspace_bytes)?;
        let out = DeviceForwardOutputs {
            lse: lse.ptr(),
            per_token_loss: ptl.as_ref().map(|b| b.ptr()),
            scalars: scalars.ptr(),
            status: status.ptr(),
        };
        // SAFETY: every buffer above is live, sized for the shape, and synchronised before drop.
        unsafe { self.forward(&up.inputs, opts, &out, ws.workspace(), &plan, std::ptr::null_mut())? };
        self.sync()?;
        let st: Vec<i32> = status.to_vec(1)?;
        if let Some(bad) = CudaError::from_status(st[0], up.inputs.shape.v) {
            return Err(bad.into());
        }
        let sc: Vec<f32> = scalars.to_vec(4)?;
        Ok(ForwardOutput {
            loss: sc[0],
            lse: lse.to_vec(n)?,
            per_token_loss: ptl.map(|b| b.to_vec(n)).transpose()?,
            accuracy: opts.return_accuracy.then_some(sc[1]),
        })
    }

    /// Backward on host data (owned gradients: dE, dC, and db when the inputs have a bias).
    pub fn backward_host<T: Element>(
        &self,
        x: &HostInputs<'_, T>,
        opts: &Options,
        lse: &[f32],
        grad_output: GradOutput<'_>,
        config: BackwardConfig,
    ) -> Result<Gradients<T>> {
        let up = self.upload(x, opts)?;
        self.backward_uploaded(&up, opts, lse, grad_output, config)
    }

    /// Backward on uploaded inputs; synchronises and copies the gradients back.
    pub fn backward_uploaded<T: Element>(
        &self,
        up: &UploadedInputs,
        opts: &Options,
        lse: &[f32],
        grad_output: GradOutput<'_>,
        config: BackwardConfig,
    ) -> Result<Gradients<T>> {
        let s = up.inputs.shape;
        flce_core::problem_check_len("lse", "[N]", s.n, lse.len())?;
        let (go, gop): (DeviceBuffer, fn(DevPtr) -> DeviceGradOutput) = match grad_output {
            GradOutput::Scalar(g) => {
                check_grad_output(opts.reduction, s.n, None)?;
                (DeviceBuffer::from_slice(&[g])?, DeviceGradOutput::Scalar)
            }
            GradOutput::PerToken(g) => {
                check_grad_output(opts.reduction, s.n, Some(g.len()))?;
                (DeviceBuffer::from_slice(g)?, DeviceGradOutput::PerToken)
            }
        };
        let lse_d = DeviceBuffer::from_slice(lse)?;
        let es = std::mem::size_of::<T>();
        let de = DeviceBuffer::new(s.n * s.d * es)?;
        let dc = DeviceBuffer::new(s.v * s.d * es)?;
        let db = up.bias.as_ref().map(|_| DeviceBuffer::new(s.v * es)).transpose()?;
        let grads = DeviceGrads { de: Some(de.ptr()), dc: Some(dc.ptr()), dbias: db.as_ref().map(|b| b.ptr()) };
        let plan = self.backward_plan(s, T::DTYPE, grads.wanted(), config)?;
        let ws = DeviceBuffer::new(plan.workspace_bytes)?;
        // SAFETY: every buffer above is live, sized for the shape, and synchronised before drop.
        unsafe {
            self.backward(
                &up.inputs,
                opts,
                lse_d.ptr(),
                gop(go.ptr()),
                &grads,
                ws.workspace(),
                &plan,
                std::ptr::null_mut(),
            )?
        };
        self.sync()?;
        Ok(Gradients {
            de: de.to_vec(s.n * s.d)?,
            dc: dc.to_vec(s.v * s.d)?,
            dbias: db.map(|b| b.to_vec(s.v)).transpose()?,
        })
    }
}
