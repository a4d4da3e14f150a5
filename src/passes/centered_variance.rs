//! A variance computed from the moments, `E[x²] - E[x]²` (jax2tf writes JAX's LayerNorm so, and
//! a normalisation over any axis set that the LayerNorm recognizer does not take stays in that
//! form), becomes the mean of the squared deviation `E[(x - E[x])²]`:
//!
//! ```text
//! v = Mean(x * x | Pow(x, 2), axes) - m * m | Pow(m, 2),   m = Mean(x, axes)
//!   →  v = Mean(SquaredDifference(x, Mean(x, axes, keep_dims)), axes)
//! ```
//!
//! where each mean is a `ReduceMean` or a `ReduceSum` times `1/k` (`k` elements reduced). The two
//! are equal in exact arithmetic; the first subtracts two values of the size of the squared mean
//! to get one of the size of the variance. Where the mean is large against the spread (magika's
//! first LayerNorm: mean 0.55, variance 1e-4 to 0.02 across its columns), int8 gives both terms
//! a step larger than most variances and the difference rounds to 0 or a few steps, so the
//! reciprocal square root after it is wrong by orders of magnitude; float loses digits the same
//! way. The squared deviation keeps the variance's own range.

use crate::ir::{BinaryOp, DType, Graph, Node, Op, ReduceOp, TensorId};

/// How a node reduces: the input, the sorted axes and whether it keeps them.
struct MeanOf {
    x: TensorId,
    axes: Vec<usize>,
    keep_dims: bool,
}

fn binary(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: crate::ir::Activation::None,
    }
}

fn scalar(g: &Graph, t: TensorId) -> Option<f32> {
    let d = g.const_data(t)?;
    (d.len() == 1 && d.dtype() == DType::F32).then(|| d.to_f32_vec()[0])
}

/// `t` as a mean: `ReduceMean(x, axes)` or `ReduceSum(x, axes) * (1/k)` with `k` the number of
/// elements each output sums.
fn mean_of(
    g: &Graph,
    producers: &std::collections::HashMap<TensorId, usize>,
    t: TensorId,
) -> Option<MeanOf> {
    let reduce = |n: &Node, want: ReduceOp| match &n.op {
        Op::Reduce {
            op,
            axes,
            keep_dims,
        } if *op == want && !axes.is_empty() => {
            let mut axes = axes.clone();
            axes.sort_unstable();
            Some(MeanOf {
                x: n.inputs[0],
                axes,
                keep_dims: *keep_dims,
            })
        }
        _ => None,
    };
    let n = &g.nodes[*producers.get(&t)?];
    if let Some(m) = reduce(n, ReduceOp::Mean) {
        return Some(m);
    }
    if n.op != binary(BinaryOp::Mul) {
        return None;
    }
    let (sum, c) = match (scalar(g, n.inputs[0]), scalar(g, n.inputs[1])) {
        (None, Some(c)) => (n.inputs[0], c),
        (Some(c), None) => (n.inputs[1], c),
        _ => return None,
    };
    let m = reduce(&g.nodes[*producers.get(&sum)?], ReduceOp::Sum)?;
    let shape = g.shape(m.x);
    let k: usize = m
        .axes
        .iter()
        .map(|&a| shape.get(a).copied())
        .product::<Option<usize>>()?;
    (k > 0 && (c * k as f32 - 1.0).abs() < 1e-5).then_some(m)
}

/// `t = u * u` or `Pow(u, 2)`: returns u.
fn square_of(
    g: &Graph,
    producers: &std::collections::HashMap<TensorId, usize>,
    t: TensorId,
) -> Option<TensorId> {
    let n = &g.nodes[*producers.get(&t)?];
    if n.op == binary(BinaryOp::Mul) && n.inputs[0] == n.inputs[1] {
        return Some(n.inputs[0]);
    }
    (n.op == binary(BinaryOp::Pow) && scalar(g, n.inputs[1]) == Some(2.0)).then(|| n.inputs[0])
}

/// The moments-form variance whose `Sub` is node `si`: (x, axes, keep_dims).
fn match_at(
    g: &Graph,
    producers: &std::collections::HashMap<TensorId, usize>,
    si: usize,
) -> Option<MeanOf> {
    let sub = &g.nodes[si];
    if sub.op != binary(BinaryOp::Sub) {
        return None;
    }
    let out_shape = g.shape(sub.outputs[0]);
    let (e2, mm) = (sub.inputs[0], sub.inputs[1]);
    if g.shape(e2) != out_shape || g.shape(mm) != out_shape {
        return None;
    }
    let squares = mean_of(g, producers, e2)?;
    let x = square_of(g, producers, squares.x)?;
    let mean = mean_of(g, producers, square_of(g, producers, mm)?)?;
    (mean.x == x
        && mean.axes == squares.axes
        && mean.keep_dims == squares.keep_dims
        && g.tensors[x].dtype == DType::F32
        && g.shape(squares.x) == g.shape(x))
    .then_some(mean)
}

