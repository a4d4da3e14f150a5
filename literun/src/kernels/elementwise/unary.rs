//! Float and int32 unary operators (ABS, EXP, LOGISTIC, TANH, ...).

use super::*;

/// Unary float operators.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    Abs,
    Neg,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Relu,
    Relu6,
    ReluN1To1,
    /// `min(max(x, 0), 1)` (TensorFlow's converter writes it for a clip to [0, 1]).
    Relu0To1,
    Logistic,
    Tanh,
    HardSwish,
    /// `approximate` selects the tanh form.
    Gelu {
        approximate: bool,
    },
    LeakyRelu {
        alpha: f32,
    },
    Floor,
    Ceil,
    /// To the nearest integer, halves to even (TFLite's ROUND).
    Round,
    Square,
    Sin,
    Cos,
    /// `x < 0 ? e^x - 1 : x` (`expm1`, as TFLite's float kernel).
    Elu,
}

/// The float function of a unary operator (TFLite reference formulas).
#[inline]
pub fn unary_fn(op: UnaryOp, x: f32) -> f32 {
    match op {
        UnaryOp::Abs => x.abs(),
        UnaryOp::Neg => -x,
        UnaryOp::Exp => expf(x),
        UnaryOp::Log => logf(x),
        UnaryOp::Sqrt => sqrtf(x),
        UnaryOp::Rsqrt => 1.0 / sqrtf(x),
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Relu6 => x.clamp(0.0, 6.0),
        UnaryOp::ReluN1To1 => x.clamp(-1.0, 1.0),
        UnaryOp::Relu0To1 => x.clamp(0.0, 1.0),
        UnaryOp::Logistic => 1.0 / (1.0 + expf(-x)),
        UnaryOp::Tanh => tanhf(x),
        UnaryOp::HardSwish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
        UnaryOp::Gelu { approximate: false } => {
            0.5 * x * (1.0 + erff(x * core::f32::consts::FRAC_1_SQRT_2))
        }
        UnaryOp::Gelu { approximate: true } => {
            // sqrt(2 / pi)
            const K: f32 = 0.797_884_6;
            0.5 * x * (1.0 + tanhf(K * (x + 0.044715 * x * x * x)))
        }
        UnaryOp::LeakyRelu { alpha } => {
            if x > 0.0 {
                x
            } else {
                x * alpha
            }
        }
        UnaryOp::Floor => floorf(x),
        UnaryOp::Ceil => ceilf(x),
        UnaryOp::Round => round_half_even(x),
        UnaryOp::Square => x * x,
        UnaryOp::Sin => sinf(x),
        UnaryOp::Cos => cosf(x),
        UnaryOp::Elu => {
            if x < 0.0 {
                expm1f(x)
            } else {
                x
            }
        }
    }
}

/// TFLite's `RoundToNearest`: the nearer integer, the even one of two equally near.
#[inline]
fn round_half_even(x: f32) -> f32 {
    let f = floorf(x);
    let d = x - f;
    if d < 0.5 || (d == 0.5 && floorf(f * 0.5) * 2.0 == f) {
        f
    } else {
        f + 1.0
    }
}

/// `out[i] = op(input[i])`: one loop per operator, so the simple ones vectorize, and EXP,
/// LOGISTIC and TANH with [`exp_fast`] (within a few ulp of [`unary_fn`]'s) rather than a
/// math-library call per element. [`unary_fn`] stays the reference (the int8 tables use it).
/// (Not inlined into the interpreter's big dispatch, where the loops' closures would not be;
/// `simd::unary_f32` compiles the same loops for wider vectors.)
#[inline(never)]
pub fn unary_f32(op: UnaryOp, input: &[f32], out: &mut [f32]) {
    unary_loops(op, input, out)
}

/// The loops of [`unary_f32`], inlined wherever they are compiled.
#[inline(always)]
pub(crate) fn unary_loops(op: UnaryOp, input: &[f32], out: &mut [f32]) {
    #[inline(always)]
    fn map(input: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
        for (o, &x) in out.iter_mut().zip(input) {
            *o = f(x);
        }
    }
    match op {
        UnaryOp::Abs => map(input, out, |x| x.abs()),
        UnaryOp::Neg => map(input, out, |x| -x),
        UnaryOp::Relu => map(input, out, |x| x.max(0.0)),
        UnaryOp::Relu6 => map(input, out, |x| x.clamp(0.0, 6.0)),
        UnaryOp::ReluN1To1 => map(input, out, |x| x.clamp(-1.0, 1.0)),
        UnaryOp::Relu0To1 => map(input, out, |x| x.clamp(0.0, 1.0)),
        UnaryOp::Square => map(input, out, |x| x * x),
        UnaryOp::HardSwish => map(input, out, |x| unary_fn(UnaryOp::HardSwish, x)),
        UnaryOp::LeakyRelu { alpha } => map(input, out, |x| if x > 0.0 { x } else { x * alpha }),
        UnaryOp::Exp => map(input, out, exp_fast),
        UnaryOp::Logistic => map(input, out, logistic_fast),
        UnaryOp::Tanh => map(input, out, tanh_fast),
        _ => map(input, out, |x| unary_fn(op, x)),
    }
}

/// Float GELU with the vectorizing [`gelu_fast`] (exact form, whose doc states the float GELU
/// accuracy contract) or [`gelu_tanh_fast`] (`approximate`), where [`unary_f32`] keeps
/// TFLite's reference formula (whose `1 + erf` cancels for negative inputs; kept for outputs
/// that are requantized, which must round as LiteRT's reference kernels do). Not inlined, as
/// [`unary_f32`]; `simd::gelu_f32` computes the same formulas with fused multiply-adds in
/// wider vectors.
#[inline(never)]
pub fn gelu_f32(approximate: bool, input: &[f32], out: &mut [f32]) {
    gelu_loops(approximate, input, out)
}

