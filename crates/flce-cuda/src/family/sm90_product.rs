//! The sm90 family's product launchers: flce's own TMA + wgmma products (kernels/sm90/product.cu,
//! product_q.cu) — the backward's dE and dC under `FLCE_SM90_PRODUCTS=1`, and the three-product
//! pass's under [`crate::plan::StepProducts`] (measurement alternatives to cuBLAS's).

use std::ops::Range;

use flce_core::{DType, Result};

use super::sm90::tensor_map_pitched;
use crate::abi::{CompactGradParams, DevPtr, Sm90ProductParams, Sm90ProductQParams, TensorMap};
use crate::geometry::{Sm90ProductOrderKnob, SM90_TILE_M};
use crate::loss::Call;
use crate::plan::{sm90_product_order, sm90_product_tile_n};
use crate::runtime::Kernel;

/// One of the backward's products through flce_sm90_product (kernels/sm90/product.cu), for
/// cuBLAS's under `FLCE_SM90_PRODUCTS=1` (a measurement of the persistent backward's product
/// phase) or [`crate::plan::StepProducts`]: `g` the first of `tokens` rows of a chunk's G (pitch
/// `ldg`) over vocabulary rows `vocab`.
#[derive(Clone, Debug)]
pub(crate) enum Product {
    /// dE's f32 accumulator rows of those tokens (pitch D) (+)= G · C[vocab] (add unless the first
    /// chunk): `segments` (at most 3, contiguous, covering the tokens in order) give each run of
    /// tokens with the address of its first row's accumulator row (backward.rs de_acc_rows).
    De { segments: Vec<(Range<usize>, DevPtr)>, accumulate: bool },
    /// dE's rows of those tokens (input dtype, pitch D, rounded once) = G · C[vocab]: the
    /// three-product pass's, one product over the whole vocabulary.
    DeRows { out: DevPtr },
    /// dC's rows `vocab` = Gᵀ · E[tokens] (input dtype, rounded once), or the chunk's f32
    /// accumulator (pitch D) (+)=.
    Dc { out: DevPtr, f32_acc: bool, accumulate: bool },
}

/// # Safety
/// As for [`crate::CudaLoss::backward`]: `g` holds `tokens.len()` × `ldg` elements of the input
/// dtype, the outputs their rows; 16-byte aligned rows.
pub(crate) unsafe fn product(
    call: &Call<'_>,
    g: DevPtr,
    ldg: usize,
    tokens: Range<usize>,
    vocab: Range<usize>,
    what: Product,
) -> Result<()> {
    let params = product_params(call, (g, call.x.dtype), ldg, tokens, vocab, what, Kernel::Sm90Product)?;
    call.be.kernels.launch(call.x.dtype, &params, call.stream)?;
    Ok(())
}

/// The three-product pass's dE for the chunk of `tokens` through flce_sm90_product_q
/// (kernels/sm90/product_q.cu): dE's rows at `out` (input dtype, pitch D) = G · C over the whole
/// vocabulary, G formed inside the product from the compact forward's q (f16 [tokens, ldq]) and
/// `grad` (flce_grad_from_compact's parameters: the same G, bitwise). Plain calls only: no bias,
/// softcap or smoothing (the kernel forms G as the G pass's default module does).
///
/// # Safety
/// As for [`crate::CudaLoss::forward_backward`]: `q` holds the chunk's q, `grad.m_ref` its maxima
/// (not within dE), the chunk's lse final; 16-byte aligned rows.
pub(crate) unsafe fn product_de_from_q(
    call: &Call<'_>,
    q: DevPtr,
    ldq: usize,
    tokens: Range<usize>,
    out: DevPtr,
    grad: CompactGradParams,
) -> Result<()> {
    if crate::runtime::logit_opts_of(&grad.lp).is_some() {
        let why = "dE from q: a call with a bias, softcap or label smoothing (the G pass forms its G)";
        return Err(flce_core::Error::Unsupported(why.into()));
    }
    let vocab = 0..call.x.shape.v;
    let what = Product::DeRows { out };
    let product = product_params(call, (q, DType::F16), ldq, tokens, vocab, what, Kernel::Sm90ProductQ)?;
    call.be.kernels.launch(
        call.x.dtype,
        &Sm90ProductQParams { product, grad, form: crate::geometry::sm90_qform_knob() },
        call.stream,
    )?;
    Ok(())
}

