//! Error-compensating weight rounding (GPTQ, Frantar et al. 2022, from Optimal Brain
//! Quantization): a layer's weights are rounded to int8 one input position at a time, and each
//! rounding error is spread over the weights not yet rounded, in proportion to how the layer's
//! inputs correlate (`H = Σ x xᵀ` over the calibration inputs). Round-to-nearest minimizes each
//! weight's own error; this minimizes the error of the layer's *output* on the data. The scales
//! stay the per-channel `max|w| / 127` that plain rounding uses, so the file is the same kind of
//! int8 model; the rounded weights and their scales go to the emit stage as fixed parameters.
//!
//! Conv (group 1), depthwise and dense layers are rounded; a layer whose patch is longer than
//! [`MAX_PATCH`] keeps plain rounding (the inverse of `H` costs `K³`).

use super::calibrate::Sample;
use super::equalize::{const_f32, is_depthwise};
use super::inverse_factor::inverse_factor;
use super::observe::KeptInterpreters;
use super::outer_products::add_outer;
use super::wide::{per_isa, Isa};
use crate::ir::{ConstData, Graph, Layout, Op, QuantParams, TensorId};
use anyhow::Result;
use rayon::prelude::*;
use std::collections::HashMap;

/// Longest patch (`KH·KW·C`, or a dense layer's inputs) rounded this way.
const MAX_PATCH: usize = 1200;

/// Patches (output positions or rows) taken per sample and layer, evenly spaced.
const PATCHES_PER_SAMPLE: usize = 1024;

/// How a layer reads its input.
#[derive(Clone, Copy)]
enum Geometry {
    Dense,
    Conv {
        kernel: [usize; 2],
        strides: [usize; 2],
        dilations: [usize; 2],
        pads: [usize; 4],
        /// Depthwise: output channels per input channel (0 for a regular conv).
        multiplier: usize,
    },
}

struct Layer {
    weight: TensorId,
    input: TensorId,
    geometry: Geometry,
    /// Patch length: `KH·KW·C` (conv), `KH·KW` (depthwise, per channel), inputs (dense).
    k: usize,
    /// `H`: one `k × k` block, or one per input channel for depthwise layers.
    h: Vec<f64>,
}

fn layers(g: &Graph) -> Vec<Layer> {
    let uses = g.use_counts();
    let mut out = Vec::new();
    for n in &g.nodes {
        let (Some(&x), Some(&w)) = (n.inputs.first(), n.inputs.get(1)) else {
            continue;
        };
        let Some(wv) = const_f32(g, w) else { continue };
        if uses.get(&w) != Some(&1) || g.tensors[x].data.is_some() {
            continue;
        }
        let xs = g.shape(x);
        let ws = wv.shape();
        let (geometry, k, blocks) = match &n.op {
            Op::Conv2d {
                layout: Layout::Nhwc,
                group,
                strides,
                dilations,
                pads,
                ..
            } if xs.len() == 4 && ws.len() == 4 => {
                let kernel = [ws[1], ws[2]];
                if is_depthwise(g, n) && ws[0] == 1 {
                    let c = xs[3];
                    let geometry = Geometry::Conv {
                        kernel,
                        strides: *strides,
                        dilations: *dilations,
                        pads: *pads,
                        multiplier: ws[3] / c.max(1),
                    };
                    (geometry, ws[1] * ws[2], c)
                } else if *group == 1 && ws[3] == xs[3] {
                    let geometry = Geometry::Conv {
                        kernel,
                        strides: *strides,
                        dilations: *dilations,
                        pads: *pads,
                        multiplier: 0,
                    };
                    (geometry, ws[1] * ws[2] * ws[3], 1)
                } else {
                    continue;
                }
            }
            Op::FullyConnected { .. } if ws.len() == 2 && xs.last() == Some(&ws[1]) => {
                (Geometry::Dense, ws[1], 1)
            }
            _ => continue,
        };
        if k == 0 || k > MAX_PATCH {
            continue;
        }
        out.push(Layer {
            weight: w,
            input: x,
            geometry,
            k,
            h: vec![0.0; blocks * k * k],
        });
    }
    out
}

