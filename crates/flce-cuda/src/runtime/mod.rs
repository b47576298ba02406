//! The kernel registry: every kernel by a typed name ([`Kernel`]), its file, block and shared
//! memory; each parameter struct names its kernel and computes its grid ([`KernelArgs`]), so a
//! launch is `kernels.launch(dtype, &params, stream)` with the grid arithmetic written once
//! (grids.rs). Modules are compiled (through the disk cache) and loaded on first use, per (file,
//! dtype, set of logit options: the sm90 forward and G have a module for each).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys as cu;
use cudarc::driver::{result as drv, CudaContext};
use flce_core::DType;

use crate::abi::*;
use crate::compile::{compile_variant, Arch, KernelFile};
use crate::device::Stream;
use crate::error::{Check, CudaResult};
use crate::geometry::{
    self, ELEMENTWISE_THREADS, FINISH_THREADS, REDUCE_THREADS, SM90_COMPACT_FORWARD_SMEM_BYTES,
    SM90_FORWARD_SMEM_BYTES, SM90_GRAD_SMEM_BYTES, SM90_PRODUCT_SMEM_BYTES, SM90_THREADS, TILE_THREADS,
};

mod grids;
pub(crate) use grids::{logit_opts_of, KernelArgs};

/// Every kernel flce launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    CheckClassWeights,
    PrepTargets,
    TokenScale,
    ForwardFinish,
    FinishScalars,
    DbReduce,
    ToElem,
    StatsFromLogits,
    GradFromLogits,
    ForwardTiles,
    GradTiles,
    ScaleGrads,
    Sm90Forward,
    Sm90ForwardCompact,
    CompactGrad,
    Sm90Grad,
    Sm90Product,
    SliceTargets,
    ExportPartials,
    FinishRanks,
    SliceScales,
}

impl Kernel {
    pub const ALL: [Kernel; 21] = [
        Kernel::CheckClassWeights,
        Kernel::PrepTargets,
        Kernel::TokenScale,
        Kernel::ForwardFinish,
        Kernel::FinishScalars,
        Kernel::DbReduce,
        Kernel::ToElem,
        Kernel::StatsFromLogits,
        Kernel::GradFromLogits,
        Kernel::ForwardTiles,
        Kernel::GradTiles,
        Kernel::ScaleGrads,
        Kernel::Sm90Forward,
        Kernel::Sm90ForwardCompact,
        Kernel::CompactGrad,
        Kernel::Sm90Grad,
        Kernel::Sm90Product,
        Kernel::SliceTargets,
        Kernel::ExportPartials,
        Kernel::FinishRanks,
        Kernel::SliceScales,
    ];

    pub fn file(self) -> KernelFile {
        match self {
            Kernel::CheckClassWeights | Kernel::PrepTargets | Kernel::TokenScale => KernelFile::Prep,
            Kernel::ForwardFinish | Kernel::FinishScalars => KernelFile::Finish,
            Kernel::DbReduce | Kernel::ToElem | Kernel::ScaleGrads => KernelFile::Accumulate,
            Kernel::StatsFromLogits => KernelFile::CublasStats,
            Kernel::GradFromLogits => KernelFile::CublasGrad,
            Kernel::ForwardTiles => KernelFile::Sm80Forward,
            Kernel::GradTiles => KernelFile::Sm80Grad,
            Kernel::Sm90Forward | Kernel::Sm90ForwardCompact => KernelFile::Sm90Forward,
            Kernel::CompactGrad => KernelFile::Sm90ThreeProductGrad,
            Kernel::Sm90Grad => KernelFile::Sm90Grad,
            Kernel::Sm90Product => KernelFile::Sm90Product,
            Kernel::SliceTargets | Kernel::ExportPartials | Kernel::FinishRanks | Kernel::SliceScales => {
                KernelFile::VocabParallel
            }
        }
    }

