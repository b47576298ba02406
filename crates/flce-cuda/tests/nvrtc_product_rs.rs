//! The product kernel with its K-major A read into registers (`FLCE_SM90_MAINLOOP` prs=1, a
//! measurement variant: kernels/sm90/product.cu SM90_PRODUCT_A_RS, mainloop.cuh
//! sm90_consume_tile_rs) compiles with NVRTC for sm_90a in both 16-bit dtypes with its wgmma
//! asynchronous — no other instruction defines a wgmma's A registers while a group is in flight
//! (ptxas C7513 serialises every wgmma of the kernel where one does) — and nothing spilled. A test
//! binary of its own: the main-loop variant is read once per process, from the environment.
//! Without NVRTC it is reported skipped, as nvrtc_compile's tests.

use flce_core::DType;
use flce_cuda::compile::{options, variant_source, Arch, KernelFile};
use flce_cuda::library::{require, Library};

#[test]
fn the_product_kernel_with_a_from_registers_compiles_with_async_wgmma_and_no_spills() {
    if let Err(e) = require(Library::Nvrtc) {
        assert!(std::env::var("FLCE_REQUIRE_NVRTC").is_err(), "FLCE_REQUIRE_NVRTC is set but {e}");
        eprintln!("SKIPPED the_product_kernel_with_a_from_registers_compiles_with_async_wgmma_and_no_spills: {e}");
        return;
    }
    std::env::set_var("FLCE_SM90_MAINLOOP", "prs=1");
    assert_eq!(flce_cuda::geometry::Sm90Mainloop::current().product_rs, 1, "prs=1: not the process's variant");
    let mut opts = options(&Arch("sm_90a".into()));
    opts.push("--ptxas-options=-v".into());
    for dtype in [DType::BF16, DType::F16] {
        let source = variant_source(KernelFile::Sm90Product, dtype, None);
        assert!(source.contains("SM90_PRODUCT_A_RS 1"), "the variant's defines");
        let (cubin, log) = flce_cuda::compile::compile_with_log(&source, KernelFile::Sm90Product.name(), &opts)
            .unwrap_or_else(|e| panic!("{dtype}: {e}"));
        assert!(cubin.len() > 1000);
        eprintln!("{dtype}:\n{log}");
        for code in ["C7513", "C7514", "C7515", "C7517", "C7518", "wgmma.mma_async instructions are serialized"] {
            assert!(!log.contains(code), "{dtype}: wgmma not asynchronous ({code}):\n{log}");
        }
        assert!(log.contains(" 0 bytes spill stores"), "{dtype}: the prs=1 product kernel spills:\n{log}");
    }
}
