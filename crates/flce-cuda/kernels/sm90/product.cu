// flce sm90 family: the backward's two products through TMA + wgmma, the first piece of the
// persistent backward it was built for (docs/journal.md v19–v21) — a measurement alternative to cuBLAS's
// products (FLCE_SM90_PRODUCTS=1), not the default.
//
// flce_sm90_product — out[rows, cols] (+)= Σ_k A[row, k] · B[k, col], f32 accumulation:
//   dE += G·C_chunk: A = G [tokens, ldg] (K-major: k is the chunk's vocabulary row), B = C's
//     chunk rows [k, D]; out = dE's f32 accumulator rows (added to after the first chunk), in
//     up to three buffers (sm90_product_out_row), all of a chunk's tokens in one launch;
//   dC_chunk = Gᵀ·E: A = Gᵀ (G read MN-major: rows are the chunk's vocabulary rows, k the tokens),
//     B = E [tokens, D]; out = dC's rows in the input dtype (rounded once) or the chunk's f32
//     accumulator.
//   B is always read MN-major (contiguous along cols). Output tiles of 128 × tile_n (256, or 192
//   where that fills the SMs' waves better: plan::sm90_product_tile_n), in raster groups
//   (Sm90ProductTiles: group_rows row tiles, then the next column tile; src/plan/sm90.rs
//   sm90_product_order picks the group so that the tiles running together share their A and B
//   reads in L2). Grid (blocks): block b computes tiles b, b + blocks, … of that order — one block
//   per SM (persistent: the producer loads the next tile's stages while the consumers write the
//   last tile) or one per tile. In clusters of 2 (FLCE_SM90_PRODUCT_CLUSTER=2; off: measured
//   1.2–1.3× slower, journal v21) a step is a pair of column tiles of one row tile: the
//   pair's blocks share A's box, each loading half and multicasting it (mainloop.cuh SHARE_A),
//   and load their own B. SM90_THREADS (384) threads, dynamic smem SM90_PRODUCT_SMEM_BYTES; each
//   tile computed by mainloop.cuh's warp-specialised loop (sm90_run / sm90_consume) with the
//   MN-major operand layouts (TA = a_mn, TB = 1: its TMA boxes, descriptors and wgmma transpose
//   immediates). Epilogue: each thread scales its sums by *alpha (the mean's or sum's g, kept out
//   of G: common/types.cuh token_scale_of), then writes (or adds, f32 with accumulate: its loads issued a
//   half row's column pairs at a time, add_to_f32) its tile_n / 2 values, pairs of columns at a
//   time; rows ≥ rows and columns ≥ cols are not written. Out-of-range k loads as zeros (TMA
//   bounds). Reads A and B, writes out's tiles only, each tile by one block; no atomics: the sum
//   over k runs in one fixed order (bitwise reproducible, whatever the grid).
//
// Host side: src/family/sm90.rs (product); tests: tests/gpu/ (the GPU tests' backward cases under
// FLCE_SM90_PRODUCTS=1, against the f64 oracle).
#include "sm90/mainloop.cuh"

// A K-major A (dE's G) through shared-memory descriptors (0), or read into registers with
// ldmatrix and multiplied from there (2: SM90_PRODUCT_A_RS, FLCE_SM90_MAINLOOP prs=1 — the main
// loop products that form A from compact logits would take — measured slower, journal v52; a
// measurement variant).
#ifndef SM90_PRODUCT_A_RS
#define SM90_PRODUCT_A_RS 0
#endif
#define SM90_A_KMAJOR (SM90_PRODUCT_A_RS ? 2 : 0)

// The output tiles (128 × BN) in raster-group order, a schedule for mainloop.cuh's loops (see
// Sm90TokenTiles): step t is tile t of the order.
// In a cluster of 2 (Sm90ProductParams::cluster) a step is a pair of column tiles of one row
// tile — A's rows shared, each block multicasting half (mainloop.cuh SHARE_A) — and the block of
// rank r takes the pair's column 2·unit + r; with an odd column count the last pair's second
// tile lies past `cols`: its B loads are zeros (TMA bounds) and its epilogue writes nothing.
template <int BN>
struct Sm90ProductTiles {
  int first, stride, end;  // over the cluster's steps (a block's own without a cluster)
  int row_tiles, col_units, group_rows;
  int pairs, rank;  // blocks per cluster (1 or 2), this block's rank

  __device__ __forceinline__ int2 tile(int t) const {
    const int2 rc = sm90_raster_tile(t, row_tiles, col_units, group_rows);
    return make_int2(rc.x, rc.y * pairs + rank);
  }
  __device__ __forceinline__ int row0(int t) const { return tile(t).x * SM90_TILE_M; }
  __device__ __forceinline__ int col0(int t, int) const { return tile(t).y * BN; }
  // (the epilogue's begin_rows takes the step itself: Sm90ProductEpilogue::begin_rows)
  __device__ __forceinline__ int epilogue_rows(int t) const { return t; }
};

