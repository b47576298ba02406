//! The sm90 family's launchers (Hopper, sm_90a): TMA descriptors for E and C, and the two seams
//! — forward partials (kernels/sm90/forward.cu) and a backward chunk's G (kernels/sm90/grad.cu) —
//! over the warp-specialised TMA + wgmma main loop (kernels/sm90/mainloop.cuh). The plans are
//! the sm80 family's (same partial and G layouts); only the block shapes differ (128 × 256
//! tiles, one block per SM), so the launchers size their own grids from the plan.

use std::ops::Range;

use cudarc::driver::sys as cu;
use flce_core::{DType, Result};

use crate::abi::{
    DevPtr, GradChunk, LogitParams, Sm90CompactForwardParams, Sm90ForwardParams, Sm90GradParams, Sm90ProductParams,
    TensorMap,
};
use crate::error::Check;
use crate::geometry::{SM90_TILE_K, SM90_TILE_M, SM90_TILE_N};
use crate::launch::Call;
use crate::plan::{
    grad_grid, sm90_product_order, sm90_product_tile_n, BackwardPlan, ForwardPlan, Sm90Grid, ThreeProductPlan,
};
use crate::runtime::Kernel;
use crate::tuning::ProductOrder;

/// A TMA descriptor of a row-major [rows, d] matrix of 16-bit elements at `ptr`, read in boxes of
/// `box_rows` rows × 64 elements (one 128-byte swizzle row), zero-filled past its edges.
fn tensor_map(ptr: DevPtr, rows: usize, d: usize, dtype: DType, box_rows: usize, what: &str) -> Result<TensorMap> {
    tensor_map_pitched(ptr, rows, d, d, dtype, box_rows, what)
}

/// The same over rows `pitch` elements apart (at least `d`; a multiple of 8).
pub fn tensor_map_pitched(
    ptr: DevPtr,
    rows: usize,
    d: usize,
    pitch: usize,
    dtype: DType,
    box_rows: usize,
    what: &str,
) -> Result<TensorMap> {
    let data_type = match dtype {
        DType::BF16 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F16 => cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        DType::F32 => unreachable!("the planner never picks the sm90 family for f32"),
    };
    let swizzle = cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B;
    encode_2d(ptr, data_type, [d, rows], pitch * dtype.size_in_bytes(), [SM90_TILE_K, box_rows], swizzle, what)
}

/// A [rows, cols] matrix of 16-bit values (rows `pitch` elements apart) as the sm90 kernels' TMA
/// stores write it (the compact forward's q), in boxes of `boxes` = [columns, rows] swizzled by
/// their row's bytes (32 columns: 64-byte, the staging of kernels/sm90/wgmma.cuh's
/// sm90_store_warp_rows_tma; 64 columns: 128-byte, forward_staged.cuh's); nothing written past
/// `rows` or `cols`.
fn store_map(ptr: DevPtr, rows: usize, cols: usize, pitch: usize, boxes: [usize; 2], what: &str) -> Result<TensorMap> {
    // (16-bit values: the stores copy bits, so f16 serves bf16 too)
    let data_type = cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    let swizzle = match boxes[0] {
        32 => cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        64 => cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        w => unreachable!("no store staging of {w}-column boxes"),
    };
    encode_2d(ptr, data_type, [cols, rows], pitch * 2, boxes, swizzle, what)
}

