//! QUANTIZE and DEQUANTIZE.
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
use super::fast::Fast;
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::simd::Workers;
use crate::kernels::simd::{self, Isa};
use crate::kernels::{elementwise as ew, shape_ops as so};
use crate::model::{op_err, DType, OpDesc};
use crate::quant::quantize_scale_ratio;
use crate::schema::BuiltinOperator as B;
use alloc::string::String;
use alloc::vec::Vec;

/// A prepared QUANTIZE or DEQUANTIZE.
#[derive(Debug)]
pub(crate) enum Quantize {
    DequantizeF16,
    DequantizeAffine {
        scale: f32,
        zero_point: i64,
        from: DType,
    },
    /// Per-channel DEQUANTIZE: element `i` is in channel `(i / inner) % channels`.
    DequantizePerChannel {
        scales: Vec<f32>,
        zero_points: Vec<i32>,
        channels: usize,
        inner: usize,
        from: DType,
    },
    /// QUANTIZE float32 -> INT8/UINT8/INT16.
    FromFloat {
        scale: f32,
        zero_point: i32,
        to: DType,
    },
    /// QUANTIZE between quantized types where one is int16 (TFLite's `Requantize`).
    Requantize {
        multiplier: i32,
        shift: i32,
        in_zero_point: i32,
        out_zero_point: i32,
        from: DType,
        to: DType,
    },
}

/// Prepares QUANTIZE or DEQUANTIZE: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    match code {
        B::DEQUANTIZE => dequantize(c),
        _ => quantize(c),
    }
}

fn dequantize(c: &Ctx<'_, '_>) -> Result<Kind> {
    let i = c.input(0)?;
    c.check_out(0, &i.shape, DType::F32)?;
    match i.dtype {
        DType::F16 => Ok(Kind::Quantize(Quantize::DequantizeF16)),
        DType::I8 | DType::U8 | DType::I16 => {
            let q = i
                .qparams
                .as_ref()
                .ok_or_else(|| c.err("input has no quantization parameters"))?;
            if q.is_per_tensor() {
                return Ok(Kind::Quantize(Quantize::DequantizeAffine {
                    scale: q.scales[0],
                    zero_point: q.zero_points[0],
                    from: i.dtype,
                }));
            }
            let d = q.quantized_dimension;
            Ok(Kind::Quantize(Quantize::DequantizePerChannel {
                scales: q.scales.to_vec(),
                zero_points: q.zero_points.iter().map(|&z| z as i32).collect(),
                channels: i.shape[d],
                inner: i.shape[d + 1..].iter().product(),
                from: i.dtype,
            }))
        }
        d => Err(c.err(format!("cannot dequantize {}", d.name()))),
    }
}

fn quantize(c: &Ctx<'_, '_>) -> Result<Kind> {
    let i = c.input(0)?;
    let o = c.output(0)?;
    c.check_out(0, &i.shape, o.dtype)?;
    let oq = c.out_q8(0)?;
    match (i.dtype, o.dtype) {
        (DType::F32, DType::I8 | DType::U8 | DType::I16) => {
            Ok(Kind::Quantize(Quantize::FromFloat {
                scale: oq.scale,
                zero_point: oq.zero_point,
                to: o.dtype,
            }))
        }
        (DType::I8 | DType::I16, DType::I16) | (DType::I16, DType::I8) => {
            let iq = c.in_q8(0)?;
            let (multiplier, shift) = quantize_scale_ratio([iq.scale, 1.0], oq.scale);
            Ok(Kind::Quantize(Quantize::Requantize {
                multiplier,
                shift,
                in_zero_point: iq.zero_point,
                out_zero_point: oq.zero_point,
                from: i.dtype,
                to: o.dtype,
            }))
        }
        (DType::I8 | DType::U8, DType::I8 | DType::U8) => {
            let iq = c.in_q8(0)?;
            Ok(Kind::Lut8 {
                table: alloc::boxed::Box::new(ew::lut8_requantize(
                    iq,
                    oq,
                    i.dtype == DType::I8,
                    o.dtype == DType::I8,
                )),
            })
        }
        (a, b) => Err(c.err(format!(
            "QUANTIZE from {} to {} is not supported",
            a.name(),
            b.name()
        ))),
    }
}

/// Requantizes stored values with `f` (which returns the new stored value, unsaturated).
pub(crate) fn requantize<A: crate::kernels::Quantized, B: crate::kernels::Quantized>(
    input: &[A],
    out: &mut [B],
    f: impl Fn(i32) -> i32,
) {
    for (o, &x) in out.iter_mut().zip(input) {
        *o = B::saturate(f(x.get()));
    }
}

