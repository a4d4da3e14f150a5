//! Float 3x3 CONV_2D through Winograd F(2x2, 3x3) ([`WinoF32`]).

use super::*;

/// Tiles of one Winograd chunk: their transformed inputs and products (four positions each)
/// stay in L2 between the transforms and the GEMMs (12, 18, 24 and 36 ran the convnet equally
/// fast; fewer keep the scratch small).
pub(crate) const WINO_TILES: usize = 24;

/// Fewest 2x2 output tiles per image for which Winograd beats the direct convolution: it
/// builds its transformed weights on every call, which the tiles must amortize (measured on
/// 128 and 256 channels, single thread: 1.5x slower at 16 tiles, even at 25, 1.6x faster at 49).
pub const WINO_MIN_TILES: usize = 32;

/// Constant float weights of a 3x3, stride 1, dilation 1 CONV_2D for Winograd F(2x2, 3x3)
/// (AVX-512). A 2x2 output tile costs 16 multiply-adds per channel pair instead of 36;
/// transforms are additions (and halvings) only, so results stay within the float tolerance
/// of the direct convolution.
///
/// The nine taps `g[:, ky, kx, :]` are kept as they are, each packed for the float GEMM: as
/// many bytes as the file's weights. The transformed weights `U = G g Gᵀ` (16/9 of them) are
/// built at run time, one row of four positions at a time, into `4 * cin * cout` floats of
/// scratch: a linear combination of the packed taps, so they come out packed. Keeping all
/// sixteen instead would hold 7/9 of the weights more for the model's lifetime (1.2 MiB on a
/// convnet of 1.8 MiB of weights), for the ~1% of a layer's time the transform takes.
#[derive(Clone, Debug)]
pub struct WinoF32 {
    pub(crate) cin: usize,
    pub(crate) cout: usize,
    /// Tap `3 * ky + kx` in [`GemmF32`]'s packed layout (`cout` outputs, `cin` deep), at
    /// `tap * tap_len()`.
    pub(crate) taps: Vec<f32>,
    /// Bias padded to whole 16-channel panels.
    pub(crate) bias: Vec<f32>,
    /// The GEMMs' bias (the products have none; the output transform adds `bias`).
    pub(crate) zeros: Vec<f32>,
    pub(crate) act: Activation,
}

impl WinoF32 {
    /// `filter` is `[cout, 3, 3, cin]`. `None` unless the ISA is AVX-512 and both channel
    /// counts are large enough for the GEMMs to outweigh the transforms.
    pub fn pack(
        isa: Isa,
        filter: &[f32],
        cout: usize,
        cin: usize,
        bias: Option<&[f32]>,
        act: Activation,
    ) -> Option<WinoF32> {
        if isa != Isa::Avx512Vnni
            || !isa.available()
            || cin < 16
            || cout < 16
            || filter.len() != cout * 9 * cin
        {
            return None;
        }
        let tap_len = cout.div_ceil(NR_F32) * NR_F32 * cin;
        let mut taps = Vec::with_capacity(9 * tap_len);
        let mut w = vec![0f32; cout * cin];
        for tap in 0..9 {
            for (o, row) in w.chunks_exact_mut(cin).enumerate() {
                row.copy_from_slice(&filter[(o * 9 + tap) * cin..][..cin]);
            }
            let g = GemmF32::pack(isa, &w, cout, cin, None, Activation::None)?;
            debug_assert_eq!(g.b.len(), tap_len);
            taps.extend_from_slice(&g.b);
        }
        let mut bv = vec![0f32; cout.div_ceil(NR_F32) * NR_F32];
        if let Some(b) = bias {
            bv[..cout].copy_from_slice(&b[..cout]);
        }
        Some(WinoF32 {
            cin,
            cout,
            taps,
            zeros: vec![0f32; bv.len()],
            bias: bv,
            act,
        })
    }

    pub fn bytes(&self) -> usize {
        (self.taps.len() + self.bias.len() + self.zeros.len()) * 4
    }

