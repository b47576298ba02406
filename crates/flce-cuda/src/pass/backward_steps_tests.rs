//! The backward's work list simulated without a GPU: what each step of [`one_pass_steps`] reads
//! and writes, for every kind of plan the planner makes (one token chunk or several, dE's
//! accumulator in the workspace, in dC's tail with rows in dE, in dC's head rows, in place; the dC
//! scratch; the dE pass of its own; token-outer; the slice plan's rest; cuBLAS logits).

use std::ops::Range;

use flce_core::{DType, Shape};

use super::*;
use crate::modes::{BackwardMode, Family, ForwardMode};
use crate::plan::{
    backward_plan, de_pass_plan, default_backward_budget, vocab_slice_plan_with_head, with_dc_scratch,
    with_token_chunks, DeAccumulator, GBuffer, ThreeProductLogits, VocabSliceRest, Wanted,
};

const BOTH: Wanted = Wanted { de: true, dc: true, dbias: false };

/// The simulated buffers of one pass.
struct Sim<'a> {
    p: &'a BackwardPlan,
    what: Computes,
    /// dE accumulated in this pass (the dE pass's first pass: not).
    de: bool,
    /// The (vocabulary, token) chunk whose G each buffer holds: the workspace's, then dC's bytes
    /// from an offset.
    g: Vec<(GBuffer, (usize, usize))>,
    /// The f32 dC chunk accumulator: its chunk and the token chunks added.
    dc_acc: Option<(usize, Vec<bool>)>,
    /// Per vocabulary chunk: the token chunks a direct dC product added, and finished writes.
    dc_direct: Vec<Vec<bool>>,
    dc_written: Vec<usize>,
    /// Per token chunk, the vocabulary chunks added to dE's accumulator; whether rounded.
    de_added: Vec<Vec<bool>>,
    de_rounded: Vec<bool>,
    db_added: Vec<Vec<bool>>,
    db_rounded: bool,
}

impl<'a> Sim<'a> {
    fn new(p: &'a BackwardPlan, what: Computes, de: bool) -> Self {
        let (v, t) = (p.vocab_chunks(), p.token_chunks());
        Sim {
            p,
            what,
            de,
            g: vec![],
            dc_acc: None,
            dc_direct: vec![vec![false; t]; v],
            dc_written: vec![0; v],
            de_added: vec![vec![false; v]; t],
            de_rounded: vec![false; t],
            db_added: vec![vec![false; t]; v],
            db_rounded: false,
        }
    }

    /// The bytes of dC that hold dE's f32 accumulator until dE is rounded.
    fn de_acc_in_dc(&self) -> Option<Range<usize>> {
        let d = self.p.shape.d;
        match self.p.de_acc {
            DeAccumulator::DcTail(t) => Some(t.byte_offset..t.byte_offset + 4 * t.rows_in_dc(self.p.shape.n) * d),
            DeAccumulator::DcHead => Some(0..4 * self.p.shape.n * d),
            _ => None,
        }
    }

    fn dc_bytes(&self, vc: usize) -> Range<usize> {
        let row = self.p.shape.d * self.p.dtype.size_in_bytes();
        let r = self.p.vocab_range(vc);
        r.start * row..r.end * row
    }

    fn de_final(&self) -> bool {
        self.de_rounded.iter().all(|&r| r)
    }

    /// Writing dC's bytes `bytes` (dC rows, or G in them): never over dE's live accumulator.
    fn writes_dc_bytes(&self, bytes: &Range<usize>, what: &str) -> Result<(), String> {
        match self.de_acc_in_dc() {
            Some(acc) if bytes.start < acc.end && acc.start < bytes.end && !self.de_final() => {
                Err(format!("{what} over dE's accumulator in dC ({bytes:?} against {acc:?}) before dE is rounded"))
            }
            _ => Ok(()),
        }
    }

