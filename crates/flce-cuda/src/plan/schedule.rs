//! The sm90 family's tile schedule: a static, balanced deal of work units to the grid.
//!
//! A unit is one 128 × 256 logit tile: (row group g, vocabulary tile j), numbered g-major,
//! u = g·tiles + j. A row group is one token tile, or one per block of a cluster (the blocks of a
//! cluster walk the same units, each on its own token tile). Cluster c of `clusters` owns the
//! contiguous run of units [c·U / clusters, (c+1)·U / clusters): every run within one unit of the
//! others, so one wave of blocks keeps every SM busy to the end. The split grid it replaces
//! (token tiles × ceil-divided vocabulary splits) left 4 of the H200's 132 SMs idle at 8k tokens.
//! A run may cross row groups: the forward then leaves one partial per (run, token) — the
//! `slots` of a row group, merged in run order by the finish step.
//!
//! kernels/sm90/tile_scheduler.cuh computes the same runs on the device (integer formulas
//! below, in 64 bits there).

/// A balanced schedule of `groups × tiles` units over `clusters` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm90Schedule {
    pub groups: usize,
    pub tiles: usize,
    pub clusters: usize,
}

impl Sm90Schedule {
    /// At most `max_clusters` runs, never more than there are units, at least one.
    pub fn balanced(groups: usize, tiles: usize, max_clusters: usize) -> Self {
        let units = groups * tiles;
        Sm90Schedule { groups, tiles, clusters: max_clusters.min(units).max(1) }
    }

    pub fn units(&self) -> usize {
        self.groups * self.tiles
    }

    /// The first unit of cluster `c`'s run (c = clusters: the end of the last run).
    pub fn first(&self, c: usize) -> usize {
        c * self.units() / self.clusters
    }

    /// The cluster whose run holds unit `u`.
    pub fn cluster_of(&self, u: usize) -> usize {
        ((u + 1) * self.clusters - 1) / self.units()
    }

    /// Partials per token the forward needs: the most runs that share one row group.
    pub fn slots(&self) -> usize {
        (0..self.groups)
            .map(|g| self.cluster_of(g * self.tiles + self.tiles - 1) - self.cluster_of(g * self.tiles) + 1)
            .max()
            .unwrap_or(1)
    }

    /// The longest run in units: the schedule's time, in tiles.
    pub fn longest_run(&self) -> usize {
        self.units().div_ceil(self.clusters)
    }

    /// The forward's schedule: the most runs (up to `max_clusters`) whose row groups are shared by
    /// at most `max_slots` runs each (the partials' memory).
    pub fn forward(groups: usize, tiles: usize, max_clusters: usize, max_slots: usize) -> Self {
        let mut s = Self::balanced(groups, tiles, max_clusters);
        while s.clusters > 1 && s.slots() > max_slots.max(1) {
            s.clusters -= 1;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_partition_the_units_evenly_and_cluster_of_inverts_first() {
        for (groups, tiles, clusters) in [(64, 1000, 132), (1, 2, 132), (3, 7, 5), (256, 501, 132), (5, 1, 132)] {
            let s = Sm90Schedule::balanced(groups, tiles, clusters);
            assert!(s.clusters >= 1 && s.clusters <= s.units());
            assert_eq!((s.first(0), s.first(s.clusters)), (0, s.units()));
            for c in 0..s.clusters {
                let (a, b) = (s.first(c), s.first(c + 1));
                assert!(b > a, "an empty run");
                assert!(b - a <= s.longest_run() && b - a + 1 >= s.longest_run());
                for u in a..b {
                    assert_eq!(s.cluster_of(u), c);
                }
            }
        }
    }

    #[test]
    fn eight_k_tokens_fill_all_132_sms_with_three_partials() {
        // Gemma 2: 64 token tiles × 1000 vocabulary tiles; the split grid ran 128 blocks of 500
        let s = Sm90Schedule::forward(64, 1000, 132, 8);
        assert_eq!((s.clusters, s.longest_run(), s.slots()), (132, 485, 3));
        // a memory cap of one partial per token: whole row groups per run
        let one = Sm90Schedule::forward(512, 1000, 132, 1);
        assert_eq!((one.clusters, one.slots()), (128, 1));
        // one token: the vocabulary dealt out over every SM, one partial per run
        let single = Sm90Schedule::forward(1, 1000, 132, 1 << 16);
        assert_eq!((single.clusters, single.slots()), (132, 132));
    }
}
