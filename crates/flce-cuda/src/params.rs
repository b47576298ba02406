//! `#[repr(C)]` mirrors of the kernels' parameter structs (kernels/*.cu). Each kernel takes one
//! struct by value; field order and types must match the CUDA side exactly (the layout tests at
//! the bottom pin the sizes the CUDA compiler gives them).

pub type DevPtr = u64;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LogitParams {
    pub e: DevPtr,
    pub c: DevPtr,
    pub bias: DevPtr,
    pub class_w: DevPtr,
    pub targets: DevPtr,
    pub n: i32,
    pub d: i32,
    pub v: i32,
    pub aligned: i32,
    pub softcap: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ForwardParams {
    pub lp: LogitParams,
    pub tiles_per_split: i32,
    pub partials: DevPtr,
    pub target_logit: DevPtr,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct StatsParams {
    pub logits: DevPtr,
    pub ldl: i32,
    pub bias: DevPtr,
    pub class_w: DevPtr,
    pub targets: DevPtr,
    pub softcap: f32,
    pub n: i32,
    pub v0: i32,
    pub v_end: i32,
    pub first_chunk: i32,
    pub partials: DevPtr,
    pub target_logit: DevPtr,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FinishParams {
    pub partials: DevPtr,
    pub target_logit: DevPtr,
    pub targets: DevPtr,
    pub class_w: DevPtr,
    pub n: i32,
    pub v: i32,
    pub splits: i32,
    pub reduction: i32,
    pub label_smoothing: f32,
    pub z_loss: f32,
    pub lse: DevPtr,
    pub per_token_loss: DevPtr,
    pub out_scalars: DevPtr,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GradParams {
    pub lp: LogitParams,
    pub lse: DevPtr,
    pub token_scale: DevPtr,
    pub scalars: DevPtr,
    pub label_smoothing: f32,
    pub z_loss: f32,
    pub n0: i32,
    pub n_end: i32,
    pub v0: i32,
    pub v_end: i32,
    pub g_out: DevPtr,
    pub ldg: i32,
    pub db_partial: DevPtr,
    pub ldb: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GradLogitsParams {
    pub logits: DevPtr,
    pub ldl: i32,
    pub bias: DevPtr,
    pub class_w: DevPtr,
    pub targets: DevPtr,
    pub lse: DevPtr,
    pub token_scale: DevPtr,
    pub scalars: DevPtr,
    pub softcap: f32,
    pub label_smoothing: f32,
    pub z_loss: f32,
    pub v: i32,
    pub n0: i32,
    pub n_end: i32,
    pub v0: i32,
    pub v_end: i32,
    pub g_out: DevPtr,
    pub ldg: i32,
    pub db_partial: DevPtr,
    pub ldb: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DbReduceParams {
    pub db_partial: DevPtr,
    pub row_tiles: i32,
    pub ldb: i32,
    pub count: i32,
    pub db_acc: DevPtr,
    pub accumulate: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ToElemParams {
    pub src: DevPtr,
    pub dst: DevPtr,
    pub count: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PrepParams {
    pub targets: DevPtr,
    pub out: DevPtr,
    pub status: DevPtr,
    pub ignore_index: i64,
    pub n: i32,
    pub v: i32,
    pub shift: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ScaleParams {
    pub targets: DevPtr,
    pub class_w: DevPtr,
    pub grad_output: DevPtr,
    pub n: i32,
    pub v: i32,
    pub reduction: i32,
    pub token_scale: DevPtr,
    pub scalars: DevPtr,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// Sizes under the C rules the CUDA compiler applies to the same declarations.
    #[test]
    fn layouts_match_the_cuda_structs() {
        assert_eq!(size_of::<LogitParams>(), 64);
        assert_eq!(size_of::<ForwardParams>(), 88);
        assert_eq!(size_of::<FinishParams>(), 80);
        assert_eq!(size_of::<StatsParams>(), 80);
        assert_eq!(size_of::<GradParams>(), 144);
        assert_eq!(size_of::<GradLogitsParams>(), 128);
        assert_eq!(size_of::<DbReduceParams>(), 40);
        assert_eq!(size_of::<ToElemParams>(), 24);
        assert_eq!(size_of::<PrepParams>(), 48);
        assert_eq!(size_of::<ScaleParams>(), 56);
    }
}
