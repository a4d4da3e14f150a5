//! A small builder of ONNX models in memory, for tests and benchmarks (e.g. a 100-layer CNN
//! whose file would be too big to commit).

use super::{import_onnx_bytes, ImportOptions};
use crate::ir::Graph;
use prost::Message;
use tract_onnx::pb::{
    attribute_proto::AttributeType, tensor_shape_proto::dimension::Value as Dim,
    tensor_shape_proto::Dimension, type_proto, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// A tiny ONNX graph builder.
pub struct OnnxBuilder {
    pub g: GraphProto,
    pub opset: i64,
}

#[allow(clippy::large_enum_variant)]
pub enum Attr {
    I(i64),
    F(f32),
    S(&'static str),
    Is(Vec<i64>),
    T(TensorProto),
}

pub fn attr(name: &str, a: Attr) -> AttributeProto {
    let mut p = AttributeProto {
        name: name.into(),
        ..Default::default()
    };
    match a {
        Attr::I(i) => {
            p.i = i;
            p.r#type = AttributeType::Int as i32;
        }
        Attr::F(f) => {
            p.f = f;
            p.r#type = AttributeType::Float as i32;
        }
        Attr::S(s) => {
            p.s = s.as_bytes().to_vec();
            p.r#type = AttributeType::String as i32;
        }
        Attr::Is(v) => {
            p.ints = v;
            p.r#type = AttributeType::Ints as i32;
        }
        Attr::T(t) => {
            p.t = Some(t);
            p.r#type = AttributeType::Tensor as i32;
        }
    }
    p
}

pub fn value_info(name: &str, dims: &[Option<i64>], params: &[&str]) -> ValueInfoProto {
    typed_value_info(name, dims, params, 1)
}

/// [`value_info`] with an ONNX element type (1 float, 6 int32, 7 int64, 9 bool, ...).
pub fn typed_value_info(
    name: &str,
    dims: &[Option<i64>],
    params: &[&str],
    elem_type: i32,
) -> ValueInfoProto {
    let dim = dims
        .iter()
        .enumerate()
        .map(|(i, d)| Dimension {
            denotation: String::new(),
            value: match d {
                Some(v) => Some(Dim::DimValue(*v)),
                None => params.get(i).map(|p| Dim::DimParam(p.to_string())),
            },
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            denotation: String::new(),
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type,
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
        doc_string: String::new(),
    }
}

pub fn ftensor(name: &str, dims: &[i64], v: Vec<f32>) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        raw_data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ..Default::default()
    }
}

pub fn itensor(name: &str, dims: &[i64], v: Vec<i64>) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 7,
        int64_data: v,
        ..Default::default()
    }
}

impl OnnxBuilder {
    pub fn new(opset: i64) -> Self {
        OnnxBuilder {
            g: GraphProto::default(),
            opset,
        }
    }
    pub fn input(&mut self, name: &str, dims: &[i64]) -> &mut Self {
        let d: Vec<Option<i64>> = dims.iter().map(|&x| Some(x)).collect();
        self.g.input.push(value_info(name, &d, &[]));
        self
    }
    /// An input of ONNX element type `elem_type` (9: bool, 7: int64).
    pub fn typed_input(&mut self, name: &str, dims: &[i64], elem_type: i32) -> &mut Self {
        let d: Vec<Option<i64>> = dims.iter().map(|&x| Some(x)).collect();
        self.g
            .input
            .push(typed_value_info(name, &d, &[], elem_type));
        self
    }
    pub fn output(&mut self, name: &str) -> &mut Self {
        self.g.output.push(value_info(name, &[], &[]));
        self
    }
    pub fn init(&mut self, t: TensorProto) -> &mut Self {
        self.g.initializer.push(t);
        self
    }
    pub fn weights(&mut self, name: &str, dims: &[i64]) -> &mut Self {
        let n: i64 = dims.iter().product();
        let v = (0..n).map(|i| ((i % 7) as f32 - 3.0) * 0.1).collect();
        self.init(ftensor(name, dims, v))
    }
    pub fn node(
        &mut self,
        op: &str,
        name: &str,
        ins: &[&str],
        outs: &[&str],
        attrs: Vec<(&str, Attr)>,
    ) -> &mut Self {
        self.g.node.push(NodeProto {
            op_type: op.into(),
            name: name.into(),
            input: ins.iter().map(|s| s.to_string()).collect(),
            output: outs.iter().map(|s| s.to_string()).collect(),
            attribute: attrs.into_iter().map(|(n, a)| attr(n, a)).collect(),
            ..Default::default()
        });
        self
    }
    pub fn bytes(&self) -> Vec<u8> {
        ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: self.opset,
            }],
            graph: Some(self.g.clone()),
            ..Default::default()
        }
        .encode_to_vec()
    }
    pub fn import(&self) -> anyhow::Result<Graph> {
        import_onnx_bytes(&self.bytes(), "model.onnx", &ImportOptions::default())
    }
}

/// Conv3x3(16→16) + BatchNorm + Relu, `layers` times, then global average pool and a dense layer.
pub fn deep_cnn(layers: usize) -> Vec<u8> {
    deep_cnn_with_channels(layers, 16)
}

/// [`deep_cnn`] with `c` channels in every layer.
pub fn deep_cnn_with_channels(layers: usize, c: usize) -> Vec<u8> {
    let ci = c as i64;
    let mut b = OnnxBuilder::new(13);
    b.input("input", &[1, ci, 32, 32]);
    let mut x = "input".to_string();
    for i in 0..layers {
        let (w, bias) = (format!("c{i}.w"), format!("c{i}.b"));
        // Distinct weights per layer (identical ones would be shared by `dedup_constants`).
        let v = (0..c * c * 9)
            .map(|j| (((j * 7 + i * 13) % 11) as f32 - 5.0) * 0.02)
            .collect();
        b.init(ftensor(&w, &[ci, ci, 3, 3], v));
        b.weights(&bias, &[ci]);
        for p in ["scale", "shift", "mean"] {
            b.weights(&format!("bn{i}.{p}"), &[ci]);
        }
        let var = format!("bn{i}.var");
        b.init(ftensor(&var, &[ci], vec![1.0; c]));
        let (c, n, r) = (format!("c{i}"), format!("bn{i}"), format!("r{i}"));
        b.node(
            "Conv",
            &c,
            &[&x, &w, &bias],
            &[&c],
            vec![
                ("pads", Attr::Is(vec![1, 1, 1, 1])),
                ("kernel_shape", Attr::Is(vec![3, 3])),
            ],
        );
        let ins = [
            c.clone(),
            format!("bn{i}.scale"),
            format!("bn{i}.shift"),
            format!("bn{i}.mean"),
            var,
        ];
        let ins: Vec<&str> = ins.iter().map(String::as_str).collect();
        b.node("BatchNormalization", &n, &ins, &[&n], vec![]);
        b.node("Relu", &r, &[&n], &[&r], vec![]);
        x = r;
    }
    b.weights("fc.w", &[10, ci]).weights("fc.b", &[10]);
    b.node("GlobalAveragePool", "gap", &[&x], &["gap"], vec![]);
    b.node("Flatten", "flat", &["gap"], &["flat"], vec![]);
    b.node(
        "Gemm",
        "fc",
        &["flat", "fc.w", "fc.b"],
        &["output"],
        vec![("transB", Attr::I(1))],
    );
    b.output("output");
    b.bytes()
}
