//! Tile and block geometry: defined here once, given to the kernels as `#define`s
//! ([`crate::abi::c_config`]) and used by the planner and the launchers for grids and shared
//! memory.

use flce_core::DType;

/// Logit tile of every family so far (tokens × vocabulary). Chunk sizes are multiples of it.
pub const TILE_M: usize = 128;
pub const TILE_N: usize = 128;
/// Threads of a sm80 tile block (8 warps: 2 along tokens × 4 along the vocabulary).
pub const TILE_THREADS: u32 = 256;
/// Depth of the sm80 cp.async pipeline.
pub const STAGES: usize = 4;
/// Threads of the one-block reductions (flce_finish_scalars, flce_token_scale).
pub const REDUCE_THREADS: u32 = 1024;
/// Threads (and tokens) of a flce_forward_finish block; divides [`REDUCE_THREADS`].
pub const FINISH_THREADS: u32 = 256;
/// Blocks of flce_forward_finish over `n` tokens: the rows of its block sums.
pub const fn finish_blocks(n: usize) -> usize {
    n.div_ceil(FINISH_THREADS as usize)
}
/// Bytes of flce_forward_finish's block sums over `n` tokens (4 f64 a block).
pub const fn finish_sums_bytes(n: usize) -> usize {
    32 * finish_blocks(n)
}
/// The backward's scalars, f32 words of its `scalars` region (written by flce_token_scale /
/// flce_slice_scales, common/types.cuh write_product_scalars): W = Σ_j w_j, Σ w_t, the products'
/// α (a mean's or sum's uniform ∂L/∂loss, kept out of G), and 0 and 1 — cuBLAS's β in device
/// pointer mode (src/blas.rs `Alpha::Scalars`).
pub const SCALAR_W: usize = 0;
pub const SCALAR_W_TOK: usize = 1;
pub const SCALAR_ALPHA: usize = 2;
pub const SCALAR_ZERO: usize = 3;
pub const SCALAR_ONE: usize = 4;
/// A spare word (no kernel writes words 5–7): the three-product pass's 1.0 — the grad_output
/// it forms the gradients for when the caller names none (`plan::ThreeProductPlan::unit_grad`).
pub const SCALAR_UNIT: usize = 7;
/// Bytes of the backward's scalars region.
pub const BACKWARD_SCALARS_BYTES: usize = 32;
/// The device address of word `word` (a `SCALAR_*`) of the scalars region at `scalars`.
pub const fn scalar_word(scalars: u64, word: usize) -> u64 {
    scalars + 4 * word as u64
}
/// Threads of the elementwise kernels (prep, stats, grad_from_logits, db_reduce, to_elem).
pub const ELEMENTWISE_THREADS: u32 = 256;
/// Tokens per block of flce_stats_from_logits (one warp per token).
pub const STATS_TOKENS_PER_BLOCK: u32 = ELEMENTWISE_THREADS / 32;
/// Columns each lane of flce_stats_from_logits loads before folding them (loads in flight per
/// warp: enough to stream the f32 logits at memory speed, not so many that short rows waste them).
pub const STATS_BATCH: u32 = 16;