    fn step(&mut self, step: Step) -> Result<(), String> {
        let (t, p) = (self.p.token_chunks(), self.p);
        match step {
            Step::Pair { vc, tc, pass } => {
                // G: written by this pair, or the main pass's last, kept
                let buffer = p.g_buffer(vc);
                if pass == Pass::TailKeptG {
                    let held = self.g.iter().find(|(b, _)| *b == buffer).map(|(_, k)| *k);
                    if held != Some((vc, tc)) || t != 1 {
                        return Err(format!("{step:?}: G holds {held:?}"));
                    }
                } else {
                    if let GBuffer::Dc { byte_offset, ldg } = buffer {
                        let bytes = byte_offset..byte_offset + p.token_range(tc).len() * ldg * p.dtype.size_in_bytes();
                        self.writes_dc_bytes(&bytes, "G")?;
                        let row = p.shape.d * p.dtype.size_in_bytes();
                        for (i, &w) in self.dc_written.iter().enumerate() {
                            let r = self.dc_bytes(i);
                            if w > 0 && r.start < bytes.end && bytes.start < r.end {
                                return Err(format!(
                                    "{step:?}: G over dC chunk {i}'s finished rows ({row} bytes a row)"
                                ));
                            }
                        }
                    }
                    self.g.retain(|(b, _)| *b != buffer);
                    self.g.push((buffer, (vc, tc)));
                }
                if pass == Pass::Main && self.what.db && p.db_acc.is_some() {
                    added(&mut self.db_added[vc], tc, "db")?;
                }
                if self.what.dc && writes_dc(p, vc, pass) {
                    match p.dc_acc {
                        DcAccumulator::Workspace(_) => match (&mut self.dc_acc, tc) {
                            (None, 0) => self.dc_acc = Some((vc, (0..t).map(|i| i == 0).collect())),
                            (Some((c, tcs)), _) if *c == vc && tc > 0 => added(tcs, tc, "dC's accumulator")?,
                            (acc, _) => return Err(format!("{step:?}: dC's accumulator holds {acc:?}")),
                        },
                        _ => {
                            self.writes_dc_bytes(&self.dc_bytes(vc), "a dC product")?;
                            added(&mut self.dc_direct[vc], tc, "dC")?;
                            if self.dc_direct[vc].iter().all(|&a| a) {
                                self.dc_written[vc] += 1;
                            }
                        }
                    }
                }
                if pass == Pass::Main && self.de {
                    if self.de_rounded[tc] {
                        return Err(format!("{step:?}: dE added to after its rounding"));
                    }
                    // in order: the first vocabulary chunk writes (the slice's rest's first adds
                    // to the head's share, outside this plan), each next one adds
                    let none = !self.de_added[tc].iter().any(|&a| a);
                    if (vc == 0) != none || (vc > 0 && !self.de_added[tc][vc - 1]) {
                        return Err(format!("{step:?}: dE's chunks out of order: {:?}", self.de_added[tc]));
                    }
                    self.de_added[tc][vc] = true;
                }
            }
            Step::RoundDc { vc } => {
                match &self.dc_acc {
                    Some((c, tcs)) if *c == vc && tcs.iter().all(|&a| a) => {}
                    acc => return Err(format!("{step:?}: the accumulator holds {acc:?}")),
                }
                self.writes_dc_bytes(&self.dc_bytes(vc), "a rounded dC chunk")?;
                self.dc_acc = None;
                self.dc_written[vc] += 1;
            }
            Step::RoundDeChunk { tc } => {
                if !self.de_added[tc].iter().all(|&a| a) || self.de_rounded[tc] {
                    return Err(format!("{step:?}: {:?}", self.de_added[tc]));
                }
                self.de_rounded[tc] = true;
            }
            Step::RoundDe => {
                if !self.de_added.iter().flatten().all(|&a| a) || self.de_final() {
                    return Err(format!("{step:?}: not every chunk added, or rounded twice"));
                }
                self.de_rounded.fill(true);
            }
            Step::RoundDb => {
                if !self.db_added.iter().flatten().all(|&a| a) || self.db_rounded {
                    return Err(format!("{step:?}: db incomplete or rounded twice"));
                }
                self.db_rounded = true;
            }
        }
        Ok(())
    }

