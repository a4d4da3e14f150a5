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

pub(crate) mod arena;
mod compiled;
mod io;
#[cfg(all(
    feature = "ops-reduce",
    feature = "ops-elementwise",
    feature = "ops-float"
))]
mod layer_norm;
mod preparation;
mod state;

use crate::error::format;
use crate::kernels::shape_ops as so;
use crate::model::op_err;
use crate::ops::shape::Shape;
use alloc::vec;
use alloc::vec::Vec;
use arena::{charge, fold_pads, try_vec, Arena, ConstCopies};
use compiled::{compiled_in, types_compiled_in};
pub use io::{TensorMut, TensorRef};
use preparation::prepare;
use state::Store;
pub use state::DEFAULT_MAX_WHILE_ITERATIONS;

use crate::error::{Error, Result};
use crate::kernels::simd::{self, FastScratch, Isa, Workers};
use crate::model::{Model, OpDesc, TensorDesc};
use crate::ops::buffers::{by_size, cast_out, split_io, Ins, Loc, Scratch};
use crate::ops::compare::{run_topk, Compare};
use crate::ops::fast::{run_fast, Fast};
use crate::ops::quantize::{dequantize_values, Quantize};
use crate::ops::{prepare_op, Kind};

/// The most memory [`Interpreter::new`] allocates for one model: the activation arena, the
/// prepacked constants and the kernels' scratch together. A file can claim large activation
/// shapes without carrying any data, so this, not the file size, bounds what it can make us
/// allocate; beyond it preparing fails with [`Error::InvalidModel`] before allocating anything.
pub const MAX_MEMORY_BYTES: usize = 1 << 31;

pub(crate) struct Prepared {
    pub(crate) index: usize,
    pub(crate) kind: Kind,
    /// Weights pre-packed for a SIMD kernel, when the operator has one on this CPU.
    pub(crate) fast: Option<Fast>,
    /// The tensor read as input 0 instead of the operator's: a convolution that does the work
    /// of the PAD before it reads the PAD's input ([`PadFold`]).
    pub(crate) input0: Option<usize>,
    /// A PAD folded into the convolution reading it: [`Interpreter::invoke`] skips it
    /// ([`Interpreter::invoke_observed`] still runs it, for its output's value).
    pub(crate) folded: bool,
    /// An operator of a LayerNorm chain whose last operator does its work
    /// ([`layer_norm`]): [`Interpreter::invoke`] skips it ([`Interpreter::invoke_observed`]
    /// runs it).
    #[cfg(all(
        feature = "ops-reduce",
        feature = "ops-elementwise",
        feature = "ops-float"
    ))]
    pub(crate) fused_away: bool,
    /// The LayerNorm chain this operator ends, which [`Interpreter::invoke`] runs in its place.
    #[cfg(all(
        feature = "ops-reduce",
        feature = "ops-elementwise",
        feature = "ops-float"
    ))]
    pub(crate) layer_norm: Option<alloc::boxed::Box<layer_norm::LayerNormChain>>,
}

/// How an [`Interpreter`] is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Instruction set of the fast kernels (`Isa::Portable`: the reference kernels only).
    /// Defaults to [`Isa::detect`], or to the `LITERUN_ISA` environment variable (`portable`,
    /// `avx2`, `avx-vnni`, `avx512-vnni`, `avx512-amx`, `neon`, `neon-dot`) when set and available.
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
                Isa::Avx512Amx,
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

/// The model an [`Interpreter`] runs: the application's, or one of its own: the application's
/// with new input shapes ([`Interpreter::resize_input`]), or a subgraph a CALL_ONCE runs.
enum ModelRef<'m> {
    File(&'m Model<'m>),
    #[cfg(any(feature = "dynamic-shapes", feature = "ops-variables"))]
    Owned(alloc::boxed::Box<Model<'m>>),
}

impl<'m> core::ops::Deref for ModelRef<'m> {
    type Target = Model<'m>;
    fn deref(&self) -> &Model<'m> {
        match self {
            ModelRef::File(m) => m,
            #[cfg(any(feature = "dynamic-shapes", feature = "ops-variables"))]
            ModelRef::Owned(m) => m,
        }
    }
}

/// What preparing a model gives, apart from its arena.
struct Parts {
    locs: Vec<Loc>,
    ops: Vec<Prepared>,
    packed: Vec<u128>,
    packed_bytes: usize,
    scratch: Scratch,
    isa: Isa,
    /// The plan's arena size.
    arena_bytes: usize,
    /// Bytes allocated so far (charged against [`MAX_MEMORY_BYTES`]).
    memory: usize,
}

