//! A small builder of TFLite-format models for tests.
#![allow(dead_code)]

use flatbuffers::{FlatBufferBuilder, PushAlignment, UnionWIPOffset, WIPOffset};
use literun::schema::{self as s, BuiltinOperator, TensorType};
use literun::AlignedBytes;

pub mod int8;

/// A byte pushed with 16-byte alignment, so constant buffers land aligned.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct A16(u8);

impl flatbuffers::Push for A16 {
    type Output = u8;
    // SAFETY (of the body): it only writes `dst[0]`, bounds-checked; the builder gives a `dst`
    // of `size_of::<Output>()` = 1 byte.
    unsafe fn push(&self, dst: &mut [u8], _written_len: usize) {
        dst[0] = self.0;
    }
    fn alignment() -> PushAlignment {
        PushAlignment::new(16)
    }
}

/// One options field: (vtable offset, value).
#[derive(Clone, Debug)]
pub enum F {
    I32(u16, i32),
    I8(u16, i8),
    F32(u16, f32),
    Bool(u16, bool),
    VecI32(u16, Vec<i32>),
}

/// Builtin options: the TFLite union tag and the fields.
#[derive(Clone, Debug)]
pub struct Opts {
    pub tag: u8,
    pub fields: Vec<F>,
}

pub fn opts(tag: u8, fields: Vec<F>) -> Option<Opts> {
    Some(Opts { tag, fields })
}

struct T {
    name: String,
    shape: Vec<i32>,
    ty: TensorType,
    buffer: u32,
    quant: Option<(Vec<f32>, Vec<i64>, i32)>,
    variable: bool,
}

struct Op {
    code: BuiltinOperator,
    inputs: Vec<i32>,
    outputs: Vec<i32>,
    opts: Option<Opts>,
}

/// (signature name, tensor index) pairs.
pub type NameMap = Vec<(String, i32)>;

#[derive(Default)]
pub struct ModelBuilder {
    tensors: Vec<T>,
    buffers: Vec<Vec<u8>>,
    ops: Vec<Op>,
    pub version: u32,
    pub signature: Option<(NameMap, NameMap)>,
    /// Model metadata entries: (name, buffer contents).
    pub metadata: Vec<(String, Vec<u8>)>,
}

impl ModelBuilder {
    pub fn new() -> Self {
        ModelBuilder {
            buffers: vec![Vec::new()],
            version: 3,
            ..Default::default()
        }
    }

    pub fn tensor(&mut self, name: &str, shape: &[i32], ty: TensorType) -> i32 {
        self.tensors.push(T {
            name: name.into(),
            shape: shape.to_vec(),
            ty,
            buffer: 0,
            quant: None,
            variable: false,
        });
        self.tensors.len() as i32 - 1
    }

    pub fn f32(&mut self, name: &str, shape: &[i32]) -> i32 {
        self.tensor(name, shape, TensorType::FLOAT32)
    }

    pub fn const_bytes(&mut self, name: &str, shape: &[i32], ty: TensorType, data: Vec<u8>) -> i32 {
        self.buffers.push(data);
        let b = self.buffers.len() as u32 - 1;
        self.tensors.push(T {
            name: name.into(),
            shape: shape.to_vec(),
            ty,
            buffer: b,
            quant: None,
            variable: false,
        });
        self.tensors.len() as i32 - 1
    }

    pub fn const_f32(&mut self, name: &str, shape: &[i32], data: &[f32]) -> i32 {
        let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.const_bytes(name, shape, TensorType::FLOAT32, bytes)
    }

    pub fn const_i32(&mut self, name: &str, shape: &[i32], data: &[i32]) -> i32 {
        let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.const_bytes(name, shape, TensorType::INT32, bytes)
    }

    /// Sets a tensor's quantization parameters (scales, zero points, quantized dimension).
    pub fn quant(&mut self, t: i32, scales: &[f32], zero_points: &[i64], qdim: i32) {
        self.tensors[t as usize].quant = Some((scales.to_vec(), zero_points.to_vec(), qdim));
    }

