//! The sm90 kernels' grid: how the (token tile × vocabulary tile) work of a forward call or a
//! backward chunk is shared out over one block per SM, with the L2 footprint of the blocks that
//! run together in view.
//!
//! Block (g, s) of a grid of `slots` × `splits` owns vocabulary split s (`tiles_per_split`
//! consecutive 256-column tiles) and runs the token tiles g, g + slots, g + 2·slots, … of it one
//! after another (kernels/sm90/mainloop.cuh, `Sm90TokenTiles`). Every block does about the same
//! work, so the blocks walk in step: at any time they read `slots` token tiles of E and `splits`
//! vocabulary tiles of C. Each E tile is read again at every vocabulary step, so it must stay in
//! L2 from one step to the next, with the step's C tiles streaming past it: the schedule keeps
//! `slots`·128 + `splits`·256 rows of E and C (the footprint) within the L2 budget where that
//! costs (almost) no balance. The grid of every token tile at once (`slots` = token tiles, the
//! first sm90 grid) keeps all of E in play: 64 MB at Llama 3's 8192 × 4096, more than the H200's
//! 50 MB L2 (ncu: 70% L2 hits and 2.2× cuBLAS's DRAM bytes for the same logits).
//! Whole token tiles on every block leave SMs idle or some slots a tile longer (Llama 3's 64 ×
//! 501 tiles: 252 steps on 16 × 8 blocks where 243 would be even), so a forward grid may add a
//! rest ([`Sm90Rest`]): its splits a little shorter, the idle SMs over the vocabulary's last
//! tiles.

use crate::geometry::{SM90_TILE_M, SM90_TILE_N};

pub use crate::tuning::{Sm90Tuning, SM90_COMPACT_L2_BUDGET, SM90_L2_BUDGET};

impl Sm90Tuning {
    /// Blocks per cluster of a forward grid of `token_tiles` token tiles: pairs need two.
    pub fn cluster_for(&self, token_tiles: usize) -> usize {
        cluster_for_tiles(self.cluster, token_tiles)
    }

    /// Blocks per cluster of a G grid of `token_tiles` token tiles.
    pub fn grad_cluster_for(&self, token_tiles: usize) -> usize {
        cluster_for_tiles(self.grad_cluster, token_tiles)
    }
}

/// `cluster` blocks per cluster for a launch of `token_tiles` token tiles, or 1 where there is a
/// single tile to run (pairs need two).
pub fn cluster_for_tiles(cluster: usize, token_tiles: usize) -> usize {
    if token_tiles >= 2 {
        cluster.max(1)
    } else {
        1
    }
}

/// A balance within this factor of the best counts as equal when a smaller footprint is on offer.
const BALANCE_SLACK: f64 = 1.03;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm90Grid {
    /// Token-tile slots: grid x (a multiple of the cluster size).
    pub slots: usize,
    /// Vocabulary splits: grid y; every split has at least one tile.
    pub splits: usize,
    pub tiles_per_split: usize,
    /// The vocabulary's last tiles on the SMs the grid above leaves idle (the forwards' grids:
    /// [`sm90_grid`]); the grid above then covers exactly `splits · tiles_per_split` tiles.
    pub rest: Option<Sm90Rest>,
}

/// A forward grid's rest: `slots` × `splits` more blocks over the vocabulary tiles past the main
/// grid's, `tiles_per_split` each (the last split may have fewer), every block running the token
/// tiles g, g + slots, … of its split as the main grid's do; its partials follow the main grid's.
/// A grid of whole token tiles on every block leaves SMs idle or some slots a token tile longer:
/// Llama 3's 64 × 501 tiles on 132 SMs take 252 tile steps on 16 × 8 blocks (243 would be
/// even); 16 × 8 blocks over 488 tiles and 4 blocks over the last 13 take 244.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm90Rest {
    /// Token-tile slots (a multiple of the cluster size).
    pub slots: usize,
    pub splits: usize,
    pub tiles_per_split: usize,
}

impl Sm90Grid {
    /// `slots` × `splits` blocks over `vocab_tiles` tiles shared out evenly, without a rest: each
    /// split ceil(vocab_tiles / splits) tiles, and as many splits as that takes (none left empty).
    pub fn even(slots: usize, splits: usize, vocab_tiles: usize) -> Self {
        let tiles_per_split = vocab_tiles.div_ceil(splits.max(1));
        Sm90Grid { slots, splits: vocab_tiles.div_ceil(tiles_per_split.max(1)), tiles_per_split, rest: None }
    }

