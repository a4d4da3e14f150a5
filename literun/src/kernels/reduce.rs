//! MEAN / SUM / REDUCE_MAX / REDUCE_MIN / REDUCE_PROD (float32; MEAN, SUM, REDUCE_MAX and
//! REDUCE_MIN also int8), matching TFLite's reference `ReduceGeneric` / `Mean`.
//!
//! The input is walked in row-major order and each element folded into its output slot, so every
//! output accumulates its reduced elements in row-major order, as TFLite does. Initial values
//! are TFLite's: 0 (sum/mean), 1 (prod), `f32::MIN` (max, i.e. `lowest()`), `f32::MAX` (min);
//! the max/min reducers are `in > cur ? in : cur` / `in < cur ? in : cur` (NaN inputs are
//! skipped). Mean divides the sum by the number of reduced elements.

/// Which reduction to perform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Mean,
    Sum,
    Max,
    Min,
    Prod,
}

/// Ranks up to this use a stack odometer; higher ranks fall back to per-element division.
const MAX_FAST_RANK: usize = 16;

/// Reduces `input` (of `shape`) over `axes` (sorted, deduplicated, each `< shape.len()`) into
/// `output`, which has as many elements as the shape with the reduced dims set to 1.
pub fn reduce_f32(
    input: &[f32],
    shape: &[usize],
    axes: &[usize],
    kind: ReduceKind,
    output: &mut [f32],
) {
    let rank = shape.len();
    debug_assert!(axes.windows(2).all(|w| w[0] < w[1]));
    debug_assert!(axes.iter().all(|&a| a < rank));
    debug_assert_eq!(input.len(), shape.iter().product::<usize>());
    let is_reduced = |d: usize| axes.contains(&d);
    let reduced_count: usize = (0..rank)
        .filter(|&d| is_reduced(d))
        .map(|d| shape[d])
        .product();
    let out_count: usize = (0..rank)
        .filter(|&d| !is_reduced(d))
        .map(|d| shape[d])
        .product();
    debug_assert_eq!(output.len(), out_count);
    if output.is_empty() {
        return;
    }

    let init = match kind {
        ReduceKind::Mean | ReduceKind::Sum => 0.0,
        ReduceKind::Prod => 1.0,
        ReduceKind::Max => f32::MIN,
        ReduceKind::Min => f32::MAX,
    };
    output.fill(init);
    let fold = |cur: f32, x: f32| -> f32 {
        match kind {
            ReduceKind::Mean | ReduceKind::Sum => x + cur,
            ReduceKind::Prod => x * cur,
            ReduceKind::Max => {
                if x > cur {
                    x
                } else {
                    cur
                }
            }
            ReduceKind::Min => {
                if x < cur {
                    x
                } else {
                    cur
                }
            }
        }
    };

    if !input.is_empty() {
        if rank <= MAX_FAST_RANK {
            fold_fast(input, shape, axes, output, fold);
        } else {
            fold_slow(input, shape, axes, output, fold);
        }
    }

    if kind == ReduceKind::Mean {
        let n = reduced_count as f32;
        for v in output.iter_mut() {
            *v /= n;
        }
    }
}

/// Output stride of dim `d` in the kept-dims layout (0 for reduced dims), via `f(d, stride)`.
fn out_strides(shape: &[usize], axes: &[usize], mut f: impl FnMut(usize, usize)) {
    let mut s = 1usize;
    for d in (0..shape.len()).rev() {
        if axes.contains(&d) {
            f(d, 0);
        } else {
            f(d, s);
            s *= shape[d];
        }
    }
}

/// One step of the odometer over the leading dimensions `coord` (row-major, the last fastest),
/// keeping `base`, the output offset, in step with `stride`.
#[inline]
fn next_outer(coord: &mut [usize], stride: &[usize], shape: &[usize], base: &mut usize) {
    for d in (0..coord.len()).rev() {
        coord[d] += 1;
        *base += stride[d];
        if coord[d] < shape[d] {
            return;
        }
        *base -= stride[d] * shape[d];
        coord[d] = 0;
    }
}

