// flce backward: the logit-gradient tiles that the cuBLAS products consume.
//
// The backward runs vocabulary-chunk-outer (see src/plan.rs): for each chunk of Vc vocabulary
// rows and Nc tokens, flce_grad_tiles writes G = ∂L/∂x for the chunk into a workspace, then two
// cuBLAS products with f32 accumulation consume it: dE_acc += G·C_chunk and dC_chunk = Gᵀ·E.
//
// flce_grad_tiles — grid (ceil(Nc/128), ceil(Vc/128)), 256 threads, dynamic smem GRAD_SMEM_BYTES.
//   Each block recomputes one 128×128 logit tile (tile_gemm.cuh), applies bias and softcap, and
//   forms ∂L/∂x_ij = (p_scale_i·exp(z_ij − lse_i) − smooth_i·w_j − [j = t_i]·target_i)·∂z/∂x
//   with the per-row coefficients of spec.rs (GradCoeffs) computed once per block into shared
//   memory. Writes G (input dtype, row-major [Nc, ldg]) and, when the bias gradient is wanted,
//   each column's sum over the block's 128 rows into db_partial [row tiles, ldb] (f32, from the
//   unrounded values). Columns past V are written as 0. No atomics.
//
// flce_db_reduce — sums db_partial over row tiles in order into db_acc (f32), per column.
// flce_to_elem   — rounds an f32 buffer to the input dtype (the one rounding of dE, dC and db).
//
// Host side: crates/flce-cuda/src/launch.rs (backward); test: crates/flce-cuda/tests/gpu.rs.
#include "tile_gemm.cuh"

#define GRAD_SMEM_BYTES (PIPELINE_BYTES + TILE_M * 4 + TILE_M * 16 + 2 * TILE_N * 4)

struct GradParams {
  LogitParams lp;
  const float* lse;          // [n]
  const float* token_scale;  // [n] g_i = ∂L/∂loss_i (0 at ignored tokens)
  const float* scalars;      // {W = Σ_j w_j, ...} from flce_token_scale
  float label_smoothing, z_loss;
  int n0, n_end, v0, v_end;  // the chunk: tokens [n0, n_end), vocabulary [v0, v_end)
  elem_t* g_out;             // [Nc, ldg]
  int ldg;
  float* db_partial;  // [row tiles, ldb] or null
  int ldb;
};

struct GradEpilogue {
  const GradParams& gp;
  const int* s_target;
  const float4* s_coef;  // per row: p_scale, target coefficient, smooth coefficient, lse
  float* s_db;           // [2][TILE_N]
  int row0, wm, wn, g, t;

  __device__ __forceinline__ void tile(float (&acc)[4][4][4], int col0) {
    const LogitParams& p = gp.lp;
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
            if (col < gp.v_end && row < gp.n_end) {
              const float z = logit_transform(p, acc[mi][ni][h * 2 + q], col);
              gx = cf.x * fast_exp(z - cf.w) - cf.z * class_weight(p, col);
              if (col == tgt) gx -= cf.y;
              if (p.softcap > 0.0f) {
                const float r = z / p.softcap;
                gx *= 1.0f - r * r;
              }
            }
            gv[q] = gx;
            colsum[ni][q] += gx;
          }
          if (row < gp.n_end) {
            elem_t* dst = gp.g_out + (size_t)(row - gp.n0) * gp.ldg + (colp - gp.v0);
#if FLCE_DTYPE == FLCE_F32
            *(float2*)dst = make_float2(gv[0], gv[1]);
#else
            *(u32*)dst = (u32)from_f32(gv[0]) | ((u32)from_f32(gv[1]) << 16);
#endif
          }
        }
      }
    }
    if (gp.db_partial) {
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
      if (tid < TILE_N && col0 + tid < gp.v_end) {
        gp.db_partial[(size_t)blockIdx.x * gp.ldb + (col0 + tid - gp.v0)] = s_db[tid] + s_db[TILE_N + tid];
      }
    }
  }
};

extern "C" __global__ void __launch_bounds__(THREADS) flce_grad_tiles(const GradParams gp) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  elem_t* smem = (elem_t*)smem_raw;
  int* s_target = (int*)(smem_raw + PIPELINE_BYTES);
  float4* s_coef = (float4*)(smem_raw + PIPELINE_BYTES + TILE_M * 4);
  float* s_db = (float*)(smem_raw + PIPELINE_BYTES + TILE_M * 4 + TILE_M * 16);
  const LogitParams& p = gp.lp;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row0 = gp.n0 + blockIdx.x * TILE_M;
  const int tile = gp.v0 / TILE_N + blockIdx.y;

  if (tid < TILE_M) {
    const int row = row0 + tid;
    int tgt = -1;
    float4 cf = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < gp.n_end) {
      tgt = p.targets[row];
      const float lse = gp.lse[row];
      const float g = gp.token_scale[row];
      const float eps = gp.label_smoothing;
      const float w_t = tgt >= 0 ? class_weight(p, tgt) : 0.0f;
      const float W = gp.scalars[0];
      const float a = (1.0f - eps) * w_t + (float)((double)eps * (double)W / (double)p.v) + 2.0f * gp.z_loss * lse;
      cf = make_float4(g * a, g * (1.0f - eps) * w_t, g * eps / (float)p.v, lse);
      if (g == 0.0f) cf = make_float4(0.0f, 0.0f, 0.0f, lse);
    }
    s_target[tid] = tgt;
    s_coef[tid] = cf;
  }
  __syncthreads();

  GradEpilogue epi{gp, s_target, s_coef, s_db, row0, warp >> 2, warp & 3, lane >> 2, lane & 3};
  logits_tiles(p, row0, tile, tile + 1, smem, epi);
}

struct DbReduceParams {
  const float* db_partial;  // [row_tiles, ldb]
  int row_tiles, ldb, count;
  float* db_acc;            // [count] (already offset to the chunk)
  int accumulate;           // 0: first token chunk, overwrite
};

extern "C" __global__ void flce_db_reduce(const DbReduceParams p) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= p.count) return;
  float s = 0.0f;
  for (int r = 0; r < p.row_tiles; ++r) s += p.db_partial[(size_t)r * p.ldb + j];
  p.db_acc[j] = p.accumulate ? p.db_acc[j] + s : s;
}

struct ToElemParams {
  const float* src;
  elem_t* dst;
  u64 count;
};

extern "C" __global__ void flce_to_elem(const ToElemParams p) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += (u64)gridDim.x * blockDim.x)
    p.dst[i] = from_f32(p.src[i]);
}

// Layouts shared with crates/flce-cuda/src/params.rs.
static_assert(sizeof(GradParams) == 144, "GradParams layout");
static_assert(sizeof(DbReduceParams) == 40, "DbReduceParams layout");
static_assert(sizeof(ToElemParams) == 24, "ToElemParams layout");
static_assert(GRAD_SMEM_BYTES == 65024, "plan.rs GRAD_SMEM_BYTES");
