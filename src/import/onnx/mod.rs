//! ONNX protobuf → IR: graph plumbing (inputs, topological order, constants, outputs) and one
//! small function per ONNX op that validates its attributes and builds our `Op`.
//!
//! Nodes whose inputs are all constant are evaluated right away (`ir::eval`), which folds the
//! shape subgraphs PyTorch exports. Unsupported ops are collected and reported all at once.

use super::fold;
#[path = "../qdq.rs"]
mod qdq;
#[path = "../recurrent.rs"]
mod recurrent;
use super::proto::{
    cast_dtype, checked_elements, decode_tensor, dim_value, dim_values, norm_axis, runtime_dtype,
    size_value, size_values, Attrs,
};
use super::ImportOptions;
use crate::ir::{
    eval, shape, Activation, BinaryOp, ConstData, DType, Graph, Layout, Node, Op, PadMode,
    PoolKind, ReduceOp, ResizeCoords, ResizeMode, TensorId, UnaryOp,
};
use anyhow::{anyhow, bail, Result};
use prost::Message;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use tract_onnx::pb::{GraphProto, ModelProto, NodeProto, TensorProto};

/// Why a node could not be imported.
enum Fail {
    /// Valid ONNX that we cannot express: collected and reported together.
    Unsupported(String),
    /// A malformed model (or one we refuse outright): reported at once.
    Error(String),
}

impl From<String> for Fail {
    fn from(s: String) -> Self {
        Fail::Error(s)
    }
}

type R<T> = std::result::Result<T, Fail>;

fn unsup<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail::Unsupported(msg.into()))
}

fn bad<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail::Error(msg.into()))
}

/// The error for unsupported nodes: their count, a summary by op type when there are several,
/// then each node with the reason (at most `MAX_LISTED_PER_OP` per op type).
fn unsupported_message(file: &str, list: &[(String, String)], unchecked: usize) -> String {
    const MAX_LISTED_PER_OP: usize = 3;
    let n = list.len();
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (op, _) in list {
        match counts.iter_mut().find(|(o, _)| o == op) {
            Some(c) => c.1 += 1,
            None => counts.push((op, 1)),
        }
    }
    let mut msg = format!(
        "{file}: {n} unsupported op{}",
        if n == 1 { "" } else { "s" }
    );
    if n > 1 {
        let summary: Vec<String> = counts.iter().map(|(o, c)| format!("{o}×{c}")).collect();
        msg.push_str(&format!(" ({})", summary.join(", ")));
    }
    msg.push_str(": ");
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for (op, detail) in list {
        let k = match seen.iter_mut().find(|(o, _)| o == op) {
            Some(c) => {
                c.1 += 1;
                c.1
            }
            None => {
                seen.push((op, 1));
                1
            }
        };
        if k <= MAX_LISTED_PER_OP {
            parts.push(detail.clone());
        }
    }
    for (op, c) in &counts {
        if *c > MAX_LISTED_PER_OP {
            parts.push(format!("{} more {op}", c - MAX_LISTED_PER_OP));
        }
    }
    msg.push_str(&parts.join("; "));
    if unchecked > 0 {
        msg.push_str(&format!(
            " ({unchecked} node{} after them not checked)",
            if unchecked == 1 { "" } else { "s" }
        ));
    }
    msg
}

/// The values a node reads: its inputs, then the outer-scope values its subgraphs (If branches)
/// read, which ONNX does not list as inputs.
fn node_reads(n: &NodeProto) -> Vec<&str> {
    let mut reads: Vec<&str> = n
        .input
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.as_str())
        .collect();
    for g in subgraphs(n) {
        outer_reads(g, &mut reads);
    }
    reads
}

fn subgraphs(n: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    n.attribute
        .iter()
        .flat_map(|a| a.g.iter().chain(a.graphs.iter()))
}

/// Adds to `reads` the values `g` reads from its enclosing scopes.
fn outer_reads<'a>(g: &'a GraphProto, reads: &mut Vec<&'a str>) {
    let mut local: HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    local.extend(g.input.iter().map(|v| v.name.as_str()));
    for n in &g.node {
        local.extend(n.output.iter().map(|o| o.as_str()));
    }
    let mut inner = Vec::new();
    for n in &g.node {
        inner.extend(node_reads(n));
    }
    inner.extend(g.output.iter().map(|o| o.name.as_str()));
    for r in inner {
        if !r.is_empty() && !local.contains(r) && !reads.contains(&r) {
            reads.push(r);
        }
    }
}

/// Every value name produced inside the subgraphs of `n` (reserved like the graph's own).
fn subgraph_values(n: &NodeProto, out: &mut Vec<String>) {
    for g in subgraphs(n) {
        out.extend(g.initializer.iter().map(|t| t.name.clone()));
        for m in &g.node {
            out.extend(m.output.iter().filter(|o| !o.is_empty()).cloned());
            subgraph_values(m, out);
        }
    }
}

/// The constant a frozen input (`--input-value`) becomes: the values, or one value repeated.
fn frozen_input(
    shape: &[usize],
    dtype: DType,
    values: &[f64],
) -> std::result::Result<ConstData, String> {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = match values.len() {
        1 => vec![values[0]; n],
        len if len == n => values.to_vec(),
        len => return Err(format!("{len} values for shape {shape:?} ({n} elements)")),
    };
    let data = match dtype {
        DType::F32 | DType::F16 => {
            ConstData::from_f32(shape, values.iter().map(|&v| v as f32).collect())
        }
        DType::I64 | DType::I32 | DType::I8 | DType::I16 | DType::U8 | DType::Bool => {
            if let Some(v) = values.iter().find(|v| v.fract() != 0.0) {
                return Err(format!("{v} is not an integer, the input is {dtype:?}"));
            }
            ConstData::from_i64(shape, values.iter().map(|&v| v as i64).collect()).cast(dtype)
        }
    };
    Ok(data)
}

/// A name for a node in messages: its name, else its first output, else its op and index.
fn node_label(n: &NodeProto, idx: usize) -> String {
    if !n.name.is_empty() {
        n.name.clone()
    } else if let Some(o) = n.output.iter().find(|o| !o.is_empty()) {
        o.clone()
    } else {
        format!("{}#{idx}", n.op_type)
    }
}

pub(crate) fn import_bytes(bytes: &[u8], file: &str, opts: &ImportOptions) -> Result<Graph> {
    let model = ModelProto::decode(bytes)
        .map_err(|e| anyhow!("{file}: not a valid ONNX model (protobuf decoding failed: {e})"))?;
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| anyhow!("{file}: the model imports no default-domain (ai.onnx) opset"))?;
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| anyhow!("{file}: the model has no graph"))?;
    let functions = super::functions::local_functions(bytes).map_err(|e| anyhow!("{file}: {e}"))?;
    let inlined;
    let graph = if functions.is_empty() {
        graph
    } else {
        let mut g = graph.clone();
        super::functions::inline_calls(&mut g, &functions).map_err(|e| anyhow!("{file}: {e}"))?;
        inlined = g;
        &inlined
    };
    // onnxruntime's dynamic quantization, rewritten to float ops on dequantized weights.
    let rewritten = qdq::rewrite_dynamic(graph);
    let graph = rewritten.as_ref().unwrap_or(graph);
    // QOperator-format ops, rewritten to the equivalent QDQ graph.
    let rewritten_q = qdq::rewrite_qoperator(graph);
    let graph = rewritten_q.as_ref().unwrap_or(graph);
    let order = schedule(graph, false).map_err(|e| anyhow!("{file}: {e}"))?;
    let mut imp = Importer::new(file, opset, graph, &order);
    imp.inputs(graph, opts)?;
    for &i in &order {
        imp.run_node(&graph.node[i], i)?;
    }
    imp.finish(graph)
}

