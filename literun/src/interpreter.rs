//! The interpreter: prepares a [`Model`] once (shapes, parameters, arena plan) and runs it.
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

use crate::error::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::kernels::simd::{self, DwF32, DwI8, FastScratch, GemmF32, GemmI8, Isa, WinoF32};
use crate::kernels::{
    batch_matmul, compare as cmp, conv, depthwise_conv, elementwise as ew, fully_connected, pool,
    reduce, resize, shape_ops as so, softmax, transpose_conv, Activation,
};
use crate::model::{DType, Model, OpDesc, TensorDesc, TensorInfo};
use crate::plan::{plan_arena, TensorUse};
use crate::prepare::{
    fold_pad, pad_folds, prepare_op, BatchMatMul, Compare, Conv, Depthwise, Elementwise,
    FullyConnected, Kind, Pad, PadFold, Pool, Quantize, Reduce, Resize, Shape, Softmax,
    TransposeConv,
};

/// The most memory [`Interpreter::new`] allocates for one model: the activation arena, the
/// prepacked constants and the kernels' scratch together. A file can claim large activation
/// shapes without carrying any data, so this, not the file size, bounds what it can make us
/// allocate; beyond it preparing fails with [`Error::InvalidModel`] before allocating anything.
pub const MAX_MEMORY_BYTES: usize = 1 << 31;

/// Adds `bytes` (or an overflow, `None`) to the running total `used`, failing past
/// [`MAX_MEMORY_BYTES`].
fn charge(used: &mut usize, bytes: Option<usize>, what: &str) -> Result<()> {
    match bytes.and_then(|b| used.checked_add(b)) {
        Some(t) if t <= MAX_MEMORY_BYTES => {
            *used = t;
            Ok(())
        }
        _ => Err(Error::InvalidModel(format!(
            "the model needs more than {MAX_MEMORY_BYTES} bytes of memory to run ({what})"
        ))),
    }
}

/// `n` default values, or an error (not an abort) when the allocation fails.
fn try_vec<T: Clone + Default>(n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::InvalidModel(format!(
            "cannot allocate {n} x {} bytes",
            core::mem::size_of::<T>()
        ))
    })?;
    v.resize(n, T::default());
    Ok(v)
}

/// Where a tensor's bytes live while running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    /// Never used by anything, or zero-sized.
    Empty,
    /// Constant data in the model.
    Const,
    /// `len` bytes at `off` in the arena.
    Arena { off: usize, len: usize },
    /// `len` bytes at `off` in the prepacked buffer (constants dequantized in `new`).
    Packed { off: usize, len: usize },
}

/// Run-time scratch of the quantized kernels, sized in [`Interpreter::new`].
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    pub(crate) i8s: Vec<i8>,
    pub(crate) f32s: Vec<f32>,
    pub(crate) i32s: Vec<i32>,
    /// One per thread (the first is the calling thread's; more with `with_threads`).
    pub(crate) fast: Vec<FastScratch>,
}

pub(crate) struct Prepared {
    pub(crate) index: usize,
    pub(crate) kind: Kind,
    /// Weights pre-packed for a SIMD kernel, when the operator has one on this CPU.
    pub(crate) fast: Option<Fast>,
    /// The tensor read as input 0 instead of the operator's: a convolution that does the work
    /// of the PAD before it reads the PAD's input ([`crate::prepare::PadFold`]).
    pub(crate) input0: Option<usize>,
    /// A PAD folded into the convolution reading it: [`Interpreter::invoke`] skips it
    /// ([`Interpreter::invoke_observed`] still runs it, for its output's value).
    pub(crate) folded: bool,
}

/// An operator's pre-packed constant weights for the fast kernels ([`crate::kernels::simd`]).
pub(crate) enum Fast {
    ConvI8(GemmI8),
    FullyConnectedI8(GemmI8),
    DepthwiseI8(DwI8),
    Conv(GemmF32),
    /// Float 3x3 stride-1 CONV_2D by Winograd F(2x2, 3x3).
    ConvWino(WinoF32),
    FullyConnected(GemmF32),
    Depthwise(DwF32),
    /// Int8 ADD/SUB/MUL computed in vectors (no weights: the kernel's parameters).
    ArithI8(simd::ArithI8),
    /// An int8 binary operator as a table of its 65536 input pairs, `t[(x as u8) << 8 | y as
    /// u8]`: SQUARED_DIFFERENCE, whose three rescalings per element (and 64-bit products) have
    /// no vector form here. 64 KiB, so only where the fast kernels run (not on microcontrollers).
    PairTableI8(alloc::boxed::Box<[i8]>),
    /// QUANTIZE float32 -> int8/uint8/int16 with this ISA's vector kernel.
    Quantize(Isa),
    /// A float unary operator at this ISA's vector width.
    Unary(Isa),
    /// TRANSPOSE of 32-bit values from few rows (`simd::transpose_few_rows_32`).
    TransposeFewRows(Isa),
}

impl Fast {
    fn bytes(&self) -> usize {
        match self {
            Fast::ConvI8(g) | Fast::FullyConnectedI8(g) => g.bytes(),
            Fast::DepthwiseI8(d) => d.bytes(),
            Fast::Conv(g) | Fast::FullyConnected(g) => g.bytes(),
            Fast::ConvWino(w) => w.bytes(),
            Fast::Depthwise(d) => d.bytes(),
            Fast::PairTableI8(t) => t.len(),
            Fast::ArithI8(_) | Fast::Quantize(_) | Fast::Unary(_) | Fast::TransposeFewRows(_) => 0,
        }
    }

    /// Whether the kernel reads its weights and bias (inputs 1 and 2) only from its packed copy,
    /// so the model's bytes of them are not read after preparing.
    fn packs_weights(&self) -> bool {
        match self {
            Fast::ConvI8(_)
            | Fast::FullyConnectedI8(_)
            | Fast::DepthwiseI8(_)
            | Fast::Conv(_)
            | Fast::ConvWino(_)
            | Fast::FullyConnected(_)
            | Fast::Depthwise(_) => true,
            Fast::ArithI8(_)
            | Fast::PairTableI8(_)
            | Fast::Quantize(_)
            | Fast::Unary(_)
            | Fast::TransposeFewRows(_) => false,
        }
    }

    /// Scratch for [`FastScratch`]: (i8, i32, f32) values.
    fn scratch(&self) -> (usize, usize, usize) {
        match self {
            Fast::ConvI8(g) | Fast::FullyConnectedI8(g) => (g.k, g.scratch_i32(), 0),
            Fast::Conv(g) | Fast::FullyConnected(g) => (0, 0, g.scratch_f32()),
            Fast::ConvWino(w) => (0, 0, w.scratch_f32()),
            Fast::DepthwiseI8(d) => (0, d.scratch_i32(), 0),
            Fast::Depthwise(_) => (0, 0, 0),
            Fast::ArithI8(_)
            | Fast::PairTableI8(_)
            | Fast::Quantize(_)
            | Fast::Unary(_)
            | Fast::TransposeFewRows(_) => (0, 0, 0),
        }
    }

    /// Packs the weights of `kind` for `isa` when its weights (and bias) are constant (Winograd
    /// only with `options.winograd`).
    fn prepare<'c>(
        isa: Isa,
        options: &Options,
        kind: &Kind,
        op: &OpDesc<'_>,
        constant: &dyn Fn(usize) -> Option<&'c [u8]>,
    ) -> Option<Fast> {
        if isa == Isa::Portable || !simd::FAST_KERNELS {
            return None;
        }
        let input = |k: usize| op.inputs.get(k).copied().flatten();
        let data = |k: usize| input(k).and_then(constant);
        let weights_i8 = || -> Option<&'c [i8]> { Some(bytemuck::cast_slice(data(1)?)) };
        let weights_f32 = || -> Option<&'c [f32]> { bytemuck::try_cast_slice(data(1)?).ok() };
        // The bias: absent, or constant (a bias computed at run time keeps the portable kernel).
        let bias_i32 = || -> Option<Option<&'c [i32]>> {
            match input(2) {
                None => Some(None),
                Some(_) => Some(Some(bytemuck::try_cast_slice(data(2)?).ok()?)),
            }
        };
        let bias_f32 = || -> Option<Option<&'c [f32]>> {
            match input(2) {
                None => Some(None),
                Some(_) => Some(Some(bytemuck::try_cast_slice(data(2)?).ok()?)),
            }
        };
        match kind {
            Kind::Conv(Conv::I8 {
                in_shape,
                filter_shape: [o, kh, kw, i],
                q,
                ..
            }) if *i == in_shape[3] => {
                GemmI8::pack(isa, weights_i8()?, *o, kh * kw * i, bias_i32()?, q).map(Fast::ConvI8)
            }
            Kind::FullyConnected(FullyConnected::I8 {
                in_depth,
                out_depth,
                q,
                ..
            }) => GemmI8::pack(isa, weights_i8()?, *out_depth, *in_depth, bias_i32()?, q)
                .map(Fast::FullyConnectedI8),
            Kind::Depthwise(Depthwise::I8 {
                params,
                filter_shape: [_, kh, kw, c],
                q,
                ..
            }) if params.depth_multiplier == 1 => {
                let dil = [params.dilation_h, params.dilation_w];
                DwI8::pack(isa, weights_i8()?, kh * kw, *c, bias_i32()?, q)
                    .map(|dw| Fast::DepthwiseI8(dw.for_window(*kh, *kw, dil)))
            }
            Kind::Conv(Conv::F32 {
                params,
                in_shape,
                filter_shape: [o, 3, 3, i],
                out_shape,
                ..
            }) if *i == in_shape[3]
                && [
                    params.stride_h,
                    params.stride_w,
                    params.dilation_h,
                    params.dilation_w,
                ] == [1; 4] =>
            {
                let w = weights_f32()?;
                let b = bias_f32()?;
                let tiles = out_shape[1].div_ceil(2) * out_shape[2].div_ceil(2);
                let wino = (options.winograd && tiles >= simd::WINO_MIN_TILES)
                    .then(|| WinoF32::pack(isa, w, *o, *i, b, params.activation))
                    .flatten();
                match wino {
                    Some(wf) => Some(Fast::ConvWino(wf)),
                    None => GemmF32::pack(isa, w, *o, 9 * i, b, params.activation).map(Fast::Conv),
                }
            }
            Kind::Conv(Conv::F32 {
                params,
                in_shape,
                filter_shape: [o, kh, kw, i],
                ..
            }) if *i == in_shape[3] => GemmF32::pack(
                isa,
                weights_f32()?,
                *o,
                kh * kw * i,
                bias_f32()?,
                params.activation,
            )
            .map(Fast::Conv),
            Kind::FullyConnected(FullyConnected::F32 {
                in_depth,
                out_depth,
                act,
                ..
            }) => GemmF32::pack(
                isa,
                weights_f32()?,
                *out_depth,
                *in_depth,
                bias_f32()?,
                *act,
            )
            .map(Fast::FullyConnected),
            Kind::Depthwise(Depthwise::F32 {
                params,
                filter_shape: [_, kh, kw, c],
                ..
            }) if params.depth_multiplier == 1 => DwF32::pack(
                isa,
                weights_f32()?,
                kh * kw,
                *c,
                bias_f32()?,
                params.activation,
            )
            .map(Fast::Depthwise),
            Kind::Elementwise(Elementwise::BinaryI8 {
                p: ew::BinaryI8::AddSubTables(t),
                ..
            }) => simd::ArithI8::new(isa, t).map(Fast::ArithI8),
            Kind::Elementwise(Elementwise::BinaryI8 {
                p: p @ ew::BinaryI8::Mul { .. },
                ..
            }) => simd::ArithI8::mul(isa, p).map(Fast::ArithI8),
            #[cfg(feature = "ops-elementwise")]
            Kind::Elementwise(Elementwise::BinaryI8 {
                p: p @ ew::BinaryI8::SquaredDifference { .. },
                ..
            }) => Some(Fast::PairTableI8(
                (0..=u16::MAX)
                    .map(|i| p.eval((i >> 8) as u8 as i8, i as u8 as i8))
                    .collect(),
            )),
            Kind::Quantize(Quantize::FromFloat { .. }) if simd::has_elementwise(isa) => {
                Some(Fast::Quantize(isa))
            }
            #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
            Kind::Elementwise(Elementwise::Unary { dtype, .. })
                if *dtype != DType::I32 && simd::has_elementwise(isa) =>
            {
                Some(Fast::Unary(isa))
            }
            #[cfg(feature = "ops-shape")]
            Kind::Shape(Shape::Transpose {
                in_shape,
                perm,
                size,
            }) if simd::has_transpose_few_rows_32(isa, in_shape, perm, *size) => {
                Some(Fast::TransposeFewRows(isa))
            }
            _ => None,
        }
    }
}

