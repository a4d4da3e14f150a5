//! A verified, zero-copy view of a TFLite-format model.
// Without `error-details`, values only error messages mention are unused.
#![cfg_attr(not(feature = "error-details"), allow(unused_variables))]

use crate::error::format;
use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Deref;

use self::rawfb::RawTable;
use crate::error::{invalid, Error, Result, UnsupportedOp};
use crate::schema;

pub(crate) mod rawfb;
pub(crate) mod registry;
#[cfg(feature = "dynamic-shapes")]
mod resize;
mod verify;

/// Largest tensor literun accepts, in bytes.
pub const MAX_TENSOR_BYTES: usize = 1 << 31;
/// Largest tensor rank literun accepts.
pub const MAX_RANK: usize = 8;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    /// IEEE half; only as constant data (converted by `DEQUANTIZE`).
    F16,
    I32,
    I64,
    /// One byte per element, 0 or 1.
    Bool,
    I8,
    U8,
    /// Quantized 16-bit (only as DEQUANTIZE input and in data-movement ops).
    I16,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::I16 => 2,
            DType::I64 => 8,
            DType::Bool | DType::I8 | DType::U8 => 1,
        }
    }

    /// The schema type, as in the file.
    pub fn to_tflite(self) -> schema::TensorType {
        use schema::TensorType as T;
        match self {
            DType::F32 => T::FLOAT32,
            DType::F16 => T::FLOAT16,
            DType::I32 => T::INT32,
            DType::I64 => T::INT64,
            DType::Bool => T::BOOL,
            DType::I8 => T::INT8,
            DType::U8 => T::UINT8,
            DType::I16 => T::INT16,
        }
    }

    /// The literun type for a schema type, if supported.
    pub fn from_tflite(t: schema::TensorType) -> Option<DType> {
        use schema::TensorType as T;
        Some(match t {
            T::FLOAT32 => DType::F32,
            T::FLOAT16 => DType::F16,
            T::INT32 => DType::I32,
            T::INT64 => DType::I64,
            T::BOOL => DType::Bool,
            T::INT8 => DType::I8,
            T::UINT8 => DType::U8,
            T::INT16 => DType::I16,
            _ => return None,
        })
    }

    /// Upper-case name as in the TFLite schema (`"FLOAT32"`...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "FLOAT32",
            DType::F16 => "FLOAT16",
            DType::I32 => "INT32",
            DType::I64 => "INT64",
            DType::Bool => "BOOL",
            DType::I8 => "INT8",
            DType::U8 => "UINT8",
            DType::I16 => "INT16",
        }
    }

    /// The representable range of an integer type, `None` for float and bool types.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            DType::I8 => Some((-128, 127)),
            DType::U8 => Some((0, 255)),
            DType::I16 => Some((-32768, 32767)),
            DType::I32 => Some((i64::from(i32::MIN), i64::from(i32::MAX))),
            DType::I64 => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

/// Per-tensor affine quantization (`real = scale * (q - zero_point)`), per-tensor only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quant {
    pub scale: f32,
    pub zero_point: i64,
}

/// Full affine quantization parameters of a tensor, verified when the model is loaded: every
/// scale is finite and positive, there is one scale (per-tensor) or one per index of
/// `quantized_dimension` (per-channel), as many zero points as scales, each in the range of the
/// tensor's type.
///
/// `scales` and `zero_points` borrow the model bytes where the file's vectors are aligned for
/// their type (always, for a buffer aligned to 8 bytes), so a model with thousands of
/// per-channel scales does not hold them twice; otherwise they are copies.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantParams<'a> {
    pub scales: Cow<'a, [f32]>,
    pub zero_points: Cow<'a, [i64]>,
    /// The axis the scales run along (meaningful when there is more than one scale).
    pub quantized_dimension: usize,
}

