//! Int16 ADD and SUB with `pot_scale_int16`: LiteRT's shift-only kernel when every scale is a
//! power of two, its general kernel otherwise, and the files it refuses.
//!
//! The expected values are LiteRT's (ai-edge-litert 2.3.0, reference and optimized kernels
//! alike) on the same models and inputs. They differ from the general kernel's by one step where
//! the shifted input rounds a tie (`-1000 + 6/4` is -998 here, -999 in the general kernel).
mod common;

use common::{opts, ModelBuilder, Opts, F};
use literun::schema::{BuiltinOperator as B, TensorType};
use literun::{AlignedBytes, Interpreter, Model};

const A: [i16; 16] = [
    1000, -1000, 32767, -32768, 20000, -20000, 7, -7, 0, 1, -1, 12345, 32000, -32000, 5, -5,
];
const B_: [i16; 16] = [
    2, 6, -2, -6, 32767, -32768, 10, -10, 3, 1, -1, 30001, 32767, -32767, 4097, -4098,
];
const P: f32 = 1.0 / 1024.0; // 2^-10
const Q: f32 = 1.0 / 4096.0; // 2^-12

/// ADD/SUB options: the fused activation, and `pot_scale_int16` when given.
fn options(code: B, act: i8, pot: Option<bool>) -> Option<Opts> {
    let tag = if code == B::SUB { 28 } else { 11 };
    let mut fields = vec![F::I8(4, act)];
    if let Some(p) = pot {
        fields.push(F::Bool(6, p));
    }
    opts(tag, fields)
}

fn model(code: B, shapes: [&[i32]; 3], scales: [f32; 3], o: Option<Opts>) -> AlignedBytes {
    let mut m = ModelBuilder::new();
    let t: Vec<i32> = ["a", "b", "y"]
        .iter()
        .zip(shapes.iter().zip(scales))
        .map(|(n, (s, q))| m.q(n, s, TensorType::INT16, q, 0))
        .collect();
    m.op(code, &t[..2], &t[2..], o);
    m.finish(&t[..2], &t[2..])
}

fn run(bytes: &AlignedBytes, a: &[i16], b: &[i16]) -> Vec<i16> {
    let model = Model::from_bytes(bytes).unwrap();
    let mut it = Interpreter::new(&model).unwrap();
    for (k, x) in [a, b].iter().enumerate() {
        let raw: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        it.input_mut(k).unwrap().bytes_mut().copy_from_slice(&raw);
    }
    it.invoke().unwrap();
    let out = it.output(0).unwrap().bytes().to_vec();
    out.chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

const ADD_POT: [i16; 16] = [
    1001, -998, 32766, -32768, 28192, -28192, 10, -10, 1, 1, -1, 19845, 32767, -32768, 1029, -1030,
];
const ADD_GENERAL: [i16; 16] = [
    1001, -999, 32767, -32768, 28192, -28192, 10, -10, 1, 1, -1, 19845, 32767, -32768, 1029, -1030,
];

#[test]
fn add_shifts_the_finer_input_and_rounds_ties_as_litert() {
    let shapes: [&[i32]; 3] = [&[16], &[16], &[16]];
    let pot = model(B::ADD, shapes, [P, Q, P], options(B::ADD, 0, Some(true)));
    assert_eq!(run(&pot, &A, &B_), ADD_POT);
    // A scale within a thousandth of an octave of 2^-10 counts as 2^-10 (LiteRT's CheckedLog2);
    // options without the field take the schema's default, true.
    let near = model(B::ADD, shapes, [P * 1.0005, Q, P], options(B::ADD, 0, None));
    assert_eq!(run(&near, &A, &B_), ADD_POT);
    // RELU clamps at zero.
    let relu = model(B::ADD, shapes, [P, Q, P], options(B::ADD, 1, Some(true)));
    let want: Vec<i16> = ADD_POT.iter().map(|&v| v.max(0)).collect();
    assert_eq!(run(&relu, &A, &B_), want);
}

#[test]
fn add_takes_the_general_kernel_without_the_option() {
    let shapes: [&[i32]; 3] = [&[16], &[16], &[16]];
    // Written false, or no options at all (LiteRT then reads false; the schema's default,
    // true, applies when the options are there without the field).
    for o in [options(B::ADD, 0, Some(false)), None] {
        assert_eq!(
            run(&model(B::ADD, shapes, [P, Q, P], o), &A, &B_),
            ADD_GENERAL
        );
    }
}

#[test]
fn sub_shifts_either_input_and_broadcasts() {
    let shapes: [&[i32]; 3] = [&[16], &[16], &[16]];
    let sub = model(B::SUB, shapes, [Q, P, P], options(B::SUB, 0, Some(true)));
    let want = [
        248, -256, 8194, -8186, -27767, 27768, -8, 8, -3, -1, 1, -26915, -24767, 24767, -4096, 4097,
    ];
    assert_eq!(run(&sub, &A, &B_), want);
    let shapes: [&[i32]; 3] = [&[1, 1, 4], &[1, 4, 4], &[1, 4, 4]];
    let bc = model(
        B::SUB,
        shapes,
        [P, 1.0 / 8192.0, P],
        options(B::SUB, 0, None),
    );
    let want = [
        1000, -1001, 32767, -32767, -3096, 3096, 32766, -32767, 1000, -1000, 32767, -32768, -3096,
        3096, 32255, -32256,
    ];
    assert_eq!(run(&bc, &A[..4], &B_), want);
}

/// Interpreter creation must fail (not panic) with a message containing `needle`.
fn refused(bytes: &AlignedBytes, needle: &str) {
    let model = Model::from_bytes(bytes).unwrap();
    let e = Interpreter::new(&model).err().expect("accepted");
    assert!(e.to_string().contains(needle), "{e}");
}

#[test]
fn files_litert_refuses_are_errors() {
    let same: [&[i32]; 3] = [&[16], &[16], &[16]];
    let pot = |c| options(c, 0, Some(true));
    // Both inputs would need a shift; an input coarser than the output would shift left.
    refused(
        &model(B::ADD, same, [Q, Q, P], pot(B::ADD)),
        "LiteRT shifts one input",
    );
    refused(
        &model(B::SUB, same, [P * 2.0, P, P], pot(B::SUB)),
        "only shifts right",
    );
    refused(
        &model(B::ADD, same, [P / 65536.0, P, P], pot(B::ADD)),
        "2^15",
    );
    // LiteRT's power-of-two ADD reads both inputs elementwise: it has no broadcasting kernel.
    let bc: [&[i32]; 3] = [&[1, 1, 4], &[1, 4, 4], &[1, 4, 4]];
    refused(
        &model(B::ADD, bc, [P, Q, P], pot(B::ADD)),
        "cannot broadcast",
    );
}