/// Which constants the kernels read at run time, and which only while preparing (copied into
/// the interpreter's own layout): for [`Interpreter::with_options_releasing`], and to keep a
/// dequantized constant only when something reads it as it is.
struct ConstCopies<'m> {
    model: &'m Model<'m>,
    /// Per tensor: readers that have not been prepared yet.
    pending: Vec<usize>,
    /// Per tensor: some reader reads it at run time.
    read: Vec<bool>,
}

impl<'m> ConstCopies<'m> {
    fn new(model: &'m Model<'m>) -> Self {
        let tensors = model.tensors();
        let mut pending = vec![0usize; tensors.len()];
        for op in model.operators() {
            for &t in op.inputs.iter().flatten() {
                pending[t] += 1;
            }
        }
        ConstCopies {
            model,
            pending,
            read: vec![false; tensors.len()],
        }
    }

    /// Operator `op` has copied its inputs at positions `copied` and reads its other inputs at
    /// run time (called once per operator). Calls `finished(t)` for each tensor no reader needs
    /// any more: all have copied it. A constant of the file then goes to `done`.
    fn copied(
        &mut self,
        op: usize,
        copied: &[usize],
        done: &mut Option<&mut dyn FnMut(&'m [u8])>,
        finished: &mut dyn FnMut(usize),
    ) {
        let tensors = self.model.tensors();
        for (k, t) in self.model.operators()[op].inputs.iter().enumerate() {
            let Some(t) = *t else { continue };
            if !copied.contains(&k) {
                self.read[t] = true;
                continue;
            }
            self.pending[t] -= 1;
            if self.pending[t] == 0 && !self.read[t] {
                if let (Some(data), Some(done)) = (tensors[t].data, done.as_mut()) {
                    done(data);
                }
                finished(t);
            }
        }
    }
}

/// How an [`Interpreter`] is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Instruction set of the fast kernels (`Isa::Portable`: the reference kernels only).
    /// Defaults to [`Isa::detect`], or to the `LITERUN_ISA` environment variable (`portable`,
    /// `avx2`, `avx-vnni`, `avx512-vnni`, `neon`, `neon-dot`) when set and available.
    pub isa: Isa,
    /// Float 3x3 stride-1 convolutions through Winograd F(2x2, 3x3) where it pays (AVX-512,
    /// 16+ channels in and out, outputs of at least [`WINO_MIN_TILES`](crate::kernels::simd::WINO_MIN_TILES)
    /// 2x2 tiles): 1.6-1.9x faster. Its prepacked weights are the size of the file's (the
    /// transformed ones are built per call); its scratch holds one row of them, `4 * cin * cout`
    /// floats. `false`: the direct convolution only. Default `true`.
    pub winograd: bool,
}

impl Default for Options {
    fn default() -> Self {
        #[cfg(feature = "std")]
        if let Ok(name) = std::env::var("LITERUN_ISA") {
            for isa in [
                Isa::Portable,
                Isa::Avx2,
                Isa::AvxVnni,
                Isa::Avx512Vnni,
                Isa::Neon,
                Isa::NeonDot,
            ] {
                if isa.name() == name && isa.available() {
                    return Options {
                        isa,
                        winograd: true,
                    };
                }
            }
        }
        Options {
            isa: Isa::detect(),
            winograd: true,
        }
    }
}

impl Options {
    /// The defaults with the fast kernels of `isa` (e.g. `Isa::Portable` for the reference
    /// kernels alone).
    pub fn with_isa(isa: Isa) -> Options {
        Options {
            isa,
            ..Options::default()
        }
    }
}

/// The activation arena: owned, or lent by the application.
enum Arena<'m> {
    Owned(Vec<u128>),
    Borrowed(&'m mut [u8]),
}

impl Arena<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Arena::Owned(v) => bytemuck::cast_slice(v),
            Arena::Borrowed(b) => b,
        }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Arena::Owned(v) => bytemuck::cast_slice_mut(v),
            Arena::Borrowed(b) => b,
        }
    }
}

/// Runs a model. Create with [`Interpreter::new`], fill inputs, [`invoke`](Interpreter::invoke),
/// read outputs.
pub struct Interpreter<'m> {
    model: &'m Model<'m>,
    arena: Arena<'m>,
    arena_bytes: usize,
    locs: Vec<Loc>,
    ops: Vec<Prepared>,
    packed: Vec<u128>,
    packed_bytes: usize,
    scratch: Scratch,
    isa: Isa,
}

/// A read-only view of a tensor.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a> {
    name: &'a str,
    shape: &'a [usize],
    dtype: DType,
    data: &'a [u8],
}

/// A writable view of a model input.
#[derive(Debug)]
pub struct TensorMut<'a> {
    name: &'a str,
    shape: &'a [usize],
    dtype: DType,
    data: &'a mut [u8],
}

fn typed<T: bytemuck::Pod>(data: &[u8], dtype: DType, want: DType) -> Result<&[T]> {
    if dtype != want {
        return Err(Error::Tensor(format!(
            "tensor is {}, not {}",
            dtype.name(),
            want.name()
        )));
    }
    bytemuck::try_cast_slice(data).map_err(|_| Error::Misaligned)
}

fn typed_mut<T: bytemuck::Pod>(data: &mut [u8], dtype: DType, want: DType) -> Result<&mut [T]> {
    if dtype != want {
        return Err(Error::Tensor(format!(
            "tensor is {}, not {}",
            dtype.name(),
            want.name()
        )));
    }
    bytemuck::try_cast_slice_mut(data).map_err(|_| Error::Misaligned)
}

macro_rules! accessors {
    ($($name:ident, $name_mut:ident: $t:ty = $dt:expr;)*) => {
        impl<'a> TensorRef<'a> {$(
            #[doc = concat!("The data as `", stringify!($t), "` (error if the type differs).")]
            pub fn $name(&self) -> Result<&'a [$t]> { typed(self.data, self.dtype, $dt) }
        )*}
        impl<'a> TensorMut<'a> {$(
            #[doc = concat!("The data as `", stringify!($t), "` (error if the type differs).")]
            pub fn $name(&self) -> Result<&[$t]> { typed(self.data, self.dtype, $dt) }
            #[doc = concat!("The data as mutable `", stringify!($t), "`.")]
            pub fn $name_mut(&mut self) -> Result<&mut [$t]> { typed_mut(self.data, self.dtype, $dt) }
        )*}
    };
}

accessors! {
    as_f32, as_f32_mut: f32 = DType::F32;
    as_i32, as_i32_mut: i32 = DType::I32;
    as_i64, as_i64_mut: i64 = DType::I64;
    as_u8, as_u8_mut: u8 = DType::U8;
    as_i8, as_i8_mut: i8 = DType::I8;
    as_bool, as_bool_mut: u8 = DType::Bool;
}

impl<'a> TensorRef<'a> {
    /// Name (signature name for model inputs/outputs when present).
    pub fn name(&self) -> &'a str {
        self.name
    }
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Raw little-endian bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }
}

impl TensorMut<'_> {
    pub fn name(&self) -> &str {
        self.name
    }
    pub fn shape(&self) -> &[usize] {
        self.shape
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Raw little-endian bytes.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.data
    }
    /// Copies `values` in (error if the type or length differs).
    pub fn copy_from_f32(&mut self, values: &[f32]) -> Result<()> {
        let d = self.as_f32_mut()?;
        if d.len() != values.len() {
            return Err(Error::Tensor(format!(
                "expected {} values, got {}",
                d.len(),
                values.len()
            )));
        }
        d.copy_from_slice(values);
        Ok(())
    }
}