impl QuantParams<'_> {
    /// Whether there is exactly one scale.
    pub fn is_per_tensor(&self) -> bool {
        self.scales.len() == 1
    }

    /// The scale and zero point of channel `c` (the only ones for a per-tensor tensor).
    pub fn channel(&self, c: usize) -> (f32, i64) {
        let i = if self.scales.len() == 1 { 0 } else { c };
        (self.scales[i], self.zero_points[i])
    }
}

/// A tensor of subgraph 0.
#[derive(Clone, Debug)]
pub struct TensorDesc<'a> {
    /// Name from the file (may be empty).
    pub name: &'a str,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Element count.
    pub elements: usize,
    /// Byte size (`elements * dtype.size()`).
    pub bytes: usize,
    /// Constant data, aligned for `dtype` (zero-copy slice of the model bytes).
    pub data: Option<&'a [u8]>,
    /// The file's `shape_signature` when it has one: `shape` with -1 for each dimension that
    /// may change (`Interpreter::resize_input`). Read with the `dynamic-shapes` feature only.
    #[cfg(feature = "dynamic-shapes")]
    pub shape_signature: Option<Vec<i32>>,
    /// Per-tensor quantization parameters, when the tensor has exactly one scale.
    pub quant: Option<Quant>,
    /// All quantization parameters (per-tensor or per-channel) of an integer tensor, verified.
    /// `None` when the file has none (or for float tensors).
    pub qparams: Option<QuantParams<'a>>,
    /// A variable tensor (`is_variable`): state an operator keeps across invocations (TFLite
    /// zeroes it when allocating when it has no data), so readable before any operator writes it.
    /// Read with the `ops-sequence` feature (the operators that keep state); `false` without.
    pub variable: bool,
}

/// An operator of subgraph 0.
#[derive(Clone, Debug)]
pub struct OpDesc<'a> {
    pub code: schema::BuiltinOperator,
    /// Tensor indices; `None` for an omitted optional input (-1 in the file).
    pub inputs: Vec<Option<usize>>,
    pub outputs: Vec<usize>,
    /// `builtin_options_type` tag.
    pub options_type: u8,
    #[allow(dead_code)]
    pub(crate) options: Option<RawTable<'a>>,
}

impl OpDesc<'_> {
    /// Builtin name, e.g. `"CONV_2D"`.
    pub fn name(&self) -> String {
        op_name(self.code)
    }
}

/// The error of operator `index`, naming it.
pub(crate) fn op_err(index: usize, op: &OpDesc<'_>, reason: impl Into<String>) -> Error {
    Error::Op {
        index,
        op: op.name(),
        reason: reason.into(),
    }
}

pub(crate) fn op_name(code: schema::BuiltinOperator) -> String {
    #[cfg(feature = "error-details")]
    let name = match code.variant_name() {
        Some(n) => n.to_string(),
        None => ["UNKNOWN(", &crate::error::decimal(code.0.into()), ")"].concat(),
    };
    // Without `error-details`, only the operators literun supports are named (the schema's ~200
    // names are 4 KiB of firmware).
    #[cfg(not(feature = "error-details"))]
    let name = match registry::supported_name(code) {
        Some(n) => n.to_string(),
        None => ["BUILTIN(", &crate::error::decimal(code.0.into()), ")"].concat(),
    };
    name
}

/// A model input or output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo<'a> {
    /// Signature name when the model has a SignatureDef, else the tensor name.
    pub name: &'a str,
    /// Index of the tensor in subgraph 0.
    pub tensor: usize,
    pub shape: Vec<usize>,
    pub dtype: DType,
}

/// A verified, zero-copy view over model bytes.
#[derive(Clone, Debug)]
pub struct Model<'a> {
    bytes: &'a [u8],
    root: schema::Model<'a>,
    tensors: Vec<TensorDesc<'a>>,
    ops: Vec<OpDesc<'a>>,
    inputs: Vec<TensorInfo<'a>>,
    outputs: Vec<TensorInfo<'a>>,
    /// Whether tensor shapes differ from the file's ([`Model::resized`]): a memory plan stored
    /// in the file no longer applies.
    resized: bool,
}

