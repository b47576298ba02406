// flce sm90 family, forward: the TMA + wgmma logits main loop (sm90/mainloop.cuh) with an epilogue
// that folds each 128 × 256 logit tile into per-token statistics in registers. No logits in memory.
//
// flce_sm90_forward — a one-dimensional grid of slots × splits blocks and the rest's after them
//   (src/plan/sm90.rs: slots a multiple of the cluster; sm90_forward_block below), clusters of 1
//   or 2, SM90_THREADS (384) threads, dynamic smem SM90_FORWARD_SMEM_BYTES, one block per SM.
//   Block (g, s) owns the vocabulary tiles [s·tiles_per_split, (s+1)·tiles_per_split) of 256
//   columns (a rest block: its split of the tiles past the main grid's) and runs them for the
//   token tiles g, g + slots, … (tokens [128x, 128x + 128) of token tile x) one after another, the
//   ring carrying over between them. Each consumer
//   thread keeps the running (max, Σexp, Σw·z, argmax) of its two rows in registers; per tile it
//   applies bias and softcap, takes the row max over its 64 columns and then over the quad (the
//   4 lanes that hold the row), rescales its running sum once, adds the tile's exponentials and
//   writes the target logit when the target column falls in the tile (one writer per token). At
//   the end of each token tile the consumers write one packed RowStats per (split, token) to
//   `partials` [splits, N], merged by shared/finish.cu. A split with no tiles writes empty statistics.
//   Running statistics and targets of the block's rows sit in shared memory (see the epilogue).
//   Reads E, C (TMA), bias, class weights, targets; writes partials and target_logit. No atomics,
//   a fixed order everywhere: bitwise reproducible.
//
// NaN logits reach the loss through the sums (exp(NaN) is NaN); the running max ignores them.
// The argmax keeps the first column of the largest value (ties to the smaller index, as spec.rs).
//
// flce_sm90_forward_compact — the same kernel for one token chunk of the three-product pass
//   (src/pass/three_product.rs, plan::ThreeProductLogits::Compact; calls without a softcap: with a bias or smoothing,
//   the options' modules, src/planning.rs three_product_logits): besides the statistics it writes every logit
//   z (bias added) of the chunk as q = exp(z − m) in f16 to `q` [n, ldq], m the row's running
//   max after the tile (so q ≤ 1; taken in the FFMA form 2^(z·log2e − m2), types.cuh Exp2Ref,
//   q carries its common factor, ≤ 2⁻¹⁷ relative, far below f16's rounding, which the running
//   sum has removed), and m to `m_ref` [n, ld_mref] (one f32 per
//   row and 256-column tile; written by the row's quad leader). The exponentials are the ones the
//   running sum adds anyway. A whole tile's q leaves through TMA stores (`map_q`): each consumer
//   warp writes 32 columns of its 16 rows at a time into one of its SM90_STORE_BOXES 1 KB boxes
//   (SM90_COMPACT_FORWARD_SMEM_BYTES: 8 warps' boxes, 1024-byte aligned, after the rows' state)
//   and one lane hands the box to the tensor-memory accelerator, so the stores drain under the
//   next tiles' main loop instead of holding the warps (wgmma.cuh, sm90_store_warp_rows_tma); the
//   last, partial tile's q leaves as 4-byte f16x2 words straight from the accumulators.
//   kernels/sm90/three_product_grad.cu turns q into G in place.
//
// Both kernels fold off the MMA warpgroups by default (SM90_STAGED_FOLD 1:
// sm90/forward_staged.cuh; the module's ring is then 3 stages); the compact kernel in the
// registers described above with FLCE_SM90_MAINLOOP=fold=2, both with fold=0 (journal v39,
// v42).
//
// Host side: src/family/sm90.rs; tests: tests/gpu/ (the fused family on an sm_90a GPU; the
// three-product pass for the compact kernel).
#define SM90_RING_STAGES SM90_FORWARD_STAGES  // 3 with the fold staged (its 64 KB), else SM90_STAGES
#include "sm90/mainloop.cuh"

// The logit options this module's forward is specialised for, set by the host (compile.rs,
// compile_variant) for calls with a bias, softcap or smoothing: 1 bias, 2 softcap, 4 smoothing.
// Its whole tiles then fold them in at compile time, with no test per element (a test around each
// element's transform is a branch per element that serialises the tile: journal v27; the
// softcap-only fold alone compiles to 0 spill bytes). -1 (the default module): tested at run time.
#ifndef FLCE_LOGIT_OPTS
#define FLCE_LOGIT_OPTS -1
#endif

