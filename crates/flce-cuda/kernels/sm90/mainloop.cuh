// flce sm90 family (Hopper, sm_90a): the TMA + wgmma logits main loop shared by its forward and
// backward kernels (and, with its operands read MN-major, by the product kernel: the TA / TB
// template parameters below).
//
// A block of SM90_THREADS (384) threads computes 128 × 256 logit tiles E[rows]·C[cols]ᵀ over
// K = D for a run of vocabulary tiles, for each of its token tiles in turn (Sm90TokenTiles: every
// gridDim.x-th token tile, src/plan/sm90.rs), and hands each finished tile, in registers, to an
// epilogue. Warp-specialised as in pranjalssh/fast.cu (kernel 11) and CUTLASS's
// sm90 "warpspecialized cooperative" GEMM:
//
// - warpgroup 0, the producer: registers cut to 40 (setmaxnreg); one thread walks the block's
//   (tile, k-step) sequence and issues two TMA loads per step — E's 128 × 64 box and C's 256 × 64
//   box, 128-byte swizzled — into a ring of SM90_RING_STAGES stages (48 KB each), each stage guarded
//   by a `full` mbarrier (TMA transaction bytes) and an `empty` one (both consumers released it).
// - warpgroups 1 and 2, the consumers: registers raised to 232; consumer c owns rows 64c..64c+63
//   of the token tile and all 256 columns: per k-step four wgmma.m64n256k16 (f32 accumulation)
//   from shared-memory descriptors; the stage of the step before is released once that step's
//   wgmma group has completed (one group stays in flight while the next stage is awaited: see
//   SM90_MMA_INFLIGHT below). After a tile's last k-step the
//   128 f32 accumulators of each thread go to the epilogue while the producer already fills the
//   ring with the next tile's stages.
//
// Clusters of 2 along the token tiles (launched with a cluster dimension where the plan pairs the
// token tiles: the forwards by default, 2–4% faster where D is small; G and the
// product kernel unpaired — src/plan/sm90.rs Sm90Tuning, docs/journal.md v8, v23, v24):
// the two blocks of a cluster own neighbouring token tiles and walk the same vocabulary tiles in
// the same order, so each loads its own E box and half of the shared C box, multicast into both
// blocks' rings — a third less L2→SM traffic. A stage is then refilled only when the consumers of
// both blocks have released it (the `empty` barrier counts 2 arrivals per block of the cluster),
// and no block exits before its peer is done with its barriers (a cluster barrier at the end).
// Launched without a cluster (cluster size 1) the same code loads the whole C box itself.
//
// Accumulator layout (the wgmma D fragment): thread (warp w of the consumer, lane l; g = l/4,
// t = l%4) holds acc[4j + 2h + q] = logit (row 16w + g + 8h, column 8j + 2t + q) of the
// consumer's 64 × 256 sub-tile, j = 0..31, h, q ∈ {0, 1}: the 4 lanes of a quad hold one row.
//
// Tile width: the template parameter BN of the loops (SM90_TILE_N, 256, by default: the forward and
// G kernels); the product kernel also runs BN = 192 (wgmma m64n192k16, 96 accumulators a thread,
// three of B's 64-column MN-major boxes a stage; the stage keeps its 256-column size).
//
// Out-of-range rows (past N or V) and k (past D) load as zeros (TMA bounds): no masking in the
// main loop. Requirements the planner checks: 16-bit inputs, D·2 bytes a multiple of 16, E and C
// 16-byte aligned (TMA). Reads E and C only; writes nothing but shared memory.
#pragma once
#include "common/loss.cuh"

