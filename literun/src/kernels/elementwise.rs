//! Elementwise kernels: binary operators with numpy broadcasting, and unary operators.

use super::Activation;
use crate::math::{
    erff, exp_fast, expf, floorf, logf, logistic_fast, powf, sqrtf, tanh_fast, tanhf,
};

/// Largest rank the broadcasting kernels handle.
pub const MAX_DIMS: usize = 8;

/// The numpy broadcast of two shapes, `None` when incompatible or too high a rank.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<alloc::vec::Vec<usize>> {
    let rank = a.len().max(b.len());
    if rank > MAX_DIMS {
        return None;
    }
    let mut out = alloc::vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

/// Element strides (0 on broadcast dimensions) of `shape` read as `out` (right-aligned).
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> [usize; MAX_DIMS] {
    let mut s = [0usize; MAX_DIMS];
    let rank = out.len();
    let mut stride = 1usize;
    for i in (0..rank).rev() {
        if i + shape.len() < rank {
            break;
        }
        let d = shape[i + shape.len() - rank];
        s[i] = if d == 1 { 0 } else { stride };
        stride = stride.saturating_mul(d);
    }
    s
}

/// A precomputed broadcast of two operands to one output shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broadcast {
    rank: usize,
    out: [usize; MAX_DIMS],
    sa: [usize; MAX_DIMS],
    sb: [usize; MAX_DIMS],
    len_a: usize,
    len_b: usize,
    len_out: usize,
}

impl Broadcast {
    /// Plans `a (op) b`; `None` when the shapes do not broadcast or the rank exceeds [`MAX_DIMS`].
    pub fn new(a: &[usize], b: &[usize]) -> Option<Broadcast> {
        let out_shape = broadcast_shapes(a, b)?;
        let mut shape = out_shape.clone();
        if shape.is_empty() {
            shape.push(1);
        }
        let rank = shape.len();
        let mut out = [1usize; MAX_DIMS];
        out[..rank].copy_from_slice(&shape);
        let count = |s: &[usize]| s.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        Some(Broadcast {
            rank,
            out,
            sa: broadcast_strides(a, &shape),
            sb: broadcast_strides(b, &shape),
            len_a: count(a)?,
            len_b: count(b)?,
            len_out: count(&out_shape)?,
        })
    }

    /// Output element count.
    pub fn output_len(&self) -> usize {
        self.len_out
    }

    /// Calls `f(a_run, b_run, out_run)` on runs of the output that cover it in order, each
    /// operand's run a contiguous slice or one repeated value: the whole output when an operand
    /// is one value, else each innermost row, when that has at least `min_run` elements.
    /// `false` (nothing done) when the rows are shorter or the slice lengths do not match the
    /// planned shapes.
    pub fn apply_runs<T: Copy, U>(
        &self,
        a: &[T],
        b: &[T],
        out: &mut [U],
        min_run: usize,
        mut f: impl FnMut(Run<'_, T>, Run<'_, T>, &mut [U]),
    ) -> bool {
        if a.len() != self.len_a || b.len() != self.len_b || out.len() != self.len_out {
            return false;
        }
        if self.len_out == 0 {
            return true;
        }
        fn whole<T: Copy>(v: &[T], len: usize) -> Option<Run<'_, T>> {
            match v {
                [x] => Some(Run::Repeat(*x)),
                _ if v.len() == len => Some(Run::Slice(v)),
                _ => None,
            }
        }
        if let (Some(ra), Some(rb)) = (whole(a, out.len()), whole(b, out.len())) {
            f(ra, rb, out);
            return true;
        }
        let r = self.rank;
        let inner = self.out[r - 1];
        if inner < min_run {
            return false;
        }
        fn row<T: Copy>(v: &[T], at: usize, step: usize, len: usize) -> Option<Run<'_, T>> {
            if step == 0 {
                v.get(at).map(|&x| Run::Repeat(x))
            } else {
                v.get(at..at.checked_add(len)?).map(Run::Slice)
            }
        }
        let (ia, ib) = (self.sa[r - 1], self.sb[r - 1]);
        let mut idx = [0usize; MAX_DIMS];
        let (mut oa, mut ob) = (0usize, 0usize);
        for o in out.chunks_exact_mut(inner) {
            // Always in range for a plan's own shapes (the strides stay inside the operands).
            if let (Some(ra), Some(rb)) = (row(a, oa, ia, inner), row(b, ob, ib, inner)) {
                f(ra, rb, o);
            }
            let mut d = r - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                oa += self.sa[d];
                ob += self.sb[d];
                if idx[d] < self.out[d] {
                    break;
                }
                oa -= self.sa[d] * self.out[d];
                ob -= self.sb[d] * self.out[d];
                idx[d] = 0;
            }
        }
        true
    }

    /// `out[i] = f(a[..], b[..])` over the broadcast. Does nothing if the slice lengths do not
    /// match the planned shapes.
    pub fn apply<T: Copy, U>(&self, a: &[T], b: &[T], out: &mut [U], f: impl Fn(T, T) -> U) {
        if a.len() != self.len_a || b.len() != self.len_b || out.len() != self.len_out {
            return;
        }
        if self.len_out == 0 {
            return;
        }
        if a.len() == out.len() && b.len() == out.len() {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
            return;
        }
        if a.len() == out.len() && b.len() == 1 {
            let y = b[0];
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
            return;
        }
        if b.len() == out.len() && a.len() == 1 {
            let x = a[0];
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
            return;
        }
        let r = self.rank;
        let inner = self.out[r - 1];
        let (ia, ib) = (self.sa[r - 1], self.sb[r - 1]);
        let mut idx = [0usize; MAX_DIMS];
        let (mut oa, mut ob) = (0usize, 0usize);
        for row in out.chunks_exact_mut(inner) {
            for (k, o) in row.iter_mut().enumerate() {
                *o = f(a[oa + k * ia], b[ob + k * ib]);
            }
            let mut d = r - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                oa += self.sa[d];
                ob += self.sb[d];
                if idx[d] < self.out[d] {
                    break;
                }
                oa -= self.sa[d] * self.out[d];
                ob -= self.sb[d] * self.out[d];
                idx[d] = 0;
            }
        }
    }
}

