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
