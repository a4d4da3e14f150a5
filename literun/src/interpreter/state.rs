//! What an interpreter keeps between invocations: the values of the model's resource variables
//! and whether each CALL_ONCE has run (feature `ops-variables`).

use super::Interpreter;
#[cfg(feature = "ops-variables")]
use super::{arena::charge, prepare, Arena, ModelRef, Options};
#[cfg(feature = "ops-variables")]
use crate::error::{format, Result};
#[cfg(feature = "ops-variables")]
use crate::model::{op_err, DType, OpDesc, TensorDesc};
#[cfg(feature = "ops-variables")]
use crate::ops::buffers::Loc;
#[cfg(feature = "ops-variables")]
use crate::ops::variables::{self, bind_handles, VariableStore, Variables};
#[cfg(feature = "ops-variables")]
use crate::ops::Kind;
#[cfg(feature = "ops-variables")]
use alloc::boxed::Box;
#[cfg(feature = "ops-variables")]
use alloc::string::String;
#[cfg(feature = "ops-variables")]
use alloc::vec::Vec;

/// The variables' values: shared by the interpreter and the subgraphs its CALL_ONCEs run.
#[cfg(feature = "ops-variables")]
pub(crate) type Store<'m> = VariableStore<'m>;
#[cfg(not(feature = "ops-variables"))]
pub(crate) type Store<'m> = core::marker::PhantomData<&'m ()>;

/// The passes of WHILE bodies one invoke may run unless the application sets another limit
/// ([`Interpreter::set_max_while_iterations`]).
pub const DEFAULT_MAX_WHILE_ITERATIONS: u64 = 1_000_000;

/// Takes the interpreter's store for one top-level invoke: no WHILE pass counted yet.
pub(super) fn take_for_invoke<'m>(store: &mut Store<'m>) -> Store<'m> {
    #[allow(unused_mut)]
    let mut s = core::mem::take(store);
    #[cfg(feature = "ops-variables")]
    {
        s.while_iterations = 0;
    }
    s
}

/// The subgraphs a CALL_ONCE, IF or WHILE operator runs, prepared (in the operator's order of
/// subgraph indices), and whether a CALL_ONCE has run.
#[cfg(feature = "ops-variables")]
pub(crate) struct Call<'m> {
    /// The operator's index.
    op: usize,
    interpreters: Vec<Interpreter<'m>>,
    done: bool,
}

impl Interpreter<'_> {
    /// Restores the model's state to what it was before the first [`invoke`](Self::invoke)
    /// (LiteRT's `reset_all_variables`): every resource variable forgets its value and the next
    /// invoke runs the CALL_ONCE initialisation again, so a streaming model starts its sequence
    /// over; the states of UNIDIRECTIONAL_SEQUENCE_LSTM and SVDF operators (TFLite's variable
    /// tensors) go back to their initial values. The buffers are kept (nothing is freed or
    /// allocated). Does nothing for a model without state.
    pub fn reset_variables(&mut self) {
        self.reset_sequences();
        #[cfg(feature = "ops-variables")]
        {
            self.variables.reset();
            self.reset_calls();
        }
    }

    /// Restores the state the sequence operators (LSTM, SVDF) hold.
    fn reset_sequences(&self) {
        #[cfg(feature = "ops-sequence")]
        for p in &self.ops {
            if let crate::ops::Kind::Sequence(s) = &p.kind {
                s.reset();
            }
        }
    }

    /// Sets the most passes of WHILE bodies one [`invoke`](Self::invoke) may run, all WHILE
    /// operators together (nested ones included); one more fails the invoke with an error
    /// naming the WHILE operator. TFLite has no such limit, but a file whose loop condition
    /// never turns false would otherwise keep `invoke` from returning. Default
    /// [`DEFAULT_MAX_WHILE_ITERATIONS`](crate::DEFAULT_MAX_WHILE_ITERATIONS) (1,000,000).
    /// Without the `ops-variables` feature (no WHILE) it does nothing.
    pub fn set_max_while_iterations(&mut self, n: u64) {
        #[cfg(feature = "ops-variables")]
        {
            self.variables.max_while_iterations = n;
        }
        #[cfg(not(feature = "ops-variables"))]
        let _ = n;
    }

    /// The most passes of WHILE bodies one invoke may run
    /// ([`set_max_while_iterations`](Self::set_max_while_iterations)).
    pub fn max_while_iterations(&self) -> u64 {
        #[cfg(feature = "ops-variables")]
        return self.variables.max_while_iterations;
        #[cfg(not(feature = "ops-variables"))]
        crate::DEFAULT_MAX_WHILE_ITERATIONS
    }

    /// How many resource variables the model has (0 without the `ops-variables` feature).
    pub fn variable_count(&self) -> usize {
        #[cfg(feature = "ops-variables")]
        return self.variables.len();
        #[cfg(not(feature = "ops-variables"))]
        0
    }
}

