//! FULLY_CONNECTED (float32, int8, int16x8, hybrid).
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

use super::buffers::{bias_i32, bias_i64, cast_out, Ins, Scratch};
use super::context::{
    activation, bias_check, f32_inputs, filter_scales, hybrid_bias, output_stage, tag, Ctx,
};
use super::fast::{Constants, Fast};
use super::{Kind, Precision};
use crate::error::{format, Result};
use crate::kernels::conv::HybridInput;
use crate::kernels::simd;
use crate::kernels::simd::Workers;
use crate::kernels::simd::{GemmF32, GemmI8, Isa};
use crate::kernels::{conv, fully_connected, Activation};
use crate::model::{DType, OpDesc};
use crate::quant::OutputStage;
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec;
use alloc::vec::Vec;

/// A prepared FULLY_CONNECTED, by element type.
#[derive(Debug)]
pub(crate) enum FullyConnected {
    /// Int8, or int16x8 (int16 activations, int8 weights, int64 bias): the same parameters,
    /// run by the kernel of `precision`.
    Quantized {
        precision: Precision,
        batches: usize,
        in_depth: usize,
        out_depth: usize,
        q: OutputStage,
    },
    Hybrid {
        batches: usize,
        in_depth: usize,
        out_depth: usize,
        act: Activation,
        scales: Vec<f32>,
        mode: HybridInput,
    },
    F32 {
        batches: usize,
        in_depth: usize,
        out_depth: usize,
        act: Activation,
    },
}

/// Prepares FULLY_CONNECTED: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, _code: B) -> Result<Kind> {
    fully_connected(c)
}

fn fully_connected(c: &Ctx<'_, '_>) -> Result<Kind> {
    let (in_dt, f_dt) = (c.dtype(0)?, c.dtype(1)?);
    #[cfg(feature = "ops-float")]
    if (in_dt, f_dt) == (DType::F32, DType::F32) {
        f32_inputs(c, 3)?;
    }
    use schema::FullyConnectedOptions as O;
    let t = c.options(tag::FULLY_CONNECTED)?;
    let act = c.opt(
        t.map_or(Ok(0), |t| t.i8(O::VT_FUSED_ACTIVATION_FUNCTION, 0))
            .and_then(activation),
    )?;
    let keep = t.map_or(Ok(false), |t| c.opt(t.bool(O::VT_KEEP_NUM_DIMS, false)))?;
    if t.map_or(Ok(0), |t| c.opt(t.i8(O::VT_WEIGHTS_FORMAT, 0)))? != 0 {
        return Err(c.err("shuffled weights are not supported"));
    }
    let ws = c.shape(1)?;
    if ws.len() != 2 {
        return Err(c.err(format!("weights must be 2-D, are {ws:?}")));
    }
    let (out_depth, in_depth) = (ws[0], ws[1]);
    let i = c.input(0)?;
    if in_depth == 0 || i.elements % in_depth != 0 {
        return Err(c.err(format!(
            "input {:?} does not flatten to rows of {in_depth}",
            i.shape
        )));
    }
    bias_check(c, 2, out_depth)?;
    let batches = i.elements / in_depth;
    let out = if keep {
        if i.shape.last() != Some(&in_depth) {
            return Err(
                c.err("keep_num_dims needs the input's last dimension to match the weights")
            );
        }
        let mut s = i.shape.clone();
        *s.last_mut().unwrap_or(&mut 0) = out_depth;
        s
    } else {
        vec![batches, out_depth]
    };
    match (in_dt, f_dt) {
        #[cfg(feature = "ops-float")]
        (DType::F32, DType::F32) => {
            c.check_out(0, &out, DType::F32)?;
            Ok(Kind::FullyConnected(FullyConnected::F32 {
                batches,
                in_depth,
                out_depth,
                act,
            }))
        }
        #[cfg(feature = "ops-int8")]
        (DType::I8, DType::I8) => {
            c.check_out(0, &out, DType::I8)?;
            let q = output_stage(c, out_depth, 0, act, true)?;
            Ok(Kind::FullyConnected(FullyConnected::Quantized {
                precision: Precision::I8,
                batches,
                in_depth,
                out_depth,
                q,
            }))
        }
        #[cfg(feature = "ops-int16")]
        (DType::I16, DType::I8) => {
            c.check_out(0, &out, DType::I16)?;
            let q = output_stage(c, out_depth, 0, act, true)?;
            Ok(Kind::FullyConnected(FullyConnected::Quantized {
                precision: Precision::I16,
                batches,
                in_depth,
                out_depth,
                q,
            }))
        }
        #[cfg(feature = "ops-hybrid")]
        (DType::F32, DType::I8) => {
            c.check_out(0, &out, DType::F32)?;
            if c.input(1)?.data.is_none() {
                return Err(c.err("a hybrid FULLY_CONNECTED needs constant int8 weights"));
            }
            hybrid_bias(c)?;
            let scales = filter_scales(c, 1, out_depth, 0)?;
            let asym = t.map_or(Ok(false), |t| {
                c.opt(t.bool(O::VT_ASYMMETRIC_QUANTIZE_INPUTS, false))
            })?;
            Ok(Kind::FullyConnected(FullyConnected::Hybrid {
                batches,
                in_depth,
                out_depth,
                act,
                scales,
                mode: if asym {
                    HybridInput::Asymmetric
                } else {
                    HybridInput::Symmetric
                },
            }))
        }
        (a, b) => Err(c.err(format!(
            "input {} with weights {} is not supported",
            a.name(),
            b.name()
        ))),
    }
}

