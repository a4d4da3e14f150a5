//! Comparisons (EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL), logical operators
//! (LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT), SELECT_V2 and TOPK_V2.
//!
//! Booleans are one byte, 0 or 1 (any non-zero byte reads as true). Int8 comparisons rescale
//! both sides to a common fixed-point scale first, as TFLite's `ComparisonWithScaling` does, so
//! two int8 tensors with different quantization compare their real values.

use core::cmp::Ordering;

use super::elementwise::{broadcast_shapes, broadcast_strides, Broadcast, MAX_DIMS};
use crate::quant::{
    multiply_by_quantized_multiplier_smaller_than_one, quantize_multiplier_smaller_than_one,
};

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

impl CompareOp {
    #[inline]
    pub fn eval<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CompareOp::Equal => a == b,
            CompareOp::NotEqual => a != b,
            CompareOp::Less => a < b,
            CompareOp::LessEqual => a <= b,
            CompareOp::Greater => a > b,
            CompareOp::GreaterEqual => a >= b,
        }
    }
}

/// `out[i] = a[..] (op) b[..]` over the broadcast, as 0/1 bytes.
pub fn compare<T: Copy + PartialOrd>(
    op: CompareOp,
    bc: &Broadcast,
    a: &[T],
    b: &[T],
    out: &mut [u8],
) {
    bc.apply(a, b, out, |x, y| u8::from(op.eval(x, y)));
}

/// Comparison of booleans (only EQUAL / NOT_EQUAL are defined for them by TFLite).
pub fn compare_bool(op: CompareOp, bc: &Broadcast, a: &[u8], b: &[u8], out: &mut [u8]) {
    bc.apply(a, b, out, |x, y| u8::from(op.eval(x != 0, y != 0)));
}

/// Rescaling of one int8 comparison operand (TFLite's `ComparisonParams` for one side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompareSide {
    offset: i32,
    multiplier: i32,
    shift: i32,
}

/// TFLite's fixed left shift applied to both sides before rescaling.
const LEFT_SHIFT: u32 = 8;

impl CompareSide {
    /// From an operand's scale and zero point; `None` unless `0 < scale < 1` (TFLite aborts on
    /// a scale of 1 or more: `QuantizeMultiplierSmallerThanOneExp`).
    pub fn new(scale: f32, zero_point: i32) -> Option<CompareSide> {
        let (multiplier, shift) = quantize_multiplier_smaller_than_one(f64::from(scale))?;
        Some(CompareSide {
            offset: zero_point.checked_neg()?,
            multiplier,
            shift,
        })
    }

    #[inline]
    fn scale(self, q: i8) -> i32 {
        // |offset + q| <= 383, so the shift by 8 cannot overflow.
        let v = (self.offset + i32::from(q)) << LEFT_SHIFT;
        multiply_by_quantized_multiplier_smaller_than_one(v, self.multiplier, self.shift)
    }
}

/// Int8 comparison of the rescaled values.
pub fn compare_i8(
    op: CompareOp,
    bc: &Broadcast,
    a: &[i8],
    sa: CompareSide,
    b: &[i8],
    sb: CompareSide,
    out: &mut [u8],
) {
    bc.apply(a, b, out, |x, y| {
        u8::from(op.eval(sa.scale(x), sb.scale(y)))
    });
}

/// LOGICAL_AND (`and`) or LOGICAL_OR over the broadcast.
pub fn logical(and: bool, bc: &Broadcast, a: &[u8], b: &[u8], out: &mut [u8]) {
    if and {
        bc.apply(a, b, out, |x, y| u8::from(x != 0 && y != 0));
    } else {
        bc.apply(a, b, out, |x, y| u8::from(x != 0 || y != 0));
    }
}

/// LOGICAL_NOT.
pub fn logical_not(a: &[u8], out: &mut [u8]) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = u8::from(x == 0);
    }
}

/// A precomputed three-way broadcast (condition, x, y) for SELECT_V2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Select3 {
    rank: usize,
    out: [usize; MAX_DIMS],
    strides: [[usize; MAX_DIMS]; 3],
    lens: [usize; 3],
    len_out: usize,
}

