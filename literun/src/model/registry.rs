//! The operators literun supports: their names, input/output counts and Cargo features.

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

/// The Cargo feature of `code`'s operator family (`"ops-conv"`...), `None` for an operator
/// literun does not support.
pub fn family_feature(code: B) -> Option<&'static str> {
    Some(match code {
        B::CONV_2D => "ops-conv",
        B::DEPTHWISE_CONV_2D => "ops-depthwise-conv",
        B::TRANSPOSE_CONV => "ops-transpose-conv",
        B::FULLY_CONNECTED => "ops-fully-connected",
        B::BATCH_MATMUL => "ops-batch-matmul",
        B::MAX_POOL_2D | B::AVERAGE_POOL_2D => "ops-pool",
        B::SOFTMAX | B::LOG_SOFTMAX => "ops-softmax",
        B::ADD
        | B::SUB
        | B::MUL
        | B::DIV
        | B::POW
        | B::MAXIMUM
        | B::MINIMUM
        | B::SQUARED_DIFFERENCE
        | B::PRELU
        | B::ABS
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
        | B::CAST => "ops-elementwise",
        B::RESHAPE | B::SQUEEZE | B::EXPAND_DIMS => "ops-reshape",
        B::PAD | B::PADV2 | B::MIRROR_PAD => "ops-pad",
        B::TRANSPOSE
        | B::CONCATENATION
        | B::SPLIT
        | B::SPLIT_V
        | B::SLICE
        | B::STRIDED_SLICE
        | B::GATHER
        | B::BROADCAST_TO
        | B::TILE => "ops-shape",
        B::QUANTIZE | B::DEQUANTIZE => "ops-quantize",
        B::MEAN
        | B::SUM
        | B::REDUCE_MAX
        | B::REDUCE_MIN
        | B::REDUCE_PROD
        | B::ARG_MAX
        | B::ARG_MIN => "ops-reduce",
        B::RESIZE_BILINEAR | B::RESIZE_NEAREST_NEIGHBOR => "ops-resize",
        B::EQUAL
        | B::NOT_EQUAL
        | B::LESS
        | B::LESS_EQUAL
        | B::GREATER
        | B::GREATER_EQUAL
        | B::LOGICAL_AND
        | B::LOGICAL_OR
        | B::LOGICAL_NOT
        | B::SELECT_V2
        | B::TOPK_V2 => "ops-compare",
        _ => return None,
    })
}

/// `(name, cfg!(feature = name))` for each listed feature.
macro_rules! compiled_in {
    ($($name:literal),* $(,)?) => {
        [$(($name, cfg!(feature = $name))),*]
    };
}

/// The `ops-*` features of this crate and whether each is compiled in (every `ops-*` feature
/// of `Cargo.toml` but `all-ops`, which only switches on the others).
pub const FEATURES: [(&str, bool); 19] = compiled_in![
    "ops-float",
    "ops-int8",
    "ops-int16",
    "ops-hybrid",
    "ops-conv",
    "ops-depthwise-conv",
    "ops-transpose-conv",
    "ops-fully-connected",
    "ops-batch-matmul",
    "ops-pool",
    "ops-softmax",
    "ops-elementwise",
    "ops-reshape",
    "ops-pad",
    "ops-shape",
    "ops-quantize",
    "ops-reduce",
    "ops-resize",
    "ops-compare",
];

/// Whether an `ops-*` feature of this crate (an operator family or element type) is compiled in.
pub fn feature_enabled(feature: &str) -> bool {
    FEATURES.iter().any(|&(f, on)| on && f == feature)
}

/// The feature `code` needs that this build lacks (its family's), `None` when the operator is
/// compiled in or not supported at all (see [`arity`]).
pub fn missing_feature(code: B) -> Option<&'static str> {
    family_feature(code).filter(|f| !feature_enabled(f))
}

/// The element-type feature (`ops-float`, `ops-int8`, `ops-int16`, `ops-hybrid`) that CONV_2D and
/// FULLY_CONNECTED with these input and weight types need, when this build lacks it. Their
/// preparation compiles its per-type branches by these features, so this is checked before
/// preparing (`None` for other operators and type pairs; preparation reports those).
pub(crate) fn missing_type_feature(
    code: B,
    input: crate::DType,
    weights: crate::DType,
) -> Option<&'static str> {
    use crate::DType as D;
    if !matches!(code, B::CONV_2D | B::FULLY_CONNECTED) {
        return None;
    }
    let (name, on) = match (input, weights) {
        (D::F32, D::F32) => ("ops-float", cfg!(feature = "ops-float")),
        (D::I8, D::I8) => ("ops-int8", cfg!(feature = "ops-int8")),
        (D::F32, D::I8) => ("ops-hybrid", cfg!(feature = "ops-hybrid")),
        (D::I16, D::I8) => ("ops-int16", cfg!(feature = "ops-int16")),
        _ => return None,
    };
    (!on).then_some(name)
}

