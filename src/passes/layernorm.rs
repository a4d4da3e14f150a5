//! LayerNorm written out as exporters (older PyTorch, TF) emit it, over the last axis:
//!
//! ```text
//! m = ReduceMean(x, [-1], keepdims)      d = x - m
//! v = ReduceMean(Pow(d, 2) | d * d | SquaredDifference(x, m), [-1], keepdims)
//! n = d / Sqrt(v + eps)  |  d * Reciprocal(Sqrt(v + eps))  |  d * Rsqrt(v + eps)  |  d * Pow(v + eps, -0.5)
//! y = n [* gamma] [+ beta]               (gamma, beta constant along the last axis)
//! ```
//!
//! and as JAX's LayerNorm reaches ONNX through jax2tf and tf2onnx, from the moments:
//!
//! ```text
//! m = ReduceSum(x, [-1]) * (1/k)          v = Max(ReduceSum(x * x, [-1]) * (1/k) - m * m, 0)
//! n = (x - Expand(Reshape(m))) * (1 / Sqrt(Expand(Reshape(v)) + eps) [* gamma])   [+ beta]
//! ```
//!
//! becomes one `LayerNorm { axis: last }` (inputs x, gamma or ones, optional beta). Only exact
//! matches fold: every intermediate has exactly the consumers of the pattern and is no graph
//! output, eps is a finite constant scalar, and no constant broadcasts a value to a new shape.
//!
//! [`fold_layernorm_affine`] then moves a LayerNorm's gamma/beta into the dense layers that are
//! its only readers (`FC(n * gamma + beta) = n · (W diag gamma)ᵀ + (W beta + b)`), which removes
//! the MUL and ADD the lowering would otherwise emit — the pre-norm transformer case.

use crate::ir::{
    Activation, BinaryOp, ConstData, DType, Graph, Node, Op, ReduceOp, TensorId, UnaryOp,
};
use std::collections::HashMap;

struct View<'g> {
    g: &'g Graph,
    /// Consumer nodes of each tensor (a node reading a tensor twice appears twice).
    consumers: HashMap<TensorId, Vec<usize>>,
    producers: HashMap<TensorId, usize>,
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
            consumers,
            producers: g.producers(),
        }
    }

    fn producer(&self, t: TensorId) -> Option<&'g Node> {
        self.producers.get(&t).map(|&i| &self.g.nodes[i])
    }

    fn consumers(&self, t: TensorId) -> &[usize] {
        self.consumers.get(&t).map_or(&[], |v| v.as_slice())
    }

    /// The only consumer node of `t` (read once, not a graph output).
    fn sole(&self, t: TensorId) -> Option<(usize, &'g Node)> {
        match self.consumers(t) {
            [i] if !self.g.outputs.contains(&t) => Some((*i, &self.g.nodes[*i])),
            _ => None,
        }
    }

    fn scalar(&self, t: TensorId) -> Option<f32> {
        let d = self.g.const_data(t)?;
        (d.len() == 1 && d.dtype() == DType::F32).then(|| d.to_f32_vec()[0])
    }
}

fn is_bin(n: &Node, op: BinaryOp) -> bool {
    n.op == Op::Binary {
        op,
        activation: Activation::None,
    }
}

/// The operand of binary node `n` that is not `t` (None if `t` is not an operand).
fn other(n: &Node, t: TensorId) -> Option<TensorId> {
    match n.inputs.as_slice() {
        [a, b] if *a == t => Some(*b),
        [a, b] if *b == t => Some(*a),
        _ => None,
    }
}

fn is_mean_last(op: &Op, rank: usize) -> bool {
    matches!(op, Op::Reduce { op: ReduceOp::Mean, axes, keep_dims: true } if rank > 0 && axes.as_slice() == [rank - 1])
}

/// A constant that varies at most along the last axis of a rank-`rank` value with `k` elements
/// there, as a [k] vector.
fn per_last_axis(d: &ConstData, rank: usize, k: usize) -> Option<Vec<f32>> {
    let shape = d.shape();
    if d.dtype() != DType::F32 || shape.len() > rank {
        return None;
    }
    let (last, lead) = shape.split_last().unwrap_or((&1, &[]));
    if lead.iter().any(|&s| s != 1) || (*last != k && *last != 1) {
        return None;
    }
    let v = d.to_f32_vec();
    Some(if v.len() == k { v } else { vec![v[0]; k] })
}

