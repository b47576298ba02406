// flce cuBLAS family, backward: turn a chunk of f32 logits into the logit gradient G.
//
// flce_grad_from_logits — a cuBLAS product has written the chunk's logits E[n0..n_end]·
//   C[v0..v_end]ᵀ in f32 ([Nc, ldl]); this kernel forms G [Nc, ldg] (input dtype) with the same
//   arithmetic as the sm80 family's flce_grad_tiles (common/loss.cuh), and the db column sums per
//   128-row tile. Grid (ceil(Vc/128), ceil(Nc/128)), ELEMENTWISE_THREADS (256) threads: 16
//   threads × 8 columns per row, 16 rows per pass, 8 passes. Columns past V are written as 0.
//
// Modules: calls with a bias, softcap or smoothing run one compiled for their options
// (FLCE_LOGIT_OPTS's bits, runtime/grids.rs logit_opts, as the sm90 kernels and the three-product
// G, sm90/three_product_grad.cu); the default module serves calls without any, so it carries no bias or
// softcap transform, no smoothing term (with class weights alone, no weight load per element) and
// no db sums: fewer registers and 8 KB less shared memory, more blocks an SM. Plain calls get the
// same values bitwise (the terms it drops are + 0 there).
//
// Host side: src/family/cublas.rs, src/pass/three_product.rs (the three-product pass's f32 logits); tests:
// tests/gpu/ (BackwardMode::CublasLogits, the default off Hopper; the three-product f32 runs).
#include "common/loss.cuh"

#ifndef FLCE_LOGIT_OPTS
#define FLCE_LOGIT_OPTS -1
#endif
// what this module's calls may carry (the default module: none of the three)
constexpr bool kMayBias = FLCE_LOGIT_OPTS >= 0 && (FLCE_LOGIT_OPTS & 1);
constexpr bool kMaySoftcap = FLCE_LOGIT_OPTS >= 0 && (FLCE_LOGIT_OPTS & 2);
constexpr bool kMaySmooth = FLCE_LOGIT_OPTS >= 0 && (FLCE_LOGIT_OPTS & 4);

// logit_grad (common/loss.cuh) with the terms this module's calls cannot carry left out.
__device__ __forceinline__ float module_logit_grad(const LogitParams& p, float x, int col, int tgt, float4 cf) {
  const float z = kMayBias || kMaySoftcap ? logit_transform(p, x, col) : x;
  float gx = cf.x * fast_exp(z - cf.w);
  if (kMaySmooth) gx -= cf.z * class_weight(p.class_w, col);
  if (col == tgt) gx -= cf.y;
  if (kMaySoftcap && p.k.softcap > 0.0f) gx *= softcap_slope(z, p.k.softcap);
  return gx;
}

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_grad_from_logits(const GradLogitsParams gp) {
  __shared__ int s_target[TILE_M];
  __shared__ float4 s_coef[TILE_M];
  __shared__ float s_col[16][TILE_N];  // db: the 16 row groups' column sums (unused in the default module)
  const GradChunk& ch = gp.chunk;
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int row0 = ch.n0 + blockIdx.y * TILE_M;
  const int colc = blockIdx.x * TILE_N + tx * 8;  // chunk-relative column of this thread's 8
  load_row_coeffs(gp.lp, ch, row0, s_target, s_coef);
  __syncthreads();
  float colsum[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) colsum[k] = 0.0f;
  for (int pass = 0; pass < TILE_M / 16; ++pass) {
    const int rl = ty + pass * 16;
    const int row = row0 + rl;
    if (row >= ch.n_end || colc >= ch.ldg) continue;
    const float* src = gp.logits + (size_t)(row - ch.n0) * gp.ldl + colc;
    float x[8];
    *(float4*)&x[0] = *(const float4*)src;
    *(float4*)&x[4] = *(const float4*)(src + 4);
    const float4 cf = s_coef[rl];
    const int tgt = s_target[rl];
    elem_t out[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int col = ch.v0 + colc + k;
      const float gx = col < ch.v_end ? module_logit_grad(gp.lp, x[k], col, tgt, cf) : 0.0f;
      colsum[k] += gx;
      out[k] = from_f32(gx);
    }
    elem_t* dst = ch.g_out + (size_t)(row - ch.n0) * ch.ldg + colc;
#if FLCE_DTYPE == FLCE_F32
    *(float4*)dst = *(float4*)&out[0];
    *(float4*)(dst + 4) = *(float4*)&out[4];
#else
    *(uint4*)dst = *(uint4*)&out[0];
#endif
  }
  if (kMayBias && ch.db_partial) store_db_partial(ch, colsum, s_col, ch.v0);
}
