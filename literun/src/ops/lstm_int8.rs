//! The full-integer UNIDIRECTIONAL_SEQUENCE_LSTM ("8x8_16", what TFLite's converter writes for
//! an int8 model): prepared as LiteRT's `PopulateQuantizedLstmParams8x8_16` and
//! `PopulatePrecomputedZPTimesWeightsWithBias` do (every rescaling as a multiplier and shift,
//! the zero points folded into the biases), so that invoking uses integers only. The state
//! (int8 output state, int16 cell state) lives in TFLite's variable tensors; the prepared
//! operator holds its own copy, as the float LSTM does.
// Without `error-details`, values only error messages mention.
#![cfg_attr(not(feature = "error-details"), allow(unused_variables))]

use super::context::{tag, Ctx};
use super::sequence::{lstm_in as L, Sequence};
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::lstm_int8 as lk;
use crate::kernels::sequence::LstmDims;
use crate::model::{DType, TensorDesc};
use crate::quant::quantize_multiplier;
use crate::schema;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

/// A prepared integer LSTM, its state and the output and cell states it starts from.
#[derive(Debug)]
pub(crate) struct LstmI8 {
    pub(crate) dims: LstmDims,
    pub(crate) quant: lk::LstmQuant,
    pub(crate) state: RefCell<LstmStateI8>,
    initial: (Vec<i8>, Vec<i16>),
}

impl LstmI8 {
    /// Restores the output and cell states it started from.
    pub(crate) fn reset(&self) {
        if let Ok(mut st) = self.state.try_borrow_mut() {
            st.h.copy_from_slice(&self.initial.0);
            st.c.copy_from_slice(&self.initial.1);
        }
    }
}

/// The output state `h`, the cell state `c`, the gates (`4 * cell` values) and, with a
/// projection, the hidden state (`cell` values).
#[derive(Debug)]
pub(crate) struct LstmStateI8 {
    pub(crate) h: Vec<i8>,
    pub(crate) c: Vec<i16>,
    pub(crate) gates: Vec<i16>,
    pub(crate) hidden: Vec<i8>,
}

/// The gates' Q3.12 scale (LiteRT's "intermediate" scale without layer normalization; with it,
/// each gate's scale is its intermediate tensor's).
const GATE_SCALE: f32 = 1.0 / 4096.0;

/// Input `k`, which must be of `dtype` and `shape`.
fn operand<'c, 'm>(
    c: &Ctx<'c, 'm>,
    k: usize,
    dtype: DType,
    shape: &[usize],
) -> Result<&'c TensorDesc<'m>> {
    let t = c.input(k)?;
    if t.dtype != dtype || t.shape != shape {
        return Err(c.err(format!(
            "input {k} is {} {:?}, the integer LSTM needs {} {shape:?}",
            t.dtype.name(),
            t.shape,
            dtype.name()
        )));
    }
    Ok(t)
}

/// The per-tensor scale of a symmetric int8 weight tensor.
fn weight_scale(c: &Ctx<'_, '_>, t: &TensorDesc<'_>) -> Result<f32> {
    let q = c.q8_of(t, "weights")?;
    if q.zero_point != 0 {
        return Err(c.err(format!(
            "weights '{}' have zero point {}, the integer LSTM needs 0",
            t.name, q.zero_point
        )));
    }
    Ok(q.scale)
}

/// Constant data of `t` as little-endian values of `N` bytes.
fn constant<const N: usize, T>(
    c: &Ctx<'_, '_>,
    t: &TensorDesc<'_>,
    from: fn([u8; N]) -> T,
) -> Result<Vec<T>> {
    let d = t.data.ok_or_else(|| {
        c.err(format!(
            "'{}' must be a constant in an integer LSTM",
            t.name
        ))
    })?;
    Ok(d.chunks_exact(N)
        .map(|b| {
            let mut a = [0u8; N];
            a.copy_from_slice(b);
            from(a)
        })
        .collect())
}

