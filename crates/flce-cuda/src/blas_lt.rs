//! cuBLASLt for the backward's products, a measurement knob beside cublasGemmEx (the default):
//! perf-notes v14 found dE's chunk product run as 192 × 192 tiles, 7.17 waves on 132 SMs run as 8.
//! `FLCE_BLAS_LT=k` runs every [`crate::blas::Gemm`] through `cublasLtMatmul` with the k-th
//! algorithm of cuBLASLt's heuristic list for its shape (0: Lt's first choice; past the list's
//! end, its last); `FLCE_BLAS_LT=list` runs the first and prints each new shape's candidates
//! (their wave counts) to stderr once. Unset: nothing here runs.
//!
//! Per product shape the descriptors, layouts and heuristic list are made once and kept; a pass
//! takes a 32 MB workspace from the stream-ordered allocator for the products' split-K / stream-K
//! algorithms and gives it back after them (`cuMemAllocAsync` / `cuMemFreeAsync`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

use cudarc::cublaslt::sys as lt;
use cudarc::driver::result as drv;
use flce_core::Result;

use crate::abi::DevPtr;
use crate::blas::{Elem, Gemm};
use crate::device::Stream;
use crate::error::{Check, CudaResult};
use crate::library::{require, Library};

/// Workspace a pass gives cuBLASLt's algorithms.
pub(crate) const LT_WORKSPACE_BYTES: usize = 32 << 20;
/// Candidates asked of the heuristic per shape.
const CANDIDATES: usize = 8;

/// The knob: which heuristic candidate to run, and whether to list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LtChoice {
    pub index: usize,
    pub list: bool,
}

/// `FLCE_BLAS_LT`, read once: None (unset or empty: cublasGemmEx), a candidate index, or "list".
pub(crate) fn lt_choice() -> Option<LtChoice> {
    static CHOICE: OnceLock<Option<LtChoice>> = OnceLock::new();
    *CHOICE.get_or_init(|| parse_choice(&std::env::var("FLCE_BLAS_LT").unwrap_or_default()))
}

fn parse_choice(v: &str) -> Option<LtChoice> {
    match v.trim() {
        "" => None,
        "list" => Some(LtChoice { index: 0, list: true }),
        s => match s.parse() {
            Ok(index) => Some(LtChoice { index, list: false }),
            Err(_) => {
                eprintln!("flce: FLCE_BLAS_LT={s:?} is neither an index nor \"list\"; cublasGemmEx runs");
                None
            }
        },
    }
}

/// A product's shape and types: the key of its prepared descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    m: usize,
    n: usize,
    k: usize,
    lda: usize,
    ldb: usize,
    ldc: usize,
    ta: bool,
    tb: bool,
    ea: Elem,
    eb: Elem,
    ec: Elem,
}

/// Descriptors, layouts and heuristic candidates of one shape (host objects).
struct Prepared {
    desc: lt::cublasLtMatmulDesc_t,
    a: lt::cublasLtMatrixLayout_t,
    b: lt::cublasLtMatrixLayout_t,
    c: lt::cublasLtMatrixLayout_t,
    candidates: Vec<lt::cublasLtMatmulHeuristicResult_t>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        // SAFETY: created by `prepare` (null where it failed before creating them), destroyed
        // once; a failure has no one to report to.
        unsafe {
            for l in [self.a, self.b, self.c] {
                if !l.is_null() {
                    let _ = lt::cublasLtMatrixLayoutDestroy(l);
                }
            }
            let _ = lt::cublasLtMatmulDescDestroy(self.desc);
        }
    }
}

struct State {
    handle: lt::cublasLtHandle_t,
    prepared: HashMap<Key, Prepared>,
}

// SAFETY: used only under BlasLt's mutex.
unsafe impl Send for State {}

impl Drop for State {
    fn drop(&mut self) {
        self.prepared.clear();
        // SAFETY: created by us, no longer used.
        unsafe {
            let _ = lt::cublasLtDestroy(self.handle);
        }
    }
}

