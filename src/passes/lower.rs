//! Lowering: rewrites NHWC IR ops that TFLite has no single builtin for into ones it has, and
//! explicit padding into SAME/VALID plus PAD where they differ. After this pass every node maps
//! to exactly one TFLite operator (see `export::tflite`).

use crate::ir::shape::window_out;
use crate::ir::{
    Activation, BinaryOp, ConstData, DType, Graph, Layout, Node, Op, PadMode, PoolKind, ReduceOp,
    TensorId, UnaryOp,
};
use anyhow::{bail, Result};

/// TFLite's SAME padding (before, after) for one spatial axis.
pub fn same_padding(input: usize, kernel: usize, stride: usize, dilation: usize) -> (usize, usize) {
    let out = input.div_ceil(stride);
    let eff = (kernel - 1) * dilation + 1;
    let total = ((out - 1) * stride + eff).saturating_sub(input);
    (total / 2, total - total / 2)
}

/// Explicit pads [top, left, bottom, right] trimmed to what the windows actually read.
fn used_pads(
    h: usize,
    w: usize,
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pads: [usize; 4],
) -> Result<[usize; 4]> {
    let oh = window_out(h, k[0], s[0], d[0], pads[0] + pads[2]).map_err(anyhow::Error::msg)?;
    let ow = window_out(w, k[1], s[1], d[1], pads[1] + pads[3]).map_err(anyhow::Error::msg)?;
    let need_h = ((oh - 1) * s[0] + (k[0] - 1) * d[0] + 1).saturating_sub(h + pads[0]);
    let need_w = ((ow - 1) * s[1] + (k[1] - 1) * d[1] + 1).saturating_sub(w + pads[1]);
    Ok([pads[0], pads[1], need_h.min(pads[2]), need_w.min(pads[3])])
}

/// Whether `pads` are exactly TFLite's SAME padding for this window.
pub fn is_same(
    h: usize,
    w: usize,
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pads: [usize; 4],
) -> bool {
    let (t, b) = same_padding(h, k[0], s[0], d[0]);
    let (l, r) = same_padding(w, k[1], s[1], d[1]);
    let Ok(used) = used_pads(h, w, k, s, d, pads) else {
        return false;
    };
    let Ok(same_used) = used_pads(h, w, k, s, d, [t, l, b, r]) else {
        return false;
    };
    used == same_used
        && window_out(h, k[0], s[0], d[0], t + b).ok()
            == window_out(h, k[0], s[0], d[0], pads[0] + pads[2]).ok()
        && window_out(w, k[1], s[1], d[1], l + r).ok()
            == window_out(w, k[1], s[1], d[1], pads[1] + pads[3]).ok()
}

struct Builder {
    nodes: Vec<Node>,
}

impl Builder {
    fn push(
        &mut self,
        g: &mut Graph,
        name: String,
        op: Op,
        inputs: Vec<TensorId>,
        out_name: &str,
    ) -> Result<TensorId> {
        let ts: Vec<_> = inputs.iter().map(|&i| &g.tensors[i]).collect();
        let (shape, dtype) = crate::ir::shape::infer(&op, &ts)
            .map_err(|e| anyhow::anyhow!("lowering '{name}': {e}"))?
            .remove(0);
        let out = g.add_tensor(g.fresh_name(out_name), shape, dtype);
        self.nodes.push(Node {
            name,
            op,
            inputs,
            outputs: vec![out],
        });
        Ok(out)
    }

    /// Like `push` but writes into an existing output tensor (the original node's output).
    fn push_into(&mut self, name: String, op: Op, inputs: Vec<TensorId>, out: TensorId) {
        self.nodes.push(Node {
            name,
            op,
            inputs,
            outputs: vec![out],
        });
    }
}

