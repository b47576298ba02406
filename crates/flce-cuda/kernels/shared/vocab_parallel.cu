// flce shared kernels: one rank's steps of the vocabulary-parallel loss. Rank k holds
// rows [offset, offset + V_k) of the classifier; every rank has all N tokens and the given
// (global) targets. A rank's partials travel as f64 [N, 6] rows — max, Σexp, Σw·z, argmax (a
// global index), target logit, target weight (the last two from the rank that owns the target,
// 0 elsewhere) — as flce-core's cpu/vocab_parallel.rs encodes them.
//
// flce_slice_targets — one thread per token: shift and ignore_index as flce_prep_targets, the
//   range check against the whole vocabulary (status word as there; out of range:
//   TARGET_OUT_OF_RANGE), then a target inside the slice becomes its local index; a valid target
//   on another rank becomes `elsewhere_base < 0 ? TARGET_IGNORED : elsewhere_base + i` — inactive
//   in the forward's statistics, and in the backward an index past the slice (no column matches
//   it) whose class weight is the token's own (the extended weights of flce_slice_scales).
//
// flce_export_partials — one block of REDUCE_THREADS: merges a family's split partials per token
//   (as flce_forward_finish) into the f64 rows above, and Σ_j w_j of the slice.
//
// flce_finish_ranks — one block of REDUCE_THREADS: merges P ranks' rows per token in rank order,
//   then lse, the per-token loss (token_loss, the forward finish's formula), the scalars and the
//   merged rows (for the backward). Targets are the global prepared ones (flce_prep_targets over
//   the whole vocabulary). Deterministic.
//
// flce_slice_scales — one block of REDUCE_THREADS: the backward's per-token scales and scalars
//   (W = Σ_k W_k, Σ w_t over active tokens, the products' α, 0 and 1: as flce_token_scale) from
//   the merged rows, and the extended class weights
//   [V_k + N] (the slice's, then each token's target weight) when class weights are given.
//
// Host side: src/vocab_parallel/rank.rs; tests: tests/gpu/vocab_parallel.rs (slices of one GPU
// merged = the whole).
#include "common/loss.cuh"

#define PARTIAL_FIELDS 6

extern "C" __global__ void flce_slice_targets(const SliceTargetsParams p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.k.n) return;
  const int elsewhere = p.elsewhere_base < 0 ? TARGET_IGNORED : p.elsewhere_base + i;
  p.out[i] = effective_target(p.targets, i, p.k, p.status, p.total, p.offset, p.k.v, elsewhere);
}

// W = Σ_k W_k over the ranks, in rank order (flce_finish_ranks and flce_slice_scales alike).
__device__ __forceinline__ double ranks_class_weight_sum(const double* sums, int ranks) {
  double W = 0.0;
  for (int r = 0; r < ranks; ++r) W += sums[r];
  return W;
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) flce_export_partials(const ExportParams p) {
  __shared__ double s_red[REDUCE_THREADS];
  const int tid = threadIdx.x;
  const double w_all = block_sum<REDUCE_THREADS>(thread_class_weight_sum<REDUCE_THREADS>(p.class_w, p.k.v), s_red);
  if (tid == 0) p.class_weight_sum[0] = w_all;
  for (int i = tid; i < p.k.n; i += REDUCE_THREADS) {
    RowStats st = row_stats_empty();
    for (int k = 0; k < p.splits; ++k)
      st = row_stats_merge(st, row_stats_unpack(p.partials[(size_t)k * p.partials_ld + i]));
    const int t = p.targets[i];
    double* row = p.out + (size_t)i * PARTIAL_FIELDS;
    row[0] = st.max;
    row[1] = st.sum_exp;
    row[2] = st.wsum;
    row[3] = st.argmax == 0x7fffffff ? (double)st.argmax : (double)st.argmax + p.offset;  // none: stays none
    row[4] = t >= 0 ? (double)p.target_logit[i] : 0.0;
    row[5] = t >= 0 ? (double)class_weight(p.class_w, t) : 0.0;
  }
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) flce_finish_ranks(const RanksFinishParams p) {
  __shared__ double s_red[REDUCE_THREADS];
  const int tid = threadIdx.x;
  const int n = p.k.n;
  const double W = ranks_class_weight_sum(p.class_weight_sums, p.ranks);
  double loss_sum = 0.0, weight_sum = 0.0, correct = 0.0, active = 0.0;
  for (int i = tid; i < n; i += REDUCE_THREADS) {
    RowStats st = row_stats_empty();
    double target_logit = 0.0, w_t = 0.0;
    for (int r = 0; r < p.ranks; ++r) {
      const double* row = p.parts + ((size_t)r * n + i) * PARTIAL_FIELDS;
      RowStats b;
      b.max = (float)row[0];
      b.sum_exp = (float)row[1];
      b.wsum = (float)row[2];
      b.argmax = (int)row[3];
      st = row_stats_merge(st, b);
      target_logit += row[4];  // one rank owns the target, the others add 0
      w_t += row[5];
    }
    const float lse = st.max + logf(st.sum_exp);
    p.lse[i] = lse;
    const int t = p.targets[i];
    float loss = 0.0f;
    if (t >= 0) {
      loss = token_loss(lse, (float)target_logit, (float)w_t, st.wsum, W, p.k.v, p.k.label_smoothing, p.k.z_loss);
      weight_sum += w_t;
      active += 1.0;
      correct += st.argmax == t ? 1.0 : 0.0;
    }
    if (t == TARGET_OUT_OF_RANGE) loss = FLCE_NAN;
    if (p.per_token_loss) p.per_token_loss[i] = loss;
    loss_sum += loss;
    double* m = p.merged + (size_t)i * PARTIAL_FIELDS;
    m[0] = st.max;
    m[1] = st.sum_exp;
    m[2] = st.wsum;
    m[3] = (double)st.argmax;
    m[4] = target_logit;
    m[5] = w_t;
  }
  write_forward_scalars<REDUCE_THREADS>(p.k, loss_sum, weight_sum, correct, active, W, s_red, p.out_scalars);
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) flce_slice_scales(const SliceScalesParams p) {
  __shared__ double s_red[REDUCE_THREADS];
  const int tid = threadIdx.x;
  const int n = p.k.n;
  const double W = ranks_class_weight_sum(p.class_weight_sums, p.ranks);
  double w_tok = 0.0;
  for (int i = tid; i < n; i += REDUCE_THREADS)
    if (p.targets[i] >= 0) w_tok += p.merged[(size_t)i * PARTIAL_FIELDS + 5];
  w_tok = block_sum<REDUCE_THREADS>(w_tok, s_red);
  const float uniform = uniform_token_scale(p.k, p.grad_output, w_tok);
  if (tid == 0) {
    p.scalars[SCALAR_W] = (float)W;
    p.scalars[SCALAR_W_TOK] = (float)w_tok;
    write_product_scalars(p.k, uniform, p.scalars);
  }
  for (int i = tid; i < n; i += REDUCE_THREADS) {
    p.token_scale[i] = token_scale_of(p.k, p.targets[i], p.grad_output, i);
    if (p.class_w_ext) p.class_w_ext[p.v_slice + i] = (float)p.merged[(size_t)i * PARTIAL_FIELDS + 5];
  }
  if (p.class_w_ext)
    for (int j = tid; j < p.v_slice; j += REDUCE_THREADS) p.class_w_ext[j] = p.class_w[j];
}
