//! Swish-family activations written out as products:
//! - SiLU: `x * Sigmoid(x)` (either operand order) → `Unary(Silu)`;
//! - HardSwish: `x * HardSigmoid(x)` with alpha 1/6 and beta 1/2, and `x * Clip(x + 3, 0, 6) / 6`
//!   in any association of the product (`x * (c / 6)`, `(c * x) * (1/6)`, `(x / 6) * c`, …, the
//!   division already turned into a multiplication by `simplify` or not), with Relu6 for the
//!   Clip → `Unary(HardSwish)` (TFLite HARD_SWISH).
//!
//! Kept as one IR op until lowering, so quantization sees one activation. The constants must be
//! those values to float precision, every intermediate must be read only by the pattern, and no
//! constant may broadcast x to another shape; otherwise the graph is left as it is.

use crate::ir::{Activation, BinaryOp, DType, Graph, Node, Op, TensorId, UnaryOp};
use std::collections::HashMap;

/// Relative tolerance on the pattern's constants: f32 rounding of 1/6, nothing more.
const TOL: f32 = 1e-6;

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= TOL * b.abs()
}

struct View<'g> {
    g: &'g Graph,
    producers: HashMap<TensorId, usize>,
    consumers: HashMap<TensorId, Vec<usize>>,
}

impl<'g> View<'g> {
    fn new(g: &'g Graph) -> Self {
        let mut consumers: HashMap<TensorId, Vec<usize>> = HashMap::new();
        for (i, n) in g.nodes.iter().enumerate() {
            for &t in &n.inputs {
                consumers.entry(t).or_default().push(i);
            }
        }
        View {
            g,
            producers: g.producers(),
            consumers,
        }
    }

    /// The only reader of `t` (read once, not a graph output).
    fn sole(&self, t: TensorId) -> Option<(usize, &'g Node)> {
        match self.consumers.get(&t).map(|v| v.as_slice()) {
            Some([i]) if !self.g.outputs.contains(&t) => Some((*i, &self.g.nodes[*i])),
            _ => None,
        }
    }

    /// The producer of `t` if `t` is read only once.
    fn sole_producer(&self, t: TensorId) -> Option<&'g Node> {
        self.sole(t)?;
        self.producers.get(&t).map(|&i| &self.g.nodes[i])
    }

    fn scalar(&self, t: TensorId) -> Option<f32> {
        let d = self.g.const_data(t)?;
        (d.len() == 1 && d.dtype() == DType::F32).then(|| d.to_f32_vec()[0])
    }
}

/// The operator of a binary node without a fused activation.
pub(super) fn bin_op(n: &Node) -> Option<BinaryOp> {
    match n.op {
        Op::Binary {
            op,
            activation: Activation::None,
        } => Some(op),
        _ => None,
    }
}

/// The operand of binary node `n` that is not `t`.
fn other(n: &Node, t: TensorId) -> Option<TensorId> {
    match n.inputs.as_slice() {
        [a, b] if *a == t => Some(*b),
        [a, b] if *b == t => Some(*a),
        _ => None,
    }
}

/// A match: node `last` now computes `op(x) * scale`.
struct Found {
    last: usize,
    x: TensorId,
    op: UnaryOp,
    /// 1 when the product's constants are exactly the activation's; otherwise the factor left
    /// over (`simplify` merged the `/ 6` with a following constant Mul, as PP-LCNetV3's
    /// "learnable affine" after each HardSwish).
    scale: f32,
}

fn silu_at(v: &View, si: usize) -> Option<Found> {
    let s = &v.g.nodes[si];
    if s.op != Op::Unary(UnaryOp::Sigmoid) {
        return None;
    }
    let x = s.inputs[0];
    let (mi, m) = v.sole(s.outputs[0])?;
    (bin_op(m) == Some(BinaryOp::Mul) && other(m, s.outputs[0]) == Some(x)).then_some(Found {
        last: mi,
        x,
        op: UnaryOp::Silu,
        scale: 1.0,
    })
}