    /// Marks a tensor as a variable (`is_variable`: state kept across invocations).
    pub fn variable(&mut self, t: i32) {
        self.tensors[t as usize].variable = true;
    }

    /// A per-tensor quantized tensor.
    pub fn q(&mut self, name: &str, shape: &[i32], ty: TensorType, scale: f32, zp: i64) -> i32 {
        let t = self.tensor(name, shape, ty);
        self.quant(t, &[scale], &[zp], 0);
        t
    }

    pub fn const_i8(&mut self, name: &str, shape: &[i32], data: &[i8]) -> i32 {
        let bytes = data.iter().map(|&v| v as u8).collect();
        self.const_bytes(name, shape, TensorType::INT8, bytes)
    }

    pub fn op(
        &mut self,
        code: BuiltinOperator,
        inputs: &[i32],
        outputs: &[i32],
        opts: Option<Opts>,
    ) {
        self.ops.push(Op {
            code,
            inputs: inputs.to_vec(),
            outputs: outputs.to_vec(),
            opts,
        });
    }

    /// Serializes the model (raw bytes, 16-byte aligned buffers relative to the start).
    pub fn finish_raw(&self, inputs: &[i32], outputs: &[i32]) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let buffers: Vec<_> = self
            .buffers
            .iter()
            .chain(self.metadata.iter().map(|(_, d)| d))
            .map(|d| {
                let data = if d.is_empty() {
                    None
                } else {
                    let a: Vec<A16> = d.iter().map(|&b| A16(b)).collect();
                    Some(fbb.create_vector(&a))
                };
                s::Buffer::create(
                    &mut fbb,
                    &s::BufferArgs {
                        data,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let buffers = fbb.create_vector(&buffers);
        let tensors: Vec<_> = self
            .tensors
            .iter()
            .map(|t| {
                let shape = Some(fbb.create_vector(&t.shape));
                let name = Some(fbb.create_string(&t.name));
                let quantization = t.quant.as_ref().map(|(sc, zp, qd)| {
                    let scale = Some(fbb.create_vector(sc));
                    let zero_point = Some(fbb.create_vector(zp));
                    s::QuantizationParameters::create(
                        &mut fbb,
                        &s::QuantizationParametersArgs {
                            scale,
                            zero_point,
                            quantized_dimension: *qd,
                            ..Default::default()
                        },
                    )
                });
                s::Tensor::create(
                    &mut fbb,
                    &s::TensorArgs {
                        shape,
                        type_: t.ty,
                        buffer: t.buffer,
                        name,
                        quantization,
                        is_variable: t.variable,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let tensors = fbb.create_vector(&tensors);
        // Operator codes: one per distinct builtin.
        let mut codes: Vec<BuiltinOperator> = Vec::new();
        for o in &self.ops {
            if !codes.contains(&o.code) {
                codes.push(o.code);
            }
        }
        let ops: Vec<_> = self
            .ops
            .iter()
            .map(|o| {
                let inputs = Some(fbb.create_vector(&o.inputs));
                let outputs = Some(fbb.create_vector(&o.outputs));
                let (ty, table) = match &o.opts {
                    None => (0u8, None),
                    Some(opts) => (opts.tag, Some(build_opts(&mut fbb, opts))),
                };
                s::Operator::create(
                    &mut fbb,
                    &s::OperatorArgs {
                        opcode_index: codes.iter().position(|c| *c == o.code).unwrap() as u32,
                        inputs,
                        outputs,
                        builtin_options_type: s::BuiltinOptions(ty),
                        builtin_options: table,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let ops = fbb.create_vector(&ops);
        let sg_in = fbb.create_vector(inputs);
        let sg_out = fbb.create_vector(outputs);
        let sg = s::SubGraph::create(
            &mut fbb,
            &s::SubGraphArgs {
                tensors: Some(tensors),
                inputs: Some(sg_in),
                outputs: Some(sg_out),
                operators: Some(ops),
                name: None,
            },
        );
        let subgraphs = fbb.create_vector(&[sg]);
        let codes: Vec<_> = codes
            .iter()
            .map(|c| {
                s::OperatorCode::create(
                    &mut fbb,
                    &s::OperatorCodeArgs {
                        deprecated_builtin_code: c.0.min(127) as i8,
                        builtin_code: *c,
                        version: 1,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let codes = fbb.create_vector(&codes);
        let sigs = self.signature.as_ref().map(|(ins, outs)| {
            let mut maps = |l: &Vec<(String, i32)>| {
                let v: Vec<_> = l
                    .iter()
                    .map(|(n, t)| {
                        let name = Some(fbb.create_string(n));
                        s::TensorMap::create(
                            &mut fbb,
                            &s::TensorMapArgs {
                                name,
                                tensor_index: *t as u32,
                            },
                        )
                    })
                    .collect();
                fbb.create_vector(&v)
            };
            let i = maps(ins);
            let o = maps(outs);
            let key = fbb.create_string("serving_default");
            let sd = s::SignatureDef::create(
                &mut fbb,
                &s::SignatureDefArgs {
                    inputs: Some(i),
                    outputs: Some(o),
                    signature_key: Some(key),
                    subgraph_index: 0,
                },
            );
            fbb.create_vector(&[sd])
        });
        let metadata: Vec<_> = self
            .metadata
            .iter()
            .enumerate()
            .map(|(k, (name, _))| {
                let name = Some(fbb.create_string(name));
                s::Metadata::create(
                    &mut fbb,
                    &s::MetadataArgs {
                        name,
                        buffer: (self.buffers.len() + k) as u32,
                    },
                )
            })
            .collect();
        let metadata = (!metadata.is_empty()).then(|| fbb.create_vector(&metadata));
        let model = s::Model::create(
            &mut fbb,
            &s::ModelArgs {
                metadata,
                version: self.version,
                operator_codes: Some(codes),
                subgraphs: Some(subgraphs),
                buffers: Some(buffers),
                signature_defs: sigs,
                ..Default::default()
            },
        );
        s::finish_model_buffer(&mut fbb, model);
        fbb.finished_data().to_vec()
    }

    pub fn finish(&self, inputs: &[i32], outputs: &[i32]) -> AlignedBytes {
        AlignedBytes::from_slice(&self.finish_raw(inputs, outputs))
    }
}

fn build_opts(fbb: &mut FlatBufferBuilder<'_>, o: &Opts) -> WIPOffset<UnionWIPOffset> {
    let vecs: Vec<_> = o
        .fields
        .iter()
        .map(|f| match f {
            F::VecI32(_, v) => Some(fbb.create_vector(v)),
            _ => None,
        })
        .collect();
    let start = fbb.start_table();
    for (f, v) in o.fields.iter().zip(&vecs) {
        match f {
            F::I32(k, x) => fbb.push_slot_always(*k, *x),
            F::I8(k, x) => fbb.push_slot_always(*k, *x),
            F::F32(k, x) => fbb.push_slot_always(*k, *x),
            F::Bool(k, x) => fbb.push_slot_always(*k, *x),
            F::VecI32(k, _) => fbb.push_slot_always(*k, v.unwrap()),
        }
    }
    let t = fbb.end_table(start);
    WIPOffset::new(t.value())
}

/// Runs a single-input single-output float model.
pub fn run1(bytes: &[u8], input: &[f32]) -> Vec<f32> {
    let model = literun::Model::from_bytes(bytes).unwrap();
    let mut it = literun::Interpreter::new(&model).unwrap();
    it.input_f32_mut(0).unwrap().copy_from_slice(input);
    it.invoke().unwrap();
    it.output(0).unwrap().as_f32().unwrap().to_vec()
}

pub fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "length: got {got:?}, want {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}
