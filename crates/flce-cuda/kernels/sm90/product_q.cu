// flce sm90 family: flce_sm90_product_q — the three-product pass's dE for one token chunk with G
// formed from the compact logits inside the product (docs/design-q-products.md), so that dE does
// not wait for, or read, the G pass's output:
//   dE[chunk] = G·C over the whole vocabulary, rounded once to the input dtype, where
//   G_j = p_scale·exp(m − lse)·q_j                 (q = exp(z − m) in f16, m per row and
//                                                  256-column tile: the compact forward's)
//   G_t = p_scale·exp(z_t − lse) − target coeff.   at the target, from its exact f32 logit
// — the f32 formulas of flce_grad_from_compact (step_grad.cu, the default module: no bias,
// softcap or smoothing; z-loss and class weights are in the rows' coefficients), each value
// rounded to the input dtype as that kernel rounds it, so G is bitwise the G pass's and dE
// bitwise that of flce_sm90_product on the G pass's output (tests/gpu/step.rs checks both).
//
// Algorithm: product.cuh's kernel (tiles, schedule, clusters, producer, epilogue) with A = q
// through an f16 tensor map (K-major boxes of 128 rows × 64 columns, 128-byte swizzle, zeros past
// the chunk's rows and past V). Each consumer warpgroup forms its own 64 rows of a stage in place
// before its wgmma read them (sm90_consume_q): while k-step kt's group runs, it waits for k-step
// kt + 1's stage, rewrites its half of A there — thread t the 16-byte chunks t + 128j (j < 4):
// rows t/8 + 16j, one logical chunk (t % 8) ^ (t/8 % 8) of 8 columns, f16 → f32, times the row's
// scale, rounded to bf16/f16 pairs, the target's column replaced by the row's exact value — fences
// the writes to the async proxy and syncs the warpgroup (named barrier 3 + consumer), then waits
// for kt's group (wait_group 1), releases its stage and issues kt + 1's. A tile's first stage is
// formed before its first group. Each thread keeps its 4 rows' coefficients, target and scale in
// registers: the scale p_scale·exp(m − lse) is renewed every 4 k-steps (a 256-column tile; m
// loaded a tile ahead). Rows past the chunk: scale 0, no target (their q loads as zeros, their
// outputs are not written). Reads q, m_ref, the rows' coefficients (targets, lse, token scales,
// scalars, class weights), target logits and C; writes the stages' A and dE's chunk rows only.
// m_ref must not alias dE (plan::MrefPlace::Workspace: the product writes dE's rows while other
// tiles read the maxima).
// Two earlier forms were slower (perf-notes v52): each consumer converting its fragments in
// registers between ldmatrix and an RS wgmma (no overlap: dE 1.2–1.55×), and the producer
// warpgroup's three idle warps forming the stages (96 threads at 40 registers: 1.9–2.3×).
//
// Host side: src/family/sm90_product.rs (product_de_from_q), src/step.rs; tests: tests/gpu/step.rs.
#include "sm90/product.cuh"

// Two values rounded to the input dtype and packed (the first in the low half) in one
// instruction: each rounded as from_f32 rounds it.
__device__ __forceinline__ u32 pack_elem_x2(float lo, float hi) {
  u32 r;
#if FLCE_DTYPE == FLCE_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

// One 16-byte chunk in place: 8 values of one row, times its scale; `target_at` the row's target
// column less the chunk's first (in 0..7: replaced by target_g).
__device__ __forceinline__ void form_chunk(uint4* at, float s, int target_at, float target_g) {
  const uint4 v = *at;
  u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) w[j] = pack_elem_x2(s * f16_to_f32((u16)w[j]), s * f16_to_f32((u16)(w[j] >> 16)));
  if ((unsigned)target_at < 8u) {  // (rare: the row's target in these 8 columns)
    const u32 g = (u32)from_f32(target_g);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (target_at == 2 * j) w[j] = (w[j] & 0xffff0000u) | g;
      if (target_at == 2 * j + 1) w[j] = (w[j] & 0x0000ffffu) | (g << 16);
    }
  }
  *at = make_uint4(w[0], w[1], w[2], w[3]);
}

