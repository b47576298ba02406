// flce sm90 family: the ping-pong consumer schedule (CUTLASS's KernelTmaWarpSpecializedPingpong,
// FlashAttention-3's inter-warpgroup "pingpong"), used by the plain forward (sm90/forward.cu)
// when FLCE_SM90_MAINLOOP has pingpong=1 (src/geometry.rs Sm90Mainloop).
//
// Why: in the cooperative schedule (sm90/mainloop.cuh) both consumers read every stage and fold
// their halves of a 128 × 256 tile at the same time, so the tensor cores idle for the whole
// fold: 4.6–5.6% of the forward at Gemma 2 / Llama 3, its entire gap to cuBLAS's logits GEMM
// (docs/perf-notes.md v32). Here each consumer computes whole 128 × 128 tiles of its own —
// the block's tiles alternate between the consumers — and their main loops take turns: consumer
// c starts tile g's k-loop only after the other has issued every k-step of tile g − 1, so while
// one folds tile g − 1 the other's wgmma keep the tensor cores busy. The 128-wide main loop feeds
// the tensor cores as well as the 256-wide one (v32: 13.86 / 12.71 against 13.72 / 12.80 ms).
//
// Ring: Sm90RingShape<SM90_PP_N> (6 stages of E's 128 × 64 box and C's 128 × 64 box, 32 KB),
// loaded by the common producer (sm90_produce with BN = 128) in the block's tile order; each
// stage is read by the one consumer that owns its tile (the `empty` barriers count one arrival
// per block: sm90_init_barriers<RS, 1>), the other steps its ring position over it.
//
// Turns: named barriers 3 and 4 (256 threads: consumer c waits on 3 + c, the other arrives on it
// after issuing its tile's last k-step). Tile g of the block (counted over all its token tiles)
// belongs to consumer g % 2; tile 0 starts without a turn, and the owner of the block's last tile
// passes no turn, so every wait has exactly one arrival.
//
// Accumulators: a consumer's 128 × 128 tile is two 64 × 128 wgmma fragments, rows 0–63 in
// acc[0..63] and rows 64–127 in acc[64..127] (each in the layout mainloop.cuh describes, j < 16).
// The epilogue gets epi.tile(acc, col0) with col0 the tile's first column; epi.begin_rows /
// end_rows run once per token tile in both consumers, in the same order (they may sync them).
#pragma once
#include "sm90/mainloop.cuh"

using Sm90RingPP = Sm90RingShape<SM90_PP_N>;

__device__ __forceinline__ void pingpong_turn_wait(int consumer) {
  asm volatile("bar.sync %0, 256;" ::"r"(3 + consumer) : "memory");
}
__device__ __forceinline__ void pingpong_turn_pass(int consumer) {
  asm volatile("bar.arrive %0, 256;" ::"r"(4 - consumer) : "memory");
}

// One k-step of a 128 × 128 tile: the stage's two 64-row halves of E against its 128 rows of C.
__device__ __forceinline__ void pingpong_kstep(float (&acc)[128], const SmemDescBase& desc_a,
                                               const SmemDescBase& desc_b, int stage, int kt) {
  const u32 a = stage * SM90_A_STAGE_BYTES, b = stage * Sm90RingPP::B_BYTES;
#pragma unroll
  for (int k = 0; k < SM90_TILE_K / 16; ++k) {
    const u64 db = desc_b.at(b + 32 * k);
#pragma unroll
    for (int mb = 0; mb < 2; ++mb) {
      // rows 64·mb of the K-major E box: 64 rows of 128 bytes further on
      const u64 da = desc_a.at(a + mb * (SM90_A_STAGE_BYTES / 2) + 32 * k);
      wgmma_m64n128k16<0, 0>(*reinterpret_cast<float(*)[64]>(acc + 64 * mb), da, db, kt | k);
    }
  }
}

// A consumer warpgroup of the ping-pong schedule over the block's token tiles, each with `tiles`
// vocabulary tiles of SM90_PP_N columns from col_first.
template <class Tiles, class Epilogue>
__device__ __forceinline__ void sm90_consume_pingpong(const Sm90Pipe& pp, int consumer, const Tiles& tt,
                                                      int col_first, int tiles, int kt_count, Epilogue& epi) {
  float acc[128];
  Sm90Ring<Sm90RingPP::RING_STAGES> ring;
  const bool releaser = (threadIdx.x & 127) == 0;
  const u32 blocks = cluster_size();
  const SmemDescBase desc_a(smem_desc(smem_u32(pp.a))), desc_b(smem_desc(smem_u32(pp.b)));
  int runs = 0;
  for (int x = tt.first; x < tt.end; x += tt.stride) ++runs;
  const int total = runs * tiles;
  int g = 0;  // the block's tile sequence number
  for (int x = tt.first; x < tt.end; x += tt.stride) {
    // dead values (the next tile's first k-step overwrites them): see sm90_consume
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    epi.begin_rows(x);
    for (int tile = 0; tile < tiles; ++tile, ++g) {
      if ((g & 1) != consumer) {
        for (int kt = 0; kt < kt_count; ++kt) ring.advance();  // the other consumer's stages
        continue;
      }
      if (g > 0) pingpong_turn_wait(consumer);
      int pending = -1;  // the stage of the k-step whose wgmma group may still run
      for (int kt = 0; kt < kt_count; ++kt) {
        const int stage = ring.stage;
        mbar_wait(&pp.full[stage], ring.phase);
        wgmma_fence();
        pingpong_kstep(acc, desc_a, desc_b, stage, kt);
        wgmma_commit();
        wgmma_wait_one();
        if (pending >= 0) release_stage(pp, pending, releaser, blocks);
        pending = stage;
        ring.advance();
      }
      // every k-step issued: the other consumer's main loop may start under this one's last
      // group and fold
      if (g + 1 < total) pingpong_turn_pass(consumer);
      wgmma_wait_all();
      if (pending >= 0) release_stage(pp, pending, releaser, blocks);
      epi.tile(acc, col_first + tile * SM90_PP_N);
    }
    epi.end_rows(x);
  }
}
