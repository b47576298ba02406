//! flce against numbers computed once by PyTorch (torch 2.11.0, F.cross_entropy in float64 on
//! CPU tensors) where PyTorch defines the behaviour: class weights with and without label
//! smoothing, mean with class weights, a custom ignore_index, every token ignored.
//!
//! Made by `python3 scripts/tools/pytorch_expected.py` (the inputs are closed-form, rebuilt below);
//! for reduction none the gradient is taken of Σ_i (i+1)·loss_i, so grad_output = [1, 2, 3, 4].

use flce_core::cpu::{self, reference};
use flce_core::{GradOutput, HostInputs, Options, Reduction};

const N: usize = 4;
const D: usize = 3;
const V: usize = 5;

fn inputs() -> (Vec<f64>, Vec<f64>, Vec<f32>) {
    let e = (0..N * D).map(|x| (0.37 * x as f64 + 0.1).sin()).collect();
    let c = (0..V * D).map(|x| 0.5 * (0.91 * x as f64).cos()).collect();
    let w = (0..V).map(|j| 0.5 + 0.25 * (j % 3) as f32).collect();
    (e, c, w)
}

struct Expected {
    loss: &'static [f64],
    de: &'static [f64],
    dc: &'static [f64],
}

fn check(targets: [i64; N], weighted: bool, opts: Options, want: Expected) {
    let (e, c, w) = inputs();
    let mut x = HostInputs::new(&e, &c, &targets, D);
    if weighted {
        x = x.with_class_weights(&w);
    }
    let go_tok = [1.0f32, 2.0, 3.0, 4.0];
    let go = if opts.reduction == Reduction::None { GradOutput::PerToken(&go_tok) } else { GradOutput::Scalar(1.0) };
    // the f64 oracle: PyTorch's float64 numbers up to the f32 rounding of the option values and
    // per-token gradient scales (label_smoothing and grad_output are f32 in flce's API)
    let r = reference::evaluate(&x, &opts, go).unwrap();
    let got_loss = if opts.reduction == Reduction::None { r.per_token_loss.clone() } else { vec![r.loss] };
    for (name, got, want) in
        [("loss", &got_loss[..], want.loss), ("dE", &r.de[..], want.de), ("dC", &r.dc[..], want.dc)]
    {
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= 5e-8 * b.abs().max(1.0), "oracle {name}[{i}]: {a} vs PyTorch {b}");
        }
    }
    // the fused path on f32 copies of the same inputs
    let e32: Vec<f32> = e.iter().map(|&v| v as f32).collect();
    let c32: Vec<f32> = c.iter().map(|&v| v as f32).collect();
    let mut x32 = HostInputs::new(&e32, &c32, &targets, D);
    if weighted {
        x32 = x32.with_class_weights(&w);
    }
    let f = cpu::forward(&x32, &opts).unwrap();
    let g = cpu::backward(&x32, &opts, &f.lse, go).unwrap();
    let got_loss: Vec<f64> = if opts.reduction == Reduction::None {
        f.per_token_loss.unwrap().iter().map(|&v| v as f64).collect()
    } else {
        vec![f.loss as f64]
    };
    let de: Vec<f64> = g.de.iter().map(|&v| v as f64).collect();
    let dc: Vec<f64> = g.dc.iter().map(|&v| v as f64).collect();
    for (name, got, want) in [("loss", &got_loss[..], want.loss), ("dE", &de[..], want.de), ("dC", &dc[..], want.dc)] {
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= 2e-6 * b.abs().max(1.0), "fused {name}[{i}]: {a} vs PyTorch {b}");
        }
    }
}

#[test]
fn weighted_smoothed_mean() {
    let opts = Options { reduction: Reduction::Mean, label_smoothing: 0.2, ignore_index: -100, ..Options::default() };
    check(
        [0, 4, -100, 2],
        true,
        opts,
        Expected {
            loss: &[1.7878504836160183],
            de: &[
                -0.06638914594915639,
                -0.012284598221827904,
                0.051309906063507014,
                0.07655487518525816,
                0.0008947439570959896,
                -0.07545658458416124,
                0.0,
                0.0,
                0.0,
                -0.1617121656341045,
                -0.25588525702387843,
                -0.15238481207641036,
            ],
            dc: &[
                0.039074355041306165,
                -0.022918715746081328,
                -0.08180984587379264,
                -0.026350508468761757,
                -0.05559279373888105,
                -0.07731085517402769,
                0.19761434740330577,
                0.33058098760534044,
                0.41880504196051094,
                -0.033534427793132336,
                -0.07488593279157375,
                -0.10610197809246733,
                -0.1768037661827179,
                -0.17718354532880431,
                -0.15358236282022328,
            ],
        },
    );
}

#[test]
fn weighted_mean() {
    let opts = Options { reduction: Reduction::Mean, label_smoothing: 0.0, ignore_index: -100, ..Options::default() };
    check(
        [0, 4, -100, 2],
        true,
        opts,
        Expected {
            loss: &[1.8222085374129624],
            de: &[
                -0.08804729099927766,
                -0.023077834805455416,
                0.059719444960771216,
                0.08241184512872524,
                -0.015913145065839192,
                -0.10194509541904057,
                0.0,
                0.0,
                0.0,
                -0.1919734890086184,
                -0.29832378079004906,
                -0.17421641585403064,
            ],
            dc: &[
                0.040890508049436086,
                -0.03841353355530327,
                -0.11251848359936455,
                -0.018578837915953994,
                -0.049973928692515455,
                -0.07460528265884234,
                0.2365678088130907,
                0.39775184287309884,
                0.5051020309384787,
                -0.029628464287569913,
                -0.07400938460915014,
                -0.10837348191760017,
                -0.22925101465900294,
                -0.23535499601613005,
                -0.20960478276267167,
            ],
        },
    );
}

