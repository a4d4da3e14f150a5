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

/// Dampening added to `H`'s diagonal, as a fraction of its mean (GPTQ's default).
const DAMP: f64 = 0.05;

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

/// From this size on, a factorization's rows are computed in parallel.
const PARALLEL_FACTOR_K: usize = 128;

/// Columns of a factorization done together: the rows below read their pivot rows from cache
/// instead of streaming the whole matrix once per column.
const FACTOR_BAND: usize = 16;

/// Lower Cholesky factor of the symmetric positive definite `a` (`k × k`), in place; `false`
/// if it is not positive definite. Each element is `(a[i][j] − Σ_{p<j} a[i][p]·a[j][p]) / a[j][j]`
/// with the terms subtracted in the order of `p`; the columns are done a band at a time (first
/// the band's own rows, then every row below, in parallel), which changes no value.
fn cholesky(isa: Isa, a: &mut [f64], k: usize) -> bool {
    for j0 in (0..k).step_by(FACTOR_BAND) {
        let j1 = (j0 + FACTOR_BAND).min(k);
        // The band's diagonal block, column by column.
        for j in j0..j1 {
            let mut d = a[j * k + j];
            for p in 0..j {
                d -= a[j * k + p] * a[j * k + p];
            }
            if d <= 0.0 || !d.is_finite() {
                return false;
            }
            let d = d.sqrt();
            a[j * k + j] = d;
            for i in j + 1..j1 {
                let mut s = a[i * k + j];
                for p in 0..j {
                    s -= a[i * k + p] * a[j * k + p];
                }
                a[i * k + j] = s / d;
            }
        }
        // Every row below the band: its band columns, each from the row's earlier columns and
        // the pivot row's (independent of the other rows).
        let (head, below) = a.split_at_mut(j1 * k);
        let pivots = &head[j0 * k..];
        let band = j1 - j0;
        // The pivot rows' columns before the band, transposed: column `p` of every pivot row
        // side by side (zero past the band), so each row below reads them contiguously.
        let mut across = vec![[0f64; FACTOR_BAND]; j0];
        for (p, col) in across.iter_mut().enumerate() {
            for (c, v) in col[..band].iter_mut().enumerate() {
                *v = pivots[c * k + p];
            }
        }
        let columns = |rows: &mut [f64]| band_columns(isa, rows, j0, j1, pivots, &across, k);
        if k >= PARALLEL_FACTOR_K {
            below.par_chunks_mut(k * ROWS_TOGETHER).for_each(columns);
        } else {
            below.chunks_mut(k * ROWS_TOGETHER).for_each(columns);
        }
        for j in j0..j1 {
            for p in j + 1..k {
                a[j * k + p] = 0.0;
            }
        }
    }
    true
}

/// Rows below a band whose columns are computed together (independent chains of subtractions
/// side by side).
const ROWS_TOGETHER: usize = 4;

per_isa! {
    /// Columns `j0..j1` of `rows` (whole rows below the band of pivot rows `pivots`, whose
    /// columns before the band are `across`, transposed): the terms of the columns before the
    /// band for every band column at once (one chain of subtractions per column, each in the
    /// order of `p`, side by side, for `ROWS_TOGETHER` rows at a time), then the band's own
    /// earlier columns of each row, in order.
    fn band_columns(
        rows: &mut [f64],
        j0: usize,
        j1: usize,
        pivots: &[f64],
        across: &[[f64; FACTOR_BAND]],
        k: usize,
    ) {
        let band = j1 - j0;
        let mut together = rows.chunks_exact_mut(ROWS_TOGETHER * k);
        for rows in &mut together {
            let mut s = [[0f64; FACTOR_BAND]; ROWS_TOGETHER];
            for (r, s) in s.iter_mut().enumerate() {
                s[..band].copy_from_slice(&rows[r * k + j0..r * k + j1]);
            }
            for (p, col) in across.iter().enumerate() {
                for (r, s) in s.iter_mut().enumerate() {
                    let x = rows[r * k + p];
                    for (s, &y) in s.iter_mut().zip(col) {
                        *s -= x * y;
                    }
                }
            }
            for (row, s) in rows.chunks_exact_mut(k).zip(&s) {
                own_columns(row, s, j0, j1, pivots, k);
            }
        }
        for row in together.into_remainder().chunks_exact_mut(k) {
            let mut s = [0f64; FACTOR_BAND];
            s[..band].copy_from_slice(&row[j0..j1]);
            for (&x, col) in row[..j0].iter().zip(across) {
                for (s, &y) in s.iter_mut().zip(col) {
                    *s -= x * y;
                }
            }
            own_columns(row, &s, j0, j1, pivots, k);
        }
    }
}

