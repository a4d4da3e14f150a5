//! IR (NHWC, lowered) → TFLite-compatible FlatBuffer, one TFLite operator per node.
//!
//! Conventions TFLite readers rely on: buffer 0 is empty, non-constant tensors point to it;
//! constant data is 16-byte aligned; `builtin_code` and `deprecated_builtin_code` are both set;
//! each operator code carries the op version its options need; a `min_runtime_version` metadata
//! entry and a `serving_default` signature naming the ONNX inputs and outputs are written.
//! The output is deterministic: same graph, same bytes.

mod op_spec;

use crate::ir::{Activation, ConstData, DType, Graph, Node, QuantParams};
use anyhow::{bail, Result};
use flatbuffers::{FlatBufferBuilder, Push, PushAlignment, UnionWIPOffset, WIPOffset};
use literun::schema as fb;
use op_spec::op_spec;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Options of the writer.
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    /// Free text stored in `Model.description`.
    pub description: String,
    /// Arena offsets per tensor of the subgraph (`-1`: not planned), written as TFLite Micro's
    /// `OfflineMemoryAllocation` metadata (`[1, 0, tensor count, offsets...]`).
    pub memory_plan: Option<Vec<i32>>,
    /// Without `memory_plan`: room for one, written as zeros (`[0; 3 + tensor count]`) under
    /// [`PLAN_PLACEHOLDER`], a name of the same length as the plan's, so that writing the plan
    /// and the name over them gives the bytes a write with the plan gives.
    pub reserve_plan: bool,
}

/// The metadata name a reserved plan is written under: as long as
/// `literun::plan::OFFLINE_PLAN_METADATA`, and a name no reader looks for.
pub const PLAN_PLACEHOLDER: &str = "litecvt-plan-to-fill-in";
const _: () = assert!(PLAN_PLACEHOLDER.len() == literun::plan::OFFLINE_PLAN_METADATA.len());

/// A byte whose vectors start 16-byte aligned, so constant data can be read in place
/// (flatbuffers ignores `force_align` in the Rust builder).
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
struct Aligned16(u8);

impl Push for Aligned16 {
    type Output = u8;

    unsafe fn push(&self, dst: &mut [u8], _written_len: usize) {
        dst[0] = self.0;
    }

    fn alignment() -> PushAlignment {
        PushAlignment::new(16)
    }
}

fn tensor_type(d: DType) -> fb::TensorType {
    match d {
        DType::F32 => fb::TensorType::FLOAT32,
        DType::F16 => fb::TensorType::FLOAT16,
        DType::I32 => fb::TensorType::INT32,
        DType::I64 => fb::TensorType::INT64,
        DType::I8 => fb::TensorType::INT8,
        DType::I16 => fb::TensorType::INT16,
        DType::U8 => fb::TensorType::UINT8,
        DType::Bool => fb::TensorType::BOOL,
    }
}

fn activation(a: Activation) -> fb::ActivationFunctionType {
    match a {
        Activation::None => fb::ActivationFunctionType::NONE,
        Activation::Relu => fb::ActivationFunctionType::RELU,
        Activation::ReluN1To1 => fb::ActivationFunctionType::RELU_N1_TO_1,
        Activation::Relu6 => fb::ActivationFunctionType::RELU6,
        Activation::Tanh => fb::ActivationFunctionType::TANH,
    }
}

/// One operator ready to serialize.
struct OpSpec<'a> {
    code: fb::BuiltinOperator,
    version: i32,
    inputs: Vec<i32>,
    outputs: Vec<i32>,
    options: Option<(fb::BuiltinOptions, WIPOffset<UnionWIPOffset>)>,
    _p: std::marker::PhantomData<&'a ()>,
}

struct Writer<'g> {
    g: &'g Graph,
    fbb: FlatBufferBuilder<'static>,
    /// Extra tensors the writer adds: constants (shapes, axes, paddings, pad values) and the
    /// variable tensors holding an operator's state.
    extra: Vec<ExtraTensor>,
    /// The subgraph index the next IF's or WHILE's first subgraph has (its second has the one
    /// after).
    next_subgraph: usize,
}

/// A tensor the writer adds to a subgraph.
struct ExtraTensor {
    name: String,
    shape: Vec<usize>,
    /// A constant's data; for a variable tensor, zeros giving its type (no data is written).
    data: ConstData,
    quant: Option<QuantParams>,
    /// A TFLite variable tensor (`is_variable`): state an operator keeps across invokes.
    variable: bool,
}

