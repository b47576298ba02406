// Probe of the MN-major wgmma operands the persistent sm90 backward needs
// (docs/design-sm90-backward.md, "The MN-major operands"): one warpgroup computes
// D[64, 128] = A[64, K] · B[K, 128] (f32 accumulation, K a multiple of 64) from TMA boxes of
// 64 × 64 16-bit elements with the 128-byte swizzle, and writes D row-major. Run by
// tests/gpu/mn_major.rs against a host reference; compiled for sm_90a by tests/nvrtc_compile.rs.
//
// - probe_b_mn:  A K-major (global [64, K] row-major, as G in dE += G·C_chunk), B MN-major
//                (global [K, 128] row-major, as C_chunk): instruction imm-trans-b = 1.
// - probe_ab_mn: A MN-major too (global [K, 64] row-major, as Gᵀ in dC_chunk = Gᵀ·E):
//                imm-trans-a = 1.
//
// The MN-major descriptor (CUTLASS's canonical Major-MN layout with the 128-byte swizzle): 64
// consecutive MN elements (128 bytes) per k row, k rows 128 bytes apart, groups of 8 k rows
// SBO = 1024 bytes apart, the next 64 MN elements LBO = 8192 bytes away (the next TMA box of
// 64 k rows); the k16 step s starts 2048·s bytes in. The K-major one is mainloop.cuh's.
// One stage, one block; not a kernel flce launches.
typedef unsigned int u32;
typedef unsigned long long u64;
struct __align__(64) TmaDesc { u64 bytes[16]; };

__device__ __forceinline__ u32 smem_u32(const void* p) {
  u32 r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
  u32 done;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaDesc* map, u64* bar, int inner, int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)),
      "l"(map), "r"(inner), "r"(outer), "r"(smem_u32(bar))
      : "memory");
}

// K-major, 128-byte swizzle, 8-row atoms 1024 bytes apart (mainloop.cuh's smem_desc)
__device__ __forceinline__ u64 desc_k_major(u32 addr) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(16 >> 4) << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}
// MN-major, 128-byte swizzle: LBO between 64-element MN chunks, SBO between groups of 8 k rows
__device__ __forceinline__ u64 desc_mn_major(u32 addr) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(8192 >> 4) << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

#define ACC64                                                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),     \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),     \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),     \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),     \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),     \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define REGS64                                                                                                     \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29," \
  "%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,"  \
  "%57,%58,%59,%60,%61,%62,%63}"

// d (+)= A·B for a 64 × 128 × 16 step, bf16 inputs; TA / TB: the transpose immediates (1: the
// operand is MN-major in shared memory)
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], u64 desc_a, u64 desc_b, int accumulate) {
  asm volatile(
      "{ .reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " REGS64 ", %64, %65, p, 1, 1, %67, %68; }"
      : ACC64
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TA), "n"(TB));
}

// The shared memory: A's box (8 KB) at 0, B's two boxes (n 0..63, n 64..127) at 8192 and
// 16384, the barrier after them; 1024-byte aligned (the swizzle's period).
template <int TA>
__device__ __forceinline__ void probe(const TmaDesc* a, const TmaDesc* b, float* out, int k_total) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const u32 base = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((base + 1023) & ~1023u) - base);
  u64* bar = (u64*)(smem + 24576);
  if (threadIdx.x == 0) {
    mbar_init(bar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  for (int kt = 0; kt * 64 < k_total; ++kt) {
    if (threadIdx.x == 0) {
      mbar_expect_tx(bar, 3 * 8192);
      // K-major A: box (k, row); MN-major A: box (m, k); MN-major B: boxes (n, k)
      if (TA) {
        tma_load_2d(smem, a, bar, 0, kt * 64);
      } else {
        tma_load_2d(smem, a, bar, kt * 64, 0);
      }
      tma_load_2d(smem + 8192, b, bar, 0, kt * 64);
      tma_load_2d(smem + 16384, b, bar, 64, kt * 64);
    }
    mbar_wait(bar, kt & 1);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const u64 da = TA ? desc_mn_major(smem_u32(smem) + 2048 * s) : desc_k_major(smem_u32(smem) + 32 * s);
      const u64 db = desc_mn_major(smem_u32(smem + 8192) + 2048 * s);
      wgmma_m64n128k16<TA, 1>(acc, da, db, kt | s);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    __syncthreads();  // every thread done with the stage before thread 0 refills it
  }
  // the wgmma D fragment: thread (warp w, lane l; g = l/4, t = l%4) holds
  // acc[4j + 2h + q] = D(16w + g + 8h, 8j + 2t + q)
  const int w = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 2; ++q) out[(16 * w + g + 8 * h) * 128 + 8 * j + 2 * t + q] = acc[4 * j + 2 * h + q];
}

extern "C" __global__ void __launch_bounds__(128, 1)
    probe_b_mn(const __grid_constant__ TmaDesc a, const __grid_constant__ TmaDesc b, float* out, int k_total) {
  probe<0>(&a, &b, out, k_total);
}

extern "C" __global__ void __launch_bounds__(128, 1)
    probe_ab_mn(const __grid_constant__ TmaDesc a, const __grid_constant__ TmaDesc b, float* out, int k_total) {
  probe<1>(&a, &b, out, k_total);
}
