// flce sm90 family: the wgmma instructions the main loop (sm90/mainloop.cuh) issues — shared-memory
// matrix descriptors for K-major and MN-major operands (128-byte swizzle), the async group
// fence / commit / wait, and the 64 × 256 × 16 and 64 × 192 × 16 f32-accumulating MMAs on
// 16-bit operands (bf16 or f16 by FLCE_DTYPE), A from shared memory or from registers (`_rs`),
// with an overload on the accumulator count that picks the width. sm_90a only. Reads shared
// memory through the descriptors; writes registers.
#pragma once
#include "common/types.cuh"

// ---- wgmma -------------------------------------------------------------------------------------
#if FLCE_DTYPE == FLCE_BF16
#define WGMMA_AB "bf16"
#else
#define WGMMA_AB "f16"
#endif

// Shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row atoms 1024 bytes apart.
__device__ __forceinline__ u64 smem_desc(u32 addr) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(16 >> 4) << 16) | ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

// Shared-memory matrix descriptor of an MN-major operand, 128-byte swizzle (CUTLASS's canonical
// Major-MN layout, docs/journal.md v19): 64 MN elements per 128-byte k row, groups of 8
// k rows 1024 bytes apart (SBO), the next 64 MN elements 8192 bytes away (LBO: the next 64 × 64
// TMA box).
#define SM90_MN_BOX_BYTES (64 * SM90_TILE_K * 2)
__device__ __forceinline__ u64 smem_desc_mn(u32 addr) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(SM90_MN_BOX_BYTES >> 4) << 16) | ((u64)(1024 >> 4) << 32) |
         ((u64)1 << 62);
}

// A descriptor built once for a base address, then moved along shared memory: its low 14 bits
// are the address / 16 and nothing else depends on it, so the descriptor of base + n bytes (n a
// multiple of 16, base + n below 256 KB: every shared address is) is the low word plus n / 16.
// The main loop takes each stage's and k-step's descriptor from one of these (a 32-bit add)
// instead of rebuilding it from the address (64-bit masks and shifts, ~20 instructions an MMA).
struct SmemDescBase {
  u32 lo, hi;
  __device__ __forceinline__ explicit SmemDescBase(u64 desc) : lo((u32)desc), hi((u32)(desc >> 32)) {}
  __device__ __forceinline__ u64 at(u32 byte_offset) const {
    return ((u64)hi << 32) | (u64)(lo + (byte_offset >> 4));
  }
};
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// wgmma's D operands, written once for every form below: the accumulator registers in the
// instruction text (%0..%95 of 96, %0..%127 of 128: the operands' first numbers) and their "+f"
// constraints on the array d.
#define WGMMA_D96_REGS \
  "%0,%1,%2,%3,%4,%5,%6,%7," \
  "%8,%9,%10,%11,%12,%13,%14,%15," \
  "%16,%17,%18,%19,%20,%21,%22,%23," \
  "%24,%25,%26,%27,%28,%29,%30,%31," \
  "%32,%33,%34,%35,%36,%37,%38,%39," \
  "%40,%41,%42,%43,%44,%45,%46,%47," \
  "%48,%49,%50,%51,%52,%53,%54,%55," \
  "%56,%57,%58,%59,%60,%61,%62,%63," \
  "%64,%65,%66,%67,%68,%69,%70,%71," \
  "%72,%73,%74,%75,%76,%77,%78,%79," \
  "%80,%81,%82,%83,%84,%85,%86,%87," \
  "%88,%89,%90,%91,%92,%93,%94,%95"
#define WGMMA_D128_REGS WGMMA_D96_REGS "," \
  "%96,%97,%98,%99,%100,%101,%102,%103," \
  "%104,%105,%106,%107,%108,%109,%110,%111," \
  "%112,%113,%114,%115,%116,%117,%118,%119," \
  "%120,%121,%122,%123,%124,%125,%126,%127"
