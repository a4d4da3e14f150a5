//! Drops the MAXIMUM/MINIMUM with a constant that a quantized tensor's saturation already
//! performs. Clip-aware ranges (`clip_ranges`) give a clamped tensor the clamp's range, so in
//! int8 the bound is the type's lowest (MAXIMUM) or highest (MINIMUM) value and the operator
//! copies its input: a lowered HardSigmoid's clip to [0, 1], the floor and the gate clip of an
//! equalized HardSwish (`equalize_gated`). On a 240x240x32 tensor such a copy cost literun
//! 4-9 ms (PP-OCRv4 det); the file is the same model without it.

use crate::ir::{BinaryOp, ConstData, DType, Graph, Op};

/// Removes every such node of the quantized graph `g`; returns how many.
pub fn drop_saturating_clamps(g: &mut Graph) -> usize {
    let mut dropped = 0;
    let mut k = 0;
    while k < g.nodes.len() {
        let n = &g.nodes[k];
        let Op::Binary {
            op: op @ (BinaryOp::Max | BinaryOp::Min),
            activation: crate::ir::Activation::None,
        } = n.op
        else {
            k += 1;
            continue;
        };
        let (x, bound, y) = match n.inputs[..] {
            [x, c] if g.tensors[c].is_const() && !g.tensors[x].is_const() => (x, c, n.outputs[0]),
            _ => {
                k += 1;
                continue;
            }
        };
        let (tx, ty) = (&g.tensors[x], &g.tensors[y]);
        let same = tx.dtype == ty.dtype
            && tx.quant.is_some()
            && tx.quant == ty.quant
            && g.tensors[bound].quant == tx.quant
            && tx.shape == ty.shape
            && !g.outputs.contains(&y);
        let saturated =
            same && match (g.tensors[bound].data.as_deref(), op) {
                (Some(ConstData::I8(v)), BinaryOp::Max) => v.iter().all(|&q| q == i8::MIN),
                (Some(ConstData::I8(v)), _) => v.iter().all(|&q| q == i8::MAX),
                (Some(ConstData::I16(v)), BinaryOp::Max) => v.iter().all(|&q| q == i16::MIN),
                (Some(ConstData::I16(v)), _) => v.iter().all(|&q| q == i16::MAX),
                _ => false,
            } && matches!(tx.dtype, DType::I8 | DType::I16);
        if !saturated {
            k += 1;
            continue;
        }
        g.nodes.remove(k);
        g.replace_uses(y, x);
        dropped += 1;
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, Node, QuantParams};

    /// x → MAXIMUM(x, bound) → y → MINIMUM(y, top) → z → RELU → out, int8 with one set of
    /// parameters.
    fn graph(bound: i8, top: i8) -> Graph {
        let mut g = Graph::default();
        let p = Some(QuantParams::per_tensor(0.1, -20));
        let t = |g: &mut Graph, name: &str| {
            let id = g.add_tensor(name, vec![1, 4], DType::I8);
            g.tensors[id].quant = p.clone();
            id
        };
        let (x, y, z, out) = (
            t(&mut g, "x"),
            t(&mut g, "y"),
            t(&mut g, "z"),
            t(&mut g, "out"),
        );
        let k = |g: &mut Graph, name: &str, v: i8| {
            let id = g.add_const(name, ConstData::I8(ndarray::arr0(v).into_dyn()));
            g.tensors[id].quant = p.clone();
            id
        };
        let (kb, kt) = (k(&mut g, "bound", bound), k(&mut g, "top", top));
        let binary = |op| Op::Binary {
            op,
            activation: Activation::None,
        };
        let node = |name: &str, op, inputs, out| Node {
            name: name.into(),
            op,
            inputs,
            outputs: vec![out],
        };
        g.nodes = vec![
            node("max", binary(BinaryOp::Max), vec![x, kb], y),
            node("min", binary(BinaryOp::Min), vec![y, kt], z),
            node("relu", Op::Unary(crate::ir::UnaryOp::Relu), vec![z], out),
        ];
        g.inputs.push(x);
        g.outputs.push(out);
        g
    }

    #[test]
    fn only_clamps_at_the_types_limits_go() {
        let mut g = graph(i8::MIN, i8::MAX);
        assert_eq!(drop_saturating_clamps(&mut g), 2);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].inputs, g.inputs);
        // A bound one step inside the range clamps values: it stays.
        let mut g = graph(i8::MIN + 1, i8::MAX - 1);
        assert_eq!(drop_saturating_clamps(&mut g), 0);
        assert_eq!(g.nodes.len(), 3);
    }
}
