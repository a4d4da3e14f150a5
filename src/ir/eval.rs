//! Evaluation of ops on constant inputs, with ndarray.
//!
//! The importer uses it to fold PyTorch's shape subgraphs as it builds the graph; passes use it to
//! fold constant subgraphs. Only ops that are cheap and exact to evaluate are covered; `eval`
//! returns `None` for the others (convolutions, matrix products, normalizations, resizes).

use super::{shape, BinaryOp, ConstData, DType, Op, PadMode, ReduceOp, UnaryOp};
use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, Slice, Zip};

/// Results larger than this many elements are not evaluated (`eval` returns `None`).
pub const EVAL_MAX_ELEMENTS: usize = 1 << 26;

/// Element types `ConstData` holds, with the conversions the evaluator needs.
trait El: Clone + Copy + PartialOrd + 'static {
    fn from_f32(v: f32) -> Self;
}

macro_rules! el_int {
    ($($t:ty),*) => {$(
        impl El for $t {
            fn from_f32(v: f32) -> Self {
                v as $t
            }
        }
    )*};
}
el_int!(i32, i64, i8, i16, u8);

impl El for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
}

impl El for half::f16 {
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
}

impl El for bool {
    fn from_f32(v: f32) -> Self {
        v != 0.0
    }
}

/// Applies a generic expression to whichever array a `ConstData` holds, rewrapping the result.
macro_rules! map_data {
    ($d:expr, $a:ident => $e:expr) => {
        match $d {
            ConstData::F32($a) => ConstData::F32($e),
            ConstData::F16($a) => ConstData::F16($e),
            ConstData::I32($a) => ConstData::I32($e),
            ConstData::I64($a) => ConstData::I64($e),
            ConstData::I8($a) => ConstData::I8($e),
            ConstData::I16($a) => ConstData::I16($e),
            ConstData::U8($a) => ConstData::U8($e),
            ConstData::Bool($a) => ConstData::Bool($e),
        }
    };
}

/// Evaluates `op` on constant `inputs`. `None` when the op is not evaluated here (or the result
/// would be larger than [`EVAL_MAX_ELEMENTS`]); `Some(Err)` when the inputs are invalid for it.
pub fn eval(op: &Op, inputs: &[&ConstData]) -> Option<Result<Vec<ConstData>, String>> {
    let x = *inputs.first()?;
    let need = |n: usize| -> Result<(), String> {
        if inputs.len() < n {
            Err(format!(
                "{} expects {n} inputs, got {}",
                op.name(),
                inputs.len()
            ))
        } else {
            Ok(())
        }
    };
    let one = |r: Result<ConstData, String>| Some(r.map(|d| vec![d]));
    match op {
        Op::Binary { op: b, activation } => {
            if let Err(e) = need(2) {
                return Some(Err(e));
            }
            if *activation != super::Activation::None {
                return None;
            }
            one(binary(*b, x, inputs[1]))
        }
        Op::Unary(u) => one(Ok(unary(*u, x))),
        Op::PRelu => {
            if let Err(e) = need(2) {
                return Some(Err(e));
            }
            one(float_binary(
                x,
                inputs[1],
                |v, s| if v < 0.0 { v * s } else { v },
            ))
        }
        Op::Clip { min, max } => one(Ok(clip(x, *min, *max))),
        Op::HardSigmoid { alpha, beta } => {
            let (a, b) = (*alpha, *beta);
            one(Ok(float_map(x, |v| (a * v + b).clamp(0.0, 1.0))))
        }
        Op::Softmax { axis } => one(softmax(x, *axis, false)),
        Op::LogSoftmax { axis } => one(softmax(x, *axis, true)),
        Op::Reshape { shape } => one(reshape(x, shape)),
        Op::Transpose { perm } => one(transpose(x, perm)),
        Op::Concat { axis } => one(concat(inputs, *axis)),
        Op::Split { axis, sizes } => Some(split(x, *axis, sizes)),
        Op::Slice {
            begins,
            ends,
            steps,
        } => one(slice(x, begins, ends, steps)),
        Op::Gather { axis } => {
            if let Err(e) = need(2) {
                return Some(Err(e));
            }
            one(gather(x, inputs[1], *axis))
        }
        Op::Expand { shape: target } => {
            let out = match shape::broadcast(&x.shape(), target) {
                Ok(s) => s,
                Err(e) => return Some(Err(e)),
            };
            if !small(&out) {
                return None;
            }
            one(expand(x, &out))
        }
        Op::Tile { reps } => {
            let s = x.shape();
            if reps.len() != s.len() {
                return Some(Err("tile repeats must cover every axis".into()));
            }
            let out: Option<Vec<usize>> =
                s.iter().zip(reps).map(|(d, r)| d.checked_mul(*r)).collect();
            match out {
                Some(o) if small(&o) => one(Ok(tile(x, reps))),
                _ => None,
            }
        }
        Op::Pad {
            before,
            after,
            mode,
            value,
        } => {
            let s = x.shape();
            if before.len() != s.len() || after.len() != s.len() {
                return Some(Err("pads must cover every axis".into()));
            }
            let out: Option<Vec<usize>> = (0..s.len())
                .map(|i| s[i].checked_add(before[i])?.checked_add(after[i]))
                .collect();
            match out {
                Some(o) if small(&o) => one(pad(x, before, after, *mode, *value)),
                _ => None,
            }
        }
        Op::Reduce {
            op: r,
            axes,
            keep_dims,
        } => one(reduce(*r, x, axes, *keep_dims)),
        Op::ArgMax { axis, keep_dims } => one(argmax(x, *axis, *keep_dims)),
        Op::Cast { to } => one(Ok(x.cast(*to))),
        // Only float16 is evaluated: integer data needs its tensor's quantization parameters.
        Op::Dequantize if x.dtype() == DType::F16 => one(Ok(x.cast(DType::F32))),
        Op::Dequantize | Op::Quantize => None,
        Op::Conv2d { .. }
        | Op::ConvTranspose2d { .. }
        | Op::FullyConnected { .. }
        | Op::MatMul { .. }
        | Op::Pool2d { .. }
        | Op::LayerNorm { .. }
        | Op::BatchNorm { .. }
        | Op::Resize { .. }
        // Constant comparisons, logic and Where are folded by the importer (`import::fold`).
        | Op::ArgMin { .. }
        | Op::Compare { .. }
        | Op::Logical { .. }
        | Op::Not
        | Op::Where
        | Op::TopK { .. }
        | Op::DepthToSpace { .. }
        | Op::SpaceToDepth { .. }
        | Op::CumSum { .. }
        | Op::DynamicUpdateSlice
        | Op::SequenceLstm { .. }
        | Op::If { .. }
        | Op::While { .. } => None,
    }
}