// A consumer thread's 4 rows of the current tile (rows t/8 + 16j of the consumer's 64).
struct Sm90QRows {
  float p_scale[4], lse[4], target_g[4], scale[4], m_next[4];
  int target[4], m_at[4];  // target column (< 0: none); the row's m_ref offset (< 0: past the chunk)

  __device__ __forceinline__ void begin(const Sm90ProductQParams& pq, int first_row) {
    const CompactGradParams& q = pq.grad;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int cr = first_row + 16 * j;  // chunk row
      const int row = q.chunk.n0 + cr;
      const float4 cf = chunk_row_coeffs(q.lp, q.chunk, row, target[j]);
      const bool live = cr < pq.product.rows;
      p_scale[j] = cf.x;
      lse[j] = cf.w;
      m_at[j] = live ? cr * q.ld_mref : -1;
      m_next[j] = live ? q.m_ref[m_at[j]] : 0.0f;
      if (!live) target[j] = -1;
      // (as flce_grad_from_compact's target column, without smoothing or softcap)
      target_g[j] = live && target[j] >= 0 ? cf.x * fast_exp(q.target_logit[row] - cf.w) - cf.y : 0.0f;
    }
  }

  // k-step kt's stage, this thread's chunks (at + 2048j), once TMA has landed it
  __device__ __forceinline__ void form(const Sm90ProductQParams& pq, unsigned char* at, int kt, int logical) {
    if ((kt & 3) == 0) {
      // a new 256-column tile: the rows' scales (flce_grad_from_compact's), the next tile's m loaded
      const int next = (kt >> 2) + 1, vocab_tiles = (pq.product.k + SM90_TILE_N - 1) / SM90_TILE_N;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        scale[j] = m_at[j] >= 0 ? p_scale[j] * fast_exp(m_next[j] - lse[j]) : 0.0f;
        if (m_at[j] >= 0 && next < vocab_tiles) m_next[j] = pq.grad.m_ref[m_at[j] + next];
      }
    }
    const int col = kt * SM90_TILE_K + 8 * logical;
#pragma unroll
    for (int j = 0; j < 4; ++j) form_chunk((uint4*)(at + 2048 * j), scale[j], target[j] - col, target_g[j]);
  }
};

__device__ __forceinline__ void consumer_wg_sync(int consumer) {
  asm volatile("bar.sync %0, 128;" ::"r"(3 + consumer) : "memory");
}

// A consumer warpgroup over the block's tiles (mainloop.cuh's sm90_consume with the descriptor
// loop of TA = 0, TB = 1 and inflight 1, each stage's A formed a k-step ahead).
template <int BN>
__device__ __forceinline__ void sm90_consume_q(const Sm90ProductQParams& pq, const Sm90Pipe& pp, int consumer,
                                               const Sm90ProductTiles<BN>& tt, int kt_count) {
  const Sm90ProductParams& p = pq.product;
  const int t = threadIdx.x & 127;
  const bool releaser = t == 0;
  const u32 blocks = cluster_size();
  unsigned char* a_half = pp.a + consumer * (SM90_A_STAGE_BYTES / 2);
  const u32 a0 = smem_u32(a_half), b0 = smem_u32(pp.b);
  const SmemDescBase desc_a(smem_desc(a0)), desc_b(smem_desc_mn(b0));
  const int logical = (t & 7) ^ ((t >> 3) & 7);  // this thread's chunk's columns: 8·logical ..
  // stage s's chunks of this thread
  const auto chunks = [&](int s) { return a_half + s * SM90_A_STAGE_BYTES + 16 * t; };
  const auto form = [&](Sm90QRows& rows, int kt, const Sm90Ring& at) {
    mbar_wait(&pp.full[at.stage], at.phase);
    rows.form(pq, chunks(at.stage), kt, logical);
    fence_async_smem();  // the writes, to the wgmma (async proxy) of every warp of the warpgroup
    consumer_wg_sync(consumer);
  };
  Sm90ProductEpilogue<BN> epi{p, tt, consumer, 0};
  float acc[BN / 2];
  Sm90Ring ring;
  Sm90QRows rows;
  for (int x = tt.first; x < tt.end; x += tt.stride) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    epi.begin_rows(tt.epilogue_rows(x));
    rows.begin(pq, tt.row0(x) + 64 * consumer + (t >> 3));
    form(rows, 0, ring);
    int pending = -1;  // the stage of the k-step whose wgmma group may still run
    for (int kt = 0; kt < kt_count; ++kt) {
      const int stage = ring.stage;
      const u32 a = stage * SM90_A_STAGE_BYTES, b = stage * SM90_B_STAGE_BYTES;
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < SM90_TILE_K / 16; ++k)
        wgmma_m64nk16<0, 1>(acc, desc_a.at(a + 32 * k), desc_b.at(b + 2048 * k), kt | k);
      wgmma_commit();
      ring.advance();
      if (kt + 1 < kt_count) form(rows, kt + 1, ring);  // while this group runs
      wgmma_wait_one();
      if (pending >= 0) release_stage(pp, pending, releaser, blocks);
      pending = stage;
    }
    wgmma_wait_all();
    if (pending >= 0) release_stage(pp, pending, releaser, blocks);
    epi.tile(acc, tt.col0(x, 0));
    epi.end_rows(tt.epilogue_rows(x));
  }
}