impl<'m> Interpreter<'m> {
    /// Prepares `model`: checks every operator's shapes and parameters, plans and allocates the
    /// arena. No allocation happens in [`invoke`](Self::invoke) for float models.
    pub fn new(model: &'m Model<'m>) -> Result<Interpreter<'m>> {
        Self::build(model, Options::default(), None, None)
    }

    /// [`new`](Self::new) with explicit [`Options`].
    pub fn with_options(model: &'m Model<'m>, options: Options) -> Result<Interpreter<'m>> {
        Self::build(model, options, None, None)
    }

    /// Runs in an arena the application owns (e.g. a `static` buffer in firmware): it must hold
    /// [`Model::arena_bytes`] bytes from its first 16-byte aligned byte (so up to 15 more for
    /// an unaligned buffer; the error says how many). [`invoke`](Self::invoke) then allocates
    /// nothing.
    pub fn with_arena(model: &'m Model<'m>, arena: &'m mut [u8]) -> Result<Interpreter<'m>> {
        Self::build(model, Options::default(), Some(arena), None)
    }

    /// [`with_arena`](Self::with_arena) with explicit [`Options`].
    pub fn with_arena_and_options(
        model: &'m Model<'m>,
        arena: &'m mut [u8],
        options: Options,
    ) -> Result<Interpreter<'m>> {
        Self::build(model, options, Some(arena), None)
    }

    /// [`with_options`](Self::with_options), calling `done(bytes)` with each constant buffer of
    /// the model as soon as the interpreter has copied it into its own layout (weights prepacked
    /// for a SIMD kernel, constants dequantized) and will not read it again.
    ///
    /// For apps that memory-map the model file: dropping the whole pages inside `bytes`
    /// (`madvise(MADV_DONTNEED)` on a file-backed mapping) means the weights are not held twice,
    /// and since it happens buffer by buffer while preparing, never were at once. Anything that
    /// still reads those bytes (e.g. [`tensor`](Self::tensor)) gets them back from the file.
    /// Never drop pages of memory that is not backed by the file: they would read as zeros.
    pub fn with_options_releasing(
        model: &'m Model<'m>,
        options: Options,
        done: &mut dyn FnMut(&'m [u8]),
    ) -> Result<Interpreter<'m>> {
        Self::build(model, options, None, Some(done))
    }

    fn build(
        model: &'m Model<'m>,
        options: Options,
        arena: Option<&'m mut [u8]>,
        mut done: Option<&mut dyn FnMut(&'m [u8])>,
    ) -> Result<Interpreter<'m>> {
        let isa = if options.isa.available() {
            options.isa
        } else {
            Isa::Portable
        };
        let tensors = model.tensors();
        let nops = model.operators().len();
        let mut ops = Vec::with_capacity(nops);
        types_compiled_in(model)?;
        for (i, op) in model.operators().iter().enumerate() {
            ops.push(Prepared {
                index: i,
                kind: prepare_op(model, i, op)?,
                fast: None,
                input0: None,
                folded: false,
            });
        }
        compiled_in(model, &ops)?;
        let plan = model.memory_plan()?;
        fold_pads(model, &mut ops, &plan)?;

        // Everything allocated below is charged to `memory` first. Constant DEQUANTIZE outputs
        // are at most 4x their data in the file; the arena and scratch follow claimed shapes.
        let mut memory = 0usize;

        // Constant buffers the interpreter copies into its own layout, counted so `done` hears
        // of each once its last reader has copied it.
        let mut copies = ConstCopies::new(model);

        // In operator order (a constant is dequantized before its readers pack it, and dropped
        // once they have): DEQUANTIZE of constant data, done once here into the prepacked
        // buffer; weights pre-packed for the fast kernels (constants of the file, or dequantized).
        let mut packed_parts: Vec<(usize, Vec<f32>)> = Vec::new();
        for p in ops.iter_mut() {
            let op = &model.operators()[p.index];
            let const_input = op.inputs.first().copied().flatten().and_then(|src| {
                let data = tensors[src].data?;
                Some((tensors[src].elements, data))
            });
            if let (
                Some((n, data)),
                Kind::Quantize(Quantize::DequantizeF16)
                | Kind::Quantize(Quantize::DequantizeAffine { .. })
                | Kind::Quantize(Quantize::DequantizePerChannel { .. }),
            ) = (const_input, &p.kind)
            {
                charge(&mut memory, n.checked_mul(4), "prepacked constants")?;
                let mut out = try_vec::<f32>(n)?;
                dequantize(&p.kind, data, &mut out).map_err(|e| op_err(p.index, op, e))?;
                packed_parts.push((op.outputs[0], out));
                p.kind = Kind::Precomputed;
                copies.copied(p.index, &[0], &mut done, &mut |_| {});
                continue;
            }
            {
                let constant = |t: usize| -> Option<&[u8]> {
                    if let Some(d) = tensors.get(t)?.data {
                        return Some(d);
                    }
                    packed_parts
                        .iter()
                        .find(|(pt, _)| *pt == t)
                        .map(|(_, v)| bytemuck::cast_slice(v))
                };
                p.fast = Fast::prepare(isa, &options, &p.kind, op, &constant);
                if p.fast.is_some() {
                    p.kind.drop_portable_requant();
                }
            }
            let packed_inputs: &[usize] = match &p.fast {
                Some(f) if f.packs_weights() => &[1, 2],
                _ => &[],
            };
            // A dequantized constant that only fed prepacked weights is not kept twice (float16
            // weights of a SIMD convolution would be held dequantized and packed).
            copies.copied(p.index, packed_inputs, &mut done, &mut |t| {
                if !model.outputs().iter().any(|o| o.tensor == t) {
                    packed_parts.retain(|(pt, _)| *pt != t);
                }
            });
        }
        let mut packed_locs = Vec::new();
        let mut packed_bytes = 0usize;
        for (t, v) in &packed_parts {
            let len = v.len() * 4;
            packed_locs.push((*t, packed_bytes, len));
            packed_bytes += len.div_ceil(16) * 16;
        }
        charge(&mut memory, Some(packed_bytes), "prepacked constants")?;
        let mut packed = try_vec::<u128>(packed_bytes / 16)?;
        {
            let pb = bytemuck::cast_slice_mut::<u128, u8>(&mut packed);
            for ((_, v), &(_, off, len)) in packed_parts.iter().zip(&packed_locs) {
                pb[off..off + len].copy_from_slice(bytemuck::cast_slice(v));
            }
        }
        drop(packed_parts);
        let fast_bytes: usize = ops
            .iter()
            .filter_map(|p| p.fast.as_ref())
            .map(Fast::bytes)
            .sum();

        // Scratch for the quantized kernels.
        let mut scratch = Scratch::default();
        let (mut n8, mut nf, mut n32) = (0, 0, 0);
        let (mut f8, mut f32n, mut ff) = (0, 0, 0);
        for p in &ops {
            let (a, b, c) = p.kind.scratch();
            n8 = n8.max(a);
            nf = nf.max(b);
            n32 = n32.max(c);
            if let Some(f) = &p.fast {
                let (a, b, c) = f.scratch();
                f8 = f8.max(a);
                f32n = f32n.max(b);
                ff = ff.max(c);
            }
        }
        let scratch_bytes = nf
            .checked_mul(4)
            .and_then(|b| b.checked_add(n32.checked_mul(4)?))
            .and_then(|b| b.checked_add(n8))
            .and_then(|b| b.checked_add(f8))
            .and_then(|b| b.checked_add(f32n.checked_mul(4)?))
            .and_then(|b| b.checked_add(ff.checked_mul(4)?));
        charge(&mut memory, scratch_bytes, "kernel scratch")?;
        scratch.i8s = try_vec(n8)?;
        scratch.f32s = try_vec(nf)?;
        scratch.i32s = try_vec(n32)?;
        scratch.fast = vec![FastScratch {
            i8s: try_vec(f8)?,
            i32s: try_vec(f32n)?,
            f32s: try_vec(ff)?,
        }];

        let nt = tensors.len();
        let mut locs = vec![Loc::Empty; nt];
        for &(t, off, len) in &packed_locs {
            locs[t] = Loc::Packed { off, len };
        }
        for t in 0..nt {
            if tensors[t].data.is_some() {
                locs[t] = Loc::Const;
            } else if let Some(off) = plan.offsets[t] {
                locs[t] = Loc::Arena {
                    off,
                    len: tensors[t].bytes,
                };
            } else if !matches!(locs[t], Loc::Packed { .. }) && tensors[t].bytes > 0 {
                // Used tensors are planned; anything else must be unused, the output of a
                // folded PAD, or a dequantized constant only prepacked kernels read.
                debug_assert!(
                    ops.iter().any(|p| {
                        let outputs = &model.operators()[p.index].outputs;
                        (p.folded || matches!(p.kind, Kind::Precomputed)) && outputs.contains(&t)
                    }) || !model
                        .operators()
                        .iter()
                        .any(|op| op.outputs.contains(&t) || op.inputs.contains(&Some(t)))
                );
            }
        }
        let arena = match arena {
            Some(buf) => {
                // Any buffer works: the arena starts at its first 16-byte aligned byte, so an
                // unaligned one needs up to 15 bytes more than the plan.
                let skip = buf.as_ptr().align_offset(crate::plan::ARENA_ALIGN);
                let given = buf.len();
                match buf.get_mut(skip..skip.saturating_add(plan.total)) {
                    Some(aligned) => Arena::Borrowed(aligned),
                    None => {
                        return Err(Error::InvalidModel(format!(
                            "the arena given has {given} bytes; the model needs {} ({} with \
                             this buffer's alignment)",
                            plan.total,
                            plan.total + skip
                        )))
                    }
                }
            }
            None => {
                charge(&mut memory, Some(plan.total), "activation arena")?;
                Arena::Owned(try_vec(plan.total / 16)?)
            }
        };
        let interp = Interpreter {
            model,
            arena,
            arena_bytes: plan.total,
            locs,
            ops,
            packed,
            packed_bytes: packed_bytes + fast_bytes,
            scratch,
            isa,
        };
        // Every operator's outputs must be disjoint from its inputs (the planner guarantees it;
        // checked so invoke can rely on it).
        for (i, op) in model.operators().iter().enumerate() {
            for &o in &op.outputs {
                if let Loc::Arena { off, len } = interp.locs[o] {
                    for &t in op.inputs.iter().flatten() {
                        if let Loc::Arena { off: a, len: l } = interp.locs[t] {
                            if a < off + len && off < a + l {
                                return Err(op_err(i, op, "output overlaps an input in the arena"));
                            }
                        }
                    }
                }
            }
        }
        Ok(interp)
    }

    /// The model being run.
    pub fn model(&self) -> &'m Model<'m> {
        self.model
    }

    /// Runs the convolution, dense and depthwise kernels on `n` threads (feature `threads`):
    /// each such operator big enough to gain splits its output rows over scoped std threads,
    /// so results are identical to one thread. Allocates `n - 1` more kernel scratch buffers;
    /// `invoke` then starts threads (an app arena's no-allocation guarantee is for one thread).
    #[cfg(feature = "threads")]
    pub fn with_threads(mut self, n: usize) -> Result<Self> {
        let first = self
            .scratch
            .fast
            .first()
            .map_or((0, 0, 0), |s| (s.i8s.len(), s.i32s.len(), s.f32s.len()));
        self.scratch.fast.truncate(1);
        for _ in 1..n.max(1) {
            self.scratch.fast.push(FastScratch {
                i8s: try_vec(first.0)?,
                i32s: try_vec(first.1)?,
                f32s: try_vec(first.2)?,
            });
        }
        Ok(self)
    }

    /// Threads the kernels may use (1 unless [`Interpreter::with_threads`]).
    pub fn threads(&self) -> usize {
        self.scratch.fast.len().max(1)
    }

    /// Size of the activation arena in bytes.
    pub fn arena_bytes(&self) -> usize {
        self.arena_bytes
    }

    /// Bytes of constant data prepared once in [`new`](Self::new), kept for the interpreter's
    /// lifetime: weights re-laid out for the SIMD kernels (with their per-channel parameters),
    /// and constant DEQUANTIZE outputs (fp16 or int8 weights feeding float operators) that a
    /// kernel reads as they are (not those only a SIMD kernel's packing read).
    pub fn prepacked_bytes(&self) -> usize {
        self.packed_bytes
    }

    /// The instruction set the fast kernels use.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Model inputs.
    pub fn inputs(&self) -> &'m [TensorInfo<'m>] {
        self.model.inputs()
    }

    /// Model outputs.
    pub fn outputs(&self) -> &'m [TensorInfo<'m>] {
        self.model.outputs()
    }

    fn tensor_bytes(&self, t: usize) -> &[u8] {
        match self.locs[t] {
            Loc::Empty => &[],
            Loc::Const => self.model.tensors()[t].data.unwrap_or(&[]),
            Loc::Arena { off, len } => &self.arena.bytes()[off..off + len],
            Loc::Packed { off, len } => {
                &bytemuck::cast_slice::<u128, u8>(&self.packed)[off..off + len]
            }
        }
    }

    /// Input `i` for writing. Write every input before each [`Interpreter::invoke`]: the memory
    /// plan lets later tensors reuse an input's bytes once its last reader has run, so after an
    /// invoke the inputs no longer hold what was written.
    pub fn input_mut(&mut self, i: usize) -> Result<TensorMut<'_>> {
        let info = self.model.inputs().get(i).ok_or_else(|| {
            Error::Tensor(format!(
                "no input {i} (model has {})",
                self.model.inputs().len()
            ))
        })?;
        let data: &mut [u8] = match self.locs[info.tensor] {
            Loc::Arena { off, len } => &mut self.arena.bytes_mut()[off..off + len],
            _ => &mut [],
        };
        Ok(TensorMut {
            name: info.name,
            shape: &info.shape,
            dtype: info.dtype,
            data,
        })
    }

    /// Input `i` as `f32` for writing.
    pub fn input_f32_mut(&mut self, i: usize) -> Result<&mut [f32]> {
        let info = self
            .model
            .inputs()
            .get(i)
            .ok_or_else(|| Error::Tensor(format!("no input {i}")))?;
        let dtype = info.dtype;
        let data: &mut [u8] = match self.locs[info.tensor] {
            Loc::Arena { off, len } => &mut self.arena.bytes_mut()[off..off + len],
            _ => &mut [],
        };
        typed_mut(data, dtype, DType::F32)
    }

    /// The input named `name`.
    pub fn input_by_name(&mut self, name: &str) -> Result<TensorMut<'_>> {
        let i = self
            .model
            .inputs()
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| Error::Tensor(format!("no input named {name:?}")))?;
        self.input_mut(i)
    }

    /// Output `i` (valid after [`invoke`](Self::invoke)).
    pub fn output(&self, i: usize) -> Result<TensorRef<'_>> {
        let info = self.model.outputs().get(i).ok_or_else(|| {
            Error::Tensor(format!(
                "no output {i} (model has {})",
                self.model.outputs().len()
            ))
        })?;
        Ok(TensorRef {
            name: info.name,
            shape: &info.shape,
            dtype: info.dtype,
            data: self.tensor_bytes(info.tensor),
        })
    }

    /// The output named `name`.
    pub fn output_by_name(&self, name: &str) -> Result<TensorRef<'_>> {
        let i = self
            .model
            .outputs()
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| Error::Tensor(format!("no output named {name:?}")))?;
        self.output(i)
    }

    /// Any tensor of subgraph 0 by index (intermediate values may have been overwritten; a
    /// constant dequantized only for kernels that prepacked it is not kept and reads as empty).
    pub fn tensor(&self, t: usize) -> Result<TensorRef<'_>> {
        let d = self
            .model
            .tensors()
            .get(t)
            .ok_or_else(|| Error::Tensor(format!("no tensor {t}")))?;
        Ok(TensorRef {
            name: d.name,
            shape: &d.shape,
            dtype: d.dtype,
            data: self.tensor_bytes(t),
        })
    }

    /// Runs all operators.
    pub fn invoke(&mut self) -> Result<()> {
        let arena = self.arena.bytes_mut();
        let packed = bytemuck::cast_slice::<u128, u8>(&self.packed);
        let tensors = self.model.tensors();
        let ops = self.model.operators();
        for p in self.ops.iter().filter(|p| !p.folded) {
            let op = &ops[p.index];
            run_op(p, op, tensors, &self.locs, arena, packed, &mut self.scratch)?;
        }
        Ok(())
    }

    /// Runs the operators like [`invoke`](Self::invoke), calling `f(op_index)` after each
    /// operator that runs (a PAD folded into the convolution after it does not run and is not
    /// reported). For timing operators.
    pub fn invoke_timed(&mut self, f: &mut dyn FnMut(usize)) -> Result<()> {
        let arena = self.arena.bytes_mut();
        let packed = bytemuck::cast_slice::<u128, u8>(&self.packed);
        let tensors = self.model.tensors();
        let ops = self.model.operators();
        for p in self.ops.iter().filter(|p| !p.folded) {
            let op = &ops[p.index];
            run_op(p, op, tensors, &self.locs, arena, packed, &mut self.scratch)?;
            f(p.index);
        }
        Ok(())
    }

    /// How many PAD operators are folded into the convolution reading them (not run by
    /// [`invoke`](Self::invoke)).
    pub fn folded_pads(&self) -> usize {
        self.ops.iter().filter(|p| p.folded).count()
    }

    /// Runs all operators like [`invoke`](Self::invoke), calling `f(op_index, tensor_index,
    /// value)` after each operator for each of its outputs (in the operator's output order).
    /// PADs folded into their convolution run here too, so every output is observed, except a
    /// constant DEQUANTIZE output that only prepacked kernels read (it is not kept).
    /// Used to calibrate activation ranges and to compare layers; the values are only valid
    /// during the call (the arena reuses memory).
    pub fn invoke_observed(
        &mut self,
        f: &mut dyn FnMut(usize, usize, TensorRef<'_>),
    ) -> Result<()> {
        let tensors = self.model.tensors();
        let ops = self.model.operators();
        for k in 0..self.ops.len() {
            let p = &self.ops[k];
            let op = &ops[p.index];
            if p.folded {
                // The PAD's output has no memory of its own: pad into a temporary to show it.
                let (Some(&o), Some(d)) = (
                    op.outputs.first(),
                    op.outputs.first().and_then(|&o| tensors.get(o)),
                ) else {
                    continue;
                };
                let mut buf = try_vec::<u128>(d.bytes.div_ceil(16))?;
                let out = &mut bytemuck::cast_slice_mut::<u128, u8>(&mut buf)[..d.bytes];
                let arena = self.arena.bytes();
                let ins = Ins {
                    lo: arena,
                    hi: &[],
                    hi_start: arena.len(),
                    packed: bytemuck::cast_slice::<u128, u8>(&self.packed),
                    locs: &self.locs,
                    tensors,
                    ids: &op.inputs,
                    in0: None,
                };
                run_one(p, op, ins, out, &mut self.scratch)?;
                f(
                    p.index,
                    o,
                    TensorRef {
                        name: d.name,
                        shape: &d.shape,
                        dtype: d.dtype,
                        data: out,
                    },
                );
                continue;
            }
            {
                let arena = self.arena.bytes_mut();
                let packed = bytemuck::cast_slice::<u128, u8>(&self.packed);
                run_op(p, op, tensors, &self.locs, arena, packed, &mut self.scratch)?;
            }
            for &o in &op.outputs {
                let d = &tensors[o];
                if self.locs[o] == Loc::Empty && d.bytes > 0 {
                    // A constant dequantized only for prepacked weights: not kept.
                    continue;
                }
                f(
                    p.index,
                    o,
                    TensorRef {
                        name: d.name,
                        shape: &d.shape,
                        dtype: d.dtype,
                        data: self.tensor_bytes(o),
                    },
                );
            }
        }
        Ok(())
    }
}

