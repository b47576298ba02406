//! The planning calls of [`CudaLoss`]: a call shape's forward plan, its backward plan, and the
//! plan of a call that computes the gradients in the forward ([`ForwardBackwardPlan`]: the
//! three-product or the vocabulary-slice pass). Each is made once per call shape from the GPU's
//! family, its SM count and the backend's [`crate::tuning::Tuning`], and handed to every launch
//! of that shape.

use flce_core::{DType, Options, Result, Shape};

use crate::loss::CudaLoss;
use crate::modes::{self, BackwardMode, Family, ForwardMode};
use crate::plan::{self, BackwardPlan, ForwardBackwardPlan, ForwardPlan, VocabSlicePlan, VocabSliceRest, Wanted};

/// What the caller asks of a forward plan: the mode and, for the cuBLAS family, its workspace
/// budget (None: 10% of the gradient bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ForwardConfig {
    pub budget: Option<usize>,
    pub mode: ForwardMode,
}

/// Whether compact logits (the three-product pass's f16 q) can serve a call with these options:
/// all but a softcap with label smoothing. A bias is in q, smoothing is a column term of G, a
/// softcap's derivative at z = m + ln q multiplies G (where q has underflowed G is 0 anyway);
/// with both, smoothing's term needs the derivative where q has underflowed and z is lost.
pub(crate) fn compact_logits_hold(opts: &Options) -> bool {
    opts.softcap.is_none() || opts.label_smoothing == 0.0
}

/// What the caller asks of a backward plan: the workspace budget (None: 10% of the gradient
/// bytes, or the smallest exact unchunked plan if larger) and how logits are recomputed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BackwardConfig {
    pub budget: Option<usize>,
    pub mode: BackwardMode,
}

impl CudaLoss {
    /// The most tokens a three-product chunk of a batch of `n` tokens may hold: the measured rule
    /// ([`plan::default_three_product_max_tokens`]) unless the tuning names a count.
    pub fn three_product_max_tokens(&self, n: usize) -> usize {
        self.tuning.three_product_max_tokens.unwrap_or_else(|| plan::default_three_product_max_tokens(n))
    }

    /// The three-product pass's dE K-chunk for `dtype` (None: one product over V): the dtype's
    /// default ([`plan::default_de_k_chunk`]) unless the tuning says otherwise.
    fn de_k_chunk(&self, dtype: DType) -> Option<usize> {
        match self.tuning.de_k_chunk {
            Some(0) => None,
            Some(columns) => Some(columns),
            None => plan::default_de_k_chunk(dtype),
        }
    }

    /// The forward plan for a call shape: its family, work and workspace. Make it once per shape
    /// and pass it to every [`CudaLoss::forward`] of that shape.
    pub fn forward_plan(&self, shape: Shape, dtype: DType, config: ForwardConfig) -> ForwardPlan {
        let fused = modes::fused_family(self.arch(), shape, dtype);
        let tuning = self.tuning.sm90;
        plan::forward_plan_tuned(shape, dtype, self.sm_count(), config.mode, config.budget, fused, tuning)
    }

    /// How the three-product pass should hold a chunk's logits for calls of this shape and dtype
    /// with these options: compact (sm90 forward, f16 q) where the sm90 family runs the call and
    /// compact logits hold its options (`compact_logits_hold`: all but a softcap with
    /// smoothing), f32 (cuBLAS) elsewhere; f32 inputs always get f32 ([`plan::three_product_plan`]).
    /// `FLCE_THREE_PRODUCT_LOGITS=f32` forces f32 (a knob for A/B measurements).
    pub fn three_product_logits(&self, shape: Shape, dtype: DType, opts: &Options) -> plan::ThreeProductLogits {
        let sm90 = modes::fused_family(self.arch(), shape, dtype) == Family::Sm90;
        if sm90 && compact_logits_hold(opts) && !self.tuning.f32_logits {
            plan::ThreeProductLogits::Compact { sm_count: self.sm_count(), tuning: self.tuning.sm90 }
        } else {
            plan::ThreeProductLogits::F32
        }
    }

    /// The backward plan for a call shape and the gradients wanted: one pass, or dE in a pass of
    /// its own after dC's ([`plan::with_de_pass`]; each pass planned within the call's budget, by
    /// default a tenth of its gradient bytes) where this backend's setting asks for it or, by
    /// default, where it pays ([`plan::de_pass_pays`]).
    pub fn backward_plan(
        &self,
        shape: Shape,
        dtype: DType,
        wanted: Wanted,
        config: BackwardConfig,
    ) -> Result<BackwardPlan> {
        let one_pass = || self.one_pass_plan(shape, dtype, wanted, config);
        if !plan::de_pass_applies(dtype, wanted) || self.tuning.de_pass == Some(false) {
            return one_pass();
        }
        let plan_pass = |w, budget| self.one_pass_plan(shape, dtype, w, BackwardConfig { budget, ..config });
        let two_passes = || plan::de_pass_plan(shape, dtype, wanted, config.budget, plan_pass);
        match self.tuning.de_pass {
            Some(_) => two_passes(),
            None => Ok(plan::one_or_two_passes(one_pass()?, two_passes)),
        }
    }

    /// The one-pass backward plan (vocabulary chunks outer, or token chunks outer without dC).
    fn one_pass_plan(
        &self,
        shape: Shape,
        dtype: DType,
        wanted: Wanted,
        config: BackwardConfig,
    ) -> Result<BackwardPlan> {
        let fused = modes::fused_family(self.arch(), shape, dtype);
        let mode = config.mode.resolve(fused);
        let budget = config.budget.unwrap_or_else(|| plan::default_backward_budget(shape, dtype, wanted, mode));
        let plan = plan::backward_plan(shape, dtype, wanted, Some(budget), mode, fused, self.sm_count())?;
        let plan = if self.tuning.de_head { plan } else { plan::without_de_head(plan) };
        let plan = match self.tuning.token_chunks {
            Some(false) => plan,
            force => plan::with_token_chunks(plan, budget, mode, force == Some(true)),
        };
        Ok(if self.tuning.dc_scratch { plan::with_dc_scratch(plan) } else { plan })
    }