/// `out[i] = f(input[i])` over the shorter of the two.
#[inline(always)]
fn dequantize_each<T: Copy>(input: &[T], out: &mut [f32], f: impl Fn(T) -> f32) {
    for (o, &q) in out.iter_mut().zip(input) {
        *o = f(q);
    }
}

/// Runs a DEQUANTIZE kind over raw input bytes (also used for constants in `new`).
pub(crate) fn dequantize_values(
    kind: &Quantize,
    input: &[u8],
    out: &mut [f32],
) -> core::result::Result<(), String> {
    let bad = || String::from("input data is misaligned or has the wrong size");
    match kind {
        Quantize::DequantizeF16 => {
            let i: &[u16] = bytemuck::try_cast_slice(input).map_err(|_| bad())?;
            for (o, &h) in out.iter_mut().zip(i) {
                *o = so::f16_to_f32(h);
            }
        }
        Quantize::DequantizeAffine {
            scale,
            zero_point,
            from,
        } => {
            // reference_ops::Dequantize: static_cast<float>(double scale * (q - zp)). For 8- and
            // 16-bit values the double product is exact, so rounding it to float equals the
            // float product (one rounding of the exact value), without double arithmetic.
            // Where the fast kernels are (not on microcontrollers, whose flash budget the
            // second loop would take).
            if let Some(zp) = i32::try_from(*zero_point)
                .ok()
                .filter(|z| simd::FAST_KERNELS && z.unsigned_abs() <= 1 << 30)
            {
                // The same difference in i32 (it cannot overflow), so the same float; the loop
                // then vectorizes (an i64 -> f32 conversion has no vector form before AVX-512).
                let f = |q: i32| (q - zp) as f32 * *scale;
                match from {
                    DType::I8 => dequantize_each(input, out, |q: u8| f(i32::from(q as i8))),
                    DType::I16 => {
                        let i: &[i16] = bytemuck::try_cast_slice(input).map_err(|_| bad())?;
                        dequantize_each(i, out, |q| f(i32::from(q)))
                    }
                    _ => dequantize_each(input, out, |q| f(i32::from(q))),
                }
                return Ok(());
            }
            let f = |q: i64| (q - zero_point) as f32 * *scale;
            match from {
                DType::I8 => out
                    .iter_mut()
                    .zip(input)
                    .for_each(|(o, &q)| *o = f(i64::from(q as i8))),
                DType::I16 => {
                    let i: &[i16] = bytemuck::try_cast_slice(input).map_err(|_| bad())?;
                    out.iter_mut()
                        .zip(i)
                        .for_each(|(o, &q)| *o = f(i64::from(q)))
                }
                _ => out
                    .iter_mut()
                    .zip(input)
                    .for_each(|(o, &q)| *o = f(i64::from(q))),
            }
        }
        Quantize::DequantizePerChannel {
            scales,
            zero_points,
            channels,
            inner,
            from,
        } => {
            // reference_ops::PerChannelDequantize: float (q - zp) * scale.
            let (channels, inner) = (*channels, (*inner).max(1));
            let f = |i: usize, q: i32| {
                let c = (i / inner) % channels.max(1);
                (q - zero_points[c]) as f32 * scales[c]
            };
            match from {
                DType::I8 => out
                    .iter_mut()
                    .zip(input)
                    .enumerate()
                    .for_each(|(i, (o, &q))| *o = f(i, i32::from(q as i8))),
                DType::I16 => {
                    let v: &[i16] = bytemuck::try_cast_slice(input).map_err(|_| bad())?;
                    out.iter_mut()
                        .zip(v)
                        .enumerate()
                        .for_each(|(i, (o, &q))| *o = f(i, i32::from(q)))
                }
                _ => out
                    .iter_mut()
                    .zip(input)
                    .enumerate()
                    .for_each(|(i, (o, &q))| *o = f(i, i32::from(q))),
            }
        }
        _ => return Err("not a DEQUANTIZE".into()),
    }
    Ok(())
}

