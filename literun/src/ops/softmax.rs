//! SOFTMAX and LOG_SOFTMAX (float32, int8).
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
use super::context::{f32_inputs, tag, Ctx};
use super::fast::Fast;
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::simd::{self, Isa};
use crate::kernels::softmax;
use crate::model::{DType, OpDesc};
use crate::schema;
use crate::schema::BuiltinOperator as B;

/// A prepared SOFTMAX or LOG_SOFTMAX, by element type.
#[derive(Debug)]
pub(crate) enum Softmax {
    I8 {
        table: alloc::boxed::Box<[f32; 256]>,
        outer: usize,
        depth: usize,
        out_scale: f32,
        out_zero_point: i32,
    },
    F32 {
        outer: usize,
        depth: usize,
        beta: f32,
        log: bool,
        /// A QUANTIZE reads the output: the math library's `exp` and an in-order sum, as
        /// LiteRT's reference kernel (the vectorizing softmax agrees to a few ulp, not to the
        /// rounding of the requantized value).
        requantized: bool,
    },
}

/// Prepares SOFTMAX or LOG_SOFTMAX: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    softmax(c, code == B::LOG_SOFTMAX)
}

fn softmax(c: &Ctx<'_, '_>, log: bool) -> Result<Kind> {
    if c.dtype(0)? == DType::I8 && !log {
        return softmax_i8(c);
    }
    f32_inputs(c, 1)?;
    let beta = if log {
        1.0
    } else {
        match c.options(tag::SOFTMAX)? {
            Some(t) => c.opt(t.f32(schema::SoftmaxOptions::VT_BETA, 0.0))?,
            None => 1.0,
        }
    };
    let i = c.input(0)?;
    let depth = *i
        .shape
        .last()
        .ok_or_else(|| c.err("input must have rank >= 1"))?;
    c.check_out(0, &i.shape, DType::F32)?;
    let outer = i.elements.checked_div(depth).unwrap_or(0);
    Ok(Kind::Softmax(Softmax::F32 {
        outer,
        depth,
        beta,
        log,
        requantized: false,
    }))
}

pub(crate) fn softmax_i8(c: &Ctx<'_, '_>) -> Result<Kind> {
    let beta = match c.options(tag::SOFTMAX)? {
        Some(t) => c.opt(t.f32(schema::SoftmaxOptions::VT_BETA, 0.0))?,
        None => 1.0,
    };
    let i = c.input(0)?;
    let depth = *i
        .shape
        .last()
        .ok_or_else(|| c.err("input must have rank >= 1"))?;
    c.check_out(0, &i.shape, DType::I8)?;
    let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
    if qo.zero_point != -128 || (qo.scale - 1.0 / 256.0).abs() > 0.001 / 256.0 {
        return Err(c.err(format!(
            "int8 SOFTMAX needs output scale 1/256 and zero point -128, has {} and {}",
            qo.scale, qo.zero_point
        )));
    }
    Ok(Kind::Softmax(Softmax::I8 {
        table: alloc::boxed::Box::new(crate::kernels::softmax::softmax_table(qi.scale, beta)),
        outer: i.elements.checked_div(depth).unwrap_or(0),
        depth,
        out_scale: qo.scale,
        out_zero_point: qo.zero_point,
    }))
}

impl Softmax {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        _op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        match self {
            Softmax::I8 {
                table,
                outer,
                depth,
                out_scale,
                out_zero_point,
            } => {
                #[cfg(all(feature = "ops-softmax", feature = "ops-int8"))]
                {
                    softmax::softmax_i8(
                        ins.typed(0)?,
                        *outer,
                        *depth,
                        table,
                        *out_scale,
                        *out_zero_point,
                        cast_out(out)?,
                    )
                }
                #[cfg(not(all(feature = "ops-softmax", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
            Softmax::F32 {
                outer,
                depth,
                beta,
                log,
                requantized,
            } => {
                #[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
                {
                    {
                        if *log {
                            softmax::log_softmax_f32(ins.typed(0)?, *outer, *depth, cast_out(out)?)
                        } else if !requantized {
                            softmax::softmax_f32_fast(
                                ins.typed(0)?,
                                *outer,
                                *depth,
                                *beta,
                                cast_out(out)?,
                            )
                        } else {
                            softmax::softmax_f32(
                                ins.typed(0)?,
                                *outer,
                                *depth,
                                *beta,
                                cast_out(out)?,
                            )
                        }
                    }
                }
                #[cfg(not(all(feature = "ops-softmax", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl Softmax {
    /// The vectorized float softmax at `isa`'s width, for a float SOFTMAX whose output no
    /// QUANTIZE reads.
    pub(super) fn fast(&self, isa: Isa) -> Option<Fast> {
        match self {
            #[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
            Softmax::F32 {
                log: false,
                requantized: false,
                ..
            } if simd::has_elementwise(isa) => Some(Fast::Softmax(isa)),
            _ => None,
        }
    }

    /// Runs this operator with its fast kernel (`None` if `fast` is not this operator's).
    pub(super) fn run_fast(&self, fast: &Fast, ins: &Ins<'_>, out: &mut [u8]) -> Option<()> {
        match (fast, self) {
            #[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
            (
                Fast::Softmax(isa),
                Softmax::F32 {
                    outer, depth, beta, ..
                },
            ) => {
                let (i, o) = (ins.typed::<f32>(0).ok()?, cast_out(out).ok()?);
                simd::softmax_f32(*isa, i, *outer, *depth, *beta, o).then_some(())
            }
            _ => None,
        }
    }
}
