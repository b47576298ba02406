//! The three-product plan's types: [`ThreeProductPlan`] (its token chunks, regions and
//! storages), how a chunk's logits are held ([`ThreeProductLogits`]), where its per-token state
//! and per-tile maxima live ([`StatePlace`], [`MrefPlace`]) and dE's K-chunks ([`DeKChunks`]).
//! The functions that make plans are in the module above.

use std::ops::Range;

use flce_core::{DType, Shape};

use super::super::{chunk_range, Layout, Region, Sm90Grid, Wanted};
use crate::geometry::SM90_TILE_N;
use crate::modes::Family;

/// At most this many vocabulary segments per token in a chunk's statistics.
pub const MAX_STATS_SPLITS: usize = 16;

/// How the three-product pass holds a token chunk's logits between its forward and its G.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreeProductLogits {
    /// cuBLAS writes them in f32 (4 bytes a logit, read by the statistics and the G kernels): any
    /// GPU, dtype and option.
    F32,
    /// The sm90 forward writes each as q = exp(z − m) in f16 (2 bytes, overwritten by G in place)
    /// with its statistics (module docs): sm_90a, 16-bit inputs with 16-byte rows, every option
    /// but a softcap with smoothing (`CudaLoss::three_product_logits` decides). The forward grid is
    /// planned for `sm_count` SMs with `tuning`'s L2 budget and cluster size, as the sm90
    /// forward's.
    Compact { sm_count: usize, tuning: super::super::Sm90Tuning },
}

impl ThreeProductLogits {
    /// "f32" or "compact" (reports and logs).
    pub fn name(&self) -> &'static str {
        match self {
            ThreeProductLogits::F32 => "f32",
            ThreeProductLogits::Compact { .. } => "compact",
        }
    }
    /// The kernel family that computes a chunk's logits: cuBLAS (f32) or the sm90 forward.
    pub fn family(&self) -> Family {
        match self {
            ThreeProductLogits::F32 => Family::Cublas,
            ThreeProductLogits::Compact { .. } => Family::Sm90,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreeProductPlan {
    pub shape: Shape,
    pub dtype: DType,
    pub wanted: Wanted,
    pub storage: ThreeProductLogits,
    /// Compact logits: the sm90 forward's grid for a whole chunk (the last, shorter chunk runs
    /// with at most its own token tiles as slots); its splits are `stats_splits`.
    pub forward_grid: Option<Sm90Grid>,
    /// Compact: blocks per cluster of the forward grid ([`crate::plan::sm90_grid_tuned`]); else 1.
    pub forward_cluster: usize,
    /// Tokens per chunk (a multiple of 128, or N).
    pub token_chunk: usize,
    /// Row pitch of the chunk's logits and G (V padded to 128), in elements.
    pub ldg: usize,
    /// The statistics of a chunk are folded over this many vocabulary segments in parallel
    /// (enough blocks to fill the GPU when the chunk has few tokens) of `stats_seg_cols` columns,
    /// then merged in order by the finish step (compact: the forward grid's partials per token,
    /// [`crate::plan::Sm90Grid::partial_rows`], and its main splits' columns).
    pub stats_splits: usize,
    pub stats_seg_cols: usize,
    /// Where the per-token state (`targets`, `token_scale`, `partials`, `target_logit`,
    /// `finish_sums`, and the room of `lse` and `status` in dC) lives: its regions count from that place's first
    /// byte.
    pub token_state: StatePlace,
    pub targets: Region,
    pub token_scale: Region,
    pub scalars: Region,
    /// 4 bytes holding 1.0f: the grad_output the gradients are formed for (a spare word of
    /// `scalars`: [`crate::geometry::SCALAR_UNIT`]).
    pub unit_grad: Region,
    /// Packed RowStats [stats_splits, N] and target logits \[N\].
    pub partials: Region,
    pub target_logit: Region,
    /// The finish step's block sums over all N tokens ([`crate::geometry::finish_sums_bytes`];
    /// the per-chunk finish steps write lse only).
    pub finish_sums: Region,
    /// With the state in dC's buffer ([`StatePlace::DcBuffer`]): room for lse \[N\] after the
    /// state, where the pass keeps it when the caller gives no lse output (a null `lse` pointer:
    /// lse is dead once G is formed, and a caller that does not read it — the binding's loss
    /// without `return_lse` — then holds no 4·N bytes for it at the pass's peak). None with the
    /// state in the workspace: there the caller's lse buffer is required.
    pub lse: Option<Region>,
    /// Likewise room for the status word (one i32) after `lse`, where the pass keeps it when the
    /// caller gives no status output (a null `status` pointer: a caller that checked the targets
    /// ahead of the call, as the binding's eager loss does, reads no status of the pass's; the
    /// 512-byte block PyTorch's allocator would give the word is then not held). The word is
    /// written by the pass's first kernels and overwritten with the rest of the state by dC.
    pub status: Option<Region>,
    /// f32 logits of one chunk [token_chunk, ldg]; compact: f16 q [token_chunk, ldg], the same
    /// region as `g`.
    pub logits: Region,
    /// G of one chunk [token_chunk, ldg], input dtype.
    pub g: Region,
    /// Compact: f32 m of each (token, 256-column tile) of a chunk [token_chunk, mref_ld()].
    pub m_ref: Option<MrefPlace>,
    /// The f32 accumulator of dC's rows [dc_head_rows, V) (dC wanted, 16-bit inputs, several
    /// chunks; f32 inputs accumulate in dC, one chunk writes dC directly).
    pub dc_acc: Option<Region>,
    /// The accumulator's rows [0, dc_head_rows) live in the caller's dC buffer itself (f32 row r
    /// at byte 4·D·(r + 1): V/2 − 1 rows fill a 16-bit dC; the head is that rounded down to a
    /// multiple of 128), rounded in place at the end in passes that never overwrite an unread row
    /// (`CudaLoss::round_head_in_place`): about half the accumulator's workspace.
    pub dc_head_rows: usize,
    /// f32 accumulator of db \[V\] and the chunk's column sums [row tiles, ldg] (db wanted).
    pub db_acc: Option<Region>,
    pub db_partial: Option<Region>,
    /// dE of a token chunk in K-chunks of V summed in f32, rounded once
    /// ([`super::with_de_k_chunks`]; f16's default where V is longer than a chunk:
    /// [`super::default_de_k_chunk`]); None: one product over V (bf16's and f32's).
    pub de_k_chunks: Option<DeKChunks>,
    pub workspace_bytes: usize,
}

/// dE in K-chunks ([`ThreeProductPlan::de_k_chunks`]): the chunks' width and their f32 accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeKChunks {
    /// Vocabulary columns a chunk (a multiple of [`super::DE_K_CHUNK_ALIGN`]).
    pub columns: usize,
    /// Where the accumulator [token_chunk, D] lives: dC's buffer (offsets from the state's
    /// boundary, as the state's) or the workspace.
    pub place: StatePlace,
    pub acc: Region,
}

/// Where a plan keeps the per-token state of the pass: prepared targets, token scales, the
/// statistics' partials, target logits and the finish step's block sums (1.28 MB at 8k tokens
/// with 9 splits, 2.3 MB at 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatePlace {
    /// The workspace.
    Workspace,
    /// The caller's dC buffer, from its first 256-byte boundary: one chunk holds every token,
    /// so the state is dead once that chunk's G is formed (the finish step runs right after the
    /// chunk's statistics are merged), and the dC product, which writes the buffer, runs after
    /// G (stream order). Planned where dC is wanted, one chunk holds every token and the state
    /// fits dC's bytes less 255. This keeps "fast"'s workspace at the chunk's logits alone (plus
    /// 256 bytes of scalars): at the model shapes exactly torch.compile's bf16 logits in bytes,
    /// where the state in the workspace made PyTorch's allocator hold 2 MiB more (journal v54).
    DcBuffer,
}