fn small(shape: &[usize]) -> bool {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .is_some_and(|n| n <= EVAL_MAX_ELEMENTS)
}

fn is_float(d: &ConstData) -> bool {
    matches!(d, ConstData::F32(_) | ConstData::F16(_))
}

fn to_f32_array(d: &ConstData) -> ArrayD<f32> {
    match d {
        ConstData::F32(a) => a.clone(),
        other => match other.cast(DType::F32) {
            ConstData::F32(a) => a,
            _ => unreachable!("cast to F32 gives F32"),
        },
    }
}

fn to_i64_array(d: &ConstData) -> ArrayD<i64> {
    match d {
        ConstData::I64(a) => a.clone(),
        other => match other.cast(DType::I64) {
            ConstData::I64(a) => a,
            _ => unreachable!("cast to I64 gives I64"),
        },
    }
}

/// Broadcasts `a` and `b` to `shape` and combines them elementwise.
pub(crate) fn zip_broadcast<A: Clone, B: Clone, C>(
    a: &ArrayD<A>,
    b: &ArrayD<B>,
    f: impl Fn(&A, &B) -> C,
) -> Result<ArrayD<C>, String> {
    let out = shape::broadcast(a.shape(), b.shape())?;
    let av = a
        .broadcast(IxDyn(&out))
        .ok_or_else(|| format!("cannot broadcast {:?} to {out:?}", a.shape()))?;
    let bv = b
        .broadcast(IxDyn(&out))
        .ok_or_else(|| format!("cannot broadcast {:?} to {out:?}", b.shape()))?;
    Ok(Zip::from(&av).and(&bv).map_collect(f))
}

/// The dtype a binary op on `a` and `b` produces (ONNX wants equal types; mixed ones promote).
fn result_dtype(a: &ConstData, b: &ConstData) -> DType {
    if is_float(a) || !is_float(b) {
        a.dtype()
    } else {
        b.dtype()
    }
}

/// TFLite's float FLOOR_MOD: the truncated remainder, moved by `y` when its sign differs
/// from `y`'s.
fn floor_mod_f32(x: f32, y: f32) -> f32 {
    let r = x % y;
    if r != 0.0 && ((y < 0.0) != (r < 0.0)) {
        r + y
    } else {
        r
    }
}