    /// Tiles of the longest block for `token_tiles` token tiles.
    pub fn longest(&self, token_tiles: usize) -> usize {
        let main = token_tiles.div_ceil(self.slots.max(1)) * self.tiles_per_split;
        self.rest.map_or(main, |r| main.max(token_tiles.div_ceil(r.slots.max(1)) * r.tiles_per_split))
    }

    /// Bytes of E and C the main grid's blocks, which run together, read, with `row_bytes` bytes
    /// per row (D·2). (A rest's few blocks are not counted: at most one SM in [`REST_IDLE_ONE_IN`];
    /// at Qwen 2.5 its extra rows raised the forward's DRAM reads 11.0 → 14.1 GB, journal v40.)
    pub fn footprint(&self, row_bytes: usize) -> usize {
        (self.slots * SM90_TILE_M + self.splits * SM90_TILE_N) * row_bytes
    }

    /// Partials per token: the main grid's splits, then the rest's.
    pub fn partial_rows(&self) -> usize {
        self.splits + self.rest.map_or(0, |r| r.splits)
    }

    /// Blocks of the launch (slots already a multiple of the cluster).
    pub fn blocks(&self) -> usize {
        self.slots * self.splits + self.rest.map_or(0, |r| r.slots * r.splits)
    }
}

/// A rest runs only where the main grid leaves at most one SM in this many idle.
pub const REST_IDLE_ONE_IN: usize = 8;
/// At most this many partials per token more for a rest.
pub const REST_MAX_SPLITS: usize = 2;

/// The best rest for the main grid `main` (its tiles per split as planned without a rest) over
/// `rows` token tiles (rounded up to the cluster) × `cols` vocabulary tiles on `sm` SMs: the main
/// grid shortened to `p` tiles a split and the SMs it leaves idle (between `cluster` and
/// sm / [`REST_IDLE_ONE_IN`]) running the rest; per (rest slots, rest splits) the `p` that balances
/// the two, `A·p ≈ B·(cols − splits·p) / q` (A, B the token tiles a main and a rest block run).
/// The grid with the fewest tiles in its longest block, then the fewest rest splits and rest
/// rows; None where no rest shortens the longest block.
fn with_rest(main: Sm90Grid, rows: usize, cols: usize, sm: usize, cluster: usize) -> Option<Sm90Grid> {
    let idle = sm.checked_sub(main.slots * main.splits)?;
    if idle < cluster || idle > sm / REST_IDLE_ONE_IN {
        return None;
    }
    let a = rows.div_ceil(main.slots);
    let mut best: Option<((usize, usize, usize), Sm90Grid)> = None;
    for r in (cluster..=idle.min(rows)).step_by(cluster) {
        let b = rows.div_ceil(r);
        for q in 1..=(idle / r).min(REST_MAX_SPLITS) {
            let balanced = b * cols / (q * a + b * main.splits);
            for p in [balanced, balanced + 1] {
                if p == 0 || p >= main.tiles_per_split || main.splits * p >= cols {
                    continue;
                }
                let rest_tiles = cols - main.splits * p;
                let per_split = rest_tiles.div_ceil(q);
                let rest = Sm90Rest { slots: r, splits: rest_tiles.div_ceil(per_split), tiles_per_split: per_split };
                let grid = Sm90Grid { tiles_per_split: p, rest: Some(rest), ..main };
                let key = (grid.longest(rows), rest.splits, rest.slots * SM90_TILE_M + rest.splits * SM90_TILE_N);
                if best.as_ref().is_none_or(|(k, _)| key < *k) {
                    best = Some((key, grid));
                }
            }
        }
    }
    best.filter(|(_, g)| g.longest(rows) < main.longest(rows)).map(|(_, g)| g)
}

