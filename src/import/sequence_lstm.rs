//! ONNX LSTM → TFLite UNIDIRECTIONAL_SEQUENCE_LSTM (`--lstm sequence`), one per direction: a
//! file whose size does not grow with the sequence length, unlike the unrolled form
//! (`recurrent.rs`).
//!
//! TFLite's fused LSTM keeps its state (h and c) in variable tensors that persist across
//! invokes, as TensorFlow's own streaming files do, where ONNX starts every run from
//! initial_h / initial_c. So only LSTMs that start from zero state convert, and the file then
//! carries the state from one invoke to the next: the first invoke gives ONNX's result, later
//! ones continue the sequence (reset the variables between independent sequences, LiteRT's
//! `reset_all_variables()`). A reverse direction runs forward over the steps gathered in
//! reverse order, its outputs gathered back; a bidirectional LSTM is both, concatenated. The
//! default activations, no peepholes, no `input_forget`, no `clip`; outputs Y and Y_h (Y_c,
//! the final cell state, is no output of the op). Anything else is refused naming the node,
//! never unrolled instead.
//!
//! Gate order: ONNX stacks W, R and B as i, o, f, c; TFLite takes separate tensors for i, f,
//! c, o.

use super::recurrent::{spec, Spec, Weights};
use super::{unsup, Importer, R};
use crate::import::proto::Attrs;
use crate::ir::{ConstData, Op, TensorId};
use tract_onnx::pb::NodeProto;

/// What a refusal suggests.
const UNROLLED: &str = "with --lstm sequence (--lstm unrolled converts it)";

/// TFLite's gates in its input order, with their block in ONNX's i, o, f, c stacking.
const GATES: [(&str, usize); 4] = [("input", 0), ("forget", 2), ("cell", 3), ("output", 1)];

pub(super) fn lstm(imp: &mut Importer<'_>, n: &NodeProto, a: &Attrs) -> R<()> {
    let (s, x, weights) = spec(imp, n, a, 4, &["Sigmoid", "Tanh", "Tanh"])?;
    if a.int_or("input_forget", 0)? != 0 {
        return unsup(format!("input_forget=1 is not supported {UNROLLED}"));
    }
    if !absent_or_zero(imp, n, 7)? {
        return unsup(format!(
            "peephole weights (input P) are not supported {UNROLLED}"
        ));
    }
    for (k, what) in [(5, "initial_h"), (6, "initial_c")] {
        if !absent_or_zero(imp, n, k)? {
            return unsup(format!(
                "{what} must be absent or constant zeros {UNROLLED}: UNIDIRECTIONAL_SEQUENCE_LSTM \
                 starts from zero state and keeps its own state across invokes"
            ));
        }
    }
    if let Some(yc) = n.output.get(2).filter(|o| imp.used(o)) {
        return unsup(format!(
            "output Y_c ('{yc}') is not supported {UNROLLED}: UNIDIRECTIONAL_SEQUENCE_LSTM does \
             not output its cell state"
        ));
    }
    let out: Vec<Option<String>> = (0..2)
        .map(|i| n.output.get(i).filter(|o| imp.used(o)).cloned())
        .collect();
    // ONNX layout 0 is time-major, as TFLite's `time_major`; layout 1 is batch-major.
    let time_major = !s.batch_first;
    let (time_axis, h) = (usize::from(!time_major), s.hidden);
    let (mut ys, mut last_hs) = (Vec::new(), Vec::new());
    for (d, wt) in weights.iter().enumerate() {
        let reverse = s.reverse[d];
        let x = match reverse {
            true => reverse_time(imp, x, time_axis, s.seq, "x_reversed")?,
            false => x,
        };
        let inputs = lstm_inputs(imp, x, wt, &s, d);
        let steps = imp.emit_tmp(Op::SequenceLstm { time_major }, &inputs, "sequence")?;
        if out[1].is_some() {
            // The last step processed (the first in time when reversed): [1, batch, H];
            // batch-first: [batch, 1, H].
            let last = s.seq as i64 - 1;
            let (seq, batch, h) = (s.seq as i64, s.batch as i64, h as i64);
            let (begins, ends) = match time_major {
                true => (vec![last, 0, 0], vec![seq, batch, h]),
                false => (vec![0, last, 0], vec![batch, seq, h]),
            };
            let steps_of = vec![1; 3];
            let op = Op::Slice {
                begins,
                ends,
                steps: steps_of,
            };
            last_hs.push(imp.emit_tmp(op, &[steps], "last_h")?);
        }
        if out[0].is_some() {
            let steps = match reverse {
                true => reverse_time(imp, steps, time_axis, s.seq, "y_reversed")?,
                false => steps,
            };
            // [seq, 1, batch, H]; batch-first: [batch, seq, 1, H].
            let shape = match time_major {
                true => vec![s.seq, 1, s.batch, h],
                false => vec![s.batch, s.seq, 1, h],
            };
            ys.push(imp.emit_tmp(Op::Reshape { shape }, &[steps], "y_direction")?);
        }
    }
    // Directions are axis 1 of Y (batch-first: 2) and axis 0 of Y_h (batch-first: 1).
    for ((name, pieces), axis) in out.iter().zip([ys, last_hs]).zip([1, 0]) {
        let Some(name) = name else { continue };
        let axis = axis + time_axis;
        let op = match pieces.len() {
            1 => Op::Reshape {
                shape: imp.shape(pieces[0]),
            },
            _ => Op::Concat { axis },
        };
        imp.emit_to(op, &pieces, name)?;
    }
    Ok(())
}

