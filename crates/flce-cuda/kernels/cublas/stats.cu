// flce cuBLAS family, forward: fold a chunk of f32 logits into each token's statistics.
//
// flce_stats_from_logits — a cuBLAS product has written the logits E·C[v0..v_end]ᵀ of one
//   vocabulary chunk in f32 ([N, ldl]); one warp per token (STATS_TOKENS_PER_BLOCK tokens per
//   block of ELEMENTWISE_THREADS) applies bias and softcap, folds the chunk into the token's
//   running statistics and picks out the target logit. Each lane takes STATS_BATCH columns at
//   a time (stride 32: every load a coalesced 128-byte warp access, STATS_BATCH of them in
//   flight), takes their max first and folds them with one exponential each (the running sum
//   rescaled once per batch): one column at a time, with a full RowStats merge per column, the
//   kernel is latency- and then instruction-bound at 1.5-2 TB/s (ncu, journal v10). Σw·z is only formed when
//   label smoothing needs it. Grid (ceil(N / STATS_TOKENS_PER_BLOCK), segments): blockIdx.y folds
//   columns [v0 + y·seg_cols, +seg_cols) into partial y (at partials + y·partials_ld), so few
//   tokens over a wide vocabulary still fill the GPU; the finish step merges the partials in
//   order. Not first_chunk: merge into the partial (chunk order: deterministic).
//
// Host side: src/family/cublas.rs; tests: tests/gpu/ (ForwardMode::CublasChunks: the default off
// Hopper, and the three-product pass).
#include "common/loss.cuh"

// Fold columns [v0, v0 + vlen) of one token's logits (`src`, chunk-relative) into `st` — lane
// `lane` of the token's warp takes columns lane, lane + 32, …, STATS_BATCH of them per batch.
// PLAIN: no bias, softcap or label smoothing (z = x, Σw·z not needed). Per batch: the max first
// (NaN-ignoring, as the sm90 forward: NaN reaches the loss through the sum), the argmax only when
// the batch raises the running max, one exponential per column and one rescale per batch.
template <bool PLAIN>
__device__ __forceinline__ RowStats fold_row(const StatsParams& sp, const float* src, int v0, int vlen, int tgt,
                                             int row, int lane) {
  const LogitParams& p = sp.lp;
  RowStats st = row_stats_empty();
  const int trel = tgt - v0 - lane;  // the batch-relative offset of the target in this lane's columns
  for (int base = 0; base < vlen; base += 32 * STATS_BATCH) {
    float x[STATS_BATCH];
#pragma unroll
    for (int i = 0; i < STATS_BATCH; ++i) {
      const int j = base + 32 * i + lane;
      x[i] = j < vlen ? src[j] : FLCE_NEG_INF;
    }
    float bm = FLCE_NEG_INF;
#pragma unroll
    for (int i = 0; i < STATS_BATCH; ++i) {
      const int j = base + 32 * i + lane;
      if (!PLAIN && j < vlen) {
        x[i] = logit_transform(p, x[i], v0 + j);
        if (p.k.label_smoothing > 0.0f) st.wsum += class_weight(p.class_w, v0 + j) * x[i];
      }
      // (j < vlen: a target past this segment or chunk must not be written from the padding)
      if (j < vlen && base + 32 * i == trel) sp.target_logit[row] = x[i];
      bm = fmaxf(bm, x[i]);
    }
    if (bm > st.max) {
      // a new running max (rare after the first batches): its first column in this lane
      int am = 0x7fffffff;
#pragma unroll
      for (int i = STATS_BATCH - 1; i >= 0; --i)
        if (x[i] == bm) am = v0 + base + 32 * i + lane;
      st.argmax = am;
    }
    const float m = fmaxf(st.max, bm);
    const float shift = m == FLCE_NEG_INF ? 0.0f : m;  // no finite value yet: sums of 0 (or NaN)
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < STATS_BATCH; ++i) sum += fast_exp(x[i] - shift);
    st.sum_exp = (st.sum_exp == 0.0f ? 0.0f : st.sum_exp * fast_exp(st.max - shift)) + sum;
    st.max = m;
  }
  return st;
}

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_stats_from_logits(const StatsParams sp) {
  const LogitParams& p = sp.lp;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * STATS_TOKENS_PER_BLOCK + (threadIdx.x >> 5);
  if (row >= p.k.n) return;
  const int tgt = p.targets[row];
  const int v0 = sp.v0 + blockIdx.y * sp.seg_cols;
  const int vlen = min(sp.v_end - v0, sp.seg_cols);
  const float* src = sp.logits + (size_t)row * sp.ldl + (v0 - sp.v0);
  // plain_logits(p) written out: through the helper NVRTC lays this kernel's branches out
  // differently (scripts/tools/sass-diff.sh), and its H200 measurements are of this form
  const bool plain = !p.bias && p.k.softcap == 0.0f && p.k.label_smoothing == 0.0f;
  RowStats st = plain ? fold_row<true>(sp, src, v0, vlen, tgt, row, lane)
                      : fold_row<false>(sp, src, v0, vlen, tgt, row, lane);
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
