//! The CPU backend's matrix products: strided f32 views over the `gemm` crate, and the widening
//! of 16-bit rows to f32 that every tile does first.

use std::ops::Range;

use crate::Element;

/// Rows `rows` of a row-major [_, d] matrix as f32: borrowed when T is f32, widened into `buf`
/// otherwise.
pub(crate) fn rows_f32<'s, T: Element>(
    src: &'s [T],
    rows: &Range<usize>,
    d: usize,
    buf: &'s mut Vec<f32>,
) -> &'s [f32] {
    let part = &src[rows.start * d..rows.end * d];
    match T::as_f32_slice(part) {
        Some(s) => s,
        None => {
            buf.clear();
            buf.extend(part.iter().map(|x| x.to_f32()));
            buf
        }
    }
}

/// A strided f32 matrix view for [`matmul`].
#[derive(Clone, Copy)]
pub(crate) struct View<'s> {
    data: &'s [f32],
    row_stride: usize,
    col_stride: usize,
}

impl<'s> View<'s> {
    pub(crate) fn row_major(data: &'s [f32], cols: usize) -> Self {
        View { data, row_stride: cols, col_stride: 1 }
    }
    pub(crate) fn transposed(data: &'s [f32], cols: usize) -> Self {
        View { data, row_stride: 1, col_stride: cols }
    }
    fn check(&self, rows: usize, cols: usize) {
        let last = (rows - 1) * self.row_stride + (cols - 1) * self.col_stride;
        assert!(last < self.data.len(), "matmul operand out of bounds");
    }
}

/// dst[m×n] (row-major) = a[m×k]·b[k×n] (+ dst when `accumulate`), single-threaded (callers are
/// already parallel), f32 accumulation.
pub(crate) fn matmul(m: usize, n: usize, k: usize, dst: &mut [f32], a: View<'_>, b: View<'_>, accumulate: bool) {
    matmul_with(m, n, k, dst, a, b, accumulate, gemm::Parallelism::None)
}

/// [`matmul`] with the GEMM's own parallelism (for whole-matrix products).
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_with(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    a: View<'_>,
    b: View<'_>,
    accumulate: bool,
    par: gemm::Parallelism,
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    assert!(dst.len() >= m * n, "matmul destination too small");
    a.check(m, k);
    b.check(k, n);
    // SAFETY: every index the GEMM touches was bounds-checked above; dst does not alias a or b
    // (it is a distinct &mut).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}