// The second form (pq.form 1, FLCE_SM90_QFORM=regs): each consumer reads its A fragments with
// ldmatrix, forms them in registers (rows g and g + 8 of each warp's 16, columns 16k + 8·(i >> 1)
// + 2t, + 1 of slice k, register i) and multiplies from registers (wgmma RS), waiting for its own
// group before the next k-step's fragments (ptxas serialises every wgmma where registers a group
// may read are written while it runs: C7513). The two consumers take turns to issue (named
// barriers 5 and 6, FlashAttention-3's ping-pong): consumer c issues k-step kt's group only after
// the other issued its own, so their groups run one after the other on the tensor cores and each
// consumer forms its next fragments while the other's group runs (issued together, their
// instructions interleave, both finish together, and both then form while the tensor cores idle:
// the first measured form, perf-notes v52).
struct Sm90QFragRows {
  float p_scale[2], lse[2], target_g[2], scale[2], m_next[2];
  int target[2], m_at[2];

  __device__ __forceinline__ void begin(const Sm90ProductQParams& pq, int first_row) {
    const CompactGradParams& q = pq.grad;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int cr = first_row + 8 * h;
      const int row = q.chunk.n0 + cr;
      const float4 cf = chunk_row_coeffs(q.lp, q.chunk, row, target[h]);
      const bool live = cr < pq.product.rows;
      p_scale[h] = cf.x;
      lse[h] = cf.w;
      m_at[h] = live ? cr * q.ld_mref : -1;
      m_next[h] = live ? q.m_ref[m_at[h]] : 0.0f;
      if (!live) target[h] = -1;
      target_g[h] = live && target[h] >= 0 ? cf.x * fast_exp(q.target_logit[row] - cf.w) - cf.y : 0.0f;
    }
  }

  __device__ __forceinline__ void form(const Sm90ProductQParams& pq, u32 (&f)[SM90_TILE_K / 16][4], int kt) {
    if ((kt & 3) == 0) {
      const int next = (kt >> 2) + 1, vocab_tiles = (pq.product.k + SM90_TILE_N - 1) / SM90_TILE_N;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        scale[h] = m_at[h] >= 0 ? p_scale[h] * fast_exp(m_next[h] - lse[h]) : 0.0f;
        if (m_at[h] >= 0 && next < vocab_tiles) m_next[h] = pq.grad.m_ref[m_at[h] + next];
      }
    }
#pragma unroll
    for (int k = 0; k < SM90_TILE_K / 16; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float s = scale[i & 1];
        f[k][i] = pack_elem_x2(s * f16_to_f32((u16)f[k][i]), s * f16_to_f32((u16)(f[k][i] >> 16)));
      }
    }
    const int tq = threadIdx.x % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int at = target[h] - SM90_TILE_K * kt;  // the target's column within the k-step
      if (at < 0 || at >= SM90_TILE_K) continue;    // (most k-steps)
      const u32 g = (u32)from_f32(target_g[h]);
#pragma unroll
      for (int k = 0; k < SM90_TILE_K / 16; ++k) {
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int col = 16 * k + 8 * hi + 2 * tq;
          u32& pair = f[k][2 * hi + h];
          if (at == col) pair = (pair & 0xffff0000u) | g;
          if (at == col + 1) pair = (pair & 0x0000ffffu) | (g << 16);
        }
      }
    }
  }
};

