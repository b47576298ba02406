//! The CUDA backend's launchers: validated entry points over raw device pointers and the
//! caller's stream (the layer PyTorch calls), on top of checked driver / cuBLAS calls.
//!
//! Nothing here synchronises the stream. Workspace comes from the caller, sized by
//! [`CudaLoss::forward_workspace_bytes`] and [`CudaLoss::backward_workspace_bytes`].

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::cublas::sys as cublas;
use cudarc::driver::sys as cu;
use cudarc::driver::{result as drv, CudaContext};
use flce_core::{DType, Error, Options, Reduction, Result, Shape};

use crate::compile::{compile, Arch, KernelFile};
use crate::error::{Check, CudaError, CudaResult};
use crate::library::{require, Library};
use crate::params::*;
use crate::plan::{self, BackwardMode, BackwardPlan, ForwardMode, ForwardPlan, Wanted};

/// A raw CUDA stream (`cudaStream_t`); null is the legacy default stream.
pub type Stream = cu::CUstream;

/// The caller's inputs in device memory (row-major, contiguous).
#[derive(Clone, Copy, Debug)]
pub struct DeviceInputs {
    pub shape: Shape,
    pub dtype: DType,
    /// E [N, D], dtype.
    pub e: DevPtr,
    /// C [V, D], dtype.
    pub c: DevPtr,
    /// b [V], dtype.
    pub bias: Option<DevPtr>,
    /// targets [N], i64.
    pub targets: DevPtr,
    /// class weights [V], f32.
    pub class_weights: Option<DevPtr>,
}

/// Where the forward writes.
#[derive(Clone, Copy, Debug)]
pub struct DeviceForwardOutputs {
    /// lse [N], f32.
    pub lse: DevPtr,
    /// per-token loss [N], f32; required for reduction none.
    pub per_token_loss: Option<DevPtr>,
    /// f32 [4]: loss (mean or sum; the sum for none), accuracy, Σ w_t over non-ignored tokens, W.
    pub scalars: DevPtr,
    /// i32 [1]: the first token whose target is outside [0, V) and not ignore_index, or i32::MAX.
    /// Such tokens are treated as ignored; read this to report them.
    pub status: DevPtr,
}

/// ∂L/∂(forward output), in device memory (f32).
#[derive(Clone, Copy, Debug)]
pub enum DeviceGradOutput {
    /// A scalar, for mean and sum.
    Scalar(DevPtr),
    /// [N], for reduction none.
    PerToken(DevPtr),
}

/// Where the backward writes (input dtype); `None` skips that gradient.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceGrads {
    pub de: Option<DevPtr>,
    pub dc: Option<DevPtr>,
    pub dbias: Option<DevPtr>,
}

impl DeviceGrads {
    pub fn wanted(&self) -> Wanted {
        Wanted { de: self.de.is_some(), dc: self.dc.is_some(), dbias: self.dbias.is_some() }
    }
}

/// How a forward call is planned: the mode and, for CublasChunks, its workspace budget (None:
/// 10% of the gradient bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardConfig {
    pub budget: Option<usize>,
    pub mode: ForwardMode,
}

/// How a backward call is planned: the workspace budget (None: 10% of the gradient bytes, or
/// the smallest exact unchunked plan if larger) and how logits are recomputed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackwardConfig {
    pub budget: Option<usize>,
    pub mode: BackwardMode,
}

/// Caller-owned scratch memory.
#[derive(Clone, Copy, Debug)]
pub struct Workspace {
    pub ptr: DevPtr,
    pub bytes: usize,
}

impl Workspace {
    fn at(&self, r: plan::Region) -> DevPtr {
        self.ptr + r.offset as u64
    }
}

struct Module {
    module: cu::CUmodule,
    functions: HashMap<&'static str, cu::CUfunction>,
}

// SAFETY: CUDA module and function handles may be used from any thread of the process.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Module {
    fn function(&self, name: &str) -> cu::CUfunction {
        self.functions[name]
    }
}