/// sm90 family (kernels/sm90): logit tile 128 tokens × 256 vocabulary rows, k-step 64 (one
/// 128-byte swizzle row of 16-bit elements), a ring of 4 TMA stages, one producer and two
/// consumer warpgroups.
pub const SM90_TILE_M: usize = 128;
pub const SM90_TILE_N: usize = 256;
pub const SM90_TILE_K: usize = 64;
pub const SM90_STAGES: usize = 4;
pub const SM90_THREADS: u32 = 384;
/// Bytes of one stage's E box (128 × 64 × 2) and C box (256 × 64 × 2).
pub const SM90_A_STAGE_BYTES: usize = SM90_TILE_M * SM90_TILE_K * 2;
pub const SM90_B_STAGE_BYTES: usize = SM90_TILE_N * SM90_TILE_K * 2;
/// The ring (196,608 bytes).
pub const SM90_PIPE_BYTES: usize = SM90_STAGES * (SM90_A_STAGE_BYTES + SM90_B_STAGE_BYTES);
/// 1024 bytes of slack to align the ring, the ring, the full and empty barriers: the start of
/// every sm90 kernel's shared memory; its epilogue's scratch follows.
const SM90_MAINLOOP_SMEM_BYTES: usize = 1024 + SM90_PIPE_BYTES + 2 * 8 * SM90_STAGES;
/// flce_sm90_forward: the main loop's, then each row's running statistics and target.
pub const SM90_FORWARD_SMEM_BYTES: usize = SM90_MAINLOOP_SMEM_BYTES + SM90_TILE_M * (16 + 4);
/// The TMA stores of whole tiles (the compact forward's q): each consumer warp stages its 16
/// rows × 32 columns of 16-bit values (64-byte swizzle: the TMA store's layout) in one of
/// SM90_STORE_BOXES boxes of its own, so that it can fill the next box while the tensor-memory
/// accelerator still reads the last (kernels/sm90/wgmma.cuh, sm90_store_warp_rows_tma).
pub const SM90_STORE_BOXES: usize = 2;
pub const SM90_STORE_BOX_BYTES: usize = 16 * 32 * 2;
/// The 8 consumer warps' store boxes, after 1024 bytes to align them (the swizzle pattern
/// follows address bits).
const SM90_STORE_SMEM_BYTES: usize = 1024 + 8 * SM90_STORE_BOXES * SM90_STORE_BOX_BYTES;
/// flce_sm90_forward_compact: the forward's, then the store boxes.
pub const SM90_COMPACT_FORWARD_SMEM_BYTES: usize = SM90_FORWARD_SMEM_BYTES + SM90_STORE_SMEM_BYTES;
/// A forward with its fold off the MMA warpgroups (both by default; the plain one only with
/// `FLCE_SM90_MAINLOOP` fold=2: kernels/sm90/forward_staged.cuh): the forward's, then each row's tile max and Σw·z,
/// two barriers, 1024 bytes to align the staging, and the staged f16 tile (64 KB); less the
/// ring's saving at launch ([`Sm90Mainloop::forward_ring_saving`]).
pub const SM90_STAGED_FORWARD_SMEM_BYTES: usize =
    SM90_FORWARD_SMEM_BYTES + SM90_TILE_M * 8 + 16 + 1024 + SM90_TILE_M * SM90_TILE_N * 2;
/// flce_sm90_grad's store staging: per consumer warp, 16 rows × 64 columns of G in the 16-bit
/// input dtype, rows padded from 128 to 144 bytes (bank-conflict free both ways). (TMA stores
/// instead, as the compact forward's q, measured no faster: docs/journal.md v38.)
pub const SM90_GRAD_STAGE_ROW_BYTES: usize = 144;
/// flce_sm90_grad: the main loop's, then the column sums of 8 warps (db), then each of the 8
/// consumer warps' store staging.
pub const SM90_GRAD_SMEM_BYTES: usize =
    SM90_MAINLOOP_SMEM_BYTES + 8 * SM90_TILE_N * 4 + 8 * 16 * SM90_GRAD_STAGE_ROW_BYTES;
/// flce_sm90_grad with its epilogue off the MMA warpgroups (`FLCE_SM90_MAINLOOP` gfold=1:
/// kernels/sm90/grad_staged.cuh): the main loop's, 1024 bytes to align the staging, the staged
/// 16-bit tile (64 KB; the option modules, which do not stage, keep their column sums and store
/// slices at the scratch's start, within these bytes), each
/// row's p_scale, target column and target G, and two barriers; less the ring's saving at launch
/// ([`Sm90Mainloop::grad_ring_saving`]).
pub const SM90_STAGED_GRAD_SMEM_BYTES: usize =
    SM90_MAINLOOP_SMEM_BYTES + SM90_TILE_M * 12 + 16 + 1024 + SM90_TILE_M * SM90_TILE_N * 2;
