//! The binary arithmetic operators (ADD ... SQUARED_DIFFERENCE, PRELU, FLOOR_DIV, FLOOR_MOD),
//! the unary math operators and CAST.
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
use super::context::{act_range, activation, data_dtype, tag, Ctx};
use super::fast::Fast;
use super::{Kind, Precision};
use crate::error::{format, Result};
use crate::kernels::simd::Workers;
use crate::kernels::simd::{self, Isa};
use crate::kernels::{elementwise as ew, shape_ops as so, Activation};
use crate::model::{op_err, DType, OpDesc};
use crate::quant::checked_log2;
use crate::schema;
use crate::schema::BuiltinOperator as B;

/// A prepared elementwise operator, by form and element type.
#[derive(Debug)]
pub(crate) enum Elementwise {
    Binary {
        op: ew::BinaryOp,
        act: Activation,
        bc: ew::Broadcast,
        dtype: DType,
    },
    Unary {
        op: ew::UnaryOp,
        dtype: DType,
        /// A QUANTIZE reads the output: GELU keeps TFLite's reference formula (the
        /// vectorizing one agrees to 1e-5, not to the rounding of the requantized value).
        requantized: bool,
    },
    Cast {
        from: DType,
        to: DType,
    },
    /// Int8 RSQRT: a table, and an invocation error for stored inputs below `min_input` (the
    /// input zero point: negative reals), as TFLite.
    RsqrtI8 {
        table: alloc::boxed::Box<ew::Lut8>,
        min_input: i8,
    },
    /// Int8 or int16 ADD, SUB, MUL, MAXIMUM, MINIMUM (and int8 SQUARED_DIFFERENCE).
    BinaryQuantized {
        precision: Precision,
        p: ew::BinaryI8,
        bc: ew::Broadcast,
    },
}

/// Prepares an elementwise operator: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    match code {
        B::CAST => cast(c),
        B::ADD
        | B::SUB
        | B::MUL
        | B::DIV
        | B::POW
        | B::MAXIMUM
        | B::MINIMUM
        | B::SQUARED_DIFFERENCE
        | B::PRELU
        | B::FLOOR_DIV
        | B::FLOOR_MOD => binary(c, code),
        _ => unary(c, code),
    }
}

fn binary(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    use ew::BinaryOp as O;
    let (op, tag) = match code {
        B::ADD => (O::Add, Some(tag::ADD)),
        B::SUB => (O::Sub, Some(tag::SUB)),
        B::MUL => (O::Mul, Some(tag::MUL)),
        B::DIV => (O::Div, Some(tag::DIV)),
        B::POW => (O::Pow, None),
        B::MAXIMUM => (O::Maximum, None),
        B::MINIMUM => (O::Minimum, None),
        B::SQUARED_DIFFERENCE => (O::SquaredDifference, None),
        B::PRELU => (O::Prelu, None),
        B::FLOOR_DIV => (O::FloorDiv, None),
        B::FLOOR_MOD => (O::FloorMod, None),
        // A code listed for the family in the op table but not mapped here.
        _ => return Err(c.err("no elementwise kernel for this operator")),
    };
    let mut act = Activation::None;
    // LiteRT reads `pot_scale_int16` (default true) from the options when they are there and
    // takes false when they are not.
    let mut pot_scale_int16 = false;
    if let Some(tag) = tag {
        if let Some(t) = c.options(tag)? {
            // fused_activation_function is the first field of Add/Sub/Mul/DivOptions.
            act = c.opt(t.i8(4, 0).and_then(activation))?;
            if matches!(op, O::Add | O::Sub) {
                // pot_scale_int16, the second field of Add/SubOptions.
                pot_scale_int16 = c.opt(t.bool(6, true))?;
            }
        }
    }
    // LiteRT's int8 and int16 FLOOR_DIV and FLOOR_MOD work on the stored integers (no
    // quantization); the other int8/int16 operators are quantized.
    let plain_integers = matches!(op, O::FloorDiv | O::FloorMod);
    if matches!(c.dtype(0)?, DType::I8 | DType::I16) && !plain_integers {
        return binary_i8(c, op, act, pot_scale_int16);
    }
    let int_ok = matches!(
        op,
        O::Add
            | O::Sub
            | O::Mul
            | O::Maximum
            | O::Minimum
            | O::SquaredDifference
            | O::FloorDiv
            | O::FloorMod
    );
    let allowed: &[DType] = if plain_integers {
        &[DType::F32, DType::I32, DType::I8, DType::I16]
    } else if int_ok {
        &[DType::F32, DType::I32]
    } else {
        &[DType::F32]
    };
    let dtype = c.want_dtype(0, allowed)?;
    if c.dtype(1)? != dtype {
        return Err(c.err("inputs have different types"));
    }
    if dtype == DType::I32 && act == Activation::Tanh {
        return Err(c.err("TANH activation on int32"));
    }
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    let out = ew::broadcast_shapes(a, b)
        .ok_or_else(|| c.err(format!("shapes {a:?} and {b:?} do not broadcast")))?;
    c.check_out(0, &out, dtype)?;
    let bc = ew::Broadcast::new(a, b).ok_or_else(|| c.err("bad broadcast"))?;
    Ok(Kind::Elementwise(Elementwise::Binary {
        op,
        act,
        bc,
        dtype,
    }))
}