// SM90_TILE_M (128), SM90_TILE_N (256), SM90_TILE_K (64), SM90_STAGES, SM90_FORWARD_STAGES,
// SM90_THREADS, SM90_A_STAGE_BYTES and SM90_B_STAGE_BYTES come from src/geometry.rs.
//
// The ring's stages: SM90_STAGES, unless the kernel file sets SM90_RING_STAGES before including
// this (forward.cu: SM90_FORWARD_STAGES, 3 where its fold is staged so that the staging fits,
// while G and the product kernel keep their 4).
#ifndef SM90_RING_STAGES
#define SM90_RING_STAGES SM90_STAGES
#endif
#define SM90_PIPE_BYTES (SM90_RING_STAGES * (SM90_A_STAGE_BYTES + SM90_B_STAGE_BYTES))

#include "sm90/async.cuh"
#include "sm90/wgmma.cuh"

// ---- the pipeline ------------------------------------------------------------------------------
struct Sm90Pipe {
  unsigned char* a;  // SM90_RING_STAGES boxes of E, SM90_A_STAGE_BYTES each
  unsigned char* b;  // SM90_RING_STAGES boxes of C, SM90_B_STAGE_BYTES each
  u64* full;         // [SM90_RING_STAGES]: TMA bytes landed
  u64* empty;        // [SM90_RING_STAGES]: both consumers done with the stage
  unsigned char* scratch;  // the epilogue's shared memory, after the barriers (16-byte aligned)
};

// The ring inside the dynamic shared memory, from its first 1024-byte boundary (the 128-byte
// swizzle pattern repeats every 1024 bytes and the descriptors assume aligned atoms); the
// kernels' smem size includes 1024 bytes of slack for it.
__device__ __forceinline__ Sm90Pipe sm90_pipe(unsigned char* smem_raw) {
  const u32 base = smem_u32(smem_raw);
  unsigned char* p = smem_raw + (((base + 1023) & ~1023u) - base);
  Sm90Pipe pp;
  pp.a = p;
  pp.b = p + SM90_RING_STAGES * SM90_A_STAGE_BYTES;
  pp.full = (u64*)(p + SM90_PIPE_BYTES);
  pp.empty = pp.full + SM90_RING_STAGES;
  pp.scratch = (unsigned char*)(pp.empty + SM90_RING_STAGES);
  return pp;
}

