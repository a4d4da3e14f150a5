//! Already-quantized ONNX models: QuantizeLinear/DequantizeLinear (QDQ format, as ONNX Runtime's
//! `quantize_static` and PyTorch quantization-aware training export them) and ONNX Runtime's
//! dynamic quantization (DynamicQuantizeLinear + MatMulInteger/ConvInteger).
//!
//! The importer removes the Q/DQ pairs and keeps what they say as *annotations*: a float tensor
//! whose `quant` is set carries the parameters the model quantizes it with (always in the int8
//! domain: uint8 zero points are shifted by -128, which represents the same real values). A
//! DequantizeLinear of a constant becomes the float constant `(q - zp) * scale`, annotated with the
//! model's int8 values' parameters, so quantization can reproduce those exact values. The
//! annotations travel through the optimizer and layout passes (which permute a constant's axis);
//! `quantize::qdq` takes them off the graph before export and uses them instead of calibration.
//!
//! Dynamic quantization is rewritten, before import, into the equivalent float graph with
//! DequantizeLinear on the weights: DynamicQuantizeLinear(x) → ConvInteger/MatMulInteger(·, Wq) →
//! Cast → Mul(·, x_scale × w_scale) becomes Conv/MatMul(x, DequantizeLinear(Wq, w_scale, w_zp)).

use super::*;
use crate::ir::QuantParams;
use tract_onnx::pb::AttributeProto;

/// Importer state for Q/DQ.
#[derive(Default)]
pub(super) struct QdqState {
    /// ONNX values produced by QuantizeLinear of a runtime tensor (only DequantizeLinear may read
    /// them: we do not run integer ONNX ops).
    q_outputs: HashSet<String>,
}

/// Scale and zero point of a QuantizeLinear/DequantizeLinear node.
struct NodeParams {
    scale: Vec<f32>,
    /// As stored (uint8 values unshifted).
    zero_point: Vec<i64>,
    /// The integer type: I8, U8 or I32.
    dtype: DType,
    /// The per-axis axis of the operand, if per-axis.
    axis: Option<usize>,
}

impl NodeParams {
    /// The parameters in the int8 domain (uint8 zero points shifted by -128).
    fn int8(&self) -> QuantParams {
        let shift = if self.dtype == DType::U8 { 128 } else { 0 };
        QuantParams {
            scale: self.scale.clone(),
            zero_point: self.zero_point.iter().map(|z| z - shift).collect(),
            axis: self.axis.unwrap_or(0),
        }
    }

    /// Index into scale/zero point of element `i` of a tensor of `shape`.
    fn channel_of(&self, shape: &[usize]) -> impl Fn(usize) -> usize {
        let (inner, len) = match self.axis {
            Some(a) => (shape[a + 1..].iter().product::<usize>(), shape[a]),
            None => (1, 1),
        };
        move |i| (i / inner.max(1)) % len.max(1)
    }
}

const QOPERATOR_OPS: &[&str] = &[
    "QLinearConv",
    "QLinearMatMul",
    "QLinearAdd",
    "QLinearMul",
    "QLinearSigmoid",
    "QLinearLeakyRelu",
    "QLinearConcat",
    "QLinearAveragePool",
    "QLinearGlobalAveragePool",
    "QLinearSoftmax",
    "QLinearReduceMean",
    "QGemm",
    "ConvInteger",
    "MatMulInteger",
    "DynamicQuantizeLinear",
    "QAttention",
    "DynamicQuantizeMatMul",
    "MatMulIntegerToFloat",
];

