// flce sm80 family, forward: fused logits GEMM + online log-sum-exp, no logits in memory.
//
// flce_forward_tiles — grid (ceil(N/128), splits), THREADS (256) threads, dynamic smem
//   FORWARD_SMEM_BYTES. Block (x, s) owns tokens [128x, 128x + 128) and vocabulary tiles
//   [s·tiles_per_split, (s+1)·tiles_per_split). For each 128×128 logit tile (tile_gemm.cuh) the
//   epilogue applies bias and softcap, then folds the tile into each row's running
//   (max, Σexp, Σw·z, argmax) in shared memory — per warp, over that warp's 32-column slice of
//   every tile — and writes the target logit where the target column falls in the tile (one
//   writer per token). At the end the 4 warp slices are merged in a fixed order and written as
//   one packed RowStats per (split, token) to `partials` [splits, N], which
//   shared/finish.cu merges. Reads E, C, bias, class weights, targets; writes partials and
//   target_logit. No atomics: bitwise reproducible.
//
// Host side: src/family/sm80.rs; tests: tests/gpu/ (ForwardMode::Fused).
#include "sm80/tile_gemm.cuh"

// Running statistics live in shared memory, one packed RowStats per (row, warp column slice),
// each written by exactly one quad leader: no block barrier needed, and 32 registers fewer than
// keeping them in registers (two blocks per Hopper SM).
struct ForwardEpilogue {
  const LogitParams& p;
  float* target_logit;
  const int* s_target;  // [TILE_M] targets of the block's rows
  float4* s_state;      // [TILE_M][4] running stats per row and warp column slice
  int row0, col_end, wm, wn, g, t;

  __device__ __forceinline__ void tile(float (&acc)[4][4][4], int col0) {
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row_local = wm * 64 + mi * 16 + g + h * 8;
        const int tgt = s_target[row_local];
        float z[8];
        float tmax = FLCE_NEG_INF;
        int targ = 0x7fffffff;
        float wz = 0.0f;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int col = col0 + wn * 32 + ni * 8 + 2 * t + q;
            float x = FLCE_NEG_INF;
            if (col < col_end) {
              x = logit_transform(p, acc[mi][ni][h * 2 + q], col);
              if (x > tmax || (x != x && tmax == tmax)) {
                tmax = x;
                targ = col;
              }
              wz += class_weight(p.class_w, col) * x;
              if (col == tgt && row0 + row_local < p.k.n) target_logit[row0 + row_local] = x;
            }
            z[ni * 2 + q] = x;
          }
        }
        // the 4 lanes of a quad hold the 32 columns of this row: agree on max and argmax
#pragma unroll
        for (int off = 1; off <= 2; off <<= 1) {
          float om = __shfl_xor_sync(0xffffffffu, tmax, off);
          int oi = __shfl_xor_sync(0xffffffffu, targ, off);
          if (om > tmax || (om == tmax && oi < targ) || (om != om && tmax == tmax)) {
            tmax = om;
            targ = oi;
          }
        }
        // only the quad leader touches the shared state; the others get its max by shuffle
        float4 st = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t == 0) st = s_state[row_local * 4 + wn];
        const float m_run = __shfl_sync(0xffffffffu, st.x, 0, 4);
        const float new_m = nan_max(m_run, tmax);
        float part = 0.0f;
        if (new_m != FLCE_NEG_INF) {
#pragma unroll
          for (int e = 0; e < 8; ++e) part += fast_exp(z[e] - new_m);
        }
#pragma unroll
        for (int off = 1; off <= 2; off <<= 1) {
          part += __shfl_xor_sync(0xffffffffu, part, off);
          wz += __shfl_xor_sync(0xffffffffu, wz, off);
        }
        if (t == 0) {
          if (new_m != FLCE_NEG_INF) st.y = (st.y == 0.0f ? 0.0f : st.y * fast_exp(m_run - new_m)) + part;
          st.z += wz;
          if (tmax > m_run || (tmax != tmax && m_run == m_run)) st.w = __int_as_float(targ);
          st.x = new_m;
          s_state[row_local * 4 + wn] = st;
        }
      }
    }
  }
};

extern "C" __global__ void __launch_bounds__(THREADS, 2) flce_forward_tiles(const ForwardTilesParams fp) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  elem_t* smem = (elem_t*)smem_raw;
  int* s_target = (int*)(smem_raw + PIPELINE_BYTES);
  float4* s_state = (float4*)(smem_raw + PIPELINE_BYTES + TILE_M * 4);  // [TILE_M][4]
  const LogitParams& p = fp.lp;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row0 = blockIdx.x * TILE_M;
  const int tile_count = (p.k.v + TILE_N - 1) / TILE_N;
  const int tile_begin = blockIdx.y * fp.tiles_per_split;
  const int tile_end = min(tile_begin + fp.tiles_per_split, tile_count);

  if (tid < TILE_M) s_target[tid] = row0 + tid < p.k.n ? p.targets[row0 + tid] : -1;
  for (int i = tid; i < TILE_M * 4; i += THREADS) s_state[i] = row_stats_pack(row_stats_empty());
  __syncthreads();

  ForwardEpilogue epi{p, fp.target_logit, s_target, s_state, row0, p.k.v, warp >> 2, warp & 3, lane >> 2, lane & 3};
  logits_tiles(p, row0, tile_begin, tile_end, smem, epi);
  __syncthreads();

  // merge the 4 warp column slices of each row in a fixed order
  if (tid < TILE_M && row0 + tid < p.k.n) {
    RowStats acc = row_stats_empty();
#pragma unroll
    for (int k = 0; k < 4; ++k) acc = row_stats_merge(acc, row_stats_unpack(s_state[tid * 4 + k]));
    fp.partials[(size_t)blockIdx.y * p.k.n + row0 + tid] = row_stats_pack(acc);
  }
}