    /// The vocabulary-slice plan of a call within `budget` bytes of workspace (its head the
    /// largest that fits), or None where it does not apply (`plan::vocab_slice_plan_applies`: compact
    /// logits for these options, dC wanted) or no head worth it fits. The rest's vocabulary chunk
    /// is at most the default backward plan's.
    pub fn vocab_slice_plan(
        &self,
        shape: Shape,
        dtype: flce_core::DType,
        opts: &Options,
        wanted: Wanted,
        budget: usize,
    ) -> Result<Option<VocabSlicePlan>> {
        let storage = self.three_product_logits(shape, dtype, opts);
        if !plan::vocab_slice_plan_applies(shape, dtype, wanted, storage) {
            return Ok(None);
        }
        let fused = crate::modes::fused_family(self.arch(), shape, dtype);
        let mode = BackwardMode::Auto.resolve(fused);
        let default = self.backward_plan(shape, dtype, wanted, BackwardConfig::default())?;
        let rest = VocabSliceRest {
            mode,
            family: mode.family(fused),
            sm_count: self.sm_count(),
            vocab_chunk: default.vocab_chunk,
            dc_scratch: self.tuning.vocab_slice_dc_scratch,
            de_in_dc: self.tuning.vocab_slice_de_in_dc,
        };
        let forward_plan = |s: Shape| self.forward_plan(s, dtype, ForwardConfig::default());
        let share = self.tuning.vocab_slice_min_share.unwrap_or(plan::MIN_VOCAB_SLICE_HEAD_SHARE);
        Ok(plan::vocab_slice_plan(shape, dtype, wanted, budget, storage, rest, share, &forward_plan))
    }

    /// The plan a call that trades workspace for speed takes within `budget` bytes: the
    /// three-product pass where a token chunk that pays fits (`plan::three_product_plan_if_faster`), else
    /// the vocabulary-slice pass where a head fits ([`CudaLoss::vocab_slice_plan`]; not with
    /// `FLCE_VOCAB_SLICE_PLAN=0`), else None (the default recomputing plans within the budget).
    ///
    /// None for f16 inputs: both passes round the gradients in the forward for grad_output 1 and
    /// scale them in the backward, and a mean's gradients at grad_output 1 are mostly f16
    /// subnormals (dE over 8k tokens), so AMP's loss scale came too late — dE 9.2e-3 against the
    /// recomputing path's 2.6e-4 at Gemma 2 with grad_output 2¹⁶ (docs/journal.md v54). A
    /// caller that knows the grad_output its backward will bring takes
    /// [`CudaLoss::forward_backward_plan_for_known_grad_output`] instead.
    pub fn forward_backward_plan(
        &self,
        shape: Shape,
        dtype: flce_core::DType,
        opts: &Options,
        wanted: Wanted,
        budget: usize,
    ) -> Result<Option<ForwardBackwardPlan>> {
        if dtype == flce_core::DType::F16 {
            return Ok(None);
        }
        self.forward_backward_plan_for_known_grad_output(shape, dtype, opts, wanted, budget)
    }

    /// [`CudaLoss::forward_backward_plan`] for a caller that gives the pass the grad_output its backward will
    /// bring (the f32 at `grad_output` of [`CudaLoss::forward_backward`], AMP's loss scale
    /// included): the forward then rounds the gradients once at their final scale, as the
    /// recomputing plans do, so f16 inputs trade too (docs/journal.md v57). A grad_output
    /// other than the one given costs a second rounding, and for f16 a given one far below the
    /// real scale (a loss scale left out) the subnormals of v54.
    pub fn forward_backward_plan_for_known_grad_output(
        &self,
        shape: Shape,
        dtype: flce_core::DType,
        opts: &Options,
        wanted: Wanted,
        budget: usize,
    ) -> Result<Option<ForwardBackwardPlan>> {
        let storage = self.three_product_logits(shape, dtype, opts);
        let max_tokens = self.three_product_max_tokens(shape.n);
        if let Some(p) = plan::three_product_plan_if_faster(shape, dtype, wanted, budget, storage, max_tokens) {
            // (dE in K-chunks summed in f32 where the dtype's default or the knob asks and the
            // budget holds its accumulator: plan::with_de_k_chunks; without it f16's dE is
            // 1.15–1.5× the recomputing plans' error)
            let p = match self.de_k_chunk(dtype).map(|k| plan::with_de_k_chunks(p.clone(), k)) {
                Some(k) if k.workspace_bytes <= budget => k,
                _ => p,
            };
            return Ok(Some(ForwardBackwardPlan::ThreeProduct(p)));
        }
        if !self.tuning.vocab_slice {
            return Ok(None);
        }
        Ok(self.vocab_slice_plan(shape, dtype, opts, wanted, budget)?.map(ForwardBackwardPlan::VocabSlice))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_logits_hold_every_option_but_a_softcap_with_smoothing() {
        let plain = Options::default();
        assert!(compact_logits_hold(&plain));
        assert!(compact_logits_hold(&Options { label_smoothing: 0.1, z_loss: 1e-4, ..plain.clone() }));
        assert!(compact_logits_hold(&Options { softcap: Some(30.0), z_loss: 1e-4, ..plain.clone() }));
        assert!(!compact_logits_hold(&Options { softcap: Some(30.0), label_smoothing: 0.1, ..plain }));
    }
}
