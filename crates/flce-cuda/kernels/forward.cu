// flce forward: fused logits GEMM + online log-sum-exp, then a deterministic merge.
//
// flce_forward_tiles — grid (ceil(N/128), splits), 256 threads, dynamic smem FORWARD_SMEM_BYTES.
//   Block (x, s) owns tokens [128x, 128x + 128) and vocabulary tiles
//   [s·tiles_per_split, (s+1)·tiles_per_split). For each 128×128 logit tile (tile_gemm.cuh) the
//   epilogue applies bias and softcap, then folds the tile into each row's running
//   (max, Σexp, Σw·z, argmax) in shared memory — per warp, over that warp's 32-column slice of
//   every tile — and
//   writes the target logit where the target column falls in the tile (one writer per token).
//   At the end the 4 warp slices are merged in a fixed order and written as one float4 per
//   (split, token) to `partials` [splits, N]. Reads E, C, bias, class weights, targets; writes
//   partials and target_logit. No atomics: bitwise reproducible.
//
// flce_forward_finish — one block of 1024 threads. Merges the splits of each token in split
//   order, writes lse [N] (and per-token loss [N] when asked), and reduces loss, weight and
//   accuracy over tokens in a fixed tree order into out_scalars = {loss, accuracy, Σw_t, W}.
//
// flce_stats_from_logits — the cuBLAS-chunk variant (ForwardMode::CublasChunks), see below.
//
// Host side: crates/flce-cuda/src/launch.rs (forward); test: crates/flce-cuda/tests/gpu.rs.
#include "tile_gemm.cuh"

#define FORWARD_SMEM_BYTES (PIPELINE_BYTES + TILE_M * 4 + TILE_M * 4 * 16)

struct ForwardParams {
  LogitParams lp;
  int tiles_per_split;
  float4* partials;     // [splits, n]: max, Σexp, Σw·z, argmax (int bits)
  float* target_logit;  // [n]
};

// Running statistics live in shared memory, one float4 (max, Σexp, Σw·z, argmax) per
// (row, warp column slice), each written by exactly one quad leader: no block barrier needed,
// and 32 registers fewer than keeping them in registers (two blocks per Hopper SM).
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
              wz += class_weight(p, col) * x;
              if (col == tgt && row0 + row_local < p.n) target_logit[row0 + row_local] = x;
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

extern "C" __global__ void __launch_bounds__(THREADS, 2) flce_forward_tiles(const ForwardParams fp) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  elem_t* smem = (elem_t*)smem_raw;
  int* s_target = (int*)(smem_raw + PIPELINE_BYTES);
  float4* s_state = (float4*)(smem_raw + PIPELINE_BYTES + TILE_M * 4);  // [TILE_M][4]
  const LogitParams& p = fp.lp;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row0 = blockIdx.x * TILE_M;
  const int tile_count = (p.v + TILE_N - 1) / TILE_N;
  const int tile_begin = blockIdx.y * fp.tiles_per_split;
  const int tile_end = min(tile_begin + fp.tiles_per_split, tile_count);

  if (tid < TILE_M) s_target[tid] = row0 + tid < p.n ? p.targets[row0 + tid] : -1;
  for (int i = tid; i < TILE_M * 4; i += THREADS)
    s_state[i] = make_float4(FLCE_NEG_INF, 0.0f, 0.0f, __int_as_float(0x7fffffff));
  __syncthreads();

  ForwardEpilogue epi{p, fp.target_logit, s_target, s_state, row0, p.v, warp >> 2, warp & 3, lane >> 2, lane & 3};
  logits_tiles(p, row0, tile_begin, tile_end, smem, epi);
  __syncthreads();

  // merge the 4 warp column slices of each row in a fixed order
  if (tid < TILE_M && row0 + tid < p.n) {
    RowStats acc = row_stats_empty();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float4 r = s_state[tid * 4 + k];
      RowStats b;
      b.max = r.x;
      b.sum_exp = r.y;
      b.wsum = r.z;
      b.argmax = __float_as_int(r.w);
      acc = row_stats_merge(acc, b);
    }
    fp.partials[(size_t)blockIdx.y * p.n + row0 + tid] =
        make_float4(acc.max, acc.sum_exp, acc.wsum, __int_as_float(acc.argmax));
  }
}

// flce_stats_from_logits — the cuBLAS variant of flce_forward_tiles: a cuBLAS product writes a
//   vocabulary chunk of logits E·Cᵀ in f32 ([N, ldl]); one warp per token folds the chunk into the
//   token's running statistics (partials [1, N], merged in chunk order: deterministic) and picks
//   out the target logit. Grid ceil(N/8), 256 threads.
struct StatsParams {
  const float* logits;
  int ldl;
  const elem_t* bias;
  const float* class_w;
  const int* targets;
  float softcap;
  int n, v0, v_end;
  int first_chunk;
  float4* partials;
  float* target_logit;
};

