// flce sm90 family: the backward's dE product through TMA + wgmma, the first piece of the
// persistent backward (docs/design-sm90-backward.md) — a measurement alternative to cuBLAS's
// product (FLCE_SM90_DE_PRODUCT=1), not the default.
//
// flce_sm90_de_product — out[n, d] (+)= Σ_k G[n, k] · C[k, d] over one vocabulary chunk: G the
//   chunk's logit gradient [rows, ldg] (16-bit, K-major: k is the chunk's vocabulary row), C the
//   chunk's classifier rows [k, D] (16-bit, read MN-major: contiguous along d), out dE's f32
//   accumulator rows (pitch D). Grid (ceil(rows/128), ceil(D/256)), SM90_THREADS (384) threads,
//   dynamic smem SM90_PRODUCT_SMEM_BYTES; one 128 × 256 output tile per block. The producer
//   warpgroup's thread 0 loads, per 64-deep k-step, G's 128 × 64 box (as mainloop.cuh loads E)
//   and four 64 (d) × 64 (k) boxes of C into the stage's B half, 8 KB apart — the MN-major layout
//   smem_desc_mn describes; each consumer warpgroup runs four wgmma.m64n256k16 with B transposed
//   (imm-trans-b = 1) on its 64 rows, one wgmma group in flight as in the main loop. Epilogue: each
//   thread adds its 128 values into out (or writes them: accumulate = 0), pairs of columns as
//   float2; rows ≥ rows and columns ≥ D are not written. Out-of-range k (past the chunk) loads as
//   zeros (TMA bounds). Reads G and C, writes out's tile only; no atomics: the sum over the
//   chunk's k runs in one fixed order (bitwise reproducible), f32 throughout.
//
// Host side: src/family/sm90.rs (de_product); test: tests/gpu/ (the GPU tests' backward cases
// under FLCE_SM90_DE_PRODUCT=1, against the f64 oracle).
#include "sm90/mainloop.cuh"

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_de_product(const __grid_constant__ Sm90ProductParams p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
  sm90_init_barriers(pp);
  sm90_start_sync();
  const int row0 = blockIdx.x * SM90_TILE_M, col0 = blockIdx.y * SM90_TILE_N;
  const int kt_count = (p.k + SM90_TILE_K - 1) / SM90_TILE_K;
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&p.map_g);
      tma_prefetch_map(&p.map_c);
      Sm90Ring ring;
      for (int kt = 0; kt < kt_count; ++kt) {
        const int stage = ring.stage;
        mbar_wait(&pp.empty[stage], ring.phase ^ 1);
        mbar_expect_tx(&pp.full[stage], SM90_A_STAGE_BYTES + SM90_B_STAGE_BYTES);
        tma_load_2d(pp.a + stage * SM90_A_STAGE_BYTES, &p.map_g, &pp.full[stage], kt * SM90_TILE_K, row0);
#pragma unroll
        for (int j = 0; j < SM90_TILE_N / 64; ++j)
          tma_load_2d(pp.b + stage * SM90_B_STAGE_BYTES + j * 8192, &p.map_c, &pp.full[stage], col0 + 64 * j,
                      kt * SM90_TILE_K);
        ring.advance();
      }
    }
  } else {
    consumer_registers();
    const int consumer = wg - 1;
    const bool releaser = (threadIdx.x & 127) == 0;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    Sm90Ring ring;
    int pending = -1;  // the stage of the k-step whose wgmma group may still run
    for (int kt = 0; kt < kt_count; ++kt) {
      const int stage = ring.stage;
      mbar_wait(&pp.full[stage], ring.phase);
      const u32 a = smem_u32(pp.a + stage * SM90_A_STAGE_BYTES + consumer * (SM90_A_STAGE_BYTES / 2));
      const u32 b = smem_u32(pp.b + stage * SM90_B_STAGE_BYTES);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < SM90_TILE_K / 16; ++k)
        wgmma_m64n256k16<1>(acc, smem_desc(a + 32 * k), smem_desc_mn(b + 2048 * k), kt | k);
      wgmma_commit();
      wgmma_wait_one();
      if (pending >= 0) release_stage(pp, pending, releaser, 1);
      pending = stage;
      ring.advance();
    }
    wgmma_wait_all();
    if (pending >= 0) release_stage(pp, pending, releaser, 1);
    // the wgmma D fragment: thread (warp w, lane l; g = l/4, t = l%4) holds acc[4j + 2h + q] =
    // (row 16w + g + 8h, column 8j + 2t + q) of the consumer's 64 × 256 sub-tile
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 64 * consumer + 16 * w + g + 8 * h;
      if (row >= p.rows) continue;
      float* out_row = p.out + (long long)row * p.ldo;
#pragma unroll
      for (int j = 0; j < SM90_TILE_N / 8; ++j) {
        const int col = col0 + 8 * j + 2 * t;
        float2 v = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        if (col + 1 < p.cols) {
          float2* dst = (float2*)(out_row + col);
          if (p.accumulate) {
            const float2 o = *dst;
            v.x += o.x;
            v.y += o.y;
          }
          *dst = v;
        } else if (col < p.cols) {
          out_row[col] = p.accumulate ? out_row[col] + v.x : v.x;
        }
      }
    }
  }
  sm90_end_sync();
}
