//! The product kernel with its K-major A read into registers (`FLCE_SM90_MAINLOOP` prs=1, a
//! measurement variant: kernels/sm90/product.cu SM90_PRODUCT_A_RS, mainloop.cuh
//! sm90_consume_tile_rs) compiles with NVRTC for sm_90a in both 16-bit dtypes with its wgmma
//! asynchronous — no other instruction defines a wgmma's A registers while a group is in flight
//! (ptxas C7513 serialises every wgmma of the kernel where one does) — and nothing spilled. A test
//! binary of its own: the main-loop variant is read once per process, from the environment.
//! Without NVRTC it is reported skipped, as nvrtc_compile's tests.

mod common;

use flce_cuda::compile::KernelFile;

#[test]
fn the_product_kernel_with_a_from_registers_compiles_with_async_wgmma_and_no_spills() {
    common::variant_compiles(
        "the_product_kernel_with_a_from_registers_compiles_with_async_wgmma_and_no_spills",
        "prs=1",
        || flce_cuda::geometry::Sm90Mainloop::current().product_rs == 1,
        "SM90_PRODUCT_A_RS 1",
        KernelFile::Sm90Product,
        &[None],
    );
}