/// HardSwish around the gate node `hi` (HardSigmoid, or Clip(0, 6)/Relu6 of x + 3).
fn hardswish_at(v: &View, hi: usize) -> Option<Found> {
    let g = v.g;
    let h = &g.nodes[hi];
    // (x, factor the product must carry to make it x * relu6(x + 3) / 6)
    let (x, want) = match h.op {
        Op::HardSigmoid { alpha, beta } if close(alpha, 1.0 / 6.0) && beta == 0.5 => {
            (h.inputs[0], 1.0)
        }
        Op::Clip { min: 0.0, max: 6.0 } | Op::Unary(UnaryOp::Relu6) => {
            let a = v.sole_producer(h.inputs[0])?;
            if bin_op(a) != Some(BinaryOp::Add) {
                return None;
            }
            let (x, c) = match (v.scalar(a.inputs[0]), v.scalar(a.inputs[1])) {
                (None, Some(c)) => (a.inputs[0], c),
                (Some(c), None) => (a.inputs[1], c),
                _ => return None,
            };
            if c != 3.0 || g.shape(a.outputs[0]) != g.shape(x) {
                return None;
            }
            (x, 1.0 / 6.0)
        }
        _ => return None,
    };
    if g.tensors[x].dtype != DType::F32 || g.shape(h.outputs[0]) != g.shape(x) {
        return None;
    }
    // Walk the product forward from the gate: at most one factor x (maybe as x * c computed
    // aside) and constant scalars, by Mul or Div. The product ends at the first node where its
    // constants make it the activation, else at the last node of the walk once x is in it
    // (the activation times a left-over constant).
    let mut cur = h.outputs[0];
    let mut factor = 1.0f32;
    let mut has_x = false;
    let mut longest = None;
    for _ in 0..4 {
        let Some(step) = product_step(v, cur, x, has_x) else {
            break;
        };
        let (mi, c, with_x) = step;
        factor *= c;
        has_x |= with_x;
        cur = g.nodes[mi].outputs[0];
        if g.shape(cur) != g.shape(x) {
            break;
        }
        if has_x && close(factor, want) {
            return Some(Found {
                last: mi,
                x,
                op: UnaryOp::HardSwish,
                scale: 1.0,
            });
        }
        if has_x {
            longest = Some((mi, factor / want));
        }
    }
    let (last, scale) = longest?;
    (scale.is_finite() && scale != 0.0).then_some(Found {
        last,
        x,
        op: UnaryOp::HardSwish,
        scale,
    })
}

/// The node that multiplies (or divides) the product `cur` next: (node, the constant factor it
/// applies, whether it multiplies by x).
fn product_step(v: &View, cur: TensorId, x: TensorId, has_x: bool) -> Option<(usize, f32, bool)> {
    let (mi, m) = v.sole(cur)?;
    let o = other(m, cur)?;
    match bin_op(m)? {
        BinaryOp::Mul => {
            if let Some(c) = v.scalar(o) {
                Some((mi, c, false))
            } else if o == x && !has_x {
                Some((mi, 1.0, true))
            } else {
                // x * c (or c * x) computed aside
                let p = v.sole_producer(o).filter(|_| !has_x)?;
                if bin_op(p)? != BinaryOp::Mul {
                    return None;
                }
                Some((mi, v.scalar(other(p, x)?)?, true))
            }
        }
        BinaryOp::Div if m.inputs[0] == cur => Some((mi, 1.0 / v.scalar(o)?, false)),
        _ => None,
    }
}

