//! Tests of constant evaluation (`eval.rs`): each op against hand-computed values.

#![allow(clippy::excessive_precision)]

use super::*;
use crate::ir::Activation;

fn f(shape: &[usize], v: &[f32]) -> ConstData {
    ConstData::from_f32(shape, v.to_vec())
}
fn i(shape: &[usize], v: &[i64]) -> ConstData {
    ConstData::from_i64(shape, v.to_vec())
}
fn run(op: Op, inputs: &[&ConstData]) -> Vec<ConstData> {
    eval(&op, inputs).expect("evaluated").expect("ok")
}
fn run1(op: Op, inputs: &[&ConstData]) -> ConstData {
    run(op, inputs).remove(0)
}
fn bin(op: BinaryOp) -> Op {
    Op::Binary {
        op,
        activation: Activation::None,
    }
}

#[test]
fn binary_broadcast_float_and_int() {
    let a = f(&[2, 1], &[1.0, 2.0]);
    let b = f(&[3], &[10.0, 20.0, 30.0]);
    assert_eq!(
        run1(bin(BinaryOp::Add), &[&a, &b]),
        f(&[2, 3], &[11., 21., 31., 12., 22., 32.])
    );
    assert_eq!(
        run1(bin(BinaryOp::Sub), &[&b, &a]),
        f(&[2, 3], &[9., 19., 29., 8., 18., 28.])
    );
    let x = i(&[3], &[7, -7, 9]);
    let y = i(&[], &[2]);
    assert_eq!(run1(bin(BinaryOp::Div), &[&x, &y]), i(&[3], &[3, -3, 4]));
    assert_eq!(run1(bin(BinaryOp::Mul), &[&x, &y]), i(&[3], &[14, -14, 18]));
    assert_eq!(run1(bin(BinaryOp::Pow), &[&x, &y]), i(&[3], &[49, 49, 81]));
    assert_eq!(run1(bin(BinaryOp::Max), &[&x, &y]), i(&[3], &[7, 2, 9]));
    assert_eq!(run1(bin(BinaryOp::Min), &[&x, &y]), i(&[3], &[2, -7, 2]));
    assert_eq!(
        run1(bin(BinaryOp::SquaredDifference), &[&x, &y]),
        i(&[3], &[25, 81, 49])
    );
    let zero = i(&[], &[0]);
    assert!(eval(&bin(BinaryOp::Div), &[&x, &zero]).unwrap().is_err());
    let bad = f(&[2], &[1.0, 2.0]);
    assert!(eval(&bin(BinaryOp::Add), &[&b, &bad]).unwrap().is_err());
    // int32 stays int32
    let x32 = ConstData::from_i32(&[2], vec![1, 2]);
    assert_eq!(
        run1(bin(BinaryOp::Add), &[&x32, &x32]),
        ConstData::from_i32(&[2], vec![2, 4])
    );
}

#[test]
fn unary_ops() {
    let x = f(&[4], &[-2.0, -0.5, 0.0, 3.0]);
    let close = |d: ConstData, want: &[f32]| {
        let v = d.to_f32_vec();
        for (a, b) in v.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{v:?} vs {want:?}");
        }
    };
    close(run1(Op::Unary(UnaryOp::Relu), &[&x]), &[0., 0., 0., 3.]);
    close(run1(Op::Unary(UnaryOp::Abs), &[&x]), &[2., 0.5, 0., 3.]);
    close(run1(Op::Unary(UnaryOp::Neg), &[&x]), &[2., 0.5, 0., -3.]);
    close(run1(Op::Unary(UnaryOp::Floor), &[&x]), &[-2., -1., 0., 3.]);
    close(
        run1(Op::Unary(UnaryOp::LeakyRelu { alpha: 0.1 }), &[&x]),
        &[-0.2, -0.05, 0., 3.],
    );
    close(
        run1(Op::Unary(UnaryOp::Sigmoid), &[&x]),
        &[0.11920292, 0.37754067, 0.5, 0.95257413],
    );
    close(
        run1(Op::Unary(UnaryOp::HardSwish), &[&x]),
        &[-0.33333334, -0.20833333, 0., 3.],
    );
    close(
        run1(Op::Unary(UnaryOp::Erf), &[&x]),
        &[-0.99532227, -0.52049988, 0., 0.99997791],
    );
    close(
        run1(Op::Unary(UnaryOp::Gelu { approximate: false }), &[&x]),
        &[-0.04550026, -0.15426877, 0., 2.99595031],
    );
    close(
        run1(Op::Unary(UnaryOp::Gelu { approximate: true }), &[&x]),
        &[-0.04540231, -0.15428599, 0., 2.99636261],
    );
    let p = f(&[2], &[4.0, 1.0]);
    close(run1(Op::Unary(UnaryOp::Sqrt), &[&p]), &[2., 1.]);
    close(run1(Op::Unary(UnaryOp::Rsqrt), &[&p]), &[0.5, 1.]);
    close(run1(Op::Unary(UnaryOp::Log), &[&p]), &[4f32.ln(), 0.]);
    close(
        run1(Op::Unary(UnaryOp::Exp), &[&p]),
        &[4f32.exp(), 1f32.exp()],
    );
    close(
        run1(Op::Unary(UnaryOp::Tanh), &[&p]),
        &[4f32.tanh(), 1f32.tanh()],
    );
    let n = i(&[2], &[-3, 4]);
    assert_eq!(run1(Op::Unary(UnaryOp::Neg), &[&n]), i(&[2], &[3, -4]));
    assert_eq!(run1(Op::Unary(UnaryOp::Abs), &[&n]), i(&[2], &[3, 4]));
}