fn fold_fast<T: Copy>(
    input: &[T],
    shape: &[usize],
    axes: &[usize],
    output: &mut [T],
    fold: impl Fn(T, T) -> T,
) {
    let rank = shape.len();
    if rank == 0 {
        output[0] = fold(output[0], input[0]);
        return;
    }
    let mut stride = [0usize; MAX_FAST_RANK];
    out_strides(shape, axes, |d, s| stride[d] = s);
    let inner = shape[rank - 1];
    let inner_stride = stride[rank - 1];
    // Odometer over the outer dims [0, rank-1).
    let mut coord = [0usize; MAX_FAST_RANK];
    let mut base = 0usize;
    for row in input.chunks_exact(inner) {
        if inner_stride == 0 {
            let mut acc = output[base];
            for &x in row {
                acc = fold(acc, x);
            }
            output[base] = acc;
        } else {
            for (o, &x) in output[base..base + inner].iter_mut().zip(row) {
                *o = fold(*o, x);
            }
        }
        next_outer(&mut coord[..rank - 1], &stride, shape, &mut base);
    }
}

fn fold_slow<T: Copy>(
    input: &[T],
    shape: &[usize],
    axes: &[usize],
    output: &mut [T],
    fold: impl Fn(T, T) -> T,
) {
    for (i, &x) in input.iter().enumerate() {
        let mut rem = i;
        let mut o = 0usize;
        out_strides(shape, axes, |d, s| {
            o += (rem % shape[d]) * s;
            rem /= shape[d];
        });
        output[o] = fold(output[o], x);
    }
}

/// Int8 REDUCE_MAX / REDUCE_MIN: the largest / smallest stored value (TFLite compares stored
/// values, so the input and output share their quantization). Shapes as [`reduce_f32`]; the
/// reduced axes must not be empty.
pub fn reduce_max_min_i8(
    input: &[i8],
    shape: &[usize],
    axes: &[usize],
    max: bool,
    output: &mut [i8],
) {
    if output.is_empty() || input.len() != shape.iter().product::<usize>() {
        return;
    }
    output.fill(if max { i8::MIN } else { i8::MAX });
    if input.is_empty() {
        return;
    }
    let fold = |cur: i8, x: i8| if max { cur.max(x) } else { cur.min(x) };
    if shape.len() <= MAX_FAST_RANK {
        fold_fast(input, shape, axes, output, fold);
    } else {
        fold_slow(input, shape, axes, output, fold);
    }
}

/// Int32 SUM, REDUCE_PROD, REDUCE_MAX and REDUCE_MIN (TensorFlow's converter writes them for
/// shape arithmetic, e.g. the element count of a dynamic shape), wrapping as TFLite's int32
/// kernels; an empty reduction gives the fold's identity.
pub fn reduce_i32(
    input: &[i32],
    shape: &[usize],
    axes: &[usize],
    kind: ReduceKind,
    output: &mut [i32],
) {
    if input.len() != shape.iter().product::<usize>() {
        return;
    }
    let (identity, fold): (i32, fn(i32, i32) -> i32) = match kind {
        ReduceKind::Sum | ReduceKind::Mean => (0, i32::wrapping_add),
        ReduceKind::Prod => (1, i32::wrapping_mul),
        ReduceKind::Max => (i32::MIN, i32::max),
        ReduceKind::Min => (i32::MAX, i32::min),
    };
    output.fill(identity);
    if input.is_empty() {
        return;
    }
    if shape.len() <= MAX_FAST_RANK {
        fold_fast(input, shape, axes, output, fold);
    } else {
        fold_slow(input, shape, axes, output, fold);
    }
}

