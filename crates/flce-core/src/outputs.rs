//! What forward and backward return: caller-owned buffers for the zero-copy entry points, owned
//! values for the convenient ones.

use crate::Element;

/// Caller-owned forward outputs. `lse` is always written (backward needs it).
#[derive(Debug)]
pub struct ForwardBuffers<'a> {
    /// \[N\] log-sum-exp of each token's logits (also for ignored tokens).
    pub lse: &'a mut [f32],
    /// \[N\] per-token loss, 0 at ignored tokens. Required for `Reduction::None`.
    pub per_token_loss: Option<&'a mut [f32]>,
}

/// The scalar results of a forward pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ForwardScalars {
    /// The reduced loss: mean or sum; for `Reduction::None`, the sum of the per-token losses.
    pub loss: f32,
    /// Token accuracy, if asked for (NaN when every token is ignored).
    pub accuracy: Option<f32>,
}

/// Owned forward outputs.
#[derive(Clone, Debug)]
pub struct ForwardOutput {
    pub loss: f32,
    pub lse: Vec<f32>,
    pub per_token_loss: Option<Vec<f32>>,
    pub accuracy: Option<f32>,
}

/// Caller-owned gradient buffers, in the input dtype; `None` skips that gradient (a frozen
/// classifier, say).
#[derive(Debug)]
pub struct GradBuffers<'a, T: Element> {
    /// [N, D]
    pub de: Option<&'a mut [T]>,
    /// [V, D]
    pub dc: Option<&'a mut [T]>,
    /// \[V\]
    pub dbias: Option<&'a mut [T]>,
}

/// Owned gradients.
#[derive(Clone, Debug)]
pub struct Gradients<T: Element> {
    pub de: Vec<T>,
    pub dc: Vec<T>,
    pub dbias: Option<Vec<T>>,
}