fn unary(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    use ew::UnaryOp as U;
    let op = match code {
        B::ABS => U::Abs,
        B::NEG => U::Neg,
        B::EXP => U::Exp,
        B::LOG => U::Log,
        B::SQRT => U::Sqrt,
        B::RSQRT => U::Rsqrt,
        B::RELU => U::Relu,
        B::RELU6 => U::Relu6,
        B::RELU_N1_TO_1 => U::ReluN1To1,
        B::RELU_0_TO_1 => U::Relu0To1,
        B::LOGISTIC => U::Logistic,
        B::TANH => U::Tanh,
        B::HARD_SWISH => U::HardSwish,
        B::FLOOR => U::Floor,
        B::CEIL => U::Ceil,
        B::ROUND => U::Round,
        B::SQUARE => U::Square,
        B::SIN => U::Sin,
        B::COS => U::Cos,
        B::ELU => U::Elu,
        B::GELU => {
            let approximate = match c.options(tag::GELU)? {
                Some(t) => c.opt(t.bool(schema::GeluOptions::VT_APPROXIMATE, false))?,
                None => false,
            };
            U::Gelu { approximate }
        }
        B::LEAKY_RELU => {
            let alpha = match c.options(tag::LEAKY_RELU)? {
                Some(t) => c.opt(t.f32(schema::LeakyReluOptions::VT_ALPHA, 0.0))?,
                None => 0.0,
            };
            U::LeakyRelu { alpha }
        }
        // A code listed for the family in the op table but not mapped here.
        _ => return Err(c.err("no elementwise kernel for this operator")),
    };
    if matches!(c.dtype(0)?, DType::I8 | DType::U8) {
        return unary_8bit(c, op);
    }
    let int_ok = matches!(
        op,
        U::Abs | U::Neg | U::Square | U::Relu | U::Relu6 | U::ReluN1To1
    );
    let allowed: &[DType] = if int_ok {
        &[DType::F32, DType::I32]
    } else {
        &[DType::F32]
    };
    let dtype = c.want_dtype(0, allowed)?;
    c.check_out(0, c.shape(0)?, dtype)?;
    Ok(Kind::Elementwise(Elementwise::Unary {
        op,
        dtype,
        requantized: false,
    }))
}

fn cast(c: &Ctx<'_, '_>) -> Result<Kind> {
    let from = data_dtype(c, 0)?;
    let to = c.output(0)?.dtype;
    let unsupported = match to {
        DType::F16 | DType::I16 => true,
        #[cfg(feature = "ops-variables")]
        DType::Resource => true,
        #[cfg(feature = "ops-fft")]
        DType::Complex64 => true,
        _ => false,
    };
    if unsupported {
        return Err(c.err(format!("cast to {} is not supported", to.name())));
    }
    c.check_out(0, c.shape(0)?, to)?;
    Ok(Kind::Elementwise(Elementwise::Cast { from, to }))
}