/// The band's columns `j0..j1` of `row` from `s` (each column's value less the terms of the
/// columns before the band): less the band's own earlier columns, in order, over the pivot.
#[inline(always)]
fn own_columns(
    row: &mut [f64],
    s: &[f64; FACTOR_BAND],
    j0: usize,
    j1: usize,
    pivots: &[f64],
    k: usize,
) {
    for (c, j) in (j0..j1).enumerate() {
        let pivot = &pivots[c * k..c * k + j];
        let mut s = s[c];
        for (x, y) in row[j0..j].iter().zip(&pivot[j0..]) {
            s -= x * y;
        }
        row[j] = s / pivots[c * k + j];
    }
}

/// The upper factor `U` of `H⁻¹ = Uᵀ U` that GPTQ's updates read, from the accumulated `H`
/// (upper triangle filled); `None` if `H` is degenerate.
fn inverse_factor(h: &[f64], k: usize) -> Option<Vec<f64>> {
    inverse_factor_with(Isa::detect(), h, k)
}

/// [`inverse_factor`] with the loops built for `isa`. With `J` the order-reversing permutation,
/// the lower Cholesky factor `M` of `J H J` gives `H = R Rᵀ` with `R = J M J` upper triangular,
/// so `H⁻¹ = R⁻ᵀ R⁻¹` and `U = R⁻¹ = J M⁻¹ J`: one factorization and one triangular inverse
/// (`k³/3` multiply-adds), where factoring `H`, inverting it as `L⁻ᵀ L⁻¹` and factoring that
/// again took twice as many. `U` is the same matrix (the factor with a positive diagonal is
/// unique), up to rounding.
fn inverse_factor_with(isa: Isa, h: &[f64], k: usize) -> Option<Vec<f64>> {
    // `J H J`, both triangles: element (i, j) is H's (k-1-i, k-1-j), read from its upper triangle.
    let mut a = vec![0f64; k * k];
    for i in 0..k {
        for j in 0..=i {
            let (r, c) = (k - 1 - i, k - 1 - j);
            let v = h[r * k + c];
            a[i * k + j] = v;
            a[j * k + i] = v;
        }
    }
    let mean = (0..k).map(|i| a[i * k + i]).sum::<f64>() / k as f64;
    if mean <= 0.0 || !mean.is_finite() {
        return None;
    }
    for i in 0..k {
        // An input that is always zero: any rounding of its weights is as good.
        if a[i * k + i] == 0.0 {
            a[i * k + i] = 1.0;
        }
        a[i * k + i] += DAMP * mean;
    }
    if !cholesky(isa, &mut a, k) {
        return None;
    }
    let inv = lower_inverse(isa, &a, k);
    // U = J M⁻¹ J: upper triangular.
    let mut u = vec![0f64; k * k];
    for i in 0..k {
        for j in i..k {
            u[i * k + j] = inv[(k - 1 - i) * k + (k - 1 - j)];
        }
    }
    Some(u)
}