/// Accumulates the layer's `H` from one input value `x` (NHWC or `[.., K]`).
fn observe(layer: &mut Layer, shape: &[usize], x: &[f32]) {
    let k = layer.k;
    match layer.geometry {
        Geometry::Dense => {
            let rows = x.len() / k;
            let step = rows.div_ceil(PATCHES_PER_SAMPLE).max(1);
            let patches: Vec<f32> = (0..rows)
                .step_by(step)
                .flat_map(|r| x[r * k..(r + 1) * k].iter().copied())
                .collect();
            add_outer(&mut layer.h, &patches, k);
        }
        Geometry::Conv {
            kernel: [kh, kw],
            strides: [sh, sw],
            dilations: [dh, dw],
            pads: [pt, pl, pb, pr],
            multiplier,
        } => {
            let [_, ih, iw, c] = [shape[0], shape[1], shape[2], shape[3]];
            let span = |i: usize, p: usize, q: usize, kk: usize, d: usize, s: usize| {
                (i + p + q).checked_sub(d * (kk - 1) + 1).map(|v| v / s + 1)
            };
            let (Some(oh), Some(ow)) = (span(ih, pt, pb, kh, dh, sh), span(iw, pl, pr, kw, dw, sw))
            else {
                return;
            };
            let positions = oh * ow;
            let step = positions.div_ceil(PATCHES_PER_SAMPLE).max(1);
            let depthwise = multiplier > 0;
            let mut patch = vec![0f32; if depthwise { kh * kw * c } else { k }];
            // Per depthwise channel, or for the whole layer: the patches of this sample.
            let mut batches: Vec<Vec<f32>> = vec![Vec::new(); if depthwise { c } else { 1 }];
            for pos in (0..positions).step_by(step) {
                let (oy, ox) = (pos / ow, pos % ow);
                patch.iter_mut().for_each(|v| *v = 0.0);
                for ky in 0..kh {
                    let y = (oy * sh + ky * dh) as isize - pt as isize;
                    if y < 0 || y >= ih as isize {
                        continue;
                    }
                    for kx in 0..kw {
                        let xx = (ox * sw + kx * dw) as isize - pl as isize;
                        if xx < 0 || xx >= iw as isize {
                            continue;
                        }
                        let src = (y as usize * iw + xx as usize) * c;
                        let dst = (ky * kw + kx) * c;
                        patch[dst..dst + c].copy_from_slice(&x[src..src + c]);
                    }
                }
                if depthwise {
                    // Per channel: the k = KH·KW taps of that channel.
                    for (ch, batch) in batches.iter_mut().enumerate() {
                        batch.extend((0..k).map(|t| patch[t * c + ch]));
                    }
                } else {
                    batches[0].extend_from_slice(&patch);
                }
            }
            if depthwise {
                layer
                    .h
                    .par_chunks_mut(k * k)
                    .zip(&batches)
                    .for_each(|(h, batch)| add_outer(h, batch, k));
            } else {
                add_outer(&mut layer.h, &batches[0], k);
            }
        }
    }
}

fn round_row(w: &mut [f32], scale: f32, u: &[f64]) {
    round_row_with(Isa::detect(), w, scale, u)
}

per_isa! {
    /// Rounds `w` (one row: an output channel's `k` weights) to multiples of `scale` within ±127,
    /// each rounding error compensated in the later weights through `u`.
    fn round_row_with(w: &mut [f32], scale: f32, u: &[f64]) {
        let k = w.len();
        let mut v: Vec<f64> = w.iter().map(|&x| f64::from(x)).collect();
        for j in 0..k {
            let q = (v[j] / f64::from(scale)).round().clamp(-127.0, 127.0);
            let e = (v[j] - q * f64::from(scale)) / u[j * k + j];
            for (x, &y) in v[j + 1..].iter_mut().zip(&u[j * k + j + 1..(j + 1) * k]) {
                *x -= e * y;
            }
            w[j] = q as f32 * scale;
        }
    }
}

/// Rows of a layer rounded together: each row of `U` is read once for all of them (for a
/// 1152-input layer `U` is 5 MB, past the caches).
const ROWS_AT_ONCE: usize = 4;

per_isa! {
    /// [`round_row_with`] for each row of `rows` (at most `ROWS_AT_ONCE` rows of `u`'s size, with
    /// their `scales`), side by side: each row takes the same operations in the same order.
    fn round_rows_with(rows: &mut [f32], scales: &[f32], u: &[f64]) {
        let n = scales.len();
        let k = rows.len() / n.max(1);
        let mut v = [const { Vec::<f64>::new() }; ROWS_AT_ONCE];
        for (v, row) in v.iter_mut().zip(rows.chunks_exact(k)) {
            v.extend(row.iter().map(|&x| f64::from(x)));
        }
        for j in 0..k {
            let ujj = u[j * k + j];
            let later = &u[j * k + j + 1..(j + 1) * k];
            for ((v, row), &scale) in v.iter_mut().zip(rows.chunks_exact_mut(k)).zip(scales) {
                let q = (v[j] / f64::from(scale)).round().clamp(-127.0, 127.0);
                let e = (v[j] - q * f64::from(scale)) / ujj;
                for (x, &y) in v[j + 1..].iter_mut().zip(later) {
                    *x -= e * y;
                }
                row[j] = q as f32 * scale;
            }
        }
    }
}

