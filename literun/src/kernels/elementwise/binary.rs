//! Float and int32 binary operators (ADD, SUB, MUL, DIV, ...) with broadcasting and a fused
//! activation.

use super::*;

/// Binary float operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    SquaredDifference,
    /// `x >= 0 ? x : x * alpha` with `b` = alpha.
    Prelu,
    /// `floor(x / y)`.
    FloorDiv,
    /// `x - floor(x / y) * y` with the sign of `y`, from the truncated remainder as TFLite.
    FloorMod,
}

/// TFLite's float FLOOR_MOD: the truncated remainder (`fmod`), moved by `y` when its sign
/// differs from `y`'s.
#[inline]
fn floor_mod_f32(x: f32, y: f32) -> f32 {
    let r = x % y;
    if r != 0.0 && ((y < 0.0) != (r < 0.0)) {
        r + y
    } else {
        r
    }
}

/// TFLite's integer FLOOR_DIV (through double, floored) and FLOOR_MOD; `y` is not 0 (checked
/// before: TFLite fails the invocation).
#[inline]
fn floor_div_i32(x: i32, y: i32) -> i32 {
    floorf64(f64::from(x) / f64::from(y)) as i32
}

#[inline]
fn floor_mod_i32(x: i32, y: i32) -> i32 {
    let r = x.wrapping_rem(y);
    if r != 0 && ((y < 0) != (r < 0)) {
        r.wrapping_add(y)
    } else {
        r
    }
}

/// `floor` of an f64 whose magnitude is below 2^53 or not an integer's concern (the quotient of
/// two i32 values), without the math library.
#[inline]
fn floorf64(v: f64) -> f64 {
    let t = v as i64 as f64;
    if t > v {
        t - 1.0
    } else {
        t
    }
}

/// `out = act(a op b)` over `bc`.
pub fn binary_f32(
    op: BinaryOp,
    bc: &Broadcast,
    a: &[f32],
    b: &[f32],
    act: Activation,
    out: &mut [f32],
) {
    macro_rules! go {
        ($f:expr) => {
            if act == Activation::None {
                bc.apply(a, b, out, $f)
            } else {
                bc.apply(a, b, out, |x, y| act.apply($f(x, y)))
            }
        };
    }
    match op {
        BinaryOp::Add => go!(|x: f32, y: f32| x + y),
        BinaryOp::Sub => go!(|x: f32, y: f32| x - y),
        BinaryOp::Mul => go!(|x: f32, y: f32| x * y),
        BinaryOp::Div => go!(|x: f32, y: f32| x / y),
        BinaryOp::Pow => go!(powf),
        BinaryOp::Maximum => go!(|x: f32, y: f32| if x > y { x } else { y }),
        BinaryOp::Minimum => go!(|x: f32, y: f32| if x < y { x } else { y }),
        BinaryOp::SquaredDifference => go!(|x: f32, y: f32| (x - y) * (x - y)),
        BinaryOp::Prelu => go!(|x: f32, y: f32| if x >= 0.0 { x } else { x * y }),
        BinaryOp::FloorDiv => go!(|x: f32, y: f32| floorf(x / y)),
        BinaryOp::FloorMod => go!(floor_mod_f32),
    }
}

/// The clamp range of a fused activation for integer outputs (TFLite's
/// `CalculateActivationRange`); `None` for TANH, which has no integer form.
pub fn activation_range_i32(act: Activation) -> Option<(i32, i32)> {
    Some(match act {
        Activation::None => (i32::MIN, i32::MAX),
        Activation::Relu => (0, i32::MAX),
        Activation::Relu6 => (0, 6),
        Activation::ReluN1To1 => (-1, 1),
        Activation::Tanh => return None,
    })
}

