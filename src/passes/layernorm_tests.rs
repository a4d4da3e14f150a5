//! Tests of `layernorm`: the patterns that fold, those that must not, and the affine fold.

use super::*;
use crate::ir::eval;

fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: Activation::None,
    }
}

struct B {
    g: Graph,
}

impl B {
    fn node(&mut self, op: Op, inputs: Vec<TensorId>, shape: &[usize]) -> TensorId {
        let name = format!("t{}", self.g.tensors.len());
        let t = self.g.add_tensor(name.clone(), shape.to_vec(), DType::F32);
        self.g.nodes.push(Node {
            name,
            op,
            inputs,
            outputs: vec![t],
        });
        t
    }
    fn c(&mut self, shape: &[usize], v: Vec<f32>) -> TensorId {
        let name = format!("c{}", self.g.tensors.len());
        self.g.add_const(name, ConstData::from_f32(shape, v))
    }
}

fn mean(axis: usize) -> Op {
    Op::Reduce {
        op: ReduceOp::Mean,
        axes: vec![axis],
        keep_dims: true,
    }
}

/// The PyTorch decomposition over axis `axis` of [2, 3, 4], with gamma and beta.
fn decomposed(axis: usize, square_by_mul: bool) -> Graph {
    let mut b = B {
        g: Graph::default(),
    };
    let shape = [2, 3, 4];
    let mut red = shape.to_vec();
    red[axis] = 1;
    let x = b.g.add_tensor("x", shape.to_vec(), DType::F32);
    let m = b.node(mean(axis), vec![x], &red);
    let d = b.node(bin(BinaryOp::Sub), vec![x, m], &shape);
    let sq = if square_by_mul {
        b.node(bin(BinaryOp::Mul), vec![d, d], &shape)
    } else {
        let two = b.c(&[], vec![2.0]);
        b.node(bin(BinaryOp::Pow), vec![d, two], &shape)
    };
    let v = b.node(mean(axis), vec![sq], &red);
    let eps = b.c(&[], vec![1e-5]);
    let ve = b.node(bin(BinaryOp::Add), vec![v, eps], &red);
    let s = b.node(Op::Unary(UnaryOp::Sqrt), vec![ve], &red);
    let n = b.node(bin(BinaryOp::Div), vec![d, s], &shape);
    let gamma = b.c(&[4], vec![0.5, 1.0, 1.5, 2.0]);
    let y = b.node(bin(BinaryOp::Mul), vec![n, gamma], &shape);
    let beta = b.c(&[4], vec![0.1, -0.2, 0.3, 0.0]);
    let y = b.node(bin(BinaryOp::Add), vec![beta, y], &shape);
    b.g.inputs = vec![x];
    b.g.outputs = vec![y];
    b.g
}

/// Runs a small graph: `ir::eval` for the elementwise ops, LayerNorm and dense by hand.
fn run(g: &Graph, x: &ConstData) -> Vec<f32> {
    let mut vals: HashMap<TensorId, ConstData> = HashMap::new();
    vals.insert(g.inputs[0], x.clone());
    let get = |vals: &HashMap<TensorId, ConstData>, t: TensorId| {
        g.const_data(t).or(vals.get(&t)).expect("value").clone()
    };
    for n in &g.nodes {
        let ins: Vec<ConstData> = n.inputs.iter().map(|&t| get(&vals, t)).collect();
        let shape = g.shape(n.outputs[0]).to_vec();
        let out = match &n.op {
            Op::LayerNorm { epsilon, .. } => {
                let xs = ins[0].to_f32_vec();
                let k = *shape.last().unwrap();
                let gamma = ins[1].to_f32_vec();
                let beta = ins.get(2).map_or(vec![0.0; k], |b| b.to_f32_vec());
                let mut y = vec![];
                for row in xs.chunks(k) {
                    let m = row.iter().sum::<f32>() / k as f32;
                    let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f32>() / k as f32;
                    for (i, v) in row.iter().enumerate() {
                        y.push((v - m) / (var + epsilon).sqrt() * gamma[i] + beta[i]);
                    }
                }
                ConstData::from_f32(&shape, y)
            }
            Op::FullyConnected { .. } => {
                let xs = ins[0].to_f32_vec();
                let w = ins[1].to_f32_vec();
                let nout = *shape.last().unwrap();
                let k = w.len() / nout;
                let b = ins.get(2).map_or(vec![0.0; nout], |b| b.to_f32_vec());
                let mut y = vec![];
                for row in xs.chunks(k) {
                    for o in 0..nout {
                        y.push(b[o] + (0..k).map(|i| row[i] * w[o * k + i]).sum::<f32>());
                    }
                }
                ConstData::from_f32(&shape, y)
            }
            op => {
                let refs: Vec<&ConstData> = ins.iter().collect();
                eval::eval(op, &refs)
                    .expect("evaluable")
                    .expect("ok")
                    .remove(0)
            }
        };
        vals.insert(n.outputs[0], out);
    }
    get(&vals, g.outputs[0]).to_f32_vec()
}

fn input() -> ConstData {
    ConstData::from_f32(
        &[2, 3, 4],
        (0..24).map(|i| ((i * 7) % 11) as f32 - 4.0).collect(),
    )
}

fn assert_close(a: &[f32], b: &[f32]) {
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{a:?} vs {b:?}");
    }
}

/// Fuses `g` into one last-axis LayerNorm with `epsilon` computing what `g` computed.
fn assert_becomes_one_layernorm(mut g: Graph, epsilon: f32) -> Graph {
    let want = run(&g, &input());
    assert_eq!(fuse_layernorm(&mut g), 1);
    assert_eq!(g.nodes.len(), 1, "{:?}", g.nodes);
    assert_eq!(g.nodes[0].op, Op::LayerNorm { axis: 2, epsilon });
    assert_close(&run(&g, &input()), &want);
    g
}

