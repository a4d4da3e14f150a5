//! The layout rule of the NCHW spatial ops (convolutions, pooling, resize, depth/space moves):
//! their data goes NHWC, convolution weights OHWI (depthwise `[1, KH, KW, C·m]`).

use super::{Rewriter, NHWC};
use crate::ir::{Layout, Node, Op, TensorId};
use anyhow::{bail, Result};

impl Rewriter<'_> {
    pub(super) fn rewrite_nchw_spatial(&mut self, node: &Node, x: TensorId) -> Result<()> {
        match &node.op {
            Op::Conv2d {
                strides,
                dilations,
                pads,
                group,
                activation,
                layout: Layout::Nchw,
            } => {
                let data = self.get(x, &NHWC)?;
                let w = &self.old.tensors[node.inputs[1]];
                let channels = self.old.tensors[x].shape[1];
                let depthwise = *group == channels && *group > 1 && w.shape[1] == 1;
                // OIHW → OHWI, or depthwise [C*m, 1, KH, KW] → [1, KH, KW, C*m].
                let wperm: &[usize] = if depthwise {
                    &[1, 2, 3, 0]
                } else {
                    &[0, 2, 3, 1]
                };
                let weights = self.get(node.inputs[1], wperm)?;
                let mut inputs = vec![data, weights];
                if let Some(&b) = node.inputs.get(2) {
                    inputs.push(self.get(b, &[0])?);
                }
                let op = Op::Conv2d {
                    strides: *strides,
                    dilations: *dilations,
                    pads: *pads,
                    group: *group,
                    activation: *activation,
                    layout: Layout::Nhwc,
                };
                self.emit(node, op, inputs, vec![NHWC.to_vec()]);
            }
            Op::ConvTranspose2d {
                strides,
                pads,
                output_size,
                activation,
                layout: Layout::Nchw,
            } => {
                let data = self.get(x, &NHWC)?;
                // [I, O, KH, KW] → [O, KH, KW, I]
                let weights = self.get(node.inputs[1], &[1, 2, 3, 0])?;
                let mut inputs = vec![data, weights];
                if let Some(&b) = node.inputs.get(2) {
                    inputs.push(self.get(b, &[0])?);
                }
                let op = Op::ConvTranspose2d {
                    strides: *strides,
                    pads: *pads,
                    output_size: *output_size,
                    activation: *activation,
                    layout: Layout::Nhwc,
                };
                self.emit(node, op, inputs, vec![NHWC.to_vec()]);
            }
            Op::Pool2d {
                kind,
                kernel,
                strides,
                pads,
                layout: Layout::Nchw,
            } => {
                let data = self.get(x, &NHWC)?;
                let op = Op::Pool2d {
                    kind: *kind,
                    kernel: *kernel,
                    strides: *strides,
                    pads: *pads,
                    layout: Layout::Nhwc,
                };
                self.emit(node, op, vec![data], vec![NHWC.to_vec()]);
            }
            Op::Resize {
                mode,
                coords,
                size,
                layout: Layout::Nchw,
            } => {
                let data = self.get(x, &NHWC)?;
                let op = Op::Resize {
                    mode: *mode,
                    coords: *coords,
                    size: *size,
                    layout: Layout::Nhwc,
                };
                self.emit(node, op, vec![data], vec![NHWC.to_vec()]);
            }
            Op::DepthToSpace {
                block,
                layout: Layout::Nchw,
            }
            | Op::SpaceToDepth {
                block,
                layout: Layout::Nchw,
            } => {
                let data = self.get(x, &NHWC)?;
                let (block, layout) = (*block, Layout::Nhwc);
                let op = match node.op {
                    Op::DepthToSpace { .. } => Op::DepthToSpace { block, layout },
                    _ => Op::SpaceToDepth { block, layout },
                };
                self.emit(node, op, vec![data], vec![NHWC.to_vec()]);
            }
            other => bail!("layout: {} is not an NCHW spatial op", other.name()),
        }
        Ok(())
    }
}
