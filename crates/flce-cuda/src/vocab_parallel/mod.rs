//! The vocabulary-parallel loss over NCCL, for Rust callers: one rank's steps (rank.rs:
//! [`crate::CudaLoss::forward_partials_slice`] and the calls after it) with the caller's
//! communicator doing the exchange. Rank k holds rows
//! [offset_k, offset_k + V_k) of the classifier (and of the bias and class weights), in rank order,
//! and the same N tokens and targets as every other rank.
//!
//! 1. [`CudaLoss::vocab_parallel_slice`] (synchronises the host once): every rank's problem —
//!    N, D, its rows, the dtype and the options — gathered; when the ranks disagree, every rank
//!    returns the same error before any loss kernel runs (no rank is left waiting in a
//!    collective); else this rank's slice (offset = the rows of the ranks before it).
//! 2. [`CudaLoss::vocab_parallel_forward`]: this rank's partials (f64 [N, 6]) and Σ w_j,
//!    all-gathered (48·N + 8 bytes a rank), merged in rank order on every rank: the same loss, lse
//!    and per-token losses everywhere, bitwise, for a fixed number of ranks.
//! 3. [`CudaLoss::vocab_parallel_backward`]: this rank's dC / db rows, and its f32 share of dE
//!    all-reduced (sum; N·D·4 bytes) and rounded once into dE on every rank. NCCL's all-reduce
//!    gives every rank the same bits; the order of its sum is NCCL's (fixed for a fixed number of
//!    ranks, topology and NCCL algorithm), where the Python path (flce.vocab_parallel) gathers the
//!    shares and sums them in rank order. Either way the result is the single-GPU one up to the
//!    reordering of one f32 sum.
//!
//! Every call queues on the caller's stream, the one the communicator's collectives run in order
//! with; nothing synchronises but step 1. A rank's own bad inputs travel in step 1's gather, so
//! every rank stops there together; only a misuse of the call itself (a communicator of another
//! device, an exchange smaller than [`exchange_bytes`]) returns before the gather, on that rank.
//!
//! Not yet run on GPUs (written without the two-GPU machine): `tests/gpu/nccl.rs` checks it on two.

use cudarc::driver::result as drv;
use flce_core::cpu::vocab_parallel::VocabSlice;
use flce_core::{DType, Error, Options, Reduction, Result, Shape};

use crate::abi::DevPtr;
use crate::context::BoundContext;
use crate::device::{DeviceForwardOutputs, DeviceGradOutput, DeviceGrads, DeviceInputs, Stream, Workspace};
use crate::error::Check;
use crate::loss::CudaLoss;
use crate::nccl::{NcclComm, NcclType};
mod rank;

use crate::plan::{BackwardPlan, ForwardPlan, Layout, Region};
pub use rank::{slice_backward_workspace_bytes, RankPartials, SlicePartials, PARTIAL_FIELDS};

/// i64 values per rank in the agreement check (see [`problem_meta`]).
pub const META_FIELDS: usize = 13;

/// One rank's exchange memory, caller-allocated ([`exchange_bytes`]) and kept from the forward to
/// the backward of the same step: the gathered partials, the merged rows, the ranks' Σ w_j.
#[derive(Clone, Copy, Debug)]
pub struct Exchange {
    pub ptr: DevPtr,
    pub bytes: usize,
}

/// Where each part of the exchange lives.
struct ExchangeLayout {
    meta: Region,
    metas: Region,
    part: Region,
    parts: Region,
    wsum: Region,
    wsums: Region,
    merged: Region,
    status: Region,
    finish_ws: Region,
    bytes: usize,
}

fn exchange_layout(n: usize, ranks: usize) -> ExchangeLayout {
    let rows = n * PARTIAL_FIELDS * 8;
    let mut l = Layout::default();
    let (meta, metas) = (l.take(META_FIELDS * 8), l.take(ranks * META_FIELDS * 8));
    let (part, parts) = (l.take(rows), l.take(ranks * rows));
    let (wsum, wsums) = (l.take(8), l.take(ranks * 8));
    let (merged, status, finish_ws) = (l.take(rows), l.take(4), l.take(4 * n));
    ExchangeLayout { meta, metas, part, parts, wsum, wsums, merged, status, finish_ws, bytes: l.bytes() }
}

