//! The vocabulary-parallel loss over NCCL on two GPUs (flce_cuda::vocab_parallel): one
//! thread per rank, the vocabulary cut unevenly (V odd), against the whole-vocabulary call on
//! GPU 0. Every rank must get the same loss, lse and dE bits; against one GPU they may differ by
//! the reordering of f32 sums (1e-6 loss / 1e-5 gradients at f32, a rounding at bf16). Then ranks
//! that disagree on N must both fail, with the same error, without hanging. NCCL from
//! `FLCE_NCCL_LIBRARY` (scripts/gpu/verify.sh points it at the torch wheel's libnccl.so.2).

use flce_core::testing::{rel_err, to_f64, DataKind, RandomProblem};
use flce_core::{DType, Element, Options, Shape};
use flce_cuda::nccl::NcclComm;
use flce_cuda::plan::slice_backward_plan;
use flce_cuda::vocab_parallel::slice_backward_workspace_bytes;
use flce_cuda::vocab_parallel::{exchange_bytes, Exchange};
use flce_cuda::{BackwardConfig, BackwardMode, CudaLoss, DeviceForwardOutputs, DeviceGrads, ForwardConfig};

use crate::oracle::{go_for, go_on_device, gpu_run, poisoned};
use crate::vocab_parallel::rows_of;

/// What one rank downloads: loss, lse, dE, its dC rows.
struct RankRun<T> {
    loss: f32,
    lse: Vec<f32>,
    de: Vec<T>,
    dc_rows: Vec<T>,
}

/// One rank's whole step on its own GPU: upload, slice check, forward, backward, download.
/// `n_override` makes this rank claim another N (the disagreement case).
fn rank_step<T: Element>(
    be: &CudaLoss,
    comm: &NcclComm,
    p: &RandomProblem<T>,
    opts: &Options,
    cut: (usize, usize),
    n_override: Option<usize>,
) -> Result<RankRun<T>, String> {
    let s = |e: flce_core::Error| e.to_string();
    let c = |e: flce_cuda::CudaError| e.to_string();
    be.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
    let Shape { n, d, .. } = p.shape;
    let es = std::mem::size_of::<T>();
    let up = be.upload(&p.inputs(), opts).map_err(s)?;
    let (offset, rows) = (cut.0, cut.1 - cut.0);
    let mut x = rows_of(&up.inputs, offset, rows);
    x.shape.n = n_override.unwrap_or(n);
    let stream = std::ptr::null_mut();
    let exb = poisoned(exchange_bytes(n, comm.ranks()))?;
    let ex = Exchange { ptr: exb.ptr(), bytes: exchange_bytes(n, comm.ranks()) };
    let slice = unsafe { be.vocab_parallel_slice(comm, &x, opts, ex, stream) }.map_err(s)?;
    if slice.offset != offset || slice.total != p.shape.v {
        return Err(format!("rank {}: slice {slice:?}, expected offset {offset} of {}", comm.rank(), p.shape.v));
    }
    let plan = be.forward_plan(x.shape, x.dtype, ForwardConfig::default());
    let ws = poisoned(plan.workspace_bytes)?;
    let (lse, ptl, sc, st) = (poisoned(4 * n)?, poisoned(4 * n)?, poisoned(16)?, poisoned(4)?);
    let out =
        DeviceForwardOutputs { lse: lse.ptr(), per_token_loss: Some(ptl.ptr()), scalars: sc.ptr(), status: st.ptr() };
    unsafe { be.vocab_parallel_forward(comm, &x, opts, slice, &plan, ws.workspace(), ex, &out, stream) }.map_err(s)?;
    let (share, de, dc) = (poisoned(n * d * 4)?, poisoned(n * d * es)?, poisoned(rows * d * es)?);
    let (_go_d, gop) = go_on_device(opts, &go_for(opts, n))?;
    let grads = DeviceGrads { de: Some(de.ptr()), dc: Some(dc.ptr()), dbias: None };
    let bplan = slice_backward_plan(x.shape, x.dtype, grads.wanted(), None).map_err(s)?;
    let bws = poisoned(slice_backward_workspace_bytes(&bplan, x.class_weights.is_some()))?;
    unsafe {
        be.vocab_parallel_backward(
            comm,
            &x,
            opts,
            slice,
            lse.ptr(),
            ex,
            gop,
            &grads,
            share.ptr(),
            bws.workspace(),
            &bplan,
            stream,
        )
    }
    .map_err(s)?;
    be.context().synchronize().map_err(|e| format!("{e:?}"))?;
    let status: Vec<i32> = st.to_vec(1).map_err(c)?;
    if status[0] != flce_cuda::STATUS_OK {
        return Err(format!("rank {}: status {} with valid targets", comm.rank(), status[0]));
    }
    Ok(RankRun {
        loss: sc.to_vec::<f32>(1).map_err(c)?[0],
        lse: lse.to_vec(n).map_err(c)?,
        de: de.to_vec(n * d).map_err(c)?,
        dc_rows: dc.to_vec(rows * d).map_err(c)?,
    })
}

