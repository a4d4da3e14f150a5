//! Model-local functions (`ModelProto.functions`, written by PyTorch's dynamo exporter, onnxscript
//! and others): every call is inlined into the main graph before import, so the importer only sees
//! standard ops. tract's `ModelProto` does not decode field 25, so it is read here on its own.

use prost::Message;
use std::collections::HashMap;
use tract_onnx::pb::{FunctionProto, GraphProto, NodeProto};

/// Field 25 of `ModelProto`; decoding the whole model as this message keeps only the functions.
#[derive(Clone, PartialEq, prost::Message)]
struct ModelFunctions {
    #[prost(message, repeated, tag = "25")]
    functions: Vec<FunctionProto>,
}

/// Deepest chain of function calls inside function bodies (also stops recursive functions).
const MAX_DEPTH: usize = 32;

/// The model's local functions, by (domain, name).
pub(crate) fn local_functions(
    model_bytes: &[u8],
) -> Result<HashMap<(String, String), FunctionProto>, String> {
    let decoded = ModelFunctions::decode(model_bytes)
        .map_err(|e| format!("cannot decode the model's local functions: {e}"))?;
    Ok(decoded
        .functions
        .into_iter()
        .map(|f| {
            (
                (
                    f.domain.clone().unwrap_or_default(),
                    f.name.clone().unwrap_or_default(),
                ),
                f,
            )
        })
        .collect())
}

/// Replaces every call of a local function in `graph` by the function's body; returns how many
/// calls were inlined.
pub(crate) fn inline_calls(
    graph: &mut GraphProto,
    functions: &HashMap<(String, String), FunctionProto>,
) -> Result<usize, String> {
    let mut inliner = Inliner {
        functions,
        calls: 0,
    };
    let mut nodes = Vec::with_capacity(graph.node.len());
    for node in std::mem::take(&mut graph.node) {
        inliner.expand(node, 0, &mut nodes)?;
    }
    graph.node = nodes;
    Ok(inliner.calls)
}

struct Inliner<'f> {
    functions: &'f HashMap<(String, String), FunctionProto>,
    calls: usize,
}

