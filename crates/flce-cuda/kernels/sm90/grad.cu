// flce sm90 family, backward: the logit-gradient tiles of one chunk, recomputed by the TMA + wgmma
// main loop (sm90/mainloop.cuh).
//
// The backward runs vocabulary-chunk-outer (src/plan/backward/, src/pass/backward.rs): for each
// chunk of tokens [n0, n_end) and vocabulary rows [v0, v_end) a family writes G = ∂L/∂x into the
// workspace, then cuBLAS turns it into dE and dC with f32 accumulation.
//
// flce_sm90_grad — grid (slots, ceil(tiles/tiles_per_cta)) (src/plan/sm90.rs: slots a multiple of
//   the cluster), SM90_THREADS (384) threads, dynamic smem SM90_GRAD_SMEM_BYTES. Block (g, y) owns
//   the 256-column tiles [y·tiles_per_cta, (y+1)·tiles_per_cta) from v0 and runs them for the
//   token tiles g, g + slots, … of the chunk (tokens n0 + [128x, 128x + 128) of token tile x) in
//   turn. Each consumer thread loads the row coefficients of its two rows (common/loss.cuh
//   row_coeffs) at each token tile, and per tile
//   forms ∂L/∂x_ij = (p_scale_i·exp(z_ij − lse_i) − smooth_i·w_j − [j = t_i]·target_i)·∂z/∂x in
//   registers and stores it (input dtype) to G [n_end − n0, ldg]; columns in [v_end, v0 + ldg) are
//   written as 0, none past v0 + ldg. Whole tiles leave through each warp's shared-memory
//   staging slice as 16-byte row pieces (store_staged), the last, partial one as 4-byte pairs.
//   When the bias gradient is wanted, each column's sum over the token tile's 128 rows (from the
//   unrounded values, in a fixed order: the 8 row groups of a warp by shuffles, then the 8 warps
//   through shared memory) goes to db_partial [row tiles, ldg].
//   No atomics: bitwise reproducible.
//
// By default (SM90_STAGED_GRAD, FLCE_SM90_MAINLOOP gfold=1) the default module stages every tile
// for the producer warpgroup's idle warps instead (sm90/grad_staged.cuh; the ring then 3 stages,
// SM90_GRAD_STAGES, in every module); gfold=0 keeps the code below for every tile.
//
// Host side: src/family/sm90.rs; tests: tests/gpu/ (the fused family on an sm_90a GPU).
#define SM90_RING_STAGES SM90_GRAD_STAGES  // 3 with G staged (its 64 KB), else SM90_STAGES
#include "sm90/mainloop.cuh"

// The logit options this module's G is specialised for (as in sm90/forward.cu: set by the host,
// compile.rs compile_variant, for calls with a bias, softcap or smoothing: 1 bias, 2 softcap,
// 4 smoothing): their terms are folded in at compile time, with no test per element. -1 (the
// default module): tested at run time.
#ifndef FLCE_LOGIT_OPTS
#define FLCE_LOGIT_OPTS -1
#endif

// G staged (grad_staged.cuh): the default module under gfold=1.
#if defined(SM90_STAGED_GRAD) && SM90_STAGED_GRAD && FLCE_LOGIT_OPTS < 0
#define SM90_GRAD_STAGING 1
#else
#define SM90_GRAD_STAGING 0
#endif

