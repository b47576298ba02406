//! The one source of what Rust and the kernels share: the `#[repr(C)]` structs each kernel takes
//! by value, the loss constants built from [`Options`], the dtype codes and the tile geometry.
//! The kernels never declare these themselves: [`c_header`] generates `flce_abi.cuh` from the
//! declarations below (field order, C types and `static_assert`ed sizes), and the compiler
//! expands it into every kernel file ([`crate::compile`]), so the two sides cannot drift apart.

use flce_core::{DType, Options, Reduction, Shape};

use crate::geometry;

/// A device address as the kernels see it (a pointer, 8 bytes).
pub type DevPtr = u64;

/// A TMA descriptor (`CUtensorMap`, 128 bytes, 64-byte aligned) made on the host by
/// `cuTensorMapEncodeTiled` and passed to the sm90 kernels inside their `__grid_constant__`
/// parameter struct.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TensorMap(pub [u64; 16]);

/// The C declaration of [`TensorMap`], first in `flce_abi.cuh`.
const TENSOR_MAP_C: &str = "struct __align__(64) TensorMap {\n  unsigned long long opaque[16];\n};\n\
static_assert(sizeof(TensorMap) == 128, \"TensorMap: layout differs from Rust\");\n";

/// Declares `#[repr(C)]` structs with, for each field, the C type the kernels see, and collects
/// their C declarations for [`c_header`].
macro_rules! abi_structs {
    ($( $(#[$m:meta])* struct $name:ident { $( $(#[$fm:meta])* $field:ident : $rty:ty = $cty:literal ),* $(,)? } )*) => {
        $(
            $(#[$m])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, Default, PartialEq)]
            pub struct $name { $( $(#[$fm])* pub $field: $rty ),* }
        )*
        /// (struct name, its size in Rust, [(C type, field name, field size in Rust)]) in
        /// declaration order.
        fn declarations() -> Vec<(&'static str, usize, Vec<(&'static str, &'static str, usize)>)> {
            vec![$( (stringify!($name), std::mem::size_of::<$name>(),
                     vec![$( ($cty, stringify!($field), std::mem::size_of::<$rty>()) ),*]) ),*]
        }
    };
}

abi_structs! {
    /// The loss's constants, converted once from [`Options`] and the shape ([`LossConstants::new`]):
    /// the only place where an absent option becomes a sentinel (softcap 0 = none, shift 0 = none).
    struct LossConstants {
        ignore_index: i64 = "long long",
        n: i32 = "int",
        d: i32 = "int",
        v: i32 = "int",
        /// REDUCTION_MEAN, REDUCTION_SUM or REDUCTION_NONE.
        reduction: i32 = "int",
        /// Sequence length of `shift`, 0 without.
        shift: i32 = "int",
        /// s of s·tanh(x/s), 0 without softcap.
        softcap: f32 = "float",
        label_smoothing: f32 = "float",
        z_loss: f32 = "float",
    }

    /// What every kernel that evaluates logits reads.
    struct LogitParams {
        k: LossConstants = "LossConstants",
        e: DevPtr = "const elem_t*",
        c: DevPtr = "const elem_t*",
        bias: DevPtr = "const elem_t*",
        class_w: DevPtr = "const float*",
        /// Effective targets \[N\], -1 ignored.
        targets: DevPtr = "const int*",
        /// Rows of E and C start on 16-byte boundaries.
        aligned: i32 = "int",
    }

    /// sm80 family: flce_forward_tiles.
    struct ForwardTilesParams {
        lp: LogitParams = "LogitParams",
        tiles_per_split: i32 = "int",
        /// [splits, N] packed RowStats.
        partials: DevPtr = "float4*",
        target_logit: DevPtr = "float*",
    }

    /// cuBLAS family: flce_stats_from_logits folds one chunk of f32 logits [N, ldl].
    struct StatsParams {
        lp: LogitParams = "LogitParams",
        logits: DevPtr = "const float*",
        ldl: i32 = "int",
        v0: i32 = "int",
        v_end: i32 = "int",
        /// Columns per vocabulary segment: blockIdx.y folds segment y into partial y.
        seg_cols: i32 = "int",
        /// Distance between the partials of two segments, in tokens.
        partials_ld: i32 = "int",
        first_chunk: i32 = "int",
        partials: DevPtr = "float4*",
        target_logit: DevPtr = "float*",
    }

    /// flce_forward_finish: merges the partials, writes lse, losses and each block's sums.
    struct FinishParams {
        k: LossConstants = "LossConstants",
        partials: DevPtr = "const float4*",
        target_logit: DevPtr = "const float*",
        targets: DevPtr = "const int*",
        class_w: DevPtr = "const float*",
        splits: i32 = "int",
        /// Distance between two splits' partials, in tokens.
        partials_ld: i32 = "int",
        lse: DevPtr = "float*",
        per_token_loss: DevPtr = "float*",
        /// [blocks, 4] f64: each block's {Σ loss, Σ w_t, Σ correct, Σ active}, for
        /// flce_finish_scalars (0: lse and losses only).
        block_sums: DevPtr = "double*",
        /// The splits from `offset_split` on hold a vocabulary slice's partials whose argmax
        /// counts from the slice's first row, `argmax_offset` (the vocabulary-slice pass:
        /// src/pass/vocab_slice.rs); 0 and 0 elsewhere.
        offset_split: i32 = "int",
        argmax_offset: i32 = "int",
    }

    /// flce_finish_scalars: the forward finish's block sums and W into the forward's scalars.
    struct FinishScalarsParams {
        k: LossConstants = "LossConstants",
        class_w: DevPtr = "const float*",
        block_sums: DevPtr = "const double*",
        blocks: i32 = "int",
        /// {loss, accuracy, Σ w_t over non-ignored tokens, W}.
        out_scalars: DevPtr = "float*",
    }

    /// One backward chunk: tokens [n0, n_end), vocabulary [v0, v_end); shared by both families'
    /// gradient kernels.
    struct GradChunk {
        lse: DevPtr = "const float*",
        /// g_i = ∂L/∂loss_i \[N\] (0 at ignored tokens).
        token_scale: DevPtr = "const float*",
        /// {W = Σ_j w_j, Σ w_t} from flce_token_scale.
        scalars: DevPtr = "const float*",
        n0: i32 = "int",
        n_end: i32 = "int",
        v0: i32 = "int",
        v_end: i32 = "int",
        /// G [n_end - n0, ldg] in the input dtype.
        g_out: DevPtr = "elem_t*",
        ldg: i32 = "int",
        /// Column sums of G per 128-row tile [row tiles, ldg] (f32), or null.
        db_partial: DevPtr = "float*",
    }

    /// sm80 family: flce_grad_tiles recomputes the chunk's logits itself.
    struct GradTilesParams {
        lp: LogitParams = "LogitParams",
        chunk: GradChunk = "GradChunk",
    }

    /// cuBLAS family: flce_grad_from_logits reads the chunk's f32 logits [n_end - n0, ldl].
    struct GradLogitsParams {
        lp: LogitParams = "LogitParams",
        chunk: GradChunk = "GradChunk",
        logits: DevPtr = "const float*",
        ldl: i32 = "int",
    }

    /// sm90 family: flce_sm90_forward (tensor maps first: they need 64-byte alignment).
    struct Sm90ForwardParams {
        /// E [N, D]: boxes of 128 tokens × 64.
        map_e: TensorMap = "TensorMap",
        /// C [V, D]: boxes of 256 / cluster vocabulary rows × 64.
        map_c: TensorMap = "TensorMap",
        lp: LogitParams = "LogitParams",
        /// Blocks per cluster along the token tiles (1 or 2: C's box multicast to both).
        cluster: i32 = "int",
        /// Token-tile slots of the main grid (a multiple of the cluster; plan::sm90_grid).
        slots: i32 = "int",
        /// The main grid's splits (a split left without tiles writes empty statistics). The
        /// launch is one-dimensional: blocks [0, slots · splits) the main grid (block b: slot
        /// b % slots, split b / slots), then the rest's (plan::Sm90Rest).
        splits: i32 = "int",
        /// 256-column vocabulary tiles per main split.
        tiles_per_split: i32 = "int",
        /// The rest's token-tile slots (0: no rest; a multiple of the cluster). Its splits cover
        /// the tiles from splits · tiles_per_split on, `rest_tiles_per_split` each; their
        /// partials follow the main grid's.
        rest_slots: i32 = "int",
        rest_tiles_per_split: i32 = "int",
        /// Distance between two splits' partials, in tokens (N; the three-product pass's N of the
        /// whole call while a launch covers one token chunk).
        partials_ld: i32 = "int",
        /// [splits (+ the rest's), partials_ld] packed RowStats.
        partials: DevPtr = "float4*",
        target_logit: DevPtr = "float*",
    }

    /// sm90 family: flce_sm90_forward_compact, the three-product pass's forward over one token
    /// chunk (plan::ThreeProductLogits::Compact): the forward's partials and target logits, and each logit
    /// z as q = exp(z − m) in f16, m the row's running max after its tile (`m_ref`).
    struct Sm90CompactForwardParams {
        fwd: Sm90ForwardParams = "Sm90ForwardParams",
        /// q [fwd.lp.k.n, V] (pitch ldq) for the TMA stores of whole tiles: boxes of 16 rows × 32
        /// columns, 64-byte swizzle (family/sm90.rs store_map) with the fold in registers
        /// (FLCE_SM90_MAINLOOP fold=2 or 0); staged (the default, fold=1) 128 rows × 64
        /// columns, 128-byte swizzle.
        map_q: TensorMap = "TensorMap",
        /// f16 bits [fwd.lp.k.n, ldq]: q of every logit of the chunk (columns < V).
        q: DevPtr = "u16*",
        ldq: i32 = "int",
        /// f32 [fwd.lp.k.n, ld_mref]: m of each (token, 256-column tile).
        m_ref: DevPtr = "float*",
        ld_mref: i32 = "int",
    }

    /// flce_grad_from_compact (kernels/sm90/three_product_grad.cu): G of one token chunk from the compact
    /// forward's q (overwritten by G in place: `chunk.g_out` is the same buffer as `q`).
    struct CompactGradParams {
        lp: LogitParams = "LogitParams",
        chunk: GradChunk = "GradChunk",
        q: DevPtr = "const u16*",
        /// f32 [chunk rows, ld_mref] (chunk-relative rows).
        m_ref: DevPtr = "const float*",
        ld_mref: i32 = "int",
        /// f32 \[N\]: exact target logits (absolute token index).
        target_logit: DevPtr = "const float*",
    }

    /// sm90 family: flce_sm90_grad recomputes one backward chunk's logits.
    struct Sm90GradParams {
        map_e: TensorMap = "TensorMap",
        map_c: TensorMap = "TensorMap",
        /// G [n_end − n0, ldg] of the chunk for the TMA stores of staged tiles (FLCE_SM90_MAINLOOP
        /// gfold=1: boxes of 128 rows × 64 columns, 128-byte swizzle); unused (zeros) otherwise.
        map_g: TensorMap = "TensorMap",
        lp: LogitParams = "LogitParams",
        chunk: GradChunk = "GradChunk",
        /// Blocks per cluster along the token tiles (1 or 2).
        cluster: i32 = "int",
        /// Token-tile slots: grid x (plan::sm90_grid; a multiple of the cluster).
        slots: i32 = "int",
        /// 256-column tiles per block along the chunk's vocabulary.
        tiles_per_cta: i32 = "int",
        /// In the ordered module (`FLCE_SM90_MAINLOOP` gorder=1, SM90_GRAD_ORDER, the default):
        /// token tiles per raster group of the tiles' order (plan::sm90_product_order), the grid
        /// `slots` × 1 blocks each taking every `slots`-th tile of it; 0 the (slots, splits) grid,
        /// in either module (the token-outer plan's, family/sm90.rs grad_chunk).
        group_rows: i32 = "int",
    }

    /// sm90 family: flce_sm90_product, the backward's two products through TMA + wgmma
    /// (FLCE_SM90_PRODUCTS=1): out [rows, cols] (+)= A [rows, k] · B [k, cols], B read MN-major.
    /// dE += G·C_chunk: A = G (K-major), B = C's chunk rows; dC_chunk = Gᵀ·E: A = Gᵀ (G read
    /// MN-major), B = E.
    struct Sm90ProductParams {
        /// A: K-major (a_mn 0: boxes of 128 rows × 64 of k) or MN-major (a_mn 1: boxes of 64 rows
        /// (inner) × 64 of k).
        map_a: TensorMap = "TensorMap",
        /// B [k, cols], boxes of 64 of cols (inner) × 64 of k (read MN-major).
        map_b: TensorMap = "TensorMap",
        /// out [rows, ldo]: f32 (out_f32 1) or the input dtype (out_f32 0: rounded once). Rows
        /// [0, seg1_row) at `out`, [seg1_row, seg2_row) at `out_seg1`, [seg2_row, rows) at
        /// `out_seg2` (dE's f32 accumulator in up to three buffers: backward.rs de_acc_rows),
        /// each segment's first row at its pointer; seg1_row = seg2_row = rows: one buffer.
        out: DevPtr = "void*",
        out_seg1: DevPtr = "void*",
        out_seg2: DevPtr = "void*",
        seg1_row: i32 = "int",
        seg2_row: i32 = "int",
        ldo: i32 = "int",
        rows: i32 = "int",
        cols: i32 = "int",
        /// The sum's length.
        k: i32 = "int",
        /// 0: write, 1: add (f32 output only).
        accumulate: i32 = "int",
        a_mn: i32 = "int",
        out_f32: i32 = "int",
        /// The output tiles' order: row tiles per raster group (plan::sm90_product_order).
        group_rows: i32 = "int",
        /// Blocks (grid x): one per SM, each taking every blocks-th tile, or one per tile.
        blocks: i32 = "int",
        /// Output tile width: 256 or 192 (plan::sm90_product_tile_n).
        tile_n: i32 = "int",
        /// Blocks per cluster: 1, or 2 — a pair of column tiles of one row tile sharing A's box,
        /// each block loading half and multicasting it (FLCE_SM90_PRODUCT_CLUSTER=2).
        cluster: i32 = "int",
        /// The f32 every sum is multiplied by before it is written: the backward's α
        /// (the scalars' word SCALAR_ALPHA, common/types.cuh), or a 1.
        alpha: DevPtr = "const float*",
    }

    /// flce_db_reduce: sums db_partial over row tiles in order.
    struct DbReduceParams {
        db_partial: DevPtr = "const float*",
        row_tiles: i32 = "int",
        ldb: i32 = "int",
        count: i32 = "int",
        /// 0 on the first token chunk (overwrite), 1 after.
        accumulate: i32 = "int",
        db_acc: DevPtr = "float*",
        /// The backward's α (the scalars' word SCALAR_ALPHA): each column's sum is multiplied by it.
        alpha: DevPtr = "const float*",
    }

    /// flce_to_elem: the one rounding of an f32 accumulator to the input dtype.
    struct ToElemParams {
        src: DevPtr = "const float*",
        dst: DevPtr = "elem_t*",
        count: u64 = "unsigned long long",
        /// An f32 every element is multiplied by before it is rounded, or 0 (null): none.
        scale: DevPtr = "const float*",
    }

    /// flce_scale_grads: gradients times a device scalar (skipped when it is 1).
    struct ScaleGradsParams {
        data: DevPtr = "elem_t*",
        count: u64 = "unsigned long long",
        scale: DevPtr = "const float*",
    }

    /// flce_prep_targets: shift and ignore_index applied, out-of-range targets reported.
    struct PrepParams {
        k: LossConstants = "LossConstants",
        targets: DevPtr = "const long long*",
        out: DevPtr = "int*",
        /// The status word (common/types.cuh): INT_MAX, a bad target's index, or a bad class weight.
        status: DevPtr = "int*",
    }

    /// flce_check_class_weights: the status word's bad-class-weight code.
    struct WeightCheckParams {
        class_w: DevPtr = "const float*",
        v: i32 = "int",
        /// The status word (common/types.cuh).
        status: DevPtr = "int*",
    }

    /// flce_token_scale: W, Σ w_t and g_i from grad_output.
    struct ScaleParams {
        k: LossConstants = "LossConstants",
        targets: DevPtr = "const int*",
        class_w: DevPtr = "const float*",
        grad_output: DevPtr = "const float*",
        token_scale: DevPtr = "float*",
        scalars: DevPtr = "float*",
    }

    /// flce_slice_targets (shared/vocab_parallel.cu): a vocabulary slice's effective targets.
    struct SliceTargetsParams {
        /// The slice's constants: v = its rows.
        k: LossConstants = "LossConstants",
        targets: DevPtr = "const long long*",
        out: DevPtr = "int*",
        status: DevPtr = "int*",
        /// The slice's first row and the whole vocabulary's size.
        offset: i32 = "int",
        total: i32 = "int",
        /// A target on another rank: TARGET_IGNORED when negative, else this + the token's index.
        elsewhere_base: i32 = "int",
    }

    /// flce_export_partials: a slice's split partials as f64 [N, 6] rows, and its Σ w_j.
    struct ExportParams {
        k: LossConstants = "LossConstants",
        partials: DevPtr = "const float4*",
        target_logit: DevPtr = "const float*",
        targets: DevPtr = "const int*",
        class_w: DevPtr = "const float*",
        splits: i32 = "int",
        partials_ld: i32 = "int",
        offset: i32 = "int",
        out: DevPtr = "double*",
        class_weight_sum: DevPtr = "double*",
    }

    /// flce_finish_ranks: P ranks' rows merged in rank order, then the forward's outputs.
    struct RanksFinishParams {
        /// The whole vocabulary's constants.
        k: LossConstants = "LossConstants",
        /// [P, N, 6] f64, rank order.
        parts: DevPtr = "const double*",
        /// \[P\] f64: each rank's Σ w_j.
        class_weight_sums: DevPtr = "const double*",
        ranks: i32 = "int",
        /// Global effective targets (flce_prep_targets over the whole vocabulary).
        targets: DevPtr = "const int*",
        lse: DevPtr = "float*",
        per_token_loss: DevPtr = "float*",
        out_scalars: DevPtr = "float*",
        /// [N, 6] f64: the merged rows, for the backward.
        merged: DevPtr = "double*",
    }

    /// flce_slice_scales: a slice backward's token scales, W and extended class weights.
    struct SliceScalesParams {
        k: LossConstants = "LossConstants",
        /// The slice's backward targets (flce_slice_targets with elsewhere_base = its rows).
        targets: DevPtr = "const int*",
        merged: DevPtr = "const double*",
        class_weight_sums: DevPtr = "const double*",
        ranks: i32 = "int",
        v_slice: i32 = "int",
        /// The slice's class weights \[v_slice\], or null.
        class_w: DevPtr = "const float*",
        /// [v_slice + N] written when class_w is given.
        class_w_ext: DevPtr = "float*",
        grad_output: DevPtr = "const float*",
        token_scale: DevPtr = "float*",
        scalars: DevPtr = "float*",
    }
}

impl LossConstants {
    /// The constants of `opts` for `shape` (both validated by the caller).
    pub fn new(shape: Shape, opts: &Options) -> Self {
        LossConstants {
            ignore_index: opts.ignore_index,
            n: shape.n as i32,
            d: shape.d as i32,
            v: shape.v as i32,
            reduction: reduction_code(opts.reduction),
            shift: opts.shift.unwrap_or(0) as i32,
            softcap: opts.softcap.unwrap_or(0.0),
            label_smoothing: opts.label_smoothing,
            z_loss: opts.z_loss,
        }
    }
}

fn reduction_code(r: Reduction) -> i32 {
    match r {
        Reduction::Mean => 0,
        Reduction::Sum => 1,
        Reduction::None => 2,
    }
}

/// The kernels' element-type code (FLCE_DTYPE).
pub fn dtype_code(d: DType) -> i32 {
    match d {
        DType::BF16 => 0,
        DType::F16 => 1,
        DType::F32 => 2,
    }
}

/// `flce_config.cuh`: the dtype and geometry defines, for one element type. Comes first in every
/// kernel file.
pub fn c_config(dtype: DType) -> String {
    let mut s = String::from("// Generated by crates/flce-cuda/src/abi.rs: dtype codes and geometry.\n");
    for (name, value) in [
        ("FLCE_BF16", 0),
        ("FLCE_F16", 1),
        ("FLCE_F32", 2),
        ("FLCE_DTYPE", dtype_code(dtype)),
        ("REDUCTION_MEAN", reduction_code(Reduction::Mean)),
        ("REDUCTION_SUM", reduction_code(Reduction::Sum)),
        ("REDUCTION_NONE", reduction_code(Reduction::None)),
    ] {
        s.push_str(&format!("#define {name} {value}\n"));
    }
    for (name, value) in geometry::defines(dtype) {
        s.push_str(&format!("#define {name} {value}\n"));
    }
    s
}

/// `flce_abi.cuh`: the parameter structs as C declarations with their sizes asserted (after the
/// element type is defined).
pub fn c_header() -> String {
    let mut s = String::from("// Generated by crates/flce-cuda/src/abi.rs: the kernels' parameter structs.\n");
    s.push_str(TENSOR_MAP_C);
    for (name, size, fields) in declarations() {
        s.push_str(&format!("struct {name} {{\n"));
        for (c_type, field, _) in &fields {
            s.push_str(&format!("  {c_type} {field};\n"));
        }
        s.push_str(&format!("}};\nstatic_assert(sizeof({name}) == {size}, \"{name}: layout differs from Rust\");\n"));
    }
    s
}

#[cfg(test)]
#[path = "abi_tests.rs"]
mod tests;