/// Rounds the weights of every eligible layer of `g` (whose float file `float` runs) with
/// `H` gathered on `samples`. Returns the rounded tensors' int8 parameters (per output channel),
/// which the emit stage must use as they are.
pub fn round_weights(
    g: &mut Graph,
    float: &KeptInterpreters<'_>,
    samples: &[Sample],
) -> Result<HashMap<TensorId, QuantParams>> {
    let mut list = layers(g);
    if list.is_empty() {
        return Ok(HashMap::new());
    }
    let names: Vec<&str> = float.model().tensors().iter().map(|t| t.name).collect();
    let mut by_input: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, l) in list.iter().enumerate() {
        by_input
            .entry(g.tensors[l.input].name.as_str())
            .or_default()
            .push(i);
    }
    let mut seen = vec![false; list.len()];
    let shapes: Vec<Vec<usize>> = list.iter().map(|l| g.shape(l.input).to_vec()).collect();
    let observed = |t: usize| names.get(t).is_some_and(|n| by_input.contains_key(n));
    super::observe::observe_kept_where(float, samples, &observed, |_, t, v| {
        let Some(readers) = names.get(t).and_then(|n| by_input.get(n)) else {
            return;
        };
        for &i in readers {
            if v.len() == shapes[i].iter().product::<usize>() {
                observe(&mut list[i], &shapes[i], v);
                seen[i] = true;
            }
        }
    })?;
    // Layers are independent: rounded in parallel, written back in order.
    let graph: &Graph = g;
    let rounded: Vec<Option<Rounded>> = list
        .par_iter()
        .zip(seen)
        .map(|(l, seen)| seen.then(|| round_layer(graph, l)).flatten())
        .collect();
    let mut params = HashMap::new();
    for (weight, shape, v, p) in rounded.into_iter().flatten() {
        g.tensors[weight].data = Some(ConstData::from_f32(&shape, v).into());
        params.insert(weight, p);
    }
    Ok(params)
}

/// A layer's rounded weights: (weight tensor, shape, values, int8 parameters).
type Rounded = (TensorId, Vec<usize>, Vec<f32>, QuantParams);

/// Layer `l`'s weights rounded with its `H`: (weight tensor, shape, values, int8 parameters);
/// `None` for a conv or dense layer whose `H` is degenerate (it keeps plain rounding).
fn round_layer(g: &Graph, l: &Layer) -> Option<Rounded> {
    let w = const_f32(g, l.weight).expect("checked").clone();
    let shape = w.shape().to_vec();
    let mut v: Vec<f32> = w.iter().copied().collect();
    let k = l.k;
    let (scales, axis) = match l.geometry {
        Geometry::Conv { multiplier, .. } if multiplier > 0 => {
            // [1, KH, KW, C·M]: output channel oc reads input channel oc / M.
            let oc_n = shape[3];
            let mut scales = Vec::with_capacity(oc_n);
            let factors: Vec<Option<Vec<f64>>> = (0..oc_n / multiplier)
                .map(|c| inverse_factor(&l.h[c * k * k..(c + 1) * k * k], k))
                .collect();
            for oc in 0..oc_n {
                let mut row: Vec<f32> = (0..k).map(|t| v[t * oc_n + oc]).collect();
                let scale =
                    super::weights::symmetric_scale(row.iter().fold(0f32, |m, x| m.max(x.abs())));
                scales.push(scale);
                let Some(u) = &factors[oc / multiplier] else {
                    continue;
                };
                round_row(&mut row, scale, u);
                for (t, x) in row.into_iter().enumerate() {
                    v[t * oc_n + oc] = x;
                }
            }
            (scales, 3)
        }
        _ => {
            let u = inverse_factor(&l.h, k)?;
            let scales: Vec<f32> = v
                .chunks_exact(k)
                .map(|row| {
                    super::weights::symmetric_scale(row.iter().fold(0f32, |m, x| m.max(x.abs())))
                })
                .collect();
            // Rows are independent: rounded in parallel, `ROWS_AT_ONCE` at a time.
            let isa = Isa::detect();
            v.par_chunks_mut(k * ROWS_AT_ONCE)
                .zip(scales.par_chunks(ROWS_AT_ONCE))
                .for_each(|(rows, scales)| round_rows_with(isa, rows, scales, &u));
            (scales, 0)
        }
    };
    // Channels left unrounded (a degenerate H) get plain rounding with the same scale.
    let n = scales.len();
    let p = QuantParams {
        scale: scales,
        zero_point: vec![0; n],
        axis,
    };
    let inner: usize = shape[axis + 1..].iter().product();
    for (i, x) in v.iter_mut().enumerate() {
        let s = p.scale[(i / inner.max(1)) % n];
        *x = (*x / s).round().clamp(-127.0, 127.0) * s;
    }
    Some((l.weight, shape, v, p))
}

