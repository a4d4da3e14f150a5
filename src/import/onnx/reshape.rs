//! Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile, Shape, DepthToSpace and
//! SpaceToDepth.

use super::{bad, Importer, R};
use crate::import::proto::{
    checked_elements, dim_value, dim_values, norm_axis, size_values, Attrs,
};
use crate::ir::{shape, ConstData, DType, Layout, Op, TensorId};
use tract_onnx::pb::NodeProto;

impl Importer<'_> {
    pub(super) fn reshape(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let target = if self.opset >= 5 {
            match self.const_ints(n, 1, "shape")? {
                Some(s) => s,
                None => return bad("shape is required"),
            }
        } else {
            match a.ints("shape")? {
                Some(s) => s,
                None => return bad("shape is required"),
            }
        };
        let allowzero = a.int_or("allowzero", 0)? != 0;
        let xs = self.shape(x);
        let shape = resolve_reshape(&xs, &target, allowzero)?;
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[x], out)?;
        Ok(())
    }

    pub(super) fn flatten(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let xs = self.shape(x);
        // axis is in [-rank, rank]: a negative one counts from the end (axis + rank), and
        // rank itself puts every dimension in the first factor.
        let rank = xs.len() as i64;
        let given = a.int_or("axis", 1)?;
        let axis = if given < 0 { given + rank } else { given };
        if !(0..=rank).contains(&axis) {
            return bad(format!("axis {given} out of range for rank {rank}"));
        }
        let axis = axis as usize;
        let shape = vec![
            xs[..axis].iter().product::<usize>(),
            xs[axis..].iter().product::<usize>(),
        ];
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[x], out)?;
        Ok(())
    }

    /// DepthToSpace (`to_space`; modes DCR and CRD) and SpaceToDepth (modes DCR and, from opset
    /// 25, CRD). Mode DCR is TFLite's channel order: DEPTH_TO_SPACE / SPACE_TO_DEPTH. CRD orders
    /// the channels the other way round (channel `c * b² + k` for block position `k` where DCR
    /// has `k * C + c`): a GATHER of the channels reorders them before DEPTH_TO_SPACE or after
    /// SPACE_TO_DEPTH. Constant data (and types TFLite's kernels lack) take the 6-D form ONNX
    /// defines: a Reshape to blocks, a Transpose moving them, a Reshape back to 4-D.
    pub(super) fn depth_space(&mut self, n: &NodeProto, a: &Attrs, to_space: bool) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let xs = self.shape(x);
        let &[batch, c, h, w] = xs.as_slice() else {
            return bad(format!("expects a 4-D input, got {xs:?}"));
        };
        let Some(block) = a.int("blocksize")? else {
            return bad("blocksize is required");
        };
        let b = match usize::try_from(block) {
            Ok(b) if b >= 1 => b,
            _ => return bad(format!("blocksize {block} is not positive")),
        };
        let crd = match a.string_or("mode", "DCR")?.as_str() {
            "DCR" => false,
            "CRD" => true,
            other => return bad(format!("mode '{other}' is not DCR or CRD")),
        };
        let bb = b
            .checked_mul(b)
            .ok_or_else(|| super::Fail::Error(format!("blocksize {b} is too large")))?;
        if to_space && c % bb != 0 {
            return bad(format!(
                "{c} channels are not a multiple of blocksize² = {bb}"
            ));
        }
        if !to_space && (h % b != 0 || w % b != 0) {
            return bad(format!("{h}x{w} is not a multiple of blocksize {b}"));
        }
        let builtin_type = matches!(
            self.dtype(x),
            DType::F32 | DType::I32 | DType::I64 | DType::I8 | DType::U8
        );
        let out = self.out0(n)?;
        if self.cst(x).is_some() || !builtin_type {
            return self.depth_space_by_transpose(x, [batch, c, h, w], b, to_space, crd, out);
        }
        let layout = Layout::Nchw;
        if to_space {
            let data = if crd {
                let depth = c / bb;
                let order = crd_channel_order(depth, bb, true);
                self.gather_channels(x, order, "dcr_channels")?
            } else {
                x
            };
            self.emit_to(Op::DepthToSpace { block: b, layout }, &[data], out)?;
        } else if crd {
            let dcr = self.emit_tmp(Op::SpaceToDepth { block: b, layout }, &[x], "dcr")?;
            let order = crd_channel_order(c, bb, false);
            let order = self.add_const(&format!("{}/crd_order", self.cur), order);
            self.emit_to(Op::Gather { axis: 1 }, &[dcr, order], out)?;
        } else {
            self.emit_to(Op::SpaceToDepth { block: b, layout }, &[x], out)?;
        }
        Ok(())
    }

    /// `x`'s channels (axis 1) in the order `order` gives.
    fn gather_channels(&mut self, x: TensorId, order: ConstData, suffix: &str) -> R<TensorId> {
        let order = self.add_const(&format!("{}/{suffix}_order", self.cur), order);
        self.emit_tmp(Op::Gather { axis: 1 }, &[x, order], suffix)
    }

    /// The 6-D form ONNX's definition of DepthToSpace / SpaceToDepth uses.
    fn depth_space_by_transpose(
        &mut self,
        x: TensorId,
        [batch, c, h, w]: [usize; 4],
        b: usize,
        to_space: bool,
        crd: bool,
        out: &str,
    ) -> R<()> {
        let (blocks, perm, shape) = if to_space {
            let depth = c / (b * b);
            let (blocks, perm) = if crd {
                (vec![batch, depth, b, b, h, w], vec![0, 1, 4, 2, 5, 3])
            } else {
                (vec![batch, b, b, depth, h, w], vec![0, 3, 4, 1, 5, 2])
            };
            (blocks, perm, vec![batch, depth, h * b, w * b])
        } else {
            let perm = if crd {
                vec![0, 1, 3, 5, 2, 4]
            } else {
                vec![0, 3, 5, 1, 2, 4]
            };
            (
                vec![batch, c, h / b, b, w / b, b],
                perm,
                vec![batch, c * b * b, h / b, w / b],
            )
        };
        let blocks = self.emit_tmp(Op::Reshape { shape: blocks }, &[x], "blocks")?;
        let moved = self.emit_tmp(Op::Transpose { perm }, &[blocks], "moved")?;
        self.emit_to(Op::Reshape { shape }, &[moved], out)?;
        Ok(())
    }

    fn axes_arg(&mut self, n: &NodeProto, a: &Attrs) -> R<Option<Vec<i64>>> {
        if self.opset >= 13 {
            self.const_ints(n, 1, "axes")
        } else {
            Ok(a.ints("axes")?)
        }
    }

    pub(super) fn squeeze(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let xs = self.shape(x);
        let axes = match self.axes_arg(n, a)? {
            Some(v) => Self::norm_axes(&v, xs.len())?,
            None => (0..xs.len()).filter(|&i| xs[i] == 1).collect(),
        };
        if let Some(&bad_axis) = axes.iter().find(|&&i| xs[i] != 1) {
            return bad(format!(
                "cannot squeeze axis {bad_axis} of size {} (shape {xs:?})",
                xs[bad_axis]
            ));
        }
        let shape: Vec<usize> = (0..xs.len())
            .filter(|i| !axes.contains(i))
            .map(|i| xs[i])
            .collect();
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[x], out)?;
        Ok(())
    }

    pub(super) fn unsqueeze(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let xs = self.shape(x);
        let Some(axes) = self.axes_arg(n, a)? else {
            return bad("axes is required");
        };
        let out_rank = xs.len() + axes.len();
        let norm = Self::norm_axes(&axes, out_rank)?;
        if norm.len() != axes.len() {
            return bad(format!("axes {axes:?} repeat an axis"));
        }
        let mut it = xs.iter();
        let shape: Vec<usize> = (0..out_rank)
            .map(|i| {
                if norm.contains(&i) {
                    1
                } else {
                    *it.next().unwrap_or(&1)
                }
            })
            .collect();
        let out = self.out0(n)?;
        self.emit_to(Op::Reshape { shape }, &[x], out)?;
        Ok(())
    }

    pub(super) fn transpose(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let rank = self.shape(x).len();
        let perm = match a.ints("perm")? {
            Some(p) => {
                let mut v = Vec::with_capacity(p.len());
                for &i in &p {
                    v.push(norm_axis(i, rank)?);
                }
                v
            }
            None => (0..rank).rev().collect(),
        };
        let out = self.out0(n)?;
        self.emit_to(Op::Transpose { perm }, &[x], out)?;
        Ok(())
    }

    pub(super) fn expand(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let Some(target) = self.const_ints(n, 1, "shape")? else {
            return bad("shape is required");
        };
        let target = dim_values(&target, "shape dimension")?;
        let shape = shape::broadcast(&self.shape(x), &target)?;
        checked_elements(&shape)?;
        let out = self.out0(n)?;
        self.emit_to(Op::Expand { shape }, &[x], out)?;
        Ok(())
    }

    pub(super) fn tile(&mut self, n: &NodeProto) -> R<()> {
        let x = self.req(n, 0, "input")?;
        let Some(reps) = self.const_ints(n, 1, "repeats")? else {
            return bad("repeats is required");
        };
        let reps = size_values(&reps, "repeat")?;
        let out = self.out0(n)?;
        self.emit_to(Op::Tile { reps }, &[x], out)?;
        Ok(())
    }

    pub(super) fn shape_op(&mut self, n: &NodeProto, a: &Attrs) -> R<()> {
        let x = self.req(n, 0, "data")?;
        let xs = self.shape(x);
        let r = xs.len() as i64;
        let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let start = clampi(a.int_or("start", 0)?);
        let end = clampi(a.int_or("end", r)?);
        let v: Vec<i64> = if start < end {
            xs[start..end].iter().map(|&d| d as i64).collect()
        } else {
            vec![]
        };
        let out = self.out0(n)?;
        self.out_const(out, ConstData::from_i64(&[v.len()], v))
    }
}