// The logit options OPTS (FLCE_LOGIT_OPTS's bits) applied to the whole tile before the row folds,
// column by column (one bias and one class weight load per column serve thread t's two rows),
// with Σ w·z of each row (smoothing) in the same loop. Folding them into each row's loop instead
// had the compiler hold a row's 64 bias or weight values across both rows: 540–2548 spill bytes
// per module (v29). Columns past the vocabulary (!FULL) become -inf and add no w·z. The values
// and the order of every sum are the row loop's: the results are bitwise the same. (Also the
// staged fold's consumers', forward_staged.cuh.)
template <int OPTS, bool FULL>
__device__ __forceinline__ void apply_logit_options(const LogitParams& p, int t, float (&acc)[128], int col0,
                                                  float (&wsum)[2]) {
  const int v = p.k.v;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int col = col0 + 8 * j + 2 * t + q;
      const bool in = FULL || col < v;
      const int cc = in ? col : 0;
      const float b = (OPTS & 1) ? to_f32(p.bias[cc]) : 0.0f;
      const float w = (OPTS & 4) ? class_weight(p.class_w, cc) : 0.0f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float z = acc[4 * j + 2 * h + q];
        if (OPTS & 1) z += b;
        if (OPTS & 2) z = softcap_logit(z, p.k.softcap);
        if (!FULL) z = in ? z : FLCE_NEG_INF;
        acc[4 * j + 2 * h + q] = z;
        if (OPTS & 4) wsum[h] += in ? w * z : 0.0f;
      }
    }
  }
}

// The running statistics of each row live in shared memory (one packed RowStats per row, read
// and written by the row's quad leader only; the quad gets the running max by shuffle): 10
// registers fewer than keeping them in registers. ptxas allocates the consumers' code at their
// setmaxnreg budget (232, mainloop.cuh), not at the launch's 168: the default module's consumers
// use up to R229 and still reload a few values from local memory in the fold (sm_90a bf16,
// cuobjdump -sass; `cargo run -p flce-cuda --example resource_usage` writes the cubins).
template <bool COMPACT>
struct Sm90ForwardEpilogue {
  const LogitParams& p;
  const Sm90CompactForwardParams* cp;  // COMPACT only
  u32 q_boxes;                         // COMPACT only: this warp's SM90_STORE_BOXES q boxes (shared address)
  float* target_logit;
  float4* s_state;  // [SM90_TILE_M] running RowStats of the block's rows
  int* s_target;    // [SM90_TILE_M]
  float4* partials;  // this split's row of the partials: [N]
  int row0, rl0, t;  // the token tile's first token, the thread's first row in the block, lane % 4

