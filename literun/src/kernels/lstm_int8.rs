//! The integer UNIDIRECTIONAL_SEQUENCE_LSTM as TFLite's converter writes it for full-integer
//! models ("8x8_16": int8 input, weights and output state, int32 biases, int16 gates and cell
//! state), computed as LiteRT's `lstm_eval.cc` `EvalInteger8x8_16` does, integers only: each
//! gate's two matrix products rescaled to the gate's scale and summed in int16 (plus the
//! peephole, then layer normalization when the model has them), gemmlowp's fixed-point logistic
//! and tanh, the cell update by power-of-two shifts, the hidden state rescaled to the output
//! state's int8 scale, or projected to it.

use super::sequence::LstmDims;
use crate::quant::{multiply_by_quantized_multiplier as mbqm, rounding_divide_by_pot};
use alloc::vec::Vec;

/// One gate's requantization: the input and the recurrent product each scaled to the gate's
/// scale (multiplier and shift), with LiteRT's effective biases (`bias - zero_point * row
/// sums`, one per cell) folded in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateQuant {
    pub input_scale: (i32, i32),
    pub recurrent_scale: (i32, i32),
    /// `[cell]`: the gate bias (unless layer-normalized) minus the input zero point times each
    /// input-weight row's sum.
    pub input_bias: Vec<i32>,
    /// `[cell]`: minus the output-state zero point times each recurrent-weight row's sum.
    pub recurrent_bias: Vec<i32>,
    /// The peephole's scale (cell state times its weight, to the gate's scale).
    pub peephole_scale: (i32, i32),
    /// Layer normalization: the coefficients' scale, the variance used when the gate's values
    /// are all equal, and the gate bias, added after normalizing.
    pub norm_scale: (i32, i32),
    pub norm_variance_guard: i32,
    pub norm_bias: Vec<i32>,
}

/// The projection of a projected LSTM: its scale, its bias with the hidden state's zero point
/// folded in, and the clip of the output state (0: none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectionQuant {
    pub scale: (i32, i32),
    pub bias: Vec<i32>,
    pub clip: i8,
}

/// The integer parameters of an 8x8_16 LSTM, computed when preparing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LstmQuant {
    /// Gates in TFLite's order (input, forget, cell, output); the input gate is `None` for a
    /// CIFG LSTM (input gate = 1 - forget gate).
    pub gates: [Option<GateQuant>; 4],
    /// The cell state's scale is `2^cell_shift` (-15..=-9).
    pub cell_shift: i32,
    /// The cell state's clip in its int16 units (0: none).
    pub cell_clip: i16,
    /// Q0.15 `output gate * tanh(cell)` to the output state (or, with a projection, to the
    /// hidden state): multiplier, shift and zero point.
    pub hidden_scale: (i32, i32),
    pub hidden_zero_point: i32,
    pub projection: Option<ProjectionQuant>,
    /// The output state's zero point (the projection's output offset).
    pub output_zero_point: i32,
}