impl Select3 {
    /// Plans the broadcast; `None` when the shapes do not broadcast or the rank is too high.
    pub fn new(c: &[usize], x: &[usize], y: &[usize]) -> Option<Select3> {
        let cx = broadcast_shapes(c, x)?;
        let out_shape = broadcast_shapes(&cx, y)?;
        Self::to_shape(c, x, y, &out_shape)
    }

    fn to_shape(c: &[usize], x: &[usize], y: &[usize], out_shape: &[usize]) -> Option<Select3> {
        let mut shape = out_shape.to_vec();
        if shape.is_empty() {
            shape.push(1);
        }
        let rank = shape.len();
        let mut out = [1usize; MAX_DIMS];
        out[..rank].copy_from_slice(&shape);
        let count = |s: &[usize]| s.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        Some(Select3 {
            rank,
            out,
            strides: [
                broadcast_strides(c, &shape),
                broadcast_strides(x, &shape),
                broadcast_strides(y, &shape),
            ],
            lens: [count(c)?, count(x)?, count(y)?],
            len_out: count(out_shape)?,
        })
    }

    /// The output shape's element count.
    pub fn output_len(&self) -> usize {
        self.len_out
    }

    /// `out[i] = if c[..] { x[..] } else { y[..] }`. Does nothing if a slice length does not
    /// match the plan.
    pub fn apply<T: Copy>(&self, c: &[u8], x: &[T], y: &[T], out: &mut [T]) {
        if c.len() != self.lens[0]
            || x.len() != self.lens[1]
            || y.len() != self.lens[2]
            || out.len() != self.len_out
            || self.len_out == 0
        {
            return;
        }
        let r = self.rank;
        let mut idx = [0usize; MAX_DIMS];
        let mut off = [0usize; 3];
        for o in out.iter_mut() {
            *o = if c[off[0]] != 0 { x[off[1]] } else { y[off[2]] };
            let mut d = r;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                for (k, s) in self.strides.iter().enumerate() {
                    off[k] += s[d];
                }
                if idx[d] < self.out[d] {
                    break;
                }
                for (k, s) in self.strides.iter().enumerate() {
                    off[k] -= s[d] * self.out[d];
                }
                idx[d] = 0;
            }
        }
    }
}

/// A total order for TOPK_V2 values: larger first; NaN after every number (TFLite leaves NaN
/// unordered; this keeps the sort well defined).
pub trait TopKValue: Copy {
    fn order(a: Self, b: Self) -> Ordering;
}

impl TopKValue for f32 {
    fn order(a: f32, b: f32) -> Ordering {
        match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            // -0.0 and 0.0 tie, as in TFLite (then the lower index wins).
            _ => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
        }
    }
}

macro_rules! topk_int {
    ($($t:ty),*) => {$(
        impl TopKValue for $t {
            fn order(a: $t, b: $t) -> Ordering {
                b.cmp(&a)
            }
        }
    )*};
}
topk_int!(i8, u8, i32, i64);

