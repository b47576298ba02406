//! Pointer arguments that are not memory of the call's GPU: an error that names the argument,
//! before any work, and the backend still works afterwards.

use flce_core::testing::{DataKind, RandomProblem};
use flce_core::{bf16, Options, Shape};
use flce_cuda::{CudaLoss, DeviceBuffer, DeviceForwardOutputs, DeviceInputs, ForwardConfig};

pub(crate) fn run_bad_pointers(be: &CudaLoss) -> Result<String, String> {
    let c = |e: flce_cuda::CudaError| e.to_string();
    let (n, d, v) = (40, 64, 300);
    let opts = Options::default();
    let p = RandomProblem::<bf16>::new(Shape::new(n, d, v), 5, DataKind::Peaky, 0.0, &opts, false, false);
    let up = be.upload(&p.inputs(), &opts).map_err(|e| e.to_string())?;
    let (lse, sc, st) =
        (DeviceBuffer::new(4 * n).map_err(c)?, DeviceBuffer::new(16).map_err(c)?, DeviceBuffer::new(4).map_err(c)?);
    let plan = be.forward_plan(up.inputs.shape, up.inputs.dtype, ForwardConfig::default());
    let ws = DeviceBuffer::new(plan.workspace_bytes).map_err(c)?;
    let out = DeviceForwardOutputs { lse: lse.ptr(), per_token_loss: None, scalars: sc.ptr(), status: st.ptr() };
    let forward = |x: &DeviceInputs, out: &DeviceForwardOutputs| {
        // SAFETY: every pointer but the one under test is a live allocation of this shape.
        unsafe { be.forward(x, &opts, out, ws.workspace(), &plan, std::ptr::null_mut()) }.map_err(|e| e.to_string())
    };
    let host = vec![0u16; n * d];
    let mut report = vec![];
    // host memory as E; a made-up address as the status word
    let cases: [(&str, DeviceInputs, DeviceForwardOutputs, &str); 2] = [
        ("e", DeviceInputs { e: host.as_ptr() as u64, ..up.inputs }, out, "not memory CUDA knows"),
        ("status", up.inputs, DeviceForwardOutputs { status: 0x10, ..out }, "not memory CUDA knows"),
    ];
    for (arg, x, o, want) in cases {
        match forward(&x, &o) {
            Ok(()) => return Err(format!("{arg}: a bad pointer was accepted")),
            Err(e) if e.starts_with(&format!("{arg}: ")) && e.contains(want) => report.push(arg.to_string()),
            Err(e) => return Err(format!("{arg}: unexpected error: {e}")),
        }
    }
    // another GPU's memory, where there is one
    if CudaLoss::device_count() > 1 {
        let other = CudaLoss::new(1).map_err(|e| e.to_string())?;
        other.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
        let foreign = DeviceBuffer::new(v * d * 2).map_err(c)?;
        be.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
        let r = forward(&DeviceInputs { c: foreign.ptr(), ..up.inputs }, &out);
        other.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
        drop(foreign);
        be.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
        match r {
            Err(e) if e.starts_with("c: ") && e.contains("GPU 1") => report.push("c on GPU 1".into()),
            other => return Err(format!("device-1 memory as C: {other:?}")),
        }
    }
    // the backend still works
    forward(&up.inputs, &out)?;
    be.context().synchronize().map_err(|e| format!("{e:?}"))?;
    let loss: Vec<f32> = sc.to_vec(1).map_err(c)?;
    if !loss[0].is_finite() {
        return Err(format!("loss {} after the rejected calls", loss[0]));
    }
    Ok(format!("rejected, naming the argument: {}; later call fine", report.join(", ")))
}
