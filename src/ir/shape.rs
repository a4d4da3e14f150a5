//! Output shape and type inference for every op, given its input tensors.

use super::{DType, Layout, Op, Tensor};

/// Numpy-style broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
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
            return Err(format!("shapes {a:?} and {b:?} do not broadcast"));
        };
    }
    Ok(out)
}

/// Output size of a convolution or pooling window along one axis.
pub fn window_out(
    input: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad: usize,
) -> Result<usize, String> {
    let eff = (kernel - 1) * dilation + 1;
    let padded = input + pad;
    if padded < eff || stride == 0 {
        return Err(format!(
            "window {kernel} (dilation {dilation}) larger than padded input {padded}"
        ));
    }
    Ok((padded - eff) / stride + 1)
}

/// (H axis, W axis, C axis) of a 4-D image tensor in `layout`.
pub fn image_axes(layout: Layout) -> (usize, usize, usize) {
    match layout {
        Layout::Nchw => (2, 3, 1),
        Layout::Nhwc => (1, 2, 3),
    }
}

fn image_shape(layout: Layout, n: usize, c: usize, h: usize, w: usize) -> Vec<usize> {
    match layout {
        Layout::Nchw => vec![n, c, h, w],
        Layout::Nhwc => vec![n, h, w, c],
    }
}

