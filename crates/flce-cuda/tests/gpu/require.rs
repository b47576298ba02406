//! The checks that a GPU test case really plans what it is there for (a tail over a third of the
//! vocabulary, token chunks, a dE pass, clusters, bands, rests, dE's accumulator head), on every
//! family the case runs; each returns why not.

use flce_cuda::{
    BackwardConfig, BackwardMode, BackwardPlan, CudaLoss, Family, ForwardConfig, ForwardMode, ForwardPlan, TailReach,
    Wanted,
};

use crate::cases::Case;

/// Every family's backward plan for case `c` (cuBLAS logits, the fused tiles, the portable ones)
/// passes `check`: the cases that exist for one plan shape must really plan it.
fn require_plans(be: &CudaLoss, c: &Case, check: impl Fn(&BackwardPlan) -> Result<(), String>) -> Result<(), String> {
    let wanted = Wanted { de: true, dc: true, dbias: c.bias };
    for mode in [BackwardMode::CublasLogits, BackwardMode::FusedTiles, BackwardMode::FusedSm80] {
        let config = BackwardConfig { budget: c.budget, mode };
        let p = be.backward_plan(c.shape, c.dtype, wanted, config).map_err(|e| e.to_string())?;
        check(&p).map_err(|e| format!("{mode:?}: {e}"))?;
    }
    Ok(())
}

/// The token-chunks cases must plan several token chunks with dE's accumulator in dC's tail — or,
/// in the de-pass ones, a first pass (dC) in several token chunks — on every family.
pub(crate) fn require_token_chunks(be: &CudaLoss, c: &Case) -> Result<(), String> {
    require_plans(be, c, |p| match (p.dc_tail(), p.de_pass.is_some(), p.token_chunks()) {
        (Some(_), _, k) | (None, true, k) if k >= 2 => Ok(()),
        (t, _, k) => Err(format!("not a tail or dC pass in token chunks: {k} token chunk(s), {t:?}")),
    })
}

/// The long-tail cases must plan a tail over more than a third of the vocabulary (and, with N
/// above V, accumulator rows in the workspace), on every family.
pub(crate) fn require_long_tail(be: &CudaLoss, c: &Case) -> Result<(), String> {
    require_plans(be, c, |p| match p.dc_tail() {
        None => Err(format!("no tail: {:?}", p.de_acc)),
        Some(t) if t.reach(c.shape) != TailReach::Whole || (c.shape.n > c.shape.v) != (t.overflow_rows > 0) => {
            Err(format!("not the long tail this case is for: {t:?}"))
        }
        Some(_) => Ok(()),
    })
}

/// The pairs cases with more than one token tile must plan the sm90 forward in clusters of 2,
/// the unpaired cases without, where the sm90 family runs (sm_90a); elsewhere they run as any
/// case.
pub(crate) fn require_cluster(be: &CudaLoss, c: &Case, cluster: usize) -> Result<(), String> {
    let want = if c.shape.n > 128 { cluster } else { 1 };
    require_sm90_forward(be, c, |p| p.cluster == want, &format!("not {want} blocks per cluster"))
}

/// The band cases must plan the sm90 forward in launches of `band` token tiles where the sm90
/// family runs (sm_90a); elsewhere they run as any case.
pub(crate) fn require_band(be: &CudaLoss, c: &Case, band: usize) -> Result<(), String> {
    let bands = |p: &ForwardPlan| p.band_tiles == band && p.token_slots == band;
    require_sm90_forward(be, c, bands, &format!("not bands of {band} token tiles"))
}

/// The rest cases must plan the sm90 forward with a rest where the sm90 family runs (sm_90a);
/// elsewhere they run as any case.
pub(crate) fn require_rest(be: &CudaLoss, c: &Case) -> Result<(), String> {
    require_sm90_forward(be, c, |p| p.sm90_grid.and_then(|g| g.rest).is_some(), "no rest")
}

/// Case `c`'s fused forward plan passes `check` where it is the sm90 family's (sm_90a); elsewhere
/// the case runs as any: `why` (with the plan) when it does not.
fn require_sm90_forward(
    be: &CudaLoss,
    c: &Case,
    check: impl Fn(&ForwardPlan) -> bool,
    why: &str,
) -> Result<(), String> {
    let p = be.forward_plan(c.shape, c.dtype, ForwardConfig { budget: None, mode: ForwardMode::Fused });
    if p.family == Family::Sm90 && !check(&p) {
        return Err(format!("{why}: {p:?}"));
    }
    Ok(())
}

/// The de-pass cases (forced, or by default where it pays) must plan dE in a pass of its own on
/// every family (where the call wants dE and dC at 16 bits), and the cut case both passes in
/// several token chunks.
pub(crate) fn require_de_pass(be: &CudaLoss, c: &Case) -> Result<(), String> {
    require_plans(be, c, |p| match p.de_pass.as_deref() {
        None => Err(format!("one pass: {:?}", p.de_acc)),
        Some(de) if c.name.ends_with("cut") && (p.token_chunks() < 2 || de.token_chunks() < 2) => {
            Err(format!("not cut into token chunks: {} and {}", p.token_chunks(), de.token_chunks()))
        }
        Some(_) => Ok(()),
    })
}

/// The de-head cases must plan dE's accumulator partly in dE's own buffer, on every family.
pub(crate) fn require_de_head(be: &CudaLoss, c: &Case) -> Result<(), String> {
    require_plans(be, c, |p| match p.dc_tail().map_or(0, |t| t.rows_in_de) {
        0 => Err(format!("the plan keeps no accumulator rows in dE: {:?}", p.de_acc)),
        _ => Ok(()),
    })
}
