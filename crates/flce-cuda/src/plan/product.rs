//! The sm90 product kernel's launch (kernels/sm90/product.cu, the backward's dE and dC products
//! under `FLCE_SM90_PRODUCTS=1`): its tiles' order over the SMs and its tile width.

/// The order and grid of one product launch (kernels/sm90/product.cu: out = A·B over `row_tiles`
/// × `col_tiles` output tiles of 128 rows × the launch's tile width, [`sm90_product_tile_n`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm90ProductOrder {
    /// Row tiles per raster group: the tiles' linear order walks down `group_rows` row tiles,
    /// then the next column tile, and the next group of rows after every column tile.
    /// `row_tiles` is the plain column-by-column order (one block per tile: CUDA's block order).
    pub group_rows: usize,
    /// Blocks: one per SM, each taking every `blocks`-th tile of the order (persistent: the
    /// producer loads the next tile's stages while the consumers write the last), or one per tile.
    pub blocks: usize,
}

/// The product's order on `sm_count` SMs for A of `a_bytes` (all row tiles over k) and B of
/// `b_bytes` (all column tiles over k): the tiles that run together (one per SM, neighbours in
/// the linear order) share each A row tile's and each B column tile's reads through L2, so DRAM
/// reads A once per window of columns and B once per window of rows; the group size minimising
/// `a_bytes · col_tiles / window_cols + b_bytes · row_tiles / window_rows` (the smallest on ties).
/// Row-fastest order — CUDA's for a (row tiles, column tiles) grid — read Llama 3's Gᵀ (dC's A,
/// 315 MB at a 19,200-row chunk) from DRAM once per column tile: ncu, H200, 59% L2
/// hits, DRAM 58%, the clock down to 1.42 GHz.
pub fn sm90_product_order(
    row_tiles: usize,
    col_tiles: usize,
    a_bytes: f64,
    b_bytes: f64,
    sm_count: usize,
    persistent: bool,
) -> Sm90ProductOrder {
    let (rt, ct) = (row_tiles.max(1), col_tiles.max(1));
    let together = sm_count.max(1).min(rt * ct);
    let traffic = |r: usize| {
        let (rows, cols) =
            if r * ct <= together { (together.div_ceil(ct).min(rt), ct) } else { (r, together.div_ceil(r).min(ct)) };
        a_bytes * ct as f64 / cols as f64 + b_bytes * rt as f64 / rows as f64
    };
    // the smallest group of the least traffic (a larger one only if clearly less)
    let best = (2..=rt).fold(1, |best, r| if traffic(r) < traffic(best) * (1.0 - 1e-9) { r } else { best });
    let tiles = rt * ct;
    Sm90ProductOrder { group_rows: best, blocks: if persistent { tiles.min(sm_count.max(1)) } else { tiles } }
}

/// The product kernel's tile widths (kernels/sm90/product.cu: wgmma n 256 or n 192).
pub const SM90_PRODUCT_TILE_WIDTHS: [usize; 2] = [256, 192];

/// What a 192-wide tile's step costs against a 256-wide one's, per column: its smaller MMA reads
/// as much of A per k-step for three quarters of the work. An estimate (not yet measured): a
/// narrower tile must win by more than this to be taken.
const NARROW_TILE_COST: f64 = 1.03;

