//! Float CONV_2D and FULLY_CONNECTED through [`GemmF32`] against the portable kernels.

use super::*;

/// The activations a float convolution or dense layer fuses.
const FUSED_ACTIVATIONS: [Activation; 5] = [
    Activation::None,
    Activation::Relu,
    Activation::Relu6,
    Activation::ReluN1To1,
    Activation::Tanh,
];

/// A float convolution of random input, filter and bias (`fs`, `p`) through the packed
/// kernel for `isa`, against the portable one, compared by `cmp` (`close` or `close_abs`).
#[allow(clippy::too_many_arguments)]
fn check_conv_f32(
    rng: &mut Rng,
    isa: Isa,
    is: [usize; 4],
    fs: [usize; 4],
    os: [usize; 4],
    p: &Conv2dParams,
    cmp: fn(&[f32], &[f32], &str),
    what: &str,
) {
    let input = rng.f32s(is.iter().product());
    let filter = rng.f32s(fs.iter().product());
    let bias = rng.f32s(fs[0]);
    let mut want = vec![0f32; os.iter().product()];
    conv::conv2d_f32(&input, is, &filter, fs, Some(&bias), p, &mut want, os);
    let kk = fs[1] * fs[2] * fs[3];
    let g = GemmF32::pack(isa, &filter, fs[0], kk, Some(&bias), p.activation).unwrap();
    let mut s = scratch_for(kk, 8);
    let mut got = vec![0f32; want.len()];
    conv2d_f32(&g, &input, is, fs, p, &mut got, os, &mut s);
    cmp(&got, &want, &format!("{isa:?} {what} {is:?} {fs:?} {p:?}"));
}

/// A dense layer (`b` rows of `k`, `n` outputs, with a bias or without) of random values
/// through the packed kernel for `isa`, against the portable one, compared by `cmp`.
#[allow(clippy::too_many_arguments)]
fn check_fc_f32(
    rng: &mut Rng,
    isa: Isa,
    [b, k, n]: [usize; 3],
    with_bias: bool,
    act: Activation,
    cmp: fn(&[f32], &[f32], &str),
    what: &str,
) {
    let x = rng.f32s(b * k);
    let wts = rng.f32s(n * k);
    let bias = with_bias.then(|| rng.f32s(n));
    let mut want = vec![0f32; b * n];
    let bias = bias.as_deref();
    fully_connected::fully_connected_f32(&x, b, k, &wts, n, bias, act, &mut want);
    let g = GemmF32::pack(isa, &wts, n, k, bias, act).unwrap();
    let mut s = scratch_for(k, 8);
    let mut got = vec![0f32; b * n];
    fully_connected_f32(&g, &x, b, &mut got, &mut s);
    cmp(&got, &want, &format!("{isa:?} {what} {b}x{k}x{n}"));
}

fast_vs_portable! {
    fn conv_and_fc_f32_match_portable(seed 4, cases 40usize, isa, case, rng) {
        let k = [1, 3, 1, 5, 2][case % 5];
        let stride = 1 + rng.below(2);
        let (cin, cout) = (1 + rng.below(30), 1 + rng.below(40));
        let (h, w) = (k + rng.below(8), k + rng.below(8));
        let pad = if case.is_multiple_of(2) { 0 } else { k / 2 };
        let oh = (h + 2 * pad - k) / stride + 1;
        let ow = (w + 2 * pad - k) / stride + 1;
        let is = [1 + case % 2, h, w, cin];
        let fs = [cout, k, k, cin];
        let os = [is[0], oh, ow, cout];
        let act = FUSED_ACTIVATIONS[case % 5];
        let p = Conv2dParams {
            stride_h: stride,
            stride_w: stride,
            pad_top: pad,
            pad_left: pad,
            activation: act,
            ..Default::default()
        };
        let what = format!("conv case {case}");
        check_conv_f32(&mut rng, isa, is, fs, os, &p, close, &what);
        let kk = k * k * cin;

        let (b, n) = (1 + rng.below(7), 1 + rng.below(50) + case % 2 * 100);
        let what = format!("fc case {case}");
        check_fc_f32(&mut rng, isa, [b, kk, n], false, act, close, &what);
    }
}

