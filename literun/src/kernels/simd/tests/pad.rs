//! Constant padding by output rows against the portable kernel.

use super::*;
use crate::kernels::shape_ops::pad;

/// Ranks 2 to 5, every dimension but the innermost padded (or not) before and after, split
/// over the tests' three workers: the portable kernel's output; a padded innermost dimension
/// is left to the portable kernel.
#[test]
fn pad_rows_matches_portable() {
    let mut rng = Rng(16);
    for case in 0..200 {
        let rank = 2 + case % 4;
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(5)).collect();
        let mut before: Vec<usize> = (0..rank).map(|_| rng.below(3)).collect();
        let mut after: Vec<usize> = (0..rank).map(|_| rng.below(3)).collect();
        let inner_padded = case % 7 == 6;
        if !inner_padded {
            (before[rank - 1], after[rank - 1]) = (0, 0);
        }
        let input: Vec<u32> = (0..shape.iter().product::<usize>())
            .map(|_| rng.u() as u32)
            .collect();
        let out_len: usize = (0..rank).map(|d| shape[d] + before[d] + after[d]).product();
        let mut want = vec![0u32; out_len];
        pad(&input, &shape, &before, &after, 7, &mut want);
        let mut got = vec![1u32; out_len];
        let done = pad_rows(
            &input,
            &shape,
            &before,
            &after,
            7,
            &mut got,
            &mut scratch_for(1, 1),
        );
        if inner_padded && (before[rank - 1] > 0 || after[rank - 1] > 0) {
            assert!(!done, "case {case}");
            continue;
        }
        assert!(done, "case {case}");
        assert_eq!(got, want, "case {case}: {shape:?} {before:?} {after:?}");
    }
}