/// The exchange's bytes for N tokens on `ranks` ranks: (P + 2)·48·N + 4·N and a few hundred.
pub fn exchange_bytes(n: usize, ranks: usize) -> usize {
    exchange_layout(n, ranks).bytes
}

/// What every rank must agree on, as i64: N, D, the rank's rows, the dtype, the options, which
/// optional inputs are given (floats by their bits: the same options are the same bits); last,
/// whether the rank's own inputs passed their checks (`valid`).
pub fn problem_meta(x: &DeviceInputs, opts: &Options, valid: bool) -> [i64; META_FIELDS] {
    let dtype = match x.dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
    };
    let reduction = match opts.reduction {
        Reduction::Mean => 0,
        Reduction::Sum => 1,
        Reduction::None => 2,
    };
    [
        x.shape.n as i64,
        x.shape.d as i64,
        x.shape.v as i64,
        dtype,
        reduction,
        opts.ignore_index,
        opts.label_smoothing.to_bits() as i64,
        opts.z_loss.to_bits() as i64,
        opts.softcap.map_or(-1, |s| s.to_bits() as i64),
        opts.shift.map_or(-1, |t| t as i64),
        x.bias.is_some() as i64,
        x.class_weights.is_some() as i64,
        valid as i64,
    ]
}

/// Index of the `valid` flag in [`problem_meta`].
const VALID: usize = META_FIELDS - 1;

/// Every rank's [`problem_meta`] checked against the others: the same answer on every rank (it
/// sees the same rows). Ok: this rank's slice of the whole vocabulary.
pub fn agree(metas: &[[i64; META_FIELDS]], rank: usize) -> Result<VocabSlice> {
    let disagree = |reason: &'static str| Error::InvalidOption {
        name: "process group",
        value: format!(
            "(N, D, rows, dtype, reduction, ignore_index, ε, λ, softcap, shift, bias, weights) per rank = {metas:?}"
        ),
        reason,
    };
    let first = metas.first().ok_or_else(|| disagree("no ranks"))?;
    let same = |i: usize| metas.iter().all(|m| m[i] == first[i]);
    if !same(0) || !same(1) {
        return Err(disagree("the ranks disagree on N or D (every rank passes all tokens and the whole hidden size)"));
    }
    if let Some(k) = metas.iter().position(|m| m[VALID] == 0) {
        return Err(Error::InvalidOption {
            name: "process group",
            value: format!("rank {k}"),
            reason: "a rank's inputs failed their checks (that rank's own error says which); every rank stops",
        });
    }
    if !(3..VALID).all(same) {
        return Err(disagree(
            "the ranks disagree on the dtype, the loss options or which of bias / class weights is given",
        ));
    }
    if metas.iter().any(|m| m[2] < 1) {
        return Err(disagree("every rank holds at least one classifier row"));
    }
    let offset = metas[..rank].iter().map(|m| m[2] as usize).sum();
    let total = metas.iter().map(|m| m[2] as usize).sum();
    Ok(VocabSlice { offset, total })
}

impl CudaLoss {
    fn check_comm(&self, comm: &NcclComm, ex: &Exchange, n: usize) -> Result<ExchangeLayout> {
        if comm.device() != self.context().ordinal() as i32 {
            return Err(Error::invalid_option(
                "communicator",
                format!("device {}", comm.device()),
                "the communicator runs on another device than this loss",
            ));
        }
        let l = exchange_layout(n, comm.ranks());
        if ex.bytes < l.bytes {
            return Err(Error::invalid_option("exchange", ex.bytes, "smaller than exchange_bytes(N, ranks)"));
        }
        self.check_pointers([("exchange", Some(ex.ptr))])?;
        Ok(l)
    }

