//! `flce.plan` from Python: the training-memory planner of crates/flce-memory.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The training-memory plan (see crates/flce-memory): returns (markdown table, rows as dicts);
/// with `plot`, also writes peak memory against sequence length as a chart there (PNG where the
/// path ends in .png, SVG otherwise).
#[pyfunction]
#[pyo3(signature = (model, gpu_gb, seq, batch, optimizer, lora_rank, plot = None, mlp_tiles = 1, attention = "flash", norm_tiles = 1, stream_weights = false))]
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
    mlp_tiles: u64,
    attention: &str,
    norm_tiles: u64,
    stream_weights: bool,
) -> PyResult<(String, Vec<Bound<'py, pyo3::types::PyDict>>)> {
    use flce_memory::{plan, table, write_chart, Model, Request};
    let err = |e: flce_memory::PlanError| PyValueError::new_err(e.to_string());
    let model = Model::load(model).map_err(err)?;
    let req = Request::new(gpu_gb, seq, batch, optimizer, lora_rank)
        .and_then(|r| r.with_mlp_tiles(mlp_tiles))
        .and_then(|r| r.with_norm_tiles(norm_tiles))
        .map(|r| r.with_stream_weights(stream_weights))
        .and_then(|r| r.with_attention(attention))
        .map_err(err)?;
    let rows = plan(&model, &req);
    if let Some(path) = plot {
        write_chart(&model, &req, &path)
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
            ("optimizer_step", b.optimizer_step),
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

/// The cheapest of `flce.patch`'s memory options whose planned peak fits (flce_memory::suggest):
/// a dict of the options (patch's keyword arguments), the call as text, the planned peak in bytes
/// and whether it fits (False: even the last rung of the ladder does not; its options and peak).
#[pyfunction]
#[pyo3(signature = (model, gpu_gb, seq, batch, optimizer, lora_rank, attention = "flash"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn memory_suggest<'py>(
    py: Python<'py>,
    model: &str,
    gpu_gb: f64,
    seq: u64,
    batch: u64,
    optimizer: &str,
    lora_rank: u64,
    attention: &str,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use flce_memory::{ladder, suggest, Activations, Model, Request};
    let err = |e: flce_memory::PlanError| PyValueError::new_err(e.to_string());
    let model = Model::load(model).map_err(err)?;
    let req = Request::new(gpu_gb, seq, batch, optimizer, lora_rank)
        .and_then(|r| r.with_attention(attention))
        .map_err(err)?;
    let (found, breakdown) = suggest(&model, &req);
    let o = found.unwrap_or_else(|| *ladder(&req).last().expect("a ladder has rungs"));
    let options = pyo3::types::PyDict::new(py);
    options.set_item("checkpoint", o.activations != Activations::Kept)?;
    options.set_item("offload", o.activations == Activations::Offloaded)?;
    options.set_item("mlp_tiles", o.mlp_tiles)?;
    options.set_item("norm_tiles", o.norm_tiles)?;
    options.set_item("stream_weights", o.stream_weights)?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("options", options)?;
    d.set_item("patch", o.python_call())?;
    d.set_item("peak", breakdown.peak)?;
    d.set_item("fits", found.is_some())?;
    Ok(d)
}