#define WGMMA_D96_OUT(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define WGMMA_D128_OUT(d) WGMMA_D96_OUT(d), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// d (+)= A·Bᵀ for a 64 × 256 × 16 step; `accumulate` 0 overwrites d. TA / TB = 1: A / B is
// MN-major in shared memory (smem_desc_mn; the product kernels' operands), 0: K-major (smem_desc).
template <int TA = 0, int TB = 0>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 desc_a, u64 desc_b, int accumulate) {
  asm volatile(
      "{ .reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." WGMMA_AB "." WGMMA_AB " {"
      WGMMA_D128_REGS
      "}, %128, %129, p, 1, 1, %131, %132; }"
      :
        WGMMA_D128_OUT(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TA), "n"(TB));
}

// The same for a 64 × 192 × 16 step (the product kernel's narrower tile, kernels/sm90/product.cu:
// D = 2304 is 12 tiles of 192, 9 of 256).
template <int TA = 0, int TB = 0>
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], u64 desc_a, u64 desc_b, int accumulate) {
  asm volatile(
      "{ .reg .pred p;\n"
      "setp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32." WGMMA_AB "." WGMMA_AB " {"
      WGMMA_D96_REGS
      "}, %96, %97, p, 1, 1, %99, %100; }"
      :
        WGMMA_D96_OUT(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TA), "n"(TB));
}

// A 64 × BN × 16 step, BN = 2 · the accumulator count (the loops below are templated on BN).
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64nk16(float (&d)[128], u64 desc_a, u64 desc_b, int accumulate) {
  wgmma_m64n256k16<TA, TB>(d, desc_a, desc_b, accumulate);
}
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64nk16(float (&d)[96], u64 desc_a, u64 desc_b, int accumulate) {
  wgmma_m64n192k16<TA, TB>(d, desc_a, desc_b, accumulate);
}

