//! The backward's G kernel on the (slots, splits) grid of `plan::grad_grid` (`FLCE_SM90_MAINLOOP`
//! gorder=0 — a measurement variant beside the default raster order, kernels/sm90/grad.cu
//! SM90_GRAD_ORDER) compiles with NVRTC for sm_90a, every dtype the sm90
//! family takes and every set of logit options, with its wgmma asynchronous and nothing spilled
//! in the (staged) default module. A test binary of its own: the main-loop variant is read once
//! per process, from the environment. Without NVRTC it is reported skipped, as nvrtc_compile's
//! tests.

mod common;

#[test]
fn the_g_kernel_on_its_slot_grid_compiles_with_async_wgmma_and_no_spills() {
    common::g_variant_compiles(
        "the_g_kernel_on_its_slot_grid_compiles_with_async_wgmma_and_no_spills",
        "gorder=0",
        || !flce_cuda::geometry::Sm90Mainloop::current().grad_ordered(),
        "SM90_GRAD_ORDER 0",
    );
}
