// flce sm90 family, forward with its fold off the MMA warpgroups (SM90_STAGED_FOLD: the plain
// forward's by default — forward 0.952–0.983× of the in-register fold, H200, docs/journal.md
// v39 —, and the compact forward's, whose fold warps fold a row a thread:
// the three-product pass 0.974× of the compact fold in registers at the 16k loss, 0.985–0.995× at
// the model shapes, v42; FLCE_SM90_MAINLOOP=fold=2 keeps the compact one in registers).
//
// Today's forward folds each 128 × 256 logit tile into the rows' statistics in the consumer
// warpgroups, from their f32 accumulators, while the tensor cores idle (~6% of a tile at D 2048).
// Here the consumers keep only what must come from f32 — each row's tile max and the target
// logit — and stage d = f16(z − tile max) ≤ 0 of the whole tile in shared memory (64 KB: four
// 128-row × 64-column boxes, 128-byte swizzle, stmatrix); the producer warpgroup's three idle
// warps fold d into the running (max, Σexp, Σw·z, argmax) while the consumers run the next tile
// (Liger's SM90 scaled-CE forward stages f16 logits for a third warpgroup the same way). d's one
// rounding, |error| ≤ 2⁻¹¹·|z − tile max|, is small where p is large: a CPU model of the fold
// (journal v39) gives loss 1e-9–3e-8 relative, lse ≤ 3.2e-5 absolute, dE / dC as with the fold in
// f32 registers. The argmax is the first column with d = 0 (exactly the columns equal to the tile max,
// except near-ties closer than 3e-8 in rows whose max is below 0.5 in magnitude).
//
// The compact kernel's fold warps write q = f16(exp(d + tile max − m)) back over d and store the
// four boxes with TMA (map_q, boxes of 64 columns × 128 rows; rows past N and columns past V
// clipped), then m_ref. Shared memory: the ring is 3 stages here (SM90_FORWARD_STAGES), so
// that the staging fits; the other sm90 kernels keep SM90_STAGES.
//
// Synchronisation, per tile k of the block: the consumers wait on `freed` (parity (k & 1) ^ 1:
// the buffer's previous tile folded and, compact, stored) before staging, then all 256 arrive on
// `staged`; the fold warps wait on `staged` (parity k & 1), fold, and each of their 96 threads
// arrives on `freed` once done with the buffer (an mbarrier arrive releases the arriving thread's
// own accesses only: one arrive after a named barrier left racecheck reporting the consumers'
// next tile maxima as racing the fold's reads); in the compact kernel they first meet
// at named barrier 3 and one of them issues the TMA stores and arrives only once those have read
// the buffer. Rows: a thread per row (Sm90FoldWarps below: fold thread f owns rows f and f + 96),
// ~4k cycles a tile for the busiest fold warp, measured against the warp-per-row design's ~36k in
// journal v42.
#pragma once
#include "sm90/staging.cuh"

// Scratch after the forward's rows' statistics and targets: the tile maxima and Σw·z of the
// block's rows, the two barriers, then the staging (1024-byte aligned).
struct Sm90StagedScratch {
  float* tmax;   // [SM90_TILE_M]
  float* wsum;   // [SM90_TILE_M] (label smoothing)
  u64* staged;   // count 256: the consumers
  u64* freed;    // count 96: the fold warps' threads
  u32 staging;   // shared address of the four boxes
  unsigned char* staging_ptr;  // the same, as a generic pointer (the fold warps' loads and stores)
};
__device__ __forceinline__ Sm90StagedScratch sm90_staged_scratch(int* s_target) {
  Sm90StagedScratch s;
  s.tmax = (float*)(s_target + SM90_TILE_M);
  s.wsum = s.tmax + SM90_TILE_M;
  s.staged = (u64*)(s.wsum + SM90_TILE_M);  // 8-byte aligned: 2 × 128 floats after a 16-byte aligned start
  s.freed = s.staged + 1;
  s.staging = (smem_u32(s.freed + 1) + 1023) & ~1023u;
  s.staging_ptr = (unsigned char*)(s.freed + 1) + (s.staging - smem_u32(s.freed + 1));
  return s;
}

// The consumers' side: per tile, the options' transform (as the forward's fold), each row's tile
// max, the target logit, and d staged for the fold warps.
template <bool COMPACT>
struct Sm90StagedEpilogue {
  const LogitParams& p;
  float* target_logit;
  int* s_target;  // [SM90_TILE_M]
  Sm90StagedScratch ss;
  int row0, rl0, t;  // the token tile's first token, the thread's first row in the block, lane % 4
  u32 k = 0;         // tiles staged so far (the barriers' phases)

