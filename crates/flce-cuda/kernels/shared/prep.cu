// flce shared kernels: effective targets and per-token gradient scales, on the device, so callers
// that keep targets on the GPU never synchronise. Used by every family.
//
// flce_prep_targets — one thread per token: applies shift (position k takes target k+1 within its
//   sequence; the last position is ignored) and ignore_index, writing int32 targets
//   (TARGET_IGNORED = -1). A target outside [0, V) that is not ignore_index becomes
//   TARGET_OUT_OF_RANGE (-2): its token counts in no statistic, its loss is NaN (so a mean or sum
//   is NaN) and its gradient row NaN — wrong input cannot pass unnoticed under torch.compile or
//   CUDA-graph replay, where no host reads the status word. Its index is also recorded in
//   status[0] with atomicMin (status starts at INT_MAX), so an eager host check can name the
//   first bad token instead of a device-side assert.
//
// flce_check_class_weights — one thread per class, before flce_prep_targets when class weights are
//   given: a weight that is negative, NaN or infinite records STATUS_BAD_CLASS_WEIGHT + j in
//   status[0] (atomicMin: the first bad class). flce_prep_targets then makes every token's
//   target TARGET_OUT_OF_RANGE — the loss NaN under every reduction, every gradient row NaN — so
//   bad weights cannot pass unnoticed where no host reads the status word either.
//
// flce_token_scale — one block of REDUCE_THREADS: W = Σ_j w_j, Σ w_t over active tokens (fixed
//   tree order), then ∂L/∂loss_i = α·token_scale_i from grad_output (a device scalar, or [N] for
//   reduction none): token_scale_i 1 (mean, sum) or grad_output_i (none), 0 at ignored tokens,
//   NaN at out-of-range ones; α the mean's or sum's uniform factor (1 for none), which the
//   products written once into a gradient apply, and the rounding of the f32 accumulators the
//   others fill (src/blas.rs Alpha; common/types.cuh token_scale_of says why). Writes token_scale [N] and the
//   backward's scalars {W, Σ w_t, α, 0, 1}.
//
// Host side: src/pass/forward.rs and src/pass/backward.rs.
#include "common/types.cuh"

extern "C" __global__ void flce_check_class_weights(const WeightCheckParams p) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= p.v) return;
  const float w = p.class_w[j];
  if (!(w >= 0.0f) || isinf(w)) atomicMin(p.status, STATUS_BAD_CLASS_WEIGHT + j);  // !(w >= 0): NaN too
}

extern "C" __global__ void flce_prep_targets(const PrepParams p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.k.n) return;
  // bad class weights (flce_check_class_weights, earlier on the stream): every token is poisoned.
  // The sign of the status word cannot change during this kernel (its atomicMins write indices
  // >= 0), so a plain read is enough.
  const int t = effective_target(p.targets, i, p.k, p.status, p.k.v, 0, p.k.v, TARGET_IGNORED);
  p.out[i] = *p.status < 0 ? TARGET_OUT_OF_RANGE : t;
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) flce_token_scale(const ScaleParams p) {
  __shared__ double s[REDUCE_THREADS];
  const int tid = threadIdx.x;
  double w_all = thread_class_weight_sum<REDUCE_THREADS>(p.class_w, p.k.v), w_tok = 0.0;
  for (int i = tid; i < p.k.n; i += REDUCE_THREADS) {
    const int t = p.targets[i];
    if (t >= 0) w_tok += p.class_w ? (double)p.class_w[t] : 1.0;
  }
  w_all = block_sum<REDUCE_THREADS>(w_all, s);
  w_tok = block_sum<REDUCE_THREADS>(w_tok, s);
  const float uniform = uniform_token_scale(p.k, p.grad_output, w_tok);
  if (tid == 0) {
    p.scalars[SCALAR_W] = (float)w_all;
    p.scalars[SCALAR_W_TOK] = (float)w_tok;
    write_product_scalars(p.k, uniform, p.scalars);
  }
  for (int i = tid; i < p.k.n; i += REDUCE_THREADS)
    p.token_scale[i] = token_scale_of(p.k, p.targets[i], p.grad_output, i);
}
