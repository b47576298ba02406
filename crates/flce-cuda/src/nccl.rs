//! NCCL for the vocabulary-parallel loss, in cudarc's layering: the raw entry points
//! (loaded at run time, like every other CUDA library here), checked calls that name the call and
//! NCCL's own message, and [`NcclComm`], a caller's communicator.
//!
//! Why not cudarc's `nccl` module: its loader looks for `libnccl.so`, `libnccl.so.13`, … but not
//! `libnccl.so.2`, NCCL's soname and the only file the pip wheels (PyTorch's) ship, and a missing
//! library is a panic there. Here `FLCE_NCCL_LIBRARY` (a path), then `libnccl.so.2`, then
//! `libnccl.so` are tried, and a missing library is [`CudaError::LibraryMissing`].
//!
//! flce never creates the communicator of a real job: the caller's (its ranks, its stream order)
//! is passed in. [`NcclComm::init_all`] makes communicators over this process's GPUs, for tests and
//! single-process multi-GPU callers.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use flce_core::Result;

use crate::abi::DevPtr;
use crate::device::Stream;
use crate::error::{CudaError, CudaResult};

/// `ncclComm_t`.
pub type RawComm = *mut c_void;

/// `ncclDataType_t` values used here (nccl.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum NcclType {
    I64 = 4,
    F32 = 7,
    F64 = 8,
}

impl NcclType {
    pub fn size(self) -> usize {
        match self {
            NcclType::F32 => 4,
            NcclType::I64 | NcclType::F64 => 8,
        }
    }
}

const NCCL_SUCCESS: c_int = 0;
const NCCL_SUM: c_int = 0;

type CollFn = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, RawComm, Stream) -> c_int;
type ReduceFn = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, Stream) -> c_int;
type CommIntFn = unsafe extern "C" fn(RawComm, *mut c_int) -> c_int;

/// The NCCL entry points flce calls.
struct Api {
    _lib: libloading::Library,
    all_gather: CollFn,
    all_reduce: ReduceFn,
    comm_count: CommIntFn,
    comm_cu_device: CommIntFn,
    comm_user_rank: CommIntFn,
    comm_init_all: unsafe extern "C" fn(*mut RawComm, c_int, *const c_int) -> c_int,
    comm_destroy: unsafe extern "C" fn(RawComm) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    get_version: unsafe extern "C" fn(*mut c_int) -> c_int,
}

fn candidates() -> Vec<String> {
    let mut names: Vec<String> = crate::tuning::nccl_library().into_iter().collect();
    names.extend(["libnccl.so.2".to_string(), "libnccl.so".to_string()]);
    names
}

fn load() -> std::result::Result<Api, String> {
    let names = candidates();
    // SAFETY: loading NVIDIA's NCCL runs its initialisers, as any NCCL user does.
    let lib = names.iter().find_map(|n| unsafe { libloading::Library::new(n) }.ok()).ok_or_else(|| names.join(", "))?;
    // SAFETY: the symbols' types are nccl.h's signatures (NCCL 2.x; stable since 2.4).
    unsafe {
        macro_rules! sym {
            ($name:literal) => {
                *lib.get(concat!($name, "\0").as_bytes()).map_err(|e| format!("{}: {e}", $name))?
            };
        }
        Ok(Api {
            all_gather: sym!("ncclAllGather"),
            all_reduce: sym!("ncclAllReduce"),
            comm_count: sym!("ncclCommCount"),
            comm_cu_device: sym!("ncclCommCuDevice"),
            comm_user_rank: sym!("ncclCommUserRank"),
            comm_init_all: sym!("ncclCommInitAll"),
            comm_destroy: sym!("ncclCommDestroy"),
            error_string: sym!("ncclGetErrorString"),
            get_version: sym!("ncclGetVersion"),
            _lib: lib,
        })
    }
}

fn api() -> CudaResult<&'static Api> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(load)
        .as_ref()
        .map_err(|tried| CudaError::LibraryMissing { library: "libnccl (NCCL)", tried: tried.clone() })
}

