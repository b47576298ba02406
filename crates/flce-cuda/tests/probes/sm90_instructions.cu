// Probe of the Hopper instructions the sm90 family needs (docs/journal.md v7), compiled
// by tests/nvrtc_compile.rs for sm_90a (must compile) and sm_90 (must be rejected). Not a
// kernel flce launches: TMA 2-D load completing on an mbarrier, wgmma m64n64k16 bf16 from
// shared-memory descriptors (128-byte swizzle), setmaxnreg in a producer/consumer split,
// a __grid_constant__ tensor-map parameter.
typedef unsigned short u16; typedef unsigned int u32; typedef unsigned long long u64;
struct __align__(64) TmaDesc { u64 bytes[16]; };
__device__ __forceinline__ u32 smem_u32(const void* p) { u32 r; asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p)); return r; }
__device__ __forceinline__ void mbar_init(u64* bar, u32 count) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_u32(bar)), "r"(count)); }
__device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) { asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(bar)), "r"(bytes)); }
__device__ __forceinline__ void mbar_wait(u64* bar, u32 phase) {
  asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" :: "r"(smem_u32(bar)), "r"(phase)); }
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaDesc* desc, u64* bar, int x, int y) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(smem_u32(dst)), "l"(desc), "r"(x), "r"(y), "r"(smem_u32(bar)) : "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// m64n64k16 bf16 -> f32, A and B from shared memory descriptors: 32 f32 accumulators per thread
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], u64 da, u64 db) {
  asm volatile("{ wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
    "%32, %33, 1, 1, 1, 0, 0; }"
    : "+f"(d[0]),"+f"(d[1]),"+f"(d[2]),"+f"(d[3]),"+f"(d[4]),"+f"(d[5]),"+f"(d[6]),"+f"(d[7]),"+f"(d[8]),"+f"(d[9]),"+f"(d[10]),"+f"(d[11]),"+f"(d[12]),"+f"(d[13]),"+f"(d[14]),"+f"(d[15]),
      "+f"(d[16]),"+f"(d[17]),"+f"(d[18]),"+f"(d[19]),"+f"(d[20]),"+f"(d[21]),"+f"(d[22]),"+f"(d[23]),"+f"(d[24]),"+f"(d[25]),"+f"(d[26]),"+f"(d[27]),"+f"(d[28]),"+f"(d[29]),"+f"(d[30]),"+f"(d[31])
    : "l"(da), "l"(db)); }
__device__ __forceinline__ u64 smem_desc(const void* p) { // 128B swizzle, K-major
  u64 addr = smem_u32(p); u64 d = 0; d |= (addr & 0x3FFFF) >> 4; d |= (u64)1 << 16; d |= (u64)(1024 >> 4) << 32; d |= (u64)1 << 62; return d; }
extern "C" __global__ void __launch_bounds__(384, 1) probe(const __grid_constant__ TmaDesc a, const __grid_constant__ TmaDesc b, float* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  u64* bar = (u64*)(smem + 32768);
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) mbar_init(bar, 1);
  __syncthreads();
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) { mbar_expect_tx(bar, 16384); tma_load_2d(smem, &a, bar, 0, 0); tma_load_2d(smem + 8192, &b, bar, 0, 0); }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    float acc[32] = {0};
    mbar_wait(bar, 0);
    wgmma_fence();
    wgmma_m64n64k16(acc, smem_desc(smem), smem_desc(smem + 8192));
    wgmma_commit(); wgmma_wait<0>();
    float s = 0; for (int i = 0; i < 32; ++i) s += acc[i];
    out[threadIdx.x] = s;
  }
}
