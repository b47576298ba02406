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
