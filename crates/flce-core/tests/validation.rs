//! Bad input gives a typed error naming the argument and value, and writes nothing.

use flce_core::cpu;
use flce_core::{Error, ForwardBuffers, GradBuffers, GradOutput, HostInputs, Options, Reduction, Shape};

const POISON: f32 = 12345.0;

fn data() -> (Vec<f32>, Vec<f32>, Vec<i64>) {
    let (n, d, v) = (4, 3, 5);
    let e = (0..n * d).map(|i| i as f32 * 0.1).collect();
    let c = (0..v * d).map(|i| (i as f32 * 0.3).sin()).collect();
    (e, c, vec![0, 4, -100, 2])
}

/// Run forward and backward into poisoned buffers; return the forward error and the backward
/// error, checking that neither wrote anything.
fn both_fail(inputs: &HostInputs<'_, f32>, opts: &Options, go: GradOutput<'_>) -> (Error, Error) {
    let s = inputs.shape;
    let mut lse = vec![POISON; s.n];
    let mut ptl = vec![POISON; s.n];
    let fe =
        cpu::forward_into(inputs, opts, ForwardBuffers { lse: &mut lse, per_token_loss: Some(&mut ptl) }).unwrap_err();
    assert!(lse.iter().chain(&ptl).all(|&x| x == POISON), "forward wrote before failing: {fe}");
    let mut de = vec![POISON; s.n * s.d];
    let mut dc = vec![POISON; s.v * s.d];
    let lse_in = vec![0.0; s.n];
    let be = cpu::backward_into(
        inputs,
        opts,
        &lse_in,
        go,
        GradBuffers { de: Some(&mut de), dc: Some(&mut dc), dbias: None },
    )
    .unwrap_err();
    assert!(de.iter().chain(&dc).all(|&x| x == POISON), "backward wrote before failing: {be}");
    (fe, be)
}

#[test]
fn target_out_of_range_names_index_and_value() {
    let (e, c, mut t) = data();
    t[1] = 5;
    let (fe, be) = both_fail(&HostInputs::new(&e, &c, &t, 3), &Options::default(), GradOutput::Scalar(1.0));
    for err in [fe, be] {
        assert!(matches!(err, Error::TargetOutOfRange { index: 1, value: 5, vocab: 5, ignore_index: -100 }), "{err}");
        assert!(err.to_string().contains("target[1] = 5"));
    }
    t[1] = -1;
    let (fe, _) = both_fail(&HostInputs::new(&e, &c, &t, 3), &Options::default(), GradOutput::Scalar(1.0));
    assert!(matches!(fe, Error::TargetOutOfRange { value: -1, .. }));
}

#[test]
fn shape_mismatches_name_the_argument() {
    let (e, c, t) = data();
    let mut inputs = HostInputs::new(&e, &c, &t, 3);
    inputs.shape.v = 6;
    let (fe, _) = both_fail(&inputs, &Options::default(), GradOutput::Scalar(1.0));
    assert!(matches!(fe, Error::ShapeMismatch { arg: "c", expected: 18, got: 15, .. }), "{fe}");

    let bias = [0.0f32; 4];
    let inputs = HostInputs::new(&e, &c, &t, 3).with_bias(&bias);
    let (fe, _) = both_fail(&inputs, &Options::default(), GradOutput::Scalar(1.0));
    assert!(matches!(fe, Error::ShapeMismatch { arg: "bias", expected: 5, got: 4, .. }), "{fe}");

    let w = [1.0f32; 3];
    let inputs = HostInputs::new(&e, &c, &t, 3).with_class_weights(&w);
    let (fe, _) = both_fail(&inputs, &Options::default(), GradOutput::Scalar(1.0));
    assert!(matches!(fe, Error::ShapeMismatch { arg: "class_weights", .. }), "{fe}");
}

#[test]
fn empty_dimensions_are_errors() {
    let (e, c, _) = data();
    let none: [i64; 0] = [];
    let err = cpu::forward(&HostInputs::new(&e[..0], &c, &none, 3), &Options::default()).unwrap_err();
    assert!(matches!(err, Error::EmptyDimension { dim } if dim.starts_with('N')), "{err}");
    let t = [0i64];
    let err = cpu::forward(&HostInputs::new(&e[..0], &c[..0], &t, 0), &Options::default()).unwrap_err();
    assert!(matches!(err, Error::EmptyDimension { .. }), "{err}");
}

