//! Recognises GELU written out with Erf, as PyTorch exports `nn.GELU()`:
//! `x * 0.5 * (1 + erf(x / sqrt(2)))` in any association of the products, and replaces it by one
//! GELU op (TFLite has GELU but no Erf); and its tanh form, as JAX, TensorFlow and
//! `nn.GELU(approximate="tanh")` write it out: `x * 0.5 * (1 + tanh(sqrt(2/π) * (x + 0.044715 x³)))`
//! with the polynomial in any arrangement of Mul/Add/Pow by constants, by one approximate GELU. Full
//! int8 then runs one table lookup instead of eight rounded ops, one of them the cube of the input,
//! whose range is its input's cubed.

use crate::ir::{BinaryOp, Graph, Node, Op, TensorId, UnaryOp};
use std::collections::HashMap;

fn scalar(g: &Graph, t: TensorId) -> Option<f32> {
    let d = g.const_data(t)?;
    (d.len() == 1).then(|| d.to_f32_vec()[0])
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-4 * b.abs().max(1.0)
}

/// `x` where `t = x / sqrt(2)` or `x * (1/sqrt(2))`.
fn erf_argument(g: &Graph, producers: &HashMap<TensorId, usize>, t: TensorId) -> Option<TensorId> {
    let d = &g.nodes[*producers.get(&t)?];
    match (&d.op, scalar(g, d.inputs[1])) {
        (
            Op::Binary {
                op: BinaryOp::Div, ..
            },
            Some(c),
        ) if close(c, std::f32::consts::SQRT_2) => Some(d.inputs[0]),
        (
            Op::Binary {
                op: BinaryOp::Mul, ..
            },
            Some(c),
        ) if close(c, std::f32::consts::FRAC_1_SQRT_2) => Some(d.inputs[0]),
        _ => None,
    }
}

/// How deep a polynomial of one tensor may be written (a cap on the search).
const MAX_POLYNOMIAL_DEPTH: usize = 6;

/// The arithmetic of a node a polynomial may be written with.
fn polynomial_step(n: &Node) -> Option<BinaryOp> {
    match n.op {
        Op::Binary {
            op: op @ (BinaryOp::Mul | BinaryOp::Add | BinaryOp::Sub | BinaryOp::Div | BinaryOp::Pow),
            activation: crate::ir::Activation::None,
        } if n.inputs.len() == 2 => Some(op),
        _ => None,
    }
}

/// `t`'s value at `x = v`, where `t` is computed from `x` and scalar constants by at most
/// `depth` levels of [`polynomial_step`] nodes (else None).
fn value_at(
    g: &Graph,
    producers: &HashMap<TensorId, usize>,
    t: TensorId,
    x: TensorId,
    v: f64,
    depth: usize,
) -> Option<f64> {
    if t == x {
        return Some(v);
    }
    if let Some(c) = scalar(g, t) {
        return Some(c as f64);
    }
    let n = &g.nodes[*producers.get(&t)?];
    let step = polynomial_step(n)?;
    if depth == 0 || g.shape(t) != g.shape(x) {
        return None;
    }
    let a = value_at(g, producers, n.inputs[0], x, v, depth - 1)?;
    let b = value_at(g, producers, n.inputs[1], x, v, depth - 1)?;
    Some(match step {
        BinaryOp::Mul => a * b,
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Div => a / b,
        _ => a.powf(b),
    })
}

/// The tensors the polynomial nodes under `t` read (the candidates for its variable).
fn polynomial_inputs(
    g: &Graph,
    producers: &HashMap<TensorId, usize>,
    t: TensorId,
) -> Vec<TensorId> {
    let (mut found, mut level) = (vec![], vec![t]);
    for _ in 0..MAX_POLYNOMIAL_DEPTH {
        let mut next = vec![];
        for u in level {
            let Some(n) = producers.get(&u).map(|&i| &g.nodes[i]) else {
                continue;
            };
            if polynomial_step(n).is_none() {
                continue;
            }
            for &i in &n.inputs {
                if scalar(g, i).is_none() && !found.contains(&i) {
                    found.push(i);
                    next.push(i);
                }
            }
        }
        level = next;
    }
    found
}

