//! Reading one subgraph of a model: its tensors, inputs, outputs and operators, verified.
// Without `error-details`, values only error messages mention are unused.
#![cfg_attr(not(feature = "error-details"), allow(unused_variables))]

use super::rawfb::RawTable;
use super::{
    element_count, index, op_name, read_quant, registry, DType, OpDesc, Quant, TensorDesc,
    MAX_RANK, MAX_TENSOR_BYTES,
};
use crate::error::format;
use crate::error::{invalid, Error, Result, UnsupportedOp};
use crate::schema;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

/// The tensors, operators and input/output tensor indices of one subgraph.
#[derive(Clone, Debug)]
pub(crate) struct Subgraph<'a> {
    pub(crate) tensors: Vec<TensorDesc<'a>>,
    pub(crate) ops: Vec<OpDesc<'a>>,
    pub(crate) in_ids: Vec<usize>,
    pub(crate) out_ids: Vec<usize>,
}

/// Reads and verifies subgraph `sg` of `root`: every tensor's type, shape, buffer and
/// quantization, every index in range, every operator supported (by this build) with its
/// input and output counts, no tensor read before it is written or written twice.
#[cfg_attr(not(feature = "ops-variables"), inline(always))]
pub(crate) fn read_subgraph<'a>(
    root: schema::Model<'a>,
    sg: schema::SubGraph<'a>,
) -> Result<Subgraph<'a>> {
    let buffers = root.buffers();
    let nbuf = buffers.map_or(0, |b| b.len());

    // Tensors.
    let mut tensors = Vec::new();
    if let Some(ts) = sg.tensors() {
        for (ti, t) in ts.iter().enumerate() {
            let name = t.name().unwrap_or("");
            // Built without `core::fmt`: the same text in every build.
            let ti_ = crate::error::decimal(ti as i64);
            let ctx =
                |m: String| Error::InvalidModel(["tensor ", &ti_, " '", name, "': ", &m].concat());
            let dtype = DType::from_tflite(t.type_()).ok_or_else(|| {
                ctx(format!(
                    "unsupported type {}",
                    t.type_().variant_name().unwrap_or("UNKNOWN")
                ))
            })?;
            // Presence only (the lean verifier does not follow the offset).
            if t._tab.vtable().get(schema::Tensor::VT_SPARSITY) != 0 {
                return Err(ctx("sparse tensors are not supported".into()));
            }
            let mut shape = Vec::new();
            if let Some(s) = t.shape() {
                if s.len() > MAX_RANK {
                    return Err(ctx(format!("rank {} exceeds {MAX_RANK}", s.len())));
                }
                for d in s.iter() {
                    let d = usize::try_from(d).map_err(|_| {
                        ctx(format!(
                            "negative dimension {d} (dynamic shapes are not supported)"
                        ))
                    })?;
                    shape.push(d);
                }
            }
            let elements = element_count(&shape)
                .filter(|&n| {
                    n.checked_mul(dtype.size())
                        .is_some_and(|b| b <= MAX_TENSOR_BYTES)
                })
                .ok_or_else(|| ctx(format!("shape {shape:?} is too large")))?;
            let nbytes = elements * dtype.size();
            let bi = t.buffer() as usize;
            if bi >= nbuf && bi != 0 {
                return Err(ctx(format!("buffer index {bi} out of range (0..{nbuf})")));
            }
            let mut data = None;
            if let Some(buffers) = buffers.filter(|_| bi < nbuf) {
                let b = buffers.get(bi);
                if b.offset() > 1 {
                    return Err(ctx(
                        "external buffer data (offset/size) is not supported".into()
                    ));
                }
                if let Some(d) = b.data() {
                    let d = d.bytes();
                    if !d.is_empty() {
                        if d.len() != nbytes {
                            return Err(ctx(format!(
                                "buffer {bi} holds {} bytes, shape {shape:?} x {} needs {nbytes}",
                                d.len(),
                                dtype.name()
                            )));
                        }
                        let align = dtype.size();
                        if (d.as_ptr() as usize) & (align - 1) != 0 {
                            return Err(Error::Misaligned);
                        }
                        data = Some(d);
                    }
                }
            }
            let qparams = match t.quantization() {
                Some(q) => read_quant(q, dtype, &shape).map_err(ctx)?,
                None => None,
            };
            let quant = qparams
                .as_ref()
                .filter(|q| q.is_per_tensor())
                .map(|q| Quant {
                    scale: q.scales[0],
                    zero_point: q.zero_points[0],
                });
            #[cfg(feature = "dynamic-shapes")]
            let shape_signature = t.shape_signature().map(|v| v.iter().collect());
            tensors.push(TensorDesc {
                name,
                shape,
                dtype,
                elements,
                bytes: nbytes,
                data,
                #[cfg(feature = "dynamic-shapes")]
                shape_signature,
                quant,
                qparams,
                // Only the sequence operators keep state; builds without them (the
                // firmware) skip reading the flag and refuse such files as before.
                variable: cfg!(feature = "ops-sequence") && t.is_variable(),
            });
        }
    }
    let nt = tensors.len();

    // Inputs and outputs.
    let read_list = |v: Option<flatbuffers::Vector<'a, i32>>, what: &str| -> Result<Vec<usize>> {
        v.map_or(Ok(Vec::new()), |v| {
            v.iter().map(|i| index(i64::from(i), nt, what)).collect()
        })
    };
    let in_ids = read_list(sg.inputs(), "subgraph input tensor")?;
    let out_ids = read_list(sg.outputs(), "subgraph output tensor")?;
    for &i in &in_ids {
        if tensors[i].data.is_some() {
            return Err(invalid!(
                "model input tensor {i} '{}' is constant",
                tensors[i].name
            ));
        }
    }

    // Operators.
    let codes = root.operator_codes();
    let ncodes = codes.map_or(0, |c| c.len());
    let mut ops = Vec::new();
    let mut unsupported = Vec::new();
    let mut produced = vec![false; nt];
    for &i in &in_ids {
        produced[i] = true;
    }
    // Variable tensors hold state from before the first operator runs.
    #[cfg(feature = "ops-sequence")]
    for (p, t) in produced.iter_mut().zip(&tensors) {
        *p |= t.variable;
    }
    if let Some(sops) = sg.operators() {
        for (oi, op) in sops.iter().enumerate() {
            let ci = index(i64::from(op.opcode_index()), ncodes, "operator code")
                .map_err(|e| invalid!("operator #{oi}: {e}"))?;
            let oc = codes.ok_or_else(|| invalid!("no operator codes"))?.get(ci);
            let code = schema::BuiltinOperator(
                oc.builtin_code()
                    .0
                    .max(i32::from(oc.deprecated_builtin_code())),
            );
            let name = if code == schema::BuiltinOperator::CUSTOM {
                ["CUSTOM(", oc.custom_code().unwrap_or(""), ")"].concat()
            } else {
                op_name(code)
            };
            let oi_ = crate::error::decimal(oi as i64);
            let err = |m: String| {
                Error::InvalidModel(["operator #", &oi_, " (", &name, "): ", &m].concat())
            };
            let mut inputs = Vec::new();
            if let Some(v) = op.inputs() {
                for i in v.iter() {
                    inputs.push(if i == -1 {
                        None
                    } else {
                        Some(
                            index(i64::from(i), nt, "input tensor")
                                .map_err(|e| err(e.to_string()))?,
                        )
                    });
                }
            }
            let mut outputs = Vec::new();
            if let Some(v) = op.outputs() {
                for i in v.iter() {
                    outputs.push(
                        index(i64::from(i), nt, "output tensor").map_err(|e| err(e.to_string()))?,
                    );
                }
            }
            for &i in inputs.iter().flatten() {
                let t = &tensors[i];
                if t.data.is_none() && !produced[i] && t.elements != 0 {
                    return Err(err(format!(
                        "reads tensor {i} '{}' before any operator writes it",
                        t.name
                    )));
                }
            }
            for &o in &outputs {
                if tensors[o].data.is_some() {
                    return Err(err(format!("writes constant tensor {o}")));
                }
                if produced[o] {
                    return Err(err(format!(
                        "writes tensor {o} '{}', which is a model input or already written",
                        tensors[o].name
                    )));
                }
                produced[o] = true;
            }
            let compiled_out = registry::missing_feature(code);
            match registry::compiled_arity(code) {
                None => unsupported.push(UnsupportedOp {
                    index: oi,
                    op: match compiled_out {
                        Some(f) => [name.as_str(), " (feature ", f, " is off)"].concat(),
                        None => name.clone(),
                    },
                }),
                Some(a) => {
                    if !a.inputs.contains(&inputs.len()) || !a.outputs.contains(&outputs.len()) {
                        return Err(err(format!(
                            "has {} inputs and {} outputs (expected {:?} and {:?})",
                            inputs.len(),
                            outputs.len(),
                            a.inputs,
                            a.outputs
                        )));
                    }
                    for (k, i) in inputs.iter().enumerate() {
                        if i.is_none() && k < a.required_inputs {
                            return Err(err(format!("required input {k} is omitted")));
                        }
                    }
                }
            }
            // Intermediate tensors carry quantization parameters only (the integer LSTM's
            // gate and hidden scales); nothing reads or writes their data.
            #[cfg(feature = "ops-sequence")]
            let mut intermediates = Vec::new();
            #[cfg(feature = "ops-sequence")]
            if let Some(v) = op.intermediates() {
                for i in v.iter() {
                    intermediates.push(
                        index(i64::from(i), nt, "intermediate tensor")
                            .map_err(|e| err(e.to_string()))?,
                    );
                }
            }
            let options = match op.builtin_options_type().0 {
                0 => None,
                _ => RawTable::new(op._tab.buf(), op._tab.loc())
                    .and_then(|t| t.table(schema::Operator::VT_BUILTIN_OPTIONS))
                    .map_err(|e| err(format!("malformed builtin options: {e}")))?,
            };
            ops.push(OpDesc {
                code,
                inputs,
                outputs,
                options_type: op.builtin_options_type().0,
                options,
                #[cfg(feature = "ops-sequence")]
                intermediates,
            });
        }
    }
    if !unsupported.is_empty() {
        return Err(Error::Unsupported(unsupported));
    }
    for &o in &out_ids {
        let t = &tensors[o];
        if !produced[o] && t.data.is_none() && t.elements != 0 {
            return Err(invalid!(
                "model output tensor {o} '{}' is never written",
                t.name
            ));
        }
    }
    Ok(Subgraph {
        tensors,
        ops,
        in_ids,
        out_ids,
    })
}