/// Per tensor: its lifetime if it needs arena memory (non-constant, used, non-empty, and not a
/// DEQUANTIZE of a constant, which is computed once at load time). The input of each PAD in
/// `folds` stays alive until the convolution that reads it in the PAD's place, and the PAD's
/// output needs no memory.
fn arena_uses(model: &Model<'_>, folds: &[PadFold]) -> Vec<Option<TensorUse>> {
    let tensors = model.tensors();
    let nops = model.operators().len();
    let nt = tensors.len();
    let mut first = vec![usize::MAX; nt];
    let mut last = vec![0usize; nt];
    let mut used = vec![false; nt];
    let mut precomputed = vec![false; nt];
    for info in model.inputs() {
        first[info.tensor] = 0;
        used[info.tensor] = true;
    }
    for (i, op) in model.operators().iter().enumerate() {
        for &o in &op.outputs {
            first[o] = first[o].min(i);
            last[o] = last[o].max(i);
            used[o] = true;
        }
        for &t in op.inputs.iter().flatten() {
            last[t] = last[t].max(i);
            used[t] = true;
        }
        let const_input = matches!(op.inputs.first(), Some(Some(t)) if tensors[*t].data.is_some());
        if op.code == crate::schema::BuiltinOperator::DEQUANTIZE && const_input {
            for &o in &op.outputs {
                precomputed[o] = true;
            }
        }
    }
    for info in model.outputs() {
        last[info.tensor] = nops;
        used[info.tensor] = true;
        first[info.tensor] = first[info.tensor].min(nops);
    }
    for f in folds {
        if let Some(l) = last.get_mut(f.input) {
            *l = (*l).max(f.conv);
        }
        if let Some(u) = used.get_mut(f.output) {
            *u = false;
        }
    }
    (0..nt)
        .map(|t| {
            (tensors[t].data.is_none() && !precomputed[t] && used[t] && tensors[t].bytes > 0).then(
                || TensorUse {
                    bytes: tensors[t].bytes,
                    first: first[t].min(last[t]),
                    last: last[t],
                },
            )
        })
        .collect()
}

/// The tensors of `uses` that need memory, and their uses.
fn planned_uses(uses: &[Option<TensorUse>]) -> (Vec<usize>, Vec<TensorUse>) {
    let planned: Vec<usize> = (0..uses.len()).filter(|&t| uses[t].is_some()).collect();
    let list = planned.iter().filter_map(|&t| uses[t]).collect();
    (planned, list)
}

impl Model<'_> {
    /// The stored `OfflineMemoryAllocation` offsets (TFLite Micro's layout), if the file has
    /// them; `Err` if they are malformed. Always `None` without the `offline-plan` feature.
    pub fn stored_plan(&self) -> Result<Option<Vec<i32>>> {
        // Without the `offline-plan` feature stored plans are ignored (literun plans its own).
        if !cfg!(feature = "offline-plan") {
            return Ok(None);
        }
        let root = self.root();
        let Some(md) = root.metadata() else {
            return Ok(None);
        };
        for m in md.iter() {
            if m.name() != Some(crate::plan::OFFLINE_PLAN_METADATA) {
                continue;
            }
            let bad = |why: String| Error::InvalidModel(format!("stored memory plan: {why}"));
            let data = root
                .buffers()
                .and_then(|b| {
                    let i = m.buffer() as usize;
                    (i < b.len()).then(|| b.get(i))
                })
                .and_then(|b| b.data())
                .ok_or_else(|| bad("its buffer is missing or empty".into()))?;
            return crate::plan::parse_offline_metadata(data.bytes(), self.tensors().len())
                .map(Some)
                .map_err(bad);
        }
        Ok(None)
    }

    /// Where every tensor lives in the arena: the file's stored plan (verified: every tensor
    /// that needs memory has an aligned offset and no two live tensors overlap, else `Err`),
    /// or one planned now (greedy by size over lifetimes).
    pub fn memory_plan(&self) -> Result<crate::plan::MemoryPlan> {
        // PADs a convolution can do itself ([`pad_folds`]): a plan made here keeps the input
        // of each alive until its convolution and gives the PAD's output no memory. A stored
        // plan without memory for such an output was made that way (by literun, stored by
        // litecvt) and is checked against those lifetimes; any other against the plain ones (a
        // file planned for runtimes that run the PAD; `fold_pads` then folds only where the
        // plan keeps the input intact).
        let folds = pad_folds(self);
        let Some(stored) = self.stored_plan()? else {
            let uses = arena_uses(self, &folds);
            let (planned, list) = planned_uses(&uses);
            let plan = plan_arena(&list)
                .ok_or_else(|| Error::InvalidModel("arena size overflows".into()))?;
            let mut offsets = vec![None; uses.len()];
            for (&t, &o) in planned.iter().zip(&plan.offsets) {
                offsets[t] = Some(o);
            }
            return Ok(crate::plan::MemoryPlan {
                offsets,
                total: plan.total,
                stored: false,
            });
        };
        let for_folds = folds
            .iter()
            .any(|f| stored.get(f.output).is_some_and(|&o| o < 0));
        let uses = arena_uses(self, if for_folds { &folds } else { &[] });
        self.check_stored_plan(&stored, &uses)
    }

    /// A stored plan (`stored`: an offset per tensor, negative for none) checked against the
    /// lifetimes `uses`: every tensor that needs memory has an aligned offset, and no two live
    /// tensors overlap.
    fn check_stored_plan(
        &self,
        stored: &[i32],
        uses: &[Option<TensorUse>],
    ) -> Result<crate::plan::MemoryPlan> {
        let (planned, list) = planned_uses(uses);
        let name = |t: usize| self.tensors()[t].name;
        let mut offs = Vec::with_capacity(planned.len());
        for &t in &planned {
            let o = stored
                .get(t)
                .and_then(|&o| usize::try_from(o).ok())
                .ok_or_else(|| {
                    Error::InvalidModel(format!(
                        "stored memory plan: tensor {t} ('{}') needs memory but has no offset",
                        name(t)
                    ))
                })?;
            offs.push(o);
        }
        let total = crate::plan::verify_offsets(&list, &offs).map_err(|(a, b)| {
            Error::InvalidModel(match b {
                None => format!(
                    "stored memory plan: tensor {} ('{}') has a misaligned or too large \
                     offset {}",
                    planned[a],
                    name(planned[a]),
                    offs[a]
                ),
                Some(b) => format!(
                    "stored memory plan: tensors {} ('{}') and {} ('{}') are alive at the \
                     same time and overlap",
                    planned[a],
                    name(planned[a]),
                    planned[b],
                    name(planned[b])
                ),
            })
        })?;
        let mut offsets = vec![None; uses.len()];
        for (&t, &o) in planned.iter().zip(&offs) {
            offsets[t] = Some(o);
        }
        Ok(crate::plan::MemoryPlan {
            offsets,
            total,
            stored: true,
        })
    }

    /// Bytes of activation arena an [`Interpreter`] of this model needs (from the stored plan
    /// when the file has one), known before any interpreter exists.
    pub fn arena_bytes(&self) -> Result<usize> {
        Ok(self.memory_plan()?.total)
    }
}