    /// Step 1: the ranks' problems gathered and checked (one host synchronisation of `stream`);
    /// this rank's slice, or the same error on every rank.
    ///
    /// # Safety
    /// `ex` device memory of this backend's device; every rank of `comm` makes this call.
    pub unsafe fn vocab_parallel_slice(
        &self,
        comm: &NcclComm,
        x: &DeviceInputs,
        opts: &Options,
        ex: Exchange,
        stream: Stream,
    ) -> Result<VocabSlice> {
        let l = self.check_comm(comm, &ex, x.shape.n)?;
        let _bound = BoundContext::bind(self.context())?;
        // this rank's own checks travel with the problem: a rank that failed alone would leave
        // the others waiting in the forward's collectives
        let local = x.validate(opts);
        let mine = problem_meta(x, opts, local.is_ok());
        let mut all = vec![[0i64; META_FIELDS]; comm.ranks()];
        let at = |r: Region| ex.ptr + r.offset as u64;
        drv::memcpy_htod_async(at(l.meta), &mine[..], stream).check("cuMemcpyHtoDAsync(problem)")?;
        comm.all_gather(at(l.meta), at(l.metas), META_FIELDS, NcclType::I64, stream)?;
        drv::memcpy_dtoh_async(all.as_flattened_mut(), at(l.metas), stream).check("cuMemcpyDtoHAsync(problems)")?;
        // `mine` and `all` are read / written by the copies: wait for them before they go
        drv::stream::synchronize(stream).check("cuStreamSynchronize(vocab-parallel problem check)")?;
        local?;
        agree(&all, comm.rank())
    }

    /// Step 2: the forward over the whole vocabulary, from this rank's rows. `plan` is this
    /// backend's forward plan for `x.shape` (its rows); `out` as for [`CudaLoss::forward`], over
    /// the whole vocabulary (the same on every rank); `ex` keeps the merged rows for the backward.
    ///
    /// # Safety
    /// As for [`CudaLoss::forward`]; every rank of `comm` makes this call with its own slice from
    /// [`CudaLoss::vocab_parallel_slice`].
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn vocab_parallel_forward(
        &self,
        comm: &NcclComm,
        x: &DeviceInputs,
        opts: &Options,
        slice: VocabSlice,
        plan: &ForwardPlan,
        ws: Workspace,
        ex: Exchange,
        out: &DeviceForwardOutputs,
        stream: Stream,
    ) -> Result<()> {
        let n = x.shape.n;
        let l = self.check_comm(comm, &ex, n)?;
        let at = |r: Region| ex.ptr + r.offset as u64;
        let mine = SlicePartials { rows: at(l.part), class_weight_sum: at(l.wsum), status: at(l.status) };
        self.forward_partials_slice(x, opts, slice, &mine, ws, plan, stream)?;
        let _bound = BoundContext::bind(self.context())?;
        comm.all_gather(at(l.part), at(l.parts), n * PARTIAL_FIELDS, NcclType::F64, stream)?;
        comm.all_gather(at(l.wsum), at(l.wsums), 1, NcclType::F64, stream)?;
        let parts = RankPartials { rows: at(l.parts), class_weight_sums: at(l.wsums), ranks: comm.ranks() };
        let whole = Shape::new(n, x.shape.d, slice.total);
        let finish_ws = Workspace { ptr: at(l.finish_ws), bytes: l.finish_ws.bytes };
        self.finish_ranks(whole, opts, x.targets, &parts, out, at(l.merged), finish_ws, stream)
    }

