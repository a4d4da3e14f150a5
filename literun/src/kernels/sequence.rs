//! Sequence kernels with state carried across time steps (and across invocations by the
//! operator): UNIDIRECTIONAL_SEQUENCE_LSTM (float) and SVDF (float and int8), as TFLite's
//! reference kernels compute them.

use super::Activation;
use crate::math::expf;

/// Sizes of an LSTM: `batch` sequences of `time` steps, `input` features in, `cell` units,
/// `output` features out (`cell` without a projection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LstmDims {
    pub batch: usize,
    pub time: usize,
    pub input: usize,
    pub cell: usize,
    pub output: usize,
    /// Input and output are `[time, batch, ...]` (else `[batch, time, ...]`).
    pub time_major: bool,
}

impl LstmDims {
    /// The row of step `t` of sequence `b` in the input and output.
    #[inline]
    pub fn row(&self, t: usize, b: usize) -> usize {
        if self.time_major {
            t * self.batch + b
        } else {
            b * self.time + t
        }
    }
}

/// The weights of a float LSTM, gates in TFLite's order (input, forget, cell, output). The
/// input gate's weights and bias are `None` for a CIFG LSTM (input gate = 1 - forget gate);
/// `peephole` holds the diagonal cell-to-gate weights when the model has them.
#[derive(Clone, Copy, Debug)]
pub struct LstmWeights<'a> {
    /// `[cell, input]` each.
    pub input_to: [Option<&'a [f32]>; 4],
    /// `[cell, output]` each.
    pub recurrent_to: [Option<&'a [f32]>; 4],
    /// `[cell]` each (input, forget, output; the cell gate has none).
    pub peephole: [Option<&'a [f32]>; 3],
    /// `[cell]` each.
    pub bias: [Option<&'a [f32]>; 4],
    /// `[output, cell]` and `[output]`.
    pub projection: Option<&'a [f32]>,
    pub projection_bias: Option<&'a [f32]>,
}

/// Float LSTM options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LstmOptions {
    /// The cell gate's and the output's activation (TANH in Keras LSTMs).
    pub activation: Activation,
    /// Clip of the cell state and of the projected output (0: none).
    pub cell_clip: f32,
    pub proj_clip: f32,
}

#[inline]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + expf(-x))
}

/// `out[r] += m[r, :] . v` for a `[rows, v.len()]` row-major matrix `m`.
#[inline]
fn mat_vec_acc(m: &[f32], v: &[f32], out: &mut [f32]) {
    let n = v.len();
    if n == 0 {
        return;
    }
    for (o, row) in out.iter_mut().zip(m.chunks_exact(n)) {
        *o += row.iter().zip(v).map(|(a, b)| a * b).sum::<f32>();
    }
}

/// Runs a float LSTM over `x` into `out`, carrying `h` (`[batch, output]`) and `c`
/// (`[batch, cell]`) from step to step; `gates` is scratch of `4 * cell` values.
#[allow(clippy::too_many_arguments)]
pub fn lstm_f32(
    d: &LstmDims,
    w: &LstmWeights<'_>,
    o: &LstmOptions,
    x: &[f32],
    h: &mut [f32],
    c: &mut [f32],
    gates: &mut [f32],
    out: &mut [f32],
) {
    let (nc, no, ni) = (d.cell, d.output, d.input);
    if gates.len() < 4 * nc || h.len() < d.batch * no || c.len() < d.batch * nc {
        return;
    }
    let act = o.activation;
    for t in 0..d.time {
        for b in 0..d.batch {
            let row = d.row(t, b);
            let (Some(xt), Some(ot)) = (
                x.get(row * ni..(row + 1) * ni),
                out.get_mut(row * no..(row + 1) * no),
            ) else {
                return;
            };
            let hb = &mut h[b * no..(b + 1) * no];
            let cb = &mut c[b * nc..(b + 1) * nc];
            // Gate pre-activations: bias + W_x x + W_h h.
            for (g, gate) in gates.chunks_exact_mut(nc).take(4).enumerate() {
                match w.bias[g] {
                    Some(bias) => gate.copy_from_slice(&bias[..nc]),
                    None => gate.fill(0.0),
                }
                if let Some(m) = w.input_to[g] {
                    mat_vec_acc(m, xt, gate);
                }
                if let Some(m) = w.recurrent_to[g] {
                    mat_vec_acc(m, hb, gate);
                }
            }
            let (ig, rest) = gates.split_at_mut(nc);
            let (fg, rest) = rest.split_at_mut(nc);
            let (cg, og) = rest.split_at_mut(nc);
            let cifg = w.input_to[0].is_none();
            for k in 0..nc {
                let mut f = fg[k];
                if let Some(p) = w.peephole[1] {
                    f += p[k] * cb[k];
                }
                let f = sigmoid(f);
                let i = if cifg {
                    1.0 - f
                } else {
                    let mut i = ig[k];
                    if let Some(p) = w.peephole[0] {
                        i += p[k] * cb[k];
                    }
                    sigmoid(i)
                };
                let g = act.apply(cg[k]);
                let mut cn = f * cb[k] + i * g;
                if o.cell_clip > 0.0 {
                    cn = cn.clamp(-o.cell_clip, o.cell_clip);
                }
                cb[k] = cn;
                let mut ov = og[k];
                if let Some(p) = w.peephole[2] {
                    ov += p[k] * cn;
                }
                // The output before any projection, kept in the output gate's place.
                og[k] = sigmoid(ov) * act.apply(cn);
            }
            match w.projection {
                Some(p) => {
                    match w.projection_bias {
                        Some(pb) => hb.copy_from_slice(&pb[..no]),
                        None => hb.fill(0.0),
                    }
                    mat_vec_acc(p, og, hb);
                    if o.proj_clip > 0.0 {
                        for v in hb.iter_mut() {
                            *v = v.clamp(-o.proj_clip, o.proj_clip);
                        }
                    }
                }
                None => hb.copy_from_slice(&og[..no]),
            }
            ot.copy_from_slice(hb);
        }
    }
}

/// Sizes of an SVDF: `batch` rows of `input` features, `filters` = `units * rank` feature
/// filters, each with a memory of `memory` steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SvdfDims {
    pub batch: usize,
    pub input: usize,
    pub filters: usize,
    pub units: usize,
    pub rank: usize,
    pub memory: usize,
}

