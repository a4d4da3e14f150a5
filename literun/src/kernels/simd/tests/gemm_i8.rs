//! Int8 CONV_2D and FULLY_CONNECTED through [`GemmI8`] against the portable kernels.

use super::*;

fast_vs_portable! {
    fn conv_i8_matches_portable(seed 1, cases 60usize, isa, case, rng) {
        let k = [1, 1, 3, 3, 5, 2][case % 6];
        let (kh, kw) = if case.is_multiple_of(7) {
            (k, 1)
        } else {
            (k, k)
        };
        let stride = 1 + rng.below(2);
        let dil = if case.is_multiple_of(9) { 2 } else { 1 };
        let cin = 1 + rng.below(40);
        let cout = 1 + rng.below(70);
        let (h, w) = (kh * dil + rng.below(9), kw * dil + rng.below(9));
        let pad = if rng.below(2) == 0 {
            0
        } else {
            (kh - 1) * dil / 2
        };
        let oh = (h + 2 * pad - (kh - 1) * dil - 1) / stride + 1;
        let ow = (w + 2 * pad - (kw - 1) * dil - 1) / stride + 1;
        let batches = 1 + rng.below(2);
        let is = [batches, h, w, cin];
        let fs = [cout, kh, kw, cin];
        let os = [batches, oh, ow, cout];
        let p = Conv2dParams {
            stride_h: stride,
            stride_w: stride,
            dilation_h: dil,
            dilation_w: dil,
            pad_top: pad,
            pad_left: pad,
            activation: Activation::None,
        };
        check_conv_i8(isa, &mut rng, is, fs, os, &p, !case.is_multiple_of(5), case);
    }
}

fast_vs_portable! {
    fn conv_i8_few_channels_matches_portable(seed 5, cases 24usize, isa, case, rng) {
        // An image's stem (3x3 stride 2 over 1-4 channels: windows of at most 36 bytes,
        // gathered in one register with AVX-512) and layers of at most 16 output channels
        // (the narrow AVX-512 tile; AVX2's at most 8), on images whose windows run both inside
        // and over the edge.
        let cin = 1 + rng.below(4);
        let cout = [16, 8, 1 + rng.below(16)][case % 3];
        let (k, stride) = if case % 4 == 3 { (1, 1) } else { (3, 2) };
        let (h, w) = (k + rng.below(24), k + rng.below(24));
        let pad = if k == 3 { rng.below(2) } else { 0 };
        let oh = (h + 2 * pad - k) / stride + 1;
        let ow = (w + 2 * pad - k) / stride + 1;
        let p = Conv2dParams {
            stride_h: stride,
            stride_w: stride,
            dilation_h: 1,
            dilation_w: 1,
            pad_top: pad,
            pad_left: pad,
            activation: Activation::None,
        };
        let os = [1, oh, ow, cout];
        check_conv_i8(isa, &mut rng, [1, h, w, cin], [cout, k, k, cin], os, &p, case % 2 == 0, case);
    }
}

/// [`conv2d_i8`] through [`GemmI8`] on `isa` against the portable kernel, random values.
#[allow(clippy::too_many_arguments)]
fn check_conv_i8(
    isa: Isa,
    rng: &mut Rng,
    is: [usize; 4],
    fs: [usize; 4],
    os: [usize; 4],
    p: &Conv2dParams,
    with_bias: bool,
    case: usize,
) {
    let [cout, kh, kw, cin] = fs;
    let input = rng.i8s(is.iter().product());
    let filter = rng.i8s(fs.iter().product());
    let bias: Vec<i32> = (0..cout).map(|_| rng.u() as i32 >> 12).collect();
    let bias = with_bias.then_some(&bias[..]);
    let q = rng.stage(cout, kh * kw * cin, false);
    let mut want = vec![0i8; os.iter().product()];
    conv::conv2d_i8(&input, is, &filter, fs, bias, p, &q, &mut want, os);
    let kk = kh * kw * cin;
    let g = GemmI8::pack(isa, &filter, cout, kk, bias, &q).unwrap();
    let mut s = scratch_for(kk, g.scratch_i32());
    let mut got = vec![0i8; want.len()];
    conv2d_i8(&g, &input, is, fs, p, q.input_offset, &mut got, os, &mut s);
    assert_eq!(got, want, "{isa:?} case {case}: {is:?} {fs:?} {p:?}");
}