/// An explicit PAD of H and W by [top, left, bottom, right] in front of node `n`.
fn pad_spatial(
    g: &mut Graph,
    b: &mut Builder,
    n: &str,
    x: TensorId,
    pads: [usize; 4],
    value: f32,
) -> Result<TensorId> {
    let op = Op::Pad {
        before: vec![0, pads[0], pads[1], 0],
        after: vec![0, pads[2], pads[3], 0],
        mode: PadMode::Constant,
        value,
    };
    let out_name = format!("{}_padded", g.tensors[x].name);
    b.push(g, format!("{n}/pad"), op, vec![x], &out_name)
}

fn binary(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: Activation::None,
    }
}

/// Lowers every node of an NHWC graph; returns how many nodes were rewritten.
pub fn lower(g: &mut Graph) -> Result<usize> {
    let old = std::mem::take(&mut g.nodes);
    let mut b = Builder {
        nodes: Vec::with_capacity(old.len()),
    };
    let mut rewritten = 0;
    for node in old {
        let before = b.nodes.len();
        let layernorm = matches!(node.op, Op::LayerNorm { .. });
        lower_node(g, &mut b, node)?;
        if layernorm {
            for n in &b.nodes[before..] {
                if !g.layernorm_nodes.contains(&n.name) {
                    g.layernorm_nodes.push(n.name.clone());
                }
            }
        }
        if b.nodes.len() != before + 1 {
            rewritten += 1;
        }
    }
    g.nodes = b.nodes;
    Ok(rewritten)
}

fn scalar(g: &mut Graph, base: &str, v: f32) -> TensorId {
    let name = g.fresh_name(base);
    g.add_const(name, ConstData::from_f32(&[1], vec![v]))
}

