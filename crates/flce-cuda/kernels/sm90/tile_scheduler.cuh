// flce sm90 family: the tile schedule — a static, balanced deal of 128 × 256 logit tiles to the
// grid's clusters (the device side of src/plan/schedule.rs, where it is unit-tested).
//
// A unit is (row group g, vocabulary tile j), numbered g-major: u = g·tiles + j. A row group is
// one token tile, or one per block of a cluster (the blocks of a cluster walk the same units, each
// on its own token tile: rank r of the cluster takes token tile g·cluster + r). Cluster c owns the
// run [c·U / clusters, (c+1)·U / clusters): runs differ by at most one unit, so one wave of
// blocks keeps every SM busy to the end. A run may cross row groups; the epilogues see
// begin_rows(g) / tile / end_rows(g) and the forward leaves one partial per (run, token).
// 64-bit products: U·clusters passes 2^31 from ~16M units.
#pragma once

struct Sm90Schedule {
  long long units;
  int tiles;     // vocabulary tiles per row group
  int clusters;  // runs

  __device__ __forceinline__ long long first(int c) const { return (long long)c * units / clusters; }
  __device__ __forceinline__ int cluster_of(long long u) const { return (int)(((u + 1) * clusters - 1) / units); }
  // The runs sharing row group g: cluster_of(g·tiles) .. cluster_of(g·tiles + tiles − 1).
  __device__ __forceinline__ int first_cluster_of_group(int g) const { return cluster_of((long long)g * tiles); }
  __device__ __forceinline__ int last_cluster_of_group(int g) const {
    return cluster_of((long long)g * tiles + tiles - 1);
  }
};

__device__ __forceinline__ Sm90Schedule sm90_schedule(int groups, int tiles, int clusters) {
  Sm90Schedule s;
  s.units = (long long)groups * tiles;
  s.tiles = tiles;
  s.clusters = clusters;
  return s;
}

// This block's cluster index in the 1-D grid (blocks of a cluster are consecutive).
__device__ __forceinline__ int sm90_cluster_index(u32 cluster_blocks) { return (int)(blockIdx.x / cluster_blocks); }