/// Sums int8 or int16 `input` (of `shape`) over `axes` into `sums` (one per output element,
/// in the kept-dims order), in row-major order like TFLite's `ReduceSumImpl` (int32, wrapping).
pub fn sum_quantized<T: super::Quantized>(
    input: &[T],
    shape: &[usize],
    axes: &[usize],
    sums: &mut [i32],
) {
    sums.fill(0);
    let rank = shape.len();
    if input.is_empty() || sums.is_empty() {
        return;
    }
    if rank == 0 {
        sums[0] = input[0].get();
        return;
    }
    let mut stride = [0usize; super::elementwise::MAX_DIMS];
    out_strides(shape, axes, |d, s| stride[d] = s);
    let mut coord = [0usize; super::elementwise::MAX_DIMS];
    let mut base = 0usize;
    let last = shape[rank - 1];
    if rank >= 2 && stride[rank - 1] == 1 && last > 0 {
        // The innermost axis is kept (MEAN over H, W of NHWC): whole rows add into a run of
        // sums, a loop that vectorizes.
        for row in input.chunks_exact(last) {
            for (s, x) in sums[base..base + last].iter_mut().zip(row) {
                *s = s.wrapping_add(x.get());
            }
            next_outer(&mut coord[..rank - 1], &stride, shape, &mut base);
        }
        return;
    }
    if rank >= 2 && stride[rank - 1] == 0 && last > 0 {
        // The innermost axis is reduced (MEAN over the last axis, as in LayerNorm): each row
        // sums into one value (the same value modulo 2^32 as adding its elements one by one).
        for row in input.chunks_exact(last) {
            let s = row.iter().fold(0i32, |s, x| s.wrapping_add(x.get()));
            sums[base] = sums[base].wrapping_add(s);
            next_outer(&mut coord[..rank - 1], &stride, shape, &mut base);
        }
        return;
    }
    for &x in input {
        sums[base] = sums[base].wrapping_add(x.get());
        next_outer(&mut coord[..rank], &stride, shape, &mut base);
    }
}

/// A prepared int8 or int16 MEAN ([`mean_quantized`] over [`sum_quantized`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantizedMean {
    pub shape: alloc::vec::Vec<usize>,
    pub axes: alloc::vec::Vec<usize>,
    pub count: usize,
    pub in_zero_point: i32,
    pub multiplier: i32,
    pub shift: i32,
    pub out_zero_point: i32,
}

impl QuantizedMean {
    /// Output elements (the sums `run` needs).
    pub fn output_len(&self) -> usize {
        (0..self.shape.len())
            .filter(|d| !self.axes.contains(d))
            .map(|d| self.shape[d])
            .product()
    }

    /// `sums` holds at least `out.len()` values.
    pub fn run<T: super::Quantized>(&self, input: &[T], sums: &mut [i32], out: &mut [T]) {
        let sums = &mut sums[..out.len()];
        sum_quantized(input, &self.shape, &self.axes, sums);
        let (z_in, m, s, z_out) = (
            self.in_zero_point,
            self.multiplier,
            self.shift,
            self.out_zero_point,
        );
        mean_quantized(sums, self.count, z_in, m, s, z_out, out);
    }
}

/// Int8 and int16 MEAN, as TFLite's `reference_ops::QuantizedMeanOrSum` (the general path): the
/// multiplier `(input_scale / output_scale)` is divided by the element count in fixed point,
/// then `out = clamp(MBQM(sum - zp_in * n, m, s) + zp_out)`.
pub fn mean_quantized<T: super::Quantized>(
    sums: &[i32],
    count: usize,
    input_zero_point: i32,
    multiplier: i32,
    shift: i32,
    output_zero_point: i32,
    output: &mut [T],
) {
    if count == 0 {
        return;
    }
    let n = count as i64;
    let mut sh = 63 - (n as u64).leading_zeros() as i32;
    sh = sh.min(32).min(31 + shift);
    let m = ((i64::from(multiplier) << sh) / n) as i32;
    let s = shift - sh;
    for (o, &sum) in output.iter_mut().zip(sums) {
        let shifted = sum.wrapping_sub((i64::from(input_zero_point) * n) as i32);
        let v = crate::quant::multiply_by_quantized_multiplier(shifted, m, s)
            .saturating_add(output_zero_point);
        *o = T::saturate(v);
    }
}