    /// Step 3: this rank's dC / db rows (`grads.dc`, `grads.dbias`: the slice's rows), and dE: the
    /// f32 shares (this rank's at `de_share`, f32 [N, D]) summed over the ranks in place, then
    /// rounded into `grads.de` (for f32 inputs `grads.de` may be `de_share`). Every rank
    /// takes part in the all-reduce, also one whose caller wants no dE (`grads.de` None).
    /// `plan` from [`crate::plan::slice_backward_plan`] with dE wanted; `ws` of
    /// [`crate::vocab_parallel::slice_backward_workspace_bytes`].
    ///
    /// # Safety
    /// As for [`CudaLoss::backward`]; `lse` and `ex` from this step's
    /// [`CudaLoss::vocab_parallel_forward`]; every rank of `comm` makes this call.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn vocab_parallel_backward(
        &self,
        comm: &NcclComm,
        x: &DeviceInputs,
        opts: &Options,
        slice: VocabSlice,
        lse: DevPtr,
        ex: Exchange,
        grad_output: DeviceGradOutput,
        grads: &DeviceGrads,
        de_share: DevPtr,
        ws: Workspace,
        plan: &BackwardPlan,
        stream: Stream,
    ) -> Result<()> {
        let Shape { n, d, .. } = x.shape;
        let l = self.check_comm(comm, &ex, n)?;
        if !plan.wanted.de {
            return Err(Error::invalid_option(
                "plan",
                "dE not wanted",
                "every rank computes its share of dE (the all-reduce needs every rank's)",
            ));
        }
        self.check_pointers([("de_share", Some(de_share))])?;
        let at = |r: Region| ex.ptr + r.offset as u64;
        let parts = RankPartials { rows: at(l.parts), class_weight_sums: at(l.wsums), ranks: comm.ranks() };
        let slice_grads = DeviceGrads { de: Some(de_share), ..*grads };
        self.backward_slice(x, opts, slice, lse, at(l.merged), &parts, grad_output, &slice_grads, ws, plan, stream)?;
        let _bound = BoundContext::bind(self.context())?;
        comm.all_reduce_sum(de_share, de_share, n * d, NcclType::F32, stream)?;
        match grads.de {
            Some(de) if de != de_share || x.dtype != DType::F32 => {
                self.round_into(x.dtype, de_share, de, n * d, stream)
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(n: i64, d: i64, rows: i64) -> [i64; META_FIELDS] {
        [n, d, rows, 2, 0, -100, 0, 0, -1, -1, 0, 0, 1]
    }

    #[test]
    fn slices_follow_rank_order_and_uneven_rows() {
        let metas = [meta(7, 64, 5), meta(7, 64, 1), meta(7, 64, 9)];
        assert_eq!(agree(&metas, 0).unwrap(), VocabSlice { offset: 0, total: 15 });
        assert_eq!(agree(&metas, 1).unwrap(), VocabSlice { offset: 5, total: 15 });
        assert_eq!(agree(&metas, 2).unwrap(), VocabSlice { offset: 6, total: 15 });
    }

    #[test]
    fn disagreeing_ranks_get_the_same_error_on_every_rank() {
        let mut other_opts = meta(7, 64, 5);
        other_opts[6] = 0.1f32.to_bits() as i64;
        let mut invalid = meta(7, 64, 5);
        invalid[VALID] = 0;
        for bad in [
            vec![meta(7, 64, 5), invalid],
            vec![meta(7, 64, 5), meta(8, 64, 5)],
            vec![meta(7, 64, 5), meta(7, 32, 5)],
            vec![meta(7, 64, 5), other_opts],
            vec![meta(7, 64, 5), meta(7, 64, 0)],
        ] {
            let errs: Vec<String> = (0..bad.len()).map(|r| agree(&bad, r).unwrap_err().to_string()).collect();
            assert!(errs.iter().all(|e| e == &errs[0]), "{errs:?}");
            assert!(errs[0].contains("per rank") || errs[0].contains("rank 1"), "{}", errs[0]);
        }
    }

    #[test]
    fn the_problem_meta_tells_every_option_apart() {
        let x = DeviceInputs {
            shape: Shape::new(3, 4, 5),
            dtype: DType::BF16,
            e: 0,
            c: 0,
            bias: None,
            targets: 0,
            class_weights: None,
        };
        let base = problem_meta(&x, &Options::default(), true);
        let variants = [
            Options { reduction: Reduction::Sum, ..Default::default() },
            Options { ignore_index: 7, ..Default::default() },
            Options { label_smoothing: 0.1, ..Default::default() },
            Options { z_loss: 1e-4, ..Default::default() },
            Options { softcap: Some(30.0), ..Default::default() },
            Options { shift: Some(3), ..Default::default() },
        ];
        for o in variants {
            assert_ne!(problem_meta(&x, &o, true), base, "{o:?}");
        }
        assert_ne!(problem_meta(&DeviceInputs { bias: Some(1), ..x }, &Options::default(), true), base);
        assert_ne!(problem_meta(&DeviceInputs { dtype: DType::F16, ..x }, &Options::default(), true), base);
        assert_ne!(problem_meta(&x, &Options::default(), false), base);
    }

    #[test]
    fn the_exchange_holds_every_ranks_partials() {
        let (n, p) = (1000, 4);
        let l = exchange_layout(n, p);
        assert!(l.parts.bytes == p * n * PARTIAL_FIELDS * 8 && l.metas.bytes == p * META_FIELDS * 8);
        assert!(exchange_bytes(n, p) >= (p + 2) * 48 * n + 4 * n);
        assert!(exchange_bytes(n, p) <= (p + 2) * 48 * n + 4 * n + 10 * 256 + (p + 1) * (META_FIELDS + 1) * 8);
    }
}