per_isa! {
    /// `L⁻¹` of the lower factor `a` (`k × k`) by forward substitution, a row at a time: row `i`
    /// is `(eᵢ − Σ_{p<i} L[i][p]·row p) / L[i][i]`, each element's terms subtracted in the order
    /// of `p`; a band of rows at a time, so each earlier row is read once per band.
    fn lower_inverse(a: &[f64], k: usize) -> Vec<f64> {
        let mut inv = vec![0f64; k * k];
        for i0 in (0..k).step_by(FACTOR_BAND) {
            let i1 = (i0 + FACTOR_BAND).min(k);
            let (done, band) = inv.split_at_mut(i0 * k);
            let band = &mut band[..(i1 - i0) * k];
            for (i, row) in (i0..i1).zip(band.chunks_mut(k)) {
                row[i] = 1.0;
            }
            // Four earlier rows at a time: each element takes the terms of those of the four
            // that reach it one after the other, held in a register.
            let mut p = 0;
            while p + 4 <= i0 {
                let e: [&[f64]; 4] =
                    std::array::from_fn(|q| &done[(p + q) * k..(p + q) * k + p + q + 1]);
                for (i, row) in (i0..i1).zip(band.chunks_mut(k)) {
                    let l: [f64; 4] = std::array::from_fn(|q| a[i * k + p + q]);
                    let (e0, e1, e2, e3) = (&e[0][..=p], &e[1][..=p], &e[2][..=p], &e[3][..=p]);
                    for (j, r) in row[..=p].iter_mut().enumerate() {
                        *r = *r - l[0] * e0[j] - l[1] * e1[j] - l[2] * e2[j] - l[3] * e3[j];
                    }
                    // Columns past `p` that only the later of the four reach, in their order.
                    for q in 1..4 {
                        for (r, &x) in row[p + 1..=p + q].iter_mut().zip(&e[q][p + 1..]) {
                            *r -= l[q] * x;
                        }
                    }
                }
                p += 4;
            }
            for p in p..i0 {
                let earlier = &done[p * k..p * k + p + 1];
                for (i, row) in (i0..i1).zip(band.chunks_mut(k)) {
                    let l = a[i * k + p];
                    for (r, &x) in row[..=p].iter_mut().zip(earlier) {
                        *r -= l * x;
                    }
                }
            }
            for i in i0..i1 {
                let (before, rest) = band.split_at_mut((i - i0) * k);
                let row = &mut rest[..k];
                for p in i0..i {
                    let l = a[i * k + p];
                    let earlier = &before[(p - i0) * k..(p - i0) * k + p + 1];
                    for (r, &x) in row[..=p].iter_mut().zip(earlier) {
                        *r -= l * x;
                    }
                }
                let d = a[i * k + i];
                for r in &mut row[..=i] {
                    *r /= d;
                }
            }
        }
        inv
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

/// Rounds the weights of every eligible layer of `g` (whose float file is `float_bytes`) with
/// `H` gathered on `samples`. Returns the rounded tensors' int8 parameters (per output channel),
/// which the emit stage must use as they are.
pub fn round_weights(
    g: &mut Graph,
    float_bytes: &[u8],
    samples: &[Sample],
) -> Result<HashMap<TensorId, QuantParams>> {
    let mut list = layers(g);
    if list.is_empty() {
        return Ok(HashMap::new());
    }
    let names = super::report::tensor_names(float_bytes)?;
    let mut by_input: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, l) in list.iter().enumerate() {
        by_input
            .entry(g.tensors[l.input].name.as_str())
            .or_default()
            .push(i);
    }
    let mut seen = vec![false; list.len()];
    let shapes: Vec<Vec<usize>> = list.iter().map(|l| g.shape(l.input).to_vec()).collect();
    let observed = |t: usize| {
        names
            .get(t)
            .is_some_and(|n| by_input.contains_key(n.as_str()))
    };
    super::observe::observe_where(float_bytes, samples, &observed, |_, t, v| {
        let Some(readers) = names.get(t).and_then(|n| by_input.get(n.as_str())) else {
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
        g.tensors[weight].data = Some(ConstData::from_f32(&shape, v));
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

    #[test]
    fn cholesky_inverse_factor_matches_the_inverse() {
        // H = [[4, 2], [2, 3]] (upper triangle given): H⁻¹ = [[3, -2], [-2, 4]] / 8.
        let h = [4.0, 2.0, 0.0, 3.0];
        let u = inverse_factor(&h, 2).unwrap();
        // Damping adds DAMP times the mean diagonal (3.5).
        let damp = DAMP * 3.5;
        let (a, b, d) = (4.0 + damp, 2.0, 3.0 + damp);
        let det = a * d - b * b;
        let inv = [d / det, -b / det, -b / det, a / det];
        // Uᵀ U = H⁻¹
        let utu = |i: usize, j: usize| (0..2).map(|p| u[p * 2 + i] * u[p * 2 + j]).sum::<f64>();
        for (i, j) in [(0, 0), (0, 1), (1, 1)] {
            assert!((utu(i, j) - inv[i * 2 + j]).abs() < 1e-9, "{i}{j}");
        }
    }

    /// Past several bands and the size where rows go parallel, `U` is upper triangular and
    /// `Uᵀ U` is the inverse of the damped `H`: `Uᵀ U (H + damping) = I` to rounding.
    #[test]
    fn inverse_factor_inverts_the_damped_matrix() {
        let k = PARALLEL_FACTOR_K + 2 * FACTOR_BAND + 5;
        let patches: Vec<f32> = (0..3 * k)
            .map(|i| (((i * 7919 + 3) % 1013) as f32 / 1013.0 - 0.4).max(0.0))
            .collect();
        let mut h = vec![0f64; k * k];
        add_outer(&mut h, &patches, k);
        let mut full = h.clone();
        for i in 0..k {
            for j in 0..i {
                full[i * k + j] = full[j * k + i];
            }
        }
        let mean = (0..k).map(|i| full[i * k + i]).sum::<f64>() / k as f64;
        for i in 0..k {
            if full[i * k + i] == 0.0 {
                full[i * k + i] = 1.0;
            }
            full[i * k + i] += DAMP * mean;
        }
        let u = inverse_factor(&h, k).expect("positive definite");
        for i in 0..k {
            assert!(u[i * k + i] > 0.0);
            assert!(u[i * k..i * k + i].iter().all(|&x| x == 0.0), "row {i}");
        }
        // H⁻¹ = Uᵀ U, then H⁻¹ H.
        let mut hinv = vec![0f64; k * k];
        for p in 0..k {
            for i in p..k {
                for j in p..k {
                    hinv[i * k + j] += u[p * k + i] * u[p * k + j];
                }
            }
        }
        for i in 0..k {
            for j in 0..k {
                let x: f64 = (0..k).map(|p| hinv[i * k + p] * full[p * k + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((x - want).abs() < 1e-9, "({i}, {j}): {x}");
            }
        }
    }

    /// The banded, parallel factorization gives every element exactly as the formula does (each
    /// element's terms subtracted in the order of `p`), past several bands and the size where
    /// rows go parallel.
    #[test]
    fn banded_cholesky_is_the_formula_bit_for_bit() {
        let k = PARALLEL_FACTOR_K + 2 * FACTOR_BAND + 3;
        // A symmetric positive definite matrix: diagonally dominant, irregular entries.
        let mut a = vec![0f64; k * k];
        for i in 0..k {
            for j in 0..=i {
                let v = (((i * 7919 + j * 104729) % 1000) as f64 / 1000.0 - 0.5) / 3.0;
                a[i * k + j] = v;
                a[j * k + i] = v;
            }
            a[i * k + i] = k as f64 / 2.0 + (i % 5) as f64;
        }
        let mut expected = a.clone();
        for j in 0..k {
            let mut d = expected[j * k + j];
            for p in 0..j {
                d -= expected[j * k + p] * expected[j * k + p];
            }
            let d = d.sqrt();
            expected[j * k + j] = d;
            for i in j + 1..k {
                let mut s = expected[i * k + j];
                for p in 0..j {
                    s -= expected[i * k + p] * expected[j * k + p];
                }
                expected[i * k + j] = s / d;
            }
            for p in j + 1..k {
                expected[j * k + p] = 0.0;
            }
        }
        for isa in Isa::all_available() {
            let mut a = a.clone();
            assert!(cholesky(isa, &mut a, k));
            for (n, (x, y)) in a.iter().zip(&expected).enumerate() {
                assert_eq!(
                    x.to_bits(),
                    y.to_bits(),
                    "{isa:?} row {} column {}",
                    n / k,
                    n % k
                );
            }
        }
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
