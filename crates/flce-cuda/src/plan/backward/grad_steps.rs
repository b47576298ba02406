//! The vocabulary chunk that balances the sm90 G kernel's launches: the tile steps a plan's G
//! launches take on a GPU's SMs, and the chunk at or below a plan's largest that makes them
//! fewest (the default backward plans, plan/backward/; the vocabulary-slice plan's rest,
//! plan/vocab_slice/).

use super::dc_tail::dc_tail;
use super::layout::{good_vocab_chunk, layout};
use super::BackwardPlan;
use crate::geometry::{SM90_TILE_M, SM90_TILE_N};
use crate::modes::BackwardMode;

/// Launches' fixed cost in the chunk choice below, in tile steps (a step: one 128 × 256 tile's
/// main loop and epilogue, ~48 µs at Llama 3 on an H200): the pipeline's fill and drain of a G
/// launch and the two cuBLAS products' per-chunk costs, so that a smaller chunk wins only by a
/// clear margin.
const CHUNK_LAUNCH_STEPS: usize = 1;

/// The tile steps the sm90 G kernel takes over a plan's chunks: the main pass's, the tail pass's
/// recomputes (all its chunks but the last, whose G the main pass leaves behind) and
/// `CHUNK_LAUNCH_STEPS` per launch. Modelled on the every-token-tile grid
/// (`super::grad_launch_steps`: its waves of one-tile blocks, ⌈tiles / SMs⌉ steps where a block
/// runs one tile), which the vocabulary-outer plans' launches match since their tiles run in a
/// raster order balanced to one tile (journal v45; on the static grid within the L2 budget,
/// v44, they took 1.6–2.6% more steps).
pub fn sm90_grad_steps(plan: &BackwardPlan, sm_count: usize) -> usize {
    let token_tiles = plan.token_chunk.div_ceil(SM90_TILE_M);
    let launch = |vc: usize| {
        let r = plan.vocab_range(vc);
        super::super::sm90::grad_launch_steps(token_tiles, (r.end - r.start).div_ceil(SM90_TILE_N), sm_count)
            + CHUNK_LAUNCH_STEPS
    };
    let tail = plan.tail_chunks();
    let recomputed = tail.start..tail.end.saturating_sub(1);
    plan.token_chunks() * ((0..plan.vocab_chunks()).map(launch).sum::<usize>() + recomputed.map(launch).sum::<usize>())
}

/// The plan with the vocabulary chunk, at or below its own and at least the good chunk, that
/// makes [`sm90_grad_steps`] least (the larger chunk on ties), with the same token chunk and
/// the same place for dE's accumulator, within `budget`. Why: the G kernel runs a chunk's
/// 256-column tiles as the waves of its blocks allow, and the largest chunk that fits often leaves
/// a half-empty last tile and a last wave with idle SMs in every chunk (Llama 3's default, 6784
/// rows: 26.5 tiles in 14 steps, 91% of the SMs' steps busy; 6144 rows: 24 tiles in 12 steps).
pub(super) fn sm90_balanced_chunks(
    plan: BackwardPlan,
    mode: BackwardMode,
    budget: usize,
    sm_count: usize,
) -> BackwardPlan {
    let (shape, dtype, wanted) = (plan.shape, plan.dtype, plan.wanted);
    if plan.token_chunk < shape.n {
        return plan;
    }
    let reach = plan.dc_tail().map(|t| t.reach(shape));
    let family = plan.family;
    let good = good_vocab_chunk(mode);
    fewest_grad_steps(plan, good, sm_count, |vc| {
        let tail = match reach {
            Some(reach) => Some(dc_tail(shape, dtype, wanted, shape.n, vc, reach)?),
            None => None,
        };
        let mut p = layout(shape, dtype, wanted, mode, shape.n, vc, tail);
        p.family = family;
        (p.workspace_bytes <= budget).then_some(p)
    })
}

/// Of `largest` and the plans `at(vc)` for the multiples of 256 below its vocabulary chunk down
/// to `smallest` (rounded up; None: no such plan), the one whose sm90 G launches take the fewest
/// tile steps ([`sm90_grad_steps`] on `sm_count` SMs; the larger chunk on ties).
pub(in crate::plan) fn fewest_grad_steps(
    largest: BackwardPlan,
    smallest: usize,
    sm_count: usize,
    at: impl Fn(usize) -> Option<BackwardPlan>,
) -> BackwardPlan {
    let top = largest.vocab_chunk;
    let (mut best_steps, mut best) = (sm90_grad_steps(&largest, sm_count), largest);
    let below = (smallest.div_ceil(SM90_TILE_N)..=top.div_ceil(SM90_TILE_N)).rev().map(|k| k * SM90_TILE_N);
    for p in below.filter(|&vc| vc < top).filter_map(at) {
        let steps = sm90_grad_steps(&p, sm_count);
        if steps < best_steps {
            (best_steps, best) = (steps, p);
        }
    }
    best
}