struct Cublas(cublas::cublasHandle_t);
// SAFETY: the handle is only used under CudaLoss's mutex.
unsafe impl Send for Cublas {}

/// The CUDA backend on one device: compiled kernels, a cuBLAS handle, and the launchers.
pub struct CudaLoss {
    ctx: Arc<CudaContext>,
    arch: Arch,
    sm_count: usize,
    name: String,
    modules: Mutex<HashMap<(KernelFile, DType), Arc<Module>>>,
    cublas: Mutex<Option<Cublas>>,
}

const KERNELS: &[(KernelFile, &str, usize)] = &[
    (KernelFile::Forward, "flce_forward_tiles", plan::FORWARD_SMEM_BYTES),
    (KernelFile::Forward, "flce_stats_from_logits", 0),
    (KernelFile::Forward, "flce_forward_finish", 0),
    (KernelFile::Backward, "flce_grad_tiles", plan::GRAD_SMEM_BYTES),
    (KernelFile::Backward, "flce_grad_from_logits", 0),
    (KernelFile::Backward, "flce_db_reduce", 0),
    (KernelFile::Backward, "flce_to_elem", 0),
    (KernelFile::Prep, "flce_prep_targets", 0),
    (KernelFile::Prep, "flce_token_scale", 0),
];

fn reduction_code(r: Reduction) -> i32 {
    match r {
        Reduction::Mean => 0,
        Reduction::Sum => 1,
        Reduction::None => 2,
    }
}

