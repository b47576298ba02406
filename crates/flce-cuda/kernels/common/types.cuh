// flce CUDA kernels: element types, conversions and math helpers shared by every family.
//
// Compiled by NVRTC at run time, without the CUDA toolkit headers (NVRTC alone has none): the
// 16-bit types are raw `unsigned short` and converted with inline PTX. Each .cu file is compiled
// once per element type. The dtype code, the geometry and the parameter structs come from Rust
// (crates/flce-cuda/src/abi.rs and geometry.rs), as the generated headers flce_config.cuh and
// flce_abi.cuh.
#pragma once
#include "flce_config.cuh"

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#if FLCE_DTYPE == FLCE_F32
typedef float elem_t;
#else
typedef u16 elem_t;
#endif

#include "flce_abi.cuh"

__device__ __forceinline__ float bf16_to_f32(u16 x) { return __uint_as_float(((u32)x) << 16); }
__device__ __forceinline__ u16 f32_to_bf16(float x) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float f16_to_f32(u16 x) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(x));
  return r;
}
__device__ __forceinline__ u16 f32_to_f16(float x) {
  u16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ float to_f32(elem_t x) {
#if FLCE_DTYPE == FLCE_BF16
  return bf16_to_f32(x);
#elif FLCE_DTYPE == FLCE_F16
  return f16_to_f32(x);
#else
  return x;
#endif
}
__device__ __forceinline__ elem_t from_f32(float x) {
#if FLCE_DTYPE == FLCE_BF16
  return f32_to_bf16(x);
#elif FLCE_DTYPE == FLCE_F16
  return f32_to_f16(x);
#else
  return x;
#endif
}

#if FLCE_DTYPE != FLCE_F32
// Two values rounded to the 16-bit input dtype and packed, the first in the low half (one 4-byte
// store of a column pair).
__device__ __forceinline__ u32 pack_elem_pair(float lo, float hi) {
  return (u32)from_f32(lo) | ((u32)from_f32(hi) << 16);
}
#endif

// Two values rounded to f16 and packed, the first in the low half (the sm90 kernels' f16 staging
// and q, whatever the input dtype).
__device__ __forceinline__ u32 pack_f16_pair(float lo, float hi) {
  u32 pair;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(hi), "f"(lo));
  return pair;
}

#define FLCE_NAN __int_as_float(0x7fffffff)
#define FLCE_NEG_INF __int_as_float(0xff800000)

// Prepared targets (flce_prep_targets): a class index, or one of these. Both are inactive in every
// statistic (t < 0); a target out of range also makes its token's loss and gradient row NaN.
#define TARGET_IGNORED (-1)
#define TARGET_OUT_OF_RANGE (-2)
// The status word (one int, INT_MAX when the input is good): the first out-of-range target's token
// index (>= 0), or STATUS_BAD_CLASS_WEIGHT + j for the first class j whose weight is negative or
// not finite (< 0: ahead of any target error under atomicMin). Decoded by src/error.rs
// (CudaError::from_status) and flce/_common.py.
#define STATUS_BAD_CLASS_WEIGHT (-2147483647 - 1)

// NaN-propagating max (fmaxf drops NaN; the loss must not).
__device__ __forceinline__ float nan_max(float a, float b) {
  return (a != a || b != b) ? FLCE_NAN : fmaxf(a, b);
}

// ---- exponentials ------------------------------------------------------------------------------
#define FLCE_LOG2E 1.4426950408889634f
#define FLCE_LN2 0.6931471805599453f

// 2^y (ex2.approx.ftz: relative error ≤ 2⁻²²·⁵, 0 below 2⁻¹²⁶). __expf is the non-ftz form, which
// compiles to a range test and two predicated products around the MUFU per call (sm_90a SASS).
__device__ __forceinline__ float exp2_mufu(float y) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  return r;
}

