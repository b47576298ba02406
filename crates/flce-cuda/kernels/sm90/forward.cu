// flce sm90 family, forward: the TMA + wgmma logits main loop (sm90/mainloop.cuh) with an epilogue
// that folds each 128 × 256 logit tile into per-token statistics in registers. No logits in memory.
//
// flce_sm90_forward — grid (ceil(N/128) rounded up to the cluster, splits), clusters of 1 or 2, SM90_THREADS (384) threads, dynamic smem
//   SM90_FORWARD_SMEM_BYTES, one block per SM. Block (x, s) owns tokens [128x, 128x + 128) and the
//   vocabulary tiles [s·tiles_per_split, (s+1)·tiles_per_split) of 256 columns. Each consumer
//   thread keeps the running (max, Σexp, Σw·z, argmax) of its two rows in registers; per tile it
//   applies bias and softcap, takes the row max over its 64 columns and then over the quad (the
//   4 lanes that hold the row), rescales its running sum once, adds the tile's exponentials and
//   writes the target logit when the target column falls in the tile (one writer per token). At
//   the end the consumers write one packed RowStats per (split, token) to `partials` [splits,
//   N], merged by shared/finish.cu. A split with no tiles writes empty statistics.
//   Running statistics and targets of the block's rows sit in shared memory (see the epilogue).
//   Reads E, C (TMA), bias, class weights, targets; writes partials and target_logit. No atomics,
//   a fixed order everywhere: bitwise reproducible.
//
// NaN logits reach the loss through the sums (exp(NaN) is NaN); the running max ignores them.
// The argmax keeps the first column of the largest value (ties to the smaller index, as spec.rs).
//
// Host side: src/family/sm90.rs; tests: tests/gpu/ (the fused family on an sm_90a GPU).
#include "sm90/mainloop.cuh"

// The running statistics of each row live in shared memory (one packed RowStats per row, read
// and written by the row's quad leader only; the quad gets the running max by shuffle): 10
// registers fewer than keeping them in registers, which keeps the consumers within the 168 the
// launch allows (ptxas allocates for the whole kernel, not per setmaxnreg budget).
struct Sm90ForwardEpilogue {
  const LogitParams& p;
  float* target_logit;
  float4* s_state;  // [SM90_TILE_M] running RowStats of the block's rows
  int* s_target;    // [SM90_TILE_M]
  int row0, rl0, t;  // block's first token, the thread's first row in the block, lane % 4

