//! The measurement knobs: environment variables, each read once per process, that override a
//! planner's or a kernel launch's default for a measurement on the device (`FLCE_SM90_L2_MB`,
//! `FLCE_SM90_CLUSTER`, `FLCE_SM90_REST`, `FLCE_BWD_DE_PASS`, …). Profiling knobs, not user
//! settings: plans take their values through [`sm90_tuning`] and friends, so every plan stays a
//! pure, tested function of its inputs. (`FLCE_SM90_MAINLOOP`, the kernels' main-loop variants,
//! is [`crate::geometry::Sm90Mainloop::current`].)

/// The L2 bytes the sm90 forward's grid keeps the blocks that run together within
/// ([`crate::plan::sm90_grid`]): [`crate::plan::SM90_L2_BUDGET`], or `FLCE_SM90_L2_MB` (read once;
/// 0: every token tile its own block, the grid before budgets) — a profiling knob, not a user
/// setting, as `FLCE_SM90_MAINLOOP`.
pub fn sm90_l2_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| mb_from_env("FLCE_SM90_L2_MB", crate::plan::SM90_L2_BUDGET))
}

/// The L2 budget of the three-product pass's compact forward grid
/// ([`crate::plan::Sm90Tuning::compact_l2_budget`]): `FLCE_SM90_COMPACT_L2_MB` (read once; a
/// measurement knob), else [`crate::plan::SM90_COMPACT_L2_BUDGET`] or [`sm90_l2_budget`], the
/// smaller (`FLCE_SM90_L2_MB=0`, the every-token-tile grid, holds for both).
pub fn sm90_compact_l2_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        mb_from_env("FLCE_SM90_COMPACT_L2_MB", crate::plan::SM90_COMPACT_L2_BUDGET.min(sm90_l2_budget()))
    })
}

/// A byte-count knob given in MB: the variable `name` times 2^20, or `default` where it is unset
/// or not a number.
fn mb_from_env(name: &str, default: usize) -> usize {
    count_from_env(name, "MB").map_or(default, |mb| mb << 20)
}

/// An on/off knob: `1` on, `0` off, unset or anything else `default`.
fn switch_from_env(name: &str, default: bool) -> bool {
    match std::env::var(name).as_deref().map(str::trim) {
        Ok("1") => true,
        Ok("0") => false,
        _ => default,
    }
}

/// A count knob's value: the variable `name` as a number of `unit`s, or None where it is unset or
/// not a number (said on stderr).
fn count_from_env(name: &str, unit: &str) -> Option<usize> {
    let v = std::env::var(name).ok()?;
    let parsed = v.trim().parse::<usize>().ok();
    if parsed.is_none() {
        eprintln!("flce: ignoring {name}={v:?}: not a number of {unit}");
    }
    parsed
}

/// Blocks per cluster of the sm90 forwards (`FLCE_SM90_CLUSTER`, read once; a measurement knob):
/// `1` runs them unpaired, `2` in pairs of token tiles that share C's box (multicast); unset or
/// anything else, [`crate::plan::Sm90Tuning`]'s default (pairs).
pub fn sm90_cluster_knob() -> usize {
    static KNOB: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *KNOB.get_or_init(|| cluster_from_env("FLCE_SM90_CLUSTER", crate::plan::Sm90Tuning::default().cluster))
}

/// Blocks per cluster of the sm90 G kernel (`FLCE_SM90_G_CLUSTER`, read once; a measurement
/// knob), as [`sm90_cluster_knob`]; unpaired by default.
pub fn sm90_grad_cluster_knob() -> usize {
    static KNOB: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *KNOB.get_or_init(|| cluster_from_env("FLCE_SM90_G_CLUSTER", crate::plan::Sm90Tuning::default().grad_cluster))
}

