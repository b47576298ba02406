// Probe of the epilogues' per-element math (kernels/common/types.cuh and loss.cuh): for each
// input i, one thread writes
//   out[0·n + i] = exp2_mufu(y[i])            out[1·n + i] = rcp_approx(d[i])
//   out[2·n + i] = softcap_logit(x[i], cap)
//   out[3·n + i] = exp(−1) as the sm90 fold and G take it at m = x[i]: fix · 2^((m − 1)·log2e − m2)
//                  with exp2_ref(m) (the FFMA form)
// Run by tests/gpu/loss_math.rs against f64 (compiled for the device's arch); compiled for sm_80
// and sm_90a by tests/nvrtc_compile.rs. Not a kernel flce launches.
#include "common/loss.cuh"

extern "C" __global__ void probe_loss_math(const float* y, const float* d, const float* x, int n, float cap,
                                           float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = exp2_mufu(y[i]);
  out[n + i] = rcp_approx(d[i]);
  out[2 * n + i] = softcap_logit(x[i], cap);
  const float m = x[i];
  const Exp2Ref ref = exp2_ref(m);
  out[3 * n + i] = ref.fix * exp2_mufu(fmaf(m - 1.0f, FLCE_LOG2E, -ref.m2));
}