/// Infers (shape, dtype) of each output of `op` applied to `inputs`.
pub fn infer(op: &Op, inputs: &[&Tensor]) -> Result<Vec<(Vec<usize>, DType)>, String> {
    let x = inputs.first().ok_or("op has no input")?;
    let rank = x.shape.len();
    let need = |n: usize| -> Result<(), String> {
        if inputs.len() < n {
            Err(format!("expects {n} inputs, got {}", inputs.len()))
        } else {
            Ok(())
        }
    };
    let check_axis = |axis: usize| -> Result<(), String> {
        if axis >= rank.max(1) {
            Err(format!("axis {axis} out of range for rank {rank}"))
        } else {
            Ok(())
        }
    };
    let same = || Ok(vec![(x.shape.clone(), x.dtype)]);
    match op {
        Op::Conv2d {
            strides,
            dilations,
            pads,
            group,
            layout,
            ..
        } => {
            need(2)?;
            let w = &inputs[1].shape;
            if rank != 4 || w.len() != 4 {
                return Err(format!(
                    "expects 4-D data and weights, got {:?} and {:?}",
                    x.shape, w
                ));
            }
            let (ha, wa, ca) = image_axes(*layout);
            let (o, wi, kh, kw) = match layout {
                Layout::Nchw => (w[0], w[1], w[2], w[3]),
                Layout::Nhwc => (w[0], w[3], w[1], w[2]),
            };
            let c = x.shape[ca];
            // Depthwise weights in NHWC are [1, KH, KW, C*m].
            let depthwise_nhwc = *layout == Layout::Nhwc && *group == c && *group > 1;
            let (o, wi) = if depthwise_nhwc { (w[3], 1) } else { (o, wi) };
            if *group == 0 || c != wi * group || o % group != 0 {
                return Err(format!(
                    "{c} input channels do not match weights {w:?} with group {group}"
                ));
            }
            let oh = window_out(x.shape[ha], kh, strides[0], dilations[0], pads[0] + pads[2])?;
            let ow = window_out(x.shape[wa], kw, strides[1], dilations[1], pads[1] + pads[3])?;
            Ok(vec![(image_shape(*layout, x.shape[0], o, oh, ow), x.dtype)])
        }
        Op::ConvTranspose2d {
            output_size,
            layout,
            ..
        } => {
            need(2)?;
            let w = &inputs[1].shape;
            if rank != 4 || w.len() != 4 {
                return Err(format!(
                    "expects 4-D data and weights, got {:?} and {:?}",
                    x.shape, w
                ));
            }
            let o = match layout {
                Layout::Nchw => w[1],
                Layout::Nhwc => w[0],
            };
            Ok(vec![(
                image_shape(*layout, x.shape[0], o, output_size[0], output_size[1]),
                x.dtype,
            )])
        }
        Op::FullyConnected { .. } => {
            need(2)?;
            let w = &inputs[1].shape;
            if w.len() != 2 || rank == 0 || x.shape[rank - 1] != w[1] {
                return Err(format!(
                    "input {:?} does not match weights {:?}",
                    x.shape, w
                ));
            }
            let mut s = x.shape.clone();
            s[rank - 1] = w[0];
            Ok(vec![(s, x.dtype)])
        }
        Op::MatMul {
            transpose_a,
            transpose_b,
        } => {
            need(2)?;
            let (a, b) = (&x.shape, &inputs[1].shape);
            if a.len() < 2 || b.len() < 2 {
                return Err(format!("expects rank ≥ 2 operands, got {a:?} and {b:?}"));
            }
            let (m, ka) = if *transpose_a {
                (a[a.len() - 1], a[a.len() - 2])
            } else {
                (a[a.len() - 2], a[a.len() - 1])
            };
            let (kb, n) = if *transpose_b {
                (b[b.len() - 1], b[b.len() - 2])
            } else {
                (b[b.len() - 2], b[b.len() - 1])
            };
            if ka != kb {
                return Err(format!("inner dimensions differ: {a:?} x {b:?}"));
            }
            let mut s = broadcast(&a[..a.len() - 2], &b[..b.len() - 2])?;
            s.extend([m, n]);
            Ok(vec![(s, x.dtype)])
        }
        Op::Binary { .. } | Op::PRelu => {
            need(2)?;
            Ok(vec![(broadcast(&x.shape, &inputs[1].shape)?, x.dtype)])
        }
        Op::Unary(_) | Op::Clip { .. } | Op::HardSigmoid { .. } | Op::Dequantize | Op::Quantize => {
            let dt = match op {
                Op::Dequantize => DType::F32,
                Op::Quantize => DType::I8,
                _ => x.dtype,
            };
            Ok(vec![(x.shape.clone(), dt)])
        }
        Op::Softmax { axis } | Op::LogSoftmax { axis } => {
            check_axis(*axis)?;
            same()
        }
        Op::LayerNorm { axis, .. } => {
            check_axis(*axis)?;
            same()
        }
        Op::BatchNorm { .. } => same(),
        Op::Pool2d {
            kernel,
            strides,
            pads,
            layout,
            ..
        } => {
            if rank != 4 {
                return Err(format!("expects 4-D data, got {:?}", x.shape));
            }
            let (ha, wa, ca) = image_axes(*layout);
            let oh = window_out(x.shape[ha], kernel[0], strides[0], 1, pads[0] + pads[2])?;
            let ow = window_out(x.shape[wa], kernel[1], strides[1], 1, pads[1] + pads[3])?;
            Ok(vec![(
                image_shape(*layout, x.shape[0], x.shape[ca], oh, ow),
                x.dtype,
            )])
        }
        Op::Reduce {
            axes, keep_dims, ..
        } => {
            for &a in axes {
                check_axis(a)?;
            }
            let s = reduced_shape(&x.shape, axes, *keep_dims);
            Ok(vec![(s, x.dtype)])
        }
        Op::ArgMax { axis, keep_dims } | Op::ArgMin { axis, keep_dims } => {
            check_axis(*axis)?;
            Ok(vec![(
                reduced_shape(&x.shape, &[*axis], *keep_dims),
                // Indices are int32 in TFLite (litecvt narrows every int64 value on import).
                DType::I32,
            )])
        }
        Op::Concat { axis } => {
            check_axis(*axis)?;
            let mut s = x.shape.clone();
            s[*axis] = 0;
            for t in inputs {
                if t.shape.len() != rank
                    || t.shape
                        .iter()
                        .enumerate()
                        .any(|(i, &d)| i != *axis && d != x.shape[i])
                {
                    return Err(format!(
                        "cannot concatenate {:?} with {:?} on axis {axis}",
                        x.shape, t.shape
                    ));
                }
                s[*axis] += t.shape[*axis];
            }
            Ok(vec![(s, x.dtype)])
        }
        Op::Split { axis, sizes } => {
            check_axis(*axis)?;
            if sizes.iter().sum::<usize>() != x.shape[*axis] {
                return Err(format!(
                    "split sizes {sizes:?} do not add up to {}",
                    x.shape[*axis]
                ));
            }
            Ok(sizes
                .iter()
                .map(|&n| {
                    let mut s = x.shape.clone();
                    s[*axis] = n;
                    (s, x.dtype)
                })
                .collect())
        }
        Op::Slice {
            begins,
            ends,
            steps,
        } => {
            if begins.len() != rank || ends.len() != rank || steps.len() != rank {
                return Err("slice parameters must cover every axis".into());
            }
            let s = (0..rank)
                .map(|i| slice_len(x.shape[i], begins[i], ends[i], steps[i]))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(vec![(s, x.dtype)])
        }
        Op::Gather { axis } => {
            need(2)?;
            check_axis(*axis)?;
            let mut s = x.shape[..*axis].to_vec();
            s.extend(&inputs[1].shape);
            s.extend(&x.shape[axis + 1..]);
            Ok(vec![(s, x.dtype)])
        }
        Op::Reshape { shape } => {
            if shape.iter().product::<usize>() != x.elements() {
                return Err(format!("cannot reshape {:?} to {shape:?}", x.shape));
            }
            Ok(vec![(shape.clone(), x.dtype)])
        }
        Op::Transpose { perm } => {
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..rank).collect::<Vec<_>>() {
                return Err(format!("{perm:?} is not a permutation of rank {rank}"));
            }
            Ok(vec![(perm.iter().map(|&p| x.shape[p]).collect(), x.dtype)])
        }
        Op::Expand { shape } => Ok(vec![(broadcast(&x.shape, shape)?, x.dtype)]),
        Op::Tile { reps } => {
            if reps.len() != rank {
                return Err("tile repeats must cover every axis".into());
            }
            Ok(vec![(
                x.shape.iter().zip(reps).map(|(d, r)| d * r).collect(),
                x.dtype,
            )])
        }
        Op::Pad { before, after, .. } => {
            if before.len() != rank || after.len() != rank {
                return Err("pads must cover every axis".into());
            }
            Ok(vec![(
                (0..rank)
                    .map(|i| x.shape[i] + before[i] + after[i])
                    .collect(),
                x.dtype,
            )])
        }
        Op::Resize { size, layout, .. } => {
            if rank != 4 {
                return Err(format!("expects 4-D data, got {:?}", x.shape));
            }
            let (_, _, ca) = image_axes(*layout);
            Ok(vec![(
                image_shape(*layout, x.shape[0], x.shape[ca], size[0], size[1]),
                x.dtype,
            )])
        }
        Op::Cast { to } => Ok(vec![(x.shape.clone(), *to)]),
        Op::Compare { .. } | Op::Logical { .. } => {
            need(2)?;
            Ok(vec![(broadcast(&x.shape, &inputs[1].shape)?, DType::Bool)])
        }
        Op::Not => Ok(vec![(x.shape.clone(), DType::Bool)]),
        Op::Where => {
            need(3)?;
            if x.dtype != DType::Bool {
                return Err(format!("condition must be bool, is {}", x.dtype.name()));
            }
            if inputs[1].dtype != inputs[2].dtype {
                return Err(format!(
                    "x and y have different types ({} and {})",
                    inputs[1].dtype.name(),
                    inputs[2].dtype.name()
                ));
            }
            let s = broadcast(&broadcast(&x.shape, &inputs[1].shape)?, &inputs[2].shape)?;
            Ok(vec![(s, inputs[1].dtype)])
        }
        Op::DepthToSpace { block, layout } | Op::SpaceToDepth { block, layout } => {
            if rank != 4 {
                return Err(format!("expects 4-D data, got {:?}", x.shape));
            }
            let b = *block;
            if b == 0 {
                return Err("block size 0".into());
            }
            let (ha, wa, ca) = image_axes(*layout);
            let (h, w, c) = (x.shape[ha], x.shape[wa], x.shape[ca]);
            let (h, w, c) = if matches!(op, Op::DepthToSpace { .. }) {
                let bb = b.checked_mul(b).ok_or("block size too large")?;
                if c % bb != 0 {
                    return Err(format!("{c} channels are not a multiple of {bb}"));
                }
                let grown = |d: usize| d.checked_mul(b).ok_or("output too large");
                (grown(h)?, grown(w)?, c / bb)
            } else {
                if h % b != 0 || w % b != 0 {
                    return Err(format!("{h}x{w} is not a multiple of block size {b}"));
                }
                (h / b, w / b, c * b * b)
            };
            Ok(vec![(image_shape(*layout, x.shape[0], c, h, w), x.dtype)])
        }
        Op::DynamicUpdateSlice => {
            let [_, update, start] = inputs else {
                return Err("needs an operand, an update and start indices".into());
            };
            if update.dtype != x.dtype
                || update.shape.len() != x.shape.len()
                || update.shape.iter().zip(&x.shape).any(|(u, s)| u > s)
            {
                return Err(format!(
                    "update {} {:?} must have the operand's type and rank and fit in {} {:?}",
                    update.dtype.name(),
                    update.shape,
                    x.dtype.name(),
                    x.shape
                ));
            }
            if !matches!(start.dtype, DType::I32 | DType::I64) || start.shape != [x.shape.len()] {
                return Err(format!(
                    "start indices must be {} integers, are {} {:?}",
                    x.shape.len(),
                    start.dtype.name(),
                    start.shape
                ));
            }
            Ok(vec![(x.shape.clone(), x.dtype)])
        }
        Op::SequenceLstm { .. } => {
            let [x, weights @ ..] = inputs else {
                return Err("needs an input".into());
            };
            let [steps_or_batch, batch_or_steps, input] = x.shape[..] else {
                return Err(format!("input must be 3-D, is {:?}", x.shape));
            };
            let cell = weights
                .first()
                .map_or(0, |w| w.shape.first().copied().unwrap_or(0));
            let want = |k: usize| match k {
                0..4 => vec![cell, input],
                4..8 => vec![cell, cell],
                _ => vec![cell],
            };
            if weights.len() != 12
                || x.dtype != DType::F32
                || weights
                    .iter()
                    .enumerate()
                    .any(|(k, w)| w.dtype != DType::F32 || w.shape != want(k))
            {
                return Err(format!(
                    "needs a float32 input and 12 float32 weights and biases for {cell} cells \
                     and {input} inputs"
                ));
            }
            Ok(vec![(
                vec![steps_or_batch, batch_or_steps, cell],
                DType::F32,
            )])
        }
        Op::If {
            then_branch,
            else_branch,
        } => {
            let arity = |g: &super::Graph| g.inputs.len() + 1;
            if inputs.len() != arity(then_branch) || inputs.len() != arity(else_branch) {
                return Err(format!(
                    "{} inputs for branches of {} and {} inputs (and the condition)",
                    inputs.len(),
                    then_branch.inputs.len(),
                    else_branch.inputs.len()
                ));
            }
            if x.dtype != DType::Bool || x.elements() != 1 {
                return Err(format!(
                    "the condition must be one bool, is {} {:?}",
                    x.dtype.name(),
                    x.shape
                ));
            }
            for g in [then_branch, else_branch] {
                for (t, &b) in inputs[1..].iter().zip(&g.inputs) {
                    let b = &g.tensors[b];
                    if (&t.shape, t.dtype) != (&b.shape, b.dtype) {
                        return Err(format!(
                            "'{}' is {} {:?}, its branch input '{}' {} {:?}",
                            t.name,
                            t.dtype.name(),
                            t.shape,
                            b.name,
                            b.dtype.name(),
                            b.shape
                        ));
                    }
                }
            }
            let outs = |g: &super::Graph| -> Vec<(Vec<usize>, DType)> {
                g.outputs
                    .iter()
                    .map(|&o| (g.tensors[o].shape.clone(), g.tensors[o].dtype))
                    .collect()
            };
            let (then_outs, else_outs) = (outs(then_branch), outs(else_branch));
            if then_outs != else_outs {
                return Err(format!(
                    "the branches' outputs differ: {then_outs:?} and {else_outs:?}"
                ));
            }
            Ok(then_outs)
        }
        Op::While { cond, body } => {
            let signature = |ids: &[usize], g: &super::Graph| -> Vec<(Vec<usize>, DType)> {
                ids.iter()
                    .map(|&t| (g.tensors[t].shape.clone(), g.tensors[t].dtype))
                    .collect()
            };
            let values: Vec<(Vec<usize>, DType)> =
                inputs.iter().map(|t| (t.shape.clone(), t.dtype)).collect();
            for (what, list) in [
                ("cond's inputs", signature(&cond.inputs, cond)),
                ("body's inputs", signature(&body.inputs, body)),
                ("body's outputs", signature(&body.outputs, body)),
            ] {
                if list != values {
                    return Err(format!(
                        "{what} {list:?} differ from the loop values {values:?}"
                    ));
                }
            }
            let out = signature(&cond.outputs, cond);
            if out.len() != 1 || out[0].1 != DType::Bool || out[0].0.iter().product::<usize>() != 1
            {
                return Err(format!("cond must give one bool, gives {out:?}"));
            }
            Ok(values)
        }
        Op::CumSum { axis, .. } => {
            check_axis(*axis)?;
            Ok(vec![(x.shape.clone(), x.dtype)])
        }
        Op::TopK { axis, k } => {
            check_axis(*axis)?;
            if *k > x.shape[*axis] {
                return Err(format!(
                    "k = {k} is larger than axis {axis} of {:?}",
                    x.shape
                ));
            }
            let mut s = x.shape.clone();
            s[*axis] = *k;
            Ok(vec![(s.clone(), x.dtype), (s, DType::I32)])
        }
    }
}