/// Moves each filter's memory one step left (dropping the oldest), the newest slot to `zero`.
fn shift_memory<T: Copy>(state: &mut [T], memory: usize, zero: T) {
    if memory == 0 {
        return;
    }
    for m in state.chunks_exact_mut(memory) {
        m.copy_within(1.., 0);
        m[memory - 1] = zero;
    }
}

/// Float SVDF (TFLite's `EvalFloatSVDF`): the feature filters' outputs enter the newest memory
/// slot of `state` (`[batch, filters, memory]`), the time weights (`[filters, memory]`) reduce
/// the memory, each unit sums its `rank` filters plus its bias, then the activation; the memory
/// then shifts. `scratch` holds `filters` values.
#[allow(clippy::too_many_arguments)]
pub fn svdf_f32(
    d: &SvdfDims,
    x: &[f32],
    weights_feature: &[f32],
    weights_time: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    state: &mut [f32],
    scratch: &mut [f32],
    out: &mut [f32],
) {
    let (nf, nm) = (d.filters, d.memory);
    if nm == 0 || state.len() < d.batch * nf * nm || scratch.len() < nf {
        return;
    }
    for b in 0..d.batch {
        let (Some(xb), Some(ob)) = (
            x.get(b * d.input..(b + 1) * d.input),
            out.get_mut(b * d.units..(b + 1) * d.units),
        ) else {
            return;
        };
        let sb = &mut state[b * nf * nm..(b + 1) * nf * nm];
        for (f, row) in weights_feature
            .chunks_exact(d.input.max(1))
            .take(nf)
            .enumerate()
        {
            sb[f * nm + nm - 1] = row.iter().zip(xb).map(|(w, v)| w * v).sum::<f32>();
        }
        for (f, s) in scratch.iter_mut().take(nf).enumerate() {
            let w = &weights_time[f * nm..(f + 1) * nm];
            *s = w
                .iter()
                .zip(&sb[f * nm..(f + 1) * nm])
                .map(|(a, b)| a * b)
                .sum();
        }
        for (u, o) in ob.iter_mut().enumerate() {
            let mut v = bias.map_or(0.0, |bb| bb[u]);
            for r in 0..d.rank {
                v += scratch[u * d.rank + r];
            }
            *o = act.apply(v);
        }
        shift_memory(sb, nm, 0.0);
    }
}