// One thread initialises the barriers; the caller then runs sm90_start_sync.
__device__ __forceinline__ void sm90_init_barriers(const Sm90Pipe& pp) {
  if (threadIdx.x == 0) {
    const u32 blocks = cluster_size();
    for (int s = 0; s < SM90_RING_STAGES; ++s) {
      mbar_init(&pp.full[s], 1);            // the producer's arrive.expect_tx (+ the TMA bytes)
      mbar_init(&pp.empty[s], 2 * blocks);  // one arrive per consumer warpgroup of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
}

// After the barriers and the epilogue's shared state are initialised: the block, and the cluster
// when there is one (the peer multicasts into this block's ring and arrives on its barriers).
__device__ __forceinline__ void sm90_start_sync() {
  __syncthreads();
  if (cluster_size() > 1) cluster_sync();
}

// Before exit: a block of a cluster stays until its peer no longer touches its barriers.
__device__ __forceinline__ void sm90_end_sync() {
  if (cluster_size() > 1) cluster_sync();
}

// Tile t of a raster order over row_tiles × col_units tiles: group_rows row tiles (fewer in the
// last group), then the next column — so that the tiles blocks run together, neighbours in the
// order, share their rows' and columns' operand reads through L2 (plan::sm90_product_order).
// Returns (row tile, column unit). The product kernel's order (product.cu) and G's (grad.cu,
// SM90_GRAD_ORDER).
__device__ __forceinline__ int2 sm90_raster_tile(int t, int row_tiles, int col_units, int group_rows) {
  const int per_group = group_rows * col_units;
  const int group = t / per_group, within = t - group * per_group;
  const int first_row = group * group_rows;
  const int rows_in_group = min(row_tiles - first_row, group_rows);
  return make_int2(first_row + within % rows_in_group, within / rows_in_group);
}

// The block's token tiles: first, first + stride, … below end (grid x is the slots of the
// schedule; end is the token tiles rounded up to the cluster, so the two blocks of a cluster run
// the same number). Token tile x starts at row base + 128·x.
// A schedule type for the loops below (template parameter Tiles): first / stride / end over its
// steps x, row0(x) the step's first row, col0(x, col_first) its first column (Sm90TokenTiles: a
// token tile's run starts at the launch's col_first; product.cu's Sm90ProductTiles: each step is
// one output tile of its own).
struct Sm90TokenTiles {
  int first, stride, end, base;
  __device__ __forceinline__ int row0(int x) const { return base + x * SM90_TILE_M; }
  __device__ __forceinline__ int col0(int, int col_first) const { return col_first; }
  // what the epilogue's begin_rows / end_rows take for step x: the token tile
  __device__ __forceinline__ int epilogue_rows(int x) const { return x; }
};

// The grid's own: block x of gridDim.x slots, over `rows` rows from `base`.
__device__ __forceinline__ Sm90TokenTiles sm90_token_tiles(int base, int rows) {
  const int cluster = (int)cluster_size();
  const int tiles = (rows + SM90_TILE_M - 1) / SM90_TILE_M;
  return Sm90TokenTiles{(int)blockIdx.x, (int)gridDim.x, (tiles + cluster - 1) / cluster * cluster, base};
}

// The ring position a producer or consumer has reached: it carries over from one token tile's
// run of vocabulary tiles to the next.
struct Sm90Ring {
  int stage = 0;
  u32 phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == SM90_RING_STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// The operands' layouts in shared memory (template parameters TA, TB of the loops below and of
// wgmma_m64nk16): 0, K-major — A's 128 × 64 box at (k, row0), B's 256 × 64 box at (k, col0)
// (the forward and G kernels: E and C); 1, MN-major — A as two 64 (rows) × 64 (k) boxes at
// (row0, k) and (row0 + 64, k), one per consumer, B as four 64 (columns) × 64 (k) boxes at
// (col0 + 64j, k), each box 64 k rows of 128 bytes (the product kernel, sm90/product.cu; no
// cluster multicast). Both fill the same stage bytes; smem_desc / smem_desc_mn read them. TA = 2:
// A K-major as 0, read into registers with ldmatrix and multiplied from there
// (sm90_consume_tile_rs; the product kernel's SM90_PRODUCT_A_RS).

// The producer thread: every TMA load of `tiles` vocabulary tiles from column col_first, for the
// token tile at row0, in the order the consumers use them, from ring position `ring` on. In a
// cluster of 2 each block loads the half of C's box at its rank, multicast to both (map_c then has
// boxes of 128 rows).
template <int TA = 0, int TB = 0, int BN = SM90_TILE_N, int SHARE_A = 0>
__device__ __forceinline__ void sm90_produce_run(const Sm90Pipe& pp, const TensorMap* map_e, const TensorMap* map_c,
                                                 int row0, int col_first, int tiles, int kt_count, Sm90Ring& ring) {
  static_assert(BN == SM90_TILE_N || TB, "a narrower tile only with B read MN-major (64-column boxes)");
  static_assert(!SHARE_A || TB, "a cluster shares A only where B is read MN-major (the product kernel)");
  // B's bytes a stage: the whole stage, or BN / 64 of its MN-major boxes
  constexpr u32 b_bytes = TB ? BN * SM90_TILE_K * 2 : SM90_B_STAGE_BYTES;
  const u32 blocks = cluster_size(), rank = cluster_rank();
  const int c_rows = BN / (int)blocks;
  const unsigned short all = (unsigned short)((1u << blocks) - 1);
  const u64 pa = l2_policy<SM90_L2_A>(), pb = l2_policy<SM90_L2_B>();
  for (int tile = 0; tile < tiles; ++tile) {
    const int col0 = col_first + tile * BN;
    for (int kt = 0; kt < kt_count; ++kt) {
      const int stage = ring.stage;
      // a fresh barrier's "previous phase" (parity 1) counts as complete: the first round
      // passes without waiting
      mbar_wait(&pp.empty[stage], ring.phase ^ 1);
      mbar_expect_tx(&pp.full[stage], SM90_A_STAGE_BYTES + b_bytes);
      unsigned char* a = pp.a + stage * SM90_A_STAGE_BYTES;
      if (SHARE_A && blocks > 1) {
        // the cluster's blocks compute tiles of the same rows (product.cu: a pair of column
        // tiles): each loads A's half at its rank — 64 rows, one consumer's — into both rings
        unsigned char* half = a + rank * (SM90_A_STAGE_BYTES / 2);
        if (TA == 1)
          tma_load_2d_multicast<SM90_L2_A>(half, map_e, &pp.full[stage], row0 + 64 * (int)rank, kt * SM90_TILE_K, all,
                                           pa);
        else
          tma_load_2d_multicast<SM90_L2_A>(half, map_e, &pp.full[stage], kt * SM90_TILE_K, row0 + 64 * (int)rank, all,
                                           pa);
      } else if (TA == 1) {
        tma_load_2d<SM90_L2_A>(a, map_e, &pp.full[stage], row0, kt * SM90_TILE_K, pa);
        tma_load_2d<SM90_L2_A>(a + SM90_MN_BOX_BYTES, map_e, &pp.full[stage], row0 + 64, kt * SM90_TILE_K, pa);
      } else {
        tma_load_2d<SM90_L2_A>(a, map_e, &pp.full[stage], kt * SM90_TILE_K, row0, pa);
      }
      unsigned char* b = pp.b + stage * SM90_B_STAGE_BYTES;
      if (TB) {
#pragma unroll
        for (int j = 0; j < BN / 64; ++j)
          tma_load_2d<SM90_L2_B>(b + j * SM90_MN_BOX_BYTES, map_c, &pp.full[stage], col0 + 64 * j, kt * SM90_TILE_K, pb);
      } else if (blocks == 1) {
        tma_load_2d<SM90_L2_B>(b, map_c, &pp.full[stage], kt * SM90_TILE_K, col0, pb);
      } else {
        tma_load_2d_multicast<SM90_L2_B>(b + rank * (SM90_B_STAGE_BYTES / 2), map_c, &pp.full[stage],
                                         kt * SM90_TILE_K, col0 + (int)rank * c_rows, all, pb);
      }
      ring.advance();
    }
  }
}

// The producer of a block: its run of vocabulary tiles for each of its token tiles.
template <int TA = 0, int TB = 0, int BN = SM90_TILE_N, int SHARE_A = 0, class Tiles>
__device__ __forceinline__ void sm90_produce(const Sm90Pipe& pp, const TensorMap* map_e, const TensorMap* map_c,
                                             const Tiles& tt, int col_first, int tiles, int kt_count) {
  tma_prefetch_map(map_e);
  tma_prefetch_map(map_c);
  Sm90Ring ring;
  for (int x = tt.first; x < tt.end; x += tt.stride)
    sm90_produce_run<TA, TB, BN, SHARE_A>(pp, map_e, map_c, tt.row0(x), tt.col0(x, col_first), tiles, kt_count,
                                          ring);
}

// Main-loop variants (src/geometry.rs Sm90Mainloop, FLCE_SM90_MAINLOOP; skew 0, inflight 1 by default):
// SM90_CONSUMER_SKEW S — consumer 1 starts only after consumer 0 has issued its first S k-steps
// (named barrier 2), so that later one consumer's epilogue runs while the other still issues
// wgmma instead of both epilogues leaving the tensor cores idle together. Consumer 0 cannot run
// more than the ring's stages ahead (a stage is refilled only when both released it), hence
// S ≤ SM90_RING_STAGES: the first SM90_RING_STAGES stages are loaded without waiting on `empty`.
// SM90_MMA_INFLIGHT 1 — a consumer waits for its previous k-step's wgmma group only (wait_group
// 1) and releases that step's stage, so its next wait on `full` overlaps the tensor cores' work.
#ifndef SM90_CONSUMER_SKEW
#define SM90_CONSUMER_SKEW 0
#endif
#ifndef SM90_MMA_INFLIGHT
#define SM90_MMA_INFLIGHT 1
#endif
static_assert(SM90_CONSUMER_SKEW <= SM90_RING_STAGES, "consumer 0 may lead by at most the ring's stages");

__device__ __forceinline__ void wgmma_wait_one() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }

// Consumer 0 → consumer 1: "I have issued my first SM90_CONSUMER_SKEW k-steps" (named barrier 2,
// 256 threads: consumer 0's 128 arrive, consumer 1's 128 wait).
__device__ __forceinline__ void skew_arrive() { asm volatile("bar.arrive 2, 256;" ::: "memory"); }
__device__ __forceinline__ void skew_wait() { asm volatile("bar.sync 2, 256;" ::: "memory"); }

// Release a stage to the producer (one thread of the warpgroup; every block of the cluster).
__device__ __forceinline__ void release_stage(const Sm90Pipe& pp, int stage, bool releaser, u32 blocks) {
  if (!releaser) return;
  if (blocks == 1) {
    mbar_arrive(&pp.empty[stage]);
  } else {
    for (u32 cta = 0; cta < blocks; ++cta) mbar_arrive_cluster(&pp.empty[stage], cta);
  }
}

// TA = 2 (the product kernel's K-major A through registers, SM90_PRODUCT_A_RS: the first step
// towards products that form their A from compact logits, journal v51, which measured slower,
// v52; the variant stays as a measurement): one tile's k-loop.
// Each k-step loads A's fragments of the consumer's 64 rows from the stage's K-major box with
// ldmatrix (128-byte swizzle: row r's 16-byte chunk c at r·128 + ((c ^ (r & 7)) << 4)), then
// issues its four wgmma with A from registers and waits for them before the next k-step's loads:
// ptxas serialises every wgmma of a function where other instructions define a wgmma's input
// registers while any group is in flight (C7513 — a second register buffer loaded under the
// previous group, CUTLASS's RS order, drew it), so this warpgroup's tensor-core work has a gap
// each k-step that the other consumer's groups fill. The stage is released once its group is
// done. No skew (Sm90Mainloop::parse refuses prs=1 with one: consumer 1 would wait for it).
// A loop of its own: folded into sm90_consume_run's as `if constexpr` branches it changed the
// default forward, G and product kernels' SASS (scripts/tools/sass-diff.sh: 6 of 24 cubins).
template <int TB, int BN>
__device__ __forceinline__ void sm90_consume_tile_rs(const Sm90Pipe& pp, u32 a0, const SmemDescBase& desc_b,
                                                     int kt_count, float (&acc)[BN / 2], Sm90Ring& ring,
                                                     bool releaser, u32 blocks) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
  const int r = 16 * warp + (lane & 15);  // the row this lane addresses (ldmatrix: lanes 16–31 the k + 8 half)
  u32 off[SM90_TILE_K / 16];
#pragma unroll
  for (int k = 0; k < SM90_TILE_K / 16; ++k) off[k] = r * 128 + (((2 * k + (lane >> 4)) ^ (r & 7)) << 4);
  for (int kt = 0; kt < kt_count; ++kt) {
    const int stage = ring.stage;
    mbar_wait(&pp.full[stage], ring.phase);
    const u32 a = a0 + stage * SM90_A_STAGE_BYTES, b = stage * SM90_B_STAGE_BYTES;
    u32 f[SM90_TILE_K / 16][4];
#pragma unroll
    for (int k = 0; k < SM90_TILE_K / 16; ++k) ldmatrix_x4_shared(a + off[k], f[k]);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < SM90_TILE_K / 16; ++k)
      wgmma_m64nk16_rs<TB>(acc, f[k], desc_b.at(b + (TB ? 2048 : 32) * k), kt | k);
    wgmma_commit();
    wgmma_wait_all();
    release_stage(pp, stage, releaser, blocks);
    ring.advance();
  }
}