fn lower_node(g: &mut Graph, b: &mut Builder, node: Node) -> Result<()> {
    let n = node.name.clone();
    let x = node.inputs[0];
    let out = node.outputs.first().copied();
    match node.op.clone() {
        Op::Conv2d {
            strides,
            dilations,
            pads,
            group,
            activation,
            layout: Layout::Nhwc,
        } => {
            let [_, h, w, c] = g
                .shape(x)
                .try_into()
                .map_err(|_| anyhow::anyhow!("'{n}': conv input must be 4-D"))?;
            let ws = g.shape(node.inputs[1]).to_vec();
            let depthwise = group == c && group > 1 && ws[0] == 1;
            let (kh, kw) = (ws[1], ws[2]);
            let k = [kh, kw];
            let mut input = x;
            let mut pads = pads;
            if pads != [0; 4] && !is_same(h, w, k, strides, dilations, pads) {
                let used = used_pads(h, w, k, strides, dilations, pads)?;
                input = pad_spatial(g, b, &n, x, used, 0.0)?;
                pads = [0; 4];
            }
            if group > 1 && !depthwise {
                return lower_grouped_conv(
                    g, b, &node, input, strides, dilations, pads, group, activation,
                );
            }
            let mut inputs = node.inputs.clone();
            inputs[0] = input;
            if inputs.len() == 2 {
                // TFLite's float CONV_2D / DEPTHWISE_CONV_2D kernels require a bias tensor.
                let channels = if depthwise { ws[3] } else { ws[0] };
                let bname = g.fresh_name(&format!("{n}/zero_bias"));
                inputs.push(
                    g.add_const(bname, ConstData::from_f32(&[channels], vec![0.0; channels])),
                );
            }
            b.push_into(
                n,
                Op::Conv2d {
                    strides,
                    dilations,
                    pads,
                    group,
                    activation,
                    layout: Layout::Nhwc,
                },
                inputs,
                out.unwrap(),
            );
        }
        Op::Pool2d {
            kind,
            kernel,
            strides,
            pads,
            layout: Layout::Nhwc,
        } => {
            let [_, h, w, c] = g
                .shape(x)
                .try_into()
                .map_err(|_| anyhow::anyhow!("'{n}': pool input must be 4-D"))?;
            if pads == [0; 4] || is_same(h, w, kernel, strides, [1, 1], pads) {
                b.push_into(n, node.op, vec![x], out.unwrap());
                return Ok(());
            }
            let used = used_pads(h, w, kernel, strides, [1, 1], pads)?;
            let value = if kind == PoolKind::Max { f32::MIN } else { 0.0 };
            let padded = pad_spatial(g, b, &n, x, used, value)?;
            let pool = Op::Pool2d {
                kind,
                kernel,
                strides,
                pads: [0; 4],
                layout: Layout::Nhwc,
            };
            if kind == PoolKind::Max {
                b.push_into(n, pool, vec![padded], out.unwrap());
                return Ok(());
            }
            // Average over valid positions only: pool the zero-padded input, then rescale each
            // output position by kernel area / number of valid positions.
            let pooled = b.push(
                g,
                format!("{n}/pool"),
                pool,
                vec![padded],
                &format!("{}_sum", g.tensors[out.unwrap()].name),
            )?;
            let [_, oh, ow, _] = g.shape(pooled).try_into().expect("4-D");
            let _ = c;
            let mut scale = Vec::with_capacity(oh * ow);
            for oy in 0..oh {
                for ox in 0..ow {
                    let count = |o: usize, s: usize, k: usize, pad: usize, size: usize| {
                        let start = (o * s) as isize - pad as isize;
                        (0..k as isize)
                            .filter(|i| (0..size as isize).contains(&(start + i)))
                            .count()
                    };
                    let valid = count(oy, strides[0], kernel[0], used[0], h)
                        * count(ox, strides[1], kernel[1], used[1], w);
                    scale.push((kernel[0] * kernel[1]) as f32 / valid.max(1) as f32);
                }
            }
            let sname = g.fresh_name(&format!("{n}/count_scale"));
            let s = g.add_const(sname, ConstData::from_f32(&[1, oh, ow, 1], scale));
            b.push_into(n, binary(BinaryOp::Mul), vec![pooled, s], out.unwrap());
        }
        Op::Clip { min, max } => {
            let op = match (min, max) {
                (0.0, 6.0) => Some(UnaryOp::Relu6),
                (-1.0, 1.0) => Some(UnaryOp::ReluN1To1),
                (0.0, m) if m == f32::INFINITY => Some(UnaryOp::Relu),
                _ => None,
            };
            if let Some(u) = op {
                b.push_into(n, Op::Unary(u), vec![x], out.unwrap());
                return Ok(());
            }
            let mut cur = x;
            if min > f32::NEG_INFINITY {
                let c = scalar(g, &format!("{n}/min"), min);
                if max < f32::INFINITY {
                    cur = b.push(
                        g,
                        format!("{n}/max"),
                        binary(BinaryOp::Max),
                        vec![cur, c],
                        &format!("{n}_lower"),
                    )?;
                } else {
                    b.push_into(n.clone(), binary(BinaryOp::Max), vec![cur, c], out.unwrap());
                    return Ok(());
                }
            }
            if max < f32::INFINITY {
                let c = scalar(g, &format!("{n}/max"), max);
                b.push_into(n, binary(BinaryOp::Min), vec![cur, c], out.unwrap());
            } else {
                b.push_into(
                    n,
                    Op::Reshape {
                        shape: g.shape(x).to_vec(),
                    },
                    vec![cur],
                    out.unwrap(),
                );
            }
        }
        Op::HardSigmoid { alpha, beta } => {
            let zero = scalar(g, &format!("{n}/zero"), 0.0);
            let one = scalar(g, &format!("{n}/one"), 1.0);
            // A slope of 1 and an offset of 0 (folded into the layer before,
            // `fold_channel_scale`) leave only the clip.
            let mut t = x;
            if alpha != 1.0 {
                let a = scalar(g, &format!("{n}/alpha"), alpha);
                t = b.push(
                    g,
                    format!("{n}/mul"),
                    binary(BinaryOp::Mul),
                    vec![t, a],
                    &format!("{n}_scaled"),
                )?;
            }
            if beta != 0.0 {
                let be = scalar(g, &format!("{n}/beta"), beta);
                t = b.push(
                    g,
                    format!("{n}/add"),
                    binary(BinaryOp::Add),
                    vec![t, be],
                    &format!("{n}_shifted"),
                )?;
            }
            let t = b.push(
                g,
                format!("{n}/max"),
                binary(BinaryOp::Max),
                vec![t, zero],
                &format!("{n}_lower"),
            )?;
            b.push_into(n, binary(BinaryOp::Min), vec![t, one], out.unwrap());
        }
        Op::BatchNorm {
            epsilon,
            layout: Layout::Nhwc,
        } => {
            let get = |i: usize| g.const_data(node.inputs[i]).map(|d| d.to_f32_vec());
            let (Some(gamma), Some(beta), Some(mean), Some(var)) = (get(1), get(2), get(3), get(4))
            else {
                bail!(
                    "'{n}' (BatchNormalization): scale, bias, mean and variance must be constant"
                );
            };
            let scale: Vec<f32> = gamma
                .iter()
                .zip(&var)
                .map(|(g, v)| g / (v + epsilon).sqrt())
                .collect();
            let shift: Vec<f32> = beta
                .iter()
                .zip(&mean)
                .zip(&scale)
                .map(|((b, m), s)| b - m * s)
                .collect();
            let c = scale.len();
            let sname = g.fresh_name(&format!("{n}/scale"));
            let s = g.add_const(sname, ConstData::from_f32(&[c], scale));
            let tname = g.fresh_name(&format!("{n}/shift"));
            let t = g.add_const(tname, ConstData::from_f32(&[c], shift));
            let m = b.push(
                g,
                format!("{n}/mul"),
                binary(BinaryOp::Mul),
                vec![x, s],
                &format!("{n}_scaled"),
            )?;
            b.push_into(n, binary(BinaryOp::Add), vec![m, t], out.unwrap());
        }
        Op::LayerNorm { axis, epsilon } => {
            let rank = g.shape(x).len();
            let axes: Vec<usize> = (axis..rank).collect();
            let mean_op = Op::Reduce {
                op: ReduceOp::Mean,
                axes,
                keep_dims: true,
            };
            let mean = b.push(
                g,
                format!("{n}/mean"),
                mean_op.clone(),
                vec![x],
                &format!("{n}_mean"),
            )?;
            let sq = b.push(
                g,
                format!("{n}/sqdiff"),
                binary(BinaryOp::SquaredDifference),
                vec![x, mean],
                &format!("{n}_sqdiff"),
            )?;
            let var = b.push(
                g,
                format!("{n}/var"),
                mean_op,
                vec![sq],
                &format!("{n}_var"),
            )?;
            let eps = scalar(g, &format!("{n}/epsilon"), epsilon);
            let ve = b.push(
                g,
                format!("{n}/add_eps"),
                binary(BinaryOp::Add),
                vec![var, eps],
                &format!("{n}_var_eps"),
            )?;
            let rs = b.push(
                g,
                format!("{n}/rsqrt"),
                Op::Unary(UnaryOp::Rsqrt),
                vec![ve],
                &format!("{n}_rstd"),
            )?;
            let centered = b.push(
                g,
                format!("{n}/sub"),
                binary(BinaryOp::Sub),
                vec![x, mean],
                &format!("{n}_centered"),
            )?;
            // A scale of ones (a recognised LayerNorm without affine, or one whose affine was
            // folded into the next dense layer) needs no MUL.
            let scale = node.inputs[1];
            let unit_scale = g.const_data(scale).is_some_and(|d| {
                d.dtype() == DType::F32 && d.to_f32_vec().iter().all(|&v| v == 1.0)
            }) && crate::ir::shape::broadcast(g.shape(x), g.shape(scale))
                .ok()
                .as_deref()
                == Some(g.shape(x));
            let bias = node.inputs.get(2).copied();
            if unit_scale && bias.is_none() {
                b.push_into(n, binary(BinaryOp::Mul), vec![centered, rs], out.unwrap());
                return Ok(());
            }
            let normed = b.push(
                g,
                format!("{n}/normalize"),
                binary(BinaryOp::Mul),
                vec![centered, rs],
                &format!("{n}_normalized"),
            )?;
            match bias {
                Some(bias) => {
                    let scaled = if unit_scale {
                        normed
                    } else {
                        b.push(
                            g,
                            format!("{n}/scale"),
                            binary(BinaryOp::Mul),
                            vec![normed, scale],
                            &format!("{n}_scaled"),
                        )?
                    };
                    b.push_into(n, binary(BinaryOp::Add), vec![scaled, bias], out.unwrap());
                }
                None => b.push_into(n, binary(BinaryOp::Mul), vec![normed, scale], out.unwrap()),
            }
        }
        Op::ArgMax {
            axis,
            keep_dims: true,
        }
        | Op::ArgMin {
            axis,
            keep_dims: true,
        } => {
            let (op, what) = match node.op {
                Op::ArgMax { .. } => (
                    Op::ArgMax {
                        axis,
                        keep_dims: false,
                    },
                    "argmax",
                ),
                _ => (
                    Op::ArgMin {
                        axis,
                        keep_dims: false,
                    },
                    "argmin",
                ),
            };
            let t = b.push(
                g,
                format!("{n}/{what}"),
                op,
                vec![x],
                &format!("{n}_squeezed"),
            )?;
            let shape = g.shape(out.unwrap()).to_vec();
            b.push_into(n, Op::Reshape { shape }, vec![t], out.unwrap());
        }
        Op::ConvTranspose2d {
            strides,
            pads,
            output_size,
            activation,
            layout: Layout::Nhwc,
        } => {
            let [_, h, w, _] = g
                .shape(x)
                .try_into()
                .map_err(|_| anyhow::anyhow!("'{n}': input must be 4-D"))?;
            let ws = g.shape(node.inputs[1]).to_vec();
            let k = [ws[1], ws[2]];
            let tfl_pad = |out: usize, k: usize, s: usize, same: bool| {
                let o = if same {
                    out.div_ceil(s)
                } else {
                    (out + s).saturating_sub(k) / s
                };
                ((o.max(1) - 1) * s + k).saturating_sub(out) / 2
            };
            let fits = |same: bool| {
                tfl_pad(output_size[0], k[0], strides[0], same) == pads[0]
                    && tfl_pad(output_size[1], k[1], strides[1], same) == pads[1]
            };
            if fits(true) || fits(false) {
                b.push_into(n, node.op.clone(), node.inputs.clone(), out.unwrap());
                return Ok(());
            }
            // Full (unpadded) transposed conv, then crop.
            let full = [(h - 1) * strides[0] + k[0], (w - 1) * strides[1] + k[1]];
            if pads[0] + output_size[0] > full[0] || pads[1] + output_size[1] > full[1] {
                bail!("'{n}' (ConvTranspose): output_padding beyond the kernel's reach is not supported");
            }
            let op = Op::ConvTranspose2d {
                strides,
                pads: [0; 4],
                output_size: full,
                activation,
                layout: Layout::Nhwc,
            };
            let t = b.push(
                g,
                format!("{n}/full"),
                op,
                node.inputs.clone(),
                &format!("{n}_full"),
            )?;
            let c = g.shape(t)[3];
            let slice = Op::Slice {
                begins: vec![0, pads[0] as i64, pads[1] as i64, 0],
                ends: vec![
                    g.shape(t)[0] as i64,
                    (pads[0] + output_size[0]) as i64,
                    (pads[1] + output_size[1]) as i64,
                    c as i64,
                ],
                steps: vec![1; 4],
            };
            b.push_into(n, slice, vec![t], out.unwrap());
        }
        Op::Unary(UnaryOp::Silu) => {
            let s = b.push(
                g,
                format!("{n}/sigmoid"),
                Op::Unary(UnaryOp::Sigmoid),
                vec![x],
                &format!("{n}_sigmoid"),
            )?;
            b.push_into(n, binary(BinaryOp::Mul), vec![x, s], out.unwrap());
        }
        Op::Unary(UnaryOp::Erf) => {
            bail!("'{n}' (Erf): TFLite has no Erf operator; only the GELU pattern x*0.5*(1+erf(x/sqrt(2))) can be converted");
        }
        Op::Conv2d {
            layout: Layout::Nchw,
            ..
        }
        | Op::Pool2d {
            layout: Layout::Nchw,
            ..
        }
        | Op::Resize {
            layout: Layout::Nchw,
            ..
        }
        | Op::BatchNorm {
            layout: Layout::Nchw,
            ..
        }
        | Op::ConvTranspose2d {
            layout: Layout::Nchw,
            ..
        } => {
            bail!(
                "'{n}' ({}): still in NCHW layout after the layout pass",
                node.op.name()
            );
        }
        _ => b.nodes.push(node),
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn lower_grouped_conv(
    g: &mut Graph,
    b: &mut Builder,
    node: &Node,
    input: TensorId,
    strides: [usize; 2],
    dilations: [usize; 2],
    pads: [usize; 4],
    group: usize,
    activation: Activation,
) -> Result<()> {
    let n = &node.name;
    let c = g.shape(input)[3];
    let wdata = g.const_data(node.inputs[1]).cloned();
    let Some(wdata) = wdata else {
        bail!("'{n}' (Conv): grouped convolution needs constant weights")
    };
    let ws = wdata.shape();
    let og = ws[0] / group;
    let split = Op::Split {
        axis: 3,
        sizes: vec![c / group; group],
    };
    let ts: Vec<_> = [input].iter().map(|&i| &g.tensors[i]).collect();
    let shapes = crate::ir::shape::infer(&split, &ts).map_err(anyhow::Error::msg)?;
    let parts: Vec<TensorId> = shapes
        .into_iter()
        .enumerate()
        .map(|(i, (s, d))| {
            let name = g.fresh_name(&format!("{n}_group{i}_in"));
            g.add_tensor(name, s, d)
        })
        .collect();
    b.nodes.push(Node {
        name: format!("{n}/split"),
        op: split,
        inputs: vec![input],
        outputs: parts.clone(),
    });
    let w = wdata.to_f32_vec();
    let per = og * ws[1] * ws[2] * ws[3];
    let bias = node
        .inputs
        .get(2)
        .and_then(|&t| g.const_data(t))
        .map(|d| d.to_f32_vec());
    let mut outs = Vec::new();
    for (i, &p) in parts.iter().enumerate() {
        let wname = g.fresh_name(&format!("{n}/weights_group{i}"));
        let wt = g.add_const(
            wname,
            ConstData::from_f32(
                &[og, ws[1], ws[2], ws[3]],
                w[i * per..(i + 1) * per].to_vec(),
            ),
        );
        let mut inputs = vec![p, wt];
        let group_bias = match &bias {
            Some(bias) => bias[i * og..(i + 1) * og].to_vec(),
            None => vec![0.0; og],
        };
        let bname = g.fresh_name(&format!("{n}/bias_group{i}"));
        inputs.push(g.add_const(bname, ConstData::from_f32(&[og], group_bias)));
        let op = Op::Conv2d {
            strides,
            dilations,
            pads,
            group: 1,
            activation,
            layout: Layout::Nhwc,
        };
        outs.push(b.push(
            g,
            format!("{n}/group{i}"),
            op,
            inputs,
            &format!("{n}_group{i}_out"),
        )?);
    }
    b.push_into(
        format!("{n}/concat"),
        Op::Concat { axis: 3 },
        outs,
        node.outputs[0],
    );
    Ok(())
}