/// ONNX Reshape's target → a fully resolved shape (0 copies the input dim unless `allowzero`;
/// one -1 is inferred).
fn resolve_reshape(
    input: &[usize],
    target: &[i64],
    allowzero: bool,
) -> std::result::Result<Vec<usize>, String> {
    let total = checked_elements(input)?;
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &v) in target.iter().enumerate() {
        match v {
            -1 => {
                if infer.replace(i).is_some() {
                    return Err(format!("shape {target:?} has more than one -1"));
                }
                out.push(1);
            }
            0 if !allowzero => match input.get(i) {
                Some(&d) => out.push(d),
                None => {
                    return Err(format!(
                        "shape {target:?} copies dimension {i}, which {input:?} does not have"
                    ))
                }
            },
            v if v < 0 => return Err(format!("shape {target:?} has invalid dimension {v}")),
            v => out.push(dim_value(v, "dimension")?),
        }
    }
    let known = out
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("shape {target:?} is too large"))?;
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return Err(format!("cannot reshape {input:?} to {target:?}"));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(format!("cannot reshape {input:?} to {target:?}"));
    }
    Ok(out)
}

/// Channel indices between the two channel orders of `depth` channels × `blocks` block
/// positions: with `to_dcr`, DCR channel `k * depth + c` reads CRD channel `c * blocks + k`;
/// otherwise CRD channel `c * blocks + k` reads DCR channel `k * depth + c`.
fn crd_channel_order(depth: usize, blocks: usize, to_dcr: bool) -> ConstData {
    let mut order = vec![0i32; depth * blocks];
    for k in 0..blocks {
        for c in 0..depth {
            let (dcr, crd) = (k * depth + c, c * blocks + k);
            if to_dcr {
                order[dcr] = crd as i32;
            } else {
                order[crd] = dcr as i32;
            }
        }
    }
    ConstData::from_i32(&[depth * blocks], order)
}
