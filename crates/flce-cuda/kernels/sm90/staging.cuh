// flce sm90 family: the 64 KB staging of a 128 × 256 tile of 16-bit values through which a
// kernel's MMA warpgroups hand each tile to the producer warpgroup's three idle warps (the
// forward's fold, sm90/forward_staged.cuh; G, sm90/grad_staged.cuh): four boxes of 128 rows × 64
// columns in TMA's 128-byte swizzle, so that the warps' results leave by TMA stores from where
// they were staged.
#pragma once

// Byte offset of the 16-byte chunk `chunk` (8 columns) of row r in the staging: box chunk / 8
// (64 columns), its 128-byte rows swizzled as TMA's 128B pattern (chunk ^ row % 8).
__device__ __forceinline__ u32 staged_offset(int r, int chunk) {
  return (chunk >> 3) * (SM90_TILE_M * 128) + r * 128 + (((chunk & 7) ^ (r & 7)) << 4);
}
// The four boxes at `staging` to `map`'s (col, row), (col + 64, row), …, returning once the
// stores have read the staging (so that it may be rewritten); the caller has fenced the writes
// for the async proxy (fence_async_smem) and synchronised the writers.
__device__ __forceinline__ void tma_store_staging(const TensorMap* map, u32 staging, int col, int row, u64 policy) {
  for (int b = 0; b < SM90_TILE_N / 64; ++b) tma_store_2d(map, staging + b * (SM90_TILE_M * 128), col + 64 * b, row, policy);
  bulk_commit();
  bulk_wait_read<0>();
}
// The three helper warps' own barrier (named barrier 3, 96 threads).
__device__ __forceinline__ void fold_warps_sync() { asm volatile("bar.sync 3, 96;" ::: "memory"); }

// The consumers' stage of a tile: thread (warp row0 + lane / 4 + 8h, columns 8j + 2t, +1) gives
// its value pairs pair(j, h) (two 16-bit values packed, the lower column first), 16 stmatrix.x4
// a thread into the boxes at `staging`; `wrow0` the warp's first row of the tile.
template <class Pair>
__device__ __forceinline__ void stage_warp_rows(u32 staging, int wrow0, Pair pair) {
  const int lane = threadIdx.x & 31;
  const int mi = lane >> 3, rr = (lane & 7) + 8 * (mi & 1);
#pragma unroll
  for (int j = 0; j < 32; j += 2) {
    u32 v4[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) v4[m] = pair(j + (m >> 1), m & 1);
    stmatrix_x4(staging + staged_offset(wrow0 + rr, j + (mi >> 1)), v4);
  }
}
