//! The backward's G kernel with its tiles in a raster order over a one-wave grid
//! (`FLCE_SM90_MAINLOOP` gorder=1, kernels/sm90/grad.cu SM90_GRAD_ORDER — a measurement variant)
//! compiles with NVRTC for sm_90a, every dtype the sm90 family takes and every set of logit
//! options, with its wgmma asynchronous and nothing spilled in the (staged) default module. A
//! test binary of its own: the main-loop variant is read once per process, from the environment.
//! Without NVRTC it is reported skipped, as nvrtc_compile's tests.

mod common;

#[test]
fn the_ordered_g_kernel_compiles_with_async_wgmma_and_no_spills() {
    common::g_variant_compiles(
        "the_ordered_g_kernel_compiles_with_async_wgmma_and_no_spills",
        "gorder=1",
        || flce_cuda::geometry::Sm90Mainloop::current().grad_ordered(),
        "SM90_GRAD_ORDER 1",
    );
}
