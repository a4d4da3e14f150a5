//! ONNX Runtime's QOperator format (QLinearConv, QLinearMatMul, QGemm, QLinear elementwise and
//! pooling ops), rewritten before import into the equivalent QDQ graph.

use super::qdq_dynamic::{f32_init, int_attr, plain};
use super::*;
use tract_onnx::pb::AttributeProto;

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