/// The grid for `token_tiles` × `vocab_tiles` tiles on `sm_count` SMs, at most `cap` splits,
/// slots a multiple of `cluster`: the fewest tiles in the longest block among the grids whose
/// footprint fits `l2_budget` (within `BALANCE_SLACK` of the best balance of any grid), then the
/// fewest splits (fewer partials), then the smallest footprint; when none fits, the smallest
/// footprint among the grids within that balance. `rest`: each candidate also with its best
/// [`Sm90Rest`] (`with_rest`; up to [`REST_MAX_SPLITS`] partials beyond `cap`). `l2_budget` 0:
/// every token tile its own slot, the split count that fills the SMs' waves best
/// ([`super::best_split`]), the grid before budgets, without a rest.
#[allow(clippy::too_many_arguments)]
pub fn sm90_grid(
    token_tiles: usize,
    vocab_tiles: usize,
    sm_count: usize,
    cap: usize,
    row_bytes: usize,
    l2_budget: usize,
    cluster: usize,
    rest: bool,
) -> Sm90Grid {
    let cluster = cluster.max(1);
    let rows = token_tiles.max(1).div_ceil(cluster) * cluster;
    let cols = vocab_tiles.max(1);
    let sm = sm_count.max(1);
    let grid = |splits: usize, slots: usize| Sm90Grid::even(slots, splits, cols);
    if l2_budget == 0 {
        return grid(super::best_split(rows, cols, sm, cap), rows);
    }
    let mut candidates = Vec::new();
    for s in 1..=cap.max(1).min(cols) {
        let splits = grid(s, 1).splits;
        if splits != s {
            continue; // the same grid as a smaller split count
        }
        let most = (sm / splits).max(1).min(rows);
        if splits > 1 && sm / splits < cluster {
            continue; // not one cluster of slots per split within one wave
        }
        let mut slots = cluster;
        while slots <= most.max(cluster) {
            let main = grid(s, slots);
            candidates.push(main);
            if rest {
                candidates.extend(with_rest(main, rows, cols, sm, cluster));
            }
            slots += cluster;
        }
    }
    let best = candidates.iter().map(|g| g.longest(rows)).min().unwrap_or(1);
    let balanced = |g: &&Sm90Grid| g.longest(rows) as f64 <= best as f64 * BALANCE_SLACK;
    let fits = |g: &&Sm90Grid| g.footprint(row_bytes) <= l2_budget;
    let pick = candidates
        .iter()
        .filter(balanced)
        .filter(fits)
        .min_by_key(|g| (g.longest(rows), g.partial_rows(), g.footprint(row_bytes)))
        .or_else(|| {
            candidates
                .iter()
                .filter(balanced)
                .min_by_key(|g| (g.footprint(row_bytes), g.longest(rows), g.partial_rows()))
        });
    *pick.expect("at least one candidate grid")
}

/// A paired grid whose longest block is at most this much longer than the unpaired one's is
/// still taken: pairs ran the forward 0.957–0.996× the unpaired at equal grids (journal v24),
/// and a rest balances the unpaired grids better at some tile counts (43 token tiles at Llama 3's
/// vocabulary: 164 tile steps unpaired, 167 paired).
const PAIR_SLACK: f64 = 1.02;

/// The sm90 forward's grid under `tuning` (as [`sm90_grid`] within its L2 budget) and its blocks
/// per cluster: pairs where the tuning asks for them and they keep the balance of the unpaired
/// grid within `PAIR_SLACK` (a paired grid rounds the token tiles up to even and its slots to
/// pairs, which at some tile counts lengthens the longest block by up to ~10%: 33 token tiles at
/// Llama 3's vocabulary take 138 tile steps paired against 126), the unpaired grid otherwise.
pub fn sm90_grid_tuned(
    token_tiles: usize,
    vocab_tiles: usize,
    sm_count: usize,
    cap: usize,
    row_bytes: usize,
    tuning: Sm90Tuning,
) -> (Sm90Grid, usize) {
    let grid = |cluster: usize| {
        sm90_grid(token_tiles, vocab_tiles, sm_count, cap, row_bytes, tuning.l2_budget, cluster, tuning.rest)
    };
    let unpaired = grid(1);
    let cluster = tuning.cluster_for(token_tiles);
    if cluster == 1 {
        return (unpaired, 1);
    }
    let paired = grid(cluster);
    let rows = token_tiles.div_ceil(cluster) * cluster;
    if paired.longest(rows) as f64 <= unpaired.longest(token_tiles) as f64 * PAIR_SLACK {
        (paired, cluster)
    } else {
        (unpaired, 1)
    }
}

/// The grid of one G launch (`family::sm90::grad_chunk`) over `token_tiles` × `vocab_tiles`:
/// with `l2_budget` 0 every token tile its own slot, the split count of [`super::best_split`];
/// else [`sm90_grid`] within that budget (rows of `row_bytes`), without a rest.
pub fn grad_grid(
    token_tiles: usize,
    vocab_tiles: usize,
    sm_count: usize,
    cluster: usize,
    l2_budget: usize,
    row_bytes: usize,
) -> Sm90Grid {
    sm90_grid(token_tiles, vocab_tiles, sm_count, vocab_tiles, row_bytes, l2_budget, cluster, false)
}