impl<'g> Writer<'g> {
    /// Adds a constant tensor and returns its index.
    fn add_const(&mut self, name: String, data: ConstData, quant: Option<QuantParams>) -> i32 {
        self.add_extra(ExtraTensor {
            name,
            shape: data.shape(),
            data,
            quant,
            variable: false,
        })
    }

    /// Adds a float32 variable tensor of `shape` (zero when an interpreter starts) and
    /// returns its index.
    fn add_variable(&mut self, name: String, shape: &[usize]) -> i32 {
        let zeros = ConstData::from_f32(&[0], Vec::new());
        self.add_extra(ExtraTensor {
            name,
            shape: shape.to_vec(),
            data: zeros,
            quant: None,
            variable: true,
        })
    }

    fn add_extra(&mut self, t: ExtraTensor) -> i32 {
        let idx = self.g.tensors.len() + self.extra.len();
        self.extra.push(t);
        idx as i32
    }

    /// Adds an int32 constant tensor (e.g. a RESHAPE's shape) and returns its index.
    fn const_i32(&mut self, name: String, shape: &[usize], values: Vec<i32>) -> i32 {
        self.add_const(name, ConstData::from_i32(shape, values), None)
    }

    /// PADV2's constant: the input's type and quantization (a quantized pad value saturates,
    /// so the lowest float becomes the type's lowest value).
    fn pad_value(&mut self, node: &Node, value: f32) -> i32 {
        let name = format!("{}/value", node.name);
        let input = &self.g.tensors[node.inputs[0]];
        let (Some(q), DType::I8 | DType::I16) = (input.quant.clone(), input.dtype) else {
            return self.const_f32(name, vec![value]);
        };
        let (s, z) = (q.scale[0], q.zero_point[0] as f32);
        let stored = (value / s + z).round();
        let one = ndarray::IxDyn(&[1]);
        let data = if input.dtype == DType::I8 {
            ConstData::I8(ndarray::ArrayD::from_elem(
                one,
                stored.clamp(-128.0, 127.0) as i8,
            ))
        } else {
            ConstData::I16(ndarray::ArrayD::from_elem(
                one,
                stored.clamp(-32768.0, 32767.0) as i16,
            ))
        };
        self.add_const(name, data, Some(q))
    }

    fn const_f32(&mut self, name: String, values: Vec<f32>) -> i32 {
        let n = values.len();
        self.add_const(name, ConstData::from_f32(&[n], values), None)
    }
}

fn ids(v: &[usize]) -> Vec<i32> {
    v.iter().map(|&i| i as i32).collect()
}

/// The graphs written as subgraphs: the main graph first, then those of its IF and WHILE nodes
/// (then/else, cond/body, in node order), then theirs, breadth first. Each with its name and the
/// index its first such node's first subgraph gets.
fn subgraph_list(g: &Graph) -> Vec<(&Graph, String, usize)> {
    let mut list = vec![(g, "main".to_string(), 0)];
    let mut next = 1;
    let mut i = 0;
    while i < list.len() {
        list[i].2 = next;
        let graph = list[i].0;
        for n in &graph.nodes {
            for (role, sub) in n.op.subgraphs() {
                list.push((sub, format!("{}/{role}", n.name), 0));
                next += 1;
            }
        }
        i += 1;
    }
    list
}

/// A tensor as written: name, shape, type, data (constants), quantization, whether it is a
/// variable tensor.
type TensorRow<'g> = (
    String,
    Vec<usize>,
    DType,
    Option<Cow<'g, ConstData>>,
    Option<QuantParams>,
    bool,
);

/// A subgraph's operators and the tensors its operators added.
type WrittenOps<'a> = (Vec<OpSpec<'a>>, Vec<ExtraTensor>);