fn verifier_options(len: usize) -> flatbuffers::VerifierOptions {
    flatbuffers::VerifierOptions {
        max_depth: 64,
        max_tables: 1_000_000,
        // The apparent size counts shared vtables once per table and overlapping ranges again, so
        // it can exceed the file size on valid models; a small multiple still bounds the work.
        max_apparent_size: len.saturating_mul(4).max(1 << 16),
        ignore_missing_null_terminator: false,
    }
}

fn index(i: i64, len: usize, what: &str) -> Result<usize> {
    usize::try_from(i)
        .ok()
        .filter(|&u| u < len)
        .ok_or_else(|| invalid!("{what} index {i} out of range (0..{len})"))
}

/// Reads and verifies a tensor's quantization parameters. Float and bool tensors ignore them
/// (TFLite does too); integer tensors get them checked.
fn read_quant<'a>(
    q: schema::QuantizationParameters<'a>,
    dtype: DType,
    shape: &[usize],
) -> core::result::Result<Option<QuantParams<'a>>, String> {
    let Some((lo, hi)) = dtype.int_range() else {
        return Ok(None);
    };
    let scales = q.scale().map_or(Cow::Borrowed(&[][..]), scalars);
    let zps = q.zero_point().map_or(Cow::Borrowed(&[][..]), scalars);
    if scales.is_empty() {
        if !zps.is_empty() {
            return Err("quantization has zero points but no scales".into());
        }
        return Ok(None);
    }
    if q.details_type().0 != 0 {
        return Err("custom quantization details are not supported".into());
    }
    for (i, &s) in scales.iter().enumerate() {
        if !(s.is_finite() && s > 0.0) {
            return Err(format!(
                "quantization scale #{i} is {s} (must be finite and > 0)"
            ));
        }
    }
    let zero_points = if zps.is_empty() {
        Cow::Owned(vec![0; scales.len()])
    } else if zps.len() == scales.len() {
        zps
    } else {
        return Err(format!(
            "{} quantization scales but {} zero points",
            scales.len(),
            zps.len()
        ));
    };
    for &z in zero_points.iter() {
        if z < lo || z > hi {
            return Err(format!(
                "zero point {z} is outside the range of {}",
                dtype.name()
            ));
        }
    }
    let qd = q.quantized_dimension();
    let quantized_dimension = if scales.len() > 1 {
        let d = usize::try_from(qd)
            .ok()
            .filter(|&d| d < shape.len())
            .ok_or_else(|| format!("quantized_dimension {qd} out of range for shape {shape:?}"))?;
        if shape[d] != scales.len() {
            return Err(format!(
                "{} quantization scales, but dimension {d} of shape {shape:?} has size {}",
                scales.len(),
                shape[d]
            ));
        }
        d
    } else {
        usize::try_from(qd).unwrap_or(0)
    };
    Ok(Some(QuantParams {
        scales,
        zero_points,
        quantized_dimension,
    }))
}

/// A flatbuffer vector of little-endian scalars: the model's own bytes when they are aligned
/// for `T` on a little-endian machine, else a copy.
fn scalars<'a, T>(v: flatbuffers::Vector<'a, T>) -> Cow<'a, [T]>
where
    T: bytemuck::Pod + flatbuffers::Follow<'a, Inner = T> + 'a,
{
    if cfg!(target_endian = "little") {
        if let Ok(s) = bytemuck::try_cast_slice(v.bytes()) {
            return Cow::Borrowed(s);
        }
    }
    Cow::Owned(v.iter().collect())
}

/// Checked element count of a shape.
pub(crate) fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