/// `bias - zero_point * (each row's sum of w)`, LiteRT's effective bias of a gate product
/// (`bias` zeros when absent).
fn effective_bias(w: &[i8], cols: usize, zero_point: i32, bias: Option<&[i32]>) -> Vec<i32> {
    w.chunks_exact(cols.max(1))
        .enumerate()
        .map(|(r, row)| {
            let sum = row.iter().fold(0i32, |s, &v| s.wrapping_add(i32::from(v)));
            let b = bias.and_then(|b| b.get(r)).copied().unwrap_or(0);
            b.wrapping_add(sum.wrapping_mul(zero_point.wrapping_neg()))
        })
        .collect()
}

/// The initial values of a variable state tensor: its data, or `empty` (TFLite fills a
/// variable tensor without data with its zero point when it is INT8, else with zeros).
fn initial<const N: usize, T: Clone>(
    c: &Ctx<'_, '_>,
    t: &TensorDesc<'_>,
    len: usize,
    from: fn([u8; N]) -> T,
    empty: T,
) -> Result<Vec<T>> {
    match t.data {
        Some(d) if d.len() == len * N => constant(c, t, from),
        Some(_) => Err(c.err(format!("state '{}' has the wrong size", t.name))),
        None => Ok(vec![empty; len]),
    }
}

/// `log2(scale)` when `scale` is a power of two (LiteRT's `CheckedLog2`: within 1e-3).
fn power_of_two(scale: f32) -> Option<i32> {
    crate::quant::checked_log2(scale).filter(|r| r.abs() < 64)
}

/// The per-tensor scale of a symmetric int16 tensor of `[cell]` (a peephole or layer-norm
/// coefficients) at input `k`, when given.
fn coefficients(c: &Ctx<'_, '_>, k: usize, cell: usize) -> Result<Option<f32>> {
    if !c.has_input(k) {
        return Ok(None);
    }
    let t = operand(c, k, DType::I16, &[cell])?;
    Ok(Some(c.q8_of(t, "coefficients")?.scale))
}

/// The scale of intermediate tensor `i` (a layer-normalized gate's scale, or the hidden state's
/// scale and zero point).
fn intermediate(c: &Ctx<'_, '_>, i: usize) -> Result<crate::kernels::elementwise::Q8> {
    let t =
        c.op.intermediates
            .get(i)
            .and_then(|&t| c.tensors.get(t))
            .ok_or_else(|| {
                c.err(format!(
                    "an integer LSTM needs 5 intermediate tensors (the scales of its gates and \
                 hidden state), has {}",
                    c.op.intermediates.len()
                ))
            })?;
    c.q8_of(t, "LSTM intermediate")
}