    /// The `extern "C"` name in its file.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::CheckClassWeights => "flce_check_class_weights",
            Kernel::PrepTargets => "flce_prep_targets",
            Kernel::TokenScale => "flce_token_scale",
            Kernel::ForwardFinish => "flce_forward_finish",
            Kernel::FinishScalars => "flce_finish_scalars",
            Kernel::DbReduce => "flce_db_reduce",
            Kernel::ToElem => "flce_to_elem",
            Kernel::StatsFromLogits => "flce_stats_from_logits",
            Kernel::GradFromLogits => "flce_grad_from_logits",
            Kernel::ForwardTiles => "flce_forward_tiles",
            Kernel::GradTiles => "flce_grad_tiles",
            Kernel::ScaleGrads => "flce_scale_grads",
            Kernel::Sm90Forward => "flce_sm90_forward",
            Kernel::Sm90ForwardCompact => "flce_sm90_forward_compact",
            Kernel::CompactGrad => "flce_grad_from_compact",
            Kernel::Sm90Grad => "flce_sm90_grad",
            Kernel::Sm90Product => "flce_sm90_product",
            Kernel::SliceTargets => "flce_slice_targets",
            Kernel::ExportPartials => "flce_export_partials",
            Kernel::FinishRanks => "flce_finish_ranks",
            Kernel::SliceScales => "flce_slice_scales",
        }
    }

    pub fn block(self) -> u32 {
        match self {
            Kernel::TokenScale
            | Kernel::FinishScalars
            | Kernel::ExportPartials
            | Kernel::FinishRanks
            | Kernel::SliceScales => REDUCE_THREADS,
            Kernel::ForwardFinish => FINISH_THREADS,
            Kernel::ForwardTiles | Kernel::GradTiles => TILE_THREADS,
            Kernel::Sm90Forward | Kernel::Sm90ForwardCompact | Kernel::Sm90Grad | Kernel::Sm90Product => SM90_THREADS,
            _ => ELEMENTWISE_THREADS,
        }
    }

    /// Dynamic shared memory bytes (the sm90 kernels' less what a shorter ring saves:
    /// `FLCE_SM90_MAINLOOP`'s `stages`, and the forwards' 3 with `fold`: geometry::Sm90Mainloop).
    pub fn dynamic_smem(self, dtype: DType) -> usize {
        let mainloop = geometry::Sm90Mainloop::current();
        match self {
            Kernel::ForwardTiles => geometry::forward_smem_bytes(dtype),
            Kernel::GradTiles => geometry::grad_smem_bytes(dtype),
            Kernel::Sm90Forward if mainloop.plain_staged() => {
                geometry::SM90_STAGED_FORWARD_SMEM_BYTES - mainloop.forward_ring_saving()
            }
            Kernel::Sm90ForwardCompact if mainloop.compact_staged() => {
                geometry::SM90_STAGED_FORWARD_SMEM_BYTES - mainloop.forward_ring_saving()
            }
            Kernel::Sm90Forward => SM90_FORWARD_SMEM_BYTES - mainloop.forward_ring_saving(),
            Kernel::Sm90ForwardCompact => SM90_COMPACT_FORWARD_SMEM_BYTES - mainloop.forward_ring_saving(),
            Kernel::Sm90Grad if mainloop.grad_staged() => {
                geometry::SM90_STAGED_GRAD_SMEM_BYTES - mainloop.grad_ring_saving()
            }
            Kernel::Sm90Grad => SM90_GRAD_SMEM_BYTES - mainloop.grad_ring_saving(),
            Kernel::Sm90Product => SM90_PRODUCT_SMEM_BYTES - mainloop.ring_saving(),
            _ => 0,
        }
    }
}

/// The launch attribute of clusters of `cluster` blocks along x.
fn cluster_attribute(cluster: u32) -> cu::CUlaunchAttribute {
    // SAFETY: a zeroed attribute is valid plain data; the id and the cluster dimensions are set
    // below.
    let mut attr: cu::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = cu::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    attr
}

/// `kernel`'s launch configuration on `grid` with one attribute, `attr` (its clusters): what
/// cuLaunchKernelEx runs and cuOccupancyMaxActiveClusters sizes.
fn cluster_config(
    kernel: Kernel,
    dtype: DType,
    grid: (u32, u32, u32),
    stream: Stream,
    attr: &mut cu::CUlaunchAttribute,
) -> cu::CUlaunchConfig {
    cu::CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: kernel.block(),
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: kernel.dynamic_smem(dtype) as u32,
        hStream: stream,
        attrs: attr,
        numAttrs: 1,
    }
}

pub(crate) struct Module {
    module: cu::CUmodule,
    functions: HashMap<Kernel, cu::CUfunction>,
    /// cuOccupancyMaxActiveClusters per (kernel, blocks per cluster), asked once.
    max_clusters: Mutex<HashMap<(Kernel, u32), u32>>,
}

// SAFETY: CUDA module and function handles may be used from any thread of the process.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

/// A module: its file, dtype and the logit options it is specialised for (None: the default).
type ModuleKey = (KernelFile, DType, Option<u8>);

/// The compiled kernels of one device, loaded on first use.
pub(crate) struct Kernels {
    ctx: Arc<CudaContext>,
    arch: Arch,
    modules: Mutex<HashMap<ModuleKey, Arc<Module>>>,
}

impl Kernels {
    pub(crate) fn new(ctx: Arc<CudaContext>, arch: Arch) -> Self {
        Kernels { ctx, arch, modules: Mutex::new(HashMap::new()) }
    }

    /// The module of `file` for `dtype` and whether it was already loaded or came from the disk
    /// cache.
    pub(crate) fn load(&self, file: KernelFile, dtype: DType) -> CudaResult<(Arc<Module>, bool)> {
        self.load_variant(file, dtype, None)
    }