/// One operand's part of a run of the output ([`Broadcast::apply_runs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run<'a, T> {
    /// One value per output element.
    Slice(&'a [T]),
    /// The same value for every output element.
    Repeat(T),
}

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
/// arithmetic; MAXIMUM, MINIMUM, SQUARED_DIFFERENCE too). `Err(())` for an operator with no
/// int32 form here.
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
        _ => return Err(()),
    }
    Ok(())
}

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
    Square,
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
        UnaryOp::Square => x * x,
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
        UnaryOp::Square => map(input, out, |x| x * x),
        UnaryOp::HardSwish => map(input, out, |x| unary_fn(UnaryOp::HardSwish, x)),
        UnaryOp::LeakyRelu { alpha } => map(input, out, |x| if x > 0.0 { x } else { x * alpha }),
        UnaryOp::Exp => map(input, out, exp_fast),
        UnaryOp::Logistic => map(input, out, logistic_fast),
        UnaryOp::Tanh => map(input, out, tanh_fast),
        _ => map(input, out, |x| unary_fn(op, x)),
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
    use alloc::vec;

    #[test]
    fn quantize_saturates_and_maps_nan_to_zero() {
        let x = [
            0.0,
            0.25,
            -0.25,
            0.75,
            1e9,
            -1e9,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        let mut out = [0i8; 9];
        quantize_f32(&x, 0.5, 3, (-128, 127), &mut out, |v| v as i8);
        // 0.25 / 0.5 = 0.5 rounds away from zero to 1.
        assert_eq!(out, [3, 4, 2, 5, 127, -128, 127, -128, 0]);
        let mut wide = [0i16; 9];
        quantize_f32(&x, 0.5, 0, (-32768, 32767), &mut wide, |v| v as i16);
        assert_eq!(wide, [0, 1, -1, 2, 32767, -32768, 32767, -32768, 0]);
    }

    #[test]
    fn int8_add_and_sub_tables_give_the_direct_values() {
        let q = |scale: f32, zero_point: i32| Q8 { scale, zero_point };
        let n = 4096;
        let a: Vec<i8> = (0..n).map(|i| (i * 37 % 256) as u8 as i8).collect();
        let b: Vec<i8> = (0..n).map(|i| (i * 101 % 256) as u8 as i8).collect();
        let bc = Broadcast::new(&[n], &[n]).unwrap();
        for sub in [false, true] {
            let p = BinaryI8::add_sub(q(0.05, -3), q(0.02, 7), q(0.06, 1), (-128, 127), sub, false)
                .unwrap();
            let tables = p.clone().with_tables();
            assert!(matches!(tables, BinaryI8::AddSubTables(_)));
            let mut out = vec![0i8; n];
            binary_quantized::<i8>(&tables, &bc, &a, &b, &mut out);
            for i in 0..n {
                assert_eq!(out[i], p.eval(a[i], b[i]), "{sub} {i}");
            }
        }
    }

    #[test]
    fn int16_add_and_mul_match_litert() {
        let q = |scale: f32| Q8 {
            scale,
            zero_point: 0,
        };
        let full = (-32768, 32767);
        // ADD with equal scales is exact (the int16 kernel shifts by 15, not 20).
        let add = BinaryI8::add_sub(q(0.01), q(0.01), q(0.01), full, false, true).unwrap();
        assert!(matches!(add, BinaryI8::AddSub { left_shift: 15, .. }));
        assert_eq!(add.eval_i32(1000, 2000), 3000);
        assert_eq!(add.eval_i32(30000, 30000), 32767);
        // A product LiteRT rounds up (11662.4999 exactly): its multiplier comes from the f32
        // product of the scales (attention fixture, layer norm).
        let mul = BinaryI8::mul_i16(
            q(0.000_116_044_23),
            q(5.197_110_3e-5),
            q(0.000_112_865_25),
            full,
        );
        assert_eq!(mul.eval_i32(13301, 16409), 11663);
        let mut out = [0i16; 2];
        let bc = Broadcast::new(&[2], &[1]).unwrap();
        binary_quantized::<i16>(&mul, &bc, &[13301, -13301], &[16409], &mut out);
        assert_eq!(out, [11663, -11663]); // ties away from zero
    }

    #[test]
    fn broadcast_shapes_numpy() {
        assert_eq!(broadcast_shapes(&[2, 3], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast_shapes(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast_shapes(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[], &[]), Some(vec![]));
        assert_eq!(broadcast_shapes(&[2], &[3]), None);
        assert_eq!(broadcast_shapes(&[0, 1], &[1, 3]), Some(vec![0, 3]));
    }

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
            UnaryOp::Square,
            UnaryOp::HardSwish,
            UnaryOp::LeakyRelu { alpha: 0.2 },
            UnaryOp::Exp,
            UnaryOp::Logistic,
            UnaryOp::Tanh,
            UnaryOp::Floor,
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
        assert_eq!(unary_fn(UnaryOp::Relu6, 7.0), 6.0);
        assert_eq!(unary_fn(UnaryOp::ReluN1To1, -3.0), -1.0);
        assert!(close(unary_fn(UnaryOp::Exp, 1.0), core::f32::consts::E));
        assert!(close(unary_fn(UnaryOp::Log, core::f32::consts::E), 1.0));
        let mut o = [0; 3];
        assert!(unary_i32(UnaryOp::Abs, &[-1, 2, -3], &mut o));
        assert_eq!(o, [1, 2, 3]);
    }
}

// ---------------------------------------------------------------------------------------------
// 8-bit quantized elementwise operators.

use crate::quant::{
    downscale_multiplier_to_i16, multiply_by_quantized_multiplier as mbqm,
    multiply_by_quantized_multiplier_smaller_than_one as mbqm_lt1, quantize_multiplier,
    quantize_multiplier_smaller_than_one, rounding_divide_by_pot_i16,
    saturating_rounding_doubling_high_mul_i16 as srdhm16,
};

/// Scale and zero point of a per-tensor quantized 8-bit tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Q8 {
    pub scale: f32,
    pub zero_point: i32,
}

