// flce CUDA kernels: shared definitions.
//
// Compiled by NVRTC at run time, without the CUDA toolkit headers (NVRTC alone has none): the
// 16-bit types are raw `unsigned short` and converted with inline PTX. Each .cu file is compiled
// once per element type, chosen by FLCE_DTYPE (0 bf16, 1 f16, 2 f32).
//
// The per-token arithmetic mirrors crates/flce-core/src/spec.rs line for line.
#pragma once

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef FLCE_DTYPE
#error "FLCE_DTYPE must be defined (0 bf16, 1 f16, 2 f32)"
#endif

#define FLCE_BF16 0
#define FLCE_F16 1
#define FLCE_F32 2

#if FLCE_DTYPE == FLCE_F32
typedef float elem_t;
#else
typedef u16 elem_t;
#endif

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

#define FLCE_NAN __int_as_float(0x7fffffff)
#define FLCE_NEG_INF __int_as_float(0xff800000)

// NaN-propagating max (fmaxf drops NaN; the loss must not).
__device__ __forceinline__ float nan_max(float a, float b) {
  return (a != a || b != b) ? FLCE_NAN : fmaxf(a, b);
}

// exp via ex2.approx (2 ulp): exp(x) = 2^(x·log2 e).
__device__ __forceinline__ float fast_exp(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}

// s·tanh(x/s), written through exp so it keeps f32 accuracy (tanh.approx does not).
__device__ __forceinline__ float softcap_logit(float x, float cap) {
  float y = x / cap;
  float a = fabsf(y);
  float e = __expf(-2.0f * a);
  float t = (1.0f - e) / (1.0f + e);
  return cap * copysignf(t, y);
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

// Parameters shared by every kernel that evaluates logits.
struct LogitParams {
  const elem_t* e;        // [n, d]
  const elem_t* c;        // [v, d]
  const elem_t* bias;     // [v] or null
  const float* class_w;   // [v] or null
  const int* targets;     // [n] effective targets, -1 ignored
  int n, d, v;
  int aligned;            // rows of e and c start on 16-byte boundaries (d % (16/sizeof) == 0)
  float softcap;          // 0: none
};

__device__ __forceinline__ float logit_transform(const LogitParams& p, float acc, int col) {
  float x = acc;
  if (p.bias) x += to_f32(p.bias[col]);
  if (p.softcap > 0.0f) x = softcap_logit(x, p.softcap);
  return x;
}

__device__ __forceinline__ float class_weight(const LogitParams& p, int col) {
  return p.class_w ? p.class_w[col] : 1.0f;
}