/// JAX's LayerNorm through jax2tf/tf2onnx: from the moments, with Reshapes back to [.., 1].
fn from_moments() -> Graph {
    let mut b = B {
        g: Graph::default(),
    };
    let (shape, red, kept) = ([2, 3, 4], [2, 3], [2, 3, 1]);
    let sum = Op::Reduce {
        op: ReduceOp::Sum,
        axes: vec![2],
        keep_dims: false,
    };
    let reshape = || Op::Reshape {
        shape: vec![2, 3, 1],
    };
    let x = b.g.add_tensor("x", shape.to_vec(), DType::F32);
    let inv_k = b.c(&[], vec![0.25]);
    let s1 = b.node(sum.clone(), vec![x], &red);
    let m = b.node(bin(BinaryOp::Mul), vec![s1, inv_k], &red);
    let sq = b.node(bin(BinaryOp::Mul), vec![x, x], &shape);
    let s2 = b.node(sum, vec![sq], &red);
    let e2 = b.node(bin(BinaryOp::Mul), vec![s2, inv_k], &red);
    let mm = b.node(bin(BinaryOp::Mul), vec![m, m], &red);
    let v0 = b.node(bin(BinaryOp::Sub), vec![e2, mm], &red);
    let zero = b.c(&[], vec![0.0]);
    let v = b.node(bin(BinaryOp::Max), vec![zero, v0], &red);
    let vr = b.node(reshape(), vec![v], &kept);
    let eps = b.c(&[], vec![1e-6]);
    let ve = b.node(bin(BinaryOp::Add), vec![vr, eps], &kept);
    let sd = b.node(Op::Unary(UnaryOp::Sqrt), vec![ve], &kept);
    let one = b.c(&[], vec![1.0]);
    let r = b.node(bin(BinaryOp::Div), vec![one, sd], &kept);
    let gamma = b.c(&[1, 1, 4], vec![0.5, 1.0, 1.5, 2.0]);
    let rg = b.node(bin(BinaryOp::Mul), vec![r, gamma], &shape);
    let mr = b.node(reshape(), vec![m], &kept);
    let d = b.node(bin(BinaryOp::Sub), vec![x, mr], &shape);
    let y = b.node(bin(BinaryOp::Mul), vec![d, rg], &shape);
    let beta = b.c(&[1, 1, 4], vec![0.1, -0.2, 0.3, 0.0]);
    let y = b.node(bin(BinaryOp::Add), vec![y, beta], &shape);
    b.g.inputs = vec![x];
    b.g.outputs = vec![y];
    b.g
}

#[test]
fn the_jax2tf_moments_form_becomes_one_layernorm() {
    assert_becomes_one_layernorm(from_moments(), 1e-6);
    // Over another axis than the last it is not a LayerNorm: left alone.
    let mut g = from_moments();
    if let Op::Reduce { axes, .. } = &mut g.nodes[0].op {
        *axes = vec![1];
    }
    assert_eq!(fuse_layernorm(&mut g), 0);
}

#[test]
fn the_pytorch_decomposition_becomes_one_layernorm() {
    for by_mul in [false, true] {
        let g = assert_becomes_one_layernorm(decomposed(2, by_mul), 1e-5);
        assert_eq!(g.nodes[0].inputs.len(), 3);
    }
}

#[test]
fn a_non_last_axis_or_a_shared_intermediate_is_left_alone() {
    let mut g = decomposed(1, false);
    assert_eq!(fuse_layernorm(&mut g), 0);
    // d is also a graph output: the pattern's values are needed elsewhere.
    let mut g = decomposed(2, false);
    let d = g.nodes[1].outputs[0];
    g.outputs.push(d);
    assert_eq!(fuse_layernorm(&mut g), 0);
}

#[test]
fn a_runtime_epsilon_is_left_alone() {
    let mut g = decomposed(2, false);
    let eps_node = g
        .nodes
        .iter()
        .position(|n| is_bin(n, BinaryOp::Add))
        .unwrap();
    let e = g.add_tensor("eps", vec![], DType::F32);
    g.nodes[eps_node].inputs[1] = e;
    g.inputs.push(e);
    assert_eq!(fuse_layernorm(&mut g), 0);
}

#[test]
fn gamma_and_beta_fold_into_the_dense_readers() {
    let mut g = decomposed(2, false);
    let y = g.outputs[0];
    let w = g.add_const(
        "w",
        ConstData::from_f32(&[2, 4], vec![1., 2., 3., 4., -1., 0.5, 0., 2.]),
    );
    let bias = g.add_const("b", ConstData::from_f32(&[2], vec![0.25, -0.5]));
    let z = g.add_tensor("z", vec![2, 3, 2], DType::F32);
    g.nodes.push(Node {
        name: "fc".into(),
        op: Op::FullyConnected {
            activation: Activation::None,
        },
        inputs: vec![y, w, bias],
        outputs: vec![z],
    });
    g.outputs = vec![z];
    let want = run(&g, &input());
    assert_eq!(fuse_layernorm(&mut g), 1);
    assert_eq!(fold_layernorm_affine(&mut g), 1);
    assert_eq!(
        fold_layernorm_affine(&mut g),
        0,
        "a second run finds nothing"
    );
    let ln = &g.nodes[0];
    assert_eq!(ln.inputs.len(), 2);
    assert_eq!(
        g.const_data(ln.inputs[1]).unwrap().to_f32_vec(),
        vec![1.0; 4]
    );
    assert_close(&run(&g, &input()), &want);
}
