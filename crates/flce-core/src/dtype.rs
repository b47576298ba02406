//! Element types: the three floating dtypes flce accepts (bf16, f16, f32) and their conversions.
//!
//! Inputs arrive in one of these; every reduction and accumulation runs in f32 (or f64), and
//! results are rounded to the input dtype once, at the end.

use half::{bf16, f16};

/// The dtype of the floating inputs (E, C, bias) and of the gradients flce returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    BF16,
    F16,
    F32,
}

impl DType {
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::BF16 | DType::F16 => 2,
            DType::F32 => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::F32 => "f32",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" | "bfloat16" => Ok(DType::BF16),
            "f16" | "fp16" | "float16" | "half" => Ok(DType::F16),
            "f32" | "fp32" | "float32" | "float" => Ok(DType::F32),
            other => Err(format!("unknown dtype '{other}' (expected bf16, f16 or f32)")),
        }
    }
}

/// A floating element type flce computes with. Implemented for `half::bf16`, `half::f16` and
/// `f32`; the conversions round to nearest even, like PyTorch's.
pub trait Element: Copy + Send + Sync + Default + PartialEq + std::fmt::Debug + 'static {
    const DTYPE: DType;
    fn to_f32(self) -> f32;
    fn from_f32(x: f32) -> Self;
    /// The same slice as f32 when `Self` is f32, so the hot loops can skip a conversion copy.
    fn as_f32_slice(s: &[Self]) -> Option<&[f32]>;

    fn to_f64(self) -> f64 {
        self.to_f32() as f64
    }
    fn from_f64(x: f64) -> Self {
        Self::from_f32(x as f32)
    }
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }
    fn as_f32_slice(s: &[Self]) -> Option<&[f32]> {
        Some(s)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn as_f32_slice(_: &[Self]) -> Option<&[f32]> {
        None
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn as_f32_slice(_: &[Self]) -> Option<&[f32]> {
        None
    }
}

/// Widen `src` into `dst` (same length) as f32.
pub fn widen_into<T: Element>(src: &[T], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), dst.len());
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

/// A real scalar the f64 oracle and the test-data generator accept: every [`Element`] and f64
/// (the oracle's own precision, which finite-difference checks need).
pub trait Real: Copy + Send + Sync + Default + PartialEq + std::fmt::Debug + 'static {
    fn real_to_f64(self) -> f64;
    fn real_from_f64(x: f64) -> Self;
}

impl<T: Element> Real for T {
    fn real_to_f64(self) -> f64 {
        self.to_f64()
    }
    fn real_from_f64(x: f64) -> Self {
        T::from_f64(x)
    }
}

impl Real for f64 {
    fn real_to_f64(self) -> f64 {
        self
    }
    fn real_from_f64(x: f64) -> Self {
        x
    }
}
