//! The int8 weights of a conversion's float constants, made once and reused: every attempt of
//! the range choice, bias correction and the `--min-snr` search quantizes the same weights.

use super::weights;
use crate::ir::{ConstData, QuantParams, TensorId};
use std::collections::HashMap;
use std::sync::Arc;

/// Symmetric int8 weights by float tensor and channel axis, with the float constant they were
/// quantized from: a tensor of the same shape and bytes gets the same int8 values and scales.
/// The constant is held shared with the graphs it came from (no copy), so a graph cloned from
/// the same float graph hands in the very same constant and is recognized without comparing.
#[derive(Default)]
pub struct WeightCache(std::sync::Mutex<HashMap<(TensorId, Option<usize>), CachedWeights>>);

type CachedWeights = (Arc<ConstData>, Arc<ConstData>, QuantParams);

impl std::fmt::Debug for WeightCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeightCache")
    }
}

/// Whether `a` and `b` have the same shape and bit patterns (compared as memory where both are
/// contiguous).
fn same_values(a: &ndarray::ArrayD<f32>, b: &ndarray::ArrayD<f32>) -> bool {
    a.shape() == b.shape()
        && match (a.as_slice(), b.as_slice()) {
            (Some(x), Some(y)) => {
                bytemuck::cast_slice::<f32, u8>(x) == bytemuck::cast_slice::<f32, u8>(y)
            }
            _ => a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
        }
}

/// Whether the constants `a` and `b` hold the same float32 values bit for bit: at once where
/// they are one shared constant (a shared constant is never changed in place: a change copies
/// it), else compared.
fn same_constant(a: &Arc<ConstData>, b: &Arc<ConstData>) -> bool {
    Arc::ptr_eq(a, b) || matches!((a.as_f32(), b.as_f32()), (Some(x), Some(y)) if same_values(x, y))
}

impl WeightCache {
    /// [`weights::quantize_symmetric`] of tensor `t`'s float32 values `w`, through `cache`
    /// where there is one.
    pub fn quantize(
        cache: Option<&WeightCache>,
        t: TensorId,
        w: &Arc<ConstData>,
        axis: Option<usize>,
    ) -> (Arc<ConstData>, QuantParams) {
        match cache {
            Some(cache) => cache.quantize_symmetric(t, w, axis),
            None => {
                let values = w.as_f32().expect("float32 weights");
                let (q, p) = weights::quantize_symmetric(values, axis);
                (q.into(), p)
            }
        }
    }

    /// [`weights::quantize_symmetric`] of tensor `t`'s float32 values `w`, from the cache
    /// where `w` holds the same values as when it was stored (the int8 constant then shared
    /// with the files made before).
    pub fn quantize_symmetric(
        &self,
        t: TensorId,
        w: &Arc<ConstData>,
        axis: Option<usize>,
    ) -> (Arc<ConstData>, QuantParams) {
        let lock = || self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((f, q, p)) = lock().get(&(t, axis)) {
            if same_constant(f, w) {
                return (Arc::clone(q), p.clone());
            }
        }
        let values = w.as_f32().expect("float32 weights");
        // Not locked while quantizing (it runs on rayon's threads).
        let (q, p) = weights::quantize_symmetric(values, axis);
        let q = Arc::new(q);
        lock().insert((t, axis), (Arc::clone(w), Arc::clone(&q), p.clone()));
        (q, p)
    }
}
