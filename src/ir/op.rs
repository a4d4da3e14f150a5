//! The ops of the IR, with typed attributes.
//!
//! Until `passes::layout` runs, ops have ONNX semantics (NCHW images, OIHW weights); afterwards the
//! image ops carry `Layout::Nhwc` and every axis refers to the physical (NHWC) order.
//! Each variant documents its inputs; optional inputs are absent from `Node::inputs`.

/// Memory layout of a 4-D image tensor and of the weights of the op that reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// ONNX: data [N, C, H, W]; conv weights [O, I/group, KH, KW].
    Nchw,
    /// TFLite: data [N, H, W, C]; conv weights [O, KH, KW, I/group]; depthwise weights
    /// [1, KH, KW, C*multiplier]; transposed-conv weights [O, KH, KW, I].
    Nhwc,
}

/// A fused activation (TFLite's `fused_activation_function`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Activation {
    #[default]
    None,
    Relu,
    ReluN1To1,
    Relu6,
    Tanh,
}

/// Explicit spatial padding [top, left, bottom, right].
pub type Pads = [usize; 4];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    SquaredDifference,
    /// The remainder with the divisor's sign (Python's `%`; TFLite FLOOR_MOD).
    FloorMod,
}

/// A comparison with a bool output (TFLite EQUAL, NOT_EQUAL, LESS, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

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
    Sigmoid,
    Tanh,
    HardSwish,
    /// SiLU / Swish: x * sigmoid(x). TFLite has no builtin: `passes::lower` writes LOGISTIC + MUL,
    /// but it stays one op until then so quantization sees one activation.
    Silu,
    /// GELU; `approximate` selects the tanh form.
    Gelu {
        approximate: bool,
    },
    /// Standalone Erf: TFLite has no such builtin; only the GELU pattern is exportable.
    Erf,
    Floor,
    Ceil,
    /// To the nearest integer, halves to even (ONNX Round, TFLite ROUND).
    Round,
    Sin,
    Cos,
    LeakyRelu {
        alpha: f32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Mean,
    Sum,
    Max,
    Min,
    Prod,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    /// Average over the valid (unpadded) positions only, as TFLite and ONNX count_include_pad=0.
    Average,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    Constant,
    Reflect,
    Symmetric,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeMode {
    Nearest,
    Bilinear,
}

/// How output coordinates map to input coordinates, restricted to what TFLite can express.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeCoords {
    /// in = out * in_size / out_size (ONNX `asymmetric`; nearest rounds down).
    Asymmetric,
    /// in = (out + 0.5) * scale - 0.5 (ONNX `half_pixel` / `pytorch_half_pixel` when out > 1).
    HalfPixel,
    /// in = out * (in_size - 1) / (out_size - 1).
    AlignCorners,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// 2-D convolution. Inputs: data, weights (constant), optional bias [O].
    /// `group == 1`: regular; `group == C_in`: depthwise; otherwise grouped.
    Conv2d {
        strides: [usize; 2],
        dilations: [usize; 2],
        pads: Pads,
        group: usize,
        activation: Activation,
        layout: Layout,
    },
    /// Transposed convolution. Inputs: data, weights (constant; ONNX [I, O, KH, KW], NHWC
    /// [O, KH, KW, I]), optional bias [O]. `pads` are removed from the full output; `output_size`
    /// is [H, W] of the result.
    ConvTranspose2d {
        strides: [usize; 2],
        pads: Pads,
        output_size: [usize; 2],
        activation: Activation,
        layout: Layout,
    },
    /// y = x · Wᵀ + b over the last axis. Inputs: x [..., K], weights [N, K] (constant), optional
    /// bias [N]. (ONNX Gemm and MatMul-with-constant-weights import to this.)
    FullyConnected {
        activation: Activation,
    },
    /// Batched matrix product with numpy broadcasting of the leading dims. Inputs: a, b.
    MatMul {
        transpose_a: bool,
        transpose_b: bool,
    },
    /// Elementwise with numpy broadcasting. Inputs: a, b.
    Binary {
        op: BinaryOp,
        activation: Activation,
    },
    /// Elementwise. Input: x.
    Unary(UnaryOp),
    /// Leaky ReLU with a per-element slope. Inputs: x, slope (broadcast to x).
    PRelu,
    /// Clamp to [min, max] (either may be infinite).
    Clip {
        min: f32,
        max: f32,
    },
    /// max(0, min(1, alpha * x + beta)).
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// Softmax along `axis`.
    Softmax {
        axis: usize,
    },
    LogSoftmax {
        axis: usize,
    },
    /// 2-D pooling over H and W.
    Pool2d {
        kind: PoolKind,
        kernel: [usize; 2],
        strides: [usize; 2],
        pads: Pads,
        layout: Layout,
    },
    /// Reduction over `axes` (sorted, unique).
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
        keep_dims: bool,
    },
    /// Normalizes over the axes from `axis` to the end. Inputs: x, scale, optional bias.
    LayerNorm {
        axis: usize,
        epsilon: f32,
    },
    /// Inference BatchNormalization over axis 1 (NCHW) or the last axis (NHWC).
    /// Inputs: x, scale, bias, mean, var (all constant [C]).
    BatchNorm {
        epsilon: f32,
        layout: Layout,
    },
    Concat {
        axis: usize,
    },
    /// Splits `axis` into pieces of the given sizes; one output per piece.
    Split {
        axis: usize,
        sizes: Vec<usize>,
    },
    /// Per-axis begin/end/step for every axis (full rank); steps may be negative.
    Slice {
        begins: Vec<i64>,
        ends: Vec<i64>,
        steps: Vec<i64>,
    },
    /// Gathers along `axis`. Inputs: data, indices (int, values already non-negative when
    /// constant).
    Gather {
        axis: usize,
    },
    /// Same data, new shape (fully resolved, no -1 or 0).
    Reshape {
        shape: Vec<usize>,
    },
    /// Output axis i is input axis perm[i].
    Transpose {
        perm: Vec<usize>,
    },
    /// Broadcast to `shape` (numpy rules).
    Expand {
        shape: Vec<usize>,
    },
    /// Repeats each axis `reps[i]` times.
    Tile {
        reps: Vec<usize>,
    },
    /// Pads each axis by (before[i], after[i]).
    Pad {
        before: Vec<usize>,
        after: Vec<usize>,
        mode: PadMode,
        value: f32,
    },
    /// Resizes H and W to `size`.
    Resize {
        mode: ResizeMode,
        coords: ResizeCoords,
        size: [usize; 2],
        layout: Layout,
    },
    /// Index of the maximum along `axis` (int32 output).
    ArgMax {
        axis: usize,
        keep_dims: bool,
    },
    /// Index of the minimum along `axis` (int32 output).
    ArgMin {
        axis: usize,
        keep_dims: bool,
    },
    /// Elementwise comparison with numpy broadcasting; bool output. Inputs: a, b.
    Compare {
        op: CompareOp,
    },
    /// Logical AND (`and`) or OR of two bool tensors, broadcast.
    Logical {
        and: bool,
    },
    /// Logical NOT of a bool tensor.
    Not,
    /// `cond ? x : y` with three-way broadcasting. Inputs: cond (bool), x, y.
    Where,
    /// The `k` largest values along `axis` (descending; ties: lower index first) and their
    /// int32 indices. Two outputs.
    TopK {
        axis: usize,
        k: usize,
    },
    Cast {
        to: super::DType,
    },
    /// Moves each pixel's channels into a `block`×`block` square of pixels: channel
    /// `(i * block + j) * C + c` of the input becomes channel `c` of pixel (i, j) of the square
    /// (ONNX mode DCR, TFLite DEPTH_TO_SPACE). Input: 4-D data, C·block² channels.
    DepthToSpace {
        block: usize,
        layout: Layout,
    },
    /// The inverse of [`Op::DepthToSpace`]: each `block`×`block` square of pixels becomes one
    /// pixel, pixel (i, j) of the square in channels `(i * block + j) * C ..`.
    SpaceToDepth {
        block: usize,
        layout: Layout,
    },
    /// Running sum along `axis`; `exclusive` leaves the element itself out, `reverse` sums
    /// from the end. Input: x.
    CumSum {
        axis: usize,
        exclusive: bool,
        reverse: bool,
    },
    /// `operand` with `update` (same rank and type, each axis no longer) written at the start
    /// indices given at run time, each clamped so the update fits (TFLite
    /// DYNAMIC_UPDATE_SLICE). Inputs: operand, update, start indices (int32 `[rank]`).
    /// Axes are logical: the layout pass keeps the operands in their ONNX order.
    DynamicUpdateSlice,
    /// A float LSTM over a whole sequence (TFLite UNIDIRECTIONAL_SEQUENCE_LSTM, forward, no
    /// peepholes, projection or clipping; sigmoid gates, tanh cell and output activations).
    /// Inputs: x (`[time, batch, input]` when `time_major`, else `[batch, time, input]`), the
    /// input weights `[cell, input]` of gates i, f, c, o, the recurrent weights `[cell, cell]`
    /// of i, f, c, o, and the biases `[cell]` of i, f, c, o. Output: h of every step, in x's
    /// order of time and batch. The op owns its state (h and c, `[batch, cell]` each): the
    /// writer adds them as TFLite variable tensors, zero when an interpreter starts and
    /// carried from one invoke to the next.
    SequenceLstm {
        time_major: bool,
    },
    /// Runs `then_branch` when the condition is true, `else_branch` otherwise (TFLite IF).
    /// Inputs: the condition (one bool), then the values both branches read, which are the
    /// branches' graph inputs in the same order. The branches' outputs (same shapes and types
    /// in both) are the node's outputs. Each branch keeps the logical (ONNX) layout at its
    /// edges and goes through the passes on its own.
    If {
        then_branch: Box<super::Graph>,
        else_branch: Box<super::Graph>,
    },
    /// Runs `body` while `cond` gives true (TFLite WHILE). Inputs: the loop values; `cond` and
    /// `body` take them all as their graph inputs, in order, `cond` gives one bool and `body`
    /// the next loop values (same shapes and types). Outputs: the last loop values.
    While {
        cond: Box<super::Graph>,
        body: Box<super::Graph>,
    },
    /// float16 or quantized integer → float32 (inserted by quantization).
    Dequantize,
    /// float32 → int8 with the output tensor's parameters, or int8 → int8 with new parameters
    /// (inserted by full-integer quantization).
    Quantize,
}

