//! BATCH_MATMUL (float32, int8, hybrid).
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
use crate::kernels::simd::{self, Isa, Workers};
use crate::kernels::{batch_matmul, elementwise as ew};
use crate::model::{DType, OpDesc};
use crate::quant::{quantize_multiplier, OutputStage};
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec;
use alloc::vec::Vec;

/// A prepared BATCH_MATMUL, by element type.
#[derive(Debug)]
pub(crate) enum BatchMatMul {
    F32 {
        lhs_shape: Vec<usize>,
        rhs_shape: Vec<usize>,
        out_shape: Vec<usize>,
        adj_x: bool,
        adj_y: bool,
    },
    /// Hybrid BATCH_MATMUL: float lhs quantized per row at run time, constant int8 rhs.
    Hybrid {
        lhs_shape: Vec<usize>,
        rhs_shape: Vec<usize>,
        out_shape: Vec<usize>,
        adj_x: bool,
        adj_y: bool,
        rhs_scale: f32,
        asymmetric: bool,
    },
    /// Int8 x int8 -> int8 BATCH_MATMUL (per-tensor parameters, one multiplier).
    I8 {
        lhs_shape: Vec<usize>,
        rhs_shape: Vec<usize>,
        out_shape: Vec<usize>,
        adj_x: bool,
        adj_y: bool,
        /// `-rhs_zero_point`.
        rhs_offset: i32,
        q: OutputStage,
    },
}

/// Prepares BATCH_MATMUL: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, _code: B) -> Result<Kind> {
    batch_matmul(c)
}

fn batch_matmul(c: &Ctx<'_, '_>) -> Result<Kind> {
    let dts = (c.dtype(0)?, c.dtype(1)?);
    match dts {
        (DType::F32, DType::F32) => f32_inputs(c, 2)?,
        (DType::I8, DType::I8) | (DType::F32, DType::I8) => {}
        (a, b) => {
            return Err(c.err(format!(
                "lhs {} with rhs {} is not supported",
                a.name(),
                b.name()
            )))
        }
    }
    let (mut adj_x, mut adj_y, mut asymmetric) = (false, false, false);
    if let Some(t) = c.options(tag::BATCH_MATMUL)? {
        use schema::BatchMatMulOptions as O;
        adj_x = c.opt(t.bool(O::VT_ADJ_X, false))?;
        adj_y = c.opt(t.bool(O::VT_ADJ_Y, false))?;
        asymmetric = c.opt(t.bool(O::VT_ASYMMETRIC_QUANTIZE_INPUTS, false))?;
    }
    let (l, r) = (c.shape(0)?, c.shape(1)?);
    if !(2..=6).contains(&l.len()) || !(2..=6).contains(&r.len()) {
        return Err(c.err("operands must have rank 2..=6"));
    }
    let (lm, lk) = (l[l.len() - 2], l[l.len() - 1]);
    let (m, k) = if adj_x { (lk, lm) } else { (lm, lk) };
    let (rk, rn) = (r[r.len() - 2], r[r.len() - 1]);
    let (k2, n) = if adj_y { (rn, rk) } else { (rk, rn) };
    if k != k2 {
        return Err(c.err(format!("inner dimensions differ: {l:?} x {r:?}")));
    }
    let mut out = ew::broadcast_shapes(&l[..l.len() - 2], &r[..r.len() - 2]).ok_or_else(|| {
        c.err(format!(
            "batch dimensions of {l:?} and {r:?} do not broadcast"
        ))
    })?;
    out.push(m);
    out.push(n);
    if dts.0 == DType::I8 {
        c.check_out(0, &out, DType::I8)?;
        let (ql, qr, qo) = (c.in_q8(0)?, c.in_q8(1)?, c.out_q8(0)?);
        // GetQuantizedConvolutionMultipler: the scale product in float, divided in double.
        let real = f64::from(ql.scale * qr.scale) / f64::from(qo.scale);
        if !(real.is_finite() && real > 0.0) {
            return Err(c.err(format!(
                "scales {} x {} / {} give no valid multiplier",
                ql.scale, qr.scale, qo.scale
            )));
        }
        let (multiplier, shift) = quantize_multiplier(real);
        return Ok(Kind::BatchMatMul(BatchMatMul::I8 {
            lhs_shape: l.to_vec(),
            rhs_shape: r.to_vec(),
            out_shape: out,
            adj_x,
            adj_y,
            rhs_offset: -qr.zero_point,
            q: OutputStage {
                input_offset: -ql.zero_point,
                output_offset: qo.zero_point,
                multipliers: vec![multiplier],
                shifts: vec![shift],
                act_min: -128,
                act_max: 127,
                // Measured: LiteRT's builtin and reference int8 BATCH_MATMUL both round twice.
                single_rounding: false,
            },
        }));
    }
    c.check_out(0, &out, DType::F32)?;
    if dts.1 == DType::I8 {
        let w = c.input(1)?;
        if w.data.is_none() {
            return Err(c.err("a hybrid BATCH_MATMUL needs a constant int8 rhs"));
        }
        let q = w
            .qparams
            .as_ref()
            .ok_or_else(|| c.err("the int8 rhs has no quantization parameters"))?;
        if q.scales.len() != 1 || q.zero_points[0] != 0 {
            return Err(
                c.err("a hybrid BATCH_MATMUL needs one scale and zero point 0 on its int8 rhs")
            );
        }
        // LiteRT's hybrid kernel steps through its per-row scales and per-column sums by one
        // matrix per batch level, which is only right with at most one batch dim above 1 on
        // each side (after it folds the lhs batch into rows when the rhs is [..., 1, K, N]).
        let fold = l.len() > 2 && r.len() > 2 && r[r.len() - 3] == 1;
        let (lb, rb) = if fold {
            (&l[..l.len() - 3], &r[..r.len() - 3])
        } else {
            (&l[..l.len() - 2], &r[..r.len() - 2])
        };
        if fold && adj_x {
            return Err(c.err(format!(
                "hybrid BATCH_MATMUL of {l:?} x {r:?} with adj_x: LiteRT quantizes the lhs \
                 along the wrong axis when the rhs is [..., 1, K, N] (drop the rhs's leading 1s \
                 or transpose the lhs first)"
            )));
        }
        let many = |d: &[usize]| d.iter().filter(|&&v| v != 1).count() > 1;
        if many(lb) || many(rb) || l.len() > 5 || r.len() > 5 {
            return Err(c.err(format!(
                "hybrid BATCH_MATMUL of {l:?} x {r:?}: LiteRT computes it wrongly with more than \
                 one batch dimension above 1 per operand (reshape to rank 3 first)"
            )));
        }
        return Ok(Kind::BatchMatMul(BatchMatMul::Hybrid {
            lhs_shape: l.to_vec(),
            rhs_shape: r.to_vec(),
            out_shape: out,
            adj_x,
            adj_y,
            rhs_scale: q.scales[0],
            asymmetric,
        }));
    }
    Ok(Kind::BatchMatMul(BatchMatMul::F32 {
        lhs_shape: l.to_vec(),
        rhs_shape: r.to_vec(),
        out_shape: out,
        adj_x,
        adj_y,
    }))
}