/// A checked NCCL call: `code` from `call`, with NCCL's message on failure.
fn check(call: &str, code: c_int) -> CudaResult<()> {
    if code == NCCL_SUCCESS {
        return Ok(());
    }
    let message = api()
        .ok()
        // SAFETY: ncclGetErrorString returns a static C string for any code.
        .map(|a| unsafe { CStr::from_ptr((a.error_string)(code)) }.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(CudaError::Call { call: call.to_string(), message: format!("ncclResult {code}: {message}") })
}

/// NCCL's version code (e.g. 22703 for 2.27.3).
pub fn version() -> CudaResult<i32> {
    let a = api()?;
    let mut v = 0;
    // SAFETY: one int written.
    check("ncclGetVersion", unsafe { (a.get_version)(&mut v) })?;
    Ok(v)
}

/// A communicator: its rank, its size and its device. Borrowed from the caller
/// ([`NcclComm::from_raw`]) or owned ([`NcclComm::init_all`]; destroyed on drop).
#[derive(Debug)]
pub struct NcclComm {
    raw: RawComm,
    rank: usize,
    ranks: usize,
    device: i32,
    owned: bool,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time. The safe methods
// only read plain fields; the collectives are `unsafe fn`s whose contract includes NCCL's rule
// (no concurrent calls on one communicator), so sharing `&NcclComm` across threads is sound.
unsafe impl Send for NcclComm {}
unsafe impl Sync for NcclComm {}

impl NcclComm {
    /// The caller's communicator, not owned (never destroyed here).
    ///
    /// # Safety
    /// `raw` is a live `ncclComm_t` for as long as the returned value is used.
    pub unsafe fn from_raw(raw: RawComm) -> Result<Self> {
        Ok(Self::describe(raw, false)?)
    }

    /// One communicator per device of `devices` (rank k on devices\[k\]), owned: for tests and
    /// callers that drive every GPU from one process (one thread per rank for the collectives).
    pub fn init_all(devices: &[i32]) -> Result<Vec<NcclComm>> {
        let a = api()?;
        let mut raws = vec![std::ptr::null_mut(); devices.len()];
        // SAFETY: raws holds devices.len() slots.
        check("ncclCommInitAll", unsafe {
            (a.comm_init_all)(raws.as_mut_ptr(), devices.len() as c_int, devices.as_ptr())
        })?;
        let mut comms = Vec::with_capacity(raws.len());
        for raw in raws {
            // SAFETY: created just above; owned from here on (dropped with the Vec on error).
            comms.push(unsafe { Self::describe(raw, true) }?);
        }
        Ok(comms)
    }

    unsafe fn describe(raw: RawComm, owned: bool) -> CudaResult<Self> {
        let a = api()?;
        if raw.is_null() {
            return Err(CudaError::Call { call: "NcclComm".into(), message: "null communicator".into() });
        }
        let (mut rank, mut ranks, mut device) = (0, 0, 0);
        check("ncclCommUserRank", (a.comm_user_rank)(raw, &mut rank))?;
        check("ncclCommCount", (a.comm_count)(raw, &mut ranks))?;
        check("ncclCommCuDevice", (a.comm_cu_device)(raw, &mut device))?;
        Ok(NcclComm { raw, rank: rank as usize, ranks: ranks as usize, device, owned })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }
    pub fn ranks(&self) -> usize {
        self.ranks
    }
    /// The CUDA device ordinal the communicator runs on.
    pub fn device(&self) -> i32 {
        self.device
    }

    /// Every rank's `count` elements at `send`, in rank order at `recv` (ranks·count elements),
    /// queued on `stream`.
    ///
    /// # Safety
    /// Both buffers device memory of the communicator's device, valid until `stream` has run it;
    /// every rank makes the same call; no other thread uses this communicator meanwhile (NCCL's
    /// rule: one call at a time per communicator).
    pub unsafe fn all_gather(
        &self,
        send: DevPtr,
        recv: DevPtr,
        count: usize,
        ty: NcclType,
        stream: Stream,
    ) -> Result<()> {
        let a = api()?;
        let code = (a.all_gather)(send as *const c_void, recv as *mut c_void, count, ty as c_int, self.raw, stream);
        Ok(check(&format!("ncclAllGather({count} × {ty:?}, rank {} of {})", self.rank, self.ranks), code)?)
    }

    /// The element-wise sum over the ranks of `count` elements at `send`, at `recv` on every rank
    /// (the same bits on every rank), queued on `stream`. `send` may equal `recv`.
    ///
    /// # Safety
    /// As for [`NcclComm::all_gather`].
    pub unsafe fn all_reduce_sum(
        &self,
        send: DevPtr,
        recv: DevPtr,
        count: usize,
        ty: NcclType,
        stream: Stream,
    ) -> Result<()> {
        let a = api()?;
        let code =
            (a.all_reduce)(send as *const c_void, recv as *mut c_void, count, ty as c_int, NCCL_SUM, self.raw, stream);
        Ok(check(&format!("ncclAllReduce({count} × {ty:?}, sum, rank {} of {})", self.rank, self.ranks), code)?)
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        if self.owned {
            if let Ok(a) = api() {
                // SAFETY: owned, created by ncclCommInitAll, destroyed once. A failure here has no
                // caller to report to.
                let _ = unsafe { (a.comm_destroy)(self.raw) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_that_names_what_was_tried() {
        // (on machines with NCCL installed this checks the other branch: a version is read)
        match version() {
            Ok(v) => assert!(v >= 2000, "{v}"),
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("libnccl") && msg.contains("libnccl.so.2"), "{msg}");
            }
        }
    }

    #[test]
    fn types_have_ncclh_codes_and_sizes() {
        assert_eq!((NcclType::I64 as i32, NcclType::F32 as i32, NcclType::F64 as i32), (4, 7, 8));
        assert_eq!((NcclType::I64.size(), NcclType::F32.size(), NcclType::F64.size()), (8, 4, 8));
    }
}