/// Int8 and int16 ADD, SUB, MUL, MAXIMUM, MINIMUM (and int8 SQUARED_DIFFERENCE).
/// `pot_scale_int16`: the ADD/SUB option that sends int16 operands whose scales are all powers
/// of two to LiteRT's shift-only kernel.
pub(crate) fn binary_i8(
    c: &Ctx<'_, '_>,
    op: ew::BinaryOp,
    act: Activation,
    pot_scale_int16: bool,
) -> Result<Kind> {
    use ew::BinaryOp as O;
    let dt = c.dtype(0)?;
    if c.dtype(1)? != dt {
        return Err(c.err("inputs have different types"));
    }
    let (a, b) = (c.shape(0)?, c.shape(1)?);
    let out = ew::broadcast_shapes(a, b)
        .ok_or_else(|| c.err(format!("shapes {a:?} and {b:?} do not broadcast")))?;
    c.check_out(0, &out, dt)?;
    let bc = ew::Broadcast::new(a, b).ok_or_else(|| c.err("bad broadcast"))?;
    let (qa, qb, qo) = (c.in_q8(0)?, c.in_q8(1)?, c.out_q8(0)?);
    let int16 = dt == DType::I16;
    if int16 && [qa, qb, qo].iter().any(|q| q.zero_point != 0) {
        return Err(c.err("int16 operands need zero point 0"));
    }
    let range = act_range(c, act, qo, dt)?;
    let pot = |q: ew::Q8| checked_log2(q.scale);
    let pot_exponents = match (pot(qa), pot(qb), pot(qo)) {
        (Some(e1), Some(e2), Some(eo)) if int16 && pot_scale_int16 => Some((e1, e2, eo)),
        _ => None,
    };
    let p = match op {
        O::Add | O::Sub if pot_exponents.is_some() => {
            let name = if op == O::Sub { "SUB" } else { "ADD" };
            let flat = |s: &[usize]| s.iter().product::<usize>();
            if op == O::Add && flat(a) != flat(b) {
                // LiteRT's power-of-two ADD reads both inputs elementwise, past the smaller.
                return Err(c.err(
                    "int16 ADD with pot_scale_int16 and power-of-two scales cannot broadcast \
                     (LiteRT has no such kernel)",
                ));
            }
            let e = pot_exponents.unwrap_or_default();
            ew::BinaryI8::add_sub_pot(e, range, op == O::Sub).map_err(|why| {
                c.err(format!(
                    "int16 {name} with pot_scale_int16, scales 2^{} and 2^{} to 2^{}: {why}",
                    e.0, e.1, e.2
                ))
            })?
        }
        O::Add | O::Sub => ew::BinaryI8::add_sub(qa, qb, qo, range, op == O::Sub, int16)
            .ok_or_else(|| c.err("input/output scales give an out-of-range multiplier"))?,
        O::Mul if int16 => ew::BinaryI8::mul_i16(qa, qb, qo, range),
        O::Mul => ew::BinaryI8::mul(qa, qb, qo, range),
        O::Maximum | O::Minimum => {
            // TFLite compares the stored values.
            if qa != qo || qb != qo {
                return Err(c.err(format!(
                    "int8 MAXIMUM/MINIMUM need the same quantization on both inputs and the \
                     output (TFLite compares stored values), have ({}, {}), ({}, {}), ({}, {})",
                    qa.scale, qa.zero_point, qb.scale, qb.zero_point, qo.scale, qo.zero_point
                )));
            }
            ew::BinaryI8::MaxMin {
                max: op == O::Maximum,
            }
        }
        O::SquaredDifference if !int16 => {
            ew::BinaryI8::squared_difference(qa, qb, qo).ok_or_else(|| {
                c.err(format!(
                    "output scale {} is too small for int8 SQUARED_DIFFERENCE of scales {} and {} \
                 (TFLite needs (2 max scale)^2 / 2^14 < output scale)",
                    qo.scale, qa.scale, qb.scale
                ))
            })?
        }
        _ => return Err(c.err(format!("this operator has no {} kernel", dt.name()))),
    };
    Ok(Kind::Elementwise(if int16 {
        Elementwise::BinaryQuantized {
            precision: Precision::I16,
            p,
            bc,
        }
    } else {
        Elementwise::BinaryQuantized {
            precision: Precision::I8,
            p: p.with_tables(),
            bc,
        }
    }))
}

