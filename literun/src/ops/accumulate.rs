//! Sums: ADD_N (over its inputs), CUMSUM (along an axis) and L2_NORMALIZATION (along the last
//! axis); int8 ADD_N and CUMSUM as TFLite Micro has them (LiteRT has neither).
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
use super::context::{activation, tag, Ctx};
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::accumulate as acc;
use crate::kernels::Activation;
use crate::model::{DType, OpDesc};
use crate::schema;
use crate::schema::BuiltinOperator as B;

/// A prepared operator of the sums family.
#[derive(Debug)]
pub(crate) enum Accumulate {
    /// ADD_N of FLOAT32 or INT32 inputs of one shape.
    AddN { dtype: DType },
    /// CUMSUM of FLOAT32, INT32 or INT64 values viewed as `[outer, depth, inner]`.
    CumSum {
        dtype: DType,
        outer: usize,
        depth: usize,
        inner: usize,
        exclusive: bool,
        reverse: bool,
    },
    /// Int8 ADD_N (TFLite Micro's): inputs of one shape, scale and zero point.
    AddNI8 { q: acc::SumQuant },
    /// Int8 CUMSUM (TFLite Micro's) viewed as `[outer, depth, inner]`.
    CumSumI8 {
        q: acc::SumQuant,
        outer: usize,
        depth: usize,
        inner: usize,
        exclusive: bool,
        reverse: bool,
    },
    /// Float L2_NORMALIZATION over rows of `depth`.
    L2NormF32 { depth: usize },
    /// Int8 L2_NORMALIZATION (output scale 1/128, zero point 0).
    L2NormI8 { depth: usize, in_zero_point: i32 },
}

/// Prepares an operator of the sums family: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let a = match code {
        B::ADD_N => add_n(c)?,
        B::CUMSUM => cumsum(c)?,
        _ => l2_norm(c)?,
    };
    Ok(Kind::Accumulate(a))
}

fn add_n(c: &Ctx<'_, '_>) -> Result<Accumulate> {
    let dtype = c.want_dtype(0, &[DType::F32, DType::I32, DType::I8])?;
    let s = c.shape(0)?;
    for k in 1..c.op.inputs.len() {
        if c.dtype(k)? != dtype || c.shape(k)? != s {
            return Err(c.err(format!("input {k} differs in type or shape from input 0")));
        }
        // TFLite Micro requires one scale and zero point for all int8 inputs.
        if dtype == DType::I8 && c.in_q8(k)? != c.in_q8(0)? {
            return Err(c.err(format!(
                "input {k} differs in scale or zero point from input 0"
            )));
        }
    }
    c.check_out(0, s, dtype)?;
    if dtype == DType::I8 {
        return Ok(Accumulate::AddNI8 { q: sum_quant(c)? });
    }
    Ok(Accumulate::AddN { dtype })
}

/// TFLite Micro's int8 ADD_N / CUMSUM parameters (`CalculateOpData` of `add_n.cc` and
/// `cumsum.cc`): in double precision, each multiplier below one.
fn sum_quant(c: &Ctx<'_, '_>) -> Result<acc::SumQuant> {
    let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
    let twice_input_scale = 2.0 * f64::from(qi.scale);
    let input_real = f64::from(qi.scale) / twice_input_scale;
    let output_real =
        twice_input_scale / (f64::from(1u32 << acc::SumQuant::LEFT_SHIFT) * f64::from(qo.scale));
    let below_one = |r: f64| {
        (r < 1.0)
            .then(|| crate::quant::quantize_multiplier_smaller_than_one(r))
            .flatten()
            .ok_or_else(|| {
                c.err(format!(
                    "input scale {} too large for output scale {} (TFLite Micro needs \
                     2 * input / (2^20 * output) < 1)",
                    qi.scale, qo.scale
                ))
            })
    };
    Ok(acc::SumQuant {
        input_offset: -qi.zero_point,
        input_multiplier: below_one(input_real)?,
        output_multiplier: below_one(output_real)?,
        output_zero_point: qo.zero_point,
    })
}

