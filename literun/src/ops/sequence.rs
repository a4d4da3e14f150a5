//! Operators over sequences with state that persists across invocations:
//! UNIDIRECTIONAL_SEQUENCE_LSTM (float, and int8 in [`super::lstm_int8`]) and SVDF (float and
//! int8). The state lives in TFLite's variable tensors
//! (`is_variable`); the prepared operator holds its own copy, starting from the tensor's data
//! (zeros when it has none), updated by each invocation and restored to that start by
//! `Interpreter::reset_variables`.
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
use crate::kernels::sequence as sk;
use crate::model::{op_err, DType, OpDesc};
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

/// A prepared sequence operator.
#[derive(Debug)]
pub(crate) enum Sequence {
    /// Float UNIDIRECTIONAL_SEQUENCE_LSTM.
    Lstm(Box<Lstm>),
    /// Full-integer (8x8_16) UNIDIRECTIONAL_SEQUENCE_LSTM.
    LstmI8(Box<super::lstm_int8::LstmI8>),
    /// Float SVDF: its memory (`[batch, filters, memory]`) and `filters` values of scratch,
    /// and the memory it starts from.
    SvdfF32 {
        dims: sk::SvdfDims,
        act: crate::kernels::Activation,
        state: RefCell<(Vec<f32>, Vec<f32>)>,
        initial: Vec<f32>,
    },
    /// Int8 SVDF: its int16 memory and `filters` int32 values of scratch, and the memory it
    /// starts from.
    SvdfI8 {
        dims: sk::SvdfDims,
        q: sk::SvdfQuant,
        state: RefCell<(Vec<i16>, Vec<i32>)>,
        initial: Vec<i16>,
    },
}

/// SVDFOptions (union tag 6; not in literun's schema subset): its fields' vtable offsets.
mod svdf_options {
    pub const TAG: u8 = 6;
    pub const RANK: u16 = 4;
    pub const FUSED_ACTIVATION_FUNCTION: u16 = 6;
}

/// A float LSTM, its state and the output and cell states it starts from.
#[derive(Debug)]
pub(crate) struct Lstm {
    dims: sk::LstmDims,
    options: sk::LstmOptions,
    state: RefCell<LstmState>,
    initial: (Vec<f32>, Vec<f32>),
}

/// The output state `h`, the cell state `c`, and gate scratch.
#[derive(Debug)]
struct LstmState {
    h: Vec<f32>,
    c: Vec<f32>,
    gates: Vec<f32>,
}

/// TFLite's LSTM input indices.
pub(super) mod lstm_in {
    pub const INPUT: usize = 0;
    /// input_to_{input, forget, cell, output}_weights.
    pub const INPUT_TO: usize = 1;
    /// recurrent_to_{input, forget, cell, output}_weights.
    pub const RECURRENT_TO: usize = 5;
    /// cell_to_{input, forget, output}_weights.
    pub const PEEPHOLE: usize = 9;
    /// {input, forget, cell, output}_gate_bias.
    pub const BIAS: usize = 12;
    pub const PROJECTION: usize = 16;
    pub const PROJECTION_BIAS: usize = 17;
    pub const OUTPUT_STATE: usize = 18;
    pub const CELL_STATE: usize = 19;
    /// The four layer-normalization coefficients.
    pub const LAYER_NORM: usize = 20;
}

/// Prepares a sequence operator: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    match code {
        B::SVDF => svdf(c),
        _ => lstm(c),
    }
}

/// Checks that optional input `k`, when present, is FLOAT32 of `shape`; whether it is present.
fn float_operand(c: &Ctx<'_, '_>, k: usize, shape: &[usize]) -> Result<bool> {
    if !c.has_input(k) {
        return Ok(false);
    }
    let t = c.input(k)?;
    if t.dtype != DType::F32 || t.shape != shape {
        return Err(c.err(format!(
            "input {k} is {} {:?}, expected FLOAT32 {shape:?}",
            t.dtype.name(),
            t.shape
        )));
    }
    Ok(true)
}

/// The initial values of a variable state tensor: its data, or zeros.
fn initial_state(c: &Ctx<'_, '_>, k: usize, len: usize) -> Result<Vec<f32>> {
    let t = c.input(k)?;
    match t.data {
        Some(d) if d.len() == len * 4 => Ok(d
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()),
        Some(_) => Err(c.err(format!("state input {k} has the wrong size"))),
        None => Ok(vec![0.0; len]),
    }
}