pub(crate) fn unary_8bit(c: &Ctx<'_, '_>, op: ew::UnaryOp) -> Result<Kind> {
    use ew::UnaryOp as U;
    let dt = c.dtype(0)?;
    c.check_out(0, c.shape(0)?, dt)?;
    let signed = dt == DType::I8;
    let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
    let table = match op {
        U::Relu => ew::lut8_relu(qi, qo, signed, 0.0, None),
        U::Relu6 => ew::lut8_relu(qi, qo, signed, 0.0, Some(6.0)),
        U::ReluN1To1 => ew::lut8_relu(qi, qo, signed, -1.0, Some(1.0)),
        U::Relu0To1 => ew::lut8_relu(qi, qo, signed, 0.0, Some(1.0)),
        U::LeakyRelu { alpha } => ew::lut8_leaky_relu(qi, qo, signed, alpha),
        U::HardSwish => {
            let hp = ew::HardSwishParams::new(qi, qo)
                .ok_or_else(|| c.err("output scale too small for HARD_SWISH"))?;
            ew::lut8_from_int(signed, signed, |v| hp.eval(v))
        }
        U::Logistic => {
            if qo.scale != 1.0 / 256.0 {
                return Err(c.err(format!(
                    "quantized LOGISTIC needs output scale 1/256, has {}",
                    qo.scale
                )));
            }
            ew::lut8_from_float(qi, qo, signed, |x| ew::unary_fn(op, x))
        }
        U::Tanh | U::Gelu { .. } => ew::lut8_from_float(qi, qo, signed, |x| ew::unary_fn(op, x)),
        // TFLite's int8 table: `e^x - 1` (its float kernel: `expm1`).
        U::Elu if signed => ew::lut8_from_float(qi, qo, signed, |x| {
            if x < 0.0 {
                crate::math::expf(x) - 1.0
            } else {
                x
            }
        }),
        U::Rsqrt if signed => {
            let table = ew::rsqrt_i8_table(qi, qo).ok_or_else(|| {
                c.err(format!(
                    "int8 RSQRT: 1 / (sqrt({}) * {}) is out of range for a multiplier",
                    qi.scale, qo.scale
                ))
            })?;
            return Ok(Kind::Elementwise(Elementwise::RsqrtI8 {
                table: alloc::boxed::Box::new(table),
                min_input: qi.zero_point as i8,
            }));
        }
        _ => {
            return Err(c.err(format!(
                "{} input is not supported by this operator",
                dt.name()
            )))
        }
    };
    Ok(Kind::Lut8 {
        table: alloc::boxed::Box::new(table),
    })
}

pub(crate) fn run_cast(ins: &Ins<'_>, from: DType, to: DType, out: &mut [u8]) -> Result<()> {
    use so::Bool8;
    macro_rules! to_any {
        ($src:expr) => {{
            let src = $src;
            match to {
                DType::F32 => so::cast::<_, f32>(src, cast_out(out)?),
                DType::I32 => so::cast::<_, i32>(src, cast_out(out)?),
                DType::I64 => so::cast::<_, i64>(src, cast_out(out)?),
                DType::U8 => so::cast::<_, u8>(src, cast_out(out)?),
                DType::I8 => so::cast::<_, i8>(src, cast_out(out)?),
                DType::Bool => {
                    let o = cast_out::<u8>(out)?;
                    for (o, &i) in o.iter_mut().zip(src) {
                        *o = so::CastTo::<Bool8>::cast(i).0;
                    }
                }
                _ => {}
            }
        }};
    }
    match from {
        DType::F32 => to_any!(ins.typed::<f32>(0)?),
        DType::I32 => to_any!(ins.typed::<i32>(0)?),
        DType::I64 => to_any!(ins.typed::<i64>(0)?),
        DType::U8 => to_any!(ins.typed::<u8>(0)?),
        DType::I8 => to_any!(ins.typed::<i8>(0)?),
        DType::Bool => {
            let src = ins.typed::<u8>(0)?;
            // bool -> x is (b != 0) as x
            match to {
                DType::F32 => cast_out::<f32>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = f32::from(u8::from(i != 0))),
                DType::I32 => cast_out::<i32>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = i32::from(i != 0)),
                DType::I64 => cast_out::<i64>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = i64::from(i != 0)),
                DType::U8 | DType::Bool => cast_out::<u8>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = u8::from(i != 0)),
                DType::I8 => cast_out::<i8>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = i8::from(i != 0)),
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

