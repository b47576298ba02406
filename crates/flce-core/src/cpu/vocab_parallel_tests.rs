//! The phases against the one-call forward and backward: a vocabulary split into slices, each
//! slice's partials computed from its rows of C alone, merged in order, finished.

use super::*;
use crate::cpu::{backward, forward};
use crate::testing::{DataKind, RandomProblem};
use crate::{bf16, Element, ForwardOutput, HostInputs, Shape};

/// Slice `rows` of the problem's classifier (and of bias and class weights), as a rank holds it.
fn slice_inputs<'a, T: Element>(p: &'a RandomProblem<T>, rows: std::ops::Range<usize>) -> HostInputs<'a, T> {
    let d = p.shape.d;
    HostInputs {
        shape: Shape::new(p.shape.n, d, rows.len()),
        e: &p.e,
        c: &p.c[rows.start * d..rows.end * d],
        bias: p.bias.as_deref().map(|b| &b[rows.clone()]),
        targets: &p.targets,
        class_weights: p.class_weights.as_deref().map(|w| &w[rows.clone()]),
    }
}

/// The forward through the steps over `cuts` (slice boundaries, 0 and V included).
fn phased_forward<T: Element>(p: &RandomProblem<T>, opts: &Options, cuts: &[usize]) -> ForwardOutput {
    let n = p.shape.n;
    let mut merged = Partials::empty(n);
    for w in cuts.windows(2) {
        let slice = VocabSlice { offset: w[0], total: p.shape.v };
        merged.merge(&forward_partials(&slice_inputs(p, w[0]..w[1]), slice, opts).unwrap()).unwrap();
    }
    let targets = crate::effective_targets(&p.targets, p.shape.v, opts).unwrap();
    let (mut lse, mut per_token) = (vec![0.0; n], vec![0.0; n]);
    let out = ForwardBuffers { lse: &mut lse, per_token_loss: Some(&mut per_token) };
    let s = finish(&merged, &targets, p.shape.v, opts, out).unwrap();
    ForwardOutput { loss: s.loss, lse, per_token_loss: Some(per_token), accuracy: s.accuracy }
}

fn bits(f: &ForwardOutput) -> (u32, Vec<u32>, Vec<u32>, Option<u32>) {
    let b = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect();
    (f.loss.to_bits(), b(&f.lse), b(f.per_token_loss.as_deref().unwrap()), f.accuracy.map(f32::to_bits))
}

fn options() -> Options {
    Options {
        label_smoothing: 0.1,
        z_loss: 1e-4,
        softcap: Some(30.0),
        return_accuracy: true,
        return_per_token_loss: true,
        ..Options::default()
    }
}

#[test]
fn one_segment_per_slice_reproduces_the_one_call_forward_bitwise() {
    let opts = options();
    // V spans three whole segments and a partial fourth; N = 1 and an odd N
    for shape in [Shape::new(1, 40, 3 * SEGMENT_ROWS + 1000), Shape::new(131, 40, 3 * SEGMENT_ROWS + 1000)] {
        let p = RandomProblem::<bf16>::new(shape, 3, DataKind::Planted, 0.1, &opts, true, true);
        let whole = forward(&p.inputs(), &opts).unwrap();
        assert_eq!(bits(&phased_forward(&p, &opts, &[0, shape.v])), bits(&whole), "one range");
        let cuts: Vec<usize> = (0..4).map(|k| k * SEGMENT_ROWS).chain([shape.v]).collect();
        assert_eq!(bits(&phased_forward(&p, &opts, &cuts)), bits(&whole), "one segment per slice");
    }
}