fast_vs_portable! {
    /// Float convolutions on the shapes the AVX-512 path reads in place or gathers: kernel
    /// height and width apart, dilation, strides up to 3, top/left padding up to the kernel
    /// size (rows and columns wholly in the padding) with any implied bottom/right padding,
    /// channel counts across one to several 64-channel groups with a partial last panel, and
    /// kernels taller than the in-place limit.
    fn conv_f32_windows_match_portable(seed 6, cases 60usize, isa, case, rng) {
        let tall = case % 20 == 19;
        let kh = if tall {
            MAX_SEGS_F32 + 1
        } else {
            1 + rng.below(5)
        };
        let kw = 1 + rng.below(5);
        let (dh, dw) = (1 + rng.below(2), 1 + (case % 3) / 2);
        let (sh, sw) = (1 + rng.below(3), 1 + rng.below(3));
        let (pt, pl) = (rng.below(kh + 1), rng.below(kw + 1));
        let (pb, pr) = (rng.below(kh + 1), rng.below(kw + 1));
        let (ekh, ekw) = ((kh - 1) * dh + 1, (kw - 1) * dw + 1);
        let h = (ekh + rng.below(9)).saturating_sub(pt + pb).max(1);
        let w = (ekw + rng.below(9)).saturating_sub(pl + pr).max(1);
        if h + pt + pb < ekh || w + pl + pr < ekw {
            continue;
        }
        let oh = (h + pt + pb - ekh) / sh + 1;
        let ow = (w + pl + pr - ekw) / sw + 1;
        let cin = 1 + rng.below(20);
        let cout = [
            1 + rng.below(16),
            17 + rng.below(60),
            64,
            65 + rng.below(90),
        ][case % 4];
        let is = [1 + case % 2, h, w, cin];
        let fs = [cout, kh, kw, cin];
        let os = [is[0], oh, ow, cout];
        let act = [Activation::Relu6, Activation::None, Activation::Tanh][case % 3];
        let p = Conv2dParams {
            stride_h: sh,
            stride_w: sw,
            dilation_h: dh,
            dilation_w: dw,
            pad_top: pt,
            pad_left: pl,
            activation: act,
        };
        let what = format!("conv case {case}");
        check_conv_f32(&mut rng, isa, is, fs, os, &p, close, &what);
    }
}

/// Float convolutions and dense layers through the strided AVX-512 path: outputs wide
/// enough for several tall tiles and a remainder (rows not a multiple of any tile
/// height), output channels around one and two panels and beyond, small odd reduction
/// sizes, padding on every side (pixels gathered at the left and right edges, kernel rows
/// skipped at the top and bottom), strides 1 and 2, two batches, every activation.
#[test]
fn conv_f32_strided_matches_portable() {
    let mut rng = Rng(8);
    let acts = [
        Activation::None,
        Activation::Relu,
        Activation::Relu6,
        Activation::ReluN1To1,
        Activation::Tanh,
    ];
    for isa in isas() {
        for case in 0..80usize {
            let cout = [1, 8, 16, 17, 24, 32, 33, 48, 70][case % 9];
            let act = acts[case % 5];
            let (kh, kw) = (1 + rng.below(3), 1 + rng.below(3));
            let (sh, sw) = (1 + rng.below(2), 1 + rng.below(2));
            let (pt, pl) = (rng.below(kh), rng.below(kw));
            let (pb, pr) = (rng.below(kh), rng.below(kw));
            let h = kh + rng.below(6);
            let w = kw + rng.below(60);
            let oh = (h + pt + pb - kh) / sh + 1;
            let ow = (w + pl + pr - kw) / sw + 1;
            let cin = 1 + rng.below(5);
            let is = [1 + case % 2, h, w, cin];
            let fs = [cout, kh, kw, cin];
            let os = [is[0], oh, ow, cout];
            let p = Conv2dParams {
                stride_h: sh,
                stride_w: sw,
                pad_top: pt,
                pad_left: pl,
                activation: act,
                ..Default::default()
            };
            let what = format!("conv case {case}");
            check_conv_f32(&mut rng, isa, is, fs, os, &p, close_abs, &what);

            // Dense rows (the 1x1 path) at a stride of k.
            let (b, k) = (1 + rng.below(40), 1 + rng.below(40));
            let what = format!("fc case {case}");
            check_fc_f32(&mut rng, isa, [b, k, cout], true, act, close_abs, &what);
        }
    }
}