struct Found {
    /// The node whose output the LayerNorm now produces.
    last: usize,
    x: TensorId,
    epsilon: f32,
    gamma: Option<Vec<f32>>,
    beta: Option<Vec<f32>>,
}

/// Matches the pattern whose first mean is node `mi`.
fn match_at(v: &View, mi: usize) -> Option<Found> {
    let g = v.g;
    let m = &g.nodes[mi];
    let x = m.inputs[0];
    let shape = g.shape(x);
    let rank = shape.len();
    if !is_mean_last(&m.op, rank)
        || g.tensors[x].dtype != DType::F32
        || g.outputs.contains(&m.outputs[0])
    {
        return None;
    }
    let k = shape[rank - 1];
    let mean = m.outputs[0];
    // d = x - m, and maybe SquaredDifference(x, m) for the variance.
    let mut sub = None;
    let mut sqdiff = None;
    for &ci in v.consumers(mean) {
        let c = &g.nodes[ci];
        if is_bin(c, BinaryOp::Sub) && c.inputs == [x, mean] && sub.is_none() {
            sub = Some(c);
        } else if is_bin(c, BinaryOp::SquaredDifference)
            && other(c, mean) == Some(x)
            && sqdiff.is_none()
        {
            sqdiff = Some(c);
        } else {
            return None;
        }
    }
    let d = sub?.outputs[0];
    if g.shape(d) != shape || g.outputs.contains(&d) {
        return None;
    }
    // The square feeding the variance, and the one other reader of d (the normalization).
    let (sq, norm_node) = match sqdiff {
        Some(s) => match v.consumers(d) {
            [ni] => (s.outputs[0], *ni),
            _ => return None,
        },
        None => {
            let cs = v.consumers(d);
            let is_square = |i: usize| {
                let c = &g.nodes[i];
                (is_bin(c, BinaryOp::Mul) && c.inputs == [d, d])
                    || (is_bin(c, BinaryOp::Pow)
                        && c.inputs[0] == d
                        && v.scalar(c.inputs[1]) == Some(2.0))
            };
            match cs {
                // d * d reads d twice
                [a, b, c] if a == b && is_square(*a) && c != a => (g.nodes[*a].outputs[0], *c),
                [c, a, b] if a == b && is_square(*a) && c != a => (g.nodes[*a].outputs[0], *c),
                [a, b] if is_square(*a) && !is_square(*b) => (g.nodes[*a].outputs[0], *b),
                [b, a] if is_square(*a) && !is_square(*b) => (g.nodes[*a].outputs[0], *b),
                _ => return None,
            }
        }
    };
    if g.shape(sq) != shape {
        return None;
    }
    // v = mean(sq); ve = v + eps
    let (_, vn) = v.sole(sq)?;
    if !is_mean_last(&vn.op, rank) {
        return None;
    }
    let var = vn.outputs[0];
    let (_, an) = v.sole(var)?;
    let eps_t = other(an, var)?;
    let epsilon = v.scalar(eps_t).filter(|e| e.is_finite())?;
    let ve = an.outputs[0];
    if !is_bin(an, BinaryOp::Add) || g.shape(ve) != g.shape(var) {
        return None;
    }
    // The normalization: d / sqrt(ve), or d * r with r = 1/sqrt(ve), rsqrt(ve), ve^-0.5.
    let (_, sn) = v.sole(ve)?;
    let s = sn.outputs[0];
    let r = match &sn.op {
        Op::Unary(UnaryOp::Sqrt) => {
            let (ni, nn) = v.sole(s)?;
            if ni == norm_node && is_bin(nn, BinaryOp::Div) && nn.inputs == [d, s] {
                None
            } else if is_bin(nn, BinaryOp::Div)
                && nn.inputs[1] == s
                && v.scalar(nn.inputs[0]) == Some(1.0)
            {
                Some(nn.outputs[0])
            } else {
                return None;
            }
        }
        Op::Unary(UnaryOp::Rsqrt) => Some(s),
        _ if is_bin(sn, BinaryOp::Pow)
            && sn.inputs[0] == ve
            && v.scalar(sn.inputs[1]) == Some(-0.5) =>
        {
            Some(s)
        }
        _ => return None,
    };
    if let Some(r) = r {
        let (ni, nn) = v.sole(r)?;
        if ni != norm_node
            || !is_bin(nn, BinaryOp::Mul)
            || other(nn, r) != Some(d)
            || g.shape(r) != g.shape(var)
        {
            return None;
        }
    }
    let nn = &g.nodes[norm_node];
    let mut last = norm_node;
    let mut cur = nn.outputs[0];
    if g.shape(cur) != shape {
        return None;
    }
    // Optional affine: * gamma, then + beta (each a constant along the last axis).
    let mut gamma = None;
    let mut beta = None;
    for op in [BinaryOp::Mul, BinaryOp::Add] {
        let Some((ci, c)) = v.sole(cur) else { break };
        if !is_bin(c, op) || g.shape(c.outputs[0]) != shape {
            continue;
        }
        let Some(vec) = other(c, cur)
            .and_then(|t| g.const_data(t))
            .and_then(|cd| per_last_axis(cd, rank, k))
        else {
            continue;
        };
        if op == BinaryOp::Mul {
            gamma = Some(vec);
        } else {
            beta = Some(vec);
        }
        last = ci;
        cur = c.outputs[0];
    }
    Some(Found {
        last,
        x,
        epsilon,
        gamma,
        beta,
    })
}