/// The `builtin_options_type` of CALL_ONCE's, IF's and WHILE's options (`CallOnceOptions`,
/// `IfOptions`, `WhileOptions`).
#[cfg(feature = "ops-variables")]
pub(crate) const CALL_ONCE_OPTIONS: u8 = 103;
#[cfg(feature = "ops-variables")]
pub(crate) const IF_OPTIONS: u8 = 92;
#[cfg(feature = "ops-variables")]
pub(crate) const WHILE_OPTIONS: u8 = 93;

/// The subgraphs an operator runs, each checked to be one of the `count` subgraphs of the file:
/// CALL_ONCE's `init_subgraph_index`; IF's `then_subgraph_index`, `else_subgraph_index`;
/// WHILE's `cond_subgraph_index`, `body_subgraph_index`; none for other operators.
#[cfg(feature = "ops-variables")]
pub(crate) fn called_subgraphs(
    op: &OpDesc<'_>,
    count: usize,
) -> core::result::Result<Vec<usize>, String> {
    let (options, fields): (u8, &[(u16, &str)]) = match op.code {
        schema::BuiltinOperator::CALL_ONCE => (CALL_ONCE_OPTIONS, &[(4, "init subgraph")]),
        schema::BuiltinOperator::IF => (IF_OPTIONS, &[(4, "then subgraph"), (6, "else subgraph")]),
        schema::BuiltinOperator::WHILE => {
            (WHILE_OPTIONS, &[(4, "cond subgraph"), (6, "body subgraph")])
        }
        _ => return Ok(Vec::new()),
    };
    let table = match (op.options_type, op.options) {
        (t, Some(table)) if t == options => table,
        _ => return Err(format!("has no {}Options", op.name())),
    };
    let mut to = Vec::new();
    for &(field, what) in fields {
        let k = table
            .i32(field, 0)
            .map_err(|e| format!("malformed options: {e}"))?;
        to.push(index(i64::from(k), count, what).map_err(|e| e.to_string())?);
    }
    Ok(to)
}

