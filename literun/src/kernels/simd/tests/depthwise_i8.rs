//! Int8 DEPTHWISE_CONV_2D through [`DwI8`] against the portable kernel.

use super::*;

/// The int8 depthwise kernel packed for `isa` against the portable one, bit for bit.
#[allow(clippy::too_many_arguments)]
fn check_depthwise_i8(
    isa: Isa,
    input: &[i8],
    is: [usize; 4],
    filter: &[i8],
    fs: [usize; 4],
    bias: &[i32],
    p: &DepthwiseParams,
    q: &OutputStage,
    os: [usize; 4],
    what: &str,
) {
    let c = is[3];
    let mut want = vec![0i8; os.iter().product()];
    let mut acc = vec![0i32; c];
    depthwise_conv::depthwise_conv2d_i8(
        input,
        is,
        filter,
        fs,
        Some(bias),
        p,
        q,
        &mut acc,
        &mut want,
        os,
    );
    let dw = DwI8::pack(isa, filter, fs[1] * fs[2], c, Some(bias), q).unwrap();
    let mut got = vec![0i8; want.len()];
    let mut s = scratch_for(0, dw.scratch_i32());
    depthwise_i8(&dw, input, is, [fs[1], fs[2]], p, &mut got, os, &mut s);
    assert_eq!(got, want, "{what} {p:?}");
}

fast_vs_portable! {
    fn depthwise_i8_matches_portable(seed 3, cases 60usize, isa, case, rng) {
        let (is, fs, os, p) = dw_case(&mut rng, case);
        let c = is[3];
        let input = rng.i8s(is.iter().product());
        let filter = rng.i8s(fs.iter().product());
        let bias: Vec<i32> = (0..c).map(|_| rng.u() as i32 >> 14).collect();
        let q = rng.stage(c, fs[1] * fs[2], false);
        let what = format!("{isa:?} case {case}: {is:?} {fs:?}");
        check_depthwise_i8(isa, &input, is, &filter, fs, &bias, &p, &q, os, &what);
    }
}

/// 3x3 windows (the AVX-512 ring kernel, without dilation): channel counts around the 16-,
/// 32- and 64-channel blocks, odd and even rows wider than a strip of `DW3_STRIP` units,
/// padding of 0-2 on every side (unequal), stride 1 and 2, right shifts only (the fused and
/// unsigned-product forms) or some left shifts, activation clamps, random input zero
/// points, biases near the i32 limits, several row blocks.
#[test]
fn depthwise3x3_i8_matches_portable() {
    let mut rng = Rng(7);
    let cs = [1, 8, 16, 24, 31, 32, 40, 64, 72, 136, 144, 200];
    for isa in isas() {
        for case in 0..72usize {
            let c = cs[case % cs.len()];
            let stride = if case % 5 == 4 { 2 } else { 1 };
            let (h, w) = (
                1 + rng.below(9),
                1 + rng.below(if case % 3 == 0 || case % 4 == 0 {
                    150
                } else {
                    20
                }),
            );
            let [pt, pl, pb, pr] = [0; 4].map(|_| rng.below(3));
            if h + pt + pb < 3 || w + pl + pr < 3 {
                continue;
            }
            let (oh, ow) = (
                (h + pt + pb - 3) / stride + 1,
                (w + pl + pr - 3) / stride + 1,
            );
            let p = DepthwiseParams {
                stride_h: stride,
                stride_w: stride,
                dilation_h: 1,
                dilation_w: 1,
                pad_top: pt,
                pad_left: pl,
                depth_multiplier: 1,
                activation: Activation::None,
            };
            let b = 1 + case % 2;
            let (is, fs, os) = ([b, h, w, c], [1, 3, 3, c], [b, oh, ow, c]);
            let input = rng.i8s(is.iter().product());
            let filter = rng.i8s(9 * c);
            // Some biases near the i32 limits: the unsigned-product form's bound fails for
            // some channels (then the whole stage takes Rq16) or holds near its edge.
            let big = case % 7 == 6;
            let bias: Vec<i32> = (0..c)
                .map(|_| match rng.u() as i32 {
                    // (Sums may wrap, as in the reference.)
                    b if big && b < 0 => i32::MIN + (b & 0xF_FFFF),
                    b if big => i32::MAX - (b & 0xF_FFFF),
                    b => b >> 14,
                })
                .collect();
            let mut q = rng.stage(c, 9, false);
            if case % 3 != 0 {
                // Right shifts only: the fused requantization.
                for ch in 0..c {
                    // With the big biases, multipliers near 2^31 and shifts to 17, for which
                    // the unsigned-product form fails its bound with large output offsets.
                    let top = if big && rng.below(2) == 0 {
                        999_999
                    } else {
                        rng.below(1000) * 1000
                    };
                    let real = (1.0 + top as f64 / 1e6) / 64.0;
                    let e = rng.below(if big { 12 } else { 6 });
                    let (m, sh) = quantize_multiplier(real / (1 << e) as f64);
                    (q.multipliers[ch], q.shifts[ch]) = (m, sh);
                }
            }
            let what = format!("{isa:?} case {case}: {is:?} {os:?}");
            check_depthwise_i8(isa, &input, is, &filter, fs, &bias, &p, &q, os, &what);
        }
    }
}