/// `out = clamp(a op b)` for int32 (ADD, SUB, MUL wrap like TFLite's two's-complement
/// arithmetic; MAXIMUM, MINIMUM, SQUARED_DIFFERENCE, FLOOR_DIV, FLOOR_MOD too). `Err(())` for an
/// operator with no int32 form here, and for FLOOR_DIV / FLOOR_MOD by zero (nothing written).
#[allow(clippy::result_unit_err)]
pub fn binary_i32(
    op: BinaryOp,
    bc: &Broadcast,
    a: &[i32],
    b: &[i32],
    range: (i32, i32),
    out: &mut [i32],
) -> Result<(), ()> {
    let (lo, hi) = range;
    match op {
        BinaryOp::Add => bc.apply(a, b, out, |x, y| x.wrapping_add(y).clamp(lo, hi)),
        BinaryOp::Sub => bc.apply(a, b, out, |x, y| x.wrapping_sub(y).clamp(lo, hi)),
        BinaryOp::Mul => bc.apply(a, b, out, |x, y| x.wrapping_mul(y).clamp(lo, hi)),
        BinaryOp::Maximum => bc.apply(a, b, out, |x: i32, y| x.max(y)),
        BinaryOp::Minimum => bc.apply(a, b, out, |x: i32, y| x.min(y)),
        BinaryOp::SquaredDifference => bc.apply(a, b, out, |x: i32, y: i32| {
            let d = x.wrapping_sub(y);
            d.wrapping_mul(d)
        }),
        BinaryOp::FloorDiv | BinaryOp::FloorMod if b.contains(&0) => return Err(()),
        BinaryOp::FloorDiv => bc.apply(a, b, out, floor_div_i32),
        BinaryOp::FloorMod => bc.apply(a, b, out, floor_mod_i32),
        _ => return Err(()),
    }
    Ok(())
}

