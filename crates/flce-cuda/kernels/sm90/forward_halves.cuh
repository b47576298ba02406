// flce sm90 family, forward in 128-column halves: the consumer schedule that folds one half-tile
// while the tensor cores compute the next (FlashAttention-3's intra-warpgroup overlap, adapted to
// a k-loop over D). Included by sm90/forward.cu; chosen by SM90_FWD_HALVES / SM90_FWD_OVERLAP
// (src/geometry.rs Sm90Mainloop, the profiling knob FLCE_SM90_MAINLOOP="halves=1,overlap=P").
//
// Why: the default consumers (mainloop.cuh sm90_consume_run) wait for a 128 × 256 tile's last
// wgmma group and only then fold it; during the fold (2,000–4,100 cycles plain / softcap, MUFU
// and ALU work) the tensor cores idle — the forward's 4–5% over cuBLAS's GEMM (perf-notes v13,
// v29). A second set of 128 accumulators does not fit (the launch gives 168 registers a thread),
// so each 256-column tile runs as two 128-column halves with 64 accumulators each (wgmma
// m64n128k16), in two sets: acc0 and acc1 take turns.
//
// Schedule of a consumer warpgroup over its sequence of halves h = 0, 1, 2, … (token tile x's
// run of halves, then the next token tile's; the ring carries over):
//   - issue the first P k-steps of half h into its set (wait for each stage's `full`, wgmma,
//     commit; no wgmma wait), so the tensor cores hold 2 consumers × P × 4 wgmma of work;
//   - fold half h − 1 (the other set, complete since half h − 1 ended with wait_group 0) through
//     the epilogue; where half h starts a new token tile, end_rows of the old one and
//     begin_rows of the new one follow that fold (the epilogue's row state is the old tile's
//     until then);
//   - the rest of half h's k-loop as the default (one group in flight, the stage of the k-step
//     before released), then wait_group 0.
// Half 0 runs alone, then the halves go in straight-line pairs (acc1, acc0) so that ptxas sees
// which set each fold reads (sm90_consume_overlapped). After the last half its fold runs alone. The stages of the first P k-steps are released after
// the fold (their groups completed by then or at the next wait), so the ring needs P stages held
// plus those the producer fills meanwhile: 6 stages of 32 KB (Sm90RingShape<128>), P ≤ 4.
//
// Cost: E's box is loaded once per half (1.33× the L2 → shared traffic per FLOP of 128 × 256
// tiles) and m64n128k16 reads A from shared memory once per 128 columns instead of 256.
// Results differ from the 256-wide fold in the order of the running sums only (one more rescale
// per tile); deterministic as every sm90 kernel.
//
// Measured (H200, 2026-12-02, perf-notes v31–v32): correct, and slower than the default 256-wide
// forward at every P (overlap 4: 1.021 / 1.012× at Gemma 2 / Llama 3), although the 128-wide main
// loop alone is as fast as the 256-wide one: the fold of a half costs more than half a tile's.
#pragma once

#ifndef SM90_FWD_OVERLAP
#define SM90_FWD_OVERLAP 0
#endif

// One half of the sequence: its k-loop into `cur`, with (FOLD) the fold of the previous half
// (`prev`, at prev_col0) after the first `pre` k-steps are issued, then the token-tile change if
// half `x` differs from the epilogue's `epi_x`.
template <bool FOLD, class RS, class Epilogue>
__device__ __forceinline__ void sm90_overlapped_half(const Sm90Pipe& pp, const SmemDescBase& desc_a,
                                                     const SmemDescBase& desc_b, int kt_count, int pre,
                                                     float (&cur)[SM90_HALF_N / 2], float (&prev)[SM90_HALF_N / 2],
                                                     int prev_col0, int x, int& epi_x, Epilogue& epi,
                                                     Sm90Ring<RS::RING_STAGES>& ring) {
  const bool releaser = (threadIdx.x & 127) == 0;
  const u32 blocks = cluster_size();
  Sm90Ring<RS::RING_STAGES> oldest = ring;  // the oldest stage of this half not yet released
  // the first `pre` k-steps, issued back to back; the very first wgmma writes `cur` without
  // reading it (wgmma.cuh, wgmma_m64n128k16_first), peeled so no path passes the old values on
  {
    const int stage = ring.stage;
    mbar_wait(&pp.full[stage], ring.phase);
    const u32 a = stage * SM90_A_STAGE_BYTES, b = stage * RS::B_BYTES;
    wgmma_fence();
    wgmma_m64n128k16_first(cur, desc_a.at(a), desc_b.at(b));
#pragma unroll
    for (int k = 1; k < SM90_TILE_K / 16; ++k)
      wgmma_m64nk16<0, 0>(cur, desc_a.at(a + 32 * k), desc_b.at(b + 32 * k), 1);
    wgmma_commit();
    ring.advance();
  }
  for (int kt = 1; kt < pre; ++kt) {
    const int stage = ring.stage;
    mbar_wait(&pp.full[stage], ring.phase);
    const u32 a = stage * SM90_A_STAGE_BYTES, b = stage * RS::B_BYTES;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < SM90_TILE_K / 16; ++k)
      wgmma_m64nk16<0, 0>(cur, desc_a.at(a + 32 * k), desc_b.at(b + 32 * k), 1);
    wgmma_commit();
    ring.advance();
  }
  // the previous half's fold under them, then the token tile's change
  if (FOLD) epi.tile(prev, prev_col0);
  if (x != epi_x) {
    if (epi_x >= 0) epi.end_rows(epi_x);
    epi.begin_rows(x);
    epi_x = x;
  }
  wgmma_wait_one();
  for (int i = 0; i < pre - 1; ++i) {
    release_stage(pp, oldest.stage, releaser, blocks);
    oldest.advance();
  }
  // the rest as the default loop: one group in flight, the step before's stage released
  for (int kt = pre; kt < kt_count; ++kt) {
    const int stage = ring.stage;
    mbar_wait(&pp.full[stage], ring.phase);
    const u32 a = stage * SM90_A_STAGE_BYTES, b = stage * RS::B_BYTES;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < SM90_TILE_K / 16; ++k)
      wgmma_m64nk16<0, 0>(cur, desc_a.at(a + 32 * k), desc_b.at(b + 32 * k), 1);
    wgmma_commit();
    ring.advance();
    wgmma_wait_one();
    release_stage(pp, oldest.stage, releaser, blocks);
    oldest.advance();
  }
  wgmma_wait_all();
  release_stage(pp, oldest.stage, releaser, blocks);
}