impl Quantize {
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
            Quantize::DequantizeF16
            | Quantize::DequantizeAffine { .. }
            | Quantize::DequantizePerChannel { .. } => {
                #[cfg(feature = "ops-quantize")]
                {
                    {
                        let i = ins.bytes(0).unwrap_or(&[]);
                        dequantize_values(self, i, cast_out::<f32>(out)?)
                            .map_err(|e| op_err(index, op, e))?;
                    }
                }
                #[cfg(not(feature = "ops-quantize"))]
                return Err(super::compiled_out(index, op));
            }
            Quantize::FromFloat {
                scale,
                zero_point,
                to,
            } => {
                #[cfg(feature = "ops-quantize")]
                {
                    {
                        let (i, s, z) = (ins.typed::<f32>(0)?, *scale, *zero_point);
                        match to {
                            DType::I8 => {
                                ew::quantize_f32(i, s, z, (-128, 127), cast_out(out)?, |v| v as i8)
                            }
                            DType::U8 => ew::quantize_f32(i, s, z, (0, 255), out, |v| v as u8),
                            _ => ew::quantize_f32(i, s, z, (-32768, 32767), cast_out(out)?, |v| {
                                v as i16
                            }),
                        }
                    }
                }
                #[cfg(not(feature = "ops-quantize"))]
                return Err(super::compiled_out(index, op));
            }
            Quantize::Requantize {
                multiplier,
                shift,
                in_zero_point,
                out_zero_point,
                from,
                to,
            } => {
                #[cfg(all(feature = "ops-quantize", feature = "ops-int16"))]
                {
                    {
                        // reference_ops::Requantize: MBQM(x - zp_in) + zp_out, saturated to the output.
                        let rq = |x: i32| {
                            crate::quant::multiply_by_quantized_multiplier(
                                x - in_zero_point,
                                *multiplier,
                                *shift,
                            )
                            .saturating_add(*out_zero_point)
                        };
                        match (from, to) {
                            (DType::I16, DType::I16) => {
                                requantize::<i16, i16>(ins.typed(0)?, cast_out(out)?, rq)
                            }
                            (DType::I16, _) => {
                                requantize::<i16, i8>(ins.typed(0)?, cast_out(out)?, rq)
                            }
                            _ => requantize::<i8, i16>(ins.typed(0)?, cast_out(out)?, rq),
                        }
                    }
                }
                #[cfg(not(all(feature = "ops-quantize", feature = "ops-int16")))]
                return Err(super::compiled_out(index, op));
            }
        }
        Ok(())
    }
}

impl Quantize {
    /// This operator's SIMD kernel with its constant weights packed for `isa`, if it has one.
    pub(super) fn fast(&self, isa: Isa) -> Option<Fast> {
        match self {
            Quantize::FromFloat { .. } if simd::has_elementwise(isa) => Some(Fast::Quantize(isa)),
            _ => None,
        }
    }
}

impl Quantize {
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
            (
                Fast::Quantize(isa),
                Quantize::FromFloat {
                    scale,
                    zero_point,
                    to,
                },
            ) => {
                let to = match to {
                    DType::I8 => simd::QuantizeTo::I8,
                    DType::U8 => simd::QuantizeTo::U8,
                    _ => simd::QuantizeTo::I16,
                };
                let i = ins.typed::<f32>(0).ok()?;
                simd::quantize_f32(*isa, i, *scale, *zero_point, to, out, s).then_some(())
            }
            _ => None,
        }
    }
}

#[cfg(all(test, feature = "ops-quantize"))]
mod tests {
    use super::*;
    use alloc::vec;

    /// DEQUANTIZE of every int8, uint8 and int16 value equals the i64 form `(q - zp) as f32 *
    /// scale` bit for bit (the kernel takes the difference in i32 where it cannot overflow),
    /// and, where the double product is exact, TFLite's `(float)(double scale * (q - zp))`.
    #[test]
    fn dequantize_affine_matches_the_reference_for_every_value() {
        let zero_points = [
            0i64,
            -128,
            127,
            255,
            -32768,
            1000,
            1 << 30,
            (1 << 30) + 7,
            -5_000_000_000,
        ];
        for scale in [1e-4f32, 0.37, 3.1e-8, 1e-45, 3e38] {
            for &zero_point in &zero_points {
                for from in [DType::I8, DType::U8, DType::I16] {
                    let values: Vec<i64> = match from {
                        DType::I8 => (-128..128).collect(),
                        DType::U8 => (0..256).collect(),
                        _ => (-32768..32768).collect(),
                    };
                    let bytes: Vec<u8> = match from {
                        DType::I16 => values
                            .iter()
                            .flat_map(|&v| (v as i16).to_le_bytes())
                            .collect(),
                        _ => values.iter().map(|&v| v as u8).collect(),
                    };
                    let kind = Quantize::DequantizeAffine {
                        scale,
                        zero_point,
                        from,
                    };
                    let mut out = vec![0f32; values.len()];
                    let aligned: Vec<i16> = bytes
                        .chunks(2)
                        .map(|c| i16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                        .collect();
                    let input: &[u8] = if from == DType::I16 {
                        bytemuck::cast_slice(&aligned)
                    } else {
                        &bytes
                    };
                    dequantize_values(&kind, input, &mut out).unwrap();
                    for (&q, &got) in values.iter().zip(&out) {
                        let want = (q - zero_point) as f32 * scale;
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{from:?} {scale} {zero_point} {q}"
                        );
                        if (q - zero_point).abs() < 1 << 24 {
                            let exact = (f64::from(scale) * (q - zero_point) as f64) as f32;
                            assert_eq!(got.to_bits(), exact.to_bits());
                        }
                    }
                }
            }
        }
    }
}