/// Writes the graph as TFLite FlatBuffer bytes.
pub fn export(g: &Graph, opts: &ExportOptions) -> Result<Vec<u8>> {
    let graphs = subgraph_list(g);
    let mut w = Writer {
        g,
        // Room for every constant from the start: growing by doubling would copy (and fault in)
        // the weights written so far at each step. Where it falls short it grows as usual; the
        // bytes written do not depend on it.
        fbb: FlatBufferBuilder::with_capacity(capacity_estimate(&graphs)),
        extra: Vec::new(),
        next_subgraph: 0,
    };
    // Operators first (they may add constant tensors).
    let mut written: Vec<WrittenOps> = Vec::with_capacity(graphs.len());
    let mut errors = Vec::new();
    for &(graph, _, first_branch) in &graphs {
        w.g = graph;
        w.next_subgraph = first_branch;
        let mut ops = Vec::with_capacity(graph.nodes.len());
        for node in &graph.nodes {
            match op_spec(&mut w, node) {
                Ok(spec) => ops.push(spec),
                Err(e) => errors.push(format!("'{}' ({}): {e}", node.name, node.op.name())),
            }
        }
        written.push((ops, std::mem::take(&mut w.extra)));
    }
    if !errors.is_empty() {
        bail!(
            "{} op(s) cannot be written as TFLite operators:\n  {}",
            errors.len(),
            errors.join("\n  ")
        );
    }

    // Operator codes, in order of first use.
    let mut codes: Vec<(fb::BuiltinOperator, i32)> = Vec::new();
    let mut code_index = BTreeMap::new();
    for op in written.iter().flat_map(|(ops, _)| ops) {
        let key = (op.code.0, op.version);
        if let std::collections::btree_map::Entry::Vacant(e) = code_index.entry(key) {
            e.insert(codes.len() as u32);
            codes.push((op.code, op.version));
        }
    }

    let fbb = &mut w.fbb;
    // Buffers: 0 is the empty sentinel; each constant gets its own.
    let mut buffers = vec![{
        let b = fb::BufferArgs::default();
        fb::Buffer::create(fbb, &b)
    }];
    let rows: Vec<Vec<TensorRow>> = graphs
        .iter()
        .zip(&written)
        .map(|(&(graph, _, _), (_, extra))| {
            graph
                .tensors
                .iter()
                .map(|t| {
                    let data = t.data.as_ref().map(|d| narrow_i64(d, t.quant.is_some()));
                    let dtype = data.as_ref().map(|d| d.dtype()).unwrap_or(t.dtype);
                    (
                        t.name.clone(),
                        t.shape.clone(),
                        dtype,
                        data,
                        t.quant.clone(),
                        false,
                    )
                })
                .chain(extra.iter().map(|t| {
                    let data = (!t.variable).then(|| Cow::Borrowed(&t.data));
                    let dtype = t.data.dtype();
                    (
                        t.name.clone(),
                        t.shape.clone(),
                        dtype,
                        data,
                        t.quant.clone(),
                        t.variable,
                    )
                }))
                .collect()
        })
        .collect();
    // The constants' data first, so it lies together in the file and the metadata (shapes,
    // names, per-channel scales) elsewhere: a runtime that maps the file and gives back the pages
    // of weights it has repacked then frees whole pages, not pages shared with metadata.
    let tensor_buffers: Vec<Vec<u32>> = rows
        .iter()
        .map(|all| {
            all.iter()
                .map(|(_, _, _, data, _, _)| match data {
                    Some(d) => {
                        let bytes = d.as_le_bytes();
                        let v = fbb.create_vector::<Aligned16>(bytemuck::cast_slice(&bytes));
                        buffers.push(fb::Buffer::create(
                            fbb,
                            &fb::BufferArgs {
                                data: Some(v),
                                offset: 0,
                                size_: 0,
                            },
                        ));
                        (buffers.len() - 1) as u32
                    }
                    None => 0,
                })
                .collect()
        })
        .collect();
    let mut subgraph_offsets = Vec::with_capacity(graphs.len());
    for (((graph, name, _), (ops, _)), (all, buffer_ids)) in graphs
        .iter()
        .zip(&written)
        .zip(rows.iter().zip(&tensor_buffers))
    {
        let tensors = write_tensors(fbb, all, buffer_ids);
        let mut op_offsets = Vec::with_capacity(ops.len());
        for op in ops {
            let inputs = fbb.create_vector(&op.inputs);
            let outputs = fbb.create_vector(&op.outputs);
            let (ty, opts_off) = match op.options {
                Some((t, o)) => (t, Some(o)),
                None => (fb::BuiltinOptions::NONE, None),
            };
            op_offsets.push(fb::Operator::create(
                fbb,
                &fb::OperatorArgs {
                    opcode_index: code_index[&(op.code.0, op.version)],
                    inputs: Some(inputs),
                    outputs: Some(outputs),
                    builtin_options_type: ty,
                    builtin_options: opts_off,
                    ..Default::default()
                },
            ));
        }
        let tensors = fbb.create_vector(&tensors);
        let operators = fbb.create_vector(&op_offsets);
        let sg_inputs = fbb.create_vector(&ids(&graph.inputs));
        let sg_outputs = fbb.create_vector(&ids(&graph.outputs));
        let sg_name = fbb.create_string(name);
        subgraph_offsets.push(fb::SubGraph::create(
            fbb,
            &fb::SubGraphArgs {
                tensors: Some(tensors),
                inputs: Some(sg_inputs),
                outputs: Some(sg_outputs),
                operators: Some(operators),
                name: Some(sg_name),
            },
        ));
    }
    let subgraphs = fbb.create_vector(&subgraph_offsets);

    let code_offsets: Vec<_> = codes
        .iter()
        .map(|&(code, version)| {
            fb::OperatorCode::create(
                fbb,
                &fb::OperatorCodeArgs {
                    deprecated_builtin_code: code
                        .0
                        .min(fb::BuiltinOperator::PLACEHOLDER_FOR_GREATER_OP_CODES.0)
                        as i8,
                    custom_code: None,
                    version,
                    builtin_code: code,
                },
            )
        })
        .collect();
    let operator_codes = fbb.create_vector(&code_offsets);

    // Metadata: the oldest TFLite runtime that has every operator version used.
    let min_runtime = min_runtime_version(&codes);
    let mut rt = min_runtime.as_bytes().to_vec();
    rt.resize(16, 0);
    let rt: Vec<Aligned16> = rt.into_iter().map(Aligned16).collect();
    let rt_data = fbb.create_vector(&rt);
    buffers.push(fb::Buffer::create(
        fbb,
        &fb::BufferArgs {
            data: Some(rt_data),
            offset: 0,
            size_: 0,
        },
    ));
    let rt_buffer = (buffers.len() - 1) as u32;
    let md_name = fbb.create_string("min_runtime_version");
    let md = fb::Metadata::create(
        fbb,
        &fb::MetadataArgs {
            name: Some(md_name),
            buffer: rt_buffer,
        },
    );
    let mut mds = vec![md];
    let reserved;
    let plan = match (&opts.memory_plan, opts.reserve_plan) {
        (Some(plan), _) => Some((plan.as_slice(), literun::plan::OFFLINE_PLAN_METADATA)),
        (None, true) => {
            reserved = vec![0; 3 + rows.first().map_or(0, Vec::len)];
            Some((reserved.as_slice(), PLAN_PLACEHOLDER))
        }
        (None, false) => None,
    };
    if let Some((plan, name)) = plan {
        let bytes: Vec<Aligned16> = plan
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .map(Aligned16)
            .collect();
        let data = fbb.create_vector(&bytes);
        buffers.push(fb::Buffer::create(
            fbb,
            &fb::BufferArgs {
                data: Some(data),
                offset: 0,
                size_: 0,
            },
        ));
        let name = fbb.create_string(name);
        mds.push(fb::Metadata::create(
            fbb,
            &fb::MetadataArgs {
                name: Some(name),
                buffer: (buffers.len() - 1) as u32,
            },
        ));
    }
    let metadata = fbb.create_vector(&mds);
    let buffers = fbb.create_vector(&buffers);

    // Signature: the ONNX names of inputs and outputs.
    let maps = |fbb: &mut FlatBufferBuilder<'static>, list: &[usize]| {
        let v: Vec<_> = list
            .iter()
            .map(|&t| {
                let name = fbb.create_string(&g.tensors[t].name);
                fb::TensorMap::create(
                    fbb,
                    &fb::TensorMapArgs {
                        name: Some(name),
                        tensor_index: t as u32,
                    },
                )
            })
            .collect();
        fbb.create_vector(&v)
    };
    let sig_in = maps(fbb, &g.inputs);
    let sig_out = maps(fbb, &g.outputs);
    let key = fbb.create_string("serving_default");
    let sig = fb::SignatureDef::create(
        fbb,
        &fb::SignatureDefArgs {
            inputs: Some(sig_in),
            outputs: Some(sig_out),
            signature_key: Some(key),
            subgraph_index: 0,
        },
    );
    let signature_defs = fbb.create_vector(&[sig]);
    let description = fbb.create_string(if opts.description.is_empty() {
        "litecvt"
    } else {
        &opts.description
    });

    let model = fb::Model::create(
        fbb,
        &fb::ModelArgs {
            version: literun::schema::SCHEMA_VERSION,
            operator_codes: Some(operator_codes),
            subgraphs: Some(subgraphs),
            description: Some(description),
            buffers: Some(buffers),
            metadata_buffer: None,
            metadata: Some(metadata),
            signature_defs: Some(signature_defs),
        },
    );
    fbb.finish(model, Some(literun::schema::FILE_IDENTIFIER));
    // The file is the builder's tail: moved to the front of the builder's own buffer rather
    // than copied to fresh pages.
    let (mut buf, head) = w.fbb.collapse();
    buf.drain(..head);
    Ok(buf)
}

