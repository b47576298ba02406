// flce cuBLAS family, forward: fold a chunk of f32 logits into each token's statistics.
//
// flce_stats_from_logits — a cuBLAS product has written the logits E·C[v0..v_end]ᵀ of one
//   vocabulary chunk in f32 ([N, ldl]); one warp per token (STATS_TOKENS_PER_BLOCK tokens per
//   block of ELEMENTWISE_THREADS) applies bias and softcap, folds the chunk into the token's
//   running statistics and picks out the target logit. Grid (ceil(N / STATS_TOKENS_PER_BLOCK),
//   segments): blockIdx.y folds columns [v0 + y·seg_cols, +seg_cols) into partial y (at
//   partials + y·partials_ld), so few tokens over a wide vocabulary still fill the GPU; the
//   finish step merges the partials in order. Not first_chunk: merge into the partial (chunk
//   order: deterministic).
//
// Host side: src/family/cublas.rs; tests: tests/gpu/ (ForwardMode::CublasChunks, the default).
#include "common/loss.cuh"

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_stats_from_logits(const StatsParams sp) {
  const LogitParams& p = sp.lp;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * STATS_TOKENS_PER_BLOCK + (threadIdx.x >> 5);
  if (row >= p.k.n) return;
  const int tgt = p.targets[row];
  const int v0 = sp.v0 + blockIdx.y * sp.seg_cols;
  const int vlen = min(sp.v_end - v0, sp.seg_cols);
  const float* src = sp.logits + (size_t)row * sp.ldl + (v0 - sp.v0);
  RowStats st = row_stats_empty();
  for (int j = lane; j < vlen; j += 32) {
    const int col = v0 + j;
    const float x = logit_transform(p, src[j], col);
    if (col == tgt) sp.target_logit[row] = x;
    RowStats one;
    one.max = x;
    one.sum_exp = 1.0f;
    one.wsum = class_weight(p.class_w, col) * x;
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
    float4* dst = sp.partials + (size_t)blockIdx.y * sp.partials_ld + row;
    if (!sp.first_chunk) st = row_stats_merge(row_stats_unpack(*dst), st);
    *dst = row_stats_pack(st);
  }
}
