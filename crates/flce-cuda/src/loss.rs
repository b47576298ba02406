//! [`CudaLoss`]: the CUDA backend on one device — its context, compiled kernels, cuBLAS handle and
//! tuning — and what every pass shares: the launch context ([`crate::launch::Call`]), target
//! preparation and the one rounding of an f32 accumulator. The planning calls are in
//! `planning.rs`, the passes in `pass/`, each family's launchers in [`crate::family`].

use std::sync::Arc;

use cudarc::driver::sys as cu;
use cudarc::driver::CudaContext;
use flce_core::{DType, Error, Options, Result, Shape};

use crate::abi::{DevPtr, LogitParams, LossConstants, PrepParams, ToElemParams, WeightCheckParams};
use crate::blas::Blas;
use crate::compile::{Arch, KernelFile};
use crate::context::BoundContext;
use crate::device::{DeviceInputs, Stream, Workspace};
use crate::error::Check;
use crate::error::STATUS_OK;
use crate::launch::Call;
use crate::library::{require, Library};
use crate::modes::Family;
use crate::plan;
use crate::runtime::Kernels;
use crate::tuning::Tuning;

/// The CUDA backend on one device: compiled kernels, a cuBLAS handle, the planner and the passes.
pub struct CudaLoss {
    ctx: Arc<CudaContext>,
    arch: Arch,
    sm_count: usize,
    /// What the plans and launches are tuned with: [`Tuning::from_env`], or what a test asked for
    /// ([`CudaLoss::with_tuning`] and the narrower setters).
    pub(crate) tuning: Tuning,
    name: String,
    pub(crate) kernels: Kernels,
    pub(crate) blas: Blas,
}

