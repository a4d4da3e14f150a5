//! Data-movement kernels (generic over the element type): strided copies (TRANSPOSE, SLICE,
//! STRIDED_SLICE, SPLIT, BROADCAST_TO), CONCATENATION, GATHER, PAD, TILE, ARG_MAX/ARG_MIN, CAST
//! and half-to-single conversion.

/// Largest rank these kernels handle.
pub const MAX_DIMS: usize = 8;

/// Row-major element strides of `shape`.
pub fn strides_of(shape: &[usize]) -> [usize; MAX_DIMS] {
    let mut s = [0usize; MAX_DIMS];
    let mut acc = 1usize;
    for i in (0..shape.len().min(MAX_DIMS)).rev() {
        s[i] = acc;
        acc = acc.saturating_mul(shape[i]);
    }
    s
}

/// Copies the strided view `input[start + sum_d i_d * strides[d]]`, `i` over `out_shape`
/// (row-major), into `output`. Out-of-range reads (impossible for validated views) write
/// `T::default()`.
pub fn strided_copy<T: Copy + Default>(
    input: &[T],
    start: isize,
    out_shape: &[usize],
    strides: &[isize],
    output: &mut [T],
) {
    let rank = out_shape.len();
    if rank == 0 {
        if let Some(o) = output.first_mut() {
            *o = get(input, start);
        }
        return;
    }
    if rank > MAX_DIMS || strides.len() != rank {
        return;
    }
    let inner = out_shape[rank - 1];
    if inner == 0 || out_shape.contains(&0) {
        return;
    }
    let istride = strides[rank - 1];
    let mut idx = [0usize; MAX_DIMS];
    let mut base = start;
    for row in output.chunks_exact_mut(inner) {
        if istride == 1 {
            if let Some(src) = usize::try_from(base)
                .ok()
                .and_then(|b| input.get(b..b.checked_add(inner)?))
            {
                row.copy_from_slice(src);
            } else {
                row.fill(T::default());
            }
        } else {
            let mut p = base;
            for o in row.iter_mut() {
                *o = get(input, p);
                p = p.wrapping_add(istride);
            }
        }
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            base = base.wrapping_add(strides[d]);
            if idx[d] < out_shape[d] {
                break;
            }
            base = base.wrapping_sub(strides[d].wrapping_mul(out_shape[d] as isize));
            idx[d] = 0;
        }
    }
}

#[inline]
fn get<T: Copy + Default>(s: &[T], i: isize) -> T {
    usize::try_from(i)
        .ok()
        .and_then(|i| s.get(i))
        .copied()
        .unwrap_or_default()
}

/// TRANSPOSE: `output[i] = input[j]` where output dim `d` is input dim `perm[d]`.
pub fn transpose<T: Copy + Default>(
    input: &[T],
    in_shape: &[usize],
    perm: &[usize],
    output: &mut [T],
) {
    let rank = in_shape.len();
    if perm.len() != rank || rank > MAX_DIMS {
        return;
    }
    if let Some((batches, rows, cols)) = batched_2d(in_shape, perm) {
        let len = batches * rows * cols;
        if input.len() >= len && output.len() >= len {
            let (input, output) = (&input[..len], &mut output[..len]);
            if rows <= 1 || cols <= 1 {
                output.copy_from_slice(input);
            } else {
                for (i, o) in input
                    .chunks_exact(rows * cols)
                    .zip(output.chunks_exact_mut(rows * cols))
                {
                    transpose_2d(i, rows, cols, o);
                }
            }
            return;
        }
    }
    transpose_strided(input, in_shape, perm, output)
}