  // A block moves between token tiles (src/plan/sm90.rs): the warp's rows (rl0, rl0 + 8 for the
  // quads' leaders: a warp's 16 rows are its own) start empty at each and leave their statistics
  // in the split's partials at its end.
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
  __device__ __forceinline__ void end_rows(int) {
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int rl = rl0 + 8 * h;
        if (row0 + rl < p.k.n) partials[row0 + rl] = s_state[rl];
      }
    }
    __syncwarp();  // s_state is reset by the next begin_rows
  }

  // Two specialisations: a whole tile of plain logits (no bias, softcap or smoothing: the common
  // case, every column valid), and the general one.
  __device__ __forceinline__ void tile(float (&acc)[128], int col0) {
#if FLCE_LOGIT_OPTS >= 0
    // (a module specialised for one set of logit options: launched for such calls only; its
    // compact kernel for sets without a softcap, src/planning.rs three_product_logits)
    if (col0 + SM90_TILE_N <= p.k.v)
      fold<false, FLCE_LOGIT_OPTS, true>(acc, col0);
    else
      fold<false, FLCE_LOGIT_OPTS, false>(acc, col0);
#else
    const bool plain = plain_logits(p);
    if (plain && col0 + SM90_TILE_N <= p.k.v)
      fold<true, -1, true>(acc, col0);
    else
      fold<false, -1, false>(acc, col0);
#endif
  }

  // FAST: every column of the tile is valid and z = x. OPTS >= 0: the logit options are OPTS
  // (FLCE_LOGIT_OPTS's bits), applied by apply_options before the rows fold; -1: the options and
  // the column tested per element unless FAST. FULL: every column is valid (FAST implies it).
  template <bool FAST, int OPTS, bool FULL>
  __device__ __forceinline__ void fold(float (&acc)[128], int col0) {
    const int v = p.k.v;
    float wsum[2] = {0.0f, 0.0f};
    // (the clamp only keeps the -1 instantiation well-formed: it never calls apply_options)
    if (OPTS >= 0) apply_logit_options<(OPTS < 0 ? 0 : OPTS), FULL>(p, t, acc, col0, wsum);
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
          if (!FAST && OPTS < 0) {
            z = col < v ? logit_transform(p, z, col) : FLCE_NEG_INF;
            acc[4 * j + 2 * h + q] = z;
          }
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
      // exp(z − new_m) as 2^(z·log2e − m2), one FFMA and the MUFU (types.cuh, Exp2Ref); the sum's
      // `fix` once per row
      const Exp2Ref ref = exp2_ref(new_m);
      float part = 0.0f;
      if (COMPACT) {
        // q = exp(z − new_m) of every column; the sum as below (all -inf: no sum, and the q of
        // NaN that a G from an lse of -inf has anyway). A whole tile keeps q in acc for
        // store_q_tma (the target logit taken first); a partial one stores its f16 pairs here.
        const int row = row0 + rl;
        if (FULL) write_target(acc, h, rl, col0);
        u16* qrow = cp->q + (size_t)row * cp->ldq + col0 + 2 * t;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const float e0 = exp2_mufu(fmaf(acc[4 * j + 2 * h], FLCE_LOG2E, -ref.m2));
          const float e1 = exp2_mufu(fmaf(acc[4 * j + 2 * h + 1], FLCE_LOG2E, -ref.m2));
          part += e0;
          part += e1;
          if (FULL) {
            acc[4 * j + 2 * h] = e0;
            acc[4 * j + 2 * h + 1] = e1;
          } else {
            const u32 pair = pack_f16_pair(e0, e1);
            if (row < p.k.n && col0 + 8 * j + 2 * t < p.k.v) *(u32*)(qrow + 8 * j) = pair;
          }
        }
        part = new_m == FLCE_NEG_INF ? 0.0f : part * ref.fix;
        if (t == 0 && row < p.k.n) cp->m_ref[(size_t)row * cp->ld_mref + col0 / SM90_TILE_N] = new_m;
      } else if (new_m != FLCE_NEG_INF) {
#pragma unroll
        for (int j = 0; j < 32; ++j)
#pragma unroll
          for (int q = 0; q < 2; ++q)
            part += exp2_mufu(fmaf(acc[4 * j + 2 * h + q], FLCE_LOG2E, -ref.m2));
        part *= ref.fix;
      }
      part += __shfl_xor_sync(0xffffffffu, part, 1);
      part += __shfl_xor_sync(0xffffffffu, part, 2);
      float wpart = wsum[h];
      if (!FAST && (OPTS < 0 ? p.k.label_smoothing > 0.0f : (OPTS & 4) != 0)) {
        if (OPTS < 0) {
#pragma unroll
          for (int j = 0; j < 32; ++j)
#pragma unroll
            for (int q = 0; q < 2; ++q) {
              const int col = col0 + 8 * j + 2 * t + q;
              if (col < v) wpart += class_weight(p.class_w, col) * acc[4 * j + 2 * h + q];
            }
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
      if (!(COMPACT && FULL)) write_target(acc, h, rl, col0);
    }
    if (COMPACT && FULL) store_q_tma(acc, col0);
  }

  // The target logit of row rl (half h of the thread's rows): written by the one thread that
  // holds its column.
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

  // COMPACT and FULL: q (in acc) of the warp's 16 rows as f16 pairs through TMA stores (wgmma.cuh,
  // sm90_store_warp_rows_tma; rows past N are the map's edge, not written).
  __device__ __forceinline__ void store_q_tma(const float (&acc)[128], int col0) {
    const int warp_row0 = row0 + rl0 - ((threadIdx.x & 31) >> 2);
    sm90_store_warp_rows_tma(acc, q_boxes, &cp->map_q, col0, warp_row0, l2_evict_first(),
                             [](float lo, float hi) { return pack_f16_pair(lo, hi); });
  }
};

// SM90_STAGED_FOLD (src/geometry.rs, FLCE_SM90_MAINLOOP's fold): 0 both forwards fold in their
// MMA warpgroups; 1 both fold off them (forward_staged.cuh; the default); 2 the plain forward only (the compact
// one's q stores then keep their per-warp boxes).
#ifndef SM90_STAGED_FOLD
#define SM90_STAGED_FOLD 0
#endif
#include "sm90/forward_staged.cuh"