/// The sm90 G kernel's L2 budget ([`crate::plan::Sm90Tuning::grad_l2_budget`]):
/// `FLCE_SM90_G_L2_MB` (read once; a measurement knob: 0 gives every token tile its own block),
/// the tuning's default unset.
pub fn sm90_grad_l2_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| mb_from_env("FLCE_SM90_G_L2_MB", crate::plan::Sm90Tuning::DEFAULT.grad_l2_budget))
}

/// A cluster-size knob's value: 1 or 2 where the variable says so, else `default`.
fn cluster_from_env(name: &str, default: usize) -> usize {
    match std::env::var(name).as_deref().map(str::trim) {
        Ok("1") => 1,
        Ok("2") => 2,
        Ok(v) => {
            eprintln!("flce: ignoring {name}={v:?}: not 1 or 2");
            default
        }
        Err(_) => default,
    }
}

/// The sm90 grids' tuning from the knobs: [`sm90_l2_budget`], [`sm90_cluster_knob`],
/// [`sm90_grad_cluster_knob`], `FLCE_SM90_FORWARD_BAND` and `FLCE_SM90_REST`.
pub fn sm90_tuning() -> crate::plan::Sm90Tuning {
    crate::plan::Sm90Tuning {
        l2_budget: sm90_l2_budget(),
        compact_l2_budget: sm90_compact_l2_budget(),
        cluster: sm90_cluster_knob(),
        grad_cluster: sm90_grad_cluster_knob(),
        grad_l2_budget: sm90_grad_l2_budget(),
        forward_band: sm90_forward_band_knob(),
        rest: sm90_rest_knob(),
    }
}

/// Whether the forwards' grids may run a rest on the SMs their main grid leaves idle
/// ([`crate::plan::Sm90Rest`]): yes, unless `FLCE_SM90_REST=0` (read once; a measurement knob).
fn sm90_rest_knob() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| switch_from_env("FLCE_SM90_REST", true))
}

/// Token tiles per sm90 forward launch (`FLCE_SM90_FORWARD_BAND`, read once; a measurement knob,
/// [`crate::plan::Sm90Tuning::forward_band`]): unset, the measured rule; 0, one launch; k, bands
/// of k token tiles.
fn sm90_forward_band_knob() -> Option<usize> {
    static KNOB: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *KNOB.get_or_init(|| count_from_env("FLCE_SM90_FORWARD_BAND", "token tiles"))
}

/// Whether backward plans put their first chunks' G in dC's unwritten rows
/// ([`crate::plan::with_dc_scratch`]): yes, unless `FLCE_DC_SCRATCH=0` (read once; a measurement
/// knob).
pub fn dc_scratch_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| switch_from_env("FLCE_DC_SCRATCH", true))
}

/// Whether backward plans wanting dE and dC run dE in a pass of its own
/// ([`crate::plan::with_de_pass`]): `FLCE_BWD_DE_PASS=1` always, `0` never, unset (or anything
/// else) where it pays ([`crate::plan::de_pass_pays`]) — `None` (read once; a measurement knob).
pub fn de_pass_knob() -> Option<bool> {
    static ON: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("FLCE_BWD_DE_PASS").as_deref().map(str::trim) {
        Ok("1") => Some(true),
        Ok("0") => Some(false),
        _ => None,
    })
}

/// Whether one-token-chunk vocabulary-outer backward plans (dE's accumulator in dC's tail, or dC
/// without dE) are cut into token chunks with larger vocabulary chunks
/// ([`crate::plan::with_token_chunks`]): `FLCE_BWD_TOKEN_CHUNKS=1` wherever such a plan exists
/// (`Some(true)`), `auto` where the planner's model has it faster (`None`), unset or `0` never
/// (`Some(false)`, the default: measured in s39 — correct on every family, but at Llama 3 32k /
/// 65k tokens 1.067 / 0.984× today's plans, and the model behind `auto` predicted 0.93 at 65k;
/// benchmarks/h200-2026-12-04-s39/token-chunks/, perf-notes v48). Read once; a measurement knob.
pub fn token_chunks_knob() -> Option<bool> {
    static ON: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("FLCE_BWD_TOKEN_CHUNKS").as_deref().map(str::trim) {
        Ok("1") => Some(true),
        Ok("auto") => None,
        _ => Some(false),
    })
}