// Output row `row`'s first element: the segment that holds it (Sm90ProductParams: dE's f32
// accumulator may span dE's own bytes, dC's tail and a workspace overflow — one launch over all
// of a chunk's tokens instead of one per buffer, so that the tiles fill the SMs' waves).
__device__ __forceinline__ char* sm90_product_out_row(const Sm90ProductParams& p, int row, int elem_bytes) {
  char* base = (char*)p.out;
  if (row >= p.seg2_row) {
    base = (char*)p.out_seg2;
    row -= p.seg2_row;
  } else if (row >= p.seg1_row) {
    base = (char*)p.out_seg1;
    row -= p.seg1_row;
  }
  return base + (long long)row * p.ldo * elem_bytes;
}

template <int BN>
struct Sm90ProductEpilogue {
  const Sm90ProductParams& p;
  const Sm90ProductTiles<BN>& tt;
  int consumer;
  int row0;     // the tile's first output row
  float alpha;  // *p.alpha, the factor on every sum (the mean's or sum's g: common/types.cuh token_scale_of)

  __device__ __forceinline__ void begin_rows(int t) { row0 = tt.row0(t); }
  __device__ __forceinline__ void add_to_f32(float (&acc)[BN / 2], int col0, int g, int t, int w);
  __device__ __forceinline__ void end_rows(int) {}

  // the wgmma D fragment: thread (warp w, lane l; g = l/4, t = l%4) holds acc[4j + 2h + q] =
  // (row 16w + g + 8h, column 8j + 2t + q) of the consumer's 64 × BN sub-tile
  __device__ __forceinline__ void tile(float (&acc)[BN / 2], int col0) {
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] *= alpha;
    if (p.out_f32 && p.accumulate && col0 + BN <= p.cols) {
      add_to_f32(acc, col0, g, t, w);
      return;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 64 * consumer + 16 * w + g + 8 * h;
      if (row >= p.rows) continue;
      char* row_bytes = sm90_product_out_row(p, row, p.out_f32 ? 4 : (int)sizeof(elem_t));
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = col0 + 8 * j + 2 * t;
        float2 v = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        if (p.out_f32) {
          float* out_row = (float*)row_bytes;
          if (col + 1 < p.cols) {
            float2* dst = (float2*)(out_row + col);
            if (p.accumulate) {
              const float2 o = *dst;
              v.x += o.x;
              v.y += o.y;
            }
            *dst = v;
          } else if (col < p.cols) {
            out_row[col] = p.accumulate ? out_row[col] + v.x : v.x;
          }
        } else {
          elem_t* out_row = (elem_t*)row_bytes;
          if (col + 1 < p.cols) {
            *(u32*)(out_row + col) = (u32)from_f32(v.x) | ((u32)from_f32(v.y) << 16);
          } else if (col < p.cols) {
            out_row[col] = from_f32(v.x);
          }
        }
      }
    }
  }
};

// The f32 accumulator's read-modify-write (dE += G·C_chunk after the first chunk) over a tile
// whose BN columns are all in range: each thread's loads for `group` column pairs of a row are
// issued together, then added and stored — written as one load → add → store per pair (the
// general path above) the compiler kept them in that order, one memory round trip per pair, 64
// a tile (SASS, 31a8f6b: LDG.E.64 / STG.E.64 alternating).
template <int BN>
__device__ __forceinline__ void Sm90ProductEpilogue<BN>::add_to_f32(float (&acc)[BN / 2], int col0, int g, int t,
                                                                    int w) {
  constexpr int group = BN / 16;  // column pairs a group: a row's in two round trips (16 at BN 256)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 64 * consumer + 16 * w + g + 8 * h;
    if (row >= p.rows) continue;
    float* out = (float*)sm90_product_out_row(p, row, 4) + col0 + 2 * t;
#pragma unroll
    for (int j0 = 0; j0 < BN / 8; j0 += group) {
      float2 old[group];
#pragma unroll
      for (int j = 0; j < group; ++j) old[j] = *(const float2*)(out + 8 * (j0 + j));
#pragma unroll
      for (int j = 0; j < group; ++j) {
        const int a = 4 * (j0 + j) + 2 * h;
        *(float2*)(out + 8 * (j0 + j)) = make_float2(acc[a] + old[j].x, acc[a + 1] + old[j].y);
      }
    }
  }
}

template <int A_MN, int BN>
__device__ __forceinline__ void sm90_product(const Sm90ProductParams& p, const Sm90Pipe& pp) {
  const int row_tiles = (p.rows + SM90_TILE_M - 1) / SM90_TILE_M;
  const int pairs = (int)cluster_size();
  const int col_units = ((p.cols + BN - 1) / BN + pairs - 1) / pairs;
  const Sm90ProductTiles<BN> tt{(int)blockIdx.x / pairs, (int)gridDim.x / pairs, row_tiles * col_units,
                                row_tiles,       col_units,     max(p.group_rows, 1),
                                pairs,           (int)cluster_rank()};
  const int kt_count = (p.k + SM90_TILE_K - 1) / SM90_TILE_K;
  const float alpha = *p.alpha;
  sm90_run<A_MN, 1, BN, 1>(pp, &p.map_a, &p.map_b, tt, 0, 1, kt_count, [&](int consumer) {
    Sm90ProductEpilogue<BN> epi{p, tt, consumer, 0, alpha};
    sm90_consume<A_MN, 1, BN>(pp, consumer, tt, 0, 1, kt_count, epi);
  });
}

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_product(const __grid_constant__ Sm90ProductParams p) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
  sm90_init_barriers(pp);
  // (p.tile_n is 192 or 256: src/family/sm90.rs product)
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