#[cfg(feature = "ops-variables")]
impl<'m> Interpreter<'m> {
    fn reset_calls(&mut self) {
        for c in &mut self.calls {
            c.done = false;
            for it in &mut c.interpreters {
                it.reset_sequences();
                it.reset_calls();
            }
        }
    }

    /// Gives this interpreter's VAR_HANDLEs their variables in `store` and prepares the
    /// subgraphs its CALL_ONCEs run, with their own arenas (the model checked that no subgraph
    /// calls itself, so this ends).
    pub(super) fn prepare_state(&mut self, store: &mut Store<'m>) -> Result<()> {
        bind_handles(
            &self.model,
            &mut self.ops.iter_mut().map(|p| (p.index, &mut p.kind)),
            store,
        )?;
        let mut calls = Vec::new();
        for p in &self.ops {
            let Kind::Variables(v) = &p.kind else {
                continue;
            };
            let op = &self.model.operators()[p.index];
            let mut interpreters = Vec::new();
            for subgraph in v.subgraphs() {
                // Each subgraph is called from one place (a subgraph called from several would
                // be prepared once per call, and calls can double at each level).
                store.subgraphs += 1;
                if store.subgraphs >= self.model.subgraph_count() {
                    return Err(op_err(
                        p.index,
                        op,
                        "more subgraph calls than subgraphs: a subgraph run by several is not \
                         supported",
                    ));
                }
                let model = Box::new(self.model.subgraph_model(subgraph)?);
                let mut interpreter = Interpreter::for_subgraph(model, self.options, store)?;
                interpreter.prepare_state(store)?;
                interpreters.push(interpreter);
            }
            if !interpreters.is_empty() {
                check_call_io(p.index, op, self.model.tensors(), v, &interpreters)?;
                calls.push(Call {
                    op: p.index,
                    interpreters,
                    done: false,
                });
            }
        }
        self.calls = calls;
        Ok(())
    }

    /// An interpreter for a subgraph a CALL_ONCE runs, in an arena of its own.
    /// Its memory is charged to `store.memory`, with the top interpreter's.
    fn for_subgraph(
        model: Box<Model<'m>>,
        options: Options,
        store: &mut Store<'m>,
    ) -> Result<Interpreter<'m>> {
        let mut parts = prepare(&model, options, None)?;
        let mut arena = Arena::Owned {
            words: Vec::new(),
            used: 0,
        };
        arena.fit(parts.arena_bytes, &mut parts.memory)?;
        charge(&mut store.memory, Some(parts.memory), "subgraphs")?;
        Ok(Interpreter {
            model: ModelRef::Owned(model),
            options,
            arena,
            arena_bytes: parts.arena_bytes,
            locs: parts.locs,
            ops: parts.ops,
            packed: parts.packed,
            packed_bytes: parts.packed_bytes,
            scratch: parts.scratch,
            isa: parts.isa,
            variables: Store::default(),
            calls: Vec::new(),
        })
    }
}

