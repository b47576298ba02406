//! Loss options. Names follow PyTorch's `F.cross_entropy` / `F.linear_cross_entropy` where
//! PyTorch has the option; flce's extras (z_loss, softcap, shift, optional outputs) follow them.

use crate::error::{Error, Result};

/// How per-token losses are combined, as in PyTorch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// Sum over non-ignored tokens divided by their count, or by their total class weight
    /// `Σ_i w[t_i]` when class weights are given (PyTorch). All tokens ignored gives NaN.
    #[default]
    Mean,
    /// Sum over non-ignored tokens.
    Sum,
    /// One loss per token, 0 at ignored tokens.
    None,
}

impl std::str::FromStr for Reduction {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "mean" => Ok(Reduction::Mean),
            "sum" => Ok(Reduction::Sum),
            "none" => Ok(Reduction::None),
            other => Err(format!("unknown reduction '{other}' (expected mean, sum or none)")),
        }
    }
}

/// Options of the loss. `Options::default()` is plain cross-entropy with mean reduction and
/// ignore_index = -100, like `F.cross_entropy`.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub reduction: Reduction,
    /// Targets equal to this take no part in the loss or the gradients.
    pub ignore_index: i64,
    /// ε in [0, 1] (PyTorch's range): the target distribution is (1-ε)·onehot + ε/V (PyTorch semantics, class
    /// weights included).
    pub label_smoothing: f32,
    /// λ ≥ 0: adds λ·lse² per non-ignored token (PaLM's z-loss; Liger's `lse_square_scale`).
    pub z_loss: f32,
    /// s > 0: logits become s·tanh(x/s) before the softmax (Gemma 2 uses 30).
    pub softcap: Option<f32>,
    /// `Some(T)`: the N tokens are sequences of T tokens, and position k of a sequence predicts
    /// the target at position k+1 (CCE's `shift`); the last position of each sequence is ignored.
    pub shift: Option<usize>,
    /// Also return the per-token loss (always returned for `Reduction::None`).
    pub return_per_token_loss: bool,
    /// Also return the token accuracy: the fraction of non-ignored tokens whose argmax logit
    /// (first index on ties) is the target.
    pub return_accuracy: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            reduction: Reduction::Mean,
            ignore_index: -100,
            label_smoothing: 0.0,
            z_loss: 0.0,
            softcap: None,
            shift: None,
            return_per_token_loss: false,
            return_accuracy: false,
        }
    }
}

impl Options {
    /// Check every option value against its domain.
    pub fn validate(&self) -> Result<()> {
        let ls = self.label_smoothing;
        if !(ls.is_finite() && (0.0..=1.0).contains(&ls)) {
            return Err(Error::invalid_option("label_smoothing", ls, "must be in [0, 1]"));
        }
        if !(self.z_loss.is_finite() && self.z_loss >= 0.0) {
            return Err(Error::invalid_option("z_loss", self.z_loss, "must be finite and >= 0"));
        }
        if let Some(s) = self.softcap {
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::invalid_option("softcap", s, "must be finite and > 0"));
            }
        }
        if self.shift == Some(0) {
            return Err(Error::invalid_option("shift", 0, "sequence length must be >= 1"));
        }
        Ok(())
    }

    /// Whether the per-token loss buffer is part of the output.
    pub fn wants_per_token_loss(&self) -> bool {
        self.return_per_token_loss || self.reduction == Reduction::None
    }
}