/// The shape after reducing `axes`.
pub fn reduced_shape(shape: &[usize], axes: &[usize], keep_dims: bool) -> Vec<usize> {
    shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| {
            if axes.contains(&i) {
                keep_dims.then_some(1)
            } else {
                Some(d)
            }
        })
        .collect()
}

/// Number of elements a (begin, end, step) slice takes from an axis of length `dim`, with
/// begin/end already clamped (ONNX semantics: negative values count from the end).
pub fn slice_len(dim: usize, begin: i64, end: i64, step: i64) -> Result<usize, String> {
    if step == 0 {
        return Err("slice step 0".into());
    }
    let (b, e) = clamp_slice(dim, begin, end, step);
    Ok(if step > 0 {
        if e > b {
            ((e - b + step - 1) / step) as usize
        } else {
            0
        }
    } else if b > e {
        ((b - e + (-step) - 1) / (-step)) as usize
    } else {
        0
    })
}

/// ONNX Slice's clamping of begin and end for one axis.
pub fn clamp_slice(dim: usize, begin: i64, end: i64, step: i64) -> (i64, i64) {
    let d = dim as i64;
    let norm = |v: i64| if v < 0 { v + d } else { v };
    let (b, e) = (norm(begin), norm(end));
    if step > 0 {
        (b.clamp(0, d), e.clamp(0, d))
    } else {
        (b.clamp(0, d - 1), e.clamp(-1, d - 1))
    }
}