__device__ __forceinline__ void turn_wait(int consumer) { asm volatile("bar.sync %0, 256;" ::"r"(5 + consumer) : "memory"); }
__device__ __forceinline__ void turn_pass(int consumer) {
  asm volatile("bar.arrive %0, 256;" ::"r"(6 - consumer) : "memory");  // the other consumer's turn
}

template <int BN>
__device__ __forceinline__ void sm90_consume_q_regs(const Sm90ProductQParams& pq, const Sm90Pipe& pp, int consumer,
                                                    const Sm90ProductTiles<BN>& tt, int kt_count) {
  const Sm90ProductParams& p = pq.product;
  const int lane = threadIdx.x & 31, warp = (threadIdx.x & 127) >> 5;
  const bool releaser = (threadIdx.x & 127) == 0;
  const u32 blocks = cluster_size();
  const u32 a0 = smem_u32(pp.a + consumer * (SM90_A_STAGE_BYTES / 2)), b0 = smem_u32(pp.b);
  const SmemDescBase desc_b(smem_desc_mn(b0));
  const int r = 16 * warp + (lane & 15);  // the row this lane addresses (ldmatrix: lanes 16–31 the k + 8 half)
  u32 off[SM90_TILE_K / 16];
#pragma unroll
  for (int k = 0; k < SM90_TILE_K / 16; ++k) off[k] = r * 128 + (((2 * k + (lane >> 4)) ^ (r & 7)) << 4);
  // consumer 0 issues first; consumer 1's last pass would have no taker
  if (consumer == 1) turn_pass(consumer);
  const int steps = tt.first < tt.end ? ((tt.end - tt.first + tt.stride - 1) / tt.stride) * kt_count : 0;
  int step = 0;
  Sm90ProductEpilogue<BN> epi{p, tt, consumer, 0};
  float acc[BN / 2];
  Sm90Ring ring;
  Sm90QFragRows rows;
  for (int x = tt.first; x < tt.end; x += tt.stride) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    epi.begin_rows(tt.epilogue_rows(x));
    rows.begin(pq, tt.row0(x) + 64 * consumer + 16 * warp + lane / 4);
    for (int kt = 0; kt < kt_count; ++kt, ++step) {
      const int stage = ring.stage;
      mbar_wait(&pp.full[stage], ring.phase);
      const u32 a = a0 + stage * SM90_A_STAGE_BYTES, b = stage * SM90_B_STAGE_BYTES;
      u32 f[SM90_TILE_K / 16][4];
#pragma unroll
      for (int k = 0; k < SM90_TILE_K / 16; ++k) ldmatrix_x4_shared(a + off[k], f[k]);
      rows.form(pq, f, kt);
      turn_wait(consumer);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < SM90_TILE_K / 16; ++k) wgmma_m64nk16_rs<1>(acc, f[k], desc_b.at(b + 2048 * k), kt | k);
      wgmma_commit();
      if (consumer == 0 || step + 1 < steps) turn_pass(consumer);
      wgmma_wait_all();
      release_stage(pp, stage, releaser, blocks);
      ring.advance();
    }
    epi.tile(acc, tt.col0(x, 0));
    epi.end_rows(tt.epilogue_rows(x));
  }
}

template <int BN>
__device__ __forceinline__ void sm90_product_q(const Sm90ProductQParams& pq, const Sm90Pipe& pp) {
  const Sm90ProductTiles<BN> tt = sm90_product_tiles<BN>(pq.product);
  const int kt_count = sm90_product_k_steps(pq.product);
  sm90_run<0, 1, BN, 1>(pp, &pq.product.map_a, &pq.product.map_b, tt, 0, 1, kt_count, [&](int consumer) {
    if (pq.form == 1)
      sm90_consume_q_regs<BN>(pq, pp, consumer, tt, kt_count);
    else
      sm90_consume_q<BN>(pq, pp, consumer, tt, kt_count);
  });
}

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_product_q(const __grid_constant__ Sm90ProductQParams pq) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
  sm90_init_barriers(pp);
  // (dE: A K-major, formed in place; tile_n 192 or 256, src/family/sm90_product.rs)
  if (pq.product.tile_n == 192)
    sm90_product_q<192>(pq, pp);
  else
    sm90_product_q<256>(pq, pp);
}