/// The inputs of direction `d`'s UNIDIRECTIONAL_SEQUENCE_LSTM: `x`, then its weights and
/// biases as constants, split per gate in TFLite's order.
fn lstm_inputs(
    imp: &mut Importer<'_>,
    x: TensorId,
    wt: &Weights,
    s: &Spec,
    d: usize,
) -> Vec<TensorId> {
    let h = s.hidden;
    let mut inputs = vec![x];
    for (what, v, cols) in [
        ("input_weights", &wt.w, s.input),
        ("recurrent_weights", &wt.r, h),
    ] {
        for (gate, block) in GATES {
            let rows = v[block * h * cols..(block + 1) * h * cols].to_vec();
            let data = ConstData::from_f32(&[h, cols], rows);
            inputs.push(imp.add_const(&format!("{}/d{d}_{gate}_{what}", imp.cur), data));
        }
    }
    let bias: Vec<f32> = wt.wb.iter().zip(&wt.rb).map(|(a, b)| a + b).collect();
    for (gate, block) in GATES {
        let data = ConstData::from_f32(&[h], bias[block * h..(block + 1) * h].to_vec());
        inputs.push(imp.add_const(&format!("{}/d{d}_{gate}_bias", imp.cur), data));
    }
    inputs
}

/// `x` with its `seq` steps along `axis` in reverse order (a GATHER of constant indices).
fn reverse_time(
    imp: &mut Importer<'_>,
    x: TensorId,
    axis: usize,
    seq: usize,
    suffix: &str,
) -> R<TensorId> {
    let order = (0..seq as i32).rev().collect();
    let order = ConstData::from_i32(&[seq], order);
    let indices = imp.add_const(&format!("{}/reversed_steps", imp.cur), order);
    imp.emit_tmp(Op::Gather { axis }, &[x, indices], suffix)
}

/// Whether optional input `k` of `n` is absent or a constant of zeros.
fn absent_or_zero(imp: &mut Importer<'_>, n: &NodeProto, k: usize) -> R<bool> {
    let Some(t): Option<TensorId> = imp.inp(n, k)? else {
        return Ok(true);
    };
    Ok(imp
        .cst(t)
        .is_some_and(|d| d.to_f32_vec().iter().all(|&v| v == 0.0)))
}