#[cfg(feature = "ops-variables")]
use crate::model::Model;

/// Runs a variable operator, or a CALL_ONCE: its subgraph, with the same variables, the first
/// time only.
#[cfg(feature = "ops-variables")]
#[allow(clippy::too_many_arguments)]
pub(super) fn run_variable_op<'m>(
    v: &Variables,
    index: usize,
    op: &OpDesc<'_>,
    tensors: &[TensorDesc<'_>],
    locs: &[Loc],
    arena: &mut [u8],
    packed: &[u8],
    store: &mut Store<'m>,
    calls: &mut [Call<'m>],
) -> Result<()> {
    if matches!(
        v,
        Variables::Handle { .. } | Variables::Read | Variables::Assign
    ) {
        return variables::run(v, index, op, tensors, locs, arena, packed, store);
    }
    let call = calls
        .iter_mut()
        .find(|c| c.op == index)
        .ok_or_else(|| op_err(index, op, "subgraph not prepared"))?;
    match v {
        Variables::CallOnce { .. } => {
            if !call.done {
                if let Some(it) = call.interpreters.first_mut() {
                    it.invoke_with(store)?;
                }
                call.done = true;
            }
            Ok(())
        }
        Variables::If { .. } => {
            let cond = op.inputs.first().copied().flatten().unwrap_or(usize::MAX);
            let taken = variables::bytes_of(cond, tensors, locs, arena, packed)
                .first()
                .is_some_and(|&b| b != 0);
            let it = &mut call.interpreters[usize::from(!taken)];
            set_inputs(it, &op.inputs[1..], tensors, locs, arena, packed)?;
            it.invoke_with(store)?;
            get_outputs(it, &op.outputs, locs, arena)
        }
        Variables::While { .. } => {
            // The loop's values: the inputs, then each pass's body outputs, copied from one
            // subgraph's arena to the other's (the interpreters check they have equal sizes).
            let (cond, body) = call.interpreters.split_at_mut(1);
            let (cond, body) = (&mut cond[0], &mut body[0]);
            set_inputs(cond, &op.inputs, tensors, locs, arena, packed)?;
            set_inputs(body, &op.inputs, tensors, locs, arena, packed)?;
            loop {
                cond.invoke_with(store)?;
                if cond.output(0)?.bytes().first().is_none_or(|&b| b == 0) {
                    break;
                }
                if store.while_iterations >= store.max_while_iterations {
                    return Err(op_err(
                        index,
                        op,
                        format!(
                            "more than {} loop iterations in one invoke \
                             (Interpreter::set_max_while_iterations)",
                            store.max_while_iterations
                        ),
                    ));
                }
                store.while_iterations += 1;
                body.invoke_with(store)?;
                // Through the condition's inputs (no allocation while invoking). Every output
                // is read before any input is written: the body's plan may give an output the
                // memory of an input it no longer reads.
                for k in 0..op.inputs.len() {
                    copy(cond.input_mut(k)?.bytes_mut(), body.output(k)?.bytes())?;
                }
                for k in 0..op.inputs.len() {
                    let t = cond.model().inputs()[k].tensor;
                    copy(body.input_mut(k)?.bytes_mut(), cond.tensor(t)?.bytes())?;
                }
            }
            // The values after the last pass are the body's inputs, written after its last run
            // (the operator's inputs when it never ran); the condition's may have been reused
            // for its own intermediate values since.
            for (k, &o) in op.outputs.iter().enumerate() {
                if let Some(out) = out_bytes(o, locs, arena)? {
                    let t = body.model().inputs()[k].tensor;
                    copy(out, body.tensor(t)?.bytes())?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The arena bytes of output tensor `t`; `None` for an output nothing reads (no memory).
#[cfg(feature = "ops-variables")]
fn out_bytes<'b>(t: usize, locs: &[Loc], arena: &'b mut [u8]) -> Result<Option<&'b mut [u8]>> {
    match locs.get(t) {
        Some(&Loc::Arena { off, len }) => arena
            .get_mut(off..off + len)
            .map(Some)
            .ok_or_else(|| crate::error::invalid!("tensor {t} is outside the arena")),
        Some(Loc::Empty) => Ok(None),
        _ => Err(crate::error::invalid!("tensor {t} is not in the arena")),
    }
}

/// `dst` gets `src`, which must have its size.
#[cfg(feature = "ops-variables")]
fn copy(dst: &mut [u8], src: &[u8]) -> Result<()> {
    if dst.len() != src.len() {
        return Err(crate::error::invalid!(
            "a subgraph value has {} bytes where {} are expected",
            src.len(),
            dst.len()
        ));
    }
    dst.copy_from_slice(src);
    Ok(())
}

/// Copies tensors `from` of the calling graph into the inputs of subgraph interpreter `it`.
#[cfg(feature = "ops-variables")]
fn set_inputs(
    it: &mut Interpreter<'_>,
    from: &[Option<usize>],
    tensors: &[TensorDesc<'_>],
    locs: &[Loc],
    arena: &[u8],
    packed: &[u8],
) -> Result<()> {
    // Every input of IF and WHILE is required (the operator table), so none is omitted.
    for (k, &t) in from.iter().enumerate() {
        let t = t.unwrap_or(usize::MAX);
        let value = variables::bytes_of(t, tensors, locs, arena, packed);
        copy(it.input_mut(k)?.bytes_mut(), value)?;
    }
    Ok(())
}

/// Copies the outputs of subgraph interpreter `it` into tensors `to` of the calling graph.
#[cfg(feature = "ops-variables")]
fn get_outputs(it: &Interpreter<'_>, to: &[usize], locs: &[Loc], arena: &mut [u8]) -> Result<()> {
    for (j, &t) in to.iter().enumerate() {
        if let Some(out) = out_bytes(t, locs, arena)? {
            copy(out, it.output(j)?.bytes())?;
        }
    }
    Ok(())
}

/// Checks that the subgraphs an IF or WHILE runs take and give exactly the operator's values
/// (same count, types and sizes: shapes are static), and that a WHILE's condition gives one
/// BOOL. A CALL_ONCE's subgraph takes and gives nothing.
#[cfg(feature = "ops-variables")]
fn check_call_io(
    index: usize,
    op: &OpDesc<'_>,
    tensors: &[TensorDesc<'_>],
    v: &Variables,
    subs: &[Interpreter<'_>],
) -> Result<()> {
    let err = |m: String| op_err(index, op, m);
    let desc = |ts: &[usize]| -> Vec<(DType, usize)> {
        ts.iter()
            .map(|&t| (tensors[t].dtype, tensors[t].bytes))
            .collect()
    };
    let io = |it: &Interpreter<'_>, outputs: bool| -> Vec<(DType, usize)> {
        let m = it.model();
        let list = if outputs { m.outputs() } else { m.inputs() };
        list.iter()
            .map(|i| (m.tensors()[i.tensor].dtype, m.tensors()[i.tensor].bytes))
            .collect()
    };
    let ins: Vec<usize> = op.inputs.iter().flatten().copied().collect();
    let (values_in, values_out) = match v {
        Variables::If { .. } => (desc(&ins[1..]), desc(&op.outputs)),
        Variables::While { .. } => (desc(&ins), desc(&op.outputs)),
        _ => return Ok(()),
    };
    for (k, it) in subs.iter().enumerate() {
        let is_cond = matches!(v, Variables::While { .. }) && k == 0;
        let want_out = if is_cond {
            alloc::vec![(DType::Bool, 1)]
        } else {
            values_out.clone()
        };
        if io(it, false) != values_in || io(it, true) != want_out {
            return Err(err(format!(
                "subgraph {k} of the call takes {:?} and gives {:?}; the operator has {:?} and \
                 needs {:?}",
                io(it, false),
                io(it, true),
                values_in,
                want_out
            )));
        }
    }
    Ok(())
}