/// Tile steps of one G launch over `token_tiles` × `vocab_tiles` on the every-token-tile grid
/// ([`grad_grid`] without an L2 budget, no cluster): the longest block's tiles times the waves of
/// blocks.
pub fn grad_launch_steps(token_tiles: usize, vocab_tiles: usize, sm_count: usize) -> usize {
    let g = grad_grid(token_tiles, vocab_tiles, sm_count, 1, 0, 0);
    (g.slots * g.splits).div_ceil(sm_count.max(1)) * g.tiles_per_split
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    #[test]
    fn g_grids_within_the_l2_budget_and_without() {
        // Llama 3's first backward chunk (19,200 vocabulary rows in dC's scratch: 75 tiles) for
        // 8k tokens: without a budget every token tile its own block, one tile each (4,800
        // blocks, 37 waves); with a 32 MB budget one wave of persistent blocks, 3 token tiles ×
        // 13 vocabulary tiles each — no grid within 3% of the best balance fits 32 MB, so the
        // smallest footprint among them (36 MB, against 8192 × 64 × 128 = 64 MB of E alone)
        let every = grad_grid(64, 75, 132, 1, 0, 8192);
        assert_eq!((every.slots, every.splits, every.tiles_per_split), (64, 75, 1));
        let within = grad_grid(64, 75, 132, 1, 32 * MB, 8192);
        assert_eq!(within, Sm90Grid { slots: 22, splits: 6, tiles_per_split: 13, rest: None });
        assert_eq!((within.blocks(), within.longest(64)), (132, 39));
        assert!(within.footprint(8192) < 36 * MB);
        // the planner's tile steps model the every-token-tile grid
        assert_eq!(grad_launch_steps(64, 75, 132), 4800usize.div_ceil(132));
    }

    #[test]
    fn model_shapes_keep_e_and_c_within_the_budget() {
        // 8k tokens (64 token tiles) on 132 SMs, at most 8 partials per token (without a rest)
        let llama = sm90_grid(64, 501, 132, 8, 4096 * 2, 32 * MB, 1, false);
        assert_eq!(llama, Sm90Grid { slots: 16, splits: 8, tiles_per_split: 63, rest: None });
        assert_eq!(llama.longest(64), 252); // against 251 for 64 × 2 blocks
        assert!(llama.footprint(8192) <= 32 * MB);
        let gemma = sm90_grid(64, 1000, 132, 8, 2304 * 2, 32 * MB, 1, false);
        assert_eq!((gemma.slots, gemma.splits, gemma.longest(64)), (32, 4, 500));
        // the grid before budgets: all 64 token tiles × 2 splits (never a rest)
        let every = Sm90Grid { slots: 64, splits: 2, tiles_per_split: 251, rest: None };
        assert_eq!(sm90_grid(64, 501, 132, 8, 8192, 0, 1, true), every);
        // a backward chunk of Llama 3 (27 tiles): no grid fits 32 MB at the best balance, so the
        // best balance with the smallest footprint
        let chunk = sm90_grid(64, 27, 132, 27, 8192, 32 * MB, 1, false);
        assert_eq!((chunk.slots, chunk.splits, chunk.longest(64)), (32, 4, 14));
        // 32k tokens, 2 partials per token at most: nothing fits 32 MB; 64 slots × 2 splits (68 MB,
        // 1004 tiles) rather than 128 × 1 (136 MB, 1002 tiles)
        let long = sm90_grid(256, 501, 132, 2, 8192, 32 * MB, 1, false);
        assert_eq!((long.slots, long.splits, long.longest(256)), (64, 2, 1004));
    }

    #[test]
    fn a_rest_runs_the_last_tiles_on_the_idle_sms() {
        let rest = |slots, splits, tiles_per_split| Some(Sm90Rest { slots, splits, tiles_per_split });
        // Llama 3 at 8k tokens, pairs: 16 × 8 blocks over 8 × 61 tiles, 4 more over the last 13
        // (16 token tiles each): 244 tile steps against 252 (243 would be even)
        let llama = sm90_grid(64, 501, 132, 8, 8192, 32 * MB, 2, true);
        assert_eq!(llama, Sm90Grid { slots: 16, splits: 8, tiles_per_split: 61, rest: rest(4, 1, 13) });
        assert_eq!((llama.longest(64), llama.blocks(), llama.partial_rows()), (244, 132, 9));
        assert!(llama.footprint(8192) <= 32 * MB);
        // Gemma 2: 486 against 500 (484.8 even); Qwen 2.5: 288 against 297 (288 even)
        let gemma = sm90_grid(64, 1000, 132, 8, 4608, 32 * MB, 2, true);
        assert_eq!(gemma, Sm90Grid { slots: 32, splits: 4, tiles_per_split: 243, rest: rest(4, 1, 28) });
        assert_eq!(gemma.longest(64), 486);
        let qwen = sm90_grid(64, 594, 132, 8, 7168, 32 * MB, 2, true);
        assert_eq!(qwen, Sm90Grid { slots: 16, splits: 8, tiles_per_split: 72, rest: rest(4, 1, 18) });
        assert_eq!(qwen.longest(64), 288);
        // the 16k training step's loss in one launch (128 token tiles, D 2048): 488 against 501
        let step = sm90_grid(128, 501, 132, 8, 4096, 32 * MB, 2, true);
        assert_eq!((step.longest(128), step.blocks()), (488, 132));
        // no rest where the main grid leaves more than one SM in 8 idle (1k tokens: 8 × 8 blocks)
        assert_eq!(sm90_grid(8, 501, 132, 8, 8192, 32 * MB, 2, true).rest, None);
        // the rest covers the last tiles, the partial one among them: 8 token tiles × 9 on 18 SMs
        let small = sm90_grid(8, 9, 18, 8, 512, 32 * MB, 2, true);
        assert_eq!(small, Sm90Grid { slots: 8, splits: 2, tiles_per_split: 4, rest: rest(2, 1, 1) });
        // two rest splits where one would be longer: 6 token tiles × 17 on 34 SMs
        let two = sm90_grid(6, 17, 34, 8, 512, 32 * MB, 2, true);
        assert_eq!((two.rest.map(|r| r.splits), two.longest(6)), (Some(2), 3));
    }

    #[test]
    fn every_grid_covers_all_tiles_within_the_sms() {
        for (t, v, sm, cap, budget, cluster) in [
            (1, 1, 132, 8, 32 * MB, 1),
            (1, 1000, 132, 132, 32 * MB, 1),
            (3, 7, 8, 2, MB, 1),
            (256, 501, 132, 2, 32 * MB, 1),
            (65, 1000, 132, 8, 32 * MB, 2),
            (64, 27, 132, 27, 0, 2),
            (1000, 3, 16, 3, 4 * MB, 1),
            (64, 501, 132, 8, 32 * MB, 2),
            (64, 1000, 132, 8, 32 * MB, 1),
            (128, 501, 132, 16, 16 * MB, 2),
            (8, 9, 18, 8, 32 * MB, 2),
            (6, 17, 34, 8, 32 * MB, 2),
            (33, 501, 132, 16, 32 * MB, 1),
        ] {
            for rest in [false, true] {
                let g = sm90_grid(t, v, sm, cap, 8192, budget, cluster, rest);
                assert!(g.splits >= 1 && g.splits <= cap.max(1) && g.slots >= 1, "{g:?}");
                assert_eq!(g.slots % cluster, 0, "{g:?}");
                match g.rest {
                    None => {
                        assert!(g.splits * g.tiles_per_split >= v && (g.splits - 1) * g.tiles_per_split < v, "{g:?}")
                    }
                    Some(r) => {
                        // the main grid's splits full, the rest's covering the others, none empty
                        assert!(rest && g.splits * g.tiles_per_split < v, "{g:?}");
                        let left = v - g.splits * g.tiles_per_split;
                        assert!(r.splits * r.tiles_per_split >= left && (r.splits - 1) * r.tiles_per_split < left);
                        assert!(r.slots % cluster == 0 && r.slots >= 1 && r.splits <= REST_MAX_SPLITS, "{g:?}");
                        assert!(g.blocks() <= sm && sm - g.slots * g.splits <= sm / REST_IDLE_ONE_IN, "{g:?}");
                    }
                }
                if budget > 0 {
                    assert!(g.blocks() <= sm.max(cluster * g.splits), "{g:?}: more blocks than SMs");
                }
            }
        }
    }
}