/// [`transpose`] as one strided copy (any permutation).
fn transpose_strided<T: Copy + Default>(
    input: &[T],
    in_shape: &[usize],
    perm: &[usize],
    output: &mut [T],
) {
    let rank = in_shape.len();
    if perm.len() != rank || rank > MAX_DIMS {
        return;
    }
    let s = strides_of(in_shape);
    let mut out_shape = [0usize; MAX_DIMS];
    let mut st = [0isize; MAX_DIMS];
    for d in 0..rank {
        let Some(&p) = in_shape.get(perm[d]) else {
            return;
        };
        out_shape[d] = p;
        st[d] = s[perm[d]] as isize;
    }
    strided_copy(input, 0, &out_shape[..rank], &st[..rank], output);
}

/// A TRANSPOSE as `batches` transposes of `[rows, cols]` matrices (`out[b][j][i] =
/// in[b][i][j]`), when it is one once dimensions of size 1 are dropped and dimensions that stay
/// adjacent are merged (NCHW -> NHWC is `[C, H*W]` -> `[H*W, C]`); an identity is `rows` 1.
/// `None` for other permutations, or a `perm` that is not one.
pub(crate) fn batched_2d(in_shape: &[usize], perm: &[usize]) -> Option<(usize, usize, usize)> {
    let (runs, nr) = merged_runs(in_shape, perm)?;
    // Runs are in output order; their first dimensions give the input order.
    match nr {
        0 => Some((1, 1, 1)),
        1 => Some((1, 1, runs[0].1)),
        2 if runs[0].0 > runs[1].0 => Some((1, runs[1].1, runs[0].1)),
        3 if runs[0].0 < runs[2].0 && runs[2].0 < runs[1].0 => {
            Some((runs[0].1, runs[2].1, runs[1].1))
        }
        _ => None,
    }
}

/// A TRANSPOSE as `[a, b, c] -> [b, a, c]` (two dimensions swapped above a last one that stays,
/// as attention's heads are split from and merged into rows), once merged as in
/// [`batched_2d`]: `(a, b, c)`, or `None` for other permutations.
#[cfg_attr(
    any(
        not(feature = "ops-shape"),
        not(any(target_arch = "x86_64", target_arch = "aarch64"))
    ),
    allow(dead_code)
)]
pub(crate) fn swap_above_rows(in_shape: &[usize], perm: &[usize]) -> Option<(usize, usize, usize)> {
    match merged_runs(in_shape, perm)? {
        (runs, 3) if runs[1].0 < runs[0].0 && runs[0].0 < runs[2].0 => {
            Some((runs[1].1, runs[0].1, runs[2].1))
        }
        _ => None,
    }
}

/// The output of a TRANSPOSE as runs of consecutive input dimensions (up to three, in output
/// order: first input dimension and size), dimensions of size 1 dropped, and how many runs.
/// `None` for more runs, a shape with a 0, or a `perm` that is not one.
#[allow(clippy::type_complexity)]
fn merged_runs(in_shape: &[usize], perm: &[usize]) -> Option<([(usize, usize); 3], usize)> {
    let rank = in_shape.len();
    if rank > MAX_DIMS || perm.len() != rank || in_shape.contains(&0) {
        return None;
    }
    let mut seen = [false; MAX_DIMS];
    for &p in perm {
        if p >= rank || core::mem::replace(&mut seen[p], true) {
            return None;
        }
    }
    // Output order of the input dimensions larger than 1.
    let mut order = [0usize; MAX_DIMS];
    let mut n = 0;
    for &p in perm {
        if in_shape[p] > 1 {
            order[n] = p;
            n += 1;
        }
    }
    // Runs of consecutive input dimensions in output order (up to three), with their sizes. Dims
    // of size 1 between two of a run's dimensions do not break it.
    let next_big = |d: usize| (d + 1..rank).find(|&e| in_shape[e] > 1);
    let mut runs = [(0usize, 1usize); 3];
    let mut nr = 0;
    for k in 0..n {
        let d = order[k];
        if k == 0 || next_big(order[k - 1]) != Some(d) {
            if nr == 3 {
                return None;
            }
            runs[nr] = (d, 1);
            nr += 1;
        }
        runs[nr - 1].1 *= in_shape[d];
    }
    Some((runs, nr))
}

