// flce sm90 family, backward: G with its epilogue off the MMA warpgroups (SM90_STAGED_GRAD,
// FLCE_SM90_MAINLOOP gfold=1, the default; the default module only — the option
// modules keep grad.cu's code). On the every-token-tile grid it ran no faster than G in registers
// (docs/journal.md v40: the 3-stage ring starved — the consumers waited on TMA data 21% of
// their samples against 6%); with the grid within an L2 budget (plan::grad_grid) fwd+bwd ran
// 0.969–0.981× of both off (v44).
//
// grad.cu's consumers form ∂L/∂x = p_scale·exp(x − lse) − [j = t]·target of each 128 × 256 tile
// from their f32 accumulators and store it through their shared-memory slices while the tensor
// cores idle. Here the consumers keep only what must come from f32 — the target column's G,
// from its exact logit — and stage u = f16(x·log2e − lse2) of the whole tile (lse2 = lse·log2e in
// f32, types.cuh Exp2Ref: one FFMA and a cvt a logit; sm90/staging.cuh's boxes); the producer
// warpgroup's three idle warps form G = p_scale2·2^u (the target's replaced by the consumers'
// exact value), write it over u in the input dtype and TMA-store the four boxes (map_g: the
// chunk's G [n_end − n0, ldg]; rows past n_end clipped by the map) while the consumers run the
// next tile. u's one rounding, |error| ≤ 2⁻¹¹·|x − lse|, is small where p is large: a CPU model
// of it (journal v40) gives dE / dC equal to G formed in f32 registers to three digits. Every
// tile is staged (the default module runs plain calls only: logit options and db select the
// option modules, which keep grad.cu's code); a partial tile's columns past the chunk as
// u = -inf, so that their G is 0.
//
// Synchronisation per staged tile k, as the forward's (forward_staged.cuh): the consumers wait on
// `freed` (parity (k & 1) ^ 1: the staging's last tile stored) before staging, then all 256
// arrive on `staged`; the helper warps wait on `staged` (parity k & 1), form G, fence for the
// async proxy, meet at named barrier 3, and one of them issues the four TMA stores; each of the
// 96 threads arrives on `freed` once done with the staging (the storing one once the stores have
// read it: an arrive releases the arriving thread's own accesses only). Rows: helper warp w takes rows w, w + 3, …,
// a row by a whole warp (8 columns a lane, one 16-byte shared load and store). Work a tile: 32k
// exponentials over 3 warps, ~2.7k issue cycles of MUFU each — under the main loop's ~45k
// cycles a tile at D 2304.
#pragma once
#include "sm90/staging.cuh"

// Scratch after the main loop's barriers, from its first 1024-byte boundary: the staging (64 KB),
// then each row's p_scale2, target column in the tile (-1: none) and the target's G,
// then the two barriers. Every address is a fixed offset from the staging's (the consumers'
// epilogue keeps one pointer through the main loop: more live state spilled its accumulators
// and serialised its wgmma, ptxas C7514).
struct Sm90GradStaging {
  float* ps2;    // [SM90_TILE_M] p_scale times Exp2Ref's fix
  int* trel;     // [SM90_TILE_M]
  float* gt;     // [SM90_TILE_M]
  u64* staged;   // count 256: the consumers
  u64* freed;    // count 96: the helper warps' threads
  u32 staging;   // shared address of the four boxes
};
constexpr int SM90_GRAD_STAGING_BYTES = SM90_TILE_M * SM90_TILE_N * 2;
// The staging's first byte (generic) in the scratch.
__device__ __forceinline__ unsigned char* sm90_grad_staging_base(unsigned char* scratch) {
  return scratch + (((smem_u32(scratch) + 1023) & ~1023u) - smem_u32(scratch));
}
// The layout from the staging's first byte.
__device__ __forceinline__ Sm90GradStaging sm90_grad_staging_at(unsigned char* base) {
  Sm90GradStaging s;
  s.ps2 = (float*)(base + SM90_GRAD_STAGING_BYTES);
  s.trel = (int*)(s.ps2 + SM90_TILE_M);
  s.gt = (float*)(s.trel + SM90_TILE_M);
  s.staged = (u64*)(s.gt + SM90_TILE_M);  // 8-byte aligned: 3 × 128 words after a 1024-byte aligned start
  s.freed = s.staged + 1;
  s.staging = smem_u32(base);
  return s;
}

// The helper warps (the producer warpgroup's warps 1–3, `w` = 0..2): the consumers' staged tiles
// in their order, G formed in place and stored.
struct Sm90GradHelpers {
  static constexpr bool kActive = true;
  const GradChunk& ch;
  const TensorMap* map_g;
  Sm90GradStaging gs;
  Sm90GradTiles tt;  // grad.cu: Sm90TokenTiles, or Sm90GradOrder (SM90_GRAD_ORDER)
  int col_first, tiles;

  __device__ __forceinline__ void operator()(int w) const {
    const int lane = threadIdx.x & 31;
    // G is read by the next products (dE, dC): stored with L2's normal priority
    const u64 policy = l2_policy<1>();
    u32 k = 0;
    for (int x = tt.first; x < tt.end; x += tt.stride) {
      const int row0 = tt.row0(x);
      for (int tile = 0; tile < tiles; ++tile) {
        const int col0 = tt.col0(x, col_first) + tile * SM90_TILE_N;
        mbar_wait(gs.staged, k & 1);
        for (int r = w; r < SM90_TILE_M; r += 3) grad_row(r, lane);
        fence_async_smem();  // G written over u, for the TMA stores
        fold_warps_sync();
        if (w == 0 && lane == 0) tma_store_staging(map_g, gs.staging, col0 - ch.v0, row0 - ch.n0, policy);
        mbar_arrive(gs.freed);
        ++k;
      }
    }
    if (w == 0 && lane == 0) bulk_wait_all();  // the stores done before the block's shared memory goes
  }

  // One row of the staged tile: lane l forms columns 8l..8l+7.
  __device__ __forceinline__ void grad_row(int r, int lane) const {
    const float ps2 = gs.ps2[r];
    const int rel = gs.trel[r] - 8 * lane;  // the target's place among the lane's columns
    const u32 at = gs.staging + staged_offset(r, lane);
    uint4 raw;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
                 : "r"(at));
    const u16* u = (const u16*)&raw;
    const float gt = (unsigned)rel < 8u ? gs.gt[r] : 0.0f;
    uint4 out;
    u32* ow = (u32*)&out;
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
      float g0 = ps2 * exp2_mufu(f16_to_f32(u[i])), g1 = ps2 * exp2_mufu(f16_to_f32(u[i + 1]));
      if (rel == i) g0 = gt;
      if (rel == i + 1) g1 = gt;
      ow[i / 2] = pack_elem_pair(g0, g1);
    }
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(at), "r"(out.x), "r"(out.y), "r"(out.z), "r"(out.w)
                 : "memory");
  }
};
