//! The backward's G kernel with its epilogue off the MMA warpgroups (`FLCE_SM90_MAINLOOP`
//! gfold=1, kernels/sm90/grad_staged.cuh; the default) compiles with NVRTC for
//! sm_90a, every dtype the sm90 family takes and every set of logit options, with its wgmma
//! asynchronous and nothing spilled in the default module. A test binary of its own: the
//! main-loop variant is read once per process, from the environment. Without NVRTC it is
//! reported skipped, as nvrtc_compile's tests.

mod common;

#[test]
fn the_staged_g_kernel_compiles_with_async_wgmma_and_no_spills() {
    common::g_variant_compiles(
        "the_staged_g_kernel_compiles_with_async_wgmma_and_no_spills",
        "gfold=1",
        || flce_cuda::geometry::Sm90Mainloop::current().grad_staged(),
        "SM90_STAGED_GRAD 1",
    );
}
