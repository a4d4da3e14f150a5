//! Resource variables and CALL_ONCE: the state a streaming model keeps between invocations;
//! IF and WHILE, which run other subgraphs as CALL_ONCE does.
//!
//! VAR_HANDLE gives a RESOURCE tensor naming a variable by `(container, shared_name)` (as
//! LiteRT keys them: every handle with the same pair is the same variable, in any subgraph);
//! ASSIGN_VARIABLE stores a tensor's value in it, READ_VARIABLE copies the value out. The values
//! live in the interpreter's [`VariableStore`], outside the arena, so they persist across
//! `invoke`. CALL_ONCE runs another subgraph (the one TensorFlow's converter writes to give the
//! variables their initial values) on the first invoke only. A variable's buffer is allocated at
//! its first assignment, sized for that value; later assignments must have the same type and
//! size, so invoking allocates nothing after the first time.
// Without `error-details`, values only error messages mention are unused.
#![cfg_attr(not(feature = "error-details"), allow(unused_variables))]

use super::buffers::Loc;
use super::context::Ctx;
use super::Kind;
use crate::error::{format, Result};
use crate::interpreter::arena::{charge, try_vec};
use crate::model::{called_subgraphs, op_err, DType, Model, OpDesc, TensorDesc};
use crate::schema::BuiltinOperator as B;
use alloc::vec::Vec;

/// The `builtin_options_type` of VAR_HANDLE's options (`VarHandleOptions`).
const VAR_HANDLE_OPTIONS: u8 = 111;
/// `VarHandleOptions.container` and `.shared_name`.
const VT_CONTAINER: u16 = 4;
const VT_SHARED_NAME: u16 = 6;

/// A prepared variable operator.
#[derive(Debug)]
pub(crate) enum Variables {
    /// VAR_HANDLE: writes the id of variable `slot` of the [`VariableStore`] (bound when the
    /// interpreter is built, [`bind_handles`]).
    Handle { slot: usize },
    /// READ_VARIABLE: the variable's value into the output.
    Read,
    /// ASSIGN_VARIABLE: input 1's value into the variable.
    Assign,
    /// CALL_ONCE: runs subgraph `subgraph` on the first invoke.
    CallOnce { subgraph: usize },
    /// IF: runs subgraph `then` on inputs `1..` when input 0 is true, `otherwise` when false.
    If { then: usize, otherwise: usize },
    /// WHILE: runs subgraph `body` on the values (the inputs, then the body's outputs) as long
    /// as subgraph `cond` gives true for them.
    While { cond: usize, body: usize },
}

impl Variables {
    /// The subgraphs this operator runs (prepared with their own arenas by the interpreter).
    pub(crate) fn subgraphs(&self) -> Vec<usize> {
        match *self {
            Variables::CallOnce { subgraph } => alloc::vec![subgraph],
            Variables::If { then, otherwise } => alloc::vec![then, otherwise],
            Variables::While { cond, body } => alloc::vec![cond, body],
            _ => Vec::new(),
        }
    }
}

/// Prepares a variable operator: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    let resource = |t: &TensorDesc<'_>, what: &str| {
        if t.dtype == DType::Resource {
            Ok(())
        } else {
            Err(c.err(format!("{what} is {}, expected RESOURCE", t.dtype.name())))
        }
    };
    let v = match code {
        B::VAR_HANDLE => {
            resource(c.output(0)?, "output")?;
            handle_key(c.op).map_err(|e| c.err(e))?;
            Variables::Handle { slot: usize::MAX }
        }
        B::READ_VARIABLE => {
            resource(c.input(0)?, "input 0")?;
            let o = c.output(0)?;
            if matches!(o.dtype, DType::Resource | DType::F16) {
                return Err(c.err(format!("cannot read a {} variable", o.dtype.name())));
            }
            Variables::Read
        }
        B::ASSIGN_VARIABLE => {
            resource(c.input(0)?, "input 0")?;
            let v = c.input(1)?;
            if matches!(v.dtype, DType::Resource | DType::F16) {
                return Err(c.err(format!("cannot assign a {} value", v.dtype.name())));
            }
            Variables::Assign
        }
        // The model checked the indices and that no subgraph calls itself; the interpreter
        // checks the subgraphs' inputs and outputs against the operator's.
        B::CALL_ONCE | B::IF | B::WHILE => {
            let to = called_subgraphs(c.op, usize::MAX).map_err(|e| c.err(e))?;
            match (code, &to[..]) {
                (B::CALL_ONCE, &[subgraph]) => Variables::CallOnce { subgraph },
                (B::IF, &[then, otherwise]) => {
                    let cond = c.input(0)?;
                    if cond.dtype != DType::Bool || cond.elements != 1 {
                        return Err(c.err("the condition (input 0) must be one BOOL"));
                    }
                    Variables::If { then, otherwise }
                }
                (B::WHILE, &[cond, body]) => {
                    if c.op.inputs.len() != c.op.outputs.len() {
                        return Err(c.err("WHILE needs as many outputs as inputs"));
                    }
                    Variables::While { cond, body }
                }
                _ => return Err(c.err("malformed subgraph indices")),
            }
        }
        _ => return Err(c.err("not a variable operator")),
    };
    Ok(Kind::Variables(v))
}