/// The loops of [`gelu_f32`], inlined wherever they are compiled.
#[inline(always)]
pub(crate) fn gelu_loops(approximate: bool, input: &[f32], out: &mut [f32]) {
    // (Two loops, not one over a chosen function pointer, which would not inline.)
    if approximate {
        for (o, &x) in out.iter_mut().zip(input) {
            *o = gelu_tanh_fast(x);
        }
    } else {
        for (o, &x) in out.iter_mut().zip(input) {
            *o = gelu_fast(x);
        }
    }
}

/// Int32 unary operators available in TFLite (ABS, NEG, SQUARE).
pub fn unary_i32(op: UnaryOp, input: &[i32], out: &mut [i32]) -> bool {
    let f: fn(i32) -> i32 = match op {
        UnaryOp::Abs => i32::wrapping_abs,
        UnaryOp::Neg => i32::wrapping_neg,
        UnaryOp::Square => |x| x.wrapping_mul(x),
        UnaryOp::Relu => |x| x.max(0),
        UnaryOp::Relu6 => |x| x.clamp(0, 6),
        UnaryOp::ReluN1To1 => |x| x.clamp(-1, 1),
        _ => return false,
    };
    for (o, &x) in out.iter_mut().zip(input) {
        *o = f(x);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{vec, vec::Vec};

    #[test]
    fn unaries() {
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(close(unary_fn(UnaryOp::Logistic, 0.0), 0.5));
        // The kernel's loops agree with the reference formulas.
        let x: Vec<f32> = (-4000..4000).map(|i| i as f32 * 0.0123).collect();
        let mut got = vec![0.0; x.len()];
        for op in [
            UnaryOp::Abs,
            UnaryOp::Neg,
            UnaryOp::Relu,
            UnaryOp::Relu6,
            UnaryOp::ReluN1To1,
            UnaryOp::Relu0To1,
            UnaryOp::Square,
            UnaryOp::HardSwish,
            UnaryOp::LeakyRelu { alpha: 0.2 },
            UnaryOp::Exp,
            UnaryOp::Logistic,
            UnaryOp::Tanh,
            UnaryOp::Floor,
            UnaryOp::Ceil,
            UnaryOp::Round,
            UnaryOp::Sin,
            UnaryOp::Cos,
            UnaryOp::Elu,
        ] {
            unary_f32(op, &x, &mut got);
            for (&v, &g) in x.iter().zip(&got) {
                let want = unary_fn(op, v);
                assert!(
                    (g - want).abs() <= 4.0 * f32::EPSILON * want.abs(),
                    "{op:?}({v}) = {g}, want {want}"
                );
            }
        }
        assert!(close(unary_fn(UnaryOp::Rsqrt, 4.0), 0.5));
        for (x, ceil, round) in [
            (-2.5f32, -2.0, -2.0),
            (-1.5, -1.0, -2.0),
            (-0.4, -0.0, -0.0),
            (0.5, 1.0, 0.0),
            (1.5, 2.0, 2.0),
            (2.5, 3.0, 2.0),
            (2.6, 3.0, 3.0),
            (7.0, 7.0, 7.0),
        ] {
            assert_eq!(unary_fn(UnaryOp::Ceil, x), ceil, "ceil({x})");
            assert_eq!(unary_fn(UnaryOp::Round, x), round, "round({x})");
        }
        assert!(close(unary_fn(UnaryOp::HardSwish, 1.0), 4.0 / 6.0));
        assert_eq!(unary_fn(UnaryOp::HardSwish, -4.0), 0.0);
        assert_eq!(unary_fn(UnaryOp::HardSwish, 4.0), 4.0);
        assert!(close(
            unary_fn(UnaryOp::Gelu { approximate: false }, 1.0),
            0.841_344_7
        ));
        assert!(close(
            unary_fn(UnaryOp::Gelu { approximate: true }, 1.0),
            0.841_191_97
        ));
        assert_eq!(unary_fn(UnaryOp::LeakyRelu { alpha: 0.1 }, -2.0), -0.2);
        // The vectorizing GELU agrees with the reference formula: relatively where that
        // keeps its digits, and to the rounding of `1 + erf` (2^-24 of |x| / 2) below.
        for approximate in [false, true] {
            gelu_f32(approximate, &x, &mut got);
            for (&v, &g) in x.iter().zip(&got) {
                let want = unary_fn(UnaryOp::Gelu { approximate }, v);
                let tol = 1e-5 * want.abs() + 0.5 * v.abs() * f32::EPSILON;
                assert!((g - want).abs() <= tol, "gelu({v}) = {g}, want {want}");
            }
        }
        assert_eq!(unary_fn(UnaryOp::Relu6, 7.0), 6.0);
        assert!(close(unary_fn(UnaryOp::Sin, 1.0), 0.841_470_96));
        assert!(close(unary_fn(UnaryOp::Cos, 1.0), 0.540_302_3));
        assert!(close(unary_fn(UnaryOp::Elu, -1.0), -0.632_120_56));
        assert_eq!(unary_fn(UnaryOp::Elu, 2.5), 2.5);
        assert_eq!(unary_fn(UnaryOp::ReluN1To1, -3.0), -1.0);
        assert!(close(unary_fn(UnaryOp::Exp, 1.0), core::f32::consts::E));
        assert!(close(unary_fn(UnaryOp::Log, core::f32::consts::E), 1.0));
        let mut o = [0; 3];
        assert!(unary_i32(UnaryOp::Abs, &[-1, 2, -3], &mut o));
        assert_eq!(o, [1, 2, 3]);
    }
}
