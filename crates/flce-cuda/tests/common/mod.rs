//! What the NVRTC tests of the sm90 kernels' main-loop variants share (one test binary per
//! variant: `FLCE_SM90_MAINLOOP` is read once per process).

use flce_core::DType;
use flce_cuda::compile::{options, variant_source, Arch, KernelFile};
use flce_cuda::library::{require, Library};

/// Under the main-loop variant `variant` (set here, before anything reads it; `active` says the
/// process took it), the sm90 G kernel compiles with NVRTC for sm_90a, every dtype the sm90 family
/// takes and every set of logit options, its source carrying `define`, its wgmma asynchronous and
/// its default module spilling nothing. Without NVRTC the test `name` is reported skipped (a
/// failure where FLCE_REQUIRE_NVRTC is set), as nvrtc_compile's tests.
#[allow(dead_code)] // (each test binary compiles this module and uses what it needs)
pub fn g_variant_compiles(name: &str, variant: &str, active: fn() -> bool, define: &str) {
    let modules: Vec<Option<u8>> = std::iter::once(None).chain((1..=7u8).map(Some)).collect();
    variant_compiles(name, variant, active, define, KernelFile::Sm90Grad, &modules);
}

/// [`g_variant_compiles`] for any sm90 kernel file and its modules (`None`: the default module,
/// `Some(m)`: the one for logit options m), the default module spilling nothing.
pub fn variant_compiles(
    name: &str,
    variant: &str,
    active: fn() -> bool,
    define: &str,
    file: KernelFile,
    modules: &[Option<u8>],
) {
    if let Err(e) = require(Library::Nvrtc) {
        assert!(std::env::var("FLCE_REQUIRE_NVRTC").is_err(), "FLCE_REQUIRE_NVRTC is set but {e}");
        eprintln!("SKIPPED {name}: {e}");
        return;
    }
    std::env::set_var("FLCE_SM90_MAINLOOP", variant);
    assert!(active(), "{variant}: not the process's variant");
    let arch = Arch("sm_90a".into());
    let mut opts = options(&arch);
    opts.push("--ptxas-options=-v".into());
    for dtype in [DType::BF16, DType::F16] {
        for &m in modules {
            let source = variant_source(file, dtype, m);
            assert!(source.contains(define), "the variant's defines");
            let (cubin, log) = flce_cuda::compile::compile_with_log(&source, file.name(), &opts)
                .unwrap_or_else(|e| panic!("{dtype} FLCE_LOGIT_OPTS {m:?}: {e}"));
            assert!(cubin.len() > 1000);
            eprintln!("{dtype} FLCE_LOGIT_OPTS {m:?}:\n{log}");
            // (C7513 and its kin all say this; the codes name the cause)
            for code in ["C7513", "C7514", "C7515", "C7517", "C7518", "wgmma.mma_async instructions are serialized"] {
                assert!(!log.contains(code), "{dtype} FLCE_LOGIT_OPTS {m:?}: wgmma not asynchronous ({code}):\n{log}");
            }
            if m.is_none() {
                assert!(log.contains(" 0 bytes spill stores"), "{dtype}: the {variant} default module spills:\n{log}");
            }
        }
    }
}