/// `t = ReduceSum(x, [last]) * (1/k)`: the mean over the last axis as jax2tf writes it. Returns x.
fn mean_of(v: &View, t: TensorId) -> Option<TensorId> {
    let g = v.g;
    let mul = v.producer(t)?;
    if !is_bin(mul, BinaryOp::Mul) {
        return None;
    }
    let (s, c) = match (v.scalar(mul.inputs[0]), v.scalar(mul.inputs[1])) {
        (None, Some(c)) => (mul.inputs[0], c),
        (Some(c), None) => (mul.inputs[1], c),
        _ => return None,
    };
    let sum = v.producer(s)?;
    let x = *sum.inputs.first()?;
    let rank = g.shape(x).len();
    let k = *g.shape(x).last()? as f32;
    let sum_last = matches!(&sum.op, Op::Reduce { op: ReduceOp::Sum, axes, .. } if rank > 0 && axes.as_slice() == [rank - 1]);
    (sum_last && v.sole(s).is_some() && (c * k - 1.0).abs() < 1e-5).then_some(x)
}

/// Follows `t` through the Reshape/Expand nodes that are its only readers.
fn through_shape_ops(v: &View, mut t: TensorId) -> TensorId {
    while let Some((_, n)) = v.sole(t) {
        if !matches!(n.op, Op::Reshape { .. } | Op::Expand { .. }) || n.inputs[0] != t {
            break;
        }
        t = n.outputs[0];
    }
    t
}

