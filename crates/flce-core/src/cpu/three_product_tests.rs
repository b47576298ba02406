//! The three-product pass against the recomputing path (fused forward + backward) and the f64
//! oracle: every option, awkward shapes, token chunks that do and do not divide N.

use super::*;
use crate::cpu::{backward, forward, reference};
use crate::testing::{rel_err, DataKind, RandomProblem};
use crate::{bf16, Gradients, Shape};

fn options(reduction: Reduction) -> Options {
    Options {
        reduction,
        label_smoothing: 0.1,
        z_loss: 1e-4,
        softcap: Some(30.0),
        return_accuracy: true,
        ignore_index: 5,
        ..Options::default()
    }
}

/// The pass's forward scalars, lse and gradients.
fn step<T: Element>(p: &RandomProblem<T>, opts: &Options, chunk: usize) -> (ForwardScalars, Vec<f32>, Gradients<T>) {
    let s = p.shape;
    let mut lse = vec![0.0; s.n];
    let (mut de, mut dc) = (vec![T::default(); s.n * s.d], vec![T::default(); s.v * s.d]);
    let mut db = p.bias.as_ref().map(|_| vec![T::default(); s.v]);
    let grads = GradBuffers { de: Some(&mut de), dc: Some(&mut dc), dbias: db.as_deref_mut() };
    let scalars =
        forward_backward_into(&p.inputs(), opts, chunk, ForwardBuffers { lse: &mut lse, per_token_loss: None }, grads)
            .unwrap();
    (scalars, lse, Gradients { de, dc, dbias: db })
}

fn f32s<T: Element>(x: &[T]) -> Vec<f32> {
    x.iter().map(|v| v.to_f32()).collect()
}

#[test]
fn equals_the_recomputing_path_for_every_option_and_chunk() {
    for reduction in [Reduction::Mean, Reduction::Sum] {
        let opts = options(reduction);
        // V not a multiple of the vocabulary block, N = 1, N not a multiple of the chunks
        for shape in [Shape::new(1, 24, 1500), Shape::new(300, 40, 1031)] {
            let p = RandomProblem::<f32>::new(shape, 11, DataKind::Planted, 0.1, &opts, true, true);
            let fwd = forward(&p.inputs(), &opts).unwrap();
            let bwd = backward(&p.inputs(), &opts, &fwd.lse, GradOutput::Scalar(1.0)).unwrap();
            for chunk in [1, 7, 128, 1000] {
                let (scalars, lse, g) = step(&p, &opts, chunk);
                let what = format!("{reduction:?} {shape} chunk {chunk}");
                assert!((scalars.loss - fwd.loss).abs() <= 1e-5 * fwd.loss.abs(), "{what}: loss");
                assert_eq!(scalars.accuracy, fwd.accuracy, "{what}: accuracy");
                // the same folding order as the forward; the logits GEMMs of other tile heights round
                // differently in the last bit
                assert!(rel_err(&lse, &fwd.lse) < 1e-6, "{what}: lse");
                for (name, a, b) in [("dE", &g.de, &bwd.de), ("dC", &g.dc, &bwd.dc)] {
                    let e = rel_err(a, b);
                    assert!(e < 1e-5, "{what}: {name} {e:e}");
                }
                let e = rel_err(g.dbias.as_ref().unwrap(), bwd.dbias.as_ref().unwrap());
                assert!(e < 1e-5, "{what}: db {e:e}");
            }
        }
    }
}

#[test]
fn bf16_gradients_are_as_exact_as_the_recomputing_paths() {
    let opts = options(Reduction::Mean);
    let shape = Shape::new(257, 64, 2100);
    let p = RandomProblem::<bf16>::new(shape, 4, DataKind::Peaky, 0.1, &opts, true, true);
    let oracle = reference::evaluate(&p.inputs(), &opts, GradOutput::Scalar(1.0)).unwrap();
    let fwd = forward(&p.inputs(), &opts).unwrap();
    let bwd = backward(&p.inputs(), &opts, &fwd.lse, GradOutput::Scalar(1.0)).unwrap();
    let (_, _, g) = step(&p, &opts, 100);
    let want_de: Vec<f32> = oracle.de.iter().map(|&x| x as f32).collect();
    let want_dc: Vec<f32> = oracle.dc.iter().map(|&x| x as f32).collect();
    for (name, got, recomputed, want) in [("dE", &g.de, &bwd.de, &want_de), ("dC", &g.dc, &bwd.dc, &want_dc)] {
        let (e, e_ref) = (rel_err(&f32s(got), want), rel_err(&f32s(recomputed), want));
        // both round each gradient once to bf16: the same error to within a few percent
        assert!(e <= e_ref * 1.1 + 1e-6, "{name}: {e:e} against the recomputing path's {e_ref:e}");
    }
}

#[test]
fn de_does_not_depend_on_the_chunk_and_runs_are_reproducible() {
    let opts = options(Reduction::Mean);
    let p = RandomProblem::<bf16>::new(Shape::new(200, 32, 1300), 2, DataKind::Planted, 0.1, &opts, true, false);
    let (_, _, a) = step(&p, &opts, 64);
    let (_, _, b) = step(&p, &opts, 64);
    let (_, _, c) = step(&p, &opts, 200);
    let bits = |x: &[bf16]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.de), bits(&b.de));
    assert_eq!(bits(&a.dc), bits(&b.dc));
    // each token's dE is one product over V, whatever chunk it was in
    assert_eq!(bits(&a.de), bits(&c.de));
}

#[test]
fn refuses_reduction_none_and_empty_chunks() {
    let p =
        RandomProblem::<f32>::new(Shape::new(4, 8, 10), 1, DataKind::Planted, 0.0, &Options::default(), false, false);
    let none = Options { reduction: Reduction::None, ..Options::default() };
    let s = p.shape;
    let (mut lse, mut de) = (vec![0.0; s.n], vec![0.0f32; s.n * s.d]);
    let err = forward_backward_into(
        &p.inputs(),
        &none,
        2,
        ForwardBuffers { lse: &mut lse, per_token_loss: None },
        GradBuffers { de: Some(&mut de), dc: None, dbias: None },
    )
    .unwrap_err();
    assert!(err.to_string().contains("reduction"), "{err}");
    let err = forward_backward_into(
        &p.inputs(),
        &Options::default(),
        0,
        ForwardBuffers { lse: &mut lse, per_token_loss: None },
        GradBuffers { de: Some(&mut de), dc: None, dbias: None },
    )
    .unwrap_err();
    assert!(err.to_string().contains("token_chunk"), "{err}");
}