impl Elementwise {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        index: usize,
        op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        match self {
            Elementwise::Binary {
                op: bop,
                act,
                bc,
                dtype,
            } => {
                #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
                {
                    match dtype {
                        DType::I32 => {
                            let range =
                                ew::activation_range_i32(*act).unwrap_or((i32::MIN, i32::MAX));
                            ew::binary_i32(
                                *bop,
                                bc,
                                ins.typed(0)?,
                                ins.typed(1)?,
                                range,
                                cast_out(out)?,
                            )
                            .map_err(|_| {
                                op_err(index, op, "int32 division by zero, or no int32 form")
                            })?;
                        }
                        DType::I8 => ew::floor_div_mod_narrow::<i8>(
                            *bop,
                            bc,
                            ins.typed(0)?,
                            ins.typed(1)?,
                            cast_out(out)?,
                            |v| v as i8,
                        )
                        .map_err(|_| op_err(index, op, "int8 division by zero"))?,
                        DType::I16 => ew::floor_div_mod_narrow::<i16>(
                            *bop,
                            bc,
                            ins.typed(0)?,
                            ins.typed(1)?,
                            cast_out(out)?,
                            |v| v as i16,
                        )
                        .map_err(|_| op_err(index, op, "int16 division by zero"))?,
                        _ => ew::binary_f32(
                            *bop,
                            bc,
                            ins.typed(0)?,
                            ins.typed(1)?,
                            *act,
                            cast_out(out)?,
                        ),
                    }
                }
                #[cfg(not(all(feature = "ops-elementwise", feature = "ops-float")))]
                return Err(super::compiled_out(index, op));
            }
            Elementwise::Unary {
                op: uop,
                dtype,
                requantized,
            } => {
                #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
                {
                    match (dtype, uop) {
                        (DType::I32, _) => {
                            ew::unary_i32(*uop, ins.typed(0)?, cast_out(out)?);
                        }
                        (_, ew::UnaryOp::Gelu { approximate }) if !requantized => {
                            ew::gelu_f32(*approximate, ins.typed(0)?, cast_out(out)?)
                        }
                        _ => ew::unary_f32(*uop, ins.typed(0)?, cast_out(out)?),
                    }
                }
                #[cfg(not(all(feature = "ops-elementwise", feature = "ops-float")))]
                return Err(super::compiled_out(index, op));
            }
            Elementwise::Cast { from, to } => {
                #[cfg(feature = "ops-elementwise")]
                {
                    run_cast(&ins, *from, *to, out)?
                }
                #[cfg(not(feature = "ops-elementwise"))]
                return Err(super::compiled_out(index, op));
            }
            Elementwise::RsqrtI8 { table, min_input } => {
                #[cfg(all(feature = "ops-elementwise", feature = "ops-int8"))]
                {
                    {
                        let i = ins.typed::<i8>(0)?;
                        if let Some(&v) = i.iter().find(|&&v| v < *min_input) {
                            return Err(op_err(
                                index,
                                op,
                                format!(
                                    "int8 RSQRT of a negative value (stored {v} below the zero point \
                                     {min_input})"
                                ),
                            ));
                        }
                        ew::apply_lut8(table, ins.bytes(0).unwrap_or(&[]), out)
                    }
                }
                #[cfg(not(all(feature = "ops-elementwise", feature = "ops-int8")))]
                return Err(super::compiled_out(index, op));
            }
            Elementwise::BinaryQuantized {
                precision: Precision::I8,
                p: bp,
                bc,
            } => {
                #[cfg(all(feature = "ops-elementwise", feature = "ops-int8"))]
                {
                    {
                        ew::binary_quantized::<i8>(
                            bp,
                            bc,
                            ins.typed(0)?,
                            ins.typed(1)?,
                            cast_out(out)?,
                        )
                    }
                }
                #[cfg(not(all(feature = "ops-elementwise", feature = "ops-int8")))]
                return Err(super::compiled_out(index, op));
            }
            Elementwise::BinaryQuantized {
                precision: Precision::I16,
                p: bp,
                bc,
            } => {
                #[cfg(all(feature = "ops-elementwise", feature = "ops-int16"))]
                {
                    {
                        ew::binary_quantized::<i16>(
                            bp,
                            bc,
                            ins.typed(0)?,
                            ins.typed(1)?,
                            cast_out(out)?,
                        )
                    }
                }
                #[cfg(not(all(feature = "ops-elementwise", feature = "ops-int16")))]
                return Err(super::compiled_out(index, op));
            }
        }
        Ok(())
    }
}