#[cfg(test)]
mod tests {
    use super::super::inverse_factor::{inverse_factor_with, FACTOR_BAND, PARALLEL_FACTOR_K};
    use super::*;

    /// Two inputs that carry nearly the same value: both weights rounded down to nearest lose
    /// 0.8 of it; compensated, the second rounds up and the output loses 0.2.
    #[test]
    fn compensated_rounding_beats_nearest_on_correlated_inputs() {
        let k = 2;
        let xs: Vec<[f32; 2]> = (0..200)
            .map(|i| {
                let a = ((i * 37 % 101) as f32 / 50.0) - 1.0;
                let b = ((i * 53 % 97) as f32 / 48.0) - 1.0;
                [a, a + 0.01 * b]
            })
            .collect();
        let mut h = vec![0f64; k * k];
        for x in &xs {
            add_outer(&mut h, x, x.len());
        }
        let w = [2.4f32, 2.4];
        let scale = 1.0;
        let u = inverse_factor(&h, k).unwrap();
        let mut gptq = w;
        round_row(&mut gptq, scale, &u);
        let nearest: Vec<f32> = w.iter().map(|x| (x / scale).round() * scale).collect();
        let err = |q: &[f32]| -> f64 {
            xs.iter()
                .map(|x| {
                    let d: f32 = (0..k).map(|i| (w[i] - q[i]) * x[i]).sum();
                    f64::from(d * d)
                })
                .sum()
        };
        assert_eq!(nearest, [2.0, 2.0]);
        assert_eq!(gptq, [2.0, 3.0]);
        assert!(
            err(&gptq) < err(&nearest) / 4.0,
            "{} vs {}",
            err(&gptq),
            err(&nearest)
        );
    }

    /// The inverse factor and the rounding it drives come out the same bit for bit with the
    /// loops built for every vector width the CPU has.
    #[test]
    fn inverse_factor_and_rounding_do_not_depend_on_the_vector_width() {
        let k = PARALLEL_FACTOR_K + FACTOR_BAND + 5;
        let patches: Vec<f32> = (0..40 * k)
            .map(|i| (((i * 7919 + 3) % 1013) as f32 / 1013.0 - 0.4).max(0.0))
            .collect();
        let mut h = vec![0f64; k * k];
        add_outer(&mut h, &patches, k);
        let w: Vec<f32> = (0..k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let mut results = vec![];
        for isa in Isa::all_available() {
            let u = inverse_factor_with(isa, &h, k).expect("positive definite");
            let mut row = w.clone();
            round_row_with(isa, &mut row, 0.3, &u);
            results.push((isa, u, row));
        }
        // Rows rounded together are each the row rounded alone.
        for isa in Isa::all_available() {
            let u = inverse_factor_with(isa, &h, k).expect("positive definite");
            let rows: Vec<f32> = (0..3 * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let scales = [0.3f32, 0.25, 0.5];
            let mut together = rows.clone();
            round_rows_with(isa, &mut together, &scales, &u);
            for (r, &scale) in scales.iter().enumerate() {
                let mut alone = rows[r * k..(r + 1) * k].to_vec();
                round_row_with(isa, &mut alone, scale, &u);
                assert!(
                    alone
                        .iter()
                        .zip(&together[r * k..(r + 1) * k])
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{isa:?} row {r}"
                );
            }
        }
        let (_, u0, row0) = &results[0];
        // The rounding moved weights off their nearest multiples (the test can fail).
        assert!(row0
            .iter()
            .zip(&w)
            .any(|(r, x)| *r != (x / 0.3).round() * 0.3));
        for (isa, u, row) in &results[1..] {
            assert!(
                u.iter().zip(u0).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{isa:?}"
            );
            assert!(
                row.iter()
                    .zip(row0)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{isa:?}"
            );
        }
    }
}