#[test]
fn any_split_matches_to_rounding_and_is_reproducible() {
    let opts = options();
    let shape = Shape::new(77, 33, 9001);
    let p = RandomProblem::<f32>::new(shape, 5, DataKind::Peaky, 0.1, &opts, true, true);
    let whole = forward(&p.inputs(), &opts).unwrap();
    for cuts in [vec![0, 1, 9001], vec![0, 3000, 3001, 7777, 9001], vec![0, 4500, 9001]] {
        let a = phased_forward(&p, &opts, &cuts);
        assert_eq!(bits(&a), bits(&phased_forward(&p, &opts, &cuts)), "{cuts:?}: not reproducible");
        let rel = crate::testing::rel_err(&a.lse, &whole.lse);
        assert!(rel < 1e-6, "{cuts:?}: lse {rel:e}");
        assert!(((a.loss - whole.loss) / whole.loss).abs() < 1e-6, "{cuts:?}: loss {} vs {}", a.loss, whole.loss);
        assert_eq!(a.accuracy, whole.accuracy);
    }
}

#[test]
fn backward_on_slices_gives_the_one_call_gradients() {
    let opts = options();
    let shape = Shape::new(129, 24, 2 * SEGMENT_ROWS + 700);
    let p = RandomProblem::<f32>::new(shape, 9, DataKind::Planted, 0.1, &opts, true, true);
    let whole = forward(&p.inputs(), &opts).unwrap();
    let go = GradOutput::Scalar(1.0);
    let full = backward(&p.inputs(), &opts, &whole.lse, go).unwrap();
    let cuts = [0, 1536, 5120, shape.v]; // slices on vocabulary-block boundaries
    let mut merged = Partials::empty(shape.n);
    for w in cuts.windows(2) {
        let slice = VocabSlice { offset: w[0], total: shape.v };
        merged.merge(&forward_partials(&slice_inputs(&p, w[0]..w[1]), slice, &opts).unwrap()).unwrap();
    }
    let (mut de, mut dc, mut db) = (vec![0.0f32; shape.n * shape.d], vec![], vec![]);
    for w in cuts.windows(2) {
        let slice = VocabSlice { offset: w[0], total: shape.v };
        let (mut de_k, mut dc_k, mut db_k) =
            (vec![0.0f32; de.len()], vec![0.0f32; w[1] - w[0]].repeat(shape.d), vec![0.0f32; w[1] - w[0]]);
        let out = SliceGradBuffers { de_partial: Some(&mut de_k), dc: Some(&mut dc_k), dbias: Some(&mut db_k) };
        backward_slice(&slice_inputs(&p, w[0]..w[1]), slice, &opts, &whole.lse, &merged, go, out).unwrap();
        de.iter_mut().zip(&de_k).for_each(|(a, b)| *a += b);
        dc.extend(dc_k);
        db.extend(db_k);
    }
    // dC and db rows are each one block's own sums: bitwise the same; dE adds slices' shares
    assert_eq!(dc, full.dc);
    assert_eq!(db, full.dbias.unwrap());
    let rel = crate::testing::rel_err(&de, &full.de);
    assert!(rel < 1e-6, "dE {rel:e}");
}

#[test]
fn bad_slices_and_mismatched_partials_are_errors() {
    let opts = Options::default();
    let p = RandomProblem::<f32>::new(Shape::new(4, 8, 100), 1, DataKind::Planted, 0.0, &opts, false, false);
    let err = forward_partials(&slice_inputs(&p, 0..60), VocabSlice { offset: 50, total: 100 }, &opts).unwrap_err();
    assert!(matches!(err, Error::InvalidOption { name: "vocab_slice", .. }), "{err}");
    // targets are checked against the whole vocabulary, not the slice
    let targets = [50i64, 3, -100, 99];
    let x = HostInputs { targets: &targets, ..slice_inputs(&p, 0..10) };
    let part = forward_partials(&x, VocabSlice { offset: 0, total: 100 }, &opts).unwrap();
    assert_eq!((part.target_weight[0], part.target_weight[1]), (0.0, 1.0), "only the slice's own targets");
    let err = forward_partials(&x, VocabSlice { offset: 0, total: 60 }, &opts).unwrap_err();
    assert!(matches!(err, Error::TargetOutOfRange { index: 3, .. }), "{err}");
    let mut a = Partials::empty(4);
    assert!(a.merge(&Partials::empty(5)).is_err());
}
