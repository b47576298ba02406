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
// Algorithm: product.cuh's kernel (tiles, schedule, clusters, epilogue) with A = q through an f16
// tensor map (K-major boxes, 128-byte swizzle, zeros past the chunk's rows and past V) read into
// registers (mainloop.cuh sm90_consume_tile_rs, TA = 2); between the loads and the wgmma each
// consumer thread rewrites its fragments (Sm90ProductQEpilogue::form_a): the 32 values of its two
// rows a k-step, f16 → f32, times the row's scale, rounded to bf16/f16 pairs; the target's
// column, where a k-step holds it, replaced by the row's exact value. The row's scale changes
// every 4 k-steps (a 256-column tile): one exp a row from m_ref, whose next value is loaded a
// tile ahead. Rows past the chunk: scale 0, no target (their q loads as zeros, their outputs are
// not written). Reads q, m_ref, the rows' coefficients (targets, lse, token scales, scalars,
// class weights), target logits and C; writes dE's chunk rows only. m_ref must not alias dE
// (plan::MrefPlace::Workspace: the product writes dE's rows while other tiles read the maxima).
//
// Host side: src/family/sm90_product.rs (product_de_from_q), src/step.rs; tests: tests/gpu/step.rs.
#include "sm90/product.cuh"

template <int BN>
struct Sm90ProductQEpilogue : Sm90ProductEpilogue<BN> {
  static constexpr bool kFormsA = true;
  const CompactGradParams& q;
  // this thread's two rows of the tile (h = 0, 1: rows g and g + 8 of its warp's 16)
  const float* m_row[2];  // the row's m_ref, or null past the chunk
  float p_scale[2], lse[2], target_g[2], scale[2], m_next[2];
  int target[2];
  int vocab_tiles;  // 256-column tiles of the vocabulary

  __device__ __forceinline__ Sm90ProductQEpilogue(const Sm90ProductParams& p, const Sm90ProductTiles<BN>& tt,
                                                  int consumer, const CompactGradParams& q)
      : Sm90ProductEpilogue<BN>{p, tt, consumer, 0}, q(q), vocab_tiles((p.k + SM90_TILE_N - 1) / SM90_TILE_N) {}

  // the tile's rows: coefficients, target and its exact G, and the first tile's m
  __device__ __forceinline__ void begin_rows(int t) {
    Sm90ProductEpilogue<BN>::begin_rows(t);
    const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = this->row0 + 64 * this->consumer + 16 * w + lane / 4 + 8 * h;  // chunk row
      const int row = q.chunk.n0 + r;
      const float4 cf = chunk_row_coeffs(q.lp, q.chunk, row, target[h]);
      p_scale[h] = cf.x;
      lse[h] = cf.w;
      const bool live = r < this->p.rows;
      m_row[h] = live ? q.m_ref + (size_t)r * q.ld_mref : nullptr;
      m_next[h] = live ? m_row[h][0] : 0.0f;
      // (as flce_grad_from_compact's target column, without smoothing or softcap)
      target_g[h] = live && target[h] >= 0 ? cf.x * fast_exp(q.target_logit[row] - cf.w) - cf.y : 0.0f;
    }
  }

  __device__ __forceinline__ void form_a(int kt, u32 (&f)[SM90_TILE_K / 16][4]) {
    if ((kt & 3) == 0) {
      // a new 256-column tile: its scale (flce_grad_from_compact's), and the next tile's m loaded
      const int next = (kt >> 2) + 1;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        scale[h] = m_row[h] ? p_scale[h] * fast_exp(m_next[h] - lse[h]) : 0.0f;
        if (m_row[h] && next < vocab_tiles) m_next[h] = m_row[h][next];
      }
    }
#pragma unroll
    for (int k = 0; k < SM90_TILE_K / 16; ++k) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float s = scale[i & 1];
        f[k][i] = pack_elem_pair(s * f16_to_f32((u16)f[k][i]), s * f16_to_f32((u16)(f[k][i] >> 16)));
      }
    }
    const int tq = threadIdx.x % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int at = target[h] - SM90_TILE_K * kt;  // the target's column within the k-step
      if (at < 0 || at >= SM90_TILE_K) continue;    // (most k-steps; -1, -2: no target)
#pragma unroll
      for (int k = 0; k < SM90_TILE_K / 16; ++k) {
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int col = 16 * k + 8 * hi + 2 * tq;
          u32& pair = f[k][2 * hi + h];
          if (at == col) pair = (pair & 0xffff0000u) | (u32)from_f32(target_g[h]);
          if (at == col + 1) pair = (pair & 0x0000ffffu) | ((u32)from_f32(target_g[h]) << 16);
        }
      }
    }
  }
};

struct Sm90QEpilogues {
  const Sm90ProductParams& p;
  const CompactGradParams& q;
  template <int BN>
  __device__ __forceinline__ Sm90ProductQEpilogue<BN> operator()(const Sm90ProductTiles<BN>& tt, int consumer) const {
    return Sm90ProductQEpilogue<BN>(p, tt, consumer, q);
  }
};

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    flce_sm90_product_q(const __grid_constant__ Sm90ProductQParams pq) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const Sm90Pipe pp = sm90_pipe(smem_raw);
  sm90_init_barriers(pp);
  const Sm90QEpilogues epilogues{pq.product, pq.grad};
  // (dE: A K-major from registers; tile_n 192 or 256, src/family/sm90_product.rs)
  if (pq.product.tile_n == 192)
    sm90_product<2, 192>(pq.product, pp, epilogues);
  else
    sm90_product<2, 256>(pq.product, pp, epilogues);
}
