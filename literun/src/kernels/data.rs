//! Index-driven data movement (generic over the element type): GATHER_ND,
//! DYNAMIC_UPDATE_SLICE, SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND and BROADCAST_ARGS.

use super::shape_ops::{strides_of, MAX_DIMS};

/// GATHER_ND: `params` (shape `params_shape`) read at each `depth`-long index tuple of
/// `indices`, each tuple selecting a slice of `inner` elements. Returns the first index out of
/// range (an error in TFLite) without completing the copy.
pub fn gather_nd<T: Copy>(
    params: &[T],
    params_shape: &[usize],
    indices: impl Iterator<Item = i64>,
    depth: usize,
    inner: usize,
    output: &mut [T],
) -> Result<(), i64> {
    let strides = strides_of(params_shape);
    let mut out = 0usize;
    let mut src = 0usize;
    let mut d = 0usize;
    for i in indices {
        let dim = params_shape.get(d).copied().unwrap_or(0);
        let iu = usize::try_from(i).ok().filter(|&u| u < dim).ok_or(i)?;
        src += iu * strides.get(d).copied().unwrap_or(0);
        d += 1;
        if d == depth {
            let (Some(s), Some(o)) = (
                params.get(src..src + inner),
                output.get_mut(out..out + inner),
            ) else {
                return Err(i);
            };
            o.copy_from_slice(s);
            out += inner;
            src = 0;
            d = 0;
        }
    }
    Ok(())
}

/// DYNAMIC_UPDATE_SLICE: `output` = `operand` with `update` (shape `upd_shape`) written at
/// `start`, each start index clamped to `0..=shape[d] - upd_shape[d]` as TFLite does.
pub fn dynamic_update_slice<T: Copy>(
    operand: &[T],
    shape: &[usize],
    update: &[T],
    upd_shape: &[usize],
    start: impl Iterator<Item = i64>,
    output: &mut [T],
) {
    let rank = shape.len();
    if rank > MAX_DIMS || upd_shape.len() != rank || output.len() != operand.len() {
        return;
    }
    output.copy_from_slice(operand);
    let mut base = 0usize;
    let strides = strides_of(shape);
    for (d, s) in start.take(rank).enumerate() {
        let hi = shape[d].saturating_sub(upd_shape[d]) as i64;
        base += s.clamp(0, hi) as usize * strides[d];
    }
    if rank == 0 {
        if let (Some(o), Some(&u)) = (output.first_mut(), update.first()) {
            *o = u;
        }
        return;
    }
    let inner = upd_shape[rank - 1];
    if inner == 0 || upd_shape.contains(&0) {
        return;
    }
    let mut idx = [0usize; MAX_DIMS];
    let mut off = base;
    for row in update.chunks_exact(inner) {
        if let Some(o) = output.get_mut(off..off + inner) {
            o.copy_from_slice(row);
        }
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            idx[d] += 1;
            off += strides[d];
            if idx[d] < upd_shape[d] {
                break;
            }
            off -= strides[d] * upd_shape[d];
            idx[d] = 0;
        }
    }
}

/// The geometry of SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND on NHWC (a 3-D operator is `w` 1 and
/// block width 1): `space` is `[batch, h, w, c]`, the batched form `[block_h * block_w * batch,
/// h_b, w_b, c]`; a space row `y` is batched row `(y + pad_top) / block_h` of block row
/// `(y + pad_top) % block_h` (likewise columns with `pad_left`). Positions of the batched form
/// outside the space tensor are its padding (SPACE_TO_BATCH_ND) or its crops
/// (BATCH_TO_SPACE_ND).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceBatch {
    pub batch: usize,
    pub h: usize,
    pub w: usize,
    pub c: usize,
    pub block_h: usize,
    pub block_w: usize,
    pub h_b: usize,
    pub w_b: usize,
    pub pad_top: usize,
    pub pad_left: usize,
}

impl SpaceBatch {
    /// Runs the mapping for each batched pixel: `f(batched_offset, Some(space_offset))`, or
    /// `None` where the batched pixel is padding. Offsets are of the pixel's first channel.
    fn for_each(&self, mut f: impl FnMut(usize, Option<usize>)) {
        let mut bo = 0usize;
        for by in 0..self.block_h {
            for bx in 0..self.block_w {
                for b in 0..self.batch {
                    for yb in 0..self.h_b {
                        let y = (yb * self.block_h + by).checked_sub(self.pad_top);
                        for xb in 0..self.w_b {
                            let x = (xb * self.block_w + bx).checked_sub(self.pad_left);
                            let so = match (y, x) {
                                (Some(y), Some(x)) if y < self.h && x < self.w => {
                                    Some(((b * self.h + y) * self.w + x) * self.c)
                                }
                                _ => None,
                            };
                            f(bo, so);
                            bo += self.c;
                        }
                    }
                }
            }
        }
    }