/// One device's cuBLASLt handle and prepared shapes.
#[derive(Default)]
pub(crate) struct BlasLt {
    state: Mutex<Option<State>>,
}

fn check(call: &str, s: lt::cublasStatus_t) -> CudaResult<()> {
    s.result().check(call)
}

fn cuda_type(e: Elem) -> lt::cudaDataType {
    use flce_core::DType;
    match e {
        Elem::Input(DType::BF16) => lt::cudaDataType::CUDA_R_16BF,
        Elem::Input(DType::F16) => lt::cudaDataType::CUDA_R_16F,
        Elem::Input(DType::F32) | Elem::F32 => lt::cudaDataType::CUDA_R_32F,
    }
}

/// A column-major layout of the stored matrix (rows × cols, leading dimension ld).
unsafe fn layout(e: Elem, rows: usize, cols: usize, ld: usize) -> CudaResult<lt::cublasLtMatrixLayout_t> {
    let mut l = std::ptr::null_mut();
    check(
        "cublasLtMatrixLayoutCreate",
        lt::cublasLtMatrixLayoutCreate(&mut l, cuda_type(e), rows as u64, cols as u64, ld as i64),
    )?;
    Ok(l)
}

unsafe fn prepare(handle: lt::cublasLtHandle_t, key: &Key) -> CudaResult<Prepared> {
    let mut desc = std::ptr::null_mut();
    check(
        "cublasLtMatmulDescCreate",
        lt::cublasLtMatmulDescCreate(
            &mut desc,
            lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            lt::cudaDataType::CUDA_R_32F,
        ),
    )?;
    // own it before anything else can fail
    let mut p = Prepared {
        desc,
        a: std::ptr::null_mut(),
        b: std::ptr::null_mut(),
        c: std::ptr::null_mut(),
        candidates: vec![],
    };
    // TRANSA / TRANSB hold a cublasOperation_t (cuBLAS's enum, not re-exported by cuBLASLt's bindings)
    use cudarc::cublas::sys::cublasOperation_t as Op;
    let op = |t: bool| if t { Op::CUBLAS_OP_T } else { Op::CUBLAS_OP_N };
    for (attr, t) in [
        (lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, key.ta),
        (lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, key.tb),
    ] {
        let v = op(t);
        check(
            "cublasLtMatmulDescSetAttribute(TRANS)",
            lt::cublasLtMatmulDescSetAttribute(desc, attr, &v as *const _ as *const c_void, std::mem::size_of_val(&v)),
        )?;
    }
    // the stored matrices: A is m × k (k × m when transposed), B k × n (n × k), C m × n
    let (ar, ac) = if key.ta { (key.k, key.m) } else { (key.m, key.k) };
    let (br, bc) = if key.tb { (key.n, key.k) } else { (key.k, key.n) };
    p.a = layout(key.ea, ar, ac, key.lda)?;
    p.b = layout(key.eb, br, bc, key.ldb)?;
    p.c = layout(key.ec, key.m, key.n, key.ldc)?;
    let mut pref = std::ptr::null_mut();
    check("cublasLtMatmulPreferenceCreate", lt::cublasLtMatmulPreferenceCreate(&mut pref))?;
    let ws = LT_WORKSPACE_BYTES as u64;
    let set = lt::cublasLtMatmulPreferenceSetAttribute(
        pref,
        lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
        &ws as *const u64 as *const c_void,
        std::mem::size_of::<u64>(),
    );
    let mut results = vec![std::mem::zeroed::<lt::cublasLtMatmulHeuristicResult_t>(); CANDIDATES];
    let mut count = 0;
    let got = if set == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        lt::cublasLtMatmulAlgoGetHeuristic(
            handle,
            desc,
            p.a,
            p.b,
            p.c,
            p.c,
            pref,
            CANDIDATES as i32,
            results.as_mut_ptr(),
            &mut count,
        )
    } else {
        set
    };
    let _ = lt::cublasLtMatmulPreferenceDestroy(pref);
    check("cublasLtMatmulAlgoGetHeuristic", got)?;
    results.truncate(count.max(0) as usize);
    results.retain(|r| r.state == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
    if results.is_empty() {
        return Err(crate::error::CudaError::Call {
            call: "cublasLtMatmulAlgoGetHeuristic".into(),
            message: format!("no algorithm for {key:?}"),
        });
    }
    p.candidates = results;
    Ok(p)
}