/// The tile width of one product launch over `row_tiles` row tiles (of 128) × `cols` columns on
/// `sm_count` SMs: the width whose tiles finish in the least time, counting every wave whole
/// (a launch's time ~ its waves × a tile's time, a tile's time ~ its width): 192 where 256-wide
/// tiles leave much of the last wave idle — Gemma 2's D = 2304 is 9 tiles of 256 (dE at 8k
/// tokens: 576 tiles on 132 SMs, 87% of 5 waves) and 12 of 192 (768 tiles, 97% of 6 waves,
/// cuBLAS's 192 × 192 tiles fill it likewise: journal v21).
/// In clusters of `pairs` blocks (2: column tiles in pairs, kernels/sm90/product.cu) an odd column
/// count leaves a tile of zeros in each row's last pair, counted as work: Gemma 2's 9 columns of
/// 256 run as 10.
pub fn sm90_product_tile_n(row_tiles: usize, cols: usize, sm_count: usize, pairs: usize) -> usize {
    let (sm, pairs) = (sm_count.max(1), pairs.max(1));
    let time = |width: usize| {
        let tiles = row_tiles.max(1) * cols.max(1).div_ceil(width).div_ceil(pairs) * pairs;
        let per_column = if width == 256 { 1.0 } else { NARROW_TILE_COST };
        tiles.div_ceil(sm) as f64 * width as f64 * per_column
    };
    SM90_PRODUCT_TILE_WIDTHS.into_iter().fold(256, |best, w| if time(w) < time(best) { w } else { best })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_tiles_in_raster_groups_of_the_least_traffic() {
        // the G kernel's order (FLCE_SM90_MAINLOOP gorder=1, family/sm90.rs grad_chunk): Llama 3's
        // first backward chunk, 64 token tiles of E (64 MB) × 75 vocabulary tiles of C (19,200
        // rows, 150 MB) on 132 SMs — groups of 16 token tiles: the 132 tiles that run together
        // read 16 token tiles' E and ~8 vocabulary tiles' C; one block per SM, each every 132nd
        // tile (4,800 tiles: 36 or 37 each, where the (slots, splits) grid's longest runs 39)
        let o = sm90_product_order(64, 75, 64.0 * 1048576.0, 150.0 * 1048576.0, 132, true);
        assert_eq!(o, Sm90ProductOrder { group_rows: 16, blocks: 132 });
    }

    #[test]
    fn product_tiles_narrow_only_where_the_waves_fill_better() {
        // Gemma 2 (D 2304), dE over 8192 tokens: 5 waves of 256 against 6 of 192 (1280 vs 1152)
        assert_eq!(sm90_product_tile_n(64, 2304, 132, 1), 192);
        // and its dC chunks of 7168 vocabulary rows: 504 tiles (4 waves, 1024) against 672 (6, 1152)
        assert_eq!(sm90_product_tile_n(56, 2304, 132, 1), 256);
        // Llama 3 (D 4096): 1024 tiles, 8 waves (2048) against 1408, 11 (2112): 256
        assert_eq!(sm90_product_tile_n(64, 4096, 132, 1), 256);
        // Qwen 2.5 (D 3584): 896 tiles, 7 waves (1792) against 1216, 10 (1920): 256
        assert_eq!(sm90_product_tile_n(64, 3584, 132, 1), 256);
        // a narrow D: one column tile either way, and the narrower MMA wastes less on zeros
        // (D = 64, 520: the GPU tests' small cases take the 192-wide path)
        assert_eq!(sm90_product_tile_n(64, 64, 132, 1), 192);
        assert_eq!(sm90_product_tile_n(40, 520, 132, 1), 192);
        // in pairs of column tiles Gemma 2's dC chunk runs 9 columns of 256 as 10 (560 tiles, 5
        // waves: 1280) against 12 of 192 (672, 6 waves: 1152 · 1.03): 192; Llama 3's 16 stay 256
        assert_eq!(sm90_product_tile_n(56, 2304, 132, 2), 192);
        assert_eq!(sm90_product_tile_n(64, 4096, 132, 2), 256);
        // every width is one the kernel has, whatever the shape
        for rt in [1usize, 5, 64, 400] {
            for cols in [1usize, 192, 520, 2304, 8192] {
                for sm in [1usize, 2, 132] {
                    for pairs in [1, 2] {
                        assert!(SM90_PRODUCT_TILE_WIDTHS.contains(&sm90_product_tile_n(rt, cols, sm, pairs)));
                    }
                }
            }
        }
    }

    #[test]
    fn product_groups_share_both_operands_through_l2() {
        // Llama 3's dC of a 19,200-row chunk: Gᵀ 150 row tiles (315 MB), E 16 column tiles (64 MB)
        let dc = sm90_product_order(150, 16, 315e6, 64e6, 132, true);
        assert_eq!(dc.blocks, 132);
        let traffic = |r: usize| {
            let cols = 132usize.div_ceil(r).min(16);
            315e6 * 16.0 / cols as f64 + 64e6 * 150.0 / r as f64
        };
        assert!((8..=24).contains(&dc.group_rows), "{dc:?}");
        // far below the row-fastest order's 16 reads of Gᵀ
        assert!(traffic(dc.group_rows) < 0.3 * (315e6 * 16.0 + 64e6 * 150.0 / 132.0));
        // one block per tile when not persistent; fewer tiles than SMs: every tile its block
        assert_eq!(sm90_product_order(150, 16, 315e6, 64e6, 132, false).blocks, 2400);
        assert_eq!(sm90_product_order(2, 3, 1e6, 1e6, 132, true).blocks, 6);
        // all tiles run together: no order reads less than once each; the smallest group
        assert_eq!(sm90_product_order(2, 3, 1e6, 1e6, 132, true).group_rows, 1);
        // a single row tile or column tile
        assert_eq!(sm90_product_order(1, 16, 1e6, 1e6, 132, true).group_rows, 1);
        let col = sm90_product_order(300, 1, 1e6, 1e6, 132, true);
        assert!(col.group_rows >= 1 && col.group_rows <= 300 && col.blocks == 132);
    }

    #[test]
    fn product_order_is_within_its_bounds() {
        for rt in [1usize, 2, 7, 32, 64, 150, 1000] {
            for ct in [1usize, 3, 16, 21] {
                for sm in [1usize, 8, 132] {
                    let o = sm90_product_order(rt, ct, 3e8, 6e7, sm, true);
                    assert!(o.group_rows >= 1 && o.group_rows <= rt, "{rt} {ct} {sm} {o:?}");
                    assert!(o.blocks >= 1 && o.blocks <= sm.min(rt * ct), "{rt} {ct} {sm} {o:?}");
                }
            }
        }
    }
}