// The tiles' schedule. By default block (g, y) of the (slots, splits) grid runs the token tiles
// g, g + slots, … of the chunk, each over its run of vocabulary tiles (Sm90TokenTiles; the grid
// within an L2 budget, plan::grad_grid). With SM90_GRAD_ORDER (FLCE_SM90_MAINLOOP gorder=1, the
// default: docs/journal.md v45) and group_rows > 0, a step is one tile of a
// raster order over the chunk's token tiles × vocabulary tiles (group_rows token tiles, then the
// next vocabulary tile: plan::sm90_product_order, as the product kernel's) and block b of a
// one-wave grid takes steps b, b + gridDim.x, …: balanced to one tile, where the static grid's
// longest block can run several more than the average (Llama 3's first chunk: 39 against 36.4),
// with the operands of the tiles that run together shared through L2 all the same. group_rows 0
// in that module is the (slots, splits) grid's schedule at run time: the token-outer plan (no dC)
// keeps it (the order measured 3% slower there: family/sm90.rs grad_chunk). The staged default
// module only (grad_chunk orders plain calls only): in the option modules, which form G in the
// consumers' registers, the order's state spilled 100–170 bytes more.
#ifndef SM90_GRAD_ORDER
#define SM90_GRAD_ORDER 0
#endif
#define SM90_GRAD_ORDERED (SM90_GRAD_ORDER && SM90_GRAD_STAGING)
#if SM90_GRAD_ORDERED
struct Sm90GradOrder {
  // steps: first, first + stride, … below end (token tiles × vocabulary tiles; group_rows 0: the
  // block's token tiles, as Sm90TokenTiles, each over its run of vocabulary tiles)
  int first, stride, end;
  int row_tiles, col_tiles, group_rows, n0, v0;
  __device__ __forceinline__ int token_tile(int t) const {
    return group_rows > 0 ? sm90_raster_tile(t, row_tiles, col_tiles, group_rows).x : t;
  }
  __device__ __forceinline__ int row0(int t) const { return n0 + token_tile(t) * SM90_TILE_M; }
  __device__ __forceinline__ int col0(int t, int col_first) const {
    return group_rows > 0 ? v0 + sm90_raster_tile(t, row_tiles, col_tiles, group_rows).y * SM90_TILE_N : col_first;
  }
  // (the epilogue's begin_rows takes the step's token tile)
  __device__ __forceinline__ int epilogue_rows(int t) const { return token_tile(t); }
};
typedef Sm90GradOrder Sm90GradTiles;
#else
typedef Sm90TokenTiles Sm90GradTiles;
#endif

#if SM90_GRAD_STAGING
#include "sm90/grad_staged.cuh"
#endif

struct Sm90GradEpilogue {
  const LogitParams& p;
  const GradChunk& ch;
  float* s_db;  // [8 warps][SM90_TILE_N] column sums (when db is wanted)
  u32* s_stage;  // this warp's store staging: 16 rows of SM90_GRAD_STAGE_ROW_BYTES
  int token_tile;  // of the chunk: the db_partial row
  int warp_row0;  // the first of the warp's 16 rows
  int row[2];
  int tgt[2];
  float4 cf[2];  // p_scale, target coefficient, smooth coefficient, lse
  // exp(x − lse) as 2^(x·log2e − lse2) (types.cuh, Exp2Ref): lse2, and p_scale times its `fix`
  float lse2[2], p_scale2[2];
  int t, g, warp8;  // lane % 4, lane / 4, warp index among the 8 consumer warps
#if SM90_GRAD_STAGING
  u32 k = 0;  // tiles staged so far (the barriers' phases); s_db is the staging's first byte
#endif

