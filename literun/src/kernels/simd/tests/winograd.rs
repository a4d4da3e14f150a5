//! Float 3x3 CONV_2D through [`WinoF32`] against the portable kernel.

use super::*;

fast_vs_portable! {
    /// Winograd F(2x2, 3x3) against the portable convolution: odd and even output sizes
    /// (partial tiles), padding 0-2 on each side (tiles reaching past every edge), output
    /// channels across partial and whole 64-channel groups, several chunks of tiles, two
    /// batches; on CPUs without AVX-512 `pack` declines.
    fn conv_wino_f32_matches_portable(seed 7, cases 40usize, isa, case, rng) {
        let (cin, cout) = (16 + rng.below(40), 16 + rng.below(140));
        let filter = rng.f32s(cout * 9 * cin);
        let bias = rng.f32s(cout);
        let act = [Activation::Relu6, Activation::None, Activation::Tanh][case % 3];
        let Some(wf) = WinoF32::pack(isa, &filter, cout, cin, Some(&bias), act) else {
            assert!(isa != Isa::Avx512Vnni);
            continue;
        };
        let (pt, pl, pb, pr) = (rng.below(3), rng.below(3), rng.below(3), rng.below(3));
        let h = (1 + rng.below(if case % 4 == 0 { 30 } else { 9 }))
            .max(3usize.saturating_sub(pt + pb));
        let w = (1 + rng.below(13)).max(3usize.saturating_sub(pl + pr));
        let (oh, ow) = (h + pt + pb - 2, w + pl + pr - 2);
        let is = [1 + case % 2, h, w, cin];
        let fs = [cout, 3, 3, cin];
        let os = [is[0], oh, ow, cout];
        let p = Conv2dParams {
            pad_top: pt,
            pad_left: pl,
            activation: act,
            ..Default::default()
        };
        let input = rng.f32s(is.iter().product());
        let mut want = vec![0f32; os.iter().product()];
        conv::conv2d_f32(&input, is, &filter, fs, Some(&bias), &p, &mut want, os);
        let one = || FastScratch {
            f32s: vec![0.0; wf.scratch_f32()],
            ..Default::default()
        };
        let mut s = Workers::new(vec![one(), one(), one()]);
        let mut got = vec![0f32; want.len()];
        conv2d_wino_f32(&wf, &input, is, &p, &mut got, os, &mut s);
        close(
            &got,
            &want,
            &format!("{isa:?} wino case {case} {is:?} {os:?} {p:?}"),
        );
    }
}
