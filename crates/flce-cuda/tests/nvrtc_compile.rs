//! Every kernel file compiles with NVRTC for every target architecture and dtype (no GPU
//! needed: NVRTC alone). CI installs NVRTC from PyPI's nvidia-cuda-nvrtc wheel; where no NVRTC
//! library is found the test says so and is reported as skipped, unless FLCE_REQUIRE_NVRTC=1
//! (set by .ci/run), which turns a missing NVRTC into a failure.

use flce_core::DType;
use flce_cuda::compile::{
    compile_uncached, expand_includes, expanded_source, nvrtc_identity, nvrtc_version, options, variant_source, Arch,
    KernelFile, CI_ARCHES,
};
use flce_cuda::library::{require, Library};

/// NVRTC is there; without it the test `name` is reported skipped (false), unless
/// FLCE_REQUIRE_NVRTC is set: then it fails.
fn nvrtc_or_skip(name: &str) -> bool {
    match require(Library::Nvrtc) {
        Ok(()) => true,
        Err(e) => {
            assert!(std::env::var("FLCE_REQUIRE_NVRTC").is_err(), "FLCE_REQUIRE_NVRTC is set but {e}");
            eprintln!("SKIPPED {name}: {e}");
            false
        }
    }
}

#[test]
fn every_kernel_compiles_for_every_target() {
    if !nvrtc_or_skip("every_kernel_compiles_for_every_target") {
        return;
    }
    let (major, minor) = nvrtc_version().unwrap();
    eprintln!("NVRTC {major}.{minor}");
    // the kernel cache keys on the exact NVRTC build: version and library file
    let id = nvrtc_identity().unwrap();
    assert!(id.contains("libnvrtc") && !id.contains("file unknown"), "{id}");
    let mut compiled = 0;
    for arch in CI_ARCHES {
        for dtype in [DType::BF16, DType::F16, DType::F32] {
            for file in KernelFile::ALL.into_iter().filter(|f| f.builds_for(&Arch(arch.to_string()), dtype)) {
                let opts = options(&Arch(arch.to_string()));
                let cubin = compile_uncached(&expanded_source(file, dtype), file.name(), &opts)
                    .unwrap_or_else(|e| panic!("{} for {arch} {dtype}: {e}", file.name()));
                assert!(cubin.len() > 1000, "{} for {arch}: suspiciously small cubin", file.name());
                compiled += 1;
            }
        }
    }
    eprintln!("compiled {compiled} kernel files");
}

#[test]
fn compile_errors_carry_the_log_and_options() {
    if require(Library::Nvrtc).is_err() {
        eprintln!("SKIPPED compile_errors_carry_the_log_and_options: no NVRTC");
        return;
    }
    let opts = options(&Arch("sm_80".into()));
    let err =
        compile_uncached("extern \"C\" __global__ void k() { this is not C++; }", "broken.cu", &opts).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("broken.cu") && msg.contains("--gpu-architecture=sm_80") && msg.contains("error"), "{msg}");
}

/// The planned Hopper family's instructions (TMA + mbarrier, wgmma, setmaxnreg, a
/// __grid_constant__ tensor map) compile through NVRTC for sm_90a, and not for plain sm_90.
#[test]
fn nvrtc_takes_the_hopper_instructions_for_sm90a_only() {
    if !nvrtc_or_skip("nvrtc_takes_the_hopper_instructions_for_sm90a_only") {
        return;
    }
    let probe = include_str!("probes/sm90_instructions.cu");
    let cubin = compile_probe(probe, "sm90_instructions.cu", "sm_90a").unwrap_or_else(|e| panic!("sm_90a: {e}"));
    assert!(cubin.len() > 1000);
    let err = compile_probe(probe, "sm90_instructions.cu", "sm_90").unwrap_err();
    assert!(err.to_string().contains("wgmma"), "{err}");
}

#[test]
fn the_mn_major_probe_compiles_for_sm90a() {
    // (run on a GPU by tests/gpu/mn_major.rs)
    if !nvrtc_or_skip("the_mn_major_probe_compiles_for_sm90a") {
        return;
    }
    let probe = include_str!("probes/sm90_mn_major.cu");
    let cubin = compile_probe(probe, "sm90_mn_major.cu", "sm_90a").unwrap_or_else(|e| panic!("sm_90a: {e}"));
    assert!(cubin.len() > 1000);
}

#[test]
fn the_loss_math_probe_compiles_for_sm80_and_sm90a() {
    // (run on a GPU by tests/gpu/loss_math.rs)
    if !nvrtc_or_skip("the_loss_math_probe_compiles_for_sm80_and_sm90a") {
        return;
    }
    for arch in ["sm_80", "sm_90a"] {
        let cubin = compile_probe(include_str!("probes/loss_math.cu"), "loss_math.cu", arch)
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(cubin.len() > 1000);
    }
}

/// A probe of tests/probes/ compiled for `arch`, its include lines expanded as the kernels' are.
fn compile_probe(source: &str, name: &str, arch: &str) -> flce_cuda::error::CudaResult<Vec<u8>> {
    compile_uncached(&expand_includes(source, DType::BF16), name, &options(&Arch(arch.into())))
}

/// The sm90 kernels' modules — the forward's, G's and the three-product G's (step_grad.cu, no
/// wgmma) default ones and those specialised for each set of logit options (FLCE_LOGIT_OPTS 1..7:
/// bias, softcap, smoothing), the product kernel's —
/// compile for sm_90a with every wgmma asynchronous: ptxas reports, as an info line and not an
/// error, when it serialises a kernel's wgmma or waits for all of them before other work
/// (C7515, C7517, C7518: a consumer loop that writes, or cannot prove retired, an accumulator a
/// wgmma may still use — docs/journal.md v31, v32), which costs a kernel its overlap of the
/// tensor cores with everything else. ptxas's report (spills per module) is printed.
#[test]
fn the_sm90_kernels_compile_for_every_set_of_logit_options_with_async_wgmma() {
    if !nvrtc_or_skip("the_sm90_kernels_compile_for_every_set_of_logit_options_with_async_wgmma") {
        return;
    }
    let arch = Arch("sm_90a".into());
    let variants = |file: KernelFile| -> Vec<Option<u8>> {
        let sets = if file.has_logit_variants() { 7u8 } else { 0 };
        std::iter::once(None).chain((1..=sets).map(Some)).collect()
    };
    for file in
        [KernelFile::Sm90Forward, KernelFile::Sm90Grad, KernelFile::Sm90ThreeProductGrad, KernelFile::Sm90Product]
    {
        for m in variants(file) {
            let mut opts = options(&arch);
            opts.push("--ptxas-options=-v".into());
            let source = variant_source(file, DType::BF16, m);
            let (cubin, log) = flce_cuda::compile::compile_with_log(&source, file.name(), &opts)
                .unwrap_or_else(|e| panic!("{} FLCE_LOGIT_OPTS {m:?}: {e}", file.name()));
            assert!(cubin.len() > 1000);
            eprintln!("{} FLCE_LOGIT_OPTS {m:?}:\n{log}", file.name());
            for code in ["C7515", "C7517", "C7518", "wgmma.mma_async instructions are serialized"] {
                assert!(
                    !log.contains(code),
                    "{} FLCE_LOGIT_OPTS {m:?}: ptxas no longer keeps the wgmma asynchronous ({code}):\n{log}",
                    file.name()
                );
            }
        }
    }
}
