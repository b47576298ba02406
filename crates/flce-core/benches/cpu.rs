//! CPU benchmark: the fused loss + gradients against the naive materialised path and against the
//! bare GEMMs an exact forward + backward needs (the floor: 4 logits-sized f32 products through
//! the same GEMM library, all threads).
//!
//!     cargo bench -p flce-core --bench cpu
//!
//! The `memory_vs_tokens` group shows the fused path's allocations staying flat as N grows
//! (divan's allocation profiler: "max alloc" per iteration), while the naive path grows with N·V.

use divan::{AllocProfiler, Bencher};
use flce_core::cpu::{self, materialized};
use flce_core::testing::{DataKind, RandomProblem};
use flce_core::{bf16, GradOutput, Options, Shape};

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

fn main() {
    divan::main();
}

const SHAPE: Shape = Shape { n: 256, d: 1024, v: 16384 };
const WIDE: Shape = Shape { n: 512, d: 1024, v: 128_256 };

fn problem(shape: Shape) -> RandomProblem<bf16> {
    RandomProblem::new(shape, 1, DataKind::Peaky, 0.05, &Options::default(), false, false)
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn fused_forward_backward(b: Bencher) {
    let p = problem(SHAPE);
    let opts = Options::default();
    b.bench_local(|| {
        let f = cpu::forward(&p.inputs(), &opts).unwrap();
        cpu::backward(&p.inputs(), &opts, &f.lse, GradOutput::Scalar(1.0)).unwrap()
    });
}

/// The three-product pass (cpu::step) against the recomputing pass (fused forward + backward),
/// at SHAPE and at a wide vocabulary (Llama 3's, 512 tokens), token chunks of the whole batch.
#[divan::bench(sample_count = 5, sample_size = 1, args = [SHAPE, WIDE])]
fn step_forward_backward(b: Bencher, shape: Shape) {
    let p = problem(shape);
    let opts = Options::default();
    let s = p.shape;
    b.bench_local(|| {
        let mut lse = vec![0.0; s.n];
        let (mut de, mut dc) = (vec![bf16::ZERO; s.n * s.d], vec![bf16::ZERO; s.v * s.d]);
        let out = flce_core::ForwardBuffers { lse: &mut lse, per_token_loss: None };
        let grads = flce_core::GradBuffers { de: Some(&mut de), dc: Some(&mut dc), dbias: None };
        cpu::three_product::forward_backward_into(&p.inputs(), &opts, s.n, out, grads).unwrap()
    });
}

#[divan::bench(sample_count = 5, sample_size = 1, args = [SHAPE, WIDE])]
fn recomputing_forward_backward(b: Bencher, shape: Shape) {
    let p = problem(shape);
    let opts = Options::default();
    b.bench_local(|| {
        let f = cpu::forward(&p.inputs(), &opts).unwrap();
        cpu::backward(&p.inputs(), &opts, &f.lse, GradOutput::Scalar(1.0)).unwrap()
    });
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn fused_forward(b: Bencher) {
    let p = problem(SHAPE);
    let opts = Options::default();
    b.bench_local(|| cpu::forward(&p.inputs(), &opts).unwrap());
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn materialized_forward_backward(b: Bencher) {
    let p = problem(SHAPE);
    let opts = Options::default();
    b.bench_local(|| materialized::loss_and_grads(&p.inputs(), &opts, GradOutput::Scalar(1.0)).unwrap());
}

/// The floor: one f32 logits GEMM of the same size (×4 for forward + exact backward).
#[divan::bench(sample_count = 5, sample_size = 1)]
fn bare_logits_gemm(b: Bencher) {
    let Shape { n, d, v } = SHAPE;
    let e: Vec<f32> = (0..n * d).map(|i| ((i % 97) as f32 - 48.0) / 97.0).collect();
    let c: Vec<f32> = (0..v * d).map(|i| ((i % 89) as f32 - 44.0) / 89.0).collect();
    let mut out = vec![0.0f32; n * v];
    b.bench_local(|| materialized::logits_gemm(&e, &c, n, d, v, &mut out));
}

#[divan::bench_group(sample_count = 3, sample_size = 1)]
mod memory_vs_tokens {
    use super::*;

    const TOKENS: &[usize] = &[128, 512, 2048];

    #[divan::bench(args = TOKENS)]
    fn fused(b: Bencher, n: usize) {
        let p = problem(Shape::new(n, 256, 8192));
        let opts = Options::default();
        b.bench_local(|| {
            let f = cpu::forward(&p.inputs(), &opts).unwrap();
            cpu::backward(&p.inputs(), &opts, &f.lse, GradOutput::Scalar(1.0)).unwrap()
        });
    }

    #[divan::bench(args = TOKENS)]
    fn materialized(b: Bencher, n: usize) {
        let p = problem(Shape::new(n, 256, 8192));
        let opts = Options::default();
        b.bench_local(|| materialized::loss_and_grads(&p.inputs(), &opts, GradOutput::Scalar(1.0)).unwrap());
    }
}