#[test]
fn clip_hardsigmoid_prelu() {
    let x = f(&[3], &[-2.0, 0.5, 9.0]);
    assert_eq!(
        run1(Op::Clip { min: 0.0, max: 6.0 }, &[&x]),
        f(&[3], &[0.0, 0.5, 6.0])
    );
    assert_eq!(
        run1(
            Op::Clip {
                min: f32::NEG_INFINITY,
                max: 1.0
            },
            &[&x]
        ),
        f(&[3], &[-2.0, 0.5, 1.0])
    );
    let n = i(&[3], &[-5, 2, 10]);
    assert_eq!(
        run1(
            Op::Clip {
                min: -1.5,
                max: f32::INFINITY
            },
            &[&n]
        ),
        i(&[3], &[-1, 2, 10])
    );
    assert_eq!(
        run1(
            Op::HardSigmoid {
                alpha: 0.25,
                beta: 0.5
            },
            &[&x]
        ),
        f(&[3], &[0.0, 0.625, 1.0])
    );
    let s = f(&[1], &[0.5]);
    assert_eq!(run1(Op::PRelu, &[&x, &s]), f(&[3], &[-1.0, 0.5, 9.0]));
}

#[test]
fn softmax_lanes() {
    let x = f(&[2, 2], &[0.0, 0.0, 1.0, 1.0]);
    assert_eq!(
        run1(Op::Softmax { axis: 1 }, &[&x]),
        f(&[2, 2], &[0.5, 0.5, 0.5, 0.5])
    );
    let l = run1(Op::LogSoftmax { axis: 0 }, &[&x]).to_f32_vec();
    assert!((l[0] - (-1.3132616)).abs() < 1e-5 && (l[2] - (-0.3132616)).abs() < 1e-5);
}

#[test]
fn reshape_transpose() {
    let x = i(&[2, 3], &[0, 1, 2, 3, 4, 5]);
    assert_eq!(
        run1(Op::Reshape { shape: vec![3, 2] }, &[&x]),
        i(&[3, 2], &[0, 1, 2, 3, 4, 5])
    );
    assert!(eval(&Op::Reshape { shape: vec![4] }, &[&x])
        .unwrap()
        .is_err());
    assert_eq!(
        run1(Op::Transpose { perm: vec![1, 0] }, &[&x]),
        i(&[3, 2], &[0, 3, 1, 4, 2, 5])
    );
    assert!(eval(&Op::Transpose { perm: vec![0, 0] }, &[&x])
        .unwrap()
        .is_err());
}

#[test]
fn concat_split() {
    let a = i(&[1], &[1]);
    let b = i(&[2], &[2, 3]);
    let c = run1(Op::Concat { axis: 0 }, &[&a, &b]);
    assert_eq!(c, i(&[3], &[1, 2, 3]));
    assert!(eval(&Op::Concat { axis: 1 }, &[&a, &b]).unwrap().is_err());
    let parts = run(
        Op::Split {
            axis: 0,
            sizes: vec![2, 1],
        },
        &[&c],
    );
    assert_eq!(parts, vec![i(&[2], &[1, 2]), i(&[1], &[3])]);
    assert!(eval(
        &Op::Split {
            axis: 0,
            sizes: vec![2, 2]
        },
        &[&c]
    )
    .unwrap()
    .is_err());
}

