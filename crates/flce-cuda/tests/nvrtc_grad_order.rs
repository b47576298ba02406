//! The backward's G kernel with its tiles in a raster order over a one-wave grid
//! (`FLCE_SM90_MAINLOOP` gorder=1, kernels/sm90/grad.cu SM90_GRAD_ORDER — a measurement variant)
//! compiles with NVRTC for sm_90a, every dtype the sm90 family takes and every set of logit
//! options, with its wgmma asynchronous and nothing spilled in the (staged) default module. A
//! test binary of its own: the main-loop variant is read once per process, from the environment.
//! Without NVRTC it is reported skipped, as nvrtc_compile's tests.

use flce_core::DType;
use flce_cuda::compile::{options, variant_source, Arch, KernelFile};
use flce_cuda::library::{require, Library};

#[test]
fn the_ordered_g_kernel_compiles_with_async_wgmma_and_no_spills() {
    if let Err(e) = require(Library::Nvrtc) {
        assert!(std::env::var("FLCE_REQUIRE_NVRTC").is_err(), "FLCE_REQUIRE_NVRTC is set but {e}");
        eprintln!("SKIPPED the_ordered_g_kernel_compiles_with_async_wgmma_and_no_spills: {e}");
        return;
    }
    // (before anything reads the variant: this binary's only test)
    std::env::set_var("FLCE_SM90_MAINLOOP", "gorder=1");
    assert!(flce_cuda::geometry::Sm90Mainloop::current().grad_ordered());
    let arch = Arch("sm_90a".into());
    let mut opts = options(&arch);
    opts.push("--ptxas-options=-v".into());
    for dtype in [DType::BF16, DType::F16] {
        for m in std::iter::once(None).chain((1..=7u8).map(Some)) {
            let source = variant_source(KernelFile::Sm90Grad, dtype, m);
            assert!(source.contains("SM90_GRAD_ORDER 1"), "the variant's defines");
            let (cubin, log) = flce_cuda::compile::compile_with_log(&source, KernelFile::Sm90Grad.name(), &opts)
                .unwrap_or_else(|e| panic!("{dtype} FLCE_LOGIT_OPTS {m:?}: {e}"));
            assert!(cubin.len() > 1000);
            eprintln!("{dtype} FLCE_LOGIT_OPTS {m:?}:\n{log}");
            for code in ["C7514", "C7515", "C7517", "C7518", "wgmma.mma_async instructions are serialized"] {
                assert!(!log.contains(code), "{dtype} FLCE_LOGIT_OPTS {m:?}: wgmma not asynchronous ({code}):\n{log}");
            }
            if m.is_none() {
                assert!(log.contains(" 0 bytes spill stores"), "{dtype}: the ordered default module spills:\n{log}");
            }
        }
    }
}
