//! Sequence kernels with state carried across time steps (and across invocations by the
//! operator): UNIDIRECTIONAL_SEQUENCE_LSTM (float), as TFLite's reference kernel computes it.

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
            let row = if d.time_major {
                t * d.batch + b
            } else {
                b * d.time + t
            };
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
