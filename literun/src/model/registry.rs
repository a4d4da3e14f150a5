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

/// The operator table: every operator literun supports, by family. A family is a module of
/// [`crate::ops`] (its `prepare` prepares each operator of the family) and an `ops-*` Cargo
/// feature; each operator has its input and output counts
/// `(inputs min, max, required, outputs min, max)`. [`arity`], [`family_feature`],
/// [`supported_name`] and `crate::ops::prepare_op` all come from this table:
/// `op_table!(callback)` calls `callback!` with it. The families after the `;` are named only
/// when compiled in (or with `error-details`).
macro_rules! op_table {
    ($callback:ident) => {
        $callback! {
            conv "ops-conv" {
                CONV_2D: (2, 3, 2, 1, 1);
            }
            depthwise_conv "ops-depthwise-conv" {
                DEPTHWISE_CONV_2D: (2, 3, 2, 1, 1);
            }
            transpose_conv "ops-transpose-conv" {
                TRANSPOSE_CONV: (3, 4, 3, 1, 1);
            }
            fully_connected "ops-fully-connected" {
                FULLY_CONNECTED: (2, 3, 2, 1, 1);
            }
            batch_matmul "ops-batch-matmul" {
                BATCH_MATMUL: (2, 2, 2, 1, 1);
            }
            pool "ops-pool" {
                MAX_POOL_2D AVERAGE_POOL_2D: (1, 1, 1, 1, 1);
            }
            softmax "ops-softmax" {
                SOFTMAX LOG_SOFTMAX: (1, 1, 1, 1, 1);
            }
            elementwise "ops-elementwise" {
                ADD SUB MUL DIV POW MAXIMUM MINIMUM SQUARED_DIFFERENCE PRELU: (2, 2, 2, 1, 1);
                ABS NEG EXP LOG SQRT RSQRT RELU RELU6 RELU_N1_TO_1 RELU_0_TO_1 LOGISTIC TANH HARD_SWISH GELU
                    LEAKY_RELU FLOOR CEIL ROUND SQUARE CAST: (1, 1, 1, 1, 1);
            }
            reshape "ops-reshape" {
                RESHAPE: (1, 2, 1, 1, 1);
                SQUEEZE: (1, 1, 1, 1, 1);
                EXPAND_DIMS: (2, 2, 2, 1, 1);
            }
            pad "ops-pad" {
                PAD MIRROR_PAD: (2, 2, 2, 1, 1);
                PADV2: (2, 3, 2, 1, 1);
            }
            shape "ops-shape" {
                TRANSPOSE GATHER BROADCAST_TO TILE: (2, 2, 2, 1, 1);
                CONCATENATION: (1, MAX_VARIADIC, MAX_VARIADIC, 1, 1);
                SPLIT: (2, 2, 2, 1, MAX_VARIADIC);
                SPLIT_V: (3, 3, 3, 1, MAX_VARIADIC);
                SLICE: (3, 3, 3, 1, 1);
                STRIDED_SLICE: (3, 4, 3, 1, 1);
            }
            quantize "ops-quantize" {
                QUANTIZE DEQUANTIZE: (1, 1, 1, 1, 1);
            }
            reduce "ops-reduce" {
                MEAN SUM REDUCE_MAX REDUCE_MIN REDUCE_PROD ARG_MAX ARG_MIN: (2, 2, 2, 1, 1);
            }
            resize "ops-resize" {
                RESIZE_BILINEAR RESIZE_NEAREST_NEIGHBOR: (2, 2, 2, 1, 1);
            }
            compare "ops-compare" {
                EQUAL NOT_EQUAL LESS LESS_EQUAL GREATER GREATER_EQUAL LOGICAL_AND LOGICAL_OR:
                    (2, 2, 2, 1, 1);
                LOGICAL_NOT: (1, 1, 1, 1, 1);
                SELECT_V2: (3, 3, 3, 1, 1);
                TOPK_V2: (2, 2, 2, 2, 2);
            }
            ;
            // TFLite Micro's further builtins: named in errors (`supported_name`) only when their
            // family or `error-details` is compiled in, so builds without them (the firmware)
            // carry none of their names.
            pool "ops-pool" {
                L2_POOL_2D: (1, 1, 1, 1, 1);
            }
            elementwise "ops-elementwise" {
                FLOOR_DIV FLOOR_MOD: (2, 2, 2, 1, 1);
                SIN COS ELU: (1, 1, 1, 1, 1);
            }
            shape "ops-shape" {
                PACK: (1, MAX_VARIADIC, MAX_VARIADIC, 1, 1);
                UNPACK: (1, 1, 1, 1, MAX_VARIADIC);
                REVERSE_V2 EMBEDDING_LOOKUP: (2, 2, 2, 1, 1);
                DEPTH_TO_SPACE SPACE_TO_DEPTH: (1, 1, 1, 1, 1);
            }
            reduce "ops-reduce" {
                REDUCE_ALL: (2, 2, 2, 1, 1);
            }
            data "ops-data" {
                SHAPE ZEROS_LIKE: (1, 1, 1, 1, 1);
                FILL BROADCAST_ARGS GATHER_ND: (2, 2, 2, 1, 1);
                DYNAMIC_UPDATE_SLICE SPACE_TO_BATCH_ND BATCH_TO_SPACE_ND: (3, 3, 3, 1, 1);
            }
            accumulate "ops-accumulate" {
                ADD_N: (1, MAX_VARIADIC, MAX_VARIADIC, 1, 1);
                CUMSUM: (2, 2, 2, 1, 1);
                L2_NORMALIZATION: (1, 1, 1, 1, 1);
            }
            sequence "ops-sequence" {
                UNIDIRECTIONAL_SEQUENCE_LSTM: (20, 24, 1, 1, 1);
                SVDF: (5, 5, 3, 1, 1);
            }
            variables "ops-variables" {
                VAR_HANDLE: (0, 0, 0, 1, 1);
                READ_VARIABLE: (1, 1, 1, 1, 1);
                ASSIGN_VARIABLE: (2, 2, 2, 0, 0);
                CALL_ONCE: (0, 0, 0, 0, 0);
                IF: (1, MAX_VARIADIC, MAX_VARIADIC, 0, MAX_VARIADIC);
                WHILE: (0, MAX_VARIADIC, MAX_VARIADIC, 0, MAX_VARIADIC);
            }
            fft "ops-fft" {
                RFFT2D: (2, 2, 2, 1, 1);
                COMPLEX_ABS REAL IMAG: (1, 1, 1, 1, 1);
            }
        }
    };
}
pub(crate) use op_table;

