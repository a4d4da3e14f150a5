//! What an interpreter keeps between invocations: the values of the model's resource variables
//! and whether each CALL_ONCE has run (feature `ops-variables`).

use super::Interpreter;
#[cfg(feature = "ops-variables")]
use super::{arena::charge, prepare, Arena, ModelRef, Options};
#[cfg(feature = "ops-variables")]
use crate::error::Result;
#[cfg(feature = "ops-variables")]
use crate::model::{op_err, OpDesc, TensorDesc};
#[cfg(feature = "ops-variables")]
use crate::ops::buffers::Loc;
#[cfg(feature = "ops-variables")]
use crate::ops::variables::{self, bind_handles, VariableStore, Variables};
#[cfg(feature = "ops-variables")]
use crate::ops::Kind;
#[cfg(feature = "ops-variables")]
use alloc::boxed::Box;
#[cfg(feature = "ops-variables")]
use alloc::vec::Vec;

/// The variables' values: shared by the interpreter and the subgraphs its CALL_ONCEs run.
#[cfg(feature = "ops-variables")]
pub(crate) type Store<'m> = VariableStore<'m>;
#[cfg(not(feature = "ops-variables"))]
pub(crate) type Store<'m> = core::marker::PhantomData<&'m ()>;

/// A subgraph a CALL_ONCE operator runs, prepared, and whether it has run.
#[cfg(feature = "ops-variables")]
pub(crate) struct Call<'m> {
    /// The CALL_ONCE operator's index.
    op: usize,
    interpreter: Interpreter<'m>,
    done: bool,
}

impl Interpreter<'_> {
    /// Restores the model's state to what it was before the first [`invoke`](Self::invoke)
    /// (LiteRT's `reset_all_variables`): every resource variable forgets its value and the next
    /// invoke runs the CALL_ONCE initialisation again, so a streaming model starts its sequence
    /// over. The variables' buffers are kept (nothing is freed or allocated). Does nothing for
    /// a model without variables.
    pub fn reset_variables(&mut self) {
        #[cfg(feature = "ops-variables")]
        {
            self.variables.reset();
            self.reset_calls();
        }
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
            c.interpreter.reset_calls();
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
            if let Kind::Variables(Variables::CallOnce { subgraph }) = p.kind {
                // Each subgraph is called from one place (a subgraph called from several would
                // be prepared once per call, and calls can double at each level).
                store.subgraphs += 1;
                if store.subgraphs >= self.model.subgraph_count() {
                    return Err(op_err(
                        p.index,
                        &self.model.operators()[p.index],
                        "more CALL_ONCEs than subgraphs: a subgraph run by several is not supported",
                    ));
                }
                let model = Box::new(self.model.subgraph_model(subgraph)?);
                let mut interpreter = Interpreter::for_subgraph(model, self.options, store)?;
                interpreter.prepare_state(store)?;
                calls.push(Call {
                    op: p.index,
                    interpreter,
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
    if let Variables::CallOnce { .. } = v {
        let call = calls
            .iter_mut()
            .find(|c| c.op == index)
            .ok_or_else(|| op_err(index, op, "subgraph not prepared"))?;
        if !call.done {
            call.interpreter.invoke_with(store)?;
            call.done = true;
        }
        return Ok(());
    }
    variables::run(v, index, op, tensors, locs, arena, packed, store)
}
