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
    /// The output's range is run-time input `k`'s calibrated range, widened for the constant
    /// operands by [`select_range`]; the constants are quantized with it, saturating.
    SameAs(usize),
    /// The outputs are not real values (bool, indices): the float inputs become int8 with
    /// their own parameters (comparisons, ARG_MAX / ARG_MIN).
    Unquantized,
}

/// The int8 rule for `node`, or `None` when it stays float (no int8 kernel, or its constant
/// operands cannot be quantized the way the kernel needs).
pub fn int8_rule(g: &Graph, node: &Node) -> Option<OutputRule> {
    let is_const = |i: usize| node.inputs.get(i).is_some_and(|&t| g.tensors[t].is_const());
    if let Some(r) = mixed_type_rule(g, node) {
        return r;
    }
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
            if !is_const(0) && is_const(1) && (node.inputs.len() < 3 || is_const(2)) =>
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
        | Op::Expand { .. }
        | Op::DepthToSpace { .. }
        | Op::SpaceToDepth { .. } => Some(SameAsInput),
        // TILE has an int8 kernel in TFLite (version 3) but LiteRT 2.3 does not register it.
        // 0 pads with the zero point; the lowest float (a max pool's padding, `passes::lower`) pads
        // with the lowest int8 value, which a max over a window with real values never picks either.
        Op::Pad {
            mode: PadMode::Constant,
            value,
            ..
        } if *value == 0.0 || *value <= f32::MIN => Some(SameAsInput),
        // Any other pad value: the output's calibrated range holds it (the padded tensor was
        // observed), and the input takes the output's parameters, as PADV2 copies int8 values.
        Op::Pad {
            mode: PadMode::Constant,
            ..
        } => Some(Shared),
        _ => None,
    }
}

/// The int16x8 rule for `node` (16-bit activations, 8-bit weights): the int8 rule where TFLite
/// has a 16x8 kernel that literun runs too; `None` (float) elsewhere.
pub fn int16_rule(g: &Graph, node: &Node) -> Option<OutputRule> {
    let runtime = |i: usize| !g.tensors[node.inputs[i]].is_const();
    let has_kernel = match &node.op {
        Op::Conv2d { .. } | Op::FullyConnected { .. } | Op::Pool2d { .. } => true,
        Op::Binary {
            op: BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min,
            ..
        } => true,
        Op::Reduce {
            op: ReduceOp::Mean, ..
        } => true,
        // Values are moved, not computed (a constant GATHER table stays float).
        Op::Concat { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::Split { .. }
        | Op::Pad { .. } => true,
        Op::Gather { .. } => runtime(0),
        _ => false,
    };
    if !has_kernel || mixed_type_rule(g, node).is_some() {
        return None;
    }
    int8_rule(g, node)
}

/// Whether `op` only moves or selects values (its output is some of its input's values).
pub fn moves_values(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Split { .. }
            | Op::Concat { .. }
            | Op::Gather { .. }
            | Op::Expand { .. }
            | Op::DepthToSpace { .. }
            | Op::SpaceToDepth { .. }
    )
}

/// LiteRT's int8 BATCH_MATMUL takes ranks 2 to 5.
fn batch_rank_ok(g: &Graph, node: &Node) -> bool {
    node.inputs
        .iter()
        .all(|&t| (2..=5).contains(&g.tensors[t].shape.len()))
}

/// Rules of the ops whose inputs or outputs are not all float (bool conditions and results,
/// integer indices); `None` when `node` is not one of them.
fn mixed_type_rule(g: &Graph, node: &Node) -> Option<Option<OutputRule>> {
    use crate::ir::DType;
    let dt = |i: usize| g.tensors[node.inputs[i]].dtype;
    let runtime = |i: usize| !g.tensors[node.inputs[i]].is_const();
    let f32_in = |i: usize| dt(i) == DType::F32;
    Some(match &node.op {
        // Comparisons of float values; int32/bool comparisons have nothing to quantize.
        Op::Compare { .. } => (f32_in(0) && f32_in(1)).then_some(OutputRule::Unquantized),
        Op::ArgMax { .. } | Op::ArgMin { .. } => f32_in(0).then_some(OutputRule::Unquantized),
        // Values are copied: the indices output stays int32.
        Op::TopK { .. } => f32_in(0).then_some(OutputRule::SameAsInput),
        Op::Where => {
            if !(f32_in(1) && f32_in(2)) {
                return Some(None);
            }
            match (runtime(1), runtime(2)) {
                (true, true) => Some(OutputRule::Shared),
                (true, false) => Some(OutputRule::SameAs(1)),
                (false, true) => Some(OutputRule::SameAs(2)),
                (false, false) => None,
            }
        }
        // An embedding lookup: the constant table is quantized, the output shares its
        // parameters; the indices stay int32.
        Op::Gather { .. } if f32_in(0) && !f32_in(1) => Some(OutputRule::SameAsInput),
        _ => return None,
    })
}

/// Margin below (above) the run-time values that a far-away constant fill saturates to: a
/// following SOFTMAX gives it weight ≤ e^-12 relative to the largest value.
const FILL_MARGIN: f32 = 12.0;

/// The int8 range of a SELECT_V2 whose run-time branch has range `(lo, hi)` and whose constant
/// branch holds `fills`. A fill near the values is included as is; a far one (masked_fill with
/// -1e9 or -inf) would stretch the range until every real value rounds to one step, so the range
/// only extends to `FILL_MARGIN` (or one span, if larger) beyond the values and the fill
/// saturates there.
pub fn select_range((lo, hi): (f32, f32), fills: &[f32]) -> (f32, f32) {
    let span = (hi - lo).max(f32::MIN_POSITIVE);
    let reach = span.max(FILL_MARGIN);
    let (mut a, mut b) = (lo, hi);
    for &f in fills {
        if f.is_nan() {
            continue;
        }
        if f < lo - span {
            a = a.min(hi - reach);
        } else if f > hi + span {
            b = b.max(lo + reach);
        } else {
            a = a.min(f);
            b = b.max(f);
        }
    }
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::select_range;

    #[test]
    fn far_fills_saturate_near_the_values() {
        assert_eq!(select_range((-1.0, 2.0), &[-1e9]), (2.0 - 12.0, 2.0));
        assert_eq!(select_range((-1.0, 2.0), &[f32::INFINITY]), (-1.0, 11.0));
        assert_eq!(select_range((-1.0, 2.0), &[-3.0]), (-3.0, 2.0));
        // A wide range is already enough.
        assert_eq!(select_range((-50.0, 50.0), &[-1e9]), (-50.0, 50.0));
    }
}