    /// After the last step: every dC chunk written once, dE and db complete.
    fn finish(&self) -> Result<(), String> {
        if self.what.dc && (self.dc_written.iter().any(|&w| w != 1) || self.dc_acc.is_some()) {
            return Err(format!("dC chunks written {:?}", self.dc_written));
        }
        if self.de && !self.de_added.iter().flatten().all(|&a| a) {
            return Err("dE not added over every chunk".into());
        }
        if self.what.de_rounded && !self.de_final() {
            return Err("dE not rounded".into());
        }
        if self.what.db && self.p.db_acc.is_some() && !self.db_rounded {
            return Err("db not rounded".into());
        }
        Ok(())
    }
}

/// Marks `i` added, once.
fn added(flags: &mut [bool], i: usize, what: &str) -> Result<(), String> {
    if std::mem::replace(&mut flags[i], true) {
        return Err(format!("{what}: token chunk {i} added twice"));
    }
    Ok(())
}

/// Runs `plan`'s passes as `CudaLoss::passes` does for a call wanting its gradients.
fn simulate(plan: &BackwardPlan) -> Result<(), String> {
    let w = plan.wanted;
    let db = w.dbias;
    let run = |p: &BackwardPlan, what: Computes, de: bool| -> Result<(), String> {
        let mut sim = Sim::new(p, what, de);
        for step in one_pass_steps(p, what) {
            sim.step(step)
                .map_err(|e| format!("{e} (plan {:?} x {:?}, {:?})", p.token_chunk, p.vocab_chunk, p.de_acc))?;
        }
        sim.finish()
    };
    match &plan.de_pass {
        Some(de_plan) => {
            run(plan, Computes { de_rounded: false, dc: w.dc, db }, false)?;
            run(de_plan, Computes { de_rounded: de_plan.de_acc.needs_rounding(), dc: false, db: false }, true)
        }
        None => run(plan, Computes { de_rounded: w.de && plan.de_acc.needs_rounding(), dc: w.dc, db }, w.de),
    }
}

/// The family that runs `mode` on an H200 (132 SMs), as the planner is asked for it.
fn family_of(mode: BackwardMode) -> Family {
    match mode {
        BackwardMode::CublasLogits => Family::Cublas,
        BackwardMode::FusedSm80 => Family::Sm80,
        _ => Family::Sm90,
    }
}

fn plan(shape: Shape, dtype: DType, wanted: Wanted, budget: Option<usize>, mode: BackwardMode) -> BackwardPlan {
    backward_plan(shape, dtype, wanted, budget, mode, family_of(mode), 132).unwrap()
}