fn cuda_type(d: DType) -> cublas::cudaDataType {
    match d {
        DType::BF16 => cublas::cudaDataType::CUDA_R_16BF,
        DType::F16 => cublas::cudaDataType::CUDA_R_16F,
        DType::F32 => cublas::cudaDataType::CUDA_R_32F,
    }
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
        if major < 8 {
            return Err(Error::Unsupported(format!(
                "flce's CUDA kernels need compute capability 8.0 or newer (mma.sync bf16); this GPU is {major}.{minor}"
            )));
        }
        let sm_count = ctx
            .attribute(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .check("cuDeviceGetAttribute(multiprocessor count)")? as usize;
        let name = ctx.name().check("cuDeviceGetName")?;
        Ok(CudaLoss {
            ctx,
            arch: Arch::for_capability(major, minor),
            sm_count,
            name,
            modules: Mutex::new(HashMap::new()),
            cublas: Mutex::new(None),
        })
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
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Compile (or fetch from the disk cache) and load every kernel for `dtype` now, so the first
    /// call does not pay for it. Returns how many kernel files came from the cache.
    pub fn warm_up(&self, dtype: DType) -> Result<usize> {
        let mut cached = 0;
        for (file, dt) in [(KernelFile::Forward, dtype), (KernelFile::Backward, dtype), (KernelFile::Prep, DType::BF16)]
        {
            cached += self.load(file, dt)?.1 as usize;
        }
        Ok(cached)
    }

    fn module(&self, file: KernelFile, dtype: DType) -> CudaResult<Arc<Module>> {
        Ok(self.load(file, dtype)?.0)
    }

    fn load(&self, file: KernelFile, dtype: DType) -> CudaResult<(Arc<Module>, bool)> {
        let key = (file, if file == KernelFile::Prep { DType::BF16 } else { dtype });
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = modules.get(&key) {
            return Ok((m.clone(), true));
        }
        let cubin = compile(file, &self.arch, key.1)?;
        self.ctx.bind_to_thread().check("cuCtxSetCurrent")?;
        // SAFETY: the image is a complete cubin that outlives the call.
        let module = unsafe { drv::module::load_data(cubin.image.as_ptr() as *const c_void) }
            .check(&format!("cuModuleLoadData({})", file.name()))?;
        let mut functions = HashMap::new();
        for &(_, name, smem) in KERNELS.iter().filter(|k| k.0 == file) {
            let cname = std::ffi::CString::new(name).unwrap();
            // SAFETY: module is live; the name is a kernel of this file.
            let func =
                unsafe { drv::module::get_function(module, cname) }.check(&format!("cuModuleGetFunction({name})"))?;
            if smem > 48 * 1024 {
                // SAFETY: a valid function handle and attribute.
                unsafe {
                    drv::function::set_function_attribute(
                        func,
                        cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        smem as i32,
                    )
                }
                .check(&format!("cuFuncSetAttribute({name}, max dynamic shared memory {smem})"))?;
            }
            functions.insert(name, func);
        }
        let m = Arc::new(Module { module, functions });
        modules.insert(key, m.clone());
        Ok((m, cubin.from_cache))
    }

    /// # Safety
    /// `params` must match the kernel's parameter struct; every pointer in it must be valid for
    /// the kernel's accesses on `stream`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch<P: Copy>(
        &self,
        m: &Module,
        name: &str,
        grid: (u32, u32, u32),
        block: u32,
        smem: usize,
        stream: Stream,
        params: &P,
    ) -> CudaResult<()> {
        let mut p = *params;
        let mut args = [&mut p as *mut P as *mut c_void];
        drv::launch_kernel(m.function(name), grid, (block, 1, 1), smem as u32, stream, &mut args)
            .check(&format!("cuLaunchKernel({name}, grid {grid:?})"))
    }

    /// Effective targets (shift, ignore_index) into `out` [N] i32, with the status word reset and
    /// then set to the first out-of-range target.
    ///
    /// # Safety
    /// `out` holds N i32 and `status` one, on `stream`; `x` as for [`CudaLoss::forward`].
    unsafe fn prep_targets(
        &self,
        prep: &Module,
        x: &DeviceInputs,
        opts: &Options,
        out: DevPtr,
        status: DevPtr,
        stream: Stream,
    ) -> CudaResult<()> {
        self.fill_i32(status, i32::MAX, 1, stream)?;
        let n = x.shape.n;
        let params = PrepParams {
            targets: x.targets,
            out,
            status,
            ignore_index: opts.ignore_index,
            n: n as i32,
            v: x.shape.v as i32,
            shift: opts.shift.unwrap_or(0) as i32,
        };
        self.launch(prep, "flce_prep_targets", ((n as u32).div_ceil(256), 1, 1), 256, 0, stream, &params)
    }

    /// # Safety
    /// `ptr` must be valid for `count` i32 writes on `stream`.
    unsafe fn fill_i32(&self, ptr: DevPtr, value: i32, count: usize, stream: Stream) -> CudaResult<()> {
        let r = cu::cuMemsetD32Async(ptr, value as u32, count, stream);
        if r == cu::cudaError_enum::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(CudaError::call("cuMemsetD32Async", r))
        }
    }

    /// Workspace bytes a forward call with `config` needs.
    pub fn forward_workspace_bytes(&self, shape: Shape, dtype: DType, config: ForwardConfig) -> usize {
        self.forward_plan(shape, dtype, config).workspace_bytes
    }

    /// The forward plan (for reports and benchmarks).
    pub fn forward_plan(&self, shape: Shape, dtype: DType, config: ForwardConfig) -> ForwardPlan {
        plan::forward_plan(shape, dtype, self.sm_count, config.mode, config.budget)
    }

    /// Workspace bytes a backward call with `config` needs.
    pub fn backward_workspace_bytes(
        &self,
        shape: Shape,
        dtype: DType,
        wanted: Wanted,
        config: BackwardConfig,
    ) -> Result<usize> {
        Ok(self.backward_plan(shape, dtype, wanted, config)?.workspace_bytes)
    }

    pub fn backward_plan(
        &self,
        shape: Shape,
        dtype: DType,
        wanted: Wanted,
        config: BackwardConfig,
    ) -> Result<BackwardPlan> {
        plan::backward_plan(shape, dtype, wanted, config.budget, config.mode)
    }

    fn logit_params(x: &DeviceInputs, opts: &Options, targets: DevPtr) -> LogitParams {
        let s = x.dtype.size_in_bytes();
        let aligned = (x.shape.d * s) % 16 == 0 && x.e % 16 == 0 && x.c % 16 == 0;
        LogitParams {
            e: x.e,
            c: x.c,
            bias: x.bias.unwrap_or(0),
            class_w: x.class_weights.unwrap_or(0),
            targets,
            n: x.shape.n as i32,
            d: x.shape.d as i32,
            v: x.shape.v as i32,
            aligned: aligned as i32,
            softcap: opts.softcap.unwrap_or(0.0),
        }
    }

    fn validate(x: &DeviceInputs, opts: &Options) -> Result<()> {
        x.shape.validate()?;
        opts.validate()?;
        let Shape { n, d, v } = x.shape;
        if n > i32::MAX as usize || d > i32::MAX as usize || n.checked_mul(d).is_none() || v.checked_mul(d).is_none() {
            return Err(Error::Unsupported(format!("shape {} too large", x.shape)));
        }
        if let Some(t) = opts.shift {
            if n % t != 0 {
                return Err(Error::InvalidOption {
                    name: "shift",
                    value: t.to_string(),
                    reason: "N must be a multiple of the sequence length",
                });
            }
        }
        let elem = x.dtype.size_in_bytes() as u64;
        for (arg, p, a) in [
            ("e", Some(x.e), elem),
            ("c", Some(x.c), elem),
            ("bias", x.bias, elem),
            ("targets", Some(x.targets), 8),
            ("class_weights", x.class_weights, 4),
        ] {
            if let Some(p) = p {
                if p == 0 || p % a != 0 {
                    return Err(Error::Unsupported(format!(
                        "{arg}: device pointer {p:#x} is null or not aligned to {a} bytes"
                    )));
                }
            }
        }
        Ok(())
    }

    fn check_workspace(ws: &Workspace, needed: usize) -> Result<()> {
        if ws.bytes < needed || (needed > 0 && ws.ptr == 0) {
            return Err(Error::ShapeMismatch {
                arg: "workspace",
                layout: "bytes".into(),
                expected: needed,
                got: ws.bytes,
            });
        }
        Ok(())
    }

    /// The fused forward: lse, loss and the optional outputs, on `stream`.
    ///
    /// # Safety
    /// Every pointer must be device memory of this backend's device, valid for the shapes and
    /// dtypes given, and stay valid until the work queued on `stream` has finished. Outputs must
    /// not overlap inputs or the workspace.
    pub unsafe fn forward(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        out: &DeviceForwardOutputs,
        ws: Workspace,
        config: ForwardConfig,
        stream: Stream,
    ) -> Result<()> {
        Self::validate(x, opts)?;
        if opts.reduction == Reduction::None && out.per_token_loss.is_none() {
            return Err(Error::ShapeMismatch {
                arg: "per_token_loss",
                layout: "[N] (required for reduction none)".into(),
                expected: x.shape.n,
                got: 0,
            });
        }
        let plan = self.forward_plan(x.shape, x.dtype, config);
        Self::check_workspace(&ws, plan.workspace_bytes)?;
        self.ctx.bind_to_thread().check("cuCtxSetCurrent")?;
        let prep = self.module(KernelFile::Prep, DType::BF16)?;
        let fwd = self.module(KernelFile::Forward, x.dtype)?;
        let n = x.shape.n;
        let targets = ws.at(plan.targets);
        self.prep_targets(&prep, x, opts, targets, out.status, stream)?;
        let lp = Self::logit_params(x, opts, targets);
        let partials = ws.at(plan.partials);
        let target_logit = ws.at(plan.target_logit);
        match plan.logits {
            None => {
                let fp = ForwardParams { lp, tiles_per_split: plan.tiles_per_split as i32, partials, target_logit };
                let grid = (plan.token_tiles as u32, plan.splits as u32, 1);
                self.launch(
                    &fwd,
                    "flce_forward_tiles",
                    grid,
                    plan::TILE_THREADS,
                    plan::FORWARD_SMEM_BYTES,
                    stream,
                    &fp,
                )?;
            }
            Some(region) => {
                let logits = ws.at(region);
                let (d, v) = (x.shape.d, x.shape.v);
                let s = x.dtype.size_in_bytes() as u64;
                let blas = self.cublas_locked(stream)?;
                let handle = blas.as_ref().expect("created by cublas_locked").0;
                let ty = cuda_type(x.dtype);
                for (k, v0) in (0..v).step_by(plan.vocab_chunk).enumerate() {
                    let v_end = (v0 + plan.vocab_chunk).min(v);
                    // logits[:, v0..v_end] (f32) = E·C_chunkᵀ; column-major view: (vlen × N) = C_chunkᵀ · E
                    let c_chunk = x.c + v0 as u64 * d as u64 * s;
                    let f32_ty = cublas::cudaDataType::CUDA_R_32F;
                    gemm(
                        handle,
                        true,
                        false,
                        v_end - v0,
                        n,
                        d,
                        c_chunk,
                        ty,
                        d,
                        x.e,
                        ty,
                        d,
                        0.0,
                        logits,
                        f32_ty,
                        plan.vocab_chunk,
                    )?;
                    let sp = StatsParams {
                        logits,
                        ldl: plan.vocab_chunk as i32,
                        bias: lp.bias,
                        class_w: lp.class_w,
                        targets,
                        softcap: lp.softcap,
                        n: n as i32,
                        v0: v0 as i32,
                        v_end: v_end as i32,
                        first_chunk: (k == 0) as i32,
                        partials,
                        target_logit,
                    };
                    self.launch(&fwd, "flce_stats_from_logits", ((n as u32).div_ceil(8), 1, 1), 256, 0, stream, &sp)?;
                }
            }
        }
        self.launch(
            &fwd,
            "flce_forward_finish",
            (1, 1, 1),
            1024,
            0,
            stream,
            &FinishParams {
                partials,
                target_logit,
                targets,
                class_w: lp.class_w,
                n: n as i32,
                v: lp.v,
                splits: plan.splits as i32,
                reduction: reduction_code(opts.reduction),
                label_smoothing: opts.label_smoothing,
                z_loss: opts.z_loss,
                lse: out.lse,
                per_token_loss: out.per_token_loss.unwrap_or(0),
                out_scalars: out.scalars,
            },
        )?;
        Ok(())
    }

    /// The exact backward: dE, dC, db (each optional) from forward's lse, on `stream`.
    /// `config` must be the one the workspace was sized with.
    ///
    /// dC's buffer is also scratch while the call runs: when the plan says so
    /// ([`plan::DcTail`]), dE's f32 accumulator lives in its last bytes before the final dC rows
    /// are written. dC must then be 16-byte aligned (as every cudaMalloc or torch allocation is).
    ///
    /// # Safety
    /// As for [`CudaLoss::forward`]; `lse` is forward's output for the same inputs and options.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn backward(
        &self,
        x: &DeviceInputs,
        opts: &Options,
        lse: DevPtr,
        grad_output: DeviceGradOutput,
        grads: &DeviceGrads,
        ws: Workspace,
        config: BackwardConfig,
        stream: Stream,
    ) -> Result<()> {
        Self::validate(x, opts)?;
        let (go_ptr, go_len) = match grad_output {
            DeviceGradOutput::Scalar(p) => (p, 1),
            DeviceGradOutput::PerToken(p) => (p, x.shape.n),
        };
        let expect = if opts.reduction == Reduction::None { x.shape.n } else { 1 };
        if go_len != expect {
            return Err(Error::ShapeMismatch {
                arg: "grad_output",
                layout: format!("{:?} reduction", opts.reduction),
                expected: expect,
                got: go_len,
            });
        }
        let wanted = grads.wanted();
        if !(wanted.de || wanted.dc || wanted.dbias) {
            return Ok(());
        }
        let plan = self.backward_plan(x.shape, x.dtype, wanted, config)?;
        Self::check_workspace(&ws, plan.workspace_bytes)?;
        if let (Some(dc), Some(_)) = (grads.dc, plan.dc_tail) {
            if dc % 16 != 0 {
                return Err(Error::InvalidOption {
                    name: "grads.dc",
                    value: format!("{dc:#x}"),
                    reason: "dC must be 16-byte aligned (it holds dE's f32 accumulator during the call)",
                });
            }
        }
        self.ctx.bind_to_thread().check("cuCtxSetCurrent")?;
        let prep = self.module(KernelFile::Prep, DType::BF16)?;
        let bwd = self.module(KernelFile::Backward, x.dtype)?;
        let Shape { n, d, v } = x.shape;
        let targets = ws.at(plan.targets);
        let status = ws.at(plan.status);
        let token_scale = ws.at(plan.token_scale);
        let scalars = ws.at(plan.scalars);
        self.prep_targets(&prep, x, opts, targets, status, stream)?;
        self.launch(
            &prep,
            "flce_token_scale",
            (1, 1, 1),
            1024,
            0,
            stream,
            &ScaleParams {
                targets,
                class_w: x.class_weights.unwrap_or(0),
                grad_output: go_ptr,
                n: n as i32,
                v: v as i32,
                reduction: reduction_code(opts.reduction),
                token_scale,
                scalars,
            },
        )?;

        let lp = Self::logit_params(x, opts, targets);
        let s = x.dtype.size_in_bytes() as u64;
        let single_token_chunk = plan.token_chunk >= n;
        // dE accumulates here (f32): the workspace, dC's tail, or dE itself for f32 inputs.
        let de_acc = match (grads.de, plan.de_acc, plan.dc_tail, grads.dc) {
            (None, ..) => None,
            (Some(_), Some(r), ..) => Some(ws.at(r)),
            (Some(_), None, Some(tail), Some(dc)) => Some(dc + tail.byte_offset as u64),
            (Some(de), None, None, _) => Some(de),
            (Some(_), None, Some(_), None) => unreachable!("a dC-tail plan is only made when dC is wanted"),
        };
        let db_acc = plan.db_acc.map(|r| ws.at(r));
        let g = ws.at(plan.g);
        let ty = cuda_type(x.dtype);
        let blas = self.cublas_locked(stream)?;
        let handle = blas.as_ref().expect("created by cublas_locked").0;

        // Main pass over every vocabulary chunk (G, dE, db, and the dC chunks before the tail);
        // then, with dE final, the tail pass recomputes G for the chunks whose dC rows share bytes
        // with dE's accumulator and writes them.
        let vocab_chunks = plan.vocab_chunks(v);
        let first_tail_chunk = plan.dc_tail.map_or(vocab_chunks, |t| t.first_row / plan.vocab_chunk);
        let passes = [(false, 0..vocab_chunks), (true, first_tail_chunk..vocab_chunks)];
        for (tail_pass, chunks) in passes {
            if tail_pass {
                if let (Some(de), true) = (grads.de, plan.de_acc.is_some() || plan.dc_tail.is_some()) {
                    self.to_elem(&bwd, de_acc.expect("dE wanted"), de, n * d, stream)?;
                }
            }
            for vc in chunks {
                let v0 = vc * plan.vocab_chunk;
                let v_end = (v0 + plan.vocab_chunk).min(v);
                let vlen = v_end - v0;
                let dc_acc = plan.dc_acc.map(|r| ws.at(r));
                for nc in 0..plan.token_chunks(n) {
                    let n0 = nc * plan.token_chunk;
                    let n_end = (n0 + plan.token_chunk).min(n);
                    let nlen = n_end - n0;
                    let row_tiles = nlen.div_ceil(plan::TILE_M);
                    let col_tiles = vlen.div_ceil(plan::TILE_N) as u32;
                    let db_partial = plan.db_partial.map_or(0, |r| ws.at(r));
                    match plan.logits {
                        Some(logits_region) => {
                            // logits[n0.., v0..] (f32) = E·Cᵀ; column-major view: (vlen × nlen) = C_chunkᵀ · E_chunk
                            let logits = ws.at(logits_region);
                            let c_chunk = x.c + v0 as u64 * d as u64 * s;
                            let e_chunk = x.e + n0 as u64 * d as u64 * s;
                            let f32_ty = cublas::cudaDataType::CUDA_R_32F;
                            gemm(
                                handle, true, false, vlen, nlen, d, c_chunk, ty, d, e_chunk, ty, d, 0.0, logits,
                                f32_ty, plan.ldg,
                            )?;
                            let params = GradLogitsParams {
                                logits,
                                ldl: plan.ldg as i32,
                                bias: lp.bias,
                                class_w: lp.class_w,
                                targets,
                                lse,
                                token_scale,
                                scalars,
                                softcap: lp.softcap,
                                label_smoothing: opts.label_smoothing,
                                z_loss: opts.z_loss,
                                v: v as i32,
                                n0: n0 as i32,
                                n_end: n_end as i32,
                                v0: v0 as i32,
                                v_end: v_end as i32,
                                g_out: g,
                                ldg: plan.ldg as i32,
                                db_partial,
                                ldb: plan.ldg as i32,
                            };
                            self.launch(
                                &bwd,
                                "flce_grad_from_logits",
                                (col_tiles, row_tiles as u32, 1),
                                256,
                                0,
                                stream,
                                &params,
                            )?;
                        }
                        None => {
                            let params = GradParams {
                                lp,
                                lse,
                                token_scale,
                                scalars,
                                label_smoothing: opts.label_smoothing,
                                z_loss: opts.z_loss,
                                n0: n0 as i32,
                                n_end: n_end as i32,
                                v0: v0 as i32,
                                v_end: v_end as i32,
                                g_out: g,
                                ldg: plan.ldg as i32,
                                db_partial,
                                ldb: plan.ldg as i32,
                            };
                            let grid = (row_tiles as u32, col_tiles, 1);
                            self.launch(
                                &bwd,
                                "flce_grad_tiles",
                                grid,
                                plan::TILE_THREADS,
                                plan::GRAD_SMEM_BYTES,
                                stream,
                                &params,
                            )?;
                        }
                    }
                    if let (Some(dbp), Some(acc), false) = (plan.db_partial, db_acc, tail_pass) {
                        self.launch(
                            &bwd,
                            "flce_db_reduce",
                            ((vlen as u32).div_ceil(256), 1, 1),
                            256,
                            0,
                            stream,
                            &DbReduceParams {
                                db_partial: ws.at(dbp),
                                row_tiles: row_tiles as i32,
                                ldb: plan.ldg as i32,
                                count: vlen as i32,
                                db_acc: acc + 4 * v0 as u64,
                                accumulate: (nc > 0) as i32,
                            },
                        )?;
                    }
                    if let (Some(dc), true) = (grads.dc, tail_pass || vc < first_tail_chunk) {
                        // dC[v0..v_end] (+)= Gᵀ·E[n0..n_end]; column-major view: (D × vlen) = E(D × nlen) · Gᵀ
                        let (dst, dst_ty, beta) = match dc_acc {
                            Some(acc) => (acc, cublas::cudaDataType::CUDA_R_32F, (nc > 0) as i32 as f32),
                            None if single_token_chunk => (dc + v0 as u64 * d as u64 * s, ty, 0.0),
                            None => (dc + v0 as u64 * d as u64 * s, ty, (nc > 0) as i32 as f32), // f32 inputs
                        };
                        gemm(
                            handle,
                            false,
                            true,
                            d,
                            vlen,
                            nlen,
                            x.e + n0 as u64 * d as u64 * s,
                            ty,
                            d,
                            g,
                            ty,
                            plan.ldg,
                            beta,
                            dst,
                            dst_ty,
                            d,
                        )?;
                    }
                    if let (Some(acc), false) = (de_acc, tail_pass) {
                        // dE[n0..n_end] (+)= G·C[v0..v_end]; column-major view: (D × nlen) = C(D × vlen) · G
                        let beta = (vc > 0) as i32 as f32;
                        gemm(
                            handle,
                            false,
                            false,
                            d,
                            nlen,
                            vlen,
                            x.c + v0 as u64 * d as u64 * s,
                            ty,
                            d,
                            g,
                            ty,
                            plan.ldg,
                            beta,
                            acc + n0 as u64 * d as u64 * 4,
                            cublas::cudaDataType::CUDA_R_32F,
                            d,
                        )?;
                    }
                }
                if let (Some(dc), Some(acc)) = (grads.dc, dc_acc) {
                    self.to_elem(&bwd, acc, dc + v0 as u64 * d as u64 * s, vlen * d, stream)?;
                }
            }
        }
        drop(blas);
        if let (Some(db), Some(acc)) = (grads.dbias, db_acc) {
            self.to_elem(&bwd, acc, db, v, stream)?;
        }
        Ok(())
    }

    /// The cuBLAS handle, created on first use, bound to `stream`, locked for the caller.
    fn cublas_locked(&self, stream: Stream) -> Result<std::sync::MutexGuard<'_, Option<Cublas>>> {
        let mut blas = self.cublas.lock().unwrap_or_else(|e| e.into_inner());
        if blas.is_none() {
            require(Library::Cublas)?;
            let h = cudarc::cublas::result::create_handle().check("cublasCreate")?;
            *blas = Some(Cublas(h));
        }
        let handle = blas.as_ref().expect("just created").0;
        // SAFETY: a live handle; the stream belongs to this context.
        unsafe { cudarc::cublas::result::set_stream(handle, stream as cublas::cudaStream_t) }
            .check("cublasSetStream")?;
        Ok(blas)
    }

    /// The raw cuBLAS handle bound to `stream` (for benchmarks; callers serialise themselves).
    pub(crate) fn cublas_handle(&self, stream: Stream) -> Result<cublas::cublasHandle_t> {
        Ok(self.cublas_locked(stream)?.as_ref().expect("created").0)
    }

    unsafe fn to_elem(&self, m: &Module, src: DevPtr, dst: DevPtr, count: usize, stream: Stream) -> CudaResult<()> {
        let blocks = (count.div_ceil(256)).min(4 * 1024) as u32;
        self.launch(
            m,
            "flce_to_elem",
            (blocks.max(1), 1, 1),
            256,
            0,
            stream,
            &ToElemParams { src, dst, count: count as u64 },
        )
    }
}

