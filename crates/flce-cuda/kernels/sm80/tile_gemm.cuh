// flce sm80 family: the mma.sync logits tile main loop shared by its forward and backward kernels.
//
// Computes 128×128 tiles of E[rows]·C[cols]ᵀ over K = D and hands each finished tile, in
// registers, to an epilogue. One block (256 threads, 8 warps as 2 along tokens × 4 along the
// vocabulary, each warp 64×32) walks a run of vocabulary tiles for one fixed token tile; the
// (tile, k-step) loop is flattened so the copy pipeline (4 stages of cp.async) never drains
// between tiles. Two blocks fit on a Hopper SM (registers capped at 128 by __launch_bounds__).
//
// Tensor cores for bf16/f16: ldmatrix + mma.sync.m16n8k16 with f32 accumulation (sm_80+). f32
// inputs take an exact f32 FFMA path (no tf32 rounding) with the same register layout, so every
// epilogue sees one layout: acc[mi][ni][r] holds row 16·mi + g + 8·(r/2) and column
// 8·ni + 2·t + (r%2) of the warp's 64×32 sub-tile (g = lane/4, t = lane%4).
//
// Shared memory: STAGES × (BM + BN) × PITCH elements (81,920 bytes), rows padded by 16 bytes so
// ldmatrix and the f32 loads are free of bank conflicts. Rows past N or V and k past D load as
// zero. Unaligned rows (D not a multiple of 16 bytes) take a synchronous element-wise copy.
#pragma once
#include "common/loss.cuh"

// TILE_M, TILE_N, THREADS, STAGES, CHUNK (elements per 16-byte copy), TILE_K, PITCH (padded row),
// STAGE_ELEMS and PIPELINE_BYTES come from src/geometry.rs (flce_config.cuh).

__device__ __forceinline__ u32 smem_addr(const void* p) {
  u32 r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// Copy a TILE_M (or TILE_N) × TILE_K slab of rows [row0, row0 + 128) and k [k0, k0 + TILE_K)
// of a row-major [rows, d] matrix into shared memory.
__device__ __forceinline__ void load_slab(elem_t* dst, const elem_t* src, int rows, int d, int row0, int k0,
                                          bool aligned, int tid) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    int chunk = tid + i * THREADS;
    int r = chunk >> 2;
    int kc = (chunk & 3) * CHUNK;
    int grow = row0 + r;
    int gk = k0 + kc;
    elem_t* s = dst + r * PITCH + kc;
    if (aligned) {
      bool ok = grow < rows && gk < d;
      const elem_t* g = ok ? src + (size_t)grow * d + gk : src;
      cp_async16(s, g, ok ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < CHUNK; ++e) {
        bool ok = grow < rows && gk + e < d;
        s[e] = ok ? src[(size_t)grow * d + gk + e] : (elem_t)0;
      }
    }
  }
}

#if FLCE_DTYPE != FLCE_F32
__device__ __forceinline__ void ldmatrix_x4(u32* r, const elem_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// The mma's operand type in its PTX name.
#if FLCE_DTYPE == FLCE_BF16
#define MMA_AB_TYPE "bf16"
#else
#define MMA_AB_TYPE "f16"
#endif

__device__ __forceinline__ void mma16816(float* c, const u32* a, const u32* b) {
  // Not volatile: a pure register operation, so the compiler may interleave the MMAs of one k-step
  // with the (volatile, ordered) ldmatrix loads of the next.
  asm("mma.sync.aligned.m16n8k16.row.col.f32." MMA_AB_TYPE "." MMA_AB_TYPE ".f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

__device__ __forceinline__ void zero_acc(float (&acc)[4][4][4]) {
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;
}

// acc += As·Bsᵀ for one stage.
__device__ __forceinline__ void compute_stage(float (&acc)[4][4][4], const elem_t* As, const elem_t* Bs, int wm,
                                              int wn, int lane) {
#if FLCE_DTYPE != FLCE_F32
#pragma unroll
  for (int kk = 0; kk < TILE_K; kk += 16) {
    u32 a[4][4];
    u32 b[4][2];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
      ldmatrix_x4(a[mi], As + (wm * 64 + mi * 16 + (lane & 15)) * PITCH + kk + (lane >> 4) * 8);
#pragma unroll
    for (int nj = 0; nj < 2; ++nj) {
      u32 r[4];
      ldmatrix_x4(r, Bs + (wn * 32 + nj * 16 + (lane & 7) + (lane >> 4) * 8) * PITCH + kk + ((lane >> 3) & 1) * 8);
      b[2 * nj][0] = r[0];
      b[2 * nj][1] = r[1];
      b[2 * nj + 1][0] = r[2];
      b[2 * nj + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) mma16816(acc[mi][ni], a[mi], b[ni]);
  }
#else
  int g = lane >> 2, t = lane & 3;
#pragma unroll 4
  for (int k = 0; k < TILE_K; ++k) {
    float a[8], b[8];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) a[mi * 2 + h] = As[(wm * 64 + mi * 16 + g + h * 8) * PITCH + k];
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int q = 0; q < 2; ++q) b[ni * 2 + q] = Bs[(wn * 32 + ni * 8 + 2 * t + q) * PITCH + k];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][ni][r] = fmaf(a[mi * 2 + (r >> 1)], b[ni * 2 + (r & 1)], acc[mi][ni][r]);
  }
#endif
}

// Run the main loop over vocabulary tiles [tile_begin, tile_end) for the token tile starting at
// row0, calling epi.tile(acc, col0) on every finished tile. smem: PIPELINE_BYTES.
template <class Epilogue>
__device__ __forceinline__ void logits_tiles(const LogitParams& p, int row0, int tile_begin, int tile_end,
                                             elem_t* smem, Epilogue& epi) {
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;
  const int kt_count = (p.k.d + TILE_K - 1) / TILE_K;
  const int total = (tile_end - tile_begin) * kt_count;
  const bool aligned = p.aligned != 0;

  // (tile, k-step) of the next copy to issue, advanced without divisions
  int load_tile = tile_begin, load_kt = 0, load_it = 0;
  auto issue = [&]() {
    if (load_it < total) {
      elem_t* As = smem + (load_it % STAGES) * STAGE_ELEMS;
      elem_t* Bs = As + TILE_M * PITCH;
      load_slab(As, p.e, p.k.n, p.k.d, row0, load_kt * TILE_K, aligned, tid);
      load_slab(Bs, p.c, p.k.v, p.k.d, load_tile * TILE_N, load_kt * TILE_K, aligned, tid);
      if (++load_kt == kt_count) {
        load_kt = 0;
        ++load_tile;
      }
      ++load_it;
    }
    cp_async_commit();
  };

  float acc[4][4][4];
  zero_acc(acc);

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) issue();

  int kt = 0, tile = tile_begin;
  for (int it = 0; it < total; ++it) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    issue();
    const elem_t* As = smem + (it % STAGES) * STAGE_ELEMS;
    compute_stage(acc, As, As + TILE_M * PITCH, wm, wn, lane);
    if (++kt == kt_count) {
      kt = 0;
      epi.tile(acc, tile * TILE_N);
      ++tile;
      zero_acc(acc);
    }
  }
  cp_async_wait<0>();
}