  // The rows of token tile x of the chunk: the thread's two rows, their targets and coefficients.
  __device__ __forceinline__ void begin_rows(int x) {
    token_tile = x;
    warp_row0 = ch.n0 + x * SM90_TILE_M + warp8 * 16;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row[h] = warp_row0 + g + 8 * h;
      cf[h] = chunk_row_coeffs(p, ch, row[h], tgt[h]);
      const Exp2Ref ref = exp2_ref(cf[h].w);
      lse2[h] = ref.m2;
      p_scale2[h] = cf[h].x * ref.fix;
    }
  }
  __device__ __forceinline__ void end_rows(int) {}

  // Two specialisations, as in the forward: a whole tile of plain logits (no bias, softcap or
  // smoothing — z = x and ∂L/∂x = p_scale·exp(x − lse) − [j = t]·target — with every column
  // inside the chunk), and the general one. The split is not only arithmetic: the general
  // per-element code (bias loads, softcap, class weights) unrolled over the 128 values of a
  // thread made the kernel instruction-fetch bound (ncu: 60% of stalls waiting on instruction
  // fetch, 17% SM throughput: journal v10).
  __device__ __forceinline__ void tile(float (&acc)[128], int col0) {
#if FLCE_LOGIT_OPTS >= 0
    // (a module specialised for one set of logit options: launched for such calls only)
    if (col0 + SM90_TILE_N <= ch.v_end)
      grad_with_options<FLCE_LOGIT_OPTS, true>(acc, col0);
    else
      grad_with_options<FLCE_LOGIT_OPTS, false>(acc, col0);
#else
#if SM90_GRAD_STAGING
    // Every tile staged: the default module runs plain calls only (any bias, softcap or
    // smoothing selects its own module: runtime/grids.rs logit_opts_of; db comes with a bias),
    // and a path that also formed G in the registers, even one never taken, held more values
    // through the main loop — spilled accumulators, serialised wgmma (ptxas C7514).
    if (col0 + SM90_TILE_N <= ch.v_end)
      stage<true>(acc, col0);
    else
      stage<false>(acc, col0);
    return;
#else
    const bool plain = plain_logits(p);
    if (plain && col0 + SM90_TILE_N <= ch.v_end)
      grad<true>(acc, col0);
    else
      grad<false>(acc, col0);
#endif
#endif
    if (ch.db_partial) column_sums(acc, col0);
  }

  // The logit options known at compile time (OPTS, FLCE_LOGIT_OPTS's bits): logit_grad
  // (common/loss.cuh) with no test per element, column by column so that one bias and one class
  // weight load serve the thread's two rows (row by row, the compiler held a row's 64 loads across
  // both rows and spilled: v29). FULL: every column is inside the chunk, and G leaves through the
  // staging slices as the plain tiles' does (4-byte stores of column pairs spill less but ran
  // 1–4% slower: v29); if not, a column clamped into the chunk and a select (no branch), and
  // 4-byte stores.
  template <int OPTS, bool FULL>
  __device__ __forceinline__ void grad_with_options(float (&acc)[128], int col0) {
    bool live[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) live[h] = row[h] < ch.n_end;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int colp = col0 + 8 * j + 2 * t;
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int col = colp + q;
        const bool in = FULL || col < ch.v_end;
        const int cc = in ? col : ch.v0;
        const float b = (OPTS & 1) ? to_f32(p.bias[cc]) : 0.0f;
        const float w = (OPTS & 4) ? class_weight(p.class_w, cc) : 0.0f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float4 c = cf[h];
          float z = acc[4 * j + 2 * h + q];
          if (OPTS & 1) z += b;
          if (OPTS & 2) z = softcap_logit(z, p.k.softcap);
          float gx = p_scale2[h] * exp2_mufu(fmaf(z, FLCE_LOG2E, -lse2[h]));
          if (OPTS & 4) gx -= c.z * w;
          if (col == tgt[h]) gx -= c.y;
          if (OPTS & 2) gx *= softcap_slope(z, p.k.softcap);
          acc[4 * j + 2 * h + q] = (live[h] && in) ? gx : 0.0f;
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        elem_t* dst = ch.g_out + (size_t)(row[h] - ch.n0) * ch.ldg + (colp - ch.v0);
        if (!FULL && live[h] && colp - ch.v0 < ch.ldg) *(u32*)dst = pack_elem_pair(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      }
    }
    if (FULL) store_staged(acc, col0);
  }

  // FAST: every column of the tile is inside [v0, v_end) and the logits are plain; if not, the
  // options and the column are tested per element (the default module's general path).
  template <bool FAST>
  __device__ __forceinline__ void grad(float (&acc)[128], int col0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool live = row[h] < ch.n_end;
      const float4 c = cf[h];
      elem_t* dst_row = ch.g_out + (size_t)(row[h] - ch.n0) * ch.ldg + (col0 + 2 * t - ch.v0);
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int colp = col0 + 8 * j + 2 * t;
        float gv[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int col = colp + q;
          const float x = acc[4 * j + 2 * h + q];
          if (FAST) {
            gv[q] = p_scale2[h] * exp2_mufu(fmaf(x, FLCE_LOG2E, -lse2[h]));
            if (col == tgt[h]) gv[q] -= c.y;
          } else {
            gv[q] = (live && col < ch.v_end) ? logit_grad(p, x, col, tgt[h], c) : 0.0f;
          }
          acc[4 * j + 2 * h + q] = gv[q];
        }
        if (!FAST && live && colp - ch.v0 < ch.ldg) *(u32*)(dst_row + 8 * j) = pack_elem_pair(gv[0], gv[1]);
      }
    }
    if (FAST) store_staged(acc, col0);
  }