  // The lanes schedule (flce_sm90_forward_lanes below) moves a block between token tiles: the
  // warp's rows (rl0, rl0 + 8: a warp's 16 rows are its own) start empty at each, and leave
  // their statistics at the segment's slot. The split grid initialises and writes them once.
  __device__ __forceinline__ void begin_rows(int token_tile) {
    row0 = token_tile * SM90_TILE_M;
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rl = rl0 + 8 * h;
        s_state[rl] = row_stats_pack(row_stats_empty());
        s_target[rl] = row0 + rl < p.k.n ? p.targets[row0 + rl] : -1;
      }
    }
    __syncwarp();
  }
  __device__ __forceinline__ void end_rows(float4* partials, int slot) {
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rl = rl0 + 8 * h;
        if (row0 + rl < p.k.n) partials[(size_t)slot * p.k.n + row0 + rl] = s_state[rl];
      }
    }
    __syncwarp();  // s_state is reset by the next begin_rows
  }

  // Two specialisations: a whole tile of plain logits (no bias, softcap or smoothing: the common
  // case, every column valid), and the general one.
  __device__ __forceinline__ void tile(float (&acc)[128], int col0) {
    const bool plain = plain_logits(p);
    if (plain && col0 + SM90_TILE_N <= p.k.v)
      fold<true>(acc, col0);
    else
      fold<false>(acc, col0);
  }

  // FAST: every column of the tile is valid and z = x.
  template <bool FAST>
  __device__ __forceinline__ void fold(float (&acc)[128], int col0) {
    const int v = p.k.v;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rl = rl0 + 8 * h;
      float tmax = FLCE_NEG_INF;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const int col = col0 + 8 * j + 2 * t + q;
          float z = acc[4 * j + 2 * h + q];
          if (!FAST) z = col < v ? logit_transform(p, z, col) : FLCE_NEG_INF;
          acc[4 * j + 2 * h + q] = z;
          tmax = fmaxf(tmax, z);
        }
      }
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
      float4 st = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (t == 0) st = s_state[rl];
      const float m_run = __shfl_sync(0xffffffffu, st.x, 0, 4);
      int am = 0x7fffffff;
      if (tmax > m_run) {
        // a new running max (rare after the first tiles): its first column, agreed by the quad
#pragma unroll
        for (int j = 31; j >= 0; --j)
#pragma unroll
          for (int q = 1; q >= 0; --q)
            if (acc[4 * j + 2 * h + q] == tmax) am = col0 + 8 * j + 2 * t + q;
        // quad-uniform, not warp-uniform: the shuffles name the quad only
        const unsigned quad = 0xFu << ((threadIdx.x & 31) & ~3);
        am = min(am, __shfl_xor_sync(quad, am, 1));
        am = min(am, __shfl_xor_sync(quad, am, 2));
      }
      const float new_m = fmaxf(m_run, tmax);
      float part = 0.0f;
      if (new_m != FLCE_NEG_INF) {
#pragma unroll
        for (int j = 0; j < 32; ++j)
#pragma unroll
          for (int q = 0; q < 2; ++q) part += fast_exp(acc[4 * j + 2 * h + q] - new_m);
      }
      part += __shfl_xor_sync(0xffffffffu, part, 1);
      part += __shfl_xor_sync(0xffffffffu, part, 2);
      float wpart = 0.0f;
      if (!FAST && p.k.label_smoothing > 0.0f) {
#pragma unroll
        for (int j = 0; j < 32; ++j)
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int col = col0 + 8 * j + 2 * t + q;
            if (col < v) wpart += class_weight(p.class_w, col) * acc[4 * j + 2 * h + q];
          }
        wpart += __shfl_xor_sync(0xffffffffu, wpart, 1);
        wpart += __shfl_xor_sync(0xffffffffu, wpart, 2);
      }
      if (t == 0) {
        if (new_m != FLCE_NEG_INF) st.y = (st.y == 0.0f ? 0.0f : st.y * fast_exp(m_run - new_m)) + part;
        st.z += wpart;
        if (tmax > m_run) st.w = __int_as_float(am);
        st.x = new_m;
        s_state[rl] = st;
      }
      // the target logit: written by the one thread that holds its column
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
  }
};

#ifndef SM90_FORWARD_LANES
#define SM90_FORWARD_LANES 0
#endif
#if SM90_FORWARD_LANES
static_assert(SM90_CONSUMER_SKEW == 0, "the lanes schedule runs without the consumer skew");