/// Folds each PAD of [`pad_folds`] into the convolution after it ([`fold_pad`]): the
/// convolution reads the PAD's input (`input0`) and the PAD is marked `folded`. A plan without
/// memory for the PAD's output was made for that (literun's own, or stored by litecvt): the fold
/// must happen. A stored plan that gives the output memory was made for running the PAD
/// (elsewhere, maybe letting the PAD's input share bytes with later tensors): the PAD is folded
/// only when no tensor alive after the PAD, up to the convolution, shares the input's bytes.
fn fold_pads(
    model: &Model<'_>,
    ops: &mut [Prepared],
    plan: &crate::plan::MemoryPlan,
) -> Result<()> {
    let folds = pad_folds(model);
    if folds.is_empty() {
        return Ok(());
    }
    let tensors = model.tensors();
    let plain = if plan.stored {
        arena_uses(model, &[])
    } else {
        Vec::new()
    };
    for f in &folds {
        let needed = tensors.get(f.output).is_some_and(|t| t.bytes > 0)
            && plan.offsets.get(f.output).is_some_and(|o| o.is_none());
        if !(needed || plan.stored && stored_plan_keeps(&plain, &plan.offsets, f)) {
            continue;
        }
        let value = match model.operators()[f.pad].inputs.get(2).copied().flatten() {
            None => None,
            Some(t) => tensors.get(t).and_then(|t| t.data),
        };
        let (before, rest) = ops.split_at_mut(f.conv.min(ops.len()));
        let mut folded = false;
        if let (Some(pad), Some(conv)) = (before.get_mut(f.pad), rest.first_mut()) {
            if pad.index == f.pad
                && conv.index == f.conv
                && !pad.folded
                && conv.input0.is_none()
                && fold_pad(&pad.kind, value, &mut conv.kind)
            {
                conv.input0 = Some(f.input);
                pad.folded = true;
                folded = true;
            }
        }
        if needed && !folded {
            let op = &model.operators()[f.pad];
            return Err(op_err(
                f.pad,
                op,
                "the memory plan has no memory for this PAD's output, but it cannot be folded \
                 into the convolution after it",
            ));
        }
    }
    Ok(())
}

/// Whether a stored plan keeps the PAD input of `f` intact until its convolution: no tensor
/// alive after the PAD, up to the convolution, shares its bytes.
fn stored_plan_keeps(uses: &[Option<TensorUse>], offsets: &[Option<usize>], f: &PadFold) -> bool {
    let Some(Some(x)) = uses.get(f.input) else {
        // Not in the arena (a constant): nothing else writes it.
        return true;
    };
    let Some(Some(xo)) = offsets.get(f.input) else {
        return false;
    };
    let x_end = xo.saturating_add(x.bytes);
    uses.iter()
        .zip(offsets)
        .enumerate()
        .all(|(t, (u, o))| match (u, o) {
            (Some(u), Some(o)) if t != f.input && u.bytes > 0 => {
                let alive = u.first <= f.conv && u.last > f.pad;
                !alive || o.saturating_add(u.bytes) <= *xo || x_end <= *o
            }
            _ => true,
        })
}

/// `Err(Unsupported)` listing the prepared operators whose kernels this build leaves out (Cargo
/// features, see [`crate::ops::missing_kernel_feature`]).
fn compiled_in(model: &Model<'_>, ops: &[Prepared]) -> Result<()> {
    let mut missing = Vec::new();
    for p in ops {
        if let Some(f) = crate::ops::missing_kernel_feature(&p.kind) {
            missing.push(unsupported_op(p.index, &model.operators()[p.index], f));
        }
    }
    unsupported(missing)
}

fn unsupported_op(index: usize, op: &OpDesc<'_>, feature: &str) -> crate::UnsupportedOp {
    crate::UnsupportedOp {
        index,
        op: [op.name().as_str(), " (feature ", feature, " is off)"].concat(),
    }
}

fn unsupported(missing: Vec<crate::UnsupportedOp>) -> Result<()> {
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::Unsupported(missing))
    }
}

/// `Err(Unsupported)` listing the operators whose preparation needs an element-type feature this
/// build lacks (see [`crate::ops::missing_type_feature`]), before preparing any.
fn types_compiled_in(model: &Model<'_>) -> Result<()> {
    let tensors = model.tensors();
    let mut missing = Vec::new();
    for (i, op) in model.operators().iter().enumerate() {
        if let [Some(Some(a)), Some(Some(b))] = [op.inputs.first(), op.inputs.get(1)] {
            let (a, b) = (tensors[*a].dtype, tensors[*b].dtype);
            if let Some(f) = crate::ops::missing_type_feature(op.code, a, b) {
                missing.push(unsupported_op(i, op, f));
            }
        }
    }
    unsupported(missing)
}

pub(crate) fn op_err(index: usize, op: &OpDesc<'_>, reason: impl Into<String>) -> Error {
    Error::Op {
        index,
        op: op.name(),
        reason: reason.into(),
    }
}

/// The inputs of one operator while one of its outputs is borrowed mutably.
struct Ins<'b> {
    lo: &'b [u8],
    hi: &'b [u8],
    hi_start: usize,
    packed: &'b [u8],
    locs: &'b [Loc],
    tensors: &'b [TensorDesc<'b>],
    ids: &'b [Option<usize>],
    /// Read as input 0 instead of `ids[0]` ([`Prepared::input0`]).
    in0: Option<usize>,
}

impl<'b> Ins<'b> {
    fn bytes(&self, k: usize) -> Option<&'b [u8]> {
        let t = match (k, self.in0) {
            (0, Some(t)) => t,
            _ => (*self.ids.get(k)?)?,
        };
        match *self.locs.get(t)? {
            Loc::Empty => Some(&[]),
            Loc::Const => self.tensors.get(t)?.data,
            Loc::Packed { off, len } => self.packed.get(off..off + len),
            Loc::Arena { off, len } => {
                if off + len <= self.lo.len() {
                    self.lo.get(off..off + len)
                } else {
                    let s = off.checked_sub(self.hi_start)?;
                    self.hi.get(s..s + len)
                }
            }
        }
    }

    fn has(&self, k: usize) -> bool {
        matches!(self.ids.get(k), Some(Some(_)))
    }

    fn typed<T: bytemuck::Pod>(&self, k: usize) -> Result<&'b [T]> {
        let b = self
            .bytes(k)
            .ok_or_else(|| Error::Tensor(format!("input {k} unavailable")))?;
        bytemuck::try_cast_slice(b).map_err(|_| Error::Misaligned)
    }
}

fn split_io<'b>(
    arena: &'b mut [u8],
    packed: &'b [u8],
    locs: &'b [Loc],
    tensors: &'b [TensorDesc<'b>],
    op: &'b OpDesc<'b>,
    in0: Option<usize>,
    out: usize,
) -> (Ins<'b>, &'b mut [u8]) {
    let (s, e) = match locs.get(out) {
        Some(&Loc::Arena { off, len }) => (off, off + len),
        _ => (0, 0),
    };
    let (lo, rest) = arena.split_at_mut(s.min(arena.len()));
    let (o, hi) = rest.split_at_mut((e - s).min(rest.len()));
    (
        Ins {
            lo,
            hi,
            hi_start: e,
            packed,
            locs,
            tensors,
            ids: &op.inputs,
            in0,
        },
        o,
    )
}

fn cast_out<T: bytemuck::Pod>(b: &mut [u8]) -> Result<&mut [T]> {
    bytemuck::try_cast_slice_mut(b).map_err(|_| Error::Misaligned)
}

/// Runs `$body` with `$i`/`$o` bound to input `$k` and the output as the unsigned type of
/// `$size` bytes.
macro_rules! by_size {
    ($size:expr, $ins:expr, $k:expr, $out:expr, |$i:ident, $o:ident| $body:expr) => {
        match $size {
            1 => {
                let $i = $ins.typed::<u8>($k)?;
                let $o = cast_out::<u8>($out)?;
                $body
            }
            2 => {
                let $i = $ins.typed::<u16>($k)?;
                let $o = cast_out::<u16>($out)?;
                $body
            }
            4 => {
                let $i = $ins.typed::<u32>($k)?;
                let $o = cast_out::<u32>($out)?;
                $body
            }
            _ => {
                let $i = $ins.typed::<u64>($k)?;
                let $o = cast_out::<u64>($out)?;
                $body
            }
        }
    };
}

/// Runs an operator with its pre-packed weights (`None` if the kinds do not match, which
/// `Fast::prepare` rules out).
fn run_fast(
    fast: &Fast,
    kind: &Kind,
    ins: &Ins<'_>,
    out: &mut [u8],
    s: &mut [FastScratch],
) -> Option<()> {
    match (fast, kind) {
        (
            Fast::ConvI8(g),
            Kind::Conv(Conv::I8 {
                params,
                in_shape,
                filter_shape,
                out_shape,
                q,
            }),
        ) => simd::conv2d_i8(
            g,
            ins.typed(0).ok()?,
            *in_shape,
            *filter_shape,
            params,
            q.input_offset,
            cast_out(out).ok()?,
            *out_shape,
            s,
        ),
        (Fast::FullyConnectedI8(g), Kind::FullyConnected(FullyConnected::I8 { batches, .. })) => {
            simd::fully_connected_i8(g, ins.typed(0).ok()?, *batches, cast_out(out).ok()?, s)
        }
        (
            Fast::DepthwiseI8(d),
            Kind::Depthwise(Depthwise::I8 {
                params,
                in_shape,
                filter_shape,
                out_shape,
                ..
            }),
        ) => simd::depthwise_i8(
            d,
            ins.typed(0).ok()?,
            *in_shape,
            [filter_shape[1], filter_shape[2]],
            params,
            cast_out(out).ok()?,
            *out_shape,
            s,
        ),
        (
            Fast::Conv(g),
            Kind::Conv(Conv::F32 {
                params,
                in_shape,
                filter_shape,
                out_shape,
            }),
        ) => simd::conv2d_f32(
            g,
            ins.typed(0).ok()?,
            *in_shape,
            *filter_shape,
            params,
            cast_out(out).ok()?,
            *out_shape,
            s,
        ),
        (
            Fast::ConvWino(w),
            Kind::Conv(Conv::F32 {
                params,
                in_shape,
                out_shape,
                ..
            }),
        ) => simd::conv2d_wino_f32(
            w,
            ins.typed(0).ok()?,
            *in_shape,
            params,
            cast_out(out).ok()?,
            *out_shape,
            s,
        ),
        (Fast::FullyConnected(g), Kind::FullyConnected(FullyConnected::F32 { batches, .. })) => {
            simd::fully_connected_f32(g, ins.typed(0).ok()?, *batches, cast_out(out).ok()?, s)
        }
        (
            Fast::Depthwise(d),
            Kind::Depthwise(Depthwise::F32 {
                params,
                in_shape,
                filter_shape,
                out_shape,
            }),
        ) => simd::depthwise_f32(
            d,
            ins.typed(0).ok()?,
            *in_shape,
            [filter_shape[1], filter_shape[2]],
            params,
            cast_out(out).ok()?,
            *out_shape,
            s,
        ),
        (Fast::PairTableI8(t), Kind::Elementwise(Elementwise::BinaryI8 { bc, .. }))
            if t.len() == 1 << 16 =>
        {
            let (a, b) = (ins.typed::<i8>(0).ok()?, ins.typed::<i8>(1).ok()?);
            bc.apply(a, b, cast_out::<i8>(out).ok()?, |x, y| {
                t[usize::from(x as u8) << 8 | usize::from(y as u8)]
            });
        }
        (Fast::ArithI8(f), Kind::Elementwise(Elementwise::BinaryI8 { p, bc })) => simd::arith_i8(
            f,
            p,
            bc,
            ins.typed(0).ok()?,
            ins.typed(1).ok()?,
            cast_out(out).ok()?,
        ),
        (
            Fast::Quantize(isa),
            Kind::Quantize(Quantize::FromFloat {
                scale,
                zero_point,
                to,
            }),
        ) => {
            let to = match to {
                DType::I8 => simd::QuantizeTo::I8,
                DType::U8 => simd::QuantizeTo::U8,
                _ => simd::QuantizeTo::I16,
            };
            let i = ins.typed::<f32>(0).ok()?;
            return simd::quantize_f32(*isa, i, *scale, *zero_point, to, out).then_some(());
        }
        #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
        (Fast::Unary(isa), Kind::Elementwise(Elementwise::Unary { op, .. })) => {
            let (i, o) = (ins.typed::<f32>(0).ok()?, cast_out(out).ok()?);
            return simd::unary_f32(*isa, *op, i, o).then_some(());
        }
        #[cfg(feature = "ops-shape")]
        (Fast::TransposeFewRows(isa), Kind::Shape(Shape::Transpose { in_shape, perm, .. })) => {
            let (i, o) = (ins.typed::<u32>(0).ok()?, cast_out(out).ok()?);
            return simd::transpose_few_rows_32(*isa, in_shape, perm, i, o).then_some(());
        }
        _ => return None,
    }
    Some(())
}