#if SM90_GRAD_STAGING
  // A tile of a plain launch for the helper warps (grad_staged.cuh): each row's p_scale2 and
  // target column, the target's G from its exact logit, and u = f16(x·log2e − lse2) of every
  // logit — -inf past the chunk's columns (!FULL), so that their G is 0.
  template <bool FULL>
  __device__ __forceinline__ void stage(const float (&acc)[128], int col0) {
    const Sm90GradStaging gs = sm90_grad_staging_at((unsigned char*)s_db);
    mbar_wait(gs.freed, (k & 1) ^ 1);  // the staging's last tile stored (a fresh barrier: done)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rl = warp8 * 16 + g + 8 * h;
      // (a target past the chunk's columns is another chunk's, also in a partial tile)
      const unsigned rel = FULL || tgt[h] < ch.v_end ? (unsigned)(tgt[h] - col0) : ~0u;
      if (t == 0) {
        gs.ps2[rl] = p_scale2[h];
        gs.trel[rl] = rel < (unsigned)SM90_TILE_N ? (int)rel : -1;
      }
      if (rel < (unsigned)SM90_TILE_N && ((rel & 7) >> 1) == (unsigned)t) {
        float x = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j)
#pragma unroll
          for (int q = 0; q < 2; ++q)
            if (rel == (unsigned)(8 * j + 2 * t + q)) x = acc[4 * j + 2 * h + q];
        gs.gt[rl] = p_scale2[h] * exp2_mufu(fmaf(x, FLCE_LOG2E, -lse2[h])) - cf[h].y;
      }
    }
    stage_warp_rows(gs.staging, warp8 * 16, [&](int j, int h) {
      float lo = fmaf(acc[4 * j + 2 * h], FLCE_LOG2E, -lse2[h]);
      float hi = fmaf(acc[4 * j + 2 * h + 1], FLCE_LOG2E, -lse2[h]);
      if (!FULL) {
        const int col = col0 + 8 * j + 2 * t;
        lo = col < ch.v_end ? lo : FLCE_NEG_INF;
        hi = col + 1 < ch.v_end ? hi : FLCE_NEG_INF;
      }
      return pack_f16_pair(lo, hi);
    });
    __syncwarp();            // (the warp's stmatrix and row values complete)
    mbar_arrive(gs.staged);  // (release: the staging and the rows' values visible to the helper warps)
    ++k;
  }