#[test]
fn slice_positive_and_negative_steps() {
    let x = i(&[2, 5], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let s = |b: Vec<i64>, e: Vec<i64>, st: Vec<i64>| Op::Slice {
        begins: b,
        ends: e,
        steps: st,
    };
    assert_eq!(
        run1(s(vec![0, 1], vec![2, i64::MAX], vec![1, 2]), &[&x]),
        i(&[2, 2], &[1, 3, 6, 8])
    );
    assert_eq!(
        run1(s(vec![0, -1], vec![1, i64::MIN], vec![1, -1]), &[&x]),
        i(&[1, 5], &[4, 3, 2, 1, 0])
    );
    assert_eq!(
        run1(s(vec![-1, 4], vec![-3, 0], vec![-1, -2]), &[&x]),
        i(&[2, 2], &[9, 7, 4, 2])
    );
    assert_eq!(
        run1(s(vec![0, 3], vec![2, 3], vec![1, 1]), &[&x]).shape(),
        vec![2, 0]
    );
}

#[test]
fn gather_const_indices() {
    let x = i(&[2, 3], &[0, 1, 2, 3, 4, 5]);
    let idx = i(&[], &[-1]);
    assert_eq!(run1(Op::Gather { axis: 1 }, &[&x, &idx]), i(&[2], &[2, 5]));
    let idx2 = i(&[2, 1], &[1, 0]);
    assert_eq!(
        run1(Op::Gather { axis: 0 }, &[&x, &idx2]),
        i(&[2, 1, 3], &[3, 4, 5, 0, 1, 2])
    );
    let bad = i(&[1], &[3]);
    assert!(eval(&Op::Gather { axis: 0 }, &[&x, &bad]).unwrap().is_err());
}

#[test]
fn expand_tile() {
    let x = f(&[2, 1], &[1.0, 2.0]);
    assert_eq!(
        run1(Op::Expand { shape: vec![2, 2] }, &[&x]),
        f(&[2, 2], &[1., 1., 2., 2.])
    );
    assert_eq!(
        run1(
            Op::Expand {
                shape: vec![2, 1, 3]
            },
            &[&x]
        )
        .shape(),
        vec![2, 2, 3]
    );
    assert_eq!(
        run1(Op::Tile { reps: vec![2, 3] }, &[&x]),
        f(&[4, 3], &[1., 1., 1., 2., 2., 2., 1., 1., 1., 2., 2., 2.])
    );
    assert!(eval(
        &Op::Expand {
            shape: vec![1 << 40]
        },
        &[&x]
    )
    .is_none());
}

#[test]
fn cast_and_reduce() {
    let x = f(&[2, 3], &[1.5, -2.7, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        run1(Op::Cast { to: DType::I64 }, &[&x]),
        i(&[2, 3], &[1, -2, 3, 4, 5, 6])
    );
    let r = |op, axes: Vec<usize>, keep| Op::Reduce {
        op,
        axes,
        keep_dims: keep,
    };
    let y = f(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    assert_eq!(
        run1(r(ReduceOp::Sum, vec![1], false), &[&y]),
        f(&[2], &[6., 15.])
    );
    assert_eq!(
        run1(r(ReduceOp::Mean, vec![0, 1], true), &[&y]),
        f(&[1, 1], &[3.5])
    );
    assert_eq!(
        run1(r(ReduceOp::Max, vec![0], false), &[&y]),
        f(&[3], &[4., 5., 6.])
    );
    assert_eq!(
        run1(r(ReduceOp::Min, vec![1], true), &[&y]),
        f(&[2, 1], &[1., 4.])
    );
    assert_eq!(
        run1(r(ReduceOp::Prod, vec![1], false), &[&y]),
        f(&[2], &[6., 120.])
    );
    let n = i(&[3], &[2, 3, 4]);
    assert_eq!(
        run1(r(ReduceOp::Prod, vec![0], false), &[&n]),
        i(&[], &[24])
    );
    assert_eq!(
        run1(
            Op::ArgMax {
                axis: 1,
                keep_dims: false
            },
            &[&y]
        ),
        i(&[2], &[2, 2])
    );
}

#[test]
fn pad_modes() {
    let x = f(&[3], &[1., 2., 3.]);
    let p = |mode, b, a| Op::Pad {
        before: vec![b],
        after: vec![a],
        mode,
        value: 9.0,
    };
    assert_eq!(
        run1(p(PadMode::Constant, 1, 2), &[&x]),
        f(&[6], &[9., 1., 2., 3., 9., 9.])
    );
    assert_eq!(
        run1(p(PadMode::Reflect, 2, 2), &[&x]),
        f(&[7], &[3., 2., 1., 2., 3., 2., 1.])
    );
    assert_eq!(
        run1(p(PadMode::Symmetric, 2, 1), &[&x]),
        f(&[6], &[2., 1., 1., 2., 3., 3.])
    );
    assert!(eval(&p(PadMode::Reflect, 3, 0), &[&x]).unwrap().is_err());
    let m = i(&[2, 2], &[1, 2, 3, 4]);
    let op = Op::Pad {
        before: vec![1, 0],
        after: vec![0, 1],
        mode: PadMode::Constant,
        value: 0.0,
    };
    assert_eq!(run1(op, &[&m]), i(&[3, 3], &[0, 0, 0, 1, 2, 0, 3, 4, 0]));
}

#[test]
fn not_evaluated() {
    let x = f(&[1], &[1.0]);
    assert!(eval(
        &Op::MatMul {
            transpose_a: false,
            transpose_b: false
        },
        &[&x, &x]
    )
    .is_none());
    assert!(eval(&Op::Reshape { shape: vec![1] }, &[]).is_none());
}