/// Lays out the per-token state of [`StatePlace`] for `n` tokens and `splits` partials a token:
/// (targets, token_scale, partials, target_logit, finish_sums).
pub(super) fn token_state(l: &mut Layout, n: usize, splits: usize) -> [Region; 5] {
    let targets = l.take(4 * n);
    let token_scale = l.take(4 * n);
    let partials = l.take(16 * n * splits);
    let target_logit = l.take(4 * n);
    let finish_sums = l.take(crate::geometry::finish_sums_bytes(n));
    [targets, token_scale, partials, target_logit, finish_sums]
}

/// Where the compact forward's per-tile maxima (`m_ref`) of a chunk live between the forward that
/// writes them and the G that reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MrefPlace {
    /// The workspace: [token_chunk, ⌈V/256⌉] f32.
    Workspace(Region),
    /// The chunk's own rows of the caller's dE (a 16-bit [N, D] buffer): token i's maxima at the
    /// start of dE's row i, row pitch D/2 floats. They are dead once the chunk's G is formed, and
    /// the chunk's dE product, which writes those rows, runs after it (stream order); so the
    /// workspace drops by token_chunk·⌈V/256⌉·4 bytes (16 MB at Llama 3, 31 MB at Gemma 2; with
    /// the per-token state in dC's buffer, [`StatePlace`], the three-product pass's extra memory
    /// is torch.compile's: journal v43, v55).
    /// Planned where dE is wanted and a row of maxima fits a row of dE (4·⌈V/256⌉ ≤ 2·D, D even:
    /// every model shape).
    DeRows,
}

impl ThreeProductPlan {
    pub fn token_chunks(&self) -> usize {
        self.shape.n.div_ceil(self.token_chunk)
    }
    pub fn token_range(&self, i: usize) -> Range<usize> {
        chunk_range(i, self.token_chunk, self.shape.n)
    }
    /// Row pitch of `m_ref` in floats: the vocabulary's 256-column tiles in the workspace, dE's
    /// row pitch (D·2 bytes) in dE's rows.
    pub fn mref_ld(&self) -> usize {
        match self.m_ref {
            Some(MrefPlace::DeRows) => self.shape.d * self.dtype.size_in_bytes() / 4,
            _ => self.shape.v.div_ceil(SM90_TILE_N),
        }
    }
}
