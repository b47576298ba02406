//! Every `FLCE_*` environment variable the CUDA backend reads, read here and nowhere else, once
//! per process.
//!
//! The tuning knobs override a planner's or a kernel launch's default for a measurement on the
//! device (A/B runs of two layouts, profiling); they are not user settings, and the defaults are
//! the measured choices (docs/tuning.md lists each with what it does). [`Tuning::from_env`] reads
//! them into one value; a [`crate::CudaLoss`] takes it when it is made, its plans take it as an
//! argument and its launches read it from the call, so every plan stays a pure, tested function
//! of its inputs and no launch looks at the environment.
//!
//! Two variables are locations, not tuning: `FLCE_CACHE_DIR` (the kernel cache,
//! [`cache_dir_override`]) and `FLCE_NCCL_LIBRARY` ([`nccl_library`]).

use std::ffi::OsString;
use std::sync::OnceLock;

/// Default L2 bytes the forward's blocks that run together may keep in use (`FLCE_SM90_L2_MB` overrides it
/// for measurements: [`Tuning::from_env`]; 0 gives the every-token-tile grid).
pub const SM90_L2_BUDGET: usize = 32 << 20;

/// Default L2 bytes of the three-product pass's compact forward grid: its q stores stream past E
/// and C (at the 16k training-step loss it read 2.5× the plain forward's DRAM bytes). H200
/// (journal v40, without the rest): 16 MB against 32 ran
/// the pass 0.997× at the 16k loss (5 rounds) and 0.980× at Gemma 2 (3 rounds); under ncu the
/// compact forward's DRAM reads fell 24–31% and its 4096-token chunk (32 × 4 → 16 × 8) took 3.09
/// against 3.44 ms.
pub const SM90_COMPACT_L2_BUDGET: usize = 16 << 20;

/// How the sm90 grids are shaped beyond the call and the GPU: the L2 budget of the forward's blocks
/// that run together, and the blocks per cluster (1, or 2: pairs of token tiles sharing C's box by
/// multicast, `slots` then a multiple of 2) of the forwards (the sm90 forward and the compact
/// three-product forward) and of the backward's G kernel. The backend reads them from measurement
/// knobs ([`Tuning::from_env`]); plans take them as values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sm90Tuning {
    pub l2_budget: usize,
    /// The L2 budget of the three-product pass's compact forward grid, [`SM90_COMPACT_L2_BUDGET`]
    /// by default; a measurement knob, `FLCE_SM90_COMPACT_L2_MB` (unset: the default, or
    /// `l2_budget` where that is smaller).
    pub compact_l2_budget: usize,
    /// Blocks per cluster of the forwards.
    pub cluster: usize,
    /// Blocks per cluster of the G kernel.
    pub grad_cluster: usize,
    /// The L2 budget of the G kernel's grid (`plan::grad_grid`), [`SM90_L2_BUDGET`] by default; 0,
    /// every token tile its own block (the first grid, journal v13); a measurement knob,
    /// `FLCE_SM90_G_L2_MB`.
    pub grad_l2_budget: usize,
    /// Token tiles per launch of the sm90 forward: `None`, the measured rule
    /// (bands of `plan::SM90_LARGE_N_BAND` past `plan::SM90_LARGE_N_TOKENS` tokens, with an
    /// L2 budget); `Some(0)`, one launch over every token tile;
    /// `Some(k)`, bands of k. A band launch gives each block one token tile of the band and one
    /// vocabulary split, so the blocks start every band together (the drift that breaks their
    /// sharing of C's boxes through L2 at large N: docs/journal.md v25); a measurement knob,
    /// `FLCE_SM90_FORWARD_BAND`.
    pub forward_band: Option<usize>,
    /// Whether the forwards' grids may add a `plan::Sm90Rest` on the SMs their main grid leaves idle
    /// (default yes; `FLCE_SM90_REST=0`, a measurement knob, turns it off).
    pub rest: bool,
}

impl Default for Sm90Tuning {
    /// Paired forwards, unpaired G: with the CTA-scope stage release (journal v24, H200, three
    /// interleaved rounds) pairs ran the forward 0.975 / 0.996 / 0.968× the
    /// unpaired at Gemma 2 / Llama 3 / Qwen 2.5 and 0.957× at the train step's (16384, 2048,
    /// 128256), the three-product pass 1.001 / 0.996 / 0.994 / 0.985×; paired G gave nothing
    /// back (fwd+bwd 1.003–1.008× with the paired forward in it).
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Sm90Tuning {
    /// [`Default`]'s tuning, as a constant.
    pub const DEFAULT: Sm90Tuning = Sm90Tuning {
        l2_budget: SM90_L2_BUDGET,
        compact_l2_budget: SM90_COMPACT_L2_BUDGET,
        cluster: 2,
        grad_cluster: 1,
        grad_l2_budget: SM90_L2_BUDGET,
        forward_band: None,
        rest: true,
    };

    /// Both kernels unpaired.
    pub const UNPAIRED: Sm90Tuning = Sm90Tuning { cluster: 1, ..Self::DEFAULT };
}

/// The order of the sm90 product kernel's output tiles (`FLCE_SM90_PRODUCT_ORDER`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProductOrder {
    /// [`crate::plan::sm90_product_order`]'s raster groups, one block per SM (`grouped`, the default).
    #[default]
    Grouped,
    /// The same order, one block per tile (`grouped-tiles`).
    GroupedTiles,
    /// Row tiles fastest, one block per tile (`rows`).
    Rows,
}

