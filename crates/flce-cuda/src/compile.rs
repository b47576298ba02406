//! Compiling the kernels: NVRTC at first use, for the GPU's own architecture, to a cubin, cached
//! on disk so a second process starts without compiling.
//!
//! Cache key: SHA-256 of the expanded source, the NVRTC options (architecture and dtype among
//! them) and the NVRTC version. Location: `$FLCE_CACHE_DIR`, else `$XDG_CACHE_HOME/flce/kernels`,
//! else `~/.cache/flce/kernels`; unwritable locations only cost the cache, never the call.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use cudarc::nvrtc::sys as nvrtc;
use flce_core::DType;
use sha2::{Digest, Sha256};

use crate::cache::{default_dir, KernelCache};
use crate::error::{CudaError, CudaResult};
use crate::library::{require, Library};

/// A kernel source file of this crate: one NVRTC program, one CUDA module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelFile {
    /// shared/prep.cu: effective targets, per-token gradient scales.
    Prep,
    /// shared/finish.cu: the forward's finish step.
    Finish,
    /// shared/accumulate.cu: db reduction, the f32 → dtype rounding.
    Accumulate,
    /// cublas/stats.cu: forward statistics from cuBLAS logits.
    CublasStats,
    /// cublas/grad_from_logits.cu: G from cuBLAS logits.
    CublasGrad,
    /// sm80/forward_tiles.cu: the fused mma.sync forward.
    Sm80Forward,
    /// sm80/grad_tiles.cu: G from mma.sync tiles.
    Sm80Grad,
    /// sm90/forward.cu: the fused TMA + wgmma forward (sm_90a, 16-bit inputs).
    Sm90Forward,
    /// sm90/three_product_grad.cu: the three-product pass's G from the compact forward's f16 q (sm_90a, 16-bit inputs).
    Sm90ThreeProductGrad,
    /// sm90/grad.cu: G from TMA + wgmma tiles (sm_90a, 16-bit inputs).
    Sm90Grad,
    /// sm90/product.cu: the backward's dE and dC products through TMA + wgmma (sm_90a, 16-bit inputs).
    Sm90Product,
    /// shared/vocab_parallel.cu: one rank's steps of the vocabulary-parallel loss.
    VocabParallel,
}

impl KernelFile {
    pub const ALL: [KernelFile; 12] = [
        KernelFile::Prep,
        KernelFile::Finish,
        KernelFile::Accumulate,
        KernelFile::CublasStats,
        KernelFile::CublasGrad,
        KernelFile::Sm80Forward,
        KernelFile::Sm80Grad,
        KernelFile::Sm90Forward,
        KernelFile::Sm90ThreeProductGrad,
        KernelFile::Sm90Grad,
        KernelFile::Sm90Product,
        KernelFile::VocabParallel,
    ];