    /// [`Kernels::load`] for the module of `file` specialised for the logit options `logit_opts`
    /// ([`crate::compile::compile_variant`]; None: the default module).
    pub(crate) fn load_variant(
        &self,
        file: KernelFile,
        dtype: DType,
        logit_opts: Option<u8>,
    ) -> CudaResult<(Arc<Module>, bool)> {
        debug_assert!(logit_opts.is_none() || file.has_logit_variants(), "{} has no option modules", file.name());
        let key = (file, if file.dtype_independent() { DType::BF16 } else { dtype }, logit_opts);
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = modules.get(&key) {
            return Ok((m.clone(), true));
        }
        let cubin = compile_variant(file, &self.arch, key.1, logit_opts)?;
        let _bound = crate::context::BoundContext::bind(&self.ctx)?;
        // SAFETY: the image is a complete cubin that outlives the call.
        let module = unsafe { drv::module::load_data(cubin.image.as_ptr() as *const c_void) }
            .check(&format!("cuModuleLoadData({})", file.name()))?;
        let mut functions = HashMap::new();
        for kernel in Kernel::ALL.into_iter().filter(|k| k.file() == file) {
            let name = kernel.name();
            let cname = std::ffi::CString::new(name).expect("kernel names have no NUL");
            // SAFETY: module is live; the name is a kernel of this file.
            let func =
                unsafe { drv::module::get_function(module, cname) }.check(&format!("cuModuleGetFunction({name})"))?;
            let smem = kernel.dynamic_smem(key.1);
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
            functions.insert(kernel, func);
        }
        let m = Arc::new(Module { module, functions, max_clusters: Mutex::new(HashMap::new()) });
        modules.insert(key, m.clone());
        Ok((m, cubin.from_cache))
    }

    /// How many clusters of `cluster` blocks of `kernel` can be resident at once on this device
    /// (cuOccupancyMaxActiveClusters at the kernel's block size and shared memory): a persistent
    /// grid of more clusters runs its last ones in a second wave. Asked once per module.
    pub(crate) fn max_active_clusters(&self, kernel: Kernel, dtype: DType, cluster: u32) -> CudaResult<u32> {
        let (module, _) = self.load(kernel.file(), dtype)?;
        let mut known = module.max_clusters.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&n) = known.get(&(kernel, cluster)) {
            return Ok(n);
        }
        let mut attr = cluster_attribute(cluster);
        let config = cluster_config(kernel, dtype, (cluster, 1, 1), std::ptr::null_mut(), &mut attr);
        let mut n: std::ffi::c_int = 0;
        // SAFETY: a live function of this module; the config and its one attribute outlive the call.
        unsafe { cu::cuOccupancyMaxActiveClusters(&mut n, module.functions[&kernel], &config) }
            .result()
            .check(&format!("cuOccupancyMaxActiveClusters({}, cluster {cluster})", kernel.name()))?;
        known.insert((kernel, cluster), n.max(0) as u32);
        Ok(n.max(0) as u32)
    }

    /// Launch the kernel that takes `args`, on its grid.
    ///
    /// # Safety
    /// Every pointer in `args` must be valid for the kernel's accesses on `stream`.
    pub(crate) unsafe fn launch<A: KernelArgs>(&self, dtype: DType, args: &A, stream: Stream) -> CudaResult<()> {
        let kernel = A::KERNEL;
        let (module, _) = self.load_variant(kernel.file(), dtype, args.logit_opts())?;
        let grid = args.grid();
        let mut p = *args;
        let mut params = [&mut p as *mut A as *mut c_void];
        let cluster = args.cluster();
        if cluster == 1 {
            return drv::launch_kernel(
                module.functions[&kernel],
                grid,
                (kernel.block(), 1, 1),
                kernel.dynamic_smem(dtype) as u32,
                stream,
                &mut params,
            )
            .check(&format!("cuLaunchKernel({}, grid {grid:?})", kernel.name()));
        }
        let mut attr = cluster_attribute(cluster);
        let config = cluster_config(kernel, dtype, grid, stream, &mut attr);
        cu::cuLaunchKernelEx(&config, module.functions[&kernel], params.as_mut_ptr(), std::ptr::null_mut())
            .result()
            .check(&format!("cuLaunchKernelEx({}, grid {grid:?}, cluster {cluster})", kernel.name()))
    }

    /// Fill `count` i32 at `ptr` with `value` on `stream`.
    ///
    /// # Safety
    /// `ptr` must be valid for `count` i32 writes on `stream`.
    pub(crate) unsafe fn fill_i32(&self, ptr: DevPtr, value: i32, count: usize, stream: Stream) -> CudaResult<()> {
        cu::cuMemsetD32Async(ptr, value as u32, count, stream).result().check("cuMemsetD32Async")
    }
}

impl Drop for Kernels {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
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
