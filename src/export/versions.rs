//! TFLite operator versions and the oldest runtime that has each, following TFLite's
//! `op_version.cc` / `runtime_version.cc` for the float cases litecvt writes.

use crate::ir::DType;
use literun::schema::BuiltinOperator as B;

/// The element types an operator version depends on (TFLite's `OpSignature`, reduced).
pub struct TypeSig {
    pub input0: DType,
    /// Type of the second input (weights for conv/dense) if any.
    pub input1: Option<DType>,
    pub output0: DType,
    /// The weights (or a DEQUANTIZE input) have per-channel parameters.
    pub per_channel: bool,
}

/// The version `op_version.cc` gives `code` for these types, combined (max) with `version`,
/// the version the operator's options alone require.
pub fn for_types(code: B, version: i32, t: &TypeSig) -> i32 {
    let (i8_in, f32_in) = (t.input0 == DType::I8, t.input0 == DType::F32);
    let w_i8 = t.input1 == Some(DType::I8);
    let hybrid = f32_in && w_i8 && t.output0 == DType::F32;
    let by_type = match code {
        _ if t.input0 == DType::I16 || t.output0 == DType::I16 => int16_version(code),
        B::CONV_2D if i8_in && w_i8 => 3,
        B::CONV_2D if hybrid => {
            if t.per_channel {
                5
            } else {
                2
            }
        }
        B::DEPTHWISE_CONV_2D if i8_in && w_i8 => 3,
        B::DEPTHWISE_CONV_2D if hybrid => {
            if t.per_channel {
                6
            } else {
                4
            }
        }
        B::FULLY_CONNECTED if hybrid && t.per_channel => 12,
        B::FULLY_CONNECTED if i8_in && w_i8 => 4,
        B::FULLY_CONNECTED if hybrid => 3,
        B::TRANSPOSE_CONV if w_i8 => 2,
        B::BATCH_MATMUL if i8_in => 2,
        B::DEQUANTIZE if t.input0 == DType::F16 => 3,
        B::DEQUANTIZE if i8_in => {
            if t.per_channel {
                5
            } else {
                2
            }
        }
        B::TILE if i8_in => 3,
        B::ADD
        | B::SUB
        | B::MUL
        | B::MAX_POOL_2D
        | B::AVERAGE_POOL_2D
        | B::TRANSPOSE
        | B::SLICE
        | B::STRIDED_SLICE
        | B::RESIZE_BILINEAR
        | B::RESIZE_NEAREST_NEIGHBOR
        | B::MAXIMUM
        | B::MINIMUM
        | B::PAD
        | B::PADV2
        | B::CONCATENATION
        | B::SOFTMAX
        | B::MEAN
        | B::REDUCE_MAX
        | B::REDUCE_MIN
        | B::RELU
        | B::RELU6
        | B::RSQRT
        | B::TANH
        | B::LOGISTIC
        | B::GATHER
        | B::ARG_MAX
            if i8_in =>
        {
            2
        }
        B::SPLIT if t.input1 == Some(DType::I8) => 2,
        B::DEPTH_TO_SPACE | B::SPACE_TO_DEPTH if i8_in => 2,
        B::EQUAL
        | B::NOT_EQUAL
        | B::LESS
        | B::LESS_EQUAL
        | B::GREATER
        | B::GREATER_EQUAL
        | B::TOPK_V2
        | B::ARG_MIN
            if i8_in =>
        {
            2
        }
        B::CAST if i8_in || t.output0 == DType::I8 => 3,
        _ => 1,
    };
    version.max(by_type)
}

/// The version `op_version.cc` gives `code` with int16 activations (int16x8).
fn int16_version(code: B) -> i32 {
    match code {
        B::CONV_2D | B::SLICE | B::SPLIT | B::GATHER | B::MUL => 4,
        B::DEPTHWISE_CONV_2D | B::TRANSPOSE | B::SUB => 5,
        B::FULLY_CONNECTED => 7,
        B::ADD
        | B::MAX_POOL_2D
        | B::AVERAGE_POOL_2D
        | B::CONCATENATION
        | B::PAD
        | B::PADV2
        | B::MEAN
        | B::DEQUANTIZE
        | B::BROADCAST_TO => 3,
        B::MAXIMUM | B::MINIMUM => 4,
        B::QUANTIZE | B::STRIDED_SLICE => 2,
        _ => 1,
    }
}