fn lstm(c: &Ctx<'_, '_>) -> Result<Kind> {
    use lstm_in as L;
    if c.dtype(L::INPUT)? == DType::I8 {
        return super::lstm_int8::prepare(c);
    }
    if c.dtype(L::INPUT)? != DType::F32 {
        return Err(c.err(format!(
            "only the float and int8 forms are supported, input is {}",
            c.dtype(L::INPUT)?.name()
        )));
    }
    let (mut act, mut cell_clip, mut proj_clip, mut time_major) =
        (crate::kernels::Activation::Tanh, 0.0, 0.0, false);
    if let Some(t) = c.options(tag::UNIDIRECTIONAL_SEQUENCE_LSTM)? {
        use schema::UnidirectionalSequenceLSTMOptions as O;
        act = c.opt(
            t.i8(O::VT_FUSED_ACTIVATION_FUNCTION, 0)
                .and_then(activation),
        )?;
        cell_clip = c.opt(t.f32(O::VT_CELL_CLIP, 0.0))?;
        proj_clip = c.opt(t.f32(O::VT_PROJ_CLIP, 0.0))?;
        time_major = c.opt(t.bool(O::VT_TIME_MAJOR, false))?;
        if c.opt(t.bool(O::VT_DIAGONAL_RECURRENT_TENSORS, false))? {
            return Err(c.err("diagonal recurrent weights are not supported"));
        }
    }
    if !(cell_clip >= 0.0 && proj_clip >= 0.0) {
        return Err(c.err("clips must be >= 0"));
    }
    if (L::LAYER_NORM..L::LAYER_NORM + 4).any(|k| c.has_input(k)) {
        return Err(c.err("layer-normalized LSTMs are not supported"));
    }
    let x = c.shape(L::INPUT)?;
    let [a, b, input] =
        <[usize; 3]>::try_from(x).map_err(|_| c.err(format!("input must be 3-D, is {x:?}")))?;
    let (batch, time) = if time_major { (b, a) } else { (a, b) };
    let forget = c.shape(L::INPUT_TO + 1)?;
    let cell = *forget.first().unwrap_or(&0);
    let output = if c.has_input(L::PROJECTION) {
        *c.shape(L::PROJECTION)?.first().unwrap_or(&0)
    } else {
        cell
    };
    // The input gate (CIFG when absent) is all or nothing.
    let cifg = !c.has_input(L::INPUT_TO);
    for g in 0..4 {
        let needed = !(cifg && g == 0);
        let present = [
            float_operand(c, L::INPUT_TO + g, &[cell, input])?,
            float_operand(c, L::RECURRENT_TO + g, &[cell, output])?,
            float_operand(c, L::BIAS + g, &[cell])?,
        ];
        if present.iter().any(|&p| p != needed) {
            return Err(c.err(format!(
                "gate {g}: input and recurrent weights and bias must all be given{}",
                if g == 0 { " or all omitted (CIFG)" } else { "" }
            )));
        }
    }
    for k in 0..3 {
        float_operand(c, L::PEEPHOLE + k, &[cell])?;
    }
    if cifg && c.has_input(L::PEEPHOLE) {
        return Err(c.err("a CIFG LSTM has no input gate peephole"));
    }
    float_operand(c, L::PROJECTION, &[output, cell])?;
    float_operand(c, L::PROJECTION_BIAS, &[output])?;
    if !float_operand(c, L::OUTPUT_STATE, &[batch, output])?
        || !float_operand(c, L::CELL_STATE, &[batch, cell])?
    {
        return Err(c.err("the output and cell state inputs are required"));
    }
    let out_shape = if time_major {
        [time, batch, output]
    } else {
        [batch, time, output]
    };
    c.check_out(0, &out_shape, DType::F32)?;
    let h = initial_state(c, L::OUTPUT_STATE, batch * output)?;
    let cs = initial_state(c, L::CELL_STATE, batch * cell)?;
    Ok(Kind::Sequence(Sequence::Lstm(Box::new(Lstm {
        dims: sk::LstmDims {
            batch,
            time,
            input,
            cell,
            output,
            time_major,
        },
        options: sk::LstmOptions {
            activation: act,
            cell_clip,
            proj_clip,
        },
        state: RefCell::new(LstmState {
            h: h.clone(),
            c: cs.clone(),
            gates: vec![0.0; 4 * cell],
        }),
        initial: (h, cs),
    }))))
}