/// The moments form (see the module doc), anchored at the variance's `Sub` node `si`.
fn match_moments_at(v: &View, si: usize) -> Option<Found> {
    let g = v.g;
    let sub = &g.nodes[si];
    if !is_bin(sub, BinaryOp::Sub) {
        return None;
    }
    let (e2, mm) = (sub.inputs[0], sub.inputs[1]);
    let sq_mean = v.producer(mm)?;
    if !is_bin(sq_mean, BinaryOp::Mul) || sq_mean.inputs[0] != sq_mean.inputs[1] {
        return None;
    }
    let m = sq_mean.inputs[0];
    let x = mean_of(v, m)?;
    let sq = mean_of(v, e2)?;
    let sqn = v.producer(sq)?;
    let shape = g.shape(x);
    let rank = shape.len();
    let k = shape[rank - 1];
    if !is_bin(sqn, BinaryOp::Mul)
        || sqn.inputs != [x, x]
        || g.tensors[x].dtype != DType::F32
        || v.sole(sq).is_none()
        || v.sole(e2).is_none()
        || v.sole(mm).is_none()
    {
        return None;
    }
    // The variance: optionally clamped at 0, reshaped back to [.., 1], plus eps.
    let mut t = sub.outputs[0];
    let (_, n) = v.sole(t)?;
    if is_bin(n, BinaryOp::Max) && other(n, t).and_then(|c| v.scalar(c)) == Some(0.0) {
        t = n.outputs[0];
    }
    let t = through_shape_ops(v, t);
    let (_, an) = v.sole(t)?;
    let epsilon = other(an, t)
        .and_then(|c| v.scalar(c))
        .filter(|e| e.is_finite())?;
    if !is_bin(an, BinaryOp::Add) {
        return None;
    }
    let ve = an.outputs[0];
    // 1 / sqrt(ve), or rsqrt(ve).
    let (_, sn) = v.sole(ve)?;
    let s = sn.outputs[0];
    let r = match &sn.op {
        Op::Unary(UnaryOp::Sqrt) => {
            let (_, dn) = v.sole(s)?;
            if !(is_bin(dn, BinaryOp::Div)
                && dn.inputs[1] == s
                && v.scalar(dn.inputs[0]) == Some(1.0))
            {
                return None;
            }
            dn.outputs[0]
        }
        Op::Unary(UnaryOp::Rsqrt) => s,
        _ => return None,
    };
    let stat_shape = g.shape(r);
    if stat_shape.len() != rank
        || stat_shape[rank - 1] != 1
        || stat_shape[..rank - 1] != shape[..rank - 1]
    {
        return None;
    }
    // Optional gamma on the reciprocal.
    let (_, gn) = v.sole(r)?;
    let (scale, gamma) = match other(gn, r)
        .and_then(|c| g.const_data(c))
        .and_then(|cd| per_last_axis(cd, rank, k))
    {
        Some(gv) if is_bin(gn, BinaryOp::Mul) => (gn.outputs[0], Some(gv)),
        _ => (r, None),
    };
    // The mean's other reader: reshaped back to [.., 1], subtracted from x.
    let mut mean_readers: Vec<usize> = v.consumers(m).to_vec();
    let sq_mean_index = *v.producers.get(&mm)?;
    mean_readers.retain(|&i| i != sq_mean_index);
    let [mr] = mean_readers.as_slice() else {
        return None;
    };
    let rn = &g.nodes[*mr];
    if !matches!(rn.op, Op::Reshape { .. } | Op::Expand { .. }) || g.outputs.contains(&m) {
        return None;
    }
    let mb = through_shape_ops(v, rn.outputs[0]);
    let (_, dn) = v.sole(mb)?;
    if !is_bin(dn, BinaryOp::Sub) || dn.inputs != [x, mb] || g.shape(dn.outputs[0]) != shape {
        return None;
    }
    let d = dn.outputs[0];
    let (yi, yn) = v.sole(d)?;
    if !is_bin(yn, BinaryOp::Mul) || other(yn, d) != Some(scale) || v.sole(scale)?.0 != yi {
        return None;
    }
    let mut last = yi;
    let mut beta = None;
    let y = yn.outputs[0];
    if g.shape(y) != shape {
        return None;
    }
    if let Some((bi, bn)) = v.sole(y) {
        if let Some(bv) = other(bn, y)
            .and_then(|c| g.const_data(c))
            .and_then(|cd| per_last_axis(cd, rank, k))
            .filter(|_| is_bin(bn, BinaryOp::Add) && g.shape(bn.outputs[0]) == shape)
        {
            beta = Some(bv);
            last = bi;
        }
    }
    Some(Found {
        last,
        x,
        epsilon,
        gamma,
        beta,
    })
}

/// Replaces every decomposed LayerNorm by one `LayerNorm` op; returns how many.
pub fn fuse_layernorm(g: &mut Graph) -> usize {
    let mut fused = 0;
    loop {
        let found = {
            let v = View::new(g);
            (0..g.nodes.len()).find_map(|i| match_at(&v, i).or_else(|| match_moments_at(&v, i)))
        };
        let Some(f) = found else { break };
        let rank = g.shape(f.x).len();
        let k = g.shape(f.x)[rank - 1];
        let name = g.nodes[f.last].name.clone();
        let gamma = f.gamma.unwrap_or_else(|| vec![1.0; k]);
        let gname = g.fresh_name(&format!("{name}/layernorm_scale"));
        let mut inputs = vec![f.x, g.add_const(gname, ConstData::from_f32(&[k], gamma))];
        if let Some(beta) = f.beta {
            let bname = g.fresh_name(&format!("{name}/layernorm_bias"));
            inputs.push(g.add_const(bname, ConstData::from_f32(&[k], beta)));
        }
        let out = g.nodes[f.last].outputs[0];
        // x and the constants exist before the last node of the pattern: it can take its place.
        g.nodes[f.last] = Node {
            name: format!("{name}/layernorm"),
            op: Op::LayerNorm {
                axis: rank - 1,
                epsilon: f.epsilon,
            },
            inputs,
            outputs: vec![out],
        };
        g.remove_dead();
        fused += 1;
    }
    fused
}