/// The tuning a backend plans and launches with: the measured defaults ([`Tuning::DEFAULT`]), or
/// what the knobs say ([`Tuning::from_env`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// The sm90 grids: L2 budgets, clusters, bands, rests (`FLCE_SM90_L2_MB`,
    /// `FLCE_SM90_COMPACT_L2_MB`, `FLCE_SM90_CLUSTER`, `FLCE_SM90_G_CLUSTER`, `FLCE_SM90_G_L2_MB`,
    /// `FLCE_SM90_FORWARD_BAND`, `FLCE_SM90_REST`).
    pub sm90: Sm90Tuning,
    /// Backward plans wanting dE and dC run dE in a pass of its own always (`Some(true)`), never,
    /// or where it pays (`None`, [`crate::plan::de_pass_pays`]): `FLCE_BWD_DE_PASS=1` / `0` / unset.
    pub de_pass: Option<bool>,
    /// One-token-chunk vocabulary-outer backward plans cut into token chunks
    /// ([`crate::plan::with_token_chunks`]) wherever one exists (`Some(true)`), where the model has it
    /// faster (`None`) or never (`Some(false)`, the default): `FLCE_BWD_TOKEN_CHUNKS=1` / `auto`.
    pub token_chunks: Option<bool>,
    /// Backward plans keep the first rows of dE's f32 accumulator in dE's own buffer
    /// ([`crate::plan::DcTail::rows_in_de`]); `FLCE_DE_HEAD=0` puts them all in dC's tail.
    pub de_head: bool,
    /// Backward plans put their first chunks' G in dC's unwritten rows ([`crate::plan::with_dc_scratch`]);
    /// `FLCE_DC_SCRATCH=0` turns it off.
    pub dc_scratch: bool,
    /// The most tokens a three-product chunk holds: `None`, the measured rule
    /// (`plan::default_three_product_max_tokens`); `FLCE_THREE_PRODUCT_MAX_TOKENS` names a count.
    pub three_product_max_tokens: Option<usize>,
    /// The three-product pass's dE in K-chunks summed in f32 (`plan::with_de_k_chunks`): `None`,
    /// each dtype's default (`plan::default_de_k_chunk`); `Some(0)`, one product over V;
    /// `Some(k)`, chunks of k columns for every dtype (`FLCE_THREE_PRODUCT_DE_K_CHUNK`).
    pub de_k_chunk: Option<usize>,
    /// The three-product pass keeps f32 logits even where the compact f16 form applies
    /// (`FLCE_THREE_PRODUCT_LOGITS=f32`).
    pub f32_logits: bool,
    /// The sm90 backward's dE and dC products run through flce's own TMA + wgmma kernel
    /// (kernels/sm90/product.cu) instead of cuBLAS (`FLCE_SM90_PRODUCTS=1`).
    pub sm90_products: bool,
    /// Their output tiles' order (`FLCE_SM90_PRODUCT_ORDER=grouped|grouped-tiles|rows`).
    pub product_order: ProductOrder,
    /// Their tile width, 192 or 256 for every launch; `None`, [`crate::plan::sm90_product_tile_n`]'s
    /// choice (`FLCE_SM90_PRODUCT_TILE_N`).
    pub product_tile_n: Option<usize>,
    /// Blocks per cluster of the product kernel, 1 or 2 (`FLCE_SM90_PRODUCT_CLUSTER`).
    pub product_cluster: usize,
    /// Byte budgets too small for a three-product plan that pays take the vocabulary-slice plan;
    /// `FLCE_VOCAB_SLICE_PLAN=0` turns it off.
    pub vocab_slice: bool,
    /// The vocabulary-slice plan's rest may keep its first chunks' G in dC's unwritten rows
    /// ([`crate::plan::VocabSliceRest::dc_scratch`]); `FLCE_VOCAB_SLICE_DC_SCRATCH=0` turns it off.
    pub vocab_slice_dc_scratch: bool,
    /// The vocabulary-slice plan may keep dE's f32 accumulator in dC's head rows
    /// ([`crate::plan::VocabSliceRest::de_in_dc`]); `FLCE_VOCAB_SLICE_DE_IN_DC=0` turns it off.
    pub vocab_slice_de_in_dc: bool,
    /// The smallest share of the vocabulary a vocabulary-slice head covers: `None`,
    /// `plan::MIN_VOCAB_SLICE_HEAD_SHARE`; `FLCE_VOCAB_SLICE_MIN_SHARE` names a fraction.
    pub vocab_slice_min_share: Option<f64>,
}

