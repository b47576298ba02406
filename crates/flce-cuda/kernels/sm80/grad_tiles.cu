// flce sm80 family, backward: the logit-gradient tiles of one chunk, recomputed by mma.sync.
//
// The backward runs vocabulary-chunk-outer (src/plan/backward/, src/pass/backward.rs): for each
// chunk of Vc vocabulary rows and Nc tokens a family writes G = ∂L/∂x for the chunk into the
// workspace, then two cuBLAS products with f32 accumulation consume it: dE_acc += G·C_chunk and
// dC_chunk = Gᵀ·E.
//
// flce_grad_tiles — grid (ceil(Nc/128), ceil(Vc/128)), THREADS (256) threads, dynamic smem
//   GRAD_SMEM_BYTES. Each block recomputes one 128×128 logit tile (tile_gemm.cuh), applies bias
//   and softcap, and forms ∂L/∂x_ij = (p_scale_i·exp(z_ij − lse_i) − smooth_i·w_j −
//   [j = t_i]·target_i)·∂z/∂x with the per-row coefficients of spec.rs (common/loss.cuh)
//   computed once per block into shared memory. Writes G (input dtype, row-major [Nc, ldg]) and,
//   when the bias gradient is wanted, each column's sum over the block's 128 rows into
//   db_partial [row tiles, ldg] (f32, from the unrounded values). Columns past V are written as
//   0. No atomics.
//
// Host side: src/family/sm80.rs; tests: tests/gpu/ (BackwardMode::FusedTiles).
#include "sm80/tile_gemm.cuh"

struct GradEpilogue {
  const GradTilesParams& gp;
  const int* s_target;
  const float4* s_coef;  // per row: p_scale, target coefficient, smooth coefficient, lse
  float* s_db;           // [2][TILE_N]
  int row0, wm, wn, g, t;

  __device__ __forceinline__ void tile(float (&acc)[4][4][4], int col0) {
    const LogitParams& p = gp.lp;
    const GradChunk& ch = gp.chunk;
    float colsum[4][2];
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) colsum[ni][0] = colsum[ni][1] = 0.0f;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row_local = wm * 64 + mi * 16 + g + h * 8;
        const int row = row0 + row_local;
        const int tgt = s_target[row_local];
        const float4 cf = s_coef[row_local];
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const int colp = col0 + wn * 32 + ni * 8 + 2 * t;
          float gv[2];
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int col = colp + q;
            float gx = 0.0f;
            if (col < ch.v_end && row < ch.n_end) gx = logit_grad(p, acc[mi][ni][h * 2 + q], col, tgt, cf);
            gv[q] = gx;
            colsum[ni][q] += gx;
          }
          if (row < ch.n_end) {
            elem_t* dst = ch.g_out + (size_t)(row - ch.n0) * ch.ldg + (colp - ch.v0);
#if FLCE_DTYPE == FLCE_F32
            *(float2*)dst = make_float2(gv[0], gv[1]);
#else
            *(u32*)dst = (u32)from_f32(gv[0]) | ((u32)from_f32(gv[1]) << 16);
#endif
          }
        }
      }
    }
    if (ch.db_partial) {
      // sum the 8 row groups of the warp (lanes differing in g), then the 2 warps along tokens
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
          for (int off = 4; off <= 16; off <<= 1) colsum[ni][q] += __shfl_xor_sync(0xffffffffu, colsum[ni][q], off);
      if (g == 0) {
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
#pragma unroll
          for (int q = 0; q < 2; ++q) s_db[wm * TILE_N + wn * 32 + ni * 8 + 2 * t + q] = colsum[ni][q];
      }
      __syncthreads();
      const int tid = threadIdx.x;
      if (tid < TILE_N && col0 + tid < ch.v_end) {
        ch.db_partial[(size_t)blockIdx.x * ch.ldg + (col0 + tid - ch.v0)] = s_db[tid] + s_db[TILE_N + tid];
      }
    }
  }
};

extern "C" __global__ void __launch_bounds__(THREADS, 2) flce_grad_tiles(const GradTilesParams gp) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  elem_t* smem = (elem_t*)smem_raw;
  int* s_target = (int*)(smem_raw + PIPELINE_BYTES);
  float4* s_coef = (float4*)(smem_raw + PIPELINE_BYTES + TILE_M * 4);
  float* s_db = (float*)(smem_raw + PIPELINE_BYTES + TILE_M * 4 + TILE_M * 16);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row0 = gp.chunk.n0 + blockIdx.x * TILE_M;
  const int tile = gp.chunk.v0 / TILE_N + blockIdx.y;

  load_row_coeffs(gp.lp, gp.chunk, row0, s_target, s_coef);
  __syncthreads();

  GradEpilogue epi{gp, s_target, s_coef, s_db, row0, warp >> 2, warp & 3, lane >> 2, lane & 3};
  logits_tiles(gp.lp, row0, tile, tile + 1, smem, epi);
}