/// flce_sm90_product: the main loop's only (its epilogue writes straight to global memory).
pub const SM90_PRODUCT_SMEM_BYTES: usize = SM90_MAINLOOP_SMEM_BYTES;
// Checked at compile time: both sm90 blocks fit Hopper's 227 KB per block, and every stage starts
// on a 1024-byte boundary (the 128-byte swizzle atom the descriptors assume).
const _: () = assert!(
    SM90_GRAD_SMEM_BYTES <= 227 * 1024
        && SM90_FORWARD_SMEM_BYTES <= 227 * 1024
        && SM90_COMPACT_FORWARD_SMEM_BYTES <= 227 * 1024
        // (the staged folds' on a 3-stage ring; the staging holds the unstaged tiles' scratch)
        && SM90_STAGED_FORWARD_SMEM_BYTES - (SM90_A_STAGE_BYTES + SM90_B_STAGE_BYTES + 16) <= 227 * 1024
        && SM90_STAGED_GRAD_SMEM_BYTES - (SM90_A_STAGE_BYTES + SM90_B_STAGE_BYTES + 16) <= 227 * 1024
        && 8 * SM90_TILE_N * 4 + 8 * 16 * SM90_GRAD_STAGE_ROW_BYTES <= SM90_TILE_M * SM90_TILE_N * 2
);
const _: () = assert!(SM90_A_STAGE_BYTES.is_multiple_of(1024) && SM90_B_STAGE_BYTES.is_multiple_of(1024));

/// Elements per 16-byte copy.
pub fn chunk_elems(dtype: DType) -> usize {
    16 / dtype.size_in_bytes()
}
/// k-step of the sm80 main loop: 32 for 16-bit types, 16 for f32.
pub fn tile_k(dtype: DType) -> usize {
    4 * chunk_elems(dtype)
}
/// Shared-memory row of the main loop, padded by 16 bytes (ldmatrix free of bank conflicts).
pub fn pitch(dtype: DType) -> usize {
    tile_k(dtype) + chunk_elems(dtype)
}
/// Bytes of the sm80 main loop's copy pipeline (81,920 for every dtype).
pub fn pipeline_bytes(dtype: DType) -> usize {
    STAGES * (TILE_M + TILE_N) * pitch(dtype) * dtype.size_in_bytes()
}
/// Dynamic shared memory of flce_forward_tiles: pipeline, targets, running stats per (row, warp
/// column slice).
pub fn forward_smem_bytes(dtype: DType) -> usize {
    pipeline_bytes(dtype) + TILE_M * 4 + TILE_M * 4 * 16
}
/// Dynamic shared memory of flce_grad_tiles: pipeline, targets, row coefficients, db scratch.
pub fn grad_smem_bytes(dtype: DType) -> usize {
    pipeline_bytes(dtype) + TILE_M * 4 + TILE_M * 16 + 2 * TILE_N * 4
}