/// Prepared parameters of an int8 ADD, SUB, MUL or SQUARED_DIFFERENCE (TFLite's
/// `ArithmeticParams`); ADD, SUB, MUL, MAXIMUM and MINIMUM also serve int16 (16x8 models).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BinaryI8 {
    /// ADD/SUB: inputs shifted left by `left_shift` (20; 15 for int16), rescaled to twice the larger input
    /// scale, summed, rescaled to the output.
    AddSub {
        sub: bool,
        in1_offset: i32,
        in2_offset: i32,
        left_shift: i32,
        in1_mult: i32,
        in1_shift: i32,
        in2_mult: i32,
        in2_shift: i32,
        out_mult: i32,
        out_shift: i32,
        out_offset: i32,
        act_min: i32,
        act_max: i32,
    },
    /// SQUARED_DIFFERENCE: inputs shifted left by 7, rescaled to twice the larger input scale,
    /// subtracted, squared, rescaled to the output (every multiplier below one).
    SquaredDifference {
        in1_offset: i32,
        in2_offset: i32,
        in1_mult: i32,
        in1_shift: i32,
        in2_mult: i32,
        in2_shift: i32,
        out_mult: i32,
        out_shift: i32,
        out_offset: i32,
    },
    /// Int8 ADD/SUB with each input's rescaled value looked up (from [`BinaryI8::with_tables`]).
    AddSubTables(alloc::boxed::Box<AddSubTables>),
    /// MAXIMUM / MINIMUM: the larger / smaller stored value (all three tensors share their
    /// quantization).
    MaxMin { max: bool },
    /// MUL: `(x1 - z1) * (x2 - z2)` rescaled by `s1 * s2 / s_out`.
    Mul {
        in1_offset: i32,
        in2_offset: i32,
        out_mult: i32,
        out_shift: i32,
        out_offset: i32,
        act_min: i32,
        act_max: i32,
    },
}

