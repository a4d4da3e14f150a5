//! Int8 BATCH_MATMUL with vector sums and requantization ([`BmmI8`], x86-64 AVX2 and up): the
//! portable kernel's walk over the matrices (`kernels::batch_matmul::batch_matmul_i8_rows`),
//! each output row summed eight columns per vector and requantized by the int8 GEMM's output
//! stage, bit-exact with the portable kernel.

use super::*;
use crate::kernels::batch_matmul::{batch_matmul_i8_rows, BmmI8Operands, BmmI8Row, BmmI8Scratch};

/// The output stage of an int8 BATCH_MATMUL (one multiplier, double rounding) repeated over
/// 32 channels for the vector requantization.
#[derive(Clone, Debug)]
pub struct BmmI8 {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) isa: Isa,
    rq: Requant,
}

impl BmmI8 {
    /// `None` unless `isa` has the vector kernels here and `q` has one multiplier that they
    /// reproduce.
    pub fn new(isa: Isa, q: &OutputStage) -> Option<BmmI8> {
        if !has_elementwise(isa) || !isa.available() || q.single_rounding {
            return None;
        }
        let (&mult, &shift) = (q.multipliers.first()?, q.shifts.first()?);
        let wide = OutputStage {
            multipliers: vec![mult; 32],
            shifts: vec![shift; 32],
            ..q.clone()
        };
        let rq = Requant::new(&wide, 32, |_| 0)?;
        Some(BmmI8 { isa, rq })
    }

    pub fn bytes(&self) -> usize {
        self.rq.bytes()
    }
}

/// Int8 BATCH_MATMUL as [`crate::kernels::batch_matmul::batch_matmul_i8`] (same operands,
/// scratch and result).
pub(crate) fn batch_matmul_i8(
    bmm: &BmmI8,
    operands: &BmmI8Operands<'_>,
    scratch: &mut BmmI8Scratch<'_>,
    output: &mut [i8],
    out_shape: &[usize],
) {
    let zero = bmm.rq.apply(0, 0);
    batch_matmul_i8_rows(operands, zero, scratch, output, out_shape, |r| {
        row_i8(bmm, r)
    });
}

/// One output row: its sums 32 columns at a time, then their requantization.
fn row_i8(bmm: &BmmI8, r: BmmI8Row<'_>) {
    #[cfg(target_arch = "x86_64")]
    {
        let n = r.out.len();
        let mut tile = [[0i32; 32]; 1];
        for j0 in (0..n).step_by(32) {
            let jn = (n - j0).min(32);
            let terms = &r.col_terms[j0..j0 + jn];
            x86::bmm_row_i8(r.row, r.rhs, n, j0, terms, r.row_term, &mut tile[0]);
            x86::requant_tile(
                bmm.isa,
                &bmm.rq,
                &[],
                0,
                &tile,
                jn,
                &mut r.out[j0..j0 + jn],
                0,
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (bmm, r);
        unreachable!("BmmI8 is built on x86-64 only");
    }
}
