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

// The per-row coefficients of ∂L/∂z (spec.rs GradCoeffs): p_scale, target, smooth, lse.
__device__ __forceinline__ float4 row_coeffs(int tgt, const float* class_w, int v, float lse, float g, float W,
                                             float eps, float z_loss) {
  if (g == 0.0f || tgt < 0) return make_float4(0.0f, 0.0f, 0.0f, lse);
  const float w_t = class_w ? class_w[tgt] : 1.0f;
  const float a = (1.0f - eps) * w_t + (float)((double)eps * (double)W / (double)v) + 2.0f * z_loss * lse;
  return make_float4(g * a, g * (1.0f - eps) * w_t, g * eps / (float)v, lse);
}

// ∂L/∂x for one logit x (bias not yet added) of a row with coefficients cf and target tgt.
__device__ __forceinline__ float logit_grad(const elem_t* bias, const float* class_w, float softcap, float x, int col,
                                            int tgt, float4 cf) {
  if (bias) x += to_f32(bias[col]);
  const float z = softcap > 0.0f ? softcap_logit(x, softcap) : x;
  float gx = cf.x * fast_exp(z - cf.w) - cf.z * (class_w ? class_w[col] : 1.0f);
  if (col == tgt) gx -= cf.y;
  if (softcap > 0.0f) {
    const float r = z / softcap;
    gx *= 1.0f - r * r;
  }
  return gx;
}

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
            if (col < gp.v_end && row < gp.n_end) gx = logit_grad(p.bias, p.class_w, p.softcap, acc[mi][ni][h * 2 + q], col, tgt, cf);
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

extern "C" __global__ void __launch_bounds__(THREADS, 2) flce_grad_tiles(const GradParams gp) {
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
    s_target[tid] = row < gp.n_end ? p.targets[row] : -1;
    s_coef[tid] = row < gp.n_end ? row_coeffs(p.targets[row], p.class_w, p.v, gp.lse[row], gp.token_scale[row],
                                              gp.scalars[0], gp.label_smoothing, gp.z_loss)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  __syncthreads();

  GradEpilogue epi{gp, s_target, s_coef, s_db, row0, warp >> 2, warp & 3, lane >> 2, lane & 3};
  logits_tiles(p, row0, tile, tile + 1, smem, epi);
}

// flce_grad_from_logits — the cuBLAS variant of flce_grad_tiles: the chunk's logits E·Cᵀ (f32,
//   [Nc, ldl]) come from a cuBLAS product, and this kernel turns them into G [Nc, ldg] (input
//   dtype) and db partial sums, with the same arithmetic. Grid (ceil(Vc/128), ceil(Nc/128)),
//   256 threads: 16 threads × 8 columns per row, 16 rows per pass, 8 passes.
struct GradLogitsParams {
  const float* logits;
  int ldl;
  const elem_t* bias;
  const float* class_w;
  const int* targets;
  const float* lse;
  const float* token_scale;
  const float* scalars;
  float softcap, label_smoothing, z_loss;
  int v, n0, n_end, v0, v_end;
  elem_t* g_out;
  int ldg;
  float* db_partial;  // [row tiles, ldb] or null
  int ldb;
};

extern "C" __global__ void __launch_bounds__(256) flce_grad_from_logits(const GradLogitsParams gp) {
  __shared__ int s_target[TILE_M];
  __shared__ float4 s_coef[TILE_M];
  __shared__ float s_col[16][TILE_N];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int row0 = gp.n0 + blockIdx.y * TILE_M;
  const int colc = blockIdx.x * TILE_N + tx * 8;  // chunk-relative column of this thread's 8
  if (tid < TILE_M) {
    const int row = row0 + tid;
    s_target[tid] = row < gp.n_end ? gp.targets[row] : -1;
    s_coef[tid] = row < gp.n_end ? row_coeffs(gp.targets[row], gp.class_w, gp.v, gp.lse[row], gp.token_scale[row],
                                              gp.scalars[0], gp.label_smoothing, gp.z_loss)
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  __syncthreads();
  float colsum[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) colsum[k] = 0.0f;
  for (int pass = 0; pass < TILE_M / 16; ++pass) {
    const int rl = ty + pass * 16;
    const int row = row0 + rl;
    if (row >= gp.n_end || colc >= gp.ldg) continue;
    const float* src = gp.logits + (size_t)(row - gp.n0) * gp.ldl + colc;
    float x[8];
    *(float4*)&x[0] = *(const float4*)src;
    *(float4*)&x[4] = *(const float4*)(src + 4);
    const float4 cf = s_coef[rl];
    const int tgt = s_target[rl];
    elem_t out[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int col = gp.v0 + colc + k;
      const float gx = col < gp.v_end ? logit_grad(gp.bias, gp.class_w, gp.softcap, x[k], col, tgt, cf) : 0.0f;
      colsum[k] += gx;
      out[k] = from_f32(gx);
    }
    elem_t* dst = gp.g_out + (size_t)(row - gp.n0) * gp.ldg + colc;
#if FLCE_DTYPE == FLCE_F32
    *(float4*)dst = *(float4*)&out[0];
    *(float4*)(dst + 4) = *(float4*)&out[4];
#else
    *(uint4*)dst = *(uint4*)&out[0];
#endif
  }
  if (gp.db_partial) {
#pragma unroll
    for (int k = 0; k < 8; ++k) s_col[ty][tx * 8 + k] = colsum[k];
    __syncthreads();
    if (tid < TILE_N) {
      float s = 0.0f;
#pragma unroll
      for (int r = 0; r < 16; ++r) s += s_col[r][tid];
      const int col = blockIdx.x * TILE_N + tid;
      if (gp.v0 + col < gp.v_end) gp.db_partial[(size_t)blockIdx.y * gp.ldb + col] = s;
    }
  }
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
static_assert(GRAD_SMEM_BYTES == 85504, "plan.rs GRAD_SMEM_BYTES");
static_assert(sizeof(GradLogitsParams) == 128, "GradLogitsParams layout");
