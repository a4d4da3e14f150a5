//! Errors `op_spec` reports instead of panicking on malformed graphs.

use super::super::{export, ExportOptions};
use crate::ir::{Activation, ConstData, DType, Graph, Layout, Node, Op};

/// A malformed graph (an NHWC convolution whose input is 3-D) is an error, not a panic.
#[test]
fn a_conv_that_is_not_4d_is_an_error() {
    let mut g = Graph::default();
    let x = g.add_tensor("x", vec![1, 8, 3], DType::F32);
    let w = g.add_const("w", ConstData::from_f32(&[4, 3, 3], vec![0.1; 36]));
    let y = g.add_tensor("y", vec![1, 6, 4], DType::F32);
    g.inputs = vec![x];
    g.outputs = vec![y];
    g.nodes.push(Node {
        name: "conv".into(),
        op: Op::Conv2d {
            strides: [1, 1],
            dilations: [1, 1],
            pads: Default::default(),
            group: 1,
            activation: Activation::None,
            layout: Layout::Nhwc,
        },
        inputs: vec![x, w],
        outputs: vec![y],
    });
    let err = export(&g, &ExportOptions::default()).unwrap_err();
    assert!(format!("{err:#}").contains("must both be 4-D"), "{err:#}");
}
