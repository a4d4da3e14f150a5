//! ONNX Runtime's dynamic quantization (`quantize_dynamic`: DynamicQuantizeLinear →
//! ConvInteger/MatMulInteger, and com.microsoft DynamicQuantizeLSTM), rewritten before import into
//! the equivalent float graph on dequantized weights, and the small ONNX-building helpers the
//! QOperator rewrite (`qdq_qoperator.rs`) shares.

use super::*;
use tract_onnx::pb::AttributeProto;

fn attr_int(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

/// Rewrites onnxruntime's `quantize_dynamic` pattern into float ops on dequantized weights
/// (`None` when the graph has none). Patterns that differ are left alone (and reported as
/// unsupported ops by the importer).
pub(super) fn rewrite_dynamic(graph: &GraphProto) -> Option<GraphProto> {
    let lstm = rewrite_dynamic_lstm(graph);
    let graph = lstm.as_ref().unwrap_or(graph);
    if !graph
        .node
        .iter()
        .any(|n| matches!(n.op_type.as_str(), "ConvInteger" | "MatMulInteger"))
    {
        return lstm;
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

/// onnxruntime's `DynamicQuantizeLSTM` (com.microsoft; what `quantize_dynamic` makes of an LSTM):
/// the standard LSTM on its dequantized weights. Its W [dirs, input, 4H] and R [dirs, H, 4H] are
/// the transposes of LSTM's, with a scale and zero point per direction or per direction and gate
/// column. The weights-only mode then quantizes the unrolled layers' weights again.
fn rewrite_dynamic_lstm(graph: &GraphProto) -> Option<GraphProto> {
    let is_dq_lstm =
        |n: &NodeProto| n.op_type == "DynamicQuantizeLSTM" && n.domain == "com.microsoft";
    if !graph.node.iter().any(is_dq_lstm) {
        return None;
    }
    let inits: HashMap<&str, &TensorProto> = graph
        .initializer
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let values = |name: &str| -> Option<(Vec<usize>, Vec<f32>)> {
        let t = inits.get(name)?;
        let d = decode_tensor(t).ok()?;
        Some((d.shape(), d.to_f32_vec()))
    };
    // inputs: X W R B sequence_lens initial_h initial_c P W_scale W_zero_point R_scale R_zero_point
    let dequantized = |n: &NodeProto, w: usize, scale: usize, zp: usize| -> Option<TensorProto> {
        let (shape, q) = values(n.input.get(w)?)?;
        let [dirs, rows, cols] = shape[..] else {
            return None;
        };
        let (sshape, sv) = values(n.input.get(scale)?)?;
        let (_, zv) = values(n.input.get(zp)?)?;
        let per_column = sshape.len() == 2;
        if sv.len() != if per_column { dirs * cols } else { dirs } || zv.len() != sv.len() {
            return None;
        }
        // [dirs, rows, cols] quantized → [dirs, cols, rows] float (LSTM's layout).
        let mut f = vec![0f32; q.len()];
        for d in 0..dirs {
            for r in 0..rows {
                for c in 0..cols {
                    let k = if per_column { d * cols + c } else { d };
                    f[(d * cols + c) * rows + r] = (q[(d * rows + r) * cols + c] - zv[k]) * sv[k];
                }
            }
        }
        let dims = vec![dirs as i64, cols as i64, rows as i64];
        Some(f32_init(format!("{}/dequantized", n.input[w]), dims, &f))
    };
    let mut g = graph.clone();
    for n in g.node.iter_mut().filter(|n| is_dq_lstm(n)) {
        let (Some(w), Some(r)) = (dequantized(n, 1, 8, 9), dequantized(n, 2, 10, 11)) else {
            continue; // left as is: reported as an unsupported op
        };
        n.op_type = "LSTM".into();
        n.domain = String::new();
        n.input.truncate(8);
        n.input[1] = w.name.clone();
        n.input[2] = r.name.clone();
        g.initializer.push(w);
        g.initializer.push(r);
    }
    Some(g)
}

// ---- QOperator format --------------------------------------------------------------------------

pub(super) fn f32_init(name: String, dims: Vec<i64>, v: &[f32]) -> TensorProto {
    TensorProto {
        name,
        dims,
        data_type: 1,
        raw_data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ..Default::default()
    }
}

pub(super) fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: tract_onnx::pb::attribute_proto::AttributeType::Int as i32,
        i: v,
        ..Default::default()
    }
}

pub(super) fn plain(op: &str, name: &str, inputs: Vec<String>, outputs: Vec<String>) -> NodeProto {
    NodeProto {
        name: name.into(),
        op_type: op.into(),
        input: inputs,
        output: outputs,
        ..Default::default()
    }
}