    /// Path below kernels/.
    pub fn name(self) -> &'static str {
        match self {
            KernelFile::Prep => "shared/prep.cu",
            KernelFile::Finish => "shared/finish.cu",
            KernelFile::Accumulate => "shared/accumulate.cu",
            KernelFile::CublasStats => "cublas/stats.cu",
            KernelFile::CublasGrad => "cublas/grad_from_logits.cu",
            KernelFile::Sm80Forward => "sm80/forward_tiles.cu",
            KernelFile::Sm80Grad => "sm80/grad_tiles.cu",
            KernelFile::Sm90Forward => "sm90/forward.cu",
            KernelFile::Sm90ThreeProductGrad => "sm90/three_product_grad.cu",
            KernelFile::Sm90Grad => "sm90/grad.cu",
            KernelFile::Sm90Product => "sm90/product.cu",
            KernelFile::VocabParallel => "shared/vocab_parallel.cu",
        }
    }

    fn text(self) -> &'static str {
        match self {
            KernelFile::Prep => include_str!("../kernels/shared/prep.cu"),
            KernelFile::Finish => include_str!("../kernels/shared/finish.cu"),
            KernelFile::Accumulate => include_str!("../kernels/shared/accumulate.cu"),
            KernelFile::CublasStats => include_str!("../kernels/cublas/stats.cu"),
            KernelFile::CublasGrad => include_str!("../kernels/cublas/grad_from_logits.cu"),
            KernelFile::Sm80Forward => include_str!("../kernels/sm80/forward_tiles.cu"),
            KernelFile::Sm80Grad => include_str!("../kernels/sm80/grad_tiles.cu"),
            KernelFile::Sm90Forward => include_str!("../kernels/sm90/forward.cu"),
            KernelFile::Sm90ThreeProductGrad => include_str!("../kernels/sm90/three_product_grad.cu"),
            KernelFile::Sm90Grad => include_str!("../kernels/sm90/grad.cu"),
            KernelFile::Sm90Product => include_str!("../kernels/sm90/product.cu"),
            KernelFile::VocabParallel => include_str!("../kernels/shared/vocab_parallel.cu"),
        }
    }

    /// Whether the file's kernels touch no input-dtype data (then one module serves every dtype).
    pub fn dtype_independent(self) -> bool {
        matches!(self, KernelFile::Prep | KernelFile::Finish | KernelFile::VocabParallel)
    }

    /// Whether the file's source reads `FLCE_LOGIT_OPTS`, so that a module compiled for a set of
    /// logit options differs from its default one ([`variant_source`]; the launches that ask for
    /// one: `logit_opts` in runtime/grids.rs).
    pub fn has_logit_variants(self) -> bool {
        matches!(
            self,
            KernelFile::CublasGrad | KernelFile::Sm90Forward | KernelFile::Sm90Grad | KernelFile::Sm90ThreeProductGrad
        )
    }

    /// Whether the file is built for this target and element type: the sm90 family's files use
    /// sm_90a-only instructions (wgmma, setmaxnreg) on 16-bit operands; every other file builds
    /// everywhere.
    pub fn builds_for(self, arch: &Arch, dtype: DType) -> bool {
        match self {
            KernelFile::Sm90Forward
            | KernelFile::Sm90ThreeProductGrad
            | KernelFile::Sm90Grad
            | KernelFile::Sm90Product => arch.0 == "sm_90a" && dtype != DType::F32,
            _ => true,
        }
    }
}

/// A header's text: the generated ones from Rust ([`crate::abi`]), the rest from kernels/.
fn header(name: &str, dtype: DType) -> Option<String> {
    Some(match name {
        "flce_config.cuh" => crate::abi::c_config(dtype),
        "flce_abi.cuh" => crate::abi::c_header(),
        "common/types.cuh" => include_str!("../kernels/common/types.cuh").into(),
        "common/loss.cuh" => include_str!("../kernels/common/loss.cuh").into(),
        "sm80/tile_gemm.cuh" => include_str!("../kernels/sm80/tile_gemm.cuh").into(),
        "sm90/mainloop.cuh" => include_str!("../kernels/sm90/mainloop.cuh").into(),
        "sm90/async.cuh" => include_str!("../kernels/sm90/async.cuh").into(),
        "sm90/wgmma.cuh" => include_str!("../kernels/sm90/wgmma.cuh").into(),
        "sm90/staging.cuh" => include_str!("../kernels/sm90/staging.cuh").into(),
        "sm90/forward_staged.cuh" => include_str!("../kernels/sm90/forward_staged.cuh").into(),
        "sm90/grad_staged.cuh" => include_str!("../kernels/sm90/grad_staged.cuh").into(),
        _ => return None,
    })
}

/// The source of `file` for `dtype` with our `#include "x.cuh"` lines expanded (each header
/// once), so NVRTC needs no include path and the cache key covers every byte compiled.
pub fn expanded_source(file: KernelFile, dtype: DType) -> String {
    expand_includes(file.text(), dtype)
}

