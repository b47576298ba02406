// flce sm90 family: the backward's two products through TMA + wgmma, the first piece of the
// persistent backward (docs/design-sm90-backward.md) — a measurement alternative to cuBLAS's
// products (FLCE_SM90_PRODUCTS=1), not the default.
//
// flce_sm90_product — out[rows, cols] (+)= Σ_k A[row, k] · B[k, col], f32 accumulation:
//   dE += G·C_chunk: A = G [tokens, ldg] (K-major: k is the chunk's vocabulary row), B = C's
//     chunk rows [k, D]; out = dE's f32 accumulator rows (added to after the first chunk);
//   dC_chunk = Gᵀ·E: A = Gᵀ (G read MN-major: rows are the chunk's vocabulary rows, k the tokens),
//     B = E [tokens, D]; out = dC's rows in the input dtype (rounded once) or the chunk's f32
//     accumulator.
//   B is always read MN-major (contiguous along cols). Grid (ceil(rows/128), ceil(cols/256)),
//   SM90_THREADS (384) threads, dynamic smem SM90_PRODUCT_SMEM_BYTES; one 128 × 256 output tile
//   per block. The producer warpgroup's thread 0 loads, per 64-deep k-step, A's 128 × 64 (K-major:
//   one box, as mainloop.cuh loads E; MN-major: two 64 × 64 boxes, one per consumer) and four
//   64 (cols) × 64 (k) boxes of B into the stage's B half, 8 KB apart — the MN-major layout
//   smem_desc_mn describes. Each consumer warpgroup runs four wgmma.m64n256k16 on its 64 rows
//   with the transpose immediates of the operands' layouts, one wgmma group in flight as in the
//   main loop. Epilogue: each thread writes (or adds, f32 with accumulate) its 128 values, pairs
//   of columns at a time; rows ≥ rows and columns ≥ cols are not written. Out-of-range k loads as
//   zeros (TMA bounds). Reads A and B, writes out's tile only; no atomics: the sum over k runs in
//   one fixed order (bitwise reproducible).
//
// Host side: src/family/sm90.rs (product); tests: tests/gpu/ (the GPU tests' backward cases under
// FLCE_SM90_PRODUCTS=1, against the f64 oracle).
#include "sm90/mainloop.cuh"

template <int A_MN>
__device__ __forceinline__ void sm90_product(const Sm90ProductParams& p, const Sm90Pipe& pp) {
  const int row0 = blockIdx.x * SM90_TILE_M, col0 = blockIdx.y * SM90_TILE_N;
  const int kt_count = (p.k + SM90_TILE_K - 1) / SM90_TILE_K;
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&p.map_a);
      tma_prefetch_map(&p.map_b);
      Sm90Ring ring;
      for (int kt = 0; kt < kt_count; ++kt) {
        const int stage = ring.stage;
        unsigned char* a = pp.a + stage * SM90_A_STAGE_BYTES;
        unsigned char* b = pp.b + stage * SM90_B_STAGE_BYTES;
        mbar_wait(&pp.empty[stage], ring.phase ^ 1);
        mbar_expect_tx(&pp.full[stage], SM90_A_STAGE_BYTES + SM90_B_STAGE_BYTES);
        if (A_MN) {
          tma_load_2d(a, &p.map_a, &pp.full[stage], row0, kt * SM90_TILE_K);
          tma_load_2d(a + SM90_A_STAGE_BYTES / 2, &p.map_a, &pp.full[stage], row0 + 64, kt * SM90_TILE_K);
        } else {
          tma_load_2d(a, &p.map_a, &pp.full[stage], kt * SM90_TILE_K, row0);
        }
#pragma unroll
        for (int j = 0; j < SM90_TILE_N / 64; ++j)
          tma_load_2d(b + j * 8192, &p.map_b, &pp.full[stage], col0 + 64 * j, kt * SM90_TILE_K);
        ring.advance();
      }
    }
    return;
  }
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
    // each consumer's 64 rows: the second half of A's K-major box, or the second MN-major box
    const u32 a = smem_u32(pp.a + stage * SM90_A_STAGE_BYTES + consumer * (SM90_A_STAGE_BYTES / 2));
    const u32 b = smem_u32(pp.b + stage * SM90_B_STAGE_BYTES);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < SM90_TILE_K / 16; ++k) {
      const u64 da = A_MN ? smem_desc_mn(a + 2048 * k) : smem_desc(a + 32 * k);
      wgmma_m64n256k16<A_MN, 1>(acc, da, smem_desc_mn(b + 2048 * k), kt | k);
    }
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
#pragma unroll
    for (int j = 0; j < SM90_TILE_N / 8; ++j) {
      const int col = col0 + 8 * j + 2 * t;
      float2 v = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      if (p.out_f32) {
        float* out_row = (float*)p.out + (long long)row * p.ldo;
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
      } else {
        elem_t* out_row = (elem_t*)p.out + (long long)row * p.ldo;
        if (col + 1 < p.cols) {
          const u32 pair = (u32)from_f32(v.x) | ((u32)from_f32(v.y) << 16);
          *(u32*)(out_row + col) = pair;
        } else if (col < p.cols) {
          out_row[col] = from_f32(v.x);
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_product(const __grid_constant__ Sm90ProductParams p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
  sm90_init_barriers(pp);
  sm90_start_sync();
  if (p.a_mn)
    sm90_product<1>(p, pp);
  else
    sm90_product<0>(p, pp);
  sm90_end_sync();
}
