//! Two threads, each on a stream of its own, running forward + backward on one backend at once:
//! the results equal the same calls run one after the other, bit for bit (the backend's one cuBLAS
//! handle is locked across its set-stream and every product of a call).

use cudarc::driver::result::stream::{self, StreamKind};
use flce_core::testing::{DataKind, RandomProblem};
use flce_core::{bf16, Options, Shape};
use flce_cuda::{BackwardConfig, CudaLoss, ForwardConfig};

use crate::oracle::{bits, go_for, gpu_run, gpu_run_on, GpuRun};

pub(crate) fn run_two_threads(be: &CudaLoss) -> Result<String, String> {
    let opts = Options::default();
    let shapes = [Shape::new(300, 128, 2049), Shape::new(257, 520, 300)];
    let mut ups = vec![];
    for (i, &shape) in shapes.iter().enumerate() {
        let p = RandomProblem::<bf16>::new(shape, 30 + i as u64, DataKind::Peaky, 0.1, &opts, false, false);
        ups.push(be.upload(&p.inputs(), &opts).map_err(|e| e.to_string())?);
    }
    let go = go_for(&opts, 1);
    let (fconfig, config) = (ForwardConfig::default(), BackwardConfig::default());
    let alone: Vec<GpuRun<bf16>> =
        ups.iter().map(|up| gpu_run(be, up, &opts, &go, fconfig, config)).collect::<Result<_, _>>()?;
    for round in 0..3 {
        let together: Vec<Result<GpuRun<bf16>, String>> = std::thread::scope(|scope| {
            let threads: Vec<_> = ups
                .iter()
                .map(|up| {
                    let go = &go;
                    let opts = &opts;
                    scope.spawn(move || {
                        be.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
                        let s = stream::create(StreamKind::NonBlocking).map_err(|e| format!("{e:?}"))?;
                        let run = gpu_run_on(be, up, opts, go, fconfig, config, s);
                        // SAFETY: the stream was made above and its work has finished (gpu_run_on
                        // synchronises the context before it returns).
                        unsafe { stream::destroy(s) }.map_err(|e| format!("{e:?}"))?;
                        run
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap_or_else(|_| Err("thread panicked".into()))).collect()
        });
        for (i, (a, b)) in alone.iter().zip(together).enumerate() {
            if bits(a) != bits(&b?) {
                return Err(format!("round {round}: problem {i} differs when run beside the other"));
            }
        }
    }
    Ok("3 rounds of two concurrent threads, each bitwise equal to its run alone".into())
}

/// The same call on device 1 (the caller runs it where a second GPU exists) gives device 0's
/// bits, and leaves the calling thread's context as it found it.
pub(crate) fn run_device_one(be: &CudaLoss) -> Result<String, String> {
    use cudarc::driver::result::ctx;
    let opts = Options::default();
    let p = RandomProblem::<bf16>::new(Shape::new(300, 128, 2049), 41, DataKind::Peaky, 0.1, &opts, false, false);
    let go = go_for(&opts, 1);
    let (fconfig, config) = (ForwardConfig::default(), BackwardConfig::default());
    be.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
    let up0 = be.upload(&p.inputs(), &opts).map_err(|e| e.to_string())?;
    let zero: GpuRun<bf16> = gpu_run(be, &up0, &opts, &go, fconfig, config)?;
    let other = CudaLoss::new(1).map_err(|e| e.to_string())?;
    other.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
    let up1 = other.upload(&p.inputs(), &opts).map_err(|e| e.to_string())?;
    let before = ctx::get_current().map_err(|e| format!("{e:?}"))?;
    let one: GpuRun<bf16> = gpu_run(&other, &up1, &opts, &go, fconfig, config)?;
    let after = ctx::get_current().map_err(|e| format!("{e:?}"))?;
    drop(up1);
    be.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
    if before != after {
        return Err("the calls on device 1 changed the thread's current context".into());
    }
    if bits(&zero) != bits(&one) {
        return Err("device 1's results differ from device 0's".into());
    }
    Ok("device 1 bitwise equal to device 0, context unchanged".into())
}

/// The backward's and the three-product pass's dC products on the side stream (the default) give
/// the bits of the same calls on the caller's stream alone (`CudaLoss::with_side_stream`): one
/// chunked default backward, a backward whose small budget makes many vocabulary chunks, and the
/// three-product pass in 128-token chunks, at shapes where V and D are not multiples of the tiles.
pub(crate) fn run_side_stream() -> Result<String, String> {
    use flce_cuda::plan::{step_plan, Wanted};
    let e = |x: flce_core::Error| x.to_string();
    let on = CudaLoss::new(0).map_err(e)?.with_side_stream(true);
    let off = CudaLoss::new(0).map_err(e)?.with_side_stream(false);
    let opts = Options { label_smoothing: 0.1, ..Options::default() };
    let mut report = vec![];
    for (i, shape) in
        [Shape::new(300, 128, 2049), Shape::new(257, 520, 3001), Shape::new(1, 64, 1000)].into_iter().enumerate()
    {
        let p = RandomProblem::<bf16>::new(shape, 50 + i as u64, DataKind::Peaky, 0.1, &opts, true, false);
        let go = go_for(&opts, shape.n);
        let wanted = Wanted { de: true, dc: true, dbias: true };
        let fconfig = ForwardConfig::default();
        // a third of the default budget: many vocabulary chunks, or token chunks too (where the
        // shape has a smaller plan at all)
        let default_plan =
            on.backward_plan(shape, flce_core::DType::BF16, wanted, BackwardConfig::default()).map_err(e)?;
        let mut configs = vec![BackwardConfig::default()];
        let mut chunks = vec![(default_plan.vocab_chunks(), default_plan.token_chunks())];
        let small = BackwardConfig { budget: Some(default_plan.workspace_bytes / 3), ..BackwardConfig::default() };
        if let Ok(p) = on.backward_plan(shape, flce_core::DType::BF16, wanted, small) {
            configs.push(small);
            chunks.push((p.vocab_chunks(), p.token_chunks()));
        }
        for config in configs {
            let mut runs = vec![];
            for be in [&on, &off] {
                let up = be.upload(&p.inputs(), &opts).map_err(e)?;
                runs.push(bits(&gpu_run::<bf16>(be, &up, &opts, &go, fconfig, config)?));
            }
            if runs[0] != runs[1] {
                return Err(format!("{shape}: backward (budget {:?}) differs with the side stream", config.budget));
            }
        }
        let one = step_plan(shape, flce_core::DType::BF16, wanted, usize::MAX).map_err(e)?;
        let per_row = one.ldg * 6;
        let budget = one.workspace_bytes - (one.token_chunk - one.token_chunk.min(128)) * per_row + 4096;
        let chunked = step_plan(shape, flce_core::DType::BF16, wanted, budget).map_err(e)?;
        let mut runs = vec![];
        for be in [&on, &off] {
            let up = be.upload(&p.inputs(), &opts).map_err(e)?;
            runs.push(bits(&crate::step::step_run_with::<bf16>(be, &up, &opts, &chunked)?));
        }
        if runs[0] != runs[1] {
            return Err(format!(
                "{shape}: three-product pass ({} token chunks) differs with the side stream",
                chunked.token_chunks()
            ));
        }
        let chunks: Vec<String> = chunks.iter().map(|(v, t)| format!("{v}×{t}")).collect();
        report.push(format!(
            "{shape}: backward {} chunks, three-product {}",
            chunks.join(" / "),
            chunked.token_chunks()
        ));
    }
    Ok(format!("bitwise equal on one stream and two: {}", report.join("; ")))
}