#[test]
fn invalid_options_are_errors() {
    let (e, c, t) = data();
    let inputs = HostInputs::new(&e, &c, &t, 3);
    let bad = [
        ("label_smoothing", Options { label_smoothing: 1.01, ..Options::default() }),
        ("label_smoothing", Options { label_smoothing: -0.1, ..Options::default() }),
        ("label_smoothing", Options { label_smoothing: f32::NAN, ..Options::default() }),
        ("z_loss", Options { z_loss: -1.0, ..Options::default() }),
        ("z_loss", Options { z_loss: f32::INFINITY, ..Options::default() }),
        ("softcap", Options { softcap: Some(0.0), ..Options::default() }),
        ("softcap", Options { softcap: Some(f32::NAN), ..Options::default() }),
        ("shift", Options { shift: Some(0), ..Options::default() }),
        ("shift", Options { shift: Some(3), ..Options::default() }), // N = 4 is not a multiple of 3
    ];
    for (name, opts) in bad {
        let (fe, be) = both_fail(&inputs, &opts, GradOutput::Scalar(1.0));
        for err in [fe, be] {
            assert!(matches!(err, Error::InvalidOption { name: n, .. } if n == name), "{name}: {err}");
        }
    }
    let w = [1.0, f32::NAN, 1.0, 1.0, 1.0];
    let (fe, _) =
        both_fail(&HostInputs::new(&e, &c, &t, 3).with_class_weights(&w), &Options::default(), GradOutput::Scalar(1.0));
    assert!(matches!(fe, Error::InvalidOption { name: "class_weights", .. }), "{fe}");
}

#[test]
fn grad_output_must_match_reduction() {
    let (e, c, t) = data();
    let inputs = HostInputs::new(&e, &c, &t, 3);
    let none = Options { reduction: Reduction::None, ..Options::default() };
    let lse = vec![0.0; 4];
    let mut de = vec![POISON; 12];
    let err = cpu::backward_into(
        &inputs,
        &none,
        &lse,
        GradOutput::Scalar(1.0),
        GradBuffers { de: Some(&mut de), dc: None, dbias: None },
    )
    .unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { arg: "grad_output", .. }), "{err}");
    let g = [1.0f32; 3];
    let err = cpu::backward_into(
        &inputs,
        &none,
        &lse,
        GradOutput::PerToken(&g),
        GradBuffers { de: Some(&mut de), dc: None, dbias: None },
    )
    .unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { arg: "grad_output", expected: 4, got: 3, .. }), "{err}");
    let err = cpu::backward_into(
        &inputs,
        &Options::default(),
        &lse,
        GradOutput::PerToken(&[1.0; 4]),
        GradBuffers { de: Some(&mut de), dc: None, dbias: None },
    )
    .unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { arg: "grad_output", .. }), "{err}");
    assert!(de.iter().all(|&x| x == POISON));
    // reduction none needs somewhere to put the per-token loss
    let mut l = vec![POISON; 4];
    let err = cpu::forward_into(&inputs, &none, ForwardBuffers { lse: &mut l, per_token_loss: None }).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { arg: "per_token_loss", .. }), "{err}");
    assert!(l.iter().all(|&x| x == POISON));
}

#[test]
fn all_ignored_mean_is_nan_with_zero_gradients_like_pytorch() {
    let (e, c, _) = data();
    let t = [-100i64; 4];
    let inputs = HostInputs::new(&e, &c, &t, 3);
    let opts = Options { return_accuracy: true, ..Options::default() };
    let f = cpu::forward(&inputs, &opts).unwrap();
    assert!(f.loss.is_nan());
    assert!(f.accuracy.unwrap().is_nan());
    let g = cpu::backward(&inputs, &opts, &f.lse, GradOutput::Scalar(1.0)).unwrap();
    assert!(g.de.iter().chain(&g.dc).all(|&x| x == 0.0));
    let sum = Options { reduction: Reduction::Sum, ..Options::default() };
    assert_eq!(cpu::forward(&inputs, &sum).unwrap().loss, 0.0);
}

#[test]
fn nan_in_data_propagates_to_its_token() {
    let (mut e, c, t) = data();
    e[3] = f32::NAN; // token 1
    let inputs = HostInputs::new(&e, &c, &t, 3);
    let opts = Options { reduction: Reduction::None, ..Options::default() };
    let f = cpu::forward(&inputs, &opts).unwrap();
    let ptl = f.per_token_loss.unwrap();
    assert!(f.lse[1].is_nan() && ptl[1].is_nan());
    assert!(ptl[0].is_finite() && ptl[3].is_finite());
    let _ = Shape::new(1, 1, 1);
}
