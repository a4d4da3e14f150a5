//! Constant-only ONNX ops that have no IR counterpart (comparisons, logic, Where, Range,
//! ConstantOfShape): the importer evaluates them when their inputs are constant, which is how
//! they appear in exported shape computations.

use crate::ir::eval::{zip_broadcast, EVAL_MAX_ELEMENTS};
use crate::ir::{shape, ConstData, DType};
use ndarray::{ArrayD, IxDyn, Zip};

fn is_float(d: &ConstData) -> bool {
    matches!(d, ConstData::F32(_) | ConstData::F16(_))
}

fn f32_array(d: &ConstData) -> ArrayD<f32> {
    ArrayD::from_shape_vec(IxDyn(&d.shape()), d.to_f32_vec()).expect("same element count")
}

fn i64_array(d: &ConstData) -> ArrayD<i64> {
    ArrayD::from_shape_vec(IxDyn(&d.shape()), d.to_i64_vec()).expect("same element count")
}

fn bool_array(d: &ConstData) -> ArrayD<bool> {
    match d.cast(DType::Bool) {
        ConstData::Bool(a) => a,
        _ => unreachable!("cast to Bool gives Bool"),
    }
}

/// Equal / Less / Greater / LessOrEqual / GreaterOrEqual.
pub fn compare(op: &str, a: &ConstData, b: &ConstData) -> Result<ConstData, String> {
    let r = if is_float(a) || is_float(b) {
        let f: fn(&f32, &f32) -> bool = match op {
            "Equal" => |x, y| x == y,
            "Less" => |x, y| x < y,
            "Greater" => |x, y| x > y,
            "LessOrEqual" => |x, y| x <= y,
            "GreaterOrEqual" => |x, y| x >= y,
            _ => return Err(format!("{op} is not a comparison")),
        };
        zip_broadcast(&f32_array(a), &f32_array(b), f)?
    } else {
        let f: fn(&i64, &i64) -> bool = match op {
            "Equal" => |x, y| x == y,
            "Less" => |x, y| x < y,
            "Greater" => |x, y| x > y,
            "LessOrEqual" => |x, y| x <= y,
            "GreaterOrEqual" => |x, y| x >= y,
            _ => return Err(format!("{op} is not a comparison")),
        };
        zip_broadcast(&i64_array(a), &i64_array(b), f)?
    };
    Ok(ConstData::Bool(r))
}

/// And / Or / Xor.
pub fn logical(op: &str, a: &ConstData, b: &ConstData) -> Result<ConstData, String> {
    let f: fn(&bool, &bool) -> bool = match op {
        "And" => |x, y| *x && *y,
        "Or" => |x, y| *x || *y,
        "Xor" => |x, y| x != y,
        _ => return Err(format!("{op} is not a logical op")),
    };
    Ok(ConstData::Bool(zip_broadcast(
        &bool_array(a),
        &bool_array(b),
        f,
    )?))
}

/// Mod with `fmod=1`: the truncated remainder, with the dividend's sign (C's `fmod`, exact).
pub fn truncated_mod(a: &ConstData, b: &ConstData) -> Result<ConstData, String> {
    if is_float(a) || is_float(b) {
        let r = zip_broadcast(&f32_array(a), &f32_array(b), |x, y| x % y)?;
        return Ok(ConstData::F32(r).cast(a.dtype()));
    }
    let (x, y) = (i64_array(a), i64_array(b));
    if y.iter().any(|&v| v == 0) {
        return Err("integer division by zero".into());
    }
    let r = zip_broadcast(&x, &y, |p, q| p.wrapping_rem(*q))?;
    Ok(ConstData::I64(r).cast(a.dtype()))
}

pub fn not(a: &ConstData) -> ConstData {
    ConstData::Bool(bool_array(a).mapv(|x| !x))
}

/// Where(cond, x, y) with three-way broadcasting; the result has x's dtype.
pub fn where_(c: &ConstData, x: &ConstData, y: &ConstData) -> Result<ConstData, String> {
    let out = shape::broadcast(&shape::broadcast(&c.shape(), &x.shape())?, &y.shape())?;
    let c = bool_array(c);
    let cv = c
        .broadcast(IxDyn(&out))
        .ok_or("condition does not broadcast")?;
    if is_float(x) {
        let (xa, ya) = (f32_array(x), f32_array(y));
        let xv = xa.broadcast(IxDyn(&out)).ok_or("x does not broadcast")?;
        let yv = ya.broadcast(IxDyn(&out)).ok_or("y does not broadcast")?;
        let r = Zip::from(&cv)
            .and(&xv)
            .and(&yv)
            .map_collect(|&c, &a, &b| if c { a } else { b });
        Ok(ConstData::F32(r).cast(x.dtype()))
    } else {
        let (xa, ya) = (i64_array(x), i64_array(y));
        let xv = xa.broadcast(IxDyn(&out)).ok_or("x does not broadcast")?;
        let yv = ya.broadcast(IxDyn(&out)).ok_or("y does not broadcast")?;
        let r = Zip::from(&cv)
            .and(&xv)
            .and(&yv)
            .map_collect(|&c, &a, &b| if c { a } else { b });
        Ok(ConstData::I64(r).cast(x.dtype()))
    }
}

