//! Each kernel's parameter struct: the kernel that takes it, the grid it needs, its clusters and
//! the module of logit options it runs in ([`KernelArgs`]): the grid arithmetic, written once.

use crate::abi::*;
use crate::geometry::{ELEMENTWISE_THREADS, SM90_TILE_N, STATS_TOKENS_PER_BLOCK, TILE_M, TILE_N};

use super::Kernel;

/// A kernel's parameter struct: which kernel takes it, and the grid it needs.
pub(crate) trait KernelArgs: Copy {
    const KERNEL: Kernel;
    fn grid(&self) -> (u32, u32, u32);
    /// The logit options the kernel's module is specialised for (compile::compile_variant), or
    /// None: the file's default module.
    fn logit_opts(&self) -> Option<u8> {
        None
    }
    /// Blocks per cluster along x (1: launched without a cluster).
    fn cluster(&self) -> u32 {
        1
    }
}

/// The logit options of a call as FLCE_LOGIT_OPTS's bits (1 bias, 2 softcap, 4 smoothing), None
/// without any (the default modules).
pub(crate) fn logit_opts_of(lp: &LogitParams) -> Option<u8> {
    let m = (lp.bias != 0) as u8 | ((lp.k.softcap > 0.0) as u8) << 1 | ((lp.k.label_smoothing > 0.0) as u8) << 2;
    (m != 0).then_some(m)
}

fn blocks(count: usize, per_block: usize) -> u32 {
    count.div_ceil(per_block) as u32
}

impl KernelArgs for WeightCheckParams {
    const KERNEL: Kernel = Kernel::CheckClassWeights;
    fn grid(&self) -> (u32, u32, u32) {
        (blocks(self.v as usize, ELEMENTWISE_THREADS as usize), 1, 1)
    }
}
impl KernelArgs for PrepParams {
    const KERNEL: Kernel = Kernel::PrepTargets;
    fn grid(&self) -> (u32, u32, u32) {
        (blocks(self.k.n as usize, ELEMENTWISE_THREADS as usize), 1, 1)
    }
}
impl KernelArgs for ScaleParams {
    const KERNEL: Kernel = Kernel::TokenScale;
    fn grid(&self) -> (u32, u32, u32) {
        (1, 1, 1)
    }
}
impl KernelArgs for SliceTargetsParams {
    const KERNEL: Kernel = Kernel::SliceTargets;
    fn grid(&self) -> (u32, u32, u32) {
        (blocks(self.k.n as usize, ELEMENTWISE_THREADS as usize), 1, 1)
    }
}
impl KernelArgs for ExportParams {
    const KERNEL: Kernel = Kernel::ExportPartials;
    fn grid(&self) -> (u32, u32, u32) {
        (1, 1, 1)
    }
}
impl KernelArgs for RanksFinishParams {
    const KERNEL: Kernel = Kernel::FinishRanks;
    fn grid(&self) -> (u32, u32, u32) {
        (1, 1, 1)
    }
}
impl KernelArgs for SliceScalesParams {
    const KERNEL: Kernel = Kernel::SliceScales;
    fn grid(&self) -> (u32, u32, u32) {
        (1, 1, 1)
    }
}
impl KernelArgs for FinishParams {
    const KERNEL: Kernel = Kernel::ForwardFinish;
    fn grid(&self) -> (u32, u32, u32) {
        (crate::geometry::finish_blocks(self.k.n as usize) as u32, 1, 1)
    }
}
impl KernelArgs for FinishScalarsParams {
    const KERNEL: Kernel = Kernel::FinishScalars;
    fn grid(&self) -> (u32, u32, u32) {
        (1, 1, 1)
    }
}
impl KernelArgs for DbReduceParams {
    const KERNEL: Kernel = Kernel::DbReduce;
    fn grid(&self) -> (u32, u32, u32) {
        (blocks(self.count as usize, ELEMENTWISE_THREADS as usize), 1, 1)
    }
}
impl KernelArgs for ToElemParams {
    const KERNEL: Kernel = Kernel::ToElem;
    fn grid(&self) -> (u32, u32, u32) {
        (blocks(self.count as usize, ELEMENTWISE_THREADS as usize).clamp(1, 4096), 1, 1)
    }
}
impl KernelArgs for ScaleGradsParams {
    const KERNEL: Kernel = Kernel::ScaleGrads;
    fn grid(&self) -> (u32, u32, u32) {
        (blocks(self.count as usize, ELEMENTWISE_THREADS as usize).clamp(1, 4096), 1, 1)
    }
}
impl KernelArgs for StatsParams {
    const KERNEL: Kernel = Kernel::StatsFromLogits;
    fn grid(&self) -> (u32, u32, u32) {
        let segments = blocks((self.v_end - self.v0) as usize, self.seg_cols.max(1) as usize);
        (blocks(self.lp.k.n as usize, STATS_TOKENS_PER_BLOCK as usize), segments, 1)
    }
}
impl GradChunk {
    fn tiles(&self) -> (u32, u32) {
        (blocks((self.n_end - self.n0) as usize, TILE_M), blocks((self.v_end - self.v0) as usize, TILE_N))
    }
}
impl KernelArgs for GradLogitsParams {
    const KERNEL: Kernel = Kernel::GradFromLogits;
    /// Calls with a bias, softcap or smoothing run a module compiled for theirs; the default
    /// module has none of their terms (kernels/cublas/grad_from_logits.cu).
    fn logit_opts(&self) -> Option<u8> {
        logit_opts_of(&self.lp)
    }
    fn grid(&self) -> (u32, u32, u32) {
        let (rows, cols) = self.chunk.tiles();
        (cols, rows, 1)
    }
}
impl KernelArgs for GradTilesParams {
    const KERNEL: Kernel = Kernel::GradTiles;
    fn grid(&self) -> (u32, u32, u32) {
        let (rows, cols) = self.chunk.tiles();
        (rows, cols, 1)
    }
}
impl KernelArgs for ForwardTilesParams {
    const KERNEL: Kernel = Kernel::ForwardTiles;
    fn grid(&self) -> (u32, u32, u32) {
        let vocab_tiles = blocks(self.lp.k.v as usize, TILE_N) as usize;
        (blocks(self.lp.k.n as usize, TILE_M), blocks(vocab_tiles, self.tiles_per_split as usize), 1)
    }
}