/// `out[j * rows + i] = input[i * cols + j]` (`input` is `[rows, cols]`, both `rows * cols` long).
fn transpose_2d<T: Copy>(input: &[T], rows: usize, cols: usize, out: &mut [T]) {
    match rows {
        2 => return transpose_few_rows::<T, 2>(input, cols, out),
        3 => return transpose_few_rows::<T, 3>(input, cols, out),
        4 => return transpose_few_rows::<T, 4>(input, cols, out),
        _ => {}
    }
    // Tiles of 16 x 16: reads and writes stay within a few cache lines each.
    const TILE: usize = 16;
    for i0 in (0..rows).step_by(TILE) {
        let i1 = (i0 + TILE).min(rows);
        for j0 in (0..cols).step_by(TILE) {
            let j1 = (j0 + TILE).min(cols);
            for i in i0..i1 {
                let src = &input[i * cols + j0..i * cols + j1];
                for (j, &v) in (j0..j1).zip(src) {
                    out[j * rows + i] = v;
                }
            }
        }
    }
}

/// [`transpose_2d`] of `R` rows: each output row gathers one value of every input row.
fn transpose_few_rows<T: Copy, const R: usize>(input: &[T], cols: usize, out: &mut [T]) {
    let rows: [&[T]; R] = core::array::from_fn(|r| &input[r * cols..(r + 1) * cols]);
    for (j, o) in out.chunks_exact_mut(R).take(cols).enumerate() {
        for (o, row) in o.iter_mut().zip(&rows) {
            *o = row[j];
        }
    }
}

/// BROADCAST_TO: reads `input` (shape `in_shape`, right-aligned) broadcast to `out_shape`.
pub fn broadcast_to<T: Copy + Default>(
    input: &[T],
    in_shape: &[usize],
    out_shape: &[usize],
    output: &mut [T],
) {
    let rank = out_shape.len();
    if rank > MAX_DIMS || in_shape.len() > rank {
        return;
    }
    let s = strides_of(in_shape);
    let mut st = [0isize; MAX_DIMS];
    let lead = rank - in_shape.len();
    for d in lead..rank {
        st[d] = if in_shape[d - lead] == 1 {
            0
        } else {
            s[d - lead] as isize
        };
    }
    strided_copy(input, 0, out_shape, &st[..rank], output);
}

/// CONCATENATION of one input into its place in the output: the input has `outer` blocks of
/// `chunk` elements, placed at `offset` within output blocks of `out_chunk` elements.
pub fn concat_part<T: Copy>(
    input: &[T],
    outer: usize,
    chunk: usize,
    out_chunk: usize,
    offset: usize,
    output: &mut [T],
) {
    for o in 0..outer {
        let (Some(src), Some(dst)) = (
            input.get(o * chunk..(o + 1) * chunk),
            output.get_mut(o * out_chunk + offset..o * out_chunk + offset + chunk),
        ) else {
            return;
        };
        dst.copy_from_slice(src);
    }
}

/// GATHER along an axis: `params` viewed as `[outer, axis_size, inner]`, output as
/// `[outer, indices.len(), inner]`. Returns the first bad index (negative or `>= axis_size`,
/// an error in TFLite) without completing the copy.
pub fn gather<T: Copy>(
    params: &[T],
    outer: usize,
    axis_size: usize,
    inner: usize,
    indices: impl Iterator<Item = i64> + Clone,
    output: &mut [T],
) -> Result<(), i64> {
    let mut out = 0usize;
    for o in 0..outer {
        for i in indices.clone() {
            let iu = usize::try_from(i)
                .ok()
                .filter(|&u| u < axis_size)
                .ok_or(i)?;
            let src = (o * axis_size + iu) * inner;
            let (Some(s), Some(d)) = (
                params.get(src..src + inner),
                output.get_mut(out..out + inner),
            ) else {
                return Err(i);
            };
            d.copy_from_slice(s);
            out += inner;
        }
    }
    Ok(())
}