extern "C" __global__ void __launch_bounds__(256) flce_stats_from_logits(const StatsParams sp) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * 8 + (threadIdx.x >> 5);
  if (row >= sp.n) return;
  const int tgt = sp.targets[row];
  const float* src = sp.logits + (size_t)row * sp.ldl;
  const int vlen = sp.v_end - sp.v0;
  RowStats st = row_stats_empty();
  for (int j = lane; j < vlen; j += 32) {
    const int col = sp.v0 + j;
    float x = src[j];
    if (sp.bias) x += to_f32(sp.bias[col]);
    if (sp.softcap > 0.0f) x = softcap_logit(x, sp.softcap);
    if (col == tgt) sp.target_logit[row] = x;
    RowStats one;
    one.max = x;
    one.sum_exp = 1.0f;
    one.wsum = (sp.class_w ? sp.class_w[col] : 1.0f) * x;
    one.argmax = col;
    st = row_stats_merge(st, one);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    RowStats o;
    o.max = __shfl_xor_sync(0xffffffffu, st.max, off);
    o.sum_exp = __shfl_xor_sync(0xffffffffu, st.sum_exp, off);
    o.wsum = __shfl_xor_sync(0xffffffffu, st.wsum, off);
    o.argmax = __shfl_xor_sync(0xffffffffu, st.argmax, off);
    // every lane merges in the same (lower lane first) order, so all lanes agree bitwise
    st = (lane & off) ? row_stats_merge(o, st) : row_stats_merge(st, o);
  }
  if (lane == 0) {
    float4* dst = sp.partials + row;
    if (!sp.first_chunk) {
      const float4 r = *dst;
      RowStats prev;
      prev.max = r.x;
      prev.sum_exp = r.y;
      prev.wsum = r.z;
      prev.argmax = __float_as_int(r.w);
      st = row_stats_merge(prev, st);
    }
    *dst = make_float4(st.max, st.sum_exp, st.wsum, __int_as_float(st.argmax));
  }
}

struct FinishParams {
  const float4* partials;
  const float* target_logit;
  const int* targets;
  const float* class_w;  // [v] or null
  int n, v, splits;
  int reduction;  // 0 mean, 1 sum, 2 none
  float label_smoothing, z_loss;
  float* lse;             // [n]
  float* per_token_loss;  // [n] or null
  float* out_scalars;     // {loss, accuracy, Σ w_t over non-ignored tokens, W}
};

#define FINISH_THREADS 1024

// Sum over the block in a fixed tree order (deterministic).
__device__ double block_sum(double x, double* s_red) {
  const int tid = threadIdx.x;
  s_red[tid] = x;
  __syncthreads();
  for (int stride = FINISH_THREADS / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s_red[tid] += s_red[tid + stride];
    __syncthreads();
  }
  double r = s_red[0];
  __syncthreads();
  return r;
}

extern "C" __global__ void __launch_bounds__(FINISH_THREADS) flce_forward_finish(const FinishParams fp) {
  __shared__ double s_red[FINISH_THREADS];
  const int tid = threadIdx.x;
  double wsum_all = 0.0;
  for (int j = tid; j < fp.v; j += FINISH_THREADS) wsum_all += fp.class_w ? (double)fp.class_w[j] : 1.0;
  const double W = block_sum(wsum_all, s_red);

  double loss_sum = 0.0, weight_sum = 0.0, correct = 0.0, active = 0.0;
  const float eps = fp.label_smoothing;
  for (int i = tid; i < fp.n; i += FINISH_THREADS) {
    RowStats st = row_stats_empty();
    for (int k = 0; k < fp.splits; ++k) {
      float4 r = fp.partials[(size_t)k * fp.n + i];
      RowStats b;
      b.max = r.x;
      b.sum_exp = r.y;
      b.wsum = r.z;
      b.argmax = __float_as_int(r.w);
      st = row_stats_merge(st, b);
    }
    const float lse = st.max + logf(st.sum_exp);
    fp.lse[i] = lse;
    const int t = fp.targets[i];
    float loss = 0.0f;
    if (t >= 0) {
      const float w_t = fp.class_w ? fp.class_w[t] : 1.0f;
      double l = (1.0 - eps) * (double)w_t * ((double)lse - (double)fp.target_logit[i]);
      if (eps > 0.0f) l += (double)eps / fp.v * (W * (double)lse - (double)st.wsum);
      if (fp.z_loss > 0.0f) l += (double)fp.z_loss * (double)lse * (double)lse;
      loss = (float)l;
      weight_sum += w_t;
      active += 1.0;
      correct += st.argmax == t ? 1.0 : 0.0;
    }
    if (fp.per_token_loss) fp.per_token_loss[i] = loss;
    loss_sum += loss;
  }
  loss_sum = block_sum(loss_sum, s_red);
  weight_sum = block_sum(weight_sum, s_red);
  correct = block_sum(correct, s_red);
  active = block_sum(active, s_red);
  if (tid == 0) {
    fp.out_scalars[0] = (float)(fp.reduction == 0 ? loss_sum / weight_sum : loss_sum);
    fp.out_scalars[1] = (float)(correct / active);
    fp.out_scalars[2] = (float)weight_sum;
    fp.out_scalars[3] = (float)W;
  }
}

// Layouts shared with crates/flce-cuda/src/params.rs.
static_assert(sizeof(LogitParams) == 64, "LogitParams layout");
static_assert(sizeof(ForwardParams) == 88, "ForwardParams layout");
static_assert(sizeof(FinishParams) == 80, "FinishParams layout");
static_assert(sizeof(StatsParams) == 80, "StatsParams layout");
static_assert(FORWARD_SMEM_BYTES == 90624, "plan.rs FORWARD_SMEM_BYTES");
