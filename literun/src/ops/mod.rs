//! The operators: one module per operator family, each holding its prepared form (a variant
//! of [`Kind`]), its preparation, its run, and its rewrite rules; [`fast`] selects and runs the
//! SIMD kernels with pre-packed weights. The table of supported operators (names, input/output
//! counts, Cargo features) is [`crate::model::registry`], re-exported here.
// With some `ops-*` features off, helpers only the left-out operators use are unused; without
// `error-details`, values only error messages mention.
#![cfg_attr(
    not(all(feature = "all-ops", feature = "error-details")),
    allow(
        dead_code,
        unused_imports,
        unused_variables,
        unused_macros,
        unreachable_code
    )
)]

#[cfg(feature = "ops-accumulate")]
use self::accumulate::Accumulate;
use self::batch_matmul::BatchMatMul;
use self::buffers::{Ins, Scratch};
use self::compare::Compare;
use self::context::Ctx;
use self::conv::Conv;
#[cfg(feature = "ops-data")]
use self::data::Data;
use self::depthwise_conv::Depthwise;
use self::elementwise::Elementwise;
#[cfg(feature = "ops-fft")]
use self::fft::Fft;
use self::fully_connected::FullyConnected;
use self::pad::Pad;
use self::pool::Pool;
use self::quantize::Quantize;
use self::reduce::Reduce;
use self::resize::Resize;
#[cfg(feature = "ops-sequence")]
use self::sequence::Sequence;
use self::shape::Shape;
use self::softmax::Softmax;
use self::transpose_conv::TransposeConv;
use crate::error::{Error, Result};
use crate::kernels::elementwise as ew;
use crate::model::{op_err, DType, Model, OpDesc};
use crate::schema::BuiltinOperator as B;
use alloc::vec::Vec;

pub(crate) use crate::model::registry::missing_type_feature;
use crate::model::registry::op_table;
pub use crate::model::registry::{
    arity, family_feature, feature_enabled, missing_feature, supported_name, Arity, FEATURES,
    MAX_VARIADIC,
};

pub(crate) mod buffers;
pub(crate) mod context;
pub(crate) mod fast;

#[cfg(feature = "ops-accumulate")]
pub(crate) mod accumulate;
pub(crate) mod batch_matmul;
pub(crate) mod compare;
pub(crate) mod conv;
#[cfg(feature = "ops-data")]
pub(crate) mod data;
pub(crate) mod depthwise_conv;
pub(crate) mod elementwise;
#[cfg(feature = "ops-fft")]
pub(crate) mod fft;
pub(crate) mod fully_connected;
#[cfg(feature = "ops-sequence")]
pub(crate) mod lstm_int8;
pub(crate) mod pad;
pub(crate) mod pool;
pub(crate) mod quantize;
pub(crate) mod reduce;
pub(crate) mod reshape;
pub(crate) mod resize;
#[cfg(feature = "ops-sequence")]
pub(crate) mod sequence;
pub(crate) mod shape;
#[cfg(feature = "dynamic-shapes")]
pub(crate) mod shape_values;
pub(crate) mod shape_views;
pub(crate) mod softmax;
pub(crate) mod transpose_conv;
#[cfg(feature = "ops-variables")]
pub(crate) mod variables;

/// The integer element type of an operator whose int8 and int16 forms share their parameters
/// and differ only in the kernel's element type (and the Cargo feature compiling it in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Precision {
    I8,
    /// Int16 activations (int16x8 where the operator has weights: int8 weights).
    I16,
}

impl Precision {
    /// The precision of a quantized tensor type: `I16` for INT16, else `I8`.
    pub(crate) fn of(dtype: DType) -> Precision {
        if dtype == DType::I16 {
            Precision::I16
        } else {
            Precision::I8
        }
    }
}