/// Hybrid EMBEDDING_LOOKUP: the int8 `table`'s rows (of `cols` values) picked by `ids`, each
/// value times its row's scale (`scales` has one entry for the whole table or one per row) in
/// float32, as TFLite dequantizes them. Fails with the first id outside the table.
pub fn embedding_hybrid(
    table: &[i8],
    cols: usize,
    scales: &[f32],
    ids: &[i32],
    output: &mut [f32],
) -> Result<(), i32> {
    let rows = table.len().checked_div(cols).unwrap_or(0);
    for (&id, out) in ids.iter().zip(output.chunks_exact_mut(cols.max(1))) {
        let r = usize::try_from(id).ok().filter(|&r| r < rows).ok_or(id)?;
        let scale = if scales.len() == 1 {
            scales[0]
        } else {
            *scales.get(r).ok_or(id)?
        };
        let Some(row) = table.get(r * cols..(r + 1) * cols) else {
            return Err(id);
        };
        for (o, &v) in out.iter_mut().zip(row) {
            *o = f32::from(v) * scale;
        }
    }
    Ok(())
}

/// PAD: `output` (shape `in_shape[d] + before[d] + after[d]`) filled with `value` around `input`.
/// MIRROR_PAD: each output coordinate reflects back into the input (REFLECT skips the border
/// value, SYMMETRIC repeats it). Paddings were checked against the dimensions at prepare time.
pub fn mirror_pad_f32(
    input: &[f32],
    in_shape: &[usize],
    before: &[usize],
    after: &[usize],
    symmetric: bool,
    output: &mut [f32],
) {
    let rank = in_shape.len();
    if rank == 0 || rank > MAX_DIMS || before.len() != rank || after.len() != rank {
        return;
    }
    let mut out_shape = [0usize; MAX_DIMS];
    for d in 0..rank {
        out_shape[d] = in_shape[d] + before[d] + after[d];
    }
    let is = strides_of(in_shape);
    let mut idx = [0usize; MAX_DIMS];
    for o in output.iter_mut() {
        let mut src = 0;
        for d in 0..rank {
            let n = in_shape[d] as isize;
            let mut i = idx[d] as isize - before[d] as isize;
            if i < 0 {
                i = if symmetric { -i - 1 } else { -i };
            } else if i >= n {
                i = if symmetric {
                    2 * n - 1 - i
                } else {
                    2 * n - 2 - i
                };
            }
            src += i.clamp(0, (n - 1).max(0)) as usize * is[d];
        }
        *o = input.get(src).copied().unwrap_or(0.0);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

pub fn pad<T: Copy>(
    input: &[T],
    in_shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: T,
    output: &mut [T],
) {
    let rank = in_shape.len();
    if rank == 0 {
        if let (Some(o), Some(&i)) = (output.first_mut(), input.first()) {
            *o = i;
        }
        return;
    }
    if rank > MAX_DIMS || before.len() != rank || after.len() != rank {
        return;
    }
    let mut out_shape = [0usize; MAX_DIMS];
    for d in 0..rank {
        out_shape[d] = in_shape[d] + before[d] + after[d];
    }
    output.fill(value);
    if in_shape.contains(&0) {
        return;
    }
    let os = strides_of(&out_shape[..rank]);
    let inner = in_shape[rank - 1];
    // Iterate over input rows.
    let mut idx = [0usize; MAX_DIMS];
    for row in input.chunks_exact(inner) {
        let mut off = before[rank - 1];
        for d in 0..rank - 1 {
            off += (idx[d] + before[d]) * os[d];
        }
        if let Some(dst) = output.get_mut(off..off + inner) {
            dst.copy_from_slice(row);
        }
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            if idx[d] < in_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// TILE: `output` (shape `in_shape[d] * multiples[d]`) repeats `input`.
pub fn tile<T: Copy + Default>(
    input: &[T],
    in_shape: &[usize],
    out_shape: &[usize],
    output: &mut [T],
) {
    let rank = in_shape.len();
    if rank == 0 {
        if let (Some(o), Some(&i)) = (output.first_mut(), input.first()) {
            *o = i;
        }
        return;
    }
    if rank > MAX_DIMS || out_shape.len() != rank || out_shape.contains(&0) {
        return;
    }
    let is = strides_of(in_shape);
    let inner_in = in_shape[rank - 1];
    let inner_out = out_shape[rank - 1];
    let mut idx = [0usize; MAX_DIMS];
    for row in output.chunks_exact_mut(inner_out) {
        let mut base = 0usize;
        for d in 0..rank - 1 {
            base += (idx[d] % in_shape[d]) * is[d];
        }
        if let Some(src) = input.get(base..base + inner_in) {
            for (k, o) in row.iter_mut().enumerate() {
                *o = src[k % inner_in];
            }
        }
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// ARG_MAX (`max = true`) or ARG_MIN over the middle axis of `[outer, axis, inner]`; the first
/// extreme wins, as in TFLite. `store(i, index)` writes output element `i`.
pub fn arg_min_max<T: Copy + PartialOrd>(
    input: &[T],
    outer: usize,
    axis: usize,
    inner: usize,
    max: bool,
    mut store: impl FnMut(usize, usize),
) {
    if axis == 0 || input.len() < outer * axis * inner {
        return;
    }
    for o in 0..outer {
        for i in 0..inner {
            let base = o * axis * inner + i;
            let mut best = input[base];
            let mut best_k = 0usize;
            for k in 1..axis {
                let v = input[base + k * inner];
                if (max && v > best) || (!max && v < best) {
                    best = v;
                    best_k = k;
                }
            }
            store(o * inner + i, best_k);
        }
    }
}

/// IEEE 754 half (binary16) bits to `f32`, exact.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let mant = u32::from(h & 0x3ff);
    let bits = if exp == 0 {
        if mant == 0 {
            sign
        } else {
            let mut e = 113u32;
            let mut m = mant;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (mant << 13)
    } else {
        sign | ((exp + 112) << 23) | (mant << 13)
    };
    f32::from_bits(bits)
}

/// Element-type conversion with C++ `static_cast` semantics as TFLite's CAST (float to int
/// truncates toward zero, saturating here where C++ is undefined; to bool is `!= 0`).
pub trait CastTo<U> {
    fn cast(self) -> U;
}

macro_rules! cast_num {
    ($($from:ty => $($to:ty),*);* $(;)?) => {$($(
        impl CastTo<$to> for $from {
            #[inline]
            #[allow(clippy::unnecessary_cast, clippy::cast_lossless)]
            fn cast(self) -> $to { self as $to }
        }
    )*)*};
}
cast_num! {
    f32 => f32, i32, i64, u8, i8;
    i32 => f32, i32, i64, u8, i8;
    i64 => f32, i32, i64, u8, i8;
    u8 => f32, i32, i64, u8, i8;
    i8 => f32, i32, i64, u8, i8;
}

/// A bool element (stored as one byte) for [`CastTo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bool8(pub u8);

macro_rules! cast_bool {
    ($($t:ty => $zero:expr),*) => {$(
        impl CastTo<Bool8> for $t {
            #[inline]
            fn cast(self) -> Bool8 { Bool8(u8::from(self != $zero)) }
        }
        impl CastTo<$t> for Bool8 {
            #[inline]
            #[allow(clippy::unnecessary_cast, clippy::cast_lossless)]
            fn cast(self) -> $t { u8::from(self.0 != 0) as $t }
        }
    )*};
}
cast_bool!(f32 => 0.0, i32 => 0, i64 => 0, u8 => 0, i8 => 0);

impl CastTo<Bool8> for Bool8 {
    fn cast(self) -> Bool8 {
        Bool8(u8::from(self.0 != 0))
    }
}

/// `output[i] = input[i] as U`.
pub fn cast<T: Copy + CastTo<U>, U>(input: &[T], output: &mut [U]) {
    for (o, &i) in output.iter_mut().zip(input) {
        *o = i.cast();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_fast_paths_match_the_strided_copy() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut cases: alloc::vec::Vec<(alloc::vec::Vec<usize>, alloc::vec::Vec<usize>)> = alloc::vec![
            (alloc::vec![1, 3, 224, 224], alloc::vec![0, 2, 3, 1]),
            (alloc::vec![1, 3, 17, 5], alloc::vec![0, 2, 3, 1]),
            (alloc::vec![2, 4, 3, 5], alloc::vec![0, 2, 3, 1]),
            (alloc::vec![1, 7, 9, 1], alloc::vec![0, 3, 1, 2]),
            (alloc::vec![2, 40, 33], alloc::vec![0, 2, 1]),
            (alloc::vec![37, 19], alloc::vec![1, 0]),
            (alloc::vec![1, 1, 1], alloc::vec![2, 0, 1]),
            (alloc::vec![3, 1, 2], alloc::vec![1, 0, 2]),
        ];
        for _ in 0..400 {
            let rank = 1 + rnd(6);
            let shape: alloc::vec::Vec<usize> = (0..rank).map(|_| 1 + rnd(6)).collect();
            let mut perm: alloc::vec::Vec<usize> = (0..rank).collect();
            for i in (1..rank).rev() {
                perm.swap(i, rnd(i + 1));
            }
            cases.push((shape, perm));
        }
        let mut fast = 0;
        for (shape, perm) in &cases {
            let n: usize = shape.iter().product();
            let input: alloc::vec::Vec<u32> = (0..n as u32)
                .map(|v| v.wrapping_mul(2_654_435_761))
                .collect();
            let mut want = alloc::vec![0u32; n];
            let mut got = alloc::vec![1u32; n];
            transpose_strided(&input, shape, perm, &mut want);
            transpose(&input, shape, perm, &mut got);
            assert_eq!(got, want, "{shape:?} {perm:?}");
            let bytes: alloc::vec::Vec<u8> = input.iter().map(|&v| v as u8).collect();
            let mut want8 = alloc::vec![0u8; n];
            let mut got8 = alloc::vec![1u8; n];
            transpose_strided(&bytes, shape, perm, &mut want8);
            transpose(&bytes, shape, perm, &mut got8);
            assert_eq!(got8, want8, "{shape:?} {perm:?}");
            fast += usize::from(batched_2d(shape, perm).is_some());
        }
        // Most random permutations of small shapes reduce to a (batched) 2-D transpose.
        assert!(fast > cases.len() / 3, "{fast} of {}", cases.len());
        assert_eq!(
            batched_2d(&[1, 3, 224, 224], &[0, 2, 3, 1]),
            Some((1, 3, 224 * 224))
        );
        assert_eq!(batched_2d(&[2, 3, 4, 5], &[0, 2, 3, 1]), Some((2, 3, 20)));
        assert_eq!(batched_2d(&[2, 3, 4], &[2, 1, 0]), None);
        assert_eq!(batched_2d(&[2, 3], &[0, 0]), None);
        assert_eq!(batched_2d(&[2, 3], &[0, 2]), None);
    }

    #[test]
    fn transpose_2x3() {
        let mut out = [0; 6];
        transpose(&[1, 2, 3, 4, 5, 6], &[2, 3], &[1, 0], &mut out);
        assert_eq!(out, [1, 4, 2, 5, 3, 6]);
        // [2,1,3] perm [2,0,1] -> [3,2,1]
        transpose(&[1, 2, 3, 4, 5, 6], &[2, 1, 3], &[2, 0, 1], &mut out);
        assert_eq!(out, [1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn strided_negative() {
        let mut out = [0; 3];
        strided_copy(&[0, 1, 2, 3, 4, 5], 5, &[3], &[-2], &mut out);
        assert_eq!(out, [5, 3, 1]);
    }

    #[test]
    fn broadcast_and_tile() {
        let mut out = [0; 6];
        broadcast_to(&[1, 2, 3], &[3], &[2, 3], &mut out);
        assert_eq!(out, [1, 2, 3, 1, 2, 3]);
        broadcast_to(&[1, 2], &[2, 1], &[2, 3], &mut out);
        assert_eq!(out, [1, 1, 1, 2, 2, 2]);
        let mut out = [0; 8];
        tile(&[1, 2], &[1, 2], &[2, 4], &mut out);
        assert_eq!(out, [1, 2, 1, 2, 1, 2, 1, 2]);
    }

    #[test]
    fn concat_gather_pad() {
        let mut out = [0; 6];
        concat_part(&[1, 2], 2, 1, 3, 0, &mut out);
        concat_part(&[3, 4, 5, 6], 2, 2, 3, 1, &mut out);
        assert_eq!(out, [1, 3, 4, 2, 5, 6]);
        let mut out = [0; 4];
        gather(
            &[1, 2, 3, 4, 5, 6],
            1,
            3,
            2,
            [2i64, 0].into_iter(),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [5, 6, 1, 2]);
        assert_eq!(
            gather(&[1, 2, 3], 1, 3, 1, [3i64].into_iter(), &mut out),
            Err(3)
        );
        assert_eq!(
            gather(&[1, 2, 3], 1, 3, 1, [-1i64].into_iter(), &mut out),
            Err(-1)
        );
        let mut out = [0; 12];
        pad(&[1, 2, 3, 4], &[2, 2], &[1, 0], &[0, 2], 9, &mut out);
        assert_eq!(out, [9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9]);
    }

    #[test]
    fn argmax_first_wins() {
        let mut out = [0usize; 2];
        arg_min_max(&[1.0, 5.0, 5.0, 2.0, 0.0, 2.0], 1, 3, 2, true, |i, k| {
            out[i] = k
        });
        // columns: [1,5,0] -> 1 ; [5,2,2] -> 0
        assert_eq!(out, [1, 0]);
        arg_min_max(&[3, 1, 1], 1, 3, 1, false, |i, k| out[i] = k);
        assert_eq!(out[0], 1);
    }

    #[test]
    fn f16_conversion() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x03ff), 6.097_555e-5);
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x8000).to_bits(), 0x8000_0000);
    }

    #[test]
    fn casts() {
        let mut o = [0i32; 3];
        cast(&[1.7f32, -1.7, 3.0], &mut o);
        assert_eq!(o, [1, -1, 3]);
        let mut b = [Bool8(0); 3];
        cast(&[0.0f32, 0.5, -1.0], &mut b);
        assert_eq!(b, [Bool8(0), Bool8(1), Bool8(1)]);
        let mut f = [0f32; 2];
        cast(&[Bool8(1), Bool8(0)], &mut f);
        assert_eq!(f, [1.0, 0.0]);
    }
}

#[cfg(test)]
mod mirror_pad_tests {
    use super::mirror_pad_f32;

    #[test]
    fn reflect_and_symmetric_match_numpy() {
        // np.pad([1, 2, 3], (2, 2), 'reflect') == [3, 2, 1, 2, 3, 2, 1]
        let mut out = [0f32; 7];
        mirror_pad_f32(&[1.0, 2.0, 3.0], &[3], &[2], &[2], false, &mut out);
        assert_eq!(out, [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]);
        // np.pad([1, 2, 3], (2, 2), 'symmetric') == [2, 1, 1, 2, 3, 3, 2]
        mirror_pad_f32(&[1.0, 2.0, 3.0], &[3], &[2], &[2], true, &mut out);
        assert_eq!(out, [2.0, 1.0, 1.0, 2.0, 3.0, 3.0, 2.0]);
    }
}