/// FLOOR_DIV or FLOOR_MOD of plain (not quantized) int8 or int16 values, as LiteRT computes them:
/// in int32, the result narrowed back (`narrow`; the one quotient out of range, the type's minimum
/// divided by -1, wraps to the minimum). `Err(())` for division by zero (nothing written) or
/// another operator.
#[allow(clippy::result_unit_err)]
pub fn floor_div_mod_narrow<T: Copy + Into<i32>>(
    op: BinaryOp,
    bc: &Broadcast,
    a: &[T],
    b: &[T],
    out: &mut [T],
    narrow: impl Fn(i32) -> T,
) -> Result<(), ()> {
    if b.iter().any(|&v| v.into() == 0) {
        return Err(());
    }
    match op {
        BinaryOp::FloorDiv => bc.apply(a, b, out, |x, y| narrow(floor_div_i32(x.into(), y.into()))),
        BinaryOp::FloorMod => bc.apply(a, b, out, |x, y| narrow(floor_mod_i32(x.into(), y.into()))),
        _ => return Err(()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_broadcast_general() {
        // a: [2,1,3], b: [2,1] -> [2,2,3]
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [10.0, 20.0];
        let bc = Broadcast::new(&[2, 1, 3], &[2, 1]).unwrap();
        let mut out = [0.0; 12];
        binary_f32(BinaryOp::Add, &bc, &a, &b, Activation::None, &mut out);
        assert_eq!(
            out,
            [11.0, 12.0, 13.0, 21.0, 22.0, 23.0, 14.0, 15.0, 16.0, 24.0, 25.0, 26.0]
        );
    }

    #[test]
    fn sub_scalar_relu_and_div() {
        let bc = Broadcast::new(&[4], &[]).unwrap();
        let mut out = [0.0; 4];
        binary_f32(
            BinaryOp::Sub,
            &bc,
            &[1.0, 2.0, 3.0, 4.0],
            &[2.5],
            Activation::Relu,
            &mut out,
        );
        assert_eq!(out, [0.0, 0.0, 0.5, 1.5]);
        let bc = Broadcast::new(&[], &[3]).unwrap();
        let mut out = [0.0; 3];
        binary_f32(
            BinaryOp::Div,
            &bc,
            &[6.0],
            &[1.0, 2.0, 4.0],
            Activation::None,
            &mut out,
        );
        assert_eq!(out, [6.0, 3.0, 1.5]);
    }

    #[test]
    fn other_binaries() {
        let bc = Broadcast::new(&[3], &[3]).unwrap();
        let (a, b) = ([1.0, -2.0, 3.0], [2.0, 0.5, 3.0]);
        let mut out = [0.0; 3];
        binary_f32(BinaryOp::Maximum, &bc, &a, &b, Activation::None, &mut out);
        assert_eq!(out, [2.0, 0.5, 3.0]);
        binary_f32(BinaryOp::Minimum, &bc, &a, &b, Activation::None, &mut out);
        assert_eq!(out, [1.0, -2.0, 3.0]);
        binary_f32(
            BinaryOp::SquaredDifference,
            &bc,
            &a,
            &b,
            Activation::None,
            &mut out,
        );
        assert_eq!(out, [1.0, 6.25, 0.0]);
        binary_f32(
            BinaryOp::Pow,
            &bc,
            &[2.0, 4.0, 3.0],
            &b,
            Activation::None,
            &mut out,
        );
        // Not exact: `powf` may be off by an ulp or so (and Miri models that on purpose).
        for (o, w) in out.iter().zip([4.0f32, 2.0, 27.0]) {
            assert!((o - w).abs() <= 1e-5 * w, "{o} vs {w}");
        }
        binary_f32(BinaryOp::Prelu, &bc, &a, &b, Activation::None, &mut out);
        assert_eq!(out, [1.0, -1.0, 3.0]);
        binary_f32(BinaryOp::Mul, &bc, &a, &b, Activation::Relu6, &mut out);
        assert_eq!(out, [2.0, 0.0, 6.0]);
    }

    #[test]
    fn int32_binaries() {
        let bc = Broadcast::new(&[2, 2], &[2]).unwrap();
        let mut out = [0; 4];
        binary_i32(
            BinaryOp::Add,
            &bc,
            &[1, 2, 3, 4],
            &[10, -20],
            (i32::MIN, i32::MAX),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [11, -18, 13, -16]);
        binary_i32(
            BinaryOp::Mul,
            &bc,
            &[1, 2, 3, 4],
            &[10, -20],
            (0, 6),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [6, 0, 6, 0]);
        assert!(binary_i32(BinaryOp::Div, &bc, &[1; 4], &[1; 2], (0, 1), &mut out).is_err());
    }

    /// FLOOR_DIV and FLOOR_MOD round toward negative infinity; the remainder has the divisor's
    /// sign; an integer division by zero is an error.
    #[test]
    fn floor_div_and_mod() {
        let bc = Broadcast::new(&[4], &[4]).unwrap();
        let (a, b) = ([7.0, -7.0, 7.0, -7.5], [2.0, 2.0, -2.0, -2.0]);
        let mut out = [0.0; 4];
        binary_f32(BinaryOp::FloorDiv, &bc, &a, &b, Activation::None, &mut out);
        assert_eq!(out, [3.0, -4.0, -4.0, 3.0]);
        binary_f32(BinaryOp::FloorMod, &bc, &a, &b, Activation::None, &mut out);
        assert_eq!(out, [1.0, 1.0, -1.0, -1.5]);
        let r = (i32::MIN, i32::MAX);
        let mut o = [0; 4];
        binary_i32(
            BinaryOp::FloorDiv,
            &bc,
            &[7, -7, 7, -8],
            &[2, 2, -2, -2],
            r,
            &mut o,
        )
        .unwrap();
        assert_eq!(o, [3, -4, -4, 4]);
        binary_i32(
            BinaryOp::FloorMod,
            &bc,
            &[7, -7, 7, -8],
            &[2, 2, -2, -2],
            r,
            &mut o,
        )
        .unwrap();
        assert_eq!(o, [1, 1, -1, 0]);
        binary_i32(BinaryOp::FloorMod, &bc, &[i32::MIN; 4], &[-1; 4], r, &mut o).unwrap();
        assert_eq!(o, [0; 4]);
        assert!(binary_i32(BinaryOp::FloorDiv, &bc, &[1; 4], &[1, 0, 1, 1], r, &mut o).is_err());
    }
}