/// TOPK_V2 over the last axis: for each of the `outer` rows of `n` values, the `k` largest in
/// descending order, ties broken by the lower index (as TFLite and ONNX). `order` is scratch of
/// `n` indices. Writes values and/or indices when given.
pub fn topk<T: TopKValue>(
    input: &[T],
    n: usize,
    k: usize,
    order: &mut [u32],
    mut values: Option<&mut [T]>,
    mut indices: Option<&mut [i32]>,
) {
    if n == 0 || k > n || order.len() < n {
        return;
    }
    for (row, x) in input.chunks_exact(n).enumerate() {
        let ord = &mut order[..n];
        for (i, o) in ord.iter_mut().enumerate() {
            *o = i as u32;
        }
        // Stable sort by value: equal values keep ascending index order.
        ord.sort_by(|&a, &b| T::order(x[a as usize], x[b as usize]));
        let base = row * k;
        if let Some(v) = values.as_deref_mut() {
            if let Some(dst) = v.get_mut(base..base + k) {
                for (d, &i) in dst.iter_mut().zip(ord.iter()) {
                    *d = x[i as usize];
                }
            }
        }
        if let Some(ix) = indices.as_deref_mut() {
            if let Some(dst) = ix.get_mut(base..base + k) {
                for (d, &i) in dst.iter_mut().zip(ord.iter()) {
                    *d = i as i32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn compare_broadcasts() {
        let bc = Broadcast::new(&[2, 3], &[3]).unwrap();
        let mut out = [9u8; 6];
        compare(
            CompareOp::Less,
            &bc,
            &[1.0f32, 5.0, 3.0, 0.0, 2.0, 9.0],
            &[2.0f32, 2.0, 3.0],
            &mut out,
        );
        assert_eq!(out, [1, 0, 0, 1, 0, 0]);
        compare(
            CompareOp::GreaterEqual,
            &bc,
            &[1i32, 5, 3, 0, 2, 9],
            &[2i32, 2, 3],
            &mut out,
        );
        assert_eq!(out, [0, 1, 1, 0, 1, 1]);
    }

    #[test]
    fn int8_compare_rescales_to_real_values() {
        // a: scale 0.1, zp 0 -> 1.0 is 10; b: scale 0.05, zp -10 -> 1.0 is 10.
        let sa = CompareSide::new(0.1, 0).unwrap();
        let sb = CompareSide::new(0.05, -10).unwrap();
        let bc = Broadcast::new(&[3], &[3]).unwrap();
        let mut out = [0u8; 3];
        compare_i8(
            CompareOp::Equal,
            &bc,
            &[10, 11, 9],
            sa,
            &[10, 10, 10],
            sb,
            &mut out,
        );
        assert_eq!(out, [1, 0, 0]);
        compare_i8(
            CompareOp::Greater,
            &bc,
            &[10, 11, 9],
            sa,
            &[10, 10, 10],
            sb,
            &mut out,
        );
        assert_eq!(out, [0, 1, 0]);
        assert!(CompareSide::new(1.0, 0).is_none());
    }

    #[test]
    fn logical_ops() {
        let bc = Broadcast::new(&[4], &[1]).unwrap();
        let mut out = [0u8; 4];
        logical(true, &bc, &[0, 1, 2, 0], &[1], &mut out);
        assert_eq!(out, [0, 1, 1, 0]);
        logical(false, &bc, &[0, 1, 0, 0], &[0], &mut out);
        assert_eq!(out, [0, 1, 0, 0]);
        logical_not(&[0, 1, 7, 0], &mut out);
        assert_eq!(out, [1, 0, 0, 1]);
    }

    #[test]
    fn select_broadcasts_three_ways() {
        // cond [2,1], x [1,3], y scalar.
        let p = Select3::new(&[2, 1], &[1, 3], &[]).unwrap();
        assert_eq!(p.output_len(), 6);
        let mut out = [0f32; 6];
        p.apply(&[1, 0], &[1.0, 2.0, 3.0], &[-1.0], &mut out);
        assert_eq!(out, [1.0, 2.0, 3.0, -1.0, -1.0, -1.0]);
        assert!(Select3::new(&[2], &[3], &[1]).is_none());
    }

    #[test]
    fn topk_ties_take_the_lower_index() {
        let x = [1.0f32, 3.0, 3.0, f32::NAN, -0.0, 2.0, 0.0, -1.0];
        let mut order = vec![0u32; 4];
        let mut v = [0f32; 6];
        let mut i = [0i32; 6];
        topk(&x, 4, 3, &mut order, Some(&mut v), Some(&mut i));
        assert_eq!(v[..3], [3.0, 3.0, 1.0]);
        assert_eq!(v[3..], [2.0, -0.0, 0.0]);
        // -0.0 and 0.0 tie: the lower index first.
        assert_eq!(i, [1, 2, 0, 1, 0, 2]);
        let mut i2 = [0i32; 2];
        topk(&[5i8, 5, 7, -1], 4, 2, &mut order, None, Some(&mut i2));
        assert_eq!(i2, [2, 0]);
    }
}