/// Checks every value is defined once, then returns the nodes the graph outputs depend on, in a
/// topological order (the file's order where it already is one). A subgraph (`nested`) may read
/// values of the enclosing graph: those are not checked here.
fn schedule(graph: &GraphProto, nested: bool) -> std::result::Result<Vec<usize>, String> {
    let mut available: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    available.extend(graph.input.iter().map(|v| v.name.as_str()));
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if available.contains(o.as_str()) {
                return Err(format!(
                    "node '{}' ({}): output '{o}' redefines a graph input or initializer",
                    node_label(n, i),
                    n.op_type
                ));
            }
            if let Some(&j) = producer.get(o.as_str()) {
                return Err(format!(
                    "value '{o}' is produced by two nodes: '{}' ({}) and '{}' ({})",
                    node_label(&graph.node[j], j),
                    graph.node[j].op_type,
                    node_label(n, i),
                    n.op_type
                ));
            }
            producer.insert(o, i);
        }
    }
    for (i, n) in graph.node.iter().enumerate() {
        for inp in node_reads(n) {
            if !nested && !available.contains(inp) && !producer.contains_key(inp) {
                return Err(format!(
                    "node '{}' ({}): input '{inp}' is not produced by any node, initializer or \
                     graph input",
                    node_label(n, i),
                    n.op_type
                ));
            }
        }
    }
    if graph.output.is_empty() {
        return Err("the graph has no outputs".into());
    }
    for o in &graph.output {
        if !nested
            && !available.contains(o.name.as_str())
            && !producer.contains_key(o.name.as_str())
        {
            return Err(format!(
                "graph output '{}' is not produced by any node",
                o.name
            ));
        }
    }
    // Nodes the outputs depend on.
    let mut live = vec![false; graph.node.len()];
    let mut stack: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    let mut seen: HashSet<&str> = HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if let Some(&p) = producer.get(v) {
            if !live[p] {
                live[p] = true;
                stack.extend(node_reads(&graph.node[p]));
            }
        }
    }
    // Kahn's algorithm, smallest index first.
    let mut indegree = vec![0usize; graph.node.len()];
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate().filter(|(i, _)| live[*i]) {
        for inp in node_reads(n) {
            if producer.contains_key(inp) {
                indegree[i] += 1;
                consumers.entry(inp).or_default().push(i);
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..graph.node.len())
        .filter(|&i| live[i] && indegree[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::new();
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for o in graph.node[i].output.iter().filter(|o| !o.is_empty()) {
            for &c in consumers
                .get(o.as_str())
                .map(|v| v.as_slice())
                .unwrap_or(&[])
            {
                indegree[c] -= 1;
                if indegree[c] == 0 {
                    ready.push(Reverse(c));
                }
            }
        }
    }
    let live_count = live.iter().filter(|&&l| l).count();
    if order.len() < live_count {
        let stuck = (0..graph.node.len())
            .find(|&i| live[i] && indegree[i] > 0)
            .unwrap_or(0);
        return Err(format!(
            "the graph has a cycle through node '{}' ({})",
            node_label(&graph.node[stuck], stuck),
            graph.node[stuck].op_type
        ));
    }
    Ok(order)
}

struct Importer<'m> {
    file: String,
    opset: i64,
    g: Graph,
    /// ONNX value name → tensor (several names may share a tensor: Identity and friends).
    values: HashMap<String, TensorId>,
    inits: HashMap<&'m str, &'m TensorProto>,
    /// Every tensor name in use or reserved (all ONNX value names are reserved up front).
    names: HashSet<String>,
    /// How many live nodes read each ONNX value.
    node_uses: HashMap<&'m str, usize>,
    graph_outputs: HashSet<&'m str>,
    /// Values produced by nodes that failed to import (their consumers are skipped).
    failed: HashSet<String>,
    /// Unsupported nodes: (op type, "'node' (Op): why").
    unsupported: Vec<(String, String)>,
    /// Nodes skipped because an input comes from an unsupported node, whose op the importer
    /// knows (so they were not checked further).
    unchecked: usize,
    /// Graph outputs dropped on purpose (training-only BatchNormalization outputs).
    dropped_outputs: HashSet<String>,
    /// The ONNX node being imported: label, for IR node names and derived tensor names.
    cur: String,
    /// QuantizeLinear/DequantizeLinear bookkeeping (`qdq.rs`).
    qdq: qdq::QdqState,
}

impl<'m> Importer<'m> {
    fn new(file: &str, opset: i64, graph: &'m GraphProto, order: &[usize]) -> Self {
        let mut names = HashSet::new();
        let mut node_uses: HashMap<&str, usize> = HashMap::new();
        for t in &graph.initializer {
            names.insert(t.name.clone());
        }
        for v in &graph.input {
            names.insert(v.name.clone());
        }
        for n in &graph.node {
            names.extend(n.output.iter().filter(|o| !o.is_empty()).cloned());
            let mut inner = Vec::new();
            subgraph_values(n, &mut inner);
            names.extend(inner);
        }
        for &i in order {
            for inp in node_reads(&graph.node[i]) {
                *node_uses.entry(inp).or_default() += 1;
            }
        }
        Importer {
            file: file.to_string(),
            opset,
            g: Graph::default(),
            values: HashMap::new(),
            inits: graph
                .initializer
                .iter()
                .map(|t| (t.name.as_str(), t))
                .collect(),
            names,
            node_uses,
            graph_outputs: graph.output.iter().map(|o| o.name.as_str()).collect(),
            failed: HashSet::new(),
            unsupported: Vec::new(),
            unchecked: 0,
            dropped_outputs: HashSet::new(),
            cur: String::new(),
            qdq: Default::default(),
        }
    }

    /// Adds the graph inputs (those that are not initializers) with static shapes.
    fn inputs(&mut self, graph: &'m GraphProto, opts: &ImportOptions) -> Result<()> {
        let file = &self.file;
        let real: Vec<&str> = graph
            .input
            .iter()
            .map(|v| v.name.as_str())
            .filter(|n| !self.inits.contains_key(n))
            .collect();
        let mut unknown: Vec<(&str, &String)> = opts
            .input_shapes
            .keys()
            .map(|k| ("--input-shape", k))
            .chain(opts.input_values.keys().map(|k| ("--input-value", k)))
            .filter(|(_, k)| !real.contains(&k.as_str()))
            .collect();
        unknown.sort();
        if let Some((flag, k)) = unknown.first() {
            bail!(
                "{file}: {flag} names '{k}', which is not an input of the model; its \
                 inputs are: {}",
                real.iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let mut seen = HashSet::new();
        for v in &graph.input {
            if self.inits.contains_key(v.name.as_str()) {
                continue;
            }
            if !seen.insert(v.name.as_str()) {
                bail!("{file}: input '{}' is listed twice", v.name);
            }
            use tract_onnx::pb::tensor_shape_proto::dimension::Value as Dim;
            use tract_onnx::pb::type_proto::Value as Ty;
            let Some(Ty::TensorType(tt)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
                bail!(
                    "{file}: input '{}' is not a tensor (or has no type)",
                    v.name
                );
            };
            let dtype = runtime_dtype(tt.elem_type)
                .map_err(|e| anyhow!("{file}: input '{}': {e}", v.name))?;
            // None = dynamic (with its symbolic name, if any).
            let dims: Option<Vec<(Option<usize>, Option<String>)>> = tt.shape.as_ref().map(|s| {
                s.dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(Dim::DimValue(x)) if *x > 0 => (usize::try_from(*x).ok(), None),
                        Some(Dim::DimParam(p)) if !p.is_empty() => (None, Some(p.clone())),
                        _ => (None, None),
                    })
                    .collect()
            });
            let given = opts.input_shapes.get(&v.name);
            let shape: Vec<usize> = match (dims, given) {
                (None, None) => bail!(
                    "{file}: input '{}' has no shape; give it with --input-shape {}=1,3,224,224",
                    v.name,
                    v.name
                ),
                (None, Some(g)) => g.clone(),
                (Some(d), Some(g)) => {
                    if d.len() != g.len() {
                        bail!(
                            "{file}: input '{}' has rank {}, but the given shape {:?} has rank {}",
                            v.name,
                            d.len(),
                            g,
                            g.len()
                        );
                    }
                    for (i, ((s, _), &x)) in d.iter().zip(g).enumerate() {
                        if let Some(s) = s {
                            if *s != x {
                                bail!(
                                    "{file}: input '{}': the given shape {:?} contradicts the \
                                     model's static dimension {i} = {s}",
                                    v.name,
                                    g
                                );
                            }
                        }
                    }
                    g.clone()
                }
                (Some(d), None) => {
                    if let Some((i, (_, p))) = d.iter().enumerate().find(|(_, (s, _))| s.is_none())
                    {
                        let example = d
                            .iter()
                            .map(|(s, _)| s.unwrap_or(1).to_string())
                            .collect::<Vec<_>>()
                            .join(",");
                        let pname = p.as_ref().map(|p| format!(" ('{p}')")).unwrap_or_default();
                        bail!(
                            "{file}: input '{}' has a dynamic dimension {i}{pname}; give its \
                             shape with --input-shape {}={example}",
                            v.name,
                            v.name
                        );
                    }
                    d.iter().map(|(s, _)| s.unwrap_or(1)).collect()
                }
            };
            if shape.contains(&0) {
                bail!(
                    "{file}: input '{}' has a zero dimension in {shape:?}",
                    v.name
                );
            }
            checked_elements(&shape).map_err(|e| anyhow!("{file}: input '{}': {e}", v.name))?;
            if let Some(values) = opts.input_values.get(&v.name) {
                let data = frozen_input(&shape, dtype, values)
                    .map_err(|e| anyhow!("{file}: --input-value {}: {e}", v.name))?;
                let id = self.g.add_const(v.name.clone(), data);
                self.values.insert(v.name.clone(), id);
                continue;
            }
            let id = self.g.add_tensor(v.name.clone(), shape, dtype);
            self.g.inputs.push(id);
            self.values.insert(v.name.clone(), id);
        }
        Ok(())
    }

    fn run_node(&mut self, n: &'m NodeProto, idx: usize) -> Result<()> {
        if n.input
            .iter()
            .any(|i| !i.is_empty() && self.failed.contains(i))
        {
            self.failed.extend(n.output.iter().cloned());
            // Probe it all the same, so that every op the importer lacks is reported at once,
            // not only the first of a chain (a dynamic-quantized model: DynamicQuantizeLinear,
            // then ConvInteger, MatMulInteger...). An op it knows fails on the missing input
            // (an error, not "unsupported") and is only counted; the conversion fails anyway,
            // so whatever the probe added to the graph is never used.
            self.cur = node_label(n, idx);
            match self.node(n) {
                Err(Fail::Unsupported(msg)) => self.unsupported.push((
                    n.op_type.clone(),
                    format!(
                        "'{}' ({}): {msg} (its input comes from an unsupported op)",
                        self.cur, n.op_type
                    ),
                )),
                _ => self.unchecked += 1,
            }
            return Ok(());
        }
        self.cur = node_label(n, idx);
        match self.node(n) {
            Ok(()) => Ok(()),
            Err(Fail::Unsupported(msg)) => {
                self.unsupported.push((
                    n.op_type.clone(),
                    format!("'{}' ({}): {msg}", self.cur, n.op_type),
                ));
                self.failed.extend(n.output.iter().cloned());
                Ok(())
            }
            Err(Fail::Error(msg)) => Err(anyhow!(
                "{}: node '{}' ({}): {msg}",
                self.file,
                self.cur,
                n.op_type
            )),
        }
    }

    fn finish(mut self, graph: &GraphProto) -> Result<Graph> {
        if self.unsupported.is_empty() {
            self.check_q_outputs(graph)?;
        }
        if !self.unsupported.is_empty() {
            bail!(
                "{}",
                unsupported_message(&self.file, &self.unsupported, self.unchecked)
            );
        }
        for o in &graph.output {
            let name = o.name.as_str();
            if self.dropped_outputs.contains(name) {
                continue;
            }
            if !self.values.contains_key(name) && self.inits.contains_key(name) {
                // An initializer listed as an output.
                let data = decode_tensor(self.inits[name])
                    .map_err(|e| anyhow!("{}: initializer {e}", self.file))?;
                let id = self.g.add_const(name.to_string(), data);
                self.values.insert(name.to_string(), id);
            }
            let id = *self
                .values
                .get(name)
                .ok_or_else(|| anyhow!("{}: graph output '{name}' was not produced", self.file))?;
            let t = &self.g.tensors[id];
            let is_input = self.g.inputs.contains(&id);
            if t.name == name && !t.is_const() {
                self.g.outputs.push(id);
                continue;
            }
            // An alias, a graph input or a constant: give the output its own tensor.
            let out_name = if t.name == name && t.is_const() {
                let renamed = self.fresh(&format!("{name}_value"));
                self.g.tensors[id].name = renamed;
                name.to_string()
            } else if t.name == name && is_input {
                self.fresh(name)
            } else {
                name.to_string()
            };
            let shape = self.g.tensors[id].shape.clone();
            let dtype = self.g.tensors[id].dtype;
            let out = self.g.add_tensor(out_name.clone(), shape.clone(), dtype);
            self.g.nodes.push(Node {
                name: out_name,
                op: Op::Reshape { shape },
                inputs: vec![id],
                outputs: vec![out],
            });
            self.g.outputs.push(out);
        }
        self.propagate_annotations();
        Ok(self.g)
    }

    // ---- plumbing ------------------------------------------------------------------------

    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut i = 1;
        while self.names.contains(&name) {
            name = format!("{base}_{i}");
            i += 1;
        }
        self.names.insert(name.clone());
        name
    }

    /// A fresh tensor name derived from the current node.
    fn tmp(&mut self, suffix: &str) -> String {
        let base = format!("{}/{suffix}", self.cur);
        self.fresh(&base)
    }

    fn used(&self, value: &str) -> bool {
        !value.is_empty()
            && (self.node_uses.get(value).copied().unwrap_or(0) > 0
                || self.graph_outputs.contains(value))
    }

    /// Input `i` of `n`, or None when absent (missing or empty name).
    fn inp(&mut self, n: &NodeProto, i: usize) -> R<Option<TensorId>> {
        let Some(name) = n.input.get(i).filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        if let Some(&id) = self.values.get(name) {
            return Ok(Some(id));
        }
        let Some(t) = self.inits.get(name.as_str()) else {
            return bad(format!("input '{name}' is not defined"));
        };
        let data = decode_tensor(t).map_err(|e| Fail::Error(format!("initializer {e}")))?;
        let id = self.g.add_const(name.clone(), data);
        self.values.insert(name.clone(), id);
        Ok(Some(id))
    }

    fn req(&mut self, n: &NodeProto, i: usize, what: &str) -> R<TensorId> {
        match self.inp(n, i)? {
            Some(id) => Ok(id),
            None => bad(format!("missing input {i} ({what})")),
        }
    }

    fn cst(&self, id: TensorId) -> Option<&ConstData> {
        self.g.tensors[id].data.as_ref()
    }

    /// The constant value of optional input `i`; a non-constant one is unsupported.
    fn const_input(&mut self, n: &NodeProto, i: usize, what: &str) -> R<Option<ConstData>> {
        match self.inp(n, i)? {
            None => Ok(None),
            Some(id) => match self.cst(id) {
                Some(d) => Ok(Some(d.clone())),
                None => unsup(format!("{what} (input {i}) must be constant")),
            },
        }
    }

    fn const_ints(&mut self, n: &NodeProto, i: usize, what: &str) -> R<Option<Vec<i64>>> {
        match self.const_input(n, i, what)? {
            None => Ok(None),
            Some(d) if matches!(d.dtype(), DType::F32 | DType::F16) => {
                bad(format!("{what} must be integers"))
            }
            Some(d) => Ok(Some(d.to_i64_vec())),
        }
    }

    fn const_scalar(&mut self, n: &NodeProto, i: usize, what: &str) -> R<Option<f32>> {
        match self.const_input(n, i, what)? {
            None => Ok(None),
            Some(d) if d.len() == 1 => Ok(Some(d.to_f32_vec()[0])),
            Some(d) => bad(format!(
                "{what} must be a scalar, got shape {:?}",
                d.shape()
            )),
        }
    }

    fn shape(&self, id: TensorId) -> Vec<usize> {
        self.g.tensors[id].shape.clone()
    }

    fn dtype(&self, id: TensorId) -> DType {
        self.g.tensors[id].dtype
    }

    fn bind(&mut self, name: &str, id: TensorId) {
        if !name.is_empty() {
            self.values.insert(name.to_string(), id);
        }
    }

    fn add_const(&mut self, base: &str, data: ConstData) -> TensorId {
        let name = self.fresh(base);
        self.g.add_const(name, data)
    }

    /// Binds output `name` to a new constant.
    fn out_const(&mut self, name: &str, data: ConstData) -> R<()> {
        checked_elements(&data.shape())?;
        let name = if name.is_empty() {
            self.tmp("const")
        } else {
            name.to_string()
        };
        let id = self.g.add_const(name.clone(), data);
        self.bind(&name, id);
        Ok(())
    }

    /// Infers output shapes and either evaluates `op` (all inputs constant) or adds a node.
    fn emit(&mut self, op: Op, inputs: &[TensorId], outs: Vec<String>) -> R<Vec<TensorId>> {
        let ins: Vec<&crate::ir::Tensor> = inputs.iter().map(|&i| &self.g.tensors[i]).collect();
        let inferred = shape::infer(&op, &ins).map_err(Fail::Error)?;
        if inferred.len() != outs.len() {
            return bad(format!(
                "{} gives {} outputs where {} are expected",
                op.name(),
                inferred.len(),
                outs.len()
            ));
        }
        for (s, _) in &inferred {
            checked_elements(s)?;
        }
        let datas: Vec<&ConstData> = ins.iter().filter_map(|t| t.data.as_ref()).collect();
        if datas.len() == ins.len() {
            if let Some(r) = eval::eval(&op, &datas) {
                let vals = r.map_err(Fail::Error)?;
                if vals.len() != outs.len()
                    || vals
                        .iter()
                        .zip(&inferred)
                        .any(|(v, (s, _))| v.shape() != *s)
                {
                    return bad(format!("evaluating {} gave unexpected shapes", op.name()));
                }
                return Ok(vals
                    .into_iter()
                    .zip(outs)
                    .map(|(v, name)| self.g.add_const(name, v))
                    .collect());
            }
        }
        let ids: Vec<TensorId> = outs
            .into_iter()
            .zip(inferred)
            .map(|(name, (s, dt))| self.g.add_tensor(name, s, dt))
            .collect();
        self.g.nodes.push(Node {
            name: self.cur.clone(),
            op,
            inputs: inputs.to_vec(),
            outputs: ids.clone(),
        });
        Ok(ids)
    }

    /// Emits a single-output op whose result is the ONNX value `out`.
    fn emit_to(&mut self, op: Op, inputs: &[TensorId], out: &str) -> R<TensorId> {
        let name = if out.is_empty() {
            self.tmp("out")
        } else {
            out.to_string()
        };
        let id = self.emit(op, inputs, vec![name])?[0];
        self.bind(out, id);
        Ok(id)
    }

    /// Emits a single-output op whose result is an intermediate tensor.
    fn emit_tmp(&mut self, op: Op, inputs: &[TensorId], suffix: &str) -> R<TensorId> {
        let name = self.tmp(suffix);
        Ok(self.emit(op, inputs, vec![name])?[0])
    }

    fn out0<'n>(&self, n: &'n NodeProto) -> R<&'n str> {
        match n.output.first() {
            Some(o) => Ok(o.as_str()),
            None => bad("the node has no outputs"),
        }
    }

    fn alias(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let out = self.out0(n)?;
        self.bind(out, x);
        Ok(())
    }

    // ---- ops -----------------------------------------------------------------------------

    fn node(&mut self, n: &'m NodeProto) -> R<()> {
        if let Some(msg) = qdq::qoperator_message(&n.op_type) {
            return unsup(msg);
        }
        self.check_q_readers(n)?;
        if !(n.domain.is_empty() || n.domain == "ai.onnx") {
            return unsup(format!("operator domain '{}' is not supported", n.domain));
        }
        let a = Attrs::new(n);
        let op = n.op_type.as_str();
        let unary = |u: UnaryOp| Some(Op::Unary(u));
        let simple = match op {
            "Abs" => unary(UnaryOp::Abs),
            "Neg" => unary(UnaryOp::Neg),
            "Exp" => unary(UnaryOp::Exp),
            "Log" => unary(UnaryOp::Log),
            "Sqrt" => unary(UnaryOp::Sqrt),
            "Relu" => unary(UnaryOp::Relu),
            "Sigmoid" => unary(UnaryOp::Sigmoid),
            "Tanh" => unary(UnaryOp::Tanh),
            "Erf" => unary(UnaryOp::Erf),
            "Floor" => unary(UnaryOp::Floor),
            "HardSwish" => unary(UnaryOp::HardSwish),
            "LeakyRelu" => unary(UnaryOp::LeakyRelu {
                alpha: a.float_or("alpha", 0.01)?,
            }),
            "Gelu" => {
                let approximate = match a.string_or("approximate", "none")?.as_str() {
                    "none" => false,
                    "tanh" => true,
                    other => return unsup(format!("approximate '{other}' is not supported")),
                };
                unary(UnaryOp::Gelu { approximate })
            }
            "HardSigmoid" => Some(Op::HardSigmoid {
                alpha: a.float_or("alpha", 0.2)?,
                beta: a.float_or("beta", 0.5)?,
            }),
            _ => None,
        };
        if let Some(op) = simple {
            let x = self.req(n, 0, "X")?;
            let out = self.out0(n)?;
            self.emit_to(op, &[x], out)?;
            return Ok(());
        }
        match op {
            "Identity" => self.alias(n),
            "Dropout" => {
                if n.output.get(1).is_some_and(|m| self.used(m)) {
                    return unsup("the mask output is used");
                }
                self.alias(n)
            }
            "Add" => self.binary(n, BinaryOp::Add),
            "Sub" => self.binary(n, BinaryOp::Sub),
            "Mul" => self.binary(n, BinaryOp::Mul),
            "Div" => self.binary(n, BinaryOp::Div),
            "Pow" => self.binary(n, BinaryOp::Pow),
            "Max" => self.variadic(n, BinaryOp::Max, false),
            "Min" => self.variadic(n, BinaryOp::Min, false),
            "Sum" => self.variadic(n, BinaryOp::Add, false),
            "Mean" => self.variadic(n, BinaryOp::Add, true),
            "Reciprocal" => {
                let x = self.req(n, 0, "X")?;
                let one = ConstData::scalar_f32(1.0).cast(self.dtype(x));
                let one = self.add_const(&format!("{}/one", self.cur), one);
                let out = self.out0(n)?;
                self.emit_to(bin(BinaryOp::Div), &[one, x], out)?;
                Ok(())
            }
            "PRelu" => {
                let x = self.req(n, 0, "X")?;
                let s = self.req(n, 1, "slope")?;
                let out = self.out0(n)?;
                self.emit_to(Op::PRelu, &[x, s], out)?;
                Ok(())
            }
            "Clip" => self.clip(n, &a),
            "Softmax" => self.softmax(n, &a, false),
            "LogSoftmax" => self.softmax(n, &a, true),
            "Conv" => self.conv(n, &a),
            "ConvTranspose" => self.conv_transpose(n, &a),
            "Gemm" => self.gemm(n, &a),
            "MatMul" => self.matmul(n),
            "BatchNormalization" => self.batchnorm(n, &a),
            "LayerNormalization" => self.layernorm(n, &a),
            "MaxPool" => self.pool(n, &a, PoolKind::Max),
            "AveragePool" => self.pool(n, &a, PoolKind::Average),
            "GlobalAveragePool" => self.global_pool(n, ReduceOp::Mean),
            "GlobalMaxPool" => self.global_pool(n, ReduceOp::Max),
            "ReduceMean" => self.reduce(n, &a, ReduceOp::Mean),
            "ReduceSum" => self.reduce(n, &a, ReduceOp::Sum),
            "ReduceMax" => self.reduce(n, &a, ReduceOp::Max),
            "ReduceMin" => self.reduce(n, &a, ReduceOp::Min),
            "ReduceProd" => self.reduce(n, &a, ReduceOp::Prod),
            "Concat" => self.concat(n, &a),
            "Split" => self.split(n, &a),
            "Slice" => self.slice(n, &a),
            "Gather" => self.gather(n, &a),
            "Reshape" => self.reshape(n, &a),
            "Flatten" => self.flatten(n, &a),
            "Squeeze" => self.squeeze(n, &a),
            "Unsqueeze" => self.unsqueeze(n, &a),
            "Transpose" => self.transpose(n, &a),
            "Expand" => self.expand(n),
            "Tile" => self.tile(n),
            "Pad" => self.pad(n, &a),
            "ArgMax" => self.argmax(n, &a, false),
            "ArgMin" => self.argmax(n, &a, true),
            "TopK" => self.topk(n, &a),
            "LSTM" => recurrent::lstm(self, n, &a),
            "GRU" => recurrent::gru(self, n, &a),
            "Cast" => self.cast(n, &a),
            "Resize" | "Upsample" => self.resize(n, &a),
            "Shape" => self.shape_op(n, &a),
            "Size" => {
                let x = self.req(n, 0, "data")?;
                let count = self.g.tensors[x].elements() as i64;
                let out = self.out0(n)?;
                self.out_const(out, ConstData::from_i64(&[], vec![count]))
            }
            "ConstantOfShape" => self.constant_of_shape(n, &a),
            "Range" => {
                let s = self.const_input(n, 0, "start")?;
                let l = self.const_input(n, 1, "limit")?;
                let d = self.const_input(n, 2, "delta")?;
                let (Some(s), Some(l), Some(d)) = (s, l, d) else {
                    return bad("Range needs start, limit and delta");
                };
                let r = fold::range(&s, &l, &d)?;
                let out = self.out0(n)?;
                self.out_const(out, r)
            }
            "Constant" => self.constant(n, &a),
            "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or"
            | "Xor" | "Not" | "Where" => self.const_logic(n, op),
            "Elu" | "Selu" => self.elu(n, &a),
            "Softplus" => self.softplus(n),
            "InstanceNormalization" => self.instance_norm(n, &a),
            "If" => self.if_op(n),
            "QuantizeLinear" => self.quantize_linear(n, &a),
            "DequantizeLinear" => self.dequantize_linear(n, &a),
            _ => unsup("operator is not supported"),
        }
    }

    /// If whose condition is known at conversion time (PyTorch exports `if x.dim() == ...` and
    /// shape tests this way: Silero VAD): the taken branch is imported in place. A condition
    /// computed at run time is unsupported (TFLite's IF would need subgraphs).
    fn if_op(&mut self, n: &'m NodeProto) -> R<()> {
        let cond = self.req(n, 0, "cond")?;
        let Some(c) = self.cst(cond) else {
            return unsup(
                "the condition is computed at run time; only an If whose condition is known at \
                 conversion time (a shape test, a constant) converts",
            );
        };
        if c.len() != 1 {
            return bad(format!(
                "the condition must have one element, got shape {:?}",
                c.shape()
            ));
        }
        let take = if c.to_f32_vec()[0] != 0.0 {
            "then_branch"
        } else {
            "else_branch"
        };
        let Some(g) = n
            .attribute
            .iter()
            .find(|a| a.name == take)
            .and_then(|a| a.g.as_ref())
        else {
            return bad(format!("attribute {take} (a graph) is missing"));
        };
        let real: Vec<&str> = n.output.iter().map(|o| o.as_str()).collect();
        if g.output.len() != real.len() {
            return bad(format!(
                "{take} has {} outputs, the node {}",
                g.output.len(),
                real.len()
            ));
        }
        let order = schedule(g, true).map_err(|e| Fail::Error(format!("{take}: {e}")))?;
        for t in &g.initializer {
            self.inits.insert(t.name.as_str(), t);
        }
        for r in g.node.iter().flat_map(node_reads) {
            *self.node_uses.entry(r).or_default() += 1;
        }
        let here = self.cur.clone();
        for &i in &order {
            // Errors inside the branch name the branch's node, which is what is at fault.
            self.run_node(&g.node[i], i).map_err(|e| {
                let e = e.to_string();
                let prefix = format!("{}: ", self.file);
                Fail::Error(format!(
                    "in {take}: {}",
                    e.strip_prefix(&prefix).unwrap_or(&e)
                ))
            })?;
        }
        self.cur = here;
        for (o, bo) in real.iter().zip(&g.output) {
            if o.is_empty() {
                continue;
            }
            if self.failed.contains(&bo.name) {
                self.failed.insert(o.to_string());
                continue;
            }
            let id = match self.values.get(&bo.name) {
                Some(&id) => id,
                None => {
                    let Some(t) = self.inits.get(bo.name.as_str()) else {
                        return bad(format!("{take} output '{}' is not produced", bo.name));
                    };
                    let data =
                        decode_tensor(t).map_err(|e| Fail::Error(format!("initializer {e}")))?;
                    let id = self.g.add_const(bo.name.clone(), data);
                    self.values.insert(bo.name.clone(), id);
                    id
                }
            };
            self.bind(o, id);
        }
        Ok(())
    }

    fn binary(&mut self, n: &NodeProto, op: BinaryOp) -> R<()> {
        let x = self.req(n, 0, "A")?;
        let mut y = self.req(n, 1, "B")?;
        let (dx, dy) = (self.dtype(x), self.dtype(y));
        if dx != dy {
            // Pow allows a differently typed exponent; so do some exporters elsewhere.
            match self.cst(y) {
                Some(d) => {
                    let d = d.cast(dx);
                    y = self.add_const(&format!("{}/cast", self.cur), d);
                }
                None => y = self.emit_tmp(Op::Cast { to: dx }, &[y], "cast")?,
            }
        }
        let out = self.out0(n)?;
        self.emit_to(bin(op), &[x, y], out)?;
        Ok(())
    }

    fn variadic(&mut self, n: &NodeProto, op: BinaryOp, mean: bool) -> R<()> {
        let count = n.input.iter().filter(|s| !s.is_empty()).count();
        if count == 0 {
            return bad("needs at least one input");
        }
        let out = self.out0(n)?;
        let mut acc = self.req(n, 0, "data_0")?;
        for i in 1..n.input.len() {
            let Some(y) = self.inp(n, i)? else { continue };
            let last = i == n.input.len() - 1 && !mean;
            acc = if last {
                self.emit_to(bin(op), &[acc, y], out)?
            } else {
                self.emit_tmp(bin(op), &[acc, y], &format!("acc{i}"))?
            };
        }
        if mean {
            let c = ConstData::scalar_f32(count as f32).cast(self.dtype(acc));
            let c = self.add_const(&format!("{}/count", self.cur), c);
            self.emit_to(bin(BinaryOp::Div), &[acc, c], out)?;
        } else if count == 1 {
            self.bind(out, acc);
        }
        Ok(())
    }

    /// A scalar constant of `dtype` (for decompositions).
    fn scalar(&mut self, v: f32, dtype: DType, what: &str) -> TensorId {
        let base = format!("{}/{what}", self.cur);
        self.add_const(&base, ConstData::scalar_f32(v).cast(dtype))
    }

    /// Elu (and Selu): [gamma *] (max(x, 0) + alpha * (exp(min(x, 0)) - 1)), in IR ops.
    fn elu(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let dt = self.dtype(x);
        let selu = n.op_type == "Selu";
        let (alpha, gamma) = if selu {
            (
                a.float_or("alpha", 1.673_263_2)?,
                Some(a.float_or("gamma", 1.050_701)?),
            )
        } else {
            (a.float_or("alpha", 1.0)?, None)
        };
        let out = self.out0(n)?;
        let zero = self.scalar(0.0, dt, "zero");
        let one = self.scalar(1.0, dt, "one");
        let k = self.scalar(alpha, dt, "alpha");
        let pos = self.emit_tmp(bin(BinaryOp::Max), &[x, zero], "pos")?;
        let neg = self.emit_tmp(bin(BinaryOp::Min), &[x, zero], "neg")?;
        let e = self.emit_tmp(Op::Unary(UnaryOp::Exp), &[neg], "exp")?;
        let em1 = self.emit_tmp(bin(BinaryOp::Sub), &[e, one], "expm1")?;
        let scaled = self.emit_tmp(bin(BinaryOp::Mul), &[em1, k], "scaled")?;
        match gamma {
            None => {
                self.emit_to(bin(BinaryOp::Add), &[pos, scaled], out)?;
            }
            Some(g) => {
                let sum = self.emit_tmp(bin(BinaryOp::Add), &[pos, scaled], "sum")?;
                let gk = self.scalar(g, dt, "gamma");
                self.emit_to(bin(BinaryOp::Mul), &[sum, gk], out)?;
            }
        }
        Ok(())
    }

    /// Softplus: max(x, 0) + log(1 + exp(-|x|)) (no overflow for large x), in IR ops.
    fn softplus(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let dt = self.dtype(x);
        let out = self.out0(n)?;
        let one = self.scalar(1.0, dt, "one");
        let pos = self.emit_tmp(Op::Unary(UnaryOp::Relu), &[x], "pos")?;
        let abs = self.emit_tmp(Op::Unary(UnaryOp::Abs), &[x], "abs")?;
        let na = self.emit_tmp(Op::Unary(UnaryOp::Neg), &[abs], "neg_abs")?;
        let e = self.emit_tmp(Op::Unary(UnaryOp::Exp), &[na], "exp")?;
        let e1 = self.emit_tmp(bin(BinaryOp::Add), &[e, one], "exp_plus_1")?;
        let l = self.emit_tmp(Op::Unary(UnaryOp::Log), &[e1], "log")?;
        self.emit_to(bin(BinaryOp::Add), &[pos, l], out)?;
        Ok(())
    }

    /// InstanceNormalization: per-sample, per-channel normalization over the spatial axes,
    /// written out with Reduce/Sub/Mul/Add/Sqrt/Div.
    fn instance_norm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let scale = self.req(n, 1, "scale")?;
        let bias = self.req(n, 2, "B")?;
        let xs = self.shape(x);
        if xs.len() < 3 {
            return bad(format!("expects data of rank ≥ 3, got {xs:?}"));
        }
        let c = xs[1];
        for (id, what) in [(scale, "scale"), (bias, "B")] {
            if self.shape(id).iter().product::<usize>() != c {
                return bad(format!(
                    "{what} {:?} does not have {c} values",
                    self.shape(id)
                ));
            }
        }
        let dt = self.dtype(x);
        let epsilon = a.float_or("epsilon", 1e-5)?;
        let axes: Vec<usize> = (2..xs.len()).collect();
        let mean_op = Op::Reduce {
            op: ReduceOp::Mean,
            axes,
            keep_dims: true,
        };
        let mut cshape = vec![c];
        cshape.extend(std::iter::repeat_n(1, xs.len() - 2));
        let out = self.out0(n)?;
        let mean = self.emit_tmp(mean_op.clone(), &[x], "mean")?;
        let d = self.emit_tmp(bin(BinaryOp::Sub), &[x, mean], "centered")?;
        let sq = self.emit_tmp(bin(BinaryOp::Mul), &[d, d], "squared")?;
        let var = self.emit_tmp(mean_op, &[sq], "var")?;
        let eps = self.scalar(epsilon, dt, "epsilon");
        let ve = self.emit_tmp(bin(BinaryOp::Add), &[var, eps], "var_eps")?;
        let sd = self.emit_tmp(Op::Unary(UnaryOp::Sqrt), &[ve], "std")?;
        let nrm = self.emit_tmp(bin(BinaryOp::Div), &[d, sd], "normalized")?;
        let reshape = Op::Reshape { shape: cshape };
        let sc = self.emit_tmp(reshape.clone(), &[scale], "scale")?;
        let bi = self.emit_tmp(reshape, &[bias], "bias")?;
        let y = self.emit_tmp(bin(BinaryOp::Mul), &[nrm, sc], "scaled")?;
        self.emit_to(bin(BinaryOp::Add), &[y, bi], out)?;
        Ok(())
    }

    fn clip(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let (min, max) = if self.opset < 11 {
            (
                a.float_or("min", f32::NEG_INFINITY)?,
                a.float_or("max", f32::INFINITY)?,
            )
        } else {
            let lo = self.inp(n, 1)?.filter(|&id| self.cst(id).is_none());
            let hi = self.inp(n, 2)?.filter(|&id| self.cst(id).is_none());
            if lo.is_some() || hi.is_some() {
                return self.clip_runtime(n, x, lo, hi);
            }
            (
                self.const_scalar(n, 1, "min")?.unwrap_or(f32::NEG_INFINITY),
                self.const_scalar(n, 2, "max")?.unwrap_or(f32::INFINITY),
            )
        };
        let out = self.out0(n)?;
        self.emit_to(Op::Clip { min, max }, &[x], out)?;
        Ok(())
    }

    /// Clip with a bound computed at run time (a log-mel spectrogram's `max(x, x.max() - 80)`):
    /// `min(max(x, lo), hi)` as ONNX defines it, a runtime bound as Max/Min, a constant one as
    /// a one-sided Clip.
    fn clip_runtime(
        &mut self,
        n: &NodeProto,
        x: TensorId,
        lo: Option<TensorId>,
        hi: Option<TensorId>,
    ) -> R<()> {
        for (b, what) in [(lo, "min"), (hi, "max")] {
            let Some(b) = b else { continue };
            let t = &self.g.tensors[b];
            if t.elements() != 1 {
                return bad(format!("{what} must be a scalar, got shape {:?}", t.shape));
            }
            if t.dtype != self.dtype(x) {
                return bad(format!(
                    "{what} has type {:?} but the input has {:?}",
                    t.dtype,
                    self.dtype(x)
                ));
            }
        }
        let cmin = match lo {
            Some(_) => None,
            None => self.const_scalar(n, 1, "min")?,
        };
        let cmax = match hi {
            Some(_) => None,
            None => self.const_scalar(n, 2, "max")?,
        };
        let out = self.out0(n)?;
        let mut steps: Vec<(Op, Option<TensorId>)> = Vec::new();
        match (lo, cmin) {
            (Some(b), _) => steps.push((bin(BinaryOp::Max), Some(b))),
            (None, Some(m)) => steps.push((
                Op::Clip {
                    min: m,
                    max: f32::INFINITY,
                },
                None,
            )),
            (None, None) => {}
        }
        match (hi, cmax) {
            (Some(b), _) => steps.push((bin(BinaryOp::Min), Some(b))),
            (None, Some(m)) => steps.push((
                Op::Clip {
                    min: f32::NEG_INFINITY,
                    max: m,
                },
                None,
            )),
            (None, None) => {}
        }
        let mut cur = x;
        let last = steps.len() - 1;
        for (i, (op, b)) in steps.into_iter().enumerate() {
            let ins: Vec<TensorId> = std::iter::once(cur).chain(b).collect();
            cur = if i == last {
                self.emit_to(op, &ins, out)?
            } else {
                self.emit_tmp(op, &ins, "clip_lo")?
            };
        }
        Ok(())
    }

    fn softmax(&mut self, n: &NodeProto, a: &Attrs, log: bool) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let s = self.shape(x);
        let rank = s.len();
        let axis = if self.opset >= 13 {
            norm_axis(a.int_or("axis", -1)?, rank)?
        } else {
            // Coerced to 2-D at `axis`: the same as a softmax over one axis only when every
            // other axis from `axis` on has size 1.
            let from = norm_axis(a.int_or("axis", 1)?, rank)?;
            let big: Vec<usize> = (from..rank).filter(|&i| s[i] != 1).collect();
            match big.as_slice() {
                [] => rank.saturating_sub(1),
                [k] => *k,
                _ => {
                    return unsup(format!(
                        "opset {} softmax flattens axes {from}.. of shape {s:?}; only a \
                         softmax over a single axis is supported",
                        self.opset
                    ))
                }
            }
        };
        let op = if log {
            Op::LogSoftmax { axis }
        } else {
            Op::Softmax { axis }
        };
        let out = self.out0(n)?;
        self.emit_to(op, &[x], out)?;
        Ok(())
    }

    /// Explicit (begin, end) pads per spatial axis from auto_pad / pads.
    fn spatial_pads(
        &self,
        a: &Attrs,
        input: &[usize],
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
    ) -> R<Vec<(usize, usize)>> {
        let nsp = input.len();
        let auto = a.string_or("auto_pad", "NOTSET")?;
        match auto.as_str() {
            "NOTSET" => {
                let p = a.ints("pads")?.unwrap_or_else(|| vec![0; 2 * nsp]);
                if p.len() != 2 * nsp {
                    return bad(format!("pads {p:?} must have {} values", 2 * nsp));
                }
                if p.iter().any(|&v| v < 0) {
                    return unsup(format!("negative pads {p:?} are not supported"));
                }
                let p = size_values(&p, "pad")?;
                Ok((0..nsp).map(|i| (p[i], p[i + nsp])).collect())
            }
            "VALID" => Ok(vec![(0, 0); nsp]),
            "SAME_UPPER" | "SAME_LOWER" => Ok((0..nsp)
                .map(|i| {
                    let out = input[i].div_ceil(strides[i]);
                    let eff = (kernel[i] - 1) * dilations[i] + 1;
                    let total = ((out.max(1) - 1) * strides[i] + eff).saturating_sub(input[i]);
                    if auto == "SAME_UPPER" {
                        (total / 2, total - total / 2)
                    } else {
                        (total - total / 2, total / 2)
                    }
                })
                .collect()),
            other => bad(format!("auto_pad '{other}' is not valid")),
        }
    }

    /// strides / dilations attribute: `nsp` positive values, default 1.
    fn window_attr(a: &Attrs, name: &str, nsp: usize) -> R<Vec<usize>> {
        let v = a.ints(name)?.unwrap_or_else(|| vec![1; nsp]);
        if v.len() != nsp || v.iter().any(|&x| x < 1) {
            return bad(format!("{name} {v:?} must be {nsp} positive values"));
        }
        Ok(size_values(&v, name)?)
    }

    fn conv(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let w = self.req(n, 1, "W")?;
        let b = self.inp(n, 2)?;
        let Some(wdata) = self.cst(w).cloned() else {
            return bad("weights must be constant");
        };
        if let Some(b) = b {
            if self.cst(b).is_none() {
                return bad("bias must be constant");
            }
        }
        let (xs, ws) = (self.shape(x), self.shape(w));
        if xs.len() != ws.len() || xs.len() < 3 {
            return bad(format!("weights {ws:?} do not match data {xs:?}"));
        }
        if let Some(b) = b {
            if self.shape(b) != [ws[0]] {
                return bad(format!(
                    "bias has shape {:?}, expected [{}] (the weights' output channels)",
                    self.shape(b),
                    ws[0]
                ));
            }
        }
        if xs.len() > 4 {
            return unsup(format!("{}-D convolution is not supported", xs.len() - 2));
        }
        if self.dtype(x) != DType::F32 {
            return unsup(format!(
                "{} convolution is not supported",
                self.dtype(x).name()
            ));
        }
        let nsp = xs.len() - 2;
        let kernel = ws[2..].to_vec();
        if let Some(k) = a.ints("kernel_shape")? {
            if k.len() != nsp || k.iter().zip(&kernel).any(|(&a, &b)| a != b as i64) {
                return bad(format!("kernel_shape {k:?} does not match weights {ws:?}"));
            }
        }
        if kernel.contains(&0) {
            return bad(format!("weights {ws:?} have an empty kernel"));
        }
        let strides = Self::window_attr(a, "strides", nsp)?;
        let dilations = Self::window_attr(a, "dilations", nsp)?;
        let group = size_value(a.int_or("group", 1)?, "group")?;
        let pads = self.spatial_pads(a, &xs[2..], &kernel, &strides, &dilations)?;
        let out = self.out0(n)?;
        if nsp == 2 {
            let op = Op::Conv2d {
                strides: [strides[0], strides[1]],
                dilations: [dilations[0], dilations[1]],
                pads: [pads[0].0, pads[1].0, pads[0].1, pads[1].1],
                group,
                activation: Activation::None,
                layout: Layout::Nchw,
            };
            let mut ins = vec![x, w];
            ins.extend(b);
            self.emit_to(op, &ins, out)?;
            return Ok(());
        }
        // 1-D: [N, C, L] → [N, C, 1, L], Conv2d with H = 1, back to [N, O, L'].
        let x4 = self.emit_tmp(
            Op::Reshape {
                shape: vec![xs[0], xs[1], 1, xs[2]],
            },
            &[x],
            "to2d",
        )?;
        let wname = format!("{}_2d", self.g.tensors[w].name);
        let w4 = self.add_const(&wname, wdata.reshape(&[ws[0], ws[1], 1, ws[2]]));
        // Per output channel (axis 0) still; 1-D weights have no other per-axis form.
        self.g.tensors[w4].quant = self.g.tensors[w]
            .quant
            .clone()
            .filter(|q| !q.is_per_channel() || q.axis == 0);
        let op = Op::Conv2d {
            strides: [1, strides[0]],
            dilations: [1, dilations[0]],
            pads: [0, pads[0].0, 0, pads[0].1],
            group,
            activation: Activation::None,
            layout: Layout::Nchw,
        };
        let mut ins = vec![x4, w4];
        ins.extend(b);
        let y4 = self.emit_tmp(op, &ins, "conv2d")?;
        let ys = self.shape(y4);
        self.emit_to(
            Op::Reshape {
                shape: vec![ys[0], ys[1], ys[3]],
            },
            &[y4],
            out,
        )?;
        Ok(())
    }

    fn conv_transpose(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let w = self.req(n, 1, "W")?;
        let b = self.inp(n, 2)?;
        if self.cst(w).is_none() {
            return bad("weights must be constant");
        }
        if let Some(b) = b {
            if self.cst(b).is_none() {
                return bad("bias must be constant");
            }
        }
        let (xs, ws) = (self.shape(x), self.shape(w));
        if xs.len() != 4 || ws.len() != 4 {
            return unsup(format!(
                "only 2-D transposed convolution is supported (data {xs:?}, weights {ws:?})"
            ));
        }
        if ws[0] != xs[1] || xs[2] == 0 || xs[3] == 0 {
            return bad(format!("weights {ws:?} do not match data {xs:?}"));
        }
        let group = a.int_or("group", 1)?;
        if group != 1 {
            return unsup(format!("group {group} is not supported"));
        }
        let dil = Self::window_attr(a, "dilations", 2)?;
        if dil != [1, 1] {
            return unsup(format!("dilations {dil:?} are not supported"));
        }
        let strides = Self::window_attr(a, "strides", 2)?;
        let kernel = [ws[2], ws[3]];
        if kernel.contains(&0) {
            return bad(format!("weights {ws:?} have an empty kernel"));
        }
        let out_pad = a.ints("output_padding")?.unwrap_or_else(|| vec![0, 0]);
        if out_pad.len() != 2 {
            return bad(format!("output_padding {out_pad:?} must have 2 values"));
        }
        let out_pad = size_values(&out_pad, "output_padding")?;
        let auto = a.string_or("auto_pad", "NOTSET")?;
        let input = [xs[2], xs[3]];
        // The full (unpadded) output size per axis.
        let full = |i: usize| strides[i] * (input[i] - 1) + out_pad[i] + kernel[i];
        let mut pads = [0usize; 4];
        let mut size = [0usize; 2];
        let explicit = a.ints("output_shape")?;
        if let Some(os) = explicit.filter(|v| !v.is_empty()) {
            let os = if os.len() == 4 { os[2..].to_vec() } else { os };
            if os.len() != 2 {
                return bad(format!("output_shape {os:?} must have 2 values"));
            }
            let os = dim_values(&os, "output_shape")?;
            for i in 0..2 {
                let total = full(i) as i64 - os[i] as i64;
                if total < 0 {
                    return unsup(format!(
                        "output_shape {os:?} is larger than the full output; not supported"
                    ));
                }
                let t = total as usize;
                let (pb, pe) = if auto == "SAME_UPPER" {
                    (t / 2, t - t / 2)
                } else {
                    (t - t / 2, t / 2)
                };
                pads[i] = pb;
                pads[i + 2] = pe;
                size[i] = os[i];
            }
        } else {
            for i in 0..2 {
                let (pb, pe) = match auto.as_str() {
                    "NOTSET" => {
                        let p = a.ints("pads")?.unwrap_or_else(|| vec![0; 4]);
                        if p.len() != 4 || p.iter().any(|&v| v < 0) {
                            return bad(format!("pads {p:?} must be 4 non-negative values"));
                        }
                        let p = size_values(&p, "pad")?;
                        (p[i], p[i + 2])
                    }
                    "VALID" => (0, 0),
                    "SAME_UPPER" | "SAME_LOWER" => {
                        let t = full(i).saturating_sub(input[i] * strides[i]);
                        if auto == "SAME_UPPER" {
                            (t / 2, t - t / 2)
                        } else {
                            (t - t / 2, t / 2)
                        }
                    }
                    other => return bad(format!("auto_pad '{other}' is not valid")),
                };
                let f = full(i);
                if pb + pe >= f {
                    return bad(format!("pads ({pb}, {pe}) remove the whole output"));
                }
                pads[i] = pb;
                pads[i + 2] = pe;
                size[i] = f - pb - pe;
            }
        }
        let op = Op::ConvTranspose2d {
            strides: [strides[0], strides[1]],
            pads,
            output_size: size,
            activation: Activation::None,
            layout: Layout::Nchw,
        };
        let mut ins = vec![x, w];
        ins.extend(b);
        let out = self.out0(n)?;
        self.emit_to(op, &ins, out)?;
        Ok(())
    }

    fn gemm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let am = self.req(n, 0, "A")?;
        let bm = self.req(n, 1, "B")?;
        let c = self.inp(n, 2)?;
        let alpha = a.float_or("alpha", 1.0)?;
        let beta = a.float_or("beta", 1.0)?;
        let trans_a = a.int_or("transA", 0)? != 0;
        let trans_b = a.int_or("transB", 0)? != 0;
        let (sa, sb) = (self.shape(am), self.shape(bm));
        if sa.len() != 2 || sb.len() != 2 {
            return bad(format!("A {sa:?} and B {sb:?} must be 2-D"));
        }
        let nn = if trans_b { sb[0] } else { sb[1] };
        let out = self.out0(n)?;
        let c_const = c.and_then(|c| self.cst(c).cloned());
        // beta * C folded into a [N] bias when C is constant and broadcasts along rows.
        let bias_vec = match (&c_const, c) {
            (Some(cd), Some(cid)) => {
                let cs = self.shape(cid);
                let row = cd.len() == 1 || cs == [nn] || cs == [1, nn];
                row.then(|| {
                    let v = cd.to_f32_vec();
                    let v: Vec<f32> = (0..nn).map(|j| beta * v[j % v.len()]).collect();
                    ConstData::from_f32(&[nn], v)
                })
            }
            _ => None,
        };
        let post_add = c.is_some() && bias_vec.is_none();
        let base = if post_add { None } else { Some(out) };
        let y = if let Some(bd) = self.cst(bm).filter(|_| self.dtype(am) == DType::F32) {
            let mut wd = if trans_b {
                bd.cast(DType::F32)
            } else {
                bd.cast(DType::F32).permute(&[1, 0])
            };
            if alpha != 1.0 {
                if let ConstData::F32(arr) = &mut wd {
                    arr.mapv_inplace(|v| v * alpha);
                }
            }
            let wname = format!("{}_fc_weights", self.g.tensors[bm].name);
            let w = self.add_const(&wname, wd);
            // A dequantized weight keeps its parameters (axis moved by the transpose).
            if alpha == 1.0 {
                let perm: &[usize] = if trans_b { &[0, 1] } else { &[1, 0] };
                self.g.tensors[w].quant =
                    self.g.tensors[bm].quant.as_ref().map(|q| q.permuted(perm));
            }
            let x = if trans_a {
                self.emit_tmp(Op::Transpose { perm: vec![1, 0] }, &[am], "transpose_a")?
            } else {
                am
            };
            let mut ins = vec![x, w];
            if let Some(bv) = bias_vec.clone() {
                let bname = format!("{}_fc_bias", self.cur);
                ins.push(self.add_const(&bname, bv));
            }
            let op = Op::FullyConnected {
                activation: Activation::None,
            };
            match base {
                Some(o) => self.emit_to(op, &ins, o)?,
                None => self.emit_tmp(op, &ins, "fc")?,
            }
        } else {
            let op = Op::MatMul {
                transpose_a: trans_a,
                transpose_b: trans_b,
            };
            let scaled = alpha != 1.0;
            let last = base.filter(|_| !scaled && c.is_none());
            let mut y = match last {
                Some(o) => self.emit_to(op, &[am, bm], o)?,
                None => self.emit_tmp(op, &[am, bm], "matmul")?,
            };
            if scaled {
                let k = ConstData::scalar_f32(alpha).cast(self.dtype(y));
                let k = self.add_const(&format!("{}/alpha", self.cur), k);
                y = if c.is_none() {
                    self.emit_to(bin(BinaryOp::Mul), &[y, k], out)?
                } else {
                    self.emit_tmp(bin(BinaryOp::Mul), &[y, k], "scaled")?
                };
            }
            if let (Some(bv), Some(_)) = (bias_vec, c) {
                let b = self.add_const(&format!("{}/bias", self.cur), bv);
                self.emit_to(bin(BinaryOp::Add), &[y, b], out)?;
                return Ok(());
            }
            y
        };
        if post_add {
            let cid = c.expect("post_add implies C");
            let cc = if beta == 1.0 {
                cid
            } else if let Some(cd) = c_const {
                let scaled = crate::ir::eval::binary(
                    BinaryOp::Mul,
                    &cd,
                    &ConstData::scalar_f32(beta).cast(cd.dtype()),
                )?;
                self.add_const(&format!("{}/beta_c", self.cur), scaled)
            } else {
                let k = ConstData::scalar_f32(beta).cast(self.dtype(cid));
                let k = self.add_const(&format!("{}/beta", self.cur), k);
                self.emit_tmp(bin(BinaryOp::Mul), &[cid, k], "beta_c")?
            };
            self.emit_to(bin(BinaryOp::Add), &[y, cc], out)?;
        }
        Ok(())
    }

    fn matmul(&mut self, n: &NodeProto) -> R<()> {
        let am = self.req(n, 0, "A")?;
        let bm = self.req(n, 1, "B")?;
        let (sa, sb) = (self.shape(am), self.shape(bm));
        if sa.len() < 2 || sb.len() < 2 {
            return unsup(format!(
                "1-D MatMul operands ({sa:?} x {sb:?}) are not supported"
            ));
        }
        let out = self.out0(n)?;
        let b_const = self.cst(bm).cloned();
        if let Some(bd) = b_const.filter(|_| sb.len() == 2 && self.dtype(am) == DType::F32) {
            if self.cst(am).is_none() {
                let wname = format!("{}_T", self.g.tensors[bm].name);
                let w = self.add_const(&wname, bd.cast(DType::F32).permute(&[1, 0]));
                self.g.tensors[w].quant = self.g.tensors[bm]
                    .quant
                    .as_ref()
                    .map(|q| q.permuted(&[1, 0]));
                self.emit_to(
                    Op::FullyConnected {
                        activation: Activation::None,
                    },
                    &[am, w],
                    out,
                )?;
                return Ok(());
            }
        }
        self.emit_to(
            Op::MatMul {
                transpose_a: false,
                transpose_b: false,
            },
            &[am, bm],
            out,
        )?;
        Ok(())
    }

    fn batchnorm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let xs = self.shape(x);
        if xs.len() < 2 {
            return bad(format!("expects X of rank ≥ 2 (N, C, ...), got {xs:?}"));
        }
        let c = xs[1];
        let mut ins = vec![x];
        for (i, what) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
            let id = self.req(n, i, what)?;
            if self.cst(id).is_none() {
                return bad("scale, bias, mean and var must be constant");
            }
            if self.shape(id) != [c] {
                return bad(format!(
                    "{what} has shape {:?}, expected [{c}] (X's channels)",
                    self.shape(id)
                ));
            }
            ins.push(id);
        }
        if a.int_or("spatial", 1)? == 0 {
            return unsup("spatial=0 is not supported");
        }
        let epsilon = a.float_or("epsilon", 1e-5)?;
        let training = a.int_or("training_mode", 0)? != 0;
        let extra: Vec<&String> = n.output.iter().skip(1).filter(|o| !o.is_empty()).collect();
        for o in &extra {
            if self.node_uses.get(o.as_str()).copied().unwrap_or(0) > 0 {
                return unsup(format!(
                    "the training-mode output '{o}' is used by another node"
                ));
            }
        }
        if training || !extra.is_empty() {
            eprintln!(
                "warning: {}: node '{}' (BatchNormalization): training-mode batch normalization \
                 imported as inference (uses the running mean and variance)",
                self.file, self.cur
            );
        }
        for o in extra {
            if self.graph_outputs.contains(o.as_str()) {
                eprintln!(
                    "warning: {}: graph output '{o}' (a training statistic of '{}') dropped",
                    self.file, self.cur
                );
                self.dropped_outputs.insert(o.clone());
            }
        }
        let out = self.out0(n)?;
        self.emit_to(
            Op::BatchNorm {
                epsilon,
                layout: Layout::Nchw,
            },
            &ins,
            out,
        )?;
        Ok(())
    }

    fn layernorm(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let scale = self.req(n, 1, "Scale")?;
        let b = self.inp(n, 2)?;
        for o in n.output.iter().skip(1) {
            if self.used(o) {
                return unsup(format!("the Mean/InvStdDev output '{o}' is used"));
            }
        }
        let rank = self.shape(x).len();
        let axis = norm_axis(a.int_or("axis", -1)?, rank)?;
        let epsilon = a.float_or("epsilon", 1e-5)?;
        let mut ins = vec![x, scale];
        ins.extend(b);
        let out = self.out0(n)?;
        self.emit_to(Op::LayerNorm { axis, epsilon }, &ins, out)?;
        Ok(())
    }

    /// 1-D pooling ([N, C, L]): the 2-D pool of [N, C, 1, L] with a 1 x k window, between
    /// RESHAPEs.
    fn pool1d(&mut self, n: &NodeProto, x: TensorId, kind: PoolKind) -> R<()> {
        let xs = self.shape(x);
        let mut n2 = n.clone();
        for at in &mut n2.attribute {
            match at.name.as_str() {
                "kernel_shape" | "strides" | "dilations" => at.ints.insert(0, 1),
                "pads" if at.ints.len() == 2 => {
                    let (b, e) = (at.ints[0], at.ints[1]);
                    at.ints = vec![0, b, 0, e];
                }
                _ => {}
            }
        }
        let x4 = self.emit_tmp(
            Op::Reshape {
                shape: vec![xs[0], xs[1], 1, xs[2]],
            },
            &[x],
            "to2d",
        )?;
        let in_name = self.tmp("x2d");
        self.bind(&in_name, x4);
        let out_name = self.tmp("pooled2d");
        n2.input = vec![in_name];
        n2.output.truncate(1);
        n2.output[0] = out_name.clone();
        let a2 = Attrs::new(&n2);
        self.pool(&n2, &a2, kind)?;
        let Some(&y4) = self.values.get(&out_name) else {
            return bad("1-D pooling produced no output");
        };
        let ys = self.shape(y4);
        let out = self.out0(n)?;
        self.emit_to(
            Op::Reshape {
                shape: vec![ys[0], ys[1], ys[3]],
            },
            &[y4],
            out,
        )?;
        Ok(())
    }

    fn pool(&mut self, n: &NodeProto, a: &Attrs, kind: PoolKind) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let xs = self.shape(x);
        if xs.len() == 3 {
            if kind == PoolKind::Max && n.output.get(1).is_some_and(|o| self.used(o)) {
                return unsup("the Indices output is used");
            }
            return self.pool1d(n, x, kind);
        }
        if xs.len() != 4 {
            return unsup(format!(
                "{}-D pooling is not supported",
                xs.len().saturating_sub(2)
            ));
        }
        if kind == PoolKind::Max && n.output.get(1).is_some_and(|o| self.used(o)) {
            return unsup("the Indices output is used");
        }
        let Some(k) = a.ints("kernel_shape")? else {
            return bad("kernel_shape is required");
        };
        if k.len() != 2 || k.iter().any(|&v| v < 1) {
            return bad(format!("kernel_shape {k:?} must be 2 positive values"));
        }
        let kernel = size_values(&k, "kernel")?;
        let strides = Self::window_attr(a, "strides", 2)?;
        let dil = Self::window_attr(a, "dilations", 2)?;
        if dil != [1, 1] {
            return unsup(format!("dilations {dil:?} are not supported"));
        }
        if a.int_or("storage_order", 0)? != 0 {
            return unsup("storage_order 1 is not supported");
        }
        let ceil = a.int_or("ceil_mode", 0)? != 0;
        let include_pad = kind == PoolKind::Average && a.int_or("count_include_pad", 0)? != 0;
        let input = [xs[2], xs[3]];
        let sp = self.spatial_pads(a, &input, &kernel, &strides, &[1, 1])?;
        let mut extra = [0usize; 2];
        for i in 0..2 {
            let padded = input[i] + sp[i].0 + sp[i].1;
            if padded < kernel[i] {
                return bad(format!(
                    "kernel {kernel:?} is larger than the padded input {xs:?}"
                ));
            }
            if ceil {
                let span = padded - kernel[i];
                let mut out = span.div_ceil(strides[i]) + 1;
                // The last window must start inside the input or the begin padding.
                if (out - 1) * strides[i] >= input[i] + sp[i].0 {
                    out -= 1;
                }
                extra[i] = ((out - 1) * strides[i] + kernel[i]).saturating_sub(padded);
            }
        }
        let mut pads = [sp[0].0, sp[1].0, sp[0].1 + extra[0], sp[1].1 + extra[1]];
        let mut src = x;
        if include_pad && sp.iter().any(|&(b, e)| b + e > 0) {
            if extra != [0, 0] {
                return unsup("count_include_pad=1 with ceil_mode is not supported");
            }
            src = self.emit_tmp(
                Op::Pad {
                    before: vec![0, 0, sp[0].0, sp[1].0],
                    after: vec![0, 0, sp[0].1, sp[1].1],
                    mode: PadMode::Constant,
                    value: 0.0,
                },
                &[x],
                "pad",
            )?;
            pads = [0; 4];
        } else if include_pad && extra != [0, 0] {
            return unsup("count_include_pad=1 with ceil_mode is not supported");
        }
        let op = Op::Pool2d {
            kind,
            kernel: [kernel[0], kernel[1]],
            strides: [strides[0], strides[1]],
            pads,
            layout: Layout::Nchw,
        };
        let out = self.out0(n)?;
        self.emit_to(op, &[src], out)?;
        Ok(())
    }

    fn global_pool(&mut self, n: &NodeProto, op: ReduceOp) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let rank = self.shape(x).len();
        if rank < 3 {
            return bad(format!("expects data of rank ≥ 3, got rank {rank}"));
        }
        let out = self.out0(n)?;
        self.emit_to(
            Op::Reduce {
                op,
                axes: (2..rank).collect(),
                keep_dims: true,
            },
            &[x],
            out,
        )?;
        Ok(())
    }

    /// Sorted, unique, non-negative axes.
    fn norm_axes(axes: &[i64], rank: usize) -> R<Vec<usize>> {
        let mut v = axes
            .iter()
            .map(|&x| norm_axis(x, rank))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        v.sort_unstable();
        v.dedup();
        Ok(v)
    }

    fn reduce(&mut self, n: &NodeProto, a: &Attrs, op: ReduceOp) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let rank = self.shape(x).len();
        let axes_from_input = self.opset >= 18 || (op == ReduceOp::Sum && self.opset >= 13);
        let axes = if axes_from_input {
            self.const_ints(n, 1, "axes")?
        } else {
            a.ints("axes")?
        };
        let keep_dims = a.int_or("keepdims", 1)? != 0;
        let out = self.out0(n)?;
        let axes = match axes.filter(|v| !v.is_empty()) {
            Some(v) => Self::norm_axes(&v, rank)?,
            None if a.int_or("noop_with_empty_axes", 0)? != 0 => {
                let x = self.req(n, 0, "data")?;
                self.bind(out, x);
                return Ok(());
            }
            None => (0..rank).collect(),
        };
        self.emit_to(
            Op::Reduce {
                op,
                axes,
                keep_dims,
            },
            &[x],
            out,
        )?;
        Ok(())
    }

    fn concat(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let mut ins = Vec::new();
        for i in 0..n.input.len() {
            if let Some(id) = self.inp(n, i)? {
                ins.push(id);
            }
        }
        let Some(&first) = ins.first() else {
            return bad("needs at least one input");
        };
        let Some(axis) = a.int("axis")? else {
            return bad("axis is required");
        };
        let axis = norm_axis(axis, self.shape(first).len())?;
        let out = self.out0(n)?;
        if ins.len() == 1 {
            self.bind(out, first);
            return Ok(());
        }
        self.emit_to(Op::Concat { axis }, &ins, out)?;
        Ok(())
    }

    fn split(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let xs = self.shape(x);
        let axis = norm_axis(a.int_or("axis", 0)?, xs.len())?;
        let d = xs[axis];
        let k = n.output.len();
        if k == 0 {
            return bad("the node has no outputs");
        }
        let split = if self.opset >= 13 {
            self.const_ints(n, 1, "split")?
        } else {
            a.ints("split")?
        };
        let sizes = match split.filter(|v| !v.is_empty()) {
            Some(v) => {
                if v.len() != k {
                    return bad(format!("split {v:?} does not match {k} outputs"));
                }
                dim_values(&v, "split size")?
            }
            None => {
                if self.opset >= 18 && a.has("num_outputs") {
                    let chunk = d.div_ceil(k);
                    let sizes: Vec<usize> = (0..k)
                        .map(|i| d.saturating_sub(i * chunk).min(chunk))
                        .collect();
                    if sizes.contains(&0) && d >= k {
                        return bad(format!("cannot split {d} into {k} chunks"));
                    }
                    sizes
                } else {
                    if !d.is_multiple_of(k) {
                        return bad(format!("cannot split {d} evenly into {k} outputs"));
                    }
                    vec![d / k; k]
                }
            }
        };
        let names: Vec<String> = n
            .output
            .iter()
            .map(|o| {
                if o.is_empty() {
                    self.tmp("split")
                } else {
                    o.clone()
                }
            })
            .collect();
        let ids = self.emit(Op::Split { axis, sizes }, &[x], names)?;
        for (o, id) in n.output.iter().zip(ids) {
            self.bind(o, id);
        }
        Ok(())
    }

    fn slice(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let xs = self.shape(x);
        let rank = xs.len();
        let (starts, ends, axes, steps) = if self.opset >= 10 {
            let Some(s) = self.const_ints(n, 1, "starts")? else {
                return bad("starts is required");
            };
            let Some(e) = self.const_ints(n, 2, "ends")? else {
                return bad("ends is required");
            };
            (
                s,
                e,
                self.const_ints(n, 3, "axes")?,
                self.const_ints(n, 4, "steps")?,
            )
        } else {
            let (Some(s), Some(e)) = (a.ints("starts")?, a.ints("ends")?) else {
                return bad("starts and ends are required");
            };
            (s, e, a.ints("axes")?, None)
        };
        let k = starts.len();
        let axes = axes.unwrap_or_else(|| (0..k as i64).collect());
        let steps = steps.unwrap_or_else(|| vec![1; k]);
        if ends.len() != k || axes.len() != k || steps.len() != k {
            return bad("starts, ends, axes and steps must have the same length");
        }
        let mut begins = vec![0i64; rank];
        let mut endv: Vec<i64> = xs.iter().map(|&d| d as i64).collect();
        let mut stepv = vec![1i64; rank];
        let mut seen = HashSet::new();
        for i in 0..k {
            let ax = norm_axis(axes[i], rank)?;
            if !seen.insert(ax) {
                return bad(format!("axis {} is sliced twice", axes[i]));
            }
            if steps[i] == 0 {
                return bad("slice step 0");
            }
            // Steps longer than the axis take one element, like a step of the axis length.
            let lim = (xs[ax] as i64).max(1);
            begins[ax] = starts[i];
            endv[ax] = ends[i];
            stepv[ax] = steps[i].clamp(-lim, lim);
        }
        let out = self.out0(n)?;
        self.emit_to(
            Op::Slice {
                begins,
                ends: endv,
                steps: stepv,
            },
            &[x],
            out,
        )?;
        Ok(())
    }

    fn gather(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let mut idx = self.req(n, 1, "indices")?;
        let xs = self.shape(x);
        let axis = norm_axis(a.int_or("axis", 0)?, xs.len())?;
        if matches!(self.dtype(idx), DType::F32 | DType::F16 | DType::Bool) {
            return bad("indices must be integers");
        }
        if let Some(d) = self.cst(idx) {
            let dim = xs[axis] as i64;
            let v = d
                .to_i64_vec()
                .into_iter()
                .map(|i| {
                    let j = if i < 0 { i + dim } else { i };
                    if (0..dim).contains(&j) {
                        Ok(j)
                    } else {
                        Err(format!(
                            "index {i} is out of range for axis {axis} of length {dim}"
                        ))
                    }
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let nd = ConstData::from_i64(&d.shape(), v);
            if Some(&nd) != self.cst(idx) {
                let name = format!("{}_normalized", self.g.tensors[idx].name);
                idx = self.add_const(&name, nd);
            }
        }
        let out = self.out0(n)?;
        self.emit_to(Op::Gather { axis }, &[x, idx], out)?;
        Ok(())
    }

    fn reshape(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let target = if self.opset >= 5 {
            match self.const_ints(n, 1, "shape")? {
                Some(s) => s,
                None => return bad("shape is required"),
            }
        } else {
            match a.ints("shape")? {
                Some(s) => s,
                None => return bad("shape is required"),
            }
        };
        let allowzero = a.int_or("allowzero", 0)? != 0;
        let xs = self.shape(x);
        let shape = resolve_reshape(&xs, &target, allowzero)?;
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[x], out)?;
        Ok(())
    }

    fn flatten(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let xs = self.shape(x);
        let axis = norm_axis(a.int_or("axis", 1)?, xs.len() + 1)?;
        let shape = vec![
            xs[..axis].iter().product::<usize>(),
            xs[axis..].iter().product::<usize>(),
        ];
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[x], out)?;
        Ok(())
    }

    fn axes_arg(&mut self, n: &NodeProto, a: &Attrs) -> R<Option<Vec<i64>>> {
        if self.opset >= 13 {
            self.const_ints(n, 1, "axes")
        } else {
            Ok(a.ints("axes")?)
        }
    }

    fn squeeze(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let xs = self.shape(x);
        let axes = match self.axes_arg(n, a)? {
            Some(v) => Self::norm_axes(&v, xs.len())?,
            None => (0..xs.len()).filter(|&i| xs[i] == 1).collect(),
        };
        if let Some(&bad_axis) = axes.iter().find(|&&i| xs[i] != 1) {
            return bad(format!(
                "cannot squeeze axis {bad_axis} of size {} (shape {xs:?})",
                xs[bad_axis]
            ));
        }
        let shape: Vec<usize> = (0..xs.len())
            .filter(|i| !axes.contains(i))
            .map(|i| xs[i])
            .collect();
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[x], out)?;
        Ok(())
    }

    fn unsqueeze(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let xs = self.shape(x);
        let Some(axes) = self.axes_arg(n, a)? else {
            return bad("axes is required");
        };
        let out_rank = xs.len() + axes.len();
        let norm = Self::norm_axes(&axes, out_rank)?;
        if norm.len() != axes.len() {
            return bad(format!("axes {axes:?} repeat an axis"));
        }
        let mut it = xs.iter();
        let shape: Vec<usize> = (0..out_rank)
            .map(|i| {
                if norm.contains(&i) {
                    1
                } else {
                    *it.next().unwrap_or(&1)
                }
            })
            .collect();
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[x], out)?;
        Ok(())
    }

    fn transpose(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let rank = self.shape(x).len();
        let perm = match a.ints("perm")? {
            Some(p) => {
                let mut v = Vec::with_capacity(p.len());
                for &i in &p {
                    v.push(norm_axis(i, rank)?);
                }
                v
            }
            None => (0..rank).rev().collect(),
        };
        let out = self.out0(n)?;
        self.emit_to(Op::Transpose { perm }, &[x], out)?;
        Ok(())
    }

    fn expand(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let Some(target) = self.const_ints(n, 1, "shape")? else {
            return bad("shape is required");
        };
        let target = dim_values(&target, "shape dimension")?;
        let shape = shape::broadcast(&self.shape(x), &target)?;
        checked_elements(&shape)?;
        let out = self.out0(n)?;
        self.emit_to(Op::Expand { shape }, &[x], out)?;
        Ok(())
    }

    fn tile(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let Some(reps) = self.const_ints(n, 1, "repeats")? else {
            return bad("repeats is required");
        };
        let reps = size_values(&reps, "repeat")?;
        let out = self.out0(n)?;
        self.emit_to(Op::Tile { reps }, &[x], out)?;
        Ok(())
    }

    fn pad(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let rank = self.shape(x).len();
        let mode = match a.string_or("mode", "constant")?.as_str() {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            other => return unsup(format!("mode '{other}' is not supported")),
        };
        let (pads, value, axes) = if self.opset >= 11 {
            let Some(p) = self.const_ints(n, 1, "pads")? else {
                return bad("pads is required");
            };
            let v = self.const_scalar(n, 2, "constant_value")?.unwrap_or(0.0);
            (p, v, self.const_ints(n, 3, "axes")?)
        } else {
            let p = match a.ints("pads")? {
                Some(p) => p,
                None => a.ints("paddings")?.unwrap_or_default(),
            };
            (p, a.float_or("value", 0.0)?, None)
        };
        let axes = match axes {
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for &ax in &v {
                    out.push(norm_axis(ax, rank)?);
                }
                out
            }
            None => (0..rank).collect(),
        };
        if pads.len() != 2 * axes.len() {
            return bad(format!("pads {pads:?} must have {} values", 2 * axes.len()));
        }
        if pads.iter().any(|&p| p < 0) {
            return unsup(format!(
                "negative pads {pads:?} (cropping) are not supported"
            ));
        }
        let p = size_values(&pads, "pad")?;
        let (mut before, mut after) = (vec![0; rank], vec![0; rank]);
        let k = axes.len();
        for (i, &ax) in axes.iter().enumerate() {
            before[ax] = p[i];
            after[ax] = p[i + k];
        }
        let out = self.out0(n)?;
        self.emit_to(
            Op::Pad {
                before,
                after,
                mode,
                value,
            },
            &[x],
            out,
        )?;
        Ok(())
    }

    fn argmax(&mut self, n: &NodeProto, a: &Attrs, min: bool) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let rank = self.shape(x).len();
        let axis = norm_axis(a.int_or("axis", 0)?, rank)?;
        let keep_dims = a.int_or("keepdims", 1)? != 0;
        if a.int_or("select_last_index", 0)? != 0 {
            return unsup("select_last_index=1 is not supported");
        }
        let out = self.out0(n)?;
        let op = if min {
            Op::ArgMin { axis, keep_dims }
        } else {
            Op::ArgMax { axis, keep_dims }
        };
        self.emit_to(op, &[x], out)?;
        Ok(())
    }

    /// TopK (opset 10+: k is input 1; opset 1: attribute): largest, sorted only.
    fn topk(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let xs = self.shape(x);
        let axis = norm_axis(a.int_or("axis", -1)?, xs.len())?;
        if a.int_or("largest", 1)? != 1 {
            return unsup("largest=0 (smallest k) is not supported");
        }
        if a.int_or("sorted", 1)? != 1 {
            return unsup("sorted=0 is not supported");
        }
        let k = if self.opset >= 10 {
            match self.const_ints(n, 1, "K")? {
                Some(v) if v.len() == 1 => v[0],
                Some(v) => return bad(format!("K must have one element, has {}", v.len())),
                None => return bad("K is required"),
            }
        } else {
            match a.int("k")? {
                Some(k) => k,
                None => return bad("attribute k is required"),
            }
        };
        let k = match usize::try_from(k) {
            Ok(k) if k <= xs[axis] => k,
            _ => return bad(format!("K = {k} is out of range for axis {axis} of {xs:?}")),
        };
        if !matches!(self.dtype(x), DType::F32 | DType::I32 | DType::I64) {
            return unsup(format!("TopK of {} is not supported", self.dtype(x).name()));
        }
        let names: Vec<String> = (0..2)
            .map(|i| match n.output.get(i).filter(|o| !o.is_empty()) {
                Some(o) => o.clone(),
                None => self.tmp(if i == 0 { "values" } else { "indices" }),
            })
            .collect();
        let ids = self.emit(Op::TopK { axis, k }, &[x], names.clone())?;
        for (name, id) in names.iter().zip(ids) {
            self.bind(name, id);
        }
        Ok(())
    }

    fn cast(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let Some(to) = a.int("to")? else {
            return bad("'to' is required");
        };
        let to = match cast_dtype(to as i32) {
            Ok(t) => t,
            Err(e) => return unsup(e),
        };
        let out = self.out0(n)?;
        if self.dtype(x) == to {
            self.bind(out, x);
            return Ok(());
        }
        self.emit_to(Op::Cast { to }, &[x], out)?;
        Ok(())
    }

    fn resize(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let xs = self.shape(x);
        if xs.len() != 4 {
            return unsup(format!("only 4-D resize is supported, got {xs:?}"));
        }
        let mode = a.string_or("mode", "nearest")?;
        let legacy = n.op_type == "Upsample" || self.opset < 11;
        let (coord, nearest, scales, sizes, axes) = if legacy {
            let scales = if n.op_type == "Upsample" && self.opset < 9 {
                a.floats("scales")?
                    .map(|v| v.into_iter().map(|s| s as f64).collect())
            } else {
                self.const_input(n, 1, "scales")?
                    .map(|d| d.to_f32_vec().into_iter().map(|s| s as f64).collect())
            };
            (
                "asymmetric".to_string(),
                "floor".to_string(),
                scales,
                None,
                None,
            )
        } else {
            if a.int_or("exclude_outside", 0)? != 0 {
                return unsup("exclude_outside=1 is not supported");
            }
            if a.int_or("antialias", 0)? != 0 {
                return unsup("antialias=1 is not supported");
            }
            let policy = a.string_or("keep_aspect_ratio_policy", "stretch")?;
            if policy != "stretch" {
                return unsup(format!(
                    "keep_aspect_ratio_policy '{policy}' is not supported"
                ));
            }
            let scales: Option<Vec<f64>> = self
                .const_input(n, 2, "scales")?
                .filter(|d| !d.is_empty())
                .map(|d| d.to_f32_vec().into_iter().map(|s| s as f64).collect());
            let sizes = self
                .const_input(n, 3, "sizes")?
                .filter(|d| !d.is_empty())
                .map(|d| d.to_i64_vec());
            (
                a.string_or("coordinate_transformation_mode", "half_pixel")?,
                a.string_or("nearest_mode", "round_prefer_floor")?,
                scales,
                sizes,
                a.ints("axes")?,
            )
        };
        let axes: Vec<usize> = match axes {
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for &ax in &v {
                    out.push(norm_axis(ax, 4)?);
                }
                out
            }
            None => (0..4).collect(),
        };
        let mut out_shape = xs.clone();
        if let Some(sz) = sizes {
            if sz.len() != axes.len() {
                return bad(format!("sizes {sz:?} must have {} values", axes.len()));
            }
            for (&ax, &s) in axes.iter().zip(&sz) {
                out_shape[ax] = dim_value(s, "size")?;
            }
        } else if let Some(sc) = scales {
            if sc.len() != axes.len() {
                return bad(format!("scales {sc:?} must have {} values", axes.len()));
            }
            for (&ax, &s) in axes.iter().zip(&sc) {
                if !(s.is_finite() && s > 0.0) {
                    return bad(format!("scale {s} is not positive"));
                }
                let v = (xs[ax] as f64 * s).floor();
                if v > super::proto::MAX_ELEMENTS as f64 {
                    return bad(format!("scale {s} is too large"));
                }
                out_shape[ax] = v as usize;
            }
        } else {
            return bad("needs scales or sizes");
        }
        if out_shape[0] != xs[0] || out_shape[1] != xs[1] {
            return unsup(format!(
                "resizing N or C ({xs:?} → {out_shape:?}) is not supported"
            ));
        }
        let (oh, ow) = (out_shape[2], out_shape[3]);
        if oh == 0 || ow == 0 {
            return bad(format!("output size {out_shape:?} is empty"));
        }
        let (rmode, coords) = match (mode.as_str(), coord.as_str(), nearest.as_str()) {
            ("linear" | "bilinear", "half_pixel", _) => {
                (ResizeMode::Bilinear, ResizeCoords::HalfPixel)
            }
            ("linear" | "bilinear", "pytorch_half_pixel", _) if oh > 1 && ow > 1 => {
                (ResizeMode::Bilinear, ResizeCoords::HalfPixel)
            }
            ("linear" | "bilinear", "align_corners", _) => {
                (ResizeMode::Bilinear, ResizeCoords::AlignCorners)
            }
            ("linear" | "bilinear", "asymmetric", _) => {
                (ResizeMode::Bilinear, ResizeCoords::Asymmetric)
            }
            ("nearest", "asymmetric", "floor") => (ResizeMode::Nearest, ResizeCoords::Asymmetric),
            ("nearest", "half_pixel", "round_prefer_ceil")
            | ("nearest", "tf_half_pixel_for_nn", "floor") => {
                (ResizeMode::Nearest, ResizeCoords::HalfPixel)
            }
            ("nearest", "align_corners", "round_prefer_ceil") => {
                (ResizeMode::Nearest, ResizeCoords::AlignCorners)
            }
            _ => {
                let nm = if mode == "nearest" {
                    format!(", nearest_mode '{nearest}'")
                } else {
                    String::new()
                };
                return unsup(format!(
                    "mode '{mode}' with coordinate_transformation_mode '{coord}'{nm} has no \
                     TFLite equivalent"
                ));
            }
        };
        let out = self.out0(n)?;
        self.emit_to(
            Op::Resize {
                mode: rmode,
                coords,
                size: [oh, ow],
                layout: Layout::Nchw,
            },
            &[x],
            out,
        )?;
        Ok(())
    }

    fn shape_op(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let xs = self.shape(x);
        let r = xs.len() as i64;
        let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let start = clampi(a.int_or("start", 0)?);
        let end = clampi(a.int_or("end", r)?);
        let v: Vec<i64> = if start < end {
            xs[start..end].iter().map(|&d| d as i64).collect()
        } else {
            vec![]
        };
        let out = self.out0(n)?;
        self.out_const(out, ConstData::from_i64(&[v.len()], v))
    }

    fn constant_of_shape(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let Some(shape) = self.const_ints(n, 0, "shape")? else {
            return bad("shape is required");
        };
        let shape = dim_values(&shape, "dimension")?;
        let value = match a.tensor("value")? {
            Some(t) => decode_tensor(t)?,
            None => ConstData::scalar_f32(0.0),
        };
        let c = fold::constant_of_shape(&shape, &value)?;
        let out = self.out0(n)?;
        self.out_const(out, c)
    }

    fn constant(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let data = if let Some(t) = a.tensor("value")? {
            decode_tensor(t)?
        } else if let Some(f) = a.float("value_float")? {
            ConstData::scalar_f32(f)
        } else if let Some(v) = a.floats("value_floats")? {
            ConstData::from_f32(&[v.len()], v)
        } else if let Some(i) = a.int("value_int")? {
            ConstData::from_i64(&[], vec![i])
        } else if let Some(v) = a.ints("value_ints")? {
            ConstData::from_i64(&[v.len()], v)
        } else if a.has("value_string") || a.has("value_strings") {
            return unsup("string constants are not supported");
        } else if a.has("sparse_value") {
            return unsup("sparse constants are not supported");
        } else {
            return bad("no value attribute");
        };
        let out = self.out0(n)?;
        self.out_const(out, data)
    }

    fn const_logic(&mut self, n: &NodeProto, op: &str) -> R<()> {
        let mut vals = Vec::new();
        let mut ids = Vec::new();
        for i in 0..n.input.len() {
            let Some(id) = self.inp(n, i)? else {
                return bad(format!("missing input {i}"));
            };
            ids.push(id);
            if let Some(d) = self.cst(id) {
                vals.push(d.clone());
            }
        }
        if vals.len() < ids.len() {
            return self.runtime_logic(n, op, &ids);
        }
        let need = if op == "Not" {
            1
        } else if op == "Where" {
            3
        } else {
            2
        };
        if vals.len() != need {
            return bad(format!("expects {need} inputs, got {}", vals.len()));
        }
        let r = match op {
            "Not" => fold::not(&vals[0]),
            "Where" => fold::where_(&vals[0], &vals[1], &vals[2])?,
            "And" | "Or" | "Xor" => fold::logical(op, &vals[0], &vals[1])?,
            _ => fold::compare(op, &vals[0], &vals[1])?,
        };
        let out = self.out0(n)?;
        self.out_const(out, r)
    }
}

