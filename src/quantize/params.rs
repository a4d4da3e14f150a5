//! Which lowered ops run in int8, and how their output parameters are chosen (the TFLite int8
//! quantization spec's per-op rules).

use crate::ir::{BinaryOp, Graph, Layout, Node, Op, PadMode, QuantParams, ReduceOp, UnaryOp};

/// How an int8 op's output parameters are chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputRule {
    /// From the calibrated range of the output.
    Calibrated,
    /// Equal to the (first) input's: the op only moves or selects values.
    SameAsInput,
    /// Fixed by the spec (the kernel's output range is known).
    Fixed(QuantParams),
    /// All inputs and the output share one set of parameters (CONCATENATION).
    Shared,
}

/// The int8 rule for `node`, or `None` when it stays float (no int8 kernel, or its constant
/// operands cannot be quantized the way the kernel needs).
pub fn int8_rule(g: &Graph, node: &Node) -> Option<OutputRule> {
    let is_const = |i: usize| node.inputs.get(i).is_some_and(|&t| g.tensors[t].is_const());
    let float_inputs = node
        .inputs
        .iter()
        .all(|&t| g.tensors[t].dtype == crate::ir::DType::F32 || g.tensors[t].is_const());
    if !float_inputs
        || node
            .outputs
            .iter()
            .any(|&t| g.tensors[t].dtype != crate::ir::DType::F32)
    {
        return None;
    }
    use OutputRule::*;
    let fixed = |scale: f32, zp: i64| Some(Fixed(QuantParams::per_tensor(scale, zp)));
    match &node.op {
        Op::Conv2d {
            layout: Layout::Nhwc,
            group,
            ..
        } if is_const(1) && (node.inputs.len() < 3 || is_const(2)) => {
            // Grouped convs were split by the lowering; depthwise has group == channels.
            let _ = group;
            Some(Calibrated)
        }
        Op::FullyConnected { .. } | Op::ConvTranspose2d { .. }
            if is_const(1) && (node.inputs.len() < 3 || is_const(2)) =>
        {
            Some(Calibrated)
        }
        // Both operands are activations (attention); a constant operand was made a dense layer.
        Op::MatMul { .. } if !is_const(0) && !is_const(1) && batch_rank_ok(g, node) => {
            Some(Calibrated)
        }
        Op::Binary {
            op: BinaryOp::SquaredDifference,
            activation: crate::ir::Activation::None,
        } => Some(Calibrated),
        Op::Unary(UnaryOp::Rsqrt) => Some(Calibrated),
        Op::Binary {
            op: BinaryOp::Max | BinaryOp::Min,
            activation: crate::ir::Activation::None,
        } => Some(Shared),
        Op::Reduce {
            op: ReduceOp::Max | ReduceOp::Min,
            ..
        }
        | Op::Resize { .. } => Some(SameAsInput),
        // SUM stays float: LiteRT's reference int8 SUM (the code TFLite Micro shares) reads the
        // data as uint8 and wraps, so an int8 SUM would not run the same everywhere.
        Op::Binary {
            op: BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul,
            ..
        } => Some(Calibrated),
        Op::Pool2d { .. } => Some(SameAsInput),
        Op::Reduce {
            op: ReduceOp::Mean, ..
        } => Some(Calibrated),
        Op::Softmax { axis } if *axis + 1 == g.tensors[node.inputs[0]].shape.len() => {
            fixed(1.0 / 256.0, -128)
        }
        Op::Unary(UnaryOp::Sigmoid) => fixed(1.0 / 256.0, -128),
        Op::Unary(UnaryOp::Tanh) => fixed(1.0 / 128.0, 0),
        Op::Unary(
            UnaryOp::HardSwish
            | UnaryOp::Relu
            | UnaryOp::Relu6
            | UnaryOp::ReluN1To1
            | UnaryOp::LeakyRelu { .. }
            | UnaryOp::Gelu { .. },
        ) => Some(Calibrated),
        Op::Concat { .. } if node.inputs.iter().all(|&t| !g.tensors[t].is_const()) => Some(Shared),
        Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Split { .. }
        | Op::Gather { .. }
        | Op::Expand { .. } => Some(SameAsInput),
        // TILE has an int8 kernel in TFLite (version 3) but LiteRT 2.3 does not register it.
        // 0 pads with the zero point; the lowest float (a max pool's padding, `passes::lower`) pads
        // with the lowest int8 value, which a max over a window with real values never picks either.
        Op::Pad {
            mode: PadMode::Constant,
            value,
            ..
        } if *value == 0.0 || *value <= f32::MIN => Some(SameAsInput),
        _ => None,
    }
}

/// LiteRT's int8 BATCH_MATMUL takes ranks 2 to 5.
fn batch_rank_ok(g: &Graph, node: &Node) -> bool {
    node.inputs
        .iter()
        .all(|&t| (2..=5).contains(&g.tensors[t].shape.len()))
}
