// flce shared kernels: the forward's finish step, after any family's partials.
//
// flce_forward_finish — one block of REDUCE_THREADS. Merges the `splits` partials of each token
//   (packed RowStats, split k at partials + k·partials_ld, written by a family's forward) in
//   split order, writes lse [N]
//   (and the per-token loss [N] when asked), and reduces loss, weight and accuracy over tokens in
//   a fixed tree order into out_scalars = {loss, accuracy, Σ w_t, W}. Deterministic.
//
// Host side: src/forward.rs; tests: tests/gpu/.
#include "common/loss.cuh"

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) flce_forward_finish(const FinishParams fp) {
  __shared__ double s_red[REDUCE_THREADS];
  const int tid = threadIdx.x;
  const int n = fp.k.n, v = fp.k.v;
  const double W = block_sum<REDUCE_THREADS>(thread_class_weight_sum<REDUCE_THREADS>(fp.class_w, v), s_red);

  double loss_sum = 0.0, weight_sum = 0.0, correct = 0.0, active = 0.0;
  const float eps = fp.k.label_smoothing;
  for (int i = tid; i < n; i += REDUCE_THREADS) {
    RowStats st = row_stats_empty();
    for (int k = 0; k < fp.splits; ++k)
      st = row_stats_merge(st, row_stats_unpack(fp.partials[(size_t)k * fp.partials_ld + i]));
    const float lse = st.max + logf(st.sum_exp);
    fp.lse[i] = lse;
    const int t = fp.targets[i];
    float loss = 0.0f;
    if (t >= 0) {
      const float w_t = class_weight(fp.class_w, t);
      loss = token_loss(lse, fp.target_logit[i], w_t, st.wsum, W, v, eps, fp.k.z_loss);
      weight_sum += w_t;
      active += 1.0;
      correct += st.argmax == t ? 1.0 : 0.0;
    }
    if (t == TARGET_OUT_OF_RANGE) loss = FLCE_NAN;
    if (fp.per_token_loss) fp.per_token_loss[i] = loss;
    loss_sum += loss;
  }
  write_forward_scalars<REDUCE_THREADS>(fp.k, loss_sum, weight_sum, correct, active, W, s_red, fp.out_scalars);
}
