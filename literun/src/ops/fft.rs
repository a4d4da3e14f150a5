//! Spectra on COMPLEX64: RFFT2D (float32 in, complex out) and COMPLEX_ABS, REAL, IMAG
//! (complex in, float32 out), as LiteRT's `rfft2d.cc` and `complex_support.cc` define them.
// With some `ops-*` features off, helpers only the left-out operators use are unused; without
// `error-details`, values only error messages mention.
#![cfg_attr(
    not(all(feature = "all-ops", feature = "error-details")),
    allow(
        dead_code,
        unused_imports,
        unused_variables,
        unused_macros,
        unreachable_code
    )
)]

use super::buffers::{cast_out, Ins, Scratch};
use super::context::Ctx;
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::fft::{self, Rfft2dShape, C64};
use crate::model::{DType, OpDesc};
use crate::schema::BuiltinOperator as B;
use alloc::vec::Vec;

/// A prepared operator of the spectra family.
#[derive(Debug)]
pub(crate) enum Fft {
    /// RFFT2D over the last two axes of a float32 input.
    Rfft2d {
        shape: Rfft2dShape,
        /// [`fft::twiddles`] of `max(fft_h, fft_w)`.
        twiddles: Vec<C64>,
    },
    /// COMPLEX_ABS: the magnitude of each value.
    Abs,
    /// REAL (0) or IMAG (1): one part of each value.
    Part(usize),
}

/// Prepares an operator of the spectra family: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let f = match code {
        B::RFFT2D => rfft2d(c)?,
        _ => {
            c.want_dtype(0, &[DType::Complex64])?;
            c.check_out(0, c.shape(0)?, DType::F32)?;
            match code {
                B::COMPLEX_ABS => Fft::Abs,
                B::REAL => Fft::Part(0),
                _ => Fft::Part(1),
            }
        }
    };
    Ok(Kind::Fft(f))
}

/// Transform lengths above this are refused (LiteRT's are int32).
const MAX_FFT_LENGTH: i64 = 1 << 30;

fn rfft2d(c: &Ctx<'_, '_>) -> Result<Fft> {
    c.want_dtype(0, &[DType::F32])?;
    let s = c.shape(0)?;
    if s.len() < 2 {
        return Err(c.err(format!("input must have at least 2 dimensions, has {s:?}")));
    }
    if c.dtype(1)? != DType::I32 {
        return Err(c.err("fft_length must be INT32"));
    }
    let len = c.const_ints(1)?;
    let &[h, w] = len.as_slice() else {
        return Err(c.err("fft_length must have 2 values"));
    };
    // LiteRT's kernel (Ooura's fft2d) takes only powers of two.
    for v in [h, w] {
        if !(1..=MAX_FFT_LENGTH).contains(&v) || !(v as u64).is_power_of_two() {
            return Err(c.err(format!("fft_length {v} is not a power of two")));
        }
    }
    let shape = Rfft2dShape {
        in_h: s[s.len() - 2],
        in_w: s[s.len() - 1],
        fft_h: h as usize,
        fft_w: w as usize,
    };
    let mut out = s.to_vec();
    let rank = out.len();
    out[rank - 2] = shape.fft_h;
    out[rank - 1] = shape.out_w();
    c.check_out(0, &out, DType::Complex64)?;
    if shape.work_len().and_then(|n| n.checked_mul(4)).is_none() {
        return Err(c.err("fft_length too large"));
    }
    let twiddles = if c.inferring() {
        Vec::new()
    } else {
        let n = shape.fft_h.max(shape.fft_w);
        let mut t = Vec::new();
        t.try_reserve_exact((n / 2).max(1))
            .map_err(|_| c.err("cannot allocate the twiddle factors"))?;
        t.resize((n / 2).max(1), [0.0; 2]);
        fft::twiddles(n, &mut t);
        t
    };
    Ok(Fft::Rfft2d { shape, twiddles })
}

impl Fft {
    /// Scratch at run time: (i8 values, f32 values, i32 values). RFFT2D's working memory is
    /// double precision, taken from the f32 scratch (one more value than it needs, so that it
    /// can start 8-byte aligned).
    pub(crate) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Fft::Rfft2d { shape, .. } => {
                let f32s = shape
                    .work_len()
                    .map_or(usize::MAX, |n| n.saturating_mul(4).saturating_add(1));
                (0, f32s, 0)
            }
            Fft::Abs | Fft::Part(_) => (0, 0, 0),
        }
    }

    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        scratch: &mut Scratch,
    ) -> Result<()> {
        #[cfg(not(feature = "ops-fft"))]
        return Err(super::compiled_out(_index, op));
        #[cfg(feature = "ops-fft")]
        match self {
            Fft::Rfft2d { shape, twiddles } => {
                let (_, work, _) = bytemuck::pod_align_to_mut::<f32, C64>(&mut scratch.f32s);
                if shape.work_len().is_none_or(|n| work.len() < n) {
                    return Err(super::op_err(_index, op, "scratch too small"));
                }
                fft::rfft2d(ins.typed(0)?, *shape, twiddles, work, cast_out(out)?);
            }
            Fft::Abs => fft::complex_abs(ins.typed(0)?, cast_out(out)?),
            Fft::Part(p) => fft::complex_part(ins.typed(0)?, *p, cast_out(out)?),
        }
        Ok(())
    }
}
