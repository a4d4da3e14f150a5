//! The layers' operators: CONV_2D and DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED and
//! BATCH_MATMUL (their options, versions and, for TRANSPOSE_CONV, the output-shape input).

use super::super::{activation, OpSpec, Writer};
use super::padding;
use crate::ir::{Activation, DType, Node, Op};
use anyhow::{bail, Result};
use fb::BuiltinOperator as B;
use literun::schema as fb;

/// The error for an op whose form the exporter does not write (the arms in `op_spec` match
/// only the forms these functions take).
fn unexpected(node: &Node) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: not an NHWC layer as the exporter writes it",
        node.op.name()
    )
}

pub(super) fn conv2d(w: &mut Writer<'_>, node: &Node, spec: &mut OpSpec<'_>) -> Result<()> {
    let Op::Conv2d {
        strides,
        dilations,
        pads,
        group,
        activation: act,
        ..
    } = &node.op
    else {
        return Err(unexpected(node));
    };
    let x = w.g.shape(node.inputs[0]).to_vec();
    let ws = w.g.shape(node.inputs[1]).to_vec();
    // The layout pass writes NHWC convolutions as 4-D; anything else is an internal error to
    // report, not an index to panic on.
    if x.len() != 4 || ws.len() != 4 {
        bail!("CONV_2D: NHWC input {x:?} and weights {ws:?} must both be 4-D");
    }
    let depthwise = *group == x[3] && *group > 1 && ws[0] == 1;
    let pad = padding(x[1], x[2], [ws[1], ws[2]], *strides, *dilations, *pads)?;
    let fbb = &mut w.fbb;
    if depthwise {
        spec.code = B::DEPTHWISE_CONV_2D;
        spec.version = if *dilations != [1, 1] { 2 } else { 1 };
        let o = fb::DepthwiseConv2DOptions::create(
            fbb,
            &fb::DepthwiseConv2DOptionsArgs {
                padding: pad,
                stride_w: strides[1] as i32,
                stride_h: strides[0] as i32,
                depth_multiplier: (ws[3] / x[3]) as i32,
                fused_activation_function: activation(*act),
                dilation_w_factor: dilations[1] as i32,
                dilation_h_factor: dilations[0] as i32,
            },
        );
        spec.options = Some((
            fb::BuiltinOptions::DepthwiseConv2DOptions,
            o.as_union_value(),
        ));
    } else {
        if *group != 1 {
            bail!("grouped convolution must be split by the lowering pass");
        }
        spec.code = B::CONV_2D;
        let o = fb::Conv2DOptions::create(
            fbb,
            &fb::Conv2DOptionsArgs {
                padding: pad,
                stride_w: strides[1] as i32,
                stride_h: strides[0] as i32,
                fused_activation_function: activation(*act),
                dilation_w_factor: dilations[1] as i32,
                dilation_h_factor: dilations[0] as i32,
                quantized_bias_type: fb::TensorType::FLOAT32,
            },
        );
        spec.options = Some((fb::BuiltinOptions::Conv2DOptions, o.as_union_value()));
    }
    Ok(())
}

pub(super) fn conv_transpose2d(
    w: &mut Writer<'_>,
    node: &Node,
    spec: &mut OpSpec<'_>,
) -> Result<()> {
    let Op::ConvTranspose2d {
        strides,
        pads,
        output_size,
        activation: act,
        ..
    } = &node.op
    else {
        return Err(unexpected(node));
    };
    let ws = w.g.shape(node.inputs[1]).to_vec();
    let out_shape = w.g.shape(node.outputs[0]).to_vec();
    // SAME when TFLite's SAME padding for this output size is the one we need.
    let same_pad = |out: usize, k: usize, s: usize| {
        ((out.div_ceil(s).max(1) - 1) * s + k).saturating_sub(out) / 2
    };
    let pad = if same_pad(output_size[0], ws[1], strides[0]) == pads[0]
        && same_pad(output_size[1], ws[2], strides[1]) == pads[1]
    {
        fb::Padding::SAME
    } else {
        fb::Padding::VALID
    };
    spec.code = B::TRANSPOSE_CONV;
    let shape_t = w.const_i32(
        format!("{}/output_shape", node.name),
        &[4],
        out_shape.iter().map(|&d| d as i32).collect(),
    );
    let mut inputs = vec![shape_t, node.inputs[1] as i32, node.inputs[0] as i32];
    if let Some(&b) = node.inputs.get(2) {
        inputs.push(b as i32);
    }
    spec.inputs = inputs;
    spec.version = if node.inputs.len() > 2 { 3 } else { 1 };
    if *act != Activation::None {
        spec.version = 4;
    }
    let o = fb::TransposeConvOptions::create(
        &mut w.fbb,
        &fb::TransposeConvOptionsArgs {
            padding: pad,
            stride_w: strides[1] as i32,
            stride_h: strides[0] as i32,
            fused_activation_function: activation(*act),
            quantized_bias_type: fb::TensorType::FLOAT32,
        },
    );
    spec.options = Some((fb::BuiltinOptions::TransposeConvOptions, o.as_union_value()));
    Ok(())
}

pub(super) fn fully_connected(
    w: &mut Writer<'_>,
    node: &Node,
    spec: &mut OpSpec<'_>,
) -> Result<()> {
    let Op::FullyConnected { activation: act } = &node.op else {
        return Err(unexpected(node));
    };
    let g = w.g;
    spec.code = B::FULLY_CONNECTED;
    // Always three inputs; -1 marks an absent bias (two inputs would need version 6).
    if spec.inputs.len() == 2 {
        spec.inputs.push(-1);
    }
    let keep = g.shape(node.inputs[0]).len() > 2;
    spec.version = if keep { 5 } else { 1 };
    // Hybrid (float input, int8 weights): each input row is quantized with its own zero point,
    // as TFLite's dynamic-range converter writes it: one more bit for one-sided (ReLU) inputs
    // than the symmetric scheme (version 9).
    let hybrid = g.tensors[node.inputs[0]].dtype == DType::F32
        && g.tensors[node.inputs[1]].dtype == DType::I8;
    if hybrid {
        spec.version = spec.version.max(9);
    }
    let o = fb::FullyConnectedOptions::create(
        &mut w.fbb,
        &fb::FullyConnectedOptionsArgs {
            fused_activation_function: activation(*act),
            keep_num_dims: keep,
            asymmetric_quantize_inputs: hybrid,
            ..Default::default()
        },
    );
    spec.options = Some((
        fb::BuiltinOptions::FullyConnectedOptions,
        o.as_union_value(),
    ));
    Ok(())
}

pub(super) fn matmul(w: &mut Writer<'_>, node: &Node, spec: &mut OpSpec<'_>) -> Result<()> {
    let Op::MatMul {
        transpose_a,
        transpose_b,
    } = &node.op
    else {
        return Err(unexpected(node));
    };
    spec.code = B::BATCH_MATMUL;
    let o = fb::BatchMatMulOptions::create(
        &mut w.fbb,
        &fb::BatchMatMulOptionsArgs {
            adj_x: *transpose_a,
            adj_y: *transpose_b,
            asymmetric_quantize_inputs: false,
        },
    );
    spec.options = Some((fb::BuiltinOptions::BatchMatMulOptions, o.as_union_value()));
    Ok(())
}