/// The workspace of one pass's Lt products (stream-ordered; freed after them on drop).
pub(crate) struct LtWorkspace {
    ptr: DevPtr,
    stream: Stream,
}

impl LtWorkspace {
    /// # Safety
    /// The caller's context is current; `stream` belongs to it.
    pub(crate) unsafe fn new(stream: Stream) -> Result<Self> {
        let ptr = drv::malloc_async(stream, LT_WORKSPACE_BYTES).check("cuMemAllocAsync(cuBLASLt workspace)")?;
        Ok(LtWorkspace { ptr, stream })
    }
}

impl Drop for LtWorkspace {
    fn drop(&mut self) {
        // SAFETY: allocated on this stream; freed after the work queued on it. A failure here
        // has no caller to report to (the memory returns to the pool when the stream's pool is
        // trimmed).
        unsafe {
            let _ = drv::free_async(self.ptr, self.stream);
        }
    }
}

impl BlasLt {
    /// `g` through cublasLtMatmul with candidate `choice.index` of its shape, on `stream`.
    ///
    /// # Safety
    /// As for [`Gemm::run`]; `ws` from this pass, on `stream`.
    pub(crate) unsafe fn run(&self, g: &Gemm, choice: LtChoice, ws: &LtWorkspace, stream: Stream) -> Result<()> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            require(Library::CublasLt)?;
            let mut h = std::ptr::null_mut();
            check("cublasLtCreate", lt::cublasLtCreate(&mut h))?;
            *guard = Some(State { handle: h, prepared: HashMap::new() });
        }
        let state = guard.as_mut().expect("just created");
        let key = Key {
            m: g.m,
            n: g.n,
            k: g.k,
            lda: g.a.ld,
            ldb: g.b.ld,
            ldc: g.out.ld,
            ta: g.a.transposed,
            tb: g.b.transposed,
            ea: g.a.elem,
            eb: g.b.elem,
            ec: g.out.elem,
        };
        if !state.prepared.contains_key(&key) {
            let p = prepare(state.handle, &key)?;
            if choice.list {
                let waves: Vec<String> =
                    p.candidates.iter().map(|r| format!("{:.2} waves, {} B", r.wavesCount, r.workspaceSize)).collect();
                eprintln!("flce: cuBLASLt candidates for {key:?}: [{}]", waves.join("; "));
            }
            state.prepared.insert(key, p);
        }
        let p = &state.prepared[&key];
        let r = &p.candidates[choice.index.min(p.candidates.len() - 1)];
        let (alpha, beta) = (1.0f32, g.beta);
        check(
            &format!("cublasLtMatmul(m {}, n {}, k {})", g.m, g.n, g.k),
            lt::cublasLtMatmul(
                state.handle,
                p.desc,
                &alpha as *const f32 as *const c_void,
                g.a.ptr as *const c_void,
                p.a,
                g.b.ptr as *const c_void,
                p.b,
                &beta as *const f32 as *const c_void,
                g.out.ptr as *const c_void,
                p.c,
                g.out.ptr as *mut c_void,
                p.c,
                &r.algo,
                ws.ptr as *mut c_void,
                LT_WORKSPACE_BYTES,
                stream as lt::cudaStream_t,
            ),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knob_parses_an_index_or_list_and_nothing_else() {
        assert_eq!(parse_choice(""), None);
        assert_eq!(parse_choice("2"), Some(LtChoice { index: 2, list: false }));
        assert_eq!(parse_choice(" list "), Some(LtChoice { index: 0, list: true }));
        assert_eq!(parse_choice("fast"), None);
    }
}