// A block's share of the one-dimensional grid (abi.rs Sm90ForwardParams): block b < slots ·
// splits of the main grid runs split b / slots (tiles_per_split tiles from (b / slots) ·
// tiles_per_split) for the token tiles b % slots, b % slots + slots, …; a block of the rest
// (plan::Sm90Rest, the SMs the main grid leaves idle) the same over the tiles past the main
// grid's, rest_tiles_per_split a split, its partials after the main grid's. Neighbouring blocks
// are neighbouring slots of one split (both parts' slots are whole clusters): a pair walks the
// same vocabulary tiles.
struct Sm90ForwardBlock {
  Sm90TokenTiles tt;
  int tile_begin, tiles, split;
};
__device__ __forceinline__ Sm90ForwardBlock sm90_forward_block(const Sm90ForwardParams& fp) {
  const int tile_count = (fp.lp.k.v + SM90_TILE_N - 1) / SM90_TILE_N;
  const int cluster = (int)cluster_size();
  const int token_tiles = (fp.lp.k.n + SM90_TILE_M - 1) / SM90_TILE_M;
  const int main_blocks = fp.slots * fp.splits;
  const int b = blockIdx.x;
  const bool rest = b >= main_blocks;
  const int slots = rest ? fp.rest_slots : fp.slots;
  const int local = rest ? b - main_blocks : b;
  const int split = local / slots;
  const int per_split = rest ? fp.rest_tiles_per_split : fp.tiles_per_split;
  const int first_tile = rest ? fp.splits * fp.tiles_per_split : 0;
  Sm90ForwardBlock blk;
  blk.tt = Sm90TokenTiles{local % slots, slots, (token_tiles + cluster - 1) / cluster * cluster, 0};
  blk.tile_begin = first_tile + split * per_split;
  blk.tiles = max(0, min(blk.tile_begin + per_split, tile_count) - blk.tile_begin);
  blk.split = rest ? fp.splits + split : split;
  return blk;
}

template <bool COMPACT>
__device__ __forceinline__ void sm90_forward_body(const Sm90ForwardParams& fp, const Sm90CompactForwardParams* cp) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
  const LogitParams& p = fp.lp;
  const Sm90ForwardBlock blk = sm90_forward_block(fp);
  const Sm90TokenTiles& tt = blk.tt;
  const int tile_begin = blk.tile_begin, tiles = blk.tiles;
  const int kt_count = (p.k.d + SM90_TILE_K - 1) / SM90_TILE_K;

  float4* s_state = (float4*)pp.scratch;
  int* s_target = (int*)(s_state + SM90_TILE_M);
  constexpr bool kStaged = SM90_STAGED_FOLD == 1 || (SM90_STAGED_FOLD == 2 && !COMPACT);
  if constexpr (kStaged) {
    // the fold off the MMA warpgroups (forward_staged.cuh): the consumers stage, the producer
    // warpgroup's other warps fold
    const Sm90StagedScratch ss = sm90_staged_scratch(s_target);
    if (threadIdx.x == 0) {
      mbar_init(ss.staged, 2 * 128);
      mbar_init(ss.freed, 96);
    }
    sm90_init_barriers(pp);  // (its fence covers these barriers too)
    const Sm90FoldWarps<COMPACT> fold{p, cp, s_state, ss, fp.partials + (size_t)blk.split * fp.partials_ld, tt,
                                      tile_begin * SM90_TILE_N, tiles};
    sm90_run(
        pp, &fp.map_e, &fp.map_c, tt, tile_begin * SM90_TILE_N, tiles, kt_count,
        [&](int consumer) {
          const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
          Sm90StagedEpilogue<COMPACT> epi{p, fp.target_logit, s_target, ss};
          epi.rl0 = consumer * 64 + warp * 16 + (lane >> 2);
          epi.t = lane & 3;
          sm90_consume(pp, consumer, tt, tile_begin * SM90_TILE_N, tiles, kt_count, epi);
        },
        fold);
  } else {
    sm90_init_barriers(pp);
    sm90_run(pp, &fp.map_e, &fp.map_c, tt, tile_begin * SM90_TILE_N, tiles, kt_count, [&](int consumer) {
      const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
      // (the compact kernel's q boxes follow the rows' statistics and targets, 1024-byte aligned)
      const u32 boxes = ((smem_u32(s_target + SM90_TILE_M) + 1023) & ~1023u) +
                        (consumer * 4 + warp) * SM90_STORE_BOXES * SM90_STORE_BOX_BYTES;
      Sm90ForwardEpilogue<COMPACT> epi{p, cp, COMPACT ? boxes : 0u, fp.target_logit, s_state, s_target,
                                       fp.partials + (size_t)blk.split * fp.partials_ld};
      epi.rl0 = consumer * 64 + warp * 16 + (lane >> 2);
      epi.t = lane & 3;
      sm90_consume(pp, consumer, tt, tile_begin * SM90_TILE_N, tiles, kt_count, epi);
      if (COMPACT && lane == 0) bulk_wait_all();  // its q stores done before the block's shared memory goes
    });
  }
}

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_forward(const __grid_constant__ Sm90ForwardParams fp) {
  sm90_forward_body<false>(fp, nullptr);
}

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_forward_compact(const __grid_constant__ Sm90CompactForwardParams cp) {
  sm90_forward_body<true>(cp.fwd, &cp);
}
