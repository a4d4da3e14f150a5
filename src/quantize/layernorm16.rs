//! LayerNorm internals with int16 activations. A LayerNorm lowers to nine elementwise and
//! reduction ops (mean, squared difference, variance, reciprocal square root, the centred and
//! normalized values, the affine), and in int8 each of them rounds: the normalized value passes
//! through about eight int8 tensors, and each row's scale (the reciprocal square root of its
//! variance) is one int8 step in 256 of the range over all rows. ONNX Runtime's quantizer, which
//! has no integer LayerNorm, keeps all of it float. Here the ops with a 16x8 kernel run int16
//! (no weights, int16 constants) and the two TFLite has only in int8 and float, SQUARED_DIFFERENCE
//! and RSQRT, run float between a DEQUANTIZE and a QUANTIZE: the values reach int8 once, where a
//! dense layer reads the LayerNorm's output. Kept only where the output measurably improves
//! (pipeline): it makes the file not integer-only, and its LayerNorms a little slower (the
//! conversions around the float ops).

use super::params::int16_rule;
use super::pipeline::{Attempt, Quantizer, CHOICE_MARGIN_DB};
use crate::ir::Graph;
use anyhow::Result;

/// A LayerNorm's ops by how they would run: int16 (a 16x8 kernel) or float.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LayerNormOps {
    pub int16: Vec<String>,
    pub float: Vec<String>,
}

/// The graph's LayerNorm nodes (`Graph::layernorm_nodes`), split by how they would run.
pub fn candidates(g: &Graph) -> LayerNormOps {
    let mut ops = LayerNormOps::default();

    for n in g
        .nodes
        .iter()
        .filter(|n| g.layernorm_nodes.contains(&n.name))
    {
        match int16_rule(g, n) {
            Some(_) => ops.int16.push(n.name.clone()),
            None => ops.float.push(n.name.clone()),
        }
    }

    ops
}

/// A bias-corrected float graph, the layers corrected and the quantized result
/// ([`super::bias_correction::correct`]).
type Corrected = Option<(Graph, Vec<String>, Attempt)>;

/// Runs the LayerNorms' ops in int16 (and float where they have no 16x8 kernel), with ranges
/// chosen again by `choose_ranges` and biases corrected again by `correct_biases`, if the output
/// SNR then gains [`CHOICE_MARGIN_DB`] on the error samples over `best` with its correction, or
/// whatever it then is with `force`; returns the range choice then made, or `None` with `q` as
/// it was.
pub fn keep_if_better<M>(
    q: &mut Quantizer<'_>,
    (best, corrected): (&mut Attempt, &mut Corrected),
    ops: &LayerNormOps,
    force: bool,
    choose_ranges: impl Fn(&mut Quantizer<'_>) -> Result<(Attempt, M)>,
    correct_biases: impl Fn(&Quantizer<'_>, &Attempt) -> Result<Corrected>,
) -> Result<Option<M>> {
    if ops.int16.is_empty() {
        return Ok(None);
    }
    let snr = |a: &Attempt, c: &Corrected| match c {
        Some((_, _, corrected)) => corrected.worst_snr().max(a.worst_snr()),
        None => a.worst_snr(),
    };
    let (ranges, before) = (q.ranges.clone(), q.int8.int16_nodes.len());
    // A node asked for int16 without a 16x8 kernel runs float (`FullInt8Options::int16_nodes`).
    q.int8
        .int16_nodes
        .extend(ops.int16.iter().chain(&ops.float).cloned());
    let (attempt, method) = choose_ranges(q)?;
    let with_corrected = correct_biases(q, &attempt)?;
    if force || snr(&attempt, &with_corrected) > snr(best, corrected) + CHOICE_MARGIN_DB {
        *best = attempt;
        *corrected = with_corrected;
        Ok(Some(method))
    } else {
        q.int8.int16_nodes.truncate(before);
        q.ranges = ranges;
        Ok(None)
    }
}