impl BatchMatMul {
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
            BatchMatMul::F32 {
                lhs_shape,
                rhs_shape,
                out_shape,
                adj_x,
                adj_y,
            } => {
                #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
                {
                    batch_matmul::batch_matmul_f32(
                        ins.typed(0)?,
                        lhs_shape,
                        ins.typed(1)?,
                        rhs_shape,
                        *adj_x,
                        *adj_y,
                        cast_out(out)?,
                        out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-batch-matmul", feature = "ops-float")))]
                return Err(super::compiled_out(_index, _op));
            }
            BatchMatMul::Hybrid {
                lhs_shape,
                rhs_shape,
                out_shape,
                adj_x,
                adj_y,
                rhs_scale,
                asymmetric,
            } => {
                #[cfg(all(feature = "ops-batch-matmul", feature = "ops-hybrid"))]
                {
                    {
                        let lhs = ins.typed::<f32>(0)?;
                        let l = lhs_shape.len();
                        let k = lhs_shape[if *adj_x { l - 2 } else { l - 1 }];
                        // Sized by `BatchMatMul::scratch` for these shapes (the kernel checks the lengths).
                        let rows = (lhs.len().checked_div(k).unwrap_or(0))
                            .min(scratch.f32s.len())
                            .min(scratch.i32s.len());
                        let (scales, row) = scratch.f32s.split_at_mut(rows);
                        let (offsets, col_sums) = scratch.i32s.split_at_mut(rows);
                        let mut hs = batch_matmul::HybridBmmScratch {
                            quantized: &mut scratch.i8s,
                            scales,
                            offsets,
                            row,
                            col_sums,
                        };
                        batch_matmul::batch_matmul_hybrid(
                            lhs,
                            lhs_shape,
                            ins.typed(1)?,
                            rhs_shape,
                            *adj_x,
                            *adj_y,
                            *rhs_scale,
                            *asymmetric,
                            &mut hs,
                            cast_out(out)?,
                            out_shape,
                        )
                    }
                }
                #[cfg(not(all(feature = "ops-batch-matmul", feature = "ops-hybrid")))]
                return Err(super::compiled_out(_index, _op));
            }
            BatchMatMul::I8 {
                lhs_shape,
                rhs_shape,
                out_shape,
                adj_x,
                adj_y,
                rhs_offset,
                q,
            } => {
                #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
                {
                    batch_matmul::batch_matmul_i8(
                        ins.typed(0)?,
                        lhs_shape,
                        ins.typed(1)?,
                        rhs_shape,
                        *adj_x,
                        *adj_y,
                        *rhs_offset,
                        q,
                        // Sized by `BatchMatMul::scratch` for these shapes (the kernel checks the lengths).
                        &mut batch_matmul::BmmI8Scratch {
                            i8s: &mut scratch.i8s,
                            sums: &mut scratch.i32s,
                        },
                        cast_out(out)?,
                        out_shape,
                    )
                }
                #[cfg(not(all(feature = "ops-batch-matmul", feature = "ops-int8")))]
                return Err(super::compiled_out(_index, _op));
            }
        }
        Ok(())
    }
}