/// Runs a model. Create with [`Interpreter::new`], fill inputs, [`invoke`](Interpreter::invoke),
/// read outputs.
pub struct Interpreter<'m> {
    model: ModelRef<'m>,
    /// For preparing again after a resize.
    #[cfg_attr(not(feature = "dynamic-shapes"), allow(dead_code))]
    options: Options,
    arena: Arena<'m>,
    arena_bytes: usize,
    locs: Vec<Loc>,
    ops: Vec<Prepared>,
    packed: Vec<u128>,
    packed_bytes: usize,
    scratch: Scratch,
    isa: Isa,
    /// The values of the model's resource variables (feature `ops-variables`).
    variables: Store<'m>,
    /// The subgraphs this one's CALL_ONCE operators run.
    #[cfg(feature = "ops-variables")]
    calls: Vec<state::Call<'m>>,
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
    /// nothing, but for a model with resource variables, each variable's buffer at its first
    /// assignment (the subgraphs CALL_ONCE runs get arenas of their own, allocated here).
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
        done: Option<&mut dyn FnMut(&'m [u8])>,
    ) -> Result<Interpreter<'m>> {
        let (model, parts) = match prepare(model, options, done) {
            Ok(parts) => (ModelRef::File(model), parts),
            Err(e) => {
                // A model whose file shapes after shape arithmetic (SHAPE → ... → RESHAPE) are
                // placeholders: its shapes computed from the input shapes.
                #[cfg(feature = "dynamic-shapes")]
                if model
                    .operators()
                    .iter()
                    .any(|op| op.code == crate::schema::BuiltinOperator::SHAPE)
                {
                    if let Ok(computed) = model.resized_inputs(&[]) {
                        let computed = alloc::boxed::Box::new(computed);
                        if let Ok(parts) = prepare(&computed, options, None) {
                            return Self::finish(ModelRef::Owned(computed), parts, options, arena);
                        }
                    }
                }
                return Err(e);
            }
        };
        Self::finish(model, parts, options, arena)
    }

    fn finish(
        model: ModelRef<'m>,
        mut parts: Parts,
        options: Options,
        arena: Option<&'m mut [u8]>,
    ) -> Result<Interpreter<'m>> {
        let total = parts.arena_bytes;
        let arena = match arena {
            Some(buf) => {
                // Any buffer works: the arena starts at its first 16-byte aligned byte, so an
                // unaligned one needs up to 15 bytes more than the plan.
                let skip = buf.as_ptr().align_offset(crate::plan::ARENA_ALIGN);
                let given = buf.len();
                // With resizing the whole buffer is kept, to grow into.
                let end = if cfg!(feature = "dynamic-shapes") {
                    given
                } else {
                    skip.saturating_add(total)
                };
                match buf.get_mut(skip..end).filter(|b| b.len() >= total) {
                    Some(aligned) => Arena::Borrowed {
                        buf: aligned,
                        used: total,
                    },
                    None => {
                        return Err(Error::InvalidModel(format!(
                            "the arena given has {given} bytes; the model needs {total} ({} \
                             with this buffer's alignment)",
                            total + skip
                        )))
                    }
                }
            }
            None => {
                charge(&mut parts.memory, Some(total), "activation arena")?;
                Arena::Owned {
                    words: try_vec(total.div_ceil(16))?,
                    used: total,
                }
            }
        };
        #[cfg(feature = "ops-variables")]
        let memory = parts.memory;
        #[allow(unused_mut)]
        let mut it = Interpreter {
            model,
            options,
            arena,
            arena_bytes: total,
            locs: parts.locs,
            ops: parts.ops,
            packed: parts.packed,
            packed_bytes: parts.packed_bytes,
            scratch: parts.scratch,
            isa: parts.isa,
            variables: Store::default(),
            #[cfg(feature = "ops-variables")]
            calls: Vec::new(),
        };
        #[cfg(feature = "ops-variables")]
        {
            let mut store = Store::default();
            store.memory = memory;
            it.prepare_state(&mut store)?;
            it.variables = store;
        }
        Ok(it)
    }

    /// Gives input `i` the shape `dims` and prepares the model again for it (LiteRT's
    /// `resize_tensor_input` followed by `allocate_tensors`): the shapes of the tensors after
    /// it are recomputed, every operator is checked again, and the arena is planned again. Only
    /// dimensions the input's `shape_signature` marks -1 may change
    /// ([`TensorDesc::shape_signature`](crate::model::TensorDesc::shape_signature)). An arena the
    /// application lent must hold the new plan; an owned one grows when it needs to. On error
    /// the interpreter is unchanged. Inputs must be written again afterwards.
    #[cfg(feature = "dynamic-shapes")]
    pub fn resize_input(&mut self, i: usize, dims: &[usize]) -> Result<()> {
        self.resize_inputs(&[(i, dims)])
    }

    /// [`resize_input`](Self::resize_input) for several inputs at once (inputs an operator
    /// needs the same size, e.g. two batch dimensions, must change together).
    #[cfg(feature = "dynamic-shapes")]
    pub fn resize_inputs(&mut self, new: &[(usize, &[usize])]) -> Result<()> {
        let resized = alloc::boxed::Box::new(self.model.resized_inputs(new)?);
        let mut parts = prepare(&resized, self.options, None)?;
        let threads = self.threads();
        self.arena.fit(parts.arena_bytes, &mut parts.memory)?;
        #[cfg(feature = "ops-variables")]
        crate::ops::variables::bind_handles(
            &resized,
            &mut parts.ops.iter_mut().map(|p| (p.index, &mut p.kind)),
            &mut self.variables,
        )?;
        self.model = ModelRef::Owned(resized);
        self.arena_bytes = parts.arena_bytes;
        self.locs = parts.locs;
        self.ops = parts.ops;
        self.packed = parts.packed;
        self.packed_bytes = parts.packed_bytes;
        self.scratch = parts.scratch;
        self.isa = parts.isa;
        self.add_thread_scratch(threads)
    }
}