/// The `(container, shared_name)` of a VAR_HANDLE (empty strings when absent, as in LiteRT).
fn handle_key<'m>(op: &OpDesc<'m>) -> core::result::Result<(&'m str, &'m str), &'static str> {
    match (op.options_type, op.options) {
        (0, _) | (_, None) => Ok(("", "")),
        (VAR_HANDLE_OPTIONS, Some(t)) => Ok((
            t.str(VT_CONTAINER)?.unwrap_or(""),
            t.str(VT_SHARED_NAME)?.unwrap_or(""),
        )),
        _ => Err("builtin options are not VarHandleOptions"),
    }
}

/// A variable's value: its buffer is sized at the first assignment and kept (also across
/// [`VariableStore::reset`]).
#[derive(Debug, Default)]
struct Variable {
    dtype: Option<DType>,
    data: Vec<u8>,
    assigned: bool,
}

/// The variables of a model, by `(container, shared_name)`, with their values; and what the
/// interpreter and the subgraphs it runs share while invoking.
#[derive(Debug)]
pub(crate) struct VariableStore<'m> {
    keys: Vec<(&'m str, &'m str)>,
    values: Vec<Variable>,
    /// Bytes the interpreter, the subgraphs its CALL_ONCEs run and the variables' buffers
    /// allocated together, charged against [`MAX_MEMORY_BYTES`](crate::MAX_MEMORY_BYTES).
    pub(crate) memory: usize,
    /// Interpreters prepared for subgraphs CALL_ONCE runs.
    pub(crate) subgraphs: usize,
    /// The most passes of WHILE bodies one invoke may run (all WHILE operators together,
    /// those in subgraphs included).
    pub(crate) max_while_iterations: u64,
    /// Passes of WHILE bodies run in this invoke so far.
    pub(crate) while_iterations: u64,
}

impl Default for VariableStore<'_> {
    fn default() -> Self {
        VariableStore {
            keys: Vec::new(),
            values: Vec::new(),
            memory: 0,
            subgraphs: 0,
            max_while_iterations: crate::DEFAULT_MAX_WHILE_ITERATIONS,
            while_iterations: 0,
        }
    }
}

impl<'m> VariableStore<'m> {
    /// The slot of variable `key`, added when new.
    fn slot(&mut self, key: (&'m str, &'m str)) -> usize {
        if let Some(i) = self.keys.iter().position(|k| *k == key) {
            return i;
        }
        self.keys.push(key);
        self.values.push(Variable::default());
        self.keys.len() - 1
    }

    /// Forgets every value (buffers are kept for the next assignments).
    pub(crate) fn reset(&mut self) {
        for v in &mut self.values {
            v.assigned = false;
        }
    }

    /// How many variables the model has.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

/// Gives each VAR_HANDLE of `model`'s prepared operators its variable's slot in `store`.
pub(crate) fn bind_handles<'m>(
    model: &Model<'m>,
    kinds: &mut dyn Iterator<Item = (usize, &mut Kind)>,
    store: &mut VariableStore<'m>,
) -> Result<()> {
    for (index, kind) in kinds {
        if let Kind::Variables(Variables::Handle { slot }) = kind {
            let op = &model.operators()[index];
            *slot = store.slot(handle_key(op).map_err(|e| op_err(index, op, e))?);
        }
    }
    Ok(())
}