  __device__ __forceinline__ void begin_rows(int token_tile) {
    row0 = token_tile * SM90_TILE_M;
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rl = rl0 + 8 * h;
        s_target[rl] = row0 + rl < p.k.n ? p.targets[row0 + rl] : -1;
      }
    }
    __syncwarp();
  }
  __device__ __forceinline__ void end_rows(int) {}

  __device__ __forceinline__ void tile(float (&acc)[128], int col0) {
#if FLCE_LOGIT_OPTS >= 0
    if (col0 + SM90_TILE_N <= p.k.v)
      stage<false, FLCE_LOGIT_OPTS, true>(acc, col0);
    else
      stage<false, FLCE_LOGIT_OPTS, false>(acc, col0);
#else
    if (plain_logits(p) && col0 + SM90_TILE_N <= p.k.v)
      stage<true, -1, true>(acc, col0);
    else
      stage<false, -1, false>(acc, col0);
#endif
  }

  template <bool FAST, int OPTS, bool FULL>
  __device__ __forceinline__ void stage(float (&acc)[128], int col0) {
    const int v = p.k.v;
    float wsum[2] = {0.0f, 0.0f};
    // (the same transform as Sm90ForwardEpilogue::fold: the options, columns past V as -inf)
    if (OPTS >= 0) apply_logit_options<(OPTS < 0 ? 0 : OPTS), FULL>(p, t, acc, col0, wsum);
    float tmax[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = FLCE_NEG_INF;
#pragma unroll
      for (int j = 0; j < 32; ++j)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int col = col0 + 8 * j + 2 * t + q;
          float z = acc[4 * j + 2 * h + q];
          if (!FAST && OPTS < 0) {
            z = col < v ? logit_transform(p, z, col) : FLCE_NEG_INF;
            acc[4 * j + 2 * h + q] = z;
            if (p.k.label_smoothing > 0.0f && col < v) wsum[h] += class_weight(p.class_w, col) * z;
          }
          m = fmaxf(m, z);
        }
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      tmax[h] = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      write_target(acc, h, rl0 + 8 * h, col0);
      if (!FAST && (OPTS < 0 ? p.k.label_smoothing > 0.0f : (OPTS & 4) != 0)) {
        wsum[h] += __shfl_xor_sync(0xffffffffu, wsum[h], 1);
        wsum[h] += __shfl_xor_sync(0xffffffffu, wsum[h], 2);
      }
    }
    // the buffer's previous tile folded (a fresh barrier's phase before the first counts as done)
    mbar_wait(ss.freed, (k & 1) ^ 1);
    // d of the warp's 16 rows (the warp's first row in the block: rl0 less the lane's row)
    stage_warp_rows(ss.staging, rl0 - ((threadIdx.x & 31) >> 2), [&](int j, int h) {
      return pack_f16_pair(acc[4 * j + 2 * h] - tmax[h], acc[4 * j + 2 * h + 1] - tmax[h]);
    });
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        ss.tmax[rl0 + 8 * h] = tmax[h];
        ss.wsum[rl0 + 8 * h] = wsum[h];
      }
    }
    __syncwarp();            // (the warp's stmatrix, whose rows other lanes' registers fill, complete)
    mbar_arrive(ss.staged);  // (release: the staging and the maxima are visible to the fold warps)
    ++k;
  }

  // Sm90ForwardEpilogue::write_target's body: the target logit of row rl from the f32 tile. (One
  // free function for both changed the in-register forward's SASS throughout — ptxas scheduled it
  // anew —, so each epilogue keeps its own copy while both run: the compact forward's is the
  // in-register one.)
  __device__ __forceinline__ void write_target(const float (&acc)[128], int h, int rl, int col0) {
    const int tgt = s_target[rl];
    const unsigned rel = (unsigned)(tgt - col0);
    if (tgt >= 0 && rel < (unsigned)SM90_TILE_N && ((rel & 7) >> 1) == (unsigned)t) {
      float z = 0.0f;
#pragma unroll
      for (int j = 0; j < 32; ++j)
#pragma unroll
        for (int q = 0; q < 2; ++q)
          if (rel == (unsigned)(8 * j + 2 * t + q)) z = acc[4 * j + 2 * h + q];
      target_logit[row0 + rl] = z;
    }
  }
};

// The fold warps (the producer warpgroup's warps 1–3, `w` = 0..2): the consumers' tiles in their
// order, each row's running statistics in s_state, the partials at each token tile's end.
//
// A thread per row: fold thread f = 32w + lane owns rows f and f + 96 (< 128) — their running
// statistics, read and written by it alone — and folds each of its rows' 256 staged values itself,
// 8 (one 16-byte chunk) at a time. A warp's 32 lanes read 32 rows' same chunk: under the 128-byte
// swizzle those fall in 8 distinct bank groups, four 16-byte pieces each, the 4 wavefronts of
// any 512-byte warp access. So a row is independent work with no shuffles, and a thread's
// exponentials pipeline; the tile costs warp 0 (64 rows) 2 × 256 MUFU.EX2 a lane, ~4k cycles of
// its sub-partition's MUFU (4 lanes a cycle), where the main loop's tile takes ~32k at D 2048.
// (A warp per row is a ~300-cycle dependent chain a row: 43 rows take a fold warp ~36k cycles a
// tile, the whole main loop at D 2048, and the compact kernel's consumers waited on `freed` 7% of
// the time — ncu, H200, journal v42.)
template <bool COMPACT>
struct Sm90FoldWarps {
  static constexpr bool kActive = true;
  const LogitParams& p;
  const Sm90CompactForwardParams* cp;  // COMPACT only
  float4* s_state;                     // [SM90_TILE_M]
  Sm90StagedScratch ss;
  float4* partials;  // this split's row of the partials: [N]
  Sm90TokenTiles tt;
  int col_first, tiles;

