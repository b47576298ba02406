//! The one-pass backward's work list as values: the order in which `CudaLoss::one_pass`
//! (backward.rs) runs a plan's (vocabulary, token) chunk pairs and rounds its accumulators. Pure,
//! and checked without a GPU by a simulation of what each step reads and writes
//! (backward_steps_tests.rs): every dC row written once, after all its token chunks and never
//! over dE's accumulator before dE is rounded; every dE row accumulated over every vocabulary
//! chunk, the first one writing; G read only by the pair that wrote it.

use crate::plan::{BackwardPlan, DcAccumulator};

/// Which pass a vocabulary chunk is computed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Every chunk: dE, db, and dC for the chunks before the tail.
    Main,
    /// The tail chunks again, after dE is final: their dC rows only, G recomputed.
    Tail,
    /// The last vocabulary chunk's dC rows, from the G the main pass left in the workspace.
    TailKeptG,
}

/// One step of a one-pass plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Vocabulary chunk `vc` × token chunk `tc` in `pass`: G by the family (unless
    /// [`Pass::TailKeptG`]), db's column sums and dE's product in the main pass, dC's product
    /// where [`writes_dc`].
    Pair { vc: usize, tc: usize, pass: Pass },
    /// Vocabulary chunk `vc`'s f32 dC accumulator rounded into its dC rows.
    RoundDc { vc: usize },
    /// Token chunk `tc`'s dE accumulator rounded into its dE rows (token-outer plans).
    RoundDeChunk { tc: usize },
    /// dE's accumulator rounded into dE (its rows in dE's own bytes first, in place).
    RoundDe,
    /// db's f32 accumulator rounded into db.
    RoundDb,
}

/// The gradients a pass computes: what the call passes (a dE pass's first pass gets no dE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Computes {
    /// dE, with an accumulator of its own to round (not dE itself: f32 inputs).
    pub de_rounded: bool,
    pub dc: bool,
    pub db: bool,
}

/// Whether vocabulary chunk `vc` writes its dC rows in `pass`: the tail pass's chunks in the tail
/// pass only (in the main pass their rows hold dE's accumulator), the others in the main pass.
pub(crate) fn writes_dc(plan: &BackwardPlan, vc: usize, pass: Pass) -> bool {
    pass != Pass::Main || vc < plan.first_tail_chunk()
}

/// The steps of one pass of `plan` computing `what`, in order. Token-outer plans (no dC): each
/// token chunk over every vocabulary chunk, then its dE rounded. Vocabulary-outer plans: each
/// vocabulary chunk over every token chunk, then its dC accumulator rounded (where it writes its
/// rows in this pass); dE rounded; the tail pass from the last chunk back — the last from the G
/// the main pass left, where one token chunk holds every token; db rounded last.
pub(crate) fn one_pass_steps(plan: &BackwardPlan, what: Computes) -> Vec<Step> {
    let mut steps = vec![];
    let f32_dc = matches!(plan.dc_acc, DcAccumulator::Workspace(_));
    let vocab_chunk = |steps: &mut Vec<Step>, vc: usize, pass: Pass| {
        steps.extend((0..plan.token_chunks()).map(|tc| Step::Pair { vc, tc, pass }));
        if what.dc && f32_dc && writes_dc(plan, vc, pass) {
            steps.push(Step::RoundDc { vc });
        }
    };
    if plan.token_outer {
        for tc in 0..plan.token_chunks() {
            steps.extend((0..plan.vocab_chunks()).map(|vc| Step::Pair { vc, tc, pass: Pass::Main }));
            if what.de_rounded {
                steps.push(Step::RoundDeChunk { tc });
            }
        }
    } else {
        for vc in 0..plan.vocab_chunks() {
            vocab_chunk(&mut steps, vc, Pass::Main);
        }
        if what.de_rounded {
            steps.push(Step::RoundDe);
        }
    }
    for vc in plan.tail_chunks().rev() {
        let kept = vc + 1 == plan.vocab_chunks() && plan.token_chunks() == 1;
        vocab_chunk(&mut steps, vc, if kept { Pass::TailKeptG } else { Pass::Tail });
    }
    if what.db && plan.db_acc.is_some() {
        steps.push(Step::RoundDb);
    }
    steps
}

#[cfg(test)]
#[path = "backward_steps_tests.rs"]
mod tests;