fn cumsum(c: &Ctx<'_, '_>) -> Result<Accumulate> {
    let dtype = c.want_dtype(0, &[DType::F32, DType::I32, DType::I64, DType::I8])?;
    let (mut exclusive, mut reverse) = (false, false);
    if let Some(t) = c.options(tag::CUMSUM)? {
        exclusive = c.opt(t.bool(schema::CumsumOptions::VT_EXCLUSIVE, false))?;
        reverse = c.opt(t.bool(schema::CumsumOptions::VT_REVERSE, false))?;
    }
    let s = c.shape(0)?;
    let a = c.const_ints(1)?;
    if a.len() != 1 {
        return Err(c.err("axis must have one element"));
    }
    let ax = c.axis(a[0], s.len())?;
    c.check_out(0, s, dtype)?;
    let (outer, depth, inner) = (
        s[..ax].iter().product(),
        s[ax],
        s[ax + 1..].iter().product(),
    );
    if dtype == DType::I8 {
        return Ok(Accumulate::CumSumI8 {
            q: sum_quant(c)?,
            outer,
            depth,
            inner,
            exclusive,
            reverse,
        });
    }
    Ok(Accumulate::CumSum {
        dtype,
        outer,
        depth,
        inner,
        exclusive,
        reverse,
    })
}

fn l2_norm(c: &Ctx<'_, '_>) -> Result<Accumulate> {
    let dt = c.want_dtype(0, &[DType::F32, DType::I8])?;
    if let Some(t) = c.options(tag::L2_NORMALIZATION)? {
        let act = c.opt(
            t.i8(schema::L2NormOptions::VT_FUSED_ACTIVATION_FUNCTION, 0)
                .and_then(activation),
        )?;
        if act != Activation::None {
            return Err(c.err("a fused activation is not supported (nor by TFLite)"));
        }
    }
    let s = c.shape(0)?;
    let depth = *s
        .last()
        .ok_or_else(|| c.err("input must have at least one dimension"))?;
    c.check_out(0, s, dt)?;
    if dt == DType::I8 {
        let qo = c.out_q8(0)?;
        if qo.scale != 1.0 / 128.0 || qo.zero_point != 0 {
            return Err(c.err(format!(
                "int8 L2_NORMALIZATION needs output scale 1/128 and zero point 0, has {} and {}",
                qo.scale, qo.zero_point
            )));
        }
        // The int32 sum of squares must not overflow: at most 255² per element.
        if depth > (i32::MAX / (255 * 255)) as usize {
            return Err(c.err(format!("depth {depth} too large for int8")));
        }
        return Ok(Accumulate::L2NormI8 {
            depth,
            in_zero_point: c.in_q8(0)?.zero_point,
        });
    }
    Ok(Accumulate::L2NormF32 { depth })
}

impl Accumulate {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        #[cfg(not(feature = "ops-accumulate"))]
        return Err(super::compiled_out(_index, op));
        #[cfg(feature = "ops-accumulate")]
        match self {
            Accumulate::AddN { dtype } => {
                out.fill(0);
                for k in 0..op.inputs.len() {
                    match dtype {
                        DType::I32 => acc::add_into::<i32>(ins.typed(k)?, cast_out(out)?),
                        _ => acc::add_into::<f32>(ins.typed(k)?, cast_out(out)?),
                    }
                }
            }
            Accumulate::CumSum {
                dtype,
                outer,
                depth,
                inner,
                exclusive,
                reverse,
            } => {
                let (o, d, i, e, r) = (*outer, *depth, *inner, *exclusive, *reverse);
                match dtype {
                    DType::I32 => acc::cumsum::<i32>(ins.typed(0)?, o, d, i, e, r, cast_out(out)?),
                    DType::I64 => acc::cumsum::<i64>(ins.typed(0)?, o, d, i, e, r, cast_out(out)?),
                    _ => acc::cumsum::<f32>(ins.typed(0)?, o, d, i, e, r, cast_out(out)?),
                }
            }
            Accumulate::AddNI8 { q } => {
                let input = |k: usize| ins.typed::<i8>(k).unwrap_or(&[]);
                acc::add_n_i8(q, op.inputs.len(), input, cast_out(out)?);
            }
            Accumulate::CumSumI8 {
                q,
                outer,
                depth,
                inner,
                exclusive,
                reverse,
            } => acc::cumsum_i8(
                q,
                ins.typed(0)?,
                *outer,
                *depth,
                *inner,
                *exclusive,
                *reverse,
                cast_out(out)?,
            ),
            Accumulate::L2NormF32 { depth } => {
                acc::l2_normalize_f32(ins.typed(0)?, *depth, cast_out(out)?)
            }
            Accumulate::L2NormI8 {
                depth,
                in_zero_point,
            } => acc::l2_normalize_i8(ins.typed(0)?, *depth, *in_zero_point, cast_out(out)?),
        }
        Ok(())
    }
}