fast_vs_portable! {
    /// Float convolutions of up to two panels whose windows the AVX2 tile reads in place
    /// (kernel rows as segments at a fixed stride): kernel heights 1 to 8 (7 is the in-place
    /// limit), dilation down the rows, strides 1 to 3, padding on every side (edge pixels
    /// gathered, kernel rows above and below the input skipped), output rows whose runs are
    /// not a multiple of the 6-row tile, 1 to 33 output channels (the 8-channel tile, one and
    /// two panels, and one beyond), three workers splitting the rows mid-row.
    fn conv_f32_in_place_rows_match_portable(seed 12, cases 48usize, isa, case, rng) {
        let (kh, kw) = (1 + case % 8, 1 + rng.below(4));
        let dh = 1 + rng.below(2);
        let (sh, sw) = (1 + rng.below(3), 1 + rng.below(3));
        let (pt, pl) = (rng.below(kh), rng.below(kw));
        let (pb, pr) = (rng.below(kh), rng.below(kw));
        let ekh = (kh - 1) * dh + 1;
        let h = (ekh + rng.below(5)).saturating_sub(pt + pb).max(1);
        let w = kw + rng.below(40);
        if h + pt + pb < ekh {
            continue;
        }
        let oh = (h + pt + pb - ekh) / sh + 1;
        let ow = (w + pl + pr - kw) / sw + 1;
        let cin = 1 + rng.below(6);
        let cout = [3, 8, 9, 16, 17, 32, 33][case % 7];
        let is = [1 + case % 2, h, w, cin];
        let fs = [cout, kh, kw, cin];
        let os = [is[0], oh, ow, cout];
        let act = [Activation::Relu6, Activation::None, Activation::Tanh][case % 3];
        let p = Conv2dParams {
            stride_h: sh,
            stride_w: sw,
            dilation_h: dh,
            pad_top: pt,
            pad_left: pl,
            activation: act,
            ..Default::default()
        };
        let what = format!("conv case {case}");
        check_conv_f32(&mut rng, isa, is, fs, os, &p, close, &what);
    }
}

/// MobileNetV2's stem: 3x3 stride 2 over 3 channels to 16 (and to 8), with the padding of
/// TFLite's SAME (right and bottom only) and of ONNX's symmetric one.
#[test]
fn conv_f32_stem_matches_portable() {
    let mut rng = Rng(13);
    for isa in isas() {
        for (pad, cout) in [(0, 16), (1, 16), (1, 8)] {
            let (h, w) = (26, 30);
            let (oh, ow) = (h / 2, w / 2);
            let p = Conv2dParams {
                stride_h: 2,
                stride_w: 2,
                pad_top: pad,
                pad_left: pad,
                activation: Activation::Relu6,
                ..Default::default()
            };
            let (is, fs, os) = ([1, h, w, 3], [cout, 3, 3, 3], [1, oh, ow, cout]);
            let what = format!("stem pad {pad}");
            check_conv_f32(&mut rng, isa, is, fs, os, &p, close, &what);
        }
    }
}

