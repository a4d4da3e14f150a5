//! The operators literun supports and their input/output counts.

use core::ops::RangeInclusive;

use crate::schema::BuiltinOperator as B;

/// Allowed input/output counts of an operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arity {
    pub inputs: RangeInclusive<usize>,
    pub outputs: RangeInclusive<usize>,
    /// Inputs `0..required_inputs` may not be omitted (-1).
    pub required_inputs: usize,
}

/// Maximum inputs of a variadic operator (CONCATENATION) and outputs of SPLIT.
pub const MAX_VARIADIC: usize = 1024;

const fn a(i0: usize, i1: usize, req: usize, o0: usize, o1: usize) -> Arity {
    Arity {
        inputs: i0..=i1,
        outputs: o0..=o1,
        required_inputs: req,
    }
}

/// The arity of a supported operator, `None` when literun does not support it.
pub fn arity(code: B) -> Option<Arity> {
    Some(match code {
        B::ADD
        | B::SUB
        | B::MUL
        | B::DIV
        | B::POW
        | B::MAXIMUM
        | B::MINIMUM
        | B::SQUARED_DIFFERENCE
        | B::PRELU
        | B::EQUAL
        | B::NOT_EQUAL
        | B::LESS
        | B::LESS_EQUAL
        | B::GREATER
        | B::GREATER_EQUAL
        | B::LOGICAL_AND
        | B::LOGICAL_OR => a(2, 2, 2, 1, 1),
        B::LOGICAL_NOT => a(1, 1, 1, 1, 1),
        B::SELECT_V2 => a(3, 3, 3, 1, 1),
        B::TOPK_V2 => a(2, 2, 2, 2, 2),
        B::ABS
        | B::NEG
        | B::EXP
        | B::LOG
        | B::SQRT
        | B::RSQRT
        | B::RELU
        | B::RELU6
        | B::RELU_N1_TO_1
        | B::LOGISTIC
        | B::TANH
        | B::HARD_SWISH
        | B::GELU
        | B::LEAKY_RELU
        | B::FLOOR
        | B::SQUARE
        | B::CAST
        | B::DEQUANTIZE
        | B::QUANTIZE
        | B::SQUEEZE => a(1, 1, 1, 1, 1),
        B::RESHAPE => a(1, 2, 1, 1, 1),
        B::EXPAND_DIMS | B::TRANSPOSE | B::GATHER | B::PAD | B::BROADCAST_TO | B::TILE => {
            a(2, 2, 2, 1, 1)
        }
        B::ARG_MAX | B::ARG_MIN => a(2, 2, 2, 1, 1),
        B::PADV2 => a(2, 3, 2, 1, 1),
        B::MIRROR_PAD => a(2, 2, 2, 1, 1),
        B::CONCATENATION => a(1, MAX_VARIADIC, MAX_VARIADIC, 1, 1),
        B::SPLIT => a(2, 2, 2, 1, MAX_VARIADIC),
        B::SPLIT_V => a(3, 3, 3, 1, MAX_VARIADIC),
        B::SLICE => a(3, 3, 3, 1, 1),
        B::STRIDED_SLICE => a(3, 4, 3, 1, 1),
        B::CONV_2D | B::DEPTHWISE_CONV_2D | B::FULLY_CONNECTED => a(2, 3, 2, 1, 1),
        B::TRANSPOSE_CONV => a(3, 4, 3, 1, 1),
        B::BATCH_MATMUL => a(2, 2, 2, 1, 1),
        B::MAX_POOL_2D | B::AVERAGE_POOL_2D | B::SOFTMAX | B::LOG_SOFTMAX => a(1, 1, 1, 1, 1),
        B::RESIZE_BILINEAR | B::RESIZE_NEAREST_NEIGHBOR => a(2, 2, 2, 1, 1),
        B::MEAN | B::SUM | B::REDUCE_MAX | B::REDUCE_MIN | B::REDUCE_PROD => a(2, 2, 2, 1, 1),
        _ => return None,
    })
}
