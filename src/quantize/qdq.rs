//! The quantization parameters an already-quantized ONNX model (QDQ or dynamic) carries.
//!
//! `import::qdq` leaves them as annotations on float tensors (`Tensor::quant` on an F32 tensor);
//! [`take`] removes them from the lowered graph (so no float tensor is ever written with
//! quantization parameters) and hands them to the quantizer, which uses them instead of (or
//! before) calibration: activations get exactly the model's scale and zero point, weights the
//! model's int8 values — when the values the passes left are still exactly those the parameters
//! describe, and the parameters are what TFLite's kernels accept (symmetric weights on the output
//! channel axis). Otherwise the weight is requantized and a note says so.

use crate::ir::{ConstData, DType, Graph, QuantParams, TensorId};
use ndarray::ArrayD;
use std::collections::HashMap;

/// Parameters from the model, by tensor of the lowered graph.
#[derive(Clone, Debug, Default)]
pub struct Annotations {
    /// Runtime tensors (from QuantizeLinear → DequantizeLinear pairs), int8 domain.
    pub activations: HashMap<TensorId, QuantParams>,
    /// Constants (from DequantizeLinear of int8/uint8 data), int8 domain.
    pub constants: HashMap<TensorId, QuantParams>,
}

impl Annotations {
    /// True for a QDQ model (activation parameters present): it converts to full int8.
    pub fn is_static(&self) -> bool {
        !self.activations.is_empty()
    }

    pub fn is_empty(&self) -> bool {
        self.activations.is_empty() && self.constants.is_empty()
    }
}

/// Removes the annotations from `g`'s float tensors and returns them.
pub fn take(g: &mut Graph) -> Annotations {
    let mut a = Annotations::default();
    for (i, t) in g.tensors.iter_mut().enumerate() {
        if t.dtype != DType::F32 {
            continue;
        }
        let Some(q) = t.quant.take() else { continue };
        if t.is_const() {
            a.constants.insert(i, q);
        } else {
            a.activations.insert(i, q);
        }
    }
    a
}

/// The int8 values `w` holds under `p`, when every value is exactly `(q - zp) * scale` with q an
/// int8 (the dequantized weight, untouched by the passes); `None` otherwise.
pub fn exact_int8(w: &ArrayD<f32>, p: &QuantParams) -> Option<ConstData> {
    let shape = w.shape();
    let n = p.scale.len();
    if p.zero_point.len() != n || n == 0 {
        return None;
    }
    let inner: usize = if p.is_per_channel() {
        if p.axis >= shape.len() || shape[p.axis] != n {
            return None;
        }
        shape[p.axis + 1..].iter().product()
    } else {
        1
    };
    let mut out = Vec::with_capacity(w.len());
    for (i, &v) in w.iter().enumerate() {
        let c = if p.is_per_channel() {
            (i / inner.max(1)) % n
        } else {
            0
        };
        let (s, z) = (p.scale[c], p.zero_point[c]);
        let q = (v / s).round() as i64 + z;
        if !(-128..=127).contains(&q) || (q - z) as f32 * s != v {
            return None;
        }
        out.push(q as i8);
    }
    Some(ConstData::I8(
        ArrayD::from_shape_vec(shape.to_vec(), out).ok()?,
    ))
}

/// The model's int8 weight for a conv/dense layer whose output channels are `channel_axis`:
/// `Some((values, params))` when the annotation is symmetric (zero point 0, as TFLite's conv and
/// dense kernels require), per tensor or per output channel, and still describes `w` exactly.
/// `Err(reason)` when there is an annotation that cannot be used as is.
pub fn weight(
    w: &ArrayD<f32>,
    annotation: Option<&QuantParams>,
    channel_axis: usize,
) -> Result<Option<(ConstData, QuantParams)>, String> {
    let Some(p) = annotation else {
        return Ok(None);
    };
    if p.zero_point.iter().any(|&z| z != 0) {
        return Err("asymmetric weights (zero point ≠ 0; TFLite needs 0)".into());
    }
    if p.is_per_channel() && p.axis != channel_axis {
        return Err(format!(
            "per-axis parameters on axis {} where TFLite wants the output channels",
            p.axis
        ));
    }
    match exact_int8(w, p) {
        Some(q) => Ok(Some((q, p.clone()))),
        None => Err("the optimizer changed the values (e.g. a folded scale)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::IxDyn;

    #[test]
    fn exact_values_are_recovered_and_changed_ones_refused() {
        let p = QuantParams {
            scale: vec![0.5, 0.25],
            zero_point: vec![0, 0],
            axis: 0,
        };
        let q = [-128i64, 3, 127, -2];
        let v: Vec<f32> = q
            .iter()
            .enumerate()
            .map(|(i, &x)| x as f32 * p.scale[i / 2])
            .collect();
        let w = ArrayD::from_shape_vec(IxDyn(&[2, 2]), v.clone()).unwrap();
        assert_eq!(exact_int8(&w, &p).unwrap().to_i64_vec(), q.to_vec());
        let mut v2 = v;
        v2[1] *= 1.01;
        let w2 = ArrayD::from_shape_vec(IxDyn(&[2, 2]), v2).unwrap();
        assert!(exact_int8(&w2, &p).is_none());
        // Wrong axis or asymmetric: refused with a reason.
        assert!(weight(&w, Some(&p), 1).is_err());
        let asym = QuantParams::per_tensor(0.5, 3);
        assert!(weight(&w, Some(&asym), 0).is_err());
        assert!(weight(&w, None, 0).unwrap().is_none());
    }
}