/// What `invoke` does for one operator (all sizes and parameters resolved): the operator
/// family, holding its own prepared parameters, or a form any family can prepare into.
#[derive(Debug)]
pub(crate) enum Kind {
    Conv(Conv),
    Depthwise(Depthwise),
    TransposeConv(TransposeConv),
    FullyConnected(FullyConnected),
    BatchMatMul(BatchMatMul),
    Pool(Pool),
    Softmax(Softmax),
    Elementwise(Elementwise),
    Pad(Pad),
    Shape(Shape),
    Quantize(Quantize),
    Reduce(Reduce),
    Resize(Resize),
    Compare(Compare),
    // The families added for TFLite Micro's builtins exist only when compiled in, so that
    // builds without them (the firmware) carry none of their dispatch and drop code.
    #[cfg(feature = "ops-data")]
    Data(Data),
    #[cfg(feature = "ops-accumulate")]
    Accumulate(Accumulate),
    #[cfg(feature = "ops-sequence")]
    Sequence(Sequence),
    #[cfg(feature = "ops-variables")]
    Variables(variables::Variables),
    #[cfg(feature = "ops-fft")]
    Fft(Fft),
    Copy,
    /// A DEQUANTIZE of a constant, done once in `Interpreter::new` (nothing to do at run time).
    Precomputed,
    /// An 8-bit -> 8-bit elementwise operator as a table over the input bytes.
    Lut8 {
        table: alloc::boxed::Box<ew::Lut8>,
    },
}

/// `prepare_family(c, code)`: the `prepare` of `code`'s family, from the operator table.
macro_rules! prepare_dispatch {
    ($(
        $family:ident $feature:literal {
            $( $($op:ident)+ : $arity:tt; )*
        }
    )* ; $(
        $lfamily:ident $lfeature:literal {
            $( $($lop:ident)+ : $larity:tt; )*
        }
    )*) => {
        fn prepare_family(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
            match code {
                $(
                    #[cfg(feature = $feature)]
                    $($(B::$op)|+)|* => $family::prepare(c, code),
                )*
                $(
                    #[cfg(feature = $lfeature)]
                    $($(B::$lop)|+)|* => $lfamily::prepare(c, code),
                )*
                _ => Err(c.err("not supported by the interpreter")),
            }
        }
    };
}
op_table!(prepare_dispatch);

/// Prepares operator `index`.
pub(crate) fn prepare_op(model: &Model<'_>, index: usize, op: &OpDesc<'_>) -> Result<Kind> {
    let c = Ctx {
        index,
        op,
        tensors: model.tensors(),
        inferred: None,
    };
    prepare_family(&c, op.code)
}

/// What [`infer_output_shapes`] finds for one operator.
#[cfg(feature = "dynamic-shapes")]
pub(crate) struct Inferred {
    /// (output position, shape); an output the operator's preparation does not compute is
    /// left out.
    pub(crate) shapes: Vec<(usize, Vec<usize>)>,
    /// The values of output 0 when they are known before running (shape arithmetic).
    pub(crate) values: Option<Vec<i64>>,
}