// exp via ex2.approx (2 ulp): exp(x) = 2^(x·log2 e).
__device__ __forceinline__ float fast_exp(float x) { return exp2_mufu(x * FLCE_LOG2E); }

// 1/d (rcp.approx.ftz, the reciprocal __fdividef takes; d normal).
__device__ __forceinline__ float rcp_approx(float d) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return r;
}

// Exponentials exp(x − m) of a row taken as 2^(x·log2e − m2), one FFMA each instead of a
// subtraction and a product: m2 = m·log2e rounded, so each is off by the same factor
// 2^(m·log2e − m2) (≤ 2⁻¹⁷ relative while |m| < 2⁷); `fix` undoes it, once per sum or row
// coefficient. m not finite: fix 1 (m2 ±inf or NaN), so the exponentials are those of x − m (0, or NaN
// where x is the same infinity or m is NaN).
struct Exp2Ref {
  float m2;
  float fix;
};
__device__ __forceinline__ Exp2Ref exp2_ref(float m) {
  Exp2Ref r;
  r.m2 = m * FLCE_LOG2E;
  const float residual = fmaf(m, FLCE_LOG2E, -r.m2);  // exact: m·log2e − m2
  r.fix = fabsf(m) < __int_as_float(0x7f800000) ? fmaf(-residual, FLCE_LN2, 1.0f)  // 2^(−residual), to f32
                                                 : 1.0f;
  return r;
}

// Sum over a block of BLOCK threads in a fixed tree order (deterministic); s holds BLOCK doubles.
template <int BLOCK>
__device__ double block_sum(double x, double* s) {
  const int tid = threadIdx.x;
  s[tid] = x;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();
  }
  double r = s[0];
  __syncthreads();
  return r;
}

// This thread's share of W = Σ_j w_j over [0, v) (v without class weights), strided by the
// block: the caller reduces it in its fixed tree order.
template <int BLOCK>
__device__ __forceinline__ double thread_class_weight_sum(const float* class_w, int v) {
  double w = 0.0;
  for (int j = threadIdx.x; j < v; j += BLOCK) w += class_w ? (double)class_w[j] : 1.0;
  return w;
}

// W = Σ_j w_j over [0, v) by a block of BLOCK threads (BLOCK dividing REDUCE_THREADS), bitwise
// equal to block_sum<REDUCE_THREADS>(thread_class_weight_sum<REDUCE_THREADS>(…)) — the W of
// flce_token_scale and flce_finish_scalars: thread t holds that order's lanes t + r·BLOCK and adds
// them as its first tree levels would (r with r + R/2, …), then the block's tree finishes. Every
// thread of the block calls it; s holds BLOCK doubles.
template <int BLOCK>
__device__ double class_weight_total(const float* class_w, int v, double* s) {
  constexpr int R = REDUCE_THREADS / BLOCK;
  static_assert(R * BLOCK == REDUCE_THREADS && (R & (R - 1)) == 0, "BLOCK must divide REDUCE_THREADS by a power of two");
  double lane[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    lane[r] = 0.0;
    for (int j = threadIdx.x + r * BLOCK; j < v; j += REDUCE_THREADS) lane[r] += class_w ? (double)class_w[j] : 1.0;
  }
#pragma unroll
  for (int half = R / 2; half > 0; half /= 2)
#pragma unroll
    for (int r = 0; r < half; ++r) lane[r] += lane[r + half];
  return block_sum<BLOCK>(lane[0], s);
}

