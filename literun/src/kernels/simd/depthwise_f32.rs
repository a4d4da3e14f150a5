//! Float DEPTHWISE_CONV_2D (depth multiplier 1) over packed weights ([`DwF32`]).

use super::*;

/// Constant float depthwise weights (depth multiplier 1), channels padded to 8.
#[derive(Clone, Debug)]
pub struct DwF32 {
    pub(crate) isa: Isa,
    pub(crate) c: usize,
    pub(crate) cp: usize,
    pub(crate) taps: usize,
    /// Tap `t`, channel `ch` at `t * cp + ch`.
    pub(crate) w: Vec<f32>,
    pub(crate) bias: Vec<f32>,
    pub(crate) act: Activation,
}

impl DwF32 {
    pub fn pack(
        isa: Isa,
        filter: &[f32],
        taps: usize,
        c: usize,
        bias: Option<&[f32]>,
        act: Activation,
    ) -> Option<DwF32> {
        if isa == Isa::Portable
            || !isa.available()
            || taps == 0
            || taps > DW_MAX_TAPS
            || c == 0
            || filter.len() != taps * c
        {
            return None;
        }
        let cp = c.div_ceil(8) * 8;
        let mut w = vec![0f32; taps * cp];
        for t in 0..taps {
            w[t * cp..t * cp + c].copy_from_slice(&filter[t * c..(t + 1) * c]);
        }
        let mut bv = vec![0f32; cp];
        if let Some(b) = bias {
            bv[..c].copy_from_slice(&b[..c]);
        }
        Some(DwF32 {
            isa,
            c,
            cp,
            taps,
            w,
            bias: bv,
            act,
        })
    }

    pub fn bytes(&self) -> usize {
        (self.w.len() + self.bias.len()) * 4
    }
}

/// Float DEPTHWISE_CONV_2D (depth multiplier 1) through [`DwF32`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_f32(
    dw: &DwF32,
    input: &[f32],
    in_shape: [usize; 4],
    k_hw: [usize; 2],
    p: &DepthwiseParams,
    output: &mut [f32],
    out_shape: [usize; 4],
    workers: &mut Workers,
) {
    #[cfg(target_arch = "x86_64")]
    {
        let dims = [in_shape[1], in_shape[2], k_hw[0], k_hw[1], out_shape[2]];
        depthwise_rows(
            input,
            in_shape,
            k_hw,
            output,
            out_shape,
            workers,
            |inb, oys, o, _| {
                let at = oys.len() * out_shape[2] * in_shape[3];
                x86::dw_f32_rows(dw, inb, dims, dw_geometry(p), oys, o);
                if dw.act == Activation::Tanh {
                    for v in o[..at].iter_mut() {
                        *v = dw.act.apply(*v);
                    }
                }
            },
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    depthwise_pixels(
        input,
        in_shape,
        k_hw,
        p,
        output,
        out_shape,
        workers,
        |inb, taps, o| {
            #[cfg(target_arch = "aarch64")]
            aarch64::dw_f32_pixel(dw.isa, dw, inb, taps, o);
            #[cfg(not(target_arch = "aarch64"))]
            let _ = (inb, taps, &o);
            if dw.act == Activation::Tanh {
                for v in o.iter_mut() {
                    *v = dw.act.apply(*v);
                }
            }
        },
    );
}