/// Range(start, limit, delta) of scalars; the result has start's dtype.
pub fn range(start: &ConstData, limit: &ConstData, delta: &ConstData) -> Result<ConstData, String> {
    for (v, what) in [(start, "start"), (limit, "limit"), (delta, "delta")] {
        if v.len() != 1 {
            return Err(format!(
                "{what} must be a scalar, got shape {:?}",
                v.shape()
            ));
        }
    }
    if is_float(start) || is_float(limit) || is_float(delta) {
        let (s, l, d) = (
            start.to_f32_vec()[0] as f64,
            limit.to_f32_vec()[0] as f64,
            delta.to_f32_vec()[0] as f64,
        );
        if d == 0.0 || !d.is_finite() || !s.is_finite() || !l.is_finite() {
            return Err(format!("invalid range ({s}, {l}, {d})"));
        }
        let n = ((l - s) / d).ceil().max(0.0);
        if n > EVAL_MAX_ELEMENTS as f64 {
            return Err(format!("range of {n} elements is too large"));
        }
        let v: Vec<f32> = (0..n as usize).map(|i| (s + i as f64 * d) as f32).collect();
        Ok(ConstData::from_f32(&[v.len()], v).cast(start.dtype()))
    } else {
        let (s, l, d) = (
            start.to_i64_vec()[0],
            limit.to_i64_vec()[0],
            delta.to_i64_vec()[0],
        );
        if d == 0 {
            return Err("range delta is 0".into());
        }
        let span = (l as i128) - (s as i128);
        let d128 = d as i128;
        let n = if (span > 0) == (d > 0) && span != 0 {
            (span + d128 - d128.signum()) / d128
        } else {
            0
        };
        if n > EVAL_MAX_ELEMENTS as i128 {
            return Err(format!("range of {n} elements is too large"));
        }
        let v: Vec<i64> = (0..n).map(|i| (s as i128 + i * d128) as i64).collect();
        Ok(ConstData::from_i64(&[v.len()], v).cast(start.dtype()))
    }
}

/// A tensor of `shape` filled with the single value of `value`.
pub fn constant_of_shape(shape: &[usize], value: &ConstData) -> Result<ConstData, String> {
    if value.len() != 1 {
        return Err(format!(
            "value must have one element, got shape {:?}",
            value.shape()
        ));
    }
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= EVAL_MAX_ELEMENTS)
        .ok_or_else(|| format!("constant of shape {shape:?} is too large"))?;
    let scalar = value.reshape(&[]);
    let op = crate::ir::Op::Expand {
        shape: shape.to_vec(),
    };
    match crate::ir::eval::eval(&op, &[&scalar]) {
        Some(Ok(mut v)) if v.len() == 1 => Ok(v.remove(0)),
        Some(Err(e)) => Err(e),
        _ => Err(format!("constant of shape {shape:?} is too large")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds() {
        let a = ConstData::from_i64(&[3], vec![1, 2, 3]);
        let b = ConstData::from_i64(&[], vec![2]);
        assert_eq!(
            compare("Equal", &a, &b).unwrap().to_i64_vec(),
            vec![0, 1, 0]
        );
        assert_eq!(compare("Less", &a, &b).unwrap().to_i64_vec(), vec![1, 0, 0]);
        let c = compare("Greater", &a, &b).unwrap();
        assert_eq!(not(&c).to_i64_vec(), vec![1, 1, 0]);
        let w = where_(&c, &a, &ConstData::from_i64(&[], vec![-1])).unwrap();
        assert_eq!(w, ConstData::from_i64(&[3], vec![-1, -1, 3]));
        assert_eq!(
            range(
                &ConstData::from_i64(&[], vec![0]),
                &ConstData::from_i64(&[], vec![5]),
                &ConstData::from_i64(&[], vec![2])
            )
            .unwrap(),
            ConstData::from_i64(&[3], vec![0, 2, 4])
        );
        assert_eq!(
            range(
                &ConstData::from_i64(&[], vec![5]),
                &ConstData::from_i64(&[], vec![0]),
                &ConstData::from_i64(&[], vec![-2])
            )
            .unwrap(),
            ConstData::from_i64(&[3], vec![5, 3, 1])
        );
        assert_eq!(
            constant_of_shape(&[2, 2], &ConstData::from_f32(&[1], vec![1.5])).unwrap(),
            ConstData::from_f32(&[2, 2], vec![1.5; 4])
        );
        assert!(
            constant_of_shape(&[1 << 40, 1 << 40], &ConstData::from_f32(&[1], vec![0.0])).is_err()
        );
    }
}