/// Reads and verifies subgraphs `1..` of the file and checks the calls between all of them:
/// every CALL_ONCE names a subgraph of the file, and no subgraph calls itself, directly or
/// through others (running it would never end).
#[cfg(feature = "ops-variables")]
pub(crate) fn read_called_subgraphs<'a>(
    root: schema::Model<'a>,
    all: flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<schema::SubGraph<'a>>>,
    main_ops: &[OpDesc<'a>],
) -> Result<Vec<Subgraph<'a>>> {
    let count = all.len();
    let mut others = Vec::new();
    for k in 1..count {
        let sg = read_subgraph(root, all.get(k)).map_err(|e| match e {
            Error::InvalidModel(m) => Error::InvalidModel(
                ["subgraph ", &crate::error::decimal(k as i64), ": ", &m].concat(),
            ),
            other => other,
        })?;
        others.push(sg);
    }
    // The calls of each subgraph, then a depth-first search for a cycle.
    let mut calls: Vec<Vec<usize>> = Vec::with_capacity(count);
    for (k, ops) in core::iter::once(main_ops)
        .chain(others.iter().map(|s| &s.ops[..]))
        .enumerate()
    {
        let mut to = Vec::new();
        for (oi, op) in ops.iter().enumerate() {
            to.extend(
                called_subgraphs(op, count)
                    .map_err(|m| invalid!("subgraph {k}, operator #{oi} ({}): {m}", op.name()))?,
            );
        }
        calls.push(to);
    }
    // 0: not visited, 1: on the current path, 2: done.
    let mut state = vec![0u8; count];
    for start in 0..count {
        if state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some(&mut (k, ref mut next)) = stack.last_mut() {
            if let Some(&to) = calls[k].get(*next) {
                *next += 1;
                match state[to] {
                    0 => {
                        state[to] = 1;
                        stack.push((to, 0));
                    }
                    1 => {
                        return Err(invalid!(
                            "subgraph {to} calls itself (a cycle of subgraph calls)"
                        ))
                    }
                    _ => {}
                }
            } else {
                state[k] = 2;
                stack.pop();
            }
        }
    }
    Ok(others)
}