impl<'m> Interpreter<'m> {
    /// The model being run (with the new input shapes after
    /// [`resize_input`](Self::resize_input)).
    pub fn model(&self) -> &Model<'m> {
        &self.model
    }

    /// Runs the convolution, dense and depthwise kernels on `n` threads (feature `threads`):
    /// each such operator big enough to gain splits its output rows into one contiguous block
    /// per thread, so results are identical to one thread. Allocates `n - 1` more kernel
    /// scratch buffers; the first such operator starts `n - 1` worker threads, which then
    /// wait between operators and invokes (spinning briefly, then asleep) and stop when the
    /// interpreter is dropped. An app arena's no-allocation guarantee is for one thread.
    #[cfg(feature = "threads")]
    pub fn with_threads(mut self, n: usize) -> Result<Self> {
        self.add_thread_scratch(n)?;
        Ok(self)
    }

    /// Kernel scratch for `n` threads: copies of the first thread's.
    #[cfg_attr(
        not(any(feature = "threads", feature = "dynamic-shapes")),
        allow(dead_code)
    )]
    fn add_thread_scratch(&mut self, n: usize) -> Result<()> {
        let first = self
            .scratch
            .fast
            .scratch()
            .first()
            .map_or((0, 0, 0), |s| (s.i8s.len(), s.i32s.len(), s.f32s.len()));
        let mut scratch = Vec::with_capacity(n.max(1));
        for _ in 0..n.max(1) {
            scratch.push(FastScratch {
                i8s: try_vec(first.0)?,
                i32s: try_vec(first.1)?,
                f32s: try_vec(first.2)?,
            });
        }
        self.scratch.fast = Workers::new(scratch);
        #[cfg(feature = "threads")]
        self.scratch.fast.set_isa(self.isa.vector());
        Ok(())
    }

    /// Threads the kernels may use (1 unless [`Interpreter::with_threads`]).
    pub fn threads(&self) -> usize {
        self.scratch.fast.scratch().len().max(1)
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

    /// Runs all operators.
    pub fn invoke(&mut self) -> Result<()> {
        let mut store = state::take_for_invoke(&mut self.variables);
        let r = self.invoke_with(&mut store);
        self.variables = store;
        r
    }

    /// [`invoke`](Self::invoke) with the variables in `store` (the top interpreter's, for the
    /// subgraph a CALL_ONCE runs).
    fn invoke_with(&mut self, store: &mut Store<'m>) -> Result<()> {
        self.invoke_timed_with(store, &mut |_| {})
    }

    /// Runs the operators like [`invoke`](Self::invoke), calling `f(op_index)` after each
    /// operator that runs (a PAD folded into the convolution after it does not run and is not
    /// reported). For timing operators.
    pub fn invoke_timed(&mut self, f: &mut dyn FnMut(usize)) -> Result<()> {
        let mut store = state::take_for_invoke(&mut self.variables);
        let r = self.invoke_timed_with(&mut store, f);
        self.variables = store;
        r
    }

    fn invoke_timed_with(&mut self, store: &mut Store<'m>, f: &mut dyn FnMut(usize)) -> Result<()> {
        let arena = self.arena.bytes_mut();
        let packed = bytemuck::cast_slice::<u128, u8>(&self.packed);
        let tensors = self.model.tensors();
        let ops = self.model.operators();
        for p in self.ops.iter().filter(|p| !p.folded) {
            #[cfg(all(
                feature = "ops-reduce",
                feature = "ops-elementwise",
                feature = "ops-float"
            ))]
            {
                if p.fused_away {
                    continue;
                }
                if let Some(chain) = &p.layer_norm {
                    let row = &mut self.scratch.f32s;
                    layer_norm::run_layer_norm(
                        chain,
                        p,
                        &self.model,
                        &self.locs,
                        arena,
                        packed,
                        row,
                    )?;
                    f(p.index);
                    continue;
                }
            }
            let op = &ops[p.index];
            run_prepared(
                p,
                op,
                tensors,
                &self.locs,
                arena,
                packed,
                &mut self.scratch,
                Vars {
                    store: &mut *store,
                    #[cfg(feature = "ops-variables")]
                    calls: &mut self.calls,
                },
            )?;
            f(p.index);
        }
        Ok(())
    }

    /// How many PAD operators are folded into the convolution reading them (not run by
    /// [`invoke`](Self::invoke)).
    pub fn folded_pads(&self) -> usize {
        self.ops.iter().filter(|p| p.folded).count()
    }

    /// How many LayerNorm chains (MEAN ... RSQRT ... MUL, ADD) [`invoke`](Self::invoke) runs
    /// as one pass per row (0 in builds without the `ops-reduce`, `ops-elementwise` and
    /// `ops-float` features).
    pub fn fused_layer_norms(&self) -> usize {
        #[cfg(all(
            feature = "ops-reduce",
            feature = "ops-elementwise",
            feature = "ops-float"
        ))]
        return self.ops.iter().filter(|p| p.layer_norm.is_some()).count();
        #[cfg(not(all(
            feature = "ops-reduce",
            feature = "ops-elementwise",
            feature = "ops-float"
        )))]
        0
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
        let mut store = state::take_for_invoke(&mut self.variables);
        let r = self.invoke_observed_with(&mut store, f);
        self.variables = store;
        r
    }

    fn invoke_observed_with(
        &mut self,
        store: &mut Store<'m>,
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
                run_prepared(
                    p,
                    op,
                    tensors,
                    &self.locs,
                    arena,
                    packed,
                    &mut self.scratch,
                    Vars {
                        store: &mut *store,
                        #[cfg(feature = "ops-variables")]
                        calls: &mut self.calls,
                    },
                )?;
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

/// What variable operators run with: the interpreter's variables and (with `ops-variables`)
/// its CALL_ONCE subgraphs.
struct Vars<'a, 'm> {
    #[cfg_attr(not(feature = "ops-variables"), allow(dead_code))]
    store: &'a mut Store<'m>,
    #[cfg(feature = "ops-variables")]
    calls: &'a mut [state::Call<'m>],
}

/// Runs prepared operator `p`: a variable operator with `vars`, any other with its kernel.
#[allow(clippy::too_many_arguments)]
fn run_prepared<'b>(
    p: &'b Prepared,
    op: &'b OpDesc<'b>,
    tensors: &'b [TensorDesc<'b>],
    locs: &'b [Loc],
    arena: &'b mut [u8],
    packed: &'b [u8],
    scratch: &mut Scratch,
    vars: Vars<'_, '_>,
) -> Result<()> {
    #[cfg(feature = "ops-variables")]
    if let Kind::Variables(v) = &p.kind {
        let Vars { store, calls } = vars;
        return state::run_variable_op(v, p.index, op, tensors, locs, arena, packed, store, calls);
    }
    #[cfg(not(feature = "ops-variables"))]
    let _ = vars;
    run_op(p, op, tensors, locs, arena, packed, scratch)
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

/// Runs a single-output operator reading `ins`, writing `out`: with its pre-packed weights when
/// it has them, else with its family's portable kernel.
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
    p.kind.run(p.index, op, ins, out, scratch)
}