impl FullyConnected {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        _op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        scratch: &mut Scratch,
    ) -> Result<()> {
        let bias = |k: usize| ins.optional_f32(k);
        match self {
            FullyConnected::Quantized {
                precision: Precision::I16,
                batches,
                in_depth,
                out_depth,
                q,
            } => {
                #[cfg(all(feature = "ops-fully-connected", feature = "ops-int16"))]
                {
                    fully_connected::fully_connected_16x8(
                        ins.typed(0)?,
                        *batches,
                        *in_depth,
                        ins.typed(1)?,
                        *out_depth,
                        bias_i64(&ins)?,
                        q,
                        cast_out(out)?,
                    )
                }
                #[cfg(not(all(feature = "ops-fully-connected", feature = "ops-int16")))]
                return Err(super::compiled_out(_index, _op));
            }
            FullyConnected::Quantized {
                precision: Precision::I8,
                batches,
                in_depth,
                out_depth,
                q,
            } => {
                #[cfg(all(feature = "ops-fully-connected", feature = "ops-int8"))]
                {
                    fully_connected::fully_connected_i8(
                        ins.typed(0)?,
                        *batches,
                        *in_depth,
                        ins.typed(1)?,
                        *out_depth,
                        bias_i32(&ins)?,
                        q,
                        cast_out(out)?,
                    )
                }
                #[cfg(not(all(feature = "ops-fully-connected", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
            FullyConnected::Hybrid {
                batches,
                in_depth,
                out_depth,
                act,
                scales,
                mode,
            } => {
                #[cfg(all(feature = "ops-fully-connected", feature = "ops-hybrid"))]
                {
                    {
                        let n = *batches;
                        let mut hs = conv::HybridScratch {
                            quantized: &mut scratch.i8s,
                            scales: &mut scratch.f32s[..n],
                            offsets: &mut scratch.i32s[..n],
                        };
                        fully_connected::fully_connected_hybrid(
                            ins.typed(0)?,
                            *batches,
                            *in_depth,
                            ins.typed(1)?,
                            scales,
                            *out_depth,
                            bias(2)?,
                            *act,
                            *mode,
                            &mut hs,
                            cast_out(out)?,
                        )
                    }
                }
                #[cfg(not(all(feature = "ops-fully-connected", feature = "ops-hybrid")))]
                return Err(super::compiled_out(_index, _op));
            }
            FullyConnected::F32 {
                batches,
                in_depth,
                out_depth,
                act,
            } => {
                #[cfg(all(feature = "ops-fully-connected", feature = "ops-float"))]
                {
                    fully_connected::fully_connected_f32(
                        ins.typed(0)?,
                        *batches,
                        *in_depth,
                        ins.typed(1)?,
                        *out_depth,
                        bias(2)?,
                        *act,
                        cast_out(out)?,
                    )
                }
                #[cfg(not(all(feature = "ops-fully-connected", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl FullyConnected {
    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(super) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            FullyConnected::Hybrid {
                batches, in_depth, ..
            } => (batches * in_depth, *batches, *batches),
            FullyConnected::F32 { .. }
            | FullyConnected::Quantized {
                precision: Precision::I8,
                ..
            }
            | FullyConnected::Quantized {
                precision: Precision::I16,
                ..
            } => (0, 0, 0),
        }
    }
}

impl FullyConnected {
    /// This operator's SIMD kernel with its constant weights packed for `isa`, if it has one.
    pub(super) fn fast(&self, isa: Isa, constants: &Constants<'_, '_>) -> Option<Fast> {
        match self {
            FullyConnected::Quantized {
                precision: Precision::I8,
                in_depth,
                out_depth,
                q,
                ..
            } => GemmI8::pack(
                isa,
                constants.weights_i8()?,
                *out_depth,
                *in_depth,
                constants.bias_i32()?,
                q,
            )
            .map(Fast::FullyConnectedI8),
            FullyConnected::F32 {
                in_depth,
                out_depth,
                act,
                ..
            } => GemmF32::pack(
                isa.vector(),
                constants.weights_f32()?,
                *out_depth,
                *in_depth,
                constants.bias_f32()?,
                *act,
            )
            .map(Fast::FullyConnected),
            _ => None,
        }
    }
}

impl FullyConnected {
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
                Fast::FullyConnectedI8(g),
                FullyConnected::Quantized {
                    precision: Precision::I8,
                    batches,
                    ..
                },
            ) => simd::fully_connected_i8(g, ins.typed(0).ok()?, *batches, cast_out(out).ok()?, s),
            (Fast::FullyConnected(g), FullyConnected::F32 { batches, .. }) => {
                simd::fully_connected_f32(g, ins.typed(0).ok()?, *batches, cast_out(out).ok()?, s)
            }
            _ => return None,
        }
        Some(())
    }
}
