//! `flce.plan` from Python: the training-memory planner of crates/flce-memory.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The training-memory plan (see crates/flce-memory): returns (markdown table, rows as dicts);
/// with `plot`, also writes peak memory against sequence length as an SVG chart there.
#[pyfunction]
#[pyo3(signature = (model, gpu_gb, seq, batch, optimizer, lora_rank, plot = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn memory_plan<'py>(
    py: Python<'py>,
    model: &str,
    gpu_gb: f64,
    seq: u64,
    batch: u64,
    optimizer: &str,
    lora_rank: u64,
    plot: Option<std::path::PathBuf>,
) -> PyResult<(String, Vec<Bound<'py, pyo3::types::PyDict>>)> {
    use flce_memory::{curves, doubling_seqs, plan, svg, table, Model, Optimizer, Request};
    let model = if model.ends_with(".json") {
        Model::from_config_json(std::path::Path::new(model))
    } else {
        Model::built_in(model)
    }
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    if !(gpu_gb > 0.0 && seq > 0 && batch > 0) {
        return Err(PyValueError::new_err("gpu_gb, seq and batch must be positive"));
    }
    let req = Request {
        gpu_bytes: (gpu_gb * (1u64 << 30) as f64) as u64,
        seq_len: seq,
        batch,
        optimizer: optimizer.parse::<Optimizer>().map_err(PyValueError::new_err)?,
        lora_rank: (lora_rank > 0).then_some(lora_rank),
    };
    let rows = plan(&model, &req);
    if let Some(path) = plot {
        let seqs = doubling_seqs(1 << 20);
        std::fs::write(&path, svg(&model, &req, &seqs, &curves(&model, &req, &seqs)))
            .map_err(|e| PyValueError::new_err(format!("writing {}: {e}", path.display())))?;
    }
    let mut out = vec![];
    for r in &rows {
        let d = pyo3::types::PyDict::new(py);
        let b = &r.breakdown;
        d.set_item("loss", r.loss.name())?;
        d.set_item("activations", r.activations.name())?;
        for (k, v) in [
            ("weights", b.weights),
            ("gradients", b.gradients),
            ("optimizer", b.optimizer),
            ("activations_held", b.activations),
            ("recompute", b.recompute),
            ("loss_bytes", b.loss),
            ("cuda_context", b.cuda_context),
            ("allocator_slack", b.allocator_slack),
            ("peak", b.peak),
        ] {
            d.set_item(k, v)?;
        }
        d.set_item("fits", r.fits)?;
        d.set_item("longest_seq", r.longest)?;
        out.push(d);
    }
    Ok((table(&model, &req, &rows), out))
}