impl Importer<'_> {
    /// Comparisons, logic and Where on run-time values: TFLite EQUAL/LESS/..., LOGICAL_*,
    /// SELECT_V2.
    fn runtime_logic(&mut self, n: &NodeProto, op: &str, ids: &[TensorId]) -> R<()> {
        use crate::ir::CompareOp as C;
        let need = match op {
            "Not" => 1,
            "Where" => 3,
            _ => 2,
        };
        if ids.len() != need {
            return bad(format!("expects {need} inputs, got {}", ids.len()));
        }
        let out = self.out0(n)?;
        let cmp = match op {
            "Equal" => Some(C::Equal),
            "Less" => Some(C::Less),
            "Greater" => Some(C::Greater),
            "LessOrEqual" => Some(C::LessEqual),
            "GreaterOrEqual" => Some(C::GreaterEqual),
            "Xor" => Some(C::NotEqual),
            _ => None,
        };
        let bool_in = |s: &Self, i: usize| -> R<()> {
            if s.dtype(ids[i]) != DType::Bool {
                return bad(format!(
                    "input {i} must be bool, is {}",
                    s.dtype(ids[i]).name()
                ));
            }
            Ok(())
        };
        if let Some(c) = cmp {
            if op == "Xor" {
                bool_in(self, 0)?;
                bool_in(self, 1)?;
            }
            let (a, b) = self.same_type(ids[0], ids[1])?;
            let dt = self.dtype(a);
            if dt == DType::Bool && !matches!(c, C::Equal | C::NotEqual) {
                return unsup(format!("{op} of bool tensors is not supported"));
            }
            if matches!(dt, DType::F16 | DType::U8) {
                return unsup(format!("{op} of {} tensors is not supported", dt.name()));
            }
            self.emit_to(Op::Compare { op: c }, &[a, b], out)?;
            return Ok(());
        }
        match op {
            "And" | "Or" => {
                bool_in(self, 0)?;
                bool_in(self, 1)?;
                self.emit_to(Op::Logical { and: op == "And" }, ids, out)?;
            }
            "Not" => {
                bool_in(self, 0)?;
                self.emit_to(Op::Not, ids, out)?;
            }
            _ => {
                bool_in(self, 0)?;
                let (x, y) = self.same_type(ids[1], ids[2])?;
                self.emit_to(Op::Where, &[ids[0], x, y], out)?;
            }
        }
        Ok(())
    }

    /// Two operands with one element type: a constant is cast to the run-time operand's type
    /// (exporters mix int32/int64 constants freely); two run-time operands must agree.
    fn same_type(&mut self, a: TensorId, b: TensorId) -> R<(TensorId, TensorId)> {
        let (da, db) = (self.dtype(a), self.dtype(b));
        if da == db {
            return Ok((a, b));
        }
        if let Some(d) = self.cst(b).cloned() {
            let c = self.add_const(&format!("{}/cast", self.cur), d.cast(da));
            return Ok((a, c));
        }
        if let Some(d) = self.cst(a).cloned() {
            let c = self.add_const(&format!("{}/cast", self.cur), d.cast(db));
            return Ok((c, b));
        }
        bad(format!(
            "operands have different types ({} and {})",
            da.name(),
            db.name()
        ))
    }
}

fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: Activation::None,
    }
}

/// ONNX Reshape's target → a fully resolved shape (0 copies the input dim unless `allowzero`;
/// one -1 is inferred).
fn resolve_reshape(
    input: &[usize],
    target: &[i64],
    allowzero: bool,
) -> std::result::Result<Vec<usize>, String> {
    let total = checked_elements(input)?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &v) in target.iter().enumerate() {
        match v {
            -1 => {
                if infer.replace(i).is_some() {
                    return Err(format!("shape {target:?} has more than one -1"));
                }
                out.push(1);
            }
            0 if !allowzero => match input.get(i) {
                Some(&d) => out.push(d),
                None => {
                    return Err(format!(
                        "shape {target:?} copies dimension {i}, which {input:?} does not have"
                    ))
                }
            },
            v if v < 0 => return Err(format!("shape {target:?} has invalid dimension {v}")),
            v => out.push(dim_value(v, "dimension")?),
        }
    }
    let known = out
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("shape {target:?} is too large"))?;
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(format!("cannot reshape {input:?} to {target:?}"));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(format!("cannot reshape {input:?} to {target:?}"));
    }
    Ok(out)
}