impl Op {
    /// The graphs the op runs (IF's branches, WHILE's condition and body), with their roles.
    pub fn subgraphs(&self) -> Vec<(&'static str, &super::Graph)> {
        match self {
            Op::If {
                then_branch,
                else_branch,
            } => vec![("then_branch", then_branch), ("else_branch", else_branch)],
            Op::While { cond, body } => vec![("cond", cond), ("body", body)],
            _ => Vec::new(),
        }
    }

    /// [`Op::subgraphs`], mutable.
    pub fn subgraphs_mut(&mut self) -> Vec<(&'static str, &mut super::Graph)> {
        match self {
            Op::If {
                then_branch,
                else_branch,
            } => vec![("then_branch", then_branch), ("else_branch", else_branch)],
            Op::While { cond, body } => vec![("cond", cond), ("body", body)],
            _ => Vec::new(),
        }
    }

    /// A short name for reports and errors (the TFLite-ish op family).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Conv2d { .. } => "Conv2d",
            Op::ConvTranspose2d { .. } => "ConvTranspose2d",
            Op::FullyConnected { .. } => "FullyConnected",
            Op::MatMul { .. } => "MatMul",
            Op::Binary { op, .. } => match op {
                BinaryOp::Add => "Add",
                BinaryOp::Sub => "Sub",
                BinaryOp::Mul => "Mul",
                BinaryOp::Div => "Div",
                BinaryOp::Pow => "Pow",
                BinaryOp::Max => "Max",
                BinaryOp::Min => "Min",
                BinaryOp::SquaredDifference => "SquaredDifference",
                BinaryOp::FloorMod => "FloorMod",
            },
            Op::Unary(u) => match u {
                UnaryOp::Abs => "Abs",
                UnaryOp::Neg => "Neg",
                UnaryOp::Exp => "Exp",
                UnaryOp::Log => "Log",
                UnaryOp::Sqrt => "Sqrt",
                UnaryOp::Rsqrt => "Rsqrt",
                UnaryOp::Relu => "Relu",
                UnaryOp::Relu6 => "Relu6",
                UnaryOp::ReluN1To1 => "ReluN1To1",
                UnaryOp::Sigmoid => "Sigmoid",
                UnaryOp::Tanh => "Tanh",
                UnaryOp::HardSwish => "HardSwish",
                UnaryOp::Silu => "Silu",
                UnaryOp::Gelu { .. } => "Gelu",
                UnaryOp::Erf => "Erf",
                UnaryOp::Floor => "Floor",
                UnaryOp::Ceil => "Ceil",
                UnaryOp::Round => "Round",
                UnaryOp::Sin => "Sin",
                UnaryOp::Cos => "Cos",
                UnaryOp::LeakyRelu { .. } => "LeakyRelu",
            },
            Op::PRelu => "PRelu",
            Op::Clip { .. } => "Clip",
            Op::HardSigmoid { .. } => "HardSigmoid",
            Op::Softmax { .. } => "Softmax",
            Op::LogSoftmax { .. } => "LogSoftmax",
            Op::Pool2d {
                kind: PoolKind::Max,
                ..
            } => "MaxPool",
            Op::Pool2d {
                kind: PoolKind::Average,
                ..
            } => "AveragePool",
            Op::Reduce { op, .. } => match op {
                ReduceOp::Mean => "ReduceMean",
                ReduceOp::Sum => "ReduceSum",
                ReduceOp::Max => "ReduceMax",
                ReduceOp::Min => "ReduceMin",
                ReduceOp::Prod => "ReduceProd",
            },
            Op::LayerNorm { .. } => "LayerNorm",
            Op::BatchNorm { .. } => "BatchNorm",
            Op::Concat { .. } => "Concat",
            Op::Split { .. } => "Split",
            Op::Slice { .. } => "Slice",
            Op::Gather { .. } => "Gather",
            Op::Reshape { .. } => "Reshape",
            Op::Transpose { .. } => "Transpose",
            Op::Expand { .. } => "Expand",
            Op::Tile { .. } => "Tile",
            Op::Pad { .. } => "Pad",
            Op::Resize { .. } => "Resize",
            Op::ArgMax { .. } => "ArgMax",
            Op::ArgMin { .. } => "ArgMin",
            Op::Compare { op } => match op {
                CompareOp::Equal => "Equal",
                CompareOp::NotEqual => "NotEqual",
                CompareOp::Less => "Less",
                CompareOp::LessEqual => "LessOrEqual",
                CompareOp::Greater => "Greater",
                CompareOp::GreaterEqual => "GreaterOrEqual",
            },
            Op::Logical { and: true } => "And",
            Op::Logical { and: false } => "Or",
            Op::Not => "Not",
            Op::Where => "Where",
            Op::TopK { .. } => "TopK",
            Op::Cast { .. } => "Cast",
            Op::DepthToSpace { .. } => "DepthToSpace",
            Op::SpaceToDepth { .. } => "SpaceToDepth",
            Op::CumSum { .. } => "CumSum",
            Op::DynamicUpdateSlice => "DynamicUpdateSlice",
            Op::SequenceLstm { .. } => "SequenceLstm",
            Op::If { .. } => "If",
            Op::While { .. } => "While",
            Op::Dequantize => "Dequantize",
            Op::Quantize => "Quantize",
        }
    }
}