/// Main-loop variants of the sm90 consumers, measured against each other on the device before one
/// becomes the default (a profiling knob, not a user setting; docs/journal.md v12):
/// `FLCE_SM90_MAINLOOP="skew=S,inflight=I"`. `skew` S (0..=SM90_STAGES): consumer 1 starts only
/// after consumer 0 has issued S k-steps, so one consumer's epilogue can run under the other's
/// wgmma; `inflight` 1: a consumer keeps its last k-step's wgmma group in flight while it waits
/// for the next stage (the stage is released one step later). Default: skew 0, inflight 1 (H200:
/// forward 0.977–0.981× of inflight 0 at the three model shapes, skew no gain, journal v12; the
/// skew re-set at every tile, no gain either: journal v37). `l2a` / `l2b` P: the L2
/// policy of the TMA loads of the A boxes (E; G in the product kernel) / the B boxes (C; C or E):
/// 0 none (default), 1 evict_normal, 2 evict_first, 3 evict_last (kernels/sm90/mainloop.cuh; the
/// compact forward read 8–9 GB from DRAM where the plain one reads 6: journal v38).
/// `stages` 3 or 4 (default [`SM90_STAGES`]): the ring's stages, every sm90 kernel's shared
/// memory one stage (48 KB) smaller at 3 (journal v38). `fold` 0: both forwards fold in their
/// MMA warpgroups; 1 (the default, with the fold warps folding a row a thread: the three-product
/// pass 0.974× of 2 at the 16k loss, 0.985–0.995× at the model shapes, H200, journal v42): both
/// off them (kernels/sm90/forward_staged.cuh,
/// SM90_STAGED_FOLD); 2: the plain forward only — its forward 0.952–0.983× of 0 (journal v39;
/// the compact one staged with a warp a row ran 7–10% slower a launch at D 2048); with either, the forwards' ring is 3 stages so that the 64 KB staging fits (SM90_FORWARD_STAGES),
/// G's and the product kernel's `stages`. `gfold` 1 (the default, with G's grid
/// within an L2 budget: fwd+bwd 0.969 / 0.978 / 0.981× of gfold 0 on the every-token-tile grid at
/// Gemma 2 / Llama 3 / Qwen 2.5, H200, journal v44): the backward's G kernel (flce_sm90_grad)
/// the same way — its consumers stage u = f16(z·log2e − lse·log2e) of every tile (the default
/// module), the producer warpgroup's idle warps form G and TMA-store it
/// (kernels/sm90/grad_staged.cuh; its ring then 3 stages, SM90_GRAD_STAGES); 0: in the
/// consumers' registers. `gorder` 1 (the default, plain calls of the
/// vocabulary-outer plans): G's tiles in a raster order, block b of a one-wave grid taking every
/// gridDim.x-th (kernels/sm90/grad.cu SM90_GRAD_ORDER; fwd+bwd 0.979–0.982× of gorder 0 at Llama 3
/// with 32k tokens, 0.998–1.006× at the model shapes, H200, journal v45); 0 the (slots, splits)
/// grid of `plan::grad_grid`, which the token-outer plan (no dC) keeps either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm90Mainloop {
    pub skew: usize,
    pub inflight: usize,
    pub l2_a: usize,
    pub l2_b: usize,
    pub stages: usize,
    pub fold: usize,
    pub grad_fold: usize,
    pub grad_order: usize,
    /// The product kernel's K-major A (dE's G) read into registers (`prs` 1; kernels/sm90/product.cu
    /// SM90_PRODUCT_A_RS): a measurement variant, 0 by default.
    pub product_rs: usize,
}

impl Default for Sm90Mainloop {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Sm90Mainloop {
    /// The measured default variant.
    pub const DEFAULT: Sm90Mainloop = Sm90Mainloop {
        skew: 0,
        inflight: 1,
        l2_a: 0,
        l2_b: 0,
        stages: SM90_STAGES,
        fold: 1,
        grad_fold: 1,
        grad_order: 1,
        product_rs: 0,
    };

