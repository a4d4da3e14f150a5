//! The activation arena: which tensors need memory and for how long, the memory plan (literun's
//! own or the one stored in the file), PADs folded into convolutions, and the memory budget.
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

use super::{Prepared, MAX_MEMORY_BYTES};
use crate::error::format;
use crate::model::{op_err, Model};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::ops::conv::{fold_pad, pad_folds, PadFold};
use crate::plan::{plan_arena, TensorUse};

/// Adds `bytes` (or an overflow, `None`) to the running total `used`, failing past
/// [`MAX_MEMORY_BYTES`].
pub(crate) fn charge(used: &mut usize, bytes: Option<usize>, what: &str) -> Result<()> {
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
pub(crate) fn try_vec<T: Clone + Default>(n: usize) -> Result<Vec<T>> {
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

/// Which constants the kernels read at run time, and which only while preparing (copied into
/// the interpreter's own layout): for [`Interpreter::with_options_releasing`], and to keep a
/// dequantized constant only when something reads it as it is.
pub(crate) struct ConstCopies<'r, 'm> {
    pub(crate) model: &'r Model<'m>,
    /// Per tensor: readers that have not been prepared yet.
    pub(crate) pending: Vec<usize>,
    /// Per tensor: some reader reads it at run time.
    pub(crate) read: Vec<bool>,
}

impl<'r, 'm> ConstCopies<'r, 'm> {
    pub(crate) fn new(model: &'r Model<'m>) -> Self {
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
    pub(crate) fn copied(
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

/// Per tensor: its lifetime if it needs arena memory (non-constant, used, non-empty, and not a
/// DEQUANTIZE of a constant, which is computed once at load time). The input of each PAD in
/// `folds` stays alive until the convolution that reads it in the PAD's place, and the PAD's
/// output needs no memory.
pub(crate) fn arena_uses(model: &Model<'_>, folds: &[PadFold]) -> Vec<Option<TensorUse>> {
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
pub(crate) fn planned_uses(uses: &[Option<TensorUse>]) -> (Vec<usize>, Vec<TensorUse>) {
    let planned: Vec<usize> = (0..uses.len()).filter(|&t| uses[t].is_some()).collect();
    let list = planned.iter().filter_map(|&t| uses[t]).collect();
    (planned, list)
}

impl Model<'_> {
    /// The stored `OfflineMemoryAllocation` offsets (TFLite Micro's layout), if the file has
    /// them; `Err` if they are malformed. Always `None` without the `offline-plan` feature.
    pub fn stored_plan(&self) -> Result<Option<Vec<i32>>> {
        // Without the `offline-plan` feature stored plans are ignored (literun plans its own).
        // A resized model's tensors are not the sizes the stored plan was made for.
        // It plans subgraph 0 only.
        if !cfg!(feature = "offline-plan") || self.is_resized() || self.subgraph_index() != 0 {
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
pub(crate) fn fold_pads(
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
pub(crate) fn stored_plan_keeps(
    uses: &[Option<TensorUse>],
    offsets: &[Option<usize>],
    f: &PadFold,
) -> bool {
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

/// The activation arena: owned, or lent by the application (from its first 16-byte aligned
/// byte); `used` bytes of it are the current plan's.
pub(super) enum Arena<'m> {
    Owned { words: Vec<u128>, used: usize },
    Borrowed { buf: &'m mut [u8], used: usize },
}

impl Arena<'_> {
    // Without resizing, the arena is exactly the plan's (an owned one rounded up to 16 bytes):
    // no `used` to slice by on every access, which small devices pay for in code size.
    #[cfg(feature = "dynamic-shapes")]
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Arena::Owned { words, used } => &bytemuck::cast_slice(words)[..*used],
            Arena::Borrowed { buf, used } => &buf[..*used],
        }
    }
    #[cfg(feature = "dynamic-shapes")]
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Arena::Owned { words, used } => &mut bytemuck::cast_slice_mut(words)[..*used],
            Arena::Borrowed { buf, used } => &mut buf[..*used],
        }
    }
    #[cfg(not(feature = "dynamic-shapes"))]
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Arena::Owned { words, .. } => bytemuck::cast_slice(words),
            Arena::Borrowed { buf, .. } => buf,
        }
    }
    #[cfg(not(feature = "dynamic-shapes"))]
    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Arena::Owned { words, .. } => bytemuck::cast_slice_mut(words),
            Arena::Borrowed { buf, .. } => buf,
        }
    }

    /// Makes room for a plan of `total` bytes: a lent arena must already hold it; an owned one
    /// grows (charged to `memory`). Nothing changes on error.
    #[cfg(any(feature = "dynamic-shapes", feature = "ops-variables"))]
    pub(super) fn fit(&mut self, total: usize, memory: &mut usize) -> Result<()> {
        match self {
            Arena::Borrowed { buf, used } => {
                if buf.len() < total {
                    return Err(Error::InvalidModel(format!(
                        "the arena given has {} aligned bytes; the model needs {total}",
                        buf.len()
                    )));
                }
                *used = total;
            }
            Arena::Owned { words, used } => {
                charge(memory, Some(total), "activation arena")?;
                if words.len() * 16 < total {
                    *words = try_vec(total.div_ceil(16))?;
                }
                *used = total;
            }
        }
        Ok(())
    }
}