// A consumer warpgroup (`consumer` 0 or 1) over one run of tiles, from ring position `ring` on:
// for each tile, the k-loop into the accumulators, then epi.tile(acc, col0). `issued` counts
// consumer 0's k-steps until the skew is signalled (SM90_CONSUMER_SKEW).
template <int TA = 0, int TB = 0, int BN = SM90_TILE_N, class Epilogue>
__device__ __forceinline__ void sm90_consume_run(const Sm90Pipe& pp, int consumer, int col_first, int tiles,
                                                 int kt_count, Epilogue& epi, float (&acc)[BN / 2], Sm90Ring& ring,
                                                 int& issued) {
  const bool releaser = (threadIdx.x & 127) == 0;
  const u32 blocks = cluster_size();
  // stage 0's descriptors (this consumer's half of A); a stage's and a k-step's are offsets of them
  const u32 a0 = smem_u32(pp.a + consumer * (SM90_A_STAGE_BYTES / 2)), b0 = smem_u32(pp.b);
  const SmemDescBase desc_a(TA == 1 ? smem_desc_mn(a0) : smem_desc(a0)), desc_b(TB ? smem_desc_mn(b0) : smem_desc(b0));
  for (int tile = 0; tile < tiles; ++tile) {
    if constexpr (TA == 2) {
      sm90_consume_tile_rs<TB, BN>(pp, a0, desc_b, kt_count, acc, ring, releaser, blocks);
    } else {
#if SM90_MMA_INFLIGHT
      int pending = -1;  // the stage of the k-step whose wgmma group may still run
#endif
      for (int kt = 0; kt < kt_count; ++kt) {
        const int stage = ring.stage;
        mbar_wait(&pp.full[stage], ring.phase);
        const u32 a = stage * SM90_A_STAGE_BYTES, b = stage * SM90_B_STAGE_BYTES;  // from stage 0's
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < SM90_TILE_K / 16; ++k) {
          // a k16 step: 32 bytes along a K-major row, 16 rows of 128 bytes down an MN-major box
          const u64 da = desc_a.at(a + (TA == 1 ? 2048 : 32) * k);
          const u64 db = desc_b.at(b + (TB ? 2048 : 32) * k);
          wgmma_m64nk16<TA, TB>(acc, da, db, kt | k);
        }
        wgmma_commit();
#if SM90_MMA_INFLIGHT
        wgmma_wait_one();
        if (pending >= 0) release_stage(pp, pending, releaser, blocks);
        pending = stage;
#else
        wgmma_wait_all();
        release_stage(pp, stage, releaser, blocks);
#endif
#if SM90_CONSUMER_SKEW > 0
        if (consumer == 0 && issued < SM90_CONSUMER_SKEW && ++issued == SM90_CONSUMER_SKEW) skew_arrive();
#endif
        ring.advance();
      }
#if SM90_MMA_INFLIGHT
      wgmma_wait_all();
      if (pending >= 0) release_stage(pp, pending, releaser, blocks);
#endif
#if SM90_CONSUMER_SKEW > 0
      // a tile of fewer k-steps than the skew: signal before the epilogue (an epilogue may wait on
      // both consumers: grad.cu's column sums)
      if (consumer == 0 && issued < SM90_CONSUMER_SKEW) {
        issued = SM90_CONSUMER_SKEW;
        skew_arrive();
      }
#endif
    }
    epi.tile(acc, col_first + tile * BN);
  }
}