/// The weights, gates in TFLite's order: int8 `[cell, input]` and `[cell, output]` (the input
/// gate's `None` for a CIFG LSTM), int16 peepholes `[cell]` (input, forget, output) and
/// layer-normalization coefficients `[cell]`, the int8 projection `[output, cell]`.
#[derive(Clone, Copy, Debug)]
pub struct LstmWeightsI8<'a> {
    pub input_to: [Option<&'a [i8]>; 4],
    pub recurrent_to: [Option<&'a [i8]>; 4],
    pub peephole: [Option<&'a [i16]>; 3],
    pub layer_norm: [Option<&'a [i16]>; 4],
    pub projection: Option<&'a [i8]>,
}

/// `out[r] = sat(out[r] + MBQM(bias[r] + m[r, :] . v, scale) + offset)` (LiteRT's
/// `MatrixBatchVectorMultiplyAccumulate` to int16 or int8).
fn product_acc<T: Copy + Into<i32> + TryFrom<i32>>(
    m: &[i8],
    v: &[i8],
    bias: &[i32],
    scale: (i32, i32),
    offset: i32,
    out: &mut [T],
    (lo, hi): (i32, i32),
) {
    let n = v.len();
    if n == 0 {
        return;
    }
    for ((o, row), &b) in out.iter_mut().zip(m.chunks_exact(n)).zip(bias) {
        let dot = row.iter().zip(v).fold(b, |acc, (&w, &x)| {
            acc.wrapping_add(i32::from(w) * i32::from(x))
        });
        let acc = mbqm(dot, scale.0, scale.1)
            .saturating_add(offset)
            .saturating_add((*o).into());
        if let Ok(v) = T::try_from(acc.clamp(lo, hi)) {
            *o = v;
        }
    }
}

const I16_RANGE: (i32, i32) = (-32768, 32767);
const I8_RANGE: (i32, i32) = (-128, 127);

/// LiteRT's `ApplyLayerNorm` of one gate row (integer mean and variance, the inverse standard
/// deviation in fixed point, then coefficient, bias and rescaling), in place.
fn layer_norm(gate: &mut [i16], coefficients: &[i16], q: &GateQuant) {
    const TWO_POW_20: i64 = 1 << 20;
    let n = gate.len() as i64;
    if n == 0 {
        return;
    }
    let (sum, sum_sq) = gate.iter().fold((0i64, 0i64), |(s, sq), &v| {
        let v = i32::from(v);
        (s + i64::from(v), sq + i64::from(v * v))
    });
    let mean = (sum * 1024 / n) as i32;
    let variance = sum_sq * (TWO_POW_20 / n) - i64::from(mean) * i64::from(mean);
    let mut variance = (variance / TWO_POW_20) as i32;
    if variance < 1 {
        variance = q.norm_variance_guard;
    }
    let (inv_a, inv_b) = super::elementwise::inv_sqrt_quantized_multiplier_exp(variance);
    for ((g, &w), &b) in gate.iter_mut().zip(coefficients).zip(&q.norm_bias) {
        let shifted = (1024 * i32::from(*g)).wrapping_sub(mean);
        let rescaled = mbqm(shifted, inv_a, inv_b);
        let v = i64::from(rescaled.wrapping_mul(i32::from(w)).wrapping_add(b));
        let v = (if v > 0 { v + 512 } else { v - 512 }) / 1024;
        let v = mbqm(v as i32, q.norm_scale.0, q.norm_scale.1 + 12);
        *g = v.clamp(-32768, 32767) as i16;
    }
}

/// One gate of one step (LiteRT's `CalculateLstmGateInteger8x8_16`): the products, the
/// peephole on `cell`, layer normalization, then the logistic (or tanh for the cell gate).
#[allow(clippy::too_many_arguments)]
fn gate(
    g: usize,
    q: &GateQuant,
    w: &LstmWeightsI8<'_>,
    x: &[i8],
    h: &[i8],
    cell: &[i16],
    out: &mut [i16],
) {
    out.fill(0);
    if let (Some(wi), Some(wr)) = (w.input_to[g], w.recurrent_to[g]) {
        product_acc(wi, x, &q.input_bias, q.input_scale, 0, out, I16_RANGE);
        product_acc(
            wr,
            h,
            &q.recurrent_bias,
            q.recurrent_scale,
            0,
            out,
            I16_RANGE,
        );
    }
    let peephole = match g {
        0 => w.peephole[0],
        1 => w.peephole[1],
        3 => w.peephole[2],
        _ => None,
    };
    if let Some(p) = peephole {
        for ((o, &pw), &c) in out.iter_mut().zip(p).zip(cell) {
            let v = mbqm(
                i32::from(pw) * i32::from(c),
                q.peephole_scale.0,
                q.peephole_scale.1,
            );
            *o = v.saturating_add(i32::from(*o)).clamp(-32768, 32767) as i16;
        }
    }
    if let Some(coefficients) = w.layer_norm[g] {
        layer_norm(out, coefficients, q);
    }
    for v in out.iter_mut() {
        // The cell gate's tanh and the others' logistic, both from Q3.12.
        *v = if g == 2 {
            fixed16::tanh(*v, 3)
        } else {
            fixed16::logistic(*v, 3)
        };
    }
}

/// Runs the integer LSTM over `x` into `out`, carrying the output state `h` (`[batch, output]`)
/// and the cell state `c` (`[batch, cell]`) from step to step; `gates` is scratch of
/// `4 * cell` values, `hidden` of `cell` values with a projection. Does nothing when a buffer
/// is too short (the operator checks sizes when preparing).
#[allow(clippy::too_many_arguments)]
pub fn lstm_i8(
    d: &LstmDims,
    w: &LstmWeightsI8<'_>,
    q: &LstmQuant,
    x: &[i8],
    h: &mut [i8],
    c: &mut [i16],
    gates: &mut [i16],
    hidden: &mut [i8],
    out: &mut [i8],
) {
    let (nc, no, ni) = (d.cell, d.output, d.input);
    let projected = q.projection.is_some() && w.projection.is_some();
    if gates.len() < 4 * nc
        || h.len() < d.batch * no
        || c.len() < d.batch * nc
        || (projected && hidden.len() < nc)
        || (!projected && nc != no)
    {
        return;
    }
    let product_shift = 30 + q.cell_shift;
    let tanh_bits = 15 + q.cell_shift;
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
            let (ig, rest) = gates.split_at_mut(nc);
            let (fg, rest) = rest.split_at_mut(nc);
            let (cg, rest) = rest.split_at_mut(nc);
            let og = &mut rest[..nc];
            for (g, out) in [(0, &mut *ig), (1, &mut *fg), (2, &mut *cg)] {
                if let Some(gq) = &q.gates[g] {
                    gate(g, gq, w, xt, hb, cb, out);
                }
            }
            let cifg = q.gates[0].is_none();
            // LiteRT's `UpdateLstmCellInteger`: f * c in Q0.15 times the cell's scale, plus
            // i * g shifted to the cell's scale, saturated, then clipped.
            for k in 0..nc {
                let kept = rounding_divide_by_pot(i32::from(fg[k]) * i32::from(cb[k]), 15) as i16;
                let i = if cifg {
                    32767i16.wrapping_sub(fg[k])
                } else {
                    ig[k]
                };
                let new =
                    rounding_divide_by_pot(i32::from(i) * i32::from(cg[k]), product_shift) as i16;
                let mut cn = (i32::from(kept) + i32::from(new)).clamp(-32768, 32767) as i16;
                if q.cell_clip > 0 {
                    cn = cn.clamp(-q.cell_clip, q.cell_clip);
                }
                cb[k] = cn;
            }
            // The output gate sees the new cell state (its peephole).
            if let Some(gq) = &q.gates[3] {
                gate(3, gq, w, xt, hb, cb, og);
            }
            let hidden_of = |k: usize, zero_point: i32| -> i8 {
                let v = i32::from(og[k]) * i32::from(fixed16::tanh(cb[k], tanh_bits));
                let v = mbqm(v, q.hidden_scale.0, q.hidden_scale.1).saturating_add(zero_point);
                v.clamp(-128, 127) as i8
            };
            match (&q.projection, w.projection) {
                (Some(p), Some(pw)) => {
                    // As LiteRT: the hidden state offset by minus its zero point (the
                    // projection's bias adds it back), then projected from zero.
                    for (k, v) in hidden.iter_mut().take(nc).enumerate() {
                        *v = hidden_of(k, -q.hidden_zero_point);
                    }
                    hb.fill(0);
                    let scale = p.scale;
                    let zp = q.output_zero_point;
                    product_acc(pw, &hidden[..nc], &p.bias, scale, zp, hb, I8_RANGE);
                    if p.clip > 0 {
                        for v in hb.iter_mut() {
                            *v = (*v).clamp(-p.clip, p.clip);
                        }
                    }
                }
                _ => {
                    for (k, v) in hb.iter_mut().enumerate() {
                        *v = hidden_of(k, q.hidden_zero_point);
                    }
                }
            }
            ot.copy_from_slice(hb);
        }
    }
}

/// gemmlowp's fixed-point functions on int16 (`fixedpoint.h`, scalar form), bit for bit: a raw
/// `i16` with `int_bits` integer bits holds `raw / 2^(15 - int_bits)`; results are Q0.15. The
/// 16-bit arithmetic wraps where gemmlowp's does.
pub mod fixed16 {
    use crate::quant::{
        rounding_divide_by_pot_i16 as rdbp, saturating_rounding_doubling_high_mul_i16 as mul,
    };

    /// gemmlowp's int32 constant rescaled to int16 (`RescaleConstantInitializer`).
    const fn constant(raw32: i32) -> i16 {
        // rounding_divide_by_pot(raw32, 16), in a const context.
        let mask = (1 << 16) - 1;
        let remainder = raw32 & mask;
        let threshold = (mask >> 1) + if raw32 < 0 { 1 } else { 0 };
        ((raw32 >> 16) + if remainder > threshold { 1 } else { 0 }) as i16
    }

    const ONE_Q0: i16 = i16::MAX;

    /// `SaturatingRoundingMultiplyByPOT`: `x * 2^exponent`, saturating left shifts, rounding
    /// right shifts.
    fn mul_pot(x: i16, exponent: i32) -> i16 {
        if exponent > 0 {
            let wide = i32::from(x) << exponent.min(16);
            wide.clamp(-32768, 32767) as i16
        } else {
            rdbp(x, -exponent)
        }
    }

    fn saturating_add(a: i16, b: i16) -> i16 {
        a.saturating_add(b)
    }

    fn rounding_half_sum(a: i16, b: i16) -> i16 {
        let sum = i32::from(a) + i32::from(b);
        let sign = if sum >= 0 { 1 } else { -1 };
        ((sum + sign) / 2) as i16
    }

    /// exp(a) for a in [-1/4, 0), Q0.15.
    fn exp_on_interval_between_negative_one_quarter_and_0_excl(a: i16) -> i16 {
        let constant_term = constant(1_895_147_668);
        let one_third = constant(715_827_883);
        let x = a.wrapping_add(1 << 12);
        let x2 = mul(x, x);
        let x3 = mul(x2, x);
        let x4 = mul(x2, x2);
        let x4_over_4 = mul_pot(x4, -2);
        let poly = mul_pot(
            mul(x4_over_4.wrapping_add(x3), one_third).wrapping_add(x2),
            -1,
        );
        saturating_add(constant_term, mul(constant_term, x.wrapping_add(poly)))
    }

    /// exp(a) for a <= 0 with `int_bits` integer bits, Q0.15.
    fn exp_on_negative_values(a: i16, int_bits: i32) -> i16 {
        let frac_bits = 15 - int_bits;
        let one_quarter: i16 = 1 << (frac_bits - 2);
        let mask = one_quarter - 1;
        let a_mod_quarter_minus_one_quarter = (a & mask).wrapping_sub(one_quarter);
        let mut result = exp_on_interval_between_negative_one_quarter_and_0_excl(mul_pot(
            a_mod_quarter_minus_one_quarter,
            int_bits,
        ));
        let remainder = a_mod_quarter_minus_one_quarter.wrapping_sub(a);
        for (exponent, multiplier) in [
            (-2, 1_672_461_947), // exp(-1/4)
            (-1, 1_302_514_674), // exp(-1/2)
            (0, 790_015_084),    // exp(-1)
            (1, 290_630_308),    // exp(-2)
            (2, 39_332_535),     // exp(-4)
            (3, 720_401),        // exp(-8)
            (4, 242),            // exp(-16)
        ] {
            if int_bits > exponent && remainder & ((1i32 << (frac_bits + exponent)) as i16) != 0 {
                result = mul(result, constant(multiplier));
            }
        }
        if int_bits > 5 && a < constant(-(1 << (36 - int_bits))) {
            result = 0;
        }
        if a == 0 {
            result = ONE_Q0;
        }
        result
    }

    /// The Newton-Raphson division both 1/(1+x) and (1-x)/(1+x) use, for x in [0, 1]: Q2.13.
    fn reciprocal_iterations(half_denominator: i16) -> i16 {
        let one_q2: i16 = 1 << 13;
        let mut x =
            constant(1_515_870_810).wrapping_add(mul(half_denominator, constant(-1_010_580_540)));
        for _ in 0..3 {
            let one_minus = one_q2.wrapping_sub(mul(half_denominator, x));
            x = x.wrapping_add(mul_pot(mul(x, one_minus), 2));
        }
        x
    }

    /// 1 / (1 + a) for a in [0, 1], Q0.15.
    fn one_over_one_plus_x_for_x_in_0_1(a: i16) -> i16 {
        mul_pot(reciprocal_iterations(rounding_half_sum(a, ONE_Q0)), 1)
    }

    /// (1 - a) / (1 + a) for a in [0, 1], Q0.15.
    fn one_minus_x_over_one_plus_x_for_x_in_0_1(a: i16) -> i16 {
        let x = reciprocal_iterations(rounding_half_sum(a, ONE_Q0));
        mul_pot(x.wrapping_sub(1 << 13), 2)
    }

    /// gemmlowp `logistic` of `a` with `int_bits` integer bits (0..=12), Q0.15.
    pub fn logistic(a: i16, int_bits: i32) -> i16 {
        if a == 0 {
            return constant(1 << 30);
        }
        let abs = if a > 0 { a } else { a.wrapping_neg() };
        let positive =
            one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(abs.wrapping_neg(), int_bits));
        if a > 0 {
            positive
        } else {
            ONE_Q0.wrapping_sub(positive)
        }
    }

    /// gemmlowp `tanh` of `a` with `int_bits` integer bits (0..=11), Q0.15.
    pub fn tanh(a: i16, int_bits: i32) -> i16 {
        if a == 0 {
            return 0;
        }
        let n = if a < 0 { a } else { a.wrapping_neg() };
        let t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, int_bits + 1));
        if a < 0 {
            t.wrapping_neg()
        } else {
            t
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixed16::{logistic, tanh};

    /// The fixed-point functions stay within 4e-4 of the real ones (gemmlowp's own error: up
    /// to 1.9e-4 for logistic and 3.7e-4 for tanh) over the whole int16 range, for every
    /// integer-bit count the LSTM uses.
    #[test]
    fn logistic_and_tanh_follow_the_real_functions() {
        for bits in 0..=6 {
            let step = f64::from(1u32 << (15 - bits));
            for raw in i16::MIN..=i16::MAX {
                let x = f64::from(raw) / step;
                let s = f64::from(logistic(raw, bits)) / 32768.0;
                let t = f64::from(tanh(raw, bits)) / 32768.0;
                assert!(
                    (s - 1.0 / (1.0 + (-x).exp())).abs() < 4e-4,
                    "logistic {raw} {bits}"
                );
                assert!((t - x.tanh()).abs() < 4e-4, "tanh {raw} {bits}: {t}");
            }
        }
    }

    /// Bit for bit gemmlowp's: the FNV-1a hash of every (logistic, tanh) pair, as little-endian
    /// int16s, for integer bits 0 to 6 and raw inputs -32768 to 32767 in order, equals the hash
    /// of what gemmlowp's `fixedpoint.h` (scalar int16) computes for them.
    #[test]
    fn logistic_and_tanh_are_gemmlowps() {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for bits in 0..=6 {
            for raw in i16::MIN..=i16::MAX {
                let pair = [logistic(raw, bits), tanh(raw, bits)];
                for b in pair.iter().flat_map(|v| v.to_le_bytes()) {
                    h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
                }
            }
        }
        assert_eq!(h, 0x4dbc_57f4_cd9a_217f);
    }

    #[test]
    fn zero_maps_to_one_half_and_zero() {
        assert_eq!(logistic(0, 3), 16384);
        assert_eq!(tanh(0, 3), 0);
    }
}