impl Default for Tuning {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Tuning {
    /// The measured defaults.
    pub const DEFAULT: Tuning = Tuning {
        sm90: Sm90Tuning::DEFAULT,
        de_pass: None,
        token_chunks: Some(false),
        de_head: true,
        dc_scratch: true,
        three_product_max_tokens: None,
        de_k_chunk: None,
        f32_logits: false,
        sm90_products: false,
        product_order: ProductOrder::Grouped,
        product_tile_n: None,
        product_cluster: 1,
        vocab_slice: true,
        vocab_slice_dc_scratch: true,
        vocab_slice_de_in_dc: true,
        vocab_slice_min_share: None,
    };

    /// The defaults with every knob that is set applied: read from the environment once per
    /// process, the same value after. A knob that does not parse is ignored with a line on stderr.
    pub fn from_env() -> Tuning {
        static TUNING: OnceLock<Tuning> = OnceLock::new();
        *TUNING.get_or_init(|| Self::from_vars(|name| std::env::var(name).ok()))
    }

    /// The defaults with the knobs `var` returns applied (`var(name)`: the variable's value, if set).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Tuning {
        let d = Self::DEFAULT;
        let k = Knobs { var: &var };
        let l2_budget = k.megabytes("FLCE_SM90_L2_MB").unwrap_or(d.sm90.l2_budget);
        let sm90 = Sm90Tuning {
            l2_budget,
            compact_l2_budget: k
                .megabytes("FLCE_SM90_COMPACT_L2_MB")
                .unwrap_or(d.sm90.compact_l2_budget.min(l2_budget)),
            cluster: k.cluster("FLCE_SM90_CLUSTER").unwrap_or(d.sm90.cluster),
            grad_cluster: k.cluster("FLCE_SM90_G_CLUSTER").unwrap_or(d.sm90.grad_cluster),
            grad_l2_budget: k.megabytes("FLCE_SM90_G_L2_MB").unwrap_or(d.sm90.grad_l2_budget),
            forward_band: k.count("FLCE_SM90_FORWARD_BAND", "token tiles").or(d.sm90.forward_band),
            rest: k.switch("FLCE_SM90_REST").unwrap_or(d.sm90.rest),
        };
        let three_way = |name: &str, auto: &str| match k.get(name).as_deref().map(str::trim) {
            Some("1") => Some(Some(true)),
            Some("0") => Some(Some(false)),
            Some(v) if v == auto => Some(None),
            _ => None,
        };
        let share = k.get("FLCE_VOCAB_SLICE_MIN_SHARE").and_then(|v| match v.trim().parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Some(x),
            _ => {
                eprintln!("flce: ignoring FLCE_VOCAB_SLICE_MIN_SHARE={v:?}: not a fraction between 0 and 1");
                None
            }
        });
        Tuning {
            sm90,
            de_pass: three_way("FLCE_BWD_DE_PASS", "auto").unwrap_or(d.de_pass),
            token_chunks: three_way("FLCE_BWD_TOKEN_CHUNKS", "auto").unwrap_or(d.token_chunks),
            de_head: k.switch("FLCE_DE_HEAD").unwrap_or(d.de_head),
            dc_scratch: k.switch("FLCE_DC_SCRATCH").unwrap_or(d.dc_scratch),
            three_product_max_tokens: k.count("FLCE_THREE_PRODUCT_MAX_TOKENS", "tokens").or(d.three_product_max_tokens),
            de_k_chunk: k.count("FLCE_THREE_PRODUCT_DE_K_CHUNK", "columns").or(d.de_k_chunk),
            f32_logits: k.get("FLCE_THREE_PRODUCT_LOGITS").is_some_and(|v| v.trim() == "f32"),
            sm90_products: k.switch("FLCE_SM90_PRODUCTS").unwrap_or(d.sm90_products),
            product_order: match k.get("FLCE_SM90_PRODUCT_ORDER").as_deref().map(str::trim) {
                Some("rows") => ProductOrder::Rows,
                Some("grouped-tiles") => ProductOrder::GroupedTiles,
                _ => d.product_order,
            },
            product_tile_n: match k.get("FLCE_SM90_PRODUCT_TILE_N").as_deref().map(str::trim) {
                Some("192") => Some(192),
                Some("256") => Some(256),
                _ => d.product_tile_n,
            },
            product_cluster: k.cluster("FLCE_SM90_PRODUCT_CLUSTER").unwrap_or(d.product_cluster),
            vocab_slice: k.switch("FLCE_VOCAB_SLICE_PLAN").unwrap_or(d.vocab_slice),
            vocab_slice_dc_scratch: k.switch("FLCE_VOCAB_SLICE_DC_SCRATCH").unwrap_or(d.vocab_slice_dc_scratch),
            vocab_slice_de_in_dc: k.switch("FLCE_VOCAB_SLICE_DE_IN_DC").unwrap_or(d.vocab_slice_de_in_dc),
            vocab_slice_min_share: share.or(d.vocab_slice_min_share),
        }
    }
}