/// Bytes the written file takes, about: its constants' data (each padded to 16 bytes), the
/// quantization parameters, room for the tables, and a margin for the constants the operators
/// add (int32 biases of an int8 model).
fn capacity_estimate(graphs: &[(&Graph, String, usize)]) -> usize {
    let tensors = graphs.iter().flat_map(|(g, _, _)| &g.tensors);
    let bytes: usize = tensors
        .map(|t| {
            let data = t
                .data
                .as_ref()
                .map_or(0, |d| d.len() * d.dtype().size() + 16);
            let quant = t
                .quant
                .as_ref()
                .map_or(0, |q| q.scale.len() * 4 + q.zero_point.len() * 8);
            data + quant + 256
        })
        .sum();
    bytes + bytes / 32 + (1 << 16)
}

/// The tensor tables of one subgraph: `rows` (name, shape, type, data, quantization) with their
/// buffer indices.
fn write_tensors<'f>(
    fbb: &mut FlatBufferBuilder<'f>,
    rows: &[TensorRow],
    buffers: &[u32],
) -> Vec<WIPOffset<fb::Tensor<'f>>> {
    let mut tensor_offsets = Vec::with_capacity(rows.len());
    for ((name, shape, dtype, _, quant, variable), &buffer) in rows.iter().zip(buffers) {
        let shape_v: Vec<i32> = shape.iter().map(|&d| d as i32).collect();
        let shape_off = fbb.create_vector(&shape_v);
        let name_off = fbb.create_string(name);
        let quantization = quant.as_ref().map(|q| {
            let scale = fbb.create_vector(&q.scale);
            let zero_point = fbb.create_vector(&q.zero_point);
            fb::QuantizationParameters::create(
                fbb,
                &fb::QuantizationParametersArgs {
                    scale: Some(scale),
                    zero_point: Some(zero_point),
                    quantized_dimension: q.axis as i32,
                    ..Default::default()
                },
            )
        });
        tensor_offsets.push(fb::Tensor::create(
            fbb,
            &fb::TensorArgs {
                shape: Some(shape_off),
                type_: tensor_type(*dtype),
                buffer,
                name: Some(name_off),
                quantization,
                is_variable: *variable,
                has_rank: true,
                ..Default::default()
            },
        ));
    }
    tensor_offsets
}

/// TFLite kernels take int32 shapes, axes and indices: narrow int64 constants when they fit
/// (not `quantized` ones: the int64 bias of an int16x8 layer stays int64).
fn narrow_i64(d: &ConstData, quantized: bool) -> Cow<'_, ConstData> {
    match d {
        ConstData::I64(a) if !quantized && a.iter().all(|&v| i32::try_from(v).is_ok()) => {
            Cow::Owned(d.cast(DType::I32))
        }
        _ => Cow::Borrowed(d),
    }
}

/// The minimum TFLite runtime version for the operator versions used (from TFLite's own table
/// for the ops litecvt writes).
fn min_runtime_version(codes: &[(fb::BuiltinOperator, i32)]) -> String {
    let mut best = (1u32, 5u32, 0u32);
    for &(code, version) in codes {
        let v = super::versions::min_runtime(code, version);
        if v > best {
            best = v;
        }
    }
    format!("{}.{}.{}", best.0, best.1, best.2)
}
