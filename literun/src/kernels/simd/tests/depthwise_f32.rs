//! Float DEPTHWISE_CONV_2D through [`DwF32`] against the portable kernel.

use super::*;

fast_vs_portable! {
    fn depthwise_f32_matches_portable(seed 5, cases 40usize, isa, case, rng) {
        let (is, fs, os, p) = dw_case(&mut rng, case);
        let label = format!("{isa:?} dw case {case}");
        check(isa, &mut rng, is, [fs[1], fs[2]], os, &p, &[3], &label);
    }
}

fast_vs_portable! {
    /// The 3x3 float paths (no dilation) on small and odd shapes: inputs down to 1x1, every
    /// stride pair of 1 and 2, padding 0-1 on each side, channel tails, output widths not a
    /// multiple of the strip, batches, rows split over workers.
    fn depthwise3x3_f32_matches_portable(seed 23, cases 300usize, isa, case, rng) {
        let (sh, sw) = [(1, 1), (2, 2), (1, 2), (2, 1)][case % 4];
        let (pt, pl) = (rng.below(2), rng.below(2));
        let (pb, pr) = (rng.below(2), rng.below(2));
        let wide = if case % 7 == 6 { 40 } else { 9 };
        // Padded sizes of at least 3 (one window); a few inputs above 2 MiB (the
        // stride-2 kernel's pass length for inputs beyond L2) and a few stride-1 ones
        // above 1 MiB (x86's column walk; smaller ones go by bands).
        let big = case % 75 == 74;
        let cols = case % 50 == 12 && (sh, sw) == (1, 1);
        let (h, w, c) = if big {
            (90 + rng.below(20), 90 + rng.below(20), 70 + rng.below(20))
        } else if cols {
            (40 + rng.below(9), 40 + rng.below(9), 170 + rng.below(30))
        } else {
            (
                (1 + rng.below(12)).max(3 - pt - pb),
                (1 + rng.below(wide)).max(3 - pl - pr),
                1 + rng.below(if case % 5 == 0 { 70 } else { 40 }),
            )
        };
        let b = 1 + rng.below(3) * (case % 3 == 0) as usize;
        let (oh, ow) = ((h + pt + pb - 3) / sh + 1, (w + pl + pr - 3) / sw + 1);
        let p = DepthwiseParams {
            stride_h: sh,
            stride_w: sw,
            dilation_h: 1,
            dilation_w: 1,
            pad_top: pt,
            pad_left: pl,
            depth_multiplier: 1,
            activation: [Activation::None, Activation::Relu6, Activation::Relu][case % 3],
        };
        let (is, os) = ([b, h, w, c], [b, oh, ow, c]);
        // One worker and three (rows split).
        let label = format!("{isa:?} dw3x3 case {case} {is:?} {os:?} {p:?}");
        check(isa, &mut rng, is, [3, 3], os, &p, &[1, 3], &label);
    }
}

/// A float depthwise layer of random values with a `kernel` window through the fast path `isa`
/// selects, on each worker count of `workers`, against the portable kernel.
#[allow(clippy::too_many_arguments)]
fn check(
    isa: Isa,
    rng: &mut Rng,
    is: [usize; 4],
    [kh, kw]: [usize; 2],
    os: [usize; 4],
    p: &DepthwiseParams,
    workers: &[usize],
    label: &str,
) {
    let c = is[3];
    let input = rng.f32s(is.iter().product());
    let filter = rng.f32s(kh * kw * c);
    let bias = rng.f32s(c);
    let mut want = vec![0f32; os.iter().product()];
    depthwise_conv::depthwise_conv2d_f32(
        &input,
        is,
        &filter,
        [1, kh, kw, c],
        Some(&bias),
        p,
        &mut want,
        os,
    );
    let dw = DwF32::pack(isa, &filter, kh * kw, c, Some(&bias), p.activation).unwrap();
    for &n in workers {
        let mut got = vec![f32::NAN; want.len()];
        let mut s = workers_for(0, 0, n);
        depthwise_f32(&dw, &input, is, [kh, kw], p, &mut got, os, &mut s);
        close(&got, &want, label);
    }
}

/// Every run length from 1 to 11 pixels (the 3x3 run kernel's groups of four, two and one
/// pixel and their remainders) and channel counts around the edge-pixel kernel's 32-, 16- and
/// 8-channel steps, with stride 1 and 2 and padding 0 or 1 on each side: the 3x3 float paths
/// against the portable kernel.
#[test]
fn depthwise3x3_f32_run_lengths_and_channel_steps() {
    let mut rng = Rng(41);
    for isa in isas() {
        for c in [1, 7, 8, 9, 16, 17, 24, 31, 32, 33, 40, 48, 56, 64, 71] {
            for w in 3..=13 {
                for (s, pad) in [(1, 0), (1, 1), (2, 0), (2, 1)] {
                    let h = 4;
                    let (oh, ow) = ((h + 2 * pad - 3) / s + 1, (w + 2 * pad - 3) / s + 1);
                    let p = DepthwiseParams {
                        stride_h: s,
                        stride_w: s,
                        dilation_h: 1,
                        dilation_w: 1,
                        pad_top: pad,
                        pad_left: pad,
                        depth_multiplier: 1,
                        activation: [Activation::None, Activation::Relu6][w % 2],
                    };
                    let (is, os) = ([1, h, w, c], [1, oh, ow, c]);
                    let label = format!("{isa:?} c {c} w {w} stride {s} pad {pad}");
                    check(isa, &mut rng, is, [3, 3], os, &p, &[1], &label);
                }
            }
        }
    }
}