/// Prepares an UNIDIRECTIONAL_SEQUENCE_LSTM whose input is INT8.
pub(super) fn prepare(c: &Ctx<'_, '_>) -> Result<Kind> {
    let (mut cell_clip, mut proj_clip, mut time_major) = (0.0f32, 0.0f32, false);
    if let Some(t) = c.options(tag::UNIDIRECTIONAL_SEQUENCE_LSTM)? {
        use schema::UnidirectionalSequenceLSTMOptions as O;
        // The integer kernel always uses tanh (as LiteRT's), whatever the activation says.
        cell_clip = c.opt(t.f32(O::VT_CELL_CLIP, 0.0))?;
        proj_clip = c.opt(t.f32(O::VT_PROJ_CLIP, 0.0))?;
        time_major = c.opt(t.bool(O::VT_TIME_MAJOR, false))?;
        if c.opt(t.bool(O::VT_DIAGONAL_RECURRENT_TENSORS, false))? {
            return Err(c.err("diagonal recurrent weights are not supported"));
        }
    }
    if [cell_clip, proj_clip]
        .iter()
        .any(|v| v.is_nan() || *v < 0.0)
    {
        return Err(c.err("clips must be >= 0"));
    }
    let x = c.input(L::INPUT)?;
    let [a, b, input] = <[usize; 3]>::try_from(&x.shape[..])
        .map_err(|_| c.err(format!("input must be 3-D, is {:?}", x.shape)))?;
    let (batch, time) = if time_major { (b, a) } else { (a, b) };
    let cell = *c.shape(L::INPUT_TO + 1)?.first().unwrap_or(&0);
    if cell == 0 {
        return Err(c.err("the integer LSTM needs at least one cell"));
    }
    let projected = c.has_input(L::PROJECTION);
    let output = if projected {
        *c.shape(L::PROJECTION)?.first().unwrap_or(&0)
    } else {
        cell
    };
    let qx = c.q8_of(x, "input")?;
    let h_state = operand(c, L::OUTPUT_STATE, DType::I8, &[batch, output])?;
    let c_state = operand(c, L::CELL_STATE, DType::I16, &[batch, cell])?;
    let qh = c.q8_of(h_state, "output state")?;
    let qc = c.q8_of(c_state, "cell state")?;
    let cell_shift = power_of_two(qc.scale)
        .filter(|s| (-15..=-9).contains(s) && qc.zero_point == 0)
        .ok_or_else(|| {
            c.err(format!(
                "the cell state's scale must be a power of two from 2^-15 to 2^-9 with zero \
                 point 0, is {} (zero point {})",
                qc.scale, qc.zero_point
            ))
        })?;
    let qhid = intermediate(c, 4)?;

    let cifg = !c.has_input(L::INPUT_TO);
    // Peepholes (int16, per cell): input (none with CIFG), forget, output, all or none.
    let peepholes = [
        coefficients(c, L::PEEPHOLE, cell)?,
        coefficients(c, L::PEEPHOLE + 1, cell)?,
        coefficients(c, L::PEEPHOLE + 2, cell)?,
    ];
    let peephole = peepholes[2].is_some();
    if peepholes[1].is_some() != peephole || peepholes[0].is_some() != (peephole && !cifg) {
        return Err(c.err(
            "peepholes must be given for the forget and output gates and, without CIFG, the \
             input gate, or not at all",
        ));
    }
    if peephole && output != cell {
        // LiteRT's integer kernel applies the peepholes over `output` values, not `cell`.
        return Err(c.err("a projected integer LSTM with peepholes is not supported"));
    }
    // Layer normalization (int16 coefficients, per cell): all gates or none.
    let norms = [
        coefficients(c, L::LAYER_NORM, cell)?,
        coefficients(c, L::LAYER_NORM + 1, cell)?,
        coefficients(c, L::LAYER_NORM + 2, cell)?,
        coefficients(c, L::LAYER_NORM + 3, cell)?,
    ];
    let normalized = norms[1].is_some();
    if norms[2..].iter().any(|n| n.is_some() != normalized)
        || norms[0].is_some() != (normalized && !cifg)
    {
        return Err(c.err(
            "layer-normalization coefficients must be given for every gate (but the input gate \
             with CIFG) or for none",
        ));
    }

    let mut gates: [Option<lk::GateQuant>; 4] = [None, None, None, None];
    for (g, slot) in gates.iter_mut().enumerate() {
        let present = [
            c.has_input(L::INPUT_TO + g),
            c.has_input(L::RECURRENT_TO + g),
            c.has_input(L::BIAS + g),
        ];
        let needed = !(cifg && g == 0);
        if present.iter().any(|&p| p != needed) {
            return Err(c.err(format!(
                "gate {g}: input and recurrent weights and bias must all be given{}",
                if g == 0 { " or all omitted (CIFG)" } else { "" }
            )));
        }
        if !needed {
            continue;
        }
        let wi = operand(c, L::INPUT_TO + g, DType::I8, &[cell, input])?;
        let wr = operand(c, L::RECURRENT_TO + g, DType::I8, &[cell, output])?;
        let bias = operand(c, L::BIAS + g, DType::I32, &[cell])?;
        let bias = constant(c, bias, i32::from_le_bytes)?;
        // The gate's scale: Q3.12, or its intermediate tensor's when layer-normalized.
        let gate_scale = if normalized {
            intermediate(c, g)?.scale
        } else {
            GATE_SCALE
        };
        // As LiteRT: float products and quotients, then the multiplier from the double.
        let scale = |w: f32, s: f32| quantize_multiplier(f64::from(w * s / gate_scale));
        let peephole_scale = match [Some(0), Some(1), None, Some(2)][g].and_then(|p| peepholes[p]) {
            Some(w) => {
                let s = (libm::exp2(f64::from(cell_shift)) * f64::from(w) / f64::from(gate_scale))
                    as f32;
                quantize_multiplier(f64::from(s))
            }
            None => (0, 0),
        };
        let norm_scale = norms[g].unwrap_or(1.0);
        *slot = Some(lk::GateQuant {
            input_scale: scale(weight_scale(c, wi)?, qx.scale),
            recurrent_scale: scale(weight_scale(c, wr)?, qh.scale),
            input_bias: effective_bias(
                &constant(c, wi, |[v]: [u8; 1]| v as i8)?,
                input,
                qx.zero_point,
                (!normalized).then_some(&bias[..]),
            ),
            recurrent_bias: effective_bias(
                &constant(c, wr, |[v]: [u8; 1]| v as i8)?,
                output,
                qh.zero_point,
                None,
            ),
            peephole_scale,
            norm_scale: quantize_multiplier(f64::from(norm_scale)),
            norm_variance_guard: ((10000.0 * norm_scale) as i32).max(1),
            norm_bias: if normalized { bias } else { Vec::new() },
        });
    }
    let out_shape = if time_major {
        [time, batch, output]
    } else {
        [batch, time, output]
    };
    c.check_out(0, &out_shape, DType::I8)?;
    let two_15 = 1.0 / 32768.0;
    let hidden_scale = (two_15 / f64::from(qhid.scale) * two_15) as f32;
    let cell_clip = if cell_clip > 0.0 {
        (cell_clip / qc.scale).clamp(-32768.0, 32767.0) as i16
    } else {
        0
    };
    let projection = if projected {
        let w = operand(c, L::PROJECTION, DType::I8, &[output, cell])?;
        let bias = if c.has_input(L::PROJECTION_BIAS) {
            let b = operand(c, L::PROJECTION_BIAS, DType::I32, &[output])?;
            Some(constant(c, b, i32::from_le_bytes)?)
        } else {
            None
        };
        let scale = weight_scale(c, w)? * qhid.scale / qh.scale;
        // The clip is in the output tensor's units (LiteRT reads its scale).
        let clip = if proj_clip > 0.0 {
            (proj_clip / c.out_q8(0)?.scale).clamp(-128.0, 127.0) as i8
        } else {
            0
        };
        Some(lk::ProjectionQuant {
            scale: quantize_multiplier(f64::from(scale)),
            // LiteRT folds in plus the hidden zero point: the hidden values it projects are
            // offset by minus it.
            bias: effective_bias(
                &constant(c, w, |[v]: [u8; 1]| v as i8)?,
                cell,
                qhid.zero_point.wrapping_neg(),
                bias.as_deref(),
            ),
            clip,
        })
    } else {
        if c.has_input(L::PROJECTION_BIAS) {
            return Err(c.err("a projection bias needs projection weights"));
        }
        None
    };
    let h = initial(
        c,
        h_state,
        batch * output,
        |[v]: [u8; 1]| v as i8,
        qh.zero_point.clamp(-128, 127) as i8,
    )?;
    let cs = initial(c, c_state, batch * cell, i16::from_le_bytes, 0)?;
    Ok(Kind::Sequence(Sequence::LstmI8(Box::new(LstmI8 {
        dims: LstmDims {
            batch,
            time,
            input,
            cell,
            output,
            time_major,
        },
        quant: lk::LstmQuant {
            gates,
            cell_shift,
            cell_clip,
            hidden_scale: quantize_multiplier(f64::from(hidden_scale)),
            hidden_zero_point: qhid.zero_point,
            projection,
            output_zero_point: qh.zero_point,
        },
        state: RefCell::new(LstmStateI8 {
            h: h.clone(),
            c: cs.clone(),
            gates: vec![0; 4 * cell],
            hidden: vec![0; if projected { cell } else { 0 }],
        }),
        initial: (h, cs),
    }))))
}