/// The parameters of one product launch of `kernel`: A the chunk's G (or q: `a`'s dtype) at `a.0`.
#[allow(clippy::too_many_arguments)]
unsafe fn product_params(
    call: &Call<'_>,
    a: (DevPtr, DType),
    ldg: usize,
    tokens: Range<usize>,
    vocab: Range<usize>,
    what: Product,
    kernel: Kernel,
) -> Result<Sm90ProductParams> {
    let (x, d) = (call.x, call.x.shape.d);
    let s = x.dtype.size_in_bytes() as u64;
    let (n, vc) = (tokens.len(), vocab.len());
    let (g, a_dtype) = a;
    // a cluster of 2 runs column tiles in pairs (its steps pairs, its SMs pairs of SMs), each
    // block loading half of A's box: 64 of G's rows (K-major) or one of Gᵀ's two 64-row boxes
    let cluster = crate::geometry::sm90_product_cluster_knob();
    // dE's A: G's rows (K-major), boxes of 128 tokens (or the half each block of a pair loads) ×
    // 64 vocabulary rows; B: C's chunk rows read MN-major, boxes of 64 of D (inner) × 64 vocabulary rows
    let de_maps = || -> Result<(TensorMap, TensorMap)> {
        Ok((
            tensor_map_pitched(g, n, vc, ldg, a_dtype, SM90_TILE_M / cluster, "G")?,
            tensor_map_pitched(x.c + vocab.start as u64 * d as u64 * s, vc, d, d, x.dtype, 64, "C chunk")?,
        ))
    };
    // (A's map, B's map, output rows, the sum's length, accumulate, A read MN-major, f32 output,
    // the first output row's address, where the other rows go)
    let (map_a, map_b, rows, k, accumulate, a_mn, out_f32, out, split) = match what {
        Product::De { segments, accumulate } => {
            // dE's rows over its accumulator's buffers (checked before `segments[0]`)
            let split = out_segments(n, tokens.start, &segments)?;
            let (map_a, map_b) = de_maps()?;
            (map_a, map_b, n, vc, accumulate, false, true, segments[0].1, split)
        }
        Product::DeRows { out } => {
            let (map_a, map_b) = de_maps()?;
            (map_a, map_b, n, vc, false, false, false, out, OutSegments::one(n))
        }
        Product::Dc { out, f32_acc, accumulate } => (
            // Gᵀ: G read MN-major, boxes of 64 vocabulary rows (inner) × 64 tokens
            tensor_map_pitched(g, n, vc, ldg, a_dtype, 64, "G as Gᵀ")?,
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
    let tile_n = crate::geometry::sm90_product_tile_n_knob()
        .unwrap_or_else(|| sm90_product_tile_n(row_tiles, d, call.be.sm_count(), cluster));
    let col_units = d.div_ceil(tile_n).div_ceil(cluster);
    // the steps that run together: one per SM, or per resident cluster (a persistent grid of more
    // clusters than fit at once would run its last ones in a second wave)
    let together = match cluster {
        1 => call.be.sm_count(),
        _ => {
            let resident = call.be.kernels.max_active_clusters(kernel, x.dtype, cluster as u32)?;
            (call.be.sm_count() / cluster).min(resident as usize).max(1)
        }
    };
    let knob = crate::geometry::sm90_product_order_knob();
    let order = sm90_product_order(
        row_tiles,
        col_units,
        (rows * k) as f64 * s as f64,
        (k * d) as f64 * s as f64,
        together,
        knob == Sm90ProductOrderKnob::Grouped,
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
        group_rows: if knob == Sm90ProductOrderKnob::Rows { row_tiles } else { order.group_rows } as i32,
        blocks: (order.blocks * cluster) as i32,
        tile_n: tile_n as i32,
        cluster: cluster as i32,
    };
    Ok(params)
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