/// The bytes of tensor `t`: the arena's, the file's or the prepacked ones.
pub(crate) fn bytes_of<'b>(
    t: usize,
    tensors: &'b [TensorDesc<'b>],
    locs: &[Loc],
    arena: &'b [u8],
    packed: &'b [u8],
) -> &'b [u8] {
    match locs.get(t) {
        Some(&Loc::Arena { off, len }) => arena.get(off..off + len).unwrap_or(&[]),
        Some(&Loc::Packed { off, len }) => packed.get(off..off + len).unwrap_or(&[]),
        Some(Loc::Const) => tensors.get(t).and_then(|d| d.data).unwrap_or(&[]),
        _ => &[],
    }
}

/// The variable slot a RESOURCE tensor holds.
fn slot_of(bytes: &[u8], store: &VariableStore<'_>) -> Option<usize> {
    let id = i32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    usize::try_from(id).ok().filter(|&s| s < store.values.len())
}

/// Runs VAR_HANDLE, READ_VARIABLE or ASSIGN_VARIABLE (CALL_ONCE is run by the interpreter).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    v: &Variables,
    index: usize,
    op: &OpDesc<'_>,
    tensors: &[TensorDesc<'_>],
    locs: &[Loc],
    arena: &mut [u8],
    packed: &[u8],
    store: &mut VariableStore<'_>,
) -> Result<()> {
    let err = |m: &str| op_err(index, op, m);
    let out_range = |j: usize| match op.outputs.get(j).and_then(|&o| locs.get(o)) {
        Some(&Loc::Arena { off, len }) => Some(off..off + len),
        _ => None,
    };
    let handle = |arena: &[u8], store: &VariableStore<'_>| {
        let t = op.inputs.first().copied().flatten().unwrap_or(usize::MAX);
        slot_of(bytes_of(t, tensors, locs, arena, packed), store)
            .ok_or_else(|| err("input 0 is not a variable handle"))
    };
    match v {
        Variables::Handle { slot } => {
            let id = i32::try_from(*slot).map_err(|_| err("variable not bound"))?;
            let out = out_range(0)
                .and_then(|r| arena.get_mut(r))
                .filter(|o| o.len() == 4)
                .ok_or_else(|| err("handle output is not 4 bytes"))?;
            out.copy_from_slice(&id.to_le_bytes());
        }
        Variables::Read => {
            let slot = handle(arena, store)?;
            let var = &store.values[slot];
            if !var.assigned {
                return Err(err(&format!(
                    "reads variable {:?} before it is assigned",
                    store.keys[slot].1
                )));
            }
            let o = op.outputs.first().and_then(|&o| tensors.get(o));
            if var.dtype != o.map(|d| d.dtype) {
                return Err(err("output type differs from the variable's"));
            }
            let out = out_range(0)
                .and_then(|r| arena.get_mut(r))
                .unwrap_or(&mut []);
            if out.len() != var.data.len() {
                return Err(err(&format!(
                    "output holds {} bytes, the variable {}",
                    out.len(),
                    var.data.len()
                )));
            }
            out.copy_from_slice(&var.data);
        }
        Variables::Assign => {
            let slot = handle(arena, store)?;
            let t = op.inputs.get(1).copied().flatten().unwrap_or(usize::MAX);
            let dtype = tensors.get(t).map(|d| d.dtype);
            let value = bytes_of(t, tensors, locs, arena, packed);
            let VariableStore { values, memory, .. } = store;
            let var = &mut values[slot];
            match var.dtype {
                None => {
                    charge(memory, Some(value.len()), "variables")?;
                    var.data = try_vec::<u8>(value.len())?;
                    var.dtype = dtype;
                }
                Some(_) if var.dtype != dtype || var.data.len() != value.len() => {
                    return Err(err(&format!(
                        "assigns {} bytes of {}, the variable holds {} bytes of {}",
                        value.len(),
                        dtype.map_or("?", DType::name),
                        var.data.len(),
                        var.dtype.map_or("?", DType::name)
                    )));
                }
                Some(_) => {}
            }
            var.data.copy_from_slice(value);
            var.assigned = true;
        }
        Variables::CallOnce { .. } | Variables::If { .. } | Variables::While { .. } => {
            return Err(err("subgraph calls run in the interpreter"))
        }
    }
    Ok(())
}