    /// Floats of one packed tap: whole 16-channel panels, `cin` deep.
    fn tap_len(&self) -> usize {
        self.taps.len() / 9
    }

    /// f32 scratch of [`conv2d_wino_f32`]: one row of four positions' transformed weights,
    /// and a chunk's transformed inputs and products at those positions.
    pub fn scratch_f32(&self) -> usize {
        4 * (self.tap_len() + WINO_TILES * (self.cin + self.cout))
    }
}

/// Float CONV_2D (3x3, stride 1, dilation 1, groups 1) through [`WinoF32`]: output rows in
/// blocks of whole 2x2 tile rows per worker; per row `r` of the 4x4 transformed tile, its four
/// positions' weights are built, then the tiles go through in chunks of [`WINO_TILES`]: input
/// transform, four GEMMs, and the output transform's share of row `r` added to the output.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d_wino_f32(
    wf: &WinoF32,
    input: &[f32],
    in_shape: [usize; 4],
    p: &Conv2dParams,
    output: &mut [f32],
    out_shape: [usize; 4],
    workers: &mut Workers,
) {
    let [batches, in_h, in_w, in_c] = in_shape;
    let [_, out_h, out_w, out_c] = out_shape;
    assert!(in_c == wf.cin && out_c == wf.cout);
    let (cin, cout, len) = (wf.cin, wf.cout, wf.tap_len());
    let tw = out_w.div_ceil(2);
    let (xs_in, xs_out) = (WINO_TILES * cin, WINO_TILES * cout);
    for b in 0..batches {
        let inb = &input[b * in_h * in_w * cin..(b + 1) * in_h * in_w * cin];
        let outb = &mut output[b * out_h * out_w * cout..(b + 1) * out_h * out_w * cout];
        let work = out_h * out_w * cout * 9 * cin;
        for_row_blocks(
            out_h,
            2,
            out_w * cout,
            Work::GemmF32(work),
            outb,
            workers,
            |rows, o, s| {
                let (u, rest) = s.f32s[..wf.scratch_f32()].split_at_mut(4 * len);
                let (v, m) = rest.split_at_mut(4 * xs_in);
                let ty0 = rows.start / 2;
                let tiles = (rows.end.div_ceil(2) - ty0) * tw;
                #[cfg(not(target_arch = "x86_64"))]
                let _ = (&u, &v, &m, tiles, inb, p, len, xs_out);
                #[cfg(target_arch = "x86_64")]
                for r in 0..4 {
                    x86::wino_weights_f32(&wf.taps, len, r, u);
                    let mut t0 = 0;
                    while t0 < tiles {
                        let chunk = (tiles - t0).min(WINO_TILES);
                        x86::wino_input_f32(
                            inb,
                            [in_h, in_w, cin],
                            [p.pad_top, p.pad_left],
                            [tw, ty0],
                            t0..t0 + chunk,
                            r,
                            v,
                        );
                        for c in 0..4 {
                            // Positions (0 or 3, 0 or 3) are taps as they are.
                            let b = match (r % 3, c % 3) {
                                (0, 0) => &wf.taps[(2 * r + 2 * (c / 3)) * len..][..len],
                                _ => &u[c * len..(c + 1) * len],
                            };
                            gemm_packed_direct_f32_avx512(
                                b,
                                &wf.zeros,
                                cout,
                                cin,
                                Activation::None,
                                &v[c * cin..chunk * 4 * cin],
                                4 * cin,
                                0..chunk,
                                &mut m[c * xs_out..c * xs_out + chunk * cout],
                            );
                        }
                        x86::wino_output_f32(
                            m,
                            xs_out,
                            cout,
                            &wf.bias,
                            wf.act,
                            [out_w, tw, ty0],
                            rows.clone(),
                            t0..t0 + chunk,
                            r,
                            o,
                        );
                        t0 += chunk;
                    }
                }
                if wf.act == Activation::Tanh {
                    for v in o[..rows.len() * out_w * cout].iter_mut() {
                        *v = wf.act.apply(*v);
                    }
                }
            },
        );
    }
}