impl Inliner<'_> {
    fn expand(
        &mut self,
        call: NodeProto,
        depth: usize,
        out: &mut Vec<NodeProto>,
    ) -> Result<(), String> {
        let key = (call.domain.clone(), call.op_type.clone());
        let Some(f) = self.functions.get(&key) else {
            out.push(call);
            return Ok(());
        };
        let fname = if key.0.is_empty() {
            key.1.clone()
        } else {
            format!("{}.{}", key.0, key.1)
        };
        if depth >= MAX_DEPTH {
            return Err(format!(
                "function '{fname}': calls nest deeper than {MAX_DEPTH} (recursive function?)"
            ));
        }
        self.calls += 1;
        // Values of the body: formal inputs/outputs bind to the call's, others get a unique prefix.
        let scope = if call.name.is_empty() {
            format!("{fname}_{}", self.calls)
        } else {
            call.name.clone()
        };
        let mut rename: HashMap<&str, String> = HashMap::new();
        for (i, formal) in f.input.iter().enumerate() {
            rename.insert(formal, call.input.get(i).cloned().unwrap_or_default());
        }
        for (i, formal) in f.output.iter().enumerate() {
            rename.insert(formal, call.output.get(i).cloned().unwrap_or_default());
        }
        let bind = |name: &str, rename: &HashMap<&str, String>| -> String {
            if name.is_empty() {
                String::new()
            } else {
                rename
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| format!("{scope}/{name}"))
            }
        };
        for body in &f.node {
            if body
                .attribute
                .iter()
                .any(|a| a.g.is_some() || !a.graphs.is_empty())
            {
                return Err(format!(
                    "function '{fname}': node '{}' ({}) has a subgraph; subgraphs inside local \
                     functions are not supported",
                    body.name, body.op_type
                ));
            }
            let mut node = body.clone();
            node.name = format!("{scope}/{}", body.name);
            node.input = body.input.iter().map(|v| bind(v, &rename)).collect();
            node.output = body.output.iter().map(|v| bind(v, &rename)).collect();
            // Attributes that refer to the call's attributes take their value (absent: dropped).
            node.attribute = body
                .attribute
                .iter()
                .filter_map(|a| {
                    if a.ref_attr_name.is_empty() {
                        return Some(a.clone());
                    }
                    call.attribute
                        .iter()
                        .find(|c| c.name == a.ref_attr_name)
                        .map(|c| {
                            let mut v = c.clone();
                            v.name = a.name.clone();
                            v
                        })
                })
                .collect();
            self.expand(node, depth + 1, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::builder::{attr, Attr, OnnxBuilder};
    use crate::import::{import_onnx_bytes, ImportOptions};

    /// `ScaledRelu(x) = Relu(x) * alpha`, alpha a float attribute of the call.
    fn scaled_relu() -> FunctionProto {
        let mut mul_attr = attr("value_float", Attr::F(0.0));
        mul_attr.ref_attr_name = "alpha".into();
        FunctionProto {
            name: Some("ScaledRelu".into()),
            domain: Some("pkg.custom".into()),
            input: vec!["X".into()],
            output: vec!["Y".into()],
            attribute: vec!["alpha".into()],
            node: vec![
                NodeProto {
                    op_type: "Relu".into(),
                    name: "relu".into(),
                    input: vec!["X".into()],
                    output: vec!["r".into()],
                    ..Default::default()
                },
                NodeProto {
                    op_type: "Constant".into(),
                    name: "alpha".into(),
                    output: vec!["a".into()],
                    attribute: vec![mul_attr],
                    ..Default::default()
                },
                NodeProto {
                    op_type: "Mul".into(),
                    name: "mul".into(),
                    input: vec!["r".into(), "a".into()],
                    output: vec!["Y".into()],
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    fn with_functions(model: Vec<u8>, functions: Vec<FunctionProto>) -> Vec<u8> {
        // Protobuf messages concatenate: appending field 25 adds the functions to the model.
        let mut bytes = model;
        bytes.extend(ModelFunctions { functions }.encode_to_vec());
        bytes
    }

    #[test]
    fn calls_of_local_functions_are_inlined_with_their_attributes() {
        let mut b = OnnxBuilder::new(17);
        b.input("x", &[1, 4]);
        for (i, (input, output)) in [("x", "h"), ("h", "y")].into_iter().enumerate() {
            b.node(
                "ScaledRelu",
                &format!("/layer{i}"),
                &[input],
                &[output],
                vec![],
            );
        }
        b.output("y");
        // Give each call its alpha and put it in the custom domain.
        let mut model = tract_onnx::pb::ModelProto::decode(b.bytes().as_slice()).unwrap();
        let graph = model.graph.as_mut().unwrap();
        for (n, alpha) in graph.node.iter_mut().zip([2.0, 0.5]) {
            n.domain = "pkg.custom".into();
            n.attribute.push(attr("alpha", Attr::F(alpha)));
        }
        let bytes = with_functions(model.encode_to_vec(), vec![scaled_relu()]);
        let conv =
            crate::convert::convert_bytes(&bytes, "model.onnx", &Default::default()).unwrap();
        let x = crate::npy::NpyArray::f32(vec![1, 4], vec![-1.0, 2.0, -3.0, 4.0]);
        let y = crate::runtime::run_lite(&conv.bytes, "model", &[(None, x)]).unwrap();
        // relu(relu(x) * 2) * 0.5
        assert_eq!(y[0].1.to_f32(), vec![0.0, 2.0, 0.0, 4.0]);
    }

    #[test]
    fn recursive_functions_are_an_error() {
        let f = FunctionProto {
            name: Some("Loop".into()),
            domain: Some("d".into()),
            input: vec!["X".into()],
            output: vec!["Y".into()],
            node: vec![NodeProto {
                op_type: "Loop".into(),
                domain: "d".into(),
                input: vec!["X".into()],
                output: vec!["Y".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut b = OnnxBuilder::new(17);
        b.input("x", &[1])
            .node("Loop", "/l", &["x"], &["y"], vec![])
            .output("y");
        let mut model = tract_onnx::pb::ModelProto::decode(b.bytes().as_slice()).unwrap();
        model.graph.as_mut().unwrap().node[0].domain = "d".into();
        let bytes = with_functions(model.encode_to_vec(), vec![f]);
        let err = import_onnx_bytes(&bytes, "model.onnx", &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("function 'd.Loop'") && err.contains("deeper"),
            "{err}"
        );
    }
}