/// The requantization of an int8 SVDF: input to state (`scale_1`) and state to output
/// (`scale_2`) as multiplier and shift, and the zero points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SvdfQuant {
    pub scale_1: (i32, i32),
    pub scale_2: (i32, i32),
    pub input_zero_point: i32,
    pub output_zero_point: i32,
}

/// Int8 SVDF (TFLite's `EvalIntegerSVDF`): int8 input and feature weights, int16 time weights
/// and state, int32 bias; `scratch` holds `filters` values.
#[allow(clippy::too_many_arguments)]
pub fn svdf_i8(
    d: &SvdfDims,
    q: &SvdfQuant,
    x: &[i8],
    weights_feature: &[i8],
    weights_time: &[i16],
    bias: Option<&[i32]>,
    state: &mut [i16],
    scratch: &mut [i32],
    out: &mut [i8],
) {
    use crate::quant::multiply_by_quantized_multiplier as mbqm;
    let (nf, nm) = (d.filters, d.memory);
    if nm == 0 || state.len() < d.batch * nf * nm || scratch.len() < nf {
        return;
    }
    for b in 0..d.batch {
        let (Some(xb), Some(ob)) = (
            x.get(b * d.input..(b + 1) * d.input),
            out.get_mut(b * d.units..(b + 1) * d.units),
        ) else {
            return;
        };
        let sb = &mut state[b * nf * nm..(b + 1) * nf * nm];
        for (f, row) in weights_feature
            .chunks_exact(d.input.max(1))
            .take(nf)
            .enumerate()
        {
            let dot = row.iter().zip(xb).fold(0i32, |s, (&w, &v)| {
                s.wrapping_add(i32::from(w) * (i32::from(v) - q.input_zero_point))
            });
            let v = mbqm(dot, q.scale_1.0, q.scale_1.1).clamp(-32768, 32767);
            sb[f * nm + nm - 1] = v as i16;
        }
        for (f, s) in scratch.iter_mut().take(nf).enumerate() {
            let w = &weights_time[f * nm..(f + 1) * nm];
            *s = w
                .iter()
                .zip(&sb[f * nm..(f + 1) * nm])
                .fold(0i32, |acc, (&a, &b)| {
                    acc.wrapping_add(i32::from(a) * i32::from(b))
                });
        }
        for (u, o) in ob.iter_mut().enumerate() {
            let mut v = bias.map_or(0, |bb| bb[u]);
            for r in 0..d.rank {
                v = v.wrapping_add(scratch[u * d.rank + r]);
            }
            let v = mbqm(v, q.scale_2.0, q.scale_2.1).saturating_add(q.output_zero_point);
            *o = v.clamp(-128, 127) as i8;
        }
        shift_memory(sb, nm, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One unit, one input, no recurrence: the gates and state by hand.
    #[test]
    fn lstm_one_unit() {
        let d = LstmDims {
            batch: 1,
            time: 2,
            input: 1,
            cell: 1,
            output: 1,
            time_major: false,
        };
        let one: &[f32] = &[1.0];
        let zero: &[f32] = &[0.0];
        let w = LstmWeights {
            input_to: [Some(one); 4],
            recurrent_to: [Some(zero); 4],
            peephole: [None; 3],
            bias: [None; 4],
            projection: None,
            projection_bias: None,
        };
        let o = LstmOptions {
            activation: Activation::Tanh,
            cell_clip: 0.0,
            proj_clip: 0.0,
        };
        let (mut h, mut c, mut g, mut out) = ([0.0], [0.0], [0.0; 4], [0.0; 2]);
        lstm_f32(&d, &w, &o, &[0.5, 0.5], &mut h, &mut c, &mut g, &mut out);
        let s = sigmoid(0.5);
        let c1 = s * libm::tanhf(0.5);
        let c2 = s * c1 + s * libm::tanhf(0.5);
        assert!((out[0] - s * libm::tanhf(c1)).abs() < 1e-6);
        assert!((out[1] - s * libm::tanhf(c2)).abs() < 1e-6);
        assert!((c[0] - c2).abs() < 1e-6 && h[0] == out[1]);
    }
}
