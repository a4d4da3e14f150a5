//! MEAN, SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, REDUCE_ALL, ARG_MAX and ARG_MIN.
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
use super::context::{tag, Ctx};
use super::{Kind, Precision};
use crate::error::{format, Result};
use crate::kernels::reduce::ReduceKind;
use crate::kernels::{elementwise as ew, reduce, shape_ops as so};
use crate::model::{DType, OpDesc};
use crate::quant::quantize_scale_ratio;
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec::Vec;

/// A prepared reduction, by form and element type.
#[derive(Debug)]
pub(crate) enum Reduce {
    ArgMinMax {
        outer: usize,
        axis: usize,
        inner: usize,
        max: bool,
        input: DType,
        output: DType,
    },
    /// Int8 or int16 MEAN (TFLite's `QuantizedMeanOrSum`).
    Mean {
        precision: Precision,
        mean: crate::kernels::reduce::QuantizedMean,
    },
    /// Int8 SUM (LiteRT's builtin float-scaled form).
    SumI8 {
        shape: Vec<usize>,
        axes: Vec<usize>,
        count: usize,
        in_q: ew::Q8,
        out_q: ew::Q8,
    },
    /// Int8 REDUCE_MAX / REDUCE_MIN (same input and output quantization).
    MaxMinI8 {
        shape: Vec<usize>,
        axes: Vec<usize>,
        max: bool,
    },
    F32 {
        shape: Vec<usize>,
        axes: Vec<usize>,
        kind: ReduceKind,
    },
    /// SUM, REDUCE_PROD, REDUCE_MAX and REDUCE_MIN of INT32 values.
    I32 {
        shape: Vec<usize>,
        axes: Vec<usize>,
        kind: ReduceKind,
    },
    /// REDUCE_ALL of BOOL values: their minimum as bytes, written as 0 or 1.
    All { shape: Vec<usize>, axes: Vec<usize> },
}

/// Prepares a reduction: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    match code {
        B::ARG_MAX | B::ARG_MIN => arg_min_max(c, code == B::ARG_MAX),
        _ => reduce(c, code),
    }
}

fn arg_min_max(c: &Ctx<'_, '_>, max: bool) -> Result<Kind> {
    let input = c.want_dtype(
        0,
        &[DType::F32, DType::I32, DType::I64, DType::I8, DType::U8],
    )?;
    let s = c.shape(0)?;
    let a = c.const_ints(1)?;
    if a.len() != 1 {
        return Err(c.err("axis must have one element"));
    }
    let ax = c.axis(a[0], s.len())?;
    if s[ax] == 0 {
        return Err(c.err("reduction over an empty axis"));
    }
    let output = c.output(0)?.dtype;
    if !matches!(output, DType::I32 | DType::I64) {
        return Err(c.err("output must be INT32 or INT64"));
    }
    let mut out = s.to_vec();
    out.remove(ax);
    c.check_out(0, &out, output)?;
    Ok(Kind::Reduce(Reduce::ArgMinMax {
        outer: s[..ax].iter().product(),
        axis: s[ax],
        inner: s[ax + 1..].iter().product(),
        max,
        input,
        output,
    }))
}

