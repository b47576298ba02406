// Probe of the MN-major wgmma operands the sm90 product kernel (kernels/sm90/product.cu) and the
// persistent backward need (docs/journal.md v19), through
// mainloop.cuh's own pieces — its TMA load, mbarriers, smem_desc / smem_desc_mn and
// wgmma_m64n256k16 with the transpose immediates: one warpgroup computes
// D[64, 256] = A[64, K] · B[K, 256] (f32 accumulation, K a multiple of 64) from 64 × 64 TMA boxes
// with the 128-byte swizzle, one k-step at a time, and writes D row-major. Run by
// tests/gpu/mn_major.rs against a host reference (bf16, include lines expanded as for the
// kernels); compiled for sm_90a by tests/nvrtc_compile.rs.
//
// - probe_b_mn:  A K-major (global [64, K] row-major, as G in dE += G·C_chunk), B MN-major
//                (global [K, 256] row-major, as C's chunk): wgmma_m64n256k16<0, 1>.
// - probe_ab_mn: A MN-major too (global [K, 64] row-major, as Gᵀ in dC_chunk = Gᵀ·E):
//                wgmma_m64n256k16<1, 1>.
//
// Shared memory: A's box (8 KB) at 0, B's four boxes (columns 0..63, …, 192..255) 8 KB apart
// from 8192 (the LBO smem_desc_mn assumes), the barrier after them; 1024-byte aligned (the
// swizzle's period). One stage, one block; not a kernel flce launches.
#include "sm90/mainloop.cuh"

template <int TA>
__device__ __forceinline__ void probe(const TensorMap* a, const TensorMap* b, float* out, int k_total) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const u32 base = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((base + 1023) & ~1023u) - base);
  u64* bar = (u64*)(smem + 5 * 8192);
  if (threadIdx.x == 0) {
    mbar_init(bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  for (int kt = 0; kt * 64 < k_total; ++kt) {
    if (threadIdx.x == 0) {
      mbar_expect_tx(bar, 5 * 8192);
      // K-major A: box (k, row); MN-major A: box (m, k); MN-major B: boxes (n, k)
      if (TA) {
        tma_load_2d(smem, a, bar, 0, kt * 64);
      } else {
        tma_load_2d(smem, a, bar, kt * 64, 0);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) tma_load_2d(smem + 8192 * (j + 1), b, bar, 64 * j, kt * 64);
    }
    mbar_wait(bar, kt & 1);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const u64 da = TA ? smem_desc_mn(smem_u32(smem) + 2048 * s) : smem_desc(smem_u32(smem) + 32 * s);
      wgmma_m64n256k16<TA, 1>(acc, da, smem_desc_mn(smem_u32(smem + 8192) + 2048 * s), kt | s);
    }
    wgmma_commit();
    wgmma_wait_all();
    __syncthreads();  // every thread done with the stage before thread 0 refills it
  }
  // the wgmma D fragment: thread (warp w, lane l; g = l/4, t = l%4) holds
  // acc[4j + 2h + q] = D(16w + g + 8h, 8j + 2t + q)
  const int w = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < 32; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 2; ++q) out[(16 * w + g + 8 * h) * 256 + 8 * j + 2 * t + q] = acc[4 * j + 2 * h + q];
}

extern "C" __global__ void __launch_bounds__(128, 1)
    probe_b_mn(const __grid_constant__ TensorMap a, const __grid_constant__ TensorMap b, float* out, int k_total) {
  probe<0>(&a, &b, out, k_total);
}

extern "C" __global__ void __launch_bounds__(128, 1)
    probe_ab_mn(const __grid_constant__ TensorMap a, const __grid_constant__ TensorMap b, float* out, int k_total) {
  probe<1>(&a, &b, out, k_total);
}