/// `x` where `t = sqrt(2/π) * (x + 0.044715 x³)`, however the polynomial is written: checked by
/// evaluating it at points where its two terms weigh differently.
fn tanh_argument(g: &Graph, producers: &HashMap<TensorId, usize>, t: TensorId) -> Option<TensorId> {
    const A: f64 = 0.797_884_560_802_865_4; // sqrt(2/π)
    const B: f64 = A * 0.044_715;
    polynomial_inputs(g, producers, t).into_iter().find(|&x| {
        [-4.0, -1.5, -0.3, 0.2, 1.0, 2.5, 6.0].iter().all(|&v| {
            let want = A * v + B * v * v * v;
            value_at(g, producers, t, x, v, MAX_POLYNOMIAL_DEPTH)
                .is_some_and(|got| (got - want).abs() <= 1e-4 * want.abs().max(1.0))
        })
    })
}

/// Fuses every GELU pattern; returns how many were fused.
pub fn fuse_gelu(g: &mut Graph) -> usize {
    let mut fused = 0;
    loop {
        let producers = g.producers();
        let uses = g.use_counts();
        let mut consumers: HashMap<TensorId, Vec<usize>> = HashMap::new();
        for (i, n) in g.nodes.iter().enumerate() {
            for &t in &n.inputs {
                consumers.entry(t).or_default().push(i);
            }
        }
        let bin = |n: &Node, op: BinaryOp| matches!(n.op, Op::Binary { op: o, activation: crate::ir::Activation::None } if o == op);
        let other = |n: &Node, t: TensorId| {
            if n.inputs[0] == t {
                n.inputs[1]
            } else {
                n.inputs[0]
            }
        };
        let mut found = None;
        'search: for (ei, erf) in g.nodes.iter().enumerate() {
            let (x, approximate) = match erf.op {
                Op::Unary(UnaryOp::Erf) => (erf_argument(g, &producers, erf.inputs[0]), false),
                Op::Unary(UnaryOp::Tanh) => (tanh_argument(g, &producers, erf.inputs[0]), true),
                _ => continue,
            };
            let Some(x) = x else { continue };
            // 1 + erf(...) or 1 + tanh(...)
            let e_out = erf.outputs[0];
            let Some([ai]) = consumers.get(&e_out).map(|v| v.as_slice()) else {
                continue;
            };
            let add = &g.nodes[*ai];
            if !bin(add, BinaryOp::Add)
                || scalar(g, other(add, e_out)).is_none_or(|c| !close(c, 1.0))
            {
                continue;
            }
            // Up to two Muls bring in x and 0.5 (possibly as x*0.5 computed aside).
            let mut cur = add.outputs[0];
            let mut half = 1.0f32;
            let mut has_x = false;
            for _ in 0..2 {
                if uses.get(&cur) != Some(&1) {
                    break;
                }
                let Some([mi]) = consumers.get(&cur).map(|v| v.as_slice()) else {
                    break;
                };
                let m = &g.nodes[*mi];
                if !bin(m, BinaryOp::Mul) {
                    break;
                }
                let o = other(m, cur);
                if let Some(c) = scalar(g, o) {
                    half *= c;
                } else if o == x && !has_x {
                    has_x = true;
                } else if let Some(&pi) = producers.get(&o) {
                    let p = &g.nodes[pi];
                    match (bin(p, BinaryOp::Mul), p.inputs.iter().position(|&t| t == x)) {
                        (true, Some(k)) if !has_x => match scalar(g, p.inputs[1 - k]) {
                            Some(c) => {
                                half *= c;
                                has_x = true;
                            }
                            None => break,
                        },
                        _ => break,
                    }
                } else {
                    break;
                }
                cur = m.outputs[0];
                if has_x && close(half, 0.5) {
                    found = Some((ei, x, cur, approximate));
                    break 'search;
                }
            }
        }
        let Some((ei, x, out, approximate)) = found else {
            break;
        };
        let name = g.nodes[ei].name.clone();
        // Produce `out` with one GELU placed where the Erf or Tanh was (x is available there).
        let fresh = g.add_tensor(
            g.fresh_name(&format!("{}_gelu", g.tensors[out].name)),
            g.shape(out).to_vec(),
            g.tensors[out].dtype,
        );
        g.nodes.insert(
            ei,
            Node {
                name: format!("{name}/gelu"),
                op: Op::Unary(UnaryOp::Gelu { approximate }),
                inputs: vec![x],
                outputs: vec![fresh],
            },
        );
        g.replace_uses(out, fresh);
        // Keep the output's name (it may be a graph output).
        let out_name = std::mem::take(&mut g.tensors[out].name);
        g.tensors[out].name = format!("{out_name}_unfused");
        g.tensors[fresh].name = out_name;
        g.remove_dead();
        fused += 1;
    }
    fused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::builder::{ftensor, OnnxBuilder};

    /// GELU's tanh form on a [1, 4, 8] input as `body` writes its tanh argument from "x".
    fn tanh_gelu(body: impl Fn(&mut OnnxBuilder)) -> Graph {
        let mut b = OnnxBuilder::new(13);
        b.input("x", &[1, 4, 8]);
        for (name, v) in [
            ("c", 0.044_715f32),
            ("a", 0.797_884_6),
            ("b", 0.035_677_41),
            ("three", 3.0),
            ("one", 1.0),
            ("half", 0.5),
        ] {
            b.init(ftensor(name, &[], vec![v]));
        }
        body(&mut b);
        b.node("Tanh", "tanh", &["u"], &["t"], vec![]);
        b.node("Add", "one_plus", &["one", "t"], &["s"], vec![]);
        b.node("Mul", "halve", &["half", "s"], &["h"], vec![]);
        b.node("Mul", "times_x", &["x", "h"], &["y"], vec![]);
        b.output("y");
        b.import().unwrap()
    }

    fn ops(g: &Graph) -> Vec<Op> {
        g.nodes.iter().map(|n| n.op.clone()).collect()
    }

    #[test]
    fn the_tanh_form_as_jax_writes_it_becomes_one_approximate_gelu() {
        // x + c·x·x·x, as jax2tf exports jax.nn.gelu(approximate=True).
        let mut g = tanh_gelu(|b| {
            b.node("Mul", "cx", &["c", "x"], &["cx"], vec![]);
            b.node("Mul", "cx2", &["x", "cx"], &["cx2"], vec![]);
            b.node("Mul", "cx3", &["x", "cx2"], &["cx3"], vec![]);
            b.node("Add", "inner", &["x", "cx3"], &["p"], vec![]);
            b.node("Mul", "scale", &["a", "p"], &["u"], vec![]);
        });
        assert_eq!(fuse_gelu(&mut g), 1);
        assert_eq!(ops(&g), [Op::Unary(UnaryOp::Gelu { approximate: true })]);
        assert_eq!(g.nodes[0].inputs, g.inputs);
        assert_eq!(g.nodes[0].outputs, g.outputs);
    }

    #[test]
    fn the_tanh_form_with_pow_and_distributed_constants_fuses_too() {
        // a·x + b·x³ with Pow: the same polynomial, other nodes.
        let mut g = tanh_gelu(|b| {
            b.node("Pow", "cube", &["x", "three"], &["x3"], vec![]);
            b.node("Mul", "bx3", &["x3", "b"], &["bx3"], vec![]);
            b.node("Mul", "ax", &["x", "a"], &["ax"], vec![]);
            b.node("Add", "sum", &["ax", "bx3"], &["u"], vec![]);
        });
        assert_eq!(fuse_gelu(&mut g), 1);
        assert_eq!(ops(&g), [Op::Unary(UnaryOp::Gelu { approximate: true })]);
    }

    #[test]
    fn another_polynomial_under_the_tanh_is_left_alone() {
        // x + c·x²: not GELU's argument.
        let mut g = tanh_gelu(|b| {
            b.node("Mul", "cx", &["c", "x"], &["cx"], vec![]);
            b.node("Mul", "cx2", &["x", "cx"], &["cx2"], vec![]);
            b.node("Add", "inner", &["x", "cx2"], &["p"], vec![]);
            b.node("Mul", "scale", &["a", "p"], &["u"], vec![]);
        });
        let before = g.clone();
        assert_eq!(fuse_gelu(&mut g), 0);
        assert_eq!(g, before);
    }
}
