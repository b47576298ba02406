// flce CUDA kernels: the per-element loss math every family's epilogue calls — the logit
// transform (bias, softcap), the softmax statistics of a row (RowStats) and the logit gradient.
// It mirrors crates/flce-core/src/spec.rs line for line.
#pragma once
#include "common/types.cuh"

// s·tanh(x/s), written through exp so it keeps f32 accuracy (tanh.approx does not):
// tanh|y| = (1 − e)/(1 + e) = 2/(1 + e) − 1 with e = exp(−2|y|), so z = ±(2s·r − s) with
// r = 1/(1 + e), one FFMA. Seven instructions an element, two of them MUFU (ex2.approx.ftz, whose
// flush below 2⁻¹²⁶ makes e 0 and |z| = s where tanh has saturated, and rcp.approx.ftz, 1 + e being
// in [1, 2]). An IEEE `/` would cost a check and a slow-path call per element (journal v27), and
// __expf with __fdividef, whose non-ftz exp is a range test and two predicated products around the
// MUFU, 13 instructions an element (sm_90a SASS, journal v35). y = x/s is __fdividef's product
// with the reciprocal of s, which the compiler takes once per kernel.
__device__ __forceinline__ float softcap_logit(float x, float cap) {
  const float y = __fdividef(x, cap);
  const float e = exp2_mufu(fabsf(y) * (-2.0f * FLCE_LOG2E));
  const float r = rcp_approx(1.0f + e);
  return copysignf(fmaf(2.0f * cap, r, -cap), y);
}

// ∂z/∂x of the softcap at its output z: 1 − (z/cap)², the one definition every gradient kernel
// uses (|z/cap| clamped to 1: a z recovered from a rounded exponential, flce_grad_from_compact,
// may pass the cap by a rounding; an exact z only by __fdividef's).
__device__ __forceinline__ float softcap_slope(float z, float cap) {
  const float r = fminf(fabsf(__fdividef(z, cap)), 1.0f);
  return 1.0f - r * r;
}

// z = softcap(x + b_col): the logit of vocabulary column `col` from the product's value x.
__device__ __forceinline__ float logit_transform(const LogitParams& p, float x, int col) {
  if (p.bias) x += to_f32(p.bias[col]);
  if (p.k.softcap > 0.0f) x = softcap_logit(x, p.k.softcap);
  return x;
}

// No bias, softcap or label smoothing: z = x and no per-column work (the epilogues' fast paths).
__device__ __forceinline__ bool plain_logits(const LogitParams& p) {
  return !p.bias && p.k.softcap == 0.0f && p.k.label_smoothing == 0.0f;
}

__device__ __forceinline__ float class_weight(const float* class_w, int col) {
  return class_w ? class_w[col] : 1.0f;
}

// Softmax statistics of one token over part of the vocabulary (spec.rs RowStats). The argmax
// keeps the larger value and, on ties, the smaller index, so merges need no order for it; the
// sums are merged in a fixed order by every caller.
struct RowStats {
  float max;
  float sum_exp;
  float wsum;  // Σ w_j z_j
  int argmax;
};

__device__ __forceinline__ RowStats row_stats_empty() {
  RowStats r;
  r.max = FLCE_NEG_INF;
  r.sum_exp = 0.0f;
  r.wsum = 0.0f;
  r.argmax = 0x7fffffff;
  return r;
}

// RowStats travel through memory as one float4 (max, Σexp, Σw·z, argmax bits).
__device__ __forceinline__ float4 row_stats_pack(RowStats r) {
  return make_float4(r.max, r.sum_exp, r.wsum, __int_as_float(r.argmax));
}
__device__ __forceinline__ RowStats row_stats_unpack(float4 v) {
  RowStats r;
  r.max = v.x;
  r.sum_exp = v.y;
  r.wsum = v.z;
  r.argmax = __float_as_int(v.w);
  return r;
}

__device__ __forceinline__ RowStats row_stats_merge(RowStats a, RowStats b) {
  RowStats r;
  r.max = nan_max(a.max, b.max);
  if (r.max == FLCE_NEG_INF) {
    r.sum_exp = 0.0f;
  } else {
    float sa = a.sum_exp == 0.0f ? 0.0f : a.sum_exp * fast_exp(a.max - r.max);
    float sb = b.sum_exp == 0.0f ? 0.0f : b.sum_exp * fast_exp(b.max - r.max);
    r.sum_exp = sa + sb;
  }
  r.wsum = a.wsum + b.wsum;
  bool take_b = (b.max > a.max) || (b.max == a.max && b.argmax < a.argmax) || (b.max != b.max && a.max == a.max);
  r.argmax = take_b ? b.argmax : a.argmax;
  return r;
}

