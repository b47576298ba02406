//! The pointers Python hands the extension, as tuples of integers (tensors' `data_ptr()`), and
//! their flce types: inputs, the forward's outputs, gradients, a workspace.

use flce::cuda::{DeviceForwardOutputs, DeviceGrads, Workspace};

/// Data pointers of the inputs, as Python passes them: (e, c, bias, targets, class_weights).
pub(crate) type DevicePtrs = (u64, u64, Option<u64>, u64, Option<u64>);

/// Device pointers of the forward's outputs: (lse, per-token loss or None, scalars, status). lse
/// and status may be None for the three-product pass of a plan that keeps its own
/// (`Plan.keeps_lse`, `Plan.keeps_status`); every other call refuses a missing one with a clear
/// error.
pub(crate) type ForwardPtrs = (Option<u64>, Option<u64>, u64, Option<u64>);

pub(crate) fn forward_outputs((lse, per_token_loss, scalars, status): ForwardPtrs) -> DeviceForwardOutputs {
    // (a null lse or status: flce_cuda's "none given", which only such a plan accepts)
    let (lse, status) = (lse.unwrap_or(0), status.unwrap_or(0));
    DeviceForwardOutputs { lse, per_token_loss, scalars, status }
}

/// Device pointers of the gradients: (dE, dC, db), None where not wanted.
pub(crate) type GradPtrs = (Option<u64>, Option<u64>, Option<u64>);

pub(crate) fn device_grads((de, dc, dbias): GradPtrs) -> DeviceGrads {
    DeviceGrads { de, dc, dbias }
}

/// A workspace as Python passes it: (pointer, bytes).
pub(crate) fn to_workspace((ptr, bytes): (u64, usize)) -> Workspace {
    Workspace { ptr, bytes }
}

/// Host pointers of the inputs (CPU tensors' data_ptr()).
pub(crate) struct HostPtrs {
    pub(crate) e: usize,
    pub(crate) c: usize,
    pub(crate) bias: Option<usize>,
    pub(crate) targets: usize,
    pub(crate) class_weights: Option<usize>,
}

impl From<DevicePtrs> for HostPtrs {
    fn from((e, c, bias, targets, class_weights): DevicePtrs) -> Self {
        let host = |p: u64| p as usize;
        HostPtrs {
            e: host(e),
            c: host(c),
            bias: bias.map(host),
            targets: host(targets),
            class_weights: class_weights.map(host),
        }
    }
}