    /// SPACE_TO_BATCH_ND: `space` into the batched `output`, padding with `pad`.
    pub fn to_batch<T: Copy>(&self, space: &[T], pad: T, output: &mut [T]) {
        let c = self.c;
        self.for_each(|bo, so| {
            let Some(o) = output.get_mut(bo..bo + c) else {
                return;
            };
            match so.and_then(|s| space.get(s..s + c)) {
                Some(s) => o.copy_from_slice(s),
                None => o.fill(pad),
            }
        });
    }

    /// BATCH_TO_SPACE_ND: the batched `input` into `space`, dropping the crops.
    pub fn to_space<T: Copy>(&self, input: &[T], space: &mut [T]) {
        let c = self.c;
        self.for_each(|bo, so| {
            if let (Some(s), Some(i)) = (so, input.get(bo..bo + c)) {
                if let Some(o) = space.get_mut(s..s + c) {
                    o.copy_from_slice(i);
                }
            }
        });
    }
}

/// BROADCAST_ARGS: the shape `a` and `b` broadcast to (right-aligned, into `out`, of length
/// `max(a.len(), b.len())`), `None` when they do not broadcast.
pub fn broadcast_args(a: &[i64], b: &[i64], out: &mut [i64]) -> Option<()> {
    let n = out.len();
    if a.len() > n || b.len() > n {
        return None;
    }
    for (k, o) in out.iter_mut().enumerate() {
        let x = (k + a.len()).checked_sub(n).map_or(1, |i| a[i]);
        let y = (k + b.len()).checked_sub(n).map_or(1, |i| b[i]);
        *o = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn gather_nd_picks_slices_and_rejects_bad_indices() {
        // params [3, 2], indices [[2], [0]] -> rows 2 and 0.
        let p = [1, 2, 3, 4, 5, 6];
        let mut o = [0; 4];
        gather_nd(&p, &[3, 2], [2i64, 0].into_iter(), 1, 2, &mut o).unwrap();
        assert_eq!(o, [5, 6, 1, 2]);
        // Full-depth indices pick elements.
        let mut o = [0; 2];
        gather_nd(&p, &[3, 2], [1i64, 1, 2, 0].into_iter(), 2, 1, &mut o).unwrap();
        assert_eq!(o, [4, 5]);
        assert_eq!(
            gather_nd(&p, &[3, 2], [3i64].into_iter(), 1, 2, &mut [0; 2]),
            Err(3)
        );
        assert_eq!(
            gather_nd(&p, &[3, 2], [-1i64].into_iter(), 1, 2, &mut [0; 2]),
            Err(-1)
        );
    }

    #[test]
    fn dynamic_update_slice_clamps_the_start() {
        let operand = [0; 12]; // [3, 4]
        let mut o = [9; 12];
        dynamic_update_slice(
            &operand,
            &[3, 4],
            &[1, 2, 3, 4],
            &[2, 2],
            [5i64, -1].into_iter(),
            &mut o,
        );
        // Start clamped to (1, 0).
        assert_eq!(o, [0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0]);
    }

    #[test]
    fn space_to_batch_and_back() {
        // [1, 2, 3, 1] with block 2x2, padding top 0/bottom 0, left 1/right 0: w padded to 4.
        let g = SpaceBatch {
            batch: 1,
            h: 2,
            w: 3,
            c: 1,
            block_h: 2,
            block_w: 2,
            h_b: 1,
            w_b: 2,
            pad_top: 0,
            pad_left: 1,
        };
        let space: Vec<i32> = (1..=6).collect();
        let mut b = vec![0; 8];
        g.to_batch(&space, -1, &mut b);
        // Padded rows: [-1 1 2 3], [-1 4 5 6]; block (0,0): cols 0,2 of row 0.
        assert_eq!(b, [-1, 2, 1, 3, -1, 5, 4, 6]);
        let mut back = vec![0; 6];
        g.to_space(&b, &mut back);
        assert_eq!(back, space);
    }

    #[test]
    fn broadcast_args_right_aligns() {
        let mut o = [0; 3];
        broadcast_args(&[2, 1], &[3, 1, 5], &mut o).unwrap();
        assert_eq!(o, [3, 2, 5]);
        assert!(broadcast_args(&[2], &[3], &mut [0]).is_none());
    }
}
