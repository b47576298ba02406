//! Same input, bitwise the same output, whatever the thread count.

use flce_core::cpu;
use flce_core::testing::{DataKind, RandomProblem};
use flce_core::{bf16, GradOutput, Options, Shape};

#[test]
fn bitwise_identical_for_any_thread_count() {
    let opts = Options {
        label_smoothing: 0.1,
        z_loss: 1e-4,
        softcap: Some(30.0),
        return_accuracy: true,
        ..Options::default()
    };
    let p = RandomProblem::<bf16>::new(Shape::new(301, 67, 1031), 7, DataKind::Planted, 0.1, &opts, true, true);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let f = cpu::forward(&p.inputs(), &opts).unwrap();
            let g = cpu::backward(&p.inputs(), &opts, &f.lse, GradOutput::Scalar(1.0)).unwrap();
            (f.loss.to_bits(), f.lse.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), g.de, g.dc, g.dbias)
        })
    };
    let first = run(1);
    for threads in [1, 2, 3, 8] {
        assert!(run(threads) == first, "result changed with {threads} threads");
    }
}

#[test]
fn the_oracle_is_the_same_bits_for_any_thread_count() {
    // cpu::reference runs its O(N·V·D) loops over output rows in parallel, each element's sum in
    // the serial order; every option on, so each of its terms is exercised
    use flce_core::cpu::reference;
    let opts = Options {
        label_smoothing: 0.1,
        z_loss: 1e-4,
        softcap: Some(30.0),
        return_accuracy: true,
        ignore_index: 3,
        ..Options::default()
    };
    let p = RandomProblem::<bf16>::new(Shape::new(97, 45, 513), 11, DataKind::Planted, 0.2, &opts, true, true);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let r = reference::evaluate(&p.inputs(), &opts, GradOutput::Scalar(1.0)).unwrap();
            let bits = |xs: &[f64]| xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            (r.loss.to_bits(), bits(&r.lse), bits(&r.per_token_loss), bits(&r.de), bits(&r.dc), bits(&r.dbias))
        })
    };
    let first = run(1);
    assert!(first.3.iter().any(|&b| b != 0) && first.5.iter().any(|&b| b != 0), "gradients computed");
    for threads in [2, 3, 8] {
        assert!(run(threads) == first, "the oracle changed with {threads} threads");
    }
}
