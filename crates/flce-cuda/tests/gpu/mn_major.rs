//! The MN-major wgmma operands (tests/probes/sm90_mn_major.cu) against a host reference: the
//! shared-memory descriptors, TMA descriptors and transpose immediates of mainloop.cuh and
//! family::sm90 that the sm90 product kernel and the persistent backward need
//! (docs/journal.md v19) — B MN-major as C's chunk in
//! dE += G·C_chunk, A and B MN-major as Gᵀ and E in dC_chunk = Gᵀ·E. Small integers, so every sum
//! is exact in f32 and the comparison is equality. Hopper only.

use std::ffi::{c_void, CStr};

use flce_core::{bf16, DType};
use flce_cuda::abi::TensorMap;
use flce_cuda::compile::Arch;
use flce_cuda::family::tensor_map_pitched;
use flce_cuda::{CudaLoss, DeviceBuffer};

use crate::probe::ProbeModule;

const M: usize = 64;
const N: usize = 256;
const K: usize = 192;
/// The probe's shared memory: A's box, B's four boxes, the barrier, and the 1024-byte alignment.
const SMEM_BYTES: u32 = 5 * 8192 + 16 + 1024;

/// The sm90 family's TMA descriptor of a row-major [outer, inner] bf16 matrix in 64 × 64 boxes.
fn map(ptr: u64, inner: usize, outer: usize) -> Result<TensorMap, String> {
    tensor_map_pitched(ptr, outer, inner, inner, DType::BF16, 64, "probe operand").map_err(|e| e.to_string())
}

/// Small integers in [-4, 4] from a fixed LCG: exact in bf16, their products' sums exact in f32.
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 33) % 9) as f32 - 4.0
        })
        .collect()
}

fn upload(x: &[f32]) -> Result<DeviceBuffer, String> {
    let h: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    DeviceBuffer::from_slice(&h).map_err(|e| e.to_string())
}

/// D = A·B through `kernel` of the probe module, compared with the host's.
fn check(module: &ProbeModule, kernel: &CStr, map_a: TensorMap, map_b: TensorMap, want: &[f32]) -> Result<(), String> {
    let out = DeviceBuffer::new(4 * M * N).map_err(|e| e.to_string())?;
    let (mut out_ptr, mut k_total) = (out.ptr(), K as i32);
    let (mut a, mut b) = (map_a, map_b);
    let mut params: [*mut c_void; 4] = [
        &mut a as *mut _ as *mut c_void,
        &mut b as *mut _ as *mut c_void,
        &mut out_ptr as *mut _ as *mut c_void,
        &mut k_total as *mut _ as *mut c_void,
    ];
    // SAFETY: the parameters match the kernel's (two tensor maps by value, a device pointer of
    // M·N floats, an int); one block of one warpgroup.
    unsafe { module.launch(kernel, 1, 128, SMEM_BYTES, &mut params)? };
    let got: Vec<f32> = out.to_vec(M * N).map_err(|e| e.to_string())?;
    let bad: Vec<usize> = (0..M * N).filter(|&i| got[i] != want[i]).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{kernel:?}: {} of {} values differ; first D({}, {}) = {} against {}",
            bad.len(),
            M * N,
            i / N,
            i % N,
            got[i],
            want[i]
        )),
    }
}

pub(crate) fn run_mn_major(be: &CudaLoss) -> Result<String, String> {
    be.context().bind_to_thread().map_err(|e| format!("{e:?}"))?;
    let module =
        ProbeModule::load(include_str!("../probes/sm90_mn_major.cu"), "sm90_mn_major.cu", &Arch("sm_90a".into()))?;
    let a = values(M * K, 1); // A[m, k] at m·K + k
    let b = values(K * N, 2); // B[k, n] at k·N + n
    let a_t: Vec<f32> = (0..K * M).map(|i| a[(i % M) * K + i / M]).collect(); // A[m, k] at k·M + m
    let want: Vec<f32> = (0..M * N)
        .map(|i| (0..K).map(|k| a[(i / N) * K + k] as f64 * b[k * N + i % N] as f64).sum::<f64>() as f32)
        .collect();
    let (da, da_t, db) = (upload(&a)?, upload(&a_t)?, upload(&b)?);
    check(&module, c"probe_b_mn", map(da.ptr(), K, M)?, map(db.ptr(), N, K)?, &want)?;
    check(&module, c"probe_ab_mn", map(da_t.ptr(), M, K)?, map(db.ptr(), N, K)?, &want)?;
    Ok(format!("D[{M}, {N}] over K {K} exact with B MN-major, and with A and B MN-major"))
}
