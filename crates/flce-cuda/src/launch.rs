//! [`Call`]: one launch's context — the inputs, the logit parameters, the workspace, the stream,
//! and the backend's kernels, cuBLAS handle and tuning — handed to a family's launchers. Made by
//! [`crate::CudaLoss::call`], which binds the device's context for the call's life.

use crate::abi::LogitParams;
use crate::blas::Blas;
use crate::context::BoundContext;
use crate::device::{DeviceInputs, Stream, Workspace};
use crate::runtime::Kernels;
use crate::tuning::Tuning;

/// One launch's context, handed to a family's launchers.
pub(crate) struct Call<'a> {
    pub kernels: &'a Kernels,
    pub blas: &'a Blas,
    pub tuning: &'a Tuning,
    /// The SM count plans are made for ([`crate::CudaLoss::sm_count`]).
    pub sm_count: usize,
    pub x: &'a DeviceInputs,
    pub lp: LogitParams,
    pub ws: Workspace,
    pub stream: Stream,
    /// This device's context, current while the call lives; the caller's again after.
    pub(crate) _bound: BoundContext,
}