impl KernelArgs for Sm90ForwardParams {
    const KERNEL: Kernel = Kernel::Sm90Forward;
    /// Calls with a bias, softcap or smoothing run a module specialised for theirs
    /// (kernels/sm90/forward.cu, FLCE_LOGIT_OPTS); plain calls the default one.
    fn logit_opts(&self) -> Option<u8> {
        logit_opts_of(&self.lp)
    }
    /// One-dimensional (abi.rs): the main grid's slots × splits blocks, then the rest's. (Every
    /// split writes its partial, even one left without tiles.) The planner's slots are multiples
    /// of the cluster, so both parts are whole clusters.
    fn grid(&self) -> (u32, u32, u32) {
        let main = self.slots.max(1) as u32 * self.splits.max(1) as u32;
        let vocab_tiles = blocks(self.lp.k.v as usize, SM90_TILE_N);
        let rest_tiles = vocab_tiles.saturating_sub(self.splits.max(1) as u32 * self.tiles_per_split.max(1) as u32);
        let rest_blocks = match self.rest_slots {
            slots if slots > 0 => slots as u32 * blocks(rest_tiles as usize, self.rest_tiles_per_split.max(1) as usize),
            _ => 0,
        };
        (main + rest_blocks, 1, 1)
    }
    fn cluster(&self) -> u32 {
        self.cluster.max(1) as u32
    }
}
impl KernelArgs for Sm90CompactForwardParams {
    const KERNEL: Kernel = Kernel::Sm90ForwardCompact;
    /// As the forward's (the planner sends calls with options here, unless softcap with smoothing).
    fn logit_opts(&self) -> Option<u8> {
        logit_opts_of(&self.fwd.lp)
    }
    fn grid(&self) -> (u32, u32, u32) {
        self.fwd.grid()
    }
    fn cluster(&self) -> u32 {
        self.fwd.cluster()
    }
}
impl KernelArgs for CompactGradParams {
    const KERNEL: Kernel = Kernel::CompactGrad;
    /// Calls with a bias, softcap or smoothing run a module compiled for theirs; the default
    /// module has none of their terms (kernels/sm90/three_product_grad.cu).
    fn logit_opts(&self) -> Option<u8> {
        logit_opts_of(&self.lp)
    }
    fn grid(&self) -> (u32, u32, u32) {
        let (rows, cols) = self.chunk.tiles();
        (cols, rows, 1)
    }
}
impl KernelArgs for Sm90GradParams {
    const KERNEL: Kernel = Kernel::Sm90Grad;
    /// As the forward's: calls with logit options run a module specialised for theirs.
    fn logit_opts(&self) -> Option<u8> {
        logit_opts_of(&self.lp)
    }
    fn grid(&self) -> (u32, u32, u32) {
        if self.group_rows > 0 {
            return (self.slots.max(1) as u32, 1, 1); // one wave over the raster order (SM90_GRAD_ORDER)
        }
        let c = &self.chunk;
        let tiles = blocks((c.v_end - c.v0) as usize, SM90_TILE_N) as usize;
        (round_up(self.slots.max(1) as u32, self.cluster()), blocks(tiles, self.tiles_per_cta.max(1) as usize), 1)
    }
    fn cluster(&self) -> u32 {
        self.cluster.max(1) as u32
    }
}