/// The name of an operator literun supports (compiled in or not), e.g. `"CONV_2D"`; `None` for
/// others. Without the `error-details` feature, errors name operators with this (the schema's
/// full list of names is 4 KiB of firmware); with it, with the schema's names.
pub fn supported_name(code: B) -> Option<&'static str> {
    // Codes (all below 256) and space-separated names: a compact table, searched rarely.
    macro_rules! names {
        ($($op:ident),* $(,)?) => {
            (&[$(B::$op.0 as u8),*], concat!($(stringify!($op), " "),*))
        };
    }
    let (codes, names): (&[u8], &str) = names!(
        ADD,
        SUB,
        MUL,
        DIV,
        POW,
        MAXIMUM,
        MINIMUM,
        SQUARED_DIFFERENCE,
        PRELU,
        EQUAL,
        NOT_EQUAL,
        LESS,
        LESS_EQUAL,
        GREATER,
        GREATER_EQUAL,
        LOGICAL_AND,
        LOGICAL_OR,
        LOGICAL_NOT,
        SELECT_V2,
        TOPK_V2,
        ABS,
        NEG,
        EXP,
        LOG,
        SQRT,
        RSQRT,
        RELU,
        RELU6,
        RELU_N1_TO_1,
        LOGISTIC,
        TANH,
        HARD_SWISH,
        GELU,
        LEAKY_RELU,
        FLOOR,
        SQUARE,
        CAST,
        DEQUANTIZE,
        QUANTIZE,
        SQUEEZE,
        RESHAPE,
        EXPAND_DIMS,
        TRANSPOSE,
        GATHER,
        PAD,
        BROADCAST_TO,
        TILE,
        ARG_MAX,
        ARG_MIN,
        PADV2,
        MIRROR_PAD,
        CONCATENATION,
        SPLIT,
        SPLIT_V,
        SLICE,
        STRIDED_SLICE,
        CONV_2D,
        DEPTHWISE_CONV_2D,
        FULLY_CONNECTED,
        TRANSPOSE_CONV,
        BATCH_MATMUL,
        MAX_POOL_2D,
        AVERAGE_POOL_2D,
        SOFTMAX,
        LOG_SOFTMAX,
        RESIZE_BILINEAR,
        RESIZE_NEAREST_NEIGHBOR,
        MEAN,
        SUM,
        REDUCE_MAX,
        REDUCE_MIN,
        REDUCE_PROD
    );
    let i = codes.iter().position(|&c| i32::from(c) == code.0)?;
    let mut start = 0;
    let mut k = 0;
    for (j, &b) in names.as_bytes().iter().enumerate() {
        if b == b' ' {
            if k == i {
                return names.get(start..j);
            }
            k += 1;
            start = j + 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every supported operator has a family feature and its schema name, and nothing else does.
    #[test]
    fn names_and_families_cover_exactly_the_supported_operators() {
        for c in i32::from(i8::MIN)..=300 {
            let code = B(c);
            let supported = arity(code).is_some();
            assert_eq!(family_feature(code).is_some(), supported, "{code:?}");
            match supported_name(code) {
                Some(n) => assert_eq!(Some(n), code.variant_name(), "{code:?}"),
                None => assert!(!supported, "{code:?}"),
            }
        }
    }

    /// `FEATURES` lists exactly the `ops-*` features `Cargo.toml` declares, each with whether
    /// this build has it.
    #[test]
    fn features_are_exactly_the_declared_ones() {
        let manifest = include_str!("../../Cargo.toml");
        let features = &manifest[manifest.find("[features]").unwrap()..];
        let features = &features[..features.find("\n[").unwrap_or(features.len())];
        let declared: Vec<&str> = features
            .lines()
            .filter_map(|l| l.split_once(" = ").map(|(name, _)| name.trim()))
            .filter(|name| name.starts_with("ops-"))
            .collect();
        let listed: Vec<&str> = FEATURES.iter().map(|f| f.0).collect();
        assert_eq!(listed, declared);
        assert_eq!(feature_enabled("ops-int16"), cfg!(feature = "ops-int16"));
        assert_eq!(feature_enabled("ops-float"), cfg!(feature = "ops-float"));
        assert!(!feature_enabled("all-ops"));
    }
}
