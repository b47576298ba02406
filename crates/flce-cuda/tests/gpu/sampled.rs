//! Large shapes against sampled f64 rows, and the caller's context around the entry points.

use std::time::Instant;

use flce_core::testing::{DataKind, RandomProblem, Rng};
use flce_core::{bf16, Element, GradOutput, Options, Shape};
use flce_cuda::{
    BackwardConfig, BackwardMode, CudaLoss, DeviceBuffer, DeviceForwardOutputs, ForwardConfig, ForwardMode,
};
use rayon::prelude::*;

use crate::oracle::{bits, go_for, gpu_run, tol, GpuRun};
use crate::three_product::{forward_backward_run, three_product_run};
use crate::Case;
use flce_cuda::plan::{three_product_plan, ForwardBackwardPlan};

/// Large shapes: f64 references for sampled tokens (lse, loss, dE rows) and sampled vocabulary
/// rows (dC rows, using the GPU's lse for every token, itself checked on the sampled tokens).
pub(crate) fn run_sampled<T: Element>(be: &CudaLoss, c: &Case) -> Result<String, String> {
    let Shape { n, d, v } = c.shape;
    let t0 = Instant::now();
    let p = RandomProblem::<T>::new(c.shape, 42, c.kind, 0.05, &c.opts, false, false);
    let host = p.inputs();
    let up = be.upload(&host, &c.opts).map_err(|e| e.to_string())?;
    let go = go_for(&c.opts, n);
    // (the defaults are the fused families on Hopper: the other case keeps cuBLAS tested there)
    let (fmode, bmode) = if c.fused {
        (ForwardMode::Fused, BackwardMode::FusedTiles)
    } else {
        (ForwardMode::CublasChunks, BackwardMode::CublasLogits)
    };
    let config = BackwardConfig { budget: c.budget, mode: bmode };
    let fconfig = ForwardConfig { budget: None, mode: fmode };
    let a = gpu_run::<T>(be, &up, &c.opts, &go, fconfig, config)?;
    let b = gpu_run::<T>(be, &up, &c.opts, &go, fconfig, config)?;
    if bits(&a) != bits(&b) {
        return Err("results differ between two identical runs (race?)".into());
    }
    let prep = host.prepare(&c.opts).map_err(|e| e.to_string())?;
    let g = prep.token_grad_scales(c.opts.reduction, GradOutput::Scalar(go[0])).map_err(|e| e.to_string())?;
    let e64 = |i: usize| -> Vec<f64> { p.e[i * d..(i + 1) * d].iter().map(|x| x.to_f64()).collect() };
    let c64 = |j: usize| -> Vec<f64> { p.c[j * d..(j + 1) * d].iter().map(|x| x.to_f64()).collect() };
    // (a row of E or C against an f64 vector, without a copy of the row)
    let dot = |a: &[f64], row: &[T]| a.iter().zip(row).map(|(x, y)| x * y.to_f64()).sum::<f64>();
    // Σ_i w(i)·rows[i] over n rows of `m` (row-major, d wide) in parallel: each worker adds whole
    // rows into its own f64 accumulator (the weights computed once a row, the rows read in order:
    // a column at a time with an exponential per element took most of the sampled cases' minutes)
    let weighted_rows = |m: &[T], count: usize, w: &(dyn Fn(usize) -> f64 + Sync)| -> Vec<f64> {
        (0..count)
            .into_par_iter()
            .fold(
                || vec![0.0f64; d],
                |mut acc, i| {
                    let wi = w(i);
                    if wi != 0.0 {
                        acc.iter_mut().zip(&m[i * d..(i + 1) * d]).for_each(|(a, x)| *a += wi * x.to_f64());
                    }
                    acc
                },
            )
            .reduce(
                || vec![0.0f64; d],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            )
    };
    let mut rng = Rng::new(7);
    let tokens: Vec<usize> = (0..8).map(|_| rng.below(n)).collect();
    let mut vocab: Vec<usize> = tokens.iter().take(4).map(|&i| prep.targets[i].max(0) as usize).collect();
    vocab.extend((0..4).map(|_| rng.below(v)));
    // the last row, and both sides of the tail pass's first row when dE accumulated in dC's tail
    vocab.push(v - 1);
    let wanted = flce_cuda::plan::Wanted { de: true, dc: true, dbias: false };
    let mut tokens = tokens;
    if let Some(tail) = be.backward_plan(c.shape, T::DTYPE, wanted, config).map_err(|e| e.to_string())?.dc_tail() {
        // (a tail over the whole vocabulary starts at row 0)
        vocab.extend([tail.first_row.saturating_sub(1), tail.first_row]);
        // and the tokens on both sides of each boundary of dE's accumulator: head in dE, rows in
        // dC, overflow rows in the workspace
        let spill = n - tail.overflow_rows;
        tokens.extend([
            tail.rows_in_de.saturating_sub(1),
            tail.rows_in_de,
            spill.saturating_sub(1),
            spill.min(n - 1),
            n - 1,
        ]);
    }
    // the vocabulary-slice pass within 1 GB (fused cases): the rows on both sides of its head's end
    let slice = match c.fused {
        true => be.vocab_slice_plan(c.shape, T::DTYPE, &c.opts, wanted, 1 << 30).map_err(|e| e.to_string())?,
        false => None,
    };
    if let Some(sp) = &slice {
        vocab.extend([sp.head_rows - 1, sp.head_rows]);
    }
    let grad = |z: f64, lse: f64, gi: f64, is_t: bool| -> f64 {
        let p = (z - lse).exp();
        gi * (p - if is_t { 1.0 } else { 0.0 })
    };
    // (worst lse error, dE rel err, dC rel err) of one run; dC rows use the run's own lse
    let check = |a: &GpuRun<T>| -> Result<(f64, f64, f64), String> {
        let mut worst_lse = 0.0f64;
        let (mut de_num, mut de_den) = (0.0, 0.0);
        for &i in &tokens {
            let ei = e64(i);
            let z: Vec<f64> = (0..v).into_par_iter().map(|j| dot(&ei, &p.c[j * d..(j + 1) * d])).collect();
            let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + z.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
            worst_lse = worst_lse.max((a.lse[i] as f64 - lse).abs() / lse.abs().max(1.0));
            let t = prep.targets[i];
            if t >= 0 {
                let want = lse - z[t as usize];
                let got = a.per_token[i] as f64;
                if (got - want).abs() > 1e-4 * want.abs().max(1.0) {
                    return Err(format!("loss[{i}] {got} vs {want}"));
                }
            }
            let gi = g[i] as f64;
            let gz: Vec<f64> = (0..v).map(|j| grad(z[j], lse, gi, j as i32 == t)).collect();
            let row = weighted_rows(&p.c, v, &|j| gz[j]);
            for (x, r) in a.de[i * d..(i + 1) * d].iter().zip(&row) {
                let x = x.to_f64();
                de_num += (x - r) * (x - r);
                de_den += r * r;
            }
        }
        if worst_lse > 1e-5 {
            return Err(format!("lse rel err {worst_lse:.2e}"));
        }
        let (mut dc_num, mut dc_den) = (0.0, 0.0);
        for &j in &vocab {
            let cj = c64(j);
            let row = weighted_rows(&p.e, n, &|i| {
                grad(dot(&cj, &p.e[i * d..(i + 1) * d]), a.lse[i] as f64, g[i] as f64, prep.targets[i] == j as i32)
            });
            for (x, r) in a.dc[j * d..(j + 1) * d].iter().zip(&row) {
                let x = x.to_f64();
                dc_num += (x - r) * (x - r);
                dc_den += r * r;
            }
        }
        let (de, dc) = ((de_num / de_den).sqrt(), (dc_num / dc_den).sqrt());
        let t = tol(c.dtype);
        if !(de <= t && dc <= t) {
            return Err(format!("sampled dE rel {de:.2e}, dC rel {dc:.2e} > {t:.1e}"));
        }
        Ok((worst_lse, de, dc))
    };
    let (worst_lse, de, dc) = check(&a)?;
    // the three-product pass at a 4 GB budget (several token chunks at these shapes)
    let storage = be.three_product_logits(c.shape, T::DTYPE, &c.opts);
    let step = three_product_plan(c.shape, T::DTYPE, wanted, 4 << 30, storage).map_err(|e| e.to_string())?;
    let s = three_product_run::<T>(be, &up, c, &step)?;
    let (s_lse, s_de, s_dc) = check(&s).map_err(|e| format!("three-product: {e}"))?;
    let slice_report = match slice {
        Some(sp) => {
            let (head, chunks) = (sp.head_rows, sp.rest.vocab_chunks());
            let plan = ForwardBackwardPlan::VocabSlice(sp);
            let (x, y) = (forward_backward_run::<T>(be, &up, c, &plan)?, forward_backward_run::<T>(be, &up, c, &plan)?);
            if bits(&x) != bits(&y) {
                return Err("vocabulary slice: results differ between two identical runs (race?)".into());
            }
            let (l, de, dc) = check(&x).map_err(|e| format!("vocabulary slice: {e}"))?;
            format!(" | slice (head {head}, {chunks} rest chunks) lse {l:.1e}  dE {de:.1e}  dC {dc:.1e}")
        }
        None => String::new(),
    };
    // the reduced loss is the mean of the per-token losses the GPU wrote
    let mean: f64 = a.per_token.iter().map(|&x| x as f64).sum::<f64>() / prep.target_weight_sum;
    if (a.loss as f64 - mean).abs() > 1e-5 * mean.abs() {
        return Err(format!("loss {} is not the mean of per-token losses {mean}", a.loss));
    }
    Ok(format!(
        "lse {worst_lse:.1e}  dE(8 rows) {de:.1e}  dC({} rows) {dc:.1e} | three-product ({} chunks, {:?}) lse {s_lse:.1e}  dE {s_de:.1e}  dC {s_dc:.1e}{slice_report}  ({:.0} s)",
        vocab.len(),
        step.token_chunks(),
        step.storage,
        t0.elapsed().as_secs_f64()
    ))
}