fast_vs_portable! {
    fn fully_connected_i8_matches_portable(seed 2, cases 40usize, isa, case, rng) {
        // Every third case one batch row with 120-420 channels: split over the workers by
        // output channels; every sixth (from the second) one row of at most 16 channels (the
        // narrow one-row tile, whose sums run in several chains). Up to 17 rows otherwise:
        // tiles of every height, and the last two tiles of rows evened out.
        let one_row = case.is_multiple_of(3);
        let narrow_row = case % 6 == 1;
        let b = if one_row || narrow_row {
            1
        } else {
            1 + rng.below(17)
        };
        let (k, n) = (1 + rng.below(300), 1 + rng.below(80));
        let n = if one_row {
            n + 120 + rng.below(220)
        } else if narrow_row {
            1 + n % 16
        } else {
            n
        };
        let input = rng.i8s(b * k);
        let weights = rng.i8s(n * k);
        let bias: Vec<i32> = (0..n).map(|_| rng.u() as i32 >> 10).collect();
        let q = rng.stage(n, k, case.is_multiple_of(2));
        let mut want = vec![0i8; b * n];
        fully_connected::fully_connected_i8(
            &input,
            b,
            k,
            &weights,
            n,
            Some(&bias),
            &q,
            &mut want,
        );
        let g = GemmI8::pack(isa, &weights, n, k, Some(&bias), &q).unwrap();
        for workers in 1..=4 {
            let mut s = workers_for(k, g.scratch_i32(), workers);
            let mut got = vec![0i8; b * n];
            fully_connected_i8(&g, &input, b, &mut got, &mut s);
            assert_eq!(got, want, "{isa:?} case {case}: b {b} k {k} n {n}, {workers} workers");
        }
    }
}

/// Few output pixels and many channels: split over the workers by blocks of output channels
/// (the tests' three), exact against the portable kernel.
#[test]
fn conv_i8_split_by_channels_matches_portable() {
    let mut rng = Rng(12);
    for isa in isas() {
        for (case, (k, stride, cin, cout, h)) in [
            (3, 1, 40, 200, 4),
            (1, 1, 64, 257, 3),
            (3, 2, 72, 136, 7),
            (1, 2, 24, 130, 7),
        ]
        .into_iter()
        .enumerate()
        {
            let pad = k / 2;
            let oh = (h + 2 * pad - k) / stride + 1;
            let p = Conv2dParams {
                stride_h: stride,
                stride_w: stride,
                pad_top: pad,
                pad_left: pad,
                activation: Activation::None,
                ..Default::default()
            };
            let (is, fs, os) = ([1, h, h, cin], [cout, k, k, cin], [1, oh, oh, cout]);
            check_conv_i8(isa, &mut rng, is, fs, os, &p, true, case);
        }
    }
}

fast_vs_portable! {
    /// The packed weights hold each weight where the layout says (channel `ch` of panel
    /// `ch / nr`, byte `t` of group `g` at `((p * groups + g) * nr + j) * kg + t`) and zeros
    /// elsewhere, for channel counts and lengths that leave partial panels and groups.
    fn packed_i8_weights_follow_the_layout(seed 11, cases 12usize, isa, case, rng) {
        let n = 1 + rng.below(70);
        let k = 1 + case * 3 + rng.below(9);
        let weights = rng.i8s(n * k);
        let q = rng.stage(n, k, true);
        let g = GemmI8::pack(isa, &weights, n, k, None, &q).expect("an int8 GEMM");
        let (nr, kg) = (isa.nr_i8(), isa.kg_i8());
        let mut want = vec![0i8; g.b.len()];
        for ch in 0..n {
            for kk in 0..k {
                let (p, j, grp, t) = (ch / nr, ch % nr, kk / kg, kk % kg);
                want[((p * g.groups + grp) * nr + j) * kg + t] = weights[ch * k + kk];
            }
        }
        assert_eq!(g.b, want, "{isa:?} n {n} k {k}");
    }
}