// The loss of one active token (spec.rs): its lse, its target's logit and class weight w_t,
// Σ_j w_j z_j over the vocabulary (wsum), W = Σ_j w_j and the vocabulary size v. In f64, rounded
// once. Shared by the forward's finish and the vocabulary-parallel finish (shared/vocab_parallel.cu).
__device__ __forceinline__ float token_loss(float lse, float target_logit, float w_t, float wsum, double W, int v,
                                            float eps, float z_loss) {
  double l = (1.0 - eps) * (double)w_t * ((double)lse - (double)target_logit);
  if (eps > 0.0f) l += (double)eps / v * (W * (double)lse - (double)wsum);
  if (z_loss > 0.0f) l += (double)z_loss * (double)lse * (double)lse;
  return (float)l;
}

// The per-row coefficients of ∂L/∂z (spec.rs GradCoeffs): p_scale, target, smooth, lse.
__device__ __forceinline__ float4 row_coeffs(int tgt, const float* class_w, int v, float lse, float g, float W,
                                             float eps, float z_loss) {
  // an out-of-range target: a NaN row (p_scale NaN makes every ∂L/∂x of the row NaN)
  if (tgt == TARGET_OUT_OF_RANGE) return make_float4(FLCE_NAN, 0.0f, 0.0f, lse);
  if (g == 0.0f || tgt < 0) return make_float4(0.0f, 0.0f, 0.0f, lse);
  const float w_t = class_weight(class_w, tgt);
  const float a = (1.0f - eps) * w_t + (float)((double)eps * (double)W / (double)v) + 2.0f * z_loss * lse;
  return make_float4(g * a, g * (1.0f - eps) * w_t, g * eps / (float)v, lse);
}

// The target and row coefficients of token `row` of a backward chunk (-1 and zeros past its end).
__device__ __forceinline__ float4 chunk_row_coeffs(const LogitParams& p, const GradChunk& ch, int row, int& target) {
  const bool in = row < ch.n_end;
  target = in ? p.targets[row] : -1;
  return in ? row_coeffs(target, p.class_w, p.k.v, ch.lse[row], ch.token_scale[row], ch.scalars[SCALAR_W],
                         p.k.label_smoothing, p.k.z_loss)
            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// Targets and row coefficients of the TILE_M rows from row0 of a backward chunk into shared
// memory (threads 0..TILE_M-1 each load one row; the caller synchronises).
__device__ __forceinline__ void load_row_coeffs(const LogitParams& p, const GradChunk& ch, int row0, int* s_target,
                                                float4* s_coef) {
  const int tid = threadIdx.x;
  if (tid < TILE_M) {
    const int row = row0 + tid;
    // the target stored before the coefficients are formed (the order the kernels' SASS is checked in)
    s_target[tid] = row < ch.n_end ? p.targets[row] : -1;
    int target;
    s_coef[tid] = chunk_row_coeffs(p, ch, row, target);
  }
}

// The bias gradient's share of an elementwise G block (ELEMENTWISE_THREADS threads: 16 row groups
// ty of 16 threads tx × 8 columns): each of the block's TILE_N columns summed over its rows — the
// row groups' sums `colsum`, added in a fixed order through `s_col` — into db_partial's row
// blockIdx.y. Columns at or past v_end (counted from v_first, the chunk's first vocabulary
// column) are not written. Every thread of the block calls it: it synchronises.
__device__ __forceinline__ void store_db_partial(const GradChunk& ch, const float (&colsum)[8],
                                                 float (&s_col)[16][TILE_N], int v_first) {
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
#pragma unroll
  for (int k = 0; k < 8; ++k) s_col[ty][tx * 8 + k] = colsum[k];
  __syncthreads();
  if (tid < TILE_N) {
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < 16; ++r) s += s_col[r][tid];
    const int col = blockIdx.x * TILE_N + tid;
    if (v_first + col < ch.v_end) ch.db_partial[(size_t)blockIdx.y * ch.ldg + col] = s;
  }
}

// ∂L/∂x for one product value x (bias not yet added) of a row with coefficients cf and target tgt.
__device__ __forceinline__ float logit_grad(const LogitParams& p, float x, int col, int tgt, float4 cf) {
  const float z = logit_transform(p, x, col);
  float gx = cf.x * fast_exp(z - cf.w) - cf.z * class_weight(p.class_w, col);
  if (col == tgt) gx -= cf.y;
  if (p.k.softcap > 0.0f) gx *= softcap_slope(z, p.k.softcap);
  return gx;
}
