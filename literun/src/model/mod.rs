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
use crate::error::{invalid, Error, Result};
use crate::schema;

pub(crate) mod rawfb;
pub(crate) mod registry;
#[cfg(feature = "dynamic-shapes")]
mod resize;
mod subgraph;
mod verify;

#[cfg(feature = "ops-variables")]
pub(crate) use self::subgraph::called_subgraphs;
use self::subgraph::{read_subgraph, Subgraph};

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
    /// A resource variable's handle (VAR_HANDLE's output): the variable's id, an int32 as
    /// LiteRT stores it.
    #[cfg(feature = "ops-variables")]
    Resource,
    /// A complex number: two FLOAT32, real then imaginary part (RFFT2D's output).
    #[cfg(feature = "ops-fft")]
    Complex64,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            #[cfg(feature = "ops-variables")]
            DType::Resource => 4,
            DType::F16 | DType::I16 => 2,
            DType::I64 => 8,
            #[cfg(feature = "ops-fft")]
            DType::Complex64 => 8,
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
            #[cfg(feature = "ops-variables")]
            DType::Resource => T::RESOURCE,
            #[cfg(feature = "ops-fft")]
            DType::Complex64 => T::COMPLEX64,
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
            #[cfg(feature = "ops-variables")]
            T::RESOURCE => DType::Resource,
            #[cfg(feature = "ops-fft")]
            T::COMPLEX64 => DType::Complex64,
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
            #[cfg(feature = "ops-variables")]
            DType::Resource => "RESOURCE",
            #[cfg(feature = "ops-fft")]
            DType::Complex64 => "COMPLEX64",
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
    /// Tensor indices of the operator's intermediates (the integer LSTM reads their
    /// quantization parameters). Read with the `ops-sequence` feature only.
    #[cfg(feature = "ops-sequence")]
    pub(crate) intermediates: Vec<usize>,
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
    /// The file's other subgraphs (1, 2, ...), verified: the ones CALL_ONCE runs.
    #[cfg(feature = "ops-variables")]
    subgraphs: Vec<Subgraph<'a>>,
    /// Which subgraph of the file `tensors` and `ops` are: 0, or the one a CALL_ONCE runs in the
    /// view [`Model::subgraph_model`] makes of it.
    #[cfg(feature = "ops-variables")]
    subgraph: usize,
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
        let Subgraph {
            tensors,
            ops,
            in_ids,
            out_ids,
        } = read_subgraph(root, sg)?;
        #[cfg(feature = "ops-variables")]
        let others = subgraph::read_called_subgraphs(root, subgraphs, &ops)?;

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
            #[cfg(feature = "ops-variables")]
            subgraphs: others,
            #[cfg(feature = "ops-variables")]
            subgraph: 0,
        })
    }

    /// How many subgraphs the file has (only subgraph 0 is read without the `ops-variables`
    /// feature, and a file with more is run only if nothing calls them).
    pub fn subgraph_count(&self) -> usize {
        self.root.subgraphs().map_or(0, |s| s.len())
    }

    /// Which subgraph of the file this model's tensors and operators are (0 unless this is the
    /// view of a subgraph a CALL_ONCE runs).
    pub(crate) fn subgraph_index(&self) -> usize {
        #[cfg(feature = "ops-variables")]
        return self.subgraph;
        #[cfg(not(feature = "ops-variables"))]
        0
    }

    /// Subgraph `k` (1 or more) as a model of its own, with no inputs or outputs of its own
    /// beyond its subgraph's, for preparing the interpreter that runs it.
    #[cfg(feature = "ops-variables")]
    pub(crate) fn subgraph_model(&self, k: usize) -> Result<Model<'a>> {
        let sg = k
            .checked_sub(1)
            .and_then(|i| self.subgraphs.get(i))
            .ok_or_else(|| invalid!("no subgraph {k}"))?;
        let info = |t: usize| TensorInfo {
            name: sg.tensors[t].name,
            tensor: t,
            shape: sg.tensors[t].shape.clone(),
            dtype: sg.tensors[t].dtype,
        };
        Ok(Model {
            bytes: self.bytes,
            root: self.root,
            tensors: sg.tensors.clone(),
            ops: sg.ops.clone(),
            inputs: sg.in_ids.iter().map(|&t| info(t)).collect(),
            outputs: sg.out_ids.iter().map(|&t| info(t)).collect(),
            resized: false,
            subgraphs: self.subgraphs.clone(),
            subgraph: k,
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