impl BatchMatMul {
    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(super) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            BatchMatMul::I8 {
                lhs_shape,
                rhs_shape,
                adj_x,
                adj_y,
                ..
            } => {
                let (i8s, i32s) = crate::kernels::batch_matmul::BmmI8Scratch::sizes(
                    lhs_shape, rhs_shape, *adj_x, *adj_y,
                );
                (i8s, 0, i32s)
            }
            BatchMatMul::Hybrid {
                lhs_shape,
                rhs_shape,
                adj_x,
                adj_y,
                ..
            } => {
                let (_, k, n) =
                    crate::kernels::batch_matmul::matmul_dims(lhs_shape, rhs_shape, *adj_x, *adj_y)
                        .unwrap_or_default();
                let r = rhs_shape.len();
                let lhs_len: usize = lhs_shape.iter().product();
                let rows = lhs_len.checked_div(k).unwrap_or(0);
                let rhs_mats: usize = rhs_shape[..r - 2].iter().product();
                (lhs_len, rows + k, rows + rhs_mats * n)
            }
            BatchMatMul::F32 { .. } => (0, 0, 0),
        }
    }
}

impl BatchMatMul {
    /// A float BATCH_MATMUL through the float GEMM tile of `isa`, with the f32 scratch it packs
    /// the rhs into.
    pub(super) fn fast(&self, isa: Isa) -> Option<Fast> {
        match self {
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
            BatchMatMul::F32 {
                lhs_shape,
                rhs_shape,
                adj_x,
                adj_y,
                ..
            } if simd::has_batch_matmul_f32(isa) => {
                let (m, k, n) = batch_matmul::matmul_dims(lhs_shape, rhs_shape, *adj_x, *adj_y)?;
                let scratch = simd::batch_matmul_f32_scratch(m, k, n, *adj_x);
                Some(Fast::BatchMatMulF32 { isa, scratch })
            }
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
            BatchMatMul::I8 {
                lhs_shape,
                rhs_shape,
                adj_x,
                adj_y,
                q,
                ..
            } => {
                let bmm = simd::BmmI8::new(isa, q)?;
                let (i8s, i32s) =
                    batch_matmul::BmmI8Scratch::sizes(lhs_shape, rhs_shape, *adj_x, *adj_y);
                Some(Fast::BatchMatMulI8 { bmm, i8s, i32s })
            }
            _ => None,
        }
    }

    /// Runs this operator with its fast kernel (`None` if `fast` is not this operator's).
    pub(super) fn run_fast(
        &self,
        fast: &Fast,
        ins: &Ins<'_>,
        out: &mut [u8],
        s: &mut Workers,
    ) -> Option<()> {
        match (fast, self) {
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
            (
                Fast::BatchMatMulF32 { isa, .. },
                BatchMatMul::F32 {
                    lhs_shape,
                    rhs_shape,
                    out_shape,
                    adj_x,
                    adj_y,
                },
            ) => simd::batch_matmul_f32(
                *isa,
                ins.typed(0).ok()?,
                lhs_shape,
                ins.typed(1).ok()?,
                rhs_shape,
                *adj_x,
                *adj_y,
                cast_out(out).ok()?,
                out_shape,
                &mut s.caller_scratch()?.f32s,
            )
            .then_some(()),
            #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
            (
                Fast::BatchMatMulI8 { bmm, .. },
                BatchMatMul::I8 {
                    lhs_shape,
                    rhs_shape,
                    out_shape,
                    adj_x,
                    adj_y,
                    rhs_offset,
                    q,
                },
            ) => {
                let operands = batch_matmul::BmmI8Operands {
                    lhs: ins.typed(0).ok()?,
                    lhs_shape,
                    rhs: ins.typed(1).ok()?,
                    rhs_shape,
                    adj_x: *adj_x,
                    adj_y: *adj_y,
                    lhs_offset: q.input_offset,
                    rhs_offset: *rhs_offset,
                };
                let s = s.caller_scratch()?;
                // Sized by `Fast::scratch` for these shapes (the kernel checks the lengths).
                let mut scratch = batch_matmul::BmmI8Scratch {
                    i8s: &mut s.i8s,
                    sums: &mut s.i32s,
                };
                simd::batch_matmul_i8(bmm, &operands, &mut scratch, cast_out(out).ok()?, out_shape);
                Some(())
            }
            _ => None,
        }
    }
}