/// Int8 SUM as LiteRT's builtin kernel (`optimized_ops::QuantizedMeanOrSum` with
/// `compute_sum`), in f32: `scale = s_in / s_out`, `bias = -zp_in * scale * count`,
/// `out = clamp(round(sum * scale + bias) + zp_out)` (half away from zero). (Older TFLite
/// sources truncate instead of clamping; LiteRT 2.3 clamps, measured.)
pub fn sum_i8_output(
    sums: &[i32],
    count: usize,
    input_zero_point: i32,
    input_scale: f32,
    output_zero_point: i32,
    output_scale: f32,
    output: &mut [i8],
) {
    if count == 0 {
        return;
    }
    let scale = input_scale / output_scale;
    let bias = (-input_zero_point) as f32 * scale * count as f32;
    for (o, &sum) in output.iter_mut().zip(sums) {
        let r = crate::quant::saturating_f32_to_i32(crate::math::roundf(sum as f32 * scale + bias));
        *o = r.saturating_add(output_zero_point).clamp(-128, 127) as i8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    fn iota(n: usize) -> Vec<f32> {
        (0..n).map(|i| i as f32).collect()
    }

    /// Naive: for each output coordinate, walk all input elements and pick matching ones.
    fn naive(input: &[f32], shape: &[usize], axes: &[usize], kind: ReduceKind) -> Vec<f32> {
        let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
        let out_n: usize = kept.iter().map(|&d| shape[d]).product();
        let mut groups: Vec<Vec<f32>> = vec![Vec::new(); out_n];
        for (i, &x) in input.iter().enumerate() {
            let mut coords = vec![0; shape.len()];
            let mut r = i;
            for d in (0..shape.len()).rev() {
                coords[d] = r % shape[d];
                r /= shape[d];
            }
            let mut o = 0;
            for &d in &kept {
                o = o * shape[d] + coords[d];
            }
            groups[o].push(x);
        }
        groups
            .iter()
            .map(|g| match kind {
                ReduceKind::Sum => g.iter().sum(),
                ReduceKind::Mean => g.iter().sum::<f32>() / g.len() as f32,
                ReduceKind::Prod => g.iter().product(),
                ReduceKind::Max => g.iter().cloned().fold(f32::MIN, f32::max),
                ReduceKind::Min => g.iter().cloned().fold(f32::MAX, f32::min),
            })
            .collect()
    }

    const KINDS: [ReduceKind; 5] = [
        ReduceKind::Mean,
        ReduceKind::Sum,
        ReduceKind::Max,
        ReduceKind::Min,
        ReduceKind::Prod,
    ];

    #[test]
    fn hand_computed_2x3() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut o2 = [0.0; 2];
        let mut o3 = [0.0; 3];
        let mut o1 = [0.0; 1];
        reduce_f32(&x, &[2, 3], &[1], ReduceKind::Sum, &mut o2);
        assert_eq!(o2, [6.0, 15.0]);
        reduce_f32(&x, &[2, 3], &[0], ReduceKind::Mean, &mut o3);
        assert_eq!(o3, [2.5, 3.5, 4.5]);
        reduce_f32(&x, &[2, 3], &[0, 1], ReduceKind::Prod, &mut o1);
        assert_eq!(o1, [720.0]);
        reduce_f32(&x, &[2, 3], &[1], ReduceKind::Max, &mut o2);
        assert_eq!(o2, [3.0, 6.0]);
        reduce_f32(&x, &[2, 3], &[0], ReduceKind::Min, &mut o3);
        assert_eq!(o3, [1.0, 2.0, 3.0]);
        // No axes: a copy.
        let mut o6 = [0.0; 6];
        reduce_f32(&x, &[2, 3], &[], ReduceKind::Mean, &mut o6);
        assert_eq!(o6, x);
    }

    #[test]
    fn several_axes_keep_order() {
        let shape = [2, 3, 4, 5];
        let x: Vec<f32> = iota(120)
            .iter()
            .map(|v| ((v * 7.0) % 13.0) * 0.25 - 1.0)
            .collect();
        let axes_list: [&[usize]; 8] = [
            &[0],
            &[3],
            &[1, 2],
            &[0, 2],
            &[1, 3],
            &[0, 1, 3],
            &[0, 1, 2, 3],
            &[2],
        ];
        for axes in axes_list {
            for kind in KINDS {
                let want = naive(&x, &shape, axes, kind);
                let mut out = vec![f32::NAN; want.len()];
                reduce_f32(&x, &shape, axes, kind, &mut out);
                for (a, b) in out.iter().zip(&want) {
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "{axes:?} {kind:?}: {out:?} vs {want:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn explicit_order_mean_axes_1_2() {
        // [1, 2, 2, 2] mean over H, W: per channel.
        let x = [1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0];
        let mut out = [0.0; 2];
        reduce_f32(&x, &[1, 2, 2, 2], &[1, 2], ReduceKind::Mean, &mut out);
        assert_eq!(out, [2.5, 25.0]);
    }

    #[test]
    fn scalar_and_rank1() {
        let mut o = [0.0];
        reduce_f32(&[3.5], &[], &[], ReduceKind::Sum, &mut o);
        assert_eq!(o, [3.5]);
        reduce_f32(&[3.0, -1.0, 2.0], &[3], &[0], ReduceKind::Min, &mut o);
        assert_eq!(o, [-1.0]);
    }

    #[test]
    fn quantized_sums_match_a_direct_sum() {
        // Shapes and axes with the innermost axis kept (row-wise path) and reduced.
        for (shape, axes) in [
            (vec![1, 7, 7, 20], vec![1, 2]),
            (vec![2, 3, 4, 5], vec![0, 2]),
            (vec![2, 3, 4, 5], vec![3]),
            (vec![3, 5], vec![0]),
            (vec![2, 3, 4], vec![1, 2]),
            (vec![2, 3, 4, 5], vec![1, 3]),
            (vec![1, 32, 64], vec![2]),
        ] {
            let n: usize = shape.iter().product();
            let input: Vec<i8> = (0..n).map(|i| (i * 37 % 255) as i8).collect();
            let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
            let outs: usize = kept.iter().map(|&d| shape[d]).product();
            let mut want = vec![0i32; outs];
            for (i, &x) in input.iter().enumerate() {
                let (mut rest, mut o) = (i, 0);
                let mut coord = vec![0; shape.len()];
                for d in (0..shape.len()).rev() {
                    coord[d] = rest % shape[d];
                    rest /= shape[d];
                }
                for &d in &kept {
                    o = o * shape[d] + coord[d];
                }
                want[o] += i32::from(x);
            }
            let mut got = vec![0i32; outs];
            sum_quantized(&input, &shape, &axes, &mut got);
            assert_eq!(got, want, "{shape:?} over {axes:?}");
        }
    }

    #[test]
    fn slow_path_matches() {
        // Same data through the division fallback.
        let shape = [2, 3, 4];
        let x = iota(24);
        for kind in KINDS {
            for axes in [&[1usize][..], &[0, 2][..]] {
                let mut a = vec![0.0; naive(&x, &shape, axes, kind).len()];
                let mut b = a.clone();
                reduce_f32(&x, &shape, axes, kind, &mut a);
                b.fill(match kind {
                    ReduceKind::Prod => 1.0,
                    ReduceKind::Max => f32::MIN,
                    ReduceKind::Min => f32::MAX,
                    _ => 0.0,
                });
                fold_slow(&x, &shape, axes, &mut b, |c, v| match kind {
                    ReduceKind::Mean | ReduceKind::Sum => v + c,
                    ReduceKind::Prod => v * c,
                    ReduceKind::Max => c.max(v),
                    ReduceKind::Min => c.min(v),
                });
                if kind == ReduceKind::Mean {
                    let n = axes.iter().map(|&d| shape[d]).product::<usize>() as f32;
                    b.iter_mut().for_each(|v| *v /= n);
                }
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn tflite_max_of_neg_inf_is_lowest() {
        let mut o = [0.0];
        reduce_f32(
            &[f32::NEG_INFINITY, f32::NEG_INFINITY],
            &[2],
            &[0],
            ReduceKind::Max,
            &mut o,
        );
        assert_eq!(o, [f32::MIN]);
    }

    #[test]
    fn int32_reductions_wrap_and_start_from_the_identity() {
        // [2, 3]: rows [1, 2, 3] and [4, 5, -6].
        let x = [1, 2, 3, 4, 5, -6];
        let mut o = [0i32; 2];
        reduce_i32(&x, &[2, 3], &[1], ReduceKind::Prod, &mut o);
        assert_eq!(o, [6, -120]);
        reduce_i32(&x, &[2, 3], &[1], ReduceKind::Sum, &mut o);
        assert_eq!(o, [6, 3]);
        let mut o3 = [0i32; 3];
        reduce_i32(&x, &[2, 3], &[0], ReduceKind::Max, &mut o3);
        assert_eq!(o3, [4, 5, 3]);
        reduce_i32(&x, &[2, 3], &[0], ReduceKind::Min, &mut o3);
        assert_eq!(o3, [1, 2, -6]);
        let mut one = [0i32; 1];
        reduce_i32(&[i32::MAX, 2], &[2], &[0], ReduceKind::Prod, &mut one);
        assert_eq!(one, [-2]); // wraps as TFLite's int32 kernel
        reduce_i32(&[], &[0], &[0], ReduceKind::Prod, &mut one);
        assert_eq!(one, [1]);
    }
}