/// Whether backward plans keep the first rows of dE's f32 accumulator in dE's own buffer
/// ([`crate::plan::DcTail::rows_in_de`]): yes, unless `FLCE_DE_HEAD=0` (read once; a measurement
/// knob: all N rows then go in dC's tail where it still holds them, `plan::without_de_head`).
pub fn de_head_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| switch_from_env("FLCE_DE_HEAD", true))
}

/// The most tokens a three-product chunk of a batch of `n` tokens may hold: the measured rule
/// [`crate::plan::default_step_max_tokens`], unless `FLCE_STEP_MAX_TOKENS` (read once; a
/// measurement knob for [`crate::plan::step_plan_capped`]) names a number of tokens.
pub fn step_max_tokens(n: usize) -> usize {
    static KNOB: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let knob = *KNOB.get_or_init(|| count_from_env("FLCE_STEP_MAX_TOKENS", "tokens"));
    knob.unwrap_or_else(|| crate::plan::default_step_max_tokens(n))
}

/// The three-product pass's dE in K-chunks of this many vocabulary columns summed in f32
/// ([`crate::plan::with_de_k_chunks`]: one long product loses precision in cuBLAS's sum, perf-notes
/// v57–v58) for `dtype`: [`crate::plan::default_de_k_chunk`] (f16 only), unless
/// `FLCE_STEP_DE_K_CHUNK` (read once; a measurement knob) names a number of columns for every
/// dtype, `0` for one product over V.
pub fn step_de_k_chunk(dtype: flce_core::DType) -> Option<usize> {
    static KNOB: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    match *KNOB.get_or_init(|| count_from_env("FLCE_STEP_DE_K_CHUNK", "columns")) {
        Some(0) => None,
        Some(columns) => Some(columns),
        None => crate::plan::default_de_k_chunk(dtype),
    }
}

/// Whether the three-product pass keeps its chunks' logits in f32 even where the compact form
/// applies ([`crate::CudaLoss::step_logits`]): no, unless `FLCE_STEP_LOGITS=f32` (read once; a
/// measurement knob for A/B runs of the two storages).
pub fn step_logits_f32_knob() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("FLCE_STEP_LOGITS").is_ok_and(|v| v.trim() == "f32"))
}

/// Whether the sm90 backward's dE and dC products run through flce's own TMA + wgmma kernel
/// (kernels/sm90/product.cu) instead of cuBLAS: no, unless `FLCE_SM90_PRODUCTS=1` (read once; a
/// measurement knob for the persistent backward's product phase, docs/design-sm90-backward.md).
pub fn sm90_products_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| switch_from_env("FLCE_SM90_PRODUCTS", false))
}

/// The order of flce_sm90_product's output tiles (`FLCE_SM90_PRODUCT_ORDER`, read once; a
/// measurement knob): `grouped` (default: plan::sm90_product_order's raster groups, one block per
/// SM), `grouped-tiles` (the same order, one block per tile) or `rows` (row tiles fastest, one
/// block per tile: the first product kernel's order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sm90ProductOrderKnob {
    Grouped,
    GroupedTiles,
    Rows,
}

pub fn sm90_product_order_knob() -> Sm90ProductOrderKnob {
    static KNOB: std::sync::OnceLock<Sm90ProductOrderKnob> = std::sync::OnceLock::new();
    *KNOB.get_or_init(|| match std::env::var("FLCE_SM90_PRODUCT_ORDER").as_deref().map(str::trim) {
        Ok("rows") => Sm90ProductOrderKnob::Rows,
        Ok("grouped-tiles") => Sm90ProductOrderKnob::GroupedTiles,
        _ => Sm90ProductOrderKnob::Grouped,
    })
}