#[cfg(feature = "dynamic-shapes")]
/// The output shapes operator `index` computes from the shapes of its inputs in `tensors` (and
/// the integer `values` known before running, by tensor). Runs the operator's preparation with
/// its output shape checks turned into records, then [`shape_values::evaluate`].
pub(crate) fn infer_output_shapes(
    tensors: &[crate::model::TensorDesc<'_>],
    values: &[Option<Vec<i64>>],
    index: usize,
    op: &OpDesc<'_>,
) -> Result<Inferred> {
    let inferred = context::Inference {
        shapes: core::cell::RefCell::new(Vec::new()),
        values,
    };
    let c = Ctx {
        index,
        op,
        tensors,
        inferred: Some(&inferred),
    };
    prepare_family(&c, op.code)?;
    let values = shape_values::evaluate(&c);
    Ok(Inferred {
        shapes: inferred.shapes.into_inner(),
        values,
    })
}

impl Kind {
    /// For a float operator whose output a QUANTIZE reads: compute as LiteRT's reference
    /// kernels do (math-library `exp`, TFLite's GELU formula) rather than with the vectorizing
    /// approximations, which agree to a few ulp but could requantize a value one step apart.
    pub(crate) fn keep_reference_math(&mut self) {
        match self {
            Kind::Softmax(Softmax::F32 { requantized, .. })
            | Kind::Elementwise(Elementwise::Unary { requantized, .. }) => *requantized = true,
            _ => {}
        }
    }

    /// Frees the per-channel multipliers and shifts of an int8 conv/depthwise/fully-connected
    /// layer once its fast kernel holds them in its own form: an operator with a fast kernel
    /// never runs the portable one (`run_one`), and a model with thousands of channels would
    /// hold them twice.
    pub(crate) fn drop_portable_requant(&mut self) {
        if let Kind::Conv(Conv::Quantized {
            precision: Precision::I8,
            q,
            ..
        })
        | Kind::FullyConnected(FullyConnected::Quantized {
            precision: Precision::I8,
            q,
            ..
        })
        | Kind::Depthwise(Depthwise::Quantized {
            precision: Precision::I8,
            q,
            ..
        }) = self
        {
            q.multipliers = Vec::new();
            q.shifts = Vec::new();
        }
    }

    /// Scratch this operator needs at run time: (i8 values, f32 values, i32 values).
    pub(crate) fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Kind::Conv(k) => k.scratch(),
            Kind::Depthwise(k) => k.scratch(),
            Kind::TransposeConv(k) => k.scratch(),
            Kind::FullyConnected(k) => k.scratch(),
            Kind::BatchMatMul(k) => k.scratch(),
            Kind::Reduce(k) => k.scratch(),
            Kind::Compare(k) => k.scratch(),
            #[cfg(feature = "ops-data")]
            Kind::Data(_) => (0, 0, 0),
            #[cfg(feature = "ops-accumulate")]
            Kind::Accumulate(_) => (0, 0, 0),
            #[cfg(feature = "ops-sequence")]
            Kind::Sequence(_) => (0, 0, 0),
            #[cfg(feature = "ops-fft")]
            Kind::Fft(k) => k.scratch(),
            Kind::Pool(_)
            | Kind::Softmax(_)
            | Kind::Elementwise(_)
            | Kind::Pad(_)
            | Kind::Shape(_)
            | Kind::Quantize(_)
            | Kind::Resize(_)
            | Kind::Copy
            | Kind::Precomputed
            | Kind::Lut8 { .. } => (0, 0, 0),
            #[cfg(feature = "ops-variables")]
            Kind::Variables(_) => (0, 0, 0),
        }
    }

    /// Runs a single-output operator with its portable kernel, reading `ins`, writing `out`.
    #[inline]
    pub(crate) fn run<'b>(
        &self,
        index: usize,
        op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        scratch: &mut Scratch,
    ) -> Result<()> {
        match self {
            Kind::Conv(k) => k.run(index, op, ins, out, scratch),
            Kind::Depthwise(k) => k.run(index, op, ins, out, scratch),
            Kind::TransposeConv(k) => k.run(index, op, ins, out, scratch),
            Kind::FullyConnected(k) => k.run(index, op, ins, out, scratch),
            Kind::BatchMatMul(k) => k.run(index, op, ins, out, scratch),
            Kind::Pool(k) => k.run(index, op, ins, out, scratch),
            Kind::Softmax(k) => k.run(index, op, ins, out, scratch),
            Kind::Elementwise(k) => k.run(index, op, ins, out, scratch),
            Kind::Pad(k) => k.run(index, op, ins, out, scratch),
            Kind::Shape(k) => k.run(index, op, ins, out, scratch),
            Kind::Quantize(k) => k.run(index, op, ins, out, scratch),
            Kind::Reduce(k) => k.run(index, op, ins, out, scratch),
            Kind::Resize(k) => k.run(index, op, ins, out, scratch),
            Kind::Compare(k) => k.run(index, op, ins, out, scratch),
            #[cfg(feature = "ops-data")]
            Kind::Data(k) => k.run(index, op, ins, out, scratch),
            #[cfg(feature = "ops-accumulate")]
            Kind::Accumulate(k) => k.run(index, op, ins, out, scratch),
            #[cfg(feature = "ops-sequence")]
            Kind::Sequence(k) => k.run(index, op, ins, out, scratch),
            #[cfg(feature = "ops-fft")]
            Kind::Fft(k) => k.run(index, op, ins, out, scratch),
            Kind::Copy => {
                let i = ins.bytes(0).unwrap_or(&[]);
                if i.len() == out.len() {
                    out.copy_from_slice(i);
                }
                Ok(())
            }
            Kind::Precomputed => Ok(()),
            // They need the interpreter's variables: `Interpreter::invoke` runs them.
            #[cfg(feature = "ops-variables")]
            Kind::Variables(_) => Err(op_err(index, op, "needs the interpreter's variables")),
            Kind::Lut8 { table } => {
                ew::apply_lut8(table, ins.bytes(0).unwrap_or(&[]), out);
                Ok(())
            }
        }
    }
}

/// The error of an operator whose kernel this build leaves out (`Interpreter::new` refuses such
/// models first, see [`missing_kernel_feature`]). Used only by builds leaving some out.
#[cfg_attr(all(feature = "all-ops"), allow(dead_code))]
fn compiled_out(index: usize, op: &OpDesc<'_>) -> Error {
    op_err(index, op, "kernel not compiled in")
}

