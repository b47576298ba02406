// flce shared kernels: the backward's accumulators, for every family.
//
// flce_db_reduce — one thread per column: sums db_partial [row_tiles, ldb] over row tiles in
//   order, times *alpha (the products' α: common/types.cuh token_scale_of), into db_acc (f32),
//   overwriting on the first token chunk, adding after. Deterministic.
// flce_to_elem   — grid-stride: rounds an f32 accumulator, times *scale when `scale` is given (the
//   backward's α, which the products into f32 accumulators leave out: src/blas.rs Alpha), to the
//   input dtype (the one rounding of dE, dC and db); four elements a step where the pointers are
//   aligned for it.
// flce_scale_grads — grid-stride: gradients (input dtype) times the f32 at `scale`, in place;
//   returns at once when it is 1 (the three-product pass's backward, src/pass/three_product.rs).
//
// Host side: src/pass/backward.rs, src/pass/three_product.rs.
#include "common/types.cuh"

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_db_reduce(const DbReduceParams p) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= p.count) return;
  float s = 0.0f;
  for (int r = 0; r < p.row_tiles; ++r) s += p.db_partial[(size_t)r * p.ldb + j];
  s *= *p.alpha;
  p.db_acc[j] = p.accumulate ? p.db_acc[j] + s : s;
}

// Four elements a step where both pointers allow it (a 16-byte f32 load, one store of the four
// rounded values) run at 3.3–4.1 TB/s; element by element, one 4-byte load in flight a thread, at
// 2.0–2.7 (H200, docs/journal.md v37). The pointers decide it,
// uniformly for the grid; the rest element by element.
struct __align__(4 * sizeof(elem_t)) Elem4 {
  elem_t v[4];
};

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_to_elem(const ToElemParams p) {
  const u64 first = (u64)blockIdx.x * blockDim.x + threadIdx.x, stride = (u64)gridDim.x * blockDim.x;
  const bool vec = (u64)p.src % 16 == 0 && (u64)p.dst % sizeof(Elem4) == 0;
  const float a = p.scale ? *p.scale : 1.0f;
  const u64 quads = vec ? p.count / 4 : 0;
  for (u64 i = first; i < quads; i += stride) {
    const float4 x = ((const float4*)p.src)[i];
    Elem4 e;
    e.v[0] = from_f32(a * x.x);
    e.v[1] = from_f32(a * x.y);
    e.v[2] = from_f32(a * x.z);
    e.v[3] = from_f32(a * x.w);
    ((Elem4*)p.dst)[i] = e;
  }
  for (u64 i = 4 * quads + first; i < p.count; i += stride) p.dst[i] = from_f32(a * p.src[i]);
}

extern "C" __global__ void __launch_bounds__(ELEMENTWISE_THREADS) flce_scale_grads(const ScaleGradsParams p) {
  const float g = *p.scale;
  if (g == 1.0f) return;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += (u64)gridDim.x * blockDim.x)
    p.data[i] = from_f32(to_f32(p.data[i]) * g);
}
