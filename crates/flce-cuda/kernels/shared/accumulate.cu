// flce shared kernels: the backward's accumulators, for every family.
//
// flce_db_reduce — one thread per column: sums db_partial [row_tiles, ldb] over row tiles in
//   order into db_acc (f32), overwriting on the first token chunk, adding after. Deterministic.
// flce_to_elem   — grid-stride: rounds an f32 accumulator to the input dtype (the one rounding
//   of dE, dC and db).
// flce_scale_grads — grid-stride: gradients (input dtype) times the f32 at `scale`, in place;
//   returns at once when it is 1 (the three-product pass's backward, src/step.rs).
//
// Host side: src/backward.rs, src/step.rs.
#include "common/types.cuh"

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_db_reduce(const DbReduceParams p) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= p.count) return;
  float s = 0.0f;
  for (int r = 0; r < p.row_tiles; ++r) s += p.db_partial[(size_t)r * p.ldb + j];
  p.db_acc[j] = p.accumulate ? p.db_acc[j] + s : s;
}

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_to_elem(const ToElemParams p) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += (u64)gridDim.x * blockDim.x)
    p.dst[i] = from_f32(p.src[i]);
}

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_scale_grads(const ScaleGradsParams p) {
  const float g = *p.scale;
  if (g == 1.0f) return;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += (u64)gridDim.x * blockDim.x)
    p.data[i] = from_f32(to_f32(p.data[i]) * g);
}