impl Elementwise {
    /// This operator's SIMD kernel with its constant weights packed for `isa`, if it has one.
    pub(super) fn fast(&self, isa: Isa) -> Option<Fast> {
        match self {
            Elementwise::BinaryQuantized {
                precision: Precision::I8,
                p: ew::BinaryI8::AddSubTables(t),
                ..
            } => simd::ArithI8::new(isa, t).map(Fast::ArithI8),
            Elementwise::BinaryQuantized {
                precision: Precision::I8,
                p: p @ ew::BinaryI8::Mul { .. },
                ..
            } => simd::ArithI8::mul(isa, p).map(Fast::ArithI8),
            #[cfg(all(
                feature = "ops-elementwise",
                feature = "ops-int16",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            Elementwise::BinaryQuantized {
                precision: Precision::I16,
                p,
                ..
            } => simd::ArithI16::new(isa, p).map(Fast::ArithI16),
            #[cfg(feature = "ops-elementwise")]
            Elementwise::BinaryQuantized {
                precision: Precision::I8,
                p: p @ ew::BinaryI8::SquaredDifference { .. },
                ..
            } => Some(Fast::PairTableI8(
                (0..=u16::MAX)
                    .map(|i| p.eval((i >> 8) as u8 as i8, i as u8 as i8))
                    .collect(),
            )),
            #[cfg(all(
                feature = "ops-elementwise",
                feature = "ops-float",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            Elementwise::Binary {
                op: ew::BinaryOp::Add | ew::BinaryOp::Sub | ew::BinaryOp::Mul,
                dtype: DType::F32,
                ..
            } if simd::FAST_KERNELS && isa != Isa::Portable => Some(Fast::BinaryF32(isa)),
            #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
            Elementwise::Unary {
                dtype,
                op,
                requantized,
            } if *dtype != DType::I32
                && (simd::has_elementwise(isa)
                    || matches!((op, requantized), (ew::UnaryOp::Gelu { approximate }, false)
                        if simd::has_gelu(isa, *approximate))) =>
            {
                Some(Fast::Unary(isa))
            }
            _ => None,
        }
    }
}

impl Elementwise {
    /// Runs this operator with its pre-packed weights `fast` (`None` if `fast` is not this
    /// operator's, which [`Fast::prepare`] rules out).
    #[inline]
    pub(super) fn run_fast(
        &self,
        fast: &Fast,
        ins: &Ins<'_>,
        out: &mut [u8],
        s: &mut Workers,
    ) -> Option<()> {
        match (fast, self) {
            (Fast::PairTableI8(t), Elementwise::BinaryQuantized { bc, .. })
                if t.len() == 1 << 16 =>
            {
                let (a, b) = (ins.typed::<i8>(0).ok()?, ins.typed::<i8>(1).ok()?);
                bc.apply(a, b, cast_out::<i8>(out).ok()?, |x, y| {
                    t[usize::from(x as u8) << 8 | usize::from(y as u8)]
                });
            }
            (Fast::ArithI8(f), Elementwise::BinaryQuantized { p, bc, .. }) => simd::arith_i8(
                f,
                p,
                bc,
                ins.typed(0).ok()?,
                ins.typed(1).ok()?,
                cast_out(out).ok()?,
                s,
            ),
            #[cfg(all(
                feature = "ops-elementwise",
                feature = "ops-int16",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            (Fast::ArithI16(f), Elementwise::BinaryQuantized { p, bc, .. }) => simd::arith_i16(
                f,
                p,
                bc,
                ins.typed(0).ok()?,
                ins.typed(1).ok()?,
                cast_out(out).ok()?,
                s,
            ),
            #[cfg(all(
                feature = "ops-elementwise",
                feature = "ops-float",
                any(target_arch = "x86_64", target_arch = "aarch64")
            ))]
            (
                Fast::BinaryF32(isa),
                Elementwise::Binary {
                    op,
                    act,
                    bc,
                    dtype: DType::F32,
                },
            ) => {
                let (a, b) = (ins.typed::<f32>(0).ok()?, ins.typed::<f32>(1).ok()?);
                simd::binary_f32(*isa, *op, *act, bc, a, b, cast_out(out).ok()?, s);
            }
            #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
            (
                Fast::Unary(isa),
                Elementwise::Unary {
                    op, requantized, ..
                },
            ) => {
                let (i, o) = (ins.typed::<f32>(0).ok()?, cast_out(out).ok()?);
                if let (ew::UnaryOp::Gelu { approximate }, false) = (op, requantized) {
                    return simd::gelu_f32(*isa, *approximate, i, o).then_some(());
                }
                return simd::unary_f32(*isa, *op, i, o).then_some(());
            }
            _ => return None,
        }
        Some(())
    }
}