/// `cuTensorMapEncodeTiled` of a row-major 2-D tensor: `dims` = [columns, rows], rows
/// `row_bytes` apart, boxes of `boxes` = [columns, rows]; zero-filled past its edges on loads.
fn encode_2d(
    ptr: DevPtr,
    data_type: cu::CUtensorMapDataType,
    dims: [usize; 2],
    row_bytes: usize,
    boxes: [usize; 2],
    swizzle: cu::CUtensorMapSwizzle,
    what: &str,
) -> Result<TensorMap> {
    let dims_u64 = [dims[0] as u64, dims[1] as u64];
    let strides = [row_bytes as u64];
    let boxes_u32 = [boxes[0] as u32, boxes[1] as u32];
    let element_strides = [1u32, 1];
    let mut map = cu::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every array has the rank's length (strides: rank − 1); the map is written only.
    unsafe {
        cu::cuTensorMapEncodeTiled(
            &mut map,
            data_type,
            2,
            ptr as *mut std::ffi::c_void,
            dims_u64.as_ptr(),
            strides.as_ptr(),
            boxes_u32.as_ptr(),
            element_strides.as_ptr(),
            cu::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            cu::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .check(&format!(
        "cuTensorMapEncodeTiled({what}: {} × {} at {ptr:#x}, rows {row_bytes} bytes apart, box {} × {})",
        dims[1], dims[0], boxes[1], boxes[0]
    ))?;
    Ok(TensorMap(map.opaque))
}

/// The descriptors of E (boxes of 128 tokens) and C (boxes of 256 vocabulary rows, or the half
/// each block of a cluster of 2 loads and multicasts).
fn maps(call: &Call<'_>, cluster: usize) -> Result<(TensorMap, TensorMap)> {
    let (x, s) = (call.x, call.x.shape);
    Ok((
        tensor_map(x.e, s.n, s.d, x.dtype, SM90_TILE_M, "E")?,
        tensor_map(x.c, s.v, s.d, x.dtype, SM90_TILE_N / cluster, "C")?,
    ))
}

/// Forward: `plan.splits` partials per token, the vocabulary's 256-column tiles shared out over
/// the splits, each block running every `plan.token_slots`-th token tile of its split, in pairs
/// sharing C's box where the plan says so (plan::Sm90Tuning's default; `FLCE_SM90_CLUSTER=1`
/// turns them off). One launch over every token, or, where the plan gives `band_tiles`
/// (plan::SM90_LARGE_N_BAND past 16k tokens), one launch per band of that many token tiles: each
/// sees its band's tokens as a problem of their own (as the three-product pass's chunks:
/// src/pass/three_product.rs) and writes columns [n0, n0 + band) of the partials [splits, N] and target
/// logits; a block runs one token tile of the band over one split, so every band starts its
/// blocks together.
///
/// # Safety
/// As for [`crate::CudaLoss::forward`], with `plan` checked against the call and rows aligned to
/// 16 bytes.
pub(crate) unsafe fn forward_partials(call: &Call<'_>, plan: &ForwardPlan) -> Result<()> {
    forward_partials_into(call, plan, (call.ws.at(plan.partials), call.ws.at(plan.target_logit)))
}

/// [`forward_partials`] into the partials [splits, N] and target logits \[N\] at `outputs`
/// (the vocabulary-slice pass's rest writes its splits after the head's: src/pass/vocab_slice.rs).
///
/// # Safety
/// As for [`forward_partials`]; `outputs` hold `plan.splits` × N packed RowStats and N f32.
pub(crate) unsafe fn forward_partials_into(
    call: &Call<'_>,
    plan: &ForwardPlan,
    outputs: (DevPtr, DevPtr),
) -> Result<()> {
    let s = call.x.shape;
    let grid: Sm90Grid = plan
        .sm90_grid
        .ok_or_else(|| flce_core::Error::Unsupported("forward_partials: the forward plan has no sm90 grid".into()))?;
    let band_rows = if plan.band_tiles > 0 { plan.band_tiles * SM90_TILE_M } else { s.n };
    for n0 in (0..s.n).step_by(band_rows) {
        let tokens = n0..(n0 + band_rows).min(s.n);
        let mut view = call.lp;
        view.k.n = tokens.len() as i32;
        view.targets = call.lp.targets + 4 * n0 as u64;
        let params = forward_params_over(call, tokens, view, grid, plan.cluster, outputs)?;
        call.kernels.launch(call.x.dtype, &params, call.stream)?;
    }
    Ok(())
}

/// The forward's parameters over the call's tokens `tokens`, seen as a problem of their own
/// (`view`: their N and targets; E from their first row): `grid`'s splits, its slots cut to the
/// tokens' tiles (rounded up to the cluster), in clusters of `cluster` unless the tokens hold a
/// single token tile; columns `tokens` of the partials [splits, N] and target logits at `outputs`.
fn forward_params_over(
    call: &Call<'_>,
    tokens: Range<usize>,
    view: LogitParams,
    grid: Sm90Grid,
    cluster: usize,
    outputs: (DevPtr, DevPtr),
) -> Result<Sm90ForwardParams> {
    let (x, s) = (call.x, call.x.shape);
    let (n0, nlen) = (tokens.start, tokens.len());
    let token_tiles = nlen.div_ceil(SM90_TILE_M);
    // the plan's pairs, unless these tokens (a last, shorter run) hold a single token tile
    let cluster = crate::plan::cluster_for_tiles(cluster, token_tiles);
    let e_rows = x.e + (n0 * s.d * x.dtype.size_in_bytes()) as u64;
    let (partials, target_logit) = outputs;
    // (slots cut to the tokens' tiles, rounded up to the cluster: a shorter band or chunk)
    let slots_for = |slots: usize| slots.min(token_tiles.div_ceil(cluster) * cluster);
    Ok(Sm90ForwardParams {
        map_e: tensor_map(e_rows, nlen, s.d, x.dtype, SM90_TILE_M, "E (a token range)")?,
        // each block of a pair loads half of C's box and multicasts it to both
        map_c: tensor_map(x.c, s.v, s.d, x.dtype, SM90_TILE_N / cluster, "C")?,
        lp: LogitParams { e: e_rows, ..view },
        cluster: cluster as i32,
        slots: slots_for(grid.slots) as i32,
        splits: grid.splits as i32,
        tiles_per_split: grid.tiles_per_split as i32,
        rest_slots: grid.rest.map_or(0, |r| slots_for(r.slots)) as i32,
        rest_tiles_per_split: grid.rest.map_or(0, |r| r.tiles_per_split) as i32,
        partials_ld: s.n as i32,
        partials: partials + 16 * n0 as u64,
        target_logit: target_logit + 4 * n0 as u64,
    })
}

/// The three-product pass's forward over tokens `tokens` with compact logits (plan::ThreeProductLogits):
/// the chunk's statistics into partials (columns `tokens` of [splits, N]) and target logits,
/// each logit as f16 q into the plan's `logits` region and its tiles' m into
/// `m_ref` (kernels/sm90/forward.cu, flce_sm90_forward_compact), in clusters of 2 where the plan's
/// tuning pairs token tiles (as the plain forward's). `view` is the chunk's tokens as a problem of
/// their own (its N and targets; src/pass/three_product.rs); `m_ref` the chunk's maxima, `plan.mref_ld()` floats
/// a token (where `plan.m_ref` places them: src/pass/three_product.rs resolves it). `outputs`: the partials
/// [splits, N] and target logits \[N\] (the plan's regions, or the vocabulary-slice pass's).
///
/// # Safety
/// As for [`crate::CudaLoss::forward_backward_three_product`], with `plan` compact and checked against the call.
pub(crate) unsafe fn forward_compact(
    call: &Call<'_>,
    plan: &ThreeProductPlan,
    tokens: Range<usize>,
    view: LogitParams,
    m_ref: DevPtr,
    outputs: (DevPtr, DevPtr),
) -> Result<()> {
    let grid: Sm90Grid = plan.forward_grid.ok_or_else(|| {
        flce_core::Error::Unsupported("forward_compact: the step plan has no compact forward grid".into())
    })?;
    let q = call.ws.at(plan.logits);
    let params = Sm90CompactForwardParams {
        // (the staged fold stores each tile's four 64-column boxes of 128 rows from its staging)
        map_q: store_map(
            q,
            tokens.len(),
            call.x.shape.v,
            plan.ldg,
            if crate::geometry::Sm90Mainloop::current().compact_staged() { [64, SM90_TILE_M] } else { [32, 16] },
            "q (TMA stores)",
        )?,
        fwd: forward_params_over(call, tokens, view, grid, plan.forward_cluster, outputs)?,
        q,
        ldq: plan.ldg as i32,
        m_ref,
        ld_mref: plan.mref_ld() as i32,
    };
    call.kernels.launch(call.x.dtype, &params, call.stream)?;
    Ok(())
}

/// Backward: G (and the db column sums) of one chunk, its logits recomputed in the tiles, on the
/// grid of [`grad_grid`] within the tuning's L2 budget (persistent blocks over token tiles g,
/// g + slots, … of their vocabulary split). With G formed in the consumers' registers that grid
/// read less than one block per token tile (ncu, H200: DRAM 35% → 23%, L2 hits 66% →
/// 76%) but took no less time (journal v13); with G staged for the producer warpgroup's idle
/// warps (the default) it pays: fwd+bwd 0.969 / 0.978 / 0.981× at Gemma 2 / Llama 3 / Qwen 2.5
/// (journal v44). Plain calls of the vocabulary-outer plans run the staged G's tiles instead in
/// the raster order of [`sm90_product_order`] over a one-wave grid (every block within one tile of
/// the others; 0.98× at 32k tokens, even at the model shapes: journal v45).
///
/// # Safety
/// As for [`crate::CudaLoss::backward`], with `plan` checked against the call and rows aligned to
/// 16 bytes.
pub(crate) unsafe fn grad_chunk(call: &Call<'_>, plan: &BackwardPlan, chunk: GradChunk) -> Result<()> {
    let rows = ((chunk.n_end - chunk.n0) as usize).div_ceil(SM90_TILE_M);
    let tuning = call.tuning.sm90;
    let mainloop = crate::geometry::Sm90Mainloop::current();
    // the raster order (gorder=1) in the staged default module only — plain calls — and unpaired:
    // its steps are single tiles (kernels/sm90/grad.cu SM90_GRAD_ORDERED); in the vocabulary-outer
    // plans only: without dC (the token-outer plan) it measured 3% slower than the grid
    // (journal v45), which that module then runs (group_rows 0), unpaired
    let ordered_module =
        mainloop.grad_ordered() && mainloop.grad_staged() && crate::runtime::logit_opts_of(&call.lp).is_none();
    let ordered = ordered_module && !plan.token_outer;
    let cluster = if ordered_module { 1 } else { tuning.grad_cluster_for(rows) };
    let (map_e, map_c) = maps(call, cluster)?;
    let tiles = ((chunk.v_end - chunk.v0) as usize).div_ceil(SM90_TILE_N);
    let row_bytes = call.x.shape.d * call.x.dtype.size_in_bytes();
    let (slots, tiles_per_cta, group_rows) = if ordered {
        // E's rows of the chunk's tokens and C's of its vocabulary rows, as the product's A and B
        let tokens = (chunk.n_end - chunk.n0) as usize;
        let vocab = (chunk.v_end - chunk.v0) as usize;
        let (e_bytes, c_bytes) = ((tokens * row_bytes) as f64, (vocab * row_bytes) as f64);
        let order = sm90_product_order(rows, tiles, e_bytes, c_bytes, call.sm_count, true);
        (order.blocks, tiles, order.group_rows)
    } else {
        let grid = grad_grid(rows, tiles, call.sm_count, cluster, tuning.grad_l2_budget, row_bytes);
        (grid.slots, grid.tiles_per_split, 0)
    };
    let staged = mainloop.grad_staged();
    let params = Sm90GradParams {
        map_e,
        map_c,
        // (the staged G's TMA stores: its chunk's rows, boxes of 64 columns × 128 rows)
        map_g: if staged {
            let tokens = (chunk.n_end - chunk.n0) as usize;
            store_map(chunk.g_out, tokens, chunk.ldg as usize, chunk.ldg as usize, [64, SM90_TILE_M], "G (TMA stores)")?
        } else {
            TensorMap([0; 16])
        },
        lp: call.lp,
        chunk,
        cluster: cluster as i32,
        slots: slots as i32,
        tiles_per_cta: tiles_per_cta as i32,
        group_rows: group_rows as i32,
    };
    call.kernels.launch(call.x.dtype, &params, call.stream)?;
    Ok(())
}

/// One of the backward's products through flce_sm90_product (kernels/sm90/product.cu), for
/// cuBLAS's under `FLCE_SM90_PRODUCTS=1` (a measurement of the persistent backward's product
/// phase): `g` the first of `tokens` rows of a chunk's G (pitch `ldg`) over vocabulary rows `vocab`.
#[derive(Clone, Debug)]
pub(crate) enum Product {
    /// dE's f32 accumulator rows of those tokens (pitch D) (+)= G · C\[vocab\] (add unless the first
    /// chunk): `segments` (at most 3, contiguous, covering the tokens in order) give each run of
    /// tokens with the address of its first row's accumulator row (backward.rs de_acc_rows).
    De { segments: Vec<(Range<usize>, DevPtr)>, accumulate: bool },
    /// dC's rows `vocab` = Gᵀ · E\[tokens\] (input dtype, rounded once), or the chunk's f32
    /// accumulator (pitch D) (+)=.
    Dc { out: DevPtr, f32_acc: bool, accumulate: bool },
}

/// # Safety
/// As for [`crate::CudaLoss::backward`]: `g` holds `tokens.len()` × `ldg` elements of the input
/// dtype, the outputs their rows; 16-byte aligned rows. Every sum is multiplied by the f32 at
/// `alpha` before it is written (the backward's α for a dC written once, its 1 for f32
/// accumulators: backward.rs chunk_pair).
pub(crate) unsafe fn product(
    call: &Call<'_>,
    g: DevPtr,
    ldg: usize,
    tokens: Range<usize>,
    vocab: Range<usize>,
    what: Product,
    alpha: DevPtr,
) -> Result<()> {
    let (x, d) = (call.x, call.x.shape.d);
    let s = x.dtype.size_in_bytes() as u64;
    let (n, vc) = (tokens.len(), vocab.len());
    // a cluster of 2 runs column tiles in pairs (its steps pairs, its SMs pairs of SMs), each
    // block loading half of A's box: 64 of G's rows (K-major) or one of Gᵀ's two 64-row boxes
    let cluster = call.tuning.product_cluster;
    // (A's map, B's map, output rows, the sum's length, accumulate, A read MN-major, f32 output,
    // the first output row's address, where the other rows go)
    let (map_a, map_b, rows, k, accumulate, a_mn, out_f32, out, split) = match what {
        Product::De { segments, accumulate } => {
            // dE's rows over its accumulator's buffers (checked before `segments[0]`)
            let split = out_segments(n, tokens.start, &segments)?;
            (
                tensor_map_pitched(g, n, vc, ldg, x.dtype, SM90_TILE_M / cluster, "G")?,
                // C's chunk rows read MN-major: boxes of 64 of D (inner) × 64 vocabulary rows
                tensor_map_pitched(x.c + vocab.start as u64 * d as u64 * s, vc, d, d, x.dtype, 64, "C chunk")?,
                n,
                vc,
                accumulate,
                false,
                true,
                segments[0].1,
                split,
            )
        }
        Product::Dc { out, f32_acc, accumulate } => (
            // Gᵀ: G read MN-major, boxes of 64 vocabulary rows (inner) × 64 tokens
            tensor_map_pitched(g, n, vc, ldg, x.dtype, 64, "G as Gᵀ")?,
            tensor_map_pitched(x.e + tokens.start as u64 * d as u64 * s, n, d, d, x.dtype, 64, "E rows")?,
            vc,
            n,
            f32_acc && accumulate,
            true,
            f32_acc,
            out,
            OutSegments::one(vc),
        ),
    };
    let row_tiles = rows.div_ceil(SM90_TILE_M);
    let tile_n =
        call.tuning.product_tile_n.unwrap_or_else(|| sm90_product_tile_n(row_tiles, d, call.sm_count, cluster));
    let col_units = d.div_ceil(tile_n).div_ceil(cluster);
    // the steps that run together: one per SM, or per resident cluster (a persistent grid of more
    // clusters than fit at once would run its last ones in a second wave)
    let together = match cluster {
        1 => call.sm_count,
        _ => {
            let resident = call.kernels.max_active_clusters(Kernel::Sm90Product, x.dtype, cluster as u32)?;
            (call.sm_count / cluster).min(resident as usize).max(1)
        }
    };
    let order_of = call.tuning.product_order;
    let order = sm90_product_order(
        row_tiles,
        col_units,
        (rows * k) as f64 * s as f64,
        (k * d) as f64 * s as f64,
        together,
        order_of == ProductOrder::Grouped,
    );
    let params = Sm90ProductParams {
        map_a,
        map_b,
        out,
        out_seg1: split.out_seg1,
        out_seg2: split.out_seg2,
        seg1_row: split.seg1_row as i32,
        seg2_row: split.seg2_row as i32,
        ldo: d as i32,
        rows: rows as i32,
        cols: d as i32,
        k: k as i32,
        accumulate: accumulate as i32,
        a_mn: a_mn as i32,
        out_f32: out_f32 as i32,
        group_rows: if order_of == ProductOrder::Rows { row_tiles } else { order.group_rows } as i32,
        blocks: (order.blocks * cluster) as i32,
        tile_n: tile_n as i32,
        cluster: cluster as i32,
        alpha,
    };
    call.kernels.launch(x.dtype, &params, call.stream)?;
    Ok(())
}

/// Where a product's output rows go (Sm90ProductParams): rows [0, seg1_row) at the launch's `out`,
/// [seg1_row, seg2_row) from `out_seg1`, [seg2_row, rows) from `out_seg2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OutSegments {
    seg1_row: usize,
    seg2_row: usize,
    out_seg1: DevPtr,
    out_seg2: DevPtr,
}

impl OutSegments {
    /// Every one of `rows` rows in the one buffer.
    fn one(rows: usize) -> Self {
        OutSegments { seg1_row: rows, seg2_row: rows, out_seg1: 0, out_seg2: 0 }
    }
}

/// The segments of dE's accumulator rows ([`Product::De`]) as the kernel takes them: `rows` output
/// rows, the first the token `first_token`; `segments` at most 3, contiguous, covering them in
/// order (the first segment's address is the launch's `out`).
fn out_segments(rows: usize, first_token: usize, segments: &[(Range<usize>, DevPtr)]) -> Result<OutSegments> {
    let contiguous = segments.windows(2).all(|w| w[0].0.end == w[1].0.start);
    let covers = segments.first().map(|f| f.0.start) == Some(first_token)
        && segments.last().map(|l| l.0.end) == Some(first_token + rows);
    if segments.len() > 3 || !contiguous || !covers {
        let why = format!(
            "dE product: accumulator segments {segments:?} do not cover tokens {first_token}..{}",
            first_token + rows
        );
        return Err(flce_core::Error::Unsupported(why));
    }
    let start = |i: usize| segments.get(i).map_or((rows, 0), |(r, p)| (r.start - first_token, *p));
    let ((seg1_row, out_seg1), (seg2_row, out_seg2)) = (start(1), start(2));
    Ok(OutSegments { seg1_row, seg2_row, out_seg1, out_seg2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_buffer_puts_every_row_in_it() {
        // dC's products have as many output rows as vocabulary rows, not tokens: both splits at
        // `rows` (a split at the token count sent rows past it to address 0)
        assert_eq!(
            OutSegments::one(19_200),
            OutSegments { seg1_row: 19_200, seg2_row: 19_200, out_seg1: 0, out_seg2: 0 }
        );
        let one = out_segments(600, 0, &[(0..600, 0x1000)]).unwrap();
        assert_eq!(one, OutSegments::one(600));
    }

    #[test]
    fn segments_split_rows_relative_to_the_first_token() {
        let two = out_segments(4096, 4096, &[(4096..6000, 0x1000), (6000..8192, 0x9000)]).unwrap();
        assert_eq!(two, OutSegments { seg1_row: 1904, seg2_row: 4096, out_seg1: 0x9000, out_seg2: 0 });
        let three = out_segments(5000, 0, &[(0..100, 0x1000), (100..3000, 0x2000), (3000..5000, 0x3000)]).unwrap();
        assert_eq!(three, OutSegments { seg1_row: 100, seg2_row: 3000, out_seg1: 0x2000, out_seg2: 0x3000 });
    }

    #[test]
    fn segments_that_do_not_cover_the_rows_in_order_are_refused() {
        assert!(out_segments(600, 0, &[]).is_err());
        assert!(out_segments(600, 0, &[(0..300, 1), (301..600, 2)]).is_err());
        assert!(out_segments(600, 0, &[(0..500, 1)]).is_err());
        assert!(out_segments(600, 10, &[(0..600, 1)]).is_err());
        let four = [(0..1, 1), (1..2, 2), (2..3, 3), (3..4, 4)];
        assert!(out_segments(4, 0, &four).is_err());
    }
}
