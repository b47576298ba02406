// flce sm90 family, the three-product pass with compact logits: G of one token chunk from the
// compact forward's f16 q (kernels/sm90/forward.cu, flce_sm90_forward_compact).
//
// flce_grad_from_compact — q [Nc, ldg] holds exp(z − m) in f16 for every logit of the chunk,
//   m_ref [Nc, ld_mref] the m of each (token, 256-column tile); the chunk's lse is final. G is
//   written in place over q (`chunk.g_out` is q's buffer, same pitch; each thread reads its 8
//   elements before it writes them and no other thread touches them):
//     G_j = g·q_j·exp(m − lse) − s·w_j          (p_j with q's one f16 rounding: plan/three_product/
//                                               argues it; s = g·ε/V, label smoothing's term)
//     G_t = g·a·exp(z_t − lse) − s·w_t − g·w_t  at the target, from its exact f32 logit
//                                               (row_coeffs: a and w_t carry z-loss and weights)
//   z carries the bias and the softcap (the forward applied them before q). With a softcap cap
//   each G_j is multiplied by its derivative 1 − (z_j/cap)², z_j = m + ln q_j recovered from q
//   (where q is 0, so is G_j's only term), G_t by the exact one; calls with a softcap and label
//   smoothing keep f32 logits (the smoothing term needs the derivative where q has underflowed:
//   src/planning.rs compact_logits_hold). With a bias gradient wanted, each column's sum over the
//   block's 128 rows (the unrounded values, 16 row groups in a fixed order through shared
//   memory, as the cuBLAS family's flce_grad_from_logits) goes to db_partial [row tiles, ldg].
//   Columns past V are written as 0. Grid (ceil(ldg/128), ceil(Nc/128)), ELEMENTWISE_THREADS
//   (256) threads: 16 threads × 8 columns per row, 16 rows per pass, 8 passes. One exponential
//   per 8 elements (and a logarithm per element with a softcap); 4 bytes of traffic per logit
//   (plus 4 per column of class weights with smoothing).
//
// Modules: calls with a bias, softcap or smoothing run one compiled for their options
// (FLCE_LOGIT_OPTS's bits, runtime/grids.rs logit_opts, as the forwards); the default module serves
// the calls without any, so it carries no smoothing term, no softcap slope and no db sums: 32
// registers and 2.5 KB of shared memory, 8 blocks an SM, where their 70 registers and db's 8 KB
// left 3 — 1.84× faster a launch (H200, docs/journal.md v37).
//
// Host side: src/pass/three_product.rs; tests: tests/gpu/three_product.rs (both storages against
// the f64 oracle).
#include "common/loss.cuh"

#ifndef FLCE_LOGIT_OPTS
#define FLCE_LOGIT_OPTS -1
#endif
// what this module's calls may carry (the default module: none of the three)
constexpr bool kMayBias = FLCE_LOGIT_OPTS >= 0 && (FLCE_LOGIT_OPTS & 1);
constexpr bool kMaySoftcap = FLCE_LOGIT_OPTS >= 0 && (FLCE_LOGIT_OPTS & 2);
constexpr bool kMaySmooth = FLCE_LOGIT_OPTS >= 0 && (FLCE_LOGIT_OPTS & 4);

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_grad_from_compact(const CompactGradParams gp) {
  __shared__ int s_target[TILE_M];
  __shared__ float4 s_coef[TILE_M];
  __shared__ float s_col[16][TILE_N];  // db: the 16 row groups' column sums (unused in the default module)
  const GradChunk& ch = gp.chunk;
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int row0 = ch.n0 + blockIdx.y * TILE_M;
  const int colc = blockIdx.x * TILE_N + tx * 8;  // chunk column of this thread's 8 (v0 = 0)
  load_row_coeffs(gp.lp, ch, row0, s_target, s_coef);
  __syncthreads();
  const bool smooth = kMaySmooth && gp.lp.k.label_smoothing > 0.0f;  // (uniform: the class-weight term)
  const float cap = kMaySoftcap ? gp.lp.k.softcap : 0.0f;              // (uniform: > 0 with a softcap)
  float colsum[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) colsum[k] = 0.0f;
  const int tile = colc / SM90_TILE_N;  // the 8 columns share one 256-column tile
  for (int pass = 0; pass < TILE_M / 16 && colc < ch.ldg; ++pass) {
    const int rl = ty + pass * 16;
    const int row = row0 + rl;
    if (row >= ch.n_end) break;
    const size_t at = (size_t)(row - ch.n0) * ch.ldg + colc;
    elem_t out[8];
    if (colc >= ch.v_end) {
#pragma unroll
      for (int k = 0; k < 8; ++k) out[k] = from_f32(0.0f);
    } else {
      const uint4 raw = *(const uint4*)(gp.q + at);
      const u16* q = (const u16*)&raw;
      const float4 cf = s_coef[rl];
      const int tgt = s_target[rl];
      const float m = gp.m_ref[(size_t)(row - ch.n0) * gp.ld_mref + tile];
      const float scale = cf.x * fast_exp(m - cf.w);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int col = colc + k;
        const bool in = col < ch.v_end;
        const float qk = f16_to_f32(q[k]);
        float gx = in ? scale * qk : 0.0f;
        const float sw = smooth && in ? cf.z * class_weight(gp.lp.class_w, col) : 0.0f;
        if (smooth) gx -= sw;
        if (cap > 0.0f && in && qk > 0.0f) gx *= softcap_slope(m + __logf(qk), cap);
        if (col == tgt) {
          const float z_t = gp.target_logit[row];
          const float e_t = fast_exp(z_t - cf.w);
          gx = smooth ? (cf.x * e_t - sw) - cf.y : cf.x * e_t - cf.y;
          if (cap > 0.0f) gx *= softcap_slope(z_t, cap);
        }
        colsum[k] += gx;
        out[k] = from_f32(gx);
      }
    }
    *(uint4*)(ch.g_out + at) = *(uint4*)&out[0];
  }
  if (kMayBias && ch.db_partial) store_db_partial(ch, colsum, s_col, 0);  // (the chunk starts at column 0)
}