fn run_op<'b>(
    p: &'b Prepared,
    op: &'b OpDesc<'b>,
    tensors: &'b [TensorDesc<'b>],
    locs: &'b [Loc],
    arena: &'b mut [u8],
    packed: &'b [u8],
    scratch: &mut Scratch,
) -> Result<()> {
    // Multi-output operators handle each output separately.
    #[cfg(feature = "ops-shape")]
    if let Kind::Shape(Shape::Split {
        input,
        strides,
        parts,
        size,
    }) = &p.kind
    {
        for (j, (start, shape)) in parts.iter().enumerate() {
            let (ins, out) = split_io(arena, packed, locs, tensors, op, None, op.outputs[j]);
            by_size!(*size, ins, *input, out, |i, o| so::strided_copy(
                i, *start, shape, strides, o
            ));
        }
        return Ok(());
    }
    #[cfg(feature = "ops-compare")]
    if let Kind::Compare(Compare::TopK { n, k, dtype, .. }) = &p.kind {
        for (j, &out_t) in op.outputs.iter().enumerate().take(2) {
            let (ins, out) = split_io(arena, packed, locs, tensors, op, None, out_t);
            let order: &mut [u32] = bytemuck::cast_slice_mut(scratch.i32s.as_mut_slice());
            run_topk(&ins, *n, *k, *dtype, order, out, j == 1).map_err(|e| match e {
                Error::Misaligned => e,
                _ => op_err(p.index, op, "bad TOPK_V2 buffers"),
            })?;
        }
        return Ok(());
    }
    let Some(&out_t) = op.outputs.first() else {
        return Ok(());
    };
    let (ins, out) = split_io(arena, packed, locs, tensors, op, p.input0, out_t);
    run_one(p, op, ins, out, scratch)
}