// d (+)= A·Bᵀ for a 64 × 256 × 16 step with A from registers (wgmma's register fragment of A, as
// mma.m16n8k16's: a[0] rows g, columns 2t..2t+1; a[1] rows g + 8; a[2], a[3] the same 8 columns
// on) and B from shared memory (TB as above). A from registers is K-major by definition.
template <int TB = 0>
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[128], const u32 (&a)[4], u64 desc_b, int accumulate) {
  asm volatile(
      "{ .reg .pred p;\n"
      "setp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." WGMMA_AB "." WGMMA_AB " {"
      WGMMA_D128_REGS
      "}, {%128,%129,%130,%131}, %132, p, 1, 1, %134; }"
      :
        WGMMA_D128_OUT(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(TB));
}

// The same for a 64 × 192 × 16 step.
template <int TB = 0>
__device__ __forceinline__ void wgmma_m64n192k16_rs(float (&d)[96], const u32 (&a)[4], u64 desc_b, int accumulate) {
  asm volatile(
      "{ .reg .pred p;\n"
      "setp.ne.b32 p, %101, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32." WGMMA_AB "." WGMMA_AB " {"
      WGMMA_D96_REGS
      "}, {%96,%97,%98,%99}, %100, p, 1, 1, %102; }"
      :
        WGMMA_D96_OUT(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(TB));
}

// A 64 × BN × 16 step with A from registers (the product kernel's TA = 2, mainloop.cuh).
template <int TB>
__device__ __forceinline__ void wgmma_m64nk16_rs(float (&d)[128], const u32 (&a)[4], u64 desc_b, int accumulate) {
  wgmma_m64n256k16_rs<TB>(d, a, desc_b, accumulate);
}
template <int TB>
__device__ __forceinline__ void wgmma_m64nk16_rs(float (&d)[96], const u32 (&a)[4], u64 desc_b, int accumulate) {
  wgmma_m64n192k16_rs<TB>(d, a, desc_b, accumulate);
}

// ---- staged stores of a warp's accumulator rows ----------------------------------------------
// A warp's 16 rows × 256 columns of a 64 × 256 f32 accumulator (wgmma's layout: lane (g, t) =
// (lane / 4, lane % 4) holds, for j < 32, columns 8j + 2t and 8j + 2t + 1 of row g in acc[4j],
// acc[4j + 1] and of row g + 8 in acc[4j + 2], acc[4j + 3]) stored as 16-bit pairs pack(lo, hi).
// Direct stores would fill 8 half lines per warp instruction and hold 64 store instructions'
// registers per tile; instead, per 64-column quarter, the warp writes its 16 × 64 values to its
// shared-memory staging slice `s_stage` (16 rows of SM90_GRAD_STAGE_ROW_BYTES = 144: lanes (g, t)
// hit banks 4g + t, conflict free) and reads them back as 16-byte row pieces (8 lanes per 128-byte
// row), so each global store instruction writes 4 whole lines. `out`: the warp's row 0, column 0
// (16-bit elements, pitch `ld` elements, 16-byte aligned rows); rows from `rows` on are not
// written. Used for G (sm90/grad.cu).
template <typename E, typename Pack>
__device__ __forceinline__ void sm90_store_warp_rows_staged(const float (&acc)[128], u32* s_stage, E* out, size_t ld,
                                                            int rows, Pack pack) {
  constexpr int WORDS = SM90_GRAD_STAGE_ROW_BYTES / 4;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int quarter = 0; quarter < 4; ++quarter) {
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const int j = 8 * quarter + jj;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        s_stage[(g + 8 * h) * WORDS + 4 * jj + t] = pack(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = 4 * i + (lane >> 3), piece = lane & 7;
      const uint4 v = *(const uint4*)((const unsigned char*)s_stage + r * SM90_GRAD_STAGE_ROW_BYTES + 16 * piece);
      if (r < rows) *(uint4*)(out + (size_t)r * ld + 64 * quarter + 8 * piece) = v;
    }
    __syncwarp();  // the slice is rewritten by the next quarter
  }
}

// ---- TMA stores of a warp's accumulator rows -------------------------------------------------
// A warp's 16 rows × 256 columns of a 64 × 256 f32 accumulator (wgmma's layout: lane (g, t) =
// (lane / 4, lane % 4) holds, for j < 32, columns 8j + 2t and 8j + 2t + 1 of row g in acc[4j],
// acc[4j + 1] and of row g + 8 in acc[4j + 2], acc[4j + 3]) stored as 16-bit pairs pack(lo, hi)
// through TMA stores, asynchronous: per 32-column step the warp writes its 16 × 32 values
// (stmatrix, conflict free) into one of its SM90_STORE_BOXES staging boxes `boxes` (shared
// addresses SM90_STORE_BOX_BYTES apart, 1024-byte aligned) in the 64-byte swizzle of `map`'s
// boxes (16 B chunk c of row r at r·64 + 16·(c ^ (r/2 mod 4))), and lane 0 issues the box's TMA
// store to (col + 32·step, row) with the L2 `policy` (createpolicy); the warp goes on while the
// tensor-memory accelerator drains it, under the next tiles' main loop. Per-thread global stores
// instead (through a staging slice as 16-byte row pieces) held the warps in every tile's epilogue
// while all SMs' stores queued at once (docs/journal.md v38). A box is rewritten only after its
// last store read it (lane 0 waits, the warp syncs); lane 0 must wait for its stores
// (bulk_wait_all) before the block exits. Rows and columns past the map's edges are not written
// (the map's bounds). Used for the compact forward's q (sm90/forward.cu); G through them measured
// no faster than through the staging above (v38).
template <typename Pack>
__device__ __forceinline__ void sm90_store_warp_rows_tma(const float (&acc)[128], u32 boxes, const TensorMap* map,
                                                         int col, int row, u64 policy, Pack pack) {
  const int lane = threadIdx.x & 31;
  // this lane's row address within a box for each of the two stmatrix.x4 of a step: matrix
  // i = lane / 8 is (8-column chunk jj = 2x + i / 2, row half i % 2)
  const int i = lane >> 3, r = (lane & 7) + 8 * (i & 1);
  u32 at[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) at[x] = r * 64 + (((2 * x + (i >> 1)) ^ ((r >> 1) & 3)) << 4);
#pragma unroll
  for (int s = 0; s < SM90_TILE_N / 32; ++s) {
    const u32 box = boxes + (s % SM90_STORE_BOXES) * SM90_STORE_BOX_BYTES;
    if (lane == 0) bulk_wait_read<SM90_STORE_BOXES - 1>();  // the box's previous store has read it
    __syncwarp();
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      u32 v[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int j = 4 * s + 2 * x + (m >> 1), h = m & 1;
        v[m] = pack(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      }
      stmatrix_x4(box + at[x], v);
    }
    fence_async_smem();
    __syncwarp();
    if (lane == 0) {
      tma_store_2d(map, box, col + 32 * s, row, policy);
      bulk_commit();
    }
  }
}