/// `source` (a kernel file's text, or a test probe's) with our `#include "x.cuh"` lines
/// expanded for `dtype`, as [`expanded_source`] does.
pub fn expand_includes(source: &str, dtype: DType) -> String {
    fn expand(text: &str, dtype: DType, seen: &mut Vec<String>, out: &mut String) {
        for line in text.lines() {
            let t = line.trim();
            if t == "#pragma once" {
                continue;
            }
            if let Some(name) = t.strip_prefix("#include \"").and_then(|r| r.strip_suffix('"')) {
                let body = header(name, dtype).unwrap_or_else(|| panic!("unknown kernel header {name}"));
                if !seen.iter().any(|s| s == name) {
                    seen.push(name.to_string());
                    expand(&body, dtype, seen, out);
                }
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    let mut out = String::new();
    expand(source, dtype, &mut Vec::new(), &mut out);
    out
}

/// A GPU architecture target, e.g. `sm_86` or `sm_90a`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arch(pub String);

impl Arch {
    /// The target for a device of compute capability major.minor. Hopper gets the `a` target
    /// (wgmma, setmaxnreg) so a Hopper kernel family can sit beside the portable one.
    pub fn for_capability(major: i32, minor: i32) -> Arch {
        let suffix = if major == 9 { "a" } else { "" };
        Arch(format!("sm_{major}{minor}{suffix}"))
    }

    /// (major, minor) of the target: `sm_86` → (8, 6), `sm_90a` → (9, 0), `sm_120` → (12, 0).
    pub fn capability(&self) -> (i32, i32) {
        let digits: String = self.0.trim_start_matches("sm_").chars().take_while(|c| c.is_ascii_digit()).collect();
        let (major, minor) = digits.split_at(digits.len().saturating_sub(1));
        (major.parse().unwrap_or(0), minor.parse().unwrap_or(0))
    }
}

/// The architectures CI compiles every kernel for.
pub const CI_ARCHES: [&str; 4] = ["sm_80", "sm_86", "sm_89", "sm_90a"];

/// NVRTC options for one architecture (the dtype is in the source: `flce_config.cuh`).
pub fn options(arch: &Arch) -> Vec<String> {
    vec![
        format!("--gpu-architecture={}", arch.0),
        "--std=c++17".into(),
        "--device-as-default-execution-space".into(),
        "-lineinfo".into(),
    ]
}

/// NVRTC's version, (major, minor).
pub fn nvrtc_version() -> CudaResult<(i32, i32)> {
    require(Library::Nvrtc)?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    let r = unsafe { nvrtc::nvrtcVersion(&mut major, &mut minor) };
    nvrtc_ok(r, "nvrtcVersion")?;
    Ok((major, minor))
}

fn nvrtc_ok(r: nvrtc::nvrtcResult, call: &str) -> CudaResult<()> {
    if r == nvrtc::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::call(call, r))
    }
}

/// What identifies the NVRTC build that compiles: its version and the library file (path, size,
/// modification time: patch releases differ there).
pub fn nvrtc_identity() -> CudaResult<String> {
    let (major, minor) = nvrtc_version()?;
    let file = crate::library::loaded_file(Library::Nvrtc, "nvrtcVersion")
        .and_then(|p| {
            let m = std::fs::metadata(&p).ok()?;
            let mtime = m.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
            Some(format!("{} {} {mtime}", p.display(), m.len()))
        })
        .unwrap_or_else(|| "file unknown".into());
    Ok(format!("nvrtc {major}.{minor} ({file})"))
}

/// The CUDA driver's version (e.g. 13000), part of the cache key: a cubin is loaded by the driver.
pub fn driver_version() -> i32 {
    let mut v = 0;
    // SAFETY: a plain out-parameter; on failure v stays 0 (then keys differ from any real driver's).
    let _ = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    v
}

/// The cache key of a compile: every byte compiled, the options, the NVRTC build and the driver.
pub fn cache_key(source: &str, options: &[String], nvrtc: &str, driver_version: i32) -> String {
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    for o in options {
        h.update([0u8]);
        h.update(o.as_bytes());
    }
    h.update(format!("\0{nvrtc}\0driver {driver_version}").as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The process's kernel cache, opened once; None (with one warning) when the directory is
/// untrusted or cannot be made, or the environment names none.
fn disk_cache() -> Option<&'static KernelCache> {
    static CACHE: OnceLock<Option<KernelCache>> = OnceLock::new();
    CACHE
        .get_or_init(|| match KernelCache::open(default_dir()?) {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("flce: {e}");
                None
            }
        })
        .as_ref()
}

/// A compiled kernel file and whether it came from the disk cache.
pub struct Cubin {
    pub image: Vec<u8>,
    pub from_cache: bool,
}

/// Compile `file` for `arch` and `dtype` to a cubin, through the disk cache.
pub fn compile(file: KernelFile, arch: &Arch, dtype: DType) -> CudaResult<Cubin> {
    compile_variant(file, arch, dtype, None)
}

/// The source of `file` for `dtype`, specialised for the logit options `logit_opts` (bits:
/// 1 bias, 2 softcap, 4 smoothing; `FLCE_LOGIT_OPTS` in the files of
/// [`KernelFile::has_logit_variants`]) where given.
pub fn variant_source(file: KernelFile, dtype: DType, logit_opts: Option<u8>) -> String {
    let source = expanded_source(file, dtype);
    match logit_opts {
        Some(m) => format!("#define FLCE_LOGIT_OPTS {m}\n{source}"),
        None => source,
    }
}

/// [`compile`] for a module specialised for the logit options `logit_opts` ([`variant_source`]).
pub fn compile_variant(file: KernelFile, arch: &Arch, dtype: DType, logit_opts: Option<u8>) -> CudaResult<Cubin> {
    let source = variant_source(file, dtype, logit_opts);
    let opts = options(arch);
    let key = cache_key(&source, &opts, &nvrtc_identity()?, driver_version());
    let variant = logit_opts.map_or(String::new(), |m| format!("-opts{m}"));
    let name = format!("{}-{}-{}{variant}", file.name(), arch.0, dtype);
    let cache = disk_cache();
    if let Some(image) = cache.and_then(|c| c.load(&name, &key)) {
        return Ok(Cubin { image, from_cache: true });
    }
    let image = compile_uncached(&source, file.name(), &opts)?;
    if let Some(c) = cache {
        if let Err(e) = c.store(&name, &key, &image) {
            eprintln!("flce: could not write the kernel cache in {}: {e}", c.dir().display());
        }
    }
    Ok(Cubin { image, from_cache: false })
}

/// Compile source text with NVRTC to a cubin (no cache). Errors carry the NVRTC log.
pub fn compile_uncached(source: &str, name: &str, opts: &[String]) -> CudaResult<Vec<u8>> {
    compile_with_log(source, name, opts).map(|(image, _)| image)
}

/// [`compile_uncached`], also returning NVRTC's log (ptxas's resource report with
/// `--ptxas-options=-v`).
pub fn compile_with_log(source: &str, name: &str, opts: &[String]) -> CudaResult<(Vec<u8>, String)> {
    require(Library::Nvrtc)?;
    let src = CString::new(source).expect("kernel source has no NUL");
    let cname = CString::new(name).expect("kernel name has no NUL");
    let copts: Vec<CString> = opts.iter().map(|o| CString::new(o.as_str()).expect("option has no NUL")).collect();
    let ptrs: Vec<*const c_char> = copts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: nvrtc::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated string for the duration of the calls; the
    // program is destroyed on every path below.
    unsafe {
        nvrtc_ok(
            nvrtc::nvrtcCreateProgram(&mut prog, src.as_ptr(), cname.as_ptr(), 0, std::ptr::null(), std::ptr::null()),
            "nvrtcCreateProgram",
        )?;
        let compiled = nvrtc::nvrtcCompileProgram(prog, ptrs.len() as i32, ptrs.as_ptr());
        let result = if compiled == nvrtc::nvrtcResult::NVRTC_SUCCESS {
            let mut size = 0usize;
            nvrtc_ok(nvrtc::nvrtcGetCUBINSize(prog, &mut size), "nvrtcGetCUBINSize").and_then(|_| {
                let mut image = vec![0u8; size];
                nvrtc_ok(nvrtc::nvrtcGetCUBIN(prog, image.as_mut_ptr() as *mut c_char), "nvrtcGetCUBIN")
                    .map(|_| (image, program_log(prog)))
            })
        } else {
            Err(CudaError::Compile { kernel: name.to_string(), options: opts.join(" "), log: program_log(prog) })
        };
        let _ = nvrtc::nvrtcDestroyProgram(&mut prog);
        result
    }
}

/// # Safety
/// `prog` must be a live NVRTC program.
unsafe fn program_log(prog: nvrtc::nvrtcProgram) -> String {
    let mut size = 0usize;
    if nvrtc::nvrtcGetProgramLogSize(prog, &mut size) != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return "(no log)".into();
    }
    let mut log = vec![0u8; size];
    if nvrtc::nvrtcGetProgramLog(prog, log.as_mut_ptr() as *mut c_char) != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return "(no log)".into();
    }
    String::from_utf8_lossy(&log).trim_end_matches('\0').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names() {
        assert_eq!(Arch::for_capability(8, 0).0, "sm_80");
        assert_eq!(Arch::for_capability(8, 6).0, "sm_86");
        assert_eq!(Arch::for_capability(8, 9).0, "sm_89");
        assert_eq!(Arch::for_capability(9, 0).0, "sm_90a");
        assert_eq!(Arch::for_capability(9, 0).capability(), (9, 0));
        assert_eq!(Arch("sm_86".into()).capability(), (8, 6));
        assert_eq!(Arch("sm_120".into()).capability(), (12, 0));
    }

    #[test]
    fn includes_are_expanded_once_and_everything_is_covered() {
        for f in KernelFile::ALL {
            let s = expanded_source(f, DType::BF16);
            assert!(!s.contains("#include \""), "{}: unexpanded include", f.name());
            assert_eq!(s.matches("typedef unsigned short u16;").count(), 1, "{}: types.cuh expanded twice", f.name());
            assert_eq!(s.matches("struct LossConstants {").count(), 1, "{}: the generated ABI header", f.name());
        }
        assert!(expanded_source(KernelFile::Sm80Forward, DType::BF16).contains("logits_tiles"));
        assert!(expanded_source(KernelFile::Accumulate, DType::F16).contains("#define FLCE_DTYPE 1"));
    }

    #[test]
    fn cache_key_depends_on_source_options_and_version() {
        let o = options(&Arch("sm_80".into()));
        let nv = "nvrtc 13.0 (/lib/libnvrtc.so.13 1000 1)";
        let k = cache_key("a", &o, nv, 13000);
        assert_eq!(k.len(), 64);
        assert_eq!(k, cache_key("a", &o, nv, 13000));
        assert_ne!(k, cache_key("b", &o, nv, 13000));
        assert_ne!(k, cache_key("a", &o, "nvrtc 13.0 (/lib/libnvrtc.so.13 1000 2)", 13000), "another NVRTC build");
        assert_ne!(k, cache_key("a", &o, nv, 13010), "another driver");
        assert_ne!(k, cache_key("a", &options(&Arch("sm_86".into())), nv, 13000));
        // the dtype is part of the source
        assert_ne!(
            expanded_source(KernelFile::CublasGrad, DType::BF16),
            expanded_source(KernelFile::CublasGrad, DType::F16)
        );
    }

    #[test]
    fn options_name_the_arch() {
        let o = options(&Arch("sm_90a".into()));
        assert!(o.contains(&"--gpu-architecture=sm_90a".to_string()));
    }
}