/// Rewrites every moments-form variance; returns how many.
pub fn center_variance(g: &mut Graph) -> usize {
    let mut rewritten = 0;
    loop {
        let producers = g.producers();
        let Some((si, m)) = (0..g.nodes.len()).find_map(|i| Some((i, match_at(g, &producers, i)?)))
        else {
            break;
        };
        let name = g.nodes[si].name.clone();
        let x_shape = g.shape(m.x).to_vec();
        let mut kept = x_shape.clone();
        for &a in &m.axes {
            kept[a] = 1;
        }
        let mean_name = g.fresh_name(&format!("{name}_centered_mean"));
        let mean = g.add_tensor(mean_name, kept, DType::F32);
        let dev_name = g.fresh_name(&format!("{name}_squared_deviation"));
        let dev = g.add_tensor(dev_name, x_shape, DType::F32);
        let reduce = |keep_dims| Op::Reduce {
            op: ReduceOp::Mean,
            axes: m.axes.clone(),
            keep_dims,
        };
        // x exists before the Sub: the chain takes the Sub's place and writes its output.
        g.nodes[si] = Node {
            name: format!("{name}/variance"),
            op: reduce(m.keep_dims),
            inputs: vec![dev],
            outputs: g.nodes[si].outputs.clone(),
        };
        g.nodes.insert(
            si,
            Node {
                name: format!("{name}/squared_deviation"),
                op: binary(BinaryOp::SquaredDifference),
                inputs: vec![m.x, mean],
                outputs: vec![dev],
            },
        );
        g.nodes.insert(
            si,
            Node {
                name: format!("{name}/mean"),
                op: reduce(true),
                inputs: vec![m.x],
                outputs: vec![mean],
            },
        );
        g.remove_dead();
        rewritten += 1;
    }
    rewritten
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ConstData;

    /// `Max(Sum(x*x, axis 1)/k - (Sum(x, axis 1)/k)², 0)` over a [2, 4, 3] input, as jax2tf writes it.
    fn moments_graph() -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![2, 4, 3], DType::F32);
        g.inputs.push(x);
        let quarter = g.add_const("quarter", ConstData::from_f32(&[], vec![0.25]));
        let zero = g.add_const("zero", ConstData::from_f32(&[], vec![0.0]));
        let t = |g: &mut Graph, n: &str, s: &[usize]| g.add_tensor(n, s.to_vec(), DType::F32);
        let (sq, s2, e2, s1, m, mm, v, out) = (
            t(&mut g, "sq", &[2, 4, 3]),
            t(&mut g, "s2", &[2, 3]),
            t(&mut g, "e2", &[2, 3]),
            t(&mut g, "s1", &[2, 3]),
            t(&mut g, "m", &[2, 3]),
            t(&mut g, "mm", &[2, 3]),
            t(&mut g, "v", &[2, 3]),
            t(&mut g, "out", &[2, 3]),
        );
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![1],
            keep_dims: false,
        };
        let node = |name: &str, op: Op, inputs: Vec<TensorId>, out: TensorId| Node {
            name: name.into(),
            op,
            inputs,
            outputs: vec![out],
        };
        g.nodes = vec![
            node("square", binary(BinaryOp::Mul), vec![x, x], sq),
            node("sum_sq", sum.clone(), vec![sq], s2),
            node("mean_sq", binary(BinaryOp::Mul), vec![s2, quarter], e2),
            node("sum", sum, vec![x], s1),
            node("mean", binary(BinaryOp::Mul), vec![quarter, s1], m),
            node("mean_squared", binary(BinaryOp::Mul), vec![m, m], mm),
            node("variance", binary(BinaryOp::Sub), vec![e2, mm], v),
            node("clamp", binary(BinaryOp::Max), vec![v, zero], out),
        ];
        g.outputs.push(out);
        g
    }

    /// Runs `g` node by node on the constant evaluator; returns its output.
    fn run(g: &Graph, input: ConstData) -> Vec<f32> {
        let mut values: std::collections::HashMap<TensorId, ConstData> =
            std::collections::HashMap::from([(g.inputs[0], input)]);
        for n in &g.nodes {
            let inputs: Vec<&ConstData> = n
                .inputs
                .iter()
                .map(|t| values.get(t).or_else(|| g.const_data(*t)).unwrap())
                .collect();
            let result = crate::ir::eval::eval(&n.op, &inputs).unwrap().unwrap();
            values.insert(n.outputs[0], result.into_iter().next().unwrap());
        }
        values[&g.outputs[0]].to_f32_vec()
    }

    #[test]
    fn moments_variance_becomes_the_mean_squared_deviation_with_the_same_values() {
        let mut g = moments_graph();
        // A large mean over a small spread: the moments lose most digits in f32.
        let input: Vec<f32> = (0..24)
            .map(|i| 1000.0 + (i * 7 % 5) as f32 * 0.01)
            .collect();
        let data = ConstData::from_f32(&[2, 4, 3], input.clone());
        let before = run(&g, data.clone());
        assert_eq!(center_variance(&mut g), 1);
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(
            ops,
            ["ReduceMean", "SquaredDifference", "ReduceMean", "Max"]
        );
        let after = run(&g, data);
        // Exact variances in f64, column by column.
        for b in 0..2 {
            for c in 0..3 {
                let col: Vec<f64> = (0..4).map(|r| input[b * 12 + r * 3 + c] as f64).collect();
                let mean = col.iter().sum::<f64>() / 4.0;
                let var = col.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0;
                let got = after[b * 3 + c] as f64;
                assert!((got - var).abs() <= 1e-3 * var.max(1e-6), "{got} vs {var}");
                // The moments in f32 were far off (or clamped to 0).
                assert!((before[b * 3 + c] as f64 - var).abs() > 1e-2 * var || var == 0.0);
            }
        }
        assert_eq!(center_variance(&mut g), 0);
    }

    #[test]
    fn a_sum_of_squares_that_is_not_their_mean_is_left_alone() {
        let mut g = moments_graph();
        // Half the sum of squares is not their mean over 4 elements.
        let half = g.add_const("half", ConstData::from_f32(&[], vec![0.5]));
        let i = g.nodes.iter().position(|n| n.name == "mean_sq").unwrap();
        g.nodes[i].inputs[1] = half;
        let before = g.clone();
        assert_eq!(center_variance(&mut g), 0);
        assert_eq!(g, before);
    }
}
