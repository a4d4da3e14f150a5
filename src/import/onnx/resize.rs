//! Resize and Upsample.

use super::{bad, unsup, Importer, R};
use crate::import::proto::{dim_value, norm_axis, Attrs};
use crate::ir::{Layout, Op, ResizeCoords, ResizeMode};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    pub(super) fn resize(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "X")?;
        let xs = self.shape(x);
        if xs.len() != 4 {
            return unsup(format!("only 4-D resize is supported, got {xs:?}"));
        }
        let mode = a.string_or("mode", "nearest")?;
        let legacy = n.op_type == "Upsample" || self.opset < 11;
        let (coord, nearest, scales, sizes, axes) = if legacy {
            let scales = if n.op_type == "Upsample" && self.opset < 9 {
                a.floats("scales")?
                    .map(|v| v.into_iter().map(|s| s as f64).collect())
            } else {
                self.const_input(n, 1, "scales")?
                    .map(|d| d.to_f32_vec().into_iter().map(|s| s as f64).collect())
            };
            (
                "asymmetric".to_string(),
                "floor".to_string(),
                scales,
                None,
                None,
            )
        } else {
            if a.int_or("exclude_outside", 0)? != 0 {
                return unsup("exclude_outside=1 is not supported");
            }
            if a.int_or("antialias", 0)? != 0 {
                return unsup("antialias=1 is not supported");
            }
            let policy = a.string_or("keep_aspect_ratio_policy", "stretch")?;
            if policy != "stretch" {
                return unsup(format!(
                    "keep_aspect_ratio_policy '{policy}' is not supported"
                ));
            }
            let scales: Option<Vec<f64>> = self
                .const_input(n, 2, "scales")?
                .filter(|d| !d.is_empty())
                .map(|d| d.to_f32_vec().into_iter().map(|s| s as f64).collect());
            let sizes = self
                .const_input(n, 3, "sizes")?
                .filter(|d| !d.is_empty())
                .map(|d| d.to_i64_vec());
            (
                a.string_or("coordinate_transformation_mode", "half_pixel")?,
                a.string_or("nearest_mode", "round_prefer_floor")?,
                scales,
                sizes,
                a.ints("axes")?,
            )
        };
        let axes: Vec<usize> = match axes {
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for &ax in &v {
                    out.push(norm_axis(ax, 4)?);
                }
                out
            }
            None => (0..4).collect(),
        };
        let mut out_shape = xs.clone();
        if let Some(sz) = sizes {
            if sz.len() != axes.len() {
                return bad(format!("sizes {sz:?} must have {} values", axes.len()));
            }
            for (&ax, &s) in axes.iter().zip(&sz) {
                out_shape[ax] = dim_value(s, "size")?;
            }
        } else if let Some(sc) = scales {
            if sc.len() != axes.len() {
                return bad(format!("scales {sc:?} must have {} values", axes.len()));
            }
            for (&ax, &s) in axes.iter().zip(&sc) {
                if !(s.is_finite() && s > 0.0) {
                    return bad(format!("scale {s} is not positive"));
                }
                // The size in float32, as ONNX's reference and ONNX Runtime compute it.
                let v = xs[ax] as f32 * s as f32;
                if v > crate::import::proto::MAX_ELEMENTS as f32 {
                    return bad(format!("scale {s} is too large"));
                }
                // ONNX maps coordinates with the given scale (and the unrounded size), TFLite
                // with the ratio of the whole sizes: the same only for a whole size.
                if v.fract() != 0.0 {
                    return unsup(format!(
                        "scale {s} gives axis {ax} the fractional size {} × {s} = {v}; TFLite \
                         resizes by the ratio of whole sizes (give the size with 'sizes' instead)",
                        xs[ax]
                    ));
                }
                out_shape[ax] = v as usize;
            }
        } else {
            return bad("needs scales or sizes");
        }
        if out_shape[0] != xs[0] || out_shape[1] != xs[1] {
            return unsup(format!(
                "resizing N or C ({xs:?} → {out_shape:?}) is not supported"
            ));
        }
        let (oh, ow) = (out_shape[2], out_shape[3]);
        if oh == 0 || ow == 0 {
            return bad(format!("output size {out_shape:?} is empty"));
        }
        let (rmode, coords) = match (mode.as_str(), coord.as_str(), nearest.as_str()) {
            ("linear" | "bilinear", "half_pixel", _) => {
                (ResizeMode::Bilinear, ResizeCoords::HalfPixel)
            }
            ("linear" | "bilinear", "pytorch_half_pixel", _) if oh > 1 && ow > 1 => {
                (ResizeMode::Bilinear, ResizeCoords::HalfPixel)
            }
            ("linear" | "bilinear", "align_corners", _) => {
                (ResizeMode::Bilinear, ResizeCoords::AlignCorners)
            }
            ("linear" | "bilinear", "asymmetric", _) => {
                (ResizeMode::Bilinear, ResizeCoords::Asymmetric)
            }
            ("nearest", "asymmetric", "floor") => (ResizeMode::Nearest, ResizeCoords::Asymmetric),
            ("nearest", "half_pixel", "round_prefer_ceil")
            | ("nearest", "tf_half_pixel_for_nn", "floor") => {
                (ResizeMode::Nearest, ResizeCoords::HalfPixel)
            }
            ("nearest", "align_corners", "round_prefer_ceil") => {
                (ResizeMode::Nearest, ResizeCoords::AlignCorners)
            }
            _ => {
                let nm = if mode == "nearest" {
                    format!(", nearest_mode '{nearest}'")
                } else {
                    String::new()
                };
                return unsup(format!(
                    "mode '{mode}' with coordinate_transformation_mode '{coord}'{nm} has no \
                     TFLite equivalent"
                ));
            }
        };
        let out = self.out0(n)?;
        self.emit_to(
            Op::Resize {
                mode: rmode,
                coords,
                size: [oh, ow],
                layout: Layout::Nchw,
            },
            &[x],
            out,
        )?;
        Ok(())
    }
}