    /// Parses `skew=S,inflight=I,l2a=P,l2b=P,stages=R,fold=F,gfold=G,gorder=O,prs=P` over the default (a part left out
    /// keeps its default; unknown parts are an error).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut m = Self::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| format!("{part:?}: expected key=value"))?;
            let value: usize = value.trim().parse().map_err(|_| format!("{part:?}: not a number"))?;
            match key.trim() {
                "skew" if value <= SM90_STAGES => m.skew = value,
                "stages" if (3..=SM90_STAGES).contains(&value) => m.stages = value,
                "fold" if value <= 2 => m.fold = value,
                "gfold" if value <= 1 => m.grad_fold = value,
                "gorder" if value <= 1 => m.grad_order = value,
                "prs" if value <= 1 => m.product_rs = value,
                "inflight" if value <= 1 => m.inflight = value,
                "l2a" if value <= 3 => m.l2_a = value,
                "l2b" if value <= 3 => m.l2_b = value,
                _ => {
                    return Err(format!(
                        "{part:?}: expected skew=0..={SM90_STAGES}, inflight=0|1, l2a=0..=3, l2b=0..=3, stages=3..={SM90_STAGES}, fold=0..=2, gfold=0|1, gorder=0|1 or prs=0|1"
                    ))
                }
            }
        }
        let shortest = m.stages.min(m.forward_stages()).min(m.grad_stages());
        if m.skew > shortest {
            return Err(format!("skew={} exceeds the ring's {shortest} stages", m.skew));
        }
        // (the product kernel's k-loop with A in registers never signals the skew, and its
        // consumer 1 would wait for it while consumer 0 waits on stages only both release)
        if m.product_rs == 1 && m.skew > 0 {
            return Err("prs=1 takes no skew".into());
        }
        Ok(m)
    }

    /// Shared memory the ring saves below its default size (G's and the product kernel's dynamic
    /// shared memory is its SM90_*_SMEM_BYTES less this).
    pub fn ring_saving(&self) -> usize {
        (SM90_STAGES - self.stages) * (SM90_A_STAGE_BYTES + SM90_B_STAGE_BYTES + 2 * 8)
    }

    /// Whether the plain forward (flce_sm90_forward) folds off its MMA warpgroups: fold 1 or 2.
    pub fn plain_staged(&self) -> bool {
        self.fold >= 1
    }

    /// Whether the compact forward (flce_sm90_forward_compact) folds off its MMA warpgroups: fold 1.
    pub fn compact_staged(&self) -> bool {
        self.fold == 1
    }

    /// The forwards' ring (one module: both kernels): 3 stages where either stages its fold (the
    /// 64 KB does not fit beside 4), else `stages`.
    pub fn forward_stages(&self) -> usize {
        if self.plain_staged() {
            3
        } else {
            self.stages
        }
    }

    /// [`Self::ring_saving`] of the forwards' ring.
    pub fn forward_ring_saving(&self) -> usize {
        Self { stages: self.forward_stages(), ..*self }.ring_saving()
    }

    /// Whether the backward's G kernel (flce_sm90_grad) forms G off its MMA warpgroups: gfold 1.
    pub fn grad_staged(&self) -> bool {
        self.grad_fold == 1
    }

    /// Whether G's tiles run in a raster order over a one-wave grid: gorder 1.
    pub fn grad_ordered(&self) -> bool {
        self.grad_order == 1
    }

    /// G's ring: 3 stages where it stages its tiles, else `stages`.
    pub fn grad_stages(&self) -> usize {
        if self.grad_staged() {
            3
        } else {
            self.stages
        }
    }

    /// [`Self::ring_saving`] of G's ring.
    pub fn grad_ring_saving(&self) -> usize {
        Self { stages: self.grad_stages(), ..*self }.ring_saving()
    }

    /// The variant this process compiles: `FLCE_SM90_MAINLOOP` ([`crate::tuning::sm90_mainloop`]),
    /// parsed once; unset or unparsable, the default (with a warning for the latter).
    pub fn current() -> Self {
        static CURRENT: std::sync::OnceLock<Sm90Mainloop> = std::sync::OnceLock::new();
        *CURRENT.get_or_init(|| match crate::tuning::sm90_mainloop() {
            Some(v) => Self::parse(v).unwrap_or_else(|e| {
                eprintln!("flce: ignoring FLCE_SM90_MAINLOOP: {e}");
                Self::default()
            }),
            None => Self::default(),
        })
    }
}

/// The defines the kernels compile with.
pub fn defines(dtype: DType) -> Vec<(&'static str, usize)> {
    defines_for(dtype, Sm90Mainloop::current())
}

