//! dE without dC (a frozen classifier, as with LoRA): the token-outer backward
//! (src/plan/backward/token_outer.rs) on every kernel family, at the default budget and at one that cuts
//! both the tokens and the vocabulary into several chunks, against the f64 oracle; each run twice
//! and compared bitwise; the dC buffer that is not given stays poisoned.

use flce_core::cpu::reference;
use flce_core::testing::RandomProblem;
use flce_core::{Element, GradOutput, Reduction};
use flce_cuda::{BackwardConfig, BackwardMode, CudaLoss, ForwardConfig, Wanted};

use crate::oracle::{bits, compare_wanted, go_for, gpu_run_wanting};
use crate::Case;

/// A budget that cuts the frozen cases' tokens and vocabulary into several chunks each.
const SMALL_BUDGET: usize = 1_000_000;

pub(crate) fn run_frozen<T: Element>(be: &CudaLoss, c: &Case) -> Result<String, String> {
    let s = |e: flce_core::Error| e.to_string();
    let p = RandomProblem::<T>::new(c.shape, 0xf20 ^ c.name.len() as u64, c.kind, 0.2, &c.opts, c.bias, c.weights);
    let host = p.inputs();
    let go = go_for(&c.opts, c.shape.n);
    let go_host =
        if c.opts.reduction == Reduction::None { GradOutput::PerToken(&go) } else { GradOutput::Scalar(go[0]) };
    let oracle = reference::evaluate(&host, &c.opts, go_host).map_err(s)?;
    let up = be.upload(&host, &c.opts).map_err(s)?;
    let wanted = Wanted { de: true, dc: false, dbias: c.bias };
    let (mut errors, mut chunks) = (String::new(), vec![]);
    let modes = [BackwardMode::CublasLogits, BackwardMode::FusedTiles, BackwardMode::FusedSm80];
    for mode in modes.into_iter().filter(|&m| crate::mode_selected(m)) {
        for budget in [None, Some(SMALL_BUDGET)] {
            let config = BackwardConfig { budget, mode };
            let plan = be.backward_plan(c.shape, T::DTYPE, wanted, config).map_err(s)?;
            let what = format!("{mode:?} budget {budget:?} ({}x{} chunks)", plan.token_chunks(), plan.vocab_chunks());
            if !plan.token_outer {
                return Err(format!("{what}: the plan without dC is not token-outer"));
            }
            let run = || {
                let null = std::ptr::null_mut();
                gpu_run_wanting::<T>(be, &up, &c.opts, &go, ForwardConfig::default(), config, null, false)
            };
            let (a, b) = (run()?, run()?);
            if bits(&a) != bits(&b) {
                return Err(format!("{what}: results differ between two identical runs (race?)"));
            }
            if let Some(i) = a.dc.iter().position(|x| !x.to_f64().is_nan()) {
                return Err(format!("{what}: dC was not given, but its element {i} was written"));
            }
            let m = compare_wanted(c, &p, &oracle, &go, &a, false).map_err(|e| format!("{what}: {e}"))?;
            if errors.is_empty() {
                errors = m;
            }
            chunks.push(format!("{}x{}", plan.token_chunks(), plan.vocab_chunks()));
        }
    }
    Ok(format!("{errors} | chunks {}", chunks.join(" ")))
}
