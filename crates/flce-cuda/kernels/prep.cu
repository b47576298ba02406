// flce preparation kernels: effective targets and per-token gradient scales, on the device, so
// callers that keep targets on the GPU never synchronise.
//
// flce_prep_targets — one thread per token: applies shift (position k takes target k+1 within its
//   sequence; the last position is ignored) and ignore_index, writing int32 targets (-1 ignored).
//   A target outside [0, V) that is not ignore_index is treated as ignored and its index is
//   recorded in status[0] with atomicMin (status starts at INT_MAX), so the host can report the
//   first bad token instead of a device-side assert.
//
// flce_token_scale — one block of 1024 threads: W = Σ_j w_j, Σ w_t over non-ignored tokens (fixed
//   tree order), then g_i = ∂L/∂loss_i from grad_output (a device scalar, or [N] for reduction
//   none), 0 at ignored tokens. Writes token_scale [N] and scalars {W, Σ w_t}.
#include "common.cuh"

struct PrepParams {
  const long long* targets;  // [n] as given
  int* out;                  // [n] effective
  int* status;               // [1] first bad index, INT_MAX if none
  long long ignore_index;
  int n, v, shift;           // shift: sequence length, 0 for none
};

extern "C" __global__ void flce_prep_targets(const PrepParams p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  const long long raw = p.targets[i];
  if (raw != p.ignore_index && (raw < 0 || raw >= p.v)) atomicMin(p.status, i);
  int src = i;
  if (p.shift > 0) src = ((i + 1) % p.shift == 0) ? -1 : i + 1;
  int t = -1;
  if (src >= 0) {
    const long long x = p.targets[src];
    if (x != p.ignore_index && x >= 0 && x < p.v) t = (int)x;
  }
  p.out[i] = t;
}

struct ScaleParams {
  const int* targets;         // effective
  const float* class_w;       // [v] or null
  const float* grad_output;   // [1] or [n]
  int n, v;
  int reduction;              // 0 mean, 1 sum, 2 none
  float* token_scale;         // [n]
  float* scalars;             // {W, Σ w_t}
};

#define SCALE_THREADS 1024

__device__ double scale_block_sum(double x, double* s) {
  const int tid = threadIdx.x;
  s[tid] = x;
  __syncthreads();
  for (int stride = SCALE_THREADS / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();
  }
  double r = s[0];
  __syncthreads();
  return r;
}

extern "C" __global__ void __launch_bounds__(SCALE_THREADS) flce_token_scale(const ScaleParams p) {
  __shared__ double s[SCALE_THREADS];
  const int tid = threadIdx.x;
  double w_all = 0.0, w_tok = 0.0;
  for (int j = tid; j < p.v; j += SCALE_THREADS) w_all += p.class_w ? (double)p.class_w[j] : 1.0;
  for (int i = tid; i < p.n; i += SCALE_THREADS) {
    const int t = p.targets[i];
    if (t >= 0) w_tok += p.class_w ? (double)p.class_w[t] : 1.0;
  }
  w_all = scale_block_sum(w_all, s);
  w_tok = scale_block_sum(w_tok, s);
  if (tid == 0) {
    p.scalars[0] = (float)w_all;
    p.scalars[1] = (float)w_tok;
  }
  // mean over no tokens: PyTorch's gradient is zero
  const float uniform = p.reduction == 0 ? (w_tok == 0.0 ? 0.0f : (float)((double)p.grad_output[0] / w_tok))
                                         : p.grad_output[0];
  for (int i = tid; i < p.n; i += SCALE_THREADS) {
    const int t = p.targets[i];
    p.token_scale[i] = t < 0 ? 0.0f : (p.reduction == 2 ? p.grad_output[i] : uniform);
  }
}

// Layouts shared with crates/flce-cuda/src/params.rs.
static_assert(sizeof(PrepParams) == 48, "PrepParams layout");
static_assert(sizeof(ScaleParams) == 56, "ScaleParams layout");
