//! AVX2 float matrix product for BATCH_MATMUL's small matrices (attention's): `out = a · B`
//! with `B` row-major and at most 64 columns, two output rows at a time with the whole row in
//! registers, so a product of 32 x 16 by 16 x 32 is one call with no tile copies.

use super::*;

/// `out[m, n] = a[m, k] · b[k, n]`, `b`'s rows `ldb` floats apart (`ldb >= n`), `n` a
/// multiple of 8 up to 64; `false` (nothing done) for other `n` or short slices.
pub(crate) fn matmul_rows_f32_avx2(
    a: &[f32],
    m: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    n: usize,
    out: &mut [f32],
) -> bool {
    let fits = n.is_multiple_of(8)
        && (8..=64).contains(&n)
        && ldb >= n
        && a.len() >= m * k
        && out.len() >= m * n
        && (k == 0 || b.len() >= (k - 1) * ldb + n);
    if !fits {
        return false;
    }
    // SAFETY: called only for the AVX2 ISAs (`has_batch_matmul_f32`: available on this CPU,
    // all with FMA); the lengths are checked above.
    unsafe {
        match n / 8 {
            1 => rows::<1>(a, m, k, b, ldb, out),
            2 => rows::<2>(a, m, k, b, ldb, out),
            3 => rows::<3>(a, m, k, b, ldb, out),
            4 => rows::<4>(a, m, k, b, ldb, out),
            5 => rows::<5>(a, m, k, b, ldb, out),
            6 => rows::<6>(a, m, k, b, ldb, out),
            7 => rows::<7>(a, m, k, b, ldb, out),
            _ => rows::<8>(a, m, k, b, ldb, out),
        }
    }
    true
}

/// [`matmul_rows_f32_avx2`] for `n = 8 NV`: two rows at a time (one for the last of an odd
/// count), `2 NV` accumulators.
///
/// # Safety
/// AVX2 and FMA; `a` holds `m k` floats, `out` `m 8 NV`, `b` `(k - 1) ldb + 8 NV`.
#[target_feature(enable = "avx2,fma")]
unsafe fn rows<const NV: usize>(
    a: &[f32],
    m: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    out: &mut [f32],
) {
    let n = 8 * NV;
    let (a, b, out) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr());
    let mut i = 0;
    while i + 2 <= m {
        let mut acc0 = [_mm256_setzero_ps(); NV];
        let mut acc1 = [_mm256_setzero_ps(); NV];
        for kk in 0..k {
            // SAFETY: rows i, i + 1 < m and kk < k: within `a`; row kk of `b` within it.
            unsafe {
                let a0 = _mm256_broadcast_ss(&*a.add(i * k + kk));
                let a1 = _mm256_broadcast_ss(&*a.add((i + 1) * k + kk));
                let row = b.add(kk * ldb);
                for v in 0..NV {
                    let bv = _mm256_loadu_ps(row.add(8 * v));
                    acc0[v] = _mm256_fmadd_ps(a0, bv, acc0[v]);
                    acc1[v] = _mm256_fmadd_ps(a1, bv, acc1[v]);
                }
            }
        }
        for v in 0..NV {
            // SAFETY: rows i, i + 1 of `out`, n = 8 NV columns each.
            unsafe {
                _mm256_storeu_ps(out.add(i * n + 8 * v), acc0[v]);
                _mm256_storeu_ps(out.add((i + 1) * n + 8 * v), acc1[v]);
            }
        }
        i += 2;
    }
    if i < m {
        let mut acc = [_mm256_setzero_ps(); NV];
        for kk in 0..k {
            // SAFETY: as above, for the last row.
            unsafe {
                let a0 = _mm256_broadcast_ss(&*a.add(i * k + kk));
                let row = b.add(kk * ldb);
                for (v, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm256_fmadd_ps(a0, _mm256_loadu_ps(row.add(8 * v)), *acc);
                }
            }
        }
        for (v, acc) in acc.iter().enumerate() {
            // SAFETY: row i of `out`.
            unsafe { _mm256_storeu_ps(out.add(i * n + 8 * v), *acc) };
        }
    }
}