/// One cuBLAS GemmEx with f32 accumulation (host alpha = 1, beta), column-major arguments.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm(
    handle: cublas::cublasHandle_t,
    trans_a: bool,
    trans_b: bool,
    m: usize,
    n: usize,
    k: usize,
    a: DevPtr,
    a_ty: cublas::cudaDataType,
    lda: usize,
    b: DevPtr,
    b_ty: cublas::cudaDataType,
    ldb: usize,
    beta: f32,
    c: DevPtr,
    c_ty: cublas::cudaDataType,
    ldc: usize,
) -> CudaResult<()> {
    let op = |t: bool| if t { cublas::cublasOperation_t::CUBLAS_OP_T } else { cublas::cublasOperation_t::CUBLAS_OP_N };
    let alpha = 1.0f32;
    cudarc::cublas::result::gemm_ex(
        handle,
        op(trans_a),
        op(trans_b),
        m as i32,
        n as i32,
        k as i32,
        &alpha as *const f32 as *const c_void,
        a as *const c_void,
        a_ty,
        lda as i32,
        b as *const c_void,
        b_ty,
        ldb as i32,
        &beta as *const f32 as *const c_void,
        c as *mut c_void,
        c_ty,
        ldc as i32,
        cublas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        cublas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
    )
    .check(&format!("cublasGemmEx(m {m}, n {n}, k {k})"))
}

impl Drop for CudaLoss {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        if let Some(Cublas(h)) = self.cublas.get_mut().ok().and_then(|b| b.take()) {
            // SAFETY: the handle was created by us and is no longer used.
            unsafe {
                let _ = cublas::cublasDestroy_v2(h);
            }
        }
        if let Ok(modules) = self.modules.get_mut() {
            for (_, m) in modules.drain() {
                if let Ok(m) = Arc::try_unwrap(m) {
                    // SAFETY: no function of this module can be launched after drop.
                    unsafe {
                        let _ = drv::module::unload(m.module);
                    }
                }
            }
        }
    }
}