fn float_binary(
    a: &ConstData,
    b: &ConstData,
    f: impl Fn(f32, f32) -> f32,
) -> Result<ConstData, String> {
    let dt = result_dtype(a, b);
    let r = zip_broadcast(&to_f32_array(a), &to_f32_array(b), |&x, &y| f(x, y))?;
    Ok(ConstData::F32(r).cast(dt))
}

/// Elementwise binary op with numpy broadcasting (integers in wrapping i64 arithmetic).
pub fn binary(op: BinaryOp, a: &ConstData, b: &ConstData) -> Result<ConstData, String> {
    if is_float(a) || is_float(b) {
        let f: fn(f32, f32) -> f32 = match op {
            BinaryOp::Add => |x, y| x + y,
            BinaryOp::Sub => |x, y| x - y,
            BinaryOp::Mul => |x, y| x * y,
            BinaryOp::Div => |x, y| x / y,
            BinaryOp::Pow => f32::powf,
            BinaryOp::Max => f32::max,
            BinaryOp::Min => f32::min,
            BinaryOp::SquaredDifference => |x, y| (x - y) * (x - y),
            BinaryOp::FloorMod => floor_mod_f32,
        };
        return float_binary(a, b, f);
    }
    let (x, y) = (to_i64_array(a), to_i64_array(b));
    if matches!(op, BinaryOp::Div | BinaryOp::FloorMod) && y.iter().any(|&v| v == 0) {
        return Err("integer division by zero".into());
    }
    let f: fn(i64, i64) -> i64 = match op {
        BinaryOp::Add => i64::wrapping_add,
        BinaryOp::Sub => i64::wrapping_sub,
        BinaryOp::Mul => i64::wrapping_mul,
        BinaryOp::Div => i64::wrapping_div,
        BinaryOp::Pow => |x, y| {
            if y < 0 {
                (x as f64).powf(y as f64) as i64
            } else {
                x.wrapping_pow(y.min(u32::MAX as i64) as u32)
            }
        },
        BinaryOp::Max => i64::max,
        BinaryOp::Min => i64::min,
        BinaryOp::SquaredDifference => |x, y| {
            let d = x.wrapping_sub(y);
            d.wrapping_mul(d)
        },
        BinaryOp::FloorMod => |x, y| {
            let r = x.wrapping_rem(y);
            if r != 0 && ((r < 0) != (y < 0)) {
                r + y
            } else {
                r
            }
        },
    };
    let r = zip_broadcast(&x, &y, |&p, &q| f(p, q))?;
    Ok(ConstData::I64(r).cast(result_dtype(a, b)))
}

fn float_map(x: &ConstData, f: impl Fn(f32) -> f32) -> ConstData {
    ConstData::F32(to_f32_array(x).mapv(f)).cast(x.dtype())
}

/// The error function (Abramowitz & Stegun 7.1.26 refined; |error| < 1.2e-7).
pub fn erf(x: f32) -> f32 {
    // W. J. Cody's rational approximation is overkill here; this uses the complementary error
    // function's Chebyshev fit from Numerical Recipes (erfc, fractional error < 1.2e-7).
    let z = (x as f64).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    let v = 1.0 - r;
    (if x >= 0.0 { v } else { -v }) as f32
}

fn unary_f32(u: UnaryOp, v: f32) -> f32 {
    match u {
        UnaryOp::Abs => v.abs(),
        UnaryOp::Neg => -v,
        UnaryOp::Exp => v.exp(),
        UnaryOp::Log => v.ln(),
        UnaryOp::Sqrt => v.sqrt(),
        UnaryOp::Rsqrt => 1.0 / v.sqrt(),
        UnaryOp::Relu => v.max(0.0),
        UnaryOp::Relu6 => v.clamp(0.0, 6.0),
        UnaryOp::ReluN1To1 => v.clamp(-1.0, 1.0),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
        UnaryOp::Tanh => v.tanh(),
        UnaryOp::HardSwish => v * (v + 3.0).clamp(0.0, 6.0) / 6.0,
        UnaryOp::Silu => v / (1.0 + (-v).exp()),
        UnaryOp::Gelu { approximate: true } => {
            let c = (2.0 / std::f32::consts::PI).sqrt();
            0.5 * v * (1.0 + (c * (v + 0.044_715 * v * v * v)).tanh())
        }
        UnaryOp::Gelu { approximate: false } => 0.5 * v * (1.0 + erf(v / std::f32::consts::SQRT_2)),
        UnaryOp::Erf => erf(v),
        UnaryOp::Floor => v.floor(),
        UnaryOp::Ceil => v.ceil(),
        UnaryOp::Round => v.round_ties_even(),
        UnaryOp::Sin => v.sin(),
        UnaryOp::Cos => v.cos(),
        UnaryOp::LeakyRelu { alpha } => {
            if v < 0.0 {
                alpha * v
            } else {
                v
            }
        }
    }
}