/// An int8 ADD/SUB as tables: an 8-bit input takes 256 values, so each input's rescaling
/// (shift, multiply, round) is looked up, the same numbers as computing it; only the rescaling of
/// the sum is left per element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddSubTables {
    /// Rescaled input 1 / input 2 (negated for SUB), indexed by `stored + 128`.
    pub t1: [i32; 256],
    pub t2: [i32; 256],
    /// The parameters the tables were computed from (for kernels that compute them instead).
    pub sub: bool,
    pub in1_offset: i32,
    pub in2_offset: i32,
    pub left_shift: i32,
    pub in1_mult: i32,
    pub in1_shift: i32,
    pub in2_mult: i32,
    pub in2_shift: i32,
    pub out_mult: i32,
    pub out_shift: i32,
    pub out_offset: i32,
    pub act_min: i32,
    pub act_max: i32,
}

impl BinaryI8 {
    /// An int8 ADD/SUB as [`AddSubTables`] (other operators unchanged).
    pub fn with_tables(self) -> BinaryI8 {
        let BinaryI8::AddSub {
            sub,
            in1_offset,
            in2_offset,
            left_shift,
            in1_mult,
            in1_shift,
            in2_mult,
            in2_shift,
            out_mult,
            out_shift,
            out_offset,
            act_min,
            act_max,
        } = self
        else {
            return self;
        };
        let table = |off: i32, m: i32, sh: i32, neg: bool| {
            let mut t = [0i32; 256];
            for (i, v) in t.iter_mut().enumerate() {
                let s = mbqm_lt1((off - 128 + i as i32) * (1 << left_shift), m, sh);
                *v = if neg { s.wrapping_neg() } else { s };
            }
            t
        };
        BinaryI8::AddSubTables(alloc::boxed::Box::new(AddSubTables {
            t1: table(in1_offset, in1_mult, in1_shift, false),
            t2: table(in2_offset, in2_mult, in2_shift, sub),
            sub,
            in1_offset,
            in2_offset,
            left_shift,
            in1_mult,
            in1_shift,
            in2_mult,
            in2_shift,
            out_mult,
            out_shift,
            out_offset,
            act_min,
            act_max,
        }))
    }

    /// TFLite add.cc / sub.cc `PrepareGeneralSubOp`: `None` when a multiplier is out of range.
    /// `int16`: the general int16 kernel (`pot_scale_int16` false), which shifts by 15.
    pub fn add_sub(
        a: Q8,
        b: Q8,
        out: Q8,
        range: (i32, i32),
        sub: bool,
        int16: bool,
    ) -> Option<BinaryI8> {
        let left_shift = if int16 { 15 } else { 20 };
        let twice_max = 2.0 * f64::from(a.scale.max(b.scale));
        let r1 = f64::from(a.scale) / twice_max;
        let r2 = f64::from(b.scale) / twice_max;
        let ro = twice_max / f64::from((1 << left_shift) as f32 * out.scale);
        let (in1_mult, in1_shift) = quantize_multiplier_smaller_than_one(r1)?;
        let (in2_mult, in2_shift) = quantize_multiplier_smaller_than_one(r2)?;
        let (out_mult, out_shift) = quantize_multiplier(ro);
        if out_mult == 0 {
            return None;
        }
        Some(BinaryI8::AddSub {
            sub,
            in1_offset: -a.zero_point,
            in2_offset: -b.zero_point,
            left_shift,
            in1_mult,
            in1_shift,
            in2_mult,
            in2_shift,
            out_mult,
            out_shift,
            out_offset: out.zero_point,
            act_min: range.0,
            act_max: range.1,
        })
    }

    /// TFLite squared_difference.cc `Prepare` (int8): `None` when a multiplier is not below one
    /// (TFLite aborts on a CHECK there), i.e. unless `s_out > (2 max(s1, s2))^2 / 2^14`.
    pub fn squared_difference(a: Q8, b: Q8, out: Q8) -> Option<BinaryI8> {
        const LEFT_SHIFT: i32 = 7;
        let twice_max = f64::from(2.0 * a.scale.max(b.scale));
        let r1 = f64::from(a.scale) / twice_max;
        let r2 = f64::from(b.scale) / twice_max;
        let ro = twice_max * twice_max / f64::from((1 << (2 * LEFT_SHIFT)) as f32 * out.scale);
        let (in1_mult, in1_shift) = quantize_multiplier_smaller_than_one(r1)?;
        let (in2_mult, in2_shift) = quantize_multiplier_smaller_than_one(r2)?;
        let (out_mult, out_shift) = quantize_multiplier_smaller_than_one(ro)?;
        Some(BinaryI8::SquaredDifference {
            in1_offset: -a.zero_point,
            in2_offset: -b.zero_point,
            in1_mult,
            in1_shift,
            in2_mult,
            in2_shift,
            out_mult,
            out_shift,
            out_offset: out.zero_point,
        })
    }