/// [`defines`] for a given main-loop variant.
fn defines_for(dtype: DType, mainloop: Sm90Mainloop) -> Vec<(&'static str, usize)> {
    vec![
        ("TILE_M", TILE_M),
        ("TILE_N", TILE_N),
        ("THREADS", TILE_THREADS as usize),
        ("STAGES", STAGES),
        ("CHUNK", chunk_elems(dtype)),
        ("TILE_K", tile_k(dtype)),
        ("PITCH", pitch(dtype)),
        ("STAGE_ELEMS", (TILE_M + TILE_N) * pitch(dtype)),
        ("PIPELINE_BYTES", pipeline_bytes(dtype)),
        ("FORWARD_SMEM_BYTES", forward_smem_bytes(dtype)),
        ("GRAD_SMEM_BYTES", grad_smem_bytes(dtype)),
        ("REDUCE_THREADS", REDUCE_THREADS as usize),
        ("FINISH_THREADS", FINISH_THREADS as usize),
        ("ELEMENTWISE_THREADS", ELEMENTWISE_THREADS as usize),
        ("SCALAR_W", SCALAR_W),
        ("SCALAR_W_TOK", SCALAR_W_TOK),
        ("SCALAR_ALPHA", SCALAR_ALPHA),
        ("SCALAR_ZERO", SCALAR_ZERO),
        ("SCALAR_ONE", SCALAR_ONE),
        ("STATS_TOKENS_PER_BLOCK", STATS_TOKENS_PER_BLOCK as usize),
        ("STATS_BATCH", STATS_BATCH as usize),
        ("SM90_TILE_M", SM90_TILE_M),
        ("SM90_TILE_N", SM90_TILE_N),
        ("SM90_TILE_K", SM90_TILE_K),
        ("SM90_STAGES", mainloop.stages),
        ("SM90_FORWARD_STAGES", mainloop.forward_stages()),
        ("SM90_STAGED_FOLD", mainloop.fold),
        ("SM90_GRAD_STAGES", mainloop.grad_stages()),
        ("SM90_STAGED_GRAD", mainloop.grad_fold),
        ("SM90_GRAD_ORDER", mainloop.grad_order),
        ("SM90_PRODUCT_A_RS", mainloop.product_rs),
        ("SM90_THREADS", SM90_THREADS as usize),
        ("SM90_A_STAGE_BYTES", SM90_A_STAGE_BYTES),
        ("SM90_B_STAGE_BYTES", SM90_B_STAGE_BYTES),
        ("SM90_GRAD_STAGE_ROW_BYTES", SM90_GRAD_STAGE_ROW_BYTES),
        ("SM90_STORE_BOXES", SM90_STORE_BOXES),
        ("SM90_STORE_BOX_BYTES", SM90_STORE_BOX_BYTES),
        ("SM90_CONSUMER_SKEW", mainloop.skew),
        ("SM90_MMA_INFLIGHT", mainloop.inflight),
        ("SM90_L2_A", mainloop.l2_a),
        ("SM90_L2_B", mainloop.l2_b),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mainloop_variants_parse() {
        assert_eq!(Sm90Mainloop::parse(""), Ok(Sm90Mainloop::default()));
        let m = |skew, inflight, l2_a, l2_b| Sm90Mainloop {
            skew,
            inflight,
            l2_a,
            l2_b,
            stages: SM90_STAGES,
            fold: 1,
            grad_fold: 1,
            grad_order: 1,
            product_rs: 0,
        };
        assert_eq!(Sm90Mainloop::parse("skew=2, inflight=1"), Ok(m(2, 1, 0, 0)));
        assert_eq!(Sm90Mainloop::parse("inflight=0"), Ok(m(0, 0, 0, 0)));
        assert_eq!(Sm90Mainloop::parse("skew=1"), Ok(m(1, 1, 0, 0)));
        assert_eq!(Sm90Mainloop::parse("l2a=3,l2b=2"), Ok(m(0, 1, 3, 2)));
        assert_eq!(Sm90Mainloop::parse("stages=3").map(|x| (x.stages, x.ring_saving())), Ok((3, 48 * 1024 + 16)));
        assert!(Sm90Mainloop::parse("stages=3,skew=4").is_err(), "a lead past the ring deadlocks");
        assert!(Sm90Mainloop::parse("stages=2").is_err());
        assert_eq!(Sm90Mainloop::parse("stages=3,fold=1").map(|x| x.fold), Ok(1));
        assert!(Sm90Mainloop::parse("fold=1,skew=4").is_err(), "the folded forward's ring has 3 stages");
        let two = Sm90Mainloop::parse("fold=2").unwrap();
        assert_eq!((two.plain_staged(), two.compact_staged(), two.forward_stages()), (true, false, 3));
        assert!(Sm90Mainloop::parse("fold=3").is_err());
        // the kernels place the barriers and their scratch after their ring (mainloop.cuh,
        // SM90_RING_STAGES): the stages a kernel compiles with must be those its launch's shared
        // memory was sized for (runtime/mod.rs, dynamic_smem)
        let defines = |knob: &str| defines_for(DType::BF16, Sm90Mainloop::parse(knob).unwrap());
        let get = |d: &[(&str, usize)], name: &str| d.iter().find(|(n, _)| *n == name).map(|&(_, v)| v);
        let fold = defines("fold=1");
        assert_eq!((get(&fold, "SM90_STAGES"), get(&fold, "SM90_FORWARD_STAGES")), (Some(4), Some(3)));
        assert_eq!(get(&fold, "SM90_STAGED_FOLD"), Some(1));
        let m = Sm90Mainloop::parse("fold=1").unwrap();
        assert_eq!((m.ring_saving(), m.forward_ring_saving()), (0, 48 * 1024 + 16));
        let three = defines("stages=3");
        assert_eq!((get(&three, "SM90_STAGES"), get(&three, "SM90_FORWARD_STAGES")), (Some(3), Some(3)));
        let default = defines("");
        assert_eq!((get(&default, "SM90_STAGES"), get(&default, "SM90_FORWARD_STAGES")), (Some(4), Some(3)));
        assert_eq!(get(&default, "SM90_STAGED_FOLD"), Some(1));
        let grad = defines("gfold=1");
        assert_eq!((get(&grad, "SM90_STAGES"), get(&grad, "SM90_GRAD_STAGES")), (Some(4), Some(3)));
        assert_eq!(get(&grad, "SM90_STAGED_GRAD"), Some(1));
        assert_eq!(Sm90Mainloop::parse("gfold=1").unwrap().grad_ring_saving(), 48 * 1024 + 16);
        assert_eq!((get(&default, "SM90_GRAD_STAGES"), get(&default, "SM90_STAGED_GRAD")), (Some(3), Some(1)));
        let in_registers = defines("gfold=0");
        assert_eq!(
            (get(&in_registers, "SM90_GRAD_STAGES"), get(&in_registers, "SM90_STAGED_GRAD")),
            (Some(4), Some(0))
        );
        assert!(Sm90Mainloop::parse("gfold=1,skew=4").is_err(), "the staged G's ring has 3 stages");
        assert!(Sm90Mainloop::parse("gfold=2").is_err());
        let ordered = Sm90Mainloop::parse("gorder=1").unwrap();
        assert!(ordered.grad_ordered() && ordered.grad_staged() && Sm90Mainloop::default().grad_ordered());
        assert!(!Sm90Mainloop::parse("gorder=0").unwrap().grad_ordered());
        assert_eq!(get(&defines("gorder=1"), "SM90_GRAD_ORDER"), Some(1));
        assert_eq!(get(&default, "SM90_GRAD_ORDER"), Some(1));
        // the product kernel's A through registers: off by default
        assert_eq!(
            (get(&default, "SM90_PRODUCT_A_RS"), get(&defines("prs=1"), "SM90_PRODUCT_A_RS")),
            (Some(0), Some(1))
        );
        assert!(Sm90Mainloop::parse("prs=2").is_err());
        assert!(Sm90Mainloop::parse("prs=1,skew=2").is_err(), "the RS k-loop never signals the skew");
        assert_eq!(get(&defines("gorder=0"), "SM90_GRAD_ORDER"), Some(0));
        assert!(Sm90Mainloop::parse("gorder=2").is_err());
        let unstaged = defines("fold=0");
        assert_eq!((get(&unstaged, "SM90_STAGES"), get(&unstaged, "SM90_FORWARD_STAGES")), (Some(4), Some(4)));
        assert!(Sm90Mainloop::parse("l2b=4").is_err(), "policies 0..=3");
        assert!(Sm90Mainloop::parse("chains=4").is_err(), "measured and removed (journal v34, v35)");
        assert!(Sm90Mainloop::parse("expf=8").is_err(), "measured and removed (journal v35)");
        assert!(Sm90Mainloop::parse("lanes=1").is_err(), "measured and removed (journal v13)");
        assert!(Sm90Mainloop::parse("skew=5").is_err(), "more than the ring's stages would deadlock");
        assert!(Sm90Mainloop::parse("skew=3,resync=1").is_err(), "measured and removed (journal v37)");
        assert!(Sm90Mainloop::parse("inflight=2").is_err());
        assert!(Sm90Mainloop::parse("fast").is_err());
    }

    #[test]
    fn shared_memory_is_the_same_for_every_dtype_and_fits_sm86() {
        for dtype in [DType::BF16, DType::F16, DType::F32] {
            assert_eq!(pipeline_bytes(dtype), 81_920);
            assert_eq!(forward_smem_bytes(dtype), 90_624);
            assert_eq!(grad_smem_bytes(dtype), 85_504);
            assert!(forward_smem_bytes(dtype) <= 99 * 1024, "must fit sm_86's 99 KB per block");
        }
    }
}