/// Whether the AMX blocks can run here; if not, says why (their tests then pass untested).
fn amx_here() -> bool {
    let ok = Isa::Avx512Amx.available();
    #[cfg(feature = "std")]
    if !ok {
        std::eprintln!(
            "no AMX-INT8 here, no tile permission, or no feature `amx`: the AMX GEMM is not tested"
        );
    }
    ok
}

/// Dense layers on AMX blocks against the VNNI tile and the portable kernel, bit-exact, over
/// rows, lengths and channels that leave partial tiles in every dimension (rows 1, 15-17,
/// 31-33, ...; `k` short of, at and past a step of 64; channels short of and past 16 and 32),
/// on one worker and on three (the tests' thresholds: 5 rows and up on the tiles, tails of
/// 1-4 rows on the VNNI tile).
#[test]
fn fully_connected_i8_amx_matches_vnni() {
    if !amx_here() {
        return;
    }
    let mut rng = Rng(21);
    for (case, &b) in [1, 2, 5, 15, 16, 17, 31, 32, 33, 36, 49, 70]
        .iter()
        .enumerate()
    {
        for &k in &[1, 3, 17, 63, 64, 65, 130, 300] {
            for &n in &[1, 15, 16, 17, 31, 32, 33, 70, 130] {
                let input = rng.i8s(b * k);
                let weights = rng.i8s(n * k);
                let bias: Vec<i32> = (0..n).map(|_| rng.u() as i32 >> 10).collect();
                let q = rng.stage(n, k, case.is_multiple_of(2));
                let mut want = vec![0i8; b * n];
                fully_connected::fully_connected_i8(
                    &input,
                    b,
                    k,
                    &weights,
                    n,
                    Some(&bias),
                    &q,
                    &mut want,
                );
                let amx = GemmI8::pack(Isa::Avx512Amx, &weights, n, k, Some(&bias), &q).unwrap();
                let vnni = GemmI8::pack(Isa::Avx512Vnni, &weights, n, k, Some(&bias), &q).unwrap();
                assert!(amx.amx && amx.isa == Isa::Avx512Vnni && !vnni.amx);
                for workers in [1, 3] {
                    for g in [&amx, &vnni] {
                        let mut s = workers_for(k, g.scratch_i32(), workers);
                        let mut got = vec![0i8; b * n];
                        fully_connected_i8(g, &input, b, &mut got, &mut s);
                        assert_eq!(
                            got, want,
                            "amx {}: b {b} k {k} n {n}, {workers} workers",
                            g.amx
                        );
                    }
                }
            }
        }
    }
}

/// Convolutions on AMX blocks (im2col rows gathered into whole steps of 64 bytes, 1x1 rows
/// read in place) against the portable kernel, bit-exact: 3-64 channels in (`k` from 3 to
/// 576), 1-70 out, outputs of 1 to ~100 pixels.
#[test]
fn conv_i8_amx_matches_portable() {
    if !amx_here() {
        return;
    }
    let mut rng = Rng(22);
    for case in 0..48usize {
        let k = [1, 3, 3, 7, 1, 3][case % 6];
        let stride = 1 + case % 2;
        let cin = [3, 16, 40, 64][case / 6 % 4];
        let cout = [8, 24, 64, 70, 1 + rng.below(40)][case % 5];
        let (h, w) = (k + rng.below(12), k + rng.below(12));
        let pad = if case.is_multiple_of(3) { 0 } else { k / 2 };
        let oh = (h + 2 * pad - k) / stride + 1;
        let ow = (w + 2 * pad - k) / stride + 1;
        let p = Conv2dParams {
            stride_h: stride,
            stride_w: stride,
            pad_top: pad,
            pad_left: pad,
            activation: Activation::None,
            ..Default::default()
        };
        let (is, fs, os) = ([1, h, w, cin], [cout, k, k, cin], [1, oh, ow, cout]);
        let g = GemmI8::pack(
            Isa::Avx512Amx,
            &rng.i8s(1),
            1,
            1,
            None,
            &rng.stage(1, 1, true),
        );
        assert!(g.is_some_and(|g| g.amx));
        check_conv_i8(
            Isa::Avx512Amx,
            &mut rng,
            is,
            fs,
            os,
            &p,
            case % 4 != 0,
            case,
        );
    }
}