  __device__ __forceinline__ void operator()(int w) const {
    const int f = 32 * w + (threadIdx.x & 31);
    u32 k = 0;
    for (int x = tt.first; x < tt.end; x += tt.stride) {
      const int row0 = tt.row0(x);
      for (int r = f; r < SM90_TILE_M; r += 96) s_state[r] = row_stats_pack(row_stats_empty());
      for (int tile = 0; tile < tiles; ++tile) {
        const int col0 = col_first + tile * SM90_TILE_N;
        mbar_wait(ss.staged, k & 1);
        for (int r = f; r < SM90_TILE_M; r += 96) fold_row(r, row0, col0);
        if (COMPACT) {
          fence_async_smem();  // q written over d, for the TMA stores
          fold_warps_sync();
          if (f == 0) tma_store_staging(&cp->map_q, ss.staging, col0, row0, l2_evict_first());
        }
        mbar_arrive(ss.freed);  // (release: this thread's reads of the staging and the maxima)
        ++k;
      }
      for (int r = f; r < SM90_TILE_M; r += 96)
        if (row0 + r < p.k.n) partials[row0 + r] = s_state[r];
    }
    if (COMPACT && f == 0) bulk_wait_all();
  }

  // The first column of row r's staged tile with d = 0 (the tile max's), for a new running max.
  __device__ __forceinline__ int first_tile_max(int r) const {
    for (int chunk = 0; chunk < SM90_TILE_N / 8; ++chunk) {
      const uint4 raw = *(const uint4*)(ss.staging_ptr + staged_offset(r, chunk));
      const u16* d = (const u16*)&raw;
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (f16_to_f32(d[i]) == 0.0f) return 8 * chunk + i;
    }
    return 0;  // (no d = 0: a row of NaN logits, whose statistics are NaN anyway)
  }

  // Row r of the staged tile: Σ exp(z − new_m) over its 256 columns in four sums (column 8j + i
  // into sum i / 2 % 4, in column order; a fixed order), and, compact, q = f16(exp(z − new_m))
  // written back over d.
  __device__ __forceinline__ void fold_row(int r, int row0, int col0) const {
    const float tmax = ss.tmax[r];
    float4 st = s_state[r];
    const float m_run = st.x, new_m = fmaxf(m_run, tmax);
    const bool none = new_m == FLCE_NEG_INF;
    const float c = none ? 0.0f : (tmax - new_m) * FLCE_LOG2E;
    const bool new_max = tmax > m_run;  // a new running max: its first column (rare after the first tiles)
    const int am = new_max ? col0 + first_tile_max(r) : 0;
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // two chunks a step, their exponentials issued before any is summed (one fold warp a
    // sub-partition: only the thread's own independent work hides the MUFU's latency)
#pragma unroll 2
    for (int chunk = 0; chunk < SM90_TILE_N / 8; chunk += 2) {
      uint4* at0 = (uint4*)(ss.staging_ptr + staged_offset(r, chunk));
      uint4* at1 = (uint4*)(ss.staging_ptr + staged_offset(r, chunk + 1));
      uint4 raw[2] = {*at0, *at1};
      float e[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const u16 h = ((const u16*)&raw[i / 8])[i % 8];
        e[i] = exp2_mufu(fmaf(f16_to_f32(h), FLCE_LOG2E, c));
      }
#pragma unroll
      for (int i = 0; i < 16; i += 2) {
        sum[(i / 2) % 4] += e[i];
        sum[(i / 2) % 4] += e[i + 1];
      }
      if (COMPACT) {
#pragma unroll
        for (int i = 0; i < 16; i += 2) ((u32*)raw)[i / 2] = pack_f16_pair(e[i], e[i + 1]);
        *at0 = raw[0];
        *at1 = raw[1];
      }
    }
    const float part = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    if (!none) st.y = (st.y == 0.0f ? 0.0f : st.y * fast_exp(m_run - new_m)) + part;
    st.z += ss.wsum[r];
    if (new_max) st.w = __int_as_float(am);
    st.x = new_m;
    s_state[r] = st;
    if (COMPACT && row0 + r < p.k.n) cp->m_ref[(size_t)(row0 + r) * cp->ld_mref + col0 / SM90_TILE_N] = new_m;
  }
};