#[test]
fn weighted_smoothed_sum() {
    let opts = Options { reduction: Reduction::Sum, label_smoothing: 0.2, ignore_index: -100, ..Options::default() };
    check(
        [0, 4, -100, 2],
        true,
        opts,
        Expected {
            loss: &[4.022663588136041],
            de: &[
                -0.1493755783856019,
                -0.027640345999112772,
                0.11544728864289079,
                0.1722484691668309,
                0.0020131739034659653,
                -0.16977731531436285,
                0.0,
                0.0,
                0.0,
                -0.36385237267673515,
                -0.5757418283037266,
                -0.3428658271719233,
            ],
            dc: &[
                0.08791729884293893,
                -0.05156711042868296,
                -0.18407215321603346,
                -0.059288644054713964,
                -0.1250837859124824,
                -0.17394942414156236,
                0.44463228165743807,
                0.743807222112016,
                0.9423113444111496,
                -0.07545246253454778,
                -0.16849334878104097,
                -0.23872945070805157,
                -0.39780847391111546,
                -0.3986629769898099,
                -0.34556031634550255,
            ],
        },
    );
}

#[test]
fn weighted_smoothed_none() {
    let opts = Options { reduction: Reduction::None, label_smoothing: 0.2, ignore_index: -100, ..Options::default() };
    check(
        [0, 4, -100, 2],
        true,
        opts,
        Expected {
            loss: &[0.8854264909754541, 1.0139821141127805, 0.0, 2.1232549830478065],
            de: &[
                -0.1493755783856019,
                -0.027640345999112772,
                0.11544728864289079,
                0.3444969383336618,
                0.0040263478069319306,
                -0.3395546306287257,
                0.0,
                0.0,
                0.0,
                -1.4554094907069406,
                -2.302967313214906,
                -1.3714633086876933,
            ],
            dc: &[
                0.1404326423717551,
                -0.10410269920238942,
                -0.33454822880732943,
                -0.26200378575467315,
                -0.5681717573687176,
                -0.7974403470371113,
                1.3041228194614023,
                2.353838864964649,
                3.0849738624522214,
                -0.33914777746650554,
                -0.7502821915186594,
                -1.0598694306816343,
                -0.8434038986119791,
                -0.931282216874883,
                -0.8931158559261467,
            ],
        },
    );
}

#[test]
fn smoothed_mean() {
    let opts = Options { reduction: Reduction::Mean, label_smoothing: 0.3, ignore_index: -100, ..Options::default() };
    check(
        [0, 4, -100, 2],
        false,
        opts,
        Expected {
            loss: &[1.7621141408354781],
            de: &[
                -0.08565264540115189,
                -0.009177705246445362,
                0.07438709023101787,
                0.0750550178253598,
                0.015884161446959328,
                -0.05555734468082912,
                0.0,
                0.0,
                0.0,
                -0.11356738434880638,
                -0.1791793775671681,
                -0.10637377840699419,
            ],
            dc: &[
                0.03152996311491501,
                -0.04059563790818746,
                -0.10722680978316328,
                -0.022915770865856496,
                -0.04039384709942049,
                -0.05240480562418092,
                0.16765784457481567,
                0.2723598503485077,
                0.3401992280753461,
                -0.03192702816957714,
                -0.06076432954696104,
                -0.08137746397851986,
                -0.14434500865429714,
                -0.13060603579393873,
                -0.09919014868948206,
            ],
        },
    );
}

#[test]
fn custom_ignore() {
    let opts = Options { reduction: Reduction::Mean, label_smoothing: 0.1, ignore_index: 3, ..Options::default() };
    check(
        [0, 3, 3, 2],
        true,
        opts,
        Expected {
            loss: &[2.053963822156697],
            de: &[
                -0.11582732771132553,
                -0.02652182477046249,
                0.08327201326820866,
                0.0,
                0.0,
                0.0,
                0.0,
                0.0,
                0.0,
                -0.2652642409820422,
                -0.41565677836044557,
                -0.24495092094783075,
            ],
            dc: &[
                -0.04897169318394623,
                -0.16243662082124252,
                -0.2539165138550196,
                -0.04752386589289504,
                -0.09395276095793083,
                -0.12766559057963675,
                0.16485646672383408,
                0.3744127361775092,
                0.5332939982391051,
                -0.06270101363156173,
                -0.12805448632691707,
                -0.1760763850286759,
                -0.005659894015431113,
                0.01003113192858115,
                0.02436449122422712,
            ],
        },
    );
}

#[test]
fn all_ignored() {
    let (e, c, _) = inputs();
    let t = [-100i64; N];
    let x = HostInputs::new(&e, &c, &t, D);
    // PyTorch: mean over no tokens is NaN ([f64::NAN]), sum is 0 ([0.0]) with zero gradients
    let r = reference::evaluate(&x, &Options::default(), GradOutput::Scalar(1.0)).unwrap();
    assert!(r.loss.is_nan());
    let sum = Options { reduction: Reduction::Sum, ..Options::default() };
    let r = reference::evaluate(&x, &sum, GradOutput::Scalar(1.0)).unwrap();
    assert_eq!(r.loss, 0.0);
    assert!(r.de.iter().chain(&r.dc).all(|&v| v == 0.0));
}