// The effective target of token i (spec.rs effective_targets), for flce_prep_targets and, over a
// vocabulary slice, flce_slice_targets: shift (position k takes target k+1 within its sequence;
// the last position is ignored) and ignore_index; a given target outside [0, total) records its
// position in *status (atomicMin) and, as an effective target, is TARGET_OUT_OF_RANGE; one inside
// the slice [offset, offset + rows) becomes its index there, any other `elsewhere`.
__device__ __forceinline__ int effective_target(const long long* targets, int i, const LossConstants& k, int* status,
                                                long long total, int offset, int rows, int elsewhere) {
  const long long raw = targets[i];
  if (raw != k.ignore_index && (raw < 0 || raw >= total)) atomicMin(status, i);
  int src = i;
  if (k.shift > 0) src = ((i + 1) % k.shift == 0) ? -1 : i + 1;
  if (src < 0) return TARGET_IGNORED;
  const long long x = targets[src];
  if (x == k.ignore_index) return TARGET_IGNORED;
  if (x < 0 || x >= total) return TARGET_OUT_OF_RANGE;
  if (x >= offset && x < (long long)offset + rows) return (int)(x - offset);
  return elsewhere;
}

// g = ∂L/∂loss_i shared by the tokens of a mean or sum: grad_output / Σ w_t for mean (0 when no
// token counts: PyTorch's gradient of a mean over nothing), grad_output for sum.
__device__ __forceinline__ float uniform_token_scale(const LossConstants& k, const float* grad_output, double w_tok) {
  if (k.reduction != REDUCTION_MEAN) return grad_output[0];
  return w_tok == 0.0 ? 0.0f : (float)((double)grad_output[0] / w_tok);
}

// Token i's factor in G (effective target t): NaN at an out-of-range target, 0 at an ignored one,
// else its own grad_output (reduction none) or 1 — a mean's or sum's uniform g is not in G but
// the products' α (write_product_scalars). G is rounded to the input dtype before the products:
// with g inside, every logit gradient near ±g (a target the row gives almost no probability)
// carried the same rounding of g's mantissa, an error that adds up over tokens instead of
// averaging (dE / dC 2.34–2.46e-3 against 2.13e-3 with g as α, depending on g alone:
// a CPU simulation, docs/journal.md v53). α scales each product's f32
// sum before its one rounding. (With g out of G, f16's G also keeps its normal range: g·p for a
// mean over 16k tokens was subnormal in f16 for every p < 1.)
__device__ __forceinline__ float token_scale_of(const LossConstants& k, int t, const float* grad_output, int i) {
  if (t == TARGET_OUT_OF_RANGE) return FLCE_NAN;
  if (t < 0) return 0.0f;
  return k.reduction == REDUCTION_NONE ? grad_output[i] : 1.0f;
}

// The backward's scalars (src/plan's `scalars` region; the SCALAR_* indices are src/geometry.rs's
// #defines): W = Σ_j w_j, Σ w_t, the products' α and the constants 0 and 1, from which cuBLAS
// reads β in device pointer mode (src/blas.rs Alpha::Scalars).

// α, 0 and 1 into the backward's scalars (one thread): α = the uniform g of a mean or sum, 1 for
// reduction none (each token's grad_output stays in G).
__device__ __forceinline__ void write_product_scalars(const LossConstants& k, float uniform, float* scalars) {
  scalars[SCALAR_ALPHA] = k.reduction == REDUCTION_NONE ? 1.0f : uniform;
  scalars[SCALAR_ZERO] = 0.0f;
  scalars[SCALAR_ONE] = 1.0f;
}

// The forward's scalars {loss (mean or sum), accuracy, Σ w_t, W} from every thread's partial sums,
// reduced in a fixed tree order; every thread of the block calls it, thread 0 writes.
template <int BLOCK>
__device__ void write_forward_scalars(const LossConstants& k, double loss_sum, double weight_sum, double correct,
                                      double active, double W, double* s, float* out) {
  loss_sum = block_sum<BLOCK>(loss_sum, s);
  weight_sum = block_sum<BLOCK>(weight_sum, s);
  correct = block_sum<BLOCK>(correct, s);
  active = block_sum<BLOCK>(active, s);
  if (threadIdx.x == 0) {
    out[0] = (float)(k.reduction == REDUCTION_MEAN ? loss_sum / weight_sum : loss_sum);
    out[1] = (float)(correct / active);
    out[2] = (float)weight_sum;
    out[3] = (float)W;
  }
}