/// The product kernel's tile width (`FLCE_SM90_PRODUCT_TILE_N`, read once; a measurement knob):
/// `192` or `256` for every launch, anything else (default) plan::sm90_product_tile_n's choice.
pub fn sm90_product_tile_n_knob() -> Option<usize> {
    static KNOB: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *KNOB.get_or_init(|| match std::env::var("FLCE_SM90_PRODUCT_TILE_N").as_deref().map(str::trim) {
        Ok("192") => Some(192),
        Ok("256") => Some(256),
        _ => None,
    })
}

/// Blocks per cluster of the product kernel (`FLCE_SM90_PRODUCT_CLUSTER`, read once; a
/// measurement knob): `2` pairs column tiles that share A's box (multicast), unset or `1` unpaired.
/// Pairs are correct (GPU tests, memcheck). They ran 1.19–1.33× slower fwd+bwd while the
/// consumers released stages with a cluster-scope fence (perf-notes v21); with the CTA-scope
/// release (v23) they are even with unpaired products (1.000–1.009×, H200 2026-12-02): off, as
/// they save nothing yet.
pub fn sm90_product_cluster_knob() -> usize {
    static KNOB: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *KNOB.get_or_init(|| cluster_from_env("FLCE_SM90_PRODUCT_CLUSTER", 1))
}

/// Whether byte budgets too small for a three-product plan that pays take the vocabulary-slice
/// plan ([`crate::CudaLoss::trade_plan`]): yes, unless `FLCE_SLICE_PLAN=0` (read once; a
/// measurement knob for A/B runs against the default plans at the same budget).
pub fn slice_plan_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| switch_from_env("FLCE_SLICE_PLAN", true))
}

/// Whether the vocabulary-slice plan's rest keeps its first chunks' G in dC's unwritten rows
/// ([`crate::plan::SliceRest::dc_scratch`]): yes, unless `FLCE_SLICE_DC_SCRATCH=0` (read once; a
/// measurement knob for A/B runs: measured and sanitized on the H200 2026-12-04,
/// benchmarks/h200-2026-12-04-s38/slice-rests/).
pub fn slice_dc_scratch_knob() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| switch_from_env("FLCE_SLICE_DC_SCRATCH", true))
}

/// The smallest share of the vocabulary a vocabulary-slice plan's head may cover
/// ([`crate::plan::slice_plan`]): [`crate::plan::MIN_SLICE_HEAD_SHARE`], unless
/// `FLCE_SLICE_MIN_SHARE` (read once; a measurement knob: `0` lets every budget that holds a head of
/// `MIN_SLICE_HEAD_ROWS` take the plan) gives a fraction.
pub fn slice_min_share() -> f64 {
    static SHARE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *SHARE.get_or_init(|| {
        let Ok(v) = std::env::var("FLCE_SLICE_MIN_SHARE") else { return crate::plan::MIN_SLICE_HEAD_SHARE };
        match v.trim().parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => x,
            _ => {
                eprintln!("flce: ignoring FLCE_SLICE_MIN_SHARE={v:?}: not a fraction between 0 and 1");
                crate::plan::MIN_SLICE_HEAD_SHARE
            }
        }
    })
}

/// Whether the vocabulary-slice plan keeps dE's f32 accumulator in dC's head rows where they hold
/// it ([`crate::plan::SliceRest::de_in_dc`]: N·D·4 bytes more for the head): yes, unless
/// `FLCE_SLICE_DE_IN_DC=0` (read once; a measurement knob for A/B runs: measured and sanitized on
/// the H200 2026-12-04, benchmarks/h200-2026-12-04-s38/slice-rests/).
pub fn slice_de_in_dc_knob() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| switch_from_env("FLCE_SLICE_DE_IN_DC", true))
}
