//! Shape arithmetic evaluated before running: TensorFlow's converter writes SHAPE → GATHER →
//! REDUCE_PROD → PACK → RESHAPE chains around layers on a dynamic batch, leaving the file's
//! shapes after them as placeholders. With the input shapes known, those values are known too,
//! so the shapes they give are computed while inferring shapes (`Model::resized_inputs`) and
//! the model is planned statically as any other.

use super::context::{tag, Ctx};
use crate::model::DType;
use crate::schema;
use crate::schema::BuiltinOperator as B;
use alloc::vec::Vec;

/// Values this kind of evaluation gives at most (shape vectors are short).
const MAX_VALUES: usize = 64;

/// The values of `c`'s output 0 when they follow from values known before running (the
/// inputs' shapes, constants, and values computed so): `None` for any other operator, or when
/// an input's values are unknown or the case is not one handled here.
pub(crate) fn evaluate(c: &Ctx<'_, '_>) -> Option<Vec<i64>> {
    let out = c.output(0).ok()?;
    if !matches!(out.dtype, DType::I32 | DType::I64) || out.elements > MAX_VALUES {
        return None;
    }
    let ints = |k: usize| c.const_ints(k).ok();
    let rank = |k: usize| c.shape(k).map(<[usize]>::len).ok();
    let v: Vec<i64> = match c.op.code {
        B::SHAPE => c.shape(0).ok()?.iter().map(|&d| d as i64).collect(),
        B::RESHAPE | B::SQUEEZE | B::EXPAND_DIMS | B::CAST => ints(0)?,
        B::GATHER if rank(0)? == 1 => {
            let params = ints(0)?;
            let n = params.len() as i64;
            ints(1)?
                .into_iter()
                .map(|i| {
                    let i = if i < 0 { i + n } else { i };
                    usize::try_from(i).ok().and_then(|i| params.get(i).copied())
                })
                .collect::<Option<_>>()?
        }
        B::REDUCE_PROD | B::SUM | B::REDUCE_MAX | B::REDUCE_MIN if rank(0)? <= 1 => {
            let x = ints(0)?;
            if ints(1)?.is_empty() {
                x
            } else {
                let fold = |f: fn(i64, i64) -> i64, id: i64| x.iter().fold(id, |a, &b| f(a, b));
                alloc::vec![match c.op.code {
                    B::REDUCE_PROD => fold(i64::wrapping_mul, 1),
                    B::SUM => fold(i64::wrapping_add, 0),
                    B::REDUCE_MAX => fold(i64::max, i64::MIN),
                    _ => fold(i64::min, i64::MAX),
                }]
            }
        }
        // Scalars or vectors joined along axis 0 (the only axis of a stack of scalars or of a
        // concatenation of vectors).
        B::PACK | B::CONCATENATION => {
            let axis = match c.op.code {
                B::PACK => match c.options(tag::PACK).ok()? {
                    Some(t) => t.i32(schema::PackOptions::VT_AXIS, 0).ok()?,
                    None => 0,
                },
                _ => match c.options(tag::CONCATENATION).ok()? {
                    Some(t) => t.i32(schema::ConcatenationOptions::VT_AXIS, 0).ok()?,
                    None => 0,
                },
            };
            let inputs = c.op.inputs.len();
            let ranks_ok = (0..inputs).all(|k| match c.op.code {
                B::PACK => rank(k) == Some(0) || (rank(k) == Some(1) && axis == 0),
                _ => rank(k) == Some(1) && (axis == 0 || axis == -1),
            });
            if !ranks_ok || (c.op.code == B::PACK && axis != 0 && axis != -1) {
                return None;
            }
            let mut all = Vec::new();
            for k in 0..inputs {
                all.extend(ints(k)?);
            }
            all
        }
        B::STRIDED_SLICE if rank(0)? == 1 => strided_slice_1d(c, &ints(0)?)?,
        B::ADD | B::SUB | B::MUL | B::FLOOR_DIV => {
            let (a, b) = (ints(0)?, ints(1)?);
            let n = a.len().max(b.len());
            if (a.len() != n && a.len() != 1) || (b.len() != n && b.len() != 1) {
                return None;
            }
            let at = |x: &[i64], i: usize| x[if x.len() == 1 { 0 } else { i }];
            (0..n)
                .map(|i| {
                    let (x, y) = (at(&a, i), at(&b, i));
                    match c.op.code {
                        B::ADD => Some(x.wrapping_add(y)),
                        B::SUB => Some(x.wrapping_sub(y)),
                        B::MUL => Some(x.wrapping_mul(y)),
                        // Floor division, as TFLite's FLOOR_DIV.
                        _ => (y != 0).then(|| {
                            let q = x.wrapping_div(y);
                            q - i64::from(x.wrapping_rem(y) != 0 && ((x < 0) != (y < 0)))
                        }),
                    }
                })
                .collect::<Option<_>>()?
        }
        _ => return None,
    };
    // The values must fill the output the operator's preparation computed.
    (v.len() == out.elements.max(1) || (out.shape.is_empty() && v.len() == 1)).then_some(v)
}

/// STRIDED_SLICE of a vector (begin/end masks and shrink_axis_mask of its one axis).
fn strided_slice_1d(c: &Ctx<'_, '_>, x: &[i64]) -> Option<Vec<i64>> {
    let (mut bm, mut em, mut sm) = (0, 0, 0);
    if let Some(t) = c.options(tag::STRIDED_SLICE).ok()? {
        use schema::StridedSliceOptions as S;
        if t.i32(S::VT_ELLIPSIS_MASK, 0).ok()? != 0 || t.i32(S::VT_NEW_AXIS_MASK, 0).ok()? != 0 {
            return None;
        }
        bm = t.i32(S::VT_BEGIN_MASK, 0).ok()?;
        em = t.i32(S::VT_END_MASK, 0).ok()?;
        sm = t.i32(S::VT_SHRINK_AXIS_MASK, 0).ok()?;
    }
    let n = x.len() as i64;
    let first = |k: usize| c.const_ints(k).ok().and_then(|v| v.first().copied());
    let stride = if c.has_input(3) { first(3)? } else { 1 };
    if stride == 0 {
        return None;
    }
    let norm = |i: i64| if i < 0 { i + n } else { i };
    let mut begin = norm(first(1)?);
    if sm & 1 != 0 {
        return usize::try_from(begin)
            .ok()
            .and_then(|b| x.get(b))
            .map(|&v| alloc::vec![v]);
    }
    let mut end = norm(first(2)?);
    if bm & 1 != 0 {
        begin = if stride > 0 { 0 } else { n - 1 };
    }
    if em & 1 != 0 {
        end = if stride > 0 { n } else { -1 };
    }
    let (lo, hi) = if stride > 0 { (0, n) } else { (-1, n - 1) };
    let (mut i, end) = (begin.clamp(lo, hi), end.clamp(lo, hi));
    let mut v = Vec::new();
    while (stride > 0 && i < end) || (stride < 0 && i > end) {
        v.push(*x.get(usize::try_from(i).ok()?)?);
        i += stride;
    }
    Some(v)
}