/// The device-pointer entry points leave the caller's current context as they found it (here:
/// none), and work from a thread with no context current.
pub(crate) fn run_context_restored(be: &CudaLoss) -> Result<String, String> {
    use cudarc::driver::result::ctx;
    use flce_cuda::{DeviceGradOutput, DeviceGrads, Wanted};
    // the thread's current context as an address (0: none)
    let current_context = || ctx::get_current().map(|c| c.map_or(0, |c| c as usize)).map_err(|e| format!("{e:?}"));
    let s = |e: flce_core::Error| e.to_string();
    let c = |e: flce_cuda::CudaError| e.to_string();
    let opts = Options::default();
    let shape = Shape::new(300, 128, 2049);
    let p = RandomProblem::<bf16>::new(shape, 9, DataKind::Peaky, 0.0, &opts, false, false);
    let up = be.upload(&p.inputs(), &opts).map_err(s)?;
    let (lse, sc, st) =
        (DeviceBuffer::new(4 * 300).map_err(c)?, DeviceBuffer::new(16).map_err(c)?, DeviceBuffer::new(4).map_err(c)?);
    let fplan = be.forward_plan(shape, up.inputs.dtype, ForwardConfig::default());
    let fws = DeviceBuffer::new(fplan.workspace_bytes).map_err(c)?;
    let de = DeviceBuffer::new(300 * 128 * 2).map_err(c)?;
    let grads = DeviceGrads { de: Some(de.ptr()), dc: None, dbias: None };
    let bplan = be
        .backward_plan(shape, up.inputs.dtype, Wanted { de: true, dc: false, dbias: false }, BackwardConfig::default())
        .map_err(s)?;
    let bws = DeviceBuffer::new(bplan.workspace_bytes).map_err(c)?;
    let go = DeviceBuffer::from_slice(&[1.0f32]).map_err(c)?;
    let out = DeviceForwardOutputs { lse: lse.ptr(), per_token_loss: None, scalars: sc.ptr(), status: st.ptr() };
    let mine = ctx::get_current().map_err(|e| format!("{e:?}"))?.unwrap_or(std::ptr::null_mut());
    unsafe { ctx::set_current(std::ptr::null_mut()) }.map_err(|e| format!("{e:?}"))?;
    let calls = unsafe {
        be.forward(&up.inputs, &opts, &out, fws.workspace(), &fplan, std::ptr::null_mut()).and_then(|_| {
            let after_forward = current_context().map_err(flce_core::Error::Unsupported)?;
            be.backward(
                &up.inputs,
                &opts,
                lse.ptr(),
                DeviceGradOutput::Scalar(go.ptr()),
                &grads,
                bws.workspace(),
                &bplan,
                std::ptr::null_mut(),
            )?;
            Ok(after_forward)
        })
    };
    let after_backward = current_context()?;
    unsafe { ctx::set_current(mine) }.map_err(|e| format!("{e:?}"))?;
    let after_forward = calls.map_err(s)?;
    if after_forward != 0 || after_backward != 0 {
        return Err(format!(
            "context left current: {after_forward:#x} after forward, {after_backward:#x} after backward"
        ));
    }
    be.context().synchronize().map_err(|e| format!("{e:?}"))?;
    let scalars: Vec<f32> = sc.to_vec(4).map_err(c)?;
    if !scalars[0].is_finite() {
        return Err(format!("loss {} from a thread without a context", scalars[0]));
    }
    Ok(format!("no context before, none after forward and backward; loss {:.4}", scalars[0]))
}