/// Elementwise unary op (integers exactly where the op is integral, else through f32).
pub fn unary(u: UnaryOp, x: &ConstData) -> ConstData {
    if !is_float(x) {
        let f: Option<fn(i64) -> i64> = match u {
            UnaryOp::Abs => Some(i64::wrapping_abs),
            UnaryOp::Neg => Some(i64::wrapping_neg),
            UnaryOp::Relu => Some(|v| v.max(0)),
            UnaryOp::Relu6 => Some(|v| v.clamp(0, 6)),
            UnaryOp::ReluN1To1 => Some(|v| v.clamp(-1, 1)),
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => Some(|v| v),
            _ => None,
        };
        if let Some(f) = f {
            return ConstData::I64(to_i64_array(x).mapv(f)).cast(x.dtype());
        }
    }
    float_map(x, |v| unary_f32(u, v))
}

fn clip(x: &ConstData, min: f32, max: f32) -> ConstData {
    if is_float(x) {
        return float_map(x, |v| v.max(min).min(max));
    }
    let lo = if min.is_finite() {
        min.ceil() as i64
    } else if min > 0.0 {
        i64::MAX
    } else {
        i64::MIN
    };
    let hi = if max.is_finite() {
        max.floor() as i64
    } else if max > 0.0 {
        i64::MAX
    } else {
        i64::MIN
    };
    ConstData::I64(to_i64_array(x).mapv(|v| v.max(lo).min(hi))).cast(x.dtype())
}

fn check_axis(axis: usize, rank: usize) -> Result<(), String> {
    if axis >= rank {
        Err(format!("axis {axis} out of range for rank {rank}"))
    } else {
        Ok(())
    }
}

fn softmax(x: &ConstData, axis: usize, log: bool) -> Result<ConstData, String> {
    let mut a = to_f32_array(x);
    check_axis(axis, a.ndim())?;
    for mut lane in a.lanes_mut(Axis(axis)) {
        let m = lane.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = lane.iter().map(|&v| (v - m).exp()).sum();
        if log {
            let ls = sum.ln();
            lane.mapv_inplace(|v| v - m - ls);
        } else {
            lane.mapv_inplace(|v| (v - m).exp() / sum);
        }
    }
    Ok(ConstData::F32(a).cast(x.dtype()))
}