/// The message for an integer-operator (QOperator-format) node, which we do not import.
pub(super) fn qoperator_message(op: &str) -> Option<String> {
    if !QOPERATOR_OPS.contains(&op) {
        return None;
    }
    Some(
        if matches!(
            op,
            "ConvInteger" | "MatMulInteger" | "DynamicQuantizeLinear"
        ) {
            "only the pattern onnxruntime's quantize_dynamic writes (DynamicQuantizeLinear → \
         ConvInteger/MatMulInteger with constant int8 weights → Cast → Mul by the scales) is \
         supported"
                .to_string()
        } else {
            "this QOperator-format op is not supported (QLinearConv, QLinearMatMul, QGemm, \
         QLinearAdd/Mul, QLinear pools, QLinearSigmoid/LeakyRelu/Softmax/Concat are); quantize \
         the float model in QDQ format instead (onnxruntime.quantization.quantize_static(..., \
         quant_format=QuantFormat.QDQ)), which litecvt converts to full int8 with its scales"
                .to_string()
        },
    )
}

fn round_half_even(x: f32) -> f32 {
    x.round_ties_even()
}

impl<'m> Importer<'m> {
    /// Reads scale (input 1), zero point (input 2) and the axis of a Q/DQ node whose operand has
    /// `shape`. `default_dtype` is the integer type without a zero point.
    fn qdq_params(
        &mut self,
        n: &NodeProto,
        a: &Attrs,
        shape: &[usize],
        default_dtype: DType,
    ) -> R<NodeParams> {
        if a.int_or("block_size", 0)? != 0 {
            return unsup("blocked quantization (block_size) is not supported");
        }
        let Some(scale) = self.const_input(n, 1, "y_scale")? else {
            return bad("missing input 1 (scale)");
        };
        if scale.dtype() != DType::F32 {
            return unsup(format!("a {} scale is not supported", scale.dtype().name()));
        }
        let scales = scale.to_f32_vec();
        if scales.is_empty() || scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return bad(format!(
                "scales must be positive and finite, got {:?}",
                &scales[..scales.len().min(8)]
            ));
        }
        let zp = self.const_input(n, 2, "zero_point")?;
        let (zps, dtype) = match &zp {
            Some(z) => (z.to_i64_vec(), z.dtype()),
            None => (vec![0; scales.len()], default_dtype),
        };
        if !matches!(dtype, DType::I8 | DType::U8 | DType::I32) {
            return unsup(format!(
                "{} quantization is not supported (int8, uint8 and int32 are)",
                dtype.name()
            ));
        }
        let zps = if zps.len() == 1 && scales.len() > 1 {
            vec![zps[0]; scales.len()]
        } else {
            zps
        };
        if zps.len() != scales.len() {
            return bad(format!(
                "{} scales but {} zero points",
                scales.len(),
                zps.len()
            ));
        }
        let axis = if scales.len() == 1 {
            if scale.shape().len() > 1 {
                return bad(format!("scale of shape {:?} must be 1-D", scale.shape()));
            }
            None
        } else {
            if scale.shape().len() != 1 {
                return bad(format!("scale of shape {:?} must be 1-D", scale.shape()));
            }
            let axis = norm_axis(a.int_or("axis", 1)?, shape.len())?;
            if shape[axis] != scales.len() {
                return bad(format!(
                    "{} scales for axis {axis} of a tensor of shape {shape:?}",
                    scales.len()
                ));
            }
            Some(axis)
        };
        Ok(NodeParams {
            scale: scales,
            zero_point: zps,
            dtype,
            axis,
        })
    }

    /// Fails when `n` (not a DequantizeLinear) reads the integer output of a QuantizeLinear.
    pub(super) fn check_q_readers(&self, n: &NodeProto) -> R<()> {
        if n.op_type == "DequantizeLinear" {
            return Ok(());
        }
        if let Some(v) = n.input.iter().find(|i| self.qdq.q_outputs.contains(*i)) {
            return unsup(format!(
                "reads '{v}', the integer output of a QuantizeLinear; only DequantizeLinear may \
                 (integer ONNX ops are not supported)"
            ));
        }
        Ok(())
    }

    /// Fails when a graph output is the integer output of a QuantizeLinear.
    pub(super) fn check_q_outputs(&self, graph: &GraphProto) -> Result<()> {
        if let Some(o) = graph
            .output
            .iter()
            .find(|o| self.qdq.q_outputs.contains(&o.name))
        {
            bail!(
                "{}: graph output '{}' is the integer output of a QuantizeLinear; integer model \
                 outputs are not supported (end the graph with DequantizeLinear, and use \
                 --io-type int8 for an int8 interface)",
                self.file,
                o.name
            );
        }
        Ok(())
    }

    pub(super) fn quantize_linear(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "x")?;
        let out = self.out0(n)?;
        if self.dtype(x) != DType::F32 {
            return unsup(format!(
                "quantizing a {} tensor is not supported",
                self.dtype(x).name()
            ));
        }
        let default = match a.int("output_dtype")? {
            None | Some(0) | Some(2) => DType::U8,
            Some(3) => DType::I8,
            Some(t) => {
                return unsup(format!(
                    "output_dtype {} is not supported (int8 and uint8 are)",
                    crate::import::proto::onnx_type_name(t as i32)
                ))
            }
        };
        let shape = self.shape(x);
        let p = self.qdq_params(n, a, &shape, default)?;
        if p.dtype == DType::I32 {
            return unsup("quantizing to int32 is not supported");
        }
        let (lo, hi) = if p.dtype == DType::U8 {
            (0.0, 255.0)
        } else {
            (-128.0, 127.0)
        };
        if let Some(d) = self.cst(x) {
            // A weight's fake quantization (quantization-aware training): evaluate it.
            let ch = p.channel_of(&shape);
            let q: Vec<i64> = d
                .to_f32_vec()
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let c = ch(i);
                    (round_half_even(v / p.scale[c]) + p.zero_point[c] as f32).clamp(lo, hi) as i64
                })
                .collect();
            self.out_const(out, ConstData::from_i64(&shape, q).cast(p.dtype))?;
            return Ok(());
        }
        if p.axis.is_some() {
            return unsup("per-axis quantization of a runtime tensor is not supported");
        }
        // Activation: a QUANTIZE node now; DequantizeLinear removes the pair.
        let mut params = p.int8();
        params.axis = 0;
        let q = self.g.add_tensor(out.to_string(), shape, DType::I8);
        self.g.tensors[q].quant = Some(params);
        self.g.nodes.push(Node {
            name: self.cur.clone(),
            op: Op::Quantize,
            inputs: vec![x],
            outputs: vec![q],
        });
        self.bind(out, q);
        self.qdq.q_outputs.insert(out.to_string());
        Ok(())
    }

    pub(super) fn dequantize_linear(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "x")?;
        let out = self.out0(n)?;
        let shape = self.shape(x);
        let p = self.qdq_params(n, a, &shape, self.dtype(x))?;
        if let Some(d) = self.cst(x) {
            if d.dtype() != p.dtype {
                return bad(format!(
                    "x is {} but the zero point is {}",
                    d.dtype().name(),
                    p.dtype.name()
                ));
            }
            let ch = p.channel_of(&shape);
            let v: Vec<f32> = d
                .to_i64_vec()
                .iter()
                .enumerate()
                .map(|(i, &q)| {
                    let c = ch(i);
                    (q - p.zero_point[c]) as f32 * p.scale[c]
                })
                .collect();
            self.out_const(out, ConstData::from_f32(&shape, v))?;
            // int32 (bias) values are recomputed exactly from the input and weight scales.
            if p.dtype != DType::I32 {
                if let Some(&id) = self.values.get(out) {
                    self.g.tensors[id].quant = Some(p.int8());
                }
            }
            return Ok(());
        }
        // The DequantizeLinear of a QuantizeLinear: the float tensor, annotated.
        let producer = self
            .g
            .nodes
            .iter()
            .rev()
            .find(|nd| nd.outputs.contains(&x))
            .filter(|nd| nd.op == Op::Quantize)
            .map(|nd| nd.inputs[0]);
        let Some(f) = producer else {
            return unsup(
                "dequantizing a runtime tensor that no QuantizeLinear produced is not supported \
                 (integer model inputs and integer ONNX ops are not)",
            );
        };
        if p.axis.is_some() {
            return unsup("per-axis dequantization of a runtime tensor is not supported");
        }
        let mut params = p.int8();
        params.axis = 0;
        let have = self.g.tensors[x].quant.clone();
        if have.as_ref() != Some(&params) {
            return unsup(format!(
                "its scale/zero point {:?}/{:?} differ from those of the QuantizeLinear that \
                 produced its input ({:?})",
                params.scale, params.zero_point, have
            ));
        }
        // The first pair on a tensor decides its parameters (ONNX Runtime's tools write one).
        if self.g.tensors[f].quant.is_none() {
            self.g.tensors[f].quant = Some(params);
        }
        // A graph output that is the dequantized value: the tensor takes the output's name
        // (no copy node at the end), unless it is an input or another output already.
        let produced = self.g.nodes.iter().any(|nd| nd.outputs.contains(&f));
        let is_output = self
            .g
            .tensors
            .get(f)
            .is_some_and(|t| self.graph_outputs.contains(t.name.as_str()));
        if self.graph_outputs.contains(out) && produced && !is_output {
            self.g.tensors[f].name = out.to_string();
        }
        self.bind(out, f);
        Ok(())
    }

    /// Values that RESHAPE/TRANSPOSE only move have the parameters of the value they come from
    /// (forward, then backward), so that passes merging such ops keep an annotated tensor.
    pub(super) fn propagate_annotations(&mut self) {
        let moves = |op: &Op| matches!(op, Op::Reshape { .. } | Op::Transpose { .. });
        let g = &mut self.g;
        for k in 0..g.nodes.len() {
            let n = &g.nodes[k];
            if !moves(&n.op) || n.inputs.is_empty() || n.outputs.len() != 1 {
                continue;
            }
            let (i, o) = (n.inputs[0], n.outputs[0]);
            if g.tensors[o].quant.is_none() && g.tensors[o].dtype == DType::F32 {
                if let Some(q) = g.tensors[i]
                    .quant
                    .clone()
                    .filter(|_| !g.tensors[i].is_const())
                {
                    g.tensors[o].quant = Some(q);
                }
            }
        }
        for k in (0..g.nodes.len()).rev() {
            let n = &g.nodes[k];
            if !moves(&n.op) || n.inputs.is_empty() || n.outputs.len() != 1 {
                continue;
            }
            let (i, o) = (n.inputs[0], n.outputs[0]);
            let t = &g.tensors[i];
            if t.quant.is_none() && t.dtype == DType::F32 && !t.is_const() {
                g.tensors[i].quant = g.tensors[o].quant.clone();
            }
        }
    }
}

