//! Numpy broadcasting of two operands: shapes, strides, and the walk over the output.

/// Largest rank the broadcasting kernels handle.
pub const MAX_DIMS: usize = 8;

/// The numpy broadcast of two shapes, `None` when incompatible or too high a rank.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<alloc::vec::Vec<usize>> {
    let rank = a.len().max(b.len());
    if rank > MAX_DIMS {
        return None;
    }
    let mut out = alloc::vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    Some(out)
}

/// Element strides (0 on broadcast dimensions) of `shape` read as `out` (right-aligned).
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> [usize; MAX_DIMS] {
    let mut s = [0usize; MAX_DIMS];
    let rank = out.len();
    let mut stride = 1usize;
    for i in (0..rank).rev() {
        if i + shape.len() < rank {
            break;
        }
        let d = shape[i + shape.len() - rank];
        s[i] = if d == 1 { 0 } else { stride };
        stride = stride.saturating_mul(d);
    }
    s
}

/// A precomputed broadcast of two operands to one output shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broadcast {
    rank: usize,
    out: [usize; MAX_DIMS],
    sa: [usize; MAX_DIMS],
    sb: [usize; MAX_DIMS],
    len_a: usize,
    len_b: usize,
    len_out: usize,
}

impl Broadcast {
    /// Plans `a (op) b`; `None` when the shapes do not broadcast or the rank exceeds [`MAX_DIMS`].
    pub fn new(a: &[usize], b: &[usize]) -> Option<Broadcast> {
        let out_shape = broadcast_shapes(a, b)?;
        let mut shape = out_shape.clone();
        if shape.is_empty() {
            shape.push(1);
        }
        let rank = shape.len();
        let mut out = [1usize; MAX_DIMS];
        out[..rank].copy_from_slice(&shape);
        let count = |s: &[usize]| s.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        Some(Broadcast {
            rank,
            out,
            sa: broadcast_strides(a, &shape),
            sb: broadcast_strides(b, &shape),
            len_a: count(a)?,
            len_b: count(b)?,
            len_out: count(&out_shape)?,
        })
    }

    /// Output element count.
    pub fn output_len(&self) -> usize {
        self.len_out
    }

    /// Calls `f(a_run, b_run, out_run)` on runs of the output that cover it in order, each
    /// operand's run a contiguous slice or one repeated value: the whole output when an operand
    /// is one value, else each innermost row, when that has at least `min_run` elements.
    /// `false` (nothing done) when the rows are shorter or the slice lengths do not match the
    /// planned shapes.
    pub fn apply_runs<T: Copy, U>(
        &self,
        a: &[T],
        b: &[T],
        out: &mut [U],
        min_run: usize,
        mut f: impl FnMut(Run<'_, T>, Run<'_, T>, &mut [U]),
    ) -> bool {
        if a.len() != self.len_a || b.len() != self.len_b || out.len() != self.len_out {
            return false;
        }
        if self.len_out == 0 {
            return true;
        }
        fn whole<T: Copy>(v: &[T], len: usize) -> Option<Run<'_, T>> {
            match v {
                [x] => Some(Run::Repeat(*x)),
                _ if v.len() == len => Some(Run::Slice(v)),
                _ => None,
            }
        }
        if let (Some(ra), Some(rb)) = (whole(a, out.len()), whole(b, out.len())) {
            f(ra, rb, out);
            return true;
        }
        let r = self.rank;
        let inner = self.out[r - 1];
        if inner < min_run {
            return false;
        }
        fn row<T: Copy>(v: &[T], at: usize, step: usize, len: usize) -> Option<Run<'_, T>> {
            if step == 0 {
                v.get(at).map(|&x| Run::Repeat(x))
            } else {
                v.get(at..at.checked_add(len)?).map(Run::Slice)
            }
        }
        let (ia, ib) = (self.sa[r - 1], self.sb[r - 1]);
        let mut idx = [0usize; MAX_DIMS];
        let (mut oa, mut ob) = (0usize, 0usize);
        for o in out.chunks_exact_mut(inner) {
            // Always in range for a plan's own shapes (the strides stay inside the operands).
            if let (Some(ra), Some(rb)) = (row(a, oa, ia, inner), row(b, ob, ib, inner)) {
                f(ra, rb, o);
            }
            let mut d = r - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                oa += self.sa[d];
                ob += self.sb[d];
                if idx[d] < self.out[d] {
                    break;
                }
                oa -= self.sa[d] * self.out[d];
                ob -= self.sb[d] * self.out[d];
                idx[d] = 0;
            }
        }
        true
    }

    /// `out[i] = f(a[..], b[..])` over the broadcast. Does nothing if the slice lengths do not
    /// match the planned shapes.
    pub fn apply<T: Copy, U>(&self, a: &[T], b: &[T], out: &mut [U], f: impl Fn(T, T) -> U) {
        if a.len() != self.len_a || b.len() != self.len_b || out.len() != self.len_out {
            return;
        }
        if self.len_out == 0 {
            return;
        }
        if a.len() == out.len() && b.len() == out.len() {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
            return;
        }
        if a.len() == out.len() && b.len() == 1 {
            let y = b[0];
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
            return;
        }
        if b.len() == out.len() && a.len() == 1 {
            let x = a[0];
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
            return;
        }
        let r = self.rank;
        let inner = self.out[r - 1];
        let (ia, ib) = (self.sa[r - 1], self.sb[r - 1]);
        let mut idx = [0usize; MAX_DIMS];
        let (mut oa, mut ob) = (0usize, 0usize);
        for row in out.chunks_exact_mut(inner) {
            for (k, o) in row.iter_mut().enumerate() {
                *o = f(a[oa + k * ia], b[ob + k * ib]);
            }
            let mut d = r - 1;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                oa += self.sa[d];
                ob += self.sb[d];
                if idx[d] < self.out[d] {
                    break;
                }
                oa -= self.sa[d] * self.out[d];
                ob -= self.sb[d] * self.out[d];
                idx[d] = 0;
            }
        }
    }
}

/// One operand's part of a run of the output ([`Broadcast::apply_runs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run<'a, T> {
    /// One value per output element.
    Slice(&'a [T]),
    /// The same value for every output element.
    Repeat(T),
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn broadcast_shapes_numpy() {
        assert_eq!(broadcast_shapes(&[2, 3], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast_shapes(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast_shapes(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[], &[]), Some(vec![]));
        assert_eq!(broadcast_shapes(&[2], &[3]), None);
        assert_eq!(broadcast_shapes(&[0, 1], &[1, 3]), Some(vec![0, 3]));
    }
}