#[test]
fn every_plan_kind_writes_each_gradient_once_and_in_order() {
    let shapes = [
        Shape::new(8192, 4096, 128_256),
        Shape::new(16_384, 2048, 128_256),
        Shape::new(65_536, 4096, 128_256),
        Shape::new(3000, 64, 12_000),
        Shape::new(5000, 64, 3000),
        Shape::new(1, 64, 1000),
    ];
    let mut plans = 0;
    // token-chunked tails, f32 inputs in token chunks, dE passes, dC scratch, kept G, token-outer,
    // token chunks with dE's accumulator in the workspace
    let mut seen = [false; 7];
    for shape in shapes {
        for mode in [BackwardMode::FusedTiles, BackwardMode::CublasLogits] {
            for dtype in [DType::BF16, DType::F32] {
                for wanted in
                    [BOTH, Wanted { dbias: true, ..BOTH }, Wanted { dc: false, ..BOTH }, Wanted { de: false, ..BOTH }]
                {
                    let budget = default_backward_budget(shape, dtype, wanted, mode);
                    let one = plan(shape, dtype, wanted, Some(budget), mode);
                    let mut kinds = vec![one.clone(), with_dc_scratch(one.clone())];
                    kinds.push(with_token_chunks(one.clone(), budget, mode, true));
                    // a small budget (token chunks with dC's f32 accumulator) and a large one
                    // (where those budgets hold a plan)
                    let fam = family_of(mode);
                    let at = |b: usize| backward_plan(shape, dtype, wanted, Some(b), mode, fam, 132).ok();
                    kinds.extend([budget / 8, 4 << 30].into_iter().filter_map(at));
                    if wanted.de && wanted.dc && dtype != DType::F32 {
                        let pass = |w, b| backward_plan(shape, dtype, w, b, mode, fam, 132);
                        kinds.extend(de_pass_plan(shape, dtype, wanted, None, pass).ok());
                    }
                    for p in kinds {
                        simulate(&p).unwrap_or_else(|e| {
                            panic!("{shape:?} {dtype:?} {wanted:?} {mode:?} {}x{}: {e}", p.token_chunk, p.vocab_chunk)
                        });
                        plans += 1;
                        let chunked = p.token_chunks() > 1;
                        seen[0] |= chunked && p.dc_tail().is_some();
                        seen[1] |= chunked && dtype == DType::F32 && wanted.dc;
                        seen[2] |= p.de_pass.is_some();
                        seen[3] |= !p.dc_scratch.is_empty();
                        seen[4] |= p.token_chunks() == 1 && !p.tail_chunks().is_empty();
                        seen[5] |= p.token_outer;
                        seen[6] |= chunked && matches!(p.de_acc, DeAccumulator::Workspace(_));
                    }
                }
            }
        }
    }
    assert!(plans > 200, "{plans}");
    assert_eq!(seen, [true; 7], "plan kinds simulated");
}

#[test]
fn token_chunked_tail_plans_keep_dcs_rows_off_des_accumulator() {
    // the plans of plan::with_token_chunks: a tail within a third, the whole vocabulary with
    // accumulator rows in the workspace, 65k at Llama 3
    for shape in [Shape::new(3000, 64, 12_000), Shape::new(5000, 64, 3000), Shape::new(65_536, 4096, 128_256)] {
        let budget = default_backward_budget(shape, DType::BF16, BOTH, BackwardMode::FusedTiles);
        let one = plan(shape, DType::BF16, BOTH, Some(budget), BackwardMode::FusedTiles);
        let p = with_token_chunks(one, budget, BackwardMode::FusedTiles, true);
        assert!(p.token_chunks() > 1 && p.dc_tail().is_some(), "{shape:?}");
        simulate(&p).unwrap();
        // the main pass rounding a tail chunk's accumulator would write over dE's: caught
        let what = Computes { de_rounded: true, dc: true, db: false };
        let mut sim = Sim::new(&p, what, true);
        let tail = p.first_tail_chunk();
        let before: Vec<Step> = one_pass_steps(&p, what).into_iter().take_while(|s| *s != Step::RoundDe).collect();
        for s in &before {
            sim.step(*s).unwrap();
        }
        sim.dc_acc = Some((tail, vec![true; p.token_chunks()]));
        assert!(sim.step(Step::RoundDc { vc: tail }).is_err(), "{shape:?}");
    }
}

#[test]
fn the_slice_plans_rest_adds_to_the_heads_share() {
    let shape = Shape::new(8192, 4096, 128_256);
    let compact = ThreeProductLogits::Compact { sm_count: 132, tuning: crate::plan::Sm90Tuning::UNPAIRED };
    let fwd = |s: Shape| crate::plan::forward_plan(s, DType::BF16, 132, ForwardMode::Fused, None, Family::Sm90);
    for (dc_scratch, de_in_dc) in [(false, false), (true, false), (true, true)] {
        let rest = VocabSliceRest {
            mode: BackwardMode::FusedTiles,
            family: Family::Sm90,
            sm_count: 132,
            vocab_chunk: 6656,
            dc_scratch,
            de_in_dc,
        };
        let p = vocab_slice_plan_with_head(shape, DType::BF16, BOTH, 32_768, compact, rest, &fwd).unwrap();
        simulate(&p.rest).unwrap_or_else(|e| panic!("{dc_scratch} {de_in_dc}: {e}"));
    }
}
