//! ONNX protobuf → IR: graph plumbing (inputs, topological order, constants, outputs) and one
//! small function per ONNX op that validates its attributes and builds our `Op`.
//!
//! Nodes whose inputs are all constant are evaluated right away (`ir::eval`), which folds the
//! shape subgraphs PyTorch exports. Unsupported ops are collected and reported all at once.
//!
//! `Importer::node` dispatches on the op type; the op functions live in one file per op family
//! (`conv.rs`, `reshape.rs`, `slice.rs`, ...), each naming the ONNX ops it imports.

mod activation;
mod attention;
mod constant;
mod control_flow;
mod conv;
mod elementwise;
mod inputs;
mod logic;
mod loops;
mod loss;
mod matmul;
mod normalization;
mod pointwise;
#[path = "../qdq.rs"]
mod qdq;
#[path = "../qdq_dynamic.rs"]
mod qdq_dynamic;
#[path = "../qdq_qoperator.rs"]
mod qdq_qoperator;
#[path = "../recurrent.rs"]
mod recurrent;
mod reduce;
mod reshape;
mod resize;
mod rotary;
mod rounding;
mod scatter;
mod schedule;
#[path = "../sequence_lstm.rs"]
mod sequence_lstm;
mod slice;

use super::fold;
use super::proto::{checked_elements, decode_tensor, norm_axis, Attrs};
use super::ImportOptions;
use crate::ir::{
    eval, shape, Activation, BinaryOp, ConstData, DType, Graph, Node, Op, PoolKind, ReduceOp,
    TensorId, UnaryOp,
};
use anyhow::{anyhow, bail, Result};
use prost::Message;
use schedule::{node_label, node_reads, schedule, subgraph_values};
use std::collections::{HashMap, HashSet};
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
    let rewritten = qdq_dynamic::rewrite_dynamic(graph);
    let graph = rewritten.as_ref().unwrap_or(graph);
    // QOperator-format ops, rewritten to the equivalent QDQ graph.
    let rewritten_q = qdq_qoperator::rewrite_qoperator(graph);
    let graph = rewritten_q.as_ref().unwrap_or(graph);
    let order = schedule(graph, false).map_err(|e| anyhow!("{file}: {e}"))?;
    let mut imp = Importer::new(file, opset, graph, &order);
    imp.training_as_inference = opts.training_as_inference;
    imp.lstm = opts.lstm;
    imp.inputs(graph, opts)?;
    for &i in &order {
        imp.run_node(&graph.node[i], i)?;
    }
    imp.finish(graph)
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
    /// Graph outputs dropped on purpose (training-only BatchNormalization outputs, with
    /// `training_as_inference`).
    dropped_outputs: HashSet<String>,
    /// [`ImportOptions::training_as_inference`].
    training_as_inference: bool,
    /// [`ImportOptions::lstm`].
    lstm: super::LstmMode,
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
            training_as_inference: false,
            lstm: super::LstmMode::default(),
            cur: String::new(),
            qdq: Default::default(),
        }
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
        self.g.tensors[id].data.as_deref()
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
        let datas: Vec<&ConstData> = ins.iter().filter_map(|t| t.data.as_deref()).collect();
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

    /// A scalar constant of `dtype` (for decompositions).
    fn scalar(&mut self, v: f32, dtype: DType, what: &str) -> TensorId {
        let base = format!("{}/{what}", self.cur);
        self.add_const(&base, ConstData::scalar_f32(v).cast(dtype))
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
            "Dropout" => self.dropout(n),
            "Add" => self.binary(n, BinaryOp::Add),
            "Sub" => self.binary(n, BinaryOp::Sub),
            "Mul" => self.binary(n, BinaryOp::Mul),
            "Div" => self.binary(n, BinaryOp::Div),
            "Pow" => self.binary(n, BinaryOp::Pow),
            "Mod" => self.modulo(n, &a),
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
            "Attention" => self.attention(n, &a),
            "BatchNormalization" => self.batchnorm(n, &a),
            "LayerNormalization" => self.layernorm(n, &a),
            "RMSNormalization" => self.rmsnorm(n, &a),
            "LpNormalization" => self.lp_norm(n, &a),
            "Ceil" => self.float_unary(n, UnaryOp::Ceil),
            "Round" => self.float_unary(n, UnaryOp::Round),
            "Sin" => self.float_unary(n, UnaryOp::Sin),
            "Cos" => self.float_unary(n, UnaryOp::Cos),
            "Celu" => self.celu(n, &a),
            "NegativeLogLikelihoodLoss" => self.nll_loss(n, &a),
            "SoftmaxCrossEntropyLoss" => self.softmax_cross_entropy(n, &a),
            "Softsign" => self.softsign(n),
            "ThresholdedRelu" => self.thresholded_relu(n, &a),
            "Shrink" => self.shrink(n, &a),
            "Swish" => self.swish(n, &a),
            "Mish" => self.mish(n),
            "SwiGLU" => self.swiglu(n, &a),
            "RotaryEmbedding" => self.rotary_embedding(n, &a),
            "Sign" => self.sign(n),
            "Sinh" | "Cosh" => self.hyperbolic(n),
            "Trilu" => self.trilu(n, &a),
            "IsNaN" | "IsInf" => self.is_special(n, &a),
            "Hardmax" => self.hardmax(n, &a),
            "CenterCropPad" => self.center_crop_pad(n, &a),
            "MaxPool" => self.pool(n, &a, PoolKind::Max),
            "AveragePool" => self.pool(n, &a, PoolKind::Average),
            "LpPool" => self.lp_pool(n, &a),
            "GlobalAveragePool" => self.global_pool(n, ReduceOp::Mean),
            "GlobalMaxPool" => self.global_pool(n, ReduceOp::Max),
            "ReduceMean" => self.reduce(n, &a, ReduceOp::Mean),
            "ReduceSum" => self.reduce(n, &a, ReduceOp::Sum),
            "ReduceMax" => self.reduce(n, &a, ReduceOp::Max),
            "ReduceMin" => self.reduce(n, &a, ReduceOp::Min),
            "ReduceProd" => self.reduce(n, &a, ReduceOp::Prod),
            "ReduceSumSquare" | "ReduceL1" | "ReduceL2" | "ReduceLogSum" => {
                self.reduce_composite(n, &a)
            }
            "Concat" => self.concat(n, &a),
            "Split" => self.split(n, &a),
            "Slice" => self.slice(n, &a),
            "Gather" => self.gather(n, &a),
            "GatherElements" => self.gather_elements(n, &a),
            "Compress" => self.compress(n, &a),
            "ReverseSequence" => self.reverse_sequence(n, &a),
            "OneHot" => self.one_hot(n, &a),
            "ScatterElements" | "Scatter" => self.scatter_elements(n, &a),
            "ScatterND" => self.scatter_nd(n, &a),
            "GatherND" => self.gather_nd(n, &a),
            "Reshape" => self.reshape(n, &a),
            "Flatten" => self.flatten(n, &a),
            "DepthToSpace" => self.depth_space(n, &a, true),
            "SpaceToDepth" => self.depth_space(n, &a, false),
            "Squeeze" => self.squeeze(n, &a),
            "Unsqueeze" => self.unsqueeze(n, &a),
            "Transpose" => self.transpose(n, &a),
            "Expand" => self.expand(n),
            "Tile" => self.tile(n),
            "Pad" => self.pad(n, &a),
            "ArgMax" => self.argmax(n, &a, false),
            "ArgMin" => self.argmax(n, &a, true),
            "TopK" => self.topk(n, &a),
            "CumSum" => self.cumsum(n, &a),
            "LSTM" if self.lstm == super::LstmMode::Sequence => sequence_lstm::lstm(self, n, &a),
            "LSTM" | "GRU" => {
                let first = self.g.nodes.len();
                let r = if n.op_type == "LSTM" {
                    recurrent::lstm(self, n, &a)
                } else {
                    recurrent::gru(self, n, &a)
                };
                // The unrolled ops share the layer's name: one entry per name.
                for k in first..self.g.nodes.len() {
                    if !self.g.recurrent_nodes.contains(&self.g.nodes[k].name) {
                        let name = self.g.nodes[k].name.clone();
                        self.g.recurrent_nodes.push(name);
                    }
                }
                r
            }
            "Cast" => self.cast(n, &a),
            "CastLike" => self.cast_like(n),
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
            "EyeLike" => self.eye_like(n, &a),
            "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or"
            | "Xor" | "Not" | "Where" => self.const_logic(n, op),
            "Elu" | "Selu" => self.elu(n, &a),
            "Softplus" => self.softplus(n),
            "InstanceNormalization" => self.instance_norm(n, &a),
            "If" => self.if_op(n),
            "Loop" => self.loop_op(n),
            "QuantizeLinear" => self.quantize_linear(n, &a),
            "DequantizeLinear" => self.dequantize_linear(n, &a),
            _ => unsup("operator is not supported"),
        }
    }
}

fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: Activation::None,
    }
}
