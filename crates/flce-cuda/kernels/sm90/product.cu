// flce sm90 family: flce_sm90_product — out[rows, cols] (+)= Σ_k A[row, k] · B[k, col], f32
// accumulation, A and B read as they are (dE += G·C_chunk, dC_chunk = Gᵀ·E); the algorithm, tile
// shapes, schedule and epilogue are product.cuh's. Host side: src/family/sm90_product.rs.
#include "sm90/product.cuh"

// A K-major A (dE's G) through shared-memory descriptors (0), or read into registers with
// ldmatrix and multiplied from there (2: SM90_PRODUCT_A_RS, FLCE_SM90_MAINLOOP prs=1 — the main
// loop products that form A from compact logits would take; a measurement variant).
#ifndef SM90_PRODUCT_A_RS
#define SM90_PRODUCT_A_RS 0
#endif
#define SM90_A_KMAJOR (SM90_PRODUCT_A_RS ? 2 : 0)

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_product(const __grid_constant__ Sm90ProductParams p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
  sm90_init_barriers(pp);
  // (p.tile_n is 192 or 256: src/family/sm90_product.rs)
  if (p.tile_n == 192) {
    if (p.a_mn)
      sm90_product<1, 192>(p, pp);
    else
      sm90_product<SM90_A_KMAJOR, 192>(p, pp);
  } else {
    if (p.a_mn)
      sm90_product<1, 256>(p, pp);
    else
      sm90_product<SM90_A_KMAJOR, 256>(p, pp);
  }
}
