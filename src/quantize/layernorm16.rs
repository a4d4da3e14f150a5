//! LayerNorm internals with int16 activations. A LayerNorm lowers to nine elementwise and
//! reduction ops (mean, squared difference, variance, reciprocal square root, the centred and
//! normalized values, the affine), and in int8 each of them rounds: the normalized value passes
//! through about eight int8 tensors, and each row's scale (the reciprocal square root of its
//! variance) is one int8 step in 256 of the range over all rows. ONNX Runtime's quantizer, which
//! has no integer LayerNorm, keeps all of it float. Here the ops with a 16x8 kernel run int16
//! (no weights, int16 constants) and the two TFLite has only in int8 and float, SQUARED_DIFFERENCE
//! and RSQRT, run float between a DEQUANTIZE and a QUANTIZE: the values reach int8 once, where a
//! dense layer reads the LayerNorm's output. The variance between those two (its MEAN and the
//! epsilon's ADD) stays float too: one int16 range for every row's variance clips a held-out row
//! whose spread passes the calibration samples' and so scales all of that row's values ("hey
//! jarvis" lost 25 dB on two of 16 held-out inputs so), and it costs small variances their
//! precision; in float it also needs no QUANTIZE and DEQUANTIZE. Kept only where the output
//! measurably improves (pipeline): it makes the file not integer-only, and its LayerNorms a
//! little slower (the conversions around the float ops).

use super::float_islands::between_float_ops;
use super::params::int16_rule;
use super::pipeline::{Attempt, Quantizer, CHOICE_MARGIN_DB};
use super::Ranges;
use crate::ir::{Graph, Op, UnaryOp};
use anyhow::Result;
use std::collections::HashSet;

/// A LayerNorm's ops by how they would run: int16 (a 16x8 kernel) or float (no 16x8 kernel, or
/// between two such ops: `variance`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LayerNormOps {
    pub int16: Vec<String>,
    pub float: Vec<String>,
    /// The ops of `float` with a 16x8 kernel: the variance between the squared difference and
    /// the reciprocal square root.
    pub variance: Vec<String>,
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
    let float: HashSet<String> = ops.float.iter().cloned().collect();
    ops.variance = between_float_ops(g, &float)
        .into_iter()
        .filter(|n| g.layernorm_nodes.contains(n))
        .collect();
    ops.int16.retain(|n| !ops.variance.contains(n));
    ops.float.extend(ops.variance.iter().cloned());
    ops
}

/// How much wider than the calibration samples' the int16 range of a LayerNorm's row scale (the
/// reciprocal square root of each row's variance) is: one value per row scales the whole row,
/// and a held-out row narrower than every calibration row (a quiet input) would have it clipped.
/// Twice the largest scale covers rows with a quarter of the smallest calibrated variance, for
/// one of the range's 15 bits.
const ROW_SCALE_HEADROOM: f32 = 2.0;

/// Widens the int16 ranges of `ops`' row scales (the outputs of its float RSQRTs) by
/// [`ROW_SCALE_HEADROOM`].
pub fn widen_row_scales(g: &Graph, ops: &LayerNormOps, ranges: &mut Ranges) {
    for n in g.nodes.iter().filter(|n| ops.float.contains(&n.name)) {
        if n.op == Op::Unary(UnaryOp::Rsqrt) {
            for t in &n.outputs {
                if let Some(r) = ranges.get_mut(t) {
                    *r = (r.0 * ROW_SCALE_HEADROOM, r.1 * ROW_SCALE_HEADROOM);
                }
            }
        }
    }
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
    let ranges = q.ranges.clone();
    let (before, between_before) = (q.int8.int16_nodes.len(), q.int8.between_float.len());
    // A node asked for int16 without a 16x8 kernel runs float (`FullInt8Options::int16_nodes`).
    q.int8
        .int16_nodes
        .extend(ops.int16.iter().chain(&ops.float).cloned());
    q.int8.between_float.extend(ops.variance.iter().cloned());
    let (attempt, method) = choose_ranges(q)?;
    let with_corrected = correct_biases(q, &attempt)?;
    if force || snr(&attempt, &with_corrected) > snr(best, corrected) + CHOICE_MARGIN_DB {
        *best = attempt;
        *corrected = with_corrected;
        Ok(Some(method))
    } else {
        q.int8.int16_nodes.truncate(before);
        q.int8.between_float.truncate(between_before);
        q.ranges = ranges;
        Ok(None)
    }
}