impl<'a> Model<'a> {
    /// Verifies `bytes` and builds the view. The bytes must be 16-byte aligned (see
    /// [`AlignedBytes`]) when the model has constant data.
    pub fn from_bytes(bytes: &'a [u8]) -> Result<Model<'a>> {
        if bytes.len() < 8 {
            return Err(invalid!("{} bytes is too short for a model", bytes.len()));
        }
        if &bytes[4..8] != schema::FILE_IDENTIFIER.as_bytes() {
            return Err(invalid!(
                "file identifier is {:?}, expected \"TFL3\"",
                String::from_utf8_lossy(&bytes[4..8])
            ));
        }
        let opts = verifier_options(bytes.len());
        let root = verify::root(&opts, bytes)
            .map_err(|e| invalid!("flatbuffer verification failed: {e}"))?;
        if root.version() != schema::SCHEMA_VERSION {
            return Err(invalid!("schema version {} (expected 3)", root.version()));
        }
        let subgraphs = root.subgraphs().ok_or_else(|| invalid!("no subgraphs"))?;
        if subgraphs.is_empty() {
            return Err(invalid!("no subgraphs"));
        }
        let sg = subgraphs.get(0);
        let buffers = root.buffers();
        let nbuf = buffers.map_or(0, |b| b.len());

        // Tensors.
        let mut tensors = Vec::new();
        if let Some(ts) = sg.tensors() {
            for (ti, t) in ts.iter().enumerate() {
                let name = t.name().unwrap_or("");
                // Built without `core::fmt`: the same text in every build.
                let ti_ = crate::error::decimal(ti as i64);
                let ctx = |m: String| {
                    Error::InvalidModel(["tensor ", &ti_, " '", name, "': ", &m].concat())
                };
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
        let read_list =
            |v: Option<flatbuffers::Vector<'a, i32>>, what: &str| -> Result<Vec<usize>> {
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
                            index(i64::from(i), nt, "output tensor")
                                .map_err(|e| err(e.to_string()))?,
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
                match registry::arity(code).filter(|_| compiled_out.is_none()) {
                    None => unsupported.push(UnsupportedOp {
                        index: oi,
                        op: match compiled_out {
                            Some(f) => [name.as_str(), " (feature ", f, " is off)"].concat(),
                            None => name.clone(),
                        },
                    }),
                    Some(a) => {
                        if !a.inputs.contains(&inputs.len()) || !a.outputs.contains(&outputs.len())
                        {
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

        // Names: from the first SignatureDef when present.
        let sig = root
            .signature_defs()
            .and_then(|s| if s.is_empty() { None } else { Some(s.get(0)) });
        let sig_name = |list: Option<
            flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<schema::TensorMap<'a>>>,
        >,
                        t: usize|
         -> Option<&'a str> {
            list?
                .iter()
                .find(|m| m.tensor_index() as usize == t)
                .and_then(|m| m.name())
        };
        let info = |t: usize, list| TensorInfo {
            name: sig_name(list, t).unwrap_or(tensors[t].name),
            tensor: t,
            shape: tensors[t].shape.clone(),
            dtype: tensors[t].dtype,
        };
        let inputs = in_ids
            .iter()
            .map(|&t| info(t, sig.and_then(|s| s.inputs())))
            .collect();
        let outputs = out_ids
            .iter()
            .map(|&t| info(t, sig.and_then(|s| s.outputs())))
            .collect();

        Ok(Model {
            bytes,
            root,
            tensors,
            ops,
            inputs,
            outputs,
            resized: false,
        })
    }

    /// The model bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The underlying generated FlatBuffers view (verified, builtin options included; only with
    /// the `schema-api` feature, which verifies them when the model is loaded).
    #[cfg(feature = "schema-api")]
    pub fn schema(&self) -> schema::Model<'a> {
        self.root
    }

    /// The generated view for literun itself: verified except the builtin options tables (read
    /// with `RawTable`) when `schema-api` is off.
    pub(crate) fn root(&self) -> schema::Model<'a> {
        self.root
    }

    /// Model inputs, in subgraph order.
    pub fn inputs(&self) -> &[TensorInfo<'a>] {
        &self.inputs
    }

    /// Model outputs, in subgraph order.
    pub fn outputs(&self) -> &[TensorInfo<'a>] {
        &self.outputs
    }

    /// Whether the tensor shapes differ from the file's (`Model::resized`, feature
    /// `dynamic-shapes`).
    pub fn is_resized(&self) -> bool {
        self.resized
    }

    /// The position in [`inputs`](Self::inputs) of the input called `name`: its signature key
    /// (`input_1`) or its tensor's name in the file (`serving_default_input_1:0`, the name
    /// LiteRT's `get_input_details` shows). A key is matched before a tensor name.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.io_index(&self.inputs, name)
    }

    /// The position in [`outputs`](Self::outputs) of the output called `name`: its signature
    /// key or its tensor's name in the file (`StatefulPartitionedCall:0`).
    pub fn output_index(&self, name: &str) -> Option<usize> {
        self.io_index(&self.outputs, name)
    }

    fn io_index(&self, list: &[TensorInfo<'a>], name: &str) -> Option<usize> {
        list.iter().position(|t| t.name == name).or_else(|| {
            list.iter()
                .position(|t| self.tensors.get(t.tensor).is_some_and(|d| d.name == name))
        })
    }

    /// All tensors of subgraph 0.
    pub fn tensors(&self) -> &[TensorDesc<'a>] {
        &self.tensors
    }

    /// Operators of subgraph 0, in execution order.
    pub fn operators(&self) -> &[OpDesc<'a>] {
        &self.ops
    }

    /// The constant data of tensor `t` as `f32` (zero-copy).
    pub fn const_f32(&self, t: usize) -> Result<&'a [f32]> {
        let d = self.const_bytes(t)?;
        bytemuck::try_cast_slice(d).map_err(|_| Error::Misaligned)
    }

    /// The constant bytes of tensor `t`.
    pub fn const_bytes(&self, t: usize) -> Result<&'a [u8]> {
        let desc = self
            .tensors
            .get(t)
            .ok_or_else(|| Error::Tensor(format!("no tensor {t}")))?;
        desc.data
            .ok_or_else(|| Error::Tensor(format!("tensor {t} '{}' is not constant", desc.name)))
    }
}

/// 16-byte-aligned owned bytes, for loading a model so its constant data can be used in place.
#[derive(Clone, Default)]
pub struct AlignedBytes {
    words: Vec<u128>,
    len: usize,
}

impl AlignedBytes {
    /// Copies `bytes` into aligned storage.
    pub fn from_slice(bytes: &[u8]) -> AlignedBytes {
        let mut words = vec![0u128; bytes.len().div_ceil(16)];
        bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        AlignedBytes {
            words,
            len: bytes.len(),
        }
    }