/// Runs a single-output operator reading `ins`, writing `out`.
fn run_one<'b>(
    p: &'b Prepared,
    op: &'b OpDesc<'b>,
    ins: Ins<'b>,
    out: &mut [u8],
    scratch: &mut Scratch,
) -> Result<()> {
    if let Some(fast) = p.fast.as_ref().filter(|_| simd::FAST_KERNELS) {
        return run_fast(fast, &p.kind, &ins, out, &mut scratch.fast)
            .ok_or_else(|| op_err(p.index, op, "fast kernel does not match the operator"));
    }
    let bias = |k: usize| -> Result<Option<&'b [f32]>> {
        if ins.has(k) {
            Ok(Some(ins.typed::<f32>(k)?))
        } else {
            Ok(None)
        }
    };
    match &p.kind {
        #[cfg(feature = "ops-shape")]
        Kind::Shape(Shape::Split { .. }) => {}
        #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
        Kind::Elementwise(Elementwise::Binary {
            op: bop,
            act,
            bc,
            dtype,
        }) => match dtype {
            DType::I32 => {
                let range = ew::activation_range_i32(*act).unwrap_or((i32::MIN, i32::MAX));
                ew::binary_i32(
                    *bop,
                    bc,
                    ins.typed(0)?,
                    ins.typed(1)?,
                    range,
                    cast_out(out)?,
                )
                .map_err(|_| op_err(p.index, op, "no int32 form"))?;
            }
            _ => ew::binary_f32(*bop, bc, ins.typed(0)?, ins.typed(1)?, *act, cast_out(out)?),
        },
        #[cfg(all(feature = "ops-elementwise", feature = "ops-float"))]
        Kind::Elementwise(Elementwise::Unary { op: uop, dtype }) => match dtype {
            DType::I32 => {
                ew::unary_i32(*uop, ins.typed(0)?, cast_out(out)?);
            }
            _ => ew::unary_f32(*uop, ins.typed(0)?, cast_out(out)?),
        },
        Kind::Copy => {
            let i = ins.bytes(0).unwrap_or(&[]);
            if i.len() == out.len() {
                out.copy_from_slice(i);
            }
        }
        #[cfg(feature = "ops-shape")]
        Kind::Shape(Shape::Transpose {
            in_shape,
            perm,
            size,
        }) => {
            by_size!(*size, ins, 0, out, |i, o| so::transpose(
                i, in_shape, perm, o
            ))
        }
        #[cfg(feature = "ops-shape")]
        Kind::Shape(Shape::Strided {
            start,
            shape,
            strides,
            size,
        }) => {
            by_size!(*size, ins, 0, out, |i, o| so::strided_copy(
                i, *start, shape, strides, o
            ))
        }
        #[cfg(feature = "ops-shape")]
        Kind::Shape(Shape::BroadcastTo {
            in_shape,
            out_shape,
            size,
        }) => {
            by_size!(*size, ins, 0, out, |i, o| so::broadcast_to(
                i, in_shape, out_shape, o
            ))
        }
        #[cfg(feature = "ops-shape")]
        Kind::Shape(Shape::Tile {
            in_shape,
            out_shape,
            size,
        }) => {
            by_size!(*size, ins, 0, out, |i, o| so::tile(
                i, in_shape, out_shape, o
            ))
        }
        #[cfg(feature = "ops-shape")]
        Kind::Shape(Shape::Concat {
            outer,
            out_chunk,
            parts,
            size,
            act,
        }) => {
            for (k, &(chunk, offset)) in parts.iter().enumerate() {
                let cb = chunk * size;
                let i = ins.bytes(k).unwrap_or(&[]);
                so::concat_part(i, *outer, cb, out_chunk * size, offset * size, out);
            }
            if *act != Activation::None {
                for v in cast_out::<f32>(out)? {
                    *v = act.apply(*v);
                }
            }
        }
        #[cfg(feature = "ops-shape")]
        Kind::Shape(Shape::Gather {
            outer,
            axis_size,
            inner,
            size,
            idx,
        }) => {
            let r = match idx {
                DType::I64 => {
                    let ix = ins.typed::<i64>(1)?;
                    by_size!(*size, ins, 0, out, |i, o| so::gather(
                        i,
                        *outer,
                        *axis_size,
                        *inner,
                        ix.iter().copied(),
                        o
                    ))
                }
                _ => {
                    let ix = ins.typed::<i32>(1)?;
                    by_size!(*size, ins, 0, out, |i, o| so::gather(
                        i,
                        *outer,
                        *axis_size,
                        *inner,
                        ix.iter().map(|&v| i64::from(v)),
                        o
                    ))
                }
            };
            r.map_err(|bad| {
                op_err(
                    p.index,
                    op,
                    format!("index {bad} out of range 0..{axis_size}"),
                )
            })?;
        }
        #[cfg(feature = "ops-pad")]
        Kind::Pad(Pad::Mirror {
            in_shape,
            before,
            after,
            symmetric,
        }) => so::mirror_pad_f32(
            ins.typed::<f32>(0)?,
            in_shape,
            before,
            after,
            *symmetric,
            cast_out(out)?,
        ),
        #[cfg(feature = "ops-pad")]
        Kind::Pad(Pad::Constant {
            in_shape,
            before,
            after,
            size,
            fill,
        }) => {
            let value = if ins.has(2) {
                ins.bytes(2).unwrap_or(&[])
            } else {
                &[]
            };
            let mut v = [0u8; 8];
            v[0] = *fill;
            if value.len() >= *size {
                v[..*size].copy_from_slice(&value[..*size]);
            }
            match size {
                1 => so::pad(
                    ins.typed::<u8>(0)?,
                    in_shape,
                    before,
                    after,
                    v[0],
                    cast_out(out)?,
                ),
                2 => so::pad(
                    ins.typed::<u16>(0)?,
                    in_shape,
                    before,
                    after,
                    u16::from_le_bytes([v[0], v[1]]),
                    cast_out(out)?,
                ),
                4 => so::pad(
                    ins.typed::<u32>(0)?,
                    in_shape,
                    before,
                    after,
                    u32::from_le_bytes([v[0], v[1], v[2], v[3]]),
                    cast_out(out)?,
                ),
                _ => so::pad(
                    ins.typed::<u64>(0)?,
                    in_shape,
                    before,
                    after,
                    u64::from_le_bytes(v),
                    cast_out(out)?,
                ),
            }
        }
        #[cfg(feature = "ops-elementwise")]
        Kind::Elementwise(Elementwise::Cast { from, to }) => run_cast(&ins, *from, *to, out)?,
        #[cfg(feature = "ops-compare")]
        Kind::Compare(Compare::Relation {
            op: cop,
            bc,
            dtype,
            q,
        }) => {
            let o = cast_out::<u8>(out)?;
            match (dtype, q) {
                (DType::I8, Some((sa, sb))) => {
                    cmp::compare_i8(*cop, bc, ins.typed(0)?, *sa, ins.typed(1)?, *sb, o)
                }
                (DType::F32, _) => cmp::compare::<f32>(*cop, bc, ins.typed(0)?, ins.typed(1)?, o),
                (DType::I32, _) => cmp::compare::<i32>(*cop, bc, ins.typed(0)?, ins.typed(1)?, o),
                (DType::I64, _) => cmp::compare::<i64>(*cop, bc, ins.typed(0)?, ins.typed(1)?, o),
                _ => cmp::compare_bool(*cop, bc, ins.typed(0)?, ins.typed(1)?, o),
            }
        }
        #[cfg(feature = "ops-compare")]
        Kind::Compare(Compare::Logical { and, bc }) => {
            cmp::logical(*and, bc, ins.typed(0)?, ins.typed(1)?, cast_out(out)?)
        }
        #[cfg(feature = "ops-compare")]
        Kind::Compare(Compare::LogicalNot) => cmp::logical_not(ins.typed(0)?, cast_out(out)?),
        #[cfg(feature = "ops-compare")]
        Kind::Compare(Compare::Select { plan, size }) => {
            let c = ins.typed::<u8>(0)?;
            match size {
                1 => plan.apply(c, ins.typed::<u8>(1)?, ins.typed::<u8>(2)?, cast_out(out)?),
                4 => plan.apply(
                    c,
                    ins.typed::<u32>(1)?,
                    ins.typed::<u32>(2)?,
                    cast_out(out)?,
                ),
                _ => plan.apply(
                    c,
                    ins.typed::<u64>(1)?,
                    ins.typed::<u64>(2)?,
                    cast_out(out)?,
                ),
            }
        }
        #[cfg(feature = "ops-compare")]
        Kind::Compare(Compare::TopK { .. }) => {}
        #[cfg(feature = "ops-reduce")]
        Kind::Reduce(Reduce::ArgMinMax {
            outer,
            axis,
            inner,
            max,
            input,
            output,
        }) => {
            let go = |store: &mut dyn FnMut(usize, usize)| -> Result<()> {
                match input {
                    DType::F32 => {
                        so::arg_min_max(ins.typed::<f32>(0)?, *outer, *axis, *inner, *max, store)
                    }
                    DType::I32 => {
                        so::arg_min_max(ins.typed::<i32>(0)?, *outer, *axis, *inner, *max, store)
                    }
                    DType::I64 => {
                        so::arg_min_max(ins.typed::<i64>(0)?, *outer, *axis, *inner, *max, store)
                    }
                    DType::I8 => {
                        so::arg_min_max(ins.typed::<i8>(0)?, *outer, *axis, *inner, *max, store)
                    }
                    _ => so::arg_min_max(ins.typed::<u8>(0)?, *outer, *axis, *inner, *max, store),
                }
                Ok(())
            };
            match output {
                DType::I64 => {
                    let o = cast_out::<i64>(out)?;
                    go(&mut |i, k| {
                        if let Some(v) = o.get_mut(i) {
                            *v = k as i64
                        }
                    })?;
                }
                _ => {
                    let o = cast_out::<i32>(out)?;
                    go(&mut |i, k| {
                        if let Some(v) = o.get_mut(i) {
                            *v = k as i32
                        }
                    })?;
                }
            }
        }
        #[cfg(feature = "ops-quantize")]
        Kind::Quantize(Quantize::DequantizeF16)
        | Kind::Quantize(Quantize::DequantizeAffine { .. })
        | Kind::Quantize(Quantize::DequantizePerChannel { .. }) => {
            let i = ins.bytes(0).unwrap_or(&[]);
            dequantize(&p.kind, i, cast_out::<f32>(out)?).map_err(|e| op_err(p.index, op, e))?;
        }
        Kind::Precomputed => {}
        #[cfg(feature = "ops-quantize")]
        Kind::Quantize(Quantize::FromFloat {
            scale,
            zero_point,
            to,
        }) => {
            let (i, s, z) = (ins.typed::<f32>(0)?, *scale, *zero_point);
            match to {
                DType::I8 => ew::quantize_f32(i, s, z, (-128, 127), cast_out(out)?, |v| v as i8),
                DType::U8 => ew::quantize_f32(i, s, z, (0, 255), out, |v| v as u8),
                _ => ew::quantize_f32(i, s, z, (-32768, 32767), cast_out(out)?, |v| v as i16),
            }
        }
        Kind::Lut8 { table } => ew::apply_lut8(table, ins.bytes(0).unwrap_or(&[]), out),
        #[cfg(all(feature = "ops-elementwise", feature = "ops-int8"))]
        Kind::Elementwise(Elementwise::RsqrtI8 { table, min_input }) => {
            let i = ins.typed::<i8>(0)?;
            if let Some(&v) = i.iter().find(|&&v| v < *min_input) {
                return Err(op_err(
                    p.index,
                    op,
                    format!(
                        "int8 RSQRT of a negative value (stored {v} below the zero point \
                         {min_input})"
                    ),
                ));
            }
            ew::apply_lut8(table, ins.bytes(0).unwrap_or(&[]), out)
        }
        #[cfg(all(feature = "ops-elementwise", feature = "ops-int8"))]
        Kind::Elementwise(Elementwise::BinaryI8 { p: bp, bc }) => {
            ew::binary_quantized::<i8>(bp, bc, ins.typed(0)?, ins.typed(1)?, cast_out(out)?)
        }
        #[cfg(all(feature = "ops-elementwise", feature = "ops-int16"))]
        Kind::Elementwise(Elementwise::BinaryI16 { p: bp, bc }) => {
            ew::binary_quantized::<i16>(bp, bc, ins.typed(0)?, ins.typed(1)?, cast_out(out)?)
        }
        #[cfg(all(feature = "ops-quantize", feature = "ops-int16"))]
        Kind::Quantize(Quantize::Requantize {
            multiplier,
            shift,
            in_zero_point,
            out_zero_point,
            from,
            to,
        }) => {
            // reference_ops::Requantize: MBQM(x - zp_in) + zp_out, saturated to the output.
            let rq = |x: i32| {
                crate::quant::multiply_by_quantized_multiplier(
                    x - in_zero_point,
                    *multiplier,
                    *shift,
                )
                .saturating_add(*out_zero_point)
            };
            match (from, to) {
                (DType::I16, DType::I16) => {
                    requantize::<i16, i16>(ins.typed(0)?, cast_out(out)?, rq)
                }
                (DType::I16, _) => requantize::<i16, i8>(ins.typed(0)?, cast_out(out)?, rq),
                _ => requantize::<i8, i16>(ins.typed(0)?, cast_out(out)?, rq),
            }
        }
        #[cfg(all(feature = "ops-conv", feature = "ops-int16"))]
        Kind::Conv(Conv::I16 {
            params,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => conv::conv2d_16x8(
            ins.typed(0)?,
            *in_shape,
            ins.typed(1)?,
            *filter_shape,
            bias_i64(&ins)?,
            params,
            q,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-depthwise-conv", feature = "ops-int16"))]
        Kind::Depthwise(Depthwise::I16 {
            params,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => depthwise_conv::depthwise_conv2d_16x8(
            ins.typed(0)?,
            *in_shape,
            ins.typed(1)?,
            *filter_shape,
            bias_i64(&ins)?,
            params,
            q,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-fully-connected", feature = "ops-int16"))]
        Kind::FullyConnected(FullyConnected::I16 {
            batches,
            in_depth,
            out_depth,
            q,
        }) => fully_connected::fully_connected_16x8(
            ins.typed(0)?,
            *batches,
            *in_depth,
            ins.typed(1)?,
            *out_depth,
            bias_i64(&ins)?,
            q,
            cast_out(out)?,
        ),
        #[cfg(all(feature = "ops-pool", feature = "ops-int16"))]
        Kind::Pool(Pool::I16 {
            max,
            params,
            in_shape,
            out_shape,
            act_min,
            act_max,
        }) => pool::pool_quantized::<i16>(
            *max,
            ins.typed(0)?,
            *in_shape,
            params,
            *act_min,
            *act_max,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-reduce", feature = "ops-int16"))]
        Kind::Reduce(Reduce::MeanI16(m)) => {
            m.run::<i16>(ins.typed(0)?, &mut scratch.i32s, cast_out(out)?)
        }
        #[cfg(all(feature = "ops-conv", feature = "ops-int8"))]
        Kind::Conv(Conv::I8 {
            params,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => conv::conv2d_i8(
            ins.typed(0)?,
            *in_shape,
            ins.typed(1)?,
            *filter_shape,
            bias_i32(&ins)?,
            params,
            q,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-depthwise-conv", feature = "ops-int8"))]
        Kind::Depthwise(Depthwise::I8 {
            params,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => depthwise_conv::depthwise_conv2d_i8(
            ins.typed(0)?,
            *in_shape,
            ins.typed(1)?,
            *filter_shape,
            bias_i32(&ins)?,
            params,
            q,
            &mut scratch.i32s,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-fully-connected", feature = "ops-int8"))]
        Kind::FullyConnected(FullyConnected::I8 {
            batches,
            in_depth,
            out_depth,
            q,
        }) => fully_connected::fully_connected_i8(
            ins.typed(0)?,
            *batches,
            *in_depth,
            ins.typed(1)?,
            *out_depth,
            bias_i32(&ins)?,
            q,
            cast_out(out)?,
        ),
        #[cfg(all(feature = "ops-conv", feature = "ops-hybrid"))]
        Kind::Conv(Conv::Hybrid {
            params,
            in_shape,
            filter_shape,
            out_shape,
            scales,
            mode,
        }) => {
            let n = in_shape[0];
            let mut hs = conv::HybridScratch {
                quantized: &mut scratch.i8s,
                scales: &mut scratch.f32s[..n],
                offsets: &mut scratch.i32s[..n],
            };
            conv::conv2d_hybrid(
                ins.typed(0)?,
                *in_shape,
                ins.typed(1)?,
                *filter_shape,
                scales,
                bias(2)?,
                params,
                *mode,
                &mut hs,
                cast_out(out)?,
                *out_shape,
            )
        }
        #[cfg(all(feature = "ops-depthwise-conv", feature = "ops-hybrid"))]
        Kind::Depthwise(Depthwise::Hybrid {
            params,
            in_shape,
            filter_shape,
            out_shape,
            scales,
            mode,
        }) => {
            let n = in_shape[0];
            let (offsets, acc) = scratch.i32s.split_at_mut(n);
            let mut hs = conv::HybridScratch {
                quantized: &mut scratch.i8s,
                scales: &mut scratch.f32s[..n],
                offsets,
            };
            depthwise_conv::depthwise_conv2d_hybrid(
                ins.typed(0)?,
                *in_shape,
                ins.typed(1)?,
                *filter_shape,
                scales,
                bias(2)?,
                params,
                *mode,
                &mut hs,
                acc,
                cast_out(out)?,
                *out_shape,
            )
        }
        #[cfg(all(feature = "ops-fully-connected", feature = "ops-hybrid"))]
        Kind::FullyConnected(FullyConnected::Hybrid {
            batches,
            in_depth,
            out_depth,
            act,
            scales,
            mode,
        }) => {
            let n = *batches;
            let mut hs = conv::HybridScratch {
                quantized: &mut scratch.i8s,
                scales: &mut scratch.f32s[..n],
                offsets: &mut scratch.i32s[..n],
            };
            fully_connected::fully_connected_hybrid(
                ins.typed(0)?,
                *batches,
                *in_depth,
                ins.typed(1)?,
                scales,
                *out_depth,
                bias(2)?,
                *act,
                *mode,
                &mut hs,
                cast_out(out)?,
            )
        }
        #[cfg(all(feature = "ops-pool", feature = "ops-int8"))]
        Kind::Pool(Pool::I8 {
            max,
            params,
            in_shape,
            out_shape,
            act_min,
            act_max,
        }) => pool::pool_quantized::<i8>(
            *max,
            ins.typed(0)?,
            *in_shape,
            params,
            *act_min,
            *act_max,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-softmax", feature = "ops-int8"))]
        Kind::Softmax(Softmax::I8 {
            table,
            outer,
            depth,
            out_scale,
            out_zero_point,
        }) => softmax::softmax_i8(
            ins.typed(0)?,
            *outer,
            *depth,
            table,
            *out_scale,
            *out_zero_point,
            cast_out(out)?,
        ),
        #[cfg(all(feature = "ops-reduce", feature = "ops-int8"))]
        Kind::Reduce(Reduce::MeanI8(m)) => {
            m.run::<i8>(ins.typed(0)?, &mut scratch.i32s, cast_out(out)?)
        }
        #[cfg(all(feature = "ops-conv", feature = "ops-float"))]
        Kind::Conv(Conv::F32 {
            params,
            in_shape,
            filter_shape,
            out_shape,
        }) => conv::conv2d_f32(
            ins.typed(0)?,
            *in_shape,
            ins.typed(1)?,
            *filter_shape,
            bias(2)?,
            params,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-depthwise-conv", feature = "ops-float"))]
        Kind::Depthwise(Depthwise::F32 {
            params,
            in_shape,
            filter_shape,
            out_shape,
        }) => depthwise_conv::depthwise_conv2d_f32(
            ins.typed(0)?,
            *in_shape,
            ins.typed(1)?,
            *filter_shape,
            bias(2)?,
            params,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-transpose-conv", feature = "ops-float"))]
        Kind::TransposeConv(TransposeConv::F32 {
            params,
            in_shape,
            filter_shape,
            out_shape,
        }) => transpose_conv::transpose_conv_f32(
            ins.typed(2)?,
            *in_shape,
            ins.typed(1)?,
            *filter_shape,
            bias(3)?,
            params,
            cast_out(out)?,
            *out_shape,
        ),
        #[cfg(all(feature = "ops-transpose-conv", feature = "ops-int8"))]
        Kind::TransposeConv(TransposeConv::I8 {
            params,
            in_shape,
            filter_shape,
            out_shape,
            q,
        }) => {
            let n: usize = out_shape.iter().product();
            transpose_conv::transpose_conv_i8(
                ins.typed(2)?,
                *in_shape,
                ins.typed(1)?,
                *filter_shape,
                if ins.has(3) {
                    Some(ins.typed::<i32>(3)?)
                } else {
                    None
                },
                params,
                q,
                &mut scratch.i32s[..n],
                cast_out(out)?,
                *out_shape,
            )
        }
        #[cfg(all(feature = "ops-fully-connected", feature = "ops-float"))]
        Kind::FullyConnected(FullyConnected::F32 {
            batches,
            in_depth,
            out_depth,
            act,
        }) => fully_connected::fully_connected_f32(
            ins.typed(0)?,
            *batches,
            *in_depth,
            ins.typed(1)?,
            *out_depth,
            bias(2)?,
            *act,
            cast_out(out)?,
        ),
        #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
        Kind::BatchMatMul(BatchMatMul::F32 {
            lhs_shape,
            rhs_shape,
            out_shape,
            adj_x,
            adj_y,
        }) => batch_matmul::batch_matmul_f32(
            ins.typed(0)?,
            lhs_shape,
            ins.typed(1)?,
            rhs_shape,
            *adj_x,
            *adj_y,
            cast_out(out)?,
            out_shape,
        ),
        #[cfg(all(feature = "ops-batch-matmul", feature = "ops-hybrid"))]
        Kind::BatchMatMul(BatchMatMul::Hybrid {
            lhs_shape,
            rhs_shape,
            out_shape,
            adj_x,
            adj_y,
            rhs_scale,
            asymmetric,
        }) => {
            let lhs = ins.typed::<f32>(0)?;
            let l = lhs_shape.len();
            let k = lhs_shape[if *adj_x { l - 2 } else { l - 1 }];
            // Sized by `Kind::scratch` for these shapes (the kernel checks the lengths).
            let rows = (lhs.len().checked_div(k).unwrap_or(0))
                .min(scratch.f32s.len())
                .min(scratch.i32s.len());
            let (scales, row) = scratch.f32s.split_at_mut(rows);
            let (offsets, col_sums) = scratch.i32s.split_at_mut(rows);
            let mut hs = batch_matmul::HybridBmmScratch {
                quantized: &mut scratch.i8s,
                scales,
                offsets,
                row,
                col_sums,
            };
            batch_matmul::batch_matmul_hybrid(
                lhs,
                lhs_shape,
                ins.typed(1)?,
                rhs_shape,
                *adj_x,
                *adj_y,
                *rhs_scale,
                *asymmetric,
                &mut hs,
                cast_out(out)?,
                out_shape,
            )
        }
        #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
        Kind::BatchMatMul(BatchMatMul::I8 {
            lhs_shape,
            rhs_shape,
            out_shape,
            adj_x,
            adj_y,
            rhs_offset,
            q,
        }) => batch_matmul::batch_matmul_i8(
            ins.typed(0)?,
            lhs_shape,
            ins.typed(1)?,
            rhs_shape,
            *adj_x,
            *adj_y,
            *rhs_offset,
            q,
            // Sized by `Kind::scratch` for these shapes (the kernel checks the lengths).
            &mut batch_matmul::BmmI8Scratch {
                i8s: &mut scratch.i8s,
                sums: &mut scratch.i32s,
            },
            cast_out(out)?,
            out_shape,
        ),
        #[cfg(all(feature = "ops-pool", feature = "ops-float"))]
        Kind::Pool(Pool::F32 {
            max,
            params,
            in_shape,
            out_shape,
        }) => {
            if *max {
                pool::max_pool_f32(ins.typed(0)?, *in_shape, params, cast_out(out)?, *out_shape)
            } else {
                pool::average_pool_f32(ins.typed(0)?, *in_shape, params, cast_out(out)?, *out_shape)
            }
        }
        #[cfg(feature = "ops-resize")]
        Kind::Resize(Resize {
            bilinear,
            align_corners,
            half_pixel,
            in_shape,
            out_shape,
            int8,
        }) => match (*bilinear, *int8) {
            (true, false) => resize::resize_bilinear_f32(
                ins.typed(0)?,
                *in_shape,
                *align_corners,
                *half_pixel,
                cast_out(out)?,
                *out_shape,
            ),
            (true, true) => resize::resize_bilinear_i8(
                ins.typed(0)?,
                *in_shape,
                *align_corners,
                *half_pixel,
                cast_out(out)?,
                *out_shape,
            ),
            (false, false) => resize::resize_nearest::<f32>(
                ins.typed(0)?,
                *in_shape,
                *align_corners,
                *half_pixel,
                cast_out(out)?,
                *out_shape,
            ),
            (false, true) => resize::resize_nearest::<i8>(
                ins.typed(0)?,
                *in_shape,
                *align_corners,
                *half_pixel,
                cast_out(out)?,
                *out_shape,
            ),
        },
        #[cfg(all(feature = "ops-softmax", feature = "ops-float"))]
        Kind::Softmax(Softmax::F32 {
            outer,
            depth,
            beta,
            log,
        }) => {
            if *log {
                softmax::log_softmax_f32(ins.typed(0)?, *outer, *depth, cast_out(out)?)
            } else {
                softmax::softmax_f32(ins.typed(0)?, *outer, *depth, *beta, cast_out(out)?)
            }
        }
        #[cfg(all(feature = "ops-reduce", feature = "ops-int8"))]
        Kind::Reduce(Reduce::SumI8 {
            shape,
            axes,
            count,
            in_q,
            out_q,
        }) => {
            let o = cast_out::<i8>(out)?;
            let sums = &mut scratch.i32s[..o.len()];
            reduce::sum_quantized::<i8>(ins.typed(0)?, shape, axes, sums);
            reduce::sum_i8_output(
                sums,
                *count,
                in_q.zero_point,
                in_q.scale,
                out_q.zero_point,
                out_q.scale,
                o,
            );
        }
        #[cfg(all(feature = "ops-reduce", feature = "ops-int8"))]
        Kind::Reduce(Reduce::MaxMinI8 { shape, axes, max }) => {
            reduce::reduce_max_min_i8(ins.typed(0)?, shape, axes, *max, cast_out(out)?)
        }
        #[cfg(all(feature = "ops-reduce", feature = "ops-float"))]
        Kind::Reduce(Reduce::F32 { shape, axes, kind }) => {
            reduce::reduce_f32(ins.typed(0)?, shape, axes, *kind, cast_out(out)?)
        }
        // Kernels left out by Cargo features (`Interpreter::new` already refused them).
        #[allow(unreachable_patterns)]
        _ => return Err(op_err(p.index, op, "kernel not compiled in")),
    }
    Ok(())
}

fn run_cast(ins: &Ins<'_>, from: DType, to: DType, out: &mut [u8]) -> Result<()> {
    use so::Bool8;
    macro_rules! to_any {
        ($src:expr) => {{
            let src = $src;
            match to {
                DType::F32 => so::cast::<_, f32>(src, cast_out(out)?),
                DType::I32 => so::cast::<_, i32>(src, cast_out(out)?),
                DType::I64 => so::cast::<_, i64>(src, cast_out(out)?),
                DType::U8 => so::cast::<_, u8>(src, cast_out(out)?),
                DType::I8 => so::cast::<_, i8>(src, cast_out(out)?),
                DType::Bool => {
                    let o = cast_out::<u8>(out)?;
                    for (o, &i) in o.iter_mut().zip(src) {
                        *o = so::CastTo::<Bool8>::cast(i).0;
                    }
                }
                DType::F16 | DType::I16 => {}
            }
        }};
    }
    match from {
        DType::F32 => to_any!(ins.typed::<f32>(0)?),
        DType::I32 => to_any!(ins.typed::<i32>(0)?),
        DType::I64 => to_any!(ins.typed::<i64>(0)?),
        DType::U8 => to_any!(ins.typed::<u8>(0)?),
        DType::I8 => to_any!(ins.typed::<i8>(0)?),
        DType::Bool => {
            let src = ins.typed::<u8>(0)?;
            // bool -> x is (b != 0) as x
            match to {
                DType::F32 => cast_out::<f32>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = f32::from(u8::from(i != 0))),
                DType::I32 => cast_out::<i32>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = i32::from(i != 0)),
                DType::I64 => cast_out::<i64>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = i64::from(i != 0)),
                DType::U8 | DType::Bool => cast_out::<u8>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = u8::from(i != 0)),
                DType::I8 => cast_out::<i8>(out)?
                    .iter_mut()
                    .zip(src)
                    .for_each(|(o, &i)| *o = i8::from(i != 0)),
                DType::F16 | DType::I16 => {}
            }
        }
        DType::F16 | DType::I16 => {}
    }
    Ok(())
}

fn bias_i64<'b>(ins: &Ins<'b>) -> Result<Option<&'b [i64]>> {
    if ins.has(2) {
        Ok(Some(ins.typed::<i64>(2)?))
    } else {
        Ok(None)
    }
}

/// Requantizes stored values with `f` (which returns the new stored value, unsaturated).
fn requantize<A: crate::kernels::Quantized, B: crate::kernels::Quantized>(
    input: &[A],
    out: &mut [B],
    f: impl Fn(i32) -> i32,
) {
    for (o, &x) in out.iter_mut().zip(input) {
        *o = B::saturate(f(x.get()));
    }
}

fn bias_i32<'b>(ins: &Ins<'b>) -> Result<Option<&'b [i32]>> {
    if ins.has(2) {
        Ok(Some(ins.typed::<i32>(2)?))
    } else {
        Ok(None)
    }
}

/// Runs a DEQUANTIZE kind over raw input bytes (also used for constants in `new`).
fn dequantize(kind: &Kind, input: &[u8], out: &mut [f32]) -> core::result::Result<(), String> {
    let bad = || String::from("input data is misaligned or has the wrong size");
    match kind {
        Kind::Quantize(Quantize::DequantizeF16) => {
            let i: &[u16] = bytemuck::try_cast_slice(input).map_err(|_| bad())?;
            for (o, &h) in out.iter_mut().zip(i) {
                *o = so::f16_to_f32(h);
            }
        }
        Kind::Quantize(Quantize::DequantizeAffine {
            scale,
            zero_point,
            from,
        }) => {
            // reference_ops::Dequantize: static_cast<float>(double scale * (q - zp)). For 8- and
            // 16-bit values the double product is exact, so rounding it to float equals the
            // float product (one rounding of the exact value), without double arithmetic.
            let f = |q: i64| (q - zero_point) as f32 * *scale;
            match from {
                DType::I8 => out
                    .iter_mut()
                    .zip(input)
                    .for_each(|(o, &q)| *o = f(i64::from(q as i8))),
                DType::I16 => {
                    let i: &[i16] = bytemuck::try_cast_slice(input).map_err(|_| bad())?;
                    out.iter_mut()
                        .zip(i)
                        .for_each(|(o, &q)| *o = f(i64::from(q)))
                }
                _ => out
                    .iter_mut()
                    .zip(input)
                    .for_each(|(o, &q)| *o = f(i64::from(q))),
            }
        }
        Kind::Quantize(Quantize::DequantizePerChannel {
            scales,
            zero_points,
            channels,
            inner,
            from,
        }) => {
            // reference_ops::PerChannelDequantize: float (q - zp) * scale.
            let (channels, inner) = (*channels, (*inner).max(1));
            let f = |i: usize, q: i32| {
                let c = (i / inner) % channels.max(1);
                (q - zero_points[c]) as f32 * scales[c]
            };
            match from {
                DType::I8 => out
                    .iter_mut()
                    .zip(input)
                    .enumerate()
                    .for_each(|(i, (o, &q))| *o = f(i, i32::from(q as i8))),
                DType::I16 => {
                    let v: &[i16] = bytemuck::try_cast_slice(input).map_err(|_| bad())?;
                    out.iter_mut()
                        .zip(v)
                        .enumerate()
                        .for_each(|(i, (o, &q))| *o = f(i, i32::from(q)))
                }
                _ => out
                    .iter_mut()
                    .zip(input)
                    .enumerate()
                    .for_each(|(i, (o, &q))| *o = f(i, i32::from(q))),
            }
        }
        _ => return Err("not a DEQUANTIZE".into()),
    }
    Ok(())
}

/// One output of TOPK_V2: the values (`indices` false) or the int32 indices.
fn run_topk(
    ins: &Ins<'_>,
    n: usize,
    k: usize,
    dtype: DType,
    order: &mut [u32],
    out: &mut [u8],
    indices: bool,
) -> Result<()> {
    macro_rules! go {
        ($t:ty) => {{
            let x = ins.typed::<$t>(0)?;
            if indices {
                cmp::topk(x, n, k, order, None, Some(cast_out::<i32>(out)?));
            } else {
                cmp::topk(x, n, k, order, Some(cast_out::<$t>(out)?), None);
            }
        }};
    }
    match dtype {
        DType::F32 => go!(f32),
        DType::I32 => go!(i32),
        DType::I64 => go!(i64),
        DType::I8 => go!(i8),
        _ => go!(u8),
    }
    Ok(())
}