    /// TFLite mul.cc: `real = s1 * s2 / s_out` (in double).
    pub fn mul(a: Q8, b: Q8, out: Q8, range: (i32, i32)) -> BinaryI8 {
        let real = f64::from(a.scale) * f64::from(b.scale) / f64::from(out.scale);
        let (out_mult, out_shift) = quantize_multiplier(real);
        BinaryI8::Mul {
            in1_offset: -a.zero_point,
            in2_offset: -b.zero_point,
            out_mult,
            out_shift,
            out_offset: out.zero_point,
            act_min: range.0,
            act_max: range.1,
        }
    }

    /// Int16 MUL: as [`BinaryI8::mul`], but with `s1 * s2 / s_out` computed in f32 (mul.cc
    /// multiplies the float scales; measured against ai-edge-litert 2.3.0, where the double
    /// product's multiplier rounds some int16 products the other way).
    pub fn mul_i16(a: Q8, b: Q8, out: Q8, range: (i32, i32)) -> BinaryI8 {
        let real = f64::from(a.scale * b.scale / out.scale);
        let (out_mult, out_shift) = quantize_multiplier(real);
        BinaryI8::Mul {
            in1_offset: -a.zero_point,
            in2_offset: -b.zero_point,
            out_mult,
            out_shift,
            out_offset: out.zero_point,
            act_min: range.0,
            act_max: range.1,
        }
    }

    /// One output value.
    #[inline]
    pub fn eval(&self, x: i8, y: i8) -> i8 {
        self.eval_i32(i32::from(x), i32::from(y)) as i8
    }

    /// One output value of stored values `x`, `y` (int8 or int16), in the output type's range.
    #[inline]
    pub fn eval_i32(&self, x: i32, y: i32) -> i32 {
        match *self {
            BinaryI8::AddSub {
                sub,
                in1_offset,
                in2_offset,
                left_shift,
                in1_mult,
                in1_shift,
                in2_mult,
                in2_shift,
                out_mult,
                out_shift,
                out_offset,
                act_min,
                act_max,
            } => {
                let v1 = (in1_offset + x) * (1 << left_shift);
                let v2 = (in2_offset + y) * (1 << left_shift);
                let s1 = mbqm_lt1(v1, in1_mult, in1_shift);
                let s2 = mbqm_lt1(v2, in2_mult, in2_shift);
                let raw = if sub { s1 - s2 } else { s1 + s2 };
                let o = mbqm(raw, out_mult, out_shift).saturating_add(out_offset);
                o.clamp(act_min, act_max)
            }
            BinaryI8::AddSubTables(ref t) => {
                let raw = t.t1[(x + 128) as usize & 255] + t.t2[(y + 128) as usize & 255];
                let o = mbqm(raw, t.out_mult, t.out_shift).saturating_add(t.out_offset);
                o.clamp(t.act_min, t.act_max)
            }
            BinaryI8::MaxMin { max } => {
                if max {
                    x.max(y)
                } else {
                    x.min(y)
                }
            }
            BinaryI8::SquaredDifference {
                in1_offset,
                in2_offset,
                in1_mult,
                in1_shift,
                in2_mult,
                in2_shift,
                out_mult,
                out_shift,
                out_offset,
            } => {
                let v1 = (in1_offset + x) * (1 << 7);
                let v2 = (in2_offset + y) * (1 << 7);
                let d = mbqm_lt1(v1, in1_mult, in1_shift) - mbqm_lt1(v2, in2_mult, in2_shift);
                let o = mbqm_lt1(d.wrapping_mul(d), out_mult, out_shift).saturating_add(out_offset);
                o.clamp(-128, 127)
            }
            BinaryI8::Mul {
                in1_offset,
                in2_offset,
                out_mult,
                out_shift,
                out_offset,
                act_min,
                act_max,
            } => {
                let p = (in1_offset + x) * (in2_offset + y);
                let o = mbqm(p, out_mult, out_shift).saturating_add(out_offset);
                o.clamp(act_min, act_max)
            }
        }
    }
}

