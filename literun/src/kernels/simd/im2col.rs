//! The left-hand side of a GEMM: rows read in place or gathered from a convolution's
//! receptive fields (im2col), for the int8 and float GEMMs.

use super::*;

/// Where the rows of a GEMM's left-hand side come from.
pub(crate) enum Rows<'a, T> {
    /// Row `m` is `data[m * stride..][..k]`.
    Direct { data: &'a [T], stride: usize },
    /// Row `m` is the receptive field of output pixel `m` of a convolution (im2col), in the
    /// filter's `[KH, KW, C]` order, padding taps filled with `pad`.
    Conv {
        input: &'a [T],
        in_hwc: [usize; 3],
        k_hw: [usize; 2],
        out_w: usize,
        p: Conv2dParams,
        pad: T,
    },
}

impl<T: Copy> Rows<'_, T> {
    #[inline]
    pub(crate) fn row<'s>(&'s self, m: usize, buf: &'s mut [T]) -> &'s [T] {
        match self {
            Rows::Direct { data, stride } => &data[m * stride..],
            Rows::Conv {
                input,
                in_hwc: [in_h, in_w, c],
                k_hw: [k_h, k_w],
                out_w,
                p,
                pad,
            } => {
                let (oy, ox) = (m / out_w, m % out_w);
                let mut o = 0;
                let x0 = (ox * p.stride_w).wrapping_sub(p.pad_left);
                // Whether the window's columns are one contiguous run of input pixels (then a
                // row of the window is one copy: few channels make many tiny copies otherwise).
                let contiguous = p.dilation_w == 1 && x0 < *in_w && *in_w - x0 >= *k_w;
                for ky in 0..*k_h {
                    let y = (oy * p.stride_h + ky * p.dilation_h).wrapping_sub(p.pad_top);
                    if contiguous && y < *in_h {
                        let (i, n) = ((y * in_w + x0) * c, k_w * c);
                        buf[o..o + n].copy_from_slice(&input[i..i + n]);
                        o += n;
                        continue;
                    }
                    for kx in 0..*k_w {
                        let x = (ox * p.stride_w + kx * p.dilation_w).wrapping_sub(p.pad_left);
                        let dst = &mut buf[o..o + c];
                        if y < *in_h && x < *in_w {
                            let i = (y * in_w + x) * c;
                            dst.copy_from_slice(&input[i..i + c]);
                        } else {
                            dst.fill(*pad);
                        }
                        o += c;
                    }
                }
                &buf[..o]
            }
        }
    }
}

pub(super) fn conv_rows<'a, T: Copy>(
    input: &'a [T],
    [_, in_h, in_w, in_c]: [usize; 4],
    [_, k_h, k_w, _]: [usize; 4],
    p: &Conv2dParams,
    out_w: usize,
    pad: T,
) -> Rows<'a, T> {
    let pointwise = k_h == 1
        && k_w == 1
        && p.stride_h == 1
        && p.stride_w == 1
        && p.pad_top == 0
        && p.pad_left == 0;
    if pointwise {
        Rows::Direct {
            data: input,
            stride: in_c,
        }
    } else {
        Rows::Conv {
            input,
            in_hwc: [in_h, in_w, in_c],
            k_hw: [k_h, k_w],
            out_w,
            p: *p,
            pad,
        }
    }
}