fast_vs_portable! {
    /// A dense layer with one batch row splits its output channels over 1 to 4 workers: the
    /// same bits as the unsplit GEMM, and close to the portable kernel.
    fn fc_f32_one_row_split_by_channels(seed 9, cases 12usize, isa, case, rng) {
        let n = [2 * COLS_F32, 2 * COLS_F32 + 1, 200, 257, 1000, 3 * COLS_F32 + 17][case % 6];
        let k = 1 + rng.below(300);
        let act = [Activation::None, Activation::Relu6, Activation::Tanh][case % 3];
        let x = rng.f32s(k);
        let wts = rng.f32s(n * k);
        let bias = rng.f32s(n);
        let g = GemmF32::pack(isa, &wts, n, k, Some(&bias), act).unwrap();
        let mut unsplit = vec![0f32; n];
        let rows = Rows::Direct { data: &x, stride: k };
        g.run(0..1, &rows, &mut vec![0f32; (MR_F32 + 1) * k], &mut unsplit);
        let mut want = vec![0f32; n];
        fully_connected::fully_connected_f32(&x, 1, k, &wts, n, Some(&bias), act, &mut want);
        close(&unsplit, &want, &format!("{isa:?} fc 1x{k}x{n}"));
        for workers in 1..=4 {
            let mut got = vec![0f32; n];
            fully_connected_f32(&g, &x, 1, &mut got, &mut workers_for(k, 8, workers));
            let same = got.iter().zip(&unsplit).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{isa:?} fc 1x{k}x{n} {act:?} on {workers} workers");
        }
    }
}

/// Weights above L2's share (`GATHERED_SWEEP_BYTES`) with more than one row block: the
/// gathered path sweeps them one group of channels at a time, gathering every block's rows
/// again for each group (ResNet18's last layers).
#[test]
fn conv_f32_large_weights_sweep_by_channel_groups() {
    let mut rng = Rng(10);
    for isa in isas() {
        // 3x3 over 232 channels to 136 (1.1 MB of weights, a narrower last group), stride 1
        // and 2, 5x6 and 3x4 outputs: rows at the edges gathered, inner ones in place.
        for (stride, pad) in [(1, 1), (2, 1), (1, 0)] {
            let (h, w, cin, cout) = (5, 6, 232, 136);
            let oh = (h + 2 * pad - 3) / stride + 1;
            let ow = (w + 2 * pad - 3) / stride + 1;
            let p = Conv2dParams {
                stride_h: stride,
                stride_w: stride,
                pad_top: pad,
                pad_left: pad,
                activation: Activation::Relu,
                ..Default::default()
            };
            let (is, fs, os) = ([1, h, w, cin], [cout, 3, 3, cin], [1, oh, ow, cout]);
            let what = format!("stride {stride} pad {pad}");
            check_conv_f32(&mut rng, isa, is, fs, os, &p, close_abs, &what);
        }
    }
}

/// A convolution with few output pixels and many channels (ResNet18's last layers, in small)
/// splits over 2 to 4 workers by blocks of output channels: every value as on one worker, bit
/// for bit, through the direct (1x1) and gathered paths, in the sweep by channel groups too.
#[test]
fn conv_f32_split_by_channels_matches_one_worker() {
    let mut rng = Rng(11);
    for isa in isas() {
        for (k, stride, cin, cout, h) in [
            (3, 1, 40, 200, 4),
            (1, 1, 64, 257, 3),
            (3, 2, 232, 136, 7),
            (1, 2, 24, 130, 7),
        ] {
            let pad = k / 2;
            let oh = (h + 2 * pad - k) / stride + 1;
            let p = Conv2dParams {
                stride_h: stride,
                stride_w: stride,
                pad_top: pad,
                pad_left: pad,
                activation: Activation::Relu6,
                ..Default::default()
            };
            let (is, fs, os) = ([1, h, h, cin], [cout, k, k, cin], [1, oh, oh, cout]);
            let input = rng.f32s(is.iter().product());
            let filter = rng.f32s(fs.iter().product());
            let bias = rng.f32s(cout);
            let kk = k * k * cin;
            let g = GemmF32::pack(isa, &filter, cout, kk, Some(&bias), p.activation).unwrap();
            let mut one = vec![0f32; os.iter().product()];
            conv2d_f32(
                &g,
                &input,
                is,
                fs,
                &p,
                &mut one,
                os,
                &mut workers_for(kk, 8, 1),
            );
            for workers in 2..=4 {
                let mut got = vec![0f32; one.len()];
                conv2d_f32(
                    &g,
                    &input,
                    is,
                    fs,
                    &p,
                    &mut got,
                    os,
                    &mut workers_for(kk, 8, workers),
                );
                let same = got
                    .iter()
                    .zip(&one)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{isa:?} {is:?} {fs:?} on {workers} workers");
            }
        }
    }
}