/// `out = a (op) b` for int8 or int16 with broadcasting.
pub fn binary_quantized<T: super::Quantized>(
    p: &BinaryI8,
    bc: &Broadcast,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    let f = |x: T, y: T| T::saturate(p.eval_i32(x.get(), y.get()));
    // One loop per operator: inside each, the inlined `eval_i32` knows which operator it is,
    // so the per-element work is the arithmetic alone.
    match *p {
        BinaryI8::AddSub { .. } => bc.apply(a, b, out, f),
        BinaryI8::AddSubTables(ref t) => {
            // The parameters in locals, so the loop keeps them in registers.
            let (t1, t2) = (&t.t1, &t.t2);
            let (m, sh, off, lo, hi) =
                (t.out_mult, t.out_shift, t.out_offset, t.act_min, t.act_max);
            bc.apply(a, b, out, |x, y| {
                let raw = t1[(x.get() + 128) as usize & 255] + t2[(y.get() + 128) as usize & 255];
                T::saturate(mbqm(raw, m, sh).saturating_add(off).clamp(lo, hi))
            })
        }
        BinaryI8::Mul { .. } => bc.apply(a, b, out, f),
        BinaryI8::MaxMin { .. } => bc.apply(a, b, out, f),
        BinaryI8::SquaredDifference { .. } => bc.apply(a, b, out, f),
    }
}

/// QUANTIZE of float32 values: `clamp(round(x / scale) + zero_point, lo, hi)`, rounding half away
/// from zero as TFLite's reference `AffineQuantize`, stored through `store` (NaN stores 0).
pub fn quantize_f32<T>(
    input: &[f32],
    scale: f32,
    zero_point: i32,
    (lo, hi): (i32, i32),
    out: &mut [T],
    store: impl Fn(i32) -> T,
) {
    let (z, lo, hi) = (zero_point as f32, lo as f32, hi as f32);
    for (o, &x) in out.iter_mut().zip(input) {
        let r = crate::math::round_half_away(x / scale) + z;
        // max/min rather than `clamp`, whose `lo <= hi` assertion would bring float formatting
        // into firmware builds.
        let r = if r.is_nan() { 0.0 } else { r.max(lo).min(hi) };
        // SAFETY: r is an integer value in [lo, hi], inside i32 (no NaN, no overflow); the
        // unchecked form lets the loop use vector conversions. Tested with NaN, infinities
        // and out-of-range values (`quantize_saturates_and_maps_nan_to_zero`).
        *o = store(unsafe { r.to_int_unchecked::<i32>() });
    }
}

/// A 256-entry lookup table over the bytes of an 8-bit tensor: `out[i] = table[in[i] as u8]`.
pub type Lut8 = [u8; 256];

/// Applies a [`Lut8`].
pub fn apply_lut8(table: &Lut8, input: &[u8], out: &mut [u8]) {
    for (o, &x) in out.iter_mut().zip(input) {
        *o = table[usize::from(x)];
    }
}

/// The value range of an 8-bit type (`signed` = int8).
fn range8(signed: bool) -> (i32, i32) {
    if signed {
        (-128, 127)
    } else {
        (0, 255)
    }
}

/// The value a byte stands for.
fn byte_value(byte: u8, signed: bool) -> i32 {
    if signed {
        i32::from(byte as i8)
    } else {
        i32::from(byte)
    }
}

/// A table from an integer function of the stored value (the output is clamped to the output
/// type and stored as its byte).
pub fn lut8_from_int(in_signed: bool, out_signed: bool, f: impl Fn(i32) -> i32) -> Lut8 {
    let (lo, hi) = range8(out_signed);
    let mut t = [0u8; 256];
    for (b, e) in t.iter_mut().enumerate() {
        let v = f(byte_value(b as u8, in_signed)).clamp(lo, hi);
        *e = v as u8;
    }
    t
}

/// TFLite `LUTPopulate` / `PopulateLookupTable` for 8-bit types: dequantize, apply `f` in float,
/// requantize with `round(y / out_scale) + out_zp`, clamp.
pub fn lut8_from_float(input: Q8, output: Q8, signed: bool, f: impl Fn(f32) -> f32) -> Lut8 {
    let inv = 1.0 / output.scale;
    lut8_from_int(signed, signed, |v| {
        let x = input.scale * (v - input.zero_point) as f32;
        let r = crate::math::roundf(f(x) * inv);
        (r + output.zero_point as f32) as i32
    })
}

/// TFLite's quantized RELU / RELU6 / RELU_N1_TO_1 (`QuantizedReluX`), as a table. `hi` is
/// `None` for an unbounded RELU.
pub fn lut8_relu(input: Q8, output: Q8, signed: bool, lo: f32, hi: Option<f32>) -> Lut8 {
    let (tmin, tmax) = range8(signed);
    let (m, s) = quantize_multiplier(f64::from(input.scale / output.scale));
    // Saturating: a file may give scales whose ratio makes these overflow i32 (clamped anyway).
    let qmin = tmin.max(
        output
            .zero_point
            .saturating_add(crate::math::roundf(lo / output.scale) as i32),
    );
    let qmax = hi.map_or(tmax, |h| {
        tmax.min(
            output
                .zero_point
                .saturating_add(crate::math::roundf(h / output.scale) as i32),
        )
    });
    lut8_from_int(signed, signed, |v| {
        output
            .zero_point
            .saturating_add(mbqm(v - input.zero_point, m, s))
            .max(qmin)
            .min(qmax)
    })
}