impl CudaLoss {
    /// The backend on device `ordinal` (its primary context, as PyTorch uses).
    pub fn new(ordinal: usize) -> Result<Self> {
        require(Library::Driver)?;
        let ctx = CudaContext::new(ordinal).check("creating the CUDA context")?;
        // We order work ourselves on the caller's stream; cudarc's event tracking would add
        // synchronisation we do not want.
        // SAFETY: no cudarc-managed buffers are shared across streams by this backend.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability().check("cuDeviceGetAttribute(compute capability)")?;
        let arch = Arch::for_capability(major, minor);
        if !Family::Sm80.supports(&arch) {
            return Err(Error::Unsupported(format!(
                "flce's CUDA kernels need compute capability 8.0 or newer (mma.sync bf16); this GPU is {major}.{minor}"
            )));
        }
        let sm_count = ctx
            .attribute(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .check("cuDeviceGetAttribute(multiprocessor count)")? as usize;
        let name = ctx.name().check("cuDeviceGetName")?;
        let kernels = Kernels::new(ctx.clone(), arch.clone());
        let tuning = Tuning::from_env();
        Ok(CudaLoss { ctx, arch, sm_count, tuning, name, kernels, blas: Blas::default() })
    }

    /// Number of CUDA devices (0 when the driver is missing).
    pub fn device_count() -> usize {
        if require(Library::Driver).is_err() {
            return 0;
        }
        CudaContext::device_count().map(|n| n as usize).unwrap_or(0)
    }

    pub fn device_name(&self) -> &str {
        &self.name
    }
    pub fn arch(&self) -> &Arch {
        &self.arch
    }
    pub fn sm_count(&self) -> usize {
        self.sm_count
    }

    /// This backend, planning as if its GPU had `sms` multiprocessors (at least 1): the GPU tests
    /// use it to run a big GPU's schedules — several token tiles per sm90 block — on small shapes.
    #[doc(hidden)]
    pub fn planning_for_sms(mut self, sms: usize) -> Self {
        self.sm_count = sms.max(1);
        self
    }

    /// The tuning this backend plans and launches with.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// This backend, planning and launching with `tuning` instead of the knobs'.
    #[doc(hidden)]
    pub fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// The sm90 grids' tuning this backend plans with.
    pub fn sm90_tuning(&self) -> plan::Sm90Tuning {
        self.tuning.sm90
    }

    /// This backend, planning its sm90 grids with `tuning` instead of the knobs' (the GPU tests
    /// run cases with pairs of token tiles in clusters of 2 this way, whatever the default).
    #[doc(hidden)]
    pub fn with_sm90_tuning(mut self, tuning: plan::Sm90Tuning) -> Self {
        self.tuning.sm90 = tuning;
        self
    }

    /// This backend, planning backwards that want dE and dC (16-bit inputs) in two passes, dE in
    /// a pass of its own ([`plan::with_de_pass`]) always (`Some(true)`), never, or where it pays
    /// (`None`), whatever the knob says (the GPU tests' "de-pass" cases, and the "long-tail" and
    /// "de-head" cases, which test the one pass's tails).
    #[doc(hidden)]
    pub fn with_de_pass(mut self, on: Option<bool>) -> Self {
        self.tuning.de_pass = on;
        self
    }

    /// This backend, cutting one-token-chunk backward plans with dE's accumulator in dC's tail
    /// into token chunks ([`plan::with_token_chunks`]) wherever it can (`Some(true)`), never, or
    /// where the model has it faster (`None`), whatever the knob says (the GPU tests'
    /// "token-chunks" cases).
    #[doc(hidden)]
    pub fn with_token_chunks(mut self, on: Option<bool>) -> Self {
        self.tuning.token_chunks = on;
        self
    }

    /// [`check_device_pointers`](crate::device::check_device_pointers) on this backend's GPU, for
    /// the pointer arguments of an entry point (after [`CudaLoss::call`] bound the context).
    pub(crate) fn check_pointers(&self, args: impl IntoIterator<Item = (&'static str, Option<DevPtr>)>) -> Result<()> {
        crate::device::check_device_pointers(self.ctx.ordinal(), args)
    }
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Compile (or fetch from the disk cache) and load every kernel the default families use for
    /// `dtype` now, so the first call does not pay for it. Returns how many kernel files were
    /// already loaded or came from the disk cache.
    pub fn warm_up(&self, dtype: DType) -> Result<usize> {
        let mut cached = 0;
        let files = [KernelFile::Prep, KernelFile::Finish, KernelFile::Accumulate];
        // ForwardMode::Auto's forward on Hopper is the sm90 family's
        let sm90_forward = Some(KernelFile::Sm90Forward).filter(|f| f.builds_for(&self.arch, dtype));
        for file in files.into_iter().chain(Family::Cublas.kernel_files()).chain(sm90_forward) {
            cached += self.kernels.load(file, dtype)?.1 as usize;
        }
        Ok(cached)
    }

    /// The plan was made for this call: same shape and dtype, a family this device runs.
    pub(crate) fn check_plan(&self, x: &DeviceInputs, shape: Shape, dtype: DType, family: Family) -> Result<()> {
        if shape != x.shape || dtype != x.dtype {
            return Err(Error::InvalidOption {
                name: "plan",
                value: format!("{shape} {dtype}"),
                reason: "the plan was made for another shape or dtype than the inputs",
            });
        }
        if !family.supports(&self.arch) {
            return Err(Error::Unsupported(format!("the {} family does not run on {}", family.name(), self.arch.0)));
        }
        Ok(())
    }

    pub(crate) fn logit_params(x: &DeviceInputs, k: LossConstants, targets: DevPtr) -> LogitParams {
        LogitParams {
            k,
            e: x.e,
            c: x.c,
            bias: x.bias.unwrap_or(0),
            class_w: x.class_weights.unwrap_or(0),
            targets,
            aligned: x.rows_aligned() as i32,
        }
    }

    /// Effective targets (shift, ignore_index) into `out` \[N\] i32, with the status word reset and
    /// then set to the first bad class weight or, failing that, the first out-of-range target
    /// (common/types.cuh; bad class weights make every target TARGET_OUT_OF_RANGE).
    ///
    /// # Safety
    /// `out` holds N i32 and `status` one, on `stream`; `x` as for [`CudaLoss::forward`].
    pub(crate) unsafe fn prep_targets(
        &self,
        x: &DeviceInputs,
        k: LossConstants,
        out: DevPtr,
        status: DevPtr,
        stream: Stream,
    ) -> Result<()> {
        self.kernels.fill_i32(status, STATUS_OK, 1, stream)?;
        if let Some(class_w) = x.class_weights {
            self.kernels.launch(x.dtype, &WeightCheckParams { class_w, v: k.v, status }, stream)?;
        }
        self.kernels.launch(x.dtype, &PrepParams { k, targets: x.targets, out, status }, stream)?;
        Ok(())
    }

    /// Round `count` f32 at `src` into the input dtype at `dst` (the one rounding of an
    /// accumulator).
    ///
    /// # Safety
    /// Both buffers valid for `count` elements on `stream`.
    pub(crate) unsafe fn round_into(
        &self,
        dtype: DType,
        src: DevPtr,
        dst: DevPtr,
        count: usize,
        stream: Stream,
    ) -> Result<()> {
        self.round_scaled_into(dtype, src, dst, count, 0, stream)
    }

    /// `count` elements of `dtype` at `data` times the f32 at `scale`, in place (flce_scale_grads,
    /// which returns at once when it is 1), the context bound by the caller: the backward's α on
    /// an f32 dE its products filled without it, where that dE is the output (f32 inputs), and
    /// [`CudaLoss::scale_gradients`].
    ///
    /// # Safety
    /// `data` valid for `count` elements and `scale` for one f32 on `stream`.
    pub(crate) unsafe fn scale_in_place(
        &self,
        dtype: DType,
        data: DevPtr,
        count: usize,
        scale: DevPtr,
        stream: Stream,
    ) -> Result<()> {
        self.kernels.launch(dtype, &crate::abi::ScaleGradsParams { data, count: count as u64, scale }, stream)?;
        Ok(())
    }

    /// [`CudaLoss::round_into`] times the f32 at `scale` (0: none) — the backward's α for an
    /// accumulator its products filled without it ([`crate::blas::Alpha`]).
    ///
    /// # Safety
    /// As for [`CudaLoss::round_into`]; `scale` 0 or a device f32.
    pub(crate) unsafe fn round_scaled_into(
        &self,
        dtype: DType,
        src: DevPtr,
        dst: DevPtr,
        count: usize,
        scale: DevPtr,
        stream: Stream,
    ) -> Result<()> {
        self.kernels.launch(dtype, &ToElemParams { src, dst, count: count as u64, scale }, stream)?;
        Ok(())
    }

    /// Bind this device's context to the calling thread (until the returned call drops: the
    /// caller's context is then current again) and build the launch context.
    pub(crate) fn call<'a>(
        &'a self,
        x: &'a DeviceInputs,
        opts: &Options,
        targets: DevPtr,
        ws: Workspace,
        stream: Stream,
    ) -> Result<Call<'a>> {
        let bound = BoundContext::bind(&self.ctx)?;
        let k = LossConstants::new(x.shape, opts);
        Ok(Call {
            kernels: &self.kernels,
            blas: &self.blas,
            tuning: &self.tuning,
            sm_count: self.sm_count,
            x,
            lp: Self::logit_params(x, k, targets),
            ws,
            stream,
            _bound: bound,
        })
    }
}