// The lanes-and-helpers schedule (src/plan/forward.rs Sm90Lanes; a variant measured against the
// split grid, compiled instead of it with FLCE_SM90_MAINLOOP=lanes=1): grid lanes + helpers, one
// dimension, no clusters; with no helpers it is the split grid (each lane runs all its tiles).
// Block b < lanes runs lane b — token tile b % T, vocabulary split b / T (T token tiles),
// `lane_tiles` 256-column tiles from split·lane_tiles — for its first `main_tiles` tiles, its
// partial at slot split; helper h runs the rest of lanes [h·lanes/helpers, (h+1)·lanes/helpers)
// one after another, each lane's partial at slot lane_splits + split (written even when the rest
// is empty). The ring, the accumulators and the consumers' state carry over from lane to lane.
// Sm90Lanes::parts computes the same parts on the host (its tests: every tile once, every slot
// once).
__device__ __forceinline__ void flce_sm90_forward_lanes(const Sm90ForwardParams& fp, const Sm90Pipe& pp) {
  const LogitParams& p = fp.lp;
  const int token_tiles = (p.k.n + SM90_TILE_M - 1) / SM90_TILE_M;
  const int tiles = (p.k.v + SM90_TILE_N - 1) / SM90_TILE_N;
  const int kt_count = (p.k.d + SM90_TILE_K - 1) / SM90_TILE_K;
  const int lanes = token_tiles * fp.lane_splits, b = blockIdx.x;
  const bool helper = b >= lanes;
  const int first_lane = helper ? (int)((long long)(b - lanes) * lanes / fp.helpers) : b;
  const int end_lane = helper ? (int)((long long)(b - lanes + 1) * lanes / fp.helpers) : b + 1;
  // lane → (token tile, first tile, tile count, slot) of this block's part of it
  auto part = [&](int lane, int& token_tile, int& t0, int& count, int& slot) {
    const int split = lane / token_tiles;
    token_tile = lane % token_tiles;
    const int begin = split * fp.lane_tiles, end = min(begin + fp.lane_tiles, tiles);
    const int cut = min(begin + fp.main_tiles, end);
    t0 = helper ? cut : begin;
    count = max(0, (helper ? end : cut) - t0);
    slot = helper ? fp.lane_splits + split : split;
  };

  float4* s_state = (float4*)pp.scratch;
  int* s_target = (int*)(s_state + SM90_TILE_M);
  sm90_init_barriers(pp);
  sm90_start_sync();
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&fp.map_e);
      tma_prefetch_map(&fp.map_c);
      Sm90Ring ring;
      for (int lane = first_lane; lane < end_lane; ++lane) {
        int x, t0, count, slot;
        part(lane, x, t0, count, slot);
        sm90_produce_run(pp, &fp.map_e, &fp.map_c, x * SM90_TILE_M, t0 * SM90_TILE_N, count, kt_count, ring);
      }
    }
  } else {
    consumer_registers();
    const int consumer = wg - 1, lane_id = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
    Sm90ForwardEpilogue epi{p, fp.target_logit, s_state, s_target, 0};
    epi.rl0 = consumer * 64 + warp * 16 + (lane_id >> 2);
    epi.t = lane_id & 3;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    Sm90Ring ring;
    int issued = 0;
    for (int lane = first_lane; lane < end_lane; ++lane) {
      int x, t0, count, slot;
      part(lane, x, t0, count, slot);
      epi.begin_rows(x);
      sm90_consume_run(pp, consumer, t0 * SM90_TILE_N, count, kt_count, epi, acc, ring, issued);
      epi.end_rows(fp.partials, slot);
    }
  }
  sm90_end_sync();
}
#endif

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_forward(const __grid_constant__ Sm90ForwardParams fp) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
#if SM90_FORWARD_LANES
  flce_sm90_forward_lanes(fp, pp);
#else
  const LogitParams& p = fp.lp;
  const int row0 = blockIdx.x * SM90_TILE_M;
  const int tile_count = (p.k.v + SM90_TILE_N - 1) / SM90_TILE_N;
  const int tile_begin = blockIdx.y * fp.tiles_per_split;
  const int tiles = max(0, min(tile_begin + fp.tiles_per_split, tile_count) - tile_begin);
  const int kt_count = (p.k.d + SM90_TILE_K - 1) / SM90_TILE_K;

  float4* s_state = (float4*)pp.scratch;
  int* s_target = (int*)(s_state + SM90_TILE_M);
  sm90_init_barriers(pp);
  for (int i = threadIdx.x; i < SM90_TILE_M; i += SM90_THREADS) {
    s_state[i] = row_stats_pack(row_stats_empty());
    s_target[i] = row0 + i < p.k.n ? p.targets[row0 + i] : -1;
  }
  // (sm90_run's body written out: through the helper's lambda ptxas allocates this kernel
  // differently — an 8-byte larger stack frame for the general epilogue's spills — so moving it
  // waits for a device run that measures it)
  sm90_start_sync();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    producer_registers();
    if (threadIdx.x == 0) sm90_produce(pp, &fp.map_e, &fp.map_c, row0, tile_begin * SM90_TILE_N, tiles, kt_count);
  } else {
    consumer_registers();
    const int consumer = wg - 1, lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
    Sm90ForwardEpilogue epi{p, fp.target_logit, s_state, s_target, row0};
    epi.rl0 = consumer * 64 + warp * 16 + (lane >> 2);
    epi.t = lane & 3;
    sm90_consume(pp, consumer, tile_begin * SM90_TILE_N, tiles, kt_count, epi);
    consumers_sync();
    const int i = threadIdx.x - 128;
    if (i < SM90_TILE_M && row0 + i < p.k.n) fp.partials[(size_t)blockIdx.y * p.k.n + row0 + i] = s_state[i];
  }
  sm90_end_sync();
#endif
}