/// TFLite's quantized LEAKY_RELU (`QuantizeLeakyRelu`), as a table.
pub fn lut8_leaky_relu(input: Q8, output: Q8, signed: bool, alpha: f32) -> Lut8 {
    let (ma, sa) = quantize_multiplier(f64::from(input.scale * alpha / output.scale));
    let (mi, si) = quantize_multiplier(f64::from(input.scale / output.scale));
    lut8_from_int(signed, signed, |v| {
        let x = v - input.zero_point;
        if x >= 0 {
            output.zero_point + mbqm(x, mi, si)
        } else {
            output.zero_point + mbqm(x, ma, sa)
        }
    })
}

/// TFLite's quantized requantization (QUANTIZE between 8-bit types, quantize.cc `Requantize`).
pub fn lut8_requantize(input: Q8, output: Q8, in_signed: bool, out_signed: bool) -> Lut8 {
    let (m, s) = crate::quant::quantize_scale_ratio([input.scale, 1.0], output.scale);
    lut8_from_int(in_signed, out_signed, |v| {
        mbqm(v - input.zero_point, m, s).saturating_add(output.zero_point)
    })
}

/// The fixed-point parameters of a quantized HARD_SWISH (TFLite `HardSwishParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HardSwishParams {
    pub input_zero_point: i16,
    pub output_zero_point: i16,
    pub reluish_multiplier: i16,
    pub reluish_exponent: i32,
    pub output_multiplier: i16,
    pub output_exponent: i32,
}

impl HardSwishParams {
    /// activations.cc `HardSwishPrepare`; `None` when the output multiplier would need a left
    /// shift (TFLite rejects that too).
    pub fn new(input: Q8, output: Q8) -> Option<HardSwishParams> {
        let hires_input_scale = (1.0f32 / 128.0) * input.scale;
        let reluish_scale = 3.0f32 / 32768.0;
        let (om, oe) = quantize_multiplier(f64::from(hires_input_scale / output.scale));
        let (rm, re) = quantize_multiplier(f64::from(hires_input_scale / reluish_scale));
        if oe > 0 {
            return None;
        }
        Some(HardSwishParams {
            input_zero_point: input.zero_point as i16,
            output_zero_point: output.zero_point as i16,
            reluish_multiplier: downscale_multiplier_to_i16(rm),
            reluish_exponent: re,
            output_multiplier: downscale_multiplier_to_i16(om),
            output_exponent: oe,
        })
    }

    /// `reference_ops::HardSwish` for one stored value (before the type clamp).
    pub fn eval(&self, v: i32) -> i32 {
        fn sat_left_shift(value: i16, amount: i32) -> i16 {
            let r = i64::from(value) * (1i64 << amount.clamp(0, 62));
            r.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
        }
        fn sat_doubling_high_mul(a: i16, b: i16) -> i16 {
            if a == b && a == i16::MIN {
                return i16::MAX;
            }
            ((i32::from(a) * i32::from(b)) / (1 << 15)) as i16
        }
        let input_value = (v - i32::from(self.input_zero_point)) as i16;
        let hires = input_value.wrapping_mul(1 << 7);
        let preshift_out = srdhm16(hires, self.output_multiplier);
        let mut reluish = hires;
        if self.reluish_exponent > 0 {
            reluish = sat_left_shift(reluish, self.reluish_exponent - 1);
        }
        reluish = srdhm16(reluish, self.reluish_multiplier);
        if self.reluish_exponent > 0 {
            reluish = sat_left_shift(reluish, 1);
        }
        if self.reluish_exponent < 0 {
            reluish = rounding_divide_by_pot_i16(reluish, -self.reluish_exponent);
        }
        reluish = ((i32::from(reluish) + (1 << 15)) >> 1) as i16;
        let preshift_output_value = sat_doubling_high_mul(reluish, preshift_out);
        let out = rounding_divide_by_pot_i16(preshift_output_value, -self.output_exponent);
        i32::from(out.wrapping_add(self.output_zero_point))
    }
}

/// gemmlowp `SaturatingRoundingMultiplyByPOT` for a left shift (`exponent > 0`): saturates.
fn sat_mul_pot(x: i32, exponent: u32) -> i32 {
    let threshold = (1i32 << (31 - exponent)) - 1;
    if x > threshold {
        i32::MAX
    } else if x < -threshold {
        i32::MIN
    } else {
        x << exponent
    }
}