fn reduce(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let dt = if code == B::REDUCE_ALL {
        c.want_dtype(0, &[DType::Bool])?
    } else if code == B::REDUCE_PROD {
        c.want_dtype(0, &[DType::F32, DType::I32])?
    } else if code == B::MEAN {
        c.want_dtype(0, &[DType::F32, DType::I8, DType::I16])?
    } else {
        c.want_dtype(0, &[DType::F32, DType::I8, DType::I16, DType::I32])?
    };
    if dt == DType::I16 && code != B::MEAN {
        return Err(c.err("only MEAN has an int16 kernel among the reductions"));
    }
    let kind = match code {
        B::MEAN => ReduceKind::Mean,
        B::SUM => ReduceKind::Sum,
        B::REDUCE_MAX => ReduceKind::Max,
        B::REDUCE_MIN => ReduceKind::Min,
        B::REDUCE_ALL => ReduceKind::Sum,
        _ => ReduceKind::Prod,
    };
    let keep = match c.options(tag::REDUCER)? {
        Some(t) => c.opt(t.bool(schema::ReducerOptions::VT_KEEP_DIMS, false))?,
        None => false,
    };
    let s = c.shape(0)?;
    let mut axes = Vec::new();
    for a in c.const_ints(1)? {
        if s.is_empty() && (a == 0 || a == -1) {
            continue; // TFLite accepts axis 0 of a scalar: nothing to reduce.
        }
        axes.push(c.axis(a, s.len())?);
    }
    axes.sort_unstable();
    axes.dedup();
    if matches!(kind, ReduceKind::Max | ReduceKind::Min) && axes.iter().any(|&a| s[a] == 0) {
        // TFLite produces lowest()/max() here; keep it simple and refuse.
        return Err(c.err("max/min over an empty axis"));
    }
    let mut out = Vec::new();
    for (d, &v) in s.iter().enumerate() {
        if axes.contains(&d) {
            if keep {
                out.push(1);
            }
        } else {
            out.push(v);
        }
    }
    c.check_out(0, &out, dt)?;
    if dt == DType::Bool {
        // ALL over an empty axis is true: the kernel's starting value.
        return Ok(Kind::Reduce(Reduce::All {
            shape: s.to_vec(),
            axes,
        }));
    }
    if dt == DType::I8 && matches!(kind, ReduceKind::Max | ReduceKind::Min) {
        let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
        if qi != qo {
            return Err(c.err(format!(
                "int8 REDUCE_MAX/REDUCE_MIN need the same input and output quantization (TFLite \
                 checks this), has scale {} zp {} and scale {} zp {}",
                qi.scale, qi.zero_point, qo.scale, qo.zero_point
            )));
        }
        return Ok(Kind::Reduce(Reduce::MaxMinI8 {
            shape: s.to_vec(),
            axes,
            max: kind == ReduceKind::Max,
        }));
    }
    if matches!(dt, DType::I8 | DType::I16) {
        let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
        let count = axes.iter().map(|&a| s[a]).product();
        if kind == ReduceKind::Sum {
            return Ok(Kind::Reduce(Reduce::SumI8 {
                shape: s.to_vec(),
                axes,
                count,
                in_q: qi,
                out_q: qo,
            }));
        }
        // One formula for every axis set: the reference kernels' (TFLite's reference MEAN over
        // H, W and its general path agree; only the optimized builtin kernel rounds differently).
        let (multiplier, shift) = quantize_scale_ratio([qi.scale, 1.0], qo.scale);
        let mean = crate::kernels::reduce::QuantizedMean {
            shape: s.to_vec(),
            axes,
            count,
            in_zero_point: qi.zero_point,
            multiplier,
            shift,
            out_zero_point: qo.zero_point,
        };
        return Ok(Kind::Reduce(Reduce::Mean {
            precision: Precision::of(dt),
            mean,
        }));
    }
    if dt == DType::I32 {
        return Ok(Kind::Reduce(Reduce::I32 {
            shape: s.to_vec(),
            axes,
            kind,
        }));
    }
    Ok(Kind::Reduce(Reduce::F32 {
        shape: s.to_vec(),
        axes,
        kind,
    }))
}