impl KernelArgs for Sm90ProductParams {
    const KERNEL: Kernel = Kernel::Sm90Product;
    fn grid(&self) -> (u32, u32, u32) {
        (round_up(self.blocks.max(1) as u32, self.cluster()), 1, 1)
    }
    fn cluster(&self) -> u32 {
        self.cluster.max(1) as u32
    }
}

fn round_up(x: u32, multiple: u32) -> u32 {
    x.div_ceil(multiple) * multiple
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three-product G's default module has no smoothing term, softcap slope or db sums
    /// (kernels/sm90/three_product_grad.cu): a call with any of bias, softcap or smoothing must load its
    /// option module, and z-loss or class weights alone (in the rows' coefficients) the default.
    #[test]
    fn compact_grad_takes_the_default_module_only_without_logit_options() {
        let mut p = CompactGradParams::default();
        assert_eq!(p.logit_opts(), None);
        p.lp.k.z_loss = 1e-4;
        p.lp.class_w = 0x1000;
        assert_eq!(p.logit_opts(), None);
        p.lp.bias = 0x2000;
        assert_eq!(p.logit_opts(), Some(1));
        p.lp.k.softcap = 30.0;
        assert_eq!(p.logit_opts(), Some(3));
        p.lp.k.label_smoothing = 0.1;
        assert_eq!(p.logit_opts(), Some(7));
        p.lp.bias = 0;
        assert_eq!(p.logit_opts(), Some(6));
    }

    /// The same for the cuBLAS family's G (kernels/cublas/grad_from_logits.cu, whose default module
    /// has no bias or softcap transform, smoothing term or db sums).
    #[test]
    fn cublas_grad_takes_the_default_module_only_without_logit_options() {
        let mut p = GradLogitsParams::default();
        assert_eq!(p.logit_opts(), None);
        p.lp.k.z_loss = 1e-4;
        p.lp.class_w = 0x1000;
        assert_eq!(p.logit_opts(), None);
        p.lp.k.label_smoothing = 0.1;
        assert_eq!(p.logit_opts(), Some(4));
        p.lp.bias = 0x2000;
        assert_eq!(p.logit_opts(), Some(5));
        p.lp.k.softcap = 30.0;
        assert_eq!(p.logit_opts(), Some(7));
    }
}