#endif

  // The FAST path's stores: G of the warp's 16 rows in 16-byte row pieces through its
  // shared-memory staging slice (wgmma.cuh, sm90_store_warp_rows_staged).
  __device__ __forceinline__ void store_staged(const float (&acc)[128], int col0) {
    elem_t* out = ch.g_out + (size_t)(warp_row0 - ch.n0) * ch.ldg + (col0 - ch.v0);
    sm90_store_warp_rows_staged(acc, s_stage, out, (size_t)ch.ldg, ch.n_end - warp_row0,
                                [](float lo, float hi) { return pack_elem_pair(lo, hi); });
  }

  // Σ over the token tile's 128 rows of each column, into db_partial[token_tile].
  __device__ __forceinline__ void column_sums(float (&acc)[128], int col0) {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        float c = acc[4 * j + q] + acc[4 * j + 2 + q];
#pragma unroll
        for (int off = 4; off <= 16; off <<= 1) c += __shfl_xor_sync(0xffffffffu, c, off);
        if (g == 0) s_db[warp8 * SM90_TILE_N + 8 * j + 2 * t + q] = c;
      }
    }
    consumers_sync();
    const int i = threadIdx.x - 128;  // 0..255: one column each
    const int col = col0 + i;
    // (a token tile past the chunk's rows, padding a cluster, has no db_partial row)
    if (col < ch.v_end && token_tile * SM90_TILE_M < ch.n_end - ch.n0) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < 8; ++w) sum += s_db[w * SM90_TILE_N + i];
      ch.db_partial[(size_t)token_tile * ch.ldg + (col - ch.v0)] = sum;
    }
    consumers_sync();  // s_db is rewritten by the next tile
  }
};

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_grad(const __grid_constant__ Sm90GradParams gp) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
  const LogitParams& p = gp.lp;
  const GradChunk& ch = gp.chunk;
  const int tile_count = (ch.v_end - ch.v0 + SM90_TILE_N - 1) / SM90_TILE_N;
  const int kt_count = (p.k.d + SM90_TILE_K - 1) / SM90_TILE_K;
#if SM90_GRAD_ORDERED
  // group_rows > 0: a one-wave grid (gridDim.y 1) over the raster order, a run of one tile a step;
  // 0: the (slots, splits) grid (unpaired: the module's launches are, grad_chunk)
  const int row_tiles = (ch.n_end - ch.n0 + SM90_TILE_M - 1) / SM90_TILE_M;
  const bool raster = gp.group_rows > 0;
  const int tile_begin = raster ? 0 : blockIdx.y * gp.tiles_per_cta;
  const int tiles = raster ? 1 : max(0, min(tile_begin + gp.tiles_per_cta, tile_count) - tile_begin);
  const int col_first = ch.v0 + tile_begin * SM90_TILE_N;
  const int steps = raster ? row_tiles * tile_count : row_tiles;
  const Sm90GradOrder tt{(int)blockIdx.x, (int)gridDim.x, steps, row_tiles, tile_count, gp.group_rows, ch.n0, ch.v0};
#else
  const Sm90TokenTiles tt = sm90_token_tiles(ch.n0, ch.n_end - ch.n0);
  const int tile_begin = blockIdx.y * gp.tiles_per_cta;
  const int tiles = max(0, min(tile_begin + gp.tiles_per_cta, tile_count) - tile_begin);
  const int col_first = ch.v0 + tile_begin * SM90_TILE_N;
#endif

#if SM90_GRAD_STAGING
  // (the epilogue's s_db is the staging's first byte: it stages every tile, so its column sums
  // and store slices go unused; grad_staged.cuh)
  unsigned char* scratch = sm90_grad_staging_base(pp.scratch);
  const Sm90GradStaging gs = sm90_grad_staging_at(scratch);
  if (threadIdx.x == 0) {
    mbar_init(gs.staged, 2 * 128);
    mbar_init(gs.freed, 96);
  }
  const Sm90GradHelpers helpers{ch, &gp.map_g, gs, tt, col_first, tiles};
#else
  unsigned char* scratch = pp.scratch;
  const Sm90NoHelpers helpers{};
#endif
  sm90_init_barriers(pp);  // (its fence covers the staging's barriers too)
  sm90_run(
      pp, &gp.map_e, &gp.map_c, tt, col_first, tiles, kt_count,
      [&](int consumer) {
        const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
        Sm90GradEpilogue epi{p, ch, (float*)scratch};
        epi.t = lane & 3;
        epi.g = lane >> 2;
        epi.warp8 = consumer * 4 + warp;
        epi.s_stage = (u32*)(scratch + 8 * SM90_TILE_N * 4 + epi.warp8 * 16 * SM90_GRAD_STAGE_ROW_BYTES);
        sm90_consume(pp, consumer, tt, col_first, tiles, kt_count, epi);
      },
      helpers);
}
