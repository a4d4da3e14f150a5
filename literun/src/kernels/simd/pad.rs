//! Constant PAD/PADV2 split by output rows over the workers, when the innermost dimension is not
//! padded (NHWC images padded in height and width): each output row is either padding or a
//! run of padding, one input row copied whole, and padding again. Copies only, so the values
//! are the portable kernel's.

use super::*;

/// Pads `input` (`in_shape`, `before[d]` and `after[d]` values added to dimension `d`) with
/// `value` into `output`, one block of output rows (every dimension but the last two) per
/// worker (feature `threads`, enough work). `false` (nothing done) when the innermost
/// dimension is padded, the rank is below 2 or above 6, or the lengths do not match.
pub(crate) fn pad_rows<T: Copy + Send + Sync>(
    input: &[T],
    in_shape: &[usize],
    before: &[usize],
    after: &[usize],
    value: T,
    output: &mut [T],
    workers: &mut Workers,
) -> bool {
    const MAX_RANK: usize = 6;
    let rank = in_shape.len();
    if !(2..=MAX_RANK).contains(&rank) || before.len() != rank || after.len() != rank {
        return false;
    }
    let mut out_shape = [0usize; MAX_RANK];
    for d in 0..rank {
        let Some(n) = in_shape[d]
            .checked_add(before[d])
            .and_then(|n| n.checked_add(after[d]))
        else {
            return false;
        };
        out_shape[d] = n;
    }
    let (w, c) = (rank - 2, rank - 1);
    let in_len = in_shape.iter().try_fold(1usize, |a, &n| a.checked_mul(n));
    let out_len = out_shape[..rank]
        .iter()
        .try_fold(1usize, |a, &n| a.checked_mul(n));
    if before[c] != 0
        || after[c] != 0
        || in_len != Some(input.len())
        || out_len != Some(output.len())
    {
        return false;
    }
    let inner = in_shape[c];
    let (row_len, in_row) = (out_shape[w] * inner, in_shape[w] * inner);
    if row_len == 0 {
        return true;
    }
    let rows = output.len() / row_len;
    let (left, right) = (before[w] * inner, after[w] * inner);
    let (in_shape, before) = (&in_shape[..w], &before[..w]);
    let out_dims = &out_shape[..w];
    for_row_blocks(
        rows,
        1,
        row_len,
        Work::Copies(output.len()),
        output,
        workers,
        |rs, block, _| {
            for (r, row) in rs.zip(block.chunks_exact_mut(row_len)) {
                // The input row this output row copies, if it is inside the input.
                let mut at = Some(0usize);
                let mut rest = r;
                let mut stride = 1;
                for d in (0..out_dims.len()).rev() {
                    let i = (rest % out_dims[d]).wrapping_sub(before[d]);
                    rest /= out_dims[d];
                    at = at.filter(|_| i < in_shape[d]).map(|a| a + i * stride);
                    stride *= in_shape[d];
                }
                match at {
                    Some(a) => {
                        row[..left].fill(value);
                        row[left..left + in_row]
                            .copy_from_slice(&input[a * in_row..(a + 1) * in_row]);
                        row[left + in_row..left + in_row + right].fill(value);
                    }
                    None => row.fill(value),
                }
            }
        },
    );
    true
}