/// Fuses every SiLU and HardSwish pattern; returns how many.
pub fn fuse_swish(g: &mut Graph) -> usize {
    let mut fused = 0;
    loop {
        let found = {
            let v = View::new(g);
            (0..g.nodes.len()).find_map(|i| silu_at(&v, i).or_else(|| hardswish_at(&v, i)))
        };
        let Some(f) = found else { break };
        // x exists before the last node of the pattern, which can take its place.
        let suffix = Op::Unary(f.op).name().to_lowercase();
        if f.scale == 1.0 {
            let n = &mut g.nodes[f.last];
            n.name = format!("{}/{suffix}", n.name);
            n.op = Op::Unary(f.op);
            n.inputs = vec![f.x];
        } else {
            // The activation, then the last node multiplies it by the left-over constant.
            let name = format!("{}/{suffix}", g.nodes[f.last].name);
            let shape = g.shape(f.x).to_vec();
            let act = g.add_tensor(name.clone(), shape, DType::F32);
            let scale = g.add_const(
                format!("{name}/scale"),
                crate::ir::ConstData::from_f32(&[], vec![f.scale]),
            );
            let n = &mut g.nodes[f.last];
            n.op = Op::Binary {
                op: BinaryOp::Mul,
                activation: Activation::None,
            };
            n.inputs = vec![act, scale];
            g.nodes.insert(
                f.last,
                Node {
                    name,
                    op: Op::Unary(f.op),
                    inputs: vec![f.x],
                    outputs: vec![act],
                },
            );
        }
        g.remove_dead();
        fused += 1;
    }
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{eval, ConstData};

    struct B {
        g: Graph,
        x: TensorId,
    }

    impl B {
        fn new() -> Self {
            let mut g = Graph::default();
            let x = g.add_tensor("x", vec![2, 5], DType::F32);
            g.inputs = vec![x];
            B { g, x }
        }
        fn node(&mut self, op: Op, inputs: Vec<TensorId>) -> TensorId {
            let name = format!("t{}", self.g.tensors.len());
            let t = self.g.add_tensor(name.clone(), vec![2, 5], DType::F32);
            self.g.nodes.push(Node {
                name,
                op,
                inputs,
                outputs: vec![t],
            });
            t
        }
        fn bin(&mut self, op: BinaryOp, a: TensorId, b: TensorId) -> TensorId {
            self.node(
                Op::Binary {
                    op,
                    activation: Activation::None,
                },
                vec![a, b],
            )
        }
        fn c(&mut self, v: f32) -> TensorId {
            let name = format!("c{}", self.g.tensors.len());
            self.g.add_const(name, ConstData::from_f32(&[], vec![v]))
        }
        fn finish(mut self, y: TensorId) -> Graph {
            self.g.outputs = vec![y];
            self.g
        }
    }

    fn run(g: &Graph) -> Vec<f32> {
        let x = ConstData::from_f32(&[2, 5], (0..10).map(|i| i as f32 - 4.5).collect());
        let mut vals: HashMap<TensorId, ConstData> = HashMap::new();
        vals.insert(g.inputs[0], x);
        for n in &g.nodes {
            let ins: Vec<&ConstData> = n
                .inputs
                .iter()
                .map(|t| g.const_data(*t).or(vals.get(t)).unwrap())
                .collect();
            let out = eval::eval(&n.op, &ins).unwrap().unwrap().remove(0);
            vals.insert(n.outputs[0], out);
        }
        vals[&g.outputs[0]].to_f32_vec()
    }

    fn check(g: Graph, op: UnaryOp) {
        let mut g = g;
        let want = run(&g);
        assert_eq!(fuse_swish(&mut g), 1, "{:?}", g.nodes);
        assert_eq!(g.nodes.len(), 1, "{:?}", g.nodes);
        assert_eq!(g.nodes[0].op, Op::Unary(op));
        assert_eq!(g.nodes[0].inputs, g.inputs);
        for (a, b) in run(&g).iter().zip(&want) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn silu_in_both_orders() {
        for flip in [false, true] {
            let mut b = B::new();
            let s = b.node(Op::Unary(UnaryOp::Sigmoid), vec![b.x]);
            let y = if flip {
                b.bin(BinaryOp::Mul, s, b.x)
            } else {
                b.bin(BinaryOp::Mul, b.x, s)
            };
            check(b.finish(y), UnaryOp::Silu);
        }
    }

    #[test]
    fn hardswish_from_hardsigmoid() {
        let mut b = B::new();
        let h = b.node(
            Op::HardSigmoid {
                alpha: 1.0 / 6.0,
                beta: 0.5,
            },
            vec![b.x],
        );
        let y = b.bin(BinaryOp::Mul, h, b.x);
        check(b.finish(y), UnaryOp::HardSwish);
    }

    /// x * clip(x + 3, 0, 6) / 6 in the orderings exporters write.
    #[test]
    fn hardswish_from_clip_in_every_association() {
        for variant in 0..5 {
            let mut b = B::new();
            let three = b.c(3.0);
            let a = b.bin(BinaryOp::Add, three, b.x);
            let gate = if variant == 4 {
                Op::Unary(UnaryOp::Relu6)
            } else {
                Op::Clip { min: 0.0, max: 6.0 }
            };
            let h = b.node(gate, vec![a]);
            let y = match variant {
                // (x * h) / 6
                0 | 4 => {
                    let p = b.bin(BinaryOp::Mul, b.x, h);
                    let six = b.c(6.0);
                    b.bin(BinaryOp::Div, p, six)
                }
                // x * (h / 6)
                1 => {
                    let six = b.c(6.0);
                    let q = b.bin(BinaryOp::Div, h, six);
                    b.bin(BinaryOp::Mul, b.x, q)
                }
                // (h * x) * (1/6)
                2 => {
                    let p = b.bin(BinaryOp::Mul, h, b.x);
                    let c = b.c(1.0 / 6.0);
                    b.bin(BinaryOp::Mul, c, p)
                }
                // (x * (1/6)) * h
                _ => {
                    let c = b.c(1.0 / 6.0);
                    let xs = b.bin(BinaryOp::Mul, b.x, c);
                    b.bin(BinaryOp::Mul, xs, h)
                }
            };
            check(b.finish(y), UnaryOp::HardSwish);
        }
    }

    /// x * clip(x + 3, 0, 6) * (a / 6), the `/ 6` merged with a following scale: HardSwish,
    /// then a Mul by the left-over `a`. Also with the division by another number.
    #[test]
    fn a_left_over_constant_becomes_a_mul_after_the_hardswish() {
        for (op, c) in [(BinaryOp::Mul, 0.3 / 6.0), (BinaryOp::Div, 6.5)] {
            let mut b = B::new();
            let three = b.c(3.0);
            let a = b.bin(BinaryOp::Add, b.x, three);
            let h = b.node(Op::Clip { min: 0.0, max: 6.0 }, vec![a]);
            let p = b.bin(BinaryOp::Mul, b.x, h);
            let c = b.c(c);
            let y = b.bin(op, p, c);
            let mut g = b.finish(y);
            let want = run(&g);
            assert_eq!(fuse_swish(&mut g), 1);
            assert_eq!(g.nodes.len(), 2, "{:?}", g.nodes);
            assert_eq!(g.nodes[0].op, Op::Unary(UnaryOp::HardSwish));
            assert_eq!(g.nodes[0].inputs, g.inputs);
            assert!(matches!(
                g.nodes[1].op,
                Op::Binary {
                    op: BinaryOp::Mul,
                    ..
                }
            ));
            for (a, b) in run(&g).iter().zip(&want) {
                assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn near_misses_are_left_alone() {
        // HardSigmoid with ONNX's default alpha 0.2 is not a hard-swish gate.
        let mut b = B::new();
        let h = b.node(
            Op::HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            },
            vec![b.x],
        );
        let y = b.bin(BinaryOp::Mul, h, b.x);
        assert_eq!(fuse_swish(&mut b.finish(y)), 0);
        // The gate reading x + 3 while the product uses another value.
        let mut b = B::new();
        let three = b.c(3.0);
        let a = b.bin(BinaryOp::Add, b.x, three);
        let h = b.node(Op::Clip { min: 0.0, max: 6.0 }, vec![a]);
        let z = b.node(Op::Unary(UnaryOp::Neg), vec![b.x]);
        let y = b.bin(BinaryOp::Mul, z, h);
        assert_eq!(fuse_swish(&mut b.finish(y)), 0);
        // Sigmoid output also read elsewhere.
        let mut b = B::new();
        let s = b.node(Op::Unary(UnaryOp::Sigmoid), vec![b.x]);
        let y = b.bin(BinaryOp::Mul, b.x, s);
        let mut g = b.finish(y);
        g.outputs.push(s);
        assert_eq!(fuse_swish(&mut g), 0);
        // x * sigmoid(z) with z != x
        let mut b = B::new();
        let z = b.node(Op::Unary(UnaryOp::Neg), vec![b.x]);
        let s = b.node(Op::Unary(UnaryOp::Sigmoid), vec![z]);
        let y = b.bin(BinaryOp::Mul, b.x, s);
        assert_eq!(fuse_swish(&mut b.finish(y)), 0);
    }
}
