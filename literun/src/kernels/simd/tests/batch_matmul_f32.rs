use super::*;
use crate::kernels::batch_matmul::batch_matmul_f32 as portable;

fast_vs_portable! {
    #[cfg(all(feature = "ops-batch-matmul", feature = "ops-float"))]
    fn batch_matmul_f32_matches_portable(seed 31, cases 90, isa, case, rng) {
        if !has_batch_matmul_f32(isa) {
            continue;
        }
        let (m, k) = (1 + rng.below(20), 1 + rng.below(40));
        // Whole panels up to one AVX-512 group (read in place without adj_y), the AVX2 row
        // kernel's widths (multiples of 8 up to 64, odd and even row counts), or any width
        // up to two groups and a partial panel.
        let n = if case % 5 == 4 {
            16 * (1 + rng.below(4))
        } else if case % 5 == 3 {
            8 * (1 + rng.below(8))
        } else {
            1 + rng.below(150)
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
        let l = rng.f32s(ls.iter().product());
        let r = rng.f32s(rs.iter().product());
        let len: usize = os.iter().product();
        let (mut want, mut got) = (vec![0.0; len], vec![f32::NAN; len]);
        portable(&l, &ls, &r, &rs, adj_x, adj_y, &mut want, &os);
        let mut scratch = vec![f32::NAN; batch_matmul_f32_scratch(m, k, n, adj_x)];
        assert!(batch_matmul_f32(
            isa, &l, &ls, &r, &rs, adj_x, adj_y, &mut got, &os, &mut scratch
        ));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * (k as f32).sqrt().max(1.0),
                "{isa:?} {ls:?} x {rs:?} adj {adj_x} {adj_y}: [{i}] {g} vs {w}"
            );
        }
    }
}