/// The registry's functions from the operator table.
macro_rules! registry {
    ($(
        $family:ident $feature:literal {
            $( $($op:ident)+ : ($i0:expr, $i1:expr, $req:expr, $o0:expr, $o1:expr); )*
        }
    )* ; $(
        $lfamily:ident $lfeature:literal {
            $( $($lop:ident)+ : ($li0:expr, $li1:expr, $lreq:expr, $lo0:expr, $lo1:expr); )*
        }
    )*) => {
        /// The arity of a supported operator, `None` when literun does not support it.
        pub fn arity(code: B) -> Option<Arity> {
            Some(match code {
                $($( $(B::$op)|+ => Arity {
                    inputs: $i0..=$i1,
                    outputs: $o0..=$o1,
                    required_inputs: $req,
                }, )*)*
                $($( $(B::$lop)|+ => Arity {
                    inputs: $li0..=$li1,
                    outputs: $lo0..=$lo1,
                    required_inputs: $lreq,
                }, )*)*
                _ => return None,
            })
        }

        /// [`arity`] of an operator this build compiles in (its family's feature is on), `None`
        /// for others: models are checked with it, and a build without some families keeps no
        /// table of their arities.
        // With no family compiled in, every arm is `return None`.
        #[allow(unreachable_code)]
        pub(crate) fn compiled_arity(code: B) -> Option<Arity> {
            Some(match code {
                $($(
                    #[cfg(feature = $feature)]
                    $(B::$op)|+ => Arity {
                        inputs: $i0..=$i1,
                        outputs: $o0..=$o1,
                        required_inputs: $req,
                    },
                )*)*
                $($(
                    #[cfg(feature = $lfeature)]
                    $(B::$lop)|+ => Arity {
                        inputs: $li0..=$li1,
                        outputs: $lo0..=$lo1,
                        required_inputs: $lreq,
                    },
                )*)*
                _ => return None,
            })
        }

        /// The Cargo feature of `code`'s operator family (`"ops-conv"`...), `None` for an
        /// operator literun does not support.
        pub fn family_feature(code: B) -> Option<&'static str> {
            Some(match code {
                $( $($(B::$op)|+)|* => $feature, )*
                $( $($(B::$lop)|+)|* => $lfeature, )*
                _ => return None,
            })
        }

        /// The name of an operator literun supports (compiled in or not, but those of the
        /// families after the table's `;` only when compiled in or with `error-details`), e.g.
        /// `"CONV_2D"`; `None` for others. Without the `error-details` feature, errors name
        /// operators with this (the schema's full list of names is 4 KiB of firmware); with
        /// it, with the schema's names.
        pub fn supported_name(code: B) -> Option<&'static str> {
            // Codes (all below 256) and space-separated names: a compact table, searched rarely.
            const CODES: &[u8] = &[$($($(B::$op.0 as u8,)+)*)*];
            const NAMES: &str = concat!($($($(stringify!($op), " ",)+)*)*);
            $(
                #[cfg(any(feature = $lfeature, feature = "error-details"))]
                {
                    const CODES: &[u8] = &[$($(B::$lop.0 as u8,)+)*];
                    const NAMES: &str = concat!($($(stringify!($lop), " ",)+)*);
                    if let Some(n) = name_in(CODES, NAMES, code) {
                        return Some(n);
                    }
                }
            )*
            name_in(CODES, NAMES, code)
        }
    };
}
op_table!(registry);

