//! RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR.
// With some `ops-*` features off, helpers only the left-out operators use are unused; without
// `error-details`, values only error messages mention.
#![cfg_attr(
    not(all(feature = "all-ops", feature = "error-details")),
    allow(
        dead_code,
        unused_imports,
        unused_variables,
        unused_macros,
        unreachable_code
    )
)]

use super::buffers::{cast_out, Ins, Scratch};
use super::context::{tag, Ctx};
use super::Kind;
use crate::error::{format, Result};
use crate::kernels::resize;
use crate::model::{DType, OpDesc};
use crate::schema;
use crate::schema::BuiltinOperator as B;

/// A prepared RESIZE_BILINEAR or RESIZE_NEAREST_NEIGHBOR.
#[derive(Debug)]
pub(crate) struct Resize {
    pub(crate) bilinear: bool,
    pub(crate) align_corners: bool,
    pub(crate) half_pixel: bool,
    pub(crate) in_shape: [usize; 4],
    pub(crate) out_shape: [usize; 4],
    /// Int8 (same input and output quantization) instead of float32.
    pub(crate) int8: bool,
}

/// Prepares RESIZE_BILINEAR or RESIZE_NEAREST_NEIGHBOR: this family's entry in the operator table
/// ([`crate::model::registry::op_table`]).
pub(super) fn prepare(c: &Ctx<'_, '_>, code: B) -> Result<Kind> {
    resize(c, code == B::RESIZE_BILINEAR)
}

fn resize(c: &Ctx<'_, '_>, bilinear: bool) -> Result<Kind> {
    let dt = c.want_dtype(0, &[DType::F32, DType::I8])?;
    let (mut align_corners, mut half_pixel) = (false, false);
    if bilinear {
        if let Some(t) = c.options(tag::RESIZE_BILINEAR)? {
            use schema::ResizeBilinearOptions as O;
            align_corners = c.opt(t.bool(O::VT_ALIGN_CORNERS, false))?;
            half_pixel = c.opt(t.bool(O::VT_HALF_PIXEL_CENTERS, false))?;
        }
    } else if let Some(t) = c.options(tag::RESIZE_NEAREST)? {
        use schema::ResizeNearestNeighborOptions as O;
        align_corners = c.opt(t.bool(O::VT_ALIGN_CORNERS, false))?;
        half_pixel = c.opt(t.bool(O::VT_HALF_PIXEL_CENTERS, false))?;
    }
    let is = c.shape4(0)?;
    let size = c.const_ints(1)?;
    if size.len() != 2 || size.iter().any(|&v| v <= 0 || v > i64::from(i32::MAX)) {
        return Err(c.err(format!("bad size {size:?}")));
    }
    if bilinear && align_corners && half_pixel {
        // TFLite's RESIZE_BILINEAR Prepare rejects this too.
        return Err(c.err("align_corners and half_pixel_centers cannot both be set"));
    }
    let os = [is[0], size[0] as usize, size[1] as usize, is[3]];
    c.check_out(0, &os, dt)?;
    if dt == DType::I8 {
        let (qi, qo) = (c.in_q8(0)?, c.out_q8(0)?);
        if qi != qo {
            return Err(c.err(format!(
                "int8 resizing needs the same input and output quantization (TFLite does not \
                 requantize), has scale {} zp {} and scale {} zp {}",
                qi.scale, qi.zero_point, qo.scale, qo.zero_point
            )));
        }
    }
    Ok(Kind::Resize(Resize {
        bilinear,
        align_corners,
        half_pixel,
        in_shape: is,
        out_shape: os,
        int8: dt == DType::I8,
    }))
}

impl Resize {
    /// Runs the operator reading `ins`, writing `out`.
    pub(super) fn run<'b>(
        &self,
        _index: usize,
        _op: &'b OpDesc<'b>,
        ins: Ins<'b>,
        out: &mut [u8],
        _scratch: &mut Scratch,
    ) -> Result<()> {
        let Resize {
            bilinear,
            align_corners,
            half_pixel,
            in_shape,
            out_shape,
            int8,
        } = self;
        #[cfg(feature = "ops-resize")]
        {
            match (*bilinear, *int8) {
                (true, false) => resize::resize_bilinear_f32(
                    ins.typed(0)?,
                    *in_shape,
                    *align_corners,
                    *half_pixel,
                    cast_out(out)?,
                    *out_shape,
                ),
                (true, true) => resize::resize_bilinear_i8(
                    ins.typed(0)?,
                    *in_shape,
                    *align_corners,
                    *half_pixel,
                    cast_out(out)?,
                    *out_shape,
                ),
                (false, false) => resize::resize_nearest::<f32>(
                    ins.typed(0)?,
                    *in_shape,
                    *align_corners,
                    *half_pixel,
                    cast_out(out)?,
                    *out_shape,
                ),
                (false, true) => resize::resize_nearest::<i8>(
                    ins.typed(0)?,
                    *in_shape,
                    *align_corners,
                    *half_pixel,
                    cast_out(out)?,
                    *out_shape,
                ),
            }
        }
        #[cfg(not(feature = "ops-resize"))]
        return Err(super::compiled_out(_index, _op));
        Ok(())
    }
}