/// Folds a last-axis LayerNorm's constant gamma/beta into the FullyConnected layers that are its
/// only readers; returns how many LayerNorms were rewritten.
pub fn fold_layernorm_affine(g: &mut Graph) -> usize {
    let mut folded = 0;
    loop {
        let v = View::new(g);
        let found = g.nodes.iter().enumerate().find_map(|(i, n)| {
            let Op::LayerNorm { axis, .. } = n.op else {
                return None;
            };
            let x = n.inputs[0];
            let rank = g.shape(x).len();
            let k = *g.shape(x).last()?;
            if axis + 1 != rank || g.tensors[x].dtype != DType::F32 {
                return None;
            }
            let gamma = per_last_axis(g.const_data(*n.inputs.get(1)?)?, rank, k)?;
            let beta = match n.inputs.get(2) {
                Some(&b) => Some(per_last_axis(g.const_data(b)?, rank, k)?),
                None => None,
            };
            if gamma.iter().all(|&c| c == 1.0) && beta.is_none() {
                return None; // nothing to fold
            }
            let out = n.outputs[0];
            let readers = v.consumers(out);
            let all_dense = !readers.is_empty()
                && !g.outputs.contains(&out)
                && readers.iter().all(|&c| {
                    let c = &g.nodes[c];
                    matches!(c.op, Op::FullyConnected { .. })
                        && c.inputs[0] == out
                        && c.inputs[1] != out
                        && c.inputs.get(2) != Some(&out)
                        && g.const_data(c.inputs[1]).is_some_and(|w| {
                            w.dtype() == DType::F32 && w.shape().len() == 2 && w.shape()[1] == k
                        })
                        && c.inputs.get(2).is_none_or(|&b| {
                            g.const_data(b).is_some_and(|b| {
                                b.dtype() == DType::F32 && b.len() == g.shape(c.inputs[1])[0]
                            })
                        })
                });
            all_dense.then(|| (i, readers.to_vec(), gamma, beta))
        });
        drop(v);
        let Some((li, readers, gamma, beta)) = found else {
            break;
        };
        let mut readers = readers;
        readers.dedup();
        for ci in readers {
            let (wt, bt) = (g.nodes[ci].inputs[1], g.nodes[ci].inputs.get(2).copied());
            let w = g.const_data(wt).expect("checked").to_f32_vec();
            let n = g.shape(wt)[0];
            let k = gamma.len();
            let mut bias = match bt {
                Some(b) => g.const_data(b).expect("checked").to_f32_vec(),
                None => vec![0.0; n],
            };
            let mut w2 = w.clone();
            for (r, row) in w2.chunks_mut(k).enumerate() {
                if let Some(beta) = &beta {
                    // accumulate in f64: the fold must not add rounding of its own
                    let dot: f64 = w[r * k..(r + 1) * k]
                        .iter()
                        .zip(beta)
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum();
                    bias[r] = (bias[r] as f64 + dot) as f32;
                }
                for (wv, gv) in row.iter_mut().zip(&gamma) {
                    *wv *= gv;
                }
            }
            let name = g.nodes[ci].name.clone();
            let wname = g.fresh_name(&format!("{name}/weights_layernorm_folded"));
            let new_w = g.add_const(wname, ConstData::from_f32(&[n, k], w2));
            g.nodes[ci].inputs[1] = new_w;
            if beta.is_some() || bt.is_some() {
                let bname = g.fresh_name(&format!("{name}/bias_layernorm_folded"));
                let new_b = g.add_const(bname, ConstData::from_f32(&[n], bias));
                g.nodes[ci].inputs.truncate(2);
                g.nodes[ci].inputs.push(new_b);
            }
        }
        let k = gamma.len();
        let oname = g.fresh_name(&format!("{}/unit_scale", g.nodes[li].name));
        let ones = g.add_const(oname, ConstData::from_f32(&[k], vec![1.0; k]));
        g.nodes[li].inputs.truncate(1);
        g.nodes[li].inputs.push(ones);
        g.remove_dead();
        folded += 1;
    }
    folded
}

#[cfg(test)]
#[path = "layernorm_tests.rs"]
mod tests;