/// TFLite `GetInvSqrtQuantizedMultiplierExp(input, /*reverse_shift=*/-1)`: `1 / sqrt(input)` as
/// a multiplier and a (left) shift, by five Newton-Raphson steps in gemmlowp fixed point.
/// `input <= 1` gives `(i32::MAX, 0)`.
pub fn inv_sqrt_quantized_multiplier_exp(input: i32) -> (i32, i32) {
    use crate::quant::saturating_rounding_doubling_high_mul as mul;
    if input <= 1 {
        return (i32::MAX, 0);
    }
    let mut input = input;
    let mut shift = 11i32;
    while input >= 1 << 29 {
        input /= 4;
        shift += 1;
    }
    let max_left_shift_bits = input.leading_zeros() - 1;
    let left_shift_bit_pairs = max_left_shift_bits / 2 - 1;
    shift -= left_shift_bit_pairs as i32;
    input <<= 2 * left_shift_bit_pairs;
    // F3 values (3 integer bits): raw / 2^28.
    let fixed_input = input >> 1;
    let half_input = crate::quant::rounding_divide_by_pot(fixed_input, 1);
    let half_three = (1 << 28) + (1 << 27);
    let mut x = 1i32 << 28;
    for _ in 0..5 {
        // x * x * x is F9; Rescale<3> multiplies by 2^6.
        let x3 = sat_mul_pot(mul(mul(x, x), x), 6);
        // F6 - F6, Rescale<3> multiplies by 2^3.
        x = sat_mul_pot(mul(half_three, x).wrapping_sub(mul(half_input, x3)), 3);
    }
    // x * sqrt(2)/2 (F0).
    let mut inv = mul(x, 1_518_500_250);
    if shift < 0 {
        inv = inv.wrapping_shl((-shift) as u32);
        shift = 0;
    }
    (inv, -shift)
}

/// TFLite's int8 RSQRT (elementwise.cc `RsqrtEvalQuantized`) for the stored value `v`; `None`
/// when `v` is below the input zero point (a negative real: TFLite fails the invocation).
/// `multiplier`/`shift` quantize `1 / (sqrt(in_scale) * out_scale)`.
pub fn rsqrt_i8(
    v: i32,
    in_zero_point: i32,
    multiplier: i32,
    shift: i32,
    out_zero_point: i32,
) -> Option<i8> {
    const K_SHIFT: i32 = 20;
    let value = v - in_zero_point;
    if value < 0 {
        return None;
    }
    if value == 0 {
        return Some(127);
    }
    let (m, s) = inv_sqrt_quantized_multiplier_exp(value);
    let data = mbqm(1, m, s + K_SHIFT);
    let out = mbqm(data, multiplier, shift - K_SHIFT).saturating_add(out_zero_point);
    Some(out.clamp(-128, 127) as i8)
}

/// The table of an int8 RSQRT and the smallest valid stored input (the input zero point).
/// `None` when the output multiplier cannot be applied (`shift - 20` below -31).
pub fn rsqrt_i8_table(input: Q8, output: Q8) -> Option<Lut8> {
    let real = 1.0 / f64::from(crate::math::sqrtf(input.scale) * output.scale);
    if !real.is_finite() {
        return None;
    }
    let (m, s) = quantize_multiplier(real);
    if m == 0 || s - 20 < -31 {
        return None;
    }
    Some(lut8_from_int(true, true, |v| {
        rsqrt_i8(v, input.zero_point, m, s, output.zero_point).map_or(0, i32::from)
    }))
}

#[cfg(test)]
mod quant_tests {
    use super::*;

    #[test]
    fn inv_sqrt_multiplier_is_accurate() {
        assert_eq!(inv_sqrt_quantized_multiplier_exp(1), (i32::MAX, 0));
        assert_eq!(inv_sqrt_quantized_multiplier_exp(0), (i32::MAX, 0));
        for v in (2..100_000).step_by(7).chain([1 << 29, i32::MAX]) {
            let (m, s) = inv_sqrt_quantized_multiplier_exp(v);
            let got = f64::from(m) * 2f64.powi(s - 31);
            let want = 1.0 / f64::from(v).sqrt();
            assert!((got / want - 1.0).abs() < 1e-5, "{v}: {got} vs {want}");
        }
    }

    #[test]
    fn squared_difference_needs_a_small_output_multiplier() {
        let q = |scale, zero_point| Q8 { scale, zero_point };
        assert!(BinaryI8::squared_difference(q(0.5, 0), q(0.5, 0), q(0.5, 0)).is_some());
        // (2 * 1)^2 / 2^14 = 1/4096: the output scale must exceed it.
        assert!(BinaryI8::squared_difference(q(1.0, 0), q(1.0, 0), q(1.0 / 4096.0, 0)).is_none());
        assert!(BinaryI8::squared_difference(q(1.0, 0), q(1.0, 0), q(1.0 / 4000.0, 0)).is_some());
    }
}
