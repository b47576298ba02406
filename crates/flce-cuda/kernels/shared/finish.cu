// flce shared kernels: the forward's finish step, after any family's partials.
//
// flce_forward_finish — one thread per token, FINISH_THREADS a block, ceil(N / FINISH_THREADS)
//   blocks. Merges the `splits` partials of each token (packed RowStats, split k at
//   partials + k·partials_ld, written by a family's forward; from split offset_split on, their
//   argmax counts from row argmax_offset: a vocabulary slice's) in split order, writes lse [N] (and
//   the per-token loss [N] when asked) and, when block_sums is given, the block's {Σ loss, Σ w_t,
//   Σ correct, Σ active} as 4 doubles at block_sums + 4·blockIdx.x, each summed in a fixed tree
//   order. With neither (per_token_loss and block_sums 0) lse only: no losses, no W. A token's
//   lse and loss do not depend on the grid; the sums do not depend on timing.
// flce_finish_scalars — one block of REDUCE_THREADS. Sums the forward finish's block sums in a
//   fixed order (thread t takes blocks t, t + REDUCE_THREADS, …; then a tree) and W = Σ_j w_j into
//   out_scalars = {loss, accuracy, Σ w_t, W}. Deterministic.
//
// Why two kernels: one block merging every token's partials (up to 18 of 16 bytes each) read
// them at one SM's bandwidth — 45 µs at 8k tokens, 107 µs at 16k, on the critical path between
// the forward and the backward; a block per 256 tokens reads them at the GPU's.
//
// Host side: src/pass/forward.rs (CudaLoss::finish), src/pass/three_product.rs; tests: tests/gpu/.
#include "common/loss.cuh"

extern "C" __global__ void __launch_bounds__(FINISH_THREADS) flce_forward_finish(const FinishParams fp) {
  __shared__ double s_red[FINISH_THREADS];
  const int n = fp.k.n, v = fp.k.v;
  const float eps = fp.k.label_smoothing;
  // lse only (the three-product pass's per-chunk launches: no per-token loss, no block sums) —
  // no token loss, so no W. W enters a token's loss only with label smoothing, and without class
  // weights it is v exactly; with both, every block sums the V weights (~5 µs at V 128k: one
  // fixed-order sum, the same in every block, so that the blocks need not wait on each other).
  const bool wants_loss = fp.per_token_loss || fp.block_sums;  // uniform over the grid
  const double W = (wants_loss && eps > 0.0f && fp.class_w) ? class_weight_total<FINISH_THREADS>(fp.class_w, v, s_red)
                                                            : (double)v;

  double loss_sum = 0.0, weight_sum = 0.0, correct = 0.0, active = 0.0;
  const int i = blockIdx.x * FINISH_THREADS + threadIdx.x;
  if (i < n) {
    RowStats st = row_stats_empty();
    for (int k = 0; k < fp.splits; ++k) {
      RowStats part = row_stats_unpack(fp.partials[(size_t)k * fp.partials_ld + i]);
      // a slice's local argmax as a row of the whole vocabulary (none stays none)
      if (k >= fp.offset_split && part.argmax != 0x7fffffff) part.argmax += fp.argmax_offset;
      st = row_stats_merge(st, part);
    }
    const float lse = st.max + logf(st.sum_exp);
    fp.lse[i] = lse;
    const int t = fp.targets[i];
    float loss = 0.0f;
    if (t >= 0 && wants_loss) {
      const float w_t = class_weight(fp.class_w, t);
      loss = token_loss(lse, fp.target_logit[i], w_t, st.wsum, W, v, eps, fp.k.z_loss);
      weight_sum = w_t;
      active = 1.0;
      correct = st.argmax == t ? 1.0 : 0.0;
    }
    if (t == TARGET_OUT_OF_RANGE) loss = FLCE_NAN;
    if (fp.per_token_loss) fp.per_token_loss[i] = loss;
    loss_sum = loss;
  }
  if (!fp.block_sums) return;  // uniform over the block: no thread is left at a barrier
  loss_sum = block_sum<FINISH_THREADS>(loss_sum, s_red);
  weight_sum = block_sum<FINISH_THREADS>(weight_sum, s_red);
  correct = block_sum<FINISH_THREADS>(correct, s_red);
  active = block_sum<FINISH_THREADS>(active, s_red);
  if (threadIdx.x == 0) {
    double* out = fp.block_sums + 4 * (size_t)blockIdx.x;
    out[0] = loss_sum;
    out[1] = weight_sum;
    out[2] = correct;
    out[3] = active;
  }
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) flce_finish_scalars(const FinishScalarsParams p) {
  __shared__ double s_red[REDUCE_THREADS];
  const double W = block_sum<REDUCE_THREADS>(thread_class_weight_sum<REDUCE_THREADS>(p.class_w, p.k.v), s_red);
  double loss_sum = 0.0, weight_sum = 0.0, correct = 0.0, active = 0.0;
  for (int b = threadIdx.x; b < p.blocks; b += REDUCE_THREADS) {
    const double* s = p.block_sums + 4 * (size_t)b;
    loss_sum += s[0];
    weight_sum += s[1];
    correct += s[2];
    active += s[3];
  }
  write_forward_scalars<REDUCE_THREADS>(p.k, loss_sum, weight_sum, correct, active, W, s_red, p.out_scalars);
}
