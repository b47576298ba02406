// flce sm90 family: the asynchronous-hardware wrappers its kernels share — shared-memory
// addresses, mbarriers (init, expect-tx, arrive, the parity wait; the cluster-remote arrive),
// cluster rank / size / barrier, TMA 2-D loads (plain and multicast, with an L2 cache policy), TMA
// 2-D stores and their bulk groups, the async-proxy fence, stmatrix. Inline PTX, sm_90a only; each
// wrapper is the one instruction it names (plus the address conversions), so SASS reads back to
// these lines. Included by sm90/mainloop.cuh.
#pragma once
#include "common/types.cuh"

__device__ __forceinline__ u32 smem_u32(const void* p) {
  u32 r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

// ---- mbarriers -------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Wait until the phase with parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
  const u32 addr = smem_u32(bar);
  u32 done;
  do {
    asm volatile(
        "{ .reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

// Arrive on the barrier at the same shared-memory offset in block `cta` of the cluster.
// Release at CTA scope (the PTX default, as CUTLASS's ClusterBarrier::arrive): the only use is a
// consumer handing a stage back after wgmma.wait_group, when its reads of the stage are complete,
// so no memory ordering at cluster scope is needed. `.release.cluster` put a cluster-scope fence
// (ERRBAR / MEMBAR in SASS) before every release: 11.7% of the clustered product's warp stalls,
// waiting for the previous tile's global stores (ncu, H200, journal v23).
__device__ __forceinline__ void mbar_arrive_cluster(u64* bar, u32 cta) {
  asm volatile(
      "{ .reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote]; }" ::"r"(smem_u32(bar)),
      "r"(cta)
      : "memory");
}

// ---- clusters ----------------------------------------------------------------------------------
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ u32 cluster_size() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
// Every thread of every block of the cluster (release/acquire: barrier inits and shared-memory
// writes before it are visible to the peers after it).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// ---- TMA ---------------------------------------------------------------------------------------
// The main loop's loads may carry an L2 policy: P (SM90_L2_A for the A boxes — E, or G in the
// product kernel —, SM90_L2_B for the B boxes; FLCE_SM90_MAINLOOP's l2a / l2b, a profiling knob)
// 0 none (the default: the instructions without a cache hint), 1 evict_normal, 2 evict_first,
// 3 evict_last (l2_policy makes the operand once per producer).
#ifndef SM90_L2_A
#define SM90_L2_A 0
#endif
#ifndef SM90_L2_B
#define SM90_L2_B 0
#endif
template <int P>
__device__ __forceinline__ u64 l2_policy() {
  u64 policy = 0;
  if constexpr (P == 1) asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  if constexpr (P == 2) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  if constexpr (P == 3) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// A 2-D box of the tensor map at coordinates (k, row) into shared memory, completing on `bar`
// (P > 0: with the L2 policy `policy`).
template <int P = 0>
__device__ __forceinline__ void tma_load_2d(void* dst, const TensorMap* map, u64* bar, int k, int row, u64 policy = 0) {
  if constexpr (P == 0) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
            "r"(smem_u32(dst)),
        "l"(map), "r"(k), "r"(row), "r"(smem_u32(bar))
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
        "l"(map), "r"(k), "r"(row), "r"(smem_u32(bar)), "l"(policy)
        : "memory");
  }
}
// The same box written into the ring of every block of the cluster in `mask`, each block's
// barrier at the same offset receiving the bytes.
template <int P = 0>
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TensorMap* map, u64* bar, int k, int row,
                                                      unsigned short mask, u64 policy = 0) {
  if constexpr (P == 0) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
        "l"(map), "r"(k), "r"(row), "r"(smem_u32(bar)), "h"(mask)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;" ::"r"(smem_u32(dst)),
        "l"(map), "r"(k), "r"(row), "r"(smem_u32(bar)), "h"(mask), "l"(policy)
        : "memory");
  }
}
__device__ __forceinline__ void tma_prefetch_map(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}
// TMA stores (the compact forward's q): a 2-D box of shared memory at `src` to the tensor map's
// coordinates (col, row), rows and columns past the map's edges not written, in the issuing
// thread's current bulk async-group. Shared memory written by ordinary stores must be fenced
// for the async proxy (fence_async_smem, every writing thread) before the store is issued, and
// may be rewritten only once the group's reads are done (bulk_wait_read).
// `policy`: an L2 cache policy (createpolicy). l2_evict_first: the written lines are the first L2
// evicts, so a stream of stores that nothing reads soon does not push the main loop's operands
// out of L2 (the compact forward's 4.2 GB of q at the 16k training-step loss made it read
// 12.5–14.2 GB from DRAM against the plain forward's 6.0: ncu, H200).
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, u32 src, int col, int row, u64 policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2}], [%3], %4;" ::"l"(map),
      "r"(col), "r"(row), "r"(src), "l"(policy)
      : "memory");
}
__device__ __forceinline__ u64 l2_evict_first() { return l2_policy<2>(); }
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most N of this thread's bulk groups still read shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Wait until every bulk group of this thread has completed (its writes done).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Four 8 × 8 matrices of 16-bit pairs from shared memory (stmatrix_x4's inverse): lanes 8i..8i+7
// give the row addresses of matrix i; r[i] is the lane's (row lane / 4, columns 2·(lane % 4), +1)
// of matrix i — with matrices (rows 0–7, k 0–7), (rows 8–15, k 0–7), (rows 0–7, k 8–15), (rows
// 8–15, k 8–15) of a 16 × 16 tile, wgmma's (and mma.m16n8k16's) register fragment of A.
__device__ __forceinline__ void ldmatrix_x4_shared(u32 addr, u32 (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// Four 8 × 8 matrices of 16-bit pairs to shared memory: lanes 8i..8i+7 give the row addresses of
// matrix i; each lane's r[i] is its (row lane / 4, columns 2·(lane % 4), +1) of matrix i.
__device__ __forceinline__ void stmatrix_x4(u32 addr, const u32 (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}
