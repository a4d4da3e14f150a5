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