fn bits<T: Element>(v: &[T]) -> Vec<u32> {
    v.iter().map(|x| x.to_f32().to_bits()).collect()
}

pub(crate) fn run_nccl_two_gpus<T: Element>(be0: &CudaLoss, shape: Shape, opts: &Options) -> Result<String, String> {
    let s = |e: flce_core::Error| e.to_string();
    let Shape { n, d, v } = shape;
    let p = RandomProblem::<T>::new(shape, 33, DataKind::Planted, 0.1, opts, false, false);
    be0.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
    let up = be0.upload(&p.inputs(), opts).map_err(s)?;
    let config = BackwardConfig { mode: BackwardMode::CublasLogits, ..BackwardConfig::default() };
    let whole = gpu_run::<T>(be0, &up, opts, &go_for(opts, n), ForwardConfig::default(), config)?;
    drop(up);
    let be1 = CudaLoss::new(1).map_err(s)?;
    let cut = v / 3 + 1;
    let cuts = [(0, cut), (cut, v)];
    let comms = NcclComm::init_all(&[0, 1]).map_err(s)?;
    let (bes, comms, p) = ([be0, &be1], &comms, &p);
    let runs: Vec<Result<RankRun<T>, String>> = std::thread::scope(|sc| {
        let handles: Vec<_> =
            (0..2).map(|k| sc.spawn(move || rank_step::<T>(bes[k], &comms[k], p, opts, cuts[k], None))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("rank thread panicked".into()))).collect()
    });
    let runs: Vec<RankRun<T>> = runs.into_iter().collect::<Result<_, _>>()?;
    if runs[0].loss.to_bits() != runs[1].loss.to_bits() || bits(&runs[0].de) != bits(&runs[1].de) {
        return Err(format!("the ranks differ: loss {} / {}, or dE", runs[0].loss, runs[1].loss));
    }
    if runs[0].lse.iter().map(|x| x.to_bits()).ne(runs[1].lse.iter().map(|x| x.to_bits())) {
        return Err("the ranks' lse differ".into());
    }
    let dc: Vec<T> = runs.iter().flat_map(|r| r.dc_rows.iter().copied()).collect();
    let loss_rel = ((runs[0].loss - whole.loss) as f64).abs() / (whole.loss as f64).abs().max(1e-30);
    let lse_rel = rel_err(&runs[0].lse, &whole.lse);
    let de_rel = rel_err(&to_f64(&runs[0].de), &to_f64(&whole.de));
    let dc_rel = rel_err(&to_f64(&dc), &to_f64(&whole.dc));
    let (stats_tol, grad_tol) = match T::DTYPE {
        DType::F32 => (1e-6, 1e-5),
        DType::BF16 => (1e-5, 8e-3),
        DType::F16 => (1e-5, 2e-3),
    };
    let report = format!(
        "2 ranks ({cut} + {} rows): loss {loss_rel:.1e}, lse {lse_rel:.1e}, dE {de_rel:.1e}, dC {dc_rel:.1e}; ranks bitwise equal",
        v - cut
    );
    if loss_rel > stats_tol || lse_rel > stats_tol || de_rel > grad_tol || dc_rel > grad_tol {
        return Err(format!("{report} (bounds {stats_tol:.0e} / {grad_tol:.0e} against one GPU)"));
    }
    // rank 1 claims one token fewer: both ranks fail with the same error, neither hangs
    let errs: Vec<Result<RankRun<T>, String>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..2)
            .map(|k| {
                let n_k = (k == 1).then_some(n - 1);
                sc.spawn(move || rank_step::<T>(bes[k], &comms[k], p, opts, cuts[k], n_k))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("rank thread panicked".into()))).collect()
    });
    match (&errs[0], &errs[1]) {
        (Err(a), Err(b)) if a == b && a.contains("N or D") => {
            Ok(format!("{report}; disagreeing N: both ranks fail alike"))
        }
        _ => Err(format!("{report}; disagreeing N gave {:?} / {:?}", errs[0].as_ref().err(), errs[1].as_ref().err())),
    }
    .map(|m| format!("{m} (D {d})"))
}