/// (major, minor, patch) of the oldest TFLite runtime that has `code` at `version`.
pub fn min_runtime(code: B, version: i32) -> (u32, u32, u32) {
    match (code, version) {
        (B::CONV_2D, 1)
        | (B::ADD, 1)
        | (B::MUL, 1)
        | (B::RELU, 1)
        | (B::RELU6, 1)
        | (B::RELU_N1_TO_1, 1) => (1, 5, 0),
        (B::SOFTMAX, 1) | (B::MAX_POOL_2D, 1) | (B::AVERAGE_POOL_2D, 1) | (B::CONCATENATION, 1) => {
            (1, 5, 0)
        }
        (B::SPLIT, 1) | (B::RESHAPE, 1) | (B::PAD, 1) | (B::CAST, 1) | (B::FULLY_CONNECTED, 1) => {
            (1, 5, 0)
        }
        (B::DEPTHWISE_CONV_2D, 1) => (1, 5, 0),
        (B::SUB, 1)
        | (B::DIV, 1)
        | (B::MEAN, 1)
        | (B::STRIDED_SLICE, 1)
        | (B::GATHER, 1)
        | (B::TRANSPOSE, 1) => (1, 6, 0),
        (B::SQUEEZE, 1) => (1, 6, 0),
        (B::EXP, 1) | (B::RESIZE_BILINEAR, 1) => (1, 7, 0),
        (B::PRELU, 1) => (1, 8, 0),
        (B::TRANSPOSE_CONV, 1) | (B::NEG, 1) | (B::FLOOR, 1) | (B::PADV2, 1) | (B::ARG_MAX, 1) => {
            (1, 9, 0)
        }
        (B::SUM, 1) | (B::POW, 1) | (B::SQRT, 1) | (B::RSQRT, 1) | (B::EXPAND_DIMS, 1) => {
            (1, 10, 0)
        }
        (B::TILE, 1) => (1, 10, 1),
        (B::REDUCE_MAX, 1) | (B::REDUCE_MIN, 1) | (B::REDUCE_PROD, 1) => (1, 11, 0),
        (B::DEPTHWISE_CONV_2D, 2) => (1, 12, 0),
        (B::ABS, 1) => (1, 13, 0),
        (B::FLOOR_MOD, 1) => (1, 13, 0),
        (B::SIN, 1) => (1, 9, 0),
        (B::COS, 1) => (1, 14, 0),
        (B::SQUARED_DIFFERENCE, 1) | (B::LEAKY_RELU, 1) | (B::SPLIT_V, 1) | (B::MIRROR_PAD, 1) => {
            (1, 13, 1)
        }
        (B::RESIZE_NEAREST_NEIGHBOR, 1) | (B::DEQUANTIZE, 1) => (1, 13, 1),
        (B::LOGISTIC, 1)
        | (B::TANH, 1)
        | (B::LOG, 1)
        | (B::LOG_SOFTMAX, 1)
        | (B::MAXIMUM, 1)
        | (B::MINIMUM, 1) => (1, 14, 0),
        (B::SLICE, 1) | (B::QUANTIZE, 1) | (B::CEIL, 1) | (B::ROUND, 1) => (1, 14, 0),
        (B::HARD_SWISH, 1) | (B::DEQUANTIZE, 3) => (1, 15, 0),
        // int8 and hybrid kernels (runtime_version.cc).
        (B::CONV_2D, 2 | 3)
        | (B::DEPTHWISE_CONV_2D, 3)
        | (B::FULLY_CONNECTED, 3 | 4)
        | (B::QUANTIZE, 2)
        | (B::DEQUANTIZE, 2) => (1, 14, 0),
        (
            B::ADD
            | B::SUB
            | B::MUL
            | B::MAX_POOL_2D
            | B::AVERAGE_POOL_2D
            | B::CONCATENATION
            | B::SOFTMAX
            | B::LOGISTIC
            | B::TANH
            | B::TRANSPOSE
            | B::PAD
            | B::MEAN
            | B::SPLIT
            | B::GATHER
            | B::RESIZE_BILINEAR
            | B::STRIDED_SLICE,
            2,
        ) => (1, 14, 0),
        (B::DEPTHWISE_CONV_2D, 4) => (2, 2, 0),
        (B::CONV_2D, 5) | (B::DEPTHWISE_CONV_2D, 6) | (B::FULLY_CONNECTED, 9) => (2, 3, 0),
        (B::DEQUANTIZE, 5) => (2, 5, 0),
        (B::FULLY_CONNECTED, 5) => (2, 0, 0),
        (B::FULLY_CONNECTED, 6) => (2, 1, 0),
        (B::RESIZE_BILINEAR, 3) | (B::STRIDED_SLICE, 4) => (2, 2, 0),
        (B::BATCH_MATMUL, 1) | (B::TRANSPOSE_CONV, 3) | (B::RESIZE_NEAREST_NEIGHBOR, 3) => {
            (2, 3, 0)
        }
        (B::SUB, 3) | (B::DIV, 2) | (B::MAXIMUM, 3) | (B::MINIMUM, 3) | (B::TRANSPOSE, 4) => {
            (2, 3, 0)
        }
        (B::BROADCAST_TO, 2) | (B::SLICE, 5) => (2, 5, 0),
        (B::ADD, 4) | (B::SUB, 4) => (2, 4, 0),
        (B::PAD, 4) | (B::PADV2, 4) | (B::MUL, 5) => (2, 6, 0),
        (B::GELU, 1) => (2, 9, 0),
        (
            B::EQUAL | B::NOT_EQUAL | B::LESS | B::LESS_EQUAL | B::GREATER | B::GREATER_EQUAL,
            1 | 2,
        ) => (1, 14, 0),
        (B::LOGICAL_AND | B::LOGICAL_OR | B::LOGICAL_NOT, 1) => (1, 11, 0),
        (B::SELECT_V2, 1) => (2, 2, 0),
        (B::TOPK_V2, 1) => (1, 7, 0),
        (B::TOPK_V2, 2) => (1, 14, 0),
        (B::ARG_MIN, 1) => (1, 9, 0),
        (B::ARG_MAX | B::ARG_MIN, 2) => (1, 14, 0),
        (B::CAST, 3) => (2, 8, 0),
        (B::TRANSPOSE, 6) => (2, 12, 0),
        (B::TRANSPOSE_CONV, 4) => (2, 13, 0),
        (B::SPACE_TO_DEPTH, 1) => (1, 5, 0),
        (B::SPACE_TO_DEPTH, 2) => (1, 14, 0),
        (B::DEPTH_TO_SPACE, 1) => (2, 1, 0),
        (B::DEPTH_TO_SPACE, 2) => (2, 5, 0),
        (B::CUMSUM, 1) => (2, 4, 0),
        (B::IF, 1) | (B::WHILE, 1) => (1, 15, 0),
        (B::DYNAMIC_UPDATE_SLICE, 1) => (2, 9, 0),
        (B::UNIDIRECTIONAL_SEQUENCE_LSTM, 1) => (1, 13, 1),
        _ => (2, 13, 0),
    }
}