/// SVDF: input `[batch, input]`, feature weights `[filters, input]`, time weights
/// `[filters, memory]`, optional bias `[units]`, the variable state `[batch, filters * memory]`.
fn svdf(c: &Ctx<'_, '_>) -> Result<Kind> {
    let (mut rank, mut act) = (0, crate::kernels::Activation::None);
    if let Some(t) = c.options(svdf_options::TAG)? {
        rank = c.opt(t.i32(svdf_options::RANK, 0))?;
        act = c.opt(
            t.i8(svdf_options::FUSED_ACTIVATION_FUNCTION, 0)
                .and_then(activation),
        )?;
    }
    let rank = super::context::positive(c, rank, "rank")?;
    let [batch, input] =
        <[usize; 2]>::try_from(c.shape(0)?).map_err(|_| c.err("input must be 2-D"))?;
    let [filters, fi] =
        <[usize; 2]>::try_from(c.shape(1)?).map_err(|_| c.err("feature weights must be 2-D"))?;
    let [tf, memory] =
        <[usize; 2]>::try_from(c.shape(2)?).map_err(|_| c.err("time weights must be 2-D"))?;
    if fi != input || tf != filters || filters % rank != 0 || memory == 0 {
        return Err(c.err(format!(
            "feature weights [{filters}, {fi}] and time weights [{tf}, {memory}] do not fit input              [{batch}, {input}] and rank {rank}"
        )));
    }
    let units = filters / rank;
    if c.has_input(3) && c.shape(3)? != [units] {
        return Err(c.err(format!("bias must be [{units}]")));
    }
    let state_len = batch * filters * memory;
    let st = c.input(4)?;
    if st.elements != state_len || !st.variable {
        return Err(c.err(format!(
            "the state must be a variable tensor of {state_len} elements"
        )));
    }
    let dims = sk::SvdfDims {
        batch,
        input,
        filters,
        units,
        rank,
        memory,
    };
    let dt = c.want_dtype(0, &[DType::F32, DType::I8])?;
    if dt == DType::F32 {
        for k in [1, 2, 3, 4] {
            if c.has_input(k) {
                c.want_dtype(k, &[DType::F32])?;
            }
        }
        c.check_out(0, &[batch, units], DType::F32)?;
        let initial = initial_state(c, 4, state_len)?;
        return Ok(Kind::Sequence(Sequence::SvdfF32 {
            dims,
            act,
            state: RefCell::new((initial.clone(), vec![0.0; filters])),
            initial,
        }));
    }
    // Int8: int8 feature weights, int16 time weights and state, int32 bias (TFLite's types).
    for (k, want) in [
        (1, DType::I8),
        (2, DType::I16),
        (3, DType::I32),
        (4, DType::I16),
    ] {
        if c.has_input(k) && c.dtype(k)? != want {
            return Err(c.err(format!("int8 SVDF needs input {k} of type {}", want.name())));
        }
    }
    // TFLite requires RELU here and then applies none (its int8 kernel clamps to the int8 range
    // only); literun does the same.
    if act != crate::kernels::Activation::Relu {
        return Err(c.err("int8 SVDF needs the RELU activation (as TFLite)"));
    }
    c.check_out(0, &[batch, units], DType::I8)?;
    let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
    let scale = |k: usize| -> Result<f32> { Ok(c.q8_of(c.input(k)?, "operand")?.scale) };
    let (sf, stime, sst) = (scale(1)?, scale(2)?, scale(4)?);
    if c.q8_of(st, "state")?.zero_point != 0 {
        return Err(c.err("the int16 state must have zero point 0"));
    }
    // As TFLite: each product and quotient in float, then quantized as a double.
    let s1 = f64::from(qi.scale * sf / sst);
    let s2 = f64::from(sst * stime / qo.scale);
    let m1 = crate::quant::quantize_multiplier(s1);
    let m2 = crate::quant::quantize_multiplier(s2);
    if m1.0 == 0 || m2.0 == 0 {
        return Err(c.err("scales out of range for int8 SVDF"));
    }
    let initial: Vec<i16> = match st.data {
        Some(d) => d
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect(),
        None => vec![0; state_len],
    };
    Ok(Kind::Sequence(Sequence::SvdfI8 {
        dims,
        q: sk::SvdfQuant {
            scale_1: m1,
            scale_2: m2,
            input_zero_point: qi.zero_point,
            output_zero_point: qo.zero_point,
        },
        state: RefCell::new((initial.clone(), vec![0; filters])),
        initial,
    }))
}

impl Sequence {
    /// Restores the state to what the operator started from (as LiteRT's
    /// `reset_all_variables` resets the variable tensors that hold it).
    pub(crate) fn reset(&self) {
        fn restore<T: Copy>(state: &mut [T], initial: &[T]) {
            state.copy_from_slice(initial);
        }
        match self {
            Sequence::Lstm(l) => {
                if let Ok(mut st) = l.state.try_borrow_mut() {
                    restore(&mut st.h, &l.initial.0);
                    restore(&mut st.c, &l.initial.1);
                }
            }
            Sequence::LstmI8(l) => l.reset(),
            Sequence::SvdfF32 { state, initial, .. } => {
                if let Ok(mut st) = state.try_borrow_mut() {
                    restore(&mut st.0, initial);
                }
            }
            Sequence::SvdfI8 { state, initial, .. } => {
                if let Ok(mut st) = state.try_borrow_mut() {
                    restore(&mut st.0, initial);
                }
            }
        }
    }