    /// Reads a whole file into aligned storage (straight into it: the file is held once).
    #[cfg(feature = "std")]
    pub fn read_file(path: impl AsRef<std::path::Path>) -> Result<AlignedBytes> {
        use std::io::Read;
        let path = path.as_ref();
        let io = |e: std::io::Error| Error::Io(format!("{}: {e}", path.display()));
        let mut f = std::fs::File::open(path).map_err(io)?;
        let len = f.metadata().map_err(io)?.len() as usize;
        let mut words = vec![0u128; len.div_ceil(16)];
        f.read_exact(&mut bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..len])
            .map_err(io)?;
        Ok(AlignedBytes { words, len })
    }
}

impl Deref for AlignedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &bytemuck::cast_slice::<u128, u8>(&self.words)[..self.len]
    }
}

impl core::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "AlignedBytes({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_bytes_roundtrip_and_alignment() {
        for n in [0usize, 1, 15, 16, 17, 100] {
            let v: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let a = AlignedBytes::from_slice(&v);
            assert_eq!(&*a, &v[..]);
            assert_eq!(a.as_ptr() as usize % 16, 0);
        }
    }

    #[test]
    fn short_and_garbage_inputs_are_errors() {
        assert!(Model::from_bytes(&[]).is_err());
        assert!(Model::from_bytes(&[0; 7]).is_err());
        assert!(Model::from_bytes(&[0; 64]).is_err());
        let mut b = [0u8; 64];
        b[4..8].copy_from_slice(b"TFL3");
        assert!(Model::from_bytes(&b).is_err());
    }
}
