//! The integer UNIDIRECTIONAL_SEQUENCE_LSTM as TFLite's converter writes it for full-integer
//! models ("8x8_16": int8 input, weights and output state, int32 biases, int16 gates and cell
//! state), computed as LiteRT's `lstm_eval.cc` `EvalInteger8x8_16` does, integers only: each
//! gate's two matrix products rescaled to Q3.12 and summed in int16, gemmlowp's fixed-point
//! logistic and tanh, the cell update by power-of-two shifts, the hidden state rescaled to the
//! output state's int8 scale.

use super::sequence::LstmDims;
use crate::quant::{multiply_by_quantized_multiplier as mbqm, rounding_divide_by_pot};

/// One gate's requantization: the input and the recurrent product each scaled to the gate's
/// Q3.12 (multiplier and shift), with LiteRT's effective biases (`bias - zero_point * row
/// sums`, one per cell) folded in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateQuant {
    pub input_scale: (i32, i32),
    pub recurrent_scale: (i32, i32),
    /// `[cell]`: the gate bias minus the input zero point times each input-weight row's sum.
    pub input_bias: alloc::vec::Vec<i32>,
    /// `[cell]`: minus the output-state zero point times each recurrent-weight row's sum.
    pub recurrent_bias: alloc::vec::Vec<i32>,
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
    /// Q0.15 `output gate * tanh(cell)` to the output state: multiplier, shift and zero point.
    pub hidden_scale: (i32, i32),
    pub hidden_zero_point: i32,
}

/// The int8 weights, `[cell, input]` and `[cell, output]` per gate (the input gate's `None` for
/// a CIFG LSTM).
#[derive(Clone, Copy, Debug)]
pub struct LstmWeightsI8<'a> {
    pub input_to: [Option<&'a [i8]>; 4],
    pub recurrent_to: [Option<&'a [i8]>; 4],
}

/// `gate[r] = sat16(gate[r] + MBQM(bias[r] + m[r, :] . v, scale))` (LiteRT's
/// `MatrixBatchVectorMultiplyAccumulate` to int16, zero output offset).
fn gate_product_acc(m: &[i8], v: &[i8], bias: &[i32], scale: (i32, i32), gate: &mut [i16]) {
    let n = v.len();
    if n == 0 {
        return;
    }
    for ((g, row), &b) in gate.iter_mut().zip(m.chunks_exact(n)).zip(bias) {
        let dot = row.iter().zip(v).fold(b, |acc, (&w, &x)| {
            acc.wrapping_add(i32::from(w) * i32::from(x))
        });
        let acc = mbqm(dot, scale.0, scale.1).saturating_add(i32::from(*g));
        *g = acc.clamp(-32768, 32767) as i16;
    }
}

/// Runs the integer LSTM over `x` into `out`, carrying the output state `h` (`[batch, output]`)
/// and the cell state `c` (`[batch, cell]`) from step to step; `gates` is scratch of
/// `4 * cell` values. Does nothing when a buffer is too short (the operator checks sizes when
/// preparing).
#[allow(clippy::too_many_arguments)]
pub fn lstm_i8(
    d: &LstmDims,
    w: &LstmWeightsI8<'_>,
    q: &LstmQuant,
    x: &[i8],
    h: &mut [i8],
    c: &mut [i16],
    gates: &mut [i16],
    out: &mut [i8],
) {
    let (nc, no, ni) = (d.cell, d.output, d.input);
    if nc != no || gates.len() < 4 * nc || h.len() < d.batch * no || c.len() < d.batch * nc {
        return;
    }
    let product_shift = 30 + q.cell_shift;
    let tanh_bits = 15 + q.cell_shift;
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
            for (g, gate) in gates.chunks_exact_mut(nc).take(4).enumerate() {
                gate.fill(0);
                let (Some(gq), Some(wi), Some(wr)) =
                    (&q.gates[g], w.input_to[g], w.recurrent_to[g])
                else {
                    continue;
                };
                gate_product_acc(wi, xt, &gq.input_bias, gq.input_scale, gate);
                gate_product_acc(wr, hb, &gq.recurrent_bias, gq.recurrent_scale, gate);
                for v in gate.iter_mut() {
                    // The cell gate's tanh and the others' logistic, both from Q3.12.
                    *v = if g == 2 {
                        fixed16::tanh(*v, 3)
                    } else {
                        fixed16::logistic(*v, 3)
                    };
                }
            }
            let (ig, rest) = gates.split_at_mut(nc);
            let (fg, rest) = rest.split_at_mut(nc);
            let (cg, og) = rest.split_at_mut(nc);
            let cifg = q.gates[0].is_none();
            for k in 0..nc {
                // LiteRT's `UpdateLstmCellInteger`: f * c in Q0.15 times the cell's scale, plus
                // i * g shifted to the cell's scale, saturated, then clipped.
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
                let hv = i32::from(og[k]) * i32::from(fixed16::tanh(cn, tanh_bits));
                let hv = mbqm(hv, q.hidden_scale.0, q.hidden_scale.1)
                    .saturating_add(q.hidden_zero_point);
                hb[k] = hv.clamp(-128, 127) as i8;
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
