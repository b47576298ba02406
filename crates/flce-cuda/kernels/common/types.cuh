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

#define FLCE_NAN __int_as_float(0x7fffffff)
#define FLCE_NEG_INF __int_as_float(0xff800000)

// Prepared targets (flce_prep_targets): a class index, or one of these. Both are inactive in every
// statistic (t < 0); a target out of range also makes its token's loss and gradient row NaN.
#define TARGET_IGNORED (-1)
#define TARGET_OUT_OF_RANGE (-2)

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