// ---- dynamic quantization --------------------------------------------------------------------

fn attr_int(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

/// Rewrites onnxruntime's `quantize_dynamic` pattern into float ops on dequantized weights
/// (`None` when the graph has none). Patterns that differ are left alone (and reported as
/// unsupported ops by the importer).
pub(super) fn rewrite_dynamic(graph: &GraphProto) -> Option<GraphProto> {
    if !graph
        .node
        .iter()
        .any(|n| matches!(n.op_type.as_str(), "ConvInteger" | "MatMulInteger"))
    {
        return None;
    }
    let mut producer: HashMap<&str, usize> = HashMap::new();
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            producer.insert(o, i);
        }
        for inp in n.input.iter().filter(|s| !s.is_empty()) {
            consumers.entry(inp).or_default().push(i);
        }
    }
    let outputs: HashSet<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    let inits: HashMap<&str, &TensorProto> = graph
        .initializer
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let only_consumer = |v: &str| -> Option<usize> {
        match consumers.get(v).map(|c| c.as_slice()) {
            Some([c]) if !outputs.contains(v) => Some(*c),
            _ => None,
        }
    };
    let mut removed: HashSet<usize> = HashSet::new();
    let mut replaced: HashMap<usize, Vec<NodeProto>> = HashMap::new();
    let mut new_inits: Vec<TensorProto> = Vec::new();
    for (i, n) in graph.node.iter().enumerate() {
        let conv = match n.op_type.as_str() {
            "ConvInteger" => true,
            "MatMulInteger" => false,
            _ => continue,
        };
        if !n.domain.is_empty() || n.input.len() < 2 || n.output.len() != 1 {
            continue;
        }
        let Some(&d) = producer.get(n.input[0].as_str()) else {
            continue;
        };
        let dq = &graph.node[d];
        if dq.op_type != "DynamicQuantizeLinear" || dq.output.len() != 3 || dq.input.is_empty() {
            continue;
        }
        if n.input
            .get(2)
            .is_some_and(|z| !z.is_empty() && *z != dq.output[2])
        {
            continue;
        }
        let w = n.input[1].as_str();
        let Some(wt) = inits.get(w) else { continue };
        let Some(c) = only_consumer(&n.output[0]) else {
            continue;
        };
        let cast = &graph.node[c];
        if cast.op_type != "Cast" || attr_int(cast, "to") != Some(1) || cast.output.len() != 1 {
            continue;
        }
        let Some(m) = only_consumer(&cast.output[0]) else {
            continue;
        };
        let mul = &graph.node[m];
        if mul.op_type != "Mul" || mul.input.len() != 2 {
            continue;
        }
        let s = if mul.input[0] == cast.output[0] {
            &mul.input[1]
        } else {
            &mul.input[0]
        };
        let Some(&m2) = producer.get(s.as_str()) else {
            continue;
        };
        let smul = &graph.node[m2];
        if smul.op_type != "Mul" || smul.input.len() != 2 {
            continue;
        }
        let ws = if smul.input[0] == dq.output[1] {
            &smul.input[1]
        } else if smul.input[1] == dq.output[1] {
            &smul.input[0]
        } else {
            continue;
        };
        let Some(wst) = inits.get(ws.as_str()) else {
            continue;
        };
        let Ok(scale) = decode_tensor(wst) else {
            continue;
        };
        let wshape: Vec<usize> = wt.dims.iter().map(|&d| d.max(0) as usize).collect();
        let count = scale.len();
        // Per output channel: conv weights [O, ...] (axis 0), MatMul weights [K, N] (axis 1).
        let axis = if conv { 0 } else { 1 };
        let wdq = format!("{}/weight_dequantized", mul.output[0]);
        let mut dq_inputs = vec![w.to_string(), ws.clone()];
        let mut dq_attrs = vec![];
        if count > 1 {
            if wshape.len() <= axis || wshape[axis] != count {
                continue;
            }
            // A broadcastable [O, 1, 1] scale becomes the 1-D per-axis form DequantizeLinear takes.
            let mut s1 = (*wst).clone();
            s1.name = format!("{}/weight_scale", mul.output[0]);
            s1.dims = vec![count as i64];
            dq_inputs[1] = s1.name.clone();
            new_inits.push(s1);
            dq_attrs.push(AttributeProto {
                name: "axis".into(),
                r#type: tract_onnx::pb::attribute_proto::AttributeType::Int as i32,
                i: axis as i64,
                ..Default::default()
            });
        }
        if let Some(z) = n.input.get(3).filter(|z| !z.is_empty()) {
            let Some(zt) = inits.get(z.as_str()) else {
                continue;
            };
            let mut z1 = (*zt).clone();
            let zlen: i64 = z1.dims.iter().product();
            if count > 1 && zlen == 1 {
                continue;
            }
            z1.name = format!("{}/weight_zero_point", mul.output[0]);
            z1.dims = if count > 1 {
                vec![count as i64]
            } else {
                vec![]
            };
            dq_inputs.push(z1.name.clone());
            new_inits.push(z1);
        }
        let dqn = NodeProto {
            name: format!("{}/weight_dequantize", n.name),
            op_type: "DequantizeLinear".into(),
            input: dq_inputs,
            output: vec![wdq.clone()],
            attribute: dq_attrs,
            ..Default::default()
        };
        let float = NodeProto {
            name: n.name.clone(),
            op_type: if conv { "Conv" } else { "MatMul" }.into(),
            input: vec![dq.input[0].clone(), wdq],
            output: vec![mul.output[0].clone()],
            attribute: if conv { n.attribute.clone() } else { vec![] },
            ..Default::default()
        };
        replaced.insert(i, vec![dqn, float]);
        removed.insert(c);
        removed.insert(m);
    }
    if replaced.is_empty() {
        return None;
    }
    // DynamicQuantizeLinear and the scale products die with their last reader.
    loop {
        let mut changed = false;
        for (i, n) in graph.node.iter().enumerate() {
            if removed.contains(&i) || replaced.contains_key(&i) {
                continue;
            }
            if !matches!(n.op_type.as_str(), "DynamicQuantizeLinear" | "Mul") {
                continue;
            }
            let dead = n.output.iter().all(|o| {
                !outputs.contains(o.as_str())
                    && consumers.get(o.as_str()).is_none_or(|cs| {
                        cs.iter()
                            .all(|c| removed.contains(c) || replaced.contains_key(c))
                    })
            });
            // Only Muls that multiply a DynamicQuantizeLinear scale.
            let is_scale_mul = n.op_type != "Mul"
                || n.input.iter().any(|inp| {
                    producer
                        .get(inp.as_str())
                        .is_some_and(|&p| graph.node[p].op_type == "DynamicQuantizeLinear")
                });
            if dead && is_scale_mul {
                removed.insert(i);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut g = graph.clone();
    g.node = Vec::with_capacity(graph.node.len());
    for (i, n) in graph.node.iter().enumerate() {
        if let Some(r) = replaced.get(&i) {
            g.node.extend(r.iter().cloned());
        } else if !removed.contains(&i) {
            g.node.push(n.clone());
        }
    }
    g.initializer.extend(new_inits);
    Some(g)
}

// ---- QOperator format --------------------------------------------------------------------------

fn f32_init(name: String, dims: Vec<i64>, v: &[f32]) -> TensorProto {
    TensorProto {
        name,
        dims,
        data_type: 1,
        raw_data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ..Default::default()
    }
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: tract_onnx::pb::attribute_proto::AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}

fn plain(op: &str, name: &str, inputs: Vec<String>, outputs: Vec<String>) -> NodeProto {
    NodeProto {
        name: name.into(),
        op_type: op.into(),
        input: inputs,
        output: outputs,
        ..Default::default()
    }
}

/// Rewrites QOperator-format ops (QLinearConv, QLinearMatMul, QGemm, QLinearAdd/Mul, QLinear
/// pools, sigmoid, leaky ReLU, concat) and the shape ops that run on their integer values into
/// the equivalent QDQ graph (DequantizeLinear → float op → QuantizeLinear), which imports like
/// any QDQ model. `None` when there is nothing to rewrite; ops it does not know are left alone
/// (and reported by the importer).
pub(super) fn rewrite_qoperator(graph: &GraphProto) -> Option<GraphProto> {
    const OPS: &[&str] = &[
        "QLinearConv",
        "QLinearMatMul",
        "QGemm",
        "QLinearAdd",
        "QLinearMul",
        "QLinearGlobalAveragePool",
        "QLinearAveragePool",
        "QLinearSigmoid",
        "QLinearLeakyRelu",
        "QLinearSoftmax",
        "QLinearConcat",
    ];
    const PASSTHROUGH: &[&str] = &[
        "Flatten",
        "Reshape",
        "Transpose",
        "MaxPool",
        "Squeeze",
        "Unsqueeze",
        "Identity",
    ];
    if !graph.node.iter().any(|n| OPS.contains(&n.op_type.as_str())) {
        return None;
    }
    let inits: HashMap<&str, &TensorProto> = graph
        .initializer
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let values = |name: &str| -> Option<Vec<f32>> {
        inits
            .get(name)
            .and_then(|t| decode_tensor(t).ok())
            .filter(|d| d.dtype() == DType::F32)
            .map(|d| d.to_f32_vec())
    };
    let mut r = QopRewrite::default();
    // A per-axis weight's axis (its scale has more than one value).
    let per_axis = |s: &str, axis: i64| values(s).filter(|v| v.len() > 1).map(|_| axis);
    let mut changed = false;
    for n in &graph.node {
        let op = n.op_type.as_str();
        let i = |k: usize| n.input.get(k).cloned().unwrap_or_default();
        let out = n.output.first().cloned().unwrap_or_default();
        if op == "QuantizeLinear" && n.input.len() >= 3 {
            r.quant.insert(out.clone(), (i(1), i(2)));
            r.nodes.push(n.clone());
            continue;
        }
        let (float_op, ins, attrs, y): FloatOp = match op {
            "QLinearConv" if n.input.len() >= 8 => {
                let x = r.dq(&i(0), &i(1), &i(2), None);
                let w = r.dq(&i(3), &i(4), &i(5), per_axis(&i(4), 0));
                let mut ins = vec![x, w];
                if !i(8).is_empty() {
                    match r.bias(&i(8), values(&i(1)), values(&i(4))) {
                        Some(b) => ins.push(b),
                        None => {
                            r.nodes.push(n.clone());
                            continue;
                        }
                    }
                }
                ("Conv", ins, n.attribute.clone(), Some((i(6), i(7))))
            }
            "QLinearMatMul" if n.input.len() >= 8 => {
                let a = r.dq(&i(0), &i(1), &i(2), None);
                let b = r.dq(&i(3), &i(4), &i(5), per_axis(&i(4), 1));
                ("MatMul", vec![a, b], vec![], Some((i(6), i(7))))
            }
            "QGemm" if n.input.len() >= 6 => {
                let trans_b = n.attribute.iter().any(|a| a.name == "transB" && a.i != 0);
                let a = r.dq(&i(0), &i(1), &i(2), None);
                let axis = if trans_b { 0 } else { 1 };
                let b = r.dq(&i(3), &i(4), &i(5), per_axis(&i(4), axis));
                let mut ins = vec![a, b];
                if !i(6).is_empty() {
                    match r.bias(&i(6), values(&i(1)), values(&i(4))) {
                        Some(c) => ins.push(c),
                        None => {
                            r.nodes.push(n.clone());
                            continue;
                        }
                    }
                }
                let attrs = n
                    .attribute
                    .iter()
                    .filter(|a| matches!(a.name.as_str(), "alpha" | "transA" | "transB"))
                    .cloned()
                    .collect();
                let y = (!i(7).is_empty()).then(|| (i(7), i(8)));
                ("Gemm", ins, attrs, y)
            }
            "QLinearAdd" | "QLinearMul" if n.input.len() >= 8 => {
                let a = r.dq(&i(0), &i(1), &i(2), None);
                let b = r.dq(&i(3), &i(4), &i(5), None);
                let f = if op == "QLinearAdd" { "Add" } else { "Mul" };
                (f, vec![a, b], vec![], Some((i(6), i(7))))
            }
            "QLinearGlobalAveragePool"
            | "QLinearAveragePool"
            | "QLinearSigmoid"
            | "QLinearLeakyRelu"
            | "QLinearSoftmax"
                if n.input.len() >= 5
                    && !n
                        .attribute
                        .iter()
                        .any(|a| a.name == "channels_last" && a.i != 0) =>
            {
                let x = r.dq(&i(0), &i(1), &i(2), None);
                let f = &op["QLinear".len()..];
                let attrs = n
                    .attribute
                    .iter()
                    .filter(|a| !matches!(a.name.as_str(), "channels_last" | "opset"))
                    .cloned()
                    .collect();
                (f, vec![x], attrs, Some((i(3), i(4))))
            }
            "QLinearConcat" if n.input.len() >= 5 && (n.input.len() - 2) % 3 == 0 => {
                let mut ins = Vec::new();
                for k in (2..n.input.len()).step_by(3) {
                    ins.push(r.dq(&i(k), &i(k + 1), &i(k + 2), None));
                }
                ("Concat", ins, n.attribute.clone(), Some((i(0), i(1))))
            }
            _ if PASSTHROUGH.contains(&op) && r.quant.contains_key(&i(0)) => {
                let (s, z) = r.quant[&i(0)].clone();
                let x = r.dq(&i(0), &s, &z, None);
                let mut ins = vec![x];
                ins.extend(n.input.iter().skip(1).cloned());
                (op, ins, n.attribute.clone(), Some((s, z)))
            }
            _ => {
                r.nodes.push(n.clone());
                continue;
            }
        };
        changed = true;
        let mut f = plain(float_op, &n.name, ins, vec![]);
        f.attribute = attrs;
        match y {
            Some((s, z)) => {
                let float_out = format!("{out}/float");
                f.output = vec![float_out.clone()];
                r.nodes.push(f);
                r.nodes.push(plain(
                    "QuantizeLinear",
                    &format!("{}/quantize", n.name),
                    vec![float_out, s.clone(), z.clone()],
                    vec![out.clone()],
                ));
                r.quant.insert(out, (s, z));
            }
            None => {
                f.output = vec![out];
                r.nodes.push(f);
            }
        }
    }
    let QopRewrite {
        nodes, new_inits, ..
    } = r;
    if !changed {
        return None;
    }
    let mut g = graph.clone();
    g.node = nodes;
    g.initializer.extend(new_inits);
    Some(g)
}

/// A rewritten op: float op type, inputs, attributes, and the output's (scale, zero point) names
/// when the output is quantized.
type FloatOp<'a> = (
    &'a str,
    Vec<String>,
    Vec<AttributeProto>,
    Option<(String, String)>,
);

/// State of [`rewrite_qoperator`].
#[derive(Default)]
struct QopRewrite {
    nodes: Vec<NodeProto>,
    new_inits: Vec<TensorProto>,
    /// Integer value → its float version.
    dq_done: HashMap<String, String>,
    /// Integer value → (scale, zero point) names.
    quant: HashMap<String, (String, String)>,
}

impl QopRewrite {
    /// The float version of integer value `x` with scale `s` and zero point `z` (per axis `axis`).
    fn dq(&mut self, x: &str, s: &str, z: &str, axis: Option<i64>) -> String {
        if let Some(f) = self.dq_done.get(x) {
            return f.clone();
        }
        let f = format!("{x}/dequantized");
        let mut n = plain(
            "DequantizeLinear",
            &format!("{x}/dequantize"),
            vec![x.into(), s.into(), z.into()],
            vec![f.clone()],
        );
        if let Some(a) = axis {
            n.attribute.push(int_attr("axis", a));
        }
        self.nodes.push(n);
        self.dq_done.insert(x.to_string(), f.clone());
        f
    }

    /// An int32 bias with scale input_scale × weight_scale (per weight channel), dequantized.
    fn bias(&mut self, b: &str, xs: Option<Vec<f32>>, ws: Option<Vec<f32>>) -> Option<String> {
        let (xv, wv) = (xs?, ws?);
        let x0 = *xv.first()?;
        let s: Vec<f32> = wv.iter().map(|w| x0 * w).collect();
        let name = format!("{b}/bias_scale");
        let dims = if s.len() > 1 {
            vec![s.len() as i64]
        } else {
            vec![]
        };
        self.new_inits.push(f32_init(name.clone(), dims, &s));
        Some(self.dq(b, &name, "", (s.len() > 1).then_some(0)))
    }
}
