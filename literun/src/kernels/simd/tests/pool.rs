//! Int8 and float MAX_POOL_2D in vectors against the portable kernels: the same values, bit
//! for bit, split over the tests' three workers.

use super::*;
use crate::kernels::pool::{self as portable, Pool2dParams};

/// A random pooling: window 1-3 (sometimes 1x3), stride 1-2, padding or not, 1-2 batches,
/// up to 150 channels, and the activation `act`.
fn pool_case(
    rng: &mut Rng,
    case: usize,
    act: Activation,
) -> ([usize; 4], [usize; 4], Pool2dParams) {
    let (fh, fw) = if case % 5 == 4 {
        (1, 3)
    } else {
        (1 + rng.below(3), 1 + rng.below(3))
    };
    let stride = 1 + rng.below(2);
    let (pt, pl) = if case.is_multiple_of(2) {
        (fh / 2, fw / 2)
    } else {
        (0, 0)
    };
    let (h, w) = (fh + rng.below(9), fw + rng.below(9));
    let oh = (h + 2 * pt - fh) / stride + 1;
    let ow = (w + 2 * pl - fw) / stride + 1;
    let (b, c) = (1 + case % 2, 1 + rng.below(150));
    let p = Pool2dParams {
        filter_h: fh,
        filter_w: fw,
        stride_h: stride,
        stride_w: stride,
        pad_top: pt,
        pad_left: pl,
        activation: act,
    };
    ([b, h, w, c], [b, oh, ow, c], p)
}

fast_vs_portable! {
    fn max_pool_i8_matches_portable(seed 13, cases 40usize, isa, case, rng) {
        let (is, os, p) = pool_case(&mut rng, case, Activation::None);
        let (act_min, act_max) = [(-128, 127), (-20, 90), (0, 127)][case % 3];
        let input = rng.i8s(is.iter().product());
        let mut want = vec![0i8; os.iter().product()];
        portable::pool_quantized(true, &input, is, &p, act_min, act_max, &mut want, os);
        let mut got = vec![0i8; want.len()];
        let bounds = pool_bounds_i8(act_min, act_max);
        max_pool(isa, &input, is, &p, bounds, &mut got, os, &mut scratch_for(1, 1));
        assert_eq!(got, want, "{isa:?} case {case}: {is:?} {p:?}");
    }
}

fast_vs_portable! {
    fn max_pool_f32_matches_portable(seed 14, cases 40usize, isa, case, rng) {
        let act = [Activation::None, Activation::Relu, Activation::Relu6][case % 3];
        let (is, os, p) = pool_case(&mut rng, case, act);
        let mut input = rng.f32s(is.iter().product());
        // A few NaNs and negative zeros: skipped and kept as the portable select does.
        for i in (0..input.len()).step_by(37) {
            input[i] = if i % 2 == 0 { f32::NAN } else { -0.0 };
        }
        let mut want = vec![0f32; os.iter().product()];
        portable::max_pool_f32(&input, is, &p, &mut want, os);
        let mut got = vec![0f32; want.len()];
        max_pool(isa, &input, is, &p, act, &mut got, os, &mut scratch_for(1, 1));
        let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{isa:?} case {case}: {is:?} {p:?}");
    }
}