    /// Runs the operator reading `ins`, writing `out`, updating the state it holds.
    pub(super) fn run<'b>(
        &self,
        index: usize,
        op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        #[cfg(not(feature = "ops-sequence"))]
        return Err(super::compiled_out(index, op));
        #[cfg(feature = "ops-sequence")]
        match self {
            Sequence::Lstm(l) => {
                use lstm_in as L;
                let f = |k: usize| ins.optional_f32(k);
                let four = |base: usize| -> Result<[Option<&[f32]>; 4]> {
                    Ok([f(base)?, f(base + 1)?, f(base + 2)?, f(base + 3)?])
                };
                let w = sk::LstmWeights {
                    input_to: four(L::INPUT_TO)?,
                    recurrent_to: four(L::RECURRENT_TO)?,
                    peephole: [f(L::PEEPHOLE)?, f(L::PEEPHOLE + 1)?, f(L::PEEPHOLE + 2)?],
                    bias: four(L::BIAS)?,
                    projection: f(L::PROJECTION)?,
                    projection_bias: f(L::PROJECTION_BIAS)?,
                };
                let mut st = l
                    .state
                    .try_borrow_mut()
                    .map_err(|_| op_err(index, op, "state in use"))?;
                let LstmState { h, c, gates } = &mut *st;
                sk::lstm_f32(
                    &l.dims,
                    &w,
                    &l.options,
                    ins.typed(L::INPUT)?,
                    h,
                    c,
                    gates,
                    cast_out(out)?,
                );
            }
            Sequence::LstmI8(l) => {
                use lstm_in as L;
                let i8s = |k: usize| -> Result<Option<&[i8]>> {
                    if ins.has(k) {
                        ins.typed(k).map(Some)
                    } else {
                        Ok(None)
                    }
                };
                let four = |base: usize| -> Result<[Option<&[i8]>; 4]> {
                    Ok([i8s(base)?, i8s(base + 1)?, i8s(base + 2)?, i8s(base + 3)?])
                };
                let i16s = |k: usize| -> Result<Option<&[i16]>> {
                    if ins.has(k) {
                        ins.typed(k).map(Some)
                    } else {
                        Ok(None)
                    }
                };
                let w = crate::kernels::lstm_int8::LstmWeightsI8 {
                    input_to: four(L::INPUT_TO)?,
                    recurrent_to: four(L::RECURRENT_TO)?,
                    peephole: [
                        i16s(L::PEEPHOLE)?,
                        i16s(L::PEEPHOLE + 1)?,
                        i16s(L::PEEPHOLE + 2)?,
                    ],
                    layer_norm: [
                        i16s(L::LAYER_NORM)?,
                        i16s(L::LAYER_NORM + 1)?,
                        i16s(L::LAYER_NORM + 2)?,
                        i16s(L::LAYER_NORM + 3)?,
                    ],
                    projection: i8s(L::PROJECTION)?,
                };
                let mut st = l
                    .state
                    .try_borrow_mut()
                    .map_err(|_| op_err(index, op, "state in use"))?;
                let super::lstm_int8::LstmStateI8 {
                    h,
                    c,
                    gates,
                    hidden,
                } = &mut *st;
                crate::kernels::lstm_int8::lstm_i8(
                    &l.dims,
                    &w,
                    &l.quant,
                    ins.typed(L::INPUT)?,
                    h,
                    c,
                    gates,
                    hidden,
                    cast_out(out)?,
                );
            }
            Sequence::SvdfF32 {
                dims, act, state, ..
            } => {
                let mut st = state
                    .try_borrow_mut()
                    .map_err(|_| op_err(index, op, "state in use"))?;
                let (memory, scratch) = &mut *st;
                sk::svdf_f32(
                    dims,
                    ins.typed(0)?,
                    ins.typed(1)?,
                    ins.typed(2)?,
                    ins.optional_f32(3)?,
                    *act,
                    memory,
                    scratch,
                    cast_out(out)?,
                );
            }
            Sequence::SvdfI8 { dims, q, state, .. } => {
                let mut st = state
                    .try_borrow_mut()
                    .map_err(|_| op_err(index, op, "state in use"))?;
                let (memory, scratch) = &mut *st;
                let bias = if ins.has(3) {
                    Some(ins.typed::<i32>(3)?)
                } else {
                    None
                };
                sk::svdf_i8(
                    dims,
                    q,
                    ins.typed(0)?,
                    ins.typed(1)?,
                    ins.typed(2)?,
                    bias,
                    memory,
                    scratch,
                    cast_out(out)?,
                );
            }
        }
        Ok(())
    }
}