/// The feature the kernel of a prepared operator needs that this build lacks: its family's, or
/// its element type's (`ops-float`, `ops-int8`, `ops-hybrid`). Must match the `cfg`s of the
/// kernel dispatch in each family's `run`.
pub(crate) fn missing_kernel_feature(kind: &Kind) -> Option<&'static str> {
    use Kind as K;
    // (name, compiled in): constants, so a build keeps only the arms it needs.
    macro_rules! f {
        ($name:literal) => {
            ($name, cfg!(feature = $name))
        };
    }
    const F: (&str, bool) = f!("ops-float");
    const I: (&str, bool) = f!("ops-int8");
    const H: (&str, bool) = f!("ops-hybrid");
    const W: (&str, bool) = f!("ops-int16");
    let (family, ty) = match kind {
        K::Conv(Conv::F32 { .. }) => (f!("ops-conv"), Some(F)),
        K::Conv(Conv::Quantized {
            precision: Precision::I8,
            ..
        }) => (f!("ops-conv"), Some(I)),
        K::Conv(Conv::Hybrid { .. }) => (f!("ops-conv"), Some(H)),
        K::Conv(Conv::Quantized {
            precision: Precision::I16,
            ..
        }) => (f!("ops-conv"), Some(W)),
        K::Depthwise(Depthwise::Quantized {
            precision: Precision::I16,
            ..
        }) => (f!("ops-depthwise-conv"), Some(W)),
        K::FullyConnected(FullyConnected::Quantized {
            precision: Precision::I16,
            ..
        }) => (f!("ops-fully-connected"), Some(W)),
        K::Pool(Pool::Quantized {
            precision: Precision::I16,
            ..
        }) => (f!("ops-pool"), Some(W)),
        K::Elementwise(Elementwise::BinaryQuantized {
            precision: Precision::I16,
            ..
        }) => (f!("ops-elementwise"), Some(W)),
        K::Reduce(Reduce::Mean {
            precision: Precision::I16,
            ..
        }) => (f!("ops-reduce"), Some(W)),
        K::Quantize(Quantize::Requantize { .. }) => (f!("ops-quantize"), Some(W)),
        K::Depthwise(Depthwise::F32 { .. }) => (f!("ops-depthwise-conv"), Some(F)),
        K::Depthwise(Depthwise::Quantized {
            precision: Precision::I8,
            ..
        }) => (f!("ops-depthwise-conv"), Some(I)),
        K::Depthwise(Depthwise::Hybrid { .. }) => (f!("ops-depthwise-conv"), Some(H)),
        K::TransposeConv(TransposeConv::F32 { .. }) => (f!("ops-transpose-conv"), Some(F)),
        K::TransposeConv(TransposeConv::I8 { .. }) => (f!("ops-transpose-conv"), Some(I)),
        K::FullyConnected(FullyConnected::F32 { .. }) => (f!("ops-fully-connected"), Some(F)),
        K::FullyConnected(FullyConnected::Quantized {
            precision: Precision::I8,
            ..
        }) => (f!("ops-fully-connected"), Some(I)),
        K::FullyConnected(FullyConnected::Hybrid { .. }) => (f!("ops-fully-connected"), Some(H)),
        K::BatchMatMul(BatchMatMul::F32 { .. }) => (f!("ops-batch-matmul"), Some(F)),
        K::BatchMatMul(BatchMatMul::I8 { .. }) => (f!("ops-batch-matmul"), Some(I)),
        K::BatchMatMul(BatchMatMul::Hybrid { .. }) => (f!("ops-batch-matmul"), Some(H)),
        K::Pool(Pool::F32 { .. }) | K::Pool(Pool::L2F32 { .. }) => (f!("ops-pool"), Some(F)),
        K::Pool(Pool::Quantized {
            precision: Precision::I8,
            ..
        }) => (f!("ops-pool"), Some(I)),
        K::Softmax(Softmax::F32 { .. }) => (f!("ops-softmax"), Some(F)),
        K::Softmax(Softmax::I8 { .. }) => (f!("ops-softmax"), Some(I)),
        K::Elementwise(Elementwise::Binary { .. }) | K::Elementwise(Elementwise::Unary { .. }) => {
            (f!("ops-elementwise"), Some(F))
        }
        K::Elementwise(Elementwise::BinaryQuantized {
            precision: Precision::I8,
            ..
        })
        | K::Elementwise(Elementwise::RsqrtI8 { .. }) => (f!("ops-elementwise"), Some(I)),
        K::Elementwise(Elementwise::Cast { .. }) => (f!("ops-elementwise"), None),
        K::Pad(Pad::Constant { .. }) | K::Pad(Pad::Mirror { .. }) => (f!("ops-pad"), None),
        K::Shape(Shape::Transpose { .. })
        | K::Shape(Shape::Strided { .. })
        | K::Shape(Shape::BroadcastTo { .. })
        | K::Shape(Shape::Tile { .. })
        | K::Shape(Shape::Split { .. })
        | K::Shape(Shape::Concat { .. })
        | K::Shape(Shape::Gather { .. }) => (f!("ops-shape"), None),
        #[cfg(feature = "ops-shape")]
        K::Shape(Shape::EmbeddingHybrid { .. }) => (f!("ops-shape"), Some(H)),
        K::Quantize(Quantize::DequantizeF16)
        | K::Quantize(Quantize::DequantizeAffine { .. })
        | K::Quantize(Quantize::DequantizePerChannel { .. })
        | K::Quantize(Quantize::FromFloat { .. }) => (f!("ops-quantize"), None),
        K::Reduce(Reduce::F32 { .. }) => (f!("ops-reduce"), Some(F)),
        K::Reduce(Reduce::Mean {
            precision: Precision::I8,
            ..
        })
        | K::Reduce(Reduce::SumI8 { .. })
        | K::Reduce(Reduce::MaxMinI8 { .. }) => (f!("ops-reduce"), Some(I)),
        K::Reduce(Reduce::ArgMinMax { .. })
        | K::Reduce(Reduce::All { .. })
        | K::Reduce(Reduce::I32 { .. }) => (f!("ops-reduce"), None),
        K::Resize(Resize { .. }) => (f!("ops-resize"), None),
        K::Compare(Compare::Relation { .. })
        | K::Compare(Compare::Logical { .. })
        | K::Compare(Compare::LogicalNot)
        | K::Compare(Compare::Select { .. })
        | K::Compare(Compare::TopK { .. }) => (f!("ops-compare"), None),
        #[cfg(feature = "ops-data")]
        K::Data(Data::Shape { .. })
        | K::Data(Data::Fill { .. })
        | K::Data(Data::Zeros)
        | K::Data(Data::BroadcastArgs { .. })
        | K::Data(Data::GatherNd { .. })
        | K::Data(Data::UpdateSlice { .. })
        | K::Data(Data::SpaceBatch { .. }) => (f!("ops-data"), None),
        #[cfg(feature = "ops-accumulate")]
        K::Accumulate(Accumulate::AddN { .. })
        | K::Accumulate(Accumulate::CumSum { .. })
        | K::Accumulate(Accumulate::L2NormF32 { .. })
        | K::Accumulate(Accumulate::L2NormI8 { .. }) => (f!("ops-accumulate"), None),
        #[cfg(feature = "ops-accumulate")]
        K::Accumulate(Accumulate::AddNI8 { .. }) | K::Accumulate(Accumulate::CumSumI8 { .. }) => {
            (f!("ops-accumulate"), Some(I))
        }
        #[cfg(feature = "ops-sequence")]
        K::Sequence(Sequence::Lstm(_)) | K::Sequence(Sequence::SvdfF32 { .. }) => {
            (f!("ops-sequence"), Some(F))
        }
        #[cfg(feature = "ops-sequence")]
        K::Sequence(Sequence::SvdfI8 { .. }) | K::Sequence(Sequence::LstmI8(_)) => {
            (f!("ops-sequence"), Some(I))
        }
        #[cfg(feature = "ops-variables")]
        K::Variables(_) => (f!("ops-variables"), None),
        #[cfg(feature = "ops-fft")]
        K::Fft(Fft::Rfft2d { .. }) | K::Fft(Fft::Abs) | K::Fft(Fft::Part(_)) => {
            (f!("ops-fft"), None)
        }
        // Always compiled in.
        K::Copy | K::Lut8 { .. } | K::Precomputed => return None,
    };
    [Some(family), ty]
        .into_iter()
        .flatten()
        .find(|f| !f.1)
        .map(|f| f.0)
}
