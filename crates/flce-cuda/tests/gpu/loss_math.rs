//! The epilogues' per-element math (tests/probes/loss_math.cu) against f64: exp2 (2.5e-7 relative
//! where 2^y is normal, 0 below 2⁻¹²⁷ and for −inf, NaN for NaN), the reciprocal on [1, 2], the
//! softcap against f64's tanh (in units of the cap), and Exp2Ref's fix (without it, the fold's
//! exponentials are off by up to 2⁻¹⁷ relative at |m| ≈ 100).

use std::ffi::c_void;

use flce_cuda::{CudaLoss, DeviceBuffer};

use crate::probe::ProbeModule;

const CAP: f32 = 30.0;

/// n points evenly over [lo, hi], then `extra`.
fn sweep(lo: f64, hi: f64, n: usize, extra: &[f32]) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n).map(|i| (lo + (hi - lo) * i as f64 / (n - 1) as f64) as f32).collect();
    v.extend_from_slice(extra);
    v
}

fn rel(got: f32, want: f64) -> f64 {
    ((got as f64 - want) / want).abs()
}

/// The largest `err` over the inputs, or a description of the first value past `bound`.
fn worst(
    what: &str,
    inputs: &[f32],
    got: &[f32],
    want: impl Fn(f32) -> f64,
    err: impl Fn(f32, f64) -> f64,
    bound: f64,
) -> Result<String, String> {
    let mut largest = 0.0f64;
    for (&x, &g) in inputs.iter().zip(got) {
        let e = err(g, want(x));
        if e.is_nan() || e > bound {
            return Err(format!("{what}({x:e}) = {g:e}, want {:e} (error {e:e} > {bound:e})", want(x)));
        }
        largest = largest.max(e);
    }
    Ok(format!("{what} ≤ {largest:.2e}"))
}

pub(crate) fn run_loss_math(be: &CudaLoss) -> Result<String, String> {
    be.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
    let n = 1 << 20;
    let y = sweep(-130.0, 0.5, n - 6, &[f32::NEG_INFINITY, f32::NAN, -127.0, -126.0, 0.0, -1e-30]);
    let d = sweep(1.0, 2.0, n, &[]);
    let x = sweep(-200.0, 200.0, n - 4, &[0.0, 1e-30, -1e-30, f32::NEG_INFINITY]);
    let dev = |v: &[f32]| DeviceBuffer::from_slice(v).map_err(|e| e.to_string());
    let (dy, dd, dx) = (dev(&y)?, dev(&d)?, dev(&x)?);
    let out = DeviceBuffer::new(4 * n * 4).map_err(|e| e.to_string())?;
    out.fill_u32(0x7fc0_0001).map_err(|e| e.to_string())?; // poisoned: a NaN no kernel writes
    let module = ProbeModule::load(include_str!("../probes/loss_math.cu"), "loss_math.cu", be.arch())?;
    let (mut py, mut pd, mut px, mut pn, mut pcap, mut po) = (dy.ptr(), dd.ptr(), dx.ptr(), n as i32, CAP, out.ptr());
    let mut params: [*mut c_void; 6] = [
        &mut py as *mut _ as *mut c_void,
        &mut pd as *mut _ as *mut c_void,
        &mut px as *mut _ as *mut c_void,
        &mut pn as *mut _ as *mut c_void,
        &mut pcap as *mut _ as *mut c_void,
        &mut po as *mut _ as *mut c_void,
    ];
    // SAFETY: the parameters match the kernel's (three device pointers of n floats, an int, a
    // float, a pointer of 4·n floats).
    unsafe { module.launch(c"probe_loss_math", (n / 256) as u32, 256, 0, &mut params)? };
    let o: Vec<f32> = out.to_vec(4 * n).map_err(|e| e.to_string())?;
    let part = |k: usize| &o[k * n..(k + 1) * n];

    // exp2: relative where 2^y is normal (y ≥ −126), 0 below 2⁻¹²⁷, NaN kept
    let exp2_err = |g: f32, w: f64| -> f64 {
        if w.is_nan() {
            return if g.is_nan() { 0.0 } else { f64::INFINITY };
        }
        if w < 2f64.powi(-127) {
            return if g == 0.0 { 0.0 } else { f64::INFINITY };
        }
        if w < 2f64.powi(-126) {
            // flushed or subnormal
            return if g as f64 <= 2f64.powi(-126) { 0.0 } else { f64::INFINITY };
        }
        rel(g, w)
    };
    let want_exp2 = |y: f32| 2f64.powf(y as f64);
    let mut lines = vec![
        worst("exp2_mufu", &y, part(0), want_exp2, exp2_err, 2.5e-7)?,
        worst("rcp_approx", &d, part(1), |d| 1.0 / d as f64, rel, 1.2e-7)?,
    ];
    // the softcap: absolute, in units of the cap (tanh is in [−1, 1]; near 0 both the exponential's
    // rounding and 2r − 1 leave ~1e-7 absolute)
    let tanh = |x: f32| CAP as f64 * (x as f64 / CAP as f64).tanh();
    let cap_err = |g: f32, w: f64| ((g as f64 - w) / CAP as f64).abs();
    lines.push(worst("softcap_logit", &x, part(2), tanh, cap_err, 5e-7)?);
    // the fold's exponential at m of a logit at m − 1, wherever m is finite
    let finite: Vec<usize> = (0..n).filter(|&i| x[i].is_finite() && x[i].abs() >= 1.0).collect();
    let xs: Vec<f32> = finite.iter().map(|&i| x[i]).collect();
    let got: Vec<f32> = finite.iter().map(|&i| part(3)[i]).collect();
    // (m − 1 rounded in f32 as on the device: the want is e to the difference that was taken)
    let want_fold = |m: f32| ((m - 1.0) as f64 - m as f64).exp();
    lines.push(worst("fix·2^((m−1)·log2e − m2)", &xs, &got, want_fold, rel, 4e-7)?);
    Ok(lines.join("; "))
}