// A consumer of the forward in halves (BN = SM90_HALF_N): for each of its token tiles the `halves`
// half-tiles from column col_first, each folded during the next one's first P k-steps.
template <int P, class RS, class Tiles, class Epilogue>
__device__ __forceinline__ void sm90_consume_overlapped(const Sm90Pipe& pp, int consumer, const Tiles& tt,
                                                        int col_first, int halves, int kt_count, Epilogue& epi) {
  static_assert(P >= 1 && P < RS::RING_STAGES, "the ring must hold the pre-issued stages and one more");
  if (halves == 0 || kt_count == 0) {
    // a split past the vocabulary (or D = 0): the rows' empty statistics, as the default consumer
    for (int x = tt.first; x < tt.end; x += tt.stride) {
      epi.begin_rows(x);
      epi.end_rows(x);
    }
    return;
  }
  // The halves in one sequence s = 0 .. total − 1 over the block's token tiles. Half 0 runs
  // alone into acc0; then pairs (acc1, acc0), each folding the set the other one filled, in
  // straight-line code: with the sets' roles chosen by a run-time branch, ptxas could not prove
  // the folded set's wgmma retired and waited for every group before the fold (C7517, a
  // `warpgroup.wait is injected` info line: no overlap at all).
  const int token_tiles = tt.first < tt.end ? (tt.end - tt.first + tt.stride - 1) / tt.stride : 0;
  const int total = token_tiles * halves;
  const auto x_of = [&](int s) { return tt.first + (s / halves) * tt.stride; };
  const auto col_of = [&](int s) { return tt.col0(x_of(s), col_first) + (s % halves) * SM90_HALF_N; };
  if (total == 0) return;
  float acc0[SM90_HALF_N / 2], acc1[SM90_HALF_N / 2];
  const u32 a0 = smem_u32(pp.a + consumer * (SM90_A_STAGE_BYTES / 2)), b0 = smem_u32(pp.b);
  const SmemDescBase desc_a(smem_desc(a0)), desc_b(smem_desc(b0));
  const int pre = min(P, kt_count);
  Sm90Ring<RS::RING_STAGES> ring;
  int epi_x = -1;
  sm90_overlapped_half<false, RS>(pp, desc_a, desc_b, kt_count, pre, acc0, acc1, 0, x_of(0), epi_x, epi, ring);
  int s = 1;
  for (; s + 1 < total; s += 2) {
    sm90_overlapped_half<true, RS>(pp, desc_a, desc_b, kt_count, pre, acc1, acc0, col_of(s - 1), x_of(s), epi_x, epi,
                                   ring);
    sm90_overlapped_half<true, RS>(pp, desc_a, desc_b, kt_count, pre, acc0, acc1, col_of(s), x_of(s + 1), epi_x, epi,
                                   ring);
  }
  // half s − 1 is in acc0; one more half or none
  if (s < total) {
    sm90_overlapped_half<true, RS>(pp, desc_a, desc_b, kt_count, pre, acc1, acc0, col_of(s - 1), x_of(s), epi_x, epi,
                                   ring);
    epi.tile(acc1, col_of(s));
  } else {
    epi.tile(acc0, col_of(s - 1));
  }
  epi.end_rows(epi_x);
}
