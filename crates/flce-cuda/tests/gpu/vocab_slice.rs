//! The vocabulary-slice pass (`CudaLoss::forward_backward_vocab_slice`, `plan::VocabSlicePlan`) against the
//! f64 oracle for grad_output 1, where the GPU and the call allow compact logits: a head of one
//! tile and a head of every whole tile but the last (a rest shorter than a tile where V is not a
//! multiple of 256), the rest's backward in chunks of 256 rows (several, each adding to the
//! head's share of dE) with G and dE's accumulator in the workspace, and again with the first
//! chunks' G in dC's unwritten rows and dE's accumulator in dC's head rows
//! (`VocabSliceRest::dc_scratch`, `de_in_dc`: the default), each run twice and compared
//! bitwise; a dE off a 4-byte boundary refused before any
//! kernel where the head keeps its maxima in dE's rows.

use flce_core::cpu::reference;
use flce_core::testing::RandomProblem;
use flce_core::Element;
use flce_cuda::plan::{
    vocab_slice_plan_with_head, DeAccumulator, ForwardBackwardPlan, MrefPlace, ThreeProductLogits, VocabSliceRest,
    Wanted,
};
use flce_cuda::{BackwardMode, CudaLoss, Family, ForwardConfig, UploadedInputs};

use crate::oracle::{bits, compare};
use crate::three_product::{forward_backward_run, misaligned_de_is_refused};
use crate::Case;

pub(crate) fn check_vocab_slice<T: Element>(
    be: &CudaLoss,
    up: &UploadedInputs,
    c: &Case,
    p: &RandomProblem<T>,
    oracle: &reference::Reference,
    go: &[f32],
) -> Result<String, String> {
    let s = up.inputs.shape;
    let storage = be.three_product_logits(s, T::DTYPE, &c.opts);
    if !matches!(storage, ThreeProductLogits::Compact { .. }) || s.v <= 256 || !up.inputs.rows_aligned() {
        return Ok("-".into());
    }
    let wanted = Wanted { de: true, dc: true, dbias: up.bias.is_some() };
    let forward_plan = |shape| be.forward_plan(shape, T::DTYPE, ForwardConfig::default());
    let mut heads = vec![256, (s.v - 1) / 256 * 256];
    heads.dedup();
    let mut report = vec![];
    // the rest in chunks of 256 rows (several) with G and dE's accumulator in the workspace; or
    // the first chunks larger with their G in dC's unwritten rows and dE's accumulator in dC's
    // head rows where they hold it (VocabSliceRest::dc_scratch, de_in_dc)
    for in_dc in [false, true] {
        let rest = VocabSliceRest {
            mode: BackwardMode::FusedTiles,
            family: Family::Sm90,
            sm_count: be.sm_count(),
            vocab_chunk: 256,
            dc_scratch: in_dc,
            de_in_dc: in_dc,
        };
        for &head in &heads {
            let plan = vocab_slice_plan_with_head(s, T::DTYPE, wanted, head, storage, rest, &forward_plan)
                .map_err(|e| format!("head {head}: {e}"))?;
            let (chunks, scratch) = (plan.rest.vocab_chunks(), plan.rest.dc_scratch.len());
            let acc = if plan.rest.de_acc == DeAccumulator::DcHead { ", dE's accumulator in dC" } else { "" };
            let what = format!("slice head {head} + {chunks} chunks ({scratch} with G in dC{acc})");
            let de_rows = plan.head.m_ref == Some(MrefPlace::DeRows);
            let plan = ForwardBackwardPlan::VocabSlice(plan);
            let a = forward_backward_run::<T>(be, up, c, &plan)?;
            let b = forward_backward_run::<T>(be, up, c, &plan)?;
            if bits(&a) != bits(&b) {
                return Err(format!("{what}: results differ between two identical runs"));
            }
            let m = compare(c, p, oracle, go, &a).map_err(|e| format!("{what}: {e}"))?;
            report.push(format!("{what}: {m}"));
            if de_rows && !in_dc {
                misaligned_de_is_refused::<T>(be, up, c, &plan).map_err(|e| format!("{what}: {e}"))?;
            }
        }
    }
    Ok(report.join("; "))
}