impl Reduce {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        _op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        scratch: &mut Scratch,
    ) -> Result<()> {
        match self {
            Reduce::ArgMinMax {
                outer,
                axis,
                inner,
                max,
                input,
                output,
            } => {
                #[cfg(feature = "ops-reduce")]
                {
                    {
                        let go = |store: &mut dyn FnMut(usize, usize)| -> Result<()> {
                            match input {
                                DType::F32 => so::arg_min_max(
                                    ins.typed::<f32>(0)?,
                                    *outer,
                                    *axis,
                                    *inner,
                                    *max,
                                    store,
                                ),
                                DType::I32 => so::arg_min_max(
                                    ins.typed::<i32>(0)?,
                                    *outer,
                                    *axis,
                                    *inner,
                                    *max,
                                    store,
                                ),
                                DType::I64 => so::arg_min_max(
                                    ins.typed::<i64>(0)?,
                                    *outer,
                                    *axis,
                                    *inner,
                                    *max,
                                    store,
                                ),
                                DType::I8 => so::arg_min_max(
                                    ins.typed::<i8>(0)?,
                                    *outer,
                                    *axis,
                                    *inner,
                                    *max,
                                    store,
                                ),
                                _ => so::arg_min_max(
                                    ins.typed::<u8>(0)?,
                                    *outer,
                                    *axis,
                                    *inner,
                                    *max,
                                    store,
                                ),
                            }
                            Ok(())
                        };
                        match output {
                            DType::I64 => {
                                let o = cast_out::<i64>(out)?;
                                go(&mut |i, k| {
                                    if let Some(v) = o.get_mut(i) {
                                        *v = k as i64
                                    }
                                })?;
                            }
                            _ => {
                                let o = cast_out::<i32>(out)?;
                                go(&mut |i, k| {
                                    if let Some(v) = o.get_mut(i) {
                                        *v = k as i32
                                    }
                                })?;
                            }
                        }
                    }
                }
                #[cfg(not(feature = "ops-reduce"))]
                return Err(super::compiled_out(_index, _op));
            }
            Reduce::Mean {
                precision: Precision::I16,
                mean: m,
            } => {
                #[cfg(all(feature = "ops-reduce", feature = "ops-int16"))]
                {
                    {
                        m.run::<i16>(ins.typed(0)?, &mut scratch.i32s, cast_out(out)?)
                    }
                }
                #[cfg(not(all(feature = "ops-reduce", feature = "ops-int16")))]
                return Err(super::compiled_out(_index, _op));
            }
            Reduce::Mean {
                precision: Precision::I8,
                mean: m,
            } => {
                #[cfg(all(feature = "ops-reduce", feature = "ops-int8"))]
                {
                    {
                        m.run::<i8>(ins.typed(0)?, &mut scratch.i32s, cast_out(out)?)
                    }
                }
                #[cfg(not(all(feature = "ops-reduce", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
            Reduce::SumI8 {
                shape,
                axes,
                count,
                in_q,
                out_q,
            } => {
                #[cfg(all(feature = "ops-reduce", feature = "ops-int8"))]
                {
                    {
                        let o = cast_out::<i8>(out)?;
                        let sums = &mut scratch.i32s[..o.len()];
                        reduce::sum_quantized::<i8>(ins.typed(0)?, shape, axes, sums);
                        reduce::sum_i8_output(
                            sums,
                            *count,
                            in_q.zero_point,
                            in_q.scale,
                            out_q.zero_point,
                            out_q.scale,
                            o,
                        );
                    }
                }
                #[cfg(not(all(feature = "ops-reduce", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
            Reduce::MaxMinI8 { shape, axes, max } => {
                #[cfg(all(feature = "ops-reduce", feature = "ops-int8"))]
                {
                    {
                        reduce::reduce_max_min_i8(ins.typed(0)?, shape, axes, *max, cast_out(out)?)
                    }
                }
                #[cfg(not(all(feature = "ops-reduce", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
            Reduce::All { shape, axes } => {
                #[cfg(feature = "ops-reduce")]
                {
                    let i: &[i8] = bytemuck::cast_slice(ins.bytes(0).unwrap_or(&[]));
                    let o: &mut [i8] = bytemuck::cast_slice_mut(out);
                    reduce::reduce_max_min_i8(i, shape, axes, false, o);
                    for v in o {
                        *v = i8::from(*v != 0);
                    }
                }
                #[cfg(not(feature = "ops-reduce"))]
                return Err(super::compiled_out(_index, _op));
            }
            Reduce::I32 { shape, axes, kind } => {
                #[cfg(feature = "ops-reduce")]
                reduce::reduce_i32(ins.typed(0)?, shape, axes, *kind, cast_out(out)?);
                #[cfg(not(feature = "ops-reduce"))]
                return Err(super::compiled_out(_index, _op));
            }
            Reduce::F32 { shape, axes, kind } => {
                #[cfg(all(feature = "ops-reduce", feature = "ops-float"))]
                {
                    {
                        reduce::reduce_f32(ins.typed(0)?, shape, axes, *kind, cast_out(out)?)
                    }
                }
                #[cfg(not(all(feature = "ops-reduce", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl Reduce {
    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(super) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Reduce::Mean { mean, .. } => (0, 0, mean.output_len()),
            Reduce::SumI8 { shape, axes, .. } => {
                let out: usize = (0..shape.len())
                    .filter(|d| !axes.contains(d))
                    .map(|d| shape[d])
                    .product();
                (0, 0, out)
            }
            Reduce::F32 { .. }
            | Reduce::I32 { .. }
            | Reduce::MaxMinI8 { .. }
            | Reduce::ArgMinMax { .. }
            | Reduce::All { .. } => (0, 0, 0),
        }
    }
}
