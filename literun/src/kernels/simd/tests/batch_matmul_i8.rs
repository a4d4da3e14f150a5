use super::*;
use crate::kernels::batch_matmul::{batch_matmul_i8 as portable, BmmI8Operands, BmmI8Scratch};

fast_vs_portable! {
    #[cfg(all(feature = "ops-batch-matmul", feature = "ops-int8"))]
    fn batch_matmul_i8_matches_portable(seed 37, cases 60, isa, case, rng) {
        let (m, k, n) = (1 + rng.below(20), 1 + rng.below(40), 1 + rng.below(70));
        let q = rng.stage(1, k, false);
        let Some(bmm) = BmmI8::new(isa, &q) else {
            continue;
        };
        let (adj_x, adj_y) = (case % 2 == 1, case % 4 >= 2);
        // Batch dims: none, equal, or one side broadcast.
        let (lb, rb): (Vec<usize>, Vec<usize>) = match case % 3 {
            0 => (vec![], vec![]),
            1 => (vec![2, 3], vec![2, 3]),
            _ => (vec![3, 2], vec![1]),
        };
        let mut ls = lb.clone();
        ls.extend(if adj_x { [k, m] } else { [m, k] });
        let mut rs = rb.clone();
        rs.extend(if adj_y { [n, k] } else { [k, n] });
        let batch = if lb.len() >= rb.len() { lb } else { rb };
        let mut os = batch;
        os.extend([m, n]);
        let l = rng.i8s(ls.iter().product());
        let r = rng.i8s(rs.iter().product());
        let rhs_offset = -((rng.u() >> 56) as i8 as i32);
        let len: usize = os.iter().product();
        let (ni8, ni32) = BmmI8Scratch::sizes(&ls, &rs, adj_x, adj_y);
        let (mut i8s, mut i32s) = (vec![0i8; ni8], vec![0i32; ni32]);
        let mut scratch = BmmI8Scratch { i8s: &mut i8s, sums: &mut i32s };
        let (mut want, mut got) = (vec![0i8; len], vec![0i8; len]);
        portable(&l, &ls, &r, &rs, adj_x, adj_y, rhs_offset, &q, &mut scratch, &mut want, &os);
        let operands = BmmI8Operands {
            lhs: &l,
            lhs_shape: &ls,
            rhs: &r,
            rhs_shape: &rs,
            adj_x,
            adj_y,
            lhs_offset: q.input_offset,
            rhs_offset,
        };
        batch_matmul_i8(&bmm, &operands, &mut scratch, &mut got, &os);
        assert_eq!(got, want, "{isa:?} {ls:?} x {rs:?} adj {adj_x} {adj_y}");
    }
}