// A consumer of a block: for each of its steps (token tiles), epi.begin_rows(tt.epilogue_rows(x)),
// the run of vocabulary tiles, epi.end_rows(…) (the epilogue's per-token-tile state: row
// statistics, coefficients; a schedule whose steps are single tiles says which token tile, or
// passes the step on: Sm90ProductTiles).
template <int TA = 0, int TB = 0, int BN = SM90_TILE_N, class Tiles, class Epilogue>
__device__ __forceinline__ void sm90_consume(const Sm90Pipe& pp, int consumer, const Tiles& tt, int col_first,
                                             int tiles, int kt_count, Epilogue& epi) {
  float acc[BN / 2];
  Sm90Ring ring;
  int issued = 0;
#if SM90_CONSUMER_SKEW > 0
  if (consumer == 1) skew_wait();
#endif
  for (int x = tt.first; x < tt.end; x += tt.stride) {
    // the last tile's values are dead (its first k-step overwrites them): zeros the compiler can
    // rematerialise, so the epilogue's per-token-tile loads do not spill 128 live accumulators
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    epi.begin_rows(tt.epilogue_rows(x));
    sm90_consume_run<TA, TB, BN>(pp, consumer, tt.col0(x, col_first), tiles, kt_count, epi, acc, ring, issued);
    epi.end_rows(tt.epilogue_rows(x));
  }
#if SM90_CONSUMER_SKEW > 0
  // a block without tiles: consumer 1 still waits for the signal
  if (consumer == 0 && issued < SM90_CONSUMER_SKEW) skew_arrive();
#endif
}