fast_vs_portable! {
    /// 1x1 float convolutions of few input channels over many pixels (with AVX2 one loop over
    /// every tile of the call): pixel counts that are not a multiple of the 6-row tile, 5 to
    /// 56 output channels (the 8-channel tile for the layer or its last panel, whole and
    /// partial panels), every activation.
    fn conv_f32_pointwise_few_channels_match_portable(seed 12, cases 30usize, isa, case, rng) {
        let cin = [1, 3, 8, 16, 24][case % 5];
        let cout = [8, 16, 48, 5, 50, 33, 24, 56][case % 8];
        let (h, w) = (1 + rng.below(9), 1 + rng.below(13));
        let act = FUSED_ACTIVATIONS[case % 5];
        let p = Conv2dParams {
            activation: act,
            ..Default::default()
        };
        let (is, fs, os) = ([1, h, w, cin], [cout, 1, 1, cin], [1, h, w, cout]);
        let what = format!("pointwise case {case}");
        check_conv_f32(&mut rng, isa, is, fs, os, &p, close, &what);
    }
}

fast_vs_portable! {
    /// The packed weights hold each weight where the layout says (channel `p * 16 + j`'s
    /// weight `kk` at `g0 * k * 16 + (kk * width + p - g0) * 16 + j`, AVX-512 interleaving
    /// groups of [`GROUP_F32`] panels) and zeros elsewhere, with partial panels and groups.
    fn packed_f32_weights_follow_the_layout(seed 13, cases 12usize, isa, case, rng) {
        let n = 1 + rng.below(150);
        let k = 1 + case * 5 + rng.below(7);
        let weights = rng.f32s(n * k);
        let g = GemmF32::pack(isa, &weights, n, k, None, Activation::None).expect("a float GEMM");
        let panels = n.div_ceil(NR_F32);
        let group = if isa == Isa::Avx512Vnni { GROUP_F32 } else { 1 };
        let mut want = vec![0f32; panels * k * NR_F32];
        for ch in 0..n {
            let (p, j) = (ch / NR_F32, ch % NR_F32);
            let g0 = p / group * group;
            let width = (panels - g0).min(group);
            for kk in 0..k {
                want[g0 * k * NR_F32 + (kk * width + p - g0) * NR_F32 + j] = weights[ch * k + kk];
            }
        }
        assert!(
            g.b.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()) && g.b.len() == want.len(),
            "{isa:?} n {n} k {k}"
        );
    }
}

fast_vs_portable! {
    /// 1x1 float convolutions of a few pixels with weights bigger than L1 (MobileNetV2's last
    /// layers; with AVX2 each panel then goes through every row block before the next): row
    /// counts over one 6-row block, whole last panels, partial ones of 9-15 and of at most 8
    /// channels, every activation.
    fn conv_f32_pointwise_large_weights_match_portable(seed 13, cases 5usize, isa, case, rng) {
        let (h, w, cin, cout) = [(3, 3, 112, 1280), (2, 4, 64, 140), (3, 3, 96, 136), (1, 7, 300, 40), (3, 4, 72, 200)][case];
        let p = Conv2dParams {
            activation: FUSED_ACTIVATIONS[case % 5],
            ..Default::default()
        };
        let (is, fs, os) = ([1, h, w, cin], [cout, 1, 1, cin], [1, h, w, cout]);
        let what = format!("pointwise large weights case {case}");
        check_conv_f32(&mut rng, isa, is, fs, os, &p, close, &what);
    }
}