fn reshape_arr<T: Clone>(a: &ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>, String> {
    a.as_standard_layout()
        .into_owned()
        .into_shape_with_order(IxDyn(shape))
        .map_err(|_| format!("cannot reshape {:?} to {shape:?}", a.shape()))
}

fn reshape(x: &ConstData, shape: &[usize]) -> Result<ConstData, String> {
    Ok(map_data!(x, a => reshape_arr(a, shape)?))
}

fn transpose(x: &ConstData, perm: &[usize]) -> Result<ConstData, String> {
    let rank = x.shape().len();
    let mut sorted = perm.to_vec();
    sorted.sort_unstable();
    if sorted != (0..rank).collect::<Vec<_>>() {
        return Err(format!("{perm:?} is not a permutation of rank {rank}"));
    }
    Ok(x.permute(perm))
}

fn concat(inputs: &[&ConstData], axis: usize) -> Result<ConstData, String> {
    let first = inputs[0];
    let rank = first.shape().len();
    check_axis(axis, rank)?;
    let dt = first.dtype();
    let cast: Vec<ConstData> = inputs.iter().map(|d| d.cast(dt)).collect();
    fn cat<T: Clone>(arrays: Vec<&ArrayD<T>>, axis: usize) -> Result<ArrayD<T>, String> {
        let views: Vec<ArrayViewD<T>> = arrays.iter().map(|a| a.view()).collect();
        ndarray::concatenate(Axis(axis), &views).map_err(|e| format!("cannot concatenate: {e}"))
    }
    macro_rules! cat_as {
        ($v:ident) => {
            ConstData::$v(cat(
                cast.iter()
                    .map(|d| match d {
                        ConstData::$v(a) => a,
                        _ => unreachable!("all inputs cast to the same dtype"),
                    })
                    .collect(),
                axis,
            )?)
        };
    }
    Ok(match dt {
        DType::F32 => cat_as!(F32),
        DType::F16 => cat_as!(F16),
        DType::I32 => cat_as!(I32),
        DType::I64 => cat_as!(I64),
        DType::I8 => cat_as!(I8),
        DType::I16 => cat_as!(I16),
        DType::U8 => cat_as!(U8),
        DType::Bool => cat_as!(Bool),
    })
}

fn split(x: &ConstData, axis: usize, sizes: &[usize]) -> Result<Vec<ConstData>, String> {
    let s = x.shape();
    check_axis(axis, s.len())?;
    if sizes.iter().try_fold(0usize, |a, &b| a.checked_add(b)) != Some(s[axis]) {
        return Err(format!(
            "split sizes {sizes:?} do not add up to {}",
            s[axis]
        ));
    }
    let mut out = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for &n in sizes {
        let sl = Slice::from(start..start + n);
        out.push(map_data!(x, a => a.slice_axis(Axis(axis), sl).to_owned()));
        start += n;
    }
    Ok(out)
}

/// Picks `idx[i]` along each axis i (None = the whole axis).
fn select_axes<T: Clone>(a: &ArrayD<T>, idx: &[Option<Vec<usize>>]) -> ArrayD<T> {
    let mut r = a.clone();
    for (ax, sel) in idx.iter().enumerate() {
        if let Some(sel) = sel {
            r = r.select(Axis(ax), sel);
        }
    }
    r
}

fn slice(x: &ConstData, begins: &[i64], ends: &[i64], steps: &[i64]) -> Result<ConstData, String> {
    let s = x.shape();
    let rank = s.len();
    if begins.len() != rank || ends.len() != rank || steps.len() != rank {
        return Err("slice parameters must cover every axis".into());
    }
    let mut idx = Vec::with_capacity(rank);
    for i in 0..rank {
        let n = shape::slice_len(s[i], begins[i], ends[i], steps[i])?;
        let (b, _) = shape::clamp_slice(s[i], begins[i], ends[i], steps[i]);
        let step = steps[i];
        if n == s[i] && step == 1 {
            idx.push(None);
            continue;
        }
        // b is in [0, dim] and n steps stay in range, so no overflow.
        idx.push(Some(
            (0..n as i64).map(|k| (b + k * step) as usize).collect(),
        ));
    }
    Ok(map_data!(x, a => select_axes(a, &idx)))
}

fn gather(x: &ConstData, indices: &ConstData, axis: usize) -> Result<ConstData, String> {
    let s = x.shape();
    check_axis(axis, s.len())?;
    if is_float(indices) {
        return Err("gather indices must be integers".into());
    }
    let dim = s[axis] as i64;
    let idx = indices
        .to_i64_vec()
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + dim } else { i };
            if (0..dim).contains(&j) {
                Ok(j as usize)
            } else {
                Err(format!(
                    "gather index {i} out of range for axis of length {dim}"
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut out_shape = s[..axis].to_vec();
    out_shape.extend(indices.shape());
    out_shape.extend(&s[axis + 1..]);
    let mut sel = vec![None; s.len()];
    sel[axis] = Some(idx);
    Ok(map_data!(x, a => reshape_arr(&select_axes(a, &sel), &out_shape)?))
}

fn expand(x: &ConstData, out: &[usize]) -> Result<ConstData, String> {
    Ok(map_data!(x, a => a
        .broadcast(IxDyn(out))
        .ok_or_else(|| format!("cannot expand {:?} to {out:?}", a.shape()))?
        .to_owned()))
}

fn tile(x: &ConstData, reps: &[usize]) -> ConstData {
    let s = x.shape();
    let idx: Vec<Option<Vec<usize>>> = s
        .iter()
        .zip(reps)
        .map(|(&d, &r)| (r != 1).then(|| (0..d * r).map(|i| i % d).collect()))
        .collect();
    map_data!(x, a => select_axes(a, &idx))
}

fn pad_const<T: El>(a: &ArrayD<T>, before: &[usize], after: &[usize], value: f32) -> ArrayD<T> {
    let out: Vec<usize> = (0..a.ndim())
        .map(|i| a.shape()[i] + before[i] + after[i])
        .collect();
    let mut r = ArrayD::from_elem(IxDyn(&out), T::from_f32(value));
    let shape = a.shape().to_vec();
    r.slice_each_axis_mut(|ax| {
        let i = ax.axis.index();
        Slice::from(before[i]..before[i] + shape[i])
    })
    .assign(a);
    r
}

fn pad(
    x: &ConstData,
    before: &[usize],
    after: &[usize],
    mode: PadMode,
    value: f32,
) -> Result<ConstData, String> {
    let s = x.shape();
    if mode == PadMode::Constant {
        return Ok(map_data!(x, a => pad_const(a, before, after, value)));
    }
    let mut idx = Vec::with_capacity(s.len());
    for i in 0..s.len() {
        let d = s[i] as i64;
        if before[i] == 0 && after[i] == 0 {
            idx.push(None);
            continue;
        }
        if d == 0 {
            return Err("cannot reflect-pad an empty axis".into());
        }
        let lim = match mode {
            PadMode::Reflect => d - 1,
            _ => d,
        };
        if before[i] as i64 > lim || after[i] as i64 > lim {
            return Err(format!(
                "pads ({}, {}) too large for axis {i} of length {d}",
                before[i], after[i]
            ));
        }
        let sel = (-(before[i] as i64)..d + after[i] as i64)
            .map(|p| {
                let q = if p < 0 {
                    match mode {
                        PadMode::Reflect => -p,
                        _ => -p - 1,
                    }
                } else if p >= d {
                    match mode {
                        PadMode::Reflect => 2 * (d - 1) - p,
                        _ => 2 * d - 1 - p,
                    }
                } else {
                    p
                };
                q.clamp(0, d - 1) as usize
            })
            .collect();
        idx.push(Some(sel));
    }
    Ok(map_data!(x, a => select_axes(a, &idx)))
}

fn reduce(op: ReduceOp, x: &ConstData, axes: &[usize], keep: bool) -> Result<ConstData, String> {
    let s = x.shape();
    for &a in axes {
        check_axis(a, s.len())?;
    }
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let out_shape = shape::reduced_shape(&s, &sorted, keep);
    let count: usize = sorted.iter().map(|&a| s[a]).product();
    if is_float(x) {
        let mut r = to_f32_array(x);
        for &ax in sorted.iter().rev() {
            r = match op {
                ReduceOp::Sum | ReduceOp::Mean => r.sum_axis(Axis(ax)),
                ReduceOp::Prod => r.fold_axis(Axis(ax), 1.0, |a, b| a * b),
                ReduceOp::Max => r.fold_axis(Axis(ax), f32::NEG_INFINITY, |a, b| a.max(*b)),
                ReduceOp::Min => r.fold_axis(Axis(ax), f32::INFINITY, |a, b| a.min(*b)),
            };
        }
        if op == ReduceOp::Mean {
            let n = count as f32;
            r.mapv_inplace(|v| v / n);
        }
        Ok(ConstData::F32(reshape_arr(&r, &out_shape)?).cast(x.dtype()))
    } else {
        let mut r = to_i64_array(x);
        for &ax in sorted.iter().rev() {
            r = match op {
                ReduceOp::Sum | ReduceOp::Mean => {
                    r.fold_axis(Axis(ax), 0, |a, b| a.wrapping_add(*b))
                }
                ReduceOp::Prod => r.fold_axis(Axis(ax), 1, |a, b| a.wrapping_mul(*b)),
                ReduceOp::Max => r.fold_axis(Axis(ax), i64::MIN, |a, b| *a.max(b)),
                ReduceOp::Min => r.fold_axis(Axis(ax), i64::MAX, |a, b| *a.min(b)),
            };
        }
        if op == ReduceOp::Mean {
            if count == 0 {
                return Err("mean over an empty axis".into());
            }
            let n = count as i64;
            r.mapv_inplace(|v| v / n);
        }
        Ok(ConstData::I64(reshape_arr(&r, &out_shape)?).cast(x.dtype()))
    }
}

fn argmax(x: &ConstData, axis: usize, keep: bool) -> Result<ConstData, String> {
    let s = x.shape();
    check_axis(axis, s.len())?;
    if s[axis] == 0 {
        return Err("argmax over an empty axis".into());
    }
    let a = to_f32_array(x);
    let r = a.map_axis(Axis(axis), |lane| {
        let mut best = 0;
        for (i, &v) in lane.iter().enumerate() {
            if v > lane[best] {
                best = i;
            }
        }
        best as i64
    });
    let out_shape = shape::reduced_shape(&s, &[axis], keep);
    Ok(ConstData::I64(reshape_arr(&r, &out_shape)?))
}

#[cfg(test)]
#[path = "eval_tests.rs"]
mod tests;