// The consumers' own barrier (named barrier 1, 256 threads): the producer warpgroup never joins.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, 256;" ::: "memory"); }


// Register budgets after the warpgroup split (setmaxnreg, executed by every thread of a
// warpgroup): the producer gives registers back, the consumers take them — 128 × 40 + 256 × 232
// = 64,512 of the SM's 65,536, the block's 384 × 168 at launch.
__device__ __forceinline__ void producer_registers() { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); }
__device__ __forceinline__ void consumer_registers() { asm volatile("setmaxnreg.inc.sync.aligned.u32 232;"); }

// The block's warp-specialised body, common to every sm90 kernel: after the barriers and the
// epilogue's shared state are initialised, the producer warpgroup gives its registers back and
// its thread 0 issues every TMA load; each consumer warpgroup takes its registers and runs
// `consume(consumer)` (0 or 1: the main loop with the kernel's epilogue, and whatever follows it).
// SHARE_A 1: the blocks of a cluster share A's box (each multicasts its half) and load their own
// B; 0: they share B's (the forward's and G's C box), each loading its own A. `helpers(w)`, where
// given, runs on the producer warpgroup's other three warps (w = 0..2, at the producer's register
// budget): the forward's fold off the MMA warpgroups (SM90_STAGED_FOLD, forward_staged.cuh).
// (a helper type says kActive: without one the kernels compile to the code of a main loop with
// no helpers at all)
struct Sm90NoHelpers {
  static constexpr bool kActive = false;
  __device__ __forceinline__ void operator()(int) const {}
};
template <int TA = 0, int TB = 0, int BN = SM90_TILE_N, int SHARE_A = 0, class Tiles, class Consume,
          class Helpers = Sm90NoHelpers>
__device__ __forceinline__ void sm90_run(const Sm90Pipe& pp, const TensorMap* map_e, const TensorMap* map_c,
                                         const Tiles& tt, int col_first, int tiles, int kt_count,
                                         Consume&& consume, const Helpers& helpers = Helpers{}) {
  sm90_start_sync();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) sm90_produce<TA, TB, BN, SHARE_A>(pp, map_e, map_c, tt, col_first, tiles, kt_count);
    if constexpr (Helpers::kActive) {
      if (threadIdx.x >= 32) helpers(threadIdx.x / 32 - 1);
    }
  } else {
    consumer_registers();
    consume(wg - 1);
  }
  sm90_end_sync();
}