/// The parsers of the knobs' values.
struct Knobs<'a, F: Fn(&str) -> Option<String>> {
    var: &'a F,
}

impl<F: Fn(&str) -> Option<String>> Knobs<'_, F> {
    fn get(&self, name: &str) -> Option<String> {
        (self.var)(name)
    }
    /// A count of `unit`s, or None where unset or not a number (said on stderr).
    fn count(&self, name: &str, unit: &str) -> Option<usize> {
        let v = self.get(name)?;
        let parsed = v.trim().parse::<usize>().ok();
        if parsed.is_none() {
            eprintln!("flce: ignoring {name}={v:?}: not a number of {unit}");
        }
        parsed
    }
    /// A byte count given in MB.
    fn megabytes(&self, name: &str) -> Option<usize> {
        self.count(name, "MB").map(|mb| mb << 20)
    }
    /// `1` on, `0` off, else None.
    fn switch(&self, name: &str) -> Option<bool> {
        match self.get(name).as_deref().map(str::trim) {
            Some("1") => Some(true),
            Some("0") => Some(false),
            _ => None,
        }
    }
    /// A cluster size, 1 or 2.
    fn cluster(&self, name: &str) -> Option<usize> {
        match self.get(name).as_deref().map(str::trim) {
            Some("1") => Some(1),
            Some("2") => Some(2),
            Some(v) => {
                eprintln!("flce: ignoring {name}={v:?}: not 1 or 2");
                None
            }
            None => None,
        }
    }
}

/// `FLCE_SM90_MAINLOOP`: the sm90 kernels' main-loop variant they compile with, as written
/// (`crate::geometry::Sm90Mainloop::current` parses it), read once.
pub fn sm90_mainloop() -> Option<&'static str> {
    static SPEC: OnceLock<Option<String>> = OnceLock::new();
    SPEC.get_or_init(|| std::env::var("FLCE_SM90_MAINLOOP").ok()).as_deref()
}

/// `FLCE_CACHE_DIR`: where the kernel cache lives, if set ([`crate::cache`]).
pub fn cache_dir_override() -> Option<OsString> {
    std::env::var_os("FLCE_CACHE_DIR")
}

/// `FLCE_NCCL_LIBRARY`: the path of libnccl to load first, if set and not empty ([`crate::nccl`]).
pub fn nccl_library() -> Option<String> {
    std::env::var("FLCE_NCCL_LIBRARY").ok().filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Tuning {
        Tuning::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn no_knob_is_the_default_and_each_knob_moves_its_field_only() {
        assert_eq!(with(&[]), Tuning::DEFAULT);
        let t = with(&[("FLCE_SM90_L2_MB", "0"), ("FLCE_BWD_DE_PASS", "1"), ("FLCE_THREE_PRODUCT_DE_K_CHUNK", "0")]);
        assert_eq!(t.sm90.l2_budget, 0);
        assert_eq!(t.sm90.compact_l2_budget, 0, "an L2 budget of 0 holds for the compact grid too");
        assert_eq!(t.de_pass, Some(true));
        assert_eq!(t.de_k_chunk, Some(0));
        assert_eq!(Tuning { sm90: Sm90Tuning::DEFAULT, de_pass: None, de_k_chunk: None, ..t }, Tuning::DEFAULT);
        assert_eq!(with(&[("FLCE_BWD_TOKEN_CHUNKS", "auto")]).token_chunks, None);
        assert_eq!(with(&[("FLCE_SM90_PRODUCT_ORDER", "rows")]).product_order, ProductOrder::Rows);
    }

    #[test]
    fn values_that_do_not_parse_leave_the_default() {
        let t = with(&[
            ("FLCE_SM90_CLUSTER", "3"),
            ("FLCE_THREE_PRODUCT_MAX_TOKENS", "many"),
            ("FLCE_VOCAB_SLICE_MIN_SHARE", "2"),
        ]);
        assert_eq!(t, Tuning::DEFAULT);
    }
}