/// The name of `code` in `names` (space-separated, in the order of `codes`).
fn name_in(codes: &[u8], names: &'static str, code: B) -> Option<&'static str> {
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

/// `(name, cfg!(feature = name))` for each listed feature.
macro_rules! compiled_in {
    ($($name:literal),* $(,)?) => {
        [$(($name, cfg!(feature = $name))),*]
    };
}

/// The `ops-*` features of this crate and whether each is compiled in (every `ops-*` feature
/// of `Cargo.toml` but `all-ops`, which only switches on the others).
pub const FEATURES: [(&str, bool); 24] = compiled_in![
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
    "ops-data",
    "ops-accumulate",
    "ops-sequence",
    "ops-variables",
    "ops-fft",
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

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use alloc::{vec, vec::Vec};

    /// Every supported operator has a family feature and its schema name, and nothing else does.
    #[test]
    fn names_and_families_cover_exactly_the_supported_operators() {
        for c in i32::from(i8::MIN)..=300 {
            let code = B(c);
            let supported = arity(code).is_some();
            assert_eq!(family_feature(code).is_some(), supported, "{code:?}");
            let compiled = family_feature(code).is_some_and(feature_enabled);
            let want = arity(code).filter(|_| compiled);
            assert_eq!(compiled_arity(code), want, "{code:?}");
            match supported_name(code) {
                Some(n) => assert_eq!(Some(n), code.variant_name(), "{code:?}"),
                // Without `error-details`, families not compiled in may go unnamed.
                None => assert!(
                    !supported || (!compiled && !cfg!(feature = "error-details")),
                    "{code:?}"
                ),
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
